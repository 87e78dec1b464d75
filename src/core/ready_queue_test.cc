#include "core/ready_queue.h"

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <vector>

#include "test_seed.h"

namespace delayq::core {
namespace {

TEST(ReadyQueue, PriorityThenIdWithArbitraryRemoval) {
  JobPool pool;
  std::mt19937 rng(static_cast<uint32_t>(delayq::testing::TestSeed(3)));
  ReadyQueue q;
  auto less = [](const Job* a, const Job* b) { return ReadyBefore(a, b); };
  std::set<Job*, decltype(less)> ref(less);
  std::vector<Job*> owned;
  JobId next = 1;
  for (int step = 0; step < 100000; ++step) {
    int op = static_cast<int>(rng() % 3);
    if (op == 0 || ref.empty()) {
      Job* j = pool.Create({}, {});
      owned.push_back(j);
      j->id = next++;
      j->priority = rng() % 5;
      q.Push(j);
      ref.insert(j);
    } else if (op == 1) {
      Job* top = q.top();
      ASSERT_EQ(top, *ref.begin());
      q.Remove(top);
      ref.erase(top);
    } else {
      auto it = ref.begin();
      std::advance(it, rng() % ref.size());
      q.Remove(*it);
      ref.erase(it);
    }
    ASSERT_EQ(q.size(), ref.size());
    if (step % 997 == 0) {
      ASSERT_TRUE(q.Valid());
    }
  }
  for (Job* j : owned) pool.Destroy(j);
}

}  // namespace
}  // namespace delayq::core
