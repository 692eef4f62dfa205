/* SPDX-License-Identifier: MIT */
/*
 * st.h -- what the disk cache's tests share: a private cache directory per
 * test, runtimes on it, a kernel to run without cmocka (so that forked
 * children and threads can use it), corrupting entry files, and a compiler
 * wrapper that can pause and count compiles.
 */
#ifndef KC_ST_H
#define KC_ST_H

#include "kc_test.h"
#include "cache/cache.h"

#include <sys/types.h>

/* The test kernel: y[i] = 3 i + 1 (+ V when the spec has a parameter V). */
extern const char st_h_src[];
extern const char st_k_src[];
extern const char st_kv_src[]; /* "kv", uses the parameter V */

/* The old names of kc_test.h's helpers, kept for the store and remote tests. */
/* The host compiler for tests: kct_host_cc ($KC_HOST_CC, else tcc, else cc). */
static inline const char *st_cc(void) { return kct_host_cc(); }
/* A fresh directory $TMPDIR/kc-store-<tag>-XXXXXX (kct_mkdtemp: the test
 * fails if it cannot be made). */
static inline void st_mkdtemp(char *out, size_t len, const char *tag) {
  char t[256];
  snprintf(t, sizeof t, "store-%s", tag);
  kct_mkdtemp(out, len, t);
}
/* rm -rf (kct_rmrf) */
static inline void st_rmrf(const char *path) { kct_rmrf(path); }
/* Seconds on the monotonic clock (kct_now). */
static inline double st_now(void) { return kct_now(); }

/* The whole main() of a store suite whose tests each run in a directory
 * of their own, with the disk cache on (KC_CACHE_DISABLE unset):
 * ST_MAIN(ST_DIR_TEST(a), ST_DIR_TEST(b), ...) runs them as one group.
 * ST_DIR_TEST wraps a test in the suite's own `setup` (which makes its
 * fixture with kct_dir_setup) and kct_dir_teardown. */
#define ST_DIR_TEST(name) cmocka_unit_test_setup_teardown(name, setup, kct_dir_teardown)
#define ST_MAIN(...) \
  int main(int argc, char **argv) { \
    const struct CMUnitTest tests[] = {__VA_ARGS__}; \
    int rc = kct_main_init(argc, argv); \
    if (rc >= 0) return rc; \
    unsetenv("KC_CACHE_DISABLE"); \
    return KCT_RUN(tests); \
  }

/* A host runtime on cache_dir (NULL: no disk cache). opt may be NULL; its
 * backend, host_cc (if unset) and cache_dir are set here. NULL on failure
 * (never fails the test: usable in children). */
kc_runtime *st_runtime_nofail(const char *cache_dir, const kc_options *opt);
/* The same, failing the test if it cannot be made. */
kc_runtime *st_runtime(const char *cache_dir, const kc_options *opt);

/* Defines h and k (and kv); returns the status. */
kc_status st_define(kc_runtime *rt);
/* A runtime on cache_dir that defines the suite's kernels, runs k (a
 * compile that the store keeps) and is destroyed: the store then holds k. */
void st_store_k(const char *cache_dir);
/* Launches `name` (with params) over n items on a new context and checks
 * y[i] == 3 i + 1 + add. Returns KC_OK, the failing status, or KC_EBACKEND
 * for a wrong result. No cmocka calls. */
kc_status st_run(kc_runtime *rt, const char *name, const char *params, uint32_t n, float add);
/* st_run that must succeed. */
void st_run_ok(kc_runtime *rt, const char *name, const char *params, float add);

/* Of the next writes to any store (creating a bucket directory, a lock
 * file or a temp file, writing an entry's data), `skip` succeed and then n
 * fail with errno err, as a full or read-only disk would. (0, 0, 0) turns
 * it off. Through the cache's one fault hook (cache/io.h). */
void st_fail_writes(int skip, int n, int err);

/* The store's entry files under root (vdir derived), or the only one. */
size_t st_entries(const char *root, uint64_t *total_bytes);
/* The path of the only entry under root (fails the test otherwise). */
void st_only_entry(const char *root, char *path, size_t len);

/* The whole file (malloc), *size bytes and a NUL after them. */
void *st_read_file(const char *path, size_t *size);
void st_write_file(const char *path, const void *data, size_t size);

/* Captures stderr into a file until st_capture_end, which returns what was
 * written (malloc'd). */
void st_capture_begin(void);
char *st_capture_end(void);
size_t st_count(const char *haystack, const char *needle);

/* Writes dir/cc-wrapper, a compiler that runs kct_host_cc() and, per environment:
 * KC_TEST_COUNT=file appends a line per compile; KC_TEST_MARK=file creates
 * the file when a compile starts; KC_TEST_SLEEP=secs pauses before it.
 * (--version runs straight through: the identity does not change.) */
void st_wrapper(const char *dir, char *path, size_t len);

/* Whether root holds a sound entry for kernel `entry` with `params`. */
bool st_has(const char *root, const char *entry, const char *params);
/* The path of the entry of `entry` with `params` (fails the test if none). */
void st_entry_of(const char *root, const char *entry, const char *params, char *path, size_t len);
/* Temp files (temps) and lock files (locks) under root's store: every file
 * in v1/tmp and v1/locks, and .tmp-* and *.lock files in the bucket
 * directories (where an earlier kcache put them). */
size_t st_leftovers(const char *root, bool temps, bool locks);
/* Every file in root's store's bucket directories, v1/tmp and v1/locks. */
size_t st_store_files(const char *root);

/* Lines in a file (0 if it does not exist). */
size_t st_lines(const char *path);

#endif
