// Non-blocking recv and send calls on many sockets, queued and then made
// together: through io_uring, one system call for the whole batch; where
// io_uring is not available (an old kernel, a seccomp profile that forbids
// it, or switched off), one plain call each.
//
// Every call is made with MSG_DONTWAIT, so io_uring completes it inline,
// with the result the plain call would give (bytes, 0 at the end of the
// stream, or an error such as EAGAIN): Run returns every result before it
// returns, and a buffer is needed only until then. Calls on one socket run
// in the order they were queued.
//
// Thread: one thread (the loop thread).
#ifndef DELAYQ_SERVER_IO_BATCH_H_
#define DELAYQ_SERVER_IO_BATCH_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

struct io_uring;

namespace delayq::server {

// One non-blocking call made at once (MSG_DONTWAIT; a send with
// MSG_NOSIGNAL), retried on EINTR: bytes moved, or -errno. What IoBatch
// makes when it cannot batch.
ssize_t RecvNow(int fd, char* buf, size_t len);
ssize_t SendNow(int fd, const char* buf, size_t len);

class IoBatch {
 public:
  struct Result {
    uint64_t tag;    // as queued
    ssize_t result;  // bytes moved, or -errno
  };

  // use_uring: try io_uring (when it cannot be set up, `why_not()` says why
  // and the calls are made one by one).
  explicit IoBatch(bool use_uring);
  ~IoBatch();
  IoBatch(const IoBatch&) = delete;
  IoBatch& operator=(const IoBatch&) = delete;

  bool uses_uring() const { return ring_ != nullptr; }
  const std::string& why_not() const { return why_not_; }

  void Recv(int fd, char* buf, size_t len, uint64_t tag);
  void Send(int fd, const char* buf, size_t len, uint64_t tag);
  // Drops the calls queued for `fd` (its owner is closing it).
  void Cancel(int fd);
  bool empty() const { return queued_.empty(); }

  // Makes every queued call and returns the results in queue order (valid
  // until the next Run). The queue is empty afterwards.
  const std::vector<Result>& Run();

  // System calls Run made (io_uring_enter, or the plain calls); for tests.
  uint64_t system_calls() const { return system_calls_; }

 private:
  struct Call {
    int fd;
    bool send;
    char* buf;
    size_t len;
    uint64_t tag;
  };
  void RunPlain();
  void RunUring();

  std::unique_ptr<io_uring> ring_;
  std::string why_not_;
  std::vector<Call> queued_;
  std::vector<Result> results_;
  std::vector<bool> done_;  // results_[i] came from the ring
  uint64_t system_calls_ = 0;
};

}  // namespace delayq::server

#endif  // DELAYQ_SERVER_IO_BATCH_H_
