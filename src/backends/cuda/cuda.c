/* SPDX-License-Identifier: MIT */
/*
 * cuda.c -- the CUDA backend's face: its table (kc__backend_cuda) and the
 * calls behind it that talk to the driver (this folder: load.c loads NVRTC
 * and the driver, makes a context current (cu_enter, cu_leave), has the
 * dialect prelude and compiles; interop.c adopted contexts, streams and
 * launches with a configuration; probe.c the parameter probe). NVRTC
 * compiles the assembled closure (CUDA C++) straight to a cubin for the
 * device's exact architecture, or to PTX for the newest architecture NVRTC
 * knows when it does not know the device's, which the driver then
 * JIT-compiles at link. The driver API loads and launches it.
 *
 * It owns: opening the backend (the devices, filtered by name, and the
 * architecture NVRTC compiles for), the backend's compile (load.c's
 * compile, then the probe's sizes), the per-context session (a retained
 * primary context), linking (cuModuleLoadDataEx) and unlinking, buffers,
 * and the launch.
 *
 * Choices, and why:
 *  - Contexts. A kc_context on device d retains d's primary context: the one
 *    the CUDA runtime and most libraries use, so kcache buffers and theirs
 *    are interchangeable. kc contexts on the same device share it (and its
 *    default stream); each keeps its own modules.
 *  - Stream. Launches go to the legacy default stream (0): it orders them
 *    with the blocking cuMemcpyHtoD/DtoH of kc_buffer_write/read, so a read
 *    after a launch sees its result without an explicit finish, like an
 *    in-order OpenCL queue. kc_context_finish is cuCtxSynchronize.
 *  - Reset. kc_context_reset must keep buffers valid, so it never resets the
 *    primary context (cuDevicePrimaryCtxReset would free every allocation of
 *    every kc context on the device). The engine unlinks every linked object
 *    (unlink synchronizes, then cuModuleUnload) and ctx_reset drains the
 *    queue; the next launch reloads the stored cubin without calling NVRTC.
 *  - Current context. kcache leaves the calling thread's current context
 *    as it found it (kcache.h): cu_enter (load.c) makes the kc context's
 *    current around kcache's own driver calls and cu_leave restores the
 *    caller's.
 *    The launch fast path asks the driver for the current context (one
 *    cuCtxGetCurrent, a thread-local read in the driver) and launches
 *    directly when it is the kernel's; else the cold path switches, launches
 *    and switches back. No thread-local cache of kcache's own: a framework
 *    that switches contexts behind kcache's back cannot make it stale.
 *  - KC_CUDA_FORCE_PTX=1 compiles to PTX even for an architecture NVRTC
 *    knows, to exercise the driver-JIT path on any GPU.
 */
#include "backends/cuda/cuda.h"

#include <ctype.h>
#include <dlfcn.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool cu_contains_nocase(const char *hay, const char *needle) {
  size_t n = strlen(needle);
  for (; *hay; hay++) {
    size_t i = 0;
    while (i < n && tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i])) i++;
    if (i == n) return true;
  }
  return n == 0;
}

/* Picks the architecture NVRTC compiles for: the devices' exact one as a
 * cubin when NVRTC knows it, else PTX for the newest one it knows below
 * it. Devices of different architectures share PTX for the oldest. */
static kc_status cu_pick_arch(cu_state *st) {
  int lo = st->devs[0].cc;
  bool mixed = false;
  for (int i = 1; i < st->ndevs; i++) {
    mixed |= st->devs[i].cc != lo;
    if (st->devs[i].cc < lo) lo = st->devs[i].cc;
  }
  bool want_ptx = mixed || !cu_nvrtc.nvrtcGetCUBIN || st->force_ptx;
  if (!cu_nvrtc.nvrtcGetSupportedArchs) { /* NVRTC < 11.2: trust it with the device's arch */
    st->arch = lo;
    st->ptx = want_ptx;
    return KC_OK;
  }
  int n = 0;
  if (cu_nvrtc.nvrtcGetNumSupportedArchs(&n) != KC__NVRTC_SUCCESS || n <= 0 || n > 512)
    return kc__bs_err(st->sv, KC_EUNAVAILABLE, "NVRTC %d.%d lists no supported architecture", cu_nvrtc.major,
                      cu_nvrtc.minor);
  int archs[512];
  if (cu_nvrtc.nvrtcGetSupportedArchs(archs) != KC__NVRTC_SUCCESS)
    return kc__bs_err(st->sv, KC_EUNAVAILABLE, "nvrtcGetSupportedArchs failed");
  int best = 0, lowest = archs[0];
  bool exact = false;
  for (int i = 0; i < n; i++) {
    exact |= archs[i] == lo;
    if (archs[i] <= lo && archs[i] > best) best = archs[i];
    if (archs[i] < lowest) lowest = archs[i];
  }
  if (!best)
    return kc__bs_err(st->sv, KC_EUNAVAILABLE,
                      "CUDA device '%s' (sm_%d) is older than every architecture NVRTC %d.%d "
                      "supports (lowest: sm_%d)",
                      st->devs[0].name, lo, cu_nvrtc.major, cu_nvrtc.minor, lowest);
  st->arch = exact ? lo : best;
  st->ptx = want_ptx || !exact;
  return KC_OK;
}

static kc_status cu_open(const kc__bsvc *sv, const kc__bconfig *cfg, void **state) {
  *state = NULL;
  const char *why = cu_unavailable(cfg);
  if (why) return kc__bs_err(sv, KC_EUNAVAILABLE, "CUDA backend unavailable: %s", why);
  int n = 0;
  CUresult r = cu_drv.cuDeviceGetCount(&n);
  if (r != KC__CUDA_SUCCESS) return cu_fail(sv, KC_EUNAVAILABLE, "cuDeviceGetCount", r, "");
  cu_state *st = kc__bs_calloc(sv, sizeof *st);
  if (!st || !(st->devs = kc__bs_calloc(sv, sizeof *st->devs * (size_t)(n > 0 ? n : 1)))) {
    kc__bs_free(sv, st);
    return kc__bs_err(sv, KC_ENOMEM, "out of memory opening the CUDA backend");
  }
  st->svc = *sv;
  st->sv = &st->svc;
  st->compile_options = cfg->compile_options;
  st->force_ptx = cfg->cuda_force_ptx;
  const char *filter = cfg->device_name;
  kc_status s = KC_OK;
  for (int i = 0; i < n && s == KC_OK; i++) {
    cu_dev d = {0};
    int major = 0, minor = 0;
    if ((r = cu_drv.cuDeviceGet(&d.dev, i)) != KC__CUDA_SUCCESS)
      s = cu_fail(sv, KC_EUNAVAILABLE, "cuDeviceGet", r, "");
    else if ((r = cu_drv.cuDeviceGetName(d.name, (int)sizeof d.name, d.dev)) != KC__CUDA_SUCCESS)
      s = cu_fail(sv, KC_EUNAVAILABLE, "cuDeviceGetName", r, "");
    else if ((r = cu_drv.cuDeviceGetAttribute(&major, KC__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                              d.dev)) ||
             (r = cu_drv.cuDeviceGetAttribute(&minor, KC__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                              d.dev)))
      s = cu_fail(sv, KC_EUNAVAILABLE, "cuDeviceGetAttribute", r, " (compute capability)");
    else if (!filter || cu_contains_nocase(d.name, filter)) {
      d.name[sizeof d.name - 1] = '\0';
      d.cc = major * 10 + minor;
      st->devs[st->ndevs++] = d;
    }
  }
  if (s == KC_OK && st->ndevs == 0)
    s = kc__bs_err(sv, KC_EUNAVAILABLE, "no CUDA device matches '%s'", filter);
  if (s == KC_OK) s = cu_pick_arch(st);
  if (s != KC_OK) {
    kc__bs_free(sv, st->devs);
    kc__bs_free(sv, st);
    return s;
  }
  snprintf(st->identity, sizeof st->identity, "cuda|nvrtc %d.%d|driver %d.%d|%s_%d|%s", cu_nvrtc.major,
           cu_nvrtc.minor, cu_drv.version / 1000, cu_drv.version % 1000 / 10, st->ptx ? "compute" : "sm",
           st->arch, st->devs[0].name);
  *state = st;
  return KC_OK;
}

static void cu_close(void *state) {
  cu_state *st = state;
  if (!st) return;
  kc__bs_free(st->sv, st->devs);
  kc__bs_free(st->sv, st);
}

static int cu_device_count(void *state) { return ((cu_state *)state)->ndevs; }

static const char *cu_device_name(void *state, int index) {
  cu_state *st = state;
  return index >= 0 && index < st->ndevs ? st->devs[index].name : NULL;
}

static const char *cu_identity(void *state) { return ((cu_state *)state)->identity; }

static kc_status cu_compile(void *state, const kc__tu *tu, void **artifact, size_t *size, uint64_t *sig,
                            kc__sb *log) {
  cu_state *st = state;
  cu_probe_out probe;
  kc_status s = cu_compile_tu(st->sv, tu->text, tu->len, tu->entry, st->arch, st->ptx, st->compile_options,
                              artifact, size, log, &probe);
  /* the sizes and alignments of by-value parameters, from NVRTC; an NVRTC
   * that keeps no PTX beside a cubin leaves the engine's sizes (a type it
   * cannot size fails its launches with KC_EARGS saying so) */
  if (!s && (probe.n || st->ptx)) s = kc__probe_apply(st->sv, tu, probe.vals, probe.n, sig);
  if (s) {
    kc__bs_free(st->sv, *artifact);
    *artifact = NULL;
  }
  return s;
}

/* ------------------------------------------------------------- contexts */

static kc_status cu_ctx_create(void *state, int device, void **bctx) {
  cu_state *st = state;
  *bctx = NULL;
  if (device < 0 || device >= st->ndevs)
    return kc__bs_err(st->sv, KC_EINVAL, "CUDA device %d does not exist (%d device%s)", device, st->ndevs,
                      st->ndevs == 1 ? "" : "s");
  cu_ctx *c = kc__bs_calloc(st->sv, sizeof *c);
  if (!c) return kc__bs_err(st->sv, KC_ENOMEM, "out of memory creating a CUDA context");
  c->st = st;
  c->id = kc__next_id();
  c->dev = st->devs[device].dev;
  CUresult r = cu_drv.cuDevicePrimaryCtxRetain(&c->ctx, c->dev);
  if (r != KC__CUDA_SUCCESS) {
    kc__bs_free(st->sv, c);
    return cu_fail(st->sv, KC_EBACKEND, "cuDevicePrimaryCtxRetain", r, "");
  }
  *bctx = c; /* made current when kcache calls the driver for it (cu_enter) */
  return KC_OK;
}

/* The engine has unlinked every module and freed every buffer first. */
static void cu_ctx_destroy(void *bctx) {
  cu_ctx *c = bctx;
  if (!c) return;
  CUcontext prev;
  if (cu_enter(c, &prev) == KC_OK) {
    cu_drv.cuCtxSynchronize(); /* let queued work end before the release may tear it down */
    cu_leave(c, prev);
  }
  if (!c->wrapped) cu_drv.cuDevicePrimaryCtxRelease_v2(c->dev); /* the caller's stays as it is */
  kc__bs_free(c->st->sv, c);
}

/* The engine has already unloaded every module of this context; buffers
 * stay (see the top). What is left is to drain the queue, so that the
 * reset is a point after which nothing of the old modules runs. */
static kc_status cu_ctx_reset(void *bctx) {
  cu_ctx *c = bctx;
  CUcontext prev;
  kc_status s = cu_enter(c, &prev);
  if (s != KC_OK) return s;
  CUresult r = cu_drv.cuCtxSynchronize();
  cu_leave(c, prev);
  if (r != KC__CUDA_SUCCESS)
    return cu_fail(c->st->sv, KC_EBACKEND, "cuCtxSynchronize", r,
                   " (during a context reset; a sticky error leaves the CUDA context "
                   "unusable: destroy every kcache context on the device)");
  return KC_OK;
}

static kc_status cu_ctx_finish(void *bctx) {
  cu_ctx *c = bctx;
  CUcontext prev;
  kc_status s = cu_enter(c, &prev);
  if (s != KC_OK) return s;
  CUresult r = cu_drv.cuCtxSynchronize();
  cu_leave(c, prev);
  if (r != KC__CUDA_SUCCESS) return cu_fail(c->st->sv, KC_ELAUNCH, "cuCtxSynchronize", r, "");
  return KC_OK;
}

/* ------------------------------------------------------------- launching */

static KC__COLD kc_status cu_launch_slow(kc__blinked *l, void **argv, const kc_dim3 *grid,
                                         const kc_dim3 *block, bool tried, CUresult r);

/* The fast path: the driver's current context compared with the kernel's
 * (cuCtxGetCurrent) and the driver's launch. It must never lock, allocate,
 * switch contexts or touch a string. argv is exactly the
 * kernelParams array: a pointer to each argument's bytes (a buffer's is its
 * kc__bufh, whose u64 is the CUdeviceptr). */
static kc_status cu_launch(kc__blinked *l, void **argv, const kc_dim3 *grid, const kc_dim3 *block) {
  const cu_ctx *c = l->bctx;
  if (KC__UNLIKELY(!grid || !block)) return cu_sv(l)->bad_dims(l, grid, block);
  CUcontext cur = NULL;
  if (KC__LIKELY(cu_drv.cuCtxGetCurrent(&cur) == KC__CUDA_SUCCESS && cur == c->ctx)) {
    CUresult r = cu_drv.cuLaunchKernel((CUfunction)l->fn, grid->x, grid->y, grid->z, block->x, block->y,
                                       block->z, 0, c->stream, argv, NULL);
    if (KC__LIKELY(r == KC__CUDA_SUCCESS)) return KC_OK;
    return cu_launch_slow(l, argv, grid, block, true, r);
  }
  return cu_launch_slow(l, argv, grid, block, false, KC__CUDA_SUCCESS);
}

static bool cu_is_context_error(CUresult r) {
  return r == KC__CUDA_ERROR_INVALID_CONTEXT || r == KC__CUDA_ERROR_CONTEXT_IS_DESTROYED ||
         r == KC__CUDA_ERROR_INVALID_HANDLE;
}

/* The caller's current context is another (or none), or the launch
 * failed. A failed launch enqueued nothing, so retrying once in the
 * kernel's context (then restoring the caller's) is safe. */
static KC__COLD kc_status cu_launch_slow(kc__blinked *l, void **argv, const kc_dim3 *grid,
                                         const kc_dim3 *block, bool tried, CUresult r) {
  const cu_ctx *c = l->bctx;
  /* a zero dimension is KC_EINVAL whether or not this thread had bound the
   * context (the fast path lets the driver find it) */
  if (!grid->x || !grid->y || !grid->z || !block->x || !block->y || !block->z)
    return cu_sv(l)->bad_dims(l, grid, block);
  kc_status s;
  if (!tried || cu_is_context_error(r)) {
    CUcontext prev;
    s = cu_enter(c, &prev);
    if (s != KC_OK) return s;
    r = cu_drv.cuLaunchKernel((CUfunction)l->fn, grid->x, grid->y, grid->z, block->x, block->y, block->z, 0,
                              c->stream, argv, NULL);
    s = r == KC__CUDA_SUCCESS ? KC_OK
                              : cu_limits_refused(l, grid, block, 0); /* read in the kernel's context */
    cu_leave(c, prev);
    if (r == KC__CUDA_SUCCESS) return KC_OK;
  } else {
    s = cu_limits_refused(l, grid, block, 0); /* the caller's current context is the kernel's */
  }
  if (s) return s;
  char detail[384];
  snprintf(detail, sizeof detail, " (kernel '%s', grid %ux%ux%u, block %ux%ux%u)", cu_sv(l)->name_of(l),
           (unsigned)grid->x, (unsigned)grid->y, (unsigned)grid->z, (unsigned)block->x, (unsigned)block->y,
           (unsigned)block->z);
  return cu_fail(c->st->sv, KC_ELAUNCH, "cuLaunchKernel", r, detail);
}

/* ---------------------------------------------------------------- linking */

static bool cu_is_binary(const unsigned char *p, size_t n) {
  static const unsigned char elf[4] = {0x7f, 'E', 'L', 'F'};
  static const unsigned char fatbin[4] = {0x50, 0xed, 0x55, 0xba};
  return n >= 4 && (memcmp(p, elf, 4) == 0 || memcmp(p, fatbin, 4) == 0);
}

/* cu_link's work, in c's context (made current by cu_link). */
static kc_status cu_link_in(cu_ctx *c, const kc__artifact *art, kc__blinked *l) {
  const kc__bsvc *sv = c->st->sv;
  const kc__artifact a = *art;
  const char *name = a.entry;
  if (!a.bytes || a.size == 0)
    return kc__bs_err(sv, KC_ELINK, "kernel '%s' has an empty CUDA artifact", name);
  /* PTX must reach the driver NUL-terminated; one that came back from a
   * store without its NUL gets one here. */
  const unsigned char *image = a.bytes;
  char *copy = NULL;
  if (!cu_is_binary(image, a.size) && image[a.size - 1] != '\0') {
    if (!(copy = kc__bs_strndup(sv, a.bytes, a.size)))
      return kc__bs_err(sv, KC_ENOMEM, "out of memory linking kernel '%s'", name);
    image = (const unsigned char *)copy;
  }
  char jitlog[4096];
  jitlog[0] = '\0';
  CUjit_option keys[2] = {KC__CU_JIT_ERROR_LOG_BUFFER, KC__CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *vals[2] = {jitlog, (void *)(uintptr_t)sizeof jitlog};
  CUmodule mod = NULL;
  CUresult r = cu_drv.cuModuleLoadDataEx(&mod, image, 2, keys, vals);
  kc__bs_free(sv, copy);
  if (r != KC__CUDA_SUCCESS) {
    char detail[4096 + 512];
    jitlog[sizeof jitlog - 1] = '\0';
    bool version = r == KC__CUDA_ERROR_UNSUPPORTED_PTX_VERSION || r == KC__CUDA_ERROR_NO_BINARY_FOR_GPU;
    snprintf(detail, sizeof detail, " (kernel '%s', %s for %s_%d%s)%s%s", name, c->st->ptx ? "PTX" : "cubin",
             c->st->ptx ? "compute" : "sm", c->st->arch,
             version ? "; NVRTC may be newer than the driver" : "", jitlog[0] ? "\n" : "", jitlog);
    return cu_fail(sv, KC_ELINK, "cuModuleLoadDataEx", r, detail);
  }
  CUfunction fn = NULL;
  const char *lowered = cu_lowered_name(a.bytes, a.size); /* a template's instantiation */
  r = cu_drv.cuModuleGetFunction(&fn, mod, lowered ? lowered : name);
  if (r != KC__CUDA_SUCCESS) {
    cu_drv.cuModuleUnload(mod);
    char detail[600];
    snprintf(detail, sizeof detail,
             " (entry '%s': a kernel of the dialect must be a KC_KERNEL; one of CUDA C++ must be declared "
             "extern \"C\" __global__, or named as a template instantiation such as \"%s<float>\")",
             name, name);
    return cu_fail(sv, KC_ELINK, "cuModuleGetFunction", r, detail);
  }
  l->launch = cu_launch;
  l->bctx = c;
  l->fn = fn;
  l->module = mod;
  l->extra = NULL;
  return KC_OK;
}

static kc_status cu_link(void *bctx, const kc__artifact *art, kc__blinked *l) {
  cu_ctx *c = bctx;
  CUcontext prev;
  kc_status s = cu_enter(c, &prev);
  if (s != KC_OK) return s;
  s = cu_link_in(c, art, l);
  cu_leave(c, prev);
  return s;
}

static void cu_unlink(kc__blinked *l) {
  cu_ctx *c = l->bctx;
  CUcontext prev;
  if (!l->module || !c || cu_enter(c, &prev) != KC_OK) return;
  /* Nothing queued may still run code of the module being unloaded. */
  cu_drv.cuCtxSynchronize();
  cu_drv.cuModuleUnload((CUmodule)l->module);
  cu_leave(c, prev);
  l->module = NULL;
  l->fn = NULL;
}

/* ---------------------------------------------------------------- buffers */

/* A zero-size buffer has the null device pointer and no allocation. */
static kc_status cu_buf_create(void *bctx, size_t size, kc__bufh *h) {
  cu_ctx *c = bctx;
  h->u64 = 0;
  if (size == 0) return KC_OK;
  CUcontext prev;
  kc_status s = cu_enter(c, &prev);
  if (s != KC_OK) return s;
  CUdeviceptr p = 0;
  CUresult r = cu_drv.cuMemAlloc_v2(&p, size);
  cu_leave(c, prev);
  if (r != KC__CUDA_SUCCESS) {
    char detail[64];
    snprintf(detail, sizeof detail, " (%zu bytes)", size);
    return cu_fail(c->st->sv, r == KC__CUDA_ERROR_OUT_OF_MEMORY ? KC_ENOMEM : KC_EBACKEND, "cuMemAlloc", r,
                   detail);
  }
  h->u64 = p;
  return KC_OK;
}

static void cu_buf_destroy(void *bctx, kc__bufh *h) {
  CUcontext prev;
  if (!h->u64 || cu_enter(bctx, &prev) != KC_OK) return;
  cu_drv.cuMemFree_v2((CUdeviceptr)h->u64);
  cu_leave(bctx, prev);
  h->u64 = 0;
}

static kc_status cu_buf_write(void *bctx, kc__bufh *h, size_t off, const void *src, size_t n) {
  cu_ctx *c = bctx;
  if (n == 0) return KC_OK;
  CUcontext prev;
  kc_status s = cu_enter(c, &prev);
  if (s != KC_OK) return s;
  CUresult r = cu_drv.cuMemcpyHtoD_v2((CUdeviceptr)(h->u64 + off), src, n);
  cu_leave(c, prev);
  return r == KC__CUDA_SUCCESS ? KC_OK : cu_fail(c->st->sv, KC_EBACKEND, "cuMemcpyHtoD", r, "");
}

static kc_status cu_buf_read(void *bctx, kc__bufh *h, size_t off, void *dst, size_t n) {
  cu_ctx *c = bctx;
  if (n == 0) return KC_OK;
  CUcontext prev;
  kc_status s = cu_enter(c, &prev);
  if (s != KC_OK) return s;
  CUresult r = cu_drv.cuMemcpyDtoH_v2(dst, (CUdeviceptr)(h->u64 + off), n);
  cu_leave(c, prev);
  return r == KC__CUDA_SUCCESS ? KC_OK : cu_fail(c->st->sv, KC_EBACKEND, "cuMemcpyDtoH", r, "");
}

const kc__backend kc__backend_cuda = {
    .name = "cuda",
    .unavailable = cu_unavailable,
    .open = cu_open,
    .close = cu_close,
    .device_count = cu_device_count,
    .device_name = cu_device_name,
    .identity = cu_identity,
    .prelude = cu_prelude,
    .language = KC_LANG_CUDA,
    .epilogue = cu_epilogue,
    .compile = cu_compile,
    .ctx_create = cu_ctx_create,
    .ctx_destroy = cu_ctx_destroy,
    .ctx_reset = cu_ctx_reset,
    .ctx_finish = cu_ctx_finish,
    .link = cu_link,
    .unlink = cu_unlink,
    .buf_create = cu_buf_create,
    .buf_destroy = cu_buf_destroy,
    .buf_write = cu_buf_write,
    .buf_read = cu_buf_read,
    .launch_ex = cu_launch_ex,
    .ctx_wrap = cu_ctx_wrap,
    .ctx_native = cu_ctx_native,
    .stream_create = cu_stream_create,
    .stream_wrap = cu_stream_wrap,
    .stream_release = cu_stream_release,
    .stream_sync = cu_stream_sync,
    .stream_wait = cu_stream_wait,
    .stream_capturing = cu_stream_capturing,
    .buf_wrap = cu_buf_wrap,
};
