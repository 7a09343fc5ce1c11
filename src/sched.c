/* sched.c: per-host queues, global and per-host limits, round-robin dispatch. */
#include "harvestd/sched.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harvestd/common.h"

struct hv_sched_s {
    unsigned concurrency;
    unsigned per_host;
    hv_sched_start_cb start;
    hv_sched_gate_cb gate;
    void *ud;
    hv_host_t *hosts;
    unsigned nhosts;
    TAILQ_HEAD(, hv_host_s) ready;
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

static void update_ready(hv_sched_t *s, hv_host_t *h)
{
    int ready = h->nwaiting > 0 && h->inflight < s->per_host;
    if (ready && !h->_ready)
        TAILQ_INSERT_TAIL(&s->ready, h, _ready_link);
    else if (!ready && h->_ready)
        TAILQ_REMOVE(&s->ready, h, _ready_link);
    h->_ready = ready;
}

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
    TAILQ_INIT(&h->waiting);
    TAILQ_INIT(&h->idle);
    HASH_ADD_KEYPTR(hh, s->hosts, h->key, strlen(h->key), h);
    s->nhosts++;
    return h;
}

void hv_sched_host_gc(hv_sched_t *s, hv_host_t *h)
{
    if (h->nwaiting > 0 || h->inflight > 0 || h->nidle > 0)
        return;
    assert(!h->_ready);
    HASH_DEL(s->hosts, h);
    s->nhosts--;
    free(h->key);
    free(h->name);
    free(h);
}

void hv_sched_submit(hv_sched_t *s, hv_job_t *job, int front)
{
    hv_host_t *h = host_get(s, &job->url);
    job->host = h;
    if (front)
        TAILQ_INSERT_HEAD(&h->waiting, job, link);
    else
        TAILQ_INSERT_TAIL(&h->waiting, job, link);
    h->nwaiting++;
    s->nwaiting++;
    update_ready(s, h);
}

void hv_sched_done(hv_sched_t *s, hv_job_t *job)
{
    hv_host_t *h = job->host;
    assert(h != NULL && h->inflight > 0 && s->inflight > 0);
    h->inflight--;
    s->inflight--;
    job->host = NULL;
    update_ready(s, h);
    hv_sched_host_gc(s, h);
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
        while (s->inflight < s->concurrency && !TAILQ_EMPTY(&s->ready) && s->gate(s->ud)) {
            hv_host_t *h = TAILQ_FIRST(&s->ready);
            TAILQ_REMOVE(&s->ready, h, _ready_link);
            h->_ready = 0;
            hv_job_t *job = TAILQ_FIRST(&h->waiting);
            TAILQ_REMOVE(&h->waiting, job, link);
            h->nwaiting--;
            s->nwaiting--;
            h->inflight++;
            s->inflight++;
            update_ready(s, h); /* back of the line if it still has work */
            s->start(s->ud, job);
        }
    } while (s->again);
    s->dispatching = 0;
}

void hv_sched_drop_waiting(hv_sched_t *s, void (*drop)(void *ud, hv_job_t *job), void *ud)
{
    hv_host_t *h, *tmp;
    HASH_ITER(hh, s->hosts, h, tmp)
    {
        hv_job_t *job;
        while ((job = TAILQ_FIRST(&h->waiting)) != NULL) {
            TAILQ_REMOVE(&h->waiting, job, link);
            h->nwaiting--;
            s->nwaiting--;
            job->host = NULL;
            drop(ud, job);
        }
        update_ready(s, h);
        hv_sched_host_gc(s, h);
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
    {
        HASH_DEL(s->hosts, h);
        free(h->key);
        free(h->name);
        free(h);
    }
    free(s);
}
