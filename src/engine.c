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

#include "harvestd/block.h"
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

/* A record the block detector holds until its host's verdict (in the engine's `held`). */
typedef struct held_s {
    hv_record_t *rec;
    hv_engine_flow_t *f;
    TAILQ_ENTRY(held_s) link;
} held_t;

struct hv_engine_s {
    uv_loop_t *loop;
    const hv_config_t *cfg;
    hv_tls_ctx_t *tls;
    hv_dns_t *dns;
    hv_polite_t *polite;
    hv_sched_t *sched;
    hv_fetch_t *fetch;
    hv_parse_t *parse;
    hv_flow_t *robots_flow;    /* robots.txt requests and block probes: privileged, no batch */
    hv_recrawl_t *recrawl;     /* NULL: re-crawling off */
    hv_block_t *block;         /* the block detector; NULL: off everywhere */
    TAILQ_HEAD(, held_s) held; /* records waiting for their host's verdict */
    unsigned nheld;

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

/* Pages that make a further parse group worth a thread's wake-up while one is at work. */
#define PARSE_GROUP_MIN 16

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
    hv_fault_t why;
    if (job->kind == HV_JOB_PAGE && e->block != NULL &&
        hv_block_refuses(e->block, job->host->key, &why)) {
        /* The host is blocked: no request goes out; the record says which sign. The host's
         * pacing slot stays taken, so that its jobs fail at its pace, not all at once. */
        hv_record_fail(job->rec, HV_STAGE_DOWNLOAD, HV_ET_BLOCKED, why.code, why.arg);
        hv_sched_done(e->sched, job);
        hv_fetch_end_unsent(e->fetch, job);
        return;
    }
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

static void block_changed(hv_engine_t *e, const char *key, hv_block_change_t change);

/* Whether the block detector watches `host` (block_detection, its [host] section's first). */
static int block_on(const hv_engine_t *e, const char *host)
{
    return e->block != NULL && hv_config_host_block_detection(e->cfg, host);
}

/* Whether the block detector watches the host of `job`'s attempt (its last hop's). */
static int block_watches(const hv_engine_t *e, const hv_job_t *job)
{
    return job->pol != NULL && block_on(e, job->url.host);
}

/* How the attempt went, for the host's throttle and the block detector. */
static void feedback(hv_engine_t *e, hv_job_t *job)
{
    if (block_watches(e, job)) {
        uint64_t now = uv_now(e->loop);
        const hv_record_t *rec = job->rec;
        int64_t bytes = job->end == HV_JOB_GOT_PAGE ? (int64_t)job->body_len : -1;
        /* A failure of ours, or of the connection, is no answer of the host's. */
        int status = job->end == HV_JOB_GOT_PAGE || rec->error_type == HV_ET_HTTP_STATUS
                         ? rec->http_status : 0;
        hv_block_change_t c = hv_block_attempt(e->block, job->pol->key, status, bytes,
                                               now > job->attempt_ms ? now - job->attempt_ms : 0,
                                               now);
        if (c != HV_BLOCK_UNCHANGED)
            block_changed(e, job->pol->key, c);
        if (job->end == HV_JOB_GOT_PAGE)
            job->rec->host_key = hv_xstrdup(job->pol->key);
    }
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

/* ---- block detection (block.h) ---- */

/* Hand a record the detector let through (or cleared) to its flow. */
static void pass_record(hv_engine_flow_t *f, hv_record_t *rec)
{
    if (f->e->recrawl != NULL)
        hv_recrawl_parsed(f->e->recrawl, rec);
    f->cbs->on_record(f->ud, rec);
}

/* A page of a blocked host: its record fails, without what the block page said. */
static void fail_blocked(hv_record_t *rec, hv_fault_t why)
{
    hv_record_fail(rec, HV_STAGE_DOWNLOAD, HV_ET_BLOCKED, why.code, why.arg);
    free(rec->title);
    rec->title = NULL;
    free(rec->fields);
    rec->fields = NULL;
}

/* The host of `key`'s polite entry holds its jobs while it is suspect (sched.h's host_open),
 * and keeps a reference meanwhile so that the entry, and the hold, outlive its jobs. */
static void hold_host(hv_engine_t *e, const char *key, int hold)
{
    hv_url_t u;
    char root[HV_URL_MAX + 8];
    snprintf(root, sizeof(root), "%s/", key);
    if (hv_url_parse(&u, root, strlen(root), NULL) != 0)
        return;
    hv_hostpol_t *pol = hv_polite_get(e->polite, key, u.host);
    hv_url_free(&u);
    if (hold && !pol->held) {
        pol->held = 1; /* the reference stays with the hold */
    } else {
        if (!hold && pol->held) {
            pol->held = 0;
            hv_polite_put(e->polite, pol); /* the hold's */
        }
        hv_polite_put(e->polite, pol);
    }
    hv_host_t *h = hv_sched_host_find(e->sched, key);
    if (h != NULL)
        hv_sched_host_changed(e->sched, h);
}

/* The detector changed its mind about host `key`: act on its jobs and held records. */
static void block_changed(hv_engine_t *e, const char *key, hv_block_change_t change)
{
    hv_fault_t why = hv_block_why(e->block, key);
    char text[HV_DETAIL_TEXT_MAX];
    hv_detail_format(text, sizeof(text), why.code, why.arg);
    switch (change) {
    case HV_BLOCK_BECAME_SUSPECT:
        HV_LOG(HV_LOG_NOTICE, "event=host_suspect host=%s sign=%s", key, text);
        hold_host(e, key, 1);
        return;
    case HV_BLOCK_BECAME_BLOCKED:
        HV_LOG(HV_LOG_WARNING, "event=host_blocked host=%s sign=%s held=%u", key, text, e->nheld);
        break;
    case HV_BLOCK_BECAME_CLEAR:
        HV_LOG(HV_LOG_NOTICE, "event=host_cleared host=%s", key);
        break;
    default:
        return;
    }
    hold_host(e, key, 0);
    held_t *hd, *next;
    for (hd = TAILQ_FIRST(&e->held); hd != NULL; hd = next) {
        next = TAILQ_NEXT(hd, link);
        if (strcmp(hd->rec->host_key, key) != 0)
            continue;
        TAILQ_REMOVE(&e->held, hd, link);
        e->nheld--;
        hd->f->pages--;
        if (change == HV_BLOCK_BECAME_BLOCKED) {
            fail_blocked(hd->rec, why);
            hd->f->cbs->on_record(hd->f->ud, hd->rec);
        } else {
            pass_record(hd->f, hd->rec);
        }
        free(hd);
    }
    hv_engine_wake(e);
}

/* A parsed record of flow `f`: on to its flow, held for its host's verdict, or failed. */
static void block_verdict(hv_engine_flow_t *f, hv_record_t *rec)
{
    hv_engine_t *e = f->e;
    hv_block_change_t change;
    hv_fault_t why;
    const hv_record_state_t *st = rec->state;
    hv_block_page_t pg = {
        .url = rec->requested_url,
        .final_url = rec->url,
        .http_status = rec->http_status,
        .digest = rec->body_digest,
        .bytes = rec->bytes,
        .title = rec->title,
        .stored_bytes = st != NULL && st->prev.fetched_at_ms != 0 ? st->prev.bytes : -1,
        .stored_title = st != NULL && st->prev.fetched_at_ms != 0 ? st->prev.title : NULL,
    };
    hv_block_verdict_t v = hv_block_page(e->block, rec->host_key, &pg, uv_now(e->loop), &change,
                                         &why);
    if (change != HV_BLOCK_UNCHANGED)
        block_changed(e, rec->host_key, change);
    switch (v) {
    case HV_BLOCK_HOLD: {
        if (e->stopping) {
            /* No verdict will come in time: its line is fetched again on resume. */
            hv_record_free(rec);
            break;
        }
        held_t *hd = hv_xcalloc(1, sizeof(*hd));
        hd->rec = rec;
        hd->f = f;
        /* Still the flow's work. Not the page queue's: the probe that frees it must be read
         * even while the queue is full. The host's jobs wait meanwhile, so what is held is at
         * most what was in flight and queued for it when it became suspect. */
        f->pages++;
        TAILQ_INSERT_TAIL(&e->held, hd, link);
        e->nheld++;
        break;
    }
    case HV_BLOCK_FAIL:
        fail_blocked(rec, why);
        f->cbs->on_record(f->ud, rec);
        break;
    default:
        pass_record(f, rec);
        break;
    }
}

/* Probes that are due: each an ordinary request on the privileged flow, which a held host
 * lets through. */
static void start_probes(hv_engine_t *e)
{
    const char *key, *text;
    while ((key = hv_block_probe_due(e->block, uv_now(e->loop), &text)) != NULL) {
        hv_url_t url;
        if (hv_url_parse(&url, text, strlen(text), NULL) != 0) {
            hv_block_change_t c = hv_block_probe_ended(e->block, key, 0, 0, 0, 0, 0,
                                                       uv_now(e->loop));
            if (c != HV_BLOCK_UNCHANGED)
                block_changed(e, key, c);
            continue;
        }
        hv_record_t *rec = hv_record_new(text, strlen(text));
        rec->host_key = hv_xstrdup(key);
        HV_LOG(HV_LOG_INFO, "event=host_probe host=%s url=\"%s\"", key, text);
        hv_sched_submit(e->sched, e->robots_flow, hv_job_new(++e->next_job_id, HV_JOB_PROBE,
                                                            rec, &url), 1);
    }
}

static void probe_ended(hv_engine_t *e, hv_job_t *job)
{
    if (job->end == HV_JOB_REDIRECTED) {
        hv_sched_submit(e->sched, job->flow, job, 1);
        return;
    }
    const hv_record_t *rec = job->rec;
    int got = job->end == HV_JOB_GOT_PAGE;
    int status = got || rec->error_type == HV_ET_HTTP_STATUS ? rec->http_status : 0;
    /* One page, on the loop: a probe is rare, and its body is bounded by max_bytes. */
    uint64_t digest = got ? hv_record_body_digest(job->body, job->body_len) : 0;
    if (e->block != NULL && job->end != HV_JOB_CANCELLED) {
        hv_block_change_t c = hv_block_probe_ended(e->block, rec->host_key, status, got, digest,
                                                   got ? (int64_t)job->body_len : -1,
                                                   (double)random() / (double)RAND_MAX,
                                                   uv_now(e->loop));
        HV_LOG(HV_LOG_INFO, "event=host_probe_ended host=%s http_status=%d bytes=%" PRId64
               " verdict=%s", rec->host_key, status, got ? (int64_t)job->body_len : (int64_t)-1,
               c == HV_BLOCK_BECAME_CLEAR ? "cleared" : c == HV_BLOCK_BECAME_BLOCKED ? "blocked"
               : hv_block_state(e->block, rec->host_key) == HV_BLOCK_BLOCKED ? "still_blocked"
               : "retry");
        if (c != HV_BLOCK_UNCHANGED)
            block_changed(e, rec->host_key, c);
    }
    hv_job_free(job);
}

/* Drop the held records of `f` (NULL: of every flow), for a flow stopped at once or a
 * stopping engine: their lines get no record now, and are fetched again on resume. */
static void drop_held(hv_engine_t *e, hv_engine_flow_t *f)
{
    held_t *hd, *next;
    for (hd = TAILQ_FIRST(&e->held); hd != NULL; hd = next) {
        next = TAILQ_NEXT(hd, link);
        if (f != NULL && hd->f != f)
            continue;
        TAILQ_REMOVE(&e->held, hd, link);
        e->nheld--;
        hd->f->pages--;
        hv_record_free(hd->rec);
        free(hd);
    }
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
    if (job->kind == HV_JOB_PROBE) {
        probe_ended(e, job);
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
        } else if (f->e->block != NULL && rec->host_key != NULL && rec->digest_known) {
            block_verdict(f, rec);
        } else {
            pass_record(f, rec);
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

    if (e->block != NULL)
        start_probes(e);

    /* A group per free parser, but while one is already at work a new one waits for a few
     * pages: every group costs a hand-off to a thread and back (futexes, a wake-up of the
     * loop), which for pages settled by their title's prefix costs more than the parse. */
    while (hv_parse_busy(e->parse) < e->cfg->parse_jobs &&
           (hv_parse_busy(e->parse) == 0 ||
            hv_pages_stats(e->pages)->pages >= PARSE_GROUP_MIN) &&
           submit_group(e))
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
    uint64_t probe = e->block != NULL ? hv_block_next_due(e->block) : 0;
    if (probe != 0 && (at == 0 || probe < at))
        at = probe;
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
    TAILQ_INIT(&e->held);
    /* On for some host: the global switch, or a [host] section's. */
    int block = cfg->block_detection;
    for (unsigned i = 0; i < cfg->nhost_rules; i++)
        block |= cfg->host_rules[i].block_detection_set && cfg->host_rules[i].block_detection;
    if (block) {
        hv_block_params_t bp = {.same_body = cfg->block_same_body,
                                .probe_delay_ms = cfg->block_probe_delay_ms,
                                .probe_max_delay_ms = cfg->block_probe_max_delay_ms};
        e->block = hv_block_new(&bp);
    }
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
    rec->digest_shown = e->cfg->record_digest;
    rec->digest_wanted = e->cfg->record_digest || block_on(e, url->host);
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
        drop_held(e, f);
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
    /* No verdict will come in time: the held records' lines are fetched again on resume. */
    drop_held(e, NULL);
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
    out->taken_ms = uv_now(e->loop);
    if (e->block != NULL) {
        out->block = *hv_block_stats(e->block);
        out->block_held = e->nheld;
    }
    if (e->tls != NULL)
        out->tls = *hv_tls_ctx_stats(e->tls);
    if (e->tls != NULL && e->recrawl != NULL) {
        out->has_tls_store = 1;
        out->tls_sessions_loaded = hv_recrawl_tls_sessions_loaded(e->recrawl);
    }
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
    if (f->h2.sessions > 0 && n > 0 && (size_t)n < cap)
        n += snprintf(out + n, cap - (size_t)n,
                      " connections_h2=%" PRIu64 " streams_h2=%" PRIu64 " streams_refused=%" PRIu64
                      " streams_reset=%" PRIu64 " h2_goaways=%" PRIu64,
                      f->connections_h2, f->h2.streams, f->h2.refused, f->h2.reset,
                      f->h2.goaways);
    if (s->has_tls && n > 0 && (size_t)n < cap)
        n += snprintf(out + n, cap - (size_t)n,
                      " tls_handshakes=%" PRIu64 " tls_resumed=%" PRIu64 " tls_failures=%" PRIu64
                      " tls_chains_verified=%" PRIu64 " tls_chains_anchored=%" PRIu64
                      " tls_chains_cached=%" PRIu64,
                      s->tls.handshakes, s->tls.resumed, s->tls.failures, s->tls.chains_verified,
                      s->tls.chains_anchored, s->tls.chains_cached);
    if (s->has_tls_store && n > 0 && (size_t)n < cap)
        n += snprintf(out + n, cap - (size_t)n, " tls_sessions_loaded=%" PRIu64,
                      s->tls_sessions_loaded);
    /* Per configured proxy: requests written through it and failures at it. */
    for (unsigned i = 0; i < f->nproxies && n > 0 && (size_t)n < cap; i++)
        n += snprintf(out + n, cap - (size_t)n, "%s%s(%" PRIu64 ",%" PRIu64 ")",
                      i == 0 ? " proxies=" : ";", f->proxies[i].proxy, f->proxies[i].requests,
                      f->proxies[i].failures);
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
    /* Only robots.txt requests and block probes can still be in flight (the privileged flow;
     * the others wait for their own). */
    hv_fetch_cancel(e->fetch, NULL);
    end_jobs(e);
    hv_fetch_free(e->fetch);
    hv_sched_drop(e->sched, e->robots_flow, drop_job, e);
    hv_block_free(e->block);
    hv_sched_flow_free(e->sched, e->robots_flow);
    hv_sched_free(e->sched);
    hv_polite_free(e->polite);
    hv_parse_free(e->parse);
    hv_pages_free(e->pages);
    hv_dns_close(e->dns);
    hv_handles_close_all(&e->handles);
}
