// The server side of one TLS connection, over memory: the connection
// reads and writes its socket itself (beanstalk_connection.h: level-
// triggered, its calls batched with the plaintext connections' through
// io_uring, io_batch.h) and passes the bytes through here. Ciphertext that
// came is decrypted into the connection's input (running the handshake
// first); replies are encrypted into what it sends next; what TLS itself
// has to say (the handshake's messages, session tickets, alerts, the
// close_notify) is picked up with the replies (TakeOutput).
//
// The context is the listener's in force when the client came (tls.h): the
// session holds it, so a reload (SIGHUP) leaves open connections be.
//
// Thread: the loop thread of the connection.
#ifndef DELAYQ_SERVER_TLS_SESSION_H_
#define DELAYQ_SERVER_TLS_SESSION_H_

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "server/byte_buffer.h"

typedef struct ssl_st SSL;
typedef struct bio_st BIO;
typedef struct bio_method_st BIO_METHOD;

namespace delayq::server {

class TlsSession {
 public:
  enum class State {
    kOk,      // go on (more may be needed)
    kClosed,  // the client sent its close_notify: no more input
    kFailed,  // a handshake failed, or a record was bad: error() says why
  };

  explicit TlsSession(std::shared_ptr<boost::asio::ssl::context> context);
  ~TlsSession();
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;

  // False when OpenSSL could not make the session (out of memory).
  bool ok() const { return ssl_ != nullptr; }

  // Ciphertext from the client: the handshake runs on, and whatever
  // plaintext the records hold is appended to `plain`. A record cut short
  // waits for the rest. After kFailed the session takes no more input;
  // TakeOutput may hold an alert for the client.
  State Decrypt(std::string_view cipher, ByteBuffer& plain);

  // Encrypts `plain` (records of up to 16 KiB) and appends them to
  // `cipher`. Before the handshake is done nothing may be encrypted
  // (REQUIRES: established()).
  void Encrypt(std::string_view plain, std::string& cipher);

  // Appends what TLS has to send (see the top) to `cipher`.
  void TakeOutput(std::string& cipher);

  // Ends the session: a close_notify waits in the output (TakeOutput).
  void Close();

  bool established() const { return established_; }

  // Why Decrypt failed: OpenSSL's reason (never key material).
  const std::string& error() const { return error_; }
  // The event a failure is logged as: tls_handshake_failed before the
  // handshake was done, tls_error after.
  const char* failure_event() const { return established_ ? "tls_error" : "tls_handshake_failed"; }
  // After kFailed: sends the alert that says why on socket `fd`, if the
  // kernel takes it at once (the connection closes next).
  void SendAlert(int fd);

  // OpenSSL's one BIO for both directions: it reads the ciphertext Decrypt
  // was given where it lies, and writes records into the string Encrypt
  // fills, or else into `held` for TakeOutput (a memory BIO would copy
  // both ways, and its bookkeeping costs more than a small record's
  // cipher).
  struct Pipe {
    static const BIO_METHOD* Method();  // nullptr when OpenSSL cannot make it
    std::string_view in;                // ciphertext not yet read
    std::string held;                   // what TLS wrote outside Encrypt
    std::string* out = &held;           // where records go now
    size_t limit = SIZE_MAX;            // of `held`: kMaxHeld once established
    bool overflowed = false;            // TLS wrote past `limit` into `held`
  };
  // The most TLS may have written outside Encrypt, once the handshake is
  // done, before the connection takes it (TakeOutput): tickets, alerts. A
  // client that makes OpenSSL say more (a TLS 1.2 renegotiation attempt
  // is answered with an alert every time) without reading it would
  // otherwise hold the server's memory without bound: its session fails
  // instead. (The handshake's own flight is not bounded here: its size is
  // the server's certificate chain and client CA list, not the client's
  // doing.)
  static constexpr size_t kMaxHeld = 64 * 1024;

 private:
  // Drives the handshake; kOk once it is done or when it wants input.
  State Handshake();
  State Failed(int ret, const char* during);
  // Fails the session: TLS wrote past kMaxHeld (Pipe::overflowed).
  State Overflowed();

  std::shared_ptr<boost::asio::ssl::context> context_;
  SSL* ssl_ = nullptr;
  Pipe pipe_;  // its BIO is owned by ssl_
  bool established_ = false;
  bool failed_ = false;
  std::string error_;
};

// The time a TLS client has to finish its handshake
// (--tls-handshake-timeout): a timer that lives while the handshake runs.
class TlsHandshakeDeadline {
 public:
  // `expired` runs after `timeout` (given why, for the log) unless Cancel
  // came first; no timer when `timeout` is not positive.
  void Arm(const boost::asio::any_io_executor& executor, std::chrono::milliseconds timeout,
           std::function<void(const std::string& why)> expired);
  // The handshake is done, or the connection closes.
  void Cancel();

 private:
  std::unique_ptr<boost::asio::steady_timer> timer_;
};

}  // namespace delayq::server

#endif  // DELAYQ_SERVER_TLS_SESSION_H_
