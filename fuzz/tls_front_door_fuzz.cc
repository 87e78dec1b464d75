// libFuzzer target for the TLS front door (server/front_door.h): the input
// is what a client sends first on a connection of a listener that serves
// TLS, over an in-memory transport (a socketpair). The bytes are written,
// the client's side is shut for writing, and the loop runs until the front
// door is done with the connection. Checks:
//  - it ends: handed to the plaintext connection (first byte not 0x16), to
//    the TLS connection (0x16: the handshake is the connection's, fuzzed
//    in tls_session_fuzz.cc), or closed (no byte);
//  - it ends once: exactly one hand-over or one close;
//  - plaintext is refused (and never handed over) when the input's first
//    byte asks for --tls-required (the peer of a socketpair is trusted by no
//    network), and then the client reads the refusal.
// The server's certificate is made once, in memory, and written to a
// temporary directory for LoadTlsContext.
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "backend/local_backend.h"
#include "fuzz_check.h"
#include "fuzz_tls_certificate.h"
#include "http_fuzz_common.h"
#include "server/front_door.h"
#include "server/tls.h"

using namespace delayq;
namespace asio = boost::asio;

namespace {

// The connection a front door hands over to (either kind): it only counts.
class Plain : public server::ListenerConnection {
 public:
  void Start() override {}
  void CloseNow() override {}
  void Shutdown() override {}
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const server::TlsFiles files = MakeCertificate();
  static const std::shared_ptr<asio::ssl::context> tls = [] {
    auto t = server::LoadTlsContext(files);
    FUZZ_CHECK(t.ok(), "cannot load the certificate");
    return std::move(t).value();
  }();

  asio::io_context io;
  ManualClock clock;
  backend::LocalBackend::Options o;
  backend::LocalBackend b(io, o, clock);
  server::ServerContext ctx(b);
  ctx.tls = tls;
  // An input that opens with 'R' asks for --tls-required (and is plaintext).
  ctx.tls_required = size > 0 && data[0] == 'R';

  int plain = 0, tls_handed = 0, ended = 0;
  server::FrontDoorHooks hooks;
  hooks.protocol = "fuzz";
  hooks.tls_required_reply = "TLS_REQUIRED\r\n";
  hooks.plain = [&](asio::ip::tcp::socket) -> std::shared_ptr<server::ListenerConnection> {
    ++plain;
    return std::make_shared<Plain>();
  };
  hooks.tls_socket = [&](std::shared_ptr<asio::ssl::context> context,
                         asio::ip::tcp::socket) -> std::shared_ptr<server::ListenerConnection> {
    FUZZ_CHECK(context == tls, "the TLS connection gets the listener's context");
    ++tls_handed;
    return std::make_shared<Plain>();
  };
  std::shared_ptr<server::ListenerConnection> door;
  hooks.replace = [&](server::ListenerConnection*, std::shared_ptr<server::ListenerConnection>) {
    ++ended;
  };
  hooks.forget = [&](server::ListenerConnection*) { ++ended; };

  int fds[2];
  FUZZ_CHECK(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0, "no socketpair");
  asio::ip::tcp::socket socket(io);
  boost::system::error_code ec;
  socket.assign(asio::ip::tcp::v4(), fds[0], ec);
  FUZZ_CHECK(!ec, "cannot assign the socket");
  // The socketpair holds far more than a fuzz input: one write, then the end.
  size_t sent = 0;
  while (sent < size) {
    ssize_t n = ::send(fds[1], data + sent, size - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  ::shutdown(fds[1], SHUT_WR);

  door = std::make_shared<server::FrontDoor>(ctx, hooks, std::move(socket));
  door->Start();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (ended == 0 && std::chrono::steady_clock::now() < deadline)
    io.run_for(std::chrono::milliseconds(50));
  FUZZ_CHECK(ended == 1, "the front door did not end the connection, or ended it twice");
  const bool first_tls = size > 0 && data[0] == server::kTlsHandshakeByte;
  FUZZ_CHECK(tls_handed == (first_tls ? 1 : 0), "TLS handed over wrongly");
  if (size == 0 || first_tls) FUZZ_CHECK(plain == 0, "no plaintext to hand over");
  if (size > 0 && !first_tls) {
    FUZZ_CHECK(plain == (ctx.tls_required ? 0 : 1), "plaintext handed over wrongly");
    if (ctx.tls_required) {
      char reply[32] = {};
      ssize_t n = ::recv(fds[1], reply, sizeof reply, MSG_DONTWAIT);
      FUZZ_CHECK(n == 14 && std::string(reply, 14) == "TLS_REQUIRED\r\n", "no refusal");
    }
  }
  door.reset();
  io.restart();
  io.poll();
  ::close(fds[1]);
  return 0;
}
