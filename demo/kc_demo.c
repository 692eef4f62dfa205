/* SPDX-License-Identifier: MIT */
/*
 * kc_demo -- walks through what kcache does, on the default backend, and
 * checks every result and every counter on the way. Exit status 0 only if
 * every step behaved as printed.
 *
 *   define -> first launch (compile) -> cached launch -> unrelated definition
 *   (no recompile) -> callee redefinition (only dependents recompile) ->
 *   a pinned thread still gets the old result -> context reset (relink, no
 *   recompile) -> a second runtime (as a new process would) loads the
 *   kernels from the disk cache without compiling
 *
 * The demo uses a private, empty cache directory so its first compiles are
 * real on every run; it is removed at the end, unless `kc_demo --keep`.
 */
#include <kcache.h>

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include <threads.h>
#include <time.h>

#define N 16

static kc_runtime *rt;
static kc_context *ctx;
static int failures;

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void die(const char *what, kc_status st) {
  fprintf(stderr, "kc_demo: %s failed: %s\n%s\n", what, kc_status_name(st), kc_errmsg(rt));
  exit(1);
}
#define CHECK(call) \
  do { \
    kc_status st_ = (call); \
    if (st_) die(#call, st_); \
  } while (0)

static void expect(int ok, const char *what) {
  printf("    %s %s\n", ok ? "ok  " : "FAIL", what);
  if (!ok) failures++;
}

static kc_stats snap(void) {
  kc_stats s;
  kc_stats_get(rt, &s);
  return s;
}

static void print_counters(const kc_stats *s) {
  printf("    counters: world=%llu compiles=%llu links=%llu fast_hits=%llu slow_lookups=%llu "
         "invalidations=%llu\n",
         (unsigned long long)s->world, (unsigned long long)s->compiles, (unsigned long long)s->links,
         (unsigned long long)s->fast_hits, (unsigned long long)s->slow_lookups,
         (unsigned long long)s->invalidations);
}

/* Launches kern over N items writing into buf and returns element 0 (all
 * elements are checked to agree with it, plus their index). */
static float run(kc_kernel *kern, kc_buffer *buf, double *us) {
  float x = 1.0f;
  kc_arg args[] = {KC_ARG_BUF(buf), KC_ARG_VAL(x)};
  double t0 = now_us();
  CHECK(kc_launch(kern, ctx, &(kc_dim3){N / 4, 1, 1}, &(kc_dim3){4, 1, 1}, args, 2));
  if (us) *us = now_us() - t0;
  CHECK(kc_context_finish(ctx));
  float out[N];
  CHECK(kc_buffer_read(buf, 0, out, sizeof out));
  for (int i = 1; i < N; i++)
    if (out[i] - out[0] != (float)i) {
      printf("    FAIL element %d = %g, element 0 = %g\n", i, out[i], out[0]);
      failures++;
    }
  return out[0];
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

typedef struct {
  kc_kernel *kern;
  kc_buffer *buf;
  float result;
  kc_world pinned;
  mtx_t m;
  cnd_t c;
  int stage; /* 0 start, 1 pinned, 2 main redefined, 3 done */
} pin_job;

static int pinned_thread(void *arg) {
  pin_job *j = arg;
  kc_pin(rt, &j->pinned);
  mtx_lock(&j->m);
  j->stage = 1;
  cnd_broadcast(&j->c);
  while (j->stage < 2) cnd_wait(&j->c, &j->m);
  mtx_unlock(&j->m);
  j->result = run(j->kern, j->buf, NULL); /* after the main thread redefined h */
  kc_unpin(rt);
  mtx_lock(&j->m);
  j->stage = 3;
  cnd_broadcast(&j->c);
  mtx_unlock(&j->m);
  return 0;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  return remove(path);
}

int main(int argc, char **argv) {
  /* --keep: leave the disk cache in place for `kcache ls` (scripts/demo.sh) */
  int keep = argc == 2 && !strcmp(argv[1], "--keep");
  if (argc > 2 || (argc == 2 && !keep)) {
    fprintf(stderr, "usage: kc_demo [--keep]\n");
    return 2;
  }
  char cache_dir[] = "/tmp/kc_demo_cache_XXXXXX";
  if (!mkdtemp(cache_dir)) {
    perror("kc_demo: mkdtemp");
    return 1;
  }
  kc_options opt;
  kc_options_init(&opt);
  opt.cache_dir = cache_dir;
  kc_status st = kc_runtime_create(&opt, &rt);
  if (st) {
    fprintf(stderr, "kc_demo: no runtime: %s: %s\n", kc_status_name(st), kc_errmsg(NULL));
    return 1;
  }
  printf("kcache %s demo on the %s backend, device: %s\ndisk cache: %s\n\n", kc_version(),
         kc_runtime_backend(rt), kc_device_name(rt, 0), kc_cache_dir(rt) ? kc_cache_dir(rt) : "off");
  CHECK(kc_context_create(rt, 0, &ctx));
  kc_buffer *buf, *buf2, *buf3;
  CHECK(kc_buffer_create(ctx, N * sizeof(float), &buf));
  CHECK(kc_buffer_create(ctx, N * sizeof(float), &buf2));
  CHECK(kc_buffer_create(ctx, N * sizeof(float), &buf3));

  printf("1. define h, k (calls h) and k2 (does not)\n");
  kc_world w;
  CHECK(kc_define(rt, "h", "KC_DEVICE float h(float x) { return 10.0f * x; }", &w));
  CHECK(kc_define(rt, "k",
                  "KC_KERNEL void k(KC_GLOBAL float *out, float x) {\n"
                  "  size_t i = kc_global_id(0);\n"
                  "  out[i] = h(x) + (float)i;\n"
                  "}",
                  &w));
  CHECK(kc_define(rt, "k2",
                  "KC_KERNEL void k2(KC_GLOBAL float *out, float x) { size_t i = kc_global_id(0); "
                  "out[i] = x + (float)i; }",
                  &w));
  printf("    world is now %llu\n", (unsigned long long)w);
  kc_kernel *k, *k2;
  CHECK(kc_kernel_create(rt, "k", NULL, &k));
  CHECK(kc_kernel_create(rt, "k2", NULL, &k2));

  printf("2. first launch of k and k2: compile\n");
  double us, us2;
  float r = run(k, buf, &us);
  run(k2, buf2, &us2);
  kc_stats s = snap();
  printf("    k -> %g in %.0f us (compile + link + launch), k2 in %.0f us\n", r, us, us2);
  print_counters(&s);
  expect(r == 10.0f, "k computes h(1) = 10");
  expect(s.compiles == 2 && s.links == 2, "two compiles, two links");

  printf("3. cached launches: the fast path\n");
  enum { REPS = 2001 };
  static double t[REPS];
  float x = 1.0f;
  kc_arg args[] = {KC_ARG_BUF(buf), KC_ARG_VAL(x)};
  kc_stats before = snap();
  for (int i = 0; i < REPS; i++) {
    double t0 = now_us();
    CHECK(kc_launch(k, ctx, &(kc_dim3){N / 4, 1, 1}, &(kc_dim3){4, 1, 1}, args, 2));
    t[i] = now_us() - t0;
  }
  CHECK(kc_context_finish(ctx));
  qsort(t, REPS, sizeof *t, cmp_double);
  s = snap();
  printf("    %d launches, median %.2f us each (host time to submit; on the host backend it includes running "
         "the kernel)\n",
         REPS, t[REPS / 2]);
  print_counters(&s);
  expect(s.compiles == before.compiles && s.links == before.links, "no compile, no link");
  expect(s.fast_hits - before.fast_hits == REPS && s.slow_lookups == before.slow_lookups,
         "every launch was a fast-path hit");
  /* the same arguments bound once: checked and copied now, not per launch */
  kc_args *bound;
  CHECK(kc_args_create(k, ctx, args, 2, &bound));
  CHECK(kc_launch_args(bound, &(kc_dim3){N / 4, 1, 1}, &(kc_dim3){4, 1, 1})); /* caches the link */
  before = snap();
  for (int i = 0; i < REPS; i++) {
    double t0 = now_us();
    CHECK(kc_launch_args(bound, &(kc_dim3){N / 4, 1, 1}, &(kc_dim3){4, 1, 1}));
    t[i] = now_us() - t0;
  }
  CHECK(kc_context_finish(ctx));
  qsort(t, REPS, sizeof *t, cmp_double);
  s = snap();
  printf("    the same with the arguments bound once (kc_launch_args): median %.2f us each\n", t[REPS / 2]);
  print_counters(&s);
  expect(s.compiles == before.compiles && s.links == before.links && s.fast_hits - before.fast_hits == REPS &&
             s.slow_lookups == before.slow_lookups,
         "every bound launch was a fast-path hit, with no compile and no link");
  kc_args_destroy(bound);

  printf("4. define an unrelated function g\n");
  CHECK(kc_define(rt, "g", "KC_DEVICE int g(int a) { return a + 1; }", &w));
  before = snap();
  r = run(k, buf, &us);
  run(k, buf, &us2);
  s = snap();
  printf("    world %llu; k -> %g, first launch %.2f us, next %.2f us\n", (unsigned long long)w, r, us, us2);
  print_counters(&s);
  expect(r == 10.0f, "same result");
  expect(s.compiles == before.compiles && s.links == before.links, "no recompile, no relink");
  expect(s.slow_lookups == before.slow_lookups && s.fast_hits - before.fast_hits == 2,
         "both launches on the fast path: k's code is still valid in the new world");

  printf("5. pin a thread at the current world, then redefine h on the main thread\n");
  pin_job job = {.kern = k, .buf = buf3};
  mtx_init(&job.m, mtx_plain);
  cnd_init(&job.c);
  thrd_t th;
  thrd_create(&th, pinned_thread, &job);
  mtx_lock(&job.m);
  while (job.stage < 1) cnd_wait(&job.c, &job.m);
  mtx_unlock(&job.m);
  before = snap();
  double t0 = now_us();
  CHECK(kc_define(rt, "h", "KC_DEVICE float h(float x) { return 20.0f * x; }", &w));
  double def_us = now_us() - t0;
  r = run(k, buf, &us);
  float r2 = run(k2, buf2, NULL);
  s = snap();
  printf("    redefinition took %.1f us, world %llu; k -> %g (recompiled in %.0f us), k2 -> %g\n", def_us,
         (unsigned long long)w, r, us, r2);
  print_counters(&s);
  expect(r == 20.0f, "k sees the new h");
  expect(s.invalidations - before.invalidations == 1, "exactly one code instance invalidated (k)");
  expect(s.compiles - before.compiles == 1, "only k recompiled, k2 kept its code");
  mtx_lock(&job.m);
  job.stage = 2;
  cnd_broadcast(&job.c);
  while (job.stage < 3) cnd_wait(&job.c, &job.m);
  mtx_unlock(&job.m);
  thrd_join(th, NULL);
  printf("    the thread pinned at world %llu launched k after the redefinition -> %g\n",
         (unsigned long long)job.pinned, job.result);
  expect(job.result == 10.0f, "the pinned thread still sees the old h");
  expect(snap().compiles == s.compiles, "and its old code was still cached: no compile");

  printf("6. reset the context (like a device reset)\n");
  before = snap();
  CHECK(kc_context_reset(ctx));
  r = run(k, buf, &us);
  s = snap();
  printf("    k -> %g, first launch after reset %.0f us (relink from the stored artifact)\n", r, us);
  print_counters(&s);
  expect(r == 20.0f, "same result");
  expect(s.links - before.links == 1 && s.compiles == before.compiles, "relinked, not recompiled");

  printf("7. a second runtime on the same disk cache (what a new process sees)\n");
  kc_runtime *first = rt;
  CHECK(kc_runtime_create(&opt, &rt));
  kc_context *first_ctx = ctx;
  CHECK(kc_context_create(rt, 0, &ctx));
  kc_buffer *buf4;
  CHECK(kc_buffer_create(ctx, N * sizeof(float), &buf4));
  CHECK(kc_define(rt, "h", "KC_DEVICE float h(float x) { return 20.0f * x; }", NULL));
  CHECK(kc_define(rt, "k",
                  "KC_KERNEL void k(KC_GLOBAL float *out, float x) {\n"
                  "  size_t i = kc_global_id(0);\n"
                  "  out[i] = h(x) + (float)i;\n"
                  "}",
                  NULL));
  kc_kernel *kk;
  CHECK(kc_kernel_create(rt, "k", NULL, &kk));
  r = run(kk, buf4, &us);
  s = snap();
  printf("    k -> %g, first launch %.0f us; disk: hits=%llu writes=%llu; compiles=%llu\n", r, us,
         (unsigned long long)s.disk_hits, (unsigned long long)s.disk_writes, (unsigned long long)s.compiles);
  expect(r == 20.0f, "same result");
  expect(s.compiles == 0 && s.disk_hits == 1, "loaded from disk, not compiled");
  kc_kernel_destroy(kk);
  kc_runtime_destroy(rt);
  rt = first;
  ctx = first_ctx;

  kc_code_info ci;
  CHECK(kc_kernel_code(k, &ci));
  printf("\nk's code instance %llu is valid from world %llu to %s; artifact %zu bytes, compiled in "
         "%.1f ms\n",
         (unsigned long long)ci.id, (unsigned long long)ci.min_world,
         ci.max_world == KC_WORLD_FOREVER ? "forever" : "a finite world", ci.artifact_size,
         ci.compile_ns / 1e6);
  mtx_destroy(&job.m);
  cnd_destroy(&job.c);
  kc_kernel_destroy(k);
  kc_kernel_destroy(k2);
  kc_runtime_destroy(rt);
  if (keep) printf("\ndisk cache kept in %s\n", cache_dir);
  else nftw(cache_dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
  printf("%s\n", failures ? "\nkc_demo: SOME CHECKS FAILED" : "\nkc_demo: all checks passed");
  return failures ? 1 : 0;
}
