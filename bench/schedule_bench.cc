// How late 10,000 schedules firing every second put their jobs: the
// scheduler (delivery/scheduler) and a Local backend in this process, on
// one loop as in delayqd, with the store of --fsync everysec (RocksDB and
// its journal in a temporary directory) or none (--in-memory). Every
// schedule is "* * * * * *": all of them fall due at the same millisecond,
// the worst case for one loop. Lateness is from the fire time to the put's
// acknowledgement (after the journal's append).
//
// With --spread, every schedule is "@every 1s" instead, anchored at its own
// millisecond of the second: the same 10,000 firings a second, spread
// evenly (about 10 a millisecond).
//
//   build/schedule_bench [--schedules N] [--seconds S] [--in-memory] [--spread]
//
// Prints `name: value` lines, the headline (p99 lateness) last.
#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
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
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--schedules") && i + 1 < argc) {
      schedules = std::strtoull(argv[++i], nullptr, 10);
    } else if (!std::strcmp(argv[i], "--seconds") && i + 1 < argc) {
      seconds = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--in-memory")) {
      in_memory = true;
    } else if (!std::strcmp(argv[i], "--spread")) {
      spread = true;
    } else {
      std::fprintf(stderr, "usage: %s [--schedules N] [--seconds S] [--in-memory] [--spread]\n",
                   argv[0]);
      return 2;
    }
  }
  char tmpl[] = "/tmp/delayq-schedule-bench-XXXXXX";
  std::string dir;
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

  std::vector<int64_t> late_us;
  late_us.reserve(schedules * static_cast<size_t>(seconds + 1));
  TimeMs first_fire = kNever;
  delivery::Scheduler::Options so;
  so.on_made = [&](TimeMs fire_ms, int64_t us) {
    // The first second's firings start with the list itself: left out.
    if (first_fire == kNever) first_fire = fire_ms;
    if (fire_ms > first_fire) late_us.push_back(us);
  };
  so.on_error = [](std::string_view name, const Status& st) {
    std::fprintf(stderr, "schedule %.*s: %s\n", static_cast<int>(name.size()), name.data(),
                 st.ToString().c_str());
  };
  delivery::Scheduler scheduler(io, backend, clock, so);
  scheduler.Start();
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
  std::printf("lateness_p50_ms: %.2f\n", Quantile(late_us, 0.50));
  std::printf("lateness_max_ms: %.2f\n", Quantile(late_us, 1.0));
  std::printf("lateness_p99_ms: %.2f\n", Quantile(late_us, 0.99));
  if (!dir.empty()) {
    rocks.reset();
    std::filesystem::remove_all(dir);
  }
  return 0;
}
