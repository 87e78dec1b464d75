// delayqd: the delay-queue server. Parses its settings, opens the backend,
// serves the beanstalkd protocol and the HTTP/JSON API on one loop thread
// until SIGTERM/SIGINT;
// SIGUSR1 enters drain mode (puts answer DRAINING), as in beanstalkd.
#include <gnu/libc-version.h>
#include <malloc.h>
#if DELAYQ_WITH_JEMALLOC
#include <jemalloc/jemalloc.h>
#endif
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <random>

#include "app/auth_file.h"
#include "app/config.h"
#include "backend/clock.h"
#include "backend/counting_backend.h"
#include "backend/local_backend.h"
#include "backend/redis_backend.h"
#include "delayq/build_options.h"
#include "delayq/duration.h"
#include "delayq/engine.h"
#include "delayq/version.h"
#include "delivery/push_dispatcher.h"
#include "delivery/push_guard.h"
#include "delivery/push_store.h"
#include "delivery/push_target.h"
#include "delivery/scheduler.h"
#include "server/beanstalk_server.h"
#include "server/event_loop.h"
#include "server/http_server.h"
#include "server/rate_limited_log.h"
#include "server/schedule_put.h"
#include "server/server_context.h"
#include "server/tls.h"
#include "store/rocks_store.h"

extern char** environ;

#if DELAYQ_WITH_JEMALLOC
// jemalloc's settings, read when it starts (MALLOC_CONF in the environment
// is read after them and wins): pages freed and not reused go back to the
// system after a second (its default is ten), by a thread of its own, so
// that an idle server gives them back too. (Declared by jemalloc.h; defined
// here, at global scope, for it to find.)
const char* malloc_conf = "background_thread:true,dirty_decay_ms:1000";
#endif

namespace {

using namespace delayq;

std::string RandomId() {
  std::random_device rd;
  std::uniform_int_distribution<uint64_t> dist;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(dist(rd)));
  return buf;
}

void SetUpLogging(const app::Config& c) {
  auto logger = spdlog::stderr_logger_st("delayqd");
  // logfmt-style: time, level, then the event's own key=value pairs.
  logger->set_pattern("ts=%Y-%m-%dT%H:%M:%S.%e%z level=%l %v");
  logger->set_level(spdlog::level::from_str(c.log_level));
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
}

// Each connection takes a file descriptor: the soft limit (ulimit -n) is
// raised, up to the hard limit, to fit --max-connections on each listener
// and kFdReserve more (the store's files, the listeners, the loop's own).
// Short of that, connections past the limit are refused (listener.h), and
// this says so at start (a warning when not even one listener's fit).
void FitFileDescriptorLimit(const app::Config& c) {
  constexpr rlim_t kFdReserve = 1024;
  constexpr rlim_t kNoLimitWant = rlim_t{1} << 20;  // --max-connections 0
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return;
  const rlim_t listeners = c.http ? 2 : 1;
  const rlim_t want = c.max_connections == 0
                          ? kNoLimitWant
                          : static_cast<rlim_t>(c.max_connections) * listeners + kFdReserve;
  if (lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur >= want) return;
  const rlim_t was = lim.rlim_cur;
  lim.rlim_cur = lim.rlim_max == RLIM_INFINITY ? want : std::min(want, lim.rlim_max);
  if (lim.rlim_cur > was && setrlimit(RLIMIT_NOFILE, &lim) != 0) lim.rlim_cur = was;
  if (lim.rlim_cur > was)
    spdlog::info("event=fd_limit_raised from={} to={}", static_cast<uint64_t>(was),
                 static_cast<uint64_t>(lim.rlim_cur));
  if (lim.rlim_cur >= want || c.max_connections == 0) return;
  // A warning when one listener's connections do not fit; both listeners
  // full at once is rarer.
  const bool one_fits = lim.rlim_cur >= static_cast<rlim_t>(c.max_connections) + kFdReserve;
  spdlog::log(one_fits ? spdlog::level::info : spdlog::level::warn,
              "event=fd_limit_low limit={} wanted={} max_connections={} note=\"connections past "
              "what the limit allows are refused (event=out_of_file_descriptors); "
              "raise the hard limit (ulimit -Hn, LimitNOFILE=) or lower --max-connections\"",
              static_cast<uint64_t>(lim.rlim_cur), static_cast<uint64_t>(want), c.max_connections);
}

// The allocator, as the started line names it: jemalloc when it is linked
// and malloc is its (a malloc moves its count of this thread's bytes), the
// sanitizer's in a sanitizer build, else glibc's.
std::string AllocatorName() {
#if DELAYQ_WITH_JEMALLOC
  uint64_t before = 0, after = 0;
  size_t len = sizeof(before);
  const bool counted = mallctl("thread.allocated", &before, &len, nullptr, 0) == 0;
  void* volatile probe = std::malloc(4096);
  len = sizeof(after);
  const bool ours = counted && mallctl("thread.allocated", &after, &len, nullptr, 0) == 0 &&
                    after - before >= 4096;
  std::free(probe);
  const char* version = nullptr;
  len = sizeof(version);
  if (ours && mallctl("version", static_cast<void*>(&version), &len, nullptr, 0) == 0 &&
      version != nullptr) {
    std::string v(version);
    return "jemalloc-" + v.substr(0, v.find('-'));  // "5.3.0-0-g54eaed1d…"
  }
#endif
#if DELAYQ_SANITIZER_ALLOCATOR
  return "sanitizer";
#else
  return std::string("glibc-") + gnu_get_libc_version();
#endif
}

// --max-memory: every 100 ms, the bytes malloc has handed out and not got
// back (what the jobs, buffers, RocksDB's memtables and caches take),
// against the limit. Past it, puts are refused (ServerContext::AdmitPut)
// until use falls below it again.
//
// Under glibc, malloc's free memory also goes back to the system once it is
// large: glibc gives back on its own only the free top of a heap, so one
// small block allocated after a burst of large jobs (a timer's, a reply's)
// would keep every page below it, freed jobs and all, in the process's
// resident size. malloc_trim also gives back the free pages inside the
// heap; at most once a second, and only past kTrimFreeBytes free. (jemalloc
// gives back on its own: malloc_conf above.)
//
// MallocInUse: nullopt when the allocator does not say (a jemalloc built
// without its statistics).
std::optional<uint64_t> MallocInUse(bool trim) {
#if DELAYQ_WITH_JEMALLOC
  (void)trim;
  uint64_t epoch = 1;  // a write to "epoch" refreshes the statistics read next
  size_t len = sizeof(epoch);
  (void)mallctl("epoch", &epoch, &len, &epoch, len);
  size_t allocated = 0;
  len = sizeof(allocated);
  if (mallctl("stats.allocated", &allocated, &len, nullptr, 0) != 0) return std::nullopt;
  return allocated;
#else
  constexpr size_t kTrimFreeBytes = size_t{16} << 20;
  struct mallinfo2 mi = mallinfo2();
  if (trim && mi.fordblks > kTrimFreeBytes) {
    malloc_trim(0);
    mi = mallinfo2();
  }
  return mi.uordblks + mi.hblkhd;
#endif
}

void WatchMemory(std::shared_ptr<boost::asio::steady_timer> t, server::ServerContext& ctx,
                 int ticks = 0) {
  t->expires_after(std::chrono::milliseconds(100));
  t->async_wait([t, &ctx, ticks](const boost::system::error_code& ec) {
    if (ec) return;
    const uint64_t used = MallocInUse(ticks % 10 == 0).value_or(0);  // checked at start
    const bool full = used > ctx.max_memory;
    if (full != ctx.memory_full) {
      ctx.memory_full = full;
      ctx.warn.Warn(full ? "max_memory_reached" : "max_memory_ok",
                    "used_bytes=" + std::to_string(used) +
                        " max_memory=" + std::to_string(ctx.max_memory) +
                        (full ? " note=\"puts are refused\"" : " note=\"puts are taken again\""));
    }
    WatchMemory(t, ctx, (ticks + 1) % 10);
  });
}

// A schedule's failure, logged at most once a minute per schedule and error
// kind: a failing store or Redis would otherwise log every firing.
void LogScheduleFailure(std::string_view schedule, const Status& error) {
  static std::map<std::string, std::chrono::steady_clock::time_point> last;
  const auto now = std::chrono::steady_clock::now();
  auto& at = last[std::string(schedule) + "/" + std::string(CodeName(error.code()))];
  if (at != std::chrono::steady_clock::time_point{} && now - at < std::chrono::minutes(1)) return;
  at = now;
  spdlog::warn("event=schedule_failed schedule=\"{}\" code={} error=\"{}\"", schedule,
               CodeName(error.code()), error.message());
}

// Stores the config file's schedules as PUTs of each would
// (server::UpsertSchedules) and tells the scheduler once if any was
// written. Those the backend could not take for being unavailable (Redis
// away just after start) are tried again a second later, the failure
// logged as a firing's is.
void ConfigureSchedules(boost::asio::io_context& io, backend::Backend& backend,
                        delivery::Scheduler& scheduler, std::vector<delivery::Schedule> schedules) {
  struct Outcome {
    bool written = false;
    std::vector<delivery::Schedule> again;
  };
  auto outcome = std::make_shared<Outcome>();
  auto by_name = std::make_shared<std::map<std::string, delivery::Schedule>>();
  for (const delivery::Schedule& s : schedules) by_name->emplace(s.name, s);
  server::UpsertSchedules(
      backend, std::move(schedules), backend.Now(),
      [outcome, by_name](const std::string& name, Result<server::UpsertedSchedule> r) {
        if (r.ok()) {
          outcome->written |= r->written;
          spdlog::info("event=schedule_configured schedule=\"{}\" stored={}", name,
                       r->created   ? "new"
                       : r->written ? "replaced"
                                    : "unchanged");
        } else if (r.status().code() == Code::kUnavailable) {
          LogScheduleFailure(name, r.status());
          outcome->again.push_back(by_name->at(name));
        } else {
          spdlog::error("event=schedule_not_set schedule=\"{}\" code={} error=\"{}\"", name,
                        CodeName(r.status().code()), r.status().message());
        }
      },
      [&io, &backend, &scheduler, outcome] {
        if (outcome->written) scheduler.Reload();
        if (outcome->again.empty()) return;
        auto retry = std::make_shared<boost::asio::steady_timer>(io, std::chrono::seconds(1));
        retry->async_wait(
            [&io, &backend, &scheduler, outcome, retry](const boost::system::error_code& ec) {
              if (!ec) ConfigureSchedules(io, backend, scheduler, std::move(outcome->again));
            });
      });
}

// Waits for every connection to finish its last reply, then stops the loop.
void StopWhenIdle(boost::asio::io_context& io, server::BeanstalkServer& srv,
                  server::HttpServer* http, std::shared_ptr<boost::asio::steady_timer> t,
                  int rounds) {
  size_t open = srv.connections() + (http != nullptr ? http->connections() : 0);
  if (open == 0 || rounds <= 0) {
    io.stop();
    return;
  }
  t->expires_after(std::chrono::milliseconds(10));
  t->async_wait([&io, &srv, http, t, rounds](const boost::system::error_code&) {
    StopWhenIdle(io, srv, http, t, rounds - 1);
  });
}

// The Local backend: the engine in this process, over the store (none:
// in memory), with every stored job recovered. nullptr (logged) on failure.
std::unique_ptr<backend::Backend> OpenLocal(boost::asio::io_context& io,
                                            const backend::Clock& clock, const app::Config& config,
                                            store::RocksStore* rocks) {
  backend::LocalBackend::Options bo;
  bo.max_job_size = config.max_job_size;
  bo.max_topics = config.max_topics;
  // Leases from before a restart must hold nothing after it.
  std::random_device rd;
  bo.lease_seed = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  bo.store = rocks;
  bo.journal = rocks != nullptr ? rocks->journal() : nullptr;
  bo.horizon_ms = config.horizon_ms;
  bo.on_store_health = [](bool ok, const Status& error) {
    if (ok) {
      spdlog::info("event=store_recovered note=\"writes are accepted again\"");
    } else {
      spdlog::error(
          "event=store_failing error=\"{}\" note=\"changes are refused with "
          "INTERNAL_ERROR until the store takes writes again\"",
          error.message());
    }
  };
  auto backend = std::make_unique<backend::LocalBackend>(io, bo, clock);
  if (rocks != nullptr) {
    const uint64_t total = rocks->ApproximateJobs();
    const auto t0 = std::chrono::steady_clock::now();
    auto last_log = t0;
    auto rate = [&](uint64_t n) {
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      return s > 0 ? static_cast<uint64_t>(n / s) : n;
    };
    spdlog::info("event=recovery_started data_dir={} fsync={} jobs_estimated={}", config.data_dir,
                 config.fsync, total);
    uint64_t recovered = 0;
    Status st = backend->Recover(
        [&](uint64_t loaded) {
          recovered = loaded;
          auto now = std::chrono::steady_clock::now();
          if (now - last_log < std::chrono::seconds(1)) return;
          last_log = now;
          spdlog::info("event=recovery_progress loaded={} total_estimated={} jobs_per_s={}", loaded,
                       total, rate(loaded));
        },
        1u << 16);
    if (!st.ok()) {
      spdlog::error("event=recovery_failed data_dir={} code={} error=\"{}\"", config.data_dir,
                    CodeName(st.code()), st.message());
      return nullptr;
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    spdlog::info(
        "event=recovery_done jobs={} on_disk_only={} seconds={:.3f} jobs_per_s={} next_id={}",
        recovered, backend->engine().ColdJobs(), secs, rate(recovered),
        backend->engine().next_id());
  }
  return backend;
}

// The first line of a password file, without its line end.
// Both the certificate and the key, or neither; the rest only with them.
// (Settings that need one another: checked once all are read.)
Status CheckTlsSettings(const app::Config* c) {
  if (c->tls_cert.empty() != c->tls_key.empty())
    return Status::InvalidArgument(
        c->tls_cert.empty() ? "--tls-key needs --tls-cert (the certificate of that key)"
                            : "--tls-cert needs --tls-key (the certificate's private key)");
  if (c->tls_cert.empty() && !c->tls_client_ca.empty())
    return Status::InvalidArgument("--tls-client-ca needs --tls-cert and --tls-key");
  if (c->tls_cert.empty() && c->tls_required)
    return Status::InvalidArgument("--tls-required needs --tls-cert and --tls-key");
  return Status::Ok();
}

Result<std::string> ReadPasswordFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::InvalidArgument("cannot read it");
  std::string line;
  std::getline(in, line);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (line.empty()) return Status::InvalidArgument("its first line is empty");
  return line;
}

// The Redis backend; waits up to 5 s for its connection (it keeps trying
// after that: operations fail until it is up).
std::unique_ptr<backend::Backend> OpenRedis(boost::asio::io_context& io,
                                            const backend::Clock& clock,
                                            const app::Config& config) {
  const std::string shown = backend::RedactRedisUrl(config.backend);
  auto address = backend::ParseRedisUrl(config.backend);
  if (!address.ok()) {
    spdlog::error("event=bad_backend backend={} error=\"{}\"", shown, address.status().message());
    return nullptr;
  }
  if (!config.redis_password_file.empty()) {
    auto password = ReadPasswordFile(config.redis_password_file);
    // "redis://worker@h": with the password in a file, the name of its
    // ACL user (docs/redis-backend.md).
    if (address->password_alone) {
      address->auth.user = std::move(address->auth.password);
      address->auth.password.clear();
    }
    if (password.ok() && !address->auth.password.empty())
      password = Status::InvalidArgument("the URL holds a password too");
    if (!password.ok()) {
      spdlog::error("event=bad_redis_password_file file={} error=\"{}\"",
                    config.redis_password_file, password.status().message());
      return nullptr;
    }
    address->auth.password = *password;
  }
  backend::RedisBackend::Options ro;
  const bool tls_files = !config.redis_tls_ca_file.empty() || !config.redis_tls_cert.empty() ||
                         !config.redis_tls_key.empty();
  if (tls_files && !address->tls) {
    // Not silently in plain text: the operator asked for TLS.
    spdlog::error(
        "event=bad_redis_tls backend={} error=\"--redis-tls-ca-file, --redis-tls-cert and "
        "--redis-tls-key need a rediss:// or rediss-cluster:// backend\"",
        shown);
    return nullptr;
  }
  if (address->tls) {
    auto tls = backend::NewRedisTlsContext({.ca_file = config.redis_tls_ca_file,
                                            .cert_file = config.redis_tls_cert,
                                            .key_file = config.redis_tls_key});
    if (!tls.ok()) {
      spdlog::error("event=bad_redis_tls backend={} error=\"{}\"", shown, tls.status().message());
      return nullptr;
    }
    ro.tls = *tls;
  }
  ro.address = *address;
  ro.max_job_size = config.max_job_size;
  ro.max_topics = config.max_topics;
  ro.reply_timeout_ms = config.redis_timeout_ms;
  // Redis's words name no secret (RedisClient::Fail takes the password
  // out). At most one line of each kind per 10 s for each connection (a
  // node, or the subscriber): a node that takes the connection and drops
  // it again at once would otherwise log ten a second, and one node's
  // lines must not hide another's.
  struct NodeLogs {
    server::RateLimitedLog lost, back;
  };
  auto logs = std::make_shared<std::map<std::string, NodeLogs>>();
  ro.on_connection = [logs](const std::string& node, bool up, const std::string& error) {
    auto [it, fresh] = logs->try_emplace(node);
    if (fresh) {
      it->second.lost.set_sink([](std::string_view line) { spdlog::warn("{}", line); });
      it->second.back.set_sink([](std::string_view line) { spdlog::info("{}", line); });
    }
    std::string words = error;
    std::replace(words.begin(), words.end(), '"', '\'');  // the line stays logfmt
    if (up) {
      it->second.back.Warn("redis_reconnected", "node=\"" + node + "\"");
      return;
    }
    // The subscriber carries only the wake-ups of waiting reserves; the
    // backend's sweep finds their jobs meanwhile.
    const bool subscriber = node.starts_with("subscriber ");
    it->second.lost.Warn("redis_disconnected",
                         "node=\"" + node + "\" error=\"" + words + "\" note=\"" +
                             (subscriber ? "waiting reserves are woken by the 200 ms sweep "
                                           "until it is back"
                                         : "operations on it fail until it is back") +
                             "\"");
  };
  auto backend = std::make_unique<backend::RedisBackend>(io, ro, clock);
  backend->Start();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!backend->connected() && std::chrono::steady_clock::now() < deadline)
    io.run_one_for(std::chrono::milliseconds(10));
  if (backend->connected()) {
    spdlog::info("event=redis_connected backend={}", shown);
  } else {
    spdlog::warn(
        "event=redis_unreachable backend={} note=\"serving anyway: operations fail with "
        "INTERNAL_ERROR until Redis answers\" error=\"{}\"",
        shown, backend->last_error());
  }
  return backend;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc), env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) env.emplace_back(*e);
  app::Config config;
  app::ParseOutcome parsed = app::ParseConfig(args, env, &config);
  if (!parsed.run) {
    std::fputs(parsed.text.c_str(), parsed.exit_code == 0 ? stdout : stderr);
    return parsed.exit_code;
  }
  SetUpLogging(config);
  FitFileDescriptorLimit(config);

  // The store first: a damaged or foreign data directory stops the start.
  std::unique_ptr<store::RocksStore> rocks;
  const bool on_redis = !config.backend.empty();
  if (!config.in_memory && !on_redis) {
    store::RocksStoreOptions so;
    so.dir = config.data_dir;
    so.fsync = config.fsync == "always" ? store::FsyncPolicy::kAlways
               : config.fsync == "no"   ? store::FsyncPolicy::kNo
                                        : store::FsyncPolicy::kEverySec;
    const auto opening = std::chrono::steady_clock::now();
    auto opened = store::RocksStore::Open(so);
    if (!opened.ok()) {
      spdlog::error("event=store_open_failed data_dir={} code={} error=\"{}\"", config.data_dir,
                    CodeName(opened.status().code()), opened.status().message());
      return 1;
    }
    rocks = std::move(opened).value();
    if (const store::JournalCut& cut = rocks->journal_cut(); cut.lsn != 0)
      spdlog::warn(
          "event=journal_cut first_lost={} segment=\"{}\" offset={} records_after={} "
          "last_synced={} damage=\"{}\" note=\"the journal ends where a power cut left it "
          "unwritten; no record written later says a sync covered it (docs/storage.md, "
          "Replay)\"",
          cut.lsn, cut.path, cut.offset, cut.records_after, cut.last_synced, cut.what);
    if (rocks->replayed_records() > 0)
      spdlog::info(
          "event=journal_replayed records={} seconds={:.3f} note=\"changes a stop without a "
          "flush left in the journal are in the store again\"",
          rocks->replayed_records(),
          std::chrono::duration<double>(std::chrono::steady_clock::now() - opening).count());
  }

  // One thread runs every socket: the reactor needs no locks (other threads
  // may still post work to the loop).
  boost::asio::io_context io(BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO);
  backend::Clock clock;
  std::unique_ptr<backend::Backend> owned =
      on_redis ? OpenRedis(io, clock, config) : OpenLocal(io, clock, config, rocks.get());
  if (owned == nullptr) return 1;
#if DELAYQ_COUNT_METRICS
  // The outcomes of the operations every front-end asks for (/metrics): the
  // Local backend counts them itself, as it calls each completion; Redis's
  // are counted by a decorator.
  if (owned->operation_outcomes() == nullptr)
    owned = std::make_unique<backend::CountingBackend>(std::move(owned));
#endif
  backend::Backend& backend = *owned;
  // Push topics (docs/push.md): the front-ends call the backend through
  // the guard, which keeps workers off the push topics' jobs; the
  // dispatcher reserves them from the backend beneath.
  delivery::PushTargets push_targets;
  // The targets are kept with the queue: loaded now, and on Redis learnt
  // from the other instances by polling.
  delivery::PushTargetStore push_store(
      io, backend, push_targets,
      {.poll = std::chrono::milliseconds(1000),
       .log = [](std::string_view line) { spdlog::warn("{}", line); }});
  // The config file's targets (docs/push.md, "The target"), checked now and
  // set once the stored ones are loaded, as a PUT of each would.
  std::vector<delivery::PushTarget> configured;
  for (const auto& [topic, json] : config.push_targets) {
    auto t = delivery::ParsePushTarget(topic, json);
    // A secret made at each start would change at each start.
    const char* why = !IsValidTopicName(topic)                       ? "not a topic name"
                      : json.find("\"secret\"") == std::string::npos ? "a secret is required"
                                                                     : nullptr;
    if (!t.ok() || why != nullptr) {
      spdlog::error("event=bad_push_target topic={} error=\"{}\"", topic,
                    why != nullptr ? why : t.status().message());
      return 1;
    }
    configured.push_back(*std::move(t));
  }
  push_store.Start([&push_targets, configured = std::move(configured)](Status) mutable {
    for (delivery::PushTarget& t : configured) {
      const std::string topic = t.topic;
      push_targets.Save(std::move(t), [topic](Status st) {
        if (!st.ok())
          spdlog::error("event=push_target_not_set topic={} error=\"{}\"", topic, st.message());
      });
    }
  });
  // The config file's schedules (docs/schedules.md, "From the CLI and the
  // config file"), checked now as PUT /schedules/{name} checks a body, and
  // stored once the scheduler runs, as a PUT of each would.
  std::vector<delivery::Schedule> configured_schedules;
  for (const auto& [name, json] : config.schedules) {
    auto s = server::ParseSchedule(name, json, config.max_job_size, clock.Now());
    if (!s.ok()) {
      spdlog::error("event=bad_schedule schedule=\"{}\" error=\"{}\"", name, s.status().message());
      return 1;
    }
    configured_schedules.push_back(*std::move(s));
  }
  delivery::PushGuard guarded(io, backend, push_targets);
  server::ServerContext ctx(guarded);
  ctx.push_targets = &push_targets;
  ctx.started_ms = clock.Now();
  ctx.instance_id = RandomId();
  ctx.max_job_size = config.max_job_size;
  ctx.io_uring = config.io_uring;
  ctx.max_connections = config.max_connections;
  ctx.max_waiting = config.max_waiting;
  ctx.metrics_max_topics = config.metrics_max_topics;
  ctx.max_reply_memory = config.max_reply_memory;
  ctx.warn.set_sink([](std::string_view line) { spdlog::warn("{}", line); });
  // Access: the tokens and the trusted networks (docs/security.md).
  {
    auto policy = app::LoadAccessPolicy(config.auth_file, config.trusted_networks);
    if (!policy.ok()) {
      spdlog::error("event=bad_auth_file error=\"{}\"", policy.status().message());
      return 1;
    }
    ctx.access.Reload(std::move(policy).value());
  }
  // TLS (docs/security.md, "TLS"): the files are read now; a bad one stops
  // the start.
  const server::TlsFiles tls_files{config.tls_cert, config.tls_key, config.tls_client_ca};
  if (Status st = CheckTlsSettings(&config); !st.ok()) {
    spdlog::error("event=bad_tls error=\"{}\"", st.message());
    return 1;
  }
  if (!tls_files.cert.empty()) {
    auto tls = server::LoadTlsContext(tls_files);
    if (!tls.ok()) {
      spdlog::error("event=bad_tls error=\"{}\"", tls.status().message());
      return 1;
    }
    ctx.tls = std::move(tls).value();
    ctx.tls_required = config.tls_required;
    ctx.tls_handshake_timeout = std::chrono::milliseconds(config.tls_handshake_timeout_ms);
    spdlog::info("event=tls {} client_certificates={} tls_required={}",
                 server::TlsCertificateSummary(*ctx.tls),
                 tls_files.client_ca.empty() ? "off" : "required", ctx.tls_required ? "on" : "off");
  }
  ctx.max_memory = config.max_memory;
  if (config.max_memory > 0) {
    if (!MallocInUse(false)) {
      spdlog::error(
          "event=max_memory_unavailable allocator={} error=\"the allocator does not count what it "
          "hands out; --max-memory cannot be kept\"",
          AllocatorName());
      return 1;
    }
    WatchMemory(std::make_shared<boost::asio::steady_timer>(io), ctx);
  }
  utsname u{};
  if (uname(&u) == 0) {
    ctx.hostname = u.nodename;
    ctx.os = u.version;
    ctx.platform = u.machine;
  }

  delivery::PushDispatcher::Options po;
  po.client.allow_private = config.push_allow_private;
  po.client.user_agent = "delayq/" + std::string(kVersion);
  po.log = [&ctx](std::string_view cause, std::string_view detail) {
    ctx.warn.Warn(cause, detail);
  };
  auto dispatcher =
      std::make_unique<delivery::PushDispatcher>(io, backend, push_targets, std::move(po));

  server::BeanstalkServer beanstalk(io, ctx);
  std::unique_ptr<server::HttpServer> http;
  if (config.http) {
    server::HttpServerOptions ho;
    ho.max_body_bytes = config.http_max_body;
    ho.idle_timeout = std::chrono::milliseconds(config.http_idle_timeout_ms);
    ho.header_timeout = std::chrono::milliseconds(config.http_header_timeout_ms);
    ho.body_timeout = std::chrono::milliseconds(config.http_body_timeout_ms);
    ho.api.ui_read_only = config.ui_read_only;
    http = std::make_unique<server::HttpServer>(io, ctx, ho);
  }
  // Recurring schedules (docs/schedules.md): every instance runs every
  // schedule; each firing is made once (Backend::FireSchedule).
  delivery::Scheduler::Options so;
  so.on_error = [](std::string_view schedule, const Status& error) {
    LogScheduleFailure(schedule, error);
  };
  delivery::Scheduler scheduler(io, backend, clock, so);
  ctx.schedules_changed = [&scheduler] { scheduler.Reload(); };
  scheduler.Start();
  if (!configured_schedules.empty())
    ConfigureSchedules(io, backend, scheduler, std::move(configured_schedules));
  // Signals first: a SIGTERM that comes while we start is still graceful.
  boost::asio::signal_set stop_signals(io, SIGTERM, SIGINT);
  // Never destroyed (reachable from here, never waited on): Asio gives a
  // signal its default action back when the last set holding it lets it
  // go, and clearing stop_signals below would then leave SIGTERM deadly
  // for the moment before it is ignored; a SIGTERM repeated just then
  // (the protocol test that sends its second one when its connection
  // closes hit it) ended delayqd in the middle of its stop.
  // SIGHUP and SIGUSR1 likewise: their default action ends a process too.
  static boost::asio::signal_set* const stop_guard =
      new boost::asio::signal_set(io, SIGTERM, SIGINT, SIGHUP);
  stop_guard->add(SIGUSR1);
  stop_signals.async_wait([&](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    spdlog::info("event=stopping signal={} connections={} http_connections={}", sig,
                 beanstalk.connections(), http ? http->connections() : 0);
    beanstalk.Stop();
    scheduler.Stop();        // no firing starts after this
    if (http) http->Stop();  // waiting long-polls are answered now
    // Give in-flight replies up to 5 s to leave.
    StopWhenIdle(io, beanstalk, http.get(), std::make_shared<boost::asio::steady_timer>(io), 500);
  });
  boost::asio::signal_set drain_signal(io, SIGUSR1);
  std::function<void(const boost::system::error_code&, int)> on_drain =
      [&](const boost::system::error_code& ec, int) {
        if (ec) return;
        if (!ctx.draining) spdlog::info("event=draining");
        ctx.draining = true;
        drain_signal.async_wait(on_drain);
      };
  drain_signal.async_wait(on_drain);
  // SIGHUP: the token file again. A bad one is logged and the tokens in
  // force stay; connections stay open, held to the new tokens. With TLS,
  // the certificate, key and client CA again, for new connections (a bad
  // file is logged and the ones in force stay).
  boost::asio::signal_set reload_signal(io, SIGHUP);
  std::function<void(const boost::system::error_code&, int)> on_reload =
      [&](const boost::system::error_code& ec, int) {
        if (ec) return;
        auto policy = app::LoadAccessPolicy(config.auth_file, config.trusted_networks);
        if (policy.ok()) {
          ctx.ReloadAccess(std::move(policy).value());
          spdlog::info("event=reloaded tokens={}", ctx.access.policy()->tokens().size());
        } else {
          spdlog::error("event=reload_failed note=\"the tokens in force stay\" error=\"{}\"",
                        policy.status().message());
        }
        if (ctx.tls != nullptr) {
          auto tls = server::LoadTlsContext(tls_files);
          if (tls.ok()) {
            ctx.tls = std::move(tls).value();
            spdlog::info("event=tls_reloaded {}", server::TlsCertificateSummary(*ctx.tls));
          } else {
            spdlog::error(
                "event=tls_reload_failed note=\"the certificate in force stays\" error=\"{}\"",
                tls.status().message());
          }
        }
        reload_signal.async_wait(on_reload);
      };
  reload_signal.async_wait(on_reload);

  if (Status st = beanstalk.Listen(config.listen, config.port); !st.ok()) {
    spdlog::error("event=listen_failed error=\"{}\"", st.message());
    return 1;
  }
  const std::string http_listen = config.http_listen.empty() ? config.listen : config.http_listen;
  if (http) {
    if (Status st = http->Listen(http_listen, config.http_port); !st.ok()) {
      spdlog::error("event=listen_failed error=\"{}\"", st.message());
      return 1;
    }
  }
  beanstalk.Start();
  if (http) http->Start();
  spdlog::info(
      "event=started version={} listen={}:{} http={} backend={} store={} fsync={} horizon={} "
      "max_job_size={} max_connections={} max_reply_memory={} busy_poll_us={} io_uring={} "
      "tokens={} trusted_networks={} allocator={} pid={}",
      kVersion, config.listen, beanstalk.port(),
      http ? http_listen + ":" + std::to_string(http->port()) : std::string("off"),
      backend.info().name,
      on_redis           ? backend::RedactRedisUrl(config.backend)
      : config.in_memory ? std::string("none")
                         : config.data_dir,
      config.in_memory || on_redis ? "-" : config.fsync.c_str(),
      config.in_memory || on_redis || config.horizon_ms == 0 ? "off"
                                                             : FormatDuration(config.horizon_ms),
      config.max_job_size, config.max_connections, config.max_reply_memory, config.busy_poll_us,
      beanstalk.io_batch().uses_uring() ? "on" : "off", ctx.access.policy()->tokens().size(),
      ctx.access.policy()->trusted().ToString(), AllocatorName(), static_cast<long>(getpid()));
  if (config.io_uring && !beanstalk.io_batch().uses_uring())
    spdlog::info(
        "event=io_uring_unavailable reason=\"{}\" note=\"one system call per recv and send\"",
        beanstalk.io_batch().why_not());

  const server::LoopStats loop = server::RunEventLoop(
      io, std::chrono::microseconds(config.busy_poll_us),
      {.waiting_elsewhere = [&backend] { return backend.RepliesWaitForStore(); },
       .completions_from_elsewhere = [&backend] { return backend.StoreCompletionsRun(); }});
  // The stop is under way. A SIGTERM or SIGINT repeated from here on (the
  // store still writes what the loop left it and closes) is ignored: its
  // default action would end the process in the middle of that, with a
  // signal's exit status. Clearing a signal_set restores the default
  // action when no other set holds the signal (stop_guard does), so the
  // clearing comes first. SIGKILL still ends it at once.
  boost::system::error_code ignored;
  stop_signals.clear(ignored);
  drain_signal.clear(ignored);
  reload_signal.clear(ignored);
  std::signal(SIGTERM, SIG_IGN);
  std::signal(SIGINT, SIG_IGN);
  std::signal(SIGHUP, SIG_IGN);
  std::signal(SIGUSR1, SIG_IGN);
  // Connections still open after the grace period are closed; their
  // handlers run now, while the backend they point to still exists.
  beanstalk.CloseAll();
  if (http) http->CloseAll();
  io.restart();
  io.poll();
  http.reset();        // its API's sessions go before the backend
  dispatcher.reset();  // so do the dispatcher's
  spdlog::info("event=stopped polls={} poll_hits={} poll_missed_us={}", loop.polls, loop.hits,
               loop.missed_us);
  return 0;
}
