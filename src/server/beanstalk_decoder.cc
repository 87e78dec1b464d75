// beanstalkd 1.12 framing and command parsing; see beanstalk_decoder.h and
// docs/protocol.md. The 1.12 sources this mirrors are named beside
// each rule: prot.c scan_line_end, which_cmd, read_u64/read_u32,
// read_tube_name, is_valid_tube, dispatch_cmd, conn_process_io.
//
// Invariants:
//  - mode_ == kDiscardBody implies discard_left_ > 0 (a finished discard
//    reports JOB_TOO_BIG in the same call);
//  - mode_ == kDiscardLine implies 0 < discard_left_ <= kMaxLineLength.
#include "server/beanstalk_decoder.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>

#include "delayq/operations.h"
#include "delayq/types.h"

namespace delayq::server {
namespace {

// ---- character classes ------------------------------------------------------

constexpr std::array<bool, 256> MakeNameChars() {
  std::array<bool, 256> t{};
  for (int c = 'A'; c <= 'Z'; ++c) t[c] = true;
  for (int c = 'a'; c <= 'z'; ++c) t[c] = true;
  for (int c = '0'; c <= '9'; ++c) t[c] = true;
  for (char c : std::string_view("-+/;.$_()")) t[static_cast<unsigned char>(c)] = true;
  return t;
}
constexpr std::array<bool, 256> kNameChars = MakeNameChars();

bool IsNameChar(char c) { return kNameChars[static_cast<unsigned char>(c)]; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
// Printable ASCII without space: the alphabet of keys and back-off specs.
bool IsGraph(char c) { return c >= 0x21 && c <= 0x7e; }
// C isspace() in the "C" locale, as strtol/strtoul skip it.
bool IsCSpace(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

// prot.c is_valid_tube: 1..200 name characters, not starting with '-'.
bool ValidTube(std::string_view s) {
  if (s.empty() || s.size() > kMaxTopicNameLength || s[0] == '-') return false;
  for (char c : s)
    if (!IsNameChar(c)) return false;
  return true;
}

bool AllGraph(std::string_view s, size_t max_len) {
  if (s.empty() || s.size() > max_len) return false;
  for (char c : s)
    if (!IsGraph(c)) return false;
  return true;
}

bool ValidKey(std::string_view s) { return AllGraph(s, kMaxKeyLength); }

constexpr size_t kMaxBackoffLength = 100;
constexpr uint64_t kMaxBatch = 1000;

// v * 10 + d, or false when that would exceed `max` (strtoumax's cutoff test).
inline bool AppendDigit(uint64_t max, uint64_t d, uint64_t* v) {
  if (*v > max / 10 || (*v == max / 10 && d > max % 10)) return false;
  *v = *v * 10 + d;
  return true;
}

// All of `s` is decimal digits with a value <= UINT64_MAX.
bool ParseDigits(std::string_view s, uint64_t* out) {
  if (s.empty()) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (!IsDigit(c)) return false;
    if (!AppendDigit(std::numeric_limits<uint64_t>::max(), static_cast<uint64_t>(c - '0'), &v))
      return false;
  }
  *out = v;
  return true;
}

// ---- a cursor over the arguments of one line --------------------------------

class Args {
 public:
  explicit Args(std::string_view rest) : p_(rest.data()), end_(rest.data() + rest.size()) {}

  bool AtEnd() const { return p_ == end_; }
  char Peek() const { return *p_; }
  std::string_view Rest() const { return {p_, static_cast<size_t>(end_ - p_)}; }

  // Skips spaces (only ' '); returns how many.
  size_t SkipSpaces() {
    const char* start = p_;
    while (p_ != end_ && *p_ == ' ') ++p_;
    return static_cast<size_t>(p_ - start);
  }

  // prot.c read_u64/read_u32: spaces, then a digit is required, then every
  // digit; fails when the value exceeds `max`. Whatever follows is left for
  // the caller (Last() checks that nothing does).
  bool Uint(uint64_t max, uint64_t* out) {
    SkipSpaces();
    if (p_ == end_ || !IsDigit(*p_)) return false;
    uint64_t v = 0;
    for (; p_ != end_ && IsDigit(*p_); ++p_) {
      if (!AppendDigit(max, static_cast<uint64_t>(*p_ - '0'), &v)) return false;
    }
    *out = v;
    return true;
  }
  bool U32(uint32_t* out) {
    uint64_t v;
    if (!Uint(std::numeric_limits<uint32_t>::max(), &v)) return false;
    *out = static_cast<uint32_t>(v);
    return true;
  }
  bool U64(uint64_t* out) { return Uint(std::numeric_limits<uint64_t>::max(), out); }

  // The run of characters up to the next space or the end.
  std::string_view Token() {
    const char* start = p_;
    while (p_ != end_ && *p_ != ' ') ++p_;
    return {start, static_cast<size_t>(p_ - start)};
  }

  // prot.c read_tube_name: spaces, then the (non-empty) run of name characters.
  std::string_view NameRun() {
    SkipSpaces();
    const char* start = p_;
    while (p_ != end_ && IsNameChar(*p_)) ++p_;
    return {start, static_cast<size_t>(p_ - start)};
  }

 private:
  const char* p_;
  const char* end_;
};

// What strtol()/strtoul() read (C locale, base 10): leading isspace(), an
// optional sign, then digits.
struct CNumber {
  bool negative = false;
  bool any_digits = false;  // false: no conversion (the end pointer is the start)
  bool overflow = false;    // the magnitude exceeds the type's range (errno ERANGE)
  uint64_t magnitude = 0;
};

CNumber ScanCNumber(std::string_view s, uint64_t max_positive, uint64_t max_negative) {
  CNumber n;
  size_t i = 0;
  while (i < s.size() && IsCSpace(s[i])) ++i;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
    n.negative = s[i] == '-';
    ++i;
  }
  uint64_t max = n.negative ? max_negative : max_positive;
  for (; i < s.size() && IsDigit(s[i]); ++i) {
    n.any_digits = true;
    if (!n.overflow && !AppendDigit(max, static_cast<uint64_t>(s[i] - '0'), &n.magnitude))
      n.overflow = true;
  }
  return n;
}

// 1.12 reserve-with-timeout: strtol(); BAD_FORMAT only on overflow of long
// (64-bit); no digits means 0; trailing garbage is ignored; the long is then
// stored in an int (its low 32 bits, two's complement).
bool ParseStrtolTimeout(std::string_view s, int64_t* timeout) {
  constexpr uint64_t kLongMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  CNumber n = ScanCNumber(s, kLongMax, kLongMax + 1);
  if (n.overflow) return false;
  uint64_t bits = n.negative ? 0 - n.magnitude : n.magnitude;
  *timeout = static_cast<int32_t>(static_cast<uint32_t>(bits));
  return true;
}

// 1.12 kick: strtoul(); BAD_FORMAT when no digits or on overflow of unsigned
// long (64-bit); a sign is allowed and "-1" wraps; trailing garbage is
// ignored; the result is stored in a 32-bit uint.
bool ParseStrtoulCount(std::string_view s, uint64_t* count) {
  constexpr uint64_t kULongMax = std::numeric_limits<uint64_t>::max();
  CNumber n = ScanCNumber(s, kULongMax, kULongMax);
  if (!n.any_digits || n.overflow) return false;
  uint64_t v = n.negative ? 0 - n.magnitude : n.magnitude;
  *count = static_cast<uint32_t>(v);
  return true;
}

// clear-tube states: "all", or a comma list of distinct ready/delayed/buried.
bool ParseStates(std::string_view s, uint8_t* mask) {
  if (s == "all") {
    *mask = 7;
    return true;
  }
  uint8_t m = 0;
  while (true) {
    size_t comma = s.find(',');
    std::string_view part = s.substr(0, comma);
    uint8_t bit;
    if (part == "ready") {
      bit = 1;
    } else if (part == "delayed") {
      bit = 2;
    } else if (part == "buried") {
      bit = 4;
    } else {
      return false;
    }
    if ((m & bit) != 0) return false;
    m |= bit;
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  *mask = m;
  return true;
}

// ---- the command table --------------------------------------------------------

enum class Grammar : uint8_t {
  kNone,            // no argument: the line is exactly the command name
  kId,              // <id> (strict u64, last)
  kPut,             // <pri> <delay> <ttr> <bytes>
  kPutEx,           // <pri> <delay-ms> <ttr-ms> <bytes> [options]
  kRelease,         // <id> <pri> <delay>
  kBury,            // <id> <pri>
  kReserveTimeout,  // strtol quirk
  kKick,            // strtoul quirk
  kTube,            // the rest is exactly one valid tube name
  kPauseTube,       // read_tube_name, then <delay>
  kQuit,            // anything may follow
  kKey,             // the rest is exactly one valid key
  kReserveBatch,    // <count> <timeout>
  kClearTube,       // <tube> <states>
  kSecret,          // the rest is exactly one secret (as a key: 1..200 graphic bytes)
};

// The beanstalkd front-end's mapping: each command, its grammar, and the
// row of the operation table (delayq/operations.h) it asks for.
struct CommandSpec {
  std::string_view prefix;
  BeanOp op;
  Grammar grammar;
  Op operation;
};

// Tried in order; the first prefix that matches wins (prot.c which_cmd).
constexpr CommandSpec kCommands[] = {
    // delayq extensions first: "reserve-batch " would otherwise be "reserve".
    {"put-ex ", BeanOp::kPutEx, Grammar::kPutEx, Op::kPut},
    {"delete-key ", BeanOp::kDeleteKey, Grammar::kKey, Op::kDeleteKey},
    {"peek-key ", BeanOp::kPeekKey, Grammar::kKey, Op::kPeekKey},
    {"reserve-batch ", BeanOp::kReserveBatch, Grammar::kReserveBatch, Op::kReserveBatch},
    {"clear-tube ", BeanOp::kClearTube, Grammar::kClearTube, Op::kClearTopic},
    {"auth ", BeanOp::kAuth, Grammar::kSecret, Op::kAuth},
    // beanstalkd 1.12, in which_cmd's order.
    {"put ", BeanOp::kPut, Grammar::kPut, Op::kPut},
    {"peek ", BeanOp::kPeek, Grammar::kId, Op::kPeek},
    {"peek-ready", BeanOp::kPeekReady, Grammar::kNone, Op::kPeekReady},
    {"peek-delayed", BeanOp::kPeekDelayed, Grammar::kNone, Op::kPeekDelayed},
    {"peek-buried", BeanOp::kPeekBuried, Grammar::kNone, Op::kPeekBuried},
    {"reserve-with-timeout ", BeanOp::kReserveWithTimeout, Grammar::kReserveTimeout,
     Op::kReserveWithTimeout},
    {"reserve-job ", BeanOp::kReserveJob, Grammar::kId, Op::kReserveJob},
    {"reserve", BeanOp::kReserve, Grammar::kNone, Op::kReserve},
    {"delete ", BeanOp::kDelete, Grammar::kId, Op::kDelete},
    {"release ", BeanOp::kRelease, Grammar::kRelease, Op::kRelease},
    {"bury ", BeanOp::kBury, Grammar::kBury, Op::kBury},
    {"kick ", BeanOp::kKick, Grammar::kKick, Op::kKick},
    {"kick-job ", BeanOp::kKickJob, Grammar::kId, Op::kKickJob},
    {"touch ", BeanOp::kTouch, Grammar::kId, Op::kTouch},
    {"stats-job ", BeanOp::kStatsJob, Grammar::kId, Op::kStatsJob},
    {"stats-tube ", BeanOp::kStatsTube, Grammar::kTube, Op::kStatsTopic},
    {"stats", BeanOp::kStats, Grammar::kNone, Op::kStats},
    {"use ", BeanOp::kUse, Grammar::kTube, Op::kUse},
    {"watch ", BeanOp::kWatch, Grammar::kTube, Op::kWatch},
    {"ignore ", BeanOp::kIgnore, Grammar::kTube, Op::kIgnore},
    {"list-tubes-watched", BeanOp::kListTubesWatched, Grammar::kNone, Op::kListTopicsWatched},
    {"list-tube-used", BeanOp::kListTubeUsed, Grammar::kNone, Op::kListTopicUsed},
    {"list-tubes", BeanOp::kListTubes, Grammar::kNone, Op::kListTopics},
    {"quit", BeanOp::kQuit, Grammar::kQuit, Op::kQuit},
    {"pause-tube", BeanOp::kPauseTube, Grammar::kPauseTube, Op::kPauseTopic},
};

constexpr size_t kNumCommands = sizeof kCommands / sizeof kCommands[0];

// kCommands' row for each BeanOp (an index; kNumCommands for none).
constexpr std::array<size_t, kNumBeanOps> MakeRowOfOp() {
  std::array<size_t, kNumBeanOps> row{};
  row.fill(kNumCommands);
  for (size_t i = 0; i < kNumCommands; ++i) row[static_cast<size_t>(kCommands[i].op)] = i;
  for (size_t r : row)
    if (r == kNumCommands) throw "a BeanOp without a command";  // fails the constant evaluation
  return row;
}
constexpr std::array<size_t, kNumBeanOps> kRowOfOp = MakeRowOfOp();
// Only prefixes that share a first byte can both match, so trying, in table
// order, just the entries that start with the line's first byte is the same
// as trying them all. Per first byte: indices into kCommands, then kNoCommand.
constexpr uint8_t kNoCommand = 0xff;
constexpr size_t kMaxPerFirstByte = 8;
using FirstByteIndex = std::array<std::array<uint8_t, kMaxPerFirstByte + 1>, 256>;

constexpr FirstByteIndex MakeFirstByteIndex() {
  FirstByteIndex index{};
  for (auto& row : index) row.fill(kNoCommand);
  for (size_t i = 0; i < kNumCommands; ++i) {
    auto& row = index[static_cast<unsigned char>(kCommands[i].prefix[0])];
    size_t n = 0;
    while (row[n] != kNoCommand) ++n;
    if (n == kMaxPerFirstByte) throw "raise kMaxPerFirstByte";  // fails the constant evaluation
    row[n] = static_cast<uint8_t>(i);
  }
  return index;
}
constexpr FirstByteIndex kFirstByteIndex = MakeFirstByteIndex();

const CommandSpec* FindCommand(std::string_view line) {
  if (line.empty()) return nullptr;
  for (uint8_t i : kFirstByteIndex[static_cast<unsigned char>(line[0])]) {
    if (i == kNoCommand) break;
    const CommandSpec& spec = kCommands[i];
    if (line.size() >= spec.prefix.size() &&
        std::memcmp(line.data(), spec.prefix.data(), spec.prefix.size()) == 0) {
      return &spec;
    }
  }
  return nullptr;
}

// put-ex options after <bytes>: (' '+ name=value)*, each name at most once.
bool ParsePutExOptions(Args& a, BeanCommand* cmd) {
  bool seen_key = false, seen_at = false, seen_tries = false, seen_backoff = false;
  while (!a.AtEnd()) {
    if (a.Peek() != ' ') return false;  // garbage right after a value
    a.SkipSpaces();
    if (a.AtEnd()) return false;  // trailing spaces
    std::string_view token = a.Token();
    size_t eq = token.find('=');
    if (eq == std::string_view::npos) return false;
    std::string_view name = token.substr(0, eq);
    std::string_view value = token.substr(eq + 1);
    if (name == "key") {
      if (seen_key || !ValidKey(value)) return false;
      seen_key = true;
      cmd->key = value;
    } else if (name == "at") {
      if (seen_at || !ParseDigits(value, &cmd->at)) return false;
      seen_at = true;
      cmd->has_at = true;
    } else if (name == "tries") {
      if (seen_tries || !ParseDigits(value, &cmd->tries)) return false;
      seen_tries = true;
    } else if (name == "backoff") {
      if (seen_backoff || !AllGraph(value, kMaxBackoffLength)) return false;
      seen_backoff = true;
      cmd->backoff = value;
    } else {
      return false;
    }
  }
  return true;
}

// ParseBeanLine() for a default-initialised *cmd; sets *counted once a
// put or put-ex line's four numbers parse (1.12 counts cmd-put from there).
bool ParseLine(std::string_view line, size_t max_job_size, BeanCommand* cmd,
               std::string_view* reply, bool* counted) {
  *reply = kBadFormatReply;
  // dispatch_cmd: an embedded NUL makes strlen() differ from the length.
  if (std::memchr(line.data(), '\0', line.size()) != nullptr) return false;

  const CommandSpec* spec = FindCommand(line);
  if (spec == nullptr) {
    *reply = kUnknownCommandReply;
    return false;
  }
  cmd->op = spec->op;
  Args a(line.substr(spec->prefix.size()));

  switch (spec->grammar) {
    case Grammar::kNone:
      if (!a.AtEnd()) return false;
      if (spec->op == BeanOp::kReserve) cmd->timeout = -1;
      return true;

    case Grammar::kId:
      return a.U64(&cmd->id) && a.AtEnd();

    case Grammar::kPut:
    case Grammar::kPutEx: {
      bool ex = spec->grammar == Grammar::kPutEx;
      uint32_t delay32 = 0, ttr32 = 0;
      bool ok = a.U32(&cmd->pri) && (ex ? a.U64(&cmd->delay) : a.U32(&delay32)) &&
                (ex ? a.U64(&cmd->ttr) : a.U32(&ttr32)) && a.U32(&cmd->bytes);
      if (!ok) return false;
      if (!ex) {
        cmd->delay = delay32;
        cmd->ttr = ttr32;
      }
      *counted = true;
      // 1.12 checks the size before the trailing garbage.
      if (cmd->bytes > max_job_size) {
        *reply = kJobTooBigReply;
        return false;
      }
      return ex ? ParsePutExOptions(a, cmd) : a.AtEnd();
    }

    case Grammar::kRelease: {
      uint32_t delay;
      if (!a.U64(&cmd->id) || !a.U32(&cmd->pri) || !a.U32(&delay) || !a.AtEnd()) return false;
      cmd->delay = delay;
      return true;
    }

    case Grammar::kBury:
      return a.U64(&cmd->id) && a.U32(&cmd->pri) && a.AtEnd();

    case Grammar::kReserveTimeout:
      return ParseStrtolTimeout(a.Rest(), &cmd->timeout);

    case Grammar::kKick:
      return ParseStrtoulCount(a.Rest(), &cmd->count);

    case Grammar::kTube:
      cmd->name = a.Rest();
      return ValidTube(cmd->name);

    case Grammar::kPauseTube: {
      cmd->name = a.NameRun();
      uint32_t delay;
      if (cmd->name.empty() || !a.U32(&delay) || !a.AtEnd()) return false;
      cmd->delay = delay;
      // 1.12 counts cmd-pause-tube before it checks the name.
      if (!ValidTube(cmd->name)) {
        *counted = true;
        return false;
      }
      return true;
    }

    case Grammar::kQuit:
      return true;

    case Grammar::kKey:
      cmd->key = a.Rest();
      return ValidKey(cmd->key);

    case Grammar::kSecret:
      cmd->secret = a.Rest();
      return ValidKey(cmd->secret);

    case Grammar::kReserveBatch: {
      uint32_t timeout;
      if (!a.U64(&cmd->count) || cmd->count == 0 || cmd->count > kMaxBatch || !a.U32(&timeout) ||
          !a.AtEnd()) {
        return false;
      }
      cmd->timeout = timeout;
      return true;
    }

    case Grammar::kClearTube: {
      a.SkipSpaces();
      cmd->name = a.Token();
      if (!ValidTube(cmd->name) || a.SkipSpaces() == 0) return false;
      std::string_view states = a.Token();
      return a.AtEnd() && ParseStates(states, &cmd->clear_mask);
    }
  }
  return false;
}

}  // namespace

bool ParseBeanLine(std::string_view line, size_t max_job_size, BeanCommand* cmd,
                   std::string_view* reply) {
  *cmd = BeanCommand{};
  bool counted = false;
  return ParseLine(line, max_job_size, cmd, reply, &counted);
}

// Discards an over-long line from in[*pos..], in 224-byte blocks counted from
// the line's start, as conn_process_io's STATE_WANT_ENDLINE does: a block ends
// the line only if its first '\r' lies in its first 223 bytes and is followed
// by '\n'. Returns true with *pos just past that "\r\n"; false when the input
// ran out (a '\r' that is the last available byte is left unconsumed, since
// the next byte decides).
bool BeanDecoder::DiscardLine(std::string_view in, size_t* pos) {
  while (*pos < in.size()) {
    const char* p = in.data() + *pos;
    size_t avail = in.size() - *pos;
    size_t take = static_cast<size_t>(std::min<uint64_t>(avail, discard_left_));
    if (!discard_saw_cr_) {
      size_t scan = std::min<size_t>(take, discard_left_ - 1);
      if (const void* cr = std::memchr(p, '\r', scan)) {
        size_t i = static_cast<size_t>(static_cast<const char*>(cr) - p);
        if (i + 1 == avail) {
          *pos += i;
          discard_left_ -= i;
          return false;
        }
        if (p[i + 1] == '\n') {
          *pos += i + 2;
          return true;
        }
        discard_saw_cr_ = true;
      }
    }
    *pos += take;
    discard_left_ -= take;
    if (discard_left_ == 0) {
      discard_left_ = kMaxLineLength;
      discard_saw_cr_ = false;
    }
  }
  return false;
}

// Discards the rest of an over-long line from in[pos..]; once its CRLF has
// gone, the item is the BAD_FORMAT reply and line mode resumes.
BeanDecoder::Item BeanDecoder::DiscardLineFrom(std::string_view in, size_t pos) {
  Item item;
  bool done = DiscardLine(in, &pos);
  item.consumed = pos;
  if (done) {
    mode_ = Mode::kLine;
    item.kind = Kind::kReply;
    item.reply = kBadFormatReply;
  }
  return item;
}

BeanDecoder::Item BeanDecoder::Next(std::string_view in) {
  Item item;
  switch (mode_) {
    case Mode::kDiscardBody: {
      size_t take = static_cast<size_t>(std::min<uint64_t>(in.size(), discard_left_));
      discard_left_ -= take;
      item.consumed = take;
      if (discard_left_ == 0) {
        mode_ = Mode::kLine;
        item.kind = Kind::kReply;
        item.reply = kJobTooBigReply;
        item.counted = true;
        item.command.op = discard_op_;
      }
      return item;
    }
    case Mode::kDiscardLine:
      return DiscardLineFrom(in, 0);
    case Mode::kLine:
      break;
  }

  // scan_line_end: the first '\r' in the first min(size, 224) - 1 bytes.
  size_t window = std::min(in.size(), kMaxLineLength - 1);
  // (An empty view may have no data pointer: memchr must not see it.)
  const void* cr = window == 0 ? nullptr : std::memchr(in.data(), '\r', window);
  size_t line_len = 0;
  bool complete = false;
  if (cr != nullptr) {
    line_len = static_cast<size_t>(static_cast<const char*>(cr) - in.data());
    if (line_len + 1 == in.size()) return item;  // the next byte decides
    complete = in[line_len + 1] == '\n';
  }
  if (!complete) {
    if (in.size() < kMaxLineLength) return item;  // a longer line may still end
    // Over-long: drop the first block and discard through the next "\r\n".
    mode_ = Mode::kDiscardLine;
    discard_left_ = kMaxLineLength;
    discard_saw_cr_ = false;
    return DiscardLineFrom(in, kMaxLineLength);
  }

  size_t after_line = line_len + 2;
  BeanCommand& cmd = item.command;
  std::string_view reply;
  bool counted = false;
  if (!ParseLine(in.substr(0, line_len), max_job_size_, &cmd, &reply, &counted)) {
    if (reply == kJobTooBigReply) {
      uint64_t left = uint64_t{cmd.bytes} + 2;
      size_t avail = in.size() - after_line;
      if (avail < left) {
        mode_ = Mode::kDiscardBody;
        discard_left_ = left - avail;
        discard_op_ = cmd.op;  // counted goes with the JOB_TOO_BIG item
        item.consumed = in.size();
        return item;
      }
      after_line += static_cast<size_t>(left);
    }
    item.kind = Kind::kReply;
    item.reply = reply;
    item.counted = counted;
    item.consumed = after_line;
    return item;
  }

  switch (cmd.op) {
    case BeanOp::kQuit:
      item.kind = Kind::kClose;
      item.consumed = after_line;
      return item;
    case BeanOp::kPut:
    case BeanOp::kPutEx: {
      size_t need = size_t{cmd.bytes} + 2;
      if (in.size() - after_line < need) return item;  // kNeedMore, nothing consumed
      const char* body = in.data() + after_line;
      item.consumed = after_line + need;
      if (body[cmd.bytes] != '\r' || body[cmd.bytes + 1] != '\n') {
        item.kind = Kind::kReply;
        item.reply = kExpectedCrlfReply;
        item.counted = true;
        return item;
      }
      cmd.body = std::string_view(body, cmd.bytes);
      item.kind = Kind::kCommand;
      return item;
    }
    default:
      item.kind = Kind::kCommand;
      item.consumed = after_line;
      return item;
  }
}

Op OperationOf(BeanOp op) { return kCommands[kRowOfOp[static_cast<size_t>(op)]].operation; }

std::string_view BeanVerb(BeanOp op) {
  std::string_view p = kCommands[kRowOfOp[static_cast<size_t>(op)]].prefix;
  return p.ends_with(' ') ? p.substr(0, p.size() - 1) : p;
}

}  // namespace delayq::server
