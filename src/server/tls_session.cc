#include "server/tls_session.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include <algorithm>
#include <climits>

namespace delayq::server {

namespace {
// Plaintext one SSL_read may bring: a record's most.
constexpr size_t kRecordPlaintext = 16 * 1024;
// OpenSSL's lengths are ints.
constexpr size_t kMaxCall = size_t{1} << 30;
}  // namespace

TlsSession::TlsSession(std::shared_ptr<boost::asio::ssl::context> context)
    : context_(std::move(context)) {
  SSL* ssl = SSL_new(context_->native_handle());
  BIO* in = BIO_new(BIO_s_mem());
  BIO* out = BIO_new(BIO_s_mem());
  if (ssl == nullptr || in == nullptr || out == nullptr) {
    BIO_free(in);
    BIO_free(out);
    SSL_free(ssl);
    ERR_clear_error();
    return;
  }
  // An empty BIO means "more is to come", not the end of the stream.
  BIO_set_mem_eof_return(in, -1);
  BIO_set_mem_eof_return(out, -1);
  SSL_set_bio(ssl, in, out);  // ssl owns both now
  SSL_set_accept_state(ssl);
  // An idle connection keeps no record buffers (two of ~17 KiB each).
  SSL_set_mode(ssl, SSL_MODE_RELEASE_BUFFERS);
  ssl_ = ssl;
  in_ = in;
  out_ = out;
}

TlsSession::~TlsSession() { SSL_free(ssl_); }

TlsSession::State TlsSession::Decrypt(std::string_view cipher, ByteBuffer& plain) {
  if (failed_ || ssl_ == nullptr) return State::kFailed;
  while (!cipher.empty()) {
    const int n =
        BIO_write(in_, cipher.data(), static_cast<int>(std::min(cipher.size(), kMaxCall)));
    if (n <= 0) return Failed(n, "input");
    cipher.remove_prefix(static_cast<size_t>(n));
  }
  if (!established_) {
    const State s = Handshake();
    if (s != State::kOk || !established_) return s;
  }
  // OpenSSL's error queue is empty between calls (Failed empties it), so
  // it is emptied once here, not before every SSL_read: SSL_get_error
  // reads it, and emptying it is a good part of a small record's cost.
  ERR_clear_error();
  for (;;) {
    char* p = plain.Prepare(kRecordPlaintext);
    const int n = SSL_read(ssl_, p, static_cast<int>(kRecordPlaintext));
    if (n > 0) {
      plain.Commit(static_cast<size_t>(n));
      // All that came is read: no SSL_read to hear "want more".
      if (SSL_pending(ssl_) == 0 && BIO_ctrl_pending(in_) == 0) return State::kOk;
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

void TlsSession::Encrypt(std::string_view plain, std::string& cipher) {
  // A memory BIO takes everything: SSL_write returns once all of `plain`
  // is in records.
  ERR_clear_error();
  while (!plain.empty() && !failed_) {
    const int n = SSL_write(ssl_, plain.data(), static_cast<int>(std::min(plain.size(), kMaxCall)));
    if (n <= 0) {
      Failed(n, "write");
      break;
    }
    plain.remove_prefix(static_cast<size_t>(n));
  }
  TakeOutput(cipher);
}

void TlsSession::TakeOutput(std::string& cipher) {
  if (out_ == nullptr) return;
  const size_t pending = BIO_ctrl_pending(out_);
  if (pending == 0) return;
  const size_t at = cipher.size();
  cipher.resize(at + pending);
  const int n = BIO_read(out_, cipher.data() + at, static_cast<int>(std::min(pending, kMaxCall)));
  cipher.resize(at + static_cast<size_t>(std::max(n, 0)));
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
