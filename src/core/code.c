/* SPDX-License-Identifier: MIT */
/*
 * code.c -- owns specializations and their code instances: interning a
 * (name, parameters) pair, finding the code instance valid in a world, and
 * making one on a miss (kc__ci_get: creating it, compiling it or fetching
 * it from the disk cache, remembering a deterministic failure, publishing
 * it), plus the translation unit it is compiled from (kc__ci_source). The
 * kc_kernel_* calls that ask for a kernel's code at the caller's world
 * are params.c's, above world.c, which calls this file to free code.
 */
#include "core/core.h"
#include "core/cache_glue.h"
#include "core/lex.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------ specializations */

#define spec_hash(s) ((s)->hash)

kc_status kc__spec_intern(kc_runtime *rt, const char *name, const char *canon, kc__spec **out) {
  size_t nl = strlen(name), pl = strlen(canon);
  uint64_t h = kc__hash(name, nl) ^ (kc__hash(canon, pl) * 0x9E3779B97F4A7C15ull);
  kc__lock(&rt->spec_lock);
  KC__HTAB_FOR(&rt->specs, h, kc__spec, s, next_in_bucket)
  if (s->hash == h && !strcmp(s->name, name) && !strcmp(s->params, canon)) {
    kc__unlock(&rt->spec_lock);
    *out = s;
    return KC_OK;
  }
  bool ok;
  kc__htab_reserve(&rt->heap, &rt->specs, kc__spec, next_in_bucket, spec_hash, 64, &ok);
  if (!ok) goto oom;
  kc__spec *s = kc__calloc(rt, sizeof *s);
  if (!s) goto oom;
  s->name = kc__strdup(rt, name);
  s->params = kc__strdup(rt, canon);
  bool locked = s->name && s->params && kc__mutex_init(&s->lock);
  if (locked && !kc__mutex_init(&s->free_lock)) {
    kc__mutex_destroy(&s->lock);
    locked = false;
  }
  if (!locked) {
    kc__free(rt, s->name);
    kc__free(rt, s->params);
    kc__free(rt, s);
    goto oom;
  }
  s->hash = h;
  atomic_init(&s->head, NULL);
  KC__HTAB_PUT(&rt->specs, s, h, next_in_bucket);
  kc__unlock(&rt->spec_lock);
  *out = s;
  return KC_OK;
oom:
  kc__unlock(&rt->spec_lock);
  return kc__err(rt, KC_ENOMEM, "kc_kernel_create: out of memory");
}

/* The code instance valid at world w, without locks. */
kc__ci *kc__ci_find(kc__spec *spec, kc_world w) {
  for (kc__ci *ci = kc__load_acquire(&spec->head); ci; ci = kc__load_acquire(&ci->next))
    if (kc__ci_valid_at(ci, w)) return ci;
  return NULL;
}

const char *kc__linked_name(const kc__linked *l) { return l->ci && l->ci->spec ? l->ci->spec->name : "?"; }

void kc__ci_free(kc_runtime *rt, kc__ci *ci) {
  kc__free(rt, ci->artifact);
  kc__free(rt, ci->source);
  kc__free(rt, ci->error);
  kc__free_params(rt, ci->params, ci->nparams);
  kc__free(rt, ci->sig);
  kc__free(rt, ci->edges);
  kc__ci_files_free(rt, ci);
  kc__free(rt, ci);
}

/* -------------------------------------------------- translation units */

static void emit_params(kc__sb *sb, const char *params) {
  for (const char *q = params; *q;) {
    const char *eq = strchr(q, '=');
    const char *end = strchr(q, ',');
    if (!end) end = q + strlen(q);
    kc__sb_printf(sb, "#define %.*s %.*s\n", (int)(eq - q), q, (int)(end - eq - 1), eq + 1);
    q = *end ? end + 1 : end;
  }
}

/* A closure of native and dialect definitions (issue 26): the prelude's
 * typedefs (int64_t, uint, ...) must not clash with the native code's own
 * (a typedef of its text, <cstdint>), which may name another type
 * (`typedef long int64_t` against the prelude's long long). So each
 * prelude line `typedef T N;` becomes `typedef T kc__t_N;` and
 * `#define N kc__t_N`, a macro in force around the dialect's definitions
 * (and kcache's own text) and #undef'd around the native ones, which see
 * only what they declare. A name a definition of the closure defines is
 * left as it is (its own #define renames it already). The names go into
 * names, each ending with '\n'. */
static void emit_mixed_prelude(kc__sb *sb, kc__sb *names, const char *prelude, const kc__closure *c) {
  for (const char *p = prelude; *p;) {
    const char *e = strchr(p, '\n');
    e = e ? e + 1 : p + strlen(p);
    const char *semi =
        e - p > 9 && !strncmp(p, "typedef ", 8) && e[-1] == '\n' && e[-2] == ';' ? e - 2 : NULL;
    const char *n = semi;
    while (n && n > p + 8 && kc__lx_id_char((unsigned char)n[-1])) n--;
    bool own = !n || n == semi || n[-1] != ' ';
    for (uint32_t i = 0; !own && i < c->ndefs; i++)
      own = strlen(c->defs[i]->binding->name) == (size_t)(semi - n) &&
            !memcmp(c->defs[i]->binding->name, n, (size_t)(semi - n));
    if (own) {
      kc__sb_append(sb, p, (size_t)(e - p));
    } else {
      kc__sb_printf(sb, "%.*skc__t_%.*s;\n#define %.*s kc__t_%.*s\n", (int)(n - p), p, (int)(semi - n), n,
                    (int)(semi - n), n, (int)(semi - n), n);
      kc__sb_append(names, n, (size_t)(semi - n));
      kc__sb_puts(names, "\n");
    }
    p = e;
  }
}

/* Puts the mixed prelude's typedef macros in force (on) or not; returns on. */
static bool mixed_typedefs(kc__sb *sb, const kc__sb *names, bool was, bool on) {
  if (was == on || !names->len || !names->buf) return on;
  for (const char *p = names->buf; p < names->buf + names->len;) {
    const char *e = memchr(p, '\n', (size_t)(names->buf + names->len - p));
    int n = (int)(e - p);
    if (on) kc__sb_printf(sb, "#define %.*s kc__t_%.*s\n", n, p, n, p);
    else kc__sb_printf(sb, "#undef %.*s\n", n, p);
    p = e + 1;
  }
  return on;
}

static kc_status build_tu(kc_runtime *rt, const kc__backend *be, void *bstate, const kc__spec *spec,
                          const kc__closure *c, const kc__param *params, uint32_t nparams, char **out,
                          size_t *len) {
  kc__sb sb;
  kc__sb_init(&sb, kc__rt_heap(rt));
  /* the dialect's prelude, unless every definition is native: then the
   * unit is the sources as written (and the specialization's #defines) */
  bool dialect = false, native = false;
  for (uint32_t i = 0; i < c->ndefs; i++) {
    if (kc__def_is_header(c->defs[i])) continue;
    dialect |= c->defs[i]->lang == KC_LANG_DIALECT;
    native |= c->defs[i]->lang != KC_LANG_DIALECT;
  }
  kc__sb tnames; /* mixed: the prelude's typedef names, each ending with '\n' */
  kc__sb_init(&tnames, kc__rt_heap(rt));
  if (dialect && native) emit_mixed_prelude(&sb, &tnames, be->prelude, c);
  else if (dialect) kc__sb_puts(&sb, be->prelude);
  bool typedefs_on = true; /* the dialect's spellings (macros) in force */
  kc__sb_puts(&sb, "\n/* specialization parameters */\n");
  emit_params(&sb, spec->params);
  /* Helpers get private symbol names, so a definition may shadow a builtin
   * or library function (sqrtf, sqrt) on every backend without clashing with
   * the prelude's declarations of it. */
  /* (Not a macro's name, which its #define takes; headers are inlined
   * where they are included, not emitted on their own.) */
  for (uint32_t i = 0; i + 1 < c->ndefs; i++)
    if (!kc__def_is_header(c->defs[i]) && !kc__def_is_macro(c->defs[i]))
      kc__sb_printf(&sb, "#define %s kc__u_%s\n", c->defs[i]->binding->name, c->defs[i]->binding->name);
  for (uint32_t i = 0; i < c->ndefs; i++) {
    if (kc__def_is_header(c->defs[i])) continue;
    if (i + 1 == c->ndefs && be->entry_prologue) /* kcache's own text: the dialect's types */
      typedefs_on = mixed_typedefs(&sb, &tnames, typedefs_on, true);
    if (i + 1 == c->ndefs && be->entry_prologue) { /* the entry is the closure's last */
      kc__sb_puts(&sb, "#line 1 \"<kcache>\"\n");
      kc__tu tu = {spec->name, sb.buf, sb.len, params, nparams, spec};
      kc_status st = be->entry_prologue(bstate, &tu, &sb);
      if (st) {
        kc__sb_free(&sb);
        return st;
      }
    }
    typedefs_on = mixed_typedefs(&sb, &tnames, typedefs_on, c->defs[i]->lang == KC_LANG_DIALECT);
    kc__sb_printf(&sb, "#line 1 \"%s\"\n", c->defs[i]->binding->name);
    kc_status st = kc__emit_def(rt, &sb, c, c->defs[i]);
    if (st) {
      kc__sb_free(&sb);
      kc__sb_free(&tnames);
      return st;
    }
    kc__sb_puts(&sb, "\n");
  }
  mixed_typedefs(&sb, &tnames, typedefs_on, true);
  bool lost = tnames.failed;
  kc__sb_free(&tnames);
  if (lost) {
    kc__sb_free(&sb);
    return kc__err(rt, KC_ENOMEM, "out of memory building the source of '%s'", spec->name);
  }
  if (be->epilogue) {
    kc__sb_puts(&sb, "#line 1 \"<kcache>\"\n");
    kc__tu tu = {spec->name, sb.buf, sb.len, params, nparams, spec};
    kc_status st = be->epilogue(bstate, &tu, &sb);
    if (st) {
      kc__sb_free(&sb);
      return st;
    }
  }
  *len = sb.len;
  *out = kc__sb_take(&sb);
  return *out ? KC_OK : kc__err(rt, KC_ENOMEM, "out of memory building the source of '%s'", spec->name);
}

/* Whether the backend compiles every definition of the closure: a native
 * one (kc_define_lang) only on the backend of its language. */
static kc_status check_languages(kc_runtime *rt, const kc__backend *be, const kc__spec *spec,
                                 const kc__closure *c) {
  for (uint32_t j = 0; j < c->ndefs; j++) {
    uint32_t i = j ? j - 1 : c->ndefs - 1; /* the entry first */
    const kc__def *d = c->defs[i];
    if (d->lang == KC_LANG_DIALECT || d->lang == be->language) continue;
    const char *own = d->lang == KC_LANG_OPENCL ? "opencl" : "cuda";
    if (i + 1 == c->ndefs)
      return kc__err(rt, KC_EUNAVAILABLE,
                     "'%s' is %s, which the %s backend does not compile: run it on a runtime of the %s "
                     "backend, or define it in kcache's dialect",
                     spec->name, kc__lang_title(d->lang), be->name, own);
    char file[160], from[200] = "";
    if (kc__file_of(rt, d->binding->name, file, sizeof file))
      snprintf(from, sizeof from, " (defined by file '%s')", file);
    return kc__err(rt, KC_EUNAVAILABLE,
                   "kernel '%s' reaches '%s'%s, which is %s, which the %s backend does not compile: "
                   "names are global across files and languages (every definition of a file, #defines "
                   "included, is one), so if '%s' means something else to '%s', rename one of them; run "
                   "it on a runtime of the %s backend, or define '%s' in kcache's dialect or, for a "
                   "shared header, with kc_define_lang in the kernel's language",
                   spec->name, d->binding->name, from, kc__lang_title(d->lang), be->name, d->binding->name,
                   spec->name, own, d->binding->name);
  }
  return KC_OK;
}

/* OpenCL C parameters that are not memory: images, samplers (and the
 * OpenCL 2 opaque types), which kcache cannot pass (no kc_buffer is an
 * image) and whose sizes no probe can take. Refused up front. */
static kc_status check_opaque_params(kc_runtime *rt, const kc__spec *spec, uint8_t lang,
                                     const kc__param *params, uint32_t nparams) {
  static const char *const opaque[] = {"image1d_t",
                                       "image1d_array_t",
                                       "image1d_buffer_t",
                                       "image2d_t",
                                       "image2d_array_t",
                                       "image2d_depth_t",
                                       "image2d_array_depth_t",
                                       "image3d_t",
                                       "sampler_t",
                                       "pipe",
                                       "queue_t",
                                       "clk_event_t"};
  if (lang != KC_LANG_OPENCL) return KC_OK;
  for (uint32_t i = 0; i < nparams; i++)
    for (size_t k = 0; k < sizeof opaque / sizeof *opaque; k++) {
      const char *t = params[i].type, *p = t;
      size_t n = strlen(opaque[k]);
      while ((p = strstr(p, opaque[k])) != NULL) {
        bool word = (p == t || !kc__lx_id_char((unsigned char)p[-1])) && !kc__lx_id_char((unsigned char)p[n]);
        if (word)
          return kc__err(rt, KC_EUNAVAILABLE,
                         "'%s' (OpenCL C): parameter '%s' (%s): image and sampler parameters are not "
                         "supported (kcache passes buffers, local memory and scalars); pass the pixels in a "
                         "__global buffer",
                         spec->name, params[i].name ? params[i].name : "?", opaque[k]);
        p += n;
      }
    }
  return KC_OK;
}

/* Resolves the closure of spec at world w, and builds its translation unit
 * for backend be (state: its state, NULL for a backend rt is not on). */
static kc_status prepare_for(kc_runtime *rt, const kc__backend *be, void *bstate, kc__spec *spec, kc_world w,
                             kc__closure *c, kc__param **params, uint32_t *nparams, char **text,
                             size_t *len) {
  kc_status st = kc__resolve(rt, spec, w, c);
  if (st) return st;
  kc__def *entry = c->defs[c->ndefs - 1];
  st = check_languages(rt, be, spec, c);
  size_t base = kc__name_expr_base(spec->name);
  /* the entry's name: the kernel's, or a name expression's template (a name of any length) */
  char *owned = base ? kc__strndup(rt, spec->name, base) : NULL;
  const char *entry_name = base ? owned : spec->name;
  if (!st && base && !owned) st = kc__err(rt, KC_ENOMEM, "out of memory reading '%s'", spec->name);
  if (!st) st = kc__parse_params(rt, entry_name, entry->source, params, nparams);
  if (!st && base && entry->lang != KC_LANG_CUDA)
    st = kc__err(rt, KC_EINVAL,
                 "'%s' is a name expression (a C++ template's instantiation), which only a CUDA C++ "
                 "definition (KC_LANG_CUDA) has; '%s' is in %s",
                 spec->name, entry_name, kc__lang_title(entry->lang));
  if (!st && base) st = kc__template_params(rt, spec->name, entry->source, *params, *nparams);
  if (!st)
    st = entry->lang ? kc__check_native(rt, entry->lang, spec->name, entry->source)
                     : kc__check_dialect(rt, entry_name, entry->source, *params, *nparams);
  if (!st) st = check_opaque_params(rt, spec, entry->lang, *params, *nparams);
  if (!st) st = build_tu(rt, be, bstate, spec, c, *params, *nparams, text, len);
  kc__free(rt, owned);
  if (st) {
    kc__free_params(rt, *params, *nparams);
    *params = NULL;
    kc__closure_free(rt, c);
  }
  return st;
}

static kc_status prepare(kc_runtime *rt, kc__spec *spec, kc_world w, kc__closure *c, kc__param **params,
                         uint32_t *nparams, char **text, size_t *len) {
  return prepare_for(rt, rt->be, rt->bstate, spec, w, c, params, nparams, text, len);
}

kc_status kc__tu_for(kc_runtime *rt, const kc__backend *be, kc__spec *spec, kc_world w, char **text,
                     size_t *len) {
  kc__closure c;
  kc__param *params = NULL;
  uint32_t n = 0;
  kc_status st = prepare_for(rt, be, be == rt->be ? rt->bstate : NULL, spec, w, &c, &params, &n, text, len);
  if (st) return st;
  kc__free_params(rt, params, n);
  kc__closure_free(rt, &c);
  return KC_OK;
}

/* Whether a compiler failure is worth remembering for the worlds in which
 * the same sources are visible: only a property of the sources is (a
 * syntax error, an undefined function: KC_ECOMPILE, KC_ENOTFOUND). Not a
 * timeout, a killed or crashed compiler, or a want of memory, mappings,
 * descriptors, processes or disk (KC_EBACKEND, KC_ENOMEM, KC_EIO...): those
 * are reported, and the next launch compiles again. Backends keep to this:
 * the host backend reports a compiler that failed for want of a resource
 * (by its log) as KC_EBACKEND, and loads nothing while compiling. */
static bool failure_is_deterministic(kc_status st) { return st == KC_ECOMPILE || st == KC_ENOTFOUND; }

/* Drops the private prefix that helpers get in the translation unit
 * ("kc__u_h" -> "h"), so that compiler messages name the user's functions. */
static void unmangle(char *log) {
  static const char prefix[] = "kc__u_";
  char *out = log;
  for (const char *in = log; *in;) {
    if (!strncmp(in, prefix, sizeof prefix - 1)) in += sizeof prefix - 1;
    else *out++ = *in++;
  }
  *out = 0;
}

/* Whether the line of log around p says a name is not declared (gcc and
 * tcc "implicit declaration", clang "undeclared", NVRTC "is undefined"):
 * not a source line the compiler quotes under another error. */
static bool line_says_undeclared(const char *log, const char *p) {
  const char *b = p, *e = strchr(p, '\n');
  while (b > log && b[-1] != '\n') b--;
  e = e ? e : p + strlen(p);
  static const char *const words[] = {"implicit", "undeclared", "undefined", "not declared"};
  for (size_t i = 0; i < sizeof words / sizeof *words; i++) {
    const char *q = strstr(b, words[i]); /* the first from the line's start */
    if (q && q < e) return true;
  }
  return false;
}

/* Whether log names the identifier name as not declared: as a word of its
 * own (not inside another name, or a path: a work directory's random
 * letters once matched), on a line that says so. */
static bool log_names(const char *log, const char *name) {
  size_t n = strlen(name);
  for (const char *p = strstr(log, name); p; p = strstr(p + 1, name)) {
    bool left = p == log || !(isalnum((unsigned char)p[-1]) || p[-1] == '_');
    bool right = !(isalnum((unsigned char)p[n]) || p[n] == '_');
    if (left && right && line_says_undeclared(log, p)) return true;
  }
  return false;
}

/* Names an undefined function that the compiler complained about. */
static kc_status explain_failure(kc_runtime *rt, const kc__spec *spec, const kc__closure *c, kc_status st,
                                 char *log) {
  if (log) unmangle(log);
  const char *missing = NULL;
  for (uint32_t i = 0; i < c->nedges && log; i++)
    if (!c->edges[i].def && c->edges[i].call && kc__is_identifier(c->edges[i].binding->name) &&
        log_names(log, c->edges[i].binding->name)) {
      missing = c->edges[i].binding->name;
      break;
    }
  if (missing && st == KC_ECOMPILE)
    return kc__err(rt, KC_ENOTFOUND,
                   "kernel '%s' calls '%s', which is neither defined in kcache nor provided by "
                   "the %s backend:\n%s",
                   spec->name, missing, rt->be->name, log);
  if (!log || !*log)
    return kc__err(rt, st, "compiling kernel '%s' (%s backend) failed: %s", spec->name, rt->be->name,
                   kc_errmsg(rt));
  return kc__err(rt, st, "compiling kernel '%s' (%s backend) failed: %s\n%s", spec->name, rt->be->name,
                 kc_errmsg(rt), log);
}

/* Creating: a code instance of spec for world w, owning what prepare
 * made (text, params, the closure's edges), with its parameter signature
 * and the empty world range until it is published. On failure frees all
 * of those. */
static kc_status ci_create(kc_runtime *rt, kc__spec *spec, kc_world w, kc__closure *c, kc__param *params,
                           uint32_t nparams, char *text, kc__ci **out) {
  kc__ci *ci = kc__calloc(rt, sizeof *ci);
  uint64_t *sig = kc__alloc(rt, (nparams ? nparams : 1) * sizeof *sig);
  if (!ci || !sig) {
    kc__free(rt, ci);
    kc__free(rt, sig);
    kc__free(rt, text);
    kc__free_params(rt, params, nparams);
    kc__closure_free(rt, c);
    return kc__err(rt, KC_ENOMEM, "out of memory compiling '%s'", spec->name);
  }
  for (uint32_t i = 0; i < nparams; i++) {
    uint32_t size = kc__scalar_size(params[i].type, spec);
    sig[i] =
        params[i].is_buffer ? KC__SIG(KC_ARG_BUFFER, 0) : KC__SIG(KC_ARG_SCALAR, size ? size : UINT32_MAX);
  }
  atomic_init(&ci->min_world, 1); /* the empty range until complete */
  atomic_init(&ci->max_world, 0);
  ci->id = kc__next_id();
  ci->spec = spec;
  ci->compiled_at = w;
  ci->source = text;
  ci->params = params;
  ci->nparams = nparams;
  ci->sig = sig;
  ci->edges = c->edges; /* owned by ci once the caller drops them from c */
  ci->nedges = c->nedges;
  *out = ci;
  return KC_OK;
}

/* Compiling: the artifact from the disk cache, else from the backend's
 * compiler (the log gets its output). A miss may hold the entry's
 * cross-process lock until kc__store_finish. */
static kc_status ci_compile(kc_runtime *rt, kc__ci *ci, kc__closure *c, size_t len, kc__sb *log) {
  kc__tu_deps deps = {.reported = false};
  kc__sb_init(&deps.paths, kc__rt_heap(rt));
  kc__tu tu = {ci->spec->name,
               ci->source,
               len,
               ci->params,
               ci->nparams,
               ci->spec,
               rt->be->reports_deps ? &deps : NULL};
  kc__store_txn txn;
  kc_stats before = {0}, after = {0}; /* the tiers' counters, for the trace (KC_LOG=info and up) */
  bool trace = kc__log_on(rt, KC_LOG_INFO);
  if (trace) kc__store_stats(rt, &before);
  bool hit = kc__store_fetch(rt, ci, c, &txn); /* a hit fills the artifact, sig and files */
  if (trace) {
    kc__store_stats(rt, &after);
    kc__trace_store_after(rt, ci->spec, hit, &before, &after);
  }
  if (hit) return KC_OK;
  /* the files outside the table it will read: found now, or told by the
   * compiler after (those read since the compile started are unknown) */
  /* (and, told after, those the last compile of the kernel read, as they
   * are now: one not the same after changed while the compiler ran) */
  kc__filedep *prior = NULL;
  uint32_t nprior = 0;
  kc_status st = rt->be->reports_deps ? kc__ext_before(rt, ci->spec, &prior, &nprior)
                                      : kc__ext_scan(rt, ci, ci->source, len);
  uint64_t t0 = kc__now_ns(), since = kc__filedep_clock_ns(); /* the clock of file stamps */
  if (!st) st = rt->be->compile(rt->bstate, &tu, &ci->artifact, &ci->artifact_size, ci->sig, log);
  if (rt->be->reports_deps) {
    kc_status fs = kc__ext_from_paths(rt, ci, &deps, since);
    kc__ext_after(ci, prior, nprior);
    kc__ext_before_free(rt, prior, nprior);
    if (!st) st = fs;
  } else if (ci->nfiles && !ci->files_unknown && !kc__ext_same(ci->files, ci->nfiles)) {
    /* one changed between the scan and the compile's end: which it read is unknown */
    ci->files_unknown = true;
  }
  kc__sb_free(&deps.paths);
  ci->compile_ns = kc__now_ns() - t0;
  kc__fetch_add_relaxed(&rt->compile_ns, ci->compile_ns);
  if (trace) kc__trace_compiled(rt, ci->spec, st, ci->compile_ns);
  kc__store_finish(rt, &txn, st, ci, log);
  if (!st) kc__fetch_add_relaxed(&rt->n_compiles, 1);
  return st;
}

/* Remembering a failure: explains it (the message), and keeps ci as the
 * failure for the same worlds if it is deterministic (a syntax error, not
 * a timeout), so a launch loop does not recompile. Returns the status;
 * *keep says whether ci stays (else the caller frees it). */
static kc_status ci_remember_failure(kc_runtime *rt, kc__ci *ci, const kc__closure *c, kc_status st,
                                     kc__sb *log, bool *keep) {
  kc__fetch_add_relaxed(&rt->n_compile_failures, 1);
  st = explain_failure(rt, ci->spec, c, st, log->buf);
  /* (not if the files it read cannot be told: their change could not end it) */
  *keep = failure_is_deterministic(st) && !ci->files_unknown &&
          (ci->error = kc__strdup(rt, kc_errmsg(rt))) != NULL;
  if (*keep) ci->status = st; /* the same sources fail the same way */
  return st;
}

/* What a published code instance keeps: its artifact at its size (a
 * backend may hand over a bigger buffer), and no translation unit unless
 * the backend's link reads it (kc_kernel_source rebuilds it on demand). */
static void ci_trim(kc_runtime *rt, kc__ci *ci) {
  if (!rt->be->link_uses_source) {
    kc__free(rt, ci->source);
    ci->source = NULL;
  }
  if (ci->artifact && ci->artifact_size) {
    void *p = kc__realloc(rt, ci->artifact, ci->artifact_size);
    if (p) ci->artifact = p;
  }
}

/* Publishing: the world range from the edges, and the head of the
 * spec's list (kc__publish_range, under world_lock). */
static void ci_publish(kc_runtime *rt, kc__ci *ci, kc_world w) {
  ci_trim(rt, ci);
  kc__lock(&rt->world_lock);
  kc__publish_range(rt, ci, w, kc__ext_observe(rt, ci));
  kc__unlock(&rt->world_lock);
  kc__fetch_add_relaxed(&rt->n_cis, 1);
}

/* The miss of kc__ci_get, under spec->lock: creates, compiles, remembers
 * a failure or publishes. */
static kc_status ci_make(kc_runtime *rt, kc__spec *spec, kc_world w, kc__ci **out) {
  kc__closure c;
  kc__param *params = NULL;
  uint32_t nparams = 0;
  char *text = NULL;
  size_t len = 0;
  kc_status st = prepare(rt, spec, w, &c, &params, &nparams, &text, &len);
  if (st) return st;
  kc__trace_ci_miss(rt, spec, &c, w); /* at KC_LOG=debug: why no code served w */
  kc__ci *ci = NULL;
  st = ci_create(rt, spec, w, &c, params, nparams, text, &ci);
  if (st) return st;
  kc__sb log;
  kc__sb_init(&log, kc__rt_heap(rt));
  st = ci_compile(rt, ci, &c, len, &log);
  if (st) {
    bool keep;
    st = ci_remember_failure(rt, ci, &c, st, &log, &keep);
    if (!keep) {
      kc__sb_free(&log);
      c.edges = NULL; /* ci's */
      kc__closure_free(rt, &c);
      kc__ci_free(rt, ci);
      return st;
    }
  }
  kc__sb_free(&log);
  c.edges = NULL; /* now owned by ci */
  kc__closure_free(rt, &c);
  ci_publish(rt, ci, w);
  *out = ci;
  return KC_OK;
}

/* Finds or makes the code instance of spec valid at world w. One compile
 * per miss however many threads ask: the spec's lock, re-checked. */
KC__NOINLINE kc_status kc__ci_get(kc_runtime *rt, kc__spec *spec, kc_world w, kc__ci **out) {
  kc__ci *ci = kc__ci_find(spec, w);
  if (!ci) {
    kc__lock(&spec->lock);
    ci = kc__ci_find(spec, w);
    kc_status st = ci ? KC_OK : ci_make(rt, spec, w, &ci);
    kc__unlock(&spec->lock);
    if (st) return st;
  }
  if (ci->status) return kc__err(rt, ci->status, "%s", ci->error);
  *out = ci;
  return KC_OK;
}

/* The source of spec's translation unit at world w: its code instance's
 * if that kept it, else the unit made again (kc_kernel_source). */
kc_status kc__ci_source(kc_runtime *rt, kc__spec *spec, kc_world w, char **out) {
  kc__ci *ci = kc__ci_find(spec, w);
  if (ci && ci->source) {
    *out = kc__strdup(rt, ci->source);
    return *out ? KC_OK : kc__err(rt, KC_ENOMEM, "out of memory");
  }
  kc__closure c;
  kc__param *params;
  uint32_t n;
  size_t len;
  kc_status st = prepare(rt, spec, w, &c, &params, &n, out, &len);
  if (st) return st;
  kc__free_params(rt, params, n);
  kc__closure_free(rt, &c);
  return KC_OK;
}
