// SocketPoller on a real io_context with socket pairs: readiness reaches
// the watcher, level-triggered, only for the events asked for.
#include "server/socket_poller.h"

#include <gtest/gtest.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace delayq::server {
namespace {

using std::chrono::milliseconds;

class Recorder : public SocketWatcher {
 public:
  void OnSocketEvents(uint32_t events) override { seen.push_back(events); }
  void OnIoDone(bool, ssize_t) override { ADD_FAILURE() << "no call was queued"; }
  std::vector<uint32_t> seen;
};

// Reads what arrives through the poller and sends it back ("echo"); or,
// with close_at_once, queues its recv and then leaves the poller the way a
// closing connection does.
class Echo : public SocketWatcher {
 public:
  Echo(SocketPoller& p, int fd) : poller_(p), fd_(fd) {}
  void OnSocketEvents(uint32_t events) override {
    if (!(events & EPOLLIN)) return;
    ssize_t n;
    if (poller_.Recv(fd_, buf_, sizeof buf_, this, &n)) {
      made_at_once++;
      return;
    }
    if (close_at_once) poller_.Remove(fd_);
  }
  void OnIoDone(bool send, ssize_t result) override {
    if (send) {
      sent.push_back(result);
      return;
    }
    received.push_back(result);
    if (result <= 0) {
      poller_.Remove(fd_);
      return;
    }
    ssize_t n;
    if (poller_.Send(fd_, buf_, static_cast<size_t>(result), this, &n)) made_at_once++;
  }
  SocketPoller& poller_;
  int fd_;
  char buf_[64];
  bool close_at_once = false;
  int made_at_once = 0;
  std::vector<ssize_t> received, sent;
};

class SocketPollerTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds_), 0);
  }
  void TearDown() override {
    close(fds_[0]);
    close(fds_[1]);
  }
  void RunFor(milliseconds d) {
    io_.restart();
    io_.run_for(d);
  }
  void Send(const char* s) { ASSERT_GT(write(fds_[1], s, strlen(s)), 0); }

  boost::asio::io_context io_;
  SocketPoller poller_{io_, GetParam()};
  int fds_[2] = {-1, -1};
  Recorder w_;
};

TEST_P(SocketPollerTest, ReportsReadableUntilRead) {
  ASSERT_TRUE(poller_.Add(fds_[0], EPOLLIN, &w_).ok());
  RunFor(milliseconds(20));
  EXPECT_TRUE(w_.seen.empty()) << "nothing was sent";
  Send("put");
  RunFor(milliseconds(20));
  ASSERT_FALSE(w_.seen.empty());
  EXPECT_EQ(w_.seen[0], uint32_t{EPOLLIN});
  // Level-triggered: still readable, so reported again.
  size_t before = w_.seen.size();
  RunFor(milliseconds(20));
  EXPECT_GT(w_.seen.size(), before);
  char buf[16];
  ASSERT_EQ(read(fds_[0], buf, sizeof buf), 3);
  RunFor(milliseconds(20));
  before = w_.seen.size();
  RunFor(milliseconds(20));
  EXPECT_EQ(w_.seen.size(), before) << "reported after the socket was drained";
}

TEST_P(SocketPollerTest, ModifyAndRemoveStopTheReports) {
  ASSERT_TRUE(poller_.Add(fds_[0], EPOLLIN, &w_).ok());
  ASSERT_TRUE(poller_.Modify(fds_[0], 0, &w_).ok());
  Send("x");
  RunFor(milliseconds(20));
  EXPECT_TRUE(w_.seen.empty()) << "reported without interest";
  ASSERT_TRUE(poller_.Modify(fds_[0], EPOLLIN | EPOLLOUT, &w_).ok());
  RunFor(milliseconds(20));
  ASSERT_FALSE(w_.seen.empty());
  EXPECT_EQ(w_.seen[0], uint32_t{EPOLLIN | EPOLLOUT});
  poller_.Remove(fds_[0]);
  w_.seen.clear();
  RunFor(milliseconds(20));
  EXPECT_TRUE(w_.seen.empty()) << "reported after Remove";
}

TEST_P(SocketPollerTest, AHangUpIsReportedWithoutInterest) {
  ASSERT_TRUE(poller_.Add(fds_[0], 0, &w_).ok());
  close(fds_[1]);
  fds_[1] = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);  // for TearDown
  RunFor(milliseconds(20));
  ASSERT_FALSE(w_.seen.empty());
  EXPECT_TRUE(w_.seen[0] & EPOLLHUP);
}

TEST_P(SocketPollerTest, StopLetsTheLoopRunOutOfWork) {
  ASSERT_TRUE(poller_.Add(fds_[0], EPOLLIN, &w_).ok());
  poller_.Stop();
  io_.restart();
  auto start = std::chrono::steady_clock::now();
  io_.run();  // returns: nothing is waited for any more
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_TRUE(poller_.Add(fds_[1], EPOLLIN, &w_).ok());  // still usable, never waits
}

// Destroyed while its wait is armed: the cancelled wait runs later and
// must not touch it (ASan would report the use after free).
TEST(SocketPoller, DestroyedWithItsWaitArmed) {
  boost::asio::io_context io;
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  Recorder w;
  auto poller = std::make_unique<SocketPoller>(io, true);  // on the heap: a use after free shows
  ASSERT_TRUE(poller->Add(fds[0], EPOLLIN, &w).ok());
  poller.reset();
  ASSERT_GT(write(fds[1], "x", 1), 0);
  io.run_for(milliseconds(20));
  EXPECT_TRUE(w.seen.empty());
  close(fds[0]);
  close(fds[1]);
}

TEST_P(SocketPollerTest, AddOfABadDescriptorFails) {
  Status st = poller_.Add(-1, EPOLLIN, &w_);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("epoll_ctl"), std::string::npos) << st.message();
}

// Calls made during a dispatch are queued and their results come back
// through OnIoDone: the recv's, then the send the watcher queued in turn.
TEST_P(SocketPollerTest, CallsDuringADispatchComeBackThroughOnIoDone) {
  Echo e(poller_, fds_[0]);
  ASSERT_TRUE(poller_.Add(fds_[0], EPOLLIN, &e).ok());
  Send("ping");
  RunFor(milliseconds(50));
  EXPECT_EQ(e.made_at_once, 0) << "a call during a dispatch was made at once";
  ASSERT_EQ(e.received, std::vector<ssize_t>{4});
  ASSERT_EQ(e.sent, std::vector<ssize_t>{4});
  char buf[16];
  ASSERT_EQ(read(fds_[1], buf, sizeof buf), 4);
  EXPECT_EQ(std::string(buf, 4), "ping");
  // The end of the stream comes back as 0.
  shutdown(fds_[1], SHUT_WR);
  RunFor(milliseconds(50));
  EXPECT_EQ(e.received.back(), 0);
}

TEST_P(SocketPollerTest, OutsideADispatchCallsAreMadeAtOnce) {
  Echo e(poller_, fds_[0]);
  ssize_t n = 0;
  EXPECT_TRUE(poller_.Recv(fds_[0], e.buf_, sizeof e.buf_, &e, &n));
  EXPECT_EQ(n, -EAGAIN);
  EXPECT_TRUE(poller_.Send(fds_[0], "abc", 3, &e, &n));
  EXPECT_EQ(n, 3);
}

// A watcher that leaves the poller (Remove, as a closing connection does)
// after queuing a call is not called back, and the call is not made: the
// data stays in the socket.
TEST_P(SocketPollerTest, RemoveDropsTheQueuedCalls) {
  Echo e(poller_, fds_[0]);
  e.close_at_once = true;
  ASSERT_TRUE(poller_.Add(fds_[0], EPOLLIN, &e).ok());
  Send("data");
  RunFor(milliseconds(50));
  EXPECT_TRUE(e.received.empty());
  char buf[16];
  EXPECT_EQ(read(fds_[0], buf, sizeof buf), 4) << "the dropped recv was made";
}

INSTANTIATE_TEST_SUITE_P(Uring, SocketPollerTest, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "IoUring" : "PlainCalls"; });

}  // namespace
}  // namespace delayq::server
