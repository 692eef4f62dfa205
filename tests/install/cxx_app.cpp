// SPDX-License-Identifier: MIT
// cxx_app.cpp -- kcache.h from C++ (test_cxx.sh builds it with
// -std=c++17 -Wall -Wextra -Wpedantic -Werror): every argument macro, the
// options and statistics macros, and a launch on the host backend whose
// result is checked. Prints "as expected" and exits 0 when it works.
#include <kcache.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

static kc_runtime *rt = nullptr;

static void check(kc_status st, const char *what) {
  if (st == KC_OK) return;
  std::fprintf(stderr, "%s: %s\n%s\n", what, kc_status_name(st), kc_errmsg(rt));
  std::exit(1);
}

int main() {
  kc_options o;
  kc_options_init(&o);
  o.backend = KC_BACKEND_HOST;
  o.cache_disable = true;
  check(kc_runtime_create(&o, &rt), "kc_runtime_create");
  kc_context *ctx = nullptr;
  check(kc_context_create(rt, 0, &ctx), "kc_context_create");
  check(kc_define(rt, "k",
                  "KC_KERNEL void k(KC_GLOBAL float *y, float a, int n) {\n"
                  "  size_t i = kc_global_id(0);\n"
                  "  if ((int)i < n) y[i] = a * (float)i;\n"
                  "}",
                  nullptr),
        "kc_define");
  kc_kernel *k = nullptr;
  check(kc_kernel_create(rt, "k", nullptr, &k), "kc_kernel_create");
  kc_buffer *y = nullptr;
  check(kc_buffer_create(ctx, 8 * sizeof(float), &y), "kc_buffer_create");
  float a = 2.5f;
  int n = 8;
  kc_arg args[] = {KC_ARG_BUF(y), KC_ARG_VAL(a), KC_ARG_VAL(n)};
  kc_dim3 grid = {8, 1, 1}, block = {1, 1, 1};
  check(kc_launch(k, ctx, &grid, &block, args, 3), "kc_launch");
  check(kc_context_finish(ctx), "kc_context_finish");
  std::vector<float> out(8);
  check(kc_buffer_read(y, 0, out.data(), out.size() * sizeof(float)), "kc_buffer_read");
  int bad = 0;
  for (int i = 0; i < 8; i++) bad += out[(size_t)i] != a * (float)i;
  // the other two macros make arguments of the right kinds
  kc_arg more[] = {KC_ARG_DEVPTR(0), KC_ARG_LOCAL_BYTES(64)};
  bad += more[0].kind != KC_ARG_PTR || more[1].kind != KC_ARG_LOCAL || more[1].size != 64;
  kc_stats st;
  kc_stats_get(rt, &st);
  bad += st.compiles != 1;
  std::printf("C++: y[7] = %g, %llu compile, %s\n", (double)out[7], (unsigned long long)st.compiles,
              bad ? "WRONG" : "as expected");
  kc_runtime_destroy(rt);
  return bad ? 1 : 0;
}
