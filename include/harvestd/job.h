/*
 * job.h: one input URL on its way through the download stage.
 *
 * A job is created by the pipeline for every valid input line, waits in the scheduler, is
 * downloaded by fetch (following redirects, which send it back to the scheduler), and ends
 * when fetch hands its record on: with a page to parse, or as a failure. The record travels
 * on alone; the job is freed there.
 */
#ifndef HARVESTD_JOB_H
#define HARVESTD_JOB_H

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
} hv_job_kind_t;

typedef struct hv_job_s {
    uint64_t id;
    hv_job_kind_t kind;
    struct hv_hostpol_s *pol;  /* robots jobs: the host the rules are for (referenced); page
                                  jobs: the host of the attempt in flight (referenced) */
    uint64_t attempt_ms;       /* loop time the attempt in flight started */
    hv_record_t *rec;          /* the record being built; owns requested_url */
    hv_url_t url;              /* the URL to fetch now (changes with each redirect) */
    unsigned redirects;
    uint64_t started_ms;       /* loop time of the first dispatch; 0 before */
    uint64_t deadline_ms;      /* loop time by which the whole download must end */
    int fresh_conn_retried;    /* a stale keep-alive connection already cost one retry */
    int robots_retry;          /* refused by a robots.txt that was unreachable "for now" */
    unsigned attempts;         /* attempts started (1 for the first; retries add one each) */
    int64_t retry_after_ms;    /* the server's Retry-After of the last failure, -1 none */
    uint64_t retry_at;         /* loop time the next attempt may start (while delayed) */
    unsigned heap_idx;         /* position in the retry heap (engine) */
    struct hv_host_s *host;    /* scheduler's host entry (set by hv_sched_submit) */
    struct hv_flow_s *flow;    /* the batch's share of the scheduler */
    struct hv_req_s *req;      /* fetch's in-flight state, NULL while waiting */
    TAILQ_ENTRY(hv_job_s) link;
} hv_job_t;

TAILQ_HEAD(hv_job_list_s, hv_job_s);

/** Free a job that did not hand its record on (the record is freed too). */
void hv_job_free(hv_job_t *job);

#endif
