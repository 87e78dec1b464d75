// SocketPoller on a real io_context with socket pairs: readiness reaches
// the watcher, level-triggered, only for the events asked for.
#include "server/socket_poller.h"

#include <gtest/gtest.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

namespace delayq::server {
namespace {

using std::chrono::milliseconds;

class Recorder : public SocketWatcher {
 public:
  void OnSocketEvents(uint32_t events) override { seen.push_back(events); }
  std::vector<uint32_t> seen;
};

class SocketPollerTest : public ::testing::Test {
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
  SocketPoller poller_{io_};
  int fds_[2] = {-1, -1};
  Recorder w_;
};

TEST_F(SocketPollerTest, ReportsReadableUntilRead) {
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

TEST_F(SocketPollerTest, ModifyAndRemoveStopTheReports) {
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

TEST_F(SocketPollerTest, AHangUpIsReportedWithoutInterest) {
  ASSERT_TRUE(poller_.Add(fds_[0], 0, &w_).ok());
  close(fds_[1]);
  fds_[1] = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);  // for TearDown
  RunFor(milliseconds(20));
  ASSERT_FALSE(w_.seen.empty());
  EXPECT_TRUE(w_.seen[0] & EPOLLHUP);
}

TEST_F(SocketPollerTest, StopLetsTheLoopRunOutOfWork) {
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
  auto poller = std::make_unique<SocketPoller>(io);  // on the heap: a use after free shows
  ASSERT_TRUE(poller->Add(fds[0], EPOLLIN, &w).ok());
  poller.reset();
  ASSERT_GT(write(fds[1], "x", 1), 0);
  io.run_for(milliseconds(20));
  EXPECT_TRUE(w.seen.empty());
  close(fds[0]);
  close(fds[1]);
}

TEST_F(SocketPollerTest, AddOfABadDescriptorFails) {
  Status st = poller_.Add(-1, EPOLLIN, &w_);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("epoll_ctl"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace delayq::server
