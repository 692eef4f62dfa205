/* SPDX-License-Identifier: MIT */
/*
 * kcache.h -- the public interface of kcache, and its specification.
 *
 * kcache JIT-compiles kernels written as source text, caches the compiled
 * code by "world" (a counter that moves every time the table of function
 * definitions changes), and launches cached code with a handful of
 * instructions over the raw backend call. When a function that a kernel
 * calls is redefined, exactly the kernels that depend on it are compiled
 * again; threads that pinned an older world keep seeing that world.
 *
 * Conventions (they hold for every function below unless it says otherwise):
 *  - Every function that can fail returns a kc_status; KC_OK is 0. Results
 *    come back through output parameters, which are always last.
 *  - After a failure, kc_errmsg(rt) returns a message for the calling thread
 *    (with the compiler's log when a compile failed). Messages are per thread,
 *    so concurrent failures never overwrite each other's text.
 *  - Destroy functions accept NULL and do nothing with it.
 *  - Strings passed in are copied; kcache never keeps the caller's pointer.
 *  - Strings returned as `const char *` are owned by kcache and stay valid as
 *    long as the object they came from, unless documented otherwise.
 *  - Thread safety: all functions are safe to call from any thread at the
 *    same time, except where a function says "not thread-safe with ..." .
 */
#ifndef KCACHE_H
#define KCACHE_H

#include <stddef.h>
#include <stdint.h>

/* The library is built with hidden visibility; what this header declares is its API. */
#pragma GCC visibility push(default)

#ifdef __cplusplus
extern "C" {
#endif

#define KC_VERSION_MAJOR 0
#define KC_VERSION_MINOR 5
#define KC_VERSION_PATCH 0
#define KC_VERSION_STRING "0.5.0"
#define KC_VERSION_NUMBER (KC_VERSION_MAJOR * 10000 + KC_VERSION_MINOR * 100 + KC_VERSION_PATCH)

/* Run-time twins of the version macros: what the linked library is. */
const char *kc_version(void);
int kc_version_number(void);

/* ------------------------------------------------------------------ status */

/* One table generates the enum, the names and the messages. */
#define KC_STATUS_MAP(X) \
  X(OK, "success") \
  X(EINVAL, "invalid argument") \
  X(ENOMEM, "out of memory") \
  X(ENOTFOUND, "name is not defined") \
  X(ERECURSION, "recursion in the call graph is not supported") \
  X(ECOMPILE, "compilation failed") \
  X(ELINK, "loading compiled code into the context failed") \
  X(ELAUNCH, "kernel launch failed") \
  X(EARGS, "wrong kernel arguments") \
  X(EUNAVAILABLE, "backend is not available on this machine") \
  X(EDESTROYED, "the context or buffer has been destroyed") \
  X(EBUSY, "operation not allowed in the current state") \
  X(EIO, "input/output error") \
  X(EBACKEND, "backend error")

typedef enum kc_status {
#define KC__STATUS_ENUM(name, msg) KC_##name,
  KC_STATUS_MAP(KC__STATUS_ENUM)
#undef KC__STATUS_ENUM
      KC__STATUS_COUNT
} kc_status;

/* "KC_EINVAL" etc.; "KC_UNKNOWN" for values outside the table. Static strings. */
const char *kc_status_name(kc_status s);
/* A short generic description of the status. Static string. */
const char *kc_status_string(kc_status s);

/* ----------------------------------------------------------------- handles */

typedef struct kc_runtime kc_runtime; /* one function table, one backend */
typedef struct kc_context kc_context; /* a device session */
typedef struct kc_kernel kc_kernel; /* a kernel name + specialization */
typedef struct kc_buffer kc_buffer; /* device memory in one context */

/* A world: every change to the function table makes a new one. World 0 is
 * never a valid world; the first world of a runtime is 1. */
typedef uint64_t kc_world;
#define KC_WORLD_FOREVER UINT64_MAX

/* ------------------------------------------------------------- the runtime */

typedef enum kc_backend_kind {
  KC_BACKEND_AUTO = 0, /* $KC_BACKEND if set, else the best available */
  KC_BACKEND_HOST, /* the host CPU through the system C compiler */
  KC_BACKEND_OPENCL, /* any OpenCL platform through the ICD loader */
  KC_BACKEND_CUDA /* NVRTC + the CUDA driver */
} kc_backend_kind;

/* Allocator hook (Lua style, per runtime). realloc semantics: new_size 0
 * frees ptr and returns NULL; ptr NULL allocates. Returning NULL for a
 * nonzero size is an allocation failure, which kcache reports as KC_ENOMEM
 * and survives. Must be thread-safe. kcache uses it for all of its own
 * memory; backends' libraries allocate on their own. */
typedef void *(*kc_alloc_fn)(void *ud, void *ptr, size_t new_size);

/* Log levels (see "log" below). A message of level L reaches the sink when
 * L <= the runtime's level. */
typedef enum kc_log_level {
  KC_LOG_DEFAULT = 0, /* kc_options.log_level: $KC_LOG, else KC_LOG_WARN */
  KC_LOG_ERROR = 1,
  KC_LOG_WARN = 2, /* what kcache printed on stderr before it had a log */
  KC_LOG_INFO = 3, /* each compile and how long it took; cache tier hits */
  KC_LOG_DEBUG = 4 /* why each miss missed, and each step of the slow path */
} kc_log_level;

/* Log sink (per runtime): msg is one line without its newline or a
 * "kcache:" prefix, valid during the call only. Called from any thread
 * that uses the runtime (and its uploader thread), so it must be
 * thread-safe; it must not call kcache on the same runtime. */
typedef void (*kc_log_fn)(void *ud, kc_log_level level, const char *msg);

/*
 * Struct sizes (the ABI rule). kc_options and kc_stats (and kc_param_info,
 * which follows kc_stats' rule: see kc_kernel_param) grow at their end
 * in later versions; each starts with `size_t size`, the size of the struct
 * as the caller was compiled, and kcache reads or writes only that many
 * bytes of it:
 *  - kc_options_init(&o) and kc_stats_get(rt, &s) are macros that pass
 *    sizeof the struct of the header the caller was built with (to
 *    kc_options_init_size and kc_stats_get_size). So a program built
 *    against an older kcache.h keeps working with a newer library: the
 *    fields its struct lacks take their defaults (kc_options) or are not
 *    written (kc_stats).
 *  - A kc_options larger than the library knows (a program built against a
 *    newer kcache.h) is accepted if every byte past what the library knows
 *    is 0 (fields left at their default), and refused with KC_EINVAL
 *    otherwise: "kc_options of N bytes, this library knows M ...", so a
 *    newer program never silently loses an option it set.
 *  - kc_stats is only written, never read (it need not be initialized): a
 *    larger one gets the counters this library has, zeros past them, and
 *    s.size set to the bytes this library filled, so a newer program can
 *    tell which counters an older library did not count.
 *  - A size of 0, or one below the smallest layout the library reads
 *    (kc_options: the fields up to alloc_ud; kc_stats: up to collected), is
 *    refused with KC_EINVAL. The rule starts with this version (0.1.0, the
 *    first with a size field and with kc_options_init_size and
 *    kc_stats_get_size): a binary built before it links no longer, as the
 *    soname's major version 0 allows.
 * kc_runtime_create reads opt->size, so a kc_options must be initialized
 * with kc_options_init (or have .size = sizeof(kc_options) and the rest
 * zero but platform_index = -1). kc_dim3, kc_arg, kc_collect_info and
 * kc_code_info are fixed: they will never change (new information comes
 * through new functions).
 */
typedef struct kc_options {
  size_t size; /* sizeof(kc_options) of the caller; kc_options_init sets it */
  kc_backend_kind backend;
  /* Compiler options appended to the backend's defaults (NULL: none). For the
   * host backend these are extra `cc` arguments separated by spaces. */
  const char *compile_options;
  /* Host backend: the compiler to run (NULL: $KC_HOST_CC, else "cc"). */
  const char *host_cc;
  /* Kill a compiler that runs longer than this (0: 120000 ms). */
  uint32_t compile_timeout_ms;
  /* Directory of the disk cache (NULL: $KC_CACHE_DIR, else
   * $XDG_CACHE_HOME/kcache, else ~/.cache/kcache; see "disk cache"). */
  const char *cache_dir;
  /* OpenCL: platform and device to use; -1 / NULL: the first with a device. */
  int platform_index;
  const char *device_name;
  kc_alloc_fn alloc; /* NULL: malloc/realloc/free */
  void *alloc_ud;
  /* The disk cache (see "disk cache" below). */
  uint64_t cache_max_size; /* bytes; 0: $KC_CACHE_MAXSIZE, else the store's kcache.conf, else 1 GiB */
  uint32_t cache_lock_timeout_ms; /* 0: $KC_CACHE_LOCK_TIMEOUT (seconds), else 60 s */
  int cache_disable; /* nonzero: no disk cache, whatever the environment says */
  /* The remote tier (see "remote tier" at the end): each NULL or 0 takes
   * the environment variable, else the default. */
  const char *remote_url; /* redis://..., redis+cluster://...; NULL: $KC_REMOTE; "" or "off": none */
  const char *remote_prefix; /* key namespace; NULL: $KC_REMOTE_PREFIX, else "kcache:" */
  const char *remote_key; /* shared secret; NULL: $KC_REMOTE_KEY, else none */
  uint32_t remote_timeout_ms; /* 0: $KC_REMOTE_TIMEOUT_MS, else 5 ms */
  uint32_t remote_lock_timeout_ms; /* 0: $KC_REMOTE_LOCK_TIMEOUT (seconds), else 30 s */
  uint32_t remote_retry_ms; /* 0: $KC_REMOTE_RETRY_MS, else 10000 ms */
  uint64_t remote_max_entry; /* bytes; 0: $KC_REMOTE_MAX_ENTRY, else 64 MiB */
  /* Nonzero: the disk cache is a store its group shares ($KC_CACHE_SHARED=1
   * too); see "Security" under "disk cache". */
  int cache_shared;
  /* The log (see "log" below). */
  kc_log_fn log; /* NULL: stderr, "kcache: warning: MSG" */
  void *log_ud; /* passed to log */
  kc_log_level log_level; /* KC_LOG_DEFAULT: $KC_LOG, else KC_LOG_WARN */
  /* Nonzero: checked mode (see "checked mode" under buffers); 0: $KC_CHECKED
   * (1 turns it on), else off. */
  int checked;
  /* Threads that compile a kc_prepare batch, the calling thread included
   * (0: $KC_COMPILE_THREADS, else one per core). On a platform that builds
   * one OpenCL program at a time per process (PoCL), more than one makes
   * the OpenCL backend build in helper processes (kcache-clc, up to one per
   * thread, kept for the runtime's life: $KC_OPENCL_HELPER, else
   * ../libexec/kcache/kcache-clc beside the shared library (in a Python
   * wheel: beside the extension module), else kcache-clc in the library's
   * own folder (a build tree), else the install path it was configured
   * with; without one, a warning in the log, once, and every build in the
   * process); $KC_OPENCL_HELPERS=0 turns that off, 1 uses them on any
   * platform. */
  uint32_t compile_threads;
  /* Must be 0 (kc_options_init). The 0.1 layout ended at compile_threads,
   * padded to 8 bytes; a field in that padding would not grow the struct,
   * and a 0.1 library would ignore it without a word. */
  uint32_t reserved0;
  /* Nonzero: cached launches are guarded, so that kc_collect may run while
   * other threads launch (see kc_collect): a locked increment and a release
   * store more (+86 instructions over a direct call, against +25; bound
   * arguments +103). 0: $KC_GUARD_LAUNCHES (1 turns it on), else off. The
   * Python package always turns it on. */
  int guard_launches;
  /* Host backend: threads that run a launch's work groups, the calling
   * thread included (0: $KC_HOST_THREADS, else one per core; 1: the caller
   * alone). A grid that one thread finishes sooner than the pool wakes up
   * runs on the caller alone. */
  uint32_t host_threads;
  /* Host backend: the compiler's optimisation flags (NULL: $KC_HOST_OPT,
   * else "-O3 -march=native" with gcc and clang, "-O2" with tcc). Part of
   * the disk cache's key, with the CPU's model and features when they
   * name "native", so that an entry never runs on a CPU that lacks them. */
  const char *host_opt;
  /* The remote tier over TLS (rediss://; see "remote tier"), 0.3: each
   * NULL takes $KC_REMOTE_TLS_CA, _CERT, _KEY, _SERVER_NAME. */
  const char *remote_tls_ca; /* CA file or directory; else the system's */
  const char *remote_tls_cert; /* client certificate (PEM); else none */
  const char *remote_tls_key; /* its key (PEM); else the certificate's file */
  const char *remote_tls_server_name; /* the name to verify; else the URL's host */
} kc_options;

/* Fills the first `size` bytes of *opt with the defaults and sets
 * opt->size. KC_EINVAL for a NULL opt or a size the library refuses (see
 * "Struct sizes" above). Call it through kc_options_init. */
kc_status kc_options_init_size(kc_options *opt, size_t size);
#define kc_options_init(opt) kc_options_init_size((opt), sizeof(kc_options))

/* Creates a runtime. opt may be NULL for the defaults. On failure *out is
 * NULL and, if the failure concerns the backend, kc_errmsg(NULL) says why.
 * Thread-safe. The runtime's configuration is resolved here, once: for
 * each setting, the option if set (non-zero, non-NULL), else its KC_*
 * environment variable, else the store's kcache.conf (its max_size), else
 * the default. Variables changed later do not reach this runtime (a new
 * one reads them again); `kcache -p` prints what a runtime would resolve,
 * and where each value came from. */
kc_status kc_runtime_create(const kc_options *opt, kc_runtime **out);
/* Destroys the runtime and everything created from it (contexts, kernels,
 * buffers). Not thread-safe with any other call on the same runtime. */
void kc_runtime_destroy(kc_runtime *rt);

/* Fork. A process may fork() while its threads use kcache: kcache takes its
 * locks around the fork (pthread_atfork), so the child inherits none of
 * them held, and a child may go on using a runtime of its parent on the
 * host backend. OpenCL and CUDA drivers do not survive a fork: in a child,
 * a runtime of its parent on those backends refuses every call that would
 * reach the driver (launches, cached ones too; compiles and
 * kc_kernel_prepare; buffer create, write, read, view and wrap; streams;
 * kc_context_create, _wrap, _reset and _finish) with KC_EBUSY and "...
 * this runtime was created before fork() in process P; the opencl backend
 * cannot be used in a child process: create a new runtime in the child"
 * (or exec). kc_define, kc_undefine, kc_collect, kc_stats_get and
 * kc_device_count still work (kc_device_name is NULL), and the destroy
 * calls, kc_runtime_destroy included, free kcache's own memory without
 * calling the driver (its objects are left to the process's end). On the
 * host backend, in the child:
 *  - compiles that other threads of the parent had in progress did not
 *    happen: the child compiles again what it needs; the forking thread's
 *    pin is kept, other threads' pins are not;
 *  - uploads to the remote tier queued in the parent before the fork are
 *    sent by the parent alone; the child's own uploads are sent by an
 *    uploader thread of its own (finished by kc_runtime_destroy, as in any
 *    process), so none is lost or sent twice;
 *  - kc_options.alloc is called (to free the child's copy of the parent's
 *    queued uploads): it must work in a child.
 * fork() waits while another thread links code into a context or edits
 * the function table, never for a compile. On the host backend the code
 * linked before the fork is shared by parent and child and runs in both;
 * neither reuses the other's code memory (doc/locks.md, "Fork"). */

/* Child processes. kcache starts processes of its own: the host backend
 * runs its compiler (cc, tcc) for each compile and waits for it; the
 * OpenCL backend on PoCL with more than one compile thread keeps kcache-clc
 * helpers for the runtime's life (kc_options.compile_threads). They are
 * started with posix_spawn, get none of the caller's descriptors, and are
 * reaped by kcache by their pid. A caller that reaps children it did not
 * start (waitpid(-1, ...) in a SIGCHLD handler, SIG_IGN for SIGCHLD) takes
 * their exit from kcache: a compile then fails with KC_EBACKEND and is
 * tried again at the next launch. Reap only your own
 * pids (KC_OPENCL_HELPERS=0 keeps the OpenCL builds in this process). */

/* The backend actually in use: "host", "opencl" or "cuda". */
const char *kc_runtime_backend(const kc_runtime *rt);

/* The calling thread's message for its last failed call on rt (rt may be
 * NULL for failures that had no runtime). "" if there was none. Valid until
 * the same thread's next failing call. */
const char *kc_errmsg(const kc_runtime *rt);

/* Whether a backend can be used on this machine; if not, and why is non-NULL,
 * *why points at a static or thread-local explanation. Thread-safe. */
int kc_backend_available(kc_backend_kind kind, const char **why);

/* ------------------------------------------------------ devices, contexts */

/* Writes a listing of what a backend can use on this machine into buf
 * (snprintf semantics: always NUL-terminated when size > 0), one line per
 * platform and an indented line per device:
 *   "platform 0: Portable Computing Language (OpenCL 3.0 PoCL ...)\n"
 *   "  device 0: cpu-haswell-Intel(R) Xeon(R) ...\n"
 * Platform indices are those of kc_options.platform_index; devices are in
 * the platform's order (a runtime's device 0 is the one it selected).
 * Returns the length of the whole listing, or -1 if the backend is not
 * available (kc_backend_available says why). Thread-safe. */
int kc_list_devices(kc_backend_kind kind, char *buf, size_t size);

/* Number of devices the runtime's backend sees; device 0 is the one the
 * options selected (kc_options.platform_index, device_name), which is the
 * device the runtime compiles for. */
int kc_device_count(const kc_runtime *rt);
/* A device's name, or NULL for an index out of range. */
const char *kc_device_name(const kc_runtime *rt, int index);

/* Creates a context on a device. Contexts have 64-bit ids that are never
 * reused; the memory of a destroyed context may be reused by a later one. */
kc_status kc_context_create(kc_runtime *rt, int device, kc_context **out);
/* Destroys a context: frees its linked objects and its buffers' memory
 * (their handles then give KC_EDESTROYED, see below). A kc_context
 * pointer used after destroy gives KC_EDESTROYED (until the memory is
 * reused for a new context, which then has a new id). Not thread-safe with
 * launches on the same context, nor with kc_buffer_* calls on its buffers. */
void kc_context_destroy(kc_context *ctx);
/* Resets a context like a device reset: drops every linked object (modules,
 * kernel objects, the host backend's loaded copies). Compiled code is kept, so the next
 * launch relinks without compiling. Buffers stay valid. Not thread-safe with
 * launches on the same context. */
kc_status kc_context_reset(kc_context *ctx);
uint64_t kc_context_id(const kc_context *ctx);

/* ----------------------------------------------------- the function table */

/* Defines (or redefines) `name` with the full source text of its
 * definition, in the kernel dialect (doc/guide.md, "The kernel dialect", and "One dialect"
 * under kernels).
 * Every kind of top-level definition is a named definition:
 *   a function   "KC_DEVICE float h(float x) { return 2.0f * x; }"
 *   a kernel     "KC_KERNEL void k(KC_GLOBAL float *y) { y[kc_global_id(0)] = h(1); }"
 *   a type       "typedef struct P { float x, y; } P;" (struct, union, enum, typedef)
 *   a constant   "static const float SCALE = 2.0f;"
 *   a macro      "#define N 7", "#define CALL(x) helper(x)" (object-like or
 *                function-like; name it as the #define does)
 *   a header     kc_define(rt, "util.h", text, ...): see "Headers and
 *                source files" below.
 * The new definition is visible from the new world on; *new_world (may be
 * NULL) gets the world in which it is visible. Every code instance that
 * looked up `name` stops being valid in that world. Text identical to the
 * visible definition changes nothing and returns the current world.
 *
 * Dependencies: a definition depends on every name its text mentions,
 * defined or not, called or not, found by a scan of its text outside
 * comments and literals (C keywords, the dialect's KC_ and kc_ names and
 * the specialization's keys aside). A name looked up and not found is a
 * dependency like one that was found: defining it later (a #define, a
 * constant, a type, an enumerator, a function), undefining it, or defining
 * it again ends the code that mentioned it, a compile that failed for its
 * absence included (a failed compile is kept for the worlds its lookups
 * hold in, like code). Preprocessor lines are read too: names tested by
 * #ifdef, #ifndef, defined(X) and #if expressions are dependencies, and a
 * macro body's names are dependencies of whoever uses the macro, so
 * `#define CALL(x) helper(x)` (in the table, or inside a kernel's body)
 * makes helper a dependency. This over-approximates: a local variable that
 * shares a name with a later definition costs a recompile (see doc/design.md
 * for how often, measured), never a stale result. Line splices
 * (backslash-newline) are joined first. A paste `a ## b` is the name
 * "ab"; a paste of a macro parameter (`op_ ## x`) names what kcache cannot
 * know: code that uses it depends on every definition whose name starts
 * with the known prefix ("op_"), and any later definition of such a name
 * invalidates it (an over-approximation, noted in the log at
 * KC_LOG_INFO), never a missed dependency. An enumerator is found through
 * the definition that declares it: code that names RED of the definition
 * "Color" = "enum Color { RED };" depends on Color (and on RED, should RED
 * be defined on its own later), and on every other name whose definition
 * ever declared RED. Depth is no limit: a chain of 100,000 helpers
 * resolves (iteratively; no C recursion on what users control).
 *
 * Names are C identifiers (or header names); names starting with "kc_" or
 * "KC_" are reserved. The source of a name other than a header must
 * mention `name` (a #define of it counts). */
kc_status kc_define(kc_runtime *rt, const char *name, const char *source, kc_world *new_world);
/* Ends the visibility of `name`'s definition in a new world. KC_ENOTFOUND if
 * it has no visible definition. */
kc_status kc_undefine(kc_runtime *rt, const char *name, kc_world *new_world);

/* The latest world (one acquire load). */
kc_world kc_world_latest(const kc_runtime *rt);
/* The world that launches of the calling thread resolve against: its pinned
 * world if it pinned one, else the latest. */
kc_world kc_world_current(const kc_runtime *rt);

/* Pins the calling thread to the latest world: until kc_unpin, its launches
 * and compiles resolve definitions as of that world, whatever other threads
 * define meanwhile. Pins nest: pinning again while pinned keeps the world of
 * the outer pin. A thread can pin one runtime at a time (KC_EBUSY); a pin
 * on a runtime that has since been destroyed (by any thread) ends there and
 * does not count. The
 * outermost pin records its world for kc_collect (KC_ENOMEM if it cannot).
 * The outermost pin and unpin take the runtime's definition lock. While any
 * thread holds a pin on rt, every thread's cached launches on rt also read
 * their thread's pin (a few instructions more, still lock-free). */
kc_status kc_pin(kc_runtime *rt, kc_world *pinned);
/* Undoes one kc_pin of the calling thread. KC_EBUSY if it holds no pin. */
kc_status kc_unpin(kc_runtime *rt);

/* What kc_collect freed. */
typedef struct kc_collect_info {
  uint64_t code_instances; /* compiled code no live world can use */
  uint64_t linked; /* their linked objects, in every context */
  uint64_t definitions; /* definitions visible in no live world */
} kc_collect_info;

/* Reclaims old worlds. The live worlds are the latest and every world some
 * thread has pinned; any other world can never be asked for again (a pin
 * captures the latest world). kc_collect frees every code instance whose
 * range holds no live world, its linked objects in every context (modules
 * unloaded, kernel objects released), and every definition visible in no
 * live world. A long hot-reload session that calls it now and then (after a
 * batch of redefinitions, at a frame boundary, between REPL inputs) stays
 * bounded in memory. out may be NULL. Thread-safe; one collect runs at a
 * time.
 *
 * kc_collect runs while other threads define, undefine, pin, compile,
 * prepare, query and launch: what it chooses is first made unreachable,
 * then freed only after a grace period, once every thread that was inside
 * a kcache call at that moment has returned from it (a compile for an old
 * world, a launch running that code). What a thread still holds at the end
 * of a kc_collect waits for a later one (the counts in *out are what was
 * freed in this call, batches of earlier calls included; KC_ENOMEM when
 * there is no memory to choose anew, and then what earlier calls chose is
 * still freed and counted). One part depends
 * on the runtime: a cached launch (kc_launch, kc_launch_args and their _ex
 * forms when they find their code cached; every launch in checked mode is
 * not cached) takes no grace section unless the runtime guards launches
 * (kc_options.guard_launches, $KC_GUARD_LAUNCHES=1; the Python package
 * always does), which costs each cached launch a locked increment and a
 * release store (+86 instructions over a direct call with no arguments,
 * against +25 unguarded: bench/kc_bench, "guarded"). Without it, kc_collect
 * must not run while another thread is in a cached launch of code that a
 * redefinition made before the kc_collect ended (that code may be unloaded
 * under it); launches of code that is still current, compiles, definitions
 * and pins are safe either way. Artifact pointers from kc_kernel_code and
 * parameter names from kc_kernel_param of freed code instances become
 * invalid. */
kc_status kc_collect(kc_runtime *rt, kc_collect_info *out);

/* ----------------------------------------------- headers and source files */

/*
 * Headers: kc_define(rt, "util.h", text, &w) defines a header, whose name
 * is a relative path of letters, digits and "_+-./" with a '.' ("util.h",
 * "dsp/fir.cuh"; no "." or ".." parts). A definition (or another header)
 * that writes #include "util.h" gets the header as of the caller's world:
 * its text is inlined where it is included (between #line markers), so it
 * is part of the closure, of the translation unit and of the disk key, and
 * redefining or undefining it invalidates exactly the code whose closure
 * included it, directly or through another header. A header with
 * #pragma once is inlined once per translation unit; any other header at
 * each #include, as in C (a header that two definitions of one closure
 * include needs an include guard or #pragma once). #include <name> takes the
 * table's header if it has one, else a header on disk (below). A quoted
 * #include of a name the table lacks is refused when the kernel is
 * compiled (KC_ENOTFOUND: "'k' includes "x.h", which is not defined in
 * kcache ..."). A computed include (#include MACRO) is refused (KC_EINVAL).
 *
 * Headers on disk (#include <x.h> that the table lacks: system headers,
 * /usr/local/include, $CPATH, the -I directories of compile_options) are
 * part of what a compile depends on, like a name of the table. kcache
 * records every file the compile read: on the host backend the files the
 * compiler lists (cc -MD; tcc lists no header of a system directory, so
 * kcache runs it with -nostdinc and gives it those directories as -I:
 * $CPATH, $C_INCLUDE_PATH, then its own, in the order it searches them,
 * and without those two variables, so that it searches nothing unlisted);
 * on OpenCL and CUDA, whose compilers tell nothing, the files kcache
 * finds itself by following the #include lines (nested ones too, whatever
 * #if around them), each looked for in the working directory and then in
 * the -I directories of compile_options, in that order, where PoCL and
 * NVRTC look; there a path looked in and found empty is recorded too, so
 * a header created in an earlier directory later counts as a change. Each
 * file is recorded with its path, its size and content hash (XXH3) and
 * what stat said of it. Then:
 *  - a disk or remote cache entry is used only if every file it records is
 *    still the same here (one stat each; the file is read and hashed when
 *    stat differs, or when the file was modified within 2 s of being
 *    read); otherwise the lookup is a miss (kc_stats.disk_stale) and the
 *    compile writes over the entry;
 *  - in memory, each file is a name of the table whose definitions are
 *    the contents seen of it: a compile that reads a new content, or
 *    kc_refresh, makes a new world that ends exactly the code that read
 *    the old one (pinned worlds keep theirs). A launch does not look at
 *    the disk: after editing a header, call kc_refresh (`kcache watch`
 *    does, for the files it watches). A compile that read a file before a
 *    newer content of it was seen, or while it changed, serves the launch
 *    that compiled it only. A compile for a pinned world reads the disk as
 *    it is then (an old world's file content cannot be had again).
 * Not covered: the compiler itself and the compile options (they are in
 * the key: kc_runtime_backend's identity, compile_options), environment
 * variables the compiler reads other than through the files it then
 * reads, files the compiler reads that are not headers (PoCL's kernel
 * library, NVRTC's built-in headers), PoCL's POCL_EXTRA_BUILD_FLAGS, and on
 * the host backend a header created in a directory searched before the
 * one where a recorded header was found, or where none was found before
 * (__has_include): the compiler lists what it read, not where it looked
 * (ccache's direct mode has the same limit); -MMD or -MF in the compile
 * options replace kcache's own and shorten that list. There kcache reads
 * the files after the compile, and tells a change during it by comparing
 * them with what they were before it (for the files the kernel's last
 * compile in the runtime read), and by their stamps (and those of the
 * symbolic links on their paths) against the compile's start, read from
 * the clock that stamps files: in a kernel's first compile in a runtime,
 * a change on a file system whose stamps are coarser than 20 ms, or while
 * the wall clock is stepped back, is not seen. On OpenCL and CUDA
 * only -I and --include-path directories are followed (not -isystem,
 * -iquote, -idirafter, -include). A file that changes while it is
 * compiled, one larger than 64 MiB on the host backend, a header gone
 * when the host compiler's list is read, or an #include kcache cannot
 * follow (a computed one in a header on disk) makes the compile's files
 * unknown: its code runs the launch that compiled it and no other, is
 * never stored, and a failure is not remembered. On OpenCL and CUDA an
 * #include that finds a FIFO, a device, a directory or a file larger than
 * 64 MiB is refused before the compiler runs (KC_ECOMPILE, not
 * remembered).
 *
 * Source files: kc_define_file defines every top-level definition of one
 * source text (a .c, .cl or .cu file in the dialect) in one world. Each
 * function, kernel, type, constant and #define becomes the definition of
 * its name (a function's name, a typedef's name, a struct, union or enum
 * tag, a variable's name, a macro's name); prototypes are dropped (the
 * table orders definitions itself); comments between definitions are
 * dropped; the #include and #pragma lines of the file go before every
 * definition that follows them. Other directives between definitions
 * (#if, #ifdef ...) are refused with the line, as are two definitions of
 * one name. `file` names the file (any string, e.g. its path): loading the
 * same file again defines only what changed, so editing one helper of a
 * 2,000-line file recompiles only the kernels that reach it, and undefines,
 * in the same world, the names its last load defined that are gone.
 * Nothing changed: no new world. *changed (may be NULL) gets the number of
 * names defined, redefined or undefined; *new_world (may be NULL) the
 * world. On error nothing is defined. kcache reads no file: the caller
 * passes the text (the `kcache watch FILE` command reloads a file on
 * change). Thread-safe; concurrent loads of one file apply one after the
 * other.
 */
kc_status kc_define_file(kc_runtime *rt, const char *file, const char *text, size_t len, size_t *changed,
                         kc_world *new_world);

/* kc_define_file that also says which names the load changed: after the
 * load is in effect, with no kcache lock held, on_change(user, name, kind)
 * is called once per changed name (the file's names in file order, then
 * the names the last load defined that are gone), and may call kcache
 * (kc_kernel_create of a new kernel, say). name is valid during the call
 * only. Nothing is called when the load fails or changes nothing.
 * on_change NULL: exactly kc_define_file. */
typedef enum kc_change_kind {
  KC_CHANGE_DEFINED = 1, /* a name with no visible definition before */
  KC_CHANGE_REDEFINED = 2, /* a name whose text changed */
  KC_CHANGE_UNDEFINED = 3 /* a name the file's last load defined, now gone */
} kc_change_kind;
typedef void (*kc_change_fn)(void *user, const char *name, kc_change_kind kind);
kc_status kc_define_file_ex(kc_runtime *rt, const char *file, const char *text, size_t len,
                            kc_change_fn on_change, void *user, size_t *changed, kc_world *new_world);

/* ------------------------------------------- backend-native languages */

/*
 * Kernels as they are already written: OpenCL C for the OpenCL backend and
 * CUDA C++ for the CUDA backend, with no KC_ word in them. A definition (or
 * every definition of a file) carries a language tag:
 *   KC_LANG_DIALECT  kcache's dialect (KC_KERNEL, KC_GLOBAL, kc_global_id,
 *                    ...): what kc_define and kc_define_file take, on every
 *                    backend.
 *   KC_LANG_OPENCL   OpenCL C as PoCL and every OpenCL platform take it:
 *                    __kernel/kernel, __global/__local/__constant/__private
 *                    (and their bare spellings), __attribute__((...)) such as
 *                    reqd_work_group_size, #pragma OPENCL EXTENSION, vector
 *                    types (float2, float4 ...) and the built-ins
 *                    (get_global_id, barrier(CLK_LOCAL_MEM_FENCE), ...).
 *   KC_LANG_CUDA     CUDA C++ as NVRTC takes it: extern "C" __global__
 *                    kernels, __device__ helpers, __shared__,
 *                    __launch_bounds__, the built-ins (threadIdx, blockIdx,
 *                    __syncthreads, ...). A kernel is found by its name, so
 *                    an entry must be declared extern "C" (else C++ mangles
 *                    its name: its compile is refused, KC_EINVAL, saying
 *                    so), or be a template named by an instantiation:
 *                    kc_kernel_create(rt, "scale<float, 4>", ...) is a
 *                    name expression that NVRTC instantiates
 *                    (nvrtcAddNameExpression) and finds by its lowered
 *                    name (nvrtcGetLoweredName), each instantiation its
 *                    own specialization (two spellings of one, "f<int,2>"
 *                    and "f<int, 2>", are two; each is part of the disk
 *                    key). Its template arguments replace the template's
 *                    parameters in the kernel's parameter types (T a is a
 *                    float for scale<float, 4>). The lowered name travels
 *                    at the end of the artifact (kc_code_info.artifact:
 *                    the PTX or cubin, then "\0" name "\0" "KCLOWER1").
 *                    A name expression is an identifier, then <...> of
 *                    identifiers, numbers, spaces and ",:*&.+-()"; on
 *                    another language's kernel it is refused (KC_EINVAL).
 *                    A template kernel is named without a namespace: it
 *                    is a top-level definition. C++ in a file: see
 *                    kc_define_file_lang.
 * A native kernel is found by its name with kc_kernel_create and launched
 * like any other: its parameter list is read from its text (pointers are
 * buffers, __local pointers of OpenCL C local memory sizes
 * (KC_ARG_LOCAL_BYTES; CUDA kernels have no such parameters: their
 * __shared__ memory is declared in the body), the rest scalars whose
 * sizes the compiler reports; OpenCL image and sampler parameters,
 * image2d_t, sampler_t and the like, are not supported: the compile says
 * so with KC_EUNAVAILABLE, naming the parameter), and
 * arguments are checked as
 * for the dialect. The dialect's checks (KC_KERNEL, KC_GLOBAL on every
 * pointer) do not apply: an OpenCL entry must be declared __kernel (or
 * kernel), a CUDA entry __global__.
 *
 * A native definition compiles only on the backend of its language: on
 * another, its kernels' compiles and launches (and those of every kernel
 * whose closure reaches it) fail with KC_EUNAVAILABLE, "'k' is OpenCL C
 * (KC_LANG_OPENCL), which the host backend does not compile: ...". The
 * table itself is the same whatever the backend, so definitions may be
 * made on any runtime. A closure may mix a native definition with
 * dialect ones (a dialect helper called from an OpenCL kernel, say): the
 * dialect's prelude is then part of the translation unit; a closure of
 * native definitions only is compiled as written, with no prelude. In a
 * mixed unit the prelude's typedefs (int8_t ... uint64_t; in CUDA also
 * uint, ulong, intptr_t, ...) are kcache's own names (kc__t_int64_t),
 * spelled as the dialect's by macros that are in force only around the
 * dialect's definitions and #undef'd around the native ones: native code
 * may typedef those names itself, to any type, and sees only its own. A
 * native typedef of such a name defined as a definition of its own (a
 * file's `typedef ... uint32_t;`) is the closure's for both. A pointer to
 * the native type passed to a dialect helper that takes the dialect's type
 * must then name the same type (long vs long long differ in CUDA C++).
 *
 * Everything else holds as for the dialect: dependencies (every name the
 * text mentions), worlds, pins, file reloads, the disk and remote caches.
 * The language is part of a definition: the same text under another tag is
 * a new definition (a new world). The scanner knows each language's
 * built-ins (get_global_id, CLK_LOCAL_MEM_FENCE, float4, threadIdx,
 * __syncthreads, ...; every name starting with "__" in CUDA C++): a native
 * definition does not depend on each of those it mentions, unless the
 * table defines that name (then it is a dependency like any other);
 * instead it depends on the language's built-ins as a whole, so that a
 * later definition (or undefine) of any such name ends the code that
 * mentioned one (an over-approximation, never a miss).
 *
 * NAMES ARE GLOBAL, across files and languages: every piece of a file
 * (each function, type, constant and #define) is one table entry under
 * its name, and a name has one definition at a time, whichever file or
 * call made it last. A kernel that mentions a name reaches its definition
 * whatever language that is in, so an OpenCL kernel whose BLOCK_SIZE is
 * also a CUDA file's #define reaches the CUDA one, and its compile fails
 * with KC_EUNAVAILABLE naming the definition and its file ("kernel 'k'
 * reaches 'BLOCK_SIZE' (defined by file 'reduce.cu'), which is CUDA C++
 * ..."). One name, one meaning: give each language's macros and helpers
 * their own names, and define a header that kernels of one language share
 * with kc_define_lang in that language (or in the dialect, for every
 * backend).
 *
 * There is no detection by file name: kc_define_file reads .cl and .cu
 * files in the dialect, as it always has, so a file is native only when
 * the call says so.
 */
typedef enum kc_language { KC_LANG_DIALECT = 0, KC_LANG_OPENCL = 1, KC_LANG_CUDA = 2 } kc_language;

/* kc_define with a language: KC_LANG_DIALECT is kc_define. KC_EINVAL for
 * a value not listed above. */
kc_status kc_define_lang(kc_runtime *rt, const char *name, const char *source, kc_language lang,
                         kc_world *new_world);
/* kc_define_file_ex with a language for every definition of the file
 * (KC_LANG_DIALECT is kc_define_file_ex). Reloading the file under another
 * language redefines every name. In CUDA C++, an extern "C" { ... } block
 * at the top level is read through: each definition in it is filed in an
 * extern "C" { ... } block of its own (a #define as it is), so a static
 * helper and a __constant__/__device__ variable without an initializer
 * mean what they meant in the file. So are namespace blocks
 * (nested, unnamed, A::B, inline): each definition in one is filed under
 * its own name with its namespaces around it, and a use of N::f depends
 * on f and on the name N (an over-approximation). A name defined again in
 * the file (overloads, or one name in two namespaces) is one definition
 * of all its texts, so users of any of them depend on all; a member
 * function defined out of line (Acc::get() const, Box<T>::get) joins its
 * class, which must come before it; a top-level namespace alias
 * (namespace M = N;) is filed as M with namespace N {} before it. Refused
 * with KC_EINVAL and the line: an operator defined on its own, using
 * namespace/using N::f at the top level, a member of a class the file has
 * not defined before it, #include inside a namespace, a macro defined
 * twice. In OpenCL C and the dialect a name is defined once per file. */
kc_status kc_define_file_lang(kc_runtime *rt, const char *file, const char *text, size_t len,
                              kc_language lang, kc_change_fn on_change, void *user, size_t *changed,
                              kc_world *new_world);
/* "dialect", "opencl", "cuda"; NULL for another value. */
const char *kc_language_name(kc_language lang);

/* Looks at every file on disk that code valid in the latest world read
 * (headers on disk, above): one stat each, and a read when stat differs.
 * The files whose content changed (or appeared, or went) get their new
 * version in one new world, which ends exactly the code that read them.
 * *changed (may be NULL) gets the number of files that changed, *new_world
 * (may be NULL) the world (the current one if nothing changed).
 * Thread-safe; takes the definition lock only to read the list and to
 * apply the changes, not while it reads files. */
kc_status kc_refresh(kc_runtime *rt, size_t *changed, kc_world *new_world);

/* --------------------------------------------------------------- kernels */

/*
 * One dialect: whatever the backend, the core checks a kernel the same way
 * before any compiler runs, and refuses with the same message (KC_EINVAL,
 * at its first compile or launch): the entry must be declared KC_KERNEL
 * ("kernel 'k' is not declared KC_KERNEL: ..."), a KC_DEVICE helper cannot
 * be launched ("'h' is a KC_DEVICE helper, not a kernel: ..."), and every
 * pointer parameter must be KC_GLOBAL, or KC_LOCAL for local memory
 * ("kernel 'k': pointer parameter 'y' has no address space: ..."). So a kernel that runs on the host backend
 * compiles the same way for OpenCL and CUDA.
 */

/* A handle on a kernel entry plus specialization parameters, e.g. "T=float,N=4"
 * (a CUDA C++ template's entry: a name expression, "scale<float, 4>"; see
 * "backend-native languages")
 * (NULL or "" for none). Parameters are "KEY=VALUE" pairs separated by commas;
 * their order does not matter; each becomes `#define KEY VALUE` in the
 * compiled source. A key is an identifier not starting with KC_ or kc_ (the
 * dialect's); a value holds no newline, backslash, '=' or comment token
 * (slash-star, star-slash, slash-slash), which would rewrite what follows
 * it (KC_EINVAL). Handles are cheap; two handles with the same name and
 * parameters share compiled code. The name need not be defined yet. */
kc_status kc_kernel_create(kc_runtime *rt, const char *name, const char *params, kc_kernel **out);
/* Not thread-safe with launches through the same handle. */
void kc_kernel_destroy(kc_kernel *k);

/* Makes sure compiled code exists for the caller's current world (compiling
 * if needed) without launching. */
kc_status kc_kernel_compile(kc_kernel *k);

/* Prepares k without launching it: compiles it if no code serves the
 * caller's world (its pin, else the latest), then links it into ctx and
 * leaves it in the handle's launch cache, so that the next kc_launch of k on
 * ctx takes the cached path. ctx NULL: compile only. Thread-safe. Call it
 * before a launch that must not compile or link (e.g. one being captured
 * into a graph or stream). */
kc_status kc_kernel_prepare(kc_kernel *k, kc_context *ctx);

/* kc_kernel_prepare for n handles of one runtime at once (for a pinned
 * caller, its pinned world; else each kernel for the latest world as its
 * turn comes), compiled in
 * parallel on the runtime's compile pool: kc_options.compile_threads
 * threads, the caller included (else $KC_COMPILE_THREADS, else one per
 * core), started on first use. Returns when all n are done: KC_OK, or the
 * status of the first failing handle (by index) with a message that says
 * which and how many failed; the others are still prepared. Single flight
 * holds as for launches: a kernel that another thread (or process, through
 * the disk cache) is compiling is waited for, not compiled again, and a
 * launch from another thread meanwhile waits only for its own kernel.
 * Duplicate handles and handles sharing code are fine. Thread-safe. */
kc_status kc_prepare(kc_kernel *const *ks, uint32_t n, kc_context *ctx);

typedef struct kc_dim3 {
  uint32_t x, y, z;
} kc_dim3;

/* KC_ARG_PTR and KC_ARG_LOCAL: see "Using kcache inside an existing
 * program" below (raw device pointers; local memory sized per launch). */
typedef enum kc_arg_kind {
  KC_ARG_SCALAR = 1,
  KC_ARG_BUFFER = 2,
  KC_ARG_PTR = 3,
  KC_ARG_LOCAL = 4
} kc_arg_kind;

/* One kernel argument: a buffer, a by-value value of `size` bytes, a raw
 * device pointer (KC_ARG_PTR) or an amount of local memory (KC_ARG_LOCAL).
 *
 * By-value parameters may have any type the backend's compiler knows: a
 * scalar, a struct, union or typedef from a named definition, a vector type
 * (float2, int4, ...: native on OpenCL and CUDA; on the host backend the
 * 2- and 4-lane types are structs of x, y, z, w aligned to their size, with
 * no arithmetic), half where the backend has it (OpenCL with cl_khr_fp16,
 * the host backend with a C compiler that has _Float16). kcache asks the
 * compiler itself for each parameter type's size and alignment when it
 * compiles the kernel (a probe the backend appends to the source; stored
 * with the compiled code in the disk cache), so the rule is the same on
 * every backend: `size` must be the compiler's sizeof of the type, else the
 * launch fails with KC_EARGS and the same message on every backend ("kernel
 * 'k' argument 1 (P p) is a 24-byte value (alignment 8); 20 bytes were
 * given"). The bytes are passed as they are: lay the struct out on the
 * host as the kernel's compiler does (the same members in the same order;
 * kc_args_create keeps its copy at the type's alignment). */
typedef struct kc_arg {
  const void *ptr; /* kc_buffer* (BUFFER), the pointer itself (PTR), the scalar's bytes; NULL (LOCAL) */
  uint32_t size; /* the scalar's size in bytes; LOCAL: the bytes per group; else 0 */
  uint32_t kind; /* kc_arg_kind */
} kc_arg;

/* The argument macros are compound literals in C and the same aggregate
 * in C++ (which has no compound literals): each is an rvalue kc_arg. */
#ifdef __cplusplus
#define KC__ARG(ptr, size, kind) (kc_arg{(ptr), (size), (kind)})
#else
#define KC__ARG(ptr, size, kind) ((kc_arg){(ptr), (size), (kind)})
#endif
#define KC_ARG_BUF(b) KC__ARG((const void *)(b), 0u, KC_ARG_BUFFER)
#define KC_ARG_VAL(lvalue) KC__ARG((const void *)&(lvalue), (uint32_t)sizeof(lvalue), KC_ARG_SCALAR)
/* A raw device pointer: a CUdeviceptr, a host pointer, an OpenCL SVM pointer. */
#define KC_ARG_DEVPTR(p) KC__ARG((const void *)(uintptr_t)(p), 0u, KC_ARG_PTR)
/* `bytes` of local memory per group for a `KC_LOCAL T *` parameter (OpenCL). */
#define KC_ARG_LOCAL_BYTES(bytes) KC__ARG(NULL, (uint32_t)(bytes), KC_ARG_LOCAL)

#define KC_MAX_ARGS 32

/* Launches k on ctx with `grid` groups of `block` work items each (CUDA's
 * grid and block; OpenCL's global size is grid*block). Every dimension
 * must be at least 1 (KC_EINVAL). The number, kinds and scalar sizes of args must match the kernel's
 * parameters (KC_EARGS).
 *
 * Sizes the device cannot hold are refused, with a message that names the
 * limit: a group above the kernel's maximum or a dimension above the
 * device's (KC_EINVAL: OpenCL's CL_KERNEL_WORK_GROUP_SIZE and
 * CL_DEVICE_MAX_WORK_ITEM_SIZES, checked before the platform sees the
 * launch; CUDA's threads per block and block and grid dimensions, read
 * when the driver refuses it), and local or shared memory above what the
 * device has left beside the kernel's own (KC_EARGS: OpenCL's
 * CL_DEVICE_LOCAL_MEM_SIZE, checked before; CUDA's opt-in shared memory per
 * block). The host backend's limit is its own: shared_bytes (kc_launch_ex).
 *
 * The cached path (same context, same world, same generation as the handle's
 * previous launch there) takes no lock, allocates nothing and hashes nothing.
 * Launches are asynchronous on OpenCL and CUDA: kc_context_finish waits.
 * On the host backend kc_launch runs the kernel to completion (a launch on
 * a kc_stream runs on the stream's thread: see "Streams" below). */
kc_status kc_launch(kc_kernel *k, kc_context *ctx, const kc_dim3 *grid, const kc_dim3 *block,
                    const kc_arg *args, uint32_t nargs);

/* Arguments bound once, for launching one kernel on one context again and
 * again (OpenCL's set-args-once model). kc_args_create checks args against
 * the kernel's parameters in the caller's current world (compiling the
 * kernel if needed) and copies the scalars' values; buffers are held by
 * pointer (a buffer destroyed after it was bound makes kc_launch_args fail
 * with KC_EARGS, naming it, until kc_args_set binds another). kc_launch_args then checks
 * nothing per argument: its cached path checks that the code it reaches
 * has the parameters the arguments were checked against (a redefinition
 * that keeps them keeps the arguments valid; one that changes them makes
 * the launch fail with KC_EARGS, saying which argument no longer fits).
 * Launches resolve the caller's world exactly like kc_launch. A kernel
 * with a KC_LOCAL parameter (OpenCL) binds its size, KC_ARG_LOCAL_BYTES(n)
 * (kc_args_set changes it); such arguments launch with kc_launch_args_ex
 * only (kc_launch_args returns KC_EARGS saying so). Raw pointers
 * (KC_ARG_DEVPTR) are never bound: pass them to kc_launch_ex.
 *
 * Thread safety: kc_launch_args may run on any number of threads at once
 * with the same kc_args; kc_args_set and kc_args_destroy must not run
 * concurrently with any other use of the same kc_args. Destroying the
 * kernel handle destroys its bound arguments. After the context is
 * destroyed, launches return KC_EDESTROYED. */
typedef struct kc_args kc_args;
kc_status kc_args_create(kc_kernel *k, kc_context *ctx, const kc_arg *args, uint32_t nargs, kc_args **out);
/* Replaces argument `index`, checked like kc_args_create checks it. */
kc_status kc_args_set(kc_args *a, uint32_t index, kc_arg arg);
void kc_args_destroy(kc_args *a);
/* a is not const: a launch records in it the code it reached (its cache)
 * and counts fast-path hits. */
kc_status kc_launch_args(kc_args *a, const kc_dim3 *grid, const kc_dim3 *block);

/* Waits for every launch and copy queued on ctx: on its own queue and on
 * every live kc_stream of it (made or wrapped; OpenCL: each is a queue of
 * its own). */
kc_status kc_context_finish(kc_context *ctx);

/* ---------------------------------------------------------------- buffers */

/* A buffer destroyed by kc_buffer_destroy or with its context keeps its
 * handle's memory (like a context's): kc_buffer_read/write on it return
 * KC_EDESTROYED, kc_buffer_destroy does nothing more (KC_EDESTROYED in
 * kc_errmsg), kc_buffer_size gives 0 and a launch with it fails with
 * KC_EARGS, until the memory is reused by a later kc_buffer_create on the
 * same context memory. */
kc_status kc_buffer_create(kc_context *ctx, size_t size, kc_buffer **out);
void kc_buffer_destroy(kc_buffer *buf);
size_t kc_buffer_size(const kc_buffer *buf);
/* Blocking copies; offset+size must lie within the buffer (KC_EINVAL). */
kc_status kc_buffer_write(kc_buffer *buf, size_t offset, const void *src, size_t size);
kc_status kc_buffer_read(kc_buffer *buf, size_t offset, void *dst, size_t size);

/*
 * Checked mode (kc_options.checked, or KC_CHECKED=1; off by default): every
 * buffer gets a guard zone of KC_CHECKED_GUARD bytes before and after it,
 * filled with a pattern, and kcache checks the pattern
 *   - after each launch on the host backend, for the launch's buffer
 *     arguments: the launch returns the error (a launch on a kc_stream
 *     waits for its stream first: checked mode makes it synchronous);
 *   - in kc_context_finish on every backend, for every buffer of the
 *     context: the finish returns the error.
 * A kernel that wrote outside a buffer then fails with KC_ELAUNCH and a
 * message naming the kernel, the argument and the offsets written, e.g.
 * "checked mode: kernel 'k' argument 0 (KC_GLOBAL float *y) wrote outside
 * its buffer of 64 bytes, at offsets 64..255 (after its end)", instead of
 * corrupting memory; the guard is restored, so the next check reports only
 * new writes. A write further than the guard zone is not caught. A view
 * (kc_buffer_view) has its buffer's guard zones: a write through it past
 * that buffer's end is caught like the buffer's own (the message names the
 * view: "(KC_GLOBAL float *y, a view of 128 bytes at offset 512)"); one
 * past the view's end that stays inside the buffer is not. In checked
 * mode every launch takes the slow path (no launch cache is filled); with it
 * off, launches cost what they always did.
 */
#define KC_CHECKED_GUARD 4096

/* ------------------------------------- using kcache inside an existing program */

/*
 * A program that already owns the device (an ML framework, a language
 * runtime, a renderer) hands kcache its own context, queues and memory;
 * kcache launches into them and never destroys or frees what it did not
 * create. Native handles pass as `void *`: a cl_context, cl_device_id,
 * cl_command_queue or cl_mem as it is; a CUcontext or CUstream as it is; a
 * CUdeviceptr as (void *)(uintptr_t)ptr; on the host backend a plain
 * pointer (and no context or stream handle: NULL).
 *
 * Streams. A kc_stream is an in-order queue of one context: made by kcache
 * (an OpenCL in-order command queue, a CUDA stream created with
 * CU_STREAM_NON_BLOCKING), or wrapping the caller's (an in-order
 * cl_command_queue of the context's cl_context and device: an out-of-order
 * one is refused with KC_EINVAL; a CUstream of its CUcontext). A
 * launch names its stream in kc_launch_config; NULL is the context's own
 * queue, where kc_launch goes (OpenCL: kcache's in-order queue; CUDA: the
 * legacy default stream; host: the calling thread, which runs a launch to
 * completion before it returns).
 * kc_buffer_read/write use the context's own queue: after launches on
 * another stream, kc_stream_sync (or kc_stream_wait) first.
 *
 * The host backend's streams. kc_stream_create makes a queue whose
 * launches run asynchronously and in order on a thread of its own (started
 * at its first launch, ended once it has waited $KC_HOST_STREAM_IDLE
 * seconds, 5 by default, for another, and started again at the next one;
 * before it sleeps, and before kc_stream_sync or kc_stream_destroy sleeps,
 * each watches for up to $KC_HOST_STREAM_SPIN_US microseconds, 20 by
 * default, 0 for none;
 * a launch's groups still spread over the worker pool): kc_launch_ex and
 * kc_launch_args_ex on it check the launch, copy its arguments' values (a
 * buffer's pointer, a scalar's bytes: a later kc_args_set or change of a
 * scalar does not reach it) and return. A failure on the stream's thread
 * (items of a group that disagree at a barrier, a group larger than a
 * kernel whose barriers run as fibers takes, memory for a fiber or a copy:
 * what is found when the kernel runs; a NULL or empty grid or block is
 * refused by the launch itself) comes back, once, from the next kc_stream_sync or kc_context_finish, with its
 * message ("kernel 'k', launched on a stream, failed: ..."); the launches
 * after it still run (a failure not synced before kc_stream_destroy is
 * logged as a warning). kc_buffer_destroy of a buffer kcache made waits
 * for every launch queued before it on the host's streams, and unloading
 * code (a context reset or destroyed, kc_collect, a relink after
 * kc_define) for the launches of that code queued before it, each under
 * the context's lock; memory the caller owns (kc_buffer_wrap,
 * kc_buffer_host) must outlive them. A kernel that waits for the host to
 * do something must not need that lock to be done. kc_stream_wrap takes
 * only NULL there: the context's own queue. A child of fork() does not run
 * what its parent had queued (its streams start empty); sync the streams
 * before fork() for a defined state. Where no thread can start, a stream
 * runs its launches in the caller, still in order.
 *
 * Adopted contexts. kc_context_wrap makes a kc_context on the caller's
 * native context: kcache links its modules and kernel objects into it and
 * keeps only its own queue there; kc_context_reset drops only what kcache
 * loaded; kc_context_destroy releases kcache's objects (and its reference:
 * clRetainContext/clReleaseContext) and never destroys the native context.
 * Ids, worlds and relinking work exactly as for kc_context_create.
 *
 * Multi-device. Code is compiled once per specialization and world (for
 * the runtime's device 0: OpenCL's chosen device, or CUDA's lowest
 * architecture, as PTX when the devices differ) and linked per context: a
 * context on a second device of the same backend, made by kc_context_create
 * or kc_context_wrap (e.g. an OpenCL sub-device), links the same artifact
 * (OpenCL rebuilds it from source when the device refuses the binary),
 * which kc_stats shows as one compile and one link per context. OpenCL:
 * the contexts kcache makes on one device share one cl_context (each with
 * its own queue, buffers and kernel objects), where a link reuses the
 * program the compile built instead of building the binary again.
 *
 * CUDA's current context. kcache leaves the calling thread's current
 * CUcontext as it found it: every kcache call that talks to the driver for
 * a context makes that context current only for its own driver calls and
 * then restores the caller's (cuCtxGetCurrent/cuCtxSetCurrent), and a
 * launch compares the current context with its own (one cuCtxGetCurrent,
 * no thread-local cache), so a framework that switches devices
 * (cudaSetDevice, cuCtxPushCurrent) between kcache calls is safe both
 * ways. When the caller's current context is the kcache context's own,
 * nothing is switched; otherwise (another context current, or none) each
 * launch makes its own current and restores the caller's (two
 * cuCtxSetCurrent calls more: bench/kc_bench_cuda's switch_ns). A program
 * that launches from one thread on one device may make
 * kc_context_native(ctx) current itself for the direct path. kcache leaves
 * no context current for the caller's own driver calls either: a program
 * that calls the driver API directly makes its context current itself.
 *
 * Capture safety (CUDA graphs). When a launch's stream is capturing
 * (cuStreamIsCapturing: the kc_stream of kc_launch_ex, or the context's
 * default stream for kc_launch, kc_launch_args and kc_launch_ex without a
 * stream; a default stream that cannot be queried because another stream
 * is in a global-mode capture counts as capturing) and the kernel is not
 * yet linked in that context for the caller's world, kcache compiles and
 * loads nothing and returns KC_EBUSY ("... prepare the kernel first:
 * kc_kernel_prepare"); a launch whose code is linked is recorded into the
 * graph like any other. NOT capture-safe (they synchronize the CUDA
 * context, cuCtxSynchronize, or load or unload modules, which breaks a
 * capture in progress anywhere in the process in the global mode; on an
 * adopted context the synchronization is the framework's whole context):
 * kc_context_finish, kc_context_reset, kc_context_destroy, kc_collect,
 * a relink after kc_define (the unlink of the old code), kc_args_create,
 * kc_kernel_prepare, kc_buffer_create/destroy/read/write, kc_stream_create
 * and kc_stream_destroy. Do these before or after a capture. kcache sees
 * only the launch's own stream: a global-mode capture on another
 * non-blocking stream is invisible to it, and a first launch (compile and
 * module load) then breaks that capture: prepare kernels first
 * (kc_kernel_prepare) when captures run elsewhere in the process.
 *
 * Checked mode (above): wrapped buffers have no guard zones and are not
 * checked; a view of a buffer kcache made is checked as that buffer.
 * Launches through kc_launch_ex are checked like kc_launch's (after each
 * one on the host backend); those through kc_launch_args_ex are checked at
 * kc_context_finish (on the host backend too), where the message may not
 * name their kernel.
 */
typedef struct kc_stream kc_stream;

/* A new in-order stream on ctx. Not thread-safe with kc_context_destroy. */
kc_status kc_stream_create(kc_context *ctx, kc_stream **out);
/* Wraps the caller's native queue (cl_command_queue of ctx's cl_context and
 * device; CUstream of ctx's CUcontext, or NULL for the legacy default
 * stream; host: NULL, the context's own queue). KC_EINVAL when it belongs
 * elsewhere. The native
 * queue is never destroyed by kcache (OpenCL: retained, then released). */
kc_status kc_stream_wrap(kc_context *ctx, void *native, kc_stream **out);
/* Destroys a stream (after what it queued is done); a wrapped native
 * stays. Streams are type-stable like buffers: a destroyed one (by
 * kc_stream_destroy or with its context) gives KC_EDESTROYED, and a second
 * kc_stream_destroy does nothing, until its memory is reused by a later
 * stream of the same context; kc_runtime_destroy frees them. Not
 * thread-safe with launches on s, nor with kc_stream_sync or
 * kc_stream_wait of s. */
void kc_stream_destroy(kc_stream *s);
/* Waits until everything queued on s is done. */
kc_status kc_stream_sync(kc_stream *s);
/* Work queued on s after this call starts after everything queued on
 * `other` before it (an OpenCL marker and barrier, a CUDA event, a wait in
 * the host stream's queue; where s is the context's own queue on the host,
 * the call itself waits); both of the same context. */
kc_status kc_stream_wait(kc_stream *s, kc_stream *other);
/* The native queue (cl_command_queue, CUstream; NULL on the host, whose
 * queues are kcache's own). NULL
 * also for the wrapped CUDA legacy default stream and for a destroyed or
 * NULL stream: kc_stream_get_native tells those apart. */
void *kc_stream_native(const kc_stream *s);
/* The native queue in *native (as kc_stream_native); KC_EDESTROYED for a
 * destroyed stream, KC_EINVAL for NULL arguments (kc_errmsg says which).
 * KC_OK with *native NULL is the host's stream or CUDA's legacy stream. */
kc_status kc_stream_get_native(const kc_stream *s, void **native);

/* A kc_context on the caller's native context: OpenCL a cl_context and a
 * cl_device_id in it (or a sub-device of one; NULL: the context's only
 * device); CUDA a CUcontext (a primary context the caller retained, or one
 * it created) and device NULL; host NULL and NULL. KC_EINVAL saying why for
 * anything else. Never destroyed by kcache (see above). */
kc_status kc_context_wrap(kc_runtime *rt, void *native_ctx, void *native_device, kc_context **out);
/* The native context (cl_context, CUcontext; NULL on the host). OpenCL:
 * the kc_contexts kcache made on one device return the same cl_context. */
void *kc_context_native(const kc_context *ctx);

/* Wraps the caller's memory as a kc_buffer of `size` bytes: a cl_mem of
 * ctx's cl_context (at least size bytes; retained, then released), a
 * CUdeviceptr, a host pointer. Never freed by kcache; kc_buffer_destroy
 * forgets it. */
kc_status kc_buffer_wrap(kc_context *ctx, void *native, size_t size, kc_buffer **out);
/* The caller's host memory (size bytes at ptr) as a buffer that kernels use
 * in place, without a copy, where the device can: the pointer itself on the
 * host backend; on an OpenCL device that shares the host's memory
 * (CL_DEVICE_HOST_UNIFIED_MEMORY: a CPU device such as PoCL's) a cl_mem made
 * with CL_MEM_USE_HOST_PTR. KC_EUNAVAILABLE, saying why, where the device
 * cannot see host memory (CUDA; an OpenCL GPU with memory of its own):
 * copy with kc_buffer_write and kc_buffer_read there. The memory stays the
 * caller's and must outlive the buffer and every launch that uses it
 * (kc_buffer_destroy does not wait for them, nor free the memory). Fill it
 * before this call; to change it between launches, write through
 * kc_buffer_write, or make a new buffer (OpenCL may keep a copy). A
 * kc_buffer_read of the buffer into that same memory (ptr + offset) is the
 * synchronization: it returns once the launches before it on the
 * context's own queue are done, with what they wrote in the memory; after
 * launches on a kc_stream, kc_stream_sync that stream first. */
kc_status kc_buffer_host(kc_context *ctx, void *ptr, size_t size, kc_buffer **out);
/* A buffer for bytes [offset, offset+size) of buf, as users slice tensors:
 * an OpenCL sub-buffer (the offset must be a multiple of the device's
 * CL_DEVICE_MEM_BASE_ADDR_ALIGN, else KC_EINVAL saying so), a pointer plus
 * offset on CUDA and the host. It is a kc_buffer like any other (a launch
 * argument, read, write); destroying buf destroys its views. */
kc_status kc_buffer_view(kc_buffer *buf, size_t offset, size_t size, kc_buffer **out);
/* The native handle: cl_mem, (void *)(uintptr_t)CUdeviceptr, host pointer
 * (a view's: its sub-buffer, or the pointer plus its offset). NULL for a
 * destroyed buffer. */
void *kc_buffer_native(const kc_buffer *buf);

/*
 * Arguments beyond buffers and scalars (kc_launch_ex only: kc_launch and
 * bound arguments take buffers and scalars, and say so; bound arguments
 * also take KC_ARG_LOCAL_BYTES, for kc_launch_args_ex):
 *  - KC_ARG_DEVPTR(p) for a pointer parameter: a CUdeviceptr (CUDA), a
 *    plain pointer (host), an SVM pointer (OpenCL 2.0 devices with SVM;
 *    elsewhere KC_EARGS says why). kcache cannot check what it points to.
 *  - KC_ARG_LOCAL_BYTES(n) for a `KC_LOCAL T *` parameter (OpenCL):
 *    n bytes of local memory per group, sized at each launch. kcache knows
 *    which parameters are KC_LOCAL from clGetKernelArgInfo: on a platform
 *    that keeps no argument info every pointer parameter is a buffer to
 *    kcache, and KC_ARG_LOCAL_BYTES is refused saying so.
 */

/* Launch flags. */
#define KC_LAUNCH_COOPERATIVE 1u /* CUDA: a cooperative launch (grid-wide sync) */

/* How a kc_launch_ex launches (grows at its end, like kc_options: see
 * "Struct sizes"; initialize it with kc_launch_config_init). */
typedef struct kc_launch_config {
  size_t size; /* sizeof(kc_launch_config) of the caller; kc_launch_config_init sets it */
  kc_dim3 grid, block; /* as kc_launch's (init: 1x1x1 each) */
  kc_stream *stream; /* NULL: the context's own queue (kc_launch's) */
  /* Dynamic shared memory per block: CUDA's sharedMemBytes (`extern
   * __shared__`; the function's attribute is raised to it as needed, so
   * up to the device's opt-in limit less the kernel's static __shared__), the host
   * backend's per-group scratch area (kc_scratch() in the kernel). OpenCL
   * sizes local memory per parameter instead (KC_ARG_LOCAL_BYTES): nonzero
   * there is KC_EINVAL. */
  uint32_t shared_bytes;
  uint32_t flags; /* KC_LAUNCH_* */
  /* CUDA thread-block clusters (sm_90+): blocks per cluster; {0,0,0}: none. */
  kc_dim3 cluster;
} kc_launch_config;

/* Sets *cfg to the defaults (grid and block {1,1,1}, the rest zero, and
 * its size): call it through
 * kc_launch_config_init, which passes the caller's sizeof, so that a
 * program built against an older, smaller kc_launch_config keeps working
 * ("Struct sizes" above); a newer program's larger one gets zeros past
 * this library's fields. KC_EINVAL for a NULL cfg, or a size 0 or smaller
 * than the oldest layout. */
kc_status kc_launch_config_init_size(kc_launch_config *cfg, size_t size);
#define kc_launch_config_init(cfg) kc_launch_config_init_size((cfg), sizeof(kc_launch_config))

/* kc_launch with a configuration: the same cached path (no lock, no
 * allocation), the same checks, plus the configuration's (a stream of ctx,
 * features the backend or device lacks: KC_EINVAL or KC_EUNAVAILABLE with
 * why). Five arguments, so it reaches the backend with a tail call. */
kc_status kc_launch_ex(kc_kernel *k, kc_context *ctx, const kc_launch_config *cfg, const kc_arg *args,
                       uint32_t nargs);
/* Bound arguments launched with a configuration. */
kc_status kc_launch_args_ex(kc_args *a, const kc_launch_config *cfg);

/* ------------------------------------------------------------- statistics */

typedef struct kc_stats {
  size_t size; /* set by kc_stats_get: the bytes it filled */
  uint64_t compiles; /* backend compiles that succeeded */
  uint64_t compile_failures;
  uint64_t links; /* code instances loaded into a context */
  uint64_t fast_hits; /* launches served by a handle's (or bound arguments') cache */
  uint64_t slow_lookups; /* launches that took the slow path */
  uint64_t invalidations; /* code instances whose range was clipped */
  uint64_t defines; /* kc_define/kc_undefine calls that made a world */
  uint64_t code_instances; /* code instances alive */
  kc_world world; /* latest world */
  uint64_t compile_ns; /* total time spent in backend compiles */
  uint64_t definitions; /* definitions kept (visible in some world not yet collected) */
  uint64_t collected; /* code instances freed by kc_collect */
  /* The disk cache (all 0 when it is off). It is asked only when no code
   * instance in memory serves the world, so a disk hit is a compile saved. */
  uint64_t disk_hits; /* code instances loaded from disk instead of compiled */
  uint64_t disk_misses; /* lookups that found no usable entry (a compile followed) */
  uint64_t disk_writes; /* entries written */
  uint64_t disk_evictions; /* entries this runtime evicted to keep the size bound */
  uint64_t disk_repairs; /* damaged or unloadable entries found (removed, recompiled; in a store
                          * this process cannot change, counted at each look that reads one) */
  uint64_t disk_write_failures; /* failed writes; the first makes the cache read-only for rt */
  uint64_t disk_lock_timeouts; /* waits for another process's compile that gave up */
  /* The remote tier (all 0 when it is off). It is asked only after a disk
   * miss, so a remote hit is a compile saved (and a disk miss). */
  uint64_t remote_lookups; /* lookups that went to the server (hits + misses + lookup errors) */
  uint64_t remote_hits; /* code instances loaded from it (then written to disk) */
  uint64_t remote_misses; /* lookups that found no usable entry (a compile followed) */
  uint64_t remote_rejects; /* values found but not trusted: damaged, foreign, bad MAC */
  uint64_t remote_uploads; /* entries uploaded */
  uint64_t remote_errors; /* failed or timed-out connects and commands */
  uint64_t remote_skips; /* lookups and uploads not tried: breaker open, queue full */
  uint64_t remote_lock_waits; /* lookups that waited for another machine's compile */
  uint64_t remote_lookup_ns; /* total time of the lookups (such waits included) */
  /* Program builds the backend ran (OpenCL: clBuildProgram calls, from
   * source in a compile or from a binary in a link; 0 on backends that do
   * not count them; a compile helper's builds included). A compile and
   * the first link into a context kcache made on the compile's device
   * build once, unless the compile ran in a helper (then the link builds
   * its binary). */
  uint64_t backend_builds;
  /* Files outside the table that compiles read (headers on disk: see
   * kc_refresh). */
  uint64_t disk_stale; /* disk and remote entries passed over: a file they were compiled from changed */
  uint64_t files_tracked; /* files (and paths looked in and found empty) that compiled code read */
  uint64_t files_changed; /* new contents seen of them (by kc_refresh, or by a compile that read one) */
  /* 1 when this runtime writes nothing to disk: the disk cache is off or
   * could not be used, or a write failed for the whole store (a full or
   * read-only disk; the log says why); 0 while it writes (kc_cache_writable). */
  uint64_t disk_read_only;
  /* The remote tier's lookups by outcome (0.3; remote_errors and
   * remote_skips above count uploads too). Every lookup asked of the tier
   * ends one way: remote_lookups = remote_hits + remote_misses +
   * remote_lookup_errors, and a lookup not tried is one of
   * remote_lookup_skips (the breaker open), so the lookups asked, after a
   * disk miss each, are remote_lookups + remote_lookup_skips. */
  uint64_t remote_lookup_errors; /* lookups that failed: no connection, an error or a timeout */
  uint64_t remote_lookup_skips; /* lookups not tried: the breaker open after failures in a row */
} kc_stats;

/* A snapshot of the runtime's counters (fast_hits: exact when launches in
 * each context come from one thread at a time, otherwise a lower bound;
 * it is the one word a cached launch writes, so threads launching into one
 * context at once share its cache line, and are faster in a context each),
 * taken without locks at a cost independent of the number of kernel
 * handles (it sums one counter per context), written
 * into the first `size` bytes of *out (see "Struct sizes" above); out->size
 * gets the number of bytes filled. A NULL rt fills zeros and returns
 * KC_EINVAL. Call it through kc_stats_get. */
kc_status kc_stats_get_size(kc_runtime *rt, kc_stats *out, size_t size);
#define kc_stats_get(rt, out) kc_stats_get_size((rt), (out), sizeof(kc_stats))

/* ---------------------------------------------------------- introspection */

/* The translation unit that compiled (or would compile) k at the caller's
 * current world: prelude, parameters, closure in dependency order. The
 * returned string is allocated with the runtime's allocator; free it with
 * kc_free(rt, s). */
kc_status kc_kernel_source(kc_kernel *k, char **out);

typedef struct kc_code_info {
  kc_world min_world, max_world; /* KC_WORLD_FOREVER: still valid */
  uint64_t id; /* code instance id, never reused */
  /* host: an ELF64 x86-64 relocatable object (cc -c -fPIC) that kcache's
   * own loader loads (its kc__it_off must point at the work-item state
   * before anything else runs it); OpenCL: the program binary; CUDA: a
   * cubin, or PTX with its NUL (KC_CUDA_FORCE_PTX, or no cubin for the
   * device); a template's instantiation (a name expression) has its
   * lowered name after them: a NUL, the name, a NUL and "KCLOWER1" */
  const void *artifact;
  size_t artifact_size;
  uint64_t compile_ns;
} kc_code_info;

/* Information about the code instance valid at the caller's current world,
 * compiling it if needed. The artifact pointer stays valid until that code
 * is freed: by kc_runtime_destroy, or by a kc_collect after a redefinition
 * made it old (see kc_collect). */
kc_status kc_kernel_code(kc_kernel *k, kc_code_info *out);

/* A kernel's parameters, as its definition declares them at the caller's
 * current world (compiling it if needed, like kc_kernel_code), so that a
 * binding (Python, a REPL) can convert its values to the parameters' C
 * types. kc_param_info grows at its end like kc_stats (see "Struct sizes"):
 * kc_kernel_param writes the first `size` bytes and sets out->size to the
 * bytes filled; a size below the fields up to `scalar` is KC_EINVAL. The
 * strings stay valid as long as the code instance (until kc_collect frees
 * it or the runtime is destroyed). */
typedef enum kc_scalar_class {
  KC_SCALAR_NONE = 0, /* a buffer */
  KC_SCALAR_SINT, /* a signed integer: char, short, int, long, int32_t, ptrdiff_t ... */
  KC_SCALAR_UINT, /* an unsigned integer (bool, size_t, uchar ... too) */
  KC_SCALAR_FLOAT, /* half, float, double */
  KC_SCALAR_OTHER /* a vector (float4) or a type kcache does not know: raw bytes */
} kc_scalar_class;

typedef struct kc_param_info {
  size_t size; /* set by kc_kernel_param: the bytes it filled */
  const char *name; /* "n" */
  const char *type; /* the declaration without the name: "KC_GLOBAL float *", "T" */
  const char *ctype; /* the type after the specialization parameters and plain
                      * typedefs of the code, qualifiers dropped: "float" for
                      * "const T" with T=float or for `typedef float real;` ("" for buffers) */
  uint32_t kind; /* kc_arg_kind: KC_ARG_BUFFER for a pointer (a buffer or, with
                  * kc_launch_ex, KC_ARG_PTR), KC_ARG_LOCAL for an OpenCL KC_LOCAL
                  * pointer (its size per launch), else KC_ARG_SCALAR */
  uint32_t arg_size; /* the scalar's size in bytes (kc_arg.size), as the code
                      * was compiled (the parameter probe's for structs and
                      * typedefs); 0 for buffers and for a size nobody could tell */
  uint32_t scalar; /* kc_scalar_class */
} kc_param_info;

/* The number of k's parameters at the caller's current world. */
kc_status kc_kernel_param_count(kc_kernel *k, uint32_t *count);
/* Parameter `index` (KC_EINVAL past the count). Call it through kc_kernel_param. */
kc_status kc_kernel_param_size(kc_kernel *k, uint32_t index, kc_param_info *out, size_t size);
#define kc_kernel_param(k, index, out) kc_kernel_param_size((k), (index), (out), sizeof(kc_param_info))

/* Frees memory returned by kc_kernel_source. */
void kc_free(kc_runtime *rt, void *p);

/* ------------------------------------------------------------- disk cache */

/*
 * Compiled code also goes to a persistent store on disk, shared by every
 * thread and process that uses the same directory, so that a new process
 * does not compile again what was compiled before.
 *
 * Where: kc_options.cache_dir, else $KC_CACHE_DIR, else $XDG_CACHE_HOME/kcache,
 * else $HOME/.cache/kcache. Off: KC_CACHE_DISABLE=1 (any value but "" and
 * "0") or kc_options.cache_disable; the environment variable wins over
 * cache_dir.
 *
 * What: an entry is found by a 128-bit hash (XXH3-128) of everything that
 * changes the compiled output: the text of every definition in the kernel's
 * closure (by name, in name order), the specialization parameters, the
 * entry name, the backend and its compiler and device identity (compiler
 * path and version, OpenCL platform, device and driver, NVRTC version and
 * architecture), the compile options, the generated translation unit, and
 * the store's format and kcache's version. World numbers never enter it.
 *
 * When: only when no code instance in memory serves the caller's world.
 * A hit creates the code instance without running the compiler; a stored
 * artifact is used only after the backend has loaded it once. A miss
 * compiles and writes the entry (temp file, fsync, rename).
 *
 * Many processes: while one process compiles a kernel, the others that need
 * the same kernel wait (a lock per entry, released by the operating system
 * if the holder dies) and then read what it wrote; a waiter gives up after
 * kc_options.cache_lock_timeout_ms, else $KC_CACHE_LOCK_TIMEOUT seconds,
 * else 60 s, and compiles itself.
 *
 * Size: kc_options.cache_max_size, else $KC_CACHE_MAXSIZE ("500M", "2G", or
 * bytes), else max_size in the store's own kcache.conf (`kcache -M SIZE`
 * writes it), else 1 GiB, kept approximately: the thread whose write takes the
 * store past the bound evicts the least recently used entries towards 90%
 * of it, at most 32 per write (the next write past the bound goes on), so
 * the store exceeds its bound by at most what is written between two such
 * writes, or while another thread or process is evicting. It finds them
 * through the store's index (a summary, then the index of the buckets it
 * evicts from), not by listing every entry. A cached launch never evicts.
 *
 * Failures are never the caller's: a damaged entry (truncated, corrupted,
 * another format, another key) or one the backend refuses to load is a
 * miss: it is removed, compiled again and written again (disk_repairs). A
 * directory that cannot be created or written (read-only, full, no
 * permission) leaves the runtime with memory only and one warning in its
 * log (stderr unless kc_options.log; see "log"); entries that can be read
 * are still used. What someone else planted at one of the store's paths
 * (a FIFO, a socket, a device, a directory or a symbolic link where kcache
 * expects its own file, a link or a file where a bucket directory belongs)
 * is never opened for reading nor followed: no open blocks, the entry is a
 * miss, and a write that finds such a thing fails for that entry only
 * (disk_write_failures, one warning); an empty directory at an entry's
 * path is removed and the entry written.
 *
 * The `kcache` command lists, shows, verifies, explains and trims a store.
 */

/*
 * Security: kcache runs what its store holds (a host entry is a shared
 * object loaded into the process; an OpenCL or CUDA entry is device code),
 * and checksums catch damage, not an attacker. Whoever can write to the
 * store can make the process run their code, so kcache lets only these
 * people write to it:
 *
 *  - Private store (the default): the user and root. The store's
 *    directories are created 0700 and its files 0600, whatever the umask.
 *    Before a store is read, its root directory and the version directory
 *    in it (and the version directory's locks and tmp directories, where
 *    the per-key lock files and the entries being written are) must be
 *    owned by the user (or root) and writable by nobody else;
 *    a root with the sticky bit (like /tmp) may be writable by others,
 *    because they cannot rename or remove the version directory. Otherwise
 *    the store is not used: memory only, and one warning that says why and
 *    how to fix it (chmod 700 DIR, chown). Each entry file and its bucket
 *    directory are checked the same way when the entry is read: one owned
 *    by another user or writable by group or others is never read; it is
 *    damage (disk_repairs), removed, and the kernel is compiled instead.
 *
 *  - Shared store (kc_options.cache_shared, or $KC_CACHE_SHARED=1): also
 *    the members of the root directory's group. Directories are created
 *    2770 (with the group of the directory they are made in) and files
 *    0660; nothing may be writable by others, a group-writable directory
 *    must be of a group the user is in, and the root must be owned by the
 *    user, root or a member of its group. Without a key, the runtime warns
 *    once that every member of the group is trusted.
 *
 *  - With $KC_CACHE_KEY (either mode): only the holders of the secret.
 *    Every entry file ends with an HMAC-SHA256 tag (the remote tier's
 *    framing: "KCMAC256" and the MAC, under a key derived from the secret
 *    for the disk store alone); an entry without one (written without the
 *    key) or whose tag does not verify (another key, or altered) is
 *    rejected like a damaged one. Needs libcrypto (opened with dlopen); a
 *    key that cannot be used leaves the runtime with memory only and one
 *    warning.
 *
 * The directories above the store's root are not checked: they should be
 * ones that only the user (or root) can change. A process run as root does
 * not use a store owned by another user. `kcache verify` reports entries
 * whose owner, mode or tag is wrong. For the remote tier see
 * "Authentication" below: without KC_REMOTE_KEY, whoever can write to the
 * server can make clients run code.
 */

/* The directory of rt's disk cache, or NULL when it has none (off, or the
 * directory could not be used). Valid as long as rt. */
const char *kc_cache_dir(const kc_runtime *rt);
/* 1 if rt still writes to its disk cache; 0 if it has none or only reads
 * it (after a failed write). */
int kc_cache_writable(const kc_runtime *rt);

/* ------------------------------------------------------------ remote tier */

/*
 * Behind the disk cache, a Redis server can be shared by many machines, so
 * that a fleet that starts at once compiles each kernel once in total, not
 * once per machine.
 *
 * Where: kc_options.remote_url, else $KC_REMOTE, as
 * redis://[[user]:password@]host[:port][/db] (port 6379, database 0 by
 * default; user and password %-encoded; a user needs Redis 6 ACLs), or
 * rediss://... for TLS. The tier sits behind the disk cache: without one
 * (KC_CACHE_DISABLE, no usable directory) it is off too.
 *
 * TLS (rediss://): kcache's own connection through OpenSSL's libssl
 * (opened with dlopen; hiredis 0.14 has no TLS and only parses the
 * replies), TLS 1.2 or later. The server's certificate is verified, always:
 * it must chain to a CA of kc_options.remote_tls_ca, else
 * $KC_REMOTE_TLS_CA (a PEM file or a hashed directory), else the system's,
 * and carry the server's name: kc_options.remote_tls_server_name, else
 * $KC_REMOTE_TLS_SERVER_NAME, else the URL's host (an address is checked
 * against the certificate's IP entries; a name is also sent as SNI). A
 * client certificate for servers that require one: remote_tls_cert and
 * remote_tls_key, else $KC_REMOTE_TLS_CERT and $KC_REMOTE_TLS_KEY (the key
 * defaults to the certificate's file). The handshake is part of the
 * connect deadline (remote_timeout_ms) and reads and writes keep the same
 * deadlines as without TLS. A server whose certificate is refused
 * (expired, another name, no trusted CA) or that refuses the client is a
 * failure of the tier, like a refused connection: the launch compiles, the
 * breaker counts it, and the warning names the reason. A CA, certificate
 * or key that cannot be used, a TLS setting with a redis:// URL, or no
 * libssl turns the tier off with one warning.
 *
 * Redis Cluster: redis+cluster://[[user]:password@]host[:port][,host[:port]...]
 * (rediss+cluster:// over TLS, with the settings above; database 0 only),
 * the hosts being seed nodes: name several, as a primary among them may be
 * down when a runtime starts. The slot map is read with CLUSTER SLOTS from
 * the first node that answers (at most 4 tried per reading, the seeds and
 * the nodes learnt), each
 * command goes to the primary that owns its key's slot (CRC16, hash tags)
 * through a pool of idle connections per node (at most 4 each), a MOVED
 * reply updates the map and the command is sent again to the node it names
 * (the map is read again, at most every 100 ms, by the lookup that finds
 * it stale: that lookup can wait for the reading too, up to 4 nodes asked
 * within the timeout each, before its own deadlines), an ASK reply sends it to
 * the node named with ASKING first. On a cluster the key goes in braces,
 * PREFIX{KEY} and PREFIX{KEY}:lock (with a secret PREFIX hmac-ID:{KEY}),
 * so that an entry and its lock share a slot (a prefix with a brace is
 * refused there); a redis:// URL keeps the names below. A runtime keeps
 * at most 64 nodes' addresses: a cluster whose nodes keep moving to new
 * addresses needs a new runtime past that. When a primary dies, its slots' lookups fail (a refused
 * connection or CLUSTERDOWN, within the deadlines) and the launch
 * compiles; each node has its own breaker (3 failures in a row: that
 * node's slots are skipped for remote_retry_ms, the others' still asked),
 * and every failure makes the map be read again, so that once a replica is
 * promoted the tier resumes by itself;
 * values from any node are verified as always. `kcache remote ping` shows
 * every node and its role; ls and clear cover every primary.
 *
 * Entries are named PREFIX + the disk cache's key (kc_options.remote_prefix,
 * else $KC_REMOTE_PREFIX, else "kcache:"), and hold the same bytes as the
 * entry files on disk. Redis should be run as a cache (maxmemory with an
 * allkeys-lru policy): kcache sets no expiry on entries.
 *
 * Needs libhiredis at run time (0.14 or 1.x, opened with dlopen; kcache
 * builds and runs without it). When the tier is configured but cannot be
 * used (no hiredis, a bad URL or setting, no libssl for rediss://), one warning in the
 * runtime's log (see "log") says why and the runtime works without it.
 *
 * Order: a launch whose world no code instance serves asks the disk cache,
 * then the remote tier, then compiles. A remote hit is verified exactly like
 * an entry file (checksums, key, format, kernel, backend, signature, and a
 * load by the backend) before it is used, and then written to the disk
 * cache. Uploads after a compile, and those disk writes, are done by a
 * per-runtime uploader thread (started on first use, joined by
 * kc_runtime_destroy, which finishes them): launches do not wait for them.
 *
 * Single flight: a machine that misses takes a lock in Redis (SET NX with
 * an expiry of kc_options.remote_lock_timeout_ms, else
 * $KC_REMOTE_LOCK_TIMEOUT seconds, else 30 s) and compiles; the others
 * poll for its upload (every 2 to 50 ms) for at most the lock timeout,
 * then compile themselves. Without KC_REMOTE_KEY, where anyone who reaches
 * the server can plant a lock that looks real, they wait at most 4 times
 * the longest compile this machine's processes did lately (at least 0.5 s;
 * the estimate decays by an eighth with each compile here and is kept in
 * the disk cache; the lock timeout where none was seen yet): a kernel much
 * slower to compile than those seen here may then be compiled on two
 * machines (set KC_REMOTE_KEY to wait the whole timeout for it). A holder
 * that dies blocks nobody past the expiry. A compile that outlasts the wait
 * is done twice: never wrongly. The lock protocol:
 * the lock is KEY:lock (beside the entry's name), its value
 * "host:pid:TOKEN" (TOKEN 16 hex digits, unique: to its holder, when it was
 * taken, plus random bits) and, with KC_REMOTE_KEY,
 * ":MAC" (the first 8 bytes, in hex, of HMAC-SHA256 of the lock's name and
 * that value under a key derived from the secret). It is taken with SET NX
 * PX and released after the upload by a compare-and-delete of the holder's
 * own value. A lock that no kcache client could hold (no expiry, an expiry
 * above the lock timeout, a value not of that form, or with KC_REMOTE_KEY
 * one not authenticated: anyone who can reach the server can SET one) is
 * not waited for: it is replaced by the waiter's own (WATCH, then MULTI /
 * SET / EXEC, so a real holder that took it meanwhile keeps it), with one
 * warning in the log. So nobody without the secret can make waiters wait,
 * and nobody with access can make them wait past the lock timeout, nor,
 * without a secret, longer than compiles here have taken once this
 * machine has done one.
 *
 * Failures: a lookup (connect if needed, read) has one deadline,
 * kc_options.remote_timeout_ms, else $KC_REMOTE_TIMEOUT_MS, else 5 ms (a
 * transfer that keeps moving earns 20 ns per byte). The single-flight
 * commands have a longer one, $KC_REMOTE_LOCK_DEADLINE_MS (default 250 ms,
 * never below the timeout): after a miss, taking the lock and each poll
 * while another machine compiles; the uploads (others wait for them, no
 * launch does); and a lookup whose first read missed the timeout on a
 * connection that was made goes on with it, on a new connection, read
 * included, rather than compile without the lock. A miss is followed by a
 * compile of tens of milliseconds or more anyway, and commands that missed
 * 5 ms on a loaded machine made machines compile what another one was
 * compiling (32 processes cold-starting 50 kernels on 2 shared cores: 1202
 * compiles with every command under 5 ms, 358 and 379 with only the lock
 * and the polls under 250 ms, 50 with all of the above; bench/results/
 * fleet-lock-deadline-2026-12-06.log). So a stopped server costs a lookup
 * up to the timeout plus the lock deadline; setting the lock deadline to
 * the timeout gives back the timeout alone. A lookup stops at
 * its first failure and the launch goes on locally. After 3 failures in a
 * row the tier is not asked at all for kc_options.remote_retry_ms (else
 * $KC_REMOTE_RETRY_MS, else 10 s); then one lookup tries it again. Host
 * names are resolved by the system (not bounded by the timeout): an IP
 * address avoids that. Values larger than kc_options.remote_max_entry (else
 * $KC_REMOTE_MAX_ENTRY, else 64 MiB) are neither uploaded nor read past the
 * limit. A value that is damaged, truncated, of another format or key, or
 * not authenticated, is a miss that is compiled again and replaced. The
 * default timeout suits a server on the same network; machines whose CPUs
 * are saturated at start (or a distant server) want a larger one, or a
 * timeout turns a remote hit into a compile.
 *
 * Authentication: kcache runs what the tier returns. With a shared secret
 * (kc_options.remote_key, else $KC_REMOTE_KEY), every upload carries an
 * HMAC-SHA256 of the entry (libcrypto, from libssl3, opened with dlopen),
 * and only entries whose MAC verifies are used: a client without the secret
 * cannot poison the cache. Entries with a secret live in their own
 * namespace (PREFIX + "hmac-" + an id derived from the secret + ":"), so
 * clients with another secret or none neither see nor overwrite them, and
 * they share nothing with clients without one. Without a secret kcache
 * trusts the server: anyone who can write to it can make clients run code.
 *
 * Counters: kc_stats' remote_* fields; `kcache stats` shows the ones of all
 * processes using the same disk cache, and `kcache remote ping|ls|clear`
 * looks at the server.
 */

/* The remote tier rt uses ("redis://host:port/db", password masked), or
 * NULL when it has none. Valid as long as rt. */
const char *kc_remote_url(const kc_runtime *rt);

/* -------------------------------------------------------------------- log */

/*
 * A runtime's messages go through its log: its warnings (an unusable or
 * unwritable cache directory, a bad KC_CACHE_* or KC_LOG value, an
 * unusable or failing remote tier), and, at higher levels, a
 * trace of its slow paths like CCACHE_DEBUG or SCCACHE_LOG:
 *   info   "compiled kernel 'k' [T=float] (host) in 12.3 ms", disk and remote hits
 *   debug  for each launch that missed its handle's cache, why (the first
 *          launch in a context, a context reset, the code's worlds ended),
 *          and for each code instance made, why none served the world (the
 *          first compile; callee 'h' redefined at world 5), what the disk
 *          cache and the remote tier answered, and how long the compile took.
 * Where: kc_options.log (with log_ud), else stderr as "kcache: warning: MSG"
 * ("kcache: debug: MSG", ...). Level: kc_options.log_level, else $KC_LOG
 * (error, warn, info, debug; anything else warns and means warn), else
 * warn. A cached launch never logs: the trace costs nothing on the fast
 * path. Messages about no runtime (the kcache command) go to stderr.
 */

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop
#endif /* KCACHE_H */
