// How late the jobs of 10,000 schedules firing every second are served:
// the scheduler (delivery/scheduler) and a Local backend in this process,
// on one loop as in delayqd, with the store of --fsync everysec (RocksDB and
// its journal in a temporary directory) or none (--in-memory), and a
// worker on the same loop that waits in a reserve on every topic and
// deletes each job it is served. Every schedule is "* * * * * *": all of
// them fall due at the same millisecond, the worst case for one loop.
//
// Lateness (the headline) is from a firing's fire time to the moment the
// waiting worker is served its job; "put" lateness is from the fire time
// to the put's acknowledgement, 0 when it came before (firings are made
// ahead: docs/schedules.md, "When a firing is made"); the engine's own
// delayed-to-ready lateness is given as the share of jobs within 1, 5 and
// 10 ms (its histogram's buckets). --lead-ms 0 makes each firing at its
// fire time instead, as before firings were made ahead.
//
// With --spread, every schedule is "@every 1s" instead, anchored at its own
// millisecond of the second: the same 10,000 firings a second, spread
// evenly (about 10 a millisecond).
//
//   build/schedule_bench [--schedules N] [--seconds S] [--in-memory] [--spread] [--lead-ms L]
//
// Prints `name: value` lines, the headline (p99 lateness) last.
#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/clock.h"
#include "backend/local_backend.h"
#include "delivery/schedule.h"
#include "delivery/scheduler.h"
#include "store/rocks_store.h"

namespace {

using namespace delayq;

double Quantile(std::vector<int64_t>& v, double q) {
  if (v.empty()) return 0;
  size_t i = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(i), v.end());
  return static_cast<double>(v[i]) / 1000.0;
}

}  // namespace

int main(int argc, char** argv) {
  size_t schedules = 10'000;
  int seconds = 10;
  bool in_memory = false, spread = false;
  TimeMs lead_ms = delivery::Scheduler::Options{}.lead_ms;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--schedules") && i + 1 < argc) {
      schedules = std::strtoull(argv[++i], nullptr, 10);
    } else if (!std::strcmp(argv[i], "--seconds") && i + 1 < argc) {
      seconds = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--in-memory")) {
      in_memory = true;
    } else if (!std::strcmp(argv[i], "--spread")) {
      spread = true;
    } else if (!std::strcmp(argv[i], "--lead-ms") && i + 1 < argc) {
      lead_ms = std::atoll(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: %s [--schedules N] [--seconds S] [--in-memory] [--spread] "
                   "[--lead-ms L]\n",
                   argv[0]);
      return 2;
    }
  }
  char tmpl[] = "/tmp/delayq-schedule-bench-XXXXXX";
  // Destroyed in reverse: the backend (and its writer thread) first, then
  // the store, then its directory.
  struct RemovedAtExit {
    std::string dir;
    ~RemovedAtExit() {
      if (!dir.empty()) std::filesystem::remove_all(dir);
    }
  } removed;
  std::string& dir = removed.dir;
  std::unique_ptr<store::RocksStore> rocks;
  if (!in_memory) {
    if (mkdtemp(tmpl) == nullptr) return 1;
    dir = tmpl;
    auto r = store::RocksStore::Open({dir, store::FsyncPolicy::kEverySec});
    if (!r.ok()) {
      std::fprintf(stderr, "store: %s\n", r.status().ToString().c_str());
      return 1;
    }
    rocks = std::move(r).value();
  }
  boost::asio::io_context io(BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO);
  backend::Clock clock;
  backend::LocalBackend::Options bo;
  bo.store = rocks.get();
  bo.journal = rocks != nullptr ? rocks->journal() : nullptr;
  backend::LocalBackend backend(io, bo, clock);
  if (!backend.Recover(nullptr, 1u << 16).ok()) return 1;

  // The schedules, as PUT /schedules/{name} stores them.
  size_t stored = 0;
  for (size_t i = 0; i < schedules; ++i) {
    delivery::Schedule s;
    s.name = "s" + std::to_string(i);
    s.cron = spread ? "@every 1s" : "* * * * * *";
    s.topic = "t" + std::to_string(i % 100);
    s.job.body = "tick";
    s.anchor_ms = clock.Now() / 1000 * 1000 + static_cast<TimeMs>(i * 1000 / schedules);
    backend.PutObject(ObjectKind::kSchedule, s.name, delivery::ScheduleToJson(s),
                      [&](Status st) { stored += st.ok(); });
  }
  while (stored < schedules) {
    io.restart();
    io.run_one_for(std::chrono::milliseconds(10));
  }
  io.restart();

  // The first two seconds' firings start with the list itself: left out.
  const TimeMs counted_from = clock.Now() + 2000;
  std::vector<int64_t> put_late_us, served_late_us;
  put_late_us.reserve(schedules * static_cast<size_t>(seconds + 1));
  served_late_us.reserve(schedules * static_cast<size_t>(seconds + 1));
  delivery::Scheduler::Options so;
  so.lead_ms = lead_ms;
  so.on_made = [&](TimeMs fire_ms, int64_t us) {
    if (fire_ms >= counted_from) put_late_us.push_back(us);
  };
  so.on_error = [](std::string_view name, const Status& st) {
    std::fprintf(stderr, "schedule %.*s: %s\n", static_cast<int>(name.size()), name.data(),
                 st.ToString().c_str());
  };
  delivery::Scheduler scheduler(io, backend, clock, so);
  scheduler.Start();
  // The worker: one session watching every topic, served up to 1,000 jobs
  // a reserve, deleting each.
  const SessionId worker = backend.OpenSession();
  for (size_t i = 0; i < std::min<size_t>(schedules, 100); ++i)
    (void)backend.Watch(worker, "t" + std::to_string(i));
  (void)backend.Ignore(worker, "default");
  uint64_t served = 0, early = 0;
  std::function<void()> reserve = [&] {
    ReserveRequest r;
    r.session = worker;
    r.count = 1000;
    backend.Reserve(r, [&](Status st, backend::Jobs jobs) {
      if (!st.ok()) return;
      const int64_t now_us = clock.NowUs();
      for (const JobView& j : jobs) {
        const TimeMs fire_ms = std::strtoll(j.key.data() + j.key.rfind('@') + 1, nullptr, 10);
        served++;
        if (now_us < fire_ms * 1000) early++;
        if (fire_ms >= counted_from) served_late_us.push_back(now_us - fire_ms * 1000);
      }
      std::vector<JobId> ids;
      for (const JobView& j : jobs) ids.push_back(j.id);
      for (JobId id : ids) backend.Delete(worker, id, [](Result<JobChange>) {});
      boost::asio::post(io, reserve);
    });
  };
  reserve();
  const auto t0 = std::chrono::steady_clock::now();
  std::clock_t cpu0 = std::clock();
  io.run_for(std::chrono::seconds(seconds));
  const double cpu_s = static_cast<double>(std::clock() - cpu0) / CLOCKS_PER_SEC;
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  scheduler.Stop();

  const uint64_t made = scheduler.stats().made;
  std::printf("schedules: %zu\n", schedules);
  std::printf("store: %s\n", in_memory ? "none" : "rocksdb+journal everysec");
  std::printf("firing_times: %s\n", spread ? "spread over each second" : "all at each second");
  std::printf("firings_made: %" PRIu64 "\n", made);
  std::printf("firings_failed: %" PRIu64 "\n", scheduler.stats().failed);
  std::printf("firings_made_elsewhere: %" PRIu64 "\n", scheduler.stats().elsewhere);
  std::printf("schedules_loaded: %" PRIu64 "\n", scheduler.stats().schedules);
  std::printf("firings_per_s: %.0f\n", static_cast<double>(made) / wall_s);
  std::printf("cpu_per_firing_us: %.2f\n",
              cpu_s * 1e6 / static_cast<double>(std::max<uint64_t>(made, 1)));
  std::printf("lead_ms: %lld\n", static_cast<long long>(lead_ms));
  std::printf("jobs_served: %" PRIu64 "\n", served);
  std::printf("jobs_served_early: %" PRIu64 "\n", early);
  std::printf("put_lateness_p50_ms: %.2f\n", Quantile(put_late_us, 0.50));
  std::printf("put_lateness_p99_ms: %.2f\n", Quantile(put_late_us, 0.99));
  if (const EngineMetrics* m = backend.engine_metrics(); m != nullptr && m->lateness.count > 0) {
    std::printf("made_ready_from_delayed: %" PRIu64 "\n", m->lateness.count);
    // The share of delayed jobs made ready within each bound (its buckets).
    const LatencyHistogram& h = m->lateness;
    uint64_t within = 0;
    for (size_t i = 0; i < h.counts.size() - 1; ++i) {
      within += h.counts[i];
      const int64_t bound = LatencyHistogram::kBoundsUs[i];
      if (bound == 1'000 || bound == 5'000 || bound == 10'000)
        std::printf("ready_within_%lld_ms: %.4f\n", static_cast<long long>(bound / 1000),
                    static_cast<double>(within) / static_cast<double>(h.count));
    }
  }
  std::printf("lateness_p50_ms: %.2f\n", Quantile(served_late_us, 0.50));
  std::printf("lateness_max_ms: %.2f\n", Quantile(served_late_us, 1.0));
  std::printf("lateness_p99_ms: %.2f\n", Quantile(served_late_us, 0.99));
  return 0;
}
