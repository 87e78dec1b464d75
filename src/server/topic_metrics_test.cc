// SelectTopTopics: the topics GET /metrics labels one by one.
#include "server/topic_metrics.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace delayq::server {
namespace {

TopicStats TopicWith(std::string name, uint64_t ready, uint64_t reserved = 0, uint64_t delayed = 0,
                     uint64_t buried = 0) {
  TopicStats t;
  t.name = std::move(name);
  t.ready = ready;
  t.reserved = reserved;
  t.delayed = delayed;
  t.buried = buried;
  t.urgent = ready;  // not a state of its own: never counted
  return t;
}

std::vector<std::string> NamesOf(const TopTopics& top) {
  std::vector<std::string> out;
  for (const TopicJobCounts& t : top.named) out.emplace_back(t.name);
  return out;
}

TEST(SelectTopTopics, KeepsThoseWithTheMostJobsByNameAndSumsTheRest) {
  const std::vector<TopicStats> all = {
      TopicWith("small", 1), TopicWith("big", 0, 2, 3, 4),  // 9 jobs in every state
      TopicWith("empty", 0), TopicWith("middle", 5),       TopicWith("also-small", 0, 0, 0, 1),
  };
  const TopTopics top = SelectTopTopics(all, 2);
  EXPECT_EQ(NamesOf(top), (std::vector<std::string>{"big", "middle"}));
  EXPECT_EQ(top.named[0].reserved, 2u);
  EXPECT_EQ(top.named[0].delayed, 3u);
  EXPECT_EQ(top.named[0].buried, 4u);
  EXPECT_EQ(top.others, 3u);
  EXPECT_EQ(top.other.name, kOtherTopicsLabel);
  EXPECT_EQ(top.other.ready, 1u);
  EXPECT_EQ(top.other.buried, 1u);
  EXPECT_EQ(top.other.jobs(), 2u);
}

TEST(SelectTopTopics, TiesGoToTheNameThatSortsFirst) {
  const std::vector<TopicStats> all = {TopicWith("d", 3), TopicWith("b", 3), TopicWith("c", 3),
                                       TopicWith("a", 1)};
  const TopTopics top = SelectTopTopics(all, 2);
  EXPECT_EQ(NamesOf(top), (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(top.others, 2u);
  EXPECT_EQ(top.other.ready, 4u);
}

TEST(SelectTopTopics, NoneSummedWhenTheyFit) {
  const std::vector<TopicStats> all = {TopicWith("z", 0), TopicWith("y", 7)};
  for (size_t max : {2u, 3u, 100u}) {
    const TopTopics top = SelectTopTopics(all, max);
    EXPECT_EQ(NamesOf(top), (std::vector<std::string>{"y", "z"})) << max;
    EXPECT_EQ(top.others, 0u);
    EXPECT_EQ(top.other.jobs(), 0u);
  }
  const TopTopics none = SelectTopTopics(all, 0);
  EXPECT_TRUE(none.named.empty());
  EXPECT_EQ(none.others, 2u);
  EXPECT_EQ(none.other.ready, 7u);
  EXPECT_TRUE(SelectTopTopics({}, 5).named.empty());
}

// Against choosing by a full sort, over many random sets.
TEST(SelectTopTopics, AgreesWithAFullSort) {
  uint64_t seed = 42;
  auto next = [&seed] {
    seed = seed * 6364136223846793005u + 1442695040888963407u;
    return seed >> 33;
  };
  for (int round = 0; round < 200; ++round) {
    std::vector<TopicStats> all;
    const size_t n = next() % 40;
    for (size_t i = 0; i < n; ++i)
      all.push_back(TopicWith("t" + std::to_string(next() % 1000) + "-" + std::to_string(i),
                              next() % 4, next() % 3, next() % 2, next() % 2));
    const size_t max = next() % 45;
    std::vector<TopicStats> sorted = all;
    std::sort(sorted.begin(), sorted.end(), [](const TopicStats& a, const TopicStats& b) {
      const uint64_t ja = a.ready + a.reserved + a.delayed + a.buried;
      const uint64_t jb = b.ready + b.reserved + b.delayed + b.buried;
      return ja != jb ? ja > jb : a.name < b.name;
    });
    std::vector<std::string> want;
    uint64_t rest = 0;
    for (size_t i = 0; i < sorted.size(); ++i) {
      if (i < max) {
        want.push_back(sorted[i].name);
      } else {
        rest += sorted[i].ready + sorted[i].reserved + sorted[i].delayed + sorted[i].buried;
      }
    }
    std::sort(want.begin(), want.end());
    const TopTopics top = SelectTopTopics(all, max);
    ASSERT_EQ(NamesOf(top), want) << "round " << round;
    EXPECT_EQ(top.other.jobs(), rest) << "round " << round;
    EXPECT_EQ(top.others, sorted.size() > max ? sorted.size() - max : 0) << "round " << round;
  }
}

}  // namespace
}  // namespace delayq::server
