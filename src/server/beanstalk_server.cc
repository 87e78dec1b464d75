#include "server/beanstalk_server.h"

#include <algorithm>
#include <boost/asio/post.hpp>

#include "server/beanstalk_connection.h"
#include "server/beanstalk_handler.h"
#include "server/front_door.h"

namespace delayq::server {

namespace asio = boost::asio;
using asio::ip::tcp;

BeanstalkServer::BeanstalkServer(asio::io_context& io, ServerContext& ctx)
    : ctx_(ctx),
      io_(io),
      input_limit_(std::max(ctx.max_job_size + kMaxLineLength + 2, BeanstalkHandler::kMaxOutput)),
      poller_(io, ctx.io_uring),
      listener_(io, "", ctx, std::string(kServerBusyReply)) {}

BeanstalkServer::~BeanstalkServer() = default;

Status BeanstalkServer::Listen(const std::string& address, uint16_t port) {
  return listener_.Listen(address, port);
}

uint16_t BeanstalkServer::port() const { return listener_.port(); }

void BeanstalkServer::Start() {
  if (ctx_.tls == nullptr) {
    listener_.Accept([this](tcp::socket socket) -> std::shared_ptr<ListenerConnection> {
      return std::make_shared<BeanstalkConnection>(*this, std::move(socket));
    });
    return;
  }
  // TLS and plaintext on one port: a front door tells them apart.
  doors_ = std::make_unique<FrontDoorHooks>();
  doors_->protocol = "beanstalkd";
  doors_->tls_required_reply = std::string(kTlsRequiredReply);
  doors_->plain = [this](tcp::socket socket) -> std::shared_ptr<ListenerConnection> {
    return std::make_shared<BeanstalkConnection>(*this, std::move(socket));
  };
  doors_->tls_socket = [this](std::shared_ptr<asio::ssl::context> tls,
                              tcp::socket socket) -> std::shared_ptr<ListenerConnection> {
    return std::make_shared<BeanstalkConnection>(*this, std::move(socket), std::move(tls));
  };
  doors_->replace = [this](ListenerConnection* old, std::shared_ptr<ListenerConnection> next) {
    listener_.Replace(old, std::move(next));
  };
  doors_->forget = [this](ListenerConnection* c) { listener_.Forget(c); };
  listener_.Accept([this](tcp::socket socket) -> std::shared_ptr<ListenerConnection> {
    return std::make_shared<FrontDoor>(ctx_, *doors_, std::move(socket));
  });
}

void BeanstalkServer::Wake(std::shared_ptr<BeanstalkConnection> c) {
  woken_.push_back(std::move(c));
  if (run_woken_posted_) return;
  run_woken_posted_ = true;
  asio::post(io_, [this, alive = std::weak_ptr<bool>(alive_)] {
    if (alive.expired()) return;  // the server is gone
    run_woken_posted_ = false;
    std::vector<std::shared_ptr<BeanstalkConnection>> woken;
    woken.swap(woken_);
    poller_.Batched([&woken] {
      for (auto& c : woken) c->Woken();
    });
  });
}

void BeanstalkServer::CloseAll() {
  for (auto& c : listener_.StopAccepting()) c->CloseNow();
  poller_.Stop();
}

void BeanstalkServer::Stop() {
  for (auto& c : listener_.StopAccepting()) c->Shutdown();
}

}  // namespace delayq::server
