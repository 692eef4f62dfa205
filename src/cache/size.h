/* SPDX-License-Identifier: MIT */
/*
 * cache/size.h -- the one parser of sizes (size.c) that the disk cache's
 * bound, the remote tier's entry limit and the kcache command read:
 * "1G", "512M", "100k", "12345", "1.5G" (powers of 1024). Knows nothing of
 * the store; it moves to the settings table's "size" kind (base/settings.h).
 */
#ifndef KC_CACHE_SIZE_H
#define KC_CACHE_SIZE_H

#include <stdbool.h>
#include <stdint.h>

bool kc__parse_size(const char *s, uint64_t *out);

#endif /* KC_CACHE_SIZE_H */
