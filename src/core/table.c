/* SPDX-License-Identifier: MIT */
/*
 * table.c -- the function table: names (bindings), their definitions with
 * world ranges, backedges from names to the code instances that looked
 * them up, invalidation, what a definition's text may be and the
 * enumerators it declares, and the world range a new code instance is
 * published with (a kernel's closure is resolve.c's). It calls nothing
 * above it: the files on disk (extfiles.c) and whole source files
 * (source_file.c) use the table, never the other way.
 *
 * Everything here runs under rt->world_lock, and nothing here compiles.
 * The world counter moves only at the end of kc_define/kc_undefine, after
 * every dependent code instance has had its range clipped (release stores),
 * so a reader that sees the new world also sees every clipped range.
 */
#include "core/core.h"
#include "core/lex.h"

#include <stdio.h>
#include <string.h>

/* -------------------------------------------------------------- bindings */

static kc__binding *binding_find(kc_runtime *rt, const char *name, size_t len, uint64_t h) {
  KC__HTAB_FOR(&rt->bindings, h, kc__binding, b, next_in_bucket)
  if (b->hash == h && strlen(b->name) == len && memcmp(b->name, name, len) == 0) return b;
  return NULL;
}

#define binding_hash(b) ((b)->hash)

static kc__binding *binding_get(kc_runtime *rt, const char *name, size_t len) {
  uint64_t h = kc__hash(name, len);
  kc__binding *b = binding_find(rt, name, len, h);
  if (b) return b;
  bool ok;
  kc__htab_reserve(&rt->heap, &rt->bindings, kc__binding, next_in_bucket, binding_hash, 64, &ok);
  if (!ok) return NULL;
  b = kc__calloc(rt, sizeof *b);
  if (!b) return NULL;
  b->name = kc__strndup(rt, name, len);
  if (!b->name) {
    kc__free(rt, b);
    return NULL;
  }
  b->hash = h;
  KC__HTAB_PUT(&rt->bindings, b, h, next_in_bucket);
  return b;
}

static kc__def *visible_def(const kc__binding *b, kc_world w) {
  for (kc__def *d = b->defs; d; d = d->older)
    if (d->min_world <= w && w <= kc__load_relaxed(&d->max_world)) return d;
  return NULL;
}

/* A binding's record of a file on disk (extfiles.c fills it). */
static void extinfo_free(kc_runtime *rt, kc__extinfo *x) {
  if (!x) return;
  kc__filedep_free(&rt->heap, &x->seen);
  kc__free(rt, x->sets);
  kc__free(rt, x->files);
  kc__free(rt, x);
}

void kc__table_free(kc_runtime *rt) {
  KC__HTAB_EACH(&rt->bindings, kc__binding, b, next_in_bucket) {
    for (kc__def *d = b->defs, *older; d; d = older) {
      older = d->older;
      kc__free(rt, d->source);
      kc__free(rt, d);
    }
    kc__free(rt, b->backedges);
    extinfo_free(rt, b->ext);
    kc__free(rt, b->declarers);
    kc__free(rt, b->name);
    kc__free(rt, b);
  }
  KC__HTAB_FREE(&rt->heap, &rt->bindings);
}

/* ------------------------------------------------------------ validation */

static kc_status check_name(const kc_runtime *rt, const char *what, const char *name) {
  if (!name) return kc__err(rt, KC_EINVAL, "%s: name is NULL", what);
  if (kc__is_header_name(name)) return KC_OK;
  if (!kc__is_identifier(name))
    return kc__err(rt, KC_EINVAL, "%s: \"%s\" is not a valid identifier", what, name);
  if (!strncmp(name, "kc_", 3) || !strncmp(name, "KC_", 3))
    return kc__err(rt, KC_EINVAL, "%s: names starting with kc_ or KC_ are reserved (\"%s\")", what, name);
  if (kc__is_keyword(name, strlen(name)))
    return kc__err(rt, KC_EINVAL, "%s: \"%s\" is a keyword or a dialect type", what, name);
  return KC_OK;
}

/* ------------------------------------------- what a definition may be */

/* A definition's text before it enters the table: a function, type or
 * constant must mention its name, a macro must #define it; a header may
 * be anything. A paste kcache cannot resolve is reported (the log, info):
 * code that uses it depends on every name with its prefix. */
typedef struct {
  const char *name;
  bool mentioned;
  const kc__ident *prefix; /* the first unresolved paste */
  bool want_prefix; /* the log would say so (KC_LOG_INFO): scan to the end */
  char prefix_text[64];
} source_ud;

static bool source_ident(void *ud, const kc__ident *id) {
  source_ud *u = ud;
  if (id->kind == KC__ID_NAME && strlen(u->name) == id->len && !memcmp(u->name, id->start, id->len))
    u->mentioned = true;
  if (id->kind == KC__ID_PREFIX && !u->prefix) {
    u->prefix = id;
    snprintf(u->prefix_text, sizeof u->prefix_text, "%.*s", (int)(id->len < 60 ? id->len : 60), id->start);
  }
  return !(u->mentioned && (u->prefix || !u->want_prefix));
}

kc_status kc__check_source(const kc_runtime *rt, const char *name, const char *source, size_t len) {
  if (kc__is_header_name(name)) return KC_OK;
  source_ud u = {name, false, NULL, false, ""};
  u.want_prefix = kc__log_on(rt, KC_LOG_INFO);
  kc__scan_idents(source, len, source_ident, &u);
  if (!u.mentioned)
    return kc__err(rt, KC_EINVAL,
                   "kc_define: the source given for '%s' never mentions '%s' (a function, type or "
                   "constant named '%s', or #define %s)",
                   name, name, name, name);
  if (u.prefix)
    kc__log(rt, KC_LOG_INFO,
            "'%s' pastes a macro parameter into a name (\"%s\" ## ...): kcache cannot know the name, "
            "so code that uses it depends on every definition whose name starts with \"%s\"",
            name, u.prefix_text, u.prefix_text);
  return KC_OK;
}

/* Enumerators: a definition that declares RED in an enum becomes what
 * RED's binding is declared by. Two steps: the bindings first (may fail:
 * nothing has changed yet), then, with the definition in the table, the
 * link and the end of the code that looked RED up (cannot fail). */
typedef struct enum_ud {
  kc_runtime *rt;
  kc__binding *by; /* NULL: make the bindings */
  kc_world w;
  bool ok;
} enum_ud;

/* Whether b lists by as a declarer; else, with room (grow), makes room. */
static bool declarer_room(kc_runtime *rt, kc__binding *b, kc__binding *by, bool grow) {
  for (size_t i = 0; i < b->ndeclarers; i++)
    if (b->declarers[i] == by) return true;
  bool ok = !grow;
  if (grow) KC__GROW(&rt->heap, b->declarers, b->capdeclarers, b->ndeclarers + 1, 2, &ok);
  return ok;
}

static void invalidate_builtin_watchers(kc_runtime *rt, const char *name, kc_world w);

static bool on_enumerator(void *ud, const kc__ident *id) {
  enum_ud *e = ud;
  kc__binding *b = kc__binding_get(e->rt, id->start, id->len); /* the second step: made by the first */
  if (!e->w) return (e->ok = b && (b == e->by || declarer_room(e->rt, b, e->by, true)));
  if (b && b != e->by) {
    bool listed = false;
    for (size_t i = 0; i < b->ndeclarers && !listed; i++) listed = b->declarers[i] == e->by;
    if (!listed) b->declarers[b->ndeclarers++] = e->by; /* room made by the first step */
    kc__binding_invalidate(e->rt, b, e->w);
    if (!listed) invalidate_builtin_watchers(e->rt, b->name, e->w); /* it skipped b as a built-in */
  }
  return true;
}

/* Whether "enum" occurs in text at all (the common case: it does not). */
static bool may_declare(const char *t, size_t len) {
  for (const char *p = t; len >= 4 && (p = memchr(p, 'e', len - 3 - (size_t)(p - t))) != NULL; p++)
    if (!memcmp(p, "enum", 4)) return true;
  return false;
}

bool kc__declare_prepare(kc_runtime *rt, kc__binding *by, const char *source, size_t len) {
  if (!may_declare(source, len)) return true;
  enum_ud e = {rt, by, 0, true};
  kc__scan_enumerators(source, len, on_enumerator, &e);
  return e.ok;
}

void kc__declare_commit(kc_runtime *rt, kc__binding *by, const char *source, size_t len, kc_world w) {
  if (!may_declare(source, len)) return;
  enum_ud e = {rt, by, w, true};
  kc__scan_enumerators(source, len, on_enumerator, &e);
}

/* ------------------------------------------------------ define, undefine */

/* Takes entry pos off b's backedges: the last entry moves into its place
 * (and its edge learns the new index). */
static void backedge_remove(kc__binding *b, uint32_t pos) {
  kc__backedge last = b->backedges[--b->nbackedges];
  if (pos == b->nbackedges) return;
  b->backedges[pos] = last;
  last.edge->bpos = pos;
}

/* A code instance whose range just became finite: onto the list kc_collect
 * looks at. */
static void clipped_push(kc_runtime *rt, kc__ci *ci) {
  ci->next_clipped = rt->clipped;
  rt->clipped = ci;
}

/* Clips every code instance that looked up b (each is valid forever: the
 * list holds no other), so that it ends at world w, and takes it off the
 * backedges of the other names it looked up, which a later redefinition of
 * those would otherwise walk. Cost: the dependents of b and their edges. */
static void invalidate(kc_runtime *rt, kc__binding *b, kc_world w) {
  for (size_t i = 0; i < b->nbackedges; i++) {
    kc__ci *ci = b->backedges[i].ci;
    const kc__edge *self = b->backedges[i].edge;
    kc__store_release(&ci->max_world, w);
    for (uint32_t e = 0; e < ci->nedges; e++)
      if (&ci->edges[e] != self) backedge_remove(ci->edges[e].binding, ci->edges[e].bpos);
    clipped_push(rt, ci);
  }
  kc__fetch_add_relaxed(&rt->n_invalidations, b->nbackedges);
  b->nbackedges = 0;
}

/* -------------------------------------------------------------- watchers */

/* The watcher of a prefix: the binding "#prefix" (no user name starts
 * with '#'), looked up by code that pastes a name it cannot know. buf has
 * room for n + 1 bytes, or is NULL (then one is allocated: NULL when out
 * of memory). */
static kc__binding *watcher(kc_runtime *rt, const char *prefix, size_t n, bool make, char *buf) {
  char stack[128], *b = buf ? buf : n + 1 <= sizeof stack ? stack : kc__alloc(rt, n + 1);
  if (!b) return NULL;
  b[0] = '#';
  memcpy(b + 1, prefix, n);
  kc__binding *w = binding_find(rt, b, n + 1, kc__hash(b, n + 1));
  if (!w && make && (w = binding_get(rt, b, n + 1)) != NULL) rt->nwatchers++;
  if (b != buf && b != stack) kc__free(rt, b);
  return w;
}

/* A language's built-in named name, defined or declared (an enumerator):
 * the code that skipped such names (resolve.c) ends. */
static void invalidate_builtin_watchers(kc_runtime *rt, const char *name, kc_world w) {
  static const uint8_t langs[] = {KC_LANG_OPENCL, KC_LANG_CUDA};
  size_t n = strlen(name);
  for (size_t i = 0; i < sizeof langs; i++) {
    kc__binding *b = kc__is_identifier(name) && kc__lang_builtin(langs[i], name, n)
                         ? kc__lang_watcher(rt, langs[i], false)
                         : NULL;
    if (b) {
      invalidate(rt, b, w);
      b->watch_changed = w + 1;
    }
  }
}

/* A definition of `name` also ends the code that watches a prefix of it.
 * buf: room for strlen(name) + 1 bytes, allocated before anything changed
 * (this cannot fail). */
static void invalidate_watchers(kc_runtime *rt, const char *name, kc_world w, char *buf) {
  if (!rt->nwatchers || kc__is_header_name(name)) return; /* (the common case: no paste) */
  size_t n = strlen(name);
  for (size_t i = 0; i <= n; i++) {
    kc__binding *b = watcher(rt, name, i, false, buf);
    if (b) {
      invalidate(rt, b, w);
      b->watch_changed = w + 1;
    }
  }
  invalidate_builtin_watchers(rt, name, w);
}

kc__binding *kc__lang_watcher(kc_runtime *rt, uint8_t lang, bool make) {
  const char *which = lang == KC_LANG_OPENCL ? "!opencl" : lang == KC_LANG_CUDA ? "!cuda" : NULL;
  char buf[16];
  return which ? watcher(rt, which, strlen(which), make, buf) : NULL;
}

kc__binding *kc__binding_find(kc_runtime *rt, const char *name, size_t len) {
  return binding_find(rt, name, len, kc__hash(name, len));
}

static kc_status change_with(kc_runtime *rt, const char *name, const char *source, uint8_t lang,
                             kc_world *new_world, char *wbuf) {
  const char *what = source ? "kc_define" : "kc_undefine";
  kc_status st = check_name(rt, what, name);
  if (st) return st;
  size_t len = 0;
  uint64_t h = 0;
  if (source) {
    len = strlen(source);
    st = kc__check_source(rt, name, source, len);
    if (st) return st;
    h = kc__hash(source, len);
  }

  kc__lock(&rt->world_lock);
  kc_world w = kc__load_relaxed(&rt->world);
  kc__binding *b = binding_get(rt, name, strlen(name));
  if (!b) {
    kc__unlock(&rt->world_lock);
    return kc__err(rt, KC_ENOMEM, "%s('%s'): out of memory", what, name);
  }
  kc__def *cur = visible_def(b, w);
  if (source && cur && cur->hash == h && cur->len == len && cur->lang == lang &&
      memcmp(cur->source, source, len) == 0) {
    /* identical text: no new world, nothing invalidated */
    kc__unlock(&rt->world_lock);
    if (new_world) *new_world = w;
    return KC_OK;
  }
  if (!source && !cur) {
    kc__unlock(&rt->world_lock);
    return kc__err(rt, KC_ENOTFOUND, "kc_undefine: '%s' has no visible definition", name);
  }
  kc__def *d = NULL;
  if (source) { /* allocate before changing anything: a failure loses nothing */
    d = kc__calloc(rt, sizeof *d);
    char *text = d ? kc__strndup(rt, source, len) : NULL;
    if (!text) {
      kc__free(rt, d);
      kc__unlock(&rt->world_lock);
      return kc__err(rt, KC_ENOMEM, "kc_define('%s'): out of memory", name);
    }
    d->source = text;
    d->len = len;
    d->hash = h;
    d->lang = lang;
    d->binding = b;
    if (!kc__declare_prepare(rt, b, source, len)) {
      kc__free(rt, text);
      kc__free(rt, d);
      kc__unlock(&rt->world_lock);
      return kc__err(rt, KC_ENOMEM, "kc_define('%s'): out of memory", name);
    }
    d->min_world = w + 1;
    atomic_init(&d->max_world, KC_WORLD_FOREVER);
  }
  invalidate(rt, b, w);
  invalidate_watchers(rt, name, w, wbuf);
  kc__def_replace(rt, b, cur, d, w);
  if (d) kc__declare_commit(rt, b, source, len, w);
  kc__fetch_add_relaxed(&rt->n_defines, 1);
  if (d) kc__fetch_add_relaxed(&rt->n_defs, 1);
  kc__world_advance(rt, w);
  kc__unlock(&rt->world_lock);
  if (new_world) *new_world = w + 1;
  return KC_OK;
}

/* change_with, with the watchers' buffer allocated first. */
static kc_status change(kc_runtime *rt, const char *name, const char *source, uint8_t lang,
                        kc_world *new_world) {
  size_t n = name ? strlen(name) + 2 : 0;
  char stack[128], *wbuf = n <= sizeof stack ? stack : kc__alloc(rt, n);
  if (!wbuf)
    return kc__err(rt, KC_ENOMEM, "%s('%s'): out of memory", source ? "kc_define" : "kc_undefine", name);
  kc_status st = change_with(rt, name, source, lang, new_world, wbuf);
  if (wbuf != stack) kc__free(rt, wbuf);
  return st;
}

kc_status kc_define(kc_runtime *rt, const char *name, const char *source, kc_world *new_world) {
  if (!rt) return kc__err(NULL, KC_EINVAL, "kc_define: runtime is NULL");
  if (!source) return kc__err(rt, KC_EINVAL, "kc_define: source is NULL");
  return change(rt, name, source, KC_LANG_DIALECT, new_world);
}

kc_status kc_define_lang(kc_runtime *rt, const char *name, const char *source, kc_language lang,
                         kc_world *new_world) {
  if (!rt) return kc__err(NULL, KC_EINVAL, "kc_define_lang: runtime is NULL");
  if (!source) return kc__err(rt, KC_EINVAL, "kc_define_lang: source is NULL");
  if (!kc_language_name(lang))
    return kc__err(rt, KC_EINVAL, "kc_define_lang: %d is not a kc_language", (int)lang);
  return change(rt, name, source, (uint8_t)lang, new_world);
}

kc_status kc_undefine(kc_runtime *rt, const char *name, kc_world *new_world) {
  if (!rt) return kc__err(NULL, KC_EINVAL, "kc_undefine: runtime is NULL");
  return change(rt, name, NULL, KC_LANG_DIALECT, new_world);
}

/* ------------------------------------------ for kc__define_batch */

void kc__def_replace(kc_runtime *rt, kc__binding *b, kc__def *cur, kc__def *d, kc_world w) {
  if (cur) {
    kc__store_release(&cur->max_world, w);
    cur->next_retired = rt->retired_defs; /* for kc_collect */
    rt->retired_defs = cur;
  }
  if (d) {
    d->older = b->defs;
    if (b->defs) b->defs->newer = d;
    b->defs = d;
  }
}

void kc__world_advance(kc_runtime *rt, kc_world w) {
  kc__store_release(&rt->world, w + 1); /* publish only after every clip */
  /* and for the launch fast path, unless a pin has switched its check off */
  if (!rt->npins) kc__store_release(&rt->fast_world, w + 1);
}

kc__binding *kc__binding_get(kc_runtime *rt, const char *name, size_t len) {
  return binding_get(rt, name, len);
}
void kc__binding_invalidate(kc_runtime *rt, kc__binding *b, kc_world w) { invalidate(rt, b, w); }
kc__def *kc__visible_def(const kc__binding *b, kc_world w) { return visible_def(b, w); }
kc_status kc__check_name(const kc_runtime *rt, const char *what, const char *name) {
  return check_name(rt, what, name);
}
kc__binding *kc__watcher(kc_runtime *rt, const char *prefix, size_t n, bool make) {
  return watcher(rt, prefix, n, make, NULL);
}
void kc__table_clip(kc_runtime *rt, kc__binding *b, kc_world w, char *buf) {
  invalidate(rt, b, w);
  invalidate_watchers(rt, b->name, w, buf);
}

/* --------------------------------------------------------------- publish */

/* The worlds in which lookup (b -> d) made at `world` gives the same answer. */
static void edge_range(const kc__edge *e, kc_world world, kc_world *min, kc_world *max) {
  if (e->binding->watch_changed > world) { /* a watched name changed since the lookup */
    *min = 1;
    *max = world;
    return;
  }
  if (e->def) {
    *min = e->def->min_world;
    *max = kc__load_relaxed(&e->def->max_world);
    return;
  }
  *min = 1;
  *max = KC_WORLD_FOREVER;
  for (const kc__def *d = e->binding->defs; d; d = d->older) {
    kc_world dmax = kc__load_relaxed(&d->max_world);
    if (d->min_world > world) {
      if (d->min_world - 1 < *max) *max = d->min_world - 1;
    } else if (dmax < world) {
      if (dmax + 1 > *min) *min = dmax + 1;
    }
  }
}

static bool add_backedge(kc_runtime *rt, kc__ci *ci, uint32_t edge) {
  kc__binding *b = ci->edges[edge].binding;
  bool ok;
  KC__GROW(&rt->heap, b->backedges, b->capbackedges, b->nbackedges + 1, 4, &ok);
  if (!ok || b->nbackedges >= UINT32_MAX) return false;
  ci->edges[edge].bpos = (uint32_t)b->nbackedges;
  b->backedges[b->nbackedges++] = (kc__backedge){ci, &ci->edges[edge]};
  return true;
}

void kc__publish_range(kc_runtime *rt, kc__ci *ci, kc_world world, int files) {
  /* files it read that cannot be told (files < 0): no world can trust it,
   * but the caller that compiled it runs it once (the empty range) */
  kc_world min = 1, max = files > 0 ? KC_WORLD_FOREVER : files == 0 ? kc__load_relaxed(&rt->world) : 0;
  for (uint32_t i = 0; files >= 0 && i < ci->nedges; i++) {
    kc_world lo, hi;
    edge_range(&ci->edges[i], world, &lo, &hi);
    if (lo > min) min = lo;
    if (hi < max) max = hi;
  }
  if (max == KC_WORLD_FOREVER) {
    for (uint32_t i = 0; i < ci->nedges; i++)
      if (!add_backedge(rt, ci, i)) {
        /* cannot be invalidated later: only trust it up to now, and off
         * the lists it got onto (they hold code valid forever only) */
        while (i--) backedge_remove(ci->edges[i].binding, ci->edges[i].bpos);
        max = kc__load_relaxed(&rt->world);
        break;
      }
  }
  if (max != KC_WORLD_FOREVER) clipped_push(rt, ci);
  kc__store_relaxed(&ci->min_world, min);
  kc__store_release(&ci->max_world, max); /* the range becomes non-empty last */
  /* the head of its specialization's list, which kc_collect rewrites under
   * world_lock too (release: readers see a complete code instance) */
  kc__store_relaxed(&ci->next, kc__load_relaxed(&ci->spec->head));
  kc__store_release(&ci->spec->head, ci);
}
