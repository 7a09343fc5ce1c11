/*
 * engine.h: the stages every batch shares: DNS cache, scheduler, download (fetch, with the
 * connection pools and TLS), the page queue and the parse stage. Batches (batch.h) bring their
 * input and their output; the engine moves their jobs through the middle.
 *
 *   batch source -> [batch job queue] -> sched -> fetch -> [page queue] -> parse
 *                -> [batch result queue] -> batch writer
 *
 * Backpressure that belongs to everyone lives here: when the page queue is full (by count or
 * bytes) every connection stops reading and no request starts, until it drains below half.
 * Backpressure that belongs to one batch (its result queue, its writer) holds only that batch.
 */
#ifndef HARVESTD_ENGINE_H
#define HARVESTD_ENGINE_H

#include <stdint.h>
#include <stdio.h>
#include <uv.h>

#include "harvestd/buf.h"
#include "harvestd/config.h"
#include "harvestd/dns.h"
#include "harvestd/fetch.h"
#include "harvestd/tls.h"

typedef struct hv_engine_s hv_engine_t;
struct hv_batch_s;

typedef struct {
    unsigned hwm_pages;
    uint64_t hwm_page_bytes;
    uint64_t read_pauses;
    unsigned pages;            /* now */
    uint64_t page_bytes;       /* now */
} hv_engine_stats_t;

/** `tls` (shared, outlives the engine) serves https URLs. */
hv_engine_t *hv_engine_new(uv_loop_t *loop, const hv_config_t *cfg, hv_tls_ctx_t *tls);

/**
 * Stop every batch: with `force` at once (in-flight requests cancelled, unparsed pages
 * dropped), otherwise gracefully (input closed, waiting jobs dropped, in-flight requests get
 * drain_timeout before they are cancelled).
 */
void hv_engine_stop(hv_engine_t *e, int force);

/** Move work forward after an outside change (a batch was added, a writer drained). */
void hv_engine_update(hv_engine_t *e);

/** Batches alive. */
unsigned hv_engine_batches(const hv_engine_t *e);

const hv_engine_stats_t *hv_engine_stats(const hv_engine_t *e);
const hv_fetch_stats_t *hv_engine_fetch_stats(const hv_engine_t *e);
const hv_dns_stats_t *hv_engine_dns_stats(const hv_engine_t *e);
hv_tls_ctx_t *hv_engine_tls(const hv_engine_t *e);

/** Append the engine's Prometheus lines (queues, connections, TLS, DNS) to `out`. */
void hv_engine_render_metrics(const hv_engine_t *e, hv_buf_t *out);

/** Append engine-wide summary fields (" hwm_pages=... tls_resumed=...") to `out`. */
void hv_engine_format_stats(const hv_engine_t *e, char *out, size_t cap);

/**
 * Close the engine once no batch is left: idle connections, the DNS cache, the drain timer.
 * The memory goes when the loop has closed its handles; `done` runs then.
 */
void hv_engine_close(hv_engine_t *e, void (*done)(void *ud), void *ud);

#endif
