// The topics GET /metrics labels one by one in delayq_topic_jobs
// (docs/operations.md, "Metrics"): the `max` topics with the most jobs,
// each under its name, and the jobs of the rest summed under one label
// that no topic name can be (kOtherTopicsLabel: topic names hold no '*'),
// so that the size of a scrape is bounded whatever the number of topics.
//
// Thread: any (a pure function).
#ifndef DELAYQ_SERVER_TOPIC_METRICS_H_
#define DELAYQ_SERVER_TOPIC_METRICS_H_

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "delayq/types.h"

namespace delayq::server {

inline constexpr std::string_view kOtherTopicsLabel = "*other*";

struct TopicJobCounts {
  std::string_view name;  // a view of the TopicStats' name
  uint64_t ready = 0, reserved = 0, delayed = 0, buried = 0;
  uint64_t jobs() const { return ready + reserved + delayed + buried; }
};

struct TopTopics {
  // At most `max`, by name.
  std::vector<TopicJobCounts> named;
  // The rest's jobs summed (name: kOtherTopicsLabel), and how many topics
  // they are (0: there were no more than `max`).
  TopicJobCounts other;
  size_t others = 0;
};

// The `max` topics of `all` with the most jobs (ready, reserved, delayed
// and buried), ties going to the name that sorts first; in linear time
// plus the sort of those chosen. The views point into `all`.
TopTopics SelectTopTopics(const std::vector<TopicStats>& all, size_t max);

}  // namespace delayq::server

#endif  // DELAYQ_SERVER_TOPIC_METRICS_H_
