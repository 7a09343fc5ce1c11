/*
 * engine.c: the shared middle of the pipeline. Every event ends in hv_engine_update(), which
 * moves work forward as far as the bounds allow: pages to the parsers, records to their
 * batches, waiting jobs to free slots. It is re-entrant safe: a call made while it runs only
 * asks it to go round once more.
 */
#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harvestd/common.h"
#include "harvestd/job.h"
#include "harvestd/log.h"
#include "harvestd/metrics.h"
#include "pipeline_int.h"

static int pages_full(const hv_engine_t *e)
{
    return e->stats.pages >= e->cfg->page_queue || e->stats.page_bytes >= e->cfg->page_queue_bytes;
}

static int pages_low(const hv_engine_t *e)
{
    return e->stats.pages <= e->cfg->page_queue / 2 &&
           e->stats.page_bytes <= e->cfg->page_queue_bytes / 2;
}

static int may_start_request(void *ud)
{
    hv_engine_t *e = ud;
    return !e->reads_paused && !e->forced;
}

static hv_batch_t *batch_of(const hv_job_t *job)
{
    return hv_sched_flow_data(job->flow);
}

/* ---- politeness: robots.txt and the adaptive throttle ---- */

static void drop_pol(hv_engine_t *e, hv_job_t *job)
{
    if (job->pol != NULL) {
        hv_polite_put(e->polite, job->pol);
        job->pol = NULL;
    }
}

/* How the attempt went, for the host's throttle. */
static void feedback(hv_engine_t *e, hv_job_t *job)
{
    if (job->pol == NULL || job->kind != HV_JOB_PAGE)
        return;
    const hv_record_t *rec = job->rec;
    int timeout = rec->error_type == HV_ET_READ_TIMEOUT || rec->error_type == HV_ET_TOTAL_TIMEOUT ||
                  rec->error_type == HV_ET_CONNECT_TIMEOUT;
    uint64_t now = uv_now(e->loop);
    uint64_t latency = rec->http_status > 0 && now > job->attempt_ms ? now - job->attempt_ms : 0;
    if (hv_polite_feedback(e->polite, job->pol, rec->http_status, timeout, latency, now)) {
        hv_host_t *h = hv_sched_host_find(e->sched, job->pol->key);
        if (h != NULL)
            hv_sched_host_changed(e->sched, h);
    }
    drop_pol(e, job);
}

static void robots_ready(hv_engine_t *e, hv_hostpol_t *pol, hv_robots_t *rules, int available,
                         uint64_t ttl_ms, const char *why)
{
    hv_robots_free(pol->robots);
    pol->robots = rules;
    pol->robots_state = HV_ROBOTS_READY;
    pol->robots_unavailable = !available;
    if (available) {
        pol->robots_final = 0;
        pol->robots_why[0] = '\0';
    }
    pol->robots_expires_ms = uv_now(e->loop) + ttl_ms;
    uint64_t delay = hv_robots_crawl_delay_ms(rules);
    if (delay > 0)
        hv_polite_min_delay(pol, delay);
    HV_LOG(HV_LOG_INFO, "event=robots host=%s result=%s%s%s rules=%zu crawl_delay_ms=%" PRIu64,
           pol->key, why, available ? "" : " cause=", available ? "" : pol->robots_why,
           hv_robots_rules(rules), delay);
    hv_host_t *h = hv_sched_host_find(e->sched, pol->key);
    if (h != NULL)
        hv_sched_host_changed(e->sched, h);
}

static int transient(const hv_config_t *cfg, const hv_record_t *rec);

/* A robots.txt request ended: with a body (2xx), or with the record saying how it failed. */
static void robots_done(hv_engine_t *e, hv_job_t *job, const char *body, size_t len)
{
    hv_hostpol_t *pol = job->pol;
    const hv_record_t *rec = job->rec;
    /* An unreachable or failing robots.txt disallows everything "for now" (RFC 9309 2.3.1.4):
     * ask again soon rather than after the full TTL. */
    uint64_t retry_ms = HV_MIN(e->cfg->robots_ttl_ms, (uint64_t)60000);

    if (!e->stopping) {
        if (body != NULL || rec->ok)
            robots_ready(e, pol, hv_robots_parse(body, len, e->product), 1, e->cfg->robots_ttl_ms,
                         "fetched");
        else if (rec->error_type == HV_ET_HTTP_STATUS && rec->http_status >= 400 &&
                 rec->http_status < 500)
            robots_ready(e, pol, hv_robots_allow_all(), 1, e->cfg->robots_ttl_ms, "4xx_allow_all");
        else if (rec->error_type == HV_ET_TOO_MANY_REDIRECTS)
            robots_ready(e, pol, hv_robots_allow_all(), 1, e->cfg->robots_ttl_ms,
                         "redirects_allow_all");
        else {
            /* The refused pages say why; and when it would not pass by asking again (a 5xx
             * always might), they fail at once instead of retrying into the same wall. */
            if (rec->error_type == HV_ET_HTTP_STATUS && rec->http_status > 0)
                snprintf(pol->robots_why, sizeof(pol->robots_why), "http_%d", rec->http_status);
            else
                snprintf(pol->robots_why, sizeof(pol->robots_why), "%s",
                         rec->error != NULL ? rec->error : hv_error_type_name(rec->error_type));
            pol->robots_final = rec->error_type != HV_ET_HTTP_STATUS && !transient(e->cfg, rec);
            robots_ready(e, pol, hv_robots_disallow_all(), 0, retry_ms, "unavailable_disallow_all");
        }
    } else {
        pol->robots_state = HV_ROBOTS_UNKNOWN;
    }
    drop_pol(e, job);
    hv_job_free(job);
}

/* The scheduler needs a host's robots.txt: queue the request on the privileged flow. */
static void need_robots(void *ud, hv_host_t *h)
{
    hv_engine_t *e = ud;
    char text[HV_URL_MAX];
    hv_url_t url;
    const char *reason;
    int v6 = strchr(h->name, ':') != NULL;

    h->pol->robots_state = HV_ROBOTS_FETCHING;
    snprintf(text, sizeof(text), "%s://%s%s%s:%u/robots.txt",
             h->scheme == HV_SCHEME_HTTPS ? "https" : "http", v6 ? "[" : "", h->name,
             v6 ? "]" : "", (unsigned)h->port);
    if (hv_url_parse(&url, text, strlen(text), &reason) != 0) {
        robots_ready(e, h->pol, hv_robots_allow_all(), 1, e->cfg->robots_ttl_ms, "bad_url");
        return;
    }
    hv_job_t *job = hv_xcalloc(1, sizeof(*job));
    job->id = ++e->next_job_id;
    job->kind = HV_JOB_ROBOTS;
    job->rec = hv_record_new(text, strlen(text));
    job->url = url;
    job->attempts = 1;
    job->retry_after_ms = -1;
    job->pol = hv_polite_get(e->polite, h->key, h->name);
    e->robots_fetches++;
    HV_LOG(HV_LOG_DEBUG, "event=robots_fetch host=%s", h->key);
    hv_sched_submit(e->sched, e->robots_flow, job, 1);
}

/* A page job's host forbids its URL: a record, no request. */
static void robots_refuse(hv_engine_t *e, hv_job_t *job, const hv_hostpol_t *pol)
{
    hv_record_t *rec = job->rec;
    char why[80];
    free(rec->url);
    rec->url = hv_xstrdup(job->url.href);
    rec->redirects = (int)job->redirects;
    rec->attempts = (int)job->attempts;
    rec->elapsed_ms = (int64_t)(uv_now(e->loop) - job->started_ms);
    rec->fetched_at_ms = hv_now_unix_ms();
    if (pol->robots_unavailable)
        snprintf(why, sizeof(why), "robots_txt_unavailable_%s", pol->robots_why);
    else
        snprintf(why, sizeof(why), "disallowed_by_robots_txt");
    job->robots_retry = pol->robots_unavailable && !pol->robots_final;
    hv_record_fail(rec, HV_STAGE_DOWNLOAD, HV_ET_ROBOTS, why);
    e->robots_disallowed++;
    /* No request went out: the host's pacing slot (Crawl-delay) is not used up. Done
     * re-evaluates the host with the slot given back. */
    hv_polite_unstart(job->host->pol);
    hv_sched_done(e->sched, job);
}

static void on_failed(void *ud, hv_job_t *job);

static void start_job(void *ud, hv_job_t *job)
{
    hv_engine_t *e = ud;
    uint64_t now = uv_now(e->loop);
    if (job->started_ms == 0)
        job->started_ms = now;
    job->attempt_ms = now;
    if (job->kind == HV_JOB_PAGE) {
        hv_hostpol_t *pol = job->host->pol;
        if (e->cfg->obey_robots && pol->robots != NULL &&
            !hv_robots_allowed(pol->robots, job->url.target, strlen(job->url.target))) {
            robots_refuse(e, job, pol);
            on_failed(e, job);
            return;
        }
        drop_pol(e, job); /* a redirect moved the job to another host */
        job->pol = hv_polite_get(e->polite, job->host->key, job->host->name);
    }
    hv_fetch_start(e->fetch, job);
}

static void on_page(void *ud, hv_job_t *job, char *body, size_t len)
{
    hv_engine_t *e = ud;
    if (job->kind == HV_JOB_ROBOTS) {
        robots_done(e, job, body != NULL ? body : "", len);
        free(body);
        hv_engine_update(e);
        return;
    }
    feedback(e, job);
    hv_batch__job_page(batch_of(job), job, body, len);
}

/* ---- retries ---- */

static int heap_less(const hv_engine_t *e, unsigned a, unsigned b)
{
    return e->retry_heap[a]->retry_at < e->retry_heap[b]->retry_at;
}

static void heap_swap(hv_engine_t *e, unsigned a, unsigned b)
{
    hv_job_t *t = e->retry_heap[a];
    e->retry_heap[a] = e->retry_heap[b];
    e->retry_heap[b] = t;
    e->retry_heap[a]->heap_idx = a;
    e->retry_heap[b]->heap_idx = b;
}

static void heap_up(hv_engine_t *e, unsigned i)
{
    while (i > 0 && heap_less(e, i, (i - 1) / 2)) {
        heap_swap(e, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
}

static void heap_down(hv_engine_t *e, unsigned i)
{
    for (;;) {
        unsigned l = 2 * i + 1, r = l + 1, m = i;
        if (l < e->nretry && heap_less(e, l, m))
            m = l;
        if (r < e->nretry && heap_less(e, r, m))
            m = r;
        if (m == i)
            return;
        heap_swap(e, i, m);
        i = m;
    }
}

static void heap_push(hv_engine_t *e, hv_job_t *job)
{
    if (e->nretry == e->retry_cap) {
        e->retry_cap = e->retry_cap ? e->retry_cap * 2 : 64;
        e->retry_heap = hv_xrealloc(e->retry_heap, e->retry_cap * sizeof(*e->retry_heap));
    }
    job->heap_idx = e->nretry;
    e->retry_heap[e->nretry++] = job;
    heap_up(e, job->heap_idx);
}

static void heap_remove(hv_engine_t *e, unsigned i)
{
    e->nretry--;
    if (i != e->nretry) {
        heap_swap(e, i, e->nretry);
        heap_down(e, i);
        heap_up(e, i);
    }
}

static void on_retry_timer(uv_timer_t *t);

static void arm_retry_timer(hv_engine_t *e)
{
    if (e->nretry == 0) {
        uv_timer_stop(&e->retry_timer);
        return;
    }
    uint64_t now = uv_now(e->loop), at = e->retry_heap[0]->retry_at;
    uv_timer_start(&e->retry_timer, on_retry_timer, at > now ? at - now : 0, 0);
}

/* A record that failed is going to be tried again: forget what the failed attempt said. */
static void reset_for_retry(hv_record_t *rec)
{
    rec->ok = 1;
    rec->stage = HV_STAGE_NONE;
    rec->error_type = HV_ET_NONE;
    free(rec->error);
    rec->error = NULL;
    rec->http_status = 0;
    free(rec->content_type);
    rec->content_type = NULL;
}

static void on_retry_timer(uv_timer_t *t)
{
    hv_engine_t *e = t->data;
    uint64_t now = uv_now(e->loop);
    while (e->nretry > 0 && e->retry_heap[0]->retry_at <= now) {
        hv_job_t *job = e->retry_heap[0];
        heap_remove(e, 0);
        hv_batch_t *b = batch_of(job);
        b->delayed--;
        reset_for_retry(job->rec);
        job->attempts++;
        job->deadline_ms = 0;
        job->fresh_conn_retried = 0;
        /* Ahead of the batch's other jobs for that host: it has waited already. */
        hv_sched_submit(e->sched, job->flow, job, 1);
    }
    arm_retry_timer(e);
    hv_engine_update(e);
}

/* Would the same request plausibly succeed a little later? */
static int transient(const hv_config_t *cfg, const hv_record_t *rec)
{
    switch (rec->error_type) {
    case HV_ET_HTTP_STATUS:
        return rec->http_status >= 100 && rec->http_status <= 599 &&
               cfg->retry_status[rec->http_status];
    case HV_ET_CONNECT:
    case HV_ET_CONNECT_TIMEOUT:
    case HV_ET_READ_TIMEOUT:
    case HV_ET_TOTAL_TIMEOUT:
    case HV_ET_CONNECTION_RESET:
        return 1;
    case HV_ET_DNS:
        /* A name that does not exist will not exist in a second either. */
        return rec->error != NULL && (strcmp(rec->error, "dns_temporary_failure") == 0 ||
                                      strncmp(rec->error, "dns_lookup_exceeded", 19) == 0);
    case HV_ET_TLS:
        /* Broken handshakes can be transient; alerts and protocol errors are not. */
        return rec->error != NULL &&
               (strcmp(rec->error, "tls_closed_during_handshake") == 0 ||
                strcmp(rec->error, "tls_connection_reset_during_handshake") == 0);
    default:
        return 0;
    }
}

/* Is this failure worth another attempt? 1 with job->retry_at set, or 0. */
static int plan_retry(hv_engine_t *e, hv_job_t *job)
{
    const hv_config_t *cfg = e->cfg;
    const hv_record_t *rec = job->rec;
    uint64_t delay;

    if (e->stopping || job->attempts > cfg->retries)
        return 0;
    /* An unreachable robots.txt forbids everything only "for now": try again later. */
    if (rec->error_type == HV_ET_ROBOTS ? !job->robots_retry : !transient(cfg, rec))
        return 0;
    uint64_t base = cfg->retry_base_ms << HV_MIN(job->attempts - 1, 30u);
    if (base > cfg->retry_max_ms || base < cfg->retry_base_ms)
        base = cfg->retry_max_ms;
    /* Exponential backoff plus up to as much again at random, so that many URLs failing
     * together do not all come back at the same instant. */
    delay = base + (uint64_t)((double)base * ((double)random() / (double)RAND_MAX));
    if (delay > cfg->retry_max_ms)
        delay = cfg->retry_max_ms;
    int honour = rec->error_type == HV_ET_HTTP_STATUS &&
                 (rec->http_status == 429 || rec->http_status == 503) && job->retry_after_ms >= 0;
    if (honour) {
        if ((uint64_t)job->retry_after_ms > cfg->retry_after_max_ms)
            return 0; /* the server asks for longer than we wait: fail now with its status */
        delay = (uint64_t)job->retry_after_ms;
    }
    job->retry_at = uv_now(e->loop) + delay;
    HV_LOG(HV_LOG_INFO,
           "event=retry job=%" PRIu64 " attempt=%u delay_ms=%" PRIu64 " error_type=%s error=%s%s",
           job->id, job->attempts + 1, delay, hv_error_type_name(rec->error_type),
           rec->error ? rec->error : "", honour ? " retry_after=1" : "");
    return 1;
}

static void on_failed(void *ud, hv_job_t *job)
{
    hv_engine_t *e = ud;
    if (job->kind == HV_JOB_ROBOTS) {
        robots_done(e, job, NULL, 0);
        hv_engine_update(e);
        return;
    }
    feedback(e, job);
    hv_batch_t *b = batch_of(job);
    if (plan_retry(e, job)) {
        e->retries++;
        b->delayed++;
        heap_push(e, job);
        arm_retry_timer(e);
        hv_engine_update(e);
        return;
    }
    hv_batch__job_failed(b, job);
}

void hv_engine__drop_delayed(hv_engine_t *e, hv_batch_t *b, void (*drop)(void *, hv_job_t *),
                             void *ud)
{
    for (unsigned i = 0; i < e->nretry;) {
        hv_job_t *job = e->retry_heap[i];
        if (b != NULL && batch_of(job) != b) {
            i++;
            continue;
        }
        heap_remove(e, i);
        batch_of(job)->delayed--;
        drop(ud, job);
    }
    arm_retry_timer(e);
}

static void on_cancelled(void *ud, hv_job_t *job)
{
    hv_engine_t *e = ud;
    drop_pol(e, job);
    if (job->kind == HV_JOB_ROBOTS) {
        job->pol = NULL;
        hv_job_free(job);
        return;
    }
    hv_batch__job_cancelled(batch_of(job), job);
}

static const hv_fetch_cbs_t fetch_cbs = {on_page, on_failed, on_cancelled};

static void on_parsed(void *ud, void *tag, hv_record_t *rec, int cancelled)
{
    hv_engine_t *e = ud;
    hv_batch__parsed(tag, rec, cancelled);
    hv_engine_update(e);
}

hv_engine_t *hv_engine_new(uv_loop_t *loop, const hv_config_t *cfg, hv_tls_ctx_t *tls)
{
    hv_engine_t *e = hv_xcalloc(1, sizeof(*e));
    e->loop = loop;
    e->cfg = cfg;
    e->tls = tls;
    TAILQ_INIT(&e->pages);
    TAILQ_INIT(&e->batches);
    e->dns = hv_dns_new(loop, cfg->dns_ttl_ms, 4096);
    e->polite = hv_polite_new(cfg);
    e->sched = hv_sched_new(loop, cfg->concurrency, e->polite, start_job, may_start_request,
                            cfg->obey_robots ? need_robots : NULL, e);
    e->robots_flow = hv_sched_flow_new(e->sched, NULL, NULL, 1);
    /* The product token is the User-Agent's first product name. */
    size_t plen = strcspn(cfg->user_agent, "/ ");
    snprintf(e->product, sizeof(e->product), "%.*s", (int)HV_MIN(plen, sizeof(e->product) - 1),
             cfg->user_agent);
    e->fetch = hv_fetch_new(loop, cfg, e->sched, e->dns, tls, &fetch_cbs, e);
    e->parse = hv_parse_new(loop, cfg->title_fast_path, on_parsed, e);
    uv_timer_init(loop, &e->drain_timer);
    e->drain_timer.data = e;
    uv_timer_init(loop, &e->retry_timer);
    e->retry_timer.data = e;
    uv_timer_init(loop, &e->pace_timer);
    e->pace_timer.data = e;
    uv_idle_init(loop, &e->burst_idle);
    e->burst_idle.data = e;
    e->handles = 4;
    return e;
}

/* ---- pages ---- */

void hv_engine__queue_page(hv_engine_t *e, hv_page_t *pg)
{
    TAILQ_INSERT_TAIL(&e->pages, pg, link);
    e->stats.pages++;
    e->stats.page_bytes += pg->len;
    if (e->stats.pages > e->stats.hwm_pages)
        e->stats.hwm_pages = e->stats.pages;
    if (e->stats.page_bytes > e->stats.hwm_page_bytes)
        e->stats.hwm_page_bytes = e->stats.page_bytes;
    /* Pause before anything else can read: the bound must hold exactly. */
    if (!e->reads_paused && pages_full(e)) {
        e->reads_paused = 1;
        e->stats.read_pauses++;
        hv_fetch_pause(e->fetch);
        HV_LOG(HV_LOG_DEBUG, "event=reads_paused pages=%u bytes=%" PRIu64, e->stats.pages,
               e->stats.page_bytes);
    }
    hv_engine_update(e);
}

static void unlink_page(hv_engine_t *e, hv_page_t *pg)
{
    TAILQ_REMOVE(&e->pages, pg, link);
    e->stats.pages--;
    e->stats.page_bytes -= pg->len;
}

void hv_engine__drop_pages(hv_engine_t *e, hv_batch_t *b)
{
    hv_page_t *pg, *next;
    for (pg = TAILQ_FIRST(&e->pages); pg != NULL; pg = next) {
        next = TAILQ_NEXT(pg, link);
        if (b != NULL && pg->batch != b)
            continue;
        unlink_page(e, pg);
        hv_batch__parsed(pg->batch, pg->rec, 1);
        free(pg->body);
        free(pg);
    }
}

/* The oldest page whose batch can take another record; a batch whose writer is behind must
 * not hold up the others. */
static hv_page_t *next_page(hv_engine_t *e)
{
    hv_page_t *pg;
    TAILQ_FOREACH(pg, &e->pages, link)
    {
        if (hv_batch__accepts_results(pg->batch))
            return pg;
    }
    return NULL;
}

/* Start a parse group with `pg` and more queued pages of the same batch: enough to share the
 * queue evenly over the free parsers, within HV_PARSE_GROUP pages and GROUP_BYTES. */
#define GROUP_BYTES (1024 * 1024)

static void submit_group(hv_engine_t *e, hv_page_t *pg)
{
    unsigned free_slots = e->cfg->parse_jobs - hv_parse_busy(e->parse);
    unsigned want = (e->stats.pages + free_slots - 1) / free_slots;
    if (want > HV_PARSE_GROUP)
        want = HV_PARSE_GROUP;
    hv_batch_t *b = pg->batch;
    hv_parse_group_t *g = hv_parse_group_new(e->parse, b, b->rules, b->crash_note);
    size_t bytes = 0;
    while (pg != NULL) {
        hv_page_t *next = TAILQ_NEXT(pg, link);
        if (pg->batch == b) {
            unlink_page(e, pg);
            hv_parse_group_add(g, pg->rec, pg->body, pg->len);
            bytes += pg->len;
            free(pg);
            if (hv_parse_group_size(g, NULL) >= want || bytes >= GROUP_BYTES)
                break;
        }
        pg = next;
    }
    hv_parse_group_submit(g);
}

/* ---- batches ---- */

void hv_engine__attach(hv_engine_t *e, hv_batch_t *b)
{
    TAILQ_INSERT_TAIL(&e->batches, b, link);
    e->nbatches++;
}

void hv_engine__detach(hv_engine_t *e, hv_batch_t *b)
{
    TAILQ_REMOVE(&e->batches, b, link);
    e->nbatches--;
}

unsigned hv_engine_batches(const hv_engine_t *e)
{
    return e->nbatches;
}

/* Starting a request on a new connection costs a connect(), which on loopback completes the
 * handshake inside the call (~50 us); a thousand of them in one go kept the loop from writing
 * the first request for 50 ms. Between bursts the loop polls: connections opened first send
 * first. */
#define START_BURST 64

static void on_burst_idle(uv_idle_t *i)
{
    hv_engine_t *e = i->data;
    uv_idle_stop(i);
    e->burst_started = 0;
    hv_engine_update(e);
}

static void on_pace_timer(uv_timer_t *t)
{
    hv_engine_t *e = t->data;
    hv_sched_tick(e->sched);
    hv_engine_update(e);
}

/* Wake up when the next host held back by its pacing delay may start again. */
static void arm_pace_timer(hv_engine_t *e)
{
    uint64_t at = hv_sched_next_wakeup(e->sched);
    if (at == 0) {
        uv_timer_stop(&e->pace_timer);
        return;
    }
    uint64_t now = uv_now(e->loop);
    uv_timer_start(&e->pace_timer, on_pace_timer, at > now ? at - now : 0, 0);
}

void hv_engine_update(hv_engine_t *e)
{
    if (e->in_update) {
        e->update_again = 1;
        return;
    }
    e->in_update = 1;
    do {
        e->update_again = 0;

        hv_page_t *pg;
        while (hv_parse_busy(e->parse) < e->cfg->parse_jobs && (pg = next_page(e)) != NULL)
            submit_group(e, pg);

        if (e->reads_paused && pages_low(e)) {
            e->reads_paused = 0;
            hv_fetch_resume(e->fetch);
            HV_LOG(HV_LOG_DEBUG, "event=reads_resumed pages=%u bytes=%" PRIu64, e->stats.pages,
                   e->stats.page_bytes);
        }

        hv_batch_t *b, *next;
        for (b = TAILQ_FIRST(&e->batches); b != NULL; b = next) {
            next = TAILQ_NEXT(b, link);
            hv_batch__update(b);
        }

        /* Requests start in bursts; after a full one, the next waits until the loop has
         * polled (kicks come one job at a time from the reader, so the count spans them). */
        if (!uv_is_active((uv_handle_t *)&e->burst_idle)) {
            e->burst_started += hv_sched_kick(e->sched, START_BURST - e->burst_started);
            if (e->burst_started >= START_BURST)
                uv_idle_start(&e->burst_idle, on_burst_idle);
        }
        arm_pace_timer(e);
    } while (e->update_again);
    e->in_update = 0;
}

/* ---- stopping ---- */

static void on_drain_timeout(uv_timer_t *t)
{
    hv_engine_t *e = t->data;
    HV_LOG(HV_LOG_NOTICE, "event=drain_timeout in_flight=%u", hv_fetch_active(e->fetch));
    hv_fetch_cancel(e->fetch, NULL);
    hv_engine_update(e);
}

void hv_engine_stop(hv_engine_t *e, int force)
{
    hv_batch_t *b, *next;
    if (force) {
        e->forced = 1;
        uv_timer_stop(&e->drain_timer);
    } else if (!e->stopping) {
        uv_timer_start(&e->drain_timer, on_drain_timeout, e->cfg->drain_timeout_ms, 0);
    }
    e->stopping = 1;
    for (b = TAILQ_FIRST(&e->batches); b != NULL; b = next) {
        next = TAILQ_NEXT(b, link);
        hv_batch__stop(b, force);
    }
    if (force) {
        hv_fetch_cancel(e->fetch, NULL);
        hv_engine__drop_pages(e, NULL);
        hv_parse_cancel_pending(e->parse, NULL);
    }
    hv_engine_update(e);
}

/* ---- stats and closing ---- */

const hv_engine_stats_t *hv_engine_stats(const hv_engine_t *e)
{
    return &e->stats;
}

const hv_fetch_stats_t *hv_engine_fetch_stats(const hv_engine_t *e)
{
    return e->fetch != NULL ? hv_fetch_stats(e->fetch) : &e->fstats;
}

const hv_dns_stats_t *hv_engine_dns_stats(const hv_engine_t *e)
{
    return e->dns != NULL ? hv_dns_stats(e->dns) : &e->dstats;
}

hv_tls_ctx_t *hv_engine_tls(const hv_engine_t *e)
{
    return e->tls;
}

void hv_engine_format_stats(const hv_engine_t *e, char *out, size_t cap)
{
    const hv_fetch_stats_t *f = hv_engine_fetch_stats(e);
    const hv_dns_stats_t *d = hv_engine_dns_stats(e);
    int n = snprintf(out, cap,
                     " hwm_pages=%u hwm_page_bytes=%" PRIu64 " read_pauses=%" PRIu64
                     " connections_opened=%" PRIu64 " connections_reused=%" PRIu64
                     " stale_retries=%" PRIu64 " redirects=%" PRIu64 " retries=%" PRIu64
                     " dns_lookups=%" PRIu64 " dns_hits=%" PRIu64,
                     e->stats.hwm_pages, e->stats.hwm_page_bytes, e->stats.read_pauses,
                     f->connections_opened, f->connections_reused, f->stale_retries,
                     f->redirects, e->retries, d->lookups, d->hits);
    if (n > 0 && (size_t)n < cap && e->polite != NULL) {
        const hv_polite_stats_t *ps = hv_polite_stats(e->polite);
        int m = snprintf(out + n, cap - (size_t)n,
                         " robots_fetches=%" PRIu64 " robots_disallowed=%" PRIu64
                         " throttle_decreases=%" PRIu64 " throttle_increases=%" PRIu64
                         " hosts_throttled=%u",
                         e->robots_fetches, e->robots_disallowed, ps->decreases, ps->increases,
                         ps->throttled);
        if (m > 0)
            n += m;
    }
    if (e->tls != NULL && n > 0 && (size_t)n < cap) {
        const hv_tls_stats_t *t = hv_tls_ctx_stats(e->tls);
        snprintf(out + n, cap - (size_t)n,
                 " tls_handshakes=%" PRIu64 " tls_resumed=%" PRIu64 " tls_failures=%" PRIu64,
                 t->handshakes, t->resumed, t->failures);
    }
}

void hv_engine_render_metrics(const hv_engine_t *e, hv_buf_t *out)
{
    const hv_fetch_stats_t *f = hv_engine_fetch_stats(e);
    const hv_dns_stats_t *d = hv_engine_dns_stats(e);
    unsigned waiting = e->sched != NULL ? hv_sched_waiting(e->sched) : 0;
    unsigned inflight = e->sched != NULL ? hv_sched_inflight(e->sched) : 0;

    hv_metrics_gauge(out, "harvestd_requests_in_flight", "Requests being downloaded.", inflight);
    hv_metrics_gauge(out, "harvestd_jobs_waiting", "URLs waiting for a request slot.", waiting);
    hv_metrics_gauge(out, "harvestd_page_queue_depth", "Pages waiting for a parser.",
                     e->stats.pages);
    hv_metrics_gauge(out, "harvestd_page_queue_bytes", "Bytes of pages waiting for a parser.",
                     (double)e->stats.page_bytes);
    hv_metrics_gauge(out, "harvestd_page_queue_high_water", "Most pages ever waiting at once.",
                     e->stats.hwm_pages);
    hv_metrics_gauge(out, "harvestd_page_queue_high_water_bytes",
                     "Most page bytes ever waiting at once.", (double)e->stats.hwm_page_bytes);
    hv_metrics_counter(out, "harvestd_read_pauses_total",
                       "Times the page queue filled and every connection stopped reading.",
                       e->stats.read_pauses);
    hv_metrics_gauge(out, "harvestd_batches_active", "Batches running.", e->nbatches);
    hv_metrics_counter(out, "harvestd_connections_opened_total", "TCP connections opened.",
                       f->connections_opened);
    hv_metrics_counter(out, "harvestd_connections_reused_total",
                       "Requests sent on a pooled keep-alive connection.",
                       f->connections_reused);
    hv_metrics_counter(out, "harvestd_stale_connection_retries_total",
                       "Requests retried because a pooled connection had been closed.",
                       f->stale_retries);
    hv_metrics_counter(out, "harvestd_redirects_total", "Redirects followed.", f->redirects);
    hv_metrics_counter(out, "harvestd_retries_total", "Retries scheduled after a transient failure.",
                       e->retries);
    hv_metrics_counter(out, "harvestd_dns_lookups_total", "getaddrinfo calls made.", d->lookups);
    hv_metrics_counter(out, "harvestd_robots_fetches_total", "robots.txt requests made.",
                       e->robots_fetches);
    hv_metrics_counter(out, "harvestd_robots_disallowed_total",
                       "URLs not fetched because robots.txt disallows them.",
                       e->robots_disallowed);
    if (e->polite != NULL) {
        const hv_polite_stats_t *ps = hv_polite_stats(e->polite);
        hv_metrics_counter(out, "harvestd_throttle_decreases_total",
                           "Times a host's pace was lowered (429/503, timeouts, latency).",
                           ps->decreases);
        hv_metrics_gauge(out, "harvestd_hosts_throttled", "Hosts below their configured pace.",
                         ps->throttled);
    }
    hv_metrics_counter(out, "harvestd_dns_cache_hits_total",
                       "Lookups answered by the cache or a lookup in flight.", d->hits);
    if (e->tls != NULL) {
        const hv_tls_stats_t *t = hv_tls_ctx_stats(e->tls);
        static const char head[] = "# HELP harvestd_tls_handshakes_total TLS handshakes completed.\n"
                                   "# TYPE harvestd_tls_handshakes_total counter\n";
        hv_buf_append(out, head, sizeof(head) - 1);
        char line[160];
        int n = snprintf(line, sizeof(line),
                         "harvestd_tls_handshakes_total{kind=\"full\"} %" PRIu64 "\n"
                         "harvestd_tls_handshakes_total{kind=\"resumed\"} %" PRIu64 "\n",
                         t->handshakes, t->resumed);
        hv_buf_append(out, line, (size_t)n);
        hv_metrics_counter(out, "harvestd_tls_failures_total", "TLS handshakes that failed.",
                           t->failures);
    }
}

static void drop_robots_job(void *ud, hv_job_t *job)
{
    hv_engine_t *e = ud;
    drop_pol(e, job);
    hv_job_free(job);
}

static void on_drain_timer_close(uv_handle_t *h)
{
    hv_engine_t *e = h->data;
    if (--e->handles > 0)
        return;
    void (*closed)(void *) = e->closed;
    void *ud = e->closed_ud;
    free(e);
    if (closed != NULL)
        closed(ud);
}

void hv_engine_close(hv_engine_t *e, void (*done)(void *ud), void *ud)
{
    assert(e->nbatches == 0 && e->nretry == 0);
    e->closed = done;
    e->closed_ud = ud;
    uv_timer_stop(&e->drain_timer);
    /* Only robots.txt requests can still be in flight (batches wait for their own). */
    hv_fetch_cancel(e->fetch, NULL);
    e->fstats = *hv_fetch_stats(e->fetch);
    e->dstats = *hv_dns_stats(e->dns);
    hv_fetch_free(e->fetch);
    e->fetch = NULL;
    hv_sched_drop_waiting(e->sched, e->robots_flow, drop_robots_job, e);
    hv_sched_flow_free(e->sched, e->robots_flow);
    hv_sched_free(e->sched);
    hv_polite_free(e->polite);
    e->polite = NULL;
    e->sched = NULL;
    hv_parse_free(e->parse);
    e->parse = NULL;
    hv_dns_close(e->dns);
    e->dns = NULL;
    free(e->retry_heap);
    e->retry_heap = NULL;
    uv_close((uv_handle_t *)&e->drain_timer, on_drain_timer_close);
    uv_close((uv_handle_t *)&e->retry_timer, on_drain_timer_close);
    uv_close((uv_handle_t *)&e->pace_timer, on_drain_timer_close);
    uv_close((uv_handle_t *)&e->burst_idle, on_drain_timer_close);
}
