/* SPDX-License-Identifier: MIT */
/* id.h -- process-wide unique ids (contexts, code instances, runtimes). */
#ifndef KC_BASE_ID_H
#define KC_BASE_ID_H

#include <stdint.h>

/* Never 0, never repeats. */
uint64_t kc__next_id(void);

#endif /* KC_BASE_ID_H */
