/* SPDX-License-Identifier: MIT */
/*
 * base/hmac.h -- HMAC-SHA256 (hmac.c), on its own: libcrypto opened with
 * dlopen and checked against RFC 4231 before use. It depends on nothing
 * else of kcache, so that both the remote tier (the MAC trailer of a value,
 * remote.h) and the disk cache (the MAC trailer of an entry file in a store
 * with KC_CACHE_KEY, cache/trust.h) authenticate entries with the same code
 * and the same framing.
 *
 * The framing: an entry image (cache/format.h), then KC__MAC_MAGIC and
 * HMAC-SHA256(mac key, image), KC__MAC_TRAILER bytes in all. A mac key is
 * derived from the user's secret S and a label naming its use
 * (kc__hmac_derive), so that S itself never enters a MAC and a tag made for
 * one use is no tag for another.
 */
#ifndef KC_BASE_HMAC_H
#define KC_BASE_HMAC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KC__MAC_MAGIC "KCMAC256"
#define KC__MAC_TRAILER 40u /* magic + HMAC-SHA256 */

/* NULL when libcrypto's HMAC-SHA256 can be used, else why not (static
 * string). Thread-safe; loads once. */
const char *kc__hmac_unavailable(void);
/* HMAC-SHA256; false if libcrypto is unavailable. */
bool kc__hmac_sha256(const void *key, size_t klen, const void *data, size_t n, uint8_t out[32]);
/* out = HMAC-SHA256(secret, label): a key for one use of the secret. */
bool kc__hmac_derive(const char *secret, const char *label, uint8_t out[32]);
/* Whether a and b (n bytes each) are equal, in constant time: the
 * comparison tells a forger nothing. */
bool kc__ct_equal(const void *a, const void *b, size_t n);
/* kc__ct_equal of two MACs (32 bytes each). */
bool kc__hmac_equal(const uint8_t a[32], const uint8_t b[32]);

#endif /* KC_BASE_HMAC_H */
