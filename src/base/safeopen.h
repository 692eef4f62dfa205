/* SPDX-License-Identifier: MIT */
/*
 * safeopen.h -- the one way kcache opens a file that someone else may have
 * planted something at (a shared store, a header on disk): the open never
 * blocks and the descriptor comes back only for what was asked for.
 */
#ifndef KC_BASE_SAFEOPEN_H
#define KC_BASE_SAFEOPEN_H

#include <errno.h>
#include <stdbool.h>
#include <sys/types.h>

/* The errno of an open that found a FIFO, a socket, a device or a
 * directory where a regular file belongs (or a non-directory where a
 * directory does). */
#define KC__ENOTREG EMEDIUMTYPE

/* open(path, flags | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, mode), and
 * O_NOFOLLOW unless follow or O_DIRECTORY; then fstat: the descriptor only
 * for a regular file (O_DIRECTORY: a directory), back in blocking mode
 * unless flags asked for O_NONBLOCK. Else -1 and errno: KC__ENOTREG for
 * the wrong type, ELOOP for a link not followed, or open's own. A FIFO
 * opens at once this way (without it, an open for reading waits for a
 * writer forever). */
int kc__open_safe(const char *path, int flags, mode_t mode, bool follow);
/* strerror(err), but KC__ENOTREG and ELOOP said as kc__open_safe means them. */
const char *kc__open_strerror(int err);

#endif /* KC_BASE_SAFEOPEN_H */
