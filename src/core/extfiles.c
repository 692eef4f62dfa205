/* SPDX-License-Identifier: MIT */
/*
 * extfiles.c -- files outside the function table that compiles read (headers
 * on disk: #include <x.h> found in /usr/local/include, $CPATH, a -I
 * directory): finding them, recording them with the code instance (path,
 * content hash, stat: base/filedep.h), checking a stored entry's files
 * before it is used, and making them part of the world in memory.
 *
 * Found: a backend that reports_deps tells the paths its compiler read
 * (host: cc -MD); for the others (OpenCL, CUDA, whose compilers tell
 * nothing) kcache follows the #include lines itself, from the translation
 * unit on, each file searched for in the working directory and then in the
 * -I directories of the compile options, in that order (where OpenCL's
 * PoCL and NVRTC look), and records the paths where it looked and found
 * nothing too: a header created there later changes the compile.
 *
 * In the world: each file is a binding named by its absolute path (no
 * name of the table starts with '/'), and each content seen of it a
 * definition; the files a compile read, as a whole, are a file set (below),
 * so a new content ends exactly the code that read the old one, in a new
 * world, like a redefinition. A version is seen by a compile that reads the
 * file, or by kc_refresh, which checks every file that live code read.
 */
#include "core/core.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------- include dirs */

/* The -I directories of options ("-I dir", "-Idir", "--include-path=dir",
 * "--include-path dir"), absolute, after the working directory (".": the
 * one at each compile). */
kc_status kc__ext_setup(kc_runtime *rt) {
  const char *o = rt->compile_options ? rt->compile_options : "";
  size_t cap = 2;
  for (const char *p = o; *p; p++) cap += *p == '-';
  rt->inc_dirs = kc__calloc(rt, cap * sizeof *rt->inc_dirs);
  if (!rt->inc_dirs) return KC_ENOMEM;
  rt->inc_dirs[rt->ninc_dirs++] = kc__strdup(rt, ".");
  bool take_next = false;
  for (const char *p = o; *p;) {
    while (*p == ' ' || *p == '\t' || *p == '\n') p++;
    size_t n = strcspn(p, " \t\n");
    if (!n) break;
    const char *dir = NULL;
    size_t dn = 0;
    if (take_next) {
      dir = p, dn = n, take_next = false;
    } else if (n == 2 && !memcmp(p, "-I", 2)) {
      take_next = true;
    } else if (n > 2 && !memcmp(p, "-I", 2)) {
      dir = p + 2, dn = n - 2;
    } else if (n == 14 && !memcmp(p, "--include-path", 14)) {
      take_next = true;
    } else if (n > 15 && !memcmp(p, "--include-path=", 15)) {
      dir = p + 15, dn = n - 15;
    }
    if (dir && rt->ninc_dirs < cap) {
      char *d = kc__strndup(rt, dir, dn);
      char *abs = d ? kc__abspath(&rt->heap, d) : NULL;
      kc__free(rt, d);
      if (!abs) return KC_ENOMEM;
      rt->inc_dirs[rt->ninc_dirs++] = abs;
    }
    p += n;
  }
  return rt->inc_dirs[0] ? KC_OK : KC_ENOMEM;
}

void kc__ext_free(kc_runtime *rt) {
  for (size_t i = 0; i < rt->ninc_dirs; i++) kc__free(rt, rt->inc_dirs[i]);
  kc__free(rt, rt->inc_dirs);
  kc__free(rt, rt->file_bindings);
}

/* ------------------------------------------------------- a compile's files */

void kc__ci_files_free(kc_runtime *rt, kc__ci *ci) {
  for (uint32_t i = 0; i < ci->nfiles; i++) kc__filedep_free(&rt->heap, &ci->files[i]);
  kc__free(rt, ci->files);
  ci->files = NULL;
  ci->nfiles = 0;
}

/* Adds f (taken over) to ci's files unless its path is there already; false
 * when out of memory or past KC__EXT_MAX (then ci's files are unknown). */
static bool files_add(kc_runtime *rt, kc__ci *ci, kc__filedep *f, size_t *cap) {
  for (uint32_t i = 0; i < ci->nfiles; i++)
    if (!strcmp(ci->files[i].path, f->path)) {
      kc__filedep_free(&rt->heap, f);
      return true;
    }
  bool ok = ci->nfiles < KC__EXT_MAX;
  if (ok) KC__GROW(&rt->heap, ci->files, *cap, (size_t)ci->nfiles + 1, 8, &ok);
  if (!ok) {
    kc__filedep_free(&rt->heap, f);
    ci->files_unknown = true;
    return false;
  }
  ci->files[ci->nfiles++] = *f;
  return true;
}

kc_status kc__ext_from_paths(kc_runtime *rt, kc__ci *ci, const kc__tu_deps *d, uint64_t since_ns) {
  size_t cap = 0;
  if (!d->reported) {
    /* no list (tcc and gcc write none when a compile fails early): a
     * translation unit with no #include lines but its prelude's (the
     * backend's own system headers) read nothing of the caller's */
    size_t pl = rt->be->prelude ? strlen(rt->be->prelude) : 0;
    ci->files_unknown = ci->source && strlen(ci->source) >= pl && kc__tu_includes(ci->source + pl);
    return KC_OK;
  }
  for (size_t at = 0; d->paths.buf && at < d->paths.len;) {
    const char *path = d->paths.buf + at;
    at += strlen(path) + 1;
    kc__filedep f;
    kc__filedep_status fs = kc__filedep_read(&rt->heap, path, since_ns, &f, NULL, NULL);
    if (fs == KC__FILEDEP_NOMEM)
      return kc__err(rt, KC_ENOMEM, "out of memory recording the files a compile read");
    /* the compiler read it, so it was there: gone since, what it read
     * cannot be told */
    if (fs == KC__FILEDEP_UNTRACKABLE || (fs == KC__FILEDEP_OK && (f.flags & KC__FILEDEP_ABSENT))) {
      if (fs == KC__FILEDEP_OK) kc__filedep_free(&rt->heap, &f);
      ci->files_unknown = true;
      continue;
    }
    if (!files_add(rt, ci, &f, &cap) && !ci->files_unknown)
      return kc__err(rt, KC_ENOMEM, "out of memory recording the files a compile read");
  }
  return KC_OK;
}

/* ----------------------------------------------- before and after a compile */

kc_status kc__ext_before(kc_runtime *rt, kc__spec *spec, kc__filedep **out, uint32_t *n) {
  *out = NULL;
  *n = 0;
  const kc__ci *last = NULL;
  for (const kc__ci *c = kc__load_acquire(&spec->head); c && !last; c = kc__load_acquire(&c->next))
    if (c->nfiles) last = c;
  if (!last) return KC_OK;
  kc__filedep *v = kc__calloc(rt, last->nfiles * sizeof *v);
  if (!v) return kc__err(rt, KC_ENOMEM, "out of memory recording the files a compile will read");
  uint32_t k = 0;
  for (uint32_t i = 0; i < last->nfiles; i++) {
    kc__filedep_status fs = kc__filedep_read(&rt->heap, last->files[i].path, 0, &v[k], NULL, NULL);
    if (fs == KC__FILEDEP_NOMEM) {
      kc__ext_before_free(rt, v, k);
      return kc__err(rt, KC_ENOMEM, "out of memory recording the files a compile will read");
    }
    if (fs == KC__FILEDEP_OK) k++; /* (untrackable now: nothing to compare with) */
  }
  *out = v;
  *n = k;
  return KC_OK;
}

/* Whether a and b are records of one state of a file: the same file (or
 * both absent), content and stamps. */
static bool same_state(const kc__filedep *a, const kc__filedep *b) {
  if ((a->flags | b->flags) & KC__FILEDEP_UNKNOWN) return false;
  if ((a->flags ^ b->flags) & KC__FILEDEP_ABSENT) return false;
  if (a->flags & KC__FILEDEP_ABSENT) return true;
  return a->size == b->size && a->hash == b->hash && a->dev == b->dev && a->ino == b->ino &&
         a->mtime_ns == b->mtime_ns && a->ctime_ns == b->ctime_ns;
}

void kc__ext_after(kc__ci *ci, const kc__filedep *before, uint32_t n) {
  for (uint32_t j = 0; j < ci->nfiles; j++)
    for (uint32_t i = 0; i < n; i++)
      if (!strcmp(before[i].path, ci->files[j].path)) {
        if (!same_state(&before[i], &ci->files[j])) ci->files[j].flags |= KC__FILEDEP_UNKNOWN;
        break;
      }
}

void kc__ext_before_free(kc_runtime *rt, kc__filedep *before, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) kc__filedep_free(&rt->heap, &before[i]);
  kc__free(rt, before);
}

/* ------------------------------------------------------------- the scan */

typedef struct scan {
  kc_runtime *rt;
  kc__ci *ci;
  size_t cap;
  /* files found and not yet scanned (an explicit stack: no recursion on
   * how deep headers include each other) */
  struct pending {
    char *text, *dir; /* its content, and its directory (for "quoted" includes) */
  } * todo;
  size_t ntodo, captodo;
  const char *dir; /* of the file being scanned; NULL: the translation unit */
  uint64_t bytes; /* read so far: past KC__EXT_MAX_BYTES the files are unknown */
  kc_status st;
} scan;

/* Looks for one include: each candidate path in turn, the missing ones
 * recorded, the first found recorded and queued for its own includes. */
static bool scan_include(void *ud, const kc__ident *id) {
  scan *sc = ud;
  if (id->kind != KC__ID_INCLUDE && id->kind != KC__ID_SYSINCLUDE) return true;
  kc_runtime *rt = sc->rt;
  if (id->len == 0) { /* computed: no one can tell which file it reads */
    sc->ci->files_unknown = true;
    return true;
  }
  bool quoted = id->kind == KC__ID_INCLUDE;
  size_t first = quoted && sc->dir ? 0 : 1, ndirs = rt->ninc_dirs + 1;
  if (id->start[0] == '/') first = ndirs - 1; /* an absolute name: itself only */
  kc__sb cand;
  kc__sb_init(&cand, &rt->heap);
  for (size_t i = first; i < ndirs && !sc->st; i++) {
    cand.len = 0;
    const char *dir = id->start[0] == '/' ? "" : i == 0 ? sc->dir : rt->inc_dirs[i - 1];
    if (!strcmp(dir, ".")) dir = ""; /* the working directory: kc__abspath's */
    kc__sb_printf(&cand, "%s%s%.*s", dir, *dir ? "/" : "", (int)id->len, id->start);
    if (cand.failed) {
      sc->st = kc__err(rt, KC_ENOMEM, "out of memory following #include lines");
      break;
    }
    kc__filedep f;
    char *text = NULL;
    size_t n;
    kc__filedep_status fs = kc__filedep_read(&rt->heap, cand.buf, 0, &f, &text, &n);
    if (fs == KC__FILEDEP_NOMEM) {
      sc->st = kc__err(rt, KC_ENOMEM, "out of memory following #include lines");
      break;
    }
    if (fs == KC__FILEDEP_UNTRACKABLE) { /* the compiler would hang on a FIFO, or fail: not run */
      int e = errno;
      sc->st = kc__err(rt, KC_ECOMPILE,
                       "compiling '%s': #include <%.*s> finds %s, which %s: kcache does not let the "
                       "compiler read it",
                       sc->ci->spec->name, (int)id->len, id->start, cand.buf,
                       e == KC__ENOTREG ? "is not a regular file (a directory, FIFO or device)"
                       : e == EFBIG     ? "is larger than 64 MiB"
                                        : strerror(e));
      sc->ci->files_unknown = true;
      break;
    }
    bool absent = f.flags & KC__FILEDEP_ABSENT;
    if ((sc->bytes += f.size) > KC__EXT_MAX_BYTES) sc->ci->files_unknown = true;
    char *fdir = absent ? NULL : kc__strdup(rt, f.path);
    if (fdir) *strrchr(fdir, '/') = 0;
    bool seen = false;
    for (uint32_t j = 0; j < sc->ci->nfiles && !seen; j++) seen = !strcmp(sc->ci->files[j].path, f.path);
    bool ok = files_add(rt, sc->ci, &f, &sc->cap) && (absent || fdir); /* fdir: its includes are followed */
    if (!absent && ok && !seen) {
      KC__GROW(&rt->heap, sc->todo, sc->captodo, sc->ntodo + 1, 8, &ok);
      if (ok && fdir) {
        sc->todo[sc->ntodo++] = (struct pending){text, fdir};
        text = fdir = NULL;
      }
    }
    kc__free(rt, text);
    kc__free(rt, fdir);
    if (!ok && !sc->ci->files_unknown)
      sc->st = kc__err(rt, KC_ENOMEM, "out of memory following #include lines");
    if (!absent || sc->ci->files_unknown) break;
  }
  kc__sb_free(&cand);
  return !sc->st;
}

kc_status kc__ext_scan(kc_runtime *rt, kc__ci *ci, const char *text, size_t len) {
  scan sc = {.rt = rt, .ci = ci};
  kc__scan_idents(text, len, scan_include, &sc);
  while (!sc.st && sc.ntodo && !ci->files_unknown) {
    struct pending p = sc.todo[--sc.ntodo];
    sc.dir = p.dir;
    kc__scan_idents(p.text, strlen(p.text), scan_include, &sc);
    kc__free(rt, p.text);
    kc__free(rt, p.dir);
  }
  for (size_t i = 0; i < sc.ntodo; i++) {
    kc__free(rt, sc.todo[i].text);
    kc__free(rt, sc.todo[i].dir);
  }
  kc__free(rt, sc.todo);
  return sc.st;
}

bool kc__tu_includes(const char *text) {
  for (const char *p = strstr(text, "include"); p; p = strstr(p + 1, "include")) {
    const char *q = p;
    while (q > text && (q[-1] == ' ' || q[-1] == '\t')) q--;
    if (q > text && q[-1] == '#') return true;
  }
  return false;
}

/* --------------------------------------------------- stored entries' files */

bool kc__ext_same(const kc__filedep *files, uint32_t n) {
  for (uint32_t i = 0; i < n; i++)
    if (!kc__filedep_same(&files[i])) return false;
  return true;
}

kc_status kc__ext_copy(kc_runtime *rt, kc__ci *ci, const kc__filedep *files, uint32_t n, uint64_t begin_ns,
                       uint64_t end_ns) {
  kc__ci_files_free(rt, ci);
  if (!n) return KC_OK;
  ci->files = kc__calloc(rt, n * sizeof *ci->files);
  if (!ci->files) return KC_ENOMEM;
  for (uint32_t i = 0; i < n; i++) {
    ci->files[i] = files[i];
    ci->files[i].read_begin_ns = begin_ns;
    ci->files[i].read_end_ns = end_ns;
    ci->files[i].path = kc__strdup(rt, files[i].path);
    ci->nfiles = i + 1;
    if (!ci->files[i].path) return KC_ENOMEM;
  }
  return KC_OK;
}

bool kc__ext_storable(const kc__ci *ci) {
  if (ci->files_unknown) return false;
  for (uint32_t i = 0; i < ci->nfiles; i++)
    if (ci->files[i].flags & KC__FILEDEP_UNKNOWN) return false;
  return true;
}

/* ----------------------------------------------------------- in the world
 *
 * Every file is a binding (named by its path) whose definitions are the
 * contents seen of it. A code instance does not get an edge to each file
 * (a host kernel reads 30 system headers through the prelude alone): its
 * files as a whole are a file set, a binding named by a hash of their
 * paths and shared by every compile that read the same paths; a set's
 * definitions are the combinations of its files' versions, and a code
 * instance gets one edge, to its set's version. A file's new version gives
 * every set that holds it a new version in the same world, which ends
 * exactly the code that read the old one. */

static bool def_matches(const kc__def *d, const kc__filedep *f) {
  if ((d->file_flags | f->flags) & KC__FILEDEP_UNKNOWN) return false;
  if ((d->file_flags ^ f->flags) & KC__FILEDEP_ABSENT) return false;
  return (f->flags & KC__FILEDEP_ABSENT) || (d->hash == f->hash && d->len == f->size);
}

/* The binding of a file's path, with room for what is seen of it; NULL
 * when out of memory. Under world_lock. */
static kc__binding *file_binding(kc_runtime *rt, const char *path) {
  kc__binding *b = kc__binding_get(rt, path, strlen(path));
  if (!b || b->ext) return b;
  bool ok;
  KC__GROW(&rt->heap, rt->file_bindings, rt->capfile_bindings, rt->nfile_bindings + 1, 16, &ok);
  kc__extinfo *x = ok ? kc__calloc(rt, sizeof *x) : NULL;
  if (!x || !(x->seen.path = kc__strdup(rt, path))) {
    kc__free(rt, x);
    return NULL;
  }
  x->seen.flags = KC__FILEDEP_UNKNOWN; /* nothing seen yet */
  b->ext = x;
  rt->file_bindings[rt->nfile_bindings++] = b;
  kc__fetch_add_relaxed(&rt->n_files, 1);
  return b;
}

/* A new definition of b (a file: f its content; a set: f NULL) from world
 * w + 1 on (from world `first` if b has none yet), the code that looked up
 * the old one ended at w. NULL when out of memory. Under world_lock. */
static kc__def *new_version(kc_runtime *rt, kc__binding *b, const kc__filedep *f, kc_world w,
                            kc_world first) {
  kc__def *cur = kc__visible_def(b, w), *d = kc__calloc(rt, sizeof *d);
  if (!d) return NULL;
  d->binding = b;
  if (f) {
    d->len = (size_t)f->size;
    d->hash = f->hash;
    d->file_flags = (uint8_t)(f->flags & (KC__FILEDEP_ABSENT | KC__FILEDEP_UNKNOWN));
  }
  d->min_world = cur ? w + 1 : first;
  atomic_init(&d->max_world, KC_WORLD_FOREVER);
  if (cur) kc__binding_invalidate(rt, b, w);
  kc__def_replace(rt, b, cur, d, w); /* (not in kc_stats.definitions: the caller's only) */
  return d;
}

/* File b's new content f, seen in world w: its version, and one for every
 * set that holds it. False when out of memory. Under world_lock. */
static bool file_changed(kc_runtime *rt, kc__binding *b, const kc__filedep *f, kc_world w) {
  if (!new_version(rt, b, f, w, 1)) return false;
  kc__fetch_add_relaxed(&rt->n_files_changed, 1);
  kc__extinfo *x = b->ext;
  char *path = x->seen.path;
  x->seen = *f;
  x->seen.path = path;
  for (size_t i = 0; i < x->nsets; i++) {
    kc__binding *set = x->sets[i];
    /* one version per world: another of its files changed in this same
     * step (a refresh or a compile that saw two edits) and made it already;
     * a second would retire the old version twice (freed twice) */
    if (set->defs && set->defs->min_world == w + 1) continue;
    /* a set no code has read yet (made by the compile that saw this
     * content) starts here too: before w + 1 the world holds the old
     * content, and code compiled from the new one must not serve there */
    if (!new_version(rt, set, NULL, w, w + 1)) return false;
  }
  return true;
}

static int by_path(const void *a, const void *b) {
  return strcmp((*(const kc__filedep *const *)a)->path, (*(const kc__filedep *const *)b)->path);
}

/* The set of the n files (by path), made if new: its binding, with its
 * files' bindings. NULL when out of memory. Under world_lock. */
static kc__binding *file_set(kc_runtime *rt, const kc__filedep *const *f, uint32_t n) {
  uint64_t h = 0x9E3779B97F4A7C15ull;
  for (uint32_t i = 0; i < n; i++) h = (h ^ kc__hash(f[i]->path, strlen(f[i]->path) + 1)) * 0x100000001B3ull;
  for (unsigned k = 0;; k++) { /* another set with the hash: the next name */
    char name[48];
    snprintf(name, sizeof name, "<files %016llx %u>", (unsigned long long)h, k);
    kc__binding *b = kc__binding_get(rt, name, strlen(name));
    if (!b) return NULL;
    kc__extinfo *x = b->ext;
    if (x) {
      bool same = x->nfiles == n;
      for (uint32_t i = 0; same && i < n; i++) same = !strcmp(x->files[i]->name, f[i]->path);
      if (same) return b;
      continue;
    }
    x = kc__calloc(rt, sizeof *x);
    if (!x || !(x->files = kc__calloc(rt, n * sizeof *x->files))) {
      kc__free(rt, x);
      return NULL;
    }
    for (uint32_t i = 0; i < n; i++) {
      kc__binding *fb = file_binding(rt, f[i]->path);
      bool ok = fb != NULL;
      if (ok) KC__GROW(&rt->heap, fb->ext->sets, fb->ext->capsets, fb->ext->nsets + 1, 4, &ok);
      if (!ok) { /* the files so far know the set: it stays, with those */
        x->nfiles = i;
        b->ext = x;
        return NULL;
      }
      fb->ext->sets[fb->ext->nsets++] = b;
      x->files[i] = fb;
    }
    x->nfiles = n;
    b->ext = x;
    return b;
  }
}

int kc__ext_observe(kc_runtime *rt, kc__ci *ci) {
  uint32_t n = ci->nfiles;
  if (!kc__ext_storable(ci)) return -1; /* (the versions it saw would mean nothing) */
  if (!n) return 1;
  const kc__filedep **f = kc__alloc(rt, n * sizeof *f);
  kc__edge *e = kc__realloc(rt, ci->edges, ((size_t)ci->nedges + 1) * sizeof *e);
  if (e) ci->edges = e;
  if (!f || !e) {
    kc__free(rt, f);
    return 0;
  }
  for (uint32_t i = 0; i < ci->nfiles; i++) f[i] = &ci->files[i];
  qsort(f, n, sizeof *f, by_path);
  kc_world w = kc__load_relaxed(&rt->world);
  kc__binding *set = file_set(rt, f, n);
  bool moved = false, ok = set != NULL;
  /* each file as this compile saw it, against what the world holds of it:
   * the same content, or a newer one (a new world for the sets that hold
   * the file); a content read before the world's (a kc_refresh or another
   * compile saw a later one meanwhile) is one no world from now on holds:
   * the code serves the launch that compiled it only */
  kc_world since = 1;
  for (uint32_t i = 0; ok && i < n; i++) {
    kc__binding *fb = set->ext->files[i];
    kc__def *d = kc__visible_def(fb, w);
    /* read before a kc_refresh began: still what is on disk? (the caller
     * of that refresh expects no older content after it) */
    bool stale = f[i]->read_begin_ns <= rt->refresh_ns && !kc__filedep_same(f[i]);
    if (!stale && d && def_matches(d, f[i])) {
      if (d->min_world > since) since = d->min_world;
      continue;
    }
    if (stale || (d && f[i]->read_begin_ns <= fb->ext->seen.read_end_ns)) {
      kc__free(rt, f);
      if (moved) kc__world_advance(rt, w);
      return -1;
    }
    ok = d ? file_changed(rt, fb, f[i], w) : new_version(rt, fb, f[i], w, 1) != NULL;
    if (d) moved = true;
    if (!d && ok) { /* first sight: what was seen is this */
      char *path = fb->ext->seen.path;
      fb->ext->seen = *f[i];
      fb->ext->seen.path = path;
    }
  }
  kc__def *sd = ok ? kc__visible_def(set, moved ? w + 1 : w) : NULL;
  /* a new set: its first version from when its files' versions all hold */
  if (ok && !sd) sd = new_version(rt, set, NULL, w, moved ? w + 1 : since);
  if (moved) kc__world_advance(rt, w);
  kc__free(rt, f);
  if (!sd) return 0;
  ci->edges[ci->nedges++] = (kc__edge){set, sd, 0, false};
  return 1;
}

/* ------------------------------------------------------------ kc_refresh */

kc_status kc_refresh(kc_runtime *rt, size_t *changed, kc_world *new_world) {
  if (changed) *changed = 0;
  if (!rt) return kc__err(NULL, KC_EINVAL, "kc_refresh: runtime is NULL");
  /* what live code read, copied under the lock and looked at outside it */
  kc__lock(&rt->world_lock);
  rt->refresh_ns = kc__now_ns();
  size_t n = 0, cap = rt->nfile_bindings ? rt->nfile_bindings : 1;
  kc__filedep *seen = kc__calloc(rt, cap * sizeof *seen), *now = kc__calloc(rt, cap * sizeof *now);
  kc__binding **bs = kc__calloc(rt, cap * sizeof *bs);
  kc_status st = seen && now && bs ? KC_OK : KC_ENOMEM;
  for (size_t i = 0; !st && i < rt->nfile_bindings; i++) {
    kc__binding *b = rt->file_bindings[i];
    bool live = false; /* a set of it serves code valid from now on */
    for (size_t j = 0; j < b->ext->nsets && !live; j++) live = b->ext->sets[j]->nbackedges > 0;
    if (!live) continue;
    seen[n] = b->ext->seen;
    if (!(seen[n].path = kc__strdup(rt, b->ext->seen.path))) st = KC_ENOMEM;
    bs[n++] = b;
  }
  kc__unlock(&rt->world_lock);
  /* each one's state now; now[i].path set: it changed */
  for (size_t i = 0; !st && i < n; i++) {
    uint64_t t0 = kc__now_ns();
    if (!kc__filedep_same(&seen[i])) {
      kc__filedep_status fs = kc__filedep_read(&rt->heap, seen[i].path, 0, &now[i], NULL, NULL);
      if (fs == KC__FILEDEP_NOMEM) st = KC_ENOMEM;
      if (fs != KC__FILEDEP_OK) /* can't be told: changed */
        now[i] =
            (kc__filedep){.flags = KC__FILEDEP_UNKNOWN, .read_begin_ns = t0, .read_end_ns = kc__now_ns()};
      kc__filedep_free(&rt->heap, &now[i]);
      now[i].path = seen[i].path; /* borrowed */
    }
  }
  size_t moved_n = 0;
  kc__lock(&rt->world_lock);
  kc_world w = kc__load_relaxed(&rt->world);
  for (size_t i = 0; !st && i < n; i++) {
    if (!now[i].path) continue;
    kc__def *cur = kc__visible_def(bs[i], w);
    if (cur && def_matches(cur, &now[i])) continue; /* a compile saw it meanwhile */
    if (now[i].read_begin_ns <= bs[i]->ext->seen.read_end_ns) continue; /* and a later one than this */
    if (!file_changed(rt, bs[i], &now[i], w)) st = KC_ENOMEM;
    moved_n++;
  }
  if (moved_n) kc__world_advance(rt, w);
  if (new_world) *new_world = kc__load_relaxed(&rt->world);
  kc__unlock(&rt->world_lock);
  for (size_t i = 0; seen && i < n; i++) kc__filedep_free(&rt->heap, &seen[i]);
  kc__free(rt, seen);
  kc__free(rt, bs);
  kc__free(rt, now);
  if (changed) *changed = moved_n;
  return st ? kc__err(rt, st, "kc_refresh: out of memory") : KC_OK;
}
