// Test helper: TLS 1.2 records of a client's, sealed from its session's
// keys (AES-128-GCM suites; RFC 5246 and 5288): records of any type and
// content, authentic to the server, which OpenSSL's client would not send.
// For the TLS session's unit test and its fuzz target.
#ifndef DELAYQ_TESTS_TLS12_CLIENT_RECORDS_H_
#define DELAYQ_TESTS_TLS12_CLIENT_RECORDS_H_

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/ssl.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace delayq::testing {

class Tls12ClientRecords {
 public:
  // Makes the clients of `ctx` speak what Seal seals: TLS 1.2 with
  // AES-128-GCM (and an ECDSA server key, as the tests' certificates).
  static void Restrict(SSL_CTX* ctx) {
    SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_cipher_list(ctx, "ECDHE-ECDSA-AES128-GCM-SHA256");
  }

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

  // The client's next record: of `type` (an alert 21, a handshake 22,
  // data 23, ...), holding `plain` (at most 16 KiB), sealed.
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

}  // namespace delayq::testing

#endif  // DELAYQ_TESTS_TLS12_CLIENT_RECORDS_H_
