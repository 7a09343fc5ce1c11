/*
 * job.h: one URL on its way through the download stage.
 *
 * A job is created by the engine (hv_engine_submit) for every valid input line, or for a
 * host's robots.txt. It waits in the scheduler, is downloaded by fetch, and ends once, in the
 * engine's pass: with a page (its record moves on to the parser), as a failure record (to its
 * batch), or dropped. Redirects and retries send it back to the scheduler through that same
 * pass.
 *
 * Each group of fields has one owner, the only module that writes it:
 *   identity   engine, at creation; read by everyone
 *   record     whoever holds the job; fetch fills the download fields, the engine the rest
 *   request    fetch (the URL changes with each redirect)
 *   policy     engine (dispatch times, attempts, retries, politeness feedback)
 *   scheduler  sched (queues, slots, not-before times)
 * Policies (polite, retry) read jobs and return decisions; the owner writes them. The
 * functions below act for their caller: hv_job_take_record() and hv_job_take_body() hand
 * what the job holds to whoever holds the job.
 */
#ifndef HARVESTD_JOB_H
#define HARVESTD_JOB_H

#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "harvestd/record.h"
#include "harvestd/url.h"

struct hv_host_s;
struct hv_flow_s;
struct hv_req_s;
struct hv_hostpol_s;

typedef enum {
    HV_JOB_PAGE = 0,  /* an input URL: ends as a record */
    HV_JOB_ROBOTS,    /* a host's /robots.txt, fetched for the host's other jobs */
    HV_JOB_PROBE,     /* a URL fetched again for the block detector's verdict (block.h) */
} hv_job_kind_t;

/** How fetch ended a job (set by fetch, consumed by the engine's pass). */
typedef enum {
    HV_JOB_RUNNING = 0,
    HV_JOB_GOT_PAGE,     /* body and body_len hold the decoded page */
    HV_JOB_FAILED,       /* the record says how */
    HV_JOB_REDIRECTED,   /* url is the next hop: schedule it again */
    HV_JOB_NOT_MODIFIED, /* a conditional request was answered 304: the stored content holds */
    HV_JOB_CANCELLED,    /* abandoned by hv_fetch_cancel() */
} hv_job_end_t;

typedef struct hv_job_s {
    /* identity */
    uint64_t id;
    hv_job_kind_t kind;

    /* record */
    hv_record_t *rec;          /* the record being built; owns requested_url */

    /* request (fetch) */
    hv_url_t url;              /* the URL to fetch now (changes with each redirect) */
    char *first_origin;        /* "scheme://host:port" of its first request: the global
                                  credential headers go there only (fetch.c) */
    unsigned redirects;
    uint64_t deadline_ms;      /* loop time by which the attempt must end; 0: not started */
    int fresh_conn_retried;    /* this request (hop) already retried a stale pooled connection */
    int64_t retry_after_ms;    /* the server's Retry-After of the last response, -1 none */
    struct hv_req_s *req;      /* fetch's in-flight state, NULL while not downloading */
    hv_job_end_t end;          /* how the download ended */
    char *body;                /* HV_JOB_GOT_PAGE: the page (malloc'd), until the pass */
    size_t body_len;

    /* policy (engine) */
    uint64_t started_ms;       /* loop time of the first dispatch; 0 before */
    uint64_t attempt_ms;       /* loop time the attempt in flight was dispatched */
    unsigned attempts;         /* attempts started (1 for the first; retries add one each) */
    int robots_retry;          /* refused by a robots.txt that was unreachable "for now" */
    struct hv_hostpol_s *pol;  /* robots jobs: the host the rules are for; page jobs: the
                                  host of the attempt in flight (referenced) */
    TAILQ_ENTRY(hv_job_s) done_link; /* in the engine's list of ended downloads */

    /* scheduler (sched) */
    struct hv_host_s *host;    /* host entry while waiting or holding a slot */
    struct hv_flow_s *flow;    /* the batch's share of the scheduler */
    uint64_t not_before;       /* while delayed: loop time the next attempt may start */
    unsigned heap_idx;         /* while delayed: position in the scheduler's heap */
    TAILQ_ENTRY(hv_job_s) link;
} hv_job_t;

TAILQ_HEAD(hv_job_list_s, hv_job_s);

/** A new job for `url` (taken over) building `rec` (taken over), on its first attempt. */
hv_job_t *hv_job_new(uint64_t id, hv_job_kind_t kind, hv_record_t *rec, hv_url_t *url);

/** Free a job and whatever it still holds (record, URL, body). */
void hv_job_free(hv_job_t *job);

/** Write where and how far the job got into its record (url, redirects, attempts, elapsed,
 * fetched_at), at loop time `now`; the job itself is not changed. */
void hv_job_fill_record(const hv_job_t *job, uint64_t now);

/** Take the job's record (the job no longer holds it). */
hv_record_t *hv_job_take_record(hv_job_t *job);

/** Take the job's page (HV_JOB_GOT_PAGE: the job no longer holds it; body_len stays). */
char *hv_job_take_body(hv_job_t *job);

#endif
