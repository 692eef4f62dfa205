/* SPDX-License-Identifier: MIT */
/* config.h -- a resolved configuration: every KC_* setting of the table
 * (settings.h) with the text that won and where it came from: the default,
 * the environment, the store's kcache.conf, or an option (kc_options, or
 * a flag of the kcache command). It is built once, when a runtime is made
 * (core/config.c's kc__config_resolve, which the kcache command calls too),
 * and read by the cache, the remote tier and the core with the getters
 * below, which parse a row the one way every setting of its kind is
 * parsed. Nothing but config.c reads the environment for a setting.
 *
 * The getters answer like the table's parsers: KC__SETTING_UNSET when the
 * row holds its default (*out: the default), KC__SETTING_SET when it holds
 * a well-formed value from somewhere else, KC__SETTING_BAD when that value
 * is malformed or out of range (*out: the default); kc__config_what names
 * the value for a message about it, in the words of where it came from. */
#ifndef KC_BASE_CONFIG_H
#define KC_BASE_CONFIG_H

#include "base/err.h"
#include "base/mem.h"
#include "base/settings.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum kc__origin {
  KC__FROM_DEFAULT, /* the table's default (or one derived from it: the cache directory) */
  KC__FROM_ENV, /* the KC_* variable */
  KC__FROM_FILE, /* the store's kcache.conf */
  KC__FROM_OPTION /* kc_options, or a flag of the kcache command */
} kc__origin;

typedef struct kc__config_row {
  char *text; /* the value's text; NULL: the table's default */
  kc__origin from;
  char label[48]; /* where, in words: "kc_options.host_cc", "--dir", "kcache.conf", "XDG_CACHE_HOME" */
} kc__config_row;

typedef struct kc__config {
  kc__heap heap;
  bool failed; /* out of memory while filling it: rows may hold their defaults */
  kc__config_row row[KC__SETTING_COUNT];
} kc__config;

/* Every row at its default; heap (NULL: libc) holds the texts. */
void kc__config_init(kc__config *c, const kc__heap *heap);
void kc__config_free(kc__config *c);
/* Copies src into dst (initialized with dst's heap); false out of memory. */
bool kc__config_copy(kc__config *dst, const kc__config *src);

/* Reads every KC_* variable that is set (an empty one counts as unset,
 * except for a setting of kind TEXT) into its row, as from the
 * environment: the one reading of the environment for settings. */
void kc__config_read_env(kc__config *c);
/* Sets id's row to text (copied; NULL: back to the default) from `from`,
 * named by label (NULL: the origin's own word). */
void kc__config_set(kc__config *c, kc__setting id, const char *text, kc__origin from, const char *label);

/* The row's text (NULL when it holds the table's default and no derived
 * one), its origin, and the origin's word ("default", "environment",
 * "kcache.conf", "option" or the row's label). */
const char *kc__config_text(const kc__config *c, kc__setting id);
kc__origin kc__config_origin(const kc__config *c, kc__setting id);
const char *kc__config_from(const kc__config *c, kc__setting id);

/* Getters by kind (c NULL: the table's defaults). STR: the text if any,
 * else the default (may be NULL). */
const char *kc__config_str(const kc__config *c, kc__setting id);
kc__setting_state kc__config_bool(const kc__config *c, kc__setting id, bool *out);
kc__setting_state kc__config_u64(const kc__config *c, kc__setting id, uint64_t *out, uint64_t lo,
                                 uint64_t hi);
kc__setting_state kc__config_size(const kc__config *c, kc__setting id, uint64_t *out);
kc__setting_state kc__config_seconds(const kc__config *c, kc__setting id, double *out);

/* The value named for a message: KC_NAME="text" (environment), LABEL = text
 * (an option), max_size = "text" in LABEL (the file). */
const char *kc__config_what(const kc__config *c, kc__setting id, char *buf, size_t size);

/* In log.c, above this file: logs the warning WHAT is not <what the kind
 * takes>; using <fallback (NULL: the default)>, to log: a runtime's log
 * (its callback and level: kc_options.log, log_level, else the resolved
 * $KC_LOG), or NULL where there is no runtime (the kcache command): stderr
 * at $KC_LOG's level (err.h). */
void kc__config_warn(const kc__log_sink *log, const kc__config *c, kc__setting id, const char *fallback);
/* In log.c: the compile threads: the row if set and not 0, else one per
 * core (at most 1024). warn: a bad value is warned about, to log (as
 * kc__config_warn's). */
uint32_t kc__config_compile_threads(const kc__config *c, bool warn, const kc__log_sink *log);

#endif /* KC_BASE_CONFIG_H */
