/* SPDX-License-Identifier: MIT */
/*
 * cli/lookup.c -- owns how the `kcache` command finds entries: listing the
 * store, and the one way that `show` and `explain` turn what the user typed
 * (a key, a unique key prefix, or a kernel's entry name with optional
 * parameters) into a decoded entry.
 */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

kc__store_file *cli_list(const cli *c, size_t *n) {
  kc__store_file *files = NULL;
  if (kc__store_list(NULL, c->vdir, &files, n) != KC_OK) cli_fail("%s", kc_errmsg(NULL));
  return files;
}

static bool is_key_prefix(const char *s) {
  size_t n = strlen(s);
  return n >= 4 && n <= 32 && strspn(s, "0123456789abcdefABCDEF") == n;
}

/* Reads the entry in path (key: what its name says) into *e, or says why
 * not on stderr. */
static bool read_entry(const cli *c, const char *path, const uint8_t key[16], kc__entry *e) {
  char why[256] = "";
  kc_status st = kc__entry_read(NULL, path, key, e, why, sizeof why);
  if (st == KC_OK) return true;
  if (st == KC_ENOTFOUND) cli_error("%s: removed meanwhile (in %s)", path, c->root);
  else if (st == KC_EUNAVAILABLE) cli_error("cannot read %s here: %s", path, why);
  else cli_error("%s is damaged: %s (kcache verify --repair removes it)", path, why);
  return false;
}

/* The files whose key starts with prefix: the count, the first in *first. */
static size_t match_prefix(const kc__store_file *files, size_t n, const char *prefix, size_t *first) {
  size_t hits = 0, pl = strlen(prefix);
  for (size_t i = 0; i < n; i++) {
    char hex[33];
    kc__store_hex(files[i].key, hex);
    if (strncasecmp(hex, prefix, pl)) continue;
    if (hits++ == 0) *first = i;
  }
  return hits;
}

/* The file of the most recently compiled entry named `name` (with `params`
 * if not NULL), from the entries' metadata; SIZE_MAX if none. */
static size_t newest_named(const kc__store_file *files, size_t n, const char *name, const char *params) {
  size_t best = SIZE_MAX;
  uint64_t newest = 0;
  for (size_t i = 0; i < n; i++) {
    kc__entry e;
    if (kc__entry_peek(files[i].path, &e, NULL, 0) != KC_OK) continue;
    if (!strcmp(e.entry, name) && (!params || !strcmp(e.params, params)) &&
        (best == SIZE_MAX || e.created_ns >= newest)) {
      newest = e.created_ns;
      best = i;
    }
    kc__entry_free(NULL, &e);
  }
  return best;
}

bool cli_resolve(const cli *c, const char *what, const char *params, kc__entry *e, char *path, size_t len) {
  uint8_t key[16];
  if (kc__store_unhex(what, key)) {
    /* a full key: straight to its file, no listing */
    kc__store_path(c->vdir, key, ".kce", path, len);
    if (access(path, F_OK) == 0) return read_entry(c, path, key, e);
  }
  size_t n, at = SIZE_MAX, hits = 0;
  kc__store_file *files = cli_list(c, &n);
  if (is_key_prefix(what)) hits = match_prefix(files, n, what, &at);
  if (hits > 1 || hits == 0) {
    /* a kernel may be named like hex digits: a name wins over an ambiguous prefix */
    size_t named = newest_named(files, n, what, params);
    if (named != SIZE_MAX) at = named;
    else if (hits > 1) {
      kc__store_list_free(NULL, files);
      cli_error("key prefix %s is ambiguous (%zu entries); give more digits", what, hits);
      return false;
    }
  }
  bool ok = false;
  if (at == SIZE_MAX) {
    size_t len = strlen(what), hex = strspn(what, "0123456789abcdefABCDEF");
    const char *p1 = params ? " with params " : "", *p2 = params ? params : "";
    if (hex == len && len < 4) /* `kcache show 45`: too short to be a prefix */
      cli_error("no kernel named %s%s%s in %s, and %s is too short for a key prefix: a prefix needs 4 or "
                "more of the key's 32 hex digits (kcache ls shows the keys)",
                what, p1, p2, c->root, what);
    else if (hex == len && len > 32)
      cli_error("no kernel named %s%s%s in %s, and %s is longer than a key (32 hex digits)", what, p1, p2,
                c->root, what);
    else if (hex == len)
      cli_error("no entry whose key starts with %s, and no kernel named %s%s%s, in %s", what, what, p1, p2,
                c->root);
    else cli_error("no kernel named %s%s%s in %s", what, p1, p2, c->root);
  } else {
    snprintf(path, len, "%s", files[at].path);
    ok = read_entry(c, files[at].path, files[at].key, e);
  }
  kc__store_list_free(NULL, files);
  return ok;
}
