/* SPDX-License-Identifier: MIT */
/* config.c -- a resolved configuration (config.h): its rows, the one
 * reading of the environment for the KC_* table, and the getters by kind
 * over the rows. Above settings.c; it logs nothing (log.c warns). */
#include "base/config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const origin_words[] = {"default", "environment", "kcache.conf", "option"};

void kc__config_init(kc__config *c, const kc__heap *heap) {
  memset(c, 0, sizeof *c);
  c->heap = heap && heap->fn ? *heap : (kc__heap){kc__libc_alloc, NULL};
}

void kc__config_free(kc__config *c) {
  if (!c) return;
  for (int i = 0; i < KC__SETTING_COUNT; i++) kc__heap_free(&c->heap, c->row[i].text);
  kc__heap h = c->heap;
  memset(c, 0, sizeof *c);
  c->heap = h;
}

static char *dup(kc__config *c, const char *s) {
  size_t n = strlen(s) + 1;
  char *d = kc__heap_alloc(&c->heap, n);
  if (d) memcpy(d, s, n);
  else c->failed = true;
  return d;
}

void kc__config_set(kc__config *c, kc__setting id, const char *text, kc__origin from, const char *label) {
  if ((unsigned)id >= KC__SETTING_COUNT) return;
  kc__config_row *r = &c->row[id];
  char *t = text ? dup(c, text) : NULL;
  if (text && !t) return; /* out of memory: the row keeps what it had */
  kc__heap_free(&c->heap, r->text);
  r->text = t;
  r->from = text ? from : KC__FROM_DEFAULT;
  snprintf(r->label, sizeof r->label, "%s", label ? label : origin_words[r->from]);
}

bool kc__config_copy(kc__config *dst, const kc__config *src) {
  for (int i = 0; i < KC__SETTING_COUNT; i++) {
    const kc__config_row *r = &src->row[i];
    kc__config_set(dst, (kc__setting)i, r->text, r->from, r->label);
  }
  return !dst->failed;
}

void kc__config_read_env(kc__config *c) {
  for (int i = 0; i < KC__SETTING_COUNT; i++) {
    const char *v = kc__setting_raw((kc__setting)i);
    if (v && (*v || kc__setting_kind_of((kc__setting)i) == KC__KIND_TEXT))
      kc__config_set(c, (kc__setting)i, v, KC__FROM_ENV, NULL);
  }
}

static const kc__config_row *row_of(const kc__config *c, kc__setting id) {
  return c && (unsigned)id < KC__SETTING_COUNT ? &c->row[id] : NULL;
}

const char *kc__config_text(const kc__config *c, kc__setting id) {
  const kc__config_row *r = row_of(c, id);
  return r ? r->text : NULL;
}

kc__origin kc__config_origin(const kc__config *c, kc__setting id) {
  const kc__config_row *r = row_of(c, id);
  return r ? r->from : KC__FROM_DEFAULT;
}

const char *kc__config_from(const kc__config *c, kc__setting id) {
  const kc__config_row *r = row_of(c, id);
  return r && r->label[0] ? r->label : origin_words[r ? r->from : KC__FROM_DEFAULT];
}

const char *kc__config_str(const kc__config *c, kc__setting id) {
  const char *t = kc__config_text(c, id);
  return t ? t : kc__setting_default(id);
}

/* A row's parse: a derived default (text from DEFAULT) parses as set but
 * answers UNSET, so that callers treat it as the default it is. */
static kc__setting_state get(const kc__config *c, kc__setting id, void *out, uint64_t lo, uint64_t hi) {
  const kc__config_row *r = row_of(c, id);
  kc__setting_state st = kc__setting_parse(id, r ? r->text : NULL, out, lo, hi);
  return st == KC__SETTING_SET && r->from == KC__FROM_DEFAULT ? KC__SETTING_UNSET : st;
}

kc__setting_state kc__config_bool(const kc__config *c, kc__setting id, bool *out) {
  return get(c, id, out, 0, 0);
}
kc__setting_state kc__config_u64(const kc__config *c, kc__setting id, uint64_t *out, uint64_t lo,
                                 uint64_t hi) {
  return get(c, id, out, lo, hi);
}
kc__setting_state kc__config_size(const kc__config *c, kc__setting id, uint64_t *out) {
  return get(c, id, out, 0, 0);
}
kc__setting_state kc__config_seconds(const kc__config *c, kc__setting id, double *out) {
  return get(c, id, out, 0, 0);
}

const char *kc__config_what(const kc__config *c, kc__setting id, char *buf, size_t size) {
  const kc__config_row *r = row_of(c, id);
  const char *t = r && r->text ? r->text : "";
  switch (r ? r->from : KC__FROM_DEFAULT) {
  case KC__FROM_OPTION: snprintf(buf, size, "%s = \"%s\"", r->label, t); break;
  case KC__FROM_FILE: snprintf(buf, size, "%s = \"%s\" in %s", kc__setting_name(id), t, r->label); break;
  case KC__FROM_ENV:
  case KC__FROM_DEFAULT: snprintf(buf, size, "%s=\"%s\"", kc__setting_name(id), t); break;
  }
  return buf;
}
