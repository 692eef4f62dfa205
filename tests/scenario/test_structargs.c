/* SPDX-License-Identifier: MIT */
/*
 * test_structargs.c -- by-value parameters of any type the compiler knows:
 * a struct and a union from named definitions, a vector type (float4) and
 * half where the backend has it, in one kernel source that runs on every
 * backend. Their sizes and alignments come from the backend's compiler (the
 * parameter probe), so a launch passes the bytes through and gets them back
 * intact, and an argument of the wrong size gets the very same KC_EARGS
 * message on every backend (the expected strings below are one for all).
 */
#include "kc_test.h"

#include <stdlib.h>

/* What the kernels see, laid out as C lays it out here. */
typedef struct p_host {
  char c;
  long l; /* 8 bytes in OpenCL C and in LP64 C */
  int i;
  float f;
} p_host; /* 24 bytes, alignment 8 */
typedef union u_host {
  int i;
  float f;
  unsigned char b[8];
} u_host; /* 8 bytes, alignment 4 */
typedef struct f4_host {
  float x, y, z, w;
} __attribute__((aligned(16))) f4_host;

static const char SRC_P[] = "typedef struct { char c; long l; int i; float f; } P;";
static const char SRC_U[] = "typedef union { int i; float f; uchar b[8]; } U;";
static const char SRC_SA[] =
    "KC_KERNEL void sa(KC_GLOBAL float *out, P p, U u, float4 v, int n) {\n"
    "  size_t i = kc_global_id(0);\n"
    "  if (i != 0) return;\n"
    "  out[0] = (float)p.c; out[1] = (float)p.l; out[2] = (float)p.i; out[3] = p.f;\n"
    "  out[4] = u.f; out[5] = (float)u.b[7];\n"
    "  out[6] = v.x; out[7] = v.y; out[8] = v.z; out[9] = v.w; out[10] = (float)n;\n"
    "}\n";

static kc_kernel *define_sa(kc_runtime *rt) {
  kct_define(rt, "P", SRC_P);
  kct_define(rt, "U", SRC_U);
  kct_define(rt, "sa", SRC_SA);
  return kct_kernel(rt, "sa", NULL);
}

static void values(p_host *p, u_host *u, f4_host *v, int *n) {
  memset(p, 0, sizeof *p);
  p->c = 7;
  p->l = 1L << 40;
  p->i = -3;
  p->f = 2.5f;
  memset(u, 0, sizeof *u);
  u->f = 0.75f;
  u->b[7] = 9;
  *v = (f4_host){1.0f, 2.0f, 3.0f, 4.0f};
  *n = 11;
}

/* sa's five arguments: buf, then the values of values(), with args over
 * them (the values stay where args point: the struct is not copied). */
typedef struct sa_call {
  p_host p;
  u_host u;
  f4_host v;
  int n;
  kc_arg args[5];
} sa_call;

static void sa_call_init(sa_call *c, kc_buffer *buf) {
  values(&c->p, &c->u, &c->v, &c->n);
  kc_arg args[] = {KC_ARG_BUF(buf), KC_ARG_VAL(c->p), KC_ARG_VAL(c->u), KC_ARG_VAL(c->v), KC_ARG_VAL(c->n)};
  memcpy(c->args, args, sizeof args);
}

/* Defines sa in rt and makes its arguments in *c (sa_call_init); sa's handle. */
static kc_kernel *define_sa_call(sa_call *c, kc_runtime *rt, kc_buffer *buf) {
  sa_call_init(c, buf);
  return define_sa(rt);
}

static void expect_out(const float *out) {
  const float want[11] = {7.0f, (float)(1L << 40), -3.0f, 2.5f, 0.75f, 9.0f, 1.0f, 2.0f, 3.0f, 4.0f, 11.0f};
  for (int i = 0; i < 11; i++)
    if (out[i] != want[i]) fail_msg("out[%d] is %g, expected %g", i, (double)out[i], (double)want[i]);
}

static void test_struct_union_vector_arguments(void **state) {
  kct_fixture *f = *state;
  sa_call c;
  kc_kernel *k = define_sa_call(&c, f->rt, f->buf);
  kc_arg *args = c.args;
  kc_dim3 grid = {1, 1, 1}, block = {1, 1, 1};
  KCT_OK(f->rt, kc_launch(k, f->ctx, &grid, &block, args, 5));
  KCT_OK(f->rt, kc_context_finish(f->ctx));
  KCT_OK(f->rt, kc_buffer_read(f->buf, 0, f->out, sizeof f->out));
  expect_out(f->out);
  /* bound arguments copy the values into rooms of the type's alignment */
  memset(f->out, 0, sizeof f->out);
  KCT_OK(f->rt, kc_buffer_write(f->buf, 0, f->out, sizeof f->out));
  kc_args *a = NULL;
  KCT_OK(f->rt, kc_args_create(k, f->ctx, args, 5, &a));
  values(&c.p, &c.u, &c.v, &c.n);
  c.p.f = -1.0f; /* the bound copy is what runs */
  KCT_OK(f->rt, kc_launch_args(a, &grid, &block));
  KCT_OK(f->rt, kc_launch_args(a, &grid, &block)); /* and its fast path */
  KCT_OK(f->rt, kc_context_finish(f->ctx));
  KCT_OK(f->rt, kc_buffer_read(f->buf, 0, f->out, sizeof f->out));
  expect_out(f->out);
  kc_args_destroy(a);
  kc_kernel_destroy(k);
}

/* The message a wrong size gets, the same words on every backend. */
static void test_wrong_size_same_message(void **state) {
  kct_fixture *f = *state;
  sa_call c;
  kc_kernel *k = define_sa_call(&c, f->rt, f->buf);
  kc_arg *args = c.args;
  kc_dim3 grid = {1, 1, 1}, block = {1, 1, 1};
  args[1].size = 20;
  for (int pass = 0; pass < 2; pass++) { /* a compile, then a linked kernel */
    KCT_STATUS(f->rt, KC_EARGS, kc_launch(k, f->ctx, &grid, &block, args, 5));
    assert_string_equal(kc_errmsg(f->rt),
                        "kernel 'sa' argument 1 (P p) is a 24-byte value (alignment 8); 20 bytes were given");
  }
  args[1].size = sizeof c.p;
  args[3].size = 12; /* a float3's bytes for a float4 */
  KCT_STATUS(f->rt, KC_EARGS, kc_launch(k, f->ctx, &grid, &block, args, 5));
  assert_string_equal(
      kc_errmsg(f->rt),
      "kernel 'sa' argument 3 (float4 v) is a 16-byte value (alignment 16); 12 bytes were given");
  kc_args *a = NULL;
  KCT_STATUS(f->rt, KC_EARGS, kc_args_create(k, f->ctx, args, 5, &a));
  assert_string_equal(
      kc_errmsg(f->rt),
      "kernel 'sa' argument 3 (float4 v) is a 16-byte value (alignment 16); 12 bytes were given");
  args[3].size = sizeof c.v;
  KCT_OK(f->rt, kc_args_create(k, f->ctx, args, 5, &a));
  short small = 1;
  KCT_STATUS(f->rt, KC_EARGS, kc_args_set(a, 2, KC_ARG_VAL(small)));
  assert_string_equal(kc_errmsg(f->rt),
                      "kernel 'sa' argument 2 is a 8-byte value (alignment 4); 2 bytes were given");
  kc_args_destroy(a);
  kc_kernel_destroy(k);
  /* only built-in types (OpenCL sizes them from the compiler's names of
   * them, without running the probe): the same numbers, the same words */
  kct_define(f->rt, "bi", "KC_KERNEL void bi(KC_GLOBAL float *out, float4 v, uint n) { out[0] = v.w + n; }");
  kc_kernel *bi = kct_kernel(f->rt, "bi", NULL);
  uint32_t un = 2;
  kc_arg bargs[] = {KC_ARG_BUF(f->buf), KC_ARG_VAL(c.v), KC_ARG_VAL(un)};
  KCT_OK(f->rt, kc_launch(bi, f->ctx, &grid, &block, bargs, 3));
  KCT_OK(f->rt, kc_context_finish(f->ctx));
  KCT_OK(f->rt, kc_buffer_read(f->buf, 0, f->out, sizeof(float)));
  assert_true(f->out[0] == 6.0f);
  bargs[1].size = 8;
  KCT_STATUS(f->rt, KC_EARGS, kc_launch(bi, f->ctx, &grid, &block, bargs, 3));
  assert_string_equal(
      kc_errmsg(f->rt),
      "kernel 'bi' argument 1 (float4 v) is a 16-byte value (alignment 16); 8 bytes were given");
  bargs[1].size = sizeof c.v;
  bargs[2].size = 8;
  KCT_STATUS(f->rt, KC_EARGS, kc_launch(bi, f->ctx, &grid, &block, bargs, 3));
  assert_string_equal(kc_errmsg(f->rt),
                      "kernel 'bi' argument 2 (uint n) is a 4-byte value (alignment 4); 8 bytes were given");
  kc_kernel_destroy(bi);
}

/* From the disk cache: the signature, alignment included, comes back with
 * the artifact (a second runtime on the same directory compiles nothing),
 * so the arguments work and a wrong size gets the same message. */
static void test_signature_from_the_disk_cache(void **state) {
  (void)state;
  char dir[KCT_DIR_LEN];
  kct_mkdtemp(dir, sizeof dir, "structargs");
  unsetenv("KC_CACHE_DISABLE");
  kc_options opt;
  kc_options_init(&opt);
  opt.cache_dir = dir;
  for (int run = 0; run < 2; run++) {
    kc_runtime *rt = kct_runtime(&opt);
    kc_context *ctx = kct_context(rt);
    kc_buffer *b = kct_buffer(rt, ctx, KCT_FX_N);
    sa_call c;
    kc_kernel *k = define_sa_call(&c, rt, b);
    kc_arg *args = c.args;
    kc_dim3 grid = {1, 1, 1}, block = {1, 1, 1};
    KCT_OK(rt, kc_launch(k, ctx, &grid, &block, args, 5));
    float out[KCT_FX_N];
    KCT_OK(rt, kc_context_finish(ctx));
    KCT_OK(rt, kc_buffer_read(b, 0, out, sizeof out));
    expect_out(out);
    args[2].size = 4;
    KCT_STATUS(rt, KC_EARGS, kc_launch(k, ctx, &grid, &block, args, 5));
    assert_string_equal(kc_errmsg(rt),
                        "kernel 'sa' argument 2 (U u) is a 8-byte value (alignment 4); 4 bytes were given");
    kc_stats s = kct_stats(rt);
    assert_int_equal(s.compiles, run == 0 ? 1 : 0);
    assert_int_equal(s.disk_hits, run == 0 ? 0 : 1);
    kct_destroy(rt);
  }
  kct_memory_only();
  kct_rmrf(dir);
}

static const char SRC_HAS_HALF[] = "KC_KERNEL void has_half(KC_GLOBAL float *out) {\n"
                                   "#if defined(cl_khr_fp16) || (defined(KC_BACKEND_HOST) && "
                                   "defined(__FLT16_MAX__) && !defined(__TINYC__))\n"
                                   "  out[0] = 1.0f;\n"
                                   "#else\n"
                                   "  out[0] = 2.0f;\n"
                                   "#endif\n"
                                   "}\n";
static const char SRC_HK[] = "KC_KERNEL void hk(KC_GLOBAL float *out, half h, int n) {\n"
                             "  out[0] = (float)h; out[1] = (float)n;\n"
                             "}\n";

/* half, where the backend has it (OpenCL with cl_khr_fp16; the host backend
 * with a C compiler that has _Float16: cc here, not tcc). */
static void test_half_argument(void **state) {
  (void)state;
  kc_options opt;
  kc_options_init(&opt);
  opt.host_cc = "cc";
  kc_runtime *rt = kct_runtime(&opt);
  kc_context *ctx = kct_context(rt);
  kc_buffer *b = kct_buffer(rt, ctx, 4);
  kct_define(rt, "has_half", SRC_HAS_HALF);
  kc_kernel *hh = kct_kernel(rt, "has_half", NULL);
  float out[4] = {0};
  KCT_OK(rt, kct_run(hh, ctx, b, 1, out));
  /* cc (gcc 12 on x86-64) has _Float16: on the host backend the type must be there */
  if (kct_backend == KC_BACKEND_HOST) assert_true(out[0] == 1.0f);
  if (out[0] != 1.0f) {
    print_message("(no half on the %s backend here: skipped)\n", kct_backend_name);
    kct_destroy(rt);
    skip();
  }
  kct_define(rt, "hk", SRC_HK);
  kc_kernel *k = kct_kernel(rt, "hk", NULL);
  uint16_t h = 0x3E00; /* 1.5 in binary16 */
  int n = 5;
  kc_arg args[] = {KC_ARG_BUF(b), KC_ARG_VAL(h), KC_ARG_VAL(n)};
  kc_dim3 grid = {1, 1, 1}, block = {1, 1, 1};
  KCT_OK(rt, kc_launch(k, ctx, &grid, &block, args, 3));
  KCT_OK(rt, kc_context_finish(ctx));
  KCT_OK(rt, kc_buffer_read(b, 0, out, sizeof out));
  assert_true(out[0] == 1.5f && out[1] == 5.0f);
  float wrong = 1.5f;
  args[1] = KC_ARG_VAL(wrong);
  KCT_STATUS(rt, KC_EARGS, kc_launch(k, ctx, &grid, &block, args, 3));
  assert_string_equal(kc_errmsg(rt),
                      "kernel 'hk' argument 1 (half h) is a 2-byte value (alignment 2); 4 bytes were given");
  kct_destroy(rt);
}

KCT_MAIN(KCT_FX_TEST(test_struct_union_vector_arguments), KCT_FX_TEST(test_wrong_size_same_message),
         KCT_TEST(test_signature_from_the_disk_cache), KCT_TEST(test_half_argument))
