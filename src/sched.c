/*
 * sched.c: flows x hosts, round-robin at both levels.
 *
 * An fhost is one flow's queue for one host. It is "ready" while it has waiting jobs and its
 * host is below per_host; ready fhosts sit in their flow's ready list, and flows with at
 * least one ready fhost sit in the scheduler's ready list. When a host reaches its limit all
 * its fhosts leave their ready lists; when it drops below, they come back.
 */
#include "harvestd/sched.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harvestd/common.h"

struct hv_fhost_s {
    hv_flow_t *flow;
    hv_host_t *host;
    struct hv_job_list_s waiting;
    unsigned nwaiting;
    int ready;
    TAILQ_ENTRY(hv_fhost_s) ready_link; /* in flow->ready */
    TAILQ_ENTRY(hv_fhost_s) host_link;  /* in host->_fhosts */
    UT_hash_handle hh;                  /* in flow->fhosts, keyed by host pointer */
};

struct hv_flow_s {
    hv_sched_gate_cb gate;
    void *ud;
    int privileged;
    unsigned inflight;
    hv_fhost_t *fhosts;
    TAILQ_HEAD(, hv_fhost_s) ready;
    unsigned nwaiting;
    int in_ready;
    TAILQ_ENTRY(hv_flow_s) ready_link;
};

struct hv_sched_s {
    uv_loop_t *loop;
    unsigned concurrency;
    hv_polite_t *polite;
    hv_sched_start_cb start;
    hv_sched_gate_cb gate;
    hv_sched_robots_cb robots;
    void *ud;
    TAILQ_HEAD(, hv_host_s) paced;
    hv_host_t *hosts;
    unsigned nhosts;
    TAILQ_HEAD(, hv_flow_s) ready;
    unsigned nready;
    unsigned nwaiting;
    unsigned inflight;
    int dispatching;
    int again;
};

hv_sched_t *hv_sched_new(uv_loop_t *loop, unsigned concurrency, hv_polite_t *polite,
                         hv_sched_start_cb start, hv_sched_gate_cb gate,
                         hv_sched_robots_cb robots, void *ud)
{
    hv_sched_t *s = hv_xcalloc(1, sizeof(*s));
    s->loop = loop;
    s->concurrency = concurrency;
    s->polite = polite;
    s->start = start;
    s->gate = gate;
    s->robots = robots;
    s->ud = ud;
    TAILQ_INIT(&s->ready);
    TAILQ_INIT(&s->paced);
    return s;
}

hv_flow_t *hv_sched_flow_new(hv_sched_t *s, hv_sched_gate_cb gate, void *ud, int privileged)
{
    (void)s;
    hv_flow_t *f = hv_xcalloc(1, sizeof(*f));
    f->gate = gate;
    f->ud = ud;
    f->privileged = privileged;
    TAILQ_INIT(&f->ready);
    return f;
}

void hv_sched_flow_free(hv_sched_t *s, hv_flow_t *flow)
{
    (void)s;
    assert(flow->nwaiting == 0 && flow->fhosts == NULL && !flow->in_ready && flow->inflight == 0);
    free(flow);
}

unsigned hv_sched_flow_waiting(const hv_flow_t *flow)
{
    return flow->nwaiting;
}

void *hv_sched_flow_data(const hv_flow_t *flow)
{
    return flow->ud;
}

/* ---- readiness ---- */

static void flow_ready_update(hv_sched_t *s, hv_flow_t *f)
{
    int ready = !TAILQ_EMPTY(&f->ready);
    if (ready && !f->in_ready) {
        TAILQ_INSERT_TAIL(&s->ready, f, ready_link);
        s->nready++;
    } else if (!ready && f->in_ready) {
        TAILQ_REMOVE(&s->ready, f, ready_link);
        s->nready--;
    }
    f->in_ready = ready;
}

/* Whether `h` may start a request for flow `f` now. A host held back only by its pacing
 * delay goes on the paced list, which hv_sched_tick() releases. */
static int host_open(hv_sched_t *s, hv_host_t *h, const hv_flow_t *f)
{
    const hv_hostpol_t *pol = h->pol;
    if (h->inflight >= pol->limit)
        return 0;
    if (s->robots != NULL && !f->privileged && pol->robots == NULL)
        return 0;
    if (pol->delay_ms > 0 && uv_now(s->loop) < pol->next_start_ms) {
        if (!h->_paced) {
            TAILQ_INSERT_TAIL(&s->paced, h, _paced_link);
            h->_paced = 1;
        }
        return 0;
    }
    return 1;
}

static void fhost_ready_update(hv_sched_t *s, hv_fhost_t *fh)
{
    int ready = fh->nwaiting > 0 && host_open(s, fh->host, fh->flow);
    if (ready && !fh->ready)
        TAILQ_INSERT_TAIL(&fh->flow->ready, fh, ready_link);
    else if (!ready && fh->ready)
        TAILQ_REMOVE(&fh->flow->ready, fh, ready_link);
    fh->ready = ready;
    flow_ready_update(s, fh->flow);
}

static void host_ready_update(hv_sched_t *s, hv_host_t *h)
{
    hv_fhost_t *fh;
    TAILQ_FOREACH(fh, &h->_fhosts, host_link)
        fhost_ready_update(s, fh);
}

/* ---- hosts and fhosts ---- */

static hv_host_t *host_get(hv_sched_t *s, const hv_url_t *u)
{
    char key[HV_URL_MAX + 32];
    hv_host_t *h;
    snprintf(key, sizeof(key), "%s://%s:%u", u->scheme == HV_SCHEME_HTTPS ? "https" : "http",
             u->host, (unsigned)u->port);
    HASH_FIND_STR(s->hosts, key, h);
    if (h != NULL)
        return h;
    h = hv_xcalloc(1, sizeof(*h));
    h->key = hv_xstrdup(key);
    h->name = hv_xstrdup(u->host);
    h->is_ip = u->host_is_ip;
    h->port = u->port;
    h->scheme = u->scheme;
    TAILQ_INIT(&h->idle);
    TAILQ_INIT(&h->_fhosts);
    h->pol = hv_polite_get(s->polite, h->key, h->name);
    HASH_ADD_KEYPTR(hh, s->hosts, h->key, strlen(h->key), h);
    s->nhosts++;
    return h;
}

static void host_free(hv_sched_t *s, hv_host_t *h)
{
    if (h->_paced)
        TAILQ_REMOVE(&s->paced, h, _paced_link);
    hv_polite_put(s->polite, h->pol);
    HASH_DEL(s->hosts, h);
    s->nhosts--;
    free(h->key);
    free(h->name);
    free(h);
}

void hv_sched_host_gc(hv_sched_t *s, hv_host_t *h)
{
    if (h->_nfhosts > 0 || h->inflight > 0 || h->nidle > 0)
        return;
    host_free(s, h);
}

static hv_fhost_t *fhost_get(hv_flow_t *f, hv_host_t *h)
{
    hv_fhost_t *fh;
    HASH_FIND_PTR(f->fhosts, &h, fh);
    if (fh != NULL)
        return fh;
    fh = hv_xcalloc(1, sizeof(*fh));
    fh->flow = f;
    fh->host = h;
    TAILQ_INIT(&fh->waiting);
    HASH_ADD_PTR(f->fhosts, host, fh);
    TAILQ_INSERT_TAIL(&h->_fhosts, fh, host_link);
    h->_nfhosts++;
    return fh;
}

/* An fhost without waiting jobs goes away (its host may follow). */
static void fhost_gc(hv_sched_t *s, hv_fhost_t *fh)
{
    if (fh->nwaiting > 0)
        return;
    hv_flow_t *f = fh->flow;
    hv_host_t *h = fh->host;
    if (fh->ready) {
        TAILQ_REMOVE(&f->ready, fh, ready_link);
        fh->ready = 0;
        flow_ready_update(s, f);
    }
    HASH_DEL(f->fhosts, fh);
    TAILQ_REMOVE(&h->_fhosts, fh, host_link);
    h->_nfhosts--;
    free(fh);
    hv_sched_host_gc(s, h);
}

/* ---- jobs ---- */

void hv_sched_submit(hv_sched_t *s, hv_flow_t *flow, hv_job_t *job, int front)
{
    hv_host_t *h = host_get(s, &job->url);
    hv_fhost_t *fh = fhost_get(flow, h);
    job->host = h;
    job->flow = flow;
    if (front)
        TAILQ_INSERT_HEAD(&fh->waiting, job, link);
    else
        TAILQ_INSERT_TAIL(&fh->waiting, job, link);
    fh->nwaiting++;
    flow->nwaiting++;
    s->nwaiting++;
    fhost_ready_update(s, fh);
    if (s->robots != NULL && !flow->privileged && h->pol->robots_state != HV_ROBOTS_FETCHING &&
        (h->pol->robots == NULL || uv_now(s->loop) >= h->pol->robots_expires_ms))
        s->robots(s->ud, h);
}

void hv_sched_done(hv_sched_t *s, hv_job_t *job)
{
    hv_host_t *h = job->host;
    assert(h != NULL && h->inflight > 0 && s->inflight > 0);
    h->inflight--;
    s->inflight--;
    job->flow->inflight--;
    job->host = NULL;
    host_ready_update(s, h); /* below its limit again, perhaps */
    hv_sched_host_gc(s, h);
}

/* The ready flow with an open gate and the fewest requests in flight; among equals the one
 * that has waited longest (list order). Least-loaded first is what keeps a batch that arrives
 * late from waiting behind a busy one, even when both want the same host. */
static hv_flow_t *next_flow(hv_sched_t *s)
{
    hv_flow_t *best = NULL;
    hv_flow_t *f = TAILQ_FIRST(&s->ready);
    for (unsigned i = 0; f != NULL && i < s->nready; i++, f = TAILQ_NEXT(f, ready_link)) {
        if (f->gate != NULL && !f->gate(f->ud))
            continue;
        if (best == NULL || f->inflight < best->inflight)
            best = f;
    }
    return best;
}

unsigned hv_sched_kick(hv_sched_t *s, unsigned max)
{
    if (s->dispatching) {
        s->again = 1; /* called from inside a start callback: the outer loop goes on */
        return 0;
    }
    s->dispatching = 1;
    unsigned started = 0;
    do {
        s->again = 0;
        while (started < max && s->inflight < s->concurrency && s->gate(s->ud)) {
            hv_flow_t *f = next_flow(s);
            if (f == NULL)
                break;
            hv_fhost_t *fh = TAILQ_FIRST(&f->ready);
            hv_host_t *h = fh->host;
            hv_job_t *job = TAILQ_FIRST(&fh->waiting);
            TAILQ_REMOVE(&fh->waiting, job, link);
            fh->nwaiting--;
            f->nwaiting--;
            s->nwaiting--;
            h->inflight++;
            s->inflight++;
            f->inflight++;
            hv_polite_started(s->polite, h->pol, uv_now(s->loop));
            /* This flow and this host go to the back of their lines. */
            TAILQ_REMOVE(&f->ready, fh, ready_link);
            fh->ready = 0;
            if (h->inflight >= h->pol->limit || h->pol->delay_ms > 0)
                host_ready_update(s, h);
            fhost_ready_update(s, fh);
            if (f->in_ready) {
                TAILQ_REMOVE(&s->ready, f, ready_link);
                TAILQ_INSERT_TAIL(&s->ready, f, ready_link);
            }
            fhost_gc(s, fh);
            started++;
            s->start(s->ud, job);
        }
    } while (s->again && started < max);
    s->dispatching = 0;
    return started;
}

void hv_sched_drop_waiting(hv_sched_t *s, hv_flow_t *flow,
                           void (*drop)(void *ud, hv_job_t *job), void *ud)
{
    hv_fhost_t *fh, *tmp;
    HASH_ITER(hh, flow->fhosts, fh, tmp)
    {
        hv_job_t *job;
        while ((job = TAILQ_FIRST(&fh->waiting)) != NULL) {
            TAILQ_REMOVE(&fh->waiting, job, link);
            fh->nwaiting--;
            flow->nwaiting--;
            s->nwaiting--;
            job->host = NULL;
            drop(ud, job);
        }
        fhost_gc(s, fh);
    }
}

hv_host_t *hv_sched_host_find(hv_sched_t *s, const char *key)
{
    hv_host_t *h;
    HASH_FIND_STR(s->hosts, key, h);
    return h;
}

void hv_sched_host_changed(hv_sched_t *s, hv_host_t *h)
{
    host_ready_update(s, h);
}

uint64_t hv_sched_next_wakeup(const hv_sched_t *s)
{
    uint64_t at = 0;
    const hv_host_t *h;
    TAILQ_FOREACH(h, &s->paced, _paced_link)
    {
        if (at == 0 || h->pol->next_start_ms < at)
            at = h->pol->next_start_ms;
    }
    return at;
}

void hv_sched_tick(hv_sched_t *s)
{
    uint64_t now = uv_now(s->loop);
    hv_host_t *h, *next;
    for (h = TAILQ_FIRST(&s->paced); h != NULL; h = next) {
        next = TAILQ_NEXT(h, _paced_link);
        if (h->pol->next_start_ms > now)
            continue;
        TAILQ_REMOVE(&s->paced, h, _paced_link);
        h->_paced = 0;
        host_ready_update(s, h);
    }
}

unsigned hv_sched_waiting(const hv_sched_t *s)
{
    return s->nwaiting;
}

unsigned hv_sched_inflight(const hv_sched_t *s)
{
    return s->inflight;
}

unsigned hv_sched_hosts(const hv_sched_t *s)
{
    return s->nhosts;
}

void hv_sched_free(hv_sched_t *s)
{
    hv_host_t *h, *tmp;
    HASH_ITER(hh, s->hosts, h, tmp)
        host_free(s, h);
    free(s);
}
