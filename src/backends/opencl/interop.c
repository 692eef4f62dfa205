/* SPDX-License-Identifier: MIT */
/*
 * interop.c -- the OpenCL backend's part of "Using kcache inside an
 * existing program" (kcache.h): contexts adopted from the caller
 * (retained, released, never destroyed), streams as command queues (made
 * in order, or the caller's, retained), cl_mem objects the caller owns
 * (retained) and sub-buffers for offsets, and launches with a
 * configuration: a queue, KC_LOCAL pointer parameters sized per launch
 * (clSetKernelArg with a size and NULL), SVM pointers where the device
 * has shared virtual memory. Also what opencl.c shares with it: a
 * context's setup (its queue, what it learns of its device) and its end
 * (ocl_ctx_destroy), for kcache's own contexts and adopted ones alike, and
 * the launch's lock of a linked object (ocl_lock). It uses nothing of
 * opencl.c.
 */
#include "backends/opencl/opencl.h"

#include <stdio.h>
#include <string.h>

/* What a context learns of its device, and kcache's own in-order queue
 * in it (a launch followed by a read sees the launch's writes). */
kc_status ocl_ctx_finish_setup(ocl_ctx *c) {
  cl_int e;
  c->queue = ocl.clCreateCommandQueue(c->ctx, c->device, 0, &e);
  if (!c->queue) return ocl_fail(c->sv, KC_EBACKEND, "clCreateCommandQueue", e);
  cl_bitfield svm = 0;
  c->svm =
      ocl_set_arg_svm &&
      ocl.clGetDeviceInfo(c->device, OCL_DEVICE_SVM_CAPABILITIES, sizeof svm, &svm, NULL) == CL_SUCCESS &&
      svm != 0;
  cl_uint bits = 0;
  if (ocl.clGetDeviceInfo(c->device, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof bits, &bits, NULL) != CL_SUCCESS)
    bits = 8;
  c->base_align = bits >= 8 ? bits / 8 : 1;
  cl_bool unified = CL_FALSE; /* deprecated in OpenCL 2.0, still answered (PoCL: true on the CPU) */
  c->host_memory = ocl.clGetDeviceInfo(c->device, CL_DEVICE_HOST_UNIFIED_MEMORY, sizeof unified, &unified,
                                       NULL) == CL_SUCCESS &&
                   unified;
  /* a device that will not say gets no more than OpenCL's minimums */
  if (ocl.clGetDeviceInfo(c->device, CL_DEVICE_LOCAL_MEM_SIZE, sizeof c->local_mem, &c->local_mem, NULL) !=
      CL_SUCCESS)
    c->local_mem = 32768;
  cl_uint dims = 0;
  size_t items[16];
  if (ocl.clGetDeviceInfo(c->device, CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS, sizeof dims, &dims, NULL) !=
          CL_SUCCESS ||
      dims < 3 || dims > 16 ||
      ocl.clGetDeviceInfo(c->device, CL_DEVICE_MAX_WORK_ITEM_SIZES, dims * sizeof items[0], items, NULL) !=
          CL_SUCCESS)
    items[0] = items[1] = items[2] = 1;
  for (int d = 0; d < 3; d++) c->max_items[d] = items[d] ? items[d] : 1;
  return KC_OK;
}

/* The end of a context, kcache's own or adopted: its queue drained and
 * released, its cl_context released (the caller's keeps its own
 * reference). */
void ocl_ctx_destroy(void *bctx) {
  ocl_ctx *c = bctx;
  if (!c) return;
  if (c->queue) {
    ocl.clFinish(c->queue);
    ocl.clReleaseCommandQueue(c->queue);
  }
  if (c->ctx) ocl.clReleaseContext(c->ctx);
  kc__bs_free(c->sv, c);
}

kc_status ocl_ctx_wrap(void *state, void *native_ctx, void *native_dev, void **bctx) {
  ocl_state *st = state;
  const kc__bsvc *sv = st->sv;
  *bctx = NULL;
  if (!native_ctx) return kc__bs_err(sv, KC_EINVAL, "kc_context_wrap: the cl_context is NULL");
  cl_context nctx = native_ctx;
  cl_device_id devs[64];
  size_t bytes = 0;
  cl_int e = ocl.clGetContextInfo(nctx, CL_CONTEXT_DEVICES, sizeof devs, devs, &bytes);
  if (e != CL_SUCCESS)
    return ocl_fail(sv, KC_EINVAL, "kc_context_wrap: clGetContextInfo(CL_CONTEXT_DEVICES)", e);
  size_t n = bytes / sizeof devs[0];
  cl_device_id dev = native_dev;
  if (!dev && n == 1) dev = devs[0];
  bool found = false;
  for (size_t i = 0; i < n && dev; i++) found |= devs[i] == dev;
  /* a context made on a sub-device may list its root device (PoCL does) */
  for (cl_device_id d = dev; !found && d;) {
    cl_device_id parent = NULL;
    if (ocl.clGetDeviceInfo(d, CL_DEVICE_PARENT_DEVICE, sizeof parent, &parent, NULL) != CL_SUCCESS) break;
    for (size_t i = 0; i < n && parent; i++) found |= devs[i] == parent;
    d = parent;
  }
  if (!found)
    return kc__bs_err(sv, KC_EINVAL,
                      dev ? "kc_context_wrap: the cl_device_id is not a device of the cl_context"
                          : "kc_context_wrap: the cl_context has %zu devices: say which (native_device)",
                      n);
  ocl_ctx *c = kc__bs_calloc(sv, sizeof *c);
  if (!c) return kc__bs_err(sv, KC_ENOMEM, "out of memory");
  c->sv = sv;
  c->st = st;
  c->device = dev;
  if ((e = ocl.clRetainContext(nctx)) != CL_SUCCESS) {
    kc__bs_free(sv, c);
    return ocl_fail(sv, KC_EINVAL, "kc_context_wrap: clRetainContext", e);
  }
  c->ctx = nctx; /* ocl_ctx_destroy releases the reference taken here */
  kc_status s = ocl_ctx_finish_setup(c);
  if (s) {
    ocl_ctx_destroy(c);
    return s;
  }
  *bctx = c;
  return KC_OK;
}

void *ocl_ctx_native(void *bctx) { return ((ocl_ctx *)bctx)->ctx; }

/* ---------------------------------------------------------------- streams */

kc_status ocl_stream_create(void *bctx, void **native) {
  ocl_ctx *c = bctx;
  cl_int e;
  cl_command_queue q = ocl.clCreateCommandQueue(c->ctx, c->device, 0, &e);
  if (!q) return ocl_fail(c->sv, KC_EBACKEND, "kc_stream_create: clCreateCommandQueue", e);
  *native = q;
  return KC_OK;
}

kc_status ocl_stream_wrap(void *bctx, void *native) {
  ocl_ctx *c = bctx;
  if (!native) return kc__bs_err(c->sv, KC_EINVAL, "kc_stream_wrap: the cl_command_queue is NULL");
  cl_command_queue q = native;
  cl_context qctx = NULL;
  cl_device_id qdev = NULL;
  cl_int e = ocl.clGetCommandQueueInfo(q, CL_QUEUE_CONTEXT, sizeof qctx, &qctx, NULL);
  if (e == CL_SUCCESS) e = ocl.clGetCommandQueueInfo(q, CL_QUEUE_DEVICE, sizeof qdev, &qdev, NULL);
  if (e != CL_SUCCESS) return ocl_fail(c->sv, KC_EINVAL, "kc_stream_wrap: clGetCommandQueueInfo", e);
  if (qctx != c->ctx)
    return kc__bs_err(c->sv, KC_EINVAL, "kc_stream_wrap: the queue belongs to another cl_context");
  if (qdev != c->device)
    return kc__bs_err(c->sv, KC_EINVAL, "kc_stream_wrap: the queue is on another device than the context's");
  cl_command_queue_properties props = 0;
  e = ocl.clGetCommandQueueInfo(q, CL_QUEUE_PROPERTIES, sizeof props, &props, NULL);
  if (e != CL_SUCCESS) return ocl_fail(c->sv, KC_EINVAL, "kc_stream_wrap: clGetCommandQueueInfo", e);
  if (props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE)
    return kc__bs_err(
        c->sv, KC_EINVAL,
        "kc_stream_wrap: the queue is out of order (CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE), and a "
        "kc_stream is an in-order queue: wrap an in-order queue");
  e = ocl.clRetainCommandQueue(q);
  return e == CL_SUCCESS ? KC_OK : ocl_fail(c->sv, KC_EINVAL, "kc_stream_wrap: clRetainCommandQueue", e);
}

/* A queue kcache made is drained first (kc_stream_destroy's promise); the
 * caller's is only released (its own reference keeps it). */
void ocl_stream_release(void *bctx, void *native, bool owned) {
  (void)bctx;
  if (!native) return;
  if (owned) ocl.clFinish(native);
  ocl.clReleaseCommandQueue(native);
}

kc_status ocl_stream_sync(void *bctx, void *native) {
  ocl_ctx *c = bctx;
  cl_int e = ocl.clFinish(native ? (cl_command_queue)native : c->queue);
  return e == CL_SUCCESS ? KC_OK : ocl_fail(c->sv, KC_EBACKEND, "kc_stream_sync: clFinish", e);
}

/* A marker on `other` and a barrier on native that waits for it. */
kc_status ocl_stream_wait(void *bctx, void *native, void *other) {
  ocl_ctx *c = bctx;
  cl_command_queue q = native ? (cl_command_queue)native : c->queue;
  cl_command_queue o = other ? (cl_command_queue)other : c->queue;
  cl_event ev = NULL;
  cl_int e = ocl.clEnqueueMarkerWithWaitList(o, 0, NULL, &ev);
  if (e != CL_SUCCESS) return ocl_fail(c->sv, KC_EBACKEND, "kc_stream_wait: clEnqueueMarkerWithWaitList", e);
  e = ocl.clEnqueueBarrierWithWaitList(q, 1, &ev, NULL);
  ocl.clReleaseEvent(ev);
  return e == CL_SUCCESS ? KC_OK
                         : ocl_fail(c->sv, KC_EBACKEND, "kc_stream_wait: clEnqueueBarrierWithWaitList", e);
}

/* ----------------------------------------------------------------- memory */

kc_status ocl_buf_wrap(void *bctx, void *native, size_t size, kc__bufh *h) {
  ocl_ctx *c = bctx;
  cl_mem m = native;
  cl_context mctx = NULL;
  size_t msize = 0;
  cl_mem_object_type type = 0;
  cl_int e = ocl.clGetMemObjectInfo(m, CL_MEM_CONTEXT, sizeof mctx, &mctx, NULL);
  if (e == CL_SUCCESS) e = ocl.clGetMemObjectInfo(m, CL_MEM_SIZE, sizeof msize, &msize, NULL);
  if (e == CL_SUCCESS) e = ocl.clGetMemObjectInfo(m, CL_MEM_TYPE, sizeof type, &type, NULL);
  if (e != CL_SUCCESS) return ocl_fail(c->sv, KC_EINVAL, "kc_buffer_wrap: clGetMemObjectInfo", e);
  if (mctx != c->ctx)
    return kc__bs_err(c->sv, KC_EINVAL, "kc_buffer_wrap: the cl_mem belongs to another cl_context");
  if (type != CL_MEM_OBJECT_BUFFER)
    return kc__bs_err(c->sv, KC_EINVAL, "kc_buffer_wrap: the cl_mem is not a buffer");
  if (msize < size)
    return kc__bs_err(c->sv, KC_EINVAL,
                      "kc_buffer_wrap: the cl_mem has %zu bytes, fewer than the %zu asked for", msize, size);
  if ((e = ocl.clRetainMemObject(m)) != CL_SUCCESS) return ocl_fail(c->sv, KC_EINVAL, "clRetainMemObject", e);
  h->ptr = m;
  return KC_OK;
}

kc_status ocl_buf_view_aligned(void *bctx, const kc__bufh *parent, size_t off, size_t size, kc__bufh *h) {
  ocl_ctx *c = bctx;
  if (off % c->base_align)
    return kc__bs_err(
        c->sv, KC_EINVAL,
        "kc_buffer_view: offset %zu is not a multiple of the device's base address alignment "
        "(%u bytes, CL_DEVICE_MEM_BASE_ADDR_ALIGN); pass the offset as a kernel argument instead",
        off, c->base_align);
  return ocl_buf_view(bctx, parent, off, size, h);
}

/* kc_buffer_host: a cl_mem on the caller's memory (CL_MEM_USE_HOST_PTR),
 * on a device that shares the host's memory only (elsewhere the platform
 * would copy at every use behind kcache's back). A blocking read into the
 * same memory, which OpenCL allows for such a buffer, is the caller's
 * synchronization (kc_buffer_read). */
kc_status ocl_buf_host(void *bctx, void *ptr, size_t size, kc__bufh *h) {
  ocl_ctx *c = bctx;
  if (!c->host_memory)
    return kc__bs_err(
        c->sv, KC_EUNAVAILABLE,
        "kc_buffer_host: this OpenCL device does not share the host's memory "
        "(CL_DEVICE_HOST_UNIFIED_MEMORY is false): copy with kc_buffer_write and kc_buffer_read");
  cl_int e;
  cl_mem m = ocl.clCreateBuffer(c->ctx, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, size, ptr, &e);
  if (!m)
    return ocl_fail(
        c->sv, e == CL_MEM_OBJECT_ALLOCATION_FAILURE || e == CL_OUT_OF_HOST_MEMORY ? KC_ENOMEM : KC_EBACKEND,
        "kc_buffer_host: clCreateBuffer(CL_MEM_USE_HOST_PTR)", e);
  h->ptr = m;
  return KC_OK;
}

/* A wrapped cl_mem: the reference kc_buffer_wrap took. */
void ocl_buf_unwrap(void *bctx, kc__bufh *h) {
  (void)bctx;
  if (h->ptr) ocl.clReleaseMemObject((cl_mem)h->ptr);
  h->ptr = NULL;
}

/* ---------------------------------------------------------------- launch */

/* Another thread is between set-args and enqueue on the same kernel: the
 * window is a few microseconds, so spin briefly, then give the CPU away. */
KC__COLD void ocl_lock_wait(_Atomic int *busy) {
  for (unsigned spins = 0;; spins++) {
    if (!kc__load_relaxed(busy) && !atomic_exchange_explicit(busy, 1, memory_order_acquire)) return;
    if (spins < 64) kc__cpu_relax();
    else sched_yield();
  }
}

KC__COLD cl_int ocl_launch_first(kc__blinked *l, cl_command_queue q, cl_uint dims, const size_t *offset,
                                 const size_t *global, const size_t *local) {
  ocl_linked *x = l->extra;
  cl_event ev = NULL;
  cl_int e = ocl.clEnqueueNDRangeKernel(q, (cl_kernel)l->fn, dims, offset, global, local, 0, NULL, &ev);
  if (e != CL_SUCCESS) return e; /* the next launch is the first */
  x->late = false;
  /* (ocl_state.lock under busy: a leaf, taken once per linked object) */
  if (ev) ocl_late_launched(((ocl_ctx *)l->bctx)->st, (cl_program)l->module, ev);
  return e;
}

void ocl_lock(_Atomic int *busy) {
  if (KC__UNLIKELY(atomic_exchange_explicit(busy, 1, memory_order_acquire))) ocl_lock_wait(busy);
}

static KC__COLD kc_status ocl_ex_fail(const kc__blinked *l, const ocl_linked *x, cl_int e, uint32_t arg,
                                      bool svm) {
  const ocl_ctx *c = l->bctx;
  if (svm) {
    char name[256] = "";
    ocl.clGetDeviceInfo(c->device, CL_DEVICE_NAME, sizeof name - 1, name, NULL);
    return kc__bs_err(x->sv, KC_EARGS,
                      "kernel '%s' argument %u: a raw pointer (KC_ARG_PTR) needs shared virtual memory "
                      "(OpenCL 2.0 SVM), which %s%s%s lacks: wrap the cl_mem with kc_buffer_wrap instead",
                      x->entry, (unsigned)arg,
                      !ocl_set_arg_svm ? "this OpenCL library (it has no clSetKernelArgSVMPointer)"
                                       : "device '",
                      !ocl_set_arg_svm ? "" : name, !ocl_set_arg_svm ? "" : "'");
  }
  if (arg != UINT32_MAX)
    return kc__bs_err(x->sv, KC_EARGS, "kernel '%s': clSetKernelArg(%u): %s (%d)", x->entry, (unsigned)arg,
                      ocl_errname(e), (int)e);
  kc_status st = e == CL_OUT_OF_RESOURCES || e == CL_OUT_OF_HOST_MEMORY ? KC_ENOMEM
                 : e == CL_INVALID_COMMAND_QUEUE                        ? KC_EINVAL
                                                                        : KC_ELAUNCH;
  return kc__bs_err(x->sv, st, "kernel '%s': clEnqueueNDRangeKernel: %s (%d)", x->entry, ocl_errname(e),
                    (int)e);
}

/* Local memory (want bytes, in args' KC_LOCAL parameters) above what the
 * device has left for them. */
static KC__COLD kc_status ocl_local_refused(const kc__blinked *l, const kc_arg *args, cl_ulong want) {
  const ocl_linked *x = l->extra;
  const ocl_ctx *c = l->bctx;
  uint32_t first = 0;
  while (first < x->nargs && args[first].kind != KC_ARG_LOCAL) first++;
  cl_ulong own = c->local_mem - x->local_room;
  char why[160] = "";
  if (own)
    snprintf(why, sizeof why, ", less %llu of the kernel's own __local variables (CL_KERNEL_LOCAL_MEM_SIZE)",
             (unsigned long long)own);
  return kc__bs_err(x->sv, KC_EARGS,
                    "kernel '%s': %llu bytes of local memory (KC_ARG_LOCAL_BYTES, from argument %u on) are "
                    "above the %llu the device has for them: CL_DEVICE_LOCAL_MEM_SIZE is %llu%s",
                    x->entry, (unsigned long long)want, (unsigned)first, (unsigned long long)x->local_room,
                    (unsigned long long)c->local_mem, why);
}

kc_status ocl_group_refused(const kc__blinked *l, const kc_dim3 *block) {
  const ocl_linked *x = l->extra;
  const ocl_ctx *c = l->bctx;
  return kc__bs_err(x->sv, KC_EINVAL,
                    "kernel '%s': a group of %ux%ux%u work-items is more than the device takes: at most %zu "
                    "in all for this kernel (CL_KERNEL_WORK_GROUP_SIZE), and %zux%zux%zu per dimension "
                    "(CL_DEVICE_MAX_WORK_ITEM_SIZES)",
                    x->entry, (unsigned)block->x, (unsigned)block->y, (unsigned)block->z, x->group_max,
                    c->max_items[0], c->max_items[1], c->max_items[2]);
}

/* ocl_launch (opencl.c) with a queue and per-launch argument kinds. */
kc_status ocl_launch_ex(kc__blinked *l, void **argv, const kc__lcfg *cfg) {
  ocl_linked *x = l->extra;
  const ocl_ctx *c = l->bctx;
  cl_kernel k = l->fn;
  const kc_dim3 *grid = cfg->grid, *block = cfg->block;
  if (KC__UNLIKELY(cfg->shared_bytes))
    return kc__bs_err(x->sv, KC_EINVAL,
                      "kernel '%s': OpenCL sizes local memory per parameter: declare a KC_LOCAL pointer "
                      "parameter and pass KC_ARG_LOCAL_BYTES(n), not shared_bytes",
                      x->entry);
  if (KC__UNLIKELY(cfg->flags || cfg->cluster.x || cfg->cluster.y || cfg->cluster.z))
    return kc__bs_err(
        x->sv, KC_EUNAVAILABLE,
        "kernel '%s': the OpenCL backend has no cooperative or cluster launches (they are CUDA's)", x->entry);
  size_t local[3] = {block->x, block->y, block->z};
  size_t global[3] = {(size_t)grid->x * block->x, (size_t)grid->y * block->y, (size_t)grid->z * block->z};
  if (KC__UNLIKELY(!global[0] || !global[1] || !global[2])) return ocl_sv(l)->bad_dims(l, grid, block);
  if (KC__UNLIKELY(!ocl_group_fits(c, x, block))) return ocl_group_refused(l, block);
  cl_uint dims = global[2] > 1 ? 3 : global[1] > 1 ? 2 : 1;
  cl_command_queue q = cfg->stream ? (cl_command_queue)cfg->stream : x->queue;
  if (cfg->args) { /* local memory within the device's, before the platform sees it */
    cl_ulong want = 0;
    for (uint32_t j = 0; j < x->nargs; j++)
      if (cfg->args[j].kind == KC_ARG_LOCAL) want += cfg->args[j].size;
    if (KC__UNLIKELY(want > x->local_room)) return ocl_local_refused(l, cfg->args, want);
  }
  cl_int e = CL_SUCCESS;
  uint32_t i = 0;
  bool svm = false;
  ocl_lock(&x->busy);
  for (; i < x->nargs; i++) {
    uint32_t kind = cfg->args ? cfg->args[i].kind : KC_ARG_BUFFER;
    if (kind == KC_ARG_PTR) {
      if (KC__UNLIKELY(!c->svm)) {
        svm = true;
        break;
      }
      e = ocl_set_arg_svm(k, i, cfg->args[i].ptr);
    } else if (kind == KC_ARG_LOCAL) {
      e = ocl.clSetKernelArg(k, i, cfg->args[i].size, NULL);
    } else {
      if (KC__UNLIKELY(!x->argsize[i])) break;
      e = ocl.clSetKernelArg(k, i, x->argsize[i], argv[i]);
    }
    if (KC__UNLIKELY(e != CL_SUCCESS)) break;
  }
  if (KC__LIKELY(i == x->nargs)) {
    if (KC__LIKELY(!x->late)) e = ocl.clEnqueueNDRangeKernel(q, k, dims, NULL, global, local, 0, NULL, NULL);
    else e = ocl_launch_first(l, q, dims, NULL, global, local);
    i = UINT32_MAX;
  }
  kc__store_release(&x->busy, 0);
  return KC__LIKELY(e == CL_SUCCESS && i == UINT32_MAX) ? KC_OK : ocl_ex_fail(l, x, e, i, svm);
}
