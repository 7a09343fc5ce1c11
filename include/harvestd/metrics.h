/*
 * metrics.h: process-wide counters and the Prometheus text endpoint.
 *
 * Modules bump counters in hv_metrics (loop thread only: no atomics needed). The endpoint
 * (metrics_listen, off by default) serves GET /metrics from the same loop, parsing requests
 * with llhttp; requests are bounded in size and time, anything else gets 400/404/405, and
 * every connection closes after its response.
 */
#ifndef HARVESTD_METRICS_H
#define HARVESTD_METRICS_H

#include <stdint.h>
#include <uv.h>

#include "harvestd/buf.h"
#include "harvestd/record.h"

/* Upper bounds (seconds) of the parse-time histogram buckets; +Inf is implicit. */
#define HV_METRICS_PARSE_BUCKETS 10

typedef struct {
    uint64_t records_ok;
    uint64_t records_failed[HV_ET__COUNT];
    uint64_t http_status_class[6];      /* [2] = 2xx ... ; [0] unused */
    uint64_t body_bytes;                /* decoded bytes of pages downloaded */
    uint64_t parse_buckets[HV_METRICS_PARSE_BUCKETS + 1];
    double parse_seconds_sum;
    uint64_t parse_count;
    double loop_lag_seconds;            /* last measured event-loop delay */
    double loop_lag_max_seconds;
} hv_metrics_t;

extern hv_metrics_t hv_metrics;

/** Count one finished record (and its parse time, if it was parsed). */
void hv_metrics_record(const hv_record_t *rec);
/** Count one parse of `seconds`. */
void hv_metrics_parse_time(double seconds);

/** Appends gauge/counter lines owned by others (engine, spool) to the page. */
typedef void (*hv_metrics_render_cb)(void *ud, hv_buf_t *out);

typedef struct hv_metrics_server_s hv_metrics_server_t;

/**
 * Listen on `listen` ("127.0.0.1:9464", "[::1]:9464") and serve the metrics page. Also starts
 * the loop-lag probe. Returns 0, or an error with a message in `err`.
 */
int hv_metrics_start(uv_loop_t *loop, const char *listen, hv_metrics_render_cb render, void *ud,
                     hv_metrics_server_t **out, char *err, size_t errcap);

/** Start only the loop-lag probe (no endpoint); for --once progress figures. */
int hv_metrics_probe_start(uv_loop_t *loop, hv_metrics_server_t **out);

/** Close the listener, its clients and the probe. `done` runs when all handles are closed. */
void hv_metrics_close(hv_metrics_server_t *m, void (*done)(void *ud), void *ud);

struct hv_engine_stats_s;

/** Append the engine's Prometheus lines (queues, connections, retries, robots, TLS, DNS). */
void hv_metrics_render_engine(hv_buf_t *out, const struct hv_engine_stats_s *s);

/** Format the engine's summary fields (" hwm_pages=... tls_resumed=...") into `out`. */
void hv_metrics_format_engine(char *out, size_t cap, const struct hv_engine_stats_s *s);

/** Append "name value\n" with HELP/TYPE lines (helpers for render callbacks). */
void hv_metrics_counter(hv_buf_t *out, const char *name, const char *help, uint64_t v);
void hv_metrics_gauge(hv_buf_t *out, const char *name, const char *help, double v);

#endif
