/*
 * engine.h: the stages every batch shares: DNS cache, scheduler, download (fetch, with the
 * connection pools and TLS), politeness, the page queue and the parse stage. Batches
 * (batch.h) bring their input and their output; each has a flow through the engine, which
 * moves its jobs through the middle.
 *
 *   batch source -> hv_engine_submit -> sched -> fetch -> [page queue] -> parse
 *                -> flow's on_record -> [batch result queue] -> batch writer
 *
 * One pass per loop iteration. Events only mark work as pending: a download that ends, a
 * parse that comes back, a line submitted, a writer that drained, a timer: each records
 * what changed and calls hv_engine_wake(). The pass runs from a uv_idle_t that is active
 * exactly while work is pending: libuv runs idle handles once per iteration, before it polls
 * for I/O, and does not block in the poll while one is active, so marked work moves before
 * the loop sleeps. The pass, in order: ended downloads (slots back, redirects and retries
 * back to the scheduler, pages to the page queue, failures to their flows), robots.txt
 * requests the scheduler asks for, pages to free parsers, records to their flows and each
 * flow's own pass (output, input, completion), then waiting jobs to free slots, at most
 * START_BURST per pass so that the loop polls between bursts of connects. Nothing in an I/O
 * callback starts a request or calls a flow.
 *
 * Backpressure that belongs to everyone lives here: when the page queue is full (by count or
 * bytes) every connection stops reading and no request starts, until it drains below half.
 * The page is counted when its download ends, inside the I/O callback, so the bound holds
 * exactly. Backpressure that belongs to one batch (its result queue, its writer) holds only
 * that batch's flow, through its callbacks.
 */
#ifndef HARVESTD_ENGINE_H
#define HARVESTD_ENGINE_H

#include <stdint.h>
#include <uv.h>

#include "harvestd/block.h"
#include "harvestd/config.h"
#include "harvestd/dns.h"
#include "harvestd/extract.h"
#include "harvestd/fetch.h"
#include "harvestd/pages.h"
#include "harvestd/polite.h"
#include "harvestd/record.h"
#include "harvestd/tls.h"
#include "harvestd/url.h"

typedef struct hv_engine_s hv_engine_t;
typedef struct hv_engine_flow_s hv_engine_flow_t;

/** What the engine asks of a flow's owner (a batch). Every call comes from the engine's pass,
 * except on_stop (from hv_engine_stop()). */
typedef struct {
    /** May the flow start another request now (its state, its result queue)? */
    int (*may_start)(void *ud);
    /** May the flow's pages be parsed now (room for their records)? */
    int (*accepts)(void *ud);
    /** A record of the flow is complete (parsed, or failed); it passes to the callee. */
    void (*on_record)(void *ud, hv_record_t *rec);
    /** Once per pass, after the records: move output on, read input, check completion. */
    void (*on_pass)(void *ud);
    /** hv_engine_stop() was called: stop (at once with `force`). */
    void (*on_stop)(void *ud, int force);
} hv_engine_flow_cbs_t;

/** A flow's work in the engine, for its owner's bounds and completion. */
typedef struct {
    unsigned waiting;   /* jobs waiting for a request slot */
    unsigned delayed;   /* jobs waiting out a retry backoff */
    unsigned inflight;  /* jobs holding a slot (downloading, or ended and not yet passed) */
    unsigned pages;     /* pages queued or being parsed, records not yet handed over */
} hv_engine_flow_counts_t;

/** Engine-wide figures, for the summary line and /metrics (metrics.h renders them). */
typedef struct hv_engine_stats_s {
    hv_pages_stats_t queue;     /* the page queue */
    uint64_t read_pauses;
    unsigned requests_in_flight;
    unsigned jobs_waiting;
    unsigned batches;
    uint64_t retries;           /* retries scheduled */
    hv_fetch_stats_t fetch;
    hv_dns_stats_t dns;
    hv_polite_stats_t polite;
    int has_tls;
    hv_tls_stats_t tls;
    int has_tls_store;             /* TLS sessions are kept in the re-crawl store */
    uint64_t tls_sessions_loaded;  /* ... and these were imported from it */
    hv_block_stats_t block;     /* the block detector's (zero while it is off) */
    uint64_t taken_ms;          /* the loop time the figures were taken at */
    unsigned block_held;        /* records waiting for their host's verdict */
} hv_engine_stats_t;

/** `tls` (shared, outlives the engine) serves https URLs; every record handed to a batch's
 *  output is counted into `records` (outlives the engine; NULL: not counted). */
hv_engine_t *hv_engine_new(uv_loop_t *loop, const hv_config_t *cfg, hv_tls_ctx_t *tls,
                           hv_record_counts_t *records);

struct hv_recrawl_s;

/** Re-crawl conditionally with `rc` (recrawl.h; it outlives the engine), before any flow. */
void hv_engine_use_recrawl(hv_engine_t *e, struct hv_recrawl_s *rc);
struct hv_recrawl_s *hv_engine_recrawl(const hv_engine_t *e);

const hv_config_t *hv_engine_config(const hv_engine_t *e);
/** The TLS context the engine was given (NULL if none), for the daemon's other TLS clients:
 *  the stream's rediss:// connections share its trust store and settings. */
hv_tls_ctx_t *hv_engine_tls(const hv_engine_t *e);
uv_loop_t *hv_engine_loop(const hv_engine_t *e);

/** Mark work pending: the engine's pass runs before the loop next sleeps. Cheap; call it
 * after any change a pass should see (a record queued, a writer drained, input resumed). */
void hv_engine_wake(hv_engine_t *e);

/** A source's own step of the pass (the stream's: feeding its batches, acknowledging, reading
 *  more), run by every pass of the engine after the flows' steps and before waiting jobs
 *  start, so that what it submits starts in the same pass. The struct is the caller's; `run`
 *  may remove its own registration, no other. */
typedef struct hv_engine_pass_s {
    void (*run)(void *ud);
    void *ud;
    struct hv_engine_pass_s *_next;
} hv_engine_pass_t;

/** Register `p` (until hv_engine_remove_pass()). */
void hv_engine_add_pass(hv_engine_t *e, hv_engine_pass_t *p);
void hv_engine_remove_pass(hv_engine_t *e, hv_engine_pass_t *p);

/**
 * A new flow for `cbs`/`ud` (a batch). Its pages are analysed with `rules` (NULL: title
 * only) and parse crashes noted in `crash_note` (NULL: none); both must outlive the flow.
 */
hv_engine_flow_t *hv_engine_flow_new(hv_engine_t *e, const hv_engine_flow_cbs_t *cbs, void *ud,
                                     const hv_ruleset_t *rules, const char *crash_note);

/** Queue a download of `url` building `rec` (both taken over) in the flow. Returns NULL, or
 * `rec` itself, complete, when re-crawling answered it from the store without a request
 * (the caller then owns it; `url` is freed). */
hv_record_t *hv_engine_submit(hv_engine_flow_t *f, hv_record_t *rec, hv_url_t *url);

void hv_engine_flow_counts(const hv_engine_flow_t *f, hv_engine_flow_counts_t *out);

/** Drop the flow's waiting and delayed jobs; with `force` also abandon its requests in
 * flight, its queued pages and its parses not yet started (their records are freed). */
void hv_engine_flow_drop(hv_engine_flow_t *f, int force);

/** Free a flow with no work left (hv_engine_flow_counts all zero). */
void hv_engine_flow_free(hv_engine_flow_t *f);

/**
 * Stop every flow: with `force` at once (in-flight requests cancelled, unparsed pages
 * dropped), otherwise gracefully (flows close their input and drop waiting jobs; in-flight
 * requests get drain_timeout before they are cancelled). No retry is planned once stopping.
 */
void hv_engine_stop(hv_engine_t *e, int force);

/** Flows (batches) alive. */
unsigned hv_engine_batches(const hv_engine_t *e);

/** Jobs waiting for a request slot, over every flow (a source's measure of its backlog). */
unsigned hv_engine_waiting(const hv_engine_t *e);

void hv_engine_stats(const hv_engine_t *e, hv_engine_stats_t *out);

/** Count a record on its way to its batch's output (every record, whoever made it), into the
 *  engine's `records`. */
void hv_engine_count_record(hv_engine_t *e, const hv_record_t *rec);

/** Format the engine's summary fields (" hwm_pages=... tls_resumed=...") into `out`. */
void hv_engine_format_stats(char *out, size_t cap, const hv_engine_stats_t *s);

/**
 * Close the engine once no flow is left: robots.txt requests, idle connections, the DNS
 * cache, the handles. The memory goes when the loop has closed its handles; `done` runs then.
 */
void hv_engine_close(hv_engine_t *e, void (*done)(void *ud), void *ud);

#endif
