// DELAYQ_SANITIZED is defined when the tests are built with AddressSanitizer
// (gcc defines __SANITIZE_ADDRESS__, clang answers __has_feature): figures of
// memory or speed mean little then, and tests that measure them say so.
#ifndef DELAYQ_TESTS_SANITIZED_H_
#define DELAYQ_TESTS_SANITIZED_H_

#if defined(__SANITIZE_ADDRESS__)
#define DELAYQ_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DELAYQ_SANITIZED 1
#endif
#endif

#endif  // DELAYQ_TESTS_SANITIZED_H_
