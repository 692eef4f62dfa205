/* SPDX-License-Identifier: MIT */
/*
 * kc_internal.h -- the compatibility header: everything the subsystems of
 * kcache share, for files written before the tree was split (the disk
 * store, the remote tier, tests). New code includes what it needs:
 * base/base.h (utilities), backend.h (a backend's view), core/core.h (the
 * world-age cache's data model), testing/fault.h (test-only hooks).
 */
#ifndef KC_INTERNAL_H
#define KC_INTERNAL_H

#include "kcache.h"
#include "base/base.h"
#include "backend.h"
#include "core/core.h"

#include <pthread.h>
#include <sched.h>

/* Test-only fault injection (src/testing/fault.h; built with
 * -DKC_FAULT_INJECTION=ON). Declared for every build: store.c calls its
 * hooks under #ifdef. */
#include "testing/fault.h"

/* kc_runtime_create on a backend table the caller chose (tests: a backend
 * without a compiler, or one wrapped by kc__fault_wrap_backend): what
 * kc_runtime_create does once it has picked its backend. */
kc_status kc__runtime_open(const kc_options *opt, const kc__backend *be, kc_runtime **out);

/* kcache's allocator when there is a runtime, else malloc's family: the
 * kcache command walks stores without a runtime. */
void *kc__xalloc(kc_runtime *rt, size_t n);
void *kc__xcalloc(kc_runtime *rt, size_t n);
void *kc__xrealloc(kc_runtime *rt, void *p, size_t n);
void kc__xfree(kc_runtime *rt, void *p);

#endif /* KC_INTERNAL_H */
