// IoBatch on socket pairs, with io_uring and with plain calls: results in
// queue order with their tags, the errors the plain calls give, dropped
// calls, batches larger than the ring.
#include "server/io_batch.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>
#include <vector>

namespace delayq::server {
namespace {

class IoBatchTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    for (auto& p : pairs_) ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p), 0);
  }
  void TearDown() override {
    for (auto& p : pairs_) {
      close(p[0]);
      close(p[1]);
    }
  }
  IoBatch batch_{GetParam()};
  int pairs_[3][2];
};

TEST_P(IoBatchTest, ResultsComeInQueueOrderWithTheirTags) {
  if (GetParam()) {
    EXPECT_TRUE(batch_.uses_uring()) << "io_uring is not available here: " << batch_.why_not();
  } else {
    EXPECT_FALSE(batch_.uses_uring());
    EXPECT_EQ(batch_.why_not(), "switched off");
  }
  ASSERT_EQ(write(pairs_[1][1], "hello", 5), 5);
  char a[16], b[16];
  batch_.Recv(pairs_[0][0], a, sizeof a, 10);  // nothing there
  batch_.Recv(pairs_[1][0], b, sizeof b, 11);
  batch_.Send(pairs_[2][0], "xyz", 3, 12);
  const auto& r = batch_.Run();
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].tag, 10u);
  EXPECT_EQ(r[0].result, -EAGAIN);
  EXPECT_EQ(r[1].tag, 11u);
  EXPECT_EQ(r[1].result, 5);
  EXPECT_EQ(std::string(b, 5), "hello");
  EXPECT_EQ(r[2].tag, 12u);
  EXPECT_EQ(r[2].result, 3);
  char c[8];
  ASSERT_EQ(read(pairs_[2][1], c, sizeof c), 3);
  EXPECT_TRUE(batch_.empty());
}

TEST_P(IoBatchTest, OneSystemCallForAWholeBatchThroughTheRing) {
  for (auto& p : pairs_) ASSERT_EQ(write(p[1], "x", 1), 1);
  char bufs[3][4];
  for (int i = 0; i < 3; ++i) batch_.Recv(pairs_[i][0], bufs[i], sizeof bufs[i], i);
  const uint64_t before = batch_.system_calls();
  for (const auto& r : batch_.Run()) EXPECT_EQ(r.result, 1);
  EXPECT_EQ(batch_.system_calls() - before, batch_.uses_uring() ? 1u : 3u);
}

TEST_P(IoBatchTest, ACallThatFailsDoesNotStopTheOthers) {
  int closed = dup(pairs_[0][0]);
  ASSERT_GE(closed, 0);
  close(closed);
  ASSERT_EQ(write(pairs_[1][1], "ok", 2), 2);
  char a[8], b[8];
  batch_.Recv(closed, a, sizeof a, 1);
  batch_.Recv(pairs_[1][0], b, sizeof b, 2);
  batch_.Send(pairs_[0][0], "after", 5, 3);
  const auto& r = batch_.Run();
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].result, -EBADF);
  EXPECT_EQ(r[1].result, 2);
  EXPECT_EQ(r[2].result, 5);
}

TEST_P(IoBatchTest, CancelDropsTheCallsOfOneSocket) {
  ASSERT_EQ(write(pairs_[0][1], "keep", 4), 4);
  char a[8], b[8];
  batch_.Recv(pairs_[0][0], a, sizeof a, 1);
  batch_.Send(pairs_[1][0], "x", 1, 2);
  batch_.Cancel(pairs_[0][0]);
  const auto& r = batch_.Run();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].tag, 2u);
  EXPECT_EQ(read(pairs_[0][0], b, sizeof b), 4) << "the cancelled recv was made";
}

// More calls than the ring holds go in several rounds; each socket's calls
// keep their order (each recv takes the next 4 bytes of its socket).
TEST_P(IoBatchTest, ABatchLargerThanTheRing) {
  constexpr int kCalls = 1000;
  std::string stream[2];
  for (int i = 0; i < kCalls; ++i) {
    char part[8];
    snprintf(part, sizeof part, "%04d", i);
    stream[i % 2] += part;
  }
  for (int s = 0; s < 2; ++s)
    ASSERT_EQ(write(pairs_[s][1], stream[s].data(), stream[s].size()),
              static_cast<ssize_t>(stream[s].size()));
  std::vector<char> bufs(4 * kCalls);
  for (int i = 0; i < kCalls; ++i) batch_.Recv(pairs_[i % 2][0], &bufs[4 * i], 4, i);
  const auto& r = batch_.Run();
  ASSERT_EQ(r.size(), static_cast<size_t>(kCalls));
  for (int i = 0; i < kCalls; ++i) {
    EXPECT_EQ(r[i].tag, static_cast<uint64_t>(i));
    ASSERT_EQ(r[i].result, 4) << "call " << i;
    char want[8];
    snprintf(want, sizeof want, "%04d", i);
    EXPECT_EQ(std::string(&bufs[4 * i], 4), want) << "call " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, IoBatchTest, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "IoUring" : "PlainCalls"; });

}  // namespace
}  // namespace delayq::server
