// Runs the examples of docs/push.md against a real delayqd and a real
// receiver, in the order they appear (doc_examples.h), with
// `localhost:11380` pointed at the server and `localhost:8080` at the
// receiver; then runs the page's Python and Node checks of the signature
// against the push that receiver got, and against the same push with one
// byte of its body changed.
#include <gtest/gtest.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <sys/wait.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "server/doc_examples.h"
#include "server/http_client.h"
#include "server/http_receiver.h"
#include "server/server_process.h"
#include "temp_dir.h"

namespace delayq::testing {
namespace {

using namespace std::chrono_literals;

std::string ReadPushDoc() {
  std::ifstream f(std::string(DELAYQ_SOURCE_DIR) + "/docs/push.md");
  std::stringstream text;
  text << f.rdbuf();
  return text.str();
}

// The first block of the page fenced as ```<lang>.
std::string CodeBlock(const std::string& doc, const std::string& lang) {
  const std::string open = "```" + lang + "\n";
  size_t at = doc.find(open);
  if (at == std::string::npos) return "";
  at += open.size();
  return doc.substr(at, doc.find("```", at) - at);
}

void ReplaceAll(std::string* s, const std::string& from, const std::string& to) {
  for (size_t at = 0; (at = s->find(from, at)) != std::string::npos; at += to.size())
    s->replace(at, from.size(), to);
}

// The request's headers as a JSON object.
std::string HeadersJson(const HttpReceiver::Request& r) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.StartObject();
  for (const auto& [name, value] : r.headers) {
    w.Key(name.c_str());
    w.String(value.c_str());
  }
  w.EndObject();
  return sb.GetString();
}

TEST(PushDoc, ExamplesRunAsShown_AndTheSignatureChecksPassOnARealPush) {
  const std::string doc = ReadPushDoc();
  ASSERT_FALSE(doc.empty()) << "docs/push.md not found";
  std::vector<DocExample> examples = ParseDocExamples(doc, "docs/push.md");
  ASSERT_GE(examples.size(), 4u) << "fewer examples than the page has: is the parser broken?";

  HttpReceiver rx;
  ServerProcess server;
  std::string error;
  ASSERT_TRUE(server.Start(DelayqdPath(), {"--in-memory", "--push-allow-private"}, &error))
      << error;
  const uint16_t port = HttpPortOf(server);
  ASSERT_NE(port, 0) << server.Log();
  const std::string api = "127.0.0.1:" + std::to_string(port);
  const std::string receiver = "127.0.0.1:" + std::to_string(rx.port());
  int st = 0;
  for (const DocExample& e : examples) {
    std::string cmd = e.command;
    ReplaceAll(&cmd, "localhost:11380", api);
    ReplaceAll(&cmd, "localhost:8080", receiver);
    std::string out = RunShell(cmd + " --max-time 20", &st);
    ASSERT_EQ(st, 0) << "docs/push.md:" << e.line << ": `" << e.command << "` failed";
    const size_t eol = out.find("\r\n"), head_end = out.find("\r\n\r\n");
    ASSERT_NE(head_end, std::string::npos) << "docs/push.md:" << e.line << ": " << out;
    std::string body = out.substr(head_end + 4);
    ReplaceAll(&body, receiver, "localhost:8080");
    EXPECT_EQ(out.substr(0, eol), e.status) << "docs/push.md:" << e.line << ": " << e.command;
    EXPECT_EQ(MaskedDocJson(body), MaskedDocJson(e.body))
        << "docs/push.md:" << e.line << ": " << e.command;
    // The job the page puts is pushed before the page ends the target.
    if (e.command.find("/jobs") != std::string::npos) ASSERT_EQ(rx.WaitFor(1, 10s), 1u);
  }
  ASSERT_EQ(rx.requests().size(), 1u);
  const HttpReceiver::Request push = rx.requests()[0];
  EXPECT_EQ(push.body, R"({"order":42})");

  // The page's receivers, each run on the push and on a forged copy.
  TempDir dir;
  const std::string secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
  std::ofstream(dir.path() + "/headers.json") << HeadersJson(push);
  std::ofstream(dir.path() + "/body") << push.body;
  std::string forged = push.body;
  forged[forged.size() - 2] = '3';
  std::ofstream(dir.path() + "/forged") << forged;
  const std::string python = CodeBlock(doc, "python"), node = CodeBlock(doc, "js");
  ASSERT_FALSE(python.empty());
  ASSERT_FALSE(node.empty());
  std::ofstream(dir.path() + "/check.py")
      << python
      << "\nimport json, sys\n"
         "h = json.load(open(sys.argv[1]))\n"
         "print('ok' if verify(sys.argv[3], h, open(sys.argv[2], 'rb').read()) else 'bad')\n";
  std::ofstream(dir.path() + "/check.js")
      << node
      << "\nconst fs = require(\"fs\");\n"
         "const h = JSON.parse(fs.readFileSync(process.argv[2], \"utf8\"));\n"
         "console.log(verify(process.argv[4], h, fs.readFileSync(process.argv[3])) ? \"ok\" : "
         "\"bad\");\n";
  for (const std::string& runner :
       {"python3 " + dir.path() + "/check.py", "node " + dir.path() + "/check.js"}) {
    const std::string args = " " + dir.path() + "/headers.json ";
    EXPECT_EQ(RunShell(runner + args + dir.path() + "/body " + secret, &st), "ok\n") << runner;
    EXPECT_EQ(st, 0) << runner;
    EXPECT_EQ(RunShell(runner + args + dir.path() + "/forged " + secret, &st), "bad\n") << runner;
  }
  int stopped = server.Stop();
  EXPECT_TRUE(WIFEXITED(stopped) && WEXITSTATUS(stopped) == 0);
}

}  // namespace
}  // namespace delayq::testing
