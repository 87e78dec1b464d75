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
//  - 3: authentic records of any type after a real TLS 1.2 handshake,
//    sealed from the client's keys (tests/tls12_client_records.h): each
//    record is a type byte (20 + its value % 4: change cipher spec, alert,
//    handshake, data), a length byte and that much content. What
//    OpenSSL's client would not send: renegotiation attempts, stray
//    handshake messages, alerts. Checks: the plaintext is the data
//    records' contents (all of them while the session is ok, a prefix of
//    them once it ended), and what TLS holds unsent stays within
//    TlsSession::kMaxHeld.
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
#include "tls12_client_records.h"
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

// The client's context for mode 3: TLS 1.2 with AES-128-GCM alone.
SSL_CTX* Tls12ClientContext() {
  static SSL_CTX* ctx = [] {
    SSL_CTX* c = SSL_CTX_new(TLS_client_method());
    FUZZ_CHECK(c != nullptr, "no client context");
    testing::Tls12ClientRecords::Restrict(c);
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
  const int mode = data[0] % 4;
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
  Client c(mode == 3 ? Tls12ClientContext() : ClientContext());
  Handshake(c, s, piece);
  if (mode == 3) {
    testing::Tls12ClientRecords records(c.ssl());
    FUZZ_CHECK(records.ok(), "no TLS 1.2 keys");
    std::string cipher, data_sent;
    for (std::string_view rest = input; rest.size() >= 2;) {
      const uint8_t type = static_cast<uint8_t>(20 + static_cast<uint8_t>(rest[0]) % 4);
      const size_t len = std::min<size_t>(static_cast<uint8_t>(rest[1]), rest.size() - 2);
      const std::string_view content = rest.substr(2, len);
      cipher += records.Seal(type, content);
      if (type == 23) data_sent += content;
      rest.remove_prefix(2 + len);
    }
    const TlsSession::State state = Feed(s, cipher, piece, plain);
    if (state == TlsSession::State::kOk) {
      FUZZ_CHECK(plain.view() == data_sent, "the data records' plaintext is not what came out");
    } else {
      FUZZ_CHECK(std::string_view(data_sent).starts_with(plain.view()),
                 "plaintext that no data record held");
    }
    std::string held;
    s.TakeOutput(held);
    FUZZ_CHECK(held.size() <= TlsSession::kMaxHeld, "TLS held more than kMaxHeld");
    return 0;
  }
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
