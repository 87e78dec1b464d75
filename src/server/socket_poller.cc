#include "server/socket_poller.h"

#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace delayq::server {
namespace {
constexpr int kBatch = 256;  // sockets taken from the set per epoll_wait

int NewEpoll() {
  int fd = epoll_create1(EPOLL_CLOEXEC);
  if (fd < 0) throw std::runtime_error(std::string("epoll_create1: ") + std::strerror(errno));
  return fd;
}

Status Control(int epfd, int op, int fd, uint32_t events, SocketWatcher* w) {
  epoll_event ev{};
  ev.events = events;
  ev.data.ptr = w;
  if (epoll_ctl(epfd, op, fd, &ev) == 0) return Status::Ok();
  return Status::Internal(std::string("epoll_ctl: ") + std::strerror(errno));
}
}  // namespace

SocketPoller::SocketPoller(boost::asio::io_context& io)
    : epoll_(io, NewEpoll()), events_(new epoll_event[kBatch]) {}

SocketPoller::~SocketPoller() = default;

Status SocketPoller::Add(int fd, uint32_t events, SocketWatcher* w) {
  Status st = Control(epoll_.native_handle(), EPOLL_CTL_ADD, fd, events, w);
  if (st.ok()) Wait();
  return st;
}

Status SocketPoller::Modify(int fd, uint32_t events, SocketWatcher* w) {
  return Control(epoll_.native_handle(), EPOLL_CTL_MOD, fd, events, w);
}

void SocketPoller::Remove(int fd) {
  epoll_event ev{};  // a non-null pointer for kernels before 2.6.9
  epoll_ctl(epoll_.native_handle(), EPOLL_CTL_DEL, fd, &ev);
}

void SocketPoller::Stop() {
  stopped_ = true;
  boost::system::error_code ec;
  epoll_.cancel(ec);
}

void SocketPoller::Wait() {
  if (waiting_ || stopped_) return;
  waiting_ = true;
  epoll_.async_wait(
      boost::asio::posix::stream_descriptor::wait_read,
      [this, alive = std::weak_ptr<bool>(alive_)](const boost::system::error_code& ec) {
        if (alive.expired()) return;  // the poller is gone
        waiting_ = false;
        if (ec || stopped_) return;
        Dispatch();
        Wait();
      });
}

void SocketPoller::Dispatch() {
  epoll_event* evs = events_.get();
  int n = epoll_wait(epoll_.native_handle(), evs, kBatch, 0);
  for (int i = 0; i < n; ++i)
    static_cast<SocketWatcher*>(evs[i].data.ptr)->OnSocketEvents(evs[i].events);
}

}  // namespace delayq::server
