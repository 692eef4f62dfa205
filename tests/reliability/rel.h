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

/* The host compiler for these tests: $KC_HOST_CC, else tcc when there is
 * one (fast compiles), else cc. */
const char *rel_cc(void);
/* Whether prog is an executable in $PATH. */
bool rel_in_path(const char *prog);

/* A fresh directory under $TMPDIR; fails the test if it cannot be made. */
void rel_mkdtemp(char *out, size_t len, const char *tag);
/* rm -rf */
void rel_rmrf(const char *path);

/* What is in a store directory (root as given to kc_options.cache_dir). */
typedef struct rel_store_check {
  size_t entries;  /* entry files */
  size_t damaged;  /* entries that do not decode, or hold another key */
  size_t misplaced;
  size_t temps;    /* .tmp-* files: writes that were not finished or cleaned up */
  size_t locks;    /* *.lock files: compiles whose lock was not released */
  char first_problem[512];
} rel_store_check;

/* Reads every entry like `kcache verify` (kc__store_list, kc__entry_read). */
void rel_store_check_dir(const char *root, rel_store_check *out);

/* Launches k on ctx with one int buffer of n items (grid n, block 1), waits
 * and reads the n ints back into out. The first failing status; never
 * calls cmocka. */
kc_status rel_run(kc_kernel *k, kc_context *ctx, kc_buffer *b, uint32_t n, int32_t *out);

/* Seconds on the monotonic clock. */
double rel_now(void);
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
