/* SPDX-License-Identifier: MIT */
/*
 * kc_remote_node -- one node in a process of its own, for tests that need a
 * fresh process (hiredis and libcrypto are loaded once per process, so a
 * missing library can only be shown in a new one). Runs three kernels on
 * the disk cache DIR (host backend, $KC_HOST_CC) with the remote tier that
 * the environment configures, and prints one line:
 *
 *   status=KC_OK wrong=0 compiles=3 remote=redis://... hits=0 errors=0
 */
#include "kcache.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: kc_remote_node DIR\n");
    return 2;
  }
  kc_options o;
  kc_options_init(&o);
  o.backend = KC_BACKEND_HOST;
  o.cache_dir = argv[1];
  kc_runtime *rt = NULL;
  kc_status st = kc_runtime_create(&o, &rt);
  if (st) {
    printf("status=%s (%s)\n", kc_status_name(st), kc_errmsg(NULL));
    return 1;
  }
  int wrong = 0;
  static const char *const src[] = {
      "KC_KERNEL void n1(KC_GLOBAL float *y) { y[kc_global_id(0)] = 1.0f + (float)kc_global_id(0); }",
      "KC_KERNEL void n2(KC_GLOBAL float *y) { y[kc_global_id(0)] = 2.0f + (float)kc_global_id(0); }",
      "KC_KERNEL void n3(KC_GLOBAL float *y) { y[kc_global_id(0)] = 3.0f + (float)kc_global_id(0); }",
  };
  static const char *const names[] = {"n1", "n2", "n3"};
  kc_context *ctx = NULL;
  kc_buffer *b = NULL;
  if (!st) st = kc_context_create(rt, 0, &ctx);
  if (!st) st = kc_buffer_create(ctx, 8 * sizeof(float), &b);
  for (int i = 0; i < 3 && !st; i++) {
    kc_kernel *k = NULL;
    st = kc_define(rt, names[i], src[i], NULL);
    if (!st) st = kc_kernel_create(rt, names[i], NULL, &k);
    kc_dim3 grid = {8, 1, 1}, block = {1, 1, 1};
    kc_arg args[] = {KC_ARG_BUF(b)};
    if (!st) st = kc_launch(k, ctx, &grid, &block, args, 1);
    float y[8];
    if (!st) st = kc_buffer_read(b, 0, y, sizeof y);
    for (int j = 0; !st && j < 8; j++) wrong += y[j] != (float)(i + 1 + j);
    kc_kernel_destroy(k);
  }
  kc_stats s;
  kc_stats_get(rt, &s);
  const char *url = kc_remote_url(rt);
  printf("status=%s wrong=%d compiles=%llu remote=%s hits=%llu errors=%llu\n", kc_status_name(st), wrong,
         (unsigned long long)s.compiles, url ? url : "(none)", (unsigned long long)s.remote_hits,
         (unsigned long long)s.remote_errors);
  if (st) printf("error: %s\n", kc_errmsg(rt));
  kc_buffer_destroy(b);
  kc_context_destroy(ctx);
  kc_runtime_destroy(rt);
  return st || wrong;
}
