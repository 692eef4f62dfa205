/* SPDX-License-Identifier: MIT */
/* rel.c -- the helpers declared in rel.h. */
#include "rel.h"

#include "core/cache_glue.h"

#include <dirent.h>
#include <stdlib.h>

static void problem(rel_store_check *c, const char *fmt, ...) KCT_PRINTF(2, 3);
static void problem(rel_store_check *c, const char *fmt, ...) {
  if (c->first_problem[0]) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->first_problem, sizeof c->first_problem, fmt, ap);
  va_end(ap);
}

/* Where count_aux looks: a bucket directory (.tmp-* and *.lock files, where
 * an earlier kcache put them), v1/locks or v1/tmp (every file). */
typedef enum aux_where { AUX_BUCKET, AUX_LOCKS, AUX_TEMPS } aux_where;

static void count_aux(const char *dir, aux_where where, rel_store_check *c) {
  DIR *d = opendir(dir);
  if (!d) return;
  for (struct dirent *de; (de = readdir(d));) {
    const char *name = de->d_name;
    size_t nl = strlen(name);
    if (!strcmp(name, ".") || !strcmp(name, "..")) continue;
    if (where == AUX_TEMPS || (where == AUX_BUCKET && !strncmp(name, ".tmp-", 5))) {
      c->temps++;
      problem(c, "temp file left behind: %s/%s", dir, name);
    } else if (where == AUX_LOCKS || (nl > 5 && !strcmp(name + nl - 5, ".lock"))) {
      c->locks++;
      problem(c, "lock file left behind: %s/%s", dir, name);
    }
  }
  closedir(d);
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
  kc__store_list_free(NULL, files, n);
  for (int bucket = 0; bucket < 256; bucket++) {
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/%02x", vdir, bucket);
    count_aux(dir, AUX_BUCKET, c);
  }
  char dir[4200];
  snprintf(dir, sizeof dir, "%s/" KC__STORE_LOCKS_DIR, vdir);
  count_aux(dir, AUX_LOCKS, c);
  snprintf(dir, sizeof dir, "%s/" KC__STORE_TMP_DIR, vdir);
  count_aux(dir, AUX_TEMPS, c);
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
