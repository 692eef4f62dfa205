/* SPDX-License-Identifier: MIT */
/*
 * cache/size.c -- owns the parser of sizes (see size.h).
 */
#include "cache/size.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>

bool kc__parse_size(const char *s, uint64_t *out) {
  if (!s) return false;
  while (isspace((unsigned char)*s)) s++;
  if (!isdigit((unsigned char)*s) && *s != '.') return false;
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || errno || v < 0) return false;
  while (isspace((unsigned char)*end)) end++;
  double mult = 1;
  switch (toupper((unsigned char)*end)) {
  case 'K': mult = 1024.0; break;
  case 'M': mult = 1024.0 * 1024; break;
  case 'G': mult = 1024.0 * 1024 * 1024; break;
  case 'T': mult = 1024.0 * 1024 * 1024 * 1024; break;
  default: break;
  }
  if (mult > 1) {
    end++;
    if (*end == 'i' || *end == 'I') end++;
    if (*end == 'b' || *end == 'B') end++;
  } else if (*end == 'b' || *end == 'B') {
    end++;
  }
  while (isspace((unsigned char)*end)) end++;
  double r = v * mult;
  if (*end || r >= 18446744073709551615.0) return false;
  *out = (uint64_t)r;
  return true;
}
