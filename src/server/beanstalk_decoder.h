// Framing and parsing of the beanstalkd text protocol (1.12) plus delayq's
// extension commands (docs/protocol.md). Pure: bytes in, commands or error
// replies out; no I/O, no engine, no allocation.
//
// The decoder is fed the connection's unconsumed input and reports the first
// complete item in it and how many bytes that item used. Bytes that are
// discarded (the rest of an over-long line, the body of a JOB_TOO_BIG put) are
// reported as consumed even while more input is needed, so the connection
// never buffers more than one line or one acceptable body: at most
// kMaxLineLength + max_job_size() + 2 bytes.
//
// Framing follows beanstalkd 1.12 byte for byte (docs/protocol.md, and the
// oracle tests against beanstalkd in tests/server/protocol_test.cc),
// including its quirks:
//  - a line ends at the FIRST '\r' among its first 223 bytes, and only if a
//    '\n' follows it; a stray bare '\r' hides any later "\r\n", so the line
//    then counts as over-long once 224 bytes are buffered;
//  - a line of 224 bytes, "\r\n" included, is accepted; a longer one is
//    discarded in 224-byte blocks (counted from the line's start) until a
//    block's first '\r' (in its first 223 bytes) is followed by '\n'; then
//    BAD_FORMAT is reported and the bytes after that "\r\n" are the next line;
//  - a put body is exactly <bytes>+2 bytes; anything after it is the next line.
//
// Command recognition: delayq's extensions are tried first (so that
// "reserve-batch " is not taken as "reserve"), then beanstalkd's prefixes in
// its order, by case-sensitive prefix. Values are reported raw: no TTR clamp,
// no range checks beyond the wire syntax; the executor applies semantics.
//
// Thread: a decoder belongs to one connection; not thread-safe.
#ifndef DELAYQ_SERVER_BEANSTALK_DECODER_H_
#define DELAYQ_SERVER_BEANSTALK_DECODER_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "delayq/operations.h"

namespace delayq::server {

// beanstalkd's command line limit, CRLF included.
inline constexpr size_t kMaxLineLength = 224;

// Replies the decoder produces itself (static storage).
inline constexpr std::string_view kBadFormatReply = "BAD_FORMAT\r\n";
inline constexpr std::string_view kUnknownCommandReply = "UNKNOWN_COMMAND\r\n";
inline constexpr std::string_view kExpectedCrlfReply = "EXPECTED_CRLF\r\n";
inline constexpr std::string_view kJobTooBigReply = "JOB_TOO_BIG\r\n";

enum class BeanOp : uint8_t {
  kPut,
  kUse,
  kReserve,
  kReserveWithTimeout,
  kReserveJob,
  kDelete,
  kRelease,
  kBury,
  kTouch,
  kWatch,
  kIgnore,
  kPeek,
  kPeekReady,
  kPeekDelayed,
  kPeekBuried,
  kKick,
  kKickJob,
  kStatsJob,
  kStatsTube,
  kStats,
  kListTubes,
  kListTubeUsed,
  kListTubesWatched,
  kPauseTube,
  kQuit,
  // delayq extensions
  kPutEx,      // put-ex <pri> <delay-ms> <ttr-ms> <bytes> [key=K] [at=MS] [tries=N] [backoff=SPEC]
  kDeleteKey,  // delete-key <key>            (in the used tube)
  kPeekKey,    // peek-key <key>              (in the used tube)
  kReserveBatch,  // reserve-batch <count> <timeout-seconds>
  kClearTube,     // clear-tube <tube> <states>  states: all | comma list of ready,delayed,buried
  kAuth,          // auth <secret>               (docs/security.md)
};
inline constexpr size_t kNumBeanOps = static_cast<size_t>(BeanOp::kAuth) + 1;

// The row of the operation table (delayq/operations.h) a command asks for:
// put and put-ex are both Op::kPut.
Op OperationOf(BeanOp op);
// The command's name on the wire ("put-ex", "reserve-with-timeout").
std::string_view BeanVerb(BeanOp op);

// One decoded command. Fields not used by `op` keep their defaults. The
// string_views point into the input given to Next() (or ParseBeanLine()).
struct BeanCommand {
  BeanOp op = BeanOp::kQuit;
  uint64_t id = 0;           // peek, delete, release, bury, touch, kick-job, stats-job, reserve-job
  uint32_t pri = 0;          // put, put-ex, release, bury
  uint32_t bytes = 0;        // put, put-ex: body size declared on the line (== body.size())
  uint64_t delay = 0;        // put/release/pause-tube: seconds (u32 range); put-ex: ms
  uint64_t ttr = 0;          // put: seconds (u32 range, not clamped); put-ex: ms
  int64_t timeout = 0;       // reserve: -1; reserve-with-timeout: strtol value truncated to
                             // int32 as 1.12 does (< 0: forever); reserve-batch: seconds (u32)
  uint64_t count = 0;        // kick: bound (strtoul value truncated to u32); reserve-batch: 1..1000
  bool has_at = false;       // put-ex at= given
  uint64_t at = 0;           // put-ex: absolute due time, epoch ms
  uint64_t tries = 0;        // put-ex tries= (0 when absent)
  uint8_t clear_mask = 0;    // clear-tube: 1 ready, 2 delayed, 4 buried
  std::string_view name;     // tube: use, watch, ignore, stats-tube, pause-tube, clear-tube
  std::string_view key;      // put-ex key=, delete-key, peek-key (1..200 bytes of 0x21..0x7e)
  std::string_view backoff;  // put-ex backoff= (unparsed spec, 1..100 bytes of 0x21..0x7e)
  std::string_view secret;   // auth (1..200 bytes of 0x21..0x7e)
  std::string_view body;     // put, put-ex: the body, without its trailing CRLF
};

class BeanDecoder {
 public:
  // REQUIRES: max_job_size <= 1 GiB.
  explicit BeanDecoder(size_t max_job_size) : max_job_size_(max_job_size) {}

  enum class Kind : uint8_t {
    kNeedMore,  // no complete item yet; `consumed` bytes may still be dropped
    kCommand,   // `command` is valid until the consumed bytes are dropped
    kReply,     // send `reply` (a constant, e.g. "BAD_FORMAT\r\n"); no command
    kClose,     // quit: close the connection without a reply
  };
  struct Item {
    Kind kind = Kind::kNeedMore;
    size_t consumed = 0;  // > 0 unless kind is kNeedMore; never more than in.size()
    BeanCommand command;
    std::string_view reply;
    // kReply: 1.12 counts this failed command in its cmd-* stats anyway
    // (command.op says which): a put or put-ex whose four numbers parsed
    // (JOB_TOO_BIG, BAD_FORMAT for what follows them, EXPECTED_CRLF), a
    // pause-tube with a bad tube name.
    bool counted = false;
  };

  // Examines `in`, the unconsumed input (its first byte follows the last
  // consumed one), and returns the first item. The caller drops
  // item.consumed bytes from the front of its buffer before calling again.
  // kNeedMore means everything decodable has been decoded: call again when
  // more input has arrived (calling with the same input returns kNeedMore with
  // nothing consumed).
  Item Next(std::string_view in);

  // Bytes a put's body may need beyond the line: for sizing buffers.
  size_t max_job_size() const { return max_job_size_; }

 private:
  bool DiscardLine(std::string_view in, size_t* pos);

  Item DiscardLineFrom(std::string_view in, size_t pos);

  size_t max_job_size_;
  // Discard state: the rest of an over-long line, or a too-big body.
  enum class Mode : uint8_t { kLine, kDiscardLine, kDiscardBody } mode_ = Mode::kLine;
  // kDiscardLine: the current 224-byte block's first '\r' was not followed by
  // '\n', so no line can end in this block.
  bool discard_saw_cr_ = false;
  // kDiscardLine: bytes left in the current block; kDiscardBody: body bytes
  // (CRLF included) left to drop.
  uint64_t discard_left_ = 0;
  // kDiscardBody: kPut or kPutEx, for the JOB_TOO_BIG item.
  BeanOp discard_op_ = BeanOp::kPut;
};

// Parses one command line (without its CRLF) whose body, for put and put-ex,
// follows. Exposed for tests and the fuzzer; Next() uses it.
// Returns true and fills *cmd (body left empty; cmd->bytes gives its size)
// for a good line, including quit. Returns false and sets *reply to the error
// reply when the line is bad. *reply == kJobTooBigReply means a put or put-ex
// declared more than max_job_size bytes: cmd->op and cmd->bytes are set and
// the caller must drop bytes+2 body bytes before sending the reply (1.12
// checks the size before trailing garbage, so this wins over BAD_FORMAT).
bool ParseBeanLine(std::string_view line, size_t max_job_size, BeanCommand* cmd,
                   std::string_view* reply);

}  // namespace delayq::server

#endif  // DELAYQ_SERVER_BEANSTALK_DECODER_H_
