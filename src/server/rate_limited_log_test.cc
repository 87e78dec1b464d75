#include "server/rate_limited_log.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace delayq::server {
namespace {

using namespace std::chrono_literals;

TEST(RateLimitedLog, OneLinePerCausePerIntervalWithTheCountOfTheRest) {
  RateLimitedLog log(10s);
  std::vector<std::string> lines;
  log.set_sink([&](std::string_view l) { lines.emplace_back(l); });
  auto t0 = RateLimitedLog::Clock::time_point{} + 1h;
  log.Warn("http_header_timeout", "peer=a", t0);
  for (int i = 0; i < 1000; ++i) log.Warn("http_header_timeout", "peer=b", t0 + 1s);
  log.Warn("too_many_connections", "protocol=http", t0 + 2s);
  log.Warn("http_header_timeout", "peer=c", t0 + 10s);
  log.Warn("http_header_timeout", "peer=d", t0 + 21s);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0], "event=http_header_timeout peer=a");
  EXPECT_EQ(lines[1], "event=too_many_connections protocol=http");
  EXPECT_EQ(lines[2], "event=http_header_timeout peer=c suppressed=1000");
  EXPECT_EQ(lines[3], "event=http_header_timeout peer=d");
  EXPECT_EQ(log.count("http_header_timeout"), 1003u);
  EXPECT_EQ(log.count("nothing"), 0u);
}

}  // namespace
}  // namespace delayq::server
