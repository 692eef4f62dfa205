/* SPDX-License-Identifier: MIT */
/* safeopen.c -- opens that cannot block or follow what they should not
 * (safeopen.h). */
#include "base/safeopen.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int kc__open_safe(const char *path, int flags, mode_t mode, bool follow) {
  bool dir = (flags & O_DIRECTORY) != 0;
  int extra = O_NONBLOCK | O_NOCTTY | O_CLOEXEC | (follow || dir ? 0 : O_NOFOLLOW);
  int fd = open(path, flags | extra, mode);
  if (fd < 0) return -1;
  struct stat st;
  if (fstat(fd, &st) != 0 || !(dir ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode))) {
    close(fd);
    errno = KC__ENOTREG;
    return -1;
  }
  if (!(flags & O_NONBLOCK)) {
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
      int e = errno;
      close(fd);
      errno = e;
      return -1;
    }
  }
  return fd;
}

const char *kc__open_strerror(int err) {
  if (err == KC__ENOTREG) return "not a regular file (a FIFO, a socket, a device or a directory)";
  if (err == ELOOP) return "a symbolic link, where none is followed";
  return strerror(err);
}
