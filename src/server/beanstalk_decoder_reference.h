// Test and fuzz only: a literal model of how beanstalkd 1.12 consumes a
// connection's input (prot.c conn_process_io, h_conn, fill_extra_data, _skip
// and dispatch_cmd's put path), with its fixed 224-byte command buffer and
// reads of arbitrary sizes. It shares only ParseBeanLine() with BeanDecoder,
// so comparing the two checks BeanDecoder's framing against the original's
// buffer mechanics. Written from beanstalkd 1.12's behaviour as
// beanstalk_decoder.h and docs/protocol.md describe it, not copied.
#ifndef DELAYQ_SERVER_BEANSTALK_DECODER_REFERENCE_H_
#define DELAYQ_SERVER_BEANSTALK_DECODER_REFERENCE_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "server/beanstalk_decoder.h"

namespace delayq::server::reference {

class Beanstalkd112InputModel {
 public:
  explicit Beanstalkd112InputModel(size_t max_job_size) : max_job_size_(max_job_size) {}

  // Feeds `stream` to the model in reads whose sizes `read_size(want)`
  // chooses (1..want), calling `emit(const BeanDecoder::Item&)` for each item
  // in order (consumed is left 0). Stops at the end of the stream or at quit.
  template <class ReadSize, class Emit>
  void Run(std::string_view stream, ReadSize read_size, Emit emit) {
    stream_ = stream;
    while (state_ != State::kClosed) {
      if (!ProcessIo(read_size, emit)) return;  // end of input
      // h_conn: dispatch every complete line already buffered.
      while (state_ == State::kWantCommand && cmd_read_ > 0 &&
             (cmd_len_ = ScanLineEnd(cmd_, cmd_read_)) != 0) {
        Dispatch(emit);
        FillExtraData();
        if (state_ == State::kClosed) return;
      }
    }
  }

 private:
  enum class State { kWantCommand, kWantEndline, kBitbucket, kWantData, kClosed };

  // dispatch_cmd counts cmd-put once a put line's four numbers parse (each:
  // spaces, a digit, all digits, within range), before any other check.
  static bool PutNumbersParse(std::string_view line, BeanOp* op) {
    if (line.find('\0') != std::string_view::npos) return false;  // BAD_FORMAT first
    bool ex = line.substr(0, 7) == "put-ex ";
    if (!ex && line.substr(0, 4) != "put ") return false;
    std::string_view rest = line.substr(ex ? 7 : 4);
    const uint64_t u32 = UINT32_MAX, u64 = UINT64_MAX;
    const uint64_t maxes[4] = {u32, ex ? u64 : u32, ex ? u64 : u32, u32};
    size_t i = 0;
    for (uint64_t max : maxes) {
      while (i < rest.size() && rest[i] == ' ') ++i;
      if (i == rest.size() || rest[i] < '0' || rest[i] > '9') return false;
      __extension__ unsigned __int128 v = 0;
      for (; i < rest.size() && rest[i] >= '0' && rest[i] <= '9'; ++i) {
        v = v * 10 + static_cast<unsigned>(rest[i] - '0');
        if (v > max) return false;
      }
    }
    *op = ex ? BeanOp::kPutEx : BeanOp::kPut;
    return true;
  }

  // pause-tube's arguments as 1.12 reads them before it validates the
  // name: spaces, a run of name characters, spaces, a u32, end of line.
  static bool PauseArgsParse(std::string_view line) {
    constexpr std::string_view kCmd = "pause-tube";
    if (line.substr(0, kCmd.size()) != kCmd) return false;
    size_t i = kCmd.size();
    while (i < line.size() && line[i] == ' ') ++i;
    size_t start = i;
    auto name_char = [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             std::string_view("-+/;.$_()").find(c) != std::string_view::npos;
    };
    while (i < line.size() && name_char(line[i])) ++i;
    if (i == start) return false;
    while (i < line.size() && line[i] == ' ') ++i;
    if (i == line.size() || line[i] < '0' || line[i] > '9') return false;
    uint64_t v = 0;
    for (; i < line.size() && line[i] >= '0' && line[i] <= '9'; ++i) {
      v = v * 10 + static_cast<uint64_t>(line[i] - '0');
      if (v > UINT32_MAX) return false;
    }
    return i == line.size();
  }

  // scan_line_end: the first '\r' in the first size-1 bytes, if '\n' follows.
  static size_t ScanLineEnd(const char* s, size_t size) {
    const void* m = std::memchr(s, '\r', size - 1);
    if (m == nullptr) return 0;
    const char* cr = static_cast<const char*>(m);
    return cr[1] == '\n' ? static_cast<size_t>(cr - s) + 2 : 0;
  }

  template <class ReadSize>
  size_t Read(char* dst, size_t want, ReadSize& read_size) {
    if (stream_.empty() || want == 0) return 0;
    size_t n = std::min({want, stream_.size(), std::max<size_t>(1, read_size(want))});
    if (dst != nullptr) std::memcpy(dst, stream_.data(), n);
    stream_.remove_prefix(n);
    return n;
  }

  template <class ReadSize, class Emit>
  bool ProcessIo(ReadSize& read_size, Emit& emit) {
    size_t r;
    switch (state_) {
      case State::kWantCommand:
      case State::kWantEndline:
        r = Read(cmd_ + cmd_read_, kMaxLineLength - cmd_read_, read_size);
        if (r == 0) return false;
        cmd_read_ += r;
        cmd_len_ = ScanLineEnd(cmd_, cmd_read_);
        if (cmd_len_ != 0) {
          if (state_ == State::kWantEndline) {
            EmitReply(emit, kBadFormatReply, false, BeanOp::kQuit);
            state_ = State::kWantCommand;
            FillExtraData();
          }
          return true;
        }
        if (cmd_read_ == kMaxLineLength) {
          cmd_read_ = 0;
          state_ = State::kWantEndline;
        }
        return true;
      case State::kBitbucket:
        r = Read(nullptr, static_cast<size_t>(std::min<uint64_t>(bucket_left_, 1024)), read_size);
        if (r == 0) return false;
        bucket_left_ -= r;
        if (bucket_left_ == 0) {
          EmitReply(emit, kJobTooBigReply, true, pending_.op);
          state_ = State::kWantCommand;
        }
        return true;
      case State::kWantData:
        r = Read(body_.data() + in_job_read_, body_.size() - in_job_read_, read_size);
        if (r == 0) return false;
        in_job_read_ += r;
        MaybeEnqueue(emit);
        return true;
      case State::kClosed:
        return false;
    }
    return false;
  }

  // fill_extra_data: bytes after the line go to the job body (or the bit
  // bucket) first, then to the front of the command buffer.
  void FillExtraData() {
    if (cmd_len_ == 0) return;
    size_t extra = cmd_read_ - cmd_len_;
    size_t job_bytes = 0;
    if (in_job_) {
      job_bytes = std::min(extra, body_.size());
      std::memcpy(body_.data(), cmd_ + cmd_len_, job_bytes);
      in_job_read_ = job_bytes;
    } else if (bucket_left_ > 0) {
      job_bytes = static_cast<size_t>(std::min<uint64_t>(extra, bucket_left_));
      bucket_left_ -= job_bytes;
    }
    std::memmove(cmd_, cmd_ + cmd_len_ + job_bytes, extra - job_bytes);
    cmd_read_ = extra - job_bytes;
    cmd_len_ = 0;
  }

  template <class Emit>
  void Dispatch(Emit& emit) {
    BeanCommand cmd;
    std::string_view reply;
    std::string_view line(cmd_, cmd_len_ - 2);
    BeanOp put_op = BeanOp::kQuit;
    bool counted = PutNumbersParse(line, &put_op);
    if (!counted && PauseArgsParse(line)) {
      counted = true;  // 1.12: op_ct[OP_PAUSE_TUBE]++ precedes is_valid_tube
      put_op = BeanOp::kPauseTube;
    }
    if (!ParseBeanLine(line, max_job_size_, &cmd, &reply)) {
      if (reply == kJobTooBigReply) {  // _skip
        pending_.op = put_op;
        bucket_left_ = uint64_t{cmd.bytes} + 2;
        FillExtraData();
        if (bucket_left_ == 0) {
          EmitReply(emit, kJobTooBigReply, true, put_op);
        } else {
          state_ = State::kBitbucket;
        }
        return;
      }
      EmitReply(emit, reply, counted, put_op);
      return;
    }
    if (cmd.op == BeanOp::kQuit) {
      BeanDecoder::Item item;
      item.kind = BeanDecoder::Kind::kClose;
      item.command = cmd;
      emit(static_cast<const BeanDecoder::Item&>(item));
      state_ = State::kClosed;
      return;
    }
    if (cmd.op == BeanOp::kPut || cmd.op == BeanOp::kPutEx) {
      pending_ = cmd;
      pending_key_ = std::string(cmd.key);  // the line is about to move
      pending_backoff_ = std::string(cmd.backoff);
      in_job_ = true;
      body_.assign(size_t{cmd.bytes} + 2, '\0');
      FillExtraData();
      MaybeEnqueue(emit);
      return;
    }
    BeanDecoder::Item item;
    item.kind = BeanDecoder::Kind::kCommand;
    item.command = cmd;
    emit(static_cast<const BeanDecoder::Item&>(item));
  }

  template <class Emit>
  void MaybeEnqueue(Emit& emit) {
    if (in_job_read_ != body_.size()) {
      state_ = State::kWantData;
      return;
    }
    in_job_ = false;
    in_job_read_ = 0;
    state_ = State::kWantCommand;
    if (body_.compare(body_.size() - 2, 2, "\r\n") != 0) {
      EmitReply(emit, kExpectedCrlfReply, true, pending_.op);
      return;
    }
    BeanDecoder::Item item;
    item.kind = BeanDecoder::Kind::kCommand;
    item.command = pending_;
    item.command.key = pending_key_;
    item.command.backoff = pending_backoff_;
    item.command.body = std::string_view(body_.data(), body_.size() - 2);
    emit(static_cast<const BeanDecoder::Item&>(item));
  }

  template <class Emit>
  static void EmitReply(Emit& emit, std::string_view reply, bool counted, BeanOp put_op) {
    BeanDecoder::Item item;
    item.kind = BeanDecoder::Kind::kReply;
    item.reply = reply;
    item.counted = counted;
    if (counted) item.command.op = put_op;
    emit(static_cast<const BeanDecoder::Item&>(item));
  }

  size_t max_job_size_;
  std::string_view stream_;
  State state_ = State::kWantCommand;
  char cmd_[kMaxLineLength] = {};
  size_t cmd_read_ = 0;
  size_t cmd_len_ = 0;
  bool in_job_ = false;
  std::string body_;
  size_t in_job_read_ = 0;
  uint64_t bucket_left_ = 0;
  BeanCommand pending_;
  std::string pending_key_;
  std::string pending_backoff_;
};

}  // namespace delayq::server::reference

#endif  // DELAYQ_SERVER_BEANSTALK_DECODER_REFERENCE_H_
