/* SPDX-License-Identifier: MIT */
/*
 * interop.c -- the CUDA backend's part of "Using kcache inside an existing
 * program" (kcache.h): adopted CUcontexts (a primary context the caller
 * retained, or one it created: never released here), streams (made
 * non-blocking, or the caller's CUstream), device memory the caller
 * allocated (a CUdeviceptr; a view is the pointer plus its offset), graph
 * capture (cuStreamIsCapturing, for the core's capture check), and launches
 * with a configuration: a stream, dynamic shared memory (the function's
 * limit raised above 48 KiB), cooperative launches and thread-block
 * clusters through cuLaunchKernelEx.
 */
#include "backends/cuda/cuda.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

kc_status cu_ctx_wrap(void *state, void *native_ctx, void *native_dev, void **bctx) {
  cu_state *st = state;
  *bctx = NULL;
  if (!native_ctx) return kc__bs_err(st->sv, KC_EINVAL, "kc_context_wrap: the CUcontext is NULL");
  if (native_dev)
    return kc__bs_err(st->sv, KC_EINVAL,
                      "kc_context_wrap: CUDA takes no device (pass NULL): a CUcontext has one");
  cu_ctx *c = kc__bs_calloc(st->sv, sizeof *c);
  if (!c) return kc__bs_err(st->sv, KC_ENOMEM, "out of memory adopting a CUDA context");
  c->st = st;
  c->id = kc__next_id();
  c->ctx = native_ctx;
  c->wrapped = true;
  CUcontext prev;
  kc_status s = cu_enter(c, &prev);
  CUresult r = s ? KC__CUDA_SUCCESS : cu_drv.cuCtxGetDevice(&c->dev);
  if (!s) cu_leave(c, prev);
  if (!s && r != KC__CUDA_SUCCESS) s = cu_fail(st->sv, KC_EINVAL, "kc_context_wrap: cuCtxGetDevice", r, "");
  if (s) {
    kc__bs_free(st->sv, c);
    return s;
  }
  *bctx = c;
  return KC_OK;
}

void *cu_ctx_native(void *bctx) { return ((cu_ctx *)bctx)->ctx; }

/* ---------------------------------------------------------------- streams */

kc_status cu_stream_create(void *bctx, void **native) {
  cu_ctx *c = bctx;
  CUcontext prev;
  kc_status s = cu_enter(c, &prev);
  if (s) return s;
  CUstream stream = NULL;
  CUresult r = cu_drv.cuStreamCreate(&stream, KC__CU_STREAM_NON_BLOCKING);
  cu_leave(c, prev);
  if (r != KC__CUDA_SUCCESS)
    return cu_fail(c->st->sv, KC_EBACKEND, "kc_stream_create: cuStreamCreate", r, "");
  *native = stream;
  return KC_OK;
}

/* NULL is the legacy default stream, kcache's own. */
kc_status cu_stream_wrap(void *bctx, void *native) {
  cu_ctx *c = bctx;
  if (!native) return KC_OK;
  CUcontext owner = NULL; /* cuStreamGetCtx needs no current context */
  CUresult r = cu_drv.cuStreamGetCtx(native, &owner);
  if (r != KC__CUDA_SUCCESS) return cu_fail(c->st->sv, KC_EINVAL, "kc_stream_wrap: cuStreamGetCtx", r, "");
  if (owner != c->ctx)
    return kc__bs_err(c->st->sv, KC_EINVAL, "kc_stream_wrap: the CUstream belongs to another CUcontext");
  return KC_OK;
}

void cu_stream_release(void *bctx, void *native, bool owned) {
  CUcontext prev;
  if (!owned || !native || cu_enter(bctx, &prev) != KC_OK) return;
  cu_drv.cuStreamSynchronize(native);
  cu_drv.cuStreamDestroy_v2(native);
  cu_leave(bctx, prev);
}

kc_status cu_stream_sync(void *bctx, void *native) {
  cu_ctx *c = bctx;
  CUcontext prev;
  kc_status s = cu_enter(c, &prev);
  if (s) return s;
  CUresult r = cu_drv.cuStreamSynchronize(native ? (CUstream)native : c->stream);
  cu_leave(c, prev);
  return r == KC__CUDA_SUCCESS ? KC_OK
                               : cu_fail(c->st->sv, KC_ELAUNCH, "kc_stream_sync: cuStreamSynchronize", r, "");
}

/* An event recorded on `other` that native waits for (both may be
 * capturing: event record and wait are captured as graph edges). */
kc_status cu_stream_wait(void *bctx, void *native, void *other) {
  cu_ctx *c = bctx;
  CUcontext prev;
  kc_status s = cu_enter(c, &prev);
  if (s) return s;
  CUevent ev = NULL;
  CUresult r = cu_drv.cuEventCreate(&ev, KC__CU_EVENT_DISABLE_TIMING);
  if (r != KC__CUDA_SUCCESS) {
    cu_leave(c, prev);
    return cu_fail(c->st->sv, KC_EBACKEND, "kc_stream_wait: cuEventCreate", r, "");
  }
  const char *what = "cuEventRecord";
  r = cu_drv.cuEventRecord(ev, other);
  if (r == KC__CUDA_SUCCESS) {
    what = "cuStreamWaitEvent";
    r = cu_drv.cuStreamWaitEvent(native, ev, 0);
  }
  cu_drv.cuEventDestroy_v2(ev); /* the wait holds what it needs */
  cu_leave(c, prev);
  return r == KC__CUDA_SUCCESS ? KC_OK : cu_fail(c->st->sv, KC_EBACKEND, what, r, " (kc_stream_wait)");
}

/* Whether native is capturing; a query that fails (another stream's
 * global-mode capture forbids even that) counts as capturing: compiling
 * then would break the capture. */
bool cu_stream_capturing(void *bctx, void *native) {
  const cu_ctx *c = bctx;
  CUcontext prev;
  if (cu_enter(c, &prev) != KC_OK) return false; /* the launch reports the broken context */
  int status = KC__CU_STREAM_CAPTURE_STATUS_NONE;
  CUresult r = cu_drv.cuStreamIsCapturing(native ? (CUstream)native : c->stream, &status);
  cu_leave(c, prev);
  return r != KC__CUDA_SUCCESS || status != KC__CU_STREAM_CAPTURE_STATUS_NONE;
}

/* ----------------------------------------------------------------- memory */

kc_status cu_buf_wrap(void *bctx, void *native, size_t size, kc__bufh *h) {
  cu_ctx *c = bctx;
  CUcontext prev;
  kc_status s = cu_enter(c, &prev);
  if (s) return s;
  CUdeviceptr p = (CUdeviceptr)(uintptr_t)native, base = 0;
  size_t have = 0;
  CUresult r = cu_drv.cuMemGetAddressRange_v2(&base, &have, p);
  cu_leave(c, prev);
  if (r != KC__CUDA_SUCCESS)
    return cu_fail(c->st->sv, KC_EINVAL, "kc_buffer_wrap: cuMemGetAddressRange", r,
                   " (not device memory of this context?)");
  if (p - base > have || size > have - (p - base))
    return kc__bs_err(
        c->st->sv, KC_EINVAL,
        "kc_buffer_wrap: the allocation holds %zu bytes from the pointer, fewer than the %zu asked for",
        (size_t)(have - (p - base)), size);
  h->u64 = p;
  return KC_OK;
}

/* ---------------------------------------------------------------- launch */

static int cu_dev_attr(const cu_ctx *c, int attr) {
  int v = 0;
  return cu_drv.cuDeviceGetAttribute(&v, attr, c->dev) == KC__CUDA_SUCCESS ? v : 0;
}

kc_status cu_limits_refused(const kc__blinked *l, const kc_dim3 *grid, const kc_dim3 *block,
                            uint32_t shared) {
  const cu_ctx *c = l->bctx;
  const kc__bsvc *sv = c->st->sv;
  const char *name = cu_sv(l)->name_of(l);
  static const char axis[] = "xyz";
  const unsigned b[3] = {block->x, block->y, block->z}, g[3] = {grid->x, grid->y, grid->z};
  for (int d = 0; d < 3; d++) {
    int most = cu_dev_attr(c, KC__CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X + d);
    if (most > 0 && b[d] > (unsigned)most)
      return kc__bs_err(sv, KC_EINVAL,
                        "kernel '%s': block %ux%ux%u is above the device's %d threads in %c "
                        "(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_%c)",
                        name, b[0], b[1], b[2], most, axis[d], axis[d] - 32);
    most = cu_dev_attr(c, KC__CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X + d);
    if (most > 0 && g[d] > (unsigned)most)
      return kc__bs_err(sv, KC_EINVAL,
                        "kernel '%s': grid %ux%ux%u is above the device's %d blocks in %c "
                        "(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_%c)",
                        name, g[0], g[1], g[2], most, axis[d], axis[d] - 32);
  }
  int threads = 0, own = 0;
  unsigned long long n;
  if (__builtin_mul_overflow((unsigned long long)b[0] * b[1], (unsigned long long)b[2], &n)) n = ULLONG_MAX;
  if (cu_drv.cuFuncGetAttribute(&threads, KC__CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, (CUfunction)l->fn) ==
          KC__CUDA_SUCCESS &&
      threads > 0 && n > (unsigned long long)threads)
    return kc__bs_err(sv, KC_EINVAL,
                      "kernel '%s': a block of %llu threads (%ux%ux%u) is above the %d this kernel takes "
                      "(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: its registers and the device's limit)",
                      name, n, b[0], b[1], b[2], threads);
  int optin = cu_dev_attr(c, KC__CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  if (cu_drv.cuFuncGetAttribute(&own, KC__CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, (CUfunction)l->fn) !=
      KC__CUDA_SUCCESS)
    own = 0;
  if (optin > 0 && (unsigned long long)shared + (unsigned)(own > 0 ? own : 0) > (unsigned long long)optin)
    return kc__bs_err(sv, KC_EARGS,
                      "kernel '%s': %u bytes of dynamic shared memory (shared_bytes) are above the %d the "
                      "device has for them: CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN is %d, "
                      "less %d of the kernel's own __shared__ variables",
                      name, shared, optin - own, optin, own);
  return KC_OK;
}

static KC__COLD kc_status cu_ex_fail(const kc__blinked *l, const kc__lcfg *cfg, const char *call,
                                     CUresult r) {
  const cu_ctx *c = l->bctx;
  kc_status s = cu_limits_refused(l, cfg->grid, cfg->block, cfg->shared_bytes);
  if (s) return s;
  char detail[400];
  snprintf(detail, sizeof detail, " (kernel '%s', grid %ux%ux%u, block %ux%ux%u, %u shared bytes%s%s)",
           cu_sv(l)->name_of(l), cfg->grid->x, cfg->grid->y, cfg->grid->z, cfg->block->x, cfg->block->y,
           cfg->block->z, cfg->shared_bytes, cfg->flags & KC_LAUNCH_COOPERATIVE ? ", cooperative" : "",
           cfg->cluster.x ? ", clusters (sm_90 and up; the grid a multiple of the cluster)" : "");
  return cu_fail(c->st->sv, KC_ELAUNCH, call, r, detail);
}

/* l->extra: the largest dynamic shared memory limit raised for l's
 * function, read by every launch (atomically) and raised under
 * cu_shared_lock, so that the attribute and the record only grow together
 * (two threads raising at once cannot leave the attribute below it). */
static pthread_mutex_t cu_shared_lock = PTHREAD_MUTEX_INITIALIZER;

static inline uintptr_t cu_shared_raised(const kc__blinked *l) {
  return (uintptr_t)__atomic_load_n(&l->extra, __ATOMIC_ACQUIRE);
}

/* Raises the function's dynamic shared memory limit to bytes (once per
 * size above the largest raised). */
static KC__COLD kc_status cu_raise_shared(kc__blinked *l, const kc__lcfg *cfg) {
  CUresult r = KC__CUDA_SUCCESS;
  pthread_mutex_lock(&cu_shared_lock);
  if (cfg->shared_bytes > cu_shared_raised(l)) {
    r = cu_drv.cuFuncSetAttribute((CUfunction)l->fn, KC__CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                  (int)cfg->shared_bytes);
    if (r == KC__CUDA_SUCCESS)
      __atomic_store_n(&l->extra, (void *)(uintptr_t)cfg->shared_bytes, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&cu_shared_lock);
  return r == KC__CUDA_SUCCESS ? KC_OK
                               : cu_ex_fail(l, cfg, "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)", r);
}

static KC__COLD kc_status cu_launch_attrs(kc__blinked *l, void **argv, const kc__lcfg *cfg, CUstream stream) {
  const cu_ctx *c = l->bctx;
  if (!cu_drv.cuLaunchKernelEx)
    return kc__bs_err(
        c->st->sv, KC_EUNAVAILABLE,
        "kernel '%s': cooperative and cluster launches need cuLaunchKernelEx (a CUDA 12.0 driver; this "
        "one is %d.%d)",
        cu_sv(l)->name_of(l), cu_drv.version / 1000, cu_drv.version % 1000 / 10);
  cu_launch_attr attrs[2];
  memset(attrs, 0, sizeof attrs);
  unsigned n = 0;
  if (cfg->flags & KC_LAUNCH_COOPERATIVE) {
    attrs[n].id = KC__CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    attrs[n++].value.cooperative = 1;
  }
  if (cfg->cluster.x || cfg->cluster.y || cfg->cluster.z) {
    attrs[n].id = KC__CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attrs[n].value.cluster.x = cfg->cluster.x ? cfg->cluster.x : 1;
    attrs[n].value.cluster.y = cfg->cluster.y ? cfg->cluster.y : 1;
    attrs[n++].value.cluster.z = cfg->cluster.z ? cfg->cluster.z : 1;
  }
  cu_launch_config lc = {cfg->grid->x,  cfg->grid->y,      cfg->grid->z, cfg->block->x, cfg->block->y,
                         cfg->block->z, cfg->shared_bytes, stream,       attrs,         n};
  CUresult r = cu_drv.cuLaunchKernelEx(&lc, (CUfunction)l->fn, argv, NULL);
  return r == KC__CUDA_SUCCESS ? KC_OK : cu_ex_fail(l, cfg, "cuLaunchKernelEx", r);
}

/* cu_launch_ex's work, in l's context (current already). */
static kc_status cu_launch_ex_in(kc__blinked *l, void **argv, const kc__lcfg *cfg) {
  const cu_ctx *c = l->bctx;
  const kc_dim3 *g = cfg->grid, *b = cfg->block;
  kc_status s = KC_OK;
  /* raised to any size above the largest raised so far, not only above
   * 48 KiB: without opting in, a function gets 48 KiB less its own static
   * __shared__ variables */
  if (KC__UNLIKELY(cfg->shared_bytes > cu_shared_raised(l)) && (s = cu_raise_shared(l, cfg)) != KC_OK)
    return s;
  CUstream stream = cfg->stream ? (CUstream)cfg->stream : c->stream;
  if (KC__UNLIKELY(cfg->flags || cfg->cluster.x || cfg->cluster.y || cfg->cluster.z))
    return cu_launch_attrs(l, argv, cfg, stream);
  CUresult r = cu_drv.cuLaunchKernel((CUfunction)l->fn, g->x, g->y, g->z, b->x, b->y, b->z, cfg->shared_bytes,
                                     stream, argv, NULL);
  return KC__LIKELY(r == KC__CUDA_SUCCESS) ? KC_OK : cu_ex_fail(l, cfg, "cuLaunchKernel", r);
}

/* The configured launch: cu_launch (cuda.c) with a stream and shared
 * memory; attributes go through cuLaunchKernelEx. Like cu_launch it
 * launches directly when the caller's current context is the kernel's, and
 * else switches to it and back (kcache.h: CUDA's current context). */
kc_status cu_launch_ex(kc__blinked *l, void **argv, const kc__lcfg *cfg) {
  const cu_ctx *c = l->bctx;
  const kc_dim3 *g = cfg->grid, *b = cfg->block;
  if (KC__UNLIKELY(!g->x || !g->y || !g->z || !b->x || !b->y || !b->z)) return cu_sv(l)->bad_dims(l, g, b);
  CUcontext cur = NULL;
  if (KC__LIKELY(cu_drv.cuCtxGetCurrent(&cur) == KC__CUDA_SUCCESS && cur == c->ctx))
    return cu_launch_ex_in(l, argv, cfg);
  CUcontext prev;
  kc_status s = cu_enter(c, &prev);
  if (s) return s;
  s = cu_launch_ex_in(l, argv, cfg);
  cu_leave(c, prev);
  return s;
}
