// Test helpers: whether this build runs under a sanitizer, for tests that
// measure memory.
#ifndef TENSORD_TESTS_COMMON_SANITIZERS_H_
#define TENSORD_TESTS_COMMON_SANITIZERS_H_

// Sanitizer builds (make sanitize, make tsan) keep freed blocks in
// quarantine, resident, and do not report to mallinfo2: tests that bound
// the memory an attack leaves behind measure it only where it can be
// measured, and still run everything else.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TENSORD_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TENSORD_TEST_SANITIZED 1
#endif
#endif

namespace tensord::testing {

#ifdef TENSORD_TEST_SANITIZED
inline constexpr bool kMemoryIsMeasurable = false;
#else
inline constexpr bool kMemoryIsMeasurable = true;
#endif

}  // namespace tensord::testing

#endif  // TENSORD_TESTS_COMMON_SANITIZERS_H_
