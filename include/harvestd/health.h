/*
 * health.h: the figures of a run's health, each in bounded memory whatever the input.
 *
 * When a site starts refusing a crawler it often answers 200 with a small "Access denied" page
 * for every URL, and the run looks faster. Totals hide that; ratios show it: the share of ok
 * records, the size of the pages, the status codes, the requests per second and the hosts
 * that fail. This module keeps the structures those figures need, as plain data with no loop
 * and no record type (it sits below record.h, which counts into it):
 *
 *   hv_sizes_t     a distribution of byte sizes: count, sum, min, max and a histogram of
 *                  240 buckets from which the median is estimated (see hv_sizes_median());
 *   hv_tophosts_t  the hosts with the most failures: a "space-saving" table of 64 entries
 *                  (Metwally, Agrawal, El Abbadi 2005), whatever the number of hosts;
 *   hv_minute_t    the last minute: a ring of 60 one-second slots, advanced lazily by the
 *                  clock it was given, when something is counted and when it is read.
 *
 * A batch keeps a hv_sizes_t and a hv_tophosts_t for its summary (batch.h); the loop keeps one
 * hv_minute_t for /metrics (record.h's hv_record_counts_t). Everything runs on the loop.
 */
#ifndef HARVESTD_HEALTH_H
#define HARVESTD_HEALTH_H

#include <stddef.h>
#include <stdint.h>

/* ---- sizes ---- */

/* Sizes 0..15 have a bucket each; above, every power of two is cut into 8 equal buckets, up
 * to 2^32 (larger sizes share the last bucket; max_bytes is at most 1 GiB). */
#define HV_SIZES_EXACT 16
#define HV_SIZES_SUB 8
#define HV_SIZES_BUCKETS (HV_SIZES_EXACT + (32 - 4) * HV_SIZES_SUB)

typedef struct {
    uint64_t count;
    uint64_t sum;
    uint64_t min;          /* valid when count > 0 */
    uint64_t max;
    uint32_t bucket[HV_SIZES_BUCKETS]; /* saturate at UINT32_MAX */
} hv_sizes_t;

/** Count one size. A zeroed hv_sizes_t is empty. */
void hv_sizes_add(hv_sizes_t *s, uint64_t v);

/** Add the sizes of `from` to `into`. */
void hv_sizes_merge(hv_sizes_t *into, const hv_sizes_t *from);

/** The mean (sum / count); 0 when empty. */
double hv_sizes_mean(const hv_sizes_t *s);

/**
 * The median, estimated from the buckets (0 when empty): the middle value (the mean of the
 * two middle ones for an even count) is placed within its bucket by linear interpolation,
 * then kept within [min, max]. Exact below 16 and when every size is the same; otherwise the
 * estimate and the true middle value lie in the same bucket, whose width is at most an
 * eighth of its lower bound, so the error is less than 12.5% of the true median.
 */
double hv_sizes_median(const hv_sizes_t *s);

/* ---- the hosts with the most failures ---- */

#define HV_TOPHOSTS_SLOTS 64
#define HV_TOPHOSTS_TYPES 32   /* error types counted per host (hv_error_type_t < this) */
#define HV_HOST_KEY_MAX 280    /* "https://" + 253 + ":65535", or a bracketed IPv6 literal */

typedef struct {
    char *host;            /* "scheme://host:port" (owned); NULL: free slot */
    uint64_t failed;       /* failures counted for the host: exact while `over` is 0 */
    uint64_t over;         /* of which at most this many may be other hosts' (see below) */
    uint32_t types[HV_TOPHOSTS_TYPES]; /* its failures by type, since it took the slot */
} hv_tophost_t;

/**
 * At most HV_TOPHOSTS_SLOTS hosts. A host not in a full table takes the slot of the host with
 * the fewest failures and inherits that count plus one (`over` says how much was inherited):
 * counts never underestimate, so a host with more than N/64 of N failures is always in the
 * table, and while no more than 64 hosts failed every count is exact.
 */
typedef struct {
    unsigned n;
    hv_tophost_t slot[HV_TOPHOSTS_SLOTS];
} hv_tophosts_t;

/** Count one failure of type `type` (< HV_TOPHOSTS_TYPES; others count without a type) for
 *  `host` (copied). A zeroed hv_tophosts_t is empty. */
void hv_tophosts_add(hv_tophosts_t *t, const char *host, unsigned type);

/** The `k` hosts with the most failures into `out` (pointers into `t`, valid until its next
 *  change), most first, ties by host name; returns how many (at most k and t->n). */
unsigned hv_tophosts_top(const hv_tophosts_t *t, const hv_tophost_t **out, unsigned k);

/** The host's most common failure type (ties: the lowest value). */
unsigned hv_tophost_type(const hv_tophost_t *h);

/** Free the host names; the table is empty again. */
void hv_tophosts_clear(hv_tophosts_t *t);

/**
 * The host key of a normalised http(s) URL (an hv_url_t's href, a record's url):
 * "scheme://host:port" with the port always written (80, 443 by default). Returns its length,
 * or -1 when `url` is not such a URL or the key does not fit in `cap` (HV_HOST_KEY_MAX does).
 */
int hv_health_host_key(char *out, size_t cap, const char *url);

/* ---- the last minute ---- */

#define HV_MINUTE_SLOTS 60

/** The current time in milliseconds (a loop's uv_now, or a test's clock). */
typedef uint64_t (*hv_health_clock_cb)(void *ud);

typedef struct hv_minute_s hv_minute_t;

/** What the last minute counted: the current second and the 59 before it. */
typedef struct {
    uint64_t ok;
    uint64_t failed;
    uint64_t requests;
    uint64_t http_class[6];   /* [1] = 1xx ... [5] = 5xx; [0] unused */
    hv_sizes_t ok_sizes;      /* decoded body sizes of the ok pages downloaded */
    unsigned seconds;         /* seconds covered: 60, or fewer since the ring was made */
} hv_minute_figures_t;

/** A ring reading the time from `clock` (with `ud`); about 62 KiB. */
hv_minute_t *hv_minute_new(hv_health_clock_cb clock, void *ud);
void hv_minute_free(hv_minute_t *m);

/**
 * Count a record in the current second: `ok`, its `http_status` (0: none), `ok_bytes` (the
 * decoded size of an ok page that was downloaded; -1: none) and the `requests` made for it.
 * Slots older than a minute are reused as the clock moves on.
 */
void hv_minute_add(hv_minute_t *m, int ok, int http_status, int64_t ok_bytes, unsigned requests);

/** The figures of the last minute, as of now (slots older than 60 s left out). */
void hv_minute_figures(const hv_minute_t *m, hv_minute_figures_t *out);

#endif
