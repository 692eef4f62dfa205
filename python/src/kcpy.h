/* SPDX-License-Identifier: MIT */
/*
 * kcpy.h -- the objects of the kcache extension module (kcache._kcache),
 * shared by its files: the runtime, contexts, buffers, kernels with their
 * launch configurations and cached parameter lists, bound arguments, pins.
 *
 * The package requires the GIL: every object below is guarded by it (the
 * module does not declare Py_mod_gil, so a free-threaded interpreter
 * turns the GIL back on when it imports kcache). The GIL is released only
 * around compiles (kc_kernel_compile), never around a cached launch.
 */
#ifndef KCPY_H
#define KCPY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <kcache.h>

enum { KCPY_BACKEND_HOST, KCPY_BACKEND_OPENCL, KCPY_BACKEND_CUDA };

/* DLPack's ABI (dlpack.h v0.8 and v1), the parts read and written here
 * (arrays.c, interop.c). */
typedef struct {
  int32_t device_type; /* kDLCPU 1, kDLCUDA 2, kDLCUDAHost 3, kDLCUDAManaged 13 */
  int32_t device_id;
} kcpy_dldevice;
typedef struct {
  uint8_t code, bits; /* code: kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4, kDLComplex 5, kDLBool 6 */
  uint16_t lanes;
} kcpy_dldtype;
typedef struct {
  void *data;
  kcpy_dldevice device;
  int32_t ndim;
  kcpy_dldtype dtype;
  int64_t *shape;
  int64_t *strides; /* NULL: C-contiguous */
  uint64_t byte_offset;
} kcpy_dltensor;
typedef struct {
  kcpy_dltensor dl_tensor; /* first in DLManagedTensor (the "dltensor" capsule) */
} kcpy_dlmanaged;
typedef struct { /* DLManagedTensorVersioned (the "dltensor_versioned" capsule, DLPack 1.0) */
  uint32_t major, minor;
  void *manager_ctx;
  void (*deleter)(void *self);
  uint64_t flags; /* bit 0: read-only; bit 1: a copy */
  kcpy_dltensor dl_tensor;
} kcpy_dlversioned;
/* Whether a DLPack tensor is C-contiguous (strides NULL, or those of its shape). */
int kcpy_dl_contiguous(const kcpy_dltensor *t);
/* A DLPack dtype as an array element: 'f', 'i' (signed, unsigned, bool) or 0 (anything else). */
char kcpy_dl_kind(kcpy_dldtype d);

/* log.c: kcache's log into logging.getLogger("kcache") (see there). */
void kcpy_log_sink(void *ud, kc_log_level level, const char *msg); /* the kc_log_fn of every Runtime */
void kcpy_log_drain(void); /* delivers the queued messages (the GIL held, outside kcache) */
extern int kcpy_log_nonempty;
/* After a call into kcache that may log: the messages now, not at the next pending call. */
static inline void kcpy_log_poll(void) {
  if (__atomic_load_n(&kcpy_log_nonempty, __ATOMIC_ACQUIRE)) kcpy_log_drain();
}
int kcpy_log_init(PyObject *module); /* registers _log_exit with atexit */
PyObject *kcpy_log_exit(PyObject *self, PyObject *unused);

#if defined(KC_ARG_DEVPTR) && defined(KCPY_INTEROP)
/* A foreign stream wrapped once (interop.c). */
typedef struct kcpy_stream_ref {
  void *native;
  kc_context *ctx;
  uint64_t ctx_id; /* kc_context_id(ctx) when wrapped: kcache reuses a destroyed context's struct */
  kc_stream *s;
} kcpy_stream_ref;
#endif

typedef struct KcRuntime {
  PyObject ob_base;
  kc_runtime *rt; /* NULL once closed: every object made from it checks */
  kc_context *dctx; /* the default context (device 0) */
  int backend; /* KCPY_BACKEND_* */
  int inflight; /* calls running with the GIL released (KCPY_NOGIL), and launches converting their
                 * arguments (kcpy_launch_begin): close and destroys are refused meanwhile */
  Py_ssize_t exports; /* live exports of its Buffers' memory (KcBuffer.exports, summed) */
  PyObject *weakrefs;
  int initialized; /* __init__ ran (or runs): a Runtime is initialized once, never again after close() */
#if defined(KC_ARG_DEVPTR) && defined(KCPY_INTEROP)
  /* the foreign streams wrapped so far (interop.c), each kept until close(): a growing array */
  Py_ssize_t nstreams, streams_cap;
  kcpy_stream_ref *streams;
#endif
} KcRuntime;

typedef struct KcContext {
  PyObject ob_base;
  KcRuntime *owner;
  kc_context *ctx; /* NULL once destroyed */
  int owned; /* 0: the runtime's default context, destroyed with it */
  int device; /* the device ordinal it was created on */
  Py_ssize_t exports; /* live exports of its Buffers' memory */
} KcContext;

typedef struct KcBuffer {
  PyObject ob_base;
  KcContext *owner;
  kc_buffer *buf;
  size_t size;
  /* Live exports of its memory: buffer-protocol views (memoryview,
   * np.frombuffer) and DLPack tensors (interop.c). While any is alive,
   * Buffer.destroy, Context.destroy and Runtime.close refuse with
   * BusyError: the views point into the memory they would free. */
  Py_ssize_t exports;
} KcBuffer;

/* The arguments the cached launch converts inline (args.c): a kcache
 * Buffer for a pointer, an exact float for float/double, an exact int that
 * fits a machine word for the 32- and 64-bit integers. Anything else (an
 * array, numpy scalars, bool, half, vectors, structs) takes the full path. */
enum {
  KCPY_FAST_NONE,
  KCPY_FAST_BUF,
  KCPY_FAST_F32,
  KCPY_FAST_F64,
  KCPY_FAST_I32,
  KCPY_FAST_U32,
  KCPY_FAST_I64
};

/* A parameter as the launch path converts to it (kc_param_info, copied). */
typedef struct kcpy_param {
  uint32_t kind; /* kc_arg_kind */
  uint32_t cls; /* kc_scalar_class */
  uint32_t size; /* arg_size */
  int to_const; /* a pointer to const: a staged array is not copied back */
  uint8_t fast; /* KCPY_FAST_*: the argument the launch's fast path converts inline */
  char ekind; /* a pointer's element: 'f' floating, 'i' integer, 0 unknown or raw (void, char, T) */
  uint8_t esize; /* its size in bytes */
  char name[48];
  char ctype[32];
} kcpy_param;

/* A host array staged through a kcache buffer (OpenCL, CUDA, and the host
 * until buffers can wrap host memory): one per parameter, kept by the
 * kernel and grown as needed, so that a launch allocates nothing once it
 * has seen the array's size. */
typedef struct kcpy_stage {
  kc_buffer *buf;
  kc_context *ctx;
  uint64_t ctx_id; /* ctx's id when buf was made: a context's memory may be reused by a new one */
  size_t cap;
  uint64_t no_host_ctx; /* the id of a context where kc_buffer_host failed: staged there */
} kcpy_stage;

#if defined(KC_ARG_DEVPTR) && defined(KCPY_INTEROP)
/* kcache.Stream (stream.c). */
typedef struct KcStream {
  PyObject ob_base;
  KcContext *owner;
  kc_stream *s; /* NULL once closed */
  uint64_t ctx_id; /* kc_context_id(owner->ctx) when made: kcache reuses a destroyed context's memory */
  int wrapped; /* the caller's native queue (kc_stream_wrap) */
  PyObject *keep; /* the object it wraps (a CuPy or PyOpenCL stream), or NULL */
  PyObject *weakrefs;
} KcStream;
extern PyTypeObject KcStream_Type;
/* stream.c: a new Stream on c (native NULL or None: kc_stream_create; else
 * a native handle or stream object, wrapped). */
PyObject *kcpy_stream_new(KcContext *c, PyObject *native);
/* The kc_stream of a live Stream, else NULL with an exception. */
kc_stream *kcpy_stream_of(KcStream *s);
/* The native handle of a stream object (__cuda_stream__, .int_ptr, int): 0 or -1. */
int kcpy_stream_handle(PyObject *o, void **out);
#endif

typedef struct KcKernel {
  PyObject ob_base;
  KcRuntime *owner;
  kc_kernel *k;
  PyObject *name, *params; /* str */
  /* The parameter list of the world `pworld` (0: not read yet). */
  kc_world pworld;
  uint32_t np;
  kcpy_param p[KC_MAX_ARGS];
  kcpy_stage stage[KC_MAX_ARGS];
  /* Launches of this kernel between their conversion and their finish
   * (kcpy_launch_begin/end): while one is, another (a nested launch from an
   * argument's __float__, another thread while this one waits with the GIL
   * released) stages through buffers of its own, never through `stage`,
   * which the first one's kernel reads. */
  int staging;
  PyObject *cfg; /* the last launch configuration k[grid, block] made */
  PyObject *weakrefs;
} KcKernel;

/* k[grid, block] or k[grid, block, stream(, shared)]: a callable that
 * launches k with that geometry (on that stream). */
typedef struct KcConfig {
  PyObject ob_base;
  vectorcallfunc vectorcall;
  KcKernel *k;
  kc_dim3 grid, block;
  PyObject *stream; /* None: the context's own queue */
  unsigned shared;
} KcConfig;

typedef struct KcBound {
  PyObject ob_base;
  KcKernel *k;
  KcContext *ctx;
  kc_args *a;
  PyObject *keep; /* list: the Python objects the arguments hold */
} KcBound;

/* Runs `stmt` with the GIL released, counted in r->inflight: closing the
 * runtime or destroying one of its contexts or buffers meanwhile is refused
 * (kcache's destroy functions are not thread-safe with other calls). */
#define KCPY_NOGIL(r, stmt) \
  do { \
    (r)->inflight++; \
    PyThreadState *kcpy_save = PyEval_SaveThread(); \
    stmt; \
    PyEval_RestoreThread(kcpy_save); \
    (r)->inflight--; \
  } while (0)
/* 0, or -1 with BusyError when another thread is inside a KCPY_NOGIL call on r. */
int kcpy_check_idle(KcRuntime *r, const char *what);
/* 0, or -1 with BusyError when `exports` views of the memory `what` would free are alive. */
int kcpy_check_exports(Py_ssize_t exports, const char *what);

extern PyTypeObject KcRuntime_Type, KcContext_Type, KcBuffer_Type, KcKernel_Type, KcConfig_Type, KcBound_Type,
    KcBoundLaunch_Type, KcPin_Type;

/* module.c: raises the exception class of st with kc_errmsg(rt) attached
 * (prefixed by `what` if non-NULL); returns NULL. */
PyObject *kcpy_raise(const kc_runtime *rt, kc_status st, const char *what);
/* The exception class of st (borrowed). */
PyObject *kcpy_error_class(kc_status st);
/* The runtime is open, else RuntimeError; returns 0 or -1. */
int kcpy_check_open(KcRuntime *r);
PyObject *kcpy_stats_new(const kc_stats *s);
int kcpy_stats_init_type(void);
/* runtime.c: the FileLoad type of Runtime.define_file (made at import). */
int kcpy_fileload_init_type(void);
PyObject *kcpy_fileload_type(void);

/* args.c */
/* Parses a grid or block: an int or a tuple of 1 to 3 ints, each >= 1. */
int kcpy_dim3(PyObject *o, kc_dim3 *out, const char *what);
/* Reads k's parameter list at the caller's world into k->p, compiling the
 * kernel first with the GIL released. */
int kcpy_refresh(KcKernel *k, kc_world w);
/* Converts n Python arguments into kc_args (values in vals, one 64-byte
 * slot per argument); arrays are staged (or passed by pointer: interop.c);
 * returns 0, 1 when an argument is one that only kc_launch_ex takes (a raw
 * pointer, local memory), or -1 with an exception naming the argument.
 * views: n Py_buffers (obj NULL if unused); *own: bit i set where argument
 * i is staged through a buffer of this launch's own (KcKernel.staging),
 * which kcpy_finish_views destroys. */
typedef union kcpy_val {
  int8_t i8;
  int16_t i16;
  int32_t i32;
  int64_t i64;
  uint16_t u16;
  float f;
  double d;
  unsigned char bytes[64]; /* a struct, union or vector by value: up to 64 bytes */
} kcpy_val;
int kcpy_convert(KcKernel *k, kc_context *ctx, PyObject *const *args, uint32_t n, kc_arg *out, kcpy_val *vals,
                 Py_buffer *views, uint32_t *own);
/* The IEEE half nearest d (round to nearest even): what a `half` parameter gets. */
uint16_t kcpy_to_half(double d);
/* Destroys a staging buffer unless its context is gone. */
void kcpy_stage_drop(kcpy_stage *s);
/* Around a launch that converts arguments (which may run Python code: an
 * argument's __float__, __index__, __array_interface__, __dlpack__): the
 * runtime counts it in inflight, so that closing the runtime or destroying
 * a context, buffer or stream from that code is refused (BusyError), and
 * the kernel's staging buffers are this launch's (KcKernel.staging). */
static inline void kcpy_launch_begin(KcKernel *k) {
  k->owner->inflight++;
  k->staging++;
}
static inline void kcpy_launch_end(KcKernel *k) {
  k->staging--;
  k->owner->inflight--;
}
/* An array of elements of `kind` ('f' floating, 'i' or 'u' integer, 0 unknown)
 * and `itemsize` bytes for pointer parameter i: 0 if it fits the
 * pointer's element type (any byte-sized integer array fits any pointer:
 * raw memory), else -1 with a TypeError naming the argument. */
int kcpy_check_elem(KcKernel *k, uint32_t i, char kind, Py_ssize_t itemsize, PyObject *o);
/* The same for a buffer-protocol view (its format). */
int kcpy_check_view(KcKernel *k, uint32_t i, const Py_buffer *v, PyObject *o);
/* One scalar argument for parameter i into *a (its bytes in *v). */
int kcpy_convert_scalar(KcKernel *k, uint32_t i, PyObject *o, kc_arg *a, kcpy_val *v);
/* After the launch: copies staged arrays back (writable ones; not those
 * passed by pointer, KC_ARG_PTR), destroys the launch's own staging
 * buffers (own, from kcpy_convert) and releases the views; returns 0 or -1. */
int kcpy_finish_views(KcKernel *k, uint32_t n, const kc_arg *a, Py_buffer *views, uint32_t own,
                      int copy_back);
/* Whether a struct-module format (a Py_buffer's) holds Python objects. */
int kcpy_format_has_objects(const char *f);
/* arrays.c: a view of the host memory of an array for pointer parameter
 * i, from the buffer protocol (C-contiguous), __array_interface__ (v3, a
 * (pointer, read_only) data tuple) or __dlpack__ (a CPU tensor; DLPack 1.0
 * capsules say read-only, the older ones do not): 1 with *view filled (its
 * obj released by PyBuffer_Release after the launch; format NULL but for the
 * buffer protocol) and the element type checked, 0 when o offers none of them
 * (no exception), -1 with an exception naming the argument. */
int kcpy_host_view(KcKernel *k, uint32_t i, PyObject *o, Py_buffer *view);
/* arrays.c: whether the pending exception says that an object does not offer a protocol as asked
 * (TypeError, ValueError, OverflowError, BufferError, AttributeError): such errors may be read as
 * "not such an object" or said again naming the argument; any other (KeyboardInterrupt,
 * MemoryError, ...) must go up unchanged. */
int kcpy_err_translatable(void);
/* The pending exception, normalized, taken (a new reference; the error indicator is cleared). */
PyObject *kcpy_err_take(void);
/* Makes cause (a reference stolen; NULL: nothing) the __cause__ of the pending exception. */
void kcpy_err_chain(PyObject *cause);
/* The launch itself (k's default context if ctx is NULL; stream None and
 * shared 0 for kc_launch, else kc_launch_ex where kcache.h has it). */
PyObject *kcpy_launch(KcKernel *k, KcContext *ctx, const kc_dim3 *grid, const kc_dim3 *block,
                      PyObject *const *args, Py_ssize_t n);
PyObject *kcpy_launch_ex(KcKernel *k, KcContext *ctx, const kc_dim3 *grid, const kc_dim3 *block,
                         PyObject *const *args, Py_ssize_t n, PyObject *stream, unsigned shared);

#if defined(KC_ARG_DEVPTR) && defined(KCPY_INTEROP)
/* interop.c (KCPY_INTEROP: python/CMakeLists.txt): a foreign array for pointer parameter i passed by pointer
 * (host: its buffer, held in *view; CUDA: __cuda_array_interface__ or
 * __dlpack__): 1 done, 0 not such an object, -1 error. */
int kcpy_foreign_arg(KcKernel *k, uint32_t i, PyObject *o, kc_arg *a, Py_buffer *view);
/* The kc_stream for a stream= object (NULL for None), wrapped once per runtime. */
int kcpy_stream(KcRuntime *r, kc_context *ctx, PyObject *o, kc_stream **out);
/* Forgets the streams wrapped on ctx (its destroy destroys them with it). */
void kcpy_streams_purge(KcRuntime *r, kc_context *ctx);
/* Gives kcache.Buffer the buffer protocol (host) and __cuda_array_interface__ (CUDA). */
int kcpy_interop_init_types(void);
#endif

/* kernel.c */
PyObject *kcpy_kernel_new(KcRuntime *r, const char *name, const char *params);
/* "'k'" or "'k' [T=float]": how reprs name a kernel and its specialization. */
PyObject *kcpy_kernel_label(KcKernel *k);
/* runtime.c */
/* A Context object: a new context on device, or (device < 0) a view of the
 * runtime's default context. */
KcContext *kcpy_context_new(KcRuntime *r, int device);

#endif
