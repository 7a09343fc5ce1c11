/*
 * batch.c: one input file's way through the engine, and its output.
 *
 * States: RUNNING -> (DRAINING | STOPPING) -> FINISHING -> DONE. DRAINING lets in-flight
 * requests finish; STOPPING abandons them. FINISHING waits for the writer to flush, sync and
 * close; DONE has reported through the done callback.
 */
#include "harvestd/batch.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "harvestd/common.h"
#include "harvestd/log.h"
#include "harvestd/recrawl.h"
#include "harvestd/url.h"
#include "harvestd/writer.h"

typedef enum { B_RUNNING, B_DRAINING, B_STOPPING, B_FINISHING, B_DONE } hv_batch_state_t;

static const char *const state_names[] = {"running", "draining", "stopping", "finishing", "done"};

/* What waits for a written record to be durable: its token (a stream entry's
 * acknowledgement) and what the store is to keep of it (recrawl.h). */
typedef struct token_s {
    uint64_t seq; /* its place among the records pushed to the writer (1-based) */
    int ok;
    char *token;             /* NULL: none */
    hv_recrawl_op_t *store;  /* NULL: none */
    STAILQ_ENTRY(token_s) link;
} token_t;

struct hv_batch_s {
    hv_engine_t *e;
    const hv_config_t *cfg;
    hv_engine_flow_t *flow;
    char *name;
    char *output_path;
    hv_batch_state_t state;
    int interrupted;
    int error;
    char detail[256];
    hv_batch_done_cb done;
    void *ud;

    hv_source_t *source;
    int source_paused;
    int input_done;
    hv_batch_skip_cb skip;
    void *skip_ud;

    TAILQ_HEAD(, hv_record_s) results;
    unsigned nresults;
    hv_writer_t *writer;
    uint64_t pushed;          /* records handed to the writer */
    void (*on_durable)(void *ud, hv_batch_t *b, char *token, int ok);
    STAILQ_HEAD(, token_s) tokens; /* records with a token or a store operation, written,
                                      not yet durable */
    hv_recrawl_t *recrawl;

    hv_batch_stats_t stats;
};

static void set_state(hv_batch_t *b, hv_batch_state_t st)
{
    HV_LOG(HV_LOG_DEBUG, "event=batch_state batch=%s from=%s to=%s", b->name,
           state_names[b->state], state_names[st]);
    b->state = st;
}

static int results_full(const hv_batch_t *b)
{
    return b->nresults >= b->cfg->result_queue;
}

static int may_read_input(const hv_batch_t *b)
{
    /* Jobs waiting out a retry count against the bound too: memory must not grow while a
     * host keeps failing. */
    hv_engine_flow_counts_t c;
    hv_engine_flow_counts(b->flow, &c);
    return b->state == B_RUNNING && c.waiting + c.delayed < b->cfg->queue_size &&
           !results_full(b);
}

/* ---- records ---- */

_Static_assert(HV_ET__COUNT <= HV_TOPHOSTS_TYPES, "every error type must fit the host table");

/* The host a failure belongs to: of the URL it failed at, or of the line when it has none
 * (a page that crashed the parser before); input failures have none. */
static void count_failing_host(hv_batch_stats_t *s, const hv_record_t *rec)
{
    char key[HV_HOST_KEY_MAX];
    int n = -1;
    if (rec->url != NULL) {
        n = hv_health_host_key(key, sizeof(key), rec->url);
    } else {
        hv_url_t u;
        if (hv_url_parse(&u, rec->requested_url, strlen(rec->requested_url), NULL) == 0) {
            n = hv_health_host_key(key, sizeof(key), u.href);
            hv_url_free(&u);
        }
    }
    if (n <= 0)
        return;
    hv_tophosts_add(&s->failing, key, (unsigned)rec->error_type);
    if (rec->error_type != HV_ET_BLOCKED)
        return;
    unsigned i = 0;
    while (i < s->nblocked && strcmp(s->blocked[i].host, key) != 0)
        i++;
    if (i == s->nblocked) {
        if (i == HV_BATCH_BLOCKED_HOSTS)
            return;
        s->nblocked++;
        snprintf(s->blocked[i].host, sizeof(s->blocked[i].host), "%s", key);
    }
    s->blocked[i].records++;
    snprintf(s->blocked[i].sign, sizeof(s->blocked[i].sign), "%s",
             rec->error != NULL ? rec->error : "");
}

static void push_result(hv_batch_t *b, hv_record_t *rec)
{
    hv_batch_stats_t *s = &b->stats;
    hv_engine_count_record(b->e, rec);
    s->records++;
    if (rec->ok) {
        s->ok++;
    } else {
        s->failed++;
        s->by_type[rec->error_type]++;
        count_failing_host(s, rec);
    }
    int64_t ok_bytes = hv_record_ok_body_bytes(rec);
    if (ok_bytes >= 0)
        hv_sizes_add(&s->ok_sizes, (uint64_t)ok_bytes);
    s->requests += rec->requests;
    if (rec->http_status >= 100 && rec->http_status < 600)
        s->by_status[rec->http_status]++;
    if (rec->bytes >= 0) {
        s->body_bytes += (uint64_t)rec->bytes;
        s->with_bytes++;
    }
    s->not_modified += rec->not_modified != 0;
    s->unchanged += rec->unchanged != 0;
    s->from_cache += rec->from_cache != 0;
    TAILQ_INSERT_TAIL(&b->results, rec, link);
    b->nresults++;
    if (b->nresults > s->hwm_results)
        s->hwm_results = b->nresults;
}

/* The ok records an earlier run wrote are the final records of the lines this run skips: the
 * figures count them as push_result() counted them then (but for their requests, which a
 * record does not carry), and the engine's totals do not (this process did not make them). */
static void count_kept(hv_batch_stats_t *s, const hv_kept_t *k)
{
    s->recovered = k->records;
    s->records += k->records;
    s->ok += k->records;
    for (int code = 100; code < 600; code++)
        s->by_status[code] += k->by_status[code];
    s->body_bytes += k->body_bytes;
    s->with_bytes += k->with_bytes;
    s->not_modified += k->not_modified;
    s->unchanged += k->unchanged;
    s->from_cache += k->from_cache;
    hv_sizes_merge(&s->ok_sizes, &k->ok_sizes);
}

static void drop_results(hv_batch_t *b)
{
    hv_record_t *rec;
    while ((rec = TAILQ_FIRST(&b->results)) != NULL) {
        TAILQ_REMOVE(&b->results, rec, link);
        b->nresults--;
        hv_record_free(rec);
    }
}

/* ---- the source ---- */

static int pause_input(hv_batch_t *b)
{
    if (may_read_input(b))
        return 0;
    b->source_paused = 1;
    return 1;
}

static int on_line(void *ud, const char *line, size_t len, uint64_t lineno, int overlong,
                   const hv_line_meta_t *meta)
{
    hv_batch_t *b = ud;
    hv_detail_t reason = HV_D_MALFORMED;
    hv_url_t url;
    int rc;

    int verdict = b->skip != NULL && !overlong ? b->skip(b->skip_ud, line, len) : HV_BATCH_FETCH;
    if (verdict == HV_BATCH_SKIP) {
        b->stats.skipped++;
        return pause_input(b);
    }
    b->stats.lines++;
    hv_record_t *rec = hv_record_new(line, len);
    if (meta != NULL) {
        rec->token = meta->token != NULL ? hv_xstrdup(meta->token) : NULL;
        if (meta->batch != NULL) {
            rec->batch = hv_xstrdup(meta->batch);
            rec->line = lineno;
        }
        if (meta->reject != HV_D_NONE) {
            hv_error_type_t t = meta->poisoned ? HV_ET_POISONED : HV_ET_INVALID_ENTRY;
            hv_record_fail(rec, HV_STAGE_INPUT, t, meta->reject, NULL);
            HV_LOG(HV_LOG_INFO, "event=invalid_input batch=%s line=%" PRIu64
                   " error_type=%s error=%s", b->name, lineno, hv_error_type_name(t),
                   rec->error);
            push_result(b, rec);
            hv_engine_wake(b->e);
            return pause_input(b);
        }
    }
    if (verdict == HV_BATCH_CRASHED) {
        hv_record_fail(rec, HV_STAGE_PARSE, HV_ET_PARSER_CRASHED, HV_D_PARSER_CRASHED, NULL);
        HV_LOG(HV_LOG_WARNING, "event=parser_crashed_before batch=%s line=%" PRIu64, b->name,
               lineno);
        push_result(b, rec);
        hv_engine_wake(b->e);
        return pause_input(b);
    }
    if (overlong) {
        rc = HV_EURL;
        reason = HV_D_LINE_EXCEEDS_8_KIB;
    } else {
        rc = hv_url_parse_detail(&url, line, len, &reason);
    }
    if (rc != 0) {
        hv_error_type_t t = rc == HV_ESCHEME ? HV_ET_UNSUPPORTED_SCHEME : HV_ET_INVALID_URL;
        hv_record_fail(rec, HV_STAGE_INPUT, t, reason, NULL);
        HV_LOG(HV_LOG_INFO, "event=invalid_input batch=%s line=%" PRIu64 " error_type=%s error=%s",
               b->name, lineno, hv_error_type_name(t), rec->error);
        push_result(b, rec);
        hv_engine_wake(b->e);
    } else if ((rec = hv_engine_submit(b->flow, rec, &url)) != NULL) {
        /* Answered from the store (recrawl_min_age): no request. */
        push_result(b, rec);
        hv_engine_wake(b->e);
    } else {
        hv_engine_flow_counts_t c;
        hv_engine_flow_counts(b->flow, &c);
        b->stats.hwm_jobs = HV_MAX(b->stats.hwm_jobs, c.waiting);
    }
    return pause_input(b);
}

static void stop(hv_batch_t *b, int force);

static void fail_batch(hv_batch_t *b, int err, const char *what)
{
    if (b->error != 0)
        return;
    b->error = err;
    snprintf(b->detail, sizeof(b->detail), "%s", what);
    HV_LOG(HV_LOG_ERROR, "event=batch_failed batch=%s what=\"%s\" err=%s (%s)", b->name, what,
           hv_err_name(err), hv_strerror(err));
    stop(b, 1);
}

static void on_input_end(void *ud, int status)
{
    hv_batch_t *b = ud;
    if (status != 0) {
        char what[512];
        snprintf(what, sizeof(what), "reading the input of %s", b->name);
        fail_batch(b, status, what);
        return;
    }
    b->input_done = 1;
    HV_LOG(HV_LOG_INFO, "event=input_done batch=%s lines=%" PRIu64 " skipped=%" PRIu64, b->name,
           b->stats.lines, b->stats.skipped);
    hv_engine_wake(b->e);
}

static const hv_sink_t sink = {on_line, on_input_end};

static void close_source(hv_batch_t *b)
{
    if (b->source != NULL) {
        hv_source_close(b->source);
        b->source = NULL;
    }
}

/* ---- writer ---- */

static void on_writer_drain(void *ud)
{
    hv_batch_t *b = ud;
    hv_engine_wake(b->e);
}

static void on_writer_error(void *ud, int err)
{
    hv_batch_t *b = ud;
    char what[512];
    snprintf(what, sizeof(what), "writing %s", b->output_path);
    fail_batch(b, err, what);
}

static void on_writer_durable(void *ud, uint64_t records)
{
    hv_batch_t *b = ud;
    token_t *t;
    while ((t = STAILQ_FIRST(&b->tokens)) != NULL && t->seq <= records) {
        STAILQ_REMOVE_HEAD(&b->tokens, link);
        /* The store first: an acknowledged entry's record may be fetched again at once, by
         * anyone, and should find what this one stored. */
        if (t->store != NULL)
            hv_recrawl_commit(b->recrawl, t->store);
        if (t->token != NULL)
            b->on_durable(b->ud, b, t->token, t->ok);
        free(t);
    }
}

static void free_tokens(hv_batch_t *b)
{
    token_t *t;
    while ((t = STAILQ_FIRST(&b->tokens)) != NULL) {
        STAILQ_REMOVE_HEAD(&b->tokens, link);
        free(t->token);
        hv_recrawl_op_free(t->store);
        free(t);
    }
}

static const hv_writer_cbs_t writer_cbs = {on_writer_drain, on_writer_error, on_writer_durable};

/* Hand `rec` to the writer, keeping its token (if it has one) until it is durable. */
static void write_record(hv_batch_t *b, hv_record_t *rec)
{
    b->pushed++;
    hv_recrawl_op_t *op = b->recrawl != NULL ? hv_recrawl_op_new(b->recrawl, rec) : NULL;
    int has_token = rec->token != NULL && b->on_durable != NULL;
    if (has_token || op != NULL) {
        token_t *t = hv_xmalloc(sizeof(*t));
        t->seq = b->pushed;
        t->ok = rec->ok;
        t->token = has_token ? rec->token : NULL;
        if (has_token)
            rec->token = NULL;
        t->store = op;
        STAILQ_INSERT_TAIL(&b->tokens, t, link);
    }
    hv_writer_push(b->writer, rec);
}

static void on_writer_done(void *ud, int status)
{
    hv_batch_t *b = ud;
    b->writer = NULL;
    if (status != 0 && b->error == 0) {
        b->error = status;
        snprintf(b->detail, sizeof(b->detail), "finishing %s", b->output_path);
    }
    set_state(b, B_DONE);
    hv_engine_flow_free(b->flow);
    b->flow = NULL;
    int final = b->error != 0 ? b->error : b->interrupted ? HV_ECANCELLED : 0;
    /* Last: the callee may free the batch and close the engine. */
    b->done(b->ud, b, final, b->detail);
}

/* ---- the engine's calls ---- */

static int flow_may_start(void *ud)
{
    hv_batch_t *b = ud;
    return b->state == B_RUNNING && !results_full(b);
}

static int flow_accepts(void *ud)
{
    hv_batch_t *b = ud;
    return !results_full(b) || b->error != 0;
}

static void flow_record(void *ud, hv_record_t *rec)
{
    hv_batch_t *b = ud;
    if (b->error != 0)
        hv_record_free(rec);
    else
        push_result(b, rec);
}

static void stop(hv_batch_t *b, int force)
{
    if (b->state >= B_FINISHING)
        return;
    if (b->error == 0)
        b->interrupted = 1;
    close_source(b);
    hv_engine_flow_drop(b->flow, 0);
    hv_engine_flow_counts_t c;
    hv_engine_flow_counts(b->flow, &c);
    if (!force && b->state == B_RUNNING) {
        set_state(b, B_DRAINING);
        HV_LOG(HV_LOG_NOTICE, "event=drain_start batch=%s in_flight=%u", b->name, c.inflight);
        return;
    }
    if (b->state == B_STOPPING)
        return;
    set_state(b, B_STOPPING);
    HV_LOG(HV_LOG_NOTICE, "event=stop_now batch=%s in_flight=%u", b->name, c.inflight);
    hv_engine_flow_drop(b->flow, 1);
    if (b->error != 0)
        drop_results(b);
}

static void flow_stop(void *ud, int force)
{
    stop(ud, force);
}

static void check_done(hv_batch_t *b)
{
    hv_engine_flow_counts_t c;
    if (b->state == B_RUNNING && !b->input_done)
        return;
    hv_engine_flow_counts(b->flow, &c);
    if (b->state != B_RUNNING) {
        if (c.inflight > 0)
            return; /* requests still in flight */
        /* Redirects that came back while stopping can no longer run. */
        hv_engine_flow_drop(b->flow, 0);
        hv_engine_flow_counts(b->flow, &c);
    }
    if (c.waiting + c.delayed + c.inflight + c.pages > 0 || b->nresults > 0)
        return;
    set_state(b, B_FINISHING);
    close_source(b);
    hv_writer_finish(b->writer, on_writer_done);
}

static void flow_pass(void *ud)
{
    hv_batch_t *b = ud;
    if (b->state >= B_FINISHING)
        return;
    if (b->error != 0)
        drop_results(b);
    hv_record_t *rec;
    while ((rec = TAILQ_FIRST(&b->results)) != NULL && !hv_writer_full(b->writer)) {
        TAILQ_REMOVE(&b->results, rec, link);
        b->nresults--;
        write_record(b, rec);
    }
    if (b->source != NULL && b->source_paused && may_read_input(b)) {
        b->source_paused = 0;
        hv_source_resume(b->source);
    }
    check_done(b);
}

static const hv_engine_flow_cbs_t flow_cbs = {flow_may_start, flow_accepts, flow_record,
                                              flow_pass, flow_stop};

/* ---- lifecycle ---- */

int hv_batch_new(hv_engine_t *e, const hv_batch_opts_t *opts, hv_source_t *src,
                 hv_batch_done_cb done, void *ud, hv_batch_t **out)
{
    const hv_config_t *cfg = hv_engine_config(e);
    hv_batch_t *b = hv_xcalloc(1, sizeof(*b));
    hv_writer_opts_t wopts = {
        .append = opts->output_append,
        .flush_ms = cfg->flush_ms,
        .fsync_always = opts->fsync == HV_FSYNC_ALWAYS,
        .fsync_interval_ms = opts->fsync == HV_FSYNC_INTERVAL ? opts->fsync_interval_ms : 0,
    };
    int rc = hv_writer_open(hv_engine_loop(e), opts->output_path, &wopts, &writer_cbs, b,
                            &b->writer);
    if (rc != 0) {
        free(b);
        *out = NULL;
        return rc;
    }
    b->e = e;
    b->cfg = cfg;
    b->name = hv_xstrdup(opts->name);
    b->output_path = hv_xstrdup(opts->output_path);
    b->done = done;
    b->ud = ud;
    b->skip = opts->skip;
    b->skip_ud = opts->skip_ud;
    b->on_durable = opts->on_durable;
    b->recrawl = hv_engine_recrawl(e);
    STAILQ_INIT(&b->tokens);
    TAILQ_INIT(&b->results);
    b->flow = hv_engine_flow_new(e, &flow_cbs, b, opts->rules, opts->crash_note);
    b->stats.started_ms = uv_now(hv_engine_loop(e));
    b->stats.started_unix_ms = hv_now_unix_ms();
    if (opts->kept != NULL)
        count_kept(&b->stats, opts->kept);
    b->source = src;
    *out = b;
    hv_source_start(src, &sink, b);
    return 0;
}

const hv_batch_stats_t *hv_batch_stats(const hv_batch_t *b)
{
    return &b->stats;
}

int hv_batch_input_done(const hv_batch_t *b)
{
    return b->input_done;
}

void hv_batch_progress(const hv_batch_t *b, uint64_t now_ms, hv_batch_progress_t *out)
{
    const hv_batch_stats_t *s = &b->stats;
    uint64_t run = s->records - s->recovered;
    double elapsed = now_ms > s->started_ms ? (double)(now_ms - s->started_ms) / 1000.0 : 0.0;
    memset(out, 0, sizeof(*out));
    out->lines_read = s->lines + s->skipped;
    out->done = run + s->skipped;
    out->ok = s->ok;
    out->failed = s->failed;
    out->pages_per_s = elapsed > 0 ? (double)run / elapsed : 0.0;
    out->eta_s = -1;
    if (b->input_done) {
        out->lines_total = out->lines_read;
        out->total_exact = 1;
    } else if (b->source != NULL) {
        /* Lines are about as long all through a URL list: the lines read so far, scaled by
         * the share of the bytes they span. */
        uint64_t consumed, size;
        hv_source_position(b->source, &consumed, &size);
        if (consumed > 0 && size >= consumed && out->lines_read > 0)
            out->lines_total = (uint64_t)((double)out->lines_read * (double)size /
                                          (double)consumed + 0.5);
        out->lines_total = out->lines_total > 0 ? HV_MAX(out->lines_total, out->lines_read) : 0;
    }
    if (out->lines_total > 0 && out->pages_per_s > 0)
        out->eta_s = (double)(out->lines_total - HV_MIN(out->done, out->lines_total)) /
                     out->pages_per_s;
}

void hv_batch_format_eta(char *out, size_t cap, double seconds)
{
    if (seconds < 0 || seconds > 99 * 3600)
        snprintf(out, cap, "--:--");
    else if (seconds >= 3600)
        snprintf(out, cap, "%dh%02dm", (int)seconds / 3600, ((int)seconds / 60) % 60);
    else
        snprintf(out, cap, "%dm%02ds", (int)seconds / 60, (int)seconds % 60);
}

void hv_batch_format_stats(const hv_batch_t *b, uint64_t now_ms, char *out, size_t cap)
{
    const hv_batch_stats_t *s = &b->stats;
    double elapsed = (double)(now_ms - s->started_ms) / 1000.0;
    size_t n = 0;

/* A field that does not fit is left out whole. */
#define ADD(...)                                                                           \
    do {                                                                                   \
        int m_ = snprintf(out + n, cap - n, __VA_ARGS__);                                  \
        if (m_ > 0 && (size_t)m_ < cap - n)                                                \
            n += (size_t)m_;                                                               \
        else                                                                               \
            out[n] = '\0';                                                                 \
    } while (0)

    if (cap == 0)
        return;
    out[0] = '\0';
    ADD("records=%" PRIu64 " ok=%" PRIu64 " failed=%" PRIu64, s->records, s->ok, s->failed);
    for (int t = 1; t < HV_ET__COUNT; t++)
        if (s->by_type[t] > 0)
            ADD(" error_type.%s=%" PRIu64, hv_error_type_name((hv_error_type_t)t), s->by_type[t]);
    if (s->skipped > 0)
        ADD(" resumed=%" PRIu64, s->skipped);
    if (b->recrawl != NULL)
        ADD(" not_modified=%" PRIu64 " unchanged=%" PRIu64 " from_cache=%" PRIu64,
            s->not_modified, s->unchanged, s->from_cache);
    if (s->records > 0)
        ADD(" ok_ratio=%.3f", (double)s->ok / (double)s->records);
    char codes[256];
    hv_batch_format_statuses(s, codes, sizeof(codes));
    if (codes[0] != '\0')
        ADD(" http_statuses=%s", codes);
    if (s->ok_sizes.count > 0)
        ADD(" ok_body_bytes_mean=%" PRIu64 " ok_body_bytes_median=%.0f",
            s->ok_sizes.sum / s->ok_sizes.count, hv_sizes_median(&s->ok_sizes));
    ADD(" requests=%" PRIu64 " requests_per_s=%.1f", s->requests,
        elapsed > 0 ? (double)s->requests / elapsed : 0.0);
    ADD(" elapsed_s=%.3f pages_per_s=%.1f hwm_jobs=%u hwm_results=%u", elapsed,
        elapsed > 0 ? (double)(s->records - s->recovered) / elapsed : 0.0, s->hwm_jobs,
        s->hwm_results);
    const hv_tophost_t *top[HV_BATCH_TOP_HOSTS];
    unsigned ntop = hv_tophosts_top(&s->failing, top, HV_BATCH_TOP_HOSTS);
    if (ntop > 0) {
        ADD(" top_failing_hosts=");
        for (unsigned i = 0; i < ntop; i++)
            ADD("%s%s(%" PRIu64 ",%s)", i > 0 ? ";" : "", top[i]->host, top[i]->failed,
                hv_error_type_name((hv_error_type_t)hv_tophost_type(top[i])));
    }
    if (s->nblocked > 0) {
        ADD(" blocked_hosts=");
        for (unsigned i = 0; i < s->nblocked; i++)
            ADD("%s%s(%" PRIu64 ",%s)", i > 0 ? ";" : "", s->blocked[i].host,
                s->blocked[i].records, s->blocked[i].sign);
    }
#undef ADD
}

void hv_batch_format_statuses(const hv_batch_stats_t *s, char *out, size_t cap)
{
    size_t n = 0;
    if (cap == 0)
        return;
    out[0] = '\0';
    for (int code = 100; code < 600; code++) {
        if (s->by_status[code] == 0)
            continue;
        /* Room is kept for the mark that says codes were left out. */
        int m = snprintf(out + n, cap - n, "%s%d:%" PRIu64, n > 0 ? "," : "", code,
                         s->by_status[code]);
        if (m < 0 || (size_t)m >= cap - n || cap - n - (size_t)m < 5) {
            snprintf(out + n, cap - n, "%s", n > 0 ? ",..." : "...");
            return;
        }
        n += (size_t)m;
    }
}

uint64_t hv_batch_unsynced(const hv_batch_t *b)
{
    return b->writer != NULL ? hv_writer_unsynced(b->writer) : 0;
}

void hv_batch_sync_soon(hv_batch_t *b)
{
    if (b->writer != NULL && b->state < B_FINISHING)
        hv_writer_sync_soon(b->writer);
}

void hv_batch_set_eager(hv_batch_t *b, int on)
{
    if (b->writer != NULL && b->state < B_FINISHING)
        hv_writer_set_eager(b->writer, on);
}

void hv_batch_free(hv_batch_t *b)
{
    assert(b->state == B_DONE);
    free_tokens(b);
    hv_tophosts_clear(&b->stats.failing);
    free(b->name);
    free(b->output_path);
    free(b);
}
