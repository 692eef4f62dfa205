/* SPDX-License-Identifier: MIT */
/* err.h -- per-thread error messages keyed by an owner id (a runtime's id;
 * 0: none). One message per thread: concurrent failures never clobber each
 * other, and a message about another owner is not this owner's error. */
#ifndef KC_BASE_ERR_H
#define KC_BASE_ERR_H

#include <stdarg.h>
#include <stdint.h>

#include "base/compiler.h"
#include "kcache.h"

/* Sets the calling thread's message for owner and returns st. */
kc_status kc__err_owner(uint64_t owner, kc_status st, const char *fmt, ...) KC__PRINTF(3, 4);
kc_status kc__verr_owner(uint64_t owner, kc_status st, const char *fmt, va_list ap);
/* The calling thread's message if it is owner's, else "". */
const char *kc__errmsg_owner(uint64_t owner);

#endif /* KC_BASE_ERR_H */
