// loadgen: a load generator that speaks the beanstalkd text protocol, so the
// same run can be pointed at delayqd and at beanstalkd.
//
//   build/loadgen --port 11300 --connections 50 --mode lifecycle --seconds 4
//
// Modes (each connection is one state machine; one outstanding request per
// connection unless pipelined):
//   put        put -> INSERTED, again. Latency: put round trip.
//              With --delay-s S (put and pipeline) each job is put delayed by
//              S whole seconds (default 0: ready at once).
//   lifecycle  put -> INSERTED, reserve -> RESERVED, delete -> DELETED, again.
//              Latency: the whole put+reserve+delete cycle of one job.
//   pipeline   up to --pipeline-depth puts in flight per connection; each batch
//              of replies is answered by one write refilling the pipeline.
//              Latency: put round trip (includes queueing in the pipeline).
//              With --delay-s and --jobs, a fast way to fill a server with
//              delayed jobs (bench/horizon_bench.sh).
//   lateness   --producers connections put jobs at --rate jobs/s in total with
//              delays uniform in 1..--max-delay-ms ms (--protocol-ms: delayq's
//              `put-ex <pri> <delay-ms> <ttr-ms> <bytes>`) or 1..max/1000 whole
//              seconds (classic `put`); --connections worker connections block
//              in `reserve` and delete each job. The body carries the job's due
//              time (client wall clock at send + delay, epoch us); lateness is
//              the arrival of RESERVED minus that due time, so it includes the
//              put's one-way trip and can be slightly negative when the server
//              rounds its clock to milliseconds.
//
// Single-threaded epoll, non-blocking sockets, level-triggered EPOLLIN, one
// recv per readiness event (the recvs of one epoll_wait, and then the sends
// they lead to, made in one batch through io_uring where the kernel allows:
// src/server/io_batch.h, as delayqd does; --no-io-uring: one call each), replies parsed in place
// from a per-connection buffer (split replies wait for the rest), requests formatted into a
// per-connection buffer and sent with one send per batch. Buffers, histograms
// and sample arrays are allocated before the clock starts; nothing is
// allocated per request.
//
// --busy-wait: poll epoll without ever sleeping. On loopback the sender of a
// segment pays for waking the process that waits for it, so a client that
// sleeps makes every reply cost the server a wake-up (an inter-processor
// interrupt on a virtual machine) that a client on another machine would not
// cost it. A client that polls takes that cost out of the server's figure
// (and uses a whole core itself).
//
// Output: `name: value` lines on stdout (jobs_per_s, latency_p50_us,
// latency_p99_us, ...; lateness_p50_ms / lateness_p99_ms in lateness mode);
// diagnostics on stderr. Exit status 0 on success, 1 on a usage or connection
// error, 2 on a protocol error (an unexpected reply) or a run that did not
// drain.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "server/io_batch.h"

namespace {

// ---------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------

[[noreturn]] void Die(int code, const char* fmt, ...) {
  std::fputs("loadgen: ", stderr);
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(stderr, fmt, ap);
  va_end(ap);
  std::fputc('\n', stderr);
  std::exit(code);
}

int64_t MonoNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

int64_t WallUs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1'000'000 + ts.tv_nsec / 1000;
}

double CpuSeconds() {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

struct Rng {  // splitmix64
  uint64_t s;
  uint64_t Next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
};

// Log-linear histogram of non-negative values (nanoseconds): exact below 256,
// then 128 buckets per power of two (relative error below 0.4% at the
// bucket's midpoint). Fixed size, no allocation after construction.
class Histogram {
 public:
  void Add(int64_t v) {
    if (v < 0) v = 0;
    ++counts_[Index(static_cast<uint64_t>(v))];
    ++total_;
    if (v > max_) max_ = v;
  }
  uint64_t total() const { return total_; }
  int64_t max() const { return max_; }
  // The value at quantile q (0..1]: the midpoint of the bucket holding the
  // ceil(q * total)-th smallest sample.
  double Quantile(double q) const {
    if (total_ == 0) return 0;
    uint64_t rank = static_cast<uint64_t>(std::ceil(q * static_cast<double>(total_)));
    rank = std::clamp<uint64_t>(rank, 1, total_);
    uint64_t seen = 0;
    for (size_t i = 0; i < kBuckets; ++i) {
      seen += counts_[i];
      if (seen >= rank) return std::min(Mid(i), static_cast<double>(max_));
    }
    return static_cast<double>(max_);
  }

 private:
  static constexpr size_t kBuckets = 256 + 56 * 128;
  static size_t Index(uint64_t v) {
    if (v < 256) return v;
    int msb = 63 - std::countl_zero(v);  // >= 8
    int shift = msb - 7;
    uint64_t mant = v >> shift;  // 128..255
    return 256 + static_cast<size_t>(msb - 8) * 128 + static_cast<size_t>(mant - 128);
  }
  static double Mid(size_t i) {
    if (i < 256) return static_cast<double>(i);
    size_t k = i - 256;
    int shift = static_cast<int>(k / 128) + 1;
    double lo = static_cast<double>((128 + k % 128) << shift);
    return lo + static_cast<double>(uint64_t{1} << shift) / 2;
  }
  uint64_t counts_[kBuckets] = {};
  uint64_t total_ = 0;
  int64_t max_ = 0;
};

// Appends the decimal form of v; returns the new end.
inline char* PutUint(char* p, uint64_t v) { return std::to_chars(p, p + 20, v).ptr; }

// Parses a decimal u64 at [p, end); returns the char after it, or nullptr.
inline const char* GetUint(const char* p, const char* end, uint64_t* out) {
  const char* start = p;
  uint64_t v = 0;
  while (p < end && *p >= '0' && *p <= '9') v = v * 10 + static_cast<uint64_t>(*p++ - '0');
  if (p == start) return nullptr;
  *out = v;
  return p;
}

// ---------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------

enum class Mode { kPut, kLifecycle, kPipeline, kLateness };

struct Options {
  std::string host = "127.0.0.1";
  std::string port = "11300";
  int connections = 1;
  Mode mode = Mode::kLifecycle;
  double seconds = 4;
  uint64_t jobs = 0;  // > 0: stop after this many jobs instead of --seconds
  double warmup = 0.5;
  double max_seconds = 120;  // hard cap on the whole run (--jobs mode, draining)
  size_t body_size = 64;
  int depth = 64;
  bool protocol_ms = false;
  std::string tube = "loadgen";
  std::string auth;  // a token's secret: `auth` first on every connection
  int producers = 2;
  double rate = 10000;
  uint32_t max_delay_ms = 2000;
  uint32_t priority = 1024;
  uint32_t delay_s = 0;      // put / pipeline: classic put delay, whole seconds
  bool random_body = false;  // put / lifecycle / pipeline: a fresh body per job
  bool io_uring = true;      // batch the socket calls through io_uring where possible
  bool busy_wait = false;    // poll epoll with a zero timeout instead of sleeping
};

const char kUsage[] =
    "usage: loadgen [--host H] [--port P] [--connections N]\n"
    "               [--mode put|lifecycle|pipeline|lateness] [--seconds S | --jobs N]\n"
    "               [--warmup S] [--body-size B] [--pipeline-depth D] [--tube NAME]\n"
    "               [--producers P] [--rate JOBS_PER_S] [--max-delay-ms MS] [--protocol-ms]\n"
    "               [--max-seconds S] [--delay-s S] [--random-body] [--priority PRI]\n"
    "               [--no-io-uring] [--busy-wait] [--auth SECRET]\n"
    "  --host H            server address (default 127.0.0.1)\n"
    "  --port P            server port (default 11300)\n"
    "  --connections N     connections (lateness mode: worker connections); default 1\n"
    "  --mode M            put | lifecycle (put, reserve, delete) | pipeline | lateness\n"
    "  --seconds S         measured seconds (default 4); lateness: seconds of putting\n"
    "  --jobs N            instead of --seconds: stop after N jobs (no warm-up)\n"
    "  --warmup S          unmeasured seconds before the measurement (default 0.5;\n"
    "                      not used in lateness mode)\n"
    "  --body-size B       job body bytes (default 64; lateness needs >= 24)\n"
    "  --pipeline-depth D  puts in flight per connection in pipeline mode (default 64)\n"
    "  --tube NAME         tube to use and watch (default loadgen)\n"
    "  --auth SECRET       send `auth SECRET` first on every connection (delayqd's tokens)\n"
    "  --producers P       lateness: producer connections (default 2)\n"
    "  --rate R            lateness: jobs put per second, all producers (default 10000)\n"
    "  --max-delay-ms MS   lateness: delays are uniform in 1..MS ms, or in whole\n"
    "                      seconds 1..MS/1000 without --protocol-ms (default 2000)\n"
    "  --protocol-ms       lateness: put with delayq's put-ex (millisecond delay/ttr)\n"
    "  --max-seconds S     hard limit on the whole run (default 120)\n"
    "  --delay-s S         put, pipeline: put each job delayed by S whole seconds\n"
    "                      (classic put; default 0, ready at once)\n"
    "  --random-body       put, lifecycle, pipeline: random printable body per job\n"
    "                      (default: the same body of 'x' for every job)\n"
    "  --priority PRI      job priority (default 1024)\n"
    "  --no-io-uring       one system call per recv and send (default: the calls of\n"
    "                      one round of events in one batch through io_uring, where\n"
    "                      the kernel allows)\n"
    "  --busy-wait         never sleep in epoll: poll it (a whole core), so that the\n"
    "                      server's replies do not pay for waking the client\n";

Options ParseArgs(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::string v;
    bool has_v = false;
    if (auto eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string::npos) {
      v = a.substr(eq + 1);
      a = a.substr(0, eq);
      has_v = true;
    }
    auto value = [&]() -> std::string {
      if (has_v) return v;
      if (i + 1 >= argc) Die(1, "%s needs a value\n%s", a.c_str(), kUsage);
      return argv[++i];
    };
    auto num = [&](double lo, double hi) {
      std::string s = value();
      char* end = nullptr;
      errno = 0;
      double d = std::strtod(s.c_str(), &end);
      if (s.empty() || *end != '\0' || errno != 0 || !(d >= lo && d <= hi))
        Die(1, "bad value for %s: '%s' (expected %g..%g)", a.c_str(), s.c_str(), lo, hi);
      return d;
    };
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (a == "--host") {
      o.host = value();
    } else if (a == "--port") {
      o.port = std::to_string(static_cast<int>(num(1, 65535)));
    } else if (a == "--connections") {
      o.connections = static_cast<int>(num(1, 10000));
    } else if (a == "--mode") {
      std::string m = value();
      if (m == "put")
        o.mode = Mode::kPut;
      else if (m == "lifecycle")
        o.mode = Mode::kLifecycle;
      else if (m == "pipeline")
        o.mode = Mode::kPipeline;
      else if (m == "lateness")
        o.mode = Mode::kLateness;
      else
        Die(1, "unknown --mode '%s' (put, lifecycle, pipeline, lateness)", m.c_str());
    } else if (a == "--seconds") {
      o.seconds = num(0.001, 86400);
    } else if (a == "--jobs") {
      o.jobs = static_cast<uint64_t>(num(1, 1e12));
    } else if (a == "--warmup") {
      o.warmup = num(0, 3600);
    } else if (a == "--max-seconds") {
      o.max_seconds = num(0.001, 86400);
    } else if (a == "--body-size") {
      o.body_size = static_cast<size_t>(num(0, 1 << 20));
    } else if (a == "--pipeline-depth") {
      o.depth = static_cast<int>(num(1, 100000));
    } else if (a == "--protocol-ms") {
      o.protocol_ms = true;
    } else if (a == "--no-io-uring") {
      o.io_uring = false;
    } else if (a == "--busy-wait") {
      o.busy_wait = true;
    } else if (a == "--auth") {
      o.auth = value();
    } else if (a == "--tube") {
      o.tube = value();
      if (o.tube.empty() || o.tube.size() > 200) Die(1, "bad --tube name");
    } else if (a == "--producers") {
      o.producers = static_cast<int>(num(1, 10000));
    } else if (a == "--rate") {
      o.rate = num(1, 1e8);
    } else if (a == "--max-delay-ms") {
      o.max_delay_ms = static_cast<uint32_t>(num(1, 86'400'000));
    } else if (a == "--priority") {
      o.priority = static_cast<uint32_t>(num(0, 4294967295.0));
    } else if (a == "--delay-s") {
      o.delay_s = static_cast<uint32_t>(num(0, 4294967295.0));
    } else if (a == "--random-body") {
      o.random_body = true;
    } else {
      Die(1, "unknown argument '%s'\n%s", a.c_str(), kUsage);
    }
  }
  if (o.mode == Mode::kLateness && o.body_size < 24)
    Die(1, "lateness mode needs --body-size >= 24 (the body carries the due time)");
  if (o.mode == Mode::kLateness && !o.protocol_ms && o.max_delay_ms < 1000)
    Die(1, "lateness without --protocol-ms uses whole seconds: --max-delay-ms must be >= 1000");
  if (o.delay_s > 0 && o.mode == Mode::kLifecycle)
    Die(1, "--delay-s does not go with --mode lifecycle (it reserves each job at once)");
  if (o.delay_s > 0 && o.mode == Mode::kLateness)
    Die(1, "--delay-s does not go with --mode lateness (it draws its own delays)");
  if (o.mode != Mode::kPipeline) o.depth = 1;
  if (o.jobs > 0 || o.mode == Mode::kLateness) o.warmup = 0;
  return o;
}

// ---------------------------------------------------------------------------
// Connections
// ---------------------------------------------------------------------------

enum class Role : uint8_t { kPut, kLifecycle, kPipeline, kProducer, kWorker };
enum class Step : uint8_t { kIdle, kPut, kReserve, kDelete };

struct Conn {
  int fd = -1;
  int index = 0;
  Role role = Role::kPut;
  Step step = Step::kIdle;  // lifecycle / worker: what we wait for
  bool want_out = false;    // EPOLLOUT registered
  // Read buffer: [rpos, rlen) holds received, unparsed bytes.
  std::unique_ptr<char[]> rbuf;
  size_t rcap = 0, rpos = 0, rlen = 0;
  // Write buffer: [wpos, wlen) holds formatted, unsent bytes.
  std::unique_ptr<char[]> wbuf;
  size_t wcap = 0, wpos = 0, wlen = 0;
  // Send times (monotonic ns) of the requests in flight, oldest first.
  std::unique_ptr<int64_t[]> sent;
  uint32_t sent_cap = 0, sent_head = 0, sent_count = 0;
  int64_t cycle_start = 0;  // lifecycle: when this job's put was sent
};

struct Reply {
  enum Kind { kInserted, kReserved, kDeleted, kOther } kind;
  uint64_t id = 0;
  const char* body = nullptr;  // RESERVED: the body (without its CRLF)
  size_t body_len = 0;
  std::string_view line;  // for error messages
};

class LoadGen {
 public:
  explicit LoadGen(Options o)
      : o_(std::move(o)), rng_{0x6c6f616467656e31ULL}, batch_(o_.io_uring) {}

  int Run();

 private:
  int Connect(const addrinfo* ai);
  void SetUp(Conn& c, bool use, bool watch);
  void Register(Conn& c);

  bool Issuing(int64_t now) const {
    if (!issuing_) return false;
    if (o_.jobs > 0) return issued_ < o_.jobs;
    return now < t_end_;
  }
  bool InWindow(int64_t now) const { return o_.jobs > 0 ? true : (now >= t_warm_ && now < t_end_); }

  void AppendPut(Conn& c, int64_t now);
  void AppendBytes(Conn& c, const char* p, size_t n);
  void AppendLiteral(Conn& c, std::string_view s) { AppendBytes(c, s.data(), s.size()); }
  void AppendDelete(Conn& c, uint64_t id);
  void AppendLatenessPut(Conn& c, int64_t now);
  void PushSent(Conn& c, int64_t t) {
    c.sent[(c.sent_head + c.sent_count) % c.sent_cap] = t;
    ++c.sent_count;
  }
  int64_t PopSent(Conn& c) {
    if (c.sent_count == 0) ProtocolError(c, "a reply with no request in flight");
    int64_t t = c.sent[c.sent_head];
    c.sent_head = (c.sent_head + 1) % c.sent_cap;
    --c.sent_count;
    return t;
  }

  // batched: queue the send in batch_ (Sent gets its result).
  void Flush(Conn& c, bool batched = false);
  void Sent(Conn& c, ssize_t n);
  void OnReadable(Conn& c);
  void Received(Conn& c, ssize_t n);
  bool ParseOne(Conn& c, Reply* r);
  void Handle(Conn& c, const Reply& r, int64_t now);
  void Complete(int64_t start, int64_t now) {
    if (InWindow(now)) {
      ++completed_;
      latency_.Add(now - start);
      last_completion_ = now;
    }
  }
  [[noreturn]] void ProtocolError(const Conn& c, const char* what, std::string_view line = {});
  bool Idle() const;
  void Report(int64_t t_run_end, double cpu);

  Options o_;
  Rng rng_;
  std::vector<Conn> conns_;
  std::vector<Conn*> producers_;
  int epfd_ = -1;
  delayq::server::IoBatch batch_;

  std::string put_line_;  // mode put/lifecycle/pipeline: a whole put request
  std::string body_;      // lateness: body template (due time is written in)
  uint64_t issued_ = 0;
  uint64_t completed_ = 0;
  bool issuing_ = true;
  int64_t t_start_ = 0, t_warm_ = 0, t_end_ = 0, last_completion_ = 0;
  Histogram latency_;

  // Lateness mode.
  uint64_t put_sent_ = 0, inserted_ = 0, received_ = 0, bad_bodies_ = 0;
  std::vector<int64_t> lateness_us_;
  int64_t next_put_at_ = 0;
  uint64_t next_producer_ = 0;
};

[[noreturn]] void LoadGen::ProtocolError(const Conn& c, const char* what, std::string_view line) {
  std::string l(line.substr(0, 120));
  for (char& ch : l)
    if (ch == '\r' || ch == '\n') ch = ' ';
  Die(2, "protocol error on connection %d: %s%s%s%s", c.index, what, l.empty() ? "" : " ('",
      l.c_str(), l.empty() ? "" : "')");
}

int LoadGen::Connect(const addrinfo* ai) {
  int last_err = 0;
  for (const addrinfo* p = ai; p != nullptr; p = p->ai_next) {
    int fd = socket(p->ai_family, p->ai_socktype | SOCK_CLOEXEC, p->ai_protocol);
    if (fd < 0) {
      last_err = errno;
      continue;
    }
    if (connect(fd, p->ai_addr, p->ai_addrlen) == 0) {
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      return fd;
    }
    last_err = errno;
    close(fd);
  }
  Die(1, "cannot connect to %s:%s: %s", o_.host.c_str(), o_.port.c_str(), std::strerror(last_err));
}

// Blocking request/reply for the untimed set-up (use / watch / ignore).
void LoadGen::SetUp(Conn& c, bool use, bool watch) {
  timeval tv{10, 0};
  setsockopt(c.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  auto ask = [&](const std::string& cmd, std::string_view expect) {
    if (send(c.fd, cmd.data(), cmd.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(cmd.size()))
      Die(1, "set-up send failed: %s", std::strerror(errno));
    std::string got;
    char ch;
    while (got.size() < 256) {
      ssize_t n = recv(c.fd, &ch, 1, 0);
      if (n <= 0)
        Die(1, "set-up: no reply to '%s' from %s:%s", cmd.substr(0, cmd.size() - 2).c_str(),
            o_.host.c_str(), o_.port.c_str());
      got.push_back(ch);
      if (got.size() >= 2 && got.compare(got.size() - 2, 2, "\r\n") == 0) break;
    }
    if (got.rfind(expect, 0) != 0)
      Die(1, "set-up: '%s' answered '%s'", cmd.substr(0, cmd.size() - 2).c_str(),
          got.substr(0, got.size() >= 2 ? got.size() - 2 : got.size()).c_str());
  };
  if (!o_.auth.empty()) ask("auth " + o_.auth + "\r\n", "AUTHENTICATED");
  if (use) ask("use " + o_.tube + "\r\n", "USING ");
  if (watch && o_.tube != "default") {
    ask("watch " + o_.tube + "\r\n", "WATCHING ");
    ask("ignore default\r\n", "WATCHING 1");
  }
  tv = {0, 0};
  setsockopt(c.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  int fl = fcntl(c.fd, F_GETFL);
  fcntl(c.fd, F_SETFL, fl | O_NONBLOCK);
}

void LoadGen::Register(Conn& c) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = &c;
  if (epoll_ctl(epfd_, EPOLL_CTL_ADD, c.fd, &ev) != 0)
    Die(1, "epoll_ctl: %s", std::strerror(errno));
}

void LoadGen::AppendBytes(Conn& c, const char* p, size_t n) {
  if (c.wcap - c.wlen < n) {
    std::memmove(c.wbuf.get(), c.wbuf.get() + c.wpos, c.wlen - c.wpos);
    c.wlen -= c.wpos;
    c.wpos = 0;
    if (c.wcap - c.wlen < n) Die(2, "internal: write buffer of connection %d full", c.index);
  }
  std::memcpy(c.wbuf.get() + c.wlen, p, n);
  c.wlen += n;
}

void LoadGen::AppendPut(Conn& c, int64_t now) {
  AppendLiteral(c, put_line_);
  if (o_.random_body) {
    // Overwrite the template body (just before the final CRLF) with printable
    // characters, 6 random bits each: 10 characters per 64-bit draw.
    static constexpr char kAlphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char* b = c.wbuf.get() + c.wlen - 2 - o_.body_size;
    uint64_t r = 0;
    for (size_t i = 0; i < o_.body_size; ++i) {
      if (i % 10 == 0) r = rng_.Next();
      b[i] = kAlphabet[r & 63];
      r >>= 6;
    }
  }
  PushSent(c, now);
  ++issued_;
}

void LoadGen::AppendDelete(Conn& c, uint64_t id) {
  char buf[40];
  std::memcpy(buf, "delete ", 7);
  char* p = PutUint(buf + 7, id);
  *p++ = '\r';
  *p++ = '\n';
  AppendBytes(c, buf, static_cast<size_t>(p - buf));
}

// put-ex <pri> <delay-ms> <ttr-ms> <bytes> / put <pri> <delay-s> <ttr-s> <bytes>,
// with "due_us=<16 digits>" at the start of the body.
void LoadGen::AppendLatenessPut(Conn& c, int64_t now) {
  uint64_t r = rng_.Next();
  uint64_t delay, delay_us;
  if (o_.protocol_ms) {
    delay = 1 + r % o_.max_delay_ms;
    delay_us = delay * 1000;
  } else {
    delay = 1 + r % std::max<uint32_t>(1, o_.max_delay_ms / 1000);
    delay_us = delay * 1'000'000;
  }
  char line[96];
  char* p = line;
  auto lit = [&p](std::string_view s) {
    std::memcpy(p, s.data(), s.size());
    p += s.size();
  };
  lit(o_.protocol_ms ? "put-ex " : "put ");
  p = PutUint(p, o_.priority);
  *p++ = ' ';
  p = PutUint(p, delay);
  lit(o_.protocol_ms ? " 60000 " : " 60 ");
  p = PutUint(p, o_.body_size);
  lit("\r\n");
  AppendBytes(c, line, static_cast<size_t>(p - line));
  // Body: the template with the due time written over its first 23 bytes.
  size_t body_at = c.wlen;
  AppendBytes(c, body_.data(), body_.size());
  char* b = c.wbuf.get() + body_at;
  std::snprintf(b, 24, "due_us=%016" PRIu64, static_cast<uint64_t>(WallUs()) + delay_us);
  b[23] = body_[23];  // snprintf's NUL
  AppendLiteral(c, "\r\n");
  PushSent(c, now);
  ++issued_;
  ++put_sent_;
}

void LoadGen::Flush(Conn& c, bool batched) {
  if (c.wlen > c.wpos) {
    if (batched) {
      batch_.Send(c.fd, c.wbuf.get() + c.wpos, c.wlen - c.wpos, static_cast<uint64_t>(c.index));
      return;
    }
    ssize_t n = send(c.fd, c.wbuf.get() + c.wpos, c.wlen - c.wpos, MSG_NOSIGNAL);
    Sent(c, n < 0 ? -errno : n);
    return;
  }
  Sent(c, 0);
}

void LoadGen::Sent(Conn& c, ssize_t n) {
  if (n < 0) {
    if (n != -EAGAIN && n != -EWOULDBLOCK && n != -EINTR)
      Die(2, "send on connection %d: %s", c.index, std::strerror(static_cast<int>(-n)));
    n = 0;
  }
  c.wpos += static_cast<size_t>(n);
  if (c.wpos == c.wlen) c.wpos = c.wlen = 0;
  bool pending = c.wlen > c.wpos;
  if (pending != c.want_out) {
    epoll_event ev{};
    ev.events = EPOLLIN | (pending ? uint32_t{EPOLLOUT} : 0u);
    ev.data.ptr = &c;
    epoll_ctl(epfd_, EPOLL_CTL_MOD, c.fd, &ev);
    c.want_out = pending;
  }
}

// One complete reply at rbuf[rpos..), or false if it has not all arrived.
bool LoadGen::ParseOne(Conn& c, Reply* r) {
  const char* base = c.rbuf.get();
  const char* p = base + c.rpos;
  const char* end = base + c.rlen;
  const char* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(end - p)));
  if (nl == nullptr) {
    if (end - p > 256) ProtocolError(c, "reply line too long", {p, 64});
    return false;
  }
  const char* le = nl;  // line end (exclusive of CRLF)
  if (le > p && le[-1] == '\r') --le;
  std::string_view line(p, static_cast<size_t>(le - p));
  r->line = line;
  const char* next = nl + 1;
  if (line.size() > 9 && std::memcmp(p, "INSERTED ", 9) == 0) {
    r->kind = Reply::kInserted;
    if (GetUint(p + 9, le, &r->id) != le) ProtocolError(c, "bad INSERTED", line);
  } else if (line == "DELETED") {
    r->kind = Reply::kDeleted;
  } else if (line.size() > 9 && std::memcmp(p, "RESERVED ", 9) == 0) {
    r->kind = Reply::kReserved;
    uint64_t bytes = 0;
    const char* q = GetUint(p + 9, le, &r->id);
    if (q == nullptr || *q != ' ' || GetUint(q + 1, le, &bytes) != le)
      ProtocolError(c, "bad RESERVED", line);
    if (bytes + 2 > c.rcap / 2) ProtocolError(c, "RESERVED body larger than the buffer", line);
    if (static_cast<uint64_t>(end - next) < bytes + 2) return false;  // body not all here
    r->body = next;
    r->body_len = bytes;
    next += bytes + 2;
  } else {
    r->kind = Reply::kOther;
  }
  c.rpos = static_cast<size_t>(next - base);
  return true;
}

void LoadGen::Handle(Conn& c, const Reply& r, int64_t now) {
  switch (c.role) {
    case Role::kPut:
    case Role::kPipeline:
      if (r.kind != Reply::kInserted) ProtocolError(c, "expected INSERTED", r.line);
      Complete(PopSent(c), now);
      if (c.role == Role::kPut && Issuing(now)) AppendPut(c, now);
      return;  // pipeline refills after the whole read (OnReadable)
    case Role::kLifecycle:
      switch (c.step) {
        case Step::kPut:
          if (r.kind != Reply::kInserted) ProtocolError(c, "put: expected INSERTED", r.line);
          PopSent(c);
          AppendLiteral(c, "reserve\r\n");
          c.step = Step::kReserve;
          return;
        case Step::kReserve:
          if (r.kind != Reply::kReserved) ProtocolError(c, "reserve: expected RESERVED", r.line);
          AppendDelete(c, r.id);
          c.step = Step::kDelete;
          return;
        case Step::kDelete:
          if (r.kind != Reply::kDeleted) ProtocolError(c, "delete: expected DELETED", r.line);
          Complete(c.cycle_start, now);
          c.step = Step::kIdle;
          if (Issuing(now)) {
            c.cycle_start = now;
            AppendPut(c, now);
            c.step = Step::kPut;
          }
          return;
        case Step::kIdle:
          ProtocolError(c, "unexpected reply", r.line);
      }
      return;
    case Role::kProducer:
      if (r.kind != Reply::kInserted) ProtocolError(c, "put: expected INSERTED", r.line);
      latency_.Add(now - PopSent(c));
      ++inserted_;
      return;
    case Role::kWorker:
      if (c.step == Step::kReserve) {
        if (r.kind != Reply::kReserved) ProtocolError(c, "reserve: expected RESERVED", r.line);
        int64_t arrived = WallUs();
        uint64_t due = 0;
        if (r.body_len >= 23 && std::memcmp(r.body, "due_us=", 7) == 0 &&
            GetUint(r.body + 7, r.body + 23, &due) == r.body + 23) {
          if (lateness_us_.size() < lateness_us_.capacity())
            lateness_us_.push_back(arrived - static_cast<int64_t>(due));
        } else {
          ++bad_bodies_;
        }
        ++received_;
        AppendDelete(c, r.id);
        c.step = Step::kDelete;
      } else {
        if (r.kind != Reply::kDeleted) ProtocolError(c, "delete: expected DELETED", r.line);
        ++completed_;
        AppendLiteral(c, "reserve\r\n");
        c.step = Step::kReserve;
      }
      return;
  }
}

// Queues the recv of a readable connection in batch_ (Received gets it).
void LoadGen::OnReadable(Conn& c) {
  // Keep at least half the buffer free; a whole reply always fits in half.
  if (c.rpos > 0 && c.rcap - c.rlen < c.rcap / 2) {
    std::memmove(c.rbuf.get(), c.rbuf.get() + c.rpos, c.rlen - c.rpos);
    c.rlen -= c.rpos;
    c.rpos = 0;
  }
  batch_.Recv(c.fd, c.rbuf.get() + c.rlen, c.rcap - c.rlen, static_cast<uint64_t>(c.index));
}

// n: what the recv returned (bytes, or -errno). The requests the replies
// lead to are queued in batch_ as one send.
void LoadGen::Received(Conn& c, ssize_t n) {
  if (n == 0) Die(2, "server closed connection %d", c.index);
  if (n < 0) {
    if (n == -EAGAIN || n == -EWOULDBLOCK || n == -EINTR) return;
    Die(2, "recv on connection %d: %s", c.index, std::strerror(static_cast<int>(-n)));
  }
  c.rlen += static_cast<size_t>(n);
  int64_t now = MonoNs();
  Reply r;
  while (ParseOne(c, &r)) Handle(c, r, now);
  if (c.rpos == c.rlen) c.rpos = c.rlen = 0;
  if (c.role == Role::kPipeline) {
    while (c.sent_count < c.sent_cap && Issuing(now)) AppendPut(c, now);
  }
  Flush(c, /*batched=*/true);
}

bool LoadGen::Idle() const {
  for (const Conn& c : conns_) {
    if (c.role == Role::kWorker) continue;
    if (c.sent_count > 0 || c.wlen > c.wpos) return false;
    if (c.role == Role::kLifecycle && c.step != Step::kIdle) return false;
  }
  return true;
}

int LoadGen::Run() {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* ai = nullptr;
  if (int rc = getaddrinfo(o_.host.c_str(), o_.port.c_str(), &hints, &ai); rc != 0)
    Die(1, "cannot resolve %s:%s: %s", o_.host.c_str(), o_.port.c_str(), gai_strerror(rc));

  const bool lateness = o_.mode == Mode::kLateness;
  const int n_conns = o_.connections + (lateness ? o_.producers : 0);
  conns_.resize(static_cast<size_t>(n_conns));
  epfd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epfd_ < 0) Die(1, "epoll_create1: %s", std::strerror(errno));

  // The put request of the throughput modes, formatted once.
  std::string body(o_.body_size, 'x');
  put_line_ = "put " + std::to_string(o_.priority) + " " + std::to_string(o_.delay_s) + " 60 " +
              std::to_string(o_.body_size) + "\r\n" + body + "\r\n";
  body_ = body;
  if (lateness) std::memcpy(body_.data(), "due_us=0000000000000000", 23);

  const size_t req_max = std::max(put_line_.size(), o_.body_size + 96) + 64;
  for (int i = 0; i < n_conns; ++i) {
    Conn& c = conns_[static_cast<size_t>(i)];
    c.index = i;
    c.fd = Connect(ai);
    if (lateness)
      c.role = i < o_.connections ? Role::kWorker : Role::kProducer;
    else if (o_.mode == Mode::kPut)
      c.role = Role::kPut;
    else if (o_.mode == Mode::kLifecycle)
      c.role = Role::kLifecycle;
    else
      c.role = Role::kPipeline;
    bool producer = c.role == Role::kProducer;
    c.rcap = std::max<size_t>(64 * 1024, 2 * (o_.body_size + 256));
    if (c.role == Role::kPipeline) c.rcap = std::max(c.rcap, static_cast<size_t>(o_.depth) * 64);
    c.rbuf = std::make_unique<char[]>(c.rcap);
    c.sent_cap = producer ? 65536 : static_cast<uint32_t>(o_.depth);
    c.sent = std::make_unique<int64_t[]>(c.sent_cap);
    c.wcap = req_max * (producer ? 4096 : static_cast<size_t>(o_.depth) + 2);
    c.wbuf = std::make_unique<char[]>(c.wcap);
    SetUp(c, c.role != Role::kWorker, c.role == Role::kWorker || c.role == Role::kLifecycle);
    Register(c);
    if (producer) producers_.push_back(&c);
  }
  freeaddrinfo(ai);

  if (lateness) {
    double expect = o_.jobs > 0 ? static_cast<double>(o_.jobs) : o_.rate * o_.seconds;
    lateness_us_.reserve(static_cast<size_t>(expect * 1.1) + 1024);
  }

  std::vector<epoll_event> events(static_cast<size_t>(std::min(n_conns, 1024)));
  double cpu0 = CpuSeconds();
  t_start_ = MonoNs();
  const int64_t s2ns = 1'000'000'000;
  t_warm_ = t_start_ + static_cast<int64_t>(o_.warmup * 1e9);
  t_end_ = o_.jobs > 0 ? INT64_MAX : t_warm_ + static_cast<int64_t>(o_.seconds * 1e9);
  const int64_t t_cap = t_start_ + static_cast<int64_t>(o_.max_seconds * 1e9);
  next_put_at_ = t_start_;
  const double put_interval_ns = 1e9 / o_.rate;
  int64_t drain_deadline = INT64_MAX;
  int64_t put_phase_end = 0;

  // Start: every connection sends its first request(s).
  for (Conn& c : conns_) {
    switch (c.role) {
      case Role::kPut:
        if (Issuing(t_start_)) AppendPut(c, t_start_);
        break;
      case Role::kLifecycle:
        if (Issuing(t_start_)) {
          c.cycle_start = t_start_;
          AppendPut(c, t_start_);
          c.step = Step::kPut;
        }
        break;
      case Role::kPipeline:
        while (c.sent_count < c.sent_cap && Issuing(t_start_)) AppendPut(c, t_start_);
        break;
      case Role::kWorker:
        AppendLiteral(c, "reserve\r\n");
        c.step = Step::kReserve;
        break;
      case Role::kProducer:
        break;
    }
    Flush(c);
  }

  bool drained_ok = true;
  for (;;) {
    int64_t now = MonoNs();
    if (issuing_ && !Issuing(now)) {
      issuing_ = false;
      put_phase_end = now;
      // Lateness: wait for the last due jobs; others: for the replies in flight.
      drain_deadline = now + (lateness ? (int64_t{o_.max_delay_ms} + 5000) * 1'000'000 : 5 * s2ns);
    }
    if (lateness && issuing_) {
      // Pace the puts: job k is sent at t_start + k / rate, round-robin over
      // the producers (a producer with a full buffer is skipped for now).
      size_t skipped = 0;
      while (next_put_at_ <= now && Issuing(now) && skipped < producers_.size()) {
        Conn& p = *producers_[next_producer_++ % producers_.size()];
        if (p.sent_count >= p.sent_cap || p.wcap - (p.wlen - p.wpos) < req_max) {
          ++skipped;  // this producer's buffer is full: the server is behind
          continue;
        }
        skipped = 0;
        AppendLatenessPut(p, now);
        next_put_at_ =
            t_start_ + static_cast<int64_t>(static_cast<double>(put_sent_) * put_interval_ns);
      }
      for (Conn* p : producers_)
        if (p->wlen > p->wpos) Flush(*p);
    }
    if (!issuing_) {
      bool done = lateness ? (inserted_ == put_sent_ && received_ >= inserted_) : Idle();
      if (done) break;
      if (now >= drain_deadline || now >= t_cap) {
        drained_ok = false;
        break;
      }
    } else if (now >= t_cap) {
      issuing_ = false;
      continue;
    }
    // Sleep until the next event or the next moment something is due.
    int64_t wake = issuing_ ? std::min(t_end_, t_cap) : std::min(drain_deadline, t_cap);
    if (!issuing_ || !lateness) {
      if (now < t_warm_) wake = std::min(wake, t_warm_);
    } else {
      wake = std::min(wake, next_put_at_);
    }
    int64_t wait = std::max<int64_t>(0, wake - now);
    if (o_.busy_wait) wait = 0;
    timespec ts{static_cast<time_t>(wait / s2ns), static_cast<long>(wait % s2ns)};
    int n = epoll_pwait2(epfd_, events.data(), static_cast<int>(events.size()), &ts, nullptr);
    if (n < 0) {
      if (errno == EINTR) continue;
      Die(1, "epoll_pwait2: %s", std::strerror(errno));
    }
    for (int i = 0; i < n; ++i) {
      Conn& c = *static_cast<Conn*>(events[static_cast<size_t>(i)].data.ptr);
      uint32_t ev = events[static_cast<size_t>(i)].events;
      if (ev & EPOLLOUT) Flush(c);
      if (ev & (EPOLLIN | EPOLLERR | EPOLLHUP)) OnReadable(c);
    }
    // The recvs, then the sends of the requests their replies led to.
    for (const auto& r : batch_.Run()) Received(conns_[r.tag], r.result);
    for (const auto& r : batch_.Run()) Sent(conns_[r.tag], r.result);
  }
  int64_t t_run_end = MonoNs();
  double cpu = CpuSeconds() - cpu0;
  (void)put_phase_end;
  for (Conn& c : conns_) close(c.fd);
  close(epfd_);
  Report(t_run_end, cpu);
  if (!drained_ok) {
    if (lateness)
      std::fprintf(stderr,
                   "loadgen: run did not drain: %" PRIu64 " jobs put, %" PRIu64
                   " inserted, %" PRIu64 " received\n",
                   put_sent_, inserted_, received_);
    else
      std::fprintf(stderr, "loadgen: replies still outstanding at the drain deadline\n");
    return 2;
  }
  if (bad_bodies_ > 0) {
    std::fprintf(stderr, "loadgen: %" PRIu64 " reserved jobs had no due time in their body\n",
                 bad_bodies_);
    return 2;
  }
  return 0;
}

void LoadGen::Report(int64_t t_run_end, double cpu) {
  const char* mode = o_.mode == Mode::kPut         ? "put"
                     : o_.mode == Mode::kLifecycle ? "lifecycle"
                     : o_.mode == Mode::kPipeline  ? "pipeline"
                                                   : "lateness";
  double wall = static_cast<double>(t_run_end - t_start_) / 1e9;
  std::printf("mode: %s\n", mode);
  std::printf("client_io: %s\n", batch_.uses_uring() ? "io_uring" : "plain");
  std::printf("client_wait: %s\n", o_.busy_wait ? "busy" : "sleep");
  std::printf("connections: %d\n", o_.connections);
  if (o_.mode == Mode::kPipeline) std::printf("pipeline_depth: %d\n", o_.depth);
  std::printf("body_size: %zu\n", o_.body_size);
  if (o_.delay_s > 0) std::printf("delay_s: %u\n", o_.delay_s);
  if (o_.random_body) std::printf("random_body: yes\n");
  if (o_.mode == Mode::kLateness) {
    std::printf("producers: %d\n", o_.producers);
    std::printf("protocol: %s\n", o_.protocol_ms ? "put-ex (ms)" : "put (s)");
    std::printf("max_delay_ms: %u\n", o_.max_delay_ms);
    std::printf("target_rate: %.0f\n", o_.rate);
    std::printf("jobs_put: %" PRIu64 "\n", put_sent_);
    std::printf("jobs_received: %" PRIu64 "\n", received_);
    std::printf("lateness_missing: %" PRIu64 "\n", put_sent_ - std::min(put_sent_, received_));
    std::printf("run_seconds: %.3f\n", wall);
    std::printf("client_cpu_percent: %.1f\n", 100.0 * cpu / wall);
    std::printf("put_latency_p50_us: %.1f\n", latency_.Quantile(0.50) / 1e3);
    std::printf("put_latency_p99_us: %.1f\n", latency_.Quantile(0.99) / 1e3);
    std::vector<int64_t>& v = lateness_us_;
    std::sort(v.begin(), v.end());
    auto q = [&v](double f) -> double {
      if (v.empty()) return 0;
      size_t rank = static_cast<size_t>(std::ceil(f * static_cast<double>(v.size())));
      rank = std::clamp<size_t>(rank, 1, v.size());
      return static_cast<double>(v[rank - 1]) / 1e3;
    };
    std::printf("lateness_min_ms: %.3f\n", v.empty() ? 0.0 : static_cast<double>(v.front()) / 1e3);
    std::printf("lateness_max_ms: %.3f\n", v.empty() ? 0.0 : static_cast<double>(v.back()) / 1e3);
    std::printf("lateness_p50_ms: %.3f\n", q(0.50));
    std::printf("lateness_p99_ms: %.3f\n", q(0.99));
    return;
  }
  double window;
  if (o_.jobs > 0)
    window = static_cast<double>(last_completion_ - t_start_) / 1e9;
  else
    window = static_cast<double>(t_end_ - t_warm_) / 1e9;
  if (window <= 0) window = 1e-9;
  std::printf("jobs: %" PRIu64 "\n", completed_);
  std::printf("seconds: %.3f\n", window);
  std::printf("client_cpu_percent: %.1f\n", 100.0 * cpu / wall);
  std::printf("latency_p50_us: %.1f\n", latency_.Quantile(0.50) / 1e3);
  std::printf("latency_p99_us: %.1f\n", latency_.Quantile(0.99) / 1e3);
  std::printf("latency_max_us: %.1f\n", static_cast<double>(latency_.max()) / 1e3);
  std::printf("jobs_per_s: %.0f\n", static_cast<double>(completed_) / window);
}

}  // namespace

int main(int argc, char** argv) {
  Options o = ParseArgs(argc, argv);
  auto gen = std::make_unique<LoadGen>(std::move(o));  // large: keep it off the stack
  return gen->Run();
}
