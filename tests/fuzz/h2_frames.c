/*
 * h2_frames: an HTTP/2 session (h2.h) fed a server's frames, its streams' responses going
 * through http.h's HTTP/2 path as fetch sends them.
 *
 * Input: a small header, then the bytes the server sends (after its connection preface,
 * which a client does not receive: the first frame must be its SETTINGS).
 *   byte 0   bits 0-1: streams submitted before the first byte (1-4); bit 2: the session is
 *            held (data not given back); bit 3: the head callback discards the body;
 *            bits 4-5: max_body from a small table; bit 6: release the hold half way
 *   byte 1   where the payload is cut in two (a fraction of 256)
 *
 * h2.h promises: every stream submitted ends exactly once unless cancelled, on_gone comes
 * once and after every stream's end, nothing is called back after it, and what a held
 * session keeps is bounded by its streams' windows.
 */
#include <string.h>

#include "fuzz.h"
#include "harvestd/common.h"
#include "harvestd/h2.h"
#include "harvestd/http.h"

#define STREAMS_MAX 4
#define WINDOW (64 * 1024)

static const uint64_t max_bodies[4] = {16, 1000, 65536, 2 * 1024 * 1024};

typedef struct {
    hv_http_t http;
    int ready;
    int ended;
    int failed;   /* http.h refused: the callback asked for a reset */
    int complete;
} stream_t;

typedef struct {
    stream_t streams[STREAMS_MAX];
    unsigned nstreams;
    int gone;
    hv_http_body_t mode;
    hv_http_limits_t limits;
} owner_t;

static owner_t *current;

static hv_http_body_t on_head(hv_http_t *h)
{
    (void)h;
    return current->mode;
}

static int cb_field(void *sd, const char *name, size_t nlen, const char *value, size_t vlen)
{
    stream_t *st = sd;
    FUZZ_CHECK(!st->ended && !current->gone, "a field after the stream's end");
    FUZZ_CHECK(nlen == 0 || name[0] != ':', "a pseudo-field reached the owner");
    if (st->failed)
        return 1;
    if (hv_http_h2_field(&st->http, name, nlen, value, vlen) != 0)
        st->failed = 1;
    return st->failed;
}

static int cb_head(void *sd, int status)
{
    stream_t *st = sd;
    FUZZ_CHECK(!st->ended && !current->gone, "a head after the stream's end");
    FUZZ_CHECK(status >= 200 && status <= 999, "an interim or invalid status: %d", status);
    int rc = hv_http_h2_head(&st->http, status);
    if (rc < 0)
        st->failed = 1;
    if (rc == 1)
        st->complete = 1;
    return rc != 0;
}

static int cb_data(void *sd, const char *data, size_t len)
{
    stream_t *st = sd;
    FUZZ_CHECK(!st->ended && !current->gone, "data after the stream's end");
    int rc = hv_http_h2_data(&st->http, data, len);
    if (rc < 0)
        st->failed = 1;
    if (rc == 1)
        st->complete = 1;
    return rc != 0;
}

static void cb_end(void *sd, const hv_h2_end_t *end)
{
    stream_t *st = sd;
    FUZZ_CHECK(!st->ended, "a stream ended twice");
    FUZZ_CHECK(!current->gone, "a stream ended after on_gone");
    FUZZ_CHECK(end->kind <= HV_H2_LOST, "unknown ending %d", (int)end->kind);
    FUZZ_CHECK(hv_h2_code_name(end->code) != NULL && hv_h2_end_name(end) != NULL, "no name");
    st->ended = 1;
    if (end->kind == HV_H2_COMPLETE && !st->failed && !st->complete) {
        int rc = hv_http_h2_end(&st->http);
        FUZZ_CHECK(rc == 1 || rc < 0, "hv_http_h2_end said %d", rc);
    } else if (end->kind == HV_H2_LOST) {
        FUZZ_CHECK(hv_http_h2_lost(&st->http) == HV_ECLOSED, "a lost stream is no HV_ECLOSED");
    }
}

static void cb_timeout(void *sd)
{
    (void)sd;
    FUZZ_CHECK(0, "a deadline fired without a loop");
}

static void cb_room(void *owner)
{
    FUZZ_CHECK(owner == current && !current->gone, "room after on_gone");
}

static void cb_gone(void *owner)
{
    FUZZ_CHECK(owner == current, "another owner");
    FUZZ_CHECK(!current->gone, "on_gone twice");
    for (unsigned i = 0; i < current->nstreams; i++)
        FUZZ_CHECK(current->streams[i].ended, "on_gone before stream %u ended", i);
    current->gone = 1;
}

static const hv_h2_cbs_t cbs = {cb_field, cb_head, cb_data, cb_end, cb_timeout, cb_room, cb_gone};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input_t in = {data, size};
    uint8_t flags = fuzz_byte(&in);
    uint8_t cut = fuzz_byte(&in);
    owner_t o;
    memset(&o, 0, sizeof(o));
    current = &o;
    o.mode = flags & 8 ? HV_HTTP_BODY_DISCARD : HV_HTTP_BODY_KEEP;
    o.limits.max_body = max_bodies[(flags >> 4) & 3];
    o.limits.max_header_bytes = 16 * 1024;
    o.limits.max_drain = 64 * 1024;

    hv_h2_settings_t set = {.max_streams = STREAMS_MAX, .stream_window = WINDOW,
                            .max_header_list = 16 * 1024, .idle_ms = 1000};
    hv_h2_stats_t stats;
    memset(&stats, 0, sizeof(stats));
    hv_h2_t *s = hv_h2_fuzz_new(&set, &cbs, &o, &stats);
    FUZZ_CHECK(s != NULL, "no session");
    if (flags & 4)
        hv_h2_hold(s, 1);

    /* Before the server's SETTINGS, one stream may go; the others are submitted once room
     * shows (as fetch does), between the two pieces of input. */
    unsigned want = 1 + (flags & 3);
    static const hv_h2_field_t req[] = {
        {":method", 7, "GET", 3},     {":scheme", 7, "https", 5},
        {":authority", 10, "a.test", 6}, {":path", 5, "/", 1},
        {"accept-encoding", 15, "gzip, deflate, br, zstd", 23},
    };
    for (int round = 0; round < 3; round++) {
        while (o.nstreams < want && !o.gone && hv_h2_room(s) > 0) {
            stream_t *st = &o.streams[o.nstreams];
            hv_http_init(&st->http, &o.limits, on_head, st);
            st->ready = 1;
            int32_t id = hv_h2_submit(s, req, HV_ARRAY_SIZE(req), st);
            FUZZ_CHECK(id > 0, "submit failed with room: %d", (int)id);
            o.nstreams++;
        }
        if (round == 2 || o.gone)
            break;
        size_t n = round == 0 ? in.left * cut / 256 : in.left;
        int rc = hv_h2_fuzz_feed(s, in.p, n);
        in.p += n;
        in.left -= n;
        if (flags & 4)
            FUZZ_CHECK(hv_h2_held(s) <= (uint64_t)o.nstreams * WINDOW,
                       "held %llu over %u windows", (unsigned long long)hv_h2_held(s),
                       o.nstreams);
        if (round == 0 && (flags & 64))
            hv_h2_hold(s, 0);
        if (rc != 0)
            FUZZ_CHECK(o.gone, "the session gave up without on_gone");
    }
    hv_h2_fuzz_free(s);
    for (unsigned i = 0; i < o.nstreams; i++)
        if (o.streams[i].ready)
            hv_http_free(&o.streams[i].http);
    current = NULL;
    return 0;
}
