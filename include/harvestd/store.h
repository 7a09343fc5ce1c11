/*
 * store.h: what harvestd last saw of each URL, for conditional re-fetching: an LMDB
 * environment in one directory (data.mdb and lock.mdb), memory-mapped, crash-safe, and safe
 * to share between processes (two daemons on one spool share one store).
 *
 * One record per requested URL (the key): the final URL, the validators (ETag,
 * Last-Modified), a hash of the decoded body, what the record said (title, fields,
 * content type, charset, bytes), a fingerprint of the rules that produced them, when it was
 * fetched and when its content last changed (hv_store_entry_t, storeentry.h). Values are small
 * JSON objects.
 *
 * The store is bounded: its map is `max_bytes`; a write that does not fit fails with
 * UV_ENOSPC and changes nothing, and the owner stops storing (the store never fails a batch).
 * A full disk under the store is a full store too: LMDB's ENOSPC, and the EIO it makes of a
 * write cut short when the filesystem is (all but) full, are UV_ENOSPC. Writes go in
 * transactions of many records (hv_store_write), so that a batch of records costs one commit;
 * hv_store_write_fitting() commits what fits when not all does. Calls block (LMDB commits
 * fsync): the owner runs writes off the loop.
 *
 * TLS sessions (tls.h) live in the same store, so that a daily re-crawl resumes them: one per
 * session key ("host:port"), under HV_STORE_SESSION_PREFIX and the key, which no URL key can
 * be (URL keys are normalised absolute http:// or https:// URLs). The value is binary: a
 * header (magic, when it was saved, when it expires, the trust fingerprint of the context
 * that verified the server) and mbedtls's serialisation of the session, which holds its
 * master secret: the store's files are the only place it goes. hv_store_get(), _delete()
 * never reach them; _stats() and _verify() count them apart from the entries (`sessions`);
 * _prune() drops the expired ones and those saved before its limit. The same key prefix in
 * the main database rather than a named one: an older harvestd's prune, verify and stats
 * walk the main database and would meet a named database's record there.
 *
 * Opening checks the data file first (storecheck.h): one cut short, or whose meta pages are
 * wrong, is refused with a message that says how to discard it, instead of crashing the
 * process at its first lookup. Damage inside the pages is found only by hv_store_verify(),
 * which walks every page in a child process.
 */
#ifndef HARVESTD_STORE_H
#define HARVESTD_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "harvestd/storeentry.h"

typedef struct hv_store_s hv_store_t;

/** One write of hv_store_write: put `entry` under `key` (or delete `key` when entry is NULL). */
typedef struct {
    const char *key;
    size_t key_len;
    const hv_store_entry_t *entry;
} hv_store_op_t;

typedef struct {
    uint64_t entries;     /* URL entries (TLS sessions are not counted here) */
    uint64_t sessions;    /* TLS sessions */
    uint64_t bytes_used;  /* pages in use x page size */
    uint64_t map_bytes;   /* the bound */
} hv_store_stats_t;

/** Longest key the store takes (LMDB's limit); longer URLs are not stored. */
#define HV_STORE_KEY_MAX 511

/**
 * Open (creating `dir` and the store when missing) with a bound of `max_bytes`. 0 and *out,
 * or an error with a message naming the path in `err`: a store that is not an LMDB
 * environment, is corrupt or that the checks of storecheck.h refuse ("is damaged (...)")
 * says how to discard it.
 */
int hv_store_open(const char *dir, uint64_t max_bytes, hv_store_t **out, char *err,
                  size_t errcap);

/**
 * Open the store in `dir` only if there is one: 0 and *out, UV_ENOENT when there is none (no
 * directory, no data.mdb, or an empty one, which LMDB would make a new store of), or another
 * error (the directory or data.mdb cannot be read, or hv_store_open() failed), with a
 * message naming the path in `err` ("no state store at DIR..." for UV_ENOENT). Nothing is
 * created. The map is the next whole GiB above data.mdb's size, at least 1 GiB: never below
 * what the store holds (LMDB persists only increases of the map size, so the daemon's own
 * bound is not lowered either), with room for the pages a delete copies.
 */
int hv_store_open_existing(const char *dir, hv_store_t **out, char *err, size_t errcap);

/** The entry of `key` into *out (free with hv_store_entry_clear): 0, UV_ENOENT, or an error. */
int hv_store_get(hv_store_t *st, const char *key, size_t key_len, hv_store_entry_t *out);

/**
 * Apply `ops` in one transaction: 0, UV_ENOSPC (the bound, or no room left on the disk:
 * nothing written), or an error.
 */
int hv_store_write(hv_store_t *st, const hv_store_op_t *ops, size_t n);

/** What hv_store_write_fitting() wrote. */
typedef struct {
    size_t written; /* ops committed: the first `written` of them */
    size_t commits; /* transactions committed */
    int disk_full;  /* with UV_ENOSPC: the disk under the store is full, not the map */
} hv_store_written_t;

/**
 * Apply `ops` in order, committing as many as fit: in one transaction when they all fit in
 * the map, else in smaller ones (the rest halved at each refusal) until one op alone does not.
 * 0 when all are committed; UV_ENOSPC when the bound or the disk stopped it (out->disk_full
 * says which); or another error. In every case out->written ops, from the first, are
 * committed, and the others not.
 */
int hv_store_write_fitting(hv_store_t *st, const hv_store_op_t *ops, size_t n,
                           hv_store_written_t *out);

/**
 * Delete the entry of `key` in a transaction of its own: 0 when there was one, UV_ENOENT when
 * there was none (also for an empty or overlong key), or an error. Unlike a NULL-entry op of
 * hv_store_write, it tells whether something was deleted; an entry whose value does not
 * decode (which hv_store_get reports as UV_ENOENT) is deleted and counts as one.
 */
int hv_store_delete(hv_store_t *st, const char *key, size_t key_len);

/** Delete entries fetched before `before_unix_ms`; *removed counts them. TLS sessions saved
 *  before then, expired or undecodable go too, uncounted. 0 or an error. */
int hv_store_prune(hv_store_t *st, int64_t before_unix_ms, uint64_t *removed);

int hv_store_stats(hv_store_t *st, hv_store_stats_t *out);

/**
 * The entry of `key` as people see it (`harvestd state get`): one JSON object text, "url_key"
 * first, then the fields that are present, in the order above: url, etag, last_modified,
 * body_hash, title, fields (the object itself), content_type, charset, bytes, http_status,
 * max_age, rules (16 hex digits), fetched_at and modified_at (RFC 3339 UTC with
 * milliseconds). Always valid JSON in UTF-8: text stored as the server sent it (an ETag in
 * Latin-1) is shown with U+FFFD for what is not UTF-8, as records do. Free with free().
 * Aborts on OOM, like hv_xmalloc().
 */
char *hv_store_entry_show(const char *key, const hv_store_entry_t *e);

void hv_store_close(hv_store_t *st);

/** What hv_store_verify() found. */
typedef struct {
    int sound;            /* 1: every page was read, and the pages add up */
    char what[512];       /* else what is wrong, for people */
    int signal;           /* the walk was killed by this signal (SIGBUS, SIGABRT...); 0 if not */
    uint64_t entries;     /* entries walked (as far as the walk went), TLS sessions apart */
    uint64_t undecodable; /* of which not an entry (they read as absent) */
    uint64_t sessions;    /* TLS sessions walked (those that do not decode included) */
    uint64_t pages;       /* pages in use, the two meta pages included */
    uint64_t free_pages;  /* of which on the free-page list */
} hv_store_verify_t;

/**
 * Read every page of the store in `dir`, which must exist (as for hv_store_open_existing();
 * daemons may be using it). First the checks every open makes (storecheck.h); then, in a
 * child process that opens the store read-only, a cursor over every entry and every record of
 * the free-page list, reading each value whole, and the count of pages: those of both trees
 * and the free ones must make up every page in use. A page past the end of the file (SIGBUS)
 * or an LMDB assertion (SIGABRT) kills the child only, and is reported. 0 with the finding in
 * *out, or an error with a message in `err` (UV_ENOENT: no store there; LMDB will not open
 * it, e.g. its lock file cannot be used; the fork failed).
 * Blocks until the walk is over: it reads the whole file.
 */
int hv_store_verify(const char *dir, hv_store_verify_t *out, char *err, size_t errcap);

/* ---- TLS sessions ---- */

/** The key of a TLS session is this prefix and its session key ("host:port"). */
#define HV_STORE_SESSION_PREFIX "tls-session "
/** The largest session (mbedtls's serialisation: the server's certificate, a ticket) stored. */
#define HV_STORE_SESSION_MAX 8192
/** No session is kept longer than this after it was saved (7 days: also TLS 1.3's cap on a
 *  ticket's lifetime, RFC 8446 4.6.1); hv_store_sessions_put() refuses a longer expiry. */
#define HV_STORE_SESSION_MAX_AGE_MS ((int64_t)7 * 24 * 3600 * 1000)

/** One TLS session as the store keeps it. */
typedef struct {
    const char *name;            /* the session key, "host:port" */
    const unsigned char *data;   /* mbedtls's serialisation (opaque here) */
    size_t len;                  /* 1 .. HV_STORE_SESSION_MAX */
    int64_t saved_at_ms;         /* Unix ms */
    int64_t expires_at_ms;       /* not offered from then on; at most saved_at + MAX_AGE */
    uint64_t trust;              /* hv_tls_ctx_trust() of the context that made it */
} hv_store_session_t;

/**
 * The session of `name`, unless it expired at `now_ms`: 0 with *out filled, its bytes copied
 * into `buf` (`cap` bytes, at least HV_STORE_SESSION_MAX) and out->name = name; UV_ENOENT
 * when there is none, it expired, or the value is no session of this format (damaged,
 * foreign: the caller fetches as if there were none); or an LMDB error. A lookup in the
 * memory map: fine on the loop.
 */
int hv_store_session_get(hv_store_t *st, const char *name, int64_t now_ms, unsigned char *buf,
                         size_t cap, hv_store_session_t *out);

/**
 * Put `n` sessions (replacing those of the same names) in one transaction, which then drops
 * every expired or undecodable session and, when more than `keep_max` remain, the oldest
 * saved: 0 (*dropped counts what went, when not NULL), UV_ENOSPC (nothing written), or an
 * error. A session with an empty or overlong name, no bytes or more than
 * HV_STORE_SESSION_MAX, or an expiry past saved_at + HV_STORE_SESSION_MAX_AGE_MS is skipped.
 * Blocks (a commit): off the loop.
 */
int hv_store_sessions_put(hv_store_t *st, const hv_store_session_t *s, size_t n, int64_t now_ms,
                          size_t keep_max, uint64_t *dropped);

/** A fingerprint (64-bit FNV-1a) of `len` bytes, e.g. of the rules' canonical text. */
uint64_t hv_store_fingerprint(const void *data, size_t len);

#endif
