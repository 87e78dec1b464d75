// TlsSession against an OpenSSL client in the same process, the bytes
// carried between them by hand: the handshake, records both ways, and what
// other OpenSSL users of the thread leave in its error queue.
#include "server/tls_session.h"

#include <gtest/gtest.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <memory>
#include <string>
#include <string_view>

#include "server/test_pki.h"
#include "server/tls.h"
#include "tls12_client_records.h"
#include "tls_memory_client.h"

namespace delayq::server {
namespace {

// A client context that verifies the server against the test's CA; with
// `tls12`, TLS 1.2 with AES-128-GCM alone.
struct ClientContext {
  explicit ClientContext(const std::string& ca, bool tls12 = false)
      : ctx(SSL_CTX_new(TLS_client_method())) {
    SSL_CTX_load_verify_locations(ctx, ca.c_str(), nullptr);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    if (tls12) delayq::testing::Tls12ClientRecords::Restrict(ctx);
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
    client_ctx_ = std::make_unique<ClientContext>(pki_.ca(), tls12_);
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

  bool tls12_ = false;  // set before SetUp
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

class TlsSession12Test : public TlsSessionTest {
 protected:
  void SetUp() override {
    tls12_ = true;
    TlsSessionTest::SetUp();
  }
};

// Over TLS 1.2 OpenSSL answers every renegotiation attempt (a ClientHello
// after the handshake; renegotiation is off) with an alert. A client that
// sends them and never reads would have the server hold those alerts
// without bound: its session fails once they pass kMaxHeld.
TEST_F(TlsSession12Test, AClientThatMakesTlsTalkWithoutReadingIsCutOff) {
  delayq::testing::Tls12ClientRecords records(client_->ssl());
  ASSERT_TRUE(records.ok());
  // The records made here are the client's own: one of data reads back.
  ByteBuffer plain;
  ASSERT_EQ(session_->Decrypt(records.Seal(23, "stats\r\n"), plain), TlsSession::State::kOk)
      << session_->error();
  EXPECT_EQ(plain.view(), "stats\r\n");
  // An empty ClientHello: answered with a warning alert (a sealed record
  // of type 21), and the session goes on.
  const std::string hello("\x01\x00\x00\x00", 4);
  ASSERT_EQ(session_->Decrypt(records.Seal(22, hello), plain), TlsSession::State::kOk)
      << session_->error();
  std::string alert;
  session_->TakeOutput(alert);
  ASSERT_FALSE(alert.empty());
  EXPECT_EQ(alert[0], 21);
  ASSERT_EQ(session_->Decrypt(records.Seal(23, "stats\r\n"), plain), TlsSession::State::kOk);
  // Then many, 100 records a read, their alerts never taken.
  TlsSession::State state = TlsSession::State::kOk;
  size_t sent = 0;
  while (state == TlsSession::State::kOk && sent < 4 * TlsSession::kMaxHeld) {
    std::string burst;
    for (int i = 0; i < 100; ++i) burst += records.Seal(22, hello);
    sent += burst.size();
    state = session_->Decrypt(burst, plain);
  }
  EXPECT_EQ(state, TlsSession::State::kFailed) << sent << " bytes sent";
  EXPECT_NE(session_->error().find("does not read"), std::string::npos) << session_->error();
  EXPECT_LT(sent, 2 * TlsSession::kMaxHeld);
  std::string held;
  session_->TakeOutput(held);
  EXPECT_EQ(held.size(), 0u);  // cut short: nothing of it is sent
  EXPECT_EQ(session_->Decrypt(records.Seal(23, "stats\r\n"), plain), TlsSession::State::kFailed);
  EXPECT_EQ(ERR_peek_error(), 0u);
}

}  // namespace
}  // namespace delayq::server
