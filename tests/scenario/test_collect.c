/* SPDX-License-Identifier: MIT */
/*
 * test_collect.c -- reclaiming old worlds with kc_collect: a long hot-reload
 * session stays bounded; pinned worlds and the latest world keep their code
 * and definitions; collected code is never launched again; handles and
 * contexts keep working across collections; kc_collect waits for what a
 * thread inside a compile still holds, and runs beside launches, compiles,
 * definitions and pins on other threads (issue 22).
 */
#include "kc_test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { N = 8 };

static const char *kernel_src =
    "KC_KERNEL void k(KC_GLOBAL float *y) { size_t i = kc_global_id(0); y[i] = h((float)i); }";

static void define_h(kc_runtime *rt, int version) {
  char src[128];
  snprintf(src, sizeof src, "KC_DEVICE float h(float x) { return x + %d.0f; }", version);
  kct_define(rt, "h", src);
}

/* h(i) = i + version */
static void expect_version(const float *out, int version) {
  for (int i = 0; i < N; i++) assert_float_equal(out[i], (float)(i + version), 0);
}

static void test_hot_reload_stays_bounded(void **state) {
  (void)state;
  kc_runtime *rt = kct_runtime(NULL);
  kc_context *ctx = kct_context(rt);
  kc_buffer *b = kct_buffer(rt, ctx, N);
  define_h(rt, 0);
  kct_define(rt, "k", kernel_src);
  kc_kernel *k = kct_kernel(rt, "k", NULL);
  float out[N];
  uint64_t most_cis = 0, most_defs = 0;
  enum { RELOADS = 40, EVERY = 8 };
  for (int v = 1; v <= RELOADS; v++) {
    define_h(rt, v);
    KCT_OK(rt, kct_run(k, ctx, b, N, out));
    expect_version(out, v);
    if (v % EVERY == 0) {
      kc_collect_info info;
      KCT_OK(rt, kc_collect(rt, &info));
      /* everything but the latest world's code and definitions went (the
       * first round has one compile fewer: h=0 was never launched) */
      uint64_t compiled = v == EVERY ? EVERY - 1 : EVERY;
      assert_int_equal(info.code_instances, compiled);
      assert_int_equal(info.linked, compiled);
      assert_int_equal(info.definitions, EVERY);
      kc_stats s = kct_stats(rt);
      assert_int_equal(s.code_instances, 1);
      assert_int_equal(s.definitions, 2); /* h and k as of the latest world */
    }
    kc_stats s = kct_stats(rt);
    if (s.code_instances > most_cis) most_cis = s.code_instances;
    if (s.definitions > most_defs) most_defs = s.definitions;
  }
  assert_true(most_cis <= EVERY + 1);
  assert_true(most_defs <= EVERY + 2);
  kc_stats s = kct_stats(rt);
  assert_int_equal(s.collected, RELOADS - 1);
  assert_int_equal(s.compiles, RELOADS);
  /* the handle still takes the fast path after a collection */
  uint64_t hits = s.fast_hits;
  KCT_OK(rt, kct_run(k, ctx, b, N, out));
  assert_int_equal(kct_stats(rt).fast_hits, hits + 1);
  kc_kernel_destroy(k);
  kct_destroy(rt);
}

/* A pinned world keeps its code and definitions: after a collect, the
 * pinned thread still gets the old result without a compile, and a kernel
 * it never compiled still compiles from the old definitions. */
typedef struct {
  kc_runtime *rt;
  kc_context *ctx;
  kc_buffer *b;
  pthread_barrier_t pinned, collected;
  float out[N], out2[N];
  kc_status st, st2;
  uint64_t compiles_before, compiles_after;
} pin_job;

static void *pinned_thread(void *arg) {
  pin_job *j = arg;
  kc_world w;
  j->st = kc_pin(j->rt, &w);
  kc_kernel *k = kc_kernel_create(j->rt, "k", NULL, &k) ? NULL : k;
  if (!j->st && k) j->st = kct_run(k, j->ctx, j->b, N, j->out); /* compiled at the pinned world */
  pthread_barrier_wait(&j->pinned); /* main redefines h, then collects */
  pthread_barrier_wait(&j->collected);
  j->compiles_before = kct_stats(j->rt).compiles;
  if (!j->st && k) j->st = kct_run(k, j->ctx, j->b, N, j->out);
  j->compiles_after = kct_stats(j->rt).compiles;
  kc_kernel *k2 = kc_kernel_create(j->rt, "k2", NULL, &k2) ? NULL : k2;
  j->st2 = k2 ? kct_run(k2, j->ctx, j->b, N, j->out2) : KC_ENOMEM;
  kc_kernel_destroy(k2);
  kc_kernel_destroy(k);
  kc_unpin(j->rt);
  return NULL;
}

static void test_pinned_world_survives_collect(void **state) {
  (void)state;
  pin_job j = {0};
  j.rt = kct_runtime(NULL);
  j.ctx = kct_context(j.rt);
  j.b = kct_buffer(j.rt, j.ctx, N);
  define_h(j.rt, 1);
  kct_define(j.rt, "k", kernel_src);
  kct_define(j.rt, "k2", "KC_KERNEL void k2(KC_GLOBAL float *y) { y[kc_global_id(0)] = h(0.0f); }");
  pthread_barrier_init(&j.pinned, NULL, 2);
  pthread_barrier_init(&j.collected, NULL, 2);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, pinned_thread, &j), 0);
  pthread_barrier_wait(&j.pinned);
  define_h(j.rt, 2);
  define_h(j.rt, 3);
  kc_kernel *k = kct_kernel(j.rt, "k", NULL);
  float out[N];
  KCT_OK(j.rt, kct_run(k, j.ctx, j.b, N, out));
  expect_version(out, 3);
  kc_collect_info info;
  KCT_OK(j.rt, kc_collect(j.rt, &info));
  /* world of h=2 was never used by anyone: only its definition goes; the
   * pinned world's code (h=1) and the latest (h=3) stay */
  assert_int_equal(info.code_instances, 0);
  assert_int_equal(info.definitions, 1);
  pthread_barrier_wait(&j.collected);
  pthread_join(t, NULL);
  KCT_OK(j.rt, j.st);
  expect_version(j.out, 1);
  assert_int_equal(j.compiles_after, j.compiles_before);
  KCT_OK(j.rt, j.st2);
  for (int i = 0; i < N; i++) assert_float_equal(j.out2[i], 1.0f, 0); /* h(0) with h=1 */
  /* unpinned now: the old world's code and h=1 go at the next collect */
  KCT_OK(j.rt, kc_collect(j.rt, &info));
  assert_int_equal(info.code_instances, 2);
  assert_int_equal(info.definitions, 1);
  KCT_OK(j.rt, kct_run(k, j.ctx, j.b, N, out));
  expect_version(out, 3);
  pthread_barrier_destroy(&j.pinned);
  pthread_barrier_destroy(&j.collected);
  kc_kernel_destroy(k);
  kct_destroy(j.rt);
}

/* Collected code is never launched again: a handle whose cached entry
 * pointed at collected code relinks the current code; another context's
 * linked objects go too; undefined names leave nothing behind. */
static void test_collect_across_contexts(void **state) {
  (void)state;
  kc_runtime *rt = kct_runtime(NULL);
  kc_context *c1 = kct_context(rt), *c2 = kct_context(rt);
  kc_buffer *b1 = kct_buffer(rt, c1, N), *b2 = kct_buffer(rt, c2, N);
  define_h(rt, 1);
  kct_define(rt, "k", kernel_src);
  kc_kernel *k = kct_kernel(rt, "k", NULL);
  float out[N];
  KCT_OK(rt, kct_run(k, c1, b1, N, out));
  KCT_OK(rt, kct_run(k, c2, b2, N, out));
  define_h(rt, 2);
  KCT_OK(rt, kct_run(k, c1, b1, N, out)); /* only c1 moves on */
  expect_version(out, 2);
  kc_collect_info info;
  KCT_OK(rt, kc_collect(rt, &info));
  assert_int_equal(info.code_instances, 1);
  assert_int_equal(info.linked, 2); /* the old code was linked in both contexts */
  kc_stats s0 = kct_stats(rt);
  KCT_OK(rt, kct_run(k, c2, b2, N, out)); /* its entry pointed at collected code */
  expect_version(out, 2);
  kc_stats s1 = kct_stats(rt);
  assert_int_equal(s1.compiles, s0.compiles);
  assert_int_equal(s1.links, s0.links + 1);
  /* an undefined kernel: its definition goes once no live world sees it */
  KCT_OK(rt, kc_undefine(rt, "k", NULL));
  KCT_STATUS(rt, KC_ENOTFOUND, kct_run(k, c1, b1, N, out));
  KCT_OK(rt, kc_collect(rt, &info));
  assert_int_equal(info.code_instances, 1);
  assert_int_equal(info.definitions, 1);
  assert_int_equal(kct_stats(rt).definitions, 1); /* h */
  KCT_STATUS(rt, KC_EINVAL, kc_collect(NULL, NULL));
  kc_kernel_destroy(k);
  kct_destroy(rt);
}

/* ------------------------------------------------ collect while others work */

typedef struct held_launch {
  kc_runtime *rt;
  kc_context *ctx;
  kc_kernel *k;
  kc_buffer *b;
  float out[N];
  kc_status st;
} held_launch;

static void *launch_once(void *arg) {
  held_launch *j = arg;
  j->st = kct_run(j->k, j->ctx, j->b, N, j->out);
  return NULL;
}

/* A compile in flight at an old world holds that world's definitions and
 * code: kc_collect leaves them for a later collect, and the compile gives
 * its world's result. */
static _Atomic bool no_new_memory; /* fresh allocations fail */
static void *failing_alloc(void *ud, void *p, size_t n) {
  (void)ud;
  if (n == 0) {
    free(p);
    return NULL;
  }
  return !p && atomic_load(&no_new_memory) ? NULL : realloc(p, n);
}

static void test_collect_waits_for_a_compile_in_flight(void **state) {
  (void)state;
  kct_hold h;
  kct_hold_init(&h, false);
  kc_options o;
  kc_options_init(&o);
  o.alloc = failing_alloc;
  o.log = kct_hold_log;
  o.log_ud = &h;
  o.log_level = KC_LOG_INFO;
  held_launch j = {.rt = kct_runtime(&o)};
  j.ctx = kct_context(j.rt);
  j.b = kct_buffer(j.rt, j.ctx, N);
  define_h(j.rt, 1);
  kct_define(j.rt, "k", kernel_src);
  j.k = kct_kernel(j.rt, "k", NULL);
  KCT_OK(j.rt, kct_run(j.k, j.ctx, j.b, N, j.out));
  expect_version(j.out, 1);
  define_h(j.rt, 2);
  kct_hold_arm(&h);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, launch_once, &j), 0);
  kct_hold_wait_inside(&h);
  /* the compile of world 2 is done but not published; world 3 makes it old */
  define_h(j.rt, 3);
  kc_collect_info info;
  KCT_OK(j.rt, kc_collect(j.rt, &info));
  assert_int_equal(info.code_instances, 0); /* h=1's code waits for the thread */
  assert_int_equal(info.definitions, 0); /* h=1 and h=2 too */
  kc_stats s = kct_stats(j.rt);
  assert_int_equal(s.definitions, 4);
  kct_hold_release(&h);
  pthread_join(t, NULL);
  KCT_OK(j.rt, j.st);
  expect_version(j.out, 2); /* its own world's result */
  /* no memory to choose anew: the first collect's batch is freed all the same */
  atomic_store(&no_new_memory, true);
  assert_int_equal(kc_collect(j.rt, &info), KC_ENOMEM);
  atomic_store(&no_new_memory, false);
  assert_int_equal(info.code_instances, 1); /* h=1's */
  assert_int_equal(info.definitions, 2); /* h=1 and h=2 */
  KCT_OK(j.rt, kc_collect(j.rt, &info));
  assert_int_equal(info.code_instances, 1); /* h=2's, published after the first collect */
  assert_int_equal(info.definitions, 0);
  KCT_OK(j.rt, kc_collect(j.rt, &info)); /* nothing left */
  assert_int_equal(info.code_instances, 0);
  KCT_OK(j.rt, kct_run(j.k, j.ctx, j.b, N, j.out));
  expect_version(j.out, 3);
  kc_kernel_destroy(j.k);
  kct_destroy(j.rt);
  kct_hold_destroy(&h);
}

/* Threads launch (cached, bound, pinned), compile and query while one
 * thread redefines h and another collects without pause: every launch
 * gives a version of h that was defined between its start and its end (a
 * pinned thread: the version of its world, every time), nothing is freed
 * under anyone (ASan, TSan), and memory stays bounded. */
enum { LOAD_LAUNCHERS = 2, LOAD_MS = 1500 };

typedef struct load {
  kc_runtime *rt;
  kc_context *ctx;
  _Atomic int issued, done; /* versions of h: the last one started, the last one finished */
  _Atomic bool stop;
  _Atomic uint64_t launches, pinned_launches, collects, failures;
  char failure[256];
  pthread_mutex_t fail_mu;
} load;

static void load_fail(load *L, const char *fmt, int a, int b, int c) {
  pthread_mutex_lock(&L->fail_mu);
  if (!atomic_fetch_add(&L->failures, 1)) snprintf(L->failure, sizeof L->failure, fmt, a, b, c);
  pthread_mutex_unlock(&L->fail_mu);
}

static void *load_definer(void *arg) {
  load *L = arg;
  for (int v = 2; !atomic_load(&L->stop); v++) {
    atomic_store(&L->issued, v);
    define_h(L->rt, v);
    atomic_store(&L->done, v);
    struct timespec pause = {0, 20000000}; /* time for cached launches of each version */
    nanosleep(&pause, NULL);
  }
  return NULL;
}

static void *load_collector(void *arg) {
  load *L = arg;
  while (!atomic_load(&L->stop)) {
    kc_collect_info info;
    if (kc_collect(L->rt, &info) != KC_OK) load_fail(L, "kc_collect failed", 0, 0, 0);
    atomic_fetch_add(&L->collects, 1);
    struct timespec pause = {0, 300000};
    nanosleep(&pause, NULL);
  }
  return NULL;
}

/* The version a launch wrote: out[0] = h(0) = version. */
static void *load_launcher(void *arg) {
  load *L = arg;
  kc_buffer *b = kct_buffer(L->rt, L->ctx, N);
  kc_kernel *k = kct_kernel(L->rt, "k", NULL);
  kc_arg a = KC_ARG_BUF(b);
  kc_args *bound = NULL;
  float out[N];
  int last = 0;
  for (uint64_t i = 0; !atomic_load(&L->stop); i++) {
    int lo = atomic_load(&L->done);
    kc_status st;
    if (i % 3 == 2) {
      if (!bound && kc_args_create(k, L->ctx, &a, 1, &bound) != KC_OK)
        load_fail(L, "kc_args_create", 0, 0, 0);
      st = bound ? kct_run_args(bound, L->ctx, b, N, out) : KC_EINVAL;
    } else {
      st = kct_run(k, L->ctx, b, N, out);
    }
    int hi = atomic_load(&L->issued);
    if (st) {
      load_fail(L, "launch %d failed (status %d)", (int)i, (int)st, 0);
      break;
    }
    int v = (int)out[0];
    if (v < lo || v > hi || v < last) load_fail(L, "launch saw version %d, defined were %d..%d", v, lo, hi);
    last = v;
    if (i % 16 == 0) { /* the other ways into code, now and then */
      kc_code_info ci;
      if (kc_kernel_code(k, &ci) != KC_OK) load_fail(L, "kc_kernel_code failed", 0, 0, 0);
      char *src = NULL;
      if (kc_kernel_source(k, &src) != KC_OK) load_fail(L, "kc_kernel_source failed", 0, 0, 0);
      kc_free(L->rt, src);
    }
    atomic_fetch_add(&L->launches, 1);
  }
  kc_args_destroy(bound);
  kc_kernel_destroy(k);
  return NULL;
}

static void *load_pinner(void *arg) {
  load *L = arg;
  kc_buffer *b = kct_buffer(L->rt, L->ctx, N);
  kc_kernel *k = kct_kernel(L->rt, "k", NULL);
  float out[N];
  while (!atomic_load(&L->stop)) {
    int lo = atomic_load(&L->done);
    if (kc_pin(L->rt, NULL) != KC_OK) load_fail(L, "kc_pin failed", 0, 0, 0);
    int hi = atomic_load(&L->issued), seen = -1;
    for (int r = 0; r < 4; r++) {
      if (kct_run(k, L->ctx, b, N, out) != KC_OK) {
        load_fail(L, "pinned launch failed", 0, 0, 0);
        break;
      }
      int v = (int)out[0];
      if (seen < 0) seen = v;
      if (v != seen || v < lo || v > hi)
        load_fail(L, "pinned launch saw %d (first %d, pinned at %d..)", v, seen, lo);
      atomic_fetch_add(&L->pinned_launches, 1);
    }
    kc_unpin(L->rt);
  }
  kc_kernel_destroy(k);
  return NULL;
}

static void collect_under_load(bool guarded) {
  kc_options o;
  kc_options_init(&o);
  o.guard_launches = guarded;
  /* unguarded, cached launches must not run beside kc_collect (kcache.h):
   * checked mode caches nothing, so every launch takes the slow path */
  o.checked = !guarded;
  if (kct_backend == KC_BACKEND_HOST) o.host_cc = kct_host_cc();
  load L = {.rt = kct_runtime(&o)};
  pthread_mutex_init(&L.fail_mu, NULL);
  L.ctx = kct_context(L.rt);
  kct_define(L.rt, "h", "KC_DEVICE float h(float x) { return x + 1.0f; }");
  kct_define(L.rt, "k", "KC_KERNEL void k(KC_GLOBAL float *y) { y[kc_global_id(0)] = h(0.0f); }");
  atomic_store(&L.issued, 1);
  atomic_store(&L.done, 1);
  pthread_t def, col, pin, run[LOAD_LAUNCHERS];
  assert_int_equal(pthread_create(&def, NULL, load_definer, &L), 0);
  assert_int_equal(pthread_create(&col, NULL, load_collector, &L), 0);
  for (int i = 0; i < LOAD_LAUNCHERS; i++)
    assert_int_equal(pthread_create(&run[i], NULL, load_launcher, &L), 0);
  assert_int_equal(pthread_create(&pin, NULL, load_pinner, &L), 0);
  struct timespec ts = {LOAD_MS / 1000, (LOAD_MS % 1000) * 1000000L};
  nanosleep(&ts, NULL);
  atomic_store(&L.stop, true);
  pthread_join(def, NULL);
  pthread_join(col, NULL);
  pthread_join(pin, NULL);
  for (int i = 0; i < LOAD_LAUNCHERS; i++) pthread_join(run[i], NULL);
  if (atomic_load(&L.failures))
    fail_msg("%llu failures; the first: %s", (unsigned long long)L.failures, L.failure);
  kc_collect_info info;
  KCT_OK(L.rt, kc_collect(L.rt, &info));
  kc_stats s = kct_stats(L.rt);
  print_message(
      "collect under load (%s): %llu launches, %llu pinned, %llu collects, %d versions of h; after a "
      "quiet collect: %llu code instances, %llu definitions\n",
      guarded ? "guarded launches" : "checked mode: slow paths", (unsigned long long)L.launches,
      (unsigned long long)L.pinned_launches, (unsigned long long)L.collects, (int)L.done,
      (unsigned long long)s.code_instances, (unsigned long long)s.definitions);
  assert_true(L.launches + L.pinned_launches > 0);
  assert_true(L.collects > 0);
  assert_true(s.code_instances <= 1); /* the latest world's, if any launch reached it */
  assert_int_equal(s.definitions, 2);
  pthread_mutex_destroy(&L.fail_mu);
  kct_destroy(L.rt);
}

static void test_collect_beside_guarded_launches(void **state) {
  (void)state;
  collect_under_load(true);
}

/* Without the guard, every launch in checked mode: compiles, links and
 * launches of the slow path, bound arguments and pins beside kc_collect. */
static void test_collect_beside_slow_paths(void **state) {
  (void)state;
  collect_under_load(false);
}

KCT_MAIN(KCT_TEST(test_hot_reload_stays_bounded), KCT_TEST(test_pinned_world_survives_collect),
         KCT_TEST(test_collect_across_contexts), KCT_TEST(test_collect_waits_for_a_compile_in_flight),
         KCT_TEST(test_collect_beside_guarded_launches), KCT_TEST(test_collect_beside_slow_paths))
