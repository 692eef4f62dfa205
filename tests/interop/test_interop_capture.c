/* SPDX-License-Identifier: MIT */
/*
 * test_interop_capture.c -- the core's capture safety without a GPU: the
 * real host backend, whose table is copied with one change, a
 * stream_capturing that answers what the test says (CUDA's graph capture,
 * the only backend that has one, needs a GPU: its real run is
 * test_interop_cuda under bench/gpu/check.sh). While the launch's stream
 * "captures", kc_launch_ex and kc_launch_args_ex compile nothing and link
 * nothing: a kernel without code for the world, or without a link in the
 * context (the first launch, after a reset, after a redefinition), gets
 * KC_EBUSY naming kc_kernel_prepare; a linked one launches.
 */
#include "kc_internal.h"
#include "kc_test.h"

static _Atomic int capturing;
static bool fake_capturing(void *bctx, void *native) {
  (void)bctx, (void)native;
  return atomic_load(&capturing);
}

static const char SRC[] = "KC_KERNEL void k(KC_GLOBAL float *y) { y[kc_global_id(0)] += 1.0f; }\n";

static void test_capture(void **state) {
  (void)state;
  static kc__backend be;
  be = *kc__backend_of(KC_BACKEND_HOST);
  be.stream_capturing = fake_capturing;
  kc_options o;
  kc_options_init(&o);
  o.host_cc = kct_host_cc();
  o.cache_disable = 1;
  kc_runtime *rt;
  KCT_OK(NULL, kc__runtime_open(&o, &be, &rt));
  kc_context *ctx;
  KCT_OK(rt, kc_context_create(rt, 0, &ctx));
  kc_stream *s;
  KCT_OK(rt, kc_stream_create(ctx, &s));
  kc_buffer *b;
  KCT_OK(rt, kc_buffer_create(ctx, 4 * sizeof(float), &b));
  kct_define(rt, "k", SRC);
  kc_kernel *k;
  KCT_OK(rt, kc_kernel_create(rt, "k", NULL, &k));
  kc_launch_config c;
  KCT_OK(rt, kc_launch_config_init(&c));
  c.block = (kc_dim3){4, 1, 1};
  c.stream = s;
  kc_arg args[] = {KC_ARG_BUF(b)};
  kc_stats st0 = kct_stats(rt);

  atomic_store(&capturing, 1); /* nothing compiled yet */
  KCT_STATUS(rt, KC_EBUSY, kc_launch_ex(k, ctx, &c, args, 1));
  KCT_CONTAINS(kc_errmsg(rt), "not compiled for the current world");
  KCT_CONTAINS(kc_errmsg(rt), "kc_kernel_prepare(k, ctx)");
  atomic_store(&capturing, 0);
  KCT_OK(rt, kc_kernel_compile(k)); /* compiled, not linked */
  atomic_store(&capturing, 1);
  KCT_STATUS(rt, KC_EBUSY, kc_launch_ex(k, ctx, &c, args, 1));
  KCT_CONTAINS(kc_errmsg(rt), "not linked in this context");
  kc_stats st1 = kct_stats(rt);
  assert_int_equal(st1.compiles - st0.compiles, 1); /* kc_kernel_compile's only */
  assert_int_equal(st1.links, st0.links);

  atomic_store(&capturing, 0);
  KCT_OK(rt, kc_launch_ex(k, ctx, &c, args, 1)); /* links */
  atomic_store(&capturing, 1);
  for (int i = 0; i < 3; i++) KCT_OK(rt, kc_launch_ex(k, ctx, &c, args, 1)); /* cached: recorded */
  KCT_OK(rt, kc_stream_sync(s)); /* the host runs a stream's launches on its thread */
  float y[4];
  KCT_OK(rt, kc_buffer_read(b, 0, y, sizeof y));
  assert_float_equal(y[0], 4.0f, 0);
  /* the slow path with its code linked also launches (another handle) */
  kc_kernel *k2;
  KCT_OK(rt, kc_kernel_create(rt, "k", NULL, &k2));
  KCT_OK(rt, kc_launch_ex(k2, ctx, &c, args, 1));

  /* a reset drops the link: under capture the relink is refused */
  KCT_OK(rt, kc_context_reset(ctx));
  KCT_STATUS(rt, KC_EBUSY, kc_launch_ex(k, ctx, &c, args, 1));
  KCT_CONTAINS(kc_errmsg(rt), "not linked");
  /* a redefinition ends the code's world: no compile under capture */
  atomic_store(&capturing, 0);
  KCT_OK(rt, kc_launch_ex(k, ctx, &c, args, 1));
  kct_define(rt, "k", "KC_KERNEL void k(KC_GLOBAL float *y) { y[kc_global_id(0)] += 2.0f; }\n");
  atomic_store(&capturing, 1);
  kc_stats st2 = kct_stats(rt);
  KCT_STATUS(rt, KC_EBUSY, kc_launch_ex(k, ctx, &c, args, 1));
  KCT_CONTAINS(kc_errmsg(rt), "not compiled for the current world");

  /* bound arguments: the same rules */
  kc_args *a;
  atomic_store(&capturing, 0);
  KCT_OK(rt, kc_args_create(k, ctx, args, 1, &a)); /* compiles the new code */
  atomic_store(&capturing, 1);
  KCT_STATUS(rt, KC_EBUSY, kc_launch_args_ex(a, &c));
  KCT_CONTAINS(kc_errmsg(rt), "not linked");
  atomic_store(&capturing, 0);
  KCT_OK(rt, kc_launch_args_ex(a, &c));
  atomic_store(&capturing, 1);
  KCT_OK(rt, kc_launch_args_ex(a, &c));
  kc_stats st3 = kct_stats(rt);
  assert_int_equal(st3.compiles - st2.compiles, 1); /* kc_args_create's */
  assert_int_equal(st3.links - st2.links, 1); /* the launch outside the capture */
  /* the context's own queue is not the capturing stream: launches there compile as usual */
  c.stream = NULL;
  KCT_OK(rt, kc_launch_ex(k2, ctx, &c, args, 1));
  atomic_store(&capturing, 0);
  kc_args_destroy(a);
  kc_runtime_destroy(rt);
}

int main(int argc, char **argv) {
  int rc = kct_main_init(argc, argv);
  if (rc >= 0) return rc;
  if (kct_backend != KC_BACKEND_HOST) {
    printf("SKIPPED: the capture suite runs on the host backend (--backend host)\n");
    return 77;
  }
  const struct CMUnitTest tests[] = {KCT_TEST(test_capture)};
  return KCT_RUN(tests);
}
