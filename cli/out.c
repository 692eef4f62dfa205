/* SPDX-License-Identifier: MIT */
/*
 * cli/out.c -- owns how the `kcache` command writes things: JSON string
 * escaping (with the UTF-8 check that keeps the output valid JSON), human
 * sizes, ages and dates, short hashes, and the terminal progress bar.
 */
#include "out.h"
#include "base/clock.h"

#include "cache/key.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

/* The length of the valid UTF-8 sequence of 2 to 4 bytes at p (n bytes
 * left), or 0: a stray continuation byte, a truncated sequence, an overlong
 * form, a surrogate or a code point above U+10FFFF. */
static size_t utf8_seq(const unsigned char *p, size_t n) {
  unsigned char c = p[0], lo = 0x80, hi = 0xbf;
  size_t len;
  if (c >= 0xc2 && c <= 0xdf) len = 2;
  else if (c >= 0xe0 && c <= 0xef) len = 3;
  else if (c >= 0xf0 && c <= 0xf4) len = 4;
  else return 0;
  if (c == 0xe0) lo = 0xa0; /* overlong */
  else if (c == 0xed) hi = 0x9f; /* surrogates */
  else if (c == 0xf0) lo = 0x90; /* overlong */
  else if (c == 0xf4) hi = 0x8f; /* above U+10FFFF */
  if (n < len || p[1] < lo || p[1] > hi) return 0;
  for (size_t i = 2; i < len; i++)
    if (p[i] < 0x80 || p[i] > 0xbf) return 0;
  return len;
}

void json_strn(const char *s, size_t n) {
  const unsigned char *p = (const unsigned char *)(s ? s : ""), *end = p + (s ? n : 0);
  putchar('"');
  while (p < end) {
    unsigned char c = *p;
    if (c >= 0x80) {
      size_t len = utf8_seq(p, (size_t)(end - p));
      if (len) fwrite(p, 1, len, stdout), p += len;
      else printf("\\u%04x", c), p++; /* not UTF-8: the byte as U+00XX */
      continue;
    }
    switch (c) {
    case '"': fputs("\\\"", stdout); break;
    case '\\': fputs("\\\\", stdout); break;
    case '\n': fputs("\\n", stdout); break;
    case '\r': fputs("\\r", stdout); break;
    case '\t': fputs("\\t", stdout); break;
    default:
      if (c < 0x20) printf("\\u%04x", c);
      else putchar(c);
    }
    p++;
  }
  putchar('"');
}

void json_str(const char *s) { json_strn(s, s ? strlen(s) : 0); }

const char *human_size(uint64_t n, char *buf, size_t len) {
  static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = (double)n;
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    u++;
  }
  if (u == 0) snprintf(buf, len, "%llu B", (unsigned long long)n);
  else snprintf(buf, len, "%.1f %s", v, units[u]);
  return buf;
}

static double real_ns(void) { return (double)kc__realtime_ns(); }

double mono_ns(void) { return (double)kc__now_ns(); }

const char *ago(int64_t t, char *buf, size_t len) {
  if (t <= 0) return "?";
  double s = (real_ns() - (double)t) / 1e9;
  if (s < 0) s = 0;
  if (s < 120) snprintf(buf, len, "%.0f s", s);
  else if (s < 7200) snprintf(buf, len, "%.0f min", s / 60);
  else if (s < 172800) snprintf(buf, len, "%.0f h", s / 3600);
  else snprintf(buf, len, "%.0f d", s / 86400);
  return buf;
}

const char *date_str(int64_t t, char *buf, size_t len) {
  time_t secs = (time_t)(t / 1000000000);
  struct tm tm;
  localtime_r(&secs, &tm);
  strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

void short_hex(const uint8_t h[16], char out[9]) {
  char hex[33];
  kc__store_hex(h, hex);
  memcpy(out, hex, 8);
  out[8] = 0;
}

void short_text_hash(const char *s, char out[9]) {
  uint8_t h[16];
  kc__store_text_hash(s ? s : "", s ? strlen(s) : 0, h);
  short_hex(h, out);
}

void bar_init(bar *b, const char *what, bool on) {
  b->what = what;
  b->last = -1;
  b->on = on;
}

void bar_draw(void *ud, size_t done, size_t total) {
  bar *b = ud;
  if (!b->on || total < 20) return;
  int pm = (int)(done * 1000 / total);
  if (pm == b->last && done != total) return;
  b->last = pm;
  char cells[31];
  size_t full = done * 30 / total;
  for (size_t i = 0; i < 30; i++) cells[i] = i < full ? '#' : '.';
  cells[30] = 0;
  fprintf(stderr, "\r%-7s [%s] %zu/%zu", b->what, cells, done, total);
  if (done == total) fputc('\n', stderr), b->last = -1;
  fflush(stderr);
}

void bar_break(bar *b) {
  if (!b->on || b->last < 0) return;
  fputc('\n', stderr);
  b->last = -1;
}
