/* SPDX-License-Identifier: MIT */
/*
 * kc_bench_store -- what the disk cache saves, per backend that runs here.
 *
 *   first launch   a new process runs a typical kernel once: the time of
 *                  its first kc_launch (+ finish), which resolves, compiles
 *                  or loads, links and runs, with a cold store (empty
 *                  directory) and a warm one (what the cold run wrote); the
 *                  ratio is what the store saves (targets: host with cc -O2
 *                  10x, OpenCL and CUDA 20x)
 *   process        the same processes from main() to the first result
 *                  (runtime and context creation included), for context
 *   disk hit       in one process with the compiler identity and the probe
 *                  context already up: kc_kernel_compile of the typical
 *                  kernel from a warm store (key, read, verify checksums,
 *                  test-load by the backend; target < 2 ms), and the first
 *                  launch after it (the link into the context)
 *
 * Each measurement is a median over --runs runs (default 7; --quick 3).
 * Caches other than kcache's are off in the child processes (PoCL's kernel
 * cache, CUDA's JIT cache), so that "cold" is cold.
 *
 * Usage: kc_bench_store [--json] [--quick] [--runs N]
 *                       [--backend host|tcc|opencl|opencl+pocl|opencl+poclwarm|cuda]
 *
 * With --scale [--entries N] [--cli PATH], instead: the store's own costs
 * at N entries (100,000 unless told): writes past the bound, lookups,
 * `kcache stats` and `kcache show KEY` (kc_bench_store_scale.c).
 */
#include <kcache.h>

#define KCB_PROG "kc_bench_store"
#include "kc_bench_util.h"

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The backends measured: a name, the kind, and the host compiler. */
typedef struct bconf {
  const char *label; /* "host", "tcc", "opencl", "cuda" */
  kc_backend_kind kind;
  const char *cc; /* host only */
  const char *compiler; /* for the table */
  double target; /* first-launch speedup to reach */
  bool platform_cache; /* let the platform keep its own cache (PoCL's), fresh per run */
  bool platform_warm; /* ... kept across runs, filled before them: only kcache's store is cold */
} bconf;

static const bconf confs[] = {
    {"host", KC_BACKEND_HOST, "cc", "cc -O2", 10},
    {"tcc", KC_BACKEND_HOST, "tcc", "tcc", 0},
    {"opencl", KC_BACKEND_OPENCL, NULL, "OpenCL", 20},
    /* The same machine with PoCL's own kernel cache on (its default): the
     * cold run starts from an empty PoCL cache, the warm run finds what the
     * cold run left there, as a second process on one machine would. */
    {"opencl+pocl", KC_BACKEND_OPENCL, NULL, "OpenCL", 20, true},
    /* PoCL's cache on and already holding the kernel (filled by a run
     * before the measured ones): a cold kcache store on a machine where PoCL
     * has built this source before (a store cleared or new, a memory-only
     * runtime's next process). Its speedup has no target: PoCL's cache
     * does most of the work. */
    {"opencl+poclwarm", KC_BACKEND_OPENCL, NULL, "OpenCL", 0, true, true},
    {"cuda", KC_BACKEND_CUDA, NULL, "NVRTC", 20},
};

static const bconf *conf_named(const char *label) {
  for (size_t i = 0; i < sizeof confs / sizeof *confs; i++)
    if (!strcmp(confs[i].label, label)) return &confs[i];
  return NULL;
}

/* A session of the typical kernel (kc_bench_util.h) on a runtime of c with
 * its store in dir. */
static bool session_open(kcb_session *s, const bconf *c, const char *dir) {
  kc_options o;
  kcb_options_store(&o, c->kind, c->cc, dir);
  return kcb_session_open(s, kcb_runtime(&o, c->label), false);
}

/* --child LABEL DIR: one first launch; prints "first_ns total_ns compiles disk_hits". */
static int child(const char *label, const char *dir) {
  double t0 = now_ns();
  const bconf *c = conf_named(label);
  kcb_session s;
  if (!c || !session_open(&s, c, dir)) return 1;
  double t1 = now_ns();
  kc_status st = kcb_session_launch(&s, s.k);
  double t2 = now_ns();
  if (st) {
    fprintf(stderr, "kc_bench_store: first launch: %s: %s\n", kc_status_name(st), kc_errmsg(s.rt));
    return 1;
  }
  if (kcb_session_check(&s, 0)) return 1;
  kc_stats k;
  kc_stats_get(s.rt, &k);
  printf("%.0f %.0f %llu %llu\n", t2 - t1, t2 - t0, (unsigned long long)k.compiles,
         (unsigned long long)k.disk_hits);
  kcb_session_close(&s);
  return 0;
}

/* Runs a child process; fills first and total (ns) and the counters.
 * pocl: PoCL's cache directory for a conf with platform_warm. */
static bool run_child(const char *self, const char *label, const char *dir, const char *pocl_warm,
                      double *first, double *total, double *process, unsigned long long *compiles,
                      unsigned long long *hits) {
  double t0;
  int fd;
  pid_t pid = kcb_fork_piped(&fd, &t0);
  if (pid < 0) return false;
  if (pid == 0) {
    const bconf *c = conf_named(label);
    char pocl[4200];
    snprintf(pocl, sizeof pocl, "%s/pocl", dir); /* fresh per run: cold is cold */
    kcb_child_env(c && c->platform_warm ? pocl_warm : c && c->platform_cache ? pocl : NULL);
    execl(self, self, "--child", label, dir, (char *)NULL);
    _exit(127);
  }
  char buf[256];
  bool ok = kcb_child_reap(pid, fd, buf, sizeof buf);
  *process = now_ns() - t0;
  return ok && sscanf(buf, "%lf %lf %llu %llu", first, total, compiles, hits) == 4;
}

typedef struct result {
  const bconf *c;
  bool ran;
  char why[256];
  double cold_first, warm_first, cold_total, warm_total, cold_process, warm_process;
  double hit, hit_link;
  unsigned long long cold_compiles, warm_compiles, warm_hits;
} result;

/* c's runs (pocl: PoCL's cache directory where c->platform_warm). */
static void measure_runs(const char *self, const bconf *c, int runs, result *r, const char *pocl) {
  char dir[4096];
  double cf[32], wf[32], ct[32], wt[32], cp[32], wp[32], hit[32], hl[32];
  for (int i = 0; i < runs; i++) {
    if (!kcb_mkdtemp(dir, sizeof dir, "kc-bench-store", NULL)) {
      snprintf(r->why, sizeof r->why, "mkdtemp: %s", strerror(errno));
      return;
    }
    unsigned long long hits;
    if (!run_child(self, c->label, dir, pocl, &cf[i], &ct[i], &cp[i], &r->cold_compiles, &hits) ||
        !run_child(self, c->label, dir, pocl, &wf[i], &wt[i], &wp[i], &r->warm_compiles, &r->warm_hits)) {
      snprintf(r->why, sizeof r->why, "a child process failed");
      kcb_rmrf(dir);
      return;
    }
    /* the disk hit, in a process whose identity and probe context are up */
    kcb_session s;
    if (!session_open(&s, c, dir)) {
      kcb_rmrf(dir);
      snprintf(r->why, sizeof r->why, "runtime failed");
      return;
    }
    kc_kernel *warm = NULL;
    kc_define(s.rt, "warmup", "KC_KERNEL void warmup(KC_GLOBAL float *y) { y[0] = 1.0f; }", NULL);
    kc_kernel_create(s.rt, "warmup", NULL, &warm);
    kc_kernel_compile(warm); /* compiles (first time) or hits: identity and probe are up */
    kc_kernel_destroy(warm);
    double t0 = now_ns();
    kc_status st = kc_kernel_compile(s.k);
    double t1 = now_ns();
    if (!st) st = kcb_session_launch(&s, s.k);
    double t2 = now_ns();
    kc_stats k;
    kc_stats_get(s.rt, &k);
    if (st || kcb_session_check(&s, 0) || k.compiles > 1) {
      snprintf(r->why, sizeof r->why, "the disk hit did not happen (%s, %llu compiles)", kc_status_name(st),
               (unsigned long long)k.compiles);
      kcb_session_close(&s);
      kcb_rmrf(dir);
      return;
    }
    hit[i] = t1 - t0;
    hl[i] = t2 - t0;
    kcb_session_close(&s);
    kcb_rmrf(dir);
  }
  r->cold_first = median(cf, runs);
  r->warm_first = median(wf, runs);
  r->cold_total = median(ct, runs);
  r->warm_total = median(wt, runs);
  r->cold_process = median(cp, runs);
  r->warm_process = median(wp, runs);
  r->hit = median(hit, runs);
  r->hit_link = median(hl, runs);
  r->ran = true;
}

/* Whether the directory holds anything (a file below it, at any depth). */
static bool has_files(const char *path) {
  DIR *d = opendir(path);
  if (!d) return false;
  bool found = false;
  for (struct dirent *e; !found && (e = readdir(d));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char sub[4400];
    snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
    struct stat st;
    found = lstat(sub, &st) == 0 && (S_ISREG(st.st_mode) || (S_ISDIR(st.st_mode) && has_files(sub)));
  }
  closedir(d);
  return found;
}

static void measure(const char *self, const bconf *c, int runs, result *r) {
  memset(r, 0, sizeof *r);
  r->c = c;
  if (kcb_backend_missing(c->kind, c->cc, r->why, sizeof r->why)) return;
  if (!c->platform_warm) {
    measure_runs(self, c, runs, r, NULL);
    return;
  }
  /* PoCL's cache, filled by a first run (whose store is thrown away) */
  char pocl[4096] = "", dir[4096] = "";
  double x;
  unsigned long long n;
  if (!kcb_mkdtemp(pocl, sizeof pocl, "kc-bench-pocl", NULL) ||
      !kcb_mkdtemp(dir, sizeof dir, "kc-bench-store", NULL))
    snprintf(r->why, sizeof r->why, "mkdtemp: %s", strerror(errno));
  else if (!run_child(self, c->label, dir, pocl, &x, &x, &x, &n, &n))
    snprintf(r->why, sizeof r->why, "the run that fills PoCL's cache failed");
  else if (!has_files(pocl))
    snprintf(r->why, sizeof r->why, "PoCL's cache (%s) is empty after a run: is PoCL the platform?", pocl);
  else measure_runs(self, c, runs, r, pocl);
  if (dir[0]) kcb_rmrf(dir);
  if (pocl[0]) kcb_rmrf(pocl);
}

int kcb_store_scale(int argc, char **argv); /* kc_bench_store_scale.c */

int main(int argc, char **argv) {
  if (argc == 4 && !strcmp(argv[1], "--child")) return child(argv[2], argv[3]);
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--scale")) return kcb_store_scale(argc, argv);
  bool json = false;
  int runs = 7;
  const char *only = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) json = true;
    else if (!strcmp(argv[i], "--quick")) runs = 3;
    else if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--backend") && i + 1 < argc) only = argv[++i];
    else {
      fprintf(stderr,
              "usage: %s [--json] [--quick] [--runs N] [--backend "
              "host|tcc|opencl|opencl+pocl|opencl+poclwarm|cuda]\n",
              argv[0]);
      return 2;
    }
  }
  if (runs < 1) runs = 1;
  if (runs > 32) runs = 32;
  char self[4096];
  if (!kcb_self_path(self, sizeof self)) return 1;
  enum { NC = sizeof confs / sizeof *confs };
  result res[NC];
  int nres = 0;
  for (int i = 0; i < NC; i++) {
    if (only && strcmp(only, confs[i].label)) continue;
    if (!json) fprintf(stderr, "measuring %s...\n", confs[i].label);
    measure(self, &confs[i], runs, &res[nres++]);
  }
  int missed = 0;
  if (json) {
    printf("{\"runs\": %d, \"backends\": [", runs);
    for (int i = 0; i < nres; i++) {
      result *r = &res[i];
      if (!kcb_json_backend(i, r->c->label, r->c->compiler, r->ran, r->why)) continue;
      double speed = r->cold_first / r->warm_first;
      printf(
          ", \"cold_first_launch_ms\": %.3f, \"warm_first_launch_ms\": %.3f, \"first_launch_speedup\": %.1f"
          ", \"target_speedup\": %.0f, \"cold_process_ms\": %.3f, \"warm_process_ms\": %.3f"
          ", \"process_speedup\": %.1f, \"disk_hit_ms\": %.3f, \"disk_hit_and_link_ms\": %.3f"
          ", \"cold_compiles\": %llu, \"warm_compiles\": %llu, \"warm_disk_hits\": %llu, \"meets_targets\": "
          "%s}",
          r->cold_first / 1e6, r->warm_first / 1e6, speed, r->c->target, r->cold_total / 1e6,
          r->warm_total / 1e6, r->cold_total / r->warm_total, r->hit / 1e6, r->hit_link / 1e6,
          r->cold_compiles, r->warm_compiles, r->warm_hits,
          (speed >= r->c->target && r->hit < 2e6) ? "true" : "false");
    }
    printf("\n]}\n");
    return 0;
  }
  printf("kcache disk cache: first launch in a new process, cold store vs warm (median of %d)\n\n", runs);
  printf("%-8s %-8s %11s %11s %8s %7s   %11s %11s %8s   %9s %11s\n", "backend", "compiler", "cold first",
         "warm first", "speedup", "target", "cold proc.", "warm proc.", "speedup", "disk hit", "hit+link");
  for (int i = 0; i < nres; i++) {
    result *r = &res[i];
    if (!r->ran) {
      printf("%-8s %-8s skipped: %s\n", r->c->label, r->c->compiler, r->why);
      continue;
    }
    double speed = r->cold_first / r->warm_first;
    bool ok = speed >= r->c->target && r->hit < 2e6;
    missed += !ok;
    char target[16];
    if (r->c->target > 0) snprintf(target, sizeof target, ">=%.0fx", r->c->target);
    else snprintf(target, sizeof target, "-");
    printf("%-8s %-8s %8.2f ms %8.2f ms %7.1fx %7s   %8.2f ms %8.2f ms %7.1fx   %6.3f ms %8.3f ms%s\n",
           r->c->label, r->c->compiler, r->cold_first / 1e6, r->warm_first / 1e6, speed, target,
           r->cold_total / 1e6, r->warm_total / 1e6, r->cold_total / r->warm_total, r->hit / 1e6,
           r->hit_link / 1e6, ok ? "" : "  (target missed)");
  }
  printf("\nfirst: the first kc_launch + finish of the kernel in the process (resolve, compile or load,\n"
         "link, run); proc.: main() to the first result (runtime and context creation included);\n"
         "disk hit: kc_kernel_compile from a warm store (key, read, verify, test-load; target < 2 ms);\n"
         "hit+link: that plus the first launch (link into the context, run).\n");
  if (missed) printf("\n%d backend(s) missed a target\n", missed);
  return 0;
}
