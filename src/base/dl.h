/* SPDX-License-Identifier: MIT */
/* dl.h -- owns the rule for the libraries kcache opens with dlopen in a
 * statically linked program: the drivers (the OpenCL ICD loader, the CUDA
 * driver, NVRTC) and libcrypto are refused there with a reason instead of
 * opened. glibc's dlopen from a static program loads a second C library
 * beside the one linked in; the OpenCL ICD loader (PoCL) and libcrypto
 * (KC_CACHE_KEY's MACs) segfaulted in it (tests/install/test_install.sh
 * static). The host backend works there: the libm its loader opens for
 * kernels was seen to work, and so did hiredis (src/remote). */
#ifndef KC_BASE_DL_H
#define KC_BASE_DL_H

#include <stdbool.h>

/* Whether the running program is statically linked (its executable has
 * no PT_INTERP: static and static-pie alike). Thread-safe; computed once. */
bool kc__static_program(void);

/* dlopen(name, flags), unless the program is statically linked: then NULL
 * and *why (if why is not NULL) says so, naming the library. When dlopen
 * itself fails, *why is NULL: the caller says what is missing. */
void *kc__dlopen_foreign(const char *name, int flags, const char **why);

/* The reason kc__dlopen_foreign gives in a static program (static text). */
const char *kc__static_refusal(void);

#endif /* KC_BASE_DL_H */
