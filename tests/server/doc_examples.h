// Test helper: the examples of a page of docs/ that run as tests
// (http_doc_test.cc for docs/http-api.md, push_doc_test.cc for
// docs/push.md). An example is a ```sh block holding one `curl` command,
// followed by a ``` block with the status line and the JSON body of its
// reply; replies are compared as JSON with the values that change from run
// to run (times, the instance id, leases) masked.
#ifndef DELAYQ_TESTS_SERVER_DOC_EXAMPLES_H_
#define DELAYQ_TESTS_SERVER_DOC_EXAMPLES_H_

#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <sstream>
#include <string>
#include <vector>

namespace delayq::testing {

struct DocExample {
  int line = 0;
  std::string command;
  std::string status;  // "HTTP/1.1 201 Created"
  std::string body;
};

inline std::vector<DocExample> ParseDocExamples(const std::string& text, const std::string& doc) {
  std::vector<DocExample> out;
  std::istringstream in(text);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  for (size_t i = 0; i + 6 < lines.size(); ++i) {
    if (lines[i] != "```sh" || lines[i + 1].rfind("curl ", 0) != 0 || lines[i + 2] != "```")
      continue;
    DocExample e;
    e.line = static_cast<int>(i + 2);
    e.command = lines[i + 1];
    size_t j = i + 3;
    if (lines[j] != "```") {
      ADD_FAILURE() << doc << ":" << e.line << ": a curl example without its reply";
      continue;
    }
    e.status = lines[j + 1];
    for (j += 2; j < lines.size() && lines[j] != "```"; ++j) e.body += lines[j] + "\n";
    out.push_back(e);
    i = j;
  }
  return out;
}

// The values of the "lease" members of a JSON text, in order.
inline std::vector<std::string> DocLeasesShown(const std::string& json) {
  std::vector<std::string> out;
  const std::string key = "\"lease\":\"";
  for (size_t at = json.find(key); at != std::string::npos; at = json.find(key, at)) {
    at += key.size();
    size_t end = json.find('"', at);
    if (end == std::string::npos) break;
    out.push_back(json.substr(at, end - at));
  }
  return out;
}

// The JSON text with the run-dependent values replaced by "*".
inline std::string MaskedDocJson(const std::string& json) {
  rapidjson::Document d;
  d.Parse(json.c_str(), json.size());
  if (d.HasParseError()) return "<not JSON> " + json;
  static const char* kTimes[] = {"due_ms", "deadline_ms", "created_ms",
                                 "now_ms", "uptime_ms",   "pause_time_left_ms"};
  std::vector<rapidjson::Value*> stack{&d};
  while (!stack.empty()) {
    rapidjson::Value* v = stack.back();
    stack.pop_back();
    if (v->IsArray()) {
      for (auto& e : v->GetArray()) stack.push_back(&e);
    } else if (v->IsObject()) {
      // By index: RapidJSON 1.1's non-const member iterators do not compare
      // unambiguously in C++20.
      for (rapidjson::SizeType i = 0; i < v->MemberCount(); ++i) {
        auto& m = v->MemberBegin()[i];
        std::string name = m.name.GetString();
        bool mask = false;
        for (const char* t : kTimes) mask |= name == t;
        // The instance id of /stats: 16 hex digits, new at every start.
        mask |= name == "id" && m.value.IsString() && m.value.GetStringLength() == 16;
        mask |= name == "lease";
        if (mask) {
          m.value.SetString("*");
        } else {
          stack.push_back(&m.value);
        }
      }
    }
  }
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  d.Accept(w);
  return sb.GetString();
}

}  // namespace delayq::testing

#endif  // DELAYQ_TESTS_SERVER_DOC_EXAMPLES_H_
