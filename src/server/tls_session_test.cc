// TlsSession against an OpenSSL client in the same process, the bytes
// carried between them by hand: the handshake, records both ways, and what
// other OpenSSL users of the thread leave in its error queue.
#include "server/tls_session.h"

#include <gtest/gtest.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <memory>
#include <string>

#include "server/test_pki.h"
#include "server/tls.h"
#include "tls_memory_client.h"

namespace delayq::server {
namespace {

// A client context that verifies the server against the test's CA.
struct ClientContext {
  explicit ClientContext(const std::string& ca) : ctx(SSL_CTX_new(TLS_client_method())) {
    SSL_CTX_load_verify_locations(ctx, ca.c_str(), nullptr);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  }
  ~ClientContext() { SSL_CTX_free(ctx); }
  ClientContext(const ClientContext&) = delete;
  ClientContext& operator=(const ClientContext&) = delete;
  SSL_CTX* ctx;
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
    client_ctx_ = std::make_unique<ClientContext>(pki_.ca());
    client_ = std::make_unique<delayq::testing::TlsMemoryClient>(client_ctx_->ctx, "localhost");
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
    EXPECT_EQ(client_->ReadAll(), "");
  }

  // Sends `request` from the client; returns what the session decrypted.
  std::string Request(const std::string& request, TlsSession::State* state) {
    EXPECT_TRUE(client_->Write(request));
    ByteBuffer plain;
    *state = session_->Decrypt(client_->Take(), plain);
    return std::string(plain.view());
  }

  delayq::testing::TestPki pki_;
  std::unique_ptr<TlsSession> session_;
  std::unique_ptr<ClientContext> client_ctx_;  // outlives client_
  std::unique_ptr<delayq::testing::TlsMemoryClient> client_;
};

TEST_F(TlsSessionTest, RecordsBothWays) {
  TlsSession::State state;
  EXPECT_EQ(Request("put 0 0 60 2\r\nhi\r\n", &state), "put 0 0 60 2\r\nhi\r\n");
  EXPECT_EQ(state, TlsSession::State::kOk);
  std::string cipher;
  session_->Encrypt("INSERTED 1\r\n", cipher);
  client_->Give(cipher);
  EXPECT_EQ(client_->ReadAll(), "INSERTED 1\r\n");
}

// An error another OpenSSL user of the loop thread left behind (an HTTPS
// push, Redis over TLS) is not taken for this connection's: SSL_get_error
// reads the thread's queue, so the session empties it when not empty.
TEST_F(TlsSessionTest, ErrorsLeftByOthersAreNotThisConnections) {
  for (int round = 0; round < 3; ++round) {
    ERR_raise(ERR_LIB_SSL, SSL_R_BAD_PACKET_LENGTH);
    ERR_raise(ERR_LIB_SYS, 104);
    // A record cut short: SSL_read wants more, which is not a failure.
    ASSERT_TRUE(client_->Write("reserve\r\n"));
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
    EXPECT_EQ(client_->ReadAll(), "RESERVED 1 2\r\nhi\r\n");
  }
  ERR_clear_error();
}

// A bad record still fails, with OpenSSL's reason.
TEST_F(TlsSessionTest, ABadRecordFails) {
  ASSERT_TRUE(client_->Write("stats\r\n"));
  std::string record = client_->Take();
  record.back() ^= 1;  // the tag no longer matches
  ByteBuffer plain;
  EXPECT_EQ(session_->Decrypt(record, plain), TlsSession::State::kFailed);
  EXPECT_FALSE(session_->error().empty());
  EXPECT_EQ(ERR_peek_error(), 0u);  // nothing left for the thread's next user
}

}  // namespace
}  // namespace delayq::server
