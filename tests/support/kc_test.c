/* SPDX-License-Identifier: MIT */
/* kc_test.c -- the helpers declared in kc_test.h but for processes and
 * directories (proc.c) and memory mappings (maps.c): the backend, runtimes
 * and what a test made, the scenario fixture, launches, the interop suites'
 * configuration, temporary directories. */
#include "kc_test.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

kc_backend_kind kct_backend = KC_BACKEND_HOST;
const char *kct_backend_name = "host";

static const struct {
  const char *name;
  kc_backend_kind kind;
} kct_backends[] = {
    {"host", KC_BACKEND_HOST},
    {"opencl", KC_BACKEND_OPENCL},
    {"cuda", KC_BACKEND_CUDA},
};

int kct_main_init(int argc, char **argv) {
  const char *want = getenv("KC_TEST_BACKEND");
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--backend") && i + 1 < argc) want = argv[++i];
    else if (!strncmp(argv[i], "--backend=", 10)) want = argv[i] + 10;
    else {
      fprintf(stderr, "usage: %s [--backend host|opencl|cuda]\n", argv[0]);
      return 2;
    }
  }
  if (!want || !*want) want = "host";
  size_t i = 0, n = sizeof kct_backends / sizeof *kct_backends;
  while (i < n && strcmp(kct_backends[i].name, want)) i++;
  if (i == n) {
    fprintf(stderr, "%s: unknown backend \"%s\" (host, opencl or cuda)\n", argv[0], want);
    return 2;
  }
  kct_backend = kct_backends[i].kind;
  kct_backend_name = kct_backends[i].name;
  const char *why = NULL;
  if (!kc_backend_available(kct_backend, &why)) {
    printf("SKIPPED: backend %s unavailable: %s\n", kct_backend_name, why ? why : "(no reason given)");
    fflush(stdout);
    return 77;
  }
  return -1;
}

void kct_memory_only(void) { setenv("KC_CACHE_DISABLE", "1", 1); }

int kct_main_shared(int argc, char **argv, const char *what, const char *(*unavailable)(void),
                    kc_runtime **rt) {
  int rc = kct_main_init(argc, argv);
  if (rc >= 0) return rc;
  kct_memory_only();
  const char *why = unavailable ? unavailable() : NULL;
  if (why) {
    printf("SKIPPED: %s unavailable: %s\n", what, why);
    return 77;
  }
  return (*rt = kct_main_runtime()) ? -1 : 1;
}

int kct_main_only(int argc, char **argv, kc_backend_kind be, const char *name) {
  int rc = kct_main_init(argc, argv);
  if (rc >= 0) return rc;
  if (kct_backend != be) {
    printf("SKIPPED: %s backend only\n", name);
    return 77;
  }
  kct_memory_only();
  return -1;
}

void kct_host_only(void) {
  if (kct_backend != KC_BACKEND_HOST) {
    print_message("host backend only\n");
    skip();
  }
}

const char *kct_group_name(const char *what) {
  static char name[128];
  snprintf(name, sizeof name, "%s [%s]", what, kct_backend_name);
  return name;
}

/* What a test made and has not destroyed yet (tests run one at a time). */
#define KCT_TRACKED 64
static kc_runtime *kct_live_rt[KCT_TRACKED];
static void *kct_live_mem[KCT_TRACKED];

static void track(void **table, void *p) {
  for (int i = 0; i < KCT_TRACKED; i++)
    if (!table[i]) {
      table[i] = p;
      return;
    }
  fail_msg("kc_test: more than %d live objects in one test", KCT_TRACKED);
}

static bool untrack(void **table, void *p) {
  for (int i = 0; i < KCT_TRACKED; i++)
    if (table[i] == p) {
      table[i] = NULL;
      return true;
    }
  return false;
}

void kct_destroy(kc_runtime *rt) {
  if (!rt) return;
  if (!untrack((void **)kct_live_rt, rt)) fail_msg("kct_destroy: runtime %p is not live", (void *)rt);
  kc_runtime_destroy(rt);
}

void *kct_calloc(size_t size) {
  void *p = calloc(1, size);
  assert_non_null(p);
  track(kct_live_mem, p);
  return p;
}

void kct_free(void *p) {
  if (p && !untrack(kct_live_mem, p)) fail_msg("kct_free: %p was not allocated by kct_calloc", p);
  free(p);
}

/* The variables kct_setenv changed in this test, and their values before
 * (NULL: unset), to be put back by kct_teardown. */
#define KCT_ENV_MAX 16
static struct { char *name, *before; } kct_env[KCT_ENV_MAX];

void kct_setenv(const char *name, const char *value) {
  int i = 0;
  while (i < KCT_ENV_MAX && kct_env[i].name && strcmp(kct_env[i].name, name) != 0) i++;
  if (i == KCT_ENV_MAX) fail_msg("kct_setenv: more than %d variables in one test", KCT_ENV_MAX);
  if (!kct_env[i].name) { /* the first change in this test: remember the value before it */
    const char *before = getenv(name);
    kct_env[i].name = strdup(name);
    kct_env[i].before = before ? strdup(before) : NULL;
    assert_non_null(kct_env[i].name);
    if (before) assert_non_null(kct_env[i].before);
  }
  if (value) assert_int_equal(setenv(name, value, 1), 0);
  else assert_int_equal(unsetenv(name), 0);
}

/* Puts back every variable kct_setenv changed, in the reverse order. */
static void kct_env_restore(void) {
  for (int i = KCT_ENV_MAX - 1; i >= 0; i--) {
    if (!kct_env[i].name) continue;
    if (kct_env[i].before) setenv(kct_env[i].name, kct_env[i].before, 1);
    else unsetenv(kct_env[i].name);
    free(kct_env[i].name);
    free(kct_env[i].before);
    kct_env[i].name = kct_env[i].before = NULL;
  }
}

int kct_teardown(void **state) {
  (void)state;
  for (int i = 0; i < KCT_TRACKED; i++) {
    kc_runtime_destroy(kct_live_rt[i]);
    kct_live_rt[i] = NULL;
    free(kct_live_mem[i]);
    kct_live_mem[i] = NULL;
  }
  kct_env_restore(); /* after: a runtime's destroy may still read its settings */
  return 0;
}

kc_runtime *kct_runtime(kc_options *opt) {
  kc_options o;
  if (opt) o = *opt;
  else kc_options_init(&o);
  o.backend = kct_backend;
  kc_runtime *rt = NULL;
  kc_status st = kc_runtime_create(&o, &rt);
  if (st != KC_OK || !rt)
    fail_msg("kc_runtime_create(%s) returned %s: %s", kct_backend_name, kc_status_name(st), kc_errmsg(NULL));
  track((void **)kct_live_rt, rt);
  assert_string_equal(kc_runtime_backend(rt), kct_backend_name);
  return rt;
}

kc_runtime *kct_main_runtime(void) {
  kc_options opt;
  kc_options_init(&opt);
  opt.backend = kct_backend;
  kc_runtime *rt = NULL;
  if (kc_runtime_create(&opt, &rt) != KC_OK) {
    fprintf(stderr, "kc_runtime_create: %s\n", kc_errmsg(NULL));
    return NULL;
  }
  return rt;
}

kc_context *kct_context(kc_runtime *rt) {
  kc_context *ctx = NULL;
  KCT_OK(rt, kc_context_create(rt, 0, &ctx));
  assert_non_null(ctx);
  assert_int_not_equal(kc_context_id(ctx), 0);
  return ctx;
}

kc_buffer *kct_buffer(kc_runtime *rt, kc_context *ctx, uint32_t n) {
  kc_buffer *b = NULL;
  KCT_OK(rt, kc_buffer_create(ctx, n * sizeof(float), &b));
  assert_non_null(b);
  assert_int_equal(kc_buffer_size(b), n * sizeof(float));
  float *zero = calloc(n, sizeof *zero);
  assert_non_null(zero);
  KCT_OK(rt, kc_buffer_write(b, 0, zero, n * sizeof(float)));
  free(zero);
  return b;
}

kc_kernel *kct_kernel(kc_runtime *rt, const char *name, const char *params) {
  kc_kernel *k = NULL;
  KCT_OK(rt, kc_kernel_create(rt, name, params, &k));
  assert_non_null(k);
  return k;
}

kc_world kct_define(kc_runtime *rt, const char *name, const char *source) {
  kc_world w = 0;
  KCT_OK(rt, kc_define(rt, name, source, &w));
  assert_true(w >= 1);
  return w;
}

kc_stats kct_stats(kc_runtime *rt) {
  kc_stats s;
  kc_stats_get(rt, &s);
  return s;
}

/* Waits for ctx and reads out_bytes of b into out (if out). */
static kc_status finish_read(kc_context *ctx, kc_buffer *b, void *out, size_t out_bytes) {
  kc_status st = kc_context_finish(ctx);
  if (st || !out) return st;
  return kc_buffer_read(b, 0, out, out_bytes);
}

kc_status kct_run_bytes(kc_kernel *k, kc_context *ctx, kc_buffer *b, uint32_t n, void *out,
                        size_t out_bytes) {
  kc_dim3 grid = {n, 1, 1}, block = {1, 1, 1};
  kc_arg args[] = {KC_ARG_BUF(b)};
  kc_status st = kc_launch(k, ctx, &grid, &block, args, 1);
  if (st) return st;
  return finish_read(ctx, b, out, out_bytes);
}

kc_status kct_run(kc_kernel *k, kc_context *ctx, kc_buffer *b, uint32_t n, float *out) {
  return kct_run_bytes(k, ctx, b, n, out, n * sizeof *out);
}

kc_status kct_run_args(kc_args *a, kc_context *ctx, kc_buffer *b, uint32_t n, float *out) {
  kc_dim3 grid = {n, 1, 1}, block = {1, 1, 1};
  kc_status st = kc_launch_args(a, &grid, &block);
  if (st) return st;
  return finish_read(ctx, b, out, n * sizeof *out);
}

float kct_run_ok(kc_runtime *rt, kc_kernel *k, kc_context *ctx, kc_buffer *b, uint32_t n, float *out) {
  float one;
  if (!out) {
    assert_int_equal(n, 1);
    out = &one;
  }
  KCT_OK(rt, kct_run(k, ctx, b, n, out));
  return out[0];
}

kc_code_info kct_code(kc_runtime *rt, kc_kernel *k) {
  kc_code_info ci;
  memset(&ci, 0, sizeof ci);
  KCT_OK(rt, kc_kernel_code(k, &ci));
  assert_int_not_equal(ci.id, 0);
  assert_true(ci.min_world <= ci.max_world);
  return ci;
}

void kct_fx_open(kct_fixture *f) {
  memset(f, 0, sizeof *f);
  f->rt = kct_runtime(NULL);
  f->ctx = kct_context(f->rt);
  f->buf = kct_buffer(f->rt, f->ctx, KCT_FX_N);
}

void kct_fx_close(kct_fixture *f) { kct_destroy(f->rt); }

int kct_fx_setup(void **state) {
  kct_fixture *f = kct_calloc(sizeof *f); /* kct_teardown frees it */
  *state = f;
  kct_fx_open(f);
  return 0;
}

kc_kernel *kct_define_kernel(kc_runtime *rt, const char *callee, const char *callee_src, const char *kernel,
                             const char *kernel_src) {
  kct_define(rt, callee, callee_src);
  kct_define(rt, kernel, kernel_src);
  return kct_kernel(rt, kernel, NULL);
}

void kct_expect_linear(const float *out, uint32_t n, float scale, float add) {
  for (uint32_t i = 0; i < n; i++) {
    float want = (float)i * scale + add;
    if (out[i] != want) fail_msg("element %u is %g, expected %g", i, (double)out[i], (double)want);
  }
}

const char kct_src_add[] = "KC_KERNEL void add(KC_GLOBAL const float *x, KC_GLOBAL float *y, float b) {\n"
                           "  size_t g = kc_global_id(0);\n"
                           "  y[g] = x[g] + b;\n"
                           "}\n";

kc_launch_config kct_config(uint32_t groups, uint32_t block, kc_stream *s) {
  kc_launch_config c;
  kc_launch_config_init(&c);
  c.grid = (kc_dim3){groups, 1, 1};
  c.block = (kc_dim3){block, 1, 1};
  c.stream = s;
  return c;
}

bool kct_report_vfail(kct_report *r, const char *fmt, va_list ap) {
  if (r->failed++) return false;
  vsnprintf(r->what, sizeof r->what, fmt, ap);
  return true;
}

bool kct_report_fail(kct_report *r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  bool first = kct_report_vfail(r, fmt, ap);
  va_end(ap);
  return first;
}

void kct_report_check(const char *who, const kct_report *r) {
  if (r->failed) fail_msg("%s: %d failure(s), the first: %s", who, r->failed, r->what);
}

bool kct_in_path(const char *prog) {
  const char *path = getenv("PATH");
  if (!path) return false;
  char buf[1024];
  for (const char *p = path; *p;) {
    size_t n = strcspn(p, ":");
    snprintf(buf, sizeof buf, "%.*s/%s", (int)n, p, prog);
    if (n && access(buf, X_OK) == 0) return true;
    p += n + (p[n] == ':');
  }
  return false;
}

static const char *host_cc;
static void choose_host_cc(void) {
  const char *env = getenv("KC_HOST_CC");
  host_cc = env && *env ? env : kct_in_path("tcc") ? "tcc" : "cc";
}

const char *kct_host_cc(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, choose_host_cc);
  return host_cc;
}

void kct_mkdtemp(char *out, size_t len, const char *tag) {
  const char *tmp = getenv("TMPDIR");
  snprintf(out, len, "%s/kc-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", tag);
  if (!mkdtemp(out)) fail_msg("mkdtemp %s: %s", out, strerror(errno));
}

static void *kct_opencl_lib;
static pthread_once_t kct_opencl_once = PTHREAD_ONCE_INIT;
static void kct_opencl_open(void) { kct_opencl_lib = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_LOCAL); }

void *kct_opencl_sym(const char *name) {
  pthread_once(&kct_opencl_once, kct_opencl_open);
  return kct_opencl_lib ? dlsym(kct_opencl_lib, name) : NULL;
}

bool kct_opencl_sym_into(void *fn, size_t size, const char *name) {
  void *sym = kct_opencl_sym(name);
  if (!sym || size != sizeof sym) return false;
  memcpy(fn, &sym, sizeof sym);
  return true;
}

bool kct_pocl_private(char *out, size_t len, bool cache_off) {
  const char *tmp = getenv("TMPDIR");
  snprintf(out, len, "%s/kc-pocl-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(out)) {
    perror("kct_pocl_private: mkdtemp");
    return false;
  }
  if (cache_off) setenv("POCL_KERNEL_CACHE", "0", 1);
  setenv("POCL_CACHE_DIR", out, 1);
  return true;
}

void kct_rmrf(const char *path) {
  struct stat st;
  if (lstat(path, &st) != 0) return;
  if (S_ISDIR(st.st_mode)) {
    chmod(path, 0755); /* tests make directories read-only */
    DIR *d = opendir(path);
    if (d) {
      for (struct dirent *de; (de = readdir(d));) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        char sub[4096];
        snprintf(sub, sizeof sub, "%s/%s", path, de->d_name);
        kct_rmrf(sub);
      }
      closedir(d);
    }
    rmdir(path);
  } else {
    unlink(path);
  }
}

double kct_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void kct_hold_init(kct_hold *h, bool armed) {
  memset(h, 0, sizeof *h);
  pthread_mutex_init(&h->mu, NULL);
  pthread_cond_init(&h->cv, NULL);
  h->armed = armed;
}

void kct_hold_log(void *ud, kc_log_level level, const char *msg) {
  kct_hold *h = ud;
  (void)level;
  if (!strstr(msg, "compiled")) return;
  pthread_mutex_lock(&h->mu);
  if (h->armed) {
    h->armed = false;
    h->inside = true;
    pthread_cond_broadcast(&h->cv);
    while (!h->release) pthread_cond_wait(&h->cv, &h->mu);
  }
  pthread_mutex_unlock(&h->mu);
}

void kct_hold_arm(kct_hold *h) {
  pthread_mutex_lock(&h->mu);
  h->armed = true;
  pthread_mutex_unlock(&h->mu);
}

void kct_hold_wait_inside(kct_hold *h) {
  pthread_mutex_lock(&h->mu);
  while (!h->inside) pthread_cond_wait(&h->cv, &h->mu);
  pthread_mutex_unlock(&h->mu);
}

void kct_hold_release(kct_hold *h) {
  pthread_mutex_lock(&h->mu);
  h->release = true;
  pthread_cond_broadcast(&h->cv);
  pthread_mutex_unlock(&h->mu);
}

void kct_hold_destroy(kct_hold *h) {
  pthread_cond_destroy(&h->cv);
  pthread_mutex_destroy(&h->mu);
}
