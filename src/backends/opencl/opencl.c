/* SPDX-License-Identifier: MIT */
/*
 * opencl.c -- the OpenCL backend's face: its table (kc__backend_opencl)
 * for any platform behind the ICD loader (PoCL on the CPU is what CI
 * runs). The rest of this folder, bottom up (a file uses only files
 * before it): platform.c loads libOpenCL, picks the platform and devices
 * and makes the state; programs.c keeps the programs built and the shared
 * contexts; probe.c the parameter probe; compile.c builds a translation
 * unit, the same here and in a compile helper; wire.c the helpers' socket
 * protocol; helpers.c runs each build in a compile helper or here;
 * checked.c and interop.c checked mode and interop. This file is on top,
 * and so is serve.c, the helper's side (clc/ runs it).
 *
 * Owns: the OpenCL C prelude of the kernel dialect, opening the backend
 * (platform.c's state, then the helpers' mode) and closing it, the
 * backend's compile (the unit built where helpers.c routes it, then its
 * signature and the program kept), kcache's contexts (a queue in the
 * device's shared context), linking a binary into a context (a kept
 * program, else built from the binary, rebuilt from source when the
 * platform rejects its own binary) and unlinking, launching, and buffers.
 *
 * Threads: every OpenCL call is thread-safe except that a cl_kernel holds its
 * arguments between clSetKernelArg and the enqueue; each linked object has a
 * tiny lock around that window (see ocl_launch; ocl_lock in interop.c).
 */
#include "backends/opencl/opencl.h"

#include <stdio.h>
#include <string.h>

/* --------------------------------------------------------------- dialect */

/* The kernel dialect in OpenCL C 1.2. The macro set is the same on every
 * backend; OpenCL has uint/uchar/ushort/ulong natively, and gets the
 * <stdint.h> names so that sources written for the host compile here too. */
static const char ocl_prelude[] = "#define KC_BACKEND_OPENCL 1\n"
                                  "#ifdef cl_khr_fp64\n"
                                  "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n"
                                  "#endif\n"
                                  "#ifdef cl_khr_fp16\n"
                                  "#pragma OPENCL EXTENSION cl_khr_fp16 : enable\n"
                                  "#endif\n"
                                  "#define KC_KERNEL __kernel\n"
                                  "#define KC_DEVICE\n"
                                  "#define KC_GLOBAL __global\n"
                                  "#define KC_LOCAL __local\n"
                                  "#define kc_global_id(d) get_global_id(d)\n"
                                  "#define kc_local_id(d) get_local_id(d)\n"
                                  "#define kc_group_id(d) get_group_id(d)\n"
                                  "#define kc_global_size(d) get_global_size(d)\n"
                                  "#define kc_local_size(d) get_local_size(d)\n"
                                  "#define kc_num_groups(d) get_num_groups(d)\n"
                                  "#define kc_barrier() barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE)\n"
                                  "typedef char int8_t;\n"
                                  "typedef uchar uint8_t;\n"
                                  "typedef short int16_t;\n"
                                  "typedef ushort uint16_t;\n"
                                  "typedef int int32_t;\n"
                                  "typedef uint uint32_t;\n"
                                  "typedef long int64_t;\n"
                                  "typedef ulong uint64_t;\n";

/* ------------------------------------------------------------- the state */

/* platform.c's state for the device the options ask for, then the compile
 * helpers' mode (helpers.c). */
static kc_status ocl_open(const kc__bsvc *sv, const kc__bconfig *opt, void **state) {
  *state = NULL;
  if (opt && ocl_lone_flag_at_end(opt->compile_options))
    return kc__bs_err(sv, KC_EINVAL,
                      "OpenCL: the compile options \"%s\" end with -D or -I and no argument after it (PoCL "
                      "crashes the process on that)",
                      opt->compile_options);
  ocl_state *st;
  kc_status s = ocl_state_open(sv, opt, &st);
  if (s) return s;
  ocl_helpers_open(st, opt);
  /* this process's builds (unless $KC_OPENCL_LATE_BINARIES=0; only where
   * ocl_links), with the late worker's condition */
  st->late_cond_ok = pthread_cond_init(&st->late_cond, NULL) == 0;
  st->late_binaries = st->late_cond_ok && opt &&
                      (opt->opencl_late_binaries == KC__MODE_ALWAYS ||
                       (opt->opencl_late_binaries == KC__MODE_AUTO && st->pocl_cache_off));
  const char *why;
  st->relink_refused = ocl_relink_refused(st->build_options, &why); /* (why said by ocl_links) */
  st->relink_asked = opt && opt->opencl_late_binaries == KC__MODE_ALWAYS;
  *state = st;
  return KC_OK;
}

void ocl_close(void *state) {
  ocl_state *st = state;
  if (!st) return;
  ocl_late_stop(st); /* (the core's quiesce did, before its store closed) */
  if (st->late_cond_ok) pthread_cond_destroy(&st->late_cond);
  ocl_helpers_close(st);
  ocl_programs_free(st);
  ocl_state_free(st);
}

/* -------------------------------------------------------------- contexts */

static kc_status ocl_ctx_create(void *state, int device, void **bctx) {
  ocl_state *st = state;
  const kc__bsvc *sv = st->sv;
  *bctx = NULL;
  if (device < 0 || device >= st->ndevices)
    return kc__bs_err(sv, KC_EINVAL, "OpenCL device %d is out of range (%d device%s)", device, st->ndevices,
                      st->ndevices == 1 ? "" : "s");
  ocl_ctx *c = kc__bs_calloc(sv, sizeof *c);
  if (!c) return kc__bs_err(sv, KC_ENOMEM, "out of memory");
  c->sv = sv;
  c->st = st;
  c->device = st->devices[device];
  /* one cl_context per device, shared by kcache's contexts (device 0's is
   * the compile's): a link reuses the compile's program (programs.c) */
  kc_status s = ocl_shared_ctx(st, device, &c->ctx);
  if (s) {
    ocl_ctx_destroy(c);
    return s;
  }
  s = ocl_ctx_finish_setup(c);
  if (s) {
    ocl_ctx_destroy(c);
    return s;
  }
  *bctx = c;
  return KC_OK;
}

/* The engine unlinks every linked object before it resets; the context and
 * its queue carry nothing else that a reset should drop. */
static kc_status ocl_ctx_reset(void *bctx) {
  (void)bctx;
  return KC_OK;
}

static kc_status ocl_ctx_finish(void *bctx) {
  ocl_ctx *c = bctx;
  cl_int e = ocl.clFinish(c->queue);
  return e == CL_SUCCESS ? KC_OK : ocl_fail(c->sv, KC_EBACKEND, "clFinish", e);
}

/* ------------------------------------------------------------- compiling */

/* The unit built where helpers.c routes it (here or in a compile helper),
 * then its signature from the probe's values and the program kept. */
static kc_status ocl_compile(void *state, const kc__tu *tu, void **artifact, size_t *size, uint64_t *sig,
                             kc__sb *log) {
  ocl_state *st = state;
  const kc__bsvc *sv = st->sv;
  *artifact = NULL;
  *size = 0;
  if (tu->nparams > KC_MAX_ARGS)
    return kc__bs_err(sv, KC_ECOMPILE, "kernel '%s' has %u parameters (at most %d)", tu->entry,
                      (unsigned)tu->nparams, KC_MAX_ARGS);
  ocl_unit u = {.text = tu->text, .len = tu->len, .entry = tu->entry, .nparams = tu->nparams};
  for (uint32_t i = 0; i < tu->nparams; i++) u.is_buffer[i] = tu->params[i].is_buffer;

  ocl_result r;
  kc_status s = ocl_build_routed(st, &u, &r, log);
  if (s) return s;
  if (r.nvals == 0 && kc__probe_count(tu) && !ocl_probe_in_program(tu)) {
    /* every by-value parameter is written as a built-in type, but the
     * compiler named one otherwise (or nothing): build again with the probe */
    kc__bs_free(sv, r.bin);
    if (r.prog) ocl.clReleaseProgram(r.prog);
    if (r.late) ocl.clReleaseProgram(r.late);
    char *text = NULL;
    if ((s = ocl_probe_append(sv, tu, &text, &u.len)) != KC_OK) return s;
    u.text = text;
    s = ocl_build_routed(st, &u, &r, log);
    kc__bs_free(sv, text);
    if (s) return s;
  }
  s = kc__probe_apply(sv, tu, r.vals, r.nvals, sig);
  for (uint32_t i = 0; i < tu->nparams; i++)
    if (r.local[i] && sig[i] == KC__SIG(KC_ARG_BUFFER, 0)) sig[i] = KC__SIG(KC_ARG_LOCAL, 0);
  if (s) {
    kc__bs_free(sv, r.bin);
    if (r.prog) ocl.clReleaseProgram(r.prog);
    if (r.late) ocl.clReleaseProgram(r.late);
    return s;
  }
  *artifact = r.bin;
  *size = r.size;
  /* a link into one of kcache's contexts on device 0 takes its kernel from
   * the program built here rather than building the binary again
   * (programs.c); a helper's binary is built at the link. With a second
   * link, that one is kept, and its binary is fetched after its first
   * launch (programs.c, "late binaries") */
  if (r.late) {
    ocl.clReleaseProgram(r.prog);
    ocl_keep_late(st, r.late, r.bin, r.size);
  } else if (r.prog) {
    ocl_keep(st, r.prog, r.bin, r.size);
  }
  return KC_OK;
}

/* -------------------------------------------------------------- linking */

/* Builds a program for c's device from a binary; NULL if the platform
 * rejects it (not an error: the caller rebuilds from source). */
static cl_program ocl_from_binary(ocl_ctx *c, const kc__artifact *a) {
  const unsigned char *bin = a->bytes;
  size_t size = a->size;
  cl_int binst = CL_SUCCESS, e;
  if (!bin || !size) return NULL;
  cl_program p = ocl.clCreateProgramWithBinary(c->ctx, 1, &c->device, &size, &bin, &binst, &e);
  if (!p) return NULL;
  if (binst != CL_SUCCESS || ocl_build(c->st, p, c->device) != CL_SUCCESS) {
    ocl.clReleaseProgram(p);
    return NULL;
  }
  return p;
}

static kc_status ocl_launch(kc__blinked *l, void **argv, const kc_dim3 *grid, const kc_dim3 *block);

static kc_status ocl_link(void *bctx, const kc__artifact *art, kc__blinked *l) {
  ocl_ctx *c = bctx;
  const kc__bsvc *sv = c->sv;
  const kc__artifact a = *art;
  const char *entry = a.entry;
  cl_int e;
  kc_status named = ocl_name_check(c->st, sv, entry);
  if (named) return named;

  cl_kernel k = NULL;
  /* the compile's own program where it is in c's cl_context, else a build */
  bool late = false;
  cl_program p = ocl_kept_find(c->st, c->ctx, a.bytes, a.size, &late);
  bool built = !p && (p = ocl_from_binary(c, &a)) != NULL;
  if (p && !(k = ocl.clCreateKernel(p, entry, &e))) {
    ocl.clReleaseProgram(p);
    p = NULL;
  }
  /* a program built here from a binary is kept too: a disk hit's trial
   * load (core/cache_glue.c, a context on device 0) and the link into the
   * caller's context that follows it build the binary once */
  if (p && built && c->ctx == c->st->compile_ctx && ocl.clRetainProgram(p) == CL_SUCCESS)
    ocl_keep(c->st, p, a.bytes, a.size);
  if (!p) {
    /* The platform refused the binary it produced (PoCL does when the CPU
     * it sees differs, e.g. under valgrind, or for another device of the
     * platform): the source gives the same kernel, only slower to get. */
    const char *text = a.source;
    size_t len = text ? strlen(text) : 0;
    if (!len)
      return kc__bs_err(sv, KC_ELINK, "OpenCL rejected the binary of kernel '%s' and no source is kept",
                        entry);
    p = ocl.clCreateProgramWithSource(c->ctx, 1, &text, &len, &e);
    if (!p) return ocl_fail(sv, KC_ELINK, "clCreateProgramWithSource", e);
    e = ocl_build(c->st, p, c->device);
    if (e != CL_SUCCESS) {
      char *blog = ocl_build_log(sv, p, c->device, NULL);
      kc_status s = kc__bs_err(sv, KC_ELINK,
                               "OpenCL rejected the binary of kernel '%s', and rebuilding it from "
                               "source failed: %s (%d)%s%s",
                               entry, ocl_errname(e), (int)e, blog ? "\n" : "", blog ? blog : "");
      kc__bs_free(sv, blog);
      ocl.clReleaseProgram(p);
      return s;
    }
    k = ocl.clCreateKernel(p, entry, &e);
    if (!k) {
      ocl.clReleaseProgram(p);
      return ocl_fail(sv, KC_ELINK, "clCreateKernel", e);
    }
  }

  ocl_linked *x = kc__bs_calloc(sv, sizeof *x + a.nparams * sizeof x->argsize[0]);
  if (!x) {
    ocl.clReleaseKernel(k);
    ocl.clReleaseProgram(p);
    return kc__bs_err(sv, KC_ENOMEM, "out of memory");
  }
  kc__store_relaxed(&x->busy, 0);
  x->late = late;
  x->queue = c->queue;
  x->sv = sv;
  x->entry = entry;
  x->nargs = a.nparams;
  /* the kernel's limits on this device (unknown: OpenCL's minimums) */
  if (ocl.clGetKernelWorkGroupInfo(k, c->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof x->group_max,
                                   &x->group_max, NULL) != CL_SUCCESS ||
      !x->group_max)
    x->group_max = 1;
  cl_ulong own = 0;
  if (ocl.clGetKernelWorkGroupInfo(k, c->device, CL_KERNEL_LOCAL_MEM_SIZE, sizeof own, &own, NULL) !=
      CL_SUCCESS)
    own = 0;
  x->local_room = own < c->local_mem ? c->local_mem - own : 0;
  for (uint32_t i = 0; i < a.nparams; i++) {
    uint64_t s = a.sig ? a.sig[i] : 0;
    uint32_t kind = KC__SIG_KIND(s), bytes = (uint32_t)s;
    x->argsize[i] = kind == KC_ARG_BUFFER                          ? sizeof(cl_mem)
                    : kind == KC_ARG_SCALAR && bytes != UINT32_MAX ? bytes
                                                                   : 0;
  }
  l->launch = ocl_launch;
  l->bctx = c;
  l->fn = k;
  l->module = p;
  l->extra = x;
  return KC_OK;
}

static void ocl_unlink(kc__blinked *l) {
  ocl_linked *x = l->extra;
  if (l->fn) ocl.clReleaseKernel((cl_kernel)l->fn);
  if (l->module) ocl.clReleaseProgram((cl_program)l->module);
  if (x) kc__bs_free(x->sv, x);
  l->fn = l->module = l->extra = NULL;
}

/* ------------------------------------------------------------- launching */

static KC__COLD kc_status ocl_launch_fail(ocl_linked *x, cl_int e, uint32_t arg) {
  if (arg != UINT32_MAX) {
    if (x->argsize[arg] == 0)
      return kc__bs_err(x->sv, KC_EARGS,
                        "kernel '%s': the size of scalar argument %u is unknown to the OpenCL "
                        "backend (engine signature)",
                        x->entry, (unsigned)arg);
    return kc__bs_err(x->sv, KC_EARGS, "kernel '%s': clSetKernelArg(%u): %s (%d)", x->entry, (unsigned)arg,
                      ocl_errname(e), (int)e);
  }
  kc_status st = e == CL_OUT_OF_RESOURCES || e == CL_MEM_OBJECT_ALLOCATION_FAILURE ? KC_ENOMEM
                 : e == CL_INVALID_KERNEL_ARGS || e == CL_INVALID_MEM_OBJECT       ? KC_EARGS
                                                                                   : KC_ELAUNCH;
  if (e == CL_OUT_OF_HOST_MEMORY) st = KC_ENOMEM;
  return kc__bs_err(x->sv, st, "kernel '%s': clEnqueueNDRangeKernel: %s (%d)", x->entry, ocl_errname(e),
                    (int)e);
}

/* The backend half of the launch fast path: never allocates, formats or
 * blocks, except that it waits for another thread launching the same linked
 * object to finish its set-args..enqueue window. */
static kc_status ocl_launch(kc__blinked *l, void **argv, const kc_dim3 *grid, const kc_dim3 *block) {
  ocl_linked *x = l->extra;
  cl_kernel k = l->fn;
  if (KC__UNLIKELY(!grid || !block)) return ocl_sv(l)->bad_dims(l, grid, block);
  size_t local[3] = {block->x, block->y, block->z};
  size_t global[3] = {(size_t)grid->x * block->x, (size_t)grid->y * block->y, (size_t)grid->z * block->z};
  if (KC__UNLIKELY(!global[0] || !global[1] || !global[2])) return ocl_sv(l)->bad_dims(l, grid, block);
  if (KC__UNLIKELY(!ocl_group_fits(l->bctx, x, block))) return ocl_group_refused(l, block);
  cl_uint dims = global[2] > 1 ? 3 : global[1] > 1 ? 2 : 1; /* size_t: no wrap-around */
  cl_int e = CL_SUCCESS;
  uint32_t i = 0;

  if (KC__UNLIKELY(atomic_exchange_explicit(&x->busy, 1, memory_order_acquire))) ocl_lock_wait(&x->busy);
  for (; i < x->nargs; i++) {
    /* A buffer's argv entry points at its kc__bufh, whose first member is
     * the cl_mem: exactly what clSetKernelArg wants for a cl_mem. */
    if (KC__UNLIKELY(!x->argsize[i])) break;
    e = ocl.clSetKernelArg(k, i, x->argsize[i], argv[i]);
    if (KC__UNLIKELY(e != CL_SUCCESS)) break;
  }
  if (KC__LIKELY(i == x->nargs)) {
    if (KC__LIKELY(!x->late))
      e = ocl.clEnqueueNDRangeKernel(x->queue, k, dims, NULL, global, local, 0, NULL, NULL);
    else e = ocl_launch_first(l, x->queue, dims, NULL, global, local);
    i = UINT32_MAX;
  }
  kc__store_release(&x->busy, 0);
  return KC__LIKELY(e == CL_SUCCESS && i == UINT32_MAX) ? KC_OK : ocl_launch_fail(x, e, i);
}

/* --------------------------------------------------------------- buffers */

static kc_status ocl_buf_create(void *bctx, size_t size, kc__bufh *h) {
  ocl_ctx *c = bctx;
  cl_int e;
  /* OpenCL refuses empty buffers; kcache allows them. */
  cl_mem m = ocl.clCreateBuffer(c->ctx, CL_MEM_READ_WRITE, size ? size : 1, NULL, &e);
  if (!m) {
    kc_status st =
        e == CL_MEM_OBJECT_ALLOCATION_FAILURE || e == CL_OUT_OF_RESOURCES || e == CL_INVALID_BUFFER_SIZE
            ? KC_ENOMEM
            : KC_EBACKEND;
    return ocl_fail(c->sv, st, "clCreateBuffer", e);
  }
  h->ptr = m;
  return KC_OK;
}

static void ocl_buf_destroy(void *bctx, kc__bufh *h) {
  (void)bctx;
  if (h->ptr) ocl.clReleaseMemObject((cl_mem)h->ptr);
  h->ptr = NULL;
}

static kc_status ocl_buf_write(void *bctx, kc__bufh *h, size_t off, const void *src, size_t n) {
  ocl_ctx *c = bctx;
  if (!n) return KC_OK; /* OpenCL rejects empty copies */
  cl_int e = ocl.clEnqueueWriteBuffer(c->queue, (cl_mem)h->ptr, CL_TRUE, off, n, src, 0, NULL, NULL);
  return e == CL_SUCCESS ? KC_OK : ocl_fail(c->sv, KC_EBACKEND, "clEnqueueWriteBuffer", e);
}

static kc_status ocl_buf_read(void *bctx, kc__bufh *h, size_t off, void *dst, size_t n) {
  ocl_ctx *c = bctx;
  if (!n) return KC_OK;
  cl_int e = ocl.clEnqueueReadBuffer(c->queue, (cl_mem)h->ptr, CL_TRUE, off, n, dst, 0, NULL, NULL);
  return e == CL_SUCCESS ? KC_OK : ocl_fail(c->sv, KC_EBACKEND, "clEnqueueReadBuffer", e);
}

/* ----------------------------------------------------------------- table */

const kc__backend kc__backend_opencl = {
    .list = ocl_list,
    .name = "opencl",
    .unavailable = ocl_unavailable,
    .open = ocl_open,
    .close = ocl_close,
    .device_count = ocl_device_count,
    .device_name = ocl_device_name,
    .identity = ocl_identity,
    .prelude = ocl_prelude,
    .language = KC_LANG_OPENCL,
    .epilogue = ocl_epilogue,
    .compile = ocl_compile,
    .ctx_create = ocl_ctx_create,
    .ctx_destroy = ocl_ctx_destroy,
    .ctx_reset = ocl_ctx_reset,
    .ctx_finish = ocl_ctx_finish,
    .link = ocl_link,
    .unlink = ocl_unlink,
    .buf_create = ocl_buf_create,
    .buf_destroy = ocl_buf_destroy,
    .buf_write = ocl_buf_write,
    .buf_read = ocl_buf_read,
    .buf_view = ocl_buf_view_aligned,
    .buf_view_destroy = ocl_buf_view_destroy,
    .launch_ex = ocl_launch_ex,
    .ctx_wrap = ocl_ctx_wrap,
    .ctx_native = ocl_ctx_native,
    .stream_create = ocl_stream_create,
    .stream_wrap = ocl_stream_wrap,
    .stream_release = ocl_stream_release,
    .stream_sync = ocl_stream_sync,
    .stream_wait = ocl_stream_wait,
    .buf_wrap = ocl_buf_wrap,
    .buf_unwrap = ocl_buf_unwrap,
    .buf_host = ocl_buf_host,
    .link_uses_source = true,
    .late_artifacts = true,
    .quiesce = ocl_late_stop,
    .builds = ocl_builds,
};
