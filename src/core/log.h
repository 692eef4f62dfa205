/* SPDX-License-Identifier: MIT */
/*
 * log.h -- the runtime's log and the KC_LOG trace of the slow paths
 * (log.c). Included by core.h, after the data model.
 */
#ifndef KC_CORE_LOG_H
#define KC_CORE_LOG_H

/* log.c: the runtime's log (kcache.h, "log"). kc__log_setup resolves the
 * level from rt->opt and $KC_LOG at create. kc__log_on is the guard of
 * debug-only work; kc__log formats only if the level is on. */
void kc__log_setup(kc_runtime *rt);
static inline bool kc__log_on(const kc_runtime *rt, kc_log_level lvl) { return lvl <= rt->log.level; }
void kc__log(const kc_runtime *rt, kc_log_level lvl, const char *fmt, ...) KC__PRINTF(3, 4) KC__COLD;
/* A warn callback (kc__cache_config.warn) into the runtime ud's log. */
void kc__log_warn_cb(void *ud, const char *msg) KC__COLD;
/* The debug trace of the slow paths (k: the handle whose slots to look
 * at; NULL for bound arguments, whose last object is `last`). */
void kc__trace_launch_miss(kc_runtime *rt, const char *fn, const kc__spec *spec, const kc_context *ctx,
                           const kc__linked *last, const kc_kernel *k, kc_world w) KC__COLD;
void kc__trace_ci_miss(kc_runtime *rt, const kc__spec *spec, const kc__closure *c, kc_world w) KC__COLD;
/* After the disk cache's lookup (at KC_LOG_INFO and up): what it answered,
 * from the tiers' counters before and after it (kc__store_stats). */
void kc__trace_store_after(kc_runtime *rt, const kc__spec *spec, bool hit, const kc_stats *before,
                           const kc_stats *after) KC__COLD;
void kc__trace_compiled(kc_runtime *rt, const kc__spec *spec, kc_status st, uint64_t ns) KC__COLD;

#endif /* KC_CORE_LOG_H */
