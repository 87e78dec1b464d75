#include "server/front_door.h"

#include <sys/socket.h>

#include <cerrno>

#include "server/tls.h"

namespace delayq::server {

namespace asio = boost::asio;
using asio::ip::tcp;

FrontDoor::FrontDoor(ServerContext& ctx, const FrontDoorHooks& hooks, tcp::socket socket)
    : ctx_(ctx),
      hooks_(hooks),
      socket_(std::move(socket)),
      tls_(ctx.tls),
      timer_(socket_.get_executor()) {}

FrontDoor::~FrontDoor() = default;

void FrontDoor::Start() {
  if (hooks_.first_byte_timeout.count() > 0) {
    // Idle before its first byte for too long: closed.
    timer_.expires_after(hooks_.first_byte_timeout);
    timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      if (!ec && !self->closed_) self->Close();
    });
  }
  WaitFirstByte();
}

void FrontDoor::WaitFirstByte() {
  socket_.async_wait(tcp::socket::wait_read,
                     [self = shared_from_this()](const boost::system::error_code& ec) {
                       if (self->closed_) return;
                       if (ec) return self->Close();
                       self->Peek();
                     });
}

void FrontDoor::Peek() {
  unsigned char first = 0;
  const ssize_t n = ::recv(socket_.native_handle(), &first, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return WaitFirstByte();
  if (n <= 0) return Close();  // gone before a byte
  timer_.cancel();
  if (first == kTlsHandshakeByte) return Tls();
  Plain();
}

void FrontDoor::Plain() {
  if (ctx_.tls_required && !ctx_.access.policy()->trusted().Contains(PeerAddress(socket_))) {
    boost::system::error_code ec;
    auto ep = socket_.remote_endpoint(ec);
    const std::string peer =
        ec ? std::string("?") : ep.address().to_string() + ":" + std::to_string(ep.port());
    ctx_.warn.Warn("tls_required", "protocol=" + hooks_.protocol + " peer=" + peer +
                                       " note=\"plaintext from an untrusted network is refused\"");
    closed_ = true;
    boost::system::error_code ignored;
    RefuseSocket(socket_.release(ignored), hooks_.tls_required_reply);
    return hooks_.forget(this);
  }
  closed_ = true;
  auto next = hooks_.plain(std::move(socket_));
  hooks_.replace(this, std::move(next));
}

void FrontDoor::Tls() {
  closed_ = true;
  auto next = hooks_.tls_socket(std::move(tls_), std::move(socket_));
  hooks_.replace(this, std::move(next));
}

void FrontDoor::Close() {
  if (closed_) return;
  closed_ = true;
  timer_.cancel();
  boost::system::error_code ec;
  socket_.shutdown(tcp::socket::shutdown_both, ec);
  socket_.close(ec);
  hooks_.forget(this);
}

}  // namespace delayq::server
