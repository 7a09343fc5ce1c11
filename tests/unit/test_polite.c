/*
 * test_polite.c: per-host pacing, the adaptive throttle and the robots.txt policy
 * (polite.h). Every call takes the time from its caller, so the tests pass explicit clock
 * values; nothing is fetched: a robots.txt outcome is a job whose end, body and record the
 * test fills in as fetch would.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "harvestd/common.h"
#include "harvestd/config.h"
#include "harvestd/job.h"
#include "harvestd/polite.h"
#include "harvestd/record.h"
#include "harvestd/robots.h"
#include "harvestd/sched.h"
#include "harvestd/url.h"
#include "fixtures.h"
#include "test.h"

#define HOUR_MS UINT64_C(3600000)
#define NOW UINT64_C(1000000) /* an arbitrary loop time */

/* Polite over `cfg` (which the test has adjusted and which must outlive it). */
static hv_polite_t *polite_new(hv_config_t *cfg)
{
    char err[256];
    ASSERT_OK(hv_config_finish(cfg, err, sizeof(err)));
    return hv_polite_new(cfg);
}

/* A scheduler's host entry, as the engine has it: key, name and a referenced pol (the entry
 * it hands hv_polite_admit() and hv_polite_robots_request()). */
static void host_init(hv_host_t *h, hv_polite_t *p, const char *name, uint16_t port)
{
    char key[300];
    snprintf(key, sizeof(key), "http://%s:%u", name, (unsigned)port);
    memset(h, 0, sizeof(*h));
    h->key = hv_xstrdup(key);
    h->name = hv_xstrdup(name);
    h->port = port;
    h->scheme = HV_SCHEME_HTTP;
    h->pol = hv_polite_get(p, h->key, h->name);
}

static void host_clear(hv_host_t *h, hv_polite_t *p)
{
    hv_polite_put(p, h->pol);
    free(h->key);
    free(h->name);
}

/* A page job for `target` on host `h`, waiting to be admitted. */
static hv_job_t *page_job(hv_host_t *h, const char *target)
{
    char text[400];
    hv_url_t url;
    snprintf(text, sizeof(text), "http://%s:%u%s", h->name, (unsigned)h->port, target);
    ASSERT_OK(hv_url_parse(&url, text, strlen(text), NULL));
    return hv_job_new(1, HV_JOB_PAGE, hv_record_new(text, strlen(text)), &url);
}

/* The robots.txt job for `pol` (scheme://name:port), numbered `id`, made as the engine makes
 * it of hv_polite_robots_request()'s record and URL; NULL when no request can be made. */
static hv_job_t *robots_job(hv_polite_t *p, hv_hostpol_t *pol, hv_scheme_t scheme, const char *name,
                            uint16_t port, uint64_t id, uint64_t now)
{
    hv_url_t url;
    hv_record_t *rec = hv_polite_robots_request(p, pol, scheme, name, port, now, &url);
    if (rec == NULL)
        return NULL;
    hv_job_t *job = hv_job_new(id, HV_JOB_ROBOTS, rec, &url);
    job->pol = pol;
    return job;
}

/* Fetch h's robots.txt and end the fetch as `end` says: with `body` for GOT_PAGE, with a
 * failure record (type, error, http_status) for FAILED, after `redirects` redirects. */
static void robots_outcome(hv_polite_t *p, hv_host_t *h, hv_job_end_t end, const char *body,
                           hv_error_type_t type, const char *error, int http_status,
                           unsigned redirects, uint64_t now)
{
    hv_job_t *job = robots_job(p, h->pol, h->scheme, h->name, h->port, 99, now);
    ASSERT_NOT_NULL(job);
    ASSERT_EQ(HV_ROBOTS_FETCHING, h->pol->robots_state);
    job->end = end;
    job->redirects = redirects;
    if (body != NULL) {
        job->body = hv_xstrdup(body);
        job->body_len = strlen(body);
    }
    if (end == HV_JOB_FAILED) {
        fx_fail_record(job->rec, HV_STAGE_DOWNLOAD, type, error);
        job->rec->http_status = http_status;
    }
    hv_polite_robots_ended(p, job, 0, now);
    hv_polite_put(p, job->pol);
    hv_job_free(job);
}

static void robots_fetched(hv_polite_t *p, hv_host_t *h, const char *body, uint64_t now)
{
    robots_outcome(p, h, HV_JOB_GOT_PAGE, body, HV_ET_NONE, NULL, 0, 0, now);
}

static void robots_failed(hv_polite_t *p, hv_host_t *h, hv_error_type_t type, const char *error,
                          int http_status, uint64_t now)
{
    robots_outcome(p, h, HV_JOB_FAILED, NULL, type, error, http_status, 0, now);
}

/* Admit a page job for `target` and check that it fails without a request, as `type` and
 * `error`, retryable later as a robots.txt refusal or not; the job is freed. */
static void check_not_admitted(hv_polite_t *p, hv_host_t *h, const char *target,
                               hv_error_type_t type, const char *error, int robots_retry)
{
    hv_job_t *job = page_job(h, target);
    int retry = -1;
    ASSERT_NULL(hv_polite_admit(p, h->pol, job, NOW, &retry));
    ASSERT_EQ(0, job->rec->ok);
    ASSERT_EQ(type, job->rec->error_type);
    ASSERT_EQ(HV_STAGE_DOWNLOAD, job->rec->stage);
    ASSERT_STR_EQ(error, job->rec->error);
    /* The code is set too, not only its text (the one family here is robots_txt_unavailable_). */
    if (hv_detail_has_arg(job->rec->detail))
        ASSERT_EQ(HV_D_ROBOTS_UNAVAILABLE, job->rec->detail);
    else
        ASSERT_STR_EQ(error, hv_detail_str(job->rec->detail));
    ASSERT_EQ(robots_retry, retry);
    ASSERT_NULL(job->pol);
    hv_job_free(job);
}

/* ... refused by robots.txt (RobotsDisallowed) with `error`. */
static void check_refused(hv_polite_t *p, hv_host_t *h, const char *target, const char *error,
                          int robots_retry)
{
    check_not_admitted(p, h, target, HV_ET_ROBOTS, error, robots_retry);
}

/* The host's rules are known, as a stand-in (`unavailable`) or not, until `expires`. */
static void check_rules(const hv_host_t *h, int unavailable, uint64_t expires)
{
    ASSERT_EQ(HV_ROBOTS_READY, h->pol->robots_state);
    ASSERT_NOT_NULL(h->pol->robots);
    ASSERT_EQ(unavailable, h->pol->robots_unavailable);
    ASSERT_EQ(expires, h->pol->robots_expires_ms);
}

static void check_admitted(hv_polite_t *p, hv_host_t *h, const char *target)
{
    hv_job_t *job = page_job(h, target);
    int retry = -1;
    job->pol = hv_polite_admit(p, h->pol, job, NOW, &retry);
    ASSERT_NOT_NULL(job->pol);
    ASSERT_EQ(1, job->rec->ok);
    ASSERT(job->pol == h->pol);
    ASSERT_EQ(-1, retry);
    hv_polite_put(p, job->pol);
    hv_job_free(job);
}

/* ---- entries and their configured pace ---- */

/* One entry per scheme://host:port, shared by whoever asks; _refs counts the holders (the
 * scheduler's host entry, each attempt in flight) so that eviction never takes a live one. */
TEST_IMPL(polite_get_shares_one_entry_per_key)
{
    hv_config_t cfg;
    hv_config_defaults(&cfg);
    hv_polite_t *p = polite_new(&cfg);
    hv_hostpol_t *a = hv_polite_get(p, "http://a.test:80", "a.test");
    hv_hostpol_t *again = hv_polite_get(p, "http://a.test:80", "a.test");
    hv_hostpol_t *other_port = hv_polite_get(p, "http://a.test:8080", "a.test");
    ASSERT(a == again);
    ASSERT(a != other_port);
    ASSERT_STR_EQ("http://a.test:80", a->key);
    ASSERT_EQ(2, a->_refs);
    ASSERT_EQ(1, other_port->_refs);
    /* The configured pace: per_host 4, no delay. */
    ASSERT_EQ(4, a->limit);
    ASSERT_EQ(4, a->base_limit);
    ASSERT_EQ(0, a->delay_ms);
    ASSERT_EQ(HV_ROBOTS_UNKNOWN, a->robots_state);
    ASSERT_NULL(a->robots);
    hv_polite_put(p, again);
    ASSERT_EQ(1, a->_refs);
    hv_polite_put(p, a);
    hv_polite_put(p, other_port);
    ASSERT_EQ(0, a->_refs);
    hv_polite_free(p);
}

/* What polite remembers about a host (here: a throttled limit) survives while the entry is
 * referenced, however many other hosts come and go; unreferenced entries are forgotten,
 * oldest first, once there are too many. */
TEST_IMPL(polite_evicts_only_unreferenced_entries_oldest_first)
{
    hv_config_t cfg;
    char key[64], name[32];
    hv_config_defaults(&cfg);
    hv_polite_t *p = polite_new(&cfg);
    hv_hostpol_t *held = hv_polite_get(p, "http://held.test:80", "held.test");
    hv_hostpol_t *old = hv_polite_get(p, "http://old.test:80", "old.test");
    held->limit = 1;
    old->limit = 1;
    hv_polite_put(p, old);
    for (int i = 0; i < 20000; i++) {
        snprintf(name, sizeof(name), "h%d.test", i);
        snprintf(key, sizeof(key), "http://%s:80", name);
        hv_hostpol_t *e = hv_polite_get(p, key, name);
        e->limit = 2;
        hv_polite_put(p, e);
    }
    ASSERT_EQ(1, held->limit);
    hv_hostpol_t *fresh = hv_polite_get(p, "http://old.test:80", "old.test");
    ASSERT_EQ(4, fresh->limit); /* a new entry: the old one was evicted */
    hv_hostpol_t *recent = hv_polite_get(p, key, name);
    ASSERT_EQ(2, recent->limit); /* the last one seen is still known */
    hv_polite_put(p, fresh);
    hv_polite_put(p, recent);
    hv_polite_put(p, held);
    hv_polite_free(p);
}

static void add_host_rule(hv_config_t *cfg, const char *name, unsigned per_host, uint64_t delay_ms)
{
    hv_host_rule_t *r = &cfg->host_rules[cfg->nhost_rules++];
    memset(r, 0, sizeof(*r));
    snprintf(r->name, sizeof(r->name), "%s", name);
    r->per_host = per_host;
    r->per_host_set = per_host > 0;
    r->delay_ms = delay_ms;
    r->delay_set = 1;
}

/* [host "NAME"] sections set a host's pace: an exact name first, else the longest "*.suffix",
 * else the global per_host / host_delay. They apply by name, whatever the port. */
TEST_IMPL(polite_get_applies_host_rules)
{
    hv_config_t cfg;
    hv_config_defaults(&cfg);
    cfg.per_host = 6;
    add_host_rule(&cfg, "slow.test", 1, 2000);
    add_host_rule(&cfg, "*.cdn.test", 0, 100);
    hv_polite_t *p = polite_new(&cfg);
    hv_hostpol_t *slow = hv_polite_get(p, "https://slow.test:8443", "slow.test");
    hv_hostpol_t *edge = hv_polite_get(p, "http://edge.cdn.test:80", "edge.cdn.test");
    hv_hostpol_t *apex = hv_polite_get(p, "http://cdn.test:80", "cdn.test");
    ASSERT_EQ(1, slow->limit);
    ASSERT_EQ(2000, slow->delay_ms);
    ASSERT_EQ(2000, slow->base_delay_ms);
    ASSERT_EQ(6, edge->limit); /* the rule sets no per_host: the global one holds */
    ASSERT_EQ(100, edge->delay_ms);
    ASSERT_EQ(6, apex->limit); /* "*.cdn.test" covers subdomains only */
    ASSERT_EQ(0, apex->delay_ms);
    hv_polite_put(p, slow);
    hv_polite_put(p, edge);
    hv_polite_put(p, apex);
    hv_polite_free(p);
}

/* ---- pacing ---- */

/* Polite over `cfg` (filled by the caller) and the referenced entry of host a.test. */
static hv_polite_t *one_host(hv_config_t *cfg, hv_hostpol_t **h)
{
    hv_polite_t *p = polite_new(cfg);
    *h = hv_polite_get(p, "http://a.test:80", "a.test");
    return p;
}

static void one_host_free(hv_polite_t *p, hv_hostpol_t *h)
{
    hv_polite_put(p, h);
    hv_polite_free(p);
}

/* A host paced by host_delay and host_delay_jitter. */
static hv_polite_t *paced(hv_config_t *cfg, uint64_t delay_ms, double jitter, hv_hostpol_t **h)
{
    hv_config_defaults(cfg);
    cfg->host_delay_ms = delay_ms;
    cfg->host_delay_jitter = jitter;
    return one_host(cfg, h);
}

TEST_IMPL(polite_started_sets_next_start_after_delay)
{
    hv_config_t cfg;
    hv_hostpol_t *h;
    hv_polite_t *p = paced(&cfg, 500, 0, &h);
    ASSERT_EQ(0, h->next_start_ms); /* the first request may start at once */
    hv_polite_started(p, h, NOW);
    ASSERT_EQ(NOW, h->last_start_ms);
    ASSERT_EQ(NOW + 500, h->next_start_ms);
    hv_polite_started(p, h, NOW + 700);
    ASSERT_EQ(NOW + 1200, h->next_start_ms);

    /* Without a delay there is no pacing. */
    hv_hostpol_t *fast = hv_polite_get(p, "http://b.test:80", "b.test");
    fast->delay_ms = 0;
    hv_polite_started(p, fast, NOW);
    ASSERT_EQ(0, fast->next_start_ms);
    hv_polite_put(p, fast);
    one_host_free(p, h);
}

/* The delay is the least gap between two starts: jitter j adds up to j x delay, never takes
 * anything off. */
TEST_IMPL(polite_jittered_only_adds)
{
    ASSERT_EQ(1000, hv_polite_jittered(1000, 0.2, 0.0));
    ASSERT_EQ(1100, hv_polite_jittered(1000, 0.2, 0.5));
    ASSERT_EQ(1200, hv_polite_jittered(1000, 0.2, 1.0));
    ASSERT_EQ(200, hv_polite_jittered(200, 0.5, 0.0));
    ASSERT_EQ(300, hv_polite_jittered(200, 0.5, 1.0));
    ASSERT_EQ(2000, hv_polite_jittered(1000, 1.0, 1.0));
    ASSERT_EQ(1000, hv_polite_jittered(1000, 0.0, 1.0));
    ASSERT_EQ(0, hv_polite_jittered(0, 0.5, 1.0));
    for (int i = 0; i <= 1000; i++) {
        uint64_t d = hv_polite_jittered(333, 0.5, i / 1000.0);
        ASSERT_GE(d, 333);
        ASSERT_LE(d, 499);
    }
}

/* Whatever delay is in force goes through the jitter: the configured one, a Crawl-delay, the
 * throttle's. The next start is in [delay, delay x (1 + j)]. */
static void check_jittered_starts(hv_polite_t *p, hv_hostpol_t *h, uint64_t delay, double j)
{
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int i = 0; i < 200; i++) {
        hv_polite_started(p, h, NOW);
        ASSERT_GE(h->next_start_ms, NOW + delay);
        ASSERT_LE(h->next_start_ms, NOW + (uint64_t)((double)delay * (1 + j)));
        lo = HV_MIN(lo, h->next_start_ms);
        hi = HV_MAX(hi, h->next_start_ms);
    }
    ASSERT_GT(hi - lo, (uint64_t)((double)delay * j / 2)); /* the draws do vary */
}

TEST_IMPL(polite_started_jitter_stays_within_fraction)
{
    hv_config_t cfg;
    hv_hostpol_t *h;
    hv_polite_t *p = paced(&cfg, 1000, 0.2, &h);
    check_jittered_starts(p, h, 1000, 0.2);
    hv_polite_min_delay(h, 2000); /* a Crawl-delay */
    check_jittered_starts(p, h, 2000, 0.2);
    one_host_free(p, h);

    p = paced(&cfg, 0, 0.5, &h);
    cfg.adaptive = 1; /* the throttle's delay: 250 ms after a 429 */
    ASSERT_EQ(1, hv_polite_feedback(p, h, 429, 0, 0, NOW));
    ASSERT_EQ(250, h->delay_ms);
    check_jittered_starts(p, h, 250, 0.5);
    one_host_free(p, h);
}

/* A start that never went out (robots.txt refused the page) must not cost the host's next
 * job a delay. */
TEST_IMPL(polite_unstart_restores_next_start)
{
    hv_config_t cfg;
    hv_hostpol_t *h;
    hv_polite_t *p = paced(&cfg, 500, 0, &h);
    hv_polite_started(p, h, NOW);
    hv_polite_started(p, h, NOW + 500);
    ASSERT_EQ(NOW + 1000, h->next_start_ms);
    hv_polite_unstart(h);
    ASSERT_EQ(NOW + 500, h->next_start_ms);
    one_host_free(p, h);
}

TEST_IMPL(polite_min_delay_raises_but_never_lowers)
{
    hv_config_t cfg;
    hv_hostpol_t *h;
    hv_polite_t *p = paced(&cfg, 1000, 0, &h);
    hv_polite_min_delay(h, 3000);
    ASSERT_EQ(3000, h->delay_ms);
    ASSERT_EQ(3000, h->base_delay_ms); /* the new floor: the throttle returns to it, not below */
    hv_polite_min_delay(h, 500);
    ASSERT_EQ(3000, h->delay_ms);
    ASSERT_EQ(3000, h->base_delay_ms);
    ASSERT_EQ(0, hv_polite_stats(p)->throttled);
    one_host_free(p, h);
}

/* ---- the adaptive throttle ---- */

/* A host with per_host 8 and no delay, under the adaptive throttle. */
static hv_polite_t *adaptive_polite(hv_config_t *cfg, hv_hostpol_t **h)
{
    hv_config_defaults(cfg);
    cfg->adaptive = 1;
    cfg->per_host = 8;
    return one_host(cfg, h);
}

/* Tell the throttle about one response (no latency measured) at `now`, and check whether it
 * says the pace changed and what the pace is afterwards. */
static void step(hv_polite_t *p, hv_hostpol_t *h, int status, int timeout, uint64_t now,
                 int changed, unsigned limit, uint64_t delay_ms)
{
    int got = hv_polite_feedback(p, h, status, timeout, 0, now);
    if (got != changed || h->limit != limit || h->delay_ms != delay_ms)
        hv_test_fail(__FILE__, __LINE__,
                     "status %d timeout %d at NOW%+" PRId64 ": changed %d limit %u delay %" PRIu64
                     ", want %d %u %" PRIu64,
                     status, timeout, (int64_t)(now - NOW), got, h->limit, h->delay_ms, changed,
                     limit, delay_ms);
}

TEST_IMPL(polite_adaptive_429_halves_limit_and_raises_delay)
{
    hv_config_t cfg;
    hv_hostpol_t *h;
    hv_polite_t *p = adaptive_polite(&cfg, &h);
    hv_polite_started(p, h, NOW - 100);
    /* From no delay to the throttle's least one, 250 ms. */
    step(p, h, 429, 0, NOW, 1, 4, 250);
    /* The longer delay counts from the last start. */
    ASSERT_EQ(NOW - 100 + 250, h->next_start_ms);
    ASSERT_EQ(1, hv_polite_stats(p)->decreases);
    ASSERT_EQ(1, hv_polite_stats(p)->throttled);
    ASSERT_EQ(0, hv_polite_stats(p)->increases);

    /* A 503 and a timeout say the same; once there is a delay it doubles. */
    step(p, h, 503, 0, NOW + 2000, 1, 2, 500);
    step(p, h, 0, 1, NOW + 4000, 1, 1, 1000);
    step(p, h, 429, 0, NOW + 6000, 1, 1, 2000); /* never below one request */
    ASSERT_EQ(4, hv_polite_stats(p)->decreases);
    ASSERT_EQ(1, hv_polite_stats(p)->throttled); /* hosts, not events */
    one_host_free(p, h);
}

/* The requests in flight when a host says 429 all answer 429: that is one signal, not eight.
 * Within one round trip (the smoothed response time, or 1 s before there is one) further
 * congestion changes nothing. */
TEST_IMPL(polite_adaptive_one_decrease_per_round_trip)
{
    hv_config_t cfg;
    hv_hostpol_t *h;
    hv_polite_t *p = adaptive_polite(&cfg, &h);
    step(p, h, 429, 0, NOW, 1, 4, 250);
    step(p, h, 429, 0, NOW + 500, 0, 4, 250);
    step(p, h, 503, 0, NOW + 999, 0, 4, 250);
    ASSERT_EQ(1, hv_polite_stats(p)->decreases);
    step(p, h, 429, 0, NOW + 1000, 1, 2, 500);
    one_host_free(p, h);
}

/* Additive increase: after as many successes as the current limit, one step back: the limit
 * up by one and the delay down by a quarter, until the configured pace is reached (a
 * throttle delay below ~31 ms drops to the configured one). */
TEST_IMPL(polite_adaptive_successes_give_back_one_step_at_a_time)
{
    hv_config_t cfg;
    hv_hostpol_t *h;
    hv_polite_t *p = adaptive_polite(&cfg, &h);
    step(p, h, 429, 0, NOW, 1, 4, 250);
    for (int i = 0; i < 3; i++)
        step(p, h, 200, 0, NOW + 1, 0, 4, 250);
    /* Failures other than congestion are not successes and do not count. */
    step(p, h, 404, 0, NOW + 1, 0, 4, 250);
    step(p, h, 0, 0, NOW + 1, 0, 4, 250);
    step(p, h, 301, 0, NOW + 1, 1, 5, 188); /* the 4th success; a redirect is one */
    ASSERT_EQ(1, hv_polite_stats(p)->increases);
    for (int i = 0; i < 4; i++)
        step(p, h, 200, 0, NOW + 2, 0, 5, 188);
    step(p, h, 200, 0, NOW + 2, 1, 6, 141);

    /* Back to the configured pace: 4 steps for the limit, 8 for the delay (250, 188, 141, 106,
     * 80, 60, 45, 34, then 26 is noise: 0). */
    for (int i = 0; i < 1000 && hv_polite_stats(p)->throttled > 0; i++)
        hv_polite_feedback(p, h, 200, 0, 0, NOW + 3);
    ASSERT_EQ(8, h->limit);
    ASSERT_EQ(0, h->delay_ms);
    ASSERT_EQ(8, hv_polite_stats(p)->increases);
    ASSERT_EQ(0, hv_polite_stats(p)->throttled);
    /* At the configured pace successes change nothing. */
    for (int i = 0; i < 20; i++)
        step(p, h, 200, 0, NOW + 4, 0, 8, 0);
    ASSERT_EQ(8, hv_polite_stats(p)->increases);
    one_host_free(p, h);
}

/* A host that starts answering four times slower than its best (and over half a second) is
 * congested too, even without a 429. */
TEST_IMPL(polite_adaptive_latency_climb_slows_down)
{
    hv_config_t cfg;
    hv_hostpol_t *h;
    hv_polite_t *p = adaptive_polite(&cfg, &h);
    for (int i = 0; i < 5; i++)
        ASSERT_EQ(0, hv_polite_feedback(p, h, 200, 0, 100, NOW + (uint64_t)i));
    ASSERT_EQ(8, h->limit);
    /* ewma = 0.8 x 100 + 0.2 x 3000 = 680 ms: above 4 x 100 and 500. */
    ASSERT_EQ(1, hv_polite_feedback(p, h, 200, 0, 3000, NOW + 10));
    ASSERT_EQ(4, h->limit);
    ASSERT_EQ(1, hv_polite_stats(p)->decreases);
    one_host_free(p, h);
}

TEST_IMPL(polite_feedback_ignored_without_adaptive)
{
    hv_config_t cfg;
    hv_hostpol_t *h;
    hv_config_defaults(&cfg);
    hv_polite_t *p = one_host(&cfg, &h);
    step(p, h, 429, 0, NOW, 0, 4, 0);
    step(p, h, 0, 1, NOW + 5000, 0, 4, 0);
    ASSERT_EQ(0, hv_polite_stats(p)->decreases);
    one_host_free(p, h);
}

/* ---- robots.txt ---- */

/* Polite obeying robots.txt, and host `name`:`port` with its entry referenced. */
static hv_polite_t *robots_polite(hv_config_t *cfg, hv_host_t *h, const char *name, uint16_t port)
{
    hv_config_defaults(cfg);
    cfg->obey_robots = 1;
    hv_polite_t *p = polite_new(cfg);
    host_init(h, p, name, port);
    return p;
}

static void robots_free(hv_polite_t *p, hv_host_t *h)
{
    host_clear(h, p);
    hv_polite_free(p);
}

/* The robots.txt job is an ordinary job for scheme://name:port/robots.txt that references the
 * host it fetches for; while it runs the host's rules are FETCHING (the scheduler does not ask
 * again). */
TEST_IMPL(polite_robots_job_fetches_robots_txt_of_host)
{
    hv_config_t cfg;
    hv_host_t h;
    hv_polite_t *p = robots_polite(&cfg, &h, "127.0.0.1", 8080);
    hv_job_t *job = robots_job(p, h.pol, HV_SCHEME_HTTP, "127.0.0.1", 8080, 42, NOW);
    ASSERT_NOT_NULL(job);
    ASSERT_EQ(42, job->id);
    ASSERT_EQ(HV_JOB_ROBOTS, job->kind);
    ASSERT_STR_EQ("http://127.0.0.1:8080/robots.txt", job->rec->requested_url);
    ASSERT_STR_EQ("http://127.0.0.1:8080/robots.txt", job->url.href);
    ASSERT_STR_EQ("/robots.txt", job->url.target);
    ASSERT(job->pol == h.pol);
    ASSERT_EQ(2, h.pol->_refs);
    ASSERT_EQ(HV_ROBOTS_FETCHING, h.pol->robots_state);
    ASSERT_EQ(1, hv_polite_stats(p)->robots_fetches);
    hv_polite_put(p, job->pol);
    hv_job_free(job);
    robots_free(p, &h);
}

TEST_IMPL(polite_robots_job_brackets_ipv6_name)
{
    hv_config_t cfg;
    hv_host_t h;
    hv_polite_t *p = robots_polite(&cfg, &h, "::1", 8443);
    hv_job_t *job = robots_job(p, h.pol, HV_SCHEME_HTTPS, "::1", 8443, 1, NOW);
    ASSERT_NOT_NULL(job);
    ASSERT_STR_EQ("https://[::1]:8443/robots.txt", job->rec->requested_url);
    ASSERT_STR_EQ("::1", job->url.host);
    ASSERT_EQ(1, job->url.host_is_ipv6);
    ASSERT_EQ(8443, job->url.port);
    ASSERT_EQ(HV_SCHEME_HTTPS, job->url.scheme);
    hv_polite_put(p, job->pol);
    hv_job_free(job);
    robots_free(p, &h);
}

/* A host name no URL can hold gets no request: everything is allowed, for the full TTL. */
TEST_IMPL(polite_robots_job_none_for_unusable_name)
{
    hv_config_t cfg;
    hv_host_t h;
    hv_polite_t *p = robots_polite(&cfg, &h, "a b", 80);
    hv_url_t url;
    ASSERT_NULL(hv_polite_robots_request(p, h.pol, HV_SCHEME_HTTP, "a b", 80, NOW, &url));
    check_rules(&h, 0, NOW + 24 * HOUR_MS);
    ASSERT_EQ(0, hv_polite_stats(p)->robots_fetches);
    robots_free(p, &h);
}

TEST_IMPL(polite_robots_fetched_rules_refuse_and_admit)
{
    hv_config_t cfg;
    hv_host_t h;
    hv_polite_t *p = robots_polite(&cfg, &h, "127.0.0.1", 8080);
    robots_fetched(p, &h, "User-agent: *\nDisallow: /private\n", NOW);
    check_rules(&h, 0, NOW + 24 * HOUR_MS);
    /* A refusal by rules that were really fetched is final: no retry will change it. */
    check_refused(p, &h, "/private/x", "disallowed_by_robots_txt", 0);
    ASSERT_EQ(1, hv_polite_stats(p)->robots_disallowed);
    check_admitted(p, &h, "/public");
    check_admitted(p, &h, "/");
    robots_free(p, &h);
}

/* The rules follow our product token, the User-Agent's first word ("harvestd"). */
TEST_IMPL(polite_robots_fetched_rules_for_our_product_token)
{
    hv_config_t cfg;
    hv_host_t h;
    hv_polite_t *p = robots_polite(&cfg, &h, "127.0.0.1", 8080);
    robots_fetched(p, &h,
                   "User-agent: *\nDisallow: /\n\n"
                   "User-agent: harvestd\nDisallow: /no-harvest\n",
                   NOW);
    check_admitted(p, &h, "/page");
    check_refused(p, &h, "/no-harvest/1", "disallowed_by_robots_txt", 0);
    robots_free(p, &h);
}

TEST_IMPL(polite_robots_crawl_delay_raises_host_delay)
{
    hv_config_t cfg;
    hv_host_t h;
    hv_polite_t *p = robots_polite(&cfg, &h, "127.0.0.1", 8080);
    robots_fetched(p, &h, "User-agent: *\nCrawl-delay: 2\n", NOW);
    ASSERT_EQ(2000, h.pol->delay_ms);
    ASSERT_EQ(2000, h.pol->base_delay_ms);
    robots_free(p, &h);
}

/* RFC 9309 2.3.1.3: a 4xx robots.txt ("there is none") allows everything. */
TEST_IMPL(polite_robots_404_allows_everything)
{
    hv_config_t cfg;
    hv_host_t h;
    hv_polite_t *p = robots_polite(&cfg, &h, "127.0.0.1", 8080);
    robots_failed(p, &h, HV_ET_HTTP_STATUS, "http_404", 404, NOW);
    check_rules(&h, 0, NOW + 24 * HOUR_MS);
    check_admitted(p, &h, "/private/x");
    robots_free(p, &h);
}

/* RFC 9309 2.3.1.4: an unreachable robots.txt disallows everything, but only for a while (a
 * minute at most), and the pages refused meanwhile may be retried: a 5xx may pass soon. */
TEST_IMPL(polite_robots_503_disallows_for_now)
{
    hv_config_t cfg;
    hv_host_t h;
    hv_polite_t *p = robots_polite(&cfg, &h, "127.0.0.1", 8080);
    robots_failed(p, &h, HV_ET_HTTP_STATUS, "http_503", 503, NOW);
    check_rules(&h, 1, NOW + 60000);
    ASSERT_EQ(0, h.pol->robots_final);
    ASSERT_STR_EQ("http_503", h.pol->robots_why);
    check_refused(p, &h, "/anything", "robots_txt_unavailable_http_503", 1);
    robots_free(p, &h);
}

/* A refused connection may be accepted next time; a name that does not exist will not exist
 * then either, so its pages fail at once instead of retrying into the same wall. And since
 * the page's own request would fail just the same, they say so: DnsError, not a refusal by a
 * robots.txt nobody could read. */
TEST_IMPL(polite_robots_unreachable_final_only_when_retry_cannot_help)
{
    hv_config_t cfg;
    hv_host_t h;
    hv_polite_t *p = robots_polite(&cfg, &h, "127.0.0.1", 8080);
    robots_failed(p, &h, HV_ET_CONNECT, "connection_refused", 0, NOW);
    ASSERT_EQ(0, h.pol->robots_final);
    check_refused(p, &h, "/x", "robots_txt_unavailable_connection_refused", 1);

    robots_failed(p, &h, HV_ET_DNS, "name_not_resolved", 0, NOW);
    check_rules(&h, 1, NOW + 60000);
    ASSERT_EQ(1, h.pol->robots_final);
    ASSERT_STR_EQ("name_not_resolved", h.pol->robots_why);
    check_not_admitted(p, &h, "/x", HV_ET_DNS, "name_not_resolved", 0);
    ASSERT_EQ(1, hv_polite_stats(p)->robots_disallowed); /* only the refusal counts */

    /* A later successful fetch clears the stand-in and its reason. */
    robots_fetched(p, &h, "", NOW);
    check_rules(&h, 0, NOW + 24 * HOUR_MS);
    ASSERT_EQ(0, h.pol->robots_final);
    ASSERT_STR_EQ("", h.pol->robots_why);
    check_admitted(p, &h, "/x");
    robots_fetched(p, &h, "User-agent: *\nDisallow: /\n", NOW);
    check_refused(p, &h, "/x", "disallowed_by_robots_txt", 0);
    robots_free(p, &h);
}

/*
 * What the pages of a host whose robots.txt could not be fetched report. A cause the page's
 * own request would meet just the same, and for good (the name does not exist, the
 * certificate is not one we accept), is that failure; anything else is a robots.txt refusal
 * (RFC 9309 2.3.1.4), retried when the cause may pass.
 */
static const struct {
    hv_error_type_t type;
    const char *error;
    unsigned redirects;    /* before robots.txt failed */
    int the_pages_meet_it; /* they report this failure; else robots_txt_unavailable_<error> */
    int robots_retry;
} robots_unavailable_causes[] = {
    {HV_ET_DNS, "name_not_resolved", 0, 1, 0},
    {HV_ET_DNS, "no_address_for_name", 0, 1, 0},
    {HV_ET_CERTIFICATE, "certificate_untrusted", 0, 1, 0},
    {HV_ET_CERTIFICATE, "certificate_expired", 0, 1, 0},
    {HV_ET_CERTIFICATE, "certificate_not_yet_valid", 0, 1, 0},
    {HV_ET_CERTIFICATE, "certificate_hostname_mismatch", 0, 1, 0},
    {HV_ET_CERTIFICATE, "certificate_revoked", 0, 1, 0},
    {HV_ET_CERTIFICATE, "certificate_invalid", 0, 1, 0},
    {HV_ET_DNS, "dns_temporary_failure", 0, 0, 1},
    {HV_ET_DNS, "dns_lookup_exceeded_5s", 0, 0, 1},
    {HV_ET_CONNECT_TIMEOUT, "no_connection_within_5s", 0, 0, 1},
    {HV_ET_CONNECTION_RESET, "connection_reset", 0, 0, 1},
    {HV_ET_TLS, "tls_closed_during_handshake", 0, 0, 1},
    /* A redirect took robots.txt elsewhere: its failure says nothing about the pages' own
     * requests (still final: the name will not exist later either). */
    {HV_ET_DNS, "name_not_resolved", 1, 0, 0},
    {HV_ET_CERTIFICATE, "certificate_untrusted", 2, 0, 0},
    /* Final, but about this exchange rather than the host's name or certificate. */
    {HV_ET_TLS, "tls_alert_40", 0, 0, 0},
    {HV_ET_PROTOCOL, "invalid_constant", 0, 0, 0},
};

TEST_IMPL(polite_robots_unavailable_pages_report_what_their_request_would_meet)
{
    for (size_t i = 0; i < HV_ARRAY_SIZE(robots_unavailable_causes); i++) {
        hv_config_t cfg;
        hv_host_t h;
        char refusal[HV_DETAIL_TEXT_MAX];
        hv_polite_t *p = robots_polite(&cfg, &h, "127.0.0.1", 8080);
        robots_outcome(p, &h, HV_JOB_FAILED, NULL, robots_unavailable_causes[i].type,
                       robots_unavailable_causes[i].error, 0,
                       robots_unavailable_causes[i].redirects, NOW);
        check_rules(&h, 1, NOW + 60000);
        if (robots_unavailable_causes[i].the_pages_meet_it) {
            check_not_admitted(p, &h, "/page", robots_unavailable_causes[i].type,
                               robots_unavailable_causes[i].error, 0);
            ASSERT_EQ(0, hv_polite_stats(p)->robots_disallowed);
        } else {
            snprintf(refusal, sizeof(refusal), "robots_txt_unavailable_%s",
                     robots_unavailable_causes[i].error);
            check_refused(p, &h, "/page", refusal, robots_unavailable_causes[i].robots_retry);
            ASSERT_EQ(1, hv_polite_stats(p)->robots_disallowed);
        }
        robots_free(p, &h);
    }
}

/* The unavailable stand-in lasts a minute, or the TTL if that is shorter. */
TEST_IMPL(polite_robots_unavailable_expires_at_min_of_ttl_and_a_minute)
{
    hv_config_t cfg;
    hv_host_t h;
    hv_polite_t *p = robots_polite(&cfg, &h, "127.0.0.1", 8080);
    cfg.robots_ttl_ms = 30000;
    robots_failed(p, &h, HV_ET_CONNECT_TIMEOUT, "connect_timeout", 0, NOW);
    check_rules(&h, 1, NOW + 30000);
    robots_fetched(p, &h, "", NOW + 5);
    check_rules(&h, 0, NOW + 5 + 30000);
    robots_free(p, &h);
}

/* A cancelled fetch (or one abandoned at shutdown) leaves no rules behind: the state goes back
 * to UNKNOWN so that the scheduler asks for them again. */
TEST_IMPL(polite_robots_cancelled_forgets_fetch)
{
    hv_config_t cfg;
    hv_host_t h;
    hv_polite_t *p = robots_polite(&cfg, &h, "127.0.0.1", 8080);
    robots_outcome(p, &h, HV_JOB_CANCELLED, NULL, HV_ET_NONE, NULL, 0, 0, NOW);
    ASSERT_EQ(HV_ROBOTS_UNKNOWN, h.pol->robots_state);
    ASSERT_NULL(h.pol->robots);

    hv_job_t *job = robots_job(p, h.pol, HV_SCHEME_HTTP, "127.0.0.1", 8080, 2, NOW);
    job->end = HV_JOB_GOT_PAGE;
    hv_polite_robots_ended(p, job, 1, NOW);
    ASSERT_EQ(HV_ROBOTS_UNKNOWN, h.pol->robots_state);
    ASSERT_NULL(h.pol->robots);
    hv_polite_put(p, job->pol);
    hv_job_free(job);
    robots_free(p, &h);
}

/* An admitted job holds a reference on its host's entry for the attempt; a redirect that
 * moved it from another host gives that one back. */
TEST_IMPL(polite_admit_references_host_and_releases_previous)
{
    hv_config_t cfg;
    hv_host_t h;
    const char *key;
    hv_polite_t *p = robots_polite(&cfg, &h, "127.0.0.1", 8080);
    hv_hostpol_t *before = hv_polite_get(p, "http://127.0.0.2:80", "127.0.0.2");
    hv_job_t *job = page_job(&h, "/after-redirect");
    job->pol = hv_polite_get(p, before->key, "127.0.0.2");
    ASSERT_EQ(2, before->_refs);
    ASSERT_EQ(1, h.pol->_refs);
    int retry = -1;
    job->pol = hv_polite_admit(p, h.pol, job, NOW, &retry); /* no rules yet: nothing to refuse */
    ASSERT_NOT_NULL(job->pol);
    ASSERT(job->pol == h.pol);
    ASSERT_EQ(1, before->_refs);
    ASSERT_EQ(2, h.pol->_refs);
    /* The attempt's end releases it. */
    ASSERT_EQ(0, hv_polite_attempt_ended(p, job, NOW + 10, &key));
    job->pol = NULL; /* as the engine does: the reference went with the attempt */
    ASSERT_STR_EQ(h.key, key);
    ASSERT_EQ(1, h.pol->_refs);
    hv_job_free(job);
    hv_polite_put(p, before);
    robots_free(p, &h);
}

/* A refused page never went out: its pacing slot goes back to the host. */
TEST_IMPL(polite_admit_refusal_gives_pacing_slot_back)
{
    hv_config_t cfg;
    hv_host_t h;
    hv_polite_t *p = robots_polite(&cfg, &h, "127.0.0.1", 8080);
    h.pol->delay_ms = 500;
    robots_fetched(p, &h, "User-agent: *\nDisallow: /\n", NOW);
    hv_polite_started(p, h.pol, NOW);
    ASSERT_EQ(NOW + 500, h.pol->next_start_ms);
    check_refused(p, &h, "/x", "disallowed_by_robots_txt", 0);
    ASSERT_EQ(0, h.pol->next_start_ms);
    robots_free(p, &h);
}

/* With obey_robots off, rules (if any) are not consulted. */
TEST_IMPL(polite_admit_ignores_rules_without_obey_robots)
{
    hv_config_t cfg;
    hv_host_t h;
    hv_polite_t *p = robots_polite(&cfg, &h, "127.0.0.1", 8080);
    robots_fetched(p, &h, "User-agent: *\nDisallow: /\n", NOW);
    cfg.obey_robots = 0;
    check_admitted(p, &h, "/x");
    robots_free(p, &h);
}
