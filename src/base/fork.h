/* SPDX-License-Identifier: MIT */
/* fork.h -- what kcache does when the process forks: one pthread_atfork
 * registration for the whole library, and a list of hooks (a runtime's
 * locks, a remote tier's queue) run in lock order around every fork.
 *
 * prepare hooks run in ascending level (outer locks first, as the lock
 * hierarchy of doc/locks.md orders them), parent and child hooks in
 * descending level, all under the list's own lock, which prepare takes
 * first and the parent and child hooks give back last. A hook is embedded
 * in its owner: registering allocates nothing. */
#ifndef KC_BASE_FORK_H
#define KC_BASE_FORK_H

#include <pthread.h>
#include <stdbool.h>

/* Levels: every runtime's locks before every remote tier's (its locks are
 * leaves, taken under the runtime's), then the host backend's pool (a
 * leaf), the test-only fault proxy's (src/testing, a leaf under a
 * runtime's probe lock), the registry of threads of grace.c and the list
 * of live runtimes of core/world.c (leaves taken under none of them)
 * last. */
enum {
  KC__FORK_RUNTIME = 1,
  KC__FORK_REMOTE = 2,
  KC__FORK_HOST = 3,
  KC__FORK_TESTING = 4,
  KC__FORK_GRACE = 5,
  KC__FORK_LIVE = 6
};

typedef struct kc__fork_hook {
  struct kc__fork_hook *prev, *next;
  int level;
  void (*prepare)(void *ud); /* takes the owner's locks */
  void (*parent)(void *ud); /* gives them back */
  void (*child)(void *ud); /* gives them back in the child, and fixes what it inherited */
  void *ud;
} kc__fork_hook;

/* Adds h (its fields set; prev and next are the list's). False when
 * pthread_atfork failed (out of memory): the owner then works as before,
 * without fork handling. */
bool kc__fork_register(kc__fork_hook *h);
/* Removes h if it was added (a no-op otherwise). */
void kc__fork_unregister(kc__fork_hook *h);

/* Whether the library may start threads in this process: false only in a
 * ThreadSanitizer build, in a child of fork(). TSan cannot start threads
 * there ("dup thread with used id" when glibc hands the new thread a stack
 * of one of the parent's threads, which TSan still counts as running), so
 * the pools and queues run their work on the caller instead. */
bool kc__fork_threads_allowed(void);

/* Starts a thread of the library's own (a queue's or a backend's worker)
 * with every signal blocked, so that it takes none meant for the
 * application's threads; false if it could not start. */
bool kc__thread_start(pthread_t *t, void *(*fn)(void *), void *arg);

#endif /* KC_BASE_FORK_H */
