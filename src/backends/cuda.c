/*
 * cuda.c -- the CUDA backend: NVRTC compiles the assembled closure (CUDA C++)
 * straight to a cubin for the device's exact architecture, or to PTX for the
 * newest architecture NVRTC knows when it does not know the device's, which
 * the driver then JIT-compiles at link. The driver API loads and launches it.
 *
 * It owns: loading NVRTC and the driver with dlopen (never linked, so kcache
 * builds and runs where neither exists, and says why the backend is
 * unavailable), the CUDA dialect prelude, device selection, the per-context
 * session (a retained primary context) and the launch.
 *
 * Choices, and why:
 *  - Contexts. A kc_context on device d retains d's primary context: the one
 *    the CUDA runtime and most libraries use, so kcache buffers and theirs
 *    are interchangeable. kc contexts on the same device share it (and its
 *    default stream); each keeps its own modules. kcache leaves that context
 *    current on the threads that used it, as the CUDA runtime does.
 *  - Stream. Launches go to the legacy default stream (0): it orders them
 *    with the blocking cuMemcpyHtoD/DtoH of kc_buffer_write/read, so a read
 *    after a launch sees its result without an explicit finish, like an
 *    in-order OpenCL queue. kc_context_finish is cuCtxSynchronize.
 *  - Reset. kc_context_reset must keep buffers valid, so it never resets the
 *    primary context (cuDevicePrimaryCtxReset would free every allocation of
 *    every kc context on the device). The engine unlinks every linked object
 *    (unlink synchronizes, then cuModuleUnload) and ctx_reset drains the
 *    queue; the next launch reloads the stored cubin without calling NVRTC.
 *  - Current context on the fast path. Making a context current is a driver
 *    call, so the launch compares the context's never-reused id with a
 *    thread-local copy of the last one this thread bound (one TLS load and a
 *    compare). If the application made another context current behind
 *    kcache's back, the driver either launches in the function's own
 *    context or fails with a context error; then the cold path binds ours
 *    and retries once (a failed launch enqueued nothing).
 *  - KC_CUDA_FORCE_PTX=1 compiles to PTX even for an architecture NVRTC
 *    knows, to exercise the driver-JIT path on any GPU.
 */
#include "backend.h"

#include <ctype.h>
#include <dlfcn.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
#define KC__CU_DRIVER_FNS(X)                                                                      \
  X(cuInit, (unsigned int flags))                                                                 \
  X(cuDriverGetVersion, (int *version))                                                           \
  X(cuGetErrorName, (CUresult error, const char **str))                                           \
  X(cuGetErrorString, (CUresult error, const char **str))                                         \
  X(cuDeviceGetCount, (int *count))                                                               \
  X(cuDeviceGet, (CUdevice * dev, int ordinal))                                                   \
  X(cuDeviceGetName, (char *name, int len, CUdevice dev))                                         \
  X(cuDeviceGetAttribute, (int *value, int attrib, CUdevice dev))                                 \
  X(cuDevicePrimaryCtxRetain, (CUcontext * ctx, CUdevice dev))                                    \
  X(cuDevicePrimaryCtxRelease_v2, (CUdevice dev))                                                 \
  X(cuCtxGetCurrent, (CUcontext * ctx))                                                           \
  X(cuCtxSetCurrent, (CUcontext ctx))                                                             \
  X(cuCtxSynchronize, (void))                                                                     \
  X(cuModuleLoadDataEx, (CUmodule * mod, const void *image, unsigned int nopts,                   \
                         CUjit_option *opts, void **vals))                                        \
  X(cuModuleGetFunction, (CUfunction * fn, CUmodule mod, const char *name))                       \
  X(cuModuleUnload, (CUmodule mod))                                                               \
  X(cuLaunchKernel, (CUfunction fn, unsigned int gx, unsigned int gy, unsigned int gz,            \
                     unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,       \
                     CUstream stream, void **params, void **extra))                               \
  X(cuMemAlloc_v2, (CUdeviceptr * ptr, size_t size))                                              \
  X(cuMemFree_v2, (CUdeviceptr ptr))                                                              \
  X(cuMemcpyHtoD_v2, (CUdeviceptr dst, const void *src, size_t n))                                \
  X(cuMemcpyDtoH_v2, (void *dst, CUdeviceptr src, size_t n))

/* NVRTC: required, then optional (cubin output is 11.1+, arch lists 11.2+). */
#define KC__NVRTC_FNS(X)                                                                          \
  X(nvrtcVersion, (int *major, int *minor))                                                       \
  X(nvrtcCreateProgram, (nvrtcProgram * prog, const char *src, const char *name, int nheaders,    \
                         const char *const *headers, const char *const *include_names))           \
  X(nvrtcDestroyProgram, (nvrtcProgram * prog))                                                   \
  X(nvrtcCompileProgram, (nvrtcProgram prog, int nopts, const char *const *opts))                 \
  X(nvrtcGetProgramLogSize, (nvrtcProgram prog, size_t *size))                                    \
  X(nvrtcGetProgramLog, (nvrtcProgram prog, char *log))                                           \
  X(nvrtcGetPTXSize, (nvrtcProgram prog, size_t *size))                                           \
  X(nvrtcGetPTX, (nvrtcProgram prog, char *ptx))
#define KC__NVRTC_OPTIONAL_FNS(X)                                                                 \
  X(nvrtcGetCUBINSize, (nvrtcProgram prog, size_t *size))                                         \
  X(nvrtcGetCUBIN, (nvrtcProgram prog, char *cubin))                                              \
  X(nvrtcGetNumSupportedArchs, (int *n))                                                          \
  X(nvrtcGetSupportedArchs, (int *archs))

#define KC__FIELD(name, args) CUresult (*name) args;
#define KC__NVFIELD(name, args) nvrtcResult (*name) args;

static struct {
  kc__once once;
  const char *why; /* NULL once the driver works and sees a device */
  char why_buf[256];
  int version;
  KC__CU_DRIVER_FNS(KC__FIELD)
} kc__cu = {.once = KC__ONCE_INIT};

static struct {
  kc__once once;
  const char *why; /* NULL once NVRTC is loaded */
  int major, minor;
  bool serialize; /* NVRTC before 11 is not documented thread-safe */
  kc__mutex lock;
  const char *(*nvrtcGetErrorString)(nvrtcResult r); /* the one that returns no status */
  KC__NVRTC_FNS(KC__NVFIELD)
  KC__NVRTC_OPTIONAL_FNS(KC__NVFIELD)
} kc__nv = {.once = KC__ONCE_INIT};

#undef KC__FIELD
#undef KC__NVFIELD

_Static_assert(sizeof(void *) == sizeof(void (*)(void)), "dlsym needs data and code pointers alike");

/* dlsym into a function pointer without the undefined cast. */
static bool kc__cu_sym(void *lib, const char *name, void *fnptr) {
  void *p = dlsym(lib, name);
  memcpy(fnptr, &p, sizeof p);
  return p != NULL;
}

/* ------------------------------------------------------ loading NVRTC */

/* Sonames NVRTC has shipped under, newest first. */
static const char *const kc__nvrtc_names[] = {
    "libnvrtc.so",      "libnvrtc.so.13",   "libnvrtc.so.12",   "libnvrtc.so.11.2",
    "libnvrtc.so.11.1", "libnvrtc.so.11.0", "libnvrtc.so.10.2", "libnvrtc.so.10.1",
};

/* Takes lib if it has every required entry point; else closes it. */
static bool kc__nvrtc_adopt(void *lib) {
  if (!lib)
    return false;
  bool ok = true;
#define KC__RESOLVE(name, args) ok = ok && kc__cu_sym(lib, #name, &kc__nv.name);
  KC__NVRTC_FNS(KC__RESOLVE)
#undef KC__RESOLVE
  ok = ok && kc__cu_sym(lib, "nvrtcGetErrorString", &kc__nv.nvrtcGetErrorString);
  if (!ok) {
    dlclose(lib);
    return false;
  }
#define KC__RESOLVE(name, args) kc__cu_sym(lib, #name, &kc__nv.name);
  KC__NVRTC_OPTIONAL_FNS(KC__RESOLVE)
#undef KC__RESOLVE
  if (!kc__nv.nvrtcGetCUBIN || !kc__nv.nvrtcGetCUBINSize)
    kc__nv.nvrtcGetCUBIN = NULL, kc__nv.nvrtcGetCUBINSize = NULL;
  if (!kc__nv.nvrtcGetSupportedArchs || !kc__nv.nvrtcGetNumSupportedArchs)
    kc__nv.nvrtcGetSupportedArchs = NULL, kc__nv.nvrtcGetNumSupportedArchs = NULL;
  return true; /* never dlclose'd: NVRTC stays loaded for the process */
}

static bool kc__nvrtc_try_dir(const char *root, const char *sub) {
  if (!root || !*root)
    return false;
  char path[4096];
  for (size_t i = 0; i < sizeof kc__nvrtc_names / sizeof *kc__nvrtc_names; i++) {
    snprintf(path, sizeof path, "%s/%s/%s", root, sub, kc__nvrtc_names[i]);
    if (kc__nvrtc_adopt(dlopen(path, RTLD_NOW | RTLD_LOCAL)))
      return true;
  }
  /* Any other version the toolkit ships, newest name last in glob order. */
  snprintf(path, sizeof path, "%s/%s/libnvrtc.so.*", root, sub);
  glob_t g;
  bool found = false;
  if (glob(path, 0, NULL, &g) == 0) {
    for (size_t i = g.gl_pathc; i-- > 0 && !found;)
      found = kc__nvrtc_adopt(dlopen(g.gl_pathv[i], RTLD_NOW | RTLD_LOCAL));
    globfree(&g);
  }
  return found;
}

/* NVRTC dlopens libnvrtc-builtins.so.X.Y by its bare name at the first
 * compile, so one found through CUDA_HOME outside the loader's path fails
 * then. Loading the builtins from NVRTC's own directory first makes that
 * dlopen find them already loaded (by soname). */
static void kc__nvrtc_preload_builtins(void) {
  void *addr;
  memcpy(&addr, &kc__nv.nvrtcVersion, sizeof addr);
  Dl_info info;
  if (!dladdr(addr, &info) || !info.dli_fname || !strchr(info.dli_fname, '/'))
    return;
  char dir[4096], path[4096 + 64];
  snprintf(dir, sizeof dir, "%s", info.dli_fname);
  *strrchr(dir, '/') = '\0';
  snprintf(path, sizeof path, "%s/libnvrtc-builtins.so.%d.%d", dir, kc__nv.major, kc__nv.minor);
  if (dlopen(path, RTLD_NOW | RTLD_LOCAL))
    return;
  snprintf(path, sizeof path, "%s/libnvrtc-builtins.so.%d*", dir, kc__nv.major);
  glob_t g;
  if (glob(path, 0, NULL, &g) == 0) {
    for (size_t i = g.gl_pathc; i-- > 0;)
      if (dlopen(g.gl_pathv[i], RTLD_NOW | RTLD_LOCAL))
        break;
    globfree(&g);
  }
}

static void kc__nvrtc_load(void) {
  static const char *const roots[] = {"CUDA_HOME", "CUDA_PATH"};
  bool found = false;
  for (size_t i = 0; i < 2 && !found; i++) {
    const char *root = getenv(roots[i]);
    found = kc__nvrtc_try_dir(root, "lib64") || kc__nvrtc_try_dir(root, "lib");
  }
  if (!found)
    found = kc__nvrtc_try_dir("/usr/local/cuda", "lib64");
  for (size_t i = 0; !found && i < sizeof kc__nvrtc_names / sizeof *kc__nvrtc_names; i++)
    found = kc__nvrtc_adopt(dlopen(kc__nvrtc_names[i], RTLD_NOW | RTLD_LOCAL));
  if (!found) {
    kc__nv.why = "NVRTC not found (set CUDA_HOME)";
    return;
  }
  if (kc__nv.nvrtcVersion(&kc__nv.major, &kc__nv.minor) != KC__NVRTC_SUCCESS) {
    kc__nv.why = "NVRTC found but nvrtcVersion failed";
    return;
  }
  kc__nvrtc_preload_builtins();
  kc__nv.serialize = kc__nv.major < 11;
  if (kc__nv.serialize && !kc__mutex_init(&kc__nv.lock)) {
    kc__nv.why = "NVRTC: cannot create its lock";
    return;
  }
  kc__nv.why = NULL;
}

const char *kc__cuda_nvrtc_unavailable(void) {
  kc__call_once(&kc__nv.once, kc__nvrtc_load);
  return kc__nv.why;
}

/* ---------------------------------------------------- loading the driver */

static const char *kc__cu_errname(CUresult r) {
  const char *s = NULL;
  if (kc__cu.cuGetErrorName && kc__cu.cuGetErrorName(r, &s) == KC__CUDA_SUCCESS && s)
    return s;
  return "CUDA_ERROR_UNKNOWN_CODE";
}

static const char *kc__cu_errstr(CUresult r) {
  const char *s = NULL;
  if (kc__cu.cuGetErrorString && kc__cu.cuGetErrorString(r, &s) == KC__CUDA_SUCCESS && s)
    return s;
  return "unrecognized error code";
}

static void kc__cu_load(void) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    kc__cu.why = "no CUDA driver (libcuda.so.1 not found)";
    return;
  }
#define KC__RESOLVE(name, args)                                                                   \
  if (!kc__cu_sym(lib, #name, &kc__cu.name)) {                                                    \
    snprintf(kc__cu.why_buf, sizeof kc__cu.why_buf,                                               \
             "CUDA driver too old: libcuda.so.1 has no %s", #name);                               \
    kc__cu.why = kc__cu.why_buf;                                                                  \
    return;                                                                                       \
  }
  KC__CU_DRIVER_FNS(KC__RESOLVE)
#undef KC__RESOLVE
  CUresult r = kc__cu.cuInit(0);
  if (r == KC__CUDA_ERROR_NO_DEVICE) {
    kc__cu.why = "no CUDA device";
    return;
  }
  if (r != KC__CUDA_SUCCESS) {
    snprintf(kc__cu.why_buf, sizeof kc__cu.why_buf, "CUDA driver unusable: cuInit: %s (%d): %s",
             kc__cu_errname(r), r, kc__cu_errstr(r));
    kc__cu.why = kc__cu.why_buf;
    return;
  }
  int n = 0;
  if (kc__cu.cuDeviceGetCount(&n) != KC__CUDA_SUCCESS || n < 1) {
    kc__cu.why = "no CUDA device";
    return;
  }
  if (kc__cu.cuDriverGetVersion(&kc__cu.version) != KC__CUDA_SUCCESS)
    kc__cu.version = 0;
  kc__cu.why = NULL;
}

static const char *kc__cu_unavailable(void) {
  kc__call_once(&kc__cu.once, kc__cu_load);
  if (kc__cu.why)
    return kc__cu.why;
  return kc__cuda_nvrtc_unavailable();
}

/* "<call>: CUDA_ERROR_X (n): <driver's text><detail>" */
static KC__COLD kc_status kc__cu_fail(const kc_runtime *rt, kc_status st, const char *call,
                                      CUresult r, const char *detail) {
  return kc__err(rt, st, "%s: %s (%d): %s%s", call, kc__cu_errname(r), r, kc__cu_errstr(r),
                 detail ? detail : "");
}

/* ------------------------------------------------------------ the state */

typedef struct kc__cudev {
  CUdevice dev;
  int cc; /* compute capability as major*10+minor: 90 for 9.0, 120 for 12.0 */
  char name[256];
} kc__cudev;

typedef struct kc__cuda {
  kc_runtime *rt;              /* for the services: allocation, errors */
  const char *compile_options; /* kc_options.compile_options (the runtime's copy) */
  kc__cudev *devs;
  int ndevs;
  int arch; /* what NVRTC compiles for */
  bool ptx; /* artifacts are PTX for compute_<arch>, JIT-compiled by the driver */
  char identity[512];
} kc__cuda;

typedef struct kc__cuctx {
  kc__cuda *st;
  uint64_t id; /* never reused: the thread's binding cache compares it */
  CUdevice dev;
  CUcontext ctx; /* the device's primary context, retained */
  CUstream stream; /* NULL: the legacy default stream (see the top) */
} kc__cuctx;

/* The id of the kc context whose CUDA context this thread made current last.
 * Ids are never reused, so a destroyed context's id never matches again. */
#if defined(__GNUC__)
static _Thread_local uint64_t kc__cu_bound __attribute__((tls_model("initial-exec")));
#else
static _Thread_local uint64_t kc__cu_bound;
#endif

/* Makes c's context current on this thread (a slow path: it asks the
 * driver), and records it for the launch fast path. */
static KC__NOINLINE kc_status kc__cu_bind(const kc__cuctx *c) {
  CUcontext cur = NULL;
  CUresult r = kc__cu.cuCtxGetCurrent(&cur);
  if (r != KC__CUDA_SUCCESS || cur != c->ctx) {
    r = kc__cu.cuCtxSetCurrent(c->ctx);
    if (r != KC__CUDA_SUCCESS) {
      kc__cu_bound = 0;
      return kc__cu_fail(c->st->rt, KC_EBACKEND, "cuCtxSetCurrent", r, "");
    }
  }
  kc__cu_bound = c->id;
  return KC_OK;
}

static bool kc__contains_nocase(const char *hay, const char *needle) {
  size_t n = strlen(needle);
  for (; *hay; hay++) {
    size_t i = 0;
    while (i < n && tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i]))
      i++;
    if (i == n)
      return true;
  }
  return n == 0;
}

/* Picks the architecture NVRTC compiles for: the devices' exact one as a
 * cubin when NVRTC knows it, else PTX for the newest one it knows below
 * it. Devices of different architectures share PTX for the oldest. */
static kc_status kc__cu_pick_arch(kc__cuda *st) {
  int lo = st->devs[0].cc;
  bool mixed = false;
  for (int i = 1; i < st->ndevs; i++) {
    mixed |= st->devs[i].cc != lo;
    if (st->devs[i].cc < lo)
      lo = st->devs[i].cc;
  }
  bool force = false;
  kc__setting_bool(KC__SET_CUDA_FORCE_PTX, &force); /* set, not empty and not "0" */
  bool want_ptx = mixed || !kc__nv.nvrtcGetCUBIN || force;
  if (!kc__nv.nvrtcGetSupportedArchs) { /* NVRTC < 11.2: trust it with the device's arch */
    st->arch = lo;
    st->ptx = want_ptx;
    return KC_OK;
  }
  int n = 0;
  if (kc__nv.nvrtcGetNumSupportedArchs(&n) != KC__NVRTC_SUCCESS || n <= 0 || n > 512)
    return kc__err(st->rt, KC_EUNAVAILABLE, "NVRTC %d.%d lists no supported architecture",
                   kc__nv.major, kc__nv.minor);
  int archs[512];
  if (kc__nv.nvrtcGetSupportedArchs(archs) != KC__NVRTC_SUCCESS)
    return kc__err(st->rt, KC_EUNAVAILABLE, "nvrtcGetSupportedArchs failed");
  int best = 0, lowest = archs[0];
  bool exact = false;
  for (int i = 0; i < n; i++) {
    exact |= archs[i] == lo;
    if (archs[i] <= lo && archs[i] > best)
      best = archs[i];
    if (archs[i] < lowest)
      lowest = archs[i];
  }
  if (!best)
    return kc__err(st->rt, KC_EUNAVAILABLE,
                   "CUDA device '%s' (sm_%d) is older than every architecture NVRTC %d.%d "
                   "supports (lowest: sm_%d)",
                   st->devs[0].name, lo, kc__nv.major, kc__nv.minor, lowest);
  st->arch = exact ? lo : best;
  st->ptx = want_ptx || !exact;
  return KC_OK;
}

static kc_status kc__cu_open(kc_runtime *rt, const kc_options *opt, void **state) {
  *state = NULL;
  const char *why = kc__cu_unavailable();
  if (why)
    return kc__err(rt, KC_EUNAVAILABLE, "CUDA backend unavailable: %s", why);
  int n = 0;
  CUresult r = kc__cu.cuDeviceGetCount(&n);
  if (r != KC__CUDA_SUCCESS)
    return kc__cu_fail(rt, KC_EUNAVAILABLE, "cuDeviceGetCount", r, "");
  kc__cuda *st = kc__calloc(rt, sizeof *st);
  if (!st || !(st->devs = kc__calloc(rt, sizeof *st->devs * (size_t)(n > 0 ? n : 1)))) {
    kc__free(rt, st);
    return kc__err(rt, KC_ENOMEM, "out of memory opening the CUDA backend");
  }
  st->rt = rt;
  st->compile_options = opt ? opt->compile_options : NULL;
  const char *filter = opt && opt->device_name && *opt->device_name ? opt->device_name : NULL;
  kc_status s = KC_OK;
  for (int i = 0; i < n && s == KC_OK; i++) {
    kc__cudev d = {0};
    int major = 0, minor = 0;
    if ((r = kc__cu.cuDeviceGet(&d.dev, i)) != KC__CUDA_SUCCESS)
      s = kc__cu_fail(rt, KC_EUNAVAILABLE, "cuDeviceGet", r, "");
    else if ((r = kc__cu.cuDeviceGetName(d.name, (int)sizeof d.name, d.dev)) != KC__CUDA_SUCCESS)
      s = kc__cu_fail(rt, KC_EUNAVAILABLE, "cuDeviceGetName", r, "");
    else if ((r = kc__cu.cuDeviceGetAttribute(
                  &major, KC__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d.dev)) ||
             (r = kc__cu.cuDeviceGetAttribute(
                  &minor, KC__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d.dev)))
      s = kc__cu_fail(rt, KC_EUNAVAILABLE, "cuDeviceGetAttribute", r, " (compute capability)");
    else if (!filter || kc__contains_nocase(d.name, filter)) {
      d.name[sizeof d.name - 1] = '\0';
      d.cc = major * 10 + minor;
      st->devs[st->ndevs++] = d;
    }
  }
  if (s == KC_OK && st->ndevs == 0)
    s = kc__err(rt, KC_EUNAVAILABLE, "no CUDA device matches '%s'", filter);
  if (s == KC_OK)
    s = kc__cu_pick_arch(st);
  if (s != KC_OK) {
    kc__free(rt, st->devs);
    kc__free(rt, st);
    return s;
  }
  snprintf(st->identity, sizeof st->identity, "cuda|nvrtc %d.%d|driver %d.%d|%s_%d|%s",
           kc__nv.major, kc__nv.minor, kc__cu.version / 1000, kc__cu.version % 1000 / 10,
           st->ptx ? "compute" : "sm", st->arch, st->devs[0].name);
  *state = st;
  return KC_OK;
}

static void kc__cu_close(void *state) {
  kc__cuda *st = state;
  if (!st)
    return;
  kc__free(st->rt, st->devs);
  kc__free(st->rt, st);
}

static int kc__cu_device_count(void *state) {
  return ((kc__cuda *)state)->ndevs;
}

static const char *kc__cu_device_name(void *state, int index) {
  kc__cuda *st = state;
  return index >= 0 && index < st->ndevs ? st->devs[index].name : NULL;
}

static const char *kc__cu_identity(void *state) {
  return ((kc__cuda *)state)->identity;
}

/* ------------------------------------------------------------ compiling */

/* The kernel dialect in CUDA C++. NVRTC has no standard headers, so the
 * fixed-width types are spelled out (size_t and ptrdiff_t are built in). */
static const char kc__cu_prelude[] =
    "/* kcache prelude: CUDA (NVRTC) */\n"
    "#define KC_BACKEND_CUDA 1\n"
    "#define KC_KERNEL extern \"C\" __global__\n"
    "#define KC_DEVICE __device__\n"
    "#define KC_GLOBAL\n"
    "#define KC_LOCAL __shared__\n"
    "typedef unsigned char uchar;\n"
    "typedef unsigned short ushort;\n"
    "typedef unsigned int uint;\n"
    "typedef unsigned long long ulong;\n"
    "typedef signed char int8_t;\n"
    "typedef unsigned char uint8_t;\n"
    "typedef short int16_t;\n"
    "typedef unsigned short uint16_t;\n"
    "typedef int int32_t;\n"
    "typedef unsigned int uint32_t;\n"
    "typedef long long int64_t;\n"
    "typedef unsigned long long uint64_t;\n"
    "typedef long long intptr_t;\n"
    "typedef unsigned long long uintptr_t;\n"
    "__device__ __forceinline__ unsigned kc__threadIdx(int d)"
    " { return d == 0 ? threadIdx.x : d == 1 ? threadIdx.y : threadIdx.z; }\n"
    "__device__ __forceinline__ unsigned kc__blockIdx(int d)"
    " { return d == 0 ? blockIdx.x : d == 1 ? blockIdx.y : blockIdx.z; }\n"
    "__device__ __forceinline__ unsigned kc__blockDim(int d)"
    " { return d == 0 ? blockDim.x : d == 1 ? blockDim.y : blockDim.z; }\n"
    "__device__ __forceinline__ unsigned kc__gridDim(int d)"
    " { return d == 0 ? gridDim.x : d == 1 ? gridDim.y : gridDim.z; }\n"
    "#define kc_global_id(d) ((size_t)kc__blockIdx(d) * kc__blockDim(d) + kc__threadIdx(d))\n"
    "#define kc_local_id(d) ((size_t)kc__threadIdx(d))\n"
    "#define kc_group_id(d) ((size_t)kc__blockIdx(d))\n"
    "#define kc_global_size(d) ((size_t)kc__gridDim(d) * kc__blockDim(d))\n"
    "#define kc_local_size(d) ((size_t)kc__blockDim(d))\n"
    "#define kc_num_groups(d) ((size_t)kc__gridDim(d))\n"
    "#define kc_barrier() __syncthreads()\n";

/* Compiles one translation unit for compute capability `arch` (cubin for
 * sm_<arch>, or PTX for compute_<arch>). user_opts: extra NVRTC options
 * separated by white space. The log gets NVRTC's output, also on success. */
static kc_status kc__cu_compile_tu(kc_runtime *rt, const char *text, size_t len, const char *entry,
                                   int arch, bool ptx, const char *user_opts, void **out,
                                   size_t *out_size, kc__sb *log) {
  *out = NULL;
  *out_size = 0;
  kc_status s = KC_OK;
  char *src = kc__strndup(rt, text, len); /* NVRTC wants a C string */
  char *optbuf = kc__strdup(rt, user_opts ? user_opts : "");
  const char **opts = optbuf ? kc__alloc(rt, sizeof *opts * (strlen(optbuf) / 2 + 2)) : NULL;
  char *logtext = NULL;
  nvrtcProgram prog = NULL;
  if (!src || !optbuf || !opts) {
    s = kc__err(rt, KC_ENOMEM, "out of memory compiling kernel '%s'", entry);
    goto done;
  }
  char archopt[32], progname[256];
  snprintf(archopt, sizeof archopt, "-arch=%s_%d", ptx ? "compute" : "sm", arch);
  snprintf(progname, sizeof progname, "%s.cu", entry);
  int nopts = 0;
  opts[nopts++] = archopt;
  for (char *p = optbuf; *p;) {
    while (*p == ' ' || *p == '\t' || *p == '\n')
      *p++ = '\0';
    if (!*p)
      break;
    opts[nopts++] = p;
    while (*p && *p != ' ' && *p != '\t' && *p != '\n')
      p++;
  }

  nvrtcResult r = kc__nv.nvrtcCreateProgram(&prog, src, progname, 0, NULL, NULL);
  if (r != KC__NVRTC_SUCCESS) {
    prog = NULL;
    s = kc__err(rt, KC_ECOMPILE, "NVRTC compile of kernel '%s' failed:\nnvrtcCreateProgram: %s",
                entry, kc__nv.nvrtcGetErrorString(r));
    goto done;
  }
  if (kc__nv.serialize)
    kc__lock(&kc__nv.lock);
  r = kc__nv.nvrtcCompileProgram(prog, nopts, opts);
  if (kc__nv.serialize)
    kc__unlock(&kc__nv.lock);

  size_t loglen = 0;
  if (kc__nv.nvrtcGetProgramLogSize(prog, &loglen) == KC__NVRTC_SUCCESS && loglen > 0 &&
      (logtext = kc__alloc(rt, loglen + 1))) {
    if (kc__nv.nvrtcGetProgramLog(prog, logtext) != KC__NVRTC_SUCCESS)
      loglen = 0;
    logtext[loglen] = '\0';
    loglen = strlen(logtext);
    if (log)
      kc__sb_append(log, logtext, loglen);
  }
  if (r != KC__NVRTC_SUCCESS) {
    if (r == KC__NVRTC_ERROR_COMPILATION)
      s = kc__err(rt, KC_ECOMPILE, "NVRTC compile of kernel '%s' failed:\n%s", entry,
                  logtext ? logtext : "");
    else
      s = kc__err(rt, KC_ECOMPILE, "NVRTC compile of kernel '%s' failed:\n%s (options: %s %s)\n%s",
                  entry, kc__nv.nvrtcGetErrorString(r), archopt, user_opts ? user_opts : "",
                  logtext ? logtext : "");
    goto done;
  }

  size_t n = 0;
  if (ptx)
    r = kc__nv.nvrtcGetPTXSize(prog, &n); /* counts the NUL */
  else
    r = kc__nv.nvrtcGetCUBINSize(prog, &n);
  if (r != KC__NVRTC_SUCCESS || n == 0) {
    s = kc__err(rt, KC_ECOMPILE, "NVRTC compile of kernel '%s' failed:\n%s: %s", entry,
                ptx ? "nvrtcGetPTXSize" : "nvrtcGetCUBINSize",
                r ? kc__nv.nvrtcGetErrorString(r) : "empty output");
    goto done;
  }
  char *art = kc__alloc(rt, n);
  if (!art) {
    s = kc__err(rt, KC_ENOMEM, "out of memory for the %zu-byte artifact of kernel '%s'", n, entry);
    goto done;
  }
  r = ptx ? kc__nv.nvrtcGetPTX(prog, art) : kc__nv.nvrtcGetCUBIN(prog, art);
  if (r != KC__NVRTC_SUCCESS) {
    kc__free(rt, art);
    s = kc__err(rt, KC_ECOMPILE, "NVRTC compile of kernel '%s' failed:\n%s: %s", entry,
                ptx ? "nvrtcGetPTX" : "nvrtcGetCUBIN", kc__nv.nvrtcGetErrorString(r));
    goto done;
  }
  if (ptx)
    art[n - 1] = '\0';
  *out = art;
  *out_size = n;

done:
  if (prog)
    kc__nv.nvrtcDestroyProgram(&prog);
  kc__free(rt, logtext);
  kc__free(rt, opts);
  kc__free(rt, optbuf);
  kc__free(rt, src);
  return s;
}

/*
 * Compile-only entry point (declared in kc_internal.h), usable without a
 * driver or a GPU (tests). Compiles a whole translation unit (kc__backend_cuda.prelude first) for
 * sm_<sm> (a cubin, an ELF) or, with ptx, for compute_<sm> (NUL-terminated
 * PTX text, size counting the NUL). rt is any live runtime (e.g. host): it
 * provides the allocator (free *out with kc__free(rt, *out)) and the error
 * message; its compile options are NOT used (they belong to its backend).
 * log may be NULL. KC_EUNAVAILABLE when NVRTC cannot be loaded.
 */
kc_status kc__cuda_compile_only(kc_runtime *rt, const char *source_tu, size_t len,
                                const char *entry, int sm, bool ptx, void **out, size_t *out_size,
                                kc__sb *log) {
  if (!rt || !source_tu || !entry || !out || !out_size || sm < 10 || sm > 9999)
    return kc__err(rt, KC_EINVAL, "kc__cuda_compile_only: invalid argument");
  *out = NULL;
  *out_size = 0;
  const char *why = kc__cuda_nvrtc_unavailable();
  if (why)
    return kc__err(rt, KC_EUNAVAILABLE, "%s", why);
  return kc__cu_compile_tu(rt, source_tu, len, entry, sm, ptx, NULL, out, out_size, log);
}

static kc_status kc__cu_compile(void *state, const kc__tu *tu, void **artifact, size_t *size,
                                uint64_t *sig, kc__sb *log) {
  (void)sig; /* prefilled by the engine from the parameter types */
  kc__cuda *st = state;
  return kc__cu_compile_tu(st->rt, tu->text, tu->len, tu->entry, st->arch, st->ptx,
                           st->compile_options, artifact, size, log);
}

/* ------------------------------------------------------------- contexts */

static kc_status kc__cu_ctx_create(void *state, int device, void **bctx) {
  kc__cuda *st = state;
  *bctx = NULL;
  if (device < 0 || device >= st->ndevs)
    return kc__err(st->rt, KC_EINVAL, "CUDA device %d does not exist (%d device%s)", device,
                   st->ndevs, st->ndevs == 1 ? "" : "s");
  kc__cuctx *c = kc__calloc(st->rt, sizeof *c);
  if (!c)
    return kc__err(st->rt, KC_ENOMEM, "out of memory creating a CUDA context");
  c->st = st;
  c->id = kc__next_id();
  c->dev = st->devs[device].dev;
  CUresult r = kc__cu.cuDevicePrimaryCtxRetain(&c->ctx, c->dev);
  if (r != KC__CUDA_SUCCESS) {
    kc__free(st->rt, c);
    return kc__cu_fail(st->rt, KC_EBACKEND, "cuDevicePrimaryCtxRetain", r, "");
  }
  kc_status s = kc__cu_bind(c);
  if (s != KC_OK) {
    kc__cu.cuDevicePrimaryCtxRelease_v2(c->dev);
    kc__free(st->rt, c);
    return s;
  }
  *bctx = c;
  return KC_OK;
}

/* The engine has unlinked every module and freed every buffer first. */
static void kc__cu_ctx_destroy(void *bctx) {
  kc__cuctx *c = bctx;
  if (!c)
    return;
  if (kc__cu_bind(c) == KC_OK)
    kc__cu.cuCtxSynchronize(); /* let queued work end before the release may tear it down */
  kc__cu_bound = 0;
  kc__cu.cuDevicePrimaryCtxRelease_v2(c->dev);
  kc__free(c->st->rt, c);
}

/* The engine has already unloaded every module of this context; buffers
 * stay (see the top). What is left is to drain the queue, so that the
 * reset is a point after which nothing of the old modules runs. */
static kc_status kc__cu_ctx_reset(void *bctx) {
  kc__cuctx *c = bctx;
  kc_status s = kc__cu_bind(c);
  if (s != KC_OK)
    return s;
  CUresult r = kc__cu.cuCtxSynchronize();
  if (r != KC__CUDA_SUCCESS)
    return kc__cu_fail(c->st->rt, KC_EBACKEND, "cuCtxSynchronize", r,
                       " (during a context reset; a sticky error leaves the CUDA context "
                       "unusable: destroy every kcache context on the device)");
  return KC_OK;
}

static kc_status kc__cu_ctx_finish(void *bctx) {
  kc__cuctx *c = bctx;
  kc_status s = kc__cu_bind(c);
  if (s != KC_OK)
    return s;
  CUresult r = kc__cu.cuCtxSynchronize();
  if (r != KC__CUDA_SUCCESS)
    return kc__cu_fail(c->st->rt, KC_ELAUNCH, "cuCtxSynchronize", r, "");
  return KC_OK;
}

/* ------------------------------------------------------------- launching */

static KC__COLD kc_status kc__cu_launch_slow(kc__linked *l, void **argv, const kc_dim3 *grid,
                                             const kc_dim3 *block, bool tried, CUresult r);

/* The fast path: one TLS compare and the driver's launch. It must never
 * lock, allocate, query the driver or touch a string. argv is exactly the
 * kernelParams array: a pointer to each argument's bytes (a buffer's is its
 * kc__bufh, whose u64 is the CUdeviceptr). */
static kc_status kc__cu_launch(kc__linked *l, void **argv, const kc_dim3 *grid,
                               const kc_dim3 *block) {
  const kc__cuctx *c = l->bctx;
  if (KC__UNLIKELY(!grid || !block)) return kc__launch_bad_dims(l, grid, block);
  if (KC__LIKELY(kc__cu_bound == c->id)) {
    CUresult r = kc__cu.cuLaunchKernel((CUfunction)l->fn, grid->x, grid->y, grid->z, block->x,
                                       block->y, block->z, 0, c->stream, argv, NULL);
    if (KC__LIKELY(r == KC__CUDA_SUCCESS))
      return KC_OK;
    return kc__cu_launch_slow(l, argv, grid, block, true, r);
  }
  return kc__cu_launch_slow(l, argv, grid, block, false, KC__CUDA_SUCCESS);
}

static bool kc__cu_is_context_error(CUresult r) {
  return r == KC__CUDA_ERROR_INVALID_CONTEXT || r == KC__CUDA_ERROR_CONTEXT_IS_DESTROYED ||
         r == KC__CUDA_ERROR_INVALID_HANDLE;
}

/* This thread has not bound the context yet, or the launch failed. A failed
 * launch enqueued nothing, so retrying once after binding is safe. */
static KC__COLD kc_status kc__cu_launch_slow(kc__linked *l, void **argv, const kc_dim3 *grid,
                                             const kc_dim3 *block, bool tried, CUresult r) {
  const kc__cuctx *c = l->bctx;
  /* a zero dimension is KC_EINVAL whether or not this thread had bound the
   * context (the fast path lets the driver find it) */
  if (!grid->x || !grid->y || !grid->z || !block->x || !block->y || !block->z)
    return kc__launch_bad_dims(l, grid, block);
  if (!tried || kc__cu_is_context_error(r)) {
    kc_status s = kc__cu_bind(c);
    if (s != KC_OK)
      return s;
    r = kc__cu.cuLaunchKernel((CUfunction)l->fn, grid->x, grid->y, grid->z, block->x, block->y,
                              block->z, 0, c->stream, argv, NULL);
    if (r == KC__CUDA_SUCCESS)
      return KC_OK;
  }
  char detail[384];
  snprintf(detail, sizeof detail, " (kernel '%s', grid %ux%ux%u, block %ux%ux%u)",
           kc__linked_name(l), (unsigned)grid->x, (unsigned)grid->y,
           (unsigned)grid->z, (unsigned)block->x, (unsigned)block->y, (unsigned)block->z);
  return kc__cu_fail(c->st->rt, KC_ELAUNCH, "cuLaunchKernel", r, detail);
}

/* ---------------------------------------------------------------- linking */

static bool kc__cu_is_binary(const unsigned char *p, size_t n) {
  static const unsigned char elf[4] = {0x7f, 'E', 'L', 'F'};
  static const unsigned char fatbin[4] = {0x50, 0xed, 0x55, 0xba};
  return n >= 4 && (memcmp(p, elf, 4) == 0 || memcmp(p, fatbin, 4) == 0);
}

static kc_status kc__cu_link(void *bctx, const kc__ci *ci, kc__linked *l) {
  kc__cuctx *c = bctx;
  kc_runtime *rt = c->st->rt;
  const kc__artifact a = kc__artifact_of(ci);
  const char *name = a.entry;
  if (!a.bytes || a.size == 0)
    return kc__err(rt, KC_ELINK, "kernel '%s' has an empty CUDA artifact", name);
  kc_status s = kc__cu_bind(c);
  if (s != KC_OK)
    return s;
  /* PTX must reach the driver NUL-terminated; one that came back from a
   * store without its NUL gets one here. */
  const unsigned char *image = a.bytes;
  char *copy = NULL;
  if (!kc__cu_is_binary(image, a.size) && image[a.size - 1] != '\0') {
    if (!(copy = kc__strndup(rt, a.bytes, a.size)))
      return kc__err(rt, KC_ENOMEM, "out of memory linking kernel '%s'", name);
    image = (const unsigned char *)copy;
  }
  char jitlog[4096];
  jitlog[0] = '\0';
  CUjit_option keys[2] = {KC__CU_JIT_ERROR_LOG_BUFFER, KC__CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *vals[2] = {jitlog, (void *)(uintptr_t)sizeof jitlog};
  CUmodule mod = NULL;
  CUresult r = kc__cu.cuModuleLoadDataEx(&mod, image, 2, keys, vals);
  kc__free(rt, copy);
  if (r != KC__CUDA_SUCCESS) {
    char detail[4096 + 512];
    jitlog[sizeof jitlog - 1] = '\0';
    bool version = r == KC__CUDA_ERROR_UNSUPPORTED_PTX_VERSION ||
                   r == KC__CUDA_ERROR_NO_BINARY_FOR_GPU;
    snprintf(detail, sizeof detail, " (kernel '%s', %s for %s_%d%s)%s%s", name,
             c->st->ptx ? "PTX" : "cubin", c->st->ptx ? "compute" : "sm", c->st->arch,
             version ? "; NVRTC may be newer than the driver" : "", jitlog[0] ? "\n" : "", jitlog);
    return kc__cu_fail(rt, KC_ELINK, "cuModuleLoadDataEx", r, detail);
  }
  CUfunction fn = NULL;
  r = kc__cu.cuModuleGetFunction(&fn, mod, name);
  if (r != KC__CUDA_SUCCESS) {
    kc__cu.cuModuleUnload(mod);
    char detail[300];
    snprintf(detail, sizeof detail, " (entry '%s'; is it a KC_KERNEL?)", name);
    return kc__cu_fail(rt, KC_ELINK, "cuModuleGetFunction", r, detail);
  }
  l->launch = kc__cu_launch;
  l->bctx = c;
  l->fn = fn;
  l->module = mod;
  l->extra = NULL;
  return KC_OK;
}

static void kc__cu_unlink(kc__linked *l) {
  kc__cuctx *c = l->bctx;
  if (!l->module || !c || kc__cu_bind(c) != KC_OK)
    return;
  /* Nothing queued may still run code of the module being unloaded. */
  kc__cu.cuCtxSynchronize();
  kc__cu.cuModuleUnload((CUmodule)l->module);
  l->module = NULL;
  l->fn = NULL;
}

/* ---------------------------------------------------------------- buffers */

/* A zero-size buffer has the null device pointer and no allocation. */
static kc_status kc__cu_buf_create(void *bctx, size_t size, kc__bufh *h) {
  kc__cuctx *c = bctx;
  h->u64 = 0;
  if (size == 0)
    return KC_OK;
  kc_status s = kc__cu_bind(c);
  if (s != KC_OK)
    return s;
  CUdeviceptr p = 0;
  CUresult r = kc__cu.cuMemAlloc_v2(&p, size);
  if (r != KC__CUDA_SUCCESS) {
    char detail[64];
    snprintf(detail, sizeof detail, " (%zu bytes)", size);
    return kc__cu_fail(c->st->rt, r == KC__CUDA_ERROR_OUT_OF_MEMORY ? KC_ENOMEM : KC_EBACKEND,
                       "cuMemAlloc", r, detail);
  }
  h->u64 = p;
  return KC_OK;
}

static void kc__cu_buf_destroy(void *bctx, kc__bufh *h) {
  if (!h->u64 || kc__cu_bind(bctx) != KC_OK)
    return;
  kc__cu.cuMemFree_v2((CUdeviceptr)h->u64);
  h->u64 = 0;
}

static kc_status kc__cu_buf_write(void *bctx, kc__bufh *h, size_t off, const void *src, size_t n) {
  kc__cuctx *c = bctx;
  if (n == 0)
    return KC_OK;
  kc_status s = kc__cu_bind(c);
  if (s != KC_OK)
    return s;
  CUresult r = kc__cu.cuMemcpyHtoD_v2((CUdeviceptr)(h->u64 + off), src, n);
  return r == KC__CUDA_SUCCESS ? KC_OK : kc__cu_fail(c->st->rt, KC_EBACKEND, "cuMemcpyHtoD", r, "");
}

static kc_status kc__cu_buf_read(void *bctx, kc__bufh *h, size_t off, void *dst, size_t n) {
  kc__cuctx *c = bctx;
  if (n == 0)
    return KC_OK;
  kc_status s = kc__cu_bind(c);
  if (s != KC_OK)
    return s;
  CUresult r = kc__cu.cuMemcpyDtoH_v2(dst, (CUdeviceptr)(h->u64 + off), n);
  return r == KC__CUDA_SUCCESS ? KC_OK : kc__cu_fail(c->st->rt, KC_EBACKEND, "cuMemcpyDtoH", r, "");
}

const kc__backend kc__backend_cuda = {
    .name = "cuda",
    .unavailable = kc__cu_unavailable,
    .open = kc__cu_open,
    .close = kc__cu_close,
    .device_count = kc__cu_device_count,
    .device_name = kc__cu_device_name,
    .identity = kc__cu_identity,
    .prelude = kc__cu_prelude,
    .epilogue = NULL,
    .compile = kc__cu_compile,
    .ctx_create = kc__cu_ctx_create,
    .ctx_destroy = kc__cu_ctx_destroy,
    .ctx_reset = kc__cu_ctx_reset,
    .ctx_finish = kc__cu_ctx_finish,
    .link = kc__cu_link,
    .unlink = kc__cu_unlink,
    .buf_create = kc__cu_buf_create,
    .buf_destroy = kc__cu_buf_destroy,
    .buf_write = kc__cu_buf_write,
    .buf_read = kc__cu_buf_read,
};
