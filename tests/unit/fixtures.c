/* fixtures.c: see fixtures.h. */
#include "fixtures.h"

#include <stdlib.h>
#include <string.h>

#include "harvestd/common.h"
#include "harvestd/detail.h"
#include "test.h"

/* Whether `text` is the family `d`'s text with some argument, copied into `arg`. */
static int family_match(hv_detail_t d, const char *text, char *arg, size_t cap)
{
    const char *tmpl = hv_detail_str(d), *open = strchr(tmpl, '<'), *close = strchr(tmpl, '>');
    if (open == NULL || close == NULL)
        return 0;
    size_t pre = (size_t)(open - tmpl), post = strlen(close + 1), len = strlen(text);
    if (len <= pre + post || strncmp(text, tmpl, pre) != 0 ||
        strcmp(text + len - post, close + 1) != 0 || len - pre - post >= cap)
        return 0;
    memcpy(arg, text + pre, len - pre - post);
    arg[len - pre - post] = '\0';
    return 1;
}

void fx_fail_record(hv_record_t *rec, hv_stage_t stage, hv_error_type_t type, const char *text)
{
    char arg[HV_DETAIL_ARG_MAX];
    if (text == NULL) { /* a failure that left no detail */
        hv_record_fail(rec, stage, type, HV_D_NONE, NULL);
        return;
    }
    /* A fixed text first: "dns_temporary_failure" is not the family dns_<error>. */
    for (int d = 1; d < HV_D__COUNT; d++) {
        if (!hv_detail_has_arg((hv_detail_t)d) && strcmp(hv_detail_str((hv_detail_t)d), text) == 0) {
            hv_record_fail(rec, stage, type, (hv_detail_t)d, NULL);
            return;
        }
    }
    /* Then the family with the longest constant text around the argument. */
    int best = 0;
    size_t best_len = 0;
    for (int d = 1; d < HV_D__COUNT; d++) {
        const char *tmpl = hv_detail_str((hv_detail_t)d), *open = strchr(tmpl, '<');
        const char *close = open != NULL ? strchr(open, '>') : NULL;
        size_t fixed = close != NULL ? strlen(tmpl) - (size_t)(close + 1 - open) : 0;
        if (hv_detail_has_arg((hv_detail_t)d) && (best == 0 || fixed > best_len) &&
            family_match((hv_detail_t)d, text, arg, sizeof(arg))) {
            best = d;
            best_len = fixed;
        }
    }
    if (best == 0)
        hv_test_fail(__FILE__, __LINE__, "no detail code spells '%s'", text);
    family_match((hv_detail_t)best, text, arg, sizeof(arg));
    hv_record_fail(rec, stage, type, (hv_detail_t)best, arg);
    ASSERT_STR_EQ(text, rec->error);
}

/* ---- the daemon's middle ---- */

void fx_daemon_init(fx_daemon_t *d, const char *const *directives)
{
    char err[1200];
    memset(d, 0, sizeof(*d));
    ASSERT_OK(uv_loop_init(&d->loop));
    hv_config_defaults(&d->cfg);
    for (size_t i = 0; directives != NULL && directives[i] != NULL; i += 2) {
        if (hv_config_set(&d->cfg, directives[i], directives[i + 1], err, sizeof(err)) != 0)
            hv_test_fail(__FILE__, __LINE__, "%s = %s: %s", directives[i], directives[i + 1], err);
    }
    ASSERT_OK(hv_config_finish(&d->cfg, err, sizeof(err)));
    d->engine = hv_engine_new(&d->loop, &d->cfg, NULL, &d->records);
    d->host = hv_bhost_new(d->engine);
}

void fx_daemon_close(fx_daemon_t *d)
{
    ASSERT_EQ(0, hv_bhost_count(d->host));
    hv_bhost_free(d->host);
    hv_engine_close(d->engine, NULL, NULL);
    ASSERT_LOOP_CLOSE(&d->loop);
    hv_config_free(&d->cfg);
}

/* ---- lines from memory ---- */

typedef struct {
    hv_source_t base;
    uv_idle_t idle;
    const char *const *lines;
    size_t n, next;
    const hv_sink_t *sink;
    void *ud;
    int paused;
    int ended;
    int *closed;
} lines_src_t;

static void lines_deliver(uv_idle_t *h)
{
    lines_src_t *m = h->data;
    while (!m->paused && m->next < m->n) {
        const char *l = m->lines[m->next++];
        m->paused = m->sink->on_line(m->ud, l, strlen(l), m->next, 0, NULL);
    }
    uv_idle_stop(h);
    if (m->next == m->n && !m->ended) {
        m->ended = 1;
        m->sink->on_end(m->ud, 0);
    }
}

static void lines_start(hv_source_t *s, const hv_sink_t *sink, void *ud)
{
    lines_src_t *m = (lines_src_t *)s;
    m->sink = sink;
    m->ud = ud;
    uv_idle_start(&m->idle, lines_deliver);
}

static void lines_resume(hv_source_t *s)
{
    lines_src_t *m = (lines_src_t *)s;
    m->paused = 0;
    if (!m->ended)
        uv_idle_start(&m->idle, lines_deliver);
}

static void lines_on_close(uv_handle_t *h)
{
    free(h->data);
}

static void lines_close(hv_source_t *s)
{
    lines_src_t *m = (lines_src_t *)s;
    if (m->closed != NULL)
        (*m->closed)++;
    uv_close((uv_handle_t *)&m->idle, lines_on_close);
}

static const char *lines_name(const hv_source_t *s)
{
    (void)s;
    return "memory";
}

static const hv_source_ops_t lines_ops = {lines_start, lines_resume, lines_close, lines_name,
                                          NULL};

hv_source_t *fx_lines_source(uv_loop_t *loop, const char *const *lines, size_t n, int *closed)
{
    lines_src_t *m = hv_xcalloc(1, sizeof(*m));
    m->base.ops = &lines_ops;
    m->lines = lines;
    m->n = n;
    m->closed = closed;
    uv_idle_init(loop, &m->idle);
    m->idle.data = m;
    return &m->base;
}
