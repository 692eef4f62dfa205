/* SPDX-License-Identifier: MIT */
/*
 * tools.c -- the host backend's dealings with the system C compiler:
 * whether one is there (KC_HOST_CC through the settings table, in $PATH),
 * running it with a time bound and its output into a log, and reading
 * and writing the files it reads and makes.
 */
#include "backends/host/host.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* -------------------------------------------------------- availability */

bool host_find_in_path(const char *prog, char *out, size_t outlen) {
  size_t plen = strlen(prog);
  if (!out || !outlen) return false;
  out[0] = 0;
  if (strchr(prog, '/')) {
    if (plen >= outlen) return false;
    memcpy(out, prog, plen + 1);
    return access(prog, X_OK) == 0;
  }
  const char *path = getenv("PATH");
  if (!path || !*path) path = "/usr/local/bin:/usr/bin:/bin";
  for (const char *p = path; *p;) {
    const char *e = strchr(p, ':');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    /* DIR/PROG, when it fits (a longer one cannot be run by this path) */
    if (n && n + 1 + plen < outlen) {
      memcpy(out, p, n);
      out[n] = '/';
      memcpy(out + n + 1, prog, plen + 1);
      if (access(out, X_OK) == 0) return true;
    }
    p += n + (e ? 1 : 0);
  }
  out[0] = 0;
  return false;
}

const char *host_unavailable(const kc__bconfig *cfg) {
  static _Thread_local char why[512];
  const char *cc = cfg && cfg->host_cc ? cfg->host_cc : "cc";
  char first[256], path[512];
  snprintf(first, sizeof first, "%.*s", (int)strcspn(cc, " "), cc);
  if (host_find_in_path(first, path, sizeof path)) return NULL;
  snprintf(why, sizeof why, "no C compiler: \"%s\" not found in PATH (install gcc, or set KC_HOST_CC)",
           first);
  return why;
}

/* --------------------------------------------------- running a compiler */

/* Waits for the compiler, pid, until the compile timeout (kc__child_wait:
 * blocked on a pidfd, only this pid reaped, no signal touched, so the
 * program's own children and SIGCHLD are its own and any number of threads
 * wait for their compilers at once); at the timeout its whole process
 * group goes (a hung cc1 or ld, not only the driver). */
static kc_status host_await(host_state *s, pid_t pid, const char *what, int *status) {
  const kc__bsvc *sv = s->sv;
  int pfd = kc__child_pidfd(pid);
  kc__child_end end =
      kc__child_wait(pid, pfd, kc__now_ns() + (uint64_t)s->timeout_ms * 1000000u, true, status);
  int e = errno;
  if (pfd >= 0) close(pfd);
  switch (end) {
  case KC__CHILD_EXITED: return KC_OK;
  case KC__CHILD_KILLED:
    return kc__bs_err(sv, KC_EBACKEND, "the host compiler \"%s\" ran longer than %u ms and was killed", what,
                      s->timeout_ms);
  case KC__CHILD_LOST: /* and pid may be another process's now: never signalled */
    return kc__bs_err(sv, KC_EBACKEND,
                      "the host compiler \"%s\" exited and another waiter of this process reaped it "
                      "(waitpid(-1) of children it did not start)",
                      what);
  default: return kc__bs_err(sv, KC_EBACKEND, "waiting for the host compiler \"%s\": %s", what, strerror(e));
  }
}

kc_status host_run_tool(host_state *s, char *const argv[], char *const envp[], const char *log_path,
                        int *exit_code, int *signal_no) {
  const kc__bsvc *sv = s->sv;
  *exit_code = -1;
  *signal_no = 0;
  posix_spawn_file_actions_t fa;
  if (posix_spawn_file_actions_init(&fa)) return kc__bs_err(sv, KC_ENOMEM, "posix_spawn: out of memory");
  posix_spawn_file_actions_addopen(&fa, 1, log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  /* Its own process group, so that a timeout kills the whole tree (a hung
   * cc1 or ld, not only the driver). */
  posix_spawnattr_t attr;
  if (posix_spawnattr_init(&attr)) {
    posix_spawn_file_actions_destroy(&fa);
    return kc__bs_err(sv, KC_ENOMEM, "posix_spawn: out of memory");
  }
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid;
  int err = posix_spawnp(&pid, argv[0], &fa, &attr, argv, envp ? envp : environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&fa);
  if (err)
    return kc__bs_err(sv, KC_EBACKEND, "cannot run the host compiler \"%s\": %s", argv[0], strerror(err));
  int status;
  kc_status st = host_await(s, pid, argv[0], &status);
  if (st) return st;
  if (WIFEXITED(status)) *exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) *signal_no = WTERMSIG(status);
  return KC_OK;
}

kc_status host_read_file(const kc__bsvc *sv, const char *path, size_t max, bool cut, void **out,
                         size_t *size) {
  *out = NULL;
  *size = 0;
  /* non-blocking: a FIFO where the compiler's file should be would block
   * the open (and the reads) for good; it is refused below */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return kc__bs_err(sv, KC_EIO, "cannot open %s: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return kc__bs_err(sv, KC_EIO, "%s is not a regular file", path);
  }
  if (!cut && (uint64_t)st.st_size > max) { /* (the size may grow meanwhile: the reads count too) */
    close(fd);
    return kc__bs_err(sv, KC_EIO, "%s is larger than %zu bytes", path, max);
  }
  FILE *f = fdopen(fd, "rb");
  if (!f) {
    close(fd);
    return kc__bs_err(sv, KC_ENOMEM, "out of memory reading %s", path);
  }
  kc__sb sb;
  kc__sb_init(&sb, &(sv)->heap);
  char buf[65536];
  size_t n;
  bool over = false;
  while (!over && (n = fread(buf, 1, sizeof buf, f)) > 0) {
    if (n > max - sb.len) { /* more than max: cut there, or refused */
      n = max - sb.len;
      over = true;
    }
    kc__sb_append(&sb, buf, n);
  }
  bool bad = ferror(f);
  fclose(f);
  if (bad || (over && !cut)) {
    kc__sb_free(&sb);
    return bad ? kc__bs_err(sv, KC_EIO, "cannot read %s", path)
               : kc__bs_err(sv, KC_EIO, "%s is larger than %zu bytes", path, max);
  }
  if (over) kc__sb_puts(&sb, "\n[... the rest cut]\n");
  *size = sb.len;
  *out = kc__sb_take(&sb);
  return *out ? KC_OK : kc__bs_err(sv, KC_ENOMEM, "out of memory reading %s", path);
}

kc_status host_write_file(const kc__bsvc *sv, const char *path, const void *data, size_t n) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return kc__bs_err(sv, KC_EIO, "cannot create %s: %s", path, strerror(errno));
  const char *p = data;
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      int e = errno;
      close(fd);
      unlink(path);
      return kc__bs_err(sv, KC_EIO, "cannot write %s: %s", path, strerror(e));
    }
    p += w;
    n -= (size_t)w;
  }
  if (close(fd)) {
    int e = errno;
    unlink(path);
    return kc__bs_err(sv, KC_EIO, "cannot write %s: %s", path, strerror(e));
  }
  return KC_OK;
}

/* ------------------------------------------------- work directories */

/* A compile's work directory is named after the process that made it:
 * kcache-host-NS-PID-START-XXXXXX, NS the pid namespace's inode number (0
 * without /proc), START the process's start time in clock ticks since boot
 * (field 22 of /proc/PID/stat; 0 without /proc). A process killed during a
 * compile leaves its directory; the next host backend to open in the same
 * $TMPDIR removes it (host_workdir_sweep), since pid and start time tell a
 * dead process from a live one that reused its pid. */

/* 1 and *start: pid runs; 0: no such process; -1: cannot tell. */
static int host_proc_start(long pid, unsigned long long *start) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT || errno == ESRCH ? 0 : -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return n < 0 && errno == ESRCH ? 0 : -1;
  buf[n] = 0;
  char *p = strrchr(buf, ')'); /* the command name may hold spaces and ')' */
  if (!p) return -1;
  for (int field = 2; field < 22; field++) { /* p is at the end of field 2 */
    p = strchr(p + 1, ' ');
    if (!p) return -1;
  }
  char *end;
  errno = 0;
  *start = strtoull(p + 1, &end, 10);
  return errno || end == p + 1 ? -1 : 1;
}

/* Which pids a tag's pid means: the machine's boot (its boot_id, so that
 * another machine sharing TMPDIR, or this one after a reboot, never counts
 * as ours) and the pid namespace's inode, folded into one number (FNV-1a
 * of the boot id, xor the inode times a large odd constant). 0 when
 * /proc cannot tell: nothing is swept then. */
static unsigned long long host_pid_ns(void) {
  char link[64], boot[64];
  ssize_t n = readlink("/proc/self/ns/pid", link, sizeof link - 1);
  if (n <= 0) return 0;
  link[n] = 0;
  unsigned long long ino = strncmp(link, "pid:[", 5) ? 0 : strtoull(link + 5, NULL, 10);
  int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
  ssize_t b = fd < 0 ? -1 : read(fd, boot, sizeof boot);
  if (fd >= 0) close(fd);
  if (!ino || b < 16) return 0;
  unsigned long long h = 14695981039346656037ull;
  for (ssize_t i = 0; i < b && boot[i] != '\n'; i++) h = (h ^ (unsigned char)boot[i]) * 1099511628211ull;
  h ^= ino * 0x9E3779B97F4A7C15ull;
  return h ? h : 1;
}

/* This process's tag: NS-PID-START (a forked child has its own). */
static void host_self_tag(unsigned long long *ns, long *pid, unsigned long long *start) {
  *ns = host_pid_ns();
  *pid = (long)getpid();
  if (host_proc_start(*pid, start) != 1) *start = 0;
}

bool host_workdir_make(const host_state *s, char *dir, size_t size) {
  unsigned long long ns, start;
  long pid;
  host_self_tag(&ns, &pid, &start);
  int n = snprintf(dir, size, "%s/kcache-host-%llu-%ld-%llu-XXXXXX", s->dir, ns, pid, start);
  if (n < 0 || (size_t)n >= size) {
    errno = ENAMETOOLONG;
    return false;
  }
  return mkdtemp(dir) != NULL;
}

/* A decimal number of 1 to 20 digits at *p, which moves past it and one
 * '-' after it. */
static bool host_tag_number(const char **p, unsigned long long *v) {
  const char *q = *p;
  unsigned long long x = 0;
  int digits = 0;
  for (; *q >= '0' && *q <= '9'; q++, digits++) {
    unsigned d = (unsigned)(*q - '0');
    if (digits >= 20 || x > (~0ull - d) / 10) return false;
    x = x * 10 + d;
  }
  if (!digits || *q != '-') return false;
  *v = x;
  *p = q + 1;
  return true;
}

/* Whether name is exactly kcache-host-NS-PID-START-XXXXXX (six letters or
 * digits, as mkdtemp makes them). */
static bool host_workdir_parse(const char *name, unsigned long long *ns, long *pid,
                               unsigned long long *start) {
  static const char prefix[] = "kcache-host-";
  if (strncmp(name, prefix, sizeof prefix - 1)) return false;
  const char *p = name + sizeof prefix - 1;
  unsigned long long v;
  if (!host_tag_number(&p, ns) || !host_tag_number(&p, &v) || !host_tag_number(&p, start)) return false;
  if (v == 0 || v > (unsigned long long)INT_MAX) return false;
  *pid = (long)v;
  for (int i = 0; i < 6; i++, p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9'))) return false;
  return *p == 0;
}

/* Whether the process a directory is tagged with has ended: it is gone, or
 * its pid now belongs to a process that started at another time. When in
 * doubt (no /proc, a process of another user's that we cannot read), no. */
static bool host_tag_dead(long pid, unsigned long long start) {
  unsigned long long now;
  int r = host_proc_start(pid, &now);
  if (r == 1) return start != 0 && now != start;
  if (r < 0) return false;
  return kill((pid_t)pid, 0) < 0 && errno == ESRCH;
}

/* Empties and removes dfd/name if it is still the directory lstat saw:
 * never through a symbolic link, never below it (a subdirectory stays, and
 * so does the directory then). */
static bool host_workdir_remove(int dfd, const char *name, const struct stat *seen) {
  int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st;
  if (fstat(fd, &st) || st.st_dev != seen->st_dev || st.st_ino != seen->st_ino) {
    close(fd);
    return false;
  }
  DIR *d = fdopendir(fd);
  if (!d) {
    close(fd);
    return false;
  }
  for (struct dirent *e; (e = readdir(d));)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
      unlinkat(fd, e->d_name, 0); /* a directory: EISDIR */
  closedir(d);
  return unlinkat(dfd, name, AT_REMOVEDIR) == 0;
}

int host_workdir_sweep(const host_state *s) {
  unsigned long long my_ns, my_start, ns, start;
  long my_pid, pid;
  host_self_tag(&my_ns, &my_pid, &my_start);
  if (!my_ns) return 0; /* which machine and namespace we are is unknown: sweep nothing */
  int dfd = open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return 0;
  DIR *d = fdopendir(dfd);
  if (!d) {
    close(dfd);
    return 0;
  }
  int removed = 0;
  uid_t me = geteuid();
  for (struct dirent *e; (e = readdir(d));) {
    if (!host_workdir_parse(e->d_name, &ns, &pid, &start)) continue;
    if (ns != my_ns || (pid == my_pid && start == my_start)) continue; /* another namespace's, or ours */
    struct stat st;
    if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISDIR(st.st_mode) || st.st_uid != me)
      continue;
    if (host_tag_dead(pid, start) && host_workdir_remove(dfd, e->d_name, &st)) removed++;
  }
  closedir(d);
  return removed;
}

/* ---------------------------------------------------- dependency files */

static void deps_put(kc__sb *out, const char *path, size_t n, const char *skip) {
  if (!n || (strlen(skip) == n && !memcmp(path, skip, n))) return;
  kc__sb_append(out, path, n);
  kc__sb_append(out, "", 1);
}

bool host_deps_parse(const char *text, size_t n, bool lines, const char *skip, kc__sb *out) {
  size_t i = 0;
  if (lines) { /* "target: \" then "  path \" a line, the last without " \" */
    while (i < n && text[i] != '\n') i++;
    while (i < n) {
      size_t s = ++i;
      while (i < n && text[i] != '\n') i++;
      size_t e = i;
      while (s < e && (text[s] == ' ' || text[s] == '\t')) s++;
      if (e > s && text[e - 1] == '\\') e--;
      while (e > s && (text[e - 1] == ' ' || text[e - 1] == '\t' || text[e - 1] == '\r')) e--;
      deps_put(out, text + s, e - s, skip);
    }
    return !out->failed;
  }
  /* past the target: the first ':' that a blank or the end follows */
  while (i < n && !(text[i] == ':' && (i + 1 == n || text[i + 1] == ' ' || text[i + 1] == '\t' ||
                                       text[i + 1] == '\n' || text[i + 1] == '\\')))
    i++;
  i++;
  kc__sb tok;
  kc__sb_init(&tok, out->heap);
  for (; i <= n; i++) {
    char c = i < n ? text[i] : '\n';
    if (c == '\\' && i + 1 < n && (text[i + 1] == ' ' || text[i + 1] == '#' || text[i + 1] == ':')) {
      kc__sb_append(&tok, &text[++i], 1); /* an escaped blank, '#' or ':' of a path */
    } else if (c == '\\' && (i + 1 == n || text[i + 1] == '\n' || text[i + 1] == '\r')) {
      /* a line continuation: a blank */
      deps_put(out, tok.buf, tok.len, skip);
      tok.len = 0;
    } else if (c == '$' && i + 1 < n && text[i + 1] == '$') {
      kc__sb_append(&tok, "$", 1);
      i++;
    } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      deps_put(out, tok.buf, tok.len, skip);
      tok.len = 0;
      /* gcc with -MP adds "path:" targets after a blank line: none are
       * written without it, and they would name the same headers */
    } else {
      kc__sb_append(&tok, &c, 1);
    }
  }
  bool ok = !out->failed && !tok.failed;
  kc__sb_free(&tok);
  return ok;
}

void host_log_append(kc__sb *log, const char *text, size_t n, const char *src) {
  const char *slash = strrchr(src, '/');
  size_t dl = slash ? (size_t)(slash - src) + 1 : 0; /* "dir/" */
  for (size_t i = 0; i < n;) {
    if (dl && n - i >= dl && !memcmp(text + i, src, dl)) {
      i += dl;
      continue;
    }
    size_t j = i + 1;
    while (j < n && text[j] != src[0]) j++;
    kc__sb_append(log, text + i, j - i);
    i = j;
  }
}

/* Whether a compiler that failed did so for want of a resource (memory,
 * disk, descriptors, processes) or because it was killed, by what it
 * wrote: that failure is not the source's, and is not remembered. */
bool host_resource_failure(const char *out, size_t n) {
  static const char *const words[] = {"No space left on device",
                                      "Disk quota exceeded",
                                      "Cannot allocate memory",
                                      "out of memory",
                                      "virtual memory exhausted",
                                      "Too many open files",
                                      "Resource temporarily unavailable",
                                      "Killed signal terminated program",
                                      "cannot fork"};
  for (size_t i = 0; i < sizeof words / sizeof *words; i++)
    for (const char *p = out; p && (size_t)(p - out) < n;
         p = memchr(p + 1, words[i][0], n - (size_t)(p - out) - 1))
      if ((size_t)(p - out) + strlen(words[i]) <= n && !memcmp(p, words[i], strlen(words[i]))) return true;
  return false;
}
