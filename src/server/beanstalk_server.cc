#include "server/beanstalk_server.h"

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

#include "server/beanstalk_handler.h"

namespace delayq::server {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {
constexpr size_t kReadChunk = 64 * 1024;
// Stop reading while this much output waits for a slow client.
constexpr size_t kMaxPendingOutput = 4 * 1024 * 1024;
}  // namespace

class BeanstalkConnection : public std::enable_shared_from_this<BeanstalkConnection> {
 public:
  BeanstalkConnection(BeanstalkServer& server, tcp::socket socket)
      : server_(server),
        socket_(std::move(socket)),
        handler_(server.ctx_, [this] { OnWake(); }) {
    boost::system::error_code ec;
    socket_.set_option(tcp::no_delay(true), ec);
  }

  void Start() { Read(); }

  // Finish what is in flight, then close.
  void Shutdown() {
    draining_ = true;
    if (!writing_ && handler_.output().empty()) Close();
  }

 private:
  void Read() {
    if (reading_ || closed_ || draining_) return;
    if (handler_.blocked() || handler_.want_close()) return;
    if (handler_.output().size() + pending_.size() > kMaxPendingOutput) return;
    reading_ = true;
    ByteBuffer& in = handler_.input();
    char* p = in.Prepare(kReadChunk);
    size_t room = in.writable();
    socket_.async_read_some(asio::buffer(p, room),
                            [self = shared_from_this()](boost::system::error_code ec, size_t n) {
                              self->OnRead(ec, n);
                            });
  }

  void OnRead(boost::system::error_code ec, size_t n) {
    reading_ = false;
    if (closed_) return;
    if (ec) return Close();
    handler_.input().Commit(n);
    handler_.Process();
    Flush();
    Read();
  }

  // The handler produced output outside of Process (a reserve was served).
  void OnWake() {
    if (closed_) return;
    asio::post(socket_.get_executor(), [self = shared_from_this()] {
      if (self->closed_) return;
      self->handler_.Process();
      self->Flush();
      self->Read();
    });
  }

  void Flush() {
    if (writing_) return;
    if (handler_.output().empty()) {
      if (handler_.want_close() || draining_) Close();
      return;
    }
    writing_ = true;
    pending_.clear();
    pending_.swap(handler_.output());
    asio::async_write(socket_, asio::buffer(pending_),
                      [self = shared_from_this()](boost::system::error_code ec, size_t) {
                        self->writing_ = false;
                        if (self->closed_) return;
                        if (ec) return self->Close();
                        if (self->pending_.capacity() > kMaxPendingOutput) {
                          std::string().swap(self->pending_);
                        }
                        self->Flush();
                        self->Read();
                      });
  }

  void Close() {
    if (closed_) return;
    closed_ = true;
    boost::system::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
    server_.Forget(this);
  }

  BeanstalkServer& server_;
  tcp::socket socket_;
  BeanstalkHandler handler_;
  std::string pending_;  // being written
  bool reading_ = false, writing_ = false, closed_ = false, draining_ = false;
};

BeanstalkServer::BeanstalkServer(asio::io_context& io, ServerContext& ctx)
    : io_(io), ctx_(ctx), acceptor_(io) {}

BeanstalkServer::~BeanstalkServer() = default;

Status BeanstalkServer::Listen(const std::string& address, uint16_t port) {
  boost::system::error_code ec;
  auto addr = asio::ip::make_address(address, ec);
  if (ec) return Status::InvalidArgument("bad listen address '" + address + "': " + ec.message());
  tcp::endpoint ep(addr, port);
  acceptor_.open(ep.protocol(), ec);
  if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_.bind(ep, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return Status::Unavailable("cannot listen on " + address + ":" + std::to_string(port) + ": " +
                               ec.message());
  }
  return Status::Ok();
}

uint16_t BeanstalkServer::port() const {
  boost::system::error_code ec;
  auto ep = acceptor_.local_endpoint(ec);
  return ec ? 0 : ep.port();
}

void BeanstalkServer::Start() { Accept(); }

void BeanstalkServer::Accept() {
  acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
    if (stopping_) return;
    if (!ec) {
      auto c = std::make_shared<BeanstalkConnection>(*this, std::move(socket));
      conns_.emplace(c.get(), c);
      c->Start();
    }
    // EMFILE and friends: keep accepting; the kernel queues meanwhile.
    if (ec != asio::error::operation_aborted) Accept();
  });
}

void BeanstalkServer::Forget(BeanstalkConnection* c) {
  // Keep the object alive until its handlers have run: drop it on the loop.
  auto it = conns_.find(c);
  if (it == conns_.end()) return;
  std::shared_ptr<BeanstalkConnection> keep = std::move(it->second);
  conns_.erase(it);
  asio::post(io_, [keep] {});
}

void BeanstalkServer::Stop() {
  stopping_ = true;
  boost::system::error_code ec;
  acceptor_.close(ec);
  std::vector<std::shared_ptr<BeanstalkConnection>> all;
  for (auto& [p, c] : conns_) all.push_back(c);
  for (auto& c : all) c->Shutdown();
}

}  // namespace delayq::server
