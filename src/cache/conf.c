/* SPDX-License-Identifier: MIT */
/*
 * cache/conf.c -- the store's configuration file, ROOT/kcache.conf:
 * settings kept with the store, as ccache keeps ccache.conf in its
 * directory (today one: max_size, which `kcache -M SIZE` writes and every
 * runtime on the store reads; the environment wins over it). Lines are
 * "key = value"; blank lines and lines starting with '#' are kept as they
 * are; an unknown key is kept and ignored. A file that another user (but
 * root) owns, or that its group or others may write, is not read (what it
 * says could shrink the store to nothing), as the private store's entries
 * are not (trust.c); in a shared store, only its writer's runtimes read it.
 * Its file operations are the cache's (io.h), under the one fault hook.
 */
#include "cache/dir.h"
#include "cache/io.h"

#include "base/sb.h"

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
 * (ENOENT: there is none; EPERM: it is not to be trusted: owned by someone
 * but the user or root, or writable by its group or others). */
static int conf_read(const char *root, char **out) {
  *out = NULL;
  char path[PATH_MAX], why[64];
  int err = conf_path(root, path, sizeof path);
  if (err) return err;
  int fd = kc__fo_open(KC__IO_OPEN, path, O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0) return errno == ENOTDIR ? ENOENT : errno;
  struct stat st;
  size_t got;
  if (fstat(fd, &st) != 0) err = errno;
  else if (st.st_size > CONF_MAX) err = EFBIG;
  else if ((st.st_uid != geteuid() && st.st_uid != 0) || (st.st_mode & (S_IWGRP | S_IWOTH))) err = EPERM;
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

int kc__store_conf_get(const char *root, const char *key, char *val, size_t vlen) {
  char *text;
  int err = conf_read(root, &text);
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

int kc__store_conf_set(const char *root, const char *key, const char *val) {
  char *text = NULL, path[PATH_MAX], tmp[PATH_MAX + 32];
  int err = conf_path(root, path, sizeof path);
  if (!err) err = conf_read(root, &text);
  if (err && err != ENOENT) return err;
  kc__sb sb;
  kc__sb_init(&sb, NULL);
  conf_edit(&sb, text, key, val);
  kc__heap_free(NULL, text);
  err = sb.failed ? ENOMEM : 0;
  snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
  unlink(tmp); /* one this process's pid left behind, if any */
  int fd = err ? -1 : kc__fo_open(KC__IO_CREATE, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (!err && fd < 0) err = errno;
  if (fd >= 0) {
    fchmod(fd, 0644); /* the umask ignored: read by every runtime on the store */
    err = kc__fo_write_all(fd, sb.buf, sb.len);
    if (!err && kc__fo_fsync(fd) != 0) err = errno;
    if (close(fd) != 0 && !err) err = errno;
    if (!err && kc__fo_rename(tmp, path) != 0) err = errno;
    if (err) unlink(tmp);
  }
  kc__sb_free(&sb);
  return err;
}
