// What the HTTP API reads from a request's target: its query parameters.
#include "server/http_input.h"

#include <gtest/gtest.h>

namespace delayq::server {
namespace {

TEST(QueryParam, FindsANameAmongOthers) {
  EXPECT_EQ(QueryParam("/topics?stats=true", "stats"), "true");
  EXPECT_EQ(QueryParam("/topics?a=1&stats=0&b", "stats"), "0");
  EXPECT_EQ(QueryParam("/topics?a=1&stats", "stats"), "");
  EXPECT_EQ(QueryParam("/topics?stats=", "stats"), "");
  EXPECT_EQ(QueryParam("/topics?stats=x#frag", "stats"), "x");
  EXPECT_EQ(QueryParam("/topics?statsx=1&xstats=1", "stats"), std::nullopt);
  EXPECT_EQ(QueryParam("/topics", "stats"), std::nullopt);
  EXPECT_EQ(QueryParam("/topics?", "stats"), std::nullopt);
}

TEST(QueryFlag, ReadsTrueAndFalseAndRefusesTheRest) {
  EXPECT_EQ(QueryFlag("/t", "stats", false).value(), false);
  EXPECT_EQ(QueryFlag("/t", "stats", true).value(), true);
  for (const char* yes : {"/t?stats=true", "/t?stats=1", "/t?stats"})
    EXPECT_EQ(QueryFlag(yes, "stats", false).value(), true) << yes;
  for (const char* no : {"/t?stats=false", "/t?stats=0"})
    EXPECT_EQ(QueryFlag(no, "stats", true).value(), false) << no;
  Result<bool> bad = QueryFlag("/t?stats=yes", "stats", false);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.code(), Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("stats"), std::string::npos);
}

}  // namespace
}  // namespace delayq::server
