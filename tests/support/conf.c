/* SPDX-License-Identifier: MIT */
/* conf.c -- kct_conf (kct_conf.h): a resolved configuration for the suites
 * that call the cache and the remote tier directly. */
#include "kct_conf.h"
#include "kc_test.h"
#include "core/core.h"

const kc__config *kct_conf(const kc_options *o) {
  static kc__config conf;
  static int made;
  if (made) kc__config_free(&conf);
  made = 1;
  if (kc__config_resolve(o, NULL, &conf) != KC_OK) fail_msg("kc__config_resolve: out of memory");
  return &conf;
}
