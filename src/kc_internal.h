/*
 * kc_internal.h -- what the subsystems of kcache share: the data model of
 * the world-age cache, the backend table, and small utilities.
 *
 * Lock hierarchy (a lock may be taken while holding the ones above it, never
 * the other way round):
 *
 *   1. kc__spec.lock        single flight: held while one specialization
 *                           resolves, compiles and publishes a code instance
 *                           (the disk store's per-key file lock nests here).
 *   2. kc_runtime.ctx_lock  the list of contexts (live and reusable); held
 *                           by create, by destroy while it tears a context
 *                           down, and by kc_collect while it walks them.
 *   3. kc_context.lock      a context's table of linked objects, its buffers
 *                           and its backend session; held while linking.
 *   4. kc_runtime.world_lock  the function table (bindings, definitions,
 *                           backedges), the world counter's writers and the
 *                           multiset of pinned worlds (and so fast_world).
 *                           Held only for table work: never while compiling.
 *   5. kc_runtime.spec_lock   the table of interned specializations.
 *      kc__spec.free_lock     a spec's free list of linked objects.
 *      kc_runtime.kernels_lock  the list of live kernel handles (stats).
 *      kc__store.probe_lock, kc__remote.pool_lock, kc__remote.queue_lock
 *                           (store.h, remote.h: taken under kc__spec.lock)
 *                           (leaves: nothing is taken while holding them)
 *
 * Readers of the world counter, of code-instance lists and of world ranges
 * never lock: they use the acquire/release wrappers below.
 */
#ifndef KC_INTERNAL_H
#define KC_INTERNAL_H

#include "kcache.h"
#include "base/base.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <pthread.h>
#include <sched.h>

typedef struct kc__spec kc__spec;
typedef struct kc__ci kc__ci;
typedef struct kc__linked kc__linked;
typedef struct kc__binding kc__binding;

/* ------------------------------------------------------------- utilities */

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

/* ---------------------------------------------------------------- scanner */

/* One identifier found in source text. */
typedef struct kc__ident {
  const char *start;
  uint32_t len;
  bool call; /* followed by '(' : in call position */
} kc__ident;

typedef bool (*kc__ident_fn)(void *ud, const kc__ident *id);

/* Calls fn for every identifier of C-family source outside comments,
 * string and character literals and preprocessor lines; stops early if fn
 * returns false. Never reads past text+len. */
void kc__scan_idents(const char *text, size_t len, kc__ident_fn fn, void *ud);

bool kc__is_keyword(const char *s, size_t n);
bool kc__is_identifier(const char *s);

/* A kernel parameter, parsed from the entry's definition. */
typedef struct kc__param {
  char *type; /* the declaration without its name, e.g. "KC_GLOBAL float *" */
  char *name;
  bool is_buffer; /* a pointer: passed as a kc_buffer */
} kc__param;

/* Parses the parameter list of function `name` in `source`. */
kc_status kc__parse_params(kc_runtime *rt, const char *name, const char *source, kc__param **out,
                           uint32_t *count);
void kc__free_params(kc_runtime *rt, kc__param *p, uint32_t count);

/* Size in bytes of a scalar type named by text in the kernel dialect
 * ("float", "unsigned int", "int64_t"...), after substituting the
 * specialization parameters; 0 if unknown. */
uint32_t kc__scalar_size(const char *type, const kc__spec *spec);

/* Canonical form of "K=V,K2=V2": sorted by key, trimmed. */
kc_status kc__canon_params(kc_runtime *rt, const char *params, char **canon);

/* ------------------------------------------------------------- data model */

/* One version of a named function's source, visible in [min_world, max_world]. */
typedef struct kc__def {
  struct kc__def *older; /* guarded by world_lock */
  kc__binding *binding;
  char *source;
  size_t len;
  uint64_t hash;
  kc_world min_world;
  _Atomic kc_world max_world;
} kc__def;

/* A name in the function table, defined or not. */
struct kc__binding {
  char *name;
  uint64_t hash;
  kc__binding *next_in_bucket;
  kc__def *defs; /* newest first */
  /* code instances that looked this name up and may still be valid forever */
  kc__ci **backedges;
  size_t nbackedges, capbackedges;
};

/* A lookup made while compiling: name -> definition found (or NULL). */
typedef struct kc__edge {
  kc__binding *binding;
  kc__def *def;
} kc__edge;

/* Packed expected argument: kind in the high half, scalar size in the low
 * half (size UINT32_MAX: neither kcache nor the backend can tell the type's
 * size; a launch then fails with KC_EARGS saying so). */
#define KC__SIG(kind, size) (((uint64_t)(kind) << 32) | (uint32_t)(size))

/* The compiled artifact of one specialization, valid in [min_world, max_world]. */
struct kc__ci {
  _Atomic kc_world min_world;
  _Atomic kc_world max_world;
  uint64_t id; /* never reused */
  kc__ci *next; /* older code instance of the same spec; immutable once published */
  kc__spec *spec;
  kc_world compiled_at;
  void *artifact;
  size_t artifact_size;
  char *source; /* the translation unit */
  kc__param *params;
  uint32_t nparams;
  uint64_t *sig; /* nparams expected arguments (KC__SIG), filled at compile */
  kc__edge *edges;
  uint32_t nedges;
  uint64_t compile_ns;
  /* A compile that failed for good (syntax error): remembered for the same
   * worlds so a launch loop does not recompile; artifact is NULL. */
  kc_status status;
  char *error;
  bool dead; /* set by kc_collect just before it frees the code instance */
};

struct kc__spec {
  char *name;
  char *params; /* canonical */
  uint64_t hash;
  kc__spec *next_in_bucket;
  kc__mutex lock;               /* single flight */
  _Atomic(kc__ci *) head; /* newest first */
  kc__mutex free_lock;          /* leaf: guards free_linked */
  kc__linked *free_linked;  /* unlinked objects of this spec, for reuse */
};

/* A code instance loaded into one context. */
typedef kc_status (*kc__launch_fn)(kc__linked *l, void **argv, const kc_dim3 *grid,
                                   const kc_dim3 *block);
typedef kc_status (*kc__entry_fn)(kc__linked *l, kc_context *ctx, const kc_dim3 *grid,
                                  const kc_dim3 *block, const kc_arg *args, uint32_t nargs);
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

struct kc_context {
  /* Changes at create, reset and destroy; never repeats (global counter). A
   * handle's cache entry is valid only for the key it was made with. */
  _Atomic uint64_t link_key;
  /* Byte offset of this key's slot in a kc_kernel (KC__SLOT_OFF), stored
   * with every new key. A launch that reads a new key with an old offset
   * only misses: an entry with a given key is only ever stored in its slot. */
  _Atomic size_t slot_off;
  kc_runtime *rt;
  _Atomic uint64_t id;
  _Atomic int alive;
  int device;
  void *bctx;
  kc__mutex lock;
  kc__linked **linked; /* hash table keyed by ci->id */
  size_t nlinked, caplinked;
  kc__linked *retired; /* dropped by reset, freed at destroy */
  kc_buffer *buffers;      /* live */
  kc_buffer *free_buffers; /* destroyed, for reuse (singly linked by next) */
  kc_context *next; /* runtime's list of all contexts (live or free) */
};

/* A kernel handle. Its launch cache is one pointer per slot (slot chosen
 * by the context's link key): the linked object used last in that context.
 * The fast path trusts it only if the object was linked in the current
 * generation of the context (link_key) and its code instance's world range
 * covers the caller's world. So an unrelated redefinition costs nothing at
 * all, and a pinned thread and an unpinned one share the entry as long as
 * the same code serves both. Linked objects are type-stable per
 * specialization (recycled, never freed while the runtime lives), so a stale
 * pointer in a slot is always safe to read and never matches wrongly. */
#define KC__HSLOTS 4
#define KC__SLOT_OFF(key) ((size_t)((key) & (KC__HSLOTS - 1)) * sizeof(kc__linked *))

/* Padding that keeps a counter written by every launch off the cache lines
 * of what launches read, so that threads launching the same handle do not
 * take the line from each other (the structs are not line-aligned: 64 bytes
 * on each side). */
#define KC__COUNTER_GAP char kc__gap[64]

struct kc_kernel {
  _Atomic(kc__linked *) slots[KC__HSLOTS]; /* first: indexed without an offset */
  kc_runtime *rt;
  kc__spec *spec;
  kc_kernel *prev, *next; /* runtime's list, guarded by kernels_lock */
  kc_args *bound;         /* its bound arguments, guarded by kernels_lock */
  KC__COUNTER_GAP;
  _Atomic uint64_t fast_hits;
};

/* Bound arguments (kc_args_create). */
struct kc_args {
  /* What the launch fast path reads, first. l: the linked object a launch
   * used last (kc__no_linked at first); it serves the next launch if it is
   * still linked in this generation of the context, its code is valid in
   * the caller's world, and that code is one whose parameters were checked
   * against `want`: ci_id is such a code instance's id (ids are never
   * reused). Written by any launching thread, one word at a time: a reader
   * that sees l of one write and ci_id of another finds them disagree and
   * takes the slow path. */
  _Atomic(kc__linked *) l;
  kc_context *ctx;
  kc_runtime *rt;
  _Atomic uint64_t ci_id;
  kc_kernel *k;
  uint64_t ctx_id; /* the context bound: its struct may be reused by another */
  uint32_t n;
  uint64_t *want;  /* n: the KC__SIG each argument was checked against */
  kc_arg *args;    /* n: scalars point into values */
  unsigned char *values;
  kc_args *prev, *next; /* k->bound, guarded by rt->kernels_lock */
  KC__COUNTER_GAP;
  _Atomic uint64_t hits; /* fast-path launches (statistics, like kc_kernel's) */
  char kc__gap_after[64];
  void *argv[]; /* n: what a backend's launch takes */
};

/* ------------------------------------------------------------ backends */

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

/* ---------------------------------------------------------------- runtime */

/* rt->fast_world while a thread holds a pin: makes every fast-path world
 * check fail, so launches take the path that reads the thread's pin. */
#define KC__WORLD_PINNED UINT64_MAX

struct kc_runtime {
  /* What the launch fast path reads: the latest world while no thread holds
   * a pin, KC__WORLD_PINNED while one does. Written under world_lock (by a
   * definition after it publishes `world`, and by the first pin and the
   * last unpin), so a pinned thread never takes the unpinned fast path.
   * First: read on every launch. */
  _Atomic kc_world fast_world;
  _Atomic kc_world world; /* latest world; written under world_lock */
  uint64_t id;            /* never reused; tags thread-local pins */
  const kc__backend *be;
  void *bstate;
  kc__heap heap; /* kc_options.alloc and alloc_ud */
  kc_options opt;
  char *compile_options;
  char *host_cc;
  char *cache_dir;
  char *device_name;

  kc__mutex world_lock;
  kc__binding **bindings;
  size_t nbindings, capbindings;

  kc__mutex spec_lock;
  kc__spec **specs;
  size_t nspecs, capspecs;

  kc__mutex ctx_lock;
  kc_context *contexts;

  kc__mutex kernels_lock;
  kc_kernel *kernels;
  uint64_t dead_kernel_hits;

  _Atomic uint64_t n_compiles, n_compile_failures, n_links, n_slow, n_invalidations, n_defines,
      n_cis, compile_ns, n_defs, n_collected;

  /* Worlds pinned by threads (a multiset), for kc_collect; under world_lock
   * (npins decides fast_world). */
  struct kc__pinned {
    kc_world world;
    uint32_t count;
  } *pins;
  size_t npins, cappins;
  struct kc__store *store; /* the disk cache (store.c); NULL when there is none */
};

/* Function table (table.c). */
typedef struct kc__closure {
  kc__def **defs; /* dependency order: callees first, the entry last */
  uint32_t ndefs;
  kc__edge *edges;
  uint32_t nedges;
} kc__closure;

kc_status kc__resolve(kc_runtime *rt, const kc__spec *spec, kc_world world, kc__closure *out);
void kc__closure_free(kc_runtime *rt, kc__closure *c);
/* Under world_lock: computes the world range of a code instance compiled at
 * `world` from its edges, and registers backedges if it is still valid in
 * the latest world. Publishes the range (release). */
void kc__publish_range(kc_runtime *rt, kc__ci *ci, kc_world world);
void kc__table_free(kc_runtime *rt);
/* kc_collect's part in the table: drops dead code instances (marked by
 * ci->dead) from backedge lists and frees definitions visible in no live
 * world. Returns the number of definitions freed. */
uint64_t kc__table_collect(kc_runtime *rt, bool (*live)(void *ud, kc_world min, kc_world max), void *ud);

/* Test-only fault injection (src/testing/fault.h; built with
 * -DKC_FAULT_INJECTION=ON). Declared for every build: store.c calls its
 * hooks under #ifdef. */
#include "testing/fault.h"

/* kc_runtime_create on a backend table the caller chose (tests: a backend
 * without a compiler, or one wrapped by kc__fault_wrap_backend): what
 * kc_runtime_create does once it has picked its backend. */
kc_status kc__runtime_open(const kc_options *opt, const kc__backend *be, kc_runtime **out);

/* kcache's allocator when there is a runtime, else malloc's family: the
 * kcache command walks stores without a runtime. */
void *kc__xalloc(kc_runtime *rt, size_t n);
void *kc__xcalloc(kc_runtime *rt, size_t n);
void *kc__xrealloc(kc_runtime *rt, void *p, size_t n);
void kc__xfree(kc_runtime *rt, void *p);

#endif /* KC_INTERNAL_H */
