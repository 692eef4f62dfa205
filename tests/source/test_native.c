/* SPDX-License-Identifier: MIT */
/*
 * test_native.c -- kernels as people already write them (issue 26):
 * OpenCL C defined with KC_LANG_OPENCL, accepted as written on the OpenCL
 * backend (run on PoCL, checked against references computed here) and
 * refused on the others with KC_EUNAVAILABLE naming the language and the
 * backend; the same exactness as the dialect (a helper redefined, a
 * built-in name defined later, pins, the disk cache, file reloads); the
 * scanner's built-ins (no edge per built-in, one on the language's
 * watcher). Run on every backend as native_<backend>.
 *
 * Third-party kernels, as written (the small kernels themselves, in the
 * style of their source):
 *  - medianFilter, transpose (local memory, reqd_work_group_size) and
 *    mandelbrot (#pragma OPENCL EXTENSION, float2 *, ushort const): from
 *    PyOpenCL's examples (examples/median-filter.py, examples/transpose.py,
 *    examples/demo_mandelbrot.py), https://github.com/inducer/pyopencl,
 *    MIT licence, Copyright (c) 2009-2024 Andreas Kloeckner and
 *    contributors. BLOCK_SIZE, which transpose.py fills in with Python's
 *    % formatting, is written out as 16.
 */
#include "kc_test.h"

#include "kc_internal.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>

/* ------------------------------------------------------------ sources */

static const char median_cl[] =
    "__kernel void medianFilter(__global const float *img, __global float *result, __global const int "
    "*width, __global const int *height)\n"
    "{\n"
    "    int w = *width;\n"
    "    int h = *height;\n"
    "    int posx = get_global_id(1);\n"
    "    int posy = get_global_id(0);\n"
    "    int i = w*posy + posx;\n"
    "    // Keeping the edge pixels the same\n"
    "    if( posx == 0 || posy == 0 || posx == w-1 || posy == h-1 )\n"
    "    {\n"
    "        result[i] = img[i];\n"
    "    }\n"
    "    else\n"
    "    {\n"
    "        float pixelValue;\n"
    "        float pixelValues[9];\n"
    "        // Fill array\n"
    "        pixelValues[0] = img[i - 1 - w];\n"
    "        pixelValues[1] = img[i - w];\n"
    "        pixelValues[2] = img[i + 1 - w];\n"
    "        pixelValues[3] = img[i - 1];\n"
    "        pixelValues[4] = img[i];\n"
    "        pixelValues[5] = img[i + 1];\n"
    "        pixelValues[6] = img[i - 1 + w];\n"
    "        pixelValues[7] = img[i + w];\n"
    "        pixelValues[8] = img[i + 1 + w];\n"
    "        // Bubble sort\n"
    "        for (int j = 0; j < 5; j++) {\n"
    "            for (int k = j + 1; k < 9; k++) {\n"
    "                if (pixelValues[j] > pixelValues[k]) {\n"
    "                    pixelValue = pixelValues[j];\n"
    "                    pixelValues[j] = pixelValues[k];\n"
    "                    pixelValues[k] = pixelValue;\n"
    "                }\n"
    "            }\n"
    "        }\n"
    "        result[i] = pixelValues[4];\n"
    "    }\n"
    "}\n";

static const char transpose_cl[] =
    "#define BLOCK_SIZE 16\n"
    "#define A_BLOCK_STRIDE (BLOCK_SIZE * a_width)\n"
    "#define A_T_BLOCK_STRIDE (BLOCK_SIZE * a_height)\n"
    "\n"
    "__kernel __attribute__((reqd_work_group_size(BLOCK_SIZE, BLOCK_SIZE, 1)))\n"
    "void transpose(\n"
    "  __global float *a_t, __global float *a,\n"
    "  unsigned a_width, unsigned a_height)\n"
    "{\n"
    "  int base_idx_a   =\n"
    "    get_group_id(0) * BLOCK_SIZE +\n"
    "    get_group_id(1) * A_BLOCK_STRIDE;\n"
    "  int base_idx_a_t =\n"
    "    get_group_id(1) * BLOCK_SIZE +\n"
    "    get_group_id(0) * A_T_BLOCK_STRIDE;\n"
    "\n"
    "  int glob_idx_a   = base_idx_a + get_local_id(0) + a_width * get_local_id(1);\n"
    "  int glob_idx_a_t = base_idx_a_t + get_local_id(0) + a_height * get_local_id(1);\n"
    "\n"
    "  __local float a_local[BLOCK_SIZE][BLOCK_SIZE+1];\n"
    "\n"
    "  a_local[get_local_id(1)][get_local_id(0)] = a[glob_idx_a];\n"
    "\n"
    "  barrier(CLK_LOCAL_MEM_FENCE);\n"
    "\n"
    "  a_t[glob_idx_a_t] = a_local[get_local_id(0)][get_local_id(1)];\n"
    "}\n";

static const char mandel_cl[] = "#pragma OPENCL EXTENSION cl_khr_byte_addressable_store : enable\n"
                                "__kernel void mandelbrot(__global float2 *q,\n"
                                "                     __global ushort *output, ushort const maxiter)\n"
                                "{\n"
                                "    int gid = get_global_id(0);\n"
                                "    float nreal, real = 0;\n"
                                "    float imag = 0;\n"
                                "    output[gid] = 0;\n"
                                "    for(int curiter = 0; curiter < maxiter; curiter++) {\n"
                                "        nreal = real*real - imag*imag + q[gid].x;\n"
                                "        imag = 2* real*imag + q[gid].y;\n"
                                "        real = nreal;\n"
                                "        if (real*real + imag*imag > 4.0f)\n"
                                "             output[gid] = curiter;\n"
                                "    }\n"
                                "}\n";

/* kcache's own: a helper and a float4 taken by value. */
static const char scale_cl[] = "float twice(float x) { return 2.0f * x; }\n"
                               "\n"
                               "__kernel void scale(__global float *y, float4 v) {\n"
                               "  int i = get_global_id(0);\n"
                               "  y[i] = twice(v.x + v.y + v.z + v.w) + (float)i;\n"
                               "}\n";

/* ------------------------------------------------------------ helpers */

static bool on_opencl(void) { return kct_backend == KC_BACKEND_OPENCL; }

static void load(kc_runtime *rt, const char *file, const char *text) {
  KCT_OK(rt, kc_define_file_lang(rt, file, text, strlen(text), KC_LANG_OPENCL, NULL, NULL, NULL, NULL));
}

static kc_buffer *buf_of(kc_runtime *rt, kc_context *ctx, const void *data, size_t size) {
  kc_buffer *b;
  KCT_OK(rt, kc_buffer_create(ctx, size, &b));
  if (data) KCT_OK(rt, kc_buffer_write(b, 0, data, size));
  return b;
}

/* ------------------------------------------------ refused elsewhere */

static void test_refused_on_other_backend(void **state) {
  (void)state;
  kc_runtime *rt = kct_runtime(NULL);
  load(rt, "scale.cl", scale_cl);
  /* a dialect kernel that reaches the native helper */
  kct_define(rt, "use_twice",
             "KC_KERNEL void use_twice(KC_GLOBAL float *y) { y[kc_global_id(0)] = twice(1.0f); }");
  kc_kernel *k = kct_kernel(rt, "scale", NULL), *u = kct_kernel(rt, "use_twice", NULL);
  if (on_opencl()) {
    KCT_OK(rt, kc_kernel_compile(k));
    KCT_OK(rt, kc_kernel_compile(u));
  } else {
    KCT_STATUS(rt, KC_EUNAVAILABLE, kc_kernel_compile(k));
    KCT_CONTAINS(kc_errmsg(rt), "'scale' is OpenCL C (KC_LANG_OPENCL)");
    KCT_CONTAINS(kc_errmsg(rt), kct_backend_name);
    KCT_STATUS(rt, KC_EUNAVAILABLE, kc_kernel_compile(u));
    KCT_CONTAINS(kc_errmsg(rt),
                 "kernel 'use_twice' reaches 'twice' (defined by file 'scale.cl'), which is OpenCL C");
    /* a launch says the same */
    kc_context *ctx = kct_context(rt);
    kc_buffer *b = kct_buffer(rt, ctx, 4);
    KCT_STATUS(rt, KC_EUNAVAILABLE, kct_run(k, ctx, b, 4, NULL));
    KCT_CONTAINS(kc_errmsg(rt), "OpenCL C");
  }
  KCT_STATUS(rt, KC_EINVAL, kc_define_lang(rt, "bad", "int bad;", (kc_language)7, NULL));
  KCT_STATUS(rt, KC_EINVAL,
             kc_define_file_lang(rt, "f.cl", "int bad;", 8, (kc_language)-1, NULL, NULL, NULL, NULL));
  assert_string_equal(kc_language_name(KC_LANG_OPENCL), "opencl");
  assert_string_equal(kc_language_name(KC_LANG_CUDA), "cuda");
  assert_string_equal(kc_language_name(KC_LANG_DIALECT), "dialect");
  assert_null(kc_language_name((kc_language)9));
  kc_kernel_destroy(k);
  kc_kernel_destroy(u);
  kct_destroy(rt);
}

/* The language is part of a definition: the same text under another tag
 * is a change (a new world); the same text and tag is none. */
static void test_language_is_part_of_the_definition(void **state) {
  (void)state;
  kc_runtime *rt = kct_runtime(NULL);
  const char *src = "float h(float x) { return x; }";
  kc_world w1, w2, w3;
  KCT_OK(rt, kc_define_lang(rt, "h", src, KC_LANG_OPENCL, &w1));
  KCT_OK(rt, kc_define_lang(rt, "h", src, KC_LANG_OPENCL, &w2));
  assert_int_equal(w1, w2);
  KCT_OK(rt, kc_define(rt, "h", src, &w3));
  assert_int_equal(w3, w2 + 1);
  size_t changed = 0;
  KCT_OK(rt, kc_define_file_lang(rt, "h.cl", src, strlen(src), KC_LANG_OPENCL, NULL, NULL, &changed, NULL));
  assert_int_equal(changed, 1);
  KCT_OK(rt, kc_define_file_lang(rt, "h.cl", src, strlen(src), KC_LANG_OPENCL, NULL, NULL, &changed, NULL));
  assert_int_equal(changed, 0);
  KCT_OK(rt, kc_define_file(rt, "h.cl", src, strlen(src), &changed, NULL));
  assert_int_equal(changed, 1);
  kct_destroy(rt);
}

/* ------------------------------------------------ the scanner's built-ins */

static bool has_edge(const kc__closure *c, const char *name) {
  for (uint32_t i = 0; i < c->nedges; i++)
    if (!strcmp(c->edges[i].binding->name, name)) return true;
  return false;
}

static void resolve(kc_runtime *rt, const char *entry, kc__closure *c) {
  kc__spec *spec;
  KCT_OK(rt, kc__spec_intern(rt, entry, "", &spec));
  KCT_OK(rt, kc__resolve(rt, spec, kc_world_latest(rt), c));
}

/* A native definition records no edge per built-in it mentions, but one
 * on its language's watcher; a built-in name the table defines is an edge
 * like any other; the same names in the dialect are edges each. */
static void test_builtins_are_not_edges(void **state) {
  (void)state;
  kc_runtime *rt = kct_runtime(NULL);
  load(rt, "transpose.cl", transpose_cl);
  kc__closure c;
  resolve(rt, "transpose", &c);
  assert_true(has_edge(&c, "#!opencl"));
  assert_true(has_edge(&c, "BLOCK_SIZE")); /* the file's macros are the table's */
  assert_true(has_edge(&c, "A_BLOCK_STRIDE"));
  assert_true(has_edge(&c, "a_local")); /* a local variable: an over-approximation, as in the dialect */
  static const char *const builtins[] = {"get_group_id", "get_local_id", "barrier", "CLK_LOCAL_MEM_FENCE",
                                         "reqd_work_group_size"};
  for (size_t i = 0; i < sizeof builtins / sizeof *builtins; i++)
    if (has_edge(&c, builtins[i])) fail_msg("'%s' is an edge of the native transpose", builtins[i]);
  kc__closure_free(rt, &c);

  /* defined by the user: a dependency */
  kct_define(rt, "barrier", "#define barrier(f) mem_fence(f)");
  resolve(rt, "transpose", &c);
  assert_true(has_edge(&c, "barrier"));
  kc__closure_free(rt, &c);
  /* undefined again: the world's closure is the one of a table that never
   * defined it (the oracle's find: its failed compile said KC_ENOTFOUND) */
  KCT_OK(rt, kc_undefine(rt, "barrier", NULL));
  resolve(rt, "transpose", &c);
  assert_false(has_edge(&c, "barrier"));
  assert_true(has_edge(&c, "#!opencl"));
  kc__closure_free(rt, &c);

  /* CUDA: threadIdx, __syncthreads, float4, make_float4 */
  const char *cu = "extern \"C\" __global__ void cuk(float4 *y) {\n"
                   "  __shared__ float s[32];\n"
                   "  s[threadIdx.x] = 1.0f;\n  __syncthreads();\n"
                   "  y[blockIdx.x] = make_float4(s[0], 0, 0, 0);\n}\n";
  KCT_OK(rt, kc_define_lang(rt, "cuk", cu, KC_LANG_CUDA, NULL));
  resolve(rt, "cuk", &c);
  assert_true(has_edge(&c, "#!cuda"));
  static const char *const cuda_builtins[] = {"threadIdx", "blockIdx",    "__syncthreads",
                                              "float4",    "make_float4", "x"};
  for (size_t i = 0; i < sizeof cuda_builtins / sizeof *cuda_builtins; i++)
    if (has_edge(&c, cuda_builtins[i])) fail_msg("'%s' is an edge of the native cuk", cuda_builtins[i]);
  kc__closure_free(rt, &c);

  /* the dialect keeps every name an edge */
  kct_define(rt, "dk", "KC_KERNEL void dk(KC_GLOBAL float *y) { y[get_global_id(0)] = 1.0f; }");
  resolve(rt, "dk", &c);
  assert_true(has_edge(&c, "get_global_id"));
  assert_false(has_edge(&c, "#!opencl"));
  kc__closure_free(rt, &c);
  kct_destroy(rt);
}

/* A CUDA file's extern "C" { ... } block is read through: each definition
 * in it is filed in an extern "C" { ... } block of its own (a block, so that
 * a variable stays a definition and static stays allowed), a #define as it
 * is. */
static void test_cuda_extern_c_block(void **state) {
  (void)state;
  kc_runtime *rt = kct_runtime(NULL);
  const char *cu = "#include <cuda_fp16.h>\n"
                   "extern \"C\" {\n"
                   "#define N 4\n"
                   "__device__ float sq(float x) { return x * x; }\n"
                   "__global__ void k1(float *y) { y[threadIdx.x] = sq(N); }\n"
                   "}\n"
                   "extern \"C\" __global__ void k2(float *y) { y[0] = 1; }\n";
  kc__change *v;
  size_t n;
  KCT_OK(rt, kc__split_file_lang(rt, "k.cu", cu, strlen(cu), KC_LANG_CUDA, &v, &n));
  assert_int_equal(n, 4);
  assert_string_equal(v[0].name, "N");
  assert_string_equal(v[0].source, "#include <cuda_fp16.h>\n#define N 4");
  assert_string_equal(v[1].name, "sq");
  assert_string_equal(
      v[1].source, "#include <cuda_fp16.h>\nextern \"C\" { __device__ float sq(float x) { return x * x; } }");
  assert_string_equal(v[2].name, "k1");
  KCT_CONTAINS(v[2].source, "extern \"C\" { __global__ void k1(");
  assert_string_equal(v[3].name, "k2");
  assert_null(strstr(v[3].source, "extern \"C\" extern"));
  for (size_t i = 0; i < n; i++) assert_int_equal(v[i].lang, KC_LANG_CUDA);
  kc__free_changes(rt, v, n);
  /* unclosed */
  const char *open = "extern \"C\" {\n__global__ void k3(float *y) { y[0] = 1; }\n";
  KCT_STATUS(rt, KC_EINVAL, kc__split_file_lang(rt, "o.cu", open, strlen(open), KC_LANG_CUDA, &v, &n));
  KCT_CONTAINS(kc_errmsg(rt), "extern \"C\" block");
  kct_destroy(rt);
}

/* CUDA C++ files with namespaces and overloads (issue 26, item 3): a
 * definition in namespace blocks (nested, unnamed, A::B, inline) is filed
 * with them around it; a name defined again (overloads, or in two
 * namespaces) is one definition of every text of it; a qualified use
 * (ops::twice) depends on the name and on the namespace's name; what is
 * not supported is refused, naming the line. */
static void split_cu(kc_runtime *rt, const char *text, kc__change **v, size_t *n) {
  KCT_OK(rt, kc__split_file_lang(rt, "n.cu", text, strlen(text), KC_LANG_CUDA, v, n));
}

static void refused_cu(kc_runtime *rt, const char *text, const char *why) {
  kc__change *v;
  size_t n;
  KCT_STATUS(rt, KC_EINVAL, kc__split_file_lang(rt, "n.cu", text, strlen(text), KC_LANG_CUDA, &v, &n));
  KCT_CONTAINS(kc_errmsg(rt), why);
}

static void test_cuda_namespaces(void **state) {
  (void)state;
  kc_runtime *rt = kct_runtime(NULL);
  const char *cu =
      "#include <cuda_fp16.h>\n"
      "namespace a {\n"
      "namespace b { __device__ float f(float x) { return x; } }\n"
      "#define K 3\n"
      "__device__ float f(int x) { return (float)x; }\n"
      "}\n"
      "namespace { __device__ int hidden(int x) { return x + 1; } }\n"
      "namespace c::d { constexpr int depth = 2; }\n"
      "inline namespace v1 { struct P { float x; }; }\n"
      "extern \"C\" {\nnamespace e { __global__ void k(float *y) { y[0] = a::b::f(1.0f); } }\n}\n"
      "__device__ float f(float x, float y) { return x + y; }\n";
  kc__change *v;
  size_t n;
  split_cu(rt, cu, &v, &n);
  assert_int_equal(n, 6);
  assert_string_equal(v[0].name, "f"); /* three overloads in three scopes: one definition */
  assert_string_equal(v[0].source,
                      "#include <cuda_fp16.h>\n"
                      "namespace a { namespace b { __device__ float f(float x) { return x; } } }\n"
                      "namespace a { __device__ float f(int x) { return (float)x; } }\n"
                      "__device__ float f(float x, float y) { return x + y; }");
  assert_string_equal(v[1].name, "K"); /* a macro: no namespace */
  assert_string_equal(v[1].source, "#include <cuda_fp16.h>\n#define K 3");
  assert_string_equal(v[2].name, "hidden");
  KCT_CONTAINS(v[2].source, "namespace { __device__ int hidden(int x) { return x + 1; } }");
  assert_string_equal(v[3].name, "depth");
  KCT_CONTAINS(v[3].source, "namespace c::d { constexpr int depth = 2; }");
  assert_string_equal(v[4].name, "P");
  KCT_CONTAINS(v[4].source, "inline namespace v1 { struct P { float x; }; }");
  assert_string_equal(v[5].name, "k");
  KCT_CONTAINS(v[5].source, "namespace e { extern \"C\" { __global__ void k(float *y)");
  kc__free_changes(rt, v, n);

  /* loaded: the kernel depends on f (every overload) and, over-approximating,
   * on the names a and b; a later definition of b ends its code */
  KCT_OK(rt, kc_define_file_lang(rt, "n.cu", cu, strlen(cu), KC_LANG_CUDA, NULL, NULL, NULL, NULL));
  kc__closure c;
  resolve(rt, "k", &c);
  assert_true(has_edge(&c, "f"));
  assert_true(has_edge(&c, "a"));
  assert_true(has_edge(&c, "b"));
  assert_int_equal(c.ndefs, 2); /* f, then k */
  kc__closure_free(rt, &c);

  /* an overload calling another (one definition: not a cycle), and an
   * out-of-line member (joins its class, after `const`) */
  const char *ov = "__device__ float g(float x) { return x * 2.0f; }\n"
                   "__device__ float g(int x) { return g((float)x); }\n"
                   "template <typename T> struct Box { T v; __device__ T get() const; };\n"
                   "template <typename T> __device__ T Box<T>::get() const { return v; }\n"
                   "extern \"C\" __global__ void gk(float *y) { Box<float> b{g(3)}; y[0] = b.get(); }\n";
  split_cu(rt, ov, &v, &n);
  assert_int_equal(n, 3);
  assert_string_equal(v[1].name, "Box");
  KCT_CONTAINS(v[1].source, "};\ntemplate <typename T> __device__ T Box<T>::get() const { return v; }");
  kc__free_changes(rt, v, n);
  KCT_OK(rt, kc_define_file_lang(rt, "ov.cu", ov, strlen(ov), KC_LANG_CUDA, NULL, NULL, NULL, NULL));
  resolve(rt, "gk", &c);
  assert_true(has_edge(&c, "g"));
  assert_true(has_edge(&c, "Box"));
  kc__closure_free(rt, &c);

  /* refused, with the reason */
  refused_cu(rt, "namespace a {\n__device__ float f(float x) { return x; }\n", "ends inside this namespace");
  refused_cu(rt, "#define M 1\n#define M 2\n", "a macro's name cannot be defined again");
  refused_cu(rt, "struct V { float x; };\n__device__ V operator+(V a, V b) { return V{a.x + b.x}; }\n",
             "an operator");
  refused_cu(rt, "namespace a { __device__ int f() { return 1; } }\nusing namespace a;\n", "using-directive");
  refused_cu(rt, "__device__ float Q::get() const { return 1.0f; }\n", "which this file does not define");
  refused_cu(rt, "namespace a {\n#include <x.h>\n}\n", "#include inside a namespace");
  refused_cu(rt, "namespace ::a { }\n", "cannot start with '::'");
  /* OpenCL C and the dialect still take one definition per name */
  const char *twice = "float t(float x) { return x; }\nfloat t(float x, float y) { return x + y; }\n";
  KCT_STATUS(rt, KC_EINVAL, kc__split_file_lang(rt, "t.cl", twice, strlen(twice), KC_LANG_OPENCL, &v, &n));
  KCT_CONTAINS(kc_errmsg(rt), "is defined twice");
  kct_destroy(rt);
}

/* ----------------------------------------- PyOpenCL's kernels on PoCL */

static void test_pyopencl_median_filter(void **state) {
  (void)state;
  if (!on_opencl()) skip();
  kc_runtime *rt = kct_runtime(NULL);
  load(rt, "median.cl", median_cl);
  kc_context *ctx = kct_context(rt);
  enum { W = 37, H = 23 };
  static float img[W * H], want[W * H], got[W * H];
  srand(26);
  for (int i = 0; i < W * H; i++) img[i] = (float)(rand() % 1000) / 7.0f;
  for (int y = 0; y < H; y++)
    for (int x = 0; x < W; x++) {
      int i = W * y + x;
      if (x == 0 || y == 0 || x == W - 1 || y == H - 1) {
        want[i] = img[i];
        continue;
      }
      float v[9];
      for (int dy = -1, m = 0; dy <= 1; dy++)
        for (int dx = -1; dx <= 1; dx++) v[m++] = img[i + dx + W * dy];
      for (int a = 1; a < 9; a++)
        for (int b = a; b > 0 && v[b - 1] > v[b]; b--) {
          float t = v[b];
          v[b] = v[b - 1];
          v[b - 1] = t;
        }
      want[i] = v[4];
    }
  int w = W, h = H;
  kc_buffer *bi = buf_of(rt, ctx, img, sizeof img), *bo = buf_of(rt, ctx, NULL, sizeof got);
  kc_buffer *bw = buf_of(rt, ctx, &w, sizeof w), *bh = buf_of(rt, ctx, &h, sizeof h);
  kc_kernel *k = kct_kernel(rt, "medianFilter", NULL);
  kc_arg args[] = {KC_ARG_BUF(bi), KC_ARG_BUF(bo), KC_ARG_BUF(bw), KC_ARG_BUF(bh)};
  /* PyOpenCL launches it on the global size img.shape = (H, W), local None */
  kc_dim3 grid = {H, W, 1}, block = {1, 1, 1};
  KCT_OK(rt, kc_launch(k, ctx, &grid, &block, args, 4));
  KCT_OK(rt, kc_buffer_read(bo, 0, got, sizeof got));
  for (int i = 0; i < W * H; i++)
    if (got[i] != want[i]) fail_msg("median at %d: %g, expected %g", i, got[i], want[i]);
  /* argument checking holds: a scalar where a buffer is */
  kc_arg bad[] = {KC_ARG_BUF(bi), KC_ARG_BUF(bo), KC_ARG_VAL(w), KC_ARG_BUF(bh)};
  KCT_STATUS(rt, KC_EARGS, kc_launch(k, ctx, &grid, &block, bad, 4));
  kc_kernel_destroy(k);
  kct_destroy(rt);
}

static void test_pyopencl_transpose(void **state) {
  (void)state;
  if (!on_opencl()) skip();
  kc_runtime *rt = kct_runtime(NULL);
  load(rt, "transpose.cl", transpose_cl);
  kc_context *ctx = kct_context(rt);
  enum { WIDTH = 64, HEIGHT = 32 };
  static float a[WIDTH * HEIGHT], at[WIDTH * HEIGHT];
  for (int i = 0; i < WIDTH * HEIGHT; i++) a[i] = (float)i * 0.5f;
  kc_buffer *ba = buf_of(rt, ctx, a, sizeof a), *bt = buf_of(rt, ctx, NULL, sizeof at);
  kc_kernel *k = kct_kernel(rt, "transpose", NULL);
  unsigned aw = WIDTH, ah = HEIGHT;
  kc_arg args[] = {KC_ARG_BUF(bt), KC_ARG_BUF(ba), KC_ARG_VAL(aw), KC_ARG_VAL(ah)};
  kc_dim3 grid = {WIDTH / 16, HEIGHT / 16, 1}, block = {16, 16, 1};
  KCT_OK(rt, kc_launch(k, ctx, &grid, &block, args, 4));
  KCT_OK(rt, kc_buffer_read(bt, 0, at, sizeof at));
  /* a is HEIGHT rows of WIDTH; a_t is WIDTH rows of HEIGHT */
  for (int r = 0; r < HEIGHT; r++)
    for (int c = 0; c < WIDTH; c++)
      if (at[c * HEIGHT + r] != a[r * WIDTH + c])
        fail_msg("a_t[%d][%d] = %g, expected %g", c, r, at[c * HEIGHT + r], a[r * WIDTH + c]);
  /* reqd_work_group_size is the compiler's to enforce: another block size fails */
  kc_dim3 grid8 = {WIDTH / 8, HEIGHT / 8, 1}, block8 = {8, 8, 1};
  kc_status st = kc_launch(k, ctx, &grid8, &block8, args, 4);
  if (st == KC_OK) st = kc_context_finish(ctx);
  assert_int_not_equal(st, KC_OK);
  kc_kernel_destroy(k);
  kct_destroy(rt);
}

static void test_pyopencl_mandelbrot(void **state) {
  (void)state;
  if (!on_opencl()) skip();
  kc_runtime *rt = kct_runtime(NULL);
  load(rt, "mandelbrot.cl", mandel_cl);
  kc_context *ctx = kct_context(rt);
  enum { W = 48, H = 32 };
  static float q[W * H * 2];
  static uint16_t got[W * H], want[W * H], fused[W * H];
  const uint16_t maxiter = 30;
  for (int y = 0; y < H; y++)
    for (int x = 0; x < W; x++) {
      int i = y * W + x;
      q[2 * i] = -2.13f + 2.6f * (float)x / W;
      q[2 * i + 1] = -1.3f + 2.6f * (float)y / H;
      float re = 0, im = 0, nre, fre = 0, fim = 0;
      want[i] = fused[i] = 0;
      for (int it = 0; it < maxiter; it++) {
        nre = re * re - im * im + q[2 * i];
        im = 2 * re * im + q[2 * i + 1];
        re = nre;
        if (re * re + im * im > 4.0f) want[i] = (uint16_t)it;
        /* as a compiler that contracts a*b+c into fma computes it */
        nre = fmaf(fre, fre, -(fim * fim)) + q[2 * i];
        fim = fmaf(2 * fre, fim, q[2 * i + 1]);
        fre = nre;
        if (fmaf(fre, fre, fim * fim) > 4.0f) fused[i] = (uint16_t)it;
      }
    }
  kc_buffer *bq = buf_of(rt, ctx, q, sizeof q), *bo = buf_of(rt, ctx, NULL, sizeof got);
  kc_kernel *k = kct_kernel(rt, "mandelbrot", NULL);
  kc_arg args[] = {KC_ARG_BUF(bq), KC_ARG_BUF(bo), KC_ARG_VAL(maxiter)};
  kc_dim3 grid = {W * H, 1, 1}, block = {1, 1, 1};
  KCT_OK(rt, kc_launch(k, ctx, &grid, &block, args, 3));
  KCT_OK(rt, kc_buffer_read(bo, 0, got, sizeof got));
  /* the same float operations in the same order, contracted into fma or
   * not (OpenCL C allows either): after a point escapes, its values grow
   * until they overflow, and the last iteration counted is where that
   * happens, which contraction moves */
  int same = 0;
  for (int i = 0; i < W * H; i++) same += got[i] == want[i] || got[i] == fused[i];
  if (same < W * H * 99 / 100) fail_msg("mandelbrot: %d of %d points match the reference", same, W * H);
  /* a 4-byte scalar where the ushort is: refused */
  int wrong = 30;
  kc_arg bad[] = {KC_ARG_BUF(bq), KC_ARG_BUF(bo), KC_ARG_VAL(wrong)};
  KCT_STATUS(rt, KC_EARGS, kc_launch(k, ctx, &grid, &block, bad, 3));
  kc_kernel_destroy(k);
  kct_destroy(rt);
}

/* --------------------- enumerators, mixed preludes, refusals (review) */

/* An enumerator of a table enum whose name is also a built-in (ON and x are
 * OpenCL's, x is CUDA's) is found like any enumerator: the built-in skip is
 * for names the table neither defines nor declares. An enum that declares
 * such a name later ends the code that skipped it. */
static void test_builtin_named_enumerator(void **state) {
  (void)state;
  kc_runtime *rt = kct_runtime(NULL);
  KCT_OK(rt, kc_define_lang(rt, "usemode", "__kernel void usemode(__global int *y) { y[0] = ON + x; }",
                            KC_LANG_OPENCL, NULL));
  kc__closure c;
  resolve(rt, "usemode", &c);
  assert_false(has_edge(&c, "mode"));
  kc__closure_free(rt, &c);
  kc_kernel *k = NULL;
  if (on_opencl()) { /* cached: compiled while ON and x were built-ins (it fails: they are not OpenCL's) */
    KCT_OK(rt, kc_kernel_create(rt, "usemode", NULL, &k));
    assert_int_not_equal(kc_kernel_compile(k), KC_OK);
  }
  KCT_OK(rt, kc_define_lang(rt, "mode", "enum mode { ON = 5, x = 2 };", KC_LANG_OPENCL, NULL));
  resolve(rt, "usemode", &c);
  assert_true(has_edge(&c, "mode"));
  kc__closure_free(rt, &c);
  if (on_opencl()) {
    kc_context *ctx = kct_context(rt);
    kc_buffer *b = kct_buffer(rt, ctx, 1);
    int32_t out = 0;
    kc_arg args[] = {KC_ARG_BUF(b)};
    kc_dim3 grid = {1, 1, 1}, block = {1, 1, 1};
    KCT_OK(rt, kc_launch(k, ctx, &grid, &block, args, 1));
    KCT_OK(rt, kc_buffer_read(b, 0, &out, sizeof out));
    assert_int_equal(out, 7);
    kc_kernel_destroy(k);
  }
  /* CUDA: x in a table enum (NVRTC compiles it in test_source_nvrtc) */
  KCT_OK(rt, kc_define_lang(rt, "cux", "extern \"C\" __global__ void cux(int *y) { y[threadIdx.x] = x; }",
                            KC_LANG_CUDA, NULL));
  resolve(rt, "cux", &c);
  assert_true(has_edge(&c, "mode"));
  kc__closure_free(rt, &c);
  kct_destroy(rt);
}

/* A native OpenCL kernel with its own fixed-width typedef, mixed with a
 * dialect helper: the prelude's typedefs are kcache's names (kc__t_*)
 * spelled as the dialect's by macros only around the dialect's text, so
 * the kernel's typedef is its own. */
static void test_native_typedefs_with_dialect_helper(void **state) {
  (void)state;
  kc_runtime *rt = kct_runtime(NULL);
  KCT_OK(rt, kc_define_lang(rt, "mixed",
                            "typedef unsigned int uint32_t;\n"
                            "__kernel void mixed(__global uint32_t *y) {\n"
                            "  y[get_global_id(0)] = (uint32_t)dial_twice((int)get_global_id(0));\n}\n",
                            KC_LANG_OPENCL, NULL));
  kct_define(rt, "dial_twice", "KC_DEVICE int64_t dial_twice(int32_t v) { return (int64_t)2 * v; }");
  kc__spec *spec;
  KCT_OK(rt, kc__spec_intern(rt, "mixed", "", &spec));
  char *tu = NULL;
  size_t len = 0;
  KCT_OK(rt, kc__tu_for(rt, kc__backend_of(KC_BACKEND_OPENCL), spec, kc_world_latest(rt), &tu, &len));
  KCT_CONTAINS(tu, "typedef uint kc__t_uint32_t;\n#define uint32_t kc__t_uint32_t\n");
  KCT_CONTAINS(tu, "#undef uint32_t\n#undef int64_t\n#undef uint64_t\n#line 1 \"mixed\"");
  kc__free(rt, tu);
  if (on_opencl()) {
    kc_context *ctx = kct_context(rt);
    kc_buffer *b = kct_buffer(rt, ctx, 8);
    kc_kernel *k = kct_kernel(rt, "mixed", NULL);
    kc_arg args[] = {KC_ARG_BUF(b)};
    kc_dim3 grid = {8, 1, 1}, block = {1, 1, 1};
    KCT_OK(rt, kc_launch(k, ctx, &grid, &block, args, 1));
    uint32_t out[8];
    KCT_OK(rt, kc_buffer_read(b, 0, out, sizeof out));
    assert_int_equal(out[5], 10);
    kc_kernel_destroy(k);
  }
  kct_destroy(rt);
}

/* OpenCL image and sampler parameters are refused up front, naming the
 * parameter, not by a probe compile that fails on the struct it builds. */
static void test_image_parameters_refused(void **state) {
  (void)state;
  kc_runtime *rt = kct_runtime(NULL);
  static const char *const texts[][3] = {
      {"img", "__kernel void img(__read_only image2d_t src, __global float *y) { y[0] = 1.0f; }", "src"},
      {"smp", "__kernel void smp(__global float *y, sampler_t s) { y[0] = 1.0f; }", "s"},
      {"wimg", "__kernel void wimg(write_only image3d_t dst) { }", "dst"}};
  for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
    KCT_OK(rt, kc_define_lang(rt, texts[i][0], texts[i][1], KC_LANG_OPENCL, NULL));
    kc__spec *spec;
    KCT_OK(rt, kc__spec_intern(rt, texts[i][0], "", &spec));
    char *tu = NULL;
    size_t len = 0;
    KCT_STATUS(rt, KC_EUNAVAILABLE,
               kc__tu_for(rt, kc__backend_of(KC_BACKEND_OPENCL), spec, kc_world_latest(rt), &tu, &len));
    KCT_CONTAINS(kc_errmsg(rt), "image and sampler parameters are not supported");
    char want[80];
    snprintf(want, sizeof want, "parameter '%s'", texts[i][2]);
    KCT_CONTAINS(kc_errmsg(rt), want);
    assert_null(tu);
  }
  if (on_opencl()) { /* and so does the runtime's own compile */
    kc_kernel *k;
    KCT_OK(rt, kc_kernel_create(rt, "img", NULL, &k));
    KCT_STATUS(rt, KC_EUNAVAILABLE, kc_kernel_compile(k));
    KCT_CONTAINS(kc_errmsg(rt), "image and sampler parameters are not supported");
    kc_kernel_destroy(k);
  }
  kct_destroy(rt);
}

/* Names are global across files and languages: an OpenCL kernel whose
 * BLOCK is a CUDA file's #define is refused, naming BLOCK and its file. */
static void test_name_collision_message(void **state) {
  (void)state;
  kc_runtime *rt = kct_runtime(NULL);
  static const char cu[] =
      "#define BLOCK 256\nextern \"C\" __global__ void cu_k(float *y) { y[0] = BLOCK; }\n";
  KCT_OK(rt, kc_define_file_lang(rt, "reduce.cu", cu, strlen(cu), KC_LANG_CUDA, NULL, NULL, NULL, NULL));
  KCT_OK(rt, kc_define_lang(rt, "cl_k", "__kernel void cl_k(__global float *y) { y[0] = BLOCK; }",
                            KC_LANG_OPENCL, NULL));
  kc__spec *spec;
  KCT_OK(rt, kc__spec_intern(rt, "cl_k", "", &spec));
  char *tu = NULL;
  size_t len = 0;
  KCT_STATUS(rt, KC_EUNAVAILABLE,
             kc__tu_for(rt, kc__backend_of(KC_BACKEND_OPENCL), spec, kc_world_latest(rt), &tu, &len));
  KCT_CONTAINS(kc_errmsg(rt),
               "kernel 'cl_k' reaches 'BLOCK' (defined by file 'reduce.cu'), which is CUDA C++");
  KCT_CONTAINS(kc_errmsg(rt), "names are global across files and languages");
  assert_null(tu);
  kct_destroy(rt);
}

/* ------------------ never stale: helpers and built-ins redefined */

static float run_scale(kc_runtime *rt, kc_context *ctx, kc_kernel *k, kc_buffer *b) {
  float v[4] = {1, 2, 3, 4}; /* a float4 by value */
  kc_arg args[] = {KC_ARG_BUF(b), KC__ARG(v, (uint32_t)sizeof v, KC_ARG_SCALAR)};
  kc_dim3 grid = {4, 1, 1}, block = {1, 1, 1};
  KCT_OK(rt, kc_launch(k, ctx, &grid, &block, args, 2));
  float out[4];
  KCT_OK(rt, kc_buffer_read(b, 0, out, sizeof out));
  return out[3];
}

/* Redefining a helper of a native kernel gives the new result; a pinned
 * thread keeps the old; reloading the file changes only what changed. */
static void test_helper_redefined(void **state) {
  (void)state;
  if (!on_opencl()) skip();
  kc_runtime *rt = kct_runtime(NULL);
  load(rt, "scale.cl", scale_cl);
  kc_context *ctx = kct_context(rt);
  kc_buffer *b = kct_buffer(rt, ctx, 4);
  kc_kernel *k = kct_kernel(rt, "scale", NULL);
  assert_float_equal(run_scale(rt, ctx, k, b), 2.0f * 10.0f + 3.0f, 0);
  kc_world pinned;
  KCT_OK(rt, kc_pin(rt, &pinned));
  KCT_OK(rt, kc_define_lang(rt, "twice", "float twice(float x) { return 3.0f * x; }", KC_LANG_OPENCL, NULL));
  assert_float_equal(run_scale(rt, ctx, k, b), 23.0f, 0); /* the pinned world's */
  KCT_OK(rt, kc_unpin(rt));
  assert_float_equal(run_scale(rt, ctx, k, b), 33.0f, 0);
  /* a reload of the file as it was: back to twice */
  size_t changed;
  KCT_OK(rt, kc_define_file_lang(rt, "scale.cl", scale_cl, strlen(scale_cl), KC_LANG_OPENCL, NULL, NULL,
                                 &changed, NULL));
  assert_int_equal(changed, 1);
  assert_float_equal(run_scale(rt, ctx, k, b), 23.0f, 0);
  /* a dialect helper may replace it too: the closure mixes, with the prelude */
  kct_define(rt, "twice", "KC_DEVICE float twice(float x) { return 4.0f * x; }");
  assert_float_equal(run_scale(rt, ctx, k, b), 43.0f, 0);
  kc_kernel_destroy(k);
  kct_destroy(rt);
}

/* A built-in that the table defines later (any language) ends the native
 * code that used the built-in: mad is OpenCL's until the user defines it. */
static void test_builtin_defined_later(void **state) {
  (void)state;
  if (!on_opencl()) skip();
  kc_runtime *rt = kct_runtime(NULL);
  KCT_OK(rt, kc_define_lang(rt, "usemad",
                            "__kernel void usemad(__global float *y) {\n"
                            "  y[get_global_id(0)] = mad((float)get_global_id(0), 2.0f, 1.0f);\n}\n",
                            KC_LANG_OPENCL, NULL));
  kc_context *ctx = kct_context(rt);
  kc_buffer *b = kct_buffer(rt, ctx, 8);
  kc_kernel *k = kct_kernel(rt, "usemad", NULL);
  float out[8];
  KCT_OK(rt, kct_run(k, ctx, b, 8, out));
  assert_float_equal(out[5], 11.0f, 0);
  kc_code_info before = kct_code(rt, k);
  assert_true(before.max_world == KC_WORLD_FOREVER);
  /* an unrelated definition changes nothing */
  kct_define(rt, "unrelated", "#define unrelated 1");
  assert_int_equal(kct_code(rt, k).id, before.id);
  kct_define(rt, "mad", "KC_DEVICE float mad(float a, float b, float c) { return a * b + c + 100.0f; }");
  KCT_OK(rt, kct_run(k, ctx, b, 8, out));
  assert_float_equal(out[5], 111.0f, 0);
  KCT_OK(rt, kc_undefine(rt, "mad", NULL));
  KCT_OK(rt, kct_run(k, ctx, b, 8, out));
  assert_float_equal(out[5], 11.0f, 0);
  kc_kernel_destroy(k);
  kct_destroy(rt);
}

/* A __local pointer parameter is local memory: kc_kernel_param says
 * KC_ARG_LOCAL, and kc_launch_ex takes its size per group. */
static void test_local_parameter(void **state) {
  (void)state;
  if (!on_opencl()) skip();
  kc_runtime *rt = kct_runtime(NULL);
  KCT_OK(rt, kc_define_lang(rt, "group_sum",
                            "__kernel void group_sum(__global const float *x, __global float *out,\n"
                            "                        __local float *tmp) {\n"
                            "  size_t l = get_local_id(0), n = get_local_size(0);\n"
                            "  tmp[l] = x[get_global_id(0)];\n"
                            "  barrier(CLK_LOCAL_MEM_FENCE);\n"
                            "  if (l == 0) {\n"
                            "    float s = 0;\n"
                            "    for (size_t i = 0; i < n; i++) s += tmp[i];\n"
                            "    out[get_group_id(0)] = s;\n"
                            "  }\n"
                            "}\n",
                            KC_LANG_OPENCL, NULL));
  kc_kernel *k = kct_kernel(rt, "group_sum", NULL);
  kc_param_info p;
  KCT_OK(rt, kc_kernel_param(k, 2, &p));
  assert_int_equal(p.kind, KC_ARG_LOCAL);
  assert_string_equal(p.name, "tmp");
  KCT_OK(rt, kc_kernel_param(k, 0, &p));
  assert_int_equal(p.kind, KC_ARG_BUFFER);
  kc_context *ctx = kct_context(rt);
  float x[64], out[4];
  for (int i = 0; i < 64; i++) x[i] = (float)i;
  kc_buffer *bx = buf_of(rt, ctx, x, sizeof x), *bo = buf_of(rt, ctx, NULL, sizeof out);
  kc_arg args[] = {KC_ARG_BUF(bx), KC_ARG_BUF(bo), KC_ARG_LOCAL_BYTES(16 * sizeof(float))};
  kc_launch_config cfg = kct_config(4, 16, NULL);
  KCT_OK(rt, kc_launch_ex(k, ctx, &cfg, args, 3));
  KCT_OK(rt, kc_buffer_read(bo, 0, out, sizeof out));
  for (int g = 0; g < 4; g++) assert_float_equal(out[g], (float)(16 * 16 * g + 120), 0);
  kc_kernel_destroy(k);
  kct_destroy(rt);
}

typedef struct held {
  kc_runtime *rt;
  kc_context *ctx;
  kc_kernel *k;
  kc_buffer *b;
  float out[8];
  kc_status st;
} held;

static void *launch_held(void *arg) {
  held *j = arg;
  j->st = kct_run(j->k, j->ctx, j->b, 8, j->out);
  return NULL;
}

/* A compile resolved before a built-in was defined and published after:
 * its code serves its own world only (the watcher remembers the world of
 * its last change), so the next launch compiles the user's definition. */
static void test_builtin_defined_during_compile(void **state) {
  (void)state;
  if (!on_opencl()) skip();
  kct_hold h;
  kct_hold_init(&h, false);
  kc_options o;
  kc_options_init(&o);
  o.log = kct_hold_log;
  o.log_ud = &h;
  o.log_level = KC_LOG_INFO;
  o.cache_disable = 1;
  held j = {.rt = kct_runtime(&o)};
  KCT_OK(j.rt, kc_define_lang(j.rt, "usemad2",
                              "__kernel void usemad2(__global float *y) {\n"
                              "  y[get_global_id(0)] = mad((float)get_global_id(0), 2.0f, 1.0f);\n}\n",
                              KC_LANG_OPENCL, NULL));
  j.ctx = kct_context(j.rt);
  j.b = kct_buffer(j.rt, j.ctx, 8);
  j.k = kct_kernel(j.rt, "usemad2", NULL);
  kct_hold_arm(&h);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, launch_held, &j), 0);
  kct_hold_wait_inside(&h);
  kct_define(j.rt, "mad", "KC_DEVICE float mad(float a, float b, float c) { return a * b + c + 100.0f; }");
  kct_hold_release(&h);
  pthread_join(t, NULL);
  KCT_OK(j.rt, j.st);
  assert_float_equal(j.out[5], 11.0f, 0); /* its own world's */
  float out[8];
  KCT_OK(j.rt, kct_run(j.k, j.ctx, j.b, 8, out));
  assert_float_equal(out[5], 111.0f, 0); /* the latest world's, not the code published late */
  kc_kernel_destroy(j.k);
  kct_destroy(j.rt);
  kct_hold_destroy(&h);
}

/* The disk cache: a second runtime on the same store loads the native
 * kernel instead of compiling it. */
static void test_disk_cache(void **state) {
  (void)state;
  if (!on_opencl()) skip();
  const char *off = getenv("KC_CACHE_DISABLE");
  if (off && !strcmp(off, "1")) skip(); /* the environment turns every disk cache off */
  char dir[KCT_DIR_LEN];
  kct_mkdtemp(dir, sizeof dir, "native");
  uint64_t hits = 0;
  for (int round = 0; round < 2; round++) {
    kc_options o;
    kc_options_init(&o);
    o.cache_dir = dir;
    kc_runtime *rt = kct_runtime(&o);
    load(rt, "scale.cl", scale_cl);
    kc_context *ctx = kct_context(rt);
    kc_buffer *b = kct_buffer(rt, ctx, 4);
    kc_kernel *k = kct_kernel(rt, "scale", NULL);
    assert_float_equal(run_scale(rt, ctx, k, b), 23.0f, 0);
    hits = kct_stats(rt).disk_hits;
    if (round == 0) assert_int_equal(kct_stats(rt).disk_writes, 1);
    kc_kernel_destroy(k);
    kct_destroy(rt);
  }
  assert_int_equal(hits, 1);
  kct_rmrf(dir);
}

/* ------------------------------------------------ CUDA C++, launched */

/* CuPy's RawKernel my_add (docs/source/user_guide/kernel.rst,
 * https://github.com/cupy/cupy, MIT licence) and a shared-memory block sum
 * of kcache's own; compiled through NVRTC without a GPU by source_nvrtc,
 * launched here when the CUDA backend has a device. */
static void test_cuda_launch(void **state) {
  (void)state;
  if (kct_backend != KC_BACKEND_CUDA) skip();
  kc_runtime *rt = kct_runtime(NULL);
  KCT_OK(rt, kc_define_lang(rt, "my_add",
                            "extern \"C\" __global__\n"
                            "void my_add(const float* x1, const float* x2, float* y) {\n"
                            "    int tid = blockDim.x * blockIdx.x + threadIdx.x;\n"
                            "    y[tid] = x1[tid] + x2[tid];\n"
                            "}\n",
                            KC_LANG_CUDA, NULL));
  const char *sum = "#define BLOCK 256\n"
                    "extern \"C\" {\n"
                    "__device__ float weight(float4 w, unsigned i) { return i % 2 ? w.x : w.y; }\n"
                    "__global__ void __launch_bounds__(BLOCK)\n"
                    "block_sum(const float* __restrict__ x, float* out, unsigned int n, float4 w) {\n"
                    "  __shared__ float s[BLOCK];\n"
                    "  unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                    "  s[threadIdx.x] = i < n ? x[i] * weight(w, i) : 0.0f;\n"
                    "  __syncthreads();\n"
                    "  for (unsigned int stride = blockDim.x / 2; stride > 0; stride >>= 1) {\n"
                    "    if (threadIdx.x < stride) s[threadIdx.x] += s[threadIdx.x + stride];\n"
                    "    __syncthreads();\n"
                    "  }\n"
                    "  if (threadIdx.x == 0) atomicAdd(out, s[0]);\n"
                    "}\n"
                    "}\n";
  KCT_OK(rt, kc_define_file_lang(rt, "sum.cu", sum, strlen(sum), KC_LANG_CUDA, NULL, NULL, NULL, NULL));
  kc_context *ctx = kct_context(rt);
  enum { N = 1000 };
  static float x1[N], x2[N], y[N];
  double want = 0;
  for (int i = 0; i < N; i++) {
    x1[i] = (float)i;
    x2[i] = (float)(i % 7);
    want += (double)x1[i] * (i % 2 ? 2.0 : 3.0);
  }
  kc_buffer *b1 = buf_of(rt, ctx, x1, sizeof x1), *b2 = buf_of(rt, ctx, x2, sizeof x2);
  kc_buffer *by = buf_of(rt, ctx, NULL, sizeof y);
  kc_kernel *add = kct_kernel(rt, "my_add", NULL), *bs = kct_kernel(rt, "block_sum", NULL);
  kc_arg a[] = {KC_ARG_BUF(b1), KC_ARG_BUF(b2), KC_ARG_BUF(by)};
  kc_dim3 grid = {N / 8, 1, 1}, block = {8, 1, 1};
  KCT_OK(rt, kc_launch(add, ctx, &grid, &block, a, 3));
  KCT_OK(rt, kc_buffer_read(by, 0, y, sizeof y));
  for (int i = 0; i < N; i++)
    if (y[i] != x1[i] + x2[i]) fail_msg("my_add[%d] = %g, expected %g", i, y[i], x1[i] + x2[i]);
  float zero = 0, total = 0, w[4] = {2, 3, 0, 0};
  unsigned n = N;
  kc_buffer *bo = buf_of(rt, ctx, &zero, sizeof zero);
  kc_arg sa[] = {KC_ARG_BUF(b1), KC_ARG_BUF(bo), KC_ARG_VAL(n),
                 KC__ARG(w, (uint32_t)sizeof w, KC_ARG_SCALAR)};
  kc_dim3 g2 = {(N + 255) / 256, 1, 1}, b2d = {256, 1, 1};
  KCT_OK(rt, kc_launch(bs, ctx, &g2, &b2d, sa, 4));
  KCT_OK(rt, kc_buffer_read(bo, 0, &total, sizeof total));
  if (fabs(total - want) > 1e-3 * want) fail_msg("block_sum = %g, expected %g", total, want);
  /* a helper redefined: the new weight */
  KCT_OK(rt, kc_define_lang(rt, "weight",
                            "extern \"C\" __device__ float weight(float4 w, unsigned i) { return w.x; }",
                            KC_LANG_CUDA, NULL));
  KCT_OK(rt, kc_buffer_write(bo, 0, &zero, sizeof zero));
  KCT_OK(rt, kc_launch(bs, ctx, &g2, &b2d, sa, 4));
  KCT_OK(rt, kc_buffer_read(bo, 0, &total, sizeof total));
  double want2 = 2.0 * (N - 1) * N / 2;
  if (fabs(total - want2) > 1e-3 * want2)
    fail_msg("block_sum after the redefinition = %g, expected %g", total, want2);
  /* a template, one handle per instantiation (name expressions) */
  KCT_OK(rt, kc_define_lang(rt, "scale_t",
                            "template <typename T, int N>\n"
                            "__global__ void scale_t(T *y, T a) {\n"
                            "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                            "  for (int j = 0; j < N; j++) y[i * N + j] *= a;\n"
                            "}\n",
                            KC_LANG_CUDA, NULL));
  kc_kernel *tf = kct_kernel(rt, "scale_t<float, 4>", NULL), *td = kct_kernel(rt, "scale_t<double, 2>", NULL);
  float yf[8] = {1, 2, 3, 4, 5, 6, 7, 8}, af = 2;
  double yd[8] = {1, 2, 3, 4, 5, 6, 7, 8}, ad = 3;
  kc_buffer *bf = buf_of(rt, ctx, yf, sizeof yf), *bd = buf_of(rt, ctx, yd, sizeof yd);
  kc_arg fa[] = {KC_ARG_BUF(bf), KC_ARG_VAL(af)}, da[] = {KC_ARG_BUF(bd), KC_ARG_VAL(ad)};
  kc_dim3 g1 = {1, 1, 1}, t2 = {2, 1, 1}, b4 = {4, 1, 1};
  KCT_OK(rt, kc_launch(tf, ctx, &g1, &t2, fa, 2)); /* 2 threads x 4 */
  KCT_OK(rt, kc_launch(td, ctx, &g1, &b4, da, 2)); /* 4 threads x 2 */
  KCT_OK(rt, kc_buffer_read(bf, 0, yf, sizeof yf));
  KCT_OK(rt, kc_buffer_read(bd, 0, yd, sizeof yd));
  for (int i = 0; i < 8; i++) {
    assert_float_equal(yf[i], 2.0f * (float)(i + 1), 0);
    assert_float_equal(yd[i], 3.0 * (i + 1), 0);
  }
  KCT_STATUS(rt, KC_EARGS, kc_launch(tf, ctx, &g1, &t2, da, 2)); /* a double where T=float */
  kc_kernel_destroy(tf);
  kc_kernel_destroy(td);
  kc_kernel_destroy(add);
  kc_kernel_destroy(bs);
  kct_destroy(rt);
}

int main(int argc, char **argv) {
  int rc = kct_main_init(argc, argv);
  if (rc >= 0) return rc;
  const struct CMUnitTest tests[] = {
      KCT_TEST(test_refused_on_other_backend),
      KCT_TEST(test_language_is_part_of_the_definition),
      KCT_TEST(test_builtins_are_not_edges),
      KCT_TEST(test_builtin_named_enumerator),
      KCT_TEST(test_native_typedefs_with_dialect_helper),
      KCT_TEST(test_image_parameters_refused),
      KCT_TEST(test_name_collision_message),
      KCT_TEST(test_cuda_extern_c_block),
      KCT_TEST(test_cuda_namespaces),
      KCT_TEST(test_pyopencl_median_filter),
      KCT_TEST(test_pyopencl_transpose),
      KCT_TEST(test_pyopencl_mandelbrot),
      KCT_TEST(test_helper_redefined),
      KCT_TEST(test_builtin_defined_later),
      KCT_TEST(test_disk_cache),
      KCT_TEST(test_cuda_launch),
      KCT_TEST(test_local_parameter),
      KCT_TEST(test_builtin_defined_during_compile),
  };
  return KCT_RUN(tests);
}
