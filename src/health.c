/* health.c: bounded figures of a run's health (see health.h). */
#include "harvestd/health.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harvestd/common.h"

/* ---- sizes ---- */

/* Bucket of `v`: its own below HV_SIZES_EXACT; above, the power of two it falls in and which
 * eighth of it (the three bits after the leading one). */
static unsigned size_bucket(uint64_t v)
{
    if (v < HV_SIZES_EXACT)
        return (unsigned)v;
    if (v > UINT32_MAX)
        v = UINT32_MAX;
    unsigned o = 63u - (unsigned)__builtin_clzll(v); /* 4..31 */
    unsigned sub = (unsigned)(v >> (o - 3)) & (HV_SIZES_SUB - 1);
    return HV_SIZES_EXACT + (o - 4) * HV_SIZES_SUB + sub;
}

/* Lower bound and width of bucket `i`. */
static void bucket_range(unsigned i, uint64_t *lo, uint64_t *width)
{
    if (i < HV_SIZES_EXACT) {
        *lo = i;
        *width = 1;
        return;
    }
    unsigned k = i - HV_SIZES_EXACT;
    unsigned o = 4 + k / HV_SIZES_SUB;
    *width = (uint64_t)1 << (o - 3);
    *lo = (uint64_t)(HV_SIZES_SUB + k % HV_SIZES_SUB) * *width;
}

static uint32_t sat_add32(uint32_t a, uint32_t b)
{
    return a > UINT32_MAX - b ? UINT32_MAX : a + b;
}

static uint64_t sat_add64(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

void hv_sizes_add(hv_sizes_t *s, uint64_t v)
{
    if (s->count == 0 || v < s->min)
        s->min = v;
    if (s->count == 0 || v > s->max)
        s->max = v;
    s->count++;
    s->sum = sat_add64(s->sum, v);
    unsigned i = size_bucket(v);
    s->bucket[i] = sat_add32(s->bucket[i], 1);
}

void hv_sizes_merge(hv_sizes_t *into, const hv_sizes_t *from)
{
    if (from->count == 0)
        return;
    if (into->count == 0 || from->min < into->min)
        into->min = from->min;
    if (into->count == 0 || from->max > into->max)
        into->max = from->max;
    into->count = sat_add64(into->count, from->count);
    into->sum = sat_add64(into->sum, from->sum);
    for (unsigned i = 0; i < HV_SIZES_BUCKETS; i++)
        into->bucket[i] = sat_add32(into->bucket[i], from->bucket[i]);
}

double hv_sizes_mean(const hv_sizes_t *s)
{
    return s->count > 0 ? (double)s->sum / (double)s->count : 0.0;
}

/* The value of rank `k` (0-based, in size order) as the buckets place it: the k-th of the c
 * values in its bucket is taken to sit at the middle of its c-th of the bucket's width. */
static double rank_value(const hv_sizes_t *s, uint64_t k)
{
    uint64_t before = 0;
    for (unsigned i = 0; i < HV_SIZES_BUCKETS; i++) {
        uint64_t c = s->bucket[i];
        if (k < before + c) {
            uint64_t lo, width;
            bucket_range(i, &lo, &width);
            if (width == 1)
                return (double)lo;
            return (double)lo + ((double)(k - before) + 0.5) / (double)c * (double)width;
        }
        before += c;
    }
    /* Only when buckets saturated and count outgrew them: the largest size seen. */
    return (double)s->max;
}

double hv_sizes_median(const hv_sizes_t *s)
{
    if (s->count == 0)
        return 0.0;
    /* Saturated buckets hold fewer values than count says: rank within what they hold. */
    uint64_t held = 0;
    for (unsigned i = 0; i < HV_SIZES_BUCKETS; i++)
        held += s->bucket[i];
    uint64_t n = HV_MIN(held, s->count);
    double m = n % 2 == 1 ? rank_value(s, n / 2)
                          : (rank_value(s, n / 2 - 1) + rank_value(s, n / 2)) / 2.0;
    if (m < (double)s->min)
        m = (double)s->min;
    if (m > (double)s->max)
        m = (double)s->max;
    return m;
}

/* ---- the hosts with the most failures ---- */

void hv_tophosts_add(hv_tophosts_t *t, const char *host, unsigned type)
{
    hv_tophost_t *h = NULL;
    for (unsigned i = 0; i < t->n; i++) {
        if (strcmp(t->slot[i].host, host) == 0) {
            h = &t->slot[i];
            break;
        }
    }
    if (h == NULL && t->n < HV_TOPHOSTS_SLOTS) {
        h = &t->slot[t->n++];
        h->host = hv_xstrdup(host);
    } else if (h == NULL) {
        /* Space-saving: the host with the fewest failures gives its slot up, and the new one
         * starts from its count, so that no count is ever below the truth. */
        h = &t->slot[0];
        for (unsigned i = 1; i < t->n; i++)
            if (t->slot[i].failed < h->failed)
                h = &t->slot[i];
        free(h->host);
        h->host = hv_xstrdup(host);
        h->over = h->failed;
        memset(h->types, 0, sizeof(h->types));
    }
    h->failed++;
    if (type < HV_TOPHOSTS_TYPES)
        h->types[type] = sat_add32(h->types[type], 1);
}

static int before(const hv_tophost_t *a, const hv_tophost_t *b)
{
    if (a->failed != b->failed)
        return a->failed > b->failed;
    return strcmp(a->host, b->host) < 0;
}

unsigned hv_tophosts_top(const hv_tophosts_t *t, const hv_tophost_t **out, unsigned k)
{
    /* Insertion into a list of at most k: k is small (the summary shows 5). */
    unsigned n = 0;
    for (unsigned i = 0; i < t->n; i++) {
        const hv_tophost_t *h = &t->slot[i];
        unsigned j = n < k ? n++ : k;
        while (j > 0 && before(h, out[j - 1])) {
            if (j < k)
                out[j] = out[j - 1];
            j--;
        }
        if (j < k)
            out[j] = h;
    }
    return n;
}

unsigned hv_tophost_type(const hv_tophost_t *h)
{
    unsigned best = 0;
    for (unsigned i = 1; i < HV_TOPHOSTS_TYPES; i++)
        if (h->types[i] > h->types[best])
            best = i;
    return best;
}

void hv_tophosts_clear(hv_tophosts_t *t)
{
    for (unsigned i = 0; i < t->n; i++)
        free(t->slot[i].host);
    memset(t, 0, sizeof(*t));
}

int hv_health_host_key(char *out, size_t cap, const char *url)
{
    const char *scheme;
    unsigned port;
    if (strncmp(url, "http://", 7) == 0) {
        scheme = "http";
        port = 80;
        url += 7;
    } else if (strncmp(url, "https://", 8) == 0) {
        scheme = "https";
        port = 443;
        url += 8;
    } else {
        return -1;
    }
    size_t alen = strcspn(url, "/?#");
    /* Userinfo is refused at input; should one be there, it is no part of the host. */
    for (size_t i = alen; i > 0; i--) {
        if (url[i - 1] == '@') {
            url += i;
            alen -= i;
            break;
        }
    }
    /* The host runs to the port's ':', which for an IPv6 literal comes after its ']'. */
    size_t hlen = alen;
    const char *colon = NULL;
    if (alen > 0 && url[0] == '[') {
        const char *close = memchr(url, ']', alen);
        if (close == NULL)
            return -1;
        hlen = (size_t)(close - url) + 1;
        if (hlen < alen && url[hlen] == ':')
            colon = url + hlen;
        else if (hlen != alen)
            return -1;
    } else {
        colon = memchr(url, ':', alen);
        if (colon != NULL)
            hlen = (size_t)(colon - url);
    }
    if (hlen == 0)
        return -1;
    if (colon != NULL && colon + 1 < url + alen) {
        char *end;
        unsigned long p = strtoul(colon + 1, &end, 10);
        if (end != url + alen || p == 0 || p > 65535)
            return -1;
        port = (unsigned)p;
    }
    int n = snprintf(out, cap, "%s://%.*s:%u", scheme, (int)hlen, url, port);
    if (n < 0 || (size_t)n >= cap)
        return -1;
    return n;
}

/* ---- the last minute ---- */

typedef struct {
    uint64_t stamp;           /* the second counted here, plus one; 0: never used */
    uint32_t ok;
    uint32_t failed;
    uint32_t requests;
    uint32_t http_class[6];
    hv_sizes_t ok_sizes;
} minute_slot_t;

struct hv_minute_s {
    hv_health_clock_cb clock;
    void *ud;
    uint64_t first;           /* the second the ring was made */
    minute_slot_t slot[HV_MINUTE_SLOTS];
};

hv_minute_t *hv_minute_new(hv_health_clock_cb clock, void *ud)
{
    hv_minute_t *m = hv_xcalloc(1, sizeof(*m));
    m->clock = clock;
    m->ud = ud;
    m->first = clock(ud) / 1000;
    return m;
}

void hv_minute_free(hv_minute_t *m)
{
    free(m);
}

void hv_minute_add(hv_minute_t *m, int ok, int http_status, int64_t ok_bytes, unsigned requests)
{
    uint64_t sec = m->clock(m->ud) / 1000;
    minute_slot_t *s = &m->slot[sec % HV_MINUTE_SLOTS];
    /* The slot last held a second a minute ago (or more): it starts again. */
    if (s->stamp != sec + 1) {
        memset(s, 0, sizeof(*s));
        s->stamp = sec + 1;
    }
    if (ok)
        s->ok = sat_add32(s->ok, 1);
    else
        s->failed = sat_add32(s->failed, 1);
    if (http_status >= 100 && http_status < 600)
        s->http_class[http_status / 100] = sat_add32(s->http_class[http_status / 100], 1);
    if (ok_bytes >= 0)
        hv_sizes_add(&s->ok_sizes, (uint64_t)ok_bytes);
    s->requests = sat_add32(s->requests, requests);
}

void hv_minute_figures(const hv_minute_t *m, hv_minute_figures_t *out)
{
    uint64_t sec = m->clock(m->ud) / 1000;
    memset(out, 0, sizeof(*out));
    for (unsigned i = 0; i < HV_MINUTE_SLOTS; i++) {
        const minute_slot_t *s = &m->slot[i];
        /* Only the current second and the 59 before it (none is from the future). */
        if (s->stamp == 0 || s->stamp > sec + 1 || sec + 1 - s->stamp >= HV_MINUTE_SLOTS)
            continue;
        out->ok += s->ok;
        out->failed += s->failed;
        out->requests += s->requests;
        for (unsigned c = 0; c < 6; c++)
            out->http_class[c] += s->http_class[c];
        hv_sizes_merge(&out->ok_sizes, &s->ok_sizes);
    }
    uint64_t covered = sec >= m->first ? sec - m->first + 1 : 1;
    out->seconds = (unsigned)HV_MIN(covered, (uint64_t)HV_MINUTE_SLOTS);
}
