/* SPDX-License-Identifier: MIT */
/* grace.c -- grace periods (grace.h): the registry of thread records, a
 * thread's sections, and snapshots. */
#include "base/grace.h"
#include "base/atomics.h"
#include "base/compiler.h"
#include "base/fork.h"
#include "base/mutex.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

/* A leaf: taken to add or reuse a record, by a snapshot and around fork. */
static kc__mutex registry_lock = PTHREAD_MUTEX_INITIALIZER;
static kc__grace_thr *registry;
static pthread_key_t exit_key;
static kc__once key_once = KC__ONCE_INIT;
static bool key_ok;
static kc__fork_hook fork_hook;

__attribute__((visibility("hidden"), tls_model("initial-exec"))) _Thread_local kc__grace_thr *kc__grace_self;

/* A thread's end: its record, outside any section, goes back to the
 * registry for the next new thread. */
static void on_thread_exit(void *p) {
  kc__grace_thr *t = p;
  /* a later thread-exit destructor that calls kcache joins anew, never on
   * the record given back (the next new thread's) */
  if (kc__grace_self == t) kc__grace_self = NULL;
  if (kc__load_relaxed(&t->seq) & 1) kc__fetch_add_release(&t->seq, 1); /* it left in a section */
  t->depth = 0;
  kc__lock(&registry_lock);
  t->taken = false;
  kc__unlock(&registry_lock);
}

static void fork_prepare(void *ud) {
  (void)ud;
  kc__lock(&registry_lock);
}
static void fork_parent(void *ud) {
  (void)ud;
  kc__unlock(&registry_lock);
}
/* The child has only the forking thread: every other record is free and
 * outside, so no snapshot waits for a thread that does not exist here. */
static void fork_child(void *ud) {
  (void)ud;
  for (kc__grace_thr *t = registry; t; t = t->next) {
    if (t == kc__grace_self) continue;
    if (kc__load_relaxed(&t->seq) & 1) kc__fetch_add_release(&t->seq, 1);
    t->depth = 0;
    t->taken = false;
  }
  kc__unlock(&registry_lock);
}

static void key_init(void) {
  key_ok = pthread_key_create(&exit_key, on_thread_exit) == 0;
  fork_hook = (kc__fork_hook){
      .level = KC__FORK_GRACE, .prepare = fork_prepare, .parent = fork_parent, .child = fork_child};
  kc__fork_register(&fork_hook);
}

bool kc__grace_join(void) {
  kc__call_once(&key_once, key_init);
  if (!key_ok) return false;
  kc__lock(&registry_lock);
  kc__grace_thr *t = registry;
  while (t && t->taken) t = t->next;
  if (!t && (t = calloc(1, sizeof *t)) != NULL) {
    atomic_init(&t->seq, 0);
    t->next = registry;
    registry = t;
  }
  if (t) t->taken = true;
  kc__unlock(&registry_lock);
  if (!t) return false;
  if (pthread_setspecific(exit_key, t) != 0) {
    kc__lock(&registry_lock);
    t->taken = false;
    kc__unlock(&registry_lock);
    return false;
  }
  kc__grace_self = t;
  return true;
}

bool kc__grace_inside(void) { return kc__grace_self && kc__grace_self->depth > 0; }

bool kc__grace_snap(kc__grace *g, const kc__heap *heap) {
  g->v = NULL;
  g->n = 0;
  atomic_thread_fence(memory_order_seq_cst); /* after what the caller unlinked */
  kc__lock(&registry_lock);
  size_t cap = 0;
  for (kc__grace_thr *t = registry; t; t = t->next) cap++;
  bool ok = true;
  if (cap && !(g->v = kc__heap_alloc(heap, cap * sizeof *g->v))) ok = false;
  for (kc__grace_thr *t = registry; ok && t; t = t->next) {
    uint64_t s = atomic_load_explicit(&t->seq, memory_order_seq_cst);
    if (s & 1) g->v[g->n++] = (struct kc__grace_seen){t, s};
  }
  kc__unlock(&registry_lock);
  return ok;
}

bool kc__grace_passed(const kc__grace *g) {
  for (size_t i = 0; i < g->n; i++)
    if (kc__load_acquire(&g->v[i].t->seq) == g->v[i].seq) return false;
  return true;
}

void kc__grace_free(kc__grace *g, const kc__heap *heap) {
  kc__heap_free(heap, g->v);
  g->v = NULL;
  g->n = 0;
}
