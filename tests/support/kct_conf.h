/* SPDX-License-Identifier: MIT */
/* kct_conf.h -- for suites of kc__ internals (kc_test_support_internal):
 * a configuration resolved as a runtime resolves it (kc__config_resolve),
 * from o (NULL: no options) and the environment as it is now. */
#ifndef KCT_CONF_H
#define KCT_CONF_H

#include "base/config.h"
#include "kcache.h"

/* The configuration of o and the environment now, in storage that the next
 * call replaces (so: read it, or copy it, before calling again). */
const kc__config *kct_conf(const kc_options *o);

#endif /* KCT_CONF_H */
