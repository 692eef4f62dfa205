/* SPDX-License-Identifier: MIT */
/*
 * remote/mac.c -- owns the framing of a remote value: an entry image (its
 * length is the codec's answer, kc__entry_frame), then, with a secret,
 * KC__MAC_MAGIC and HMAC-SHA256 of the image (base/hmac.h).
 */
#include "base/hmac.h"
#include "remote/internal.h"
#include "cache/codec.h"

#include <stdio.h>
#include <string.h>

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
