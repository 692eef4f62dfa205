/* SPDX-License-Identifier: MIT */
/* filedep.h -- a file on disk that a compile read (or looked for), as
 * kcache records it to tell later whether the file is still the same: its
 * absolute path, its content's hash and size, and what stat said when it
 * was read, so that a later check costs one stat when nothing changed and
 * a read of the file when stat differs (as ccache's direct mode and git's
 * index do).
 *
 * A file is opened without blocking and only a regular file of at most
 * KC__FILEDEP_MAX bytes is read: a FIFO, a device or a directory at a
 * recorded path is "not the same", never a hang. */
#ifndef KC_BASE_FILEDEP_H
#define KC_BASE_FILEDEP_H

#include "base/mem.h"

#include <stdbool.h>
#include <stdint.h>

#define KC__FILEDEP_MAX (64ull << 20) /* bytes: a larger "header" is not tracked */

enum {
  /* looked for there and not found: the same while it is still missing */
  KC__FILEDEP_ABSENT = 1u,
  /* modified within KC__FILEDEP_RACY_NS of being read: a later stat that
   * matches proves nothing (the clock's granularity), so checks read it */
  KC__FILEDEP_RACY = 2u,
  /* it changed while it was being read or compiled: the content the
   * compiler saw is not known, so no check ever finds it the same */
  KC__FILEDEP_UNKNOWN = 4u,
};
#define KC__FILEDEP_RACY_NS 2000000000ull
/* How far before a compile's start (kc__filedep_clock_ns) a file stamped
 * during it may seem to have changed: a file system's own granularity
 * (nanoseconds on ext4, XFS, btrfs and tmpfs; coarser ones are covered up
 * to this). */
#define KC__FILEDEP_GRAIN_NS 20000000ull

typedef struct kc__filedep {
  char *path; /* absolute; owned (the heap it was read with) */
  uint64_t size, hash; /* the content (XXH3-64); 0, 0 when absent */
  uint64_t mtime_ns, ctime_ns, dev, ino; /* stat when it was read */
  uint32_t flags; /* KC__FILEDEP_* */
  /* When it was read (monotonic clock, this process only; not stored): a
   * record is newer than another only if its read began after the other's
   * ended. */
  uint64_t read_begin_ns, read_end_ns;
} kc__filedep;

typedef enum kc__filedep_status {
  KC__FILEDEP_OK, /* *out is the file's record */
  /* not a regular file (errno KC__ENOTREG), larger than KC__FILEDEP_MAX (EFBIG),
   * unreadable (its errno): no record can stand for it */
  KC__FILEDEP_UNTRACKABLE,
  KC__FILEDEP_NOMEM,
} kc__filedep_status;

/* Reads the file at path (absolute, or relative to the working directory:
 * made absolute) into a record. since_ns (CLOCK_REALTIME, 0: none): when
 * the compile that read it started; a file modified since is UNKNOWN.
 * content (may be NULL): the file's bytes too (heap's, NUL-terminated;
 * NULL when absent), *clen their number. */
kc__filedep_status kc__filedep_read(const kc__heap *heap, const char *path, uint64_t since_ns,
                                    kc__filedep *out, char **content, size_t *clen);
/* The wall clock as the kernel stamps files (CLOCK_REALTIME_COARSE, never
 * later than CLOCK_REALTIME): what a file's stamps are compared with. The
 * stamps of a change come from that coarse clock, which lags the fine one
 * by up to a tick (4 ms measured at HZ=250) and by more while the CPU that
 * keeps time stalls (a loaded virtual machine); read from it, the start of
 * a compile is never later than the stamps of a change made after it, so
 * KC__FILEDEP_GRAIN_NS need only cover a file system's own granularity. */
uint64_t kc__filedep_clock_ns(void);
/* Whether the file is still what d recorded: a stat, and a read of the file
 * when stat differs or d is RACY. Never true for an UNKNOWN record. */
bool kc__filedep_same(const kc__filedep *d);
/* The absolute form of path (a copy from heap; NULL if out of memory or
 * the working directory cannot be told). */
char *kc__abspath(const kc__heap *heap, const char *path);
void kc__filedep_free(const kc__heap *heap, kc__filedep *d);

#endif /* KC_BASE_FILEDEP_H */
