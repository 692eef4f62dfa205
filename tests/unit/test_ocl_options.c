/* SPDX-License-Identifier: MIT */
/*
 * test_ocl_options.c -- which OpenCL compile options keep the late
 * binaries (ocl_relink_refused, src/backends/opencl/compile.c): a compile
 * then a link without options builds what clBuildProgram builds with
 * them only where they are -D and -I (attached or with their argument
 * as the next word), -w and -Werror; any other option, a quote or a
 * backslash (parsed by the platform its own way) or a lone -D at the end
 * is refused, and the word refused is the one returned. No OpenCL
 * platform is needed: the options are only read.
 */
#include "kc_test.h"

#include "backends/opencl/opencl.h"

#include <stdio.h>
#include <string.h>

/* ocl_relink_refused of OCL_OPTIONS and the user's options: NULL (kept)
 * or the refused word's text up to the next blank, in out. */
static const char *refused(const char *user, char *out, size_t size) {
  char opts[512];
  snprintf(opts, sizeof opts, "%s%s%s", OCL_OPTIONS, *user ? " " : "", user);
  const char *w = ocl_relink_refused(opts);
  if (!w) return NULL;
  snprintf(out, size, "%.*s", (int)strcspn(w, " \t"), w);
  return out;
}

static void test_options_of_the_compile_alone_are_kept(void **state) {
  (void)state;
  char w[64];
  static const char *const kept[] = {
      "",
      "-DN=4",
      "-D N=4",
      "-DX -DY=2 -I/opt/inc -I /usr/include",
      "-w",
      "-Werror -DX",
      "  -DX\t-Ifoo  ",
      "-D -cl-fast-relaxed-math" /* a macro's name, for the compiler to judge */};
  for (size_t i = 0; i < sizeof kept / sizeof *kept; i++) {
    const char *r = refused(kept[i], w, sizeof w);
    if (r) fail_msg("\"%s\": refused at \"%s\"", kept[i], r);
  }
}

static void test_other_options_are_refused_by_name(void **state) {
  (void)state;
  char w[64];
  static const char *const cases[][2] = {
      {"-cl-fast-relaxed-math", "-cl-fast-relaxed-math"},
      {"-DX -cl-mad-enable -DY", "-cl-mad-enable"},
      {"-DX -cl-denorms-are-zero", "-cl-denorms-are-zero"},
      {"-O0", "-O0"},
      {"-Wall", "-Wall"},
      {"-wx", "-wx"},
      {"-DMSG=\"a", "-DMSG=\"a"},
      {"-D 'X'", "-D"},
      {"-I/a\\ b", "-I/a\\"},
      {"-DX -I", "-I"},
      {"-D", "-D"},
      {"x", "x"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const char *r = refused(cases[i][0], w, sizeof w);
    if (!r) fail_msg("\"%s\": kept", cases[i][0]);
    if (strcmp(r, cases[i][1]) != 0)
      fail_msg("\"%s\": refused at \"%s\", not \"%s\"", cases[i][0], r, cases[i][1]);
  }
  /* options that do not start with kcache's own (never made so) */
  assert_non_null(ocl_relink_refused("-DX"));
}

int main(int argc, char **argv) {
  int rc = kct_main_init(argc, argv);
  if (rc >= 0) return rc;
  const struct CMUnitTest tests[] = {
      KCT_TEST(test_options_of_the_compile_alone_are_kept),
      KCT_TEST(test_other_options_are_refused_by_name),
  };
  return KCT_RUN(tests);
}
