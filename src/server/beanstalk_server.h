// The beanstalkd-protocol listener: accepts TCP connections with Asio and
// runs a BeanstalkHandler for each, on the loop thread of `io`.
//
// Per connection: the socket is watched by the server's SocketPoller
// (level-triggered); when it is readable, one recv goes straight into the
// handler's input buffer, every complete command runs and all replies go
// out in one send (the recvs, and then the sends, of all the connections
// one epoll_wait found ready are made in one batch: io_batch.h); while a reply waits for the socket
// to take it, or a reserve waits, input is not read further than one buffer (back-pressure).
// The connection itself: beanstalk_connection.h.
//
// With TLS (ctx.tls; docs/security.md, "TLS"), each connection starts at a
// FrontDoor (front_door.h) that looks at its first byte, then hands the
// socket to a BeanstalkConnection: as plaintext, unchanged, or with a TLS
// session (tls_session.h) that runs the handshake and the records over
// memory, its socket calls batched like the plaintext ones.
//
// Thread: construct, Start and Stop on the loop thread.
#ifndef DELAYQ_SERVER_BEANSTALK_SERVER_H_
#define DELAYQ_SERVER_BEANSTALK_SERVER_H_

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/status.h"
#include "server/listener.h"
#include "server/server_context.h"
#include "server/socket_poller.h"

namespace delayq::server {

class BeanstalkConnection;
struct FrontDoorHooks;

// What a plaintext client outside the trusted networks is sent, with TLS
// required (--tls-required), before it is closed.
inline constexpr std::string_view kTlsRequiredReply =
    "TLS_REQUIRED this server takes only TLS from your network\r\n";

class BeanstalkServer {
 public:
  BeanstalkServer(boost::asio::io_context& io, ServerContext& ctx);
  ~BeanstalkServer();

  // Binds and listens. Returns kUnavailable with the OS's reason on failure.
  Status Listen(const std::string& address, uint16_t port);
  uint16_t port() const;
  void Start();
  // Stops accepting; lets open connections finish the replies in flight,
  // then closes them.
  void Stop();
  // Closes every connection at once (at exit, after Stop had its chance).
  // The loop must then run its ready handlers (restart + poll) before the
  // backend goes away: they hold the last references to the connections.
  void CloseAll();
  size_t connections() const { return listener_.connections(); }
  // How the connections' recv and send calls are made (io_uring or not).
  const IoBatch& io_batch() const { return poller_.batch(); }

 private:
  friend class BeanstalkConnection;
  void Forget(ListenerConnection* c) { listener_.Forget(c); }
  // Runs c soon, with every connection woken before then (one handler, their
  // sends in one batch).
  void Wake(std::shared_ptr<BeanstalkConnection> c);

  ServerContext& ctx_;
  boost::asio::io_context& io_;
  // Input a connection reads ahead while its commands cannot run: one
  // largest command, or BeanstalkHandler::kMaxOutput if more.
  const size_t input_limit_;
  SocketPoller poller_;  // before the listener: connections use it to the end
  Listener<ListenerConnection> listener_;
  std::unique_ptr<FrontDoorHooks> doors_;  // with TLS (ctx.tls): what front doors hand over to
  std::vector<std::shared_ptr<BeanstalkConnection>> woken_;  // to run (Wake)
  bool run_woken_posted_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // for posted handlers
};

}  // namespace delayq::server

#endif  // DELAYQ_SERVER_BEANSTALK_SERVER_H_
