// The batch codes of redis_scripts.h name the same functions in C++ and in
// the Lua library, and no two share one.
#include "backend/redis_scripts.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace delayq::backend::redis {
namespace {

TEST(RedisScriptsTest, BatchCodesMatchTheLibrary) {
  std::set<char> seen;
  for (size_t i = 0; i < kScriptCount; ++i) {
    auto s = static_cast<Script>(i);
    char code = Code(s);
    if (s == Script::kBatch || s == Script::kRegister || s == Script::kNamed ||
        s == Script::kObject) {
      EXPECT_EQ(code, '\0') << Name(s);
      continue;
    }
    ASSERT_NE(code, '\0') << Name(s);
    // Not a digit: the argument count follows the code.
    EXPECT_FALSE(code >= '0' && code <= '9') << Name(s);
    EXPECT_TRUE(seen.insert(code).second) << Name(s) << " shares code " << code;
    std::string registration =
        "topic_function('" + std::string(Name(s)) + "', '" + std::string(1, code) + "',";
    EXPECT_NE(Library().find(registration), std::string_view::npos) << registration;
  }
}

}  // namespace
}  // namespace delayq::backend::redis
