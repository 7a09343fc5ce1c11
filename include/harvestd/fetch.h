/*
 * fetch.h: the download stage. Runs one request per dispatched job over pooled keep-alive
 * connections, enforces the connect/read/total timeouts and the HTTP limits, and ends every
 * job exactly once through `on_end`: with a page, a precise failure record, the next redirect
 * hop, or cancelled. fetch never schedules: what follows an ending (releasing the slot,
 * following the redirect, retrying) is the engine's decision, taken in its pass.
 *
 * Per request, one connection timer is re-armed per phase (connect, then response bytes);
 * each arm is capped by the job's total deadline, so the same timer reports TotalTimeout.
 *
 * Backpressure: hv_fetch_pause() stops reading on every in-flight connection (and their
 * timers: waiting on us is not the server's fault); hv_fetch_resume() restarts them and
 * moves the total deadlines by the time spent paused.
 */
#ifndef HARVESTD_FETCH_H
#define HARVESTD_FETCH_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "harvestd/config.h"
#include "harvestd/conn.h"
#include "harvestd/dns.h"
#include "harvestd/h2.h"
#include "harvestd/job.h"
#include "harvestd/tls.h"

typedef struct hv_fetch_s hv_fetch_t;

/**
 * A download ended; job->end says how: HV_JOB_GOT_PAGE (job->body, job->body_len hold the
 * page; the record has url, http_status, content_type, bytes, redirects, timing),
 * HV_JOB_FAILED (the record says how), HV_JOB_REDIRECTED (job->url is the next hop, the
 * redirect counted) or HV_JOB_CANCELLED. The job passes to the callee, which must not call
 * back into fetch for it, nor start requests from inside this callback: it may run from a
 * socket callback.
 */
typedef void (*hv_fetch_end_cb)(void *ud, hv_job_t *job);

/** One configured proxy's figures (proxies with the same URL share them). */
typedef struct {
    char proxy[HV_PROXY_SHOWN_MAX]; /* as records show it: no user information */
    uint64_t requests;          /* requests written through it */
    uint64_t failures;          /* attempts that failed at the proxy (ProxyError) */
    unsigned streak;            /* failures since its last success */
    unsigned stale;             /* its pooled connections found closed (absolute-form) */
    uint64_t reuses;            /* ... and answered on */
    int no_reuse;               /* it closes after every request: connections are not kept */
    int tunnel_http;            /* ... so http URLs go through CONNECT tunnels, kept alive */
    int no_tunnel_http;         /* ... unless it refused such a tunnel: absolute form again */
    uint64_t aside_until;       /* loop time before which it is not chosen when another is */
    unsigned open;              /* connections open through it, in use and idle */
    unsigned waiting;           /* requests waiting for room under proxy_connections */
    uint64_t waits;             /* ... in all */
} hv_proxy_stats_t;

typedef struct {
    uint64_t requests;          /* requests written: every attempt, redirect hop, stale
                                   connection retry and robots.txt request */
    uint64_t connections_reused;
    uint64_t stale_retries;
    uint64_t redirects;
    hv_conn_stats_t conn;       /* what the connections counted (the guard's refusals) */
    uint64_t connections_h2;    /* connections that spoke HTTP/2 */
    hv_h2_stats_t h2;           /* HTTP/2 sessions, streams, refusals, resets, GOAWAYs */
    const hv_proxy_stats_t *proxies; /* one per configured proxy URL (fetch's; valid while
                                        the stage lives) */
    unsigned nproxies;
} hv_fetch_stats_t;

/** `tls` (shared, outlives the stage) serves https URLs. */
hv_fetch_t *hv_fetch_new(uv_loop_t *loop, const hv_config_t *cfg, hv_dns_t *dns,
                         hv_tls_ctx_t *tls, hv_fetch_end_cb on_end, void *ud);

/** Begin downloading a job that the scheduler dispatched, from job->url. It may end at once,
 * through on_end. */
void hv_fetch_start(hv_fetch_t *f, hv_job_t *job);

/** End a dispatched job that makes no request (robots.txt refused it: its record says why)
 * as HV_JOB_FAILED, through on_end (from inside this call) like every other. */
void hv_fetch_end_unsent(hv_fetch_t *f, hv_job_t *job);

/**
 * `job` failed and is to be tried again (hv_retry_job() said so): its record forgets what the
 * failed attempt said (the failure, HTTP status and content type), and the next attempt gets
 * a total deadline and an allowance for a stale pooled connection of its own. The engine
 * counts the attempt.
 */
void hv_fetch_next_attempt(hv_job_t *job);

void hv_fetch_pause(hv_fetch_t *f);
void hv_fetch_resume(hv_fetch_t *f);

/** Abandon the in-flight requests of `flow` (NULL: all); they end as HV_JOB_CANCELLED. */
void hv_fetch_cancel(hv_fetch_t *f, const struct hv_flow_s *flow);

/** Requests in flight. */
unsigned hv_fetch_active(const hv_fetch_t *f);

const hv_fetch_stats_t *hv_fetch_stats(const hv_fetch_t *f);

/** Close idle connections and free the stage; no request may be in flight. */
void hv_fetch_free(hv_fetch_t *f);

#endif
