#include "store/record_codec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "test_seed.h"

namespace delayq::store {
namespace {

JobRecord RandomRecord(std::mt19937_64& rng) {
  JobRecord r;
  r.id = rng() % 5 == 0 ? UINT64_MAX - rng() % 3 : 1 + rng() % 1'000'000;
  r.topic = std::string(1 + rng() % 200, static_cast<char>('a' + rng() % 26));
  if (rng() % 2) r.key = std::string(rng() % 201, static_cast<char>('!' + rng() % 90));
  r.named = !r.key.empty() && rng() % 2 == 0;
  JobState states[] = {JobState::kReady, JobState::kDelayed, JobState::kBuried};
  r.state = states[rng() % 3];
  r.priority = static_cast<uint32_t>(rng());
  r.due_ms = static_cast<TimeMs>(rng() % (uint64_t{1} << 50));
  r.created_ms = static_cast<TimeMs>(rng() % (uint64_t{1} << 45));
  r.delay_ms = static_cast<TimeMs>(rng() % (uint64_t{1} << 40));
  r.ttr_ms = 1 + static_cast<TimeMs>(rng() % 1'000'000);
  r.reserves = static_cast<uint32_t>(rng());
  r.timeouts = static_cast<uint32_t>(rng() % 10);
  r.releases = static_cast<uint32_t>(rng() % 1000);
  r.buries = 0;
  r.kicks = UINT32_MAX;
  r.max_tries = static_cast<uint32_t>(rng() % 20);
  switch (rng() % 3) {
    case 0:
      break;
    case 1: {
      std::vector<TimeMs> d(1 + rng() % 64);
      for (TimeMs& x : d) x = static_cast<TimeMs>(rng() % 100'000'000);
      r.backoff = Backoff::List(d);
      break;
    }
    default:
      r.backoff = Backoff::Exponential(1000, 3'600'000);
  }
  if (rng() % 3 == 0) {
    PushAnswer& a = r.answer.emplace();
    a.status = rng() % 2 ? 0 : 100 + static_cast<uint32_t>(rng() % 500);
    a.text = std::string(rng() % (kMaxAnswerBytes + 1), '\0');
    for (char& c : a.text) c = static_cast<char>(rng());
  }
  return r;
}

TEST(RecordCodec, RoundTripsEveryField) {
  std::mt19937_64 rng(delayq::testing::TestSeed(11));
  for (int i = 0; i < 2000; ++i) {
    JobRecord r = RandomRecord(rng);
    std::string body(rng() % 3 == 0 ? 0 : rng() % 70000, '\0');
    for (char& c : body) c = static_cast<char>(rng());
    std::string value;
    EncodeJobValue(r, body, &value);
    JobRecord back;
    std::string_view got_body;
    ASSERT_TRUE(DecodeJobValue(value, &back, &got_body).ok());
    EXPECT_EQ(back, r);
    EXPECT_EQ(got_body, body);
  }
}

// The format, field by field, as docs/storage.md gives it: the encoder
// (which writes through a buffer of its own) must give these bytes, after
// whatever the string held before.
std::string ReferenceValue(const JobRecord& r, std::string_view body) {
  std::string out;
  auto put_signed = [&](int64_t v) {
    PutVarint(&out, (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63));
  };
  auto put_bytes = [&](std::string_view b) {
    PutVarint(&out, b.size());
    out.append(b);
  };
  const uint8_t flags = (r.named ? kRecordNamed : 0) | (r.answer ? kRecordAnswered : 0);
  out.push_back(static_cast<char>(r.answer ? 3 : flags != 0 ? 2 : 1));
  PutVarint(&out, r.id);
  put_bytes(r.topic);
  put_bytes(r.key);
  out.push_back(static_cast<char>(r.state));
  PutVarint(&out, r.priority);
  for (TimeMs t : {r.due_ms, r.created_ms, r.delay_ms, r.ttr_ms}) put_signed(t);
  for (uint32_t c : {r.reserves, r.timeouts, r.releases, r.buries, r.kicks, r.max_tries})
    PutVarint(&out, c);
  out.push_back(static_cast<char>(r.backoff.kind));
  if (r.backoff.kind == Backoff::Kind::kList) {
    PutVarint(&out, r.backoff.delays_ms.size());
    for (TimeMs d : r.backoff.delays_ms) put_signed(d);
  } else if (r.backoff.kind == Backoff::Kind::kExponential) {
    put_signed(r.backoff.base_ms);
    put_signed(r.backoff.cap_ms);
  }
  if (flags != 0) out.push_back(static_cast<char>(flags));
  if (r.answer) {
    PutVarint(&out, r.answer->status);
    put_bytes(std::string_view(r.answer->text).substr(0, kMaxAnswerBytes));
  }
  put_bytes(body);
  return out;
}

TEST(RecordCodec, WritesTheDocumentedBytes) {
  std::mt19937_64 rng(delayq::testing::TestSeed(12));
  for (int i = 0; i < 3000; ++i) {
    JobRecord r = RandomRecord(rng);
    if (rng() % 4 == 0) r.due_ms = -static_cast<TimeMs>(rng() % 1000);  // zigzag's other half
    if (rng() % 4 == 0) r.topic = std::string(250 + rng() % 300, 't');  // past the buffer
    // Bodies short and long: inside the encoder's buffer, at its edge, past it.
    const size_t sizes[] = {0, 1, 64, 100, 180, 255, 256, 300, 5000};
    std::string body(sizes[rng() % std::size(sizes)], '\0');
    for (char& c : body) c = static_cast<char>(rng());
    std::string value(rng() % 40, 'p');  // appended to, not replaced
    const std::string before = value;
    EncodeJobValue(r, body, &value);
    ASSERT_EQ(value, before + ReferenceValue(r, body)) << "record " << i;
  }
}

TEST(RecordCodec, EveryTruncationAndDamageIsAnErrorNotACrash) {
  std::mt19937_64 rng(delayq::testing::TestSeed(12));
  JobRecord r = RandomRecord(rng);
  std::string value;
  EncodeJobValue(r, "some body bytes", &value);
  for (size_t n = 0; n < value.size(); ++n) {
    JobRecord back;
    std::string_view body;
    Status st = DecodeJobValue(std::string_view(value).substr(0, n), &back, &body);
    EXPECT_FALSE(st.ok()) << "prefix of " << n << " bytes accepted";
  }
  std::string longer = value + "x";
  JobRecord back;
  std::string_view body;
  EXPECT_EQ(DecodeJobValue(longer, &back, &body).code(), Code::kCorruption);
  // Flip every byte: never a crash; if it still parses (a damaged number
  // can still be a number: RocksDB's block checksums are what catch such
  // damage on disk), what it parses to survives another round trip.
  for (size_t i = 0; i < value.size(); ++i) {
    std::string bad = value;
    bad[i] = static_cast<char>(bad[i] ^ 0x5a);
    if (DecodeJobValue(bad, &back, &body).ok()) {
      std::string again;
      EncodeJobValue(back, body, &again);
      JobRecord twice;
      std::string_view body2;
      ASSERT_TRUE(DecodeJobValue(again, &twice, &body2).ok());
      EXPECT_EQ(twice, back);
      EXPECT_EQ(body2, body);
    }
  }
}

TEST(RecordCodec, AVersionFromTheFutureIsRefusedClearly) {
  JobRecord r;
  r.id = 1;
  r.topic = "t";
  r.ttr_ms = 1000;
  std::string value;
  EncodeJobValue(r, "b", &value);
  value[0] = static_cast<char>(kRecordVersion + 1);
  JobRecord back;
  std::string_view body;
  Status st = DecodeJobValue(value, &back, &body);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("newer"), std::string::npos) << st.message();
}

// A job without a flag is written as version 1, which every delayqd reads;
// a named one as version 2, with its flags byte before the body.
TEST(RecordCodec, OnlyANamedJobNeedsVersionTwo) {
  JobRecord r;
  r.id = 7;
  r.topic = "t";
  r.key = "order-1";
  r.ttr_ms = 1000;
  std::string plain, named;
  EncodeJobValue(r, "b", &plain);
  r.named = true;
  EncodeJobValue(r, "b", &named);
  EXPECT_EQ(plain[0], 1);
  EXPECT_EQ(named[0], 2);
  EXPECT_EQ(named.size(), plain.size() + 1);
  JobRecord back;
  std::string_view body;
  ASSERT_TRUE(DecodeJobValue(named, &back, &body).ok());
  EXPECT_TRUE(back.named);
  ASSERT_TRUE(DecodeJobValue(plain, &back, &body).ok());
  EXPECT_FALSE(back.named) << "decoding into a record clears the flag";
  // Unknown flags, and a name without a key, are damage.
  std::string bad = named;
  bad[bad.size() - 3] = 4;  // the flags byte: before the body's length and byte
  EXPECT_EQ(DecodeJobValue(bad, &back, &body).code(), Code::kCorruption);
  r.key.clear();
  std::string keyless;
  EncodeJobValue(r, "b", &keyless);
  EXPECT_EQ(DecodeJobValue(keyless, &back, &body).code(), Code::kCorruption);
}

// A push try's answer is written as version 3: its flag, then the status
// and the text after the flags byte. Values of versions 1 and 2, kept here
// as the bytes those versions wrote, still load, without an answer.
TEST(RecordCodec, AnAnswerNeedsVersionThreeAndOldValuesStillLoad) {
  JobRecord r;
  r.id = 7;
  r.topic = "t";
  r.key = "k";
  r.state = JobState::kBuried;
  r.ttr_ms = 1000;
  r.reserves = 2;
  r.buries = 1;
  r.max_tries = 2;
  r.answer = PushAnswer{500, "overloaded"};
  std::string value;
  EncodeJobValue(r, "b", &value);
  EXPECT_EQ(value[0], 3);
  JobRecord back;
  std::string_view body;
  ASSERT_TRUE(DecodeJobValue(value, &back, &body).ok());
  EXPECT_EQ(back, r);
  EXPECT_EQ(body, "b");
  // A text beyond kMaxAnswerBytes is cut when written, refused when read.
  r.answer->text = std::string(kMaxAnswerBytes + 50, 'x');
  value.clear();
  EncodeJobValue(r, "b", &value);
  ASSERT_TRUE(DecodeJobValue(value, &back, &body).ok());
  EXPECT_EQ(back.answer->text, std::string(kMaxAnswerBytes, 'x'));

  // Version 1: id 7, topic "t", key "k", buried, priority 1024, due 0,
  // created 0, delay 0, ttr 1000, reserves 2, buries 1, max_tries 2, no
  // back-off, body "b".
  const std::string v1(
      "\x01\x07\x01t\x01k\x03\x80\x08\x00\x00\x00\xd0\x0f"
      "\x02\x00\x00\x01\x00\x02\x00\x01"
      "b",
      23);
  back.answer = PushAnswer{1, "stale"};
  ASSERT_TRUE(DecodeJobValue(v1, &back, &body).ok());
  EXPECT_FALSE(back.answer.has_value()) << "decoding into a record clears the answer";
  EXPECT_EQ(back.priority, 1024u);
  EXPECT_EQ(back.ttr_ms, 1000);
  EXPECT_EQ(back.state, JobState::kBuried);
  EXPECT_EQ(body, "b");
  // Version 2, the same job named: its flags byte before the body.
  std::string v2 = v1;
  v2[0] = 2;
  v2.insert(v2.size() - 2, 1, '\x01');
  ASSERT_TRUE(DecodeJobValue(v2, &back, &body).ok());
  EXPECT_TRUE(back.named);
  EXPECT_FALSE(back.answer.has_value());
  // The answer's flag in a version 2 value is damage.
  v2[v2.size() - 3] = 3;
  EXPECT_EQ(DecodeJobValue(v2, &back, &body).code(), Code::kCorruption);
}

TEST(RecordCodec, KeysSortAsTheirNumbers) {
  std::vector<std::pair<TimeMs, JobId>> due = {
      {5, 9}, {5, 10}, {256, 1}, {1'700'000'000'000, 2}, {0, UINT64_MAX}, {255, 300}};
  std::vector<std::string> keys;
  for (auto [d, id] : due) keys.push_back(DueKey("t", d, id));
  // Another topic's entries, and one whose name extends "t", sort apart.
  keys.push_back(DueKey("t2", 0, 1));
  keys.push_back(DueKey("s", UINT32_MAX, 1));
  std::sort(due.begin(), due.end());
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(keys.front(), DueKey("s", UINT32_MAX, 1));
  EXPECT_EQ(keys.back(), DueKey("t2", 0, 1));
  for (size_t i = 0; i < due.size(); ++i) {
    std::string_view topic;
    TimeMs d;
    JobId id;
    ASSERT_TRUE(ParseDueKey(keys[i + 1], &topic, &d, &id));
    EXPECT_EQ(topic, "t");
    EXPECT_EQ(std::make_pair(d, id), due[i]);
  }
  std::string_view topic;
  TimeMs d;
  JobId parsed;
  EXPECT_FALSE(ParseDueKey(std::string(17, 'x'), &topic, &d, &parsed));  // no NUL
  EXPECT_LT(JobKey(255), JobKey(256));
  JobId id;
  ASSERT_TRUE(ParseJobKey(JobKey(0x0102030405060708), &id));
  EXPECT_EQ(id, 0x0102030405060708u);
  EXPECT_FALSE(ParseJobKey("short", &id));
  EXPECT_NE(UserKey("a", "bc"), UserKey("ab", "c"));
}

}  // namespace
}  // namespace delayq::store
