// Black-box test helper: a real redis-server (Debian's) on a free loopback
// port, in a temporary directory, stopped when the object goes. It can be
// killed and started again on the same port and directory (with AOF on,
// what it acknowledged survives), to test reconnection and failover.
//
// Thread: each object belongs to one thread.
#ifndef DELAYQ_TESTS_SERVER_REDIS_PROCESS_H_
#define DELAYQ_TESTS_SERVER_REDIS_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "server/server_process.h"

namespace delayq::testing {

inline constexpr const char* kRedisServerPath = "/usr/bin/redis-server";
// Whether the black-box fixtures that run delayqd on the Redis backend
// (AgainstRedis) run it over TLS instead (DELAYQ_TEST_AGAINST=rediss: the
// ctest entry http_on_rediss).
inline bool AgainstRedisTls() {
  const char* e = std::getenv("DELAYQ_TEST_AGAINST");
  return e != nullptr && std::string_view(e) == "rediss";
}
bool RedisServerAvailable();

class RedisProcess {
 public:
  RedisProcess() = default;
  ~RedisProcess();
  RedisProcess(const RedisProcess&) = delete;
  RedisProcess& operator=(const RedisProcess&) = delete;

  // Starts redis-server (first time: on a free port; later: on the same
  // port and directory) with `extra` flags (e.g. {"--appendonly", "yes"}),
  // and waits until it answers PING. False with *error set otherwise.
  bool Start(std::string* error, const std::vector<std::string>& extra = {},
             milliseconds timeout = milliseconds(10000));
  // From the next Start on: serve TLS alone, on port() (`--port 0
  // --tls-port`), with `tls_flags` (its certificate files, ...). Ready
  // once its log says so (a plain PING cannot tell).
  void UseTls(std::vector<std::string> tls_flags) {
    tls_ = true;
    tls_flags_ = std::move(tls_flags);
  }
  // For a black-box fixture's delayqd: starts it unless it runs (over TLS
  // when AgainstRedisTls(), with a CA and certificate of this test
  // process's own), and adds to `args` the flags that put delayqd on it.
  bool StartForDelayqd(std::string* error, std::vector<std::string>* args);
  // SIGKILL, and reaps it.
  void Kill();
  // SIGTERM, waits for the exit.
  void Stop();
  bool running() const { return pid_ > 0; }
  uint16_t port() const { return port_; }
  std::string url() const {
    return (tls_ ? "rediss://127.0.0.1:" : "redis://127.0.0.1:") + std::to_string(port_);
  }
  const std::string& dir() const { return dir_.path(); }

 private:
  pid_t pid_ = -1;
  uint16_t port_ = 0;
  std::vector<std::string> extra_;
  bool tls_ = false;
  std::vector<std::string> tls_flags_;
  TempDir dir_;
};

}  // namespace delayq::testing

#endif  // DELAYQ_TESTS_SERVER_REDIS_PROCESS_H_
