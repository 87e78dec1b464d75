#include "server/beanstalk_server.h"

#include <algorithm>
#include <boost/asio/post.hpp>

#include "server/beanstalk_connection.h"
#include "server/beanstalk_handler.h"

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
  listener_.Accept([this](tcp::socket socket) {
    return std::make_shared<BeanstalkConnection>(*this, std::move(socket));
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
