/* SPDX-License-Identifier: MIT */
/* fault.h -- fault injection, for test builds only (-DKC_FAULT_INJECTION=ON;
 * fault.c). Of the operations of one kind counted after a test arms it, the
 * Nth fails; a test sweeps N = 1, 2, 3... until a run hits no fault.
 *
 *   allocations  through the public allocator hook, as Lua's ltests.c
 *                does: a test creates its runtime with
 *                kc_options.alloc = kc__fault_alloc (alloc_ud: the heap to
 *                forward to, NULL for libc); nothing inside kcache's own
 *                allocation functions
 *   files        the disk cache's open, read, write, fsync, rename (the
 *                store calls kc__fault_hit(KC__FAULT_FILE))
 *   backend      every backend call that can fail, through a counting proxy
 *                table (kc__fault_wrap_backend) that kc_runtime_create puts
 *                in front of the backend it picked in these builds
 */
#ifndef KC_TESTING_FAULT_H
#define KC_TESTING_FAULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum kc__fault_kind {
  KC__FAULT_ALLOC, /* kc__fault_alloc calls that allocate */
  KC__FAULT_FILE, /* the disk cache's open, read, write, fsync, rename */
  KC__FAULT_BACKEND, /* backend calls that can fail: open, compile, link, launch, ... */
  KC__FAULT_KINDS
} kc__fault_kind;

/* Arms kind: counting starts again at 0, and operation n fails (n = 0:
 * none). Sticky: operation n and every one after it fail. */
void kc__fault_set(kc__fault_kind kind, uint64_t n);
void kc__fault_set_sticky(kc__fault_kind kind, uint64_t n);
/* Disarms every kind and zeroes every counter. */
void kc__fault_reset(void);
/* Faults injected since the last reset (all kinds). */
uint64_t kc__fault_hits(void);
/* Operations of kind counted since it was last armed or reset. */
uint64_t kc__fault_ops(kc__fault_kind kind);
const char *kc__fault_name(kc__fault_kind kind);
/* The hooks: counts one operation; true if it must fail. */
bool kc__fault_hit(kc__fault_kind kind);

/* An allocator for kc_options.alloc (a kc_alloc_fn) that counts and fails
 * KC__FAULT_ALLOC; ud: a const kc__heap * to forward to, or NULL (libc). */
void *kc__fault_alloc(void *ud, void *ptr, size_t size);

/* A table that counts the backend calls of `real` and fails the armed one
 * with the status the real backend would give. */
struct kc__backend;
const struct kc__backend *kc__fault_wrap_backend(const struct kc__backend *real);

#endif /* KC_TESTING_FAULT_H */
