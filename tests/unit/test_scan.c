/* SPDX-License-Identifier: MIT */
/*
 * test_scan.c -- the parsers of text kcache does not control, through the
 * library's kc__ hooks: the identifier scanner that finds dependencies, the
 * specialization-parameter canonicalizer, the kernel parameter-list parser
 * and scalar sizes. Scanner inputs are copied into buffers of exactly their
 * length (no terminating NUL), so a read past the end shows under ASan.
 */
#include "kc_test.h"

#include "kc_internal.h"

#include <stdlib.h>

static kc_runtime *rt; /* for the allocator of the functions under test */

/* --------------------------------------------------------------- scanner */

typedef struct found {
  char text[1024]; /* "name" or "name(" per identifier, space separated */
  int count;
  int stop_after; /* 0: never stop early */
} found;

static bool collect(void *ud, const kc__ident *id) {
  found *f = ud;
  size_t n = strlen(f->text);
  const char *open = id->kind == KC__ID_INCLUDE ? "\"" : id->kind == KC__ID_SYSINCLUDE ? "<" : "";
  const char *close = id->kind == KC__ID_INCLUDE      ? "\""
                      : id->kind == KC__ID_SYSINCLUDE ? ">"
                      : id->kind == KC__ID_PREFIX     ? "*"
                                                      : "";
  snprintf(f->text + n, sizeof f->text - n, "%s%s%.*s%s%s", n ? " " : "", open, (int)id->len, id->start,
           close, id->call ? "(" : "");
  f->count++;
  return !(f->stop_after && f->count >= f->stop_after);
}

/* Scans src (without its NUL) and returns the identifiers found. */
static const char *scan(const char *src) {
  static found f;
  memset(&f, 0, sizeof f);
  size_t len = strlen(src);
  char *exact = malloc(len ? len : 1);
  assert_non_null(exact);
  memcpy(exact, src, len);
  kc__scan_idents(exact, len, collect, &f);
  free(exact);
  return f.text;
}

#define EXPECT_SCAN(src, want) \
  do { \
    const char *got_ = scan(src); \
    if (strcmp(got_, (want))) \
      fail_msg("scanning \"%s\"\n  got:      \"%s\"\n  expected: \"%s\"", src, got_, want); \
  } while (0)

static void test_scan_identifiers_and_calls(void **state) {
  (void)state;
  EXPECT_SCAN("", "");
  EXPECT_SCAN("a", "a");
  EXPECT_SCAN("a b_1 _c", "a b_1 _c");
  EXPECT_SCAN("f(x)", "f( x");
  EXPECT_SCAN("f (x) g\t(y) h\n(z) i\r\n(w)", "f( x g( y h( z i( w");
  EXPECT_SCAN("a.b->c(d)", "a b c( d");
  EXPECT_SCAN("x=y+z;", "x y z");
  EXPECT_SCAN("f", "f"); /* at the very end */
  EXPECT_SCAN("f   ", "f"); /* blanks, then the end */
  EXPECT_SCAN("if (a) while(b) sizeof(c)", "if( a while( b sizeof( c");
}

static void test_scan_skips_comments(void **state) {
  (void)state;
  EXPECT_SCAN("a /* b c(d) */ e", "a e");
  EXPECT_SCAN("a // b(c)\nd", "a d");
  EXPECT_SCAN("a /* b\n c */ d", "a d");
  EXPECT_SCAN("a/**/b", "a b");
  EXPECT_SCAN("a /* unterminated b", "a");
  EXPECT_SCAN("a /*/ b", "a");
  EXPECT_SCAN("a /", "a");
  EXPECT_SCAN("a //", "a");
  EXPECT_SCAN("// only", "");
}

static void test_scan_skips_literals(void **state) {
  (void)state;
  EXPECT_SCAN("a = \"b(c) d\"; e", "a e");
  EXPECT_SCAN("a = \"b\\\"c\" d", "a d"); /* escaped quote */
  EXPECT_SCAN("a = \"b\\\\\" c", "a c"); /* escaped backslash before the quote */
  EXPECT_SCAN("a = 'b'; c = '\\''; d", "a c d");
  EXPECT_SCAN("a = \"unterminated b", "a");
  EXPECT_SCAN("a = 'x", "a");
  EXPECT_SCAN("a = \"line\nb", "a b"); /* a string does not cross a newline */
  EXPECT_SCAN("\"", "");
  EXPECT_SCAN("\"\\", "");
}

/* Preprocessor lines are read (issue 14): a #define's name, then its body
 * without the macro's parameters; #if names; includes are reported as
 * "<name>" or "\"name\"" here; #error text is not. */
static void test_scan_reads_preprocessor_lines(void **state) {
  (void)state;
  EXPECT_SCAN("#include <math.h>\na", "<math.h> a");
  EXPECT_SCAN("#include \"u.h\"\na", "\"u.h\" a");
  EXPECT_SCAN("#include HDR\na", "\"\" HDR a"); /* computed: an unnamed include, then its names */
  EXPECT_SCAN("  #define F(x) g(x)\nb", "F( g( b");
  EXPECT_SCAN("#define A \\\n  q(1)\nr", "A q( r"); /* continued line */
  EXPECT_SCAN("#if X\nf(1)\n#endif\n", "X f(");
  EXPECT_SCAN("#ifdef USE_FAST\n#endif", "USE_FAST");
  EXPECT_SCAN("#error don't use helper(1)\nz", "z");
  EXPECT_SCAN("a # b", "a b"); /* not at the start of a line */
  EXPECT_SCAN("#", "");
  EXPECT_SCAN("#define A \\", "A");
  EXPECT_SCAN("#define S \"/*\" x\ny", "S x y"); /* a comment marker in a literal */
  EXPECT_SCAN("#define L(a, b, ...) a(b) h(__VA_ARGS__) k\n", "L( h( k");
  EXPECT_SCAN("#define N 7", "N");
  EXPECT_SCAN("k() {\n#define CALL(x) helper(x)\n  CALL(1);\n}", "k( CALL( helper( CALL(");
}

/* Pastes and splices: a paste of known pieces is one name; one that takes
 * a parameter is a prefix ("op_*"); a spliced name is joined. */
static void test_scan_pastes_and_splices(void **state) {
  (void)state;
  EXPECT_SCAN("#define P a ## b(1)\n", "P ab(");
  EXPECT_SCAN("#define P(x) op_ ## x(1)\n", "P( op_*(");
  EXPECT_SCAN("#define P(x) x ## _impl\n", "P( *");
  EXPECT_SCAN("#define P(x) pre_##x##_post\n", "P( pre_*");
  EXPECT_SCAN("#define P(x) f ## 2 (x)\n", "P( f2(");
  EXPECT_SCAN("#define P(x) #x y\n", "P( y"); /* stringized */
  EXPECT_SCAN("#define P(x) f ## 1.5e-3 g\n", "P( f1* g"); /* no name: a prefix */
  EXPECT_SCAN("#define P(x) 1 ## x g\n", "P( g"); /* a number */
  EXPECT_SCAN("a ## b", "a b"); /* outside a #define: no pasting */
  EXPECT_SCAN("hel\\\nper(1)", "helper(");
  EXPECT_SCAN("hel\\\r\nper (1)", "helper(");
  EXPECT_SCAN("f \\\n (x)", "f( x");
  EXPECT_SCAN("#def\\\nine M(x) he\\\nlp(x)\n", "M( help(");
}

static bool collect_enum(void *ud, const kc__ident *id) { return collect(ud, id); }

static const char *scan_enums(const char *src) {
  static found f;
  memset(&f, 0, sizeof f);
  kc__scan_enumerators(src, strlen(src), collect_enum, &f);
  return f.text;
}

static void test_scan_enumerators(void **state) {
  (void)state;
  assert_string_equal(scan_enums("enum Mode { A = 1, B = (2, 3), C };"), "A B C");
  assert_string_equal(scan_enums("typedef enum { X, Y = f(1, 2) } E;"), "X Y");
  assert_string_equal(scan_enums("enum Mode m = A; enum Mode f(int x) { return x; }"), "");
  assert_string_equal(scan_enums("/* enum { no } */ \"enum { no }\" enum { yes };"), "yes");
  assert_string_equal(scan_enums("enum { A, B"), "A B");
}

static void test_scan_skips_numbers(void **state) {
  (void)state;
  EXPECT_SCAN("1.0e+5f + x2", "x2");
  EXPECT_SCAN("0x1p-3 + 10ul + .5f + 1e10 + 0xffu + 3.f", "");
  EXPECT_SCAN("a[0] = b1 * 2.5e-3;", "a b1");
  EXPECT_SCAN("1", "");
  EXPECT_SCAN("x = 1.e", "x");
}

static void test_scan_stops_when_asked(void **state) {
  (void)state;
  static found f;
  memset(&f, 0, sizeof f);
  f.stop_after = 2;
  const char *src = "a b c d";
  kc__scan_idents(src, strlen(src), collect, &f);
  assert_int_equal(f.count, 2);
  assert_string_equal(f.text, "a b");
  /* a length shorter than the text is respected */
  memset(&f, 0, sizeof f);
  kc__scan_idents("abc def", 2, collect, &f);
  assert_string_equal(f.text, "ab");
}

/* A call with a comment between the name and its '(' is still a call in C.
 * The engine relies on `call` to record an edge on a builtin the kernel
 * calls (sqrt, with a comment before its parenthesis), so that defining sqrt
 * later invalidates the kernel. */
static void test_scan_call_through_comment(void **state) {
  (void)state;
  EXPECT_SCAN("f /* c */ (x)", "f( x");
  EXPECT_SCAN("f // c\n (x)", "f( x");
}

static void test_is_identifier_and_keyword(void **state) {
  (void)state;
  assert_true(kc__is_identifier("a"));
  assert_true(kc__is_identifier("_a1"));
  assert_true(kc__is_identifier("A_B_9"));
  assert_false(kc__is_identifier(NULL));
  assert_false(kc__is_identifier(""));
  assert_false(kc__is_identifier("1a"));
  assert_false(kc__is_identifier("a-b"));
  assert_false(kc__is_identifier("a b"));
  assert_false(kc__is_identifier("a\n"));
  assert_true(kc__is_keyword("if", 2));
  assert_true(kc__is_keyword("float", 5));
  assert_true(kc__is_keyword("sizeof", 6));
  assert_true(kc__is_keyword("__global__", 10));
  assert_false(kc__is_keyword("iff", 3));
  assert_false(kc__is_keyword("i", 1));
  assert_false(kc__is_keyword("floa", 4));
  assert_false(kc__is_keyword("sqrt", 4));
  assert_true(kc__is_keyword("ifx", 2)); /* only the first n characters count */
}

/* ----------------------------------------------------- specializations */

static void expect_canon(const char *params, const char *want) {
  char *canon = NULL;
  kc_status st = kc__canon_params(rt, params, &canon);
  if (st)
    fail_msg("kc__canon_params(\"%s\"): %s: %s", params ? params : "NULL", kc_status_name(st), kc_errmsg(rt));
  assert_non_null(canon);
  if (strcmp(canon, want))
    fail_msg("kc__canon_params(\"%s\") = \"%s\", expected \"%s\"", params ? params : "NULL", canon, want);
  kc_free(rt, canon);
}

static void expect_bad_params(const char *params) {
  char *canon = (char *)&canon;
  kc_status st = kc__canon_params(rt, params, &canon);
  if (st != KC_EINVAL)
    fail_msg("kc__canon_params(\"%s\") returned %s (\"%s\"), expected KC_EINVAL", params, kc_status_name(st),
             st ? "" : canon);
  assert_null(canon);
  assert_true(strlen(kc_errmsg(rt)) > 0);
}

static void test_canon_params(void **state) {
  (void)state;
  expect_canon(NULL, "");
  expect_canon("", "");
  expect_canon("   ", "");
  expect_canon("T=float", "T=float");
  expect_canon("T=float,N=4", "N=4,T=float");
  expect_canon("N=4,T=float", "N=4,T=float");
  expect_canon(" T = float , N = 4 ", "N=4,T=float");
  expect_canon("\tT=float,\nN=4", "N=4,T=float");
  expect_canon("T=unsigned int", "T=unsigned int"); /* blanks inside a value stay */
  expect_canon("B=1,A=2,C=3", "A=2,B=1,C=3");
  expect_canon("AB=1,A=2", "A=2,AB=1"); /* a prefix sorts first */
  expect_canon("a=1,A=2", "A=2,a=1"); /* byte order, case-sensitive */
  expect_canon("_k=(1+2)", "_k=(1+2)");

  expect_bad_params("T");
  expect_bad_params("=x");
  expect_bad_params(" = x");
  expect_bad_params("T=a,T=b");
  expect_bad_params("T=a, T = a");
  expect_bad_params("1T=x");
  expect_bad_params("T-1=x");
  expect_bad_params("T=");
  expect_bad_params("T= ");
  expect_bad_params("T=float,");
  expect_bad_params(",T=float");
  expect_bad_params("T=a,,N=1");
  expect_bad_params("T=a , ");
  expect_bad_params("T=a=b");
  expect_bad_params("T=a\nb");
  expect_bad_params("T=a\\b");

  /* 64 entries are fine, 65 are not */
  char many[1024] = "";
  for (int i = 0; i < 64; i++) {
    size_t n = strlen(many);
    snprintf(many + n, sizeof many - n, "%sK%02d=%d", i ? "," : "", i, i);
  }
  char *canon = NULL;
  KCT_OK(rt, kc__canon_params(rt, many, &canon));
  assert_string_equal(canon, many); /* already sorted */
  kc_free(rt, canon);
  strcat(many, ",K64=64");
  expect_bad_params(many);
}

/* ------------------------------------------------------ parameter lists */

static void test_parse_params(void **state) {
  (void)state;
  kc__param *p = NULL;
  uint32_t n = 99;
  KCT_OK(rt, kc__parse_params(rt, "k", "KC_KERNEL void k(KC_GLOBAL float *y, const int n, T a)", &p, &n));
  assert_int_equal(n, 3);
  assert_string_equal(p[0].name, "y");
  assert_string_equal(p[0].type, "KC_GLOBAL float *");
  assert_true(p[0].is_buffer);
  assert_string_equal(p[1].name, "n");
  assert_string_equal(p[1].type, "const int");
  assert_false(p[1].is_buffer);
  assert_string_equal(p[2].name, "a");
  assert_string_equal(p[2].type, "T");
  kc__free_params(rt, p, n);

  KCT_OK(rt, kc__parse_params(rt, "k", "KC_KERNEL void k(void) {}", &p, &n));
  assert_int_equal(n, 0);
  kc__free_params(rt, p, n);
  KCT_OK(rt, kc__parse_params(rt, "k", "KC_KERNEL void k( ) {}", &p, &n));
  assert_int_equal(n, 0);
  kc__free_params(rt, p, n);

  /* the name in a comment or string before the definition does not count */
  KCT_OK(rt, kc__parse_params(rt, "k", "/* k(int z) */ KC_KERNEL void k(\n  int a\n) { \"k(\"; }", &p, &n));
  assert_int_equal(n, 1);
  assert_string_equal(p[0].name, "a");
  kc__free_params(rt, p, n);

  /* pointers to pointers, unsigned types */
  KCT_OK(rt, kc__parse_params(rt, "k", "KC_KERNEL void k(unsigned int u,KC_GLOBAL uchar*b)", &p, &n));
  assert_int_equal(n, 2);
  assert_string_equal(p[0].type, "unsigned int");
  assert_string_equal(p[1].name, "b");
  assert_true(p[1].is_buffer);
  kc__free_params(rt, p, n);

  KCT_STATUS(rt, KC_EINVAL, kc__parse_params(rt, "k", "KC_KERNEL void g(int a)", &p, &n));
  KCT_STATUS(rt, KC_EINVAL, kc__parse_params(rt, "k", "KC_KERNEL void k(int)", &p, &n));
  KCT_STATUS(rt, KC_EINVAL, kc__parse_params(rt, "k", "KC_KERNEL void k(int a,)", &p, &n));
  KCT_STATUS(rt, KC_EINVAL, kc__parse_params(rt, "k", "KC_KERNEL void k(int a, float b", &p, &n));
  char many[2048] = "KC_KERNEL void k(";
  for (int i = 0; i <= KC_MAX_ARGS; i++) {
    size_t l = strlen(many);
    snprintf(many + l, sizeof many - l, "%sint a%d", i ? ", " : "", i);
  }
  strcat(many, ") {}");
  KCT_STATUS(rt, KC_EARGS, kc__parse_params(rt, "k", many, &p, &n));
}

static void test_scalar_sizes(void **state) {
  (void)state;
  assert_int_equal(kc__scalar_size("float", NULL), 4);
  assert_int_equal(kc__scalar_size("double", NULL), 8);
  assert_int_equal(kc__scalar_size("int", NULL), 4);
  assert_int_equal(kc__scalar_size("const  int", NULL), 4);
  assert_int_equal(kc__scalar_size(" unsigned   long ", NULL), 8);
  assert_int_equal(kc__scalar_size("unsigned long long", NULL), 8);
  assert_int_equal(kc__scalar_size("uint", NULL), 4);
  assert_int_equal(kc__scalar_size("char", NULL), 1);
  assert_int_equal(kc__scalar_size("int64_t", NULL), 8);
  assert_int_equal(kc__scalar_size("float4", NULL), 16);
  assert_int_equal(kc__scalar_size("float3", NULL), 16);
  assert_int_equal(kc__scalar_size("int2", NULL), 8);
  assert_int_equal(kc__scalar_size("uchar16", NULL), 16);
  assert_int_equal(kc__scalar_size("float5", NULL), 0);
  assert_int_equal(kc__scalar_size("mystruct", NULL), 0);
  assert_int_equal(kc__scalar_size("", NULL), 0);
  kc__spec spec;
  memset(&spec, 0, sizeof spec);
  spec.name = "k";
  spec.params = "N=4,T=double";
  assert_int_equal(kc__scalar_size("T", &spec), 8);
  assert_int_equal(kc__scalar_size("const T", &spec), 8);
  assert_int_equal(kc__scalar_size("float", &spec), 4);
  spec.params = "T=unsigned char";
  assert_int_equal(kc__scalar_size("T", &spec), 1);
  spec.params = "";
  assert_int_equal(kc__scalar_size("T", &spec), 0);
}

int main(int argc, char **argv) {
  int rc = kct_main_init(argc, argv);
  if (rc >= 0) return rc;
  kct_memory_only();
  if (!(rt = kct_main_runtime())) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_scan_identifiers_and_calls),
      cmocka_unit_test(test_scan_skips_comments),
      cmocka_unit_test(test_scan_skips_literals),
      cmocka_unit_test(test_scan_reads_preprocessor_lines),
      cmocka_unit_test(test_scan_pastes_and_splices),
      cmocka_unit_test(test_scan_enumerators),
      cmocka_unit_test(test_scan_skips_numbers),
      cmocka_unit_test(test_scan_stops_when_asked),
      cmocka_unit_test(test_scan_call_through_comment),
      cmocka_unit_test(test_is_identifier_and_keyword),
      cmocka_unit_test(test_canon_params),
      cmocka_unit_test(test_parse_params),
      cmocka_unit_test(test_scalar_sizes),
  };
  rc = KCT_RUN(tests);
  kc_runtime_destroy(rt);
  return rc;
}
