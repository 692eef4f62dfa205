/* SPDX-License-Identifier: MIT */
/* compiler.h -- attributes and sanitizer detection (src/base: knows no
 * kcache type). */
#ifndef KC_BASE_COMPILER_H
#define KC_BASE_COMPILER_H

#define KC__LIKELY(x) __builtin_expect(!!(x), 1)
#define KC__UNLIKELY(x) __builtin_expect(!!(x), 0)
#define KC__NOINLINE __attribute__((noinline))
#define KC__COLD __attribute__((cold, noinline))
#define KC__PRINTF(a, b) __attribute__((format(printf, a, b)))

/* KC__TSAN: defined in ThreadSanitizer builds (gcc and clang). */
#if defined(__clang__) && defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define KC__TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) && !defined(KC__TSAN)
#define KC__TSAN 1
#endif

#endif /* KC_BASE_COMPILER_H */
