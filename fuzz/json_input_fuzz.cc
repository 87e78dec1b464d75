// libFuzzer target for request bodies (server/json_input.h): any bytes,
// up to the HTTP body limit (make fuzz runs it with -max_len=8388608, and
// its seeds include JSON nested 300,000 deep). Checks:
//  - no crash, no unbounded recursion (the sanitizers' stack checks);
//  - a body that is accepted is one JSON object, its arrays and objects
//    nested no deeper than kMaxJsonDepth, with no object naming a member twice, and every string
//    in it valid UTF-8 (no lone surrogate got through);
//  - a body refused for its shape (CheckJsonShape) is refused by
//    ParseJsonObject with the same message.
//
// Build and run by hand:
//   clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -I src -I include \
//     fuzz/json_input_fuzz.cc src/server/json_input.cc src/core/status.cc -o /tmp/json_fuzz
//   /tmp/json_fuzz -max_len=8388608 -dict=fuzz/json.dict /tmp/corpus fuzz/corpus/json
#include <rapidjson/document.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "delayq/text.h"
#include "fuzz_check.h"
#include "server/json_input.h"

namespace {

// Valid UTF-8 with no surrogate code point (IsText less its control
// characters test: JSON strings may hold them escaped).
bool ValidUtf8(std::string_view s) {
  std::string printable(s);
  for (char& c : printable)
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  return delayq::IsText(printable);
}

// Walks the document with a stack of its own: the deepest nesting, and
// whether every object's names are unique and every string valid.
void CheckDocument(const rapidjson::Value& root) {
  std::vector<std::pair<const rapidjson::Value*, size_t>> todo{{&root, 1}};
  while (!todo.empty()) {
    auto [v, depth] = todo.back();
    todo.pop_back();
    // (The limit is on arrays and objects, the root among them; a number
    // or string in the deepest one is one level further down.)
    if (v->IsArray() || v->IsObject())
      FUZZ_CHECK(depth <= delayq::server::kMaxJsonDepth, "nested too deep");
    if (v->IsString()) {
      FUZZ_CHECK(ValidUtf8({v->GetString(), v->GetStringLength()}), "a string not UTF-8");
    } else if (v->IsArray()) {
      for (const auto& e : v->GetArray()) todo.emplace_back(&e, depth + 1);
    } else if (v->IsObject()) {
      std::vector<std::string_view> names;
      for (auto it = v->MemberBegin(); it != v->MemberEnd(); ++it) {
        std::string_view n(it->name.GetString(), it->name.GetStringLength());
        FUZZ_CHECK(ValidUtf8(n), "a name not UTF-8");
        names.push_back(n);
        todo.emplace_back(&it->value, depth + 1);
      }
      std::sort(names.begin(), names.end());
      FUZZ_CHECK(std::adjacent_find(names.begin(), names.end()) == names.end(),
                 "a member named twice");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  delayq::Status shape = delayq::server::CheckJsonShape(body);
  rapidjson::Document d;
  delayq::Status st = delayq::server::ParseJsonObject(body, &d, false);
  if (!shape.ok()) {
    FUZZ_CHECK(st.code() == shape.code() && st.message() == shape.message(), st.message().c_str());
    return 0;
  }
  if (!st.ok()) return 0;
  FUZZ_CHECK(d.IsObject(), "accepted, not an object");
  CheckDocument(d);
  return 0;
}
