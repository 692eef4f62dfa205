/* SPDX-License-Identifier: MIT */
/*
 * opencl.h -- what the files of the OpenCL backend share
 * (src/backends/opencl/): the table of OpenCL functions loaded with dlopen
 * and the backend's state types, and what each file gives the others.
 * Bottom up (a file uses only files before it): platform.c loads the
 * library, picks the platform and devices and makes the state; programs.c
 * keeps what was built; probe.c the parameter probe; compile.c builds a
 * unit, the same here and in a compile helper; wire.c the helpers'
 * protocol; helpers.c runs a build in a helper or here; checked.c and
 * interop.c checked mode and interop; on top, opencl.c opens and closes
 * the backend, compiles, links, launches and owns buffers, and serve.c is
 * the helper's side.
 */
#ifndef KC_BACKENDS_OPENCL_H
#define KC_BACKENDS_OPENCL_H

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include "backend.h"

#include <pthread.h>
#include <sys/types.h>

/* The build options without the user's (platform.c adds theirs after). */
#define OCL_OPTIONS "-cl-std=CL1.2 -cl-kernel-arg-info"

/* ------------------------------------------------------------ the loader */

/* Every entry point we use, resolved once with dlsym. The types come from
 * <CL/cl.h>, so a wrong signature is a compile error, not a crash. */
#define OCL_FUNCS(X) \
  X(clGetPlatformIDs) \
  X(clGetPlatformInfo) \
  X(clGetDeviceIDs) \
  X(clGetDeviceInfo) \
  X(clCreateContext) \
  X(clReleaseContext) \
  X(clCreateCommandQueue) \
  X(clReleaseCommandQueue) \
  X(clCreateProgramWithSource) \
  X(clCreateProgramWithBinary) \
  X(clBuildProgram) \
  X(clCompileProgram) \
  X(clLinkProgram) \
  X(clGetProgramBuildInfo) \
  X(clGetProgramInfo) \
  X(clReleaseProgram) \
  X(clRetainProgram) \
  X(clCreateKernel) \
  X(clGetKernelInfo) \
  X(clGetKernelArgInfo) \
  X(clGetKernelWorkGroupInfo) \
  X(clReleaseKernel) \
  X(clSetKernelArg) \
  X(clEnqueueNDRangeKernel) \
  X(clFinish) \
  X(clCreateBuffer) \
  X(clCreateSubBuffer) \
  X(clReleaseMemObject) \
  X(clEnqueueWriteBuffer) \
  X(clEnqueueReadBuffer) \
  X(clRetainContext) \
  X(clRetainCommandQueue) \
  X(clRetainMemObject) \
  X(clGetContextInfo) \
  X(clGetCommandQueueInfo) \
  X(clGetMemObjectInfo) \
  X(clEnqueueMarkerWithWaitList) \
  X(clEnqueueBarrierWithWaitList) \
  X(clReleaseEvent) \
  X(clGetEventInfo) \
  X(clSetEventCallback)

/* OpenCL 2.0, looked up but not required (NULL: the library lacks it). */
typedef cl_int(CL_API_CALL *ocl_svm_arg_fn)(cl_kernel kernel, cl_uint index, const void *value);
extern ocl_svm_arg_fn ocl_set_arg_svm; /* clSetKernelArgSVMPointer */
#define OCL_DEVICE_SVM_CAPABILITIES 0x1053 /* CL_DEVICE_SVM_CAPABILITIES (2.0) */

typedef struct ocl_lib {
#define OCL_FIELD(f) __typeof__(f) *f;
  OCL_FUNCS(OCL_FIELD)
#undef OCL_FIELD
} ocl_lib;
extern ocl_lib ocl; /* platform.c: loaded by ocl_unavailable */

/* ----------------------------------------------------------------- state */

/* A program compile() built in compile_ctx, and a copy of its binary.
 * late (programs.c, "late binaries"): OCL_LATE_WAIT, prog is a second link
 * of the compile whose binary (bin) was fetched before any launch, and it
 * has not run yet; OCL_LATE_RAN, it was launched (ev: that launch), and
 * its binary is to be fetched once ev completes. */
#define OCL_KEEP 64
enum { OCL_LATE_NONE = 0, OCL_LATE_WAIT, OCL_LATE_RAN };
typedef struct ocl_kept {
  cl_program prog; /* the table's reference */
  unsigned char *bin;
  size_t size;
  int late;
  cl_event ev; /* OCL_LATE_RAN: the first launch (the table's reference) */
} ocl_kept;

/* What a compile builds (compile.c), the same in this process and in a
 * compile helper (helpers.c, serve.c): the translation unit's text, its
 * entry, and which parameters are buffers. */
typedef struct ocl_unit {
  const char *text;
  size_t len;
  const char *entry;
  uint32_t nparams;
  uint8_t is_buffer[KC_MAX_ARGS];
} ocl_unit;

/* What the build gave: the binary, the parameter probe's raw values
 * (kc__probe_apply checks them; nvals 0: no by-value parameter) and the
 * KC_LOCAL pointer parameters. prog: the program, when built here; late:
 * a second link of the same compile, fetched after its first launch,
 * where ocl_links (else NULL). */
typedef struct ocl_result {
  cl_program prog;
  cl_program late;
  unsigned char *bin;
  size_t size;
  uint64_t vals[1 + 2 * KC_MAX_ARGS];
  uint32_t nvals;
  uint8_t local[KC_MAX_ARGS];
} ocl_result;

/* A compile helper process (helpers.c): pid 0 when none runs in the slot.
 * busy: a compile owns the slot (and its pid and fd) until it gives it back. */
typedef struct ocl_helper {
  pid_t pid;
  int pidfd; /* a pidfd of pid (-1: none; Linux before 5.3): waits and kills never reach a reused pid */
  int fd; /* our end of the socket; -1 when none */
  bool busy;
} ocl_helper;

typedef struct ocl_state {
  const kc__bsvc *sv; /* &svc: allocation, errors (backend.h) */
  kc__bsvc svc; /* the copy kept from open */
  /* Every device of the platform, the chosen one first: device 0 is the one
   * the options asked for, and the one compile() builds for. */
  cl_device_id *devices;
  char **names;
  int ndevices;
  char *identity;
  char *build_options;
  cl_context compile_ctx;
  /* programs.c: building once. lock guards shared and kept. */
  kc__mutex lock;
  bool lock_ok; /* lock was initialized */
  cl_context *shared; /* ndevices: device i's context for kcache's own contexts; [0] is compile_ctx */
  ocl_kept kept[OCL_KEEP]; /* programs compile() built, the newest at kept_next - 1 */
  int kept_next;
  _Atomic uint64_t builds; /* clBuildProgram calls (kc_stats.backend_builds) */
  /* Late binaries (programs.c): compiles here link twice, and the entry is
   * written again with the binary of the launched program (set in this
   * process, not in a helper; only where ocl_links). The late worker
   * (late_thread, started at the first OCL_LATE_RAN) waits on late_cond
   * (with lock) for one, then for its launch to end (late_waiter, under
   * lock: woken by the launch event's callback, or by the stop) and
   * fetches it; late_stop (under lock; read without it
   * while it waits for a launch): ocl_late_stop was called, or the process
   * is exiting; then no fetch starts after late_deadline (kc__now_ns, under
   * lock). late_next, late_pid: the list of states whose worker runs, for
   * the exit handler (programs.c). */
  bool late_binaries;
  /* Where the user's compile options refuse late binaries (ocl_relink_refused:
   * the word, in build_options), whether KC_OPENCL_LATE_BINARIES=1 asked
   * for them, and whether the log said so (once, ocl_links). */
  const char *relink_refused;
  bool relink_asked;
  _Atomic int relink_said;
  /* PoCL, its own kernel cache off ($POCL_KERNEL_CACHE not starting with 1; helpers.c) */
  bool pocl_cache_off;
  bool late_cond_ok, late_started;
  _Atomic int late_stop;
  pthread_cond_t late_cond;
  pthread_t late_thread;
  uint64_t late_deadline;
  struct ocl_state *late_next;
  pid_t late_pid;
  struct ocl_late_waiter *late_waiter; /* the worker's wait for a launch (under lock; programs.c) */
  /* Which platform and device (indices as the ICD lists them): a helper
   * opens the same one. serializes: the platform builds one program at a
   * time per process (PoCL). */
  int plat_index, dev_index;
  bool serializes;
  bool pocl; /* the platform is PoCL (its limits: OCL_POCL_NAME_MAX) */
  /* helpers.c: the compile helpers (nhelpers 0: every build here). hlock
   * (a leaf) guards helpers[].busy, the slots' pids while not busy, and
   * helpers_off. */
  int nhelpers;
  ocl_helper *helpers;
  kc__mutex hlock;
  bool hlock_ok;
  bool helpers_off; /* a helper could not start: every build here from now on */
  double helper_timeout_s; /* how long a helper may take to answer (kc__bconfig) */
  char helper_path[4096]; /* the helper to run (kc__bconfig, else beside the library) */
} ocl_state;

typedef struct ocl_ctx {
  const kc__bsvc *sv;
  ocl_state *st;
  cl_device_id device;
  cl_context ctx; /* kcache's, or the caller's (kc_context_wrap: retained) */
  cl_command_queue queue; /* kcache's own in-order queue */
  bool svm; /* the device takes SVM pointers as arguments (KC_ARG_PTR) */
  bool host_memory; /* CL_DEVICE_HOST_UNIFIED_MEMORY: kc_buffer_host uses host memory in place */
  cl_uint base_align; /* CL_DEVICE_MEM_BASE_ADDR_ALIGN, in bytes: sub-buffer offsets */
  /* What a launch may ask of the device, checked before it reaches the
   * platform (PoCL aborts on local memory above its size):
   * CL_DEVICE_LOCAL_MEM_SIZE, CL_DEVICE_MAX_WORK_ITEM_SIZES. */
  cl_ulong local_mem;
  size_t max_items[3];
} ocl_ctx;

/* The services of the backend that linked l (its context's). */
static inline const kc__bsvc *ocl_sv(const kc__blinked *l) { return ((const ocl_ctx *)l->bctx)->sv; }

/* l->extra: what a launch touches, together. */
typedef struct ocl_linked {
  _Atomic int busy; /* guards the set-args..enqueue window of `kernel` */
  /* under busy: the program is a kept one at OCL_LATE_WAIT when linked: the
   * next launch is its first here (ocl_launch_first) */
  bool late;
  cl_command_queue queue;
  const kc__bsvc *sv;
  const char *entry;
  uint32_t nargs;
  /* the largest group (CL_KERNEL_WORK_GROUP_SIZE), and the local memory
   * left for KC_LOCAL parameters: the device's less what the kernel
   * declares itself (CL_KERNEL_LOCAL_MEM_SIZE) */
  size_t group_max;
  cl_ulong local_room;
  size_t argsize[]; /* bytes per argument; 0: unknown (cannot launch) */
} ocl_linked;

/* platform.c */
const char *ocl_unavailable(const kc__bconfig *cfg);
const char *ocl_errname(cl_int e);
kc_status ocl_fail(const kc__bsvc *sv, kc_status st, const char *what, cl_int e) KC__COLD;
/* The state for the platform and device opt asks for (no helpers yet:
 * opencl.c's ocl_open sets their mode). */
kc_status ocl_state_open(const kc__bsvc *sv, const kc__bconfig *opt, ocl_state **out);
/* A helper's state: platform plat, device dev (ICD indices), and the
 * parent's build options. No helpers of its own. */
kc_status ocl_open_at(const kc__bsvc *sv, int plat, int dev, const char *build_options, ocl_state **out);
/* Frees what ocl_state_open or ocl_open_at made, and st; after
 * ocl_helpers_close and ocl_programs_free (ocl_close does all three). */
void ocl_state_free(ocl_state *st);
int ocl_list(char *buf, size_t size);
int ocl_device_count(void *state);
const char *ocl_device_name(void *state, int index);
const char *ocl_identity(void *state);

/* probe.c: the parameter probe (backend.h). The epilogue appends the probe
 * kernel only where ocl_probe_in_program: some by-value parameter of tu is
 * written as a type other than OpenCL C's built-in scalars and vectors. */
kc_status ocl_epilogue(void *state, const kc__tu *tu, kc__sb *out);
bool ocl_probe_in_program(const kc__tu *tu);
/* tu's text with the probe kernel appended, in *text (sv's heap; the
 * caller frees it) and *len: for a unit the epilogue left it out of. */
kc_status ocl_probe_append(const kc__bsvc *sv, const kc__tu *tu, char **text, size_t *len);
/* The probe's values for u's by-value parameters into r (nvals 0 when it
 * has none), from the compiler: the types' names (entry: the kernel) where
 * all are built in, else a run of prog's probe kernel; nvals 0 too when
 * they are not and prog has no probe kernel; KC_ECOMPILE saying why if it
 * cannot. */
kc_status ocl_probe_read(ocl_state *st, cl_program prog, cl_kernel entry, const ocl_unit *u, ocl_result *r);
/* checked.c: checked mode's buffer views (backend.h, buf_view). */
kc_status ocl_buf_view(void *bctx, const kc__bufh *whole, size_t off, size_t size, kc__bufh *view);
void ocl_buf_view_destroy(void *bctx, kc__bufh *view);

/* opencl.c: the backend's close (the helpers, the programs, the state);
 * serve.c closes a helper's state with it too. */
void ocl_close(void *state);

/* compile.c: building a translation unit. */
/* Builds u in st's compile context, here: on success r holds the program,
 * the binary (st's heap) and the probe's values. log gets the build log. */
kc_status ocl_build_unit(ocl_state *st, const ocl_unit *u, ocl_result *r, kc__sb *log);
/* Whether ocl_build_unit compiles and links (clCompileProgram,
 * clLinkProgram) rather than builds, for late binaries: with
 * st->late_binaries (by default only with PoCL's own kernel cache off,
 * st->pocl_cache_off: with it on, a build of source PoCL has seen is a
 * hit of its cache, 45 ms, where a link in a new context loads PoCL's
 * kernel library again, 650 ms; with it off both cost the same;
 * $KC_OPENCL_LATE_BINARIES=1 asks for them with it on too), on PoCL,
 * where the user's compile options are only of the compile
 * (st->relink_refused NULL: else the first build that would have linked
 * says why in the log, once), where the runtime can write its disk cache
 * (kc__bsvc.writable). Never in a helper (its state has no late
 * binaries). */
bool ocl_links(ocl_state *st);
/* Where build_options (OCL_OPTIONS, then the user's compile options, each
 * word after a blank) has a word that a compile followed by a link
 * without options might not honour as clBuildProgram does: that word
 * (for a lone -D at the end, the -D), and in *why what is wrong with it:
 * a word that is not -D or -I with their arguments, -w or -Werror; a
 * quote or backslash, which the platform parses its own way; "-cl-"
 * anywhere, even in a macro's value, since a platform may look for
 * -cl-opt-disable in the whole string; a lone -D or -I at the end. NULL
 * (and *why NULL) where compiling then linking builds what
 * clBuildProgram builds. */
const char *ocl_relink_refused(const char *build_options, const char **why);
/* Whether the last word of options is a lone -D or -I (PoCL 3 crashes
 * the process on it: refused where the state opens). */
bool ocl_lone_flag_at_end(const char *options);
/* KC_EUNAVAILABLE for a kernel name the platform cannot take (PoCL: OCL_POCL_NAME_MAX). */
kc_status ocl_name_check(const ocl_state *st, const kc__bsvc *sv, const char *entry);
/* Appends prog's build log for dev to log (if log) and returns it as a
 * fresh string (NULL: none, or no memory). */
char *ocl_build_log(const kc__bsvc *sv, cl_program prog, cl_device_id dev, kc__sb *log);

/* helpers.c: compiles in helper processes. */
void ocl_helpers_open(ocl_state *st, const kc__bconfig *cfg); /* the mode, from the configuration */
/* ocl_build_unit, here or in a helper (r->prog NULL then). */
kc_status ocl_build_routed(ocl_state *st, const ocl_unit *u, ocl_result *r, kc__sb *log);
void ocl_helpers_close(ocl_state *st); /* stops and reaps every helper */

/* wire.c: the helpers' protocol, frames of byte fields over a socket. */
enum { OCL_MSG_SETUP = 1, OCL_MSG_HELLO, OCL_MSG_BUILD, OCL_MSG_RESULT, OCL_MSG_QUIT };
#define OCL_MSG_FIELDS 8
typedef struct ocl_field {
  const void *p;
  size_t n;
} ocl_field;
typedef struct ocl_msg {
  uint32_t type, n;
  ocl_field f[OCL_MSG_FIELDS];
  unsigned char *buf; /* what f points into; free() */
} ocl_msg;
/* Results of a send or receive: done, the peer is gone (or the frame is
 * malformed), or the deadline passed. */
enum { OCL_WIRE_OK = 0, OCL_WIRE_GONE = -1, OCL_WIRE_TIMEOUT = -2 };
/* deadline: kc__now_ns() value (0: none). watch: a pid that must stay our
 * parent while we wait (0: none); gone when it does not. */
int ocl_wire_send(int fd, uint32_t type, const ocl_field *f, uint32_t n, uint64_t deadline);
int ocl_wire_recv(int fd, ocl_msg *m, uint64_t deadline, pid_t watch);
/* The helper's main (serve.c; clc/main.c calls it): serves fd until QUIT. */
int kc__ocl_helper_main(int argc, char **argv);

/* programs.c: building once (see there). */
cl_int ocl_build(ocl_state *st, cl_program p, cl_device_id dev); /* clBuildProgram, counted */
uint64_t ocl_builds(void *state);
/* Device's context for a context kcache makes: retained for the caller. */
kc_status ocl_shared_ctx(ocl_state *st, int device, cl_context *out);
/* Keeps prog (its reference passes to the table) as the build of bin. */
void ocl_keep(ocl_state *st, cl_program prog, const void *bin, size_t size);
/* ocl_keep of a compile's second link (ocl_result.late), whose binary is to
 * be fetched after its first launch: OCL_LATE_WAIT. */
void ocl_keep_late(ocl_state *st, cl_program prog, const void *bin, size_t size);
/* The kept program built from bin, retained, if ctx is compile_ctx; else
 * NULL. *late: it is at OCL_LATE_WAIT. */
cl_program ocl_kept_find(ocl_state *st, cl_context ctx, const void *bin, size_t size, bool *late);
/* A launch of prog was enqueued with ev (taken over): if prog is kept at
 * OCL_LATE_WAIT, it goes to OCL_LATE_RAN with ev, for the late worker
 * (started here the first time), which waits for ev, fetches prog's
 * binary and hands it to the core (kc__bsvc.better) in place of the one
 * stored. */
void ocl_late_launched(ocl_state *st, cl_program prog, cl_event ev);
/* Stops the late worker (the backend's quiesce, and ocl_close): the
 * launches it was handed that have completed are fetched first, then it
 * is joined. No call of sv->better after it returns. */
void ocl_late_stop(void *state);
void ocl_programs_free(ocl_state *st); /* ocl_close: the table, the shared contexts (not their array) */

/* interop.c: adopted contexts, streams, foreign memory, configured launches;
 * and what kcache's own contexts (opencl.c) share with adopted ones: the
 * setup and the end of an ocl_ctx. */
kc_status ocl_ctx_finish_setup(ocl_ctx *c);
void ocl_ctx_destroy(void *bctx);
kc_status ocl_ctx_wrap(void *state, void *native_ctx, void *native_dev, void **bctx);
void *ocl_ctx_native(void *bctx);
kc_status ocl_stream_create(void *bctx, void **native);
kc_status ocl_stream_wrap(void *bctx, void *native);
void ocl_stream_release(void *bctx, void *native, bool owned);
kc_status ocl_stream_sync(void *bctx, void *native);
kc_status ocl_stream_wait(void *bctx, void *native, void *other);
kc_status ocl_buf_wrap(void *bctx, void *native, size_t size, kc__bufh *h);
/* kc_buffer_view: checked.c's ocl_buf_view, after the offset's alignment check. */
kc_status ocl_buf_view_aligned(void *bctx, const kc__bufh *parent, size_t off, size_t size, kc__bufh *h);
void ocl_buf_unwrap(void *bctx, kc__bufh *h);
kc_status ocl_buf_host(void *bctx, void *ptr, size_t size, kc__bufh *h);
kc_status ocl_launch_ex(kc__blinked *l, void **argv, const kc__lcfg *cfg);
/* The enqueue of a linked object's first launch (x->late, under busy): with
 * an event, handed to ocl_late_launched; x->late cleared. */
cl_int ocl_launch_first(kc__blinked *l, cl_command_queue q, cl_uint dims, const size_t *offset,
                        const size_t *global, const size_t *local);
/* Whether a group of block's shape fits x's kernel on its device. */
static inline bool ocl_group_fits(const ocl_ctx *c, const ocl_linked *x, const kc_dim3 *block) {
  size_t n;
  return block->x <= c->max_items[0] && block->y <= c->max_items[1] && block->z <= c->max_items[2] &&
         !__builtin_mul_overflow((size_t)block->x * block->y, (size_t)block->z, &n) && n <= x->group_max;
}
/* Why not (a cold KC_EINVAL that names the limits). */
kc_status ocl_group_refused(const kc__blinked *l, const kc_dim3 *block) KC__COLD;
/* The set-args..enqueue window of a linked object (x->busy), taken by
 * ocl_launch (opencl.c: the exchange inline, then ocl_lock_wait) and
 * ocl_launch_ex. */
void ocl_lock(_Atomic int *busy);
void ocl_lock_wait(_Atomic int *busy) KC__COLD;

#endif /* KC_BACKENDS_OPENCL_H */
