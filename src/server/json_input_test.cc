// Request bodies under the JSON limits: nesting, surrogates, duplicate
// members, numbers out of range, invalid UTF-8.
#include "server/json_input.h"

#include <gtest/gtest.h>

#include <string>

namespace delayq::server {
namespace {

std::string Nested(size_t depth, char open, char close, std::string_view inner = "") {
  std::string s = "{\"body\":";
  s.append(depth - 1, open);
  s.append(inner);
  s.append(depth - 1, close);
  s.push_back('}');
  return s;
}

Status Parse(std::string_view body) {
  rapidjson::Document d;
  return ParseJsonObject(body, &d, false);
}

TEST(JsonInput, NestingUpToTheLimitParses) {
  EXPECT_TRUE(Parse(Nested(kMaxJsonDepth, '[', ']')).ok());
  EXPECT_TRUE(Parse("{" + std::string(kMaxJsonDepth - 1, ' ') + "}").ok());
  std::string objects = "{";
  for (size_t i = 1; i < kMaxJsonDepth; ++i) objects += "\"a\":{";
  objects += std::string(kMaxJsonDepth, '}');
  EXPECT_TRUE(Parse(objects).ok()) << Parse(objects).message();
}

TEST(JsonInput, NestingPastTheLimitIsRefusedWithItsOffset) {
  Status st = Parse(Nested(kMaxJsonDepth + 1, '[', ']'));
  ASSERT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_EQ(st.message(),
            "the body holds arrays and objects nested deeper than 64 levels (at byte 71)");
  // The depths the crash was found at, arrays and objects, closed or not.
  for (size_t depth : {1'000u, 100'000u, 300'000u, 1'000'000u}) {
    EXPECT_EQ(Parse(Nested(depth, '[', ']')).code(), Code::kInvalidArgument) << depth;
    std::string objects = "{";
    for (size_t i = 1; i < depth; ++i) objects += "\"a\":{";
    EXPECT_EQ(Parse(objects).code(), Code::kInvalidArgument) << depth;
  }
}

TEST(JsonInput, BracketsInsideStringsDoNotCount) {
  std::string deep(1000, '[');
  EXPECT_TRUE(Parse("{\"body\":\"" + deep + "\"}").ok());
  // An escaped quote does not end the string; an escaped backslash does not
  // escape the quote after it.
  EXPECT_TRUE(Parse("{\"body\":\"\\\"" + deep + "\"}").ok());
  EXPECT_EQ(Parse("{\"body\":\"\\\\\"," + deep + "}").code(), Code::kInvalidArgument);
}

TEST(JsonInput, LoneSurrogatesAreRefusedPairsAccepted) {
  rapidjson::Document d;
  ASSERT_TRUE(ParseJsonObject(R"({"body":"\ud83d\ude00 and \u00e9"})", &d, false).ok());
  EXPECT_EQ(std::string(d["body"].GetString()), "\xf0\x9f\x98\x80 and \xc3\xa9");
  for (const char* bad : {R"({"body":"\udc00"})", R"({"body":"\ud800"})", R"({"body":"\ud800x"})",
                          R"({"body":"\ud800\u0041"})", R"({"\udfff":1})"}) {
    Status st = Parse(bad);
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(st.message().find("surrogate"), std::string::npos) << bad << ": " << st.message();
  }
  // "\\ud800" is a backslash, then text: no escape at all.
  EXPECT_TRUE(Parse(R"({"body":"\\ud800"})").ok());
}

TEST(JsonInput, DuplicateMembersAreRefusedAtAnyDepth) {
  EXPECT_NE(Parse(R"({"body":"a","body":"b"})").message().find("names member 'body' twice"),
            std::string::npos);
  EXPECT_EQ(Parse(R"({"jobs":[{"x":1},{"delay_ms":1,"delay_ms":2}]})").code(),
            Code::kInvalidArgument);
  EXPECT_EQ(Parse(R"({"a\u0000":1,"a\u0000":2})").code(), Code::kInvalidArgument);
  EXPECT_TRUE(Parse(R"({"a\u0000":1,"a":2,"b":{"a":1}})").ok());
}

TEST(JsonInput, GrammarErrorsAndNumbersOutOfRange) {
  for (std::string bad : {std::string("{\"n\":1e400}"), std::string("{\"n\":-1e400}"),
                          "{\"n\":" + std::string(10'000, '9') + "}", std::string("{\"a\":}"),
                          std::string("{\"a\":\"\xff\"}"), std::string("{\"a\":\"\xed\xa0\x80\"}"),
                          std::string("{\"a\":1} x"), std::string("\0{}", 3),
                          std::string("{\"a\":1}\0", 8), std::string("{\"a\":1}\0junk", 12)}) {
    Status st = Parse(bad);
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << bad.substr(0, 40);
    EXPECT_EQ(st.message().rfind("bad_json:", 0), 0u) << st.message();
  }
  // 10,000 digits that fit a double are a number.
  EXPECT_TRUE(Parse("{\"n\":0." + std::string(10'000, '1') + "}").ok());
}

TEST(JsonInput, NotAnObject) {
  Status st = Parse("[1,2]");
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_EQ(st.message(), "the request body must be a JSON object");
  rapidjson::Document d;
  EXPECT_TRUE(ParseJsonObject("", &d, true).ok());
  EXPECT_TRUE(d.IsObject());
  EXPECT_EQ(ParseJsonObject("", &d, false).code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace delayq::server
