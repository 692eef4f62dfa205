/* SPDX-License-Identifier: MIT */
/*
 * test_interop_host.c -- kcache inside a program that owns its memory, on
 * the host backend: the caller's arrays wrapped as buffers (never freed),
 * views at any offset, raw pointers as arguments (KC_ARG_DEVPTR), the
 * per-group scratch area of kc_launch_ex (shared_bytes, kc_scratch()), the
 * context's own queue wrapped as a stream (kc_stream_wrap(ctx, NULL):
 * synchronous; test_host_streams.c has the asynchronous ones), the adopted "context" (NULL: the process) with
 * the world-age rules of any context, bound arguments launched with a configuration, and the errors of what
 * the host backend lacks.
 */
#include "kc_test.h"

#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>

enum { GROUPS = 3, BLOCK = 4, N = GROUPS * BLOCK };

/* Each group's items write the scratch area; its last item sums it (work
 * items run in order on the host, so it sees the whole group's). */
static const char SRC_SUM[] = "KC_KERNEL void gsum(KC_GLOBAL const float *x, KC_GLOBAL float *y) {\n"
                              "  float *t = (float *)kc_scratch();\n"
                              "  size_t l = kc_local_id(0);\n"
                              "  t[l] = x[kc_global_id(0)];\n"
                              "  if (l + 1 == kc_local_size(0)) {\n"
                              "    float s = 0;\n"
                              "    for (size_t i = 0; i < kc_local_size(0); i++) s += t[i];\n"
                              "    y[kc_group_id(0)] = s;\n"
                              "  }\n"
                              "}\n";

static kc_launch_config config(kc_stream *s) { return kct_config(GROUPS, BLOCK, s); }

static void test_wrapped_memory(void **state) {
  (void)state;
  kc_runtime *rt = kct_runtime(NULL);
  kc_context *ctx;
  KCT_OK(rt, kc_context_wrap(rt, NULL, NULL, &ctx));
  assert_null(kc_context_native(ctx));
  float *x = malloc(N * sizeof *x), *y = calloc(N + 5, sizeof *y);
  assert_non_null(x);
  assert_non_null(y);
  for (int i = 0; i < N; i++) x[i] = (float)(2 * i);
  kc_buffer *by, *view;
  KCT_OK(rt, kc_buffer_wrap(ctx, y, (N + 5) * sizeof *y, &by));
  assert_ptr_equal(kc_buffer_native(by), y);
  KCT_OK(rt, kc_buffer_view(by, 5 * sizeof *y, N * sizeof *y, &view)); /* any offset on the host */
  assert_ptr_equal(kc_buffer_native(view), y + 5);
  kct_define(rt, "add", kct_src_add);
  kc_kernel *k = kct_kernel(rt, "add", NULL);
  kc_stream *s;
  KCT_OK(rt, kc_stream_create(ctx, &s));
  assert_null(kc_stream_native(s));
  float b = 1.5f;
  kc_arg args[] = {KC_ARG_DEVPTR(x), KC_ARG_BUF(view), KC_ARG_VAL(b)};
  kc_launch_config c = config(s);
  KCT_OK(rt, kc_launch_ex(k, ctx, &c, args, 3));
  KCT_OK(rt, kc_stream_sync(s));
  for (int i = 0; i < 5; i++) assert_float_equal(y[i], 0, 0);
  for (int i = 0; i < N; i++) assert_float_equal(y[5 + i], x[i] + 1.5f, 0);
  float back[N];
  KCT_OK(rt, kc_buffer_read(view, 0, back, sizeof back));
  assert_memory_equal(back, y + 5, sizeof back);

  /* kc_launch takes no raw pointers: it says where they go */
  KCT_STATUS(rt, KC_EARGS, kc_launch(k, ctx, &c.grid, &c.block, args, 3));
  KCT_CONTAINS(kc_errmsg(rt), "only kc_launch_ex takes");

  /* reset: relinked, not compiled; ids as for any context */
  uint64_t id = kc_context_id(ctx);
  kc_stats before = kct_stats(rt);
  KCT_OK(rt, kc_context_reset(ctx));
  b = 3.0f;
  KCT_OK(rt, kc_launch_ex(k, ctx, &c, args, 3));
  KCT_OK(rt, kc_stream_sync(s)); /* a launch on a stream runs on the stream's thread */
  kc_stats after = kct_stats(rt);
  assert_int_equal(after.compiles, before.compiles);
  assert_int_equal(after.links - before.links, 1);
  assert_int_equal(kc_context_id(ctx), id);
  for (int i = 0; i < N; i++) assert_float_equal(y[5 + i], x[i] + 3.0f, 0);

  /* a redefinition reaches the adopted context like any other */
  kct_define(rt, "add",
             "KC_KERNEL void add(KC_GLOBAL const float *x, KC_GLOBAL float *y, float b) {\n"
             "  size_t g = kc_global_id(0); y[g] = x[g] - b; }\n");
  KCT_OK(rt, kc_launch_ex(k, ctx, &c, args, 3));
  KCT_OK(rt, kc_stream_sync(s));
  for (int i = 0; i < N; i++) assert_float_equal(y[5 + i], x[i] - 3.0f, 0);

  /* the memory is the caller's: destroying kcache's objects frees none of it */
  kc_buffer_destroy(by);
  assert_int_equal(kc_buffer_size(view), 0); /* its view went with it */
  kc_stream_destroy(s);
  kc_context_destroy(ctx);
  kct_destroy(rt);
  y[0] = 7; /* still ours (ASan would see a use after free) */
  assert_float_equal(y[0], 7, 0);
  free(x);
  free(y);
}

static void test_scratch_and_bound(void **state) {
  (void)state;
  kc_runtime *rt = kct_runtime(NULL);
  kc_context *ctx = kct_context(rt);
  kc_buffer *bx = kct_buffer(rt, ctx, N), *by = kct_buffer(rt, ctx, N);
  float x[N], y[N];
  for (int i = 0; i < N; i++) x[i] = (float)(i + 1);
  KCT_OK(rt, kc_buffer_write(bx, 0, x, sizeof x));
  kct_define(rt, "gsum", SRC_SUM);
  kc_kernel *k = kct_kernel(rt, "gsum", NULL);
  kc_stream *s;
  KCT_OK(rt, kc_stream_wrap(ctx, NULL, &s)); /* the implicit stream */
  kc_launch_config c = config(s);
  c.shared_bytes = BLOCK * sizeof(float);
  kc_arg args[] = {KC_ARG_BUF(bx), KC_ARG_BUF(by)};
  KCT_OK(rt, kc_launch_ex(k, ctx, &c, args, 2));
  KCT_OK(rt, kc_buffer_read(by, 0, y, sizeof y));
  for (int g = 0; g < GROUPS; g++) {
    float want = 0;
    for (int l = 0; l < BLOCK; l++) want += x[g * BLOCK + l];
    assert_float_equal(y[g], want, 0);
  }
  /* bound arguments with a configuration */
  kc_args *a;
  KCT_OK(rt, kc_args_create(k, ctx, args, 2, &a));
  KCT_OK(rt, kc_buffer_write(by, 0, (float[N]){0}, sizeof y));
  kc_stats before = kct_stats(rt);
  for (int i = 0; i < 3; i++) KCT_OK(rt, kc_launch_args_ex(a, &c));
  kc_stats after = kct_stats(rt);
  assert_true(after.fast_hits - before.fast_hits >= 2);
  KCT_OK(rt, kc_buffer_read(by, 0, y, sizeof y));
  assert_float_equal(y[0], x[0] + x[1] + x[2] + x[3], 0);
  /* pinned: the cached path still serves (the pin's world has the code) */
  kc_world pinned;
  KCT_OK(rt, kc_pin(rt, &pinned));
  before = kct_stats(rt);
  for (int i = 0; i < 3; i++) {
    KCT_OK(rt, kc_launch_args_ex(a, &c));
    KCT_OK(rt, kc_launch_ex(k, ctx, &c, args, 2));
  }
  after = kct_stats(rt);
  KCT_OK(rt, kc_unpin(rt));
  assert_int_equal(after.slow_lookups, before.slow_lookups);
  assert_int_equal(after.fast_hits - before.fast_hits, 6);

  /* what the host lacks, and bad configurations */
  c.flags = KC_LAUNCH_COOPERATIVE;
  KCT_STATUS(rt, KC_EUNAVAILABLE, kc_launch_ex(k, ctx, &c, args, 2));
  KCT_CONTAINS(kc_errmsg(rt), "no cooperative or cluster launches");
  c.flags = 0;
  kc_launch_config small = c;
  small.size = 4;
  KCT_STATUS(rt, KC_EINVAL, kc_launch_ex(k, ctx, &small, args, 2));
  KCT_CONTAINS(kc_errmsg(rt), "kc_launch_config of 4 bytes is smaller than the oldest layout");
  small.size = 0; /* never initialized */
  KCT_STATUS(rt, KC_EINVAL, kc_launch_ex(k, ctx, &small, args, 2));
  KCT_CONTAINS(kc_errmsg(rt), "initialize it with kc_launch_config_init");
  KCT_STATUS(rt, KC_EINVAL, kc_launch_config_init_size(&small, 4));
  KCT_CONTAINS(kc_errmsg(NULL), "kc_launch_config of 4 bytes is smaller than the oldest layout");
  KCT_STATUS(rt, KC_EINVAL, kc_launch_ex(k, ctx, NULL, args, 2));
  /* a program built against an older, smaller kc_launch_config: the fields
   * it lacks take their defaults (here: no cluster) */
  kc_launch_config older = c;
  older.size = offsetof(kc_launch_config, cluster);
  older.cluster = (kc_dim3){9, 9, 9}; /* past its size: never read */
  KCT_OK(rt, kc_launch_ex(k, ctx, &older, args, 2));
  /* a newer, larger one: accepted while what this library does not know is 0 */
  struct {
    kc_launch_config c;
    uint32_t newer_field;
  } newer;
  memset(&newer, 0, sizeof newer); /* padding included */
  newer.c = c;
  newer.c.size = sizeof newer;
  KCT_OK(rt, kc_launch_ex(k, ctx, &newer.c, args, 2));
  newer.newer_field = 1;
  KCT_STATUS(rt, KC_EINVAL, kc_launch_ex(k, ctx, &newer.c, args, 2));
  KCT_CONTAINS(kc_errmsg(rt), "so the program was built against a newer kcache.h");
  kc_stream *s2;
  KCT_STATUS(rt, KC_EINVAL, kc_stream_wrap(ctx, (void *)&c, &s2));
  KCT_CONTAINS(kc_errmsg(rt), "wraps only its implicit stream (NULL)");
  assert_null(s2);
  kc_context *ctx2;
  KCT_STATUS(rt, KC_EINVAL, kc_context_wrap(rt, (void *)&c, NULL, &ctx2));
  KCT_CONTAINS(kc_errmsg(rt), "no native context");
  kc_buffer *w;
  KCT_STATUS(rt, KC_EINVAL, kc_buffer_wrap(ctx, NULL, 4, &w));
  KCT_CONTAINS(kc_errmsg(rt), "native handle is NULL");
  KCT_STATUS(rt, KC_EINVAL, kc_buffer_view(bx, 0, 0, &w));
  KCT_STATUS(rt, KC_EINVAL, kc_buffer_view(bx, 4, N * sizeof(float), &w));
  kc_args_destroy(a);
  kc_context_destroy(ctx); /* the stream goes with its context... */
  KCT_STATUS(rt, KC_EDESTROYED, kc_stream_sync(s));
  kc_stream_destroy(s); /* ...and destroying it then does nothing */
  kct_destroy(rt);
}

/* Threads launching one kernel on one context, each on its own stream and
 * its own wrapped memory, while the main thread makes and destroys streams
 * of the same context: run under TSan by the tsan build. */
enum { THREADS = 4, LAUNCHES = 200 };
typedef struct worker {
  kc_runtime *rt;
  kc_context *ctx;
  kc_kernel *k, *sum;
  int id;
  float x[N], y[N];
  kct_report rep;
} worker;

static void *work(void *p) {
  worker *w = p;
  kc_stream *s;
  kc_buffer *by;
  if (kc_stream_create(w->ctx, &s) || kc_buffer_wrap(w->ctx, w->y, sizeof w->y, &by)) {
    kct_report_fail(&w->rep, "setup: %s", kc_errmsg(w->rt));
    return NULL;
  }
  kc_launch_config c = config(s);
  for (int i = 0; i < LAUNCHES; i++) {
    float b = (float)(w->id * 1000 + i);
    kc_arg args[] = {KC_ARG_DEVPTR(w->x), KC_ARG_BUF(by), KC_ARG_VAL(b)};
    if (kc_launch_ex(w->k, w->ctx, &c, args, 3) || kc_stream_sync(s))
      kct_report_fail(&w->rep, "launch %d: %s", i, kc_errmsg(w->rt));
    for (int j = 0; j < N; j++)
      if (w->y[j] != w->x[j] + b) kct_report_fail(&w->rep, "launch %d: y[%d] = %g", i, j, w->y[j]);
  }
  /* the scratch area, from every thread at once (tcc: one per object) */
  c.shared_bytes = BLOCK * sizeof(float);
  kc_buffer *bx;
  if (kc_buffer_wrap(w->ctx, w->x, sizeof w->x, &bx)) kct_report_fail(&w->rep, "wrap: %s", kc_errmsg(w->rt));
  kc_arg sargs[] = {KC_ARG_BUF(bx), KC_ARG_BUF(by)};
  for (int i = 0; i < LAUNCHES / 4; i++) {
    if (kc_launch_ex(w->sum, w->ctx, &c, sargs, 2) || kc_stream_sync(s))
      kct_report_fail(&w->rep, "sum %d: %s", i, kc_errmsg(w->rt));
    for (int g = 0; g < GROUPS; g++) {
      float want = 0;
      for (int l = 0; l < BLOCK; l++) want += w->x[g * BLOCK + l];
      if (w->y[g] != want) kct_report_fail(&w->rep, "sum %d: group %d: %g, expected %g", i, g, w->y[g], want);
    }
  }
  /* views made and destroyed (their parents' counts) while other threads
   * destroy buffers of the same context */
  for (int i = 0; i < LAUNCHES / 4; i++) {
    kc_buffer *v;
    if (kc_buffer_view(by, sizeof(float), 2 * sizeof(float), &v)) {
      kct_report_fail(&w->rep, "view %d: %s", i, kc_errmsg(w->rt));
      break;
    }
    kc_buffer_destroy(v);
  }
  kc_buffer *v;
  if (kc_buffer_view(bx, 0, sizeof(float), &v)) kct_report_fail(&w->rep, "view: %s", kc_errmsg(w->rt));
  kc_buffer_destroy(bx); /* and its view with it */
  if (kc_buffer_size(v) != 0) kct_report_fail(&w->rep, "a view outlived its buffer");
  kc_buffer_destroy(by);
  kc_stream_destroy(s);
  return NULL;
}

static void test_threads(void **state) {
  (void)state;
  kc_runtime *rt = kct_runtime(NULL);
  kc_context *ctx = kct_context(rt);
  kct_define(rt, "add", kct_src_add);
  kct_define(rt, "gsum", SRC_SUM);
  kc_kernel *k = kct_kernel(rt, "add", NULL), *sum = kct_kernel(rt, "gsum", NULL);
  worker *ws = kct_calloc(THREADS * sizeof *ws);
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) {
    ws[i] = (worker){.rt = rt, .ctx = ctx, .k = k, .sum = sum, .id = i};
    for (int j = 0; j < N; j++) ws[i].x[j] = (float)(i + j);
    assert_int_equal(pthread_create(&t[i], NULL, work, &ws[i]), 0);
  }
  for (int i = 0; i < 100; i++) { /* the context's stream list, concurrently, and finish walking it */
    kc_stream *s;
    KCT_OK(rt, kc_stream_create(ctx, &s));
    KCT_OK(rt, kc_context_finish(ctx));
    kc_stream_destroy(s);
  }
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < THREADS; i++) kct_report_check("worker", &ws[i].rep);
  kct_free(ws);
  kct_destroy(rt);
}

/* A thread's kc_launch_ex scratch area (shared_bytes) is freed when the
 * thread exits: threads that launch once with a 4 MiB area and exit leave
 * the process's heap (mallinfo2: mmapped chunks and used bytes) where it
 * was, give or take one area. (Under ASan, LeakSanitizer checks the same.) */
enum { SCRATCH = 4 << 20, EXITING = 8 };
typedef struct scratch_job {
  kc_runtime *rt;
  kc_context *ctx;
  kc_kernel *k;
  kc_buffer *bx, *by;
  kc_status st;
} scratch_job;

static void *scratch_once(void *p) {
  scratch_job *j = p;
  kc_launch_config c = config(NULL);
  c.shared_bytes = SCRATCH;
  kc_arg args[] = {KC_ARG_BUF(j->bx), KC_ARG_BUF(j->by)};
  j->st = kc_launch_ex(j->k, j->ctx, &c, args, 2);
  return NULL;
}

static void test_scratch_freed_at_thread_exit(void **state) {
  (void)state;
  kc_runtime *rt = kct_runtime(NULL);
  kc_context *ctx = kct_context(rt);
  kct_define(rt, "gsum", SRC_SUM);
  scratch_job j = {.rt = rt, .ctx = ctx, .k = kct_kernel(rt, "gsum", NULL)};
  KCT_OK(rt, kc_buffer_create(ctx, N * sizeof(float), &j.bx));
  KCT_OK(rt, kc_buffer_create(ctx, N * sizeof(float), &j.by));
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, scratch_once, &j), 0); /* compiles and links */
  pthread_join(t, NULL);
  KCT_OK(rt, j.st);
  struct mallinfo2 before = mallinfo2();
  for (int i = 0; i < EXITING; i++) {
    assert_int_equal(pthread_create(&t, NULL, scratch_once, &j), 0);
    pthread_join(t, NULL);
    KCT_OK(rt, j.st);
  }
  struct mallinfo2 after = mallinfo2();
  size_t grew = (after.hblkhd + after.uordblks) - (before.hblkhd + before.uordblks);
  if (after.hblkhd + after.uordblks > before.hblkhd + before.uordblks && grew > (size_t)SCRATCH)
    fail_msg("%d exited threads left %zu bytes (a %d-byte scratch area each)", EXITING, grew, SCRATCH);
  kct_destroy(rt);
}

/* Views counted on their buffer: destroying a view, then its buffer, or the
 * buffer with its views, leaves each destroyed exactly once. */
static void test_view_counts(void **state) {
  (void)state;
  kc_runtime *rt = kct_runtime(NULL);
  kc_context *ctx = kct_context(rt);
  kc_buffer *a, *b, *v1, *v2, *w;
  KCT_OK(rt, kc_buffer_create(ctx, 64, &a));
  KCT_OK(rt, kc_buffer_create(ctx, 64, &b));
  KCT_OK(rt, kc_buffer_view(a, 0, 16, &v1));
  KCT_OK(rt, kc_buffer_view(a, 16, 16, &v2));
  KCT_OK(rt, kc_buffer_view(b, 0, 8, &w));
  kc_buffer_destroy(v1);
  assert_int_equal(kc_buffer_size(v1), 0);
  assert_int_equal(kc_buffer_size(v2), 16);
  kc_buffer_destroy(a); /* its remaining view goes with it */
  assert_int_equal(kc_buffer_size(v2), 0);
  assert_int_equal(kc_buffer_size(w), 8); /* another buffer's view stays */
  kc_buffer *c, *cv;
  KCT_OK(rt, kc_buffer_create(ctx, 32, &c)); /* reuses a's struct or v1's: no views */
  KCT_OK(rt, kc_buffer_view(c, 0, 8, &cv));
  kc_buffer_destroy(c);
  assert_int_equal(kc_buffer_size(cv), 0);
  assert_int_equal(kc_buffer_size(w), 8);
  kc_buffer_destroy(b);
  assert_int_equal(kc_buffer_size(w), 0);
  kct_destroy(rt);
}

int main(int argc, char **argv) {
  int rc = kct_main_only(argc, argv, KC_BACKEND_HOST, "host");
  if (rc >= 0) return rc;
  const struct CMUnitTest tests[] = {KCT_TEST(test_wrapped_memory), KCT_TEST(test_scratch_and_bound),
                                     KCT_TEST(test_threads), KCT_TEST(test_scratch_freed_at_thread_exit),
                                     KCT_TEST(test_view_counts)};
  return KCT_RUN(tests);
}
