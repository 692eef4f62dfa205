/* SPDX-License-Identifier: MIT */
/*
 * project.c -- kcache's own kernels, for bench/kc_bench_deps: the bodies of
 * the kernels of tests/scenario/test_core.c, demo/kc_demo.c, the examples
 * of README and doc/interop.md and tests/source/test_source.c, with their
 * identifiers kept, rewritten to the corpus's one signature
 *   KC_KERNEL void NAME(KC_GLOBAL float *y, KC_GLOBAL const float *x, int n)
 * (a scalar parameter of the original is read from x; a kernel name the
 * file has twice gets a prefix). Loads with kc_define_file.
 */

/* tests/scenario/test_core.c: k calls h; kt calls g, which calls h; k2 calls nothing. */
KC_DEVICE float h(float x) { return x + 1.0f; }
KC_DEVICE float g(float x) { return 10.0f * h(x); }

KC_KERNEL void k(KC_GLOBAL float *y, KC_GLOBAL const float *x, int n) {
  size_t i = kc_global_id(0);
  y[i] = h((float)i);
}

KC_KERNEL void k2(KC_GLOBAL float *y, KC_GLOBAL const float *x, int n) { y[kc_global_id(0)] = 7.0f; }

KC_KERNEL void kt(KC_GLOBAL float *y, KC_GLOBAL const float *x, int n) {
  size_t i = kc_global_id(0);
  y[i] = g((float)i);
}

/* demo/kc_demo.c: k writes through `out`, its scalar x is x[0] here. */
KC_KERNEL void demo_k(KC_GLOBAL float *y, KC_GLOBAL const float *x, int n) {
  KC_GLOBAL float *out = y;
  size_t i = kc_global_id(0);
  out[i] = h(x[0]) + (float)i;
}

/* README, the quick start: k with T=float (here a typedef), a = x[0]. */
typedef float T;

KC_KERNEL void readme_k(KC_GLOBAL float *y, KC_GLOBAL const float *x, int n) {
  T a = (T)x[0];
  size_t i = kc_global_id(0);
  y[i] = h(a) + (T)i;
}

/* doc/interop.md, "Using kcache inside an existing program": axpy. */
KC_KERNEL void axpy(KC_GLOBAL float *y, KC_GLOBAL const float *x, int n) {
  float a = 2.0f;
  size_t i = kc_global_id(0);
  y[i] += a * x[i];
}

/* tests/source/test_source.c: a macro of the table that calls a helper. */
#define SCALE 3.0f
KC_DEVICE float dbl(float x) { return 2.0f * x; }
#define TWICE(x) (dbl(x) * SCALE)

KC_KERNEL void km(KC_GLOBAL float *y, KC_GLOBAL const float *x, int n) { y[kc_global_id(0)] = TWICE(1.0f); }

/* tests/source/test_source.c: a type and a constant. */
typedef struct P {
  float x, y;
} P;
static const float OFFSET = 0.5f;
KC_DEVICE float sum(P p) { return p.x + p.y + OFFSET; }

KC_KERNEL void ktypes(KC_GLOBAL float *y, KC_GLOBAL const float *x, int n) {
  P p = {1.0f, 2.0f};
  y[kc_global_id(0)] = sum(p);
}

/* tests/source/test_source.c: an enumerator. */
enum Mode { MODE_SLOW = 1, MODE_FAST = (2 + 1), MODE_LAST };

KC_KERNEL void ke(KC_GLOBAL float *y, KC_GLOBAL const float *x, int n) {
  y[kc_global_id(0)] = (float)MODE_FAST;
}

/* tests/source/test_source.c: a call seen only through a macro of the body. */
KC_DEVICE float helper(float x) { return x + 1.0f; }

KC_KERNEL void kcall(KC_GLOBAL float *y, KC_GLOBAL const float *x, int n) {
#define CALL(x) helper(x)
  y[kc_global_id(0)] = CALL(1.0f);
}
