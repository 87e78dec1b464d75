#include "server/json_input.h"

#include <rapidjson/error/en.h>

#include <algorithm>
#include <string>
#include <vector>

namespace delayq::server {

namespace {

Status BadJson(std::string_view why, size_t at) {
  return Status::InvalidArgument("the body holds " + std::string(why) + " (at byte " +
                                 std::to_string(at) + ")");
}

int Hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The code unit of the \u escape at s[i] ('\\'), or -1 when s[i..] is not
// a whole \uXXXX.
int EscapedUnit(std::string_view s, size_t i) {
  if (i + 6 > s.size() || s[i] != '\\' || s[i + 1] != 'u') return -1;
  int v = 0;
  for (size_t k = i + 2; k < i + 6; ++k) {
    int h = Hex(s[k]);
    if (h < 0) return -1;
    v = v * 16 + h;
  }
  return v;
}

// An object's member names, sorted, have no two alike. Walks the document
// with a stack of its own (the depth is already bounded, but the walk need
// not rely on it).
Status CheckNoDuplicateMembers(const rapidjson::Value& root) {
  std::vector<const rapidjson::Value*> todo{&root};
  std::vector<std::string_view> names;
  while (!todo.empty()) {
    const rapidjson::Value* v = todo.back();
    todo.pop_back();
    if (v->IsArray()) {
      for (const auto& e : v->GetArray())
        if (e.IsArray() || e.IsObject()) todo.push_back(&e);
      continue;
    }
    if (!v->IsObject()) continue;
    names.clear();
    for (auto it = v->MemberBegin(); it != v->MemberEnd(); ++it) {
      names.emplace_back(it->name.GetString(), it->name.GetStringLength());
      if (it->value.IsArray() || it->value.IsObject()) todo.push_back(&it->value);
    }
    std::sort(names.begin(), names.end());
    auto dup = std::adjacent_find(names.begin(), names.end());
    if (dup != names.end()) {
      std::string shown;
      for (char c : dup->substr(0, 64)) shown.push_back(c >= 0x20 && c < 0x7f ? c : '?');
      return Status::InvalidArgument("the body holds an object that names member '" + shown +
                                     "' twice");
    }
  }
  return Status::Ok();
}

}  // namespace

Status CheckJsonShape(std::string_view s, size_t max_depth) {
  size_t depth = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '\0') {
      // RapidJSON takes a NUL for the end of its input: what follows one
      // would go unread.
      return Status::InvalidArgument("bad_json:a NUL byte outside a string (at byte " +
                                     std::to_string(i) + ")");
    }
    if (c == '[' || c == '{') {
      if (++depth > max_depth)
        return BadJson(
            "arrays and objects nested deeper than " + std::to_string(max_depth) + " levels", i);
    } else if (c == ']' || c == '}') {
      if (depth > 0) --depth;
    } else if (c == '"') {
      // A string: up to its closing quote, following escapes.
      for (++i; i < s.size() && s[i] != '"'; ++i) {
        if (s[i] != '\\') continue;
        int unit = EscapedUnit(s, i);
        if (unit < 0) {
          ++i;  // a one-character escape (or a bad one: the parser says so)
          continue;
        }
        if (unit >= 0xdc00 && unit <= 0xdfff) return BadJson("a lone low surrogate escape", i);
        if (unit >= 0xd800 && unit <= 0xdbff) {
          int low = EscapedUnit(s, i + 6);
          if (low < 0xdc00 || low > 0xdfff) return BadJson("a lone high surrogate escape", i);
          i += 6;
        }
        i += 5;
      }
    }
  }
  return Status::Ok();
}

Status ParseJsonObject(std::string_view body, rapidjson::Document* d, bool empty_ok) {
  if (body.empty() && empty_ok) {
    d->SetObject();
    return Status::Ok();
  }
  if (Status st = CheckJsonShape(body); !st.ok()) return st;
  d->Parse<rapidjson::kParseValidateEncodingFlag | rapidjson::kParseIterativeFlag>(body.data(),
                                                                                   body.size());
  if (d->HasParseError()) {
    return Status::InvalidArgument(std::string("bad_json:") +
                                   rapidjson::GetParseError_En(d->GetParseError()) + " (at byte " +
                                   std::to_string(d->GetErrorOffset()) + ")");
  }
  if (Status st = CheckNoDuplicateMembers(*d); !st.ok()) return st;
  if (!d->IsObject()) return Status::InvalidArgument("the request body must be a JSON object");
  return Status::Ok();
}

}  // namespace delayq::server
