/* SPDX-License-Identifier: MIT */
/*
 * resolve.c -- a kernel's closure as of one world: the definitions it
 * reaches (callees first, the entry last) and every lookup it made on the
 * way (its edges), which decide the code instance's world range and the
 * backedges that end it.
 *
 * Every identifier a definition's text mentions is a lookup, whether the
 * table defines it or not, in call position or not, on a preprocessor line
 * (#ifdef X, defined(X), #if X > 2, a macro's body) or not: a name that is
 * absent now and defined later changes what the text means, exactly like a
 * redefinition. C keywords, the dialect's KC_ and kc_ names and the
 * specialization's own keys are not lookups; nor is a built-in of a native
 * definition's language (langs.c) that the table never defined: that
 * definition looks up the language's watcher instead. An identifier that is only a
 * local variable costs an edge (a later definition of that name recompiles
 * needlessly); it can never cost a stale result.
 *
 * The walk is iterative (an explicit stack of frames, each definition
 * scanned once when its frame is pushed), so the depth of a chain of
 * definitions is never C stack depth; a definition's visiting state and a
 * binding's edge index are stamped with the walk's number, so every check
 * is O(1). Runs under rt->world_lock.
 */
#include "core/core.h"

#include <stdio.h>
#include <string.h>

enum { ON_STACK = 1, DONE = 2 };

typedef struct frame {
  kc__def *def;
  size_t kids; /* its children (defs to visit, in order of mention) start here in walk.kids */
  size_t next; /* the next of them to visit */
} frame;

typedef struct walk {
  kc_runtime *rt;
  kc_world world;
  const kc__spec *spec;
  kc__closure *out;
  uint64_t stamp; /* this walk's number (rt->walk_stamp) */
  size_t capdefs, capedges;
  frame *stack; /* the path from the entry to the definition being scanned */
  size_t depth, capstack;
  kc__def **kids; /* the children of every frame on the stack, frame after frame */
  size_t nkids, capkids;
  /* while scanning one definition */
  kc__def *current;
  bool seen_self;
  kc_status st;
} walk;

static bool oom(walk *wk) {
  wk->st = kc__err(wk->rt, KC_ENOMEM, "out of memory");
  return false;
}

/* The edge of a lookup of b that found d (NULL: nothing): one per binding
 * per walk; `call` is kept if any mention was a call. */
static bool add_edge(walk *wk, kc__binding *b, kc__def *d, bool call) {
  kc__closure *c = wk->out;
  if (b->walk_stamp == wk->stamp) {
    c->edges[b->walk_edge].call |= call;
    return true;
  }
  bool ok;
  KC__GROW(&wk->rt->heap, c->edges, wk->capedges, (size_t)c->nedges + 1, 16, &ok);
  if (!ok || c->nedges == UINT32_MAX) return oom(wk);
  b->walk_stamp = wk->stamp;
  b->walk_edge = c->nedges;
  c->edges[c->nedges++] = (kc__edge){b, d, 0, call};
  return true;
}

/* d is to be visited after the current definition's scan. */
static bool add_kid(walk *wk, kc__def *d) {
  bool ok;
  KC__GROW(&wk->rt->heap, wk->kids, wk->capkids, wk->nkids + 1, 16, &ok);
  if (!ok) return oom(wk);
  wk->kids[wk->nkids++] = d;
  return true;
}

static bool on_stack(const walk *wk, const kc__def *d) {
  return d && d->walk_stamp == wk->stamp && d->walk_state == ON_STACK;
}

/* The lookup of b: its edge, and its visible definition to visit. */
static bool look_up(walk *wk, kc__binding *b, bool call) {
  kc__def *d = kc__visible_def(b, wk->world);
  return add_edge(wk, b, d, call) && (!d || add_kid(wk, d));
}

static bool is_spec_key(const kc__spec *spec, const char *s, size_t n) {
  if (!spec || !spec->params) return false;
  for (const char *q = spec->params; *q;) {
    const char *eq = strchr(q, '=');
    if (!eq) break;
    if ((size_t)(eq - q) == n && memcmp(q, s, n) == 0) return true;
    const char *next = strchr(eq, ',');
    if (!next) break;
    q = next + 1;
  }
  return false;
}

/* #include "name.h" (from the table, or refused) and <name.h> (from the
 * table if it has it, else the compiler's own). */
static bool visit_include(walk *wk, const kc__ident *id) {
  const char *from = wk->current->binding->name;
  bool quoted = id->kind == KC__ID_INCLUDE;
  char name[256];
  if (id->len == 0) {
    wk->st = kc__err(wk->rt, KC_EINVAL,
                     "'%s' has a computed or malformed #include: kcache cannot know which header it "
                     "names (write #include \"name.h\" with a header defined in kcache)",
                     from);
    return false;
  }
  snprintf(name, sizeof name, "%.*s", (int)id->len, id->start);
  if (id->len >= sizeof name || !kc__is_header_name(name)) {
    if (!quoted) return true; /* <CL/cl.h>-like names kcache cannot hold: the compiler's */
    wk->st = kc__err(wk->rt, KC_EINVAL,
                     "'%s' includes \"%.*s\", which is no header name kcache can hold (a relative "
                     "name such as \"dir/name.h\")",
                     from, (int)id->len, id->start);
    return false;
  }
  kc__binding *b = kc__binding_get(wk->rt, name, id->len);
  if (!b) return oom(wk);
  if (!look_up(wk, b, false)) return false;
  if (quoted && !kc__visible_def(b, wk->world)) {
    wk->st = kc__err(wk->rt, KC_ENOTFOUND,
                     "'%s' includes \"%s\", which is not defined in kcache (world %llu): define it with "
                     "kc_define(rt, \"%s\", text). Quoted includes name headers in kcache; a header on "
                     "disk is included with <...> (kcache records the files the compiler reads)",
                     from, name, (unsigned long long)wk->world, name);
    return false;
  }
  return true;
}

typedef struct declares_ud {
  const char *name;
  bool found;
} declares_ud;

static bool declares(void *ud, const kc__ident *id) {
  declares_ud *d = ud;
  d->found = strlen(d->name) == id->len && !memcmp(d->name, id->start, id->len);
  return !d->found;
}

/* An enumerator (b, undefined itself, already an edge): the definitions of
 * its declarers that declare it at this world, looked up; and an edge on
 * every declarer, whatever it holds here (none, or a text without b): its
 * definition at another world may declare b, so this lookup's answer
 * holds only where theirs do. */
static bool visit_enumerator(walk *wk, kc__binding *b) {
  for (size_t i = 0; i < b->ndeclarers; i++) {
    kc__binding *by = b->declarers[i];
    kc__def *d = kc__visible_def(by, wk->world);
    if (d && on_stack(wk, d)) continue; /* the enum being scanned: its own edge stands */
    declares_ud u = {b->name, false};
    if (d) kc__scan_enumerators(d->source, d->len, declares, &u);
    if (!(u.found ? look_up(wk, by, false) : add_edge(wk, by, d, false))) return false;
  }
  return true;
}

/* A pasted name known only by its prefix: the watcher of the prefix, and
 * every visible definition whose name starts with it. */
static bool visit_prefix(walk *wk, const kc__ident *id) {
  kc_runtime *rt = wk->rt;
  kc__binding *w = kc__watcher(rt, id->start, id->len, true), **found = NULL;
  size_t n = 0, cap = 0;
  bool ok = w && add_edge(wk, w, NULL, false);
  if (!w) oom(wk);
  KC__HTAB_EACH(&rt->bindings, kc__binding, b, next_in_bucket) {
    if (!ok) break;
    kc__def *d;
    if (strncmp(b->name, id->start, id->len) || !kc__is_identifier(b->name) ||
        !(d = kc__visible_def(b, wk->world)) || on_stack(wk, d))
      continue;
    KC__GROW(&rt->heap, found, cap, n + 1, 8, &ok);
    if (ok) found[n++] = b;
    else oom(wk);
  }
  for (size_t i = 0; ok && i < n; i++) ok = look_up(wk, found[i], false);
  kc__free(rt, found);
  return ok;
}

static bool is_self(const walk *wk, const char *s, size_t n) {
  const char *self = wk->current->binding->name;
  return strlen(self) == n && memcmp(s, self, n) == 0;
}

/* One identifier of the definition being scanned. */
static bool visit_ident(void *ud, const kc__ident *id) {
  walk *wk = ud;
  if (id->kind == KC__ID_PREFIX) return visit_prefix(wk, id);
  if (id->kind != KC__ID_NAME) return visit_include(wk, id);
  const char *s = id->start;
  size_t n = id->len;
  if (is_self(wk, s, n)) {
    /* its declarator, or a type naming itself (struct P ... P); in CUDA C++
     * also one overload calling another of the one definition of their
     * name (source_file.c), which CUDA compiles as recursion too */
    if (!wk->seen_self || !id->call || wk->current->lang == KC_LANG_CUDA) {
      wk->seen_self = true;
      return true;
    }
    wk->st = kc__err(wk->rt, KC_ERECURSION, "'%s' calls itself; recursion is not supported by GPU backends",
                     wk->current->binding->name);
    return false;
  }
  if (kc__is_keyword(s, n) || (n > 3 && (!memcmp(s, "kc_", 3) || !memcmp(s, "KC_", 3))) ||
      is_spec_key(wk->spec, s, n))
    return true;
  /* a native definition's built-in (get_global_id, threadIdx) that the
   * table does not define at this world: no lookup of its own, but one on
   * the language's watcher, which a definition of any built-in name ends.
   * At this world, not ever: the closure (and the status of a failed
   * compile, which names the undefined names it looked up) is the world's
   * alone, whatever the table held before (the oracle found a name once
   * defined, then undefined, looked up where a cold compile did not) */
  uint8_t lang = wk->current->lang;
  if (lang && kc__lang_builtin(lang, s, n)) {
    /* a name some enum has declared (at any world) is looked up as an
     * enumerator below: an enum ON { ON } or { x } in the table is found */
    kc__binding *known = kc__binding_find(wk->rt, s, n);
    if (!known || (!kc__visible_def(known, wk->world) && !known->ndeclarers)) {
      kc__binding *w = kc__lang_watcher(wk->rt, lang, true);
      return w ? add_edge(wk, w, NULL, false) : oom(wk);
    }
  }
  /* every name is a lookup, defined or not: defining it later (even
   * shadowing a builtin, or a name an #ifdef tests) changes this code */
  kc__binding *b = kc__binding_get(wk->rt, s, n);
  if (!b) return oom(wk);
  kc__def *d = kc__visible_def(b, wk->world);
  if (!add_edge(wk, b, d, id->call)) return false;
  if (d) return add_kid(wk, d);
  return visit_enumerator(wk, b);
}

/* The error for a definition reached again while it is on the stack: the
 * cycle's path. */
static kc_status cycle(walk *wk, const kc__def *d) {
  size_t from = 0;
  while (from < wk->depth && wk->stack[from].def != d) from++;
  kc__sb path;
  kc__sb_init(&path, kc__rt_heap(wk->rt));
  for (size_t j = from; j < wk->depth; j++) {
    kc__sb_puts(&path, wk->stack[j].def->binding->name);
    kc__sb_puts(&path, " -> ");
  }
  kc__sb_puts(&path, d->binding->name);
  kc_status st = kc__err(wk->rt, KC_ERECURSION,
                         "recursion in the call graph: %s; recursion is not supported by GPU backends",
                         path.buf && !path.failed ? path.buf : d->binding->name);
  kc__sb_free(&path);
  return st;
}

/* Pushes d's frame and scans its text: its children go onto wk->kids. */
static kc_status push(walk *wk, kc__def *d) {
  bool ok;
  KC__GROW(&wk->rt->heap, wk->stack, wk->capstack, wk->depth + 1, 16, &ok);
  if (!ok) return kc__err(wk->rt, KC_ENOMEM, "out of memory");
  d->walk_stamp = wk->stamp;
  d->walk_state = ON_STACK;
  wk->stack[wk->depth++] = (frame){d, wk->nkids, wk->nkids};
  wk->current = d;
  wk->seen_self = false;
  kc__scan_idents(d->source, d->len, visit_ident, wk);
  return wk->st;
}

/* Pops the top frame: d is complete, after its callees (post-order). */
static kc_status pop(walk *wk) {
  frame *f = &wk->stack[--wk->depth];
  f->def->walk_state = DONE;
  wk->nkids = f->kids;
  kc__closure *c = wk->out;
  bool ok;
  KC__GROW(&wk->rt->heap, c->defs, wk->capdefs, (size_t)c->ndefs + 1, 8, &ok);
  if (!ok || c->ndefs == UINT32_MAX) return kc__err(wk->rt, KC_ENOMEM, "out of memory");
  c->defs[c->ndefs++] = f->def;
  return KC_OK;
}

static kc_status walk_from(walk *wk, kc__def *entry) {
  kc_status st = push(wk, entry);
  while (!st && wk->depth) {
    frame *f = &wk->stack[wk->depth - 1];
    if (f->next == wk->nkids) {
      st = pop(wk);
      continue;
    }
    kc__def *d = wk->kids[f->next++];
    if (d->walk_stamp != wk->stamp) st = push(wk, d);
    else if (d->walk_state == ON_STACK) st = cycle(wk, d);
  }
  return st;
}

void kc__closure_free(kc_runtime *rt, kc__closure *c) {
  kc__free(rt, c->defs);
  kc__free(rt, c->edges);
  memset(c, 0, sizeof *c);
}

kc_status kc__resolve(kc_runtime *rt, const kc__spec *spec, kc_world world, kc__closure *out) {
  memset(out, 0, sizeof *out);
  walk wk = {.rt = rt, .world = world, .spec = spec, .out = out};
  kc__lock(&rt->world_lock);
  wk.stamp = ++rt->walk_stamp;
  size_t base = kc__name_expr_base(spec->name); /* a template's instantiation: the template */
  kc__binding *b = kc__binding_get(rt, spec->name, base ? base : strlen(spec->name));
  kc_status st;
  if (!b) {
    st = kc__err(rt, KC_ENOMEM, "out of memory");
  } else {
    kc__def *d = kc__visible_def(b, world);
    if (!add_edge(&wk, b, d, false)) /* the entry's own lookup is an edge too */
      st = wk.st;
    else if (!d)
      st = kc__err(rt, KC_ENOTFOUND, "kernel '%s' is not defined in world %llu", spec->name,
                   (unsigned long long)world);
    else st = walk_from(&wk, d);
  }
  kc__unlock(&rt->world_lock);
  kc__free(rt, wk.stack);
  kc__free(rt, wk.kids);
  if (st) kc__closure_free(rt, out);
  return st;
}
