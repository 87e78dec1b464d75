#include "server/tls_session.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include <algorithm>
#include <climits>
#include <cstring>

namespace delayq::server {

namespace {
// Plaintext one SSL_read may bring: a record's most.
constexpr size_t kRecordPlaintext = 16 * 1024;
// OpenSSL's lengths are ints.
constexpr size_t kMaxCall = size_t{1} << 30;

// SSL_get_error reads the thread's error queue, which must hold nothing
// from before the call it explains. The queue is empty between this
// file's calls (Failed empties it), but other OpenSSL users of the loop
// thread (HTTPS push, Redis over TLS) may leave something in it. Emptying
// it walks all of its slots, a good part of a small record's cost, so it
// is emptied only when not empty: SSL_get_error asks ERR_peek_error too.
void ClearErrors() {
  if (ERR_peek_error() != 0) ERR_clear_error();
}

int PipeWrite(BIO* bio, const char* data, size_t n, size_t* written) {
  auto* pipe = static_cast<TlsSession::Pipe*>(BIO_get_data(bio));
  if (pipe->out == &pipe->held && pipe->held.size() + n > pipe->limit) {
    // Taken and dropped (a failed write would leave OpenSSL to retry it):
    // the session fails once OpenSSL returns (Overflowed), and nothing more
    // is sent on it.
    pipe->overflowed = true;
    *written = n;
    return 1;
  }
  pipe->out->append(data, n);
  *written = n;
  return 1;
}

int PipeRead(BIO* bio, char* data, size_t n, size_t* read) {
  auto* pipe = static_cast<TlsSession::Pipe*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  if (pipe->in.empty()) {
    BIO_set_retry_read(bio);  // more is to come: not the end of the stream
    *read = 0;
    return 0;
  }
  n = std::min(n, pipe->in.size());
  std::memcpy(data, pipe->in.data(), n);
  pipe->in.remove_prefix(n);
  *read = n;
  return 1;
}

long PipeCtrl(BIO* bio, int cmd, long, void*) {  // NOLINT(runtime/int): OpenSSL's type
  auto* pipe = static_cast<TlsSession::Pipe*>(BIO_get_data(bio));
  switch (cmd) {
    case BIO_CTRL_FLUSH:
      return 1;
    case BIO_CTRL_PENDING:
      return static_cast<long>(pipe->in.size());  // NOLINT(runtime/int)
    default:  // no kTLS, no EOF (more is to come), nothing held to write
      return 0;
  }
}
}  // namespace

const BIO_METHOD* TlsSession::Pipe::Method() {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "delayq pipe");
    if (m != nullptr &&
        (BIO_meth_set_write_ex(m, PipeWrite) != 1 || BIO_meth_set_read_ex(m, PipeRead) != 1 ||
         BIO_meth_set_ctrl(m, PipeCtrl) != 1)) {
      BIO_meth_free(m);
      m = nullptr;
    }
    return m;
  }();
  return method;
}

TlsSession::TlsSession(std::shared_ptr<boost::asio::ssl::context> context)
    : context_(std::move(context)) {
  const BIO_METHOD* method = Pipe::Method();
  SSL* ssl = method != nullptr ? SSL_new(context_->native_handle()) : nullptr;
  BIO* bio = method != nullptr ? BIO_new(method) : nullptr;
  if (ssl == nullptr || bio == nullptr) {
    BIO_free(bio);
    SSL_free(ssl);
    ERR_clear_error();
    return;
  }
  BIO_set_data(bio, &pipe_);
  BIO_set_init(bio, 1);
  SSL_set_bio(ssl, bio, bio);  // ssl owns it now (one reference for both ends)
  SSL_set_accept_state(ssl);
  // An idle connection keeps no record buffers (two of ~17 KiB each).
  SSL_set_mode(ssl, SSL_MODE_RELEASE_BUFFERS);
  ssl_ = ssl;
}

TlsSession::~TlsSession() { SSL_free(ssl_); }

TlsSession::State TlsSession::Decrypt(std::string_view cipher, ByteBuffer& plain) {
  if (failed_ || ssl_ == nullptr) return State::kFailed;
  // OpenSSL reads the ciphertext from where it lies; what it needs and
  // has not got (a record cut short) it keeps in its own buffer, so all
  // of `cipher` is read by the time it wants more.
  pipe_.in = cipher;
  struct Done {
    Pipe& pipe;
    ~Done() { pipe.in = {}; }
  } done{pipe_};
  if (!established_) {
    const State s = Handshake();
    if (s != State::kOk || !established_) return s;
  }
  ClearErrors();
  for (;;) {
    char* p = plain.Prepare(kRecordPlaintext);
    const int n = SSL_read(ssl_, p, static_cast<int>(kRecordPlaintext));
    if (pipe_.overflowed) return Overflowed();
    if (n > 0) {
      plain.Commit(static_cast<size_t>(n));
      // All that came is read: no SSL_read to hear "want more".
      if (SSL_pending(ssl_) == 0 && pipe_.in.empty()) return State::kOk;
      continue;
    }
    const int e = SSL_get_error(ssl_, n);
    if (e == SSL_ERROR_WANT_READ) return State::kOk;
    if (e == SSL_ERROR_ZERO_RETURN) return State::kClosed;
    return Failed(n, "read");
  }
}

TlsSession::State TlsSession::Handshake() {
  ERR_clear_error();
  const int r = SSL_do_handshake(ssl_);
  if (r == 1) {
    established_ = true;
    pipe_.limit = kMaxHeld;
    return State::kOk;
  }
  if (SSL_get_error(ssl_, r) == SSL_ERROR_WANT_READ) return State::kOk;
  return Failed(r, "handshake");
}

TlsSession::State TlsSession::Failed(int ret, const char* during) {
  failed_ = true;
  const int e = ssl_ != nullptr ? SSL_get_error(ssl_, ret) : SSL_ERROR_SSL;
  const unsigned long last = ERR_peek_last_error();
  if (last != 0) {
    const char* why = ERR_reason_error_string(last);
    error_ = why != nullptr ? why : "OpenSSL error " + std::to_string(last);
  } else if (e == SSL_ERROR_SYSCALL) {
    error_ = "unexpected end of input";
  } else {
    error_ = std::string("TLS ") + during + " failed (SSL_get_error " + std::to_string(e) + ")";
  }
  ERR_clear_error();
  return State::kFailed;
}

TlsSession::State TlsSession::Overflowed() {
  failed_ = true;
  error_ = "the client does not read what TLS has to tell it (over " +
           std::to_string(kMaxHeld / 1024) + " KiB held)";
  pipe_.held.clear();  // not to be sent: part of it was dropped
  ERR_clear_error();
  return State::kFailed;
}

void TlsSession::Encrypt(std::string_view plain, std::string& cipher) {
  // The records go straight into `cipher` (after what TLS had to say
  // before them); SSL_write returns once all of `plain` is in records.
  TakeOutput(cipher);
  pipe_.out = &cipher;
  ClearErrors();
  while (!plain.empty() && !failed_) {
    const int n = SSL_write(ssl_, plain.data(), static_cast<int>(std::min(plain.size(), kMaxCall)));
    if (n <= 0) {
      Failed(n, "write");
      break;
    }
    plain.remove_prefix(static_cast<size_t>(n));
  }
  pipe_.out = &pipe_.held;
}

void TlsSession::TakeOutput(std::string& cipher) {
  if (pipe_.held.empty()) return;
  if (cipher.empty()) {
    cipher.swap(pipe_.held);
  } else {
    cipher += pipe_.held;
    pipe_.held.clear();
  }
}

void TlsSession::SendAlert(int fd) {
  std::string alert;
  TakeOutput(alert);
  if (!alert.empty()) ::send(fd, alert.data(), alert.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

void TlsSession::Close() {
  if (ssl_ == nullptr || failed_ || !established_) return;
  ERR_clear_error();
  SSL_shutdown(ssl_);  // writes the close_notify; the client's is not awaited
  ERR_clear_error();
}

void TlsHandshakeDeadline::Arm(const boost::asio::any_io_executor& executor,
                               std::chrono::milliseconds timeout,
                               std::function<void(const std::string& why)> expired) {
  if (timeout.count() <= 0) return;
  timer_ = std::make_unique<boost::asio::steady_timer>(executor);
  timer_->expires_after(timeout);
  timer_->async_wait([timeout, expired = std::move(expired)](const boost::system::error_code& ec) {
    if (!ec) expired("no handshake within " + std::to_string(timeout.count()) + " ms");
  });
}

void TlsHandshakeDeadline::Cancel() {
  if (timer_ == nullptr) return;
  timer_->cancel();
  timer_.reset();
}

}  // namespace delayq::server
