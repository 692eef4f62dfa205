/* SPDX-License-Identifier: MIT */
/*
 * cuda.h -- what the files of the CUDA backend share (src/backends/cuda/):
 * the few CUDA and NVRTC declarations kcache needs (it never includes the
 * toolkit's headers), the tables of driver and NVRTC functions loaded with
 * dlopen (load.c), and the backend's state types (cuda.c).
 */
#ifndef KC_BACKENDS_CUDA_H
#define KC_BACKENDS_CUDA_H

#include "backend.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------- the few CUDA declarations */

/* Our own copies of the driver and NVRTC types we use: cuda.h and nvrtc.h
 * are not needed to build kcache. Values are from the public headers and
 * are part of NVIDIA's stable ABI. */
typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef unsigned long long CUdeviceptr;
typedef int CUjit_option;
typedef struct _nvrtcProgram *nvrtcProgram;
typedef int nvrtcResult;

enum {
  KC__CUDA_SUCCESS = 0,
  KC__CUDA_ERROR_OUT_OF_MEMORY = 2,
  KC__CUDA_ERROR_NO_DEVICE = 100,
  KC__CUDA_ERROR_INVALID_CONTEXT = 201,
  KC__CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
  KC__CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
  KC__CUDA_ERROR_INVALID_HANDLE = 400,
  KC__CUDA_ERROR_CONTEXT_IS_DESTROYED = 709,
  KC__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  KC__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  KC__CU_JIT_ERROR_LOG_BUFFER = 5,
  KC__CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
  KC__NVRTC_SUCCESS = 0,
  KC__NVRTC_ERROR_COMPILATION = 6,
};

/* The driver entry points, versioned where the driver has several. */
#define KC__CU_DRIVER_FNS(X) \
  X(cuInit, (unsigned int flags)) \
  X(cuDriverGetVersion, (int *version)) \
  X(cuGetErrorName, (CUresult error, const char **str)) \
  X(cuGetErrorString, (CUresult error, const char **str)) \
  X(cuDeviceGetCount, (int *count)) \
  X(cuDeviceGet, (CUdevice * dev, int ordinal)) \
  X(cuDeviceGetName, (char *name, int len, CUdevice dev)) \
  X(cuDeviceGetAttribute, (int *value, int attrib, CUdevice dev)) \
  X(cuDevicePrimaryCtxRetain, (CUcontext * ctx, CUdevice dev)) \
  X(cuDevicePrimaryCtxRelease_v2, (CUdevice dev)) \
  X(cuCtxGetCurrent, (CUcontext * ctx)) \
  X(cuCtxSetCurrent, (CUcontext ctx)) \
  X(cuCtxSynchronize, (void)) \
  X(cuModuleLoadDataEx, \
    (CUmodule * mod, const void *image, unsigned int nopts, CUjit_option *opts, void **vals)) \
  X(cuModuleGetFunction, (CUfunction * fn, CUmodule mod, const char *name)) \
  X(cuModuleUnload, (CUmodule mod)) \
  X(cuLaunchKernel, \
    (CUfunction fn, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by, \
     unsigned int bz, unsigned int shmem, CUstream stream, void **params, void **extra)) \
  X(cuMemAlloc_v2, (CUdeviceptr * ptr, size_t size)) \
  X(cuMemFree_v2, (CUdeviceptr ptr)) \
  X(cuMemcpyHtoD_v2, (CUdeviceptr dst, const void *src, size_t n)) \
  X(cuMemcpyDtoH_v2, (void *dst, CUdeviceptr src, size_t n)) \
  X(cuCtxGetDevice, (CUdevice * dev)) \
  X(cuStreamCreate, (CUstream * stream, unsigned int flags)) \
  X(cuStreamDestroy_v2, (CUstream stream)) \
  X(cuStreamSynchronize, (CUstream stream)) \
  X(cuStreamGetCtx, (CUstream stream, CUcontext * ctx)) \
  X(cuStreamIsCapturing, (CUstream stream, int *status)) \
  X(cuStreamWaitEvent, (CUstream stream, CUevent ev, unsigned int flags)) \
  X(cuEventCreate, (CUevent * ev, unsigned int flags)) \
  X(cuEventRecord, (CUevent ev, CUstream stream)) \
  X(cuEventDestroy_v2, (CUevent ev)) \
  X(cuFuncSetAttribute, (CUfunction fn, int attrib, int value)) \
  X(cuFuncGetAttribute, (int *value, int attrib, CUfunction fn)) \
  X(cuMemGetAddressRange_v2, (CUdeviceptr * base, size_t * size, CUdeviceptr ptr))

/* The launch with attributes (cuLaunchKernelEx, CUDA 12.0), laid out as
 * in cuda.h: an attribute is its id, padding to 8 bytes, and a 64-byte
 * value; the config's stream follows seven unsigned ints. */
typedef struct cu_launch_attr {
  int id;
  char pad[4];
  union {
    char raw[64];
    int cooperative;
    struct {
      unsigned x, y, z;
    } cluster;
  } value;
} cu_launch_attr;
typedef struct cu_launch_config {
  unsigned grid_x, grid_y, grid_z, block_x, block_y, block_z, shared;
  CUstream stream;
  cu_launch_attr *attrs;
  unsigned nattrs;
} cu_launch_config;
_Static_assert(sizeof(cu_launch_attr) == 72, "CUlaunchAttribute is 72 bytes");
_Static_assert(offsetof(cu_launch_config, stream) == 32 && sizeof(cu_launch_config) == 56,
               "CUlaunchConfig's layout");
enum {
  KC__CU_LAUNCH_ATTRIBUTE_COOPERATIVE = 2,
  KC__CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4,
  KC__CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
  KC__CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0,
  KC__CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1,
  KC__CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X = 2, /* then Y, Z; the grid's 5, 6, 7 */
  KC__CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X = 5,
  KC__CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
  KC__CU_STREAM_NON_BLOCKING = 1,
  KC__CU_EVENT_DISABLE_TIMING = 2,
  KC__CU_STREAM_CAPTURE_STATUS_NONE = 0,
};
typedef CUresult (*cu_launch_ex_fn)(const cu_launch_config *cfg, CUfunction fn, void **params, void **extra);

/* NVRTC: required, then optional (cubin output is 11.1+, arch lists 11.2+). */
#define KC__NVRTC_FNS(X) \
  X(nvrtcVersion, (int *major, int *minor)) \
  X(nvrtcCreateProgram, (nvrtcProgram * prog, const char *src, const char *name, int nheaders, \
                         const char *const *headers, const char *const *include_names)) \
  X(nvrtcDestroyProgram, (nvrtcProgram * prog)) \
  X(nvrtcCompileProgram, (nvrtcProgram prog, int nopts, const char *const *opts)) \
  X(nvrtcGetProgramLogSize, (nvrtcProgram prog, size_t * size)) \
  X(nvrtcGetProgramLog, (nvrtcProgram prog, char *log)) \
  X(nvrtcGetPTXSize, (nvrtcProgram prog, size_t * size)) \
  X(nvrtcGetPTX, (nvrtcProgram prog, char *ptx))
#define KC__NVRTC_OPTIONAL_FNS(X) \
  X(nvrtcGetCUBINSize, (nvrtcProgram prog, size_t * size)) \
  X(nvrtcGetCUBIN, (nvrtcProgram prog, char *cubin)) \
  X(nvrtcGetNumSupportedArchs, (int *n)) \
  X(nvrtcGetSupportedArchs, (int *archs)) \
  X(nvrtcAddNameExpression, (nvrtcProgram prog, const char *name_expression)) \
  X(nvrtcGetLoweredName, (nvrtcProgram prog, const char *name_expression, const char **lowered_name))

#define KC__FIELD(name, args) CUresult(*name) args;
#define KC__NVFIELD(name, args) nvrtcResult(*name) args;

typedef struct cu_driver {
  kc__once once;
  const char *why; /* NULL once the driver works and sees a device */
  char why_buf[512];
  int version;
  KC__CU_DRIVER_FNS(KC__FIELD)
  cu_launch_ex_fn cuLaunchKernelEx; /* NULL before CUDA 12.0 */
} cu_driver;
extern cu_driver cu_drv; /* load.c */

typedef struct cu_nvrtc_lib {
  kc__once once;
  const char *why; /* NULL once NVRTC is loaded */
  int major, minor;
  bool serialize; /* NVRTC before 11 is not documented thread-safe */
  kc__mutex lock;
  const char *(*nvrtcGetErrorString)(nvrtcResult r); /* the one that returns no status */
  KC__NVRTC_FNS(KC__NVFIELD)
  KC__NVRTC_OPTIONAL_FNS(KC__NVFIELD)
} cu_nvrtc_lib;
extern cu_nvrtc_lib cu_nvrtc; /* load.c */

#undef KC__FIELD
#undef KC__NVFIELD

/* load.c: loading the driver and NVRTC, errors, compiling */
bool cu_sym(void *lib, const char *name, void *fnptr);
const char *cu_errname(CUresult r);
const char *cu_errstr(CUresult r);
/* Why the driver cannot be used here, or NULL. */
const char *cu_unavailable(const kc__bconfig *cfg);
/* "<call>: CUDA_ERROR_X (n): <driver's text><detail>" */
kc_status cu_fail(const kc__bsvc *sv, kc_status st, const char *call, CUresult r,
                  const char *detail) KC__COLD;
extern const char cu_prelude[];
/* The values of a program's parameter probe (backend.h), read from its PTX. */
typedef struct cu_probe_out {
  uint64_t vals[1 + 2 * KC_MAX_ARGS];
  size_t n; /* 0: the program has no probe, or NVRTC kept no PTX */
} cu_probe_out;
/* probe: NULL, or filled from the compiled program's PTX. */
kc_status cu_compile_tu(const kc__bsvc *sv, const char *text, size_t len, const char *entry, int arch,
                        bool ptx, const char *options, void **out, size_t *out_size, kc__sb *log,
                        cu_probe_out *probe);
/* A name expression's lowered name travels at the end of the artifact,
 * after the PTX's NUL or the cubin's ELF image (which the driver reads by
 * its own headers): "\0" LOWERED "\0" then the 8 bytes of KC__CU_LOWERED.
 * cu_lowered_name finds it (NULL: the artifact has none; the entry is
 * found by its own name). */
#define KC__CU_LOWERED "KCLOWER1"
const char *cu_lowered_name(const void *bytes, size_t size);
/* probe.c */
kc_status cu_epilogue(void *state, const kc__tu *tu, kc__sb *out);
size_t cu_probe_parse(const char *ptx, uint64_t *vals, size_t cap);

typedef struct cu_dev {
  CUdevice dev;
  int cc; /* compute capability as major*10+minor: 90 for 9.0, 120 for 12.0 */
  char name[256];
} cu_dev;

typedef struct cu_state {
  const kc__bsvc *sv; /* &svc: allocation, errors (backend.h) */
  kc__bsvc svc; /* the copy kept from open */
  const char *compile_options; /* kc_options.compile_options (the runtime's copy) */
  bool force_ptx; /* $KC_CUDA_FORCE_PTX (kc__bconfig) */
  cu_dev *devs;
  int ndevs;
  int arch; /* what NVRTC compiles for */
  bool ptx; /* artifacts are PTX for compute_<arch>, JIT-compiled by the driver */
  char identity[512];
} cu_state;

typedef struct cu_ctx {
  cu_state *st;
  uint64_t id; /* never reused */
  CUdevice dev;
  CUcontext ctx; /* the device's primary context, retained; or the caller's (wrapped) */
  CUstream stream; /* NULL: the legacy default stream (see the top) */
  bool wrapped; /* kc_context_wrap: ctx is the caller's, never released */
} cu_ctx;

/* The services of the backend that linked l (its context's). */
static inline const kc__bsvc *cu_sv(const kc__blinked *l) { return ((const cu_ctx *)l->bctx)->st->sv; }

/* load.c: kcache leaves the calling thread's current context as it found
 * it. cu_enter makes c's context current for kcache's own driver calls
 * (nothing to do when it is already) and returns the caller's in *prev;
 * cu_leave(c, prev) restores it. Every cu_enter that returned KC_OK has its
 * cu_leave. */
kc_status cu_enter(const cu_ctx *c, CUcontext *prev);
void cu_leave(const cu_ctx *c, CUcontext prev);

/* interop.c: adopted contexts, streams, foreign memory, configured launches. */
kc_status cu_ctx_wrap(void *state, void *native_ctx, void *native_dev, void **bctx);
void *cu_ctx_native(void *bctx);
kc_status cu_stream_create(void *bctx, void **native);
kc_status cu_stream_wrap(void *bctx, void *native);
void cu_stream_release(void *bctx, void *native, bool owned);
kc_status cu_stream_sync(void *bctx, void *native);
kc_status cu_stream_wait(void *bctx, void *native, void *other);
bool cu_stream_capturing(void *bctx, void *native);
kc_status cu_buf_wrap(void *bctx, void *native, size_t size, kc__bufh *h);
kc_status cu_launch_ex(kc__blinked *l, void **argv, const kc__lcfg *cfg);
/* After the driver refused a launch: if it asked more than the device or
 * the function takes (threads per block, block and grid dimensions,
 * dynamic shared memory), that error, naming the limit (KC_EINVAL; shared
 * memory KC_EARGS); KC_OK when every size is within them. Cold. */
kc_status cu_limits_refused(const kc__blinked *l, const kc_dim3 *grid, const kc_dim3 *block, uint32_t shared);

#endif /* KC_BACKENDS_CUDA_H */
