/*
 * stream.h: the daemon's Redis source. Many daemons share one Redis stream through a
 * consumer group; each reads entries (one per input line: batch, line, url, rules; see
 * streamkeys.h), fetches them through its engine like spool batches (on the same batch host,
 * bhost.h), writes their records to out/BATCH.CONSUMER.jsonl in its own spool, and
 * acknowledges an entry only once its record is durable under the fsync policy. Delivery is at least once: an entry whose daemon died
 * before its acknowledgement is taken over by another after redis_claim_idle, so a line may
 * have two records (the last one wins, see `harvestd merge`); it never has none.
 *
 * Two connections: one for the blocking XREADGROUP, one for everything else (creating the
 * group, acknowledgements, XAUTOCLAIM, keeping held entries from being taken over).
 *
 * Backpressure: the daemon holds at most queue_size entries (delivered to it and not yet
 * acknowledged, whatever stage they are in); XREADGROUP and XAUTOCLAIM ask for no more than
 * the free part of that bound. When reading is held up by entries that wait for their fsync,
 * the outputs are synced early (hv_batch_sync_soon) rather than waiting for fsync_interval.
 *
 * Start-up: the group is created when missing (XGROUP CREATE ... 0 MKSTREAM), then the
 * entries still pending for this consumer (a previous run's) are read again from ID 0, then
 * new ones ('>').
 *
 * Acknowledgement: one script per batch and round, which XACKs each entry and adds to the
 * batch's done/ok/failed counts only the entries it removed from the pending list, so done
 * equals the entries acknowledged, whoever acknowledged them.
 *
 * Taking over: every redis_claim_idle / 2 the daemon runs XAUTOCLAIM for entries idle longer
 * than redis_claim_idle (their daemon died or hangs). Every redis_claim_idle / 4 it touches
 * the entries it holds (XCLAIM ... JUSTID of those still its own, in a script), so that a
 * slow host or a long retry wait never makes its own entries look idle.
 *
 * Redis going away (a restart, the network) is not fatal: the daemon logs it, keeps working
 * on what it holds, keeps the acknowledgements, reconnects with backoff (0.2 s doubling up to
 * 10 s) and sends them when Redis is back; it reads nothing new meanwhile. A stream key of
 * another type, or a script refused, is fatal (on_fatal).
 */
#ifndef HARVESTD_STREAM_H
#define HARVESTD_STREAM_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "harvestd/bhost.h"
#include "harvestd/config.h"
#include "harvestd/engine.h"

typedef struct hv_stream_s hv_stream_t;

typedef struct {
    /** Something of ours failed (an output could not be written, the stream key is not a
     *  stream): the daemon must stop and exit non-zero. Entries not acknowledged stay
     *  pending and are processed again. */
    void (*on_fatal)(void *ud, int err, const char *detail);
    /** A batch ended (for the daemon's stop sequence and status). */
    void (*on_progress)(void *ud);
    /** Once, after hv_stream_start(): the outputs are repaired and the connections begun.
     *  Not when stopped first. */
    void (*on_ready)(void *ud);
} hv_stream_cbs_t;

typedef struct {
    int up;               /* both connections are open */
    unsigned held;        /* entries delivered to this daemon and not yet acknowledged */
    unsigned acks_waiting; /* of those, durable and waiting for their acknowledgement */
    unsigned batches;     /* batch outputs open */
    uint64_t read;        /* entries received by XREADGROUP */
    uint64_t reclaimed;   /* entries taken over from other consumers (XAUTOCLAIM) */
    uint64_t acked;       /* entries acknowledged */
    uint64_t lost;        /* held entries that another consumer took over meanwhile */
    uint64_t invalid;     /* entries without a url, with unknown rules, or deleted */
    uint64_t dead;        /* entries moved to S:dead (no batch could take them) */
    uint64_t reconnects;  /* connections lost */
} hv_stream_stats_t;

/**
 * A stream source for the daemon configured by `cfg` (source includes redis), running its
 * batches on `host` (whose engine is `engine`) and writing to `out_dir` (the spool's out/).
 * Nothing is connected before hv_stream_start(). 0 and *out, or an error with a message in
 * `err`.
 */
int hv_stream_open(uv_loop_t *loop, const hv_config_t *cfg, hv_bhost_t *host,
                   hv_engine_t *engine, const char *out_dir, const hv_stream_cbs_t *cbs,
                   void *ud, hv_stream_t **out, char *err, size_t errcap);

/** Repair this consumer's outputs (a torn last line, off the loop), then connect and start
 *  consuming. */
void hv_stream_start(hv_stream_t *s);

/** Read no more entries (the engine drains the batches; their acknowledgements still go). */
void hv_stream_stop(hv_stream_t *s);

void hv_stream_stats(const hv_stream_t *s, hv_stream_stats_t *out);

/**
 * Close once no batch of the stream is left: the acknowledgements still waiting are sent
 * (for up to drain_timeout while Redis is away; after that they are given up and their
 * entries are processed again later), then the connections and handles close and `done`
 * runs. The stream is freed after `done` returns.
 */
void hv_stream_close(hv_stream_t *s, void (*done)(void *ud), void *ud);

#endif
