#include "core/id_table.h"

#include <gtest/gtest.h>

#include <random>
#include <unordered_map>
#include <vector>

#include "test_seed.h"

namespace delayq::core {
namespace {

TEST(IdTable, InsertFindEraseAgainstUnorderedMap) {
  JobPool pool;
  std::mt19937_64 rng(delayq::testing::TestSeed(7));
  IdTable t;
  std::unordered_map<JobId, Job*> ref;
  JobId next = 1;
  for (int step = 0; step < 300000; ++step) {
    if (rng() % 3 != 0 || ref.empty()) {
      Job* j = pool.Create({}, {});
      j->id = (rng() % 4 == 0) ? next + (rng() % 1000) * 1'000'003 : next;
      next++;
      if (ref.count(j->id) > 0) {
        pool.Destroy(j);
        continue;
      }
      t.Insert(j);
      ref[j->id] = j;
    } else {
      JobId id = rng() % next;
      auto it = ref.find(id);
      bool present = it != ref.end();
      ASSERT_EQ(t.Erase(id), present);
      if (present) {
        pool.Destroy(it->second);
        ref.erase(it);
      }
    }
    if (step % 20000 == 0) {
      for (auto& [id, j] : ref) ASSERT_EQ(t.Find(id), j);
    }
    ASSERT_EQ(t.size(), ref.size());
  }
  for (auto& [id, j] : ref) pool.Destroy(j);
}

TEST(IdTable, ShrinksAfterMassErase) {
  JobPool pool;
  IdTable t;
  std::vector<Job*> jobs;
  for (JobId id = 1; id <= 100000; ++id) {
    Job* j = pool.Create({}, {});
    j->id = id;
    t.Insert(j);
    jobs.push_back(j);
  }
  size_t big = t.capacity();
  for (Job* j : jobs) {
    ASSERT_TRUE(t.Erase(j->id));
    pool.Destroy(j);
  }
  EXPECT_LT(t.capacity(), big);
  EXPECT_EQ(t.Find(5), nullptr);
}

}  // namespace
}  // namespace delayq::core
