/* SPDX-License-Identifier: MIT */
/* settings.c -- the KC_* environment table (settings.h): one parser per
 * kind, getters that read the environment on each call. It logs nothing:
 * the warning about a bad value, and the settings that give it as they
 * are read, are log.c's, above this file. */
#include "base/settings.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef enum { KIND_STR, KIND_BOOL, KIND_U64, KIND_SIZE, KIND_SECONDS } setting_kind;

static const struct setting_row {
  const char *name;
  setting_kind kind;
  const char *def;
  const char *doc;
} setting_rows[KC__SETTING_COUNT] = {
#define KC__SETTING_ROW(id, name, kind, def, doc) [KC__SET_##id] = {name, KIND_##kind, def, doc},
    KC__SETTINGS(KC__SETTING_ROW)
#undef KC__SETTING_ROW
};

static const struct setting_row *row(kc__setting id) {
  return (unsigned)id < KC__SETTING_COUNT ? &setting_rows[id] : NULL;
}

const char *kc__setting_name(kc__setting id) { return row(id) ? row(id)->name : "KC_?"; }
const char *kc__setting_doc(kc__setting id) { return row(id) ? row(id)->doc : ""; }
const char *kc__setting_default(kc__setting id) { return row(id) ? row(id)->def : NULL; }
const char *kc__setting_raw(kc__setting id) { return row(id) ? getenv(row(id)->name) : NULL; }

/* The value if set and not empty, else NULL. */
static const char *value(kc__setting id) {
  const char *v = kc__setting_raw(id);
  return v && *v ? v : NULL;
}

const char *kc__setting_str(kc__setting id) {
  const char *v = value(id);
  return v ? v : kc__setting_default(id);
}

/* ---------------------------------------------------------------- parsers */

bool kc__parse_u64(const char *s, uint64_t *out, uint64_t lo, uint64_t hi) {
  if (!s || !*s || *s == '-' || isspace((unsigned char)*s)) return false;
  char *e;
  errno = 0;
  unsigned long long x = strtoull(s, &e, 10);
  if (errno || *e || x < lo || x > hi) return false;
  *out = x;
  return true;
}

bool kc__parse_size(const char *s, uint64_t *out) {
  if (!s) return false;
  while (isspace((unsigned char)*s)) s++;
  if (!isdigit((unsigned char)*s) && *s != '.') return false;
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || errno || v < 0) return false;
  while (isspace((unsigned char)*end)) end++;
  double mult = 1;
  switch (toupper((unsigned char)*end)) {
  case 'K': mult = 1024.0; break;
  case 'M': mult = 1024.0 * 1024; break;
  case 'G': mult = 1024.0 * 1024 * 1024; break;
  case 'T': mult = 1024.0 * 1024 * 1024 * 1024; break;
  default: break;
  }
  if (mult > 1) {
    end++;
    if (*end == 'i' || *end == 'I') end++;
    if (*end == 'b' || *end == 'B') end++;
  } else if (*end == 'b' || *end == 'B') {
    end++;
  }
  while (isspace((unsigned char)*end)) end++;
  double r = v * mult;
  if (*end || r >= 18446744073709551615.0) return false;
  *out = (uint64_t)r;
  return true;
}

bool kc__parse_seconds(const char *s, double *out) {
  if (!s || !*s) return false;
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || *end || errno || !isfinite(v) || !(v >= 0)) return false;
  *out = v;
  return true;
}

/* ---------------------------------------------------------------- getters */

/* The kind's parse of v into out (for the default: a table row, always
 * well-formed; a NULL default leaves out alone). */
static bool parse(setting_kind kind, const char *v, void *out, uint64_t lo, uint64_t hi) {
  switch (kind) {
  case KIND_BOOL: *(bool *)out = strcmp(v, "0") != 0; return true;
  case KIND_U64: return kc__parse_u64(v, out, lo, hi);
  case KIND_SIZE: return kc__parse_size(v, out);
  case KIND_SECONDS: return kc__parse_seconds(v, out);
  case KIND_STR: break;
  }
  return false;
}

static kc__setting_state get(kc__setting id, setting_kind kind, void *out, uint64_t lo, uint64_t hi) {
  const struct setting_row *r = row(id);
  if (!r || r->kind != kind) return KC__SETTING_BAD; /* a programming error: a wrong getter */
  if (r->def) parse(kind, r->def, out, 0, UINT64_MAX);
  const char *v = value(id);
  if (!v) return KC__SETTING_UNSET;
  if (parse(kind, v, out, lo, hi)) return KC__SETTING_SET;
  if (r->def) parse(kind, r->def, out, 0, UINT64_MAX); /* a failed parse may have written */
  return KC__SETTING_BAD;
}

kc__setting_state kc__setting_bool(kc__setting id, bool *out) { return get(id, KIND_BOOL, out, 0, 0); }
kc__setting_state kc__setting_u64(kc__setting id, uint64_t *out, uint64_t lo, uint64_t hi) {
  return get(id, KIND_U64, out, lo, hi);
}
kc__setting_state kc__setting_size(kc__setting id, uint64_t *out) { return get(id, KIND_SIZE, out, 0, 0); }
kc__setting_state kc__setting_seconds(kc__setting id, double *out) {
  return get(id, KIND_SECONDS, out, 0, 0);
}

/* What a variable of id's kind takes, for the warning (log.c). */
const char *kc__setting_takes(kc__setting id) {
  static const char *const takes[] = {
      [KIND_STR] = "a valid value",           [KIND_BOOL] = "0 or 1",
      [KIND_U64] = "a whole number in range", [KIND_SIZE] = "a size (e.g. 500M, 2G)",
      [KIND_SECONDS] = "a number of seconds",
  };
  return row(id) ? takes[row(id)->kind] : "a valid value";
}
