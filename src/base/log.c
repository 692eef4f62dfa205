/* SPDX-License-Identifier: MIT */
/* log.c -- the log sinks (err.h): levels, $KC_LOG (for the log of no
 * runtime, read when it logs: a runtime's level is resolved once), the
 * line a sink or stderr gets; and the warning about a setting's bad value
 * (config.h), to a runtime's sink (or stderr where there is none), with
 * the setting that gives it as it is read. Above
 * config.c and settings.c (which log nothing) and beside err.c. */
#include "base/config.h"
#include "base/err.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* -------------------------------------------------------------------- log */

static const char *const level_names[] = {"warning", "error", "warning", "info", "debug"};

const char *kc__log_level_name(kc_log_level lvl) {
  return (unsigned)lvl < sizeof level_names / sizeof *level_names ? level_names[lvl] : "log";
}

kc_log_level kc__log_level_named(const char *v, bool *bad) {
  if (bad) *bad = false;
  static const struct {
    const char *name;
    kc_log_level level;
  } names[] = {{"error", KC_LOG_ERROR},
               {"warn", KC_LOG_WARN},
               {"warning", KC_LOG_WARN},
               {"info", KC_LOG_INFO},
               {"debug", KC_LOG_DEBUG}};
  for (size_t i = 0; v && i < sizeof names / sizeof *names; i++)
    if (!strcmp(v, names[i].name)) return names[i].level;
  if (bad) *bad = v != NULL;
  return KC_LOG_WARN;
}

kc_log_level kc__log_env_level(bool *bad) {
  const char *v = kc__setting_raw(KC__SET_LOG); /* the log of no runtime: read when it logs */
  return kc__log_level_named(v && *v ? v : NULL, bad);
}

bool kc__log_wants(const kc__log_sink *sink, kc_log_level lvl) {
  return lvl <= (sink ? sink->level : kc__log_env_level(NULL));
}

void kc__vlog_to(const kc__log_sink *sink, kc_log_level lvl, const char *fmt, va_list ap) {
  if (!kc__log_wants(sink, lvl)) return;
  char msg[2048];
  int n = vsnprintf(msg, sizeof msg, fmt, ap);
  if (n >= (int)sizeof msg) memcpy(msg + sizeof msg - 4, "...", 4);
  if (sink && sink->fn) sink->fn(sink->ud, lvl, msg);
  else fprintf(stderr, "kcache: %s: %s\n", kc__log_level_name(lvl), msg);
}

void kc__log_to(const kc__log_sink *sink, kc_log_level lvl, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  kc__vlog_to(sink, lvl, fmt, ap);
  va_end(ap);
}

/* ------------------------------------------------ settings that warn */

void kc__config_warn(const kc__log_sink *log, const kc__config *c, kc__setting id, const char *fallback) {
  char what[512];
  const char *def = kc__setting_default(id);
  kc__log_to(log, KC_LOG_WARN, "%s is not %s; using %s", kc__config_what(c, id, what, sizeof what),
             kc__setting_takes(id), fallback ? fallback : (def ? def : "the default"));
}

uint32_t kc__config_compile_threads(const kc__config *c, bool warn, const kc__log_sink *log) {
  uint64_t n = 0;
  if (kc__config_u64(c, KC__SET_COMPILE_THREADS, &n, 0, 1024) == KC__SETTING_BAD && warn)
    kc__config_warn(log, c, KC__SET_COMPILE_THREADS, "one thread per core");
  if (n) return (uint32_t)n;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  return cores > 0 ? (uint32_t)(cores > 1024 ? 1024 : cores) : 1;
}
