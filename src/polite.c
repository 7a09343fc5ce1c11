/* polite.c: per-host pacing, adaptive throttling and robots.txt policy. */
#include "harvestd/polite.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harvestd/common.h"
#include "harvestd/job.h"
#include "harvestd/log.h"
#include "harvestd/retry.h"

#define ENTRIES_MAX 8192
/* The delay the throttle starts from when the configured delay is 0, and its ceiling. */
#define THROTTLE_MIN_DELAY_MS 250
#define THROTTLE_MAX_DELAY_MS 60000
/* A response this many times slower than the host's best smoothed time means congestion. */
#define LATENCY_FACTOR 4.0
#define LATENCY_FLOOR_MS 500.0

/* An unreachable or failing robots.txt is asked again after this, not after the full TTL. */
#define ROBOTS_UNAVAILABLE_TTL_MS 60000

struct hv_polite_s {
    const hv_config_t *cfg;
    char product[64];          /* our robots.txt product token ("harvestd") */
    hv_hostpol_t *table;
    TAILQ_HEAD(, hv_hostpol_s) lru;
    unsigned count;
    hv_polite_stats_t stats;
};

hv_polite_t *hv_polite_new(const hv_config_t *cfg)
{
    hv_polite_t *p = hv_xcalloc(1, sizeof(*p));
    p->cfg = cfg;
    TAILQ_INIT(&p->lru);
    /* The product token is the User-Agent's first product name. */
    size_t plen = strcspn(cfg->user_agent, "/ ");
    snprintf(p->product, sizeof(p->product), "%.*s", (int)HV_MIN(plen, sizeof(p->product) - 1),
             cfg->user_agent);
    return p;
}

static void entry_free(hv_polite_t *p, hv_hostpol_t *h)
{
    HASH_DEL(p->table, h);
    TAILQ_REMOVE(&p->lru, h, _lru);
    p->count--;
    if (h->limit < h->base_limit || h->delay_ms > h->base_delay_ms)
        p->stats.throttled--;
    hv_robots_free(h->robots);
    free(h->key);
    free(h);
}

void hv_polite_free(hv_polite_t *p)
{
    hv_hostpol_t *h, *tmp;
    HASH_ITER(hh, p->table, h, tmp)
        entry_free(p, h);
    free(p);
}

hv_hostpol_t *hv_polite_get(hv_polite_t *p, const char *key, const char *host)
{
    hv_hostpol_t *h;
    HASH_FIND_STR(p->table, key, h);
    if (h == NULL) {
        /* Make room first: evict entries nobody uses, oldest first. */
        hv_hostpol_t *e, *next;
        for (e = TAILQ_FIRST(&p->lru); e != NULL && p->count >= ENTRIES_MAX; e = next) {
            next = TAILQ_NEXT(e, _lru);
            if (e->_refs == 0 && e->robots_state != HV_ROBOTS_FETCHING)
                entry_free(p, e);
        }
        h = hv_xcalloc(1, sizeof(*h));
        h->key = hv_xstrdup(key);
        hv_config_host_policy(p->cfg, host, &h->base_limit, &h->base_delay_ms, &h->jitter);
        h->limit = h->base_limit;
        h->delay_ms = h->base_delay_ms;
        HASH_ADD_KEYPTR(hh, p->table, h->key, strlen(h->key), h);
        p->count++;
    } else {
        TAILQ_REMOVE(&p->lru, h, _lru);
    }
    TAILQ_INSERT_TAIL(&p->lru, h, _lru);
    h->_refs++;
    return h;
}

/* Reference an entry the caller already reaches (hv_polite_get() without the lookup). */
static hv_hostpol_t *hold(hv_polite_t *p, hv_hostpol_t *h)
{
    TAILQ_REMOVE(&p->lru, h, _lru);
    TAILQ_INSERT_TAIL(&p->lru, h, _lru);
    h->_refs++;
    return h;
}

void hv_polite_put(hv_polite_t *p, hv_hostpol_t *h)
{
    (void)p;
    h->_refs--;
}

uint64_t hv_polite_jittered(uint64_t delay_ms, double jitter, double rnd)
{
    /* host_delay is the least gap between two starts, so jitter only ever adds to it: a gap
     * shorter than the delay would break the promise to the host. */
    if (jitter <= 0 || rnd <= 0)
        return delay_ms;
    return (uint64_t)((double)delay_ms * (1.0 + jitter * HV_MIN(rnd, 1.0)));
}

void hv_polite_started(hv_polite_t *p, hv_hostpol_t *h, uint64_t now)
{
    (void)p;
    h->prev_next_start_ms = h->next_start_ms;
    h->last_start_ms = now;
    if (h->delay_ms > 0)
        h->next_start_ms =
            now + hv_polite_jittered(h->delay_ms, h->jitter, (double)random() / (double)RAND_MAX);
}

void hv_polite_unstart(hv_hostpol_t *h)
{
    h->next_start_ms = h->prev_next_start_ms;
}

static void set_throttled(hv_polite_t *p, hv_hostpol_t *h, int was)
{
    int is = h->limit < h->base_limit || h->delay_ms > h->base_delay_ms;
    if (is && !was)
        p->stats.throttled++;
    else if (!is && was)
        p->stats.throttled--;
}

int hv_polite_feedback(hv_polite_t *p, hv_hostpol_t *h, int status, int timeout,
                       uint64_t latency_ms, uint64_t now)
{
    if (!p->cfg->adaptive)
        return 0;
    int was = h->limit < h->base_limit || h->delay_ms > h->base_delay_ms;
    int congested = status == 429 || status == 503 || timeout;
    if (latency_ms > 0 && !congested) {
        double l = (double)latency_ms;
        h->ewma_ms = h->ewma_ms == 0 ? l : 0.8 * h->ewma_ms + 0.2 * l;
        if (h->floor_ms == 0 || h->ewma_ms < h->floor_ms)
            h->floor_ms = h->ewma_ms;
        else
            h->floor_ms *= 1.001; /* forget an old best slowly: hosts change */
        if (h->ewma_ms > LATENCY_FACTOR * h->floor_ms && h->ewma_ms > LATENCY_FLOOR_MS)
            congested = 1;
    }
    if (congested) {
        /* One slow-down per round trip: the requests already in flight answer the same way and
         * must not halve the pace again. */
        uint64_t settle = h->ewma_ms > 0 ? (uint64_t)h->ewma_ms : 1000;
        if (now - h->last_decrease_ms < settle && h->last_decrease_ms != 0)
            return 0;
        unsigned old_limit = h->limit;
        uint64_t old_delay = h->delay_ms;
        h->limit = h->limit > 1 ? h->limit / 2 : 1;
        h->delay_ms = h->delay_ms < THROTTLE_MIN_DELAY_MS ? THROTTLE_MIN_DELAY_MS
                                                          : HV_MIN(h->delay_ms * 2,
                                                                   (uint64_t)THROTTLE_MAX_DELAY_MS);
        h->successes = 0;
        h->last_decrease_ms = now;
        h->decreases++;
        /* The longer delay counts from the last start, not only from the next one. */
        if (h->next_start_ms < h->last_start_ms + h->delay_ms)
            h->next_start_ms = h->last_start_ms + h->delay_ms;
        p->stats.decreases++;
        set_throttled(p, h, was);
        HV_LOG(HV_LOG_DEBUG,
               "event=throttle host=%s direction=down reason=%s limit=%u->%u delay_ms=%" PRIu64
               "->%" PRIu64,
               h->key, status ? "status" : timeout ? "timeout" : "latency", old_limit, h->limit,
               old_delay, h->delay_ms);
        return 1;
    }
    if (!was || status < 200 || status > 399)
        return 0;
    /* Additive increase: one step back towards the configured pace after as many successes
     * as the current concurrency. */
    if (++h->successes < h->limit)
        return 0;
    h->successes = 0;
    if (h->limit < h->base_limit)
        h->limit++;
    if (h->delay_ms > h->base_delay_ms) {
        /* Shrink by a quarter; below a few tens of milliseconds the throttle's own delay is
         * noise, so it ends there. */
        uint64_t next = h->delay_ms - HV_MAX(h->delay_ms / 4, (uint64_t)1);
        h->delay_ms = next < h->base_delay_ms || next < THROTTLE_MIN_DELAY_MS / 8
                          ? h->base_delay_ms
                          : next;
    }
    p->stats.increases++;
    set_throttled(p, h, was);
    HV_LOG(HV_LOG_DEBUG, "event=throttle host=%s direction=up limit=%u delay_ms=%" PRIu64,
           h->key, h->limit, h->delay_ms);
    return 1;
}

int hv_polite_attempt_ended(hv_polite_t *p, const hv_job_t *job, uint64_t now, const char **key)
{
    hv_hostpol_t *h = job->pol;
    const hv_record_t *rec = job->rec;
    if (h == NULL)
        return 0;
    int timeout = rec->error_type == HV_ET_READ_TIMEOUT || rec->error_type == HV_ET_TOTAL_TIMEOUT ||
                  rec->error_type == HV_ET_CONNECT_TIMEOUT;
    uint64_t latency = rec->http_status > 0 && now > job->attempt_ms ? now - job->attempt_ms : 0;
    /* An HTTP/2 server's ENHANCE_YOUR_CALM says what a 429 says. */
    int calm = rec->detail == HV_D_STREAM_RESET && rec->error != NULL &&
               strcmp(rec->error, "stream_reset_enhance_your_calm") == 0;
    int changed = hv_polite_feedback(p, h, calm ? 429 : rec->http_status, timeout, latency, now);
    *key = h->key;
    hv_polite_put(p, h);
    return changed;
}

void hv_polite_min_delay(hv_hostpol_t *h, uint64_t ms)
{
    if (h->base_delay_ms < ms)
        h->base_delay_ms = ms;
    if (h->delay_ms < ms)
        h->delay_ms = ms;
}

/* ---- robots.txt ---- */

static void robots_ready(hv_hostpol_t *h, hv_robots_t *rules, int available, uint64_t expires,
                         const char *result)
{
    hv_robots_free(h->robots);
    h->robots = rules;
    h->robots_state = HV_ROBOTS_READY;
    h->robots_unavailable = !available;
    if (available) {
        h->robots_final = 0;
        h->robots_why[0] = '\0';
        h->robots_fail_type = HV_ET_NONE;
    }
    h->robots_expires_ms = expires;
    uint64_t delay = hv_robots_crawl_delay_ms(rules);
    if (delay > 0)
        hv_polite_min_delay(h, delay);
    HV_LOG(HV_LOG_INFO, "event=robots host=%s result=%s%s%s rules=%zu crawl_delay_ms=%" PRIu64,
           h->key, result, available ? "" : " cause=", available ? "" : h->robots_why,
           hv_robots_rules(rules), delay);
}

/*
 * Whether a page of the host would meet the failure of its robots.txt request (`job`) just
 * the same, and for good: it asks the same name for an address and is shown the same
 * certificate, unless a redirect took robots.txt elsewhere. Its record then reports that
 * failure, which is what happened; a refusal would make a count of error types say
 * "robots.txt refused us" where the name does not even resolve. Only fixed details qualify,
 * because a record keeps a family's argument only inside its text.
 */
static int fails_the_pages_too(const hv_job_t *job)
{
    const hv_record_t *rec = job->rec;
    if (job->redirects > 0)
        return 0;
    switch (rec->error_type) {
    case HV_ET_DNS:
        return rec->detail == HV_D_NAME_NOT_RESOLVED || rec->detail == HV_D_NO_ADDRESS_FOR_NAME;
    case HV_ET_CERTIFICATE:
        return rec->detail != HV_D_NONE && !hv_detail_has_arg(rec->detail);
    case HV_ET_BLOCKED_ADDRESS:
        return 1; /* the guard refuses the page's own connection just the same */
    default:
        return 0;
    }
}

/* `body` (`len` bytes) for a 2xx, else NULL with `job`'s record saying how the request
 * failed; `job` NULL: no request could be made. */
static void robots_result(hv_polite_t *p, hv_hostpol_t *h, const char *body, size_t len,
                          const hv_job_t *job, uint64_t now)
{
    const hv_config_t *cfg = p->cfg;
    const hv_record_t *rec = job != NULL ? job->rec : NULL;
    uint64_t expires = now + cfg->robots_ttl_ms;
    if (rec == NULL) {
        robots_ready(h, hv_robots_allow_all(), 1, expires, "bad_url");
    } else if (body != NULL) {
        robots_ready(h, hv_robots_parse(body, len, p->product), 1, expires, "fetched");
    } else if (rec->error_type == HV_ET_HTTP_STATUS && rec->http_status >= 400 &&
               rec->http_status < 500) {
        robots_ready(h, hv_robots_allow_all(), 1, expires, "4xx_allow_all");
    } else if (rec->error_type == HV_ET_TOO_MANY_REDIRECTS) {
        robots_ready(h, hv_robots_allow_all(), 1, expires, "redirects_allow_all");
    } else {
        /* The refused pages say why (the failure's text, http_503 for a status); and when it
         * would not pass by asking again (a 5xx always might), they fail at once instead of
         * retrying into the same wall. That is decided on the failure's code, by retry. */
        snprintf(h->robots_why, sizeof(h->robots_why), "%s",
                 rec->error != NULL ? rec->error : hv_error_type_name(rec->error_type));
        h->robots_final = rec->error_type != HV_ET_HTTP_STATUS && !hv_retry_transient(cfg, rec);
        h->robots_fail_type = HV_ET_NONE;
        if (h->robots_final && fails_the_pages_too(job)) {
            h->robots_fail_type = rec->error_type;
            hv_fault_set(&h->robots_fault, rec->detail, NULL);
        }
        robots_ready(h, hv_robots_disallow_all(), 0,
                     now + HV_MIN(cfg->robots_ttl_ms, (uint64_t)ROBOTS_UNAVAILABLE_TTL_MS),
                     "unavailable_disallow_all");
    }
}

hv_record_t *hv_polite_robots_request(hv_polite_t *p, hv_hostpol_t *h, hv_scheme_t scheme,
                                      const char *name, uint16_t port, uint64_t now, hv_url_t *url)
{
    char text[HV_URL_MAX];
    const char *reason;
    int v6 = strchr(name, ':') != NULL;

    h->robots_state = HV_ROBOTS_FETCHING;
    snprintf(text, sizeof(text), "%s://%s%s%s:%u/robots.txt",
             scheme == HV_SCHEME_HTTPS ? "https" : "http", v6 ? "[" : "", name, v6 ? "]" : "",
             (unsigned)port);
    if (hv_url_parse(url, text, strlen(text), &reason) != 0) {
        robots_result(p, h, NULL, 0, NULL, now);
        return NULL;
    }
    hv_record_t *rec = hv_record_new(text, strlen(text));
    hold(p, h);
    p->stats.robots_fetches++;
    HV_LOG(HV_LOG_DEBUG, "event=robots_fetch host=%s", h->key);
    return rec;
}

void hv_polite_robots_ended(hv_polite_t *p, const hv_job_t *job, int abandon, uint64_t now)
{
    hv_hostpol_t *h = job->pol;
    if (abandon || job->end == HV_JOB_CANCELLED)
        h->robots_state = HV_ROBOTS_UNKNOWN;
    else if (job->end == HV_JOB_GOT_PAGE)
        robots_result(p, h, job->body != NULL ? job->body : "", job->body_len, job, now);
    else
        robots_result(p, h, NULL, 0, job, now);
}

hv_hostpol_t *hv_polite_admit(hv_polite_t *p, hv_hostpol_t *h, const hv_job_t *job, uint64_t now,
                              int *robots_retry)
{
    if (p->cfg->obey_robots && h->robots != NULL &&
        !hv_robots_allowed(h->robots, job->url.target, strlen(job->url.target))) {
        *robots_retry = h->robots_unavailable && !h->robots_final;
        hv_job_fill_record(job, now);
        if (h->robots_unavailable && h->robots_fail_type != HV_ET_NONE) {
            hv_record_fail(job->rec, HV_STAGE_DOWNLOAD, h->robots_fail_type, h->robots_fault.code,
                           h->robots_fault.arg);
        } else {
            if (h->robots_unavailable)
                hv_record_fail(job->rec, HV_STAGE_DOWNLOAD, HV_ET_ROBOTS, HV_D_ROBOTS_UNAVAILABLE,
                               h->robots_why);
            else
                hv_record_fail(job->rec, HV_STAGE_DOWNLOAD, HV_ET_ROBOTS, HV_D_DISALLOWED_BY_ROBOTS,
                               NULL);
            p->stats.robots_disallowed++;
        }
        hv_polite_unstart(h);
        return NULL;
    }
    if (job->pol != NULL) /* a redirect moved the job from another host */
        hv_polite_put(p, job->pol);
    return hold(p, h);
}

const hv_polite_stats_t *hv_polite_stats(const hv_polite_t *p)
{
    return &p->stats;
}
