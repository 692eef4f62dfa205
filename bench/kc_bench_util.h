/*
 * kc_bench_util.h -- the clock and the median that every benchmark uses, so
 * that their figures are taken the same way.
 */
#ifndef KC_BENCH_UTIL_H
#define KC_BENCH_UTIL_H

#include <stdlib.h>
#include <time.h>

/* Monotonic time in nanoseconds. */
static inline double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static inline int kcb_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The median of v[0..n) (sorts v in place); the mean of the middle two for
 * an even n. */
static inline double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, kcb_cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#endif
