// Runs every example of docs/http-api.md and docs/schedules.md against a
// real delayqd, in the order they appear, and compares each reply with the one the page shows, so
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

#include "server/doc_examples.h"
#include "server/http_client.h"
#include "server/server_process.h"

namespace delayq::testing {
namespace {

// Runs the examples of docs/<name>, at least `least` of them.
void RunExamples(const std::string& name, size_t least) {
  const std::string doc = "docs/" + name;
  int st = 0;
  RunShell("command -v curl >/dev/null 2>&1", &st);
  ASSERT_EQ(st, 0) << "curl is missing (scripts/setup.sh installs it)";
  std::ifstream f(std::string(DELAYQ_SOURCE_DIR) + "/" + doc);
  ASSERT_TRUE(f.good()) << doc << " not found";
  std::stringstream text;
  text << f.rdbuf();
  std::vector<DocExample> examples = ParseDocExamples(text.str(), doc);
  ASSERT_GE(examples.size(), least) << "fewer examples than the page has: is the parser broken?";

  ServerProcess server;
  std::string error;
  ASSERT_TRUE(server.Start(DelayqdPath(), {"--in-memory"}, &error)) << error;
  uint16_t port = HttpPortOf(server);
  ASSERT_NE(port, 0) << server.Log();
  const std::string target = "127.0.0.1:" + std::to_string(port);

  std::map<std::string, std::string> leases;  // on the page -> from the server
  for (const DocExample& e : examples) {
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
    EXPECT_EQ(MaskedDocJson(out.substr(head_end + 4)), MaskedDocJson(e.body))
        << doc << ":" << e.line << ": " << e.command;
    std::vector<std::string> shown = DocLeasesShown(e.body),
                             real = DocLeasesShown(out.substr(head_end + 4));
    for (size_t i = 0; i < shown.size() && i < real.size(); ++i) leases[shown[i]] = real[i];
  }
  int stopped = server.Stop();
  EXPECT_TRUE(WIFEXITED(stopped) && WEXITSTATUS(stopped) == 0);
}

TEST(HttpDoc, ExamplesRunAsShown) { RunExamples("http-api.md", 30); }
TEST(HttpDoc, SchedulesExamplesRunAsShown) { RunExamples("schedules.md", 5); }

}  // namespace
}  // namespace delayq::testing
