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

struct epoll_event;

namespace delayq::server {

class SocketWatcher {
 public:
  virtual ~SocketWatcher() = default;
  // `events`: EPOLLIN, EPOLLOUT, EPOLLERR, EPOLLHUP as epoll reported them.
  virtual void OnSocketEvents(uint32_t events) = 0;
};

class SocketPoller {
 public:
  explicit SocketPoller(boost::asio::io_context& io);
  ~SocketPoller();
  SocketPoller(const SocketPoller&) = delete;
  SocketPoller& operator=(const SocketPoller&) = delete;

  // Level-triggered interest in `events` (EPOLLIN and/or EPOLLOUT; 0 for
  // errors only) of `fd`, reported to `w`.
  Status Add(int fd, uint32_t events, SocketWatcher* w);
  Status Modify(int fd, uint32_t events, SocketWatcher* w);
  void Remove(int fd);
  // Stops waiting (the io_context may then run out of work).
  void Stop();

 private:
  void Wait();
  void Dispatch();

  boost::asio::posix::stream_descriptor epoll_;
  std::unique_ptr<epoll_event[]> events_;  // what one epoll_wait returns
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  bool waiting_ = false;
  bool stopped_ = false;
};

}  // namespace delayq::server

#endif  // DELAYQ_SERVER_SOCKET_POLLER_H_
