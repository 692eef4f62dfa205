/* SPDX-License-Identifier: MIT */
/*
 * test_host_streams.c -- the host backend's streams run their launches
 * asynchronously, in order, on a thread of their own: a launch returns
 * before its kernel runs (a kernel that waits for a flag the caller sets
 * after the launch returned); kc_stream_sync, kc_context_finish and
 * kc_stream_wait order them; arguments are captured when the launch is
 * made; a buffer kcache made, and a loaded object (a reset context, a
 * redefinition collected), stay until the launches queued with them have
 * run; a failure on the stream's thread comes back from the next sync; a
 * child of fork() starts with empty streams; a stream's thread ends when
 * it has been idle for KC_HOST_STREAM_IDLE and starts again at the
 * stream's next launch; threads share a stream while buffers, streams and
 * collections come and go, with the streams' threads ending and starting
 * again between their launches (run under TSan by the tsan build).
 */
#include "kc_test.h"

#include <dirent.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Waits (a bounded spin) until *flag is set, then writes v to y[0] and
 * sets *done; -1 if it gave up waiting. */
static const char SRC_GATE[] =
    "KC_KERNEL void gate(KC_GLOBAL int *flag, KC_GLOBAL int *y, KC_GLOBAL int *done, "
    "int v) {\n"
    "  if (kc_global_id(0) != 0) return;\n"
    "  long n = 0;\n"
    "  while (!*(volatile int *)flag && ++n < 3000000000L) {}\n"
    "  y[0] = *(volatile int *)flag ? v : -1;\n"
    "  *(volatile int *)done = 1;\n"
    "}\n";
static const char SRC_PUT[] = "KC_KERNEL void put(KC_GLOBAL int *y, int i, int v) {\n"
                              "  if (kc_global_id(0) == 0) y[i] = v;\n"
                              "}\n";
static const char SRC_ADD[] = "KC_KERNEL void addto(KC_GLOBAL int *y, KC_GLOBAL const int *x) {\n"
                              "  size_t i = kc_global_id(0); y[i] += x[i];\n"
                              "}\n";
/* Tens of milliseconds of work (20 million volatile increments), then y[0] = v. */
static const char SRC_SLOW[] = "KC_KERNEL void slow(KC_GLOBAL int *y, int v) {\n"
                               "  if (kc_global_id(0) != 0) return;\n"
                               "  volatile long n = 0;\n"
                               "  while (n < 20000000L) n++;\n"
                               "  y[0] = v;\n"
                               "}\n";

/* Items 0-3 of a group reach a barrier the others do not: the launch
 * fails (KC_ELAUNCH) on the stream's thread. */
static const char SRC_HALFWAY[] = "KC_KERNEL void halfway(KC_GLOBAL int *y) {\n"
                                  "  if (kc_local_id(0) < 4) kc_barrier();\n"
                                  "  y[kc_global_id(0)] = 1;\n"
                                  "}\n";

static kc_launch_config one(kc_stream *s) { return kct_config(1, 1, s); }

typedef struct fixture {
  kc_runtime *rt;
  kc_context *ctx;
  kc_kernel *gate, *put, *addto, *slow;
  int flag, done, mem[16];
  kc_buffer *bflag, *bdone, *bmem;
} fixture;

static void setup(fixture *f) {
  memset(f, 0, sizeof *f);
  f->rt = kct_runtime(NULL);
  f->ctx = kct_context(f->rt);
  kct_define(f->rt, "gate", SRC_GATE);
  kct_define(f->rt, "put", SRC_PUT);
  kct_define(f->rt, "addto", SRC_ADD);
  kct_define(f->rt, "slow", SRC_SLOW);
  f->gate = kct_kernel(f->rt, "gate", NULL);
  f->put = kct_kernel(f->rt, "put", NULL);
  f->addto = kct_kernel(f->rt, "addto", NULL);
  f->slow = kct_kernel(f->rt, "slow", NULL);
  KCT_OK(f->rt, kc_buffer_wrap(f->ctx, &f->flag, sizeof f->flag, &f->bflag));
  KCT_OK(f->rt, kc_buffer_wrap(f->ctx, &f->done, sizeof f->done, &f->bdone));
  KCT_OK(f->rt, kc_buffer_wrap(f->ctx, f->mem, sizeof f->mem, &f->bmem));
  /* compiled and linked first: the launches below only queue */
  kc_dim3 g = {1, 1, 1};
  int v = 0;
  f->flag = 1;
  KCT_OK(f->rt,
         kc_launch(f->gate, f->ctx, &g, &g,
                   (kc_arg[]){KC_ARG_BUF(f->bflag), KC_ARG_BUF(f->bmem), KC_ARG_BUF(f->bdone), KC_ARG_VAL(v)},
                   4));
  KCT_OK(f->rt,
         kc_launch(f->put, f->ctx, &g, &g, (kc_arg[]){KC_ARG_BUF(f->bmem), KC_ARG_VAL(v), KC_ARG_VAL(v)}, 3));
  KCT_OK(f->rt, kc_launch(f->slow, f->ctx, &g, &g, (kc_arg[]){KC_ARG_BUF(f->bmem), KC_ARG_VAL(v)}, 2));
  f->flag = f->done = 0;
  memset(f->mem, 0, sizeof f->mem);
}

static kc_status launch_gate(fixture *f, kc_stream *s, kc_buffer *y, int v) {
  kc_launch_config c = one(s);
  kc_arg a[] = {KC_ARG_BUF(f->bflag), KC_ARG_BUF(y), KC_ARG_BUF(f->bdone), KC_ARG_VAL(v)};
  return kc_launch_ex(f->gate, f->ctx, &c, a, 4);
}

static kc_status launch_put(fixture *f, kc_stream *s, kc_buffer *y, int i, int v) {
  kc_launch_config c = one(s);
  kc_arg a[] = {KC_ARG_BUF(y), KC_ARG_VAL(i), KC_ARG_VAL(v)};
  return kc_launch_ex(f->put, f->ctx, &c, a, 3);
}

static int load(const int *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static void store(int *p, int v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

/* Sets *flag after ms milliseconds, on a thread of its own. */
typedef struct later {
  int *flag;
  int ms;
  pthread_t t;
} later;
static void *later_run(void *p) {
  later *l = p;
  nanosleep(&(struct timespec){l->ms / 1000, (long)(l->ms % 1000) * 1000000L}, NULL);
  store(l->flag, 1);
  return NULL;
}
static void later_start(later *l, int *flag, int ms) {
  l->flag = flag;
  l->ms = ms;
  assert_int_equal(pthread_create(&l->t, NULL, later_run, l), 0);
}

/* A launch returns before its kernel runs; the stream keeps their order. */
static void test_launches_are_asynchronous_and_in_order(void **state) {
  (void)state;
  fixture f;
  setup(&f);
  kc_stream *s;
  KCT_OK(f.rt, kc_stream_create(f.ctx, &s));
  assert_null(kc_stream_native(s)); /* the host's queue is its own */
  KCT_OK(f.rt, launch_gate(&f, s, f.bmem, 7)); /* waits for the flag, set below */
  KCT_OK(f.rt, launch_put(&f, s, f.bmem, 1, 3)); /* after the gate */
  assert_int_equal(load(&f.done), 0);
  assert_int_equal(load(&f.mem[1]), 0);
  store(&f.flag, 1); /* a synchronous launch would have given up: y[0] = -1 */
  KCT_OK(f.rt, kc_stream_sync(s));
  assert_int_equal(f.mem[0], 7);
  assert_int_equal(f.mem[1], 3);

  /* kc_context_finish waits for every stream of the context */
  kc_launch_config c = one(s);
  int v = 11;
  KCT_OK(f.rt, kc_launch_ex(f.slow, f.ctx, &c, (kc_arg[]){KC_ARG_BUF(f.bmem), KC_ARG_VAL(v)}, 2));
  KCT_OK(f.rt, kc_context_finish(f.ctx));
  assert_int_equal(f.mem[0], 11);

  /* the context's own queue and the wrapped implicit stream are synchronous */
  kc_stream *implicit;
  KCT_OK(f.rt, kc_stream_wrap(f.ctx, NULL, &implicit));
  KCT_OK(f.rt, launch_put(&f, implicit, f.bmem, 2, 5));
  assert_int_equal(f.mem[2], 5);
  KCT_OK(f.rt, launch_put(&f, NULL, f.bmem, 2, 6));
  assert_int_equal(f.mem[2], 6);

  /* a bad grid is refused where the launch is made */
  c.grid.x = 0;
  KCT_STATUS(f.rt, KC_EINVAL,
             kc_launch_ex(f.slow, f.ctx, &c, (kc_arg[]){KC_ARG_BUF(f.bmem), KC_ARG_VAL(v)}, 2));
  KCT_OK(f.rt, kc_stream_sync(s));
  kc_stream_destroy(implicit);
  kc_stream_destroy(s);
  kct_destroy(f.rt);
}

/* kc_stream_wait: b's launches after it start after a's before it. */
static void test_a_stream_waits_for_another(void **state) {
  (void)state;
  fixture f;
  setup(&f);
  kc_stream *a, *b, *implicit;
  KCT_OK(f.rt, kc_stream_create(f.ctx, &a));
  KCT_OK(f.rt, kc_stream_create(f.ctx, &b));
  KCT_OK(f.rt, kc_stream_wrap(f.ctx, NULL, &implicit));
  int x[4] = {0}, y[4] = {0};
  kc_buffer *bx, *by;
  KCT_OK(f.rt, kc_buffer_wrap(f.ctx, x, sizeof x, &bx));
  KCT_OK(f.rt, kc_buffer_wrap(f.ctx, y, sizeof y, &by));
  KCT_OK(f.rt, kc_stream_wait(b, a)); /* a has nothing queued: nothing to wait for */
  KCT_OK(f.rt, launch_gate(&f, a, bx, 5)); /* x[0] = 5 once the flag is set */
  KCT_OK(f.rt, kc_stream_wait(b, a));
  kc_launch_config c = kct_config(1, 4, b);
  KCT_OK(f.rt, kc_launch_ex(f.addto, f.ctx, &c, (kc_arg[]){KC_ARG_BUF(by), KC_ARG_BUF(bx)}, 2)); /* y += x */
  nanosleep(&(struct timespec){0, 20000000L}, NULL);
  assert_int_equal(load(&y[0]), 0); /* b waits */
  store(&f.flag, 1);
  KCT_OK(f.rt, kc_stream_sync(b));
  assert_int_equal(y[0], 5);

  /* the implicit stream waits for `a` in the call itself */
  int v = 9;
  kc_launch_config sc = one(a);
  KCT_OK(f.rt, kc_launch_ex(f.slow, f.ctx, &sc, (kc_arg[]){KC_ARG_BUF(bx), KC_ARG_VAL(v)}, 2));
  KCT_OK(f.rt, kc_stream_wait(implicit, a));
  assert_int_equal(load(&x[0]), 9);

  /* a stream destroyed while another waits for it: the waiter goes on */
  store(&f.flag, 0);
  store(&f.done, 0);
  later l;
  later_start(&l, &f.flag, 50);
  KCT_OK(f.rt, launch_gate(&f, a, bx, 4));
  KCT_OK(f.rt, kc_stream_wait(b, a));
  KCT_OK(f.rt, launch_put(&f, b, by, 1, 8));
  kc_stream_destroy(a); /* after what it queued */
  assert_int_equal(load(&f.done), 1);
  KCT_OK(f.rt, kc_stream_sync(b));
  assert_int_equal(y[1], 8);
  pthread_join(l.t, NULL);
  kc_stream_destroy(b);
  kc_stream_destroy(implicit);
  kct_destroy(f.rt);
}

/* Busy-waits ns nanoseconds (nanosleep sleeps 50 us more: timer slack). */
static void pause_ns(long ns) {
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  do clock_gettime(CLOCK_MONOTONIC, &b);
  while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < ns);
}

/* Launches and syncs with pauses of a few tens of microseconds, about
 * the time a stream's thread takes to go to sleep and to wake up: a launch
 * that comes while the thread goes to sleep must still wake it (a lost
 * wake-up hangs here until CTest's timeout), and a sync must see every
 * launch before it done. (Written for the spin before sleeping: the
 * watch of KC_HOST_STREAM_SPIN_US.) */
static void launches_with_short_pauses(void) {
  fixture f;
  setup(&f);
  kc_stream *s;
  KCT_OK(f.rt, kc_stream_create(f.ctx, &s));
  for (int i = 1; i <= 1500; i++) {
    long pause = 6000 + (long)(i % 16) * 2000; /* 6 to 36 us, in steps of 2 */
    KCT_OK(f.rt, launch_put(&f, s, f.bmem, 0, i));
    if (i % 3 == 0) { /* a second launch after the pause, then the sync */
      pause_ns(pause);
      KCT_OK(f.rt, launch_put(&f, s, f.bmem, 1, i));
      KCT_OK(f.rt, kc_stream_sync(s));
      assert_int_equal(load(&f.mem[1]), i);
    } else if (i % 3 == 1) { /* the sync after the pause */
      pause_ns(pause);
      KCT_OK(f.rt, kc_stream_sync(s));
    } else { /* the sync at once, then the pause before the next launch */
      KCT_OK(f.rt, kc_stream_sync(s));
      pause_ns(pause);
    }
    assert_int_equal(load(&f.mem[0]), i);
  }
  kc_stream_destroy(s);
  kct_destroy(f.rt);
}

/* Runs run with the setting name at value (for the runtimes it makes;
 * put back when the test ends). */
static void with_setting(const char *name, const char *value, void (*run)(void)) {
  kct_setenv(name, value);
  run();
}

/* With the default watch before a sleep (KC_HOST_STREAM_SPIN_US, 20 us),
 * the pauses fall on both sides of it: a launch or an end seen while
 * watching, and one that comes after the sleep began. */
static void test_launches_with_short_pauses(void **state) {
  (void)state;
  launches_with_short_pauses();
}

/* And with no watch: every wait sleeps at once. */
static void test_launches_with_short_pauses_no_watch(void **state) {
  (void)state;
  with_setting("KC_HOST_STREAM_SPIN_US", "0", launches_with_short_pauses);
}

/* A stream's thread that watches for its next launch (here for up to
 * 10 ms, the longest KC_HOST_STREAM_SPIN_US) watches for a stop too:
 * kc_stream_destroy right after a sync does not wait out the watch. The
 * fastest of five destroys is timed, so that a busy machine that delays
 * one of them does not fail the test; each one waited about 10 ms while
 * the watch did not look for a stop. */
static void destroy_while_watching(void) {
  fixture f;
  setup(&f);
  double fastest = 1e9;
  for (int round = 0; round < 5; round++) {
    kc_stream *s;
    KCT_OK(f.rt, kc_stream_create(f.ctx, &s));
    KCT_OK(f.rt, launch_put(&f, s, f.bmem, 0, round + 1));
    KCT_OK(f.rt, kc_stream_sync(s)); /* the thread now watches for the next launch */
    assert_int_equal(load(&f.mem[0]), round + 1);
    double t0 = kct_now();
    kc_stream_destroy(s);
    double took = (kct_now() - t0) * 1e3;
    if (took < fastest) fastest = took;
  }
  kct_destroy(f.rt);
  if (fastest >= 5)
    fail_msg("kc_stream_destroy took %.2f ms at the fastest of 5: it waited out the watch", fastest);
}

static void test_a_destroy_does_not_wait_out_the_watch(void **state) {
  (void)state;
  with_setting("KC_HOST_STREAM_SPIN_US", "10000", destroy_while_watching);
}

/* The values of the arguments are those of the launch's call. */
static void test_arguments_are_taken_at_the_launch(void **state) {
  (void)state;
  fixture f;
  setup(&f);
  kc_stream *s;
  KCT_OK(f.rt, kc_stream_create(f.ctx, &s));
  KCT_OK(f.rt, launch_gate(&f, s, f.bmem, 1)); /* holds the stream */
  for (int i = 1; i < 8; i++) KCT_OK(f.rt, launch_put(&f, s, f.bmem, i, 100 + i)); /* i, v: the call's */
  int i = 8, v = 200;
  kc_args *a;
  KCT_OK(f.rt,
         kc_args_create(f.put, f.ctx, (kc_arg[]){KC_ARG_BUF(f.bmem), KC_ARG_VAL(i), KC_ARG_VAL(v)}, 3, &a));
  kc_launch_config c = one(s);
  for (int j = 8; j < 12; j++) {
    KCT_OK(f.rt, kc_args_set(a, 1, KC_ARG_VAL(j)));
    v = 200 + j;
    KCT_OK(f.rt, kc_args_set(a, 2, KC_ARG_VAL(v)));
    KCT_OK(f.rt, kc_launch_args_ex(a, &c));
  }
  v = -5; /* changed after the launches: none of them sees it */
  KCT_OK(f.rt, kc_args_set(a, 2, KC_ARG_VAL(v)));
  /* a buffer argument bound again after a launch: each launch its own */
  int other[16] = {0};
  kc_buffer *bo;
  KCT_OK(f.rt, kc_buffer_wrap(f.ctx, other, sizeof other, &bo));
  KCT_OK(f.rt, kc_args_set(a, 1, KC_ARG_VAL((int){12})));
  KCT_OK(f.rt, kc_launch_args_ex(a, &c)); /* f.mem[12] = -5 */
  KCT_OK(f.rt, kc_args_set(a, 0, KC_ARG_BUF(bo)));
  KCT_OK(f.rt, kc_launch_args_ex(a, &c)); /* other[12] = -5 */
  assert_int_equal(load(&other[12]), 0);
  store(&f.flag, 1);
  KCT_OK(f.rt, kc_stream_sync(s));
  for (int j = 1; j < 8; j++) assert_int_equal(f.mem[j], 100 + j);
  for (int j = 8; j < 12; j++) assert_int_equal(f.mem[j], 200 + j);
  assert_int_equal(f.mem[12], -5);
  assert_int_equal(other[12], -5);
  kc_args_destroy(a);

  /* the scratch area (shared_bytes) of a launch on a stream: the stream
   * thread's own */
  kct_define(f.rt, "gsum",
             "KC_KERNEL void gsum(KC_GLOBAL int *y) {\n"
             "  int *t = (int *)kc_scratch();\n"
             "  size_t l = kc_local_id(0);\n"
             "  t[l] = (int)kc_global_id(0);\n"
             "  if (l + 1 == kc_local_size(0)) {\n"
             "    int sum = 0;\n"
             "    for (size_t i = 0; i < kc_local_size(0); i++) sum += t[i];\n"
             "    y[kc_group_id(0)] = sum;\n"
             "  }\n"
             "}\n");
  kc_kernel *gsum = kct_kernel(f.rt, "gsum", NULL);
  kc_launch_config cs = kct_config(4, 4, s);
  cs.shared_bytes = 4 * sizeof(int);
  KCT_OK(f.rt, kc_launch_ex(gsum, f.ctx, &cs, (kc_arg[]){KC_ARG_BUF(bo)}, 1));
  KCT_OK(f.rt, kc_stream_sync(s));
  for (int g = 0; g < 4; g++) assert_int_equal(other[g], 16 * g + 6);
  kc_stream_destroy(s);
  kct_destroy(f.rt);
}

/* A buffer kcache made, and a loaded object, outlive the launches queued
 * with them: kc_buffer_destroy, kc_context_reset and a collected
 * redefinition wait for those launches (ASan sees any use after free). */
static void test_what_a_queued_launch_uses_stays(void **state) {
  (void)state;
  fixture f;
  setup(&f);
  kc_stream *s;
  KCT_OK(f.rt, kc_stream_create(f.ctx, &s));
  kc_buffer *by;
  KCT_OK(f.rt, kc_buffer_create(f.ctx, 64, &by));
  later l;
  later_start(&l, &f.flag, 50);
  KCT_OK(f.rt, launch_gate(&f, s, by, 3)); /* writes by once the flag is set */
  kc_buffer_destroy(by); /* waits for the gate */
  assert_int_equal(load(&f.done), 1);
  pthread_join(l.t, NULL);

  /* a reset context unloads its code: after the launches queued with it */
  store(&f.flag, 0);
  store(&f.done, 0);
  later_start(&l, &f.flag, 50);
  KCT_OK(f.rt, launch_gate(&f, s, f.bmem, 4));
  KCT_OK(f.rt, kc_context_reset(f.ctx));
  assert_int_equal(load(&f.done), 1);
  assert_int_equal(f.mem[0], 4);
  pthread_join(l.t, NULL);

  /* a redefinition, launched and collected while the old code is queued */
  store(&f.flag, 0);
  store(&f.done, 0);
  later_start(&l, &f.flag, 50);
  KCT_OK(f.rt, launch_gate(&f, s, f.bmem, 5));
  kct_define(f.rt, "gate",
             "KC_KERNEL void gate(KC_GLOBAL int *flag, KC_GLOBAL int *y, KC_GLOBAL int *done, int v) {\n"
             "  if (kc_global_id(0) == 0) y[0] = -v;\n"
             "}\n");
  int z = 0;
  kc_buffer *bz;
  KCT_OK(f.rt, kc_buffer_wrap(f.ctx, &z, sizeof z, &bz));
  KCT_OK(f.rt, launch_gate(&f, NULL, bz, 6)); /* the new code, on the context's queue: now */
  assert_int_equal(z, -6);
  kc_collect_info info;
  KCT_OK(f.rt, kc_collect(f.rt, &info)); /* unloads the old code: after its queued launch */
  assert_int_equal(load(&f.done), 1); /* the old code ran, in full */
  KCT_OK(f.rt, kc_stream_sync(s));
  pthread_join(l.t, NULL);
  assert_int_equal(f.mem[0], 5);
  KCT_OK(f.rt, launch_gate(&f, s, f.bmem, 7)); /* the new code on the stream */
  KCT_OK(f.rt, kc_stream_sync(s));
  assert_int_equal(f.mem[0], -7);

  /* a context destroyed with a launch still queued: after it has run */
  kct_define(f.rt, "gate", SRC_GATE);
  store(&f.flag, 0);
  store(&f.done, 0);
  later_start(&l, &f.flag, 50);
  KCT_OK(f.rt, launch_gate(&f, s, f.bmem, 8));
  kc_context_destroy(f.ctx); /* its streams, code and buffers with it */
  assert_int_equal(load(&f.done), 1);
  assert_int_equal(f.mem[0], 8);
  pthread_join(l.t, NULL);
  KCT_STATUS(f.rt, KC_EDESTROYED, kc_stream_sync(s));
  kct_destroy(f.rt);
}

/* A kernel that fails on the stream's thread: the launch returned KC_OK;
 * the next sync returns the failure with its message, once; the launches
 * after it still ran. */
static void test_a_failure_comes_back_from_the_sync(void **state) {
  (void)state;
  fixture f;
  setup(&f);
  kct_define(f.rt, "halfway", SRC_HALFWAY);
  kc_kernel *k = kct_kernel(f.rt, "halfway", NULL);
  kc_stream *s;
  KCT_OK(f.rt, kc_stream_create(f.ctx, &s));
  kc_launch_config c = kct_config(1, 8, s);
  KCT_OK(f.rt, kc_launch_ex(k, f.ctx, &c, (kc_arg[]){KC_ARG_BUF(f.bmem)}, 1));
  KCT_OK(f.rt, launch_put(&f, s, f.bmem, 12, 42));
  KCT_STATUS(f.rt, KC_ELAUNCH, kc_stream_sync(s));
  KCT_CONTAINS(kc_errmsg(f.rt), "kernel 'halfway', launched on a stream, failed");
  KCT_CONTAINS(kc_errmsg(f.rt), "every item of a group must reach each barrier");
  assert_int_equal(f.mem[12], 42);
  KCT_OK(f.rt, kc_stream_sync(s)); /* said once */
  /* a failure on the pool's workers, woken by the stream's thread: groups
   * after the first, each long enough that the pool is worth waking */
  kct_define(f.rt, "later",
             "KC_KERNEL void later(KC_GLOBAL int *y) {\n"
             "  volatile int n = 0;\n"
             "  while (n < 20000) n++;\n"
             "  if (kc_group_id(0) > 0 && kc_local_id(0) < 4) kc_barrier();\n"
             "  y[kc_group_id(0) % 16] = 1;\n"
             "}\n");
  kc_kernel *k2 = kct_kernel(f.rt, "later", NULL);
  c.grid.x = 64;
  KCT_OK(f.rt, kc_launch_ex(k2, f.ctx, &c, (kc_arg[]){KC_ARG_BUF(f.bmem)}, 1));
  /* two streams failing: kc_context_finish says the first one it syncs,
   * with that one's message */
  kct_define(f.rt, "two",
             "KC_DEVICE void two_sync(void) { kc_barrier(); }\n" /* fibers: not split */
             "KC_KERNEL void two(KC_GLOBAL int *y) { two_sync(); y[0] = 1; }\n");
  kc_kernel *k3 = kct_kernel(f.rt, "two", NULL);
  kc_stream *s2;
  KCT_OK(f.rt, kc_stream_create(f.ctx, &s2));
  kc_launch_config big = kct_config(1, 100000, s2); /* a group larger than the fibers take */
  KCT_OK(f.rt, kc_launch_ex(k3, f.ctx, &big, (kc_arg[]){KC_ARG_BUF(f.bmem)}, 1));
  kc_status st = kc_context_finish(f.ctx);
  assert_true(st == KC_ELAUNCH || st == KC_EINVAL);
  if (st == KC_ELAUNCH) KCT_CONTAINS(kc_errmsg(f.rt), "kernel 'later', launched on a stream, failed");
  else KCT_CONTAINS(kc_errmsg(f.rt), "kernel 'two', launched on a stream, failed");
  KCT_OK(f.rt, kc_context_finish(f.ctx)); /* both said (or dropped) once */
  kc_stream_destroy(s2);
  kc_stream_destroy(s);
  kct_destroy(f.rt);
}

/* A failure never synced is not lost without a word: destroying its
 * stream logs it. */
static void keep_warning(void *ud, kc_log_level level, const char *msg) {
  if (level == KC_LOG_WARN && strstr(msg, "destroyed before it was synced"))
    snprintf((char *)ud, 512, "%s", msg);
}

static void test_a_failure_never_synced_is_logged(void **state) {
  (void)state;
  char seen[512] = "";
  kc_options o;
  kc_options_init(&o);
  o.log = keep_warning;
  o.log_ud = seen;
  kc_runtime *rt = kct_runtime(&o);
  kc_context *ctx = kct_context(rt);
  kct_define(rt, "halfway", SRC_HALFWAY);
  kc_kernel *k = kct_kernel(rt, "halfway", NULL);
  kc_buffer *b;
  KCT_OK(rt, kc_buffer_create(ctx, 64, &b));
  kc_stream *s;
  KCT_OK(rt, kc_stream_create(ctx, &s));
  kc_launch_config c = kct_config(1, 8, s);
  KCT_OK(rt, kc_launch_ex(k, ctx, &c, (kc_arg[]){KC_ARG_BUF(b)}, 1));
  kc_stream_destroy(s);
  assert_non_null(strstr(seen, "kernel 'halfway', launched on a stream, failed"));
  kct_destroy(rt);
}

/* A child of fork() does not run what its parent had queued: its streams
 * start empty and launch again; the parent's queue runs in the parent. */
static void test_a_child_of_fork_starts_with_empty_streams(void **state) {
  (void)state;
  fixture f;
  setup(&f);
  kc_stream *s;
  KCT_OK(f.rt, kc_stream_create(f.ctx, &s));
  KCT_OK(f.rt, launch_gate(&f, s, f.bmem, 3)); /* held until the flag is set */
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int rc = 0;
    if (kc_stream_sync(s) != KC_OK) rc = 1; /* nothing queued here */
    else if (f.done != 0) rc = 2;
    else if (launch_put(&f, s, f.bmem, 3, 33) != KC_OK || kc_stream_sync(s) != KC_OK) rc = 3;
    else if (f.mem[3] != 33 || f.mem[0] != 0) rc = 4;
    _exit(rc);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  assert_int_equal(load(&f.done), 0); /* the parent's gate is still held */
  store(&f.flag, 1);
  KCT_OK(f.rt, kc_stream_sync(s));
  assert_int_equal(f.mem[0], 3);
  assert_int_equal(f.mem[3], 0); /* the child's write was the child's */
  kc_stream_destroy(s);
  kct_destroy(f.rt);
}

/* The threads of this process (/proc/self/task). */
static int thread_count(void) {
  DIR *d = opendir("/proc/self/task");
  assert_non_null(d);
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

/* The thread count once it is at most n, waiting up to 10 s. */
static int threads_down_to(int n) {
  int have = thread_count();
  for (int i = 0; i < 1000 && have > n; i++) {
    nanosleep(&(struct timespec){0, 10000000L}, NULL);
    have = thread_count();
  }
  return have;
}

/* With KC_HOST_STREAM_IDLE=0.2, a stream's thread ends 0.2 s after its
 * last launch ran; a failure it had is still the stream's next sync's;
 * the stream's next launch starts a thread again, as asynchronous and in
 * order as before; a stream whose thread ended is destroyed. */
static void test_an_idle_streams_thread_ends(void **state) {
  (void)state;
  kct_setenv("KC_HOST_STREAM_IDLE", "0.2");
  fixture f;
  setup(&f);
  kct_setenv("KC_HOST_STREAM_IDLE", NULL);
  kct_define(f.rt, "halfway", SRC_HALFWAY);
  kc_kernel *k = kct_kernel(f.rt, "halfway", NULL);
  int base = thread_count();
  kc_stream *s, *s2;
  KCT_OK(f.rt, kc_stream_create(f.ctx, &s));
  KCT_OK(f.rt, kc_stream_create(f.ctx, &s2));
  assert_int_equal(thread_count(), base); /* a stream's thread starts at its first launch */
  kc_launch_config c = kct_config(1, 8, s);
  KCT_OK(f.rt, kc_launch_ex(k, f.ctx, &c, (kc_arg[]){KC_ARG_BUF(f.bmem)}, 1)); /* fails on s's thread */
  KCT_OK(f.rt, launch_put(&f, s2, f.bmem, 2, 5));
  KCT_OK(f.rt, kc_stream_sync(s2));
  assert_int_equal(f.mem[2], 5);
  int idle = threads_down_to(base);
  assert_true(idle <= base); /* both threads ended */
  KCT_STATUS(f.rt, KC_ELAUNCH, kc_stream_sync(s)); /* the failure outlived its thread */
  KCT_CONTAINS(kc_errmsg(f.rt), "kernel 'halfway', launched on a stream, failed");
  KCT_OK(f.rt, kc_stream_sync(s)); /* said once */
  memset(f.mem, 0, sizeof f.mem); /* (whatever the failed launch wrote) */

  /* s's next launches: a thread again, asynchronous, in order */
  KCT_OK(f.rt, launch_gate(&f, s, f.bmem, 9));
  KCT_OK(f.rt, launch_put(&f, s, f.bmem, 1, 4));
  assert_int_equal(load(&f.done), 0);
  assert_int_equal(load(&f.mem[1]), 0);
  assert_int_equal(thread_count(), idle + 1);
  store(&f.flag, 1);
  KCT_OK(f.rt, kc_stream_sync(s));
  assert_int_equal(f.mem[0], 9);
  assert_int_equal(f.mem[1], 4);
  /* s2, whose thread ended, waits for s (a gate held): s2's next launch
   * runs after the gate */
  assert_true(threads_down_to(idle) <= idle);
  store(&f.flag, 0);
  store(&f.done, 0);
  KCT_OK(f.rt, launch_gate(&f, s, f.bmem, 8));
  KCT_OK(f.rt, kc_stream_wait(s2, s));
  KCT_OK(f.rt, launch_put(&f, s2, f.bmem, 3, 6));
  nanosleep(&(struct timespec){0, 50000000L}, NULL);
  assert_int_equal(load(&f.mem[3]), 0); /* behind the gate */
  store(&f.flag, 1);
  KCT_OK(f.rt, kc_stream_sync(s2));
  assert_int_equal(f.mem[0], 8);
  assert_int_equal(f.mem[3], 6);
  /* streams destroyed with their threads ended */
  assert_true(threads_down_to(idle) <= idle);
  kc_stream_destroy(s);
  kc_stream_destroy(s2);
  kct_destroy(f.rt);
}

/* An allocator that takes 1 s to allocate while *ud is set. */
static void *slow_alloc(void *ud, void *p, size_t n) {
  if (!n) {
    free(p);
    return NULL;
  }
  if (!p && load(ud)) nanosleep(&(struct timespec){1, 0}, NULL);
  return realloc(p, n);
}

/* kc_stream_sync(s) on a thread of its own; done set when it returned. */
typedef struct syncer {
  kc_stream *s;
  kc_status st;
  int done;
  pthread_t t;
} syncer;
static void *syncer_run(void *p) {
  syncer *y = p;
  y->st = kc_stream_sync(y->s);
  store(&y->done, 1);
  return NULL;
}

/* kc_stream_sync(s) returned within 20 s, with its status. */
static kc_status sync_within(kc_stream *s) {
  syncer y = {.s = s};
  assert_int_equal(pthread_create(&y.t, NULL, syncer_run, &y), 0);
  for (int i = 0; i < 2000 && !load(&y.done); i++) nanosleep(&(struct timespec){0, 10000000L}, NULL);
  if (!load(&y.done))
    fail_msg("kc_stream_sync still waits after 20 s: a launch queued where no thread runs it");
  pthread_join(y.t, NULL);
  return y.st;
}

/* A launch (and a wait) whose queue item is allocated while the stream's
 * thread ends idle: the allocation drops the streams' lock, so whether the
 * launch runs on the caller or is queued (and the thread started again)
 * is decided after it, or the item would be queued where no thread runs
 * it. Each on a new stream, whose only item is taken by a slow launch
 * (tens of ms) that its thread runs meanwhile; the allocator takes 1 s,
 * the thread ends after 50 ms idle. */
static void test_a_thread_that_ends_while_a_launch_allocates(void **state) {
  (void)state;
  int slow = 0;
  kct_setenv("KC_HOST_STREAM_IDLE", "0.05");
  kc_options o;
  kc_options_init(&o);
  o.alloc = slow_alloc;
  o.alloc_ud = &slow;
  kc_runtime *rt = kct_runtime(&o);
  kct_setenv("KC_HOST_STREAM_IDLE", NULL);
  kc_context *ctx = kct_context(rt);
  kct_define(rt, "slow", SRC_SLOW);
  kct_define(rt, "put", SRC_PUT);
  kc_kernel *ks = kct_kernel(rt, "slow", NULL), *kp = kct_kernel(rt, "put", NULL);
  int mem[4] = {0};
  kc_buffer *b;
  KCT_OK(rt, kc_buffer_wrap(ctx, mem, sizeof mem, &b));
  int zero = 0, one = 1, two = 2, v = 5;
  kc_arg slow_args[] = {KC_ARG_BUF(b), KC_ARG_VAL(v)};
  kc_dim3 g = {1, 1, 1};
  KCT_OK(rt, kc_launch(ks, ctx, &g, &g, slow_args, 2)); /* compiled and linked */
  KCT_OK(rt, kc_launch(kp, ctx, &g, &g, (kc_arg[]){KC_ARG_BUF(b), KC_ARG_VAL(zero), KC_ARG_VAL(zero)}, 3));

  /* a launch */
  kc_stream *s;
  KCT_OK(rt, kc_stream_create(ctx, &s));
  kc_launch_config c = kct_config(1, 1, s);
  KCT_OK(rt, kc_launch_ex(ks, ctx, &c, slow_args, 2)); /* s's one item, running */
  store(&slow, 1);
  KCT_OK(rt, kc_launch_ex(kp, ctx, &c, (kc_arg[]){KC_ARG_BUF(b), KC_ARG_VAL(one), KC_ARG_VAL(v)}, 3));
  store(&slow, 0);
  KCT_OK(rt, sync_within(s));
  assert_int_equal(mem[1], 5);

  /* a wait, other still busy */
  kc_stream *w, *other;
  KCT_OK(rt, kc_stream_create(ctx, &w));
  KCT_OK(rt, kc_stream_create(ctx, &other));
  kc_launch_config cw = kct_config(1, 1, w), co = kct_config(1, 1, other);
  KCT_OK(rt, kc_launch_ex(ks, ctx, &co, slow_args, 2));
  KCT_OK(rt, kc_launch_ex(ks, ctx, &cw, slow_args, 2)); /* w's one item, running */
  store(&slow, 1);
  KCT_OK(rt, kc_stream_wait(w, other));
  store(&slow, 0);
  KCT_OK(rt, kc_launch_ex(kp, ctx, &cw, (kc_arg[]){KC_ARG_BUF(b), KC_ARG_VAL(two), KC_ARG_VAL(v)}, 3));
  KCT_OK(rt, sync_within(w));
  assert_int_equal(mem[2], 5);
  KCT_OK(rt, sync_within(other));
  kc_stream_destroy(other);
  kc_stream_destroy(w);
  kc_stream_destroy(s);
  kc_buffer_destroy(b);
  kct_destroy(rt);
}

/* Threads launching on one shared stream and on their own, with waits
 * between them, while the main thread makes and destroys buffers and
 * streams, collects, and finishes the context. */
enum { THREADS = 3, ROUNDS = 150 };
typedef struct worker {
  fixture *f;
  kc_stream *shared;
  int id;
  int y[THREADS * 4], x[THREADS * 4];
  kct_report rep;
} worker;

static void *work(void *p) {
  worker *w = p;
  fixture *f = w->f;
  kc_stream *own;
  kc_buffer *by, *bx;
  if (kc_stream_create(f->ctx, &own) || kc_buffer_wrap(f->ctx, w->y, sizeof w->y, &by) ||
      kc_buffer_wrap(f->ctx, w->x, sizeof w->x, &bx)) {
    kct_report_fail(&w->rep, "setup: %s", kc_errmsg(f->rt));
    return NULL;
  }
  for (int j = 0; j < THREADS * 4; j++) w->x[j] = w->id + 1;
  kc_launch_config c = kct_config(THREADS, 4, w->shared), co = kct_config(THREADS, 4, own);
  kc_arg a[] = {KC_ARG_BUF(by), KC_ARG_BUF(bx)};
  int want = 0;
  for (int r = 0; r < ROUNDS; r++) {
    /* y += x on the shared stream after its own stream's last, then on its
     * own after that: each waits for the other (they write the same y) */
    kc_status st = kc_stream_wait(w->shared, own);
    if (!st) st = kc_launch_ex(f->addto, f->ctx, &c, a, 2);
    if (!st) st = kc_stream_wait(own, w->shared);
    if (!st) st = kc_launch_ex(f->addto, f->ctx, &co, a, 2);
    if (!st && r % 10 == 9) st = kc_stream_sync(own);
    if (st) {
      kct_report_fail(&w->rep, "round %d: %s", r, kc_errmsg(f->rt));
      break;
    }
    want += 2 * (w->id + 1);
    if (r % 10 == 9)
      for (int j = 0; j < THREADS * 4; j++)
        if (w->y[j] != want)
          kct_report_fail(&w->rep, "round %d: y[%d] = %d, expected %d", r, j, w->y[j], want);
  }
  if (kc_stream_sync(own)) kct_report_fail(&w->rep, "sync: %s", kc_errmsg(f->rt));
  kc_stream_destroy(own);
  kc_buffer_destroy(by);
  kc_buffer_destroy(bx);
  return NULL;
}

static void threads_share_streams(void) {
  fixture f;
  setup(&f);
  kc_stream *shared;
  KCT_OK(f.rt, kc_stream_create(f.ctx, &shared));
  int x[THREADS * 4] = {0};
  kc_buffer *bx;
  KCT_OK(f.rt, kc_buffer_wrap(f.ctx, x, sizeof x, &bx));
  kc_dim3 g = {THREADS, 1, 1}, b = {4, 1, 1};
  KCT_OK(f.rt, kc_launch(f.addto, f.ctx, &g, &b, (kc_arg[]){KC_ARG_BUF(bx), KC_ARG_BUF(bx)}, 2)); /* linked */
  worker *ws = kct_calloc(THREADS * sizeof *ws);
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) {
    ws[i] = (worker){.f = &f, .shared = shared, .id = i};
    assert_int_equal(pthread_create(&t[i], NULL, work, &ws[i]), 0);
  }
  for (int i = 0; i < 40; i++) {
    kc_buffer *tmp;
    kc_stream *s;
    KCT_OK(f.rt, kc_buffer_create(f.ctx, 256, &tmp));
    KCT_OK(f.rt, kc_stream_create(f.ctx, &s));
    KCT_OK(f.rt, launch_put(&f, s, tmp, 0, i));
    /* put redefined (the same work) and launched again: the old code is
     * collected while its launch may still be queued */
    kct_define(f.rt, "put",
               i % 2 ? SRC_PUT
                     : "KC_KERNEL void put(KC_GLOBAL int *y, int i, int v) {\n"
                       "  if (kc_global_id(0) == 0) { y[i] = v; }\n"
                       "}\n");
    KCT_OK(f.rt, launch_put(&f, s, tmp, 1, i));
    KCT_OK(f.rt, kc_collect(f.rt, NULL));
    kc_buffer_destroy(tmp); /* after the puts */
    KCT_OK(f.rt, kc_context_finish(f.ctx));
    kc_stream_destroy(s);
  }
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < THREADS; i++) kct_report_check("worker", &ws[i].rep);
  KCT_OK(f.rt, kc_stream_sync(shared));
  kct_free(ws);
  kc_stream_destroy(shared);
  kct_destroy(f.rt);
}

static void test_threads_share_streams(void **state) {
  (void)state;
  threads_share_streams();
}

/* The same with the streams' threads ending after 1 ms idle: they end
 * and start again between launches, syncs and waits. */
static void test_threads_share_streams_whose_threads_end(void **state) {
  (void)state;
  with_setting("KC_HOST_STREAM_IDLE", "0.001", threads_share_streams);
}

int main(int argc, char **argv) {
  int rc = kct_main_only(argc, argv, KC_BACKEND_HOST, "host");
  if (rc >= 0) return rc;
  const struct CMUnitTest tests[] = {KCT_TEST(test_launches_are_asynchronous_and_in_order),
                                     KCT_TEST(test_a_stream_waits_for_another),
                                     KCT_TEST(test_launches_with_short_pauses),
                                     KCT_TEST(test_launches_with_short_pauses_no_watch),
                                     KCT_TEST(test_a_destroy_does_not_wait_out_the_watch),
                                     KCT_TEST(test_arguments_are_taken_at_the_launch),
                                     KCT_TEST(test_what_a_queued_launch_uses_stays),
                                     KCT_TEST(test_a_failure_comes_back_from_the_sync),
                                     KCT_TEST(test_a_child_of_fork_starts_with_empty_streams),
                                     KCT_TEST(test_a_failure_never_synced_is_logged),
                                     KCT_TEST(test_an_idle_streams_thread_ends),
                                     KCT_TEST(test_a_thread_that_ends_while_a_launch_allocates),
                                     KCT_TEST(test_threads_share_streams),
                                     KCT_TEST(test_threads_share_streams_whose_threads_end)};
  return KCT_RUN(tests);
}
