/* SPDX-License-Identifier: MIT */
/*
 * kc_bench -- what kcache costs, measured against the raw thing in the same
 * run. Host backend (the reference backend; see kc_bench_opencl and
 * kc_bench_cuda for the others).
 *
 *   launch      cached kc_launch against a direct call of the same compiled
 *               function (the trampoline dlsym'd from the same artifact),
 *               median ns per launch and ratio, with 0, 1 and 4 arguments
 *   guarded     the same launches in a runtime that guards them
 *               (kc_options.guard_launches: kc_collect may run beside them)
 *   instr       instructions per cached launch over the direct call, from
 *               valgrind --tool=callgrind (skipped if valgrind is missing);
 *               also each side's own count (a call of the benchmark's loop,
 *               the launch and the kernel's grid loop for one work item). The
 *               direct side calls the object's kc__run with packed argv, the
 *               way the engine's generic entry does; kcache's side calls
 *               kc_launch, which ends in the object's kc__launch: both run the
 *               same kc__grid, which checks grid and block.
 *   allocs      heap allocations per cached launch (counting allocator)
 *   revalidate  first launch after an unrelated definition: its extra time,
 *               and the compiles, links and slow-path lookups it caused
 *   redefine    kc_define of a function with one dependent, with 10 and with
 *               N unrelated cached kernels (N = 10000, --quick: 1000)
 *   dependents  cost of a redefinition per dependent code instance
 *   compile     first compile of a small kernel with cc -O2 (and tcc)
 *
 * Usage: kc_bench [--json] [--quick] [--no-callgrind]
 */
#include <kcache.h>

#define KCB_PROG "kc_bench"
#include "kc_bench_util.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>
#include <time.h>
#include <unistd.h>

static kc_runtime *rt;
static kc_context *ctx;
static long n_allocs;

static void *counting_alloc(void *ud, void *p, size_t n) {
  (void)ud;
  if (n == 0) {
    free(p);
    return NULL;
  }
  __atomic_fetch_add(&n_allocs, 1, __ATOMIC_RELAXED);
  return realloc(p, n);
}

/* ------------------------------------------------------------ kernels */

typedef int (*run_fn)(void *l, void *const *argv, const kc_dim3 *grid, const kc_dim3 *block);

typedef struct {
  const char *name, *src;
  int nargs;
  kc_kernel *k;
  kc_args *bound; /* the same arguments, bound once */
  kc_kernel *gk; /* the kernel in the runtime that guards its launches */
  kc_args *gbound;
  kc_arg gargs[4];
  run_fn direct;
  void *dl;
  kc_arg args[4];
  void *argv[4];
} bench_kernel;

static kc_buffer *buf;
static kc_runtime *grt; /* guard_launches */
static kc_context *gctx;
static kc_buffer *gbuf;
static float fa = 1.5f, fc = 2.5f;
static int ib = 3;

static bench_kernel kernels[] = {
    {"k0", "KC_KERNEL void k0(void) { }", 0},
    {"k1", "KC_KERNEL void k1(KC_GLOBAL float *y) { y[kc_global_id(0)] += 1.0f; }", 1},
    {"k4",
     "KC_KERNEL void k4(KC_GLOBAL float *y, float a, int b, float c) { y[kc_global_id(0)] = a * "
     "(float)b + c; }",
     4},
};
#define NK (int)(sizeof kernels / sizeof *kernels)

/* The thread's slot of the direct side's copy (the host prelude's struct
 * kc__tls: the item, the scratch area), where kcache's loader would point
 * it: the object finds it at %fs:0 + kc__it_off. */
static __thread void *direct_item[2];

/* Loads the artifact of k's code a second time, by hand, for the direct
 * call: the very same compiled function, without kcache in between. The
 * artifact is a relocatable object: cc links it into a shared object for
 * dlopen, and the object's kc__it_off is set as kcache's loader sets it. */
static void setup_direct(bench_kernel *b) {
  kc_code_info ci;
  KCB_CHECK(kc_kernel_code(b->k, &ci));
  char obj[256], path[256], helper[256], cmd[1000];
  snprintf(obj, sizeof obj, "/tmp/kc_bench_%d_%s.o", (int)getpid(), b->name);
  snprintf(helper, sizeof helper, "/tmp/kc_bench_%d_%s_off.c", (int)getpid(), b->name);
  snprintf(path, sizeof path, "/tmp/kc_bench_%d_%s.so", (int)getpid(), b->name);
  FILE *f = fopen(obj, "wb");
  if (!f || fwrite(ci.artifact, 1, ci.artifact_size, f) != ci.artifact_size)
    kcb_die("write artifact", KC_EIO);
  fclose(f);
  /* kc__it_off is hidden in the object: a function in the same shared object tells where */
  f = fopen(helper, "w");
  if (!f) kcb_die("write helper", KC_EIO);
  fputs("extern long kc__it_off __attribute__((visibility(\"hidden\")));\n"
        "long *kcb_it_off(void) { return &kc__it_off; }\n",
        f);
  fclose(f);
  snprintf(cmd, sizeof cmd, "cc -shared -fPIC -o %s %s %s", path, obj, helper);
  int rc = system(cmd);
  unlink(obj);
  unlink(helper);
  if (rc != 0) kcb_die("cc -shared of the artifact", KC_ECOMPILE);
  b->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  unlink(path);
  if (!b->dl) kcb_die(dlerror(), KC_ELINK);
  b->direct = (run_fn)(uintptr_t)dlsym(b->dl, "kc__run");
  long *(*it_off_of)(void) = (long *(*)(void))(uintptr_t)dlsym(b->dl, "kcb_it_off");
  if (!b->direct || !it_off_of) kcb_die("dlsym kc__run, kcb_it_off", KC_ELINK);
  long *it_off = it_off_of();
  char *tp;
  __asm__("movq %%fs:0, %0" : "=r"(tp));
  *it_off = (long)((char *)direct_item - tp);
}

static const kc_dim3 one = {1, 1, 1};

/* The objects run under callgrind too, whose CPU has no AVX-512: made for
 * x86-64-v3 (AVX2), not for this machine (-march=native). */
#define KCB_HOST_OPT "-O3 -march=x86-64-v3"

__attribute__((noinline)) void kcb_loop_kc(bench_kernel *b, int n) {
  for (int i = 0; i < n; i++)
    if (kc_launch(b->k, ctx, &one, &one, b->args, (uint32_t)b->nargs)) kcb_die("kc_launch", KC_ELAUNCH);
}

__attribute__((noinline)) void kcb_loop_bound(bench_kernel *b, int n) {
  for (int i = 0; i < n; i++)
    if (kc_launch_args(b->bound, &one, &one)) kcb_die("kc_launch_args", KC_ELAUNCH);
}

__attribute__((noinline)) void kcb_loop_guarded(bench_kernel *b, int n) {
  for (int i = 0; i < n; i++)
    if (kc_launch(b->gk, gctx, &one, &one, b->gargs, (uint32_t)b->nargs)) kcb_die("kc_launch", KC_ELAUNCH);
}

__attribute__((noinline)) void kcb_loop_gbound(bench_kernel *b, int n) {
  for (int i = 0; i < n; i++)
    if (kc_launch_args(b->gbound, &one, &one)) kcb_die("kc_launch_args", KC_ELAUNCH);
}

__attribute__((noinline)) void kcb_loop_direct(bench_kernel *b, int n) {
  for (int i = 0; i < n; i++)
    if (b->direct(NULL, b->argv, &one, &one)) kcb_die("direct call", KC_ELAUNCH);
}

/* The loops that callgrind measures, run only once warm; noinline and
 * exported so that --toggle-collect can name them. */
__attribute__((noinline)) void kcb_measure_kc(bench_kernel *b, int n) { kcb_loop_kc(b, n); }
__attribute__((noinline)) void kcb_measure_bound(bench_kernel *b, int n) { kcb_loop_bound(b, n); }
__attribute__((noinline)) void kcb_measure_guarded(bench_kernel *b, int n) { kcb_loop_guarded(b, n); }
__attribute__((noinline)) void kcb_measure_gbound(bench_kernel *b, int n) { kcb_loop_gbound(b, n); }
__attribute__((noinline)) void kcb_measure_direct(bench_kernel *b, int n) { kcb_loop_direct(b, n); }

enum { MODE_KC, MODE_BOUND, MODE_GUARDED, MODE_GBOUND, MODE_DIRECT, NMODES };
static void (*const mode_loop[NMODES])(bench_kernel *, int) = {kcb_loop_kc, kcb_loop_bound, kcb_loop_guarded,
                                                               kcb_loop_gbound, kcb_loop_direct};
static void (*const mode_measure[NMODES])(bench_kernel *, int) = {
    kcb_measure_kc, kcb_measure_bound, kcb_measure_guarded, kcb_measure_gbound, kcb_measure_direct};
static const char *const mode_fn[NMODES] = {"kcb_measure_kc", "kcb_measure_bound", "kcb_measure_guarded",
                                            "kcb_measure_gbound", "kcb_measure_direct"};
static const char *const mode_json[MODE_DIRECT] = {"kc_launch", "kc_launch_args", "kc_launch_guarded",
                                                   "kc_launch_args_guarded"};

static void setup(void) {
  kc_options o;
  kcb_options_uncached(&o, KC_BACKEND_HOST);
  o.alloc = counting_alloc;
  o.host_opt = KCB_HOST_OPT;
  rt = kcb_main_runtime(&o, &ctx);
  KCB_CHECK(kc_buffer_create(ctx, 1024, &buf));
  kc_options g;
  kcb_options_uncached(&g, KC_BACKEND_HOST);
  g.guard_launches = 1;
  g.host_opt = KCB_HOST_OPT;
  KCB_CHECK(kc_runtime_create(&g, &grt));
  KCB_CHECK(kc_context_create(grt, 0, &gctx));
  KCB_CHECK(kc_buffer_create(gctx, 1024, &gbuf));
  for (int i = 0; i < NK; i++) {
    bench_kernel *b = &kernels[i];
    KCB_CHECK(kc_define(rt, b->name, b->src, NULL));
    KCB_CHECK(kc_kernel_create(rt, b->name, NULL, &b->k));
    kc_arg all[4] = {KC_ARG_BUF(buf), KC_ARG_VAL(fa), KC_ARG_VAL(ib), KC_ARG_VAL(fc)};
    memcpy(b->args, all, sizeof all);
    /* what a direct caller passes: pointers to the values */
    b->argv[0] = buf; /* kc_buffer's first member is the backend handle */
    b->argv[1] = &fa;
    b->argv[2] = &ib;
    b->argv[3] = &fc;
    kcb_loop_kc(b, 1); /* compile and link */
    KCB_CHECK(kc_args_create(b->k, ctx, b->args, (uint32_t)b->nargs, &b->bound));
    kcb_loop_bound(b, 1);
    KCB_CHECK(kc_define(grt, b->name, b->src, NULL));
    KCB_CHECK(kc_kernel_create(grt, b->name, NULL, &b->gk));
    memcpy(b->gargs, b->args, sizeof b->gargs);
    b->gargs[0] = KC_ARG_BUF(gbuf);
    kcb_loop_guarded(b, 1);
    KCB_CHECK(kc_args_create(b->gk, gctx, b->gargs, (uint32_t)b->nargs, &b->gbound));
    kcb_loop_gbound(b, 1);
    setup_direct(b);
  }
}

/* ------------------------------------------------------------ callgrind */

static long callgrind_total(const char *self, const char *fn, const char *which) {
  char out[256], cmd[1024];
  snprintf(out, sizeof out, "/tmp/kc_bench_cg_%d_%s.out", (int)getpid(), which);
  snprintf(cmd, sizeof cmd,
           "valgrind --tool=callgrind --callgrind-out-file=%s --toggle-collect=%s %s --child %s "
           ">/dev/null 2>&1",
           out, fn, self, which);
  if (system(cmd) != 0) return -1;
  FILE *f = fopen(out, "r");
  if (!f) return -1;
  char line[512];
  long total = -1;
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, "summary:", 8) || !strncmp(line, "totals:", 7)) total = atol(strchr(line, ':') + 1);
  fclose(f);
  unlink(out);
  return total;
}

enum { CG_ITERS = 10000 };

/* Under callgrind: one loop of CG_ITERS launches of kernel i in mode m
 * (argument "m:i"). */
static int child(const char *which) {
  int m = -1, i = -1;
  if (sscanf(which, "%d:%d", &m, &i) != 2 || m < 0 || m >= NMODES || i < 0 || i >= NK) {
    fprintf(stderr, "kc_bench --child: bad argument '%s'\n", which);
    return 2;
  }
  setup();
  bench_kernel *b = &kernels[i];
  for (int j = 0; j < NMODES; j++) mode_loop[j](b, 3);
  mode_measure[m](b, CG_ITERS);
  return 0;
}

/* ----------------------------------------------------------------- main */

typedef struct {
  double ns[NMODES][NK];
  double instr[NMODES][NK]; /* per launch, callgrind; -1 when not measured */
  double allocs_per_launch;
  double revalidate_ns;
  long revalidate_compiles, revalidate_links, revalidate_slow;
  double redefine_small_ns, redefine_large_ns;
  int small_n, large_n;
  double per_dependent_ns;
  int dependents;
  double compile_cc_ms, compile_tcc_ms;
} results;

/* Instructions per launch in mode m over the direct call; -1 if unknown. */
static double extra_instr(const results *r, int m, int i) {
  return r->instr[m][i] >= 0 && r->instr[MODE_DIRECT][i] >= 0 ? r->instr[m][i] - r->instr[MODE_DIRECT][i]
                                                              : -1;
}

static void bench_launch(results *r) {
  enum { BATCH = 1000, ROUNDS = 201 };
  static double t[NMODES][ROUNDS];
  for (int i = 0; i < NK; i++) {
    bench_kernel *b = &kernels[i];
    for (int w = 0; w < 20; w++)
      for (int m = 0; m < NMODES; m++) mode_loop[m](b, BATCH);
    for (int j = 0; j < ROUNDS; j++) /* interleaved: drift hits every mode alike */
      for (int m = 0; m < NMODES; m++) {
        double t0 = now_ns();
        mode_loop[m](b, BATCH);
        t[m][j] = (now_ns() - t0) / BATCH;
      }
    for (int m = 0; m < NMODES; m++) r->ns[m][i] = median(t[m], ROUNDS);
  }
  long a0 = n_allocs;
  kcb_loop_kc(&kernels[2], 100000);
  kcb_loop_bound(&kernels[2], 100000);
  r->allocs_per_launch = (double)(n_allocs - a0) / 200000;
}

static void bench_revalidate(results *r) {
  enum { REPS = 301 };
  static double t[REPS];
  kc_stats s0, s1;
  kc_stats_get(rt, &s0);
  bench_kernel *b = &kernels[0];
  char src[128];
  for (int i = 0; i < REPS; i++) {
    snprintf(src, sizeof src, "KC_DEVICE int unrelated(void) { return %d; }", i);
    KCB_CHECK(kc_define(rt, "unrelated", src, NULL));
    double t0 = now_ns();
    kcb_loop_kc(b, 1); /* the same code instance and linked object serve it */
    double t1 = now_ns();
    kcb_loop_kc(b, 1); /* fast path again */
    double t2 = now_ns();
    t[i] = (t1 - t0) - (t2 - t1); /* the extra cost of the first launch */
  }
  kc_stats_get(rt, &s1);
  r->revalidate_ns = median(t, REPS);
  r->revalidate_compiles = (long)(s1.compiles - s0.compiles);
  r->revalidate_links = (long)(s1.links - s0.links);
  r->revalidate_slow = (long)(s1.slow_lookups - s0.slow_lookups);
}

/* Compiles n unrelated kernels on two threads (they compile in parallel). */
typedef struct {
  kc_runtime *rt;
  int from, to;
} fill_job;

static int fill_thread(void *arg) {
  fill_job *j = arg;
  char name[64], src[256];
  for (int i = j->from; i < j->to; i++) {
    snprintf(name, sizeof name, "u%d", i);
    snprintf(src, sizeof src, "KC_KERNEL void u%d(KC_GLOBAL int *y) { y[kc_global_id(0)] = %d; }", i, i);
    kc_kernel *k;
    if (kc_define(j->rt, name, src, NULL) || kc_kernel_create(j->rt, name, NULL, &k) ||
        kc_kernel_compile(k)) {
      fprintf(stderr, "kc_bench: filling the cache: %s\n", kc_errmsg(j->rt));
      return 1;
    }
    kc_kernel_destroy(k);
  }
  return 0;
}

/* Median cost of redefining h (one dependent, recompiled each time) in a
 * runtime that holds `unrelated` other cached kernels. */
static double redefine_cost(int unrelated) {
  kc_runtime *r = kcb_host_runtime_fast(); /* fast compiles to fill the cache */
  fill_job jobs[2] = {{r, 0, unrelated / 2}, {r, unrelated / 2, unrelated}};
  thrd_t th[2];
  for (int i = 0; i < 2; i++) thrd_create(&th[i], fill_thread, &jobs[i]);
  for (int i = 0; i < 2; i++) {
    int rc;
    thrd_join(th[i], &rc);
    if (rc) exit(1);
  }
  double t;
  kcb_time_redefine(r, 31, &t, NULL);
  kc_runtime_destroy(r);
  return t;
}

static double per_dependent(int n) {
  kc_runtime *r = kcb_host_runtime_fast();
  KCB_CHECK(kc_define(r, "h", "KC_DEVICE int h(int x) { return x; }", NULL));
  char name[64], src[256];
  for (int i = 0; i < n; i++) {
    snprintf(name, sizeof name, "d%d", i);
    snprintf(src, sizeof src, "KC_KERNEL void d%d(KC_GLOBAL int *y) { y[0] = h(%d); }", i, i);
    kc_kernel *k;
    KCB_CHECK(kc_define(r, name, src, NULL));
    KCB_CHECK(kc_kernel_create(r, name, NULL, &k));
    KCB_CHECK(kc_kernel_compile(k));
    kc_kernel_destroy(k);
  }
  kc_stats s0, s1;
  kc_stats_get(r, &s0);
  double t0 = now_ns();
  KCB_CHECK(kc_define(r, "h", "KC_DEVICE int h(int x) { return -x; }", NULL));
  double t = now_ns() - t0;
  kc_stats_get(r, &s1);
  if ((int)(s1.invalidations - s0.invalidations) != n) {
    fprintf(stderr, "kc_bench: expected %d invalidations, got %llu\n", n,
            (unsigned long long)(s1.invalidations - s0.invalidations));
    exit(1);
  }
  kc_runtime_destroy(r);
  return t / n;
}

static double compile_ms(const char *cc) {
  kc_options o;
  kcb_options_uncached(&o, KC_BACKEND_HOST);
  o.host_cc = cc;
  kc_runtime *r;
  if (kc_runtime_create(&o, &r)) return -1;
  enum { REPS = 9 };
  double t[REPS];
  char src[256];
  for (int i = 0; i < REPS; i++) {
    snprintf(src, sizeof src,
             "KC_KERNEL void saxpy(KC_GLOBAL float *y, KC_GLOBAL const float *x, float a) { size_t i "
             "= kc_global_id(0); y[i] = a * x[i] + y[i] + %d; }",
             i);
    KCB_CHECK(kc_define(r, "saxpy", src, NULL));
    kc_kernel *k;
    KCB_CHECK(kc_kernel_create(r, "saxpy", NULL, &k));
    kc_code_info ci;
    KCB_CHECK(kc_kernel_code(k, &ci));
    t[i] = ci.compile_ns / 1e6;
    kc_kernel_destroy(k);
  }
  kc_runtime_destroy(r);
  return median(t, REPS);
}

int main(int argc, char **argv) {
  bool json = false, quick = false, cg = true;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) json = true;
    else if (!strcmp(argv[i], "--quick")) quick = true;
    else if (!strcmp(argv[i], "--no-callgrind")) cg = false;
    else if (!strcmp(argv[i], "--child") && i + 1 < argc) return child(argv[i + 1]);
    else {
      fprintf(stderr, "usage: %s [--json] [--quick] [--no-callgrind]\n", argv[0]);
      return 2;
    }
  }
  results r = {0};
  setup();
  bench_launch(&r);
  bench_revalidate(&r);
  if (cg && system("valgrind --version >/dev/null 2>&1") == 0) {
    for (int m = 0; m < NMODES; m++)
      for (int i = 0; i < NK; i++) {
        char a[16];
        snprintf(a, sizeof a, "%d:%d", m, i);
        long n = callgrind_total(argv[0], mode_fn[m], a);
        r.instr[m][i] = n > 0 ? (double)n / CG_ITERS : -1;
      }
  } else {
    for (int m = 0; m < NMODES; m++)
      for (int i = 0; i < NK; i++) r.instr[m][i] = -1;
  }
  r.small_n = 10;
  r.large_n = quick ? 1000 : 10000;
  r.redefine_small_ns = redefine_cost(r.small_n);
  r.redefine_large_ns = redefine_cost(r.large_n);
  r.dependents = quick ? 200 : 1000;
  r.per_dependent_ns = per_dependent(r.dependents);
  r.compile_cc_ms = compile_ms("cc");
  r.compile_tcc_ms = access("/usr/bin/tcc", X_OK) == 0 ? compile_ms("tcc") : -1;

  if (json) {
    printf("{\"backend\":\"host\",\"launch\":[");
    for (int i = 0; i < NK; i++) {
      printf("%s{\"args\":%d,\"direct_ns\":%.2f,\"direct_instructions\":%.1f", i ? "," : "", kernels[i].nargs,
             r.ns[MODE_DIRECT][i], r.instr[MODE_DIRECT][i]);
      for (int m = 0; m < MODE_DIRECT; m++)
        printf(",\"%s\":{\"ns\":%.2f,\"ratio\":%.3f,\"extra_ns\":%.2f,\"instructions\":%.1f,"
               "\"extra_instructions\":%.1f}",
               mode_json[m], r.ns[m][i], r.ns[m][i] / r.ns[MODE_DIRECT][i], r.ns[m][i] - r.ns[MODE_DIRECT][i],
               r.instr[m][i], extra_instr(&r, m, i));
      printf("}");
    }
    printf(
        "],\"allocs_per_launch\":%.4f,\"revalidate_ns\":%.1f,\"revalidate_compiles\":%ld,"
        "\"revalidate_links\":%ld,\"revalidate_slow_lookups\":%ld,\"redefine_ns\":{\"%d\":%.1f,\"%d\":%.1f},"
        "\"per_dependent_ns\":%.1f,\"dependents\":%d,\"compile_ms\":{\"cc\":%.2f,\"tcc\":%.2f}}\n",
        r.allocs_per_launch, r.revalidate_ns, r.revalidate_compiles, r.revalidate_links, r.revalidate_slow,
        r.small_n, r.redefine_small_ns, r.large_n, r.redefine_large_ns, r.per_dependent_ns, r.dependents,
        r.compile_cc_ms, r.compile_tcc_ms);
    return 0;
  }
  printf("kcache %s benchmark, host backend (medians; ratios from the same run)\n\n", kc_version());
  static const char *const rows[NK] = {"  0 arguments", "  1 argument (buffer)", "  4 arguments"};
  printf("cached launch, grid 1x1: kc_launch (arguments checked at each launch) and\n"
         "kc_launch_args (arguments bound once) against a direct call of kc__run\n");
  printf("%-22s %9s %9s %7s %8s %9s %7s %8s\n", "median ns", "direct", "kc_launch", "ratio", "extra",
         "..._args", "ratio", "extra");
  for (int i = 0; i < NK; i++)
    printf("%-22s %9.2f %9.2f %7.3f %8.2f %9.2f %7.3f %8.2f\n", rows[i], r.ns[MODE_DIRECT][i],
           r.ns[MODE_KC][i], r.ns[MODE_KC][i] / r.ns[MODE_DIRECT][i], r.ns[MODE_KC][i] - r.ns[MODE_DIRECT][i],
           r.ns[MODE_BOUND][i], r.ns[MODE_BOUND][i] / r.ns[MODE_DIRECT][i],
           r.ns[MODE_BOUND][i] - r.ns[MODE_DIRECT][i]);
  printf("%-22s %9s %9s %7s %8s %9s %7s %8s\n", "instructions", "direct", "kc_launch", "", "extra",
         "..._args", "", "extra");
  for (int i = 0; i < NK; i++)
    printf("%-22s %9.1f %9.1f %7s %8.1f %9.1f %7s %8.1f\n", rows[i], r.instr[MODE_DIRECT][i],
           r.instr[MODE_KC][i], "", extra_instr(&r, MODE_KC, i), r.instr[MODE_BOUND][i], "",
           extra_instr(&r, MODE_BOUND, i));
  printf("in a runtime that guards its launches (kc_options.guard_launches)\n");
  for (int i = 0; i < NK; i++)
    printf("%-22s %9.2f %9.2f %7.3f %8.2f %9.2f %7.3f %8.2f\n", rows[i], r.ns[MODE_DIRECT][i],
           r.ns[MODE_GUARDED][i], r.ns[MODE_GUARDED][i] / r.ns[MODE_DIRECT][i],
           r.ns[MODE_GUARDED][i] - r.ns[MODE_DIRECT][i], r.ns[MODE_GBOUND][i],
           r.ns[MODE_GBOUND][i] / r.ns[MODE_DIRECT][i], r.ns[MODE_GBOUND][i] - r.ns[MODE_DIRECT][i]);
  for (int i = 0; i < NK; i++)
    printf("%-22s %9.1f %9.1f %7s %8.1f %9.1f %7s %8.1f\n", rows[i], r.instr[MODE_DIRECT][i],
           r.instr[MODE_GUARDED][i], "", extra_instr(&r, MODE_GUARDED, i), r.instr[MODE_GBOUND][i], "",
           extra_instr(&r, MODE_GBOUND, i));
  printf("%-34s %10.4f\n", "heap allocations per cached launch", r.allocs_per_launch);
  printf("%-34s %10.1f ns  (compiles %ld, links %ld, slow-path lookups %ld)\n",
         "revalidation after unrelated define", r.revalidate_ns, r.revalidate_compiles, r.revalidate_links,
         r.revalidate_slow);
  printf("%-34s %10.1f ns with %d cached kernels\n", "redefinition, one dependent", r.redefine_small_ns,
         r.small_n);
  printf("%-34s %10.1f ns with %d cached kernels (ratio %.2f)\n", "", r.redefine_large_ns, r.large_n,
         r.redefine_large_ns / r.redefine_small_ns);
  printf("%-34s %10.1f ns (%d dependents)\n", "redefinition cost per dependent", r.per_dependent_ns,
         r.dependents);
  printf("%-34s %10.2f ms (cc, the host default: -O3 -march=native)", "compile of a small kernel",
         r.compile_cc_ms);
  if (r.compile_tcc_ms >= 0) printf(", %.2f ms (tcc)", r.compile_tcc_ms);
  printf("\n");
  return 0;
}
