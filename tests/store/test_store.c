/* SPDX-License-Identifier: MIT */
/*
 * test_store -- the disk cache on the host backend: a second runtime loads
 * instead of compiling; memory comes first; every kind of damage is a miss
 * that is removed, recompiled and written again; an artifact the backend
 * refuses is repaired the same way; the size bound with LRU eviction; the
 * switches and directories of the environment; a directory that cannot be
 * written (not a directory, injected failures, a read-only mount, a full
 * tmpfs) leaves the program working with one warning; gc's sweep of stale
 * lock and temp files; two runtimes in one process compile a kernel once;
 * a FIFO, socket, directory or link planted where kcache opens a file
 * never blocks a launch nor changes its result.
 */
#include "st.h"
#include "kct_conf.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

typedef struct fx {
  char root[KCT_DIR_LEN]; /* first: kct_dir_setup makes it */
} fx;

static int setup(void **state) { return kct_dir_setup(state, sizeof(fx), "store-t"); }

static int teardown(void **state) {
  st_fail_writes(0, 0, 0);
  return kct_dir_teardown(state);
}

static void sub(const fx *f, const char *name, char *out, size_t len) {
  snprintf(out, len, "%s/%s", f->root, name);
}

/* ------------------------------------------------------------ basics */

static void test_second_runtime_loads_instead_of_compiling(void **state) {
  fx *f = *state;
  kc_runtime *rt = st_runtime(f->root, NULL);
  assert_string_equal(kc_cache_dir(rt), f->root);
  assert_true(kc_cache_writable(rt));
  KCT_OK(rt, st_define(rt));
  st_run_ok(rt, "k", NULL, 0);
  kc_stats s = kct_stats(rt);
  assert_int_equal(s.compiles, 1);
  assert_int_equal(s.disk_misses, 1);
  assert_int_equal(s.disk_writes, 1);
  assert_int_equal(s.disk_read_only, 0);
  assert_int_equal(s.disk_hits, 0);
  kc_kernel *k = kct_kernel(rt, "k", NULL);
  kc_code_info a = kct_code(rt, k);
  void *art = malloc(a.artifact_size);
  memcpy(art, a.artifact, a.artifact_size);
  kc_kernel_destroy(k);
  kc_runtime_destroy(rt);
  assert_int_equal(st_entries(f->root, NULL), 1);
  assert_int_equal(st_leftovers(f->root, true, true), 0); /* nothing left behind */

  /* another "process": other worlds, definitions in another order */
  rt = st_runtime(f->root, NULL);
  kct_define(rt, "unrelated", "KC_DEVICE int unrelated(int x) { return x; }");
  kct_define(rt, "k", st_k_src);
  kct_define(rt, "h", st_h_src);
  st_run_ok(rt, "k", NULL, 0);
  s = kct_stats(rt);
  assert_int_equal(s.compiles, 0);
  assert_int_equal(s.disk_hits, 1);
  assert_int_equal(s.disk_misses, 0);
  assert_int_equal(s.disk_writes, 0);
  k = kct_kernel(rt, "k", NULL);
  kc_code_info b = kct_code(rt, k);
  assert_int_equal(b.artifact_size, a.artifact_size);
  assert_memory_equal(b.artifact, art, a.artifact_size);
  free(art);
  /* memory first: the disk is not asked again */
  st_run_ok(rt, "k", NULL, 0);
  kct_define(rt, "unrelated2", "KC_DEVICE int unrelated2(int x) { return x; }");
  st_run_ok(rt, "k", NULL, 0);
  s = kct_stats(rt);
  assert_int_equal(s.disk_hits + s.disk_misses, 1);
  kc_kernel_destroy(k);
  kc_runtime_destroy(rt);
}

static void test_every_version_of_a_kernel_is_kept(void **state) {
  fx *f = *state;
  const char *h2 = "KC_DEVICE float h(float x) { return 3.0f * x + 2.0f; }";
  kc_runtime *rt = st_runtime(f->root, NULL);
  KCT_OK(rt, st_define(rt));
  st_run_ok(rt, "k", NULL, 0);
  kct_define(rt, "h", h2);
  st_run_ok(rt, "k", NULL, 1);
  st_run_ok(rt, "kv", "V=1", 2);
  st_run_ok(rt, "kv", "V=2", 3);
  kc_stats s = kct_stats(rt);
  assert_int_equal(s.compiles, 4);
  assert_int_equal(s.disk_writes, 4);
  kc_runtime_destroy(rt);
  assert_int_equal(st_entries(f->root, NULL), 4);

  rt = st_runtime(f->root, NULL);
  KCT_OK(rt, st_define(rt));
  st_run_ok(rt, "k", NULL, 0);
  kct_define(rt, "h", h2);
  st_run_ok(rt, "k", NULL, 1);
  st_run_ok(rt, "kv", "V=1", 2);
  st_run_ok(rt, "kv", "V=2", 3);
  s = kct_stats(rt);
  assert_int_equal(s.compiles, 0);
  assert_int_equal(s.disk_hits, 4);
  kc_runtime_destroy(rt);

  /* other compile options make other code: a miss */
  kc_options o;
  kc_options_init(&o);
  o.compile_options = "-DKC_TEST_UNUSED=1";
  rt = st_runtime(f->root, &o);
  KCT_OK(rt, st_define(rt));
  st_run_ok(rt, "k", NULL, 0);
  s = kct_stats(rt);
  assert_int_equal(s.compiles, 1);
  assert_int_equal(s.disk_hits, 0);
  kc_runtime_destroy(rt);
  assert_int_equal(st_entries(f->root, NULL), 5);
}

/* A failed compile is not stored, and the next process fails the same way. */
static void test_compile_errors_are_not_stored(void **state) {
  fx *f = *state;
  kc_runtime *rt = st_runtime(f->root, NULL);
  kct_define(rt, "bad", "KC_KERNEL void bad(KC_GLOBAL float *y) { y[0] = ; }");
  kc_kernel *k = kct_kernel(rt, "bad", NULL);
  KCT_STATUS(rt, KC_ECOMPILE, kc_kernel_compile(k));
  assert_int_equal(kct_stats(rt).disk_writes, 0);
  kc_kernel_destroy(k);
  kc_runtime_destroy(rt);
  assert_int_equal(st_entries(f->root, NULL), 0);
  assert_int_equal(st_leftovers(f->root, true, true), 0);
}

/* ------------------------------------------------------------ damage */

enum { CUT, FLIP, GARBAGE, VERSION, WRONG_KEY, APPEND };

static const struct {
  const char *what;
  int kind;
  long at; /* -1: the last byte, -2: the middle */
} damages[] = {
    {"zero-length file", CUT, 0},
    {"truncated inside the header (1 byte)", CUT, 1},
    {"truncated inside the header (63 bytes)", CUT, 63},
    {"truncated after the header", CUT, 64},
    {"truncated inside the first section header", CUT, 72},
    {"truncated in the middle of the payload", CUT, -2},
    {"truncated by its last byte", CUT, -1},
    {"flipped byte in the magic", FLIP, 0},
    {"flipped byte in the format version", FLIP, 8},
    {"flipped byte in the header size", FLIP, 12},
    {"flipped byte in the key", FLIP, 20},
    {"flipped byte in the payload length", FLIP, 33},
    {"flipped byte in the payload checksum", FLIP, 41},
    {"flipped byte in the reserved field", FLIP, 50},
    {"flipped byte in the header checksum", FLIP, 60},
    {"flipped first payload byte", FLIP, 64},
    {"flipped byte in the middle of the payload", FLIP, -2},
    {"flipped last byte (the artifact)", FLIP, -1},
    {"garbage of the same size", GARBAGE, 0},
    {"short garbage", GARBAGE, 100},
    {"another format version (valid checksums)", VERSION, 0},
    {"another kernel's entry under this key's name", WRONG_KEY, 0},
    {"bytes appended", APPEND, 0},
};

static void damage(const char *path, const char *other, int kind, long at) {
  size_t n;
  uint8_t *b = st_read_file(path, &n);
  size_t pos = at == -1 ? n - 1 : at == -2 ? n / 2 : (size_t)at;
  switch (kind) {
  case CUT: st_write_file(path, b, pos); break;
  case FLIP:
    b[pos] ^= 0x5a;
    st_write_file(path, b, n);
    break;
  case GARBAGE:
    srand(11);
    if (at) n = (size_t)at;
    for (size_t i = 0; i < n; i++) b[i] = (uint8_t)rand();
    st_write_file(path, b, n);
    break;
  case VERSION: {
    b[8] = KC__STORE_FORMAT + 1;
    uint64_t h = XXH3_64bits(b, 56);
    for (int i = 0; i < 8; i++) b[56 + i] = (uint8_t)(h >> (8 * i));
    st_write_file(path, b, n);
    break;
  }
  case WRONG_KEY: {
    size_t on;
    void *o = st_read_file(other, &on);
    st_write_file(path, o, on);
    free(o);
    break;
  }
  case APPEND: {
    uint8_t *c = realloc(b, n + 7);
    assert_non_null(c);
    b = c;
    memcpy(b + n, "trailer", 7);
    st_write_file(path, b, n + 7);
    break;
  }
  }
  free(b);
}

static void test_damaged_entries_are_repaired(void **state) {
  fx *f = *state;
  for (size_t i = 0; i < sizeof damages / sizeof *damages; i++) {
    char dir[600], path[4096], other[4096];
    snprintf(dir, sizeof dir, "%s/case%zu", f->root, i);
    kc_runtime *rt = st_runtime(dir, NULL);
    KCT_OK(rt, st_define(rt));
    st_run_ok(rt, "k", NULL, 0);
    st_run_ok(rt, "kv", "V=7", 7);
    kc_runtime_destroy(rt);
    st_entry_of(dir, "k", NULL, path, sizeof path);
    st_entry_of(dir, "kv", "V=7", other, sizeof other);
    damage(path, other, damages[i].kind, damages[i].at);

    rt = st_runtime(dir, NULL);
    KCT_OK(rt, st_define(rt));
    kc_status st = st_run(rt, "k", NULL, 16, 0);
    kc_stats s = kct_stats(rt);
    if (st || s.compiles != 1 || s.disk_repairs != 1 || s.disk_writes != 1 || s.disk_hits != 0)
      fail_msg("%s: run %s, compiles %llu, repairs %llu, writes %llu, hits %llu (want OK, 1, 1, 1, 0)",
               damages[i].what, kc_status_name(st), (unsigned long long)s.compiles,
               (unsigned long long)s.disk_repairs, (unsigned long long)s.disk_writes,
               (unsigned long long)s.disk_hits);
    kc_runtime_destroy(rt);

    /* written again: the next process loads it */
    rt = st_runtime(dir, NULL);
    KCT_OK(rt, st_define(rt));
    st_run_ok(rt, "k", NULL, 0);
    s = kct_stats(rt);
    if (s.compiles != 0 || s.disk_hits != 1 || s.disk_repairs != 0)
      fail_msg("%s: after the repair: compiles %llu, hits %llu, repairs %llu", damages[i].what,
               (unsigned long long)s.compiles, (unsigned long long)s.disk_hits,
               (unsigned long long)s.disk_repairs);
    kc_runtime_destroy(rt);
    assert_int_equal(st_entries(dir, NULL), 2);
    print_message("repaired: %s\n", damages[i].what);
  }
}

/* Rewrites the entry of k with a change that keeps its checksums valid. */
static void rewrite_entry(const char *path, void (*change)(kc__entry *e)) {
  size_t n;
  void *b = st_read_file(path, &n);
  kc__entry e;
  char why[128];
  if (kc__entry_decode(NULL, b, n, &e, why, sizeof why)) fail_msg("decode %s: %s", path, why);
  change(&e);
  void *img;
  size_t size;
  assert_int_equal(kc__entry_encode(NULL, &e, &img, &size), KC_OK);
  st_write_file(path, img, size);
  free(img);
  kc__entry_free(NULL, &e);
}

static void garbage_artifact(kc__entry *e) {
  static char junk[4096];
  memset(junk, 'x', sizeof junk);
  e->artifact = junk;
  e->artifact_size = sizeof junk;
}
static void no_signature(kc__entry *e) { e->nsig = 0; }
static void other_entry_name(kc__entry *e) { e->entry = "someone_else"; }

static void test_unloadable_or_inconsistent_entries_are_repaired(void **state) {
  fx *f = *state;
  static const struct {
    const char *what;
    void (*change)(kc__entry *);
  } cases[] = {{"an artifact the backend cannot load", garbage_artifact},
               {"a signature of the wrong length", no_signature},
               {"another kernel's name", other_entry_name}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char dir[600], path[4096];
    snprintf(dir, sizeof dir, "%s/case%zu", f->root, i);
    st_store_k(dir); /* a store with the entry of k */
    st_only_entry(dir, path, sizeof path);
    rewrite_entry(path, cases[i].change);

    kc_runtime *rt = st_runtime(dir, NULL);
    KCT_OK(rt, st_define(rt));
    st_run_ok(rt, "k", NULL, 0);
    kc_stats s = kct_stats(rt);
    if (s.compiles != 1 || s.disk_repairs != 1 || s.disk_writes != 1)
      fail_msg("%s: compiles %llu, repairs %llu, writes %llu", cases[i].what, (unsigned long long)s.compiles,
               (unsigned long long)s.disk_repairs, (unsigned long long)s.disk_writes);
    kc_runtime_destroy(rt);
    rt = st_runtime(dir, NULL);
    KCT_OK(rt, st_define(rt));
    st_run_ok(rt, "k", NULL, 0);
    assert_int_equal(kct_stats(rt).disk_hits, 1);
    kc_runtime_destroy(rt);
    print_message("repaired: %s\n", cases[i].what);
  }
}

/* ------------------------------------------------------------ size bound */

static uint64_t entry_size(const fx *f) {
  char dir[600];
  sub(f, "probe", dir, sizeof dir);
  kc_runtime *rt = st_runtime(dir, NULL);
  KCT_OK(rt, st_define(rt));
  st_run_ok(rt, "kv", "V=0", 0);
  kc_runtime_destroy(rt);
  uint64_t total;
  assert_int_equal(st_entries(dir, &total), 1);
  return total;
}

static void pause_ms(int ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Runs kv with V=v (which adds v). */
static void run_kv(kc_runtime *rt, int v) {
  char p[16];
  snprintf(p, sizeof p, "V=%d", v);
  st_run_ok(rt, "kv", p, (float)v);
}

/* A runtime on a new store f/name (its path in dir) bounded to three and a
 * half entries by its options o, its kernels defined. */
static kc_runtime *bounded_runtime(const fx *f, const char *name, char dir[600], kc_options *o) {
  uint64_t one = entry_size(f);
  sub(f, name, dir, 600);
  kc_options_init(o);
  o->cache_max_size = one * 3 + one / 2;
  kc_runtime *rt = st_runtime(dir, o);
  KCT_OK(rt, st_define(rt));
  return rt;
}

static void test_eviction_keeps_the_bound(void **state) {
  fx *f = *state;
  char dir[600];
  kc_options o;
  kc_runtime *rt = bounded_runtime(f, "bounded", dir, &o);
  for (int v = 0; v < 10; v++) {
    run_kv(rt, v);
    uint64_t total;
    size_t n = st_entries(dir, &total);
    if (total > o.cache_max_size)
      fail_msg("after %d writes the store holds %llu bytes in %zu entries, over its bound of %llu", v + 1,
               (unsigned long long)total, n, (unsigned long long)o.cache_max_size);
    pause_ms(15);
  }
  kc_stats s = kct_stats(rt);
  assert_true(s.disk_evictions >= 6);
  assert_true(st_has(dir, "kv", "V=9"));
  assert_false(st_has(dir, "kv", "V=0"));
  kc_runtime_destroy(rt);
  /* the shared counters agree with the directory */
  char vdir[700];
  kc__store_vdir(dir, vdir, sizeof vdir);
  kc__store_counters c;
  kc__store_counters_read(vdir, &c);
  uint64_t total;
  size_t n = st_entries(dir, &total);
  assert_true(c.valid && c.sized);
  assert_int_equal(c.bytes, total);
  assert_int_equal(c.entries, n);
}

static void test_eviction_is_least_recently_used(void **state) {
  fx *f = *state;
  char dir[600];
  kc_options o;
  kc_runtime *rt = bounded_runtime(f, "lru", dir, &o);
  for (int v = 0; v < 3; v++) {
    run_kv(rt, v);
    pause_ms(30);
  }
  kc_runtime_destroy(rt);
  /* a later process uses V=0 (a disk hit marks it used), then adds V=3 */
  rt = st_runtime(dir, &o);
  KCT_OK(rt, st_define(rt));
  st_run_ok(rt, "kv", "V=0", 0);
  assert_int_equal(kct_stats(rt).disk_hits, 1);
  pause_ms(30);
  st_run_ok(rt, "kv", "V=3", 3);
  kc_stats s = kct_stats(rt);
  assert_int_equal(s.disk_evictions, 1);
  kc_runtime_destroy(rt);
  assert_true(st_has(dir, "kv", "V=0"));
  assert_false(st_has(dir, "kv", "V=1")); /* the least recently used */
  assert_true(st_has(dir, "kv", "V=2"));
  assert_true(st_has(dir, "kv", "V=3"));
}

/* ------------------------------------------------------------ environment */

typedef struct saved_env {
  const char *name;
  char *value;
} saved_env;

static saved_env envs[] = {{"KC_CACHE_DIR", NULL},
                           {"XDG_CACHE_HOME", NULL},
                           {"HOME", NULL},
                           {"KC_CACHE_DISABLE", NULL},
                           {"KC_CACHE_MAXSIZE", NULL}};

static void env_save(void) {
  for (size_t i = 0; i < sizeof envs / sizeof *envs; i++) {
    const char *v = getenv(envs[i].name);
    envs[i].value = v ? strdup(v) : NULL;
  }
}

static void env_restore(void) {
  for (size_t i = 0; i < sizeof envs / sizeof *envs; i++) {
    if (envs[i].value) setenv(envs[i].name, envs[i].value, 1);
    else unsetenv(envs[i].name);
    free(envs[i].value);
    envs[i].value = NULL;
  }
}

/* A runtime with no cache_dir: the environment decides. */
static kc_runtime *env_runtime(void) {
  kc_options o;
  kc_options_init(&o);
  o.backend = KC_BACKEND_HOST;
  o.host_cc = st_cc();
  kc_runtime *rt = NULL;
  KCT_OK(NULL, kc_runtime_create(&o, &rt));
  return rt;
}

static void expect_dir(const char *want) {
  kc_runtime *rt = env_runtime();
  const char *got = kc_cache_dir(rt);
  if (!want ? got != NULL : !got || strcmp(got, want))
    fail_msg("cache directory %s, expected %s", got ? got : "(none)", want ? want : "(none)");
  kc_runtime_destroy(rt);
}

static void test_environment_chooses_the_directory(void **state) {
  fx *f = *state;
  char a[600], b[600], want[700];
  env_save();
  unsetenv("KC_CACHE_DISABLE");
  sub(f, "env", a, sizeof a);
  setenv("KC_CACHE_DIR", a, 1);
  expect_dir(a);
  /* cache_dir in the options wins over the environment */
  sub(f, "opt", b, sizeof b);
  kc_runtime *rt = st_runtime(b, NULL);
  assert_string_equal(kc_cache_dir(rt), b);
  kc_runtime_destroy(rt);
  unsetenv("KC_CACHE_DIR");
  sub(f, "xdg", a, sizeof a);
  setenv("XDG_CACHE_HOME", a, 1);
  snprintf(want, sizeof want, "%s/kcache", a);
  expect_dir(want);
  setenv("XDG_CACHE_HOME", "relative/ignored", 1);
  sub(f, "home", a, sizeof a);
  setenv("HOME", a, 1);
  snprintf(want, sizeof want, "%s/.cache/kcache", a);
  expect_dir(want);
  struct stat st;
  snprintf(want, sizeof want, "%s/.cache/kcache/v%u", a, KC__STORE_FORMAT);
  assert_int_equal(stat(want, &st), 0); /* made on open */
  /* off */
  setenv("KC_CACHE_DISABLE", "1", 1);
  expect_dir(NULL);
  rt = st_runtime(b, NULL); /* even when the options name a directory */
  assert_null(kc_cache_dir(rt));
  KCT_OK(rt, st_define(rt));
  st_run_ok(rt, "k", NULL, 0);
  assert_int_equal(kct_stats(rt).disk_writes, 0);
  kc_runtime_destroy(rt);
  setenv("KC_CACHE_DISABLE", "0", 1); /* "0" means on */
  snprintf(want, sizeof want, "%s/.cache/kcache", a);
  expect_dir(want);
  env_restore();
}

static void test_disabled_by_option(void **state) {
  fx *f = *state;
  kc_options o;
  kc_options_init(&o);
  o.cache_disable = 1;
  kc_runtime *rt = st_runtime(f->root, &o);
  assert_null(kc_cache_dir(rt));
  KCT_OK(rt, st_define(rt));
  st_run_ok(rt, "k", NULL, 0);
  kc_stats s = kct_stats(rt);
  assert_int_equal(s.compiles, 1);
  assert_int_equal(s.disk_misses + s.disk_hits + s.disk_writes, 0);
  kc_runtime_destroy(rt);
  assert_int_equal(st_entries(f->root, NULL), 0);
}

static void test_bad_size_in_the_environment_warns(void **state) {
  fx *f = *state;
  env_save();
  setenv("KC_CACHE_MAXSIZE", "lots", 1);
  st_capture_begin();
  kc_runtime *rt = st_runtime(f->root, NULL);
  char *err = st_capture_end();
  KCT_CONTAINS(err, "KC_CACHE_MAXSIZE");
  free(err);
  assert_non_null(kc_cache_dir(rt));
  kc_runtime_destroy(rt);
  env_restore();
}

/* The store's own kcache.conf (kcache -M): max_size bounds every runtime
 * on it that has no bound of its own; $KC_CACHE_MAXSIZE wins over it; the
 * file's other lines are kept; it is trusted as the store's entries are (a
 * group-writable one only in a shared store, of the store's group). */
static void test_the_stores_conf_file_bounds_it(void **state) {
  fx *f = *state;
  uint64_t one = entry_size(f);
  char dir[600], size[32], got[64], path[700];
  sub(f, "conf", dir, sizeof dir);
  assert_true(kc__store_make_dirs(dir, 0700, &(int){0}));
  snprintf(path, sizeof path, "%s/" KC__STORE_CONF, dir);
  kc__store_trust t; /* the private store's rules, as a runtime on it has them */
  char tw[1024];
  assert_true(kc__store_trust_load(&t, dir, kct_conf(NULL), NULL, tw, sizeof tw));
  st_write_file(path, "# mine\nother = kept\n", strlen("# mine\nother = kept\n"));
  assert_int_equal(chmod(path, 0600), 0);
  snprintf(size, sizeof size, "%llu", (unsigned long long)(one * 3 + one / 2));
  assert_int_equal(kc__store_conf_set(dir, &t, "max_size", size), 0);
  assert_int_equal(kc__store_conf_get(dir, &t, "other", got, sizeof got), 0);
  assert_string_equal(got, "kept");
  assert_int_equal(kc__store_conf_get(dir, &t, "max_size", got, sizeof got), 0);
  assert_string_equal(got, size);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_mode & 07777, 0600); /* the store's file mode */
  env_save();
  for (int pass = 0; pass < 2; pass++) { /* 0: the file bounds it; 1: the environment wins */
    if (pass) setenv("KC_CACHE_MAXSIZE", "1G", 1);
    else unsetenv("KC_CACHE_MAXSIZE");
    uint64_t bound;
    kc__max_from from;
    assert_true(kc__store_max_size(kct_conf(NULL), dir, &t, &bound, &from, NULL, 0));
    assert_int_equal(from, pass ? KC__MAX_ENV : KC__MAX_FILE);
    kc_runtime *rt = st_runtime(dir, NULL);
    KCT_OK(rt, st_define(rt));
    for (int v = 0; v < 6; v++) {
      run_kv(rt, v + 10 * pass);
      pause_ms(15);
    }
    kc_stats s = kct_stats(rt);
    uint64_t total;
    st_entries(dir, &total);
    if (!pass) assert_true(s.disk_evictions >= 2 && total <= bound);
    else assert_int_equal(s.disk_evictions, 0);
    kc_runtime_destroy(rt);
  }
  /* a file its group or others may write: not used (the default bound, and
   * why), not changed */
  unsetenv("KC_CACHE_MAXSIZE");
  uint64_t bound;
  kc__max_from from;
  const mode_t loose[] = {0666, 0664, 0620};
  for (size_t i = 0; i < sizeof loose / sizeof *loose; i++) {
    assert_int_equal(chmod(path, loose[i]), 0);
    char why[900];
    assert_false(kc__store_max_size(kct_conf(NULL), dir, &t, &bound, &from, why, sizeof why));
    KCT_CONTAINS(why, "kcache.conf is not trusted");
    assert_int_equal(from, KC__MAX_FILE);
    assert_int_equal(bound, 1ull << 30);
    assert_int_equal(kc__store_conf_set(dir, &t, "max_size", "2G"), EPERM);
  }
  /* in a shared store, a group-writable one of the store's group is the
   * group's: read (the group is trusted there); one of another group not */
  kc__store_trust ts;
  assert_true(kc__store_trust_init(&ts, true, NULL, tw, sizeof tw));
  char vdir[700];
  kc__store_vdir(dir, vdir, sizeof vdir);
  (void)kc__store_trust_root(&ts, dir, vdir, tw, sizeof tw); /* (sets the store's group: the root's) */
  assert_int_equal(chmod(path, 0664), 0);
  assert_int_equal(kc__store_conf_get(dir, &ts, "max_size", got, sizeof got), 0);
  assert_string_equal(got, size);
  ts.group = st.st_gid + 1;
  assert_int_equal(kc__store_conf_get(dir, &ts, "max_size", got, sizeof got), EPERM);
  kc__store_trust_wipe(&ts);
  /* a value that is not a size: the default, and why */
  assert_int_equal(chmod(path, 0600), 0);
  assert_int_equal(kc__store_conf_set(dir, &t, "max_size", "lots"), 0);
  char why[900];
  assert_false(kc__store_max_size(kct_conf(NULL), dir, &t, &bound, &from, why, sizeof why));
  KCT_CONTAINS(why, "max_size = \"lots\"");
  assert_int_equal(from, KC__MAX_FILE);
  assert_int_equal(bound, 1ull << 30);
  /* and the library says so, and keeps the default */
  st_capture_begin();
  kc_runtime *rt = st_runtime(dir, NULL);
  char *err = st_capture_end();
  KCT_CONTAINS(err, "/" KC__STORE_CONF " is not a size (e.g. 500M, 2G); using 1G");
  free(err);
  kc_runtime_destroy(rt);
  kc__store_trust_wipe(&t);
  env_restore();
}

/* ----------------------------------------------- directories that fail */

static void test_a_file_in_place_of_the_directory(void **state) {
  fx *f = *state;
  char file[600], below[700];
  sub(f, "file", file, sizeof file);
  st_write_file(file, "x", 1);
  snprintf(below, sizeof below, "%s/cache", file);
  const char *dirs[] = {file, below};
  for (int i = 0; i < 2; i++) {
    st_capture_begin();
    kc_runtime *rt = st_runtime(dirs[i], NULL);
    KCT_OK(rt, st_define(rt));
    st_run_ok(rt, "k", NULL, 0);
    st_run_ok(rt, "kv", "V=1", 1);
    kc_stats s = kct_stats(rt);
    assert_null(kc_cache_dir(rt));
    assert_int_equal(s.compiles, 2);
    kc_runtime_destroy(rt);
    char *err = st_capture_end();
    assert_int_equal(st_count(err, "kcache: warning:"), 1);
    KCT_CONTAINS(err, "memory only");
    free(err);
  }
}

static void test_failed_writes_degrade_with_one_warning(void **state) {
  fx *f = *state;
  /* an entry that will stay readable */
  st_store_k(f->root); /* a store with the entry of k */

  st_fail_writes(0, 1000, ENOSPC);
  st_capture_begin();
  kc_runtime *rt = st_runtime(f->root, NULL);
  KCT_OK(rt, st_define(rt));
  st_run_ok(rt, "k", NULL, 0); /* reads still work */
  st_run_ok(rt, "kv", "V=1", 1); /* a miss: cannot write */
  st_run_ok(rt, "kv", "V=2", 2); /* and no second warning */
  kc_stats s = kct_stats(rt);
  assert_int_equal(s.disk_hits, 1);
  assert_int_equal(s.compiles, 2);
  assert_int_equal(s.disk_writes, 0);
  assert_int_equal(s.disk_write_failures, 1);
  assert_false(kc_cache_writable(rt));
  assert_int_equal(s.disk_read_only, 1); /* kc_stats says so too */
  assert_non_null(kc_cache_dir(rt));
  kc_runtime_destroy(rt);
  char *err = st_capture_end();
  st_fail_writes(0, 0, 0);
  assert_int_equal(st_count(err, "kcache: warning:"), 1);
  KCT_CONTAINS(err, strerror(ENOSPC));
  KCT_CONTAINS(err, f->root);
  free(err);
  assert_int_equal(st_entries(f->root, NULL), 1);
}

/* A runtime that stopped writing (one write failed: a full disk) still
 * removes a damaged entry it reads: unlink needs no room. Left in place, it
 * was found damaged and compiled again by every lookup of every process, and
 * the store counted a repair each time (a soak: 13,275 repairs of 76 damaged
 * entries). The store counts the entry once, as the one that removed it. */
static void test_a_runtime_that_stopped_writing_still_removes_damage(void **state) {
  fx *f = *state;
  st_store_k(f->root); /* a store with the entry of k */
  char path[4096], vdir[700];
  st_entry_of(f->root, "k", NULL, path, sizeof path);
  damage(path, NULL, FLIP, -2);
  for (int i = 0; i < 2; i++) { /* two processes' worth */
    st_fail_writes(0, 1, ENOSPC);
    st_capture_begin();
    kc_runtime *rt = st_runtime(f->root, NULL);
    KCT_OK(rt, st_define(rt));
    st_run_ok(rt, "kv", "V=1", 1); /* a miss whose write fails: no more writes */
    st_fail_writes(0, 0, 0);
    assert_false(kc_cache_writable(rt));
    st_run_ok(rt, "k", NULL, 0);
    kc_stats s = kct_stats(rt);
    kc_runtime_destroy(rt);
    free(st_capture_end());
    if (s.compiles != 2 || s.disk_repairs != (i == 0) || s.disk_hits != 0)
      fail_msg("runtime %d: compiles %llu, repairs %llu, hits %llu (want 2, %d, 0)", i,
               (unsigned long long)s.compiles, (unsigned long long)s.disk_repairs,
               (unsigned long long)s.disk_hits, i == 0);
  }
  struct stat sb;
  if (stat(path, &sb) == 0) fail_msg("the damaged entry %s is still there", path);
  kc__store_vdir(f->root, vdir, sizeof vdir);
  kc__store_counters c;
  kc__store_counters_read(vdir, &c);
  assert_int_equal(c.repairs, 1);
}

/* The failure at each write of a miss in a new store: the lock file (not
 * there: its directory is missing), v1/locks, the lock file again, the
 * bucket, the temp file (v1/tmp missing), v1/tmp, the temp file again, the
 * data. Nothing is left behind, the kernel runs. */
static void test_a_failure_at_each_write_leaves_nothing_behind(void **state) {
  fx *f = *state;
  for (int skip = 0; skip < 8; skip++) {
    char dir[600];
    snprintf(dir, sizeof dir, "%s/skip%d", f->root, skip);
    st_fail_writes(skip, 1, EIO);
    st_capture_begin();
    kc_runtime *rt = st_runtime(dir, NULL);
    KCT_OK(rt, st_define(rt));
    st_run_ok(rt, "k", NULL, 0);
    kc_stats s = kct_stats(rt);
    kc_runtime_destroy(rt);
    char *err = st_capture_end();
    st_fail_writes(0, 0, 0);
    if (s.disk_write_failures != 1 || s.disk_writes != 0 || st_count(err, "kcache: warning:") != 1)
      fail_msg("failing write %d: failures %llu, writes %llu, warnings %zu", skip + 1,
               (unsigned long long)s.disk_write_failures, (unsigned long long)s.disk_writes,
               st_count(err, "kcache: warning:"));
    free(err);
    assert_int_equal(st_entries(dir, NULL), 0);
    assert_int_equal(st_leftovers(dir, true, true), 0);
    /* the next process writes it */
    rt = st_runtime(dir, NULL);
    KCT_OK(rt, st_define(rt));
    st_run_ok(rt, "k", NULL, 0);
    assert_int_equal(kct_stats(rt).disk_writes, 1);
    kc_runtime_destroy(rt);
  }
}

/* Runs fn in a child process in its own mount namespace; 77 from the child
 * skips the test with the message it wrote. */
static void in_child_within(const fx *f, int (*fn)(const fx *f, char *msg, size_t len), double timeout_s,
                            const char *what) {
  kct_child c;
  if (kct_fork(&c, false)) {
    char msg[1024] = "";
    int rc = fn(f, msg, sizeof msg);
    kct_child_send(&c, msg, strlen(msg));
    _exit(rc);
  }
  char msg[1024];
  msg[kct_child_wait(&c, msg, sizeof msg - 1, timeout_s)] = 0;
  if (c.timed_out) fail_msg("%s: hung (killed after %.0f s)", what, timeout_s);
  int status = c.status;
  assert_int_not_equal(status, -1); /* waitpid found the child */
  assert_true(WIFEXITED(status));
  if (WEXITSTATUS(status) == 77) {
    print_message("SKIPPED: %s\n", msg);
    skip();
  }
  if (WEXITSTATUS(status) != 0) fail_msg("%s: %s", what, msg);
  if (msg[0]) print_message("%s\n", msg);
}

static void in_child(const fx *f, int (*fn)(const fx *f, char *msg, size_t len)) {
  in_child_within(f, fn, 0, "child");
}

static bool private_mounts(char *msg, size_t len) {
  if (unshare(CLONE_NEWNS) != 0) {
    snprintf(msg, len, "unshare(CLONE_NEWNS): %s", strerror(errno));
    return false;
  }
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
    snprintf(msg, len, "making mounts private: %s", strerror(errno));
    return false;
  }
  return true;
}

/* In the child: a run that must hit the stored k and miss kv twice. */
static int degraded_run(const char *root, const char *expect, char *msg, size_t len) {
  char errf[700];
  snprintf(errf, sizeof errf, "%s.stderr", root);
  int fd = open(errf, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) { /* root itself is read-only: next to it may be too */
    snprintf(errf, sizeof errf, "/tmp/kc-store-degraded-%d.stderr", (int)getpid());
    fd = open(errf, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  }
  int saved = dup(2);
  dup2(fd, 2);
  close(fd);
  kc_runtime *rt = st_runtime_nofail(root, NULL);
  kc_status st = rt ? st_define(rt) : KC_EBACKEND;
  if (!st) st = st_run(rt, "k", NULL, 16, 0);
  if (!st) st = st_run(rt, "kv", "V=1", 16, 1);
  if (!st) st = st_run(rt, "kv", "V=2", 16, 2);
  kc_stats s;
  kc_stats_get(rt, &s);
  int writable = kc_cache_writable(rt);
  kc_runtime_destroy(rt);
  fflush(stderr);
  dup2(saved, 2);
  size_t n = 0;
  FILE *ef = fopen(errf, "r");
  char err[4096] = "";
  if (ef) {
    n = fread(err, 1, sizeof err - 1, ef);
    err[n] = 0;
    fclose(ef);
  }
  unlink(errf);
  size_t warnings = st_count(err, "kcache: warning:");
  snprintf(msg, len,
           "%s: run %s, compiles %llu, disk hits %llu, write failures %llu, writable %d, %zu warning(s): %s",
           expect, kc_status_name(st), (unsigned long long)s.compiles, (unsigned long long)s.disk_hits,
           (unsigned long long)s.disk_write_failures, writable, warnings, err);
  return st == KC_OK && s.compiles == 2 && s.disk_hits == 1 && s.disk_write_failures == 1 && !writable &&
                 warnings == 1
             ? 0
             : 1;
}

/* In the child: f->root made read-only (a read-only bind mount in a mount
 * namespace of its own, else chmod when not root). Returns how, or NULL
 * (msg says why: skipped). */
static const char *make_read_only(const fx *f, char *msg, size_t len) {
  char why[256] = "";
  const char *how;
  if (private_mounts(why, sizeof why) && mount(f->root, f->root, NULL, MS_BIND, NULL) == 0 &&
      mount(NULL, f->root, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL) == 0) {
    how = "read-only bind mount";
  } else if (geteuid() != 0) {
    /* not root: permissions are enough */
    char vdir[700];
    kc__store_vdir(f->root, vdir, sizeof vdir);
    for (int b = 0; b < 256; b++) {
      char d[800];
      snprintf(d, sizeof d, "%s/%02x", vdir, b);
      chmod(d, 0555);
    }
    chmod(vdir, 0555);
    how = "chmod 0555";
  } else {
    snprintf(msg, len,
             "read-only directory: running as root (chmod does not stop root) and no mount namespace "
             "to make a read-only bind mount (%s)",
             why);
    return NULL;
  }
  return how;
}

static int readonly_child(const fx *f, char *msg, size_t len) {
  const char *how = make_read_only(f, msg, len);
  if (!how) return 77;
  char probe[700];
  snprintf(probe, sizeof probe, "%s/probe", f->root);
  if (open(probe, O_WRONLY | O_CREAT, 0644) >= 0) {
    snprintf(msg, len, "%s did not make %s read-only", how, f->root);
    return 1;
  }
  return degraded_run(f->root, how, msg, len);
}

/* In the child: a damaged entry in a read-only store is refused and the
 * kernel compiled, the store left exactly as it was (the removal fails
 * quietly), every time it is read. */
static char damaged_path[4096]; /* the entry test_read_only_store_with_damage damaged */

static int readonly_damage_child(const fx *f, char *msg, size_t len) {
  const char *how = make_read_only(f, msg, len);
  if (!how) return 77;
  const char *path = damaged_path;
  struct stat before, after;
  if (stat(path, &before)) {
    snprintf(msg, len, "no entry at %s", path);
    return 1;
  }
  size_t files = st_store_files(f->root);
  for (int i = 0; i < 2; i++) {
    kc_runtime *rt = st_runtime_nofail(f->root, NULL);
    kc_status st = rt ? st_define(rt) : KC_EBACKEND;
    if (!st) st = st_run(rt, "k", NULL, 16, 0);
    kc_stats s;
    kc_stats_get(rt, &s);
    kc_runtime_destroy(rt);
    if (st || s.compiles != 1 || s.disk_hits != 0 || s.disk_repairs < 1) { /* found at each look */
      snprintf(msg, len, "%s, run %d: %s, compiles %llu, hits %llu, repairs %llu (want OK, 1, 0, >= 1)", how,
               i, kc_status_name(st), (unsigned long long)s.compiles, (unsigned long long)s.disk_hits,
               (unsigned long long)s.disk_repairs);
      return 1;
    }
  }
  if (stat(path, &after) || after.st_size != before.st_size || after.st_ino != before.st_ino ||
      st_store_files(f->root) != files) {
    snprintf(msg, len, "%s: the read-only store changed", how);
    return 1;
  }
  snprintf(msg, len, "%s: the damaged entry refused twice, compiled, the store unchanged", how);
  return 0;
}

static void test_read_only_store_with_damage(void **state) {
  fx *f = *state;
  st_store_k(f->root); /* a store with the entry of k */
  st_entry_of(f->root, "k", NULL, damaged_path, sizeof damaged_path);
  damage(damaged_path, NULL, FLIP, -2);
  in_child(f, readonly_damage_child);
  struct stat sb;
  assert_int_equal(stat(damaged_path, &sb), 0); /* still there, still damaged */
}

static void test_read_only_directory(void **state) {
  fx *f = *state;
  st_store_k(f->root); /* a store with the entry of k */
  in_child(f, readonly_child);
  assert_int_equal(st_entries(f->root, NULL), 1);
}

static int full_disk_child(const fx *f, char *msg, size_t len) {
  char why[256] = "", mnt[700];
  snprintf(mnt, sizeof mnt, "%s/small", f->root);
  mkdir(mnt, 0755);
  if (!private_mounts(why, sizeof why) || mount("kc-store-test", mnt, "tmpfs", 0, "size=256k") != 0) {
    snprintf(msg, len, "full disk: cannot mount a small tmpfs (%s%s); injected write failures cover it", why,
             *why ? "" : strerror(errno));
    return 77;
  }
  /* the store's directories first (they take no blocks on tmpfs), and
   * the entry that must stay readable */
  kc_runtime *rt = st_runtime_nofail(mnt, NULL);
  if (!rt || st_define(rt) || st_run(rt, "k", NULL, 16, 0)) {
    snprintf(msg, len, "populating the tmpfs failed");
    return 1;
  }
  kc_runtime_destroy(rt);
  char vdir[800], filler[900];
  kc__store_vdir(mnt, vdir, sizeof vdir);
  for (int b = 0; b < 256; b++) {
    char d[900];
    snprintf(d, sizeof d, "%s/%02x", vdir, b);
    mkdir(d, 0755);
  }
  snprintf(filler, sizeof filler, "%s/filler", mnt);
  int fd = open(filler, O_WRONLY | O_CREAT, 0644);
  static char block[4096];
  while (write(fd, block, sizeof block) > 0) {}
  while (write(fd, block, 1) > 0) {}
  close(fd);
  int rc = degraded_run(mnt, "tmpfs of 256 KiB, full", msg, len);
  if (rc == 0 && st_leftovers(mnt, true, false) != 0) {
    snprintf(msg, len, "a temp file was left on the full disk");
    rc = 1;
  }
  return rc;
}

static void test_full_disk(void **state) { in_child(*state, full_disk_child); }

/* ------------------------------------------------------------ the sweep */

/* Makes path (an empty file) with its mtime age_s seconds ago. */
static void aged_file(const char *path, time_t age_s) {
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) fail_msg("cannot create %s: %s", path, strerror(errno));
  struct timespec t[2] = {{time(NULL) - age_s, 0}, {time(NULL) - age_s, 0}};
  assert_int_equal(futimens(fd, t), 0);
  close(fd);
}

/* kcache gc's sweep: in v1/locks and v1/tmp, a lock file untouched for
 * over 10 minutes that nobody holds and a temp file older than an hour go;
 * younger ones, and an old lock that a process holds, stay. The same files
 * in a bucket directory, where an earlier kcache made them, go too. */
static void test_the_sweep_removes_stale_locks_and_temps(void **state) {
  fx *f = *state;
  kc_runtime *rt = st_runtime(f->root, NULL);
  KCT_OK(rt, st_define(rt));
  st_run_ok(rt, "k", NULL, 0); /* a miss and a write: v1/locks and v1/tmp are made */
  kc_runtime_destroy(rt);
  assert_int_equal(st_leftovers(f->root, true, true), 0);
  char vdir[700], entry[1024], p[7][1024];
  kc__store_vdir(f->root, vdir, sizeof vdir);
  st_entry_of(f->root, "k", NULL, entry, sizeof entry);
  const char *hex = "0123456789abcdef0123456789abcdef";
  snprintf(p[0], sizeof p[0], "%s/locks/%s.lock", vdir, hex); /* stale: goes */
  snprintf(p[1], sizeof p[1], "%s/tmp/%s-1-1-0", vdir, hex); /* stale: goes */
  snprintf(p[2], sizeof p[2], "%.*s/.tmp-%s-1-1-0", (int)(strrchr(entry, '/') - entry), entry, hex);
  snprintf(p[3], sizeof p[3], "%.*s/%s.lock", (int)(strrchr(entry, '/') - entry), entry, hex);
  snprintf(p[4], sizeof p[4], "%s/locks/%.31s1.lock", vdir, hex); /* young: stays */
  snprintf(p[5], sizeof p[5], "%s/tmp/%s-1-1-1", vdir, hex); /* young: stays */
  snprintf(p[6], sizeof p[6], "%s/locks/%.31s2.lock", vdir, hex); /* old but held: stays */
  const time_t age[7] = {1200, 7200, 7200, 1200, 60, 600, 1200};
  for (int i = 0; i < 7; i++) aged_file(p[i], age[i]);
  int held = open(p[6], O_RDWR | O_CLOEXEC);
  assert_true(held >= 0 && flock(held, LOCK_EX) == 0);
  kc__gc_result r;
  assert_int_equal(kc__store_gc(NULL, vdir, UINT64_MAX, true, NULL, NULL, &r), KC_OK);
  close(held);
  assert_int_equal(r.temps_removed, 2);
  assert_int_equal(r.locks_removed, 2);
  for (int i = 0; i < 7; i++)
    if ((access(p[i], F_OK) == 0) != (i >= 4)) fail_msg("%s was %s", p[i], i >= 4 ? "removed" : "kept");
  assert_int_equal(r.entries_after, 1);
  assert_int_equal(access(entry, F_OK), 0);
}

/* --------------------------------------------- one process, two runtimes */

typedef struct worker {
  kc_runtime *rt;
  pthread_barrier_t *go;
  kc_context *ctx;
  kc_buffer *buf;
  kc_kernel *k;
  kc_status st;
} worker;

/* Contexts outlive the threads: a dlclose in one thread followed by a
 * dlopen in another that reuses the address is a race to ThreadSanitizer
 * (ld.so unmaps behind its back), though not to the loader. */
static void *work(void *p) {
  worker *w = p;
  pthread_barrier_wait(w->go);
  float out[16];
  w->st = kct_run(w->k, w->ctx, w->buf, 16, out);
  for (int i = 0; !w->st && i < 16; i++)
    if (out[i] != 3.0f * (float)i + 1.0f) w->st = KC_EBACKEND;
  return NULL;
}

static void test_two_runtimes_in_one_process_compile_once(void **state) {
  fx *f = *state;
  char wrapper[700], count[700];
  st_wrapper(f->root, wrapper, sizeof wrapper);
  snprintf(count, sizeof count, "%s/compiles", f->root);
  setenv("KC_TEST_COUNT", count, 1);
  setenv("KC_TEST_SLEEP", "0.3", 1);
  char dir[600];
  sub(f, "shared", dir, sizeof dir);
  kc_options o;
  kc_options_init(&o);
  o.host_cc = wrapper;
  kc_runtime *rts[2] = {st_runtime(dir, &o), st_runtime(dir, &o)};
  for (int i = 0; i < 2; i++) KCT_OK(rts[i], st_define(rts[i]));
  enum { N = 8 };
  pthread_barrier_t go;
  pthread_barrier_init(&go, NULL, N);
  worker w[N];
  pthread_t t[N];
  for (int i = 0; i < N; i++) {
    kc_runtime *rt = rts[i % 2];
    w[i] = (worker){rt, &go, kct_context(rt), NULL, kct_kernel(rt, "k", NULL), KC_OK};
    w[i].buf = kct_buffer(rt, w[i].ctx, 16);
  }
  for (int i = 0; i < N; i++) pthread_create(&t[i], NULL, work, &w[i]);
  for (int i = 0; i < N; i++) pthread_join(t[i], NULL);
  pthread_barrier_destroy(&go);
  unsetenv("KC_TEST_SLEEP");
  unsetenv("KC_TEST_COUNT");
  for (int i = 0; i < N; i++)
    if (w[i].st) fail_msg("thread %d: %s: %s", i, kc_status_name(w[i].st), kc_errmsg(w[i].rt));
  kc_stats a = kct_stats(rts[0]), b = kct_stats(rts[1]);
  assert_int_equal(a.compiles + b.compiles, 1);
  assert_int_equal(a.disk_hits + b.disk_hits, 1);
  assert_int_equal(st_lines(count), 1);
  for (int i = 0; i < N; i++) kc_kernel_destroy(w[i].k);
  kc_runtime_destroy(rts[0]);
  kc_runtime_destroy(rts[1]);
  assert_int_equal(st_leftovers(dir, true, true), 0);
}

/* ------------------------------------------------- planted by a neighbour */

/* What a neighbour sharing the store can plant where kcache opens a file:
 * a FIFO (an open for reading used to wait for a writer forever), a socket,
 * a directory, a link to a sound entry elsewhere. Each planted at the entry,
 * the bucket's index, the index summary, the counters and the key's lock
 * file: a new process's launch finishes (in a child with a time bound: a
 * hang fails the test, not the run) with the right result. */
typedef enum plant { PLANT_FIFO, PLANT_SOCKET, PLANT_DIR, PLANT_LINK } plant;
static const char *const plant_name[] = {"a FIFO", "a socket", "a directory", "a symbolic link"};

static void plant_at(const char *path, plant how, const char *link_to) {
  unlink(path);
  rmdir(path);
  int rc = 0;
  if (how == PLANT_FIFO) rc = mkfifo(path, 0666);
  else if (how == PLANT_DIR) rc = mkdir(path, 0777);
  else if (how == PLANT_LINK) rc = symlink(link_to, path);
  else {
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof a.sun_path) skip(); /* the test directory is too deep for a socket name */
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    rc = fd < 0 ? -1 : bind(fd, (struct sockaddr *)&a, sizeof a);
    if (fd >= 0) close(fd);
  }
  if (rc != 0) fail_msg("planting %s at %s: %s", plant_name[how], path, strerror(errno));
}

static int planted_child(const fx *f, char *msg, size_t len) {
  (void)f;
  const char *dir = getenv("KC_TEST_PLANTED_DIR");
  kc_runtime *rt = st_runtime_nofail(dir, NULL);
  if (!rt) return snprintf(msg, len, "runtime: %s", kc_errmsg(NULL)), 1;
  kc_status st = st_define(rt);
  if (!st) st = st_run(rt, "k", NULL, 16, 0);
  if (st) snprintf(msg, len, "%s: %s", kc_status_name(st), kc_errmsg(rt));
  kc_runtime_destroy(rt);
  return st ? 1 : 0;
}

static void test_planted_files_never_block(void **state) {
  fx *f = *state;
  static const char *const where[] = {"the entry", "the bucket's index", "the index summary", "the counters",
                                      "the key's lock file"};
  for (int w = 0; w < 5; w++)
    for (int how = PLANT_FIFO; how <= PLANT_LINK; how++) {
      char dir[600], vdir[1024], path[1200], entry[1024], spare[1100];
      snprintf(dir, sizeof dir, "%s/plant%d-%d", f->root, w, how);
      st_store_k(dir);
      st_entry_of(dir, "k", NULL, entry, sizeof entry);
      kc__store_vdir(dir, vdir, sizeof vdir);
      const char *base = strrchr(entry, '/') + 1;
      if (w == 0) snprintf(path, sizeof path, "%s", entry);
      else if (w == 1) snprintf(path, sizeof path, "%s/index/%.2s", vdir, base);
      else if (w == 2) snprintf(path, sizeof path, "%s/index/summary", vdir);
      else if (w == 3) snprintf(path, sizeof path, "%s/stats", vdir);
      else snprintf(path, sizeof path, "%s/locks/%s.lock", vdir, base);
      snprintf(spare, sizeof spare, "%s.spare", entry); /* a sound entry the link points at */
      if (how == PLANT_LINK && w == 0 && rename(entry, spare) != 0) fail_msg("rename: %s", strerror(errno));
      plant_at(path, (plant)how, how == PLANT_LINK ? (w == 0 ? spare : entry) : NULL);
      setenv("KC_TEST_PLANTED_DIR", dir, 1);
      char what[128];
      snprintf(what, sizeof what, "%s at %s", plant_name[how], where[w]);
      in_child_within(f, planted_child, 30, what); /* a hang fails the test, not the run */
      print_message("%s: the launch finished, right\n", what);
    }
  unsetenv("KC_TEST_PLANTED_DIR");
}

/* What a neighbour planted at one entry's path fails that entry only (said
 * once), never every later write of the process: a directory with a file
 * in it at k's entry, a link in place of kv's bucket (never written
 * through: its target stays empty). An empty directory there is removed
 * and the entry written. */
static void test_planted_paths_fail_one_entry_only(void **state) {
  fx *f = *state;
  char dir[600], entry[1024], vdir[1024], inside[1100], elsewhere[700], bucket[1100];
  sub(f, "planted-w", dir, sizeof dir);
  st_store_k(dir);
  st_entry_of(dir, "k", NULL, entry, sizeof entry);
  kc__store_vdir(dir, vdir, sizeof vdir);
  /* kv(V=5)'s bucket, from an entry written elsewhere first */
  char probe[700], pentry[1024];
  sub(f, "planted-probe", probe, sizeof probe);
  kc_runtime *rt = st_runtime(probe, NULL);
  KCT_OK(rt, st_define(rt));
  st_run_ok(rt, "kv", "V=5", 5);
  kc_runtime_destroy(rt);
  st_entry_of(probe, "kv", "V=5", pentry, sizeof pentry);
  const char *b = strrchr(pentry, '/') + 1;
  snprintf(bucket, sizeof bucket, "%s/%.2s", vdir, b);
  bool same_bucket = !strncmp(strrchr(entry, '/') + 1, b, 2);

  assert_int_equal(unlink(entry), 0);
  assert_int_equal(mkdir(entry, 0700), 0);
  snprintf(inside, sizeof inside, "%s/theirs", entry);
  st_write_file(inside, "x", 1);
  sub(f, "planted-elsewhere", elsewhere, sizeof elsewhere);
  assert_int_equal(mkdir(elsewhere, 0700), 0);
  if (!same_bucket) {
    rmdir(bucket); /* (none yet, or empty) */
    assert_int_equal(symlink(elsewhere, bucket), 0);
  }
  st_capture_begin();
  rt = st_runtime(dir, NULL);
  KCT_OK(rt, st_define(rt));
  st_run_ok(rt, "k", NULL, 0); /* its entry's path is taken */
  st_run_ok(rt, "kv", "V=5", 5); /* its bucket is a link */
  st_run_ok(rt, "kv", "V=7", 7); /* written */
  kc_stats s = kct_stats(rt);
  kc_runtime_destroy(rt);
  char *err = st_capture_end();
  if (!st_has(dir, "kv", "V=7")) fail_msg("an entry after a planted path was not written:\n%s", err);
  assert_int_equal(st_count(err, "kcache: warning:"), 1);
  KCT_CONTAINS(err, "kcache did not put that there");
  free(err);
  assert_int_equal(s.disk_write_failures, same_bucket ? 1 : 2);
  assert_int_equal(s.disk_read_only, 0); /* one entry each, not the store */
  struct stat st;
  assert_int_equal(stat(inside, &st), 0); /* theirs, untouched */
  DIR *d = opendir(elsewhere);
  assert_non_null(d);
  int names = 0;
  for (struct dirent *e; (e = readdir(d));) names += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
  closedir(d);
  assert_int_equal(names, 0); /* nothing written through the link */
  /* an empty directory at the entry's path: removed, the entry written */
  unlink(inside);
  rt = st_runtime(dir, NULL);
  KCT_OK(rt, st_define(rt));
  st_run_ok(rt, "k", NULL, 0);
  kc_runtime_destroy(rt);
  assert_int_equal(lstat(entry, &st), 0);
  assert_true(S_ISREG(st.st_mode));
  assert_true(st_has(dir, "k", NULL));
}

int main(int argc, char **argv) {
  int rc = kct_main_init(argc, argv);
  if (rc >= 0) return rc;
  unsetenv("KC_CACHE_DISABLE"); /* the tests name their directories */
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_second_runtime_loads_instead_of_compiling),
      T(test_every_version_of_a_kernel_is_kept),
      T(test_compile_errors_are_not_stored),
      T(test_damaged_entries_are_repaired),
      T(test_unloadable_or_inconsistent_entries_are_repaired),
      T(test_eviction_keeps_the_bound),
      T(test_eviction_is_least_recently_used),
      T(test_environment_chooses_the_directory),
      T(test_disabled_by_option),
      T(test_bad_size_in_the_environment_warns),
      T(test_the_stores_conf_file_bounds_it),
      T(test_a_file_in_place_of_the_directory),
      T(test_failed_writes_degrade_with_one_warning),
      T(test_a_runtime_that_stopped_writing_still_removes_damage),
      T(test_a_failure_at_each_write_leaves_nothing_behind),
      T(test_read_only_directory),
      T(test_read_only_store_with_damage),
      T(test_full_disk),
      T(test_the_sweep_removes_stale_locks_and_temps),
      T(test_two_runtimes_in_one_process_compile_once),
      T(test_planted_files_never_block),
      T(test_planted_paths_fail_one_entry_only),
  };
#undef T
  return KCT_RUN(tests);
}
