/* SPDX-License-Identifier: MIT */
/*
 * host.h -- what the files of the host backend share (src/backends/host/):
 * its state, the code it writes around a kernel (codegen.c), the helpers
 * of tools.c (finding, running and reading back what the system C compiler
 * makes), the loader of the objects it makes (loader.c) and the memory
 * they are loaded into (arena.c), and how launches run (exec.c: the pool of
 * worker threads, the fibers of groups with barriers).
 */
#ifndef KC_BACKENDS_HOST_H
#define KC_BACKENDS_HOST_H

#include "backend.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The generated trampoline has the signature of a kc__launch_fn, so the
 * fast path calls straight into the compiled object. */
typedef kc_status (*host_run_fn)(kc__blinked *l, void **argv, const kc_dim3 *grid, const kc_dim3 *block);

struct host_region; /* arena.c */
typedef struct host_pool host_pool; /* exec.c */
typedef struct host_streams host_streams; /* stream.c */

typedef struct host_state {
  const kc__bsvc *sv; /* &svc: allocation, errors (backend.h) */
  kc__bsvc svc; /* the copy kept from open */
  const char *compile_options; /* kc_options.compile_options (the runtime's copy) */
  char dir[256]; /* $TMPDIR, where each compile makes its own directory */
#define KC__HOST_MAX_WORDS 56 /* in the compiler command, and in the compile options */
  char *cc_argv[KC__HOST_MAX_WORDS]; /* the compiler command, split on spaces (owned) */
  int cc_argc;
  uint32_t timeout_ms;
  _Atomic uint64_t seq; /* unique file names */
  kc__mutex ident_lock;
  kc__fork_hook ident_fork; /* ident_lock around fork(): a child never inherits it held */
  char *identity;
  char *sysinc; /* tcc: its system include directories, one a line (sysinc.c); else NULL */
  bool is_tcc; /* the compiler said it is tcc (ident_lock, like sysinc) */
  char device[256];
  kc__mutex arena_lock; /* the regions and their free lists */
  bool arena_ready; /* arena_lock was made */
  struct host_region *regions; /* newest first */
  void *libm, *libgcc; /* dlopen handles the loader resolves symbols in (or NULL) */
  long tp_off; /* the thread's slot's offset from the thread pointer (exec.c) */
  const char *opt_flags; /* the optimisation flags of a compile (tools.c: by compiler) */
  host_pool *pool; /* the worker threads (exec.c), NULL: the caller alone */
  host_streams *streams; /* the streams and their queues (stream.c) */
  struct { /* what the loader gives every object (exec.c's; set at open) */
    int (*par)(void *, const void *, const unsigned *, const unsigned *);
    void (*barrier)(void);
    int (*fibers)(void *, unsigned, void (*)(void *, unsigned), void *);
    int (*split_bad)(void *, unsigned, int);
  } hooks;
} host_state;

/* The services of the backend that linked l (its state). */
static inline const kc__bsvc *host_sv(const kc__blinked *l) { return ((const host_state *)l->bctx)->sv; }

/* tools.c */
const char *host_unavailable(const kc__bconfig *cfg);
/* prog itself if it has a '/', else its first executable match in $PATH. */
bool host_find_in_path(const char *prog, char *out, size_t outlen);
/* Runs argv with stdout and stderr into log_path, bounded by the compile
 * timeout; envp: its environment (NULL: the process's). */
kc_status host_run_tool(host_state *s, char *const argv[], char *const envp[], const char *log_path,
                        int *exit_code, int *signal_no);
/* Reads the regular file at path into *out (*size bytes), at most max
 * bytes: past that, cut (with a line that says so) if
 * cut, else refused (KC_EIO). A compiler that floods its log, or leaves a
 * FIFO or a huge file where its object should be, costs no more. */
#define HOST_LOG_MAX ((size_t)1 << 20) /* a compiler's log, kept: the first MiB */
#define HOST_FILE_MAX ((size_t)1 << 30) /* an object or a dependency file: no more */
kc_status host_read_file(const kc__bsvc *sv, const char *path, size_t max, bool cut, void **out,
                         size_t *size);
kc_status host_write_file(const kc__bsvc *sv, const char *path, const void *data, size_t n);
/* The paths of a compiler's dependency file (cc -MD -MF) into out, each
 * with its NUL, but `skip` (the translation unit): make syntax as gcc and
 * clang write it (escaped blanks, '#', "$$"), or with lines true, tcc's
 * (one path a line, not escaped). False if out ran out of memory. */
bool host_deps_parse(const char *text, size_t n, bool lines, const char *skip, kc__sb *out);
/* Whether a compiler that failed did so for want of a resource (memory,
 * disk, descriptors, processes) or because it was killed, by what it
 * wrote (its output, n bytes): not the source's failure. */
bool host_resource_failure(const char *out, size_t n);
/* Appends a compiler's output to log without the work directory of src
 * (its file names are the definitions' names, #line's: "h:3: error ..."). */
void host_log_append(kc__sb *log, const char *text, size_t n, const char *src);
/* A compile's work directory under s->dir, named after this process
 * (kcache-host-NS-PID-START-XXXXXX: NS says which machine's boot and pid
 * namespace the pid is of (host_pid_ns), then the pid and its start time), made
 * with mkdtemp into dir (HOST_WORKDIR_MAX bytes); false and errno if not. */
#define HOST_WORKDIR_MAX 400
bool host_workdir_make(const host_state *s, char *dir, size_t size);
/* Removes the work directories in s->dir of processes that have ended (a
 * compile killed with its process): only this user's, only names exactly
 * of that form, never through a symbolic link, never a live process's.
 * Returns how many it removed. */
int host_workdir_sweep(const host_state *s);

/* sysinc.c: tcc's system include directories (`tcc -vv`) into
 * s->sysinc, asked with dir as the work directory; and the words a compile
 * adds for them (-nostdinc, then -I for each directory of $CPATH,
 * $C_INCLUDE_PATH and, unless nostdinc (the compile options have it),
 * sysinc: what host_sysinc_ready gave), each with its NUL, into out: none
 * unless sysinc. */
#define KC__HOST_MAX_SYSINC 64 /* words it may add */
kc_status host_sysinc_probe(host_state *s, const char *dir);
kc_status host_sysinc_args(const host_state *s, const char *sysinc, bool nostdinc, kc__sb *out, int *count);
/* The process's environment without $CPATH and $C_INCLUDE_PATH, for tcc
 * given their directories as -I (host_sysinc_args): NULL-terminated, the
 * strings the process's own (free the array with kc__bs_free); NULL when
 * out of memory. */
char **host_sysinc_env(const host_state *s);
/* Whether a compile with s may run: with tcc, only once its system
 * directories are known (else what it reads there would go unrecorded);
 * reads them under ident_lock into *sysinc (NULL: not tcc). */
kc_status host_sysinc_ready(host_state *s, const char **sysinc);

/* arena.c: an object's two blocks, carved from one region. */
#define HOST_UNIT 64 /* bytes: the size step of blocks, and their alignment */
typedef struct host_block {
  struct host_region *region;
  char *code_wr; /* where the code block is written */
  char *code_run; /* where it runs (read+execute) */
  char *data; /* the data block (read+write) */
  size_t code_units, data_units;
  bool data_fresh; /* the data block was never used: still zero */
} host_block;
/* KC_ENOMEM when no region has room and no new one can be mapped. */
kc_status host_arena_take(host_state *s, size_t code_bytes, size_t data_bytes, host_block *b);
void host_arena_give(host_state *s, const host_block *b);
void host_arena_close(host_state *s); /* unmaps every region */

/* loader.c: a checked object (host_plan_make), loaded into blocks. */
typedef struct host_plan host_plan;
typedef struct host_copy host_copy;
typedef struct host_image {
  host_block blk;
  uintptr_t code, data; /* where the object's code and data blocks start */
  void *group, *run, *entry; /* its kc__group, kc__run and kc__launch */
  /* An object with KC_LOCAL arrays (kc__copies): its bytes, kept for the
   * copies that threads running its groups at once take (exec.c). */
  bool needs_copies;
  void *bytes;
  size_t size;
  kc__mutex copy_lock; /* the lists below (a leaf) */
  host_copy *copies, *free_copies; /* all, and those no thread uses now */
  unsigned nargs; /* the kernel's parameters (kc__nargs) */
  unsigned queued; /* its launches queued on streams, not yet run (host_streams.lock) */
} host_image;
struct host_copy {
  host_image im; /* loaded like the original, its own statics */
  void *group;
  host_copy *next, *all_next; /* in free_copies, in copies */
};
/* st: the status of the object's own faults (KC_ECOMPILE, KC_ELINK), whose
 * messages start with `what`; KC_ENOMEM for memory. */
kc_status host_plan_make(const host_state *s, const void *bytes, size_t size, kc_status st, const char *what,
                         host_plan **out);
void host_plan_free(const host_state *s, host_plan *p);
/* The file bytes of a defined global (at least need of them), or NULL. */
const void *host_plan_bytes(const host_plan *p, const char *name, size_t need);
kc_status host_plan_load(host_state *s, const host_plan *p, host_image *im);
/* The run address of a defined global of a loaded image (writable: one in
 * the data block, at least pointer-sized), or NULL. */
void *host_plan_addr(const host_plan *p, const host_image *im, const char *name, bool writable);
/* Opens what host_state's libm and libgcc need. */
void host_loader_open(host_state *s);
void host_loader_close(host_state *s);

/* loader.c: loads an object's bytes into im and sets the hooks kcache
 * gives it (what: how its faults' messages start). */
kc_status host_image_load(host_state *s, const void *bytes, size_t size, const char *what, host_image *im);

/* The prelude's kc_local_id and kc_global_id (split.c defines its own in
 * kc__split and these again after it). */
#define HOST_ID_MACROS \
  "#define kc_local_id(d) (kc__id.kc__nar ? (size_t)KC__PICK((d), kc__id.kc__l0, kc__id.kc__l1, " \
  "kc__id.kc__l2) : (size_t)kc__cur->kc__lid[(d)])\n" \
  "#define kc_global_id(d) (kc__id.kc__nar ? (size_t)KC__PICK((d), kc__id.kc__g0, kc__id.kc__g1, " \
  "kc__id.kc__g2) : kc_group_id(d) * kc_local_size(d) + kc_local_id(d))\n"

/* codegen.c: the prelude, the entry's hidden parameters, the entry points. */
extern const char host_prelude[];
kc_status host_entry_prologue(void *state, const kc__tu *tu, kc__sb *out);
kc_status host_epilogue(void *state, const kc__tu *tu, kc__sb *out);
/* Whether tu's text past the prelude has an #include directive of a header
 * other than the C library's own (which declare no macro or helper of a
 * kernel's): kcache does not read a header on disk, so what it holds is
 * unseen (split.c, which defines it: a helper that reads the ids;
 * codegen.c: macros). */
bool host_includes_from_disk(const kc__tu *tu);

/* split.c: a kernel with barriers as loops over its group's items. Writes
 * struct kc__S (what each item keeps across barriers: its size) and
 * int kc__split(struct kc__wi *, const struct kc__a *, int nar) (nar: the global ids fit in int) into out and
 * returns true, with *nbar the barriers it split at; or returns false with *why, what it cannot split with
 * certainty (the kernel then runs as fibers). host_split_bad: kc__split_bad, the hook a split kernel calls
 * when its items disagree at a condition around a barrier. */
bool host_split_emit(const kc__bsvc *sv, const kc__tu *tu, kc__sb *out, const char **why, unsigned *nbar,
                     bool *int_ids);
int host_split_bad(void *hs, unsigned item, int first);
/* Whether the closure past the prelude, but for the kernel's body, may read
 * an item's own ids (a helper, through the thread's item): 1, also where it
 * cannot tell; 0; -1 when out of memory. */
int host_ids_outside(const kc__bsvc *sv, const kc__tu *tu);

/* exec.c: the thread's slot (its offset from the thread pointer), the
 * scratch area of the kernels the calling thread runs next, the pool of
 * threads sized `threads` in all (<= 1: none), the hooks objects call. */
long host_tls_offset(void);
void host_set_scratch(void *p, size_t bytes);
kc_status host_pool_open(host_state *s, uint32_t threads);
void host_pool_close(host_state *s);
int host_par(void *l, const void *args, const unsigned *g, const unsigned *b);
int host_fibers_hook(void *hs, unsigned n, void (*fn)(void *, unsigned), void *ud);
void host_barrier(void);

/* interop.c: launches with a configuration (host_launch_check: what the
 * host lacks, and the scratch area's limit; host_launch_now: on the
 * caller, to completion), the adopted context, foreign memory. */
kc_status host_launch_check(const kc__blinked *l, const kc__lcfg *cfg);
kc_status host_launch_now(kc__blinked *l, void **argv, const kc__lcfg *cfg);
kc_status host_ctx_wrap(void *state, void *native_ctx, void *native_dev, void **bctx);
kc_status host_buf_wrap(void *bctx, void *native, size_t size, kc__bufh *h);

/* stream.c: streams whose launches run asynchronously, in order, each on a
 * thread of its own. host_streams_drain waits for the
 * launches queued on every stream before it (a buffer kcache made goes
 * after them); host_streams_forget waits until im has no queued launch
 * (it is being unloaded). */
kc_status host_streams_open(host_state *s, uint64_t idle_ns, uint64_t spin_ns);
void host_streams_close(host_state *s);
/* kc_launch_ex: checked, then queued on its stream or run now. */
kc_status host_launch_ex(kc__blinked *l, void **argv, const kc__lcfg *cfg);
void host_streams_drain(host_state *s);
void host_streams_forget(host_state *s, host_image *im);
kc_status host_stream_create(void *bctx, void **native);
kc_status host_stream_wrap(void *bctx, void *native);
void host_stream_release(void *bctx, void *native, bool owned);
kc_status host_stream_sync(void *bctx, void *native);
kc_status host_stream_wait(void *bctx, void *native, void *other);

#endif /* KC_BACKENDS_HOST_H */
