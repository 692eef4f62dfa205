/* SPDX-License-Identifier: MIT */
/*
 * platform.c -- the OpenCL backend's library and devices: loading
 * libOpenCL with dlopen (never linked, so kcache builds and runs where
 * OpenCL is absent), error names, platform and device selection, and the
 * backend state's making and freeing: what this file fills in (devices,
 * names, identity, build options, the compile context, the locks and the
 * shared-context array). The bottom of the folder: it uses no other file
 * of it. opencl.c opens and closes the backend around it (helpers.c's
 * helpers, programs.c's kept programs and shared contexts).
 */
#include "backends/opencl/opencl.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

ocl_lib ocl;
ocl_svm_arg_fn ocl_set_arg_svm;

static kc__once ocl_once = KC__ONCE_INIT;
static const char *ocl_why; /* written once inside call_once; NULL: usable */
static char ocl_why_buf[512];

static void ocl_load(void) {
  /* RTLD_LOCAL: the ICD pulls in the platform's LLVM; making its symbols
   * global could clash with another LLVM in the process (PoCL crashes). */
  const char *refused = NULL;
  void *lib = kc__dlopen_foreign("libOpenCL.so.1", RTLD_NOW | RTLD_LOCAL, &refused);
  if (refused) {
    snprintf(ocl_why_buf, sizeof ocl_why_buf, "libOpenCL.so.1 not opened: %s", refused);
    ocl_why = ocl_why_buf;
    return;
  }
  if (!lib) lib = dlopen("libOpenCL.so", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    ocl_why = "libOpenCL.so.1 not found (install ocl-icd-libopencl1 and an ICD such as "
              "pocl-opencl-icd)";
    return;
  }
  void *sym;
#define OCL_SYM(f) \
  sym = dlsym(lib, #f); \
  memcpy(&ocl.f, &sym, sizeof sym); /* object to function pointer, as POSIX allows */ \
  if (!sym) { \
    snprintf(ocl_why_buf, sizeof ocl_why_buf, "libOpenCL.so.1 lacks %s (OpenCL 1.2 needed)", #f); \
    ocl_why = ocl_why_buf; \
    return; \
  }
  OCL_FUNCS(OCL_SYM)
#undef OCL_SYM
  sym = dlsym(lib, "clSetKernelArgSVMPointer");
  memcpy(&ocl_set_arg_svm, &sym, sizeof sym);
  /* The library stays loaded for the life of the process: drivers do not
   * survive being unloaded while their worker threads run. */

  cl_uint nplat = 0;
  if (ocl.clGetPlatformIDs(0, NULL, &nplat) != CL_SUCCESS || nplat == 0) {
    ocl_why = "no OpenCL platform";
    return;
  }
  cl_platform_id plats[16];
  if (nplat > 16) nplat = 16;
  if (ocl.clGetPlatformIDs(nplat, plats, NULL) != CL_SUCCESS) {
    ocl_why = "no OpenCL platform";
    return;
  }
  for (cl_uint i = 0; i < nplat; i++) {
    cl_uint ndev = 0;
    if (ocl.clGetDeviceIDs(plats[i], CL_DEVICE_TYPE_ALL, 0, NULL, &ndev) == CL_SUCCESS && ndev)
      return; /* usable */
  }
  ocl_why = "no OpenCL device";
}

const char *ocl_unavailable(const kc__bconfig *cfg) {
  (void)cfg;
  kc__call_once(&ocl_once, ocl_load);
  return ocl_why;
}

/* ---------------------------------------------------------------- errors */

const char *ocl_errname(cl_int e) {
  switch (e) {
#define E(name, value) \
  case value: return #name;
    E(CL_SUCCESS, 0)
    E(CL_DEVICE_NOT_FOUND, -1)
    E(CL_DEVICE_NOT_AVAILABLE, -2)
    E(CL_COMPILER_NOT_AVAILABLE, -3)
    E(CL_MEM_OBJECT_ALLOCATION_FAILURE, -4)
    E(CL_OUT_OF_RESOURCES, -5)
    E(CL_OUT_OF_HOST_MEMORY, -6)
    E(CL_PROFILING_INFO_NOT_AVAILABLE, -7)
    E(CL_MEM_COPY_OVERLAP, -8)
    E(CL_IMAGE_FORMAT_MISMATCH, -9)
    E(CL_IMAGE_FORMAT_NOT_SUPPORTED, -10)
    E(CL_BUILD_PROGRAM_FAILURE, -11)
    E(CL_MAP_FAILURE, -12)
    E(CL_MISALIGNED_SUB_BUFFER_OFFSET, -13)
    E(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST, -14)
    E(CL_COMPILE_PROGRAM_FAILURE, -15)
    E(CL_LINKER_NOT_AVAILABLE, -16)
    E(CL_LINK_PROGRAM_FAILURE, -17)
    E(CL_DEVICE_PARTITION_FAILED, -18)
    E(CL_KERNEL_ARG_INFO_NOT_AVAILABLE, -19)
    E(CL_INVALID_VALUE, -30)
    E(CL_INVALID_DEVICE_TYPE, -31)
    E(CL_INVALID_PLATFORM, -32)
    E(CL_INVALID_DEVICE, -33)
    E(CL_INVALID_CONTEXT, -34)
    E(CL_INVALID_QUEUE_PROPERTIES, -35)
    E(CL_INVALID_COMMAND_QUEUE, -36)
    E(CL_INVALID_HOST_PTR, -37)
    E(CL_INVALID_MEM_OBJECT, -38)
    E(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR, -39)
    E(CL_INVALID_IMAGE_SIZE, -40)
    E(CL_INVALID_SAMPLER, -41)
    E(CL_INVALID_BINARY, -42)
    E(CL_INVALID_BUILD_OPTIONS, -43)
    E(CL_INVALID_PROGRAM, -44)
    E(CL_INVALID_PROGRAM_EXECUTABLE, -45)
    E(CL_INVALID_KERNEL_NAME, -46)
    E(CL_INVALID_KERNEL_DEFINITION, -47)
    E(CL_INVALID_KERNEL, -48)
    E(CL_INVALID_ARG_INDEX, -49)
    E(CL_INVALID_ARG_VALUE, -50)
    E(CL_INVALID_ARG_SIZE, -51)
    E(CL_INVALID_KERNEL_ARGS, -52)
    E(CL_INVALID_WORK_DIMENSION, -53)
    E(CL_INVALID_WORK_GROUP_SIZE, -54)
    E(CL_INVALID_WORK_ITEM_SIZE, -55)
    E(CL_INVALID_GLOBAL_OFFSET, -56)
    E(CL_INVALID_EVENT_WAIT_LIST, -57)
    E(CL_INVALID_EVENT, -58)
    E(CL_INVALID_OPERATION, -59)
    E(CL_INVALID_GL_OBJECT, -60)
    E(CL_INVALID_BUFFER_SIZE, -61)
    E(CL_INVALID_MIP_LEVEL, -62)
    E(CL_INVALID_GLOBAL_WORK_SIZE, -63)
    E(CL_INVALID_PROPERTY, -64)
    E(CL_INVALID_IMAGE_DESCRIPTOR, -65)
    E(CL_INVALID_COMPILER_OPTIONS, -66)
    E(CL_INVALID_LINKER_OPTIONS, -67)
    E(CL_INVALID_DEVICE_PARTITION_COUNT, -68)
    E(CL_INVALID_PIPE_SIZE, -69)
    E(CL_INVALID_DEVICE_QUEUE, -70)
    E(CL_INVALID_SPEC_ID, -71)
    E(CL_MAX_SIZE_RESTRICTION_EXCEEDED, -72)
    E(CL_PLATFORM_NOT_FOUND_KHR, -1001)
#undef E
  default: return "CL_UNKNOWN_ERROR";
  }
}

/* "what: CL_NAME (code)", with a status chosen by the caller. */
KC__COLD kc_status ocl_fail(const kc__bsvc *sv, kc_status st, const char *what, cl_int e) {
  if (e == CL_OUT_OF_HOST_MEMORY) st = KC_ENOMEM;
  return kc__bs_err(sv, st, "%s: %s (%d)", what, ocl_errname(e), (int)e);
}

/* Copies a string info query into memory from the runtime's allocator. */
static char *ocl_platform_str(const kc__bsvc *sv, cl_platform_id p, cl_platform_info what) {
  size_t n = 0;
  if (ocl.clGetPlatformInfo(p, what, 0, NULL, &n) != CL_SUCCESS) n = 0;
  char *s = kc__bs_alloc(sv, n + 1);
  if (!s) return NULL;
  if (n && ocl.clGetPlatformInfo(p, what, n, s, NULL) != CL_SUCCESS) n = 0;
  s[n] = '\0';
  return s;
}

static char *ocl_device_str(const kc__bsvc *sv, cl_device_id d, cl_device_info what) {
  size_t n = 0;
  if (ocl.clGetDeviceInfo(d, what, 0, NULL, &n) != CL_SUCCESS) n = 0;
  char *s = kc__bs_alloc(sv, n + 1);
  if (!s) return NULL;
  if (n && ocl.clGetDeviceInfo(d, what, n, s, NULL) != CL_SUCCESS) n = 0;
  s[n] = '\0';
  return s;
}

/* What ocl_state_make gave st, then st (its shared contexts are released
 * first: ocl_programs_free). */
void ocl_state_free(ocl_state *st) {
  if (!st) return;
  const kc__bsvc *sv = st->sv;
  if (st->hlock_ok) kc__mutex_destroy(&st->hlock);
  if (st->compile_ctx) ocl.clReleaseContext(st->compile_ctx);
  if (st->lock_ok) kc__mutex_destroy(&st->lock);
  if (st->names)
    for (int i = 0; i < st->ndevices; i++) kc__bs_free(sv, st->names[i]);
  kc__bs_free(sv, st->names);
  kc__bs_free(sv, st->devices);
  kc__bs_free(sv, st->shared);
  kc__bs_free(sv, st->identity);
  kc__bs_free(sv, st->build_options);
  kc__bs_free(sv, st);
}

/* Lists the devices of platform p into a fresh array (NULL: none / no memory). */
static cl_device_id *ocl_list_devices(const kc__bsvc *sv, cl_platform_id p, cl_uint *count) {
  cl_uint n = 0;
  *count = 0;
  if (ocl.clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, NULL, &n) != CL_SUCCESS || n == 0) return NULL;
  cl_device_id *d = kc__bs_alloc(sv, n * sizeof *d);
  if (!d) return NULL;
  if (ocl.clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, n, d, NULL) != CL_SUCCESS) {
    kc__bs_free(sv, d);
    return NULL;
  }
  *count = n;
  return d;
}

/* Does device d's name contain `want`? */
static bool ocl_device_matches(const kc__bsvc *sv, cl_device_id d, const char *want, bool *nomem) {
  char *name = ocl_device_str(sv, d, CL_DEVICE_NAME);
  if (!name) {
    *nomem = true;
    return false;
  }
  bool hit = strstr(name, want) != NULL;
  kc__bs_free(sv, name);
  return hit;
}

/* Every platform and its devices, for kc_list_devices (snprintf semantics). */
int ocl_list(char *buf, size_t size) {
  if (ocl_unavailable(NULL)) return -1;
  cl_platform_id plats[32];
  cl_uint np = 0;
  if (ocl.clGetPlatformIDs(32, plats, &np) != CL_SUCCESS) return -1;
  size_t len = 0;
  for (cl_uint p = 0; p < np && p < 32; p++) {
    char name[256] = "", version[256] = "";
    ocl.clGetPlatformInfo(plats[p], CL_PLATFORM_NAME, sizeof name - 1, name, NULL);
    ocl.clGetPlatformInfo(plats[p], CL_PLATFORM_VERSION, sizeof version - 1, version, NULL);
    int n = snprintf(len < size ? buf + len : NULL, len < size ? size - len : 0, "platform %u: %s (%s)\n", p,
                     name, version);
    len += n > 0 ? (size_t)n : 0;
    cl_device_id devs[64];
    cl_uint nd = 0;
    if (ocl.clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 64, devs, &nd) != CL_SUCCESS) nd = 0;
    for (cl_uint d = 0; d < nd && d < 64; d++) {
      char dname[256] = "";
      ocl.clGetDeviceInfo(devs[d], CL_DEVICE_NAME, sizeof dname - 1, dname, NULL);
      n = snprintf(len < size ? buf + len : NULL, len < size ? size - len : 0, "  device %u: %s\n", d, dname);
      len += n > 0 ? (size_t)n : 0;
    }
  }
  return (int)len;
}

/* The chosen device moved first: device 0 of a state is the one the
 * options (or a helper's SETUP) asked for, the one compile() builds for. */
static void chosen_first(cl_device_id *devs, cl_uint chosen) {
  cl_device_id first = devs[chosen];
  memmove(devs + 1, devs, chosen * sizeof *devs);
  devs[0] = first;
}

/* Picks (platform, device): the requested platform or each in order; the
 * device whose name contains the requested name, or the platform's first
 * device. *devs (every device of the platform, the chosen one first) is
 * the caller's. */
static kc_status ocl_pick(const kc__bsvc *sv, const kc__bconfig *opt, cl_platform_id *out_plat,
                          cl_device_id **out_devs, cl_uint *out_ndev, int *out_index) {
  cl_uint nplat = 0;
  cl_int e = ocl.clGetPlatformIDs(0, NULL, &nplat);
  if (e != CL_SUCCESS || nplat == 0) return kc__bs_err(sv, KC_EUNAVAILABLE, "no OpenCL platform");
  cl_platform_id *plats = kc__bs_alloc(sv, nplat * sizeof *plats);
  if (!plats) return kc__bs_err(sv, KC_ENOMEM, "out of memory");
  e = ocl.clGetPlatformIDs(nplat, plats, NULL);
  if (e != CL_SUCCESS) {
    kc__bs_free(sv, plats);
    return ocl_fail(sv, KC_EUNAVAILABLE, "clGetPlatformIDs", e);
  }

  int pidx = opt ? opt->platform_index : -1;
  const char *want = opt ? opt->device_name : NULL;
  if (pidx >= (int)nplat) {
    kc__bs_free(sv, plats);
    return kc__bs_err(sv, KC_EINVAL, "OpenCL platform_index %d is out of range (%u platform%s)", pidx, nplat,
                      nplat == 1 ? "" : "s");
  }

  cl_platform_id plat = NULL;
  cl_device_id *devs = NULL;
  cl_uint ndev = 0;
  bool nomem = false;
  for (cl_uint p = pidx >= 0 ? (cl_uint)pidx : 0; p < nplat && !plat && !nomem; p++) {
    cl_device_id *d = ocl_list_devices(sv, plats[p], &ndev);
    for (cl_uint i = 0; d && i < ndev && !plat && !nomem; i++) {
      if (!want || ocl_device_matches(sv, d[i], want, &nomem)) {
        plat = plats[p];
        devs = d;
        out_index[0] = (int)p;
        out_index[1] = (int)i;
      }
    }
    if (!plat) kc__bs_free(sv, d);
    if (pidx >= 0) break;
  }
  kc__bs_free(sv, plats);
  if (nomem) {
    kc__bs_free(sv, devs);
    return kc__bs_err(sv, KC_ENOMEM, "out of memory");
  }
  if (!plat) {
    if (want)
      return kc__bs_err(sv, KC_EUNAVAILABLE, "no OpenCL device whose name contains \"%s\"%s", want,
                        pidx >= 0 ? " on the requested platform" : "");
    return kc__bs_err(sv, KC_EUNAVAILABLE, "no OpenCL device%s",
                      pidx >= 0 ? " on the requested platform" : "");
  }
  chosen_first(devs, (cl_uint)out_index[1]);
  *out_plat = plat;
  *out_devs = devs;
  *out_ndev = ndev;
  return KC_OK;
}

/* st->identity (part of the disk-cache key) and st->build_options; false
 * when out of memory. */
static bool ocl_describe(const kc__bsvc *sv, ocl_state *st, cl_platform_id plat, const kc__bconfig *opt) {
  char *pname = ocl_platform_str(sv, plat, CL_PLATFORM_NAME);
  char *pver = ocl_platform_str(sv, plat, CL_PLATFORM_VERSION);
  char *drv = ocl_device_str(sv, st->devices[0], CL_DRIVER_VERSION);
  char *dver = ocl_device_str(sv, st->devices[0], CL_DEVICE_VERSION);
  kc__sb sb;
  kc__sb_init(&sb, &(sv)->heap);
  if (pname && pver && drv && dver)
    kc__sb_printf(&sb, "opencl|%s|%s|%s|%s|%s", pname, pver, st->names[0], drv, dver);
  else sb.failed = true;
  kc__bs_free(sv, pname);
  kc__bs_free(sv, pver);
  kc__bs_free(sv, drv);
  kc__bs_free(sv, dver);
  if (sb.failed) kc__sb_free(&sb);
  else st->identity = kc__sb_take(&sb);
  if (!st->identity) return false;

  /* -cl-kernel-arg-info lets compile() read parameter types back, to size
   * scalars the engine could not; it only adds metadata. */
  kc__sb_init(&sb, &(sv)->heap);
  kc__sb_puts(&sb, OCL_OPTIONS);
  if (opt && opt->compile_options && opt->compile_options[0]) {
    kc__sb_puts(&sb, " ");
    kc__sb_puts(&sb, opt->compile_options);
  }
  if (sb.failed) kc__sb_free(&sb);
  else st->build_options = kc__sb_take(&sb);
  return st->build_options != NULL;
}

/* The state for devs (platform plat, the chosen device first; devs passes
 * to the state, or is freed). */
static kc_status ocl_state_make(const kc__bsvc *sv, cl_platform_id plat, cl_device_id *devs, cl_uint ndev,
                                const kc__bconfig *opt, ocl_state **out) {
  *out = NULL;
  ocl_state *st = kc__bs_calloc(sv, sizeof *st);
  if (!st) {
    kc__bs_free(sv, devs);
    return kc__bs_err(sv, KC_ENOMEM, "out of memory");
  }
  st->svc = *sv;
  st->sv = &st->svc;
  st->devices = devs;
  st->ndevices = (int)ndev;
  st->names = kc__bs_calloc(sv, ndev * sizeof *st->names);
  st->shared = kc__bs_calloc(sv, ndev * sizeof *st->shared);
  if (!st->names || !st->shared || !(st->lock_ok = kc__mutex_init(&st->lock))) goto nomem;
  if (!(st->hlock_ok = kc__mutex_init(&st->hlock))) goto nomem;
  for (cl_uint i = 0; i < ndev; i++)
    if (!(st->names[i] = ocl_device_str(sv, devs[i], CL_DEVICE_NAME))) goto nomem;
  if (!ocl_describe(sv, st, plat, opt)) goto nomem;
  char *pname = ocl_platform_str(sv, plat, CL_PLATFORM_NAME);
  st->serializes = pname && strstr(pname, "Portable Computing Language"); /* PoCL */
  st->pocl = st->serializes;
  kc__bs_free(sv, pname);

  cl_int e;
  st->compile_ctx = ocl.clCreateContext(NULL, 1, &st->devices[0], NULL, NULL, &e);
  if (!st->compile_ctx) {
    ocl_state_free(st);
    return ocl_fail(sv, KC_EBACKEND, "clCreateContext", e);
  }
  st->shared[0] = st->compile_ctx; /* kcache's contexts on device 0 share it */
  *out = st;
  return KC_OK;

nomem:
  ocl_state_free(st);
  return kc__bs_err(sv, KC_ENOMEM, "out of memory");
}

kc_status ocl_state_open(const kc__bsvc *sv, const kc__bconfig *opt, ocl_state **out) {
  *out = NULL;
  const char *why = ocl_unavailable(NULL);
  if (why) return kc__bs_err(sv, KC_EUNAVAILABLE, "OpenCL backend: %s", why);
  cl_platform_id plat = NULL;
  cl_device_id *devs = NULL;
  cl_uint ndev = 0;
  int index[2] = {0, 0};
  kc_status s = ocl_pick(sv, opt, &plat, &devs, &ndev, index);
  if (s) return s;
  ocl_state *st;
  if ((s = ocl_state_make(sv, plat, devs, ndev, opt, &st))) return s;
  st->plat_index = index[0];
  st->dev_index = index[1];
  *out = st;
  return KC_OK;
}

kc_status ocl_open_at(const kc__bsvc *sv, int plat, int dev, const char *build_options, ocl_state **out) {
  *out = NULL;
  const char *why = ocl_unavailable(NULL);
  if (why) return kc__bs_err(sv, KC_EUNAVAILABLE, "OpenCL backend: %s", why);
  cl_platform_id plats[64];
  cl_uint nplat = 0, ndev = 0;
  if (ocl.clGetPlatformIDs(64, plats, &nplat) != CL_SUCCESS || plat < 0 || (cl_uint)plat >= nplat ||
      plat >= 64)
    return kc__bs_err(sv, KC_EUNAVAILABLE, "no OpenCL platform %d", plat);
  cl_device_id *devs = ocl_list_devices(sv, plats[plat], &ndev);
  if (!devs || dev < 0 || (cl_uint)dev >= ndev) {
    kc__bs_free(sv, devs);
    return kc__bs_err(sv, KC_EUNAVAILABLE, "no OpenCL device %d on platform %d", dev, plat);
  }
  chosen_first(devs, (cl_uint)dev);
  ocl_state *st;
  kc_status s = ocl_state_make(sv, plats[plat], devs, ndev, NULL, &st);
  if (s) return s;
  char *opts = kc__bs_strdup(sv, build_options);
  if (!opts) {
    ocl_state_free(st);
    return kc__bs_err(sv, KC_ENOMEM, "out of memory");
  }
  kc__bs_free(sv, st->build_options);
  st->build_options = opts;
  st->plat_index = plat;
  st->dev_index = dev;
  *out = st;
  return KC_OK;
}

int ocl_device_count(void *state) { return ((ocl_state *)state)->ndevices; }

const char *ocl_device_name(void *state, int index) {
  ocl_state *st = state;
  return index >= 0 && index < st->ndevices ? st->names[index] : NULL;
}

const char *ocl_identity(void *state) { return ((ocl_state *)state)->identity; }
