/* SPDX-License-Identifier: MIT */
/*
 * cache/conf.c -- the store's configuration file, ROOT/kcache.conf:
 * settings kept with the store, as ccache keeps ccache.conf in its
 * directory (today one: max_size, which `kcache -M SIZE` writes and every
 * runtime on the store reads; the environment wins over it). Lines are
 * "key = value"; blank lines and lines starting with '#' are kept as they
 * are; an unknown key is kept and ignored. A file that another user owns,
 * or that others may write, is not read (what it says could shrink the
 * store to nothing), as the store's entries are not (trust.c).
 */
#include "cache/dir.h"

#include "base/safeopen.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CONF_MAX 65536 /* bytes: a larger file is not a configuration */

/* The file's text (NUL-terminated, malloc'ed) into *out; 0, or errno
 * (ENOENT: there is none; EPERM: it is not to be trusted). */
static int conf_read(const char *root, char **out) {
  *out = NULL;
  char path[4096];
  if (snprintf(path, sizeof path, "%s/" KC__STORE_CONF, root) >= (int)sizeof path) return ENAMETOOLONG;
  int fd = kc__open_safe(path, O_RDONLY, 0, false);
  if (fd < 0) return errno == ENOTDIR ? ENOENT : errno;
  struct stat st;
  int err = 0;
  if (fstat(fd, &st) != 0) err = errno;
  else if (!S_ISREG(st.st_mode) || st.st_size > CONF_MAX) err = EFBIG;
  else if ((st.st_uid != geteuid() && st.st_uid != 0) || (st.st_mode & S_IWOTH)) err = EPERM;
  char *text = err ? NULL : malloc((size_t)st.st_size + 1);
  if (!err && !text) err = ENOMEM;
  size_t got = 0;
  while (!err && got < (size_t)st.st_size) {
    ssize_t r = read(fd, text + got, (size_t)st.st_size - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += (size_t)r;
  }
  close(fd);
  if (err) {
    free(text);
    return err;
  }
  text[got] = 0;
  *out = text;
  return 0;
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
  free(text);
  return v ? 0 : ENOENT;
}

int kc__store_conf_set(const char *root, const char *key, const char *val) {
  char *text = NULL;
  int err = conf_read(root, &text);
  if (err && err != ENOENT) return err;
  char path[4096], tmp[4200];
  if (snprintf(path, sizeof path, "%s/" KC__STORE_CONF, root) >= (int)sizeof path) {
    free(text);
    return ENAMETOOLONG;
  }
  snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
  const char *line = NULL, *next = NULL;
  size_t n;
  const char *old = text ? find_key(text, key, &n, &line, &next) : NULL;
  FILE *f = NULL;
  int fd = kc__open_safe(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644, false);
  if (fd >= 0 && !(f = fdopen(fd, "w"))) close(fd);
  if (!f) err = errno;
  if (f) {
    if (!text) fputs("# kcache's settings for this store (kcache -p shows them; the environment wins)\n", f);
    if (old) fwrite(text, 1, (size_t)(line - text), f);
    else if (text) fputs(text, f);
    if (text && !old && *text && text[strlen(text) - 1] != '\n') fputc('\n', f);
    fprintf(f, "%s = %s\n", key, val);
    if (old) fputs(next, f);
    err = ferror(f) ? EIO : 0;
    if (fflush(f) != 0 || fsync(fileno(f)) != 0) err = err ? err : errno;
    if (fclose(f) != 0 && !err) err = errno;
    if (!err && rename(tmp, path) != 0) err = errno;
    if (err) unlink(tmp);
  }
  free(text);
  return err;
}
