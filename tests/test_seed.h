// The seed of a randomized test: DELAYQ_TEST_SEED when it is set (to replay
// a failure, or to explore), else the test's own fixed one. It is printed
// and recorded with the test's result, so a failure names what replays it:
//   DELAYQ_TEST_SEED=<seed> build/delayq_core_tests --gtest_filter=<test>
// Tests with seeds of their own (DELAYQ_MODEL_SEED, DELAYQ_HORIZON_SEED,
// DELAYQ_REDIS_MODEL_SEED, DELAYQ_CRASH_SEED) read those first.
#ifndef DELAYQ_TESTS_TEST_SEED_H_
#define DELAYQ_TESTS_TEST_SEED_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace delayq::testing {

inline uint64_t TestSeed(uint64_t fallback, const char* variable = "DELAYQ_TEST_SEED") {
  uint64_t seed = fallback;
  if (const char* e = std::getenv(variable); e != nullptr && *e != '\0')
    seed = std::strtoull(e, nullptr, 10);
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  std::printf("seed %llu (%s=%llu replays it)\n", static_cast<unsigned long long>(seed), variable,
              static_cast<unsigned long long>(seed));
  return seed;
}

}  // namespace delayq::testing

#endif  // DELAYQ_TESTS_TEST_SEED_H_
