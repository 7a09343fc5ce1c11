/*
 * metrics.h: the Prometheus text endpoint and the rendering of every module's figures.
 *
 * The figures are owned where they are counted (the engine's stats, with the records it
 * counted; the spool's, the stream's and the store's); this module only renders them, from
 * the objects a view names, when a scrape comes. The endpoint (metrics_listen, off by
 * default) serves GET /metrics from the same loop, parsing requests with llhttp; requests are
 * bounded in size and time, anything else gets 400/404/405, and every connection closes
 * after its response. It also probes the loop's lag (a timer that measures how late it
 * fires), which the page reports.
 */
#ifndef HARVESTD_METRICS_H
#define HARVESTD_METRICS_H

#include <stdint.h>
#include <uv.h>

#include "harvestd/bhost.h"
#include "harvestd/buf.h"
#include "harvestd/engine.h"
#include "harvestd/recrawl.h"
#include "harvestd/spool.h"
#include "harvestd/stream.h"

/** What the page shows: the objects alive now (NULL: absent, their lines are left out) and
 *  the record counts (the engine counts into them; they outlive it). The owner keeps it
 *  current; the server reads it at each scrape. */
typedef struct {
    const hv_record_counts_t *records;
    hv_engine_t *engine;
    hv_spool_t *spool;
    hv_stream_t *stream;
    hv_recrawl_t *recrawl;
    hv_bhost_t *host;     /* the running batches' progress (harvestd_batch_*) */
} hv_metrics_view_t;

/** Running batches shown with a `batch` label (the first hosted); the others are counted in
 *  harvestd_batches_unlabelled. */
#define HV_METRICS_BATCHES_MAX 16
/** Bytes of a batch name kept in its label (cut on a character's boundary, "..." added). */
#define HV_METRICS_LABEL_MAX 64

typedef struct hv_metrics_server_s hv_metrics_server_t;

/**
 * Read `listen`, ADDRESS:PORT, into `out`: an IPv4 literal ("127.0.0.1:9464"), an IPv6 one in
 * brackets ("[::1]:9464"), or "localhost" (any case), which means 127.0.0.1 and is never
 * resolved. No name is looked up. 0, or UV_EINVAL.
 */
int hv_metrics_parse_listen(const char *listen, struct sockaddr_storage *out);

/**
 * Listen on `listen` (hv_metrics_parse_listen()) and serve the page of `view` (which
 * outlives the server). Also starts the loop-lag probe. Returns 0, or an error with a message
 * in `err`.
 */
int hv_metrics_start(uv_loop_t *loop, const char *listen, const hv_metrics_view_t *view,
                     hv_metrics_server_t **out, char *err, size_t errcap);

/** Close the listener, its clients and the probe. `done` runs when all handles are closed. */
void hv_metrics_close(hv_metrics_server_t *m, void (*done)(void *ud), void *ud);

/** Append the whole page of `view` to `out`, with the loop lag `m` measured (NULL: 0). */
void hv_metrics_render(hv_buf_t *out, const hv_metrics_view_t *view,
                       const hv_metrics_server_t *m);

#endif
