/*
 * parse.c: HTML analysis on the threadpool.
 *
 * Pages travel in small groups: one threadpool work item analyses up to HV_PARSE_GROUP pages
 * of one batch. Handing a page to a worker and getting it back costs two thread wakeups;
 * for small pages (or titles settled by the fast path) that overhead, not parsing, would
 * otherwise set the pace. A group never mixes batches, so cancelling one batch's parses never
 * touches another's.
 */
#include "harvestd/parse.h"

#include <assert.h>
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/uio.h>
#include <unistd.h>

#include "harvestd/charset.h"
#include "harvestd/common.h"
#include "harvestd/html.h"
#include "harvestd/storeentry.h"

typedef struct {
    hv_record_t *rec;
    char *body;
    size_t len;
    int rc;                   /* written by the worker */
    uint64_t ns;              /* written by the worker: time spent parsing */
    hv_html_result_t result;  /* written by the worker */
    char charset[32];         /* written by the worker */
} item_t;

struct hv_parse_group_s {
    uv_work_t req;
    hv_parse_t *p;
    int fast;                 /* try the title fast path first */
    void *tag;
    const hv_ruleset_t *rules; /* extraction rules of the batch (shared, read-only) */
    const char *crash_note;   /* path of the batch's crash note, NULL: none */
    unsigned n;
    size_t bytes;
    item_t items[HV_PARSE_GROUP];
    LIST_ENTRY(hv_parse_group_s) link;
};

struct hv_parse_s {
    uv_loop_t *loop;
    int fast;
    char *abort_marker;       /* HARVESTD_TEST_PARSE_ABORT (see work_cb) */
    hv_parse_done_cb done;
    void *ud;
    unsigned busy;
    LIST_HEAD(, hv_parse_group_s) groups;
};

hv_parse_t *hv_parse_new(uv_loop_t *loop, int title_fast_path, hv_parse_done_cb done, void *ud)
{
    hv_parse_t *p = hv_xcalloc(1, sizeof(*p));
    p->fast = title_fast_path;
    p->loop = loop;
    const char *marker = getenv("HARVESTD_TEST_PARSE_ABORT");
    if (marker != NULL && *marker != '\0')
        p->abort_marker = hv_xstrdup(marker);
    p->done = done;
    p->ud = ud;
    LIST_INIT(&p->groups);
    return p;
}

/* The page this worker thread is parsing, for the fatal-signal handler. */
static __thread const char *current_note;
static __thread const char *current_line;

static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
static struct sigaction previous[sizeof(fatal_signals) / sizeof(fatal_signals[0])];

static void on_fatal_signal(int sig)
{
    if (current_note != NULL && current_line != NULL) {
        int fd = open(current_note, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (fd >= 0) {
            /* One writev on an O_APPEND file: the line and its newline land together even
             * when two workers crash at once. */
            struct iovec iov[2] = {{(void *)(uintptr_t)current_line, strlen(current_line)},
                                   {(void *)(uintptr_t)"\n", 1}};
            ssize_t rc = writev(fd, iov, 2);
            (void)rc; /* nothing more can be done about a failure here */
            fsync(fd);
            close(fd);
        }
    }
    for (size_t i = 0; i < sizeof(fatal_signals) / sizeof(fatal_signals[0]); i++) {
        if (fatal_signals[i] == sig)
            sigaction(sig, &previous[i], NULL);
    }
    raise(sig); /* delivered when the handler returns: the default action, or a sanitizer's */
}

void hv_parse_catch_crashes(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_fatal_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_NODEFER;
    for (size_t i = 0; i < sizeof(fatal_signals) / sizeof(fatal_signals[0]); i++)
        sigaction(fatal_signals[i], &sa, &previous[i]);
}

/* Worker thread: only the group is touched. */
static void work_cb(uv_work_t *req)
{
    hv_parse_group_t *g = hv_container_of(req, hv_parse_group_t, req);
    /* gumbo's trees come from one arena per group: no malloc/free per node (see arena.h). */
    hv_arena_t arena;
    hv_arena_init(&arena);
    hv_html_use_arena(&arena);
    for (unsigned i = 0; i < g->n; i++) {
        item_t *it = &g->items[i];
        uint64_t t0 = uv_hrtime();
        current_note = g->crash_note;
        current_line = it->rec->requested_url;
        /* Fault injection for the tests of the crash note: a page holding the marker takes
         * the process down as a parser assertion would. */
        if (g->p->abort_marker != NULL && it->body != NULL &&
            memmem(it->body, it->len, g->p->abort_marker, strlen(g->p->abort_marker)) != NULL)
            abort();
        /* The item owns its record while it runs: reading it here is safe. */
        /* Only a stored URL has anything to compare the hash with, now or later. */
        if (it->rec->state != NULL && it->rec->state->key != NULL && it->body != NULL)
            hv_store_entry_body_hash(it->body, it->len, it->rec->state->body_hash);
        /* What the block detector compares across URLs (and record_digest prints): a pass
         * over the whole body, which the title fast path would not otherwise read. */
        if (it->rec->digest_wanted) {
            it->rec->body_digest = hv_record_body_digest(it->body != NULL ? it->body : "",
                                                         it->len);
            it->rec->digest_known = 1;
        }
        hv_charset_result_t cs;
        hv_charset_decode(it->body, it->len, it->rec->content_type, &cs);
        const char *text = cs.text != NULL ? cs.text : it->body;
        memcpy(it->charset, cs.name, sizeof(it->charset));
        it->charset[sizeof(it->charset) - 1] = '\0';
        if (!hv_ruleset_empty(g->rules))
            it->rc = hv_html_analyse_rules(text, cs.len, g->rules, it->rec->url, &it->result);
        else if (!g->fast || !hv_html_title_fast(text, cs.len, &it->result))
            it->rc = hv_html_analyse(text, cs.len, &it->result);
        hv_charset_result_free(&cs);
        it->ns = uv_hrtime() - t0;
        /* The body is freed back on the loop (after_work_cb), by the thread that allocated
         * it: a free from here would take the loop's malloc arena lock while the loop
         * allocates, a futex wait for one of the two per page. */
        current_line = NULL;
    }
    current_note = NULL;
    hv_html_use_arena(NULL);
    hv_arena_free(&arena);
}

/* What a record says about a document the pre-scan (or the tree check) refused: the class
 * and the detail of each verdict. The detail's argument is the bound that was met. */
static const struct {
    hv_error_type_t type;
    hv_detail_t detail;
} refusals[] = {
    [HV_PRESCAN_TOO_DEEP] = {HV_ET_TOO_DEEPLY_NESTED, HV_D_NESTING_EXCEEDS},
    [HV_PRESCAN_DEPTH_SUM] = {HV_ET_TOO_DEEPLY_NESTED, HV_D_DEPTH_SUM_EXCEEDS},
    [HV_PRESCAN_FORMATTING_OPEN] = {HV_ET_TOO_DEEPLY_NESTED, HV_D_FORMATTING_OPEN_BEYOND},
    [HV_PRESCAN_FORMATTING_REOPENED] = {HV_ET_TOO_DEEPLY_NESTED, HV_D_FORMATTING_REOPENED_BEYOND},
    [HV_PRESCAN_CELLS_NESTED] = {HV_ET_TOO_DEEPLY_NESTED, HV_D_TABLE_CELLS_NESTED_BEYOND},
    [HV_PRESCAN_TEMPLATES_NESTED] = {HV_ET_TOO_DEEPLY_NESTED, HV_D_TEMPLATES_NESTED_BEYOND},
    [HV_PRESCAN_OBJECTS_NESTED] = {HV_ET_TOO_DEEPLY_NESTED, HV_D_OBJECTS_NESTED_BEYOND},
    [HV_PRESCAN_ELEMENTS] = {HV_ET_TOO_DEEPLY_NESTED, HV_D_ELEMENTS_EXCEED},
    [HV_PRESCAN_KNOWN_CRASH] = {HV_ET_UNPARSABLE_DOCUMENT, HV_D_KNOWN_TO_CRASH_PARSER},
    [HV_PRESCAN_ATTRIBUTES] = {HV_ET_TOO_MANY_ATTRIBUTES, HV_D_ATTRIBUTES_EXCEED},
    [HV_PRESCAN_MERGED_ATTRIBUTES] = {HV_ET_TOO_MANY_ATTRIBUTES, HV_D_MERGED_ATTRIBUTES_EXCEED},
    [HV_PRESCAN_ATTRIBUTE_COPIES] = {HV_ET_TOO_MANY_ATTRIBUTES, HV_D_ATTRIBUTE_COPIES_EXCEED},
    [HV_PRESCAN_ATTRIBUTE_WORK] = {HV_ET_TOO_MANY_ATTRIBUTES, HV_D_ATTRIBUTE_COMPARISONS_EXCEED},
};

static void fail_refused(hv_record_t *rec, const hv_html_result_t *r)
{
    hv_error_type_t type = HV_ET_TOO_DEEPLY_NESTED;
    hv_detail_t detail = HV_D_NESTING_EXCEEDS;
    size_t bound = r->bound;
    if ((size_t)r->refusal < HV_ARRAY_SIZE(refusals) && refusals[r->refusal].detail != HV_D_NONE) {
        type = refusals[r->refusal].type;
        detail = refusals[r->refusal].detail;
    } else {
        bound = HV_HTML_MAX_DEPTH; /* a refusal without a verdict: the nesting bound */
    }
    char arg[24];
    snprintf(arg, sizeof(arg), "%zu", bound);
    hv_record_fail(rec, HV_STAGE_PARSE, type, detail, arg);
}

/* Whether extraction rules took something from the page: a field that is neither null nor
 * an empty list. Such a page is ok without a title; failing it as MissingTitle would send it
 * back to be fetched on every resume. */
static int found_something(const char *fields)
{
    if (fields == NULL)
        return 0;
    cJSON *obj = cJSON_Parse(fields);
    const cJSON *f;
    int found = 0;
    cJSON_ArrayForEach(f, obj)
    {
        if (!cJSON_IsNull(f) && !(cJSON_IsArray(f) && cJSON_GetArraySize(f) == 0))
            found = 1;
    }
    cJSON_Delete(obj);
    return found;
}

static void finish_item(item_t *it)
{
    hv_record_t *rec = it->rec;
    /* Observed with the record (hv_record_counts_add), so that a scrape never counts a parse
     * whose record is not counted yet. */
    rec->parse_ns = it->ns > 0 ? it->ns : 1;
    if (it->charset[0] != '\0') {
        free(rec->charset);
        rec->charset = hv_xstrdup(it->charset);
    }
    if (it->result.fields != NULL) {
        rec->fields = it->result.fields;
        it->result.fields = NULL;
    }
    if (it->rc == HV_ETOOBIG && it->result.refusal == HV_PRESCAN_OK) {
        char size[24];
        hv_format_size(size, sizeof(size), HV_EXTRACT_FIELDS_MAX);
        hv_record_fail(rec, HV_STAGE_PARSE, HV_ET_EXTRACTION_TOO_LARGE, HV_D_FIELDS_EXCEED, size);
    } else if (it->rc != 0) {
        fail_refused(rec, &it->result);
    } else if (it->result.title == NULL && !found_something(rec->fields)) {
        hv_record_fail(rec, HV_STAGE_PARSE, HV_ET_MISSING_TITLE, HV_D_NO_TITLE, NULL);
    } else {
        rec->title = it->result.title;
        it->result.title = NULL;
    }
    hv_html_result_free(&it->result);
}

static void after_work_cb(uv_work_t *req, int status)
{
    hv_parse_group_t *g = hv_container_of(req, hv_parse_group_t, req);
    hv_parse_t *p = g->p;

    LIST_REMOVE(g, link);
    p->busy--;
    for (unsigned i = 0; i < g->n; i++) {
        item_t *it = &g->items[i];
        free(it->body);
        it->body = NULL;
        if (status == UV_ECANCELED) {
            p->done(p->ud, g->tag, it->rec, 1);
        } else {
            finish_item(it);
            p->done(p->ud, g->tag, it->rec, 0);
        }
    }
    free(g);
}

hv_parse_group_t *hv_parse_group_new(hv_parse_t *p, void *tag, const hv_ruleset_t *rules,
                                     const char *crash_note)
{
    hv_parse_group_t *g = hv_xcalloc(1, sizeof(*g));
    g->p = p;
    g->fast = p->fast;
    g->tag = tag;
    g->rules = rules;
    g->crash_note = crash_note;
    return g;
}

int hv_parse_group_add(hv_parse_group_t *g, hv_record_t *rec, char *body, size_t len)
{
    if (g->n == HV_PARSE_GROUP)
        return UV_ENOBUFS;
    item_t *it = &g->items[g->n++];
    it->rec = rec;
    it->body = body;
    it->len = len;
    g->bytes += len;
    return 0;
}

unsigned hv_parse_group_size(const hv_parse_group_t *g, size_t *bytes)
{
    if (bytes != NULL)
        *bytes = g->bytes;
    return g->n;
}

void hv_parse_group_submit(hv_parse_group_t *g)
{
    hv_parse_t *p = g->p;
    assert(g->n > 0);
    LIST_INSERT_HEAD(&p->groups, g, link);
    p->busy++;
    int rc = uv_queue_work(p->loop, &g->req, work_cb, after_work_cb);
    /* uv_queue_work fails only for a NULL work_cb. */
    assert(rc == 0);
    (void)rc;
}

unsigned hv_parse_busy(const hv_parse_t *p)
{
    return p->busy;
}

void hv_parse_cancel_pending(hv_parse_t *p, const void *tag)
{
    hv_parse_group_t *g;
    LIST_FOREACH(g, &p->groups, link)
    {
        if (tag == NULL || g->tag == tag)
            uv_cancel((uv_req_t *)&g->req); /* fails harmlessly for running ones */
    }
}

void hv_parse_free(hv_parse_t *p)
{
    assert(p->busy == 0);
    free(p->abort_marker);
    free(p);
}
