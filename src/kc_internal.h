/* SPDX-License-Identifier: MIT */
/*
 * kc_internal.h -- one include for the tests, fuzzers and benchmarks that
 * reach into the library (and for the glue and the fault proxy, which see
 * every side): the public API, base/, backend.h, core/core.h and the
 * test-only hooks of testing/fault.h. Library code includes what it needs
 * instead; src/cache/ and src/remote/ never include it
 * (scripts/check-layout.py).
 */
#ifndef KC_INTERNAL_H
#define KC_INTERNAL_H

#include "kcache.h"
#include "base/base.h"
#include "backend.h"
#include "core/core.h"
#include "testing/fault.h" /* its hooks exist only with -DKC_FAULT_INJECTION=ON */

#endif /* KC_INTERNAL_H */
