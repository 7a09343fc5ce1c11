/*
 * bhost.c: the batch host (see bhost.h).
 *
 * A hosted batch owns one uv_work_t, used once for preparing and once for completing: the
 * two never overlap (the batch runs between them). While a work item runs, the loop touches
 * nothing of the hosted batch but its list link; the worker reports through the item's
 * status, step and detail, and what it learnt (the sets, the noted lines, the repair's
 * figures), which the loop reads in after_work. Workers never log.
 */
#include "harvestd/bhost.h"

#include <assert.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "harvestd/buf.h"
#include "harvestd/common.h"
#include "harvestd/log.h"
#include "harvestd/record.h"
#include "harvestd/utf8.h"

/* The crash note's lines kept for the log (a note holds a few lines; more are not told). */
#define NOTED_MAX (64 * 1024)
/* Their longest URL logged. */
#define NOTED_URL_LOG_MAX 2048

typedef enum { H_PREPARING, H_RUNNING, H_COMPLETING } hstate_t;

struct hv_hosted_s {
    hv_bhost_t *host;
    TAILQ_ENTRY(hv_hosted_s) link;
    hstate_t state;
    hv_bhost_output_t output;
    char *name;
    char *output_path;
    char *crash_note;
    char *summary_path;
    char *input_path;
    char *done_dir;
    const hv_ruleset_t *rules;
    hv_hosted_cbs_t cbs;
    void *ud;
    hv_source_t *src;       /* until the batch takes it */
    hv_batch_t *batch;      /* RUNNING, and during on_end */
    uv_work_t work;

    /* Written by the worker, read by the loop after it. */
    int status;
    hv_bhost_step_t step;
    char detail[1200];
    hv_okset_t *okset;      /* RESUME: input lines with an ok record */
    hv_okset_t *crashed;    /* input lines whose page took the parser down */
    hv_buf_t noted;         /* the crash note's lines, for the log */
    int append;
    hv_hosted_prep_t prep;
    char *summary;          /* COMPLETING: the summary's text; NULL: none */
    int move_err;           /* step 4 failed (logged; the batch is complete all the same) */
};

struct hv_bhost_s {
    hv_engine_t *engine;
    uv_loop_t *loop;
    const hv_config_t *cfg;
    TAILQ_HEAD(, hv_hosted_s) hosted;
    unsigned count;         /* hosted batches and repairs in flight */
    int stopping;
    void (*hook)(const char *step, const char *path);
};

static void step(const hv_hosted_t *hb, const char *name, const char *path)
{
    if (hb->host->hook != NULL)
        hb->host->hook(name, path);
}

/* ---- preparing (worker) ---- */

/* SHARED: the output exists, and so does its name in the directory, before any record
 * written to it is acknowledged: created and synced when missing. */
static int create_synced(hv_hosted_t *hb)
{
    int fd = open(hb->output_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST)
        return 0;
    int rc = fd < 0 ? uv_translate_sys_error(errno) : 0;
    if (rc == 0) {
        if (fsync(fd) != 0)
            rc = uv_translate_sys_error(errno);
        close(fd);
    }
    if (rc == 0)
        rc = hv_fsync_parent(hb->output_path);
    if (rc != 0)
        hv_errf(hb->detail, sizeof(hb->detail), rc, "creating %s: %s", hb->output_path,
                uv_strerror(rc));
    return rc;
}

static void read_note(hv_hosted_t *hb)
{
    if (hb->crash_note == NULL)
        return;
    step(hb, "read_note", hb->crash_note);
    hv_crash_note_read(hb->crash_note, hb->crashed, &hb->noted);
}

static void prepare_work(uv_work_t *w)
{
    hv_hosted_t *hb = hv_container_of(w, hv_hosted_t, work);
    struct stat st;
    switch (hb->output) {
    case HV_BHOST_NEW:
        if (hb->crash_note != NULL) {
            step(hb, "unlink_stale_note", hb->crash_note);
            (void)unlink(hb->crash_note); /* a stale one cannot be this batch's */
        }
        break;
    case HV_BHOST_RESUME:
        /* A crash is known from the note, or, once the note is gone, from its ParserCrashed
         * record (interrupted between removing the note and the summary). */
        step(hb, "repair", hb->output_path);
        hb->status = hv_output_repair(hb->output_path, hb->okset, hb->crashed,
                                      &hb->prep.repair, hb->detail, sizeof(hb->detail));
        if (hb->status != 0)
            return;
        hb->prep.resumed = 1;
        read_note(hb);
        /* It appends, unless nothing was written: then it starts afresh. */
        hb->append = lstat(hb->output_path, &st) == 0;
        break;
    case HV_BHOST_SHARED:
        step(hb, "create", hb->output_path);
        hb->status = create_synced(hb);
        if (hb->status != 0)
            return;
        read_note(hb);
        hb->append = 1;
        break;
    case HV_BHOST_DONE:
        break;
    }
}

/* ---- completing (worker) ---- */

/* Step 3: temporary file, fsync, rename, fsync the directory: all or nothing. */
static int write_summary(hv_hosted_t *hb)
{
    const char *slash = strrchr(hb->summary_path, '/');
    int dirlen = slash != NULL ? (int)(slash - hb->summary_path) : 1;
    const char *dir = slash != NULL ? hb->summary_path : ".";
    size_t n = (size_t)dirlen + strlen(hb->name) + 32;
    char *tmp = hv_xmalloc(n);
    snprintf(tmp, n, "%.*s/.%s.summary.tmp", dirlen, dir, hb->name);
    int rc = 0;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        rc = uv_translate_sys_error(errno);
        goto out;
    }
    rc = hv_write_all(fd, hb->summary, strlen(hb->summary));
    if (rc == 0)
        rc = hv_write_all(fd, "\n", 1);
    if (rc == 0 && fsync(fd) != 0)
        rc = uv_translate_sys_error(errno);
    close(fd);
    if (rc == 0 && rename(tmp, hb->summary_path) != 0)
        rc = uv_translate_sys_error(errno);
    if (rc == 0)
        (void)hv_fsync_parent(hb->summary_path);
    else
        unlink(tmp);

out:
    if (rc != 0)
        hv_errf(hb->detail, sizeof(hb->detail), rc, "writing %s: %s", hb->summary_path,
                uv_strerror(rc));
    free(tmp);
    return rc;
}

static void complete_work(uv_work_t *w)
{
    hv_hosted_t *hb = hv_container_of(w, hv_hosted_t, work);
    /* Step 2: no note left (synced) before the summary says the output is complete. */
    if (hb->crash_note != NULL) {
        step(hb, "unlink_note", hb->crash_note);
        if (unlink(hb->crash_note) == 0) {
            (void)hv_fsync_parent(hb->crash_note);
        } else if (errno != ENOENT) {
            int e = errno;
            hb->status = hv_errf(hb->detail, sizeof(hb->detail), uv_translate_sys_error(e),
                                 "removing %s: %s", hb->crash_note, strerror(e));
            return;
        }
    }
    if (hb->summary != NULL) {
        step(hb, "summary", hb->summary_path);
        hb->status = write_summary(hb);
        if (hb->status != 0)
            return;
    }
    if (hb->input_path != NULL) {
        step(hb, "move", hb->input_path);
        hb->move_err = hv_rename_unique(hb->input_path, hb->done_dir, hb->name, NULL);
        if (hb->move_err == 0)
            (void)hv_fsync_dir(hb->done_dir);
    }
}

/* ---- the loop's side ---- */

static void hosted_free(hv_hosted_t *hb)
{
    if (hb->batch != NULL)
        hv_batch_free(hb->batch);
    hv_okset_free(hb->okset);
    hv_okset_free(hb->crashed);
    hv_buf_free(&hb->noted);
    free(hb->summary);
    free(hb->name);
    free(hb->output_path);
    free(hb->crash_note);
    free(hb->summary_path);
    free(hb->input_path);
    free(hb->done_dir);
    free(hb);
}

/* The end, told once: the host forgets the batch first (the callee may start another, or
 * free the host once none is left), the memory goes after the call. */
static void end(hv_hosted_t *hb, int status, hv_bhost_step_t at)
{
    hv_bhost_t *h = hb->host;
    if (hb->src != NULL) {
        hv_source_close(hb->src);
        hb->src = NULL;
    }
    TAILQ_REMOVE(&h->hosted, hb, link);
    h->count--;
    hv_hosted_end_t e = {
        .status = status,
        .step = at,
        .detail = status != 0 && status != HV_ECANCELLED ? hb->detail : "",
        .batch = hb->batch,
    };
    hb->cbs.on_end(hb->ud, hb, &e);
    hosted_free(hb);
}

static void add_uint(cJSON *obj, const char *key, uint64_t v)
{
    char digits[32];
    snprintf(digits, sizeof(digits), "%" PRIu64, v);
    cJSON_AddItemToObject(obj, key, cJSON_CreateRaw(digits));
}

/* A number with `places` decimals, as printed (cJSON would print 0.95 for 0.950). */
static void add_fixed(cJSON *obj, const char *key, int places, double v)
{
    char digits[64];
    snprintf(digits, sizeof(digits), "%.*f", places, v);
    cJSON_AddItemToObject(obj, key, cJSON_CreateRaw(digits));
}

/* The summary of the batch that just ended, as the completion writes it. */
static char *summary_text(const hv_hosted_t *hb, int64_t finished_ms)
{
    const hv_batch_stats_t *s = hv_batch_stats(hb->batch);
    char ts[32], digits[64];
    cJSON *root = cJSON_CreateObject();
    size_t name_len;
    char *name = hv_utf8_sanitize(hb->name, strlen(hb->name), &name_len);
    cJSON_AddStringToObject(root, "batch", name);
    free(name);
    /* The figures cover the whole output, the records kept from an earlier run too
     * (batch.h); the times, requests and rates are this run's. */
    add_uint(root, "records", s->records);
    add_uint(root, "ok", s->ok);
    add_uint(root, "failed", s->failed);
    add_uint(root, "resumed", s->skipped);
    /* Null for a batch without lines. */
    if (s->records > 0)
        add_fixed(root, "ok_ratio", 3, (double)s->ok / (double)s->records);
    else
        cJSON_AddNullToObject(root, "ok_ratio");
    cJSON *types = cJSON_AddObjectToObject(root, "error_types");
    for (int t = 1; t < HV_ET__COUNT; t++)
        if (s->by_type[t] > 0)
            add_uint(types, hv_error_type_name((hv_error_type_t)t), s->by_type[t]);
    cJSON *statuses = cJSON_AddObjectToObject(root, "http_statuses");
    for (int code = 100; code < 600; code++) {
        if (s->by_status[code] > 0) {
            snprintf(digits, sizeof(digits), "%d", code);
            add_uint(statuses, digits, s->by_status[code]);
        }
    }
    add_uint(root, "body_bytes_total", s->body_bytes);
    add_uint(root, "body_bytes_mean", s->with_bytes ? s->body_bytes / s->with_bytes : 0);
    /* The ok pages downloaded; null when there are none. */
    if (s->ok_sizes.count > 0) {
        add_uint(root, "ok_body_bytes_mean", s->ok_sizes.sum / s->ok_sizes.count);
        add_fixed(root, "ok_body_bytes_median", 0, hv_sizes_median(&s->ok_sizes));
    } else {
        cJSON_AddNullToObject(root, "ok_body_bytes_mean");
        cJSON_AddNullToObject(root, "ok_body_bytes_median");
    }
    if (hv_engine_recrawl(hb->host->engine) != NULL) {
        cJSON *re = cJSON_AddObjectToObject(root, "recrawl");
        add_uint(re, "not_modified", s->not_modified);
        add_uint(re, "unchanged", s->unchanged);
        add_uint(re, "from_cache", s->from_cache);
    }
    hv_format_rfc3339_ms(ts, s->started_unix_ms);
    cJSON_AddStringToObject(root, "started_at", ts);
    hv_format_rfc3339_ms(ts, finished_ms);
    cJSON_AddStringToObject(root, "finished_at", ts);
    double elapsed = (double)(finished_ms - s->started_unix_ms) / 1000.0;
    add_fixed(root, "elapsed_s", 3, elapsed);
    add_fixed(root, "pages_per_s", 1,
              elapsed > 0 ? (double)(s->records - s->recovered) / elapsed : 0.0);
    add_uint(root, "requests", s->requests);
    add_fixed(root, "requests_per_s", 1, elapsed > 0 ? (double)s->requests / elapsed : 0.0);
    cJSON *hosts = cJSON_AddArrayToObject(root, "top_failing_hosts");
    const hv_tophost_t *top[HV_BATCH_TOP_HOSTS];
    unsigned ntop = hv_tophosts_top(&s->failing, top, HV_BATCH_TOP_HOSTS);
    for (unsigned i = 0; i < ntop; i++) {
        cJSON *h = cJSON_CreateObject();
        cJSON_AddStringToObject(h, "host", top[i]->host);
        add_uint(h, "failed", top[i]->failed);
        cJSON_AddStringToObject(h, "error_type",
                                hv_error_type_name((hv_error_type_t)hv_tophost_type(top[i])));
        cJSON_AddItemToArray(hosts, h);
    }
    cJSON *blocked = cJSON_AddArrayToObject(root, "blocked_hosts");
    for (unsigned i = 0; i < s->nblocked; i++) {
        cJSON *h = cJSON_CreateObject();
        cJSON_AddStringToObject(h, "host", s->blocked[i].host);
        add_uint(h, "records", s->blocked[i].records);
        cJSON_AddStringToObject(h, "sign", s->blocked[i].sign);
        cJSON_AddItemToArray(blocked, h);
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    return text;
}

static void on_completed(uv_work_t *w, int status)
{
    hv_hosted_t *hb = hv_container_of(w, hv_hosted_t, work);
    (void)status; /* never cancelled: completions are not abandoned */
    if (hb->move_err != 0)
        HV_LOG(HV_LOG_WARNING, "event=move_to_done_failed batch=\"%s\" err=%s", hb->name,
               uv_err_name(hb->move_err));
    end(hb, hb->status, HV_BHOST_STEP_COMPLETE);
}

static void start_completion(hv_hosted_t *hb)
{
    hb->state = H_COMPLETING;
    if (hb->summary_path != NULL && hb->batch != NULL)
        hb->summary = summary_text(hb, hv_now_unix_ms());
    uv_queue_work(hb->host->loop, &hb->work, complete_work, on_completed);
}

static void on_batch_durable(void *ud, hv_batch_t *b, char *token, int ok)
{
    hv_hosted_t *hb = ud;
    (void)b;
    if (hb->cbs.on_durable != NULL)
        hb->cbs.on_durable(hb->ud, hb, token, ok);
    else
        free(token);
}

static void on_batch_done(void *ud, hv_batch_t *b, int status, const char *detail)
{
    hv_hosted_t *hb = ud;
    (void)b;
    if (status != 0) {
        snprintf(hb->detail, sizeof(hb->detail), "%s", detail);
        end(hb, status, HV_BHOST_STEP_BATCH);
        return;
    }
    start_completion(hb);
}

/* A page that took the parser down (and the daemon with it) is not fetched into the same
 * crash again: it gets its ParserCrashed record (parse.h). A resumed line with an ok record
 * is skipped. */
static int skip_line(void *ud, const char *line, size_t len)
{
    hv_hosted_t *hb = ud;
    if (hb->okset != NULL && hv_okset_take(hb->okset, line, len))
        return HV_BATCH_SKIP;
    if (hb->crashed != NULL && hv_okset_take(hb->crashed, line, len)) {
        hv_okset_add(hb->crashed, line, len); /* every occurrence of the line */
        return HV_BATCH_CRASHED;
    }
    return HV_BATCH_FETCH;
}

static void log_noted(const hv_hosted_t *hb)
{
    const char *p = hb->noted.data, *end_ = p + hb->noted.len;
    while (p < end_) {
        const char *nl = memchr(p, '\n', (size_t)(end_ - p));
        size_t len = nl != NULL ? (size_t)(nl - p) : (size_t)(end_ - p);
        HV_LOG(HV_LOG_WARNING, "event=parser_crash_noted batch=\"%s\" url=%.*s", hb->name,
               (int)HV_MIN(len, NOTED_URL_LOG_MAX), p);
        p += len + 1;
    }
}

static void on_prepared(uv_work_t *w, int status)
{
    hv_hosted_t *hb = hv_container_of(w, hv_hosted_t, work);
    hv_bhost_t *h = hb->host;
    log_noted(hb);
    if (hb->status != 0) {
        end(hb, hb->status, HV_BHOST_STEP_PREPARE);
        return;
    }
    if (status == UV_ECANCELED || h->stopping) {
        end(hb, HV_ECANCELLED, HV_BHOST_STEP_PREPARE);
        return;
    }
    if (hb->output == HV_BHOST_DONE) {
        start_completion(hb);
        return;
    }
    hv_batch_opts_t opts = {
        .name = hb->name,
        .output_path = hb->output_path,
        .output_append = hb->append,
        .fsync = h->cfg->fsync,
        .fsync_interval_ms = h->cfg->fsync_interval_ms,
        .skip = hb->okset != NULL || hb->crashed != NULL ? skip_line : NULL,
        .skip_ud = hb,
        .rules = hb->rules,
        .crash_note = hb->crash_note,
        .on_durable = on_batch_durable,
        .kept = hb->prep.resumed ? &hb->prep.repair.kept : NULL,
    };
    int rc = hv_batch_new(h->engine, &opts, hb->src, on_batch_done, hb, &hb->batch);
    if (rc != 0) {
        hv_errf(hb->detail, sizeof(hb->detail), rc, "opening %s: %s", hb->output_path,
                uv_strerror(rc));
        end(hb, rc, HV_BHOST_STEP_OPEN);
        return;
    }
    hb->src = NULL; /* the batch's now */
    hb->state = H_RUNNING;
    if (hb->cbs.on_start != NULL)
        hb->cbs.on_start(hb->ud, hb, &hb->prep);
}

static char *dup_or_null(const char *s)
{
    return s != NULL ? hv_xstrdup(s) : NULL;
}

hv_hosted_t *hv_bhost_start(hv_bhost_t *h, const hv_hosted_opts_t *opts, hv_source_t *src,
                            const hv_hosted_cbs_t *cbs, void *ud)
{
    hv_hosted_t *hb = hv_xcalloc(1, sizeof(*hb));
    hb->host = h;
    hb->state = H_PREPARING;
    hb->output = opts->output;
    hb->name = hv_xstrdup(opts->name);
    hb->output_path = hv_xstrdup(opts->output_path);
    hb->crash_note = dup_or_null(opts->crash_note);
    hb->summary_path = dup_or_null(opts->summary_path);
    if (opts->input_path != NULL && opts->done_dir != NULL) {
        hb->input_path = hv_xstrdup(opts->input_path);
        hb->done_dir = hv_xstrdup(opts->done_dir);
    }
    hb->rules = opts->rules;
    hb->cbs = *cbs;
    hb->ud = ud;
    hb->src = src;
    hv_buf_init(&hb->noted, NOTED_MAX);
    if (opts->output == HV_BHOST_RESUME)
        hb->okset = hv_okset_new();
    if (opts->output == HV_BHOST_RESUME || opts->output == HV_BHOST_SHARED)
        hb->crashed = hv_okset_new();
    TAILQ_INSERT_TAIL(&h->hosted, hb, link);
    h->count++;
    uv_queue_work(h->loop, &hb->work, prepare_work, on_prepared);
    return hb;
}

hv_batch_t *hv_hosted_batch(const hv_hosted_t *hb)
{
    return hb->state == H_RUNNING ? hb->batch : NULL;
}

/* ---- progress ---- */

unsigned hv_bhost_progress(const hv_bhost_t *h, hv_hosted_progress_t *out, unsigned max)
{
    uint64_t now = uv_now(h->loop);
    unsigned n = 0;
    const hv_hosted_t *hb;
    TAILQ_FOREACH(hb, &h->hosted, link)
    {
        if (hb->state != H_RUNNING)
            continue;
        if (n < max) {
            out[n].name = hb->name;
            hv_batch_progress(hb->batch, now, &out[n].p);
        }
        n++;
    }
    return n;
}

void hv_bhost_log_progress(const hv_bhost_t *h)
{
    uint64_t now = uv_now(h->loop);
    const hv_hosted_t *hb;
    TAILQ_FOREACH(hb, &h->hosted, link)
    {
        if (hb->state != H_RUNNING)
            continue;
        hv_batch_progress_t p;
        char total[64] = "", eta[32] = "";
        hv_batch_progress(hb->batch, now, &p);
        if (p.lines_total > 0)
            snprintf(total, sizeof(total), " %s=%" PRIu64 " percent=%.1f",
                     p.total_exact ? "lines_total" : "lines_estimate", p.lines_total,
                     100.0 * (double)HV_MIN(p.done, p.lines_total) / (double)p.lines_total);
        if (p.eta_s >= 0)
            snprintf(eta, sizeof(eta), " eta_s=%.0f", p.eta_s);
        HV_LOG(HV_LOG_NOTICE,
               "event=batch_progress batch=\"%s\" lines_read=%" PRIu64 " done=%" PRIu64
               "%s records=%" PRIu64 " ok=%" PRIu64 " failed=%" PRIu64 " resumed=%" PRIu64
               " pages_per_s=%.1f%s",
               hb->name, p.lines_read, p.done, total, p.ok + p.failed, p.ok, p.failed,
               hv_batch_stats(hb->batch)->skipped, p.pages_per_s, eta);
    }
}

/* ---- repairing a source's outputs ---- */

typedef struct {
    char *path;
    uint64_t truncated;
    char *err; /* NULL: repaired */
} repaired_t;

typedef struct {
    hv_bhost_t *host;
    uv_work_t work;
    char *dir;
    char *suffix;
    repaired_t *v;
    size_t n;
    void (*done)(void *ud);
    void *ud;
} repair_t;

static void repair_work(uv_work_t *w)
{
    repair_t *rp = hv_container_of(w, repair_t, work);
    size_t sn = strlen(rp->suffix), cap = 0;
    uv_fs_t req;
    uv_dirent_t ent;
    if (uv_fs_scandir(NULL, &req, rp->dir, 0, NULL) < 0) {
        uv_fs_req_cleanup(&req);
        return;
    }
    while (uv_fs_scandir_next(&req, &ent) != UV_EOF) {
        size_t n = strlen(ent.name);
        if (n <= sn || strcmp(ent.name + n - sn, rp->suffix) != 0 || ent.name[0] == '.')
            continue;
        char err[1200];
        hv_repair_t rep;
        size_t plen = strlen(rp->dir) + n + 2;
        char *path = hv_xmalloc(plen);
        snprintf(path, plen, "%s/%s", rp->dir, ent.name);
        int rc = hv_output_repair(path, NULL, NULL, &rep, err, sizeof(err));
        if (rc == 0 && rep.truncated == 0) {
            free(path);
            continue;
        }
        if (rp->n == cap) {
            cap = cap ? cap * 2 : 8;
            rp->v = hv_xrealloc(rp->v, cap * sizeof(*rp->v));
        }
        rp->v[rp->n++] = (repaired_t){path, rc == 0 ? rep.truncated : 0,
                                      rc != 0 ? hv_xstrdup(err) : NULL};
    }
    uv_fs_req_cleanup(&req);
}

static void on_repaired(uv_work_t *w, int status)
{
    repair_t *rp = hv_container_of(w, repair_t, work);
    (void)status;
    for (size_t i = 0; i < rp->n; i++) {
        if (rp->v[i].err != NULL)
            HV_LOG(HV_LOG_WARNING, "event=output_repair_failed output=%s error=\"%s\"",
                   rp->v[i].path, rp->v[i].err);
        else
            HV_LOG(HV_LOG_WARNING, "event=output_repaired output=%s truncated_bytes=%" PRIu64,
                   rp->v[i].path, rp->v[i].truncated);
        free(rp->v[i].path);
        free(rp->v[i].err);
    }
    rp->host->count--;
    void (*done)(void *) = rp->done;
    void *ud = rp->ud;
    free(rp->v);
    free(rp->dir);
    free(rp->suffix);
    free(rp);
    done(ud);
}

void hv_bhost_repair_outputs(hv_bhost_t *h, const char *dir, const char *suffix,
                             void (*done)(void *ud), void *ud)
{
    repair_t *rp = hv_xcalloc(1, sizeof(*rp));
    rp->host = h;
    rp->dir = hv_xstrdup(dir);
    rp->suffix = hv_xstrdup(suffix);
    rp->done = done;
    rp->ud = ud;
    h->count++;
    uv_queue_work(h->loop, &rp->work, repair_work, on_repaired);
}

/* ---- the host ---- */

hv_bhost_t *hv_bhost_new(hv_engine_t *e)
{
    hv_bhost_t *h = hv_xcalloc(1, sizeof(*h));
    h->engine = e;
    h->loop = hv_engine_loop(e);
    h->cfg = hv_engine_config(e);
    TAILQ_INIT(&h->hosted);
    return h;
}

void hv_bhost_stop(hv_bhost_t *h)
{
    h->stopping = 1;
}

unsigned hv_bhost_count(const hv_bhost_t *h)
{
    return h->count;
}

void hv_bhost_free(hv_bhost_t *h)
{
    if (h == NULL)
        return;
    assert(h->count == 0 && TAILQ_EMPTY(&h->hosted));
    free(h);
}

void hv_bhost__set_step_hook(hv_bhost_t *h, void (*hook)(const char *step, const char *path))
{
    h->hook = hook;
}
