/* SPDX-License-Identifier: MIT */
/*
 * probe.c -- the CUDA backend's half of the parameter probe (backend.h):
 * its epilogue appends the probe (src/backends/probe.c writes it: a device
 * array initialized with sizeof and alignof of every by-value parameter
 * type), and cu_probe_parse reads that array's initializer back out of the
 * PTX NVRTC made for the program (NVRTC keeps the PTX also when it makes a
 * cubin), so no driver or GPU is needed to learn the sizes.
 */
#include "backends/cuda/cuda.h"

#include <stdlib.h>
#include <string.h>

kc_status cu_epilogue(void *state, const kc__tu *tu, kc__sb *out) {
  (void)state;
  kc__probe_emit(out, tu, KC__PROBE_CUDA);
  return KC_OK;
}

/* Bytes per element of the PTX type that ends just before `at` (".b8",
 * ".u64", ...), or 0. */
static size_t cu_ptx_elem(const char *ptx, const char *at) {
  const char *p = at;
  while (p > ptx && p[-1] == ' ') p--;
  const char *e = p;
  while (p > ptx && p[-1] != '.' && p[-1] != ' ' && p[-1] != '\t') p--;
  if (p == ptx || p[-1] != '.' || e - p < 2 || !strchr("bus", *p)) return 0;
  long bits = strtol(p + 1, NULL, 10);
  return bits == 8 || bits == 16 || bits == 32 || bits == 64 ? (size_t)bits / 8 : 0;
}

/* Reads "kc__probe[N] = {v, ...}" (an array of N elements of a .bW, .uW or
 * .sW type; elements left out of the list are zero) into vals as 64-bit
 * little-endian words. Returns how many words, 0 if there is no such array. */
size_t cu_probe_parse(const char *ptx, uint64_t *vals, size_t cap) {
  if (cap > 1 + 2 * KC_MAX_ARGS) cap = 1 + 2 * KC_MAX_ARGS;
  const char *at = strstr(ptx, " kc__probe[");
  if (!at) return 0;
  size_t w = cu_ptx_elem(ptx, at);
  char *end;
  unsigned long long count = strtoull(at + sizeof " kc__probe[" - 1, &end, 10);
  if (!w || *end != ']' || !count || count * w > cap * 8 || (count * w) % 8) return 0;
  const char *p = end + 1;
  while (*p == ' ') p++;
  if (*p++ != '=') return 0;
  while (*p == ' ') p++;
  if (*p++ != '{') return 0;
  unsigned char bytes[8 * (1 + 2 * KC_MAX_ARGS)];
  memset(bytes, 0, sizeof bytes);
  for (unsigned long long i = 0; i < count; i++) {
    while (*p == ' ' || *p == '\n' || *p == '\t') p++;
    if (*p == '}') break;
    unsigned long long v = strtoull(p, &end, 0);
    if (end == p) return 0;
    for (size_t b = 0; b < w; b++) bytes[i * w + b] = (unsigned char)(v >> (8 * b));
    p = end;
    while (*p == ' ' || *p == '\n' || *p == '\t') p++;
    if (*p == ',') p++;
  }
  size_t n = (size_t)(count * w / 8);
  for (size_t i = 0; i < n; i++) vals[i] = kc__rd64(bytes + 8 * i);
  return n;
}
