/* SPDX-License-Identifier: MIT */
/* mutex.h -- locks and once-flags.
 *
 * Locks are POSIX mutexes, not C11 mtx_t: ThreadSanitizer intercepts the
 * pthread functions but not glibc's C11 wrappers, and would report every
 * hand-over through a C11 mutex as a race. */
#ifndef KC_BASE_MUTEX_H
#define KC_BASE_MUTEX_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

typedef pthread_mutex_t kc__mutex;
#define kc__mutex_init(m) (pthread_mutex_init((m), NULL) == 0)
#define kc__mutex_destroy(m) pthread_mutex_destroy(m)
#define kc__lock(m) pthread_mutex_lock(m)
#define kc__unlock(m) pthread_mutex_unlock(m)
typedef pthread_once_t kc__once;
#define KC__ONCE_INIT PTHREAD_ONCE_INIT
#define kc__call_once(o, fn) pthread_once((o), (fn))

/* Condition variables whose timed waits run on the monotonic clock
 * (kc__now_ns's), so that a change of the wall clock neither shortens nor
 * stretches them (misc.c). */
bool kc__cond_init_monotonic(pthread_cond_t *c);
/* Waits on c (m held) until signalled or kc__now_ns() reaches deadline_ns:
 * false once the deadline has passed. A spurious wake-up returns true, as
 * pthread_cond_wait's: callers test their condition again. */
bool kc__cond_wait_until(pthread_cond_t *c, kc__mutex *m, uint64_t deadline_ns);

#endif /* KC_BASE_MUTEX_H */
