#include "delayq/text.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "test_seed.h"

namespace delayq {
namespace {

TEST(Text, Rfc3339) {
  EXPECT_EQ(ParseRfc3339("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(ParseRfc3339("2023-11-14T22:13:20Z"), 1'700'000'000'000);
  EXPECT_EQ(ParseRfc3339("2023-11-14T22:13:20.5Z"), 1'700'000'000'500);
  EXPECT_EQ(ParseRfc3339("2023-11-14T22:13:20.123456789z"), 1'700'000'000'123);
  EXPECT_EQ(ParseRfc3339("2023-11-15T00:13:20+02:00"), 1'700'000'000'000);
  EXPECT_EQ(ParseRfc3339("2023-11-14T20:13:20-02:00"), 1'700'000'000'000);
  EXPECT_EQ(ParseRfc3339("2024-02-29T00:00:00Z"), 1'709'164'800'000);
  EXPECT_EQ(ParseRfc3339("1969-12-31T23:59:59Z"), -1000);
  for (const char* bad :
       {"", "2023-11-14", "2023-11-14T22:13:20", "2023-02-29T00:00:00Z", "2023-13-01T00:00:00Z",
        "2023-11-14T24:00:00Z", "2023-11-14T22:13:20.Z", "2023-11-14T22:13:20+0200",
        "2023-11-14T22:13:20Zjunk", "20x3-11-14T22:13:20Z"})
    EXPECT_FALSE(ParseRfc3339(bad).has_value()) << bad;
  EXPECT_EQ(ParseRfc3339("2024-01-01T09:00:00Z"), 1704099600000);
  EXPECT_EQ(ParseRfc3339("2024-01-01T09:00:00.25Z"), 1704099600250);
  EXPECT_EQ(ParseRfc3339("2024-01-01T11:00:00+02:00"), 1704099600000);
  EXPECT_EQ(ParseRfc3339("2024-01-01T08:30:00.1234-00:30"), 1704099600123);
  EXPECT_EQ(ParseRfc3339("2024-02-29T00:00:00z"), 1709164800000);
  for (const char* bad : {"2023-02-29T00:00:00Z", "2024-01-01T09:00:00", "2024-01-01 9:00:00Z",
                          "2024-13-01T00:00:00Z", "2024-01-01T24:00:00Z", "2024-01-01T09:00:00.Z",
                          "2024-01-01T09:00:00Zx", "2024-01-01T09:00:00+2:00", "yesterday"})
    EXPECT_FALSE(ParseRfc3339(bad)) << bad;
}

TEST(Text, BodiesAndBase64) {
  EXPECT_TRUE(IsText(""));
  EXPECT_TRUE(IsText("hello\tworld\r\n"));
  EXPECT_TRUE(IsText("caf\xc3\xa9 \xf0\x9f\x98\x80"));
  EXPECT_FALSE(IsText(std::string("a\0b", 3)));
  EXPECT_FALSE(IsText("\x1b[0m"));
  EXPECT_FALSE(IsText("\xc3"));              // truncated
  EXPECT_FALSE(IsText("\xc0\xaf"));          // overlong
  EXPECT_FALSE(IsText("\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(IsText("\xf4\x90\x80\x80"));  // beyond U+10FFFF
  EXPECT_FALSE(IsText("\xff"));

  EXPECT_EQ(Base64Encode(""), "");
  EXPECT_EQ(Base64Encode("f"), "Zg==");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
  EXPECT_EQ(Base64Encode("foo"), "Zm9v");
  EXPECT_EQ(Base64Encode(std::string("\0\1\2\3", 4)), "AAECAw==");
  std::string out;
  for (const char* bad : {"Z===", "Zg=a", "Zm9v!A==", "=Zm9", "====", "Zg", "Zm8",
                          "Zg=", "Zm9v=", "Zh==", "Zm9=", "Zm 9v", "Zm9v\n", "Zg==Zg=="})
    EXPECT_FALSE(Base64Decode(bad, &out)) << bad;
  std::mt19937 rng(static_cast<uint32_t>(delayq::testing::TestSeed(7)));
  for (size_t n = 0; n < 300; ++n) {
    std::string bytes(n, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    ASSERT_TRUE(Base64Decode(Base64Encode(bytes), &out)) << n;
    EXPECT_EQ(out, bytes) << n;
  }
  ASSERT_TRUE(Base64Decode("", &out));
  EXPECT_EQ(out, "");
}

}  // namespace
}  // namespace delayq
