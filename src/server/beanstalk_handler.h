// One beanstalkd-protocol connection's logic, free of sockets: input bytes
// in, reply bytes out. Decodes commands (BeanDecoder), runs them on the
// backend, formats replies byte-exactly as beanstalkd 1.12 does.
//
// Commands run in order and their replies leave in order. A reserve that
// waits blocks the connection: no further input is processed until it
// completes, as in beanstalkd. Any other command whose reply is on its way
// (a change waiting to be durable) lets the commands after it run
// meanwhile, when the backend completes a session's operations in the order
// they were issued (Backend::CompletesInOrder): their changes then join the
// same write, and so the same sync, and their replies wait behind its
// (docs/decisions.md, "Pipelined commands share a sync"). On a backend
// that does not, such a command blocks the connection as a reserve does;
// so does one that finds the store behind (Backend::StoreBehind), until a
// reply of this connection's leaves: its changes on their way then do not
// grow.
//
// Thread: the loop thread that owns the backend.
#ifndef DELAYQ_SERVER_BEANSTALK_HANDLER_H_
#define DELAYQ_SERVER_BEANSTALK_HANDLER_H_

#include <boost/asio/ip/address.hpp>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>

#include "server/access.h"
#include "server/beanstalk_decoder.h"
#include "server/byte_buffer.h"
#include "server/server_context.h"

namespace delayq::server {

class BeanstalkHandler final : public AccessListener {
 public:
  // `wake` is called when output became available, or the connection
  // should close, outside of Process() (a waiting reserve completed).
  // `peer`: the client's address, which --trusted-networks may trust
  // (nullopt: a client in this process, trusted).
  BeanstalkHandler(ServerContext& ctx, std::function<void()> wake,
                   std::optional<boost::asio::ip::address> peer = std::nullopt);
  ~BeanstalkHandler();
  BeanstalkHandler(const BeanstalkHandler&) = delete;
  BeanstalkHandler& operator=(const BeanstalkHandler&) = delete;

  // The connection reads into this buffer, then calls Process().
  ByteBuffer& input() { return in_; }
  // Runs every complete command in the input until it needs more bytes,
  // blocks on a waiting reserve, is asked to close, or has the output
  // limit's bytes of replies waiting in output() (kMaxOutput, or less: see
  // set_output_limit): the connection sends them, then calls Process again
  // (so that pipelined requests for large replies, from a client that does
  // not read, cannot make the server buffer without end).
  void Process();
  static constexpr size_t kMaxOutput = 256 * 1024;
  bool output_full() const { return out_.size() + queued_bytes_ >= out_limit_; }
  // Commands whose replies may wait behind one on its way; past it the
  // connection runs no more until replies leave (bounds what a client
  // that pipelines without end makes the server hold).
  static constexpr size_t kMaxQueuedReplies = 1024;
  // Where Process stops (1: after the first reply); kMaxOutput by default.
  void set_output_limit(size_t bytes) { out_limit_ = bytes; }

  // A waiting reserve is answered TIMED_OUT at once: the peer closed its
  // sending side (as beanstalkd does for a half-closed connection), or the
  // connection stopped reading it (its input is at its limit). False, and
  // nothing done, if no reserve waits, or the one that did was served and
  // its answer is on its way (Backend::ReserveServed).
  bool CancelReserve();

  // After a reload (SIGHUP): a waiting reserve whose caller may no longer
  // consume every topic it watches stops waiting. It waits again on those
  // left, for the rest of its timeout, or is refused (UNAUTHORIZED,
  // FORBIDDEN) when none is.
  void AccessChanged() override;

  // The connection is ending: its replies are all out, and it only waits
  // for the client to close. The session ends now, as at a close (its
  // reserved jobs are ready again, a waiting reserve is dropped) and the
  // connection no longer counts in the stats. The destructor does the same
  // when this was not called. REQUIRES: Process is not called afterwards.
  void EndSession();

  std::string& output() { return out_; }
  const std::string& output() const { return out_; }
  bool blocked() const { return blocked_ || queued_.size() >= kMaxQueuedReplies; }
  // A reply is on its way (a change waiting to be durable, or a reserve's
  // served job waiting for its put to be), not a reserve that waits for a
  // job.
  bool reply_pending() const {
    return (blocked_ && (!reserving_ || backend_.ReserveServed(session_))) || !queued_.empty();
  }
  // Blocked on a reserve that waits for a job (or was served, its answer
  // on its way: CancelReserve).
  bool reserving() const { return blocked_ && reserving_; }
  // `quit` came, and every reply before it is in output().
  bool want_close() const { return close_ && queued_.empty(); }

 private:
  // Runs the command if the caller may (docs/security.md): at once when
  // its topic is known, after a look at the job's topic for a command on
  // one job; else replies UNAUTHORIZED, FORBIDDEN or RATE_LIMITED.
  void Authorize(BeanCommand& cmd);
  void Refuse(const Status& st);
  void Execute(BeanCommand& cmd);
  void Reply(std::string_view s) { sink_->append(s); }
  // Where the reply being written goes: output(), or its place in queued_.
  std::string& sink() { return *sink_; }
  // Starts the reply to the next command (or decoder's answer, `ready`):
  // into output() when nothing waits ahead of it, else into a place at the
  // end of queued_.
  void BeginReply(bool ready);
  // After the command (or answer) is written or on its way: a reply on its
  // way gets its place in queued_, and the sink is the place of the reply
  // that comes next (the first on its way), or output().
  void EndReply();
  // The first queued reply is written: it and the ready ones behind it go
  // to output().
  void ReleaseQueued();
  void ReplyCode(Status st);
  void ReplyJob(std::string_view word, const JobView& j);
  void ReplyYaml(const std::string& yaml);
  void ReplyOkOr(Status st, std::string_view ok);
  void ReplyCount(std::string_view word, const Result<uint64_t>& res);
  void ReplyFirstJob(std::string_view word, Status st, backend::Jobs jobs);
  void ReplyYamlOr(Status st, const std::function<std::string()>& yaml);
  void DoReserve(TimeMs timeout_ms, uint32_t count, bool batch);
  // Asks the backend for the reserve DoReserve set up (reserve_*_).
  void StartReserve(TimeMs timeout_ms);
  // A token's connection reserves only from topics it may consume: the
  // others are ignored first. FORBIDDEN when none is left.
  Status WatchOnlyConsumable();
  // Jobs this connection reserved: reserve replies record them.
  void Hold(backend::Jobs jobs);
  // Keeps ServerContext::waiting counting this connection's reserve while
  // it waits.
  void CountWaiting(bool waits);
  void MarkProducer();
  void MarkWorker();
  // The current command's reply is written: unblock, and wake the
  // connection when this happens after Execute returned.
  void Done();

  ServerContext& ctx_;
  backend::Backend& backend_;
  std::function<void()> wake_;
  Caller caller_;
  BeanDecoder decoder_;
  SessionId session_;
  ByteBuffer in_;
  std::string out_;
  std::string* sink_ = &out_;
  size_t sink_size_ = 0;  // its size at BeginReply
  // Replies behind one on its way, in command order; the first is always
  // the one on its way (the next completion to come, as the backend
  // completes in order), the ones after it ready or on their way too.
  struct Queued {
    std::string bytes;
    bool ready = false;
  };
  std::deque<Queued> queued_;
  size_t queued_bytes_ = 0;  // of the ready ones
  bool pipeline_ = false;    // Backend::CompletesInOrder
  size_t out_limit_ = kMaxOutput;
  bool blocked_ = false;
  bool reserving_ = false;  // the blocking command is a reserve
  // The reserve's: how many jobs, whether reserve-batch, and until when it
  // waits (kNoDeadline: no timeout), for AccessChanged to ask again.
  static constexpr TimeMs kNoDeadline = -1;
  uint32_t reserve_count_ = 1;
  bool reserve_batch_ = false;
  TimeMs reserve_until_ = kNoDeadline;
  bool counted_waiting_ = false;  // in ServerContext::waiting
  bool in_command_ = false;       // inside Execute: completions are synchronous
  bool close_ = false;
  bool producer_ = false;
  bool worker_ = false;
  bool session_ended_ = false;
  // Checks whose answer holds while the caller's standing
  // (Caller::standing) and the watch list or used topic stay the same.
  uint64_t watch_checked_ = 0;
  uint64_t use_checked_ = 0;
  // The jobs this connection reserved, by id, with their topic and TTR
  // deadline: while the deadline is ahead the job is still this
  // connection's, so a delete, release, bury or touch of it needs the
  // `consume` right on that topic, and no look-up. Kept for a token's
  // connection only.
  struct Held {
    std::string topic;
    TimeMs deadline = 0;
  };
  std::unordered_map<JobId, Held> held_;
};

// The beanstalkd reply for an error status (NOT_FOUND, BAD_FORMAT, ...).
std::string_view BeanReplyFor(Code code);

// delayq's replies to a caller that may not do what it asks
// (docs/security.md): not authenticated (or a wrong secret), no right on
// the topic, over its token's rate; and to a good `auth`.
inline constexpr std::string_view kUnauthorizedReply = "UNAUTHORIZED\r\n";
inline constexpr std::string_view kForbiddenReply = "FORBIDDEN\r\n";
inline constexpr std::string_view kRateLimitedReply = "RATE_LIMITED\r\n";
inline constexpr std::string_view kAuthenticatedReply = "AUTHENTICATED\r\n";

// delayq's one reply of its own, sent only to a connection it refuses
// (--max-connections, out of file descriptors) before closing it.
inline constexpr std::string_view kServerBusyReply = "SERVER_BUSY too many connections\r\n";

}  // namespace delayq::server

#endif  // DELAYQ_SERVER_BEANSTALK_HANDLER_H_
