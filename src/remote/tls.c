/* SPDX-License-Identifier: MIT */
/*
 * remote/tls.c -- owns TLS for rediss:// (internal.h, "TLS"): OpenSSL's
 * libssl opened with dlopen, the client context (the CA to trust, the
 * client certificate and key), and one session's steps on a socket that
 * conn.c connected and polls: the handshake with the certificate and the
 * server's name verified, and reads and writes that never block. hiredis
 * 0.14 has no TLS; its reply reader works on the bytes read here.
 */
#include "remote/internal.h"
#include "base/dl.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* ------------------------------------------------------------ libssl */

/* OpenSSL's constants that kcache uses (stable since 1.1: its ABI). */
enum {
  SSL_ERROR_NONE_ = 0,
  SSL_ERROR_SSL_ = 1,
  SSL_ERROR_WANT_READ_ = 2,
  SSL_ERROR_WANT_WRITE_ = 3,
  SSL_ERROR_SYSCALL_ = 5,
  SSL_ERROR_ZERO_RETURN_ = 6,
  SSL_VERIFY_PEER_ = 1,
  SSL_FILETYPE_PEM_ = 1,
  SSL_CTRL_MODE_ = 33,
  SSL_CTRL_SET_TLSEXT_HOSTNAME_ = 55,
  SSL_CTRL_SET_MIN_PROTO_VERSION_ = 123,
  TLSEXT_NAMETYPE_host_name_ = 0,
  TLS1_2_VERSION_ = 0x0303,
  SSL_MODE_ENABLE_PARTIAL_WRITE_ = 1,
  SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER_ = 2,
  X509_V_OK_ = 0,
  X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_ = 2,
  X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT_ = 18,
  X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN_ = 19,
  X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY_ = 20,
  X509_V_ERR_HOSTNAME_MISMATCH_ = 62,
  X509_V_ERR_IP_ADDRESS_MISMATCH_ = 64
};

static struct {
  const void *(*client_method)(void);
  void *(*ctx_new)(const void *method);
  void (*ctx_free)(void *ctx);
  long (*ctx_ctrl)(void *ctx, int cmd, long larg, void *parg);
  void (*ctx_set_verify)(void *ctx, int mode, void *cb);
  int (*ctx_load_verify)(void *ctx, const char *file, const char *dir);
  int (*ctx_default_paths)(void *ctx);
  int (*ctx_use_chain)(void *ctx, const char *file);
  int (*ctx_use_key)(void *ctx, const char *file, int type);
  int (*ctx_check_key)(const void *ctx);
  void *(*ssl_new)(void *ctx);
  void (*ssl_free)(void *ssl);
  int (*set_fd)(void *ssl, int fd);
  long (*ctrl)(void *ssl, int cmd, long larg, void *parg);
  int (*set1_host)(void *ssl, const char *name);
  void *(*get0_param)(void *ssl);
  int (*param_ip)(void *param, const char *ip);
  int (*connect)(void *ssl);
  int (*read)(void *ssl, void *buf, int n);
  int (*write)(void *ssl, const void *buf, int n);
  int (*get_error)(const void *ssl, int ret);
  long (*verify_result)(const void *ssl);
  const char *(*verify_string)(long v);
  unsigned long (*err_get)(void);
  void (*err_string)(unsigned long e, char *buf, size_t len);
  void (*err_clear)(void);
  const char *why;
  char whybuf[512];
} ssl;
static kc__once ssl_once = KC__ONCE_INIT;

static void ssl_load(void) {
  static const char *const names[] = {"libssl.so.3", "libssl.so.1.1", "libssl.so"};
  ssl.why = "rediss:// needs OpenSSL's libssl, which is not installed (Debian: apt-get install libssl3)";
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    const char *refused = NULL;
    void *dl = kc__dlopen_foreign(names[i], RTLD_NOW | RTLD_LOCAL, &refused);
    if (refused) {
      snprintf(ssl.whybuf, sizeof ssl.whybuf, "libssl not opened: %s", refused);
      ssl.why = ssl.whybuf;
      return;
    }
    if (!dl) continue;
      /* libcrypto's functions come through libssl's handle: it depends on it */
#define SSL_SYM(field, sym) \
  if (!(*(void **)&ssl.field = dlsym(dl, sym))) { \
    snprintf(ssl.whybuf, sizeof ssl.whybuf, "%s lacks %s: rediss:// needs OpenSSL 1.1 or later", names[i], \
             sym); \
    ssl.why = ssl.whybuf; \
    dlclose(dl); \
    continue; \
  }
    SSL_SYM(client_method, "TLS_client_method")
    SSL_SYM(ctx_new, "SSL_CTX_new")
    SSL_SYM(ctx_free, "SSL_CTX_free")
    SSL_SYM(ctx_ctrl, "SSL_CTX_ctrl")
    SSL_SYM(ctx_set_verify, "SSL_CTX_set_verify")
    SSL_SYM(ctx_load_verify, "SSL_CTX_load_verify_locations")
    SSL_SYM(ctx_default_paths, "SSL_CTX_set_default_verify_paths")
    SSL_SYM(ctx_use_chain, "SSL_CTX_use_certificate_chain_file")
    SSL_SYM(ctx_use_key, "SSL_CTX_use_PrivateKey_file")
    SSL_SYM(ctx_check_key, "SSL_CTX_check_private_key")
    SSL_SYM(ssl_new, "SSL_new")
    SSL_SYM(ssl_free, "SSL_free")
    SSL_SYM(set_fd, "SSL_set_fd")
    SSL_SYM(ctrl, "SSL_ctrl")
    SSL_SYM(set1_host, "SSL_set1_host")
    SSL_SYM(get0_param, "SSL_get0_param")
    SSL_SYM(param_ip, "X509_VERIFY_PARAM_set1_ip_asc")
    SSL_SYM(connect, "SSL_connect")
    SSL_SYM(read, "SSL_read")
    SSL_SYM(write, "SSL_write")
    SSL_SYM(get_error, "SSL_get_error")
    SSL_SYM(verify_result, "SSL_get_verify_result")
    SSL_SYM(verify_string, "X509_verify_cert_error_string")
    SSL_SYM(err_get, "ERR_get_error")
    SSL_SYM(err_string, "ERR_error_string_n")
    SSL_SYM(err_clear, "ERR_clear_error")
#undef SSL_SYM
    ssl.why = NULL;
    return; /* stays loaded for the life of the process */
  }
}

const char *kc__tls_unavailable(void) {
  kc__call_once(&ssl_once, ssl_load);
  return ssl.why;
}

/* OpenSSL's last error in this thread, as text ("" when there is none);
 * clears the thread's error queue. */
static const char *ssl_err(char *buf, size_t len) {
  unsigned long e, last = 0;
  while ((e = ssl.err_get()) != 0) last = e;
  buf[0] = 0;
  if (last) ssl.err_string(last, buf, len);
  return buf;
}

/* ----------------------------------------------------------- contexts */

void kc__tls_ctx_free(void *ctx) {
  if (ctx) ssl.ctx_free(ctx);
}

kc_status kc__tls_ctx_new(const kc__remote_config *cfg, void **out, char *why, size_t wl) {
  *out = NULL;
  const char *no = kc__tls_unavailable();
  if (no) {
    snprintf(why, wl, "%s", no);
    return KC_EUNAVAILABLE;
  }
  char e[256];
  ssl.err_clear();
  void *ctx = ssl.ctx_new(ssl.client_method());
  if (!ctx) {
    snprintf(why, wl, "TLS: cannot make a client context: %s", ssl_err(e, sizeof e));
    return KC_ENOMEM;
  }
  ssl.ctx_ctrl(ctx, SSL_CTRL_SET_MIN_PROTO_VERSION_, TLS1_2_VERSION_, NULL);
  ssl.ctx_set_verify(ctx, SSL_VERIFY_PEER_, NULL);
  if (cfg->tls_ca[0]) {
    struct stat sb;
    bool dir = stat(cfg->tls_ca, &sb) == 0 && S_ISDIR(sb.st_mode);
    if (!ssl.ctx_load_verify(ctx, dir ? NULL : cfg->tls_ca, dir ? cfg->tls_ca : NULL)) {
      snprintf(why, wl, "TLS: the CA %s %s (KC_REMOTE_TLS_CA) cannot be used: %s", dir ? "directory" : "file",
               cfg->tls_ca, ssl_err(e, sizeof e));
      goto fail;
    }
  } else if (!ssl.ctx_default_paths(ctx)) {
    snprintf(why, wl, "TLS: the system's CA certificates cannot be loaded: %s", ssl_err(e, sizeof e));
    goto fail;
  }
  if (cfg->tls_key[0] && !cfg->tls_cert[0]) {
    snprintf(why, wl, "TLS: KC_REMOTE_TLS_KEY is set but KC_REMOTE_TLS_CERT (the client certificate) is not");
    goto fail;
  }
  if (cfg->tls_cert[0]) {
    const char *key = cfg->tls_key[0] ? cfg->tls_key : cfg->tls_cert;
    if (ssl.ctx_use_chain(ctx, cfg->tls_cert) != 1) {
      snprintf(why, wl, "TLS: the client certificate %s (KC_REMOTE_TLS_CERT) cannot be used: %s",
               cfg->tls_cert, ssl_err(e, sizeof e));
      goto fail;
    }
    if (ssl.ctx_use_key(ctx, key, SSL_FILETYPE_PEM_) != 1) {
      snprintf(why, wl, "TLS: the client key %s (KC_REMOTE_TLS_KEY) cannot be used: %s", key,
               ssl_err(e, sizeof e));
      goto fail;
    }
    if (ssl.ctx_check_key(ctx) != 1) {
      snprintf(why, wl, "TLS: the client key %s does not match the certificate %s: %s", key, cfg->tls_cert,
               ssl_err(e, sizeof e));
      goto fail;
    }
  }
  *out = ctx;
  return KC_OK;
fail:
  ssl.ctx_free(ctx);
  return KC_EINVAL;
}

/* ----------------------------------------------------------- sessions */

kc_status kc__tls_new(void *ctx, int fd, const char *name, void **out, char *why, size_t wl) {
  *out = NULL;
  char e[256];
  ssl.err_clear();
  void *s = ssl.ssl_new(ctx);
  if (!s) {
    snprintf(why, wl, "TLS: cannot make a session: %s", ssl_err(e, sizeof e));
    return KC_ENOMEM;
  }
  /* SSL_write may return having written part, and be called again with
   * the rest from another address */
  ssl.ctrl(s, SSL_CTRL_MODE_, SSL_MODE_ENABLE_PARTIAL_WRITE_ | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER_, NULL);
  unsigned char ip[16];
  bool literal = inet_pton(AF_INET, name, ip) == 1 || inet_pton(AF_INET6, name, ip) == 1;
  bool ok = ssl.set_fd(s, fd) == 1;
  /* the name checked against the certificate: an address against its IP
   * entries, a name against its DNS names (and sent as SNI, which takes no
   * address) */
  if (ok && literal) ok = ssl.param_ip(ssl.get0_param(s), name) == 1;
  if (ok && !literal)
    ok = ssl.set1_host(s, name) == 1 &&
         ssl.ctrl(s, SSL_CTRL_SET_TLSEXT_HOSTNAME_, TLSEXT_NAMETYPE_host_name_, (void *)name) == 1;
  if (!ok) {
    snprintf(why, wl, "TLS: cannot set up a session for \"%s\": %s", name, ssl_err(e, sizeof e));
    ssl.ssl_free(s);
    return KC_EINVAL;
  }
  *out = s;
  return KC_OK;
}

void kc__tls_free(void *s) {
  if (s) ssl.ssl_free(s); /* no close_notify: that would be I/O without a deadline */
}

/* What a failed call ret of session s means: 0 with *want the poll events
 * to wait for, or -1 with why. */
static int ssl_fail(void *s, int ret, const char *name, short *want, char *why, size_t wl) {
  int err = ssl.get_error(s, ret);
  char e[256];
  switch (err) {
  case SSL_ERROR_WANT_READ_: *want = POLLIN; return 0;
  case SSL_ERROR_WANT_WRITE_: *want = POLLOUT; return 0;
  case SSL_ERROR_ZERO_RETURN_: snprintf(why, wl, "TLS: the server closed the session"); break;
  case SSL_ERROR_SYSCALL_:
    ssl_err(e, sizeof e);
    if (e[0]) snprintf(why, wl, "TLS: %s", e);
    else if (errno && ret < 0) snprintf(why, wl, "TLS: %s", strerror(errno));
    else snprintf(why, wl, "TLS: the server closed the connection");
    break;
  default: {
    long v = name ? ssl.verify_result(s) : X509_V_OK_;
    ssl_err(e, sizeof e);
    if (v != X509_V_OK_) {
      const char *vs = ssl.verify_string(v);
      if (v == X509_V_ERR_HOSTNAME_MISMATCH_ || v == X509_V_ERR_IP_ADDRESS_MISMATCH_)
        snprintf(why, wl,
                 "TLS: the server's certificate was refused: %s (it is not for \"%s\"; "
                 "KC_REMOTE_TLS_SERVER_NAME sets the name to verify)",
                 vs ? vs : "name mismatch", name);
      else if (v == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_ || v == X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT_ ||
               v == X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN_ ||
               v == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY_)
        snprintf(why, wl,
                 "TLS: the server's certificate was refused: %s (no trusted CA issued it; "
                 "KC_REMOTE_TLS_CA names the CA to trust)",
                 vs ? vs : "unknown CA");
      else
        snprintf(why, wl, "TLS: the server's certificate was refused: %s", vs ? vs : "verification failed");
    } else if (strstr(e, "certificate required")) {
      snprintf(why, wl,
               "TLS: the server requires a client certificate (KC_REMOTE_TLS_CERT and KC_REMOTE_TLS_KEY): %s",
               e);
    } else if (strstr(e, "alert")) {
      snprintf(why, wl, "TLS: the server refused the session: %s", e);
    } else {
      snprintf(why, wl, "TLS: %s", e[0] ? e : "protocol error");
    }
  }
  }
  ssl.err_clear();
  return -1;
}

int kc__tls_handshake(void *s, const char *name, short *want, char *why, size_t wl) {
  ssl.err_clear();
  errno = 0;
  int r = ssl.connect(s);
  if (r == 1) return 1;
  return ssl_fail(s, r, name, want, why, wl);
}

long kc__tls_io(void *s, bool write, void *buf, size_t n, short *want, char *why, size_t wl) {
  int len = n > (1u << 30) ? 1 << 30 : (int)n;
  ssl.err_clear();
  errno = 0;
  int r = write ? ssl.write(s, buf, len) : ssl.read(s, buf, len);
  if (r > 0) return r;
  long f = ssl_fail(s, r, NULL, want, why, wl);
  if (f < 0 && write) {
    /* A server that ends the session (TLS 1.3: it refuses a client
     * certificate after the client's handshake is done) sends an alert
     * first: a read may still find it, and it says why better than the
     * write's "connection reset". */
    char tmp[512], m[512];
    short w2;
    errno = 0;
    int r2 = ssl.read(s, tmp, sizeof tmp);
    if (r2 <= 0 && ssl_fail(s, r2, NULL, &w2, m, sizeof m) < 0 && strstr(m, "alert"))
      snprintf(why, wl, "%s", m);
  }
  return f;
}

/* ------------------------------------------------------- the tier's */

kc_status kc__remote_tls_setup(kc__remote_config *cfg, char *why, size_t wl) {
  if (!cfg->tls || cfg->tls_ctx) return KC_OK;
  return kc__tls_ctx_new(cfg, &cfg->tls_ctx, why, wl);
}

void kc__remote_tls_release(kc__remote_config *cfg) {
  kc__tls_ctx_free(cfg->tls_ctx);
  cfg->tls_ctx = NULL;
}
