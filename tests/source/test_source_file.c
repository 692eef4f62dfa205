/* SPDX-License-Identifier: MIT */
/*
 * test_source_file.c -- whole source files (kc_define_file): one world for
 * the batch; a reload recompiles exactly the kernels that reach what
 * changed (counted with kc_stats), here in a generated 2,000-line file too;
 * names gone from the file are undefined in the same world; what the
 * splitter cannot cut is refused with the line; loads from many threads.
 */
#include "source.h"

#include <pthread.h>
#include <stdlib.h>

static const char FILE_V1[] = "/* a file of the dialect */\n"
                              "#define BIAS 1.0f\n"
                              "typedef struct Pair { float a, b; } Pair;\n"
                              "KC_DEVICE float ha(float x);\n" /* a prototype: dropped */
                              "KC_DEVICE float ha(float x) { return x + BIAS; }\n"
                              "KC_DEVICE float hb(float x) { return 2.0f * x; }\n"
                              "\n"
                              "KC_KERNEL void ka(KC_GLOBAL float *y) { y[kc_global_id(0)] = ha(1.0f); }\n"
                              "KC_KERNEL void kb(KC_GLOBAL float *y) { y[kc_global_id(0)] = hb(1.0f); }\n"
                              "KC_KERNEL void kab(KC_GLOBAL float *y) {\n"
                              "  Pair p = {ha(0.0f), hb(1.0f)};\n"
                              "  y[kc_global_id(0)] = p.a + p.b;\n"
                              "}\n";

static size_t load(kct_fixture *f, const char *text, kc_world *w) {
  size_t changed = 99;
  KCT_OK(f->rt, kc_define_file(f->rt, "kernels.cl", text, strlen(text), &changed, w));
  return changed;
}

void test_file_defines_everything_in_one_world(void **state) {
  kct_fixture *f = *state;
  kc_world w0 = kc_world_latest(f->rt), w;
  assert_int_equal(load(f, FILE_V1, &w), 7); /* BIAS Pair ha hb ka kb kab */
  assert_int_equal(w, w0 + 1);
  assert_true(src_run(f, "ka") == 2.0f);
  assert_true(src_run(f, "kb") == 2.0f);
  assert_true(src_run(f, "kab") == 3.0f);
  /* the same text again: nothing changes, no new world */
  assert_int_equal(load(f, FILE_V1, &w), 0);
  assert_int_equal(w, w0 + 1);
  assert_int_equal(kct_stats(f->rt).defines, 1);
}

void test_file_reload_recompiles_what_reaches_the_edit(void **state) {
  kct_fixture *f = *state;
  load(f, FILE_V1, NULL);
  assert_true(src_run(f, "ka") == 2.0f);
  assert_true(src_run(f, "kb") == 2.0f);
  assert_true(src_run(f, "kab") == 3.0f);
  uint64_t c = src_compiles(f->rt);
  char *v2 = strdup(FILE_V1);
  assert_non_null(v2);
  char *at = strstr(v2, "return 2.0f * x");
  at[7] = '3'; /* hb: 3x */
  kc_world w;
  assert_int_equal(load(f, v2, &w), 1);
  assert_true(src_run(f, "ka") == 2.0f);
  assert_true(src_run(f, "kb") == 3.0f);
  assert_true(src_run(f, "kab") == 4.0f);
  assert_int_equal(src_compiles(f->rt), c + 2); /* kb and kab, not ka */
  /* a macro of the file: everything that uses it */
  at = strstr(v2, "BIAS 1.0f");
  at[5] = '2';
  assert_int_equal(load(f, v2, NULL), 1);
  assert_true(src_run(f, "ka") == 3.0f);
  assert_true(src_run(f, "kb") == 3.0f);
  assert_true(src_run(f, "kab") == 5.0f);
  assert_int_equal(src_compiles(f->rt), c + 4); /* ka and kab */
  /* a comment between definitions changes nothing */
  char *v3 = malloc(strlen(v2) + 32);
  assert_non_null(v3);
  strcpy(v3, "// edited\n");
  strcat(v3, v2);
  assert_int_equal(load(f, v3, NULL), 0);
  free(v3);
  free(v2);
}

/* Reloads retire the definitions they replace or remove like kc_define
 * does: kc_collect frees the old ones once no world sees them, and the
 * kernels still run the newest text. */
void test_file_reloads_are_collected(void **state) {
  kct_fixture *f = *state;
  load(f, FILE_V1, NULL);
  assert_true(src_run(f, "kab") == 3.0f);
  char *v2 = strdup(FILE_V1);
  assert_non_null(v2);
  char *at = strstr(v2, "return 2.0f * x");
  for (int i = 3; i <= 5; i++) {
    at[7] = (char)('0' + i); /* hb: i*x, three reloads */
    assert_int_equal(load(f, v2, NULL), 1);
    assert_true(src_run(f, "kab") == 1.0f + (float)i);
  }
  free(v2);
  kc_collect_info ci = {0};
  KCT_OK(f->rt, kc_collect(f->rt, &ci));
  assert_int_equal(ci.definitions, 3); /* hb's 2x, 3x and 4x */
  assert_true(ci.code_instances >= 3); /* kab compiled for each of them */
  assert_true(src_run(f, "kab") == 6.0f);
  assert_true(src_run(f, "ka") == 2.0f);
  KCT_OK(f->rt, kc_collect(f->rt, &ci));
  assert_int_equal(ci.definitions, 0);
}

void test_file_removed_names_are_undefined(void **state) {
  kct_fixture *f = *state;
  load(f, FILE_V1, NULL);
  assert_true(src_run(f, "kb") == 2.0f);
  /* kb gone, kc new: one world */
  const char *v2 = "#define BIAS 1.0f\n"
                   "typedef struct Pair { float a, b; } Pair;\n"
                   "KC_DEVICE float ha(float x) { return x + BIAS; }\n"
                   "KC_DEVICE float hb(float x) { return 2.0f * x; }\n"
                   "KC_KERNEL void ka(KC_GLOBAL float *y) { y[kc_global_id(0)] = ha(1.0f); }\n"
                   "KC_KERNEL void kc(KC_GLOBAL float *y) { y[kc_global_id(0)] = hb(5.0f); }\n"
                   "KC_KERNEL void kab(KC_GLOBAL float *y) {\n"
                   "  Pair p = {ha(0.0f), hb(1.0f)};\n"
                   "  y[kc_global_id(0)] = p.a + p.b;\n"
                   "}\n";
  kc_world before = kc_world_latest(f->rt), w;
  assert_int_equal(load(f, v2, &w), 2);
  assert_int_equal(w, before + 1);
  kc_kernel *k = kct_kernel(f->rt, "kb", NULL);
  KCT_STATUS(f->rt, KC_ENOTFOUND, kct_run(k, f->ctx, f->buf, KCT_FX_N, NULL));
  kc_kernel_destroy(k);
  assert_true(src_run(f, "kc") == 10.0f);
  /* a name another file or kc_define made is not this file's to undefine */
  kct_define(f->rt, "mine", "KC_DEVICE float mine(float x) { return x; }");
  assert_int_equal(load(f, "KC_DEVICE float ha(float x) { return x; }\n", NULL), 7); /* ha, 6 gone */
  KCT_STATUS(f->rt, KC_ENOTFOUND, kc_undefine(f->rt, "kc", NULL));
  KCT_OK(f->rt, kc_undefine(f->rt, "mine", NULL));
}

/* kc_define_file_ex names each change: defined, redefined, undefined (a
 * name gone from the file), in file order, after the load is in effect and
 * with no lock held (the callback creates a kernel of the new world). */
typedef struct {
  kc_runtime *rt;
  char log[256];
  kc_status made; /* kc_kernel_create from inside the callback */
} changes;

static void on_change(void *user, const char *name, kc_change_kind kind) {
  changes *c = user;
  static const char *const what[] = {"?", "+", "~", "-"};
  size_t n = strlen(c->log);
  snprintf(c->log + n, sizeof c->log - n, "%s%s ", what[kind <= 3 ? kind : 0], name);
  if (kind != KC_CHANGE_UNDEFINED) {
    kc_kernel *k = NULL;
    c->made = kc_kernel_create(c->rt, name, NULL, &k);
    kc_kernel_destroy(k);
  }
}

void test_file_reports_each_change(void **state) {
  kct_fixture *f = *state;
  changes c = {f->rt, "", KC_OK};
  size_t n = 0;
  KCT_OK(f->rt, kc_define_file_ex(f->rt, "kernels.cl", FILE_V1, strlen(FILE_V1), on_change, &c, &n, NULL));
  assert_string_equal(c.log, "+BIAS +Pair +ha +hb +ka +kb +kab ");
  assert_int_equal(n, 7);
  assert_int_equal(c.made, KC_OK);
  /* hb edited, kb gone: one redefinition and one undefinition */
  char *v2 = strdup(FILE_V1);
  assert_non_null(v2);
  char *kb = strstr(v2, "KC_KERNEL void kb");
  memmove(kb, strstr(kb, "KC_KERNEL void kab"), strlen(strstr(kb, "KC_KERNEL void kab")) + 1);
  strstr(v2, "return 2.0f * x")[7] = '3';
  c.log[0] = 0;
  KCT_OK(f->rt, kc_define_file_ex(f->rt, "kernels.cl", v2, strlen(v2), on_change, &c, &n, NULL));
  assert_string_equal(c.log, "~hb -kb ");
  assert_int_equal(n, 2);
  assert_true(src_run(f, "kab") == 4.0f);
  /* nothing changed, or a refused load: no call */
  c.log[0] = 0;
  KCT_OK(f->rt, kc_define_file_ex(f->rt, "kernels.cl", v2, strlen(v2), on_change, &c, &n, NULL));
  KCT_STATUS(f->rt, KC_EINVAL, kc_define_file_ex(f->rt, "kernels.cl", "}\n", 2, on_change, &c, &n, NULL));
  assert_string_equal(c.log, "");
  assert_int_equal(n, 0);
  free(v2);
}

void test_file_refuses_what_it_cannot_split(void **state) {
  kct_fixture *f = *state;
  static const struct {
    const char *text, *msg;
  } bad[] = {
      {"KC_DEVICE float h(float x) { return x; }\n#ifdef X\nKC_DEVICE float g(float x) { return x; "
       "}\n#endif\n",
       "kc_define_file: bad.cl:2: only #define, #include and #pragma may stand between definitions"},
      {"KC_DEVICE float h(float x) { return x; }\nKC_DEVICE float h(float x) { return x; }\n",
       "kc_define_file: bad.cl:2: 'h' is defined twice (first at line 1)"},
      {"KC_DEVICE float h(float x) { return x;\n",
       "kc_define_file: bad.cl:1: the file ends inside this definition"},
      {"}\n", "kc_define_file: bad.cl:1: '}' without its '{'"},
      {"KC_DEVICE float kc_h(float x) { return x; }\n", "names starting with kc_ or KC_ are reserved"},
  };
  kc_world w0 = kc_world_latest(f->rt);
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    KCT_STATUS(f->rt, KC_EINVAL,
               kc_define_file(f->rt, "bad.cl", bad[i].text, strlen(bad[i].text), NULL, NULL));
    KCT_CONTAINS(kc_errmsg(f->rt), bad[i].msg);
  }
  assert_int_equal(kc_world_latest(f->rt), w0); /* nothing defined */
  KCT_STATUS(f->rt, KC_EINVAL, kc_define_file(f->rt, NULL, "x", 1, NULL, NULL));
  KCT_STATUS(f->rt, KC_EINVAL, kc_define_file(NULL, "f", "x", 1, NULL, NULL));
}

/* A generated file of 2,000 lines: 4 groups of 100 helpers, each calling the
 * one before, and a kernel per group calling its last helper. An edit of
 * one helper recompiles the one kernel that reaches it. */
#define GROUPS 4
#define PER 100
static char *big_file(int edited_group, int edited_helper) {
  size_t cap = 256 * 1024, n = 0;
  char *s = malloc(cap);
  if (!s) return NULL;
  for (int g = 0; g < GROUPS; g++) {
    for (int h = 0; h < PER; h++) {
      float add = g == edited_group && h == edited_helper ? 2.0f : 1.0f;
      if (h == 0)
        n += (size_t)snprintf(s + n, cap - n,
                              "/* group %d */\nKC_DEVICE float g%d_h0(float x) {\n  return x + %.1ff;\n}\n\n",
                              g, g, add);
      else
        n += (size_t)snprintf(
            s + n, cap - n,
            "KC_DEVICE float g%d_h%d(float x) {\n  /* one more */\n  return g%d_h%d(x) + %.1ff;\n}\n\n", g, h,
            g, h - 1, add);
    }
    n += (size_t)snprintf(
        s + n, cap - n,
        "KC_KERNEL void kg%d(KC_GLOBAL float *y) {\n  y[kc_global_id(0)] = g%d_h%d(0.0f);\n}\n\n", g, g,
        PER - 1);
  }
  return s;
}

void test_big_file_edit_recompiles_one_kernel(void **state) {
  kct_fixture *f = *state;
  char *v1 = big_file(-1, -1), *v2 = big_file(2, 40);
  assert_non_null(v1);
  assert_non_null(v2);
  size_t lines = 0;
  for (const char *p = v1; *p; p++) lines += *p == '\n';
  assert_true(lines >= 2000);
  assert_int_equal(load(f, v1, NULL), GROUPS * (PER + 1));
  /* two of the kernels (compiles are what the test costs): the edited
   * group's and another */
  assert_true(src_run(f, "kg0") == (float)PER);
  assert_true(src_run(f, "kg2") == (float)PER);
  kc_stats s0 = kct_stats(f->rt);
  assert_int_equal(load(f, v2, NULL), 1);
  assert_true(src_run(f, "kg0") == (float)PER);
  assert_true(src_run(f, "kg2") == (float)(PER + 1));
  kc_stats s1 = kct_stats(f->rt);
  assert_int_equal(s1.compiles, s0.compiles + 1);
  assert_int_equal(s1.invalidations, s0.invalidations + 1);
  free(v1);
  free(v2);
}

/* Loads of one file from several threads while another launches: each
 * load applies whole (the file's record and the table change under one
 * lock), so the end state is one of the versions, complete. */
typedef struct loader {
  kc_runtime *rt;
  int id;
  kct_report r;
} loader;

static const char *version(int v) {
  return v ? "KC_DEVICE float hv(float x) { return x + 2.0f; }\n"
             "KC_KERNEL void kv(KC_GLOBAL float *y) { y[kc_global_id(0)] = hv(0.0f); }\n"
           : "KC_DEVICE float hv(float x) { return x + 1.0f; }\n"
             "KC_DEVICE float only0(float x) { return x; }\n"
             "KC_KERNEL void kv(KC_GLOBAL float *y) { y[kc_global_id(0)] = hv(0.0f); }\n";
}

static void *load_loop(void *ud) {
  loader *l = ud;
  for (int i = 0; i < 50; i++) {
    const char *t = version((i + l->id) % 2);
    kc_status st = kc_define_file(l->rt, "shared.cl", t, strlen(t), NULL, NULL);
    if (st) kct_report_fail(&l->r, "load %d: %s: %s", i, kc_status_name(st), kc_errmsg(l->rt));
  }
  return NULL;
}

void test_file_loads_from_threads(void **state) {
  kct_fixture *f = *state;
  loader ls[3];
  pthread_t th[3];
  for (int i = 0; i < 3; i++) {
    ls[i] = (loader){f->rt, i, {0}};
    assert_int_equal(pthread_create(&th[i], NULL, load_loop, &ls[i]), 0);
  }
  for (int i = 0; i < 3; i++) assert_int_equal(pthread_join(th[i], NULL), 0);
  for (int i = 0; i < 3; i++) kct_report_check("loader", &ls[i].r);
  /* a last load of version 1: only0 is gone, kv gives 2 */
  const char *t = version(1);
  KCT_OK(f->rt, kc_define_file(f->rt, "shared.cl", t, strlen(t), NULL, NULL));
  KCT_STATUS(f->rt, KC_ENOTFOUND, kc_undefine(f->rt, "only0", NULL));
  assert_true(src_run(f, "kv") == 2.0f);
}
