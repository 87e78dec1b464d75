// A writer of the Prometheus text exposition format 0.0.4 (what GET /metrics
// answers; docs/operations.md lists the metrics): families, each with its
// `# HELP` and `# TYPE` lines, then its samples, with labels. It escapes
// what the format asks to be escaped and spells numbers as Prometheus reads
// them: integers exactly, doubles in their shortest form that reads back as
// the same double, and +Inf, -Inf, NaN.
//
// It does not check names: the caller writes each family once, with names
// that match [a-zA-Z_:][a-zA-Z0-9_:]* (labels: no colon), and a family's
// samples together after its header.
//
// Thread: one writer per thread.
#ifndef DELAYQ_SERVER_PROMETHEUS_TEXT_H_
#define DELAYQ_SERVER_PROMETHEUS_TEXT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace delayq::server {

// The Content-Type of the format.
inline constexpr std::string_view kPrometheusContentType =
    "text/plain; version=0.0.4; charset=utf-8";

enum class MetricType { kCounter, kGauge, kHistogram };

struct MetricLabel {
  std::string_view name;
  std::string_view value;  // any UTF-8; escaped when written
};
using MetricLabels = std::vector<MetricLabel>;

// A label value as the format writes it between its quotes: backslash,
// double quote and line feed escaped.
std::string EscapeLabelValue(std::string_view v);
// A HELP text as the format writes it: backslash and line feed escaped.
std::string EscapeHelp(std::string_view help);
// A sample value: "42", "0.1", "1e+21", "+Inf", "-Inf", "NaN".
std::string FormatMetricValue(double v);
std::string FormatMetricValue(uint64_t v);
std::string FormatMetricValue(int64_t v);

class PrometheusText {
 public:
  // Starts a family: its `# HELP` and `# TYPE` lines.
  void Family(std::string_view name, MetricType type, std::string_view help);
  // One sample line: `name{labels} value`.
  void Sample(std::string_view name, const MetricLabels& labels, uint64_t value);
  void Sample(std::string_view name, const MetricLabels& labels, int64_t value);
  void Sample(std::string_view name, const MetricLabels& labels, double value);
  // A histogram's samples (after Family(name, kHistogram, ...)): from the
  // count of observations in each bucket, `counts[i]` those at most
  // `upper_bounds[i]` (and above the bound before), and `counts.back()`
  // those above the last bound (counts.size() == upper_bounds.size() + 1;
  // the bounds ascending and finite), the cumulative `name_bucket{le=..}`
  // lines ending with le="+Inf", then `name_sum` and `name_count`.
  void Histogram(std::string_view name, const MetricLabels& labels,
                 const std::vector<double>& upper_bounds, const std::vector<uint64_t>& counts,
                 double sum);

  const std::string& text() const { return out_; }
  std::string Take() { return std::move(out_); }

 private:
  void Line(std::string_view name, const MetricLabels& labels, std::string_view value);

  std::string out_;
};

}  // namespace delayq::server

#endif  // DELAYQ_SERVER_PROMETHEUS_TEXT_H_
