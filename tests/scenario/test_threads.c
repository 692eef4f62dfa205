/* SPDX-License-Identifier: MIT */
/*
 * test_threads.c -- scenarios with real threads: a pinned thread keeps its
 * world while another redefines (scenario 5), single-flight compiles
 * (scenario 9), launches racing with redefinitions that must each see one
 * whole world, concurrent launches of one kernel with different arguments,
 * and per-thread error messages.
 *
 * Worker threads never call cmocka: they record what they saw, and the test
 * checks it after joining them. Run under -DKC_SANITIZE=thread too.
 */
#include "kc_test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#define N 16

static const char SRC_H1[] = "KC_DEVICE float h(float x) { return x + 1.0f; }";
static const char SRC_H2[] = "KC_DEVICE float h(float x) { return x + 2.0f; }";
static const char SRC_K[] =
    "KC_KERNEL void k(KC_GLOBAL float *y) { size_t i = kc_global_id(0); y[i] = h((float)i); }";
static const char SRC_K3[] =
    "KC_KERNEL void k3(KC_GLOBAL float *y) { size_t i = kc_global_id(0); y[i] = 100.0f * h((float)i); }";

/* Whether out[i] == i*scale + add for all i; reports the first mismatch. */
static bool linear_ok(kct_report *r, const char *what, const float *out, uint32_t n, float scale, float add) {
  for (uint32_t i = 0; i < n; i++)
    if (out[i] != (float)i * scale + add) {
      kct_report_fail(r, "%s: element %u is %g, expected %g", what, i, (double)out[i],
                      (double)((float)i * scale + add));
      return false;
    }
  return true;
}

static void run_or_report(kct_report *r, const char *what, kc_runtime *rt, kc_kernel *k, kc_context *ctx,
                          kc_buffer *b, uint32_t n, float *out, float scale, float add) {
  memset(out, 0, n * sizeof *out);
  kc_status st = kct_run(k, ctx, b, n, out);
  if (st) kct_report_fail(r, "%s: %s: %s", what, kc_status_name(st), kc_errmsg(rt));
  else linear_ok(r, what, out, n, scale, add);
}

static void join_all(pthread_t *t, int n) {
  for (int i = 0; i < n; i++) assert_int_equal(pthread_join(t[i], NULL), 0);
}

/* ---------------------------------------------------------- scenario 5 */

typedef struct pinned_ctx {
  kc_runtime *rt;
  kc_context *ctx;
  kc_kernel *k, *k3;
  kc_buffer *buf;
  pthread_barrier_t *bar;
  kct_report r;
  kc_world pinned, current_after_redefine;
  kc_code_info old_k, old_k3;
} pinned_ctx;

static void *pinned_thread(void *arg) {
  pinned_ctx *p = arg;
  float out[N];
  kc_status st = kc_pin(p->rt, &p->pinned);
  if (st) kct_report_fail(&p->r, "kc_pin: %s", kc_errmsg(p->rt));
  pthread_barrier_wait(p->bar); /* 1: pinned */
  pthread_barrier_wait(p->bar); /* 2: the main thread redefined h */
  p->current_after_redefine = kc_world_current(p->rt);
  run_or_report(&p->r, "pinned launch of k", p->rt, p->k, p->ctx, p->buf, N, out, 1, 1);
  if ((st = kc_kernel_code(p->k, &p->old_k)))
    kct_report_fail(&p->r, "kc_kernel_code(k): %s", kc_errmsg(p->rt));
  /* never compiled at the pinned world: compiled now from h1 */
  run_or_report(&p->r, "pinned launch of k3", p->rt, p->k3, p->ctx, p->buf, N, out, 100, 100);
  if ((st = kc_kernel_code(p->k3, &p->old_k3)))
    kct_report_fail(&p->r, "kc_kernel_code(k3): %s", kc_errmsg(p->rt));
  for (int i = 0; i < 20; i++) /* racing with the main thread's launches of k */
    run_or_report(&p->r, "pinned relaunch of k", p->rt, p->k, p->ctx, p->buf, N, out, 1, 1);
  pthread_barrier_wait(p->bar); /* 3: both launched */
  pthread_barrier_wait(p->bar); /* 4: the main thread launched k last: the handle's entry is
                                   the new code, which must not serve this thread's world */
  for (int i = 0; i < 5; i++)
    run_or_report(&p->r, "pinned launch of k after the main thread's", p->rt, p->k, p->ctx, p->buf, N, out, 1,
                  1);
  if ((st = kc_unpin(p->rt))) kct_report_fail(&p->r, "kc_unpin: %s", kc_errmsg(p->rt));
  run_or_report(&p->r, "unpinned launch of k", p->rt, p->k, p->ctx, p->buf, N, out, 1, 2);
  run_or_report(&p->r, "unpinned launch of k3", p->rt, p->k3, p->ctx, p->buf, N, out, 100, 200);
  return NULL;
}

static void test_pinned_thread_keeps_old_world(void **state) {
  (void)state;
  kc_runtime *rt = kct_runtime(NULL);
  kc_context *ctx = kct_context(rt);
  kct_define(rt, "h", SRC_H1);
  kct_define(rt, "k", SRC_K);
  kct_define(rt, "k3", SRC_K3);
  pthread_barrier_t bar;
  pthread_barrier_init(&bar, NULL, 2);
  pinned_ctx p = {.rt = rt, .ctx = ctx, .bar = &bar};
  p.k = kct_kernel(rt, "k", NULL);
  p.k3 = kct_kernel(rt, "k3", NULL);
  p.buf = kct_buffer(rt, ctx, N);
  kc_buffer *mine = kct_buffer(rt, ctx, N);
  float out[N];
  kct_report r = {0};
  run_or_report(&r, "first launch of k", rt, p.k, ctx, mine, N, out, 1, 1);
  kct_report_check("main", &r);
  kc_code_info before = kct_code(rt, p.k);
  kc_world w_before = kc_world_latest(rt);

  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, pinned_thread, &p), 0);
  pthread_barrier_wait(&bar); /* 1 */
  kc_world w = kct_define(rt, "h", SRC_H2);
  pthread_barrier_wait(&bar); /* 2 */
  for (int i = 0; i < 20; i++) run_or_report(&r, "main launch of k", rt, p.k, ctx, mine, N, out, 1, 2);
  pthread_barrier_wait(&bar); /* 3 */
  run_or_report(&r, "main launch of k", rt, p.k, ctx, mine, N, out, 1, 2);
  pthread_barrier_wait(&bar); /* 4 */
  join_all(&t, 1);
  pthread_barrier_destroy(&bar);
  kct_report_check("main", &r);
  kct_report_check("pinned thread", &p.r);

  assert_int_equal(p.pinned, w_before);
  assert_int_equal(w, w_before + 1);
  assert_int_equal(p.current_after_redefine, p.pinned);
  /* the pinned thread used the old code instance, clipped at its world */
  assert_int_equal(p.old_k.id, before.id);
  assert_int_equal(p.old_k.min_world, before.min_world);
  assert_int_equal(p.old_k.max_world, p.pinned);
  assert_true(p.old_k3.min_world <= p.pinned);
  assert_int_equal(p.old_k3.max_world, p.pinned);
  /* the main thread sees the new one */
  kc_code_info now = kct_code(rt, p.k);
  assert_int_not_equal(now.id, before.id);
  assert_int_equal(now.min_world, w);
  assert_true(now.max_world == KC_WORLD_FOREVER);
  /* k at W and at W+1, k3 at W and at W+1: each exactly once */
  kc_stats s = kct_stats(rt);
  assert_int_equal(s.compiles, 4);
  assert_int_equal(s.compile_failures, 0);
  /* with the pin gone, launches are fast-path hits again */
  run_or_report(&r, "main launch of k after the unpin", rt, p.k, ctx, mine, N, out, 1, 2);
  kc_stats s0 = kct_stats(rt);
  for (int i = 0; i < 3; i++) run_or_report(&r, "main launch of k", rt, p.k, ctx, mine, N, out, 1, 2);
  kct_report_check("main", &r);
  kc_stats s1 = kct_stats(rt);
  assert_int_equal(s1.slow_lookups, s0.slow_lookups);
  assert_int_equal(s1.fast_hits, s0.fast_hits + 3);
  kct_destroy(rt);
}

/* ---------------------------------------------------------- scenario 9 */

#define NTHREADS 8

typedef struct flight {
  kc_runtime *rt;
  kc_context *ctx[NTHREADS];
  kc_kernel *k[NTHREADS];
  kc_buffer *buf[NTHREADS];
  pthread_barrier_t bar;
  kct_report r[NTHREADS];
  _Atomic int next;
} flight;

static void *flight_thread(void *arg) {
  flight *f = arg;
  int me = atomic_fetch_add(&f->next, 1);
  float out[N];
  pthread_barrier_wait(&f->bar);
  run_or_report(&f->r[me], "first launch", f->rt, f->k[me], f->ctx[me], f->buf[me], N, out, 1, 1);
  run_or_report(&f->r[me], "second launch", f->rt, f->k[me], f->ctx[me], f->buf[me], N, out, 1, 1);
  return NULL;
}

/* shared_handle: one handle for all; else one each. own_contexts: one
 * context per thread, else one for all. */
static void single_flight(bool shared_handle, bool own_contexts) {
  flight *f = kct_calloc(sizeof *f);
  f->rt = kct_runtime(NULL);
  kct_define(f->rt, "h", SRC_H1);
  kct_define(f->rt, "k", SRC_K);
  for (int i = 0; i < NTHREADS; i++) {
    f->ctx[i] = own_contexts || i == 0 ? kct_context(f->rt) : f->ctx[0];
    f->k[i] = shared_handle && i > 0 ? f->k[0] : kct_kernel(f->rt, "k", NULL);
    f->buf[i] = kct_buffer(f->rt, f->ctx[i], N);
  }
  pthread_barrier_init(&f->bar, NULL, NTHREADS);
  pthread_t t[NTHREADS];
  for (int i = 0; i < NTHREADS; i++) assert_int_equal(pthread_create(&t[i], NULL, flight_thread, f), 0);
  join_all(t, NTHREADS);
  pthread_barrier_destroy(&f->bar);
  for (int i = 0; i < NTHREADS; i++) kct_report_check("launching thread", &f->r[i]);
  kc_stats s = kct_stats(f->rt);
  assert_int_equal(s.compiles, 1);
  assert_int_equal(s.compile_failures, 0);
  assert_int_equal(s.code_instances, 1);
  assert_int_equal(s.links, own_contexts ? NTHREADS : 1);
  assert_true(s.slow_lookups >= (uint64_t)(own_contexts ? NTHREADS : 1));
  assert_true(s.slow_lookups <= 2 * NTHREADS);
  kct_destroy(f->rt);
  kct_free(f);
}

static void test_single_flight_shared_handle(void **state) {
  (void)state;
  single_flight(true, false);
}

static void test_single_flight_own_handles_and_contexts(void **state) {
  (void)state;
  single_flight(false, true);
}

/* Launches racing with redefinitions: the kernel writes ha(m) into the even
 * elements and hb(m) into the odd ones (m = i/2). Round j defines
 *   ha(x) = x + 1000*j, then hb(x) = x + 1000*j + 500
 * so the worlds are (ha, hb) = (0,0), (1,0), (1,1), (2,1), ... Every launch
 * must show one of them in all its elements, and a thread's launches never
 * go back in time. Half the launching threads use kc_launch, the other half
 * bound arguments (kc_launch_args). */

#define RACE_LAUNCHERS 4
#define RACE_ROUNDS 10
#define RACE_MIN_LAUNCHES 200
#define RACE_MAX_SECONDS 120
#define RACE_N 64

static const char SRC_KR[] = "KC_KERNEL void kr(KC_GLOBAL float *y) {\n"
                             "  size_t i = kc_global_id(0);\n"
                             "  float m = (float)(i / 2);\n"
                             "  y[i] = i % 2 == 0 ? ha(m) : hb(m);\n"
                             "}\n";

typedef struct race {
  kc_runtime *rt;
  kc_context *ctx;
  kc_kernel *k;
  kc_buffer *buf[RACE_LAUNCHERS];
  kct_report r[RACE_LAUNCHERS];
  int launches[RACE_LAUNCHERS];
  uint64_t seen[RACE_LAUNCHERS]; /* bit 2*ha + (hb == ha): the world states seen */
  _Atomic int next;
  _Atomic int done; /* the redefiner finished */
  _Atomic int max_state; /* the newest world state (2*ha + (hb == ha)) seen */
  pthread_barrier_t bar;
} race;

static void define_round(kc_runtime *rt, const char *name, int j, int add, kct_report *r) {
  char src[256];
  snprintf(src, sizeof src, "KC_DEVICE float %s(float x) { return x + %d.0f; }", name, 1000 * j + add);
  if (kc_define(rt, name, src, NULL)) kct_report_fail(r, "kc_define(%s): %s", name, kc_errmsg(rt));
}

/* Decodes one launch's output; returns false (and reports) on a mix. */
static bool decode_world(kct_report *r, const float *y, int *ha, int *hb) {
  *ha = *hb = -1;
  for (int i = 0; i < RACE_N; i++) {
    int m = i / 2, add = i % 2 ? 500 : 0;
    float v = y[i] - (float)m - (float)add;
    int j = v >= 0.0f && v <= 1000.0f * RACE_ROUNDS ? (int)(v / 1000.0f) : -1;
    if (j < 0 || v != 1000.0f * (float)j) {
      kct_report_fail(r, "element %d is %g: not h%c of any world", i, (double)y[i], i % 2 ? 'b' : 'a');
      return false;
    }
    int *slot = i % 2 ? hb : ha;
    if (*slot < 0) *slot = j;
    else if (*slot != j) {
      kct_report_fail(r, "element %d is %g: version %d, but earlier elements had version %d (a mix)", i,
                      (double)y[i], j, *slot);
      return false;
    }
  }
  if (*hb != *ha && *hb != *ha - 1) {
    kct_report_fail(r, "ha version %d with hb version %d: no world had both", *ha, *hb);
    return false;
  }
  return true;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *race_launcher(void *arg) {
  race *rc = arg;
  int me = atomic_fetch_add(&rc->next, 1);
  kct_report *r = &rc->r[me];
  float y[RACE_N];
  int last_ha = 0, last_hb = 0;
  struct timespec nap = {0, 50000}; /* leave the CPUs to the compiler now and then */
  /* odd threads launch with bound arguments, even ones with kc_launch */
  kc_args *bound = NULL;
  kc_arg barg = KC_ARG_BUF(rc->buf[me]);
  if (me % 2 && kc_args_create(rc->k, rc->ctx, &barg, 1, &bound))
    kct_report_fail(r, "kc_args_create: %s", kc_errmsg(rc->rt));
  pthread_barrier_wait(&rc->bar);
  double t0 = now_s();
  for (int n = 0; !r->failed; n++) {
    int finished = atomic_load(&rc->done); /* then this launch sees the last world */
    memset(y, 0xff, sizeof y); /* NaN: a launch that wrote nothing shows */
    kc_status st = bound ? kct_run_args(bound, rc->ctx, rc->buf[me], RACE_N, y)
                         : kct_run(rc->k, rc->ctx, rc->buf[me], RACE_N, y);
    rc->launches[me]++;
    if (st) {
      kct_report_fail(r, "launch %d: %s: %s", n, kc_status_name(st), kc_errmsg(rc->rt));
      break;
    }
    int ha, hb;
    if (!decode_world(r, y, &ha, &hb)) break;
    if (ha < last_ha || (ha == last_ha && hb < last_hb)) {
      kct_report_fail(r, "launch %d saw world (%d,%d) after (%d,%d)", n, ha, hb, last_ha, last_hb);
      break;
    }
    last_ha = ha;
    last_hb = hb;
    int state = 2 * ha + (hb == ha);
    rc->seen[me] |= 1ull << state;
    int prev = atomic_load(&rc->max_state);
    while (state > prev && !atomic_compare_exchange_weak(&rc->max_state, &prev, state)) {}
    if (finished) {
      if (ha != RACE_ROUNDS || hb != RACE_ROUNDS)
        kct_report_fail(r, "after the last definition, launch %d saw world (%d,%d)", n, ha, hb);
      if (n + 1 >= RACE_MIN_LAUNCHES) break;
    }
    if (now_s() - t0 > RACE_MAX_SECONDS) {
      kct_report_fail(r, "still launching after %d s (%d launches)", RACE_MAX_SECONDS, n + 1);
      break;
    }
    nanosleep(&nap, NULL);
  }
  kc_args_destroy(bound);
  return NULL;
}

static void test_launches_racing_redefinitions_see_whole_worlds(void **state) {
  (void)state;
  race *rc = kct_calloc(sizeof *rc);
  rc->rt = kct_runtime(NULL);
  rc->ctx = kct_context(rc->rt);
  kct_report dr = {0};
  define_round(rc->rt, "ha", 0, 0, &dr);
  define_round(rc->rt, "hb", 0, 500, &dr);
  kct_define(rc->rt, "kr", SRC_KR);
  rc->k = kct_kernel(rc->rt, "kr", NULL);
  for (int i = 0; i < RACE_LAUNCHERS; i++) rc->buf[i] = kct_buffer(rc->rt, rc->ctx, RACE_N);
  pthread_barrier_init(&rc->bar, NULL, RACE_LAUNCHERS + 1);
  pthread_t t[RACE_LAUNCHERS];
  for (int i = 0; i < RACE_LAUNCHERS; i++)
    assert_int_equal(pthread_create(&t[i], NULL, race_launcher, rc), 0);
  pthread_barrier_wait(&rc->bar);
  /* After each definition, let the launchers catch up (bounded), so that
   * most worlds, the in-between ones too, are launched in. */
  struct timespec nap = {0, 1000000};
  for (int j = 1; j <= RACE_ROUNDS && !dr.failed; j++) {
    define_round(rc->rt, "ha", j, 0, &dr);
    for (int w = 0; w < 2000 && atomic_load(&rc->max_state) < 2 * j; w++) nanosleep(&nap, NULL);
    define_round(rc->rt, "hb", j, 500, &dr);
    for (int w = 0; w < 2000 && atomic_load(&rc->max_state) < 2 * j + 1; w++) nanosleep(&nap, NULL);
  }
  atomic_store(&rc->done, 1);
  join_all(t, RACE_LAUNCHERS);
  pthread_barrier_destroy(&rc->bar);
  kct_report_check("redefining thread", &dr);
  uint64_t seen = 0;
  int launches = 0;
  for (int i = 0; i < RACE_LAUNCHERS; i++) {
    kct_report_check("launching thread", &rc->r[i]);
    seen |= rc->seen[i];
    launches += rc->launches[i];
  }
  int states = __builtin_popcountll(seen);
  kc_stats s = kct_stats(rc->rt);
  print_message("%d launches saw %d of the %d worlds; %llu compiles, %llu invalidations\n", launches, states,
                2 * RACE_ROUNDS + 1, (unsigned long long)s.compiles, (unsigned long long)s.invalidations);
  assert_true(states >= 2); /* the launches really overlapped redefinitions */
  assert_true(seen & (1ull << (2 * RACE_ROUNDS + 1))); /* and saw the last world */
  assert_int_equal(s.compile_failures, 0);
  assert_true(s.compiles >= (uint64_t)states); /* each world seen needed its code */
  assert_true(s.compiles <= 2 * RACE_ROUNDS + 1);
  assert_int_equal(s.world, kc_world_latest(rc->rt));
  kct_destroy(rc->rt);
  kct_free(rc);
}

/* One kernel launched from several threads at once with different scalar
 * arguments: a backend object that holds arguments between "set" and
 * "launch" (an OpenCL cl_kernel) must not mix them up. */

#define ARG_THREADS 4
#define ARG_LAUNCHES 300

typedef struct argrace {
  kc_runtime *rt;
  kc_context *ctx;
  kc_kernel *k;
  kc_buffer *buf[ARG_THREADS];
  kct_report r[ARG_THREADS];
  _Atomic int next;
  pthread_barrier_t bar;
} argrace;

static void *argrace_thread(void *arg) {
  argrace *a = arg;
  int me = atomic_fetch_add(&a->next, 1);
  float y[N];
  kc_dim3 grid = {N, 1, 1}, block = {1, 1, 1};
  pthread_barrier_wait(&a->bar);
  for (int n = 0; n < ARG_LAUNCHES && !a->r[me].failed; n++) {
    float base = (float)(me * 100000 + n);
    int count = N;
    kc_arg args[] = {KC_ARG_BUF(a->buf[me]), KC_ARG_VAL(base), KC_ARG_VAL(count)};
    kc_status st = kc_launch(a->k, a->ctx, &grid, &block, args, 3);
    if (!st) st = kc_context_finish(a->ctx);
    if (!st) st = kc_buffer_read(a->buf[me], 0, y, sizeof y);
    if (st) kct_report_fail(&a->r[me], "launch %d: %s: %s", n, kc_status_name(st), kc_errmsg(a->rt));
    else linear_ok(&a->r[me], "result", y, N, 0.5f, base);
  }
  return NULL;
}

static void test_concurrent_launches_with_different_arguments(void **state) {
  (void)state;
  argrace *a = kct_calloc(sizeof *a);
  a->rt = kct_runtime(NULL);
  a->ctx = kct_context(a->rt);
  kct_define(a->rt, "ka",
             "KC_KERNEL void ka(KC_GLOBAL float *y, float base, int n) {\n"
             "  size_t i = kc_global_id(0);\n"
             "  if ((int)i < n) y[i] = base + 0.5f * (float)i;\n"
             "}\n");
  a->k = kct_kernel(a->rt, "ka", NULL);
  for (int i = 0; i < ARG_THREADS; i++) a->buf[i] = kct_buffer(a->rt, a->ctx, N);
  KCT_OK(a->rt, kc_kernel_compile(a->k));
  pthread_barrier_init(&a->bar, NULL, ARG_THREADS);
  pthread_t t[ARG_THREADS];
  for (int i = 0; i < ARG_THREADS; i++) assert_int_equal(pthread_create(&t[i], NULL, argrace_thread, a), 0);
  join_all(t, ARG_THREADS);
  pthread_barrier_destroy(&a->bar);
  for (int i = 0; i < ARG_THREADS; i++) kct_report_check("launching thread", &a->r[i]);
  assert_int_equal(kct_stats(a->rt).compiles, 1);
  kct_destroy(a->rt);
  kct_free(a);
}

/* Error messages are per thread: a failure in one thread does not replace
 * the message another thread is about to read. */

typedef struct errmsg_ctx {
  kc_runtime *rt;
  pthread_barrier_t bar;
  kct_report r;
} errmsg_ctx;

static void *errmsg_thread(void *arg) {
  errmsg_ctx *e = arg;
  pthread_barrier_wait(&e->bar); /* 1: main has its message */
  if (kc_undefine(e->rt, "other_thread_name", NULL) != KC_ENOTFOUND)
    kct_report_fail(&e->r, "kc_undefine of an undefined name did not fail with KC_ENOTFOUND");
  if (!strstr(kc_errmsg(e->rt), "other_thread_name"))
    kct_report_fail(&e->r, "this thread's message: %s", kc_errmsg(e->rt));
  pthread_barrier_wait(&e->bar); /* 2: this thread has its own */
  return NULL;
}

static void test_error_messages_are_per_thread(void **state) {
  (void)state;
  errmsg_ctx e = {0};
  e.rt = kct_runtime(NULL);
  pthread_barrier_init(&e.bar, NULL, 2);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, errmsg_thread, &e), 0);
  KCT_STATUS(e.rt, KC_ENOTFOUND, kc_undefine(e.rt, "main_thread_name", NULL));
  pthread_barrier_wait(&e.bar);
  pthread_barrier_wait(&e.bar);
  join_all(&t, 1);
  pthread_barrier_destroy(&e.bar);
  kct_report_check("other thread", &e.r);
  KCT_CONTAINS(kc_errmsg(e.rt), "main_thread_name");
  kct_destroy(e.rt);
}

/* A pin belongs to a runtime, not to an address. A thread that still holds
 * a pin when its runtime is destroyed must not find itself pinned to a new
 * runtime that happens to get the same memory (runtime ids are never
 * reused; addresses are). The allocator below hands the first runtime's
 * block to the second one. The pin is held by the destroying thread itself,
 * or by another thread; each case runs in threads of its own, whose pins die
 * with them. */

typedef struct reuse_alloc {
  pthread_mutex_t lock;
  size_t first_size; /* the first allocation: the kc_runtime struct */
  void *first, *stash;
} reuse_alloc;

static void *reuse_alloc_fn(void *ud, void *p, size_t n) {
  reuse_alloc *ra = ud;
  void *q = NULL;
  pthread_mutex_lock(&ra->lock);
  if (n == 0) {
    if (p && p == ra->first && !ra->stash) ra->stash = p; /* kept for the next runtime */
    else free(p);
  } else if (!p && ra->stash && n == ra->first_size) {
    q = ra->stash;
    ra->stash = ra->first = NULL;
  } else {
    q = realloc(p, n);
    if (!p && !ra->first_size) {
      ra->first_size = n;
      ra->first = q;
    }
  }
  pthread_mutex_unlock(&ra->lock);
  return q;
}

typedef struct reuse_ctx {
  bool other_thread; /* the pin is held by the second thread, not the destroying one */
  reuse_alloc ra;
  kc_runtime *rt1, *rt2;
  pthread_barrier_t bar;
  kct_report r;
  kc_world pinned_old, latest_new, current_new, pinned_new;
} reuse_ctx;

/* The pinning thread: pins rt1, and after rt1 was destroyed and rt2 made
 * (by itself or by the other thread), looks at rt2. */
static void *reuse_pinner(void *arg) {
  reuse_ctx *c = arg;
  if (kc_pin(c->rt1, &c->pinned_old)) kct_report_fail(&c->r, "kc_pin: %s", kc_errmsg(c->rt1));
  if (c->other_thread) {
    pthread_barrier_wait(&c->bar); /* 1: pinned */
    pthread_barrier_wait(&c->bar); /* 2: rt1 destroyed, rt2 made */
  } else {
    kc_runtime_destroy(c->rt1); /* still pinned */
    kc_options opt;
    kc_options_init(&opt);
    opt.backend = kct_backend;
    opt.alloc = reuse_alloc_fn;
    opt.alloc_ud = &c->ra;
    if (kc_runtime_create(&opt, &c->rt2)) {
      kct_report_fail(&c->r, "kc_runtime_create: %s", kc_errmsg(NULL));
      return NULL;
    }
  }
  c->latest_new = kc_world_latest(c->rt2);
  c->current_new = kc_world_current(c->rt2);
  kc_status st = kc_pin(c->rt2, &c->pinned_new);
  if (st) kct_report_fail(&c->r, "kc_pin(new runtime): %s: %s", kc_status_name(st), kc_errmsg(c->rt2));
  else if ((st = kc_unpin(c->rt2)))
    kct_report_fail(&c->r, "kc_unpin(new runtime): %s: %s", kc_status_name(st), kc_errmsg(c->rt2));
  if (kc_unpin(c->rt2) != KC_EBUSY) kct_report_fail(&c->r, "a second kc_unpin did not fail");
  return NULL;
}

static void pin_over_reused_memory(bool other_thread) {
  reuse_ctx *c = kct_calloc(sizeof *c);
  c->other_thread = other_thread;
  pthread_mutex_init(&c->ra.lock, NULL);
  pthread_barrier_init(&c->bar, NULL, 2);
  kc_options opt;
  kc_options_init(&opt);
  opt.backend = kct_backend;
  opt.alloc = reuse_alloc_fn;
  opt.alloc_ud = &c->ra;
  if (kc_runtime_create(&opt, &c->rt1)) fail_msg("kc_runtime_create: %s", kc_errmsg(NULL));
  kc_runtime *rt1 = c->rt1;
  for (int i = 0; i < 5; i++) { /* move rt1 to world 6 */
    char src[128];
    snprintf(src, sizeof src, "KC_DEVICE float u(float x) { return x + %d.0f; }", i);
    KCT_OK(rt1, kc_define(rt1, "u", src, NULL));
  }
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, reuse_pinner, c), 0);
  if (other_thread) {
    pthread_barrier_wait(&c->bar); /* 1 */
    kc_runtime_destroy(c->rt1);
    kc_runtime *rt2 = NULL;
    kc_status st = kc_runtime_create(&opt, &rt2);
    c->rt2 = rt2;
    pthread_barrier_wait(&c->bar); /* 2 */
    if (st) fail_msg("kc_runtime_create: %s", kc_errmsg(NULL));
  }
  join_all(&t, 1);
  pthread_barrier_destroy(&c->bar);
  kc_runtime_destroy(c->rt2);
  free(c->ra.stash);
  pthread_mutex_destroy(&c->ra.lock);
  kct_report_check("pinning thread", &c->r);
  assert_int_equal(c->pinned_old, 6);
  /* the allocator hands the freed block back: the case this test is about */
  assert_ptr_equal(c->rt2, rt1);
  assert_int_equal(c->latest_new, 1);
  assert_int_equal(c->current_new, c->latest_new); /* not the destroyed runtime's pinned world */
  assert_int_equal(c->pinned_new, c->latest_new);
  kct_free(c);
}

static void test_pin_does_not_carry_over_to_a_new_runtime(void **state) {
  (void)state;
  pin_over_reused_memory(false);
}

static void test_pin_of_another_thread_does_not_carry_over(void **state) {
  (void)state;
  pin_over_reused_memory(true);
}

KCT_MAIN(KCT_TEST(test_pinned_thread_keeps_old_world), KCT_TEST(test_single_flight_shared_handle),
         KCT_TEST(test_single_flight_own_handles_and_contexts),
         KCT_TEST(test_launches_racing_redefinitions_see_whole_worlds),
         KCT_TEST(test_concurrent_launches_with_different_arguments),
         KCT_TEST(test_error_messages_are_per_thread),
         KCT_TEST(test_pin_does_not_carry_over_to_a_new_runtime),
         KCT_TEST(test_pin_of_another_thread_does_not_carry_over))
