/* SPDX-License-Identifier: MIT */
/*
 * test_model.c -- model-based property test of the world-age cache itself,
 * without a compiler. Thousands of random sequences of define, identical
 * redefine, undefine, pin, unpin, launch, context reset, kernel source and
 * handle re-creation run against kcache (on the hash backend of hashbe.c,
 * which "compiles" the translation unit kcache assembled into a digest of
 * the definitions it holds) and against a reference that keeps every world
 * as a plain table and recomputes everything from scratch.
 *
 * After every step:
 *  - statuses and worlds agree (kc_define's new world, an identical text
 *    making none, kc_undefine of nothing, pins and their nesting);
 *  - a launch runs exactly the closure visible at the caller's world (the
 *    digest it writes), or fails as the reference says (not defined,
 *    recursion);
 *  - kcache compiles exactly when no earlier compile of that
 *    specialization is valid at that world, links exactly when the
 *    context has not loaded that code since its last reset, and clips
 *    (invalidates) exactly the code still valid in the latest world that
 *    looked up the name that changed;
 *  - the code instance's world range is exactly the largest range around
 *    its compile world in which every name it looked up has the same
 *    definition (KC_WORLD_FOREVER while that holds in the latest world).
 *
 *   KC_MODEL_SEQUENCES (default 10000) of KC_MODEL_OPS steps (default 80),
 *   then KC_MODEL_LONG (default 100) of 1000 steps; KC_MODEL_SEED (default 1).
 */
#include "rel.h"

#include "hashbe.h"

#include <stdlib.h>

/* ------------------------------------------------------------ the names */

#define NF 5 /* helpers f0..f4 */
#define NK 3 /* kernels k0..k2 */
#define NNAMES (NF + NK)
#define MAXCALLS 3
#define MAXOPS 1000
#define MAXWORLDS (MAXOPS + 2)
#define MAXVERS (MAXOPS + 2)

static const char *const names[NNAMES] = {"f0", "f1", "f2", "f3", "f4", "k0", "k1", "k2"};
static bool is_kernel(int n) { return n >= NF; }

/* One definition: its text and whom it calls (the reference never parses). */
typedef struct ver {
  int name;
  int calls[MAXCALLS];
  int ncalls;
  char text[320];
} ver;

/* Specializations: each kernel without parameters and with P=1. */
#define NPARAMS 2
static const char *const params[NPARAMS] = {NULL, "P=1"};
#define NSPECS (NK * NPARAMS)
#define MAXCIS 256

/* A compile the reference expects kcache to have made. */
typedef struct rci {
  kc_world at; /* the world it was compiled in */
  uint32_t lookups; /* names looked up (bit per name) */
} rci;

#define NCTX 2

typedef struct model {
  /* the reference */
  ver vers[MAXVERS];
  int nvers;
  int table[MAXWORLDS][NNAMES]; /* version visible per world (0: none); world 0 unused */
  kc_world latest;
  kc_world pinned;
  uint32_t pin_depth;
  rci cis[NSPECS][MAXCIS];
  int ncis[NSPECS];
  /* per context: the code linked since its last reset (spec * MAXCIS + ci) */
  bool linked[NCTX][NSPECS * MAXCIS];
  uint64_t compiles, links, invalidations;
  /* kc_collect: once it ran, ranges may reach into dead worlds (freed
   * definitions no longer bound them), so the counts are checked loosely:
   * results stay exact, code that a live world can use is never recompiled,
   * and the definitions kept are exactly those visible in a live world. */
  bool collected;
  bool freed[MAXVERS]; /* versions kc_collect must have freed */
  kc_world seen[NSPECS][64]; /* live worlds in which a spec ran since */
  int nseen[NSPECS];
  uint64_t collects, collected_cis;
  /* kcache */
  kc_runtime *rt;
  kc_context *ctx[NCTX];
  kc_buffer *buf[NCTX];
  kc_kernel *handles[NSPECS + 1]; /* the last: a second handle on spec 0 */
  /* the sequence, for the message of a failure */
  uint64_t seq;
  char log[16][200];
  int nlog;
  uint64_t rng;
} model;

static void note(model *m, const char *fmt, ...) KCT_PRINTF(2, 3);
static void note(model *m, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m->log[m->nlog++ % 16], sizeof m->log[0], fmt, ap);
  va_end(ap);
}

static void bad(model *m, const char *fmt, ...) KCT_PRINTF(2, 3);
static void bad(model *m, const char *fmt, ...) {
  char what[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  char steps[16 * 210] = "";
  int first = m->nlog > 16 ? m->nlog - 16 : 0;
  for (int i = first; i < m->nlog; i++) {
    size_t l = strlen(steps);
    snprintf(steps + l, sizeof steps - l, "  %d: %s\n", i, m->log[i % 16]);
  }
  fail_msg("sequence %llu (KC_MODEL_SEED=%llu): %s\nlast steps:\n%s(kcache says: %s)",
           (unsigned long long)m->seq, (unsigned long long)rel_env_u64("KC_MODEL_SEED", 1), what, steps,
           kc_errmsg(m->rt));
}

static kc_world current(const model *m) { return m->pin_depth ? m->pinned : m->latest; }

static void check_relaxed_launch(model *m, int s, kc_world w, const char *what);
static void check_relaxed_range(model *m, const kc_code_info *info, kc_world w, uint32_t lookups);

/* ------------------------------------------------------------ reference */

typedef struct resolved {
  kc_status st;
  uint32_t closure; /* definitions in the translation unit */
  uint32_t lookups; /* names looked up: the entry and every call of a definition visited */
} resolved;

static bool visit(const model *m, kc_world w, int n, int *state, resolved *r) {
  state[n] = 1;
  const ver *v = &m->vers[m->table[w][n]];
  for (int i = 0; i < v->ncalls; i++) {
    int c = v->calls[i];
    r->lookups |= 1u << c;
    if (!m->table[w][c]) continue;
    if (state[c] == 1) return false;
    if (state[c] == 0 && !visit(m, w, c, state, r)) return false;
  }
  state[n] = 2;
  r->closure |= 1u << n;
  return true;
}

static resolved resolve(const model *m, int entry, kc_world w) {
  resolved r = {KC_OK, 0, 1u << entry};
  if (!m->table[w][entry]) {
    r.st = KC_ENOTFOUND;
    return r;
  }
  int state[NNAMES] = {0};
  if (!visit(m, w, entry, state, &r)) r.st = KC_ERECURSION;
  return r;
}

static bool same_lookups(const model *m, uint32_t lookups, kc_world a, kc_world b) {
  for (int n = 0; n < NNAMES; n++)
    if ((lookups >> n & 1) && m->table[a][n] != m->table[b][n]) return false;
  return true;
}

/* The largest range of worlds around ci->at in which its lookups do not change. */
static void ci_range(const model *m, const rci *ci, kc_world *min, kc_world *max) {
  kc_world lo = ci->at, hi = ci->at;
  while (lo > 1 && same_lookups(m, ci->lookups, lo - 1, ci->at)) lo--;
  while (hi < m->latest && same_lookups(m, ci->lookups, hi + 1, ci->at)) hi++;
  *min = lo;
  *max = hi == m->latest ? KC_WORLD_FOREVER : hi;
}

static int covering_ci(const model *m, int spec, kc_world w) {
  for (int c = 0; c < m->ncis[spec]; c++) {
    kc_world lo, hi;
    ci_range(m, &m->cis[spec][c], &lo, &hi);
    if (lo <= w && w <= hi) return c;
  }
  return -1;
}

static uint64_t digest_of(const model *m, int entry, const char *param, kc_world w, uint32_t closure) {
  hashbe_def defs[NNAMES];
  uint32_t n = 0;
  for (int i = 0; i < NNAMES; i++)
    if (closure >> i & 1) {
      const ver *v = &m->vers[m->table[w][i]];
      defs[n++] = (hashbe_def){names[i], v->text, strlen(v->text)};
    }
  return hashbe_digest(param ? param : "", defs, n, names[entry]);
}

/* A new world in which name has version v (0: none). */
static void ref_change(model *m, int name, int v) {
  /* code still valid in the latest world that looked the name up is clipped */
  for (int s = 0; s < NSPECS; s++)
    for (int c = 0; c < m->ncis[s]; c++) {
      kc_world lo, hi;
      ci_range(m, &m->cis[s][c], &lo, &hi);
      if (hi == KC_WORLD_FOREVER && (m->cis[s][c].lookups >> name & 1)) m->invalidations++;
    }
  m->latest++;
  memcpy(m->table[m->latest], m->table[m->latest - 1], sizeof m->table[0]);
  m->table[m->latest][name] = v;
}

/* ------------------------------------------------------------- the steps */

static uint64_t defs_kept(const model *m) {
  uint64_t n = 0;
  for (int v = 1; v <= m->nvers; v++) n += !m->freed[v];
  return n;
}

static void check_counters(model *m, const char *after) {
  kc_stats s;
  kc_stats_get(m->rt, &s);
  if (s.definitions != defs_kept(m))
    bad(m, "after %s: kcache keeps %llu definitions, the reference %llu", after,
        (unsigned long long)s.definitions, (unsigned long long)defs_kept(m));
  if (m->collected) {
    if (s.world != m->latest || s.compile_failures || s.code_instances + s.collected != s.compiles)
      bad(m,
          "after %s: world %llu (reference %llu), %llu compile failures, %llu code instances + %llu "
          "collected != %llu compiles",
          after, (unsigned long long)s.world, (unsigned long long)m->latest,
          (unsigned long long)s.compile_failures, (unsigned long long)s.code_instances,
          (unsigned long long)s.collected, (unsigned long long)s.compiles);
    m->compiles = s.compiles; /* the baseline for the next step */
  } else if (s.compiles != m->compiles || s.links != m->links || s.invalidations != m->invalidations ||
             s.world != m->latest || s.compile_failures)
    bad(m,
        "after %s: kcache counts %llu compiles, %llu links, %llu invalidations, world %llu, %llu "
        "compile failures; the reference %llu, %llu, %llu, world %llu, 0",
        after, (unsigned long long)s.compiles, (unsigned long long)s.links,
        (unsigned long long)s.invalidations, (unsigned long long)s.world,
        (unsigned long long)s.compile_failures, (unsigned long long)m->compiles, (unsigned long long)m->links,
        (unsigned long long)m->invalidations, (unsigned long long)m->latest);
  if (kc_world_current(m->rt) != current(m))
    bad(m, "after %s: kc_world_current is %llu, expected %llu", after,
        (unsigned long long)kc_world_current(m->rt), (unsigned long long)current(m));
}

static void make_text(model *m, ver *v) {
  static unsigned tag;
  char calls[128] = "";
  int n = v->name;
  for (int i = 0; i < v->ncalls; i++) {
    size_t l = strlen(calls);
    snprintf(calls + l, sizeof calls - l, "%s(%s) + ", names[v->calls[i]], is_kernel(n) ? "1" : "x");
  }
  /* a name in a comment is not a call: the scanner must skip it */
  char decoy[48] = "";
  if (rel_below(&m->rng, 4) == 0)
    snprintf(decoy, sizeof decoy, " /* not %s(x) */", names[rel_below(&m->rng, NF)]);
  if (is_kernel(n))
    snprintf(v->text, sizeof v->text, "KC_KERNEL void %s(KC_GLOBAL int *y) { y[0] = %s%u; }%s /* v%u */",
             names[n], calls, rel_below(&m->rng, 100), decoy, ++tag);
  else
    snprintf(v->text, sizeof v->text, "KC_DEVICE int %s(int x) { return %s%u; }%s /* v%u */", names[n], calls,
             rel_below(&m->rng, 100), decoy, ++tag);
}

static void step_define(model *m) {
  if (m->nvers + 1 >= MAXVERS) return;
  int n = (int)rel_below(&m->rng, NNAMES);
  ver *v = &m->vers[++m->nvers];
  memset(v, 0, sizeof *v);
  v->name = n;
  v->ncalls = (int)rel_below(&m->rng, is_kernel(n) ? MAXCALLS + 1 : 3);
  for (int i = 0; i < v->ncalls; i++) {
    /* mostly calls down the list (no cycles); sometimes anywhere, itself included */
    int lo = is_kernel(n) ? 0 : n + 1;
    if (lo >= NF || rel_below(&m->rng, 8) == 0) lo = 0;
    v->calls[i] = lo + (int)rel_below(&m->rng, (uint32_t)(NF - lo));
  }
  make_text(m, v);
  note(m, "define %s: %s", names[n], v->text);
  kc_world w = 0;
  kc_status st = kc_define(m->rt, names[n], v->text, &w);
  if (st) bad(m, "kc_define(%s) returned %s", names[n], kc_status_name(st));
  ref_change(m, n, m->nvers);
  if (w != m->latest)
    bad(m, "kc_define(%s) made world %llu, expected %llu", names[n], (unsigned long long)w,
        (unsigned long long)m->latest);
  check_counters(m, "define");
}

static void step_define_same(model *m) {
  int n = (int)rel_below(&m->rng, NNAMES);
  int v = m->table[m->latest][n];
  if (!v) return;
  note(m, "define %s again with the same text", names[n]);
  kc_world w = 0;
  kc_status st = kc_define(m->rt, names[n], m->vers[v].text, &w);
  if (st || w != m->latest)
    bad(m, "an identical kc_define(%s) returned %s, world %llu (latest %llu)", names[n], kc_status_name(st),
        (unsigned long long)w, (unsigned long long)m->latest);
  check_counters(m, "identical define");
}

static void step_undefine(model *m) {
  int n = (int)rel_below(&m->rng, NNAMES);
  note(m, "undefine %s", names[n]);
  kc_world w = 0;
  kc_status st = kc_undefine(m->rt, names[n], &w);
  if (!m->table[m->latest][n]) {
    if (st != KC_ENOTFOUND) bad(m, "kc_undefine(%s) of nothing returned %s", names[n], kc_status_name(st));
  } else {
    if (st) bad(m, "kc_undefine(%s) returned %s", names[n], kc_status_name(st));
    ref_change(m, n, 0);
    if (w != m->latest)
      bad(m, "kc_undefine(%s) made world %llu, expected %llu", names[n], (unsigned long long)w,
          (unsigned long long)m->latest);
  }
  check_counters(m, "undefine");
}

static void step_pin(model *m) {
  note(m, "pin (depth %u)", m->pin_depth);
  kc_world w = 0;
  kc_status st = kc_pin(m->rt, &w);
  if (st) bad(m, "kc_pin returned %s", kc_status_name(st));
  if (!m->pin_depth++) m->pinned = m->latest;
  if (w != m->pinned)
    bad(m, "kc_pin pinned %llu, expected %llu", (unsigned long long)w, (unsigned long long)m->pinned);
  check_counters(m, "pin");
}

static void step_unpin(model *m) {
  note(m, "unpin (depth %u)", m->pin_depth);
  kc_status st = kc_unpin(m->rt);
  if (st != (m->pin_depth ? KC_OK : KC_EBUSY)) bad(m, "kc_unpin returned %s", kc_status_name(st));
  if (m->pin_depth) m->pin_depth--;
  check_counters(m, "unpin");
}

static int spec_of_handle(int h) { return h == NSPECS ? 0 : h; }
static int entry_of_spec(int s) { return NF + s / NPARAMS; }
static const char *param_of_spec(int s) { return params[s % NPARAMS]; }

static void step_launch(model *m) {
  int h = (int)rel_below(&m->rng, NSPECS + 1), s = spec_of_handle(h), c = (int)rel_below(&m->rng, NCTX);
  int entry = entry_of_spec(s);
  kc_world w = current(m);
  note(m, "launch %s(%s) on context %d in world %llu", names[entry], param_of_spec(s) ? param_of_spec(s) : "",
       c, (unsigned long long)w);
  uint64_t marker = 0x5eed5eed5eed5eedull, out = 0;
  kc_status st = kc_buffer_write(m->buf[c], 0, &marker, sizeof marker);
  if (st) bad(m, "kc_buffer_write: %s", kc_status_name(st));
  kc_dim3 one = {1, 1, 1};
  kc_arg args[] = {KC_ARG_BUF(m->buf[c])};
  st = kc_launch(m->handles[h], m->ctx[c], &one, &one, args, 1);
  resolved r = resolve(m, entry, w);
  if (st != r.st) bad(m, "kc_launch returned %s, the reference %s", kc_status_name(st), kc_status_name(r.st));
  if (st) {
    check_counters(m, "failed launch");
    return;
  }
  int ci = -1;
  if (m->collected) {
    check_relaxed_launch(m, s, w, "launch");
  } else {
    ci = covering_ci(m, s, w);
    if (ci < 0) {
      if (m->ncis[s] == MAXCIS) bad(m, "too many compiles for the model");
      ci = m->ncis[s]++;
      m->cis[s][ci] = (rci){w, r.lookups};
      m->compiles++;
    }
    if (!m->linked[c][s * MAXCIS + ci]) {
      m->linked[c][s * MAXCIS + ci] = true;
      m->links++;
    }
  }
  if ((st = kc_buffer_read(m->buf[c], 0, &out, sizeof out))) bad(m, "kc_buffer_read: %s", kc_status_name(st));
  uint64_t want = digest_of(m, entry, param_of_spec(s), w, r.closure);
  if (out != want) {
    char got[64] = "";
    for (int i = 0; i < NNAMES; i++)
      if (r.closure >> i & 1) {
        size_t l = strlen(got);
        snprintf(got + l, sizeof got - l, "%s ", names[i]);
      }
    bad(m, "the launch ran code with digest %016llx; the closure at world %llu (%s) has %016llx",
        (unsigned long long)out, (unsigned long long)w, got, (unsigned long long)want);
  }
  check_counters(m, "launch");
  kc_code_info info;
  if ((st = kc_kernel_code(m->handles[h], &info))) bad(m, "kc_kernel_code returned %s", kc_status_name(st));
  if (m->collected) {
    check_relaxed_range(m, &info, w, r.lookups);
    check_counters(m, "kc_kernel_code");
    return;
  }
  kc_world lo, hi;
  ci_range(m, &m->cis[s][ci], &lo, &hi);
  if (info.min_world != lo || info.max_world != hi)
    bad(m, "the code instance compiled in world %llu covers %llu..%llu; the reference %llu..%llu",
        (unsigned long long)m->cis[s][ci].at, (unsigned long long)info.min_world,
        (unsigned long long)info.max_world, (unsigned long long)lo, (unsigned long long)hi);
  check_counters(m, "kc_kernel_code");
}

static void step_compile(model *m) {
  int h = (int)rel_below(&m->rng, NSPECS + 1), s = spec_of_handle(h), entry = entry_of_spec(s);
  kc_world w = current(m);
  note(m, "kc_kernel_compile %s(%s) in world %llu", names[entry], param_of_spec(s) ? param_of_spec(s) : "",
       (unsigned long long)w);
  kc_status st = kc_kernel_compile(m->handles[h]);
  resolved r = resolve(m, entry, w);
  if (st != r.st)
    bad(m, "kc_kernel_compile returned %s, the reference %s", kc_status_name(st), kc_status_name(r.st));
  if (!st && m->collected) {
    check_relaxed_launch(m, s, w, "kc_kernel_compile");
  } else if (!st && covering_ci(m, s, w) < 0) {
    if (m->ncis[s] == MAXCIS) bad(m, "too many compiles for the model");
    m->cis[s][m->ncis[s]++] = (rci){w, r.lookups};
    m->compiles++;
  }
  check_counters(m, "kc_kernel_compile");
}

static void step_source(model *m) {
  int h = (int)rel_below(&m->rng, NSPECS + 1), s = spec_of_handle(h), entry = entry_of_spec(s);
  kc_world w = current(m);
  note(m, "kc_kernel_source %s(%s) in world %llu", names[entry], param_of_spec(s) ? param_of_spec(s) : "",
       (unsigned long long)w);
  char *src = NULL;
  kc_status st = kc_kernel_source(m->handles[h], &src);
  resolved r = resolve(m, entry, w);
  if (st != r.st)
    bad(m, "kc_kernel_source returned %s, the reference %s", kc_status_name(st), kc_status_name(r.st));
  if (st) {
    if (src) bad(m, "kc_kernel_source failed but returned a string");
    return;
  }
  char why[256];
  uint64_t d;
  if (!hashbe_parse(src, strlen(src), names[entry], &d, why, sizeof why))
    bad(m, "kc_kernel_source: %s\n%s", why, src);
  if (d != digest_of(m, entry, param_of_spec(s), w, r.closure))
    bad(m, "kc_kernel_source is not the closure of world %llu:\n%s", (unsigned long long)w, src);
  kc_free(m->rt, src);
  check_counters(m, "kc_kernel_source");
}

static bool is_live(const model *m, kc_world w) { return w == m->latest || (m->pin_depth && w == m->pinned); }

/* After a collect: code for a live world that ran before is still there. */
static void check_relaxed_launch(model *m, int s, kc_world w, const char *what) {
  kc_stats st;
  kc_stats_get(m->rt, &st);
  bool before = false;
  for (int i = 0; i < m->nseen[s] && !before; i++) before = m->seen[s][i] == w;
  if (before && st.compiles != m->compiles)
    bad(m, "%s compiled %s(%s) again in world %llu, where it ran before (kc_collect freed live code?)", what,
        names[entry_of_spec(s)], param_of_spec(s) ? param_of_spec(s) : "", (unsigned long long)w);
  if (!before && m->nseen[s] < 64) m->seen[s][m->nseen[s]++] = w;
}

/* After a collect: the range holds w, and every live world in it sees the
 * same definitions for every name the code looked up. */
static void check_relaxed_range(model *m, const kc_code_info *info, kc_world w, uint32_t lookups) {
  if (info->min_world > w || w > info->max_world)
    bad(m, "the code for world %llu covers %llu..%llu", (unsigned long long)w,
        (unsigned long long)info->min_world, (unsigned long long)info->max_world);
  kc_world live[2] = {m->latest, m->pin_depth ? m->pinned : m->latest};
  for (int i = 0; i < 2; i++)
    if (info->min_world <= live[i] && live[i] <= info->max_world && !same_lookups(m, lookups, live[i], w))
      bad(m, "the code for world %llu covers %llu..%llu, but live world %llu sees other definitions",
          (unsigned long long)w, (unsigned long long)info->min_world, (unsigned long long)info->max_world,
          (unsigned long long)live[i]);
}

static void step_collect(model *m) {
  note(m, "kc_collect (latest %llu, pinned %llu)", (unsigned long long)m->latest,
       (unsigned long long)(m->pin_depth ? m->pinned : 0));
  kc_stats before;
  kc_stats_get(m->rt, &before);
  kc_collect_info info;
  kc_status st = kc_collect(m->rt, &info);
  if (st) bad(m, "kc_collect returned %s", kc_status_name(st));
  /* every version visible in no live world goes */
  for (int v = 1; v <= m->nvers; v++) {
    if (m->freed[v]) continue;
    bool seen = false;
    for (int n = 0; n < NNAMES && !seen; n++)
      seen = m->table[m->latest][n] == v || (m->pin_depth && m->table[m->pinned][n] == v);
    if (!seen) m->freed[v] = true;
  }
  kc_stats after;
  kc_stats_get(m->rt, &after);
  if (after.collected != before.collected + info.code_instances ||
      after.code_instances + info.code_instances != before.code_instances ||
      after.definitions + info.definitions != before.definitions)
    bad(m,
        "kc_collect says it freed %llu code instances and %llu definitions; the counters went from "
        "%llu/%llu/%llu to %llu/%llu/%llu (collected/alive/definitions)",
        (unsigned long long)info.code_instances, (unsigned long long)info.definitions,
        (unsigned long long)before.collected, (unsigned long long)before.code_instances,
        (unsigned long long)before.definitions, (unsigned long long)after.collected,
        (unsigned long long)after.code_instances, (unsigned long long)after.definitions);
  m->collected = true;
  m->collects++;
  m->collected_cis += info.code_instances;
  for (int s = 0; s < NSPECS; s++) {
    int n = 0;
    for (int i = 0; i < m->nseen[s]; i++)
      if (is_live(m, m->seen[s][i])) m->seen[s][n++] = m->seen[s][i];
    m->nseen[s] = n;
  }
  check_counters(m, "kc_collect");
}

static void step_reset(model *m) {
  int c = (int)rel_below(&m->rng, NCTX);
  note(m, "reset context %d", c);
  kc_status st = kc_context_reset(m->ctx[c]);
  if (st) bad(m, "kc_context_reset returned %s", kc_status_name(st));
  memset(m->linked[c], 0, sizeof m->linked[c]);
  check_counters(m, "reset");
}

static void step_new_handle(model *m) {
  int h = (int)rel_below(&m->rng, NSPECS + 1), s = spec_of_handle(h);
  note(m, "new handle %d on %s(%s)", h, names[entry_of_spec(s)], param_of_spec(s) ? param_of_spec(s) : "");
  kc_kernel_destroy(m->handles[h]);
  m->handles[h] = NULL;
  kc_status st = kc_kernel_create(m->rt, names[entry_of_spec(s)], param_of_spec(s), &m->handles[h]);
  if (st) bad(m, "kc_kernel_create returned %s", kc_status_name(st));
}

/* -------------------------------------------------------------- the test */

static void model_open(model *m, uint64_t seq, uint64_t seed) {
  memset(m, 0, sizeof *m);
  m->seq = seq;
  m->rng = (seed * 0x9E3779B97F4A7C15ull) ^ (seq + 1) * 0xD1B54A32D192ED03ull;
  if (!m->rng) m->rng = 1;
  m->latest = 1;
  kc_options opt;
  kc_options_init(&opt);
  opt.cache_disable = 1;
  kc_status st = kc__runtime_open(&opt, &kc__backend_hash, &m->rt);
  if (st) fail_msg("kc__runtime_open: %s: %s", kc_status_name(st), kc_errmsg(NULL));
  assert_string_equal(kc_runtime_backend(m->rt), "hash");
  for (int c = 0; c < NCTX; c++) {
    KCT_OK(m->rt, kc_context_create(m->rt, 0, &m->ctx[c]));
    KCT_OK(m->rt, kc_buffer_create(m->ctx[c], sizeof(uint64_t), &m->buf[c]));
  }
  for (int h = 0; h <= NSPECS; h++) {
    int s = spec_of_handle(h);
    KCT_OK(m->rt, kc_kernel_create(m->rt, names[entry_of_spec(s)], param_of_spec(s), &m->handles[h]));
  }
}

static void test_random_sequences(void **state) {
  (void)state;
  uint64_t nseq = rel_env_u64("KC_MODEL_SEQUENCES", 10000);
  uint64_t nops = rel_env_u64("KC_MODEL_OPS", 80);
  uint64_t nlong = rel_env_u64("KC_MODEL_LONG", 100);
  uint64_t seed = rel_env_u64("KC_MODEL_SEED", 1);
  if (nops > MAXOPS) nops = MAXOPS;
  model *m = kct_calloc(sizeof *m);
  uint64_t steps = 0, launches = 0, compiles = 0, defines = 0, worlds = 0, collects = 0, collected = 0;
  double t0 = rel_now();
  /* many short sequences, then a few long ones (deep histories, old pins) */
  for (uint64_t seq = 0; seq < nseq + nlong; seq++) {
    model_open(m, seq, seed);
    uint64_t len = seq < nseq ? nops : MAXOPS;
    for (uint64_t i = 0; i < len; i++) {
      uint32_t r = rel_below(&m->rng, 100);
      if (r < 28) step_define(m), defines++;
      else if (r < 33) step_define_same(m);
      else if (r < 40) step_undefine(m);
      else if (r < 47) step_pin(m);
      else if (r < 55) step_unpin(m);
      else if (r < 88) step_launch(m), launches++;
      else if (r < 91) step_compile(m);
      else if (r < 94) step_source(m);
      else if (r < 96) step_reset(m);
      else if (r < 98) step_new_handle(m);
      else step_collect(m), collects++;
      steps++;
    }
    while (m->pin_depth) step_unpin(m);
    compiles += m->compiles;
    collected += m->collected_cis;
    worlds += m->latest;
    kc_runtime_destroy(m->rt);
  }
  kct_free(m);
  rel_summary(
      "model: %llu sequences checked (%llu of %llu steps, %llu of %u; %llu steps: %llu launches, "
      "%llu defines, %llu compiles, %llu worlds, %llu collects freeing %llu code instances) in %.1f s, "
      "seed %llu, 0 mismatches",
      (unsigned long long)(nseq + nlong), (unsigned long long)nseq, (unsigned long long)nops,
      (unsigned long long)nlong, MAXOPS, (unsigned long long)steps, (unsigned long long)launches,
      (unsigned long long)defines, (unsigned long long)compiles, (unsigned long long)worlds,
      (unsigned long long)collects, (unsigned long long)collected, rel_now() - t0, (unsigned long long)seed);
}

/* The backend's own checks reject what kcache must never hand a compiler. */
static void test_hash_backend_parser(void **state) {
  (void)state;
  kc_options opt;
  kc_options_init(&opt);
  opt.cache_disable = 1;
  kc_runtime *rt = NULL;
  KCT_OK(NULL, kc__runtime_open(&opt, &kc__backend_hash, &rt));
  KCT_OK(rt, kc_define(rt, "f1", "KC_DEVICE int f1(int x) { return x; }", NULL));
  KCT_OK(rt, kc_define(rt, "f0", "KC_DEVICE int f0(int x) { return f1(x) + 1; }", NULL));
  KCT_OK(rt, kc_define(rt, "k0", "KC_KERNEL void k0(KC_GLOBAL int *y) { y[0] = f0(1); }", NULL));
  kc_kernel *k = NULL;
  KCT_OK(rt, kc_kernel_create(rt, "k0", "P=1", &k));
  char *src = NULL;
  KCT_OK(rt, kc_kernel_source(k, &src));
  char why[256];
  uint64_t d;
  if (!hashbe_parse(src, strlen(src), "k0", &d, why, sizeof why)) fail_msg("%s\n%s", why, src);
  /* swapped blocks: a caller before its callee */
  char *f0 = strstr(src, "#line 1 \"f0\""), *f1 = strstr(src, "#line 1 \"f1\""),
       *k0 = strstr(src, "#line 1 \"k0\"");
  assert_non_null(f0);
  assert_non_null(f1);
  assert_non_null(k0);
  assert_true(f1 < f0 && f0 < k0);
  size_t len = strlen(src);
  char *bad_order = malloc(len + 1);
  assert_non_null(bad_order);
  size_t pre = (size_t)(f1 - src), n1 = (size_t)(f0 - f1), n0 = (size_t)(k0 - f0);
  memcpy(bad_order, src, pre);
  memcpy(bad_order + pre, f0, n0);
  memcpy(bad_order + pre + n0, f1, n1);
  strcpy(bad_order + pre + n0 + n1, k0);
  assert_false(hashbe_parse(bad_order, len, "k0", &d, why, sizeof why));
  KCT_CONTAINS(why, "comes after");
  /* not the entry last */
  assert_false(hashbe_parse(src, len, "f0", &d, why, sizeof why));
  free(bad_order);
  kc_free(rt, src);
  kc_runtime_destroy(rt);
}

/* A header on disk that changes while the backend compiles, on a backend
 * that tells nothing of what it read (OpenCL, CUDA: kcache follows the
 * #include lines itself, before the compile): that code serves its launch
 * only, the next launch compiles again, and once the file stays put its
 * code is cached. */
typedef struct edit {
  char path[KCT_DIR_LEN + 16];
  int left; /* edits still to make, one per compile */
} edit;

static void edit_header(void *ud) {
  edit *e = ud;
  if (e->left-- <= 0) return;
  FILE *f = fopen(e->path, "w");
  if (f) {
    fprintf(f, "#define HV %d\n", 10 + e->left);
    fclose(f);
  }
}

static void test_header_changed_during_a_compile(void **state) {
  (void)state;
  char dir[KCT_DIR_LEN], opts[KCT_DIR_LEN + 8];
  kct_mkdtemp(dir, sizeof dir, "model-hdr");
  edit e = {.left = 0};
  snprintf(e.path, sizeof e.path, "%s/hx.h", dir);
  FILE *f = fopen(e.path, "w");
  assert_non_null(f);
  fputs("#define HV 1\n", f);
  fclose(f);
  snprintf(opts, sizeof opts, "-I%s", dir);
  kc_options opt;
  kc_options_init(&opt);
  opt.cache_disable = 1;
  opt.compile_options = opts;
  kc_runtime *rt = NULL;
  KCT_OK(NULL, kc__runtime_open(&opt, &kc__backend_hash, &rt));
  KCT_OK(rt,
         kc_define(rt, "kh", "#include <hx.h>\nKC_KERNEL void kh(KC_GLOBAL int *y) { y[0] = HV; }", NULL));
  kc_context *ctx = kct_context(rt);
  kc_buffer *b = kct_buffer(rt, ctx, 4);
  kc_kernel *k = kct_kernel(rt, "kh", NULL);
  kc_dim3 one = {1, 1, 1};
  kc_arg args[] = {KC_ARG_BUF(b)};
  hashbe_on_compile(edit_header, &e);
  e.left = 1; /* the first compile sees the file change under it */
  uint64_t c0 = hashbe_compiles();
  KCT_OK(rt, kc_launch(k, ctx, &one, &one, args, 1));
  KCT_OK(rt, kc_launch(k, ctx, &one, &one, args, 1)); /* not trusted: compiled again */
  assert_int_equal(hashbe_compiles(), c0 + 2);
  KCT_OK(rt, kc_launch(k, ctx, &one, &one, args, 1)); /* settled: cached */
  assert_int_equal(hashbe_compiles(), c0 + 2);
  hashbe_on_compile(NULL, NULL);
  kc_kernel_destroy(k);
  kc_runtime_destroy(rt);
  kct_rmrf(dir);
}

int main(int argc, char **argv) {
  int rc = kct_main_init(argc, argv);
  if (rc >= 0) return rc;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hash_backend_parser),
      cmocka_unit_test(test_header_changed_during_a_compile),
      cmocka_unit_test(test_random_sequences),
  };
  return cmocka_run_group_tests_name("model", tests, NULL, NULL);
}
