// Test helper: an OpenSSL client over two memory BIOs, whose bytes a test
// carries to and from a server-side TlsSession (server/tls_session.h) by
// hand. For the session's unit test and its fuzz target.
//
// Thread: each object belongs to one thread.
#ifndef DELAYQ_TESTS_TLS_MEMORY_CLIENT_H_
#define DELAYQ_TESTS_TLS_MEMORY_CLIENT_H_

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <cstddef>
#include <string>
#include <string_view>

namespace delayq::testing {

class TlsMemoryClient {
 public:
  // A client of `ctx` (which stays the caller's), naming `server_name`
  // (SNI and the name verified, when ctx verifies; "": none).
  explicit TlsMemoryClient(SSL_CTX* ctx, const std::string& server_name = "") {
    ssl_ = SSL_new(ctx);
    in_ = BIO_new(BIO_s_mem());
    out_ = BIO_new(BIO_s_mem());
    // An empty BIO means "more is to come", not the end of the stream.
    BIO_set_mem_eof_return(in_, -1);
    BIO_set_mem_eof_return(out_, -1);
    SSL_set_bio(ssl_, in_, out_);
    if (!server_name.empty()) {
      SSL_set_tlsext_host_name(ssl_, server_name.c_str());
      SSL_set1_host(ssl_, server_name.c_str());
    }
    SSL_set_connect_state(ssl_);
  }
  ~TlsMemoryClient() { SSL_free(ssl_); }
  TlsMemoryClient(const TlsMemoryClient&) = delete;
  TlsMemoryClient& operator=(const TlsMemoryClient&) = delete;

  // What the client has to send.
  std::string Take() {
    std::string s(BIO_ctrl_pending(out_), '\0');
    if (!s.empty()) BIO_read(out_, s.data(), static_cast<int>(s.size()));
    return s;
  }
  // What the server sent.
  void Give(std::string_view cipher) {
    if (!cipher.empty()) BIO_write(in_, cipher.data(), static_cast<int>(cipher.size()));
  }
  // True once the handshake is done.
  bool Handshake() { return SSL_do_handshake(ssl_) == 1; }
  // Encrypts `plain` into what Take returns next; false if it cannot.
  bool Write(std::string_view plain) {
    return plain.empty() || SSL_write(ssl_, plain.data(), static_cast<int>(plain.size())) > 0;
  }
  // The plaintext of every whole record given so far.
  std::string ReadAll() {
    std::string got;
    char buf[16384];
    int n;
    while ((n = SSL_read(ssl_, buf, sizeof buf)) > 0) got.append(buf, static_cast<size_t>(n));
    ERR_clear_error();  // "wants more" is no error of the thread's next user
    return got;
  }
  // Its close_notify, for Take.
  void Close() { SSL_shutdown(ssl_); }
  // The client's connection, for what the calls above do not cover.
  SSL* ssl() const { return ssl_; }

 private:
  SSL* ssl_ = nullptr;
  BIO* in_ = nullptr;   // from the server (owned by ssl_)
  BIO* out_ = nullptr;  // to the server (owned by ssl_)
};

}  // namespace delayq::testing

#endif  // DELAYQ_TESTS_TLS_MEMORY_CLIENT_H_
