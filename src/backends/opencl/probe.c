/* SPDX-License-Identifier: MIT */
/*
 * probe.c -- the OpenCL backend's half of the parameter probe (backend.h):
 * its epilogue appends the probe kernel (src/backends/probe.c writes it), and
 * after a build ocl_run_probe runs that kernel once, on one work item of
 * the compile context's device, and reads back the size and alignment of
 * every by-value parameter type as the OpenCL compiler laid them out. OpenCL
 * reports a parameter's type only by name (clGetKernelArgInfo), so a struct,
 * a union or a typedef is known this way or not at all. When the compiler
 * names every by-value parameter's type as one of OpenCL C's built-in
 * scalar or vector types, whose sizes and alignments the OpenCL C
 * specification fixes (6.1.1, 6.1.2, 6.1.5), the kernel is not run: on
 * PoCL a run costs the probe kernel's code generation.
 *
 * Nor is the probe kernel in the program at all when every by-value
 * parameter is written as such a type: a second kernel in the program
 * costs every load of its binary (PoCL writes each kernel's files on
 * clBuildProgram of a binary), and a disk hit builds one (doc/benchmarks.md,
 * "OpenCL warm start", measures it).
 * What the compiler says still decides: if it then names a type that is not
 * built in (a macro, a platform without argument info), the program has no
 * probe to run and ocl_compile builds the unit again with it.
 */
#include "backends/opencl/opencl.h"

#include <string.h>

/* The size of the built-in type that clGetKernelArgInfo names t ("int",
 * "uint4", "half"), which is also its alignment (a 3-vector is a 4-vector's
 * size), or 0 for any other type. */
static uint32_t ocl_builtin_size(const char *t) {
  static const struct {
    const char *name;
    uint32_t size;
  } base[] = {
      {"char", 1}, {"uchar", 1},         {"short", 2},          {"ushort", 2},       {"int", 4},
      {"uint", 4}, {"long", 8},          {"ulong", 8},          {"float", 4},        {"double", 8},
      {"half", 2}, {"unsigned char", 1}, {"unsigned short", 2}, {"unsigned int", 4}, {"unsigned long", 8}};
  for (size_t i = 0; i < sizeof base / sizeof *base; i++) {
    size_t n = strlen(base[i].name);
    if (strncmp(t, base[i].name, n) != 0) continue;
    const char *v = t + n;
    if (!*v) return base[i].size;
    if (!strcmp(v, "2")) return 2 * base[i].size;
    if (!strcmp(v, "3") || !strcmp(v, "4")) return 4 * base[i].size;
    if (!strcmp(v, "8")) return 8 * base[i].size;
    if (!strcmp(v, "16")) return 16 * base[i].size;
  }
  return 0;
}

bool ocl_probe_in_program(const kc__tu *tu) {
  for (uint32_t i = 0; i < tu->nparams; i++) {
    if (tu->params[i].is_buffer) continue;
    const char *t = tu->params[i].type;
    while (*t == ' ' || *t == '\t') t++;
    size_t n = strlen(t);
    while (n && (t[n - 1] == ' ' || t[n - 1] == '\t')) n--;
    char name[64];
    if (n >= sizeof name) return true;
    memcpy(name, t, n);
    name[n] = '\0';
    if (!ocl_builtin_size(name)) return true;
  }
  return false;
}

kc_status ocl_epilogue(void *state, const kc__tu *tu, kc__sb *out) {
  (void)state;
  if (ocl_probe_in_program(tu)) kc__probe_emit(out, tu, KC__PROBE_OPENCL);
  return KC_OK;
}

kc_status ocl_probe_append(const kc__bsvc *sv, const kc__tu *tu, char **text, size_t *len) {
  kc__sb sb;
  kc__sb_init(&sb, &sv->heap);
  kc__sb_append(&sb, tu->text, tu->len);
  kc__sb_puts(&sb, "\n");
  kc__probe_emit(&sb, tu, KC__PROBE_OPENCL);
  *len = sb.len;
  *text = kc__sb_take(&sb);
  return *text ? KC_OK : kc__bs_err(sv, KC_ENOMEM, "out of memory building the source of '%s'", tu->entry);
}

/* The probe's values from the compiler's names of the parameter types, if
 * every by-value one is built in (see the top); false if one is not, or the
 * platform does not say. */
static bool ocl_probe_builtin(cl_kernel k, const ocl_unit *u, uint32_t m, uint64_t *v) {
  size_t j = 1;
  v[0] = m;
  for (uint32_t i = 0; i < u->nparams; i++) {
    if (u->is_buffer[i]) continue;
    char type[64];
    if (ocl.clGetKernelArgInfo(k, i, CL_KERNEL_ARG_TYPE_NAME, sizeof type, type, NULL) != CL_SUCCESS)
      return false;
    type[sizeof type - 1] = '\0';
    uint32_t size = ocl_builtin_size(type);
    if (!size) return false;
    v[j++] = size;
    v[j++] = size;
  }
  return true;
}

/* Runs kc__probe of prog into vals (n values). A queue and a buffer of its
 * own: compiles run on any thread, and this is once per compile. */
static cl_int ocl_probe_values(ocl_state *st, cl_program prog, cl_ulong *vals, size_t n, const char **what) {
  cl_int e;
  *what = "clCreateKernel(kc__probe)";
  cl_kernel k = ocl.clCreateKernel(prog, "kc__probe", &e);
  if (!k) return e; /* CL_INVALID_KERNEL_NAME: the epilogue left it out */
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

kc_status ocl_probe_read(ocl_state *st, cl_program prog, cl_kernel entry, const ocl_unit *u, ocl_result *r) {
  uint32_t m = 0;
  for (uint32_t i = 0; i < u->nparams; i++) m += !u->is_buffer[i];
  r->nvals = 0;
  if (!m) return KC_OK;
  size_t n = 1 + 2 * (size_t)m;
  if (ocl_probe_builtin(entry, u, m, r->vals)) {
    r->nvals = (uint32_t)n;
    return KC_OK;
  }
  cl_ulong vals[1 + 2 * KC_MAX_ARGS];
  const char *what = "";
  memset(vals, 0, sizeof vals);
  cl_int e = ocl_probe_values(st, prog, vals, n, &what);
  if (e == CL_INVALID_KERNEL_NAME) return KC_OK; /* no probe in prog: nvals 0, ocl_compile adds it */
  if (e != CL_SUCCESS)
    return kc__bs_err(st->sv, KC_ECOMPILE, "kernel '%s': running the parameter probe failed: %s: %s (%d)",
                      u->entry, what, ocl_errname(e), (int)e);
  for (size_t i = 0; i < n; i++) r->vals[i] = vals[i];
  r->nvals = (uint32_t)n;
  return KC_OK;
}
