// Test helper: a RedisBackend started against a test's redis-server and
// driven until it can take calls, for the Redis backend's test fixtures.
#ifndef DELAYQ_TESTS_SERVER_REDIS_BACKEND_START_H_
#define DELAYQ_TESTS_SERVER_REDIS_BACKEND_START_H_

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <memory>
#include <string>

#include "backend/redis_backend.h"
#include "backend_status.h"
#include "server/io_wait.h"

namespace delayq::testing {

// Starts a backend with `options` (its address taken from `url`) and runs
// `io` until it is connected (a test failure if not within `timeout`) and the
// functions it loads right after connecting have landed.
inline std::unique_ptr<backend::RedisBackend> StartRedisBackend(
    boost::asio::io_context& io, const std::string& url, backend::RedisBackend::Options options,
    const backend::Clock& clock, std::chrono::milliseconds timeout) {
  auto addr = backend::ParseRedisUrl(url);
  EXPECT_TRUE(addr.ok());
  if (addr.ok()) options.address = *addr;
  auto b = std::make_unique<backend::RedisBackend>(io, options, clock);
  b->Start();
  EXPECT_TRUE(RunIoUntil(
      io, [&] { return b->connected(); }, timeout));
  RunIoFor(io, std::chrono::milliseconds(20));
  return b;
}

}  // namespace delayq::testing

#endif  // DELAYQ_TESTS_SERVER_REDIS_BACKEND_START_H_
