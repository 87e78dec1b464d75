// State shared by every connection of one delayqd: the backend, the
// server-wide counters beanstalkd's `stats` reports, drain mode, the limits
// on connections and on the replies they hold (docs/limits.md).
// Thread: the loop thread.
#ifndef DELAYQ_SERVER_SERVER_CONTEXT_H_
#define DELAYQ_SERVER_SERVER_CONTEXT_H_

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "backend/backend.h"
#include "delayq/operations.h"
#include "server/access.h"
#include "server/rate_limited_log.h"

namespace boost::asio::ssl {
class context;
}
namespace delayq::delivery {
class PushTargets;
}

namespace delayq::server {

// The front-ends, as the operation counters tell them apart.
enum class Protocol : uint8_t { kBeanstalk, kHttp };
inline constexpr size_t kNumProtocols = 2;
constexpr std::string_view ProtocolName(Protocol p) {
  return p == Protocol::kBeanstalk ? "beanstalkd" : "http";
}

struct ServerCounters {
  // Operations asked for, by protocol and row of the operation table
  // (delayq/operations.h): beanstalkd commands whose arguments parsed (and
  // the few failed ones beanstalkd counts too), HTTP requests that matched
  // a route. beanstalkd's `stats` shows its cmd-* lines from the first.
  std::array<std::array<uint64_t, kNumOps>, kNumProtocols> ops{};
  void Count(Protocol p, Op op) { ops[static_cast<size_t>(p)][static_cast<size_t>(op)]++; }
  uint64_t Of(Protocol p, Op op) const {
    return ops[static_cast<size_t>(p)][static_cast<size_t>(op)];
  }
  // beanstalkd connections (beanstalkd's `stats` shows these two)
  uint64_t connections = 0;  // open now
  uint64_t total_connections = 0;
  // HTTP connections (GET /metrics)
  uint64_t http_connections = 0;  // open now
  uint64_t total_http_connections = 0;
  uint64_t producers = 0;  // open connections that have put
  uint64_t workers = 0;    // open connections that have reserved
};

// What holds a request admitted before a reload and still running: a
// reserve that waits (ServerContext::ReloadAccess).
class AccessListener {
 public:
  // A new access policy is in force: a waiting reserve whose caller may no
  // longer take from its topics stops waiting.
  virtual void AccessChanged() = 0;

 protected:
  ~AccessListener() = default;
};

struct ServerContext {
  explicit ServerContext(backend::Backend& b) : backend(b) {}
  backend::Backend& backend;
  ServerCounters counters;
  bool draining = false;
  TimeMs started_ms = 0;
  std::string instance_id;  // 16 hex digits, random per start
  std::string hostname, os, platform;
  size_t max_job_size = 65535;
  // Batch the beanstalkd connections' recv and send calls through io_uring
  // where the kernel allows (server/io_batch.h).
  bool io_uring = true;
  // Connections each listener holds at once (--max-connections); 0: no
  // limit. Past it a new connection is told so and closed (listener.h).
  size_t max_connections = 10'000;
  // Bytes of replies that connections (beanstalkd and HTTP) hold for
  // clients that have not read them yet, in all (--max-reply-memory): past
  // it, a connection that holds any runs no further command until its
  // client reads, and one that holds none runs one at a time.
  size_t max_reply_memory = size_t{64} << 20;
  size_t reply_memory = 0;  // held now
  // Called after a schedule was changed through this instance, so that its
  // scheduler (delivery/scheduler.h) lists them at once rather than at its
  // next poll; unset: nothing to tell.
  std::function<void()> schedules_changed;
  // Tokens, trusted networks, rate buckets (access.h; docs/security.md).
  AccessGuard access;
  // Who is told of a reload: each beanstalkd handler and HTTP API, from
  // its making to its end.
  std::unordered_set<AccessListener*> access_listeners;
  // SIGHUP: `policy` is in force from now on, for the requests that wait
  // too.
  void ReloadAccess(std::shared_ptr<const AccessPolicy> policy) {
    access.Reload(std::move(policy));
    // A listener told may end others (a connection that closes).
    const std::vector<AccessListener*> told(access_listeners.begin(), access_listeners.end());
    for (AccessListener* l : told)
      if (access_listeners.count(l) != 0) l->AccessChanged();
  }
  // Warnings about clients (limits reached, timeouts), rate-limited per
  // cause; delayqd gives it a sink.
  RateLimitedLog warn;
  // TLS (docs/security.md, "TLS"; tls.h): the context new connections
  // get (nullptr: TLS off; replaced on SIGHUP), whether plaintext from
  // outside the trusted networks is refused (--tls-required), and how long
  // a handshake may take (--tls-handshake-timeout).
  std::shared_ptr<boost::asio::ssl::context> tls;
  bool tls_required = false;
  std::chrono::milliseconds tls_handshake_timeout{10'000};
  // --max-memory (0: none), and whether the process is past it now (delayqd
  // looks every 100 ms).
  uint64_t max_memory = 0;
  bool memory_full = false;
  // The push topics' targets (docs/push.md; delivery/push_target.h), which
  // the routes /topics/{topic}/push set and show; null: push is off.
  delivery::PushTargets* push_targets = nullptr;

  bool RepliesOverBudget() const { return max_reply_memory > 0 && reply_memory > max_reply_memory; }
  // The replies a connection holds went from `was` to `now` bytes.
  void AccountReplies(size_t was, size_t now) {
    const bool over = RepliesOverBudget();
    reply_memory = reply_memory - was + now;
    if (!over && RepliesOverBudget())
      warn.Warn("reply_memory_full",
                "max_reply_memory=" + std::to_string(max_reply_memory) +
                    " note=\"connections that hold replies run no command until their clients "
                    "read\"");
  }

  // Reserves that wait (both protocols), and the most that may
  // (--max-waiting; 0: no limit). Past it a reserve does not wait: it takes
  // a ready job or is answered at once as if its timeout had passed.
  size_t max_waiting = 10'000;
  size_t waiting = 0;
  // Topics GET /metrics labels one by one in delayq_topic_jobs, those with
  // the most jobs (--metrics-max-topics); the rest are summed.
  size_t metrics_max_topics = 100;
  // The timeout a reserve that asks for `timeout_ms` gets now (0 past
  // --max-waiting; logged once per 10 s).
  TimeMs WaitFor(TimeMs timeout_ms, std::string_view protocol) {
    if (timeout_ms == 0 || max_waiting == 0 || waiting < max_waiting) return timeout_ms;
    warn.Warn("max_waiting", "protocol=" + std::string(protocol) +
                                 " max_waiting=" + std::to_string(max_waiting) +
                                 " note=\"a reserve takes a ready job or is answered at once\"");
    return 0;
  }

  // Whether a put may go in now: kDraining in drain mode (SIGUSR1),
  // kResourceExhausted while the process is past --max-memory (beanstalkd:
  // OUT_OF_MEMORY; HTTP: 503 resource_exhausted). Nothing else is refused.
  Status AdmitPut() const {
    if (draining) return Status::Draining();
    if (memory_full)
      return Status::ResourceExhausted(
          "delayqd uses more memory than --max-memory (" + std::to_string(max_memory >> 20) +
          " MiB): puts are refused until some is freed; reserves, finishes and deletes go on");
    return Status::Ok();
  }
};

}  // namespace delayq::server

#endif  // DELAYQ_SERVER_SERVER_CONTEXT_H_
