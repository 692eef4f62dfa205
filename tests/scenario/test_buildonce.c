/* SPDX-License-Identifier: MIT */
/*
 * test_buildonce.c -- the OpenCL backend builds a kernel once: a fresh
 * compile and its first launch in a context kcache made run one program
 * build (kc_stats.backend_builds counts clBuildProgram), and the links
 * that follow (a second context, a reset, threads with their own
 * contexts) reuse the compile's program and still compute the right thing,
 * with the kernel objects, buffers and queues of each context its own. A
 * context destroyed while another uses the same cl_context leaves the
 * other working. OpenCL backend only (PoCL here), without compile helpers.
 * The parameter probe's kernel is in a program only where a by-value
 * parameter is written as a type that is not built in (each kernel more in
 * a program costs every load of its binary), and a build that finds a
 * built-in name meaning something else is made again with it. A disk
 * hit's trial load and the links after it build the stored binary once.
 * The entry a compile wrote is written again, after the kernel's first
 * launch has completed (by the runtime's destroy at the latest), with the
 * binary PoCL serializes after that launch (larger: it holds the
 * work-group function the launch made), which a new runtime then loads
 * and runs; an entry that is gone by then is not made again. The suite
 * runs with PoCL's own cache on, in a directory of its own, and
 * $KC_OPENCL_LATE_BINARIES=1; by default (auto) the late binaries are
 * only made with PoCL's cache off, and 0 turns them off.
 */
#include "kc_test.h"

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

#define N 64
#define NTHREADS 3

/* lin's source differs by this number (0 * salt added), which
 * compile_and_launch counts up: PoCL's own kernel cache, on in this suite
 * and kept for the whole process, would otherwise hold the work-group
 * function of an earlier test's launch, so that the binary fetched before
 * the first launch already had it and the late binary were the same
 * bytes (then rightly not written again). */
static int lin_salt;

/* lin, y[j] = j * 2 + one (one: the text of 1.0f) with lin_salt, defined in rt. */
static kc_kernel *lin_kernel_with(kc_runtime *rt, const char *one) {
  char src[256];
  snprintf(src, sizeof src,
           "KC_KERNEL void lin(KC_GLOBAL float *y) { size_t j = kc_global_id(0); y[j] = (float)j * 2.0f + "
           "%s + 0.0f * %d.0f; }",
           one, lin_salt);
  kct_define(rt, "lin", src);
  return kct_kernel(rt, "lin", NULL);
}

/* y[j] = j * 2 + 1 */
static kc_kernel *lin_kernel(kc_runtime *rt) { return lin_kernel_with(rt, "1.0f"); }

static void run_lin(kc_runtime *rt, kc_kernel *k, kc_context *ctx) {
  kc_buffer *b = kct_buffer(rt, ctx, N);
  float out[N];
  kct_run_ok(rt, k, ctx, b, N, out);
  kct_expect_linear(out, N, 2.0f, 1.0f);
  kc_buffer_destroy(b);
}

static kc_runtime *store_runtime(char *dir, size_t len);

/* A runtime made from o with its store in a fresh directory (dir). */
static kc_runtime *store_runtime_with(char *dir, size_t len, kc_options *o) {
  kct_mkdtemp(dir, len, "probe");
  unsetenv("KC_CACHE_DISABLE");
  o->cache_dir = dir;
  return kct_runtime(o);
}

/* A runtime in memory, or with a store in a fresh directory (dir): with
 * the late binaries asked for (as in this suite), a store's builds compile
 * and link twice, a memory-only runtime's build once. */
static kc_runtime *runtime_of(bool store, char *dir, size_t len) {
  dir[0] = 0;
  return store ? store_runtime(dir, len) : kct_runtime(NULL);
}

/* Destroys rt and the store runtime_of made. */
static void runtime_done(kc_runtime *rt, const char *dir) {
  kct_destroy(rt);
  if (dir[0]) {
    kct_rmrf(dir);
    kct_memory_only();
  }
}

/* The tests that run twice (BOTH): in memory and with a store, as their
 * state says. */
static bool in_memory = false, with_a_store = true;
#define BOTH(f) \
  {#f, f, NULL, kct_teardown, &in_memory}, { #f "_with_a_store", f, NULL, kct_teardown, &with_a_store }

/* One compile, one build; every later link reuses the program. */
static void test_compile_and_links_build_once(void **state) {
  bool store = *(bool *)*state;
  char dir[4096];
  kc_runtime *rt = runtime_of(store, dir, sizeof dir);
  kc_kernel *k = lin_kernel(rt);
  kc_context *a = kct_context(rt);
  run_lin(rt, k, a);
  kc_stats s = kct_stats(rt);
  assert_int_equal(s.compiles, 1);
  assert_int_equal(s.links, 1);
  assert_int_equal(s.backend_builds, 1); /* before: 2 (source, then the binary) */

  kc_context *b = kct_context(rt);
  run_lin(rt, k, b);
  KCT_OK(rt, kc_context_reset(a)); /* drops a's kernel object: relinked */
  run_lin(rt, k, a);
  s = kct_stats(rt);
  assert_int_equal(s.compiles, 1);
  assert_int_equal(s.links, 3);
  assert_int_equal(s.backend_builds, 1);

  /* b shares a's cl_context: destroying it leaves a working */
  kc_buffer *kept = kct_buffer(rt, a, N);
  kc_context_destroy(b);
  float out[N];
  kct_run_ok(rt, k, a, kept, N, out);
  kct_expect_linear(out, N, 2.0f, 1.0f);
  kc_buffer_destroy(kept);

  /* a redefinition is a new compile: one more build, still one per kernel */
  kct_define(
      rt, "lin",
      "KC_KERNEL void lin(KC_GLOBAL float *y) { size_t j = kc_global_id(0); y[j] = (float)j * 3.0f; }");
  kc_buffer *c = kct_buffer(rt, a, N);
  kct_run_ok(rt, k, a, c, N, out);
  kct_expect_linear(out, N, 3.0f, 0.0f);
  kc_buffer_destroy(c);
  s = kct_stats(rt);
  assert_int_equal(s.compiles, 2);
  assert_int_equal(s.backend_builds, 2);
  runtime_done(rt, dir);
}

typedef struct worker {
  kc_runtime *rt;
  kc_kernel *k;
  pthread_barrier_t *bar;
  kct_report r;
} worker;

/* Each thread makes its own context and launches the same kernel. */
static void *work(void *arg) {
  worker *w = arg;
  kc_context *ctx = NULL;
  kc_buffer *b = NULL;
  if (kc_context_create(w->rt, 0, &ctx) || kc_buffer_create(ctx, N * sizeof(float), &b))
    kct_report_fail(&w->r, "context or buffer: %s", kc_errmsg(w->rt));
  pthread_barrier_wait(w->bar);
  float out[N];
  for (int round = 0; round < 3 && b; round++) {
    kc_status st = kct_run(w->k, ctx, b, N, out);
    if (st) kct_report_fail(&w->r, "launch: %s: %s", kc_status_name(st), kc_errmsg(w->rt));
    for (int j = 0; j < N && !st; j++)
      if (out[j] != (float)j * 2.0f + 1.0f && kct_report_fail(&w->r, "element %d is %g", j, (double)out[j]))
        break;
    if (round == 1 && kc_context_reset(ctx)) kct_report_fail(&w->r, "reset: %s", kc_errmsg(w->rt));
  }
  if (b) kc_buffer_destroy(b);
  if (ctx) kc_context_destroy(ctx);
  return NULL;
}

/* Threads compile (single flight) and link in their own contexts at once:
 * one compile, one build, every result right. Run under TSan too. */
static void test_threads_share_the_build(void **state) {
  bool store = *(bool *)*state;
  char dir[4096];
  kc_runtime *rt = runtime_of(store, dir, sizeof dir);
  kc_kernel *k = lin_kernel(rt);
  pthread_barrier_t bar;
  pthread_barrier_init(&bar, NULL, NTHREADS);
  worker w[NTHREADS];
  pthread_t t[NTHREADS];
  for (int i = 0; i < NTHREADS; i++) {
    w[i] = (worker){.rt = rt, .k = k, .bar = &bar};
    assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
  }
  for (int i = 0; i < NTHREADS; i++) pthread_join(t[i], NULL);
  pthread_barrier_destroy(&bar);
  for (int i = 0; i < NTHREADS; i++) kct_report_check("worker", &w[i].r);
  kc_stats s = kct_stats(rt);
  assert_int_equal(s.compiles, 1);
  assert_int_equal(s.links, 2 * NTHREADS);
  assert_int_equal(s.backend_builds, 1);
  runtime_done(rt, dir);
}

/* Calls fn(path, ud) for each entry file of the store in dir; returns how
 * many there are. */
static int each_entry(const char *dir, void (*fn)(const char *path, void *ud), void *ud) {
  char v1[4200];
  snprintf(v1, sizeof v1, "%s/v1", dir);
  DIR *top = opendir(v1);
  assert_non_null(top);
  int entries = 0;
  for (struct dirent *b; (b = readdir(top));) {
    if (strlen(b->d_name) != 2) continue; /* the buckets: two hex digits */
    char bucket[4400];
    snprintf(bucket, sizeof bucket, "%s/%s", v1, b->d_name);
    DIR *d = opendir(bucket);
    if (!d) continue;
    for (struct dirent *e; (e = readdir(d));) {
      size_t n = strlen(e->d_name);
      if (n < 4 || strcmp(e->d_name + n - 4, ".kce")) continue;
      char path[4700];
      snprintf(path, sizeof path, "%s/%s", bucket, e->d_name);
      fn(path, ud);
      entries++;
    }
    closedir(d);
  }
  closedir(top);
  return entries;
}

/* each_entry: counts (ud: int) an entry that holds the bytes "kc__probe". */
static void count_probe(const char *path, void *ud) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  static char buf[1 << 22];
  size_t len = fread(buf, 1, sizeof buf, f);
  fclose(f);
  for (size_t i = 0; i + 9 <= len; i++)
    if (!memcmp(buf + i, "kc__probe", 9)) {
      ++*(int *)ud;
      return;
    }
}

/* How many entries of the store in dir hold the bytes "kc__probe" (the
 * probe kernel's name in the program binary). */
static int entries_with_probe(const char *dir) {
  int found = 0;
  assert_true(each_entry(dir, count_probe, &found) > 0);
  return found;
}

/* each_entry: the entry's size (ud: long). */
static void size_of(const char *path, void *ud) {
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  *(long *)ud = (long)st.st_size;
}

/* The size of the one entry of the store in dir; 0 if there is none. */
static long entry_size(const char *dir) {
  long size = 0;
  assert_true(each_entry(dir, size_of, &size) <= 1);
  return size;
}

/* The store's entry once it is larger than early, waiting up to 60 s: the
 * late binary is fetched and written on the backend's thread after the
 * first launch has run. For the tests of when there are late binaries;
 * test_the_entry_gets_the_binary_after_the_first_launch checks that
 * kc_runtime_destroy lets the fetch finish. Its size then (early or less
 * if it never grew). */
static long entry_grown(const char *dir, long early) {
  long size = entry_size(dir);
  for (int i = 0; i < 6000 && size <= early; i++) {
    nanosleep(&(struct timespec){0, 10000000L}, NULL);
    size = entry_size(dir);
  }
  return size;
}

/* Removes every entry of the store in dir (the files only). */
static void remove_entries(const char *dir) {
  char cmd[4300];
  snprintf(cmd, sizeof cmd, "find '%s/v1' -name '*.kce' -delete", dir);
  assert_int_equal(system(cmd), 0);
}

/* A runtime with its store in a fresh directory (dir); the suite's other
 * runtimes keep to memory (kct_memory_only). */
static kc_runtime *store_runtime(char *dir, size_t len) {
  kc_options o;
  kc_options_init(&o);
  return store_runtime_with(dir, len, &o);
}

/* y[j] = a * j + n + v.w: by-value parameters of built-in types only */
static const char SRC_BI[] = "KC_KERNEL void bi(KC_GLOBAL float *y, float a, int n, uint4 v) {\n"
                             "  size_t j = kc_global_id(0);\n"
                             "  y[j] = a * (float)j + (float)n + (float)v.w;\n"
                             "}\n";

/* Built-in parameter types: no probe kernel in the program (one build), a
 * struct parameter: the probe kernel in it; both compute the right thing. */
static void test_probe_only_where_a_type_is_not_built_in(void **state) {
  (void)state;
  char dir[4096];
  kc_runtime *rt = store_runtime(dir, sizeof dir);
  kct_define(rt, "bi", SRC_BI);
  kc_kernel *k = kct_kernel(rt, "bi", NULL);
  kc_context *ctx = kct_context(rt);
  kc_buffer *b = kct_buffer(rt, ctx, N);
  float a = 2.0f, out[N];
  int n = 1;
  struct {
    uint32_t x[4];
  } __attribute__((aligned(16))) v = {{0, 0, 0, 0}};
  kc_arg args[] = {KC_ARG_BUF(b), KC_ARG_VAL(a), KC_ARG_VAL(n), KC_ARG_VAL(v)};
  kc_dim3 grid = {N, 1, 1}, block = {1, 1, 1};
  KCT_OK(rt, kc_launch(k, ctx, &grid, &block, args, 4));
  KCT_OK(rt, kc_buffer_read(b, 0, out, sizeof out));
  kct_expect_linear(out, N, 2.0f, 1.0f);
  assert_int_equal(kct_stats(rt).backend_builds, 1);
  assert_int_equal(entries_with_probe(dir), 0);

  /* a struct by value: its size only the probe can tell */
  kct_define(rt, "S", "typedef struct { char c; float f; } S;");
  kct_define(rt, "st", "KC_KERNEL void st(KC_GLOBAL float *y, S s) { y[kc_global_id(0)] = s.f; }");
  kc_kernel *ks = kct_kernel(rt, "st", NULL);
  struct {
    char c;
    float f;
  } s = {1, 3.0f};
  kc_arg sargs[] = {KC_ARG_BUF(b), KC_ARG_VAL(s)};
  KCT_OK(rt, kc_launch(ks, ctx, &grid, &block, sargs, 2));
  KCT_OK(rt, kc_buffer_read(b, 0, out, sizeof out));
  kct_expect_linear(out, N, 0.0f, 3.0f);
  assert_int_equal(entries_with_probe(dir), 1);
  kc_buffer_destroy(b);
  kct_destroy(rt);
  kct_rmrf(dir);
  kct_memory_only();
}

/* A parameter written as a built-in type that a macro makes a struct: the
 * compiler names the struct, the program has no probe to say its size, so
 * the unit is built again with the probe (two builds), which gives the
 * struct's 3 bytes, not float3's 16. */
static void test_a_built_in_name_that_is_not_gets_the_probe(void **state) {
  (void)state;
  char dir[4096];
  kc_runtime *rt = store_runtime(dir, sizeof dir);
  kct_define(rt, "C3", "typedef struct { char a, b, c; } C3;");
  kct_define(rt, "float3", "#define float3 C3");
  kct_define(rt, "fb",
             "KC_KERNEL void fb(KC_GLOBAL float *y, float3 v) { y[kc_global_id(0)] = (float)v.c; }");
  kc_kernel *k = kct_kernel(rt, "fb", NULL);
  kc_context *ctx = kct_context(rt);
  kc_buffer *b = kct_buffer(rt, ctx, N);
  struct {
    char a, b, c;
  } v = {1, 2, 5};
  float out[N];
  kc_arg args[] = {KC_ARG_BUF(b), KC_ARG_VAL(v)};
  kc_dim3 grid = {N, 1, 1}, block = {1, 1, 1};
  KCT_OK(rt, kc_launch(k, ctx, &grid, &block, args, 2));
  KCT_OK(rt, kc_buffer_read(b, 0, out, sizeof out));
  kct_expect_linear(out, N, 0.0f, 5.0f);
  assert_int_equal(kct_stats(rt).backend_builds, 2);
  assert_int_equal(entries_with_probe(dir), 1);
  kc_buffer_destroy(b);
  kct_destroy(rt);
  kct_rmrf(dir);
  kct_memory_only();
}

/* A disk hit's trial load and the launch that follows build the stored
 * binary once (twice before: the trial load's program was dropped). */
static void test_a_disk_hit_and_its_link_build_once(void **state) {
  (void)state;
  char dir[4096];
  kc_runtime *rt = store_runtime(dir, sizeof dir);
  run_lin(rt, lin_kernel(rt), kct_context(rt)); /* compiles and writes the entry */
  kct_destroy(rt);
  kc_options o;
  kc_options_init(&o);
  o.cache_dir = dir;
  rt = kct_runtime(&o);
  kc_kernel *k = lin_kernel(rt);
  KCT_OK(rt, kc_kernel_compile(k)); /* the disk hit: read, verify, trial load */
  kc_stats s = kct_stats(rt);
  assert_int_equal(s.compiles, 0);
  assert_int_equal(s.disk_hits, 1);
  assert_int_equal(s.backend_builds, 1);
  kc_context *a = kct_context(rt), *b = kct_context(rt);
  run_lin(rt, k, a);
  run_lin(rt, k, b);
  s = kct_stats(rt);
  assert_int_equal(s.links, 2);
  assert_int_equal(s.backend_builds, 1);
  kct_destroy(rt);
  kct_rmrf(dir);
  kct_memory_only();
}

/* One launch of lin in blocks of 64, a wait (kc_context_finish), its results. */
static void run_lin64(kc_runtime *rt, kc_kernel *k, kc_context *ctx) {
  kc_buffer *b = kct_buffer(rt, ctx, N);
  kc_arg args[] = {KC_ARG_BUF(b)};
  kc_dim3 grid = {N / 64, 1, 1}, block = {64, 1, 1};
  KCT_OK(rt, kc_launch(k, ctx, &grid, &block, args, 1));
  KCT_OK(rt, kc_context_finish(ctx));
  float out[N];
  KCT_OK(rt, kc_buffer_read(b, 0, out, sizeof out));
  kct_expect_linear(out, N, 2.0f, 1.0f);
  kc_buffer_destroy(b);
}

/* In rt, whose store is in dir: lin with one as its 1 and a salt PoCL has
 * not launched yet, compiled (its entry's size then in *early), not
 * launched. */
static kc_kernel *compile_lin_only(kc_runtime *rt, const char *dir, const char *one, long *early) {
  lin_salt++;
  kc_kernel *k = lin_kernel_with(rt, one);
  KCT_OK(rt, kc_kernel_compile(k));
  *early = entry_size(dir);
  assert_true(*early > 0);
  return k;
}

/* The same, then launched in a context. */
static kc_kernel *compile_lin(kc_runtime *rt, const char *dir, const char *one, long *early) {
  kc_kernel *k = compile_lin_only(rt, dir, one, early);
  run_lin64(rt, k, kct_context(rt)); /* 2j + 1 */
  return k;
}

/* A runtime on a new store (dir) that compiles lin, whose entry's size
 * then is *early, and launches it in two contexts (the same program, its
 * first launch in each). */
static kc_runtime *compile_and_launch(char *dir, size_t len, long *early) {
  kc_runtime *rt = store_runtime(dir, len);
  kc_kernel *k = compile_lin(rt, dir, "1.0f", early);
  run_lin64(rt, k, kct_context(rt));
  return rt;
}

/* The compile's entry holds the binary fetched before any launch; once the
 * first launch has completed it holds the one PoCL serializes after it, with
 * the work-group function that launch made: larger (PoCL 3.x). The backend
 * writes it from a thread of its own, which kc_runtime_destroy lets finish:
 * checked after it. A new runtime loads it (a disk hit, one build), computes
 * the right thing, and leaves the entry as it is. */
static void test_the_entry_gets_the_binary_after_the_first_launch(void **state) {
  (void)state;
  char dir[4096];
  long early;
  kc_runtime *rt = compile_and_launch(dir, sizeof dir, &early);
  kc_stats s = kct_stats(rt);
  assert_int_equal(s.compiles, 1);
  assert_int_equal(s.backend_builds, 1);
  assert_int_equal(s.disk_writes, 1); /* a rewrite is not counted as an entry written */
  /* kc_runtime_destroy lets the late binary's fetch finish: the backend's
   * thread is woken when the launch is made and starts the fetch once the
   * launch completed (kc_context_finish above); destroy only stops fetches
   * not started within 1 s of it */
  kct_destroy(rt);
  long late = entry_size(dir);
  assert_true(late > early);

  kc_options o;
  kc_options_init(&o);
  o.cache_dir = dir;
  rt = kct_runtime(&o);
  kc_kernel *k = lin_kernel(rt);
  run_lin64(rt, k, kct_context(rt));
  s = kct_stats(rt);
  assert_int_equal(s.compiles, 0);
  assert_int_equal(s.disk_hits, 1);
  assert_int_equal(s.backend_builds, 1);
  kct_destroy(rt);
  assert_int_equal(entry_size(dir), late); /* a hit's program is not fetched again */

  /* an entry gone before the first launch is not made again */
  rt = kct_runtime(&o);
  kct_define(rt, "lin",
             "KC_KERNEL void lin(KC_GLOBAL float *y) { size_t j = kc_global_id(0); y[j] = (float)j * 2.0f + "
             "1.0f + 0.0f; }");
  k = kct_kernel(rt, "lin", NULL);
  remove_entries(dir);
  KCT_OK(rt, kc_kernel_compile(k));
  assert_true(entry_size(dir) > 0);
  remove_entries(dir);
  run_lin64(rt, k, kct_context(rt));
  kct_destroy(rt);
  assert_int_equal(entry_size(dir), 0);
  kct_rmrf(dir);
  kct_memory_only();
}

/* The OpenCL calls test_a_first_launch_that_has_not_ended makes itself. */
#define CLF(X) \
  X(clGetContextInfo) \
  X(clCreateCommandQueue) \
  X(clReleaseCommandQueue) \
  X(clCreateUserEvent) \
  X(clSetUserEventStatus) \
  X(clEnqueueMarkerWithWaitList) \
  X(clFinish) \
  X(clReleaseEvent)
#define CL_FIELD(f) static __typeof__(f) *p_##f;
CLF(CL_FIELD)
#undef CL_FIELD

/* Each of them, from the ICD loader: kcache's OpenCL backend runs here, so
 * the loader is there. */
static void cl_load(void) {
#define CL_SYM(f) assert_true(KCT_OPENCL_SYM(&p_##f, f));
  CLF(CL_SYM)
#undef CL_SYM
}

/* A queue of the test's own in ctx's cl_context, held by a user event
 * (*gate: what runs on the queue after the marker waits for it),
 * wrapped as a kc_stream (*s); lin launched on it, the program's first
 * launch, so that the late worker waits for it. */
static cl_command_queue gated_first_launch(kc_runtime *rt, kc_kernel *k, kc_context *ctx, kc_buffer *b,
                                           cl_event *gate, kc_stream **s) {
  cl_context cctx = kc_context_native(ctx);
  cl_device_id dev;
  assert_int_equal(p_clGetContextInfo(cctx, CL_CONTEXT_DEVICES, sizeof dev, &dev, NULL), CL_SUCCESS);
  cl_int e;
  cl_command_queue q = p_clCreateCommandQueue(cctx, dev, 0, &e);
  assert_int_equal(e, CL_SUCCESS);
  *gate = p_clCreateUserEvent(cctx, &e);
  assert_int_equal(e, CL_SUCCESS);
  assert_int_equal(p_clEnqueueMarkerWithWaitList(q, 1, gate, NULL), CL_SUCCESS);
  KCT_OK(rt, kc_stream_wrap(ctx, q, s));
  kc_arg args[] = {KC_ARG_BUF(b)};
  kc_launch_config c = kct_config(N / 64, 64, *s);
  KCT_OK(rt, kc_launch_ex(k, ctx, &c, args, 1));
  return q;
}

/* A first launch that has not ended when the runtime is destroyed (its
 * queue waits for an event the test holds): kc_runtime_destroy does not
 * wait for it (the late worker, waiting for the launch's callback, is
 * woken by the stop) and the entry keeps its first binary; the launch
 * ends afterwards, its callback coming to a wait that gave up. (A first
 * launch that fails is not tested: PoCL 3.1 aborts the process when a
 * user event that a command waits for is set to an error.) */
static void test_a_first_launch_that_has_not_ended(void **state) {
  (void)state;
  cl_load();
  char dir[4096];
  long early;
  kc_runtime *rt = store_runtime(dir, sizeof dir);
  kc_kernel *k = compile_lin_only(rt, dir, "1.0f", &early);
  kc_context *ctx = kct_context(rt);
  kc_buffer *b = kct_buffer(rt, ctx, N);
  cl_event gate;
  kc_stream *s;
  cl_command_queue q = gated_first_launch(rt, k, ctx, b, &gate, &s);
  nanosleep(&(struct timespec){0, 200000000L}, NULL); /* the worker waits for it */
  assert_int_equal(entry_size(dir), early);
  kc_stream_destroy(s); /* the caller's queue: released, not waited for */
  double t0 = kct_now();
  alarm(60); /* a destroy that waits for the launch would never return: ends the test */
  kct_destroy(rt);
  alarm(0);
  double took = kct_now() - t0;
  print_message("kc_runtime_destroy with a first launch not ended: %.0f ms\n", took * 1e3);
  assert_true(took < 5.0); /* it stops a wait for a launch at once, a fetch not started within 1 s */
  assert_int_equal(entry_size(dir), early);
  assert_int_equal(p_clSetUserEventStatus(gate, CL_COMPLETE), CL_SUCCESS);
  assert_int_equal(p_clFinish(q), CL_SUCCESS); /* the launch runs now; its callback comes */
  nanosleep(&(struct timespec){0, 100000000L}, NULL); /* (before the test ends: ASan sees the waiter freed) */
  p_clReleaseEvent(gate);
  p_clReleaseCommandQueue(q);
  kct_rmrf(dir);
  kct_memory_only();
}

/* $KC_OPENCL_LATE_BINARIES=0: the entry keeps the binary its compile
 * made, after launches and the runtime's end, where with 1 (the default,
 * set by main) the same runtime's entry grows. */
static void test_no_late_binary_when_turned_off(void **state) {
  (void)state;
  char dir[4096];
  long early;
  kc_runtime *rt = compile_and_launch(dir, sizeof dir, &early);
  long late = entry_grown(dir, early);
  kct_destroy(rt);
  assert_true(late > early); /* on: the late binary */
  kct_rmrf(dir);
  setenv("KC_OPENCL_LATE_BINARIES", "0", 1);
  kct_destroy(compile_and_launch(dir, sizeof dir, &early));
  setenv("KC_OPENCL_LATE_BINARIES", "1", 1);
  assert_int_equal(entry_size(dir), early); /* off: the first one */
  kct_rmrf(dir);
  kct_memory_only();
}

/* kc_log: keeps the message that says why there are no late binaries (ud: 512 bytes). */
static void keep_no_late(void *ud, kc_log_level level, const char *msg) {
  if (strstr(msg, "no late binaries")) snprintf((char *)ud, 512, "%d %s", (int)level, msg);
}

/* A runtime on a new store (dir) with these compile options and a log
 * kept in seen, which compiles lin with ONE given by them (-DONE=1.0f:
 * they reach the compile) and launches it; the entry's size after the
 * compile in *early. */
static kc_runtime *with_options(char *dir, size_t len, const char *options, char *seen, long *early) {
  kc_options o;
  kc_options_init(&o);
  o.compile_options = options;
  o.log = keep_no_late;
  o.log_ud = seen;
  kc_runtime *rt = store_runtime_with(dir, len, &o);
  compile_lin(rt, dir, "ONE", early);
  return rt;
}

/* Compile options of the compile alone (-D, -I, -w, -Werror) keep the
 * late binaries: a compile then a link builds what clBuildProgram
 * builds. Another option (one the link would have to be given too, as
 * -cl-fast-relaxed-math) turns them off, and the first build says so in
 * the log, once, as a warning where they were asked for. Options that end
 * with a lone -D are refused where the runtime is made (PoCL crashes on
 * them). */
static void test_late_binaries_with_compile_options(void **state) {
  (void)state;
  char dir[4096], seen[512] = "";
  long early;
  kc_runtime *rt = with_options(dir, sizeof dir, "-DONE=1.0f -D ALSO -I / -w", seen, &early);
  long late = entry_grown(dir, early);
  kct_destroy(rt);
  assert_true(late > early);
  assert_string_equal(seen, "");
  kct_rmrf(dir);

  rt = with_options(dir, sizeof dir, "-DONE=1.0f -cl-fast-relaxed-math", seen, &early);
  kct_destroy(rt);
  assert_int_equal(entry_size(dir), early); /* the first binary */
  KCT_CONTAINS(seen,
               "no late binaries (KC_OPENCL_LATE_BINARIES): the compile option \"-cl-fast-relaxed-math\" "
               "names an option of the OpenCL compiler");
  char warn[8];
  snprintf(warn, sizeof warn, "%d ", (int)KC_LOG_WARN);
  assert_true(!strncmp(seen, warn, strlen(warn))); /* asked for ($KC_OPENCL_LATE_BINARIES=1, set by main) */
  kct_rmrf(dir);

  kc_options o;
  kc_options_init(&o);
  o.backend = KC_BACKEND_OPENCL;
  o.compile_options = "-DONE=1.0f -D";
  kc_runtime *bad = NULL;
  assert_int_equal(kc_runtime_create(&o, &bad), KC_EINVAL);
  assert_null(bad);
  KCT_CONTAINS(kc_errmsg(NULL), "end with -D or -I and no argument after it");
  kct_memory_only();
}

/* The default (auto): with PoCL's own cache on (as in this suite) the
 * entry keeps its first binary; with it off ($POCL_KERNEL_CACHE=0) it
 * gets the late one. */
static void test_late_binaries_by_default_follow_pocls_cache(void **state) {
  (void)state;
  char dir[4096];
  long early;
  setenv("KC_OPENCL_LATE_BINARIES", "auto", 1);
  kct_destroy(compile_and_launch(dir, sizeof dir, &early));
  bool kept = entry_size(dir) == early;
  kct_rmrf(dir);
  setenv("POCL_KERNEL_CACHE", "0", 1);
  kc_runtime *rt = compile_and_launch(dir, sizeof dir, &early);
  long late = entry_grown(dir, early);
  kct_destroy(rt);
  setenv("POCL_KERNEL_CACHE", "1", 1);
  setenv("KC_OPENCL_LATE_BINARIES", "1", 1);
  assert_true(kept);
  assert_true(late > early);
  kct_rmrf(dir);
  kct_memory_only();
}

int main(int argc, char **argv) {
  /* before PoCL starts (test_the_entry_gets_the_binary_after_the_first_launch) */
  char pocl[4096];
  if (!kct_pocl_private(pocl, sizeof pocl, false)) return 1;
  setenv("POCL_KERNEL_CACHE", "1", 1); /* on, whatever the caller's */
  int rc = kct_main_only(argc, argv, KC_BACKEND_OPENCL, "OpenCL");
  if (rc >= 0) {
    kct_rmrf(pocl);
    return rc;
  }
  /* builds in this process: a compile helper's build would be a second
   * clBuildProgram here, of its binary, at the first link (test_clhelp) */
  setenv("KC_OPENCL_HELPERS", "0", 1);
  /* the late binaries on (with PoCL's cache on: only when asked), whatever
   * the caller's environment */
  setenv("KC_OPENCL_LATE_BINARIES", "1", 1);
  const struct CMUnitTest tests[] = {
      BOTH(test_compile_and_links_build_once),
      BOTH(test_threads_share_the_build),
      KCT_TEST(test_probe_only_where_a_type_is_not_built_in),
      KCT_TEST(test_a_built_in_name_that_is_not_gets_the_probe),
      KCT_TEST(test_a_disk_hit_and_its_link_build_once),
      KCT_TEST(test_the_entry_gets_the_binary_after_the_first_launch),
      KCT_TEST(test_no_late_binary_when_turned_off),
      KCT_TEST(test_late_binaries_with_compile_options),
      KCT_TEST(test_late_binaries_by_default_follow_pocls_cache),
      KCT_TEST(test_a_first_launch_that_has_not_ended),
  };
  int failed = KCT_RUN(tests);
  kct_rmrf(pocl);
  return failed;
}
