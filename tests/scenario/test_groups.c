/* SPDX-License-Identifier: MIT */
/*
 * test_groups.c -- work groups as the dialect defines them, on every
 * backend: KC_LOCAL arrays shared by a group's items, kc_barrier() between
 * them (a tree reduction, a tiled matrix product), ids read from helper
 * functions, and grids large enough that the host backend runs their
 * groups on its pool of threads (with a copy of a kernel's KC_LOCAL arrays
 * for each thread, and a scratch area each). Every result is checked
 * against the same computation in C. On the host backend also: launches of
 * one KC_LOCAL kernel from several threads at once, a barrier that only
 * some items of a group reach (refused, not a hang), and a group too large
 * for fibers.
 *
 * Kernels with barriers run on the host split at them into loops over the
 * group's items (split.c), or as fibers where the split cannot be sure:
 * the same kernels written both ways (a barrier in a helper makes the
 * fibers) give the same bits as each other and as C (their arithmetic is
 * exact), and the debug log says which way each ran.
 */
#include "kc_test.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

/* ThreadSanitizer: the parent has threads (the host backend's pool), and a
 * fiber is a thread to TSan, so it would end the child at its first fiber
 * by default (as test_fork_backend). */
const char *__tsan_default_options(void);
const char *__tsan_default_options(void) { return "die_after_fork=0"; }

enum { WG = 128 };

/* Each group sums its WG inputs in local memory, halving with a barrier
 * between steps; item 0 writes the group's sum. */
static const char SRC_REDUCE[] = "KC_KERNEL void reduce(KC_GLOBAL const float *x, KC_GLOBAL float *out) {\n"
                                 "  KC_LOCAL float part[128];\n"
                                 "  size_t l = kc_local_id(0);\n"
                                 "  part[l] = x[kc_global_id(0)];\n"
                                 "  kc_barrier();\n"
                                 "  for (size_t s = kc_local_size(0) / 2; s > 0; s /= 2) {\n"
                                 "    if (l < s) part[l] += part[l + s];\n"
                                 "    kc_barrier();\n"
                                 "  }\n"
                                 "  if (l == 0) out[kc_group_id(0)] = part[0];\n"
                                 "}\n";

/* C = A * B for n x n matrices, in 16 x 16 tiles through local memory. */
static const char SRC_MATMUL[] = "#define TS 16\n"
                                 "KC_KERNEL void matmul(KC_GLOBAL const float *a, KC_GLOBAL const float *b,\n"
                                 "                      KC_GLOBAL float *c, int n) {\n"
                                 "  KC_LOCAL float ta[TS][TS];\n"
                                 "  KC_LOCAL float tb[TS][TS];\n"
                                 "  int lx = (int)kc_local_id(0), ly = (int)kc_local_id(1);\n"
                                 "  int col = (int)kc_global_id(0), row = (int)kc_global_id(1);\n"
                                 "  float acc = 0.0f;\n"
                                 "  for (int t = 0; t < n; t += TS) {\n"
                                 "    ta[ly][lx] = a[row * n + t + lx];\n"
                                 "    tb[ly][lx] = b[(t + ly) * n + col];\n"
                                 "    kc_barrier();\n"
                                 "    for (int k = 0; k < TS; k++) acc += ta[ly][k] * tb[k][lx];\n"
                                 "    kc_barrier();\n"
                                 "  }\n"
                                 "  c[row * n + col] = acc;\n"
                                 "}\n";

/* The ids from a helper, which reaches the work item the kernel runs. */
static const char SRC_GID[] = "KC_DEVICE size_t my_gid(void) { return kc_global_id(0); }";
static const char SRC_IDS[] =
    "KC_KERNEL void ids(KC_GLOBAL float *y) {\n"
    "  size_t i = my_gid();\n"
    "  y[i] = (float)(i % 1000) + (float)kc_group_id(0) * 0.0f + (float)kc_local_size(0);\n"
    "}\n";

/* A 2-D five-point stencil, no local memory. */
static const char SRC_STENCIL[] =
    "KC_KERNEL void stencil(KC_GLOBAL const float *in, KC_GLOBAL float *out, int w, int h) {\n"
    "  int x = (int)kc_global_id(0), y = (int)kc_global_id(1);\n"
    "  if (x == 0 || y == 0 || x >= w - 1 || y >= h - 1) { out[y * w + x] = in[y * w + x]; return; }\n"
    "  out[y * w + x] = 0.5f * in[y * w + x] + 0.125f * (in[y * w + x - 1] + in[y * w + x + 1]\n"
    "                   + in[(y - 1) * w + x] + in[(y + 1) * w + x]);\n"
    "}\n";

/* Barriers in uniform for, while, do and if statements, values live
 * across them per item (an accumulator, a loop counter that starts at the
 * item's id, an array, a const, a pointer to a local held across
 * barriers), a return after the last barrier (and a loop after it that
 * the items that returned must not run). BARRIER is kc_barrier() or,
 * for the fibers, a helper that calls it. Exact arithmetic: small integers
 * scaled by powers of two. */
enum { MIX_WG = 64, MIX_GROUPS = 37, MIX_ROUNDS = 5 };
#define SRC_MIX_BODY(BARRIER) \
  "  KC_LOCAL float sh[64];\n" \
  "  size_t l = kc_local_id(0), n = kc_local_size(0);\n" \
  "  size_t g = kc_global_id(0);\n" \
  "  float acc = x[g];\n" \
  "  float hist[3];\n" \
  "  float *p = &acc;\n" \
  "  const int shift = (int)(l % 3) + 1;\n" \
  "  int j = (int)l;\n" \
  "  for (int r = 0; r < rounds; r++) {\n" \
  "    sh[l] = *p;\n" \
  "    " BARRIER ";\n" \
  "    float nb = sh[(l + (size_t)shift) % n];\n" \
  "    hist[r % 3] = nb;\n" \
  "    *p = 0.5f * *p + 0.25f * nb;\n" \
  "    " BARRIER ";\n" \
  "    j += shift;\n" \
  "  }\n" \
  "  int k = 0;\n" \
  "  while (k < 2) {\n" \
  "    sh[l] = acc + (float)j;\n" \
  "    " BARRIER ";\n" \
  "    acc += sh[n - 1 - l] * 0.125f;\n" \
  "    k++;\n" \
  "    " BARRIER ";\n" \
  "  }\n" \
  "  if (rounds > 2) {\n" \
  "    sh[l] = hist[0] + hist[1] + hist[2];\n" \
  "    " BARRIER ";\n" \
  "    acc += sh[(l + 1) % n];\n" \
  "  } else\n" \
  "    acc -= 1.0f;\n" \
  "  do {\n" \
  "    " BARRIER ";\n" \
  "    k--;\n" \
  "  } while (k > 0);\n" \
  "  if (l % 2) { y[g] = acc; return; }\n" \
  "  y[g] = acc + (float)j * 0.5f;\n" \
  "  for (int q = 0; q < 2; q++) y[g] += 1.0f;\n" \
  "}\n"
static const char SRC_MIX[] =
    "KC_KERNEL void live(KC_GLOBAL const float *x, KC_GLOBAL float *y, int rounds) {\n" SRC_MIX_BODY(
        "kc_barrier()");
static const char SRC_SYNC[] = "KC_DEVICE void sync(void) { kc_barrier(); }";
static const char SRC_MIX_F[] =
    "KC_KERNEL void live_f(KC_GLOBAL const float *x, KC_GLOBAL float *y, int rounds) {\n" SRC_MIX_BODY(
        "sync()");

/* mix in C: each group's items in lockstep. */
static void mix_ref(const float *x, float *y, size_t groups, int rounds) {
  enum { N = MIX_WG };
  for (size_t gr = 0; gr < groups; gr++) {
    float acc[N], hist[N][3], sh[N];
    int shift[N], j[N];
    for (int l = 0; l < N; l++) acc[l] = x[gr * N + l], shift[l] = l % 3 + 1, j[l] = l;
    for (int r = 0; r < rounds; r++) {
      for (int l = 0; l < N; l++) sh[l] = acc[l];
      for (int l = 0; l < N; l++) {
        float nb = sh[(l + shift[l]) % N];
        hist[l][r % 3] = nb;
        acc[l] = 0.5f * acc[l] + 0.25f * nb;
        j[l] += shift[l];
      }
    }
    for (int k = 0; k < 2; k++) {
      for (int l = 0; l < N; l++) sh[l] = acc[l] + (float)j[l];
      for (int l = 0; l < N; l++) acc[l] += sh[N - 1 - l] * 0.125f;
    }
    if (rounds > 2) {
      for (int l = 0; l < N; l++) sh[l] = hist[l][0] + hist[l][1] + hist[l][2];
      for (int l = 0; l < N; l++) acc[l] += sh[(l + 1) % N];
    } else
      for (int l = 0; l < N; l++) acc[l] -= 1.0f;
    for (int l = 0; l < N; l++) y[gr * N + l] = l % 2 ? acc[l] : acc[l] + (float)j[l] * 0.5f + 2.0f;
  }
}

/* The host's debug log, kept: which way each kernel with barriers ran. */
static pthread_mutex_t paths_mu = PTHREAD_MUTEX_INITIALIZER;
static char paths[8192];

static void paths_log(void *ud, kc_log_level level, const char *msg) {
  (void)ud, (void)level;
  if (!strstr(msg, "work groups as loops") && !strstr(msg, "as fibers") &&
      !strstr(msg, "a copy of its object"))
    return;
  pthread_mutex_lock(&paths_mu);
  size_t n = strlen(paths);
  snprintf(paths + n, sizeof paths - n, "%s\n", msg);
  pthread_mutex_unlock(&paths_mu);
}

/* A runtime without the disk cache (every kernel compiled, so logged),
 * its log into paths, with compile_options (NULL: none). */
static kc_runtime *paths_runtime_with(const char *compile_options) {
  kc_options o;
  kc_options_init(&o);
  o.cache_disable = 1;
  o.log = paths_log;
  o.log_level = KC_LOG_DEBUG;
  o.compile_options = compile_options;
  paths[0] = 0;
  return kct_runtime(&o);
}

static kc_runtime *paths_runtime(void) { return paths_runtime_with(NULL); }

/* On the host: the log says kernel name ran split (or as fibers). */
static void expect_path(const char *name, bool split) {
  if (kct_backend != KC_BACKEND_HOST) return;
  char want[200];
  snprintf(want, sizeof want, "'%s' %s", name,
           split ? "runs its work groups as loops over their items" : "runs its work items as fibers");
  pthread_mutex_lock(&paths_mu);
  bool found = strstr(paths, want) != NULL;
  pthread_mutex_unlock(&paths_mu);
  if (!found) fail_msg("expected \"%s\" in the log: %s", want, paths);
}

static kc_buffer *buffer_of(kc_runtime *rt, kc_context *ctx, const float *v, size_t n) {
  kc_buffer *b;
  KCT_OK(rt, kc_buffer_create(ctx, n * sizeof(float), &b));
  if (v) KCT_OK(rt, kc_buffer_write(b, 0, v, n * sizeof(float)));
  return b;
}

static float *read_all(kc_runtime *rt, kc_buffer *b, size_t n) {
  float *v = kct_calloc(n * sizeof(float));
  KCT_OK(rt, kc_buffer_read(b, 0, v, n * sizeof(float)));
  return v;
}

/* Sums of WG inputs per group, over many groups (the host's pool takes
 * them, each thread with its own copy of `part`). Failures go to r (from
 * a thread other than cmocka's) or fail the test (r NULL). */
static void run_reduce_on(kc_runtime *rt, kc_context *ctx, uint32_t groups, kct_report *r) {
  size_t n = (size_t)groups * WG;
  float *x = malloc(n * sizeof(float)), *out = calloc(groups, sizeof(float));
  kc_buffer *bx = NULL, *bo = NULL;
  kc_kernel *k = NULL;
  kc_status st = x && out ? KC_OK : KC_ENOMEM;
  for (size_t i = 0; !st && i < n; i++) x[i] = (float)(i % 7) + 0.25f * (float)(i % 3);
  if (!st) st = kc_buffer_create(ctx, n * sizeof(float), &bx);
  if (!st) st = kc_buffer_create(ctx, groups * sizeof(float), &bo);
  if (!st) st = kc_buffer_write(bx, 0, x, n * sizeof(float));
  if (!st) st = kc_kernel_create(rt, "reduce", NULL, &k);
  kc_arg args[] = {KC_ARG_BUF(bx), KC_ARG_BUF(bo)};
  kc_dim3 g = {groups, 1, 1}, b = {WG, 1, 1};
  if (!st) st = kc_launch(k, ctx, &g, &b, args, 2);
  if (!st) st = kc_context_finish(ctx);
  if (!st) st = kc_buffer_read(bo, 0, out, groups * sizeof(float));
  char msg[300] = "";
  if (st)
    snprintf(msg, sizeof msg, "reduce over %u groups: %s: %s", groups, kc_status_name(st), kc_errmsg(rt));
  for (uint32_t gi = 0; !st && !msg[0] && gi < groups; gi++) {
    double want = 0;
    for (size_t i = 0; i < WG; i++) want += x[(size_t)gi * WG + i];
    if (fabs(out[gi] - want) > 1e-3 * fabs(want) + 1e-3)
      snprintf(msg, sizeof msg, "group %u of %u: %g, expected %g", gi, groups, out[gi], want);
  }
  free(x);
  free(out);
  kc_buffer_destroy(bx);
  kc_buffer_destroy(bo);
  kc_kernel_destroy(k);
  if (msg[0]) {
    if (r) kct_report_fail(r, "%s", msg);
    else fail_msg("%s", msg);
  }
}

static void run_reduce(kc_runtime *rt, kc_context *ctx, uint32_t groups) {
  run_reduce_on(rt, ctx, groups, NULL);
}

static void test_reduction_with_local_memory_and_barriers(void **state) {
  (void)state;
  kc_runtime *rt = kct_runtime(NULL);
  kc_context *ctx = kct_context(rt);
  kct_define(rt, "reduce", SRC_REDUCE);
  run_reduce(rt, ctx, 1);
  run_reduce(rt, ctx, 3);
  run_reduce(rt, ctx, 4096); /* 512 Ki items */
  kct_destroy(rt);
}

static void test_tiled_matmul(void **state) {
  (void)state;
  enum { M = 128 };
  kc_runtime *rt = kct_runtime(NULL);
  kc_context *ctx = kct_context(rt);
  kct_define(rt, "matmul", SRC_MATMUL);
  float *a = kct_calloc(M * M * sizeof(float)), *b = kct_calloc(M * M * sizeof(float));
  for (int i = 0; i < M * M; i++) {
    a[i] = (float)(i % 13) * 0.5f - 2.0f;
    b[i] = (float)(i % 11) * 0.25f - 1.0f;
  }
  kc_buffer *ba = buffer_of(rt, ctx, a, M * M), *bb = buffer_of(rt, ctx, b, M * M),
            *bc = buffer_of(rt, ctx, NULL, M * M);
  int n = M;
  kc_arg args[] = {KC_ARG_BUF(ba), KC_ARG_BUF(bb), KC_ARG_BUF(bc), KC_ARG_VAL(n)};
  kc_dim3 g = {M / 16, M / 16, 1}, blk = {16, 16, 1};
  kc_kernel *k = kct_kernel(rt, "matmul", NULL);
  KCT_OK(rt, kc_launch(k, ctx, &g, &blk, args, 4));
  KCT_OK(rt, kc_context_finish(ctx));
  float *c = read_all(rt, bc, M * M);
  for (int r = 0; r < M; r++)
    for (int col = 0; col < M; col++) {
      double want = 0;
      for (int k2 = 0; k2 < M; k2++) want += (double)a[r * M + k2] * b[k2 * M + col];
      if (fabs(c[r * M + col] - want) > 1e-3 * (fabs(want) + 1))
        fail_msg("c[%d][%d] = %g, expected %g", r, col, c[r * M + col], want);
    }
  kct_free(a);
  kct_free(b);
  kct_free(c);
  kct_destroy(rt);
}

static void test_ids_from_helpers_on_large_grids(void **state) {
  (void)state;
  enum { N = 1 << 20 };
  kc_runtime *rt = kct_runtime(NULL);
  kc_context *ctx = kct_context(rt);
  kct_define(rt, "my_gid", SRC_GID);
  kct_define(rt, "ids", SRC_IDS);
  kc_buffer *by = buffer_of(rt, ctx, NULL, N);
  kc_arg args[] = {KC_ARG_BUF(by)};
  kc_dim3 g = {N / 256, 1, 1}, b = {256, 1, 1};
  KCT_OK(rt, kc_launch(kct_kernel(rt, "ids", NULL), ctx, &g, &b, args, 1));
  KCT_OK(rt, kc_context_finish(ctx));
  float *y = read_all(rt, by, N);
  for (size_t i = 0; i < N; i++)
    if (y[i] != (float)(i % 1000) + 256.0f)
      fail_msg("y[%zu] = %g, expected %g", i, y[i], (float)(i % 1000) + 256.0f);
  kct_free(y);
  kct_destroy(rt);
}

static void test_stencil_2d(void **state) {
  (void)state;
  enum { W = 512, H = 256 };
  kc_runtime *rt = kct_runtime(NULL);
  kc_context *ctx = kct_context(rt);
  kct_define(rt, "stencil", SRC_STENCIL);
  float *in = kct_calloc(W * H * sizeof(float));
  for (int i = 0; i < W * H; i++) in[i] = (float)((i * 7919) % 101);
  kc_buffer *bi = buffer_of(rt, ctx, in, W * H), *bo = buffer_of(rt, ctx, NULL, W * H);
  int w = W, h = H;
  kc_arg args[] = {KC_ARG_BUF(bi), KC_ARG_BUF(bo), KC_ARG_VAL(w), KC_ARG_VAL(h)};
  kc_dim3 g = {W / 32, H / 4, 1}, b = {32, 4, 1};
  KCT_OK(rt, kc_launch(kct_kernel(rt, "stencil", NULL), ctx, &g, &b, args, 4));
  KCT_OK(rt, kc_context_finish(ctx));
  float *out = read_all(rt, bo, W * H);
  for (int y = 0; y < H; y++)
    for (int x = 0; x < W; x++) {
      int i = y * W + x;
      float want = x == 0 || y == 0 || x == W - 1 || y == H - 1
                       ? in[i]
                       : 0.5f * in[i] + 0.125f * (in[i - 1] + in[i + 1] + in[i - W] + in[i + W]);
      if (fabsf(out[i] - want) > 1e-4f * (fabsf(want) + 1))
        fail_msg("(%d, %d): %g, expected %g", x, y, out[i], want);
    }
  kct_free(in);
  kct_free(out);
  kct_destroy(rt);
}

/* A row of a group's items may run in SIMD lanes on the host (codegen.c:
 * KC__ROW): edges that return early, loads of the neighbours that only
 * inner items make (masked, or gathers); and a loop of dependent steps in
 * each item; both in a block whose rows are not a multiple of any vector
 * width (gcc 12 vectorizes both rows: -fopt-info-vec). Integers, so
 * the result is exact whatever the compiler makes of it. */
static const char SRC_EDGES[] =
    "KC_KERNEL void edges(KC_GLOBAL int *out, KC_GLOBAL const int *in, int w, int h) {\n"
    "  int x = (int)kc_global_id(0), y = (int)kc_global_id(1), i = y * w + x;\n"
    "  if (x == 0 || y == 0 || x == w - 1 || y == h - 1) { out[i] = in[i]; return; }\n"
    "  out[i] = 4 * in[i] - in[i - 1] - in[i + 1] - in[i - w] - in[i + w];\n}\n";
static const char SRC_CHAIN[] =
    "KC_KERNEL void chain(KC_GLOBAL int *out, KC_GLOBAL const int *in, int w) {\n"
    "  int i = (int)kc_global_id(1) * w + (int)kc_global_id(0);\n"
    "  unsigned s = (unsigned)in[i]; /* wraps: no overflow */\n"
    "  for (int k = 0; k < 24; k++) s = s * 3u + (unsigned)(in[i] >> (k & 7) & 1);\n"
    "  out[i] = (int)(s >> 1);\n}\n";

/* and per-item arrays, one indexed by data: an array in the body is one
 * stack slot for every item, whose reuse ivdep tells gcc to set aside if
 * it cannot see it (gcc 12 does not vectorize this row: a guard for a
 * compiler that would) */
static const char SRC_PRIV[] =
    "KC_KERNEL void priv(KC_GLOBAL int *out, KC_GLOBAL const int *in, int w) {\n"
    "  int i = (int)kc_global_id(1) * w + (int)kc_global_id(0), t[8], h[4] = {0, 0, 0, 0};\n"
    "  for (int j = 0; j < 8; j++) t[j] = in[i] * j + (in[i] >> (j & 3));\n"
    "  h[in[i] & 3] += 1;\n"
    "  h[(in[i] >> 2) & 3] += 2;\n"
    "  int s = h[0] + 10 * h[1] + 100 * h[2] + 1000 * h[3];\n"
    "  for (int j = 0; j < 8; j++) s += t[(in[i] + j) & 7] * (j + 1);\n"
    "  out[i] = s;\n}\n";

/* priv's result for in[i] = v */
static int priv_ref(int v) {
  int t[8], h[4] = {0, 0, 0, 0};
  for (int j = 0; j < 8; j++) t[j] = v * j + (v >> (j & 3));
  h[v & 3] += 1;
  h[(v >> 2) & 3] += 2;
  int s = h[0] + 10 * h[1] + 100 * h[2] + 1000 * h[3];
  for (int j = 0; j < 8; j++) s += t[(v + j) & 7] * (j + 1);
  return s;
}

static void test_rows_of_items_exact(void **state) {
  (void)state;
  enum { BX = 13, BY = 3, W = BX * 7, H = BY * 5 };
  kc_runtime *rt = kct_runtime(NULL);
  kc_context *ctx = kct_context(rt);
  kct_define(rt, "edges", SRC_EDGES);
  kct_define(rt, "chain", SRC_CHAIN);
  kct_define(rt, "priv", SRC_PRIV);
  int *in = kct_calloc(W * H * sizeof(int));
  for (int i = 0; i < W * H; i++) in[i] = (i * 7919) % 101 - 50;
  kc_buffer *bi, *bo;
  KCT_OK(rt, kc_buffer_create(ctx, W * H * sizeof(int), &bi));
  KCT_OK(rt, kc_buffer_write(bi, 0, in, W * H * sizeof(int)));
  KCT_OK(rt, kc_buffer_create(ctx, W * H * sizeof(int), &bo));
  int w = W, h = H;
  kc_arg args[] = {KC_ARG_BUF(bo), KC_ARG_BUF(bi), KC_ARG_VAL(w), KC_ARG_VAL(h)};
  kc_dim3 g = {W / BX, H / BY, 1}, b = {BX, BY, 1};
  int *out = kct_calloc(W * H * sizeof(int));
  static const char *const names[] = {"edges", "chain", "priv"};
  for (int kernel = 0; kernel < 3; kernel++) {
    KCT_OK(rt, kc_launch(kct_kernel(rt, names[kernel], NULL), ctx, &g, &b, args, kernel ? 3 : 4));
    KCT_OK(rt, kc_context_finish(ctx));
    KCT_OK(rt, kc_buffer_read(bo, 0, out, W * H * sizeof(int)));
    for (int y = 0; y < H; y++)
      for (int x = 0; x < W; x++) {
        int i = y * W + x, want = in[i];
        if (kernel == 2) want = priv_ref(in[i]);
        else if (kernel) {
          unsigned u = (unsigned)in[i];
          for (int k = 0; k < 24; k++) u = u * 3u + (unsigned)(in[i] >> (k & 7) & 1);
          want = (int)(u >> 1);
        } else if (!(x == 0 || y == 0 || x == W - 1 || y == H - 1))
          want = 4 * in[i] - in[i - 1] - in[i + 1] - in[i - W] - in[i + W];
        if (out[i] != want) fail_msg("%s (%d, %d): %d, expected %d", names[kernel], x, y, out[i], want);
      }
  }
  kct_free(in);
  kct_free(out);
  kct_destroy(rt);
}

/* Host: several threads launch one KC_LOCAL kernel at once; each launch
 * has its own copies of its local arrays. */
typedef struct {
  kc_runtime *rt;
  kc_context *ctx;
  kct_report r;
} conc_ctx;

static void *conc_thread(void *arg) {
  conc_ctx *c = arg;
  for (int i = 0; i < 6; i++) run_reduce_on(c->rt, c->ctx, i % 2 ? 37 : 512, &c->r);
  return NULL;
}

static void test_local_arrays_under_concurrent_launches(void **state) {
  (void)state;
  if (kct_backend != KC_BACKEND_HOST) skip();
  kc_runtime *rt = kct_runtime(NULL);
  kct_define(rt, "reduce", SRC_REDUCE);
  conc_ctx c[3];
  pthread_t t[3];
  for (int i = 0; i < 3; i++) {
    memset(&c[i], 0, sizeof c[i]);
    c[i].rt = rt;
    c[i].ctx = kct_context(rt);
    assert_int_equal(pthread_create(&t[i], NULL, conc_thread, &c[i]), 0);
  }
  for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < 3; i++) kct_report_check("launching thread", &c[i].r);
  kct_destroy(rt);
}

/* Host: a barrier that some items of a group never reach is refused (they
 * would wait for ever on a GPU); so is a group larger than the fibers take.
 * The runtime launches as before after. */
static void test_barrier_misuse_is_refused(void **state) {
  (void)state;
  if (kct_backend != KC_BACKEND_HOST) skip();
  kc_runtime *rt = kct_runtime(NULL);
  kc_context *ctx = kct_context(rt);
  kct_define(rt, "halfway",
             "KC_KERNEL void halfway(KC_GLOBAL float *y) {\n"
             "  if (kc_local_id(0) < 4) kc_barrier();\n"
             "  y[kc_global_id(0)] = 1.0f;\n"
             "}\n");
  kc_buffer *by = buffer_of(rt, ctx, NULL, 8192);
  kc_arg args[] = {KC_ARG_BUF(by)};
  kc_dim3 g = {1, 1, 1}, b = {8, 1, 1};
  kc_kernel *k = kct_kernel(rt, "halfway", NULL);
  KCT_STATUS(rt, KC_ELAUNCH, kc_launch(k, ctx, &g, &b, args, 1));
  KCT_CONTAINS(kc_errmsg(rt), "every item of a group must reach each barrier");
  g.x = 64; /* on the pool: the message comes back to this thread */
  KCT_STATUS(rt, KC_ELAUNCH, kc_launch(k, ctx, &g, &b, args, 1));
  KCT_CONTAINS(kc_errmsg(rt), "kc_barrier()");
  kc_dim3 big = {8192, 1, 1}, one = {1, 1, 1};
  /* split at its barrier: a group of any size, the disagreement found */
  KCT_STATUS(rt, KC_ELAUNCH, kc_launch(k, ctx, &one, &big, args, 1));
  KCT_CONTAINS(kc_errmsg(rt), "every item of a group must reach each barrier");
  /* a loop around a barrier whose trip count differs between items */
  kct_define(rt, "uneven",
             "KC_KERNEL void uneven(KC_GLOBAL float *y) {\n"
             "  for (int i = 0; i < (int)kc_local_id(0) % 3; i++) kc_barrier();\n"
             "  y[kc_global_id(0)] = 2.0f;\n"
             "}\n");
  KCT_STATUS(rt, KC_ELAUNCH, kc_launch(kct_kernel(rt, "uneven", NULL), ctx, &g, &b, args, 1));
  KCT_CONTAINS(kc_errmsg(rt), "every item of a group must reach each barrier");
  /* as fibers (its barrier in a helper): not more than they take */
  kct_define(rt, "sync", SRC_SYNC);
  kct_define(rt, "halfway_f",
             "KC_KERNEL void halfway_f(KC_GLOBAL float *y) {\n"
             "  sync();\n"
             "  y[kc_global_id(0)] = 1.0f;\n"
             "}\n");
  KCT_STATUS(rt, KC_EINVAL, kc_launch(kct_kernel(rt, "halfway_f", NULL), ctx, &one, &big, args, 1));
  KCT_CONTAINS(kc_errmsg(rt), "is more than the host backend takes");
  /* groups of 2^32 items and more: refused too (the count in 32 bits
   * wrapped to 0 and 2, and the launch ran that few and said KC_OK) */
  kc_dim3 huge[] = {{65536, 65536, 1}, {3, 1431655766, 1}, {65536, 65537, 1}};
  for (size_t i = 0; i < sizeof huge / sizeof *huge; i++) {
    KCT_STATUS(rt, KC_EINVAL, kc_launch(kct_kernel(rt, "halfway_f", NULL), ctx, &one, &huge[i], args, 1));
    KCT_CONTAINS(kc_errmsg(rt), "a group of 4294967295 or more work items");
  }
  kct_define(rt, "reduce", SRC_REDUCE);
  run_reduce(rt, ctx, 64);
  kct_destroy(rt);
}

/* Host: KC_LOCAL on a pointer (a declaration, on two lines too, in a list
 * after an array, a helper's parameter, a cast) is refused with a clear
 * error: KC_LOCAL is `static` there, so the pointer was one for the whole
 * group (each item took the last item's) or the unit was not C. Not in a
 * comment, not a KC_LOCAL array whose size multiplies, and not in a
 * conditional group (another backend's line). */
static void test_local_pointers_are_refused_on_the_host(void **state) {
  (void)state;
  if (kct_backend != KC_BACKEND_HOST) skip();
  kc_runtime *rt = kct_runtime(NULL);
  kc_context *ctx = kct_context(rt);
  static const char *const bad[][2] = {
      {"lp_decl", "KC_KERNEL void lp_decl(KC_GLOBAL float *y) {\n"
                  "  KC_LOCAL float sh[8]; KC_LOCAL float *p;\n"
                  "  p = &sh[kc_local_id(0)]; *p = 1.0f; kc_barrier();\n"
                  "  y[kc_global_id(0)] = *p;\n}\n"},
      {"lp_cast", "KC_KERNEL void lp_cast(KC_GLOBAL float *y) {\n"
                  "  KC_LOCAL float sh[8];\n"
                  "  y[kc_global_id(0)] = ((KC_LOCAL float *)sh)[0];\n}\n"},
      {"lp_lines", "KC_KERNEL void lp_lines(KC_GLOBAL float *y) {\n"
                   "  KC_LOCAL float sh[8]; KC_LOCAL float /* a pointer: */\n"
                   "    *p;\n"
                   "  p = &sh[kc_local_id(0)]; *p = 1.0f; kc_barrier();\n"
                   "  y[kc_global_id(0)] = *p;\n}\n"},
      {"lp_list", "KC_KERNEL void lp_list(KC_GLOBAL float *y) {\n"
                  "  KC_LOCAL float sh[4 * 2], *p;\n"
                  "  p = &sh[kc_local_id(0)]; *p = 1.0f; kc_barrier();\n"
                  "  y[kc_global_id(0)] = *p;\n}\n"},
      {"lp_param", "KC_DEVICE float lp_first(KC_LOCAL float *q) { return q[0]; }\n"
                   "KC_KERNEL void lp_param(KC_GLOBAL float *y) {\n"
                   "  KC_LOCAL float sh[8];\n"
                   "  sh[kc_local_id(0)] = 1.0f; kc_barrier();\n"
                   "  y[kc_global_id(0)] = lp_first(sh);\n}\n"},
  };
  kc_buffer *by = buffer_of(rt, ctx, NULL, 64);
  kc_arg args[] = {KC_ARG_BUF(by)};
  kc_dim3 g = {8, 1, 1}, b = {8, 1, 1};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    kct_define(rt, bad[i][0], bad[i][1]);
    KCT_STATUS(rt, KC_ECOMPILE, kc_launch(kct_kernel(rt, bad[i][0], NULL), ctx, &g, &b, args, 1));
    KCT_CONTAINS(kc_errmsg(rt), "KC_LOCAL on a pointer");
  }
  /* a comment, a size that multiplies, another backend's line: not refused */
  kct_define(rt, "lp_ok",
             "KC_KERNEL void lp_ok(KC_GLOBAL float *y) {\n"
             "  /* not KC_LOCAL *pointers */ KC_LOCAL float sh[4 * 2];\n"
             "#ifdef KC_BACKEND_HOST\n"
             "  float *p = sh;\n"
             "#else\n"
             "  KC_LOCAL float *p = sh;\n"
             "#endif\n"
             "  sh[kc_local_id(0)] = (float)kc_local_id(0); kc_barrier();\n"
             "  y[kc_global_id(0)] = p[7 - kc_local_id(0)];\n}\n");
  KCT_OK(rt, kc_launch(kct_kernel(rt, "lp_ok", NULL), ctx, &g, &b, args, 1));
  KCT_OK(rt, kc_context_finish(ctx));
  float *y = read_all(rt, by, 64);
  for (int i = 0; i < 64; i++)
    if (y[i] != (float)(7 - i % 8)) fail_msg("lp_ok: y[%d] = %g", i, y[i]);
  kct_free(y);
  kc_buffer_destroy(by);
  kct_destroy(rt);
}

/* Host: a child of fork() launches on the pool its parent had started
 * (the workers are not in the child: it starts its own). */
static void test_pool_after_fork(void **state) {
  (void)state;
  if (kct_backend != KC_BACKEND_HOST) skip();
  kc_runtime *rt = kct_runtime(NULL);
  kc_context *ctx = kct_context(rt);
  kct_define(rt, "reduce", SRC_REDUCE);
  run_reduce(rt, ctx, 2048); /* the pool is running */
  kct_child c;
  if (kct_fork(&c, false)) {
    kct_report r;
    memset(&r, 0, sizeof r);
    run_reduce_on(rt, ctx, 2048, &r);
    run_reduce_on(rt, ctx, 3, &r);
    kct_child_send(&c, &r, sizeof r);
    _exit(0);
  }
  kct_report r;
  memset(&r, 0, sizeof r);
  size_t got = kct_child_wait(&c, &r, sizeof r, 120);
  assert_int_equal(got, sizeof r);
  kct_report_check("the child", &r);
  run_reduce(rt, ctx, 2048); /* and the parent's pool goes on */
  kct_destroy(rt);
}

/* Runs the 1-D kernel name(x, y[, extra]) over groups of wg items and
 * returns y (n floats; kct_free). */
static float *run_xy(kc_runtime *rt, kc_context *ctx, const char *name, const float *x, size_t n, uint32_t wg,
                     const int *extra) {
  kc_buffer *bx = buffer_of(rt, ctx, x, n), *by = buffer_of(rt, ctx, NULL, n);
  kc_arg args[] = {KC_ARG_BUF(bx), KC_ARG_BUF(by), extra ? KC_ARG_VAL(*extra) : KC_ARG_BUF(by)};
  kc_dim3 g = {(uint32_t)(n / wg), 1, 1}, b = {wg, 1, 1};
  KCT_OK(rt, kc_launch(kct_kernel(rt, name, NULL), ctx, &g, &b, args, extra ? 3 : 2));
  KCT_OK(rt, kc_context_finish(ctx));
  float *y = read_all(rt, by, n);
  kc_buffer_destroy(bx);
  kc_buffer_destroy(by);
  return y;
}

static void expect_same(const char *what, const float *got, const float *want, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (memcmp(&got[i], &want[i], sizeof(float)) != 0)
      fail_msg("%s: y[%zu] = %.9g, expected %.9g", what, i, got[i], want[i]);
}

/* Barriers in loops and ifs, values live across them: split on the host,
 * the same bits as the fibers' and as C, on every backend. */
static void test_split_loops_and_live_values(void **state) {
  (void)state;
  kc_runtime *rt = paths_runtime();
  kc_context *ctx = kct_context(rt);
  kct_define(rt, "live", SRC_MIX);
  kct_define(rt, "sync", SRC_SYNC);
  kct_define(rt, "live_f", SRC_MIX_F);
  enum { N = MIX_WG * MIX_GROUPS };
  float *x = kct_calloc(N * sizeof(float)), *want = kct_calloc(N * sizeof(float));
  for (int i = 0; i < N; i++) x[i] = (float)((i * 7) % 23) - 11.0f;
  for (int rounds = 1; rounds <= MIX_ROUNDS; rounds += 2) {
    mix_ref(x, want, MIX_GROUPS, rounds);
    float *split = run_xy(rt, ctx, "live", x, N, MIX_WG, &rounds);
    float *fib = run_xy(rt, ctx, "live_f", x, N, MIX_WG, &rounds);
    expect_same("live (split) against C", split, want, N);
    expect_same("live_f (fibers) against C", fib, want, N);
    kct_free(split);
    kct_free(fib);
  }
  expect_path("live", true);
  expect_path("live_f", false);
  kct_free(x);
  kct_free(want);
  kct_destroy(rt);
}

/* The reduction and the tiled product split on the host, and written with
 * a helper's barrier (fibers): the same bits, and C's (integer values). */
static void test_split_reduce_and_matmul_match_fibers(void **state) {
  (void)state;
  enum { M = 64, G = 50 };
  kc_runtime *rt = paths_runtime();
  kc_context *ctx = kct_context(rt);
  kct_define(rt, "sync", SRC_SYNC);
  kct_define(rt, "reduce", SRC_REDUCE);
  kct_define(rt, "matmul", SRC_MATMUL);
  /* the same kernels, their barriers through the helper */
  char src[2048];
  const char *from[] = {SRC_REDUCE, SRC_MATMUL}, *names[] = {"reduce_f", "matmul_f"};
  const char *old[] = {"void reduce(", "void matmul("};
  for (int v = 0; v < 2; v++) {
    const char *p = from[v];
    size_t o = 0;
    while (*p && o + 16 < sizeof src) {
      if (strncmp(p, old[v], strlen(old[v])) == 0) {
        o += (size_t)snprintf(src + o, sizeof src - o, "void %s(", names[v]);
        p += strlen(old[v]);
      } else if (strncmp(p, "kc_barrier()", 12) == 0) {
        o += (size_t)snprintf(src + o, sizeof src - o, "sync()");
        p += 12;
      } else src[o++] = *p++;
    }
    src[o] = 0;
    kct_define(rt, names[v], src);
  }
  /* reduce: WG items a group, sums of small integers */
  size_t n = (size_t)G * WG;
  float *x = kct_calloc(n * sizeof(float));
  for (size_t i = 0; i < n; i++) x[i] = (float)(int)(i % 17) - 8.0f;
  for (int v = 0; v < 2; v++) {
    kc_buffer *bx = buffer_of(rt, ctx, x, n), *bo = buffer_of(rt, ctx, NULL, G);
    kc_arg args[] = {KC_ARG_BUF(bx), KC_ARG_BUF(bo)};
    kc_dim3 g = {G, 1, 1}, b = {WG, 1, 1};
    KCT_OK(rt, kc_launch(kct_kernel(rt, v ? "reduce_f" : "reduce", NULL), ctx, &g, &b, args, 2));
    KCT_OK(rt, kc_context_finish(ctx));
    float *out = read_all(rt, bo, G);
    for (size_t gi = 0; gi < G; gi++) {
      float want = 0;
      for (size_t i = 0; i < WG; i++) want += x[gi * WG + i];
      if (out[gi] != want)
        fail_msg("%s: group %zu: %g, expected %g", v ? "reduce_f" : "reduce", gi, out[gi], want);
    }
    kct_free(out);
    kc_buffer_destroy(bx);
    kc_buffer_destroy(bo);
  }
  kct_free(x);
  /* matmul: M x M of small integers, 16 x 16 tiles */
  float *a = kct_calloc(M * M * sizeof(float)), *bm = kct_calloc(M * M * sizeof(float));
  float *want = kct_calloc(M * M * sizeof(float));
  for (int i = 0; i < M * M; i++) a[i] = (float)(i % 7 - 3), bm[i] = (float)(i % 5 - 2);
  for (int r = 0; r < M; r++)
    for (int c = 0; c < M; c++) {
      float s = 0;
      for (int k = 0; k < M; k++) s += a[r * M + k] * bm[k * M + c];
      want[r * M + c] = s;
    }
  for (int v = 0; v < 2; v++) {
    kc_buffer *ba = buffer_of(rt, ctx, a, M * M), *bb = buffer_of(rt, ctx, bm, M * M),
              *bc = buffer_of(rt, ctx, NULL, M * M);
    int m = M;
    kc_arg args[] = {KC_ARG_BUF(ba), KC_ARG_BUF(bb), KC_ARG_BUF(bc), KC_ARG_VAL(m)};
    kc_dim3 g = {M / 16, M / 16, 1}, b = {16, 16, 1};
    KCT_OK(rt, kc_launch(kct_kernel(rt, v ? "matmul_f" : "matmul", NULL), ctx, &g, &b, args, 4));
    KCT_OK(rt, kc_context_finish(ctx));
    float *c = read_all(rt, bc, M * M);
    expect_same(v ? "matmul_f" : "matmul", c, want, M * M);
    kct_free(c);
    kc_buffer_destroy(ba);
    kc_buffer_destroy(bb);
    kc_buffer_destroy(bc);
  }
  expect_path("reduce", true);
  expect_path("matmul", true);
  expect_path("reduce_f", false);
  expect_path("matmul_f", false);
  kct_free(a);
  kct_free(bm);
  kct_free(want);
  kct_destroy(rt);
}

/* Kernels the split cannot be sure of run as fibers, and right: a barrier
 * inside a switch, a goto, a barrier through a macro, a return before a
 * barrier, an initialized array that lives across a barrier, a
 * preprocessor line in the body, a macro that declares, a macro that
 * returns or breaks (the split's loops over items would take its jump). Each computes y = the sum of the
 * group's x (WG2 items). */
enum { WG2 = 32 };
#define SRC_SUM_HEAD(name) \
  "KC_KERNEL void " name "(KC_GLOBAL const float *x, KC_GLOBAL float *y, int mode) {\n" \
  "  KC_LOCAL float sh[32];\n" \
  "  size_t l = kc_local_id(0);\n" \
  "  sh[l] = x[kc_global_id(0)];\n"
#define SRC_SUM_TAIL \
  "  float s = 0;\n" \
  "  for (size_t i = 0; i < kc_local_size(0); i++) s += sh[i];\n" \
  "  y[kc_global_id(0)] = s;\n" \
  "}\n"
static const char *const SRC_FALLBACKS[][2] = {
    {"sum_switch", SRC_SUM_HEAD("sum_switch") "  switch (mode) {\n  case 1: kc_barrier(); break;\n"
                                              "  default: kc_barrier(); break;\n  }\n" SRC_SUM_TAIL},
    {"sum_goto", SRC_SUM_HEAD("sum_goto") "  if (mode < 0) goto out;\n  kc_barrier();\nout:;\n" SRC_SUM_TAIL},
    {"sum_macro", "#define SYNC kc_barrier()\n" SRC_SUM_HEAD("sum_macro") "  SYNC;\n" SRC_SUM_TAIL},
    {"sum_return", SRC_SUM_HEAD("sum_return") "  if (mode < 0) return;\n  kc_barrier();\n" SRC_SUM_TAIL},
    {"sum_arr", SRC_SUM_HEAD("sum_arr") "  float w[2] = {1.0f, 0.0f};\n  kc_barrier();\n"
                                        "  y[kc_global_id(0)] = w[1];\n" SRC_SUM_TAIL},
    {"sum_pp", SRC_SUM_HEAD("sum_pp") "  #if 1\n  kc_barrier();\n  #endif\n" SRC_SUM_TAIL},
    {"sum_decl", "#define DECL float t = 1.0f\n" SRC_SUM_HEAD("sum_decl") "  DECL;\n  kc_barrier();\n"
                                                                          "  (void)t;\n" SRC_SUM_TAIL},
    {"sum_leave",
     "#define LEAVE_IF(c) if (c) return\n" SRC_SUM_HEAD("sum_leave") "  kc_barrier();\n"
                                                                     "  LEAVE_IF(mode < 0);\n" SRC_SUM_TAIL},
    {"sum_stop", "#define STOP_AT(c) if (c) break\n" SRC_SUM_HEAD(
                     "sum_stop") "  for (int r = 0; r < 4; r++) {\n    kc_barrier();\n    STOP_AT(r == "
                                 "mode);\n  }\n" SRC_SUM_TAIL},
};

/* Nested loops with barriers in a 2-D group, a loop counter that starts
 * at the item's id (the trip count the same for all), a break and a
 * continue inside a loop between barriers. */
enum { NEST_W = 8, NEST_H = 4, NEST_GX = 5, NEST_GY = 3, NEST_REPS = 2 };
static const char SRC_NEST[] =
    "KC_KERNEL void nest(KC_GLOBAL const float *x, KC_GLOBAL float *y, int reps) {\n"
    "  KC_LOCAL float sh[8][4];\n"
    "  int lx = (int)kc_local_id(0), ly = (int)kc_local_id(1);\n"
    "  int w = (int)kc_local_size(0), h = (int)kc_local_size(1);\n"
    "  size_t g = kc_global_id(1) * kc_global_size(0) + kc_global_id(0);\n"
    "  float v = x[g];\n"
    "  for (int a = 0; a < reps; a++) {\n"
    "    for (int i = lx; i < lx + 2; i++) {\n"
    "      sh[lx][ly] = v + (float)i;\n"
    "      kc_barrier();\n"
    "      float s = 0;\n"
    "      for (int k = 0; k < w; k++) {\n"
    "        if (k == lx) continue;\n"
    "        s += sh[k][ly] + 0.0f * (float)h;\n"
    "        if (k > 5) break;\n"
    "      }\n"
    "      kc_barrier();\n"
    "      v = s * 0.25f;\n"
    "    }\n"
    "  }\n"
    "  y[g] = v;\n"
    "}\n";

static void nest_ref(const float *x, float *y) {
  enum { W = NEST_W, H = NEST_H, GW = NEST_W * NEST_GX };
  for (int gy = 0; gy < NEST_GY; gy++)
    for (int gx = 0; gx < NEST_GX; gx++) {
      float v[W][H], sh[W][H];
      for (int lx = 0; lx < W; lx++)
        for (int ly = 0; ly < H; ly++) v[lx][ly] = x[(gy * H + ly) * GW + gx * W + lx];
      for (int a = 0; a < NEST_REPS; a++)
        for (int t = 0; t < 2; t++) {
          for (int lx = 0; lx < W; lx++)
            for (int ly = 0; ly < H; ly++) sh[lx][ly] = v[lx][ly] + (float)(lx + t);
          for (int lx = 0; lx < W; lx++)
            for (int ly = 0; ly < H; ly++) {
              float s = 0;
              for (int k = 0; k < W; k++) {
                if (k == lx) continue;
                s += sh[k][ly];
                if (k > 5) break;
              }
              v[lx][ly] = s * 0.25f;
            }
        }
      for (int lx = 0; lx < W; lx++)
        for (int ly = 0; ly < H; ly++) y[(gy * H + ly) * GW + gx * W + lx] = v[lx][ly];
    }
}

/* Values read from memory before a barrier are kept, not read again after
 * it: the kernel overwrites what it read. A helper reads the item's id
 * after the barrier (through the thread's item, in each loop's item). Two
 * loops with the same counter's name (neither cut). */
static const char SRC_SNAP[] = "KC_KERNEL void snap(KC_GLOBAL float *x, KC_GLOBAL float *y) {\n"
                               "  size_t g = kc_global_id(0);\n"
                               "  float z = 0.0f;\n"
                               "  for (int i = 0; i < 4; i++) z += 1.0f;\n"
                               "  for (int i = 0; i < 4; i++) z -= 1.0f;\n"
                               "  float v = x[g];\n"
                               "  float two[2] = {2.0f, 0.0f};\n"
                               "  float w = *(x + g) * two[0];\n"
                               "  x[g] = -1.0f;\n"
                               "  kc_barrier();\n"
                               "  y[gid_of()] = v + w + z;\n"
                               "}\n";

static void test_split_keeps_values_read_from_memory(void **state) {
  (void)state;
  enum { N = 256 };
  kc_runtime *rt = paths_runtime();
  kc_context *ctx = kct_context(rt);
  kct_define(rt, "gid_of", "KC_DEVICE size_t gid_of(void) { return kc_global_id(0); }");
  kct_define(rt, "snap", SRC_SNAP);
  float *x = kct_calloc(N * sizeof(float));
  for (int i = 0; i < N; i++) x[i] = (float)(i % 9);
  float *y = run_xy(rt, ctx, "snap", x, N, 64, NULL);
  for (int i = 0; i < N; i++)
    if (y[i] != 3.0f * x[i]) fail_msg("y[%d] = %g, expected %g", i, y[i], 3.0f * x[i]);
  expect_path("snap", true);
  kct_free(y);
  kct_free(x);
  kct_destroy(rt);
}

/* Writes the split's checks must see (a review found both taken for
 * values that could be computed again after the barrier): a macro that
 * assigns to its argument (then the kernel keeps the fibers), and, split,
 * an increment through parentheses and a read through a cast. */
static const char SRC_BUMPED[] = "KC_KERNEL void bumped(KC_GLOBAL float *x, KC_GLOBAL float *y) {\n"
                                 "  size_t g = kc_global_id(0);\n"
                                 "  float b = (float)g;\n"
                                 "  BUMP(b);\n"
                                 "  x[g] = -1.0f;\n"
                                 "  kc_barrier();\n"
                                 "  y[g] = b;\n"
                                 "}\n";
static const char SRC_CAST[] = "KC_KERNEL void castread(KC_GLOBAL float *x, KC_GLOBAL float *y) {\n"
                               "  size_t g = kc_global_id(0);\n"
                               "  float p = (float)g;\n"
                               "  (p)++;\n"
                               "  float c = (float)*(x + g);\n"
                               "  x[g] = -1.0f;\n"
                               "  kc_barrier();\n"
                               "  y[g] = p + c;\n"
                               "}\n";

static void test_split_sees_writes_through_macros_and_casts(void **state) {
  (void)state;
  enum { N = 256 };
  kc_runtime *rt = paths_runtime();
  kc_context *ctx = kct_context(rt);
  kct_define(rt, "BUMP", "#define BUMP(v) ((v) += 1.0f)");
  kct_define(rt, "bumped", SRC_BUMPED);
  kct_define(rt, "castread", SRC_CAST);
  float *x = kct_calloc(N * sizeof(float));
  for (int i = 0; i < N; i++) x[i] = (float)(i % 7);
  float *y = run_xy(rt, ctx, "bumped", x, N, 64, NULL);
  for (int i = 0; i < N; i++)
    if (y[i] != (float)i + 1.0f) fail_msg("bumped: y[%d] = %g, expected %g", i, y[i], (float)i + 1.0f);
  expect_path("bumped", false); /* the macro writes: fibers */
  kct_free(y);
  for (int i = 0; i < N; i++) x[i] = (float)(i % 7);
  y = run_xy(rt, ctx, "castread", x, N, 64, NULL);
  for (int i = 0; i < N; i++) {
    float want = (float)i + 1.0f + (float)(i % 7);
    if (y[i] != want) fail_msg("castread: y[%d] = %g, expected %g", i, y[i], want);
  }
  expect_path("castread", true);
  kct_free(y);
  kct_free(x);
  kct_destroy(rt);
}

/* Values kept across a barrier named as the fields of the host's work
 * item (grp, lid, lsz, ngrp): the split keeps each by a macro of its name,
 * which took the fields' names too and made C that did not compile. */
static const char SRC_FIELD_NAMES[] =
    "KC_KERNEL void field_names(KC_GLOBAL const float *x, KC_GLOBAL float *y) {\n"
    "  KC_LOCAL float sh[32];\n"
    "  int grp = (int)kc_group_id(0), lid = (int)kc_local_id(0);\n"
    "  int lsz = (int)kc_local_size(0), ngrp = (int)kc_num_groups(0);\n"
    "  sh[lid] = x[kc_global_id(0)];\n"
    "  kc_barrier();\n"
    "  y[kc_global_id(0)] = sh[(lid + 1) % lsz] + (float)(grp * 1000 + ngrp);\n"
    "}\n";

static void test_split_values_named_as_fields(void **state) {
  (void)state;
  enum { N = 128 };
  kc_runtime *rt = paths_runtime();
  kc_context *ctx = kct_context(rt);
  kct_define(rt, "field_names", SRC_FIELD_NAMES);
  float *x = kct_calloc(N * sizeof(float));
  for (int i = 0; i < N; i++) x[i] = (float)(i % 13);
  float *y = run_xy(rt, ctx, "field_names", x, N, 32, NULL);
  for (int i = 0; i < N; i++) {
    float want = x[i / 32 * 32 + (i % 32 + 1) % 32] + (float)(i / 32 * 1000 + N / 32);
    if (y[i] != want) fail_msg("field_names: y[%d] = %g, expected %g", i, y[i], want);
  }
  expect_path("field_names", true);
  kct_free(y);
  kct_free(x);
  kct_destroy(rt);
}

/* Two loops with barriers in a row, each declaring its counter r and a
 * value t that lives across a barrier by the same names. */
static const char SRC_TWICE[] =
    "KC_KERNEL void twice(KC_GLOBAL const float *x, KC_GLOBAL float *y, int rounds) {\n"
    "  KC_LOCAL float sh[32];\n"
    "  size_t l = kc_local_id(0);\n"
    "  float v = x[kc_global_id(0)];\n"
    "  for (int r = 0; r < rounds; r++) {\n"
    "    sh[l] = v;\n"
    "    kc_barrier();\n"
    "    float t = sh[(l + 1) % 32];\n"
    "    kc_barrier();\n"
    "    v = v + t;\n"
    "  }\n"
    "  for (int r = 0; r < rounds; r++) {\n"
    "    sh[l] = v;\n"
    "    kc_barrier();\n"
    "    float t = sh[(l + 31) % 32];\n"
    "    kc_barrier();\n"
    "    v = v - 0.5f * t;\n"
    "  }\n"
    "  y[kc_global_id(0)] = v;\n"
    "}\n";

static void test_split_names_declared_again(void **state) {
  (void)state;
  enum { W = 32, G = 7, N = W * G, ROUNDS = 3 };
  kc_runtime *rt = paths_runtime();
  kc_context *ctx = kct_context(rt);
  kct_define(rt, "twice", SRC_TWICE);
  float *x = kct_calloc(N * sizeof(float)), *want = kct_calloc(N * sizeof(float));
  for (int i = 0; i < N; i++) x[i] = (float)(i % 7) - 3.0f;
  for (int gr = 0; gr < G; gr++) {
    float v[W], sh[W];
    for (int l = 0; l < W; l++) v[l] = x[gr * W + l];
    for (int r = 0; r < ROUNDS; r++) {
      for (int l = 0; l < W; l++) sh[l] = v[l];
      for (int l = 0; l < W; l++) v[l] = v[l] + sh[(l + 1) % W];
    }
    for (int r = 0; r < ROUNDS; r++) {
      for (int l = 0; l < W; l++) sh[l] = v[l];
      for (int l = 0; l < W; l++) v[l] = v[l] - 0.5f * sh[(l + W - 1) % W];
    }
    for (int l = 0; l < W; l++) want[gr * W + l] = v[l];
  }
  int rounds = ROUNDS;
  float *y = run_xy(rt, ctx, "twice", x, N, W, &rounds);
  expect_same("twice", y, want, N);
  expect_path("twice", true);
  kct_free(y);
  kct_free(x);
  kct_free(want);
  kct_destroy(rt);
}

static void test_split_nested_loops_2d(void **state) {
  (void)state;
  enum { N = NEST_W * NEST_H * NEST_GX * NEST_GY };
  kc_runtime *rt = paths_runtime();
  kc_context *ctx = kct_context(rt);
  kct_define(rt, "nest", SRC_NEST);
  float *x = kct_calloc(N * sizeof(float)), *want = kct_calloc(N * sizeof(float));
  for (int i = 0; i < N; i++) x[i] = (float)((i * 5) % 13) - 6.0f;
  nest_ref(x, want);
  kc_buffer *bx = buffer_of(rt, ctx, x, N), *by = buffer_of(rt, ctx, NULL, N);
  int reps = NEST_REPS;
  kc_arg args[] = {KC_ARG_BUF(bx), KC_ARG_BUF(by), KC_ARG_VAL(reps)};
  kc_dim3 g = {NEST_GX, NEST_GY, 1}, b = {NEST_W, NEST_H, 1};
  KCT_OK(rt, kc_launch(kct_kernel(rt, "nest", NULL), ctx, &g, &b, args, 3));
  KCT_OK(rt, kc_context_finish(ctx));
  float *y = read_all(rt, by, N);
  expect_same("nest", y, want, N);
  expect_path("nest", true);
  kct_free(y);
  kct_free(x);
  kct_free(want);
  kc_buffer_destroy(bx);
  kc_buffer_destroy(by);
  kct_destroy(rt);
}

static void test_split_falls_back_to_fibers(void **state) {
  (void)state;
  enum { G2 = 9, N = WG2 * G2 };
  kc_runtime *rt = paths_runtime();
  kc_context *ctx = kct_context(rt);
  float *x = kct_calloc(N * sizeof(float)), *want = kct_calloc(N * sizeof(float));
  for (int i = 0; i < N; i++) x[i] = (float)(i % 11) - 5.0f;
  for (int gi = 0; gi < G2; gi++) {
    float s = 0;
    for (int i = 0; i < WG2; i++) s += x[gi * WG2 + i];
    for (int i = 0; i < WG2; i++) want[gi * WG2 + i] = s;
  }
  int mode = 1;
  for (size_t k = 0; k < sizeof SRC_FALLBACKS / sizeof *SRC_FALLBACKS; k++) {
    kct_define(rt, SRC_FALLBACKS[k][0], SRC_FALLBACKS[k][1]);
    float *y = run_xy(rt, ctx, SRC_FALLBACKS[k][0], x, N, WG2, &mode);
    expect_same(SRC_FALLBACKS[k][0], y, want, N);
    kct_free(y);
    expect_path(SRC_FALLBACKS[k][0], false);
  }
  kct_free(x);
  kct_free(want);
  kct_destroy(rt);
}

/* Macros from a header on disk, which kcache does not read: a kernel with
 * barriers that includes one runs as fibers (the header's BUMP writes a
 * value kept across the barrier, which the split would compute again from
 * the ids); a kc_barrier() that only the header's SYNC shows is refused on
 * the host, clearly, where it would have run as a no-op (OpenCL runs it). */
static const char SRC_INC_BUMP[] = "#include <groups_hs.h>\n"
                                   "KC_KERNEL void inc_bump(KC_GLOBAL const float *x, KC_GLOBAL float *y) {\n"
                                   "  KC_LOCAL float sh[32];\n"
                                   "  size_t l = kc_local_id(0);\n"
                                   "  float v = (float)kc_local_id(0);\n"
                                   "  BUMP(v);\n"
                                   "  sh[l] = x[kc_global_id(0)];\n"
                                   "  kc_barrier();\n"
                                   "  y[kc_global_id(0)] = v + sh[(l + 1) % 32];\n"
                                   "}\n";
static const char SRC_INC_SYNC[] = "#include <groups_hs.h>\n"
                                   "KC_KERNEL void inc_sync(KC_GLOBAL const float *x, KC_GLOBAL float *y) {\n"
                                   "  KC_LOCAL float sh[32];\n"
                                   "  size_t l = kc_local_id(0);\n"
                                   "  sh[l] = x[kc_global_id(0)];\n"
                                   "  SYNC;\n"
                                   "  y[kc_global_id(0)] = sh[(l + 1) % 32];\n"
                                   "}\n";

static const char SRC_INC_SHARED[] =
    "#include <groups_hs.h>\n"
    "KC_KERNEL void inc_shared(KC_GLOBAL const float *x, KC_GLOBAL float *y) {\n"
    "  SHARED(sh);\n"
    "  size_t l = kc_local_id(0);\n"
    "  sh[l] = 2.0f * x[kc_global_id(0)];\n"
    "  y[kc_global_id(0)] = sh[l];\n"
    "}\n";

static void test_macros_from_headers_on_disk(void **state) {
  (void)state;
  enum { N = 128 };
  char dir[KCT_DIR_LEN], path[KCT_DIR_LEN + 32], opts[KCT_DIR_LEN + 8];
  kct_mkdtemp(dir, sizeof dir, "groups-hs");
  snprintf(path, sizeof path, "%s/groups_hs.h", dir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(
      "#define BUMP(v) ((v) += 100.0f)\n#define SYNC kc_barrier()\n#define SHARED(n) KC_LOCAL float n[64]\n",
      f);
  assert_int_equal(fclose(f), 0);
  snprintf(opts, sizeof opts, "-I%s", dir);
  kc_runtime *rt = paths_runtime_with(opts);
  kc_context *ctx = kct_context(rt);
  kct_define(rt, "inc_bump", SRC_INC_BUMP);
  kct_define(rt, "inc_sync", SRC_INC_SYNC);
  float *x = kct_calloc(N * sizeof(float));
  for (int i = 0; i < N; i++) x[i] = (float)(i * 3 % 17);
  float *y = run_xy(rt, ctx, "inc_bump", x, N, 32, NULL);
  for (int i = 0; i < N; i++) {
    float want = (float)(i % 32) + 100.0f + x[i / 32 * 32 + (i % 32 + 1) % 32];
    if (y[i] != want) fail_msg("inc_bump: y[%d] = %g, expected %g", i, y[i], want);
  }
  expect_path("inc_bump", false);
  kct_free(y);
  if (kct_backend == KC_BACKEND_HOST) {
    kc_kernel *k = kct_kernel(rt, "inc_sync", NULL);
    kc_buffer *bx = buffer_of(rt, ctx, x, N), *by = buffer_of(rt, ctx, NULL, N);
    kc_dim3 g = {N / 32, 1, 1}, b = {32, 1, 1};
    KCT_STATUS(rt, KC_ECOMPILE, kc_launch(k, ctx, &g, &b, (kc_arg[]){KC_ARG_BUF(bx), KC_ARG_BUF(by)}, 2));
    KCT_CONTAINS(kc_errmsg(rt), "the kernel calls kc_barrier() where kcache does not see it");
    kc_buffer_destroy(bx);
    kc_buffer_destroy(by);
  } else {
    y = run_xy(rt, ctx, "inc_sync", x, N, 32, NULL);
    for (int i = 0; i < N; i++)
      if (y[i] != x[i / 32 * 32 + (i % 32 + 1) % 32]) fail_msg("inc_sync: y[%d] = %g", i, y[i]);
    kct_free(y);
  }
  /* a KC_LOCAL array that only the header declares: a copy of the object
   * for each thread of the pool (with one array for all, two groups at
   * once wrote each other's items, seen once in three runs of 20,000
   * groups of 64: the log says the copies are made) */
  kct_define(rt, "inc_shared", SRC_INC_SHARED);
  enum { M = 64 * 4096 };
  float *xm = kct_calloc(M * sizeof(float));
  for (int i = 0; i < M; i++) xm[i] = (float)(i % 1009);
  float *ym = run_xy(rt, ctx, "inc_shared", xm, M, 64, NULL);
  for (int i = 0; i < M; i++)
    if (ym[i] != 2.0f * xm[i]) fail_msg("inc_shared: y[%d] = %g, expected %g", i, ym[i], 2.0f * xm[i]);
  if (kct_backend == KC_BACKEND_HOST) {
    pthread_mutex_lock(&paths_mu);
    bool copies = strstr(paths, "'inc_shared' loads a copy of its object for each thread") != NULL;
    pthread_mutex_unlock(&paths_mu);
    if (!copies) fail_msg("inc_shared: no copy of the object per thread in the log: %s", paths);
  }
  kct_free(ym);
  kct_free(xm);
  kct_free(x);
  kct_destroy(rt);
  kct_rmrf(dir);
}

/* A macro that a compile option defines is unseen like a header's: a
 * kernel with barriers runs as fibers where such an option may jump or
 * write (here a write), and a -DN=value does not change that. */
static const char SRC_OPT_BUMP[] = "KC_KERNEL void opt_bump(KC_GLOBAL const float *x, KC_GLOBAL float *y) {\n"
                                   "  KC_LOCAL float sh[32];\n"
                                   "  size_t l = kc_local_id(0);\n"
                                   "  float v = (float)kc_local_id(0);\n"
                                   "  BUMP2(v);\n"
                                   "  sh[l] = x[kc_global_id(0)];\n"
                                   "  kc_barrier();\n"
                                   "  y[kc_global_id(0)] = v + sh[(l + 1) % 32] + (float)PLAIN;\n"
                                   "}\n";

static void test_macros_from_compile_options(void **state) {
  (void)state;
  enum { N = 128 };
  static const char *const opts[] = {"-DPLAIN=0 -DBUMP2(v)=((v)+=100.0f)", "-DPLAIN=100 -DBUMP2(v)=(v)"};
  for (size_t o = 0; o < 2; o++) {
    kc_runtime *rt = paths_runtime_with(opts[o]);
    kc_context *ctx = kct_context(rt);
    kct_define(rt, "opt_bump", SRC_OPT_BUMP);
    float *x = kct_calloc(N * sizeof(float));
    for (int i = 0; i < N; i++) x[i] = (float)(i * 5 % 19);
    float *y = run_xy(rt, ctx, "opt_bump", x, N, 32, NULL);
    for (int i = 0; i < N; i++) {
      float want = (float)(i % 32) + 100.0f + x[i / 32 * 32 + (i % 32 + 1) % 32];
      if (y[i] != want) fail_msg("opt_bump (%s): y[%d] = %g, expected %g", opts[o], i, y[i], want);
    }
    expect_path("opt_bump", o == 1); /* the write: fibers; a plain value: split */
    kct_free(y);
    kct_free(x);
    kct_destroy(rt);
  }
}

/* Global ids past INT_MAX: the host runs a group whose global ids all fit
 * in int with int loop variables as its ids, any other with the size_t
 * ones; the items at the boundary, read as size_t and cut to int, in a
 * kernel without barriers and in one split at a barrier. */
static const char SRC_FAR[] =
    "KC_KERNEL void far(KC_GLOBAL unsigned *out) {\n"
    "  size_t g = kc_global_id(0);\n"
    "  if (g < 0x7fffff00u) return;\n"
    "  size_t j = g - 0x7fffff00u;\n"
    "  if (j >= 512u) return; /* (ids gone wrong fail the test, not the process) */\n"
    "  out[3 * j] = (unsigned)(g >> 1);\n"
    "  out[3 * j + 1] = (unsigned)(int)kc_global_id(0);\n"
    "  out[3 * j + 2] = (unsigned)(kc_group_id(0) * kc_local_size(0) + kc_local_id(0));\n"
    "}\n";
static const char SRC_FAR_SPLIT[] = "KC_KERNEL void farsplit(KC_GLOBAL unsigned *out) {\n"
                                    "  KC_LOCAL unsigned seen[256];\n"
                                    "  size_t g = kc_global_id(0);\n"
                                    "  int l = (int)kc_local_id(0);\n"
                                    "  seen[l] = (unsigned)(int)kc_global_id(0);\n"
                                    "  kc_barrier();\n"
                                    "  if (g < 0x7fffff00u) return;\n"
                                    "  size_t j = g - 0x7fffff00u;\n"
                                    "  if (j >= 512u) return;\n"
                                    "  out[3 * j] = (unsigned)(g >> 1);\n"
                                    "  out[3 * j + 1] = seen[255 - l];\n"
                                    "  out[3 * j + 2] = (unsigned)kc_global_id(0);\n"
                                    "}\n";

static void test_global_ids_past_int_max(void **state) {
  (void)state;
  /* 2^31 + 256 items: CPU work; the other backends run it too, but only
   * the host has two ways to run it */
  if (kct_backend != KC_BACKEND_HOST) skip();
  enum { NOUT = 512 };
  kc_runtime *rt = paths_runtime();
  kc_context *ctx = kct_context(rt);
  kct_define(rt, "far", SRC_FAR);
  kct_define(rt, "farsplit", SRC_FAR_SPLIT);
  const char *names[] = {"far", "farsplit"};
  for (int k = 0; k < 2; k++) {
    kc_buffer *bo;
    KCT_OK(rt, kc_buffer_create(ctx, 3 * NOUT * sizeof(unsigned), &bo));
    kc_arg args[] = {KC_ARG_BUF(bo)};
    kc_dim3 g = {(1u << 23) + 1, 1, 1}, b = {256, 1, 1};
    KCT_OK(rt, kc_launch(kct_kernel(rt, names[k], NULL), ctx, &g, &b, args, 1));
    KCT_OK(rt, kc_context_finish(ctx));
    unsigned *out = kct_calloc(3 * NOUT * sizeof(unsigned));
    KCT_OK(rt, kc_buffer_read(bo, 0, out, 3 * NOUT * sizeof(unsigned)));
    for (unsigned j = 0; j < NOUT; j++) {
      unsigned long long gid = 0x7fffff00ull + j;
      /* farsplit: the value its group's mirror item saw */
      unsigned long long mirror = gid - gid % 256 + (255 - gid % 256);
      unsigned want[3] = {(unsigned)(gid >> 1), (unsigned)(k ? mirror : gid), (unsigned)gid};
      for (int c = 0; c < 3; c++)
        if (out[3 * j + c] != want[c])
          fail_msg("%s: out[%u] = %u, expected %u", names[k], 3 * j + c, out[3 * j + c], want[c]);
    }
    kct_free(out);
    kc_buffer_destroy(bo);
  }
  expect_path("farsplit", true);
  kct_destroy(rt);
}

KCT_MAIN_INIT_ONLY(KCT_TEST(test_reduction_with_local_memory_and_barriers), KCT_TEST(test_tiled_matmul),
                   KCT_TEST(test_ids_from_helpers_on_large_grids), KCT_TEST(test_stencil_2d),
                   KCT_TEST(test_rows_of_items_exact), KCT_TEST(test_local_arrays_under_concurrent_launches),
                   KCT_TEST(test_barrier_misuse_is_refused),
                   KCT_TEST(test_local_pointers_are_refused_on_the_host), KCT_TEST(test_pool_after_fork),
                   KCT_TEST(test_split_loops_and_live_values),
                   KCT_TEST(test_split_reduce_and_matmul_match_fibers),
                   KCT_TEST(test_split_falls_back_to_fibers), KCT_TEST(test_split_nested_loops_2d),
                   KCT_TEST(test_split_keeps_values_read_from_memory),
                   KCT_TEST(test_split_names_declared_again), KCT_TEST(test_split_values_named_as_fields),
                   KCT_TEST(test_split_sees_writes_through_macros_and_casts),
                   KCT_TEST(test_macros_from_headers_on_disk), KCT_TEST(test_macros_from_compile_options),
                   KCT_TEST(test_global_ids_past_int_max))
