/*
 * dns.c: shared, bounded, TTL cache of getaddrinfo answers.
 *
 * Entry lifetime: an entry is referenced by the cache table (while listed), by its
 * getaddrinfo request (while resolving) and by every caller holding its addresses. It is
 * freed when all three are gone.
 */
#include "harvestd/dns.h"

#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "harvestd/common.h"
#include "harvestd/log.h"

/* Failures are remembered briefly: long enough that a burst of URLs to a dead host costs one
 * lookup, short enough that a flapping resolver recovers quickly. */
#define NEGATIVE_TTL_MS 2000

typedef enum { ST_RESOLVING, ST_DONE } entry_state_t;

struct hv_dns_entry_s {
    hv_dns_t *dns;
    char *host;
    entry_state_t state;
    int status;                 /* 0 or UV_EAI_* when ST_DONE */
    struct addrinfo *res;
    uint64_t expires_ms;
    unsigned refs;
    int listed;                 /* in the hash table and the LRU list */
    uv_getaddrinfo_t req;
    TAILQ_HEAD(, hv_dns_waiter_s) waiters;
    TAILQ_ENTRY(hv_dns_entry_s) lru;
    UT_hash_handle hh;
};

struct hv_dns_s {
    uv_loop_t *loop;
    uint64_t ttl_ms;
    unsigned max_entries;
    unsigned count;             /* listed entries */
    unsigned live;              /* allocated entries, listed or not */
    unsigned resolving;
    int closing;
    int in_close;               /* hv_dns_close is walking the table: do not free yet */
    hv_dns_entry_t *table;
    TAILQ_HEAD(, hv_dns_entry_s) lru;
    hv_dns_stats_t stats;
};

hv_dns_t *hv_dns_new(uv_loop_t *loop, uint64_t ttl_ms, unsigned max_entries)
{
    hv_dns_t *dns = hv_xcalloc(1, sizeof(*dns));
    dns->loop = loop;
    dns->ttl_ms = ttl_ms;
    dns->max_entries = max_entries;
    TAILQ_INIT(&dns->lru);
    return dns;
}

static void maybe_free_dns(hv_dns_t *dns)
{
    if (dns->closing && !dns->in_close && dns->live == 0)
        free(dns);
}

static void entry_free(hv_dns_entry_t *e)
{
    if (e->res != NULL)
        uv_freeaddrinfo(e->res);
    free(e->host);
    free(e);
}

static void unlist(hv_dns_entry_t *e)
{
    hv_dns_t *dns = e->dns;
    if (!e->listed)
        return;
    HASH_DEL(dns->table, e);
    TAILQ_REMOVE(&dns->lru, e, lru);
    e->listed = 0;
    dns->count--;
    hv_dns_unref(e);
}

void hv_dns_unref(hv_dns_entry_t *e)
{
    if (--e->refs == 0) {
        hv_dns_t *dns = e->dns;
        entry_free(e);
        dns->live--;
        maybe_free_dns(dns);
    }
}

/* Drop expired and surplus entries that nobody uses, oldest first. */
static void evict(hv_dns_t *dns, uint64_t now)
{
    hv_dns_entry_t *e, *next;
    for (e = TAILQ_FIRST(&dns->lru); e != NULL; e = next) {
        next = TAILQ_NEXT(e, lru);
        if (e->state != ST_DONE)
            continue;
        if (e->expires_ms <= now || dns->count > dns->max_entries)
            unlist(e);
    }
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    hv_dns_entry_t *e = hv_container_of(req, hv_dns_entry_t, req);
    hv_dns_t *dns = e->dns;
    uint64_t now = uv_now(dns->loop);

    dns->resolving--;
    e->state = ST_DONE;
    e->status = status;
    e->res = res;
    if (status == 0 && res == NULL)
        e->status = UV_EAI_NODATA;
    e->expires_ms = now + (e->status == 0 ? dns->ttl_ms : NEGATIVE_TTL_MS);
    HV_LOG(HV_LOG_DEBUG, "event=dns_resolved host=%s status=%s", e->host,
           e->status ? uv_err_name(e->status) : "ok");

    /* Each waiter gets its own reference; the callback may start a connect at once. Hold a
     * reference across the loop so a waiter's unref cannot free the entry under us. */
    e->refs++;
    hv_dns_waiter_t *w;
    while ((w = TAILQ_FIRST(&e->waiters)) != NULL) {
        TAILQ_REMOVE(&e->waiters, w, _link);
        w->_pending = NULL;
        if (e->status == 0) {
            e->refs++;
            w->cb(w, e, 0);
        } else {
            w->cb(w, NULL, e->status);
        }
    }
    if (dns->closing || e->status == UV_EAI_CANCELED)
        unlist(e);
    hv_dns_unref(e); /* the loop's reference */
    hv_dns_unref(e); /* the request's reference */
}

int hv_dns_lookup(hv_dns_t *dns, const char *host, hv_dns_waiter_t *w, hv_dns_entry_t **out)
{
    uint64_t now = uv_now(dns->loop);
    hv_dns_entry_t *e;

    HASH_FIND_STR(dns->table, host, e);
    if (e != NULL && e->state == ST_DONE && e->expires_ms <= now) {
        unlist(e);
        e = NULL;
    }
    if (e != NULL) {
        dns->stats.hits++;
        TAILQ_REMOVE(&dns->lru, e, lru);
        TAILQ_INSERT_TAIL(&dns->lru, e, lru);
        if (e->state == ST_DONE) {
            if (e->status != 0)
                return e->status;
            e->refs++;
            *out = e;
            return 1;
        }
        w->_pending = e;
        TAILQ_INSERT_TAIL(&e->waiters, w, _link);
        return 0;
    }

    if (dns->count >= dns->max_entries)
        evict(dns, now);

    e = hv_xcalloc(1, sizeof(*e));
    dns->live++;
    e->dns = dns;
    e->host = hv_xstrdup(host);
    e->state = ST_RESOLVING;
    e->refs = 2; /* table + request */
    e->listed = 1;
    TAILQ_INIT(&e->waiters);
    HASH_ADD_KEYPTR(hh, dns->table, e->host, strlen(e->host), e);
    TAILQ_INSERT_TAIL(&dns->lru, e, lru);
    dns->count++;

    struct addrinfo hints;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_protocol = IPPROTO_TCP;
    int rc = uv_getaddrinfo(dns->loop, &e->req, on_resolved, e->host, NULL, &hints);
    if (rc != 0) {
        e->refs--; /* no request */
        e->state = ST_DONE;
        e->status = rc;
        e->expires_ms = now + NEGATIVE_TTL_MS;
        return rc;
    }
    dns->resolving++;
    dns->stats.lookups++;
    w->_pending = e;
    TAILQ_INSERT_TAIL(&e->waiters, w, _link);
    return 0;
}

void hv_dns_cancel(hv_dns_waiter_t *w)
{
    hv_dns_entry_t *e = w->_pending;
    if (e == NULL)
        return;
    TAILQ_REMOVE(&e->waiters, w, _link);
    w->_pending = NULL;
}

const struct sockaddr *hv_dns_entry_addr(const hv_dns_entry_t *e, unsigned idx)
{
    const struct addrinfo *ai = e->res;
    for (unsigned i = 0; ai != NULL; ai = ai->ai_next) {
        if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6)
            continue;
        if (i++ == idx)
            return ai->ai_addr;
    }
    return NULL;
}

const hv_dns_stats_t *hv_dns_stats(const hv_dns_t *dns)
{
    return &dns->stats;
}

void hv_dns_close(hv_dns_t *dns)
{
    hv_dns_entry_t *e, *next;
    dns->closing = 1;
    dns->in_close = 1;
    for (e = TAILQ_FIRST(&dns->lru); e != NULL; e = next) {
        next = TAILQ_NEXT(e, lru);
        if (e->state == ST_RESOLVING)
            uv_cancel((uv_req_t *)&e->req); /* best effort; on_resolved unlists it */
        else
            unlist(e);
    }
    dns->in_close = 0;
    maybe_free_dns(dns);
}
