/* recrawl.c: conditional re-fetching over the per-URL store (recrawl.h). */
#include "harvestd/recrawl.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <uthash.h>

#include "harvestd/common.h"
#include "harvestd/log.h"
#include "harvestd/store.h"
#include "harvestd/tls.h"

/* Operations waiting for a commit while one runs. Beyond this (a store far slower than the
 * pages), new ones are dropped and counted: the store is an optimisation, memory a bound. */
#define PENDING_MAX 16384
/* Operations in one transaction: bounds the worker's array and the commit's duration. */
#define COMMIT_MAX 8192
/* A commit waits for this many operations, or this long after the first: every transaction
 * rewrites the pages it touches and syncs, so a few large ones cost less than many small
 * ones (on 20,000 304s the commits took a third of the run: 1.1 s against 0.7 s without
 * them). A crash in the wait only loses entries. */
#define COMMIT_BATCH 1024
#define COMMIT_DELAY_MS 100
/* Title plus fields larger than this are not stored: the entry would cost more than the
 * fetch it saves, and a record near the writer's line limit may be written as a failure. */
#define STORED_TEXT_MAX ((size_t)4 << 20)

/* TLS sessions kept in the store (hv_recrawl_use_tls): at most this many per store, the
 * oldest saved replaced (as many as the in-memory cache of tls.c holds). */
#define SESSIONS_KEPT 1024
/* Sessions exported and waiting for the next commit; more are not stored (a later handshake
 * with the same server saves its session again). */
#define SESSIONS_PENDING_MAX 256
/* Session keys this run looked up or saved, with what it last saved: a bound on memory
 * (emptied when full; a key then only costs one more lookup or save). */
#define SESSIONS_KNOWN_MAX 4096
/* How long a session is offered after it was saved. With a ticket: the lifetime the server
 * gave it, at most HV_STORE_SESSION_MAX_AGE_MS (7 days; that too when it gave none).
 * Without one (resumed from the server's session cache, which servers keep minutes to
 * hours): a day. */
#define SESSION_NO_TICKET_MS ((int64_t)24 * 3600 * 1000)

/* A session exported after a handshake, waiting for a commit. */
typedef struct pending_session_s {
    char *name;
    unsigned char *data;
    size_t len;
    int64_t saved_at_ms;
    int64_t expires_at_ms;
    UT_hash_handle hh;
} pending_session_t;

/* A session key looked up or saved this run, and a fingerprint of the bytes last stored or
 * loaded for it (0: none). */
typedef struct known_session_s {
    char *name;
    uint64_t fp;
    UT_hash_handle hh;
} known_session_t;

struct hv_recrawl_op_s {
    char *key;
    hv_store_entry_t entry;
    int remove;   /* delete the key (the server now says no-store) */
    STAILQ_ENTRY(hv_recrawl_op_s) link;
};

STAILQ_HEAD(op_list_s, hv_recrawl_op_s);

struct hv_recrawl_s {
    uv_loop_t *loop;
    const hv_config_t *cfg;    /* state_dir, state_max_bytes, recrawl_min_age */
    hv_store_t *store;
    int stopped;               /* full or failed: no more commits */
    int failed;                /* an LMDB error: no more lookups either (set_aside) */

    struct op_list_s pending;  /* durable, waiting for the next commit */
    unsigned npending;
    uv_work_t work;
    int busy;                  /* a commit is on the threadpool */
    uv_timer_t timer;          /* the wait for more operations (COMMIT_DELAY_MS) */
    int timer_closed;
    struct op_list_s batch;    /* the commit's operations (the worker reads them) */
    unsigned nbatch;
    int result;                /* the worker's hv_store_write_fitting result */
    hv_store_written_t written; /* ... and what it committed */

    /* TLS sessions (hv_recrawl_use_tls; tls NULL: not kept). Loop only, except `sbatch`,
     * which the worker reads while `busy`. */
    hv_tls_ctx_t *tls;
    uint64_t trust;            /* hv_tls_ctx_trust(tls) */
    unsigned char *sbuf;       /* HV_STORE_SESSION_MAX bytes: an export or a lookup */
    pending_session_t *spending;
    unsigned nspending;
    pending_session_t *sbatch; /* the commit's sessions */
    unsigned nsbatch;
    int sresult;               /* the worker's hv_store_sessions_put result */
    known_session_t *known;
    unsigned nknown;

    int closing;
    void (*done)(void *ud);
    void *done_ud;
    hv_recrawl_stats_t stats;
};

static void op_free(hv_recrawl_op_t *op)
{
    free(op->key);
    hv_store_entry_clear(&op->entry);
    free(op);
}

void hv_recrawl_op_free(hv_recrawl_op_t *op)
{
    if (op != NULL)
        op_free(op);
}

int hv_recrawl_open(uv_loop_t *loop, const hv_config_t *cfg, hv_recrawl_t **out, char *err,
                    size_t errcap)
{
    hv_store_t *st;
    int rc = hv_store_open(cfg->state_dir, cfg->state_max_bytes, &st, err, errcap);
    *out = NULL;
    if (rc != 0)
        return rc;
    hv_recrawl_t *r = hv_xcalloc(1, sizeof(*r));
    r->loop = loop;
    r->cfg = cfg;
    r->store = st;
    STAILQ_INIT(&r->pending);
    STAILQ_INIT(&r->batch);
    uv_timer_init(loop, &r->timer);
    *out = r;
    return 0;
}

/* ---- a store that fails ---- */

/*
 * An LMDB error in a lookup or a commit (a damaged page, an I/O error): the store is set aside
 * for the rest of the run, said once. Nothing more is looked up or stored; every page is
 * fetched as if it had never been seen, and no batch waits on the store or fails for it.
 * The caller counts the failed transaction (commit_errors: a lookup is a read transaction).
 */
static void set_aside(hv_recrawl_t *rc, int err, const char *during)
{
    if (rc->failed)
        return;
    rc->failed = 1;
    rc->stopped = 1;
    HV_LOG(HV_LOG_WARNING,
           "event=state_store_failed dir=%s during=%s error=%s: %s; the store is set aside: no "
           "more lookups, no more entries stored (pages are still fetched); `harvestd state "
           "verify` checks it",
           rc->cfg->state_dir, during, hv_err_name(err), hv_strerror(err));
}

/* ---- lookups (loop) ---- */

static char *dup_or_null(const char *s)
{
    return s != NULL ? hv_xstrdup(s) : NULL;
}

/* The stored content is the record's: what the page said, as it was fetched. */
static void fill_from_entry(hv_recrawl_t *rc, hv_record_t *rec, const hv_store_entry_t *prev)
{
    rec->ok = 1;
    free(rec->title);
    rec->title = dup_or_null(prev->title);
    free(rec->fields);
    rec->fields = dup_or_null(prev->fields);
    free(rec->content_type);
    rec->content_type = dup_or_null(prev->content_type);
    free(rec->charset);
    rec->charset = dup_or_null(prev->charset);
    rec->bytes = prev->bytes;
    rec->modified_at_ms = prev->modified_at_ms;
    if (prev->bytes > 0)
        rc->stats.bytes_avoided += (uint64_t)prev->bytes;
}

int hv_recrawl_prepare(hv_recrawl_t *rc, hv_record_t *rec, const hv_url_t *url,
                       uint64_t rules_fp)
{
    size_t klen = strlen(url->href);
    hv_record_state_t *st = hv_record_state_new(rec, klen <= HV_STORE_KEY_MAX ? url->href : NULL);
    st->rules_fp = rules_fp;
    if (st->key == NULL || rc->failed)
        return HV_RECRAWL_FETCH;
    rc->stats.lookups++;
    hv_store_entry_t *prev = &st->prev;
    int r = hv_store_get(rc->store, st->key, klen, prev);
    if (r != 0 || prev->url == NULL || prev->fetched_at_ms <= 0) {
        if (r != 0 && r != UV_ENOENT) {
            rc->stats.commit_errors++;
            set_aside(rc, r, "lookup");
        }
        hv_store_entry_clear(prev);
        return HV_RECRAWL_FETCH;
    }
    /* Other rules made the stored title and fields: they are not this batch's answer, so
     * the request is unconditional. The body hash still tells whether the page changed. */
    if (prev->rules_fp != rules_fp)
        return HV_RECRAWL_FETCH;
    int64_t age = hv_now_unix_ms() - prev->fetched_at_ms;
    uint64_t min_age = rc->cfg->recrawl_min_age_ms;
    if (min_age > 0 && age >= 0 && (uint64_t)age < min_age) {
        fill_from_entry(rc, rec, prev);
        free(rec->url);
        rec->url = hv_xstrdup(prev->url);
        rec->http_status = prev->http_status;
        /* When the content was fetched, not now: nothing was. */
        rec->fetched_at_ms = prev->fetched_at_ms;
        rec->from_cache = 1;
        rc->stats.from_cache++;
        return HV_RECRAWL_ANSWERED;
    }
    st->conditional = prev->etag != NULL || prev->last_modified != NULL;
    rc->stats.conditional += st->conditional != 0;
    return HV_RECRAWL_FETCH;
}

void hv_recrawl_not_modified(hv_recrawl_t *rc, hv_record_t *rec)
{
    hv_record_state_t *st = rec->state;
    fill_from_entry(rc, rec, &st->prev);
    rec->not_modified = 1;
    /* The content is the stored one: so is its hash. */
    memcpy(st->body_hash, st->prev.body_hash, sizeof(st->body_hash));
    rc->stats.not_modified++;
}

void hv_recrawl_parsed(hv_recrawl_t *rc, hv_record_t *rec)
{
    hv_record_state_t *st = rec->state;
    if (st == NULL || !rec->ok || rec->from_cache || rec->not_modified)
        return;
    if (st->prev.body_hash[0] != '\0' && strcmp(st->prev.body_hash, st->body_hash) == 0) {
        rec->unchanged = 1;
        rec->modified_at_ms = st->prev.modified_at_ms;
        rc->stats.unchanged++;
    } else {
        rec->modified_at_ms = rec->fetched_at_ms;
    }
}

/* ---- what to store (loop) ---- */

hv_recrawl_op_t *hv_recrawl_op_new(hv_recrawl_t *rc, const hv_record_t *rec)
{
    const hv_record_state_t *st = rec->state;
    if (st == NULL || st->key == NULL || !rec->ok || rec->from_cache || rec->url == NULL)
        return NULL;
    size_t text = (rec->title != NULL ? strlen(rec->title) : 0) +
                  (rec->fields != NULL ? strlen(rec->fields) : 0);
    if (st->no_store || text > STORED_TEXT_MAX) {
        rc->stats.not_stored++;
        /* The server asks not to be stored: what an earlier response left goes too. */
        if (!st->no_store || st->prev.url == NULL)
            return NULL;
    }
    hv_recrawl_op_t *op = hv_xcalloc(1, sizeof(*op));
    op->key = hv_xstrdup(st->key);
    hv_store_entry_clear(&op->entry);
    if (st->no_store) {
        op->remove = 1;
        return op;
    }
    hv_store_entry_t *e = &op->entry;
    e->url = hv_xstrdup(rec->url);
    /* A 304 need not repeat the validators; the stored ones still hold then. */
    const char *etag = st->etag, *lm = st->last_modified;
    if (rec->not_modified && etag == NULL)
        etag = st->prev.etag;
    if (rec->not_modified && lm == NULL)
        lm = st->prev.last_modified;
    e->etag = dup_or_null(etag);
    e->last_modified = dup_or_null(lm);
    memcpy(e->body_hash, st->body_hash, sizeof(e->body_hash));
    e->title = dup_or_null(rec->title);
    e->fields = dup_or_null(rec->fields);
    e->content_type = dup_or_null(rec->content_type);
    e->charset = dup_or_null(rec->charset);
    e->bytes = rec->bytes;
    e->http_status = rec->not_modified ? st->prev.http_status : rec->http_status;
    e->max_age_s = st->max_age_s;
    e->rules_fp = st->rules_fp;
    e->fetched_at_ms = rec->fetched_at_ms;
    e->modified_at_ms = rec->modified_at_ms >= 0 ? rec->modified_at_ms : rec->fetched_at_ms;
    return op;
}

/* ---- TLS sessions (loop) ---- */

static void want_commit(hv_recrawl_t *rc);
static void maybe_finish(hv_recrawl_t *rc);

static void pending_session_free(pending_session_t *p)
{
    free(p->name);
    /* The master secret is in there. */
    explicit_bzero(p->data, p->len);
    free(p->data);
    free(p);
}

static void pending_sessions_free(pending_session_t **head, unsigned *n)
{
    pending_session_t *p, *tmp;
    HASH_ITER(hh, *head, p, tmp)
    {
        HASH_DEL(*head, p);
        pending_session_free(p);
    }
    *n = 0;
}

static void known_clear(hv_recrawl_t *rc)
{
    known_session_t *k, *tmp;
    HASH_ITER(hh, rc->known, k, tmp)
    {
        HASH_DEL(rc->known, k);
        free(k->name);
        free(k);
    }
    rc->nknown = 0;
}

/* The known entry of `name`, made (fp 0) when there is none. */
static known_session_t *known_entry(hv_recrawl_t *rc, const char *name)
{
    known_session_t *k;
    HASH_FIND_STR(rc->known, name, k);
    if (k != NULL)
        return k;
    if (rc->nknown >= SESSIONS_KNOWN_MAX)
        known_clear(rc);
    k = hv_xcalloc(1, sizeof(*k));
    k->name = hv_xstrdup(name);
    HASH_ADD_KEYPTR(hh, rc->known, k->name, strlen(k->name), k);
    rc->nknown++;
    return k;
}

/* A connection to `key` starts with no session in memory: the one the store keeps, if any. */
static void on_tls_miss(void *ud, const char *key)
{
    hv_recrawl_t *rc = ud;
    known_session_t *k;
    hv_store_session_t s;
    if (rc->failed)
        return;
    HASH_FIND_STR(rc->known, key, k);
    if (k != NULL)
        return; /* looked up (or saved) already: a miss now is the cache's own eviction */
    k = known_entry(rc, key);
    int r = hv_store_session_get(rc->store, key, hv_now_unix_ms(), rc->sbuf,
                                 HV_STORE_SESSION_MAX, &s);
    if (r == UV_ENOENT)
        return;
    if (r != 0) {
        rc->stats.commit_errors++;
        set_aside(rc, r, "lookup");
        return;
    }
    /* Verified under other settings (--insecure, another CA bundle): resuming it would skip
     * the verification these settings ask for. */
    if (s.trust != rc->trust) {
        HV_LOG(HV_LOG_DEBUG, "event=tls_session_not_loaded key=%s reason=other_trust", key);
        return;
    }
    int imported = hv_tls_session_import(rc->tls, key, s.data, s.len);
    uint64_t fp = hv_store_fingerprint(s.data, s.len);
    explicit_bzero(rc->sbuf, s.len);
    if (imported != 0) {
        /* Damaged, or from another build: dropped; the next handshake's session replaces it. */
        HV_LOG(HV_LOG_DEBUG, "event=tls_session_not_loaded key=%s reason=undecodable", key);
        return;
    }
    k->fp = fp;
    rc->stats.tls_sessions_loaded++;
}

/* A handshake left a session for `key` in the cache: store it with the next commit, unless
 * it is the one stored already (a resumption that did not renew the ticket). */
static void on_tls_session(void *ud, const char *key)
{
    hv_recrawl_t *rc = ud;
    uint32_t lifetime_s = 0;
    pending_session_t *p = NULL;
    known_session_t *k;
    int64_t now, life = SESSION_NO_TICKET_MS;
    uint64_t fp;
    ssize_t n;

    if (rc->stopped || rc->closing)
        return;
    n = hv_tls_session_export(rc->tls, key, rc->sbuf, HV_STORE_SESSION_MAX);
    if (n <= 0)
        return; /* none, or larger than the store takes */
    fp = hv_store_fingerprint(rc->sbuf, (size_t)n);
    k = known_entry(rc, key);
    if (k->fp == fp)
        goto out;
    if (hv_tls_session_ticket(rc->tls, key, &lifetime_s) == 1)
        life = lifetime_s > 0 && (int64_t)lifetime_s * 1000 < HV_STORE_SESSION_MAX_AGE_MS
                   ? (int64_t)lifetime_s * 1000
                   : HV_STORE_SESSION_MAX_AGE_MS;
    HASH_FIND_STR(rc->spending, key, p);
    if (p == NULL) {
        if (rc->nspending >= SESSIONS_PENDING_MAX)
            goto out;
        p = hv_xcalloc(1, sizeof(*p));
        p->name = hv_xstrdup(key);
        HASH_ADD_KEYPTR(hh, rc->spending, p->name, strlen(p->name), p);
        rc->nspending++;
    } else {
        explicit_bzero(p->data, p->len);
        free(p->data);
    }
    now = hv_now_unix_ms();
    p->data = hv_xmalloc((size_t)n);
    memcpy(p->data, rc->sbuf, (size_t)n);
    p->len = (size_t)n;
    p->saved_at_ms = now;
    p->expires_at_ms = now + life;
    k->fp = fp;
    want_commit(rc);
out:
    explicit_bzero(rc->sbuf, (size_t)n);
}

void hv_recrawl_use_tls(hv_recrawl_t *rc, hv_tls_ctx_t *tls)
{
    rc->tls = tls;
    rc->trust = hv_tls_ctx_trust(tls);
    if (rc->sbuf == NULL)
        rc->sbuf = hv_xmalloc(HV_STORE_SESSION_MAX);
    hv_tls_ctx_on_miss(tls, on_tls_miss, rc);
    hv_tls_ctx_on_session(tls, on_tls_session, rc);
}

uint64_t hv_recrawl_tls_sessions_loaded(const hv_recrawl_t *rc)
{
    return rc->stats.tls_sessions_loaded;
}

/* ---- commits (threadpool) ---- */

/* The commit's sessions, in a transaction of their own (after the entries': a full store
 * refuses them first). */
static int commit_sessions(hv_recrawl_t *rc)
{
    hv_store_session_t *ss = hv_xcalloc(rc->nsbatch, sizeof(*ss));
    size_t n = 0;
    pending_session_t *p, *tmp;
    HASH_ITER(hh, rc->sbatch, p, tmp)
    {
        ss[n].name = p->name;
        ss[n].data = p->data;
        ss[n].len = p->len;
        ss[n].saved_at_ms = p->saved_at_ms;
        ss[n].expires_at_ms = p->expires_at_ms;
        ss[n].trust = rc->trust;
        n++;
    }
    int r = hv_store_sessions_put(rc->store, ss, n, hv_now_unix_ms(), SESSIONS_KEPT, NULL);
    free(ss);
    return r;
}

static void commit_work(uv_work_t *w)
{
    hv_recrawl_t *rc = hv_container_of(w, hv_recrawl_t, work);
    memset(&rc->written, 0, sizeof(rc->written));
    rc->result = 0;
    rc->sresult = 0;
    if (rc->nbatch > 0) {
        hv_store_op_t *ops = hv_xmalloc(sizeof(*ops) * rc->nbatch);
        size_t n = 0;
        hv_recrawl_op_t *op;
        STAILQ_FOREACH(op, &rc->batch, link)
        {
            ops[n].key = op->key;
            ops[n].key_len = strlen(op->key);
            ops[n].entry = op->remove ? NULL : &op->entry;
            n++;
        }
        rc->result = hv_store_write_fitting(rc->store, ops, n, &rc->written);
        free(ops);
    }
    if (rc->nsbatch > 0 && rc->result == 0)
        rc->sresult = commit_sessions(rc);
}

static void finish_close(hv_recrawl_t *rc)
{
    void (*done)(void *) = rc->done;
    void *ud = rc->done_ud;
    hv_recrawl_op_t *op;
    while ((op = STAILQ_FIRST(&rc->pending)) != NULL) {
        STAILQ_REMOVE_HEAD(&rc->pending, link);
        op_free(op);
    }
    pending_sessions_free(&rc->spending, &rc->nspending);
    known_clear(rc);
    free(rc->sbuf);
    hv_store_close(rc->store);
    free(rc);
    if (done != NULL)
        done(ud);
}

static void commit_done(uv_work_t *w, int status)
{
    hv_recrawl_t *rc = hv_container_of(w, hv_recrawl_t, work);
    int result = status == 0 ? rc->result : status;
    hv_store_written_t done = rc->written;
    unsigned n = rc->nbatch, nsessions = rc->nsbatch;
    hv_recrawl_op_t *op;
    rc->busy = 0;
    while ((op = STAILQ_FIRST(&rc->batch)) != NULL) {
        STAILQ_REMOVE_HEAD(&rc->batch, link);
        op_free(op);
    }
    rc->nbatch = 0;
    pending_sessions_free(&rc->sbatch, &rc->nsbatch);
    if (status != 0)
        memset(&done, 0, sizeof(done));
    /* What fitted is stored, also from a commit that did not fit whole. */
    rc->stats.commits += done.commits;
    rc->stats.stored += done.written;
    if (result == 0 && nsessions > 0) {
        /* The sessions' transaction: a failure of it is the store's, as an entries' one. */
        result = rc->sresult;
        if (result == 0) {
            rc->stats.commits++;
            rc->stats.tls_sessions_stored += nsessions;
        }
    }
    if (result != 0) {
        unsigned left = n - (unsigned)done.written;
        rc->stats.commit_errors++;
        rc->stats.not_stored += left;
        rc->stopped = 1;
        if (result == UV_ENOSPC && done.disk_full) {
            /* A full disk is a full store: the same figures, its own remedy. */
            rc->stats.full = 1;
            HV_LOG(HV_LOG_WARNING,
                   "event=state_store_full dir=%s cause=no_space_on_device entries_not_stored=%u: "
                   "no space left on the device under it; no more entries are stored (pages "
                   "are still fetched); make room there, or move state_dir",
                   rc->cfg->state_dir, left + rc->npending);
        } else if (result == UV_ENOSPC) {
            rc->stats.full = 1;
            HV_LOG(HV_LOG_WARNING,
                   "event=state_store_full dir=%s state_max_bytes=%" PRIu64
                   " entries_not_stored=%u: no more entries are stored (pages are still "
                   "fetched); prune it (harvestd state prune) or raise state_max_bytes",
                   rc->cfg->state_dir, rc->cfg->state_max_bytes, left + rc->npending);
        } else {
            set_aside(rc, result, "commit");
        }
    }
    want_commit(rc);
    maybe_finish(rc);
}

/* The store is closing and nothing is left in flight: free it. */
static void maybe_finish(hv_recrawl_t *rc)
{
    if (rc->closing && rc->timer_closed && !rc->busy && rc->npending == 0 && rc->nspending == 0)
        finish_close(rc);
}

static void start_commit(hv_recrawl_t *rc)
{
    while (rc->nbatch < COMMIT_MAX && !STAILQ_EMPTY(&rc->pending)) {
        hv_recrawl_op_t *op = STAILQ_FIRST(&rc->pending);
        STAILQ_REMOVE_HEAD(&rc->pending, link);
        rc->npending--;
        STAILQ_INSERT_TAIL(&rc->batch, op, link);
        rc->nbatch++;
    }
    rc->sbatch = rc->spending;
    rc->nsbatch = rc->nspending;
    rc->spending = NULL;
    rc->nspending = 0;
    rc->busy = 1;
    int r = uv_queue_work(rc->loop, &rc->work, commit_work, commit_done);
    if (r != 0) {
        /* Only an invalid argument fails this: our bug. */
        HV_LOG(HV_LOG_ERROR, "event=state_store_failed error=uv_queue_work: %s",
               uv_strerror(r));
        abort();
    }
}

static void on_commit_timer(uv_timer_t *t)
{
    hv_recrawl_t *rc = hv_container_of(t, hv_recrawl_t, timer);
    /* Set aside by a lookup meanwhile: what waited is dropped, not committed. */
    if (rc->stopped)
        want_commit(rc);
    else if (!rc->busy && (rc->npending > 0 || rc->nspending > 0))
        start_commit(rc);
}

/* Something is pending: commit now when enough is (or the store closes), else soon. */
static void want_commit(hv_recrawl_t *rc)
{
    if (rc->stopped) {
        hv_recrawl_op_t *op;
        while ((op = STAILQ_FIRST(&rc->pending)) != NULL) {
            STAILQ_REMOVE_HEAD(&rc->pending, link);
            rc->stats.not_stored++;
            op_free(op);
        }
        rc->npending = 0;
        pending_sessions_free(&rc->spending, &rc->nspending);
    }
    if (rc->busy || (rc->npending == 0 && rc->nspending == 0))
        return;
    if (rc->closing || rc->npending >= COMMIT_BATCH) {
        uv_timer_stop(&rc->timer);
        start_commit(rc);
    } else if (!uv_is_active((uv_handle_t *)&rc->timer)) {
        uv_timer_start(&rc->timer, on_commit_timer, COMMIT_DELAY_MS, 0);
    }
}

void hv_recrawl_commit(hv_recrawl_t *rc, hv_recrawl_op_t *op)
{
    if (rc->stopped || rc->npending >= PENDING_MAX) {
        rc->stats.not_stored++;
        op_free(op);
        return;
    }
    STAILQ_INSERT_TAIL(&rc->pending, op, link);
    rc->npending++;
    want_commit(rc);
}

void hv_recrawl_stats(hv_recrawl_t *rc, hv_recrawl_stats_t *out)
{
    hv_store_stats_t ss;
    *out = rc->stats;
    if (hv_store_stats(rc->store, &ss) == 0) {
        out->entries = ss.entries;
        out->tls_sessions = ss.sessions;
        out->bytes_used = ss.bytes_used;
        out->map_bytes = ss.map_bytes;
    }
}

static void on_timer_closed(uv_handle_t *h)
{
    hv_recrawl_t *rc = hv_container_of((uv_timer_t *)h, hv_recrawl_t, timer);
    rc->timer_closed = 1;
    maybe_finish(rc);
}

void hv_recrawl_close(hv_recrawl_t *rc, void (*done)(void *ud), void *ud)
{
    /* No handshake may reach `rc` from now on; what it exported is committed below. */
    if (rc->tls != NULL) {
        hv_tls_ctx_on_miss(rc->tls, NULL, NULL);
        hv_tls_ctx_on_session(rc->tls, NULL, NULL);
        rc->tls = NULL;
    }
    rc->closing = 1;
    rc->done = done;
    rc->done_ud = ud;
    uv_close((uv_handle_t *)&rc->timer, on_timer_closed);
    want_commit(rc);
}
