/* SPDX-License-Identifier: MIT */
/*
 * rel.h -- what the reliability tests share: the host compiler to use,
 * scratch directories, checking a disk cache the way `kcache verify` does,
 * launching one-buffer int kernels without cmocka (worker threads use it),
 * and the summary lines that scripts/reliability.sh collects.
 */
#ifndef KC_REL_H
#define KC_REL_H

#include "kc_test.h"

#include <stdint.h>

/* The old names of kc_test.h's helpers, kept for the reliability tests. */
/* The host compiler for these tests: kct_host_cc ($KC_HOST_CC, else tcc
 * when there is one (fast compiles), else cc). */
static inline const char *rel_cc(void) { return kct_host_cc(); }

/* A fresh directory $TMPDIR/kc-rel-<tag>-XXXXXX (kct_mkdtemp: fails the
 * test if it cannot be made). */
static inline void rel_mkdtemp(char *out, size_t len, const char *tag) {
  char t[256];
  snprintf(t, sizeof t, "rel-%s", tag);
  kct_mkdtemp(out, len, t);
}
/* rm -rf (kct_rmrf) */
static inline void rel_rmrf(const char *path) { kct_rmrf(path); }

/* What is in a store directory (root as given to kc_options.cache_dir). */
typedef struct rel_store_check {
  size_t entries; /* entry files */
  size_t damaged; /* entries that do not decode, or hold another key */
  size_t misplaced;
  size_t temps; /* files in v1/tmp (or .tmp-* in a bucket): writes not finished or cleaned up */
  size_t locks; /* files in v1/locks (or *.lock in a bucket): compiles whose lock was not released */
  char first_problem[512];
} rel_store_check;

/* Reads every entry like `kcache verify` (kc__store_list, kc__entry_read). */
void rel_store_check_dir(const char *root, rel_store_check *out);

/* Launches k on ctx with one int buffer of n items (grid n, block 1), waits
 * and reads the n ints back into out (if out). The first failing status;
 * never calls cmocka (kct_run_bytes). */
static inline kc_status rel_run(kc_kernel *k, kc_context *ctx, kc_buffer *b, uint32_t n, int32_t *out) {
  return kct_run_bytes(k, ctx, b, n, out, n * sizeof *out);
}

/* Seconds on the monotonic clock (kct_now). */
static inline double rel_now(void) { return kct_now(); }
/* An unsigned integer from the environment, or def. */
uint64_t rel_env_u64(const char *name, uint64_t def);

/* A line that scripts/reliability.sh collects into its summary:
 * "RELIABILITY: <what>" on stdout, flushed. */
void rel_summary(const char *fmt, ...) KCT_PRINTF(1, 2);

/* xorshift64*: the tests' random numbers, reproducible from a seed. */
static inline uint64_t rel_rand(uint64_t *s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 0x2545F4914F6CDD1Dull;
}
/* Uniform in [0, n). */
static inline uint32_t rel_below(uint64_t *s, uint32_t n) { return (uint32_t)((rel_rand(s) >> 32) % n); }

#endif
