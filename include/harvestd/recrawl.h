/*
 * recrawl.h: conditional re-fetching. Remembers, per requested URL, what its last `ok` record
 * said and the validators of the response (store.h), asks the server whether the page changed
 * (If-None-Match / If-Modified-Since) and turns a 304 into a complete `ok` record.
 *
 * The path of a page's record, all on the loop:
 *   hv_recrawl_prepare     at submission: look the URL up; the record gets its state (the
 *                          stored entry, whether to send validators), or is answered from the
 *                          store at once (recrawl_min_age: from_cache)
 *   fetch                  sends the validators to the stored final URL and captures those of
 *                          the response; a 304 to a conditional request ends the job as
 *                          HV_JOB_NOT_MODIFIED
 *   hv_recrawl_not_modified   the 304's record gets the stored url, title, fields...
 *   hv_recrawl_parsed      a parsed 200: the parser hashed the body; equal to the stored
 *                          hash is `unchanged`
 *   hv_recrawl_op_new      the record goes to the writer: what to store, once it is durable
 *   hv_recrawl_commit      it is durable under the fsync policy: commit
 *
 * Durability order: an entry is committed only after the record that carries it is durable,
 * so that a crash can lose a store entry (the next fetch is unconditional) but never leave an
 * entry whose content no output holds.
 *
 * Commits run on the threadpool, one at a time, each taking every operation that became
 * durable meanwhile (at least COMMIT_BATCH of them, or what came within COMMIT_DELAY_MS of
 * the first) in one LMDB transaction: the loop never waits for the store's fsync.
 * Reads are LMDB lookups in the memory map, done on the loop.
 *
 * The store never fails a batch: when it is full (state_max_bytes), the owner stores what of
 * the commit still fits, warns once and stops storing, and fetching goes on as if re-crawling were off for new URLs; when LMDB fails
 * a lookup or a commit (a damaged page, an I/O error), the owner warns once and sets the store
 * aside: no more lookups or commits, every page fetched unconditionally. Both are counted as
 * failed transactions (commit_errors).
 */
#ifndef HARVESTD_RECRAWL_H
#define HARVESTD_RECRAWL_H

#include <stdint.h>
#include <uv.h>

#include "harvestd/config.h"
#include "harvestd/record.h"
#include "harvestd/tls.h"
#include "harvestd/url.h"

typedef struct hv_recrawl_s hv_recrawl_t;
typedef struct hv_recrawl_op_s hv_recrawl_op_t;

typedef struct {
    uint64_t lookups;        /* URLs looked up */
    uint64_t conditional;    /* requests sent with validators */
    uint64_t not_modified;   /* 304 answers */
    uint64_t unchanged;      /* 200 answers with the stored body */
    uint64_t from_cache;     /* answered from the store without a request */
    uint64_t bytes_avoided;  /* stored body bytes not transferred (304s and from_cache) */
    uint64_t stored;         /* entries committed */
    uint64_t not_stored;     /* ok records not stored: no-store, too large, store full */
    uint64_t commits;        /* transactions committed */
    uint64_t commit_errors;  /* transactions (commits, or a lookup) that failed: storing stops */
    uint64_t tls_sessions_loaded; /* TLS sessions imported from the store */
    uint64_t tls_sessions_stored; /* TLS sessions committed to it */
    int full;                /* the store reached state_max_bytes */
    uint64_t entries;        /* in the store (read at the call) */
    uint64_t tls_sessions;   /* TLS sessions in the store (read at the call) */
    uint64_t bytes_used;
    uint64_t map_bytes;
} hv_recrawl_stats_t;

/** What hv_recrawl_prepare decided. */
enum { HV_RECRAWL_FETCH = 0, HV_RECRAWL_ANSWERED = 1 };

/**
 * Open the store of cfg->state_dir (bounded by cfg->state_max_bytes) for `loop`; `cfg` must
 * outlive the returned object. 0 and *out, or an error with a message in `err` naming the
 * path: a corrupt store, or one that the checks before LMDB maps it refuse (cut short, wrong
 * meta pages: storecheck.h), says what is wrong and how to discard it. The daemon makes that
 * a start-up error (exit 2).
 */
int hv_recrawl_open(uv_loop_t *loop, const hv_config_t *cfg, hv_recrawl_t **out, char *err,
                    size_t errcap);

/**
 * A page is about to be fetched: look up `url` (its normalised form is the key) and give
 * `rec` its state. `rules_fp` is the fingerprint of the rules its batch uses. Returns
 * HV_RECRAWL_ANSWERED when the stored entry is younger than recrawl_min_age (and its rules
 * are the same): `rec` is then complete (from_cache) and no request is to be made.
 */
int hv_recrawl_prepare(hv_recrawl_t *rc, hv_record_t *rec, const hv_url_t *url,
                       uint64_t rules_fp);

/** A conditional request was answered 304: `rec` (url, http_status and timing filled by the
 *  download) gets the stored title, fields, content type, charset and bytes. */
void hv_recrawl_not_modified(hv_recrawl_t *rc, hv_record_t *rec);

/** A page's record came back from the parser: set unchanged and modified_at. */
void hv_recrawl_parsed(hv_recrawl_t *rc, hv_record_t *rec);

/** `rec` is handed to the writer: what to store once it is durable, or NULL (nothing: not a
 *  page, failed, from the store, no-store, ...). `rec` is not changed. */
hv_recrawl_op_t *hv_recrawl_op_new(hv_recrawl_t *rc, const hv_record_t *rec);

/** The record of `op` is durable: commit it (soon, off the loop). Takes `op` over. */
void hv_recrawl_commit(hv_recrawl_t *rc, hv_recrawl_op_t *op);

/** Drop an operation whose record never became durable. */
void hv_recrawl_op_free(hv_recrawl_op_t *op);

void hv_recrawl_stats(hv_recrawl_t *rc, hv_recrawl_stats_t *out);

/**
 * Keep the TLS sessions of `tls` (which must outlive `rc`, or the close of `rc`) in the store,
 * across runs: `rc` becomes the context's hv_tls_ctx_on_miss() and hv_tls_ctx_on_session()
 * callback until hv_recrawl_close().
 *   - A connection to a host:port with no session in memory looks the store up (on the loop,
 *     once per key and run) and imports what it holds, unless it expired or was verified
 *     under other trust settings (hv_tls_ctx_trust()); one that does not import is dropped.
 *   - A handshake that left a session different from the one stored exports it; the
 *     exports go with the next commit (on the threadpool), in a transaction of their own, at
 *     most SESSIONS_KEPT (1,024) per store, the oldest saved replaced.
 *   - A session is kept for its ticket's lifetime (the server's hint), at most 7 days; one
 *     without a ticket for a day.
 * A store that is full or set aside keeps no more sessions (the one set aside looks none up).
 */
void hv_recrawl_use_tls(hv_recrawl_t *rc, hv_tls_ctx_t *tls);

/** TLS sessions imported from the store so far (without reading the store). */
uint64_t hv_recrawl_tls_sessions_loaded(const hv_recrawl_t *rc);

/**
 * Commit what is pending at once, then close the store and free `rc`; `done` runs then, from
 * a callback of the loop (the loop must run). No other call may follow.
 */
void hv_recrawl_close(hv_recrawl_t *rc, void (*done)(void *ud), void *ud);

#endif
