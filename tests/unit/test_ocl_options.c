/* SPDX-License-Identifier: MIT */
/*
 * test_ocl_options.c -- which OpenCL compile options keep the late
 * binaries (ocl_relink_refused, src/backends/opencl/compile.c): a compile
 * then a link without options builds what clBuildProgram builds with
 * them only where they are -D and -I (attached or with their argument
 * as the next word), -w and -Werror, words split at any blank; any other
 * option, a quote or a backslash (parsed by the platform its own way),
 * "-cl-" anywhere (a platform may look for -cl-opt-disable in the whole
 * string) or a lone -D at the end is refused, naming the option and why.
 * And ocl_lone_flag_at_end, by which the backend refuses options that end
 * with a lone -D or -I (PoCL crashes on them). No OpenCL platform is
 * needed: the options are only read.
 */
#include "kc_test.h"

#include "backends/opencl/opencl.h"

#include <stdio.h>
#include <string.h>

/* ocl_relink_refused of OCL_OPTIONS and the user's options: NULL (kept)
 * or the refused word up to the next blank, in out; why in *why. */
static const char *refused(const char *user, char *out, size_t size, const char **why) {
  char opts[512];
  snprintf(opts, sizeof opts, "%s%s%s", OCL_OPTIONS, *user ? " " : "", user);
  const char *w = ocl_relink_refused(opts, why);
  if (!w) return NULL;
  snprintf(out, size, "%.*s", (int)strcspn(w, " \t\n\r\v\f"), w);
  return out;
}

static void test_options_of_the_compile_alone_are_kept(void **state) {
  (void)state;
  char w[64];
  const char *why;
  static const char *const kept[] = {"",
                                     "-DN=4",
                                     "-D N=4",
                                     "-DX -DY=2 -I/opt/inc -I /usr/include",
                                     "-w",
                                     "-Werror -DX",
                                     "  -DX\t-Ifoo\n-Ibar  ",
                                     "-DCL=1" /* -cl- only as it is written */};
  for (size_t i = 0; i < sizeof kept / sizeof *kept; i++) {
    const char *r = refused(kept[i], w, sizeof w, &why);
    if (r) fail_msg("\"%s\": refused at \"%s\" (%s)", kept[i], r, why);
    assert_null(why);
  }
}

static void test_other_options_are_refused_by_name(void **state) {
  (void)state;
  char w[64];
  const char *why;
  static const char *const cases[][3] = {
      {"-cl-fast-relaxed-math", "-cl-fast-relaxed-math", "-cl-"},
      {"-DX -cl-mad-enable -DY", "-cl-mad-enable", "-cl-"},
      {"-DX=1\n-cl-opt-disable", "-cl-opt-disable", "-cl-"},
      {"-DX=-cl-opt-disable", "-DX=-cl-opt-disable", "-cl-"},
      {"-D -cl-fast-relaxed-math", "-cl-fast-relaxed-math", "-cl-"},
      {"-I /p/-cl-opt-disable", "/p/-cl-opt-disable", "-cl-"},
      {"-O0", "-O0", "only of the compile"},
      {"-Wall", "-Wall", "only of the compile"},
      {"-wx", "-wx", "only of the compile"},
      {"x", "x", "only of the compile"},
      {"-DMSG=\"a", "-DMSG=\"a", "quote"},
      {"-D 'X'", "'X'", "quote"},
      {"-I/a\\ b", "-I/a\\", "quote or backslash"},
      {"-DX -I", "-I", "no argument"},
      {"-D", "-D", "no argument"},
      {"-D\t", "-D", "no argument"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const char *r = refused(cases[i][0], w, sizeof w, &why);
    if (!r) fail_msg("\"%s\": kept", cases[i][0]);
    if (strcmp(r, cases[i][1]) != 0)
      fail_msg("\"%s\": refused at \"%s\", not \"%s\"", cases[i][0], r, cases[i][1]);
    if (!strstr(why, cases[i][2])) fail_msg("\"%s\": refused because it %s", cases[i][0], why);
  }
  /* options that are not kcache's own first (never made so) */
  assert_non_null(ocl_relink_refused("-DX", &why));
  assert_non_null(ocl_relink_refused(OCL_OPTIONS "-DX", &why));
}

static void test_a_lone_flag_at_the_end(void **state) {
  (void)state;
  assert_true(ocl_lone_flag_at_end("-D"));
  assert_true(ocl_lone_flag_at_end("-DX -I"));
  assert_true(ocl_lone_flag_at_end("-DX -D \n"));
  assert_false(ocl_lone_flag_at_end(NULL));
  assert_false(ocl_lone_flag_at_end(""));
  assert_false(ocl_lone_flag_at_end("-D X"));
  assert_false(ocl_lone_flag_at_end("-DX"));
  assert_false(ocl_lone_flag_at_end("-I /inc -w"));
}

int main(int argc, char **argv) {
  int rc = kct_main_init(argc, argv);
  if (rc >= 0) return rc;
  const struct CMUnitTest tests[] = {
      KCT_TEST(test_options_of_the_compile_alone_are_kept),
      KCT_TEST(test_other_options_are_refused_by_name),
      KCT_TEST(test_a_lone_flag_at_the_end),
  };
  return KCT_RUN(tests);
}
