/* SPDX-License-Identifier: MIT */
/*
 * remote/config.c -- owns the tier's configuration: the redis:// URL and
 * the other KC__SET_REMOTE* settings and KC__SET_HIREDIS_LIB, read from
 * the resolved configuration (base/config.h, which alone reads the
 * environment), the derived MAC key and key namespace, and the Redis names
 * of entries and their locks.
 */
#include "remote/internal.h"
#include "base/settings.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --------------------------------------------------------- configuration */

/* Percent-decodes s[0..n) into out; false if it does not fit or is malformed. */
static bool pct_decode(const char *s, size_t n, char *out, size_t outlen) {
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    int c = (unsigned char)s[i];
    if (c == '%') {
      if (n - i < 3) return false;
      int hi = kc__hexval((unsigned char)s[i + 1]), lo = kc__hexval((unsigned char)s[i + 2]);
      if (hi < 0 || lo < 0) return false;
      c = hi << 4 | lo;
      i += 2;
    }
    if (c == 0 || o + 1 >= outlen) return false;
    out[o++] = (char)c;
  }
  out[o] = 0;
  return true;
}

/* The host (a name, an address or an [IPv6 address]) of p[0..end) into
 * cfg->host, and where its port starts (*port, NULL: none). */
static kc_status url_host(const char *p, const char *end, kc__remote_config *cfg, const char **port,
                          char *why, size_t wl) {
  const char *hend;
  *port = NULL;
  if (*p == '[') {
    const char *rb = memchr(p, ']', (size_t)(end - p));
    if (!rb) {
      snprintf(why, wl, "unterminated [IPv6 address] in the URL");
      return KC_EINVAL;
    }
    snprintf(cfg->host, sizeof cfg->host, "%.*s", (int)(rb - p - 1), p + 1);
    hend = rb + 1;
    if (hend < end && *hend != ':') {
      snprintf(why, wl, "unexpected text after the [IPv6 address] in the URL");
      return KC_EINVAL;
    }
    if (hend < end) *port = hend + 1;
  } else {
    const char *colon = memchr(p, ':', (size_t)(end - p));
    hend = colon ? colon : end;
    if ((size_t)(hend - p) >= sizeof cfg->host) {
      snprintf(why, wl, "the host name in the URL is too long");
      return KC_EINVAL;
    }
    snprintf(cfg->host, sizeof cfg->host, "%.*s", (int)(hend - p), p);
    if (colon) *port = colon + 1;
  }
  return KC_OK;
}

/* host[:port] of p[0..end) (in url) into cfg's host and port (6379 when none). */
static kc_status url_hostport(const char *url, const char *p, const char *end, kc__remote_config *cfg,
                              char *why, size_t wl) {
  const char *port;
  kc_status hs = url_host(p, end, cfg, &port, why, wl);
  if (hs) return hs;
  if (!cfg->host[0]) {
    snprintf(why, wl, "the URL \"%s\" names no host", url);
    return KC_EINVAL;
  }
  cfg->port = 6379;
  if (port) {
    char *e;
    long v = strtol(port, &e, 10);
    if (e != end || port == end || v < 1 || v > 65535) {
      snprintf(why, wl, "bad port \"%.*s\" in the URL", (int)(end - port), port);
      return KC_EINVAL;
    }
    cfg->port = (int)v;
  }
  return KC_OK;
}

_Static_assert(sizeof(((kc__remote_config *)0)->host) == sizeof(((kc__remote_config *)0)->seed_host[0]),
               "a seed's host and cfg->host are copied into each other whole");

/* host:port, with [] around an IPv6 address, appended to out at *o. */
static void url_put_host(char *out, size_t len, size_t *o, const char *host, int port) {
  bool v6 = strchr(host, ':') != NULL;
  int n = snprintf(out + *o, len - *o, "%s%s%s:%d", v6 ? "[" : "", host, v6 ? "]" : "", port);
  if (n > 0) *o += (size_t)n < len - *o ? (size_t)n : len - *o - 1;
}

kc_status kc__remote_parse_url(const char *url, kc__remote_config *cfg, char *why, size_t wl) {
  cfg->host[0] = cfg->user[0] = cfg->password[0] = 0;
  cfg->has_password = false;
  cfg->port = 6379;
  cfg->db = 0;
  cfg->cluster = false;
  cfg->nseeds = 0;
  if (!url) url = "";
  static const char *const schemes[4] = {"redis://", "rediss://", "redis+cluster://", "rediss+cluster://"};
  int scheme = -1;
  for (int i = 0; i < 4 && scheme < 0; i++)
    if (!strncmp(url, schemes[i], strlen(schemes[i]))) scheme = i;
  if (scheme < 0) {
    snprintf(why, wl,
             "\"%s\" is not a redis[s]://[[user]:password@]host[:port][/db] URL, nor a "
             "redis[s]+cluster://[[user]:password@]host[:port][,host[:port]...] one",
             url);
    return KC_EINVAL;
  }
  cfg->tls = scheme & 1;
  cfg->cluster = scheme >= 2;
  const char *p = url + strlen(schemes[scheme]), *slash = strchr(p, '/');
  const char *end = slash ? slash : p + strlen(p);
  const char *at = NULL;
  for (const char *q = p; q < end; q++)
    if (*q == '@') at = q;
  if (at) {
    const char *colon = memchr(p, ':', (size_t)(at - p));
    if (!colon) {
      snprintf(why, wl,
               "the URL names a user but no password: write redis://USER:PASSWORD@host or "
               "redis://:PASSWORD@host");
      return KC_EINVAL;
    }
    if (!pct_decode(p, (size_t)(colon - p), cfg->user, sizeof cfg->user) ||
        !pct_decode(colon + 1, (size_t)(at - colon - 1), cfg->password, sizeof cfg->password)) {
      snprintf(why, wl, "the user or password in the URL is too long or badly %%-encoded");
      return KC_EINVAL;
    }
    cfg->has_password = true;
    p = at + 1;
  }
  if (!cfg->cluster && memchr(p, ',', (size_t)(end - p))) {
    snprintf(why, wl,
             "the URL \"%s\" names several hosts: for a Redis Cluster write "
             "redis+cluster://host:port[,host:port...]",
             url);
    return KC_EINVAL;
  }
  /* one host, or for a cluster seed nodes separated by commas */
  for (const char *h = p;;) {
    const char *comma = cfg->cluster ? memchr(h, ',', (size_t)(end - h)) : NULL;
    const char *hend = comma ? comma : end;
    if (cfg->nseeds == KC__REMOTE_MAX_SEEDS) {
      snprintf(why, wl, "the URL names more than %d seed nodes", KC__REMOTE_MAX_SEEDS);
      return KC_EINVAL;
    }
    kc_status hs = url_hostport(url, h, hend, cfg, why, wl);
    if (hs) return hs;
    memcpy(cfg->seed_host[cfg->nseeds], cfg->host, sizeof cfg->host); /* both 256 bytes */
    cfg->seed_port[cfg->nseeds++] = cfg->port;
    if (!comma) break;
    h = comma + 1;
  }
  memcpy(cfg->host, cfg->seed_host[0], sizeof cfg->host); /* the first seed */
  cfg->port = cfg->seed_port[0];
  if (slash && slash[1]) {
    char *e;
    long v = strtol(slash + 1, &e, 10);
    if (*e || v < 0 || v > 1000000 || !(slash[1] >= '0' && slash[1] <= '9')) {
      snprintf(why, wl, "bad database number \"%s\" in the URL (redis://host:port/DB)", slash + 1);
      return KC_EINVAL;
    }
    cfg->db = (int)v;
  }
  if (cfg->cluster && cfg->db) {
    snprintf(why, wl, "a Redis Cluster has database 0 only: the URL names database %d", cfg->db);
    return KC_EINVAL;
  }
  size_t o = 0;
  o +=
      (size_t)snprintf(cfg->url, sizeof cfg->url, "%.*s%s%s%s", (int)strlen(schemes[scheme]), schemes[scheme],
                       cfg->user, cfg->has_password ? ":***" : "", cfg->has_password ? "@" : "");
  for (int i = 0; i < cfg->nseeds && o + 1 < sizeof cfg->url; i++) {
    if (i) cfg->url[o++] = ',';
    url_put_host(cfg->url, sizeof cfg->url, &o, cfg->seed_host[i], cfg->seed_port[i]);
  }
  if (o + 1 < sizeof cfg->url) snprintf(cfg->url + o, sizeof cfg->url - o, "/%d", cfg->db);
  return KC_OK;
}

/* A U64 setting in [lo, hi] into *out (left alone when unset); false with
 * why when it is malformed or out of range. */
static bool conf_u64(const kc__config *conf, kc__setting id, uint64_t *out, uint64_t lo, uint64_t hi,
                     char *why, size_t wl) {
  uint64_t x;
  kc__setting_state st = kc__config_u64(conf, id, &x, lo, hi);
  if (st == KC__SETTING_BAD) {
    char what[256];
    snprintf(why, wl, "%s is not a number from %llu to %llu", kc__config_what(conf, id, what, sizeof what),
             (unsigned long long)lo, (unsigned long long)hi);
    return false;
  }
  if (st == KC__SETTING_SET) *out = x;
  return true;
}

/* KC_REMOTE_LOCK_TIMEOUT in milliseconds into *ms (left alone when unset). */
static bool conf_lock_ms(const kc__config *conf, uint32_t *ms, char *why, size_t wl) {
  double secs;
  kc__setting_state st = kc__config_seconds(conf, KC__SET_REMOTE_LOCK_TIMEOUT, &secs);
  if (st == KC__SETTING_UNSET) return true;
  if (st == KC__SETTING_BAD || !(secs > 0) || secs > 86400) {
    char what[256];
    snprintf(why, wl, "%s is not a number of seconds (0 < s <= 86400)",
             kc__config_what(conf, KC__SET_REMOTE_LOCK_TIMEOUT, what, sizeof what));
    return false;
  }
  *ms = (uint32_t)(secs * 1000 + 0.5);
  if (!*ms) *ms = 1;
  return true;
}

/* KC_REMOTE_MAX_ENTRY into *max (left alone when unset). */
static bool conf_max_entry(const kc__config *conf, uint64_t *max, char *why, size_t wl) {
  uint64_t v;
  kc__setting_state st = kc__config_size(conf, KC__SET_REMOTE_MAX_ENTRY, &v);
  if (st == KC__SETTING_UNSET) return true;
  if (st == KC__SETTING_BAD || v < 1024) {
    char what[256];
    snprintf(why, wl, "%s is not a size of at least 1K (e.g. 64M)",
             kc__config_what(conf, KC__SET_REMOTE_MAX_ENTRY, what, sizeof what));
    return false;
  }
  *max = v;
  return true;
}

/* The KC_REMOTE_TLS_* settings into cfg; false with why when one does not
 * fit, or is set for a redis:// URL (where it would be ignored). */
static bool conf_tls(const kc__config *conf, kc__remote_config *cfg, char *why, size_t wl) {
  static const kc__setting ids[4] = {KC__SET_REMOTE_TLS_CA, KC__SET_REMOTE_TLS_CERT, KC__SET_REMOTE_TLS_KEY,
                                     KC__SET_REMOTE_TLS_SERVER_NAME};
  char *const dst[4] = {cfg->tls_ca, cfg->tls_cert, cfg->tls_key, cfg->tls_name};
  const size_t size[4] = {sizeof cfg->tls_ca, sizeof cfg->tls_cert, sizeof cfg->tls_key,
                          sizeof cfg->tls_name};
  for (int i = 0; i < 4; i++) {
    const char *v = kc__config_str(conf, ids[i]);
    if (!v || !*v) continue;
    char what[256];
    if (!cfg->tls) {
      snprintf(why, wl, "%s is set but the URL is %s, not rediss:// (TLS)",
               kc__config_what(conf, ids[i], what, sizeof what), cfg->url);
      return false;
    }
    if (strlen(v) >= size[i]) {
      snprintf(why, wl, "%s is longer than %zu bytes", kc__config_what(conf, ids[i], what, sizeof what),
               size[i] - 1);
      return false;
    }
    snprintf(dst[i], size[i], "%s", v);
  }
  return true;
}

kc_status kc__remote_config_load(const kc__config *conf, kc__remote_config *cfg, char *why, size_t wl) {
  memset(cfg, 0, sizeof *cfg);
  const char *url = kc__config_str(conf, KC__SET_REMOTE);
  if (!url || !*url || !strcmp(url, "off") || !strcmp(url, "none")) return KC_ENOTFOUND;
  kc_status st = kc__remote_parse_url(url, cfg, why, wl);
  if (st) return st;

  /* an empty prefix is a prefix (a TEXT setting) */
  const char *prefix = kc__config_str(conf, KC__SET_REMOTE_PREFIX);
  if (!prefix) prefix = KC__REMOTE_DEFAULT_PREFIX;
  if (strlen(prefix) >= sizeof cfg->prefix - 1) {
    snprintf(why, wl, "the key prefix \"%s\" is longer than %zu bytes", prefix, sizeof cfg->prefix - 2);
    return KC_EINVAL;
  }
  for (const char *c = prefix; *c; c++)
    if ((unsigned char)*c <= ' ' || *c == 0x7f) {
      snprintf(why, wl, "the key prefix \"%s\" holds a space or a control character", prefix);
      return KC_EINVAL;
    }
  if (cfg->cluster && strpbrk(prefix, "{}")) {
    snprintf(
        why, wl,
        "the key prefix \"%s\" holds a brace: on a Redis Cluster kcache puts the key in braces (a hash "
        "tag, so that an entry and its lock share a slot), and a brace in the prefix would take its place",
        prefix);
    return KC_EINVAL;
  }
  snprintf(cfg->prefix, sizeof cfg->prefix, "%s", prefix);

  uint64_t timeout = KC__REMOTE_DEFAULT_TIMEOUT_MS, retry = KC__REMOTE_DEFAULT_RETRY_MS;
  uint64_t max = KC__REMOTE_DEFAULT_MAX_ENTRY, lock_deadline = KC__REMOTE_DEFAULT_LOCK_DEADLINE_MS;
  if (!conf_u64(conf, KC__SET_REMOTE_TIMEOUT_MS, &timeout, 1, 600000, why, wl)) return KC_EINVAL;
  if (!conf_u64(conf, KC__SET_REMOTE_LOCK_DEADLINE_MS, &lock_deadline, 1, 600000, why, wl)) return KC_EINVAL;
  if (!conf_u64(conf, KC__SET_REMOTE_RETRY_MS, &retry, 1, 86400000, why, wl)) return KC_EINVAL;
  cfg->lock_ms = KC__REMOTE_DEFAULT_LOCK_MS;
  if (!conf_lock_ms(conf, &cfg->lock_ms, why, wl)) return KC_EINVAL;
  if (!conf_max_entry(conf, &max, why, wl)) return KC_EINVAL;
  if (max > (1ull << 31)) max = 1ull << 31; /* Redis strings hold at most 512 MiB by default anyway */
  cfg->timeout_ms = (uint32_t)timeout;
  /* never shorter than the lookups' own deadline */
  cfg->lock_deadline_ms = (uint32_t)(lock_deadline > timeout ? lock_deadline : timeout);
  cfg->retry_ms = (uint32_t)retry;
  cfg->max_entry = max;

  /* where libhiredis is: kc__hiredis_unavailable loads it once, from the
   * first configuration that asks */
  const char *lib = kc__config_str(conf, KC__SET_HIREDIS_LIB);
  if (lib && strlen(lib) >= sizeof cfg->hiredis_lib) {
    snprintf(why, wl, "KC_HIREDIS_LIB is longer than %zu bytes", sizeof cfg->hiredis_lib - 1);
    return KC_EINVAL;
  }
  snprintf(cfg->hiredis_lib, sizeof cfg->hiredis_lib, "%s", lib ? lib : "");

  if (!conf_tls(conf, cfg, why, wl)) return KC_EINVAL;

  const char *secret = kc__config_text(conf, KC__SET_REMOTE_KEY);
  if (secret && *secret) {
    const char *no = kc__hmac_unavailable();
    if (no) {
      snprintf(why, wl, "KC_REMOTE_KEY is set but entries cannot be authenticated: %s", no);
      return KC_EUNAVAILABLE;
    }
    static const char mac_label[] = "kcache remote entry mac v1", id_label[] = "kcache remote key id v1";
    uint8_t id[32];
    if (!kc__hmac_sha256(secret, strlen(secret), mac_label, sizeof mac_label - 1, cfg->mac_key) ||
        !kc__hmac_sha256(secret, strlen(secret), id_label, sizeof id_label - 1, id)) {
      snprintf(why, wl, "KC_REMOTE_KEY is set but HMAC-SHA256 failed");
      return KC_EUNAVAILABLE;
    }
    char idhex[9];
    kc__hex(id, 4, idhex);
    snprintf(cfg->ns, sizeof cfg->ns, "hmac-%s:", idhex);
    cfg->has_secret = true;
    kc__wipe(id, sizeof id);
  }
  return KC_OK;
}

void kc__remote_name(const kc__remote_config *cfg, const uint8_t key[16], bool lock, char *out, size_t len) {
  char h[33];
  kc__hex(key, 16, h);
  if (cfg->cluster) snprintf(out, len, "%s%s{%s}%s", cfg->prefix, cfg->ns, h, lock ? ":lock" : "");
  else snprintf(out, len, "%s%s%s%s", cfg->prefix, cfg->ns, h, lock ? ":lock" : "");
}
