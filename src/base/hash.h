/* SPDX-License-Identifier: MIT */
/* hash.h -- the one hash function (XXH3-64). */
#ifndef KC_BASE_HASH_H
#define KC_BASE_HASH_H

#include <stddef.h>
#include <stdint.h>

uint64_t kc__hash(const void *data, size_t len);

#endif /* KC_BASE_HASH_H */
