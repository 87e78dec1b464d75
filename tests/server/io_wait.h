// Test helper: drives an io_context from the test's own thread until a
// condition holds, for tests of the asynchronous backends.
#ifndef DELAYQ_TESTS_SERVER_IO_WAIT_H_
#define DELAYQ_TESTS_SERVER_IO_WAIT_H_

#include <boost/asio/io_context.hpp>
#include <chrono>

namespace delayq::testing {

// Runs `io` until `done()` holds; false if `timeout` passes first.
template <typename Pred>
bool RunIoUntil(boost::asio::io_context& io, Pred done, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    if (io.stopped()) io.restart();
    io.run_one_for(std::chrono::milliseconds(5));
  }
  return true;
}

// Runs `io` for `d`.
inline void RunIoFor(boost::asio::io_context& io, std::chrono::milliseconds d) {
  auto deadline = std::chrono::steady_clock::now() + d;
  RunIoUntil(
      io, [&] { return std::chrono::steady_clock::now() >= deadline; },
      d + std::chrono::milliseconds(100));
}

}  // namespace delayq::testing

#endif  // DELAYQ_TESTS_SERVER_IO_WAIT_H_
