/* SPDX-License-Identifier: MIT */
/*
 * backend.h -- what a backend sees of kcache: the backend table it fills
 * in, the translation unit it compiles, the parameters and their packed
 * signatures (KC__SIG), the artifact it links, the backend's half of a
 * linked object (kc__blinked), buffer handles, and the services it may
 * call (allocation and errors through the kc__bsvc it was opened with,
 * kc__sb, the bad-dims/bad-args explanations). A backend reaches neither
 * the runtime nor a code instance. Backends (src/backends/) include this
 * header, their own folder's header and system headers; they register in
 * src/backends/registry.c.
 */
#ifndef KC_BACKEND_H
#define KC_BACKEND_H

#include "kcache.h"
#include "base/base.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kc__spec kc__spec;
typedef struct kc__blinked kc__blinked;
typedef struct kc__tu kc__tu;

/* ------------------------------------------------------------- services */

/* What a backend is handed at open (and keeps a copy of): the heap its
 * allocations go through (kc_options.alloc, base/mem.h) and the owner id
 * its error messages are filed under (base/err.h: the runtime's id, so
 * kc_errmsg of that runtime reads them). be: the table open was called
 * through, so that a backend that wraps another (the fault proxy) finds
 * its own row. log: the runtime's log (its level and callback, kc_options;
 * NULL: stderr at $KC_LOG's level), which outlives the backend.
 * bad_dims, bad_args, name_of: what the core says of a half it linked (b),
 * for a backend's messages; every one is cold and always set (by
 * kc__bsvc_of, and by the OpenCL compile helper, opencl/serve.c, where
 * they never run):
 *   bad_dims: a launch with a NULL grid or block, or a zero dimension
 *     (KC_EINVAL with the message every path gives). The backends' launch
 *     functions check grid and block themselves: kc_launch's fast path
 *     passes them through unread;
 *   bad_args: for backends' entries, args do not match the kernel's
 *     parameters (or their buffers belong to another context): which;
 *   name_of: the kernel's name.
 * better: a backend with late_artifacts hands the core a better artifact
 *   (bytes, size: lent for the call) for one its compile returned (old,
 *   old_size: its bytes) in this runtime; the core writes the disk cache's
 *   entry again with it where that entry still holds old. With bytes NULL
 *   it only says whether it would take one for old (this runtime wrote its
 *   entry and can write), so that the backend makes it only then. Called
 *   from any thread with none of the backend's locks held, never from a
 *   launch, and not after the backend's quiesce; NULL where nothing takes
 *   them (the compile helper).
 * writable: whether this runtime has a disk cache it can write (no late
 *   artifact is worth preparing otherwise); NULL in the compile helper.
 * rt: the core's, for better and writable only. */
typedef struct kc__bsvc {
  kc__heap heap;
  uint64_t owner;
  const struct kc__backend *be;
  const kc__log_sink *log;
  kc_status (*bad_dims)(const kc__blinked *b, const kc_dim3 *grid, const kc_dim3 *block);
  kc_status (*bad_args)(const kc__blinked *b, const kc_context *ctx, const kc_arg *args, uint32_t nargs);
  const char *(*name_of)(const kc__blinked *b);
  bool (*better)(const struct kc__bsvc *sv, const void *old, size_t old_size, const void *bytes, size_t size);
  bool (*writable)(const struct kc__bsvc *sv);
  kc_runtime *rt;
} kc__bsvc;

static inline void *kc__bs_alloc(const kc__bsvc *s, size_t n) { return kc__heap_alloc(&s->heap, n); }
static inline void *kc__bs_calloc(const kc__bsvc *s, size_t n) { return kc__heap_calloc(&s->heap, n); }
static inline void kc__bs_free(const kc__bsvc *s, void *p) { kc__heap_free(&s->heap, p); }
static inline char *kc__bs_strdup(const kc__bsvc *s, const char *c) { return kc__heap_strdup(&s->heap, c); }
static inline char *kc__bs_strndup(const kc__bsvc *s, const char *c, size_t n) {
  return kc__heap_strndup(&s->heap, c, n);
}
/* Sets the calling thread's error message for the backend's owner and
 * evaluates to the status (kc_status kc__bs_err(s, st, fmt, ...)). */
#define kc__bs_err(s, st, ...) kc__err_owner((s)->owner, (st), __VA_ARGS__)

/* A kernel parameter, parsed from the entry's definition. */
typedef struct kc__param {
  char *type; /* the declaration without its name, e.g. "KC_GLOBAL float *" */
  char *name;
  bool is_buffer; /* a pointer: passed as a kc_buffer */
} kc__param;

/* Packed expected argument: kind in bits 32..39, scalar size in the low
 * half (size UINT32_MAX: neither kcache nor the backend can tell the type's
 * size; a launch then fails with KC_EARGS saying so), and in bits 40..47 the
 * type's alignment as the compiler sees it, as log2 + 1 (0: not known). An
 * argument must match kind and size (KC__SIG_MATCH); the alignment lays out
 * bound arguments and is part of the messages. */
#define KC__SIG(kind, size) (((uint64_t)(kind) << 32) | (uint32_t)(size))
#define KC__SIG_MATCH(sig) ((sig)&0xFFFFFFFFFFull) /* kind and size: what an argument must match */
#define KC__SIG_KIND(sig) ((uint32_t)((sig) >> 32) & 0xFFu)
/* The alignment recorded in sig, or 0 if none is. */
static inline uint32_t kc__sig_align(uint64_t sig) {
  uint32_t lg = (uint32_t)(sig >> 40) & 0xFFu;
  return lg && lg <= 32 ? 1u << (lg - 1) : 0u;
}
/* A scalar of size bytes and alignment align (a power of two up to 2^31). */
static inline uint64_t kc__sig_scalar(uint32_t size, uint32_t align) {
  uint64_t lg = 0;
  while (lg < 31 && (1u << lg) < align) lg++;
  return KC__SIG(KC_ARG_SCALAR, size) | (align ? (lg + 1) << 40 : 0);
}

/* The parameter probe (src/backends/probe.c): how each backend learns the size
 * and alignment of every by-value parameter type from its own compiler,
 * whatever the type (a scalar, a struct or union of the closure, a vector
 * type, half), instead of from a table of names. A backend's epilogue
 * appends kc__probe_emit's code to the translation unit (so it is part of
 * the source and of the disk key); after compiling, the backend reads the
 * values the compiler computed (host: a symbol of the object; OpenCL: a
 * probe kernel run once; CUDA: an array in the PTX) and hands them to
 * kc__probe_apply, which checks them and fills sig. The values are
 * { m, size_0, align_0, ..., size_m-1, align_m-1 } for the m by-value
 * parameters in order. */
typedef enum kc__probe_dialect { KC__PROBE_C, KC__PROBE_OPENCL, KC__PROBE_CUDA } kc__probe_dialect;
/* The number of by-value (non-buffer) parameters of tu: 0 needs no probe. */
uint32_t kc__probe_count(const kc__tu *tu);
/* Appends the probe for tu's by-value parameters (nothing if there are
 * none). The symbol or kernel is named kc__probe. */
void kc__probe_emit(kc__sb *out, const kc__tu *tu, kc__probe_dialect d);
/* Checks vals (n of them, read back from the compiled probe) and fills
 * sig's scalar entries with size and alignment. KC_ECOMPILE saying what is
 * wrong if they do not make sense (then sig is left as it was). */
kc_status kc__probe_apply(const kc__bsvc *sv, const kc__tu *tu, const uint64_t *vals, size_t n,
                          uint64_t *sig);

/* The backend's half of a linked object (a code instance loaded into one
 * context). link fills it, unlink releases it, launches read it; the core
 * embeds it first in its own linked object (core.h: kc__linked.b) and
 * hands backends only this half. */
typedef kc_status (*kc__launch_fn)(kc__blinked *b, void **argv, const kc_dim3 *grid, const kc_dim3 *block);
typedef kc_status (*kc__entry_fn)(kc__blinked *b, kc_context *ctx, const kc_dim3 *grid, const kc_dim3 *block,
                                  const kc_arg *args, uint32_t nargs);
struct kc__blinked {
  /* What kc_launch calls, with its own arguments: a backend's entry that
   * checks the kc_args itself (the host backend compiles one per kernel),
   * or the engine's, which checks and packs them for `launch`. First: the
   * fast path jumps through it. Set by link (or NULL there: the engine's). */
  kc__entry_fn entry;
  kc__launch_fn launch; /* the backend's launch, with argv packed and checked */
  void *bctx; /* the backend's context (set before link) */
  void *fn; /* backend function handle */
  void *module; /* backend module handle */
  void *extra; /* backend-owned */
};

/* A buffer's backend handle; a launch passes a pointer to it. */
typedef union kc__bufh {
  void *ptr; /* host memory, cl_mem */
  uint64_t u64; /* CUdeviceptr */
} kc__bufh;

/* What a backend may read of a kc_buffer (the core's struct, core.h,
 * begins so): its handle first, so that a kc_buffer * is a pointer to its
 * handle (argv entries), and the live context second (NULL once the buffer
 * is destroyed; the host prelude's struct kc__buf reads it). */
typedef struct kc__bbuf {
  kc__bufh h;
  kc_context *ctx;
} kc__bbuf;

/* What a backend loads: the compiled bytes and what they were compiled
 * from, lent for the call of link (when the core links, the bytes stay
 * valid while the linked object lives; the cache glue's trial load unlinks
 * at once). A backend never sees a code instance. */
typedef struct kc__artifact {
  const void *bytes;
  size_t size;
  const char *entry; /* the kernel's name */
  const kc__param *params;
  uint32_t nparams;
  const uint64_t *sig; /* nparams KC__SIG */
  /* The translation unit, or NULL: a backend that rebuilds from source
   * when it rejects a binary (OpenCL) must then say that it rejected it. */
  const char *source;
} kc__artifact;

/* A launch's configuration as the backend's launch_ex sees it
 * (kc_launch_ex; the core has checked the arguments against the
 * parameters, the stream against the context). argv is packed as for
 * launch, plus: a KC_ARG_PTR's entry points at the pointer's value (its
 * kc_arg.ptr), a KC_ARG_LOCAL's is NULL (args[i].size says how much). */
typedef struct kc__lcfg {
  const kc_dim3 *grid, *block;
  void *stream; /* the native stream or queue; NULL: the context's own */
  uint32_t shared_bytes, flags; /* kc_launch_config's */
  kc_dim3 cluster;
  const kc_arg *args; /* nargs entries: the kinds (and KC_ARG_LOCAL sizes) */
} kc__lcfg;

/* --------------------------------------------------------- the table */

/* What a compile read besides its translation unit, as its compiler tells
 * (a backend with reports_deps): the paths it appends, each with its NUL
 * (absolute, or relative to the working directory), and whether it could
 * tell at all (false: the compiler wrote no list). */
typedef struct kc__tu_deps {
  kc__sb paths;
  bool reported;
} kc__tu_deps;

/* A translation unit ready for the backend. */
struct kc__tu {
  const char *entry;
  const char *text;
  size_t len;
  const kc__param *params;
  uint32_t nparams;
  const kc__spec *spec;
  kc__tu_deps *deps; /* compile fills it if the backend reports_deps (else NULL, or left alone) */
};

/* What a backend is configured with: plain values, resolved once by the
 * core from kc_options, the KC_* settings and their defaults
 * (core/config.c). A backend reads neither the environment for a setting
 * nor the options itself. Its strings live as long as the runtime. */
/* a setting of auto (the backend decides), 0 (never) or 1 (always) */
typedef enum kc__auto_mode { KC__MODE_AUTO, KC__MODE_NEVER, KC__MODE_ALWAYS } kc__auto_mode;
typedef struct kc__bconfig {
  int platform_index; /* kc_options.platform_index (-1: the first platform with a device) */
  const char *device_name; /* a substring of the device's name to pick, or NULL */
  const char *compile_options; /* appended to the compiler's own, or NULL */
  const char *host_cc; /* host: the C compiler command (kc_options.host_cc, $KC_HOST_CC, "cc") */
  uint32_t compile_timeout_ms; /* host: a compile's limit (120 s by default) */
  const char *host_opt; /* host: optimisation flags ($KC_HOST_OPT), NULL: by compiler */
  uint32_t host_threads; /* host: threads that run a launch's groups (>= 1) */
  uint64_t host_stream_idle_ns; /* host: a stream's thread ends after this long idle (0: never) */
  uint64_t host_stream_spin_ns; /* host: the watch before a stream's sleeps (0: none) */
  uint32_t compile_threads; /* the compile pool's threads (>= 1) */
  bool cuda_force_ptx; /* CUDA: PTX even where a cubin could be made ($KC_CUDA_FORCE_PTX) */
  kc__auto_mode opencl_helpers; /* OpenCL: builds in helper processes ($KC_OPENCL_HELPERS) */
  const char *opencl_helper; /* OpenCL: the helper to run ($KC_OPENCL_HELPER), NULL: beside the library */
  double opencl_helper_timeout_s; /* OpenCL: how long a helper may take to answer (> 0) */
  /* OpenCL: entries written again after the first launch ($KC_OPENCL_LATE_BINARIES) */
  kc__auto_mode opencl_late_binaries;
} kc__bconfig;

typedef struct kc__backend {
  const char *name;
  /* Why the backend cannot run here with cfg (NULL: the defaults), a
   * static or thread-local string; or NULL. */
  const char *(*unavailable)(const kc__bconfig *cfg);
  /* Opens the backend; keeps a copy of *svc for its services. */
  kc_status (*open)(const kc__bsvc *svc, const kc__bconfig *cfg, void **state);
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
  /* The native language this backend compiles as written (kc_language:
   * KC_LANG_OPENCL, KC_LANG_CUDA), or KC_LANG_DIALECT for none. */
  uint8_t language;
  /* Optional: code appended after the closure (host: the grid trampoline). */
  kc_status (*epilogue)(void *state, const kc__tu *tu, kc__sb *out);
  /* Optional: code put just before the entry's definition, after every
   * other definition of the closure (host: the work item as a parameter
   * of the kernel). tu->text is what was built so far. */
  kc_status (*entry_prologue)(void *state, const kc__tu *tu, kc__sb *out);
  /* Compiles tu; on success *artifact is allocated from the svc heap. Fills
   * sig[i] (KC__SIG) for every parameter. The log gets the compiler's
   * output (also on success). */
  kc_status (*compile)(void *state, const kc__tu *tu, void **artifact, size_t *size, uint64_t *sig,
                       kc__sb *log);
  kc_status (*ctx_create)(void *state, int device, void **bctx);
  void (*ctx_destroy)(void *bctx);
  kc_status (*ctx_reset)(void *bctx);
  kc_status (*ctx_finish)(void *bctx);
  /* Loads the artifact into the context: fills b->launch, b->fn, b->module,
   * b->extra, and b->entry if the backend has its own (else leaves it
   * NULL). b->bctx is set, the rest NULL. */
  kc_status (*link)(void *bctx, const kc__artifact *a, kc__blinked *b);
  void (*unlink)(kc__blinked *b);
  kc_status (*buf_create)(void *bctx, size_t size, kc__bufh *h);
  void (*buf_destroy)(void *bctx, kc__bufh *h);
  kc_status (*buf_write)(void *bctx, kc__bufh *h, size_t off, const void *src, size_t n);
  kc_status (*buf_read)(void *bctx, kc__bufh *h, size_t off, void *dst, size_t n);
  /* Optional (checked mode, kc_buffer_view): a handle on bytes [off, off +
   * size) of the buffer whole, which kernels and copies use like any
   * buffer's, and its release (whole stays). NULL: a handle is an address
   * (host, CUDA), and the view is whole's plus off, released with nothing. */
  kc_status (*buf_view)(void *bctx, const kc__bufh *whole, size_t off, size_t size, kc__bufh *view);
  void (*buf_view_destroy)(void *bctx, kc__bufh *view);

  /* Interop (kcache.h, "Using kcache inside an existing program"). NULL
   * where a backend has none: the core says so (KC_EUNAVAILABLE). */
  /* kc_launch_ex: launch with a configuration (see kc__lcfg). */
  kc_status (*launch_ex)(kc__blinked *b, void **argv, const kc__lcfg *cfg);
  /* A session on the caller's native context, never destroyed by
   * ctx_destroy (only what the backend made in it). */
  kc_status (*ctx_wrap)(void *state, void *native_ctx, void *native_dev, void **bctx);
  void *(*ctx_native)(void *bctx);
  /* Streams are their native handles. create: a new in-order one; wrap:
   * checks that native belongs to bctx (and may retain it); release undoes
   * create (owned) or wrap. */
  kc_status (*stream_create)(void *bctx, void **native);
  kc_status (*stream_wrap)(void *bctx, void *native);
  void (*stream_release)(void *bctx, void *native, bool owned);
  kc_status (*stream_sync)(void *bctx, void *native);
  kc_status (*stream_wait)(void *bctx, void *native, void *other);
  /* Whether native (NULL: the context's own) is capturing a graph; NULL:
   * never. Cold. */
  bool (*stream_capturing)(void *bctx, void *native);
  /* Foreign memory (kc_buffer_wrap): wrap checks native (and may retain
   * it); unwrap releases what wrap took (NULL: nothing to release). Views
   * (kc_buffer_view) are buf_view's, above. */
  kc_status (*buf_wrap)(void *bctx, void *native, size_t size, kc__bufh *h);
  void (*buf_unwrap)(void *bctx, kc__bufh *h);
  /* Host memory used in place (kc_buffer_host): a handle on size bytes at
   * ptr that kernels use without a copy, released by buf_unwrap; NULL, or
   * KC_EUNAVAILABLE with the reason, where the device cannot see host
   * memory. A read into ptr itself waits for the launches before it and
   * leaves their writes there (buf_read must take dst == the memory). */
  kc_status (*buf_host)(void *bctx, void *ptr, size_t size, kc__bufh *h);
  /* Whether link reads kc__artifact.source (OpenCL: to rebuild a binary the
   * platform rejects). Otherwise a code instance keeps no translation unit
   * once compiled (kc_kernel_source rebuilds it). */
  bool link_uses_source;
  /* Whether compile reports the files its compiler read (tu->deps; the host
   * backend: cc -MD). Otherwise the core finds them itself from the
   * #include lines, in the working directory and then the -I directories
   * of the compile options (core/extfiles.c). */
  bool reports_deps;
  /* Whether a child of fork() may go on using a runtime the parent opened
   * (host: a compiler process and kcache's own loader). Otherwise the child's fork hook replaces the
   * table by one that calls nothing of this one and refuses (KC_EBUSY:
   * src/core/fork.c; kcache.h, "Fork"). */
  bool fork_safe;
  /* Whether a stream's handle is the backend's own object (the host's
   * queues, stream.c), not a native API's: kc_stream_native gives NULL. */
  bool private_streams;
  /* Whether the backend may hand, through its services' better, an
   * artifact better than its compile's (OpenCL on PoCL: the program's binary
   * fetched after its first launch holds the machine code that launch made):
   * then the store keeps the keys of the entries this runtime wrote. */
  bool late_artifacts;
  /* Optional: ends the backend's own threads' work that calls its
   * services (better): the core calls it before it closes its store
   * (kc_runtime_destroy); close follows. */
  void (*quiesce)(void *state);
  /* Optional: how many program builds the backend has run (OpenCL:
   * clBuildProgram calls, compiles and links); kc_stats.backend_builds. */
  uint64_t (*builds)(void *state);
} kc__backend;

/* Each backend defines its table, `const kc__backend kc__backend_NAME`, in
 * its own file, and src/backends/registry.c lists it in one row of
 * KC__BACKENDS (kind, table; in the order KC_BACKEND_AUTO tries them). */

/* CUDA without a driver (tests on machines without a GPU): compiles a whole
 * translation unit with NVRTC to a cubin for sm_XX, or to PTX. svc supplies
 * the allocator and the error owner; free *out with kc__bs_free(svc, ...). */
kc_status kc__cuda_compile_only(const kc__bsvc *svc, const char *source_tu, size_t len, const char *entry,
                                int sm, bool ptx, void **out, size_t *out_size, kc__sb *log);
/* kc__cuda_compile_only for a translation unit that ends with the CUDA
 * backend's epilogue (the probe): compiles, and fills sig (nparams entries,
 * prefilled by the caller) with the sizes and alignments NVRTC computed,
 * exactly as the backend's compile does. The artifact is dropped. */
kc_status kc__cuda_compile_sig(const kc__bsvc *svc, const kc__tu *tu, int sm, bool ptx, uint64_t *sig,
                               kc__sb *log);
/* NULL when NVRTC can be loaded, else why not. */
const char *kc__cuda_nvrtc_unavailable(void);

/* ------------------------------------------------------------- registry */

/* src/backends/registry.c, for the core: the table of a kind (NULL if
 * none), and the backend a runtime of `want` opens ($KC_BACKEND when want
 * is KC_BACKEND_AUTO; KC_EUNAVAILABLE saying why if it cannot run here). */
const kc__backend *kc__backend_of(kc_backend_kind kind);
/* The backend to run: want if not KC_BACKEND_AUTO, else the one named (a
 * backend's name; NULL or "auto": the rows in order, the first that can
 * run here with cfg). what names where the name came from, for the
 * message when it names none (KC_BACKEND="x"). */
kc_status kc__backend_pick(kc_backend_kind want, const char *named, const char *what, const kc__bconfig *cfg,
                           const kc__backend **out);

#endif /* KC_BACKEND_H */
