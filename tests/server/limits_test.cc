// Black-box tests of delayqd's limits on what clients can make it hold
// (docs/limits.md): the memory of beanstalkd connections whose clients do
// not read their replies, per connection and in total; a reserve waiting
// behind more input than is read ahead; --max-connections on each
// listener; running out of file descriptors.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "server/http_client.h"
#include "server/server_process.h"

namespace delayq::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// ASan (gcc says so with __SANITIZE_ADDRESS__, clang with __has_feature).
#if defined(DELAYQ_SANITIZED) || defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
constexpr bool kSanitized = __has_feature(address_sanitizer);
#else
constexpr bool kSanitized = false;
#endif

// Open file descriptors of the process.
int OpenFds(pid_t pid) {
  int n = 0;
  for ([[maybe_unused]] const auto& e :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd"))
    ++n;
  return n;
}

std::string FoundReply(uint64_t id, std::string_view body) {
  return "FOUND " + std::to_string(id) + " " + std::to_string(body.size()) + "\r\n" +
         std::string(body) + "\r\n";
}

// Sends `pattern` over and over on `fd` for `d` without reading, picking up
// where a partial send stopped (so the stream is whole commands), never
// blocking. Returns the bytes sent.
uint64_t SendStream(int fd, std::string_view pattern, std::chrono::milliseconds d) {
  const std::string chunk = Repeated(pattern, static_cast<int>(65536 / pattern.size()));
  uint64_t sent = 0;
  size_t at = 0;
  auto until = Clock::now() + d;
  while (Clock::now() < until) {
    ssize_t n = send(fd, chunk.data() + at, chunk.size() - at, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<uint64_t>(n);
      at = (at + static_cast<size_t>(n)) % chunk.size();
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      std::this_thread::sleep_for(10ms);
    } else {
      break;
    }
  }
  return sent;
}

// A cause that happened many times in a moment is logged once: a line at
// the first event, and at most one more (with suppressed=N) should the
// test last 10 s.
// `parts`: what the cause's lines contain.
void ExpectLoggedOnce(const std::string& log, const std::vector<std::string>& parts) {
  std::istringstream in(log);
  std::string line;
  int lines = 0;
  bool first = false;
  while (std::getline(in, line)) {
    bool all = true;
    for (const std::string& p : parts) all &= line.find(p) != std::string::npos;
    if (!all) continue;
    first |= ++lines == 1 && line.find("suppressed=") == std::string::npos;
  }
  EXPECT_TRUE(first) << log;
  EXPECT_LE(lines, 2) << log;
}

class Limits : public ::testing::Test {
 protected:
  void Start(std::vector<std::string> args) {
    args.push_back("--in-memory");
    std::string error;
    ASSERT_TRUE(server_.Start(DelayqdPath(), args, &error)) << error;
  }

  void TearDown() override {
    if (HasFailure()) {
      std::string log = server_.Log();
      if (log.size() > 4000) log = "..." + log.substr(log.size() - 4000);
      std::cerr << "---- server stderr (last 4000 bytes) ----\n" << log << "----\n";
    }
    if (server_.pid() > 0 && !server_.Alive())
      ADD_FAILURE() << "the server died during the test; wait status " << server_.exit_status();
  }

  RawClient Connect(std::chrono::milliseconds timeout = 10000ms) {
    RawClient c(server_.port(), timeout);
    EXPECT_TRUE(c.ok()) << c.error();
    return c;
  }

  // `n` clients pipeline peeks of two 64 KB jobs for 2 s without reading
  // (the server runs what it can and stops; the rest waits in its buffers
  // and the kernel's). Returns how much the server's RSS grew, in KB; the
  // clients are left in *clients, their replies unread.
  uint64_t ClientsThatDoNotRead(int n, std::vector<RawClient>* clients) {
    RawClient c = Connect();
    EXPECT_EQ(c.Call(PutCmd(a_)), "INSERTED 1\r\n");
    EXPECT_EQ(c.Call(PutCmd(b_)), "INSERTED 2\r\n");
    for (int i = 0; i < n; ++i) {
      clients->push_back(Connect());
      EXPECT_EQ(clients->back().Call("list-tube-used\r\n"), "USING default\r\n");
    }
    std::this_thread::sleep_for(200ms);
    const uint64_t before = RssKb(server_.pid());
    std::vector<std::thread> senders;
    std::vector<uint64_t> sent(n);
    for (int i = 0; i < n; ++i)
      senders.emplace_back([&, i, fd = (*clients)[i].fd()] {
        sent[i] = SendStream(fd, "peek 1\r\npeek 2\r\n", 2s);
      });
    for (auto& t : senders) t.join();
    std::this_thread::sleep_for(300ms);
    const uint64_t after = RssKb(server_.pid());
    for (int i = 0; i < n; ++i) EXPECT_GT(sent[i], 500'000u) << "client " << i;
    // The server still serves others meanwhile.
    std::string stats = c.Call("stats\r\n");
    std::cerr << "RSS " << before << " KB -> " << after << " KB; peeks run "
              << YamlValue(stats, "cmd-peek") << ", sent by client 0: " << sent[0] / 8 << "\n";
    EXPECT_NE(YamlValue(stats, "cmd-peek"), "<missing>");
    return after > before ? after - before : 0;
  }

  // Each client now reads: its first `n` replies come whole and in order.
  void ExpectRepliesInOrder(std::vector<RawClient>* clients, int n) {
    const std::string one = FoundReply(1, a_), two = FoundReply(2, b_);
    for (size_t k = 0; k < clients->size(); ++k) {
      for (int i = 0; i < n; ++i) {
        std::string r = (*clients)[k].ReadReply();
        ASSERT_EQ(r, i % 2 == 0 ? one : two) << "client " << k << " reply " << i;
      }
    }
  }

  const std::string a_ = std::string(65535, 'a');
  const std::string b_ = std::string(65535, 'b');
  ServerProcess server_;
};

// Ten beanstalkd clients pipelining peeks of 64 KB jobs without reading
// cost delayqd 77 MB (beanstalkd 1.12: 0.6 MB for the ten): each
// connection's input grew to 4 MB in a buffer of twice that while its
// replies waited. Now each holds a bounded amount (docs/limits.md).
TEST_F(Limits, ClientsThatDoNotReadHoldLittleMemoryEach) {
  if (kSanitized) GTEST_SKIP() << "ASan keeps freed memory in quarantine: the RSS says nothing";
  ASSERT_NO_FATAL_FAILURE(Start({}));
  std::vector<RawClient> clients;
  const uint64_t grew = ClientsThatDoNotRead(10, &clients);
  EXPECT_LT(grew, 10u * 2048) << "KB for 10 connections";
  ExpectRepliesInOrder(&clients, 300);
}

// A server-wide budget for replies waiting on slow clients: past it the
// connections that hold replies run no more commands until their clients
// read, while a client that reads its replies is still served; no reply is
// lost or cut. (The connections' input and the allocator's own keep most
// of the RSS here: 30 such clients grew it by 29-31 MB without the budget,
// --max-reply-memory 0, and by 18-20 MB with this one; the replies held
// fell from 10 MB to 1.6 MB.)
TEST_F(Limits, RepliesWaitingInTotalAreBounded) {
  if (kSanitized) GTEST_SKIP() << "ASan keeps freed memory in quarantine: the RSS says nothing";
  ASSERT_NO_FATAL_FAILURE(Start({"--max-reply-memory", "1048576"}));
  std::vector<RawClient> clients;
  const uint64_t grew = ClientsThatDoNotRead(30, &clients);
  EXPECT_LT(grew, 30u * 1024) << "KB for 30 connections";
  ExpectLoggedOnce(server_.Log(), {"event=reply_memory_full"});
  // Another client is served while the budget is used up.
  RawClient c = Connect();
  for (int i = 0; i < 200; ++i) {
    ASSERT_EQ(c.Call(PutCmd("x")), "INSERTED " + std::to_string(i + 3) + "\r\n");
    ASSERT_EQ(c.Call("peek 1\r\n"), FoundReply(1, a_));
  }
  ExpectRepliesInOrder(&clients, 300);
}

// A reserve waits with more input behind it than the connection reads
// ahead (1 MB): the connection stops reading, so it would not see the
// client go (TCP brings the end after the input) and a job put later would
// go to a client that is gone. The reserve is answered TIMED_OUT and the
// commands behind it run.
TEST_F(Limits, AReserveWaitingBehindMoreInputThanIsReadAheadTimesOut) {
  ASSERT_NO_FATAL_FAILURE(Start({}));
  const std::string pipeline = "reserve\r\n" + Repeated("list-tube-used\r\n", 65536);
  {
    RawClient w = Connect();
    std::thread sender([&] { w.Send(pipeline); });
    EXPECT_EQ(w.ReadReply(5s), "TIMED_OUT\r\n");
    int good = 0;
    while (good < 65536 && w.ReadReply(5s) == "USING default\r\n") ++good;
    EXPECT_EQ(good, 65536);
    sender.join();
  }
  // A client that sends as much as the connection takes, without reading,
  // then closes: its reserve does not outlive it.
  {
    RawClient gone = Connect();
    ASSERT_TRUE(gone.Send("reserve\r\n"));
    SendStream(gone.fd(), "list-tube-used\r\n", 1500ms);
  }
  RawClient c = Connect();
  std::string waiting;
  for (int i = 0; i < 100 && waiting != "0"; ++i) {
    waiting = YamlValue(c.Call("stats\r\n"), "current-waiting");
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(waiting, "0");
  EXPECT_EQ(c.Call(PutCmd("j")), "INSERTED 1\r\n");
  EXPECT_EQ(YamlValue(c.Call("stats-job 1\r\n"), "state"), "ready");
}

// --max-connections on each listener: the connection past it is accepted,
// told why and closed; one log line for many refusals; a place freed is
// taken again.
TEST_F(Limits, MaxConnectionsPerListener) {
  ASSERT_NO_FATAL_FAILURE(Start({"--max-connections", "3"}));
  std::vector<RawClient> bean;
  for (int i = 0; i < 3; ++i) {
    bean.push_back(Connect());
    ASSERT_EQ(bean.back().Call("list-tube-used\r\n"), "USING default\r\n");
  }
  for (int i = 0; i < 20; ++i) {
    RawClient extra = Connect();
    std::string got;
    ASSERT_TRUE(extra.WaitClosed(5s, &got)) << i;
    ASSERT_EQ(got, "SERVER_BUSY too many connections\r\n") << i;
  }
  // The HTTP listener counts its own connections.
  const uint16_t http_port = HttpPortOf(server_);
  ASSERT_NE(http_port, 0);
  std::vector<std::unique_ptr<HttpClient>> http;
  for (int i = 0; i < 3; ++i) {
    http.push_back(std::make_unique<HttpClient>(http_port));
    ASSERT_TRUE(http.back()->Send(HttpRequestText("GET", "/healthz")));
    HttpResponse r = http.back()->Read();
    ASSERT_TRUE(r.ok) << r.error;
    ASSERT_EQ(r.status, 200);
  }
  {
    HttpClient extra(http_port);
    HttpResponse r = extra.Read();
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.status, 503);
    EXPECT_EQ(r.Header("connection"), "close");
    EXPECT_EQ(r.body, R"({"error":{"code":"too_many_connections",)"
                      R"("message":"too many connections; try again later"}})"
                      "\n");
    EXPECT_TRUE(extra.WaitClosed(5s));
  }
  // A place freed is taken again.
  bean.pop_back();
  std::string reply;
  for (int i = 0; i < 100; ++i) {
    RawClient again = Connect();
    reply = again.Call("list-tube-used\r\n");
    if (reply == "USING default\r\n") break;
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(reply, "USING default\r\n");
  const std::string log = server_.Log();
  // One cause for both listeners: the first refusal's line names its
  // protocol.
  ExpectLoggedOnce(log, {"event=too_many_connections", "protocol=beanstalkd", "max_connections=3"});
}

// Out of file descriptors (EMFILE): the accept loop neither spins nor stops
// for good. The connections past the limit are refused with a message;
// once connections close, new ones are served.
TEST_F(Limits, OutOfFileDescriptorsNeitherSpinsNorStopsAccepting) {
  ASSERT_NO_FATAL_FAILURE(Start({"--no-http"}));
  const pid_t pid = server_.pid();
  const int open_now = OpenFds(pid);
  rlimit lim{};
  ASSERT_EQ(prlimit(pid, RLIMIT_NOFILE, nullptr, &lim), 0);
  lim.rlim_cur = static_cast<rlim_t>(open_now + 8);
  ASSERT_EQ(prlimit(pid, RLIMIT_NOFILE, &lim, nullptr), 0) << std::strerror(errno);
  std::vector<RawClient> clients;
  int served = 0, refused = 0, waiting = 0;
  for (int i = 0; i < 30; ++i) {
    clients.push_back(Connect(500ms));
    std::string r = clients.back().Call("list-tube-used\r\n");
    if (r == "USING default\r\n") {
      ++served;
    } else if (r == "SERVER_BUSY too many connections\r\n" || r.ends_with(kEofMark)) {
      ++refused;
    } else {
      ++waiting;
    }
  }
  // Eight descriptors free, give or take the two RocksDB may open or
  // close meanwhile: the rest (at least 20 of 30) are refused.
  EXPECT_GT(served, 0);
  EXPECT_LE(served, 10);
  EXPECT_EQ(waiting, 0) << "connections left waiting";
  EXPECT_GE(refused, 20);
  // While the excess clients are still connected, delayqd is idle.
  std::this_thread::sleep_for(200ms);
  const double cpu0 = CpuSeconds(pid);
  std::this_thread::sleep_for(1s);
  const double cpu = CpuSeconds(pid) - cpu0;
  EXPECT_LT(cpu, 0.2) << "CPU seconds in 1 s";
  std::cerr << "served " << served << ", refused " << refused << ", waiting " << waiting << "; CPU "
            << cpu << " s in 1 s\n";
  clients.clear();
  std::string reply;
  for (int i = 0; i < 100; ++i) {
    RawClient again = Connect(1000ms);
    reply = again.Call("list-tube-used\r\n");
    if (reply == "USING default\r\n") break;
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(reply, "USING default\r\n");
  ExpectLoggedOnce(server_.Log(), {"event=out_of_file_descriptors", "protocol=beanstalkd"});
}

}  // namespace
}  // namespace delayq::testing
