// What the HTTP API reads from requests (see http_input.h): names, keys and
// ids checked, and a put's job and a clear's states read from JSON.
#include "server/http_input.h"

#include <algorithm>
#include <charconv>

#include "delayq/duration.h"
#include "delayq/text.h"
#include "server/http_json.h"

namespace delayq::server {

namespace {

// A duration in a back-off list: a number of ms or a string like "4m".
Result<TimeMs> DurationValue(const rapidjson::Value& v) {
  if (v.IsInt64() && v.GetInt64() >= 0 && v.GetInt64() <= kMaxDelayMs) return v.GetInt64();
  if (v.IsString()) return ParseDuration(std::string_view(v.GetString(), v.GetStringLength()));
  return Status::InvalidArgument("a back-off delay must be ms or a duration like \"4m\"");
}

Result<Backoff> ParseBackoffValue(const rapidjson::Value& v) {
  if (v.IsString()) return ParseBackoff(std::string_view(v.GetString(), v.GetStringLength()));
  if (v.IsArray()) {
    if (v.Empty() || v.Size() > 64)
      return Status::InvalidArgument("'backoff' as a list takes 1 to 64 delays");
    std::vector<TimeMs> delays;
    for (const auto& e : v.GetArray()) {
      auto d = DurationValue(e);
      if (!d.ok()) return d.status();
      delays.push_back(*d);
    }
    return Backoff::List(std::move(delays));
  }
  if (v.IsObject()) {
    Fields f(v, "backoff: ");
    int64_t base = -1, cap = -1;
    if (Status st = f.Int("base_ms", 1, kMaxDelayMs, &base); !st.ok()) return st;
    if (Status st = f.Int("cap_ms", 1, kMaxDelayMs, &cap); !st.ok()) return st;
    if (Status st = f.Unknown(); !st.ok()) return st;
    if (base < 0 || cap < 0 || cap < base)
      return Status::InvalidArgument("'backoff' as an object needs base_ms <= cap_ms");
    return Backoff::Exponential(base, cap);
  }
  return Status::InvalidArgument(
      "'backoff' must be a list of delays, {\"base_ms\":..,\"cap_ms\":..}, or a spec string");
}

}  // namespace

bool IsValidKey(std::string_view key) {
  if (key.empty() || key.size() > kMaxKeyLength) return false;
  for (char c : key)
    if (c <= 0x20 || c >= 0x7f) return false;
  return true;
}

Status CheckTopic(std::string_view topic) {
  if (IsValidTopicName(topic)) return Status::Ok();
  return Status::InvalidArgument("bad topic name '" + std::string(topic) +
                                 "': 1-200 bytes of A-Za-z0-9-+/;.$_() not starting with '-'");
}

Status CheckKey(std::string_view key) {
  if (IsValidKey(key)) return Status::Ok();
  return Status::InvalidArgument("bad key '" + std::string(key) +
                                 "': 1-200 bytes of printable ASCII without spaces");
}

Status ParsePut(const rapidjson::Value& v, std::string_view prefix, TimeMs now, PutSpec* p) {
  if (!v.IsObject())
    return Status::InvalidArgument(std::string(prefix) + "a job must be an object");
  Fields f(v, std::string(prefix));
  PutRequest& r = p->req;
  if (Status st = f.String("body", &r.body); !st.ok()) return st;
  std::string_view b64;
  if (Status st = f.String("body_base64", &b64); !st.ok()) return st;
  if (f.Has("body") && f.Has("body_base64"))
    return Status::InvalidArgument(std::string(prefix) + "give 'body' or 'body_base64', not both");
  if (f.Has("body_base64")) {
    if (!Base64Decode(b64, &p->decoded)) return f.Bad("body_base64", "base64");
    r.body = p->decoded;
  }
  if (Status st = f.Num("priority", 0, UINT32_MAX, &r.priority); !st.ok()) return st;
  if (Status st = f.Num("delay_ms", 0, kMaxDelayMs, &r.delay_ms); !st.ok()) return st;
  if (Status st = f.Num("ttr_ms", 1, kMaxDelayMs, &r.ttr_ms); !st.ok()) return st;
  if (Status st = f.Num("max_tries", 0, UINT32_MAX, &r.max_tries); !st.ok()) return st;
  if (Status st = f.String("key", &r.key); !st.ok()) return st;
  if (f.Has("key")) {
    if (Status st = CheckKey(r.key); !st.ok())
      return Status::InvalidArgument(std::string(prefix) + st.message());
  }
  if (const rapidjson::Value* at = f.Get("run_at"); at != nullptr) {
    if (f.Has("delay_ms"))
      return Status::InvalidArgument(std::string(prefix) + "give 'delay_ms' or 'run_at', not both");
    if (at->IsInt64() && at->GetInt64() >= 0 && at->GetInt64() <= now + kMaxDelayMs) {
      r.run_at = at->GetInt64();
    } else if (at->IsString()) {
      auto t = ParseRfc3339(std::string_view(at->GetString(), at->GetStringLength()));
      if (!t || *t > now + kMaxDelayMs)
        return f.Bad("run_at", "epoch milliseconds or an RFC 3339 time");
      r.run_at = std::max<TimeMs>(*t, 0);
    } else {
      return f.Bad("run_at", "epoch milliseconds or an RFC 3339 time");
    }
    p->has_run_at = true;
  }
  if (const rapidjson::Value* b = f.Get("backoff"); b != nullptr) {
    auto bo = ParseBackoffValue(*b);
    if (!bo.ok()) return Status::InvalidArgument(std::string(prefix) + bo.status().message());
    r.backoff = std::move(bo).value();
  }
  return f.Unknown();
}

Result<uint8_t> ParseStates(const rapidjson::Value* v) {
  if (v == nullptr) return static_cast<uint8_t>(kClearAll);
  if (!v->IsArray() || v->Empty())
    return Status::InvalidArgument("'states' must be a list of ready, delayed, buried");
  uint8_t mask = 0;
  for (const auto& e : v->GetArray()) {
    std::string_view s = e.IsString() ? std::string_view(e.GetString(), e.GetStringLength()) : "";
    if (s == "ready") {
      mask |= kClearReady;
    } else if (s == "delayed") {
      mask |= kClearDelayed;
    } else if (s == "buried") {
      mask |= kClearBuried;
    } else {
      return Status::InvalidArgument("'states' must be a list of ready, delayed, buried");
    }
  }
  return mask;
}

Result<JobId> ParseId(std::string_view s) {
  JobId id = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), id);
  if (ec != std::errc() || p != s.data() + s.size() || id == 0)
    return Status::InvalidArgument("bad job id '" + std::string(s) + "'");
  return id;
}

Result<std::map<std::string, std::string>> ParseQuery(
    std::string_view target, std::initializer_list<std::string_view> known) {
  std::map<std::string, std::string> out;
  const size_t q = target.find('?');
  if (q == std::string_view::npos) return out;
  auto decode = [](std::string_view in, std::string* to) {
    std::string spaced(in);
    std::replace(spaced.begin(), spaced.end(), '+', ' ');
    return PercentDecode(spaced, to);
  };
  for (std::string_view rest = target.substr(q + 1); !rest.empty();) {
    const size_t amp = rest.find('&');
    std::string_view part = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    if (part.empty()) continue;
    const size_t eq = part.find('=');
    std::string name, value;
    if (!decode(part.substr(0, eq), &name) ||
        (eq != std::string_view::npos && !decode(part.substr(eq + 1), &value)))
      return Status::InvalidArgument("bad percent-encoding in the query");
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      std::string names;
      for (std::string_view k : known)
        names += (names.empty() ? "'" : ", '") + std::string(k) + "'";
      return Status::InvalidArgument("unknown query parameter '" + Printable(name) +
                                     "' (this route takes " + names + ")");
    }
    if (!out.emplace(name, std::move(value)).second)
      return Status::InvalidArgument("query parameter '" + name + "' is given twice");
  }
  return out;
}

Result<bool> QueryFlag(const std::map<std::string, std::string>& query, std::string_view name,
                       bool absent) {
  auto it = query.find(std::string(name));
  if (it == query.end()) return absent;
  if (it->second == "true" || it->second == "1" || it->second.empty()) return true;
  if (it->second == "false" || it->second == "0") return false;
  return Status::InvalidArgument("query parameter '" + std::string(name) +
                                 "' must be true or false");
}

}  // namespace delayq::server
