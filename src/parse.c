/* parse.c: HTML analysis on the threadpool. */
#include "harvestd/parse.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/queue.h>

#include "harvestd/common.h"
#include "harvestd/html.h"
#include "harvestd/metrics.h"

typedef struct work_s {
    uv_work_t req;
    hv_parse_t *p;
    int fast;                 /* try the title fast path first */
    void *tag;
    hv_record_t *rec;
    char *body;
    size_t len;
    int rc;                   /* written by the worker */
    uint64_t ns;              /* written by the worker: time spent parsing */
    hv_html_result_t result;  /* written by the worker */
    LIST_ENTRY(work_s) link;
} work_t;

struct hv_parse_s {
    uv_loop_t *loop;
    int fast;
    hv_parse_done_cb done;
    void *ud;
    unsigned inflight;
    LIST_HEAD(, work_s) works;
};

hv_parse_t *hv_parse_new(uv_loop_t *loop, int title_fast_path, hv_parse_done_cb done, void *ud)
{
    hv_parse_t *p = hv_xcalloc(1, sizeof(*p));
    p->fast = title_fast_path;
    p->loop = loop;
    p->done = done;
    p->ud = ud;
    LIST_INIT(&p->works);
    return p;
}

/* Worker thread: only the work item is touched. */
static void work_cb(uv_work_t *req)
{
    work_t *w = hv_container_of(req, work_t, req);
    uint64_t t0 = uv_hrtime();
    if (!w->fast || !hv_html_title_fast(w->body, w->len, &w->result))
        w->rc = hv_html_analyse(w->body, w->len, &w->result);
    w->ns = uv_hrtime() - t0;
    free(w->body);
    w->body = NULL;
}

static void after_work_cb(uv_work_t *req, int status)
{
    work_t *w = hv_container_of(req, work_t, req);
    hv_parse_t *p = w->p;
    hv_record_t *rec = w->rec;

    LIST_REMOVE(w, link);
    p->inflight--;
    if (status == UV_ECANCELED) {
        void *tag = w->tag;
        free(w->body);
        free(w);
        p->done(p->ud, tag, rec, 1);
        return;
    }
    hv_metrics_parse_time((double)w->ns / 1e9);
    if (w->rc == HV_ENESTING) {
        char text[64];
        snprintf(text, sizeof(text), "nesting_exceeds_%d", HV_HTML_MAX_DEPTH);
        hv_record_fail(rec, HV_STAGE_PARSE, HV_ET_TOO_DEEPLY_NESTED, text);
    } else if (w->result.title == NULL) {
        hv_record_fail(rec, HV_STAGE_PARSE, HV_ET_MISSING_TITLE, "no_title");
    } else {
        rec->title = w->result.title;
        w->result.title = NULL;
    }
    hv_html_result_free(&w->result);
    void *tag = w->tag;
    free(w);
    p->done(p->ud, tag, rec, 0);
}

void hv_parse_submit(hv_parse_t *p, void *tag, hv_record_t *rec, char *body, size_t len)
{
    work_t *w = hv_xcalloc(1, sizeof(*w));
    w->p = p;
    w->fast = p->fast;
    w->tag = tag;
    w->rec = rec;
    w->body = body;
    w->len = len;
    LIST_INSERT_HEAD(&p->works, w, link);
    p->inflight++;
    int rc = uv_queue_work(p->loop, &w->req, work_cb, after_work_cb);
    /* uv_queue_work fails only for a NULL work_cb. */
    assert(rc == 0);
    (void)rc;
}

unsigned hv_parse_inflight(const hv_parse_t *p)
{
    return p->inflight;
}

void hv_parse_cancel_pending(hv_parse_t *p, const void *tag)
{
    work_t *w;
    LIST_FOREACH(w, &p->works, link)
    {
        if (tag == NULL || w->tag == tag)
            uv_cancel((uv_req_t *)&w->req); /* fails harmlessly for running ones */
    }
}

void hv_parse_free(hv_parse_t *p)
{
    assert(p->inflight == 0);
    free(p);
}
