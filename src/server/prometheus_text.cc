#include "server/prometheus_text.h"

#include <charconv>
#include <cmath>

namespace delayq::server {

namespace {

std::string_view MetricTypeName(MetricType t) {
  switch (t) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

// `v` with each backslash as \\, each line feed as \n and, if `quote`, each
// double quote as \".
std::string PrometheusEscaped(std::string_view v, bool quote) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && quote) {
      out += "\\\"";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

template <typename T>
std::string PrometheusInteger(T v) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, end);
}

}  // namespace

std::string EscapeLabelValue(std::string_view v) { return PrometheusEscaped(v, /*quote=*/true); }

std::string EscapeHelp(std::string_view help) { return PrometheusEscaped(help, /*quote=*/false); }

std::string FormatMetricValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  // Shortest round trip: the fewest digits that read back as `v` (Go's
  // ParseFloat, which Prometheus uses, reads this form, exponents too).
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, end);
}

std::string FormatMetricValue(uint64_t v) { return PrometheusInteger(v); }

std::string FormatMetricValue(int64_t v) { return PrometheusInteger(v); }

void PrometheusText::Family(std::string_view name, MetricType type, std::string_view help) {
  out_ += "# HELP ";
  out_ += name;
  out_ += ' ';
  out_ += EscapeHelp(help);
  out_ += "\n# TYPE ";
  out_ += name;
  out_ += ' ';
  out_ += MetricTypeName(type);
  out_ += '\n';
}

void PrometheusText::Line(std::string_view name, const MetricLabels& labels,
                          std::string_view value) {
  out_ += name;
  if (!labels.empty()) {
    out_ += '{';
    for (size_t i = 0; i < labels.size(); ++i) {
      if (i > 0) out_ += ',';
      out_ += labels[i].name;
      out_ += "=\"";
      out_ += EscapeLabelValue(labels[i].value);
      out_ += '"';
    }
    out_ += '}';
  }
  out_ += ' ';
  out_ += value;
  out_ += '\n';
}

void PrometheusText::Sample(std::string_view name, const MetricLabels& labels, uint64_t value) {
  Line(name, labels, FormatMetricValue(value));
}

void PrometheusText::Sample(std::string_view name, const MetricLabels& labels, int64_t value) {
  Line(name, labels, FormatMetricValue(value));
}

void PrometheusText::Sample(std::string_view name, const MetricLabels& labels, double value) {
  Line(name, labels, FormatMetricValue(value));
}

void PrometheusText::Histogram(std::string_view name, const MetricLabels& labels,
                               const std::vector<double>& upper_bounds,
                               const std::vector<uint64_t>& counts, double sum) {
  const std::string bucket = std::string(name) + "_bucket";
  MetricLabels with_le = labels;
  with_le.push_back({"le", {}});
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= upper_bounds.size(); ++i) {
    if (i < counts.size()) cumulative += counts[i];
    const std::string le =
        i < upper_bounds.size() ? FormatMetricValue(upper_bounds[i]) : std::string("+Inf");
    with_le.back().value = le;
    Line(bucket, with_le, FormatMetricValue(cumulative));
  }
  Line(std::string(name) + "_sum", labels, FormatMetricValue(sum));
  Line(std::string(name) + "_count", labels, FormatMetricValue(cumulative));
}

}  // namespace delayq::server
