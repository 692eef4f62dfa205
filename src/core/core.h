/* SPDX-License-Identifier: MIT */
/*
 * core.h -- the data model of the world-age cache, shared by the files of
 * src/core: definitions and bindings (the function table), code instances
 * and specializations, contexts and buffers, kernel handles and bound
 * arguments, the runtime; and what those files call of each other.
 *
 * Lock hierarchy (a lock may be taken while holding the ones above it, never
 * the other way round):
 *
 *   0. kc_runtime.collect_lock  one kc_collect at a time, and its batches
 *                           waiting for their grace period (world.c);
 *                           held by nothing else, so taken with no other.
 *   1. kc__spec.lock        single flight: held while one specialization
 *                           resolves, compiles and publishes a code instance
 *                           (the disk store's per-key file lock nests here).
 *   2. kc_runtime.ctx_lock  the list of contexts (live and reusable); held
 *                           by create, by destroy while it tears a context
 *                           down, and by kc_collect while it walks them.
 *   3. kc_context.lock      a context's table of linked objects, its buffers
 *                           (live and free: every kc_buffer_* but read and
 *                           write takes it) and its backend session; held
 *                           while linking.
 *   4. kc_runtime.world_lock  the function table (bindings, definitions,
 *                           backedges), the world counter's writers and the
 *                           multiset of pinned worlds (and so fast_world).
 *                           Held only for table work: never while compiling.
 *   5. kc_runtime.spec_lock   the table of interned specializations.
 *      kc__spec.free_lock     a spec's free list of linked objects.
 *      kc_runtime.kernels_lock  the list of live kernel handles (stats).
 *      kc__pool.lock          kc_prepare's queue of batches (pool.c).
 *                           (leaves: nothing is taken while holding them)
 *   The glue's kc__store.probe_lock is taken under kc__spec.lock and is not a
 *   leaf: the backend's link and unlink (and their own locks) run under it.
 *   kc__remote.pool_lock and kc__jobq.queue_lock are leaves. doc/locks.md has every
 *   lock in the tree, the backends' included, and what may block under each.
 *
 * Readers of the world counter, of code-instance lists and of world ranges
 * never lock: they use the acquire/release wrappers below.
 */
#ifndef KC_CORE_H
#define KC_CORE_H

#include "backend.h"
#include "base/base.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>

typedef struct kc__binding kc__binding;
typedef struct kc__ci kc__ci;
typedef struct kc__linked kc__linked;
typedef struct kc__pool kc__pool;

/* ------------------------------------------------------------- services */

/* The runtime's allocator (kc_options.alloc), through base/mem.h. */
void *kc__alloc(kc_runtime *rt, size_t size); /* NULL on failure */
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

#include "core/abi.h" /* the size checks of the structs that grow */

/* Size in bytes of a scalar type named by text in the kernel dialect
 * ("float", "unsigned int", "int64_t"...), after substituting the
 * specialization parameters; 0 if unknown. */
uint32_t kc__scalar_size(const char *type, const kc__spec *spec);
/* The same, and the scalar's type as named in kcache's table ("unsigned
 * int"; for an OpenCL vector its element type) in *base ("" if unknown;
 * static) and its lane count in *lanes (1 for a scalar); either may be NULL. */
uint32_t kc__scalar_type(const char *type, const kc__spec *spec, const char **base, uint32_t *lanes);

#include "core/text.h" /* the scanner and the parsers of source text */

/* ------------------------------------------------------------- data model */

/* One version of a named function's source, visible in [min_world, max_world]. */
typedef struct kc__def {
  struct kc__def *older, *newer; /* guarded by world_lock */
  kc__binding *binding;
  char *source;
  size_t len;
  uint64_t hash;
  kc_world min_world;
  _Atomic kc_world max_world;
  /* rt->retired_defs: once max_world is set (a newer definition or an
   * undefine), for kc_collect; guarded by world_lock */
  struct kc__def *next_retired;
  /* resolve.c's walk (under world_lock): the walk that last reached it, and
   * whether it was then on the walk's stack or done */
  uint64_t walk_stamp;
  uint8_t walk_state;
  /* A version of a file outside the table (extfiles.c): no source; len is its
   * size, hash its content's, file_flags its KC__FILEDEP_ABSENT/UNKNOWN. */
  uint8_t file_flags;
  /* Its language (kc_language): KC_LANG_DIALECT, or a backend's own
   * (kc_define_lang); part of what the definition is. */
  uint8_t lang;
} kc__def;

/* One entry of a binding's backedges: a code instance and its edge to that
 * binding (whose bpos is this entry's index), so it is taken
 * off every list it is on in O(its edges) when it is clipped. */
typedef struct kc__backedge {
  kc__ci *ci;
  struct kc__edge *edge; /* ci's edge to this binding */
} kc__backedge;

/* A name in the function table, defined or not. */
struct kc__binding {
  char *name;
  uint64_t hash;
  kc__binding *next_in_bucket;
  kc__def *defs; /* newest first */
  /* The code instances that looked this name up and are valid forever
   * (exactly those: a clipped one leaves every list at once). */
  kc__backedge *backedges;
  size_t nbackedges, capbackedges;
  /* An enumerator's name: every binding one of whose definitions declared
   * it in an enum (kc_define of "enum Color { RED }" adds Color to RED's),
   * so that code naming RED depends on each of them (at an old world, the
   * one that declares it there may not be the latest). Under world_lock. */
  kc__binding **declarers;
  size_t ndeclarers, capdeclarers;
  /* resolve.c's walk (under world_lock): the walk that last made an edge to
   * this name, and that edge's index in the walk's closure */
  uint64_t walk_stamp;
  uint32_t walk_edge;
  /* A file outside the table (extfiles.c; its name is its absolute path)
   * or a set of them ("<files ...>"):
   * what was seen of it, its sets or its files. NULL for every other name. */
  struct kc__extinfo *ext;
  /* A watcher (table.c: "#prefix", or a language's built-ins): the latest
   * world in which a name it watches was defined or undefined, so that
   * code resolved before then but published after is clipped to its own
   * world. 0: never. Under world_lock. */
  kc_world watch_changed;
};

/* A lookup made while compiling: name -> definition found (or NULL). */
typedef struct kc__edge {
  kc__binding *binding;
  kc__def *def;
  uint32_t bpos; /* the index of this code instance in binding->backedges, while on it */
  bool call; /* some mention was a call: an undefined name the compiler may blame */
} kc__edge;

/* The compiled artifact of one specialization, valid in [min_world, max_world]. */
struct kc__ci {
  /* First, on one cache line: what a clip touches (table.c, invalidate). */
  _Atomic kc_world min_world;
  _Atomic kc_world max_world;
  kc__edge *edges;
  uint32_t nedges;
  /* rt->clipped: once its range is finite (clipped by a definition, or
   * published so), for kc_collect; guarded by world_lock */
  kc__ci *next_clipped;
  uint64_t id; /* never reused */
  /* The older code instance of the same spec. Read without a lock (acquire);
   * written under world_lock, at publish, and by kc_collect, which skips
   * the dead ones (a dead one's own next is left as it was, so a reader
   * standing on it goes on). */
  _Atomic(kc__ci *) next;
  kc__spec *spec;
  kc_world compiled_at;
  void *artifact;
  size_t artifact_size;
  char *source; /* the translation unit */
  kc__param *params;
  uint32_t nparams;
  uint64_t *sig; /* nparams expected arguments (KC__SIG), filled at compile */
  uint64_t compile_ns;
  /* A compile that failed for good (syntax error): remembered for the same
   * worlds so a launch loop does not recompile; artifact is NULL. */
  kc_status status;
  char *error;
  /* The files outside the table the compile read or looked for (extfiles.c),
   * and whether some could not be told (they then cannot be checked: the
   * code is not stored, and serves no world but its own launch). */
  kc__filedep *files;
  uint32_t nfiles;
  bool files_unknown;
  /* Chosen by kc_collect (under world_lock): off its specialization's
   * list, and never linked again (kc__ctx_link finds the code anew). */
  _Atomic bool dead;
};

struct kc__spec {
  char *name;
  char *params; /* canonical */
  uint64_t hash;
  kc__spec *next_in_bucket;
  kc__mutex lock; /* single flight */
  _Atomic(kc__ci *) head; /* newest first */
  uint64_t swept; /* the last kc_collect that filtered head (world.c) */
  kc__mutex free_lock; /* leaf: guards free_linked */
  kc__linked *free_linked; /* unlinked objects of this spec, for reuse */
};

/* Padding that keeps a counter written by every launch off the cache lines
 * of what launches read, so that a counter's writes do not take the
 * line from the launches that read it (the structs are not line-aligned: 64 bytes
 * on each side). */
#define KC__COUNTER_GAP char kc__gap[64]

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
  KC__HTAB(kc__linked) linked; /* keyed by ci->id (base/kit.h) */
  /* Linked objects of code kc_collect chose (world.c), out of `linked`, link
   * key 0: unloaded once their batch's grace period is over, or at reset
   * and destroy. Chained by next_in_bucket, under lock. */
  kc__linked *limbo;
  kc_buffer *buffers; /* live */
  kc_buffer *free_buffers; /* destroyed, for reuse (singly linked by next) */
  kc_context *next; /* runtime's list of all contexts (live or free) */
  kc_stream *streams; /* live streams (interop.c), under lock */
  kc_stream *free_streams; /* destroyed, for reuse (singly linked by next) */
  bool wrapped; /* made by kc_context_wrap: the native context is the caller's */
  /* Launches served by a handle's or bound arguments' cache in this
   * context (kc_stats.fast_hits). Counted here, not per handle, so that
   * kc_stats_get sums the contexts (the structs are never freed while the
   * runtime lives, so the count carries across destroy and reuse), not
   * every handle. On its own cache lines: launches read link_key above. */
  KC__COUNTER_GAP;
  _Atomic uint64_t fast_hits;
  char kc__gap_after[64];
};

/* A stream (interop.c): its native handle in one context. Type-stable like
 * buffers: kc_stream_destroy and the context's teardown release the native
 * handle, mark it dead (alive 0, under the context's lock) and keep the
 * struct on the context's free list for reuse; kc_runtime_destroy frees
 * them. Launches read ctx, alive and native. */
struct kc_stream {
  kc_context *ctx;
  void *native;
  _Atomic int alive;
  bool owned; /* made by kc_stream_create: released as the backend's own */
  kc_stream *prev, *next; /* ctx->streams */
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

struct kc_kernel {
  _Atomic(kc__linked *) slots[KC__HSLOTS]; /* first: indexed without an offset */
  kc_runtime *rt;
  kc__spec *spec;
  kc_kernel *prev, *next; /* runtime's list, guarded by kernels_lock */
  kc_args *bound; /* its bound arguments, guarded by kernels_lock */
  /* The runtime guards launches (kc_options.guard_launches): slots stay
   * empty, so every launch reaches the guarded path, whose cache this is. */
  _Atomic(kc__linked *) gslots[KC__HSLOTS];
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
  _Atomic(kc__linked *) gl; /* l of a runtime that guards launches (l stays kc__no_linked) */
  kc_kernel *k;
  uint64_t ctx_id; /* the context bound: its struct may be reused by another */
  uint32_t n;
  /* ci_id: when local memory sizes are bound (KC_ARG_LOCAL, OpenCL
   * KC_LOCAL parameters), which only kc_launch_args_ex takes, it carries
   * KC__ARGS_EX_ONLY (from kc_args_create on, in every id stored), so that
   * kc_launch_args' compare never matches and its slow path says why;
   * kc_launch_args_ex compares without the bit. */
  uint64_t *want; /* n: the KC__SIG each argument was checked against */
  kc_arg *args; /* n: scalars point into values */
  unsigned char *values;
  kc_args *prev, *next; /* k->bound, guarded by rt->kernels_lock */
  struct {
    kc_args *prev, *next;
  } all; /* rt->bound_args (every kc_args of the runtime), guarded by kernels_lock */
  void *argv[]; /* n: what a backend's launch takes */
};

/* Buffers are type-stable like contexts: their structs are recycled within
 * the context struct they were made in (owner's free list), never freed
 * while the runtime lives, so a kc_buffer_* call on a buffer that was
 * destroyed (by kc_buffer_destroy or with its context) reads valid memory
 * and says KC_EDESTROYED. */
struct kc_buffer {
  /* What backends read (backend.h: kc__bbuf), first: the handle (a
   * kc_buffer * is a pointer to it: argv entries), then the live context,
   * NULL once the buffer is destroyed, so an argument check against any
   * context fails. Written under owner->lock. */
  kc__bufh h;
  kc_context *ctx;
  kc_context *owner; /* the context struct it lives in; never changes */
  size_t size;
  kc_buffer *prev, *next; /* owner's live list or free list, under owner->lock */
  /* What kcache owns of h: KC__BUF_OWNED (buf_create: buf_destroy frees
   * it), KC__BUF_FOREIGN (buf_wrap: buf_unwrap releases it), KC__BUF_HOST
   * (buf_host, the caller's host memory: buf_unwrap releases it) or
   * KC__BUF_VIEW (buf_view of `parent` at `offset`: buf_view_destroy
   * releases it); the last three are never freed, and have no guard zones
   * (whole 0). */
  uint32_t origin;
  uint32_t nviews; /* live views of this buffer, under owner->lock */
  kc_buffer *parent; /* a view's buffer (never itself a view); else NULL */
  size_t offset; /* a view's offset in parent */
  /* Checked mode (src/core/checked.c): the whole allocation, guard zones
   * included (h is a view of its middle), and who launched with it last
   * (for the message at kc_context_finish), under owner->lock. */
  kc__bufh whole;
  const kc__spec *chk_spec;
  uint32_t chk_arg;
  char chk_label[320]; /* one argument, or several views of this buffer */
};
enum { KC__BUF_OWNED = 0, KC__BUF_FOREIGN = 1, KC__BUF_VIEW = 2, KC__BUF_HOST = 3 };
_Static_assert(offsetof(struct kc_buffer, h) == offsetof(kc__bbuf, h) &&
                   offsetof(struct kc_buffer, ctx) == offsetof(kc__bbuf, ctx),
               "a kc_buffer begins as backend.h's kc__bbuf says");

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
  uint64_t id; /* never reused; tags thread-local pins */
  const kc__backend *be;
  void *bstate;
  kc__heap heap; /* kc_options.alloc and alloc_ud */
  kc__log_sink log; /* kc_options.log, log_ud and the resolved level (log.c) */
  kc_options opt; /* the caller's, its strings the runtime's copies below */
  char *compile_options;
  char *device_name;
  kc__config conf; /* every setting, resolved once at create (config.c) */
  kc__bconfig bconf; /* what the backend was opened with (its strings: opt's and conf's) */

  kc__mutex world_lock;
  KC__HTAB(kc__binding) bindings; /* keyed by the name's hash */
  /* What kc_collect looks at, so that its cost is what it may free (plus
   * what pins keep), not the size of the cache: code instances whose range
   * is finite, and definitions that a newer one or an undefine ended. */
  kc__ci *clipped;
  kc__def *retired_defs;

  kc__mutex spec_lock;
  KC__HTAB(kc__spec) specs; /* keyed by hash of (name, canonical params) */

  /* kc_collect (world.c): one at a time; its batches waiting for their
   * grace period, oldest first (under collect_lock) */
  kc__mutex collect_lock;
  struct kc__limbo *limbo;

  kc__mutex ctx_lock;
  _Atomic(kc_context *) contexts; /* pushed at the head only (stats read it without a lock) */

  kc__mutex kernels_lock;
  kc_kernel *kernels;
  kc_args *bound_args; /* every kernel's bound arguments (kc_args.all), for kc_buffer_destroy */

  _Atomic uint64_t n_compiles, n_compile_failures, n_links, n_slow, n_invalidations, n_defines, n_cis,
      compile_ns, n_defs, n_collected, n_files, n_files_changed;

  /* Worlds pinned by threads (a multiset), for kc_collect; under world_lock
   * (npins decides fast_world). */
  struct kc__pinned {
    kc_world world;
    uint32_t count;
  } * pins;
  size_t npins, cappins;
  struct kc__store *store; /* the disk cache (store.c); NULL when there is none */
  kc__fork_hook fork; /* its locks around fork() (fork.c) */
  kc_runtime *live_prev, *live_next; /* the list of live runtimes (world.c), under its lock */
  /* A child of fork() on a backend that is not fork_safe (fork.c): be and
   * bstate are then &forked.table and &forked, and refuse. */
  struct kc__forked {
    kc__backend table;
    kc_runtime *rt;
    long pid; /* the process that forked */
    const char *real_name; /* the backend's */
    int ndev; /* the backend's devices, counted at open: kc_device_count's answer */
    uint64_t builds; /* the backend's program builds at the fork: kc_stats.backend_builds */
  } forked;
  /* Checked mode (checked.c; kc_options.checked or $KC_CHECKED): guard
   * zones around buffers; check_each: after every launch (the host
   * backend, whose launches are synchronous), else at kc_context_finish. */
  bool checked, check_each;
  /* kc_options.guard_launches or $KC_GUARD_LAUNCHES (launch.c): cached
   * launches run inside a grace section, so kc_collect may run beside them */
  bool guarded;
  _Atomic(kc__pool *) pool; /* kc_prepare's compile pool (pool.c); NULL until first needed */
  struct kc__srcfile *files; /* kc_define_file's files and their names (source_file.c), under world_lock */
  size_t nwatchers; /* bindings "#prefix" made (table.c), under world_lock */
  uint64_t walk_stamp; /* the number of the last closure walk (resolve.c), under world_lock */
  /* extfiles.c: the directories a compile's #include <...> is looked for in
   * (backends that do not report what they read), resolved at create; the
   * bindings of files (under world_lock), for kc_refresh. */
  char **inc_dirs;
  size_t ninc_dirs;
  kc__binding **file_bindings;
  size_t nfile_bindings, capfile_bindings;
  /* When the last kc_refresh began (monotonic; under world_lock): a file a
   * compile read before then may have changed where that refresh did not
   * look (it did not know the file yet) */
  uint64_t refresh_ns;
};

#include "core/extfiles.h" /* files outside the table that compiles read */
#include "core/table.h" /* closures, publishing, batches of definitions */

/* ---------------------------------------------------------- linked objects */

/* A code instance loaded into one context: the backend's half
 * (backend.h: kc__blinked, which link fills and launches read) and the
 * core's after it. Backends are handed &l->b, the same address, and never
 * see the rest; kc__linked_of gets back from it for free. The fast path
 * reads b.entry (offset 0), link_key and ci (48 and 56): the first 64
 * bytes, as before the split, and passes the same pointer to the entry,
 * so its instruction count is unchanged (bench/kc_bench). */
struct kc__linked {
  kc__blinked b; /* first: &l->b == l */
  /* The link key of the context generation this object belongs to; 0 while
   * free. Stored with release after every other field is set. */
  _Atomic uint64_t link_key;
  kc__ci *ci;
  kc_runtime *rt;
  uint32_t nargs;
  const uint64_t *sig;
  kc__linked *next_in_bucket; /* context's table or limbo, or the spec's free list */
  uint64_t batch; /* in its context's limbo: the kc_collect batch that retired it */
};
_Static_assert(offsetof(kc__linked, b) == 0, "a backend's half is the linked object's address");
_Static_assert(offsetof(kc__linked, ci) + sizeof(kc__ci *) <= 64,
               "the fast path reads b.entry, link_key and ci from the first 64 bytes");

static inline kc__linked *kc__linked_of(const kc__blinked *b) {
  return (kc__linked *)(uintptr_t)b; /* b is the first member */
}

/* Whether arg fits a parameter whose KC__SIG is want, in ctx. A scalar
 * parameter of a size kcache does not know (UINT32_MAX) fits nothing. */
static inline bool kc__arg_fits(const kc_arg *a, uint64_t want, const kc_context *ctx) {
  if (KC__SIG(a->kind, a->size) != KC__SIG_MATCH(want) || !a->ptr || a->size == UINT32_MAX) return false;
  return want != KC__SIG(KC_ARG_BUFFER, 0) || ((const kc_buffer *)a->ptr)->ctx == ctx;
}

/* args.c: KC_OK if grid and block are there and every dimension is at
 * least 1, else KC_EINVAL saying which (fn: the call, name: the kernel's,
 * for the message). */
kc_status kc__check_dims(kc_runtime *rt, const char *fn, const char *name, const kc_dim3 *grid,
                         const kc_dim3 *block);

/* The slots of a new handle point here: link key 0 never matches. */
extern kc__linked kc__no_linked;

/* The cache a slow path fills for the fast path: a handle's slot for the
 * context key `key`, or (the runtime guards launches: they read another
 * cache, inside a section) its guarded slot. */
static inline _Atomic(kc__linked *) *kc__slot_of(kc_kernel *k, uint64_t key) {
  return (k->rt->guarded ? k->gslots : k->slots) + (key & (KC__HSLOTS - 1));
}

/* What a backend links of ci (backend.h). */
static inline kc__artifact kc__artifact_of(const kc__ci *ci) {
  return (kc__artifact){ci->artifact, ci->artifact_size, ci->spec->name, ci->params,
                        ci->nparams,  ci->sig,           ci->source};
}
/* The kernel's name of a linked object (for messages). */
const char *kc__linked_name(const kc__linked *l);
/* The services a backend of rt is opened with: rt's heap and error owner,
 * and the explanations below (launch.c, context.c). */
kc__bsvc kc__bsvc_of(const kc_runtime *rt);

/* ------------------------------------------------- between src/core files */

/* A context's link key once it is destroyed: matches no linked object. */
#define KC__KEY_DEAD UINT64_MAX
#define KC__HIDDEN __attribute__((visibility("hidden")))

/* The calling thread's pin (world.c). Read on pinned launches: in the
 * shared library it is built with the initial-exec TLS model, so this is
 * one %fs load. */
typedef struct kc__pin_state {
  const kc_runtime *rt; /* the runtime pinned, NULL if none */
  uint64_t rt_id; /* its id: memory can be reused by a new runtime */
  kc_world world;
  uint32_t depth;
} kc__pin_state;
extern KC__HIDDEN _Thread_local kc__pin_state kc__pin;

/* Whether this thread's pin is on rt. The fast path compares the pointer
 * only; a match (rare: pinned threads) is confirmed here against the id, so
 * a pin left on a destroyed runtime never applies to a new one at the same
 * address. */
bool kc__pinned_on(const kc_runtime *rt) KC__NOINLINE;
void kc__drop_own_pin(const kc_runtime *rt);
/* The process's list of live runtimes (world.c): listed last in
 * kc_runtime_create, unlisted first in kc_runtime_destroy, so that a
 * thread's pin on a runtime another thread destroyed is told apart. */
void kc__runtime_list(kc_runtime *rt);
void kc__runtime_unlist(kc_runtime *rt);

/* fork.c: rt's locks around fork() (kcache.h, "Fork"): registered once the
 * runtime is open, removed first thing at destroy. */
void kc__runtime_fork_register(kc_runtime *rt);
void kc__runtime_fork_unregister(kc_runtime *rt);

/* The calling thread's pinned world on rt, else 0 (worlds start at 1). */
static inline kc_world kc__pin_world(const kc_runtime *rt) {
  return kc__pin.rt == rt && kc__pinned_on(rt) ? kc__pin.world : 0;
}

/* The world the calling thread sees: its pin's, else the latest. */
static inline kc_world kc__caller_world(const kc_runtime *rt) {
  if (KC__UNLIKELY(kc__pin.rt == rt) && kc__pinned_on(rt)) return kc__pin.world;
  return kc__load_acquire(&rt->world);
}

/* Whether ci's world range holds w (lock-free). */
static inline bool kc__ci_valid_at(const kc__ci *ci, kc_world w) {
  return kc__load_relaxed(&ci->min_world) <= w && w <= kc__load_acquire(&ci->max_world);
}

/* Grace sections (base/grace.h): every call that holds a code instance, a
 * linked object or a definition past the lock it found it under enters
 * one first, so that kc_collect frees nothing it may still use. KC_OK, or
 * KC_ENOMEM (fn's message) when the thread's first section finds no memory
 * for its record. kc__leave ends it. */
kc_status kc__enter_failed(const kc_runtime *rt, const char *fn) KC__COLD;
static inline kc_status kc__enter(const kc_runtime *rt, const char *fn) {
  return KC__LIKELY(kc__grace_enter()) ? KC_OK : kc__enter_failed(rt, fn);
}
static inline void kc__leave(void) { kc__grace_exit(); }

/* code.c: the interned specialization of (name, canonical parameters). */
kc_status kc__spec_intern(kc_runtime *rt, const char *name, const char *canon, kc__spec **out);
/* The code instance of spec valid at world w, without locks; NULL if none. */
kc__ci *kc__ci_find(kc__spec *spec, kc_world w);
/* Finds or makes the code instance of spec valid at world w (may compile:
 * single flight under spec->lock). */
kc_status kc__ci_get(kc_runtime *rt, kc__spec *spec, kc_world w, kc__ci **out) KC__NOINLINE;
void kc__ci_free(kc_runtime *rt, kc__ci *ci);
/* code.c: the source of spec's translation unit at world w (kc_kernel_source;
 * *out: the runtime's allocation). */
kc_status kc__ci_source(kc_runtime *rt, kc__spec *spec, kc_world w, char **out);
/* The translation unit of spec at world w as backend be would compile it,
 * with be's checks (tests: a CUDA unit from a host runtime's table, for
 * NVRTC without a GPU); the caller frees *text. */
kc_status kc__tu_for(kc_runtime *rt, const kc__backend *be, kc__spec *spec, kc_world w, char **text,
                     size_t *len);
/* world.c: kc_collect's batches, freed whatever their grace period
 * (kc_runtime_destroy, after the contexts). */
void kc__limbo_free(kc_runtime *rt);

/* context.c */
void kc__context_teardown(kc_context *ctx); /* frees what a live context holds */
void kc__linked_recycle(kc_runtime *rt, kc__linked *l);
/* The linked object of ci in ctx, linking it on first use. A ci that
 * kc_collect chose meanwhile (dead) is never linked: the code of spec for
 * world w (the caller's) is found or made again instead. */
kc_status kc__ctx_link(kc_context *ctx, kc__ci *ci, kc_world w, kc__linked **out);
/* context.c: unloads a context's limbo (all of it, or batch's only: 0 for all); ctx->lock held. */
void kc__ctx_limbo_drop(kc_context *ctx, uint64_t batch);

/* The linked object of ci in ctx if there is one (links nothing). */
kc__linked *kc__ctx_find_linked(kc_context *ctx, const kc__ci *ci);
/* interop.c: releases the streams of a context being torn down (ctx->lock
 * held); frees a context's stream structs (kc_runtime_destroy). */
void kc__streams_teardown(kc_context *ctx);
void kc__streams_free(kc_context *ctx);
/* interop.c: waits for every live stream of ctx (kc_context_finish). */
kc_status kc__streams_sync(kc_context *ctx);

/* The rules an argument is explained under, as the call that took it
 * checks it: kc_launch's (buffers and scalars), bound arguments'
 * (kc_args_create, kc_args_set: also local memory sizes for KC_LOCAL
 * parameters) or kc_launch_ex's (also raw pointers). */
typedef enum kc__arg_rules { KC__RULES_LAUNCH, KC__RULES_BOUND, KC__RULES_EX } kc__arg_rules;
/* launch.c: why args do not fit the parameters of ci (KC_EARGS), or why
 * argument i (a) does not fit a parameter whose KC__SIG is want (KC_OK if
 * it does), under the rules of the call: the one table of argument
 * messages, a case per argument kind. Cold. */
kc_status kc__explain_arg(kc_runtime *rt, const char *name, uint32_t i, const char *label, uint64_t want,
                          const kc_arg *a, const kc_context *ctx, kc__arg_rules rules) KC__COLD;
kc_status kc__explain_args(kc_runtime *rt, const kc__ci *ci, const kc_context *ctx, const kc_arg *args,
                           uint32_t nargs, kc__arg_rules rules) KC__COLD;
/* The slow path of bound arguments up to the launch: the linked object to
 * launch a's arguments with (stream: the launch's, whose capture matters;
 * NULL for the context's own; ex: for kc_launch_args_ex). */
#define KC__ARGS_EX_ONLY (UINT64_C(1) << 63) /* in kc_args.ci_id (ids never reach it) */
/* In a bound buffer argument's size (0 while its buffer lives): the buffer
 * was destroyed, even if its struct now serves another buffer. */
#define KC__ARGS_BUFFER_GONE UINT32_MAX
/* A runtime that guards launches: a's cached linked object (kc_args.gl), if
 * it serves the caller's world (ex: for kc_launch_args_ex); else NULL.
 * Inside a section. */
kc__linked *kc__args_guarded_hit(kc_args *a, bool ex);
kc_status kc__args_resolve(kc_args *a, const kc_dim3 *grid, const kc_dim3 *block, const kc_stream *stream,
                           bool ex, kc__linked **out);

#include "core/modes.h" /* kc_launch_ex's arguments, capture safety, checked mode */
/* pool.c: stops and joins the compile pool, if any (kc_runtime_destroy). */
void kc__pool_destroy(kc_runtime *rt);
/* Around fork() (fork.c): the pool's lock taken last, then given back; in
 * the child, which has none of the workers, the pool is left without
 * threads and queue (its batches compile on the calling thread). */
void kc__pool_fork_prepare(kc_runtime *rt);
void kc__pool_fork_after(kc_runtime *rt, bool child);

/* kc__bsvc's bad_dims, bad_args (args.c) and name_of (context.c) for a half
 * the core linked (backend.h). */
kc_status kc__launch_bad_dims(const kc__blinked *b, const kc_dim3 *grid, const kc_dim3 *block) KC__COLD;
kc_status kc__launch_bad_args(const kc__blinked *b, const kc_context *ctx, const kc_arg *args,
                              uint32_t nargs) KC__COLD;
const char *kc__blinked_name(const kc__blinked *b);

/* args.c: the entry of backends without their own (kc__linked.b.entry). */
kc_status kc__entry_packed(kc__blinked *b, kc_context *ctx, const kc_dim3 *grid, const kc_dim3 *block,
                           const kc_arg *args, uint32_t nargs);

#include "core/log.h" /* the runtime's log and the KC_LOG trace */

/* kc_runtime_create on a backend table the caller chose (tests: a backend
 * without a compiler, or one wrapped by kc__fault_wrap_backend): what
 * kc_runtime_create does once it has picked its backend (runtime.c). */
kc_status kc__runtime_open(const kc_options *opt, const kc__backend *be, kc_runtime **out);

/* config.c: the configuration resolved once (base/config.h): kc_options
 * (opt may be NULL), the KC_* variables, the store's kcache.conf and the
 * defaults, with heap (NULL: libc) holding its texts; out is freed with
 * kc__config_free. KC_ENOMEM is the only failure. The kcache command
 * calls it too. */
kc_status kc__config_resolve(const kc_options *opt, const kc__heap *heap, kc__config *out);
/* What the backend is opened with, from the resolved c and the options
 * that are the backend's alone (opt may be NULL); warn: say what is wrong
 * with the backends' settings (once, when the runtime opens its backend),
 * to log (the runtime's; NULL: stderr). */
void kc__bconfig_make(const kc__config *c, const kc_options *opt, kc__bconfig *b, const kc__log_sink *log,
                      bool warn);

#endif /* KC_CORE_H */
