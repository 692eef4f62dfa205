/* SPDX-License-Identifier: MIT */
/*
 * test_log.c -- the runtime's log (kcache.h, "log"): a callback receives
 * the warning of an unusable cache directory (instead of stderr); at debug
 * level it receives the trace: the first compile, "compiled ... in N ms",
 * the miss after a redefinition that names the callee and its world, a
 * context reset, disk misses and hits; below debug none of that; $KC_LOG
 * sets the level when the options do not, and a bad value warns; a bad
 * value of another setting is warned about through the callback too.
 */
#include "kc_test.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* Everything the callback received, one "LEVEL|message" line each. */
typedef struct capture {
  char text[64 * 1024];
  size_t len;
  unsigned counts[5];
} capture;

static void capture_fn(void *ud, kc_log_level level, const char *msg) {
  capture *c = ud;
  assert_true(level >= KC_LOG_ERROR && level <= KC_LOG_DEBUG);
  assert_null(strchr(msg, '\n'));
  c->counts[level]++;
  int n = snprintf(c->text + c->len, sizeof c->text - c->len, "%d|%s\n", (int)level, msg);
  if (n > 0) c->len += (size_t)n < sizeof c->text - c->len ? (size_t)n : sizeof c->text - c->len - 1;
}

static const char *tmpdir(void) {
  const char *t = getenv("TMPDIR");
  return t && *t ? t : "/tmp";
}

static kc_runtime *logged_runtime(capture *cap, kc_log_level level, const char *cache_dir) {
  kc_options o;
  kc_options_init(&o);
  o.log = capture_fn;
  o.log_ud = cap;
  o.log_level = level;
  if (cache_dir) o.cache_dir = cache_dir;
  else o.cache_disable = 1;
  return kct_runtime(&o);
}

static const char *const h1 = "KC_DEVICE float h(float x) { return x + 1.0f; }";
static const char *const h2 = "KC_DEVICE float h(float x) { return x + 2.0f; }";
static const char *const kk = "KC_KERNEL void k(KC_GLOBAL float *y) { y[kc_global_id(0)] = h(1.0f); }";

/* h (h1) and k, which calls it, defined in rt. */
static void define_hk(kc_runtime *rt) {
  kct_define(rt, "h", h1);
  kct_define(rt, "k", kk);
}

/* A context of rt (*ctx) and a buffer of one float in it (returned), with
 * h and k defined. */
static kc_buffer *hk_setup(kc_runtime *rt, kc_context **ctx) {
  *ctx = kct_context(rt);
  kc_buffer *b = kct_buffer(rt, *ctx, 1);
  define_hk(rt);
  return b;
}

static float run_k(kc_runtime *rt, kc_context *ctx, kc_kernel *k, kc_buffer *b) {
  float out = 0;
  KCT_OK(rt, kct_run_bytes(k, ctx, b, 1, &out, sizeof out));
  return out;
}

static void test_unusable_cache_dir_warns_through_callback(void **state) {
  (void)state;
  char file[512], dir[600];
  snprintf(file, sizeof file, "%s/kc-log-file-XXXXXX", tmpdir());
  int fd = mkstemp(file);
  assert_true(fd >= 0);
  close(fd);
  snprintf(dir, sizeof dir, "%s/cache", file); /* under a regular file: never a directory */
  capture *cap = kct_calloc(sizeof *cap);
  kc_runtime *rt = logged_runtime(cap, KC_LOG_DEFAULT, dir);
  assert_null(kc_cache_dir(rt));
  assert_int_equal(cap->counts[KC_LOG_WARN], 1);
  KCT_CONTAINS(cap->text, "2|cannot use ");
  KCT_CONTAINS(cap->text, "as the disk cache");
  KCT_CONTAINS(cap->text, "memory only");
  kct_destroy(rt);
  unlink(file);
}

static void test_debug_trace_says_why(void **state) {
  (void)state;
  capture *cap = kct_calloc(sizeof *cap);
  kc_runtime *rt = logged_runtime(cap, KC_LOG_DEBUG, NULL);
  kc_context *ctx;
  kc_buffer *b = hk_setup(rt, &ctx);
  kc_kernel *k = kct_kernel(rt, "k", NULL);
  assert_true(run_k(rt, ctx, k, b) == 2.0f);
  KCT_CONTAINS(cap->text, "4|kc_launch of 'k': miss: first launch of this handle in context");
  KCT_CONTAINS(cap->text, "4|kernel 'k': no code for world 3: first compile");
  KCT_CONTAINS(cap->text, "4|kernel 'k': no disk cache");
  KCT_CONTAINS(cap->text, "3|compiled kernel 'k' (");
  KCT_CONTAINS(cap->text, " ms\n");

  unsigned before = cap->counts[KC_LOG_DEBUG];
  assert_true(run_k(rt, ctx, k, b) == 2.0f); /* cached: the fast path says nothing */
  assert_int_equal(cap->counts[KC_LOG_DEBUG], before);

  kc_world w = kct_define(rt, "h", h2);
  assert_true(run_k(rt, ctx, k, b) == 3.0f);
  char want[200];
  snprintf(want, sizeof want, "4|kernel 'k': no code for world %llu: 'h' was redefined at world %llu",
           (unsigned long long)w, (unsigned long long)w);
  KCT_CONTAINS(cap->text, want);
  KCT_CONTAINS(cap->text, "miss: code #");
  snprintf(want, sizeof want, "serves worlds 3..%llu, not world %llu", (unsigned long long)w - 1,
           (unsigned long long)w);
  KCT_CONTAINS(cap->text, want);

  KCT_OK(rt, kc_context_reset(ctx));
  assert_true(run_k(rt, ctx, k, b) == 3.0f);
  KCT_CONTAINS(cap->text, "was reset");
  assert_int_equal(kct_stats(rt).compiles, 2);
  assert_int_equal(cap->counts[KC_LOG_WARN] + cap->counts[KC_LOG_ERROR], 0);
  kct_destroy(rt);
}

static void test_default_level_is_quiet(void **state) {
  (void)state;
  capture *cap = kct_calloc(sizeof *cap);
  kc_runtime *rt = logged_runtime(cap, KC_LOG_DEFAULT, NULL);
  kc_context *ctx;
  kc_buffer *b = hk_setup(rt, &ctx);
  assert_true(run_k(rt, ctx, kct_kernel(rt, "k", NULL), b) == 2.0f);
  assert_int_equal(cap->len, 0);
  kct_destroy(rt);
}

static void test_env_level_and_bad_value(void **state) {
  (void)state;
  capture *cap = kct_calloc(sizeof *cap);
  setenv("KC_LOG", "info", 1);
  kc_runtime *rt = logged_runtime(cap, KC_LOG_DEFAULT, NULL);
  kc_context *ctx;
  kc_buffer *b = hk_setup(rt, &ctx);
  assert_true(run_k(rt, ctx, kct_kernel(rt, "k", NULL), b) == 2.0f);
  KCT_CONTAINS(cap->text, "3|compiled kernel 'k'");
  assert_int_equal(cap->counts[KC_LOG_DEBUG], 0);
  kct_destroy(rt);

  memset(cap, 0, sizeof *cap);
  setenv("KC_LOG", "loud", 1);
  rt = logged_runtime(cap, KC_LOG_DEFAULT, NULL);
  KCT_CONTAINS(cap->text, "2|KC_LOG=\"loud\" is not error, warn, info or debug; using warn");
  kct_destroy(rt);

  memset(cap, 0, sizeof *cap); /* the options' level wins over the environment */
  setenv("KC_LOG", "debug", 1);
  rt = logged_runtime(cap, KC_LOG_ERROR, NULL);
  define_hk(rt);
  KCT_OK(rt, kc_kernel_compile(kct_kernel(rt, "k", NULL)));
  assert_int_equal(cap->len, 0);
  kct_destroy(rt);
  unsetenv("KC_LOG");
}

static void test_disk_trace(void **state) {
  (void)state;
  char dir[512];
  kct_mkdtemp(dir, sizeof dir, "log-cache");
  capture *cap = kct_calloc(sizeof *cap);
  for (int round = 0; round < 2; round++) {
    memset(cap, 0, sizeof *cap);
    kc_runtime *rt = logged_runtime(cap, KC_LOG_DEBUG, dir);
    define_hk(rt);
    KCT_OK(rt, kc_kernel_compile(kct_kernel(rt, "k", "N=1")));
    if (round == 0) {
      KCT_CONTAINS(cap->text, "4|kernel 'k' [N=1]: disk cache miss (no usable entry): compiling");
      KCT_CONTAINS(cap->text, "3|compiled kernel 'k' [N=1]");
    } else {
      KCT_CONTAINS(cap->text, "3|kernel 'k' [N=1]: disk cache hit, no compile");
      assert_null(strstr(cap->text, "compiled kernel"));
    }
    kct_destroy(rt);
  }
  kct_rmrf(dir);
}

/* The remote tier's warnings reach the same log: a tier that cannot be
 * used (here: a URL that is not redis://) says why, once, through the
 * callback, and the runtime works without it. */
static void test_remote_warning_through_callback(void **state) {
  (void)state;
  char dir[512];
  kct_mkdtemp(dir, sizeof dir, "log-remote");
  capture *cap = kct_calloc(sizeof *cap);
  kc_options o;
  kc_options_init(&o);
  o.log = capture_fn;
  o.log_ud = cap;
  o.cache_dir = dir;
  o.remote_url = "memcached://127.0.0.1:1";
  kc_runtime *rt = kct_runtime(&o);
  assert_null(kc_remote_url(rt));
  assert_int_equal(cap->counts[KC_LOG_WARN], 1);
  KCT_CONTAINS(cap->text, "2|the remote tier is off: ");
  kct_destroy(rt);
  kct_rmrf(dir);
}

/* A setting's malformed value is warned about through the runtime's log
 * (its callback, at its level), not on stderr: here the backends'
 * settings, checked when the runtime opens its backend. */
static void test_bad_setting_warns_through_callback(void **state) {
  (void)state;
  setenv("KC_HOST_THREADS", "lots", 1);
  setenv("KC_OPENCL_HELPER_TIMEOUT", "soon", 1);
  setenv("KC_OPENCL_HELPERS", "sometimes", 1);
  setenv("KC_HOST_STREAM_SPIN_US", "20000", 1);
  capture *cap = kct_calloc(sizeof *cap);
  kc_runtime *rt = logged_runtime(cap, KC_LOG_DEFAULT, NULL);
  KCT_CONTAINS(cap->text, "2|KC_HOST_THREADS=\"lots\" is not a whole number in range; using one per core\n");
  KCT_CONTAINS(cap->text, "2|KC_OPENCL_HELPER_TIMEOUT=\"soon\" is not ");
  KCT_CONTAINS(cap->text, "2|KC_OPENCL_HELPERS=\"sometimes\" is not ");
  KCT_CONTAINS(cap->text, "2|KC_HOST_STREAM_SPIN_US=\"20000\" is not a whole number in range; using 20 us\n");
  assert_int_equal(cap->counts[KC_LOG_WARN], 4);
  kct_destroy(rt);

  memset(cap, 0, sizeof *cap); /* at the runtime's level: errors only, none of them */
  rt = logged_runtime(cap, KC_LOG_ERROR, NULL);
  assert_int_equal(cap->len, 0);
  kct_destroy(rt);
  unsetenv("KC_HOST_THREADS");
  unsetenv("KC_OPENCL_HELPER_TIMEOUT");
  unsetenv("KC_OPENCL_HELPERS");
  unsetenv("KC_HOST_STREAM_SPIN_US");
}

int main(int argc, char **argv) {
  int rc = kct_main_init(argc, argv);
  if (rc >= 0) return rc;
  unsetenv("KC_LOG");
  unsetenv("KC_CACHE_DISABLE"); /* the tests choose per runtime */
  const struct CMUnitTest tests[] = {
      KCT_TEST(test_unusable_cache_dir_warns_through_callback),
      KCT_TEST(test_debug_trace_says_why),
      KCT_TEST(test_default_level_is_quiet),
      KCT_TEST(test_env_level_and_bad_value),
      KCT_TEST(test_disk_trace),
      KCT_TEST(test_remote_warning_through_callback),
      KCT_TEST(test_bad_setting_warns_through_callback),
  };
  return KCT_RUN(tests);
}
