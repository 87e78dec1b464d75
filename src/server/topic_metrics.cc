// SelectTopTopics (topic_metrics.h).
#include "server/topic_metrics.h"

#include <algorithm>

namespace delayq::server {

TopTopics SelectTopTopics(const std::vector<TopicStats>& all, size_t max) {
  std::vector<TopicJobCounts> counts;
  counts.reserve(all.size());
  for (const TopicStats& t : all)
    counts.push_back({t.name, t.ready, t.reserved, t.delayed, t.buried});
  // More jobs first, then the name.
  const auto before = [](const TopicJobCounts& a, const TopicJobCounts& b) {
    const uint64_t ja = a.jobs(), jb = b.jobs();
    return ja != jb ? ja > jb : a.name < b.name;
  };
  TopTopics out;
  out.other.name = kOtherTopicsLabel;
  if (counts.size() > max) {
    std::nth_element(counts.begin(), counts.begin() + static_cast<std::ptrdiff_t>(max),
                     counts.end(), before);
    for (auto it = counts.begin() + static_cast<std::ptrdiff_t>(max); it != counts.end(); ++it) {
      out.other.ready += it->ready;
      out.other.reserved += it->reserved;
      out.other.delayed += it->delayed;
      out.other.buried += it->buried;
      out.others++;
    }
    counts.resize(max);
  }
  std::sort(counts.begin(), counts.end(),
            [](const TopicJobCounts& a, const TopicJobCounts& b) { return a.name < b.name; });
  out.named = std::move(counts);
  return out;
}

}  // namespace delayq::server
