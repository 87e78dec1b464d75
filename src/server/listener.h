// What the beanstalkd and the HTTP front-ends share: a listening socket and
// the set of open connections it accepted (each a ListenerConnection: the
// protocol's plaintext or TLS connection, or a FrontDoor that tells them
// apart, front_door.h). The server that owns the Listener builds each
// connection (`make`), and calls Replace when a front door hands over and
// Forget when a connection closes.
//
// Limits (docs/limits.md): while the listener holds ctx.max_connections
// connections, a new one is accepted, sent the server's `refusal` bytes (a
// one-line reply of its protocol) and closed. Out of file descriptors
// (EMFILE, ENFILE), the listener closes a spare descriptor it keeps for
// this, accepts the waiting connection, refuses it the same way and opens
// the spare again, so the loop neither spins on a listening socket it
// cannot accept from nor leaves clients waiting; without a spare (or on any
// other failure to accept) it pauses accepting for 100 ms. Each cause is
// logged through ctx.warn (at most once per 10 s: rate_limited_log.h).
//
// Thread: the loop thread.
#ifndef DELAYQ_SERVER_LISTENER_H_
#define DELAYQ_SERVER_LISTENER_H_

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "delayq/status.h"
#include "server/server_context.h"

namespace delayq::server {

// A connection's client address, for --trusted-networks (access.h); the
// unspecified address (trusted by no list short of ::/0) when the socket
// cannot tell.
inline boost::asio::ip::address PeerAddress(const boost::asio::ip::tcp::socket& socket) {
  boost::system::error_code ec;
  auto ep = socket.remote_endpoint(ec);
  return ec ? boost::asio::ip::address(boost::asio::ip::address_v6()) : ep.address();
}

// What a listener holds for each connection it accepted.
class ListenerConnection {
 public:
  virtual ~ListenerConnection() = default;
  virtual void Start() = 0;
  // Closes at once.
  virtual void CloseNow() = 0;
  // Finish what is in flight, then close.
  virtual void Shutdown() = 0;
  // The server's periodic look (HTTP: timeouts); nothing by default.
  virtual void Sweep(std::chrono::steady_clock::time_point) {}
};

// Sends `reply` and closes `fd`: the write side first, then what the
// client sent already is read and dropped (closing a socket with unread
// input resets the connection, which can lose the reply on its way).
inline void RefuseSocket(int fd, std::string_view reply) {
  if (fd < 0) return;
  (void)::send(fd, reply.data(), reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  ::shutdown(fd, SHUT_WR);
  char drop[4096];
  for (int i = 0; i < 16 && ::recv(fd, drop, sizeof drop, MSG_DONTWAIT) > 0; ++i) {
  }
  ::close(fd);
}

template <typename Conn>
class Listener {
 public:
  using Make = std::function<std::shared_ptr<Conn>(boost::asio::ip::tcp::socket)>;

  // `what` names the listener in errors ("" for the beanstalkd protocol,
  // "HTTP" for the HTTP API). `refusal` is what a connection refused for
  // want of room is sent before it is closed.
  Listener(boost::asio::io_context& io, std::string what, ServerContext& ctx, std::string refusal)
      : io_(io),
        what_(std::move(what)),
        ctx_(ctx),
        refusal_(std::move(refusal)),
        acceptor_(io),
        pause_(io) {}
  ~Listener() {
    if (spare_fd_ >= 0) ::close(spare_fd_);
  }

  // Binds and listens. kInvalidArgument for a bad address, kUnavailable
  // with the OS's reason when the port cannot be had.
  Status Listen(const std::string& address, uint16_t port) {
    namespace asio = boost::asio;
    using tcp = asio::ip::tcp;
    boost::system::error_code ec;
    auto addr = asio::ip::make_address(address, ec);
    std::string tag = what_.empty() ? "" : what_ + " ";
    if (ec)
      return Status::InvalidArgument("bad " + tag + "listen address '" + address +
                                     "': " + ec.message());
    tcp::endpoint ep(addr, port);
    acceptor_.open(ep.protocol(), ec);
    if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor_.bind(ep, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (!ec) acceptor_.non_blocking(true, ec);  // for Shed's accept
    if (ec) {
      std::string on = what_.empty() ? "on " : "for " + what_ + " on ";
      return Status::Unavailable("cannot listen " + on + address + ":" + std::to_string(port) +
                                 ": " + ec.message());
    }
    OpenSpare();
    return Status::Ok();
  }

  uint16_t port() const {
    boost::system::error_code ec;
    auto ep = acceptor_.local_endpoint(ec);
    return ec ? 0 : ep.port();
  }

  // Accepts connections until StopAccepting, starting each one `make` builds.
  void Accept(Make make) {
    make_ = std::move(make);
    AcceptNext();
  }

  // A connection closed. Keeps the object alive until its handlers have
  // run: it is dropped on the loop.
  void Forget(Conn* c) {
    auto it = conns_.find(c);
    if (it == conns_.end()) return;
    std::shared_ptr<Conn> keep = std::move(it->second);
    conns_.erase(it);
    boost::asio::post(io_, [keep] {});
  }

  // `old` handed its client over to `next` (a front door that found TLS
  // or plaintext): `next` takes its place and starts.
  void Replace(Conn* old, std::shared_ptr<Conn> next) {
    auto it = conns_.find(old);
    if (it == conns_.end()) return;
    std::shared_ptr<Conn> keep = std::move(it->second);
    conns_.erase(it);
    boost::asio::post(io_, [keep] {});
    Conn* p = next.get();
    conns_.emplace(p, std::move(next));
    p->Start();
    if (stopping_) p->Shutdown();
  }

  // Closes the acceptor; returns the open connections (closing them edits
  // the set, so a copy).
  std::vector<std::shared_ptr<Conn>> StopAccepting() {
    stopping_ = true;
    boost::system::error_code ec;
    acceptor_.close(ec);
    pause_.cancel();
    std::vector<std::shared_ptr<Conn>> all;
    for (auto& [p, c] : conns_) all.push_back(c);
    return all;
  }

  bool stopping() const { return stopping_; }
  size_t connections() const { return conns_.size(); }
  const std::unordered_map<Conn*, std::shared_ptr<Conn>>& conns() const { return conns_; }

 private:
  void AcceptNext() {
    acceptor_.async_accept([this](boost::system::error_code ec,
                                  boost::asio::ip::tcp::socket socket) {
      if (stopping_ || ec == boost::asio::error::operation_aborted) return;
      if (!ec) {
        if (ctx_.max_connections > 0 && conns_.size() >= ctx_.max_connections) {
          ctx_.warn.Warn("too_many_connections",
                         Protocol() + " max_connections=" + std::to_string(ctx_.max_connections) +
                             " note=\"new connections are refused\"");
          boost::system::error_code ignored;
          Refuse(socket.release(ignored));
        } else {
          std::shared_ptr<Conn> c = make_(std::move(socket));
          conns_.emplace(c.get(), c);
          c->Start();
        }
        return AcceptNext();
      }
      const int err = ec.category() == boost::system::system_category() ? ec.value() : 0;
      if (err == EMFILE || err == ENFILE) {
        // (Linux says so before it looks for a waiting connection, and Asio
        // tries an accept before it waits: there may be none.)
        switch (ShedOne()) {
          case Shed::kRefused:
            return AcceptNext();
          case Shed::kNoneWaiting:
            return AcceptWhenReadable();
          case Shed::kNoSpare:
            WarnOutOfFds();
            break;
        }
      } else if (err == ECONNABORTED || err == EPROTO || err == EPERM) {
        return AcceptNext();  // that client is gone, or a firewall said no: the next
      } else {
        ctx_.warn.Warn("accept_failed", Protocol() + " error=\"" + ec.message() +
                                            "\" note=\"accepting again in 100 ms\"");
      }
      PauseAccepting();
    });
  }

  // Out of file descriptors: the spare one makes room to accept the first
  // waiting connection and refuse it.
  enum class Shed { kRefused, kNoneWaiting, kNoSpare };
  Shed ShedOne() {
    if (spare_fd_ < 0) return Shed::kNoSpare;
    ::close(spare_fd_);
    spare_fd_ = -1;
    const int fd = ::accept4(acceptor_.native_handle(), nullptr, nullptr, SOCK_CLOEXEC);
    const int err = errno;
    if (fd >= 0) {
      WarnOutOfFds();
      Refuse(fd);
    }
    OpenSpare();
    if (spare_fd_ < 0) return Shed::kNoSpare;
    return fd >= 0                               ? Shed::kRefused
           : err == EAGAIN || err == EWOULDBLOCK ? Shed::kNoneWaiting
                                                 : Shed::kNoSpare;
  }

  void AcceptWhenReadable() {
    acceptor_.async_wait(boost::asio::ip::tcp::acceptor::wait_read,
                         [this](const boost::system::error_code& ec) {
                           if (ec || stopping_) return;
                           AcceptNext();
                         });
  }

  void PauseAccepting() {
    pause_.expires_after(std::chrono::milliseconds(100));
    pause_.async_wait([this](const boost::system::error_code& ec) {
      if (ec || stopping_) return;
      if (spare_fd_ < 0) OpenSpare();
      AcceptNext();
    });
  }

  void OpenSpare() { spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC); }

  void Refuse(int fd) { RefuseSocket(fd, refusal_); }

  std::string Protocol() const { return what_.empty() ? "protocol=beanstalkd" : "protocol=http"; }

  void WarnOutOfFds() {
    ctx_.warn.Warn("out_of_file_descriptors",
                   Protocol() + " note=\"new connections are refused; raise ulimit -n\"");
  }

  boost::asio::io_context& io_;
  std::string what_;
  ServerContext& ctx_;
  std::string refusal_;
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer pause_;  // accepting again after a failure
  int spare_fd_ = -1;                // given up when out of file descriptors (Shed)
  Make make_;
  std::unordered_map<Conn*, std::shared_ptr<Conn>> conns_;
  bool stopping_ = false;
};

}  // namespace delayq::server

#endif  // DELAYQ_SERVER_LISTENER_H_
