// Unit tests of the command-line client's pure helpers: server URLs, times,
// numbers, keys, bodies as text or base64, beanstalkd YAML, and the text
// shown for results.
#include "cli/util.h"

#include <gtest/gtest.h>

#include <random>

#include "cli/output.h"

namespace delayq::cli {
namespace {

using Protocol = ServerAddress::Protocol;

TEST(CliUtil, ServerUrls) {
  std::string error;
  auto a = ParseServerUrl("http://127.0.0.1:11380", &error);
  ASSERT_TRUE(a) << error;
  EXPECT_EQ(a->protocol, Protocol::kHttp);
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 11380);

  a = ParseServerUrl("beanstalk://queue.example", &error);
  ASSERT_TRUE(a) << error;
  EXPECT_EQ(a->protocol, Protocol::kBeanstalk);
  EXPECT_EQ(a->host, "queue.example");
  EXPECT_EQ(a->port, kDefaultBeanstalkPort);
  EXPECT_EQ(a->ToString(), "beanstalk://queue.example:11300");

  a = ParseServerUrl("http://localhost/", &error);
  ASSERT_TRUE(a) << error;
  EXPECT_EQ(a->port, kDefaultHttpPort);

  a = ParseServerUrl("http://[::1]:8080", &error);
  ASSERT_TRUE(a) << error;
  EXPECT_EQ(a->host, "::1");
  EXPECT_EQ(a->port, 8080);
  EXPECT_EQ(a->ToString(), "http://[::1]:8080");

  a = ParseServerUrl(kDefaultServer, &error);
  ASSERT_TRUE(a) << error;
  EXPECT_EQ(a->ToString(), kDefaultServer);

  for (const char* bad :
       {"https://h", "h:11300", "", "http://", "http://:80", "http://h:0", "http://h:65536",
        "http://h:x", "http://h:", "http://h/path", "http://[::1", "http://[::1]x", "http://u@h"}) {
    error.clear();
    EXPECT_FALSE(ParseServerUrl(bad, &error)) << bad;
    EXPECT_FALSE(error.empty()) << bad;
  }
}

TEST(CliUtil, Times) {
  EXPECT_EQ(ParseTimeArg("1704099600000"), 1704099600000);
  EXPECT_EQ(ParseTimeArg("2024-01-01T09:00:00Z"), 1704099600000);
  EXPECT_FALSE(ParseTimeArg("-5"));
  EXPECT_FALSE(ParseTimeArg("12s"));

  EXPECT_EQ(FormatRfc3339(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(FormatRfc3339(1704099600250), "2024-01-01T09:00:00.250Z");
  for (TimeMs t : {TimeMs{0}, TimeMs{1}, TimeMs{1704099600250}, TimeMs{4102444799999}})
    EXPECT_EQ(ParseRfc3339(FormatRfc3339(t)), t) << t;
}

TEST(CliUtil, NumbersAndKeys) {
  EXPECT_EQ(ParseUint("0", 0, 10), 0u);
  EXPECT_EQ(ParseUint("4294967295", 0, UINT32_MAX), UINT32_MAX);
  EXPECT_FALSE(ParseUint("4294967296", 0, UINT32_MAX));
  EXPECT_FALSE(ParseUint("", 0, 10));
  EXPECT_FALSE(ParseUint("-1", 0, 10));
  EXPECT_FALSE(ParseUint("+1", 0, 10));
  EXPECT_FALSE(ParseUint("1 ", 0, 10));
  EXPECT_FALSE(ParseUint("0", 1, 10));
  EXPECT_FALSE(ParseUint("99999999999999999999", 0, UINT64_MAX));

  EXPECT_TRUE(IsValidKey("order-42"));
  EXPECT_TRUE(IsValidKey(std::string(200, 'k')));
  EXPECT_TRUE(IsValidKey("~!@#$%^&*()"));
  EXPECT_FALSE(IsValidKey(""));
  EXPECT_FALSE(IsValidKey(std::string(201, 'k')));
  EXPECT_FALSE(IsValidKey("a b"));
  EXPECT_FALSE(IsValidKey("a\r\nput"));
  EXPECT_FALSE(IsValidKey("caf\xc3\xa9"));

  EXPECT_EQ(PercentEncode("a/b c%~._-Z9"), "a%2Fb%20c%25~._-Z9");
  EXPECT_EQ(Plural(1, "job"), "1 job");
  EXPECT_EQ(Plural(0, "job"), "0 jobs");
}

TEST(CliUtil, BeanstalkYaml) {
  auto m = ParseYamlMap("---\nid: 3\ntube: emails\nversion: \"0.1.0\"\nos: #1 SMP x\n");
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0], (std::pair<std::string, std::string>{"id", "3"}));
  EXPECT_EQ(m[1].second, "emails");
  EXPECT_EQ(m[2].second, "0.1.0");
  EXPECT_EQ(m[3].second, "#1 SMP x");
  EXPECT_EQ(ParseYamlList("---\n- default\n- orders\n"),
            (std::vector<std::string>{"default", "orders"}));
  EXPECT_TRUE(ParseYamlList("---\n").empty());
}

rapidjson::Document Json(const char* text) {
  rapidjson::Document d;
  d.Parse(text);
  return d;
}

TEST(CliOutput, Durations) {
  EXPECT_EQ(HumanDuration(0), "0ms");
  EXPECT_EQ(HumanDuration(250), "250ms");
  EXPECT_EQ(HumanDuration(1000), "1s");
  EXPECT_EQ(HumanDuration(52014), "52.014s");
  EXPECT_EQ(HumanDuration(1500), "1.5s");
  EXPECT_EQ(HumanDuration(90'000), "1m30s");
  EXPECT_EQ(HumanDuration(1'800'000), "30m");
  EXPECT_EQ(HumanDuration(93'600'000), "1d2h");
}

TEST(CliOutput, Fields) {
  auto d = Json(R"({"due_ms":1704099600250,"ttr_ms":60000,"time_left_s":59,"paused":true,)"
                R"("name":"q","total_jobs":7,"pause_time_left_ms":0})");
  EXPECT_EQ(FieldLabel("due_ms"), "due");
  EXPECT_EQ(FieldLabel("time_left_s"), "time left");
  EXPECT_EQ(FieldLabel("total_jobs"), "total jobs");
  EXPECT_EQ(FieldValue("due_ms", d["due_ms"]), "2024-01-01T09:00:00.250Z");
  EXPECT_EQ(FieldValue("ttr_ms", d["ttr_ms"]), "1m");
  EXPECT_EQ(FieldValue("time_left_s", d["time_left_s"]), "59s");
  EXPECT_EQ(FieldValue("paused", d["paused"]), "true");
  EXPECT_EQ(FieldsText(d),
            "due:             2024-01-01T09:00:00.250Z\n"
            "ttr:             1m\n"
            "time left:       59s\n"
            "paused:          true\n"
            "name:            q\n"
            "total jobs:      7\n"
            "pause time left: 0ms\n");
}

TEST(CliOutput, Jobs) {
  auto job = Json(R"({"id":3,"topic":"emails","key":"k","state":"reserved","priority":10,)"
                  R"("deadline_ms":1704099600250,"ttr_ms":30000,"max_tries":0,"reserves":1,)"
                  R"("timeouts":0,"kicks":2,"body":"two\nlines"})");
  EXPECT_EQ(JobText(job),
            "id:        3\n"
            "topic:     emails\n"
            "key:       k\n"
            "state:     reserved\n"
            "priority:  10\n"
            "deadline:  2024-01-01T09:00:00.250Z\n"
            "ttr:       30s\n"
            "max tries: unlimited\n"
            "counts:    reserves 1, timeouts 0, kicks 2\n"
            "body:      9 bytes\n"
            "two\nlines\n");
  EXPECT_EQ(JobBody(job), "two\nlines");
  auto binary = Json(R"({"id":4,"body_base64":"AAECAw=="})");
  EXPECT_EQ(JobText(binary),
            "id:        4\n"
            "body:      4 bytes, not text (-o json or -o body shows it)\n");
  EXPECT_EQ(JobBody(binary), std::string("\0\1\2\3", 4));
  EXPECT_EQ(JobText(Json(R"({"id":5,"body":""})")), "id:        5\nbody:      0 bytes\n");
  EXPECT_EQ(JsonLine(binary), "{\"id\":4,\"body_base64\":\"AAECAw==\"}\n");
  // A push job's last failed try: its status and first bytes on a line.
  auto pushed =
      Json(R"({"id":6,"state":"buried","last_answer":{"status":500,"text":"down\nfor now"},)"
           R"("body":"b"})");
  EXPECT_EQ(JobText(pushed),
            "id:        6\n"
            "state:     buried\n"
            "answer:    500: down for now\n"
            "body:      1 byte\nb\n");
  auto unanswered = Json(R"({"id":7,"last_answer":{"status":0,"text_base64":"AAE="},"body":""})");
  EXPECT_EQ(JobText(unanswered),
            "id:        7\n"
            "answer:    0 (not text: -o json shows it)\n"
            "body:      0 bytes\n");
}

TEST(CliOutput, Replies) {
  EXPECT_EQ(PutText(Json(R"({"id":1,"created":true,"state":"ready"})"), ""),
            "job 1 created (ready)\n");
  EXPECT_EQ(
      PutText(Json(R"({"id":1,"created":false,"state":"delayed","due_ms":1704099600250})"), "k"),
      "job 1 exists with key k (delayed until 2024-01-01T09:00:00.250Z)\n");
  EXPECT_EQ(PutText(Json(R"({"id":2,"created":true})"), ""), "job 2 created\n");
  EXPECT_EQ(StateText(Json(R"({"id":4,"state":"buried"})"), "buried"), "job 4 buried\n");
  EXPECT_EQ(StateText(Json(R"({"id":4,"state":"reserved","deadline_ms":0})"), "touched"),
            "job 4 touched (reserved until 1970-01-01T00:00:00.000Z)\n");
  EXPECT_EQ(StateText(Json(R"({"id":4,"deleted":true})"), "deleted"), "job 4 deleted\n");
}

TEST(CliUtil, JsonDepth) {
  EXPECT_EQ(JsonDepth("1"), 0u);
  EXPECT_EQ(JsonDepth(R"({"a":[1,{"b":[]}]})"), 4u);
  EXPECT_EQ(JsonDepth(R"({"a":"[[[[\"[["})"), 1u);
  EXPECT_EQ(JsonDepth(std::string(1'000'000, '[')), 1'000'000u);
}

}  // namespace
}  // namespace delayq::cli
