#include "server/beanstalk_decoder.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "server/beanstalk_decoder_reference.h"
#include "test_seed.h"

namespace delayq::server {
namespace {

using namespace std::string_literals;
using Kind = BeanDecoder::Kind;

constexpr size_t kDefaultMax = 65535;

// An owned copy of one decoded item, compared field by field.
struct Rec {
  Kind kind = Kind::kCommand;
  std::string reply = {};
  BeanOp op = BeanOp::kQuit;
  uint64_t id = 0;
  uint32_t pri = 0;
  uint32_t bytes = 0;
  uint64_t delay = 0;
  uint64_t ttr = 0;
  int64_t timeout = 0;
  uint64_t count = 0;
  bool has_at = false;
  uint64_t at = 0;
  uint64_t tries = 0;
  uint8_t clear_mask = 0;
  std::string name = {};
  std::string key = {};
  std::string backoff = {};
  std::string secret = {};
  std::string body = {};
  bool counted = false;  // replies: Item::counted (op then says which put)

  bool operator==(const Rec&) const = default;
};

void PrintTo(const Rec& r, std::ostream* os) {
  switch (r.kind) {
    case Kind::kNeedMore:
      *os << "<need-more>";
      return;
    case Kind::kClose:
      *os << "<close>";
      return;
    case Kind::kReply: {
      std::string s = r.reply;
      if (s.size() >= 2) s.resize(s.size() - 2);
      *os << "<reply " << s;
      if (r.counted) *os << " counted as op " << static_cast<int>(r.op);
      *os << ">";
      return;
    }
    case Kind::kCommand:
      break;
  }
  *os << "{op=" << static_cast<int>(r.op) << " id=" << r.id << " pri=" << r.pri
      << " bytes=" << r.bytes << " delay=" << r.delay << " ttr=" << r.ttr
      << " timeout=" << r.timeout << " count=" << r.count << " has_at=" << r.has_at
      << " at=" << r.at << " tries=" << r.tries << " mask=" << int{r.clear_mask} << " name='"
      << r.name << "' key='" << r.key << "' backoff='" << r.backoff << "' secret='" << r.secret
      << "' body.size=" << r.body.size() << "}";
}

Rec FromItem(const BeanDecoder::Item& item) {
  Rec r;
  r.kind = item.kind;
  r.reply = std::string(item.reply);
  if (item.kind == Kind::kReply && item.counted) {
    r.counted = true;
    r.op = item.command.op;
  }
  if (item.kind != Kind::kCommand) return r;
  const BeanCommand& c = item.command;
  r.op = c.op;
  r.id = c.id;
  r.pri = c.pri;
  r.bytes = c.bytes;
  r.delay = c.delay;
  r.ttr = c.ttr;
  r.timeout = c.timeout;
  r.count = c.count;
  r.has_at = c.has_at;
  r.at = c.at;
  r.tries = c.tries;
  r.clear_mask = c.clear_mask;
  r.name = std::string(c.name);
  r.key = std::string(c.key);
  r.backoff = std::string(c.backoff);
  r.secret = std::string(c.secret);
  r.body = std::string(c.body);
  return r;
}

Rec Reply(std::string_view reply) {
  Rec r;
  r.kind = Kind::kReply;
  r.reply = std::string(reply);
  return r;
}
Rec Close() {
  Rec r;
  r.kind = Kind::kClose;
  return r;
}
// A reply that ends a put whose numbers parsed (1.12 counts it in cmd-put).
Rec PutReply(std::string_view reply, BeanOp op = BeanOp::kPut) {
  Rec r = Reply(reply);
  r.counted = true;
  r.op = op;
  return r;
}
const Rec kBad = Reply(kBadFormatReply);
const Rec kUnknown = Reply(kUnknownCommandReply);
const Rec kTooBig = PutReply(kJobTooBigReply);
const Rec kNoCrlf = PutReply(kExpectedCrlfReply);
const Rec kPutBad = PutReply(kBadFormatReply);

struct Fed {
  std::vector<Rec> items;
  std::string leftover;  // unconsumed input at the end ("<closed>" after quit)
};

// Feeds the chunks the way a connection does: append, loop Next(), drop what
// was consumed. Checks the decoder's contract on every call.
Fed Feed(size_t max_job_size, const std::vector<std::string_view>& chunks) {
  BeanDecoder d(max_job_size);
  std::string buf;
  Fed run;
  for (std::string_view chunk : chunks) {
    buf.append(chunk);
    // Every item but the last consumes at least one byte.
    const size_t max_calls = buf.size() + 1;
    for (size_t calls = 1;; ++calls) {
      EXPECT_LE(calls, max_calls) << "no progress";
      if (calls > max_calls) return run;
      BeanDecoder::Item item = d.Next(buf);
      EXPECT_LE(item.consumed, buf.size());
      if (item.kind != Kind::kNeedMore) {
        EXPECT_GT(item.consumed, 0u);
        run.items.push_back(FromItem(item));
      }
      buf.erase(0, item.consumed);
      if (item.kind == Kind::kClose) {
        run.leftover = "<closed>";
        return run;
      }
      if (item.kind == Kind::kNeedMore) {
        BeanDecoder::Item again = d.Next(buf);
        EXPECT_EQ(again.kind, Kind::kNeedMore);
        EXPECT_EQ(again.consumed, 0u);
        break;
      }
    }
  }
  run.leftover = buf;
  return run;
}

std::vector<Rec> Decode(std::string_view input, size_t max_job_size = kDefaultMax) {
  return Feed(max_job_size, {input}).items;
}

// Decodes one line (CRLF appended) that must give exactly one item.
Rec One(std::string_view line, size_t max_job_size = kDefaultMax) {
  std::vector<Rec> items = Decode(std::string(line) + "\r\n", max_job_size);
  EXPECT_EQ(items.size(), 1u) << "line: " << line;
  return items.empty() ? Rec{.kind = Kind::kNeedMore} : items[0];
}

void ExpectBad(std::string_view line) { EXPECT_EQ(One(line), kBad) << "line: " << line; }
void ExpectUnknown(std::string_view line) { EXPECT_EQ(One(line), kUnknown) << "line: " << line; }

// ---- recognition -------------------------------------------------------------

TEST(BeanDecoder, NoArgumentCommands) {
  EXPECT_EQ(One("peek-ready"), (Rec{.op = BeanOp::kPeekReady}));
  EXPECT_EQ(One("peek-delayed"), (Rec{.op = BeanOp::kPeekDelayed}));
  EXPECT_EQ(One("peek-buried"), (Rec{.op = BeanOp::kPeekBuried}));
  EXPECT_EQ(One("reserve"), (Rec{.op = BeanOp::kReserve, .timeout = -1}));
  EXPECT_EQ(One("stats"), (Rec{.op = BeanOp::kStats}));
  EXPECT_EQ(One("list-tubes"), (Rec{.op = BeanOp::kListTubes}));
  EXPECT_EQ(One("list-tube-used"), (Rec{.op = BeanOp::kListTubeUsed}));
  EXPECT_EQ(One("list-tubes-watched"), (Rec{.op = BeanOp::kListTubesWatched}));
}

TEST(BeanDecoder, NoArgumentCommandsNeedExactLength) {
  for (const char* line : {"peek-ready ",
                           "peek-readyx",
                           "peek-delayed ",
                           "peek-buried ",
                           "peek-buriedx",
                           "reserve ",
                           "reservex",
                           "reserve-with-timeout",
                           "reserve-job",
                           "reserve-batch",
                           "stats ",
                           "statsx",
                           "stats-tube",
                           "stats-job",
                           "list-tubes ",
                           "list-tubesx",
                           "list-tube-used ",
                           "list-tubes-watched ",
                           "list-tubes-watchedx",
                           "stats\n",
                           "reserve\t"}) {
    ExpectBad(line);
  }
}

TEST(BeanDecoder, UnknownCommands) {
  for (const char* line :
       {"",           " ",           "put",   "peek",   "delete",  "release",    "bury",
        "kick",       "kick-job",    "touch", "use",    "watch",   "ignore",     "list",
        "qui",        "pause",       "foo",   " stats", "put-ex",  "delete-key", "peek-key",
        "clear-tube", "PUT 1 2 3 4", "Stats", "QUIT",   "Reserve", "\tstats"}) {
    ExpectUnknown(line);
  }
}

TEST(BeanDecoder, QuitClosesOnAnyPrefix) {
  EXPECT_EQ(One("quit"), Close());
  EXPECT_EQ(One("quitxyz"), Close());
  EXPECT_EQ(One("quit "), Close());
  EXPECT_EQ(One("quit\n"), Close());
  // Nothing after a close is decoded.
  Fed run = Feed(kDefaultMax, {"stats\r\nquit\r\nstats\r\n"});
  EXPECT_EQ(run.items, (std::vector<Rec>{Rec{.op = BeanOp::kStats}, Close()}));
}

TEST(BeanDecoder, NulInLineIsBadFormat) {
  EXPECT_EQ(Decode("stats\0\r\n"s), std::vector<Rec>{kBad});
  EXPECT_EQ(Decode("quit\0\r\n"s), std::vector<Rec>{kBad});
  EXPECT_EQ(Decode("\0\r\n"s), std::vector<Rec>{kBad});
  EXPECT_EQ(Decode("xyz\0\r\n"s), std::vector<Rec>{kBad});  // not UNKNOWN_COMMAND
  EXPECT_EQ(Decode("use fo\0o\r\n"s), std::vector<Rec>{kBad});
  // A put line with a NUL is BAD_FORMAT and its body is read as commands.
  EXPECT_EQ(Decode("put 1 2 3 4\0\r\nbody\r\n"s), (std::vector<Rec>{kBad, kUnknown}));
}

// ---- commands taking an id -----------------------------------------------------

TEST(BeanDecoder, IdCommands) {
  const std::pair<const char*, BeanOp> cmds[] = {
      {"peek ", BeanOp::kPeek},        {"delete ", BeanOp::kDelete},
      {"touch ", BeanOp::kTouch},      {"stats-job ", BeanOp::kStatsJob},
      {"kick-job ", BeanOp::kKickJob}, {"reserve-job ", BeanOp::kReserveJob}};
  for (const auto& [prefix, op] : cmds) {
    std::string p = prefix;
    EXPECT_EQ(One(p + "5"), (Rec{.op = op, .id = 5})) << p;
    EXPECT_EQ(One(p + "0"), (Rec{.op = op, .id = 0})) << p;
    EXPECT_EQ(One(p + "   000042"), (Rec{.op = op, .id = 42})) << p;
    EXPECT_EQ(One(p + "18446744073709551615"), (Rec{.op = op, .id = UINT64_MAX})) << p;
    for (const char* arg : {"", " ", "5 ", "-5", "+5", "5x", "x5", "0x5", "\t5", "5\t",
                            "18446744073709551616", "99999999999999999999999", "5 6"}) {
      ExpectBad(p + arg);
    }
  }
}

// ---- put ---------------------------------------------------------------------

TEST(BeanDecoder, PutGood) {
  EXPECT_EQ(Decode("put 1 2 3 5\r\nhello\r\n"),
            (std::vector<Rec>{Rec{
                .op = BeanOp::kPut, .pri = 1, .bytes = 5, .delay = 2, .ttr = 3, .body = "hello"}}));
  EXPECT_EQ(Decode("put   4294967295  4294967295 4294967295   0\r\n\r\n"),
            (std::vector<Rec>{Rec{
                .op = BeanOp::kPut, .pri = UINT32_MAX, .delay = UINT32_MAX, .ttr = UINT32_MAX}}));
  // TTR 0 is reported raw (the executor clamps it to 1 s); leading zeros are fine.
  EXPECT_EQ(Decode("put 0001 0 0 02\r\nab\r\n"),
            (std::vector<Rec>{Rec{.op = BeanOp::kPut, .pri = 1, .bytes = 2, .body = "ab"}}));
}

TEST(BeanDecoder, PutBodyMayContainCrlfAndNul) {
  std::string body = "a\r\nb\0\r\r\n\nc"s;
  std::string in = "put 1 2 3 " + std::to_string(body.size()) + "\r\n" + body + "\r\nstats\r\n";
  EXPECT_EQ(Decode(in), (std::vector<Rec>{Rec{.op = BeanOp::kPut,
                                              .pri = 1,
                                              .bytes = static_cast<uint32_t>(body.size()),
                                              .delay = 2,
                                              .ttr = 3,
                                              .body = body},
                                          Rec{.op = BeanOp::kStats}}));
}

TEST(BeanDecoder, PutBadLine) {
  for (const char* line :
       {"put 1 2 3", "put 1 2 3 ", "put 1 2", "put ", "put  ", "put -1 2 3 4", "put +1 2 3 4",
        "put 1 -2 3 4", "put 1 2 3 -4", "put 4294967296 2 3 4", "put 1 4294967296 3 4",
        "put 1 2 4294967296 4", "put 1\t2 3 4", "put 1,2 3 4", "put x 2 3 4",
        "put 99999999999999999999999 2 3 4", "put 1 2 3 4294967296"}) {
    ExpectBad(line);
  }
}

TEST(BeanDecoder, PutTrailingGarbageDoesNotSkipBody) {
  // 1.12: BAD_FORMAT, then the body is read as the next command line.
  // It still counts as a put (cmd-put), unlike a put whose numbers are bad.
  EXPECT_EQ(Decode("put 1 2 3 5 \r\nhello\r\n"), (std::vector<Rec>{kPutBad, kUnknown}));
  EXPECT_EQ(Decode("put 1 2 3 5x\r\nstats\r\n"),
            (std::vector<Rec>{kPutBad, Rec{.op = BeanOp::kStats}}));
  EXPECT_EQ(Decode("put 1 2 3 4 5\r\nquit\r\n"), (std::vector<Rec>{kPutBad, Close()}));
  EXPECT_EQ(Decode("put 1 2 x 4\r\nquit\r\n"), (std::vector<Rec>{kBad, Close()}));
}

TEST(BeanDecoder, PutBodyAtLimitAccepted) {
  std::string body(10, 'z');
  EXPECT_EQ(Decode("put 1 2 3 10\r\n" + body + "\r\n", 10),
            (std::vector<Rec>{Rec{
                .op = BeanOp::kPut, .pri = 1, .bytes = 10, .delay = 2, .ttr = 3, .body = body}}));
  EXPECT_EQ(Decode("put 1 2 3 0\r\n\r\n", 0),
            (std::vector<Rec>{Rec{.op = BeanOp::kPut, .pri = 1, .delay = 2, .ttr = 3}}));
}

TEST(BeanDecoder, PutTooBigDiscardsBodyAndCrlf) {
  // 11 + 2 bytes are dropped, whatever they are; then the next command.
  EXPECT_EQ(Decode("put 1 2 3 11\r\nhello\r\nstat\r\nstats\r\n", 10),
            (std::vector<Rec>{kTooBig, Rec{.op = BeanOp::kStats}}));
  // The two bytes after the body need not be CRLF: they are dropped too.
  EXPECT_EQ(Decode("put 1 2 3 1\r\nxYZstats\r\n", 0),
            (std::vector<Rec>{kTooBig, Rec{.op = BeanOp::kStats}}));
}

TEST(BeanDecoder, PutTooBigWinsOverTrailingGarbage) {
  EXPECT_EQ(Decode("put 1 2 3 11 garbage\r\n0123456789a\r\nstats\r\n", 10),
            (std::vector<Rec>{kTooBig, Rec{.op = BeanOp::kStats}}));
}

// An empty input may be a view with no data pointer (a connection's
// buffer freed while idle): nothing is read from it. The sanitizer build
// caught memchr being handed the null pointer.
TEST(BeanDecoder, EmptyInputWithoutDataNeedsMore) {
  BeanDecoder d(10);
  BeanDecoder::Item item = d.Next(std::string_view());
  EXPECT_EQ(item.kind, Kind::kNeedMore);
  EXPECT_EQ(item.consumed, 0u);
}

TEST(BeanDecoder, PutTooBigDiscardIsIncremental) {
  BeanDecoder d(10);
  std::string line = "put 1 2 3 1000\r\n";
  BeanDecoder::Item item = d.Next(line + "abc");
  EXPECT_EQ(item.kind, Kind::kNeedMore);
  EXPECT_EQ(item.consumed, line.size() + 3);  // the body is not buffered
  std::string chunk(500, 'x');
  item = d.Next(chunk);
  EXPECT_EQ(item.kind, Kind::kNeedMore);
  EXPECT_EQ(item.consumed, 500u);
  item = d.Next(std::string(497, 'y') + "\r\nstats\r\n");  // 497 + 2 = the rest
  EXPECT_EQ(item.kind, Kind::kReply);
  EXPECT_EQ(item.reply, kJobTooBigReply);
  EXPECT_EQ(item.consumed, 499u);
  item = d.Next("stats\r\n");
  EXPECT_EQ(item.kind, Kind::kCommand);
  EXPECT_EQ(item.command.op, BeanOp::kStats);
}

TEST(BeanDecoder, PutHugeDeclaredSize) {
  // 4294967295 fits u32: JOB_TOO_BIG, and the decoder starts dropping 2^32+1 bytes.
  BeanDecoder d(kDefaultMax);
  BeanDecoder::Item item = d.Next("put 1 2 3 4294967295\r\nabc");
  EXPECT_EQ(item.kind, Kind::kNeedMore);
  EXPECT_EQ(item.consumed, 25u);
  // One more is BAD_FORMAT (not u32).
  EXPECT_EQ(One("put 1 2 3 4294967296"), kBad);
}

TEST(BeanDecoder, PutExpectedCrlf) {
  EXPECT_EQ(Decode("put 1 2 3 3\r\nabcXYstats\r\n"),
            (std::vector<Rec>{kNoCrlf, Rec{.op = BeanOp::kStats}}));
  EXPECT_EQ(Decode("put 1 2 3 3\r\nabc\n\rstats\r\n"),
            (std::vector<Rec>{kNoCrlf, Rec{.op = BeanOp::kStats}}));
  EXPECT_EQ(Decode("put 1 2 3 3\r\nabc\rXstats\r\n"),
            (std::vector<Rec>{kNoCrlf, Rec{.op = BeanOp::kStats}}));
  // A body shorter than declared swallows the following bytes.
  EXPECT_EQ(Decode("put 1 2 3 8\r\nabc\r\nstats\r\nlist-tubes\r\n"),
            (std::vector<Rec>{kNoCrlf, kUnknown, Rec{.op = BeanOp::kListTubes}}));
}

TEST(BeanDecoder, PutWaitsForWholeBody) {
  BeanDecoder d(kDefaultMax);
  std::string in = "put 1 2 3 5\r\nhello\r";
  for (size_t n = 0; n <= in.size(); ++n) {
    BeanDecoder::Item item = d.Next(std::string_view(in).substr(0, n));
    EXPECT_EQ(item.kind, Kind::kNeedMore) << n;
    EXPECT_EQ(item.consumed, 0u) << n;
  }
  std::string full = in + "\n";
  BeanDecoder::Item item = d.Next(full);
  ASSERT_EQ(item.kind, Kind::kCommand);
  EXPECT_EQ(item.command.body, "hello");
  EXPECT_EQ(item.consumed, full.size());
}

// ---- release, bury, reserve-with-timeout, kick -----------------------------------

TEST(BeanDecoder, Release) {
  EXPECT_EQ(One("release 7 100 30"),
            (Rec{.op = BeanOp::kRelease, .id = 7, .pri = 100, .delay = 30}));
  EXPECT_EQ(
      One("release  18446744073709551615   4294967295  4294967295"),
      (Rec{.op = BeanOp::kRelease, .id = UINT64_MAX, .pri = UINT32_MAX, .delay = UINT32_MAX}));
  for (const char* line :
       {"release 7 100", "release 7 100 30 ", "release 7 100 30x", "release 7 4294967296 0",
        "release 7 1 4294967296", "release 18446744073709551616 1 1", "release -7 1 1",
        "release 7 1 1 1", "release", "release "}) {
    if (std::string_view(line) == "release") {
      ExpectUnknown(line);
    } else {
      ExpectBad(line);
    }
  }
}

TEST(BeanDecoder, Bury) {
  EXPECT_EQ(One("bury 7 100"), (Rec{.op = BeanOp::kBury, .id = 7, .pri = 100}));
  EXPECT_EQ(One("bury 7   0"), (Rec{.op = BeanOp::kBury, .id = 7}));
  for (const char* line : {"bury 7", "bury 7 ", "bury 7 100 ", "bury 7 100 1", "bury 7 4294967296",
                           "bury x 1", "bury "}) {
    ExpectBad(line);
  }
}

TEST(BeanDecoder, ReserveWithTimeoutStrtolQuirk) {
  auto rwt = [](int64_t t) { return Rec{.op = BeanOp::kReserveWithTimeout, .timeout = t}; };
  EXPECT_EQ(One("reserve-with-timeout 10"), rwt(10));
  EXPECT_EQ(One("reserve-with-timeout 0"), rwt(0));
  EXPECT_EQ(One("reserve-with-timeout -5"), rwt(-5));  // negative: wait forever
  EXPECT_EQ(One("reserve-with-timeout +7"), rwt(7));
  EXPECT_EQ(One("reserve-with-timeout    7"), rwt(7));
  EXPECT_EQ(One("reserve-with-timeout \t\v\f\n7"), rwt(7));  // strtol skips isspace()
  EXPECT_EQ(One("reserve-with-timeout 7xyz"), rwt(7));       // no trailing check
  EXPECT_EQ(One("reserve-with-timeout 7 "), rwt(7));
  EXPECT_EQ(One("reserve-with-timeout abc"), rwt(0));  // no digits: 0
  EXPECT_EQ(One("reserve-with-timeout "), rwt(0));
  EXPECT_EQ(One("reserve-with-timeout -"), rwt(0));
  EXPECT_EQ(One("reserve-with-timeout - 5"), rwt(0));
  EXPECT_EQ(One("reserve-with-timeout 0x10"), rwt(0));
  // The long is stored in an int: low 32 bits, two's complement.
  EXPECT_EQ(One("reserve-with-timeout 2147483647"), rwt(2147483647));
  EXPECT_EQ(One("reserve-with-timeout 2147483648"), rwt(INT32_MIN));
  EXPECT_EQ(One("reserve-with-timeout 4294967295"), rwt(-1));
  EXPECT_EQ(One("reserve-with-timeout 4294967296"), rwt(0));
  EXPECT_EQ(One("reserve-with-timeout 4294967306"), rwt(10));
  EXPECT_EQ(One("reserve-with-timeout 9223372036854775807"), rwt(-1));
  EXPECT_EQ(One("reserve-with-timeout -9223372036854775808"), rwt(0));
  EXPECT_EQ(One("reserve-with-timeout -4294967295"), rwt(1));
  // Only overflow of a 64-bit long is BAD_FORMAT.
  ExpectBad("reserve-with-timeout 9223372036854775808");
  ExpectBad("reserve-with-timeout -9223372036854775809");
  ExpectBad("reserve-with-timeout 99999999999999999999999999");
}

TEST(BeanDecoder, KickStrtoulQuirk) {
  auto kick = [](uint64_t n) { return Rec{.op = BeanOp::kKick, .count = n}; };
  EXPECT_EQ(One("kick 5"), kick(5));
  EXPECT_EQ(One("kick 0"), kick(0));
  EXPECT_EQ(One("kick    5"), kick(5));
  EXPECT_EQ(One("kick \t5"), kick(5));
  EXPECT_EQ(One("kick +3"), kick(3));
  EXPECT_EQ(One("kick 5abc"), kick(5));  // trailing garbage allowed
  EXPECT_EQ(One("kick 5 "), kick(5));
  EXPECT_EQ(One("kick -1"), kick(4294967295u));  // wraps, then truncated to 32 bits
  EXPECT_EQ(One("kick -0"), kick(0));
  EXPECT_EQ(One("kick 4294967295"), kick(4294967295u));
  EXPECT_EQ(One("kick 4294967296"), kick(0));
  EXPECT_EQ(One("kick 4294967297"), kick(1));
  EXPECT_EQ(One("kick 18446744073709551615"), kick(4294967295u));
  EXPECT_EQ(One("kick -18446744073709551615"), kick(1));
  for (const char* line : {"kick ", "kick  ", "kick x", "kick -", "kick +", "kick - 1",
                           "kick 18446744073709551616", "kick -18446744073709551616"}) {
    ExpectBad(line);
  }
}

// ---- tube names ----------------------------------------------------------------

TEST(BeanDecoder, TubeCommands) {
  const std::pair<const char*, BeanOp> cmds[] = {{"use ", BeanOp::kUse},
                                                 {"watch ", BeanOp::kWatch},
                                                 {"ignore ", BeanOp::kIgnore},
                                                 {"stats-tube ", BeanOp::kStatsTube}};
  std::string longest(200, 'a');
  for (const auto& [prefix, op] : cmds) {
    std::string p = prefix;
    for (std::string name : {"default"s, "a"s, "Az09-+/;.$_()"s, longest, "a-"s, "0"s, "("s}) {
      EXPECT_EQ(One(p + name), (Rec{.op = op, .name = name})) << p << name;
    }
    for (std::string name :
         {""s, " foo"s, "foo "s, "fo o"s, "-foo"s, "-"s, "foo!"s, "foo,bar"s, "foo\tbar"s,
          "t\xc3\xa9"s, "a"s + std::string(200, 'b'), "foo\n"s, "foo:bar"s, "foo*"s}) {
      ExpectBad(p + name);
    }
  }
}

TEST(BeanDecoder, PauseTube) {
  auto pause = [](std::string n, uint64_t d) {
    return Rec{.op = BeanOp::kPauseTube, .delay = d, .name = n};
  };
  EXPECT_EQ(One("pause-tube foo 10"), pause("foo", 10));
  EXPECT_EQ(One("pause-tubefoo 10"), pause("foo", 10));  // no space needed
  EXPECT_EQ(One("pause-tube    foo    0"), pause("foo", 0));
  EXPECT_EQ(One("pause-tube foo 4294967295"), pause("foo", UINT32_MAX));
  EXPECT_EQ(One("pause-tube " + std::string(200, 'n') + " 1"), pause(std::string(200, 'n'), 1));
  for (std::string line :
       {"pause-tube"s, "pause-tube "s, "pause-tube foo"s, "pause-tube foo "s, "pause-tube foo10"s,
        "pause-tube foo 10 "s, "pause-tube foo 10x"s, "pause-tube foo 4294967296"s,
        "pause-tube foo -1"s, "pause-tube foo\t10"s, "pause-tube fo!o 10"s}) {
    ExpectBad(line);
  }
  // A name that parses but is not a valid tube name: 1.12 counts the command
  // in cmd-pause-tube before refusing it.
  for (std::string line : {"pause-tube -foo 10"s, "pause-tube " + std::string(201, 'n') + " 1"}) {
    EXPECT_EQ(One(line), PutReply(kBadFormatReply, BeanOp::kPauseTube)) << line;
  }
}

// ---- framing -----------------------------------------------------------------

TEST(BeanDecoder, IncompleteLineNeedsMore) {
  BeanDecoder d(kDefaultMax);
  for (std::string_view in : {"", "stat", "stats", "stats\r", "stats\rx", "stats\rx\r\n"}) {
    BeanDecoder::Item item = d.Next(in);
    EXPECT_EQ(item.kind, Kind::kNeedMore) << in;
    EXPECT_EQ(item.consumed, 0u) << in;
  }
  BeanDecoder::Item item = d.Next("stats\r\n");
  EXPECT_EQ(item.kind, Kind::kCommand);
  EXPECT_EQ(item.consumed, 7u);
  // A lone LF does not end a line.
  EXPECT_EQ(Decode("stats\nstats\r\n"), std::vector<Rec>{kBad});
}

TEST(BeanDecoder, LineOf224BytesIsAcceptedAnd225IsNot) {
  std::string name(200, 't');
  std::string line = "pause-tube " + name + " 4294967295";  // 222 + CRLF = 224
  ASSERT_EQ(line.size() + 2, kMaxLineLength);
  EXPECT_EQ(Decode(line + "\r\nstats\r\n"),
            (std::vector<Rec>{Rec{.op = BeanOp::kPauseTube, .delay = UINT32_MAX, .name = name},
                              Rec{.op = BeanOp::kStats}}));
  // 225 with CRLF: its '\r' is byte 224, so the discard also eats "stats".
  std::string longer = "pause-tube " + name + "  4294967295";
  EXPECT_EQ(Decode(longer + "\r\nstats\r\nlist-tubes\r\n"),
            (std::vector<Rec>{kBad, Rec{.op = BeanOp::kListTubes}}));
  // Same for unknown junk: 222 + CRLF is UNKNOWN_COMMAND, 223 + CRLF BAD_FORMAT.
  EXPECT_EQ(Decode(std::string(222, 'j') + "\r\n"), std::vector<Rec>{kUnknown});
  EXPECT_EQ(Decode(std::string(223, 'j') + "\r\n"), std::vector<Rec>{});  // still discarding
  EXPECT_EQ(Decode(std::string(223, 'j') + "\r\nx\r\n"), std::vector<Rec>{kBad});
}

TEST(BeanDecoder, OverLongLineIsDiscardedThroughNextCrlf) {
  std::string in = std::string(1000, 'x') + "\r\nstats\r\n";
  EXPECT_EQ(Decode(in), (std::vector<Rec>{kBad, Rec{.op = BeanOp::kStats}}));
  // While discarding, the dropped bytes are reported as consumed.
  BeanDecoder d(kDefaultMax);
  BeanDecoder::Item item = d.Next(std::string(300, 'x'));
  EXPECT_EQ(item.kind, Kind::kNeedMore);
  EXPECT_EQ(item.consumed, 300u);
  item = d.Next("put 1 2 3 4\r\nstats\r\n");  // still part of the long line
  EXPECT_EQ(item.kind, Kind::kReply);
  EXPECT_EQ(item.reply, kBadFormatReply);
  EXPECT_EQ(item.consumed, 13u);
  item = d.Next("stats\r\n");
  EXPECT_EQ(item.kind, Kind::kCommand);
}

TEST(BeanDecoder, DiscardKeepsATrailingCrForTheNextByte) {
  BeanDecoder d(kDefaultMax);
  BeanDecoder::Item item = d.Next(std::string(300, 'x') + "\r");
  EXPECT_EQ(item.kind, Kind::kNeedMore);
  EXPECT_EQ(item.consumed, 300u);
  item = d.Next("\r");
  EXPECT_EQ(item.kind, Kind::kNeedMore);
  EXPECT_EQ(item.consumed, 0u);
  item = d.Next("\r\nstats\r\n");
  EXPECT_EQ(item.kind, Kind::kReply);
  EXPECT_EQ(item.consumed, 2u);
}

TEST(BeanDecoder, BareCrHidesALaterCrlf) {
  // Short: the line never completes until 224 bytes are buffered.
  Fed run = Feed(kDefaultMax, {"use a\rb\r\nstats\r\n"});
  EXPECT_TRUE(run.items.empty());
  EXPECT_EQ(run.leftover, "use a\rb\r\nstats\r\n");
  // Then it is over-long: the first 224 bytes go, then through the next CRLF.
  std::string in = "use a\rb\r\nstats\r\n" + std::string(250, 'z') + "\r\nlist-tubes\r\n";
  EXPECT_EQ(Decode(in), (std::vector<Rec>{kBad, Rec{.op = BeanOp::kListTubes}}));
  // A CR as the very last byte of the buffer waits for the next one.
  EXPECT_EQ(Feed(kDefaultMax, {"stats\r"}).leftover, "stats\r");
}

TEST(BeanDecoder, CrAsByte224EatsTheNextCommand) {
  // '\r' is byte 224 and '\n' byte 225: the line is over-long and the
  // discard runs through the next command's CRLF.
  std::string in = std::string(223, 'y') + "\r\nstats\r\nlist-tubes\r\n";
  EXPECT_EQ(Decode(in), (std::vector<Rec>{kBad, Rec{.op = BeanOp::kListTubes}}));
  // Byte 223 and 224: a 224-byte line, accepted.
  in = std::string(222, 'y') + "\r\nstats\r\n";
  EXPECT_EQ(Decode(in), (std::vector<Rec>{kUnknown, Rec{.op = BeanOp::kStats}}));
}

TEST(BeanDecoder, DiscardWorksIn224ByteBlocks) {
  std::string first(224, 'x');  // the over-long line's first block
  auto pad = [](std::string s) {
    s.resize(kMaxLineLength, 'q');
    return s;
  };
  // A bare CR in a discard block hides a CRLF later in the same block.
  std::string in = first + pad("a\rb\r\nstats\r\n") + "zz\r\nlist-tubes\r\n";
  EXPECT_EQ(Decode(in), (std::vector<Rec>{kBad, Rec{.op = BeanOp::kListTubes}}));
  // A CRLF split over two blocks is not seen ('\r' is the block's last byte).
  in = first + std::string(223, 'q') + "\r" + "\nstats\r\nlist-tubes\r\n";
  EXPECT_EQ(Decode(in), (std::vector<Rec>{kBad, Rec{.op = BeanOp::kListTubes}}));
  // '\r' as the block's byte 223, '\n' as its byte 224: found.
  in = first + std::string(222, 'q') + "\r\nstats\r\n";
  EXPECT_EQ(Decode(in), (std::vector<Rec>{kBad, Rec{.op = BeanOp::kStats}}));
  // A CRLF in the first (line) block behind a bare CR is hidden too.
  in = pad("x\ry\r\nstats\r\n") + "\r\nlist-tubes\r\n";
  EXPECT_EQ(Decode(in), (std::vector<Rec>{kBad, Rec{.op = BeanOp::kListTubes}}));
  // Several blocks with bare CRs, then a clean block.
  in = first + pad("\rA\r\n") + pad("\r\r\n") + pad("B\rC") + "\r\nstats\r\n";
  EXPECT_EQ(Decode(in), (std::vector<Rec>{kBad, Rec{.op = BeanOp::kStats}}));
}

TEST(BeanDecoder, PipelinedCommandsInOneBuffer) {
  std::string in =
      "use jobs\r\nput 10 0 60 3\r\nabc\r\nput 20 5 60 2\r\nde\r\nwatch jobs\r\nignore default\r\n"
      "reserve\r\ndelete 1\r\nrelease 2 5 0\r\nbury 3 7\r\ntouch 4\r\npeek 5\r\nkick 9\r\n"
      "kick-job 6\r\nstats-job 7\r\nstats-tube jobs\r\nlist-tube-used\r\npause-tube jobs 3\r\n"
      "reserve-with-timeout 2\r\nreserve-job 8\r\nquit\r\n";
  std::vector<Rec> want = {
      Rec{.op = BeanOp::kUse, .name = "jobs"},
      Rec{.op = BeanOp::kPut, .pri = 10, .bytes = 3, .ttr = 60, .body = "abc"},
      Rec{.op = BeanOp::kPut, .pri = 20, .bytes = 2, .delay = 5, .ttr = 60, .body = "de"},
      Rec{.op = BeanOp::kWatch, .name = "jobs"},
      Rec{.op = BeanOp::kIgnore, .name = "default"},
      Rec{.op = BeanOp::kReserve, .timeout = -1},
      Rec{.op = BeanOp::kDelete, .id = 1},
      Rec{.op = BeanOp::kRelease, .id = 2, .pri = 5},
      Rec{.op = BeanOp::kBury, .id = 3, .pri = 7},
      Rec{.op = BeanOp::kTouch, .id = 4},
      Rec{.op = BeanOp::kPeek, .id = 5},
      Rec{.op = BeanOp::kKick, .count = 9},
      Rec{.op = BeanOp::kKickJob, .id = 6},
      Rec{.op = BeanOp::kStatsJob, .id = 7},
      Rec{.op = BeanOp::kStatsTube, .name = "jobs"},
      Rec{.op = BeanOp::kListTubeUsed},
      Rec{.op = BeanOp::kPauseTube, .delay = 3, .name = "jobs"},
      Rec{.op = BeanOp::kReserveWithTimeout, .timeout = 2},
      Rec{.op = BeanOp::kReserveJob, .id = 8},
      Close(),
  };
  EXPECT_EQ(Decode(in), want);
  // The string_views of one item point into the buffer passed to Next().
  BeanDecoder d(kDefaultMax);
  BeanDecoder::Item item = d.Next(in);
  EXPECT_EQ(item.command.name.data(), in.data() + 4);
  item = d.Next(std::string_view(in).substr(item.consumed));
  EXPECT_EQ(item.command.body.data(), in.data() + 10 + 15);
}

// ---- extensions ------------------------------------------------------------------

TEST(BeanDecoder, PutExGood) {
  EXPECT_EQ(Decode("put-ex 1 1500 30000 5\r\nhello\r\n"),
            (std::vector<Rec>{Rec{.op = BeanOp::kPutEx,
                                  .pri = 1,
                                  .bytes = 5,
                                  .delay = 1500,
                                  .ttr = 30000,
                                  .body = "hello"}}));
  Rec all{.op = BeanOp::kPutEx,
          .pri = 4294967295u,
          .bytes = 2,
          .delay = UINT64_MAX,
          .ttr = 7,
          .has_at = true,
          .at = 1700000000000,
          .tries = 5,
          .key = "order-42/a=b",
          .backoff = "4m,10m,1h",
          .body = "hi"};
  EXPECT_EQ(Decode("put-ex 4294967295 18446744073709551615 7 2 key=order-42/a=b at=1700000000000 "
                   "tries=5 backoff=4m,10m,1h\r\nhi\r\n"),
            std::vector<Rec>{all});
  // Any order, several spaces.
  EXPECT_EQ(Decode("put-ex  4294967295 18446744073709551615 7  2  backoff=4m,10m,1h   tries=5 "
                   "at=1700000000000 key=order-42/a=b\r\nhi\r\n"),
            std::vector<Rec>{all});
  // Bounds: key 200 bytes of 0x21..0x7e; backoff 100; at/tries u64; at=0 is given.
  std::string key;
  for (int c = 0x21; key.size() < 200; c = c == 0x7e ? 0x21 : c + 1) key += static_cast<char>(c);
  std::string backoff(100, 'b');
  EXPECT_EQ(One("put-ex 0 0 0 0 key=" + key + "\r\n"), (Rec{.op = BeanOp::kPutEx, .key = key}));
  EXPECT_EQ(One("put-ex 0 0 0 0 backoff=" + backoff + " at=0 tries=18446744073709551615\r\n"),
            (Rec{.op = BeanOp::kPutEx, .has_at = true, .tries = UINT64_MAX, .backoff = backoff}));
}

TEST(BeanDecoder, PutExWithLongestKeyFitsOnlyWithShortNumbers) {
  std::string key(200, 'k');
  std::string line = "put-ex 1 2 3 4 key=" + key;  // 219 + CRLF
  EXPECT_EQ(Decode(line + "\r\nbody\r\n"), (std::vector<Rec>{Rec{.op = BeanOp::kPutEx,
                                                                 .pri = 1,
                                                                 .bytes = 4,
                                                                 .delay = 2,
                                                                 .ttr = 3,
                                                                 .key = key,
                                                                 .body = "body"}}));
  // With an at= it no longer fits in 224 bytes: over-long, BAD_FORMAT, and
  // the body is then read as a line.
  EXPECT_EQ(Decode(line + " at=1\r\nbody\r\n"), (std::vector<Rec>{kBad, kUnknown}));
}

TEST(BeanDecoder, PutExBad) {
  // The numbers are bad: a plain BAD_FORMAT.
  for (std::string line :
       {"put-ex 1 2 3"s, "put-ex 4294967296 2 3 4"s, "put-ex 1 18446744073709551616 3 4"s,
        "put-ex 1 2 18446744073709551616 4"s, "put-ex 1 2 3 4294967296"s, "put-ex -1 2 3 4"s,
        "put-ex  "s, "put-ex "s, "put-ex 1 2 x 4 key=a"s}) {
    ExpectBad(line);
  }
  // The numbers parse, then what follows is bad: BAD_FORMAT that counts as a put.
  const Rec bad = PutReply(kBadFormatReply, BeanOp::kPutEx);
  for (std::string line : {"put-ex 1 2 3 4 "s,
                           "put-ex 1 2 3 4x"s,
                           "put-ex 1 2 3 4 key"s,
                           "put-ex 1 2 3 4 key="s,
                           "put-ex 1 2 3 4 =x"s,
                           "put-ex 1 2 3 4 key=a key=b"s,
                           "put-ex 1 2 3 4 at=1 at=1"s,
                           "put-ex 1 2 3 4 tries=1 tries=2"s,
                           "put-ex 1 2 3 4 backoff=a backoff=a"s,
                           "put-ex 1 2 3 4 color=red"s,
                           "put-ex 1 2 3 4 KEY=a"s,
                           "put-ex 1 2 3 4 key=a "s,
                           "put-ex 1 2 3 4 key=a\tb"s,
                           "put-ex 1 2 3 4 key=\x7f"s,
                           "put-ex 1 2 3 4 key=\xc3\xa9"s,
                           "put-ex 1 2 3 4 key="s + std::string(201, 'k'),
                           "put-ex 1 2 3 4 at="s,
                           "put-ex 1 2 3 4 at=-1"s,
                           "put-ex 1 2 3 4 at=+1"s,
                           "put-ex 1 2 3 4 at=1x"s,
                           "put-ex 1 2 3 4 at=18446744073709551616"s,
                           "put-ex 1 2 3 4 tries=x"s,
                           "put-ex 1 2 3 4 tries="s,
                           "put-ex 1 2 3 4 backoff="s,
                           "put-ex 1 2 3 4 backoff="s + std::string(101, 'b'),
                           "put-ex 1 2 3 4key=a"s}) {
    EXPECT_EQ(One(line), bad) << line;
  }
}

TEST(BeanDecoder, PutExBodyRulesAreThoseOfPut) {
  const Rec too_big = PutReply(kJobTooBigReply, BeanOp::kPutEx);
  EXPECT_EQ(Decode("put-ex 1 2 3 11 key=a\r\n0123456789a\r\nstats\r\n", 10),
            (std::vector<Rec>{too_big, Rec{.op = BeanOp::kStats}}));
  // Size before options, as put checks size before trailing garbage.
  EXPECT_EQ(Decode("put-ex 1 2 3 11 bogus\r\n0123456789a\r\nstats\r\n", 10),
            (std::vector<Rec>{too_big, Rec{.op = BeanOp::kStats}}));
  // Discarded across calls, the JOB_TOO_BIG still names put-ex.
  EXPECT_EQ(Feed(10, {"put-ex 1 2 3 11\r\n0123", "456789a\r", "\nstats\r\n"}).items,
            (std::vector<Rec>{too_big, Rec{.op = BeanOp::kStats}}));
  EXPECT_EQ(
      Decode("put-ex 1 2 3 3 key=a\r\nabcXYstats\r\n"),
      (std::vector<Rec>{PutReply(kExpectedCrlfReply, BeanOp::kPutEx), Rec{.op = BeanOp::kStats}}));
  // A bad option is BAD_FORMAT without skipping the body, like put's garbage.
  EXPECT_EQ(Decode("put-ex 1 2 3 5 bogus=1\r\nhello\r\n"),
            (std::vector<Rec>{PutReply(kBadFormatReply, BeanOp::kPutEx), kUnknown}));
}

TEST(BeanDecoder, DeleteKeyAndPeekKey) {
  const std::pair<const char*, BeanOp> cmds[] = {{"delete-key ", BeanOp::kDeleteKey},
                                                 {"peek-key ", BeanOp::kPeekKey}};
  for (const auto& [prefix, op] : cmds) {
    std::string p = prefix;
    for (std::string key : {"a"s, "order-42"s, "!\"#=~{}"s, std::string(200, 'k')}) {
      EXPECT_EQ(One(p + key), (Rec{.op = op, .key = key})) << p << key;
    }
    for (std::string key :
         {""s, " a"s, "a "s, "a b"s, "a\tb"s, "\x7f"s, "\x80"s, std::string(201, 'k')}) {
      ExpectBad(p + key);
    }
  }
}

TEST(BeanDecoder, Auth) {
  for (std::string secret : {"a"s, "dq_mBQYS5ETL-4nLKNioML4sRGBQwGpSYKz6-R-yQXv7os"s, "!\"#=~{}"s,
                             std::string(200, 's')}) {
    EXPECT_EQ(One("auth " + secret), (Rec{.op = BeanOp::kAuth, .secret = secret})) << secret;
  }
  for (std::string secret :
       {""s, " a"s, "a "s, "a b"s, "a\tb"s, "\x7f"s, "\x80"s, std::string(201, 's')}) {
    ExpectBad("auth " + secret);
  }
  ExpectUnknown("auth");
}

TEST(BeanDecoder, ReserveBatch) {
  auto rb = [](uint64_t n, int64_t t) {
    return Rec{.op = BeanOp::kReserveBatch, .timeout = t, .count = n};
  };
  EXPECT_EQ(One("reserve-batch 1 0"), rb(1, 0));
  EXPECT_EQ(One("reserve-batch 1000 4294967295"), rb(1000, 4294967295));
  EXPECT_EQ(One("reserve-batch   10   5"), rb(10, 5));
  for (const char* line :
       {"reserve-batch 0 5", "reserve-batch 1001 5", "reserve-batch 18446744073709551616 5",
        "reserve-batch 5", "reserve-batch 5 ", "reserve-batch 5 5 ", "reserve-batch 5 5 5",
        "reserve-batch 5 -1", "reserve-batch 5 4294967296", "reserve-batch -5 5", "reserve-batch ",
        "reserve-batch x 5", "reserve-batch 5 5x"}) {
    ExpectBad(line);
  }
  // Without its space it is beanstalkd's "reserve" with trailing bytes.
  ExpectBad("reserve-batch");
}

TEST(BeanDecoder, ClearTube) {
  auto ct = [](std::string n, uint8_t m) {
    return Rec{.op = BeanOp::kClearTube, .clear_mask = m, .name = n};
  };
  EXPECT_EQ(One("clear-tube foo all"), ct("foo", 7));
  EXPECT_EQ(One("clear-tube foo ready"), ct("foo", 1));
  EXPECT_EQ(One("clear-tube foo delayed"), ct("foo", 2));
  EXPECT_EQ(One("clear-tube foo buried"), ct("foo", 4));
  EXPECT_EQ(One("clear-tube foo buried,ready"), ct("foo", 5));
  EXPECT_EQ(One("clear-tube foo ready,delayed,buried"), ct("foo", 7));
  EXPECT_EQ(One("clear-tube   foo   all"), ct("foo", 7));
  EXPECT_EQ(One("clear-tube " + std::string(200, 't') + " all"), ct(std::string(200, 't'), 7));
  for (std::string line :
       {"clear-tube foo"s, "clear-tube foo "s, "clear-tube foo all "s, "clear-tube foo none"s,
        "clear-tube foo ready,"s, "clear-tube foo ,ready"s, "clear-tube foo ready,,buried"s,
        "clear-tube foo all,ready"s, "clear-tube foo ready,ready"s, "clear-tube foo ALL"s,
        "clear-tube -foo all"s, "clear-tube fo!o all"s, "clear-tube foo all ready"s,
        "clear-tube foo\tall"s, "clear-tube "s, "clear-tube " + std::string(201, 't') + " all"}) {
    ExpectBad(line);
  }
}

TEST(BeanDecoder, ParseBeanLineReportsTooBigWithSize) {
  BeanCommand cmd;
  std::string_view reply;
  EXPECT_FALSE(ParseBeanLine("put 1 2 3 11 junk", 10, &cmd, &reply));
  EXPECT_EQ(reply, kJobTooBigReply);
  EXPECT_EQ(cmd.op, BeanOp::kPut);
  EXPECT_EQ(cmd.bytes, 11u);
  EXPECT_FALSE(ParseBeanLine("put 1 2 3 10 junk", 10, &cmd, &reply));
  EXPECT_EQ(reply, kBadFormatReply);
  EXPECT_TRUE(ParseBeanLine("put 1 2 3 10", 10, &cmd, &reply));
  EXPECT_EQ(cmd.bytes, 10u);
  EXPECT_TRUE(cmd.body.empty());
  EXPECT_TRUE(ParseBeanLine("quit", 10, &cmd, &reply));
  EXPECT_EQ(cmd.op, BeanOp::kQuit);
  EXPECT_FALSE(ParseBeanLine("", 10, &cmd, &reply));
  EXPECT_EQ(reply, kUnknownCommandReply);
  // Replies are constants, never views of the input.
  std::string line = "bogus";
  EXPECT_FALSE(ParseBeanLine(line, 10, &cmd, &reply));
  EXPECT_EQ(reply, kUnknownCommandReply);
  EXPECT_TRUE(reply.data() < line.data() || reply.data() >= line.data() + line.size());
}

// ---- split anywhere ---------------------------------------------------------------

std::string MixedInputA() {
  std::string too_big_body;
  for (int i = 0; i < 25; ++i) too_big_body += "ab\r\n";  // 100 bytes
  return "use tube-a\r\n"
         "put 1 0 60 11\r\nhello\r\nworl\r\n"
         "put 2 5 60 0\r\n\r\n"
         "put-ex 3 1500 30000 6 key=order-42 tries=5 backoff=4m,10m,1h at=1700000000000\r\n"
         "ab\r\ncd\r\n"
         "reserve-with-timeout 5\r\n"
         "stats\r\n" +
         std::string(300, 'x') + "\r\n" +                // over-long
         "put 1 0 60 100\r\n" + too_big_body + "\r\n" +  // JOB_TOO_BIG (limit 64)
         "put 1 0 60 3\r\nabcXY" +                       // EXPECTED_CRLF
         "peek-ready\r\n"
         "put 1 2 3 4 x\r\nbody\r\n" +  // BAD_FORMAT, then "body" is a line
         "use a\rb\r\n" +
         std::string(250, 'z') + "\r\n" +                         // bare CR
         std::string(223, 'y') + "\r\nstats\r\nlist-tubes\r\n" +  // CR at 224
         "delete\0 5\r\n"s +                                      // NUL
         "reserve-batch 10 5\r\n"
         "clear-tube foo ready,buried\r\n"
         "kick -1\r\n"
         "\r\n"
         "put 9 9 9 64\r\n" +
         std::string(30, 'p') + "\r\n" + std::string(32, 'q') + "\r\n" +  // at the limit
         "quit\r\nstats\r\n";
}

std::vector<Rec> MixedInputAWant() {
  std::string at_limit = std::string(30, 'p') + "\r\n" + std::string(32, 'q');
  return {
      Rec{.op = BeanOp::kUse, .name = "tube-a"},
      Rec{.op = BeanOp::kPut, .pri = 1, .bytes = 11, .ttr = 60, .body = "hello\r\nworl"},
      Rec{.op = BeanOp::kPut, .pri = 2, .delay = 5, .ttr = 60},
      Rec{.op = BeanOp::kPutEx,
          .pri = 3,
          .bytes = 6,
          .delay = 1500,
          .ttr = 30000,
          .has_at = true,
          .at = 1700000000000,
          .tries = 5,
          .key = "order-42",
          .backoff = "4m,10m,1h",
          .body = "ab\r\ncd"},
      Rec{.op = BeanOp::kReserveWithTimeout, .timeout = 5},
      Rec{.op = BeanOp::kStats},
      kBad,
      kTooBig,
      kNoCrlf,
      Rec{.op = BeanOp::kPeekReady},
      kPutBad,
      kUnknown,
      kBad,
      kBad,
      Rec{.op = BeanOp::kListTubes},
      kBad,
      Rec{.op = BeanOp::kReserveBatch, .timeout = 5, .count = 10},
      Rec{.op = BeanOp::kClearTube, .clear_mask = 5, .name = "foo"},
      Rec{.op = BeanOp::kKick, .count = 4294967295u},
      kUnknown,
      Rec{.op = BeanOp::kPut, .pri = 9, .bytes = 64, .delay = 9, .ttr = 9, .body = at_limit},
      Close(),
  };
}

std::string MixedInputB() {
  // Discard blocks with bare CRs, a CRLF across a block boundary, a huge
  // JOB_TOO_BIG, an EXPECTED_CRLF whose last byte starts the next command.
  std::string s = std::string(224, 'x') + "a\rb\r\nstats\r\n";
  s.resize(448, 'q');
  s += std::string(223, 'w') + "\r" + "\nstats\r\n" + "list-tubes-watched\r\n";
  s += "put 5 5 5 2000\r\n";
  for (int i = 0; i < 400; ++i) s += "ab\r\n\r";  // 2000 bytes
  s += "\r\n";
  s += "put 1 1 1 2\r\nab\rstats\r\n";  // EXPECTED_CRLF ("\rs"), then "tats"
  s += "watch b\r\nput 0 0 1 1\r\n\r\r\n";
  s += "\r\rstats\r\n" + std::string(230, ' ') + "\r\npeek 1\r\n";
  return s;
}

std::vector<Rec> MixedInputBWant() {
  return {kBad,
          Rec{.op = BeanOp::kListTubesWatched},
          kTooBig,
          kNoCrlf,
          kUnknown,
          Rec{.op = BeanOp::kWatch, .name = "b"},
          Rec{.op = BeanOp::kPut, .bytes = 1, .ttr = 1, .body = "\r"},
          kBad,  // "\r\rstats\r\n" + 230 spaces: hidden CRLF, over-long
          Rec{.op = BeanOp::kPeek, .id = 1}};
}

// Random inputs built from protocol fragments and noise.
std::string RandomInput(uint32_t seed) {
  std::mt19937 rng(seed);
  const std::vector<std::string> frags = {"put 1 2 3 5\r\nhello\r\n",
                                          "put 1 2 3 4\r\na\r\nb\r\n",
                                          "put 0 0 0 70\r\n",
                                          "put 1 1 1 3\r\nab",
                                          "put-ex 1 2 3 2 key=k at=5\r\nhi\r\n",
                                          "reserve\r\n",
                                          "reserve-with-timeout -1\r\n",
                                          "stats\r\n",
                                          "use x\r\n",
                                          "\r\n",
                                          "\r",
                                          "\n",
                                          " ",
                                          "\0"s,
                                          "kick 3x\r\n",
                                          "peek 7\r\n",
                                          "clear-tube t all\r\n",
                                          "reserve-batch 3 1\r\n",
                                          "delete-key k\r\n",
                                          "pause-tubet 1\r\n",
                                          "bogus\r\n",
                                          std::string(100, 'L'),
                                          std::string(230, 'M') + "\r\n",
                                          "x\ry"};
  std::string s;
  int n = 20 + static_cast<int>(rng() % 60);
  for (int i = 0; i < n; ++i) {
    if (rng() % 8 == 0) {
      s += static_cast<char>(rng() % 256);
    } else {
      s += frags[rng() % frags.size()];
    }
  }
  return s;
}

void ExpectSplitInvariant(const std::string& input, size_t max_job_size) {
  Fed whole = Feed(max_job_size, {input});
  for (size_t cut = 0; cut <= input.size(); ++cut) {
    std::string_view in(input);
    Fed split = Feed(max_job_size, {in.substr(0, cut), in.substr(cut)});
    ASSERT_EQ(split.items, whole.items) << "cut at " << cut;
    ASSERT_EQ(split.leftover, whole.leftover) << "cut at " << cut;
  }
  std::vector<std::string_view> bytes;
  for (size_t i = 0; i < input.size(); ++i) bytes.push_back(std::string_view(input).substr(i, 1));
  Fed by_byte = Feed(max_job_size, bytes);
  ASSERT_EQ(by_byte.items, whole.items) << "byte by byte";
  ASSERT_EQ(by_byte.leftover, whole.leftover) << "byte by byte";
}

TEST(BeanDecoderSplit, MixedInputAExpectedItems) {
  EXPECT_EQ(Decode(MixedInputA(), 64), MixedInputAWant());
}

TEST(BeanDecoderSplit, MixedInputBExpectedItems) {
  EXPECT_EQ(Decode(MixedInputB(), 64), MixedInputBWant());
}

TEST(BeanDecoderSplit, MixedInputAAtEveryByte) { ExpectSplitInvariant(MixedInputA(), 64); }

TEST(BeanDecoderSplit, MixedInputBAtEveryByte) { ExpectSplitInvariant(MixedInputB(), 64); }

TEST(BeanDecoderSplit, RandomInputsAtEveryByte) {
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    SCOPED_TRACE(seed);
    ExpectSplitInvariant(RandomInput(seed), seed % 2 == 0 ? 64 : 4);
  }
}

TEST(BeanDecoderSplit, RandomInputsInRandomChunks) {
  std::mt19937 rng(static_cast<uint32_t>(delayq::testing::TestSeed(99)));
  for (uint32_t seed = 100; seed < 300; ++seed) {
    std::string input = RandomInput(seed);
    size_t max = seed % 3 == 0 ? 0 : 64;
    Fed whole = Feed(max, {input});
    std::vector<std::string_view> chunks;
    for (size_t pos = 0; pos < input.size();) {
      size_t len = std::min<size_t>(input.size() - pos, 1 + rng() % 300);
      chunks.push_back(std::string_view(input).substr(pos, len));
      pos += len;
    }
    Fed split = Feed(max, chunks);
    ASSERT_EQ(split.items, whole.items) << "seed " << seed;
    ASSERT_EQ(split.leftover, whole.leftover) << "seed " << seed;
  }
}

// ---- against a literal model of beanstalkd 1.12's input handling ------------------

std::vector<Rec> ModelItems(const std::string& input, size_t max_job_size, uint32_t read_seed) {
  std::mt19937 rng(read_seed);
  std::vector<Rec> items;
  reference::Beanstalkd112InputModel model(max_job_size);
  model.Run(
      input,
      [&](size_t want) -> size_t {
        switch (read_seed % 4) {
          case 0:
            return want;  // whatever fits
          case 1:
            return 1;
          default:
            return 1 + rng() % (rng() % 2 == 0 ? 8 : want);
        }
      },
      [&](const BeanDecoder::Item& item) { items.push_back(FromItem(item)); });
  return items;
}

void ExpectMatchesModel(const std::string& input, size_t max_job_size) {
  std::vector<Rec> want = Feed(max_job_size, {input}).items;
  for (uint32_t read_seed = 0; read_seed < 12; ++read_seed) {
    ASSERT_EQ(ModelItems(input, max_job_size, read_seed), want) << "read seed " << read_seed;
  }
}

TEST(BeanDecoderReference, MixedInputs) {
  ExpectMatchesModel(MixedInputA(), 64);
  ExpectMatchesModel(MixedInputB(), 64);
  ExpectMatchesModel(MixedInputA(), 0);
  ExpectMatchesModel(MixedInputB(), kDefaultMax);
}

TEST(BeanDecoderReference, RandomInputs) {
  for (uint32_t seed = 1000; seed < 1400; ++seed) {
    SCOPED_TRACE(seed);
    ExpectMatchesModel(RandomInput(seed), seed % 3 == 0 ? 4 : 64);
  }
}

TEST(BeanDecoderReference, RandomBytesNearTheLineLimit) {
  // Inputs dense in '\r', '\n' and long runs, so lines, blocks and bodies
  // end at every offset relative to the 224-byte buffer.
  std::mt19937 rng(5);
  const char alphabet[] = {'\r', '\n', 'a', ' ', '1', 'p'};
  for (int round = 0; round < 300; ++round) {
    std::string input;
    size_t n = 200 + rng() % 1500;
    while (input.size() < n) {
      switch (rng() % 6) {
        case 0:
          input += "put 1 2 3 " + std::to_string(rng() % 80) + "\r\n";
          break;
        case 1:
          input += std::string(rng() % 240, 'z');
          break;
        case 2:
          input += "stats\r\n";
          break;
        default:
          input += alphabet[rng() % sizeof alphabet];
          break;
      }
    }
    SCOPED_TRACE(round);
    ExpectMatchesModel(input, 40);
  }
}

}  // namespace
}  // namespace delayq::server
