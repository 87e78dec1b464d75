// ByteBuffer: the bytes survive growth and compaction, and the capacity
// grows by half, to whole pages (doubling made 4 MB of data take 8 MB).
#include "server/byte_buffer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

namespace delayq::server {
namespace {

TEST(ByteBuffer, GrowsByHalfNotDoubling) {
  ByteBuffer b;
  constexpr size_t kChunk = 64 * 1024;
  for (int i = 0; i < 64; ++i) {  // 4 MB, as a connection reads it
    b.Prepare(kChunk);
    b.Commit(kChunk);
  }
  EXPECT_EQ(b.size(), size_t{4} << 20);
  b.Append("x");
  EXPECT_LE(b.capacity(), (size_t{4} << 20) * 3 / 2 + 4096) << "4 MB + 1 byte";
  EXPECT_EQ(b.capacity() % 4096, 0u);
}

TEST(ByteBuffer, KeepsTheBytesThroughGrowthAndCompaction) {
  ByteBuffer b;
  std::string want;
  for (int i = 0; i < 5000; ++i) {
    std::string s = std::to_string(i) + ";";
    b.Append(s);
    want += s;
    if (i % 7 == 0) {  // consume some from the head
      const size_t n = std::min<size_t>(want.size(), 9);
      b.Consume(n);
      want.erase(0, n);
    }
    ASSERT_EQ(b.view(), want) << i;
  }
  b.Consume(b.size());
  EXPECT_TRUE(b.empty());
  b.ShrinkIfIdle(0);
  EXPECT_EQ(b.capacity(), 0u);
}

}  // namespace
}  // namespace delayq::server
