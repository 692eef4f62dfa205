/* SPDX-License-Identifier: MIT */
/*
 * remote/hmac.c -- owns authentication of values: HMAC-SHA256 from
 * libcrypto opened with dlopen (checked against RFC 4231 before use; the
 * neutral part, remote/hmac.h, is what the disk cache uses too), and the
 * remote value's framing: an entry image (its length is the codec's
 * answer, kc__entry_frame), then with a secret "KCMAC256" and the MAC.
 */
#include "remote/hmac.h"
#include "remote/internal.h"
#include "cache/codec.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------ libcrypto */

/* HMAC-SHA256 comes from OpenSSL's libcrypto, opened at run time: it is on
 * nearly every machine (libssl3), its one-shot HMAC() takes no structures
 * whose layout would have to be declared here, and it is the implementation
 * that security updates reach. Nettle's HMAC needs its context struct's
 * size, libgcrypt a version handshake; writing SHA-256 here would be one
 * more implementation to trust. */
static struct {
  unsigned char *(*hmac)(const void *md, const void *key, int klen, const unsigned char *d, size_t n,
                         unsigned char *out, unsigned int *outlen);
  const void *(*sha256)(void);
  const char *why;
  char whybuf[300];
} cr;
static kc__once cr_once = KC__ONCE_INIT;

static void cr_load(void) {
  static const char *const names[] = {"libcrypto.so.3", "libcrypto.so.1.1", "libcrypto.so"};
  cr.why = "libcrypto (OpenSSL) is not installed; it is needed for KC_REMOTE_KEY and KC_CACHE_KEY (Debian: "
           "apt-get install libssl3)";
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    void *dl = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!dl) continue;
    *(void **)&cr.hmac = dlsym(dl, "HMAC");
    *(void **)&cr.sha256 = dlsym(dl, "EVP_sha256");
    if (!cr.hmac || !cr.sha256) {
      dlclose(dl);
      continue;
    }
    /* RFC 4231, test case 2 */
    static const uint8_t want[32] = {0x5b, 0xdc, 0xc1, 0x46, 0xbf, 0x60, 0x75, 0x4e, 0x6a, 0x04, 0x24,
                                     0x26, 0x08, 0x95, 0x75, 0xc7, 0x5a, 0x00, 0x3f, 0x08, 0x9d, 0x27,
                                     0x39, 0x83, 0x9d, 0xec, 0x58, 0xb9, 0x64, 0xec, 0x38, 0x43};
    static const char msg[] = "what do ya want for nothing?";
    uint8_t got[64];
    unsigned int glen = 0;
    if (cr.hmac(cr.sha256(), "Jefe", 4, (const unsigned char *)msg, sizeof msg - 1, got, &glen) &&
        glen == 32 && !memcmp(got, want, 32)) {
      cr.why = NULL;
      return;
    }
    snprintf(cr.whybuf, sizeof cr.whybuf, "%s computes a wrong HMAC-SHA256 (RFC 4231 test)", names[i]);
    cr.why = cr.whybuf;
    cr.hmac = NULL;
    dlclose(dl);
  }
}

const char *kc__hmac_unavailable(void) {
  kc__call_once(&cr_once, cr_load);
  return cr.why;
}

bool kc__hmac_sha256(const void *key, size_t klen, const void *data, size_t n, uint8_t out[32]) {
  if (kc__hmac_unavailable() || klen > INT_MAX) return false;
  uint8_t md[64];
  unsigned int len = 0;
  if (!cr.hmac(cr.sha256(), key, (int)klen, data, n, md, &len) || len != 32) return false;
  memcpy(out, md, 32);
  return true;
}

bool kc__hmac_derive(const char *secret, const char *label, uint8_t out[32]) {
  return kc__hmac_sha256(secret, strlen(secret), label, strlen(label), out);
}

bool kc__hmac_equal(const uint8_t a[32], const uint8_t b[32]) {
  uint8_t diff = 0;
  for (int i = 0; i < 32; i++) diff |= (uint8_t)(a[i] ^ b[i]);
  return diff == 0;
}

/* ----------------------------------------------------------------- values */

kc_status kc__remote_unwrap(const kc__remote_config *cfg, const void *value, size_t n, size_t *image_len,
                            char *why, size_t wl) {
  const uint8_t *v = value;
  size_t img;
  if (kc__entry_frame(value, n, &img, why, wl) != KC_OK) return KC_EIO;
  size_t rest = n - img;
  bool trailer = rest == KC__REMOTE_TRAILER && !memcmp(v + img, KC__REMOTE_MAC_MAGIC, 8);
  if (rest && !trailer) {
    snprintf(why, wl, "%zu unknown bytes after the entry", rest);
    return KC_EIO;
  }
  if (cfg->has_secret) {
    if (!trailer) {
      snprintf(why, wl, "not authenticated (uploaded without a KC_REMOTE_KEY)");
      return KC_EIO;
    }
    uint8_t mac[32];
    if (!kc__hmac_sha256(cfg->mac_key, sizeof cfg->mac_key, v, img, mac)) {
      snprintf(why, wl, "HMAC-SHA256 failed");
      return KC_EIO;
    }
    if (!kc__hmac_equal(mac, v + img + 8)) {
      snprintf(why, wl, "its MAC does not verify (another KC_REMOTE_KEY, or forged)");
      return KC_EIO;
    }
  }
  *image_len = img;
  return KC_OK;
}

bool kc__remote_trailer(const kc__remote_config *cfg, const void *image, size_t n,
                        uint8_t out[KC__REMOTE_TRAILER]) {
  if (!cfg->has_secret) return false;
  memcpy(out, KC__REMOTE_MAC_MAGIC, 8);
  return kc__hmac_sha256(cfg->mac_key, sizeof cfg->mac_key, image, n, out + 8);
}
