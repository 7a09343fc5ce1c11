/*
 * report.c: a harvestd output summed up as one HTML page (see report.h for what is kept, its
 * bounds, and what a record is). Three parts: the line scanner, the tables the records are
 * counted into, and the page. The command is src/cmd/report.c.
 */
#include "harvestd/report.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>
#include <uv.h>

#include "harvestd/common.h"
#include "harvestd/utf8.h"

/* The first bytes of an unreadable line shown on the page. */
#define UNREADABLE_SHOWN 160
/* The reading buffer starts at this and doubles up to the line limit. */
#define BUF_START ((size_t)64 << 10)
/* The largest integer below which every integer has a double of its own. */
#define INT_MAX_EXACT (((uint64_t)1 << 53) - 1)
/* The "error type" of failures whose type came after the first HV_REPORT_ERROR_TYPES_MAX. */
#define ET_OTHER HV_REPORT_ERROR_TYPES_MAX

/* ------------------------------------------------------------------------------ records */

/* The members of a record the report reads; the others are checked for syntax and skipped. */
enum {
    F_REQUESTED_URL,
    F_URL,
    F_STATUS,
    F_HTTP_STATUS,
    F_TITLE,
    F_BYTES,
    F_ELAPSED_MS,
    F_FETCHED_AT,
    F_STAGE,
    F_ERROR_TYPE,
    F_ERROR,
    F__COUNT
};

static const struct {
    const char *name;
    int is_int;
    uint64_t max; /* of an integer */
} fields[F__COUNT] = {
    [F_REQUESTED_URL] = {"requested_url", 0, 0},
    [F_URL] = {"url", 0, 0},
    [F_STATUS] = {"status", 0, 0},
    [F_HTTP_STATUS] = {"http_status", 1, 999},
    [F_TITLE] = {"title", 0, 0},
    [F_BYTES] = {"bytes", 1, INT_MAX_EXACT},
    [F_ELAPSED_MS] = {"elapsed_ms", 1, INT_MAX_EXACT},
    [F_FETCHED_AT] = {"fetched_at", 0, 0},
    [F_STAGE] = {"stage", 0, 0},
    [F_ERROR_TYPE] = {"error_type", 0, 0},
    [F_ERROR] = {"error", 0, 0},
};

/* A member's value as it stands in the line (a JSON text: "..." or a number, or any other). */
typedef struct {
    const char *p;
    size_t len;
} slice_t;

/* A record, as much of it as the report keeps; texts are cut to their buffers. */
typedef struct {
    char url[HV_REPORT_URL_MAX + 1]; /* requested_url */
    size_t url_len;
    char title[HV_REPORT_TITLE_MAX + 1];
    char status[8];
    char stage[16];
    char error_type[HV_REPORT_ERROR_TYPE_LEN + 1];
    char error[HV_REPORT_TEXT_MAX + 1];
    size_t error_len;
    char fetched_at[40];
    int ok, has_title, has_http, has_bytes, has_elapsed;
    int url_cut, title_cut, error_cut; /* longer than kept */
    uint64_t http_status, bytes, elapsed_ms;
} rec_t;

/* -------------------------------------------------------------------------- the scanner */

typedef struct {
    const char *p, *end;
    int too_deep;
} scan_t;

static void skip_ws(scan_t *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\r' || *s->p == '\n'))
        s->p++;
}

static int is_digit(const scan_t *s)
{
    return s->p < s->end && hv_ascii_is_digit((unsigned char)*s->p);
}

/* A string, from its opening quote: control characters must be escaped, escapes must be
 * JSON's. Its bytes are not checked as UTF-8 here: the page repairs what it shows. */
static int scan_string(scan_t *s)
{
    s->p++;
    while (s->p < s->end) {
        unsigned char c = (unsigned char)*s->p++;
        if (c == '"')
            return 0;
        if (c < 0x20)
            return -1;
        if (c != '\\')
            continue;
        if (s->p >= s->end)
            return -1;
        c = (unsigned char)*s->p++;
        if (c == 'u') {
            if (s->end - s->p < 4)
                return -1;
            for (int i = 0; i < 4; i++)
                if (!hv_ascii_is_hex((unsigned char)s->p[i]))
                    return -1;
            s->p += 4;
        } else if (c == '\0' || strchr("\"\\/bfnrt", c) == NULL) {
            return -1;
        }
    }
    return -1;
}

static int scan_number(scan_t *s)
{
    if (s->p < s->end && *s->p == '-')
        s->p++;
    if (s->p < s->end && *s->p == '0')
        s->p++;
    else if (is_digit(s))
        while (is_digit(s))
            s->p++;
    else
        return -1;
    if (s->p < s->end && *s->p == '.') {
        s->p++;
        if (!is_digit(s))
            return -1;
        while (is_digit(s))
            s->p++;
    }
    if (s->p < s->end && (*s->p == 'e' || *s->p == 'E')) {
        s->p++;
        if (s->p < s->end && (*s->p == '+' || *s->p == '-'))
            s->p++;
        if (!is_digit(s))
            return -1;
        while (is_digit(s))
            s->p++;
    }
    return 0;
}

static int scan_literal(scan_t *s, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(s->end - s->p) < n || memcmp(s->p, word, n) != 0)
        return -1;
    s->p += n;
    return 0;
}

static int scan_value(scan_t *s, int depth);

/* An object or an array (from its bracket) inside `depth` open ones. */
static int scan_container(scan_t *s, int depth)
{
    char close = *s->p == '{' ? '}' : ']';
    if (depth >= HV_REPORT_DEPTH_MAX) {
        s->too_deep = 1;
        return -1;
    }
    s->p++;
    skip_ws(s);
    if (s->p < s->end && *s->p == close) {
        s->p++;
        return 0;
    }
    for (;;) {
        skip_ws(s);
        if (close == '}') {
            if (s->p >= s->end || *s->p != '"' || scan_string(s) != 0)
                return -1;
            skip_ws(s);
            if (s->p >= s->end || *s->p != ':')
                return -1;
            s->p++;
        }
        if (scan_value(s, depth + 1) != 0)
            return -1;
        skip_ws(s);
        if (s->p < s->end && *s->p == ',') {
            s->p++;
            continue;
        }
        if (s->p < s->end && *s->p == close) {
            s->p++;
            return 0;
        }
        return -1;
    }
}

static int scan_value(scan_t *s, int depth)
{
    skip_ws(s);
    if (s->p >= s->end)
        return -1;
    switch (*s->p) {
    case '{':
    case '[':
        return scan_container(s, depth);
    case '"':
        return scan_string(s);
    case 't':
        return scan_literal(s, "true");
    case 'f':
        return scan_literal(s, "false");
    case 'n':
        return scan_literal(s, "null");
    default:
        return *s->p == '-' || hv_ascii_is_digit((unsigned char)*s->p) ? scan_number(s) : -1;
    }
}

/* Drop an incomplete UTF-8 sequence at the end of out[0..*n) (left by a cut). */
static void trim_partial(const char *out, size_t *n)
{
    size_t j = *n;
    for (int back = 0; back < 4 && j > 0; back++) {
        unsigned char c = (unsigned char)out[--j];
        if ((c & 0xC0) == 0x80)
            continue;
        size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        if (j + need > *n)
            *n = j;
        return;
    }
}

static size_t put_utf8(char *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | cp >> 6);
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12);
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18);
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

static uint32_t hex4(const char *p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v = v << 4 | (uint32_t)hv_ascii_hex_value((unsigned char)p[i]);
    return v;
}

/*
 * The text of a string the scanner accepted (`v`, quotes included) into `out` (`cap` bytes,
 * NUL-terminated), cut at a character when it does not fit: returns the length, and *cut.
 * \u0000 and unpaired surrogates become U+FFFD, so that the text is one C string.
 */
static size_t decode_string(slice_t v, char *out, size_t cap, int *cut)
{
    const char *p = v.p + 1, *end = v.p + v.len - 1;
    size_t n = 0;
    *cut = 0;
    while (p < end) {
        char tmp[4];
        size_t k;
        if (*p != '\\') {
            tmp[0] = *p++;
            k = 1;
        } else {
            char c = p[1];
            p += 2;
            if (c != 'u') {
                static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
                tmp[0] = to[strchr(from, c) - from];
                k = 1;
            } else {
                uint32_t cp = hex4(p);
                p += 4;
                if (cp >= 0xD800 && cp <= 0xDBFF && end - p >= 6 && p[0] == '\\' && p[1] == 'u') {
                    uint32_t lo = hex4(p + 2);
                    if (lo >= 0xDC00 && lo <= 0xDFFF) {
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                        p += 6;
                    }
                }
                if (cp == 0 || (cp >= 0xD800 && cp <= 0xDFFF))
                    cp = 0xFFFD;
                k = put_utf8(tmp, cp);
            }
        }
        if (n + k >= cap) {
            *cut = 1;
            break;
        }
        memcpy(out + n, tmp, k);
        n += k;
    }
    if (*cut)
        trim_partial(out, &n);
    out[n] = '\0';
    return n;
}

/* A number the scanner accepted, when it is an integer from 0 to `max`. */
static int decode_uint(slice_t v, uint64_t max, uint64_t *out)
{
    char num[48];
    if (v.len == 0 || v.len >= sizeof(num))
        return -1;
    memcpy(num, v.p, v.len);
    num[v.len] = '\0';
    char *end;
    double d = strtod(num, &end);
    if (end != num + v.len || !(d >= 0) || d > (double)max || d != floor(d))
        return -1;
    *out = (uint64_t)d;
    return 0;
}

static int field_of(const char *key, size_t len)
{
    for (int f = 0; f < F__COUNT; f++)
        if (strlen(fields[f].name) == len && memcmp(fields[f].name, key, len) == 0)
            return f;
    return -1;
}

/* The members of the line's top-level object that the report reads (the last of a name
 * wins), or why the line is no object. `v[f].p` stays NULL for a member not given. */
static hv_report_line_t scan_line(const char *line, size_t len, slice_t v[F__COUNT])
{
    scan_t s = {.p = line, .end = line + len};
    memset(v, 0, F__COUNT * sizeof(*v));
    skip_ws(&s);
    if (s.p == s.end)
        return HV_REPORT_LINE_EMPTY;
    if (*s.p != '{') {
        if (scan_value(&s, 0) != 0)
            return s.too_deep ? HV_REPORT_LINE_TOO_DEEP : HV_REPORT_LINE_NOT_JSON;
        skip_ws(&s);
        return s.p == s.end ? HV_REPORT_LINE_NOT_OBJECT : HV_REPORT_LINE_NOT_JSON;
    }
    s.p++;
    skip_ws(&s);
    if (s.p < s.end && *s.p == '}') {
        s.p++;
    } else {
        for (;;) {
            skip_ws(&s);
            const char *key = s.p;
            if (s.p >= s.end || *s.p != '"' || scan_string(&s) != 0)
                return HV_REPORT_LINE_NOT_JSON;
            slice_t k = {key, (size_t)(s.p - key)};
            skip_ws(&s);
            if (s.p >= s.end || *s.p != ':')
                return HV_REPORT_LINE_NOT_JSON;
            s.p++;
            skip_ws(&s);
            const char *val = s.p;
            if (scan_value(&s, 1) != 0)
                return s.too_deep ? HV_REPORT_LINE_TOO_DEEP : HV_REPORT_LINE_NOT_JSON;
            int f;
            if (memchr(k.p, '\\', k.len) == NULL) {
                f = field_of(k.p + 1, k.len - 2);
            } else { /* a name spelled with escapes: "\u0073tatus" is status */
                char name[32];
                int cut;
                size_t n = decode_string(k, name, sizeof(name), &cut);
                f = cut ? -1 : field_of(name, n);
            }
            if (f >= 0)
                v[f] = (slice_t){val, (size_t)(s.p - val)};
            skip_ws(&s);
            if (s.p < s.end && *s.p == ',') {
                s.p++;
                continue;
            }
            if (s.p < s.end && *s.p == '}') {
                s.p++;
                break;
            }
            return HV_REPORT_LINE_NOT_JSON;
        }
    }
    skip_ws(&s);
    return s.p == s.end ? HV_REPORT_LINE_RECORD : HV_REPORT_LINE_NOT_JSON;
}

/* The record in the members found, or HV_REPORT_LINE_BAD_FIELD with the member's name. */
static hv_report_line_t read_record(const slice_t v[F__COUNT], rec_t *rec, const char **bad)
{
    int cut;
    /* Only what a line may leave unset is cleared: the record is read for every line. */
    rec->url[0] = rec->title[0] = rec->stage[0] = rec->error_type[0] = rec->error[0] = '\0';
    rec->fetched_at[0] = '\0';
    rec->url_len = rec->error_len = 0;
    rec->ok = rec->has_title = rec->has_http = rec->has_bytes = rec->has_elapsed = 0;
    rec->url_cut = rec->title_cut = rec->error_cut = 0;
    for (int f = 0; f < F__COUNT; f++) {
        *bad = fields[f].name;
        if (v[f].p == NULL) {
            if (f == F_REQUESTED_URL || f == F_STATUS)
                return HV_REPORT_LINE_BAD_FIELD;
            continue;
        }
        int is_string = v[f].p[0] == '"';
        int is_number = v[f].p[0] == '-' || hv_ascii_is_digit((unsigned char)v[f].p[0]);
        if (fields[f].is_int ? !is_number : !is_string)
            return HV_REPORT_LINE_BAD_FIELD;
        uint64_t n = 0;
        if (fields[f].is_int && decode_uint(v[f], fields[f].max, &n) != 0)
            return HV_REPORT_LINE_BAD_FIELD;
        switch (f) {
        case F_REQUESTED_URL:
            rec->url_len = decode_string(v[f], rec->url, sizeof(rec->url), &rec->url_cut);
            break;
        case F_STATUS:
            decode_string(v[f], rec->status, sizeof(rec->status), &cut);
            rec->ok = strcmp(rec->status, "ok") == 0;
            if (cut || (!rec->ok && strcmp(rec->status, "failed") != 0))
                return HV_REPORT_LINE_BAD_FIELD;
            break;
        case F_HTTP_STATUS:
            rec->has_http = 1;
            rec->http_status = n;
            break;
        case F_TITLE:
            rec->has_title = 1;
            decode_string(v[f], rec->title, sizeof(rec->title), &rec->title_cut);
            break;
        case F_BYTES:
            rec->has_bytes = 1;
            rec->bytes = n;
            break;
        case F_ELAPSED_MS:
            rec->has_elapsed = 1;
            rec->elapsed_ms = n;
            break;
        case F_FETCHED_AT:
            decode_string(v[f], rec->fetched_at, sizeof(rec->fetched_at), &cut);
            if (cut)
                rec->fetched_at[0] = '\0';
            break;
        case F_STAGE:
            decode_string(v[f], rec->stage, sizeof(rec->stage), &cut);
            break;
        case F_ERROR_TYPE:
            decode_string(v[f], rec->error_type, sizeof(rec->error_type), &cut);
            break;
        case F_ERROR:
            rec->error_len = decode_string(v[f], rec->error, sizeof(rec->error), &rec->error_cut);
            break;
        default: /* F_URL: checked, not kept */
            break;
        }
    }
    *bad = NULL;
    return HV_REPORT_LINE_RECORD;
}

/* ------------------------------------------------------------------------------- tables */

typedef struct {
    uint64_t requests, ok, failed, timed;
    uint16_t type[HV_REPORT_HOST_TYPES]; /* error type indexes, first seen first */
    uint64_t type_n[HV_REPORT_HOST_TYPES];
    unsigned ntypes;
    uint64_t other_types;
    uint32_t fine[HV_REPORT_FINE_BUCKETS]; /* elapsed_ms */
} hstats_t;

typedef struct {
    char *key; /* host[:port]; "" for no host */
    hstats_t st;
    UT_hash_handle hh;
} host_t;

typedef struct {
    char *key; /* error_type '\0' error */
    size_t keylen;
    uint64_t count;
    unsigned nsamples;
    char *samples[HV_REPORT_SAMPLES];
    unsigned error_cut : 1;                  /* the error is longer than kept */
    unsigned sample_cut : HV_REPORT_SAMPLES; /* bit k: samples[k] is longer than kept */
    UT_hash_handle hh;
} group_t;

/* One of the slowest or largest records. */
typedef struct {
    uint64_t value, line;
    uint64_t elapsed_ms, bytes, http_status;
    int ok, has_elapsed, has_bytes, has_http, has_title, url_cut, title_cut;
    char url[HV_REPORT_URL_MAX + 1];
    char title[HV_REPORT_TITLE_MAX + 1];
    char error_type[HV_REPORT_ERROR_TYPE_LEN + 1];
} top_item_t;

/* A heap with the weakest item (smallest value; of equal values, the later line) on top. */
typedef struct {
    top_item_t *v;
    size_t n, cap;
} top_t;

typedef struct {
    uint64_t line;
    hv_report_line_t why;
    const char *field; /* HV_REPORT_LINE_BAD_FIELD: the member */
    char text[UNREADABLE_SHOWN + 1];
    size_t len;
    int cut; /* the line is longer than the text shown */
} unreadable_t;

/* Elapsed times: 1-2-5 steps in ms; sizes: doublings from 1 KiB. */
static const uint64_t time_edges[] = {1,   2,    5,    10,   20,    50,    100,   200,
                                      500, 1000, 2000, 5000, 10000, 20000, 50000, 100000};
#define TIME_BUCKETS (HV_ARRAY_SIZE(time_edges) + 1)
#define SIZE_EDGES 21 /* 1 KiB << 0 .. 1 KiB << 20 (1 GiB) */
#define SIZE_BUCKETS (SIZE_EDGES + 1)

enum { STAGE_INPUT, STAGE_DOWNLOAD, STAGE_PARSE, STAGE_OTHER, STAGE_NONE, STAGE__COUNT };
static const char *const stage_names[STAGE__COUNT] = {"input", "download", "parse", "other",
                                                      "(none)"};

struct hv_report_s {
    hv_report_opts_t o;

    /* reading */
    char *buf;
    size_t len, cap;
    int skipping; /* in a line past the limit: its bytes are dropped up to its newline */
    char skip_head[UNREADABLE_SHOWN]; /* ... its first bytes */
    size_t skip_head_len;
    uint64_t skip_len; /* ... and its length so far */
    uint64_t lineno;
    rec_t rec;

    /* counts */
    uint64_t by_reason[HV_REPORT_LINE__COUNT];
    uint64_t ok, failed;
    uint64_t http[1000];
    uint64_t stage[STAGE__COUNT];
    char et_name[HV_REPORT_ERROR_TYPES_MAX][HV_REPORT_ERROR_TYPE_LEN + 1];
    size_t net;
    uint64_t et_count[HV_REPORT_ERROR_TYPES_MAX + 1];
    uint64_t time_hist[TIME_BUCKETS][2]; /* [bucket][0 ok, 1 failed] */
    uint64_t size_hist[SIZE_BUCKETS][2];
    uint64_t time_fine[HV_REPORT_FINE_BUCKETS], size_fine[HV_REPORT_FINE_BUCKETS]; /* ok sizes */
    uint64_t timed, sized, ok_sized, bytes_total;
    char first_at[40], last_at[40];

    host_t *hosts;
    size_t nhosts;
    hstats_t other_hosts;

    group_t *groups;
    size_t ngroups;
    uint64_t other_group_failures;

    top_t slow, large;
    unreadable_t un[HV_REPORT_UNREADABLE_SAMPLES];
    size_t nun;
};

unsigned hv_report_fine_bucket(uint64_t v)
{
    if (v < 8)
        return (unsigned)v;
    if (v >= (uint64_t)1 << 40)
        return HV_REPORT_FINE_BUCKETS - 1;
    unsigned k = 63u - (unsigned)__builtin_clzll(v); /* 3 .. 39 */
    unsigned sub = (unsigned)(v >> (k - 2)) & 3u;
    return 8u + (k - 3u) * 4u + sub;
}

uint64_t hv_report_fine_value(unsigned bucket)
{
    if (bucket < 8)
        return bucket;
    if (bucket >= HV_REPORT_FINE_BUCKETS)
        bucket = HV_REPORT_FINE_BUCKETS - 1;
    unsigned k = (bucket - 8u) / 4u + 3u, sub = (bucket - 8u) % 4u;
    uint64_t width = (uint64_t)1 << (k - 2);
    return (4u + sub) * width + width / 2;
}

/* The value at quantile `q` of a histogram of `n` values (the lower median for 0.5; 0 when
 * empty). */
static uint64_t fine_quantile(const uint64_t *h, uint64_t n, double q)
{
    if (n == 0)
        return 0;
    uint64_t want = (uint64_t)ceil(q * (double)n), seen = 0;
    if (want == 0)
        want = 1;
    for (unsigned b = 0; b < HV_REPORT_FINE_BUCKETS; b++) {
        seen += h[b];
        if (seen >= want)
            return hv_report_fine_value(b);
    }
    return hv_report_fine_value(HV_REPORT_FINE_BUCKETS - 1);
}

static void host_fine(const hstats_t *st, uint64_t *out)
{
    for (unsigned b = 0; b < HV_REPORT_FINE_BUCKETS; b++)
        out[b] = st->fine[b];
}

static uint64_t host_median(const hstats_t *st)
{
    uint64_t h[HV_REPORT_FINE_BUCKETS];
    host_fine(st, h);
    return fine_quantile(h, st->timed, 0.5);
}

static size_t bucket_of(const uint64_t *edges, size_t nedges, uint64_t v)
{
    size_t b = 0;
    while (b < nedges && v >= edges[b])
        b++;
    return b;
}

static uint64_t size_edge(size_t i)
{
    return (uint64_t)1024 << i;
}

static size_t size_bucket(uint64_t v)
{
    size_t b = 0;
    while (b < SIZE_EDGES && v >= size_edge(b))
        b++;
    return b;
}

static void sat_inc32(uint32_t *c)
{
    if (*c != UINT32_MAX)
        (*c)++;
}

hv_report_t *hv_report_new(const hv_report_opts_t *opts)
{
    hv_report_t *r = hv_xcalloc(1, sizeof(*r));
    if (opts != NULL)
        r->o = *opts;
    if (r->o.top == 0)
        r->o.top = HV_REPORT_TOP_DEFAULT;
    if (r->o.hosts == 0)
        r->o.hosts = HV_REPORT_HOSTS_SHOWN_DEFAULT;
    if (r->o.hosts_max == 0 || r->o.hosts_max > HV_REPORT_HOSTS_MAX)
        r->o.hosts_max = HV_REPORT_HOSTS_MAX;
    if (r->o.groups_max == 0 || r->o.groups_max > HV_REPORT_GROUPS_MAX)
        r->o.groups_max = HV_REPORT_GROUPS_MAX;
    if (r->o.line_max == 0 || r->o.line_max > HV_REPORT_LINE_MAX)
        r->o.line_max = HV_REPORT_LINE_MAX;
    r->o.top = HV_MIN(r->o.top, (size_t)HV_REPORT_ROWS_MAX);
    r->o.hosts = HV_MIN(r->o.hosts, (size_t)HV_REPORT_ROWS_MAX);
    r->slow.cap = r->large.cap = r->o.top;
    r->slow.v = hv_xcalloc(r->o.top, sizeof(top_item_t));
    r->large.v = hv_xcalloc(r->o.top, sizeof(top_item_t));
    return r;
}

void hv_report_free(hv_report_t *r)
{
    if (r == NULL)
        return;
    host_t *h, *htmp;
    HASH_ITER(hh, r->hosts, h, htmp) {
        HASH_DEL(r->hosts, h);
        free(h->key);
        free(h);
    }
    group_t *g, *gtmp;
    HASH_ITER(hh, r->groups, g, gtmp) {
        HASH_DEL(r->groups, g);
        for (unsigned i = 0; i < g->nsamples; i++)
            free(g->samples[i]);
        free(g->key);
        free(g);
    }
    free(r->slow.v);
    free(r->large.v);
    free(r->buf);
    free(r);
}

size_t hv_report_host_of(const char *url, size_t len, char *out, size_t cap)
{
    size_t i = 0;
    if (cap == 0)
        return 0;
    out[0] = '\0';
    if (len == 0 || !hv_ascii_is_alpha((unsigned char)url[0]))
        return 0;
    while (i < len &&
           (hv_ascii_is_alpha((unsigned char)url[i]) || hv_ascii_is_digit((unsigned char)url[i]) ||
            url[i] == '+' || url[i] == '-' || url[i] == '.'))
        i++;
    if (len - i < 3 || memcmp(url + i, "://", 3) != 0)
        return 0;
    i += 3;
    const char *a = url + i;
    while (i < len && url[i] != '/' && url[i] != '?' && url[i] != '#')
        i++;
    size_t n = (size_t)(url + i - a);
    const char *at = memrchr(a, '@', n);
    if (at != NULL) {
        n -= (size_t)(at + 1 - a);
        a = at + 1;
    }
    if (n == 0 || n > HV_REPORT_HOST_LEN_MAX || n >= cap)
        return 0;
    for (size_t k = 0; k < n; k++)
        out[k] = (char)hv_ascii_lower((unsigned char)a[k]);
    out[n] = '\0';
    return n;
}

/* The index of error type `name` (ET_OTHER once the table is full). */
static unsigned error_type_index(hv_report_t *r, const char *name)
{
    for (size_t i = 0; i < r->net; i++)
        if (strcmp(r->et_name[i], name) == 0)
            return (unsigned)i;
    if (r->net == HV_REPORT_ERROR_TYPES_MAX)
        return ET_OTHER;
    snprintf(r->et_name[r->net], sizeof(r->et_name[0]), "%s", name);
    return (unsigned)r->net++;
}

static hstats_t *host_stats(hv_report_t *r, const char *url, size_t len)
{
    char key[HV_REPORT_HOST_LEN_MAX + 1];
    size_t n = hv_report_host_of(url, len, key, sizeof(key));
    host_t *h;
    HASH_FIND(hh, r->hosts, key, n, h);
    if (h != NULL)
        return &h->st;
    if (r->nhosts >= r->o.hosts_max)
        return &r->other_hosts;
    h = hv_xcalloc(1, sizeof(*h));
    h->key = hv_xstrndup(key, n);
    HASH_ADD_KEYPTR(hh, r->hosts, h->key, n, h);
    r->nhosts++;
    return &h->st;
}

static void host_count(hstats_t *st, const rec_t *rec, unsigned et)
{
    st->requests++;
    if (rec->ok) {
        st->ok++;
    } else {
        st->failed++;
        unsigned i = 0;
        while (i < st->ntypes && st->type[i] != et)
            i++;
        if (i < st->ntypes) {
            st->type_n[i]++;
        } else if (st->ntypes < HV_REPORT_HOST_TYPES) {
            st->type[st->ntypes] = (uint16_t)et;
            st->type_n[st->ntypes++] = 1;
        } else {
            st->other_types++;
        }
    }
    if (rec->has_elapsed) {
        st->timed++;
        sat_inc32(&st->fine[hv_report_fine_bucket(rec->elapsed_ms)]);
    }
}

static void group_count(hv_report_t *r, const rec_t *rec)
{
    size_t tlen = strlen(rec->error_type), klen = tlen + 1 + rec->error_len;
    char key[sizeof(rec->error_type) + sizeof(rec->error)];
    memcpy(key, rec->error_type, tlen + 1);
    memcpy(key + tlen + 1, rec->error, rec->error_len);
    group_t *g;
    HASH_FIND(hh, r->groups, key, klen, g);
    if (g == NULL) {
        if (r->ngroups >= r->o.groups_max) {
            r->other_group_failures++;
            return;
        }
        g = hv_xcalloc(1, sizeof(*g));
        g->key = hv_xmalloc(klen);
        memcpy(g->key, key, klen);
        g->keylen = klen;
        g->error_cut = rec->error_cut != 0;
        HASH_ADD_KEYPTR(hh, r->groups, g->key, klen, g);
        r->ngroups++;
    }
    g->count++;
    if (g->nsamples < HV_REPORT_SAMPLES) {
        size_t n = HV_MIN(rec->url_len, (size_t)HV_REPORT_TEXT_MAX);
        trim_partial(rec->url, &n);
        if (n < rec->url_len || rec->url_cut)
            g->sample_cut |= 1u << g->nsamples;
        g->samples[g->nsamples++] = hv_xstrndup(rec->url, n);
    }
}

/* `a` is weaker than `b`: the one to drop first. */
static int top_weaker(const top_item_t *a, const top_item_t *b)
{
    return a->value < b->value || (a->value == b->value && a->line > b->line);
}

static void top_swap(top_t *t, size_t i, size_t j)
{
    top_item_t tmp = t->v[i];
    t->v[i] = t->v[j];
    t->v[j] = tmp;
}

/* Offer the record of line `line` with `value`: kept if it is among the top. Of equal values
 * the earlier line stays, so the outcome does not depend on anything but the file. */
static void top_offer(top_t *t, const rec_t *rec, uint64_t value, uint64_t line)
{
    if (t->n == t->cap && value <= t->v[0].value)
        return;
    int grow = t->n < t->cap;
    size_t i = grow ? t->n++ : 0;
    top_item_t *it = &t->v[i];
    it->value = value;
    it->line = line;
    it->ok = rec->ok;
    it->has_elapsed = rec->has_elapsed;
    it->elapsed_ms = rec->elapsed_ms;
    it->has_bytes = rec->has_bytes;
    it->bytes = rec->bytes;
    it->has_http = rec->has_http;
    it->http_status = rec->http_status;
    it->has_title = rec->has_title;
    it->url_cut = rec->url_cut;
    it->title_cut = rec->title_cut;
    memcpy(it->url, rec->url, rec->url_len + 1);
    snprintf(it->title, sizeof(it->title), "%s", rec->title);
    snprintf(it->error_type, sizeof(it->error_type), "%s", rec->error_type);
    if (grow) {
        while (i > 0 && top_weaker(&t->v[i], &t->v[(i - 1) / 2])) {
            top_swap(t, i, (i - 1) / 2);
            i = (i - 1) / 2;
        }
        return;
    }
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        if (l < t->n && top_weaker(&t->v[l], &t->v[m]))
            m = l;
        if (l + 1 < t->n && top_weaker(&t->v[l + 1], &t->v[m]))
            m = l + 1;
        if (m == i)
            return;
        top_swap(t, i, m);
        i = m;
    }
}

/* An RFC 3339 UTC time as harvestd writes it: "YYYY-MM-DDTHH:MM:SS.mmmZ" (then the text
 * orders like the time). */
static int is_fetched_at(const char *s)
{
    static const char pattern[] = "dddd-dd-ddTdd:dd:dd.dddZ";
    if (strlen(s) != sizeof(pattern) - 1)
        return 0;
    for (size_t i = 0; pattern[i]; i++)
        if (pattern[i] == 'd' ? !hv_ascii_is_digit((unsigned char)s[i]) : s[i] != pattern[i])
            return 0;
    return 1;
}

static void count_record(hv_report_t *r, const rec_t *rec)
{
    unsigned et = 0;
    if (rec->ok) {
        r->ok++;
    } else {
        r->failed++;
        et = error_type_index(r, rec->error_type);
        r->et_count[et]++;
        const char *st = rec->stage;
        size_t s = st[0] == '\0'                 ? STAGE_NONE
                   : strcmp(st, "input") == 0    ? STAGE_INPUT
                   : strcmp(st, "download") == 0 ? STAGE_DOWNLOAD
                   : strcmp(st, "parse") == 0    ? STAGE_PARSE
                                                 : STAGE_OTHER;
        r->stage[s]++;
        group_count(r, rec);
    }
    if (rec->has_http)
        r->http[rec->http_status]++;
    if (rec->has_elapsed) {
        r->timed++;
        r->time_hist[bucket_of(time_edges, HV_ARRAY_SIZE(time_edges), rec->elapsed_ms)][!rec->ok]++;
        r->time_fine[hv_report_fine_bucket(rec->elapsed_ms)]++;
        top_offer(&r->slow, rec, rec->elapsed_ms, r->lineno);
    }
    if (rec->has_bytes) {
        r->sized++;
        r->size_hist[size_bucket(rec->bytes)][!rec->ok]++;
        r->bytes_total =
            r->bytes_total > UINT64_MAX - rec->bytes ? UINT64_MAX : r->bytes_total + rec->bytes;
        if (rec->ok) {
            r->ok_sized++;
            r->size_fine[hv_report_fine_bucket(rec->bytes)]++;
        }
        top_offer(&r->large, rec, rec->bytes, r->lineno);
    }
    if (is_fetched_at(rec->fetched_at)) {
        if (r->first_at[0] == '\0' || strcmp(rec->fetched_at, r->first_at) < 0)
            memcpy(r->first_at, rec->fetched_at, sizeof(r->first_at));
        if (strcmp(rec->fetched_at, r->last_at) > 0)
            memcpy(r->last_at, rec->fetched_at, sizeof(r->last_at));
    }
    host_count(host_stats(r, rec->url, rec->url_len), rec, et);
}

/* An unreadable line: `len` bytes long, of which the first `have` are at `line`. */
static void note_unreadable(hv_report_t *r, hv_report_line_t why, const char *field,
                            const char *line, size_t have, uint64_t len)
{
    r->by_reason[why]++;
    if (r->nun == HV_REPORT_UNREADABLE_SAMPLES)
        return;
    unreadable_t *u = &r->un[r->nun++];
    u->line = r->lineno;
    u->why = why;
    u->field = field;
    u->len = HV_MIN(have, (size_t)UNREADABLE_SHOWN);
    memcpy(u->text, line, u->len);
    u->cut = u->len < len;
    if (u->cut)
        trim_partial(u->text, &u->len);
    u->text[u->len] = '\0';
}

/* One line; `last`: the file ended without its newline. */
static hv_report_line_t add_line(hv_report_t *r, const char *line, size_t len, int last)
{
    slice_t v[F__COUNT];
    const char *bad = NULL;
    r->lineno++;
    if (len > r->o.line_max) {
        note_unreadable(r, HV_REPORT_LINE_TOO_LONG, NULL, line, len, len);
        return HV_REPORT_LINE_TOO_LONG;
    }
    hv_report_line_t what = scan_line(line, len, v);
    if (what == HV_REPORT_LINE_RECORD)
        what = read_record(v, &r->rec, &bad);
    if (what == HV_REPORT_LINE_NOT_JSON && last)
        what = HV_REPORT_LINE_CUT;
    if (what != HV_REPORT_LINE_RECORD) {
        note_unreadable(r, what, bad, line, len, len);
        return what;
    }
    r->by_reason[HV_REPORT_LINE_RECORD]++;
    count_record(r, &r->rec);
    return what;
}

hv_report_line_t hv_report_add_line(hv_report_t *r, const char *line, size_t len)
{
    return add_line(r, line, len, 0);
}

static void end_skipped(hv_report_t *r)
{
    r->lineno++;
    note_unreadable(r, HV_REPORT_LINE_TOO_LONG, NULL, r->skip_head, r->skip_head_len, r->skip_len);
    r->skipping = 0;
    r->skip_head_len = 0;
    r->skip_len = 0;
}

/* `n` more bytes of a line past the limit: only its first bytes are kept, to be shown. */
static void skip(hv_report_t *r, const char *data, size_t n)
{
    size_t more = HV_MIN(n, sizeof(r->skip_head) - r->skip_head_len);
    if (more > 0) /* `data` may be the NULL buffer of a line not begun */
        memcpy(r->skip_head + r->skip_head_len, data, more);
    r->skip_head_len += more;
    r->skip_len += n;
}

/* Keep `n` more bytes of the line being read, or start skipping it past the limit. */
static void append(hv_report_t *r, const char *data, size_t n)
{
    if (r->len + n > r->o.line_max) {
        r->skipping = 1;
        skip(r, r->buf, r->len);
        skip(r, data, n);
        r->len = 0;
        return;
    }
    if (r->len + n > r->cap) {
        size_t cap = r->cap ? r->cap : BUF_START;
        while (cap < r->len + n)
            cap *= 2;
        cap = HV_MIN(cap, r->o.line_max);
        r->buf = hv_xrealloc(r->buf, cap);
        r->cap = cap;
    }
    memcpy(r->buf + r->len, data, n);
    r->len += n;
}

void hv_report_feed(hv_report_t *r, const char *data, size_t len)
{
    while (len > 0) {
        const char *nl = memchr(data, '\n', len);
        size_t n = nl != NULL ? (size_t)(nl - data) : len;
        if (r->skipping) {
            skip(r, data, n);
            if (nl != NULL)
                end_skipped(r);
        } else if (nl != NULL && r->len == 0) {
            add_line(r, data, n, 0); /* a whole line in the piece: read where it is */
        } else {
            append(r, data, n);
            if (nl != NULL && r->skipping) {
                end_skipped(r);
            } else if (nl != NULL) {
                add_line(r, r->buf, r->len, 0);
                r->len = 0;
            }
        }
        if (nl == NULL)
            return;
        data += n + 1;
        len -= n + 1;
    }
}

void hv_report_finish(hv_report_t *r)
{
    if (r->skipping)
        end_skipped(r);
    else if (r->len > 0)
        add_line(r, r->buf, r->len, 1);
    r->len = 0;
    free(r->buf);
    r->buf = NULL;
    r->cap = 0;
}

void hv_report_get_totals(const hv_report_t *r, hv_report_totals_t *out)
{
    memset(out, 0, sizeof(*out));
    memcpy(out->by_reason, r->by_reason, sizeof(out->by_reason));
    out->records = r->by_reason[HV_REPORT_LINE_RECORD];
    for (int i = 1; i < HV_REPORT_LINE__COUNT; i++)
        out->unreadable += r->by_reason[i];
    out->lines = out->records + out->unreadable;
    out->ok = r->ok;
    out->failed = r->failed;
    out->hosts = r->nhosts;
    out->other_host_records = r->other_hosts.requests;
    out->groups = r->ngroups;
    out->other_group_failures = r->other_group_failures;
}

uint64_t hv_report_error_type_count(const hv_report_t *r, const char *name)
{
    for (size_t i = 0; i < r->net; i++)
        if (strcmp(r->et_name[i], name) == 0)
            return r->et_count[i];
    return 0;
}

uint64_t hv_report_group_count(const hv_report_t *r, const char *error_type, const char *error)
{
    size_t tlen = strlen(error_type), elen = strlen(error);
    char *key = hv_xmalloc(tlen + 1 + elen);
    memcpy(key, error_type, tlen + 1);
    memcpy(key + tlen + 1, error, elen);
    group_t *g;
    HASH_FIND(hh, r->groups, key, tlen + 1 + elen, g);
    free(key);
    return g != NULL ? g->count : 0;
}

int hv_report_get_host(const hv_report_t *r, const char *host, hv_report_host_t *out)
{
    host_t *h;
    HASH_FIND(hh, r->hosts, host, strlen(host), h);
    if (h == NULL)
        return UV_ENOENT;
    out->requests = h->st.requests;
    out->ok = h->st.ok;
    out->failed = h->st.failed;
    out->timed = h->st.timed;
    out->median_ms = host_median(&h->st);
    return 0;
}

/* --------------------------------------------------------------------------------- page */

static const char *const reason_keys[HV_REPORT_LINE__COUNT] = {
    [HV_REPORT_LINE_RECORD] = "record",       [HV_REPORT_LINE_EMPTY] = "empty",
    [HV_REPORT_LINE_NOT_JSON] = "not-json",   [HV_REPORT_LINE_CUT] = "cut",
    [HV_REPORT_LINE_TOO_DEEP] = "too-deep",   [HV_REPORT_LINE_NOT_OBJECT] = "not-object",
    [HV_REPORT_LINE_BAD_FIELD] = "bad-field", [HV_REPORT_LINE_TOO_LONG] = "too-long",
};

static const char *const reason_texts[HV_REPORT_LINE__COUNT] = {
    [HV_REPORT_LINE_RECORD] = "a record",
    [HV_REPORT_LINE_EMPTY] = "empty line",
    [HV_REPORT_LINE_NOT_JSON] = "not JSON",
    [HV_REPORT_LINE_CUT] = "cut short (the last line, without its newline)",
    [HV_REPORT_LINE_TOO_DEEP] = "JSON nested too deeply",
    [HV_REPORT_LINE_NOT_OBJECT] = "JSON, but not an object",
    [HV_REPORT_LINE_BAD_FIELD] = "a member missing or of the wrong type",
    [HV_REPORT_LINE_TOO_LONG] = "too long",
};

static const char css[] =
    ":root{--ok:#3b9a5c;--failed:#d4574b;--bad:#9aa0a6;--line:#e4e6ea;--soft:#f6f7f9;"
    "--muted:#667085;--ink:#1d2330}\n"
    "*{box-sizing:border-box}\n"
    "body{margin:0;color:var(--ink);background:#fff;font:14px/1.45 system-ui,-apple-system,"
    "'Segoe UI',Roboto,'DejaVu Sans',sans-serif}\n"
    "header{background:#1f2a37;color:#fff;padding:22px 36px 14px}\n"
    "header h1{margin:0 0 4px;font-size:22px;font-weight:600}\n"
    "header .file{font-family:ui-monospace,'DejaVu Sans Mono',monospace;color:#d7dee8;"
    "overflow-wrap:anywhere}\n"
    "header .meta{color:#9fb0c3;font-size:12px;margin-top:4px}\n"
    "nav{margin-top:12px;font-size:13px}\n"
    "nav a{color:#cfe0ff;text-decoration:none;margin-right:16px}\n"
    "main{padding:8px 36px 40px;max-width:1240px}\n"
    "section{margin-top:30px}\n"
    "h2{font-size:17px;margin:0 0 10px;padding-bottom:5px;border-bottom:1px solid var(--line)}\n"
    ".cards{display:flex;flex-wrap:wrap;gap:12px;margin:18px 0 14px}\n"
    ".card{border:1px solid var(--line);border-radius:8px;padding:10px 16px;min-width:132px;"
    "background:var(--soft)}\n"
    ".card .v{font-size:22px;font-weight:600;font-variant-numeric:tabular-nums}\n"
    ".card .k{color:var(--muted);font-size:11px;text-transform:uppercase;letter-spacing:.05em}\n"
    ".card .s{color:var(--muted);font-size:12px}\n"
    ".card.ok .v{color:var(--ok)}.card.failed .v{color:var(--failed)}\n"
    ".card.small .v{font-size:16px;padding-top:5px}\n"
    "table{border-collapse:collapse;margin:6px 0 4px}\n"
    "th,td{padding:5px 12px 5px 0;border-bottom:1px solid var(--line);text-align:left;"
    "vertical-align:top}\n"
    "th{font-size:12px;color:var(--muted);font-weight:600;text-transform:uppercase;"
    "letter-spacing:.03em;border-bottom:2px solid var(--line)}\n"
    "td.n,th.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap;"
    "padding-left:14px}\n"
    "td.url{font-family:ui-monospace,'DejaVu Sans Mono',monospace;font-size:12px;"
    "overflow-wrap:anywhere;max-width:620px}\n"
    "td.url .t{font-family:system-ui,sans-serif;color:var(--muted);font-size:12px}\n"
    "td.mono{font-family:ui-monospace,'DejaVu Sans Mono',monospace;font-size:12px;"
    "overflow-wrap:anywhere;max-width:520px}\n"
    "tr.sum td{color:var(--muted);font-style:italic}\n"
    ".nohost{font-style:italic;color:var(--muted)}\n"
    ".note{color:var(--muted);font-size:12px;margin:4px 0 8px}\n"
    ".grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(480px,1fr));gap:10px 36px}\n"
    "svg text{font-family:system-ui,sans-serif;fill:#4b5563}\n"
    "svg .ok{fill:var(--ok)}svg .failed{fill:var(--failed)}svg .bad{fill:var(--bad)}\n"
    "svg .grid{stroke:#eceef1}svg .axis{stroke:#9aa3ad}\n"
    ".key{display:inline-block;width:10px;height:10px;border-radius:2px;margin:0 4px 0 12px}\n"
    ".key.ok{background:var(--ok)}.key.failed{background:var(--failed)}"
    ".key.bad{background:var(--bad)}\n"
    ".pill{display:inline-block;padding:0 7px;border-radius:9px;font-size:12px;"
    "background:#eef0f3}\n"
    ".pill.ok{background:#e3f3e8;color:#23683c}.pill.failed{background:#fbe6e3;color:#9b2c22}\n"
    "ul.samples{margin:0;padding:0;list-style:none}\n"
    "footer{margin-top:40px;color:var(--muted);font-size:12px;border-top:1px solid var(--line);"
    "padding-top:10px}\n";

static void text(FILE *f, const char *s)
{
    hv_report_html_escape(f, s, strlen(s));
}

/* "…" after a text that was cut to what is kept. */
static void more(FILE *f, int cut)
{
    if (cut)
        fputs("\xE2\x80\xA6", f);
}

static const char *fmt_count(char *b, size_t cap, uint64_t n)
{
    char d[24];
    int len = snprintf(d, sizeof(d), "%" PRIu64, n);
    size_t o = 0;
    for (int i = 0; i < len && o + 2 < cap; i++) {
        if (i > 0 && (len - i) % 3 == 0)
            b[o++] = ',';
        b[o++] = d[i];
    }
    b[o] = '\0';
    return b;
}

static const char *fmt_ms(char *b, size_t cap, uint64_t ms)
{
    if (ms < 1000)
        snprintf(b, cap, "%" PRIu64 " ms", ms);
    else if (ms < 10000)
        snprintf(b, cap, "%.2f s", (double)ms / 1000);
    else if (ms < 100000)
        snprintf(b, cap, "%.1f s", (double)ms / 1000);
    else {
        char c[32];
        snprintf(b, cap, "%s s", fmt_count(c, sizeof(c), (ms + 500) / 1000));
    }
    return b;
}

static const char *fmt_size(char *b, size_t cap, uint64_t n)
{
    if (n < 1024)
        snprintf(b, cap, "%" PRIu64 " B", n);
    else if (n < ((uint64_t)1 << 20))
        snprintf(b, cap, "%.1f KiB", (double)n / 1024);
    else if (n < ((uint64_t)1 << 30))
        snprintf(b, cap, "%.1f MiB", (double)n / (1 << 20));
    else
        snprintf(b, cap, "%.1f GiB", (double)n / (1 << 30));
    return b;
}

static const char *fmt_pct(char *b, size_t cap, uint64_t part, uint64_t whole)
{
    if (whole == 0)
        snprintf(b, cap, "\xE2\x80\x93");
    else
        snprintf(b, cap, "%.1f %%", 100.0 * (double)part / (double)whole);
    return b;
}

/* A count in a right-aligned cell, with its value for machines. */
static void td_count(FILE *f, uint64_t n)
{
    char c[32];
    fprintf(f, "<td class=\"n\" data-n=\"%" PRIu64 "\">%s</td>", n, fmt_count(c, sizeof(c), n));
}

/* A small horizontal bar: `part` of `whole`. */
static void minibar(FILE *f, uint64_t part, uint64_t whole, const char *cls)
{
    double w = whole > 0 ? 120.0 * (double)part / (double)whole : 0;
    fprintf(f,
            "<svg width=\"120\" height=\"10\" aria-hidden=\"true\"><rect width=\"120\" "
            "height=\"10\" rx=\"2\" fill=\"#eef0f3\"/><rect class=\"%s\" width=\"%.1f\" "
            "height=\"10\" rx=\"2\"/></svg>",
            cls, w);
}

static void card(FILE *f, const char *cls, const char *key, const char *label, uint64_t n,
                 const char *sub)
{
    char c[32];
    fprintf(f, "<div class=\"card %s\" data-total=\"%s\" data-n=\"%" PRIu64 "\">", cls, key, n);
    fprintf(f, "<div class=\"k\">%s</div><div class=\"v\">%s</div>", label,
            fmt_count(c, sizeof(c), n));
    if (sub != NULL) {
        fputs("<div class=\"s\">", f);
        text(f, sub);
        fputs("</div>", f);
    }
    fputs("</div>\n", f);
}

static void card_text(FILE *f, const char *cls, const char *key, const char *label,
                      const char *value, const char *sub)
{
    fprintf(f, "<div class=\"card %s\" data-total=\"%s\"><div class=\"k\">%s</div>", cls, key,
            label);
    fputs("<div class=\"v\">", f);
    text(f, value);
    fputs("</div>", f);
    if (sub != NULL) {
        fputs("<div class=\"s\">", f);
        text(f, sub);
        fputs("</div>", f);
    }
    fputs("</div>\n", f);
}

/* The label of error type index `et`. */
static const char *et_label(const hv_report_t *r, unsigned et)
{
    if (et == ET_OTHER)
        return "(other types)";
    return r->et_name[et][0] != '\0' ? r->et_name[et] : "(none)";
}

static void page_head(FILE *f, const hv_report_t *r, const hv_report_page_t *page)
{
    const char *source = page->source != NULL ? page->source : "standard input";
    char c[32];
    hv_report_totals_t t;
    hv_report_get_totals(r, &t);
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
          "style-src 'unsafe-inline'\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
          "<title>harvestd report: ",
          f);
    text(f, source);
    fprintf(f, "</title>\n<style>\n%s</style>\n</head>\n<body>\n<header>\n", css);
    fputs("<h1>harvestd report</h1>\n<div class=\"file\" id=\"source\">", f);
    text(f, source);
    fprintf(f, "</div>\n<div class=\"meta\">%s lines read", fmt_count(c, sizeof(c), t.lines));
    if (page->generated_at != NULL) {
        fputs(" \xC2\xB7 made ", f);
        text(f, page->generated_at);
    }
    fputs(" \xC2\xB7 harvestd " HV_VERSION "</div>\n", f);
    fputs("<nav><a href=\"#failure-types\">Failures</a><a href=\"#http\">HTTP</a>"
          "<a href=\"#charts\">Times and sizes</a><a href=\"#hosts\">Hosts</a>"
          "<a href=\"#slowest\">Slowest</a><a href=\"#largest\">Largest</a>"
          "<a href=\"#failures\">Failed URLs</a><a href=\"#unreadable\">Unreadable lines</a>"
          "</nav>\n</header>\n<main>\n",
          f);
}

static void section_overview(FILE *f, const hv_report_t *r)
{
    hv_report_totals_t t;
    char a[48], b[48], s[96];
    hv_report_get_totals(r, &t);
    fputs("<section id=\"overview\">\n<div class=\"cards\">\n", f);
    card(f, "", "records", "Records", t.records, NULL);
    snprintf(s, sizeof(s), "%s of records", fmt_pct(a, sizeof(a), t.ok, t.records));
    card(f, "ok", "ok", "OK", t.ok, s);
    snprintf(s, sizeof(s), "%s of records", fmt_pct(a, sizeof(a), t.failed, t.records));
    card(f, "failed", "failed", "Failed", t.failed, s);
    card(f, "", "unreadable", "Unreadable lines", t.unreadable, NULL);
    card(f, "", "hosts", "Hosts", t.hosts,
         t.other_host_records > 0 ? "and more, not told apart" : NULL);
    if (r->timed > 0) {
        snprintf(s, sizeof(s), "90th percentile \xE2\x89\x88 %s",
                 fmt_ms(b, sizeof(b), fine_quantile(r->time_fine, r->timed, 0.9)));
        char v[64];
        snprintf(v, sizeof(v), "\xE2\x89\x88 %s",
                 fmt_ms(a, sizeof(a), fine_quantile(r->time_fine, r->timed, 0.5)));
        card_text(f, "", "median-time", "Median time", v, s);
    }
    if (r->ok_sized > 0) {
        char v[64];
        snprintf(v, sizeof(v), "\xE2\x89\x88 %s",
                 fmt_size(a, sizeof(a), fine_quantile(r->size_fine, r->ok_sized, 0.5)));
        card_text(f, "", "median-size", "Median page (ok)", v, NULL);
    }
    if (r->sized > 0)
        card_text(f, "", "bytes", "Bytes in all", fmt_size(a, sizeof(a), r->bytes_total), NULL);
    if (r->first_at[0] != '\0') {
        /* "2026-01-02T03:04:05.678Z" as "2026-01-02 03:04:05", to the second */
        char first[24], last[24];
        snprintf(first, sizeof(first), "%.10s %.8s", r->first_at, r->first_at + 11);
        snprintf(last, sizeof(last), "%.10s %.8s", r->last_at, r->last_at + 11);
        snprintf(s, sizeof(s), "to %s UTC", last);
        fprintf(f, "<!-- fetched_at from %s to %s -->\n", r->first_at, r->last_at);
        card_text(f, "small", "fetched", "Fetched from", first, s);
    }
    fputs("</div>\n", f);
    uint64_t all = t.lines;
    if (all > 0) {
        double x = 0, w;
        fputs("<svg width=\"100%\" height=\"16\" viewBox=\"0 0 1000 16\" "
              "preserveAspectRatio=\"none\" role=\"img\" aria-label=\"lines by outcome\">",
              f);
        const struct {
            uint64_t n;
            const char *cls;
        } parts[] = {{t.ok, "ok"}, {t.failed, "failed"}, {t.unreadable, "bad"}};
        for (size_t i = 0; i < HV_ARRAY_SIZE(parts); i++) {
            w = 1000.0 * (double)parts[i].n / (double)all;
            if (parts[i].n > 0)
                fprintf(f, "<rect class=\"%s\" x=\"%.2f\" width=\"%.2f\" height=\"16\"/>",
                        parts[i].cls, x, w);
            x += w;
        }
        fputs("</svg>\n<div class=\"note\"><span class=\"key ok\"></span>ok"
              "<span class=\"key failed\"></span>failed"
              "<span class=\"key bad\"></span>unreadable lines</div>\n",
              f);
    }
    fputs("</section>\n", f);
}

static int cmp_u64_desc(uint64_t a, uint64_t b)
{
    return a > b ? -1 : a < b ? 1 : 0;
}

static const hv_report_t *sort_report; /* qsort has no context argument */

static int cmp_et(const void *pa, const void *pb)
{
    unsigned a = *(const unsigned *)pa, b = *(const unsigned *)pb;
    int c = cmp_u64_desc(sort_report->et_count[a], sort_report->et_count[b]);
    return c != 0 ? c : a < b ? -1 : a > b;
}

static void section_failure_types(FILE *f, const hv_report_t *r)
{
    char a[32];
    unsigned order[HV_REPORT_ERROR_TYPES_MAX + 1];
    size_t n = 0;
    for (unsigned i = 0; i < r->net; i++)
        order[n++] = i;
    if (r->et_count[ET_OTHER] > 0)
        order[n++] = ET_OTHER;
    sort_report = r;
    qsort(order, n, sizeof(order[0]), cmp_et);
    fputs("<section id=\"failure-types\">\n<h2>Failures by type</h2>\n", f);
    if (r->failed == 0) {
        fputs("<p class=\"note\">No record failed.</p>\n</section>\n", f);
        return;
    }
    fputs("<table>\n<tr><th>error_type</th><th class=\"n\">Failed</th>"
          "<th class=\"n\">Share</th><th></th></tr>\n",
          f);
    for (size_t i = 0; i < n; i++) {
        unsigned et = order[i];
        if (et == ET_OTHER)
            fputs("<tr class=\"sum\" data-error-type-other=\"1\"", f);
        else {
            fputs("<tr data-error-type=\"", f);
            text(f, r->et_name[et]);
            fputs("\"", f);
        }
        fprintf(f, " data-count=\"%" PRIu64 "\"><td>", r->et_count[et]);
        text(f, et_label(r, et));
        fputs("</td>", f);
        td_count(f, r->et_count[et]);
        fprintf(f, "<td class=\"n\">%s</td><td>",
                fmt_pct(a, sizeof(a), r->et_count[et], r->failed));
        minibar(f, r->et_count[et], r->failed, "failed");
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n<p class=\"note\">By stage:", f);
    int sep = 0;
    for (size_t s = 0; s < STAGE__COUNT; s++)
        if (r->stage[s] > 0)
            fprintf(f, "%s <span data-stage=\"%s\" data-n=\"%" PRIu64 "\">%s %s</span>",
                    sep++ ? " \xC2\xB7" : "", stage_names[s], r->stage[s], stage_names[s],
                    fmt_count(a, sizeof(a), r->stage[s]));
    fputs("</p>\n</section>\n", f);
}

static void section_http(FILE *f, const hv_report_t *r)
{
    uint64_t total = 0;
    char a[32];
    for (size_t i = 0; i < HV_ARRAY_SIZE(r->http); i++)
        total += r->http[i];
    fputs("<section id=\"http\">\n<h2>HTTP statuses</h2>\n", f);
    if (total == 0) {
        fputs("<p class=\"note\">No record has an http_status.</p>\n</section>\n", f);
        return;
    }
    fputs("<table>\n<tr><th>http_status</th><th class=\"n\">Records</th>"
          "<th class=\"n\">Share</th><th></th></tr>\n",
          f);
    for (size_t i = 0; i < HV_ARRAY_SIZE(r->http); i++) {
        if (r->http[i] == 0)
            continue;
        const char *cls = i >= 200 && i < 400 ? "ok" : i >= 400 && i < 600 ? "failed" : "bad";
        fprintf(f, "<tr data-http-status=\"%zu\" data-count=\"%" PRIu64 "\"><td>%zu</td>", i,
                r->http[i], i);
        td_count(f, r->http[i]);
        fprintf(f, "<td class=\"n\">%s</td><td>", fmt_pct(a, sizeof(a), r->http[i], total));
        minibar(f, r->http[i], total, cls);
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n</section>\n", f);
}

/* One bar of a histogram. */
typedef struct {
    char label[32]; /* under the bar: its lower bound */
    char range[64]; /* its tooltip */
    uint64_t lo, ok, failed;
} bar_t;

static uint64_t nice_step(uint64_t x)
{
    uint64_t p = 1;
    while (p <= x / 10)
        p *= 10;
    if (x <= p)
        return p;
    if (x <= 2 * p)
        return 2 * p;
    if (x <= 5 * p)
        return 5 * p;
    return 10 * p;
}

/* An SVG bar chart of bars[first..last], ok and failed stacked. */
static void histogram(FILE *f, const char *id, const bar_t *bars, size_t n, const char *unit)
{
    size_t first = 0, last = n;
    while (first < n && bars[first].ok + bars[first].failed == 0)
        first++;
    while (last > first && bars[last - 1].ok + bars[last - 1].failed == 0)
        last--;
    if (first == last) {
        fprintf(f, "<p class=\"note\">No record has %s.</p>\n", unit);
        return;
    }
    uint64_t max = 0;
    for (size_t i = first; i < last; i++)
        max = HV_MAX(max, bars[i].ok + bars[i].failed);
    uint64_t step = nice_step((max + 3) / 4), top = (max + step - 1) / step * step;
    const double W = 600, H = 250, L = 50, R = 10, T = 20, B = 46;
    double pw = W - L - R, ph = H - T - B, slot = pw / (double)(last - first);
    char c[32];
    fprintf(f,
            "<svg id=\"%s\" viewBox=\"0 0 600 250\" width=\"100%%\" role=\"img\" "
            "aria-label=\"histogram of %s\">\n",
            id, unit);
    for (uint64_t y = 0; y <= top; y += step) {
        double yy = T + ph - ph * (double)y / (double)top;
        fprintf(f,
                "<line class=\"%s\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>"
                "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"end\">%s</text>\n",
                y == 0 ? "axis" : "grid", L, W - R, yy, yy, L - 6, yy + 3.5,
                fmt_count(c, sizeof(c), y));
    }
    for (size_t i = first; i < last; i++) {
        const bar_t *b = &bars[i];
        double x = L + slot * (double)(i - first), bw = slot * 0.74, bx = x + (slot - bw) / 2;
        double hok = ph * (double)b->ok / (double)top, hf = ph * (double)b->failed / (double)top;
        double base = T + ph;
        fprintf(f,
                "<g class=\"bucket\" data-lo=\"%" PRIu64 "\" data-ok=\"%" PRIu64
                "\" data-failed=\"%" PRIu64 "\"><title>",
                b->lo, b->ok, b->failed);
        text(f, b->range);
        fprintf(f, ": %" PRIu64 " ok, %" PRIu64 " failed</title>", b->ok, b->failed);
        if (b->ok > 0)
            fprintf(f, "<rect class=\"ok\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>",
                    bx, base - hok, bw, hok);
        if (b->failed > 0)
            fprintf(f,
                    "<rect class=\"failed\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                    "height=\"%.1f\"/>",
                    bx, base - hok - hf, bw, hf);
        if (b->ok + b->failed > 0)
            fprintf(f,
                    "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"middle\">%s"
                    "</text>",
                    x + slot / 2, base - hok - hf - 4, fmt_count(c, sizeof(c), b->ok + b->failed));
        if (slot >= 40)
            fprintf(f,
                    "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"middle\">%s"
                    "</text>",
                    x + slot / 2, base + 14, b->label);
        else
            fprintf(f,
                    "<text font-size=\"10\" text-anchor=\"end\" transform=\"translate(%.1f,%.1f) "
                    "rotate(-40)\">%s</text>",
                    x + slot / 2 + 3, base + 12, b->label);
        fputs("</g>\n", f);
    }
    fputs("</svg>\n", f);
}

static void short_ms(char *b, size_t cap, uint64_t ms)
{
    if (ms < 1000)
        snprintf(b, cap, "%" PRIu64 "ms", ms);
    else
        snprintf(b, cap, "%" PRIu64 "s", ms / 1000);
}

static void short_size(char *b, size_t cap, uint64_t n)
{
    static const char units[] = "BKMGT";
    size_t u = 0;
    while (n >= 1024 && n % 1024 == 0 && u + 1 < sizeof(units) - 1) {
        n /= 1024;
        u++;
    }
    snprintf(b, cap, "%" PRIu64 "%c", n, u == 0 ? 'B' : units[u]);
}

static void section_charts(FILE *f, const hv_report_t *r)
{
    bar_t bars[HV_MAX(TIME_BUCKETS, SIZE_BUCKETS)];
    char a[32], b[32];
    fputs("<div class=\"grid\" id=\"charts\">\n<section id=\"times\">\n<h2>Elapsed time</h2>\n", f);
    for (size_t i = 0; i < TIME_BUCKETS; i++) {
        uint64_t lo = i == 0 ? 0 : time_edges[i - 1];
        bars[i].lo = lo;
        bars[i].ok = r->time_hist[i][0];
        bars[i].failed = r->time_hist[i][1];
        if (i == 0)
            snprintf(bars[i].label, sizeof(bars[i].label), "0");
        else
            short_ms(bars[i].label, sizeof(bars[i].label), lo);
        if (i + 1 == TIME_BUCKETS) {
            snprintf(bars[i].range, sizeof(bars[i].range), "%s or more", fmt_ms(a, sizeof(a), lo));
            snprintf(bars[i].label + strlen(bars[i].label),
                     sizeof(bars[i].label) - strlen(bars[i].label), "+");
        } else {
            snprintf(bars[i].range, sizeof(bars[i].range), "%s to %s", fmt_ms(a, sizeof(a), lo),
                     fmt_ms(b, sizeof(b), time_edges[i]));
        }
    }
    histogram(f, "time-histogram", bars, TIME_BUCKETS, "elapsed_ms");
    if (r->timed > 0)
        fprintf(f,
                "<p class=\"note\">%s records with elapsed_ms, by the lower bound of each range "
                "(from the first request to the end of the download). <span class=\"key ok\">"
                "</span>ok<span class=\"key failed\"></span>failed</p>\n",
                fmt_count(a, sizeof(a), r->timed));
    fputs("</section>\n<section id=\"sizes\">\n<h2>Page size</h2>\n", f);
    for (size_t i = 0; i < SIZE_BUCKETS; i++) {
        uint64_t lo = i == 0 ? 0 : size_edge(i - 1);
        bars[i].lo = lo;
        bars[i].ok = r->size_hist[i][0];
        bars[i].failed = r->size_hist[i][1];
        if (i == 0)
            snprintf(bars[i].label, sizeof(bars[i].label), "0");
        else
            short_size(bars[i].label, sizeof(bars[i].label), lo);
        if (i + 1 == SIZE_BUCKETS) {
            snprintf(bars[i].range, sizeof(bars[i].range), "%s or more",
                     fmt_size(a, sizeof(a), lo));
            snprintf(bars[i].label + strlen(bars[i].label),
                     sizeof(bars[i].label) - strlen(bars[i].label), "+");
        } else {
            snprintf(bars[i].range, sizeof(bars[i].range), "%s to %s", fmt_size(a, sizeof(a), lo),
                     fmt_size(b, sizeof(b), size_edge(i)));
        }
    }
    histogram(f, "size-histogram", bars, SIZE_BUCKETS, "bytes");
    if (r->sized > 0)
        fprintf(f,
                "<p class=\"note\">%s records with bytes (the decoded body), by the lower bound "
                "of each range, in binary units (1K = 1,024 bytes).</p>\n",
                fmt_count(a, sizeof(a), r->sized));
    fputs("</section>\n</div>\n", f);
}

static int cmp_host(const void *pa, const void *pb)
{
    const host_t *a = *(host_t *const *)pa, *b = *(host_t *const *)pb;
    int c = cmp_u64_desc(a->st.requests, b->st.requests);
    return c != 0 ? c : strcmp(a->key, b->key);
}

/* "HttpStatus 3, ConnectError 2, other 1" of a host's failures. */
static void host_types(FILE *f, const hv_report_t *r, const uint16_t *type, const uint64_t *n,
                       unsigned ntypes, uint64_t other)
{
    unsigned order[HV_REPORT_ERROR_TYPES_MAX + 1];
    char c[32];
    for (unsigned i = 0; i < ntypes; i++)
        order[i] = i;
    for (unsigned i = 1; i < ntypes; i++) /* a few entries: insertion sort, by count */
        for (unsigned j = i; j > 0 && n[order[j]] > n[order[j - 1]]; j--) {
            unsigned t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    for (unsigned i = 0; i < ntypes; i++) {
        if (i > 0)
            fputs(", ", f);
        text(f, et_label(r, type[order[i]]));
        fprintf(f, " %s", fmt_count(c, sizeof(c), n[order[i]]));
    }
    if (other > 0)
        fprintf(f, "%sother %s", ntypes > 0 ? ", " : "", fmt_count(c, sizeof(c), other));
}

static void host_row(FILE *f, const hv_report_t *r, const char *key, const hstats_t *st,
                     uint64_t median, const uint16_t *type, const uint64_t *type_n, unsigned ntypes,
                     uint64_t other_types)
{
    char a[32];
    if (key == NULL) {
        fputs("<tr class=\"sum\" data-other-hosts=\"1\"", f);
    } else {
        fputs("<tr data-host=\"", f);
        text(f, key);
        fputs("\"", f);
    }
    fprintf(f,
            " data-requests=\"%" PRIu64 "\" data-ok=\"%" PRIu64 "\" data-failed=\"%" PRIu64
            "\"><td>",
            st->requests, st->ok, st->failed);
    size_t hidden = r->nhosts > r->o.hosts ? r->nhosts - r->o.hosts : 0; /* kept, not shown */
    if (key == NULL && hidden > 0)
        fprintf(f, "other hosts (%s%s)", fmt_count(a, sizeof(a), hidden),
                r->other_hosts.requests > 0 ? " and more" : "");
    else if (key == NULL)
        fputs("other hosts (not told apart)", f);
    else if (key[0] == '\0')
        fputs("<span class=\"nohost\">(no host)</span>", f);
    else
        text(f, key);
    fputs("</td>", f);
    td_count(f, st->requests);
    td_count(f, st->ok);
    fprintf(f, "<td class=\"n\">%s</td><td>", fmt_pct(a, sizeof(a), st->ok, st->requests));
    minibar(f, st->ok, st->requests, "ok");
    fputs("</td>", f);
    td_count(f, st->failed);
    fputs("<td>", f);
    host_types(f, r, type, type_n, ntypes, other_types);
    fputs("</td>", f);
    if (st->timed > 0)
        fprintf(f, "<td class=\"n\" data-median-ms=\"%" PRIu64 "\">\xE2\x89\x88 %s</td>", median,
                fmt_ms(a, sizeof(a), median));
    else
        fputs("<td class=\"n\">\xE2\x80\x93</td>", f);
    fputs("</tr>\n", f);
}

static void section_hosts(FILE *f, const hv_report_t *r)
{
    char a[32], b[32], c[32];
    host_t **v = hv_xcalloc(r->nhosts + 1, sizeof(*v));
    size_t n = 0;
    for (host_t *h = r->hosts; h != NULL; h = h->hh.next)
        v[n++] = h;
    qsort(v, n, sizeof(*v), cmp_host);
    size_t shown = HV_MIN(n, r->o.hosts);
    fputs("<section id=\"hosts\">\n<h2>Hosts</h2>\n", f);
    if (n == 0 && r->other_hosts.requests == 0) {
        fputs("<p class=\"note\">No records.</p>\n</section>\n", f);
        free(v);
        return;
    }
    fprintf(f, "<p class=\"note\">The host (and port) of each requested_url. ");
    if (shown < n || r->other_hosts.requests > 0)
        fprintf(f,
                "The %s with the most requests are shown; the rest are summed up as other "
                "hosts. ",
                fmt_count(a, sizeof(a), shown));
    if (r->other_hosts.requests > 0)
        fprintf(f,
                "Only the first %s hosts are told apart: the %s records of hosts after them "
                "are counted with the other hosts. ",
                fmt_count(b, sizeof(b), r->o.hosts_max),
                fmt_count(c, sizeof(c), r->other_hosts.requests));
    fputs("Median times are read from histograms, to within an eighth.</p>\n", f);
    fputs("<table>\n<tr><th>Host</th><th class=\"n\">Requests</th><th class=\"n\">OK</th>"
          "<th class=\"n\">OK ratio</th><th></th><th class=\"n\">Failed</th>"
          "<th>Failures by type</th><th class=\"n\">Median time</th></tr>\n",
          f);
    for (size_t i = 0; i < shown; i++) {
        const hstats_t *st = &v[i]->st;
        host_row(f, r, v[i]->key, st, host_median(st), st->type, st->type_n, st->ntypes,
                 st->other_types);
    }
    if (shown < n || r->other_hosts.requests > 0) {
        /* The other hosts: the figures of the hosts not shown and of those not told apart. */
        hstats_t sum = r->other_hosts;
        uint64_t per_type[HV_REPORT_ERROR_TYPES_MAX + 1] = {0}, other = sum.other_types;
        for (unsigned k = 0; k < sum.ntypes; k++)
            per_type[sum.type[k]] += sum.type_n[k];
        uint64_t fine[HV_REPORT_FINE_BUCKETS];
        host_fine(&sum, fine);
        for (size_t i = shown; i < n; i++) {
            const hstats_t *st = &v[i]->st;
            sum.requests += st->requests;
            sum.ok += st->ok;
            sum.failed += st->failed;
            sum.timed += st->timed;
            for (unsigned k = 0; k < st->ntypes; k++)
                per_type[st->type[k]] += st->type_n[k];
            other += st->other_types;
            for (unsigned bkt = 0; bkt < HV_REPORT_FINE_BUCKETS; bkt++)
                fine[bkt] += st->fine[bkt];
        }
        uint16_t type[HV_REPORT_ERROR_TYPES_MAX + 1];
        uint64_t type_n[HV_REPORT_ERROR_TYPES_MAX + 1];
        unsigned nt = 0;
        for (unsigned k = 0; k <= HV_REPORT_ERROR_TYPES_MAX; k++)
            if (per_type[k] > 0) {
                type[nt] = (uint16_t)k;
                type_n[nt++] = per_type[k];
            }
        host_row(f, r, NULL, &sum, fine_quantile(fine, sum.timed, 0.5), type, type_n, nt, other);
    }
    fputs("</table>\n</section>\n", f);
    free(v);
}

static int cmp_top(const void *pa, const void *pb)
{
    const top_item_t *a = pa, *b = pb;
    return top_weaker(a, b) ? 1 : top_weaker(b, a) ? -1 : 0;
}

static void section_top(FILE *f, const top_t *t, const char *id, const char *title,
                        const char *what)
{
    char a[32];
    top_item_t *v = hv_xcalloc(t->n + 1, sizeof(*v));
    memcpy(v, t->v, t->n * sizeof(*v));
    qsort(v, t->n, sizeof(*v), cmp_top);
    fprintf(f, "<section id=\"%s\">\n<h2>%s</h2>\n", id, title);
    if (t->n == 0) {
        fprintf(f, "<p class=\"note\">No record has %s.</p>\n</section>\n", what);
        free(v);
        return;
    }
    fprintf(f,
            "<p class=\"note\">The %zu records with the highest %s (of equal ones, the "
            "first in the file).</p>\n",
            t->n, what);
    fputs("<table>\n<tr><th class=\"n\">Line</th><th>requested_url and title</th>"
          "<th>Result</th><th class=\"n\">HTTP</th><th class=\"n\">Time</th>"
          "<th class=\"n\">Size</th></tr>\n",
          f);
    for (size_t i = 0; i < t->n; i++) {
        const top_item_t *it = &v[i];
        fprintf(f,
                "<tr data-line=\"%" PRIu64 "\" data-value=\"%" PRIu64 "\">"
                "<td class=\"n\">%" PRIu64 "</td><td class=\"url\">",
                it->line, it->value, it->line);
        text(f, it->url);
        more(f, it->url_cut);
        if (it->has_title) {
            fputs("<div class=\"t\">", f);
            text(f, it->title);
            more(f, it->title_cut);
            fputs("</div>", f);
        }
        if (it->ok) {
            fputs("</td><td><span class=\"pill ok\">ok</span></td>", f);
        } else {
            fputs("</td><td><span class=\"pill failed\">", f);
            text(f, it->error_type[0] != '\0' ? it->error_type : "failed");
            fputs("</span></td>", f);
        }
        if (it->has_http)
            fprintf(f, "<td class=\"n\">%" PRIu64 "</td>", it->http_status);
        else
            fputs("<td class=\"n\">\xE2\x80\x93</td>", f);
        fprintf(f, "<td class=\"n\">%s</td>",
                it->has_elapsed ? fmt_ms(a, sizeof(a), it->elapsed_ms) : "\xE2\x80\x93");
        fprintf(f, "<td class=\"n\">%s</td></tr>\n",
                it->has_bytes ? fmt_size(a, sizeof(a), it->bytes) : "\xE2\x80\x93");
    }
    fputs("</table>\n</section>\n", f);
    free(v);
}

static int cmp_group(const void *pa, const void *pb)
{
    const group_t *a = *(group_t *const *)pa, *b = *(group_t *const *)pb;
    int c = cmp_u64_desc(a->count, b->count);
    if (c != 0)
        return c;
    size_t n = HV_MIN(a->keylen, b->keylen);
    c = memcmp(a->key, b->key, n);
    return c != 0 ? c : a->keylen < b->keylen ? -1 : a->keylen > b->keylen;
}

static void section_failures(FILE *f, const hv_report_t *r)
{
    char a[32], b[32];
    group_t **v = hv_xcalloc(r->ngroups + 1, sizeof(*v));
    size_t n = 0;
    for (group_t *g = r->groups; g != NULL; g = g->hh.next)
        v[n++] = g;
    qsort(v, n, sizeof(*v), cmp_group);
    size_t shown = HV_MIN(n, (size_t)HV_REPORT_GROUPS_SHOWN);
    fputs("<section id=\"failures\">\n<h2>Failed URLs by error</h2>\n", f);
    if (n == 0 && r->other_group_failures == 0) {
        fputs("<p class=\"note\">No record failed.</p>\n</section>\n", f);
        free(v);
        return;
    }
    fprintf(f,
            "<p class=\"note\">Failures grouped by error_type and error, the largest groups "
            "first, with the first %d URLs of each.</p>\n",
            HV_REPORT_SAMPLES);
    fputs("<table>\n<tr><th class=\"n\">Failed</th><th>error_type</th><th>error</th>"
          "<th>URLs (the first)</th></tr>\n",
          f);
    for (size_t i = 0; i < shown; i++) {
        const group_t *g = v[i];
        size_t tlen = strlen(g->key);
        const char *err = g->key + tlen + 1;
        size_t elen = g->keylen - tlen - 1;
        fputs("<tr data-error-type=\"", f);
        hv_report_html_escape(f, g->key, tlen);
        fputs("\" data-error=\"", f);
        hv_report_html_escape(f, err, elen);
        fprintf(f, "\" data-count=\"%" PRIu64 "\">", g->count);
        td_count(f, g->count);
        fputs("<td>", f);
        text(f, tlen > 0 ? g->key : "(none)");
        fputs("</td><td class=\"mono\">", f);
        if (elen > 0) {
            hv_report_html_escape(f, err, elen);
            more(f, g->error_cut);
        } else
            fputs("<span class=\"nohost\">(none)</span>", f);
        fputs("</td><td class=\"url\"><ul class=\"samples\">", f);
        for (unsigned k = 0; k < g->nsamples; k++) {
            fputs("<li>", f);
            text(f, g->samples[k]);
            more(f, (g->sample_cut >> k) & 1u);
            fputs("</li>", f);
        }
        fputs("</ul></td></tr>\n", f);
    }
    if (shown < n) {
        uint64_t rest = 0;
        for (size_t i = shown; i < n; i++)
            rest += v[i]->count;
        fprintf(f, "<tr class=\"sum\" data-more-groups=\"%zu\" data-count=\"%" PRIu64 "\">",
                n - shown, rest);
        td_count(f, rest);
        fprintf(f, "<td colspan=\"3\">%s more groups</td></tr>\n",
                fmt_count(a, sizeof(a), n - shown));
    }
    if (r->other_group_failures > 0) {
        fprintf(f, "<tr class=\"sum\" data-ungrouped=\"1\" data-count=\"%" PRIu64 "\">",
                r->other_group_failures);
        td_count(f, r->other_group_failures);
        fprintf(f,
                "<td colspan=\"3\">failures of further errors (only the first %s groups are "
                "told apart)</td></tr>\n",
                fmt_count(b, sizeof(b), r->o.groups_max));
    }
    fputs("</table>\n</section>\n", f);
    free(v);
}

static void section_unreadable(FILE *f, const hv_report_t *r)
{
    hv_report_totals_t t;
    hv_report_get_totals(r, &t);
    fputs("<section id=\"unreadable\">\n<h2>Unreadable lines</h2>\n", f);
    if (t.unreadable == 0) {
        fputs("<p class=\"note\">Every line is a record.</p>\n</section>\n", f);
        return;
    }
    fputs("<p class=\"note\">Lines that are no harvestd record: they are counted here and "
          "nowhere else.</p>\n<table>\n<tr><th>Why</th><th class=\"n\">Lines</th></tr>\n",
          f);
    for (int i = 1; i < HV_REPORT_LINE__COUNT; i++)
        if (r->by_reason[i] > 0) {
            fprintf(f, "<tr data-reason=\"%s\" data-count=\"%" PRIu64 "\"><td>%s</td>",
                    reason_keys[i], r->by_reason[i], reason_texts[i]);
            td_count(f, r->by_reason[i]);
            fputs("</tr>\n", f);
        }
    fprintf(f,
            "</table>\n<p class=\"note\">The first %zu, with their first bytes:</p>\n"
            "<table>\n<tr><th class=\"n\">Line</th><th>Why</th><th>Begins with</th></tr>\n",
            r->nun);
    for (size_t i = 0; i < r->nun; i++) {
        const unreadable_t *u = &r->un[i];
        fprintf(f, "<tr data-line=\"%" PRIu64 "\"><td class=\"n\">%" PRIu64 "</td><td>%s", u->line,
                u->line, reason_texts[u->why]);
        if (u->field != NULL)
            fprintf(f, ": %s", u->field);
        fputs("</td><td class=\"mono\">", f);
        hv_report_html_escape(f, u->text, u->len);
        more(f, u->cut);
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n</section>\n", f);
}

static void page_foot(FILE *f, const hv_report_t *r)
{
    char a[32], b[32], c[32];
    fprintf(f,
            "<footer>Made by <code>harvestd report</code>, reading the file once in bounded "
            "memory: the first %s hosts and the first %s failure groups (each with %d sample "
            "URLs) are told apart, the %zu slowest and largest records are kept, and lines "
            "longer than %s are not read. Medians are estimated from histograms.</footer>\n"
            "</main>\n</body>\n</html>\n",
            fmt_count(a, sizeof(a), r->o.hosts_max), fmt_count(b, sizeof(b), r->o.groups_max),
            HV_REPORT_SAMPLES, r->o.top, fmt_size(c, sizeof(c), r->o.line_max));
}

int hv_report_write_html(const hv_report_t *r, const hv_report_page_t *page, FILE *out)
{
    page_head(out, r, page);
    section_overview(out, r);
    fputs("<div class=\"grid\">\n", out);
    section_failure_types(out, r);
    section_http(out, r);
    fputs("</div>\n", out);
    section_charts(out, r);
    section_hosts(out, r);
    section_top(out, &r->slow, "slowest", "Slowest pages", "elapsed_ms");
    section_top(out, &r->large, "largest", "Largest pages", "bytes");
    section_failures(out, r);
    section_unreadable(out, r);
    page_foot(out, r);
    return ferror(out) ? UV_EIO : 0;
}

/* Characters shown as U+FFFD although they are valid: C1 controls, line and paragraph
 * separators, and the bidirectional marks, embeddings, overrides and isolates, which could
 * make a URL read as another. */
static int hidden_char(uint32_t cp)
{
    return (cp >= 0x80 && cp <= 0x9F) || cp == 0x061C || cp == 0x200E || cp == 0x200F ||
           (cp >= 0x2028 && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

void hv_report_html_escape(FILE *out, const char *s, size_t len)
{
    static const char fffd[] = "\xEF\xBF\xBD";
    size_t i = 0;
    while (i < len) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x80) {
            switch (c) {
            case '&':
                fputs("&amp;", out);
                break;
            case '<':
                fputs("&lt;", out);
                break;
            case '>':
                fputs("&gt;", out);
                break;
            case '"':
                fputs("&quot;", out);
                break;
            case '\'':
                fputs("&#39;", out);
                break;
            case '\t':
                fputc(' ', out);
                break;
            default:
                if (c < 0x20 || c == 0x7F)
                    fputs(fffd, out);
                else
                    fputc(c, out);
            }
            i++;
            continue;
        }
        size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
        if (need == 0 || need > len - i || !hv_utf8_valid(s + i, need)) {
            fputs(fffd, out);
            i++;
            continue;
        }
        uint32_t cp = need == 2   ? (uint32_t)(c & 0x1F)
                      : need == 3 ? (uint32_t)(c & 0x0F)
                                  : (uint32_t)(c & 0x07);
        for (size_t k = 1; k < need; k++)
            cp = cp << 6 | ((unsigned char)s[i + k] & 0x3Fu);
        if (hidden_char(cp))
            fputs(fffd, out);
        else
            fwrite(s + i, 1, need, out);
        i += need;
    }
}
