/* SPDX-License-Identifier: MIT */
/*
 * cache/trust.c -- owns the disk cache's trust in its files (see trust.h):
 * the modes of what it creates, the owner and mode checks of the store's
 * directories and entries (private or shared), and the MAC trailer of
 * entry files in a store with KC_CACHE_KEY. The messages say who could
 * have written the file and the command that fixes it.
 */
#include "cache/trust.h"
#include "cache/codec.h"
#include "cache/dir.h"
#include "base/safeopen.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char mac_label[] = "kcache store entry mac v1";

bool kc__store_trust_init(kc__store_trust *t, bool shared, const char *secret, char *why, size_t wl) {
  memset(t, 0, sizeof *t);
  t->shared = shared;
  t->uid = geteuid();
  t->group = getegid();
  if (!secret || !*secret) return true;
  const char *no = kc__hmac_unavailable();
  if (no || !kc__hmac_derive(secret, mac_label, t->mac_key)) {
    snprintf(why, wl, "KC_CACHE_KEY is set but entries cannot be authenticated: %s",
             no ? no : "HMAC-SHA256 failed");
    return false;
  }
  t->keyed = true;
  return true;
}

bool kc__store_trust_conf(kc__store_trust *t, const kc__config *conf, bool shared, char *why, size_t wl) {
  bool on = false;
  kc__config_bool(conf, KC__SET_CACHE_SHARED, &on);
  return kc__store_trust_init(t, shared || on, conf ? kc__config_text(conf, KC__SET_CACHE_KEY) : NULL, why,
                              wl);
}

void kc__store_trust_wipe(kc__store_trust *t) {
  volatile uint8_t *v = t->mac_key;
  for (size_t i = 0; i < sizeof t->mac_key; i++) v[i] = 0;
  t->keyed = false;
}

mode_t kc__store_dir_mode(const kc__store_trust *t) { return t->shared ? 02770 : 0700; }
mode_t kc__store_file_mode(const kc__store_trust *t) { return t->shared ? 0660 : 0600; }

/* ------------------------------------------------------------- checks */

static void user_name(uid_t uid, char *out, size_t n) {
  struct passwd pw, *res = NULL;
  char buf[1024];
  if (getpwuid_r(uid, &pw, buf, sizeof buf, &res) == 0 && res)
    snprintf(out, n, "%s (uid %u)", pw.pw_name, uid);
  else snprintf(out, n, "uid %u", (unsigned)uid);
}

static void group_name(gid_t gid, char *out, size_t n) {
  struct group gr, *res = NULL;
  char buf[1024];
  if (getgrgid_r(gid, &gr, buf, sizeof buf, &res) == 0 && res)
    snprintf(out, n, "%s (gid %u)", gr.gr_name, gid);
  else snprintf(out, n, "gid %u", (unsigned)gid);
}

static bool in_my_groups(gid_t g) {
  if (g == getegid()) return true;
  gid_t few[256];
  int n = getgroups(256, few);
  for (int i = 0; i < n; i++)
    if (few[i] == g) return true;
  if (n >= 0) return false;
  int all = getgroups(0, NULL); /* more than 256 groups */
  gid_t *list = all > 0 ? malloc((size_t)all * sizeof *list) : NULL;
  bool found = false;
  if (list && (all = getgroups(all, list)) > 0)
    for (int i = 0; i < all && !found; i++) found = list[i] == g;
  free(list);
  return found;
}

/* Whether the user uid is a member of group gid (its primary group or a
 * supplementary one); false for a uid that no user has. */
static bool user_in_group(uid_t uid, gid_t gid) {
  struct passwd pw, *res = NULL;
  char buf[2048];
  if (getpwuid_r(uid, &pw, buf, sizeof buf, &res) != 0 || !res) return false;
  if (pw.pw_gid == gid) return true;
  gid_t few[256];
  int n = 256;
  if (getgrouplist(pw.pw_name, pw.pw_gid, few, &n) < 0) return false; /* more than 256: not counted */
  for (int i = 0; i < n; i++)
    if (few[i] == gid) return true;
  return false;
}

/* Whether the directory or entry file st at path is trusted: writable by
 * nobody but its owner (and, shared, the store's group), and owned by the
 * user, root or (shared) someone whose file has the store's group. */
static bool trusted(const kc__store_trust *t, const char *path, const struct stat *st, char *why, size_t wl) {
  bool dir = S_ISDIR(st->st_mode);
  size_t pl = strlen(path);
  const char *what = dir                                        ? "the directory"
                     : pl > 4 && !strcmp(path + pl - 4, ".kce") ? "the entry"
                                                                : "the file";
  const char *fix = dir ? (t->shared ? "chmod 2770" : "chmod 700") : (t->shared ? "chmod 660" : "chmod 600");
  unsigned mode = (unsigned)(st->st_mode & 07777);
  bool group_ok = t->shared && st->st_gid == t->group;
  char who[300], grp[300];
  if (st->st_mode & S_IWOTH) {
    snprintf(why, wl,
             "%s %s is writable by everyone (mode %04o): anyone on this machine could make this "
             "program run their code (fix: %s %s)",
             what, path, mode, fix, path);
    return false;
  }
  if (st->st_uid != t->uid && st->st_uid != 0 && !group_ok) {
    user_name(st->st_uid, who, sizeof who);
    char me[300];
    user_name(t->uid, me, sizeof me);
    snprintf(why, wl,
             "%s %s is owned by %s, not by you (%s)%s%s: that user could make this program run "
             "their code (fix: chown %u %s, or use another directory)",
             what, path, who, me, t->uid ? " or root" : "",
             t->shared ? ", and its group is not the store's" : "", (unsigned)t->uid, path);
    return false;
  }
  if ((st->st_mode & S_IWGRP) && !group_ok) {
    group_name(st->st_gid, grp, sizeof grp);
    if (t->shared) {
      char want[300];
      group_name(t->group, want, sizeof want);
      snprintf(why, wl,
               "%s %s is writable by group %s, not by the store's group %s (fix: chgrp %u %s, or %s %s)",
               what, path, grp, want, (unsigned)t->group, path, dir ? "chmod 2750" : "chmod 640", path);
    } else {
      snprintf(why, wl,
               "%s %s is writable by group %s (mode %04o): every member could make this program run "
               "their code (fix: %s %s; or set KC_CACHE_SHARED=1 if the group shares the store on "
               "purpose)",
               what, path, grp, mode, fix, path);
    }
    return false;
  }
  return true;
}

bool kc__store_trust_file(const kc__store_trust *t, const char *path, const struct stat *st, char *why,
                          size_t wl) {
  return trusted(t, path, st, why, wl);
}

/* lstat(path) into *st; false with why for a path that cannot be looked
 * at, or that is a symbolic link (never trusted: kcache makes none). */
static bool lstat_no_link(const char *path, struct stat *st, char *why, size_t wl) {
  if (lstat(path, st) != 0) {
    snprintf(why, wl, "cannot stat %s: %s", path, strerror(errno));
    return false;
  }
  if (S_ISLNK(st->st_mode)) {
    snprintf(why, wl, "%s is a symbolic link, which kcache never makes there (fix: remove it)", path);
    return false;
  }
  return true;
}

/* lstat(path) and trusted(): a symbolic link is not trusted. */
static bool trusted_at(const kc__store_trust *t, const char *path, char *why, size_t wl) {
  struct stat st;
  return lstat_no_link(path, &st, why, wl) && trusted(t, path, &st, why, wl);
}

/* vdir/name (locks, tmp: format.h), when it is there, like vdir itself:
 * whoever may write in it may take a key's lock (and stall its compiles
 * for the lock timeout) or swap a temp file before its rename. */
static bool aux_trusted(const kc__store_trust *t, const char *vdir, const char *name, char *why, size_t wl) {
  char dir[PATH_MAX];
  struct stat st;
  snprintf(dir, sizeof dir, "%s/%s", vdir, name);
  if (lstat(dir, &st) != 0 && errno == ENOENT) return true; /* made when first needed, by kcache */
  return trusted_at(t, dir, why, wl);
}

bool kc__store_trust_root(kc__store_trust *t, const char *root, const char *vdir, char *why, size_t wl) {
  struct stat st;
  if (stat(root, &st) != 0) {
    snprintf(why, wl, "cannot stat %s: %s", root, strerror(errno));
    return false;
  }
  if (!S_ISDIR(st.st_mode)) {
    snprintf(why, wl, "%s is not a directory", root);
    return false;
  }
  /* Like /tmp: others may make files in it, but not rename or remove
   * ours; what the store holds is in vdir, which must then be trusted. */
  bool sticky = (st.st_mode & S_ISVTX) && (st.st_uid == t->uid || st.st_uid == 0);
  if (t->shared && !sticky) {
    /* the group is trusted, so its directory must be its members' */
    t->group = st.st_gid;
    char grp[300], who[300];
    group_name(st.st_gid, grp, sizeof grp);
    if ((st.st_mode & S_IWGRP) && !in_my_groups(st.st_gid)) {
      snprintf(why, wl,
               "the shared directory %s is writable by group %s, of which you are not a member (fix: "
               "chgrp GROUP %s with a group of yours)",
               root, grp, root);
      return false;
    }
    if (st.st_uid != t->uid && st.st_uid != 0 && !user_in_group(st.st_uid, st.st_gid)) {
      user_name(st.st_uid, who, sizeof who);
      snprintf(why, wl,
               "the shared directory %s is owned by %s, who is not a member of its group %s (fix: "
               "chown %u %s)",
               root, who, grp, (unsigned)t->uid, root);
      return false;
    }
  } else if (t->shared) {
    t->group = st.st_gid;
  }
  if (!sticky && !trusted(t, root, &st, why, wl)) return false;
  if (lstat(vdir, &st) != 0 && errno == ENOENT) return true; /* made next (then checked again) */
  return trusted_at(t, vdir, why, wl) && aux_trusted(t, vdir, KC__STORE_LOCKS_DIR, why, wl) &&
         aux_trusted(t, vdir, KC__STORE_TMP_DIR, why, wl);
}

bool kc__store_trust_note(const kc__store_trust *t, const char *root, char *msg, size_t n) {
  if (!t->shared || t->keyed) return false;
  char grp[300];
  group_name(t->group, grp, sizeof grp);
  snprintf(msg, n,
           "the disk cache in %s is shared (KC_CACHE_SHARED): every member of its group %s is trusted, "
           "and can make this program run code they put there; set KC_CACHE_KEY to a secret that only "
           "the group's programs know, to authenticate its entries",
           root, grp);
  return true;
}

bool kc__store_trust_entry(const kc__store_trust *t, const char *path, const struct stat *st, char *why,
                           size_t wl) {
  if (!trusted(t, path, st, why, wl)) return false;
  char bucket[PATH_MAX];
  kc__store_parent_of(path, bucket, sizeof bucket);
  return trusted_at(t, bucket, why, wl);
}

/* -------------------------------------------------------------- MACs */

bool kc__store_seal(const kc__store_trust *t, const void *image, size_t n, uint8_t out[KC__MAC_TRAILER]) {
  if (!t->keyed) return false;
  memcpy(out, KC__MAC_MAGIC, 8);
  return kc__hmac_sha256(t->mac_key, sizeof t->mac_key, image, n, out + 8);
}

kc_status kc__store_unseal(const kc__store_trust *t, const uint8_t *buf, size_t n, size_t *image_len,
                           char *why, size_t wl) {
  *image_len = n;
  size_t img;
  char ignored[96];
  if (kc__entry_frame(buf, n, &img, ignored, sizeof ignored) != KC_OK)
    return KC_OK; /* damage: the decoder says */
  bool trailer = n - img == KC__MAC_TRAILER && !memcmp(buf + img, KC__MAC_MAGIC, 8);
  if (trailer) *image_len = img;
  if (!t || !t->keyed) return KC_OK;
  if (!trailer) {
    snprintf(why, wl, "not authenticated (written without KC_CACHE_KEY)");
    return KC_EIO;
  }
  uint8_t mac[32];
  if (!kc__hmac_sha256(t->mac_key, sizeof t->mac_key, buf, img, mac)) {
    snprintf(why, wl, "HMAC-SHA256 failed");
    return KC_EUNAVAILABLE;
  }
  if (!kc__hmac_equal(mac, buf + img + 8)) {
    snprintf(why, wl, "its MAC does not verify (written with another KC_CACHE_KEY, or tampered with)");
    return KC_EIO;
  }
  return KC_OK;
}

/* ------------------------------------------------------ for `kcache verify` */

bool kc__store_trust_load(kc__store_trust *t, const char *root, const kc__config *conf, bool *shared_layout,
                          char *why, size_t wl) {
  /* a store laid out as a shared one (the setgid, group-writable v1
   * directory that shared mode makes) is checked as one, whatever the
   * environment says */
  char vdir[PATH_MAX];
  kc__store_vdir(root, vdir, sizeof vdir);
  struct stat st;
  bool layout = stat(vdir, &st) == 0 && (st.st_mode & S_ISGID) && (st.st_mode & S_IWGRP);
  if (shared_layout) *shared_layout = layout;
  bool ok = kc__store_trust_conf(t, conf, layout, why, wl);
  char why2[1024];
  bool root_ok = kc__store_trust_root(t, root, vdir, ok ? why : why2, ok ? wl : sizeof why2);
  return ok && root_ok;
}

/* The MAC check of the entry file at path: false with why if it is
 * unauthenticated or forged (unreadable or damaged files are not this
 * check's business). */
static bool mac_ok(const kc__store_trust *t, const char *path, char *why, size_t wl) {
  int fd = kc__open_safe(path, O_RDONLY, 0, false);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || (uint64_t)st.st_size > KC__STORE_MAX_ENTRY + KC__MAC_TRAILER) {
    if (fd >= 0) close(fd);
    return true;
  }
  size_t n = (size_t)st.st_size, got = 0, img;
  char w[256];
  uint8_t *buf = kc__fo_read_all(NULL, fd, n, &got, w, sizeof w);
  close(fd);
  bool ok = !buf || got < n || kc__store_unseal(t, buf, n, &img, w, sizeof w) != KC_EIO;
  if (!ok) snprintf(why, wl, "the entry %s: %s (fix: kcache verify --repair, or remove it)", path, w);
  kc__heap_free(NULL, buf);
  return ok;
}

bool kc__store_check_file(const kc__store_trust *t, const char *path, char *why, size_t wl) {
  struct stat st;
  if (!lstat_no_link(path, &st, why, wl)) return false;
  if (S_ISDIR(st.st_mode)) return trusted(t, path, &st, why, wl);
  if (!kc__store_trust_entry(t, path, &st, why, wl)) return false;
  size_t nl = strlen(path);
  return !t->keyed || nl < 4 || strcmp(path + nl - 4, ".kce") || mac_ok(t, path, why, wl);
}
