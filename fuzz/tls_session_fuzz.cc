// libFuzzer target for the server side of TLS over memory
// (server/tls_session.h), which the beanstalkd connections run. The first
// byte picks what the rest of the input is, the second how it is cut into
// the pieces Decrypt gets (1 to 64 bytes, as recv may bring them):
//  - 0: what a client sends first, before any handshake. Checks: no
//    plaintext comes out (fuzzed bytes never finish a handshake), and once
//    Decrypt says kFailed it says so for ever.
//  - 1: the plaintext of an in-memory OpenSSL client that made a real
//    handshake. Checks: the server decrypts exactly those bytes, whatever
//    the pieces; its reply (the same bytes, encrypted) decrypts to them at
//    the client; the client's close_notify gives kClosed.
//  - 2: forged records after a real handshake. Checks: no plaintext comes
//    out (nothing authenticates them).
#include <openssl/ssl.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "fuzz_tls_certificate.h"
#include "server/byte_buffer.h"
#include "server/tls.h"
#include "server/tls_session.h"
#include "tls_memory_client.h"

using namespace delayq;
using server::TlsSession;

namespace {

using Client = testing::TlsMemoryClient;

// The client's context, verifying nothing (the certificate is the
// fuzzer's own).
SSL_CTX* ClientContext() {
  static SSL_CTX* ctx = [] {
    SSL_CTX* c = SSL_CTX_new(TLS_client_method());
    FUZZ_CHECK(c != nullptr, "no client context");
    return c;
  }();
  return ctx;
}

// Feeds `cipher` to the server in pieces of `piece` bytes; the last state.
TlsSession::State Feed(TlsSession& s, std::string_view cipher, size_t piece,
                       server::ByteBuffer& plain) {
  TlsSession::State state = TlsSession::State::kOk;
  while (!cipher.empty()) {
    const size_t n = std::min(piece, cipher.size());
    const TlsSession::State next = s.Decrypt(cipher.substr(0, n), plain);
    if (state == TlsSession::State::kFailed)
      FUZZ_CHECK(next == TlsSession::State::kFailed, "a failed session went on");
    state = next;
    cipher.remove_prefix(n);
  }
  return state;
}

// A real handshake between `c` and `s`. Pieces of `piece` bytes.
void Handshake(Client& c, TlsSession& s, size_t piece) {
  server::ByteBuffer plain;
  for (int round = 0; round < 8 && !(s.established() && c.Handshake()); ++round) {
    c.Handshake();
    FUZZ_CHECK(Feed(s, c.Take(), piece, plain) == TlsSession::State::kOk, s.error().c_str());
    std::string back;
    s.TakeOutput(back);
    c.Give(back);
  }
  FUZZ_CHECK(s.established(), "no handshake");
  FUZZ_CHECK(plain.empty(), "plaintext from a handshake");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::shared_ptr<boost::asio::ssl::context> tls = [] {
    auto t = server::LoadTlsContext(MakeCertificate());
    FUZZ_CHECK(t.ok(), "cannot load the certificate");
    return std::move(t).value();
  }();
  if (size < 2) return 0;
  const int mode = data[0] % 3;
  const size_t piece = 1 + data[1] % 64;
  const std::string_view input(reinterpret_cast<const char*>(data) + 2, size - 2);

  TlsSession s(tls);
  FUZZ_CHECK(s.ok(), "no session");
  server::ByteBuffer plain;
  if (mode == 0) {
    Feed(s, input, piece, plain);
    FUZZ_CHECK(!s.established() && plain.empty(), "fuzzed bytes made a session");
    std::string out;
    s.TakeOutput(out);
    return 0;
  }
  Client c(ClientContext());
  Handshake(c, s, piece);
  if (mode == 2) {
    Feed(s, input, piece, plain);
    FUZZ_CHECK(plain.empty(), "a forged record was taken");
    return 0;
  }
  FUZZ_CHECK(c.Write(input), "the client cannot write");
  FUZZ_CHECK(Feed(s, c.Take(), piece, plain) == TlsSession::State::kOk, s.error().c_str());
  FUZZ_CHECK(plain.view() == input, "the server decrypted other bytes");
  std::string reply;
  s.Encrypt(plain.view(), reply);
  c.Give(reply);
  FUZZ_CHECK(c.ReadAll() == input, "the client decrypted other bytes");
  c.Close();
  plain.Consume(plain.size());
  FUZZ_CHECK(Feed(s, c.Take(), piece, plain) == TlsSession::State::kClosed,
             "the close_notify was not seen");
  FUZZ_CHECK(plain.empty(), "plaintext with the close_notify");
  return 0;
}
