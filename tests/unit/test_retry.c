/*
 * test_retry.c: the retry policy (retry.h). It is pure: the caller passes the failure, the
 * attempt count, the time and the random draw, so each decision here is exact. With the
 * defaults, retry_base is 1 s, retry_max 60 s, retries 3, retry_after_max 300 s and
 * retry_statuses 429,500,502,503,504.
 */
#include <stdlib.h>
#include <string.h>

#include "harvestd/common.h"
#include "harvestd/config.h"
#include "harvestd/fetch.h"
#include "harvestd/job.h"
#include "harvestd/record.h"
#include "harvestd/retry.h"
#include "harvestd/url.h"
#include "fixtures.h"
#include "test.h"

#define NO_RETRY_AFTER (-1)

static void default_config(hv_config_t *cfg)
{
    char err[256];
    hv_config_defaults(cfg);
    ASSERT_OK(hv_config_finish(cfg, err, sizeof(err)));
}

/* A download failure as fetch records it. */
static hv_record_t *failure(hv_error_type_t type, const char *error, int http_status)
{
    hv_record_t *rec = hv_record_new("http://127.0.0.1/x", strlen("http://127.0.0.1/x"));
    fx_fail_record(rec, HV_STAGE_DOWNLOAD, type, error);
    rec->http_status = http_status;
    return rec;
}

/* One failure and whether it is worth another attempt. */
typedef struct {
    hv_error_type_t type;
    const char *error;
    int http_status;
    int transient;
} verdict_t;

static void check_verdicts(const hv_config_t *cfg, const verdict_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        hv_record_t *rec = failure(v[i].type, v[i].error, v[i].http_status);
        int got = hv_retry_transient(cfg, rec);
        hv_record_free(rec);
        if (got != v[i].transient)
            hv_test_fail(__FILE__, __LINE__, "%s %s (status %d): transient %d, want %d",
                         hv_error_type_name(v[i].type), v[i].error ? v[i].error : "(null)",
                         v[i].http_status, got, v[i].transient);
    }
}

#define CHECK_VERDICTS(cfg, table) check_verdicts((cfg), (table), HV_ARRAY_SIZE(table))

/* The same, under the default configuration. */
static void check_default_verdicts(const verdict_t *v, size_t n)
{
    hv_config_t cfg;
    default_config(&cfg);
    check_verdicts(&cfg, v, n);
}

#define CHECK_DEFAULT_VERDICTS(table) check_default_verdicts((table), HV_ARRAY_SIZE(table))

/* The delay hv_retry_plan() chooses, or -1 when it refuses. */
static int64_t planned_delay(const hv_config_t *cfg, const hv_record_t *rec, unsigned attempts,
                             int64_t retry_after_ms, int robots_retry, double rnd)
{
    hv_retry_plan_t plan;
    if (!hv_retry_plan(cfg, rec, attempts, retry_after_ms, robots_retry, rnd, 1000, &plan))
        return -1;
    ASSERT_EQ(1000 + plan.delay_ms, plan.at);
    return (int64_t)plan.delay_ms;
}

/* ---- what is worth another attempt ---- */

TEST_IMPL(retry_transient_http_status_only_in_retry_statuses)
{
    static const verdict_t defaults[] = {
        {HV_ET_HTTP_STATUS, "http_429", 429, 1},
        {HV_ET_HTTP_STATUS, "http_500", 500, 1},
        {HV_ET_HTTP_STATUS, "http_502", 502, 1},
        {HV_ET_HTTP_STATUS, "http_503", 503, 1},
        {HV_ET_HTTP_STATUS, "http_504", 504, 1},
        /* The server said what it meant: asking again gets the same answer. */
        {HV_ET_HTTP_STATUS, "http_404", 404, 0},
        {HV_ET_HTTP_STATUS, "http_403", 403, 0},
        {HV_ET_HTTP_STATUS, "http_501", 501, 0},
        /* A status outside 100..599 cannot index the table. */
        {HV_ET_HTTP_STATUS, "http_0", 0, 0},
        {HV_ET_HTTP_STATUS, "http_600", 600, 0},
    };
    /* The set is the configuration's, nothing built in. */
    static const verdict_t configured[] = {
        {HV_ET_HTTP_STATUS, "http_408", 408, 1},
        {HV_ET_HTTP_STATUS, "http_503", 503, 0},
    };
    hv_config_t cfg;
    char err[256];
    default_config(&cfg);
    CHECK_VERDICTS(&cfg, defaults);
    ASSERT_OK(hv_config_set(&cfg, "retry_statuses", "408", err, sizeof(err)));
    CHECK_VERDICTS(&cfg, configured);
}

TEST_IMPL(retry_transient_connect_timeouts_and_resets)
{
    static const verdict_t table[] = {
        {HV_ET_CONNECT, "connection_refused", 0, 1},
        {HV_ET_CONNECT, "network_unreachable", 0, 1},
        {HV_ET_CONNECT_TIMEOUT, "connect_timeout", 0, 1},
        {HV_ET_READ_TIMEOUT, "read_timeout", 0, 1},
        {HV_ET_TOTAL_TIMEOUT, "total_timeout", 0, 1},
        {HV_ET_CONNECTION_RESET, "connection_reset", 0, 1},
    };
    CHECK_DEFAULT_VERDICTS(table);
}

/* DNS failures are decided by their detail: a resolver that could not answer now may answer
 * later, a name that does not exist will not exist in a second either. */
TEST_IMPL(retry_transient_dns_temporary_but_not_unknown_name)
{
    static const verdict_t table[] = {
        {HV_ET_DNS, "dns_temporary_failure", 0, 1},
        {HV_ET_DNS, "dns_lookup_exceeded_5s", 0, 1},
        {HV_ET_DNS, "name_not_resolved", 0, 0},
        {HV_ET_DNS, "no_address_for_name", 0, 0},
        {HV_ET_DNS, "dns_fail", 0, 0},
        {HV_ET_DNS, NULL, 0, 0},
    };
    CHECK_DEFAULT_VERDICTS(table);
}

/* A handshake the peer broke off (overloaded, restarting) may go through next time; an alert
 * is the peer refusing what we offered, and it will refuse it again. */
TEST_IMPL(retry_transient_tls_broken_handshake_but_not_alert)
{
    static const verdict_t table[] = {
        {HV_ET_TLS, "tls_closed_during_handshake", 0, 1},
        {HV_ET_TLS, "tls_connection_reset_during_handshake", 0, 1},
        {HV_ET_TLS, "tls_alert_40", 0, 0},
        {HV_ET_TLS, "tls_alert", 0, 0},
        {HV_ET_TLS, "tls_protocol_version", 0, 0},
        {HV_ET_TLS, NULL, 0, 0},
    };
    CHECK_DEFAULT_VERDICTS(table);
}

TEST_IMPL(retry_transient_never_certificate_or_content_errors)
{
    static const verdict_t table[] = {
        {HV_ET_CERTIFICATE, "certificate_untrusted", 0, 0},
        {HV_ET_CERTIFICATE, "certificate_expired", 0, 0},
        {HV_ET_CERTIFICATE, "certificate_hostname_mismatch", 0, 0},
        {HV_ET_PROTOCOL, "invalid_response", 0, 0},
        {HV_ET_PAGE_TOO_LARGE, "page_too_large", 0, 0},
        {HV_ET_TOO_MANY_REDIRECTS, "too_many_redirects", 0, 0},
        {HV_ET_INVALID_URL, "malformed", 0, 0},
        /* A robots.txt refusal is decided by the job's robots_retry (below), never here. */
        {HV_ET_ROBOTS, "robots_txt_unavailable_http_503", 0, 0},
    };
    CHECK_DEFAULT_VERDICTS(table);
}

/* ---- when ---- */

TEST_IMPL(retry_plan_backoff_doubles_with_each_attempt)
{
    hv_config_t cfg;
    default_config(&cfg);
    cfg.retries = 10;
    hv_record_t *rec = failure(HV_ET_CONNECT, "connection_refused", 0);
    ASSERT_EQ(1000, planned_delay(&cfg, rec, 1, NO_RETRY_AFTER, 0, 0.0));
    ASSERT_EQ(2000, planned_delay(&cfg, rec, 2, NO_RETRY_AFTER, 0, 0.0));
    ASSERT_EQ(4000, planned_delay(&cfg, rec, 3, NO_RETRY_AFTER, 0, 0.0));
    ASSERT_EQ(8000, planned_delay(&cfg, rec, 4, NO_RETRY_AFTER, 0, 0.0));
    cfg.retry_base_ms = 300;
    ASSERT_EQ(300, planned_delay(&cfg, rec, 1, NO_RETRY_AFTER, 0, 0.0));
    ASSERT_EQ(1200, planned_delay(&cfg, rec, 3, NO_RETRY_AFTER, 0, 0.0));
    hv_record_free(rec);
}

/* The jitter adds up to the base again: rnd 1 doubles the delay, rnd 0.5 adds half. Many URLs
 * failing together thus come back spread over a window, not all at one instant. */
TEST_IMPL(retry_plan_jitter_adds_at_most_the_base_again)
{
    hv_config_t cfg;
    default_config(&cfg);
    cfg.retries = 10;
    hv_record_t *rec = failure(HV_ET_READ_TIMEOUT, "read_timeout", 0);
    ASSERT_EQ(2000, planned_delay(&cfg, rec, 1, NO_RETRY_AFTER, 0, 1.0));
    ASSERT_EQ(1500, planned_delay(&cfg, rec, 1, NO_RETRY_AFTER, 0, 0.5));
    ASSERT_EQ(16000, planned_delay(&cfg, rec, 4, NO_RETRY_AFTER, 0, 1.0));
    /* Attempt 6: base 32 s, doubled 64 s, above retry_max. */
    ASSERT_EQ(32000, planned_delay(&cfg, rec, 6, NO_RETRY_AFTER, 0, 0.0));
    ASSERT_EQ(60000, planned_delay(&cfg, rec, 6, NO_RETRY_AFTER, 0, 1.0));
    hv_record_free(rec);
}

TEST_IMPL(retry_plan_capped_by_retry_max)
{
    hv_config_t cfg;
    default_config(&cfg);
    cfg.retries = 20;
    hv_record_t *rec = failure(HV_ET_HTTP_STATUS, "http_503", 503);
    ASSERT_EQ(60000, planned_delay(&cfg, rec, 7, NO_RETRY_AFTER, 0, 0.0));
    /* Far past the cap the shift must not wrap around to a small delay. */
    ASSERT_EQ(60000, planned_delay(&cfg, rec, 20, NO_RETRY_AFTER, 0, 0.0));
    ASSERT_EQ(60000, planned_delay(&cfg, rec, 20, NO_RETRY_AFTER, 0, 1.0));
    cfg.retry_max_ms = 1500;
    ASSERT_EQ(1000, planned_delay(&cfg, rec, 1, NO_RETRY_AFTER, 0, 0.0));
    ASSERT_EQ(1500, planned_delay(&cfg, rec, 1, NO_RETRY_AFTER, 0, 1.0));
    ASSERT_EQ(1500, planned_delay(&cfg, rec, 2, NO_RETRY_AFTER, 0, 0.0));
    hv_record_free(rec);
}

/* `retries` counts further attempts: with 3, attempts 1, 2 and 3 may fail and be retried; the
 * fourth is the last. */
TEST_IMPL(retry_plan_none_once_attempts_exceed_retries)
{
    hv_config_t cfg;
    default_config(&cfg);
    hv_record_t *rec = failure(HV_ET_CONNECT, "connection_refused", 0);
    ASSERT_EQ(3, cfg.retries);
    ASSERT_EQ(4000, planned_delay(&cfg, rec, 3, NO_RETRY_AFTER, 0, 0.0));
    ASSERT_EQ(-1, planned_delay(&cfg, rec, 4, NO_RETRY_AFTER, 0, 0.0));
    cfg.retries = 0;
    ASSERT_EQ(-1, planned_delay(&cfg, rec, 1, NO_RETRY_AFTER, 0, 0.0));
    hv_record_free(rec);
}

TEST_IMPL(retry_plan_none_for_permanent_failure)
{
    hv_config_t cfg;
    default_config(&cfg);
    hv_record_t *rec = failure(HV_ET_HTTP_STATUS, "http_404", 404);
    ASSERT_EQ(-1, planned_delay(&cfg, rec, 1, NO_RETRY_AFTER, 0, 0.0));
    /* Even a Retry-After does not make a 404 worth asking again. */
    ASSERT_EQ(-1, planned_delay(&cfg, rec, 1, 2000, 0, 0.0));
    hv_record_free(rec);
}

/* On 429 and 503 the server's Retry-After replaces the backoff exactly: no jitter, no cap by
 * retry_max (the server knows when it wants us back). */
TEST_IMPL(retry_plan_honours_retry_after_on_429_and_503)
{
    hv_config_t cfg;
    default_config(&cfg);
    hv_record_t *r429 = failure(HV_ET_HTTP_STATUS, "http_429", 429);
    hv_record_t *r503 = failure(HV_ET_HTTP_STATUS, "http_503", 503);
    hv_retry_plan_t plan;

    ASSERT_EQ(1, hv_retry_plan(&cfg, r429, 1, 7000, 0, 1.0, 50, &plan));
    ASSERT_EQ(7000, plan.delay_ms);
    ASSERT_EQ(7050, plan.at);
    ASSERT_EQ(1, plan.retry_after);

    ASSERT_EQ(120000, planned_delay(&cfg, r503, 3, 120000, 0, 1.0));
    ASSERT_EQ(0, planned_delay(&cfg, r503, 1, 0, 0, 1.0));
    /* The attempt limit still holds. */
    ASSERT_EQ(-1, planned_delay(&cfg, r503, 4, 1000, 0, 0.0));
    hv_record_free(r429);
    hv_record_free(r503);
}

/* A server that wants us back later than retry_after_max gets its answer recorded now rather
 * than a job that lingers for an hour. */
TEST_IMPL(retry_plan_none_when_retry_after_exceeds_max)
{
    hv_config_t cfg;
    default_config(&cfg);
    ASSERT_EQ(300000, cfg.retry_after_max_ms);
    hv_record_t *rec = failure(HV_ET_HTTP_STATUS, "http_429", 429);
    ASSERT_EQ(300000, planned_delay(&cfg, rec, 1, 300000, 0, 0.0));
    ASSERT_EQ(-1, planned_delay(&cfg, rec, 1, 300001, 0, 0.0));
    ASSERT_EQ(-1, planned_delay(&cfg, rec, 1, 3600000, 0, 0.0));
    hv_record_free(rec);
}

TEST_IMPL(retry_plan_ignores_retry_after_on_500)
{
    hv_config_t cfg;
    default_config(&cfg);
    hv_record_t *rec = failure(HV_ET_HTTP_STATUS, "http_500", 500);
    hv_retry_plan_t plan;
    ASSERT_EQ(1, hv_retry_plan(&cfg, rec, 2, 9000, 0, 0.0, 0, &plan));
    ASSERT_EQ(2000, plan.delay_ms);
    ASSERT_EQ(0, plan.retry_after);
    /* ... which also means a huge one does not cancel the retry. */
    ASSERT_EQ(1000, planned_delay(&cfg, rec, 1, 3600000, 0, 0.0));
    hv_record_free(rec);
}

/* A page refused by robots.txt is retried only when the rules were a stand-in for a
 * robots.txt that could not be fetched "for now" (the job's robots_retry). */
TEST_IMPL(retry_plan_robots_refusal_only_with_robots_retry)
{
    hv_config_t cfg;
    default_config(&cfg);
    hv_record_t *unavailable = failure(HV_ET_ROBOTS, "robots_txt_unavailable_http_503", 0);
    hv_record_t *disallowed = failure(HV_ET_ROBOTS, "disallowed_by_robots_txt", 0);
    ASSERT_EQ(1000, planned_delay(&cfg, unavailable, 1, NO_RETRY_AFTER, 1, 0.0));
    ASSERT_EQ(-1, planned_delay(&cfg, unavailable, 1, NO_RETRY_AFTER, 0, 0.0));
    ASSERT_EQ(-1, planned_delay(&cfg, disallowed, 1, NO_RETRY_AFTER, 0, 0.0));
    ASSERT_EQ(-1, planned_delay(&cfg, unavailable, 4, NO_RETRY_AFTER, 1, 0.0));
    /* robots_retry says nothing about other failures. */
    hv_record_t *notfound = failure(HV_ET_HTTP_STATUS, "http_404", 404);
    ASSERT_EQ(-1, planned_delay(&cfg, notfound, 1, NO_RETRY_AFTER, 1, 0.0));
    hv_record_free(unavailable);
    hv_record_free(disallowed);
    hv_record_free(notfound);
}

/* The clock is the caller's: any `now` works, and the plan is relative to it. */
TEST_IMPL(retry_plan_at_is_now_plus_delay)
{
    hv_config_t cfg;
    default_config(&cfg);
    hv_record_t *rec = failure(HV_ET_CONNECTION_RESET, "connection_reset", 0);
    const uint64_t now = UINT64_C(987654321012);
    hv_retry_plan_t plan;
    ASSERT_EQ(1, hv_retry_plan(&cfg, rec, 2, NO_RETRY_AFTER, 0, 0.25, now, &plan));
    ASSERT_EQ(2500, plan.delay_ms);
    ASSERT_EQ(now + 2500, plan.at);
    ASSERT_EQ(0, plan.retry_after);
    hv_record_free(rec);
}

/* ---- the job ---- */

static hv_job_t *failed_job(hv_error_type_t type, const char *error, int http_status)
{
    const char *text = "http://127.0.0.1:8080/page";
    hv_url_t url;
    ASSERT_OK(hv_url_parse(&url, text, strlen(text), NULL));
    hv_job_t *job = hv_job_new(7, HV_JOB_PAGE, failure(type, error, http_status), &url);
    job->rec->content_type = hv_xstrdup("text/html");
    job->deadline_ms = 31000;
    job->fresh_conn_retried = 1;
    return job;
}

/* A retried job starts its next attempt clean: the record must not carry the failed
 * attempt's status or error into the next one, which may well succeed. */
TEST_IMPL(retry_job_counts_attempt_and_forgets_failure)
{
    hv_config_t cfg;
    default_config(&cfg);
    hv_job_t *job = failed_job(HV_ET_HTTP_STATUS, "http_503", 503);
    hv_retry_plan_t plan;
    ASSERT_EQ(1, job->attempts);
    ASSERT_EQ(1, hv_retry_job(&cfg, job, 0.0, 5000, &plan));
    ASSERT_EQ(6000, plan.at);
    /* The policy only decides; the engine counts the attempt and fetch starts it clean. */
    ASSERT_EQ(1, job->attempts);
    ASSERT_EQ(0, job->rec->ok);
    job->attempts++;
    hv_fetch_next_attempt(job);
    ASSERT_EQ(2, job->attempts);
    ASSERT_EQ(1, job->rec->ok);
    ASSERT_NULL(job->rec->error);
    ASSERT_EQ(HV_ET_NONE, job->rec->error_type);
    ASSERT_EQ(HV_STAGE_NONE, job->rec->stage);
    ASSERT_EQ(0, job->rec->http_status);
    ASSERT_NULL(job->rec->content_type);
    ASSERT_EQ(0, job->deadline_ms);
    ASSERT_EQ(0, job->fresh_conn_retried);
    ASSERT_STR_EQ("http://127.0.0.1/x", job->rec->requested_url);

    /* The next failure backs off from the new attempt count. */
    fx_fail_record(job->rec, HV_STAGE_DOWNLOAD, HV_ET_CONNECT, "connection_refused");
    ASSERT_EQ(1, hv_retry_job(&cfg, job, 0.0, 10000, &plan));
    ASSERT_EQ(2000, plan.delay_ms);
    job->attempts++;
    hv_fetch_next_attempt(job);
    ASSERT_EQ(3, job->attempts);
    hv_job_free(job);
}

/* The job's own Retry-After and robots_retry feed the plan. */
TEST_IMPL(retry_job_uses_job_retry_after_and_robots_retry)
{
    hv_config_t cfg;
    default_config(&cfg);
    hv_job_t *job = failed_job(HV_ET_HTTP_STATUS, "http_429", 429);
    hv_retry_plan_t plan;
    job->retry_after_ms = 4000;
    ASSERT_EQ(1, hv_retry_job(&cfg, job, 1.0, 100, &plan));
    ASSERT_EQ(4100, plan.at);
    ASSERT_EQ(1, plan.retry_after);
    hv_job_free(job);

    job = failed_job(HV_ET_ROBOTS, "robots_txt_unavailable_http_503", 0);
    job->robots_retry = 1;
    ASSERT_EQ(1, hv_retry_job(&cfg, job, 0.0, 100, &plan));
    ASSERT_EQ(1100, plan.at);
    hv_job_free(job);
}

TEST_IMPL(retry_job_refused_changes_nothing)
{
    hv_config_t cfg;
    default_config(&cfg);
    hv_job_t *job = failed_job(HV_ET_HTTP_STATUS, "http_404", 404);
    hv_retry_plan_t plan;
    ASSERT_EQ(0, hv_retry_job(&cfg, job, 0.0, 5000, &plan));
    ASSERT_EQ(1, job->attempts);
    ASSERT_EQ(0, job->rec->ok);
    ASSERT_STR_EQ("http_404", job->rec->error);
    ASSERT_EQ(HV_ET_HTTP_STATUS, job->rec->error_type);
    ASSERT_EQ(HV_STAGE_DOWNLOAD, job->rec->stage);
    ASSERT_EQ(404, job->rec->http_status);
    ASSERT_STR_EQ("text/html", job->rec->content_type);
    ASSERT_EQ(31000, job->deadline_ms);
    ASSERT_EQ(1, job->fresh_conn_retried);

    /* Out of attempts is a refusal too. */
    hv_job_t *last = failed_job(HV_ET_CONNECT, "connection_refused", 0);
    last->attempts = 4;
    ASSERT_EQ(0, hv_retry_job(&cfg, last, 0.0, 5000, &plan));
    ASSERT_EQ(4, last->attempts);
    ASSERT_EQ(0, last->rec->ok);
    hv_job_free(job);
    hv_job_free(last);
}
