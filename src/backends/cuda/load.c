/* SPDX-License-Identifier: MIT */
/*
 * load.c -- the CUDA backend's libraries and compiler: loading NVRTC and
 * the driver with dlopen (never linked, so kcache builds and runs where
 * neither exists, and says why the backend is unavailable), their error
 * names, making a context's CUcontext current around kcache's own driver
 * calls (cu_enter, cu_leave: here, with the driver table, below both
 * cuda.c and interop.c), the CUDA dialect prelude, and compiling a
 * translation unit with NVRTC (also without a driver: kc__cuda_compile_only).
 */
#include "backends/cuda/cuda.h"

#include <ctype.h>
#include <dlfcn.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

cu_driver cu_drv = {.once = KC__ONCE_INIT};
cu_nvrtc_lib cu_nvrtc = {.once = KC__ONCE_INIT};

_Static_assert(sizeof(void *) == sizeof(void (*)(void)), "dlsym needs data and code pointers alike");

/* dlsym into a function pointer without the undefined cast. */
bool cu_sym(void *lib, const char *name, void *fnptr) {
  void *p = dlsym(lib, name);
  memcpy(fnptr, &p, sizeof p);
  return p != NULL;
}

/* ------------------------------------------------------ loading NVRTC */

/* Sonames NVRTC has shipped under, newest first. */
static const char *const cu_nvrtc_names[] = {
    "libnvrtc.so",      "libnvrtc.so.13",   "libnvrtc.so.12",   "libnvrtc.so.11.2",
    "libnvrtc.so.11.1", "libnvrtc.so.11.0", "libnvrtc.so.10.2", "libnvrtc.so.10.1",
};

/* Takes lib if it has every required entry point; else closes it. */
static bool cu_nvrtc_adopt(void *lib) {
  if (!lib) return false;
  bool ok = true;
#define KC__RESOLVE(name, args) ok = ok && cu_sym(lib, #name, &cu_nvrtc.name);
  KC__NVRTC_FNS(KC__RESOLVE)
#undef KC__RESOLVE
  ok = ok && cu_sym(lib, "nvrtcGetErrorString", &cu_nvrtc.nvrtcGetErrorString);
  if (!ok) {
    dlclose(lib);
    return false;
  }
#define KC__RESOLVE(name, args) cu_sym(lib, #name, &cu_nvrtc.name);
  KC__NVRTC_OPTIONAL_FNS(KC__RESOLVE)
#undef KC__RESOLVE
  if (!cu_nvrtc.nvrtcGetCUBIN || !cu_nvrtc.nvrtcGetCUBINSize)
    cu_nvrtc.nvrtcGetCUBIN = NULL, cu_nvrtc.nvrtcGetCUBINSize = NULL;
  if (!cu_nvrtc.nvrtcGetSupportedArchs || !cu_nvrtc.nvrtcGetNumSupportedArchs)
    cu_nvrtc.nvrtcGetSupportedArchs = NULL, cu_nvrtc.nvrtcGetNumSupportedArchs = NULL;
  return true; /* never dlclose'd: NVRTC stays loaded for the process */
}

static bool cu_nvrtc_try_dir(const char *root, const char *sub) {
  if (!root || !*root) return false;
  char path[4096];
  for (size_t i = 0; i < sizeof cu_nvrtc_names / sizeof *cu_nvrtc_names; i++) {
    snprintf(path, sizeof path, "%s/%s/%s", root, sub, cu_nvrtc_names[i]);
    if (cu_nvrtc_adopt(dlopen(path, RTLD_NOW | RTLD_LOCAL))) return true;
  }
  /* Any other version the toolkit ships, newest name last in glob order. */
  snprintf(path, sizeof path, "%s/%s/libnvrtc.so.*", root, sub);
  glob_t g;
  bool found = false;
  if (glob(path, 0, NULL, &g) == 0) {
    for (size_t i = g.gl_pathc; i-- > 0 && !found;)
      found = cu_nvrtc_adopt(dlopen(g.gl_pathv[i], RTLD_NOW | RTLD_LOCAL));
    globfree(&g);
  }
  return found;
}

/* NVRTC dlopens libnvrtc-builtins.so.X.Y by its bare name at the first
 * compile, so one found through CUDA_HOME outside the loader's path fails
 * then. Loading the builtins from NVRTC's own directory first makes that
 * dlopen find them already loaded (by soname). */
static void cu_nvrtc_preload_builtins(void) {
  void *addr;
  memcpy(&addr, &cu_nvrtc.nvrtcVersion, sizeof addr);
  Dl_info info;
  if (!dladdr(addr, &info) || !info.dli_fname || !strchr(info.dli_fname, '/')) return;
  char dir[4096], path[4096 + 64];
  snprintf(dir, sizeof dir, "%s", info.dli_fname);
  *strrchr(dir, '/') = '\0';
  snprintf(path, sizeof path, "%s/libnvrtc-builtins.so.%d.%d", dir, cu_nvrtc.major, cu_nvrtc.minor);
  if (dlopen(path, RTLD_NOW | RTLD_LOCAL)) return;
  snprintf(path, sizeof path, "%s/libnvrtc-builtins.so.%d*", dir, cu_nvrtc.major);
  glob_t g;
  if (glob(path, 0, NULL, &g) == 0) {
    for (size_t i = g.gl_pathc; i-- > 0;)
      if (dlopen(g.gl_pathv[i], RTLD_NOW | RTLD_LOCAL)) break;
    globfree(&g);
  }
}

static void cu_nvrtc_load(void) {
  static const char *const roots[] = {"CUDA_HOME", "CUDA_PATH"};
  static char refused_why[512];
  if (kc__static_program()) { /* (every dlopen below is of NVRTC) */
    snprintf(refused_why, sizeof refused_why, "NVRTC not opened: %s", kc__static_refusal());
    cu_nvrtc.why = refused_why;
    return;
  }
  bool found = false;
  for (size_t i = 0; i < 2 && !found; i++) {
    const char *root = getenv(roots[i]);
    found = cu_nvrtc_try_dir(root, "lib64") || cu_nvrtc_try_dir(root, "lib");
  }
  if (!found) found = cu_nvrtc_try_dir("/usr/local/cuda", "lib64");
  for (size_t i = 0; !found && i < sizeof cu_nvrtc_names / sizeof *cu_nvrtc_names; i++)
    found = cu_nvrtc_adopt(dlopen(cu_nvrtc_names[i], RTLD_NOW | RTLD_LOCAL));
  if (!found) {
    cu_nvrtc.why = "NVRTC not found (set CUDA_HOME)";
    return;
  }
  if (cu_nvrtc.nvrtcVersion(&cu_nvrtc.major, &cu_nvrtc.minor) != KC__NVRTC_SUCCESS) {
    cu_nvrtc.why = "NVRTC found but nvrtcVersion failed";
    return;
  }
  cu_nvrtc_preload_builtins();
  cu_nvrtc.serialize = cu_nvrtc.major < 11;
  if (cu_nvrtc.serialize && !kc__mutex_init(&cu_nvrtc.lock)) {
    cu_nvrtc.why = "NVRTC: cannot create its lock";
    return;
  }
  cu_nvrtc.why = NULL;
}

const char *kc__cuda_nvrtc_unavailable(void) {
  kc__call_once(&cu_nvrtc.once, cu_nvrtc_load);
  return cu_nvrtc.why;
}

/* ---------------------------------------------------- loading the driver */

const char *cu_errname(CUresult r) {
  const char *s = NULL;
  if (cu_drv.cuGetErrorName && cu_drv.cuGetErrorName(r, &s) == KC__CUDA_SUCCESS && s) return s;
  return "CUDA_ERROR_UNKNOWN_CODE";
}

const char *cu_errstr(CUresult r) {
  const char *s = NULL;
  if (cu_drv.cuGetErrorString && cu_drv.cuGetErrorString(r, &s) == KC__CUDA_SUCCESS && s) return s;
  return "unrecognized error code";
}

static void cu_load(void) {
  const char *refused = NULL;
  void *lib = kc__dlopen_foreign("libcuda.so.1", RTLD_NOW | RTLD_LOCAL, &refused);
  if (refused) {
    snprintf(cu_drv.why_buf, sizeof cu_drv.why_buf, "libcuda.so.1 not opened: %s", refused);
    cu_drv.why = cu_drv.why_buf;
    return;
  }
  if (!lib) {
    cu_drv.why = "no CUDA driver (libcuda.so.1 not found)";
    return;
  }
#define KC__RESOLVE(name, args) \
  if (!cu_sym(lib, #name, &cu_drv.name)) { \
    snprintf(cu_drv.why_buf, sizeof cu_drv.why_buf, "CUDA driver too old: libcuda.so.1 has no %s", #name); \
    cu_drv.why = cu_drv.why_buf; \
    return; \
  }
  KC__CU_DRIVER_FNS(KC__RESOLVE)
  cu_sym(lib, "cuLaunchKernelEx", &cu_drv.cuLaunchKernelEx); /* optional: CUDA 12.0 */
#undef KC__RESOLVE
  CUresult r = cu_drv.cuInit(0);
  if (r == KC__CUDA_ERROR_NO_DEVICE) {
    cu_drv.why = "no CUDA device";
    return;
  }
  if (r != KC__CUDA_SUCCESS) {
    snprintf(cu_drv.why_buf, sizeof cu_drv.why_buf, "CUDA driver unusable: cuInit: %s (%d): %s",
             cu_errname(r), r, cu_errstr(r));
    cu_drv.why = cu_drv.why_buf;
    return;
  }
  int n = 0;
  if (cu_drv.cuDeviceGetCount(&n) != KC__CUDA_SUCCESS || n < 1) {
    cu_drv.why = "no CUDA device";
    return;
  }
  if (cu_drv.cuDriverGetVersion(&cu_drv.version) != KC__CUDA_SUCCESS) cu_drv.version = 0;
  cu_drv.why = NULL;
}

const char *cu_unavailable(const kc__bconfig *cfg) {
  (void)cfg;
  kc__call_once(&cu_drv.once, cu_load);
  if (cu_drv.why) return cu_drv.why;
  return kc__cuda_nvrtc_unavailable();
}

/* "<call>: CUDA_ERROR_X (n): <driver's text><detail>" */
KC__COLD kc_status cu_fail(const kc__bsvc *sv, kc_status st, const char *call, CUresult r,
                           const char *detail) {
  return kc__bs_err(sv, st, "%s: %s (%d): %s%s", call, cu_errname(r), r, cu_errstr(r), detail ? detail : "");
}

/* ------------------------------------------------------ the current context */

/* Makes c's context current for kcache's own driver calls; *prev is the
 * caller's, for cu_leave. */
KC__NOINLINE kc_status cu_enter(const cu_ctx *c, CUcontext *prev) {
  CUcontext cur = NULL;
  CUresult r = cu_drv.cuCtxGetCurrent(&cur);
  if (r != KC__CUDA_SUCCESS) return cu_fail(c->st->sv, KC_EBACKEND, "cuCtxGetCurrent", r, "");
  *prev = cur;
  if (cur == c->ctx) return KC_OK;
  r = cu_drv.cuCtxSetCurrent(c->ctx);
  return r == KC__CUDA_SUCCESS ? KC_OK : cu_fail(c->st->sv, KC_EBACKEND, "cuCtxSetCurrent", r, "");
}

/* Restores the caller's current context (NULL: none) after cu_enter. */
void cu_leave(const cu_ctx *c, CUcontext prev) {
  if (prev != c->ctx) cu_drv.cuCtxSetCurrent(prev);
}

/* ------------------------------------------------------------ compiling */

/* The kernel dialect in CUDA C++. NVRTC has no standard headers, so the
 * fixed-width types are spelled out (size_t and ptrdiff_t are built in). */
const char cu_prelude[] =
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
    "#define kc_barrier() __syncthreads()\n"
    "/* kc_launch_ex's shared_bytes: the block's dynamic shared memory */\n"
    "extern __shared__ __align__(16) unsigned char kc__dyn_shared[];\n"
    "#define kc_scratch() ((void *)kc__dyn_shared)\n";

/* The probe's values (cuda/probe.c) from the PTX of prog: ptx, or what
 * NVRTC keeps of it when it made a cubin. Leaves probe->n 0 if there are
 * none. */
static void cu_probe_read(const kc__bsvc *sv, nvrtcProgram prog, const char *ptx, cu_probe_out *probe) {
  char *own = NULL;
  size_t n = 0;
  if (!ptx && cu_nvrtc.nvrtcGetPTXSize(prog, &n) == KC__NVRTC_SUCCESS && n > 1 &&
      (own = kc__bs_alloc(sv, n))) {
    if (cu_nvrtc.nvrtcGetPTX(prog, own) == KC__NVRTC_SUCCESS) {
      own[n - 1] = '\0';
      ptx = own;
    }
  }
  if (ptx) probe->n = cu_probe_parse(ptx, probe->vals, sizeof probe->vals / sizeof *probe->vals);
  kc__bs_free(sv, own);
}

/* A template's instantiation ("scale<float, 4>"): before the compile
 * (lowered NULL), its name expression given to NVRTC, which instantiates
 * it; after, its lowered (mangled) name in *lowered, NVRTC's until the
 * program is destroyed. An entry without '<' is none: KC_OK, nothing. */
static kc_status cu_name_expr(const kc__bsvc *sv, nvrtcProgram prog, const char *entry,
                              const char **lowered) {
  if (!strchr(entry, '<')) return KC_OK;
  if (!cu_nvrtc.nvrtcAddNameExpression || !cu_nvrtc.nvrtcGetLoweredName)
    return kc__bs_err(sv, KC_EUNAVAILABLE, "kernel '%s': this NVRTC has no name expressions", entry);
  nvrtcResult r = lowered ? cu_nvrtc.nvrtcGetLoweredName(prog, entry, lowered)
                          : cu_nvrtc.nvrtcAddNameExpression(prog, entry);
  if (r != KC__NVRTC_SUCCESS || (lowered && !*lowered))
    return kc__bs_err(sv, KC_ECOMPILE, "NVRTC compile of kernel '%s' failed:\n%s: %s", entry,
                      lowered ? "nvrtcGetLoweredName" : "nvrtcAddNameExpression",
                      r ? cu_nvrtc.nvrtcGetErrorString(r) : "no name");
  return KC_OK;
}

/* Compiles one translation unit for compute capability `arch` (cubin for
 * sm_<arch>, or PTX for compute_<arch>). user_opts: extra NVRTC options
 * separated by white space. The log gets NVRTC's output, also on success.
 * Longer than 80 lines on purpose: one NVRTC program's whole life (create,
 * options, compile under the NVRTC lock, log, output, destroy) with its
 * single cleanup path; split, the program handle would cross functions. */
kc_status cu_compile_tu(const kc__bsvc *sv, const char *text, size_t len, const char *entry, int arch,
                        bool ptx, const char *user_opts, void **out, size_t *out_size, kc__sb *log,
                        cu_probe_out *probe) {
  *out = NULL;
  *out_size = 0;
  if (probe) probe->n = 0;
  kc_status s = KC_OK;
  char *src = kc__bs_strndup(sv, text, len); /* NVRTC wants a C string */
  char *optbuf = kc__bs_strdup(sv, user_opts ? user_opts : "");
  const char **opts = optbuf ? kc__bs_alloc(sv, sizeof *opts * (strlen(optbuf) / 2 + 2)) : NULL;
  char *logtext = NULL;
  nvrtcProgram prog = NULL;
  if (!src || !optbuf || !opts) {
    s = kc__bs_err(sv, KC_ENOMEM, "out of memory compiling kernel '%s'", entry);
    goto done;
  }
  char archopt[32], progname[256];
  snprintf(archopt, sizeof archopt, "-arch=%s_%d", ptx ? "compute" : "sm", arch);
  snprintf(progname, sizeof progname, "%s.cu", entry);
  int nopts = 0;
  opts[nopts++] = archopt;
  for (char *p = optbuf; *p;) {
    while (*p == ' ' || *p == '\t' || *p == '\n') *p++ = '\0';
    if (!*p) break;
    opts[nopts++] = p;
    while (*p && *p != ' ' && *p != '\t' && *p != '\n') p++;
  }

  nvrtcResult r = cu_nvrtc.nvrtcCreateProgram(&prog, src, progname, 0, NULL, NULL);
  if (r != KC__NVRTC_SUCCESS) {
    prog = NULL;
    s = kc__bs_err(sv, KC_ECOMPILE, "NVRTC compile of kernel '%s' failed:\nnvrtcCreateProgram: %s", entry,
                   cu_nvrtc.nvrtcGetErrorString(r));
    goto done;
  }
  if ((s = cu_name_expr(sv, prog, entry, NULL)) != KC_OK) goto done;
  if (cu_nvrtc.serialize) kc__lock(&cu_nvrtc.lock);
  r = cu_nvrtc.nvrtcCompileProgram(prog, nopts, opts);
  if (cu_nvrtc.serialize) kc__unlock(&cu_nvrtc.lock);

  size_t loglen = 0;
  if (cu_nvrtc.nvrtcGetProgramLogSize(prog, &loglen) == KC__NVRTC_SUCCESS && loglen > 0 &&
      (logtext = kc__bs_alloc(sv, loglen + 1))) {
    if (cu_nvrtc.nvrtcGetProgramLog(prog, logtext) != KC__NVRTC_SUCCESS) loglen = 0;
    logtext[loglen] = '\0';
    loglen = strlen(logtext);
    if (log) kc__sb_append(log, logtext, loglen);
  }
  if (r != KC__NVRTC_SUCCESS) {
    if (r == KC__NVRTC_ERROR_COMPILATION)
      s = kc__bs_err(sv, KC_ECOMPILE, "NVRTC compile of kernel '%s' failed:\n%s", entry,
                     logtext ? logtext : "");
    else
      s = kc__bs_err(sv, KC_ECOMPILE, "NVRTC compile of kernel '%s' failed:\n%s (options: %s %s)\n%s", entry,
                     cu_nvrtc.nvrtcGetErrorString(r), archopt, user_opts ? user_opts : "",
                     logtext ? logtext : "");
    goto done;
  }

  const char *lowered = NULL;
  if ((s = cu_name_expr(sv, prog, entry, &lowered)) != KC_OK) goto done;
  size_t trailer = lowered ? strlen(lowered) + 2 + sizeof KC__CU_LOWERED - 1 : 0;
  size_t n = 0;
  if (ptx) r = cu_nvrtc.nvrtcGetPTXSize(prog, &n); /* counts the NUL */
  else r = cu_nvrtc.nvrtcGetCUBINSize(prog, &n);
  if (r != KC__NVRTC_SUCCESS || n == 0) {
    s = kc__bs_err(sv, KC_ECOMPILE, "NVRTC compile of kernel '%s' failed:\n%s: %s", entry,
                   ptx ? "nvrtcGetPTXSize" : "nvrtcGetCUBINSize",
                   r ? cu_nvrtc.nvrtcGetErrorString(r) : "empty output");
    goto done;
  }
  char *art = kc__bs_alloc(sv, n + trailer);
  if (!art) {
    s = kc__bs_err(sv, KC_ENOMEM, "out of memory for the %zu-byte artifact of kernel '%s'", n, entry);
    goto done;
  }
  r = ptx ? cu_nvrtc.nvrtcGetPTX(prog, art) : cu_nvrtc.nvrtcGetCUBIN(prog, art);
  if (r != KC__NVRTC_SUCCESS) {
    kc__bs_free(sv, art);
    s = kc__bs_err(sv, KC_ECOMPILE, "NVRTC compile of kernel '%s' failed:\n%s: %s", entry,
                   ptx ? "nvrtcGetPTX" : "nvrtcGetCUBIN", cu_nvrtc.nvrtcGetErrorString(r));
    goto done;
  }
  if (ptx) art[n - 1] = '\0';
  if (lowered) { /* "\0" LOWERED "\0" KC__CU_LOWERED */
    art[n] = '\0';
    memcpy(art + n + 1, lowered, trailer - (sizeof KC__CU_LOWERED - 1) - 1);
    memcpy(art + n + trailer - (sizeof KC__CU_LOWERED - 1), KC__CU_LOWERED, sizeof KC__CU_LOWERED - 1);
  }
  *out = art;
  *out_size = n + trailer;
  if (probe) cu_probe_read(sv, prog, ptx ? art : NULL, probe);

done:
  if (prog) cu_nvrtc.nvrtcDestroyProgram(&prog);
  kc__bs_free(sv, logtext);
  kc__bs_free(sv, opts);
  kc__bs_free(sv, optbuf);
  kc__bs_free(sv, src);
  return s;
}

const char *cu_lowered_name(const void *bytes, size_t size) {
  const char *b = bytes;
  size_t m = sizeof KC__CU_LOWERED - 1;
  if (!b || size < m + 3 || memcmp(b + size - m, KC__CU_LOWERED, m) || b[size - m - 1] != '\0') return NULL;
  size_t i = size - m - 1; /* the name's NUL */
  while (i > 0 && b[i - 1] != '\0') i--;
  return i > 0 && i < size - m - 1 ? b + i : NULL;
}

/*
 * Compile-only entry point (declared in kc_internal.h), usable without a
 * driver or a GPU (tests). Compiles a whole translation unit (kc__backend_cuda.prelude first) for
 * sm_<sm> (a cubin, an ELF) or, with ptx, for compute_<sm> (NUL-terminated
 * PTX text, size counting the NUL). sv is any live runtime (e.g. host): it
 * provides the allocator (free *out with kc__bs_free(sv, *out)) and the error
 * message; its compile options are NOT used (they belong to its backend).
 * log may be NULL. KC_EUNAVAILABLE when NVRTC cannot be loaded.
 */
kc_status kc__cuda_compile_only(const kc__bsvc *sv, const char *source_tu, size_t len, const char *entry,
                                int sm, bool ptx, void **out, size_t *out_size, kc__sb *log) {
  if (!sv || !source_tu || !entry || !out || !out_size || sm < 10 || sm > 9999)
    return kc__bs_err(sv, KC_EINVAL, "kc__cuda_compile_only: invalid argument");
  *out = NULL;
  *out_size = 0;
  const char *why = kc__cuda_nvrtc_unavailable();
  if (why) return kc__bs_err(sv, KC_EUNAVAILABLE, "%s", why);
  return cu_compile_tu(sv, source_tu, len, entry, sm, ptx, NULL, out, out_size, log, NULL);
}

kc_status kc__cuda_compile_sig(const kc__bsvc *sv, const kc__tu *tu, int sm, bool ptx, uint64_t *sig,
                               kc__sb *log) {
  if (!sv || !tu || !tu->text || !tu->entry || !sig || sm < 10 || sm > 9999)
    return kc__bs_err(sv, KC_EINVAL, "kc__cuda_compile_sig: invalid argument");
  const char *why = kc__cuda_nvrtc_unavailable();
  if (why) return kc__bs_err(sv, KC_EUNAVAILABLE, "%s", why);
  void *out = NULL;
  size_t size = 0;
  cu_probe_out probe;
  kc_status s = cu_compile_tu(sv, tu->text, tu->len, tu->entry, sm, ptx, NULL, &out, &size, log, &probe);
  kc__bs_free(sv, out);
  return s ? s : kc__probe_apply(sv, tu, probe.vals, probe.n, sig);
}
