// A push topic's target: its JSON read and written (push_target.h).
#include "delivery/push_target.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <cctype>
#include <memory>

#include "delayq/duration.h"
#include "delayq/engine.h"
#include "delivery/outbound.h"
#include "delivery/webhook.h"

namespace delayq::delivery {

namespace {

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

Status Bad(std::string_view field, std::string_view why) {
  return Status::InvalidArgument("push target: '" + std::string(field) + "' " + std::string(why));
}

bool IsHeaderNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

// Headers delayqd sets itself, which a target may not replace.
bool IsOwnHeader(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lower.starts_with("webhook-") || lower.starts_with("delayq-") ||
         lower == "content-length" || lower == "host" || lower == "transfer-encoding" ||
         lower == "connection";
}

Status CheckHeader(std::string_view name, std::string_view value) {
  if (name.empty() || name.size() > 256 || !std::all_of(name.begin(), name.end(), IsHeaderNameChar))
    return Bad("headers", "names must be HTTP tokens of 1 to 256 bytes");
  if (IsOwnHeader(name))
    return Bad("headers", "may not set " + std::string(name) +
                              " (delayqd sets webhook-*, delayq-*, Host, Content-Length, "
                              "Connection and Transfer-Encoding)");
  if (value.size() > 8192 || value.find_first_of("\r\n", 0) != std::string_view::npos ||
      value.find('\0') != std::string_view::npos)
    return Bad("headers", "values must be one line of at most 8192 bytes");
  return Status::Ok();
}

Result<TimeMs> DurationField(const rapidjson::Value& v, std::string_view field) {
  if (v.IsInt64() && v.GetInt64() >= 0) return v.GetInt64();
  if (v.IsString()) {
    auto d = ParseDuration(std::string_view(v.GetString(), v.GetStringLength()));
    if (d.ok()) return d;
  }
  return Bad(field, "must be milliseconds or a duration like \"30s\"");
}

Result<uint32_t> CountField(const rapidjson::Value& v, std::string_view field, uint32_t lo,
                            uint32_t hi) {
  if (!v.IsUint() || v.GetUint() < lo || v.GetUint() > hi)
    return Bad(field,
               "must be an integer from " + std::to_string(lo) + " to " + std::to_string(hi));
  return v.GetUint();
}

void WriteFields(Writer& w, const PushTarget& t, bool header_values = true) {
  w.Key("topic");
  w.String(t.topic.data(), static_cast<rapidjson::SizeType>(t.topic.size()));
  w.Key("url");
  w.String(t.url.data(), static_cast<rapidjson::SizeType>(t.url.size()));
  w.Key("method");
  w.String(t.method.data(), static_cast<rapidjson::SizeType>(t.method.size()));
  w.Key("headers");
  w.StartObject();
  for (const auto& [name, value] : t.headers) {
    w.Key(name.data(), static_cast<rapidjson::SizeType>(name.size()));
    if (header_values) {
      w.String(value.data(), static_cast<rapidjson::SizeType>(value.size()));
    } else {
      w.String("***");
    }
  }
  w.EndObject();
  w.Key("timeout_ms");
  w.Int64(t.timeout_ms);
  w.Key("concurrency");
  w.Uint(t.concurrency);
  w.Key("rate");
  w.StartObject();
  w.Key("per_second");
  w.Uint(t.rate_per_second);
  w.Key("burst");
  w.Uint(t.burst);
  w.EndObject();
  w.Key("follow_redirects");
  w.Bool(t.follow_redirects);
  const std::string backoff =
      t.backoff.kind == Backoff::Kind::kNone ? "" : FormatBackoff(t.backoff);
  w.Key("backoff");
  if (backoff.empty())
    w.Null();
  else
    w.String(backoff.data(), static_cast<rapidjson::SizeType>(backoff.size()));
  w.Key("max_tries");
  w.Uint(t.max_tries);
}

}  // namespace

Result<PushTarget> ParsePushTarget(std::string_view topic, std::string_view json,
                                   std::string_view fallback_secret) {
  rapidjson::Document doc;
  doc.Parse(json.data(), json.size());
  if (doc.HasParseError() || !doc.IsObject())
    return Status::InvalidArgument("push target: the body must be a JSON object");
  PushTarget t;
  t.topic = std::string(topic);
  bool has_url = false, has_secret = false;
  // Through a const view: clang 14 finds the mutable iterators' != ambiguous.
  const rapidjson::Document& fields = doc;
  for (const auto& m : fields.GetObject()) {
    const std::string_view name(m.name.GetString(), m.name.GetStringLength());
    const rapidjson::Value& v = m.value;
    if (name == "topic") {
      if (!v.IsString() || std::string_view(v.GetString(), v.GetStringLength()) != topic)
        return Bad(name, "must be the topic of the route, when given");
    } else if (name == "url") {
      if (!v.IsString()) return Bad(name, "must be a string");
      auto u = ParsePushUrl(std::string_view(v.GetString(), v.GetStringLength()));
      if (!u.ok()) return Bad(name, u.status().message());
      t.url = u->url;
      has_url = true;
    } else if (name == "secret") {
      if (!v.IsString()) return Bad(name, "must be a string");
      t.secret.assign(v.GetString(), v.GetStringLength());
      if (!WebhookKey(t.secret).ok())
        return Bad(name, "must be whsec_ and the base64 of 24 to 64 bytes");
      has_secret = true;
    } else if (name == "method") {
      static constexpr std::string_view kMethods[] = {"GET", "POST", "PUT", "PATCH", "DELETE"};
      if (!v.IsString() ||
          std::find(std::begin(kMethods), std::end(kMethods),
                    std::string_view(v.GetString(), v.GetStringLength())) == std::end(kMethods))
        return Bad(name, "must be GET, POST, PUT, PATCH or DELETE");
      t.method = v.GetString();
    } else if (name == "headers") {
      if (!v.IsObject() || v.MemberCount() > kMaxPushHeaders)
        return Bad(name, "must be an object of at most 32 names and string values");
      for (const auto& h : v.GetObject()) {
        if (!h.value.IsString()) return Bad(name, "values must be strings");
        std::string hn(h.name.GetString(), h.name.GetStringLength());
        std::string hv(h.value.GetString(), h.value.GetStringLength());
        if (Status st = CheckHeader(hn, hv); !st.ok()) return st;
        t.headers.emplace_back(std::move(hn), std::move(hv));
      }
    } else if (name == "timeout_ms" || name == "timeout") {
      auto d = DurationField(v, name);
      if (!d.ok()) return d.status();
      if (*d < 1 || *d > kMaxPushTimeoutMs) return Bad(name, "must be from 1 ms to 15 minutes");
      t.timeout_ms = *d;
    } else if (name == "concurrency") {
      auto n = CountField(v, name, 1, 10'000);
      if (!n.ok()) return n.status();
      t.concurrency = *n;
    } else if (name == "rate") {
      if (v.IsNull()) continue;
      if (!v.IsObject()) return Bad(name, "must be {\"per_second\": n, \"burst\": n}");
      for (const auto& r : v.GetObject()) {
        const std::string_view rn(r.name.GetString(), r.name.GetStringLength());
        auto n = CountField(r.value, "rate." + std::string(rn), 0, 1'000'000);
        if (!n.ok()) return n.status();
        if (rn == "per_second")
          t.rate_per_second = *n;
        else if (rn == "burst")
          t.burst = *n;
        else
          return Bad("rate." + std::string(rn), "is not a field of a rate");
      }
    } else if (name == "follow_redirects") {
      if (!v.IsBool()) return Bad(name, "must be true or false");
      t.follow_redirects = v.GetBool();
    } else if (name == "backoff") {
      if (v.IsNull()) continue;
      if (!v.IsString())
        return Bad(name, "must be a back-off like \"30s,2m,10m\" or \"exp:1s:1h\"");
      auto b = ParseBackoff(std::string_view(v.GetString(), v.GetStringLength()));
      if (!b.ok()) return Bad(name, b.status().message());
      if (b->kind != Backoff::Kind::kNone) {
        if (Status st = ValidateBackoff(*b); !st.ok()) return Bad(name, st.message());
      }
      t.backoff = *b;
    } else if (name == "max_tries") {
      auto n = CountField(v, name, 0, 1'000'000);
      if (!n.ok()) return n.status();
      t.max_tries = *n;
    } else if (name == "secret_set") {
      // What GET shows, sent back as it was: nothing to take from it.
    } else {
      return Bad(name, "is not a field of a push target");
    }
  }
  if (!has_url) return Bad("url", "is required");
  if (!has_secret) {
    if (!fallback_secret.empty()) {
      t.secret = std::string(fallback_secret);
    } else {
      auto s = NewWebhookSecret();
      if (!s.ok()) return s.status();
      t.secret = *s;
    }
  }
  return t;
}

std::string StoredJson(const PushTarget& t) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  WriteFields(w, t);
  w.Key("secret");
  w.String(t.secret.data(), static_cast<rapidjson::SizeType>(t.secret.size()));
  w.EndObject();
  return sb.GetString();
}

std::string ShownJson(const PushTarget& t, bool header_values) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  WriteFields(w, t, header_values);
  w.Key("secret_set");
  w.Bool(!t.secret.empty());
  w.EndObject();
  return sb.GetString();
}

const PushTarget* PushTargets::Find(std::string_view topic) const {
  auto it = targets_.find(topic);
  return it == targets_.end() ? nullptr : &it->second;
}

void PushTargets::Set(PushTarget t) {
  auto it = targets_.find(t.topic);
  if (it != targets_.end() && it->second == t) return;
  std::string topic = t.topic;
  if (it == targets_.end())
    it = targets_.emplace(topic, std::move(t)).first;
  else
    it->second = std::move(t);
  Tell(topic, &it->second);
}

bool PushTargets::Remove(std::string_view topic) {
  auto it = targets_.find(topic);
  if (it == targets_.end()) return false;
  const std::string name = it->first;
  targets_.erase(it);
  Tell(name, nullptr);
  return true;
}

void PushTargets::Save(PushTarget t, std::function<void(Status)> done) {
  if (!persist_) {
    Set(std::move(t));
    return done(Status::Ok());
  }
  auto shared = std::make_shared<PushTarget>(std::move(t));
  persist_(shared->topic, shared.get(), [this, shared, done = std::move(done)](Status st) {
    if (st.ok()) Set(std::move(*shared));
    done(st);
  });
}

void PushTargets::Drop(std::string_view topic, std::function<void(Status)> done) {
  if (Find(topic) == nullptr)
    return done(Status::NotFound("topic '" + std::string(topic) + "' has no push target"));
  if (!persist_) {
    Remove(topic);
    return done(Status::Ok());
  }
  persist_(topic, nullptr, [this, name = std::string(topic), done = std::move(done)](Status st) {
    if (st.ok()) Remove(name);
    done(st);
  });
}

void PushTargets::Tell(std::string_view topic, const PushTarget* now) {
  for (const Listener& l : listeners_) l(topic, now);
}

}  // namespace delayq::delivery
