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
    unsigned inflight;
    hv_fhost_t *fhosts;
    TAILQ_HEAD(, hv_fhost_s) ready;
    unsigned nwaiting;
    int in_ready;
    TAILQ_ENTRY(hv_flow_s) ready_link;
};

struct hv_sched_s {
    unsigned concurrency;
    unsigned per_host;
    hv_sched_start_cb start;
    hv_sched_gate_cb gate;
    void *ud;
    hv_host_t *hosts;
    unsigned nhosts;
    TAILQ_HEAD(, hv_flow_s) ready;
    unsigned nready;
    unsigned nwaiting;
    unsigned inflight;
    int dispatching;
    int again;
};

hv_sched_t *hv_sched_new(unsigned concurrency, unsigned per_host, hv_sched_start_cb start,
                         hv_sched_gate_cb gate, void *ud)
{
    hv_sched_t *s = hv_xcalloc(1, sizeof(*s));
    s->concurrency = concurrency;
    s->per_host = per_host;
    s->start = start;
    s->gate = gate;
    s->ud = ud;
    TAILQ_INIT(&s->ready);
    return s;
}

hv_flow_t *hv_sched_flow_new(hv_sched_t *s, hv_sched_gate_cb gate, void *ud)
{
    (void)s;
    hv_flow_t *f = hv_xcalloc(1, sizeof(*f));
    f->gate = gate;
    f->ud = ud;
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

static void fhost_ready_update(hv_sched_t *s, hv_fhost_t *fh)
{
    int ready = fh->nwaiting > 0 && fh->host->inflight < s->per_host;
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
    HASH_ADD_KEYPTR(hh, s->hosts, h->key, strlen(h->key), h);
    s->nhosts++;
    return h;
}

static void host_free(hv_sched_t *s, hv_host_t *h)
{
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
}

void hv_sched_done(hv_sched_t *s, hv_job_t *job)
{
    hv_host_t *h = job->host;
    assert(h != NULL && h->inflight > 0 && s->inflight > 0);
    h->inflight--;
    s->inflight--;
    job->flow->inflight--;
    job->host = NULL;
    if (h->inflight + 1 == s->per_host)
        host_ready_update(s, h); /* it was at its limit: its queues are ready again */
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

void hv_sched_kick(hv_sched_t *s)
{
    if (s->dispatching) {
        s->again = 1; /* called from inside a start callback: the outer loop goes on */
        return;
    }
    s->dispatching = 1;
    do {
        s->again = 0;
        while (s->inflight < s->concurrency && s->gate(s->ud)) {
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
            /* This flow and this host go to the back of their lines. */
            TAILQ_REMOVE(&f->ready, fh, ready_link);
            fh->ready = 0;
            if (h->inflight >= s->per_host)
                host_ready_update(s, h);
            fhost_ready_update(s, fh);
            if (f->in_ready) {
                TAILQ_REMOVE(&s->ready, f, ready_link);
                TAILQ_INSERT_TAIL(&s->ready, f, ready_link);
            }
            fhost_gc(s, fh);
            s->start(s->ud, job);
        }
    } while (s->again);
    s->dispatching = 0;
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
