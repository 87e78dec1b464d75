// What the HTTP API reads from a request's target: its query parameters.
#include "server/http_input.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace delayq::server {
namespace {

// The stats flag of a target's query.
Result<bool> StatsFlag(std::string_view target, bool absent) {
  Result<std::map<std::string, std::string>> q = ParseQuery(target, {"stats"});
  if (!q.ok()) return q.status();
  return QueryFlag(*q, "stats", absent);
}

TEST(QueryFlag, ReadsTrueAndFalseAndRefusesTheRest) {
  EXPECT_EQ(StatsFlag("/t", false).value(), false);
  EXPECT_EQ(StatsFlag("/t", true).value(), true);
  for (const char* yes : {"/t?stats=true", "/t?stats=1", "/t?stats", "/t?stats="})
    EXPECT_EQ(StatsFlag(yes, false).value(), true) << yes;
  for (const char* no : {"/t?stats=false", "/t?stats=0"})
    EXPECT_EQ(StatsFlag(no, true).value(), false) << no;
  EXPECT_FALSE(StatsFlag("/t?statsx=1", false).ok());  // not a parameter of this route
  Result<bool> bad = StatsFlag("/t?stats=yes", false);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.code(), Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("stats"), std::string::npos);
}

}  // namespace
}  // namespace delayq::server
