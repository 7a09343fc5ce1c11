/*
 * batch.h: one input and its output. A batch reads lines from its source, turns each into a
 * job (or an input-failure record), lets the engine download and parse them, and writes one
 * record per input line to its JSONL output as records complete.
 *
 * Its own bounds: at most queue_size jobs waiting for a slot (the source pauses beyond) and
 * result_queue records waiting for its writer (its jobs stop starting and its source pauses).
 *
 * A batch ends exactly once, through `done`:
 *   0             every line has its record, the output is flushed and synced;
 *   HV_ECANCELLED stopped by hv_engine_stop() (interrupted: output incomplete);
 *   other         internal failure (writing the output, reading the input): `detail` says
 *                 which; the output is incomplete and must never be reported complete.
 */
#ifndef HARVESTD_BATCH_H
#define HARVESTD_BATCH_H

#include <stdint.h>
#include <stdio.h>

#include "harvestd/engine.h"
#include "harvestd/extract.h"
#include "harvestd/health.h"
#include "harvestd/record.h"
#include "harvestd/resume.h"
#include "harvestd/source.h"

typedef struct hv_batch_s hv_batch_t;

typedef void (*hv_batch_done_cb)(void *ud, hv_batch_t *b, int status, const char *detail);

/** Decides, per input line, whether it already has its record (resume): HV_BATCH_FETCH, or
 *  HV_BATCH_SKIP, or HV_BATCH_CRASHED for a line whose page took the parser down before (it
 *  gets a ParserCrashed record and is not fetched again). */
typedef int (*hv_batch_skip_cb)(void *ud, const char *line, size_t len);
enum { HV_BATCH_FETCH = 0, HV_BATCH_SKIP = 1, HV_BATCH_CRASHED = 2 };

typedef struct {
    const char *name;          /* for logs and the summary */
    const char *output_path;   /* created exclusively, or "-" */
    int output_append;         /* open an existing output for appending (resume) */
    hv_fsync_t fsync;
    uint64_t fsync_interval_ms;
    hv_batch_skip_cb skip;     /* optional */
    void *skip_ud;
    const hv_ruleset_t *rules; /* extraction rules (outlive the batch); NULL: title only */
    const char *crash_note;    /* path of the crash note (see hv_parse_catch_crashes),
                                  outliving the batch; NULL: none */
    /* Optional: a record whose line came with a token (hv_line_meta_t) is durable in the
     * output under the fsync policy (see hv_writer_cbs_t.on_durable); the token passes to the
     * callee, `ok` is the record's status. In the order the records were written. */
    void (*on_durable)(void *ud, hv_batch_t *b, char *token, int ok);
    /* Optional (resume): the ok records an earlier run left in the output (resume.h), counted
     * into the batch's figures from the start, so that they cover the whole output. */
    const hv_kept_t *kept;
} hv_batch_opts_t;

/** How many of the hosts with the most failures the summaries show. */
#define HV_BATCH_TOP_HOSTS 5
/** How many blocked hosts (block.h) the summaries name, the first found. */
#define HV_BATCH_BLOCKED_HOSTS 8

/* The figures cover the whole batch: with hv_batch_opts_t.kept, the records an earlier run
 * left count in records, ok and the figures their lines carry (recovered says how many);
 * requests, the high-water marks and the rates are this run's. */
typedef struct {
    uint64_t lines;            /* input lines that produce (or produced) a record */
    uint64_t skipped;          /* lines skipped because they already had an ok record */
    uint64_t recovered;        /* ok records of an earlier run, counted in the figures below */
    uint64_t records;
    uint64_t ok;
    uint64_t failed;
    uint64_t by_type[32];      /* indexed by hv_error_type_t */
    uint64_t by_status[600];   /* by http_status (100..599) */
    uint64_t body_bytes;       /* sum of `bytes` over records that have it */
    uint64_t with_bytes;
    uint64_t not_modified;     /* re-crawling: 304 answers, */
    uint64_t unchanged;        /* 200s with the stored body, */
    uint64_t from_cache;       /* answers from the store without a request */
    uint64_t requests;         /* requests sent for the records (hv_record_t.requests) */
    hv_sizes_t ok_sizes;       /* decoded sizes of the ok pages downloaded (health.h) */
    hv_tophosts_t failing;     /* the hosts of failed records, most failures first */
    struct {
        char host[HV_HOST_KEY_MAX];
        char sign[HV_DETAIL_TEXT_MAX]; /* the block detector's, as its records' `error` */
        uint64_t records;
    } blocked[HV_BATCH_BLOCKED_HOSTS]; /* the first hosts found blocked, in that order */
    unsigned nblocked;
    unsigned hwm_jobs;
    unsigned hwm_results;
    int64_t started_unix_ms;
    uint64_t started_ms;
} hv_batch_stats_t;

/**
 * Create a batch on `e` writing to opts->output_path. Returns 0 and *out, or the error opening
 * the output (UV_EEXIST when it exists and output_append is 0); the source is not touched
 * then. On success the batch takes over `src` and starts reading it.
 */
int hv_batch_new(hv_engine_t *e, const hv_batch_opts_t *opts, hv_source_t *src,
                 hv_batch_done_cb done, void *ud, hv_batch_t **out);

const hv_batch_stats_t *hv_batch_stats(const hv_batch_t *b);
/** Whether the whole input has been read (so `lines` is the final count). */
int hv_batch_input_done(const hv_batch_t *b);

/** Where a batch stands (hv_batch_progress()). */
typedef struct {
    uint64_t lines_read;  /* input lines read so far (skipped ones too) */
    uint64_t done;        /* of those, the lines that have their record (skipped ones too) */
    uint64_t ok;          /* the batch's records by status (hv_batch_stats_t) */
    uint64_t failed;
    uint64_t lines_total; /* the input's lines: exact with total_exact, otherwise estimated
                             from the share of the input's bytes read; 0: unknown (a source
                             of unknown size, or nothing read yet) */
    int total_exact;      /* the whole input is read */
    double pages_per_s;   /* this run's records per second since the batch started */
    double eta_s;         /* seconds left at that pace, when lines_total is known; < 0: not */
} hv_batch_progress_t;

/** Fill `out` with the batch's progress at `now_ms` (the loop's clock). */
void hv_batch_progress(const hv_batch_t *b, uint64_t now_ms, hv_batch_progress_t *out);

/** `seconds` (an ETA) as "4m05s", "2h10m", or "--:--" when negative or beyond 99 hours. */
void hv_batch_format_eta(char *out, size_t cap, double seconds);


/** Format the batch's key=value summary fields into `out`. */
void hv_batch_format_stats(const hv_batch_t *b, uint64_t now_ms, char *out, size_t cap);

/** The batch's HTTP status codes as "200:20,404:3" (codes in order; ",..." ends a list that
 *  `cap` cut short), "" when there are none. */
void hv_batch_format_statuses(const hv_batch_stats_t *s, char *out, size_t cap);

/** Records written or being written whose durability has not been reported. */
uint64_t hv_batch_unsynced(const hv_batch_t *b);

/** Someone waits for the durability of what is written: fsync soon (hv_writer_sync_soon). */
void hv_batch_sync_soon(hv_batch_t *b);

/** Write and sync each record at once while `on` (hv_writer_set_eager). */
void hv_batch_set_eager(hv_batch_t *b, int on);

/** Free a batch after its done callback returned. */
void hv_batch_free(hv_batch_t *b);

#endif
