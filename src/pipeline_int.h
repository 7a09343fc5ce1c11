/*
 * pipeline_int.h: what engine.c and batch.c share about each other. Nothing outside these
 * two files includes it.
 */
#ifndef HARVESTD_PIPELINE_INT_H
#define HARVESTD_PIPELINE_INT_H

#include <sys/queue.h>
#include <uv.h>

#include "harvestd/batch.h"
#include "harvestd/engine.h"
#include "harvestd/parse.h"
#include "harvestd/polite.h"
#include "harvestd/robots.h"
#include "harvestd/sched.h"
#include "harvestd/writer.h"

typedef struct hv_page_s {
    hv_batch_t *batch;
    hv_record_t *rec;
    char *body;
    size_t len;
    TAILQ_ENTRY(hv_page_s) link;
} hv_page_t;

TAILQ_HEAD(hv_record_list_s, hv_record_s);

struct hv_engine_s {
    uv_loop_t *loop;
    const hv_config_t *cfg;
    hv_tls_ctx_t *tls;
    hv_dns_t *dns;
    hv_sched_t *sched;
    hv_fetch_t *fetch;
    hv_parse_t *parse;
    hv_polite_t *polite;
    hv_flow_t *robots_flow;    /* robots.txt requests: privileged, no batch */
    char product[64];          /* our robots.txt product token ("harvestd") */
    uv_timer_t pace_timer;     /* wakes hosts held back by their pacing delay */
    uv_idle_t burst_idle;      /* active: the next burst of requests waits for the loop to poll */
    unsigned burst_started;    /* requests started since the loop last polled for a burst */
    uint64_t robots_fetches;
    uint64_t robots_disallowed;

    TAILQ_HEAD(, hv_page_s) pages;
    int reads_paused;

    TAILQ_HEAD(, hv_batch_s) batches;
    unsigned nbatches;
    uint64_t next_job_id;

    int stopping;
    int forced;
    uv_timer_t drain_timer;
    uv_timer_t retry_timer;    /* fires when the earliest delayed job is due */
    hv_job_t **retry_heap;     /* jobs waiting to retry, min-heap on retry_at */
    unsigned nretry;
    unsigned retry_cap;
    uint64_t retries;          /* retries scheduled */
    int handles;
    int in_update;
    int update_again;
    hv_engine_stats_t stats;
    hv_fetch_stats_t fstats;   /* kept when the stages are freed */
    hv_dns_stats_t dstats;
    void (*closed)(void *ud);
    void *closed_ud;
};

typedef enum { B_RUNNING, B_DRAINING, B_STOPPING, B_FINISHING, B_DONE } hv_batch_state_t;

struct hv_batch_s {
    hv_engine_t *e;
    char *name;
    char *output_path;
    hv_batch_state_t state;
    int interrupted;
    int error;
    char detail[256];
    hv_batch_done_cb done;
    void *ud;

    hv_source_t *source;
    int source_paused;
    int input_done;
    hv_batch_skip_cb skip;
    void *skip_ud;
    const hv_ruleset_t *rules;  /* extraction rules (owned by the config), NULL: title only */
    const char *crash_note;     /* crash note path (owned by the caller), NULL: none */

    hv_flow_t *flow;
    uint64_t jobs_alive;       /* jobs created and not yet ended (waiting, in flight, delayed) */
    unsigned delayed;          /* jobs waiting out a retry backoff */
    unsigned pages;            /* this batch's pages queued or being parsed */
    struct hv_record_list_s results;
    unsigned nresults;
    hv_writer_t *writer;

    hv_batch_stats_t stats;
    TAILQ_ENTRY(hv_batch_s) link;
};

/* engine -> batch */
void hv_batch__update(hv_batch_t *b);
void hv_batch__stop(hv_batch_t *b, int force);
void hv_batch__job_page(hv_batch_t *b, hv_job_t *job, char *body, size_t len);
void hv_batch__job_failed(hv_batch_t *b, hv_job_t *job);
void hv_batch__job_cancelled(hv_batch_t *b, hv_job_t *job);
void hv_batch__parsed(hv_batch_t *b, hv_record_t *rec, int cancelled);
int hv_batch__accepts_results(const hv_batch_t *b);

/* batch -> engine */
void hv_engine__attach(hv_engine_t *e, hv_batch_t *b);
void hv_engine__detach(hv_engine_t *e, hv_batch_t *b);
void hv_engine__queue_page(hv_engine_t *e, hv_page_t *pg);
void hv_engine__drop_pages(hv_engine_t *e, hv_batch_t *b);
/** Remove the batch's jobs waiting to retry, passing each to `drop`. */
void hv_engine__drop_delayed(hv_engine_t *e, hv_batch_t *b, void (*drop)(void *, hv_job_t *),
                             void *ud);

#endif
