/* SPDX-License-Identifier: MIT */
/* err.h -- per-thread error messages keyed by an owner id (a runtime's id;
 * 0: none). One message per thread: concurrent failures never clobber each
 * other, and a message about another owner is not this owner's error.
 * And the log sinks that warnings and the debug trace go to (kcache.h,
 * "log"): a runtime's sink lives in the runtime (core: kc__log). */
#ifndef KC_BASE_ERR_H
#define KC_BASE_ERR_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/compiler.h"
#include "kcache.h"

/* Sets the calling thread's message for owner and returns st. */
kc_status kc__err_owner(uint64_t owner, kc_status st, const char *fmt, ...) KC__PRINTF(3, 4);
kc_status kc__verr_owner(uint64_t owner, kc_status st, const char *fmt, va_list ap);
/* The calling thread's message if it is owner's, else "". */
const char *kc__errmsg_owner(uint64_t owner);

/* A log sink: kc_options.log and log_ud (fn NULL: stderr), and the level
 * resolved from kc_options.log_level and $KC_LOG (never KC_LOG_DEFAULT). */
typedef struct kc__log_sink {
  kc_log_fn fn;
  void *ud;
  kc_log_level level;
} kc__log_sink;

/* The level named v (error, warn, warning, info, debug); KC_LOG_WARN when
 * v is NULL. *bad (may be NULL) is set when v is another word (then:
 * warn). kc__log_env_level: the level of $KC_LOG now, for the log of no
 * runtime (a runtime's level is resolved once, from its configuration). */
kc_log_level kc__log_level_named(const char *v, bool *bad);
kc_log_level kc__log_env_level(bool *bad);
/* Whether a message of level lvl reaches sink (NULL: stderr at $KC_LOG). */
bool kc__log_wants(const kc__log_sink *sink, kc_log_level lvl);
/* Formats one message and hands it to sink if its level is wanted (NULL:
 * stderr at $KC_LOG's level). Never fails: a long message is cut. */
void kc__log_to(const kc__log_sink *sink, kc_log_level lvl, const char *fmt, ...) KC__PRINTF(3, 4);
void kc__vlog_to(const kc__log_sink *sink, kc_log_level lvl, const char *fmt, va_list ap);
/* "warning", "debug", ... */
const char *kc__log_level_name(kc_log_level lvl);

#endif /* KC_BASE_ERR_H */
