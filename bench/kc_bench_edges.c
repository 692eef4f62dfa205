/* SPDX-License-Identifier: MIT */
/*
 * kc_bench_edges.c -- what the dependency sets of code instances cost as the
 * cache grows (issue 22, item 7): N compiled kernels (10,000 and 100,000),
 * each a realistic body (locals, a loop, builtins) that calls one of 100
 * helpers, on the hash backend of tests/reliability (it "compiles" by
 * hashing the translation unit, so the figures are kcache's own work, not
 * a compiler's). Since issue 22 every identifier a definition mentions is a
 * lookup, so each code instance has more edges than before.
 *
 *   edges        edges of one kernel's code instance
 *   memory       bytes per code instance (the runtime's allocator; the hash
 *                backend's artifact is 8 bytes), after compiling all N
 *   redefine     kc_define of: a helper that N/100 kernels call; a name no
 *                code mentions; a new name every kernel mentions as a local
 *                variable (`acc`: no code changes meaning, but every kernel
 *                is ended: the cost of the over-approximation); each timed
 *                once after all N are compiled (the median of 3 rounds for
 *                the first two)
 *
 * Built from the same source (and kc_bench_util.h) at an older commit, it
 * gives the figures before the change (bench/results/edges-2026-12-02.log has both).
 *
 * Usage: kc_bench_edges [--json] [--max N]
 */
#define KCB_PROG "kc_bench_edges"
#include "kc_bench_util.h"
#include "hashbe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void check(kc_runtime *rt, kc_status st, const char *what) {
  if (st) {
    fprintf(stderr, "kc_bench_edges: %s: %s\n", what, kc_errmsg(rt));
    exit(1);
  }
}

typedef struct result {
  int n;
  uint32_t edges;
  double bytes_per_ci, helper_ns, unrelated_ns, local_ns;
  uint64_t helper_clipped, local_clipped;
} result;

/* Compiles every kernel of ks (hash backend: no compiler). */
static void compile_all(kc_runtime *rt, kc_kernel **ks, int n) {
  for (int i = 0; i < n; i++) check(rt, kc_kernel_compile(ks[i]), "compile");
}

static uint64_t invalidations(kc_runtime *rt) {
  kc_stats s;
  kc_stats_get(rt, &s);
  return s.invalidations;
}

static double time_define(kc_runtime *rt, const char *name, const char *src, uint64_t *clipped) {
  uint64_t i0 = invalidations(rt);
  double t0 = now_ns();
  check(rt, kc_define(rt, name, src, NULL), name);
  double t = now_ns() - t0;
  if (clipped) *clipped = invalidations(rt) - i0;
  return t;
}

static double median3(double a, double b, double c) {
  return a > b ? (b > c ? b : (a > c ? c : a)) : (a > c ? a : (b > c ? c : b));
}

static void measure(int n, result *r) {
  kc_options o;
  kc_options_init(&o);
  o.cache_disable = 1;
  o.alloc = kcb_sized_alloc;
  kc_runtime *rt = NULL;
  check(NULL, kc__runtime_open(&o, &kc__backend_hash, &rt), "runtime");
  char name[32], src[512];
  for (int h = 0; h < 100; h++) {
    snprintf(name, sizeof name, "h%d", h);
    snprintf(src, sizeof src,
             "KC_DEVICE float h%d(float v, float a) { float t = v * a; return t + (float)%d; }", h, h);
    check(rt, kc_define(rt, name, src, NULL), "helper");
  }
  kc_kernel **ks = calloc((size_t)n, sizeof *ks);
  for (int i = 0; i < n; i++) {
    snprintf(name, sizeof name, "k%d", i);
    snprintf(src, sizeof src,
             "KC_KERNEL void k%d(KC_GLOBAL float *y, KC_GLOBAL const float *x, float a) {\n"
             "  size_t i = kc_global_id(0);\n"
             "  float acc = 0.0f;\n"
             "  for (int j = 0; j < 4; j++) acc += h%d(x[i + j], a);\n"
             "  y[i] = acc > 0.0f ? sqrtf(acc) : -acc;\n"
             "}",
             i, i % 100);
    check(rt, kc_define(rt, name, src, NULL), "kernel");
    check(rt, kc_kernel_create(rt, name, NULL, &ks[i]), "handle");
  }
  long long before = *kcb_live_bytes();
  compile_all(rt, ks, n);
  r->n = n;
  r->bytes_per_ci = (double)(*kcb_live_bytes() - before) / n;
  kc__ci *ci = kc__ci_find(((struct kc_kernel *)ks[0])->spec, kc_world_latest(rt));
  r->edges = ci ? ci->nedges : 0;
  double h[3], u[3];
  for (int round = 0; round < 3; round++) {
    snprintf(src, sizeof src, "KC_DEVICE float h7(float v, float a) { return v * a + %d.0f; }", round + 100);
    h[round] = time_define(rt, "h7", src, &r->helper_clipped);
    compile_all(rt, ks, n); /* its dependents again, for the next round */
    snprintf(name, sizeof name, "unused%d", round);
    snprintf(src, sizeof src, "KC_DEVICE float unused%d(float v) { return v; }", round);
    u[round] = time_define(rt, name, src, NULL);
  }
  r->helper_ns = median3(h[0], h[1], h[2]);
  r->unrelated_ns = median3(u[0], u[1], u[2]);
  r->local_ns = time_define(rt, "acc", "KC_DEVICE float acc(float v) { return v; }", &r->local_clipped);
  kc_runtime_destroy(rt);
  free(ks);
}

int main(int argc, char **argv) {
  bool json = false;
  int max = 100000;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) json = true;
    else if (!strcmp(argv[i], "--max") && i + 1 < argc) max = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: %s [--json] [--max N]\n", argv[0]);
      return 2;
    }
  }
  const int sizes[] = {10000, 100000};
  result rs[2];
  int nr = 0;
  for (int i = 0; i < 2 && sizes[i] <= max; i++) measure(sizes[i], &rs[nr++]);
  if (json) {
    printf("{\"version\":\"%s\",\"sizes\":[", kc_version());
    for (int i = 0; i < nr; i++)
      printf("%s{\"kernels\":%d,\"edges_per_ci\":%u,\"bytes_per_ci\":%.0f,\"redefine_helper_ns\":%.0f,"
             "\"helper_dependents_ended\":%llu,\"define_unrelated_ns\":%.0f,\"define_local_name_ns\":%.0f,"
             "\"local_name_dependents_ended\":%llu}",
             i ? "," : "", rs[i].n, rs[i].edges, rs[i].bytes_per_ci, rs[i].helper_ns,
             (unsigned long long)rs[i].helper_clipped, rs[i].unrelated_ns, rs[i].local_ns,
             (unsigned long long)rs[i].local_clipped);
    printf("]}\n");
    return 0;
  }
  printf("kcache %s: dependency sets at scale (hash backend: no compiler)\n", kc_version());
  printf("%9s %6s %10s %16s %10s %14s %16s %10s\n", "kernels", "edges", "bytes/ci", "redefine helper",
         "(ended)", "define unused", "define `acc`", "(ended)");
  for (int i = 0; i < nr; i++)
    printf("%9d %6u %10.0f %13.0f ns %10llu %11.0f ns %13.0f ns %10llu\n", rs[i].n, rs[i].edges,
           rs[i].bytes_per_ci, rs[i].helper_ns, (unsigned long long)rs[i].helper_clipped, rs[i].unrelated_ns,
           rs[i].local_ns, (unsigned long long)rs[i].local_clipped);
  return 0;
}
