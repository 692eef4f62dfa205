/* SPDX-License-Identifier: MIT */
/*
 * backend.h -- what a backend sees of kcache: the backend table it fills
 * in, the translation unit it compiles, the parameters and their packed
 * signatures (KC__SIG), the backend's half of a linked object, buffer
 * handles, and the services it may call (allocation and errors through
 * the runtime it was opened with, kc__sb, the bad-dims/bad-args
 * explanations). Backends (src/backends/) include this header and system
 * headers; they register in src/backends/registry.c.
 */
#ifndef KC_BACKEND_H
#define KC_BACKEND_H

#include "kcache.h"
#include "base/base.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kc__spec kc__spec;
typedef struct kc__ci kc__ci;
typedef struct kc__linked kc__linked;

/* ------------------------------------------------------------- services */

/* The runtime's allocator (kc_options.alloc), through base/mem.h. */
void *kc__alloc(kc_runtime *rt, size_t size);  /* NULL on failure */
void *kc__calloc(kc_runtime *rt, size_t size); /* zeroed */
void *kc__realloc(kc_runtime *rt, void *p, size_t size);
void kc__free(kc_runtime *rt, void *p);
char *kc__strdup(kc_runtime *rt, const char *s);
char *kc__strndup(kc_runtime *rt, const char *s, size_t n);
/* rt's heap, or NULL (libc) for no runtime. */
const kc__heap *kc__rt_heap(const kc_runtime *rt);

/* Sets the calling thread's error message for rt and returns st
 * (base/err.h, keyed by the runtime's id). */
kc_status kc__err(const kc_runtime *rt, kc_status st, const char *fmt, ...) KC__PRINTF(3, 4);
kc_status kc__verr(const kc_runtime *rt, kc_status st, const char *fmt, va_list ap);

/* A kernel parameter, parsed from the entry's definition. */
typedef struct kc__param {
  char *type; /* the declaration without its name, e.g. "KC_GLOBAL float *" */
  char *name;
  bool is_buffer; /* a pointer: passed as a kc_buffer */
} kc__param;

/* Size in bytes of a scalar type named by text in the kernel dialect
 * ("float", "unsigned int", "int64_t"...), after substituting the
 * specialization parameters; 0 if unknown. */
uint32_t kc__scalar_size(const char *type, const kc__spec *spec);

/* Packed expected argument: kind in the high half, scalar size in the low
 * half (size UINT32_MAX: neither kcache nor the backend can tell the type's
 * size; a launch then fails with KC_EARGS saying so). */
#define KC__SIG(kind, size) (((uint64_t)(kind) << 32) | (uint32_t)(size))

/* A code instance loaded into one context. */
typedef kc_status (*kc__launch_fn)(kc__linked *l, void **argv, const kc_dim3 *grid,
                                   const kc_dim3 *block);
typedef kc_status (*kc__entry_fn)(kc__linked *l, kc_context *ctx, const kc_dim3 *grid,
                                  const kc_dim3 *block, const kc_arg *args, uint32_t nargs);
/* The backend's half is entry, launch, bctx, fn, module and extra: link
 * fills them, unlink releases them, launches read them. The rest is the
 * core's (link_key, ci, rt, nargs, sig, next_in_bucket): a backend reads
 * nargs and sig at most and never writes them. One struct, not two, so
 * that the fast path reads link_key and entry from one cache line at fixed
 * offsets (the disk store also fills one on its stack to trial-load). */
struct kc__linked {
  /* The link key of the context generation this object belongs to; 0 while
   * free. Stored with release after every other field is set. */
  _Atomic uint64_t link_key;
  /* What kc_launch calls, with its own arguments: a backend's entry that
   * checks the kc_args itself (the host backend compiles one per kernel),
   * or the engine's, which checks and packs them for `launch`. Second: the
   * fast path jumps through it. Set by link (or NULL there: the engine's). */
  kc__entry_fn entry;
  kc__launch_fn launch; /* the backend's launch, with argv packed and checked */
  void *bctx;           /* the backend's context */
  void *fn;             /* backend function handle */
  void *module;         /* backend module handle */
  void *extra;          /* backend-owned */
  kc__ci *ci;
  kc_runtime *rt;
  uint32_t nargs;
  const uint64_t *sig;
  kc__linked *next_in_bucket; /* context's table, or the spec's free list */
};

/* For backends: a launch with a NULL grid or block, or a zero dimension
 * (KC_EINVAL with the message every path gives). Cold. The backends' launch
 * functions check grid and block themselves: kc_launch's fast path passes
 * them through unread. */
kc_status kc__launch_bad_dims(const kc__linked *l, const kc_dim3 *grid, const kc_dim3 *block) KC__COLD;
/* For backends' entries: args do not match the kernel's parameters (or
 * their buffers belong to another context). Explains which. Cold. */
kc_status kc__launch_bad_args(const kc__linked *l, const kc_context *ctx, const kc_arg *args,
                              uint32_t nargs) KC__COLD;

/* The slots of a new handle point here: link key 0 never matches. */
extern kc__linked kc__no_linked;

/* A buffer's backend handle; a launch passes a pointer to it. */
typedef union kc__bufh {
  void *ptr;    /* host memory, cl_mem */
  uint64_t u64; /* CUdeviceptr */
} kc__bufh;

/* Buffers are type-stable like contexts: their structs are recycled within
 * the context struct they were made in (owner's free list), never freed
 * while the runtime lives, so a kc_buffer_* call on a buffer that was
 * destroyed (by kc_buffer_destroy or with its context) reads valid memory
 * and says KC_EDESTROYED. */
struct kc_buffer {
  kc__bufh h; /* first: a kc_buffer * is a pointer to its handle (argv entries) */
  /* Second (the host prelude's struct kc__buf reads it): the live context,
   * NULL once the buffer is destroyed, so an argument check against any
   * context fails. Written under owner->lock. */
  kc_context *ctx;
  kc_context *owner; /* the context struct it lives in; never changes */
  size_t size;
  kc_buffer *prev, *next; /* owner's live list or free list, under owner->lock */
};
_Static_assert(offsetof(struct kc_buffer, h) == 0, "argv takes a kc_buffer * as a pointer to its handle");

/* What a backend loads: the compiled bytes and what they were compiled
 * from. A backend sees a code instance only through this view (link still
 * receives the kc__ci pointer because the disk store trial-loads artifacts
 * through the backend table; kc__ci is an incomplete type here). */
typedef struct kc__artifact {
  const void *bytes;
  size_t size;
  const char *entry; /* the kernel's name */
  const kc__param *params;
  uint32_t nparams;
  const uint64_t *sig; /* nparams KC__SIG */
  const char *source;  /* the translation unit, or NULL */
} kc__artifact;
kc__artifact kc__artifact_of(const kc__ci *ci);
/* The kernel's name of a linked object (for messages). */
const char *kc__linked_name(const kc__linked *l);

/* --------------------------------------------------------- the table */

/* A translation unit ready for the backend. */
typedef struct kc__tu {
  const char *entry;
  const char *text;
  size_t len;
  const kc__param *params;
  uint32_t nparams;
  const kc__spec *spec;
} kc__tu;

typedef struct kc__backend {
  const char *name;
  /* Why the backend cannot run here (static or thread-local string), or NULL. */
  const char *(*unavailable)(void);
  kc_status (*open)(kc_runtime *rt, const kc_options *opt, void **state);
  void (*close)(void *state);
  int (*device_count)(void *state);
  const char *(*device_name)(void *state, int index);
  /* Optional: lists platforms and devices without a runtime (snprintf
   * semantics; returns the full length). NULL: one platform, listed from a
   * temporary runtime's devices. */
  int (*list)(char *buf, size_t size);
  /* Compiler and device identity (part of the disk-cache key); NULL when it
   * cannot be told now (out of memory): then nothing is keyed with it. */
  const char *(*identity)(void *state);
  /* Dialect prelude: pasted before the specialization parameters. */
  const char *prelude;
  /* Optional: code appended after the closure (host: the grid trampoline). */
  kc_status (*epilogue)(void *state, const kc__tu *tu, kc__sb *out);
  /* Compiles tu; on success *artifact is allocated with kc__alloc. Fills
   * sig[i] (KC__SIG) for every parameter. The log gets the compiler's
   * output (also on success). */
  kc_status (*compile)(void *state, const kc__tu *tu, void **artifact, size_t *size,
                       uint64_t *sig, kc__sb *log);
  kc_status (*ctx_create)(void *state, int device, void **bctx);
  void (*ctx_destroy)(void *bctx);
  kc_status (*ctx_reset)(void *bctx);
  kc_status (*ctx_finish)(void *bctx);
  /* Loads ci into the context: fills l->launch, l->fn, l->module, l->extra,
   * and l->entry if the backend has its own (else leaves it NULL). */
  kc_status (*link)(void *bctx, const kc__ci *ci, kc__linked *l);
  void (*unlink)(kc__linked *l);
  kc_status (*buf_create)(void *bctx, size_t size, kc__bufh *h);
  void (*buf_destroy)(void *bctx, kc__bufh *h);
  kc_status (*buf_write)(void *bctx, kc__bufh *h, size_t off, const void *src, size_t n);
  kc_status (*buf_read)(void *bctx, kc__bufh *h, size_t off, void *dst, size_t n);
} kc__backend;

extern const kc__backend kc__backend_host;
extern const kc__backend kc__backend_opencl;
extern const kc__backend kc__backend_cuda;

/* CUDA without a driver (tests on machines without a GPU): compiles a whole
 * translation unit with NVRTC to a cubin for sm_XX, or to PTX. rt supplies
 * the allocator and the error message; free *out with kc__free. */
kc_status kc__cuda_compile_only(kc_runtime *rt, const char *source_tu, size_t len, const char *entry,
                                int sm, bool ptx, void **out, size_t *out_size, kc__sb *log);
/* NULL when NVRTC can be loaded, else why not. */
const char *kc__cuda_nvrtc_unavailable(void);

#endif /* KC_BACKEND_H */
