/*
 * sched.c: flows x hosts, round-robin at both levels, plus a heap of delayed jobs.
 *
 * An fhost is one flow's queue for one host. It is "ready" while it has waiting jobs and its
 * host is open (below its limit, past its pacing delay, robots.txt known); ready fhosts sit in
 * their flow's ready list, and flows with at least one ready fhost sit in the scheduler's
 * ready list. When a host closes all its fhosts leave their ready lists; when it opens again,
 * they come back.
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
    unsigned nwaiting;
    unsigned ndelayed;
    hv_fhost_t *fhosts;
    TAILQ_HEAD(, hv_fhost_s) ready;
    int in_ready;
    TAILQ_ENTRY(hv_flow_s) ready_link;
};

struct hv_sched_s {
    unsigned concurrency;
    hv_polite_t *polite;
    int robots;
    hv_sched_clock_cb clock;
    hv_sched_start_cb start;
    hv_sched_gate_cb gate;
    void *ud;
    TAILQ_HEAD(, hv_host_s) paced;
    TAILQ_HEAD(, hv_host_s) robots_wanted;
    hv_host_t *hosts;
    unsigned nhosts;
    TAILQ_HEAD(, hv_flow_s) ready;
    unsigned nready;
    unsigned nwaiting;
    unsigned inflight;
    hv_job_t **heap;           /* delayed jobs, min-heap on not_before */
    unsigned nheap;
    unsigned heap_cap;
};

static uint64_t now_ms(const hv_sched_t *s)
{
    return s->clock(s->ud);
}

hv_sched_t *hv_sched_new(unsigned concurrency, hv_polite_t *polite, int robots,
                         hv_sched_clock_cb clock, hv_sched_start_cb start, hv_sched_gate_cb gate,
                         void *ud)
{
    hv_sched_t *s = hv_xcalloc(1, sizeof(*s));
    s->concurrency = concurrency;
    s->polite = polite;
    s->robots = robots;
    s->clock = clock;
    s->start = start;
    s->gate = gate;
    s->ud = ud;
    TAILQ_INIT(&s->ready);
    TAILQ_INIT(&s->paced);
    TAILQ_INIT(&s->robots_wanted);
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
    assert(flow->nwaiting == 0 && flow->ndelayed == 0 && flow->fhosts == NULL &&
           !flow->in_ready && flow->inflight == 0);
    free(flow);
}

unsigned hv_sched_flow_waiting(const hv_flow_t *flow)
{
    return flow->nwaiting;
}

unsigned hv_sched_flow_delayed(const hv_flow_t *flow)
{
    return flow->ndelayed;
}

unsigned hv_sched_flow_inflight(const hv_flow_t *flow)
{
    return flow->inflight;
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

/* Whether `h` may start a request for flow `f`, whose next job is `next`, now. A host held
 * back only by its pacing delay goes on the paced list, which hv_sched_tick() releases. A
 * held host (polite.h) lets through the jobs already under way (a redirect's next hop, a
 * retry), whose deadline runs, and the privileged flow's. */
static int host_open(hv_sched_t *s, hv_host_t *h, const hv_flow_t *f, const hv_job_t *next)
{
    const hv_hostpol_t *pol = h->pol;
    if (h->inflight >= pol->limit)
        return 0;
    if (s->robots && !f->privileged && pol->robots == NULL)
        return 0;
    if (pol->held && !f->privileged && (next == NULL || next->started_ms == 0))
        return 0;
    if (pol->delay_ms > 0 && now_ms(s) < pol->next_start_ms) {
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
    int ready = fh->nwaiting > 0 &&
                host_open(s, fh->host, fh->flow, TAILQ_FIRST(&fh->waiting));
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
    hv_url_origin(u, key, sizeof(key));
    HASH_FIND_STR(s->hosts, key, h);
    if (h != NULL)
        return h;
    h = hv_xcalloc(1, sizeof(*h));
    h->key = hv_xstrdup(key);
    h->name = hv_xstrdup(u->host);
    h->is_ip = u->host_is_ip;
    h->port = u->port;
    h->scheme = u->scheme;
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
    if (h->_robots_wanted)
        TAILQ_REMOVE(&s->robots_wanted, h, _robots_link);
    hv_polite_put(s->polite, h->pol);
    HASH_DEL(s->hosts, h);
    s->nhosts--;
    free(h->key);
    free(h->name);
    free(h);
}

/* A host nothing refers to any more goes away. */
static void host_gc(hv_sched_t *s, hv_host_t *h)
{
    if (h->_nfhosts == 0 && h->inflight == 0)
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
    host_gc(s, h);
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
    const hv_hostpol_t *pol = h->pol;
    if (s->robots && !flow->privileged && !h->_robots_wanted &&
        pol->robots_state != HV_ROBOTS_FETCHING &&
        (pol->robots == NULL || now_ms(s) >= pol->robots_expires_ms)) {
        TAILQ_INSERT_TAIL(&s->robots_wanted, h, _robots_link);
        h->_robots_wanted = 1;
    }
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
    host_gc(s, h);
}

/* A ready privileged flow, else the ready flow with an open gate and the fewest requests in
 * flight; among equals the one that has waited longest (list order). Least-loaded first is what keeps a batch that arrives
 * late from waiting behind a busy one, even when both want the same host. */
static hv_flow_t *next_flow(hv_sched_t *s)
{
    hv_flow_t *best = NULL;
    hv_flow_t *f = TAILQ_FIRST(&s->ready);
    for (unsigned i = 0; f != NULL && i < s->nready; i++, f = TAILQ_NEXT(f, ready_link)) {
        if (f->gate != NULL && !f->gate(f->ud))
            continue;
        /* The privileged flow's few requests (robots.txt, block probes) are what other jobs
         * of their host wait for: they go first. */
        if (f->privileged)
            return f;
        if (best == NULL || f->inflight < best->inflight)
            best = f;
    }
    return best;
}

unsigned hv_sched_kick(hv_sched_t *s, unsigned max)
{
    unsigned started = 0;
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
        hv_polite_started(s->polite, h->pol, now_ms(s));
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
    return started;
}

/* ---- delayed jobs: a binary min-heap on not_before ---- */

static int heap_less(const hv_sched_t *s, unsigned a, unsigned b)
{
    return s->heap[a]->not_before < s->heap[b]->not_before;
}

static void heap_swap(hv_sched_t *s, unsigned a, unsigned b)
{
    hv_job_t *t = s->heap[a];
    s->heap[a] = s->heap[b];
    s->heap[b] = t;
    s->heap[a]->heap_idx = a;
    s->heap[b]->heap_idx = b;
}

static void heap_up(hv_sched_t *s, unsigned i)
{
    while (i > 0 && heap_less(s, i, (i - 1) / 2)) {
        heap_swap(s, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
}

static void heap_down(hv_sched_t *s, unsigned i)
{
    for (;;) {
        unsigned l = 2 * i + 1, r = l + 1, m = i;
        if (l < s->nheap && heap_less(s, l, m))
            m = l;
        if (r < s->nheap && heap_less(s, r, m))
            m = r;
        if (m == i)
            return;
        heap_swap(s, i, m);
        i = m;
    }
}

static void heap_remove(hv_sched_t *s, unsigned i)
{
    hv_job_t *job = s->heap[i];
    s->nheap--;
    if (i != s->nheap) {
        heap_swap(s, i, s->nheap);
        heap_down(s, i);
        heap_up(s, i);
    }
    job->flow->ndelayed--;
}

void hv_sched_delay(hv_sched_t *s, hv_job_t *job, uint64_t not_before)
{
    assert(job->host == NULL && job->flow != NULL);
    if (s->nheap == s->heap_cap) {
        s->heap_cap = s->heap_cap ? s->heap_cap * 2 : 64;
        s->heap = hv_xrealloc(s->heap, s->heap_cap * sizeof(*s->heap));
    }
    job->not_before = not_before;
    job->heap_idx = s->nheap;
    s->heap[s->nheap++] = job;
    job->flow->ndelayed++;
    heap_up(s, job->heap_idx);
}

/* ---- time ---- */

uint64_t hv_sched_next_wakeup(const hv_sched_t *s)
{
    uint64_t at = s->nheap > 0 ? s->heap[0]->not_before : 0;
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
    uint64_t now = now_ms(s);
    while (s->nheap > 0 && s->heap[0]->not_before <= now) {
        hv_job_t *job = s->heap[0];
        heap_remove(s, 0);
        /* Ahead of the flow's other jobs for that host: it has waited already. */
        hv_sched_submit(s, job->flow, job, 1);
    }
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

/* ---- robots.txt, lookups, dropping ---- */

hv_host_t *hv_sched_robots_wanted(hv_sched_t *s)
{
    hv_host_t *h = TAILQ_FIRST(&s->robots_wanted);
    if (h != NULL) {
        TAILQ_REMOVE(&s->robots_wanted, h, _robots_link);
        h->_robots_wanted = 0;
    }
    return h;
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

void hv_sched_drop(hv_sched_t *s, hv_flow_t *flow, void (*drop)(void *ud, hv_job_t *job),
                   void *ud)
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
    /* Removing by index while walking would miss jobs that a removal lifts above the walk:
     * keep the other flows' jobs, then restore the heap order bottom-up. */
    unsigned kept = 0;
    for (unsigned i = 0; i < s->nheap; i++) {
        hv_job_t *job = s->heap[i];
        if (job->flow == flow) {
            flow->ndelayed--;
            drop(ud, job);
            continue;
        }
        job->heap_idx = kept;
        s->heap[kept++] = job;
    }
    s->nheap = kept;
    for (unsigned i = kept / 2; i-- > 0;)
        heap_down(s, i);
}

unsigned hv_sched_waiting(const hv_sched_t *s)
{
    return s->nwaiting;
}

unsigned hv_sched_delayed(const hv_sched_t *s)
{
    return s->nheap;
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
    assert(s->nheap == 0);
    hv_host_t *h, *tmp;
    HASH_ITER(hh, s->hosts, h, tmp)
        host_free(s, h);
    free(s->heap);
    free(s);
}
