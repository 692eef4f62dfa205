/* SPDX-License-Identifier: MIT */
/*
 * cli/explain.c -- owns `kcache explain`: why a kernel missed the cache.
 * It finds the entry (as `show` does, lookup.c), the nearest other entry of
 * the same kernel (the fewest differing parts of the key, then the newest),
 * and names each part that differs: a definition changed (with its first
 * differing line), new or gone, the parameters, the options, the compiler
 * or device identity, the backend, kcache's version, or the generated source.
 */
#include "cli.h"
#include "out.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char cli_help_explain[] = "usage: kcache explain KEY|ENTRY [--params P] [--dir DIR] [--json]\n"
                                "\n"
                                "Why a kernel missed the cache: compares an entry with the nearest other\n"
                                "entry for the same kernel (the one that differs in the fewest parts of\n"
                                "the key) and names what differs: a definition that changed (with its\n"
                                "first differing line), one that is new or gone, the specialization\n"
                                "parameters, the compile options, the compiler or device identity, the\n"
                                "backend, kcache's version.\n"
                                "\n"
                                "KEY is a key or a unique prefix. ENTRY is a kernel name: its most recently\n"
                                "compiled entry is explained (the one its last miss wrote), optionally\n"
                                "only among entries with parameters P.\n";

typedef struct change {
  const char *component; /* "definition", "params", "options", "identity", "backend", "library", "source" */
  const char *name; /* a definition's name */
  const char *kind; /* "changed", "new", "gone" */
  const char *now, *was;
  int line; /* first differing line of a changed definition (1-based) */
  char now_line[160], was_line[160];
} change;

enum { MAXCH = 64 };

static const kc__key_def *def_named(const kc__entry *e, const char *name) {
  for (uint32_t i = 0; i < e->ndefs; i++)
    if (!strcmp(e->defs[i].name, name)) return &e->defs[i];
  return NULL;
}

static void first_diff_line(change *ch, const kc__key_def *now, const kc__key_def *was) {
  const char *a = now->text, *b = was->text;
  int line = 1;
  const char *la = a, *lb = b;
  while (*a && *a == *b) {
    if (*a == '\n') {
      line++;
      la = a + 1;
      lb = b + 1;
    }
    a++;
    b++;
  }
  ch->line = line;
  snprintf(ch->now_line, sizeof ch->now_line, "%.*s", (int)strcspn(la, "\n"), la);
  snprintf(ch->was_line, sizeof ch->was_line, "%.*s", (int)strcspn(lb, "\n"), lb);
}

/* What differs between `now` and `was`; returns the count (at most max). */
static int diff_entries(const kc__entry *now, const kc__entry *was, change *out, int max) {
  int n = 0;
#define KC__FIELD(f, comp) \
  if (strcmp(now->f, was->f) && n < max) \
    out[n++] = (change){.component = comp, .kind = "changed", .now = now->f, .was = was->f};
  KC__FIELD(backend, "backend")
  KC__FIELD(identity, "identity")
  KC__FIELD(options, "options")
  KC__FIELD(params, "params")
  KC__FIELD(library, "library")
#undef KC__FIELD
  for (uint32_t i = 0; i < now->ndefs && n < max; i++) {
    const kc__key_def *d = &now->defs[i], *o = def_named(was, d->name);
    if (!o) {
      out[n++] = (change){.component = "definition", .name = d->name, .kind = "new"};
    } else if (d->len != o->len || memcmp(d->text, o->text, d->len)) {
      out[n] = (change){.component = "definition", .name = d->name, .kind = "changed"};
      first_diff_line(&out[n++], d, o);
    }
  }
  for (uint32_t i = 0; i < was->ndefs && n < max; i++)
    if (!def_named(now, was->defs[i].name))
      out[n++] = (change){.component = "definition", .name = was->defs[i].name, .kind = "gone"};
  if (n == 0 && memcmp(now->tu_hash, was->tu_hash, 16) && n < max)
    out[n++] = (change){.component = "source", .kind = "changed"};
  return n;
}

/* The nearest other entry of target's kernel into *near (zeroed if none):
 * the count of its differences, or -1 when there is none. */
static int nearest(const cli *c, const kc__entry *target, kc__entry *near) {
  memset(near, 0, sizeof *near);
  kc__index_set s; /* the entries the index says have its name */
  cli_named(c, target->entry, &s);
  change cur[MAXCH];
  int nbest = -1;
  for (size_t i = 0; i < s.n; i++) {
    if (!memcmp(s.rec[i].key, target->key, 16)) continue;
    char path[PATH_MAX];
    kc__store_path(c->vdir, s.rec[i].key, ".kce", path, sizeof path);
    kc__entry e;
    /* the metadata first (cheap), the whole entry only for the same kernel */
    if (kc__entry_peek(path, &e, NULL, 0) != KC_OK) continue;
    bool same = !strcmp(e.entry, target->entry);
    kc__entry_free(NULL, &e);
    if (!same || kc__entry_read(NULL, path, s.rec[i].key, &e, NULL, 0) != KC_OK) continue;
    int d = diff_entries(target, &e, cur, MAXCH);
    if (nbest < 0 || d < nbest || (d == nbest && e.created_ns > near->created_ns)) {
      kc__entry_free(NULL, near);
      *near = e;
      nbest = d;
    } else {
      kc__entry_free(NULL, &e);
    }
  }
  kc__index_set_free(NULL, &s);
  return nbest;
}

static void explain_json(const kc__entry *target, const kc__entry *near, const change *best, int nbest) {
  char hex[33], nhex[33];
  kc__store_hex(target->key, hex);
  printf("{\"key\": \"%s\", \"entry\": ", hex);
  json_str(target->entry);
  printf(", \"params\": ");
  json_str(target->params);
  printf(", \"nearest\": ");
  if (nbest < 0) {
    printf("null");
  } else {
    kc__store_hex(near->key, nhex);
    printf("\"%s\"", nhex);
  }
  printf(", \"differences\": [");
  for (int i = 0; i < nbest; i++) {
    const change *ch = &best[i];
    printf("%s\n  {\"component\": \"%s\", \"change\": \"%s\"", i ? "," : "", ch->component, ch->kind);
    if (ch->name) printf(", \"name\": "), json_str(ch->name);
    if (ch->now) printf(", \"now\": "), json_str(ch->now), printf(", \"was\": "), json_str(ch->was);
    if (ch->line) {
      printf(", \"line\": %d, \"now_line\": ", ch->line);
      json_str(ch->now_line);
      printf(", \"was_line\": ");
      json_str(ch->was_line);
    }
    printf("}");
  }
  printf("%s]}\n", nbest > 0 ? "\n" : "");
}

static void print_change(const change *ch) {
  static const struct {
    const char *comp, *label;
  } labels[] = {{"backend", "backend"},
                {"identity", "compiler/device identity"},
                {"options", "compile options"},
                {"params", "specialization parameters"},
                {"library", "kcache version"}};
  if (!strcmp(ch->component, "definition")) {
    if (!strcmp(ch->kind, "new"))
      printf("  definition '%s' is new (the nearest entry does not call it)\n", ch->name);
    else if (!strcmp(ch->kind, "gone"))
      printf("  definition '%s' is gone (the nearest entry called it)\n", ch->name);
    else
      printf("  definition '%s' changed, first at line %d:\n    now: %s\n    was: %s\n", ch->name, ch->line,
             ch->now_line, ch->was_line);
    return;
  }
  if (!strcmp(ch->component, "source")) {
    printf("  the generated source differs (kcache's prelude or trampoline changed)\n");
    return;
  }
  const char *label = ch->component;
  for (size_t j = 0; j < sizeof labels / sizeof *labels; j++)
    if (!strcmp(labels[j].comp, ch->component)) label = labels[j].label;
  printf("  %s: \"%s\" (was \"%s\")\n", label, ch->now, ch->was);
}

static void explain_text(const cli *c, const kc__entry *target, const kc__entry *near, const change *best,
                         int nbest) {
  char hex[33], nhex[33], a[32];
  kc__store_hex(target->key, hex);
  const char *sp = *target->params ? " " : "";
  if (nbest < 0) {
    printf("%.12s (%s%s%s) is the only entry for kernel '%s' in %s: it was compiled for the first "
           "time with this store.\n",
           hex, target->entry, sp, target->params, target->entry, c->root);
    return;
  }
  kc__store_hex(near->key, nhex);
  printf("%.12s (%s%s%s, compiled %s ago)\n", hex, target->entry, sp, target->params,
         ago((int64_t)target->created_ns, a, sizeof a));
  printf("nearest entry %.12s (compiled %s ago) differs in %d part%s of the key:\n", nhex,
         ago((int64_t)near->created_ns, a, sizeof a), nbest, nbest == 1 ? "" : "s");
  for (int i = 0; i < nbest; i++) print_change(&best[i]);
}

int cmd_explain(cli *c) {
  const char *what = NULL, *params = NULL;
  for (int i = 0; i < c->argc; i++) {
    if (cli_opt(c, &i, "--params", &params)) continue;
    if (what || c->argv[i][0] == '-') cli_unexpected(c, c->argv[i]);
    what = c->argv[i];
  }
  if (!what) cli_usage("explain needs a KEY or an ENTRY name");
  char path[PATH_MAX];
  kc__entry target, near;
  if (!cli_resolve(c, what, params, &target, path, sizeof path)) return 1;
  int nbest = nearest(c, &target, &near);
  change best[MAXCH];
  /* again, against the kept `near`: the changes point into it */
  if (nbest >= 0) nbest = diff_entries(&target, &near, best, MAXCH);
  if (c->json) explain_json(&target, &near, best, nbest);
  else explain_text(c, &target, &near, best, nbest);
  kc__entry_free(NULL, &near);
  kc__entry_free(NULL, &target);
  return 0;
}
