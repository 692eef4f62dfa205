/* SPDX-License-Identifier: MIT */
/*
 * test_host_loader.c -- the host backend's loader (src/backends/host/
 * loader.c) against bytes that are not what its compiler made: a real
 * artifact with random bytes changed or cut short, thousands of times, and a
 * shared object (the format of the artifacts before the loader). 20,000
 * rounds ($KC_TEST_LOADER_ROUNDS: another number). Each link must succeed or
 * fail with KC_ELINK (KC_ENOMEM for a huge section) and a message, never
 * crash or touch memory outside the bytes and its blocks (the ASan build
 * runs it too); what links is unlinked, never run.
 *
 * Through the backend's table (kc__backend_of), with the compiler
 * kct_host_cc for the artifact.
 */
#include "kc_test.h"
#include "backend.h"

#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

const kc__backend *kc__backend_of(kc_backend_kind kind);

static const char SRC[] = "static const char *const t[] = {\"a\", \"bc\"};\n"
                          "static float keep;\n"
                          "KC_KERNEL void k(KC_GLOBAL float *y, float a) {\n"
                          "  size_t i = kc_global_id(0); keep += a; y[i] = sqrtf(a) + t[i & 1][0] + keep;\n"
                          "}\n";

typedef struct loader_fx {
  kc_runtime *rt;
  const kc__backend *be;
  void *state;
  kc__bsvc sv;
  void *art;
  size_t size;
} loader_fx;

static void fx_open(loader_fx *f) {
  memset(f, 0, sizeof *f);
  kc_options opt;
  kc_options_init(&opt);
  opt.host_cc = kct_host_cc();
  opt.cache_disable = 1;
  f->rt = kct_runtime(&opt);
  kct_define(f->rt, "k", SRC);
  kc_code_info info = kct_code(f->rt, kct_kernel(f->rt, "k", ""));
  f->size = info.artifact_size;
  f->art = malloc(f->size);
  assert_non_null(f->art);
  memcpy(f->art, info.artifact, f->size);
  f->be = kc__backend_of(KC_BACKEND_HOST);
  assert_non_null(f->be);
  f->sv = (kc__bsvc){.heap = {kc__libc_alloc, NULL}, .owner = 0, .be = f->be};
  kc__bconfig bc = {
      .platform_index = -1, .host_cc = opt.host_cc, .compile_timeout_ms = 120000, .compile_threads = 1};
  KCT_STATUS(NULL, KC_OK, f->be->open(&f->sv, &bc, &f->state));
}

static void fx_close(loader_fx *f) {
  f->be->close(f->state);
  free(f->art);
  kct_destroy(f->rt);
}

/* Links bytes; KC_OK (then unlinked at once) or the failure. */
static kc_status try_link(loader_fx *f, const void *bytes, size_t n) {
  kc__artifact a = {.bytes = bytes, .size = n, .entry = "k"};
  kc__blinked b = {.bctx = f->state};
  kc_status st = f->be->link(f->state, &a, &b);
  if (st == KC_OK) f->be->unlink(&b);
  return st;
}

static void test_the_artifact_links(void **state) {
  (void)state;
  loader_fx f;
  fx_open(&f);
  for (int i = 0; i < 100; i++) KCT_STATUS(NULL, KC_OK, try_link(&f, f.art, f.size));
  fx_close(&f);
}

static void test_damaged_bytes_are_refused_cleanly(void **state) {
  (void)state;
  loader_fx f;
  fx_open(&f);
  uint64_t seed = 0x9E3779B97F4A7C15ull;
  unsigned char *copy = malloc(f.size);
  assert_non_null(copy);
  int ok = 0, refused = 0, rounds = 20000;
  const char *env = getenv("KC_TEST_LOADER_ROUNDS"); /* more, by hand */
  if (env && atoi(env) > 0) rounds = atoi(env);
  for (int round = 0; round < rounds; round++) {
    memcpy(copy, f.art, f.size);
    size_t n = f.size;
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    if (round % 4 == 0) {
      n = (size_t)(seed >> 33) % f.size; /* cut short */
    } else {
      int flips = 1 + (int)((seed >> 20) & 3);
      for (int j = 0; j < flips; j++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        copy[(seed >> 33) % f.size] ^= (unsigned char)(1u << ((seed >> 13) & 7));
      }
    }
    kc_status st = try_link(&f, copy, n);
    if (st == KC_OK) ok++;
    else if (st == KC_ELINK || st == KC_ENOMEM) refused++;
    else fail_msg("round %d: link returned %s", round, kc_status_name(st));
  }
  print_message("%d linked (changes the loader does not read), %d refused\n", ok, refused);
  assert_true(refused > rounds / 4);
  free(copy);
  fx_close(&f);
}

static void test_a_shared_object_is_foreign(void **state) {
  (void)state;
  loader_fx f;
  fx_open(&f);
  char dir[256], src[300], so[300], cmd[1000];
  kct_mkdtemp(dir, sizeof dir, "loader");
  snprintf(src, sizeof src, "%s/k.c", dir);
  snprintf(so, sizeof so, "%s/k.so", dir);
  FILE *out = fopen(src, "w");
  assert_non_null(out);
  fputs("int kc__run(void) { return 0; }\n", out);
  fclose(out);
  snprintf(cmd, sizeof cmd, "cc -shared -fPIC -o %s %s 2>/dev/null", so, src);
  if (system(cmd) != 0) {
    kct_rmrf(dir);
    fx_close(&f);
    print_message("cc cannot make a shared object here\n");
    skip();
  }
  FILE *in = fopen(so, "rb");
  assert_non_null(in);
  static unsigned char buf[1 << 20];
  size_t n = fread(buf, 1, sizeof buf, in);
  fclose(in);
  kct_rmrf(dir);
  KCT_STATUS(NULL, KC_ELINK, try_link(&f, buf, n));
  KCT_CONTAINS(kc_errmsg(NULL), "not an ELF64 x86-64 relocatable object");
  fx_close(&f);
}

int main(int argc, char **argv) {
  int rc = kct_main_init(argc, argv);
  if (rc >= 0) return rc;
  if (kct_backend != KC_BACKEND_HOST) return 77;
  const struct CMUnitTest tests[] = {
      KCT_TEST(test_the_artifact_links),
      KCT_TEST(test_damaged_bytes_are_refused_cleanly),
      KCT_TEST(test_a_shared_object_is_foreign),
  };
  return KCT_RUN(tests);
}
