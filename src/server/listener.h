// What the beanstalkd and the HTTP front-ends share: a listening socket and
// the set of open connections it accepted. `Conn` is a connection class
// with Start(); the server that owns the Listener builds each connection
// (`make`) and calls Forget when it closes.
//
// Thread: the loop thread.
#ifndef DELAYQ_SERVER_LISTENER_H_
#define DELAYQ_SERVER_LISTENER_H_

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "delayq/status.h"

namespace delayq::server {

template <typename Conn>
class Listener {
 public:
  using Make = std::function<std::shared_ptr<Conn>(boost::asio::ip::tcp::socket)>;

  // `what` names the listener in errors ("" for the beanstalkd protocol,
  // "HTTP" for the HTTP API).
  Listener(boost::asio::io_context& io, std::string what)
      : io_(io), what_(std::move(what)), acceptor_(io) {}

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
    if (ec) {
      std::string on = what_.empty() ? "on " : "for " + what_ + " on ";
      return Status::Unavailable("cannot listen " + on + address + ":" + std::to_string(port) +
                                 ": " + ec.message());
    }
    return Status::Ok();
  }

  uint16_t port() const {
    boost::system::error_code ec;
    auto ep = acceptor_.local_endpoint(ec);
    return ec ? 0 : ep.port();
  }

  // Accepts connections until StopAccepting, starting each one `make` builds.
  void Accept(Make make) {
    acceptor_.async_accept([this, make = std::move(make)](boost::system::error_code ec,
                                                          boost::asio::ip::tcp::socket socket) {
      if (stopping_) return;
      if (!ec) {
        std::shared_ptr<Conn> c = make(std::move(socket));
        conns_.emplace(c.get(), c);
        c->Start();
      }
      // EMFILE and friends: keep accepting; the kernel queues meanwhile.
      if (ec != boost::asio::error::operation_aborted) Accept(std::move(make));
    });
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

  // Closes the acceptor; returns the open connections (closing them edits
  // the set, so a copy).
  std::vector<std::shared_ptr<Conn>> StopAccepting() {
    stopping_ = true;
    boost::system::error_code ec;
    acceptor_.close(ec);
    std::vector<std::shared_ptr<Conn>> all;
    for (auto& [p, c] : conns_) all.push_back(c);
    return all;
  }

  bool stopping() const { return stopping_; }
  size_t connections() const { return conns_.size(); }
  const std::unordered_map<Conn*, std::shared_ptr<Conn>>& conns() const { return conns_; }

 private:
  boost::asio::io_context& io_;
  std::string what_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::unordered_map<Conn*, std::shared_ptr<Conn>> conns_;
  bool stopping_ = false;
};

}  // namespace delayq::server

#endif  // DELAYQ_SERVER_LISTENER_H_
