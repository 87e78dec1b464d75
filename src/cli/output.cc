#include "cli/output.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <cstdio>

#include "cli/util.h"

namespace delayq::cli {
namespace {

// Fields in milliseconds that are points in time, not durations.
bool IsTimePoint(std::string_view name) {
  return name == "due_ms" || name == "deadline_ms" || name == "created_ms" || name == "now_ms";
}

std::string Str(const rapidjson::Value& v) {
  return v.IsString() ? std::string(v.GetString(), v.GetStringLength()) : std::string();
}

std::string Pad(std::string label, size_t width) {
  label += ':';
  if (label.size() < width) label.append(width - label.size(), ' ');
  return label;
}

// " until <time>" for a delayed or reserved job whose reply tells when.
std::string Until(const rapidjson::Value& v) {
  for (const char* name : {"due_ms", "deadline_ms"}) {
    auto it = v.FindMember(name);
    if (it != v.MemberEnd() && it->value.IsInt64())
      return " until " + FormatRfc3339(it->value.GetInt64());
  }
  return {};
}

std::string IdText(const rapidjson::Value& v) {
  auto it = v.FindMember("id");
  return it != v.MemberEnd() && it->value.IsUint64() ? std::to_string(it->value.GetUint64()) : "?";
}

// The job counts of stats: "1 ready, 0 reserved, 2 delayed, 0 buried (1 urgent)".
std::string CountsText(const rapidjson::Value& c) {
  auto n = [&c](const char* name) {
    auto it = c.FindMember(name);
    return it != c.MemberEnd() && it->value.IsUint64() ? std::to_string(it->value.GetUint64())
                                                       : std::string("?");
  };
  return n("ready") + " ready, " + n("reserved") + " reserved, " + n("delayed") + " delayed, " +
         n("buried") + " buried (" + n("urgent") + " urgent)";
}

}  // namespace

uint64_t UintField(const rapidjson::Value& object, const char* name) {
  if (!object.IsObject()) return 0;
  auto it = object.FindMember(name);
  return it != object.MemberEnd() && it->value.IsUint64() ? it->value.GetUint64() : 0;
}

std::string StringField(const rapidjson::Value& object, const char* name) {
  if (!object.IsObject()) return {};
  auto it = object.FindMember(name);
  if (it == object.MemberEnd() || !it->value.IsString()) return {};
  return std::string(it->value.GetString(), it->value.GetStringLength());
}

std::string JobHandle(const rapidjson::Value& job) {
  std::string lease = StringField(job, "lease");
  return std::to_string(UintField(job, "id")) + (lease.empty() ? "" : "@" + lease);
}

std::string JsonLine(const rapidjson::Value& v) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  v.Accept(w);
  return std::string(sb.GetString(), sb.GetSize()) + "\n";
}

std::string FieldLabel(std::string_view name) {
  if (name.ends_with("_ms")) {
    name.remove_suffix(3);
  } else if (name.ends_with("_s")) {
    name.remove_suffix(2);
  }
  std::string label(name);
  std::replace(label.begin(), label.end(), '_', ' ');
  return label;
}

std::string HumanDuration(int64_t ms) {
  if (ms < 1000) return std::to_string(ms) + "ms";
  std::string out;
  struct Unit {
    int64_t scale;
    const char* name;
  };
  for (Unit u : {Unit{86'400'000, "d"}, Unit{3'600'000, "h"}, Unit{60'000, "m"}}) {
    if (ms >= u.scale) out += std::to_string(ms / u.scale) + u.name;
    ms %= u.scale;
  }
  if (ms > 0) {
    out += std::to_string(ms / 1000);
    if (int64_t frac = ms % 1000; frac > 0) {
      char buf[8];
      std::snprintf(buf, sizeof buf, ".%03d", static_cast<int>(frac));
      std::string f = buf;
      while (f.back() == '0') f.pop_back();
      out += f;
    }
    out += "s";
  }
  return out;
}

// GET /stats's "operations" as "put 6, peek 2": each operation's
// requests, every protocol together.
std::string OperationsText(const rapidjson::Value& ops) {
  std::string out;
  for (const auto& m : ops.GetObject()) {
    uint64_t n = 0;
    if (m.value.IsObject())
      for (const auto& p : m.value.GetObject()) n += p.value.IsUint64() ? p.value.GetUint64() : 0;
    out += (out.empty() ? "" : ", ") + Str(m.name) + " " + std::to_string(n);
  }
  return out.empty() ? "none" : out;
}

std::string FieldValue(std::string_view name, const rapidjson::Value& v) {
  if (v.IsString()) return Str(v);
  if (v.IsBool()) return v.GetBool() ? "true" : "false";
  if (v.IsObject() && name == "jobs") return CountsText(v);
  if (v.IsObject() && name == "operations") return OperationsText(v);
  if (v.IsInt64() && name.ends_with("_ms"))
    return IsTimePoint(name) ? FormatRfc3339(v.GetInt64()) : HumanDuration(v.GetInt64());
  if (v.IsUint64() && name.ends_with("_s")) return std::to_string(v.GetUint64()) + "s";
  if (v.IsArray()) {
    std::string out;
    for (const auto& e : v.GetArray()) out += (out.empty() ? "" : ", ") + FieldValue("", e);
    return out;
  }
  if (v.IsNumber() || v.IsObject()) {
    std::string json = JsonLine(v);
    json.pop_back();
    return json;
  }
  return "null";
}

std::string JobBody(const rapidjson::Value& job) {
  auto text = job.FindMember("body");
  if (text != job.MemberEnd()) return Str(text->value);
  auto b64 = job.FindMember("body_base64");
  std::string bytes;
  if (b64 != job.MemberEnd()) Base64Decode(Str(b64->value), &bytes);
  return bytes;
}

std::string JobText(const rapidjson::Value& job) {
  if (!job.IsObject()) return "?\n";
  constexpr size_t kWidth = 11;
  static constexpr const char* kCounters[] = {"reserves", "timeouts", "releases", "buries",
                                              "kicks"};
  std::string out, counts;
  for (const auto& m : job.GetObject()) {
    std::string_view name(m.name.GetString(), m.name.GetStringLength());
    if (name == "body" || name == "body_base64") continue;
    bool counter = false;
    for (const char* c : kCounters) counter |= name == c;
    if (counter) {
      counts += (counts.empty() ? "" : ", ") + std::string(name) + " " + FieldValue(name, m.value);
      continue;
    }
    if (name == "last_answer" && m.value.IsObject()) {
      // "500: <first bytes>", or "0: timeout: ..." when no answer came.
      auto status = m.value.FindMember("status");
      auto text = m.value.FindMember("text");
      std::string shown = status != m.value.MemberEnd() ? FieldValue("", status->value) : "?";
      if (text != m.value.MemberEnd() && text->value.IsString())
        shown += ": " + Str(text->value);
      else if (m.value.HasMember("text_base64"))
        shown += " (not text: -o json shows it)";
      std::replace_if(
          shown.begin(), shown.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
      out += Pad("answer", kWidth) + shown + "\n";
      continue;
    }
    if (name == "max_tries" && m.value.IsUint64() && m.value.GetUint64() == 0) {
      out += Pad("max tries", kWidth) + "unlimited\n";
      continue;
    }
    out += Pad(FieldLabel(name), kWidth) + FieldValue(name, m.value) + "\n";
  }
  if (!counts.empty()) out += Pad("counts", kWidth) + counts + "\n";
  const bool binary = job.HasMember("body_base64");
  const std::string body = JobBody(job);
  out +=
      Pad("body", kWidth) + std::to_string(body.size()) + (body.size() == 1 ? " byte" : " bytes");
  if (binary) {
    out += ", not text (-o json or -o body shows it)\n";
  } else if (body.empty()) {
    out += "\n";
  } else {
    out += "\n" + body;
    if (!body.ends_with('\n')) out += '\n';
  }
  return out;
}

std::string PutText(const rapidjson::Value& reply, std::string_view key) {
  auto created = reply.FindMember("created");
  const bool is_new =
      created == reply.MemberEnd() || !created->value.IsBool() || created->value.GetBool();
  std::string out = "job " + IdText(reply);
  out += is_new ? " created" : " exists with key " + std::string(key);
  auto state = reply.FindMember("state");
  if (state != reply.MemberEnd()) out += " (" + Str(state->value) + Until(reply) + ")";
  return out + "\n";
}

std::string StateText(const rapidjson::Value& reply, std::string_view verb) {
  // A reply that names its job by key alone (a beanstalkd delete-key).
  auto key = reply.FindMember("key");
  if (!reply.HasMember("id") && key != reply.MemberEnd() && reply.HasMember("topic"))
    return "job with key '" + Str(key->value) + "' in topic '" + Str(reply["topic"]) + "' " +
           std::string(verb) + "\n";
  std::string out = "job " + IdText(reply) + " " + std::string(verb);
  auto state = reply.FindMember("state");
  if (state != reply.MemberEnd() && Str(state->value) != verb)
    out += " (" + Str(state->value) + Until(reply) + ")";
  return out + "\n";
}

std::string FieldsText(const rapidjson::Value& object) {
  if (!object.IsObject()) return "?\n";
  size_t width = 0;
  for (const auto& m : object.GetObject())
    width = std::max(width, FieldLabel(m.name.GetString()).size() + 2);
  std::string out;
  for (const auto& m : object.GetObject()) {
    std::string_view name(m.name.GetString(), m.name.GetStringLength());
    out += Pad(FieldLabel(name), width) + FieldValue(name, m.value) + "\n";
  }
  return out;
}

}  // namespace delayq::cli
