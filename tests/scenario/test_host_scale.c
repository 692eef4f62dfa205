/* SPDX-License-Identifier: MIT */
/*
 * test_host_scale.c -- the host backend's own loader (src/backends/host/
 * loader.c, arena.c): what the objects it loads can do, that each link is a
 * copy of its own, and that linked objects do not cost a memory mapping each.
 *
 *   features   a kernel that calls libm, converts integers and floats the
 *              way tcc needs helpers for, reads a table of pointers and
 *              string literals, keeps a static: the right answers
 *   per link   each context's link of one code instance has its own
 *              statics; a redefinition relinks, a collect unloads, and the
 *              freed blocks are reused with the right code
 *   mappings   with all but about 200 of the process's mappings taken,
 *              2,000 objects still link and run (dlopen took 3 to 5 each)
 *   threads    threads that link and unlink (context resets) at once, each
 *              checking what its objects compute (the arena's lock; TSan)
 *   fork       a child that unlinks and relinks what its parent had linked
 *              (the code memory is shared with the parent) leaves the
 *              parent's code as it was
 *
 * Host backend only (the compiler: kct_host_cc, tcc when installed). The
 * mapping case is skipped under sanitizers, whose allocators map memory at
 * any call (kc_test.h: kct_maps).
 */
#include "kc_test.h"

#include <pthread.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

static kc_runtime *runtime(void) {
  kc_options opt;
  kc_options_init(&opt);
  opt.host_cc = kct_host_cc();
  opt.cache_disable = 1;
  return kct_runtime(&opt);
}

/* y[i] from one launch of k on n items (a buffer of n floats in ctx). */
static void run(kc_runtime *rt, kc_kernel *k, kc_context *ctx, uint32_t n, float *out) {
  kc_buffer *b = kct_buffer(rt, ctx, n);
  KCT_STATUS(rt, KC_OK, kct_run(k, ctx, b, n, out));
  kc_buffer_destroy(b);
}

static void test_features(void **state) {
  (void)state;
  kct_host_only();
  kc_runtime *rt = runtime();
  kc_context *ctx = kct_context(rt);
  kct_define(rt, "scale", "KC_DEVICE float scale(float x) { return sqrtf(x) + (float)floor(2.5); }");
  kct_define(rt, "k",
             "static const char *const names[] = {\"zero\", \"one\", \"three\"};\n"
             "static int calls;\n"
             "KC_KERNEL void k(KC_GLOBAL float *y) {\n"
             "  size_t i = kc_global_id(0);\n"
             "  unsigned long long big = 1ull << 40;\n"
             "  double d = (double)(big + i);          /* tcc: __floatundidf */\n"
             "  unsigned long long back = (unsigned long long)(d * 2.0); /* tcc: __fixunsdfdi */\n"
             "  calls++;\n"
             "  y[i] = scale((float)(i * i)) + (float)(back - 2 * big) + (float)names[i % 3][0] * 0.0f\n"
             "       + (float)(names[2][1] == 'h');\n"
             "}\n");
  kc_kernel *k = kct_kernel(rt, "k", "");
  float out[6];
  run(rt, k, ctx, 6, out);
  for (int i = 0; i < 6; i++) assert_float_equal(out[i], (float)i + 2.0f + 2.0f * (float)i + 1.0f, 1e-4);
  kct_destroy(rt);
}

static void test_each_link_has_its_own_statics(void **state) {
  (void)state;
  kct_host_only();
  kc_runtime *rt = runtime();
  kc_context *a = kct_context(rt), *b = kct_context(rt);
  kct_define(rt, "k", "static float n; KC_KERNEL void k(KC_GLOBAL float *y) { y[0] = ++n; }");
  kc_kernel *k = kct_kernel(rt, "k", "");
  float out[1];
  run(rt, k, a, 1, out);
  run(rt, k, a, 1, out);
  assert_float_equal(out[0], 2.0f, 0);
  run(rt, k, b, 1, out); /* b's own copy: its first launch */
  assert_float_equal(out[0], 1.0f, 0);
  /* a redefinition relinks in both, with fresh statics and the new code */
  for (int round = 0; round < 20; round++) {
    char src[128];
    snprintf(src, sizeof src, "static float n; KC_KERNEL void k(KC_GLOBAL float *y) { y[0] = ++n + %d; }",
             100 * round);
    kct_define(rt, "k", src);
    run(rt, k, a, 1, out);
    assert_float_equal(out[0], 1.0f + 100.0f * (float)round, 0);
    run(rt, k, b, 1, out);
    run(rt, k, b, 1, out);
    assert_float_equal(out[0], 2.0f + 100.0f * (float)round, 0);
    kc_collect_info info;
    KCT_STATUS(rt, KC_OK, kc_collect(rt, &info)); /* unloads the old links: their blocks are reused */
  }
  kct_destroy(rt);
}

/* ----------------------------------------------------------- mappings */

#define LINKS 2000
#define KERNELS 20

static void test_links_do_not_take_a_mapping_each(void **state) {
  (void)state;
  kct_host_only();
  kct_maps_limit(); /* skips here, before the compiles, where the table cannot be filled */
  kc_runtime *rt = runtime();
  kc_context *ctx[LINKS / KERNELS];
  kc_buffer *buf[LINKS / KERNELS];
  for (int c = 0; c < LINKS / KERNELS; c++) {
    ctx[c] = kct_context(rt);
    buf[c] = kct_buffer(rt, ctx[c], 1);
  }
  kc_kernel *k[KERNELS];
  for (int i = 0; i < KERNELS; i++) {
    char name[16], src[128];
    snprintf(name, sizeof name, "k%d", i);
    snprintf(src, sizeof src, "KC_KERNEL void k%d(KC_GLOBAL float *y) { y[0] = %d.0f; }", i, i);
    kct_define(rt, name, src);
    k[i] = kct_kernel(rt, name, "");
    KCT_STATUS(rt, KC_OK, kc_kernel_compile(k[i]));
  }
  /* every mapping but about 200: every other page of a reservation made
   * readable until the kernel refuses, then 100 of them given back */
  kct_maps m;
  kct_maps_fill(&m);
  kct_maps_give_back(&m, 100);
  kc_status st = KC_OK;
  int linked = 0;
  for (int c = 0; c < LINKS / KERNELS && !st; c++)
    for (int i = 0; i < KERNELS && !st; i++) {
      float v = -1;
      st = kct_run(k[i], ctx[c], buf[c], 1, &v);
      if (!st && v != (float)i) st = KC_EINVAL;
      if (!st) linked++;
    }
  kct_maps_free(&m);
  if (st)
    fail_msg("link %d of %d failed with ~200 mappings left: %s (%s)", linked + 1, LINKS, kc_status_name(st),
             kc_errmsg(rt));
  assert_int_equal(kct_stats(rt).links, LINKS);
  kct_destroy(rt);
}

#define THREADS 4
#define TKERNELS 8

typedef struct link_job {
  kc_runtime *rt;
  kc_kernel **k;
  int bad; /* launches that failed or computed the wrong value */
} link_job;

static void *link_worker(void *arg) {
  link_job *j = arg;
  kc_context *ctx;
  kc_buffer *b;
  if (kc_context_create(j->rt, 0, &ctx) || kc_buffer_create(ctx, sizeof(float), &b)) {
    j->bad++;
    return NULL;
  }
  for (int round = 0; round < 25; round++) {
    for (int i = 0; i < TKERNELS; i++) {
      float v = -1;
      if (kct_run(j->k[i], ctx, b, 1, &v) || v != (float)i) j->bad++;
    }
    if (kc_context_reset(ctx)) j->bad++; /* unlinks all: the blocks go back */
  }
  kc_buffer_destroy(b);
  kc_context_destroy(ctx);
  return NULL;
}

static void test_threads_link_and_unlink_at_once(void **state) {
  (void)state;
  kct_host_only();
  kc_runtime *rt = runtime();
  kc_kernel *k[TKERNELS];
  for (int i = 0; i < TKERNELS; i++) {
    char name[16], src[128];
    snprintf(name, sizeof name, "t%d", i);
    snprintf(src, sizeof src, "KC_KERNEL void t%d(KC_GLOBAL float *y) { int v = %d; y[0] = (float)v; }", i,
             i);
    kct_define(rt, name, src);
    k[i] = kct_kernel(rt, name, "");
    KCT_STATUS(rt, KC_OK, kc_kernel_compile(k[i]));
  }
  link_job jobs[THREADS];
  pthread_t tid[THREADS];
  for (int t = 0; t < THREADS; t++) {
    jobs[t] = (link_job){rt, k, 0};
    assert_int_equal(pthread_create(&tid[t], NULL, link_worker, &jobs[t]), 0);
  }
  for (int t = 0; t < THREADS; t++) {
    pthread_join(tid[t], NULL);
    assert_int_equal(jobs[t].bad, 0);
  }
  assert_int_equal(kct_stats(rt).links, THREADS * 25 * TKERNELS);
  kct_destroy(rt);
}

/* In a forked child, without cmocka: 0 if the kernel gives `want`. */
static int child_run(kc_kernel *k, kc_context *ctx, float want) {
  kc_buffer *b;
  float v = -1;
  if (kc_buffer_create(ctx, sizeof v, &b)) return 1;
  if (kc_launch(k, ctx, &(kc_dim3){1, 1, 1}, &(kc_dim3){1, 1, 1}, &KC_ARG_BUF(b), 1)) return 2;
  if (kc_buffer_read(b, 0, &v, sizeof v)) return 3;
  kc_buffer_destroy(b);
  return v == want ? 0 : 4;
}

static void test_a_forked_child_leaves_the_parents_code_alone(void **state) {
  (void)state;
  kct_host_only();
  kc_runtime *rt = runtime();
  kc_context *ctx = kct_context(rt);
  kct_define(rt, "k", "KC_KERNEL void k(KC_GLOBAL float *y) { int v = 1; y[0] = (float)v; }");
  kc_kernel *k = kct_kernel(rt, "k", "");
  float out[1];
  run(rt, k, ctx, 1, out);
  assert_float_equal(out[0], 1.0f, 0);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    /* the child unlinks k (its blocks would be free for reuse) and links
     * a new k of the same size, whose code differs in an immediate: the
     * same blocks, were they not frozen */
    int rc = child_run(k, ctx, 1.0f);
    if (!rc) rc = kc_context_reset(ctx) ? 5 : 0;
    if (!rc)
      rc = kc_define(rt, "k", "KC_KERNEL void k(KC_GLOBAL float *y) { int v = 2; y[0] = (float)v; }", NULL)
               ? 6
               : 0;
    if (!rc) rc = 10 + child_run(k, ctx, 2.0f);
    _exit(rc == 10 ? 0 : rc);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  run(rt, k, ctx, 1, out); /* the parent's k, linked before the fork */
  assert_float_equal(out[0], 1.0f, 0);
  /* and the parent goes on linking and unlinking */
  KCT_STATUS(rt, KC_OK, kc_context_reset(ctx));
  kct_define(rt, "k", "KC_KERNEL void k(KC_GLOBAL float *y) { int v = 3; y[0] = (float)v; }");
  run(rt, k, ctx, 1, out);
  assert_float_equal(out[0], 3.0f, 0);
  kct_destroy(rt);
}

KCT_MAIN_INIT_ONLY(KCT_TEST(test_features), KCT_TEST(test_each_link_has_its_own_statics),
                   KCT_TEST(test_links_do_not_take_a_mapping_each),
                   KCT_TEST(test_threads_link_and_unlink_at_once),
                   KCT_TEST(test_a_forked_child_leaves_the_parents_code_alone))
