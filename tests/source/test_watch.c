/* SPDX-License-Identifier: MIT */
/*
 * test_watch.c -- `kcache watch FILE` (cli/watch.c) on the host backend:
 * the first load compiles every kernel of the file; an edit of one helper
 * while it watches makes a second load in which only the kernel that
 * reaches the helper is recompiled, with its new result; an edit of a
 * header on disk that one kernel includes recompiles that kernel only. A
 * kernel that does not compile: its --json line (JSON Lines, each line one
 * valid object) carries the compiler's message, as the text form does. And
 * its usage errors.
 */
#include "kc_test.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char V1[] =
    "#define BIAS 1.0f\n"
    "KC_DEVICE float ha(float x) { return x + BIAS; }\n"
    "KC_DEVICE float hb(float x) { return 2.0f * x; }\n"
    "KC_KERNEL void ka(KC_GLOBAL float *y) { y[kc_global_id(0)] = ha((float)kc_global_id(0)); }\n"
    "KC_KERNEL void kb(KC_GLOBAL float *y, float s) { y[kc_global_id(0)] = hb(1.0f) + s; }\n";

/* Writes path whole at once (a temp file renamed over it), as an editor
 * saves: a watch that polls never reads it half written. */
static void write_file(const char *path, const char *text) {
  char tmp[KCT_DIR_LEN + 64];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  assert_non_null(f);
  assert_int_equal(fputs(text, f) >= 0, 1);
  assert_int_equal(fclose(f), 0);
  assert_int_equal(rename(tmp, path), 0);
}

/* Runs cmd (a kcache watch), its output into out; once a line holds
 * trigger, writes text to path (once). The watch's exit status. */
static int watch_editing(const char *cmd, const char *trigger, const char *path, const char *text, char *out,
                         size_t n) {
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  char line[1024];
  out[0] = 0;
  bool edited = false;
  while (fgets(line, sizeof line, p)) {
    strncat(out, line, n - strlen(out) - 1);
    if (!edited && strstr(line, trigger)) {
      write_file(path, text);
      edited = true;
    }
  }
  return pclose(p);
}

static void test_watch_reloads_and_recompiles_what_changed(void **state) {
  (void)state;
  char dir[KCT_DIR_LEN], path[KCT_DIR_LEN + 16], cmd[4096];
  kct_mkdtemp(dir, sizeof dir, "watch");
  snprintf(path, sizeof path, "%s/k.cl", dir);
  write_file(path, V1);
  snprintf(
      cmd, sizeof cmd,
      "KC_CACHE_DISABLE=1 KC_HOST_CC='%s' '%s' --json watch --backend host --count 2 --interval 20 '%s' 2>&1",
      kct_host_cc(), KC_CLI, path);
  char v2[sizeof V1], out[8192];
  memcpy(v2, V1, sizeof V1);
  strstr(v2, "2.0f * x")[0] = '5';
  /* the first load is done (kb ran): edit hb */
  int rc = watch_editing(cmd, "\"kernel\":\"kb\"", path, v2, out, sizeof out);
  kct_rmrf(dir);
  if (rc != 0) fail_msg("kcache watch exited with %d:\n%s", rc, out);
  KCT_CONTAINS(out, "{\"load\":1,\"world\":2,\"changed\":5,\"names\":[{\"name\":");
  KCT_CONTAINS(out, "{\"kernel\":\"ka\",\"code\":\"recompiled\",\"y\":[1,2,3,4]}");
  KCT_CONTAINS(out, "{\"kernel\":\"kb\",\"code\":\"recompiled\",\"y\":[2,2,2,2]}");
  KCT_CONTAINS(
      out, "{\"load\":2,\"world\":3,\"changed\":1,\"names\":[{\"name\":\"hb\",\"change\":\"redefined\"}]}");
  KCT_CONTAINS(out, "{\"kernel\":\"ka\",\"code\":\"cached\",\"y\":[1,2,3,4]}");
  KCT_CONTAINS(out, "{\"kernel\":\"kb\",\"code\":\"recompiled\",\"y\":[5,5,5,5]}");
}

/* A header on disk (found through CPATH, which the host compiler reads)
 * edited while kcache watches: a load of its own, recompiling the one
 * kernel that includes it. */
static void test_watch_sees_headers_on_disk(void **state) {
  (void)state;
  char dir[KCT_DIR_LEN], path[KCT_DIR_LEN + 16], hdr[KCT_DIR_LEN + 16], cmd[4096];
  kct_mkdtemp(dir, sizeof dir, "watchh");
  snprintf(path, sizeof path, "%s/k.cl", dir);
  snprintf(hdr, sizeof hdr, "%s/gain.h", dir);
  write_file(hdr, "#define GAIN 3.0f\n");
  /* (a file's #include lines go before the definitions that follow them) */
  write_file(path, "KC_KERNEL void kn(KC_GLOBAL float *y) { y[kc_global_id(0)] = 1.0f; }\n"
                   "#include <gain.h>\n"
                   "KC_KERNEL void kg(KC_GLOBAL float *y) { y[kc_global_id(0)] = GAIN; }\n");
  usleep(50000); /* older than the timestamps' grain when it is compiled */
  snprintf(cmd, sizeof cmd,
           "CPATH='%s' KC_CACHE_DISABLE=1 KC_HOST_CC='%s' '%s' --json watch --backend host --count 2 "
           "--interval 20 "
           "'%s' 2>&1",
           dir, kct_host_cc(), KC_CLI, path);
  char out[8192];
  int rc = watch_editing(cmd, "\"kernel\":\"kg\"", hdr, "#define GAIN 7.0f\n", out, sizeof out);
  kct_rmrf(dir);
  if (rc != 0) fail_msg("kcache watch exited with %d:\n%s", rc, out);
  KCT_CONTAINS(out, "{\"kernel\":\"kg\",\"code\":\"recompiled\",\"y\":[3,3,3,3]}");
  KCT_CONTAINS(out, "\"headers_changed\":1}");
  KCT_CONTAINS(out, "{\"kernel\":\"kg\",\"code\":\"recompiled\",\"y\":[7,7,7,7]}");
  KCT_CONTAINS(out, "{\"kernel\":\"kn\",\"code\":\"cached\",\"y\":[1,1,1,1]}");
}

/* A kernel that does not compile: the watch goes on, and its line says why
 * in both forms: the compiler's message under the text line, "message" in
 * the JSON one; every --json line is a JSON object of its own. A bounded
 * watch (--count) whose last load had an error exits 1. */
static void test_watch_reports_the_compilers_message(void **state) {
  (void)state;
  char dir[KCT_DIR_LEN], path[KCT_DIR_LEN + 16], cmd[4096], *out = NULL;
  kct_mkdtemp(dir, sizeof dir, "watche");
  snprintf(path, sizeof path, "%s/k.cl", dir);
  write_file(path, "KC_KERNEL void ok(KC_GLOBAL float *y) { y[kc_global_id(0)] = 2.0f; }\n"
                   "KC_KERNEL void bad(KC_GLOBAL float *y) { y[kc_global_id(0)] = 1.0f + ; }\n");
  const char *fmt =
      "KC_CACHE_DISABLE=1 KC_HOST_CC='%s' '%s' %s watch --backend host --count 1 '%s' 2>/dev/null";
  snprintf(cmd, sizeof cmd, fmt, kct_host_cc(), KC_CLI, "--json", path);
  assert_int_equal(kct_capture(cmd, &out), 1); /* --count: the last load's errors are the exit status */
  KCT_CONTAINS(out, "{\"kernel\":\"ok\",\"code\":\"recompiled\",\"y\":[2,2,2,2]}");
  KCT_CONTAINS(out, "{\"kernel\":\"bad\",\"error\":\"KC_ECOMPILE\",\"message\":\"");
  const char *bad = strstr(out, "\"kernel\":\"bad\"");
  const char *eol = bad ? strchr(bad, '\n') : NULL;
  if (!bad || !eol || !memmem(bad, (size_t)(eol - bad), "error", 5) ||
      !memmem(bad, (size_t)(eol - bad), "failed", 6))
    fail_msg("the JSON line of the kernel that failed lacks the compiler's message:\n%s", out);
  char lines[KCT_DIR_LEN + 32];
  snprintf(lines, sizeof lines, "%s/out.jsonl", dir);
  FILE *f = fopen(lines, "w");
  assert_non_null(f);
  fputs(out, f);
  fclose(f);
  free(out);
  if (system("python3 -c 'import json' >/dev/null 2>&1") == 0) {
    snprintf(cmd, sizeof cmd,
             "python3 -c 'import json, sys\nfor l in open(sys.argv[1]): assert isinstance(json.loads(l), "
             "dict), l' "
             "'%s' 2>&1",
             lines);
    KCT_SAYS(kct_capture(cmd, &out), out, 0);
  }
  snprintf(cmd, sizeof cmd, fmt, kct_host_cc(), KC_CLI, "", path);
  KCT_SAYS(kct_capture(cmd, &out), out, 1,
           "  bad              error: KC_ECOMPILE\n    compiling kernel 'bad' (host backend) failed");
  kct_rmrf(dir);
}

/* --language opencl: an OpenCL C file as written (issue 26): its kernels
 * run on the opencl backend; on the host backend each says why not. */
static void test_watch_native_opencl(void **state) {
  (void)state;
  char dir[KCT_DIR_LEN], path[KCT_DIR_LEN + 16], cmd[4096], *out = NULL;
  kct_mkdtemp(dir, sizeof dir, "watchn");
  snprintf(path, sizeof path, "%s/k.cl", dir);
  write_file(path, "float twice(float x) { return 2.0f * x; }\n"
                   "__kernel void k(__global float *y) { y[get_global_id(0)] = twice(3.0f); }\n");
  const char *fmt =
      "KC_CACHE_DISABLE=1 '%s' --json watch --backend %s --language opencl --count 1 '%s' 2>/dev/null";
  snprintf(cmd, sizeof cmd, fmt, KC_CLI, "host", path);
  assert_int_equal(kct_capture(cmd, &out), 1);
  KCT_CONTAINS(out, "{\"kernel\":\"k\",\"error\":\"KC_EUNAVAILABLE\",\"message\":\"'k' is OpenCL C");
  free(out);
  if (kc_backend_available(KC_BACKEND_OPENCL, NULL)) {
    snprintf(cmd, sizeof cmd, fmt, KC_CLI, "opencl", path);
    assert_int_equal(kct_capture(cmd, &out), 0);
    KCT_CONTAINS(out, "{\"kernel\":\"k\",\"code\":\"recompiled\",\"y\":[6,6,6,6]}");
    free(out);
  }
  snprintf(cmd, sizeof cmd, "'%s' watch --language glsl '%s' 2>&1", KC_CLI, path);
  assert_int_equal(kct_capture(cmd, &out), 2);
  KCT_CONTAINS(out, "--language must be dialect, opencl or cuda");
  free(out);
  kct_rmrf(dir);
}

/* Buffers of 64 elements of the pointee's size, whatever it is (a kernel
 * that wrote 64 double4 ran past buffers of 16 bytes an element, and
 * crashed the watch), and the first buffer's first four scalars read as
 * its type: y[0]'s lanes for a vector, signed and unsigned integers, a
 * struct's first words as floats. */
static void test_watch_fills_buffers_of_any_element(void **state) {
  (void)state;
  char dir[KCT_DIR_LEN], path[KCT_DIR_LEN + 16], cmd[4096], *out = NULL;
  kct_mkdtemp(dir, sizeof dir, "watchw");
  snprintf(path, sizeof path, "%s/k.c", dir);
  write_file(
      path,
      "typedef struct { float a; double b[30]; } big;\n"
      "KC_KERNEL void d4(KC_GLOBAL double4 *y) {\n"
      "  size_t i = kc_global_id(0);\n"
      "  y[i].x = 1.0; y[i].y = 2.0; y[i].z = 3.0; y[i].w = -4.5 * (double)i;\n"
      "}\n"
      "KC_KERNEL void si(KC_GLOBAL short *y) { y[kc_global_id(0)] = (short)(-(int)kc_global_id(0)); }\n"
      "KC_KERNEL void us(KC_GLOBAL const float *x, KC_GLOBAL ushort *y) {\n"
      "  y[kc_global_id(0)] = (ushort)(65535 - kc_global_id(0) + (int)x[0]);\n"
      "}\n"
      "KC_KERNEL void uu(KC_GLOBAL ushort *y) { y[kc_global_id(0)] = (ushort)(65535 - kc_global_id(0)); }\n"
      "KC_KERNEL void st(KC_GLOBAL big *y) { y[kc_global_id(0)].a = 6.0f; y[kc_global_id(0)].b[29] = 1.0; "
      "}\n");
  snprintf(cmd, sizeof cmd,
           "KC_CACHE_DISABLE=1 KC_HOST_CC='%s' '%s' --json watch --backend host --count 1 '%s' 2>&1",
           kct_host_cc(), KC_CLI, path);
  int rc = kct_capture(cmd, &out);
  kct_rmrf(dir);
  if (rc != 0) fail_msg("kcache watch exited with %d:\n%s", rc, out);
  KCT_CONTAINS(out, "{\"kernel\":\"d4\",\"code\":\"recompiled\",\"y\":[1,2,3,-0]}");
  KCT_CONTAINS(out, "{\"kernel\":\"si\",\"code\":\"recompiled\",\"y\":[0,-1,-2,-3]}");
  KCT_CONTAINS(out, "{\"kernel\":\"us\",\"code\":\"recompiled\",\"y\":[0,0,0,0]}"); /* x, zeroes */
  KCT_CONTAINS(out, "{\"kernel\":\"uu\",\"code\":\"recompiled\",\"y\":[65535,65534,65533,65532]}");
  KCT_CONTAINS(out, "{\"kernel\":\"st\",\"code\":\"recompiled\",\"y\":[6,0,0,0]}");
  free(out);
}

static void test_watch_usage(void **state) {
  (void)state;
  char cmd[4096], *out = NULL;
  snprintf(cmd, sizeof cmd, "'%s' watch 2>&1", KC_CLI);
  KCT_SAYS(kct_capture(cmd, &out), out, 2, "watch: which FILE?");
  snprintf(cmd, sizeof cmd, "'%s' watch --count 0 x 2>&1", KC_CLI);
  KCT_SAYS(kct_capture(cmd, &out), out, 2);
  snprintf(cmd, sizeof cmd, "'%s' watch --count 2147483648 x 2>&1", KC_CLI); /* past its load counter */
  KCT_SAYS(kct_capture(cmd, &out), out, 2, "--count must be a positive number");
  snprintf(cmd, sizeof cmd, "KC_CACHE_DISABLE=1 '%s' watch --backend host /nonexistent/k.cl 2>&1", KC_CLI);
  KCT_SAYS(kct_capture(cmd, &out), out, 1, "cannot read /nonexistent/k.cl");
  /* opened but not readable to its end (a directory): refused, never loaded as an empty file */
  snprintf(cmd, sizeof cmd, "KC_CACHE_DISABLE=1 '%s' watch --backend host --count 1 /tmp 2>&1", KC_CLI);
  KCT_SAYS(kct_capture(cmd, &out), out, 1, "cannot read /tmp: Is a directory");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      KCT_TEST(test_watch_reloads_and_recompiles_what_changed), KCT_TEST(test_watch_sees_headers_on_disk),
      KCT_TEST(test_watch_reports_the_compilers_message),       KCT_TEST(test_watch_native_opencl),
      KCT_TEST(test_watch_fills_buffers_of_any_element),        KCT_TEST(test_watch_usage),
  };
  return cmocka_run_group_tests_name("watch", tests, NULL, NULL);
}
