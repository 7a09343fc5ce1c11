/*
 * bhost.h: the batch host. The daemon's sources, the spool (spool.h) and the Redis stream
 * (stream.h), run their batches (batch.h) here, and only here are outputs prepared, repaired,
 * completed and synced. A hosted batch goes
 *
 *   PREPARING (threadpool) -> RUNNING (the batch, on the loop) -> COMPLETING (threadpool)
 *     -> on_end (loop)
 *
 * Preparing, by the kind of output (hv_bhost_output_t):
 *   NEW     a crash note left by an earlier batch of the same name is removed (it cannot be
 *           this one's); the batch creates the output exclusively.
 *   RESUME  the output, when it exists, loses a torn last line (synced) and tells which input
 *           lines are done: a line with an ok record is skipped, one whose record or crash
 *           note says it took the parser down gets ParserCrashed again without a fetch. The
 *           batch appends (or creates the output when there was none).
 *   SHARED  the output is created when missing, the file and its directory synced (records
 *           written to it are acknowledged to others); the crash note's lines get ParserCrashed
 *           again. The batch appends.
 *   DONE    no batch: an earlier run completed it and was interrupted before the input moved;
 *           only the completion steps below run (2 and 4).
 *
 * Completing, once the batch ended with status 0, each step durable before the next:
 *   1. the output is fsynced (the batch's writer, before the batch reports 0);
 *   2. the crash note is removed (its lines have their ParserCrashed records now), its
 *      directory synced;
 *   3. the summary, when asked for, is written to a temporary file beside it, fsynced, renamed
 *      into place, its directory synced: the output is complete;
 *   4. the input, when there is one, moves to done_dir (under a free name: NAME, NAME.1 ...),
 *      the directory synced: the batch is over.
 * Whoever sees the summary finds the output final; whoever sees the input in done_dir finds
 * everything final. A move that fails leaves a complete batch all the same (its summary says
 * so): it is logged, not an error.
 *
 * Threads: preparing and completing each run as one uv threadpool work item per batch, their
 * steps in the order above, touching only that batch's own item; they report back through
 * after_work on the loop, which tells the source. The loop thread never fsyncs, renames or
 * unlinks an output, and a source claims its next batch only after on_end.
 */
#ifndef HARVESTD_BHOST_H
#define HARVESTD_BHOST_H

#include <stdint.h>

#include "harvestd/batch.h"
#include "harvestd/engine.h"
#include "harvestd/resume.h"
#include "harvestd/source.h"

typedef struct hv_bhost_s hv_bhost_t;
typedef struct hv_hosted_s hv_hosted_t;

typedef enum { HV_BHOST_NEW, HV_BHOST_RESUME, HV_BHOST_SHARED, HV_BHOST_DONE } hv_bhost_output_t;

/** Where a hosted batch stopped short. */
typedef enum {
    HV_BHOST_STEP_PREPARE,  /* preparing the output (repair, creation) */
    HV_BHOST_STEP_OPEN,     /* opening the output for the batch */
    HV_BHOST_STEP_BATCH,    /* the batch itself (writing the output, reading the input) */
    HV_BHOST_STEP_COMPLETE, /* a completion step (note, summary) */
} hv_bhost_step_t;

/** How a hosted batch ended (valid during on_end). */
typedef struct {
    int status;           /* 0 complete; HV_ECANCELLED stopped (output incomplete, nothing
                             completed); otherwise a failure of ours at `step` */
    hv_bhost_step_t step; /* with status != 0: where */
    const char *detail;   /* with a failure: what failed, naming the file ("" otherwise) */
    const hv_batch_t *batch; /* the batch, for its figures; NULL when it never ran */
} hv_hosted_end_t;

/** What preparing found (valid during on_start). */
typedef struct {
    int resumed;          /* RESUME: `repair` holds what the output held */
    hv_repair_t repair;
} hv_hosted_prep_t;

/** What the host tells a source about one of its batches, always on the loop. */
typedef struct {
    /** Optional: the batch runs (hv_hosted_batch() gives it). */
    void (*on_start)(void *ud, hv_hosted_t *h, const hv_hosted_prep_t *prep);
    /** Optional: a record whose line came with a token is durable (hv_batch_opts_t). */
    void (*on_durable)(void *ud, hv_hosted_t *h, char *token, int ok);
    /** The hosted batch is over, exactly once (also when it never ran). Its batch, if it ran,
     *  is still readable during the call; both are freed when this returns. */
    void (*on_end)(void *ud, hv_hosted_t *h, const hv_hosted_end_t *end);
} hv_hosted_cbs_t;

typedef struct {
    hv_bhost_output_t output;
    const char *name;         /* logs and the summary */
    const char *output_path;
    const char *crash_note;   /* NULL: none */
    const char *summary_path; /* NULL: no summary (step 3 skipped) */
    const char *input_path;   /* with done_dir: moved there last (step 4); NULL: none */
    const char *done_dir;
    const hv_ruleset_t *rules; /* outlives the batch; NULL: title only */
} hv_hosted_opts_t;

/** A host running batches on `e` (whose config gives the fsync policy); freed with
 *  hv_bhost_free() once no batch is hosted. */
hv_bhost_t *hv_bhost_new(hv_engine_t *e);

/**
 * Host a batch: the strings of `opts` are copied; `src` (NULL with HV_BHOST_DONE) is taken
 * over, closed if the batch never runs. Preparing starts at once; everything else is told
 * through `cbs` (never from inside this call). The handle stays valid until on_end returns.
 */
hv_hosted_t *hv_bhost_start(hv_bhost_t *h, const hv_hosted_opts_t *opts, hv_source_t *src,
                            const hv_hosted_cbs_t *cbs, void *ud);

/** The running batch; NULL while preparing or completing. */
hv_batch_t *hv_hosted_batch(const hv_hosted_t *hb);

/** A running batch's progress (hv_bhost_progress()). */
typedef struct {
    const char *name;      /* the batch's name, until it ends */
    hv_batch_progress_t p;
} hv_hosted_progress_t;

/**
 * The progress of the batches running now (not those being prepared or completed), in the
 * order they were hosted: the first `max` into `out`. Returns how many run, which may be more
 * than `max`.
 */
unsigned hv_bhost_progress(const hv_bhost_t *h, hv_hosted_progress_t *out, unsigned max);

/** Log an event=batch_progress line (notice) for each running batch. */
void hv_bhost_log_progress(const hv_bhost_t *h);

/** Batches being prepared do not start (they end HV_ECANCELLED at step PREPARE); running
 *  ones are stopped through the engine (hv_engine_stop()); completions go on. */
void hv_bhost_stop(hv_bhost_t *h);

/** Hosted batches (preparing, running or completing) and repairs in flight. */
unsigned hv_bhost_count(const hv_bhost_t *h);

/**
 * Repair every output in `dir` whose name ends with `suffix` (not dotfiles): a torn last
 * line is cut off and the file synced, on the threadpool. Each repair that cut something,
 * or failed, is logged; then `done` runs on the loop.
 */
void hv_bhost_repair_outputs(hv_bhost_t *h, const char *dir, const char *suffix,
                             void (*done)(void *ud), void *ud);

/** Free a host with hv_bhost_count() == 0. */
void hv_bhost_free(hv_bhost_t *h);

/** Tests: `hook` runs on the worker before each blocking step of preparing and completing,
 *  with the step's name ("unlink_stale_note", "repair", "read_note", "create", "unlink_note",
 *  "summary", "move") and its path. Set before the first batch. */
void hv_bhost__set_step_hook(hv_bhost_t *h, void (*hook)(const char *step, const char *path));

#endif
