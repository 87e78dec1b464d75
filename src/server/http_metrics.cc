// GET /metrics: the server's counts in the Prometheus text format
// (prometheus_text.h), for a Prometheus to scrape. docs/operations.md lists
// every metric; the request counts are the operation table's (ServerCounters),
// the job counts the backend's Stats (a call on Redis), the process metrics
// those every Prometheus client library exports, read from /proc.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "delayq/build_options.h"
#include "delayq/version.h"
#include "server/http_api_internal.h"
#include "server/prometheus_text.h"
#include "server/topic_metrics.h"

namespace delayq::server {

namespace {

// The process as /proc shows it; a field it could not read is nullopt.
struct ProcessSample {
  std::optional<double> cpu_seconds;
  std::optional<uint64_t> resident_bytes, virtual_bytes;
  std::optional<double> start_time_seconds;  // since the Unix epoch
  std::optional<uint64_t> open_fds, max_fds;
};

// The `btime` line of /proc/stat: when the machine booted, in seconds since
// the epoch.
std::optional<uint64_t> MetricsBootTime() {
  std::ifstream in("/proc/stat");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("btime ", 0) == 0) return std::stoull(line.substr(6));
  }
  return std::nullopt;
}

ProcessSample SampleProcess() {
  ProcessSample s;
  // /proc/self/stat (proc(5)): the fields after the command's closing ')',
  // which may itself hold spaces and parentheses. Counted from 1 as there:
  // 14 utime, 15 stime (clock ticks), 22 starttime (ticks since boot),
  // 23 vsize (bytes), 24 rss (pages).
  std::ifstream stat("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  if (size_t close = text.rfind(')'); close != std::string::npos && close + 2 <= text.size()) {
    std::istringstream fields(text.substr(close + 2));
    std::vector<std::string> f;  // f[0] is field 3
    for (std::string w; fields >> w;) f.push_back(w);
    const long ticks = sysconf(_SC_CLK_TCK);
    const long page = sysconf(_SC_PAGESIZE);
    if (f.size() >= 22 && ticks > 0 && page > 0) {
      const auto field = [&](size_t n) { return std::stoull(f[n - 3]); };
      s.cpu_seconds = static_cast<double>(field(14) + field(15)) / static_cast<double>(ticks);
      s.virtual_bytes = field(23);
      s.resident_bytes = field(24) * static_cast<uint64_t>(page);
      if (std::optional<uint64_t> boot = MetricsBootTime())
        s.start_time_seconds = static_cast<double>(*boot) +
                               static_cast<double>(field(22)) / static_cast<double>(ticks);
    }
  }
  std::error_code ec;
  uint64_t fds = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end;
       it.increment(ec))
    ++fds;
  if (!ec) s.open_fds = fds;
  if (rlimit r{}; getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur != RLIM_INFINITY)
    s.max_fds = r.rlim_cur;
  return s;
}

// delayq_requests_total: for each protocol, each `metric` label of the rows
// that protocol serves, the sum of those rows' counts (zeros included, so
// that a rate starts from the first scrape).
void RequestCounts(PrometheusText& out, const ServerCounters& c) {
  constexpr std::string_view kName = "delayq_requests_total";
  out.Family(kName, MetricType::kCounter,
             "Requests asked for, by protocol and operation (the metric label of the operation "
             "table's row; rows that share it are summed).");
  for (Protocol p : {Protocol::kBeanstalk, Protocol::kHttp}) {
    std::vector<std::string_view> labels;  // in the table's order
    for (const Operation& o : kOperations) {
      const bool served = p == Protocol::kBeanstalk ? !o.beanstalk.empty() : !o.http.empty();
      if (!served || std::find(labels.begin(), labels.end(), o.metric) != labels.end()) continue;
      labels.push_back(o.metric);
    }
    for (std::string_view metric : labels) {
      uint64_t n = 0;
      for (const Operation& o : kOperations)
        if (o.metric == metric) n += c.Of(p, o.op);
      out.Sample(kName, {{"protocol", ProtocolName(p)}, {"op", metric}}, n);
    }
  }
}

// A LatencyHistogram (delayq/histogram.h) as a Prometheus histogram in
// seconds (after its Family line).
void LatencySeconds(PrometheusText& out, std::string_view name, std::string_view help,
                    const LatencyHistogram& h) {
  static const std::vector<double> kBoundsSeconds = [] {
    std::vector<double> b;
    for (int64_t us : LatencyHistogram::kBoundsUs) b.push_back(static_cast<double>(us) / 1e6);
    return b;
  }();
  out.Family(name, MetricType::kHistogram, help);
  out.Histogram(name, {}, kBoundsSeconds, std::vector<uint64_t>(h.counts.begin(), h.counts.end()),
                static_cast<double>(h.sum_us) / 1e6);
}

// What the engine in this process counts (the local backend's): none on
// Redis, where the jobs' state lives in Redis.
void EngineCounts(PrometheusText& out, const EngineStats* e, const EngineMetrics* m) {
  if (e != nullptr) {
    out.Family("delayq_ttr_timeouts_total", MetricType::kCounter,
               "Reservations whose time to run ran out (the job came back).");
    out.Sample("delayq_ttr_timeouts_total", {}, e->job_timeouts);
  }
  if (m == nullptr) return;
#if DELAYQ_COUNT_METRICS
  LatencySeconds(out, "delayq_job_lateness_seconds",
                 "How long after its due time a delayed job became ready.", m->lateness);
  LatencySeconds(out, "delayq_job_ready_wait_seconds",
                 "How long a ready job waited before a reserve took it.", m->ready_wait);
#endif
  out.Family("delayq_jobs_buried_max_tries_total", MetricType::kCounter,
             "Jobs buried because their reservations reached max_tries.");
  out.Sample("delayq_jobs_buried_max_tries_total", {}, m->buried_max_tries);
}

// delayq_topic_jobs: the jobs of the `max` topics with the most, by topic
// and state, and the rest's summed under kOtherTopicsLabel.
void TopicJobs(PrometheusText& out, const std::vector<TopicStats>& topics, size_t max) {
  constexpr std::string_view kName = "delayq_topic_jobs";
  const TopTopics top = SelectTopTopics(topics, max);
  out.Family(kName, MetricType::kGauge,
             "Jobs in the queue by topic and state: the topics with the most jobs "
             "(--metrics-max-topics), the rest summed under topic=\"*other*\".");
  auto samples = [&](const TopicJobCounts& t) {
    out.Sample(kName, {{"topic", t.name}, {"state", "ready"}}, t.ready);
    out.Sample(kName, {{"topic", t.name}, {"state", "reserved"}}, t.reserved);
    out.Sample(kName, {{"topic", t.name}, {"state", "delayed"}}, t.delayed);
    out.Sample(kName, {{"topic", t.name}, {"state", "buried"}}, t.buried);
  };
  for (const TopicJobCounts& t : top.named) samples(t);
  if (top.others > 0) samples(top.other);
}

// delayq_operations_total: every (operation, outcome) pair, zeros
// included, and the TTR timeouts as op="timeout" (when the backend gave
// its stats).
void OperationCounts(PrometheusText& out, const backend::OperationOutcomes& c,
                     const EngineStats* e) {
  using backend::CountedOp;
  using backend::Outcome;
  constexpr std::string_view kName = "delayq_operations_total";
  out.Family(kName, MetricType::kCounter,
             "Operations answered, by operation and outcome (ok, or the kind of error).");
  for (size_t op = 0; op < backend::kNumCountedOps; ++op)
    for (size_t o = 0; o < backend::kNumOutcomes; ++o)
      out.Sample(kName,
                 {{"op", backend::CountedOpName(static_cast<CountedOp>(op))},
                  {"outcome", backend::OutcomeName(static_cast<Outcome>(o))}},
                 c.n[op][o]);
  if (e != nullptr) out.Sample(kName, {{"op", "timeout"}, {"outcome", "ok"}}, e->job_timeouts);
}

// The backend's health, and its store's (local) or connections' (Redis)
// figures.
void BackendFigures(PrometheusText& out, const backend::BackendMetrics& b) {
  auto gauge = [&](std::string_view name, std::string_view help, auto value) {
    out.Family(name, MetricType::kGauge, help);
    out.Sample(name, {}, value);
  };
  auto counter = [&](std::string_view name, std::string_view help, uint64_t value) {
    out.Family(name, MetricType::kCounter, help);
    out.Sample(name, {}, value);
  };
  gauge("delayq_backend_healthy",
        "1 while the backend takes changes (local: the store takes writes; Redis: connected), "
        "else 0.",
        uint64_t{b.healthy ? 1u : 0u});
  if (b.store) {
    const backend::StoreMetrics& s = *b.store;
    LatencySeconds(out, "delayq_store_sync_duration_seconds",
                   "How long each sync of the store's log took (fsync always: each write with "
                   "its sync; everysec: each second's sync).",
                   s.sync);
    gauge("delayq_store_disk_bytes", "Bytes of the store's files on disk (journal included).",
          s.disk_bytes);
    gauge("delayq_store_cold_jobs",
          "Delayed jobs held on disk only, due beyond the horizon (--horizon).", s.cold_jobs);
    counter("delayq_store_write_errors_total",
            "Writes the store or its journal refused (each retry counts).", s.write_errors);
    counter("delayq_store_loop_syncs_total",
            "Under fsync always: syncs of the journal the event loop made itself, one client "
            "alone waiting (the others are the writer thread's).",
            s.loop_syncs);
    gauge("delayq_store_healthy", "1 while the store takes writes, else 0.",
          uint64_t{s.healthy ? 1u : 0u});
  }
  if (b.redis) {
    const backend::RedisMetrics& r = *b.redis;
    counter("delayq_redis_calls_total", "Commands sent to Redis, every connection's.", r.calls);
    LatencySeconds(out, "delayq_redis_call_duration_seconds",
                   "How long Redis took to answer each command, from its sending to its reply.",
                   r.call_duration);
    counter("delayq_redis_reconnects_total", "Connections to Redis made again after one was lost.",
            r.reconnects);
    gauge("delayq_redis_connected", "1 while the connection to Redis is up, else 0.",
          uint64_t{r.connected ? 1u : 0u});
  }
}

void ProcessMetrics(PrometheusText& out) {
  const ProcessSample s = SampleProcess();
  auto gauge_or_counter = [&](std::string_view name, MetricType type, std::string_view help,
                              auto value) {
    if (!value) return;
    out.Family(name, type, help);
    out.Sample(name, {}, *value);
  };
  gauge_or_counter("process_cpu_seconds_total", MetricType::kCounter,
                   "Total user and system CPU time spent in seconds.", s.cpu_seconds);
  gauge_or_counter("process_resident_memory_bytes", MetricType::kGauge,
                   "Resident memory size in bytes.", s.resident_bytes);
  gauge_or_counter("process_virtual_memory_bytes", MetricType::kGauge,
                   "Virtual memory size in bytes.", s.virtual_bytes);
  gauge_or_counter("process_open_fds", MetricType::kGauge, "Number of open file descriptors.",
                   s.open_fds);
  gauge_or_counter("process_max_fds", MetricType::kGauge,
                   "Maximum number of open file descriptors.", s.max_fds);
  gauge_or_counter("process_start_time_seconds", MetricType::kGauge,
                   "Start time of the process since unix epoch in seconds.", s.start_time_seconds);
}

}  // namespace

void HttpApiRoutes::Metrics(HttpApi& api, const HttpRequest&, const Params&, HttpApi::Reply&& done,
                            HttpApi::CallId*) {
  // The job counts come from the backend (a call on Redis); when it cannot
  // give them (Redis is down) the rest is shown without them, so that the
  // scrape still tells why (delayq_backend_healthy, delayq_redis_connected).
  std::weak_ptr<bool> alive = api.alive_;
  api.backend_.Stats([&api, alive, done = std::move(done)](Result<EngineStats> r) mutable {
    if (alive.expired()) return;  // the API is gone (a Redis reply after the stop)
    if (!r.ok()) return done(MetricsReply(api, nullptr, nullptr));
    api.backend_.TopicsStats([&api, alive, e = *r, done = std::move(done)](
                                 Result<std::vector<delayq::TopicStats>> topics) {
      if (alive.expired()) return;
      done(MetricsReply(api, &e, topics.ok() ? &*topics : nullptr));
    });
  });
}

HttpReply HttpApiRoutes::MetricsReply(HttpApi& api, const EngineStats* e,
                                      const std::vector<delayq::TopicStats>* topics) {
  const ServerContext& ctx = api.ctx_;
  PrometheusText out;
  out.Family("delayq_build_info", MetricType::kGauge,
             "Always 1; the version of delayqd as its label.");
  out.Sample("delayq_build_info", {{"version", kVersion}}, uint64_t{1});

  RequestCounts(out, ctx.counters);
  if (const backend::OperationOutcomes* o = api.backend_.operation_outcomes())
    OperationCounts(out, *o, e);

  out.Family("delayq_connections", MetricType::kGauge, "Client connections open now.");
  out.Sample("delayq_connections", {{"protocol", ProtocolName(Protocol::kBeanstalk)}},
             ctx.counters.connections);
  out.Sample("delayq_connections", {{"protocol", ProtocolName(Protocol::kHttp)}},
             ctx.counters.http_connections);
  out.Family("delayq_connections_accepted_total", MetricType::kCounter,
             "Client connections accepted since the start.");
  out.Sample("delayq_connections_accepted_total",
             {{"protocol", ProtocolName(Protocol::kBeanstalk)}}, ctx.counters.total_connections);
  out.Sample("delayq_connections_accepted_total", {{"protocol", ProtocolName(Protocol::kHttp)}},
             ctx.counters.total_http_connections);

  out.Family("delayq_waiting_reserves", MetricType::kGauge,
             "Reserves of this server that wait for a job now (both protocols).");
  out.Sample("delayq_waiting_reserves", {}, uint64_t{ctx.waiting});

  if (e != nullptr) {
    out.Family("delayq_jobs", MetricType::kGauge, "Jobs in the queue, by state.");
    out.Sample("delayq_jobs", {{"state", "ready"}}, e->ready);
    out.Sample("delayq_jobs", {{"state", "reserved"}}, e->reserved);
    out.Sample("delayq_jobs", {{"state", "delayed"}}, e->delayed);
    out.Sample("delayq_jobs", {{"state", "buried"}}, e->buried);
    out.Family("delayq_topics", MetricType::kGauge, "Topics that exist now.");
    out.Sample("delayq_topics", {}, e->topics);
  }
  if (topics != nullptr) TopicJobs(out, *topics, ctx.metrics_max_topics);
  EngineCounts(out, e, api.backend_.engine_metrics());
  BackendFigures(out, api.backend_.SampleMetrics());

  ProcessMetrics(out);
  HttpReply reply{200, out.Take(), {}};
  reply.content_type = kPrometheusContentType;
  return reply;
}

}  // namespace delayq::server
