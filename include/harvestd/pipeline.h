/*
 * pipeline.h: one batch: source -> [job queue] -> fetch -> [page queue] -> parse ->
 * [result queue] -> writer, with every queue bounded and every full queue pushing back to
 * the stage on its left:
 *
 *   result queue full  -> no parse starts, no request starts, the source pauses
 *   page queue full    -> every connection stops reading, no request starts (resumes below
 *                         half of both bounds)
 *   job queue full     -> the source pauses
 *
 * Every input line ends as exactly one record, except when the batch is interrupted
 * (SIGINT/SIGTERM: in-flight work is given drain_timeout, the rest is dropped and the batch
 * is incomplete) or fails internally (a write error: everything stops and the batch reports
 * the error, never completion).
 */
#ifndef HARVESTD_PIPELINE_H
#define HARVESTD_PIPELINE_H

#include <stdint.h>
#include <stdio.h>
#include <uv.h>

#include "harvestd/config.h"
#include "harvestd/dns.h"
#include "harvestd/record.h"
#include "harvestd/source.h"
#include "harvestd/tls.h"

typedef struct hv_pipeline_s hv_pipeline_t;

/** The batch ended: 0 complete, HV_ECANCELLED interrupted, else an internal failure (a UV_E*
 * from the writer or the source); `detail` says what failed ("write to out.jsonl"). */
typedef void (*hv_pipeline_done_cb)(void *ud, int status, const char *detail);

typedef struct {
    uint64_t lines;            /* input lines that produced (or will produce) a record */
    uint64_t records;
    uint64_t ok;
    uint64_t failed;
    uint64_t by_type[32];      /* indexed by hv_error_type_t */
    unsigned hwm_jobs;
    unsigned hwm_pages;
    uint64_t hwm_page_bytes;
    unsigned hwm_results;
    uint64_t read_pauses;
    uint64_t started_ms;
} hv_pipeline_stats_t;

/**
 * Create a batch writing to cfg->output_path, fetching https URLs through `tls` (shared,
 * outlives the batch) (created exclusively; "-" is standard output).
 * Returns 0 and *out, or the error opening the output (UV_EEXIST when it exists). The batch
 * starts when a source is attached with hv_pipeline_set_source().
 */
int hv_pipeline_new(uv_loop_t *loop, const hv_config_t *cfg, hv_tls_ctx_t *tls,
                    hv_pipeline_done_cb done, void *ud, hv_pipeline_t **out);

/** Take over the source (closed when the batch ends) and start reading it. */
void hv_pipeline_set_source(hv_pipeline_t *pl, hv_source_t *src, const char *name);

/** First call: graceful drain. Second call (`force`): stop at once, keep what is parsed. */
void hv_pipeline_stop(hv_pipeline_t *pl, int force);

const hv_pipeline_stats_t *hv_pipeline_stats(const hv_pipeline_t *pl);

/** Print the one-line summary ("harvestd: summary key=value ...") to `out`. */
void hv_pipeline_print_summary(const hv_pipeline_t *pl, FILE *out);

/** Free after `done` ran and the loop has closed the pipeline's handles. */
void hv_pipeline_free(hv_pipeline_t *pl);

#endif
