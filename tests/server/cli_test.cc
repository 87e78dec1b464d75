// Black-box tests of the command-line client (docs/cli.md): build/delayq run
// as a child process against a real build/delayqd, over the HTTP API and
// over the beanstalkd protocol, with its stdout, stderr and exit code
// compared with what they must be.
//
// Suites:
//  - CliHelp.*        help of every command, the version, no command.
//  - CliUsage.*       bad arguments: exit 2 and a message, and nothing sent.
//  - CliBoth/*.*      every command over each transport (the parameter):
//                     text and JSON output, every exit code.
//  - CliHttp.*, CliBeanstalk.*  what only one transport does or refuses.
//  - CliCross.*       a job put over one transport, taken over the other.
//  - CliNoServer.*    nothing listening, or a server that never answers.
//  - CliBeanstalkd.*  the plain commands against Debian's beanstalkd.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <rapidjson/document.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "server/http_client.h"
#include "server/server_process.h"
#include "server/text_mask.h"

extern char** environ;

namespace delayq::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::string DelayqPath() { return std::string(DELAYQ_BINARY_DIR) + "/delayq"; }

struct CliRun {
  int exit = -1;  // the exit code; 128 + signal when killed
  std::string out, err;
};

struct RunOptions {
  std::optional<std::string> input;  // standard input; none: /dev/null
  bool tty_input = false;            // standard input is a terminal
  std::vector<std::string> env;      // NAME=value, on top of ours without DELAYQ_*
};

RunOptions Input(std::string bytes) {
  RunOptions o;
  o.input = std::move(bytes);
  return o;
}
RunOptions WithEnv(std::vector<std::string> env) {
  RunOptions o;
  o.env = std::move(env);
  return o;
}
RunOptions TtyInput() {
  RunOptions o;
  o.tty_input = true;
  return o;
}

// Runs build/delayq with `args` and waits (up to a minute) for it to exit.
CliRun RunCli(const std::vector<std::string>& args, const RunOptions& o = {}) {
  CliRun r;
  int out[2], err[2], in[2] = {-1, -1};
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
    r.err = "<pipe failed>";
    return r;
  }
  int tty = -1;
  if (o.tty_input) {
    tty = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (tty < 0 || grantpt(tty) != 0 || unlockpt(tty) != 0) {
      r.err = "<no pseudo-terminal>";
      return r;
    }
    in[0] = open(ptsname(tty), O_RDWR | O_NOCTTY | O_CLOEXEC);
  } else if (o.input) {
    // A socket, so that writing after the child has gone raises no SIGPIPE.
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) != 0) {
      r.err = "<socketpair failed>";
      return r;
    }
  } else {
    in[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
  }
  std::vector<std::string> argv_s = {DelayqPath()};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_s;
  for (char** e = environ; *e != nullptr; ++e)
    if (std::strncmp(*e, "DELAYQ_", 7) != 0) env_s.emplace_back(*e);
  env_s.insert(env_s.end(), o.env.begin(), o.env.end());
  std::vector<char*> envp;
  for (std::string& s : env_s) envp.push_back(s.data());
  envp.push_back(nullptr);

  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    signal(SIGPIPE, SIG_DFL);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  close(in[0]);
  int in_w = in[1];
  size_t written = 0;
  if (in_w >= 0) fcntl(in_w, F_SETFL, O_NONBLOCK);
  if (in_w >= 0 && o.input->empty()) {
    shutdown(in_w, SHUT_WR);
    close(in_w);
    in_w = -1;
  }
  const auto deadline = Clock::now() + 60s;
  bool out_open = true, err_open = true;
  while ((out_open || err_open) && Clock::now() < deadline) {
    pollfd p[3] = {{out_open ? out[0] : -1, POLLIN, 0},
                   {err_open ? err[0] : -1, POLLIN, 0},
                   {in_w, POLLOUT, 0}};
    if (poll(p, 3, 100) < 0 && errno != EINTR) break;
    char buf[65536];
    for (int i = 0; i < 2; ++i) {
      if ((p[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      ssize_t n = read(p[i].fd, buf, sizeof buf);
      if (n > 0) {
        (i == 0 ? r.out : r.err).append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        (i == 0 ? out_open : err_open) = false;
      }
    }
    if (in_w >= 0 && (p[2].revents & (POLLOUT | POLLHUP | POLLERR)) != 0) {
      ssize_t n = send(in_w, o.input->data() + written, o.input->size() - written, MSG_NOSIGNAL);
      if (n > 0) written += static_cast<size_t>(n);
      if (n < 0 && errno != EAGAIN && errno != EINTR) written = o.input->size();
      if (written == o.input->size()) {
        shutdown(in_w, SHUT_WR);
        close(in_w);
        in_w = -1;
      }
    }
  }
  if (in_w >= 0) close(in_w);
  close(out[0]);
  close(err[0]);
  if (tty >= 0) close(tty);
  int st = 0;
  if (out_open || err_open) kill(pid, SIGKILL);
  waitpid(pid, &st, 0);
  r.exit = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

std::ostream& operator<<(std::ostream& os, const CliRun& r) {
  return os << "exit " << r.exit << "\n--- stdout:\n" << r.out << "--- stderr:\n" << r.err;
}

// Times that change from run to run, as "<time>" and "<s>".
std::string MaskedRun(const std::string& text) {
  return MaskHex16(MaskLineValues(MaskTimes(text), {"time left", "age"}, "<s>"));
}

// The JSON documents of a run, one per line.
std::vector<rapidjson::Document> JsonLines(const std::string& text) {
  std::vector<rapidjson::Document> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    out.push_back(Json(text.substr(start, nl - start)));
    start = nl == std::string::npos ? text.size() : nl + 1;
  }
  return out;
}

std::string RandomBytes(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

const std::vector<std::string> kCommands = {
    "put",  "reserve", "finish", "delete", "release", "bury", "touch", "peek",
    "kick", "stats",   "topics", "clear",  "pause",   "list", "find",  "schedule"};

// ---- a server for the tests --------------------------------------------------------

class CliFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    ASSERT_TRUE(server_.Start(DelayqdPath(), {"--in-memory", "-z", "2000000"}, &error)) << error;
    uint16_t http = HttpPortOf(server_);
    ASSERT_NE(http, 0) << server_.Log();
    http_url_ = "http://127.0.0.1:" + std::to_string(http);
    bean_url_ = "beanstalk://127.0.0.1:" + std::to_string(server_.port());
  }
  void TearDown() override {
    if (server_.Alive()) {
      int st = server_.Stop();
      EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "status " << st << "\n"
                                                         << server_.Log();
    }
  }

  // build/delayq -s <url> args...
  CliRun At(const std::string& url, std::vector<std::string> args, const RunOptions& o = {}) {
    args.insert(args.begin(), {"-s", url});
    return RunCli(args, o);
  }
  CliRun Http(std::vector<std::string> args, const RunOptions& o = {}) {
    return At(http_url_, std::move(args), o);
  }
  CliRun Bean(std::vector<std::string> args, const RunOptions& o = {}) {
    return At(bean_url_, std::move(args), o);
  }
  // Puts `body` over HTTP; returns the job's id.
  uint64_t PutJob(const std::string& topic, const std::string& body,
                  std::vector<std::string> more = {}) {
    std::vector<std::string> args = {"--json", "put", "-t", topic, "--", body};
    args.insert(args.begin() + 4, more.begin(), more.end());
    CliRun r = Http(args);
    auto d = Json(r.out);
    if (r.exit != 0 || !d.IsObject() || !d.HasMember("id")) {
      ADD_FAILURE() << r;
      return 0;
    }
    return d["id"].GetUint64();
  }
  // Reserves one job of `topic` over HTTP (detached: any request may act on
  // it); returns its id.
  uint64_t ReserveOverHttp(const std::string& topic) {
    CliRun r = Http({"--json", "reserve", "-t", topic});
    auto d = Json(r.out);
    if (r.exit != 0 || !d.IsObject() || !d.HasMember("id")) {
      ADD_FAILURE() << r;
      return 0;
    }
    return d["id"].GetUint64();
  }
  // The job's state as the HTTP API tells it, or "gone".
  std::string StateOf(uint64_t id) {
    CliRun r = Http({"--json", "peek", std::to_string(id)});
    if (r.exit == 3) return "gone";
    auto d = Json(r.out);
    return d.IsObject() && d.HasMember("state") ? d["state"].GetString() : "<" + r.out + ">";
  }

  ServerProcess server_;
  std::string http_url_, bean_url_;
};

// ---- help and usage ----------------------------------------------------------------

TEST(CliHelp, EveryCommandHasHelp) {
  CliRun top = RunCli({"--help"});
  ASSERT_EQ(top.exit, 0) << top;
  EXPECT_EQ(top.err, "");
  EXPECT_TRUE(top.out.starts_with("delayq 0.1.0: the command-line client")) << top.out;
  EXPECT_NE(top.out.find("Exit codes: 0 success, 1 the server refused or failed, 2 usage error,\n"
                         "3 not found, 4 reserve found no job in time, 5 connection or I/O "
                         "failure."),
            std::string::npos)
      << top.out;
  EXPECT_EQ(RunCli({"help"}).out, top.out);
  EXPECT_EQ(RunCli({"-h"}).out, top.out);
  for (const std::string& cmd : kCommands) {
    SCOPED_TRACE(cmd);
    EXPECT_NE(top.out.find("\n  " + cmd + " "), std::string::npos) << "not listed";
    CliRun h = RunCli({cmd, "--help"});
    ASSERT_EQ(h.exit, 0) << h;
    EXPECT_EQ(h.err, "");
    EXPECT_NE(h.out.find("\nUsage: delayq " + cmd + " [OPTIONS]"), std::string::npos) << h.out;
    EXPECT_NE(h.out.find("Example"), std::string::npos) << h.out;
    EXPECT_NE(h.out.find("delayq " + cmd), std::string::npos) << h.out;
    EXPECT_EQ(RunCli({"help", cmd}).out, h.out);
    EXPECT_EQ(RunCli({cmd, "-h"}).out, h.out);
  }
  CliRun put = RunCli({"help", "put"});
  for (const char* opt : {"--file", "--topic", "--delay", "--at", "--ttr", "--priority", "--key",
                          "--max-tries", "--backoff"})
    EXPECT_NE(put.out.find(opt), std::string::npos) << opt;
}

TEST(CliHelp, VersionAndNoCommand) {
  CliRun v = RunCli({"--version"});
  EXPECT_EQ(v.exit, 0);
  EXPECT_EQ(v.out, "delayq 0.1.0\n");
  EXPECT_EQ(v.err, "");
  CliRun none = RunCli({});
  EXPECT_EQ(none.exit, 2) << none;
  EXPECT_EQ(none.out, "");
  EXPECT_TRUE(none.err.starts_with("delayq 0.1.0: the command-line client")) << none.err;
  CliRun unknown = RunCli({"help", "frobnicate"});
  EXPECT_EQ(unknown.exit, 2);
  EXPECT_EQ(unknown.err, "delayq: unknown command 'frobnicate'\nRun 'delayq --help' for help.\n");
}

// Arguments refused before anything is sent: the server named is not
// listening, so a run that tried to connect would exit 5, not 2.
// A server that is not delayq (or is hostile) answers JSON nested a
// million deep: the CLI says so and exits 5; it used to recurse once per
// level to parse and print it.
TEST(CliHostileServer, AReplyNestedAMillionDeepIsRefused) {
  int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(lfd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(lfd, 4), 0);
  ASSERT_EQ(::getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const std::string body =
      "{\"a\":" + std::string(1'000'000, '[') + std::string(1'000'000, ']') + "}";
  std::thread server([lfd, &body] {
    int c = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) return;
    char buf[4096];
    (void)::recv(c, buf, sizeof buf, 0);
    std::string reply = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
                        std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
    size_t sent = 0;
    while (sent < reply.size()) {
      ssize_t n = ::send(c, reply.data() + sent, reply.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
    ::close(c);
  });
  CliRun r = RunCli({"--server", "http://127.0.0.1:" + std::to_string(ntohs(a.sin_port)), "stats"});
  server.join();
  ::close(lfd);
  EXPECT_EQ(r.exit, 5) << r.err;
  EXPECT_NE(r.err.find("nests deeper than 64 levels"), std::string::npos) << r.err;
}

TEST(CliUsage, BadArgumentsExit2) {
  const std::string nowhere = "http://127.0.0.1:" + std::to_string(FreeLoopbackPort());
  struct Case {
    std::vector<std::string> args;
    std::string err;
  };
  const std::string put_help = "\nRun 'delayq put --help' for help.\n";
  const std::vector<Case> cases = {
      {{"frobnicate"}, "delayq: unknown command 'frobnicate'\nRun 'delayq --help' for help.\n"},
      {{"put", "--bogus", "x"},
       "delayq: The following argument was not expected: --bogus" + put_help},
      {{"put", "-d", "5x", "x"},
       "delayq: bad duration '5x' for --delay (milliseconds, or a number with ms, s, m, h or d: "
       "250ms, 30s, 5m)" +
           put_help},
      {{"put", "--ttr", "0", "x"}, "delayq: --ttr must be at least 1ms" + put_help},
      {{"put", "-t", "-bad", "x"},
       "delayq: bad topic name '-bad' (1-200 bytes of A-Za-z0-9-+/;.$_() not starting with '-')" +
           put_help},
      {{"put", "-t", "a b", "x"},
       "delayq: bad topic name 'a b' (1-200 bytes of A-Za-z0-9-+/;.$_() not starting with '-')" +
           put_help},
      {{"put", "-k", "a b", "x"},
       "delayq: bad key 'a b' (1-200 bytes of printable ASCII without spaces)" + put_help},
      {{"put", "-p", "4294967296", "x"},
       "delayq: bad priority '4294967296' (0..4294967295)" + put_help},
      {{"put", "--max-tries", "-1", "x"},
       "delayq: bad --max-tries '-1' (0..4294967295)" + put_help},
      {{"put", "--at", "tomorrow", "x"},
       "delayq: bad time 'tomorrow' for --at (epoch milliseconds, or RFC 3339 like "
       "2026-05-01T09:00:00Z)" +
           put_help},
      {{"put", "--at", "1", "-d", "1s", "x"}, "delayq: --delay excludes --at" + put_help},
      {{"put", "--backoff", "1s,soon", "x"},
       "delayq: bad back-off '1s,soon' (a list like 4m,10m,1h; exp:<base>:<cap> like exp:1s:1h; "
       "or none)" +
           put_help},
      {{"put", "--file", "/nonexistent/body", "-t", "a"},
       "delayq: cannot open /nonexistent/body: No such file or directory\n"},
      {{"put", "--file", "/dev/null", "x"}, "delayq: give the body or --file, not both" + put_help},
      {{"-o", "yaml", "topics"},
       "delayq: bad output format 'yaml' (text, json, body or lease)\nRun 'delayq --help' for "
       "help.\n"},
      {{"-o", "body", "stats"},
       "delayq: -o body shows a job's body: it applies to reserve and peek only\nRun 'delayq "
       "stats --help' for help.\n"},
      {{"--io-timeout", "0", "stats"},
       "delayq: --io-timeout must be at least 1ms\nRun 'delayq --help' for help.\n"},
      {{"reserve", "-n", "0"},
       "delayq: bad --count '0' (1..1000)\nRun 'delayq reserve --help' for help.\n"},
      {{"reserve", "-n", "1001"},
       "delayq: bad --count '1001' (1..1000)\nRun 'delayq reserve --help' for help.\n"},
      {{"reserve", "-n", "2", "-o", "body"},
       "delayq: -o body shows one job's body: it does not go with --count above 1\nRun 'delayq "
       "reserve --help' for help.\n"},
      {{"reserve", "--timeout", "soon"},
       "delayq: bad duration 'soon' for --timeout (milliseconds, or a number with ms, s, m, h or "
       "d: 250ms, 30s, 5m)\nRun 'delayq reserve --help' for help.\n"},
      {{"finish"}, "delayq: ID is required\nRun 'delayq finish --help' for help.\n"},
      {{"finish", "abc"}, "delayq: bad job id 'abc'\nRun 'delayq finish --help' for help.\n"},
      {{"finish", "0"}, "delayq: bad job id '0'\nRun 'delayq finish --help' for help.\n"},
      {{"delete"}, "delayq: name at least one job id\nRun 'delayq delete --help' for help.\n"},
      {{"delete", "1", "-k", "k"},
       "delayq: give job ids or --key, not both\nRun 'delayq delete --help' for help.\n"},
      {{"delete", "1", "-t", "orders"},
       "delayq: --topic goes with --key (a job id names its job alone)\nRun 'delayq delete "
       "--help' for help.\n"},
      {{"release", "1", "-d", "x"},
       "delayq: bad duration 'x' for --delay (milliseconds, or a number with ms, s, m, h or d: "
       "250ms, 30s, 5m)\nRun 'delayq release --help' for help.\n"},
      {{"bury", "1", "-p", "x"},
       "delayq: bad priority 'x' (0..4294967295)\nRun 'delayq bury "
       "--help' for help.\n"},
      {{"peek"},
       "delayq: name one job: an id, --key KEY, or one of --ready, --delayed, --buried\nRun "
       "'delayq peek --help' for help.\n"},
      {{"peek", "1", "--ready"},
       "delayq: name one job: an id, --key KEY, or one of --ready, --delayed, --buried\nRun "
       "'delayq peek --help' for help.\n"},
      {{"peek", "1", "-t", "x"},
       "delayq: --topic goes with --key, --ready, --delayed or --buried\nRun 'delayq peek "
       "--help' for help.\n"},
      {{"kick", "0"},
       "delayq: bad bound '0' (1..4294967295)\nRun 'delayq kick --help' for "
       "help.\n"},
      {{"kick", "--job", "1", "5"},
       "delayq: --job kicks one job: give no topic or bound with it\nRun 'delayq kick --help' "
       "for help.\n"},
      {{"clear"}, "delayq: --topic is required\nRun 'delayq clear --help' for help.\n"},
      {{"clear", "-t", "a", "--state", "reserved"},
       "delayq: bad state 'reserved' (ready, delayed or buried; reserved jobs are never "
       "cleared)\nRun 'delayq clear --help' for help.\n"},
      {{"pause", "-t", "a"}, "delayq: DURATION is required\nRun 'delayq pause --help' for help.\n"},
      {{"pause", "-t", "a", "soon"},
       "delayq: bad duration 'soon' for the pause (milliseconds, or a number with ms, s, m, h or "
       "d: 250ms, 30s, 5m)\nRun 'delayq pause --help' for help.\n"},
      {{"topics", "extra"},
       "delayq: The following argument was not expected: extra\nRun 'delayq topics --help' for "
       "help.\n"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"-s", nowhere};
    args.insert(args.end(), c.args.begin(), c.args.end());
    CliRun r = RunCli(args);
    std::string joined;
    for (const std::string& a : c.args) joined += a + " ";
    EXPECT_EQ(r.exit, 2) << joined << "\n" << r;
    EXPECT_EQ(r.err, c.err) << joined;
    EXPECT_EQ(r.out, "") << joined;
  }
  CliRun bad_url = RunCli({"-s", "ftp://h", "stats"});
  EXPECT_EQ(bad_url.exit, 2);
  EXPECT_EQ(bad_url.err,
            "delayq: the server must be http://HOST[:PORT] or beanstalk://HOST[:PORT] (not "
            "'ftp://h')\nRun 'delayq --help' for help.\n");
  CliRun bad_env = RunCli({"stats"}, WithEnv({"DELAYQ_SERVER=http://h:99999"}));
  EXPECT_EQ(bad_env.exit, 2);
  EXPECT_EQ(bad_env.err,
            "delayq: bad port in the server's address 'http://h:99999' (1..65535)\nRun 'delayq "
            "--help' for help.\n");
}

TEST(CliUsage, NoBodyOnATerminal) {
  const std::string nowhere = "http://127.0.0.1:" + std::to_string(FreeLoopbackPort());
  CliRun r = RunCli({"-s", nowhere, "put"}, TtyInput());
  EXPECT_EQ(r.exit, 2) << r;
  EXPECT_EQ(r.err,
            "delayq: no body: give it as an argument, with --file, or on standard input (--file "
            "- reads a terminal)\nRun 'delayq put --help' for help.\n");
}

// ---- every command, over each transport ----------------------------------------

class CliBoth : public CliFixture, public ::testing::WithParamInterface<std::string> {
 protected:
  bool beanstalk() const { return GetParam() == "beanstalk"; }
  const std::string& url() const { return beanstalk() ? bean_url_ : http_url_; }
  CliRun Run(std::vector<std::string> args, const RunOptions& o = {}) {
    return At(url(), std::move(args), o);
  }
  // The wire code shown after a server's error message.
  std::string Code(const char* http, const char* beanstalk_reply) const {
    return beanstalk() ? beanstalk_reply : http;
  }
};

INSTANTIATE_TEST_SUITE_P(Transports, CliBoth, ::testing::Values("http", "beanstalk"),
                         [](const auto& info) { return info.param; });

TEST_P(CliBoth, Put) {
  CliRun r = Run({"put", "hello"});
  EXPECT_EQ(r.exit, 0) << r;
  EXPECT_EQ(r.out, "job 1 created (ready)\n");
  EXPECT_EQ(r.err, "");

  r = Run({"--json", "put", "-t", "orders", "-p", "7", "--ttr", "30s", "world"});
  EXPECT_EQ(r.exit, 0) << r;
  EXPECT_EQ(r.out, "{\"id\":2,\"created\":true,\"state\":\"ready\"}\n");

  r = Run({"put", "-t", "orders", "-d", "30m", "-k", "order-42", "close order 42"});
  EXPECT_EQ(r.exit, 0) << r;
  EXPECT_EQ(MaskedRun(r.out),
            beanstalk() ? "job 3 created (delayed)\n" : "job 3 created (delayed until <time>)\n");
  r = Run({"put", "-t", "orders", "-d", "30m", "-k", "order-42", "again"});
  EXPECT_EQ(r.exit, 0) << r;
  EXPECT_EQ(MaskedRun(r.out), beanstalk()
                                  ? "job 3 exists with key order-42 (delayed)\n"
                                  : "job 3 exists with key order-42 (delayed until <time>)\n");
  r = Run({"-o", "json", "put", "-t", "orders", "-k", "order-42", "again"});
  auto d = Json(r.out);
  ASSERT_TRUE(d.IsObject()) << r;
  EXPECT_EQ(d["id"].GetUint64(), 3u);
  EXPECT_FALSE(d["created"].GetBool());
  EXPECT_STREQ(d["state"].GetString(), "delayed");
  EXPECT_EQ(d.HasMember("due_ms"), !beanstalk());

  // A time in the past is now; the other options reach the job.
  r = Run({"put", "-t", "emails", "--at", "2024-01-01T09:00:00Z", "--max-tries", "3", "--backoff",
           "1s,2s", "-d", "0", "x"});
  EXPECT_EQ(r.exit, 2) << r;  // --at excludes --delay
  r = Run({"put", "-t", "emails", "--at", "2024-01-01T09:00:00Z", "--max-tries", "3", "--backoff",
           "1s,2s", "--ttr", "1500ms", "reminder"});
  EXPECT_EQ(r.exit, 0) << r;
  EXPECT_EQ(r.out, "job 4 created (ready)\n");
  CliRun peek = Http({"--json", "peek", "4"});
  d = Json(peek.out);
  ASSERT_TRUE(d.IsObject()) << peek;
  EXPECT_EQ(d["max_tries"].GetUint(), 3u);
  EXPECT_EQ(d["ttr_ms"].GetInt64(), 1500);
  EXPECT_EQ(d["priority"].GetUint(), 1024u);

  // Flags may follow the command and its arguments.
  r = Run({"put", "-t", "emails", "late", "--json"});
  EXPECT_EQ(r.out, "{\"id\":5,\"created\":true,\"state\":\"ready\"}\n") << r;
  // A body that looks like a command or an option.
  r = Run({"put", "-t", "emails", "--", "--json"});
  EXPECT_EQ(r.out, "job 6 created (ready)\n") << r;
  r = Run({"put", "-t", "emails", "stats"});
  EXPECT_EQ(r.out, "job 7 created (ready)\n") << r;
  EXPECT_EQ(Json(Http({"--json", "peek", "6"}).out)["body"].GetString(), std::string("--json"));
}

TEST_P(CliBoth, PutBodyFromStdinAndFile) {
  // Text, binary with NULs and beanstalkd framing inside, empty, large.
  const std::string framing = std::string("a\r\nput 0 0 60 1\r\nx\r\n\0z", 22);
  const std::string big = RandomBytes(1'500'000, 42);
  uint64_t id = 0;
  for (const std::string& body : {std::string("from stdin\n"), framing, std::string(), big}) {
    SCOPED_TRACE(body.size());
    ++id;
    CliRun r = Run({"put", "-t", "in"}, Input(body));
    EXPECT_EQ(r.exit, 0) << r;
    EXPECT_EQ(r.out, "job " + std::to_string(id) + " created (ready)\n");
    CliRun raw = Run({"-o", "body", "peek", std::to_string(id)});
    EXPECT_EQ(raw.exit, 0) << raw.err;
    EXPECT_TRUE(raw.out == body) << "the body came back different (" << raw.out.size() << " bytes)";
    CliRun json = Run({"--json", "peek", std::to_string(id)});
    auto d = Json(json.out);
    ASSERT_TRUE(d.IsObject()) << json.err;
    EXPECT_EQ(d.HasMember("body_base64"), body == framing || body == big);
  }
  // The binary body's JSON is base64.
  CliRun json = Run({"--json", "peek", "2"});
  EXPECT_NE(json.out.find("\"body_base64\":\"YQ0KcHV0IDAgMCA2MCAxDQp4DQoAeg==\""),
            std::string::npos)
      << json.out;
  // Text output does not print a binary body.
  CliRun text = Run({"peek", "2"});
  EXPECT_NE(text.out.find("\nbody:      22 bytes, not text (-o json or -o body shows it)\n"),
            std::string::npos)
      << text.out;

  TempDir dir;
  const std::string file = dir.path() + "/body.bin";
  std::ofstream(file, std::ios::binary) << framing;
  CliRun r = Run({"put", "-t", "in", "--file", file});
  EXPECT_EQ(r.out, "job 5 created (ready)\n") << r;
  EXPECT_EQ(Run({"-o", "body", "peek", "5"}).out, framing);
  r = Run({"put", "-t", "in", "--file", "-"}, Input("dash"));
  EXPECT_EQ(r.out, "job 6 created (ready)\n") << r;
  EXPECT_EQ(Run({"-o", "body", "peek", "6"}).out, "dash");
}

TEST_P(CliBoth, ReserveAndFinish) {
  PutJob("emails", "first", {"-p", "5"});
  PutJob("emails", "second");
  PutJob("sms", "third", {"-p", "1"});
  // By priority across the topics, then first put.
  CliRun r = Run({"--json", "reserve", "-t", "emails", "-t", "sms", "-n", "2", "--finish"});
  ASSERT_EQ(r.exit, 0) << r;
  auto jobs = JsonLines(r.out);
  ASSERT_EQ(jobs.size(), 2u) << r.out;
  EXPECT_EQ(jobs[0]["id"].GetUint64(), 3u);
  EXPECT_STREQ(jobs[0]["topic"].GetString(), "sms");
  EXPECT_STREQ(jobs[0]["state"].GetString(), "reserved");
  EXPECT_STREQ(jobs[0]["body"].GetString(), "third");
  EXPECT_EQ(jobs[0]["priority"].GetUint(), 1u);
  EXPECT_EQ(jobs[0]["reserves"].GetUint(), 1u);
  EXPECT_EQ(jobs[1]["id"].GetUint64(), 1u);
  EXPECT_EQ(jobs[0].HasMember("deadline_ms"), !beanstalk());
  EXPECT_EQ(jobs[0].HasMember("ttr_s"), beanstalk());
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(StateOf(3), "gone");
  EXPECT_EQ(StateOf(1), "gone");

  // The text form; --finish takes the job.
  r = Run({"reserve", "-t", "emails,sms", "--finish"});
  ASSERT_EQ(r.exit, 0) << r;
  EXPECT_EQ(MaskedRun(r.out),
            beanstalk() ? "id:        2\n"
                          "topic:     emails\n"
                          "state:     reserved\n"
                          "priority:  1024\n"
                          "time left: <s>\n"
                          "age:       <s>\n"
                          "ttr:       60s\n"
                          "delay:     0s\n"
                          "counts:    reserves 1, timeouts 0, releases 0, buries 0, kicks 0\n"
                          "body:      6 bytes\n"
                          "second\n"
                        : "id:        2\n"
                          "topic:     emails\n"
                          "state:     reserved\n"
                          "lease:     <hex>\n"
                          "priority:  1024\n"
                          "deadline:  <time>\n"
                          "created:   <time>\n"
                          "ttr:       1m\n"
                          "delay:     0ms\n"
                          "max tries: unlimited\n"
                          "counts:    reserves 1, timeouts 0, releases 0, buries 0, kicks 0\n"
                          "body:      6 bytes\n"
                          "second\n");
  EXPECT_EQ(StateOf(2), "gone");

  // Nothing left: exit 4, nothing on stdout.
  r = Run({"reserve", "-t", "emails", "-t", "sms"});
  EXPECT_EQ(r.exit, 4) << r;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "delayq: no job was ready in emails, sms within 0ms\n");
  r = Run({"--json", "reserve", "--timeout", "1s", "-n", "5"});
  EXPECT_EQ(r.exit, 4) << r;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "delayq: no job was ready in default within 1s\n");

  // A reserve that waits gets a job put meanwhile.
  std::thread later([this] {
    std::this_thread::sleep_for(300ms);
    PutJob("late", "came later");
  });
  r = Run({"-o", "body", "reserve", "-t", "late", "--timeout", "30s", "--finish"});
  later.join();
  EXPECT_EQ(r.exit, 0) << r;
  EXPECT_EQ(r.out, "came later");
}

// Over HTTP an operation on a reserved job carries its lease. Over the
// beanstalkd protocol only the connection that reserved a job holds it, and
// each delayq command has its own: finish, release, bury and touch are
// refused before anything is sent (exit 2), whatever the job's state.
TEST_P(CliBoth, FinishReleaseBuryTouchKick) {
  auto not_holder = [](std::string_view op, const std::string& id) {
    return "delayq: " + std::string(op) + " " + id +
           ": over the beanstalkd protocol only the connection that reserved a job may " +
           std::string(op) +
           " it, and each delayq command opens its own (reserve --finish finishes what it "
           "reserves; over --server http://... a job's lease may)\n";
  };
  const uint64_t id = PutJob("work", "job");
  const std::string s = std::to_string(id);
  // A job held by a lease (reserved over HTTP) is the lease's alone.
  ASSERT_EQ(ReserveOverHttp("work"), id);
  CliRun r = Run({"touch", s + (beanstalk() ? "" : "@0123456789abcdef")});
  EXPECT_EQ(r.exit, beanstalk() ? 2 : 1) << r;
  EXPECT_EQ(r.err, beanstalk() ? not_holder("touch", s)
                               : "delayq: job 1 is reserved under another lease: the lease no "
                                 "longer holds it (lease_lost)\n");
  EXPECT_EQ(StateOf(id), "reserved");
  EXPECT_EQ(Run({"delete", s}).exit, beanstalk() ? 3 : 0) << "an operator's delete over HTTP";
  if (beanstalk()) EXPECT_EQ(Http({"delete", s}).exit, 0);
  EXPECT_EQ(StateOf(id), "gone");

  // Not reserved: over HTTP the lease named does not hold it.
  const uint64_t buried = PutJob("work", "b");
  const std::string bs = std::to_string(buried);
  ASSERT_EQ(ReserveOverHttp("work"), buried);
  ASSERT_EQ(Http({"delete", bs}).exit, 0);
  const uint64_t other = PutJob("work", "c");
  const std::string os = std::to_string(other);
  for (const char* op : {"finish", "release", "bury", "touch"}) {
    r = Run({op, os + (beanstalk() ? "" : "@0123456789abcdef")});
    EXPECT_EQ(r.exit, beanstalk() ? 2 : 1) << op << r;
    EXPECT_EQ(r.err, beanstalk() ? not_holder(op, os)
                                 : "delayq: job " + os +
                                       " is ready now: the lease no longer holds it (lease_lost)\n")
        << op;
    EXPECT_EQ(r.out, "");
  }
  EXPECT_EQ(StateOf(other), "ready");

  // No such job: exit 3 over HTTP.
  for (const char* op : {"finish", "release", "bury", "touch"}) {
    r = Run({op, std::string("999") + (beanstalk() ? "" : "@0123456789abcdef")});
    EXPECT_EQ(r.exit, beanstalk() ? 2 : 3) << op << r;
    EXPECT_EQ(r.err, beanstalk() ? not_holder(op, "999") : "delayq: no job 999 (not_found)\n")
        << op;
  }
  r = Run({"kick", "--job", "999"});
  EXPECT_EQ(r.exit, 3) << r;
  EXPECT_EQ(r.err, "delayq: no job 999 " + Code("(not_found)", "(NOT_FOUND)") + "\n");
  // kick --job is one command; a refusal says why.
  r = Run({"kick", "--job", os});
  EXPECT_EQ(r.exit, 1) << r;
  EXPECT_EQ(r.err, "delayq: job " + os + " is ready, not buried or delayed" +
                       (beanstalk() ? "" : " (conflict)") + "\n");

  // A job a beanstalkd connection holds is that connection's.
  const uint64_t held = PutJob("held", "mine");
  RawClient worker(server_.port());
  ASSERT_EQ(worker.Call("watch held\r\n"), "WATCHING 2\r\n");
  const std::string hs = std::to_string(held);
  ASSERT_EQ(worker.Call("reserve-with-timeout 0\r\n"), "RESERVED " + hs + " 4\r\nmine\r\n");
  r = Run({"finish", hs + (beanstalk() ? "" : "@0123456789abcdef")});
  EXPECT_EQ(r.exit, beanstalk() ? 2 : 1) << r;
  EXPECT_EQ(r.err, beanstalk() ? not_holder("finish", hs)
                               : "delayq: job " + hs +
                                     " is reserved under another lease: the lease no longer holds "
                                     "it (lease_lost)\n");
  EXPECT_EQ(StateOf(held), "reserved");
}

TEST_P(CliBoth, PeekAndDelete) {
  PutJob("orders", "close order 42", {"-k", "order-42", "-d", "30m"});
  PutJob("orders", "other");
  CliRun r = Run({"peek", "-t", "orders", "-k", "order-42"});
  EXPECT_EQ(r.exit, 0) << r;
  EXPECT_EQ(MaskedRun(r.out),
            beanstalk() ? "id:        1\n"
                          "topic:     orders\n"
                          "key:       order-42\n"
                          "state:     delayed\n"
                          "priority:  1024\n"
                          "time left: <s>\n"
                          "age:       <s>\n"
                          "ttr:       60s\n"
                          "delay:     1800s\n"
                          "counts:    reserves 0, timeouts 0, releases 0, buries 0, kicks 0\n"
                          "body:      14 bytes\n"
                          "close order 42\n"
                        : "id:        1\n"
                          "topic:     orders\n"
                          "key:       order-42\n"
                          "state:     delayed\n"
                          "priority:  1024\n"
                          "due:       <time>\n"
                          "created:   <time>\n"
                          "ttr:       1m\n"
                          "delay:     30m\n"
                          "max tries: unlimited\n"
                          "counts:    reserves 0, timeouts 0, releases 0, buries 0, kicks 0\n"
                          "body:      14 bytes\n"
                          "close order 42\n");
  r = Run({"--json", "peek", "2"});
  auto d = Json(r.out);
  ASSERT_TRUE(d.IsObject()) << r;
  EXPECT_EQ(d["id"].GetUint64(), 2u);
  EXPECT_STREQ(d["topic"].GetString(), "orders");
  EXPECT_STREQ(d["state"].GetString(), "ready");
  EXPECT_STREQ(d["body"].GetString(), "other");
  EXPECT_FALSE(d.HasMember("key"));
  r = Run({"-o", "body", "peek", "2"});
  EXPECT_EQ(r.out, "other");

  r = Run({"peek", "999"});
  EXPECT_EQ(r.exit, 3) << r;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "delayq: no job 999 " + Code("(not_found)", "(NOT_FOUND)") + "\n");
  r = Run({"peek", "-t", "orders", "--key", "nope"});
  EXPECT_EQ(r.exit, 3) << r;
  EXPECT_EQ(r.err, "delayq: no job with key 'nope' in topic 'orders' " +
                       Code("(not_found)", "(NOT_FOUND)") + "\n");

  // Over the beanstalkd protocol a delete by key is one delete-key, which
  // answers no id.
  r = Run({"delete", "-t", "orders", "--key", "order-42"});
  EXPECT_EQ(r.exit, 0) << r;
  EXPECT_EQ(r.out, beanstalk() ? "job with key 'order-42' in topic 'orders' deleted\n"
                               : "job 1 deleted\n");
  EXPECT_EQ(StateOf(1), "gone");
  r = Run({"delete", "-t", "orders", "--key", "order-42"});
  EXPECT_EQ(r.exit, 3) << r;
  EXPECT_EQ(r.err, beanstalk() ? "delayq: no job with key 'order-42' in topic 'orders', or it is "
                                 "reserved by another connection (NOT_FOUND)\n"
                               : "delayq: no job with key 'order-42' in topic 'orders' "
                                 "(not_found)\n");
  // Several ids: each is tried; the exit code is the first failure's.
  PutJob("orders", "third");
  r = Run({"delete", "2", "999", "3"});
  EXPECT_EQ(r.exit, 3) << r;
  EXPECT_EQ(r.out, "job 2 deleted\njob 3 deleted\n");
  EXPECT_EQ(r.err, beanstalk() ? "delayq: no job 999, or it is reserved by another connection "
                                 "(NOT_FOUND)\n"
                               : "delayq: no job 999 (not_found)\n");
  r = Run({"--json", "delete", "2"});
  EXPECT_EQ(r.exit, 3);
  PutJob("orders", "fourth");
  r = Run({"--json", "delete", "4"});
  EXPECT_EQ(r.out, "{\"id\":4,\"deleted\":true}\n") << r;
}

TEST_P(CliBoth, TopicsStatsKickClearPause) {
  PutJob("orders", "a");
  PutJob("orders", "b", {"-d", "1h"});
  PutJob("emails", "c");
  CliRun r = Run({"topics"});
  EXPECT_EQ(r.exit, 0) << r;
  EXPECT_EQ(r.out, "default\norders\nemails\n");
  r = Run({"--json", "topics"});
  EXPECT_EQ(r.out, "{\"topics\":[\"default\",\"orders\",\"emails\"]}\n");

  r = Run({"--json", "stats", "-t", "orders"});
  auto d = Json(r.out);
  ASSERT_TRUE(d.IsObject()) << r;
  EXPECT_STREQ(d["name"].GetString(), "orders");
  EXPECT_EQ(d["jobs"]["ready"].GetUint64(), 1u);
  EXPECT_EQ(d["jobs"]["delayed"].GetUint64(), 1u);
  EXPECT_EQ(d["total_jobs"].GetUint64(), 2u);
  EXPECT_FALSE(d["paused"].GetBool());
  r = Run({"stats", "-t", "orders"});
  EXPECT_TRUE(r.out.starts_with("name:  ")) << r.out;
  EXPECT_NE(r.out.find("\njobs:  "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" 1 ready, 0 reserved, 1 delayed, 0 buried (0 urgent)\n"), std::string::npos)
      << r.out;
  r = Run({"stats", "-t", "nope"});
  EXPECT_EQ(r.exit, 3) << r;
  EXPECT_EQ(r.err, "delayq: no topic 'nope' " + Code("(not_found)", "(NOT_FOUND)") + "\n");

  r = Run({"--json", "stats"});
  d = Json(r.out);
  ASSERT_TRUE(d.IsObject()) << r;
  EXPECT_STREQ(d["version"].GetString(), "0.1.0");
  EXPECT_EQ(d["jobs"]["ready"].GetUint64(), 2u);
  EXPECT_EQ(d["total_jobs"].GetUint64(), 3u);
  EXPECT_FALSE(d["draining"].GetBool());
  EXPECT_EQ(d["max_job_size"].GetUint64(), 2000000u);
  EXPECT_EQ(d.HasMember("uptime_ms"), !beanstalk());
  EXPECT_EQ(d.HasMember("cmd_put"), beanstalk());
  r = Run({"stats"});
  EXPECT_TRUE(r.out.starts_with("version: ")) << r.out;
  EXPECT_NE(r.out.find("\ndraining: "), std::string::npos) << r.out;

  // Kick: buried first, else delayed.
  r = Run({"kick", "-t", "orders", "5"});
  EXPECT_EQ(r.out, "kicked 1 job\n") << r;
  r = Run({"--json", "kick", "-t", "orders"});
  EXPECT_EQ(r.out, "{\"kicked\":0}\n") << r;

  r = Run({"clear", "-t", "orders", "--state", "buried", "--state", "delayed"});
  EXPECT_EQ(r.out, "cleared 0 jobs\n") << r;
  r = Run({"--json", "clear", "-t", "orders", "--state", "ready"});
  EXPECT_EQ(r.out, "{\"cleared\":2}\n") << r;
  r = Run({"clear", "-t", "emails"});
  EXPECT_EQ(r.out, "cleared 1 job\n") << r;
  r = Run({"clear", "-t", "nope"});
  EXPECT_EQ(r.exit, 3) << r;
  EXPECT_EQ(r.err, "delayq: no topic 'nope' " + Code("(not_found)", "(NOT_FOUND)") + "\n");

  PutJob("orders", "d");
  r = Run({"pause", "-t", "orders", "10m"});
  EXPECT_EQ(r.exit, 0) << r;
  EXPECT_EQ(r.out, "topic orders paused for 10m\n");
  EXPECT_TRUE(Json(Run({"--json", "stats", "-t", "orders"}).out)["paused"].GetBool());
  r = Run({"reserve", "-t", "orders"});
  EXPECT_EQ(r.exit, 4) << r;
  r = Run({"--json", "pause", "-t", "orders", "0"});
  EXPECT_EQ(r.out, "{\"topic\":\"orders\",\"pause_ms\":0}\n") << r;
  r = Run({"pause", "-t", "orders", "0"});
  EXPECT_EQ(r.out, "topic orders unpaused\n") << r;
  EXPECT_EQ(Run({"-o", "body", "reserve", "-t", "orders", "--finish"}).out, "d");
  r = Run({"pause", "-t", "nope", "1s"});
  EXPECT_EQ(r.exit, 3) << r;
  EXPECT_EQ(r.err, "delayq: no topic 'nope' " + Code("(not_found)", "(NOT_FOUND)") + "\n");
}

TEST_P(CliBoth, ServerRefuses) {
  // A body over the server's limit (-z 2000000).
  CliRun r = Run({"put"}, Input(std::string(2'000'001, 'x')));
  EXPECT_EQ(r.exit, 1) << r;
  EXPECT_EQ(r.err, beanstalk() ? "delayq: the job's body is larger than the server's maximum "
                                 "job size (JOB_TOO_BIG)\n"
                               : "delayq: job body exceeds the maximum size (job_too_big)\n");
  // Draining: puts are refused, everything else works.
  server_.Signal(SIGUSR1);
  const auto deadline = Clock::now() + 20s;
  while (!Json(Http({"--json", "stats"}).out)["draining"].GetBool() && Clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  r = Run({"put", "x"});
  EXPECT_EQ(r.exit, 1) << r;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "delayq: the server is draining: it takes no new jobs " +
                       Code("(draining)", "(DRAINING)") + "\n");
  EXPECT_EQ(Run({"topics"}).exit, 0);
}

TEST_P(CliBoth, EnvironmentAndGlobalOptions) {
  CliRun r = RunCli({"put", "x"}, WithEnv({"DELAYQ_SERVER=" + url()}));
  EXPECT_EQ(r.out, "job 1 created (ready)\n") << r;
  r = RunCli({"put", "x"}, WithEnv({"DELAYQ_SERVER=" + url(), "DELAYQ_OUTPUT=json"}));
  EXPECT_EQ(r.out, "{\"id\":2,\"created\":true,\"state\":\"ready\"}\n") << r;
  r = RunCli({"-o", "text", "put", "x"}, WithEnv({"DELAYQ_SERVER=" + url(), "DELAYQ_OUTPUT=json"}));
  EXPECT_EQ(r.out, "job 3 created (ready)\n") << r;
  // --server wins over DELAYQ_SERVER.
  r = RunCli({"topics", "--server", url()}, WithEnv({"DELAYQ_SERVER=http://127.0.0.1:1"}));
  EXPECT_EQ(r.exit, 0) << r;
  EXPECT_EQ(r.out, "default\n");
  r = RunCli({"topics"}, WithEnv({"DELAYQ_SERVER=" + url(), "DELAYQ_OUTPUT=xml"}));
  EXPECT_EQ(r.exit, 2);
  EXPECT_EQ(r.err,
            "delayq: bad output format 'xml' (text, json, body or lease)\nRun 'delayq --help' for "
            "help.\n");
}

// ---- what one transport has and the other has not ---------------------------------------

using CliHttp = CliFixture;

// Over HTTP a reservation is held by its lease: the CLI names a job as
// ID@LEASE (reserve -o lease prints it), or ID with --lease.
TEST_F(CliHttp, FinishReleaseBuryTouchKickCarryTheLease) {
  const uint64_t id = PutJob("work", "job");
  const std::string s = std::to_string(id);
  auto reserve = [&] {
    CliRun r = Http({"-o", "lease", "reserve", "-t", "work"});
    EXPECT_EQ(r.exit, 0) << r;
    EXPECT_NE(r.out.find('@'), std::string::npos) << r;
    return r.out.substr(0, r.out.size() - (r.out.ends_with('\n') ? 1 : 0));
  };
  std::string job = reserve();
  EXPECT_EQ(job.rfind(s + "@", 0), 0u) << job;
  // Without the lease: a usage error, nothing sent.
  CliRun r = Http({"release", s});
  EXPECT_EQ(r.exit, 2) << r;
  EXPECT_NE(r.err.find("name it as 1@LEASE or with --lease"), std::string::npos) << r;
  EXPECT_EQ(StateOf(id), "reserved");
  r = Http({"release", job});
  EXPECT_EQ(r.exit, 0) << r;
  EXPECT_EQ(r.out, "job 1 released (ready)\n");
  // The lease went with the reservation.
  r = Http({"finish", job});
  EXPECT_EQ(r.exit, 1) << r;
  EXPECT_EQ(r.err, "delayq: job 1 is ready now: the lease no longer holds it (lease_lost)\n");
  std::string second = reserve();
  EXPECT_NE(second, job);
  r = Http({"touch", job});
  EXPECT_EQ(r.exit, 1) << r;
  EXPECT_EQ(r.err,
            "delayq: job 1 is reserved under another lease: the lease no longer holds it "
            "(lease_lost)\n");
  r = Http(
      {"release", s, "--lease", second.substr(second.find('@') + 1), "--delay", "1h", "-p", "3"});
  EXPECT_EQ(r.exit, 0) << r;
  EXPECT_EQ(MaskedRun(r.out), "job 1 released (delayed until <time>)\n");
  EXPECT_EQ(Json(Http({"--json", "peek", s}).out)["priority"].GetUint(), 3u);
  r = Http({"kick", "--job", s});
  EXPECT_EQ(r.out, "job 1 kicked (ready)\n") << r;
  r = Http({"--json", "kick", "--job", s});
  EXPECT_EQ(r.exit, 1) << r;
  EXPECT_EQ(r.err, "delayq: job 1 is ready, not buried or delayed (conflict)\n");

  job = reserve();
  r = Http({"touch", job});
  EXPECT_EQ(MaskedRun(r.out), "job 1 touched (reserved until <time>)\n") << r;
  r = Http({"--json", "bury", job, "-p", "9"});
  EXPECT_EQ(r.exit, 0) << r;
  EXPECT_EQ(r.out, "{\"id\":1,\"state\":\"buried\",\"priority\":9}\n");
  EXPECT_EQ(StateOf(id), "buried");
  r = Http({"kick", "-t", "work", "10"});
  EXPECT_EQ(r.out, "kicked 1 job\n") << r;
  job = reserve();
  r = Http({"--json", "finish", job});
  EXPECT_EQ(r.exit, 0) << r;
  EXPECT_EQ(r.out, "{\"id\":1,\"deleted\":true}\n");
  EXPECT_EQ(StateOf(id), "gone");

  // Several jobs, each with its lease; --lease goes with one id only.
  PutJob("work", "a");
  PutJob("work", "b");
  std::string a = reserve.operator()(), b;
  (void)a;
  r = Http({"-o", "lease", "reserve", "-t", "work"});
  b = r.out.substr(0, r.out.find('\n'));
  r = Http({"finish", "2", "3", "--lease", "0123456789abcdef"});
  EXPECT_EQ(r.exit, 2) << r;
  r = Http({"finish", "2@", "3"});
  EXPECT_EQ(r.exit, 2) << r;
  r = Http({"delete", "2@0123456789abcdef"});
  EXPECT_EQ(r.exit, 2) << r;

  // No such job: exit 3.
  for (const char* op : {"finish", "release", "bury", "touch"}) {
    r = Http({op, "999@0123456789abcdef"});
    EXPECT_EQ(r.exit, 3) << op << r;
    EXPECT_EQ(r.err, "delayq: no job 999 (not_found)\n") << op;
  }
}

// schedule: every action, in text and as JSON (the reply of the HTTP API,
// as docs/schedules.md shows it); the body from --body, --body-file and
// standard input, the whole schedule from --from-json; a replacement keeps
// its anchor.
TEST_F(CliHttp, ScheduleEveryAction) {
  const std::vector<std::string> heartbeat = {"schedule",
                                              "set",
                                              "heartbeat",
                                              "--cron",
                                              "@every 30s",
                                              "-t",
                                              "health",
                                              "--body",
                                              "ping",
                                              "-p",
                                              "10",
                                              "--start",
                                              "2030-01-01T00:00:00Z",
                                              "--missed",
                                              "one"};
  const std::string heartbeat_json =
      R"({"name":"heartbeat","cron":"@every 30s","tz":"","topic":"health","job":{"body":"ping","priority":10,"ttr_ms":60000,"delay_ms":0,"max_tries":0,"backoff":"none"},"start_ms":1893456000000,"end_ms":null,"missed":"one","paused":false,"anchor_ms":1893456000000,"next":[{"at_ms":1893456000000,"at":"2030-01-01T00:00:00Z"},{"at_ms":1893456030000,"at":"2030-01-01T00:00:30Z"},{"at_ms":1893456060000,"at":"2030-01-01T00:01:00Z"},{"at_ms":1893456090000,"at":"2030-01-01T00:01:30Z"},{"at_ms":1893456120000,"at":"2030-01-01T00:02:00Z"}]})";
  const std::string heartbeat_text =
      "schedule heartbeat: @every 30s, into health\n"
      "job:     priority 10, ttr 1m, delay 0ms, max tries 0, back-off none\n"
      "body:    4 bytes\n"
      "ping\n"
      "start:   2030-01-01T00:00:00.000Z\n"
      "missed:  one\n"
      "next:    2030-01-01T00:00:00Z\n"
      "next:    2030-01-01T00:00:30Z\n"
      "next:    2030-01-01T00:01:00Z\n"
      "next:    2030-01-01T00:01:30Z\n"
      "next:    2030-01-01T00:02:00Z\n";
  std::vector<std::string> json_set = heartbeat;
  json_set.insert(json_set.begin(), "--json");
  CliRun r = Http(json_set);
  ASSERT_EQ(r.exit, 0) << r;
  EXPECT_EQ(r.out, heartbeat_json + "\n");
  r = Http(heartbeat);  // the same again: stored as it was
  ASSERT_EQ(r.exit, 0) << r;
  EXPECT_EQ(r.out, heartbeat_text);
  r = Http({"schedule", "get", "heartbeat"});
  ASSERT_EQ(r.exit, 0) << r;
  EXPECT_EQ(r.out, heartbeat_text);
  r = Http({"--json", "schedule", "get", "heartbeat"});
  ASSERT_EQ(r.exit, 0) << r;
  EXPECT_EQ(r.out, heartbeat_json + "\n");

  // A zone, an end, a delay, a back-off; the body from a file.
  TempDir dir;
  const std::string file = dir.path() + "/report.txt";
  std::ofstream(file) << "build the report";
  r = Http({"schedule",      "set",          "nightly-report",
            "--cron",        "30 2 * * *",   "--tz",
            "Europe/Berlin", "-t",           "reports",
            "--body-file",   file,           "--ttr",
            "10m",           "--max-tries",  "3",
            "--delay",       "5s",           "--backoff",
            "1m,5m",         "--start",      "2030-03-29T00:00:00Z",
            "--end",         "1901149200000"});
  ASSERT_EQ(r.exit, 0) << r;
  EXPECT_EQ(r.out,
            "schedule nightly-report: 30 2 * * * in Europe/Berlin, into reports\n"
            "job:     priority 1024, ttr 10m, delay 5s, max tries 3, back-off 1m,5m\n"
            "body:    16 bytes\n"
            "build the report\n"
            "start:   2030-03-29T00:00:00.000Z\n"
            "end:     2030-03-31T01:00:00.000Z\n"
            "missed:  skip\n"
            "next:    2030-03-29T02:30:00+01:00\n"
            "next:    2030-03-30T02:30:00+01:00\n"
            "next:    2030-03-31T03:00:00+02:00\n");

  r = Http({"schedule", "list"});
  ASSERT_EQ(r.exit, 0) << r;
  EXPECT_EQ(r.out,
            "heartbeat: @every 30s, into health; next 2030-01-01T00:00:00Z\n"
            "nightly-report: 30 2 * * * in Europe/Berlin, into reports; next "
            "2030-03-29T02:30:00+01:00\n");
  r = Http({"--json", "schedule", "list"});
  ASSERT_EQ(r.exit, 0) << r;
  auto list = Json(r.out);
  ASSERT_TRUE(list.IsObject()) << r.out;
  EXPECT_EQ(list["schedules"].Size(), 2u);

  r = Http({"schedule", "pause", "heartbeat"});
  ASSERT_EQ(r.exit, 0) << r;
  EXPECT_TRUE(r.out.starts_with("schedule heartbeat: @every 30s, into health (paused)\n")) << r;
  r = Http({"--json", "schedule", "get", "heartbeat"});
  EXPECT_TRUE(Json(r.out)["paused"].GetBool()) << r;
  r = Http({"--json", "schedule", "resume", "heartbeat"});
  ASSERT_EQ(r.exit, 0) << r;
  EXPECT_EQ(r.out, heartbeat_json + "\n");

  r = Http({"schedule", "delete", "heartbeat"});
  ASSERT_EQ(r.exit, 0) << r;
  EXPECT_EQ(r.out, "schedule heartbeat deleted\n");
  r = Http({"schedule", "get", "heartbeat"});
  EXPECT_EQ(r.exit, 3) << r;
  EXPECT_EQ(r.err, "delayq: no schedule 'heartbeat' (not_found)\n");
  r = Http({"schedule", "delete", "heartbeat"});
  EXPECT_EQ(r.exit, 3) << r;
  r = Http({"--json", "schedule", "delete", "nightly-report"});
  ASSERT_EQ(r.exit, 0) << r;
  EXPECT_EQ(r.out, "{\"deleted\":\"nightly-report\"}\n");
  r = Http({"schedule", "list"});
  ASSERT_EQ(r.exit, 0) << r;
  EXPECT_EQ(r.out, "no schedules\n");

  // The body from standard input (bytes that are not text go as base64),
  // and the whole schedule from --from-json, given or on standard input.
  const std::string bytes("\x00\xff\x01", 3);
  r = Http({"--json", "schedule", "set", "bin", "--cron", "@daily", "-t", "t"}, Input(bytes));
  ASSERT_EQ(r.exit, 0) << r;
  EXPECT_STREQ(Json(r.out)["job"]["body_base64"].GetString(), "AP8B") << r.out;
  const std::string whole = R"({"cron":"@every 1m","topic":"t","job":{"body":"from json"}})";
  r = Http({"--json", "schedule", "set", "whole", "--from-json", whole});
  ASSERT_EQ(r.exit, 0) << r;
  auto first = Json(r.out);
  ASSERT_TRUE(first.IsObject()) << r.out;
  EXPECT_STREQ(first["job"]["body"].GetString(), "from json");
  // A replacement from standard input keeps the anchor @every counts from.
  std::this_thread::sleep_for(20ms);
  r = Http({"--json", "schedule", "set", "whole", "--from-json", "-"},
           Input(R"({"cron":"@every 1m","topic":"t","job":{"body":"again"}})"));
  ASSERT_EQ(r.exit, 0) << r;
  auto second = Json(r.out);
  ASSERT_TRUE(second.IsObject()) << r.out;
  EXPECT_STREQ(second["job"]["body"].GetString(), "again");
  EXPECT_EQ(second["anchor_ms"].GetInt64(), first["anchor_ms"].GetInt64());
}

// schedule: what the command line gets wrong is a usage error (exit 2,
// nothing sent); what the server refuses is shown in its words (exit 1).
TEST_F(CliHttp, ScheduleBadInput) {
  struct Case {
    std::vector<std::string> args;
    int exit;
    std::string err;
  };
  const std::string help = "\nRun 'delayq schedule --help' for help.\n";
  const std::vector<Case> cases = {
      {{"schedule", "set", "x", "-t", "t", "--body", "b"},
       2,
       "delayq: schedule set needs --cron (or --from-json)" + help},
      {{"schedule", "set", "x", "--cron", "@daily", "--body", "b"},
       2,
       "delayq: schedule set needs --topic" + help},
      {{"schedule", "frobnicate", "x"},
       2,
       "delayq: bad action 'frobnicate' (set, get, list, pause, resume or delete)" + help},
      {{"schedule", "get"}, 2, "delayq: schedule get needs the schedule's NAME" + help},
      {{"schedule", "list", "x"}, 2, "delayq: schedule list takes no NAME" + help},
      {{"schedule", "get", "x", "--cron", "@daily"},
       2,
       "delayq: --cron goes with 'schedule set'" + help},
      {{"schedule", "delete", "x", "--from-json", "{}"},
       2,
       "delayq: --from-json goes with 'schedule set'" + help},
      {{"schedule", "set", "x", "--from-json", "{}", "--cron", "@daily"},
       2,
       "delayq: --from-json gives the whole schedule: it goes with no --cron" + help},
      {{"schedule", "set", "x", "--cron", "@daily", "-t", "t", "--missed", "all"},
       2,
       "delayq: bad --missed 'all' (skip or one)" + help},
      {{"schedule", "set", "x", "--cron", "@daily", "-t", "t", "--start", "tomorrow"},
       2,
       "delayq: bad time 'tomorrow' for --start (epoch milliseconds, or RFC 3339 like "
       "2026-05-01T09:00:00Z)" +
           help},
      {{"schedule", "set", "x", "--cron", "@daily", "-t", "t", "--ttr", "0"},
       2,
       "delayq: --ttr must be at least 1ms" + help},
      {{"schedule", "set", "x", "--cron", "@daily", "-t", "t", "--delay", "5x"},
       2,
       "delayq: bad duration '5x' for --delay (milliseconds, or a number with ms, s, m, h or d: "
       "250ms, 30s, 5m)" +
           help},
      {{"schedule", "set", "x", "--cron", "@daily", "-t", "-bad"},
       2,
       "delayq: bad topic name '-bad' (1-200 bytes of A-Za-z0-9-+/;.$_() not starting with '-')" +
           help},
      {{"schedule", "set", "x", "--cron", "@daily", "-t", "t", "--body", "b", "--body-file", "f"},
       2,
       "delayq: give --body or --body-file, not both" + help},
      {{"schedule", "set", "x", "--cron", "@daily", "-t", "t", "--backoff", "zzz"},
       2,
       "delayq: bad back-off 'zzz' (a list like 4m,10m,1h; exp:<base>:<cap> like exp:1s:1h; or "
       "none)" +
           help},
      {{"-o", "body", "schedule", "list"},
       2,
       "delayq: -o body shows a job's body: it applies to reserve and peek only" + help},
      // The server's words.
      {{"schedule", "set", "x", "--cron", "0 25 * * *", "-t", "t", "--body", "b"},
       1,
       "delayq: hour: 25 is out of range 0..23 (invalid_argument)\n"},
      {{"schedule", "set", "x", "--cron", "@every 1ms", "-t", "t", "--body", "b"},
       1,
       "delayq: @every: at least 100ms (invalid_argument)\n"},
      {{"schedule", "set", "x", "--cron", "@daily", "--tz", "Mars/Olympus", "-t", "t"},
       1,
       "delayq: unknown time zone 'Mars/Olympus' (an IANA name such as Europe/Berlin) "
       "(invalid_argument)\n"},
      {{"schedule", "set", "x", "--cron", "@daily", "-t", "t", "--start", "5000", "--end", "1000"},
       1,
       "delayq: 'end' is before 'start' (invalid_argument)\n"},
      {{"schedule", "set", "a b", "--cron", "@daily", "-t", "t"},
       1,
       "delayq: a schedule name is 1 to 150 bytes of A-Z a-z 0-9 . _ - (invalid_argument)\n"},
      {{"schedule", "set", "x", "--from-json", "{\"cron\":"},
       1,
       "delayq: the body is not valid JSON: Invalid value. (at byte 8) (bad_json)\n"},
  };
  for (const Case& c : cases) {
    CliRun r = Http(c.args);
    EXPECT_EQ(r.exit, c.exit) << r;
    EXPECT_EQ(r.out, "") << r;
    EXPECT_EQ(r.err, c.err) << r;
  }
  EXPECT_EQ(Http({"schedule", "list"}).out, "no schedules\n") << "nothing was stored";
}

using CliBeanstalk = CliFixture;

TEST_F(CliHttp, PeekByStateNeedsTheBeanstalkdProtocol) {
  for (const char* state : {"--ready", "--delayed", "--buried"}) {
    CliRun r = Http({"peek", "-t", "orders", state});
    EXPECT_EQ(r.exit, 2) << r;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err,
              "delayq: peek --ready, --delayed and --buried need the beanstalkd protocol: the "
              "HTTP API has no such lookup (use --server beanstalk://HOST:PORT)\n");
  }
}

// list: a table of one state's jobs, a page at a time ('next: C' when more
// follow), --after, --desc, --all, and each page as JSON; find: the jobs
// with a key in every topic.
TEST_F(CliHttp, ListAndFind) {
  std::vector<uint64_t> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(PutJob("shop", "job " + std::to_string(i)));
  const uint64_t keyed = PutJob("shop", "keyed", {"--key", "order-42", "--delay", "1h"});
  PutJob("mail", "other", {"--key", "order-42"});
  CliRun r = Http({"list", "shop", "--limit", "2"});
  ASSERT_EQ(r.exit, 0) << r;
  EXPECT_EQ(r.out,
            "ID                   STATE    PRIORITY  DUE                      TRIES   BYTES  KEY\n"
            "1                    ready        1024  -                            0       5  -\n"
            "2                    ready        1024  -                            0       5  -\n"
            "next: 2 (--after 2)\n");
  r = Http({"list", "shop", "--limit", "2", "--after", "4"});
  EXPECT_EQ(r.exit, 0) << r;
  EXPECT_EQ(r.out,
            "ID                   STATE    PRIORITY  DUE                      TRIES   BYTES  KEY\n"
            "5                    ready        1024  -                            0       5  -\n");
  // --all follows 'next' to the end: every ready job once, newest first.
  r = Http({"--json", "list", "shop", "--limit", "2", "--desc", "--all"});
  ASSERT_EQ(r.exit, 0) << r;
  std::vector<uint64_t> seen;
  int pages = 0;
  for (size_t at = 0; at < r.out.size();) {
    size_t nl = r.out.find('\n', at);
    auto d = Json(r.out.substr(at, nl - at));
    ASSERT_TRUE(d.IsObject() && d.HasMember("jobs")) << r.out;
    for (const auto& j : d["jobs"].GetArray()) {
      seen.push_back(j["id"].GetUint64());
      EXPECT_FALSE(j.HasMember("body"));
      EXPECT_EQ(j["body_bytes"].GetUint64(), 5u);
    }
    EXPECT_EQ(d.HasMember("next"), pages < 2) << r.out;
    ++pages;
    at = nl + 1;
  }
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(seen, std::vector<uint64_t>(ids.rbegin(), ids.rend()));
  r = Http({"list", "shop", "--state", "delayed"});
  EXPECT_EQ(r.exit, 0) << r;
  EXPECT_EQ(
      MaskedRun(r.out),
      "ID                   STATE    PRIORITY  DUE                      TRIES   BYTES  KEY\n" +
          std::to_string(keyed) +
          "                    delayed      1024  <time>     0       5  order-42\n");
  // Bad arguments: a usage error, nothing sent.
  for (std::vector<std::string> bad : {std::vector<std::string>{"list", "shop", "--state", "gone"},
                                       {"list", "shop", "--limit", "0"},
                                       {"list", "shop", "--limit", "1001"},
                                       {"list", "-bad"},
                                       {"find", "--key", "has space"},
                                       {"find"}}) {
    r = Http(bad);
    EXPECT_EQ(r.exit, 2) << r;
    EXPECT_EQ(r.out, "") << r;
  }
  // The server's word on a cursor that is no job id.
  r = Http({"list", "shop", "--after", "x"});
  EXPECT_EQ(r.exit, 1) << r;
  EXPECT_EQ(r.err,
            "delayq: 'after' must be the 'next' of an earlier reply (a job id), not 'x' "
            "(invalid_argument)\n");

  r = Http({"find", "--key", "order-42"});
  ASSERT_EQ(r.exit, 0) << r;
  EXPECT_NE(r.out.find("\nshop                    " + std::to_string(keyed) + " "),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\nmail                    "), std::string::npos) << r.out;
  r = Http({"--json", "find", "--key", "order-42"});
  ASSERT_EQ(r.exit, 0) << r;
  EXPECT_EQ(Json(r.out)["jobs"].Size(), 2u) << r.out;
  r = Http({"find", "--key", "order-43"});
  EXPECT_EQ(r.exit, 0) << r;
  EXPECT_EQ(r.out, "no job has this key\n");
  // The beanstalkd protocol has no such lookups.
  for (std::vector<std::string> args :
       {std::vector<std::string>{"list", "shop"}, {"find", "--key", "order-42"}}) {
    r = Bean(args);
    EXPECT_EQ(r.exit, 2) << r;
    EXPECT_NE(r.err.find("needs the HTTP API"), std::string::npos) << r;
  }
}

TEST_F(CliHttp, MillisecondsAndReservationsThatLast) {
  PutJob("t", "x");
  CliRun r = Http({"reserve", "-t", "t", "--timeout", "250ms"});
  EXPECT_EQ(r.exit, 0) << r;
  EXPECT_EQ(r.err, "");
  // The reservation outlives the command.
  EXPECT_EQ(StateOf(1), "reserved");
  ASSERT_NE(r.out.find("lease:"), std::string::npos) << r;
  std::string lease = r.out.substr(r.out.find("lease:") + 11, 16);
  r = Http({"--json", "release", "1@" + lease, "--delay", "1500ms"});
  auto d = Json(r.out);
  ASSERT_TRUE(d.IsObject()) << r;
  EXPECT_STREQ(d["state"].GetString(), "delayed");
  EXPECT_TRUE(d.HasMember("due_ms"));
  r = Http({"pause", "-t", "t", "1500ms"});
  EXPECT_EQ(r.out, "topic t paused for 1.5s\n") << r;
}

// Schedules are the HTTP API's: every action is refused before anything is
// sent.
TEST_F(CliBeanstalk, ScheduleNeedsTheHttpApi) {
  for (std::vector<std::string> args :
       {std::vector<std::string>{"schedule", "set", "x", "--cron", "@daily", "-t", "t", "--body",
                                 "b"},
        {"schedule", "get", "x"},
        {"schedule", "list"},
        {"schedule", "pause", "x"},
        {"schedule", "resume", "x"},
        {"schedule", "delete", "x"}}) {
    CliRun r = Bean(args);
    EXPECT_EQ(r.exit, 2) << r;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err,
              "delayq: schedule needs the HTTP API: the beanstalkd protocol has no such command "
              "(use --server http://HOST:PORT)\n");
  }
}

TEST_F(CliBeanstalk, PeekByState) {
  PutJob("q", "ready one");
  PutJob("q", "delayed one", {"-d", "1h"});
  for (const char* state : {"--ready", "--delayed", "--buried"}) {
    CliRun r = Bean({"-o", "body", "peek", "-t", "q", state});
    if (std::string(state) == "--buried") {
      EXPECT_EQ(r.exit, 3) << r;
      EXPECT_EQ(r.err, "delayq: no buried job in topic 'q' (NOT_FOUND)\n");
    } else {
      EXPECT_EQ(r.exit, 0) << r;
      EXPECT_EQ(r.out, std::string(state) == "--ready" ? "ready one" : "delayed one");
    }
  }
  CliRun r = Bean({"peek", "--ready"});
  EXPECT_EQ(r.exit, 3) << r;
  EXPECT_EQ(r.err, "delayq: no ready job in topic 'default' (NOT_FOUND)\n");
}

TEST_F(CliBeanstalk, WholeSecondsOnly) {
  PutJob("t", "x");
  struct Case {
    std::vector<std::string> args;
    std::string err;
  };
  const std::vector<Case> cases = {
      {{"reserve", "-t", "t", "--timeout", "500ms"},
       "delayq: the beanstalkd protocol counts a reserve's timeout in whole seconds (not 500ms): "
       "use --server http://... for less\n"},
      {{"pause", "-t", "t", "1500ms"},
       "delayq: the beanstalkd protocol counts a pause in whole seconds (not 1500ms): use "
       "--server http://... for less\n"},
      {{"put", "-k", std::string(200, 'k'), "--backoff", "1s", "x"},
       "delayq: this put does not fit a beanstalkd command line (224 bytes): use a shorter key "
       "or back-off, or the HTTP API\n"},
  };
  for (const Case& c : cases) {
    CliRun r = Bean(c.args);
    EXPECT_EQ(r.exit, 2) << c.args[0] << r;
    EXPECT_EQ(r.err, c.err);
    EXPECT_EQ(r.out, "");
  }
  // Millisecond delays and TTRs go as put-ex.
  CliRun r = Bean({"put", "-t", "t", "-d", "1500ms", "--ttr", "2500ms", "y"});
  EXPECT_EQ(r.out, "job 2 created (delayed)\n") << r;
  auto d = Json(Http({"--json", "peek", "2"}).out);
  EXPECT_EQ(d["ttr_ms"].GetInt64(), 2500);
  EXPECT_EQ(d["delay_ms"].GetInt64(), 1500);
  // The longest key that fits still goes.
  r = Bean({"put", "-t", "t", "-k", std::string(190, 'k'), "z"});
  EXPECT_EQ(r.out, "job 3 created (ready)\n") << r;
}

TEST_F(CliBeanstalk, AReservationEndsWithDelayq) {
  PutJob("t", "x");
  CliRun r = Bean({"-o", "body", "reserve", "-t", "t"});
  EXPECT_EQ(r.exit, 0) << r;
  EXPECT_EQ(r.out, "x");
  EXPECT_EQ(r.err,
            "delayq: note: the beanstalkd protocol ends a reservation with its connection, so job "
            "1 goes back to its topic as delayq exits; --finish deletes what it reserves\n");
  // Back, with the reservation counted.
  const auto deadline = Clock::now() + 20s;
  while (StateOf(1) != "ready" && Clock::now() < deadline) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(StateOf(1), "ready");
  EXPECT_EQ(Json(Http({"--json", "peek", "1"}).out)["reserves"].GetUint(), 1u);
}

// ---- across transports --------------------------------------------------------------

using CliCross = CliFixture;

TEST_F(CliCross, PutOverOneTransportTakenOverTheOther) {
  const std::string binary = RandomBytes(70'000, 3);
  CliRun r = Bean({"put", "-t", "cross", "-k", "k1", "--max-tries", "2", "-p", "4"}, Input(binary));
  EXPECT_EQ(r.out, "job 1 created (ready)\n") << r;
  r = Http({"--json", "peek", "-t", "cross", "-k", "k1"});
  auto d = Json(r.out);
  ASSERT_TRUE(d.IsObject()) << r;
  EXPECT_EQ(d["max_tries"].GetUint(), 2u);
  EXPECT_EQ(d["priority"].GetUint(), 4u);
  r = Http({"-o", "body", "reserve", "-t", "cross", "--finish"});
  EXPECT_EQ(r.exit, 0) << r;
  EXPECT_TRUE(r.out == binary);

  r = Http({"put", "-t", "cross", "-k", "k2"}, Input(binary));
  EXPECT_EQ(r.out, "job 2 created (ready)\n") << r;
  r = Bean({"--json", "peek", "-t", "cross", "-k", "k2"});
  d = Json(r.out);
  ASSERT_TRUE(d.IsObject()) << r;
  EXPECT_STREQ(d["key"].GetString(), "k2");
  r = Bean({"-o", "body", "reserve", "-t", "cross", "--finish"});
  EXPECT_EQ(r.exit, 0) << r;
  EXPECT_TRUE(r.out == binary);
  EXPECT_EQ(StateOf(2), "gone");

  // Reserved over HTTP: held by its lease, which the beanstalkd protocol
  // cannot name.
  PutJob("cross", "z");
  ASSERT_EQ(ReserveOverHttp("cross"), 3u);
  r = Bean({"finish", "3"});
  EXPECT_EQ(r.exit, 2) << r;
  EXPECT_EQ(StateOf(3), "reserved");
}

// ---- no server ------------------------------------------------------------------

TEST(CliNoServer, NothingListening) {
  const std::string port = std::to_string(FreeLoopbackPort());
  for (const std::string scheme : {"http", "beanstalk"}) {
    const std::string url = scheme + "://127.0.0.1:" + port;
    for (const std::vector<std::string>& args :
         std::vector<std::vector<std::string>>{{"put", "x"}, {"reserve"}, {"stats"}}) {
      std::vector<std::string> full = {"-s", url};
      full.insert(full.end(), args.begin(), args.end());
      CliRun r = RunCli(full);
      EXPECT_EQ(r.exit, 5) << r;
      EXPECT_EQ(r.out, "");
      EXPECT_EQ(r.err, "delayq: cannot connect to " + url + ": Connection refused\n");
    }
  }
}

TEST(CliNoServer, ServerThatNeverAnswers) {
  // A socket that listens but is never read: connecting works, no reply comes.
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(listen(fd, 16), 0);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  const std::string port = std::to_string(ntohs(a.sin_port));
  for (const std::string scheme : {"http", "beanstalk"}) {
    const std::string url = scheme + "://127.0.0.1:" + port;
    CliRun r = RunCli({"-s", url, "--io-timeout", "300ms", "topics"});
    EXPECT_EQ(r.exit, 5) << r;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, "delayq: no reply from " + url + " within 300ms\n");
  }
  close(fd);
}

TEST(CliNoServer, NotDelayq) {
  // An HTTP server that is not delayqd: its replies are not delayq's JSON.
  ServerProcess beanstalkd;
  if (!BeanstalkdAvailable()) GTEST_SKIP() << kBeanstalkdPath << " is not installed";
  std::string error;
  ASSERT_TRUE(beanstalkd.Start(kBeanstalkdPath, {}, &error)) << error;
  // HTTP spoken to a beanstalkd: it answers UNKNOWN_COMMAND, not HTTP.
  CliRun r = RunCli({"-s", "http://127.0.0.1:" + std::to_string(beanstalkd.port()), "--io-timeout",
                     "2s", "topics"});
  EXPECT_EQ(r.exit, 5) << r;
  EXPECT_TRUE(r.err.starts_with("delayq: connection to http://127.0.0.1:")) << r.err;
}

// ---- against beanstalkd itself -------------------------------------------------------

TEST(CliBeanstalkd, PlainCommandsWorkAgainstBeanstalkd) {
  if (!BeanstalkdAvailable()) GTEST_SKIP() << kBeanstalkdPath << " is not installed";
  ServerProcess beanstalkd;
  std::string error;
  ASSERT_TRUE(beanstalkd.Start(kBeanstalkdPath, {}, &error)) << error;
  const std::string url = "beanstalk://127.0.0.1:" + std::to_string(beanstalkd.port());
  CliRun r = RunCli({"-s", url, "put", "-t", "jobs", "-d", "0", "--ttr", "30s", "hello"});
  EXPECT_EQ(r.exit, 0) << r;
  EXPECT_EQ(r.out, "job 1 created (ready)\n");
  r = RunCli({"-s", url, "-o", "body", "peek", "-t", "jobs", "--ready"});
  EXPECT_EQ(r.out, "hello") << r;
  r = RunCli({"-s", url, "--json", "reserve", "-t", "jobs", "--finish"});
  EXPECT_EQ(r.exit, 0) << r;
  auto d = Json(r.out);
  ASSERT_TRUE(d.IsObject()) << r;
  EXPECT_EQ(d["ttr_s"].GetUint(), 30u);
  EXPECT_STREQ(d["topic"].GetString(), "jobs");
  r = RunCli({"-s", url, "--json", "stats"});
  EXPECT_EQ(r.exit, 0) << r;
  EXPECT_EQ(Json(r.out)["total_jobs"].GetUint64(), 1u);
  // delayq's extensions are not there.
  r = RunCli({"-s", url, "put", "-k", "k", "x"});
  EXPECT_EQ(r.exit, 1) << r;
  EXPECT_EQ(r.err,
            "delayq: the server does not know the command 'put-ex': it needs delayqd, not "
            "beanstalkd (UNKNOWN_COMMAND)\n");
  r = RunCli({"-s", url, "reserve", "-n", "2"});
  EXPECT_EQ(r.exit, 1) << r;
  EXPECT_EQ(r.err,
            "delayq: the server refused reserve-batch as malformed, as a beanstalkd without "
            "delayq's extensions does (BAD_FORMAT)\n");
}

}  // namespace
}  // namespace delayq::testing
