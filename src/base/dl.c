/* SPDX-License-Identifier: MIT */
/* dl.c -- the libraries kcache opens with dlopen that crash in a
 * statically linked program (dl.h): refused there with a reason. */
#include "base/dl.h"
#include "base/atomics.h"

#include <dlfcn.h>
#include <link.h>
#include <stddef.h>

/* The first object dl_iterate_phdr reports is the program itself. */
static int has_interp(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  for (int i = 0; i < info->dlpi_phnum; i++)
    if (info->dlpi_phdr[i].p_type == PT_INTERP) *(int *)data = 1;
  return 1; /* stop after the program */
}

bool kc__static_program(void) {
  static _Atomic int known; /* 0: not yet; 1: dynamic; 2: static (relaxed: any thread computes the same) */
  int k = kc__load_relaxed(&known);
  if (!k) {
    int interp = 0;
    dl_iterate_phdr(has_interp, &interp);
    k = interp ? 1 : 2;
    kc__store_relaxed(&known, k);
  }
  return k == 2;
}

const char *kc__static_refusal(void) {
  return "this program is statically linked: a shared library opened into it (glibc's dlopen from a static "
         "program) runs beside a second C library, where the OpenCL and CUDA drivers and libcrypto crash, so "
         "kcache opens none of them. Link the program dynamically (libkcache.a is fine in a dynamically "
         "linked program), or use the host backend, which needs none";
}

void *kc__dlopen_foreign(const char *name, int flags, const char **why) {
  if (why) *why = NULL;
  if (kc__static_program()) {
    if (why) *why = kc__static_refusal();
    return NULL;
  }
  return dlopen(name, flags);
}
