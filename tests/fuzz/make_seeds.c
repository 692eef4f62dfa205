/* SPDX-License-Identifier: MIT */
/*
 * make_seeds.c -- writes the seed corpora of the fuzz targets, so that they
 * can be made again and reviewed as code:
 *
 *   cmake --build build --target fuzz_make_seeds
 *   build/tests/fuzz/fuzz_make_seeds tests/fuzz/corpus
 *
 * scan:    kernel sources as kcache's tests and demo define them, and the
 *          corners of the scanner (comments, literals, preprocessor lines,
 *          numbers, unterminated things).
 * file:    source files for kc_define_file's splitter (and, as a header, for
 *          the inlining of includes in a translation unit).
 * params:  specialization parameter strings, good and bad.
 * store:   entries made with kc__entry_encode in each mode of fuzz_store.c,
 *          payloads damaged in each way the decoder checks, two entries
 *          that the host backend really compiled (when a compiler is
 *          installed), counters files and key names.
 * options: environment settings, one variable per line (see fuzz_options.c).
 */
#include "fuzz.h"
#include "core/cache_glue.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

static const char *out_root;
static int written;

static void put(const char *target, const char *name, const void *data, size_t n) {
  char dir[4096], path[4200];
  snprintf(dir, sizeof dir, "%s/%s", out_root, target);
  mkdir(dir, 0755);
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0) {
    fprintf(stderr, "make_seeds: cannot write %s: %s\n", path, strerror(errno));
    exit(1);
  }
  written++;
}

static void put_str(const char *target, const char *name, const char *s) { put(target, name, s, strlen(s)); }

/* ---------------------------------------------------------------- scan */

static void scan_seeds(void) {
  static const struct {
    const char *name, *src;
  } s[] = {
      {"h.c", "KC_DEVICE float h(float x) { return x + 1.0f; }"},
      {"k.c",
       "KC_KERNEL void k(KC_GLOBAL float *y) {\n  size_t i = kc_global_id(0);\n  y[i] = h((float)i);\n}\n"},
      {"k2.c", "KC_KERNEL void k2(KC_GLOBAL float *y) { y[kc_global_id(0)] = 7.0f; }"},
      {"g.c", "KC_DEVICE float g(float x) { return 10.0f * h(x); }"},
      {"kt.c", "KC_KERNEL void kt(KC_GLOBAL float *y) { size_t i = kc_global_id(0); y[i] = g((float)i); }"},
      {"ka.c", "KC_KERNEL void ka(KC_GLOBAL float *y, float base, int n) {\n"
               "  size_t i = kc_global_id(0);\n  if ((int)i < n) y[i] = base + (float)i;\n}\n"},
      {"kn.c", "KC_KERNEL void kn(KC_GLOBAL float *y) { y[kc_global_id(0)] = (float)(N * sizeof(T)); }"},
      {"ks.c",
       "KC_KERNEL void ks(KC_GLOBAL float *y) {\n  T v = (T)V;\n  y[kc_global_id(0)] = (float)v;\n}\n"},
      {"kb_sqrt.c", "KC_KERNEL void kb(KC_GLOBAL float *y) {\n  y[kc_global_id(0)] = (float)sqrt(4.0);\n}\n"},
      {"sqrt.c", "KC_DEVICE double sqrt(double x) { (void)x; return 42.0; }"},
      {"recursion.c", "KC_DEVICE float ping_fn(float x) { return x <= 0.0f ? 0.0f : pong_fn(x - 1.0f); }"},
      {"self.c", "KC_KERNEL void kself(KC_GLOBAL float *y) { if (y[0] > 1.0f) kself(y); }"},
      {"demo_k.c", "KC_KERNEL void k(KC_GLOBAL float *out, float x) {\n  size_t i = kc_global_id(0);\n"
                   "  out[i] = h(x) + (float)i;\n}"},
      {"int.c", "KC_DEVICE int g(int a) { return a + 1; }"},
      {"saxpy.c",
       "KC_KERNEL void saxpy(KC_GLOBAL float *y, KC_GLOBAL const float *x, float a, unsigned n) {\n"
       "  size_t i = kc_global_id(0);\n  if (i < n) y[i] = a * x[i] + y[i];\n}\n"},
      {"vector.c", "KC_KERNEL void k(KC_GLOBAL float4 *v, uchar16 m, int2 p, half h) { v[0].x = p.y; }"},
      {"comment_in_params.c", "/* k(int z) */ KC_KERNEL void k(\n  int a\n) { \"k(\"; }"},
      {"comment_before_paren.c", "KC_KERNEL void k /* (int x) */ (KC_GLOBAL float *y) { y[0] = 1; }"},
      {"line_comment_paren.c", "KC_KERNEL void k // (int x)\n(int a) { }"},
      {"preprocessor.c",
       "#define TWICE(x) (2 * (x))\n#if defined(FOO) \\\n  && BAR(1)\nint hidden(void);\n#endif\n"
       "  # pragma unroll\nKC_DEVICE float f(float x) { return TWICE(x) + g(x); }\n"},
      {"strings.c", "KC_DEVICE int f(void) { const char *s = \"call(me) \\\" not(this)\"; char c = '('; "
                    "char d = '\\''; return s[0] + c + d + real(1); }"},
      {"numbers.c", "KC_DEVICE double f(void) { return 1.0e+5f + 0x1p-3 + .5e-2 + 0xABCull + 1e10L + 07 + "
                    "1.f + x1e5(2); }"},
      {"unterminated_comment.c", "KC_DEVICE float f(float x) { return x; } /* never closed ( k("},
      {"unterminated_string.c", "KC_DEVICE float f(float x) { return \"x;\n#define A b(\nk(int a) }"},
      {"cuda.c",
       "__device__ float h(float x) { return x; }\n__global__ void k(float *y) { y[threadIdx.x] = h(1); }"},
      {"opencl.c", "__kernel void k(__global float *y, __local float *tmp) { y[get_global_id(0)] = "
                   "tmp[get_local_id(0)]; barrier(CLK_LOCAL_MEM_FENCE); }"},
      {"keywords.c", "KC_DEVICE int f(int a) { if (a) return sizeof (int); while (a--) for (;;) "
                     "switch (a) { default: return (int)_Alignof(long) + alignof(int); } return g(a); }"},
      {"empty_params.c", "KC_KERNEL void k(void) {}"},
      {"blank_params.c", "KC_KERNEL void k( ) {}"},
      {"nested_params.c", "KC_KERNEL void k(KC_GLOBAL float (*m)[4], int a[N], void (*cb)(int, float)) {}"},
      {"many_params.c", "KC_KERNEL void k(int a0, int a1, int a2, int a3, int a4, int a5, int a6, int a7, "
                        "int a8, int a9, int a10, int a11, int a12, int a13, int a14, int a15, int a16, "
                        "int a17, int a18, int a19, int a20, int a21, int a22, int a23, int a24, int a25, "
                        "int a26, int a27, int a28, int a29, int a30, int a31, int a32) {}"},
      {"bad_params.c", "KC_KERNEL void k(int, float b,) {"},
      {"unterminated_params.c", "KC_KERNEL void k(int a, float b"},
      {"crlf.c", "KC_DEVICE float h(float x)\r\n{\r\n  return g\r\n(x);\r\n}\r\n"},
      {"utf8.c", "KC_DEVICE float h(float x) { /* \xc3\xa9t\xc3\xa9 */ return \xce\xbb(x); }"},
      /* preprocessor lines read (issue 14): macro bodies, pastes, splices, includes */
      {"macro_call.c",
       "KC_KERNEL void k(KC_GLOBAL float *y) {\n#define CALL(x) helper(x)\n  y[0] = CALL(1);\n}\n"},
      {"macro_object.c", "#define NAME 7"},
      {"macro_spliced.c", "#define TWICE(x) \\\n  (dbl(x) * SCALE)"},
      {"paste_known.c", "#define JOINED(x) op_ ## add(x)"},
      {"paste_param.c", "#define OP(name, x) op_ ## name(x) ## _t pre_##name##_post x##_impl #x"},
      {"paste_variadic.c", "#define V(fmt, ...) log_##fmt(__VA_ARGS__) f(, ## __VA_ARGS__)"},
      {"splice_name.c", "KC_KERNEL void ks(KC_GLOBAL float *y) { y[0] = hel\\\nper(1.0f); }"},
      {"splice_crlf.c", "#def\\\r\nine M(x) he\\\r\nlp(x)\r\n"},
      {"include_quoted.c", "#include \"common.h\"\n#include <math.h>\n# include_next \"dsp/fir.cuh\"\nk(1);"},
      {"include_computed.c", "#define HDR \"x.h\"\n#include HDR\n#include \"unterminated\n"},
      {"directives.c", "#if defined(A) && B(1)\n#elif C\n#error don't call d(1)\n#pragma unroll N\n#endif\n"},
      {"macro_many_params.c",
       "#define M(a0,a1,a2,a3,a4,a5,a6,a7,a8,a9,b0,b1,b2,b3,b4,b5,b6,b7,b8,b9,c0,c1,c2,c3,c4,"
       "c5,c6,c7,c8,c9,d0,d1,d2,d3) a0##d3 d3 x##y\n"},
  };
  for (size_t i = 0; i < sizeof s / sizeof *s; i++) put_str("scan", s[i].name, s[i].src);
}

/* ---------------------------------------------------------------- file */

static void file_seeds(void) {
  static const struct {
    const char *name, *src;
  } s[] = {
      {"typical.cl", "/* a file */\n#include \"common.h\"\n#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n"
                     "#define BIAS 1.0f\ntypedef struct Pair { float a, b; } Pair;\n"
                     "KC_DEVICE float ha(float x);\nKC_DEVICE float ha(float x) { return x + BIAS; }\n"
                     "KC_KERNEL void ka(KC_GLOBAL float *y) { y[kc_global_id(0)] = ha(1.0f); }\n"},
      {"types.c", "struct S { int a; };\nunion U { int a; float b; };\nenum E { A, B };\n"
                  "typedef float (*fn)(float);\nstatic const float t[4] = {1, 2, 3, 4};\n"
                  "__constant float c = 2.0f;\n"},
      {"body_directives.c", "KC_DEVICE float f(float x) {\n#if 1\n  return x;\n#endif\n}\n"},
      {"conditional.c", "#ifdef X\nint a;\n#endif\n"},
      {"duplicate.c", "KC_DEVICE float h(float x) { return x; }\nKC_DEVICE float h(float x) { return x; }\n"},
      {"unterminated.c", "KC_DEVICE float h(float x) { return x;\n"},
      {"stray_brace.c", "}\n"},
      {"cuda.cu", "__device__ float h(float x) { return x; }\n"
                  "extern \"C\" __global__ void __launch_bounds__(256) k(float *y) { y[0] = h(1); }\n"},
      {"attributes.c",
       "KC_KERNEL void k(KC_GLOBAL float *y) __attribute__((reqd_work_group_size(1, 1, 1))) { }\n"},
      {"spliced_define.c",
       "#define LONG(x) \\\n  ((x) + \\\n   1)\nKC_DEVICE int f(int a) { return LONG(a); }\n"},
      {"strings.c", "KC_DEVICE int f(void) { return \"}\"[0] + '{'; } /* } */ // {\n"},
      {"empty.c", ""},
  };
  for (size_t i = 0; i < sizeof s / sizeof *s; i++) put_str("file", s[i].name, s[i].src);
}

/* -------------------------------------------------------------- params */

static void params_seeds(void) {
  static const struct {
    const char *name, *p;
  } s[] = {
      {"empty", ""},
      {"blank", "  \t "},
      {"one", "T=float"},
      {"two", "T=float,N=4"},
      {"unsorted", "N=4,T=float,A=1"},
      {"spaces", "  N = 4 ,\tT = unsigned long long  "},
      {"expression", "V=(1 + 2) * 3,SHIFT=1u<<4"},
      {"hex_float", "X=0x1p-3f,Y=-1.5e+3"},
      {"vector", "T=float4,LANES=4"},
      {"underscore", "_=1,__x__=2,a_b_c=3"},
      {"prefix_keys", "A=1,AB=2,ABC=3,AA=4"},
      {"empty_value", "T="},
      {"blank_value", "T= "},
      {"no_eq", "float"},
      {"two_eq", "T=a=b"},
      {"newline", "T=a\nb"},
      {"backslash", "T=a\\b"},
      {"duplicate", "T=a, T = a"},
      {"digit_key", "1T=x"},
      {"dash_key", "T-1=x"},
      {"space_key", "A B=1"},
      {"trailing_comma", "T=float,"},
      {"leading_comma", ",T=float"},
      {"double_comma", "T=a,,N=1"},
      {"trailing_blank", "T=a , "},
      {"no_key", " = x"},
      {"high_bytes", "T=\xc3\xa9\xff,N=\x80"},
      {"tabs_inside", "T=unsigned\tint,N=1\v"},
  };
  for (size_t i = 0; i < sizeof s / sizeof *s; i++) put_str("params", s[i].name, s[i].p);
  char many[2048] = "";
  for (int i = 0; i < 64; i++) {
    size_t n = strlen(many);
    snprintf(many + n, sizeof many - n, "%sK%02d=%d", i ? "," : "", 63 - i, i);
  }
  put_str("params", "max_entries", many);
  strcat(many, ",K64=64");
  put_str("params", "too_many", many);
}

/* --------------------------------------------------------------- store */

typedef struct buf {
  uint8_t *p;
  size_t len, cap;
} buf;

static void b_put(buf *b, const void *d, size_t n) {
  if (b->len + n > b->cap) {
    b->cap = (b->len + n) * 2 + 64;
    b->p = realloc(b->p, b->cap);
    if (!b->p) abort();
  }
  if (n) memcpy(b->p + b->len, d, n);
  b->len += n;
}
static void b_u32(buf *b, uint32_t v) {
  uint8_t x[4];
  for (int i = 0; i < 4; i++) x[i] = (uint8_t)(v >> (8 * i));
  b_put(b, x, 4);
}
static void b_u64(buf *b, uint64_t v) {
  uint8_t x[8];
  for (int i = 0; i < 8; i++) x[i] = (uint8_t)(v >> (8 * i));
  b_put(b, x, 8);
}
static void b_section(buf *b, uint32_t tag, const buf *body) {
  b_u32(b, tag);
  b_u32(b, 0);
  b_u64(b, body->len);
  b_put(b, body->p, body->len);
}
static void b_kv(buf *b, const char *k, const char *v) {
  b_u32(b, (uint32_t)strlen(k));
  b_u32(b, (uint32_t)strlen(v) + 1);
  b_put(b, k, strlen(k));
  b_put(b, v, strlen(v) + 1);
}

static const uint8_t seed_key[16] = {0x6b, 0x63, 0x61, 0x63, 0x68, 0x65, 0x2d, 0x66,
                                     0x75, 0x7a, 0x7a, 0x2d, 0x6b, 0x65, 0x79, 0x31};

/* The file image of e, as kcache writes it. */
static buf encode(const kc__entry *e) {
  void *img = NULL;
  size_t n = 0;
  if (kc__entry_encode(NULL, e, &img, &n) != KC_OK) abort();
  buf b = {img, n, n};
  return b;
}

static void put_mode(const char *name, uint8_t mode, const void *a, size_t an, const void *c, size_t cn) {
  buf b = {0};
  b_put(&b, &mode, 1);
  b_put(&b, a, an);
  b_put(&b, c, cn);
  put("store", name, b.p, b.len);
  free(b.p);
}

/* An entry file in every mode: as it is (0), as key + payload (1), read by
 * path with its key (2) and with another (6). */
static void put_entry(const char *name, const buf *file) {
  char n[128];
  snprintf(n, sizeof n, "raw_%s", name);
  put_mode(n, 0, file->p, file->len, NULL, 0);
  snprintf(n, sizeof n, "payload_%s", name);
  put_mode(n, 1, file->p + 16, 16, file->p + KC__STORE_HEADER, file->len - KC__STORE_HEADER);
  snprintf(n, sizeof n, "file_%s", name);
  put_mode(n, 2, file->p + 16, 16, file->p + KC__STORE_HEADER, file->len - KC__STORE_HEADER);
  snprintf(n, sizeof n, "file_wrong_key_%s", name);
  put_mode(n, 6, file->p + 16, 16, file->p + KC__STORE_HEADER, file->len - KC__STORE_HEADER);
}

/* A payload (mode 1) built section by section. */
static void put_payload(const char *name, const buf *payload) {
  char n[128];
  snprintf(n, sizeof n, "payload_%s", name);
  put_mode(n, 1, seed_key, 16, payload->p, payload->len);
}

typedef enum {
  P_OK,
  P_DUP_META,
  P_NO_SIG,
  P_META_LAST,
  P_UNKNOWN_TAG,
  P_OVERRUN,
  P_SHORT_HEADER,
  P_META_ZERO_VLEN,
  P_META_NO_NUL,
  P_META_INCOMPLETE,
  P_DEFS_COUNT,
  P_DEFS_NAME,
  P_DEFS_TRAILING,
  P_SIG_LEN,
  P_LOG_NO_NUL,
  P_LOG_EMPTY,
  P_COUNT
} payload_kind;
static const char *const payload_names[P_COUNT] = {
    "sections_ok",       "meta_twice",       "sig_missing",      "meta_last",
    "unknown_section",   "section_overruns", "short_section",    "meta_empty_value",
    "meta_unterminated", "meta_incomplete",  "defs_count_high",  "defs_name_unterminated",
    "defs_trailing",     "sig_length_wrong", "log_unterminated", "log_empty"};

static buf payload(payload_kind kind) {
  buf meta = {0}, defs = {0}, log = {0}, sig = {0}, art = {0}, out = {0};
  static const char *const keys[] = {"backend", "identity", "options", "params", "entry", "library"};
  static const char *const vals[] = {"host", "cc 12.2.0", "-O2", "T=float", "k", KC_VERSION_STRING};
  for (int i = 0; i < 6; i++)
    if (!(kind == P_META_INCOMPLETE && i == 4)) b_kv(&meta, keys[i], vals[i]);
  b_kv(&meta, "created_ns", "1700000000000000000");
  b_kv(&meta, "compile_ns", "12345678");
  b_kv(&meta, "tu_hash", "00112233445566778899aabbccddeeff");
  if (kind == P_META_ZERO_VLEN) {
    b_u32(&meta, 3);
    b_u32(&meta, 0);
    b_put(&meta, "abc", 3);
  }
  if (kind == P_META_NO_NUL) {
    b_u32(&meta, 1);
    b_u32(&meta, 2);
    b_put(&meta, "xyz", 3);
  }
  static const char *const dn[] = {"h", "k"};
  static const char *const dt[] = {"KC_DEVICE float h(float x) { return x + 1.0f; }",
                                   "KC_KERNEL void k(KC_GLOBAL T *y) { y[kc_global_id(0)] = h(1); }"};
  b_u32(&defs, kind == P_DEFS_COUNT ? 1000 : 2);
  for (int i = 0; i < 2; i++) {
    b_u32(&defs, (uint32_t)strlen(dn[i]) + 1);
    b_put(&defs, dn[i], strlen(dn[i]) + (kind == P_DEFS_NAME ? 0 : 1));
    if (kind == P_DEFS_NAME) b_put(&defs, "!", 1);
    b_u64(&defs, strlen(dt[i]) + 1);
    b_put(&defs, dt[i], strlen(dt[i]) + 1);
  }
  if (kind == P_DEFS_TRAILING) b_put(&defs, "junk", 4);
  const char *logtext = "warning: unused variable 'x'\n";
  if (kind != P_LOG_EMPTY) b_put(&log, logtext, strlen(logtext) + (kind == P_LOG_NO_NUL ? 0 : 1));
  b_u32(&sig, kind == P_SIG_LEN ? 3 : 2);
  b_u64(&sig, KC__SIG(KC_ARG_BUFFER, 0));
  b_u64(&sig, KC__SIG(KC_ARG_SCALAR, 4));
  b_put(&art,
        "\x7f"
        "ELF fake shared object bytes",
        29);

  if (kind != P_META_LAST) b_section(&out, KC__SEC_META, &meta);
  if (kind == P_DUP_META) b_section(&out, KC__SEC_META, &meta);
  b_section(&out, KC__SEC_DEFS, &defs);
  if (kind == P_UNKNOWN_TAG) b_section(&out, 77, &log);
  b_section(&out, KC__SEC_LOG, &log);
  if (kind != P_NO_SIG) b_section(&out, KC__SEC_SIG, &sig);
  b_section(&out, KC__SEC_ARTIFACT, &art);
  if (kind == P_META_LAST) b_section(&out, KC__SEC_META, &meta);
  if (kind == P_OVERRUN) {
    b_u32(&out, 9);
    b_u32(&out, 0);
    b_u64(&out, 1000);
    b_put(&out, "abc", 3);
  }
  if (kind == P_SHORT_HEADER) b_put(&out, "\x01\0\0\0\0\0", 6);
  free(meta.p);
  free(defs.p);
  free(log.p);
  free(sig.p);
  free(art.p);
  return out;
}

/* key + payload with a header as kcache writes it */
static buf wrap(const uint8_t key[16], const buf *payload, uint32_t version) {
  buf b = {0};
  uint8_t h[KC__STORE_HEADER] = {0};
  memcpy(h, KC__STORE_MAGIC, 8);
  for (int i = 0; i < 4; i++) h[8 + i] = (uint8_t)(version >> (8 * i));
  h[12] = KC__STORE_HEADER;
  memcpy(h + 16, key, 16);
  uint64_t plen = payload->len, sum = XXH3_64bits(payload->p, payload->len);
  for (int i = 0; i < 8; i++) h[32 + i] = (uint8_t)(plen >> (8 * i)), h[40 + i] = (uint8_t)(sum >> (8 * i));
  uint64_t hs = XXH3_64bits(h, 56);
  for (int i = 0; i < 8; i++) h[56 + i] = (uint8_t)(hs >> (8 * i));
  b_put(&b, h, sizeof h);
  b_put(&b, payload->p, payload->len);
  return b;
}

/* Entries that the host backend compiled, from a store made here. */
static void real_entries(void) {
  const char *tmp = getenv("TMPDIR");
  char root[512], vdir[600];
  snprintf(root, sizeof root, "%s/kc-make-seeds-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(root)) return;
  kc_options opt;
  kc_options_init(&opt);
  opt.backend = KC_BACKEND_HOST;
  opt.cache_dir = root;
  opt.host_cc = access("/usr/bin/tcc", X_OK) == 0 ? "tcc" : NULL; /* small artifacts */
  kc_runtime *rt = NULL;
  kc_kernel *k = NULL, *kn = NULL;
  if (kc_runtime_create(&opt, &rt) == KC_OK &&
      kc_define(rt, "h", "KC_DEVICE float h(float x) { return x + 1.0f; }", NULL) == KC_OK &&
      kc_define(rt, "k", "KC_KERNEL void k(KC_GLOBAL float *y) { y[kc_global_id(0)] = h(1.0f); }", NULL) ==
          KC_OK &&
      kc_define(rt, "kn",
                "KC_KERNEL void kn(KC_GLOBAL float *y, T a) { y[kc_global_id(0)] = (float)(N * a); }",
                NULL) == KC_OK &&
      kc_kernel_create(rt, "k", NULL, &k) == KC_OK && kc_kernel_create(rt, "kn", "T=int,N=4", &kn) == KC_OK &&
      kc_kernel_compile(k) == KC_OK && kc_kernel_compile(kn) == KC_OK) {
    kc__store_vdir(root, vdir, sizeof vdir);
    kc__store_file *files = NULL;
    size_t n = 0;
    if (kc__store_list(NULL, vdir, &files, &n) == KC_OK) {
      for (size_t i = 0; i < n; i++) {
        kc__entry e;
        if (kc__entry_read(NULL, files[i].path, NULL, &e, NULL, 0) != KC_OK) continue;
        buf file = {e.buf, e.size, e.size};
        char name[64];
        snprintf(name, sizeof name, "compiled_%s%s", e.entry, opt.host_cc ? "_tcc" : "");
        put_mode(name[0] ? name : "compiled", 0, file.p, file.len, NULL, 0);
        snprintf(name, sizeof name, "file_compiled_%s", e.entry);
        put_mode(name, 2, file.p + 16, 16, file.p + KC__STORE_HEADER, file.len - KC__STORE_HEADER);
        kc__entry_free(NULL, &e);
      }
      kc__store_list_free(NULL, files, n);
    }
  } else {
    fprintf(stderr, "make_seeds: no compiled entries (%s)\n", kc_errmsg(rt));
  }
  kc_kernel_destroy(k);
  kc_kernel_destroy(kn);
  kc_runtime_destroy(rt);
  char cmd[700];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  if (system(cmd) != 0) fprintf(stderr, "make_seeds: cannot remove %s\n", root);
}

static void store_seeds(void) {
  /* entries as kcache encodes them */
  kc__key_def defs[] = {{"h", "KC_DEVICE float h(float x) { return x + 1.0f; }", 47},
                        {"k", "KC_KERNEL void k(KC_GLOBAL float *y) { y[kc_global_id(0)] = h(1); }", 66}};
  uint64_t sig[] = {KC__SIG(KC_ARG_BUFFER, 0), KC__SIG(KC_ARG_SCALAR, 4), KC__SIG(KC_ARG_SCALAR, UINT32_MAX)};
  kc__entry e;
  memset(&e, 0, sizeof e);
  memcpy(e.key, seed_key, 16);
  e.backend = "host";
  e.identity = "/usr/bin/cc|cc (Debian 12.2.0-14) 12.2.0";
  e.options = "";
  e.params = "";
  e.entry = "k";
  e.library = KC_VERSION_STRING;
  buf f = encode(&e);
  put_entry("minimal", &f);
  free(f.p);

  e.options = "-O3 -ffast-math";
  e.params = "N=4,T=float";
  e.created_ns = 1700000000123456789ull;
  e.compile_ns = 42000000;
  for (int i = 0; i < 16; i++) e.tu_hash[i] = (uint8_t)(i * 17);
  e.defs = defs;
  e.ndefs = 2;
  e.sig = sig;
  e.nsig = 3;
  static const uint8_t art[] = "\x7f"
                               "ELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\x03\0>\0artifact bytes";
  e.artifact = art;
  e.artifact_size = sizeof art;
  e.log = "kernel.c:1:10: warning: unused parameter\n";
  e.log_len = strlen(e.log);
  f = encode(&e);
  put_entry("typical", &f);

  /* the same file, damaged the ways a disk or a crash damages it */
  put_mode("raw_truncated_header", 0, f.p, 40, NULL, 0);
  put_mode("raw_truncated_payload", 0, f.p, f.len - 7, NULL, 0);
  put_mode("raw_empty", 0, NULL, 0, NULL, 0);
  buf d = {0};
  b_put(&d, f.p, f.len);
  d.p[f.len / 2] ^= 0x20;
  put_mode("raw_payload_bit_flipped", 0, d.p, d.len, NULL, 0);
  d.p[f.len / 2] ^= 0x20;
  d.p[20] ^= 1;
  put_mode("raw_header_bit_flipped", 0, d.p, d.len, NULL, 0);
  d.p[20] ^= 1;
  d.p[0] = 'X';
  put_mode("raw_bad_magic", 0, d.p, d.len, NULL, 0);
  b_put(&d, "extra", 5);
  d.p[0] = 'K';
  put_mode("raw_trailing_bytes", 0, d.p, d.len, NULL, 0);
  free(d.p);
  buf pl = {f.p + KC__STORE_HEADER, f.len - KC__STORE_HEADER, 0};
  buf v2 = wrap(seed_key, &pl, 2);
  put_mode("raw_version_2", 0, v2.p, v2.len, NULL, 0);
  free(v2.p);
  free(f.p);

  /* payloads damaged inside, behind a correct header */
  for (int k = 0; k < P_COUNT; k++) {
    buf p = payload((payload_kind)k);
    put_payload(payload_names[k], &p);
    if (k == P_OK || k == P_META_LAST) {
      buf w = wrap(seed_key, &p, KC__STORE_FORMAT);
      char n[64];
      snprintf(n, sizeof n, "file_%s", payload_names[k]);
      put_mode(n, 2, w.p + 16, 16, w.p + KC__STORE_HEADER, w.len - KC__STORE_HEADER);
      free(w.p);
    }
    free(p.p);
  }

  real_entries();

  /* counters files and key names (mode 3) */
  uint8_t c[72];
  memcpy(c, "KCSTATS1", 8);
  for (int i = 8; i < 72; i++) c[i] = (uint8_t)(i * 7);
  put_mode("counters_valid", 3, c, 72, NULL, 0);
  put_mode("counters_short", 3, c, 71, NULL, 0);
  put_mode("counters_long", 3, c, 72, "x", 1);
  c[0] = 'X';
  put_mode("counters_bad_magic", 3, c, 72, NULL, 0);
  put_mode("key_name", 3, "00112233445566778899aabbccddeeff", 32, NULL, 0);
  put_mode("key_name_upper", 3, "00112233445566778899AABBCCDDEEFF", 32, NULL, 0);
  put_mode("key_name_bad", 3, "0011223344556677889900aabbccddgg", 32, NULL, 0);
}

/* ------------------------------------------------------------- options */

static void options_seeds(void) {
  static const struct {
    const char *name, *env;
  } s[] = {
      {"defaults", "500M\nhost\n60\n\ncc\n/tmp/kc\n/home/u/.cache\n/home/u"},
      {"gib", "2G\nhost\n0.5\n0\ncc"},
      {"fraction", "1.5G\nhost\n\n1"},
      {"bytes", "12345\nhost\n1\nyes"},
      {"kib", " 100 KiB \nhost"},
      {"tib", "1TiB\nhost\nnan\n\ncc -O2 -g"},
      {"lower", "7kb\nhost\n4e6\n0\n/usr/bin/cc"},
      {"hex", "0x10\nhost\n-1"},
      {"exponent", "1e3\nhost\n  \n0\n   "},
      {"max", "18446744073709551615\nhost"},
      {"overflow", "16777216T\nhost"},
      {"huge", "999999999999999G\nhost"},
      {"negative", "-5M\nhost"},
      {"spaced_unit", "5 M B\nhost"},
      {"bad_unit", "5 iB\nhost"},
      {"unit_only", "G\nhost"},
      {"dot", ".\nhost"},
      {"trailing_junk", "10Mx\nhost"},
      {"backend_bogus", "\nbogus"},
      {"backend_upper", "\nHOST"},
      {"backend_auto", "\nauto"},
      {"backend_opencl", "\nopencl"},
      {"backend_cuda", "\ncuda"},
      {"backend_unset", ""},
      {"host_cc_missing", "\nhost\n\n\nno-such-compiler-kc"},
      {"host_cc_blank", "\nhost\n\n\n   "},
      {"host_cc_tab", "\nhost\n\n\ncc\t-O2"},
      {"host_cc_dir", "\nhost\n\n\n/"},
      {"host_cc_words",
       "\nhost\n\n\ncc a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a "
       "a a a a a a a a a a a a a a a a a a a a a a a"},
      {"root_xdg", "\n\n\n\n\n\n/x/cache\n/home/u"},
      {"root_xdg_relative", "\n\n\n\n\n\nrelative/cache\n/home/u"},
      {"root_home", "\n\n\n\n\n\n\n/home/someone-with-a-long-name"},
      {"root_none", "\n\n\n\n\n\n\n"},
      {"disable_spaces", "1M\nhost\n1\n \ncc"},
  };
  for (size_t i = 0; i < sizeof s / sizeof *s; i++) put_str("options", s[i].name, s[i].env);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s CORPUS_DIR   (tests/fuzz/corpus)\n", argv[0]);
    return 2;
  }
  out_root = argv[1];
  mkdir(out_root, 0755);
  scan_seeds();
  file_seeds();
  params_seeds();
  store_seeds();
  options_seeds();
  printf("make_seeds: %d files under %s\n", written, out_root);
  return 0;
}
