/*
 * fetch.h: the download stage. Runs one request per dispatched job over pooled keep-alive
 * connections, follows redirects (sending the job back to the scheduler), enforces the
 * connect/read/total timeouts and the HTTP limits, and ends every job with a page or a
 * precise failure record.
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
#include "harvestd/dns.h"
#include "harvestd/job.h"
#include "harvestd/sched.h"
#include "harvestd/tls.h"

typedef struct hv_fetch_s hv_fetch_t;

typedef struct {
    /** The job downloaded a page: `body` (malloc'd, `len` bytes) and the job pass to the
     * callee. The record has url, http_status, content_type, bytes, redirects, timing. */
    void (*on_page)(void *ud, hv_job_t *job, char *body, size_t len);
    /** The job failed; its record says how. The job passes to the callee. */
    void (*on_failed)(void *ud, hv_job_t *job);
    /** The job was abandoned by hv_fetch_cancel_all(); it passes to the callee. */
    void (*on_cancelled)(void *ud, hv_job_t *job);
} hv_fetch_cbs_t;

typedef struct {
    uint64_t connections_opened;
    uint64_t connections_reused;
    uint64_t stale_retries;
    uint64_t redirects;
} hv_fetch_stats_t;

/** `tls` (shared, outlives the stage) serves https URLs. */
hv_fetch_t *hv_fetch_new(uv_loop_t *loop, const hv_config_t *cfg, hv_sched_t *sched,
                         hv_dns_t *dns, hv_tls_ctx_t *tls, const hv_fetch_cbs_t *cbs, void *ud);

/** Begin downloading a job that the scheduler dispatched. */
void hv_fetch_start(hv_fetch_t *f, hv_job_t *job);

void hv_fetch_pause(hv_fetch_t *f);
void hv_fetch_resume(hv_fetch_t *f);

/** Abandon the in-flight requests of `flow` (NULL: all); their jobs go to on_cancelled. */
void hv_fetch_cancel(hv_fetch_t *f, const struct hv_flow_s *flow);

/** Requests in flight. */
unsigned hv_fetch_active(const hv_fetch_t *f);

const hv_fetch_stats_t *hv_fetch_stats(const hv_fetch_t *f);

/** Close idle connections and free the stage; no request may be in flight. */
void hv_fetch_free(hv_fetch_t *f);

#endif
