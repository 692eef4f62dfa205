/* SPDX-License-Identifier: MIT */
/*
 * cache/trust.h -- whom the disk cache trusts (trust.c). kcache runs what
 * its store holds, so whoever can write to the store can make every
 * process that uses it run their code. This file decides who that may be:
 *
 *   private (the default): the store's directories and entry files must be
 *     owned by the user (or root) and writable by nobody else. kcache makes
 *     them 0700 and 0600, whatever the umask.
 *   shared (kc_options.cache_shared, KC_CACHE_SHARED=1): the members of the
 *     group of the store's root are trusted too. kcache makes directories
 *     2770 (with the group of the directory they are made in) and files
 *     0660. Nothing may be writable by others.
 *   keyed (KC_CACHE_KEY set, in either mode): every entry file carries the
 *     remote tier's MAC trailer (base/hmac.h) under a key derived from
 *     the secret, and an entry whose tag is missing or wrong is rejected.
 *
 * A store whose root or version directory fails the check is not used (the
 * caller keeps compiled code in memory only, and says why and how to fix
 * it); an entry that fails it, or whose bucket directory does, is rejected
 * like a damaged one.
 */
#ifndef KC_CACHE_TRUST_H
#define KC_CACHE_TRUST_H

#include "cache/io.h"
#include "base/base.h"
#include "kcache.h"
#include "base/hmac.h"

#include <sys/stat.h>

typedef struct kc__store_trust {
  bool shared; /* group members are trusted */
  bool keyed; /* entries must carry a valid MAC trailer */
  uid_t uid; /* the user: geteuid() */
  gid_t group; /* shared: the group of the store's root (kc__store_trust_root) */
  uint8_t mac_key[32]; /* keyed: HMAC-SHA256(KC_CACHE_KEY, "kcache store entry mac v1") */
} kc__store_trust;

/* Fills t: shared (an option, KC_CACHE_SHARED, or the store's layout) and
 * the key from secret (KC_CACHE_KEY; NULL or "": none). False with why when
 * a key is set but entries cannot be authenticated (no libcrypto): such a
 * store must not be used. */
bool kc__store_trust_init(kc__store_trust *t, bool shared, const char *secret, char *why, size_t wl);
/* The same from a resolved configuration (NULL: private, no key), with
 * shared also when the caller says so. */
bool kc__store_trust_conf(kc__store_trust *t, const kc__config *conf, bool shared, char *why, size_t wl);
/* Forgets t's key. */
void kc__store_trust_wipe(kc__store_trust *t);

/* The modes of what kcache creates: 0700 / 02770 and 0600 / 0660. */
mode_t kc__store_dir_mode(const kc__store_trust *t);
mode_t kc__store_file_mode(const kc__store_trust *t);
/* (A directory made gets its mode exactly through kc__store_made_dir, and
 * kc__store_open_create gives a file the mode of its directory's files:
 * io.h, below the rest of the cache.) */

/* Whether the store at root (its version directory vdir, if it exists
 * already, and vdir's locks and tmp directories, if they do) may be used:
 * stat(root), lstat(vdir), lstat of the two. A root with the sticky
 * bit (like /tmp), owned by the user or root, may be writable by others:
 * they cannot rename or remove vdir, which must be trusted. In shared mode
 * it sets t->group to the root's group first. False with why: the reason
 * and the command that fixes it. Ask again once vdir is made: another user
 * may have made it first in a sticky root. */
bool kc__store_trust_root(kc__store_trust *t, const char *root, const char *vdir, char *why, size_t wl);
/* The warning that a shared store without a key deserves (every member of
 * its group is trusted), in msg; false when there is none. */
bool kc__store_trust_note(const kc__store_trust *t, const char *root, char *msg, size_t n);
/* Whether the entry file at path (st: fstat of the opened file) and the
 * bucket directory that holds it are trusted. False with why. */
bool kc__store_trust_entry(const kc__store_trust *t, const char *path, const struct stat *st, char *why,
                           size_t wl);

/* Whether a file of the store at path (st: fstat of the opened file: no
 * link was followed) has an owner and mode t trusts, as for entries: the
 * user's or root's (or, shared, of the store's group), writable by no one
 * else. False with why (the reason and its fix). */
bool kc__store_trust_file(const kc__store_trust *t, const char *path, const struct stat *st, char *why,
                          size_t wl);

/* The trailer of image[0..n) in out; false when t has no key (or HMAC
 * failed: the entry is then written without one, and rejected). */
bool kc__store_seal(const kc__store_trust *t, const void *image, size_t n, uint8_t out[KC__MAC_TRAILER]);
/* The length of the entry image in buf[0..n), its MAC trailer taken off.
 * With a key (t keyed) the trailer must be there and verify, else KC_EIO
 * with why (KC_EUNAVAILABLE: HMAC failed, not the file's fault); t NULL or
 * without a key: a trailer is taken off unverified. Bytes that are no
 * trailer are left in, for the decoder to reject. */
kc_status kc__store_unseal(const kc__store_trust *t, const uint8_t *buf, size_t n, size_t *image_len,
                           char *why, size_t wl);

/* ------------------------------------------------------ for `kcache verify` */

/* kc__store_trust_conf (conf: KC_CACHE_SHARED and KC_CACHE_KEY resolved;
 * NULL: private, no key) and kc__store_trust_root for the store at root.
 * False with why when this user's kcache would refuse the store (or its
 * key). t is filled either way, for kc__store_check_file. *shared_layout
 * (may be NULL) tells whether root is laid out as a shared store (setgid
 * and group-writable), which is then checked as one. */
bool kc__store_trust_load(kc__store_trust *t, const char *root, const kc__config *conf, bool *shared_layout,
                          char *why, size_t wl);
/* Whether path (an entry file or a directory of the store) has an owner
 * and mode that t trusts, and, for an entry file when t has a key, a MAC
 * that verifies. False with why (the reason and its fix). Damage that is
 * not about trust (a truncated file) is not reported here. */
bool kc__store_check_file(const kc__store_trust *t, const char *path, char *why, size_t wl);

#endif /* KC_CACHE_TRUST_H */
