/* SPDX-License-Identifier: MIT */
/* fork.c -- the library's one pthread_atfork registration and the list of
 * fork hooks (fork.h): kept sorted by level, walked under its own lock. */
#include "base/fork.h"
#include "base/atomics.h"
#include "base/compiler.h"
#include "base/mutex.h"

#include <signal.h>
#include <stddef.h>

static kc__mutex hooks_lock = PTHREAD_MUTEX_INITIALIZER; /* outermost: prepare takes it first */
static kc__fork_hook *hooks; /* ascending level; within a level, newest last */
static kc__once atfork_once = KC__ONCE_INIT;
static bool atfork_ok;
static _Atomic bool forked_child; /* set in a child of fork() (read in TSan builds) */

static void on_prepare(void) {
  kc__lock(&hooks_lock);
  for (kc__fork_hook *h = hooks; h; h = h->next) h->prepare(h->ud);
}

static kc__fork_hook *last_hook(void) {
  kc__fork_hook *h = hooks;
  while (h && h->next) h = h->next;
  return h;
}

static void on_parent(void) {
  for (kc__fork_hook *h = last_hook(); h; h = h->prev) h->parent(h->ud);
  kc__unlock(&hooks_lock);
}

static void on_child(void) {
  atomic_store_explicit(&forked_child, true, memory_order_relaxed);
  for (kc__fork_hook *h = last_hook(); h; h = h->prev) h->child(h->ud);
  kc__unlock(&hooks_lock); /* taken by this thread in prepare */
}

static void install(void) { atfork_ok = pthread_atfork(on_prepare, on_parent, on_child) == 0; }

bool kc__fork_register(kc__fork_hook *h) {
  kc__call_once(&atfork_once, install);
  h->prev = h->next = NULL;
  if (!atfork_ok) return false;
  kc__lock(&hooks_lock);
  kc__fork_hook **at = &hooks, *prev = NULL;
  while (*at && (*at)->level <= h->level) {
    prev = *at;
    at = &(*at)->next;
  }
  h->next = *at;
  h->prev = prev;
  if (*at) (*at)->prev = h;
  *at = h;
  kc__unlock(&hooks_lock);
  return true;
}

void kc__fork_unregister(kc__fork_hook *h) {
  kc__lock(&hooks_lock);
  bool listed = h->prev || hooks == h;
  if (listed) {
    if (h->prev) h->prev->next = h->next;
    else hooks = h->next;
    if (h->next) h->next->prev = h->prev;
  }
  h->prev = h->next = NULL;
  kc__unlock(&hooks_lock);
}

bool kc__fork_threads_allowed(void) {
#ifdef KC__TSAN
  return !atomic_load_explicit(&forked_child, memory_order_relaxed);
#else
  return true;
#endif
}

bool kc__thread_start(pthread_t *t, void *(*fn)(void *), void *arg) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  bool started = pthread_create(t, NULL, fn, arg) == 0;
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return started;
}
