/* SPDX-License-Identifier: MIT */
/* st.c -- the helpers declared in st.h. */
#include "st.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

const char st_h_src[] = "KC_DEVICE float h(float x) { return 3.0f * x + 1.0f; }";
const char st_k_src[] =
    "KC_KERNEL void k(KC_GLOBAL float *y) { size_t i = kc_global_id(0); y[i] = h((float)i); }";
const char st_kv_src[] =
    "KC_KERNEL void kv(KC_GLOBAL float *y) { size_t i = kc_global_id(0); y[i] = h((float)i) + V; }";

kc_runtime *st_runtime_nofail(const char *cache_dir, const kc_options *opt) {
  kc_options o;
  if (opt) o = *opt;
  else kc_options_init(&o);
  o.backend = kct_backend;
  if (!o.host_cc) o.host_cc = kct_host_cc();
  o.cache_dir = cache_dir;
  if (!cache_dir) o.cache_disable = 1;
  kc_runtime *rt = NULL;
  return kc_runtime_create(&o, &rt) == KC_OK ? rt : NULL;
}

kc_runtime *st_runtime(const char *cache_dir, const kc_options *opt) {
  kc_runtime *rt = st_runtime_nofail(cache_dir, opt);
  if (!rt) fail_msg("kc_runtime_create: %s", kc_errmsg(NULL));
  return rt;
}

kc_status st_define(kc_runtime *rt) {
  kc_status st = kc_define(rt, "h", st_h_src, NULL);
  if (!st) st = kc_define(rt, "k", st_k_src, NULL);
  if (!st) st = kc_define(rt, "kv", st_kv_src, NULL);
  return st;
}

kc_status st_run(kc_runtime *rt, const char *name, const char *params, uint32_t n, float add) {
  kc_context *ctx = NULL;
  kc_buffer *b = NULL;
  kc_kernel *k = NULL;
  float out[64];
  if (n > 64) n = 64;
  kc_status st = kc_context_create(rt, 0, &ctx);
  if (!st) st = kc_buffer_create(ctx, n * sizeof(float), &b);
  if (!st) st = kc_kernel_create(rt, name, params, &k);
  if (!st) st = kct_run(k, ctx, b, n, out);
  for (uint32_t i = 0; !st && i < n; i++)
    if (out[i] != 3.0f * (float)i + 1.0f + add) st = KC_EBACKEND;
  kc_kernel_destroy(k);
  kc_buffer_destroy(b);
  kc_context_destroy(ctx);
  return st;
}

void st_store_k(const char *cache_dir) {
  kc_runtime *rt = st_runtime(cache_dir, NULL);
  KCT_OK(rt, st_define(rt));
  st_run_ok(rt, "k", NULL, 0);
  kc_runtime_destroy(rt);
}

void st_run_ok(kc_runtime *rt, const char *name, const char *params, float add) {
  kc_status st = st_run(rt, name, params, 16, add);
  if (st == KC_EBACKEND) fail_msg("kernel %s(%s) computed a wrong result", name, params ? params : "");
  if (st) fail_msg("running %s: %s: %s", name, kc_status_name(st), kc_errmsg(rt));
}

size_t st_entries(const char *root, uint64_t *total) {
  char vdir[4096];
  kc__store_vdir(root, vdir, sizeof vdir);
  kc__store_file *f;
  size_t n;
  if (kc__store_list(NULL, vdir, &f, &n) != KC_OK) fail_msg("listing %s", vdir);
  uint64_t sum = 0;
  for (size_t i = 0; i < n; i++) sum += f[i].size;
  kc__store_list_free(NULL, f, n);
  if (total) *total = sum;
  return n;
}

void st_only_entry(const char *root, char *path, size_t len) {
  char vdir[4096];
  kc__store_vdir(root, vdir, sizeof vdir);
  kc__store_file *f;
  size_t n;
  if (kc__store_list(NULL, vdir, &f, &n) != KC_OK) fail_msg("listing %s", vdir);
  if (n != 1) {
    kc__store_list_free(NULL, f, n);
    fail_msg("expected one entry in %s, found %zu", vdir, n);
  }
  snprintf(path, len, "%s", f[0].path);
  kc__store_list_free(NULL, f, n);
}

void *st_read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) fail_msg("open %s: %s", path, strerror(errno));
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *p = malloc((size_t)n + 1); /* a NUL after the bytes: a text file is a string */
  assert_non_null(p);
  if (fread(p, 1, (size_t)n, f) != (size_t)n) fail_msg("read %s", path);
  fclose(f);
  p[n] = 0;
  *size = (size_t)n;
  return p;
}

void st_write_file(const char *path, const void *data, size_t size) {
  FILE *f = fopen(path, "wb");
  if (!f) fail_msg("create %s: %s", path, strerror(errno));
  if (size && fwrite(data, 1, size, f) != size) fail_msg("write %s", path);
  fclose(f);
}

static int saved_stderr = -1;
static char capture_path[4096];

void st_capture_begin(void) {
  const char *tmp = getenv("TMPDIR");
  snprintf(capture_path, sizeof capture_path, "%s/kc-store-stderr-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  int fd = mkstemp(capture_path);
  assert_true(fd >= 0);
  fflush(stderr);
  saved_stderr = dup(2);
  dup2(fd, 2);
  close(fd);
}

char *st_capture_end(void) {
  fflush(stderr);
  dup2(saved_stderr, 2);
  close(saved_stderr);
  saved_stderr = -1;
  size_t n;
  char *text = st_read_file(capture_path, &n);
  unlink(capture_path);
  char *s = realloc(text, n + 1);
  assert_non_null(s);
  s[n] = 0;
  /* let the test's log show what the library said */
  if (n) fprintf(stderr, "[captured stderr] %s", s);
  return s;
}

size_t st_count(const char *h, const char *needle) {
  size_t n = 0;
  for (const char *p = h; (p = strstr(p, needle)); p += strlen(needle)) n++;
  return n;
}

void st_wrapper(const char *dir, char *path, size_t len) {
  snprintf(path, len, "%s/cc-wrapper", dir);
  kct_write_script(path,
                   "#!/bin/sh\n"
                   "# a kcache test compiler: %s, optionally counted and paused\n"
                   "case \"$1\" in --version|-vv) exec %s \"$@\";; esac\n" /* what it is, not compiles */
                   "[ -n \"$KC_TEST_COUNT\" ] && echo compile >> \"$KC_TEST_COUNT\"\n"
                   "[ -n \"$KC_TEST_MARK\" ] && : > \"$KC_TEST_MARK\"\n"
                   "[ -n \"$KC_TEST_SLEEP\" ] && sleep \"$KC_TEST_SLEEP\"\n"
                   "exec %s \"$@\"\n",
                   kct_host_cc(), kct_host_cc(), kct_host_cc());
}

size_t st_lines(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t n = 0;
  for (int c; (c = fgetc(f)) != EOF;) n += c == '\n';
  fclose(f);
  return n;
}

static bool find_entry(const char *root, const char *entry, const char *params, char *path, size_t len) {
  char vdir[4096];
  kc__store_vdir(root, vdir, sizeof vdir);
  kc__store_file *f;
  size_t n;
  if (kc__store_list(NULL, vdir, &f, &n) != KC_OK) return false;
  bool found = false;
  for (size_t i = 0; i < n && !found; i++) {
    kc__entry e;
    if (kc__entry_read(NULL, f[i].path, f[i].key, &e, NULL, 0) != KC_OK) continue;
    if (!strcmp(e.entry, entry) && !strcmp(e.params, params ? params : "")) {
      found = true;
      if (path) snprintf(path, len, "%s", f[i].path);
    }
    kc__entry_free(NULL, &e);
  }
  kc__store_list_free(NULL, f, n);
  return found;
}

bool st_has(const char *root, const char *entry, const char *params) {
  return find_entry(root, entry, params, NULL, 0);
}

void st_entry_of(const char *root, const char *entry, const char *params, char *path, size_t len) {
  if (!find_entry(root, entry, params, path, len))
    fail_msg("no entry for %s(%s) under %s", entry, params ? params : "", root);
}

/* Names in dir that start with prefix or end with suffix (NULL: none; "": every name). */
static size_t count_in(const char *dir, const char *prefix, const char *suffix) {
  size_t count = 0;
  DIR *d = opendir(dir);
  if (!d) return 0;
  for (struct dirent *de; (de = readdir(d));) {
    size_t nl = strlen(de->d_name);
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
    if (prefix && !strncmp(de->d_name, prefix, strlen(prefix))) count++;
    else if (suffix && nl >= strlen(suffix) && !strcmp(de->d_name + nl - strlen(suffix), suffix)) count++;
  }
  closedir(d);
  return count;
}

/* The count_in of each bucket directory of root's store. */
static size_t count_in_buckets(const char *root, const char *prefix, const char *suffix) {
  char vdir[4096];
  kc__store_vdir(root, vdir, sizeof vdir);
  size_t count = 0;
  for (int b = 0; b < 256; b++) {
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/%02x", vdir, b);
    count += count_in(dir, prefix, suffix);
  }
  return count;
}

/* count_in of vdir/name. */
static size_t count_in_aux(const char *root, const char *name, const char *prefix, const char *suffix) {
  char vdir[4096], dir[4200];
  kc__store_vdir(root, vdir, sizeof vdir);
  snprintf(dir, sizeof dir, "%s/%s", vdir, name);
  return count_in(dir, prefix, suffix);
}

size_t st_leftovers(const char *root, bool temps, bool locks) {
  size_t n = count_in_buckets(root, temps ? ".tmp-" : NULL, locks ? ".lock" : NULL);
  if (temps) n += count_in_aux(root, KC__STORE_TMP_DIR, "", NULL);
  if (locks) n += count_in_aux(root, KC__STORE_LOCKS_DIR, "", NULL);
  return n;
}

size_t st_store_files(const char *root) {
  return count_in_buckets(root, "", NULL) + count_in_aux(root, KC__STORE_TMP_DIR, "", NULL) +
         count_in_aux(root, KC__STORE_LOCKS_DIR, "", NULL);
}

/* ------------------------------------------------------ failing writes */

static _Atomic int st_fail_skip, st_fail_n, st_fail_errno;

static int st_fail_hook(kc__cache_op op) {
  if (op != KC__IO_MKDIR && op != KC__IO_CREATE && op != KC__IO_WRITE) return 0;
  if (atomic_load(&st_fail_n) <= 0) return 0;
  int s = atomic_load(&st_fail_skip);
  while (s > 0)
    if (atomic_compare_exchange_weak(&st_fail_skip, &s, s - 1)) return 0;
  int n = atomic_load(&st_fail_n);
  while (n > 0)
    if (atomic_compare_exchange_weak(&st_fail_n, &n, n - 1)) return atomic_load(&st_fail_errno);
  return 0;
}

void st_fail_writes(int skip, int n, int err) {
  atomic_store(&st_fail_errno, err);
  atomic_store(&st_fail_skip, skip);
  atomic_store(&st_fail_n, n);
  kc__cache_set_fault(n > 0 ? st_fail_hook : NULL);
}
