/*
 * http_response: the HTTP response path (http.h) fed a server's bytes.
 *
 * Input: a small header, then the bytes the server sends.
 *   byte 0   flags: bits 0-1 what the head callback answers (keep, keep, discard, abort),
 *            bit 2 limits->truncate, bit 3 end of stream after the last byte, bit 4 also
 *            replay byte by byte
 *   byte 1   max_body (low nibble) and max_header_bytes (high nibble), from small tables
 *   byte 2   max_drain (bits 0-1), number of split offsets (bits 4-6)
 *   then     up to 7 split offsets, 2 bytes each (taken modulo the payload's length)
 *
 * The response is parsed three ways: in one piece, cut at the chosen offsets and (if asked)
 * one byte at a time. http.h promises the same outcome whatever the read boundaries, as the
 * unit tests' traces check for their cases: the same result, status, headers, error detail and,
 * for a complete response, the same body. The head's results are "valid from the head
 * callback on": a complete response must still show the values the callback saw.
 */
#include <string.h>

#include "fuzz.h"
#include "harvestd/common.h"
#include "harvestd/http.h"

static const uint64_t max_bodies[16] = {0,    1,     16,    100,    1000,   4096,
                                        8192, 16383, 16384, 16385,  32768,  65536,
                                        65537, 100000, 200000, 262144};
static const uint64_t max_heads[16] = {0,   1,   16,   64,   100,  128,  256,  512,
                                       600, 1024, 2000, 4096, 8192, 16384, 65536, 1048576};
static const uint64_t max_drains[4] = {0, 64, 4096, 1048576};

/* The results of the head, as the head callback sees them. */
typedef struct {
    int status;
    int64_t content_length;
    hv_http_enc_t encoding;
    char *content_type, *location, *retry_after;
    size_t ct_len, loc_len, ra_len;
} head_t;

typedef struct {
    int rc;
    int complete;
    int keep_alive;
    int truncated;
    char error[64];
    hv_detail_t fault;
    head_t head;     /* at the last head callback */
    char *body;
    size_t body_len;
    uint64_t bytes_in;
    int heads;
    size_t fed;      /* payload bytes handed to hv_http_feed before it stopped */
} outcome_t;

typedef struct {
    hv_http_body_t mode;
    int heads;
    head_t head;
} owner_t;

static char *copy_buf(const hv_buf_t *b, size_t *len)
{
    *len = b->len;
    return fuzz_strndup(b->data != NULL ? b->data : "", b->len);
}

static void head_free(head_t *hd)
{
    free(hd->content_type);
    free(hd->location);
    free(hd->retry_after);
    memset(hd, 0, sizeof(*hd));
}

static void head_take(head_t *hd, const hv_http_t *h)
{
    head_free(hd);
    hd->status = h->status;
    hd->content_length = h->content_length;
    hd->encoding = h->encoding;
    hd->content_type = copy_buf(&h->content_type, &hd->ct_len);
    hd->location = copy_buf(&h->location, &hd->loc_len);
    hd->retry_after = copy_buf(&h->retry_after, &hd->ra_len);
}

static int same_bytes(const char *a, size_t alen, const char *b, size_t blen)
{
    return alen == blen && memcmp(a, b, alen) == 0;
}

static void compare_heads(const char *how, const head_t *a, const head_t *b)
{
    FUZZ_CHECK(a->status == b->status, "%s: status %d vs %d", how, a->status, b->status);
    FUZZ_CHECK(a->content_length == b->content_length, "%s: content_length %lld vs %lld", how,
               (long long)a->content_length, (long long)b->content_length);
    FUZZ_CHECK(a->encoding == b->encoding, "%s: encoding %d vs %d", how, a->encoding,
               b->encoding);
    FUZZ_CHECK(same_bytes(a->content_type, a->ct_len, b->content_type, b->ct_len),
               "%s: content type \"%s\" vs \"%s\"", how, a->content_type, b->content_type);
    FUZZ_CHECK(same_bytes(a->location, a->loc_len, b->location, b->loc_len),
               "%s: location \"%s\" vs \"%s\"", how, a->location, b->location);
    FUZZ_CHECK(same_bytes(a->retry_after, a->ra_len, b->retry_after, b->ra_len),
               "%s: retry-after \"%s\" vs \"%s\"", how, a->retry_after, b->retry_after);
}

static hv_http_body_t on_head(hv_http_t *h)
{
    owner_t *o = h->data;
    char mt[128];

    o->heads++;
    FUZZ_CHECK(h->status >= 200 || h->status < 100, "head callback for interim status %d",
               h->status);
    /* What fetch.c does with every head: the media type, the Retry-After delay, and with
     * re-crawling the validators and Cache-Control. */
    hv_http_media_type(h, mt, sizeof(mt));
    for (const char *p = mt; *p != '\0'; p++)
        FUZZ_CHECK(*p != ';' && *p != ' ' && !(*p >= 'A' && *p <= 'Z'), "media type \"%s\"", mt);
    int64_t ra = hv_http_retry_after_ms(h, 1700000000000);
    FUZZ_CHECK(ra >= -1, "retry-after %lld", (long long)ra);
    int no_store;
    int64_t max_age;
    hv_http_cache_control(h, &no_store, &max_age);
    FUZZ_CHECK(max_age >= -1 && (no_store == 0 || no_store == 1), "cache-control %d %lld",
               no_store, (long long)max_age);
    FUZZ_CHECK(!h->cache_control_cut || no_store, "a cut Cache-Control must read as no-store");
    FUZZ_CHECK(h->etag.len <= 1024 && h->last_modified.len <= 1024, "validator too long");
    if (h->content_type.len > 0)
        FUZZ_CHECK(h->content_type.data[h->content_type.len] == '\0', "content type not ended");
    if (h->location.len > 0)
        FUZZ_CHECK(h->location.data[h->location.len] == '\0', "location not ended");
    head_take(&o->head, h);
    return o->mode;
}

/* Feed `len` bytes cut before each offset in `cuts` (sorted, within [0, len]). */
static void run(const char *data, size_t len, const size_t *cuts, size_t ncuts, int eof,
                const hv_http_limits_t *lim, hv_http_body_t mode, outcome_t *o)
{
    owner_t owner = {mode, 0, {0}};
    hv_http_t h;
    size_t off = 0;
    int rc = 0;

    memset(o, 0, sizeof(*o));
    hv_http_init(&h, lim, on_head, &owner);
    for (size_t i = 0; i <= ncuts && rc == 0; i++) {
        size_t end = i < ncuts ? cuts[i] : len;
        if (end <= off)
            continue; /* the conn layer never hands over an empty read */
        rc = hv_http_feed(&h, data + off, end - off);
        off = end;
    }
    o->fed = off;
    if (rc == 0 && eof)
        rc = hv_http_eof(&h);
    /* Once complete, more calls say so and change nothing; and what the head callback saw
     * is still what the response says (fetch.c reads Retry-After and Location only then). */
    if (rc == 1 && owner.heads > 0) {
        head_t now = {0};
        head_take(&now, &h);
        compare_heads("after the head callback", &owner.head, &now);
        head_free(&now);
    }
    if (rc == 1) {
        FUZZ_CHECK(h.complete, "rc 1 but not complete");
        FUZZ_CHECK(hv_http_feed(&h, "X", 1) == 1, "feed after completion");
        FUZZ_CHECK(hv_http_eof(&h) == 1, "eof after completion");
    }
    FUZZ_CHECK(rc == 0 || rc == 1 || rc == HV_EPROTO || rc == HV_ETOOBIG || rc == HV_EDECODE ||
                   rc == HV_ECANCELLED || rc == HV_ECLOSED,
               "unexpected result %d", rc);
    char error[sizeof(o->error)];
    hv_detail_format(error, sizeof(error), h.fault.code, h.fault.arg);
    if (rc < 0)
        FUZZ_CHECK(error[0] != '\0', "error %d without a detail", rc);
    FUZZ_CHECK(memchr(h.fault.arg, '\0', sizeof(h.fault.arg)) != NULL,
               "error argument not terminated");
    FUZZ_CHECK(h.body.len <= lim->max_body, "body %zu over max_body %llu", h.body.len,
               (unsigned long long)lim->max_body);
    FUZZ_CHECK(!h.truncated || lim->truncate, "truncated without limits->truncate");
    FUZZ_CHECK(h.bytes_in <= len, "bytes_in %llu of %zu", (unsigned long long)h.bytes_in, len);

    o->rc = rc;
    o->complete = h.complete;
    o->keep_alive = h.keep_alive;
    o->truncated = h.truncated;
    memcpy(o->error, error, sizeof(o->error));
    o->fault = h.fault.code;
    o->head = owner.head;
    o->body = copy_buf(&h.body, &o->body_len);
    o->bytes_in = h.bytes_in;
    o->heads = owner.heads;
    hv_http_free(&h);
}

static void outcome_free(outcome_t *o)
{
    head_free(&o->head);
    free(o->body);
}

static void compare(const char *how, const outcome_t *a, const outcome_t *b, size_t len)
{
    /* libbrotlidec keeps decoded bytes back in a call that then finds the stream corrupt, and
     * hands them out when it runs short of input instead: whether a corrupt brotli body
     * reaches max_body (an error, or for robots.txt a truncated success) before it is found
     * corrupt depends on where the reads end. Nothing above the decoder can make that
     * boundary-free, so such outcomes are not compared. */
    if (a->heads > 0 && a->head.encoding == HV_ENC_BROTLI &&
        (a->fault == HV_D_DECODE_CORRUPT || b->fault == HV_D_DECODE_CORRUPT))
        return;
    FUZZ_CHECK(a->rc == b->rc, "%s: result %d vs %d (errors \"%s\" vs \"%s\")", how, a->rc, b->rc,
               a->error, b->error);
    /* llhttp reports header (and trailer) bytes in spans, at the end of the span or of the
     * read: a malformed byte later in the same read is found before the bytes in front of it
     * are counted against max_header_bytes or a header's own bound. Which of the two a
     * malformed, over-long head reports may depend on where the reads end. */
    int head_error_either = a->rc == HV_EPROTO &&
                            (a->fault == HV_D_HTTP_PARSE || b->fault == HV_D_HTTP_PARSE);
    if (!head_error_either)
        FUZZ_CHECK(strcmp(a->error, b->error) == 0, "%s: error \"%s\" vs \"%s\"", how, a->error,
                   b->error);
    FUZZ_CHECK(a->heads == b->heads, "%s: %d vs %d head callbacks", how, a->heads, b->heads);
    FUZZ_CHECK(a->complete == b->complete, "%s: complete %d vs %d", how, a->complete, b->complete);
    FUZZ_CHECK(a->truncated == b->truncated, "%s: truncated %d vs %d", how, a->truncated,
               b->truncated);
    /* What the head callback saw; before it, an error can stop the two runs at different
     * points of a header value. */
    if (a->heads > 0)
        compare_heads(how, &a->head, &b->head);
    if (a->rc == 1)
        FUZZ_CHECK(same_bytes(a->body, a->body_len, b->body, b->body_len),
                   "%s: body of %zu vs %zu bytes", how, a->body_len, b->body_len);
    /* Bytes that follow a complete response make it not reusable; when a read boundary
     * falls exactly at its end, those bytes were simply never fed. */
    if (a->rc == 1 && a->fed == len && b->fed == len)
        FUZZ_CHECK(a->keep_alive == b->keep_alive, "%s: keep_alive %d vs %d", how, a->keep_alive,
                   b->keep_alive);
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input_t in = {data, size};
    uint8_t flags = fuzz_byte(&in);
    uint8_t sizes = fuzz_byte(&in);
    uint8_t more = fuzz_byte(&in);
    size_t ncuts = (more >> 4) & 7;
    uint16_t raw_cuts[7];
    for (size_t i = 0; i < ncuts; i++)
        raw_cuts[i] = fuzz_u16(&in);

    hv_http_limits_t lim;
    lim.max_body = max_bodies[sizes & 15];
    lim.max_header_bytes = max_heads[sizes >> 4];
    lim.max_drain = max_drains[more & 3];
    lim.truncate = (flags >> 2) & 1;
    static const hv_http_body_t modes[4] = {HV_HTTP_BODY_KEEP, HV_HTTP_BODY_KEEP,
                                            HV_HTTP_BODY_DISCARD, HV_HTTP_BODY_ABORT};
    hv_http_body_t mode = modes[flags & 3];
    int eof = (flags >> 3) & 1;

    /* The payload in a buffer of its own, so that a read past its end is caught. */
    size_t len = in.left;
    char *payload = fuzz_strndup(in.p, len);
    size_t cuts[7];
    for (size_t i = 0; i < ncuts; i++)
        cuts[i] = len > 0 ? raw_cuts[i] % (len + 1) : 0;
    qsort(cuts, ncuts, sizeof(cuts[0]), cmp_size);

    outcome_t whole, split;
    run(payload, len, NULL, 0, eof, &lim, mode, &whole);
    run(payload, len, cuts, ncuts, eof, &lim, mode, &split);
    compare("split", &whole, &split, len);
    outcome_free(&split);

    if ((flags & 0x10) && len <= 2048) {
        size_t *every = malloc((len + 1) * sizeof(*every));
        for (size_t i = 0; i <= len; i++)
            every[i] = i;
        outcome_t bytewise;
        run(payload, len, every, len + 1, eof, &lim, mode, &bytewise);
        compare("byte by byte", &whole, &bytewise, len);
        outcome_free(&bytewise);
        free(every);
    }
    outcome_free(&whole);
    free(payload);
    return 0;
}
