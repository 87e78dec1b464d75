// Runs every example of docs/cli.md against a real delayqd, in the order
// they appear, and compares what each prints with what the page shows, so
// that the page cannot drift from the client.
//
// An example is a ```console block: lines starting with "$ " are commands,
// the lines after one are what it prints (stdout and stderr together). The
// page runs as one `sh` script, in order, so `echo $?` shows the previous
// command's exit code and a variable set in one block (a job's lease) is
// there in the next. `delayq` is build/delayq; the default server and the URLs
// http://localhost:11380 and beanstalk://localhost:11300 are the test's
// server. Values that change from run to run (times, the instance id, the
// uptime) are masked on both sides.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "server/http_client.h"
#include "server/server_process.h"
#include "server/text_mask.h"

namespace delayq::testing {
namespace {

struct Command {
  int line = 0;
  std::string text;
  std::string expected;
};

// The commands of each ```console block.
std::vector<std::vector<Command>> ParseBlocks(const std::string& page) {
  std::vector<std::vector<Command>> blocks;
  std::istringstream in(page);
  std::string l;
  int n = 0;
  bool inside = false;
  while (std::getline(in, l)) {
    ++n;
    if (!inside) {
      if (l == "```console") {
        inside = true;
        blocks.emplace_back();
      }
      continue;
    }
    if (l == "```") {
      inside = false;
    } else if (l.starts_with("$ ")) {
      blocks.back().push_back(Command{n, l.substr(2), ""});
    } else if (!blocks.back().empty()) {
      blocks.back().back().expected += l + "\n";
    } else {
      ADD_FAILURE() << "docs/cli.md:" << n << ": output before any command";
    }
  }
  return blocks;
}

std::string MaskedOutput(const std::string& s) {
  std::string m = MaskLineValues(MaskTimes(s), {"time left", "age", "uptime"}, "*");
  m = MaskHex16(MaskLineValues(m, {"id"}, "*", /*hex16=*/true));
  return MaskJsonValues(m, {"due_ms", "deadline_ms", "created_ms", "now_ms", "uptime_ms",
                            "pause_time_left_ms", "time_left_s", "age_s"});
}

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = 0; (at = s.find(from, at)) != std::string::npos; at += to.size())
    s.replace(at, from.size(), to);
  return s;
}

TEST(CliDoc, ExamplesRunAsShown) {
  std::ifstream f(std::string(DELAYQ_SOURCE_DIR) + "/docs/cli.md");
  ASSERT_TRUE(f.good()) << "docs/cli.md not found";
  std::stringstream page;
  page << f.rdbuf();
  auto blocks = ParseBlocks(page.str());
  size_t commands = 0;
  for (const auto& b : blocks) commands += b.size();
  ASSERT_GE(commands, 30u) << "fewer examples than the page has: is the parser broken?";

  ServerProcess server;
  std::string error;
  ASSERT_TRUE(server.Start(DelayqdPath(), {"--in-memory"}, &error)) << error;
  const uint16_t http_port = HttpPortOf(server);
  ASSERT_NE(http_port, 0) << server.Log();
  const std::string http = "http://127.0.0.1:" + std::to_string(http_port);
  const std::string beanstalk = "beanstalk://127.0.0.1:" + std::to_string(server.port());

  // One script for the page; a marker line before each command, which
  // keeps the previous exit status for `echo $?`.
  std::vector<const Command*> all;
  for (const auto& block : blocks)
    for (const Command& cmd : block) all.push_back(&cmd);
  std::string script = "PATH='" + std::string(DELAYQ_BINARY_DIR) +
                       "':\"$PATH\"; export DELAYQ_SERVER='" + http +
                       "'; unset DELAYQ_OUTPUT; exec 2>&1\n";
  for (size_t i = 0; i < all.size(); ++i) {
    std::string cmd = Replace(all[i]->text, "http://localhost:11380", http);
    cmd = Replace(cmd, "beanstalk://localhost:11300", beanstalk);
    script += "s=$?; echo '@@cmd " + std::to_string(i) + "@@'; (exit $s); " + cmd + "\n";
  }
  int st = 0;
  std::string out = RunShell("sh -c '" + Replace(script, "'", "'\\''") + "'", &st);
  for (size_t i = 0; i < all.size(); ++i) {
    const std::string marker = "@@cmd " + std::to_string(i) + "@@\n";
    const std::string next = "@@cmd " + std::to_string(i + 1) + "@@\n";
    size_t from = out.find(marker);
    ASSERT_NE(from, std::string::npos) << "docs/cli.md:" << all[i]->line << ": no output\n" << out;
    from += marker.size();
    size_t to = out.find(next, from);
    std::string got = out.substr(from, to == std::string::npos ? std::string::npos : to - from);
    // Output that does not end a line (-o body) ends one on the page.
    if (!got.empty() && !got.ends_with('\n')) got += '\n';
    EXPECT_EQ(MaskedOutput(got), MaskedOutput(all[i]->expected))
        << "docs/cli.md:" << all[i]->line << ": $ " << all[i]->text;
  }
  int stopped = server.Stop();
  EXPECT_TRUE(WIFEXITED(stopped) && WEXITSTATUS(stopped) == 0);
}

}  // namespace
}  // namespace delayq::testing
