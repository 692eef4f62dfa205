/* SPDX-License-Identifier: MIT */
/*
 * cache/conf.c -- the store's configuration file, ROOT/kcache.conf:
 * settings kept with the store, as ccache keeps ccache.conf in its
 * directory (today one: max_size, which `kcache -M SIZE` writes and every
 * runtime on the store reads; the environment wins over it), and the
 * store's size bound that comes of both (kc__store_max_size). Lines are
 * "key = value"; blank lines and lines starting with '#' are kept as they
 * are; an unknown key is kept and ignored. It is trusted as the store's
 * entries are (trust.h, kc__store_trust_file): what it says could shrink
 * the store to nothing. It is written with the mode of the store's files
 * (0600, or 0660 in a shared store). Its file operations are the cache's
 * (io.h), under the one fault hook.
 */
#include "cache/dir.h"
#include "cache/io.h"

#include "base/sb.h"
#include "base/settings.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CONF_MAX 65536 /* bytes: a larger file is not a configuration */

static int conf_path(const char *root, char *path, size_t n) {
  return snprintf(path, n, "%s/" KC__STORE_CONF, root) < (int)n ? 0 : ENAMETOOLONG;
}

/* The file's text (NUL-terminated, libc's heap) into *out; 0, or errno
 * (ENOENT: there is none; EPERM: t does not trust it). */
static int conf_read(const char *root, const kc__store_trust *t, char **out) {
  *out = NULL;
  char path[PATH_MAX], why[1024];
  int err = conf_path(root, path, sizeof path);
  if (err) return err;
  int fd = kc__fo_open(KC__IO_OPEN, path, O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0) return errno == ENOTDIR ? ENOENT : errno;
  struct stat st;
  size_t got;
  if (fstat(fd, &st) != 0) err = errno;
  else if (st.st_size > CONF_MAX) err = EFBIG;
  else if (!kc__store_trust_file(t, path, &st, why, sizeof why)) err = EPERM;
  else if (!(*out = (char *)kc__fo_read_all(NULL, fd, (size_t)st.st_size, &got, why, sizeof why)))
    err = EIO; /* (a read error, or no memory: why says which) */
  close(fd);
  return err;
}

/* The line of text that sets key: its value's start and length; NULL if none. */
static const char *find_key(const char *text, const char *key, size_t *vlen, const char **line,
                            const char **next) {
  size_t kn = strlen(key);
  for (const char *p = text; *p;) {
    const char *end = strchr(p, '\n'), *nl = end ? end + 1 : p + strlen(p);
    if (!end) end = nl;
    const char *q = p;
    while (q < end && (*q == ' ' || *q == '\t')) q++;
    if (q + kn <= end && !memcmp(q, key, kn)) {
      const char *e = q + kn;
      while (e < end && (*e == ' ' || *e == '\t')) e++;
      if (e < end && *e == '=') {
        e++;
        while (e < end && (*e == ' ' || *e == '\t')) e++;
        const char *v_end = end;
        while (v_end > e && (v_end[-1] == ' ' || v_end[-1] == '\t' || v_end[-1] == '\r')) v_end--;
        *vlen = (size_t)(v_end - e);
        if (line) *line = p;
        if (next) *next = nl;
        return e;
      }
    }
    p = nl;
  }
  return NULL;
}

int kc__store_conf_get(const char *root, const kc__store_trust *t, const char *key, char *val, size_t vlen) {
  char *text;
  int err = conf_read(root, t, &text);
  if (err) return err;
  size_t n;
  const char *v = find_key(text, key, &n, NULL, NULL);
  if (v) snprintf(val, vlen, "%.*s", (int)n, v);
  kc__heap_free(NULL, text);
  return v ? 0 : ENOENT;
}

/* The file's new text: text (NULL: no file yet) with key's line set to val. */
static void conf_edit(kc__sb *sb, const char *text, const char *key, const char *val) {
  const char *line = NULL, *next = NULL;
  size_t n;
  const char *old = text ? find_key(text, key, &n, &line, &next) : NULL;
  if (!text)
    kc__sb_puts(sb, "# kcache's settings for this store (kcache -p shows them; the environment wins)\n");
  else kc__sb_append(sb, text, old ? (size_t)(line - text) : strlen(text));
  if (sb->len && sb->buf[sb->len - 1] != '\n') kc__sb_puts(sb, "\n");
  kc__sb_printf(sb, "%s = %s\n", key, val);
  if (old) kc__sb_puts(sb, next);
}

int kc__store_conf_set(const char *root, const kc__store_trust *t, const char *key, const char *val) {
  char *text = NULL, path[PATH_MAX], tmp[PATH_MAX + 32];
  int err = conf_path(root, path, sizeof path);
  if (!err) err = conf_read(root, t, &text);
  if (err && err != ENOENT) return err;
  kc__sb sb;
  kc__sb_init(&sb, NULL);
  conf_edit(&sb, text, key, val);
  kc__heap_free(NULL, text);
  err = sb.failed ? ENOMEM : 0;
  snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
  unlink(tmp); /* one this process's pid left behind, if any */
  mode_t mode = kc__store_file_mode(t);
  int fd = err ? -1 : kc__fo_open(KC__IO_CREATE, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (!err && fd < 0) err = errno;
  if (fd >= 0) {
    fchmod(fd, mode); /* the umask ignored, as for entries */
    err = kc__fo_write_all(fd, sb.buf, sb.len);
    if (!err && kc__fo_fsync(fd) != 0) err = errno;
    if (close(fd) != 0 && !err) err = errno;
    if (!err && kc__fo_rename(tmp, path) != 0) err = errno;
    if (err) unlink(tmp);
  }
  kc__sb_free(&sb);
  return err;
}

bool kc__store_max_size(const kc__config *conf, const char *root, const kc__store_trust *t, uint64_t *out,
                        kc__max_from *from, char *why, size_t wl) {
  uint64_t v = 0;
  kc__max_from f = KC__MAX_DEFAULT;
  char text[128] = "";
  /* a row from the file (a resolved configuration) is read from the file
   * again below, as the file says it now */
  bool set_here = kc__config_origin(conf, KC__SET_CACHE_MAXSIZE) != KC__FROM_FILE;
  kc__setting_state st = set_here ? kc__config_size(conf, KC__SET_CACHE_MAXSIZE, &v) : KC__SETTING_UNSET;
  bool ok = st != KC__SETTING_BAD;
  int err = ENOENT;
  if (!ok || (st == KC__SETTING_SET && v)) {
    f = KC__MAX_ENV;
  } else if (t && root && *root &&
             (err = kc__store_conf_get(root, t, "max_size", text, sizeof text)) == EPERM) {
    ok = false, f = KC__MAX_FILE; /* a file it does not trust: said, not used */
  } else if (!err && text[0]) {
    ok = kc__parse_size(text, &v);
    if (!ok || v) f = KC__MAX_FILE; /* (0: the default) */
  }
  *out = ok && f != KC__MAX_DEFAULT ? v : KC__STORE_DEFAULT_MAX;
  if (from) *from = f;
  if (ok || !why) return ok;
  char what[256];
  if (f == KC__MAX_ENV)
    snprintf(why, wl, "%s is not a size (e.g. 500M, 2G)",
             kc__config_what(conf, KC__SET_CACHE_MAXSIZE, what, sizeof what));
  else if (err == EPERM)
    snprintf(why, wl,
             "%s/" KC__STORE_CONF " is not trusted (owned by another user, or writable by others than the "
             "store trusts, as for its entries): its max_size is not used",
             root);
  else
    snprintf(why, wl, "max_size = \"%s\" in %s/" KC__STORE_CONF " is not a size (e.g. 500M, 2G)", text, root);
  return ok;
}

void kc__store_conf_resolve(kc__config *conf) {
  const char *root = kc__config_text(conf, KC__SET_CACHE_DIR);
  if (!root || !*root || kc__config_origin(conf, KC__SET_CACHE_MAXSIZE) != KC__FROM_DEFAULT) return;
  kc__store_trust t;
  char why[1024], text[128];
  if (!kc__store_trust_load(&t, root, conf, NULL, why, sizeof why)) { /* not used: nothing read */
    kc__store_trust_wipe(&t);
    return;
  }
  uint64_t v;
  if (kc__store_conf_get(root, &t, "max_size", text, sizeof text) == 0 && kc__parse_size(text, &v) && v) {
    kc__config_set(conf, KC__SET_CACHE_MAXSIZE, text, KC__FROM_FILE, NULL);
  }
  kc__store_trust_wipe(&t);
}
