/* SPDX-License-Identifier: MIT */
/* clock.h -- clocks and naps. */
#ifndef KC_BASE_CLOCK_H
#define KC_BASE_CLOCK_H

#include <stdint.h>

uint64_t kc__now_ns(void); /* monotonic */
uint64_t kc__realtime_ns(void); /* wall clock, since the epoch */
void kc__nap_ns(uint64_t ns); /* sleeps (restarted after signals) */
void kc__nap_us(uint64_t us); /* the same, in microseconds */

#endif /* KC_BASE_CLOCK_H */
