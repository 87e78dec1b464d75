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

SocketPoller::SocketPoller(boost::asio::io_context& io, bool use_uring)
    : epoll_(io, NewEpoll()), events_(new epoll_event[kBatch]), batch_(use_uring) {}

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
  batch_.Cancel(fd);
}

// The tag of a queued call: the watcher's address, its lowest bit set for
// a send (watchers are aligned to more than 1 byte).
bool SocketPoller::Recv(int fd, char* buf, size_t len, SocketWatcher* w, ssize_t* result) {
  if (!dispatching_) {
    *result = RecvNow(fd, buf, len);
    return true;
  }
  batch_.Recv(fd, buf, len, reinterpret_cast<uintptr_t>(w));
  return false;
}

bool SocketPoller::Send(int fd, const char* buf, size_t len, SocketWatcher* w, ssize_t* result) {
  if (!dispatching_) {
    *result = SendNow(fd, buf, len);
    return true;
  }
  batch_.Send(fd, buf, len, reinterpret_cast<uintptr_t>(w) | 1u);
  return false;
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
  if (n <= 0) return;
  Batched([&] {
    for (int i = 0; i < n; ++i)
      static_cast<SocketWatcher*>(evs[i].data.ptr)->OnSocketEvents(evs[i].events);
  });
}

// The recvs the watchers queued, then the sends their commands' replies
// queued, and so on until nothing is queued. A watcher closed in the
// meantime had its calls dropped (Remove) and ignores a result.
void SocketPoller::RunQueued() {
  while (!batch_.empty()) {
    for (const IoBatch::Result& r : batch_.Run()) {
      auto* w = reinterpret_cast<SocketWatcher*>(r.tag & ~uint64_t{1});
      w->OnIoDone((r.tag & 1) != 0, r.result);
    }
  }
}

}  // namespace delayq::server
