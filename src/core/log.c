/* SPDX-License-Identifier: MIT */
/*
 * log.c -- owns a runtime's log (kcache.h, "log"): the sink and level
 * chosen at create (kc_options.log, log_ud, log_level, else $KC_LOG),
 * kc__log, the warn callback the disk cache is given, and the debug trace
 * of the slow paths: why a launch missed its handle's cache, why no code
 * instance served a world, what the cache tiers answered. Everything here
 * runs on slow paths only, behind a level check: a cached launch never
 * reaches this file.
 */
#include "core/core.h"
#include "core/cache_glue.h"

#include <stdio.h>
#include <string.h>

void kc__log_setup(kc_runtime *rt) {
  bool bad = false;
  /* the resolved KC_LOG: kc_options.log_level when it is a level, else the variable */
  kc_log_level level = kc__log_level_named(kc__config_text(&rt->conf, KC__SET_LOG), &bad);
  kc_log_level want = rt->opt.log_level;
  bool known = want >= KC_LOG_ERROR && want <= KC_LOG_DEBUG;
  rt->log = (kc__log_sink){rt->opt.log, rt->opt.log_ud, level};
  if (want != KC_LOG_DEFAULT && !known)
    kc__log(rt, KC_LOG_WARN, "kc_options.log_level %d is not a kc_log_level; using %s", (int)want,
            kc__log_level_name(rt->log.level));
  if (bad)
    kc__log(rt, KC_LOG_WARN, "KC_LOG=\"%s\" is not error, warn, info or debug; using warn",
            kc__config_text(&rt->conf, KC__SET_LOG));
}

void kc__log(const kc_runtime *rt, kc_log_level lvl, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  kc__vlog_to(rt ? &rt->log : NULL, lvl, fmt, ap);
  va_end(ap);
}

void kc__log_warn_cb(void *ud, const char *msg) { kc__log(ud, KC_LOG_WARN, "%s", msg); }

/* "'k'" or "'k' [T=float]": how the trace names a specialization. */
static const char *spec_label(const kc__spec *spec, char *buf, size_t size) {
  if (spec->params && *spec->params) snprintf(buf, size, "'%s' [%s]", spec->name, spec->params);
  else snprintf(buf, size, "'%s'", spec->name);
  return buf;
}

/* Whether one of k's slots holds an object linked in an older generation of
 * ctx (its backend context), or dropped from it (key 0: freed by a reset
 * or kc_collect, not reused yet): the handle launched there before a reset
 * moved the context's key, and so its slot. */
static bool linked_before_reset(const kc_kernel *k, const kc_context *ctx, uint64_t key) {
  for (int i = 0; k && i < KC__HSLOTS; i++) {
    const kc__linked *l = kc__load_relaxed(&k->slots[i]);
    uint64_t lk = l ? kc__load_acquire(&l->link_key) : 0;
    if (l && l != &kc__no_linked && lk != key && l->b.bctx == ctx->bctx) return true;
  }
  return false;
}

void kc__trace_launch_miss(kc_runtime *rt, const char *fn, const kc__spec *spec, const kc_context *ctx,
                           const kc__linked *last, const kc_kernel *k, kc_world w) {
  if (!kc__log_on(rt, KC_LOG_DEBUG)) return;
  char name[256];
  spec_label(spec, name, sizeof name);
  uint64_t key = kc__load_relaxed(&ctx->link_key);
  uint64_t ctx_id = kc__load_relaxed(&ctx->id);
  if ((!last || last == &kc__no_linked) && !linked_before_reset(k, ctx, key)) {
    kc__log(rt, KC_LOG_DEBUG, "%s of %s: miss: first launch of %s in context %llu (world %llu)", fn, name,
            k ? "this handle" : "these bound arguments", (unsigned long long)ctx_id, (unsigned long long)w);
    return;
  }
  /* Linked objects are never freed while rt lives: reading a stale one is
   * safe, but its code instance is looked at only while it is linked. */
  if (!last || last == &kc__no_linked || kc__load_acquire(&last->link_key) != key) {
    kc__log(rt, KC_LOG_DEBUG,
            "%s of %s: miss: the handle's code was linked before context %llu was reset (or collected, or "
            "in another context; world %llu)",
            fn, name, (unsigned long long)ctx_id, (unsigned long long)w);
    return;
  }
  const kc__ci *ci = last->ci;
  kc_world lo = kc__load_relaxed(&ci->min_world), hi = kc__load_acquire(&ci->max_world);
  if (lo <= w && w <= hi) /* a pin elsewhere: fast_world says "pinned" */
    kc__log(rt, KC_LOG_DEBUG,
            "%s of %s: miss: a thread holds a pin, so launches read their pins (world %llu)", fn, name,
            (unsigned long long)w);
  else
    kc__log(rt, KC_LOG_DEBUG, "%s of %s: miss: code #%llu serves worlds %llu..%llu, not world %llu", fn, name,
            (unsigned long long)ci->id, (unsigned long long)lo, (unsigned long long)hi,
            (unsigned long long)w);
}

/* Why `prev`, the newest code instance of the spec, does not serve world
 * w: the first lookup whose definition differs in c, the closure at w. */
static void ci_miss_reason(const kc__ci *prev, const kc__closure *c, kc_world w, char *why, size_t size) {
  kc_world lo = kc__load_relaxed(&prev->min_world), hi = kc__load_acquire(&prev->max_world);
  for (uint32_t i = 0; i < c->nedges; i++) {
    const kc__edge *now = &c->edges[i];
    for (uint32_t j = 0; j < prev->nedges; j++) {
      const kc__edge *then = &prev->edges[j];
      if (then->binding != now->binding || then->def == now->def) continue;
      const char *name = now->binding->name;
      if (!now->def)
        snprintf(why, size, "'%s' was undefined at world %llu", name,
                 (unsigned long long)(kc__load_relaxed(&then->def->max_world) + 1));
      else
        snprintf(why, size, "'%s' was %s at world %llu", name, then->def ? "redefined" : "defined",
                 (unsigned long long)now->def->min_world);
      return;
    }
  }
  if (w < lo)
    snprintf(why, size, "code #%llu serves worlds from %llu on, and world %llu is older (a pin)",
             (unsigned long long)prev->id, (unsigned long long)lo, (unsigned long long)w);
  else
    snprintf(why, size, "code #%llu serves worlds %llu..%llu only", (unsigned long long)prev->id,
             (unsigned long long)lo, (unsigned long long)hi);
}

void kc__trace_ci_miss(kc_runtime *rt, const kc__spec *spec, const kc__closure *c, kc_world w) {
  if (!kc__log_on(rt, KC_LOG_DEBUG)) return;
  char name[256], why[512] = "first compile";
  const kc__ci *prev = kc__load_acquire(&spec->head);
  if (prev) ci_miss_reason(prev, c, w, why, sizeof why);
  kc__log(rt, KC_LOG_DEBUG, "kernel %s: no code for world %llu: %s", spec_label(spec, name, sizeof name),
          (unsigned long long)w, why);
}

/* One clause per counter that moved (other threads of rt may move them
 * too: the details are a hint, hit or miss is exact). */
static void store_details(const kc_stats *a, const kc_stats *b, char *out, size_t size) {
  static const struct {
    size_t off;
    const char *what;
  } rows[] = {
      {offsetof(kc_stats, disk_repairs), "a damaged or unloadable entry was removed"},
      {offsetof(kc_stats, disk_lock_timeouts), "gave up waiting for another process's compile"},
      {offsetof(kc_stats, remote_misses), "remote miss"},
      {offsetof(kc_stats, remote_rejects), "remote value not trusted (damaged, foreign or bad MAC)"},
      {offsetof(kc_stats, remote_lookup_errors), "remote error or timeout"},
      {offsetof(kc_stats, remote_lookup_skips), "remote not asked (breaker open)"},
      {offsetof(kc_stats, remote_lock_waits), "waited for another machine's compile"},
  };
  size_t len = 0;
  out[0] = 0;
  for (size_t i = 0; i < sizeof rows / sizeof *rows && len < size; i++) {
    uint64_t x, y;
    memcpy(&x, (const char *)a + rows[i].off, sizeof x);
    memcpy(&y, (const char *)b + rows[i].off, sizeof y);
    if (y != x) len += (size_t)snprintf(out + len, size - len, "; %s", rows[i].what);
  }
}

void kc__trace_store_after(kc_runtime *rt, const kc__spec *spec, bool hit, const kc_stats *before,
                           const kc_stats *after) {
  char name[256], details[512];
  spec_label(spec, name, sizeof name);
  if (!rt->store) {
    kc__log(rt, KC_LOG_DEBUG, "kernel %s: no disk cache (off, or its directory is unusable): compiling",
            name);
    return;
  }
  store_details(before, after, details, sizeof details);
  bool remote = after->remote_hits != before->remote_hits;
  if (hit)
    kc__log(rt, KC_LOG_INFO, "kernel %s: %s hit, no compile%s", name, remote ? "remote" : "disk cache",
            details);
  else kc__log(rt, KC_LOG_DEBUG, "kernel %s: disk cache miss (no usable entry)%s: compiling", name, details);
}

void kc__trace_compiled(kc_runtime *rt, const kc__spec *spec, kc_status st, uint64_t ns) {
  char name[256];
  spec_label(spec, name, sizeof name);
  if (st)
    kc__log(rt, KC_LOG_INFO, "compiling kernel %s (%s) failed after %.1f ms: %s", name, rt->be->name,
            ns / 1e6, kc_status_name(st));
  else kc__log(rt, KC_LOG_INFO, "compiled kernel %s (%s) in %.1f ms", name, rt->be->name, ns / 1e6);
}
