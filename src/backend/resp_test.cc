// The hand-written RESP of backend/resp.h against hiredis's own formatting,
// the reference: the same bytes for any arguments.
#include "backend/resp.h"

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "test_seed.h"

namespace delayq::backend::resp {
namespace {

std::string HiredisFormat(const std::vector<std::string>& args) {
  std::vector<const char*> ptrs;
  std::vector<size_t> lens;
  for (const std::string& a : args) {
    ptrs.push_back(a.data());
    lens.push_back(a.size());
  }
  char* out = nullptr;
  int n = redisFormatCommandArgv(&out, static_cast<int>(args.size()), ptrs.data(), lens.data());
  EXPECT_GT(n, 0);
  std::string s(out, static_cast<size_t>(n));
  std::free(out);
  return s;
}

std::string Mine(const std::vector<std::string>& args) {
  std::vector<std::string_view> views(args.begin(), args.end());
  return Format(views);
}

TEST(RespTest, FormatsAsHiredisDoes) {
  EXPECT_EQ(Mine({"PING"}), "*1\r\n$4\r\nPING\r\n");
  EXPECT_EQ(Mine({"SET", "k", ""}), "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n");
  std::mt19937 rng(static_cast<uint32_t>(delayq::testing::TestSeed(7)));
  for (int round = 0; round < 300; ++round) {
    std::vector<std::string> args;
    size_t count = 1 + rng() % (round % 10 == 0 ? 1200 : 12);
    for (size_t i = 0; i < count; ++i) {
      // Sizes around the digit boundaries, and now and then a large one;
      // any byte, \0 and \r\n included.
      size_t size = rng() % 4 == 0 ? rng() % 120 : rng() % 12;
      if (rng() % 50 == 0) size = 9'990 + rng() % 200;
      if (round == 299 && i == 0) size = 1'000'000;
      std::string a(size, '\0');
      for (char& c : a) c = static_cast<char>(rng());
      args.push_back(std::move(a));
    }
    ASSERT_EQ(Mine(args), HiredisFormat(args)) << "round " << round;
  }
}

TEST(RespTest, BulkSizeIsWhatAppendBulkAdds) {
  for (size_t size : {0, 1, 9, 10, 99, 100, 999, 1000, 65535, 1000000}) {
    std::string out;
    AppendBulk(out, std::string(size, 'x'));
    EXPECT_EQ(BulkSize(size), out.size()) << size;
  }
  std::string out;
  AppendArray(out, 1234);
  EXPECT_EQ(out, "*1234\r\n");
}

}  // namespace
}  // namespace delayq::backend::resp
