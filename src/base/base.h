/* SPDX-License-Identifier: MIT */
/* base.h -- src/base, all of it: what knows no kcache type beyond kc_status
 * and kc_alloc_fn (attributes, atomics, mutexes, bytes, heaps, the byte
 * buffer, the container kit, errors, clocks, hashing, ids, settings and
 * the resolved configuration, the wait for a child process, which
 * libraries a static program may open). */
#ifndef KC_BASE_H
#define KC_BASE_H

#include "base/atomics.h"
#include "base/bytes.h"
#include "base/child.h"
#include "base/clock.h"
#include "base/compiler.h"
#include "base/config.h"
#include "base/dl.h"
#include "base/err.h"
#include "base/filedep.h"
#include "base/fork.h"
#include "base/grace.h"
#include "base/hash.h"
#include "base/id.h"
#include "base/kit.h"
#include "base/mem.h"
#include "base/mutex.h"
#include "base/safeopen.h"
#include "base/sb.h"
#include "base/settings.h"

#endif /* KC_BASE_H */
