/* SPDX-License-Identifier: MIT */
/*
 * checked.c -- the OpenCL backend's part in checked mode (src/core/checked.c):
 * a buffer's guard zones are the ends of one cl_mem, and kernels and copies
 * get a sub-buffer of its middle (backend.h, buf_view).
 */
#include "backends/opencl/opencl.h"

/* A sub-buffer: the view checked mode gives kernels of a buffer with guard
 * zones (its offset, KC_CHECKED_GUARD, is a multiple of every device's base
 * address alignment). Released like any cl_mem. */
kc_status ocl_buf_view(void *bctx, const kc__bufh *whole, size_t off, size_t size, kc__bufh *view) {
  ocl_ctx *c = bctx;
  cl_buffer_region r = {off, size};
  cl_int e;
  cl_mem m =
      ocl.clCreateSubBuffer((cl_mem)whole->ptr, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &r, &e);
  if (!m) return ocl_fail(c->sv, KC_EBACKEND, "clCreateSubBuffer (checked mode)", e);
  view->ptr = m;
  return KC_OK;
}

void ocl_buf_view_destroy(void *bctx, kc__bufh *view) {
  (void)bctx;
  if (view->ptr) ocl.clReleaseMemObject((cl_mem)view->ptr);
  view->ptr = NULL;
}
