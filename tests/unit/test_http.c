/* HTTP response parsing traces: each response is replayed whole, split at every offset and
 * byte by byte, and must give the same outcome every time. */
#include <stdlib.h>
#include <string.h>
#include <brotli/encode.h>
#include <zlib.h>
#include <zstd.h>

#include "harvestd/common.h"
#include "harvestd/http.h"
#include "test.h"

typedef struct {
    int rc;
    int status;
    int keep_alive;
    char content_type[128];
    char location[256];
    char error[64];
    size_t body_len;
    char body[4096];
    int head_calls;
    int64_t retry_after_ms;
    char etag[128];
    char last_modified[64];
    int no_store;
    int64_t max_age_s;
} outcome_t;

static hv_http_body_t mode_for_test = HV_HTTP_BODY_KEEP;

static hv_http_body_t on_head(hv_http_t *h)
{
    int *calls = h->data;
    (*calls)++;
    return mode_for_test;
}

/* Feed `resp` in pieces of at most `step` bytes, after an optional split at `split`. */
static outcome_t run(const char *resp, size_t len, size_t split, size_t step, int eof,
                     uint64_t max_body)
{
    hv_http_limits_t lim = {max_body, 1024, 64, 0};
    hv_http_t h;
    outcome_t o;
    memset(&o, 0, sizeof(o));
    hv_http_init(&h, &lim, on_head, &o.head_calls);
    size_t off = 0;
    int rc = 0;
    while (off < len && rc == 0) {
        size_t n = len - off;
        if (off < split && split < len && n > split - off)
            n = split - off;
        if (n > step)
            n = step;
        rc = hv_http_feed(&h, resp + off, n);
        off += n;
    }
    if (rc == 0 && eof)
        rc = hv_http_eof(&h);
    o.rc = rc;
    o.status = h.status;
    o.keep_alive = h.keep_alive;
    if (h.content_type.len)
        snprintf(o.content_type, sizeof(o.content_type), "%.*s", (int)h.content_type.len,
                 h.content_type.data);
    if (h.location.len)
        snprintf(o.location, sizeof(o.location), "%.*s", (int)h.location.len, h.location.data);
    hv_detail_format(o.error, sizeof(o.error), h.fault.code, h.fault.arg);
    o.retry_after_ms = hv_http_retry_after_ms(&h, 0);
    snprintf(o.etag, sizeof(o.etag), "%.*s", (int)h.etag.len, h.etag.data ? h.etag.data : "");
    snprintf(o.last_modified, sizeof(o.last_modified), "%.*s", (int)h.last_modified.len,
             h.last_modified.data ? h.last_modified.data : "");
    hv_http_cache_control(&h, &o.no_store, &o.max_age_s);
    o.body_len = h.body.len;
    if (h.body.len < sizeof(o.body))
        memcpy(o.body, h.body.data ? h.body.data : "", h.body.len);
    hv_http_free(&h);
    return o;
}

static void assert_same(const outcome_t *a, const outcome_t *b)
{
    ASSERT_EQ(a->rc, b->rc);
    ASSERT_EQ(a->status, b->status);
    ASSERT_EQ(a->keep_alive, b->keep_alive);
    ASSERT_STR_EQ(a->content_type, b->content_type);
    ASSERT_STR_EQ(a->location, b->location);
    ASSERT_STR_EQ(a->error, b->error);
    ASSERT_EQ(a->retry_after_ms, b->retry_after_ms);
    ASSERT_STR_EQ(a->etag, b->etag);
    ASSERT_STR_EQ(a->last_modified, b->last_modified);
    ASSERT_EQ(a->no_store, b->no_store);
    ASSERT_EQ(a->max_age_s, b->max_age_s);
    if (a->rc == 1) { /* a failed body is partial, at whatever point the limit hit */
        ASSERT_EQ(a->body_len, b->body_len);
        ASSERT_MEM_EQ(a->body, b->body, a->body_len < sizeof(a->body) ? a->body_len : 0);
    }
    ASSERT_EQ(1, b->head_calls <= 1);
}

/* The whole-buffer outcome, checked against every split and byte-at-a-time feeding. */
static outcome_t trace(const char *resp, size_t len, int eof, uint64_t max_body)
{
    outcome_t whole = run(resp, len, 0, len, eof, max_body);
    for (size_t split = 1; split < len; split++) {
        outcome_t o = run(resp, len, split, len, eof, max_body);
        assert_same(&whole, &o);
    }
    outcome_t bytewise = run(resp, len, 0, 1, eof, max_body);
    assert_same(&whole, &bytewise);
    return whole;
}

#define TRACE(s, eof) trace((s), sizeof(s) - 1, (eof), 1024)

/* A Retry-After too long to keep is no advice, however the reads cut it. */
TEST_IMPL(http_overlong_retry_after_is_dropped_at_any_split)
{
    outcome_t o = TRACE("HTTP/1.1 503 Busy\r\nRetry-After: 5"
                        "0000000000000000000000000000000000000000000000000000000000000000000000"
                        "\r\nContent-Length: 0\r\n\r\n",
                        0);
    ASSERT_EQ(1, o.rc);
    ASSERT_EQ(-1, o.retry_after_ms);
    o = TRACE("HTTP/1.1 503 Busy\r\nRetry-After: 5\r\nContent-Length: 0\r\n\r\n", 0);
    ASSERT_EQ(5000, o.retry_after_ms);
}

/* Trailer fields after a chunked body are not the head's: they neither fill what the head
 * left empty nor change how the body already decoded was encoded. */
TEST_IMPL(http_trailers_do_not_count_as_headers)
{
    outcome_t o = TRACE("HTTP/1.1 503 Busy\r\nTransfer-Encoding: chunked\r\n\r\n"
                        "5\r\nhello\r\n0\r\n"
                        "Content-Type: text/plain\r\nLocation: /elsewhere\r\n"
                        "Retry-After: 9\r\nContent-Encoding: gzip\r\n\r\n",
                        0);
    ASSERT_EQ(1, o.rc);
    ASSERT_STR_EQ("", o.content_type);
    ASSERT_STR_EQ("", o.location);
    ASSERT_EQ(-1, o.retry_after_ms);
    ASSERT_EQ(5, o.body_len);
    ASSERT_MEM_EQ("hello", o.body, 5);
}

TEST_IMPL(http_content_length_body)
{
    mode_for_test = HV_HTTP_BODY_KEEP;
    outcome_t o = TRACE("HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n"
                        "Content-Length: 5\r\n\r\nhello",
                        0);
    ASSERT_EQ(1, o.rc);
    ASSERT_EQ(200, o.status);
    ASSERT_EQ(1, o.keep_alive);
    ASSERT_STR_EQ("text/html; charset=utf-8", o.content_type);
    ASSERT_EQ(5, o.body_len);
    ASSERT_MEM_EQ("hello", o.body, 5);
}

TEST_IMPL(http_chunked_body)
{
    mode_for_test = HV_HTTP_BODY_KEEP;
    outcome_t o = TRACE("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                        "3\r\nabc\r\n4;ext=1\r\ndefg\r\n0\r\nX-Trailer: 1\r\n\r\n",
                        0);
    ASSERT_EQ(1, o.rc);
    ASSERT_EQ(7, o.body_len);
    ASSERT_MEM_EQ("abcdefg", o.body, 7);
    ASSERT_EQ(1, o.keep_alive);
}

TEST_IMPL(http_close_delimited_body_needs_eof)
{
    mode_for_test = HV_HTTP_BODY_KEEP;
    outcome_t o = TRACE("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<title>x</title>", 1);
    ASSERT_EQ(1, o.rc);
    ASSERT_EQ(16, o.body_len);
    ASSERT_EQ(0, o.keep_alive);
}

TEST_IMPL(http_eof_mid_body_is_closed)
{
    mode_for_test = HV_HTTP_BODY_KEEP;
    outcome_t o = TRACE("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", 1);
    ASSERT_EQ(HV_ECLOSED, o.rc);
    ASSERT_STR_EQ("connection_closed_mid_body", o.error);
}

TEST_IMPL(http_eof_before_anything)
{
    outcome_t o = run("", 0, 0, 1, 1, 1024);
    ASSERT_EQ(HV_ECLOSED, o.rc);
    ASSERT_STR_EQ("connection_closed_before_response", o.error);
}

TEST_IMPL(http_interim_100_is_skipped)
{
    mode_for_test = HV_HTTP_BODY_KEEP;
    outcome_t o = TRACE("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
                        "\r\nok",
                        0);
    ASSERT_EQ(1, o.rc);
    ASSERT_EQ(200, o.status);
    ASSERT_EQ(2, o.body_len);
}

TEST_IMPL(http_304_has_no_body_despite_content_length)
{
    mode_for_test = HV_HTTP_BODY_DISCARD;
    outcome_t o = TRACE("HTTP/1.1 304 Not Modified\r\nContent-Length: 100\r\n\r\n", 0);
    ASSERT_EQ(1, o.rc);
    ASSERT_EQ(304, o.status);
    ASSERT_EQ(1, o.keep_alive);
}

TEST_IMPL(http_location_and_trailing_space_in_name)
{
    mode_for_test = HV_HTTP_BODY_DISCARD;
    outcome_t o = TRACE("HTTP/1.1 302 Found\r\nLocation: /next?a=1\r\nContent-Length: 3\r\n\r\nabc",
                        0);
    ASSERT_EQ(1, o.rc);
    ASSERT_EQ(302, o.status);
    ASSERT_STR_EQ("/next?a=1", o.location);
    ASSERT_EQ(0, o.body_len); /* discarded */
    ASSERT_EQ(1, o.keep_alive);
}

TEST_IMPL(http_discard_over_drain_limit_is_not_reusable)
{
    static char resp[512];
    mode_for_test = HV_HTTP_BODY_DISCARD;
    int n = snprintf(resp, sizeof(resp), "HTTP/1.1 404 Not Found\r\nContent-Length: 200\r\n\r\n");
    memset(resp + n, 'x', 200);
    outcome_t o = trace(resp, (size_t)n + 200, 0, 1024);
    ASSERT_EQ(1, o.rc);
    ASSERT_EQ(404, o.status);
    ASSERT_EQ(0, o.keep_alive);
}

TEST_IMPL(http_content_length_over_limit_fails_at_head)
{
    mode_for_test = HV_HTTP_BODY_KEEP;
    outcome_t o = TRACE("HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\nab", 0);
    ASSERT_EQ(HV_ETOOBIG, o.rc);
    ASSERT_STR_EQ("response_exceeds_1_kib", o.error);
}

TEST_IMPL(http_chunked_over_limit)
{
    static char resp[4096];
    mode_for_test = HV_HTTP_BODY_KEEP;
    int n = snprintf(resp, sizeof(resp), "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                                         "800\r\n");
    memset(resp + n, 'y', 0x800);
    outcome_t o = trace(resp, (size_t)n + 0x800, 0, 1024);
    ASSERT_EQ(HV_ETOOBIG, o.rc);
}

TEST_IMPL(http_head_over_limit)
{
    static char resp[4096];
    mode_for_test = HV_HTTP_BODY_KEEP;
    int n = snprintf(resp, sizeof(resp), "HTTP/1.1 200 OK\r\nX-Big: ");
    memset(resp + n, 'h', 2000);
    memcpy(resp + n + 2000, "\r\n\r\n", 4);
    outcome_t o = trace(resp, (size_t)n + 2004, 0, 1024);
    ASSERT_EQ(HV_EPROTO, o.rc);
    ASSERT_STR_EQ("headers_exceed_1_kib", o.error);
}

TEST_IMPL(http_garbage_is_protocol_error)
{
    mode_for_test = HV_HTTP_BODY_KEEP;
    outcome_t o = TRACE("SSH-2.0-OpenSSH_9.2\r\n", 0);
    ASSERT_EQ(HV_EPROTO, o.rc);
    ASSERT(o.error[0] != '\0');
}

TEST_IMPL(http_bad_chunk_size)
{
    mode_for_test = HV_HTTP_BODY_KEEP;
    outcome_t o = TRACE("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 0);
    ASSERT_EQ(HV_EPROTO, o.rc);
    ASSERT_STR_EQ("invalid_chunk_size", o.error);
}

TEST_IMPL(http_stray_bytes_after_response_forbid_reuse)
{
    mode_for_test = HV_HTTP_BODY_KEEP;
    outcome_t o = run("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA", 45, 0, 45, 0, 1024);
    ASSERT_EQ(1, o.rc);
    ASSERT_EQ(0, o.keep_alive);
}

TEST_IMPL(http_abort_from_head_callback)
{
    mode_for_test = HV_HTTP_BODY_ABORT;
    outcome_t o = TRACE("HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nContent-Length: 4\r\n\r\n"
                        "\x89PNG",
                        0);
    ASSERT_EQ(HV_ECANCELLED, o.rc);
}

TEST_IMPL(http_connection_close_is_not_reusable)
{
    mode_for_test = HV_HTTP_BODY_KEEP;
    outcome_t o = TRACE("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx", 0);
    ASSERT_EQ(1, o.rc);
    ASSERT_EQ(0, o.keep_alive);
}

static size_t gzip_bytes(const char *in, size_t len, unsigned char *out, size_t cap, int wbits)
{
    z_stream z;
    memset(&z, 0, sizeof(z));
    deflateInit2(&z, 6, Z_DEFLATED, wbits, 8, Z_DEFAULT_STRATEGY);
    z.next_in = (unsigned char *)(uintptr_t)in;
    z.avail_in = (uInt)len;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    deflate(&z, Z_FINISH);
    size_t n = cap - z.avail_out;
    deflateEnd(&z);
    return n;
}

static outcome_t encoded(const char *encoding, int wbits, const char *text, size_t cut,
                         uint64_t max_body)
{
    static char resp[8192];
    unsigned char gz[4096];
    size_t glen = gzip_bytes(text, strlen(text), gz, sizeof(gz), wbits);
    if (cut > 0)
        glen -= cut;
    int n = snprintf(resp, sizeof(resp),
                     "HTTP/1.1 200 OK\r\nContent-Encoding: %s\r\nContent-Length: %zu\r\n\r\n",
                     encoding, glen);
    memcpy(resp + n, gz, glen);
    mode_for_test = HV_HTTP_BODY_KEEP;
    return trace(resp, (size_t)n + glen, 0, max_body);
}

TEST_IMPL(http_gzip_is_decoded)
{
    outcome_t o = encoded("gzip", 15 + 16, "<title>Zipped</title> and some text", 0, 1024);
    ASSERT_EQ(1, o.rc);
    ASSERT_EQ(35, o.body_len);
    ASSERT_MEM_EQ("<title>Zipped</title>", o.body, 21);
}

TEST_IMPL(http_deflate_zlib_and_raw)
{
    outcome_t o = encoded("deflate", 15, "zlib wrapped body", 0, 1024);
    ASSERT_EQ(1, o.rc);
    ASSERT_EQ(17, o.body_len);
    o = encoded("deflate", -15, "raw deflate body", 0, 1024);
    ASSERT_EQ(1, o.rc);
    ASSERT_EQ(16, o.body_len);
}

/* A gzip body followed by `tail` (junk, or another member). */
static outcome_t gzip_then(const char *text, const void *tail, size_t tail_len)
{
    static char resp[8192];
    unsigned char gz[4096];
    size_t glen = gzip_bytes(text, strlen(text), gz, sizeof(gz), 15 + 16);
    int n = snprintf(resp, sizeof(resp),
                     "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %zu\r\n\r\n",
                     glen + tail_len);
    memcpy(resp + n, gz, glen);
    memcpy(resp + n + glen, tail, tail_len);
    mode_for_test = HV_HTTP_BODY_KEEP;
    return trace(resp, (size_t)n + glen + tail_len, 0, 1024);
}

TEST_IMPL(http_gzip_trailing_junk_is_ignored_whatever_its_length)
{
    static const char *const tails[] = {"\n", "\n\n", "junk", "\x1f\n"};
    for (size_t i = 0; i < HV_ARRAY_SIZE(tails); i++) {
        outcome_t o = gzip_then("<title>Zipped</title>", tails[i], strlen(tails[i]));
        ASSERT_EQ(1, o.rc);
        ASSERT_EQ(21, o.body_len);
    }
    /* A second member is a second member, not junk. */
    unsigned char second[256];
    size_t len = gzip_bytes(" and more", 9, second, sizeof(second), 15 + 16);
    outcome_t o = gzip_then("<title>Zipped</title>", second, len);
    ASSERT_EQ(1, o.rc);
    ASSERT_EQ(30, o.body_len);
    ASSERT_MEM_EQ("<title>Zipped</title> and more", o.body, 30);
}

TEST_IMPL(http_gzip_a_lone_stray_byte_is_junk_too)
{
    /* One stray byte that happens to be gzip's first magic byte (or a header cut short
     * before any data: nothing of the page is in it) after a complete member. */
    static const char *const tails[] = {"\x1f", "\x1f\x8b", "\x1f\x8b\x08\x00"};
    for (size_t i = 0; i < HV_ARRAY_SIZE(tails); i++) {
        outcome_t o = gzip_then("<title>Zipped</title>", tails[i], strlen(tails[i]));
        ASSERT_EQ(1, o.rc);
        ASSERT_EQ(21, o.body_len);
    }
    /* A second member cut short after its header has begun its data: truncated. */
    unsigned char second[256];
    size_t len = gzip_bytes(" and more and more", 18, second, sizeof(second), 15 + 16);
    outcome_t o = gzip_then("<title>Zipped</title>", second, len - 10);
    ASSERT_EQ(HV_EDECODE, o.rc);
    ASSERT_STR_EQ("gzip_truncated", o.error);
}

TEST_IMPL(http_truncated_gzip)
{
    outcome_t o = encoded("gzip", 15 + 16, "<title>Cut short</title>", 6, 1024);
    ASSERT_EQ(HV_EDECODE, o.rc);
    ASSERT_STR_EQ("gzip_truncated", o.error);
}

TEST_IMPL(http_gzip_bomb_stops_at_limit)
{
    static char big[3000];
    memset(big, 'a', sizeof(big) - 1);
    outcome_t o = encoded("gzip", 15 + 16, big, 0, 1024);
    ASSERT_EQ(HV_ETOOBIG, o.rc);
    ASSERT_STR_EQ("response_exceeds_1_kib", o.error);
}

TEST_IMPL(http_corrupt_gzip)
{
    mode_for_test = HV_HTTP_BODY_KEEP;
    outcome_t o = TRACE("HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 12\r\n\r\n"
                        "not gzip at all",
                        0);
    ASSERT_EQ(HV_EDECODE, o.rc);
    ASSERT_STR_EQ("gzip_corrupt", o.error);
}

static outcome_t brotli_page(const char *text, size_t cut, uint64_t max_body)
{
    static char resp[8192];
    uint8_t br[4096];
    size_t blen = sizeof(br);
    ASSERT(BrotliEncoderCompress(5, 22, BROTLI_MODE_TEXT, strlen(text), (const uint8_t *)text,
                                 &blen, br));
    blen -= cut;
    int n = snprintf(resp, sizeof(resp),
                     "HTTP/1.1 200 OK\r\nContent-Encoding: br\r\nContent-Length: %zu\r\n\r\n", blen);
    memcpy(resp + n, br, blen);
    mode_for_test = HV_HTTP_BODY_KEEP;
    return trace(resp, (size_t)n + blen, 0, max_body);
}

TEST_IMPL(http_brotli_is_decoded)
{
    outcome_t o = brotli_page("<title>Brotli</title> compressed body", 0, 1024);
    ASSERT_EQ(1, o.rc);
    ASSERT_EQ(37, o.body_len);
    ASSERT_MEM_EQ("<title>Brotli</title>", o.body, 21);
}

TEST_IMPL(http_brotli_bomb_and_truncation)
{
    static char big[3000];
    memset(big, 'b', sizeof(big) - 1);
    outcome_t o = brotli_page(big, 0, 1024);
    ASSERT_EQ(HV_ETOOBIG, o.rc);
    o = brotli_page("<title>Cut</title> and some more text to cut", 3, 1024);
    ASSERT_EQ(HV_EDECODE, o.rc);
    ASSERT_STR_EQ("brotli_truncated", o.error);
    mode_for_test = HV_HTTP_BODY_KEEP;
    o = TRACE("HTTP/1.1 200 OK\r\nContent-Encoding: br\r\nContent-Length: 9\r\n\r\nnot brotli", 0);
    ASSERT_EQ(HV_EDECODE, o.rc);
    ASSERT_STR_EQ("brotli_corrupt", o.error);
}

/* A response whose body is `body` (len bytes) as the given coding. */
static outcome_t coded_page(const char *coding, const void *body, size_t len, uint64_t max_body)
{
    static char resp[8192];
    int n = snprintf(resp, sizeof(resp),
                     "HTTP/1.1 200 OK\r\nContent-Encoding: %s\r\nContent-Length: %zu\r\n\r\n",
                     coding, len);
    ASSERT(n > 0 && (size_t)n + len <= sizeof(resp));
    memcpy(resp + n, body, len);
    mode_for_test = HV_HTTP_BODY_KEEP;
    return trace(resp, (size_t)n + len, 0, max_body);
}

/* `text` as one zstd frame (level 3) into `out`; its size. */
static size_t zstd_frame(const char *text, unsigned char *out, size_t cap)
{
    size_t n = ZSTD_compress(out, cap, text, strlen(text), 3);
    ASSERT(!ZSTD_isError(n));
    return n;
}

TEST_IMPL(http_zstd_is_decoded_frame_after_frame)
{
    unsigned char z[4096];
    size_t n = zstd_frame("<title>Zstd</title> compressed body", z, sizeof(z));
    outcome_t o = coded_page("zstd", z, n, 1024);
    ASSERT_EQ(1, o.rc);
    ASSERT_EQ(35, o.body_len);
    ASSERT_MEM_EQ("<title>Zstd</title>", o.body, 19);
    /* a second frame goes on the page; junk after the last frame is ignored */
    size_t m = n + zstd_frame(" and a second frame", z + n, sizeof(z) - n);
    o = coded_page("zstd", z, m, 1024);
    ASSERT_EQ(1, o.rc);
    ASSERT_EQ(35 + 19, o.body_len);
    memcpy(z + m, "\n\n", 2);
    o = coded_page("zstd", z, m + 2, 1024);
    ASSERT_EQ(1, o.rc);
    ASSERT_EQ(35 + 19, o.body_len);
}

TEST_IMPL(http_zstd_bomb_corruption_truncation_and_window)
{
    static char big[3000];
    unsigned char z[4096];
    memset(big, 'z', sizeof(big) - 1);
    size_t n = zstd_frame(big, z, sizeof(z));
    outcome_t o = coded_page("zstd", z, n, 1024);
    ASSERT_EQ(HV_ETOOBIG, o.rc);
    n = zstd_frame("<title>Cut</title> and some more text to cut", z, sizeof(z));
    o = coded_page("zstd", z, n - 3, 1024);
    ASSERT_EQ(HV_EDECODE, o.rc);
    ASSERT_STR_EQ("zstd_truncated", o.error);
    o = coded_page("zstd", "not zstd", 8, 1024);
    ASSERT_EQ(HV_EDECODE, o.rc);
    ASSERT_STR_EQ("zstd_corrupt", o.error);
    /* A frame that declares its window (no content size): 8 MiB is allowed (RFC 9659), 16
     * MiB is refused before it is allocated. The frame: magic, descriptor 0 (a window
     * descriptor follows), window exponent, one last raw block of 3 bytes. */
    unsigned char frame[] = {0x28, 0xb5, 0x2f, 0xfd, 0x00, 13 << 3, 0x19, 0x00, 0x00, 'a', 'b',
                             'c'};
    o = coded_page("zstd", frame, sizeof(frame), 1024);
    ASSERT_EQ(1, o.rc);
    ASSERT_MEM_EQ("abc", o.body, 3);
    frame[5] = 14 << 3;
    o = coded_page("zstd", frame, sizeof(frame), 1024);
    ASSERT_EQ(HV_EDECODE, o.rc);
    ASSERT_STR_EQ("zstd_window_too_large", o.error);
}

TEST_IMPL(http_unsupported_encoding)
{
    mode_for_test = HV_HTTP_BODY_KEEP;
    outcome_t o = TRACE("HTTP/1.1 200 OK\r\nContent-Encoding: lzma\r\nContent-Length: 2\r\n\r\nxx",
                        0);
    ASSERT_EQ(HV_EPROTO, o.rc);
    ASSERT_STR_EQ("unsupported_content_encoding", o.error);
}

TEST_IMPL(http_request_text)
{
    hv_url_t u;
    memset(&u, 0, sizeof(u));
    u.target = (char *)(uintptr_t)"/a?b=1";
    u.authority = (char *)(uintptr_t)"example.org:8080";
    hv_buf_t b;
    hv_buf_init(&b, 4096);
    ASSERT_OK(hv_http_request(&b, &u, "harvestd/test", NULL, NULL, NULL, 0));
    ASSERT_OK(hv_buf_append(&b, "", 1));
    ASSERT_STR_EQ("GET /a?b=1 HTTP/1.1\r\nHost: example.org:8080\r\nUser-Agent: harvestd/test\r\n"
                  "Accept: text/html,application/xhtml+xml\r\nAccept-Encoding: gzip, deflate, br, zstd\r\n"
                  "Connection: keep-alive\r\n\r\n",
                  b.data);
    hv_buf_free(&b);
}

/* A conditional request carries the validators as they came; one that could split the
 * request (a control byte) is not sent at all. */
TEST_IMPL(http_request_conditional)
{
    hv_url_t u;
    memset(&u, 0, sizeof(u));
    u.target = (char *)(uintptr_t)"/p";
    u.authority = (char *)(uintptr_t)"a.test";
    hv_buf_t b;
    hv_buf_init(&b, 8192);
    hv_http_cond_t cond = {"W/\"v1\"", "Wed, 02 Dec 2026 10:00:00 GMT"};
    ASSERT_OK(hv_http_request(&b, &u, "ua", &cond, NULL, NULL, 0));
    ASSERT_OK(hv_buf_append(&b, "", 1));
    ASSERT_STR_EQ("GET /p HTTP/1.1\r\nHost: a.test\r\nUser-Agent: ua\r\n"
                  "Accept: text/html,application/xhtml+xml\r\nAccept-Encoding: gzip, deflate, br, zstd\r\n"
                  "If-None-Match: W/\"v1\"\r\nIf-Modified-Since: Wed, 02 Dec 2026 10:00:00 GMT\r\n"
                  "Connection: keep-alive\r\n\r\n",
                  b.data);
    hv_buf_reset(&b);
    hv_http_cond_t evil = {"\"a\"\r\nX-Injected: 1", NULL};
    ASSERT_OK(hv_http_request(&b, &u, "ua", &evil, NULL, NULL, 0));
    ASSERT_OK(hv_buf_append(&b, "", 1));
    ASSERT_NULL(strstr(b.data, "X-Injected"));
    ASSERT_NULL(strstr(b.data, "If-None-Match"));
    hv_buf_free(&b);
}

/* Configured fields follow harvestd's own; one named Accept or Accept-Encoding takes the
 * default's place, and an empty value sends nothing (not even the default). */
TEST_IMPL(http_request_configured_fields)
{
    hv_url_t u;
    memset(&u, 0, sizeof(u));
    u.target = (char *)(uintptr_t)"/p";
    u.authority = (char *)(uintptr_t)"a.test";
    hv_buf_t b;
    hv_buf_init(&b, HV_HTTP_REQUEST_MAX);
    const hv_http_field_t fields[] = {
        {"Accept-Language", "en-GB, en;q=0.8"},
        {"accept", "text/html"},
        {"Accept-Encoding", ""},
        {"X-Empty", ""},
        {"Cookie", "consent=yes; lang=en"},
    };
    hv_http_cond_t cond = {"\"v1\"", NULL};
    ASSERT_OK(hv_http_request(&b, &u, "ua", &cond, NULL, fields, HV_ARRAY_SIZE(fields)));
    ASSERT_OK(hv_buf_append(&b, "", 1));
    ASSERT_STR_EQ("GET /p HTTP/1.1\r\nHost: a.test\r\nUser-Agent: ua\r\n"
                  "Accept-Language: en-GB, en;q=0.8\r\naccept: text/html\r\n"
                  "Cookie: consent=yes; lang=en\r\nIf-None-Match: \"v1\"\r\n"
                  "Connection: keep-alive\r\n\r\n",
                  b.data);
    hv_buf_free(&b);
}

/* A field that could split the request, or that harvestd owns, fails the whole request: the
 * buffer is left as it was. */
TEST_IMPL(http_request_refuses_a_bad_field)
{
    hv_url_t u;
    memset(&u, 0, sizeof(u));
    u.target = (char *)(uintptr_t)"/";
    u.authority = (char *)(uintptr_t)"a.test";
    hv_buf_t b;
    hv_buf_init(&b, HV_HTTP_REQUEST_MAX);
    ASSERT_OK(hv_buf_append(&b, "kept", 4));
    const hv_http_field_t evil[] = {{"X-A", "1\r\nX-Injected: 1"}};
    ASSERT_EQ(UV_EINVAL, hv_http_request(&b, &u, "ua", NULL, NULL, evil, 1));
    const hv_http_field_t host[] = {{"X-A", "1"}, {"host", "b.test"}};
    ASSERT_EQ(UV_EINVAL, hv_http_request(&b, &u, "ua", NULL, NULL, host, 2));
    ASSERT_EQ(4, b.len);
    /* A head over the bound is HV_ETOOBIG, also without a trace. */
    hv_buf_t small;
    hv_buf_init(&small, 64);
    const hv_http_field_t big[] = {{"X-A", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}};
    ASSERT_EQ(HV_ETOOBIG, hv_http_request(&small, &u, "ua", NULL, NULL, big, 1));
    ASSERT_EQ(0, small.len);
    hv_buf_free(&small);
    hv_buf_free(&b);
}

/* Each refusal, word for word; none of them quotes a value. */
TEST_IMPL(http_field_check_messages)
{
    static const struct {
        const char *name, *value, *message;
    } bad[] = {
        {"", "x", "header: no name before ':' (expected 'Name: value')"},
        {"X Y", "x", "header: 'X Y' is not a header name (letters, digits and "
                     "!#$%&'*+-.^_`|~ only)"},
        {"X(1)", "x", "header: 'X(1)' is not a header name (letters, digits and "
                      "!#$%&'*+-.^_`|~ only)"},
        {"X\001", "x", "header: byte 0x01 in a header name"},
        {"X-\xc3\xa9", "x", "header: byte 0xc3 in a header name"},
        {"host", "x", "header: 'host' cannot be configured: harvestd sends the URL's host"},
        {"Content-Length", "0", "header: 'Content-Length' cannot be configured: harvestd "
                                "frames its requests"},
        {"Transfer-Encoding", "chunked", "header: 'Transfer-Encoding' cannot be configured: "
                                         "harvestd frames its requests"},
        {"TE", "trailers", "header: 'TE' cannot be configured: harvestd frames its requests"},
        {"Trailer", "x", "header: 'Trailer' cannot be configured: harvestd frames its requests"},
        {"CONNECTION", "close", "header: 'CONNECTION' cannot be configured: harvestd manages "
                                "its connections"},
        {"Keep-Alive", "5", "header: 'Keep-Alive' cannot be configured: harvestd manages its "
                            "connections"},
        {"Proxy-Connection", "x", "header: 'Proxy-Connection' cannot be configured: harvestd "
                                  "manages its connections"},
        {"Upgrade", "h2c", "header: 'Upgrade' cannot be configured: harvestd manages its "
                           "connections"},
        {"Proxy-Authorization", "Basic c2VjcmV0", "header: 'Proxy-Authorization' cannot be "
                                                  "configured: proxy credentials are never "
                                                  "sent to a server"},
        {"If-None-Match", "\"x\"", "header: 'If-None-Match' cannot be configured: re-crawling "
                                   "sends it (recrawl = conditional)"},
        {"if-modified-since", "x", "header: 'if-modified-since' cannot be configured: "
                                   "re-crawling sends it (recrawl = conditional)"},
        {"User-Agent", "bot", "header: 'User-Agent' cannot be configured: set user_agent "
                              "instead (robots.txt is matched against it)"},
        {"Authorization", "Bearer s3cret\r\nX: 1", "header: 'Authorization': control "
                                                   "character 0x0d in its value"},
        {"Cookie", "a=s3cret\n", "header: 'Cookie': control character 0x0a in its value"},
        {"Cookie", "a=s3cret\x7f", "header: 'Cookie': control character 0x7f in its value"},
        {"Cookie", "a=s3cret\x1b", "header: 'Cookie': control character 0x1b in its value"},
        {"X-A", " s3cret", "header: 'X-A': blanks around its value"},
    };
    char err[256];
    for (size_t i = 0; i < HV_ARRAY_SIZE(bad); i++) {
        ASSERT_EQ(UV_EINVAL, hv_http_field_check(bad[i].name, bad[i].value, err, sizeof(err)));
        ASSERT_STR_EQ(bad[i].message, err);
        ASSERT_NULL(strstr(err, "s3cret"));
    }
    /* Tabs inside, obs-text, an empty value, every tchar, Accept-Encoding: all fine. */
    ASSERT_OK(hv_http_field_check("X-A", "a\tb", err, sizeof(err)));
    ASSERT_OK(hv_http_field_check("X-A", "caf\xc3\xa9", err, sizeof(err)));
    ASSERT_OK(hv_http_field_check("X-A", "", err, sizeof(err)));
    ASSERT_OK(hv_http_field_check("!#$%&'*+-.^_`|~09azAZ", "1", err, sizeof(err)));
    ASSERT_OK(hv_http_field_check("Accept-Encoding", "identity", err, sizeof(err)));
    /* "Name: value" up to 8 KiB. */
    static char value[HV_HTTP_FIELD_MAX];
    memset(value, 'v', HV_HTTP_FIELD_MAX - 5);
    value[HV_HTTP_FIELD_MAX - 5] = '\0'; /* "X-A: " + value = 8192 */
    ASSERT_OK(hv_http_field_check("X-A", value, err, sizeof(err)));
    ASSERT_EQ(UV_EINVAL, hv_http_field_check("X-AB", value, err, sizeof(err)));
    ASSERT_STR_EQ("header: 'X-AB' is longer than 8192 bytes", err);
}

TEST_IMPL(http_field_secret)
{
    static const char *const secret[] = {"Authorization", "proxy-authorization", "COOKIE",
                                         "X-Api-Key", "Private-Token", "X-Auth-User",
                                         "X-Session-Id", "X-Client-Secret", "X-Password"};
    static const char *const plain[] = {"Accept-Language", "Accept", "Referer", "DNT",
                                        "X-Requested-With"};
    for (size_t i = 0; i < HV_ARRAY_SIZE(secret); i++)
        ASSERT_EQ(1, hv_http_field_secret(secret[i]));
    for (size_t i = 0; i < HV_ARRAY_SIZE(plain); i++)
        ASSERT_EQ(0, hv_http_field_secret(plain[i]));
}

/* The validators and Cache-Control of a response, at every split of it. */
TEST_IMPL(http_validators_and_cache_control)
{
    outcome_t o = TRACE("HTTP/1.1 200 OK\r\nETag: \"abc\"\r\nLast-Modified: Tue, 01 Dec 2026 "
                        "08:00:00 GMT\r\nCache-Control: public, max-age=\"600\"\r\n"
                        "etag: \"second\"\r\nContent-Length: 0\r\n\r\n",
                        0);
    ASSERT_EQ(1, o.rc);
    ASSERT_STR_EQ("\"abc\"", o.etag);
    ASSERT_STR_EQ("Tue, 01 Dec 2026 08:00:00 GMT", o.last_modified);
    ASSERT_EQ(0, o.no_store);
    ASSERT_EQ(600, o.max_age_s);
    /* Several headers are one list; directive names are case-insensitive. */
    o = TRACE("HTTP/1.1 200 OK\r\nCache-Control: max-age=5\r\nCache-Control: private, "
              "NO-STORE\r\nContent-Length: 0\r\n\r\n",
              0);
    ASSERT_EQ(1, o.no_store);
    ASSERT_EQ(5, o.max_age_s);
    /* A name that only starts like it is another directive. */
    o = TRACE("HTTP/1.1 200 OK\r\nCache-Control: no-store-later, max-age=x\r\n"
              "Content-Length: 0\r\n\r\n",
              0);
    ASSERT_EQ(0, o.no_store);
    ASSERT_EQ(-1, o.max_age_s);
    /* A 304 has no body, whatever it says of one. */
    o = TRACE("HTTP/1.1 304 Not Modified\r\nETag: \"abc\"\r\nContent-Length: 99\r\n\r\n", 0);
    ASSERT_EQ(1, o.rc);
    ASSERT_EQ(304, o.status);
    ASSERT_EQ(0, o.body_len);
}

/* A Cache-Control too long to read whole might hide a no-store: it counts as one. An
 * over-long ETag is dropped, never an error. */
TEST_IMPL(http_overlong_cache_control_means_no_store)
{
    char resp[8192];
    char big[3000];
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    hv_http_limits_t lim = {1024, 65536, 64, 0};
    int calls = 0;
    hv_http_t h;
    int n = snprintf(resp, sizeof(resp),
                     "HTTP/1.1 200 OK\r\nCache-Control: x=%s\r\nETag: \"%s\"\r\n"
                     "Content-Length: 0\r\n\r\n",
                     big, big);
    mode_for_test = HV_HTTP_BODY_KEEP;
    hv_http_init(&h, &lim, on_head, &calls);
    ASSERT_EQ(1, hv_http_feed(&h, resp, (size_t)n));
    int no_store;
    int64_t max_age;
    hv_http_cache_control(&h, &no_store, &max_age);
    ASSERT_EQ(1, no_store);
    ASSERT_EQ(0, h.etag.len);
    hv_http_free(&h);
}

TEST_IMPL(http_media_type)
{
    hv_http_limits_t lim = {1024, 1024, 64, 0};
    hv_http_t h;
    int calls = 0;
    char mt[64];
    mode_for_test = HV_HTTP_BODY_KEEP;
    hv_http_init(&h, &lim, on_head, &calls);
    const char *r = "HTTP/1.1 200 OK\r\nContent-Type:  Text/HTML ; charset=UTF-8\r\n"
                    "Content-Length: 0\r\n\r\n";
    ASSERT_EQ(1, hv_http_feed(&h, r, strlen(r)));
    hv_http_media_type(&h, mt, sizeof(mt));
    ASSERT_STR_EQ("text/html", mt);
    hv_http_free(&h);
}

/* ---- HTTP/2: the head as fields, the body as data ---- */

static int h2_field(hv_http_t *h, const char *name, const char *value)
{
    return hv_http_h2_field(h, name, strlen(name), value, strlen(value));
}

TEST_IMPL(http_h2_head_fields_body_and_limits)
{
    hv_http_limits_t lim = {64, 200, 64, 0};
    hv_http_t h;
    int calls = 0;
    mode_for_test = HV_HTTP_BODY_KEEP;
    hv_http_init(&h, &lim, on_head, &calls);
    ASSERT_EQ(0, h2_field(&h, "content-type", "text/html; charset=utf-8"));
    ASSERT_EQ(0, h2_field(&h, "etag", "\"v1\""));
    ASSERT_EQ(0, h2_field(&h, "cache-control", "max-age=60"));
    ASSERT_EQ(0, h2_field(&h, "cache-control", "no-store"));
    ASSERT_EQ(0, h2_field(&h, "content-length", "11"));
    ASSERT_EQ(0, hv_http_h2_head(&h, 200));
    ASSERT_EQ(1, calls);
    ASSERT_EQ(200, h.status);
    ASSERT_EQ(11, h.content_length);
    ASSERT_STR_EQ("text/html; charset=utf-8", h.content_type.data);
    ASSERT_STR_EQ("\"v1\"", h.etag.data);
    int no_store;
    int64_t max_age;
    hv_http_cache_control(&h, &no_store, &max_age);
    ASSERT_EQ(1, no_store);
    ASSERT_EQ(0, hv_http_h2_data(&h, "hello ", 6));
    ASSERT_EQ(0, hv_http_h2_data(&h, "world", 5));
    ASSERT_EQ(1, hv_http_h2_end(&h));
    ASSERT_EQ(11, h.body.len);
    ASSERT(memcmp(h.body.data, "hello world", 11) == 0);
    hv_http_free(&h);

    /* An announced length over max_body fails at the head, a sent one at the data. */
    hv_http_init(&h, &lim, on_head, &calls);
    ASSERT_EQ(0, h2_field(&h, "content-length", "65"));
    ASSERT_EQ(HV_ETOOBIG, hv_http_h2_head(&h, 200));
    hv_http_free(&h);
    char big[65];
    memset(big, 'x', sizeof(big));
    hv_http_init(&h, &lim, on_head, &calls);
    ASSERT_EQ(0, hv_http_h2_head(&h, 200));
    ASSERT_EQ(0, hv_http_h2_data(&h, big, 64));
    ASSERT_EQ(HV_ETOOBIG, hv_http_h2_data(&h, big, 1));
    char text[64];
    hv_detail_format(text, sizeof(text), h.fault.code, h.fault.arg);
    ASSERT_STR_EQ("response_exceeds_64_bytes", text);
    hv_http_free(&h);

    /* The head counts against max_header_bytes as over HTTP/1.1 (name, value, ": ", CRLF). */
    hv_http_init(&h, &lim, on_head, &calls);
    int rc = 0;
    for (int i = 0; i < 20 && rc == 0; i++)
        rc = h2_field(&h, "x-filler", "0123456789");
    ASSERT_EQ(HV_EPROTO, rc);
    ASSERT_EQ(HV_D_HEADERS_EXCEED, h.fault.code);
    hv_http_free(&h);
}

TEST_IMPL(http_h2_discard_coding_and_loss)
{
    hv_http_limits_t lim = {4096, 4096, 64, 0};
    hv_http_t h;
    int calls = 0;

    /* A body the owner does not want ends the exchange at the head. */
    mode_for_test = HV_HTTP_BODY_DISCARD;
    hv_http_init(&h, &lim, on_head, &calls);
    ASSERT_EQ(0, h2_field(&h, "location", "/next"));
    ASSERT_EQ(1, hv_http_h2_head(&h, 301));
    ASSERT_STR_EQ("/next", h.location.data);
    hv_http_free(&h);

    /* A zstd body is decoded; one cut short is zstd_truncated at the end of the stream. */
    unsigned char z[4096];
    size_t n = zstd_frame("<title>Over h2</title> compressed", z, sizeof(z));
    mode_for_test = HV_HTTP_BODY_KEEP;
    hv_http_init(&h, &lim, on_head, &calls);
    ASSERT_EQ(0, h2_field(&h, "content-encoding", "zstd"));
    ASSERT_EQ(0, hv_http_h2_head(&h, 200));
    ASSERT_EQ(0, hv_http_h2_data(&h, (const char *)z, n));
    ASSERT_EQ(1, hv_http_h2_end(&h));
    ASSERT_EQ(strlen("<title>Over h2</title> compressed"), h.body.len);
    hv_http_free(&h);
    hv_http_init(&h, &lim, on_head, &calls);
    ASSERT_EQ(0, h2_field(&h, "content-encoding", "zstd"));
    ASSERT_EQ(0, hv_http_h2_head(&h, 200));
    ASSERT_EQ(0, hv_http_h2_data(&h, (const char *)z, n - 3));
    ASSERT_EQ(HV_EDECODE, hv_http_h2_end(&h));
    ASSERT_EQ(HV_D_DECODE_TRUNCATED, h.fault.code);
    hv_http_free(&h);

    /* A coding harvestd does not undo fails at the head; a stream lost says where. */
    hv_http_init(&h, &lim, on_head, &calls);
    ASSERT_EQ(0, h2_field(&h, "content-encoding", "compress"));
    ASSERT_EQ(HV_EPROTO, hv_http_h2_head(&h, 200));
    hv_http_free(&h);
    hv_http_init(&h, &lim, on_head, &calls);
    ASSERT_EQ(HV_ECLOSED, hv_http_h2_lost(&h));
    ASSERT_EQ(HV_D_CLOSED_BEFORE_RESPONSE, h.fault.code);
    ASSERT_EQ(0, h2_field(&h, "content-type", "text/html"));
    ASSERT_EQ(0, hv_http_h2_head(&h, 200));
    ASSERT_EQ(0, hv_http_h2_data(&h, "<p>", 3));
    ASSERT_EQ(HV_ECLOSED, hv_http_h2_lost(&h));
    ASSERT_EQ(HV_D_CLOSED_MID_BODY, h.fault.code);
    hv_http_free(&h);
}

TEST_IMPL(http_h2_request_fields)
{
    hv_url_t u;
    const char *text = "https://Example.org:8443/a/b?q=1";
    ASSERT_EQ(0, hv_url_parse(&u, text, strlen(text), NULL));
    hv_http_field_t fields[] = {{"Accept", "text/plain"}, {"X-Empty", ""}, {"X-Token", "t"}};
    hv_http_cond_t cond = {"\"e1\"", "Sun, 06 Dec 2026 10:00:00 GMT"};
    hv_http_nv_t nv[16];
    char store[256];
    size_t n;
    ASSERT_EQ(0, hv_http_request_h2(nv, 16, &n, store, sizeof(store), &u, "ua/1", &cond, fields,
                                    3));
    const char *want[][2] = {{":method", "GET"},       {":scheme", "https"},
                             {":authority", "example.org:8443"},
                             {":path", "/a/b?q=1"},    {"user-agent", "ua/1"},
                             {"accept-encoding", "gzip, deflate, br, zstd"},
                             {"accept", "text/plain"}, {"x-token", "t"},
                             {"if-none-match", "\"e1\""},
                             {"if-modified-since", "Sun, 06 Dec 2026 10:00:00 GMT"}};
    ASSERT_EQ(HV_ARRAY_SIZE(want), n);
    for (size_t i = 0; i < n; i++) {
        ASSERT_EQ(strlen(want[i][0]), nv[i].nlen);
        ASSERT(memcmp(want[i][0], nv[i].name, nv[i].nlen) == 0);
        ASSERT_EQ(strlen(want[i][1]), nv[i].vlen);
        ASSERT(memcmp(want[i][1], nv[i].value, nv[i].vlen) == 0);
    }
    /* A field that could split a request is refused as over HTTP/1.1; no room is HV_ETOOBIG. */
    hv_http_field_t bad[] = {{"Connection", "close"}};
    ASSERT_EQ(UV_EINVAL, hv_http_request_h2(nv, 16, &n, store, sizeof(store), &u, "ua", NULL,
                                            bad, 1));
    ASSERT_EQ(HV_ETOOBIG, hv_http_request_h2(nv, 3, &n, store, sizeof(store), &u, "ua", NULL,
                                             NULL, 0));
    hv_url_free(&u);
}

/* A body read straight into its buffer (as fetch does over plain TCP): the space offered is
 * the buffer's free part, at most one byte past the announced length; bytes read there
 * become the body without a copy; a byte past the body is no body byte and the connection is
 * not reused; no space is offered before the head, for a coded or chunked body, or once the
 * response is complete. */
TEST_IMPL(http_body_read_in_place)
{
    hv_http_limits_t lim = {1 << 20, 1024, 64, 0};
    hv_http_t h;
    int calls = 0;
    char *base;
    size_t len;
    static char body[20000];
    for (size_t i = 0; i < sizeof(body); i++)
        body[i] = (char)('a' + i % 26);
    const char *head = "HTTP/1.1 200 OK\r\nContent-Length: 20000\r\n\r\n";
    for (int extra = 0; extra <= 1; extra++) {
        mode_for_test = HV_HTTP_BODY_KEEP;
        hv_http_init(&h, &lim, on_head, &calls);
        ASSERT_EQ(0, hv_http_body_space(&h, &base, &len));
        /* The head and the body's first 100 bytes in the connection's buffer. */
        char first[256];
        size_t hl = strlen(head);
        memcpy(first, head, hl);
        memcpy(first + hl, body, 100);
        ASSERT_EQ(0, hv_http_feed(&h, first, hl + 100));
        size_t off = 100;
        int rc = 0;
        while (rc == 0) {
            ASSERT_EQ(1, hv_http_body_space(&h, &base, &len));
            ASSERT(base == h.body.data + h.body.len);
            ASSERT_LE(len, sizeof(body) - off + 1);
            const char *before = h.body.data;
            size_t n = HV_MIN(len, (size_t)7000);
            size_t take = HV_MIN(n, sizeof(body) - off);
            memcpy(base, body + off, take);
            if (take < n && extra)
                base[take] = 'X'; /* a byte the server should not have sent */
            size_t fed = take + (take < n && extra ? 1 : 0);
            rc = hv_http_feed(&h, base, fed);
            ASSERT(before == h.body.data); /* no copy, no move */
            off += take;
        }
        ASSERT_EQ(1, rc);
        ASSERT_EQ(sizeof(body), h.body.len);
        ASSERT_MEM_EQ(body, h.body.data, sizeof(body));
        ASSERT_EQ(!extra, h.keep_alive);
        ASSERT_EQ(0, hv_http_body_space(&h, &base, &len));
        hv_http_free(&h);
    }
    /* Chunked, or coded: the bytes are not the body's as they come. */
    const char *other[] = {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
                           "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 9000\r\n\r\n"};
    for (size_t i = 0; i < HV_ARRAY_SIZE(other); i++) {
        hv_http_init(&h, &lim, on_head, &calls);
        ASSERT_EQ(0, hv_http_feed(&h, other[i], strlen(other[i])));
        ASSERT_EQ(0, hv_http_body_space(&h, &base, &len));
        hv_http_free(&h);
    }
    /* A body the owner drops is not read into a buffer. */
    mode_for_test = HV_HTTP_BODY_DISCARD;
    hv_http_init(&h, &lim, on_head, &calls);
    ASSERT_EQ(0, hv_http_feed(&h, head, strlen(head)));
    ASSERT_EQ(0, hv_http_body_space(&h, &base, &len));
    hv_http_free(&h);
    mode_for_test = HV_HTTP_BODY_KEEP;
}
