// The exposition writer: escaping, numbers, families and histograms, as the
// Prometheus text format 0.0.4 spells them. (tests/server/metrics_test.cc
// checks a whole GET /metrics with promtool.)
#include "server/prometheus_text.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>

namespace delayq::server {
namespace {

TEST(PrometheusText, LabelValuesEscapeBackslashQuoteAndNewline) {
  EXPECT_EQ(EscapeLabelValue("plain"), "plain");
  EXPECT_EQ(EscapeLabelValue(R"(a\b)"), R"(a\\b)");
  EXPECT_EQ(EscapeLabelValue(R"(say "hi")"), R"(say \"hi\")");
  EXPECT_EQ(EscapeLabelValue("two\nlines"), R"(two\nlines)");
  EXPECT_EQ(EscapeLabelValue("tab\there"), "tab\there");  // only those three
  EXPECT_EQ(EscapeLabelValue("ünï"), "ünï");
}

TEST(PrometheusText, HelpEscapesBackslashAndNewlineButNotQuotes) {
  EXPECT_EQ(EscapeHelp(R"(a "quoted" \ word)"), R"(a "quoted" \\ word)");
  EXPECT_EQ(EscapeHelp("line\nbreak"), R"(line\nbreak)");
}

TEST(PrometheusText, IntegersAreExact) {
  EXPECT_EQ(FormatMetricValue(uint64_t{0}), "0");
  EXPECT_EQ(FormatMetricValue(std::numeric_limits<uint64_t>::max()), "18446744073709551615");
  EXPECT_EQ(FormatMetricValue(int64_t{-42}), "-42");
  EXPECT_EQ(FormatMetricValue(std::numeric_limits<int64_t>::min()), "-9223372036854775808");
}

TEST(PrometheusText, DoublesAreTheirShortestRoundTrip) {
  EXPECT_EQ(FormatMetricValue(0.0), "0");
  EXPECT_EQ(FormatMetricValue(1.0), "1");
  EXPECT_EQ(FormatMetricValue(0.1), "0.1");
  EXPECT_EQ(FormatMetricValue(0.005), "0.005");
  EXPECT_EQ(FormatMetricValue(-2.5), "-2.5");
  EXPECT_EQ(FormatMetricValue(1e21), "1e+21");
  EXPECT_EQ(FormatMetricValue(1.7976931348623157e308), "1.7976931348623157e+308");
  for (double v : {0.1 + 0.2, 1.0 / 3, 123456.789, 5e-324}) {
    const std::string s = FormatMetricValue(v);
    EXPECT_EQ(std::strtod(s.c_str(), nullptr), v) << s;  // reads back as the same double
  }
  EXPECT_EQ(FormatMetricValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatMetricValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatMetricValue(std::numeric_limits<double>::quiet_NaN()), "NaN");
}

TEST(PrometheusText, FamiliesHaveHelpAndTypeThenTheirSamples) {
  PrometheusText t;
  t.Family("delayq_requests_total", MetricType::kCounter, "Requests.\nBy \"op\" \\ protocol.");
  t.Sample("delayq_requests_total", {{"protocol", "http"}, {"op", "put"}}, uint64_t{3});
  t.Sample("delayq_requests_total", {{"protocol", "beanstalkd"}, {"op", "a\"b"}}, uint64_t{1});
  t.Family("delayq_waiting_reserves", MetricType::kGauge, "Reserves that wait.");
  t.Sample("delayq_waiting_reserves", {}, int64_t{0});
  t.Family("process_cpu_seconds_total", MetricType::kCounter, "CPU time.");
  t.Sample("process_cpu_seconds_total", {}, 1.25);
  EXPECT_EQ(t.text(),
            "# HELP delayq_requests_total Requests.\\nBy \"op\" \\\\ protocol.\n"
            "# TYPE delayq_requests_total counter\n"
            "delayq_requests_total{protocol=\"http\",op=\"put\"} 3\n"
            "delayq_requests_total{protocol=\"beanstalkd\",op=\"a\\\"b\"} 1\n"
            "# HELP delayq_waiting_reserves Reserves that wait.\n"
            "# TYPE delayq_waiting_reserves gauge\n"
            "delayq_waiting_reserves 0\n"
            "# HELP process_cpu_seconds_total CPU time.\n"
            "# TYPE process_cpu_seconds_total counter\n"
            "process_cpu_seconds_total 1.25\n");
}

TEST(PrometheusText, HistogramBucketsAreCumulativeAndEndWithInf) {
  PrometheusText t;
  t.Family("delayq_latency_seconds", MetricType::kHistogram, "Latency.");
  // 2 at most 0.005, 0 in (0.005, 0.1], 3 in (0.1, 1], 4 above 1.
  t.Histogram("delayq_latency_seconds", {{"op", "put"}}, {0.005, 0.1, 1}, {2, 0, 3, 4}, 12.5);
  EXPECT_EQ(t.Take(),
            "# HELP delayq_latency_seconds Latency.\n"
            "# TYPE delayq_latency_seconds histogram\n"
            "delayq_latency_seconds_bucket{op=\"put\",le=\"0.005\"} 2\n"
            "delayq_latency_seconds_bucket{op=\"put\",le=\"0.1\"} 2\n"
            "delayq_latency_seconds_bucket{op=\"put\",le=\"1\"} 5\n"
            "delayq_latency_seconds_bucket{op=\"put\",le=\"+Inf\"} 9\n"
            "delayq_latency_seconds_sum{op=\"put\"} 12.5\n"
            "delayq_latency_seconds_count{op=\"put\"} 9\n");
}

TEST(PrometheusText, AHistogramWithoutLabelsOrObservations) {
  PrometheusText t;
  t.Histogram("h", {}, {1}, {0, 0}, 0);
  EXPECT_EQ(t.text(),
            "h_bucket{le=\"1\"} 0\n"
            "h_bucket{le=\"+Inf\"} 0\n"
            "h_sum 0\n"
            "h_count 0\n");
}

}  // namespace
}  // namespace delayq::server
