/*
 * spool.h: the daemon's input: a watched spool directory.
 *
 *   incoming/   users drop files here (written elsewhere, then renamed in; dotfiles and
 *               *.tmp are ignored)
 *   active/     files being processed (claimed by an atomic rename, held with flock)
 *   done/       inputs whose batch completed
 *   rejected/   inputs that cannot be processed, each with a <name>.reason file
 *   out/        <name>.jsonl (appended as records complete) and <name>.summary.json (written
 *               atomically once the output is complete and synced: the completion signal);
 *               <name>.crashes while the batch holds a page that crashed the parser
 *
 * A batch runs on the batch host (bhost.h), which completes it in one order, each step
 * synced before the next, off the loop: output fsynced, crash note removed, summary renamed
 * into place, input moved to done/. Whoever sees the summary finds the output final; whoever
 * sees the input in done/ finds everything final. An interruption between two steps leaves
 * what a restart finishes: before the summary the batch resumes (after the note's removal its
 * noted lines are fetched again), after it only the note's removal and the move are done.
 *
 * Files are discovered by uv_fs_event on incoming/, a scan at start-up and a periodic rescan
 * (inotify can miss events, or be unavailable: the rescan then works alone). Claiming is rename(2) with RENAME_NOREPLACE into active/ under a
 * name that is free in active/, done/ and out/ (a numeric suffix otherwise), so two daemons
 * sharing a spool never take the same file and outputs never mix. At start-up every file in
 * active/ that no other daemon holds is resumed (see resume.h).
 *
 * Claiming and rejecting (rename, a non-blocking flock, a short reason file) run on the loop,
 * from the scan timer: they are metadata operations on a local spool, and keeping them in
 * order makes claiming simple. Nothing here syncs: a batch's next claim waits until the host
 * reports its completion.
 */
#ifndef HARVESTD_SPOOL_H
#define HARVESTD_SPOOL_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "harvestd/bhost.h"
#include "harvestd/config.h"

typedef struct hv_spool_s hv_spool_t;

typedef struct {
    /** A batch failed internally (its output could not be written...): the daemon must stop
     * and exit non-zero; the batch stays in active/ and resumes after the restart. */
    void (*on_fatal)(void *ud, int err, const char *detail);
    /** Something changed that a status line would show. */
    void (*on_progress)(void *ud);
    /** Once, after hv_spool_start(): every batch its start-up scan found (resumed or new)
     *  has started on the host, or ended (possibly from inside hv_spool_start()). */
    void (*on_ready)(void *ud);
} hv_spool_cbs_t;

typedef struct {
    unsigned active;          /* batches running */
    uint64_t completed;       /* batches completed since start-up */
    uint64_t rejected;
    uint64_t resumed;         /* batches resumed from active/ at start-up */
    uint64_t records;         /* records written by completed batches */
} hv_spool_stats_t;

/**
 * Check the spool (spool_dir must exist; its subdirectories are created when missing, and
 * each must be writable); its batches will run on `host`. Returns 0 and *out, or an error
 * with a message in `err`.
 */
int hv_spool_open(uv_loop_t *loop, const hv_config_t *cfg, hv_bhost_t *host,
                  const hv_spool_cbs_t *cbs, void *ud, hv_spool_t **out, char *err,
                  size_t errcap);

/**
 * Start watching, resume what active/ holds, scan incoming/. Without inotify (a resource
 * limit: ENOSPC, EMFILE...) it warns once and relies on the periodic rescan. 0, or an error
 * in `err` (the watch refused otherwise); the spool then only needs hv_spool_close().
 */
int hv_spool_start(hv_spool_t *sp, char *err, size_t errcap);

/** Stop claiming files (the engine drains the running batches). */
void hv_spool_stop(hv_spool_t *sp);

void hv_spool_stats(const hv_spool_t *sp, hv_spool_stats_t *out);

/** Close the watchers; `done` runs once their handles are closed and no batch is left. */
void hv_spool_close(hv_spool_t *sp, void (*done)(void *ud), void *ud);

#endif
