/* SPDX-License-Identifier: MIT */
/*
 * cli/out.h -- the output helpers of the `kcache` command (out.c): JSON
 * strings that are valid whatever bytes they hold, human sizes, ages and
 * dates, short hashes for tables, and the progress bar that long work draws
 * on a terminal.
 */
#ifndef KC_CLI_OUT_H
#define KC_CLI_OUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* s (NULL: "") as a JSON string on stdout. Bytes that are not valid UTF-8
 * are written as \u00XX (the byte's value as a code point), so the output
 * is valid JSON whatever the entry holds; control characters are escaped. */
void json_str(const char *s);
/* The same for n bytes (which may include NUL bytes). */
void json_strn(const char *s, size_t n);

/* "123 B", "4.5 KiB", "1.0 GiB" */
const char *human_size(uint64_t n, char *buf, size_t len);
/* "5 s", "3 min", "2 h", "4 d" since t (ns, CLOCK_REALTIME); "?" for t <= 0. */
const char *ago(int64_t t, char *buf, size_t len);
/* t (ns, CLOCK_REALTIME) as local "YYYY-MM-DD HH:MM:SS". */
const char *date_str(int64_t t, char *buf, size_t len);
/* Nanoseconds on the monotonic clock (for measuring). */
double mono_ns(void);
/* The first 8 hex digits of a 16-byte hash. */
void short_hex(const uint8_t h[16], char out[9]);
/* The first 8 hex digits of the text hash of s (the store's). */
void short_text_hash(const char *s, char out[9]);

/* A progress bar on stderr: "what [#####.....] done/total", redrawn when
 * the permille changes, only when on (stderr is a terminal) and total is at
 * least 20. */
typedef struct bar {
  const char *what;
  int last; /* last drawn permille, -1: none on the line */
  bool on;
} bar;

void bar_init(bar *b, const char *what, bool on);
/* A kc__progress_fn: ud is a bar. */
void bar_draw(void *ud, size_t done, size_t total);
/* Ends a partly drawn bar's line, so that a message can follow. */
void bar_break(bar *b);

#endif /* KC_CLI_OUT_H */
