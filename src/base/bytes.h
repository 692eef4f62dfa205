/* SPDX-License-Identifier: MIT */
/* bytes.h -- little-endian integers (as the disk and remote formats store
 * them) and hex digits. */
#ifndef KC_BASE_BYTES_H
#define KC_BASE_BYTES_H

#include <stddef.h>
#include <stdint.h>

static inline void kc__le32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void kc__le64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint32_t kc__rd32(const uint8_t *p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--) v = v << 8 | p[i];
  return v;
}
static inline uint64_t kc__rd64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

/* n bytes as 2n lowercase hex digits and a NUL; one hex digit's value, or -1. */
void kc__hex(const uint8_t *b, size_t n, char *out);
int kc__hexval(int c);

#endif /* KC_BASE_BYTES_H */
