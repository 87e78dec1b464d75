// The first moments of a connection on a listener that serves TLS
// (docs/security.md, "TLS"): its first byte tells TLS (a ClientHello opens
// with kTlsHandshakeByte) from plaintext, on the same port. The byte is
// looked at with recv(MSG_PEEK) and left in the socket, so the plaintext
// connection that takes over reads the client's bytes as if it had
// accepted them itself. A TLS client goes to the protocol's connection
// with the listener's TLS context in force (FrontDoorHooks::tls_socket),
// which runs the handshake itself, within the handshake timeout, through
// a TlsSession (tls_session.h), so that its socket is read and written as
// a plaintext one is.
// With TLS required (--tls-required), a plaintext client outside the
// trusted networks is sent `tls_required_reply` and closed.
//
// The front door counts as a connection of its listener (limits) until it
// hands over (FrontDoorHooks::replace) or closes (forget).
//
// Thread: the loop thread.
#ifndef DELAYQ_SERVER_FRONT_DOOR_H_
#define DELAYQ_SERVER_FRONT_DOOR_H_

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "server/listener.h"
#include "server/server_context.h"

namespace delayq::server {

// What a front door hands its client to; owned by the server, outliving
// its front doors.
struct FrontDoorHooks {
  std::string protocol;  // "beanstalkd", "http": in the log
  std::string tls_required_reply;
  // Before the first byte, a client may wait this long (0: for ever).
  std::chrono::milliseconds first_byte_timeout{0};
  std::function<std::shared_ptr<ListenerConnection>(boost::asio::ip::tcp::socket)> plain;
  // A TLS client, before its handshake, with the TLS context to serve it.
  std::function<std::shared_ptr<ListenerConnection>(std::shared_ptr<boost::asio::ssl::context>,
                                                    boost::asio::ip::tcp::socket)>
      tls_socket;
  std::function<void(ListenerConnection*, std::shared_ptr<ListenerConnection>)> replace;
  std::function<void(ListenerConnection*)> forget;
};

class FrontDoor : public ListenerConnection, public std::enable_shared_from_this<FrontDoor> {
 public:
  // REQUIRES: ctx.tls is set.
  FrontDoor(ServerContext& ctx, const FrontDoorHooks& hooks, boost::asio::ip::tcp::socket socket);
  ~FrontDoor() override;

  void Start() override;
  void CloseNow() override { Close(); }
  void Shutdown() override { Close(); }  // nothing in flight yet

 private:
  void WaitFirstByte();
  void Peek();
  void Plain();
  void Tls();
  void Close();

  ServerContext& ctx_;
  const FrontDoorHooks& hooks_;
  boost::asio::ip::tcp::socket socket_;
  std::shared_ptr<boost::asio::ssl::context> tls_;  // in force when the client came
  boost::asio::steady_timer timer_;                 // the first byte's wait
  bool closed_ = false;
};

}  // namespace delayq::server

#endif  // DELAYQ_SERVER_FRONT_DOOR_H_
