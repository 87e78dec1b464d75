// FUZZ_CHECK(cond, what): a failed check of a fuzz target prints what
// failed and aborts, so that libFuzzer keeps the input.
#ifndef DELAYQ_FUZZ_FUZZ_CHECK_H_
#define DELAYQ_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond, what)                                                         \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      std::fprintf(stderr, "check failed: %s: %s (line %d)\n", #cond, what, __LINE__); \
      std::abort();                                                                    \
    }                                                                                  \
  } while (0)

#endif  // DELAYQ_FUZZ_FUZZ_CHECK_H_
