// The HTTP/1.1 listener: accepts TCP connections and serves the JSON API
// (HttpApi) on them, on the loop thread of `io`, beside the beanstalkd
// listener and over the same backend.
//
// Per connection: requests are parsed with Beast's parser from what each
// read brought; they run one at a time, in order, and their replies go out
// in the same order, all replies ready after one read in one write (so
// pipelined requests are safe and cheap). A request whose reply is not
// ready at once (a long-poll reserve, a change waiting to be durable) holds
// back the ones behind it. Keep-alive by default (HTTP/1.1), `Connection:
// close` honoured. A header larger than max_header_bytes is answered 431, a
// body larger than max_body_bytes 413, a header or body that takes longer
// than its timeout to arrive 408, a transfer or content coding other than
// chunked 501 / 415, anything else Beast refuses (or throws on) 400: each
// then closes the connection. A connection with nothing in flight for
// idle_timeout is closed; so is one whose client hung up while its request
// waits (a long-poll), even when its input is no longer read.
//
// With TLS (ctx.tls; docs/security.md, "TLS"), each connection starts at a
// FrontDoor (front_door.h) that tells TLS from plaintext by the first byte:
// the same connection then serves HTTPS, its bytes passed through a
// TlsSession (tls_session.h) on their way in and out, or plaintext exactly
// as without TLS.
//
// Beast stays out of this header: it is heavy, and only http_server.cc
// needs it.
//
// Thread: construct, Start, Stop and CloseAll on the loop thread.
#ifndef DELAYQ_SERVER_HTTP_SERVER_H_
#define DELAYQ_SERVER_HTTP_SERVER_H_

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "delayq/status.h"
#include "server/http_api.h"
#include "server/listener.h"
#include "server/server_context.h"

namespace delayq::server {

class HttpConnection;
struct FrontDoorHooks;

struct HttpServerOptions {
  size_t max_header_bytes = 16 * 1024;
  size_t max_body_bytes = 8 * 1024 * 1024;
  // 0: never close idle connections.
  std::chrono::milliseconds idle_timeout{60'000};
  // A request's header must arrive whole within header_timeout of its
  // first byte, and its body within body_timeout of the header's end, or
  // the client is answered 408 and the connection closed (a client that
  // trickles bytes keeps no connection). 0: no limit.
  std::chrono::milliseconds header_timeout{10'000};
  std::chrono::milliseconds body_timeout{60'000};
  HttpApiOptions api;
};

class HttpServer {
 public:
  HttpServer(boost::asio::io_context& io, ServerContext& ctx, HttpServerOptions options = {});
  ~HttpServer();

  // Binds and listens. Returns kInvalidArgument for a bad address,
  // kUnavailable with the OS's reason when the port cannot be had.
  Status Listen(const std::string& address, uint16_t port);
  uint16_t port() const;
  void Start();
  // Stops accepting; answers waiting long-polls now (as timed out); lets
  // replies in flight leave; closes every connection once it is idle.
  void Stop();
  // Closes every connection at once (at exit, after Stop had its chance).
  void CloseAll();
  size_t connections() const { return listener_.connections(); }
  HttpApi& api() { return *api_; }

 private:
  friend class HttpConnection;
  void Forget(ListenerConnection* c) { listener_.Forget(c); }
  void ArmSweep();
  // Closes the acceptor and stops the idle sweep; returns the open
  // connections.
  std::vector<std::shared_ptr<ListenerConnection>> StopAccepting();

  ServerContext& ctx_;
  HttpServerOptions options_;
  std::unique_ptr<HttpApi> api_;
  Listener<ListenerConnection> listener_;
  std::unique_ptr<FrontDoorHooks> doors_;  // with TLS (ctx.tls): what front doors hand over to
  boost::asio::steady_timer sweep_;
};

}  // namespace delayq::server

#endif  // DELAYQ_SERVER_HTTP_SERVER_H_
