/*
 * fetch.c: one request per dispatched job, over pooled connections.
 *
 * Request states: CONNECTING (lookup + connect, connect timeout) -> WAITING (request sent,
 * read timeout until the first byte) -> RECEIVING (read timeout re-armed on every read) ->
 * ended (page, failure, redirect or cancel). A request ends exactly once, in end_req(), which
 * unlinks it from the active list and frees it; callers must not touch it afterwards.
 *
 * Connection ownership moves with the request: while a request runs, its connection's
 * callbacks point at the request; when the response allows reuse the connection moves to its
 * host's idle pool (callbacks point at its entry there, an idle_t), otherwise it is closed at
 * once (hv_conn_set_owner() makes each move; the pool's lists are fetch's own, in idle_t). The
 * pool is keyed like the scheduler's hosts ("scheme://host:port" of the job's URL), and
 * outlives them.
 *
 * fetch never calls the scheduler: a request that ends sets job->end and hands the job to
 * on_end, which only records it; the engine's pass releases the slot and decides what comes
 * next (the page queue, a retry, the next redirect hop).
 */
#include "harvestd/fetch.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <uthash.h>
#include <xxhash.h>

#include "harvestd/common.h"
#include "harvestd/cf_connect.h"
#include "harvestd/cf_socks.h"
#include "harvestd/cf_tls.h"
#include "harvestd/conn.h"
#include "harvestd/h2.h"
#include "harvestd/http.h"
#include "harvestd/log.h"

/* Largest redirect or error body we read just to keep the connection reusable. */
#define MAX_DRAIN (64 * 1024)

/* Room for a pool key: scheme, host and port of a URL. */
#define POOL_KEY_MAX (HV_PROXY_SHOWN_MAX + HV_URL_MAX + 32)

/* QUEUED: waiting for room under its proxy's connection cap, or for an HTTP/2 connection
 * (no connection yet). */
typedef enum { RQ_CONNECTING, RQ_WAITING, RQ_RECEIVING, RQ_QUEUED } rq_state_t;

static const char *const rq_state_names[] = {"connecting", "waiting", "receiving", "queued"};

/* An idle keep-alive connection, the owner of its callbacks while it waits in the pool. */
typedef struct idle_s {
    hv_fetch_t *f;
    hv_conn_t *conn;
    struct pool_host_s *ph;
    hv_proxy_stats_t *ps;          /* the proxy it goes through (NULL: direct) */
    TAILQ_ENTRY(idle_s) host_link; /* in its host's list */
    TAILQ_ENTRY(idle_s) lru_link;  /* in the pool's, oldest first */
} idle_t;

/* One host's idle keep-alive connections, newest first. */
typedef struct pool_host_s {
    char *key;
    TAILQ_HEAD(, idle_s) idle;
    unsigned nidle;
    UT_hash_handle hh;
} pool_host_t;

/* Requests resent or released are started again from the loop, never inside the callback
 * that let them go: at most this many per turn before the others wait for the next. */

/* What fetch knows of one origin's protocol, keyed like the pool. */
typedef struct origin_s {
    char *key;
    int h1_only;               /* it answered HTTP_1_1_REQUIRED: TLS offers http/1.1 alone */
    int h1_known;              /* its last new connection chose http/1.1: no waiting for it */
    TAILQ_HEAD(, h2c_s) conns; /* HTTP/2 connections, open or opening */
    unsigned nconns;
    TAILQ_ENTRY(origin_s) lru;
    UT_hash_handle hh;
} origin_t;

/* An HTTP/2 connection of an origin: while opening, owned by the request that opened it
 * (`opener`); open, a session (h2.h) that the origin's requests share as streams. */
typedef struct h2c_s {
    hv_fetch_t *f;
    origin_t *o;
    struct hv_req_s *opener;   /* opening: its request (NULL once open) */
    hv_h2_t *h2;               /* open: the session */
    hv_proxy_stats_t *ps;      /* the proxy it goes through (NULL: direct) */
    int no_new;                /* a stream was refused on it: new ones go elsewhere */
    int idle;                  /* no stream open: in the fetch's idle list */
    TAILQ_ENTRY(h2c_s) idle_link;
    TAILQ_HEAD(, hv_req_s) pending; /* requests waiting for a stream on it */
    unsigned npending;
    TAILQ_ENTRY(h2c_s) link;   /* in its origin's list */
    TAILQ_ENTRY(h2c_s) all;    /* in the fetch's */
} h2c_t;

typedef struct hv_req_s {
    hv_fetch_t *f;
    hv_job_t *job;
    hv_conn_t *conn;
    const hv_proxy_t *proxy;   /* this hop's (config's), NULL: direct */
    hv_proxy_stats_t *ps;      /* ... and its figures */
    int reused;
    int queued;                /* in the fetch's waiting list (RQ_QUEUED) */
    TAILQ_ENTRY(hv_req_s) wait_link;
    rq_state_t state;
    int timer_total;           /* the armed timer is the job's total deadline */
    int http_ready;
    hv_http_t http;
    int is_redirect;           /* decided at the head: follow Location once complete */
    int conditional;           /* the request carried the stored validators */
    int not_modified;          /* ... and the answer was 304 */
    hv_error_type_t fail_type; /* decided at the head: fail once complete (or at abort) */
    hv_fault_t fail;
    TAILQ_ENTRY(hv_req_s) link;
    /* HTTP/2 */
    h2c_t *h2c;                /* the connection it has a stream on, or waits for */
    int32_t sid;               /* its stream (0: none) */
    int pending;               /* in h2c->pending */
    int ready;                 /* in the fetch's ready list: starts again on the next turn */
    int no_h2_wait;            /* opens a connection of its own rather than wait for one */
    unsigned resends;          /* streams of this hop the server did not process */
    TAILQ_ENTRY(hv_req_s) pend_link;
} hv_req_t;

struct hv_fetch_s {
    uv_loop_t *loop;
    const hv_config_t *cfg;
    hv_conn_env_t conn_env;
    hv_guard_t guard;
    int guard_hinted;          /* the notice on how to allow a range was logged */
    hv_tls_ctx_t *tls;
    hv_tlspool_t *tlspool;     /* handshakes' crypto workers (NULL: on the loop) */
    hv_fetch_end_cb on_end;
    void *ud;
    hv_http_limits_t limits;
    hv_http_limits_t robots_limits;
    TAILQ_HEAD(, hv_req_s) active;
    unsigned nactive;
    pool_host_t *pools;
    TAILQ_HEAD(, idle_s) idle_lru;
    unsigned nidle;
    unsigned max_idle;
    int paused;
    uint64_t paused_at;
    uint64_t rotation;         /* proxy_rotation = request: the next pick */
    hv_proxy_stats_t *proxies; /* every configured proxy URL once */
    unsigned nproxies;
    TAILQ_HEAD(, hv_req_s) waiting; /* requests queued under a proxy's cap, oldest first */
    uv_timer_t wait_timer;     /* wakes them: room made, or the first deadline */
    origin_t *origins;         /* HTTP/2 knowledge per origin */
    TAILQ_HEAD(, origin_s) origin_lru;
    unsigned norigins;
    TAILQ_HEAD(, h2c_s) h2cs;  /* every HTTP/2 connection */
    TAILQ_HEAD(, h2c_s) h2_idle; /* ... those without a stream, oldest first */
    unsigned nh2_idle;
    TAILQ_HEAD(req_list, hv_req_s) ready; /* requests to start again on the next turn */
    uv_timer_t ready_timer;
    uv_timer_t pend_timer;     /* the first deadline of the requests waiting for HTTP/2 */
    hv_h2_settings_t h2set;
    int closing;               /* timers still to close in hv_fetch_free() */
    hv_fetch_stats_t stats;
};

static void req_on_connect(hv_conn_t *c, int status);
static void req_on_read(hv_conn_t *c, const char *data, size_t len);
static int req_in_space(hv_conn_t *c, char **base, size_t *len);
static void req_on_error(hv_conn_t *c, int err);
static void req_on_timeout(hv_conn_t *c);
static void idle_on_connect(hv_conn_t *c, int status);
static void idle_on_read(hv_conn_t *c, const char *data, size_t len);
static void idle_on_error(hv_conn_t *c, int err);
static void idle_on_timeout(hv_conn_t *c);

static hv_proxy_stats_t *proxy_stats(hv_fetch_t *f, const hv_proxy_t *p);
static void proxy_outcome(hv_req_t *r, int failed);
static void conn_closed(hv_fetch_t *f, hv_proxy_stats_t *ps);
static int connect_req(hv_req_t *r, int allow_pool);
static void on_wait_timer(uv_timer_t *t);
static void h2_release_pending(h2c_t *hc);
static void h2c_close(h2c_t *hc);
static void h2c_free(h2c_t *hc);
static void make_ready(hv_req_t *r);
static void on_ready_timer(uv_timer_t *t);
static void on_pend_timer(uv_timer_t *t);
static void req_timeout(hv_req_t *r, hv_conn_t *c);

/* How a request may go over HTTP/2: not, over TLS (ALPN), or by prior knowledge (h2c). */
enum { H2_NO = 0, H2_TLS = 1, H2_PRIOR = 2 };
static int h2_eligible(const hv_fetch_t *f, const hv_req_t *r);
static origin_t *origin_get(hv_fetch_t *f, const char *key);
static int h2_attach(hv_req_t *r, origin_t *o);
static h2c_t *h2c_new(hv_fetch_t *f, origin_t *o, hv_req_t *opener);
static void h2_start_session(hv_req_t *r, h2c_t *hc, hv_conn_t *c);

static const hv_conn_cbs_t req_cbs = {req_on_connect, req_on_read, req_on_error, req_on_timeout};
static const hv_conn_cbs_t idle_cbs = {idle_on_connect, idle_on_read, idle_on_error,
                                       idle_on_timeout};

hv_fetch_t *hv_fetch_new(uv_loop_t *loop, const hv_config_t *cfg, hv_dns_t *dns,
                         hv_tls_ctx_t *tls, hv_fetch_end_cb on_end, void *ud)
{
    hv_fetch_t *f = hv_xcalloc(1, sizeof(*f));
    f->tls = tls;
    f->loop = loop;
    if (tls != NULL)
        f->tlspool = hv_tlspool_new(loop, tls, cfg->tls_workers > 0
                                                   ? cfg->tls_workers
                                                   : (unsigned)uv_available_parallelism());
    f->cfg = cfg;
    f->guard.off = cfg->allow_private_addresses;
    f->guard.allow = &cfg->allow_addresses;
    f->conn_env.loop = loop;
    f->conn_env.dns = dns;
    f->conn_env.guard = &f->guard;
    f->conn_env.stats = &f->stats.conn;
    f->on_end = on_end;
    f->ud = ud;
    f->limits.max_body = cfg->max_bytes;
    f->limits.max_header_bytes = cfg->max_header_bytes;
    f->limits.max_drain = MAX_DRAIN;
    f->robots_limits = f->limits;
    f->robots_limits.max_body = cfg->robots_max_bytes;
    /* RFC 9309: parse at least the first 500 KiB and ignore the rest. */
    f->robots_limits.truncate = 1;
    /* Enough idle connections to serve a full set of requests again without reconnecting. */
    f->max_idle = cfg->concurrency;
    for (unsigned r = 0; r <= cfg->nhost_rules; r++) {
        const hv_proxy_list_t *l = r < cfg->nhost_rules ? &cfg->host_rules[r].proxy : &cfg->proxy;
        for (unsigned i = 0; i < l->count; i++) {
            const hv_proxy_t *p = &l->proxy[i];
            if (p->kind == HV_PROXY_SOCKS5H)
                HV_LOG(HV_LOG_NOTICE, "event=proxy_remote_dns proxy=%s note=\"the proxy "
                       "resolves the targets' names: the address guard sees only the proxy\"",
                       p->shown);
            if (proxy_stats(f, p) != NULL)
                continue;
            f->proxies = hv_xrealloc(f->proxies, (f->nproxies + 1) * sizeof(*f->proxies));
            memset(&f->proxies[f->nproxies], 0, sizeof(f->proxies[0]));
            snprintf(f->proxies[f->nproxies].proxy, sizeof(f->proxies[0].proxy), "%s",
                     p->shown);
            f->nproxies++;
        }
    }
    f->stats.proxies = f->proxies;
    f->stats.nproxies = f->nproxies;
    TAILQ_INIT(&f->active);
    TAILQ_INIT(&f->idle_lru);
    TAILQ_INIT(&f->waiting);
    uv_timer_init(loop, &f->wait_timer);
    f->wait_timer.data = f;
    TAILQ_INIT(&f->origin_lru);
    TAILQ_INIT(&f->h2cs);
    TAILQ_INIT(&f->h2_idle);
    TAILQ_INIT(&f->ready);
    uv_timer_init(loop, &f->ready_timer);
    f->ready_timer.data = f;
    uv_timer_init(loop, &f->pend_timer);
    f->pend_timer.data = f;
    f->h2set.max_streams = cfg->per_host;
    for (unsigned i = 0; i < cfg->nhost_rules; i++)
        if (cfg->host_rules[i].per_host_set)
            f->h2set.max_streams = HV_MAX(f->h2set.max_streams, cfg->host_rules[i].per_host);
    f->h2set.stream_window = (uint32_t)cfg->http2_window;
    f->h2set.max_header_list = (uint32_t)HV_MIN(cfg->max_header_bytes, (uint64_t)UINT32_MAX);
    f->h2set.idle_ms = cfg->keepalive_timeout_ms;
    return f;
}

static void set_state(hv_req_t *r, rq_state_t st)
{
    HV_LOG(HV_LOG_DEBUG, "event=request_state job=%" PRIu64 " from=%s to=%s", r->job->id,
           rq_state_names[r->state], rq_state_names[st]);
    r->state = st;
}

/* ---- the idle pool ---- */

/* The pool a connection to `u` through `proxy` (NULL: direct) belongs to: "scheme://host:port",
 * after "PROXY " when there is one, into `out`. */
static const char *pool_key(const hv_url_t *u, const hv_proxy_t *proxy, char *out, size_t cap)
{
    size_t n = proxy != NULL ? (size_t)snprintf(out, cap, "%s ", proxy->shown) : 0;
    hv_url_origin(u, out + HV_MIN(n, cap - 1), cap - HV_MIN(n, cap - 1));
    return out;
}

/* The figures of `p` (NULL before hv_fetch_new() has listed it). */
static hv_proxy_stats_t *proxy_stats(hv_fetch_t *f, const hv_proxy_t *p)
{
    for (unsigned i = 0; i < f->nproxies; i++)
        if (strcmp(f->proxies[i].proxy, p->shown) == 0)
            return &f->proxies[i];
    return NULL;
}

/* Consecutive failures of a proxy before it is set aside, and its first pause (doubling up to
 * the longest). */
#define PROXY_FAILURES_ASIDE 3
#define PROXY_ASIDE_MS 1000
#define PROXY_ASIDE_MAX_MS 60000
/* Pooled connections to a proxy found closed, none of them ever answered on, before its
 * connections are no longer pooled. */
#define PROXY_STALE_NO_REUSE 3

/* The proxy for a request to `u` on attempt `attempts` (NULL: direct). With proxy_rotation =
 * host, a host keeps one proxy (a hash of its key), so that its connections are reused; a
 * retry moves to the next one, so that a proxy that failed is not asked again at once. With
 * request, the proxies take turns. A proxy set aside after repeated failures is passed over
 * while another of the list is not. */
static const hv_proxy_t *choose_proxy(hv_fetch_t *f, const hv_url_t *u, unsigned attempts)
{
    if (f->nproxies == 0) /* none configured anywhere: no lookup per request */
        return NULL;
    const hv_proxy_list_t *l = hv_config_host_proxies(f->cfg, u->host, u->host_is_ip);
    if (l == NULL)
        return NULL;
    uint64_t pick;
    if (f->cfg->proxy_rotation == HV_ROTATE_REQUEST) {
        pick = f->rotation++;
    } else {
        char key[POOL_KEY_MAX];
        hv_url_origin(u, key, sizeof(key));
        pick = XXH3_64bits(key, strlen(key)) + (attempts > 0 ? attempts - 1 : 0);
    }
    uint64_t now = uv_now(f->loop);
    for (unsigned k = 0; k < l->count; k++) {
        const hv_proxy_t *p = &l->proxy[(pick + k) % l->count];
        const hv_proxy_stats_t *ps = proxy_stats(f, p);
        if (ps == NULL || ps->aside_until <= now)
            return p;
    }
    return &l->proxy[pick % l->count]; /* all set aside: the chosen one all the same */
}

/* Whether an http URL goes to HTTP proxy `p` through a tunnel rather than in absolute form:
 * when the proxy keeps no connection alive to its clients, a tunnel is kept alive as long as
 * the origin keeps it. */
static int http_tunnel(const hv_proxy_stats_t *ps)
{
    return ps != NULL && ps->tunnel_http && !ps->no_tunnel_http;
}

/* How the attempt went at the proxy: a failure there, or an answer through it. */
static void proxy_outcome(hv_req_t *r, int failed)
{
    hv_proxy_stats_t *ps = r->ps;
    if (ps == NULL)
        return;
    if (!failed) {
        ps->streak = 0;
        ps->aside_until = 0;
        return;
    }
    ps->failures++;
    if (++ps->streak < PROXY_FAILURES_ASIDE)
        return;
    unsigned doublings = HV_MIN(ps->streak - PROXY_FAILURES_ASIDE, 16u);
    uint64_t pause = HV_MIN((uint64_t)PROXY_ASIDE_MS << doublings, (uint64_t)PROXY_ASIDE_MAX_MS);
    ps->aside_until = uv_now(r->f->loop) + pause;
    HV_LOG(HV_LOG_WARNING, "event=proxy_set_aside proxy=%s failures=%u pause_ms=%" PRIu64,
           ps->proxy, ps->streak, pause);
}

/* Take `i` out of the pool and free it; returns its connection (and its proxy's figures in
 * `ps`). */
static hv_conn_t *pool_remove(hv_fetch_t *f, idle_t *i, hv_proxy_stats_t **ps)
{
    pool_host_t *ph = i->ph;
    hv_conn_t *c = i->conn;
    *ps = i->ps;
    TAILQ_REMOVE(&ph->idle, i, host_link);
    TAILQ_REMOVE(&f->idle_lru, i, lru_link);
    f->nidle--;
    free(i);
    if (--ph->nidle == 0) {
        HASH_DEL(f->pools, ph);
        free(ph->key);
        free(ph);
    }
    return c;
}

static void pool_drop(hv_fetch_t *f, idle_t *i)
{
    hv_proxy_stats_t *ps;
    hv_conn_close(pool_remove(f, i, &ps));
    conn_closed(f, ps);
}

static pool_host_t *pool_find(hv_fetch_t *f, const char *key)
{
    pool_host_t *ph;
    HASH_FIND_STR(f->pools, key, ph);
    return ph;
}

static void pool_put(hv_fetch_t *f, hv_conn_t *c, const char *key, hv_proxy_stats_t *ps)
{
    pool_host_t *ph = pool_find(f, key);
    if (ph != NULL && ph->nidle >= f->cfg->per_host) {
        hv_conn_close(c);
        conn_closed(f, ps);
        return;
    }
    if (ph == NULL) {
        ph = hv_xcalloc(1, sizeof(*ph));
        ph->key = hv_xstrdup(key);
        TAILQ_INIT(&ph->idle);
        HASH_ADD_KEYPTR(hh, f->pools, ph->key, strlen(ph->key), ph);
    }
    idle_t *i = hv_xcalloc(1, sizeof(*i));
    i->f = f;
    i->conn = c;
    i->ph = ph;
    i->ps = ps;
    hv_conn_set_owner(c, &idle_cbs, i);
    TAILQ_INSERT_HEAD(&ph->idle, i, host_link);
    ph->nidle++;
    TAILQ_INSERT_TAIL(&f->idle_lru, i, lru_link);
    f->nidle++;
    hv_conn_set_timer(c, f->cfg->keepalive_timeout_ms);
    /* Keep reading while idle: that is how a close by the server is noticed. */
    hv_conn_read_start(c);
    if (f->nidle > f->max_idle)
        pool_drop(f, TAILQ_FIRST(&f->idle_lru));
    else if (ps != NULL && ps->waiting > 0)
        uv_timer_start(&f->wait_timer, on_wait_timer, 0, 0); /* theirs, or room for them */
}

static hv_conn_t *pool_take(hv_fetch_t *f, const char *key)
{
    pool_host_t *ph = pool_find(f, key);
    if (ph == NULL)
        return NULL;
    hv_proxy_stats_t *ps;
    hv_conn_t *c = pool_remove(f, TAILQ_FIRST(&ph->idle), &ps);
    hv_conn_set_timer(c, 0);
    return c;
}

static void idle_on_connect(hv_conn_t *c, int status)
{
    (void)c;
    (void)status; /* pooled connections are always open */
}

static void idle_on_read(hv_conn_t *c, const char *data, size_t len)
{
    (void)data;
    (void)len;
    /* Nothing was asked: bytes now mean the stream is out of step. */
    idle_t *i = c->data;
    pool_drop(i->f, i);
}

static void idle_on_error(hv_conn_t *c, int err)
{
    (void)err;
    idle_t *i = c->data;
    pool_drop(i->f, i);
}

static void idle_on_timeout(hv_conn_t *c)
{
    idle_t *i = c->data;
    pool_drop(i->f, i);
}

/* ---- the proxies' connection caps (proxy_connections) ---- */

/*
 * A proxy's connections, in use and idle, are counted from the connect to the close. A
 * request that needs a new connection through a proxy at its cap first closes that proxy's
 * oldest idle connection (to another origin: one to its own was taken); when there is none it
 * waits. Requests for a proxy that others wait for go behind them, in order, even those that
 * could take an idle connection: a busy host must not keep the others waiting. A closed connection or
 * one put back in the pool wakes the waiting list (on the next loop turn, never inside the
 * close); a request whose deadline passes while it waits fails with ProxyError
 * no_proxy_connection_within_<total_timeout>, not counted against the proxy.
 */

static int proxy_full(const hv_fetch_t *f, const hv_proxy_stats_t *ps)
{
    return ps != NULL && f->cfg->proxy_connections > 0 && ps->open >= f->cfg->proxy_connections;
}

/* Whether `r` may open a connection now, after closing an idle one of its proxy if need be. */
static int proxy_room(hv_fetch_t *f, hv_req_t *r)
{
    hv_proxy_stats_t *ps = r->ps;
    if (!proxy_full(f, ps))
        return 1;
    idle_t *i;
    TAILQ_FOREACH(i, &f->idle_lru, lru_link)
    {
        if (i->ps == ps) {
            pool_drop(f, i);
            return 1;
        }
    }
    h2c_t *hc;
    TAILQ_FOREACH(hc, &f->h2_idle, idle_link)
    {
        if (hc->ps == ps) {
            h2c_close(hc);
            return 1;
        }
    }
    return 0;
}

/* Arm `t` to fire at loop time `at` (at once if it has passed); UINT64_MAX stops it. */
static void timer_at(uv_timer_t *t, uv_timer_cb cb, uint64_t at)
{
    uint64_t now = uv_now(t->loop);
    if (at == UINT64_MAX)
        uv_timer_stop(t);
    else
        uv_timer_start(t, cb, at > now ? at - now : 0, 0);
}

/* Arm the waiting list's timer for its first deadline. */
static void wait_timer_arm(hv_fetch_t *f)
{
    hv_req_t *r;
    uint64_t first = UINT64_MAX;
    TAILQ_FOREACH(r, &f->waiting, wait_link)
        first = HV_MIN(first, r->job->deadline_ms);
    timer_at(&f->wait_timer, on_wait_timer, first);
}

static void queue_req(hv_req_t *r)
{
    hv_fetch_t *f = r->f;
    r->queued = 1;
    r->ps->waiting++;
    r->ps->waits++;
    TAILQ_INSERT_TAIL(&f->waiting, r, wait_link);
    set_state(r, RQ_QUEUED);
    if (!uv_is_active((uv_handle_t *)&f->wait_timer) ||
        uv_timer_get_due_in(&f->wait_timer) > 0)
        wait_timer_arm(f);
}

/* A connection through `ps` (NULL: direct) was closed. */
static void conn_closed(hv_fetch_t *f, hv_proxy_stats_t *ps)
{
    if (ps == NULL)
        return;
    assert(ps->open > 0);
    ps->open--;
    if (ps->waiting > 0)
        uv_timer_start(&f->wait_timer, on_wait_timer, 0, 0);
}

/* ---- request lifecycle ---- */

/* How long until `r`'s timer for a phase of `phase_ms` fires: the phase, or what is left of
 * the job's total deadline when that comes first (then r->timer_total says so). */
static uint64_t phase_timeout(hv_req_t *r, uint64_t now, uint64_t phase_ms)
{
    uint64_t left = r->job->deadline_ms > now ? r->job->deadline_ms - now : 1;
    r->timer_total = left <= phase_ms;
    return r->timer_total ? left : phase_ms;
}

static void arm(hv_req_t *r, uint64_t phase_ms)
{
    hv_conn_set_timer(r->conn, phase_timeout(r, uv_now(r->f->loop), phase_ms));
}

static void unqueue(hv_req_t *r)
{
    TAILQ_REMOVE(&r->f->waiting, r, wait_link);
    r->ps->waiting--;
    r->queued = 0;
}

static void pend_remove(hv_req_t *r)
{
    h2c_t *hc = r->h2c;
    TAILQ_REMOVE(&hc->pending, r, pend_link);
    hc->npending--;
    r->pending = 0;
    r->h2c = NULL;
}

static void end_req(hv_req_t *r)
{
    hv_fetch_t *f = r->f;
    if (r->queued)
        unqueue(r);
    if (r->pending)
        pend_remove(r);
    if (r->ready) {
        TAILQ_REMOVE(&f->ready, r, pend_link);
        r->ready = 0;
    }
    if (r->sid > 0) {
        hv_h2_cancel(r->h2c->h2, r->sid);
        r->sid = 0;
    }
    h2c_t *opening = r->h2c != NULL && r->h2c->opener == r ? r->h2c : NULL;
    r->h2c = NULL;
    if (r->conn != NULL) {
        hv_conn_close(r->conn);
        r->conn = NULL;
        conn_closed(f, r->ps);
    }
    if (opening != NULL) { /* its connection is gone: those waiting for it go on */
        opening->opener = NULL;
        h2_release_pending(opening);
        h2c_free(opening);
    }
    if (r->http_ready)
        hv_http_free(&r->http);
    TAILQ_REMOVE(&f->active, r, link);
    f->nactive--;
    r->job->req = NULL;
    free(r);
}

/* Where and how far the job got, and through which proxy. */
static void fill_record(hv_req_t *r)
{
    hv_record_t *rec = r->job->rec;
    hv_job_fill_record(r->job, uv_now(r->f->loop));
    free(rec->proxy);
    rec->proxy = r->proxy != NULL ? hv_xstrdup(r->proxy->shown) : NULL;
}

/* `arg` is the argument of a family detail (NULL for fixed ones). */
static void finish_fail(hv_req_t *r, hv_error_type_t type, hv_detail_t detail, const char *arg)
{
    hv_fetch_t *f = r->f;
    hv_job_t *job = r->job;
    char url[120];

    fill_record(r);
    hv_record_fail(job->rec, HV_STAGE_DOWNLOAD, type, detail, arg);
    hv_proxy_stats_t *ps = r->ps;
    if (type == HV_ET_PROXY && detail == HV_D_PROXY_HTTP_STATUS && ps != NULL &&
        ps->tunnel_http && !ps->no_tunnel_http && job->url.scheme == HV_SCHEME_HTTP) {
        /* It refused to tunnel to an http port: back to the absolute form, unpooled. */
        ps->no_tunnel_http = 1;
        HV_LOG(HV_LOG_NOTICE, "event=proxy_no_http_tunnel proxy=%s error=%s", ps->proxy,
               job->rec->error);
    }
    if (type == HV_ET_PROXY && detail != HV_D_NO_PROXY_CONNECTION_WITHIN)
        proxy_outcome(r, 1); /* (waiting under the cap is not the proxy's failure) */
    else if (job->rec->http_status > 0)
        proxy_outcome(r, 0); /* an answer came through */
    HV_LOG(HV_LOG_INFO, "event=download_failed job=%" PRIu64 " url=%s error_type=%s error=%s",
           job->id, hv_log_url(url, sizeof(url), job->url.href), hv_error_type_name(type),
           job->rec->error);
    end_req(r);
    job->end = HV_JOB_FAILED;
    f->on_end(f->ud, job);
}

/* A detail a lower layer (http, conn) or the head callback kept. */
static void finish_fault(hv_req_t *r, hv_error_type_t type, const hv_fault_t *fault)
{
    finish_fail(r, type, fault->code, fault->arg);
}

static void finish_page(hv_req_t *r)
{
    hv_fetch_t *f = r->f;
    hv_job_t *job = r->job;
    size_t len;
    char *body = hv_buf_steal(&r->http.body, &len);

    fill_record(r);
    proxy_outcome(r, 0);
    job->rec->bytes = (int64_t)len;
    end_req(r);
    job->end = HV_JOB_GOT_PAGE;
    job->body = body;
    job->body_len = len;
    f->on_end(f->ud, job);
}

static void finish_not_modified(hv_req_t *r)
{
    hv_fetch_t *f = r->f;
    hv_job_t *job = r->job;
    fill_record(r);
    proxy_outcome(r, 0);
    end_req(r);
    job->end = HV_JOB_NOT_MODIFIED;
    f->on_end(f->ud, job);
}

/* getaddrinfo's failures, as libuv reports them, as opposed to the connect's. */
static int is_lookup_error(int err)
{
    switch (err) {
    case UV_EAI_ADDRFAMILY:
    case UV_EAI_AGAIN:
    case UV_EAI_BADFLAGS:
    case UV_EAI_BADHINTS:
    case UV_EAI_CANCELED:
    case UV_EAI_FAIL:
    case UV_EAI_FAMILY:
    case UV_EAI_MEMORY:
    case UV_EAI_NODATA:
    case UV_EAI_NONAME:
    case UV_EAI_OVERFLOW:
    case UV_EAI_PROTOCOL:
    case UV_EAI_SERVICE:
    case UV_EAI_SOCKTYPE:
        return 1;
    default:
        return 0;
    }
}

/* The connection to a proxy failed before a tunnel or a request went through: the proxy's
 * failure, not the page's (TLS failures inside a tunnel are the origin's, as without one). */
static int fail_proxy(hv_req_t *r, int status)
{
    char name[32];
    /* A layer's failure while the chain opened: a SOCKS5 proxy's lookup of the target's
     * name is the target's, as it would be without the proxy. */
    if (r->conn != NULL && r->conn->state == HV_CONN_HANDSHAKING && is_lookup_error(status))
        return 0;
    switch (status) {
    case HV_EPROXY:
        finish_fault(r, HV_ET_PROXY, hv_conn_error(r->conn));
        return 1;
    case UV_ECONNREFUSED:
        finish_fail(r, HV_ET_PROXY, HV_D_PROXY_CONNECT_REFUSED, NULL);
        return 1;
    case UV_ETIMEDOUT:
        finish_fail(r, HV_ET_PROXY, HV_D_PROXY_CONNECT_TIMED_OUT, NULL);
        return 1;
    case HV_ECERT:
    case HV_ETLS:
    case HV_EBLOCKED:
        return 0;
    default:
        if (is_lookup_error(status))
            finish_fail(r, HV_ET_PROXY, HV_D_PROXY_NAME_NOT_RESOLVED, NULL);
        else
            finish_fail(r, HV_ET_PROXY, HV_D_PROXY_CONNECT_ERROR,
                        hv_err_name_arg(name, sizeof(name), status, 1));
        return 1;
    }
}

/* The guard is what a newcomer trying a local server meets first, and its README section is
 * far down: the first refusal says how to let a range through (the records stay as they are). */
static void hint_guard(hv_req_t *r)
{
    const hv_url_t *u = &r->job->url;
    if (r->f->guard_hinted)
        return;
    r->f->guard_hinted = 1;
    const hv_fault_t *fault = hv_conn_error(r->conn);
    char detail[HV_DETAIL_TEXT_MAX] = "", range[80];
    if (fault != NULL && fault->code != HV_D_NONE)
        hv_detail_format(detail, sizeof(detail), fault->code, fault->arg);
    if (u->host_is_ip)
        snprintf(range, sizeof(range), "%s/%d", u->host, u->host_is_ipv6 ? 128 : 32);
    else
        snprintf(range, sizeof(range), "127.0.0.1/32 (the address %s resolves to)", u->host);
    HV_LOG(HV_LOG_NOTICE,
           "event=address_guard_hint host=%s detail=%s note=\"the address guard refuses "
           "loopback, private and other non-public addresses; to fetch from such an address, "
           "allow its range with --allow-addresses (allow_addresses in a config file), e.g. "
           "--allow-addresses %s; see README, Address guard\"",
           u->host, detail[0] != '\0' ? detail : "-", range);
}

static void fail_connect(hv_req_t *r, int status)
{
    char name[32];
    if (r->h2c != NULL && r->h2c->opener == r) {
        /* The connection the others waited for failed: each tries one of its own rather
         * than wait for the next, in turn. */
        hv_req_t *p;
        TAILQ_FOREACH(p, &r->h2c->pending, pend_link)
            p->no_h2_wait = 1;
    }
    if (r->proxy != NULL && fail_proxy(r, status))
        return;
    if (status == HV_ECERT || status == HV_ETLS) {
        hv_error_type_t type = status == HV_ECERT ? HV_ET_CERTIFICATE : HV_ET_TLS;
        const hv_fault_t *fault = r->conn != NULL ? hv_conn_error(r->conn) : NULL;
        if (fault != NULL && fault->code != HV_D_NONE)
            finish_fault(r, type, fault);
        else
            finish_fail(r, type, HV_D_TLS_FAILED, NULL);
        return;
    }
    switch (status) {
    case HV_EBLOCKED:
        hint_guard(r);
        finish_fault(r, HV_ET_BLOCKED_ADDRESS, hv_conn_error(r->conn));
        return;
    case UV_EAI_NONAME:
        finish_fail(r, HV_ET_DNS, HV_D_NAME_NOT_RESOLVED, NULL);
        return;
    case UV_EAI_AGAIN:
        finish_fail(r, HV_ET_DNS, HV_D_DNS_TEMPORARY_FAILURE, NULL);
        return;
    case UV_EAI_NODATA:
        finish_fail(r, HV_ET_DNS, HV_D_NO_ADDRESS_FOR_NAME, NULL);
        return;
    case UV_ECONNREFUSED:
        finish_fail(r, HV_ET_CONNECT, HV_D_CONNECTION_REFUSED, NULL);
        return;
    case UV_ENETUNREACH:
        finish_fail(r, HV_ET_CONNECT, HV_D_NETWORK_UNREACHABLE, NULL);
        return;
    case UV_EHOSTUNREACH:
        finish_fail(r, HV_ET_CONNECT, HV_D_HOST_UNREACHABLE, NULL);
        return;
    case UV_ETIMEDOUT:
        finish_fail(r, HV_ET_CONNECT_TIMEOUT, HV_D_CONNECT_TIMED_OUT, NULL);
        return;
    default:
        if (is_lookup_error(status))
            finish_fail(r, HV_ET_DNS, HV_D_DNS_ERROR, hv_err_name_arg(name, sizeof(name), status, 4));
        else
            finish_fail(r, HV_ET_CONNECT, HV_D_CONNECT_ERROR,
                        hv_err_name_arg(name, sizeof(name), status, 1));
    }
}

static hv_http_body_t on_head(hv_http_t *h);


/*
 * The configured headers of this hop, into `fields`. Each hop gets those of its own host: a
 * [host] section's headers go to that host alone, so after a redirect to another host they
 * are sent there only if that host's own section has them too. The global Authorization and
 * Cookie stay with the origin (scheme, host and port) of the URL's first request, as curl
 * keeps its custom ones: a redirect to another origin (https down to http included) does not
 * carry them, and a redirect back to the first one does.
 */
static size_t hop_fields(const hv_fetch_t *f, const hv_job_t *job, hv_http_field_t *fields)
{
    const hv_conf_header_t *conf[2 * HV_HEADERS_MAX];
    char origin[HV_URL_MAX + 32];
    int first_origin =
        job->first_origin == NULL ||
        strcmp(job->first_origin, hv_url_origin(&job->url, origin, sizeof(origin))) == 0;
    size_t n = hv_config_request_headers(f->cfg, job->url.host, first_origin, conf);
    for (size_t i = 0; i < n; i++)
        fields[i] = (hv_http_field_t){conf[i]->name, conf[i]->value};
    return n;
}

static void send_request(hv_req_t *r)
{
    hv_fetch_t *f = r->f;
    hv_http_field_t fields[2 * HV_HEADERS_MAX];
    hv_buf_t req;
    int rc;

    /* Validators belong to the response of the stored final URL: they go to that URL only
     * (after the same redirects, the last hop). */
    const hv_record_state_t *st = r->job->rec->state;
    hv_http_cond_t cond = {NULL, NULL};
    r->conditional = st != NULL && st->conditional && st->prev.url != NULL &&
                     strcmp(st->prev.url, r->job->url.href) == 0;
    if (r->conditional) {
        cond.etag = st->prev.etag;
        cond.last_modified = st->prev.last_modified;
    }
    size_t nfields = hop_fields(f, r->job, fields);
    /* An http URL through an HTTP proxy: the request itself goes to the proxy. */
    char auth[2 * HV_PROXY_CRED_MAX + 32];
    hv_http_via_t via = {NULL};
    int proxied = r->proxy != NULL && r->proxy->kind == HV_PROXY_HTTP &&
                  r->job->url.scheme == HV_SCHEME_HTTP &&
                  !hv_conn_has_layer(r->conn, &hv_cf_connect);
    if (proxied && r->proxy->has_auth && hv_proxy_basic_auth(r->proxy, auth, sizeof(auth)) == 0)
        via.authorization = auth;
    hv_buf_init(&req, HV_HTTP_REQUEST_MAX);
    rc = hv_http_request(&req, &r->job->url, f->cfg->user_agent, r->conditional ? &cond : NULL,
                         proxied ? &via : NULL, fields, nfields);
    explicit_bzero(auth, sizeof(auth));
    if (rc == 0)
        rc = hv_conn_write(r->conn, req.data, req.len);
    hv_buf_free(&req);
    if (rc == 0) {
        f->stats.requests++;
        if (r->ps != NULL)
            r->ps->requests++;
        r->job->rec->requests++;
    }
    if (r->http_ready)
        hv_http_free(&r->http);
    hv_http_init(&r->http, r->job->kind == HV_JOB_ROBOTS ? &f->robots_limits : &f->limits, on_head,
                 r);
    r->http_ready = 1;
    set_state(r, RQ_WAITING);
    if (rc != 0) {
        req_on_error(r->conn, rc);
        return;
    }
    if (f->paused) {
        hv_conn_read_stop(r->conn);
        hv_conn_set_timer(r->conn, 0);
    } else {
        hv_conn_read_start(r->conn);
        arm(r, f->cfg->read_timeout_ms);
    }
}

static void open_conn(hv_req_t *r, int allow_pool)
{
    r->proxy = choose_proxy(r->f, &r->job->url, r->job->attempts);
    r->ps = r->proxy != NULL ? proxy_stats(r->f, r->proxy) : NULL;
    (void)connect_req(r, allow_pool);
}

/* A connection for `r` through its chosen proxy: an idle one, a new one, or a place in the
 * waiting list when the proxy is at its cap. Returns 1 when `r` waits in that list; 0 when
 * it went on, and may then have ended already (a connect that failed at once frees it). */
static int connect_req(hv_req_t *r, int allow_pool)
{
    hv_fetch_t *f = r->f;
    const hv_url_t *u = &r->job->url;
    char key[POOL_KEY_MAX];
    hv_conn_t *c = NULL;
    /* Behind requests that wait for its proxy, even with an idle connection of its own to
     * take: they may need that connection's place, and come first. */
    if (r->ps != NULL && r->ps->waiting > 0 && !r->queued) {
        queue_req(r);
        return 1;
    }
    pool_key(u, r->proxy, key, sizeof(key));
    int h2 = h2_eligible(f, r);
    origin_t *o = NULL;
    if (h2) {
        o = origin_get(f, key);
        if (o->h1_only)
            h2 = 0;
        else if (h2_attach(r, o))
            return 0;
    }
    if (allow_pool)
        c = pool_take(f, key);
    if (c == NULL && !proxy_room(f, r)) {
        if (!r->queued)
            queue_req(r);
        return 1;
    }
    if (r->queued)
        unqueue(r);
    if (c != NULL) {
        f->stats.connections_reused++;
        hv_conn_set_owner(c, &req_cbs, r);
        hv_conn_set_space(c, req_in_space);
        r->conn = c;
        r->reused = 1;
        send_request(r);
        return 0;
    }
    /* The chain: [a proxy's tunnel] [TLS to the origin, inside it]. */
    hv_cf_tls_arg_t tls = {.ctx = f->tls, .host = u->host, .host_is_ip = u->host_is_ip,
                           .port = u->port, .h2 = h2 == H2_TLS, .pool = f->tlspool};
    if (h2) { /* it opens the connection the others will wait for */
        r->h2c = h2c_new(f, o, r);
        r->h2c->ps = r->ps;
    }
    hv_proxy_target_t tunnel = {.proxy = r->proxy, .host = u->host,
                                .host_is_ip = u->host_is_ip, .port = u->port};
    hv_conn_layer_t layers[2];
    unsigned n = 0;
    /* An http URL's requests go to an HTTP proxy as they are (absolute-form): no tunnel. */
    if (r->proxy != NULL && r->proxy->kind != HV_PROXY_HTTP)
        layers[n++] = (hv_conn_layer_t){&hv_cf_socks, &tunnel};
    else if (r->proxy != NULL && (u->scheme == HV_SCHEME_HTTPS || http_tunnel(r->ps)))
        layers[n++] = (hv_conn_layer_t){&hv_cf_connect, &tunnel};
    if (u->scheme == HV_SCHEME_HTTPS)
        layers[n++] = (hv_conn_layer_t){&hv_cf_tls, &tls};
    const char *host = r->proxy != NULL ? r->proxy->host : u->host;
    int rc = hv_conn_connect(&f->conn_env, layers, n, host,
                             r->proxy != NULL ? r->proxy->host_is_ip : u->host_is_ip,
                             r->proxy != NULL ? r->proxy->port : u->port, &req_cbs, r, &c);
    if (rc != 0) {
        fail_connect(r, rc);
        return 0;
    }
    hv_conn_set_space(c, req_in_space);
    if (r->ps != NULL)
        r->ps->open++;
    r->conn = c;
    r->reused = 0;
    set_state(r, RQ_CONNECTING);
    arm(r, f->cfg->connect_timeout_ms);
    return 0;
}

void hv_fetch_start(hv_fetch_t *f, hv_job_t *job)
{
    hv_req_t *r = hv_xcalloc(1, sizeof(*r));
    uint64_t now = uv_now(f->loop);

    if (job->deadline_ms == 0) /* per attempt; redirects stay within it */
        job->deadline_ms = now + f->cfg->total_timeout_ms;
    if (job->first_origin == NULL) {
        char origin[HV_URL_MAX + 32];
        job->first_origin = hv_xstrdup(hv_url_origin(&job->url, origin, sizeof(origin)));
    }
    r->f = f;
    r->job = job;
    job->req = r;
    TAILQ_INSERT_TAIL(&f->active, r, link);
    f->nactive++;
    if (job->url.scheme == HV_SCHEME_HTTPS && f->tls == NULL) {
        finish_fail(r, HV_ET_UNSUPPORTED_SCHEME, HV_D_HTTPS_NOT_SUPPORTED, NULL);
        return;
    }
    open_conn(r, 1);
}

void hv_fetch_end_unsent(hv_fetch_t *f, hv_job_t *job)
{
    job->end = HV_JOB_FAILED;
    f->on_end(f->ud, job);
}

static void req_on_connect(hv_conn_t *c, int status)
{
    hv_req_t *r = c->data;
    if (status != 0) {
        fail_connect(r, status); /* closes the connection */
        return;
    }
    h2c_t *hc = r->h2c;
    if (hc != NULL && hc->opener == r) {
        hc->opener = NULL;
        const char *alpn = hv_cf_tls_alpn(c);
        if (r->job->url.scheme == HV_SCHEME_HTTP || (alpn != NULL && strcmp(alpn, "h2") == 0)) {
            h2_start_session(r, hc, c);
            return;
        }
        /* HTTP/1.1: no one waits for this origin's next connections any more. */
        hc->o->h1_known = 1;
        r->h2c = NULL;
        h2_release_pending(hc);
        h2c_free(hc);
    }
    send_request(r);
}

static int is_redirect_status(int status)
{
    return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

/* What the response says for the store: its validators, and whether it may be stored. */
static void keep_validators(hv_record_state_t *st, const hv_http_t *h)
{
    free(st->etag);
    free(st->last_modified);
    st->etag = h->etag.len > 0 ? hv_xstrndup(h->etag.data, h->etag.len) : NULL;
    st->last_modified =
        h->last_modified.len > 0 ? hv_xstrndup(h->last_modified.data, h->last_modified.len)
                                 : NULL;
    hv_http_cache_control(h, &st->no_store, &st->max_age_s);
}

static hv_http_body_t on_head(hv_http_t *h)
{
    hv_req_t *r = h->data;
    hv_job_t *job = r->job;
    hv_record_t *rec = job->rec;
    char mt[128];

    rec->http_status = h->status;
    rec->http_version = r->h2c != NULL ? "2" : "1.1";
    free(rec->content_type);
    rec->content_type = h->content_type.len > 0
                            ? hv_xstrndup(h->content_type.data, h->content_type.len)
                            : NULL;
    if (rec->state != NULL)
        keep_validators(rec->state, h);
    if (h->status == 304 && r->conditional) {
        r->not_modified = 1;
        return HV_HTTP_BODY_DISCARD;
    }
    if (is_redirect_status(h->status) && h->location.len > 0) {
        if (job->redirects >= r->f->cfg->max_redirects) {
            r->fail_type = HV_ET_TOO_MANY_REDIRECTS;
            hv_fault_setf(&r->fail, HV_D_TOO_MANY_REDIRECTS, "%u", r->f->cfg->max_redirects);
        } else {
            r->is_redirect = 1;
        }
        return HV_HTTP_BODY_DISCARD;
    }
    if (h->status == 407 && r->proxy != NULL && job->url.scheme == HV_SCHEME_HTTP) {
        /* The proxy, not the origin, answered the request it was given. */
        r->fail_type = HV_ET_PROXY;
        hv_fault_set(&r->fail, HV_D_PROXY_AUTH_REQUIRED, NULL);
        return HV_HTTP_BODY_DISCARD;
    }
    if (h->status < 200 || h->status > 299) {
        r->fail_type = HV_ET_HTTP_STATUS;
        hv_fault_setf(&r->fail, HV_D_HTTP_STATUS, "%d", h->status);
        return HV_HTTP_BODY_DISCARD;
    }
    if (job->kind == HV_JOB_ROBOTS)
        return HV_HTTP_BODY_KEEP; /* robots.txt is text/plain, or anything */
    hv_http_media_type(h, mt, sizeof(mt));
    if (mt[0] != '\0' && strcmp(mt, "text/html") != 0 && strcmp(mt, "application/xhtml+xml") != 0) {
        r->fail_type = HV_ET_UNEXPECTED_CONTENT_TYPE;
        hv_fault_set(&r->fail, HV_D_UNEXPECTED_CONTENT_TYPE, NULL);
        return HV_HTTP_BODY_ABORT;
    }
    return HV_HTTP_BODY_KEEP;
}

static void follow_redirect(hv_req_t *r)
{
    hv_fetch_t *f = r->f;
    hv_job_t *job = r->job;
    hv_url_t next;

    int rc = hv_url_resolve(&next, &job->url, r->http.location.data, r->http.location.len, NULL);
    if (rc == HV_ESCHEME) {
        finish_fail(r, HV_ET_UNSUPPORTED_SCHEME, HV_D_REDIRECT_TO_UNSUPPORTED_SCHEME, NULL);
        return;
    }
    if (rc != 0) {
        finish_fail(r, HV_ET_PROTOCOL, HV_D_INVALID_REDIRECT_LOCATION, NULL);
        return;
    }
    job->redirects++;
    /* The next hop is a new request, with its own allowance for a stale pooled connection,
     * and the request headers of its own host (hop_fields: another host gets neither this
     * host's [host] headers nor the global credentials). */
    job->fresh_conn_retried = 0;
    f->stats.redirects++;
    hv_url_free(&job->url);
    job->url = next;
    job->rec->http_status = 0;
    job->rec->http_version = NULL;
    free(job->rec->content_type);
    job->rec->content_type = NULL;
    end_req(r);
    job->end = HV_JOB_REDIRECTED;
    f->on_end(f->ud, job);
}

static void response_outcome(hv_req_t *r);

static void response_complete(hv_req_t *r)
{
    hv_fetch_t *f = r->f;
    hv_conn_t *c = r->conn;

    r->conn = NULL;
    hv_proxy_stats_t *ps = r->ps;
    if (ps != NULL && r->reused)
        ps->reuses++;
    /* A proxy that closes every connection after one answer without saying so (tinyproxy
     * does, to its clients' absolute-form requests): pooling its connections only costs a
     * failed write each. */
    int tunnel = hv_conn_has_layer(c, &hv_cf_connect) || hv_conn_has_layer(c, &hv_cf_socks);
    if (r->http.keep_alive && !(ps != NULL && ps->no_reuse && !tunnel)) {
        char key[POOL_KEY_MAX];
        pool_put(f, c, pool_key(&r->job->url, r->proxy, key, sizeof(key)), ps);
    } else {
        hv_conn_close(c);
        conn_closed(f, ps);
    }
    response_outcome(r);
}

/* The response is complete (its connection handed on): what it means for the job. */
static void response_outcome(hv_req_t *r)
{
    r->job->retry_after_ms = hv_http_retry_after_ms(&r->http, hv_now_unix_ms());
    if (r->fail_type != HV_ET_NONE)
        finish_fault(r, r->fail_type, &r->fail);
    else if (r->not_modified)
        finish_not_modified(r);
    else if (r->is_redirect)
        follow_redirect(r);
    else
        finish_page(r);
}

static void http_failed(hv_req_t *r, int rc)
{
    switch (rc) {
    case HV_ETOOBIG:
        finish_fault(r, HV_ET_PAGE_TOO_LARGE, &r->http.fault);
        break;
    case HV_ECANCELLED:
        finish_fault(r, r->fail_type, &r->fail);
        break;
    case HV_ECLOSED:
        finish_fault(r, HV_ET_CONNECTION_RESET, &r->http.fault);
        break;
    default: /* HV_EPROTO, HV_EDECODE */
        finish_fault(r, HV_ET_PROTOCOL, &r->http.fault);
        break;
    }
}

/* A body without coding is read straight into its buffer (see hv_http_body_space). */
static int req_in_space(hv_conn_t *c, char **base, size_t *len)
{
    hv_req_t *r = c->data;
    return r->http_ready && (r->state == RQ_WAITING || r->state == RQ_RECEIVING) &&
           hv_http_body_space(&r->http, base, len);
}

static void req_on_read(hv_conn_t *c, const char *data, size_t len)
{
    hv_req_t *r = c->data;
    if (r->state != RQ_RECEIVING)
        set_state(r, RQ_RECEIVING);
    int rc = hv_http_feed(&r->http, data, len);
    if (rc == 0) {
        if (!r->f->paused)
            arm(r, r->f->cfg->read_timeout_ms);
        return;
    }
    if (rc == 1)
        response_complete(r);
    else
        http_failed(r, rc);
}

static int stale_error(int err)
{
    return err == UV_EOF || err == UV_ECONNRESET || err == UV_EPIPE || err == UV_ECONNABORTED;
}

static void req_on_error(hv_conn_t *c, int err)
{
    hv_req_t *r = c->data;
    hv_job_t *job = r->job;
    char name[32];

    /* A pooled connection the server closed before seeing our request: not the page's fault.
     * Try once more on a new connection. */
    if (r->reused && r->http.bytes_in == 0 && stale_error(err) && !job->fresh_conn_retried) {
        job->fresh_conn_retried = 1;
        r->f->stats.stale_retries++;
        hv_proxy_stats_t *ps = r->ps;
        if (ps != NULL && ++ps->stale >= PROXY_STALE_NO_REUSE && ps->reuses == 0 &&
            !ps->no_reuse) {
            ps->no_reuse = 1;
            ps->tunnel_http = 1;
            HV_LOG(HV_LOG_NOTICE, "event=proxy_no_keepalive proxy=%s stale=%u note=\"it closed "
                   "every pooled connection: http URLs go through CONNECT tunnels from now on, "
                   "and requests it answers itself are not kept\"", ps->proxy, ps->stale);
        }
        HV_LOG(HV_LOG_DEBUG, "event=stale_connection job=%" PRIu64 " conn=%" PRIu64, job->id,
               c->id);
        hv_conn_close(c);
        r->conn = NULL;
        conn_closed(r->f, ps);
        open_conn(r, 0);
        return;
    }
    if (err == UV_EOF) {
        int rc = hv_http_eof(&r->http);
        if (rc == 1)
            response_complete(r);
        else
            http_failed(r, rc);
        return;
    }
    if (err == HV_ETLS) {
        finish_fault(r, HV_ET_TLS, hv_conn_error(c));
        return;
    }
    if (err == UV_ECONNRESET)
        finish_fail(r, HV_ET_CONNECTION_RESET, HV_D_CONNECTION_RESET, NULL);
    else
        finish_fail(r, HV_ET_CONNECTION_RESET, HV_D_CONNECTION_ERROR,
                    hv_err_name_arg(name, sizeof(name), err, 1));
}

static void req_on_timeout(hv_conn_t *c)
{
    req_timeout(c->data, c);
}

/* `r`'s timer fired; `c` is its connection (NULL: an HTTP/2 stream's deadline). */
static void req_timeout(hv_req_t *r, hv_conn_t *c)
{
    const hv_config_t *cfg = r->f->cfg;
    char dur[32];

    if (r->timer_total) {
        hv_detail_duration(dur, sizeof(dur), cfg->total_timeout_ms);
        finish_fail(r, HV_ET_TOTAL_TIMEOUT, HV_D_REQUEST_EXCEEDED, dur);
    } else if (r->state == RQ_CONNECTING && c != NULL) {
        hv_detail_duration(dur, sizeof(dur), cfg->connect_timeout_ms);
        const hv_cf_type_t *opening = hv_conn_opening(c);
        /* Through a proxy, until its tunnel is open the time went to the proxy. */
        if (r->proxy != NULL && (c->state != HV_CONN_HANDSHAKING || opening == &hv_cf_connect ||
                                 opening == &hv_cf_socks))
            finish_fail(r, HV_ET_PROXY, HV_D_PROXY_CONNECT_TIMED_OUT, NULL);
        else if (c->state == HV_CONN_RESOLVING)
            finish_fail(r, HV_ET_DNS, HV_D_DNS_LOOKUP_EXCEEDED, dur);
        else if (c->state == HV_CONN_HANDSHAKING)
            finish_fail(r, HV_ET_CONNECT_TIMEOUT, HV_D_NO_TLS_HANDSHAKE_WITHIN, dur);
        else
            finish_fail(r, HV_ET_CONNECT_TIMEOUT, HV_D_NO_CONNECTION_WITHIN, dur);
    } else {
        hv_detail_duration(dur, sizeof(dur), cfg->read_timeout_ms);
        finish_fail(r, HV_ET_READ_TIMEOUT, HV_D_NO_DATA_FOR, dur);
    }
}

/* ---- HTTP/2 ----
 *
 * An origin's requests share its HTTP/2 connections as streams. A request for an https
 * origin (or an http one with http2_prior_knowledge) takes a stream on an open connection
 * with room; else, while a connection to the origin is opening (or open but still without
 * the server's SETTINGS), it waits for that one (h2c->pending) rather than open its own;
 * else it opens one, offering ALPN h2, and the others wait for it. When the server chose
 * http/1.1, those waiting go on as HTTP/1.1 requests (and the origin is remembered as such,
 * so that no one waits for its next connections); when the connection failed, they go on
 * each with a connection of its own. A request let go from inside a callback starts again
 * from the loop's next turn (the ready list), never inside it.
 */

/* How many times a hop is sent again because the server did not process its stream. */
#define H2_RESENDS_MAX 5
/* Origins remembered (their protocol) besides those with connections. */
#define ORIGINS_MAX 4096

/* Whether `r` may go over HTTP/2, and how. */
static int h2_eligible(const hv_fetch_t *f, const hv_req_t *r)
{
    const hv_url_t *u = &r->job->url;
    if (u->scheme == HV_SCHEME_HTTPS)
        return f->cfg->http2 == HV_HTTP2_AUTO ? H2_TLS : H2_NO;
    /* an HTTP proxy's absolute form speaks HTTP/1.1 to the proxy */
    if (r->proxy != NULL && r->proxy->kind == HV_PROXY_HTTP && !http_tunnel(r->ps))
        return H2_NO;
    return hv_config_host_h2c(f->cfg, u->host) ? H2_PRIOR : H2_NO;
}

static origin_t *origin_get(hv_fetch_t *f, const char *key)
{
    origin_t *o;
    HASH_FIND_STR(f->origins, key, o);
    if (o != NULL) {
        TAILQ_REMOVE(&f->origin_lru, o, lru);
        TAILQ_INSERT_TAIL(&f->origin_lru, o, lru);
        return o;
    }
    while (f->norigins >= ORIGINS_MAX) {
        origin_t *old = TAILQ_FIRST(&f->origin_lru);
        if (old->nconns > 0)
            break; /* the oldest is in use: bounded all the same, by the connections */
        TAILQ_REMOVE(&f->origin_lru, old, lru);
        HASH_DEL(f->origins, old);
        free(old->key);
        free(old);
        f->norigins--;
    }
    o = hv_xcalloc(1, sizeof(*o));
    o->key = hv_xstrdup(key);
    TAILQ_INIT(&o->conns);
    HASH_ADD_KEYPTR(hh, f->origins, o->key, strlen(o->key), o);
    TAILQ_INSERT_TAIL(&f->origin_lru, o, lru);
    f->norigins++;
    return o;
}

static h2c_t *h2c_new(hv_fetch_t *f, origin_t *o, hv_req_t *opener)
{
    h2c_t *hc = hv_xcalloc(1, sizeof(*hc));
    hc->f = f;
    hc->o = o;
    hc->opener = opener;
    TAILQ_INIT(&hc->pending);
    TAILQ_INSERT_TAIL(&o->conns, hc, link);
    o->nconns++;
    TAILQ_INSERT_TAIL(&f->h2cs, hc, all);
    return hc;
}

static void h2_idle_set(h2c_t *hc, int idle)
{
    hv_fetch_t *f = hc->f;
    if (hc->idle == idle)
        return;
    hc->idle = idle;
    if (idle) {
        TAILQ_INSERT_TAIL(&f->h2_idle, hc, idle_link);
        f->nh2_idle++;
    } else {
        TAILQ_REMOVE(&f->h2_idle, hc, idle_link);
        f->nh2_idle--;
    }
}

static void h2c_free(h2c_t *hc)
{
    assert(hc->npending == 0);
    h2_idle_set(hc, 0);
    TAILQ_REMOVE(&hc->o->conns, hc, link);
    hc->o->nconns--;
    TAILQ_REMOVE(&hc->f->h2cs, hc, all);
    free(hc);
}

static void make_ready(hv_req_t *r)
{
    hv_fetch_t *f = r->f;
    r->ready = 1;
    TAILQ_INSERT_TAIL(&f->ready, r, pend_link);
    set_state(r, RQ_QUEUED);
    uv_timer_start(&f->ready_timer, on_ready_timer, 0, 0);
}

/* Those waiting for `hc` go on without it. */
static void h2_release_pending(h2c_t *hc)
{
    hv_req_t *r;
    while ((r = TAILQ_FIRST(&hc->pending)) != NULL) {
        pend_remove(r);
        make_ready(r);
    }
}

static void on_ready_timer(uv_timer_t *t)
{
    hv_fetch_t *f = t->data;
    hv_req_t *r, *last = TAILQ_LAST(&f->ready, req_list);
    /* Those made ready meanwhile wait for the next turn. */
    while (last != NULL && (r = TAILQ_FIRST(&f->ready)) != NULL) {
        TAILQ_REMOVE(&f->ready, r, pend_link);
        r->ready = 0;
        int was_last = r == last;
        (void)connect_req(r, 1);
        if (was_last)
            break;
    }
    if (!TAILQ_EMPTY(&f->ready))
        uv_timer_start(&f->ready_timer, on_ready_timer, 0, 0);
}

/* The first deadline of the requests waiting for an HTTP/2 connection. */
static void pend_timer_arm(hv_fetch_t *f)
{
    uint64_t first = UINT64_MAX;
    const h2c_t *hc;
    const hv_req_t *r;
    TAILQ_FOREACH(hc, &f->h2cs, all)
        TAILQ_FOREACH(r, &hc->pending, pend_link)
            first = HV_MIN(first, r->job->deadline_ms);
    timer_at(&f->pend_timer, on_pend_timer, first);
}

static void on_pend_timer(uv_timer_t *t)
{
    hv_fetch_t *f = t->data;
    char dur[32];
    for (;;) {
        uint64_t now = uv_now(f->loop);
        h2c_t *hc;
        hv_req_t *late = NULL;
        TAILQ_FOREACH(hc, &f->h2cs, all)
        {
            hv_req_t *r;
            TAILQ_FOREACH(r, &hc->pending, pend_link)
                if (r->job->deadline_ms <= now)
                    late = r;
            if (late != NULL)
                break;
        }
        if (late == NULL)
            break;
        pend_remove(late);
        hv_detail_duration(dur, sizeof(dur), f->cfg->total_timeout_ms);
        finish_fail(late, HV_ET_TOTAL_TIMEOUT, HV_D_REQUEST_EXCEEDED, dur);
    }
    pend_timer_arm(f);
}

static void pend_add(hv_req_t *r, h2c_t *hc)
{
    hv_fetch_t *f = r->f;
    r->pending = 1;
    r->h2c = hc;
    TAILQ_INSERT_TAIL(&hc->pending, r, pend_link);
    hc->npending++;
    set_state(r, RQ_QUEUED);
    uint64_t now = uv_now(f->loop);
    uint64_t due = r->job->deadline_ms > now ? r->job->deadline_ms - now : 0;
    if (!uv_is_active((uv_handle_t *)&f->pend_timer) ||
        uv_timer_get_due_in(&f->pend_timer) > due)
        uv_timer_start(&f->pend_timer, on_pend_timer, due, 0);
}

static void h2_stream_start(hv_req_t *r, h2c_t *hc, int reused);

/* A stream for `r` on a connection of `o`, or a place among those waiting for one: 1; or 0,
 * it must open a connection. */
static int h2_attach(hv_req_t *r, origin_t *o)
{
    h2c_t *hc;
    TAILQ_FOREACH(hc, &o->conns, link)
    {
        if (hc->h2 != NULL && !hc->no_new && hc->npending == 0 && hv_h2_room(hc->h2) > 0) {
            if (r->queued)
                unqueue(r);
            h2_stream_start(r, hc, 1);
            return 1;
        }
    }
    if (r->no_h2_wait || o->h1_known)
        return 0;
    TAILQ_FOREACH(hc, &o->conns, link)
    {
        if (!hc->no_new && (hc->opener != NULL || !hv_h2_settled(hc->h2))) {
            if (r->queued)
                unqueue(r);
            pend_add(r, hc);
            return 1;
        }
    }
    return 0;
}

/* Streams for those waiting on `hc` while it has room; once the server's limit is known and
 * reached, the rest open another connection. */
static void h2_pump(h2c_t *hc)
{
    hv_req_t *r;
    while (hc->h2 != NULL && !hc->no_new && hv_h2_room(hc->h2) > 0 &&
           (r = TAILQ_FIRST(&hc->pending)) != NULL) {
        pend_remove(r);
        h2_stream_start(r, hc, 1);
    }
    if (hc->h2 != NULL && !TAILQ_EMPTY(&hc->pending) &&
        (hc->no_new || hv_h2_settled(hc->h2)))
        h2_release_pending(hc);
    pend_timer_arm(hc->f);
}

static void h2_arm(hv_req_t *r, uint64_t phase_ms)
{
    uint64_t now = uv_now(r->f->loop);
    hv_h2_set_deadline(r->h2c->h2, r->sid, now + phase_timeout(r, now, phase_ms));
}

static int h2_on_field(void *sd, const char *name, size_t nlen, const char *value, size_t vlen);
static int h2_on_head(void *sd, int status);
static int h2_on_data(void *sd, const char *data, size_t len);
static void h2_on_end(void *sd, const hv_h2_end_t *end);
static void h2_on_timeout(void *sd);
static void h2_on_room(void *owner);
static void h2_on_gone(void *owner);

static const hv_h2_cbs_t h2_cbs = {h2_on_field,   h2_on_head, h2_on_data, h2_on_end,
                                   h2_on_timeout, h2_on_room, h2_on_gone};

/* The opener's connection speaks HTTP/2: a session on it, the opener's stream first. */
static void h2_start_session(hv_req_t *r, h2c_t *hc, hv_conn_t *c)
{
    hv_fetch_t *f = r->f;
    hc->o->h1_known = 0;
    r->conn = NULL; /* the session's now (its proxy's count stays until on_gone) */
    f->stats.connections_h2++;
    hc->h2 = hv_h2_new(f->loop, c, &f->h2set, &h2_cbs, hc, &f->stats.h2);
    if (hc->h2 == NULL) { /* (nghttp2 could not be set up: it closed the connection) */
        conn_closed(f, hc->ps);
        r->h2c = NULL;
        h2_release_pending(hc);
        h2c_free(hc);
        finish_fail(r, HV_ET_PROTOCOL, HV_D_H2_ERROR, "internal_error");
        return;
    }
    h2_stream_start(r, hc, 0);
    h2_pump(hc);
}

/* The request of `r`'s hop as a stream on `hc`. */
static void h2_stream_start(hv_req_t *r, h2c_t *hc, int reused)
{
    hv_fetch_t *f = r->f;
    hv_http_field_t fields[2 * HV_HEADERS_MAX];
    hv_http_nv_t nv[2 * HV_HEADERS_MAX + 12];
    hv_h2_field_t hf[HV_ARRAY_SIZE(nv)];
    static char store[HV_HTTP_REQUEST_MAX]; /* lower-cased names; loop thread only */
    char name[32];
    size_t n = 0;

    const hv_record_state_t *st = r->job->rec->state;
    hv_http_cond_t cond = {NULL, NULL};
    r->conditional = st != NULL && st->conditional && st->prev.url != NULL &&
                     strcmp(st->prev.url, r->job->url.href) == 0;
    if (r->conditional) {
        cond.etag = st->prev.etag;
        cond.last_modified = st->prev.last_modified;
    }
    size_t nfields = hop_fields(f, r->job, fields);
    int rc = hv_http_request_h2(nv, HV_ARRAY_SIZE(nv), &n, store, sizeof(store), &r->job->url,
                                f->cfg->user_agent, r->conditional ? &cond : NULL, fields,
                                nfields);
    if (r->http_ready)
        hv_http_free(&r->http);
    hv_http_init(&r->http, r->job->kind == HV_JOB_ROBOTS ? &f->robots_limits : &f->limits, on_head,
                 r);
    r->http_ready = 1;
    r->h2c = hc;
    r->reused = reused;
    if (rc != 0) {
        finish_fail(r, HV_ET_CONNECTION_RESET, HV_D_CONNECTION_ERROR,
                    hv_err_name_arg(name, sizeof(name), rc, 1));
        return;
    }
    for (size_t i = 0; i < n; i++)
        hf[i] = (hv_h2_field_t){nv[i].name, nv[i].nlen, nv[i].value, nv[i].vlen};
    int32_t sid = hv_h2_submit(hc->h2, hf, n, r);
    if (sid < 0) {
        finish_fail(r, HV_ET_PROTOCOL, HV_D_H2_ERROR, "request_refused");
        return;
    }
    r->sid = sid;
    h2_idle_set(hc, 0);
    f->stats.requests++;
    if (reused)
        f->stats.connections_reused++;
    if (r->ps != NULL)
        r->ps->requests++;
    r->job->rec->requests++;
    set_state(r, RQ_WAITING);
    if (f->paused)
        hv_h2_hold(hc->h2, 1);
    else
        h2_arm(r, f->cfg->read_timeout_ms);
}

/* The server did not process `r`'s stream (or wants HTTP/1.1): send it again, elsewhere. */
static void h2_resend(hv_req_t *r, int h1)
{
    h2c_t *hc = r->h2c;
    if (++r->resends > H2_RESENDS_MAX) {
        finish_fail(r, HV_ET_CONNECTION_RESET, HV_D_STREAM_RESET, "refused_stream");
        return;
    }
    if (hc != NULL && !h1)
        hc->no_new = 1; /* on a new connection (RFC 9113 8.7) */
    r->h2c = NULL;
    r->sid = 0;
    r->job->rec->http_status = 0;
    r->job->rec->http_version = NULL;
    make_ready(r);
}

static void h2_received(hv_req_t *r)
{
    if (r->state != RQ_RECEIVING)
        set_state(r, RQ_RECEIVING);
}

static int h2_on_field(void *sd, const char *name, size_t nlen, const char *value, size_t vlen)
{
    hv_req_t *r = sd;
    h2_received(r);
    int rc = hv_http_h2_field(&r->http, name, nlen, value, vlen);
    if (rc != 0)
        http_failed(r, rc); /* ends it, and resets its stream */
    return 0;
}

static int h2_on_head(void *sd, int status)
{
    hv_req_t *r = sd;
    h2_received(r);
    int rc = hv_http_h2_head(&r->http, status);
    if (rc < 0)
        http_failed(r, rc);
    else if (rc == 1)
        response_outcome(r); /* nothing more wanted: its stream is reset */
    else if (!r->f->paused)
        h2_arm(r, r->f->cfg->read_timeout_ms);
    return 0;
}

static int h2_on_data(void *sd, const char *data, size_t len)
{
    hv_req_t *r = sd;
    int rc = hv_http_h2_data(&r->http, data, len);
    if (rc < 0)
        http_failed(r, rc);
    else if (rc == 1)
        response_outcome(r);
    else if (!r->f->paused)
        h2_arm(r, r->f->cfg->read_timeout_ms);
    return 0;
}

static void h2_on_end(void *sd, const hv_h2_end_t *end)
{
    hv_req_t *r = sd;
    hv_fetch_t *f = r->f;
    hv_job_t *job = r->job;
    char name[32];
    r->sid = 0; /* the stream is gone */
    switch (end->kind) {
    case HV_H2_COMPLETE: {
        int rc = hv_http_h2_end(&r->http);
        if (rc == 1)
            response_outcome(r);
        else
            http_failed(r, rc);
        return;
    }
    case HV_H2_UNPROCESSED:
        h2_resend(r, 0);
        return;
    case HV_H2_RESET:
        if (end->code == 0xd /* HTTP_1_1_REQUIRED */ && r->h2c != NULL) {
            if (!r->h2c->o->h1_only)
                HV_LOG(HV_LOG_NOTICE, "event=h2_http11_required origin=%s", r->h2c->o->key);
            r->h2c->o->h1_only = 1;
            h2_resend(r, 1);
            return;
        }
        finish_fail(r, HV_ET_CONNECTION_RESET, HV_D_STREAM_RESET, hv_h2_code_name(end->code));
        return;
    case HV_H2_LOCAL:
        finish_fail(r, HV_ET_PROTOCOL, HV_D_H2_ERROR, hv_h2_end_name(end));
        return;
    case HV_H2_LOST:
        break;
    }
    if (end->ours) {
        finish_fail(r, HV_ET_PROTOCOL, HV_D_H2_ERROR, hv_h2_end_name(end));
        return;
    }
    if (end->goaway && end->code != 0) {
        finish_fail(r, HV_ET_CONNECTION_RESET, HV_D_GOAWAY, hv_h2_code_name(end->code));
        return;
    }
    int err = end->err != 0 ? end->err : UV_EOF;
    /* A pooled connection the server had closed before our stream: as over HTTP/1.1. */
    if (r->reused && r->http.bytes_in == 0 && stale_error(err) && !job->fresh_conn_retried) {
        job->fresh_conn_retried = 1;
        f->stats.stale_retries++;
        r->h2c = NULL;
        make_ready(r);
        return;
    }
    if (err == HV_ETLS)
        finish_fail(r, HV_ET_TLS, HV_D_TLS_FAILED, NULL);
    else if (err == UV_ECONNRESET)
        finish_fail(r, HV_ET_CONNECTION_RESET, HV_D_CONNECTION_RESET, NULL);
    else if (err == UV_EOF)
        http_failed(r, hv_http_h2_lost(&r->http));
    else
        finish_fail(r, HV_ET_CONNECTION_RESET, HV_D_CONNECTION_ERROR,
                    hv_err_name_arg(name, sizeof(name), err, 1));
}

static void h2_on_timeout(void *sd)
{
    req_timeout(sd, NULL);
}

/* Close open session `hc` (it has no stream): no callback of it follows. */
static void h2c_close(h2c_t *hc)
{
    hv_h2_close(hc->h2);
    hc->h2 = NULL;
    conn_closed(hc->f, hc->ps);
    h2_release_pending(hc);
    h2c_free(hc);
}

static void h2_on_room(void *owner)
{
    h2c_t *hc = owner;
    hv_fetch_t *f = hc->f;
    h2_pump(hc);
    if (hc->h2 == NULL || hv_h2_open_streams(hc->h2) > 0 || hc->npending > 0) {
        h2_idle_set(hc, 0);
        return;
    }
    if (hc->no_new) { /* refused a stream: nothing more goes on it */
        h2c_close(hc);
        return;
    }
    /* Idle, as a pooled connection: kept as many as HTTP/1.1's, the oldest closed first. */
    h2_idle_set(hc, 1);
    if (hc->ps != NULL && hc->ps->waiting > 0)
        uv_timer_start(&f->wait_timer, on_wait_timer, 0, 0); /* room for them */
    while (f->nh2_idle > f->max_idle)
        h2c_close(TAILQ_FIRST(&f->h2_idle));
}

static void h2_on_gone(void *owner)
{
    h2c_t *hc = owner;
    hc->h2 = NULL;
    conn_closed(hc->f, hc->ps);
    h2_release_pending(hc);
    h2c_free(hc);
}

void hv_fetch_next_attempt(hv_job_t *job)
{
    hv_record_t *rec = job->rec;
    rec->ok = 1;
    rec->stage = HV_STAGE_NONE;
    rec->error_type = HV_ET_NONE;
    rec->detail = HV_D_NONE;
    free(rec->error);
    rec->error = NULL;
    rec->http_status = 0;
    rec->http_version = NULL;
    free(rec->content_type);
    rec->content_type = NULL;
    job->deadline_ms = 0; /* set when the attempt starts (hv_fetch_start) */
    job->fresh_conn_retried = 0;
}

/* Whether the first request waiting for `ps` can go on: its proxy has room, or a connection
 * of its own pool (or another idle one of its proxy) to take, or an HTTP/2 connection of its
 * origin to take a stream on or wait for. */
static int wait_over(hv_fetch_t *f, const hv_req_t *r)
{
    char key[POOL_KEY_MAX];
    if (!proxy_full(f, r->ps))
        return 1;
    if (pool_find(f, pool_key(&r->job->url, r->proxy, key, sizeof(key))) != NULL)
        return 1;
    const origin_t *o;
    HASH_FIND_STR(f->origins, key, o);
    const h2c_t *hc;
    if (o != NULL)
        TAILQ_FOREACH(hc, &o->conns, link)
            if (hc->opener != NULL || (hc->h2 != NULL && !hc->no_new && hv_h2_room(hc->h2) > 0))
                return 1; /* a stream, or a place among those waiting for one */
    const idle_t *i;
    TAILQ_FOREACH(i, &f->idle_lru, lru_link)
        if (i->ps == r->ps)
            return 1;
    TAILQ_FOREACH(hc, &f->h2_idle, idle_link)
        if (hc->ps == r->ps)
            return 1;
    return 0;
}

/* Wake the waiting list: each proxy's first waiters while it has room, and every waiter whose
 * deadline passed. One at a time, from the top: starting or failing one may change the list. */
static void on_wait_timer(uv_timer_t *t)
{
    hv_fetch_t *f = t->data;
    char dur[32];
    for (;;) {
        uint64_t now = uv_now(f->loop);
        hv_req_t *r;
        TAILQ_FOREACH(r, &f->waiting, wait_link)
        {
            if (r->job->deadline_ms <= now)
                break;
            /* only the first waiter of its proxy may go */
            const hv_req_t *q = TAILQ_FIRST(&f->waiting);
            while (q != r && q->ps != r->ps)
                q = TAILQ_NEXT(q, wait_link);
            if (q == r && wait_over(f, r))
                break;
        }
        if (r == NULL)
            break;
        if (r->job->deadline_ms <= now) {
            unqueue(r);
            hv_detail_duration(dur, sizeof(dur), f->cfg->total_timeout_ms);
            finish_fail(r, HV_ET_PROXY, HV_D_NO_PROXY_CONNECTION_WITHIN, dur);
            continue;
        }
        /* Still queued: it goes ahead of those behind it. `r` may be gone after this. */
        if (connect_req(r, 1)) /* lost the room to nothing: cannot happen, but never spin */
            break;
    }
    wait_timer_arm(f);
}

void hv_fetch_pause(hv_fetch_t *f)
{
    hv_req_t *r;
    if (f->paused)
        return;
    f->paused = 1;
    f->paused_at = uv_now(f->loop);
    TAILQ_FOREACH(r, &f->active, link)
    {
        if (r->conn != NULL && r->state != RQ_CONNECTING) {
            hv_conn_read_stop(r->conn);
            hv_conn_set_timer(r->conn, 0);
        } else if (r->sid > 0) {
            hv_h2_set_deadline(r->h2c->h2, r->sid, 0);
        }
    }
    /* HTTP/2 connections go on reading (PING, SETTINGS, GOAWAY): their streams' windows
     * close instead. */
    h2c_t *hc;
    TAILQ_FOREACH(hc, &f->h2cs, all)
        if (hc->h2 != NULL)
            hv_h2_hold(hc->h2, 1);
}

void hv_fetch_resume(hv_fetch_t *f)
{
    hv_req_t *r;
    if (!f->paused)
        return;
    f->paused = 0;
    uint64_t paused_for = uv_now(f->loop) - f->paused_at;
    TAILQ_FOREACH(r, &f->active, link)
    {
        if (r->conn != NULL && r->state != RQ_CONNECTING) {
            r->job->deadline_ms += paused_for;
            hv_conn_read_start(r->conn);
            arm(r, f->cfg->read_timeout_ms);
        } else if (r->sid > 0) {
            r->job->deadline_ms += paused_for;
            h2_arm(r, f->cfg->read_timeout_ms);
        }
    }
    h2c_t *hc;
    TAILQ_FOREACH(hc, &f->h2cs, all)
        if (hc->h2 != NULL)
            hv_h2_hold(hc->h2, 0);
}

void hv_fetch_cancel(hv_fetch_t *f, const struct hv_flow_s *flow)
{
    hv_req_t *r, *next;
    for (r = TAILQ_FIRST(&f->active); r != NULL; r = next) {
        next = TAILQ_NEXT(r, link);
        if (flow != NULL && r->job->flow != flow)
            continue;
        hv_job_t *job = r->job;
        end_req(r);
        job->end = HV_JOB_CANCELLED;
        f->on_end(f->ud, job);
    }
}

unsigned hv_fetch_active(const hv_fetch_t *f)
{
    return f->nactive;
}

const hv_fetch_stats_t *hv_fetch_stats(const hv_fetch_t *f)
{
    return &f->stats;
}

static void fetch_closed(uv_handle_t *h)
{
    hv_fetch_t *f = h->data;
    if (--f->closing > 0)
        return;
    free(f->proxies);
    free(f);
}

void hv_fetch_free(hv_fetch_t *f)
{
    idle_t *i;
    h2c_t *hc;
    origin_t *o, *tmp;
    while ((i = TAILQ_FIRST(&f->idle_lru)) != NULL)
        pool_drop(f, i);
    assert(TAILQ_EMPTY(&f->waiting) && TAILQ_EMPTY(&f->ready));
    while ((hc = TAILQ_FIRST(&f->h2cs)) != NULL) {
        if (hc->h2 != NULL)
            hv_h2_close(hc->h2);
        h2c_free(hc);
    }
    HASH_ITER(hh, f->origins, o, tmp)
    {
        HASH_DEL(f->origins, o);
        free(o->key);
        free(o);
    }
    if (f->tlspool != NULL)
        hv_tlspool_free(f->tlspool); /* after the connections: a handshake's job ends first */
    f->closing = 3;
    uv_close((uv_handle_t *)&f->wait_timer, fetch_closed);
    uv_close((uv_handle_t *)&f->ready_timer, fetch_closed);
    uv_close((uv_handle_t *)&f->pend_timer, fetch_closed);
}
