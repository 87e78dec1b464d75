#include "server/front_door.h"

#include <sys/socket.h>

#include <boost/asio/ssl/error.hpp>
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
      timer_(socket_.get_executor()) {
  boost::system::error_code ec;
  auto ep = socket_.remote_endpoint(ec);
  peer_ = ec ? std::string("?") : ep.address().to_string() + ":" + std::to_string(ep.port());
}

FrontDoor::~FrontDoor() = default;

void FrontDoor::Start() {
  if (hooks_.first_byte_timeout.count() > 0) Arm(hooks_.first_byte_timeout, nullptr);
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
  if (first == kTlsHandshakeByte) return Handshake();
  Plain();
}

void FrontDoor::Plain() {
  if (ctx_.tls_required && !ctx_.access.policy()->trusted().Contains(PeerAddress(socket_))) {
    ctx_.warn.Warn("tls_required", "protocol=" + hooks_.protocol + " peer=" + peer_ +
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

void FrontDoor::Handshake() {
  if (hooks_.tls_socket) {
    closed_ = true;
    auto next = hooks_.tls_socket(std::move(tls_), std::move(socket_));
    return hooks_.replace(this, std::move(next));
  }
  stream_ = std::make_unique<TlsStream>(std::move(socket_), *tls_);
  if (ctx_.tls_handshake_timeout.count() > 0)
    Arm(ctx_.tls_handshake_timeout, "tls_handshake_timeout");
  stream_->async_handshake(
      TlsStream::server, [self = shared_from_this()](const boost::system::error_code& ec) {
        if (self->closed_) return;
        if (ec) return self->Fail("tls_handshake_failed", ec.message());
        self->timer_.cancel();
        self->closed_ = true;
        auto next = self->hooks_.tls(std::move(self->tls_), std::move(self->stream_));
        self->hooks_.replace(self.get(), std::move(next));
      });
}

void FrontDoor::Fail(const char* cause, const std::string& reason) {
  ctx_.warn.Warn(cause,
                 "protocol=" + hooks_.protocol + " peer=" + peer_ + " error=\"" + reason + "\"");
  Close();
}

void FrontDoor::Arm(std::chrono::milliseconds after, const char* cause) {
  timer_.expires_after(after);
  timer_.async_wait([self = shared_from_this(), after, cause](const boost::system::error_code& ec) {
    if (ec || self->closed_) return;
    if (cause == nullptr) return self->Close();  // idle before its first byte
    self->Fail(cause, "no handshake within " + std::to_string(after.count()) + " ms");
  });
}

void FrontDoor::Close() {
  if (closed_) return;
  closed_ = true;
  timer_.cancel();
  boost::system::error_code ec;
  tcp::socket& s = stream_ != nullptr ? stream_->next_layer() : socket_;
  s.shutdown(tcp::socket::shutdown_both, ec);
  s.close(ec);
  hooks_.forget(this);
}

}  // namespace delayq::server
