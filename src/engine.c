/*
 * engine.c: the shared middle of the pipeline, one pass per loop iteration (engine.h). A job
 * belongs to the scheduler while it waits, to fetch while it downloads, and to the `ended`
 * list from then until the next pass decides what follows; a page's record then travels with
 * the page, through the parser, to its flow.
 */
#include "harvestd/engine.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "harvestd/common.h"
#include "harvestd/handles.h"
#include "harvestd/job.h"
#include "harvestd/log.h"
#include "harvestd/pages.h"
#include "harvestd/parse.h"
#include "harvestd/recrawl.h"
#include "harvestd/retry.h"
#include "harvestd/sched.h"

/* Starting a request on a new connection costs a connect(), which on loopback completes the
 * handshake inside the call (~50 us); a thousand of them in one go kept the loop from writing
 * the first request for 50 ms. A pass starts at most this many; the loop polls before the
 * next pass, so connections opened first send first. */
#define START_BURST 64

struct hv_engine_flow_s {
    hv_engine_t *e;
    hv_flow_t *sched;
    const hv_engine_flow_cbs_t *cbs;
    void *ud;
    const hv_ruleset_t *rules;
    uint64_t rules_fp;         /* what the store keeps of the rules (recrawl.h) */
    const char *crash_note;
    unsigned pages;            /* queued, parsing, or parsed and not yet handed over */
    int forced;                /* stopped at once: what still ends is dropped */
    TAILQ_HEAD(, hv_record_s) records; /* parsed, for on_record in the next pass */
    TAILQ_ENTRY(hv_engine_flow_s) link;
};

struct hv_engine_s {
    uv_loop_t *loop;
    const hv_config_t *cfg;
    hv_tls_ctx_t *tls;
    hv_dns_t *dns;
    hv_polite_t *polite;
    hv_sched_t *sched;
    hv_fetch_t *fetch;
    hv_parse_t *parse;
    hv_flow_t *robots_flow;    /* robots.txt requests: privileged, no batch */
    hv_recrawl_t *recrawl;     /* NULL: re-crawling off */

    hv_pages_t *pages;
    uv_idle_t pass;            /* active exactly while work is pending */
    int dirty;                 /* woken since the pass began */
    uv_timer_t wake_timer;     /* the next paced host or delayed job is due */
    uv_timer_t drain_timer;
    hv_handles_t handles;

    struct hv_job_list_s ended; /* downloads ended since the last pass */
    int reads_paused;
    TAILQ_HEAD(, hv_engine_flow_s) flows;
    unsigned nflows;
    uint64_t next_job_id;
    int stopping;
    int forced;
    uint64_t read_pauses;
    uint64_t retries;
    hv_record_counts_t *records; /* where records are counted (not ours); NULL: nowhere */
    hv_engine_pass_t *passes;    /* the sources' steps of the pass (not ours) */
    void (*closed)(void *ud);
    void *closed_ud;
};

static void on_pass(uv_idle_t *idle);

void hv_engine_wake(hv_engine_t *e)
{
    e->dirty = 1;
    if (!uv_is_active((uv_handle_t *)&e->pass))
        uv_idle_start(&e->pass, on_pass);
}

/* ---- the page queue ---- */

/* Counted inside the I/O callback that ended the download: the bound holds exactly. */
static void reserve_page(hv_engine_t *e, size_t len)
{
    if (hv_pages_reserve(e->pages, len) && !e->reads_paused) {
        e->reads_paused = 1;
        e->read_pauses++;
        hv_fetch_pause(e->fetch);
        const hv_pages_stats_t *ps = hv_pages_stats(e->pages);
        HV_LOG(HV_LOG_DEBUG, "event=reads_paused pages=%u bytes=%" PRIu64, ps->pages, ps->bytes);
    }
}

static int flow_accepts(void *owner)
{
    hv_engine_flow_t *f = owner;
    return f->cbs->accepts(f->ud);
}

/* Start a parse group with the oldest page any flow can take, and more of that flow's. */
static int submit_group(hv_engine_t *e)
{
    hv_engine_flow_t *f = hv_pages_next_owner(e->pages, flow_accepts);
    if (f == NULL)
        return 0;
    hv_parse_group_t *g = hv_parse_group_new(e->parse, f, f->rules, f->crash_note);
    hv_pages_fill_group(e->pages, f, g, e->cfg->parse_jobs - hv_parse_busy(e->parse));
    hv_parse_group_submit(g);
    return 1;
}

static void on_parsed(void *ud, void *tag, hv_record_t *rec, int cancelled)
{
    hv_engine_t *e = ud;
    hv_engine_flow_t *f = tag;
    if (cancelled) {
        f->pages--;
        hv_record_free(rec);
    } else {
        TAILQ_INSERT_TAIL(&f->records, rec, link);
    }
    hv_engine_wake(e);
}

/* ---- jobs ---- */

static void drop_job(void *ud, hv_job_t *job)
{
    hv_engine_t *e = ud;
    if (job->pol != NULL)
        hv_polite_put(e->polite, job->pol);
    hv_job_free(job);
}

/* The download stage ended a job (from an I/O callback): record it for the pass. */
static void on_fetch_end(void *ud, hv_job_t *job)
{
    hv_engine_t *e = ud;
    if (job->end == HV_JOB_GOT_PAGE && job->kind == HV_JOB_PAGE)
        reserve_page(e, job->body_len);
    TAILQ_INSERT_TAIL(&e->ended, job, done_link);
    hv_engine_wake(e);
}

/* The scheduler dispatched `job`: unless its host's robots.txt forbids it, download it. */
static void on_start(void *ud, hv_job_t *job)
{
    hv_engine_t *e = ud;
    uint64_t now = uv_now(e->loop);
    if (job->started_ms == 0)
        job->started_ms = now;
    job->attempt_ms = now;
    if (job->kind == HV_JOB_PAGE) {
        int robots_retry;
        hv_hostpol_t *pol = hv_polite_admit(e->polite, job->host->pol, job, now, &robots_retry);
        if (pol == NULL) {
            /* No request went out: the slot goes back at once, so that the host's next job
             * can be considered in this same kick. */
            job->robots_retry = robots_retry;
            hv_sched_done(e->sched, job);
            hv_fetch_end_unsent(e->fetch, job);
            return;
        }
        job->pol = pol;
    }
    hv_fetch_start(e->fetch, job);
}

/* How the attempt went, for the host's throttle. */
static void feedback(hv_engine_t *e, hv_job_t *job)
{
    const char *key;
    int changed = hv_polite_attempt_ended(e->polite, job, uv_now(e->loop), &key);
    job->pol = NULL; /* its reference went with the attempt */
    if (changed) {
        hv_host_t *h = hv_sched_host_find(e->sched, key);
        if (h != NULL)
            hv_sched_host_changed(e->sched, h);
    }
}

/* Is this failure worth another attempt? If so the job waits out its backoff in the
 * scheduler. */
static int retry_later(hv_engine_t *e, hv_job_t *job)
{
    hv_retry_plan_t plan;
    double rnd = (double)random() / (double)RAND_MAX;
    if (e->stopping || !hv_retry_job(e->cfg, job, rnd, uv_now(e->loop), &plan))
        return 0;
    job->attempts++;
    hv_fetch_next_attempt(job);
    e->retries++;
    hv_sched_delay(e->sched, job, plan.at);
    return 1;
}

static void robots_ended(hv_engine_t *e, hv_job_t *job)
{
    if (job->end == HV_JOB_REDIRECTED) {
        hv_sched_submit(e->sched, job->flow, job, 1);
        return;
    }
    hv_polite_robots_ended(e->polite, job, e->stopping, uv_now(e->loop));
    hv_host_t *h = hv_sched_host_find(e->sched, job->pol->key);
    if (h != NULL)
        hv_sched_host_changed(e->sched, h);
    drop_job(e, job);
}

/* What follows a download that ended: the pass's first step. */
static void job_ended(hv_engine_t *e, hv_job_t *job)
{
    if (job->host != NULL)
        hv_sched_done(e->sched, job);
    if (job->kind == HV_JOB_ROBOTS) {
        robots_ended(e, job);
        return;
    }
    hv_engine_flow_t *f = hv_sched_flow_data(job->flow);
    if (f->forced || job->end == HV_JOB_CANCELLED) {
        if (job->end == HV_JOB_GOT_PAGE)
            hv_pages_unreserve(e->pages, job->body_len);
        drop_job(e, job);
        return;
    }
    switch (job->end) {
    case HV_JOB_NOT_MODIFIED:
        /* The stored content is the answer: no parse. */
        feedback(e, job);
        hv_recrawl_not_modified(e->recrawl, job->rec);
        f->cbs->on_record(f->ud, hv_job_take_record(job));
        hv_job_free(job);
        break;
    case HV_JOB_REDIRECTED:
        /* Ahead of the flow's other jobs for the next host, like a retry. */
        hv_sched_submit(e->sched, job->flow, job, 1);
        break;
    case HV_JOB_GOT_PAGE:
        feedback(e, job);
        hv_pages_push(e->pages, f, hv_job_take_record(job), hv_job_take_body(job), job->body_len);
        hv_job_free(job);
        f->pages++;
        break;
    default:
        feedback(e, job);
        if (!retry_later(e, job)) {
            f->cbs->on_record(f->ud, hv_job_take_record(job));
            hv_job_free(job);
        }
        break;
    }
}

static void end_jobs(hv_engine_t *e)
{
    hv_job_t *job;
    while ((job = TAILQ_FIRST(&e->ended)) != NULL) {
        TAILQ_REMOVE(&e->ended, job, done_link);
        job_ended(e, job);
    }
}

/* Hand the flow's parsed records to its owner, or free them when `drop`. */
static void hand_over(hv_engine_flow_t *f, int drop)
{
    hv_record_t *rec;
    while ((rec = TAILQ_FIRST(&f->records)) != NULL) {
        TAILQ_REMOVE(&f->records, rec, link);
        f->pages--;
        if (drop) {
            hv_record_free(rec);
        } else {
            if (f->e->recrawl != NULL)
                hv_recrawl_parsed(f->e->recrawl, rec);
            f->cbs->on_record(f->ud, rec);
        }
    }
}

/* ---- the pass ---- */

static void arm_wake_timer(hv_engine_t *e);

static void on_pass(uv_idle_t *idle)
{
    hv_engine_t *e = hv_container_of(idle, hv_engine_t, pass);
    hv_job_t *job;
    hv_host_t *h;

    e->dirty = 0;
    end_jobs(e);
    /* Hosts whose jobs wait for their robots.txt: fetch it on the privileged flow. */
    while ((h = hv_sched_robots_wanted(e->sched)) != NULL) {
        uint64_t id = ++e->next_job_id;
        hv_url_t url;
        hv_record_t *rec = hv_polite_robots_request(e->polite, h->pol, h->scheme, h->name, h->port,
                                                    uv_now(e->loop), &url);
        if (rec != NULL) {
            job = hv_job_new(id, HV_JOB_ROBOTS, rec, &url);
            job->pol = h->pol; /* referenced for it: the host the rules are for */
            hv_sched_submit(e->sched, e->robots_flow, job, 1);
        } else {
            hv_sched_host_changed(e->sched, h);
        }
    }

    while (hv_parse_busy(e->parse) < e->cfg->parse_jobs && submit_group(e))
        ;
    if (e->reads_paused && hv_pages_low(e->pages)) {
        e->reads_paused = 0;
        hv_fetch_resume(e->fetch);
        HV_LOG(HV_LOG_DEBUG, "event=reads_resumed pages=%u bytes=%" PRIu64,
               hv_pages_stats(e->pages)->pages, hv_pages_stats(e->pages)->bytes);
    }

    hv_engine_flow_t *f, *fnext;
    for (f = TAILQ_FIRST(&e->flows); f != NULL; f = fnext) {
        fnext = TAILQ_NEXT(f, link);
        hand_over(f, 0);
        f->cbs->on_pass(f->ud);
    }
    hv_engine_pass_t *p, *pnext;
    for (p = e->passes; p != NULL; p = pnext) {
        pnext = p->_next;
        p->run(p->ud);
    }

    hv_sched_tick(e->sched);
    unsigned started = hv_sched_kick(e->sched, START_BURST);
    arm_wake_timer(e);
    /* A full burst may have left jobs waiting: poll, then pass again. */
    if (!e->dirty && started < START_BURST)
        uv_idle_stop(idle);
}

void hv_engine_add_pass(hv_engine_t *e, hv_engine_pass_t *p)
{
    p->_next = e->passes;
    e->passes = p;
}

void hv_engine_remove_pass(hv_engine_t *e, hv_engine_pass_t *p)
{
    hv_engine_pass_t **pp = &e->passes;
    while (*pp != NULL && *pp != p)
        pp = &(*pp)->_next;
    if (*pp == p)
        *pp = p->_next;
}

static void on_wake_timer(uv_timer_t *t)
{
    hv_engine_wake(hv_container_of(t, hv_engine_t, wake_timer));
}

/* Wake up when the next host held back by its pacing delay, or the next delayed job, is due. */
static void arm_wake_timer(hv_engine_t *e)
{
    uint64_t at = hv_sched_next_wakeup(e->sched);
    if (at == 0) {
        uv_timer_stop(&e->wake_timer);
        return;
    }
    uint64_t now = uv_now(e->loop);
    uv_timer_start(&e->wake_timer, on_wake_timer, at > now ? at - now : 0, 0);
}

/* ---- the engine ---- */

static void on_closed(hv_handles_t *hs);

static uint64_t sched_clock(void *ud)
{
    hv_engine_t *e = ud;
    return uv_now(e->loop);
}

static int may_start_request(void *ud)
{
    hv_engine_t *e = ud;
    return !e->reads_paused && !e->forced;
}

hv_engine_t *hv_engine_new(uv_loop_t *loop, const hv_config_t *cfg, hv_tls_ctx_t *tls,
                           hv_record_counts_t *records)
{
    hv_engine_t *e = hv_xcalloc(1, sizeof(*e));
    e->loop = loop;
    e->cfg = cfg;
    e->tls = tls;
    e->records = records;
    TAILQ_INIT(&e->ended);
    e->pages = hv_pages_new(cfg->page_queue, cfg->page_queue_bytes);
    TAILQ_INIT(&e->flows);
    e->dns = hv_dns_new(loop, cfg->dns_ttl_ms, 4096);
    e->polite = hv_polite_new(cfg);
    e->sched = hv_sched_new(cfg->concurrency, e->polite, cfg->obey_robots, sched_clock, on_start,
                            may_start_request, e);
    e->robots_flow = hv_sched_flow_new(e->sched, NULL, NULL, 1);
    e->fetch = hv_fetch_new(loop, cfg, e->dns, tls, on_fetch_end, e);
    e->parse = hv_parse_new(loop, cfg->title_fast_path, on_parsed, e);
    hv_handles_init(&e->handles, on_closed);
    uv_idle_init(loop, &e->pass);
    uv_timer_init(loop, &e->wake_timer);
    uv_timer_init(loop, &e->drain_timer);
    hv_handles_own(&e->handles, (uv_handle_t *)&e->pass);
    hv_handles_own(&e->handles, (uv_handle_t *)&e->wake_timer);
    hv_handles_own(&e->handles, (uv_handle_t *)&e->drain_timer);
    return e;
}

void hv_engine_use_recrawl(hv_engine_t *e, hv_recrawl_t *rc)
{
    e->recrawl = rc;
}

hv_recrawl_t *hv_engine_recrawl(const hv_engine_t *e)
{
    return e->recrawl;
}

const hv_config_t *hv_engine_config(const hv_engine_t *e)
{
    return e->cfg;
}

hv_tls_ctx_t *hv_engine_tls(const hv_engine_t *e)
{
    return e->tls;
}

uv_loop_t *hv_engine_loop(const hv_engine_t *e)
{
    return e->loop;
}

/* ---- flows ---- */

static int flow_gate(void *ud)
{
    hv_engine_flow_t *f = ud;
    return f->cbs->may_start(f->ud);
}

hv_engine_flow_t *hv_engine_flow_new(hv_engine_t *e, const hv_engine_flow_cbs_t *cbs, void *ud,
                                     const hv_ruleset_t *rules, const char *crash_note)
{
    hv_engine_flow_t *f = hv_xcalloc(1, sizeof(*f));
    f->e = e;
    f->cbs = cbs;
    f->ud = ud;
    f->rules = rules;
    f->rules_fp = hv_ruleset_fingerprint(rules);
    f->crash_note = crash_note;
    f->sched = hv_sched_flow_new(e->sched, flow_gate, f, 0);
    TAILQ_INIT(&f->records);
    TAILQ_INSERT_TAIL(&e->flows, f, link);
    e->nflows++;
    hv_engine_wake(e);
    return f;
}

hv_record_t *hv_engine_submit(hv_engine_flow_t *f, hv_record_t *rec, hv_url_t *url)
{
    hv_engine_t *e = f->e;
    if (e->recrawl != NULL &&
        hv_recrawl_prepare(e->recrawl, rec, url, f->rules_fp) == HV_RECRAWL_ANSWERED) {
        hv_url_free(url);
        return rec;
    }
    hv_job_t *job = hv_job_new(++e->next_job_id, HV_JOB_PAGE, rec, url);
    hv_sched_submit(e->sched, f->sched, job, 0);
    hv_engine_wake(e);
    return NULL;
}

void hv_engine_flow_counts(const hv_engine_flow_t *f, hv_engine_flow_counts_t *out)
{
    out->waiting = hv_sched_flow_waiting(f->sched);
    out->delayed = hv_sched_flow_delayed(f->sched);
    out->inflight = hv_sched_flow_inflight(f->sched);
    out->pages = f->pages;
}

void hv_engine_flow_drop(hv_engine_flow_t *f, int force)
{
    hv_engine_t *e = f->e;
    hv_sched_drop(e->sched, f->sched, drop_job, e);
    if (force && !f->forced) {
        f->forced = 1;
        hv_fetch_cancel(e->fetch, f->sched);
        f->pages -= hv_pages_drop(e->pages, f);
        hv_parse_cancel_pending(e->parse, f);
        hand_over(f, 1);
    }
    hv_engine_wake(e);
}

void hv_engine_flow_free(hv_engine_flow_t *f)
{
    hv_engine_t *e = f->e;
    assert(f->pages == 0 && TAILQ_EMPTY(&f->records));
    hv_sched_drop(e->sched, f->sched, drop_job, e);
    hv_sched_flow_free(e->sched, f->sched);
    TAILQ_REMOVE(&e->flows, f, link);
    e->nflows--;
    free(f);
    hv_engine_wake(e);
}

unsigned hv_engine_batches(const hv_engine_t *e)
{
    return e->nflows;
}

unsigned hv_engine_waiting(const hv_engine_t *e)
{
    return hv_sched_waiting(e->sched);
}

/* ---- stopping ---- */

static void on_drain_timeout(uv_timer_t *t)
{
    hv_engine_t *e = hv_container_of(t, hv_engine_t, drain_timer);
    HV_LOG(HV_LOG_NOTICE, "event=drain_timeout in_flight=%u", hv_fetch_active(e->fetch));
    hv_fetch_cancel(e->fetch, NULL);
}

void hv_engine_stop(hv_engine_t *e, int force)
{
    if (force) {
        e->forced = 1;
        uv_timer_stop(&e->drain_timer);
    } else if (!e->stopping) {
        uv_timer_start(&e->drain_timer, on_drain_timeout, e->cfg->drain_timeout_ms, 0);
    }
    e->stopping = 1;
    hv_engine_flow_t *f, *next;
    for (f = TAILQ_FIRST(&e->flows); f != NULL; f = next) {
        next = TAILQ_NEXT(f, link);
        f->cbs->on_stop(f->ud, force);
    }
    if (force) {
        hv_fetch_cancel(e->fetch, NULL);
        hv_parse_cancel_pending(e->parse, NULL);
    }
    hv_engine_wake(e);
}

/* ---- figures and closing ---- */

void hv_engine_stats(const hv_engine_t *e, hv_engine_stats_t *out)
{
    memset(out, 0, sizeof(*out));
    out->queue = *hv_pages_stats(e->pages);
    out->read_pauses = e->read_pauses;
    out->retries = e->retries;
    out->requests_in_flight = hv_sched_inflight(e->sched);
    out->jobs_waiting = hv_sched_waiting(e->sched);
    out->batches = e->nflows;
    out->fetch = *hv_fetch_stats(e->fetch);
    out->dns = *hv_dns_stats(e->dns);
    out->polite = *hv_polite_stats(e->polite);
    out->has_tls = e->tls != NULL;
    if (e->tls != NULL)
        out->tls = *hv_tls_ctx_stats(e->tls);
}

void hv_engine_count_record(hv_engine_t *e, const hv_record_t *rec)
{
    if (e->records != NULL)
        hv_record_counts_add(e->records, rec);
}

void hv_engine_format_stats(char *out, size_t cap, const hv_engine_stats_t *s)
{
    const hv_fetch_stats_t *f = &s->fetch;
    const hv_polite_stats_t *p = &s->polite;
    int n = snprintf(out, cap,
                     " hwm_pages=%u hwm_page_bytes=%" PRIu64 " read_pauses=%" PRIu64
                     " connections_opened=%" PRIu64 " connections_reused=%" PRIu64
                     " stale_retries=%" PRIu64 " redirects=%" PRIu64 " retries=%" PRIu64
                     " dns_lookups=%" PRIu64 " dns_hits=%" PRIu64 " robots_fetches=%" PRIu64
                     " robots_disallowed=%" PRIu64 " throttle_decreases=%" PRIu64
                     " throttle_increases=%" PRIu64 " hosts_throttled=%u",
                     s->queue.hwm_pages, s->queue.hwm_bytes, s->read_pauses, f->conn.opened,
                     f->connections_reused, f->stale_retries, f->redirects, s->retries,
                     s->dns.lookups, s->dns.hits, p->robots_fetches, p->robots_disallowed,
                     p->decreases, p->increases, p->throttled);
    if (s->has_tls && n > 0 && (size_t)n < cap)
        snprintf(out + n, cap - (size_t)n,
                 " tls_handshakes=%" PRIu64 " tls_resumed=%" PRIu64 " tls_failures=%" PRIu64,
                 s->tls.handshakes, s->tls.resumed, s->tls.failures);
}

static void on_closed(hv_handles_t *hs)
{
    hv_engine_t *e = hv_container_of(hs, hv_engine_t, handles);
    void (*closed)(void *) = e->closed;
    void *ud = e->closed_ud;
    free(e);
    if (closed != NULL)
        closed(ud);
}

void hv_engine_close(hv_engine_t *e, void (*done)(void *ud), void *ud)
{
    assert(e->nflows == 0);
    e->closed = done;
    e->closed_ud = ud;
    /* Only robots.txt requests can still be in flight (flows wait for their own). */
    hv_fetch_cancel(e->fetch, NULL);
    end_jobs(e);
    hv_fetch_free(e->fetch);
    hv_sched_drop(e->sched, e->robots_flow, drop_job, e);
    hv_sched_flow_free(e->sched, e->robots_flow);
    hv_sched_free(e->sched);
    hv_polite_free(e->polite);
    hv_parse_free(e->parse);
    hv_pages_free(e->pages);
    hv_dns_close(e->dns);
    hv_handles_close_all(&e->handles);
}
