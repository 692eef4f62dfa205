/* rel.c -- the helpers declared in rel.h. */
#include "rel.h"

#include "store.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

bool rel_in_path(const char *prog) {
  const char *path = getenv("PATH");
  if (!path) return false;
  char buf[1024];
  for (const char *p = path; *p;) {
    size_t n = strcspn(p, ":");
    snprintf(buf, sizeof buf, "%.*s/%s", (int)n, p, prog);
    if (n && access(buf, X_OK) == 0) return true;
    p += n + (p[n] == ':');
  }
  return false;
}

const char *rel_cc(void) {
  static const char *cc;
  if (!cc) {
    const char *env = getenv("KC_HOST_CC");
    cc = env && *env ? env : rel_in_path("tcc") ? "tcc" : "cc";
  }
  return cc;
}

void rel_mkdtemp(char *out, size_t len, const char *tag) {
  const char *tmp = getenv("TMPDIR");
  snprintf(out, len, "%s/kc-rel-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", tag);
  if (!mkdtemp(out)) fail_msg("mkdtemp %s: %s", out, strerror(errno));
}

void rel_rmrf(const char *path) {
  struct stat st;
  if (lstat(path, &st) != 0) return;
  if (S_ISDIR(st.st_mode)) {
    DIR *d = opendir(path);
    if (d) {
      for (struct dirent *de; (de = readdir(d));) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        char sub[4096];
        snprintf(sub, sizeof sub, "%s/%s", path, de->d_name);
        rel_rmrf(sub);
      }
      closedir(d);
    }
    rmdir(path);
  } else {
    unlink(path);
  }
}

static void problem(rel_store_check *c, const char *fmt, ...) KCT_PRINTF(2, 3);
static void problem(rel_store_check *c, const char *fmt, ...) {
  if (c->first_problem[0]) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->first_problem, sizeof c->first_problem, fmt, ap);
  va_end(ap);
}

void rel_store_check_dir(const char *root, rel_store_check *c) {
  memset(c, 0, sizeof *c);
  char vdir[4096];
  kc__store_vdir(root, vdir, sizeof vdir);
  kc__store_file *files = NULL;
  size_t n = 0;
  if (kc__store_list(NULL, vdir, &files, &n) != KC_OK) {
    c->damaged = 1;
    problem(c, "cannot list %s", vdir);
    return;
  }
  for (size_t i = 0; i < n; i++) {
    char why[256] = "";
    kc__entry e;
    kc_status st = kc__entry_read(NULL, files[i].path, files[i].key, &e, why, sizeof why);
    if (st == KC_OK) kc__entry_free(NULL, &e);
    else if (st != KC_ENOTFOUND) {
      c->damaged++;
      problem(c, "damaged entry %s: %s", files[i].path, why);
    }
    if (files[i].misplaced) {
      c->misplaced++;
      problem(c, "misplaced entry %s", files[i].path);
    }
    c->entries++;
  }
  kc__store_list_free(NULL, files);
  for (int bucket = 0; bucket < 256; bucket++) {
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/%02x", vdir, bucket);
    DIR *d = opendir(dir);
    if (!d) continue;
    for (struct dirent *de; (de = readdir(d));) {
      size_t nl = strlen(de->d_name);
      if (!strncmp(de->d_name, ".tmp-", 5)) {
        c->temps++;
        problem(c, "temp file left behind: %s/%s", dir, de->d_name);
      } else if (nl > 5 && !strcmp(de->d_name + nl - 5, ".lock")) {
        c->locks++;
        problem(c, "lock file left behind: %s/%s", dir, de->d_name);
      }
    }
    closedir(d);
  }
}

kc_status rel_run(kc_kernel *k, kc_context *ctx, kc_buffer *b, uint32_t n, int32_t *out) {
  kc_dim3 grid = {n, 1, 1}, block = {1, 1, 1};
  kc_arg args[] = {KC_ARG_BUF(b)};
  kc_status st = kc_launch(k, ctx, &grid, &block, args, 1);
  if (st) return st;
  st = kc_context_finish(ctx);
  if (st || !out) return st;
  return kc_buffer_read(b, 0, out, n * sizeof *out);
}

double rel_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

uint64_t rel_env_u64(const char *name, uint64_t def) {
  const char *v = getenv(name);
  if (!v || !*v) return def;
  char *end;
  unsigned long long x = strtoull(v, &end, 10);
  return *end ? def : (uint64_t)x;
}

void rel_summary(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("RELIABILITY: ");
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  fflush(stdout);
}

/* LeakSanitizer, in the ASan build: PoCL (and the LLVM inside it) keep
 * allocations of a kernel build until the process exits, so the first
 * OpenCL compile of a process with a cold PoCL cache reports them as leaks.
 * Third-party code only: nothing of kcache's is suppressed. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libpocl.so\nleak:libLLVM\n"; }

/* ThreadSanitizer: host_link writes the empty-grid hook into the global of
 * a shared object it has just dlopen()ed. When a context reset dlclose()d
 * an earlier object, the new one is often mapped at the same address; the
 * unmapping happens inside ld.so, which TSan does not see, so the new
 * write looks like a race with a write into the old, gone mapping. Only
 * the top frame host_link is suppressed; the engine's own writes to linked
 * objects (ctx_link) and every reader stay checked. */
const char *__tsan_default_suppressions(void);
const char *__tsan_default_suppressions(void) { return "race_top:host_link\n"; }
