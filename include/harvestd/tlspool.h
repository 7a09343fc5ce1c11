/*
 * tlspool.h: the crypto workers. A small pool of threads (not the uv threadpool, which the
 * parser fills) that runs the expensive steps of TLS handshakes (the public-key work: ECDHE,
 * certificate and ServerKeyExchange signatures) off the loop thread, so that the loop never
 * does a scalar multiplication and handshakes use every core.
 *
 * A job is submitted from the loop, runs `work` on some worker, and comes back to the loop,
 * where `done` runs (uv_async_t). Jobs run in submission order as workers free up; the caller
 * keeps one job per connection at a time (what the job touches is the connection's alone
 * until `done`). Each worker has its own random generator for TLS (tls.h:
 * hv_tls_thread_start()).
 */
#ifndef HARVESTD_TLSPOOL_H
#define HARVESTD_TLSPOOL_H

#include <uv.h>

#include "harvestd/tls.h"

typedef struct hv_tlspool_s hv_tlspool_t;

typedef struct hv_tlspool_job_s {
    void (*work)(struct hv_tlspool_job_s *job); /* on a worker */
    void (*done)(struct hv_tlspool_job_s *job); /* then on the loop */
    int cancelled;       /* `work` never ran: the pool stopped first */
    struct hv_tlspool_job_s *next;              /* private */
} hv_tlspool_job_t;

typedef struct {
    uint64_t jobs;       /* jobs run */
    unsigned workers;
} hv_tlspool_stats_t;

/** Start `n` workers (at least 1) for `ctx`'s sessions. NULL if no thread could start. */
hv_tlspool_t *hv_tlspool_new(uv_loop_t *loop, hv_tls_ctx_t *ctx, unsigned n);

/** Queue `job`: its `done` runs on the loop afterwards, never inside this call. */
void hv_tlspool_submit(hv_tlspool_t *p, hv_tlspool_job_t *job);

const hv_tlspool_stats_t *hv_tlspool_stats(const hv_tlspool_t *p);

/** Stop the workers once their jobs in hand are done, run the `done` of every job that
 *  finished (queued ones never start: their `done` runs too, `work` skipped), and close. */
void hv_tlspool_free(hv_tlspool_t *p);

#endif
