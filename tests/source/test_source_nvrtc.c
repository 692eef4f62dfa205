/* SPDX-License-Identifier: MIT */
/*
 * test_source_nvrtc.c -- the sources of issue 14 compiled by NVRTC for the
 * CUDA backend on a machine without a GPU (kc__cuda_compile_only): the
 * table of a host runtime resolves the closure (a call only through a
 * macro in the kernel's body, a header with #pragma once included twice,
 * a paste of a macro parameter, a #define constant), the translation unit
 * is built as the engine builds it (the CUDA prelude, helper renames but
 * not for macros and headers, each definition with its headers inlined)
 * and NVRTC must compile it to PTX with the entry's name. Skipped (77)
 * when NVRTC cannot be loaded.
 */
#include "kc_test.h"

#include "kc_internal.h"

#include <stdio.h>
#include <stdlib.h>

static kc_runtime *rt;

static char *cuda_tu(const char *entry) {
  kc__spec *spec;
  KCT_OK(rt, kc__spec_intern(rt, entry, "", &spec));
  kc__closure c;
  KCT_OK(rt, kc__resolve(rt, spec, kc_world_latest(rt), &c));
  kc__sb sb;
  kc__sb_init(&sb, kc__rt_heap(rt));
  kc__sb_puts(&sb, kc__backend_of(KC_BACKEND_CUDA)->prelude);
  kc__sb_puts(&sb, "\n");
  for (uint32_t i = 0; i + 1 < c.ndefs; i++)
    if (!kc__def_is_header(c.defs[i]) && !kc__def_is_macro(c.defs[i]))
      kc__sb_printf(&sb, "#define %s kc__u_%s\n", c.defs[i]->binding->name, c.defs[i]->binding->name);
  for (uint32_t i = 0; i < c.ndefs; i++) {
    if (kc__def_is_header(c.defs[i])) continue;
    kc__sb_printf(&sb, "#line 1 \"%s\"\n", c.defs[i]->binding->name);
    KCT_OK(rt, kc__emit_def(rt, &sb, &c, c.defs[i]));
    kc__sb_puts(&sb, "\n");
  }
  kc__closure_free(rt, &c);
  char *tu = kc__sb_take(&sb);
  assert_non_null(tu);
  return tu;
}

static void test_issue14_sources_compile_for_cuda(void **state) {
  (void)state;
  kct_define(rt, "helper", "KC_DEVICE float helper(float x) { return x + 1.0f; }");
  kct_define(rt, "op_add", "KC_DEVICE float op_add(float x) { return x + 100.0f; }");
  kct_define(rt, "OP", "#define OP(name, x) op_ ## name(x)");
  kct_define(rt, "SCALE", "#define SCALE 3.0f");
  kct_define(rt, "common.h", "#pragma once\nKC_DEVICE float base_value(void) { return SCALE; }\n");
  kct_define(rt, "outer.h",
             "#include \"common.h\"\nKC_DEVICE float outer_value(void) { return 2.0f * base_value(); }\n");
  kct_define(rt, "k",
             "#include \"common.h\"\n#include \"outer.h\"\n"
             "KC_KERNEL void k(KC_GLOBAL float *y) {\n"
             "#define CALL(x) helper(x)\n"
             "  y[kc_global_id(0)] = CALL(1.0f) + OP(add, 2.0f) + outer_value() + base_value();\n"
             "}\n");
  char *tu = cuda_tu("k");
  KCT_CONTAINS(tu, "#define helper kc__u_helper"); /* the helper reached only through CALL */
  KCT_CONTAINS(tu, "#define op_add kc__u_op_add"); /* and the one reached through the paste */
  assert_null(strstr(tu, "#define SCALE kc__u_SCALE")); /* a macro keeps its own #define */
  const kc__bsvc svc = kc__bsvc_of(rt);
  void *out = NULL;
  size_t size = 0;
  kc_status st = kc__cuda_compile_only(&svc, tu, strlen(tu), "k", 90, true, &out, &size, NULL);
  if (st) fail_msg("NVRTC: %s: %s\n%s", kc_status_name(st), kc_errmsg(rt), tu);
  KCT_CONTAINS((const char *)out, ".entry k(");
  kc__free(rt, out);
  free(tu);
}

/* ------------------------------------------- CUDA C++ as written (issue 26) */

/* CuPy's user guide (docs/source/user_guide/kernel.rst, "Raw kernels" and
 * "Raw modules"), https://github.com/cupy/cupy, MIT licence, Copyright (c)
 * 2015 Preferred Infrastructure, Inc. and Preferred Networks, Inc.: the
 * RawKernel my_add, and the RawModule with test_sum and test_multiply in an
 * extern "C" block, whose parameter lists end lines with a splice. */
static const char cupy_my_add[] = "extern \"C\" __global__\n"
                                  "void my_add(const float* x1, const float* x2, float* y) {\n"
                                  "    int tid = blockDim.x * blockIdx.x + threadIdx.x;\n"
                                  "    y[tid] = x1[tid] + x2[tid];\n"
                                  "}\n";

static const char cupy_module[] =
    "extern \"C\"{\n"
    "\n"
    "__global__ void test_sum(const float* x1, const float* x2, float* y, \\\n"
    "                         unsigned int N)\n"
    "{\n"
    "    unsigned int tid = blockDim.x * blockIdx.x + threadIdx.x;\n"
    "    if (tid < N)\n"
    "    {\n"
    "        y[tid] = x1[tid] + x2[tid];\n"
    "    }\n"
    "}\n"
    "\n"
    "__global__ void test_multiply(const float* x1, const float* x2, float* y, \\\n"
    "                              unsigned int N)\n"
    "{\n"
    "    unsigned int tid = blockDim.x * blockIdx.x + threadIdx.x;\n"
    "    if (tid < N)\n"
    "    {\n"
    "        y[tid] = x1[tid] * x2[tid];\n"
    "    }\n"
    "}\n"
    "\n"
    "}\n";

/* kcache's own, in the classic shape of a shared-memory reduction: a
 * __device__ helper, __shared__, __launch_bounds__, __syncthreads, and a
 * float4 taken by value. (Its loop variable is not `k`: this file's first
 * test defines a kernel k, which a local k would reach, as any name does.) */
static const char reduce_cu[] =
    "#define BLOCK 256\n"
    "__device__ float weight(float4 w, unsigned i) { return i % 2 ? w.x : w.y; }\n"
    "extern \"C\" __global__ void __launch_bounds__(BLOCK)\n"
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
    "}\n";

/* The unit the CUDA backend would compile for entry, through NVRTC to PTX;
 * returns the PTX (free with kc__free). */
static char *native_ptx(const char *entry) {
  kc__spec *spec;
  KCT_OK(rt, kc__spec_intern(rt, entry, "", &spec));
  char *tu = NULL;
  size_t len = 0;
  KCT_OK(rt, kc__tu_for(rt, kc__backend_of(KC_BACKEND_CUDA), spec, kc_world_latest(rt), &tu, &len));
  /* as written: no dialect prelude when every definition is native */
  assert_null(strstr(tu, "kcache prelude"));
  const kc__bsvc svc = kc__bsvc_of(rt);
  void *out = NULL;
  size_t size = 0;
  kc_status st = kc__cuda_compile_only(&svc, tu, len, entry, 90, true, &out, &size, NULL);
  if (st) fail_msg("NVRTC: %s: %s\n%s", kc_status_name(st), kc_errmsg(rt), tu);
  kc__free(rt, tu);
  return out;
}

static void test_cuda_as_written(void **state) {
  (void)state;
  KCT_OK(rt, kc_define_lang(rt, "my_add", cupy_my_add, KC_LANG_CUDA, NULL));
  KCT_OK(rt, kc_define_file_lang(rt, "module.cu", cupy_module, strlen(cupy_module), KC_LANG_CUDA, NULL, NULL,
                                 NULL, NULL));
  KCT_OK(rt, kc_define_file_lang(rt, "reduce.cu", reduce_cu, strlen(reduce_cu), KC_LANG_CUDA, NULL, NULL,
                                 NULL, NULL));
  static const char *const entries[] = {"my_add", "test_sum", "test_multiply", "block_sum"};
  for (size_t i = 0; i < sizeof entries / sizeof *entries; i++) {
    char *ptx = native_ptx(entries[i]);
    char want[64];
    snprintf(want, sizeof want, ".entry %s(", entries[i]);
    KCT_CONTAINS(ptx, want); /* found by its name: extern "C" */
    if (!strcmp(entries[i], "block_sum")) {
      KCT_CONTAINS(ptx, ".shared");
      KCT_CONTAINS(ptx, ".maxntid 256");
    }
    kc__free(rt, ptx);
  }
  /* the host runtime's own compile refuses them, naming the language */
  kc_kernel *k;
  KCT_OK(rt, kc_kernel_create(rt, "my_add", NULL, &k));
  KCT_STATUS(rt, KC_EUNAVAILABLE, kc_kernel_compile(k));
  KCT_CONTAINS(kc_errmsg(rt), "CUDA C++ (KC_LANG_CUDA), which the host backend does not compile");
  kc_kernel_destroy(k);
  /* the parameters are read as written: three buffers, then scalars */
  kc__param *p;
  uint32_t n;
  KCT_OK(rt, kc__parse_params(rt, "test_sum",
                              "__global__ void test_sum(const float* x1, const float* x2, "
                              "float* y, \\\n    unsigned int N) {}",
                              &p, &n));
  assert_int_equal(n, 4);
  assert_true(p[2].is_buffer);
  assert_false(p[3].is_buffer);
  assert_string_equal(p[3].type, "unsigned int");
  kc__free_params(rt, p, n);
}

/* An entry C++ would mangle is refused before NVRTC runs; so is a helper. */
static void test_cuda_entry_checks(void **state) {
  (void)state;
  KCT_OK(rt, kc_define_lang(rt, "mangled", "__global__ void mangled(float *y) { y[0] = 1; }", KC_LANG_CUDA,
                            NULL));
  KCT_OK(rt, kc_define_lang(rt, "dev", "__device__ float dev(float x) { return x; }", KC_LANG_CUDA, NULL));
  kc__spec *spec;
  char *tu = NULL;
  size_t len;
  KCT_OK(rt, kc__spec_intern(rt, "mangled", "", &spec));
  KCT_STATUS(rt, KC_EINVAL,
             kc__tu_for(rt, kc__backend_of(KC_BACKEND_CUDA), spec, kc_world_latest(rt), &tu, &len));
  KCT_CONTAINS(kc_errmsg(rt), "is not declared extern \"C\"");
  KCT_OK(rt, kc__spec_intern(rt, "dev", "", &spec));
  KCT_STATUS(rt, KC_EINVAL,
             kc__tu_for(rt, kc__backend_of(KC_BACKEND_CUDA), spec, kc_world_latest(rt), &tu, &len));
  KCT_CONTAINS(kc_errmsg(rt), "is not declared __global__");
  assert_null(tu);
  /* extern "C" must be the entry's own: not in a comment, not a string, not
   * on a helper before it in the same text */
  static const char *const not_own[][2] = {
      {"cmt", "/* extern \"C\" */ __global__ void cmt(float *y) { y[0] = 1; }"},
      {"str", "__device__ const char *tag() { return \"extern \\\"C\\\"\"; }\n"
              "__global__ void str(float *y) { y[0] = tag()[0]; }"},
      {"two", "extern \"C\" __device__ float h2(float x) { return x; }\n"
              "__global__ void two(float *y) { y[0] = h2(1); }"},
      {"blk", "extern \"C\" { __device__ float h3(float x) { return x; } }\n"
              "__global__ void blk(float *y) { y[0] = h3(1); }"}};
  for (size_t i = 0; i < sizeof not_own / sizeof *not_own; i++) {
    KCT_OK(rt, kc_define_lang(rt, not_own[i][0], not_own[i][1], KC_LANG_CUDA, NULL));
    KCT_OK(rt, kc__spec_intern(rt, not_own[i][0], "", &spec));
    KCT_STATUS(rt, KC_EINVAL,
               kc__tu_for(rt, kc__backend_of(KC_BACKEND_CUDA), spec, kc_world_latest(rt), &tu, &len));
    KCT_CONTAINS(kc_errmsg(rt), "is not declared extern \"C\"");
  }
  /* and found where it is: in a block around the entry, or before it with
   * attributes and comments between */
  static const char *const own[][2] = {
      {"inblk",
       "extern \"C\" {\n// a comment; with { braces }\n__global__ void inblk(float *y) { y[0] = 1; }\n}"},
      {"attr",
       "extern /* linkage */ \"C\"\n__global__ void __launch_bounds__(64) attr(float *y) { y[0] = 1; }"}};
  for (size_t i = 0; i < sizeof own / sizeof *own; i++) {
    KCT_OK(rt, kc_define_lang(rt, own[i][0], own[i][1], KC_LANG_CUDA, NULL));
    char *ptx = native_ptx(own[i][0]);
    char want[64];
    snprintf(want, sizeof want, ".entry %s(", own[i][0]);
    KCT_CONTAINS(ptx, want);
    kc__free(rt, ptx);
  }
}

/* Templates: a kernel handle names an instantiation ("scale<float, 4>"),
 * which NVRTC instantiates through a name expression; each is its own
 * specialization, with its template arguments in its parameter types, and
 * its artifact carries the lowered name the driver finds it by. */
static const char scale_cu[] = "template <typename T, int N>\n"
                               "__global__ void scale(T *y, T a) {\n"
                               "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                               "#pragma unroll\n"
                               "  for (int j = 0; j < N; j++) y[i * N + j] *= a;\n"
                               "}\n";

static void expect_instantiation(const char *expr, const char *scalar, const char *lowered, uint32_t bytes) {
  kc__spec *spec;
  KCT_OK(rt, kc__spec_intern(rt, expr, "", &spec));
  char *tu = NULL;
  size_t len = 0;
  KCT_OK(rt, kc__tu_for(rt, kc__backend_of(KC_BACKEND_CUDA), spec, kc_world_latest(rt), &tu, &len));
  char want[64];
  snprintf(want, sizeof want, "sizeof(%s)", scalar); /* the probe of T a, with T substituted */
  KCT_CONTAINS(tu, want);
  const kc__bsvc svc = kc__bsvc_of(rt);
  void *out = NULL;
  size_t size = 0;
  kc_status st = kc__cuda_compile_only(&svc, tu, len, expr, 90, true, &out, &size, NULL);
  if (st) fail_msg("NVRTC: %s: %s\n%s", kc_status_name(st), kc_errmsg(rt), tu);
  char entry[96];
  snprintf(entry, sizeof entry, ".entry %s(", lowered);
  KCT_CONTAINS((const char *)out, entry);
  /* the lowered name at the end: "\0" name "\0" KCLOWER1 */
  assert_true(size > strlen(lowered) + 10);
  assert_memory_equal((const char *)out + size - 8, "KCLOWER1", 8);
  assert_string_equal((const char *)out + size - 9 - strlen(lowered), lowered);
  /* the signature NVRTC gives: a buffer, then a scalar of T's size */
  kc__param *p;
  uint32_t n;
  KCT_OK(rt, kc__parse_params(rt, "scale", scale_cu, &p, &n));
  KCT_OK(rt, kc__template_params(rt, expr, scale_cu, p, n));
  assert_string_equal(p[1].type, scalar);
  kc__tu t = {expr, tu, len, p, n, spec, NULL};
  uint64_t sig[2] = {KC__SIG(KC_ARG_BUFFER, 0),
                     KC__SIG(KC_ARG_SCALAR, UINT32_MAX)}; /* as the engine fills it */
  KCT_OK(rt, kc__cuda_compile_sig(&svc, &t, 90, true, sig, NULL));
  assert_true(sig[0] == KC__SIG(KC_ARG_BUFFER, 0));
  assert_true(KC__SIG_MATCH(sig[1]) == KC__SIG(KC_ARG_SCALAR, bytes));
  kc__free_params(rt, p, n);
  kc__free(rt, out);
  kc__free(rt, tu);
}

static void test_cuda_templates(void **state) {
  (void)state;
  KCT_OK(rt, kc_define_lang(rt, "scale", scale_cu, KC_LANG_CUDA, NULL));
  expect_instantiation("scale<float, 4>", "float", "_Z5scaleIfLi4EEvPT_S0_", 4);
  expect_instantiation("scale<double,2>", "double", "_Z5scaleIdLi2EEvPT_S0_", 8);
  /* handles: each instantiation its own specialization */
  kc_kernel *a, *b;
  KCT_OK(rt, kc_kernel_create(rt, "scale<float, 4>", NULL, &a));
  KCT_OK(rt, kc_kernel_create(rt, "scale<double,2>", NULL, &b));
  assert_ptr_not_equal(a->spec, b->spec);
  /* the host runtime refuses to compile them, naming the language */
  KCT_STATUS(rt, KC_EUNAVAILABLE, kc_kernel_compile(a));
  KCT_CONTAINS(kc_errmsg(rt), "CUDA C++");
  kc_kernel_destroy(a);
  kc_kernel_destroy(b);
  kc_kernel *k;
  static const char *const bad[] = {"scale<float", "scale<float>>", "scale<\"x\">",
                                    "scale<a;b>",  "<int>",         "scale<(int>"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    if (kc_kernel_create(rt, bad[i], NULL, &k) != KC_EINVAL)
      fail_msg("'%s' was taken as a kernel name", bad[i]);
  /* the template without arguments says how to name one */
  kc__spec *spec;
  char *tu = NULL;
  size_t len;
  KCT_OK(rt, kc__spec_intern(rt, "scale", "", &spec));
  KCT_STATUS(rt, KC_EINVAL,
             kc__tu_for(rt, kc__backend_of(KC_BACKEND_CUDA), spec, kc_world_latest(rt), &tu, &len));
  KCT_CONTAINS(kc_errmsg(rt), "is a template: name an instantiation");
  /* a name expression of a dialect kernel is refused */
  kct_define(rt, "dk", "KC_KERNEL void dk(KC_GLOBAL float *y) { y[0] = 1; }");
  KCT_OK(rt, kc__spec_intern(rt, "dk<int>", "", &spec));
  KCT_STATUS(rt, KC_EINVAL,
             kc__tu_for(rt, kc__backend_of(KC_BACKEND_CUDA), spec, kc_world_latest(rt), &tu, &len));
  KCT_CONTAINS(kc_errmsg(rt), "only a CUDA C++ definition (KC_LANG_CUDA) has");
}

/* C++ namespaces and overloads in a CUDA file (issue 26, item 3): each
 * definition in a namespace block is filed with its namespaces around it,
 * overloads (and a name defined in two namespaces) are one definition,
 * a namespace alias is filed with the namespace declared before it, and an
 * out-of-line member function (Acc::get() const) joins its class's
 * definition; the kernel that calls ops::both, fo::twice and a.get()
 * reaches each of them and NVRTC compiles its unit to PTX. Redefining one overload (a reload of
 * the file) changes the one definition of the name, and the unit of every
 * kernel that uses either overload. */
static const char ns_cu[] =
    "#define SCALE 2.0f\n"
    "namespace ops {\n"
    "__device__ float twice(float x) { return x * SCALE; }\n"
    "__device__ float twice(int x) { return (float)x * 2.0f; }\n"
    "namespace detail {\n"
    "__device__ float add1(float x) { return x + 1.0f; }\n"
    "}  // namespace detail\n"
    "__device__ float both(float x) { return detail::add1(twice(x)); }\n"
    "}  // namespace ops\n"
    "namespace fo = ops;\n"
    "struct Acc {\n  float v;\n  __device__ float get() const;\n};\n"
    "__device__ float Acc::get() const { return v + 0.5f; }\n"
    "extern \"C\" __global__ void nsk(float *y) {\n"
    "  Acc a{1.0f};\n"
    "  y[threadIdx.x] = ops::both(1.0f) + fo::twice(3) + a.get();\n"
    "}\n"
    "extern \"C\" __global__ void only_float(float *y) { y[0] = ops::twice(1.5f); }\n";

static void on_change(void *user, const char *name, kc_change_kind kind) {
  char *seen = user;
  if (kind == KC_CHANGE_REDEFINED && strlen(seen) + strlen(name) + 2 < 256) {
    strcat(seen, name);
    strcat(seen, " ");
  }
}

static bool in_closure(const char *entry, const char *name) {
  kc__spec *spec;
  KCT_OK(rt, kc__spec_intern(rt, entry, "", &spec));
  kc__closure c;
  KCT_OK(rt, kc__resolve(rt, spec, kc_world_latest(rt), &c));
  bool found = false;
  for (uint32_t i = 0; i < c.ndefs; i++) found = found || !strcmp(c.defs[i]->binding->name, name);
  kc__closure_free(rt, &c);
  return found;
}

static char *cuda_unit(const char *entry) {
  kc__spec *spec;
  KCT_OK(rt, kc__spec_intern(rt, entry, "", &spec));
  char *tu = NULL;
  size_t len = 0;
  KCT_OK(rt, kc__tu_for(rt, kc__backend_of(KC_BACKEND_CUDA), spec, kc_world_latest(rt), &tu, &len));
  return tu;
}

static void test_cuda_namespaces_and_overloads(void **state) {
  (void)state;
  size_t changed = 0;
  KCT_OK(rt,
         kc_define_file_lang(rt, "ns.cu", ns_cu, strlen(ns_cu), KC_LANG_CUDA, NULL, NULL, &changed, NULL));
  assert_int_equal(changed, 8); /* SCALE twice add1 both fo Acc nsk only_float: twice once, get in Acc */
  static const char *const reached[] = {"twice", "add1", "both", "fo", "Acc", "SCALE"};
  for (size_t i = 0; i < sizeof reached / sizeof *reached; i++)
    if (!in_closure("nsk", reached[i])) fail_msg("nsk does not reach '%s'", reached[i]);
  assert_true(in_closure("only_float", "twice"));
  assert_false(in_closure("only_float", "Acc"));
  char *unit = cuda_unit("nsk");
  KCT_CONTAINS(unit, "namespace ops { __device__ float twice(float x) { return x * SCALE; } }\n"
                     "namespace ops { __device__ float twice(int x) { return (float)x * 2.0f; } }");
  KCT_CONTAINS(unit, "namespace ops {} namespace fo = ops;");
  KCT_CONTAINS(unit, "};\n__device__ float Acc::get() const { return v + 0.5f; }");
  kc__free(rt, unit);
  char *ptx = native_ptx("nsk");
  KCT_CONTAINS(ptx, ".entry nsk(");
  kc__free(rt, ptx);
  ptx = native_ptx("only_float");
  KCT_CONTAINS(ptx, ".entry only_float(");
  kc__free(rt, ptx);
  /* one overload changes: the name's one definition is redefined, and the
   * unit of the kernel that only calls the other overload changes too */
  char *before = cuda_unit("only_float");
  KCT_CONTAINS(before, "(float)x * 2.0f");
  /* the closure's edge on twice: what ends code compiled from it */
  kc__spec *spec;
  KCT_OK(rt, kc__spec_intern(rt, "only_float", "", &spec));
  kc__closure c0;
  KCT_OK(rt, kc__resolve(rt, spec, kc_world_latest(rt), &c0));
  kc__def *old = NULL;
  for (uint32_t i = 0; i < c0.nedges; i++)
    if (!strcmp(c0.edges[i].binding->name, "twice")) old = c0.edges[i].def;
  kc__closure_free(rt, &c0);
  assert_non_null(old);
  assert_true(atomic_load(&old->max_world) == KC_WORLD_FOREVER);
  char *edited = kc__strdup(rt, ns_cu);
  char *at = strstr(edited, "(float)x * 2.0f");
  memcpy(at, "(float)x * 4.0f", 15);
  char seen[256] = "";
  kc_world w0 = kc_world_latest(rt), w1 = 0;
  KCT_OK(rt, kc_define_file_lang(rt, "ns.cu", edited, strlen(edited), KC_LANG_CUDA, on_change, seen, &changed,
                                 &w1));
  assert_int_equal(changed, 1);
  assert_string_equal(seen, "twice ");
  assert_true(w1 == w0 + 1);
  assert_true(atomic_load(&old->max_world) == w0); /* the float overload's users' code ends at w0 too */
  char *after = cuda_unit("only_float");
  KCT_CONTAINS(after, "(float)x * 4.0f");
  assert_null(strstr(after, "(float)x * 2.0f"));
  ptx = native_ptx("only_float");
  KCT_CONTAINS(ptx, ".entry only_float(");
  kc__free(rt, ptx);
  /* a helper in a nested namespace, redefined: nsk's unit has its new text */
  at = strstr(edited, "x + 1.0f");
  memcpy(at, "x + 9.0f", 8);
  seen[0] = 0;
  KCT_OK(rt, kc_define_file_lang(rt, "ns.cu", edited, strlen(edited), KC_LANG_CUDA, on_change, seen, &changed,
                                 NULL));
  assert_string_equal(seen, "add1 ");
  char *nsk = cuda_unit("nsk");
  KCT_CONTAINS(nsk,
               "namespace ops { namespace detail { __device__ float add1(float x) { return x + 9.0f; } } }");
  kc__free(rt, nsk);
  /* a kernel inside a namespace, extern "C" (its name as written) */
  const char *in_ns = "namespace e {\nextern \"C\" __global__ void k_in_ns(float *y, int n) {\n"
                      "  if (threadIdx.x < n) y[threadIdx.x] = ops::twice(2.0f) + fo::twice(n);\n}\n}\n";
  KCT_OK(rt, kc_define_file_lang(rt, "in_ns.cu", in_ns, strlen(in_ns), KC_LANG_CUDA, NULL, NULL, NULL, NULL));
  ptx = native_ptx("k_in_ns");
  KCT_CONTAINS(ptx, ".entry k_in_ns(");
  kc__free(rt, ptx);
  /* a template kernel (a name expression) that calls both overloads */
  KCT_OK(rt, kc_define_lang(rt, "tscale",
                            "template <typename T> __global__ void tscale(T *y) { y[0] = ops::twice(y[0]) + "
                            "ops::twice(3); }",
                            KC_LANG_CUDA, NULL));
  assert_true(in_closure("tscale<float>", "twice"));
  ptx = native_ptx("tscale<float>");
  KCT_CONTAINS(ptx, ".entry _Z6tscaleIfEvPT_(");
  kc__free(rt, ptx);
  kc__free(rt, before);
  kc__free(rt, after);
  kc__free(rt, edited);
}

/* An extern "C" block read through keeps what each definition is: a static
 * __device__ helper stays valid (static is not allowed after a bare
 * extern "C" prefix), and __constant__ / __device__ variables without an
 * initializer stay definitions (a bare prefix makes them declarations, so
 * PTX would only have .extern symbols the module never defines). */
static void test_cuda_externc_block_pieces(void **state) {
  (void)state;
  static const char blk[] = "extern \"C\" {\n"
                            "static __device__ float sq(float x) { return x * x; }\n"
                            "__constant__ float coef[9];\n"
                            "__device__ int hits;\n"
                            "__global__ void eck(float *y) {\n"
                            "  y[threadIdx.x] = sq(coef[threadIdx.x % 9]);\n"
                            "  atomicAdd(&hits, 1);\n"
                            "}\n"
                            "}\n";
  KCT_OK(rt, kc_define_file_lang(rt, "eck.cu", blk, strlen(blk), KC_LANG_CUDA, NULL, NULL, NULL, NULL));
  char *ptx = native_ptx("eck");
  KCT_CONTAINS(ptx, ".entry eck(");
  KCT_CONTAINS(ptx, ".const .align 4 .b8 kc__u_coef[36];"); /* defined here, not .extern */
  KCT_CONTAINS(ptx, ".global .align 4 .u32 kc__u_hits;");
  assert_null(strstr(ptx, ".extern"));
  kc__free(rt, ptx);
}

/* A native closure with a dialect definition in it has the dialect's
 * prelude, whose fixed-width typedefs must not clash with native code's:
 * its own at file scope (as <cstdint> spells them on LP64) naming other
 * types than the prelude's. */
static void test_cuda_typedefs_with_dialect_helper(void **state) {
  (void)state;
  kct_define(rt, "dtw", "KC_DEVICE int64_t dtw(int64_t v) { return 2 * v; }");
  static const char *const texts[][2] = {
      {"mix1", "typedef long int64_t;\ntypedef unsigned long uint64_t;\n"
               "extern \"C\" __global__ void mix1(int64_t *y) { y[0] = dtw(y[0]); }"},
      {"mix2", "typedef unsigned long ulong;\n"
               "extern \"C\" __global__ void mix2(ulong *y) { y[0] = (ulong)dtw((long long)y[0]); }"}};
  for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
    KCT_OK(rt, kc_define_lang(rt, texts[i][0], texts[i][1], KC_LANG_CUDA, NULL));
    kc__spec *spec;
    KCT_OK(rt, kc__spec_intern(rt, texts[i][0], "", &spec));
    char *tu = NULL;
    size_t len = 0;
    KCT_OK(rt, kc__tu_for(rt, kc__backend_of(KC_BACKEND_CUDA), spec, kc_world_latest(rt), &tu, &len));
    KCT_CONTAINS(tu, "kcache prelude");
    const kc__bsvc svc = kc__bsvc_of(rt);
    void *out = NULL;
    size_t size = 0;
    kc_status st = kc__cuda_compile_only(&svc, tu, len, texts[i][0], 90, true, &out, &size, NULL);
    if (st) fail_msg("NVRTC: %s: %s\n%s", kc_status_name(st), kc_errmsg(rt), tu);
    kc__free(rt, out);
    kc__free(rt, tu);
  }
}

int main(int argc, char **argv) {
  int rc = kct_main_shared(argc, argv, "NVRTC", kc__cuda_nvrtc_unavailable,
                           &rt); /* the host backend: for the table only */
  if (rc >= 0) return rc;
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_issue14_sources_compile_for_cuda),
                                     cmocka_unit_test(test_cuda_as_written),
                                     cmocka_unit_test(test_cuda_entry_checks),
                                     cmocka_unit_test(test_cuda_templates),
                                     cmocka_unit_test(test_cuda_namespaces_and_overloads),
                                     cmocka_unit_test(test_cuda_externc_block_pieces),
                                     cmocka_unit_test(test_cuda_typedefs_with_dialect_helper)};
  rc = KCT_RUN(tests);
  kc_runtime_destroy(rt);
  return rc;
}
