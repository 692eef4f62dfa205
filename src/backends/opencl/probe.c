/* SPDX-License-Identifier: MIT */
/*
 * probe.c -- the OpenCL backend's half of the parameter probe (backend.h):
 * its epilogue appends the probe kernel (src/core/probe.c writes it), and
 * after a build ocl_run_probe runs that kernel once, on one work item of
 * the compile context's device, and reads back the size and alignment of
 * every by-value parameter type as the OpenCL compiler laid them out. OpenCL
 * reports a parameter's type only by name (clGetKernelArgInfo), so a struct,
 * a union or a typedef is known this way or not at all.
 */
#include "backends/opencl/opencl.h"

#include <string.h>

kc_status ocl_epilogue(void *state, const kc__tu *tu, kc__sb *out) {
  (void)state;
  kc__probe_emit(out, tu, KC__PROBE_OPENCL);
  return KC_OK;
}

/* Runs kc__probe of prog into vals (n values). A queue and a buffer of its
 * own: compiles run on any thread, and this is once per compile. */
static cl_int ocl_probe_values(ocl_state *st, cl_program prog, cl_ulong *vals, size_t n, const char **what) {
  cl_int e;
  *what = "clCreateKernel(kc__probe)";
  cl_kernel k = ocl.clCreateKernel(prog, "kc__probe", &e);
  if (!k) return e;
  *what = "clCreateCommandQueue";
  cl_command_queue q = ocl.clCreateCommandQueue(st->compile_ctx, st->devices[0], 0, &e);
  cl_mem b = NULL;
  if (q) {
    *what = "clCreateBuffer";
    b = ocl.clCreateBuffer(st->compile_ctx, CL_MEM_READ_WRITE, n * sizeof *vals, NULL, &e);
  }
  if (b) {
    size_t one = 1;
    *what = "clSetKernelArg";
    e = ocl.clSetKernelArg(k, 0, sizeof b, &b);
    if (e == CL_SUCCESS) {
      *what = "clEnqueueNDRangeKernel";
      e = ocl.clEnqueueNDRangeKernel(q, k, 1, NULL, &one, &one, 0, NULL, NULL);
    }
    if (e == CL_SUCCESS) {
      *what = "clEnqueueReadBuffer";
      e = ocl.clEnqueueReadBuffer(q, b, CL_TRUE, 0, n * sizeof *vals, vals, 0, NULL, NULL);
    }
    ocl.clReleaseMemObject(b);
  }
  if (q) ocl.clReleaseCommandQueue(q);
  ocl.clReleaseKernel(k);
  return e;
}

kc_status ocl_run_probe(ocl_state *st, cl_program prog, const kc__tu *tu, uint64_t *sig) {
  uint32_t m = kc__probe_count(tu);
  if (!m) return KC_OK;
  cl_ulong vals[1 + 2 * KC_MAX_ARGS];
  size_t n = 1 + 2 * (size_t)m;
  const char *what = "";
  memset(vals, 0, sizeof vals);
  cl_int e = ocl_probe_values(st, prog, vals, n, &what);
  if (e != CL_SUCCESS)
    return kc__bs_err(st->sv, KC_ECOMPILE, "kernel '%s': running the parameter probe failed: %s: %s (%d)",
                      tu->entry, what, ocl_errname(e), (int)e);
  uint64_t v[1 + 2 * KC_MAX_ARGS];
  for (size_t i = 0; i < n; i++) v[i] = vals[i];
  return kc__probe_apply(st->sv, tu, v, n, sig);
}
