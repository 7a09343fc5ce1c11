/*
 * pipeline.c: the batch. All flow decisions live in update(), which every event ends with:
 * it moves work forward as far as the bounds allow and recomputes which stages must wait.
 * update() is re-entrant safe (stages call back synchronously), by running again instead of
 * recursing.
 */
#include "harvestd/pipeline.h"

#include <assert.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "harvestd/common.h"
#include "harvestd/fetch.h"
#include "harvestd/job.h"
#include "harvestd/log.h"
#include "harvestd/parse.h"
#include "harvestd/sched.h"
#include "harvestd/url.h"
#include "harvestd/writer.h"

typedef enum { PL_RUNNING, PL_DRAINING, PL_STOPPING, PL_FINISHING, PL_DONE } pl_state_t;

typedef struct page_s {
    hv_record_t *rec;
    char *body;
    size_t len;
    TAILQ_ENTRY(page_s) link;
} page_t;

TAILQ_HEAD(record_list_s, hv_record_s);

struct hv_pipeline_s {
    uv_loop_t *loop;
    const hv_config_t *cfg;
    pl_state_t state;
    int interrupted;
    int error;
    char error_detail[256];
    hv_pipeline_done_cb done;
    void *ud;

    hv_source_t *source;
    char *source_name;
    int source_paused;
    int input_done;

    hv_dns_t *dns;
    hv_tls_ctx_t *tls;
    hv_sched_t *sched;
    hv_fetch_t *fetch;
    hv_parse_t *parse;
    hv_writer_t *writer;

    uint64_t next_job_id;
    uint64_t jobs_alive;
    TAILQ_HEAD(, page_s) pages;
    unsigned npages;
    uint64_t page_bytes;
    int reads_paused;
    struct record_list_s results;
    unsigned nresults;

    hv_fetch_stats_t fstats; /* copied when the stages are freed */
    hv_dns_stats_t dstats;
    uv_timer_t drain_timer;
    int in_update;
    int update_again;
    hv_pipeline_stats_t stats;
};

static void update(hv_pipeline_t *pl);

void hv_job_free(hv_job_t *job)
{
    hv_record_free(job->rec);
    hv_url_free(&job->url);
    free(job);
}

/* ---- queue predicates ---- */

static int pages_full(const hv_pipeline_t *pl)
{
    return pl->npages >= pl->cfg->page_queue || pl->page_bytes >= pl->cfg->page_queue_bytes;
}

static int pages_low(const hv_pipeline_t *pl)
{
    return pl->npages <= pl->cfg->page_queue / 2 && pl->page_bytes <= pl->cfg->page_queue_bytes / 2;
}

static int results_full(const hv_pipeline_t *pl)
{
    return pl->nresults >= pl->cfg->result_queue;
}

static int may_start_request(void *ud)
{
    hv_pipeline_t *pl = ud;
    return pl->state == PL_RUNNING && !pl->reads_paused && !results_full(pl);
}

static int may_read_input(const hv_pipeline_t *pl)
{
    return pl->state == PL_RUNNING && hv_sched_waiting(pl->sched) < pl->cfg->queue_size &&
           !results_full(pl);
}

/* ---- records and pages ---- */

static void push_result(hv_pipeline_t *pl, hv_record_t *rec)
{
    pl->stats.records++;
    if (rec->ok) {
        pl->stats.ok++;
    } else {
        pl->stats.failed++;
        pl->stats.by_type[rec->error_type]++;
    }
    TAILQ_INSERT_TAIL(&pl->results, rec, link);
    pl->nresults++;
    if (pl->nresults > pl->stats.hwm_results)
        pl->stats.hwm_results = pl->nresults;
}

static void drop_results(hv_pipeline_t *pl)
{
    hv_record_t *rec;
    while ((rec = TAILQ_FIRST(&pl->results)) != NULL) {
        TAILQ_REMOVE(&pl->results, rec, link);
        pl->nresults--;
        hv_record_free(rec);
    }
}

static void drop_pages(hv_pipeline_t *pl)
{
    page_t *pg;
    while ((pg = TAILQ_FIRST(&pl->pages)) != NULL) {
        TAILQ_REMOVE(&pl->pages, pg, link);
        pl->npages--;
        pl->page_bytes -= pg->len;
        hv_record_free(pg->rec);
        free(pg->body);
        free(pg);
    }
}

static void drop_job(void *ud, hv_job_t *job)
{
    hv_pipeline_t *pl = ud;
    pl->jobs_alive--;
    hv_job_free(job);
}

/* ---- source sink ---- */

static int on_line(void *ud, const char *line, size_t len, uint64_t lineno, int overlong)
{
    hv_pipeline_t *pl = ud;
    hv_record_t *rec = hv_record_new(line, len);
    const char *reason = "malformed";
    hv_url_t url;
    int rc;

    pl->stats.lines++;
    if (overlong)
        rc = HV_EURL, reason = "line_exceeds_8_kib";
    else
        rc = hv_url_parse(&url, line, len, &reason);
    if (rc != 0) {
        hv_error_type_t t = rc == HV_ESCHEME ? HV_ET_UNSUPPORTED_SCHEME : HV_ET_INVALID_URL;
        hv_record_fail(rec, HV_STAGE_INPUT, t, reason);
        HV_LOG(HV_LOG_INFO, "event=invalid_input source=%s line=%" PRIu64 " error_type=%s error=%s",
               pl->source_name, lineno, hv_error_type_name(t), reason);
        push_result(pl, rec);
    } else {
        hv_job_t *job = hv_xcalloc(1, sizeof(*job));
        job->id = ++pl->next_job_id;
        job->rec = rec;
        job->url = url;
        pl->jobs_alive++;
        hv_sched_submit(pl->sched, job, 0);
        unsigned waiting = hv_sched_waiting(pl->sched);
        if (waiting > pl->stats.hwm_jobs)
            pl->stats.hwm_jobs = waiting;
    }
    update(pl);
    if (may_read_input(pl))
        return 0;
    pl->source_paused = 1;
    return 1;
}

static void fail_batch(hv_pipeline_t *pl, int err, const char *what)
{
    if (pl->error != 0)
        return;
    pl->error = err;
    snprintf(pl->error_detail, sizeof(pl->error_detail), "%s", what);
    HV_LOG(HV_LOG_ERROR, "event=batch_failed what=\"%s\" err=%s (%s)", what, hv_err_name(err),
           hv_strerror(err));
    hv_pipeline_stop(pl, 1);
}

static void on_input_end(void *ud, int status)
{
    hv_pipeline_t *pl = ud;
    if (status != 0) {
        char what[256];
        snprintf(what, sizeof(what), "reading %s", pl->source_name);
        fail_batch(pl, status, what);
        return;
    }
    pl->input_done = 1;
    HV_LOG(HV_LOG_INFO, "event=input_done source=%s lines=%" PRIu64, pl->source_name,
           pl->stats.lines);
    update(pl);
}

static const hv_sink_t sink = {on_line, on_input_end};

/* ---- fetch callbacks ---- */

static void on_page(void *ud, hv_job_t *job, char *body, size_t len)
{
    hv_pipeline_t *pl = ud;
    page_t *pg = hv_xmalloc(sizeof(*pg));
    pg->rec = job->rec;
    pg->body = body;
    pg->len = len;
    job->rec = NULL;
    hv_job_free(job);
    pl->jobs_alive--;
    TAILQ_INSERT_TAIL(&pl->pages, pg, link);
    pl->npages++;
    pl->page_bytes += len;
    if (pl->npages > pl->stats.hwm_pages)
        pl->stats.hwm_pages = pl->npages;
    if (pl->page_bytes > pl->stats.hwm_page_bytes)
        pl->stats.hwm_page_bytes = pl->page_bytes;
    /* Pause before anything else can read: the bound must hold exactly. */
    if (!pl->reads_paused && pages_full(pl)) {
        pl->reads_paused = 1;
        pl->stats.read_pauses++;
        hv_fetch_pause(pl->fetch);
        HV_LOG(HV_LOG_DEBUG, "event=reads_paused pages=%u bytes=%" PRIu64, pl->npages,
               pl->page_bytes);
    }
    update(pl);
}

static void on_failed(void *ud, hv_job_t *job)
{
    hv_pipeline_t *pl = ud;
    hv_record_t *rec = job->rec;
    job->rec = NULL;
    hv_job_free(job);
    pl->jobs_alive--;
    push_result(pl, rec);
    update(pl);
}

static void on_cancelled(void *ud, hv_job_t *job)
{
    hv_pipeline_t *pl = ud;
    hv_job_free(job);
    pl->jobs_alive--;
    update(pl);
}

static const hv_fetch_cbs_t fetch_cbs = {on_page, on_failed, on_cancelled};

static void start_job(void *ud, hv_job_t *job)
{
    hv_pipeline_t *pl = ud;
    hv_fetch_start(pl->fetch, job);
}

/* ---- parse and writer callbacks ---- */

static void on_parsed(void *ud, hv_record_t *rec, int cancelled)
{
    hv_pipeline_t *pl = ud;
    if (cancelled || pl->error != 0)
        hv_record_free(rec);
    else
        push_result(pl, rec);
    update(pl);
}

static void on_writer_drain(void *ud)
{
    update(ud);
}

static void on_writer_error(void *ud, int err)
{
    hv_pipeline_t *pl = ud;
    char what[256];
    snprintf(what, sizeof(what), "writing %s", pl->cfg->output_path);
    fail_batch(pl, err, what);
}

static const hv_writer_cbs_t writer_cbs = {on_writer_drain, on_writer_error};

/* ---- lifecycle ---- */

int hv_pipeline_new(uv_loop_t *loop, const hv_config_t *cfg, hv_tls_ctx_t *tls,
                    hv_pipeline_done_cb done, void *ud, hv_pipeline_t **out)
{
    hv_pipeline_t *pl = hv_xcalloc(1, sizeof(*pl));
    int rc = hv_writer_open(loop, cfg->output_path, cfg->flush_ms, &writer_cbs, pl, &pl->writer);
    if (rc != 0) {
        free(pl);
        *out = NULL;
        return rc;
    }
    pl->loop = loop;
    pl->cfg = cfg;
    pl->done = done;
    pl->ud = ud;
    TAILQ_INIT(&pl->pages);
    TAILQ_INIT(&pl->results);
    pl->dns = hv_dns_new(loop, cfg->dns_ttl_ms, 4096);
    pl->sched = hv_sched_new(cfg->concurrency, cfg->per_host, start_job, may_start_request, pl);
    pl->tls = tls;
    pl->fetch = hv_fetch_new(loop, cfg, pl->sched, pl->dns, tls, &fetch_cbs, pl);
    pl->parse = hv_parse_new(loop, on_parsed, pl);
    uv_timer_init(loop, &pl->drain_timer);
    pl->drain_timer.data = pl;
    pl->stats.started_ms = uv_now(loop);
    *out = pl;
    return 0;
}

void hv_pipeline_set_source(hv_pipeline_t *pl, hv_source_t *src, const char *name)
{
    pl->source = src;
    pl->source_name = hv_xstrdup(name);
    hv_source_start(src, &sink, pl);
}

static void close_source(hv_pipeline_t *pl)
{
    if (pl->source != NULL) {
        hv_source_close(pl->source);
        pl->source = NULL;
    }
}

static void on_drain_timeout(uv_timer_t *t)
{
    hv_pipeline_t *pl = t->data;
    HV_LOG(HV_LOG_NOTICE, "event=drain_timeout in_flight=%u", hv_fetch_active(pl->fetch));
    hv_fetch_cancel_all(pl->fetch);
    update(pl);
}

void hv_pipeline_stop(hv_pipeline_t *pl, int force)
{
    if (pl->state >= PL_FINISHING)
        return;
    pl->interrupted = 1;
    close_source(pl);
    if (!force && pl->state == PL_RUNNING) {
        pl->state = PL_DRAINING;
        HV_LOG(HV_LOG_NOTICE, "event=drain_start in_flight=%u waiting=%u drain_timeout_ms=%" PRIu64,
               hv_fetch_active(pl->fetch), hv_sched_waiting(pl->sched),
               pl->cfg->drain_timeout_ms);
        hv_sched_drop_waiting(pl->sched, drop_job, pl);
        uv_timer_start(&pl->drain_timer, on_drain_timeout, pl->cfg->drain_timeout_ms, 0);
        update(pl);
        return;
    }
    pl->state = PL_STOPPING;
    HV_LOG(HV_LOG_NOTICE, "event=stop_now in_flight=%u", hv_fetch_active(pl->fetch));
    uv_timer_stop(&pl->drain_timer);
    hv_fetch_cancel_all(pl->fetch);
    hv_sched_drop_waiting(pl->sched, drop_job, pl);
    drop_pages(pl);
    hv_parse_cancel_pending(pl->parse);
    if (pl->error != 0)
        drop_results(pl);
    update(pl);
}

static void on_writer_done(void *ud, int status)
{
    hv_pipeline_t *pl = ud;
    pl->writer = NULL;
    if (status != 0 && pl->error == 0) {
        pl->error = status;
        snprintf(pl->error_detail, sizeof(pl->error_detail), "finishing %s",
                 pl->cfg->output_path);
    }
    pl->state = PL_DONE;
    uv_timer_stop(&pl->drain_timer);
    uv_close((uv_handle_t *)&pl->drain_timer, NULL);
    pl->fstats = *hv_fetch_stats(pl->fetch);
    pl->dstats = *hv_dns_stats(pl->dns);
    hv_fetch_free(pl->fetch);
    pl->fetch = NULL;
    hv_sched_free(pl->sched);
    pl->sched = NULL;
    hv_parse_free(pl->parse);
    pl->parse = NULL;
    hv_dns_close(pl->dns);
    pl->dns = NULL;
    int final = pl->error != 0 ? pl->error : pl->interrupted ? HV_ECANCELLED : 0;
    pl->done(pl->ud, final, pl->error_detail);
}

static void check_done(hv_pipeline_t *pl)
{
    if (pl->state >= PL_FINISHING)
        return;
    if (pl->state == PL_RUNNING && !pl->input_done)
        return;
    if (pl->state != PL_RUNNING) {
        if (hv_fetch_active(pl->fetch) > 0)
            return;
        /* Redirects that came back during a drain can no longer run. */
        hv_sched_drop_waiting(pl->sched, drop_job, pl);
    }
    if (pl->jobs_alive > 0 || pl->npages > 0 || hv_parse_inflight(pl->parse) > 0 ||
        pl->nresults > 0)
        return;
    pl->state = PL_FINISHING;
    close_source(pl);
    hv_writer_finish(pl->writer, on_writer_done);
}

static void update(hv_pipeline_t *pl)
{
    if (pl->in_update) {
        pl->update_again = 1;
        return;
    }
    pl->in_update = 1;
    do {
        pl->update_again = 0;
        if (pl->state >= PL_FINISHING)
            break;

        /* results -> writer */
        if (pl->error != 0)
            drop_results(pl);
        hv_record_t *rec;
        while ((rec = TAILQ_FIRST(&pl->results)) != NULL && !hv_writer_full(pl->writer)) {
            TAILQ_REMOVE(&pl->results, rec, link);
            pl->nresults--;
            hv_writer_push(pl->writer, rec);
        }

        /* pages -> parse */
        page_t *pg;
        while ((pg = TAILQ_FIRST(&pl->pages)) != NULL &&
               hv_parse_inflight(pl->parse) < pl->cfg->parse_jobs && !results_full(pl)) {
            TAILQ_REMOVE(&pl->pages, pg, link);
            pl->npages--;
            pl->page_bytes -= pg->len;
            hv_parse_submit(pl->parse, pg->rec, pg->body, pg->len);
            free(pg);
        }

        /* connections read again once the page queue has room */
        if (pl->reads_paused && pages_low(pl)) {
            pl->reads_paused = 0;
            hv_fetch_resume(pl->fetch);
            HV_LOG(HV_LOG_DEBUG, "event=reads_resumed pages=%u bytes=%" PRIu64, pl->npages,
                   pl->page_bytes);
        }

        hv_sched_kick(pl->sched);

        if (pl->source != NULL && pl->source_paused && may_read_input(pl)) {
            pl->source_paused = 0;
            hv_source_resume(pl->source);
        }

        check_done(pl);
    } while (pl->update_again);
    pl->in_update = 0;
}

const hv_pipeline_stats_t *hv_pipeline_stats(const hv_pipeline_t *pl)
{
    return &pl->stats;
}

void hv_pipeline_print_summary(const hv_pipeline_t *pl, FILE *out)
{
    const hv_pipeline_stats_t *s = &pl->stats;
    double elapsed = (double)(uv_now(pl->loop) - s->started_ms) / 1000.0;
    char line[4096];
    size_t n = 0;

#define ADD(...)                                                                           \
    do {                                                                                   \
        int m_ = snprintf(line + n, sizeof(line) - n, __VA_ARGS__);                        \
        if (m_ > 0 && (size_t)m_ < sizeof(line) - n)                                       \
            n += (size_t)m_;                                                               \
    } while (0)

    ADD("harvestd: summary records=%" PRIu64 " ok=%" PRIu64 " failed=%" PRIu64, s->records,
        s->ok, s->failed);
    for (int t = 1; t < HV_ET__COUNT; t++)
        if (s->by_type[t] > 0)
            ADD(" error_type.%s=%" PRIu64, hv_error_type_name((hv_error_type_t)t), s->by_type[t]);
    ADD(" elapsed_s=%.3f pages_per_s=%.1f", elapsed,
        elapsed > 0 ? (double)s->records / elapsed : 0.0);
    ADD(" hwm_jobs=%u hwm_pages=%u hwm_page_bytes=%" PRIu64 " hwm_results=%u read_pauses=%" PRIu64,
        s->hwm_jobs, s->hwm_pages, s->hwm_page_bytes, s->hwm_results, s->read_pauses);
    ADD(" connections_opened=%" PRIu64 " connections_reused=%" PRIu64 " stale_retries=%" PRIu64
        " redirects=%" PRIu64,
        pl->fstats.connections_opened, pl->fstats.connections_reused, pl->fstats.stale_retries,
        pl->fstats.redirects);
    ADD(" dns_lookups=%" PRIu64 " dns_hits=%" PRIu64, pl->dstats.lookups, pl->dstats.hits);
    if (pl->tls != NULL) {
        const hv_tls_stats_t *t = hv_tls_ctx_stats(pl->tls);
        ADD(" tls_handshakes=%" PRIu64 " tls_resumed=%" PRIu64 " tls_failures=%" PRIu64,
            t->handshakes, t->resumed, t->failures);
    }
#undef ADD
    fprintf(out, "%s\n", line);
}

void hv_pipeline_free(hv_pipeline_t *pl)
{
    free(pl->source_name);
    free(pl);
}
