#include "server/io_batch.h"

#include <liburing.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace delayq::server {
namespace {
constexpr unsigned kRingEntries = 256;  // calls per io_uring_enter; more take another
constexpr int kFlags = MSG_DONTWAIT | MSG_NOSIGNAL;

ssize_t Plain(int fd, bool send, char* buf, size_t len) {
  return send ? SendNow(fd, buf, len) : RecvNow(fd, buf, len);
}
}  // namespace

ssize_t RecvNow(int fd, char* buf, size_t len) {
  for (;;) {
    ssize_t n = ::recv(fd, buf, len, MSG_DONTWAIT);
    if (n >= 0) return n;
    if (errno != EINTR) return -errno;
  }
}

ssize_t SendNow(int fd, const char* buf, size_t len) {
  for (;;) {
    ssize_t n = ::send(fd, buf, len, kFlags);
    if (n >= 0) return n;
    if (errno != EINTR) return -errno;
  }
}

IoBatch::IoBatch(bool use_uring) {
  if (!use_uring) {
    why_not_ = "switched off";
    return;
  }
  auto ring = std::make_unique<io_uring>();
  // SUBMIT_ALL (Linux 5.18): a call that fails does not keep the ones after
  // it in the ring. Without it a failed call would leave the rest queued
  // for a later batch, so older kernels make their calls one by one.
  int rc = io_uring_queue_init(kRingEntries, ring.get(), IORING_SETUP_SUBMIT_ALL);
  if (rc < 0) {
    why_not_ = std::string("io_uring_queue_init: ") + std::strerror(-rc);
    return;
  }
  ring_ = std::move(ring);
}

IoBatch::~IoBatch() {
  if (ring_) io_uring_queue_exit(ring_.get());
}

void IoBatch::Recv(int fd, char* buf, size_t len, uint64_t tag) {
  queued_.push_back(Call{fd, false, buf, len, tag});
}

void IoBatch::Send(int fd, const char* buf, size_t len, uint64_t tag) {
  queued_.push_back(Call{fd, true, const_cast<char*>(buf), len, tag});
}

void IoBatch::Cancel(int fd) {
  queued_.erase(
      std::remove_if(queued_.begin(), queued_.end(), [fd](const Call& c) { return c.fd == fd; }),
      queued_.end());
}

const std::vector<IoBatch::Result>& IoBatch::Run() {
  results_.clear();
  if (queued_.empty()) return results_;
  // One call gains nothing from the ring.
  if (ring_ && queued_.size() > 1) {
    RunUring();
  } else {
    RunPlain();
  }
  queued_.clear();
  return results_;
}

void IoBatch::RunPlain() {
  for (const Call& c : queued_) {
    ++system_calls_;
    results_.push_back(Result{c.tag, Plain(c.fd, c.send, c.buf, c.len)});
  }
}

void IoBatch::RunUring() {
  io_uring* ring = ring_.get();
  results_.resize(queued_.size(), Result{0, 0});
  done_.assign(queued_.size(), false);
  for (size_t start = 0; start < queued_.size() && ring_; start += kRingEntries) {
    const size_t end = std::min(queued_.size(), start + kRingEntries);
    for (size_t i = start; i < end; ++i) {
      const Call& c = queued_[i];
      io_uring_sqe* sqe = io_uring_get_sqe(ring);  // never null: the ring is empty here
      if (c.send) {
        io_uring_prep_send(sqe, c.fd, c.buf, c.len, kFlags);
      } else {
        io_uring_prep_recv(sqe, c.fd, c.buf, c.len, MSG_DONTWAIT);
      }
      io_uring_sqe_set_data64(sqe, i);
      results_[i].tag = c.tag;
    }
    const unsigned want = static_cast<unsigned>(end - start);
    int rc;
    do {
      ++system_calls_;
      rc = io_uring_submit(ring);
    } while (rc == -EINTR);
    // MSG_DONTWAIT calls complete inline: their results are there now. The
    // wait is for safety only: a call still in flight owns its buffer, so
    // it is waited for rather than made again or abandoned.
    unsigned got = 0;
    while (rc > 0 && got < static_cast<unsigned>(rc)) {
      io_uring_cqe* cqe;
      unsigned head, seen = 0;
      io_uring_for_each_cqe(ring, head, cqe) {
        const uint64_t i = io_uring_cqe_get_data64(cqe);
        if (i >= start && i < end && !done_[i]) {
          results_[i].result = cqe->res;
          done_[i] = true;
          ++got;
        }
        ++seen;
      }
      io_uring_cq_advance(ring, seen);
      if (got < static_cast<unsigned>(rc)) {
        int w;
        do w = io_uring_wait_cqe(ring, &cqe);
        while (w == -EINTR);
        if (w < 0) break;
      }
    }
    if (rc != static_cast<int>(want) || got != want) {
      // The ring refused calls (or lost track of some): it is given up for
      // good, and the calls without a result are made one by one below.
      io_uring_queue_exit(ring);
      ring_.reset();
      why_not_ =
          "io_uring_submit failed (" + std::to_string(rc) + " of " + std::to_string(want) + ")";
    }
  }
  for (size_t i = 0; i < queued_.size(); ++i) {
    if (done_[i]) continue;
    const Call& c = queued_[i];
    results_[i].tag = c.tag;
    ++system_calls_;
    results_[i].result = Plain(c.fd, c.send, c.buf, c.len);
  }
}

}  // namespace delayq::server
