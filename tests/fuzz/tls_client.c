/*
 * tls_client: our TLS client session (tls.h) fed arbitrary server bytes through its memory
 * buffers, as conn.c feeds it socket reads.
 *
 * Input: one flags byte, then what "the server" sends, all of it (every flight, then
 * application data), handed over in pieces as reads would bring them.
 *   bit 0      verify against the mbedtls test CA (else --insecure: no verification)
 *   bits 1-2   the host: "localhost", "127.0.0.1", "::1" (IP literals: no SNI, iPAddress
 *              check) or "example.org" (a name the test certificates do not carry)
 *   bits 3-5   the size of each read, from a table (the whole input at once ... 1 byte)
 * The client handshakes, discarding what it sends; once the handshake is done it writes a
 * request and reads until the stream ends or fails. Every failure must carry a detail.
 *
 * To make an input replayable byte for byte, the client is deterministic: the context's
 * random generator is replaced by a counter (tls.c is included to reach the context) and
 * time() is fixed while a session runs (mbedtls puts the time into the ClientHello random).
 * A recorded real handshake then completes on replay: the seeds in corpus/tls_client/ were
 * recorded against an in-memory mbedtls server with `make fuzz-tls-seeds` (this file built
 * with -DHV_FUZZ_RECORD), one per server setup (cipher suites, certificate type, session
 * tickets), so that the fuzzer starts from inputs that reach application data.
 */
#include "../../src/tls.c"

#include <mbedtls/certs.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "fuzz.h"

/* 2022-06-01T00:00:00Z: every mbedtls test certificate used here is valid then. */
#define FIXED_TIME 1654041600

static int clock_fixed;

/* mbedtls calls time() for the ClientHello random and for certificate dates. */
time_t time(time_t *out)
{
    struct timespec ts;
    time_t now = FIXED_TIME;
    if (!clock_fixed) {
        clock_gettime(CLOCK_REALTIME, &ts);
        now = ts.tv_sec;
    }
    if (out != NULL)
        *out = now;
    return now;
}

static uint64_t rng_state;

/* A counter through splitmix64: deterministic, and different bytes at every call. */
static int fuzz_rng(void *unused, unsigned char *out, size_t len)
{
    (void)unused;
    while (len > 0) {
        uint64_t z = (rng_state += UINT64_C(0x9E3779B97F4A7C15));
        z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
        z ^= z >> 31;
        size_t n = HV_MIN(len, sizeof(z));
        memcpy(out, &z, n);
        out += n;
        len -= n;
    }
    return 0;
}

static hv_tls_ctx_t *ctx_insecure, *ctx_ca;

static const struct {
    const char *name;
    int is_ip;
} hosts[4] = {{"localhost", 0}, {"127.0.0.1", 1}, {"::1", 1}, {"example.org", 0}};

static const size_t read_sizes[8] = {(size_t)-1, 16384, 5000, 1000, 256, 64, 7, 1};

static hv_tls_ctx_t *make_ctx(int insecure)
{
    char err[256], path[64];
    int fd = -1;
    hv_tls_ctx_t *ctx = NULL;
    if (!insecure) {
        fd = memfd_create("harvestd-fuzz-ca", 0);
        if (fd < 0 || write(fd, mbedtls_test_cas_pem, mbedtls_test_cas_pem_len - 1) < 0)
            abort();
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    }
    if (hv_tls_ctx_new(insecure ? NULL : path, insecure, &ctx, err, sizeof(err)) != 0) {
        fprintf(stderr, "tls_client: %s\n", err);
        abort();
    }
    if (fd >= 0)
        close(fd);
    mbedtls_ssl_conf_rng(&ctx->conf, fuzz_rng, NULL);
    return ctx;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    ctx_insecure = make_ctx(1);
    ctx_ca = make_ctx(0);
    return 0;
}

/* Inputs stay independent: no session is offered for resumption from a previous one. */
static void forget_sessions(hv_tls_ctx_t *ctx)
{
    session_t *s, *tmp;
    HASH_ITER(hh, ctx->sessions, s, tmp)
    {
        session_drop(ctx, s);
    }
}

typedef struct {
    const uint8_t *p;
    size_t left;
    size_t step;
} feed_t;

/* One "socket read" into the session; 0 when there is nothing left to read (or no room). */
static int feed_more(hv_tls_t *t, feed_t *f)
{
    char *space;
    size_t room;
    if (f->left == 0)
        return 0;
    hv_tls_in_space(t, &space, &room);
    size_t n = HV_MIN(HV_MIN(room, f->left), f->step);
    if (n == 0)
        return 0;
    memcpy(space, f->p, n);
    hv_tls_in_commit(t, n);
    f->p += n;
    f->left -= n;
    return 1;
}

static void check_failure(const hv_tls_t *t, const char *when)
{
    FUZZ_CHECK(hv_tls_error(t)[0] != '\0', "%s failed without a detail", when);
    FUZZ_CHECK(hv_tls_fault(t)->code != HV_D_NONE, "%s failed without a code", when);
}

/* Results of one session, for the recorder's check. */
static int last_handshake_done;
static size_t last_plaintext;
static int last_clean_eof;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input_t in = {data, size};
    uint8_t flags = fuzz_byte(&in);
    hv_tls_ctx_t *ctx = (flags & 1) ? ctx_ca : ctx_insecure;
    size_t h = (flags >> 1) & 3;
    feed_t f = {in.p, in.left, read_sizes[(flags >> 3) & 7]};
    char buf[20000];

    last_handshake_done = 0;
    last_plaintext = 0;
    last_clean_eof = 0;
    rng_state = 0;
    clock_fixed = 1;
    hv_tls_t *t = hv_tls_new(ctx, hosts[h].name, hosts[h].is_ip, "fuzz:443");

    int rc;
    for (;;) {
        rc = hv_tls_handshake(t);
        hv_tls_out_clear(t); /* "sent" */
        if (rc != 1)
            break;
        if (!feed_more(t, &f)) {
            /* The server went quiet or closed: what conn.c does then. */
            hv_tls_count_failure(t);
            break;
        }
    }
    if (rc < 0) {
        FUZZ_CHECK(rc == HV_ETLS || rc == HV_ECERT, "handshake: %d", rc);
        check_failure(t, "the handshake");
        if (rc == HV_ECERT)
            FUZZ_CHECK((flags & 1) != 0, "a certificate error with verification off");
    }
    if (rc == 0) {
        last_handshake_done = 1;
        FUZZ_CHECK(hv_tls_handshake(t) == 0, "a done handshake is not done");
        static const char req[] = "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n";
        rc = hv_tls_write(t, req, sizeof(req) - 1);
        FUZZ_CHECK(rc == 0, "write: %d (%s)", rc, hv_tls_error(t));
        const char *out;
        size_t out_len;
        hv_tls_out(t, &out, &out_len);
        FUZZ_CHECK(out_len > sizeof(req) - 1, "request not encrypted into the output");
        hv_tls_out_clear(t);
        size_t cap = 1;
        for (int rounds = 0; rounds < 100000; rounds++) {
            /* Reads of changing sizes, as the connection's buffer fills and drains. */
            cap = cap * 7 % sizeof(buf) + 1;
            ssize_t n = hv_tls_read(t, buf, cap);
            hv_tls_out_clear(t);
            if (n > 0) {
                FUZZ_CHECK((size_t)n <= cap, "read %zd into %zu", n, cap);
                last_plaintext += (size_t)n;
                continue;
            }
            if (n == UV_EOF) {
                last_clean_eof = 1;
                break;
            }
            if (n < 0) {
                FUZZ_CHECK(n == HV_ETLS, "read: %zd", n);
                check_failure(t, "a read");
                break;
            }
            if (hv_tls_has_buffered(t))
                continue;
            if (!feed_more(t, &f))
                break;
        }
    }
    hv_tls_free(t);
    clock_fixed = 0;
    forget_sessions(ctx);
    return 0;
}

#ifdef HV_FUZZ_RECORD
/*
 * The recorder: `tls_client-record DIR` runs our client (as above) against an mbedtls server
 * in memory for each setup below, records every byte the server sends, and writes
 * DIR/record-<setup> = flags byte + those bytes. Each file is then replayed through
 * LLVMFuzzerTestOneInput() and must complete the handshake and read the whole response.
 */
#include <mbedtls/dhm.h>
#include <mbedtls/ssl_ticket.h>

static hv_buf_t recorded;
static hv_buf_t to_server;

static int srv_send(void *p, const unsigned char *b, size_t len)
{
    hv_tls_t *client = p;
    char *space;
    size_t room;
    hv_tls_in_space(client, &space, &room);
    if (room == 0)
        return MBEDTLS_ERR_SSL_WANT_WRITE;
    size_t n = HV_MIN(len, room);
    memcpy(space, b, n);
    hv_tls_in_commit(client, n);
    hv_buf_append(&recorded, b, n);
    return (int)n;
}

static int srv_recv(void *p, unsigned char *b, size_t len)
{
    (void)p;
    if (to_server.len == 0)
        return MBEDTLS_ERR_SSL_WANT_READ;
    size_t n = HV_MIN(len, to_server.len);
    memcpy(b, to_server.data, n);
    memmove(to_server.data, to_server.data + n, to_server.len - n);
    to_server.len -= n;
    return (int)n;
}

static void client_to_server(hv_tls_t *c)
{
    const char *p;
    size_t len;
    hv_tls_out(c, &p, &len);
    hv_buf_append(&to_server, p, len);
    hv_tls_out_clear(c);
}

typedef struct {
    const char *name;
    uint8_t flags;
    int ec_cert;
    int tickets;
    int suite; /* 0: the server's preference */
} setup_t;

static int must(int rc, const char *what)
{
    if (rc != 0) {
        fprintf(stderr, "tls_client-record: %s: -0x%04x\n", what, (unsigned)-rc);
        exit(1);
    }
    return rc;
}

static void record(const char *dir, const setup_t *st)
{
    mbedtls_ssl_config conf;
    mbedtls_x509_crt crt;
    mbedtls_pk_context key;
    mbedtls_ssl_ticket_context ticket;
    mbedtls_ssl_context srv;
    int suites[2] = {st->suite, 0};
    static const unsigned char dhm_p[] = MBEDTLS_DHM_RFC3526_MODP_2048_P_BIN;
    static const unsigned char dhm_g[] = MBEDTLS_DHM_RFC3526_MODP_2048_G_BIN;

    mbedtls_ssl_config_init(&conf);
    mbedtls_x509_crt_init(&crt);
    mbedtls_pk_init(&key);
    mbedtls_ssl_ticket_init(&ticket);
    mbedtls_ssl_init(&srv);
    if (st->ec_cert) {
        must(mbedtls_x509_crt_parse(&crt, (const unsigned char *)mbedtls_test_srv_crt_ec,
                                    mbedtls_test_srv_crt_ec_len),
             "EC certificate");
        must(mbedtls_pk_parse_key(&key, (const unsigned char *)mbedtls_test_srv_key_ec,
                                  mbedtls_test_srv_key_ec_len, NULL, 0),
             "EC key");
    } else {
        must(mbedtls_x509_crt_parse(&crt, (const unsigned char *)mbedtls_test_srv_crt,
                                    mbedtls_test_srv_crt_len),
             "RSA certificate");
        must(mbedtls_pk_parse_key(&key, (const unsigned char *)mbedtls_test_srv_key,
                                  mbedtls_test_srv_key_len, NULL, 0),
             "RSA key");
    }
    must(mbedtls_ssl_config_defaults(&conf, MBEDTLS_SSL_IS_SERVER, MBEDTLS_SSL_TRANSPORT_STREAM,
                                     MBEDTLS_SSL_PRESET_DEFAULT),
         "server defaults");
    /* The server's randomness is recorded with its bytes: any generator will do. */
    mbedtls_ssl_conf_rng(&conf, fuzz_rng, NULL);
    must(mbedtls_ssl_conf_own_cert(&conf, &crt, &key), "own certificate");
    must(mbedtls_ssl_conf_dh_param_bin(&conf, dhm_p, sizeof(dhm_p), dhm_g, sizeof(dhm_g)),
         "DH parameters");
    if (st->suite != 0)
        mbedtls_ssl_conf_ciphersuites(&conf, suites);
    if (st->tickets) {
        must(mbedtls_ssl_ticket_setup(&ticket, fuzz_rng, NULL, MBEDTLS_CIPHER_AES_256_GCM, 3600),
             "tickets");
        mbedtls_ssl_conf_session_tickets_cb(&conf, mbedtls_ssl_ticket_write,
                                            mbedtls_ssl_ticket_parse, &ticket);
    }
    must(mbedtls_ssl_setup(&srv, &conf), "server session");

    hv_tls_ctx_t *ctx = (st->flags & 1) ? ctx_ca : ctx_insecure;
    size_t h = (st->flags >> 1) & 3;
    hv_buf_init(&recorded, SIZE_MAX);
    hv_buf_init(&to_server, SIZE_MAX);

    /* The client exactly as LLVMFuzzerTestOneInput() drives it. */
    rng_state = 0;
    clock_fixed = 1;
    hv_tls_t *c = hv_tls_new(ctx, hosts[h].name, hosts[h].is_ip, "fuzz:443");
    mbedtls_ssl_set_bio(&srv, c, srv_send, srv_recv, NULL);
    uint64_t client_rng;
    int crc = 1, src = MBEDTLS_ERR_SSL_WANT_READ;
    for (int round = 0; round < 100 && (crc == 1 || src != 0); round++) {
        if (crc == 1)
            crc = hv_tls_handshake(c);
        client_to_server(c);
        /* The server draws from the same generator: keep the client's sequence apart. */
        client_rng = rng_state;
        rng_state = UINT64_C(0x5EED) << 32 | (uint64_t)round;
        if (src == MBEDTLS_ERR_SSL_WANT_READ || src == MBEDTLS_ERR_SSL_WANT_WRITE)
            src = mbedtls_ssl_handshake(&srv);
        rng_state = client_rng;
        if (crc < 0 || (src < 0 && src != MBEDTLS_ERR_SSL_WANT_READ &&
                        src != MBEDTLS_ERR_SSL_WANT_WRITE)) {
            fprintf(stderr, "tls_client-record: %s: handshake failed: client %d (%s), server -0x%04x\n",
                    st->name, crc, hv_tls_error(c), (unsigned)-src);
            exit(1);
        }
    }
    static const char req[] = "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n";
    must(hv_tls_write(c, req, sizeof(req) - 1), "client write");
    client_to_server(c);
    unsigned char got[256];
    client_rng = rng_state;
    rng_state = UINT64_C(0x5EED) << 40;
    int n = mbedtls_ssl_read(&srv, got, sizeof(got));
    if (n != (int)sizeof(req) - 1) {
        fprintf(stderr, "tls_client-record: %s: server read %d\n", st->name, n);
        exit(1);
    }
    static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 30\r\n"
                               "\r\n<title>recorded</title>hello!";
    must(mbedtls_ssl_write(&srv, (const unsigned char *)resp, sizeof(resp) - 1) ==
                 (int)sizeof(resp) - 1
             ? 0
             : -1,
         "server write");
    mbedtls_ssl_close_notify(&srv);
    rng_state = client_rng;
    hv_tls_free(c);
    clock_fixed = 0;
    forget_sessions(ctx);

    char path[4096];
    snprintf(path, sizeof(path), "%s/record-%s", dir, st->name);
    FILE *out = fopen(path, "wb");
    if (out == NULL || fwrite(&st->flags, 1, 1, out) != 1 ||
        fwrite(recorded.data, 1, recorded.len, out) != recorded.len || fclose(out) != 0) {
        perror(path);
        exit(1);
    }

    /* The replay must complete the handshake and read the response to its end. */
    hv_buf_t seed;
    hv_buf_init(&seed, SIZE_MAX);
    hv_buf_append(&seed, &st->flags, 1);
    hv_buf_append(&seed, recorded.data, recorded.len);
    LLVMFuzzerTestOneInput((const uint8_t *)seed.data, seed.len);
    printf("%s: %zu bytes, handshake %s, %zu of %zu response bytes, %s\n", path, seed.len,
           last_handshake_done ? "done" : "FAILED", last_plaintext, sizeof(resp) - 1,
           last_clean_eof ? "close_notify" : "no close_notify");
    if (!last_handshake_done || last_plaintext != sizeof(resp) - 1 || !last_clean_eof)
        exit(1);
    hv_buf_free(&seed);
    hv_buf_free(&recorded);
    hv_buf_free(&to_server);
    mbedtls_ssl_free(&srv);
    mbedtls_ssl_ticket_free(&ticket);
    mbedtls_ssl_config_free(&conf);
    mbedtls_x509_crt_free(&crt);
    mbedtls_pk_free(&key);
}

int main(int argc, char **argv)
{
    static const setup_t setups[] = {
        {"ecdhe-rsa-default", 0x00, 0, 0, 0},
        {"ecdhe-rsa-ca-tickets", 0x01, 0, 1, 0},
        {"ecdhe-rsa-aes128-gcm", 0x00 | (3 << 3), 0, 0,
         MBEDTLS_TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256},
        {"ecdhe-rsa-chacha20", 0x01 | (5 << 3), 0, 1,
         MBEDTLS_TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256},
        {"ecdhe-rsa-aes256-cbc", 0x00 | (4 << 3), 0, 0,
         MBEDTLS_TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384},
        {"rsa-aes128-cbc", 0x01, 0, 0, MBEDTLS_TLS_RSA_WITH_AES_128_CBC_SHA256},
        {"dhe-rsa-aes128-gcm", 0x00 | (6 << 3), 0, 0, MBEDTLS_TLS_DHE_RSA_WITH_AES_128_GCM_SHA256},
        {"ecdhe-ecdsa-aes256-gcm", 0x01, 1, 1, MBEDTLS_TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384},
        {"ecdhe-ecdsa-ccm", 0x00 | (2 << 3), 1, 0, MBEDTLS_TLS_ECDHE_ECDSA_WITH_AES_128_CCM},
        {"ip-literal-insecure", 0x02, 0, 0, 0},
    };
    if (argc != 2) {
        fprintf(stderr, "usage: tls_client-record DIR\n");
        return 2;
    }
    LLVMFuzzerInitialize(&argc, &argv);
    for (size_t i = 0; i < HV_ARRAY_SIZE(setups); i++)
        record(argv[1], &setups[i]);
    hv_tls_ctx_free(ctx_insecure);
    hv_tls_ctx_free(ctx_ca);
    return 0;
}
#endif
