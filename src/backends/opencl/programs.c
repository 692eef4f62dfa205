/* SPDX-License-Identifier: MIT */
/*
 * programs.c -- building each kernel once: the contexts kcache makes on a
 * device share one cl_context per device (device 0's is the compile
 * context), and the programs the compile built are kept, so that a link
 * into such a context makes its kernel from the program the compile
 * built instead of building the binary again.
 *
 * A kept program is found by its binary's bytes (a copy is kept with it),
 * so a link uses it only for exactly the artifact it was built from; each
 * link retains it (ocl_unlink releases), and the table keeps the
 * OCL_KEEP most recent ones. A program a link built from a binary in the
 * compile context (a disk or remote hit's trial load) is kept the same way,
 * so the link that follows the hit does not build it again. An adopted
 * context (kc_context_wrap), another device's context, or a program that
 * left the table builds from the binary as before. Each kcache context still has
 * its own queue, buffers and kernel objects; st->lock guards the table and
 * the shared contexts.
 */
#include "backends/opencl/opencl.h"

#include <string.h>

cl_int ocl_build(ocl_state *st, cl_program p, cl_device_id dev) {
  kc__fetch_add_relaxed(&st->builds, 1);
  return ocl.clBuildProgram(p, 1, &dev, st->build_options, NULL, NULL);
}

uint64_t ocl_builds(void *state) { return kc__load_relaxed(&((ocl_state *)state)->builds); }

kc_status ocl_shared_ctx(ocl_state *st, int device, cl_context *out) {
  cl_int e = CL_SUCCESS;
  kc__lock(&st->lock);
  cl_context c = st->shared[device];
  if (!c) c = st->shared[device] = ocl.clCreateContext(NULL, 1, &st->devices[device], NULL, NULL, &e);
  if (c && (e = ocl.clRetainContext(c)) != CL_SUCCESS) c = NULL;
  kc__unlock(&st->lock);
  *out = c;
  return c ? KC_OK : ocl_fail(st->sv, KC_EBACKEND, "clCreateContext", e);
}

void ocl_keep(ocl_state *st, cl_program prog, const void *bin, size_t size) {
  unsigned char *copy = kc__bs_alloc(st->sv, size);
  if (!copy) { /* not kept: links build from the binary */
    ocl.clReleaseProgram(prog);
    return;
  }
  memcpy(copy, bin, size);
  kc__lock(&st->lock);
  ocl_kept *k = &st->kept[st->kept_next];
  st->kept_next = (st->kept_next + 1) % OCL_KEEP;
  ocl_kept old = *k;
  *k = (ocl_kept){prog, copy, size};
  kc__unlock(&st->lock);
  if (old.prog) ocl.clReleaseProgram(old.prog); /* links that use it hold their own reference */
  kc__bs_free(st->sv, old.bin);
}

cl_program ocl_kept_find(ocl_state *st, cl_context ctx, const void *bin, size_t size) {
  if (ctx != st->compile_ctx || !bin || !size) return NULL;
  cl_program p = NULL;
  kc__lock(&st->lock);
  for (int i = 0; i < OCL_KEEP && !p; i++) {
    ocl_kept *k = &st->kept[i];
    if (k->prog && k->size == size && memcmp(k->bin, bin, size) == 0 &&
        ocl.clRetainProgram(k->prog) == CL_SUCCESS)
      p = k->prog;
  }
  kc__unlock(&st->lock);
  return p;
}

void ocl_programs_free(ocl_state *st) {
  for (int i = 0; i < OCL_KEEP; i++) {
    if (st->kept[i].prog) ocl.clReleaseProgram(st->kept[i].prog);
    kc__bs_free(st->sv, st->kept[i].bin);
    st->kept[i] = (ocl_kept){0};
  }
  if (st->shared)
    for (int i = 1; i < st->ndevices; i++) /* shared[0] is compile_ctx: the caller's */
      if (st->shared[i]) ocl.clReleaseContext(st->shared[i]);
  /* the array is platform.c's (ocl_state_free) */
}
