/* SPDX-License-Identifier: MIT */
/*
 * real.c -- a corpus of everyday kernels in kcache's dialect, for
 * bench/kc_bench_deps (what the "every identifier is an edge" rule costs).
 * One signature for all, so that one harness launches them:
 *   KC_KERNEL void NAME(KC_GLOBAL float *y, KC_GLOBAL const float *x, int n)
 * with 256 work items, x: 256 floats in [-1, 1), n = 16 (a row's length;
 * the 256 values are a 16x16 image or matrix where the kernel wants one).
 * Loads with kc_define_file: one top-level definition per name.
 */

/* ------------------------------------------------------------- helpers */

KC_DEVICE int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* The pixel (r, c) of a w x h image, the border repeated. */
KC_DEVICE float pixel(KC_GLOBAL const float *img, int w, int h, int r, int c) {
  r = clampi(r, 0, h - 1);
  c = clampi(c, 0, w - 1);
  return img[r * w + c];
}

#define IDX(r, c, w) ((r) * (w) + (c))

/* ---------------------------------------------------------------- saxpy */

#define ALPHA 2.5f

KC_KERNEL void saxpy(KC_GLOBAL float *y, KC_GLOBAL const float *x, int n) {
  size_t i = kc_global_id(0);
  if (i >= (size_t)(n * n)) return;
  y[i] = ALPHA * x[i] + y[i];
}

/* ------------------------------------------------------ 3-point stencil */

KC_KERNEL void stencil3(KC_GLOBAL float *y, KC_GLOBAL const float *x, int n) {
  int i = (int)kc_global_id(0), len = n * n;
  if (i >= len) return;
  float left = x[clampi(i - 1, 0, len - 1)];
  float mid = x[i];
  float right = x[clampi(i + 1, 0, len - 1)];
  y[i] = 0.25f * left + 0.5f * mid + 0.25f * right;
}

/* ------------------------------------------------------------ 3x3 blur */

KC_KERNEL void blur3x3(KC_GLOBAL float *y, KC_GLOBAL const float *x, int n) {
  int i = (int)kc_global_id(0);
  int row = i / n, col = i % n;
  float sum = 0.0f;
  for (int dr = -1; dr <= 1; dr++)
    for (int dc = -1; dc <= 1; dc++) sum += pixel(x, n, n, row + dr, col + dc);
  y[IDX(row, col, n)] = sum / 9.0f;
}

/* ------------------------------------------------------ naive matmul */

/* y (n x n) = A (n x n/2, the first half of x) * B (n/2 x n, the second half). */
KC_KERNEL void matmul(KC_GLOBAL float *y, KC_GLOBAL const float *x, int n) {
  int i = (int)kc_global_id(0);
  int row = i / n, col = i % n, inner = n / 2;
  KC_GLOBAL const float *a = x;
  KC_GLOBAL const float *b = x + n * inner;
  float acc = 0.0f;
  for (int k = 0; k < inner; k++) acc += a[IDX(row, k, inner)] * b[IDX(k, col, n)];
  y[IDX(row, col, n)] = acc;
}

/* ------------------------------------------------------------ transpose */

KC_KERNEL void transpose(KC_GLOBAL float *y, KC_GLOBAL const float *x, int n) {
  int i = (int)kc_global_id(0);
  int r = i / n, c = i % n;
  y[IDX(c, r, n)] = x[IDX(r, c, n)];
}

/* ----------------------------------------------------------- mandelbrot */

#define MAX_ITER 64

KC_DEVICE int escape_count(float cx, float cy) {
  float zx = 0.0f, zy = 0.0f;
  int it = 0;
  while (it < MAX_ITER && zx * zx + zy * zy <= 4.0f) {
    float t = zx * zx - zy * zy + cx;
    zy = 2.0f * zx * zy + cy;
    zx = t;
    it++;
  }
  return it;
}

KC_KERNEL void mandelbrot(KC_GLOBAL float *y, KC_GLOBAL const float *x, int n) {
  size_t i = kc_global_id(0);
  size_t len = (size_t)(n * n);
  float x0 = x[i] * 1.5f - 0.5f;
  float y0 = x[(i * 7 + 3) % len];
  y[i] = (float)escape_count(x0, y0) / (float)MAX_ITER;
}

/* -------------------------------------------------------- black-scholes */

typedef struct Option {
  float S, K, T, r, v;
} Option;

#define INV_SQRT_2PI 0.3989422804f

/* The normal distribution's CDF (Abramowitz and Stegun 26.2.17). */
KC_DEVICE float cnd(float d) {
  const float a1 = 0.31938153f, a2 = -0.356563782f, a3 = 1.781477937f, a4 = -1.821255978f, a5 = 1.330274429f;
  float k = 1.0f / (1.0f + 0.2316419f * fabsf(d));
  float poly = k * (a1 + k * (a2 + k * (a3 + k * (a4 + k * a5))));
  float w = 1.0f - INV_SQRT_2PI * expf(-0.5f * d * d) * poly;
  return d < 0.0f ? 1.0f - w : w;
}

KC_DEVICE float call_price(Option o) {
  float sqrt_t = sqrtf(o.T);
  float d1 = (logf(o.S / o.K) + (o.r + 0.5f * o.v * o.v) * o.T) / (o.v * sqrt_t);
  float d2 = d1 - o.v * sqrt_t;
  return o.S * cnd(d1) - o.K * expf(-o.r * o.T) * cnd(d2);
}

KC_KERNEL void black_scholes(KC_GLOBAL float *y, KC_GLOBAL const float *x, int n) {
  size_t i = kc_global_id(0);
  size_t len = (size_t)(n * n);
  Option opt;
  opt.S = 60.0f + 40.0f * x[i];
  opt.K = 60.0f;
  opt.T = 0.25f + fabsf(x[(i + 1) % len]);
  opt.r = 0.05f;
  opt.v = 0.1f + 0.4f * fabsf(x[(i + 2) % len]);
  y[i] = call_price(opt);
}

/* ---------------------------------------------------------------- sobel */

KC_KERNEL void sobel(KC_GLOBAL float *y, KC_GLOBAL const float *x, int n) {
  int i = (int)kc_global_id(0);
  int r = i / n, c = i % n;
  float gx = -pixel(x, n, n, r - 1, c - 1) - 2.0f * pixel(x, n, n, r, c - 1) - pixel(x, n, n, r + 1, c - 1) +
             pixel(x, n, n, r - 1, c + 1) + 2.0f * pixel(x, n, n, r, c + 1) + pixel(x, n, n, r + 1, c + 1);
  float gy = -pixel(x, n, n, r - 1, c - 1) - 2.0f * pixel(x, n, n, r - 1, c) - pixel(x, n, n, r - 1, c + 1) +
             pixel(x, n, n, r + 1, c - 1) + 2.0f * pixel(x, n, n, r + 1, c) + pixel(x, n, n, r + 1, c + 1);
  y[i] = sqrtf(gx * gx + gy * gy);
}

/* ------------------------------------------------------ median of five */

#define SWAP_IF(a, b) \
  if ((a) > (b)) { \
    float t = (a); \
    (a) = (b); \
    (b) = t; \
  }

KC_KERNEL void median5(KC_GLOBAL float *y, KC_GLOBAL const float *x, int n) {
  int i = (int)kc_global_id(0), len = n * n;
  float v[5];
  for (int j = 0; j < 5; j++) v[j] = x[clampi(i + j - 2, 0, len - 1)];
  for (int pass = 0; pass < 3; pass++)
    for (int j = 0; j + 1 < 5 - pass; j++) SWAP_IF(v[j], v[j + 1]);
  y[i] = v[2];
}

/* -------------------------------------------------------------- softmax */

KC_KERNEL void softmax(KC_GLOBAL float *y, KC_GLOBAL const float *x, int n) {
#ifndef SOFTMAX_EPS
#define SOFTMAX_EPS 1e-12f
#endif
  int i = (int)kc_global_id(0);
  int row = i / n;
  KC_GLOBAL const float *in = x + row * n;
  float m = in[0];
  for (int j = 1; j < n; j++) m = fmaxf(m, in[j]);
  float sum = 0.0f;
  for (int j = 0; j < n; j++) sum += expf(in[j] - m);
  y[i] = expf(x[i] - m) / (sum + SOFTMAX_EPS);
}

/* ------------------------------------------------------- 1D convolution */

#define NTAPS 5

static const float TAPS[NTAPS] = {0.0625f, 0.25f, 0.375f, 0.25f, 0.0625f};

KC_KERNEL void conv1d(KC_GLOBAL float *y, KC_GLOBAL const float *x, int n) {
  int i = (int)kc_global_id(0), len = n * n;
  float acc = 0.0f;
  for (int k = 0; k < NTAPS; k++) acc += TAPS[k] * x[clampi(i + k - NTAPS / 2, 0, len - 1)];
  y[i] = acc;
}

/* --------------------------------------------------------------- n-body */

typedef struct Body {
  float x, y, m;
} Body;

#define SOFTENING 0.01f

KC_DEVICE Body load_body(KC_GLOBAL const float *x, int j) {
  Body b;
  b.x = x[2 * j];
  b.y = x[2 * j + 1];
  b.m = 1.0f;
  return b;
}

/* The potential at point i (x[i], x[i + 128]) of the first n bodies. */
KC_KERNEL void nbody(KC_GLOBAL float *y, KC_GLOBAL const float *x, int n) {
  size_t i = kc_global_id(0);
  float px = x[i], py = x[(i + 128) % 256];
  float phi = 0.0f;
  for (int j = 0; j < n; j++) {
    Body b = load_body(x, j);
    float dx = b.x - px, dy = b.y - py;
    float d2 = dx * dx + dy * dy + SOFTENING;
    phi -= b.m / sqrtf(d2);
  }
  y[i] = phi;
}

/* ------------------------------------------------------ row prefix sum */

KC_KERNEL void prefix_sum(KC_GLOBAL float *y, KC_GLOBAL const float *x, int n) {
  int i = (int)kc_global_id(0);
  int row = i / n, col = i % n;
  float sum = 0.0f;
  for (int c = 0; c <= col; c++) sum += x[IDX(row, c, n)];
  y[i] = sum;
}

/* -------------------------------------------------------- normalisation */

KC_DEVICE float dot(KC_GLOBAL const float *a, KC_GLOBAL const float *b, int len) {
  float s = 0.0f;
  for (int k = 0; k < len; k++) s += a[k] * b[k];
  return s;
}

KC_KERNEL void normalize(KC_GLOBAL float *y, KC_GLOBAL const float *x, int n) {
  int i = (int)kc_global_id(0);
  KC_GLOBAL const float *v = x + (i / n) * n;
  float norm = sqrtf(dot(v, v, n));
  y[i] = norm > 0.0f ? x[i] / norm : 0.0f;
}

/* -------------------------------------------------------------- Horner */

#define DEGREE 5

static const float COEFS[DEGREE + 1] = {1.0f, -0.5f, 0.25f, -0.125f, 0.0625f, -0.03125f};

KC_DEVICE float horner(float t) {
  float acc = COEFS[DEGREE];
  for (int k = DEGREE - 1; k >= 0; k--) acc = acc * t + COEFS[k];
  return acc;
}

KC_KERNEL void poly(KC_GLOBAL float *y, KC_GLOBAL const float *x, int n) {
  size_t i = kc_global_id(0);
  if (i < (size_t)(n * n)) y[i] = horner(x[i]);
}
