/* SPDX-License-Identifier: MIT */
/*
 * cli/lookup.c -- owns how the `kcache` command finds entries: listing the
 * store, and the one way that `show` and `explain` turn what the user typed
 * (a key, a unique key prefix, or a kernel's entry name with optional
 * parameters) into a decoded entry. Through the store's index
 * (cache/index.h): a prefix reads its one bucket's index, a name the
 * records with its hash and then only those entries, so that neither lists
 * nor opens every entry of a large store.
 */
#include "cli.h"
#include "core/core.h" /* kc__canon_params: parameters in the form entries keep them */

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

bool cli_index_writable(const cli *c) {
  struct stat st;
  return access(c->vdir, W_OK) == 0 && stat(c->vdir, &st) == 0 && (geteuid() != 0 || st.st_uid == 0);
}

void cli_named(const cli *c, const char *name, kc__index_set *out) {
  memset(out, 0, sizeof *out);
  uint64_t h = kc__index_name_hash(name);
  bool write = cli_index_writable(c);
  kc__index_set s = {0};
  for (int b = 0; b < 256; b++) {
    s.n = 0;
    if (!kc__index_get_known(NULL, c->vdir, b, write, &s)) cli_fail("out of memory reading the index");
    for (size_t i = 0; i < s.n; i++) {
      if (s.rec[i].name != h) continue;
      bool ok;
      KC__GROW(NULL, out->rec, out->cap, out->n + 1, 16, &ok);
      if (!ok) cli_fail("out of memory reading the index");
      out->rec[out->n++] = s.rec[i];
    }
  }
  kc__index_set_free(NULL, &s);
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

/* The entries whose key starts with prefix (4 or more hex digits: one
 * bucket's index): the count, the first's key in first. */
static size_t match_prefix(const cli *c, const char *prefix, uint8_t first[16]) {
  char two[3] = {prefix[0], prefix[1], 0};
  int b = (int)strtol(two, NULL, 16);
  kc__index_set s = {0};
  if (!kc__index_get(NULL, c->vdir, b, cli_index_writable(c), &s, NULL))
    cli_fail("out of memory reading the index");
  size_t hits = 0, pl = strlen(prefix);
  for (size_t i = 0; i < s.n; i++) {
    char hex[33];
    kc__store_hex(s.rec[i].key, hex);
    if (strncasecmp(hex, prefix, pl)) continue;
    if (hits++ == 0) memcpy(first, s.rec[i].key, 16);
  }
  kc__index_set_free(NULL, &s);
  return hits;
}

/* The key of the most recently compiled entry named `name` (with `params`
 * if not NULL) into key, from the metadata of the entries the index says
 * have that name; false if none. The parameters are compared as the
 * library keeps them, sorted by key and trimmed (kc__canon_params), so
 * that "T=float,N=1", as kc_kernel_create was given them, finds the entry
 * of "N=1,T=float"; ones it would refuse are compared as they are. */
static bool newest_named(const cli *c, const char *name, const char *params, uint8_t key[16]) {
  char *canon = NULL;
  if (params && kc__canon_params(NULL, params, &canon) == KC_OK) params = canon;
  kc__index_set s;
  cli_named(c, name, &s);
  bool found = false;
  uint64_t newest = 0;
  for (size_t i = 0; i < s.n; i++) {
    char path[PATH_MAX];
    kc__store_path(c->vdir, s.rec[i].key, ".kce", path, sizeof path);
    kc__entry e;
    if (kc__entry_peek(path, &e, NULL, 0) != KC_OK) continue;
    if (!strcmp(e.entry, name) && (!params || !strcmp(e.params, params)) &&
        (!found || e.created_ns >= newest)) {
      newest = e.created_ns;
      memcpy(key, s.rec[i].key, 16);
      found = true;
    }
    kc__entry_free(NULL, &e);
  }
  kc__index_set_free(NULL, &s);
  kc__heap_free(NULL, canon);
  return found;
}

bool cli_resolve(const cli *c, const char *what, const char *params, kc__entry *e, char *path, size_t len) {
  uint8_t key[16];
  if (kc__store_unhex(what, key)) {
    /* a full key: straight to its file, no listing */
    kc__store_path(c->vdir, key, ".kce", path, len);
    if (access(path, F_OK) == 0) return read_entry(c, path, key, e);
  }
  size_t hits = 0;
  bool at = false;
  if (is_key_prefix(what)) at = (hits = match_prefix(c, what, key)) == 1;
  if (hits > 1 || hits == 0) {
    /* a kernel may be named like hex digits: a name wins over an ambiguous prefix */
    at = newest_named(c, what, params, key);
    if (!at && hits > 1) {
      cli_error("key prefix %s is ambiguous (%zu entries); give more digits", what, hits);
      return false;
    }
  }
  bool ok = false;
  if (!at) {
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
    kc__store_path(c->vdir, key, ".kce", path, len);
    ok = read_entry(c, path, key, e);
  }
  return ok;
}
