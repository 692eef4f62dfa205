/* SPDX-License-Identifier: MIT */
/* hashbe.c -- the backend declared in hashbe.h. */
#include "hashbe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t hashbe_fnv(uint64_t h, const void *data, size_t len) {
  const unsigned char *p = data;
  for (size_t i = 0; i < len; i++) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

static int by_name(const void *a, const void *b) {
  return strcmp(((const hashbe_def *)a)->name, ((const hashbe_def *)b)->name);
}

uint64_t hashbe_digest(const char *params, const hashbe_def *defs, uint32_t ndefs, const char *entry) {
  hashbe_def sorted[64];
  if (ndefs > 64) abort();
  memcpy(sorted, defs, ndefs * sizeof *defs);
  qsort(sorted, ndefs, sizeof *sorted, by_name);
  uint64_t h = hashbe_fnv(HASHBE_FNV_INIT, params, strlen(params) + 1);
  for (uint32_t i = 0; i < ndefs; i++) {
    h = hashbe_fnv(h, sorted[i].name, strlen(sorted[i].name) + 1);
    h = hashbe_fnv(h, sorted[i].text, sorted[i].len);
    h = hashbe_fnv(h, "", 1);
  }
  return hashbe_fnv(h, entry, strlen(entry) + 1);
}

static const char hash_prelude[] = "/* kcache hash backend (tests): nothing here is compiled */\n"
                                   "#define KC_KERNEL\n"
                                   "#define KC_DEVICE\n"
                                   "#define KC_GLOBAL\n";

static bool ident_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* Whether text calls `name` outside comments (name, spaces, '('). */
static bool calls(const char *t, size_t len, const char *name) {
  size_t nl = strlen(name);
  for (size_t i = 0; i < len;) {
    if (t[i] == '/' && i + 1 < len && t[i + 1] == '*') {
      const char *end = NULL;
      for (size_t j = i + 2; j + 1 < len; j++)
        if (t[j] == '*' && t[j + 1] == '/') {
          end = t + j + 2;
          break;
        }
      i = end ? (size_t)(end - t) : len;
      continue;
    }
    if (t[i] == '/' && i + 1 < len && t[i + 1] == '/') {
      while (i < len && t[i] != '\n') i++;
      continue;
    }
    if (ident_char(t[i]) && (i == 0 || !ident_char(t[i - 1])) && len - i >= nl && !memcmp(t + i, name, nl) &&
        (i + nl == len || !ident_char(t[i + nl]))) {
      size_t j = i + nl;
      while (j < len && (t[j] == ' ' || t[j] == '\t' || t[j] == '\n')) j++;
      if (j < len && t[j] == '(') return true;
    }
    i++;
  }
  return false;
}

#define WHY(...) \
  do { \
    snprintf(why, whylen, __VA_ARGS__); \
    return false; \
  } while (0)

bool hashbe_parse(const char *tu, size_t len, const char *entry, uint64_t *digest, char *why, size_t whylen) {
  static const char marker[] = "\n/* specialization parameters */\n";
  static const char line1[] = "#line 1 \"";
  if (strlen(tu) != len) WHY("the length given (%zu) is not the text's (%zu)", len, strlen(tu));
  if (strncmp(tu, hash_prelude, sizeof hash_prelude - 1)) WHY("the prelude is not the backend's");
  const char *p = strstr(tu, marker);
  if (!p) WHY("no specialization parameters section");
  p += sizeof marker - 1;
  const char *end = tu + len;
  char params[512] = "";
  char helpers[64][64];
  int nhelpers = 0;
  /* #define lines: parameters, then private names of helpers */
  while (p < end && !strncmp(p, "#define ", 8)) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    if (!nl) WHY("unterminated #define");
    const char *a = p + 8, *sp = memchr(a, ' ', (size_t)(nl - a));
    if (!sp) WHY("#define without a value");
    int an = (int)(sp - a), vn = (int)(nl - sp - 1);
    char value[128];
    snprintf(value, sizeof value, "kc__u_%.*s", an, a);
    if ((int)strlen(value) == vn && !memcmp(sp + 1, value, (size_t)vn)) {
      if (nhelpers == 64) WHY("too many helpers");
      snprintf(helpers[nhelpers++], sizeof helpers[0], "%.*s", an, a);
    } else {
      if (nhelpers) WHY("a parameter after the helpers' names");
      size_t pl = strlen(params);
      snprintf(params + pl, sizeof params - pl, "%s%.*s=%.*s", pl ? "," : "", an, a, vn, sp + 1);
    }
    p = nl + 1;
  }
  /* the closure: one block per definition */
  hashbe_def defs[64];
  char names[64][64];
  uint32_t ndefs = 0;
  while (p < end) {
    if (strncmp(p, line1, sizeof line1 - 1)) WHY("expected #line 1 \"name\" at: %.40s", p);
    const char *nm = p + sizeof line1 - 1, *q = strchr(nm, '"');
    if (!q || q[1] != '\n') WHY("malformed #line directive");
    if (ndefs == 64) WHY("too many definitions");
    snprintf(names[ndefs], sizeof names[0], "%.*s", (int)(q - nm), nm);
    const char *text = q + 2;
    const char *next = strstr(text, "\n#line 1 \"");
    const char *stop = next ? next + 1 : end;
    if (stop == text || stop[-1] != '\n') WHY("definition of %s does not end with a newline", names[ndefs]);
    for (uint32_t i = 0; i < ndefs; i++)
      if (!strcmp(names[i], names[ndefs])) WHY("%s appears twice", names[ndefs]);
    defs[ndefs] = (hashbe_def){names[ndefs], text, (size_t)(stop - 1 - text)};
    ndefs++;
    p = stop;
  }
  if (!ndefs) WHY("no definitions");
  if (strcmp(names[ndefs - 1], entry))
    WHY("the last definition is %s, not the entry %s", names[ndefs - 1], entry);
  /* helpers: exactly the closure but the entry, renamed */
  if ((uint32_t)nhelpers != ndefs - 1) WHY("%d helpers renamed for %u definitions", nhelpers, ndefs);
  for (int h = 0; h < nhelpers; h++) {
    bool found = false;
    for (uint32_t i = 0; i + 1 < ndefs && !found; i++) found = !strcmp(helpers[h], names[i]);
    if (!found) WHY("helper %s is renamed but not defined", helpers[h]);
  }
  /* dependency order: callees first */
  for (uint32_t i = 0; i < ndefs; i++)
    for (uint32_t j = i + 1; j < ndefs; j++)
      if (calls(defs[i].text, defs[i].len, names[j]))
        WHY("%s calls %s, which comes after it", names[i], names[j]);
  *digest = hashbe_digest(params, defs, ndefs, entry);
  return true;
}

/* ---------------------------------------------------------------- backend */

typedef struct hb_state {
  kc__bsvc svc; /* allocation, errors (backend.h) */
} hb_state;

static _Atomic uint64_t hb_compiles;

uint64_t hashbe_compiles(void) { return atomic_load(&hb_compiles); }

static void (*_Atomic hb_hook)(void *);
static void *_Atomic hb_hook_ud;
void hashbe_on_compile(void (*fn)(void *ud), void *ud) {
  atomic_store(&hb_hook_ud, ud);
  atomic_store(&hb_hook, fn);
}

static const char *hb_unavailable(const kc__bconfig *cfg) {
  (void)cfg;
  return NULL;
}

static kc_status hb_open(const kc__bsvc *svc, const kc__bconfig *opt, void **state) {
  (void)opt;
  hb_state *s = kc__bs_calloc(svc, sizeof *s);
  if (!s) return kc__bs_err(svc, KC_ENOMEM, "hash backend: out of memory");
  s->svc = *svc;
  *state = s;
  return KC_OK;
}

static void hb_close(void *state) {
  hb_state *s = state;
  if (s) kc__bs_free(&s->svc, s);
}

static int hb_device_count(void *state) {
  (void)state;
  return 1;
}

static const char *hb_device_name(void *state, int index) {
  (void)state, (void)index;
  return "hash device";
}

static const char *hb_identity(void *state) {
  (void)state;
  return "hash backend 1";
}

static kc_status hb_compile(void *state, const kc__tu *tu, void **artifact, size_t *size, uint64_t *sig,
                            kc__sb *log) {
  hb_state *s = state;
  (void)sig; /* the engine's sizes from the dialect stand */
  void (*hook)(void *) = atomic_load(&hb_hook);
  if (hook) hook(atomic_load(&hb_hook_ud));
  char why[256];
  uint64_t digest;
  if (!hashbe_parse(tu->text, tu->len, tu->entry, &digest, why, sizeof why)) {
    kc__sb_puts(log, why);
    return kc__bs_err(&s->svc, KC_ECOMPILE, "hash backend: malformed translation unit: %s", why);
  }
  uint64_t *a = kc__bs_alloc(&s->svc, sizeof *a);
  if (!a) return kc__bs_err(&s->svc, KC_ENOMEM, "hash backend: out of memory");
  *a = digest;
  *artifact = a;
  *size = sizeof *a;
  atomic_fetch_add(&hb_compiles, 1);
  return KC_OK;
}

static kc_status hb_ctx_create(void *state, int device, void **bctx) {
  (void)device;
  *bctx = state;
  return KC_OK;
}

static void hb_ctx_destroy(void *bctx) { (void)bctx; }

static kc_status hb_ctx_nothing(void *bctx) {
  (void)bctx;
  return KC_OK;
}

/* l->bctx: the state; l->module: the number of parameters. */
static kc_status hb_launch(kc__blinked *l, void **argv, const kc_dim3 *grid, const kc_dim3 *block) {
  if (!(grid && block && grid->x && grid->y && grid->z && block->x && block->y && block->z))
    return ((hb_state *)l->bctx)->svc.bad_dims(l, grid, block);
  if ((uintptr_t)l->module < 1 || !argv)
    return kc__bs_err(&((hb_state *)l->bctx)->svc, KC_EARGS, "hash backend: the kernel takes no buffer");
  kc__bufh *h = argv[0];
  memcpy(h->ptr, l->fn, sizeof(uint64_t));
  return KC_OK;
}

static kc_status hb_link(void *bctx, const kc__artifact *a, kc__blinked *l) {
  if (a->size != sizeof(uint64_t))
    return kc__bs_err(&((hb_state *)bctx)->svc, KC_ELINK, "hash backend: not an artifact of mine");
  l->fn = (void *)(uintptr_t)a->bytes; /* read only */
  l->module = (void *)(uintptr_t)a->nparams;
  l->launch = hb_launch;
  return KC_OK;
}

static void hb_unlink(kc__blinked *l) { (void)l; }

static kc_status hb_buf_create(void *bctx, size_t size, kc__bufh *h) {
  hb_state *s = bctx;
  h->ptr = kc__bs_calloc(&s->svc, size < 8 ? 8 : size);
  return h->ptr ? KC_OK : kc__bs_err(&s->svc, KC_ENOMEM, "hash backend: out of memory");
}

static void hb_buf_destroy(void *bctx, kc__bufh *h) { kc__bs_free(&((hb_state *)bctx)->svc, h->ptr); }

static kc_status hb_buf_write(void *bctx, kc__bufh *h, size_t off, const void *src, size_t n) {
  (void)bctx;
  memcpy((char *)h->ptr + off, src, n);
  return KC_OK;
}

static kc_status hb_buf_read(void *bctx, kc__bufh *h, size_t off, void *dst, size_t n) {
  (void)bctx;
  memcpy(dst, (const char *)h->ptr + off, n);
  return KC_OK;
}

const kc__backend kc__backend_hash = {
    .name = "hash",
    .unavailable = hb_unavailable,
    .open = hb_open,
    .close = hb_close,
    .device_count = hb_device_count,
    .device_name = hb_device_name,
    .identity = hb_identity,
    .prelude = hash_prelude,
    .compile = hb_compile,
    .ctx_create = hb_ctx_create,
    .ctx_destroy = hb_ctx_destroy,
    .ctx_reset = hb_ctx_nothing,
    .ctx_finish = hb_ctx_nothing,
    .link = hb_link,
    .unlink = hb_unlink,
    .buf_create = hb_buf_create,
    .buf_destroy = hb_buf_destroy,
    .buf_write = hb_buf_write,
    .buf_read = hb_buf_read,
};
