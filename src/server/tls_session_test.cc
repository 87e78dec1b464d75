// TlsSession against an OpenSSL client in the same process, the bytes
// carried between them by hand: the handshake, records both ways, and what
// other OpenSSL users of the thread leave in its error queue.
#include "server/tls_session.h"

#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <memory>
#include <string>

#include "server/test_pki.h"
#include "server/tls.h"

namespace delayq::server {
namespace {

// A TLS client over two memory BIOs.
class MemoryClient {
 public:
  explicit MemoryClient(const std::string& ca) {
    ctx_ = SSL_CTX_new(TLS_client_method());
    SSL_CTX_load_verify_locations(ctx_, ca.c_str(), nullptr);
    SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
    ssl_ = SSL_new(ctx_);
    in_ = BIO_new(BIO_s_mem());
    out_ = BIO_new(BIO_s_mem());
    BIO_set_mem_eof_return(in_, -1);
    SSL_set_bio(ssl_, in_, out_);
    SSL_set_tlsext_host_name(ssl_, "localhost");
    SSL_set_connect_state(ssl_);
  }
  ~MemoryClient() {
    SSL_free(ssl_);
    SSL_CTX_free(ctx_);
  }

  // What the client has to send.
  std::string Take() {
    std::string s(BIO_ctrl_pending(out_), '\0');
    if (!s.empty()) BIO_read(out_, s.data(), static_cast<int>(s.size()));
    return s;
  }
  void Give(const std::string& cipher) {
    BIO_write(in_, cipher.data(), static_cast<int>(cipher.size()));
  }
  bool Handshake() { return SSL_do_handshake(ssl_) == 1; }
  void Write(const std::string& plain) {
    SSL_write(ssl_, plain.data(), static_cast<int>(plain.size()));
  }
  std::string Read() {
    std::string all;
    char buf[4096];
    for (int n; (n = SSL_read(ssl_, buf, sizeof buf)) > 0;) all.append(buf, n);
    ERR_clear_error();
    return all;
  }

 private:
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  BIO* in_ = nullptr;
  BIO* out_ = nullptr;
};

class TlsSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    ASSERT_TRUE(pki_.Init(&error)) << error;
    ASSERT_TRUE(pki_.Issue("server", "DNS:localhost", &error)) << error;
    auto ctx = LoadTlsContext(
        {.cert = pki_.Path("server.crt"), .key = pki_.Path("server.key"), .client_ca = ""});
    ASSERT_TRUE(ctx.ok()) << ctx.status().message();
    session_ = std::make_unique<TlsSession>(*ctx);
    client_ = std::make_unique<MemoryClient>(pki_.ca());
    // The handshake, carried back and forth until the client is done.
    ByteBuffer plain;
    for (int i = 0; i < 10 && !client_->Handshake(); ++i) {
      ASSERT_EQ(session_->Decrypt(client_->Take(), plain), TlsSession::State::kOk)
          << session_->error();
      std::string reply;
      session_->TakeOutput(reply);
      client_->Give(reply);
    }
    ERR_clear_error();
    ASSERT_TRUE(client_->Handshake());
    // The client's Finished (and the server's tickets, read as the reply).
    ASSERT_EQ(session_->Decrypt(client_->Take(), plain), TlsSession::State::kOk);
    ASSERT_TRUE(session_->established());
    std::string tickets;
    session_->TakeOutput(tickets);
    client_->Give(tickets);
    EXPECT_EQ(client_->Read(), "");
  }

  // Sends `request` from the client; returns what the session decrypted.
  std::string Request(const std::string& request, TlsSession::State* state) {
    client_->Write(request);
    ByteBuffer plain;
    *state = session_->Decrypt(client_->Take(), plain);
    return std::string(plain.view());
  }

  delayq::testing::TestPki pki_;
  std::unique_ptr<TlsSession> session_;
  std::unique_ptr<MemoryClient> client_;
};

TEST_F(TlsSessionTest, RecordsBothWays) {
  TlsSession::State state;
  EXPECT_EQ(Request("put 0 0 60 2\r\nhi\r\n", &state), "put 0 0 60 2\r\nhi\r\n");
  EXPECT_EQ(state, TlsSession::State::kOk);
  std::string cipher;
  session_->Encrypt("INSERTED 1\r\n", cipher);
  client_->Give(cipher);
  EXPECT_EQ(client_->Read(), "INSERTED 1\r\n");
}

// An error another OpenSSL user of the loop thread left behind (an HTTPS
// push, Redis over TLS) is not taken for this connection's: SSL_get_error
// reads the thread's queue, so the session empties it when not empty.
TEST_F(TlsSessionTest, ErrorsLeftByOthersAreNotThisConnections) {
  for (int round = 0; round < 3; ++round) {
    ERR_raise(ERR_LIB_SSL, SSL_R_BAD_PACKET_LENGTH);
    ERR_raise(ERR_LIB_SYS, 104);
    // A record cut short: SSL_read wants more, which is not a failure.
    client_->Write("reserve\r\n");
    std::string record = client_->Take();
    ByteBuffer plain;
    EXPECT_EQ(session_->Decrypt(record.substr(0, 3), plain), TlsSession::State::kOk)
        << session_->error();
    ERR_raise(ERR_LIB_SSL, SSL_R_BAD_PACKET_LENGTH);
    EXPECT_EQ(session_->Decrypt(record.substr(3), plain), TlsSession::State::kOk)
        << session_->error();
    EXPECT_EQ(plain.view(), "reserve\r\n");
    ERR_raise(ERR_LIB_SSL, SSL_R_BAD_PACKET_LENGTH);
    std::string cipher;
    session_->Encrypt("RESERVED 1 2\r\nhi\r\n", cipher);
    client_->Give(cipher);
    EXPECT_EQ(client_->Read(), "RESERVED 1 2\r\nhi\r\n");
  }
  ERR_clear_error();
}

// A bad record still fails, with OpenSSL's reason.
TEST_F(TlsSessionTest, ABadRecordFails) {
  client_->Write("stats\r\n");
  std::string record = client_->Take();
  record.back() ^= 1;  // the tag no longer matches
  ByteBuffer plain;
  EXPECT_EQ(session_->Decrypt(record, plain), TlsSession::State::kFailed);
  EXPECT_FALSE(session_->error().empty());
  EXPECT_EQ(ERR_peek_error(), 0u);  // nothing left for the thread's next user
}

}  // namespace
}  // namespace delayq::server
