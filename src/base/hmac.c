/* SPDX-License-Identifier: MIT */
/*
 * base/hmac.c -- owns HMAC-SHA256: libcrypto opened with dlopen, checked
 * against RFC 4231 before use (see hmac.h). The remote tier (its values'
 * MAC trailer) and the disk cache (entry files under KC_CACHE_KEY) both use
 * it.
 */
#include "base/hmac.h"
#include "base/base.h"

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
  char whybuf[512];
} cr;
static kc__once cr_once = KC__ONCE_INIT;

static void cr_load(void) {
  static const char *const names[] = {"libcrypto.so.3", "libcrypto.so.1.1", "libcrypto.so"};
  cr.why = "libcrypto (OpenSSL) is not installed; it is needed for KC_REMOTE_KEY and KC_CACHE_KEY (Debian: "
           "apt-get install libssl3)";
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    const char *refused = NULL;
    void *dl = kc__dlopen_foreign(names[i], RTLD_NOW | RTLD_LOCAL, &refused);
    if (refused) { /* it crashed in a static program (tests/install/test_install.sh static) */
      snprintf(cr.whybuf, sizeof cr.whybuf, "libcrypto not opened: %s", refused);
      cr.why = cr.whybuf;
      return;
    }
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

bool kc__ct_equal(const void *a, const void *b, size_t n) {
  const uint8_t *x = a, *y = b;
  uint8_t diff = 0;
  for (size_t i = 0; i < n; i++) diff |= (uint8_t)(x[i] ^ y[i]);
  return diff == 0;
}

bool kc__hmac_equal(const uint8_t a[32], const uint8_t b[32]) { return kc__ct_equal(a, b, 32); }
