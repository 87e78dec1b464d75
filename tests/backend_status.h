// Test helper: a backend's job operation completion that keeps only its
// status (for tests that drive a backend through Done callbacks).
#ifndef DELAYQ_TESTS_BACKEND_STATUS_H_
#define DELAYQ_TESTS_BACKEND_STATUS_H_

#include <utility>

#include "backend/backend.h"

namespace delayq::testing {

inline backend::Callback<JobChange> Ch(backend::Done d) {
  return [d = std::move(d)](Result<JobChange> r) { d(r.status()); };
}

}  // namespace delayq::testing

#endif  // DELAYQ_TESTS_BACKEND_STATUS_H_
