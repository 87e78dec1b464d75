// Runs every example of docs/http-api.md (and of docs/schedules.md) against
// a real delayqd, in the order they appear, and compares each reply with the one the page shows, so
// that the page cannot drift from the server.
//
// An example is a ```sh block holding one `curl` command, followed by a
// ``` block with the status line and the JSON body of its reply. The command
// runs through `sh -c` with `localhost:11380` pointed at the test's server;
// `curl -si` prints the status line and headers, and the headers are
// dropped. Bodies are compared as JSON with the values that change from run
// to run (times, the instance id, leases) masked. A lease the page shows in
// a reply stands for the one the server gave there: later commands that name
// it get the real one.
#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "server/http_client.h"
#include "server/server_process.h"

namespace delayq::testing {
namespace {

struct Example {
  int line = 0;
  std::string command;
  std::string status;  // "HTTP/1.1 201 Created"
  std::string body;
};

std::vector<Example> ParseExamples(const std::string& doc, const std::string& text) {
  std::vector<Example> out;
  std::istringstream in(text);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  for (size_t i = 0; i + 6 < lines.size(); ++i) {
    if (lines[i] != "```sh" || lines[i + 1].rfind("curl ", 0) != 0 || lines[i + 2] != "```")
      continue;
    Example e;
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
std::vector<std::string> LeasesShown(const std::string& json) {
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
std::string MaskedJson(const std::string& json) {
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

// Runs the examples of docs/<doc> against a fresh delayqd; the page must
// hold at least `least` of them.
void RunExamples(const std::string& name, size_t least) {
  const std::string doc = "docs/" + name;
  int st = 0;
  RunShell("command -v curl >/dev/null 2>&1", &st);
  ASSERT_EQ(st, 0) << "curl is missing (scripts/setup.sh installs it)";
  std::ifstream f(std::string(DELAYQ_SOURCE_DIR) + "/" + doc);
  ASSERT_TRUE(f.good()) << doc << " not found";
  std::stringstream text;
  text << f.rdbuf();
  std::vector<Example> examples = ParseExamples(doc, text.str());
  ASSERT_GE(examples.size(), least) << "fewer examples than the page has: is the parser broken?";

  ServerProcess server;
  std::string error;
  ASSERT_TRUE(server.Start(DelayqdPath(), {"--in-memory"}, &error)) << error;
  uint16_t port = HttpPortOf(server);
  ASSERT_NE(port, 0) << server.Log();
  const std::string target = "127.0.0.1:" + std::to_string(port);

  std::map<std::string, std::string> leases;  // on the page -> from the server
  for (const Example& e : examples) {
    std::string cmd = e.command;
    for (size_t at; (at = cmd.find("localhost:11380")) != std::string::npos;)
      cmd.replace(at, 15, target);
    for (const auto& [shown, real] : leases)
      for (size_t at; (at = cmd.find(shown)) != std::string::npos;)
        cmd.replace(at, shown.size(), real);
    std::string out = RunShell(cmd + " --max-time 20", &st);
    ASSERT_EQ(st, 0) << doc << ":" << e.line << ": `" << e.command << "` failed";
    size_t eol = out.find("\r\n");
    size_t head_end = out.find("\r\n\r\n");
    ASSERT_NE(head_end, std::string::npos) << doc << ":" << e.line << ": " << out;
    EXPECT_EQ(out.substr(0, eol), e.status) << doc << ":" << e.line << ": " << e.command;
    EXPECT_EQ(MaskedJson(out.substr(head_end + 4)), MaskedJson(e.body))
        << doc << ":" << e.line << ": " << e.command;
    std::vector<std::string> shown = LeasesShown(e.body),
                             real = LeasesShown(out.substr(head_end + 4));
    for (size_t i = 0; i < shown.size() && i < real.size(); ++i) leases[shown[i]] = real[i];
  }
  int stopped = server.Stop();
  EXPECT_TRUE(WIFEXITED(stopped) && WEXITSTATUS(stopped) == 0);
}

TEST(HttpDoc, ExamplesRunAsShown) { RunExamples("http-api.md", 30); }

TEST(HttpDoc, SchedulesExamplesRunAsShown) { RunExamples("schedules.md", 5); }

}  // namespace
}  // namespace delayq::testing
