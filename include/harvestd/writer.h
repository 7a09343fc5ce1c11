/*
 * writer.h: the JSONL output of one batch.
 *
 * Records are serialised as they arrive into a pending buffer; one uv_fs_write at a time
 * (concurrent writes to one file complete out of order) carries the pending bytes to the
 * file, so records that complete together are written together. A record reaches the kernel
 * at most `flush_ms` after it was pushed. Short writes are continued; a write error (ENOSPC,
 * EIO) is reported once through `on_error` and the writer accepts nothing more: the caller
 * must stop the batch and never claim completion.
 *
 * Backpressure: hv_writer_full() is true while the pending buffer is over its high-water mark;
 * `on_drain` runs after each completed write so the caller can push again.
 */
#ifndef HARVESTD_WRITER_H
#define HARVESTD_WRITER_H

#include <stdint.h>
#include <uv.h>

#include "harvestd/record.h"

typedef struct hv_writer_s hv_writer_t;

typedef struct {
    void (*on_drain)(void *ud);
    void (*on_error)(void *ud, int err);
    /** Optional: the first `records` records pushed are now durable under the policy: fsynced
     * (fsync_always, fsync_interval_ms, and at the finish), or written to the kernel when
     * the policy never syncs (and for standard output). Called with growing counts, never
     * after an error, and before `done` for what the finish made durable. */
    void (*on_durable)(void *ud, uint64_t records);
} hv_writer_cbs_t;

typedef struct {
    int append;               /* reopen an existing file (resume) instead of creating one */
    uint64_t flush_ms;        /* a pushed record starts its write within this delay */
    int fsync_always;         /* fsync after every write */
    uint64_t fsync_interval_ms; /* else fsync at most this often (0: only at the end) */
} hv_writer_opts_t;

/**
 * Open `path` for appending: created exclusively (an existing file is never reused:
 * UV_EEXIST) unless opts->append, or standard output for "-". Returns 0 and *out, or a UV_E*
 * error.
 */
int hv_writer_open(uv_loop_t *loop, const char *path, const hv_writer_opts_t *opts,
                   const hv_writer_cbs_t *cbs, void *ud, hv_writer_t **out);

/** Serialise and take over `rec` (freed here). 0, or the writer's sticky error. */
int hv_writer_push(hv_writer_t *w, hv_record_t *rec);

int hv_writer_full(const hv_writer_t *w);

/** Write everything pending, fsync (files only) and close; `done` runs with 0 or the error.
 * The writer frees itself after `done` returns. */
void hv_writer_finish(hv_writer_t *w, void (*done)(void *ud, int status));

uint64_t hv_writer_bytes(const hv_writer_t *w);

/** With a policy that syncs: fsync as soon as what is written (and what is pending, which is
 *  written at once) allows, without waiting for the interval. Someone waits for durability. */
void hv_writer_sync_soon(hv_writer_t *w);

/** While `on`, records are written as they are pushed (no flush_ms) and, with a policy that
 *  syncs, fsynced after each write: someone waits for each of them. */
void hv_writer_set_eager(hv_writer_t *w, int on);

/** Records pushed and not yet reported durable. */
uint64_t hv_writer_unsynced(const hv_writer_t *w);

#endif
