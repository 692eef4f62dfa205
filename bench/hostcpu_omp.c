/* SPDX-License-Identifier: MIT */
/* hostcpu_omp.c -- the OpenMP reference's thread count (kc_bench_hostcpu). */
#ifdef _OPENMP
#include <omp.h>
#endif

void omp_threads(int n) {
#ifdef _OPENMP
  omp_set_num_threads(n);
#else
  (void)n;
#endif
}
