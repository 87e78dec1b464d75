// Engine benchmark: the delayq engine (src/core) against a baseline built from
// the standard library -- a binary heap of (due, id), a hash map of jobs and a
// second heap of (priority, id) as the ready queue -- doing the same work on
// the same random job stream. Prints `name: value` lines on stdout, the
// headline figure (engine_vs_heap_at_10M) last; progress goes to stderr.
//
//   build/engine_bench            full run: 1K, 1M and 10M pending jobs
//   build/engine_bench --quick    smoke run: 1K, 10K and 100K (also DELAYQ_BENCH_QUICK=1)
//   build/engine_bench --no-fork  every phase in this process (for profilers)
//   build/engine_bench --ticks-per-ms 1   the engine's clock in milliseconds
//                                 (default 1000: microseconds, as the Local
//                                 backend runs it)
//
// Each phase runs in its own forked child, so that one phase's memory (and
// the allocator state it leaves behind) cannot distort the next phase's time
// or resident-set delta. What each figure means: docs/benchmarks.md.
#include <fcntl.h>
#include <malloc.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <memory>
#include <queue>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "delayq/engine.h"
#include "delayq/status.h"
#include "delayq/types.h"

namespace {

using delayq::JobId;
using delayq::TimeMs;
using Clock = std::chrono::steady_clock;

constexpr size_t kBodySize = 64;
constexpr uint64_t kSeed = 0x64656c6179710001;  // same on both sides
constexpr uint64_t kPutsPerMs = 64;             // K: jobs put per virtual millisecond
constexpr uint64_t kPriorities = 4;             // priorities 1024 .. 1027, uniform

bool g_fork = true;  // false: --no-fork
// The engine's ticks per millisecond (--ticks-per-ms; EngineOptions). Both
// sides take their times in ticks: with microseconds, the K puts of a
// virtual millisecond spread over it, so their due times differ within the
// millisecond, as a server's do.
TimeMs g_ticks_per_ms = 1000;

// The instant of the k-th put of virtual millisecond `ms`, in ticks.
TimeMs PutTick(TimeMs ms, uint64_t k) {
  return ms * g_ticks_per_ms + static_cast<TimeMs>(k) * g_ticks_per_ms / kPutsPerMs;
}
TimeMs Tick(TimeMs ms) { return ms * g_ticks_per_ms; }
// The prefill's puts spread over virtual millisecond 0 (with microseconds;
// all at 0 with milliseconds); the timed loop then starts at millisecond 1.
TimeMs PrefillTick(uint64_t i, uint64_t n) {
  return static_cast<TimeMs>(i * static_cast<uint64_t>(g_ticks_per_ms) / n);
}
TimeMs FirstMs() { return g_ticks_per_ms > 1 ? 1 : 0; }

[[noreturn]] void Fail(const char* file, int line, const char* what) {
  std::fprintf(stderr, "engine_bench: check failed at %s:%d: %s\n", file, line, what);
  std::fflush(stderr);
  std::abort();
}
#define BENCH_CHECK(cond)                         \
  do {                                            \
    if (!(cond)) Fail(__FILE__, __LINE__, #cond); \
  } while (0)

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// CPU time of this process (user + system; the phases are single-threaded).
// The figures use it rather than wall time: on a shared machine a phase may
// spend part of its wall time waiting for a core.
double CpuSeconds() {
  timespec ts{};
  BENCH_CHECK(::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) == 0);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Accumulates CPU and wall time over one or more timed stretches.
class Stopwatch {
 public:
  void Start() {
    wall_start_ = Clock::now();
    cpu_start_ = CpuSeconds();
  }
  void Stop() {
    cpu_ += CpuSeconds() - cpu_start_;
    wall_ += Seconds(Clock::now() - wall_start_);
  }
  double cpu() const { return cpu_; }
  double wall() const { return wall_; }

 private:
  Clock::time_point wall_start_;
  double cpu_start_ = 0;
  double cpu_ = 0, wall_ = 0;
};

// "1K", "10K", "1M", "10M": how figures are named.
std::string SizeLabel(uint64_t n) {
  if (n >= 1'000'000 && n % 1'000'000 == 0) return std::to_string(n / 1'000'000) + "M";
  if (n >= 1'000 && n % 1'000 == 0) return std::to_string(n / 1'000) + "K";
  return std::to_string(n);
}

void PrintFigure(const std::string& name, double value, int decimals) {
  std::printf("%s: %.*f\n", name.c_str(), decimals, value);
  std::fflush(stdout);
}
void PrintCount(const std::string& name, uint64_t value) {
  std::printf("%s: %" PRIu64 "\n", name.c_str(), value);
  std::fflush(stdout);
}

// ---------------------------------------------------------------------------
// The workload
// ---------------------------------------------------------------------------

// splitmix64: fast, and the same sequence on every platform.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;
    z = (z ^ (z >> 27)) * 0x94d049bb133111eb;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n), n < 2^32 (multiply-shift, no division).
  uint64_t Below(uint64_t n) { return ((Next() >> 32) * n) >> 32; }

 private:
  uint64_t state_;
};

// Steady state: every virtual millisecond K jobs are put with a delay uniform
// in [1, W]; then the clock advances 1 ms, the jobs that fell due fire, and
// each is reserved and deleted. A job stays delayed (W + 1) / 2 ms on
// average, so K (W + 1) / 2 jobs are pending: W is chosen to make that N.
struct Workload {
  uint64_t pending = 0;  // N
  TimeMs window = 0;     // W
  uint64_t ops = 0;      // M: timed operations, a multiple of K
};

Workload MakeWorkload(uint64_t pending, uint64_t ops) {
  Workload w;
  w.pending = pending;
  w.window = std::max<TimeMs>(1, std::llround(2.0 * static_cast<double>(pending) / kPutsPerMs) - 1);
  w.ops = std::max<uint64_t>(1, (ops + kPutsPerMs - 1) / kPutsPerMs) * kPutsPerMs;
  return w;
}

struct JobSpec {
  TimeMs delay;
  uint32_t priority;
};

// The job stream both sides consume: identical for the same seed.
class JobStream {
 public:
  JobStream(uint64_t seed, TimeMs window) : rng_(seed), window_(static_cast<uint64_t>(window)) {}

  // A job of the prefill. In the steady state the time left until a pending
  // job is due has density proportional to (W - t): the minimum of two
  // uniform draws has exactly that shape, so the prefilled wheel looks as if
  // the steady workload had been running for W ms already.
  JobSpec Prefill() {
    const uint64_t a = 1 + rng_.Below(window_);
    const uint64_t b = 1 + rng_.Below(window_);
    return {static_cast<TimeMs>(std::min(a, b)), Priority()};
  }
  // A job of the measured loop: delay uniform in [1, W].
  JobSpec Steady() { return {static_cast<TimeMs>(1 + rng_.Below(window_)), Priority()}; }

 private:
  uint32_t Priority() {
    return delayq::kDefaultPriority + static_cast<uint32_t>(rng_.Below(kPriorities));
  }
  Rng rng_;
  uint64_t window_;
};

const std::string& Body() {
  static const std::string body = [] {
    std::string b(kBodySize, '\0');
    for (size_t i = 0; i < kBodySize; ++i) b[i] = static_cast<char>('a' + i % 26);
    return b;
  }();
  return body;
}

// What a side did in the measured loop. The checksum folds the reserved ids
// in reserve order: equal on both sides only if they served the same jobs in
// the same order.
struct Tally {
  uint64_t fired = 0, reserved = 0, deleted = 0;
  uint64_t checksum = 0xcbf29ce484222325;
  void Reserved(JobId id) {
    ++reserved;
    checksum = (checksum ^ id) * 0x100000001b3;
  }
};

// ---------------------------------------------------------------------------
// The two sides
// ---------------------------------------------------------------------------

class EngineSide {
 public:
  EngineSide()
      : engine_(delayq::EngineOptions{.ticks_per_ms = g_ticks_per_ms, .record_mutations = false}),
        session_(engine_.OpenSession(0)) {
    request_.body = Body();
  }

  void Put(TimeMs now, const JobSpec& spec) {
    request_.delay_ms = spec.delay;
    request_.priority = spec.priority;
    const auto result = engine_.Put(now, session_, request_);
    BENCH_CHECK(result.ok() && result->state == delayq::JobState::kDelayed);
  }

  void Advance(TimeMs now) { engine_.Advance(now); }

  // Reserves (timeout 0) and deletes every ready job. The engine does not
  // report firings; `fired` is derived at the end from the delayed count.
  void ReserveAndDeleteAll(TimeMs now, Tally* tally) {
    const delayq::ReserveRequest request{.session = session_, .timeout_ms = 0, .count = 1};
    for (;;) {
      auto reserved = engine_.Reserve(now, request);
      if (!reserved.ok()) {
        BENCH_CHECK(reserved.code() == delayq::Code::kTimedOut);
        return;
      }
      BENCH_CHECK(reserved->size() == 1);
      for (const JobId id : *reserved) {
        tally->Reserved(id);
        BENCH_CHECK(engine_.Delete(now, session_, id).ok());
        ++tally->deleted;
      }
    }
  }

  // After the loop: nothing may be left ready or reserved, and nothing
  // queued for sessions. Returns the delayed jobs left.
  uint64_t FinishAndCountPending(TimeMs now, uint64_t put_total, Tally* tally) {
    const delayq::EngineStats stats = engine_.Stats(now);
    BENCH_CHECK(stats.ready == 0 && stats.reserved == 0 && stats.buried == 0);
    std::vector<delayq::Event> events;
    engine_.TakeEvents(&events);
    BENCH_CHECK(events.empty());
    BENCH_CHECK(put_total >= stats.delayed);
    tally->fired = put_total - stats.delayed;  // every job not delayed has fired
    return stats.delayed;
  }

  size_t MemoryUsage() const { return engine_.MemoryUsage(); }

 private:
  delayq::Engine engine_;
  delayq::SessionId session_;
  delayq::PutRequest request_;
};

// The baseline: what a straightforward delay queue on the standard library
// looks like. Same logical steps as the engine: put into the map and the due
// heap; firing pops due entries into the ready heap; reserve pops the ready
// heap and marks the job reserved; delete erases it from the map. (It keeps
// no TTR deadline and no session ownership, which the engine does.)
class HeapSide {
 public:
  enum class State : uint8_t { kReady, kDelayed, kReserved };
  struct Job {
    JobId id = 0;
    std::string topic;
    std::string body;
    uint32_t priority = 0;
    State state = State::kDelayed;
    TimeMs due = 0;
    TimeMs created = 0;
    TimeMs ttr = 0;
    TimeMs deadline = 0;
    uint32_t reserves = 0, timeouts = 0, releases = 0, buries = 0, kicks = 0;
    uint32_t max_tries = 0;
  };

  void Put(TimeMs now, const JobSpec& spec) {
    const JobId id = next_id_++;
    Job job;
    job.id = id;
    job.topic = topic_;
    job.body = Body();
    job.priority = spec.priority;
    job.due = now + spec.delay * g_ticks_per_ms;
    job.created = now;
    job.ttr = 60'000;
    const bool delayed = job.due > now;
    job.state = delayed ? State::kDelayed : State::kReady;
    const auto [it, inserted] = jobs_.emplace(id, std::move(job));
    BENCH_CHECK(inserted && delayed);
    if (delayed) {
      delayed_.emplace(it->second.due, id);
    } else {
      ready_.emplace(it->second.priority, id);
    }
  }

  void Advance(TimeMs now) {
    while (!delayed_.empty() && delayed_.top().first <= now) {
      const auto [due, id] = delayed_.top();
      delayed_.pop();
      const auto it = jobs_.find(id);
      // A deleted or rescheduled job leaves a stale entry behind (lazy
      // cancel); none occur in this workload, but a real queue checks.
      if (it == jobs_.end() || it->second.state != State::kDelayed || it->second.due != due) {
        continue;
      }
      it->second.state = State::kReady;
      ready_.emplace(it->second.priority, id);
      ++fired_;
    }
  }

  void ReserveAndDeleteAll(TimeMs now, Tally* tally) {
    while (!ready_.empty()) {
      const auto [priority, id] = ready_.top();
      ready_.pop();
      const auto it = jobs_.find(id);
      if (it == jobs_.end() || it->second.state != State::kReady ||
          it->second.priority != priority) {
        continue;
      }
      Job& job = it->second;
      job.state = State::kReserved;
      ++job.reserves;
      job.deadline = now + job.ttr * g_ticks_per_ms;
      tally->Reserved(id);
      Delete(id);
      ++tally->deleted;
    }
  }

  uint64_t FinishAndCountPending(TimeMs /*now*/, uint64_t /*put_total*/, Tally* tally) {
    BENCH_CHECK(ready_.empty());
    BENCH_CHECK(delayed_.size() == jobs_.size());
    tally->fired = fired_;
    return jobs_.size();
  }

  size_t MemoryUsage() const { return 0; }  // not tracked

 private:
  void Delete(JobId id) {
    const auto it = jobs_.find(id);
    BENCH_CHECK(it != jobs_.end() && it->second.state == State::kReserved);
    jobs_.erase(it);
  }

  template <typename T>
  using MinHeap = std::priority_queue<T, std::vector<T>, std::greater<T>>;

  std::unordered_map<JobId, Job> jobs_;
  MinHeap<std::pair<TimeMs, JobId>> delayed_;
  MinHeap<std::pair<uint32_t, JobId>> ready_;
  JobId next_id_ = 1;  // the engine's ids also start at 1
  uint64_t fired_ = 0;
  std::string topic_ = "default";
};

// ---------------------------------------------------------------------------
// Phases (each run in a child process)
// ---------------------------------------------------------------------------

// What a phase hands back to the parent through a pipe.
struct PhaseResult {
  double prefill_seconds = 0;  // wall
  double seconds = 0;          // the timed part, CPU time
  double wall_seconds = 0;     // the timed part, wall time
  uint64_t puts = 0;           // timed puts (operations)
  uint64_t fired = 0, reserved = 0, deleted = 0, pending_after = 0;
  uint64_t checksum = 0;
  int64_t rss_delta = 0;     // bytes
  int64_t malloc_delta = 0;  // bytes
  uint64_t reported = 0;     // Engine::MemoryUsage()
};
static_assert(std::is_trivially_copyable_v<PhaseResult>);

// The side lives on the heap and, in a forked child, is never destroyed:
// the child exits right after reporting (tearing down 10M jobs would only
// cost time).
template <typename Side>
struct SideHolder {
  std::unique_ptr<Side> side = std::make_unique<Side>();
  ~SideHolder() {
    if (g_fork) (void)side.release();  // NOLINT: freed by the child's exit
  }
};

template <typename Side>
double Prefill(Side& side, JobStream& stream, const Workload& w) {
  const auto start = Clock::now();
  for (uint64_t i = 0; i < w.pending; ++i) side.Put(PrefillTick(i, w.pending), stream.Prefill());
  return Seconds(Clock::now() - start);
}

template <typename Side>
void Finish(Side& side, TimeMs now, const Workload& w, const Tally& tally_in, PhaseResult* r) {
  Tally tally = tally_in;
  r->puts = w.ops;
  r->pending_after = side.FinishAndCountPending(now, w.pending + w.ops, &tally);
  r->fired = tally.fired;
  r->reserved = tally.reserved;
  r->deleted = tally.deleted;
  r->checksum = tally.checksum;
  BENCH_CHECK(r->fired == r->reserved && r->reserved == r->deleted);
  BENCH_CHECK(r->pending_after + r->deleted == w.pending + w.ops);
}

// Resident set size from /proc/self/statm, read without allocating.
int64_t ResidentBytes() {
  const int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  BENCH_CHECK(fd >= 0);
  char buf[256];
  const ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
  ::close(fd);
  BENCH_CHECK(n > 0);
  buf[n] = '\0';
  unsigned long long size_pages = 0, resident_pages = 0;  // NOLINT(runtime/int)
  BENCH_CHECK(std::sscanf(buf, "%llu %llu", &size_pages, &resident_pages) == 2);
  return static_cast<int64_t>(resident_pages) * ::sysconf(_SC_PAGESIZE);
}

// Bytes handed out by malloc (small chunks plus mmapped ones).
int64_t MallocInUse() {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  const struct mallinfo2 mi = ::mallinfo2();
  return static_cast<int64_t>(mi.uordblks + mi.hblkhd);
#else
  return 0;
#endif
}

// put -> fire -> reserve -> delete, all timed. With `measure_memory`, also
// what building the side and prefilling it added to the resident set and to
// malloc's books (sampled before the timed loop starts).
template <typename Side>
PhaseResult RunLifecycle(const Workload& w, bool measure_memory) {
  PhaseResult r;
  const int64_t rss_before = measure_memory ? ResidentBytes() : 0;
  const int64_t malloc_before = measure_memory ? MallocInUse() : 0;
  SideHolder<Side> holder;
  Side& side = *holder.side;
  JobStream stream(kSeed, w.window);
  r.prefill_seconds = Prefill(side, stream, w);
  if (measure_memory) {
    r.rss_delta = ResidentBytes() - rss_before;
    r.malloc_delta = MallocInUse() - malloc_before;
    r.reported = side.MemoryUsage();
  }

  Tally tally;
  TimeMs now = FirstMs();
  const uint64_t steps = w.ops / kPutsPerMs;
  Stopwatch watch;
  watch.Start();
  for (uint64_t step = 0; step < steps; ++step) {
    for (uint64_t k = 0; k < kPutsPerMs; ++k) side.Put(PutTick(now, k), stream.Steady());
    ++now;
    side.Advance(Tick(now));
    side.ReserveAndDeleteAll(Tick(now), &tally);
  }
  watch.Stop();
  r.seconds = watch.cpu();
  r.wall_seconds = watch.wall();
  Finish(side, Tick(now), w, tally, &r);
  return r;
}

// put -> fire timed; the reserve and delete that keep the queue in its steady
// state run outside the clock, after every kPutFireSegmentMs virtual ms (so
// at most ~K * kPutFireSegmentMs jobs wait in the ready queue, and the clock
// is read once per ~4096 operations).
constexpr uint64_t kPutFireSegmentMs = 64;

template <typename Side>
PhaseResult RunPutFire(const Workload& w) {
  PhaseResult r;
  SideHolder<Side> holder;
  Side& side = *holder.side;
  JobStream stream(kSeed, w.window);
  r.prefill_seconds = Prefill(side, stream, w);

  Tally tally;
  TimeMs now = FirstMs();
  Stopwatch watch;
  const uint64_t steps = w.ops / kPutsPerMs;
  for (uint64_t step = 0; step < steps;) {
    const uint64_t segment_end = std::min(steps, step + kPutFireSegmentMs);
    watch.Start();
    for (; step < segment_end; ++step) {
      for (uint64_t k = 0; k < kPutsPerMs; ++k) side.Put(PutTick(now, k), stream.Steady());
      ++now;
      side.Advance(Tick(now));
    }
    watch.Stop();
    side.ReserveAndDeleteAll(Tick(now), &tally);
  }
  r.seconds = watch.cpu();
  r.wall_seconds = watch.wall();
  Finish(side, Tick(now), w, tally, &r);
  return r;
}

// Runs `phase` in a forked child (or inline with --no-fork) and returns its
// result; exits the benchmark if the child fails.
PhaseResult RunPhase(const std::string& label, const std::function<PhaseResult()>& phase) {
  std::fprintf(stderr, "engine_bench: %s ...\n", label.c_str());
  std::fflush(stderr);
  std::fflush(stdout);
  PhaseResult result;
  if (!g_fork) {
    result = phase();
  } else {
    int fds[2];
    BENCH_CHECK(::pipe(fds) == 0);
    const pid_t pid = ::fork();
    BENCH_CHECK(pid >= 0);
    if (pid == 0) {
      ::close(fds[0]);
      const PhaseResult r = phase();
      const char* p = reinterpret_cast<const char*>(&r);
      size_t left = sizeof(r);
      while (left > 0) {
        const ssize_t n = ::write(fds[1], p, left);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) ::_exit(3);
        p += n;
        left -= static_cast<size_t>(n);
      }
      ::_exit(0);
    }
    ::close(fds[1]);
    char* p = reinterpret_cast<char*>(&result);
    size_t got = 0;
    while (got < sizeof(result)) {
      const ssize_t n = ::read(fds[0], p + got, sizeof(result) - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    ::close(fds[0]);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (got != sizeof(result) || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::fprintf(stderr, "engine_bench: phase \"%s\" failed (%s %d)\n", label.c_str(),
                   WIFSIGNALED(status) ? "signal" : "exit status",
                   WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
      std::exit(1);
    }
  }
  std::fprintf(stderr, "engine_bench: %s: prefill %.2f s; timed %.2f s CPU, %.2f s wall\n",
               label.c_str(), result.prefill_seconds, result.seconds, result.wall_seconds);
  return result;
}

double OpsPerSecond(const PhaseResult& r) {
  return r.seconds > 0 ? static_cast<double>(r.puts) / r.seconds : 0;
}

// Both sides must have done exactly the same work.
void CheckSameWork(const std::string& what, const PhaseResult& e, const PhaseResult& h) {
  if (e.puts == h.puts && e.fired == h.fired && e.reserved == h.reserved &&
      e.deleted == h.deleted && e.pending_after == h.pending_after && e.checksum == h.checksum) {
    return;
  }
  std::fprintf(stderr,
               "engine_bench: %s: the sides did different work\n"
               "  engine: puts %" PRIu64 " fired %" PRIu64 " reserved %" PRIu64 " deleted %" PRIu64
               " pending %" PRIu64 " checksum %016" PRIx64
               "\n"
               "  heap:   puts %" PRIu64 " fired %" PRIu64 " reserved %" PRIu64 " deleted %" PRIu64
               " pending %" PRIu64 " checksum %016" PRIx64 "\n",
               what.c_str(), e.puts, e.fired, e.reserved, e.deleted, e.pending_after, e.checksum,
               h.puts, h.fired, h.reserved, h.deleted, h.pending_after, h.checksum);
  std::exit(1);
}

struct SidePair {
  PhaseResult engine, heap;
};

// One lifecycle comparison at N pending, each side in its own child.
SidePair LifecycleAt(const Workload& w, bool measure_memory) {
  const std::string at = "_at_" + SizeLabel(w.pending);
  SidePair p;
  p.engine = RunPhase("engine lifecycle" + at,
                      [&] { return RunLifecycle<EngineSide>(w, measure_memory); });
  p.heap =
      RunPhase("heap lifecycle" + at, [&] { return RunLifecycle<HeapSide>(w, measure_memory); });
  CheckSameWork("lifecycle" + at, p.engine, p.heap);
  return p;
}

// The shared counts and both throughputs; returns engine / heap.
double PrintLifecycle(const Workload& w, const SidePair& p) {
  const std::string at = "_at_" + SizeLabel(w.pending);
  PrintCount("lifecycle_window_ms" + at, static_cast<uint64_t>(w.window));
  PrintCount("lifecycle_puts" + at, p.engine.puts);
  PrintCount("lifecycle_fired" + at, p.engine.fired);
  PrintCount("lifecycle_reserved" + at, p.engine.reserved);
  PrintCount("lifecycle_deleted" + at, p.engine.deleted);
  PrintCount("lifecycle_pending_after" + at, p.engine.pending_after);
  PrintFigure("engine_lifecycle_ops_per_s" + at, OpsPerSecond(p.engine), 0);
  PrintFigure("heap_lifecycle_ops_per_s" + at, OpsPerSecond(p.heap), 0);
  return OpsPerSecond(p.engine) / OpsPerSecond(p.heap);
}

void PrintMemory(const Workload& w, const SidePair& p) {
  const std::string at = "_at_" + SizeLabel(w.pending);
  const auto per_job = [&](int64_t bytes) {
    return static_cast<double>(bytes) / static_cast<double>(w.pending) -
           static_cast<double>(kBodySize);
  };
  PrintFigure("engine_bytes_per_job" + at + "_beyond_body", per_job(p.engine.rss_delta), 1);
  PrintFigure("engine_malloc_bytes_per_job" + at + "_beyond_body", per_job(p.engine.malloc_delta),
              1);
  PrintFigure("engine_reported_bytes_per_job" + at + "_beyond_body",
              per_job(static_cast<int64_t>(p.engine.reported)), 1);
  PrintFigure("heap_bytes_per_job" + at + "_beyond_body", per_job(p.heap.rss_delta), 1);
  PrintFigure("heap_malloc_bytes_per_job" + at + "_beyond_body", per_job(p.heap.malloc_delta), 1);
}

void PutFireAt(uint64_t pending, uint64_t ops) {
  const Workload w = MakeWorkload(pending, ops);
  const std::string at = "_at_" + SizeLabel(pending);
  const PhaseResult e = RunPhase("engine put+fire" + at, [&] { return RunPutFire<EngineSide>(w); });
  const PhaseResult h = RunPhase("heap put+fire" + at, [&] { return RunPutFire<HeapSide>(w); });
  CheckSameWork("put_fire" + at, e, h);
  PrintFigure("engine_put_fire_ops_per_s" + at, OpsPerSecond(e), 0);
  PrintFigure("heap_put_fire_ops_per_s" + at, OpsPerSecond(h), 0);
}

struct Plan {
  uint64_t small, medium, large;  // the three sizes (1K, 1M, 10M)
  uint64_t small_ops, medium_ops, large_ops;
  uint64_t put_fire_ops;  // put+fire runs at `medium`
};

void Usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--quick] [--no-fork] [--ticks-per-ms N]\n"
               "  --quick    smoke-sized run (1K, 10K, 100K jobs); also DELAYQ_BENCH_QUICK=1\n"
               "  --no-fork  run every phase in this process (for profilers)\n"
               "  --ticks-per-ms N  the engine's clock: 1 (milliseconds) to 1000\n"
               "             (microseconds, the default: the Local backend's)\n",
               argv0);
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  if (const char* env = std::getenv("DELAYQ_BENCH_QUICK"); env && *env && std::strcmp(env, "0")) {
    quick = true;
  }
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--quick") {
      quick = true;
    } else if (arg == "--no-fork") {
      g_fork = false;
      std::fprintf(stderr,
                   "engine_bench: --no-fork: phases share one heap, so the memory figures "
                   "are not meaningful\n");
    } else if (arg == "--ticks-per-ms" && i + 1 < argc) {
      g_ticks_per_ms = std::atoll(argv[++i]);
      if (g_ticks_per_ms < 1 || g_ticks_per_ms > 1000) {
        Usage(argv[0]);
        return 2;
      }
    } else if (arg == "--help" || arg == "-h") {
      Usage(argv[0]);
      return 0;
    } else {
      Usage(argv[0]);
      return 2;
    }
  }

  const Plan plan =
      quick ? Plan{1'000, 10'000, 100'000, 200'000, 200'000, 200'000, 200'000}
            : Plan{1'000, 1'000'000, 10'000'000, 8'000'000, 4'000'000, 4'000'000, 8'000'000};

  PrintCount("engine_ticks_per_ms", static_cast<uint64_t>(g_ticks_per_ms));
  const Workload small = MakeWorkload(plan.small, plan.small_ops);
  const double small_ratio = PrintLifecycle(small, LifecycleAt(small, false));
  PrintFigure("engine_vs_heap_at_" + SizeLabel(plan.small), small_ratio, 2);

  const Workload medium = MakeWorkload(plan.medium, plan.medium_ops);
  const double medium_ratio = PrintLifecycle(medium, LifecycleAt(medium, false));
  PrintFigure("engine_vs_heap_at_" + SizeLabel(plan.medium), medium_ratio, 2);

  PutFireAt(plan.medium, plan.put_fire_ops);

  // The largest size also yields the memory figures: each side's child
  // samples its memory after the prefill, before the timed loop.
  const Workload large = MakeWorkload(plan.large, plan.large_ops);
  const SidePair large_pair = LifecycleAt(large, true);
  PrintMemory(large, large_pair);
  const double large_ratio = PrintLifecycle(large, large_pair);
  PrintFigure("engine_vs_heap_at_" + SizeLabel(plan.large), large_ratio, 2);  // headline
  return 0;
}
