// TlsSession against an OpenSSL client in the same process, the bytes
// carried between them by hand: the handshake, records both ways, and what
// other OpenSSL users of the thread leave in its error queue.
#include "server/tls_session.h"

#include <gtest/gtest.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/ssl.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "server/test_pki.h"
#include "server/tls.h"
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
    if (tls12) {
      SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION);
      SSL_CTX_set_cipher_list(ctx, "ECDHE-ECDSA-AES128-GCM-SHA256");
    }
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

// TLS 1.2 records of the client's, sealed here from the session's keys
// (AES-128-GCM, RFC 5246 and 5288): records of any type and content, which
// OpenSSL's client would not send.
class Tls12ClientRecords {
 public:
  // From `client`'s session once its handshake is done: its Finished was
  // its first sealed record, so the next is number 1.
  explicit Tls12ClientRecords(SSL* client) {
    unsigned char master[SSL_MAX_MASTER_KEY_LENGTH];
    const size_t master_len =
        SSL_SESSION_get_master_key(SSL_get_session(client), master, sizeof master);
    std::string seed = "key expansion";
    unsigned char random[SSL3_RANDOM_SIZE];
    SSL_get_server_random(client, random, sizeof random);
    seed.append(reinterpret_cast<char*>(random), sizeof random);
    SSL_get_client_random(client, random, sizeof random);
    seed.append(reinterpret_cast<char*>(random), sizeof random);
    EVP_KDF* kdf = EVP_KDF_fetch(nullptr, "TLS1-PRF", nullptr);
    EVP_KDF_CTX* kctx = EVP_KDF_CTX_new(kdf);
    char digest[] = "SHA256";
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest, 0),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SECRET, master, master_len),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SEED, seed.data(), seed.size()),
        OSSL_PARAM_construct_end()};
    // The key block: the client's key, the server's, the client's IV, the
    // server's.
    unsigned char block[40];
    ok_ = master_len > 0 && EVP_KDF_derive(kctx, block, sizeof block, params) == 1;
    EVP_KDF_CTX_free(kctx);
    EVP_KDF_free(kdf);
    std::memcpy(key_, block, sizeof key_);
    std::memcpy(iv_, block + 32, sizeof iv_);
  }
  bool ok() const { return ok_; }

  std::string Seal(uint8_t type, std::string_view plain) {
    unsigned char nonce[12], aad[13];
    std::memcpy(nonce, iv_, 4);
    for (int i = 0; i < 8; ++i)
      nonce[4 + i] = aad[i] = static_cast<unsigned char>(seq_ >> (56 - 8 * i));
    aad[8] = type;
    aad[9] = aad[10] = 3;
    aad[11] = static_cast<unsigned char>(plain.size() >> 8);
    aad[12] = static_cast<unsigned char>(plain.size());
    std::string sealed(plain.size(), '\0');
    unsigned char tag[16];
    int n = 0;
    EVP_CIPHER_CTX* c = EVP_CIPHER_CTX_new();
    EVP_EncryptInit_ex(c, EVP_aes_128_gcm(), nullptr, key_, nonce);
    EVP_EncryptUpdate(c, nullptr, &n, aad, sizeof aad);
    EVP_EncryptUpdate(c, reinterpret_cast<unsigned char*>(sealed.data()), &n,
                      reinterpret_cast<const unsigned char*>(plain.data()),
                      static_cast<int>(plain.size()));
    EVP_EncryptFinal_ex(c, reinterpret_cast<unsigned char*>(sealed.data()) + n, &n);
    EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, sizeof tag, tag);
    EVP_CIPHER_CTX_free(c);
    const size_t len = 8 + sealed.size() + sizeof tag;
    std::string record{static_cast<char>(type), 3, 3, static_cast<char>(len >> 8),
                       static_cast<char>(len & 0xff)};
    record.append(reinterpret_cast<char*>(nonce) + 4, 8);  // the explicit nonce
    record += sealed;
    record.append(reinterpret_cast<char*>(tag), sizeof tag);
    ++seq_;
    return record;
  }

 private:
  bool ok_ = false;
  unsigned char key_[16] = {};
  unsigned char iv_[4] = {};
  uint64_t seq_ = 1;
};

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
  Tls12ClientRecords records(client_->ssl());
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
