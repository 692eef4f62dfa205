/* SPDX-License-Identifier: MIT */
/* atomics.h -- atomics, accessed only through wrappers that name the
 * memory order, and the relaxed statistics counter. */
#ifndef KC_BASE_ATOMICS_H
#define KC_BASE_ATOMICS_H

#include <stdatomic.h>
#include <stdint.h>

#include "base/compiler.h"

#define kc__load_relaxed(p) atomic_load_explicit((p), memory_order_relaxed)
#define kc__load_acquire(p) atomic_load_explicit((p), memory_order_acquire)
#define kc__store_relaxed(p, v) atomic_store_explicit((p), (v), memory_order_relaxed)
#define kc__store_release(p, v) atomic_store_explicit((p), (v), memory_order_release)
#define kc__fetch_add_relaxed(p, v) atomic_fetch_add_explicit((p), (v), memory_order_relaxed)
#define kc__fetch_sub_relaxed(p, v) atomic_fetch_sub_explicit((p), (v), memory_order_relaxed)
#define kc__fetch_add_release(p, v) atomic_fetch_add_explicit((p), (v), memory_order_release)
#define kc__fetch_sub_acq_rel(p, v) atomic_fetch_sub_explicit((p), (v), memory_order_acq_rel)

/* The body of a spin-wait: tells the core (and its sibling hyperthread)
 * that this thread only waits. */
static inline void kc__cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

/* A statistics counter that one thread at a time is expected to bump: a
 * relaxed load and a relaxed store, not an atomic read-modify-write (no bus
 * lock on the launch path; concurrent bumps may lose counts). On x86-64 it
 * is one `incq` on memory, which is exactly that load and store: compilers
 * do not fuse atomic loads and stores into one instruction themselves.
 * ThreadSanitizer builds keep the C11 form, which it can see. */
#if defined(__x86_64__) && !defined(KC__TSAN)
#define kc__count_relaxed(p) __asm__("incq %0" : "+m"(*(uint64_t *)(p)))
#else
#define kc__count_relaxed(p) kc__store_relaxed((p), kc__load_relaxed(p) + 1)
#endif

#endif /* KC_BASE_ATOMICS_H */
