/* SPDX-License-Identifier: MIT */
/*
 * hostcpu_ref.c -- the kernels of kc_bench_hostcpu written as plain C
 * loops, the reference they are measured against. CMake compiles this file
 * three times with REF_PREFIX giving each copy its own names: -O2;
 * -O3 -march=native; -O3 -march=native -fopenmp (the loops over items run
 * on every core). Each function computes exactly what its kernel does.
 */
#include <stddef.h>

#ifndef REF_PREFIX
#error "REF_PREFIX (o2_, o3_ or omp_) must be defined"
#endif
#define REF_CAT2(a, b) a##b
#define REF_CAT(a, b) REF_CAT2(a, b)
#define REF(name) REF_CAT(REF_PREFIX, name)
#ifdef _OPENMP
#define PAR _Pragma("omp parallel for schedule(static)")
#else
#define PAR
#endif

void REF(saxpy)(float *y, const float *x, float a, size_t n) {
  PAR for (size_t i = 0; i < n; i++) y[i] = a * x[i] + y[i];
}

void REF(madd)(float *y, const float *x, float a, size_t n) {
  PAR for (size_t i = 0; i < n; i++) {
    float v = x[i];
    for (int k = 0; k < 64; k++) v = v * a + 0.5f;
    y[i] = v;
  }
}

/* the sum of each block of wg inputs */
void REF(reduce)(float *out, const float *x, size_t n, size_t wg) {
  PAR for (size_t g = 0; g < n / wg; g++) {
    float s = 0.0f;
    for (size_t i = 0; i < wg; i++) s += x[g * wg + i];
    out[g] = s;
  }
}

void REF(stencil)(float *out, const float *in, int w, int h) {
  PAR for (int y = 0; y < h; y++) for (int x = 0; x < w; x++) {
    int i = y * w + x;
    if (x == 0 || y == 0 || x == w - 1 || y == h - 1) out[i] = in[i];
    else out[i] = 0.5f * in[i] + 0.125f * (in[i - 1] + in[i + 1] + in[i - w] + in[i + w]);
  }
}

/* c = a * b, n x n: the i-k-j loop, which vectorizes over j */
void REF(matmul)(float *c, const float *a, const float *b, int n) {
  PAR for (int i = 0; i < n; i++) {
    for (int j = 0; j < n; j++) c[i * n + j] = 0.0f;
    for (int k = 0; k < n; k++) {
      float aik = a[i * n + k];
      for (int j = 0; j < n; j++) c[i * n + j] += aik * b[k * n + j];
    }
  }
}
