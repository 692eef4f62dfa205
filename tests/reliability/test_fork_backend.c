/* SPDX-License-Identifier: MIT */
/*
 * test_fork_backend -- a runtime inherited by a child of fork() (kcache.h,
 * "Fork"; src/core/fork.c). The parent compiles and launches (so the
 * kernel handle's slot and the bound arguments are cached: the child's
 * first launch is the fast path's), then forks. In the child, under a
 * watchdog (SIGALRM kills it: a hang fails the test):
 *
 *   - on a backend that is not fork_safe (OpenCL, CUDA): the cached launch,
 *     the bound-argument launch, a new compile, kc_kernel_prepare, a buffer
 *     write and read, a buffer create, context create, reset and finish all
 *     answer KC_EBUSY with the documented message (the parent's pid, the
 *     backend, "create a new runtime in the child"); kc_define and
 *     kc_stats_get still work; kc_buffer_destroy, kc_context_destroy and
 *     kc_runtime_destroy call nothing of the backend and do not crash;
 *   - on the host backend (fork_safe): the same launches give the right
 *     values, and a new compile works.
 *
 * With a store (test_inherited_store), the child of a process that has
 * trial-loaded an entry touches no entry, and the parent then loads the
 * one the child's launch was refused.
 *
 * The child ends with _exit (a clean exit would run the leak checker of an
 * ASan build over the backend state left on purpose; LeakSanitizer does
 * not run at _exit). The parent then
 * goes on: its cached launch, a new compile and its buffers work.
 */
#include "kc_test.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* ThreadSanitizer: the parent has threads (PoCL's, the compile pool's), so
 * TSan would end the child at the fork by default (as test_remote_fork). */
const char *__tsan_default_options(void);
const char *__tsan_default_options(void) { return "die_after_fork=0"; }

enum { N = 8, WATCHDOG_S = 60 };

static const char SRC_K[] = "KC_KERNEL void k(KC_GLOBAL float *y) {\n"
                            "  size_t i = kc_global_id(0);\n"
                            "  y[i] = (float)i + 1.0f;\n"
                            "}\n";
static const char SRC_K2[] = "KC_KERNEL void k2(KC_GLOBAL float *y) {\n"
                             "  size_t i = kc_global_id(0);\n"
                             "  y[i] = 2.0f * (float)i;\n"
                             "}\n";

/* A child's failed check: says which on stderr, exits with its line. */
#define CHILD_CHECK(cond, rt) \
  do { \
    if (!(cond)) { \
      fprintf(stderr, "child: line %d: %s failed (message: %s)\n", __LINE__, #cond, kc_errmsg(rt)); \
      _exit(__LINE__ % 100 + 1); \
    } \
  } while (0)

/* st is the documented refusal: KC_EBUSY naming pid, the backend, the fix. */
static bool refused(kc_runtime *rt, kc_status st, long pid) {
  char want[64];
  snprintf(want, sizeof want, "created before fork() in process %ld;", pid);
  const char *m = kc_errmsg(rt);
  return st == KC_EBUSY && strstr(m, want) && strstr(m, kct_backend_name) &&
         strstr(m, "cannot be used in a child process: create a new runtime in the child");
}

static bool values_ok(const float *y, float scale, float add) {
  for (int i = 0; i < N; i++)
    if (y[i] != scale * (float)i + add) return false;
  return true;
}

static void child_refuses(kc_runtime *rt, kc_context *ctx, kc_buffer *b, kc_kernel *k, kc_args *a, long pid) {
  kc_dim3 grid = {N, 1, 1}, block = {1, 1, 1};
  kc_arg args[] = {KC_ARG_BUF(b)};
  kc_stats before = kct_stats(rt);
  CHILD_CHECK(refused(rt, kc_launch(k, ctx, &grid, &block, args, 1), pid), rt);
  kc_stats after = kct_stats(rt);
  CHILD_CHECK(after.fast_hits == before.fast_hits, rt); /* off the fast path */
  CHILD_CHECK(refused(rt, kc_launch(k, ctx, &grid, &block, args, 1), pid), rt); /* and again */
  CHILD_CHECK(refused(rt, kc_launch_args(a, &grid, &block), pid), rt);
  /* definitions stay usable; compiling does not */
  CHILD_CHECK(kc_define(rt, "k2", SRC_K2, NULL) == KC_OK, rt);
  kc_kernel *k2 = NULL;
  CHILD_CHECK(kc_kernel_create(rt, "k2", NULL, &k2) == KC_OK, rt);
  CHILD_CHECK(refused(rt, kc_kernel_prepare(k2, ctx), pid), rt);
  CHILD_CHECK(refused(rt, kc_launch(k2, ctx, &grid, &block, args, 1), pid), rt);
  float v[N] = {0};
  CHILD_CHECK(refused(rt, kc_buffer_write(b, 0, v, sizeof v), pid), rt);
  CHILD_CHECK(refused(rt, kc_buffer_read(b, 0, v, sizeof v), pid), rt);
  kc_buffer *nb = NULL;
  CHILD_CHECK(refused(rt, kc_buffer_create(ctx, sizeof v, &nb), pid) && !nb, rt);
  /* host memory in place (kc_buffer_host): refused as well, where the
   * backend has it (it reached OpenCL, and crashed in clCreateBuffer) */
  kc_status hs = kc_buffer_host(ctx, v, sizeof v, &nb);
  CHILD_CHECK((hs == KC_EUNAVAILABLE || refused(rt, hs, pid)) && !nb, rt);
  kc_context *nc = NULL;
  CHILD_CHECK(refused(rt, kc_context_create(rt, 0, &nc), pid) && !nc, rt);
  CHILD_CHECK(refused(rt, kc_context_finish(ctx), pid), rt);
  CHILD_CHECK(refused(rt, kc_context_reset(ctx), pid), rt);
  CHILD_CHECK(refused(rt, kc_launch(k, ctx, &grid, &block, args, 1), pid), rt); /* after the reset too */
  kc_stats s;
  CHILD_CHECK(kc_stats_get(rt, &s) == KC_OK, rt);
  /* the builds the parent had run, not a read of the parent's backend state */
  CHILD_CHECK(s.backend_builds == before.backend_builds, rt);
  CHILD_CHECK(strcmp(kct_backend_name, "opencl") || s.backend_builds >= 1, rt);
  /* releases call nothing of the backend */
  kc_buffer_destroy(b);
  kc_args_destroy(a);
  kc_kernel_destroy(k2);
  kc_context_destroy(ctx);
  kc_kernel_destroy(k);
  kc_runtime_destroy(rt);
}

static void child_works(kc_runtime *rt, kc_context *ctx, kc_buffer *b, kc_kernel *k, kc_args *a) {
  float y[N];
  CHILD_CHECK(kct_run(k, ctx, b, N, y) == KC_OK && values_ok(y, 1, 1), rt);
  CHILD_CHECK(kct_run_args(a, ctx, b, N, y) == KC_OK && values_ok(y, 1, 1), rt);
  CHILD_CHECK(kc_define(rt, "k2", SRC_K2, NULL) == KC_OK, rt);
  kc_kernel *k2 = NULL;
  CHILD_CHECK(kc_kernel_create(rt, "k2", NULL, &k2) == KC_OK, rt);
  CHILD_CHECK(kct_run(k2, ctx, b, N, y) == KC_OK && values_ok(y, 2, 0), rt);
  kc_kernel_destroy(k2);
  kc_args_destroy(a);
  kc_kernel_destroy(k);
  kc_runtime_destroy(rt);
}

/* fork() with stdio flushed first; the child (0 returned) dies by SIGALRM
 * after WATCHDOG_S seconds, should it hang. */
static pid_t fork_watched(void) {
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) alarm(WATCHDOG_S);
  return pid;
}

static void test_inherited_runtime(void **state) {
  (void)state;
  kc_runtime *rt = kct_runtime(NULL);
  kc_context *ctx = kct_context(rt);
  kc_buffer *b = kct_buffer(rt, ctx, N);
  kct_define(rt, "k", SRC_K);
  kc_kernel *k = kct_kernel(rt, "k", NULL);
  float y[N];
  KCT_OK(rt, kct_run(k, ctx, b, N, y)); /* the slow path: compile, link */
  KCT_OK(rt, kct_run(k, ctx, b, N, y)); /* the fast path */
  assert_true(values_ok(y, 1, 1));
  kc_arg arg = KC_ARG_BUF(b);
  kc_args *a = NULL;
  KCT_OK(rt, kc_args_create(k, ctx, &arg, 1, &a));
  KCT_OK(rt, kct_run_args(a, ctx, b, N, y));
  bool safe = !strcmp(kct_backend_name, "host");

  long parent = (long)getpid();
  pid_t pid = fork_watched();
  if (pid == 0) {
    if (safe) child_works(rt, ctx, b, k, a);
    else child_refuses(rt, ctx, b, k, a, parent);
    _exit(0);
  }
  int ws = 0;
  assert_int_equal(waitpid(pid, &ws, 0), pid);
  if (!WIFEXITED(ws)) fail_msg("the child died of signal %d (SIGALRM %d: it hung)", WTERMSIG(ws), SIGALRM);
  assert_int_equal(WEXITSTATUS(ws), 0);

  /* the parent goes on: cached launches, a new compile, its buffer */
  memset(y, 0, sizeof y);
  KCT_OK(rt, kct_run(k, ctx, b, N, y));
  assert_true(values_ok(y, 1, 1));
  KCT_OK(rt, kct_run_args(a, ctx, b, N, y));
  assert_true(values_ok(y, 1, 1));
  kct_define(rt, "k2", SRC_K2);
  kc_kernel *k2 = kct_kernel(rt, "k2", NULL);
  KCT_OK(rt, kct_run(k2, ctx, b, N, y));
  assert_true(values_ok(y, 2, 0));
  kc_kernel_destroy(k2);
  kc_args_destroy(a);
  kc_kernel_destroy(k);
  kct_destroy(rt);
}

/* With a store: the child of a process that has trial-loaded a stored
 * entry (the store's probe context) looks nothing up in the store (the
 * backend's identity, part of every key, is not told in the child), so it
 * neither loads nor condemns an entry; its launch of a stored kernel is
 * refused like any, and the parent then loads that entry from disk. */
static void test_inherited_store(void **state) {
  (void)state;
  if (!strcmp(kct_backend_name, "host")) skip(); /* usable there: test_remote_fork */
  char dir[512];
  kct_mkdtemp(dir, sizeof dir, "fork-store");
  unsetenv("KC_CACHE_DISABLE");
  kc_options o;
  kc_options_init(&o);
  o.cache_dir = dir;
  float y[N];
  kc_runtime *w = kct_runtime(&o); /* writes k and k2 to the store */
  kc_context *wc = kct_context(w);
  kc_buffer *wb = kct_buffer(w, wc, N);
  kct_define(w, "k", SRC_K);
  kct_define(w, "k2", SRC_K2);
  kc_kernel *wk = kct_kernel(w, "k", NULL), *wk2 = kct_kernel(w, "k2", NULL);
  KCT_OK(w, kct_run(wk, wc, wb, N, y));
  KCT_OK(w, kct_run(wk2, wc, wb, N, y));
  kc_kernel_destroy(wk);
  kc_kernel_destroy(wk2);
  kct_destroy(w);

  kc_runtime *rt = kct_runtime(&o);
  kc_context *ctx = kct_context(rt);
  kc_buffer *b = kct_buffer(rt, ctx, N);
  kct_define(rt, "k", SRC_K);
  kct_define(rt, "k2", SRC_K2);
  kc_kernel *k = kct_kernel(rt, "k", NULL), *k2 = kct_kernel(rt, "k2", NULL);
  KCT_OK(rt, kct_run(k, ctx, b, N, y)); /* from disk, trial-loaded first */
  kc_stats s0 = kct_stats(rt);
  assert_int_equal(s0.disk_hits, 1);
  assert_int_equal(s0.compiles, 0);

  long parent = (long)getpid();
  pid_t pid = fork_watched();
  if (pid == 0) {
    kc_dim3 grid = {N, 1, 1}, block = {1, 1, 1};
    kc_arg args[] = {KC_ARG_BUF(b)};
    CHILD_CHECK(refused(rt, kc_launch(k2, ctx, &grid, &block, args, 1), parent), rt);
    kc_stats s = kct_stats(rt);
    CHILD_CHECK(s.disk_hits == 1 && s.disk_repairs == 0 && s.compiles == 0, rt);
    kc_kernel_destroy(k2);
    kc_kernel_destroy(k);
    kc_runtime_destroy(rt);
    _exit(0);
  }
  int ws = 0;
  assert_int_equal(waitpid(pid, &ws, 0), pid);
  if (!WIFEXITED(ws)) fail_msg("the child died of signal %d (SIGALRM %d: it hung)", WTERMSIG(ws), SIGALRM);
  assert_int_equal(WEXITSTATUS(ws), 0);
  KCT_OK(rt, kct_run(k2, ctx, b, N, y)); /* the entry is there, untouched */
  assert_true(values_ok(y, 2, 0));
  kc_stats s1 = kct_stats(rt);
  assert_int_equal(s1.disk_hits, 2);
  assert_int_equal(s1.disk_repairs, 0);
  assert_int_equal(s1.compiles, 0);
  kc_kernel_destroy(k2);
  kc_kernel_destroy(k);
  kct_destroy(rt);
  kct_memory_only();
  kct_rmrf(dir);
}

/* the child's compile must be a compile, not a disk hit (kct_memory_only) */
KCT_MAIN(KCT_TEST(test_inherited_runtime), KCT_TEST(test_inherited_store))
