/* SPDX-License-Identifier: MIT */
/*
 * text.h -- what src/core reads of source text: the identifier scanner
 * (lex.c), names and headers, the kernel parameter-list parser and the
 * dialect check (scan.c), specialization parameters. Included by core.h,
 * after the services.
 */
#ifndef KC_CORE_TEXT_H
#define KC_CORE_TEXT_H

enum { /* what the scanner found (kc__ident.kind) */
       KC__ID_NAME, /* an identifier */
       KC__ID_PREFIX, /* a name pasted (##) from a macro parameter: only its prefix is known */
       KC__ID_INCLUDE, /* #include "name" (len 0: a computed or broken include) */
       KC__ID_SYSINCLUDE /* #include <name> */
};

/* One name found in source text. */
typedef struct kc__ident {
  const char *start; /* the name: in the text, or (joined) in the scanner's buffer, valid during the call */
  uint32_t len;
  bool call; /* followed by '(' : in call position */
  uint8_t kind; /* KC__ID_* */
  bool directive; /* on a preprocessor line */
  bool joined; /* spelled across a line splice or pasted with ##: start is not in the text */
  const char *at, *end; /* where it is in the text (an include: its whole line) */
} kc__ident;

typedef bool (*kc__ident_fn)(void *ud, const kc__ident *id);

/* Calls fn for every name of C-family source outside comments and string
 * and character literals (lex.c): identifiers, on preprocessor lines too
 * (a #define's name, then its body without its parameters, pastes
 * resolved), and #include lines; stops early if fn returns false. Never
 * reads past text+len. */
void kc__scan_idents(const char *text, size_t len, kc__ident_fn fn, void *ud);
/* Calls fn for the name of every enumerator that text declares (the first
 * identifier of each item of an `enum [tag] { ... }` body), outside
 * comments, literals and preprocessor lines (lex.c); stops if fn returns
 * false. */
void kc__scan_enumerators(const char *text, size_t len, kc__ident_fn fn, void *ud);

bool kc__is_keyword(const char *s, size_t n);
bool kc__is_identifier(const char *s);
/* A header's name in the table (scan.c): a relative path of letters, digits
 * and "_+-./" with a '.', no empty, "." or ".." part ("util.h", "dsp/f.cuh"). */
bool kc__is_header_name(const char *s);
/* Whether source may be the definition of name (table.c): it mentions it
 * (a #define of it counts), unless name is a header. */
kc_status kc__check_source(const kc_runtime *rt, const char *name, const char *source, size_t len);

/* Parses the parameter list of function `name` in `source`. */
kc_status kc__parse_params(kc_runtime *rt, const char *name, const char *source, kc__param **out,
                           uint32_t *count);
void kc__free_params(kc_runtime *rt, kc__param *p, uint32_t count);
/* The dialect every backend checks the same way (scan.c): the entry
 * `name` of source is declared KC_KERNEL (not KC_DEVICE), and each pointer
 * parameter is KC_GLOBAL (or KC_LOCAL: local memory, KC_ARG_LOCAL_BYTES). KC_EINVAL with the one message
 * otherwise. */
kc_status kc__check_dialect(kc_runtime *rt, const char *name, const char *source, const kc__param *params,
                            uint32_t nparams);

/* The backend-native languages (langs.c): whether name s (n bytes) is one
 * of lang's built-ins (kcache.h, "backend-native languages"), what a
 * message calls the language, and whether the entry `name` of a native
 * source is a kernel of its language (KC_EINVAL saying what it lacks). */
bool kc__lang_builtin(uint8_t lang, const char *s, size_t n);
const char *kc__lang_title(uint8_t lang);
kc_status kc__check_native(kc_runtime *rt, uint8_t lang, const char *name, const char *source);
/* A name expression of a C++ template's instantiation ("scale<float, 4>",
 * for CUDA's nvrtcAddNameExpression): the length of its leading
 * identifier (the template's name), or 0 if s is not one. */
size_t kc__name_expr_base(const char *s);
/* Substitutes the template arguments of name expression expr for the
 * template parameters (of the template entry in source) in the types of
 * params, so that "T *y, T a" of scale<float> reads "float *y, float a". */
kc_status kc__template_params(kc_runtime *rt, const char *expr, const char *source, kc__param *params,
                              uint32_t nparams);

/* Canonical form of "K=V,K2=V2": sorted by key, trimmed. */
kc_status kc__canon_params(kc_runtime *rt, const char *params, char **canon);

#endif /* KC_CORE_TEXT_H */
