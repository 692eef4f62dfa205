/* SPDX-License-Identifier: MIT */
/* settings.c -- the KC_* table (settings.h): its rows and one parser per
 * kind. The values are read into a configuration (config.c); it logs
 * nothing (the warning about a bad value is log.c's, above this file). */
#include "base/settings.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct setting_row {
  const char *name;
  kc__setting_kind kind;
  const char *def;
  const char *doc;
} setting_rows[KC__SETTING_COUNT] = {
#define KC__SETTING_ROW(id, name, kind, def, doc) [KC__SET_##id] = {name, KC__KIND_##kind, def, doc},
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
kc__setting_kind kc__setting_kind_of(kc__setting id) { return row(id) ? row(id)->kind : KC__KIND_STR; }

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
static bool parse(kc__setting_kind kind, const char *v, void *out, uint64_t lo, uint64_t hi) {
  switch (kind) {
  case KC__KIND_BOOL: *(bool *)out = *v && strcmp(v, "0") != 0; return true;
  case KC__KIND_U64: return kc__parse_u64(v, out, lo, hi);
  case KC__KIND_SIZE: return kc__parse_size(v, out);
  case KC__KIND_SECONDS: return kc__parse_seconds(v, out);
  case KC__KIND_STR:
  case KC__KIND_TEXT: break;
  }
  return false;
}

kc__setting_state kc__setting_parse(kc__setting id, const char *text, void *out, uint64_t lo, uint64_t hi) {
  const struct setting_row *r = row(id);
  if (!r) return KC__SETTING_BAD; /* a programming error: no such row */
  if (r->def) parse(r->kind, r->def, out, 0, UINT64_MAX);
  if (!text) return KC__SETTING_UNSET;
  if (parse(r->kind, text, out, lo, hi)) return KC__SETTING_SET;
  if (r->def) parse(r->kind, r->def, out, 0, UINT64_MAX); /* a failed parse may have written */
  return KC__SETTING_BAD;
}

/* What a variable of id's kind takes, for the warning (log.c). */
const char *kc__setting_takes(kc__setting id) {
  static const char *const takes[] = {
      [KC__KIND_STR] = "a valid value",
      [KC__KIND_TEXT] = "a valid value",
      [KC__KIND_BOOL] = "0 or 1",
      [KC__KIND_U64] = "a whole number in range",
      [KC__KIND_SIZE] = "a size (e.g. 500M, 2G)",
      [KC__KIND_SECONDS] = "a number of seconds",
  };
  return row(id) ? takes[row(id)->kind] : "a valid value";
}
