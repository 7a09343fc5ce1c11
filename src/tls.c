/*
 * tls.c: mbedtls 2.28 client sessions over memory buffers.
 *
 * mbedtls reads ciphertext through bio_recv (from the inbound buffer; empty means
 * WANT_READ) and writes through bio_send (into the outbound buffer). The caller fills one
 * from the socket and flushes the other after every call, so no mbedtls call ever blocks.
 *
 * The handshake is driven step by step rather than with mbedtls_ssl_handshake(), so that the
 * states it goes through can be seen: a full handshake passes through the client's key
 * exchange, an abbreviated one (the server accepted our session) goes from the ServerHello
 * straight to the server's ChangeCipherSpec. Only mbedtls's public interface is used, but for
 * mbedtls_ssl_check_cert_usage() (ssl_internal.h, exported by Debian's libmbedtls): the leaf's
 * usage checks of verify_chain() are mbedtls's own rather than a copy of them.
 */
#include "harvestd/tls.h"

#include <mbedtls/asn1.h>
#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/error.h>
#include <mbedtls/sha256.h>
#include <mbedtls/ssl.h>
#include <mbedtls/ssl_ciphersuites.h>
#include <mbedtls/ssl_internal.h>
#include <mbedtls/x509_crt.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <time.h>
#include <uthash.h>
#include <uv.h>

#include "harvestd/buf.h"
#include "harvestd/common.h"

#define SYSTEM_CA_FILE "/etc/ssl/certs/ca-certificates.crt"
#define SESSION_CACHE_MAX 1024
#define OUT_BUF_MAX (1024 * 1024)

typedef struct session_s {
    char *key;
    mbedtls_ssl_session sess;
    TAILQ_ENTRY(session_s) lru;
    UT_hash_handle hh;
} session_t;

struct hv_tls_ctx_s {
    mbedtls_ssl_config conf;
    mbedtls_ssl_config conf_h2; /* ALPN h2 and http/1.1, RFC 9113's cipher suites only */
    mbedtls_x509_crt ca;
    mbedtls_entropy_context entropy;
    mbedtls_ctr_drbg_context drbg;
    int insecure;
    session_t *sessions;
    TAILQ_HEAD(, session_s) lru;
    unsigned nsessions;
    hv_tls_stats_t stats;
    void (*on_session)(void *ud, const char *key);
    void *on_session_ud;
    pthread_mutex_t vlock;      /* the verified-certificate cache, shared by the workers */
    struct vcert_s *vcache;
    TAILQ_HEAD(, vcert_s) vlru;
    unsigned nvcache;
    void (*on_miss)(void *ud, const char *key);
    void *on_miss_ud;
    uint64_t trust;             /* hv_tls_ctx_trust() */
};

struct hv_tls_s {
    hv_tls_ctx_t *ctx;
    mbedtls_ssl_context ssl;
    char *key;
    int is_ip;
    unsigned char ip[16];
    size_t ip_len;
    int full;                   /* the handshake went through a key exchange */
    int step_rc;                /* the mbedtls error of a failed step */
    char *name;                 /* the host as given: a name, or an IP literal */
    int chain_checked;          /* the server's Certificate went through verify_chain() */
    uint32_t verify_flags;      /* ... and what it found */
    int done;
    size_t in_start;
    size_t in_end;
    hv_buf_t out;
    hv_fault_t fault;
    char error[64];             /* the text of `fault` */
    char in[HV_TLS_IN_BUF];
};

/* Offer the common fast curves first; the default list starts with P-521, which costs many
 * times more per handshake. P-521 stays last so certificates using it still verify. */
static const mbedtls_ecp_group_id curves[] = {
    MBEDTLS_ECP_DP_SECP256R1, MBEDTLS_ECP_DP_CURVE25519, MBEDTLS_ECP_DP_SECP384R1,
    MBEDTLS_ECP_DP_SECP521R1, MBEDTLS_ECP_DP_NONE};

static const char *alpn[] = {"http/1.1", NULL};
static const char *alpn_h2[] = {"h2", "http/1.1", NULL};

/* What RFC 9113 9.2.2 leaves to HTTP/2 over TLS 1.2: ephemeral key exchange and AEAD. A
 * server that offers none of them gets no h2 offer from us either (fetch then asks it for
 * HTTP/1.1 alone). */
static const int h2_suites[] = {
    /* ChaCha20-Poly1305 first, as mbedtls's own list has it: with AES-GCM first, half of an
     * h2 connection's CPU went to GHASH (mbedtls 2.28 takes a block per call) */
    MBEDTLS_TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    MBEDTLS_TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    MBEDTLS_TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    MBEDTLS_TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    MBEDTLS_TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    MBEDTLS_TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
    MBEDTLS_TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    MBEDTLS_TLS_DHE_RSA_WITH_AES_128_GCM_SHA256,
    MBEDTLS_TLS_DHE_RSA_WITH_AES_256_GCM_SHA384,
    0};

static int rng(void *p, unsigned char *out, size_t len);

/* One client configuration: the trust store, versions, curves, tickets, and `protos`. */
static int conf_setup(hv_tls_ctx_t *ctx, mbedtls_ssl_config *conf, const char **protos,
                      const int *suites, char *err, size_t errcap)
{
    char text[128];
    int rc = mbedtls_ssl_config_defaults(conf, MBEDTLS_SSL_IS_CLIENT,
                                         MBEDTLS_SSL_TRANSPORT_STREAM,
                                         MBEDTLS_SSL_PRESET_DEFAULT);
    if (rc != 0) {
        mbedtls_strerror(rc, text, sizeof(text));
        snprintf(err, errcap, "cannot configure TLS: %s", text);
        return UV_EINVAL;
    }
    mbedtls_ssl_conf_rng(conf, rng, &ctx->drbg);
    /* The chain is verified by verify_chain() after the Certificate message (with the
     * verified-certificate cache), unless verification is off. */
    mbedtls_ssl_conf_authmode(conf, MBEDTLS_SSL_VERIFY_NONE);
    mbedtls_ssl_conf_ca_chain(conf, &ctx->ca, NULL);
    mbedtls_ssl_conf_min_version(conf, MBEDTLS_SSL_MAJOR_VERSION_3, MBEDTLS_SSL_MINOR_VERSION_3);
    mbedtls_ssl_conf_curves(conf, curves);
    mbedtls_ssl_conf_session_tickets(conf, MBEDTLS_SSL_SESSION_TICKETS_ENABLED);
    if (suites != NULL)
        mbedtls_ssl_conf_ciphersuites(conf, suites);
    if (mbedtls_ssl_conf_alpn_protocols(conf, protos) != 0) {
        snprintf(err, errcap, "cannot configure ALPN");
        return UV_EINVAL;
    }
    return 0;
}

/* What verifies peers: whether anything does, and every trusted certificate (FNV-1a over
 * their DER). A session resumed skips the verification its full handshake made, so one kept
 * elsewhere must come from a context that verified the same way. */
static uint64_t trust_fingerprint(const hv_tls_ctx_t *ctx)
{
    uint64_t h = UINT64_C(14695981039346656037);
    h = (h ^ (uint64_t)(ctx->insecure ? 1 : 2)) * UINT64_C(1099511628211);
    for (const mbedtls_x509_crt *c = &ctx->ca; c != NULL && c->raw.p != NULL; c = c->next)
        for (size_t i = 0; i < c->raw.len; i++)
            h = (h ^ c->raw.p[i]) * UINT64_C(1099511628211);
    return h;
}

int hv_tls_ctx_new(const char *ca_file, int insecure, hv_tls_ctx_t **out, char *err,
                   size_t errcap)
{
    hv_tls_ctx_t *ctx = hv_xcalloc(1, sizeof(*ctx));
    const char *path = ca_file != NULL ? ca_file : SYSTEM_CA_FILE;
    char text[128];
    int rc;

    *out = NULL;
    mbedtls_ssl_config_init(&ctx->conf);
    mbedtls_ssl_config_init(&ctx->conf_h2);
    mbedtls_x509_crt_init(&ctx->ca);
    mbedtls_entropy_init(&ctx->entropy);
    mbedtls_ctr_drbg_init(&ctx->drbg);
    TAILQ_INIT(&ctx->lru);
    TAILQ_INIT(&ctx->vlru);
    pthread_mutex_init(&ctx->vlock, NULL);
    ctx->insecure = insecure;

    static const unsigned char pers[] = "harvestd";
    rc = mbedtls_ctr_drbg_seed(&ctx->drbg, mbedtls_entropy_func, &ctx->entropy, pers,
                               sizeof(pers) - 1);
    if (rc != 0) {
        mbedtls_strerror(rc, text, sizeof(text));
        snprintf(err, errcap, "cannot seed the random generator: %s", text);
        goto fail;
    }
    if (!insecure || ca_file != NULL) {
        rc = mbedtls_x509_crt_parse_file(&ctx->ca, path);
        /* A positive result counts certificates that did not parse; a bundle with a few odd
         * entries is still usable as long as something loaded. */
        if (rc < 0 || ctx->ca.version == 0) {
            if (rc < 0)
                mbedtls_strerror(rc, text, sizeof(text));
            else
                snprintf(text, sizeof(text), "no certificate could be parsed");
            snprintf(err, errcap, "cannot load CA certificates from %s: %s", path, text);
            goto fail;
        }
    }
    if (conf_setup(ctx, &ctx->conf, alpn, NULL, err, errcap) != 0 ||
        conf_setup(ctx, &ctx->conf_h2, alpn_h2, h2_suites, err, errcap) != 0)
        goto fail;
    ctx->trust = trust_fingerprint(ctx);
    *out = ctx;
    return 0;

fail:
    hv_tls_ctx_free(ctx);
    return UV_EINVAL;
}

static void session_drop(hv_tls_ctx_t *ctx, session_t *s);
static void vcache_free(hv_tls_ctx_t *ctx);

void hv_tls_ctx_free(hv_tls_ctx_t *ctx)
{
    session_t *s, *tmp;
    if (ctx == NULL)
        return;
    HASH_ITER(hh, ctx->sessions, s, tmp)
    {
        session_drop(ctx, s);
    }
    vcache_free(ctx);
    mbedtls_ssl_config_free(&ctx->conf);
    mbedtls_ssl_config_free(&ctx->conf_h2);
    mbedtls_x509_crt_free(&ctx->ca);
    mbedtls_ctr_drbg_free(&ctx->drbg);
    mbedtls_entropy_free(&ctx->entropy);
    free(ctx);
}

const hv_tls_stats_t *hv_tls_ctx_stats(const hv_tls_ctx_t *ctx)
{
    return &ctx->stats;
}

/* ---- session cache ---- */

static session_t *session_find(hv_tls_ctx_t *ctx, const char *key)
{
    session_t *s;
    HASH_FIND_STR(ctx->sessions, key, s);
    return s;
}

static void session_drop(hv_tls_ctx_t *ctx, session_t *s)
{
    HASH_DEL(ctx->sessions, s);
    TAILQ_REMOVE(&ctx->lru, s, lru);
    ctx->nsessions--;
    mbedtls_ssl_session_free(&s->sess);
    free(s->key);
    free(s);
}

static session_t *session_entry(hv_tls_ctx_t *ctx, const char *key);

static void session_save(hv_tls_t *t)
{
    hv_tls_ctx_t *ctx = t->ctx;
    session_t *s = session_entry(ctx, t->key);
    /* Nothing to resume from: forget the entry rather than offer a broken one. */
    if (mbedtls_ssl_get_session(&t->ssl, &s->sess) != 0)
        session_drop(ctx, s);
    else if (ctx->on_session != NULL)
        ctx->on_session(ctx->on_session_ud, t->key);
}

/* The entry of `key`, emptied, the most recently used (made, the least recently used one
 * dropped for room, when there is none). */
static session_t *session_entry(hv_tls_ctx_t *ctx, const char *key)
{
    session_t *s = session_find(ctx, key);
    if (s != NULL) {
        mbedtls_ssl_session_free(&s->sess);
        mbedtls_ssl_session_init(&s->sess);
        TAILQ_REMOVE(&ctx->lru, s, lru);
        TAILQ_INSERT_TAIL(&ctx->lru, s, lru);
        return s;
    }
    if (ctx->nsessions >= SESSION_CACHE_MAX)
        session_drop(ctx, TAILQ_FIRST(&ctx->lru));
    s = hv_xcalloc(1, sizeof(*s));
    s->key = hv_xstrdup(key);
    mbedtls_ssl_session_init(&s->sess);
    HASH_ADD_KEYPTR(hh, ctx->sessions, s->key, strlen(s->key), s);
    TAILQ_INSERT_TAIL(&ctx->lru, s, lru);
    ctx->nsessions++;
    return s;
}

ssize_t hv_tls_session_export(hv_tls_ctx_t *ctx, const char *key, unsigned char *out,
                              size_t cap)
{
    session_t *s = session_find(ctx, key);
    if (s == NULL)
        return 0;
    size_t n = 0;
    int rc = mbedtls_ssl_session_save(&s->sess, out, cap, &n);
    if (rc == MBEDTLS_ERR_SSL_BUFFER_TOO_SMALL)
        return UV_ENOBUFS;
    return rc == 0 ? (ssize_t)n : 0;
}

int hv_tls_session_import(hv_tls_ctx_t *ctx, const char *key, const unsigned char *data,
                          size_t len)
{
    session_t *s = session_entry(ctx, key);
    if (mbedtls_ssl_session_load(&s->sess, data, len) != 0) {
        session_drop(ctx, s);
        return UV_EINVAL;
    }
    return 0;
}

int hv_tls_session_has(hv_tls_ctx_t *ctx, const char *key)
{
    return session_find(ctx, key) != NULL;
}

void hv_tls_ctx_on_session(hv_tls_ctx_t *ctx, void (*cb)(void *ud, const char *key), void *ud)
{
    ctx->on_session = cb;
    ctx->on_session_ud = ud;
}

void hv_tls_ctx_on_miss(hv_tls_ctx_t *ctx, void (*cb)(void *ud, const char *key), void *ud)
{
    ctx->on_miss = cb;
    ctx->on_miss_ud = ud;
}

uint64_t hv_tls_ctx_trust(const hv_tls_ctx_t *ctx)
{
    return ctx->trust;
}

int hv_tls_session_ticket(hv_tls_ctx_t *ctx, const char *key, uint32_t *lifetime_s)
{
    session_t *s = session_find(ctx, key);
    *lifetime_s = 0;
    if (s == NULL)
        return UV_ENOENT;
    if (s->sess.ticket == NULL || s->sess.ticket_len == 0)
        return 0;
    *lifetime_s = s->sess.ticket_lifetime;
    return 1;
}

/* ---- memory BIO ---- */

static int bio_recv(void *p, unsigned char *buf, size_t len)
{
    hv_tls_t *t = p;
    size_t avail = t->in_end - t->in_start;
    if (avail == 0)
        return MBEDTLS_ERR_SSL_WANT_READ;
    size_t n = HV_MIN(avail, len);
    memcpy(buf, t->in + t->in_start, n);
    t->in_start += n;
    if (t->in_start == t->in_end)
        t->in_start = t->in_end = 0;
    return (int)n;
}

static int bio_send(void *p, const unsigned char *buf, size_t len)
{
    hv_tls_t *t = p;
    if (hv_buf_append(&t->out, buf, len) != 0)
        return MBEDTLS_ERR_SSL_WANT_WRITE;
    return (int)len;
}

/* ---- iPAddress subjectAltName matching ----
 *
 * mbedtls 2.28 keeps every subjectAltName entry of a certificate in crt->subject_alt_names
 * (raw, tagged with its GeneralName choice) but checks only dNSName entries against a host
 * name. An IP literal is checked here against the iPAddress entries (RFC 6125, 6.2.1).
 */

static int san_has_ip(const mbedtls_x509_crt *crt, const unsigned char *ip, size_t ip_len)
{
    for (const mbedtls_x509_sequence *s = &crt->subject_alt_names; s != NULL && s->buf.p != NULL;
         s = s->next) {
        if (s->buf.tag == (MBEDTLS_ASN1_CONTEXT_SPECIFIC | MBEDTLS_X509_SAN_IP_ADDRESS) &&
            s->buf.len == ip_len && memcmp(s->buf.p, ip, ip_len) == 0)
            return 1;
    }
    return 0;
}

/* ---- the server's certificate chain, and the verified-certificate cache ----
 *
 * mbedtls runs with authmode NONE (when verification is on) and the chain is checked here,
 * right after the Certificate message, before the key exchange: the same checks mbedtls
 * makes (mbedtls_x509_crt_verify_with_profile() against the trust store, with the host name;
 * the leaf's key usage for the suite and its serverAuth extended key usage), with a cache of
 * what verified before, so that a signature checked once is not checked again:
 *   - a leaf certificate (its bytes) that verified for a host name: the next handshake with
 *     that host presenting the same certificate skips the chain, checking only that every
 *     certificate of the path it verified through is still within its validity dates, and
 *     the leaf's key usage;
 *   - an intermediate CA certificate (its bytes) that was part of a verified path: a new leaf
 *     under it is verified against it as the trust anchor (one signature instead of the
 *     whole path), its dates and the host name checked by mbedtls as usual.
 * What it gives up: a root removed from the trust store mid-run, or an intermediate revoked,
 * goes on being trusted through the cache until the process restarts (harvestd checks no
 * revocation anyway). Keys are SHA-256 digests of the DER bytes: a certificate differing in
 * any byte is another entry. Bounded (VCACHE_MAX, least recently used dropped); shared by the
 * crypto workers under a mutex.
 */

#define VCACHE_MAX 512

/* A validity period in seconds since the epoch (UTC), both ends included. */
typedef struct {
    int64_t from, to;
} window_t;

typedef struct vcert_s {
    unsigned char key[32];      /* SHA-256 of the DER (and, for a leaf, of the host name) */
    int is_leaf;
    mbedtls_x509_crt *crt;      /* an intermediate's own copy, as a trust anchor */
    window_t valid;             /* the verified path's common validity */
    unsigned refs;              /* threads verifying against it now */
    int dropped;                /* out of the cache: freed when refs reach 0 */
    TAILQ_ENTRY(vcert_s) lru;
    UT_hash_handle hh;
} vcert_t;

static void vcert_free(vcert_t *v)
{
    if (v->crt != NULL) {
        mbedtls_x509_crt_free(v->crt);
        free(v->crt);
    }
    free(v);
}

static int64_t epoch_of(const mbedtls_x509_time *t)
{
    struct tm tm = {.tm_year = t->year - 1900, .tm_mon = t->mon - 1, .tm_mday = t->day,
                    .tm_hour = t->hour, .tm_min = t->min, .tm_sec = t->sec};
    return (int64_t)timegm(&tm);
}

static window_t window_of(const mbedtls_x509_crt *c)
{
    return (window_t){epoch_of(&c->valid_from), epoch_of(&c->valid_to)};
}

/* Narrow `w` to what `other` also covers. */
static void narrow(window_t *w, window_t other)
{
    w->from = HV_MAX(w->from, other.from);
    w->to = HV_MIN(w->to, other.to);
}

static int vcert_current(const vcert_t *v)
{
    int64_t now = (int64_t)time(NULL);
    return v->valid.from <= now && now <= v->valid.to;
}

static void leaf_key(const mbedtls_x509_crt *crt, const char *host, unsigned char out[32])
{
    mbedtls_sha256_context h;
    mbedtls_sha256_init(&h);
    mbedtls_sha256_starts_ret(&h, 0);
    mbedtls_sha256_update_ret(&h, crt->raw.p, crt->raw.len);
    mbedtls_sha256_update_ret(&h, (const unsigned char *)"\0", 1);
    mbedtls_sha256_update_ret(&h, (const unsigned char *)host, strlen(host));
    mbedtls_sha256_finish_ret(&h, out);
    mbedtls_sha256_free(&h);
}

/* Look `key` up; a hit is referenced (vcache_put() lets go) and made the most recent. */
static vcert_t *vcache_get(hv_tls_ctx_t *ctx, const unsigned char key[32])
{
    vcert_t *v;
    pthread_mutex_lock(&ctx->vlock);
    HASH_FIND(hh, ctx->vcache, key, 32, v);
    if (v != NULL) {
        v->refs++;
        TAILQ_REMOVE(&ctx->vlru, v, lru);
        TAILQ_INSERT_TAIL(&ctx->vlru, v, lru);
    }
    pthread_mutex_unlock(&ctx->vlock);
    return v;
}

static void vcache_put(hv_tls_ctx_t *ctx, vcert_t *v)
{
    pthread_mutex_lock(&ctx->vlock);
    int gone = --v->refs == 0 && v->dropped;
    pthread_mutex_unlock(&ctx->vlock);
    if (gone)
        vcert_free(v);
}

static void vcache_drop_locked(hv_tls_ctx_t *ctx, vcert_t *v, vcert_t **to_free)
{
    HASH_DEL(ctx->vcache, v);
    TAILQ_REMOVE(&ctx->vlru, v, lru);
    ctx->nvcache--;
    v->dropped = 1;
    if (v->refs == 0) {
        v->lru.tqe_next = *to_free;
        *to_free = v;
    }
}

/* Remember `v` (made by the caller, not yet shared); one already there for its key stays. */
static void vcache_add(hv_tls_ctx_t *ctx, vcert_t *v)
{
    vcert_t *old, *to_free = NULL;
    pthread_mutex_lock(&ctx->vlock);
    HASH_FIND(hh, ctx->vcache, v->key, 32, old);
    if (old == NULL) {
        while (ctx->nvcache >= VCACHE_MAX)
            vcache_drop_locked(ctx, TAILQ_FIRST(&ctx->vlru), &to_free);
        HASH_ADD(hh, ctx->vcache, key, 32, v);
        TAILQ_INSERT_TAIL(&ctx->vlru, v, lru);
        ctx->nvcache++;
        v = NULL;
    }
    pthread_mutex_unlock(&ctx->vlock);
    if (v != NULL)
        vcert_free(v);
    while (to_free != NULL) {
        vcert_t *next = to_free->lru.tqe_next;
        vcert_free(to_free);
        to_free = next;
    }
}

static void vcache_free(hv_tls_ctx_t *ctx)
{
    vcert_t *v, *tmp;
    HASH_ITER(hh, ctx->vcache, v, tmp)
    {
        HASH_DEL(ctx->vcache, v);
        vcert_free(v);
    }
    pthread_mutex_destroy(&ctx->vlock);
}

/* What mbedtls's ssl layer checks of the leaf besides the chain, asked of mbedtls itself
 * (mbedtls_ssl_check_cert_usage(), which its own verification calls): the key usage the
 * suite's key exchange needs, and serverAuth. */
static uint32_t leaf_usage(const hv_tls_t *t, const mbedtls_x509_crt *leaf)
{
    uint32_t flags = 0;
    const mbedtls_ssl_ciphersuite_t *cs =
        t->ssl.session_negotiate != NULL
            ? mbedtls_ssl_ciphersuite_from_id(t->ssl.session_negotiate->ciphersuite)
            : NULL;
    if (cs == NULL)
        return MBEDTLS_X509_BADCERT_OTHER;
    if (mbedtls_ssl_check_cert_usage(leaf, cs, MBEDTLS_SSL_IS_SERVER, &flags) != 0 && flags == 0)
        flags = MBEDTLS_X509_BADCERT_OTHER;
    return flags;
}

/* The path mbedtls verified, cert by cert (its verify callback, bottom first). */
typedef struct {
    hv_tls_t *t;
    const mbedtls_x509_crt *path[MBEDTLS_X509_MAX_INTERMEDIATE_CA + 2];
    int depth_max;
    int ok;                     /* no certificate of the path had a flag */
} path_t;

static int on_path(void *p, mbedtls_x509_crt *crt, int depth, uint32_t *flags)
{
    path_t *path = p;
    if (path->t->is_ip && depth == 0 && !san_has_ip(crt, path->t->ip, path->t->ip_len))
        *flags |= MBEDTLS_X509_BADCERT_CN_MISMATCH;
    if (*flags != 0)
        path->ok = 0;
    if (depth >= 0 && depth < (int)HV_ARRAY_SIZE(path->path)) {
        path->path[depth] = crt;
        path->depth_max = HV_MAX(path->depth_max, depth);
    }
    return 0;
}

/* Whether `crt` is one of the trust store's own certificates. */
static int in_store(const hv_tls_ctx_t *ctx, const mbedtls_x509_crt *crt)
{
    for (const mbedtls_x509_crt *c = &ctx->ca; c != NULL; c = c->next)
        if (c == crt)
            return 1;
    return 0;
}

/* Remember what a verification that passed went through: the leaf for this host, and every
 * intermediate below the trust store's certificate (or below the cached one it used). */
static void remember_path(hv_tls_ctx_t *ctx, const path_t *path, const unsigned char key[32],
                          const vcert_t *anchor)
{
    window_t valid = window_of(path->path[0]);
    for (int d = 1; d <= path->depth_max; d++) {
        const mbedtls_x509_crt *c = path->path[d];
        if (c == NULL)
            return; /* (a path with a hole: remember nothing) */
        narrow(&valid, window_of(c));
    }
    if (anchor != NULL)
        narrow(&valid, anchor->valid);
    vcert_t *leaf = hv_xcalloc(1, sizeof(*leaf));
    memcpy(leaf->key, key, sizeof(leaf->key));
    leaf->is_leaf = 1;
    leaf->valid = valid;
    vcache_add(ctx, leaf);
    for (int d = 1; d <= path->depth_max; d++) {
        const mbedtls_x509_crt *c = path->path[d];
        if (in_store(ctx, c) || (anchor != NULL && c == anchor->crt))
            break; /* the trust anchor: not cached, it is trusted as it is */
        vcert_t *v = hv_xcalloc(1, sizeof(*v));
        mbedtls_sha256_ret(c->raw.p, c->raw.len, v->key, 0);
        v->crt = hv_xcalloc(1, sizeof(*v->crt));
        mbedtls_x509_crt_init(v->crt);
        if (mbedtls_x509_crt_parse_der(v->crt, c->raw.p, c->raw.len) != 0) {
            vcert_free(v);
            break;
        }
        /* Its own dates, and those of what it was verified through above it. */
        v->valid = window_of(c);
        for (int up = d + 1; up <= path->depth_max && path->path[up] != NULL; up++)
            narrow(&v->valid, window_of(path->path[up]));
        vcache_add(ctx, v);
    }
}

/* Check the server's chain (see above): 0, or the verification flags. */
static uint32_t verify_chain(hv_tls_t *t)
{
    hv_tls_ctx_t *ctx = t->ctx;
    /* (The session being negotiated holds it: mbedtls_ssl_get_peer_cert() reads the
     * established one.) */
    mbedtls_x509_crt *chain =
        t->ssl.session_negotiate != NULL ? t->ssl.session_negotiate->peer_cert : NULL;
    const char *host = t->name; /* a name, or the IP literal (the leaf's key includes it) */
    if (chain == NULL)
        return MBEDTLS_X509_BADCERT_MISSING;
    uint32_t usage = leaf_usage(t, chain);

    /* The same leaf for the same host, verified before and still within its path's dates. */
    unsigned char lkey[32], key[32];
    leaf_key(chain, host, lkey);
    vcert_t *hit = vcache_get(ctx, lkey);
    if (hit != NULL) {
        int current = vcert_current(hit);
        vcache_put(ctx, hit);
        if (current) {
            __atomic_add_fetch(&ctx->stats.chains_cached, 1, __ATOMIC_RELAXED);
            return usage;
        }
    }
    /* A cached intermediate among those sent: the trust anchor for the rest. */
    vcert_t *anchor = NULL;
    for (const mbedtls_x509_crt *c = chain->next; c != NULL && anchor == NULL; c = c->next) {
        mbedtls_sha256_ret(c->raw.p, c->raw.len, key, 0);
        anchor = vcache_get(ctx, key);
        if (anchor != NULL && (anchor->is_leaf || !vcert_current(anchor))) {
            vcache_put(ctx, anchor);
            anchor = NULL;
        }
    }
    path_t path = {.t = t, .ok = 1};
    uint32_t flags = 0;
    int rc = mbedtls_x509_crt_verify_with_profile(
        chain, anchor != NULL ? anchor->crt : &ctx->ca, NULL, &mbedtls_x509_crt_profile_default,
        t->is_ip ? NULL : host, &flags, on_path, &path);
    if (rc != 0 && anchor != NULL) {
        /* Not through the cached one (another path, a name that does not match...): the
         * trust store decides, as without a cache. */
        vcache_put(ctx, anchor);
        anchor = NULL;
        memset(&path, 0, sizeof(path));
        path.t = t;
        path.ok = 1;
        flags = 0;
        rc = mbedtls_x509_crt_verify_with_profile(chain, &ctx->ca, NULL,
                                                  &mbedtls_x509_crt_profile_default,
                                                  t->is_ip ? NULL : host, &flags, on_path, &path);
    }
    __atomic_add_fetch(anchor != NULL ? &ctx->stats.chains_anchored : &ctx->stats.chains_verified,
                       1, __ATOMIC_RELAXED);
    if (rc == 0 && flags == 0 && path.ok && usage == 0)
        remember_path(ctx, &path, lkey, anchor);
    if (anchor != NULL)
        vcache_put(ctx, anchor);
    if (rc != 0 && flags == 0)
        flags = MBEDTLS_X509_BADCERT_OTHER;
    return flags | usage;
}

/* ---- sessions ---- */

hv_tls_t *hv_tls_new(hv_tls_ctx_t *ctx, const char *host, int host_is_ip,
                     const char *session_key)
{
    return hv_tls_new_alpn(ctx, host, host_is_ip, session_key, 0);
}

const char *hv_tls_alpn(const hv_tls_t *t)
{
    return mbedtls_ssl_get_alpn_protocol(&t->ssl);
}

hv_tls_t *hv_tls_new_alpn(hv_tls_ctx_t *ctx, const char *host, int host_is_ip,
                          const char *session_key, int h2)
{
    hv_tls_t *t = hv_xcalloc(1, sizeof(*t));
    t->ctx = ctx;
    t->key = hv_xstrdup(session_key);
    t->name = hv_xstrdup(host);
    hv_buf_init(&t->out, OUT_BUF_MAX);
    mbedtls_ssl_init(&t->ssl);
    if (mbedtls_ssl_setup(&t->ssl, h2 ? &ctx->conf_h2 : &ctx->conf) != 0) {
        fprintf(stderr, "harvestd: out of memory setting up a TLS session\n");
        abort();
    }
    if (host_is_ip) {
        t->is_ip = 1;
        if (uv_inet_pton(AF_INET, host, t->ip) == 0)
            t->ip_len = 4;
        else if (uv_inet_pton(AF_INET6, host, t->ip) == 0)
            t->ip_len = 16;
    } else {
        /* SNI and the certificate name check both come from this call. */
        mbedtls_ssl_set_hostname(&t->ssl, host);
    }
    mbedtls_ssl_set_bio(&t->ssl, t, bio_send, bio_recv, NULL);
    session_t *s = session_find(ctx, session_key);
    /* Kept elsewhere (the re-crawl store): the callback may import it now. */
    if (s == NULL && ctx->on_miss != NULL) {
        ctx->on_miss(ctx->on_miss_ud, session_key);
        s = session_find(ctx, session_key);
    }
    if (s != NULL)
        mbedtls_ssl_set_session(&t->ssl, &s->sess);
    return t;
}

void hv_tls_free(hv_tls_t *t)
{
    if (t == NULL)
        return;
    mbedtls_ssl_free(&t->ssl);
    hv_buf_free(&t->out);
    free(t->key);
    free(t->name);
    free(t);
}

void hv_tls_in_space(hv_tls_t *t, char **ptr, size_t *len)
{
    if (t->in_start > 0) {
        memmove(t->in, t->in + t->in_start, t->in_end - t->in_start);
        t->in_end -= t->in_start;
        t->in_start = 0;
    }
    *ptr = t->in + t->in_end;
    *len = sizeof(t->in) - t->in_end;
}

void hv_tls_in_commit(hv_tls_t *t, size_t n)
{
    t->in_end += n;
}

/* Record a failure detail, and its text for hv_tls_error(). */
static void set_error(hv_tls_t *t, hv_detail_t code, const char *arg)
{
    hv_fault_set(&t->fault, code, arg);
    hv_detail_format(t->error, sizeof(t->error), code, t->fault.arg);
}

/* An mbedtls error without a detail of its own is named by its code: tls_error_-0x7280. */
static void set_mbedtls_error(hv_tls_t *t, int rc)
{
    char code[16];
    snprintf(code, sizeof(code), "%04x", (unsigned)-rc);
    set_error(t, HV_D_TLS_ERROR, code);
}

static hv_detail_t cert_error(uint32_t flags)
{
    if (flags & MBEDTLS_X509_BADCERT_NOT_TRUSTED)
        return HV_D_CERTIFICATE_UNTRUSTED;
    if (flags & MBEDTLS_X509_BADCERT_EXPIRED)
        return HV_D_CERTIFICATE_EXPIRED;
    if (flags & MBEDTLS_X509_BADCERT_FUTURE)
        return HV_D_CERTIFICATE_NOT_YET_VALID;
    if (flags & MBEDTLS_X509_BADCERT_CN_MISMATCH)
        return HV_D_CERTIFICATE_HOSTNAME_MISMATCH;
    if (flags & MBEDTLS_X509_BADCERT_REVOKED)
        return HV_D_CERTIFICATE_REVOKED;
    return HV_D_CERTIFICATE_INVALID;
}

/* The peer sent a fatal alert: name it by its description code. */
static void alert_error(hv_tls_t *t)
{
    char desc[12];
    if (t->ssl.in_msg == NULL) {
        set_error(t, HV_D_TLS_ALERT_UNKNOWN, NULL);
        return;
    }
    snprintf(desc, sizeof(desc), "%u", (unsigned)t->ssl.in_msg[1]);
    set_error(t, HV_D_TLS_ALERT, desc);
}

static int fail(hv_tls_t *t, int rc)
{
    t->ctx->stats.failures++;
    switch (rc) {
    case MBEDTLS_ERR_X509_CERT_VERIFY_FAILED:
        set_error(t, cert_error(t->verify_flags != 0 ? t->verify_flags
                                                     : mbedtls_ssl_get_verify_result(&t->ssl)),
                  NULL);
        return HV_ECERT;
    case MBEDTLS_ERR_SSL_FATAL_ALERT_MESSAGE:
        alert_error(t);
        return HV_ETLS;
    case MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY:
    case MBEDTLS_ERR_SSL_CONN_EOF:
        set_error(t, HV_D_TLS_CLOSED_DURING_HANDSHAKE, NULL);
        return HV_ETLS;
    case MBEDTLS_ERR_SSL_BAD_HS_PROTOCOL_VERSION:
        set_error(t, HV_D_TLS_PROTOCOL_VERSION, NULL);
        return HV_ETLS;
    case MBEDTLS_ERR_SSL_NO_USABLE_CIPHERSUITE:
        set_error(t, HV_D_TLS_NO_SHARED_CIPHER, NULL);
        return HV_ETLS;
    case MBEDTLS_ERR_SSL_INVALID_RECORD:
        set_error(t, HV_D_TLS_INVALID_RECORD, NULL);
        return HV_ETLS;
    default:
        set_mbedtls_error(t, rc);
        return HV_ETLS;
    }
}

int hv_tls_handshake_step(hv_tls_t *t)
{
    if (t->done)
        return 0;
    while (t->ssl.state != MBEDTLS_SSL_HANDSHAKE_OVER) {
        int before = t->ssl.state;
        int rc = mbedtls_ssl_handshake_step(&t->ssl);
        if (t->ssl.state == MBEDTLS_SSL_CLIENT_KEY_EXCHANGE)
            t->full = 1;
        if (before == MBEDTLS_SSL_SERVER_CERTIFICATE && t->ssl.state != before && rc == 0 &&
            !t->chain_checked && !t->ctx->insecure) {
            /* The chain, before anything is computed for a server it may not be. */
            t->chain_checked = 1;
            t->verify_flags = verify_chain(t);
            if (t->verify_flags != 0) {
                t->step_rc = MBEDTLS_ERR_X509_CERT_VERIFY_FAILED;
                return -1;
            }
        }
        if (rc == MBEDTLS_ERR_SSL_WANT_READ || rc == MBEDTLS_ERR_SSL_WANT_WRITE)
            return 1;
        if (rc != 0) {
            t->step_rc = rc;
            return -1;
        }
    }
    return 0;
}

int hv_tls_handshake_finish(hv_tls_t *t, int step)
{
    if (t->done || step == 1)
        return step == 1 ? 1 : 0;
    if (step < 0)
        return fail(t, t->step_rc);
    t->done = 1;
    if (!t->full)
        t->ctx->stats.resumed++;
    else
        t->ctx->stats.handshakes++;
    session_save(t);
    return 0;
}

int hv_tls_handshake_idle(const hv_tls_t *t)
{
    return t->in_end == t->in_start;
}

int hv_tls_handshake(hv_tls_t *t)
{
    return hv_tls_handshake_finish(t, hv_tls_handshake_step(t));
}

/* ---- random generators: the loop's, and one per worker thread ---- */

static __thread mbedtls_ctr_drbg_context *thread_drbg;

/* mbedtls's f_rng for every session: the calling thread's own generator when it has one,
 * else the context's (whose mutex makes it safe anywhere, but one lock for every record's
 * nonce on every worker would serialise them). */
static int rng(void *p, unsigned char *out, size_t len)
{
    return mbedtls_ctr_drbg_random(thread_drbg != NULL ? thread_drbg : p, out, len);
}

void hv_tls_thread_start(hv_tls_ctx_t *ctx)
{
    static const unsigned char pers[] = "harvestd worker";
    mbedtls_ctr_drbg_context *d = hv_xcalloc(1, sizeof(*d));
    mbedtls_ctr_drbg_init(d);
    /* The entropy context locks itself (MBEDTLS_THREADING_C). */
    if (mbedtls_ctr_drbg_seed(d, mbedtls_entropy_func, &ctx->entropy, pers,
                              sizeof(pers) - 1) != 0) {
        mbedtls_ctr_drbg_free(d);
        free(d); /* this thread then draws from the context's generator */
        return;
    }
    thread_drbg = d;
}

void hv_tls_thread_stop(void)
{
    if (thread_drbg == NULL)
        return;
    mbedtls_ctr_drbg_free(thread_drbg);
    free(thread_drbg);
    thread_drbg = NULL;
}

ssize_t hv_tls_read(hv_tls_t *t, char *buf, size_t cap)
{
    int rc = mbedtls_ssl_read(&t->ssl, (unsigned char *)buf, cap);
    if (rc > 0)
        return rc;
    if (rc == MBEDTLS_ERR_SSL_WANT_READ || rc == MBEDTLS_ERR_SSL_WANT_WRITE)
        return 0;
    if (rc == 0 || rc == MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY)
        return UV_EOF;
    if (rc == MBEDTLS_ERR_SSL_FATAL_ALERT_MESSAGE)
        alert_error(t);
    else
        set_mbedtls_error(t, rc);
    return HV_ETLS;
}

int hv_tls_has_buffered(const hv_tls_t *t)
{
    return t->in_end > t->in_start || mbedtls_ssl_get_bytes_avail(&t->ssl) > 0;
}

int hv_tls_write(hv_tls_t *t, const char *data, size_t len)
{
    while (len > 0) {
        int rc = mbedtls_ssl_write(&t->ssl, (const unsigned char *)data, len);
        if (rc == MBEDTLS_ERR_SSL_WANT_READ || rc == MBEDTLS_ERR_SSL_WANT_WRITE) {
            /* The outbound buffer is unbounded for requests; this means it hit its cap. */
            set_error(t, HV_D_TLS_WRITE_BLOCKED, NULL);
            return HV_ETLS;
        }
        if (rc < 0) {
            set_mbedtls_error(t, rc);
            return HV_ETLS;
        }
        data += rc;
        len -= (size_t)rc;
    }
    return 0;
}

void hv_tls_out(const hv_tls_t *t, const char **ptr, size_t *len)
{
    *ptr = t->out.data;
    *len = t->out.len;
}

void hv_tls_out_clear(hv_tls_t *t)
{
    hv_buf_reset(&t->out);
}

void hv_tls_count_failure(hv_tls_t *t)
{
    t->ctx->stats.failures++;
}

const char *hv_tls_error(const hv_tls_t *t)
{
    return t->error;
}

const hv_fault_t *hv_tls_fault(const hv_tls_t *t)
{
    return &t->fault;
}
