// Readiness of many sockets through one epoll set of our own, itself waited
// on through the io_context (its descriptor is readable while a socket in it
// is ready): the beanstalkd connections' I/O without Asio's per-operation
// machinery.
//
// Why: Asio's async_read_some first tries a speculative recv, and Boost
// 1.74 tries again after every read that got data, so a client that waits
// for each reply costs one recv that finds nothing per request (3 of the
// 9.4 system calls per lifecycle job at 50 connections); async_wait instead
// pays an epoll_ctl per wait. Here a socket stays registered, level-
// triggered, for as long as its connection wants to read: one epoll_wait
// serves every socket that became ready, then one recv and one send each.
//
// During a dispatch the watchers' recv and send calls are not made one by
// one: they are queued, and made together (IoBatch: one io_uring_enter for
// all of them where the kernel allows io_uring), and each result goes back
// to its watcher (OnIoDone); what the watchers queue then is made in the
// next batch, until none is left. Outside a dispatch the calls are made at
// once. So at 50 busy connections one epoll_wait, one batch of recvs and
// one of sends serve every ready socket.
//
// A watcher is told the events of its socket (OnSocketEvents) on the loop
// thread. It must Remove its socket before closing it, and stay alive until
// the handler that is running returns (a closed connection may still be in
// the batch being dispatched: it ignores the call).
//
// Thread: the loop thread.
#ifndef DELAYQ_SERVER_SOCKET_POLLER_H_
#define DELAYQ_SERVER_SOCKET_POLLER_H_

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <cstdint>
#include <memory>

#include "delayq/status.h"
#include "server/io_batch.h"

struct epoll_event;

namespace delayq::server {

class SocketWatcher {
 public:
  virtual ~SocketWatcher() = default;
  // `events`: EPOLLIN, EPOLLOUT, EPOLLERR, EPOLLHUP as epoll reported them.
  virtual void OnSocketEvents(uint32_t events) = 0;
  // A queued Recv or Send was made: bytes moved, or -errno.
  virtual void OnIoDone(bool send, ssize_t result) = 0;
};

class SocketPoller {
 public:
  // use_uring: batch the calls through io_uring where the kernel allows
  // (batch().uses_uring() tells, batch().why_not() why not).
  SocketPoller(boost::asio::io_context& io, bool use_uring);
  ~SocketPoller();
  SocketPoller(const SocketPoller&) = delete;
  SocketPoller& operator=(const SocketPoller&) = delete;

  // Level-triggered interest in `events` (EPOLLIN and/or EPOLLOUT; 0 for
  // errors only) of `fd`, reported to `w`.
  Status Add(int fd, uint32_t events, SocketWatcher* w);
  Status Modify(int fd, uint32_t events, SocketWatcher* w);
  // Also drops the calls queued for it.
  void Remove(int fd);

  // A non-blocking recv / send for watcher `w`. Made at once (returns true,
  // *result: bytes moved or -errno) outside a dispatch; queued within one
  // (returns false; the result comes through w->OnIoDone). A buffer must
  // stay untouched until its result is known.
  bool Recv(int fd, char* buf, size_t len, SocketWatcher* w, ssize_t* result);
  bool Send(int fd, const char* buf, size_t len, SocketWatcher* w, ssize_t* result);
  const IoBatch& batch() const { return batch_; }

  // Runs f as a dispatch does: the Recv and Send calls it leads to are
  // batched, and their results delivered, before Batched returns.
  template <typename F>
  void Batched(F&& f) {
    if (dispatching_) return f();
    dispatching_ = true;
    f();
    RunQueued();
    dispatching_ = false;
  }
  // Stops waiting (the io_context may then run out of work).
  void Stop();

 private:
  void Wait();
  void Dispatch();
  void RunQueued();

  boost::asio::posix::stream_descriptor epoll_;
  std::unique_ptr<epoll_event[]> events_;  // what one epoll_wait returns
  IoBatch batch_;
  bool dispatching_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  bool waiting_ = false;
  bool stopped_ = false;
};

}  // namespace delayq::server

#endif  // DELAYQ_SERVER_SOCKET_POLLER_H_
