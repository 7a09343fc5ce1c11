/* TLS without sockets: our client session against an mbedtls server, both over memory. The
 * server uses the test certificates that ship with mbedtls ("localhost", signed by its test
 * CA). Bytes move between the two by hand, optionally one at a time. */
#include <mbedtls/certs.h>
#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/pk.h>
#include <mbedtls/ssl.h>
#include <mbedtls/ssl_ticket.h>
#include <mbedtls/x509_crt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "harvestd/common.h"
#include "harvestd/config.h"
#include "harvestd/recrawl.h"
#include "harvestd/store.h"
#include "harvestd/tls.h"
#include "test.h"

typedef struct {
    unsigned char data[256 * 1024];
    size_t len;
} pipe_t;

typedef struct {
    mbedtls_ssl_config conf;
    mbedtls_x509_crt crt;
    mbedtls_pk_context key;
    mbedtls_entropy_context entropy;
    mbedtls_ctr_drbg_context drbg;
    mbedtls_ssl_ticket_context ticket;
} server_cfg_t;

static pipe_t to_server;

static int srv_send(void *p, const unsigned char *buf, size_t len)
{
    hv_tls_t *client = p;
    char *space;
    size_t room;
    hv_tls_in_space(client, &space, &room);
    if (room == 0)
        return MBEDTLS_ERR_SSL_WANT_WRITE;
    size_t n = len < room ? len : room;
    memcpy(space, buf, n);
    hv_tls_in_commit(client, n);
    return (int)n;
}

static int srv_recv(void *p, unsigned char *buf, size_t len)
{
    (void)p;
    if (to_server.len == 0)
        return MBEDTLS_ERR_SSL_WANT_READ;
    size_t n = len < to_server.len ? len : to_server.len;
    memcpy(buf, to_server.data, n);
    memmove(to_server.data, to_server.data + n, to_server.len - n);
    to_server.len -= n;
    return (int)n;
}

static int certs_usable(void)
{
    mbedtls_x509_crt crt;
    mbedtls_x509_crt_init(&crt);
    int rc = mbedtls_x509_crt_parse(&crt, (const unsigned char *)mbedtls_test_srv_crt,
                                    mbedtls_test_srv_crt_len);
    int ok = rc == 0 && !mbedtls_x509_time_is_past(&crt.valid_to);
    mbedtls_x509_crt_free(&crt);
    return ok;
}

static void server_setup(server_cfg_t *s)
{
    memset(s, 0, sizeof(*s));
    mbedtls_ssl_config_init(&s->conf);
    mbedtls_x509_crt_init(&s->crt);
    mbedtls_pk_init(&s->key);
    mbedtls_entropy_init(&s->entropy);
    mbedtls_ctr_drbg_init(&s->drbg);
    mbedtls_ssl_ticket_init(&s->ticket);
    ASSERT_OK(mbedtls_ctr_drbg_seed(&s->drbg, mbedtls_entropy_func, &s->entropy, NULL, 0));
    ASSERT_OK(mbedtls_x509_crt_parse(&s->crt, (const unsigned char *)mbedtls_test_srv_crt,
                                     mbedtls_test_srv_crt_len));
    ASSERT_OK(mbedtls_pk_parse_key(&s->key, (const unsigned char *)mbedtls_test_srv_key,
                                   mbedtls_test_srv_key_len, NULL, 0));
    ASSERT_OK(mbedtls_ssl_config_defaults(&s->conf, MBEDTLS_SSL_IS_SERVER,
                                          MBEDTLS_SSL_TRANSPORT_STREAM,
                                          MBEDTLS_SSL_PRESET_DEFAULT));
    mbedtls_ssl_conf_rng(&s->conf, mbedtls_ctr_drbg_random, &s->drbg);
    ASSERT_OK(mbedtls_ssl_conf_own_cert(&s->conf, &s->crt, &s->key));
    ASSERT_OK(mbedtls_ssl_ticket_setup(&s->ticket, mbedtls_ctr_drbg_random, &s->drbg,
                                       MBEDTLS_CIPHER_AES_256_GCM, 3600));
    mbedtls_ssl_conf_session_tickets_cb(&s->conf, mbedtls_ssl_ticket_write,
                                        mbedtls_ssl_ticket_parse, &s->ticket);
}

static void server_free(server_cfg_t *s)
{
    mbedtls_ssl_ticket_free(&s->ticket);
    mbedtls_ssl_config_free(&s->conf);
    mbedtls_x509_crt_free(&s->crt);
    mbedtls_pk_free(&s->key);
    mbedtls_ctr_drbg_free(&s->drbg);
    mbedtls_entropy_free(&s->entropy);
}

static char ca_path[64];

static void write_file(const char *path, const char *pem)
{
    FILE *f = fopen(path, "w");
    ASSERT_NOT_NULL(f);
    fputs(pem, f);
    fclose(f);
}

static hv_tls_ctx_t *client_ctx(const char *pem)
{
    char err[256];
    hv_tls_ctx_t *ctx = NULL;
    snprintf(ca_path, sizeof(ca_path), "/tmp/hv-test-ca-%d.pem", (int)getpid());
    write_file(ca_path, pem);
    int rc = hv_tls_ctx_new(ca_path, 0, &ctx, err, sizeof(err));
    unlink(ca_path);
    ASSERT_OK(rc);
    return ctx;
}

/* Move client output to the server, `step` bytes at a time at most. */
static void client_to_server(hv_tls_t *c, size_t step)
{
    const char *p;
    size_t len;
    hv_tls_out(c, &p, &len);
    (void)step;
    ASSERT(to_server.len + len <= sizeof(to_server.data));
    memcpy(to_server.data + to_server.len, p, len);
    to_server.len += len;
    hv_tls_out_clear(c);
}

/* Run both handshakes to the end; returns the client's final result. */
static int handshake(hv_tls_t *c, mbedtls_ssl_context *srv)
{
    int crc = 1, src = MBEDTLS_ERR_SSL_WANT_READ;
    for (int round = 0; round < 200; round++) {
        if (crc == 1)
            crc = hv_tls_handshake(c);
        client_to_server(c, 0);
        if (src == MBEDTLS_ERR_SSL_WANT_READ || src == MBEDTLS_ERR_SSL_WANT_WRITE)
            src = mbedtls_ssl_handshake(srv);
        if (crc != 1 && src != MBEDTLS_ERR_SSL_WANT_READ && src != MBEDTLS_ERR_SSL_WANT_WRITE)
            break;
        if (crc < 0)
            break;
    }
    return crc;
}

static void server_session(server_cfg_t *s, mbedtls_ssl_context *srv, hv_tls_t *c)
{
    to_server.len = 0;
    mbedtls_ssl_init(srv);
    ASSERT_OK(mbedtls_ssl_setup(srv, &s->conf));
    mbedtls_ssl_set_bio(srv, c, srv_send, srv_recv, NULL);
}

TEST_IMPL(tls_handshake_and_data_both_ways)
{
    if (!certs_usable())
        RETURN_SKIP("the mbedtls test certificates are unusable (expired?)");
    server_cfg_t s;
    mbedtls_ssl_context srv;
    server_setup(&s);
    hv_tls_ctx_t *ctx = client_ctx(mbedtls_test_cas_pem);
    hv_tls_t *c = hv_tls_new(ctx, "localhost", 0, "localhost:443");
    server_session(&s, &srv, c);

    ASSERT_EQ(0, handshake(c, &srv));
    ASSERT_EQ(1, hv_tls_ctx_stats(ctx)->handshakes);
    ASSERT_EQ(0, hv_tls_ctx_stats(ctx)->resumed);

    ASSERT_OK(hv_tls_write(c, "GET / HTTP/1.1\r\n\r\n", 18));
    client_to_server(c, 0);
    unsigned char got[64];
    ASSERT_EQ(18, mbedtls_ssl_read(&srv, got, sizeof(got)));
    ASSERT_MEM_EQ("GET / HTTP/1.1\r\n\r\n", got, 18);

    /* 40 KB from the server: several records, read back through small buffers. */
    static unsigned char big[40000];
    for (size_t i = 0; i < sizeof(big); i++)
        big[i] = (unsigned char)(i * 7);
    size_t sent = 0, recvd = 0;
    static char back[sizeof(big)];
    while (recvd < sizeof(big)) {
        if (sent < sizeof(big)) {
            int n = mbedtls_ssl_write(&srv, big + sent, sizeof(big) - sent);
            if (n > 0)
                sent += (size_t)n;
        }
        ssize_t r;
        while ((r = hv_tls_read(c, back + recvd, 1000)) > 0)
            recvd += (size_t)r;
        ASSERT_GE(r, 0);
    }
    ASSERT_MEM_EQ(big, back, sizeof(big));
    ASSERT_EQ(0, hv_tls_has_buffered(c));

    /* close_notify is a clean end of stream */
    mbedtls_ssl_close_notify(&srv);
    ASSERT_EQ(UV_EOF, hv_tls_read(c, back, sizeof(back)));

    hv_tls_free(c);
    mbedtls_ssl_free(&srv);
    hv_tls_ctx_free(ctx);
    server_free(&s);
}

/* A session offered and refused (the server no longer takes tickets) is a full handshake,
 * not a resumption. */
TEST_IMPL(tls_a_refused_session_counts_as_a_full_handshake)
{
    if (!certs_usable())
        RETURN_SKIP("the mbedtls test certificates are unusable (expired?)");
    server_cfg_t s;
    mbedtls_ssl_context srv;
    server_setup(&s);
    hv_tls_ctx_t *ctx = client_ctx(mbedtls_test_cas_pem);

    for (int i = 0; i < 2; i++) {
        if (i == 1) /* the ticket from the first handshake is offered; the server ignores it */
            mbedtls_ssl_conf_session_tickets_cb(&s.conf, NULL, NULL, NULL);
        hv_tls_t *c = hv_tls_new(ctx, "localhost", 0, "localhost:443");
        server_session(&s, &srv, c);
        ASSERT_EQ(0, handshake(c, &srv));
        hv_tls_free(c);
        mbedtls_ssl_free(&srv);
    }
    ASSERT_EQ(2, hv_tls_ctx_stats(ctx)->handshakes);
    ASSERT_EQ(0, hv_tls_ctx_stats(ctx)->resumed);
    hv_tls_ctx_free(ctx);
    server_free(&s);
}

TEST_IMPL(tls_session_is_resumed_on_the_next_connection)
{
    if (!certs_usable())
        RETURN_SKIP("the mbedtls test certificates are unusable (expired?)");
    server_cfg_t s;
    mbedtls_ssl_context srv;
    server_setup(&s);
    hv_tls_ctx_t *ctx = client_ctx(mbedtls_test_cas_pem);

    for (int i = 0; i < 3; i++) {
        hv_tls_t *c = hv_tls_new(ctx, "localhost", 0, "localhost:443");
        server_session(&s, &srv, c);
        ASSERT_EQ(0, handshake(c, &srv));
        hv_tls_free(c);
        mbedtls_ssl_free(&srv);
    }
    ASSERT_EQ(1, hv_tls_ctx_stats(ctx)->handshakes);
    ASSERT_EQ(2, hv_tls_ctx_stats(ctx)->resumed);

    /* Another key (another host:port) does not reuse the session. */
    hv_tls_t *c = hv_tls_new(ctx, "localhost", 0, "localhost:8443");
    server_session(&s, &srv, c);
    ASSERT_EQ(0, handshake(c, &srv));
    ASSERT_EQ(2, hv_tls_ctx_stats(ctx)->handshakes);
    hv_tls_free(c);
    mbedtls_ssl_free(&srv);
    hv_tls_ctx_free(ctx);
    server_free(&s);
}

static void count_session(void *ud, const char *key)
{
    (void)key;
    (*(int *)ud)++;
}

TEST_IMPL(tls_session_exported_resumes_in_another_context)
{
    if (!certs_usable())
        RETURN_SKIP("the mbedtls test certificates are unusable (expired?)");
    server_cfg_t s;
    mbedtls_ssl_context srv;
    server_setup(&s);
    hv_tls_ctx_t *a = client_ctx(mbedtls_test_cas_pem);
    int saved = 0;
    hv_tls_ctx_on_session(a, count_session, &saved);
    hv_tls_t *c = hv_tls_new(a, "localhost", 0, "localhost:443");
    server_session(&s, &srv, c);
    ASSERT_EQ(0, handshake(c, &srv));
    hv_tls_free(c);
    mbedtls_ssl_free(&srv);
    ASSERT_EQ(1, saved);
    unsigned char blob[8192];
    ASSERT_EQ(0, hv_tls_session_export(a, "localhost:8443", blob, sizeof(blob)));
    ASSERT_EQ(UV_ENOBUFS, hv_tls_session_export(a, "localhost:443", blob, 16));
    ssize_t n = hv_tls_session_export(a, "localhost:443", blob, sizeof(blob));
    ASSERT(n > 0);
    hv_tls_ctx_free(a);

    /* A new context (the next run) with the session imported resumes it. */
    hv_tls_ctx_t *b = client_ctx(mbedtls_test_cas_pem);
    ASSERT_EQ(UV_EINVAL, hv_tls_session_import(b, "localhost:443", blob, (size_t)n / 2));
    ASSERT(!hv_tls_session_has(b, "localhost:443"));
    ASSERT_EQ(0, hv_tls_session_import(b, "localhost:443", blob, (size_t)n));
    ASSERT(hv_tls_session_has(b, "localhost:443"));
    c = hv_tls_new(b, "localhost", 0, "localhost:443");
    server_session(&s, &srv, c);
    ASSERT_EQ(0, handshake(c, &srv));
    ASSERT_EQ(0, hv_tls_ctx_stats(b)->handshakes);
    ASSERT_EQ(1, hv_tls_ctx_stats(b)->resumed);
    hv_tls_free(c);
    mbedtls_ssl_free(&srv);
    hv_tls_ctx_free(b);
    server_free(&s);
}

/* ---- sessions kept in the re-crawl store (recrawl.h) ---- */

typedef struct {
    uv_loop_t loop;
    hv_config_t cfg;
    hv_recrawl_t *rc;
    int closed;
} store_run_t;

static void store_run_open(store_run_t *r, hv_tls_ctx_t *ctx)
{
    char err[1024];
    memset(r, 0, sizeof(*r));
    ASSERT_OK(uv_loop_init(&r->loop));
    hv_config_defaults(&r->cfg);
    snprintf(r->cfg.state_dir, sizeof(r->cfg.state_dir), "%s", hv_test_tmppath("tls-state"));
    r->cfg.state_max_bytes = 16 << 20;
    ASSERT_OK(hv_recrawl_open(&r->loop, &r->cfg, &r->rc, err, sizeof(err)));
    hv_recrawl_use_tls(r->rc, ctx);
}

static void on_store_closed(void *ud)
{
    ((store_run_t *)ud)->closed = 1;
}

static void store_run_close(store_run_t *r, hv_recrawl_stats_t *st)
{
    /* What waits for a commit is committed (the commit timer, then the threadpool). */
    uv_run(&r->loop, UV_RUN_DEFAULT);
    hv_recrawl_stats(r->rc, st);
    hv_recrawl_close(r->rc, on_store_closed, r);
    uv_run(&r->loop, UV_RUN_DEFAULT);
    ASSERT_EQ(1, r->closed);
    hv_config_free(&r->cfg);
    ASSERT_LOOP_CLOSE(&r->loop);
}

/* One connection of `ctx` to localhost:443 against `s`: whether it was resumed. */
static int connect_once(server_cfg_t *s, hv_tls_ctx_t *ctx)
{
    mbedtls_ssl_context srv;
    uint64_t before = hv_tls_ctx_stats(ctx)->resumed;
    hv_tls_t *c = hv_tls_new(ctx, "localhost", 0, "localhost:443");
    server_session(s, &srv, c);
    ASSERT_EQ(0, handshake(c, &srv));
    hv_tls_free(c);
    mbedtls_ssl_free(&srv);
    return hv_tls_ctx_stats(ctx)->resumed > before;
}

TEST_IMPL(tls_session_kept_in_the_store_resumes_in_the_next_run)
{
    if (!certs_usable())
        RETURN_SKIP("the mbedtls test certificates are unusable (expired?)");
    server_cfg_t s;
    store_run_t r;
    hv_recrawl_stats_t st;
    server_setup(&s);

    /* First run: a full handshake; its session goes to the store when the store closes. */
    hv_tls_ctx_t *a = client_ctx(mbedtls_test_cas_pem);
    store_run_open(&r, a);
    ASSERT_EQ(0, connect_once(&s, a));
    ASSERT_EQ(1, connect_once(&s, a)); /* in memory: not saved again (the same session) */
    store_run_close(&r, &st);
    ASSERT_EQ(0, st.tls_sessions_loaded);
    ASSERT_EQ(1, st.tls_sessions_stored);
    hv_tls_ctx_free(a);

    /* Second run, a new context: the first connection resumes the stored session. */
    hv_tls_ctx_t *b = client_ctx(mbedtls_test_cas_pem);
    store_run_open(&r, b);
    ASSERT_EQ(1, connect_once(&s, b));
    store_run_close(&r, &st);
    ASSERT_EQ(1, st.tls_sessions_loaded);
    ASSERT_EQ(1, st.tls_sessions);
    ASSERT_EQ(0, hv_tls_ctx_stats(b)->handshakes);
    uint64_t verified = hv_tls_ctx_trust(b);
    hv_tls_ctx_free(b);

    /* Verification off: another trust, so the session is not offered. */
    char err[256];
    hv_tls_ctx_t *c = NULL;
    ASSERT_OK(hv_tls_ctx_new(NULL, 1, &c, err, sizeof(err)));
    ASSERT(hv_tls_ctx_trust(c) != verified);
    store_run_open(&r, c);
    ASSERT_EQ(0, connect_once(&s, c));
    store_run_close(&r, &st);
    ASSERT_EQ(0, st.tls_sessions_loaded);
    hv_tls_ctx_free(c);
    server_free(&s);
}

TEST_IMPL(tls_damaged_session_in_the_store_means_a_full_handshake)
{
    if (!certs_usable())
        RETURN_SKIP("the mbedtls test certificates are unusable (expired?)");
    server_cfg_t s;
    store_run_t r;
    hv_recrawl_stats_t st;
    hv_store_t *store;
    char err[1024];
    unsigned char junk[700];
    server_setup(&s);
    hv_tls_ctx_t *a = client_ctx(mbedtls_test_cas_pem);
    for (size_t i = 0; i < sizeof(junk); i++)
        junk[i] = (unsigned char)(i * 31 + 5);
    int64_t now = hv_now_unix_ms();
    hv_store_session_t bad = {"localhost:443", junk, sizeof(junk), now, now + 60000,
                              hv_tls_ctx_trust(a)};
    ASSERT_OK(hv_store_open(hv_test_tmppath("tls-state"), 16 << 20, &store, err, sizeof(err)));
    ASSERT_OK(hv_store_sessions_put(store, &bad, 1, now, 16, NULL));
    hv_store_close(store);

    store_run_open(&r, a);
    ASSERT_EQ(0, connect_once(&s, a)); /* dropped at import: a full handshake */
    ASSERT_EQ(1, connect_once(&s, a));
    store_run_close(&r, &st);
    ASSERT_EQ(0, st.tls_sessions_loaded);
    ASSERT_EQ(1, st.tls_sessions_stored); /* the good one replaced it */
    ASSERT_EQ(1, hv_tls_ctx_stats(a)->handshakes);
    hv_tls_ctx_free(a);
    server_free(&s);
}

TEST_IMPL(tls_hostname_mismatch)
{
    if (!certs_usable())
        RETURN_SKIP("the mbedtls test certificates are unusable (expired?)");
    server_cfg_t s;
    mbedtls_ssl_context srv;
    server_setup(&s);
    hv_tls_ctx_t *ctx = client_ctx(mbedtls_test_cas_pem);
    hv_tls_t *c = hv_tls_new(ctx, "example.org", 0, "example.org:443");
    server_session(&s, &srv, c);
    ASSERT_EQ(HV_ECERT, handshake(c, &srv));
    ASSERT_STR_EQ("certificate_hostname_mismatch", hv_tls_error(c));
    hv_tls_free(c);
    mbedtls_ssl_free(&srv);
    hv_tls_ctx_free(ctx);
    server_free(&s);
}

/* One handshake of `ctx` with the test server, as `host` under session key `key` (a key of
 * its own each time: no resumption), returning hv_tls_handshake()'s result and the error. */
static int handshake_as(server_cfg_t *s, hv_tls_ctx_t *ctx, const char *host, int is_ip,
                        const char *key, char *error, size_t cap)
{
    mbedtls_ssl_context srv;
    hv_tls_t *c = hv_tls_new(ctx, host, is_ip, key);
    server_session(s, &srv, c);
    int rc = handshake(c, &srv);
    snprintf(error, cap, "%s", hv_tls_error(c));
    hv_tls_free(c);
    mbedtls_ssl_free(&srv);
    return rc;
}

TEST_IMPL(tls_verified_chain_is_cached_per_certificate_and_host)
{
    if (!certs_usable())
        RETURN_SKIP("the mbedtls test certificates are unusable (expired?)");
    server_cfg_t s;
    server_setup(&s);
    hv_tls_ctx_t *ctx = client_ctx(mbedtls_test_cas_pem);
    const hv_tls_stats_t *st = hv_tls_ctx_stats(ctx);
    char err[64];
    ASSERT_EQ(0, handshake_as(&s, ctx, "localhost", 0, "k1", err, sizeof(err)));
    ASSERT_EQ(1, st->chains_verified);
    ASSERT_EQ(0, st->chains_cached);
    /* The same certificate for the same name: no signature of the chain checked again. */
    ASSERT_EQ(0, handshake_as(&s, ctx, "localhost", 0, "k2", err, sizeof(err)));
    ASSERT_EQ(1, st->chains_verified);
    ASSERT_EQ(1, st->chains_cached);
    ASSERT_EQ(2, st->handshakes);
    /* The cache never stands for the name: another one is checked, and refused. */
    ASSERT_EQ(HV_ECERT, handshake_as(&s, ctx, "example.org", 0, "k3", err, sizeof(err)));
    ASSERT_STR_EQ("certificate_hostname_mismatch", err);
    ASSERT_EQ(HV_ECERT, handshake_as(&s, ctx, "127.0.0.1", 1, "k4", err, sizeof(err)));
    ASSERT_STR_EQ("certificate_hostname_mismatch", err);
    ASSERT_EQ(HV_ECERT, handshake_as(&s, ctx, "LOCALHOST.example", 0, "k5", err, sizeof(err)));
    ASSERT_EQ(1, st->chains_cached);
    /* ... nor for the trust store: another context, trusting nothing of it, refuses it. */
    hv_tls_ctx_t *other = client_ctx(mbedtls_test_srv_crt_ec);
    ASSERT_EQ(HV_ECERT, handshake_as(&s, other, "localhost", 0, "k1", err, sizeof(err)));
    ASSERT_STR_EQ("certificate_untrusted", err);
    hv_tls_ctx_free(other);
    hv_tls_ctx_free(ctx);
    server_free(&s);
}

TEST_IMPL(tls_ip_literal_needs_an_ip_san)
{
    if (!certs_usable())
        RETURN_SKIP("the mbedtls test certificates are unusable (expired?)");
    server_cfg_t s;
    mbedtls_ssl_context srv;
    server_setup(&s);
    hv_tls_ctx_t *ctx = client_ctx(mbedtls_test_cas_pem);
    /* The test certificate names "localhost" only: an IP literal must not match it. */
    hv_tls_t *c = hv_tls_new(ctx, "127.0.0.1", 1, "127.0.0.1:443");
    server_session(&s, &srv, c);
    ASSERT_EQ(HV_ECERT, handshake(c, &srv));
    ASSERT_STR_EQ("certificate_hostname_mismatch", hv_tls_error(c));
    hv_tls_free(c);
    mbedtls_ssl_free(&srv);
    hv_tls_ctx_free(ctx);
    server_free(&s);
}

TEST_IMPL(tls_untrusted_issuer)
{
    if (!certs_usable())
        RETURN_SKIP("the mbedtls test certificates are unusable (expired?)");
    server_cfg_t s;
    mbedtls_ssl_context srv;
    server_setup(&s);
    /* Trust only the server certificate's own text as if it were a CA: its issuer is
     * unknown, so the chain does not verify. */
    hv_tls_ctx_t *ctx = client_ctx(mbedtls_test_srv_crt);
    hv_tls_t *c = hv_tls_new(ctx, "localhost", 0, "localhost:443");
    server_session(&s, &srv, c);
    ASSERT_EQ(HV_ECERT, handshake(c, &srv));
    ASSERT_STR_EQ("certificate_untrusted", hv_tls_error(c));
    ASSERT_EQ(1, hv_tls_ctx_stats(ctx)->failures);
    hv_tls_free(c);
    mbedtls_ssl_free(&srv);
    hv_tls_ctx_free(ctx);
    server_free(&s);
}

TEST_IMPL(tls_garbage_from_server_is_tls_error)
{
    hv_tls_ctx_t *ctx = client_ctx(mbedtls_test_cas_pem);
    hv_tls_t *c = hv_tls_new(ctx, "localhost", 0, "localhost:443");
    ASSERT_EQ(1, hv_tls_handshake(c));
    char *space;
    size_t room;
    hv_tls_in_space(c, &space, &room);
    const char *junk = "HTTP/1.1 400 Bad Request\r\n\r\n";
    memcpy(space, junk, strlen(junk));
    hv_tls_in_commit(c, strlen(junk));
    ASSERT_EQ(HV_ETLS, hv_tls_handshake(c));
    ASSERT(strncmp(hv_tls_error(c), "tls_", 4) == 0);
    hv_tls_free(c);
    hv_tls_ctx_free(ctx);
}

TEST_IMPL(tls_ctx_reports_unreadable_ca_file)
{
    char err[256];
    hv_tls_ctx_t *ctx = NULL;
    ASSERT(hv_tls_ctx_new("/nonexistent/ca.pem", 0, &ctx, err, sizeof(err)) != 0);
    ASSERT_NULL(ctx);
    ASSERT(strstr(err, "/nonexistent/ca.pem") != NULL);
}
