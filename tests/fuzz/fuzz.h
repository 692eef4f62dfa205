/* SPDX-License-Identifier: MIT */
/*
 * fuzz.h -- what the fuzz targets share. Each fuzz_<target>.c defines
 * LLVMFuzzerTestOneInput: libFuzzer calls it in the fuzz build (clang,
 * -DKC_FUZZ=ON), and replay.c calls it for every file of the corpus and of
 * the regression inputs in the normal build, so CTest runs the same checks
 * on every CI run without libFuzzer.
 *
 * A check that fails prints what it expected and aborts: libFuzzer saves
 * the input as a crash, CTest reports the replay as failed. (Not assert():
 * release builds define NDEBUG.)
 */
#ifndef KC_FUZZ_H
#define KC_FUZZ_H

#include "kc_internal.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

void kcf_check_failed(const char *file, int line, const char *cond, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 4, 5)));

#define KCF_CHECK(cond, ...) \
  do { \
    if (!(cond)) kcf_check_failed(__FILE__, __LINE__, #cond, __VA_ARGS__); \
  } while (0)

/* A runtime with nothing but an allocator: enough for the parsers, which use
 * rt only for memory and error messages. Its allocator counts blocks, so a
 * target can check that a parser frees everything it allocated, and can
 * fail the Nth allocation from now on (0: none), so a target can check that
 * running out of memory comes back as KC_ENOMEM without a leak. */
kc_runtime *kcf_runtime(void);
void kcf_alloc_reset(long fail_nth);
long kcf_alloc_count(void); /* allocations and reallocs since the reset */
long kcf_alloc_live(void); /* blocks allocated and not yet freed */

/* A NUL-terminated copy of data, cut at its first NUL (malloc; never NULL). */
char *kcf_cstr(const uint8_t *data, size_t size);
/* A copy of exactly size bytes (malloc, at least 1 byte): reads past the
 * end show under ASan. */
void *kcf_dup(const void *data, size_t size);
/* A 64-bit hash of the input, to derive choices (which permutation, which
 * allocation fails) that stay the same when the input is replayed. */
uint64_t kcf_seed(const uint8_t *data, size_t size);

#endif /* KC_FUZZ_H */
