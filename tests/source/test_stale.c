/* SPDX-License-Identifier: MIT */
/*
 * test_stale.c -- never stale (issue 22), on the backend of the suite: a
 * name that a kernel mentions before it is defined (a macro, a constant, a
 * type, an enumerator) reaches the kernel once it is defined; names tested
 * by the preprocessor (#ifdef, #ifndef, defined(), #if expressions) follow
 * their definitions; a failed compile is remembered for its worlds only;
 * chains and fan-ins of 100,000 definitions resolve without recursion.
 */
#include "source.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

/* Launches `name`: KC_OK and y[0] in *v, or the failure's status. */
static kc_status try_run(kct_fixture *f, const char *name, float *v) {
  kc_kernel *k = kct_kernel(f->rt, name, NULL);
  memset(f->out, 0, sizeof f->out);
  kc_status st = kct_run(k, f->ctx, f->buf, KCT_FX_N, f->out);
  kc_kernel_destroy(k);
  *v = f->out[0];
  return st;
}

static uint64_t failures(kc_runtime *rt) { return kct_stats(rt).compile_failures; }

/* A kernel that mentions `name` (its definition `def`) before it is
 * defined: the compile fails, and is remembered (a second launch compiles
 * nothing); defining it makes the kernel right; undefining it fails again;
 * defining it again works again. `use` is the kernel's expression. */
static void defined_later(kct_fixture *f, const char *kname, const char *name, const char *def,
                          const char *use, float want) {
  char src[512];
  snprintf(src, sizeof src, "KC_KERNEL void %s(KC_GLOBAL float *y) { y[kc_global_id(0)] = %s; }", kname, use);
  kct_define(f->rt, kname, src);
  float v;
  uint64_t fail0 = failures(f->rt), c0 = src_compiles(f->rt);
  assert_int_not_equal(try_run(f, kname, &v), KC_OK);
  assert_int_not_equal(try_run(f, kname, &v), KC_OK);
  if (failures(f->rt) != fail0 + 1)
    fail_msg("%s: %llu failed compiles, expected 1 (a failure is remembered for its worlds)", name,
             (unsigned long long)(failures(f->rt) - fail0));
  kct_define(f->rt, name, def);
  KCT_OK(f->rt, try_run(f, kname, &v));
  if (v != want) fail_msg("%s defined after %s: %g, expected %g", name, kname, v, want);
  assert_int_equal(src_compiles(f->rt), c0 + 1);
  KCT_OK(f->rt, kc_undefine(f->rt, name, NULL));
  assert_int_not_equal(try_run(f, kname, &v), KC_OK);
  assert_int_equal(failures(f->rt), fail0 + 2);
  kct_define(f->rt, name, def);
  KCT_OK(f->rt, try_run(f, kname, &v));
  assert_true(v == want);
}

void test_names_defined_after_their_users(void **state) {
  kct_fixture *f = *state;
  const char *cq = kct_backend == KC_BACKEND_OPENCL ? "__constant" : "static const";
  char konst[128];
  snprintf(konst, sizeof konst, "%s int KN = 9;", cq);
  defined_later(f, "k_macro", "N8", "#define N8 8", "(float)N8", 8.0f);
  defined_later(f, "k_const", "KN", konst, "(float)KN", 9.0f);
  defined_later(f, "k_type", "real_t", "typedef float real_t;", "(real_t)2.5f", 2.5f);
  defined_later(f, "k_enum", "Level", "enum Level { LOW = 3, HIGH = 5 };", "(float)HIGH", 5.0f);
  defined_later(f, "k_fnmacro", "TWICE", "#define TWICE(x) ((x) * 2)", "(float)TWICE(3)", 6.0f);
  defined_later(f, "k_struct", "Pair", "struct Pair { float a, b; };",
                "(float)sizeof(struct Pair) / sizeof(float)", 2.0f);
}

/* The preprocessor's tests of names follow their definitions: no stale
 * branch, in either direction, through every way of asking. */
void test_preprocessor_tests_follow_definitions(void **state) {
  kct_fixture *f = *state;
  kct_define(
      f->rt, "k_ifdef",
      "KC_KERNEL void k_ifdef(KC_GLOBAL float *y) {\n#ifdef FAST\n y[kc_global_id(0)] = 1.0f;\n#else\n "
      "y[kc_global_id(0)] = 2.0f;\n#endif\n}");
  kct_define(
      f->rt, "k_ifndef",
      "KC_KERNEL void k_ifndef(KC_GLOBAL float *y) {\n#ifndef FAST\n y[kc_global_id(0)] = 3.0f;\n#else\n "
      "y[kc_global_id(0)] = 4.0f;\n#endif\n}");
  kct_define(f->rt, "k_defined",
             "KC_KERNEL void k_defined(KC_GLOBAL float *y) {\n#if defined(FAST) && !defined ( SLOW )\n "
             "y[kc_global_id(0)] = 5.0f;\n#else\n y[kc_global_id(0)] = 6.0f;\n#endif\n}");
  kct_define(
      f->rt, "k_ifexpr",
      "KC_KERNEL void k_ifexpr(KC_GLOBAL float *y) {\n#if LEVEL > 2\n y[kc_global_id(0)] = 7.0f;\n#elif "
      "LEVEL\n y[kc_global_id(0)] = 8.0f;\n#else\n y[kc_global_id(0)] = 9.0f;\n#endif\n}");
  /* and through a macro of the table that tests it */
  kct_define(f->rt, "PICK", "#ifdef FAST\n#define PICK 10.0f\n#else\n#define PICK 11.0f\n#endif");
  kct_define(f->rt, "k_pick", "KC_KERNEL void k_pick(KC_GLOBAL float *y) { y[kc_global_id(0)] = PICK; }");
  struct {
    const char *kernel;
    float off, fast, slow_too;
  } want[] = {{"k_ifdef", 2, 1, 1}, {"k_ifndef", 3, 4, 4}, {"k_defined", 6, 5, 6}, {"k_pick", 11, 10, 10}};
  for (int round = 0; round < 2; round++) {
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
      if (src_run(f, want[i].kernel) != want[i].off)
        fail_msg("%s: stale with FAST undefined", want[i].kernel);
    kct_define(f->rt, "FAST", "#define FAST 1");
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
      if (src_run(f, want[i].kernel) != want[i].fast) fail_msg("%s: stale after FAST", want[i].kernel);
    kct_define(f->rt, "SLOW", "#define SLOW");
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
      if (src_run(f, want[i].kernel) != want[i].slow_too) fail_msg("%s: stale after SLOW", want[i].kernel);
    KCT_OK(f->rt, kc_undefine(f->rt, "FAST", NULL));
    KCT_OK(f->rt, kc_undefine(f->rt, "SLOW", NULL));
  }
  assert_true(src_run(f, "k_ifexpr") == 9.0f);
  kct_define(f->rt, "LEVEL", "#define LEVEL 1");
  assert_true(src_run(f, "k_ifexpr") == 8.0f);
  kct_define(f->rt, "LEVEL", "#define LEVEL 3");
  assert_true(src_run(f, "k_ifexpr") == 7.0f);
  KCT_OK(f->rt, kc_undefine(f->rt, "LEVEL", NULL));
  assert_true(src_run(f, "k_ifexpr") == 9.0f);
}

/* A failed compile is a code instance like any other: an unrelated
 * definition keeps it (no new compile), a name it mentioned ends it; and a
 * syntax error is not blamed on a local variable's name. */
void test_failures_live_in_worlds(void **state) {
  kct_fixture *f = *state;
  kct_define(
      f->rt, "k_bad",
      "KC_KERNEL void k_bad(KC_GLOBAL float *y) { float acc = 1.0f; y[kc_global_id(0)] = acc + MISSING; }");
  float v;
  uint64_t fail0 = failures(f->rt);
  kc_status st = try_run(f, "k_bad", &v);
  assert_int_equal(st, KC_ECOMPILE);
  KCT_CONTAINS(kc_errmsg(f->rt), "MISSING");
  kct_define(f->rt, "UNRELATED", "#define UNRELATED 1");
  assert_int_equal(try_run(f, "k_bad", &v), KC_ECOMPILE);
  assert_int_equal(failures(f->rt), fail0 + 1);
  kct_define(f->rt, "MISSING", "#define MISSING 2.0f");
  KCT_OK(f->rt, try_run(f, "k_bad", &v));
  assert_true(v == 3.0f);
  /* a call of a function nowhere defined is still named as such */
  kct_define(
      f->rt, "k_call",
      "KC_KERNEL void k_call(KC_GLOBAL float *y) { float acc = 1.0f; y[kc_global_id(0)] = nowhere(acc); }");
  assert_int_equal(try_run(f, "k_call", &v), KC_ENOTFOUND);
  KCT_CONTAINS(kc_errmsg(f->rt), "calls 'nowhere', which is neither defined");
  /* and only when the log names it as a word: here the call is in #if 0,
   * and the log names 'nowherex' (the oracle found a work directory's
   * random letters blamed this way) */
  kct_define(f->rt, "k_word",
             "KC_KERNEL void k_word(KC_GLOBAL float *y) {\n"
             "#if 0\n  nowhere(1.0f);\n#endif\n"
             "  y[kc_global_id(0)] = nowherex;\n}");
  assert_int_equal(try_run(f, "k_word", &v), KC_ECOMPILE);
  KCT_CONTAINS(kc_errmsg(f->rt), "nowherex");
  /* nor on a line that does not say it is undeclared: a compiler that
   * quotes the source line of another error names every call there (a
   * host compiler that writes what gcc would with the source at hand) */
  if (kct_backend == KC_BACKEND_HOST) {
    char dir[KCT_DIR_LEN], cc[KCT_DIR_LEN + 16];
    kct_mkdtemp(dir, sizeof dir, "quoting-cc");
    snprintf(cc, sizeof cc, "%s/cc", dir);
    kct_write_script(cc,
                     "#!/bin/sh\ncase \"$1\" in --version|-vv) exec %s \"$@\";; esac\n"
                     "echo \"k_quoted:1:70: error: expected expression before ';' token\"\n"
                     "echo \"    1 | y[kc_global_id(0)] = fabs(-4.0f) + ;\"\nexit 1\n",
                     kct_host_cc());
    kc_options o;
    kc_options_init(&o);
    o.backend = KC_BACKEND_HOST;
    o.host_cc = cc;
    o.cache_disable = 1;
    kc_runtime *rt = NULL;
    KCT_OK(NULL, kc_runtime_create(&o, &rt)); /* not kct_runtime: the fixture's teardown would destroy it */
    kct_define(rt, "k_quoted",
               "KC_KERNEL void k_quoted(KC_GLOBAL float *y) { y[kc_global_id(0)] = fabs(-4.0f) + ; }");
    kc_kernel *k = kct_kernel(rt, "k_quoted", NULL);
    assert_int_equal(kc_kernel_compile(k), KC_ECOMPILE);
    KCT_CONTAINS(kc_errmsg(rt), "expected expression");
    kc_kernel_destroy(k);
    kc_runtime_destroy(rt);
    kct_rmrf(dir);
  }
}

/* An enumerator in a world where its enum is not defined: the failure (or
 * the code) compiled there holds only where the enum's definitions say so,
 * so a thread pinned to an older world, where the enum declared it, still
 * gets that world's value (found by the oracle, test_oracle.c). */
typedef struct pinned_run {
  kct_fixture *f;
  pthread_barrier_t pinned, compiled;
  float got;
  kc_status st;
} pinned_run;

static void *pinned_launch(void *arg) {
  pinned_run *p = arg;
  kc_pin(p->f->rt, NULL);
  pthread_barrier_wait(&p->pinned);
  pthread_barrier_wait(&p->compiled); /* the latest world has compiled its failure */
  kc_context *ctx = NULL;
  kc_buffer *b = NULL;
  kc_kernel *k = NULL;
  float out[KCT_FX_N] = {0};
  p->st = kc_context_create(p->f->rt, 0, &ctx);
  if (!p->st) p->st = kc_buffer_create(ctx, KCT_FX_N * sizeof(float), &b);
  if (!p->st) p->st = kc_kernel_create(p->f->rt, "k_en", NULL, &k);
  if (!p->st) p->st = kct_run(k, ctx, b, KCT_FX_N, out);
  p->got = out[0];
  kc_kernel_destroy(k);
  kc_context_destroy(ctx);
  kc_unpin(p->f->rt);
  return NULL;
}

void test_enumerator_of_an_old_world(void **state) {
  kct_fixture *f = *state;
  kct_define(f->rt, "Shade", "enum Shade { LIGHT = 3, DARK = 4 };");
  kct_define(f->rt, "k_en", "KC_KERNEL void k_en(KC_GLOBAL float *y) { y[kc_global_id(0)] = (float)LIGHT; }");
  pinned_run p = {.f = f};
  pthread_barrier_init(&p.pinned, NULL, 2);
  pthread_barrier_init(&p.compiled, NULL, 2);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, pinned_launch, &p), 0);
  pthread_barrier_wait(&p.pinned);
  KCT_OK(f->rt, kc_undefine(f->rt, "Shade", NULL));
  float v;
  assert_int_not_equal(try_run(f, "k_en", &v), KC_OK); /* LIGHT undeclared, remembered */
  pthread_barrier_wait(&p.compiled);
  pthread_join(t, NULL);
  pthread_barrier_destroy(&p.pinned);
  pthread_barrier_destroy(&p.compiled);
  KCT_OK(f->rt, p.st);
  if (p.got != 3.0f) fail_msg("the pinned world got %g, not its enum's 3 (the newer world's failure)", p.got);
  /* and another enum that declares it later is a declarer too */
  kct_define(f->rt, "Tone", "enum Tone { LIGHT = 7 };");
  KCT_OK(f->rt, try_run(f, "k_en", &v));
  assert_true(v == 7.0f);
}

/* Depth and breadth that users control never become C stack depth:
 * a chain of n helpers, and a kernel that reaches n definitions at once. */
static void chain(kct_fixture *f, uint32_t n) {
  char name[32], src[160];
  for (uint32_t i = 0; i < n; i++) {
    snprintf(name, sizeof name, "h%u", i);
    if (i + 1 < n)
      snprintf(src, sizeof src, "KC_DEVICE float h%u(float x) { return h%u(x) + 1.0f; }", i, i + 1);
    else snprintf(src, sizeof src, "KC_DEVICE float h%u(float x) { return x; }", i);
    kct_define(f->rt, name, src);
  }
  kct_define(f->rt, "k_chain",
             "KC_KERNEL void k_chain(KC_GLOBAL float *y) { y[kc_global_id(0)] = h0(0.0f); }");
}

static void fan_in(kct_fixture *f, uint32_t n) {
  char name[32], src[96];
  size_t cap = (size_t)n * 16 + 256, len = 0;
  char *body = malloc(cap);
  assert_non_null(body);
  len +=
      (size_t)snprintf(body + len, cap - len, "KC_KERNEL void k_fan(KC_GLOBAL float *y) { float s = 0.0f;");
  for (uint32_t i = 0; i < n; i++) {
    snprintf(name, sizeof name, "C%u", i);
    snprintf(src, sizeof src, "#define C%u 1.0f", i);
    kct_define(f->rt, name, src);
    len += (size_t)snprintf(body + len, cap - len, "\ns += C%u;", i);
  }
  snprintf(body + len, cap - len, " y[kc_global_id(0)] = s; }");
  kct_define(f->rt, "k_fan", body);
  free(body);
}

/* The numbers of the test: 100,000 on the host backend; OpenCL's compiler
 * (PoCL) walks a call chain in time that grows faster than its length, so it is given 200 there (the walk
 * is the same code). KC_TEST_DEEP overrides. */
static uint32_t deep_n(void) {
  const char *e = getenv("KC_TEST_DEEP");
  if (e && *e) return (uint32_t)strtoul(e, NULL, 10);
  return kct_backend == KC_BACKEND_HOST ? 100000 : 200;
}

void test_deep_chains_and_wide_fan_ins(void **state) {
  kct_fixture *f = *state;
  uint32_t n = deep_n();
  if (kct_backend ==
      KC_BACKEND_HOST) { /* tcc where there is one: gcc -O2 takes minutes over 100,000 helpers */
    kct_fx_close(f);
    kc_options o;
    kc_options_init(&o);
    o.backend = KC_BACKEND_HOST;
    o.host_cc = kct_host_cc();
    if (strcmp(o.host_cc, "tcc") && !getenv("KC_TEST_DEEP")) n = 5000;
    f->rt = kct_runtime(&o);
    f->ctx = kct_context(f->rt);
    f->buf = kct_buffer(f->rt, f->ctx, KCT_FX_N);
  }
  chain(f, n);
  assert_true(src_run(f, "k_chain") == (float)(n - 1));
  /* the end of the chain, redefined: the kernel is recompiled */
  char name[32], src[96];
  snprintf(name, sizeof name, "h%u", n - 1);
  snprintf(src, sizeof src, "KC_DEVICE float h%u(float x) { return x + 1.0f; }", n - 1);
  kct_define(f->rt, name, src);
  assert_true(src_run(f, "k_chain") == (float)n);
  fan_in(f, n);
  assert_true(src_run(f, "k_fan") == (float)n);
  kct_define(f->rt, "C7", "#define C7 2.0f");
  assert_true(src_run(f, "k_fan") == (float)n + 1.0f);
  /* and a cycle at the end of a long chain is refused, not followed */
  snprintf(src, sizeof src, "KC_DEVICE float h%u(float x) { return h0(x); }", n - 1);
  kct_define(f->rt, name, src);
  kc_kernel *k = kct_kernel(f->rt, "k_chain", NULL);
  assert_int_equal(kct_run(k, f->ctx, f->buf, KCT_FX_N, NULL), KC_ERECURSION);
  KCT_CONTAINS(kc_errmsg(f->rt), "recursion in the call graph: h0 -> h1 -> h2");
  kc_kernel_destroy(k);
}
