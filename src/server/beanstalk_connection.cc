#include "server/beanstalk_connection.h"

#include <linux/sockios.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>

#include "server/beanstalk_server.h"

namespace delayq::server {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {
constexpr size_t kReadChunk = 64 * 1024;
// Reads beyond the first in one go, when each fills the buffer (and the
// input stays under the server's input limit).
constexpr int kMaxExtraReads = 16;
// An input buffer this large is freed once it is empty.
constexpr size_t kKeepInput = 4 * kReadChunk;
// Input a finishing connection reads and drops per event (see Finish).
constexpr size_t kDropChunk = 16 * 1024;
constexpr int kMaxDropReads = 16;
// A finishing connection looks at its send queue this often, and closes
// once the queue is empty, or has not shrunk for kLingerChecks checks.
constexpr std::chrono::milliseconds kLingerCheck{250};
constexpr int kLingerChecks = 20;
}  // namespace

BeanstalkConnection::BeanstalkConnection(BeanstalkServer& server, tcp::socket socket,
                                         std::shared_ptr<asio::ssl::context> tls)
    : server_(server),
      handler_(
          server.ctx_, [this] { OnWake(); }, PeerAddress(socket)) {
  boost::system::error_code ec;
  if (tls != nullptr) {
    tls_ = std::make_unique<TlsSession>(std::move(tls));
    auto ep = socket.remote_endpoint(ec);
    peer_ = ec ? std::string("?") : ep.address().to_string() + ":" + std::to_string(ep.port());
  }
  socket.set_option(tcp::no_delay(true), ec);
  socket.non_blocking(true, ec);
  fd_ = socket.release(ec);  // out of Asio's reactor: the poller has it
  if (ec) fd_ = -1;
}

BeanstalkConnection::~BeanstalkConnection() {
  if (fd_ >= 0) ::close(fd_);
}

void BeanstalkConnection::Start() {
  if (fd_ < 0 || (tls_ != nullptr && !tls_->ok()) || !server_.poller_.Add(fd_, EPOLLIN, this).ok())
    return Close();
  interest_ = EPOLLIN;
  if (tls_ == nullptr) return;
  handshake_deadline_.Arm(server_.io_.get_executor(), server_.ctx_.tls_handshake_timeout,
                          [weak = weak_from_this()](const std::string& why) {
                            auto self = weak.lock();
                            if (self == nullptr || self->closed_ || self->tls_->established())
                              return;
                            self->server_.ctx_.warn.Warn("tls_handshake_timeout",
                                                         "protocol=beanstalkd peer=" + self->peer_ +
                                                             " error=\"" + why + "\"");
                            self->Close();
                          });
}

void BeanstalkConnection::Shutdown() {
  draining_ = true;
  if (!writing_ && handler_.output().empty() && !handler_.reply_pending()) return Finish();
  UpdateInterest();
}

void BeanstalkConnection::OnSocketEvents(uint32_t events) {
  if (closed_) return;  // closed earlier in the same batch
  if (finishing_) return DropInput();
  if (events & EPOLLOUT) {
    WritePending();
    if (ended()) return;
  }
  if (events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
    // A send queued just now (by the EPOLLOUT part) goes first: one call
    // in the batch at a time per connection. Level-triggered, the socket
    // is reported again.
    if (send_queued_) return;
    if ((interest_ & EPOLLIN) == 0) {
      // Not reading (back-pressure, draining, end of stream seen): an
      // error or hang-up is all that can come; the socket is done.
      if (events & (EPOLLERR | EPOLLHUP)) Close();
      return;
    }
    Read();
  }
}

bool BeanstalkConnection::WantRead() {
  if (closed_ || draining_ || peer_closed_) return false;
  // Back-pressure: while commands cannot run (a reserve waits, replies
  // wait for a client that does not read them, the server's reply budget
  // is used up), the input is read up to the server's input limit only.
  return !CommandsWait() || handler_.input().size() < server_.input_limit_;
}

bool BeanstalkConnection::CommandsWait() const {
  return handler_.blocked() || handler_.output_full() ||
         (server_.ctx_.RepliesOverBudget() && Held() > 0);
}

size_t BeanstalkConnection::Held() const {
  return handler_.output().size() + sending_.size() + (pending_.size() - pending_sent_);
}

void BeanstalkConnection::Account() {
  const size_t held = closed_ ? 0 : Held();
  if (held != accounted_) server_.ctx_.AccountReplies(accounted_, held);
  accounted_ = held;
}

void BeanstalkConnection::UpdateInterest() {
  if (closed_ || finishing_) return;
  uint32_t want = (WantRead() ? uint32_t{EPOLLIN} : 0u) | (writing_ ? uint32_t{EPOLLOUT} : 0u);
  if (want == interest_) return;
  if (!server_.poller_.Modify(fd_, want, this).ok()) return Close();
  interest_ = want;
}

void BeanstalkConnection::Read() {
  if (recv_queued_) return;
  ByteBuffer& in = tls_ != nullptr ? cipher_in_ : handler_.input();
  char* p = in.Prepare(kReadChunk);
  recv_room_ = Room();
  ssize_t n;
  if (!server_.poller_.Recv(fd_, p, recv_room_, this, &n)) {
    recv_queued_ = true;
    return;
  }
  Received(n);
}

size_t BeanstalkConnection::Room() {
  // Over TLS the ciphertext is bounded as the input would be: the
  // plaintext it brings is no longer.
  const size_t held = handler_.input().size() + cipher_in_.size();
  const size_t limit = server_.input_limit_;
  const ByteBuffer& in = tls_ != nullptr ? cipher_in_ : handler_.input();
  return std::min(in.writable(), std::max(kReadChunk, limit > held ? limit - held : 0));
}

void BeanstalkConnection::Received(ssize_t n) {
  ByteBuffer& in = tls_ != nullptr ? cipher_in_ : handler_.input();
  size_t room = recv_room_;
  // The read filled the buffer: more may be waiting, take some now (a
  // bounded amount, so a fast sender cannot make us buffer without end).
  for (int extra = 0; n > 0; ++extra) {
    in.Commit(static_cast<size_t>(n));
    if (static_cast<size_t>(n) < room || extra == kMaxExtraReads ||
        handler_.input().size() + cipher_in_.size() >= server_.input_limit_)
      break;
    char* p = in.Prepare(kReadChunk);
    room = Room();
    n = RecvNow(fd_, p, room);
  }
  if (tls_ != nullptr && !cipher_in_.empty() && !Decipher()) return;
  if (n == 0) {
    peer_closed_ = true;  // answer what came before the end, then close
  } else if (n < 0 && n != -EAGAIN && n != -EWOULDBLOCK && n != -EINTR) {
    return Close();
  }
  Run();
}

bool BeanstalkConnection::Decipher() {
  const TlsSession::State state = tls_->Decrypt(cipher_in_.view(), handler_.input());
  cipher_in_.Consume(cipher_in_.size());
  if (state == TlsSession::State::kFailed) {
    server_.ctx_.warn.Warn(tls_->failure_event(), "protocol=beanstalkd peer=" + peer_ +
                                                      " error=\"" + tls_->error() + "\"");
    if (!writing_ && !send_queued_) tls_->SendAlert(fd_);
    Close();
    return false;
  }
  if (state == TlsSession::State::kClosed) peer_closed_ = true;
  if (tls_->established()) handshake_deadline_.Cancel();
  return true;
}

void BeanstalkConnection::Run() {
  // Commands run only on input that is all there: a recv in the batch
  // runs us when it is done.
  if (recv_queued_) return;
  for (;;) {
    // Past the server's reply budget, a connection that holds replies
    // runs no command until its client has taken them, and one that
    // holds none runs one command at a time.
    Account();
    const bool tight = server_.ctx_.RepliesOverBudget();
    const bool run = !tight || Held() == 0;
    if (run) {
      handler_.set_output_limit(tight ? 1 : BeanstalkHandler::kMaxOutput);
      handler_.Process();
    }
    // A waiting reserve is answered TIMED_OUT at the client's end, and
    // when the client sends more behind it than the connection reads
    // ahead: it is not read further, so it would not see the client go
    // (TCP brings the end after the input), and the commands behind the
    // reserve run now.
    const bool cancel = handler_.reserving() &&
                        (peer_closed_ || handler_.input().size() >= server_.input_limit_) &&
                        handler_.CancelReserve();
    // Process stops at a full output buffer. When the kernel takes all of
    // it at once, the commands after it go on now; when it takes part,
    // EPOLLOUT resumes us once the rest is sent.
    stopped_full_ = !run || handler_.output_full() || (cancel && !peer_closed_);
    if (!Flush()) return;  // the send waits in the poller's batch: OnIoDone goes on
    if (ended()) return;
    if (!stopped_full_ || writing_) break;
  }
  Settle();
}

void BeanstalkConnection::Settle() {
  Account();
  ReleaseBuffers();
  if (peer_closed_) {
    // A reply still on its way (durability) resumes us through OnWake.
    if (!writing_ && !send_queued_ && handler_.output().empty() && !handler_.reply_pending())
      return CloseAfterClient();
  }
  UpdateInterest();
}

void BeanstalkConnection::ReleaseBuffers() {
  if (!recv_queued_) {
    handler_.input().ShrinkIfIdle(kKeepInput);
    cipher_in_.ShrinkIfIdle(kKeepInput);
  }
  const size_t keep = server_.ctx_.RepliesOverBudget() ? 0 : BeanstalkHandler::kMaxOutput;
  auto release = [keep](std::string& s) {
    if (s.empty() && s.capacity() > keep) std::string().swap(s);
  };
  release(handler_.output());
  if (!send_queued_) release(sending_);
}

void BeanstalkConnection::OnIoDone(bool send, ssize_t result) {
  if (closed_) return;  // closed since the call was queued
  if (!send) {
    recv_queued_ = false;
    return Received(result);
  }
  send_queued_ = false;
  Sent(result);
  if (ended()) return;
  if (writing_) return Settle();  // the rest waits for EPOLLOUT
  // Commands stopped at a full output buffer, or replies written since
  // the send was queued: go on now.
  if (stopped_full_ || !handler_.output().empty()) return Run();
  Settle();
}

void BeanstalkConnection::OnWake() {
  if (closed_ || wake_posted_) return;
  wake_posted_ = true;
  server_.Wake(shared_from_this());
}

void BeanstalkConnection::Woken() {
  wake_posted_ = false;
  if (!ended()) Run();
}

bool BeanstalkConnection::Flush() {
  if (send_queued_) return false;
  if (writing_ || closed_) return true;
  std::string& out = handler_.output();
  if (tls_ != nullptr) {
    // The replies as records, after what TLS has to say (the handshake's
    // messages). Nothing is encrypted before the handshake is done.
    tls_->TakeOutput(sending_);
    if (!out.empty() && tls_->established()) {
      tls_->Encrypt(out, sending_);
      out.clear();
    }
  } else {
    sending_.swap(out);
  }
  if (sending_.empty()) {
    if (out.empty() && (handler_.want_close() || (draining_ && !handler_.reply_pending())))
      Finish();
    return true;
  }
  ssize_t n;
  if (!server_.poller_.Send(fd_, sending_.data(), sending_.size(), this, &n)) {
    send_queued_ = true;
    return false;
  }
  Sent(n);
  return true;
}

void BeanstalkConnection::Sent(ssize_t n) {
  if (n < 0) {
    if (n != -EAGAIN && n != -EWOULDBLOCK && n != -EINTR) {
      sending_.clear();
      return Close();
    }
    n = 0;
  }
  if (static_cast<size_t>(n) < sending_.size()) {
    writing_ = true;
    pending_.swap(sending_);  // not copied: sending_ is empty now
    pending_sent_ = static_cast<size_t>(n);
  }
  sending_.clear();
  if (writing_ || !handler_.output().empty()) return;
  if (handler_.want_close() || (draining_ && !handler_.reply_pending())) Finish();
}

void BeanstalkConnection::WritePending() {
  while (pending_sent_ < pending_.size()) {
    ssize_t n =
        ::send(fd_, pending_.data() + pending_sent_, pending_.size() - pending_sent_, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (errno == EINTR) continue;
      return Close();
    }
    pending_sent_ += static_cast<size_t>(n);
  }
  writing_ = false;
  pending_.clear();
  pending_sent_ = 0;
  if (sending_.capacity() < pending_.capacity()) sending_.swap(pending_);
  std::string().swap(pending_);
  Run();
}

bool BeanstalkConnection::SayCloseNotify() {
  close_notify_queued_ = true;
  if (!tls_->established()) return true;
  tls_->Close();
  std::string bye;
  tls_->TakeOutput(bye);
  if (bye.empty()) return true;
  ssize_t n = SendNow(fd_, bye.data(), bye.size());
  if (n < 0 && n != -EAGAIN && n != -EWOULDBLOCK && n != -EINTR) {
    Close();
    return false;
  }
  n = std::max<ssize_t>(n, 0);
  if (static_cast<size_t>(n) == bye.size()) return true;
  // The rest as the rest of a reply: EPOLLOUT sends it, then Run finds
  // nothing more to say and comes back here.
  pending_.swap(bye);
  pending_sent_ = static_cast<size_t>(n);
  writing_ = true;
  UpdateInterest();
  return false;
}

void BeanstalkConnection::CloseAfterClient() {
  // What the kernel does not take at once is not waited for: the client is
  // gone or going.
  if (tls_ != nullptr && !close_notify_queued_) (void)SayCloseNotify();
  Close();
}

void BeanstalkConnection::Finish() {
  if (closed_ || finishing_) return;
  if (peer_closed_) return Close();
  if (tls_ != nullptr && !close_notify_queued_ && !SayCloseNotify()) return;
  const int waiting = DropWaitingInput();
  if (waiting < 0) return Close();
  linger_left_ = Unacknowledged();
  if (waiting == 0 && linger_left_ == 0) return Close();
  finishing_ = true;
  Account();  // every reply is with the kernel
  handler_.EndSession();
  ::shutdown(fd_, SHUT_WR);
  if (interest_ != EPOLLIN) {
    if (!server_.poller_.Modify(fd_, EPOLLIN, this).ok()) return Close();
    interest_ = EPOLLIN;
  }
  linger_timer_ = std::make_unique<asio::steady_timer>(server_.io_);
  CheckLinger();
}

void BeanstalkConnection::CheckLinger() {
  linger_timer_->expires_after(kLingerCheck);
  linger_timer_->async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (ec || self == nullptr || self->closed_) return;
    const int left = self->Unacknowledged();
    if (left < self->linger_left_) self->linger_stalls_ = 0;
    self->linger_left_ = left;
    if (left == 0 || ++self->linger_stalls_ >= kLingerChecks) return self->Close();
    self->CheckLinger();
  });
}

int BeanstalkConnection::Unacknowledged() const {
  int n = 0;
  if (::ioctl(fd_, SIOCOUTQ, &n) != 0) return 0;
  return n;
}

void BeanstalkConnection::DropInput() {
  if (DropWaitingInput() < 0) Close();
}

int BeanstalkConnection::DropWaitingInput() {
  char drop[kDropChunk];
  int got = 0;
  for (int i = 0; i < kMaxDropReads; ++i) {
    ssize_t n = RecvNow(fd_, drop, sizeof drop);
    if (n == -EAGAIN || n == -EWOULDBLOCK) break;
    if (n <= 0) return -1;
    got = 1;
  }
  return got;
}

void BeanstalkConnection::Close() {
  if (closed_) return;
  closed_ = true;
  Account();
  if (linger_timer_ != nullptr) linger_timer_->cancel();
  handshake_deadline_.Cancel();
  if (fd_ >= 0) {
    if (interest_ != kUnregistered) server_.poller_.Remove(fd_);
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    fd_ = -1;
  }
  server_.Forget(this);
}

}  // namespace delayq::server
