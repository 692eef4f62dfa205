/* SPDX-License-Identifier: MIT */
/*
 * headers.c -- the headers of the function table in a translation unit:
 * a definition's text is emitted with each #include of a header that the
 * closure holds replaced by that header's text (itself so emitted),
 * between #line markers, so the backend's compiler never opens a file of
 * the user's and the header's content is part of what is compiled, of the
 * closure and of the disk key. A header with #pragma once is guarded so
 * that it is inlined once per translation unit; other headers are inlined
 * at every #include, as C does (a header included twice needs a guard).
 * #include <...> of a header that the table lacks stays for the compiler.
 */
#include "core/core.h"
#include "core/lex.h"

#include <string.h>

#define MAX_NEST 64
#define MAX_INCLUDES 4096 /* inlinings per definition, nested ones included */

typedef struct inc {
  size_t at, end; /* the include line, its newline excluded */
  const kc__def *header;
} inc;

typedef struct incs {
  const kc__closure *c;
  const char *base; /* the text scanned */
  inc *v;
  size_t n, cap;
  kc_runtime *rt;
  bool oom;
} incs;

static bool is_header(const kc__def *d) { return kc__is_header_name(d->binding->name); }

static const kc__def *header_in(const kc__closure *c, const char *name, size_t n) {
  for (uint32_t i = 0; i < c->ndefs; i++) {
    const char *b = c->defs[i]->binding->name;
    if (strlen(b) == n && !memcmp(b, name, n) && is_header(c->defs[i])) return c->defs[i];
  }
  return NULL;
}

static bool collect(void *ud, const kc__ident *id) {
  incs *s = ud;
  if ((id->kind != KC__ID_INCLUDE && id->kind != KC__ID_SYSINCLUDE) || !id->len) return true;
  const kc__def *h = header_in(s->c, id->start, id->len);
  if (!h) return true; /* <...> for the compiler (a quoted one was refused at resolve) */
  bool ok;
  KC__GROW(&s->rt->heap, s->v, s->cap, s->n + 1, 4, &ok);
  if (!ok) {
    s->oom = true;
    return false;
  }
  s->v[s->n++] = (inc){(size_t)(id->at - s->base), (size_t)(id->end - s->base), h};
  return true;
}

/* The first "#pragma once" line of text: [*s, *e), or false. */
static bool pragma_once(const char *t, size_t len, size_t *s, size_t *e) {
  for (size_t i = 0; i < len;) {
    size_t ls = i, j = i;
    while (j < len && (t[j] == ' ' || t[j] == '\t')) j++;
    if (j < len && t[j] == '#') {
      j = kc__lx_next(t, len, j + 1, true);
      if (len - j >= 6 && !memcmp(t + j, "pragma", 6)) {
        j = kc__lx_next(t, len, j + 6, true);
        if (len - j >= 4 && !memcmp(t + j, "once", 4)) {
          size_t k = kc__lx_next(t, len, j + 4, true);
          if (k >= len || t[k] == '\n') {
            *s = ls;
            *e = k;
            return true;
          }
        }
      }
    }
    while (i < len && t[i] != '\n') i++;
    i++;
  }
  return false;
}

static size_t line_of(const char *t, size_t at) {
  size_t n = 1;
  for (size_t i = 0; i < at; i++) n += t[i] == '\n';
  return n;
}

typedef struct emitter {
  kc_runtime *rt;
  const kc__closure *c;
  kc__sb *sb;
  size_t inlined;
  kc_status st;
} emitter;

static void emit_text(emitter *em, const kc__def *d, uint32_t depth);

/* d's text in [from, to), its includes of headers in the table inlined. */
static void emit_range(emitter *em, const kc__def *d, const incs *s, size_t from, size_t to, uint32_t depth) {
  const char *t = d->source;
  for (size_t i = 0; i < s->n && !em->st; i++) {
    const inc *in = &s->v[i];
    if (in->at < from || in->end > to) continue;
    kc__sb_append(em->sb, t + from, in->at - from);
    kc__sb_printf(em->sb, "\n#line 1 \"%s\"\n", in->header->binding->name);
    emit_text(em, in->header, depth + 1);
    kc__sb_printf(em->sb, "\n#line %zu \"%s\"\n", line_of(t, in->end) + 1, d->binding->name);
    from = in->end < to && t[in->end] == '\n' ? in->end + 1 : in->end;
  }
  if (!em->st && from < to) kc__sb_append(em->sb, t + from, to - from);
}

static void emit_text(emitter *em, const kc__def *d, uint32_t depth) {
  if (depth > MAX_NEST || ++em->inlined > MAX_INCLUDES) {
    em->st = kc__err(em->rt, KC_EINVAL,
                     "headers nest deeper than %d or are included more than %d times while building "
                     "'%s'",
                     MAX_NEST, MAX_INCLUDES, d->binding->name);
    return;
  }
  incs s = {em->c, d->source, NULL, 0, 0, em->rt, false};
  kc__scan_idents(d->source, d->len, collect, &s);
  size_t ps, pe;
  if (s.oom) {
    em->st = kc__err(em->rt, KC_ENOMEM, "out of memory");
  } else if (is_header(d) && pragma_once(d->source, d->len, &ps, &pe)) {
    uint64_t guard = d->hash ^ kc__hash(d->binding->name, strlen(d->binding->name));
    kc__sb_printf(em->sb, "#ifndef KC__ONCE_%016llx\n#define KC__ONCE_%016llx\n", (unsigned long long)guard,
                  (unsigned long long)guard);
    emit_range(em, d, &s, 0, ps, depth);
    kc__sb_puts(em->sb, "\n");
    emit_range(em, d, &s, pe, d->len, depth);
    kc__sb_puts(em->sb, "\n#endif\n");
  } else {
    emit_range(em, d, &s, 0, d->len, depth);
  }
  kc__free(em->rt, s.v);
}

kc_status kc__emit_def(kc_runtime *rt, kc__sb *sb, const kc__closure *c, const kc__def *d) {
  emitter em = {rt, c, sb, 0, KC_OK};
  emit_text(&em, d, 0);
  return em.st;
}

bool kc__def_is_header(const kc__def *d) { return is_header(d); }

static bool first_mention(void *ud, const kc__ident *id) {
  const kc__def *d = ((const kc__def **)ud)[0];
  if (id->kind == KC__ID_NAME && !strncmp(id->start, d->binding->name, id->len) &&
      !d->binding->name[id->len]) {
    ((const kc__def **)ud)[1] = id->directive ? d : NULL;
    return false;
  }
  return true;
}

bool kc__def_is_macro(const kc__def *d) {
  const kc__def *ud[2] = {d, NULL};
  kc__scan_idents(d->source, d->len, first_mention, ud);
  return ud[1] != NULL;
}
