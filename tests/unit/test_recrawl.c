/*
 * test_recrawl.c: conditional re-fetching's decisions (recrawl.h) over a real store in the
 * test's directory, on a real loop: what a lookup makes of a record, what is stored from it
 * once durable (committed on the threadpool), and closing with commits pending.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "harvestd/common.h"
#include "harvestd/config.h"
#include "harvestd/recrawl.h"
#include "harvestd/record.h"
#include "harvestd/store.h"
#include "harvestd/url.h"
#include "test.h"

#define FP UINT64_C(0x1234)

typedef struct {
    uv_loop_t loop;
    hv_config_t cfg;
    hv_recrawl_t *rc;
    int closed;
} fix_t;

static void fix_open_bounded(fix_t *f, uint64_t min_age_ms, uint64_t max_bytes)
{
    char err[1024];
    memset(f, 0, sizeof(*f));
    ASSERT_OK(uv_loop_init(&f->loop));
    hv_config_defaults(&f->cfg);
    snprintf(f->cfg.state_dir, sizeof(f->cfg.state_dir), "%s", hv_test_tmppath("state"));
    f->cfg.state_max_bytes = max_bytes;
    f->cfg.recrawl_min_age_ms = min_age_ms;
    int rc = hv_recrawl_open(&f->loop, &f->cfg, &f->rc, err, sizeof(err));
    if (rc != 0)
        fprintf(stderr, "%s\n", err);
    ASSERT_OK(rc);
}

static void fix_open(fix_t *f, uint64_t min_age_ms)
{
    fix_open_bounded(f, min_age_ms, 16 << 20);
}

static void on_closed(void *ud)
{
    ((fix_t *)ud)->closed = 1;
}

static void fix_close(fix_t *f)
{
    hv_recrawl_close(f->rc, on_closed, f);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    ASSERT_EQ(1, f->closed);
    hv_config_free(&f->cfg);
    ASSERT_LOOP_CLOSE(&f->loop);
}

/* A record of `text` submitted: what prepare decided. */
static hv_record_t *prepared(fix_t *f, const char *text, uint64_t fp, int *verdict)
{
    hv_url_t u;
    const char *why;
    ASSERT_OK(hv_url_parse(&u, text, strlen(text), &why));
    hv_record_t *rec = hv_record_new(text, strlen(text));
    *verdict = hv_recrawl_prepare(f->rc, rec, &u, fp);
    hv_url_free(&u);
    return rec;
}

/* What fetch and parse would make of a 200 with `body`. */
static void answered_200(hv_record_t *rec, const char *final, const char *title,
                         const char *body, const char *etag)
{
    free(rec->url);
    rec->url = hv_xstrdup(final);
    rec->http_status = 200;
    rec->title = hv_xstrdup(title);
    rec->fields = hv_xstrdup("{\"h\":\"x\"}");
    rec->content_type = hv_xstrdup("text/html");
    rec->charset = hv_xstrdup("utf-8");
    rec->bytes = (int64_t)strlen(body);
    rec->fetched_at_ms = hv_now_unix_ms();
    rec->state->etag = etag != NULL ? hv_xstrdup(etag) : NULL;
    hv_store_entry_body_hash(body, strlen(body), rec->state->body_hash);
}

static void store_durable(fix_t *f, hv_record_t *rec)
{
    hv_recrawl_op_t *op = hv_recrawl_op_new(f->rc, rec);
    ASSERT_NOT_NULL(op);
    hv_recrawl_commit(f->rc, op);
    uv_run(&f->loop, UV_RUN_DEFAULT); /* until the commit is done */
}

TEST_IMPL(recrawl_stores_a_durable_record_and_answers_its_304)
{
    fix_t f;
    int v;
    fix_open(&f, 0);
    hv_record_t *rec = prepared(&f, "http://A.test/p", FP, &v);
    ASSERT_EQ(HV_RECRAWL_FETCH, v);
    ASSERT_STR_EQ("http://a.test/p", rec->state->key);
    ASSERT_EQ(0, rec->state->conditional);
    answered_200(rec, "http://a.test/final", "T", "<title>T</title>", "\"e1\"");
    hv_recrawl_parsed(f.rc, rec);
    ASSERT_EQ(0, rec->unchanged);
    ASSERT_EQ(rec->fetched_at_ms, rec->modified_at_ms);
    store_durable(&f, rec);
    int64_t first_at = rec->fetched_at_ms;
    hv_record_free(rec);

    /* The next lookup sends the validators to the final URL; a 304 is the stored page. */
    rec = prepared(&f, "http://a.test/p", FP, &v);
    ASSERT_EQ(HV_RECRAWL_FETCH, v);
    ASSERT_EQ(1, rec->state->conditional);
    ASSERT_STR_EQ("http://a.test/final", rec->state->prev.url);
    ASSERT_STR_EQ("\"e1\"", rec->state->prev.etag);
    rec->url = hv_xstrdup("http://a.test/final");
    rec->http_status = 304;
    rec->fetched_at_ms = first_at + 1000;
    hv_recrawl_not_modified(f.rc, rec);
    ASSERT_EQ(1, rec->ok);
    ASSERT_EQ(1, rec->not_modified);
    ASSERT_STR_EQ("T", rec->title);
    ASSERT_STR_EQ("{\"h\":\"x\"}", rec->fields);
    ASSERT_STR_EQ("text/html", rec->content_type);
    ASSERT_EQ(16, rec->bytes);
    ASSERT_EQ(first_at, rec->modified_at_ms);
    /* Stored again: the validators of the 304 were none, so the old ones hold. */
    store_durable(&f, rec);
    hv_record_free(rec);
    rec = prepared(&f, "http://a.test/p", FP, &v);
    ASSERT_STR_EQ("\"e1\"", rec->state->prev.etag);
    ASSERT_EQ(200, rec->state->prev.http_status);
    ASSERT_EQ(first_at + 1000, rec->state->prev.fetched_at_ms);
    ASSERT_EQ(first_at, rec->state->prev.modified_at_ms);
    hv_record_free(rec);

    hv_recrawl_stats_t st;
    hv_recrawl_stats(f.rc, &st);
    ASSERT_EQ(1, st.entries);
    ASSERT_EQ(2, st.stored);
    ASSERT_EQ(1, st.not_modified);
    ASSERT_EQ(16, st.bytes_avoided);
    fix_close(&f);
}

TEST_IMPL(recrawl_other_rules_fetch_unconditionally_and_compare_the_body)
{
    fix_t f;
    int v;
    fix_open(&f, 0);
    hv_record_t *rec = prepared(&f, "http://a.test/r", FP, &v);
    answered_200(rec, "http://a.test/r", "T", "same body", "\"e\"");
    hv_recrawl_parsed(f.rc, rec);
    store_durable(&f, rec);
    int64_t first_at = rec->fetched_at_ms;
    hv_record_free(rec);

    rec = prepared(&f, "http://a.test/r", FP + 1, &v);
    ASSERT_EQ(HV_RECRAWL_FETCH, v);
    ASSERT_EQ(0, rec->state->conditional);
    answered_200(rec, "http://a.test/r", "T", "same body", "\"e\"");
    rec->fetched_at_ms = first_at + 5;
    hv_recrawl_parsed(f.rc, rec);
    ASSERT_EQ(1, rec->unchanged);
    ASSERT_EQ(first_at, rec->modified_at_ms);
    hv_record_free(rec);

    rec = prepared(&f, "http://a.test/r", FP, &v);
    answered_200(rec, "http://a.test/r", "T", "another body", "\"f\"");
    hv_recrawl_parsed(f.rc, rec);
    ASSERT_EQ(0, rec->unchanged);
    ASSERT_EQ(rec->fetched_at_ms, rec->modified_at_ms);
    hv_record_free(rec);
    fix_close(&f);
}

TEST_IMPL(recrawl_min_age_answers_from_the_store)
{
    fix_t f;
    int v;
    fix_open(&f, 3600 * 1000);
    hv_record_t *rec = prepared(&f, "http://a.test/c", FP, &v);
    ASSERT_EQ(HV_RECRAWL_FETCH, v);
    answered_200(rec, "http://a.test/c2", "Cached", "body", NULL);
    hv_recrawl_parsed(f.rc, rec);
    store_durable(&f, rec);
    int64_t at = rec->fetched_at_ms;
    hv_record_free(rec);

    rec = prepared(&f, "http://a.test/c", FP, &v);
    ASSERT_EQ(HV_RECRAWL_ANSWERED, v);
    ASSERT_EQ(1, rec->from_cache);
    ASSERT_EQ(1, rec->ok);
    ASSERT_STR_EQ("http://a.test/c2", rec->url);
    ASSERT_STR_EQ("Cached", rec->title);
    ASSERT_EQ(200, rec->http_status);
    ASSERT_EQ(at, rec->fetched_at_ms);
    /* Nothing to store again. */
    ASSERT_NULL(hv_recrawl_op_new(f.rc, rec));
    hv_record_free(rec);
    /* Other rules: not an answer. */
    rec = prepared(&f, "http://a.test/c", FP + 1, &v);
    ASSERT_EQ(HV_RECRAWL_FETCH, v);
    hv_record_free(rec);
    fix_close(&f);
}

TEST_IMPL(recrawl_no_store_removes_what_was_stored)
{
    fix_t f;
    int v;
    fix_open(&f, 0);
    hv_record_t *rec = prepared(&f, "http://a.test/n", FP, &v);
    answered_200(rec, "http://a.test/n", "T", "b", "\"e\"");
    rec->state->no_store = 1;
    /* Nothing stored before, nothing to do. */
    ASSERT_NULL(hv_recrawl_op_new(f.rc, rec));
    rec->state->no_store = 0;
    store_durable(&f, rec);
    hv_record_free(rec);

    rec = prepared(&f, "http://a.test/n", FP, &v);
    ASSERT_EQ(1, rec->state->conditional);
    answered_200(rec, "http://a.test/n", "T", "b", "\"e\"");
    rec->state->no_store = 1;
    store_durable(&f, rec);
    hv_record_free(rec);
    rec = prepared(&f, "http://a.test/n", FP, &v);
    ASSERT_EQ(0, rec->state->conditional);
    ASSERT_NULL(rec->state->prev.url);
    hv_record_free(rec);
    /* A failed record stores nothing. */
    rec = prepared(&f, "http://a.test/x", FP, &v);
    hv_record_fail(rec, HV_STAGE_DOWNLOAD, HV_ET_HTTP_STATUS, HV_D_HTTP_STATUS, "404");
    ASSERT_NULL(hv_recrawl_op_new(f.rc, rec));
    hv_record_free(rec);
    fix_close(&f);
}

/* Commits still queued when the store closes are made before it closes. */
TEST_IMPL(recrawl_close_commits_what_is_pending)
{
    fix_t f;
    int v;
    fix_open(&f, 0);
    for (int i = 0; i < 50; i++) {
        char url[64];
        snprintf(url, sizeof(url), "http://a.test/%d", i);
        hv_record_t *rec = prepared(&f, url, FP, &v);
        answered_200(rec, url, "T", url, "\"e\"");
        hv_recrawl_parsed(f.rc, rec);
        hv_recrawl_commit(f.rc, hv_recrawl_op_new(f.rc, rec));
        hv_record_free(rec);
    }
    fix_close(&f);
    fix_open(&f, 0);
    hv_recrawl_stats_t st;
    hv_recrawl_stats(f.rc, &st);
    ASSERT_EQ(50, st.entries);
    fix_close(&f);
}

/* Fill the store of `f`'s directory with `n` entries of 300-byte titles, closed, and zero one
 * of its leaf pages (not the root): a damaged page that the checks at open cannot see, and that
 * LMDB reports (MDB_CORRUPTED) to a lookup that reaches it. */
static void damaged_store(int n)
{
    char err[1024], path[1100], title[301];
    hv_store_t *st;
    memset(title, 't', 300);
    title[300] = '\0';
    ASSERT_OK(hv_store_open(hv_test_tmppath("state"), 16 << 20, &st, err, sizeof(err)));
    for (int i = 0; i < n; i++) {
        char key[64];
        hv_store_entry_t e;
        memset(&e, 0, sizeof(e));
        e.url = key;
        e.title = title;
        e.bytes = 1;
        e.rules_fp = FP;
        e.fetched_at_ms = hv_now_unix_ms() - 1000;
        snprintf(key, sizeof(key), "http://a.test/%d", i);
        hv_store_op_t op = {key, strlen(key), &e};
        ASSERT_OK(hv_store_write(st, &op, 1));
    }
    hv_store_close(st);
    snprintf(path, sizeof(path), "%s/data.mdb", hv_test_tmppath("state"));
    size_t len;
    unsigned char *data = (unsigned char *)hv_test_read_file(path, &len);
    uint32_t page = (uint32_t)data[40] | (uint32_t)data[41] << 8;
    unsigned newer = data[144] < data[page + 144]; /* txnids below 256 here */
    uint64_t root = 0;
    memcpy(&root, data + newer * page + 128, 8);
    for (uint64_t p = 2; (p + 1) * page <= len; p++) {
        if (p != root && (data[p * page + 10] & 0x0f) == 0x02) {
            memset(data + p * page, 0, page);
            break;
        }
    }
    hv_test_write_file(path, data, len);
    free(data);
}

/* A lookup that LMDB fails sets the store aside for the rest of the run, said once and
 * counted: nothing more is looked up or stored, and every page is fetched. */
TEST_IMPL(recrawl_a_failed_lookup_sets_the_store_aside)
{
    fix_t f;
    int v, failed_at = -1;
    damaged_store(300);
    fix_open(&f, 0);
    for (int i = 0; i < 300; i++) {
        char url[64];
        snprintf(url, sizeof(url), "http://a.test/%d", i);
        hv_record_t *rec = prepared(&f, url, FP, &v);
        ASSERT_EQ(HV_RECRAWL_FETCH, v);
        if (failed_at < 0 && rec->state->prev.url == NULL)
            failed_at = i;
        if (failed_at >= 0)
            ASSERT_EQ(0, rec->state->conditional);
        answered_200(rec, url, "T", url, "\"e\"");
        hv_recrawl_parsed(f.rc, rec);
        hv_recrawl_commit(f.rc, hv_recrawl_op_new(f.rc, rec));
        hv_record_free(rec);
    }
    ASSERT_GE(failed_at, 0);
    hv_recrawl_stats_t st;
    hv_recrawl_stats(f.rc, &st);
    ASSERT_EQ(failed_at + 1, st.lookups); /* none after the failure */
    ASSERT_EQ(1, st.commit_errors);
    ASSERT_EQ(0, st.full);
    /* What waited for a commit when the lookup failed is dropped too. */
    uv_run(&f.loop, UV_RUN_DEFAULT);
    hv_recrawl_stats(f.rc, &st);
    ASSERT_EQ(0, st.stored);
    ASSERT_EQ(0, st.commits);
    ASSERT_EQ(300, st.not_stored);
    ASSERT_EQ(1, st.commit_errors);
    fix_close(&f);
}

/* 870 durable records in one commit that does not fit a 1 MiB store: what fits is stored,
 * the rest counted as not stored, and the store is full. */
TEST_IMPL(recrawl_a_commit_that_does_not_fit_stores_what_fits)
{
    enum { N = 870 };
    fix_t f;
    int v;
    char *title = hv_xmalloc(1501);
    memset(title, 'f', 1500);
    title[1500] = '\0';
    fix_open_bounded(&f, 0, 1 << 20);
    for (int i = 0; i < N; i++) {
        char url[64];
        snprintf(url, sizeof(url), "http://f.test/%d", i);
        hv_record_t *rec = prepared(&f, url, FP, &v);
        answered_200(rec, url, title, url, "\"e\"");
        hv_recrawl_parsed(f.rc, rec);
        hv_recrawl_commit(f.rc, hv_recrawl_op_new(f.rc, rec));
        hv_record_free(rec);
    }
    uv_run(&f.loop, UV_RUN_DEFAULT); /* one commit, after COMMIT_DELAY_MS */
    hv_recrawl_stats_t st;
    hv_recrawl_stats(f.rc, &st);
    ASSERT_GT(st.stored, 100);
    ASSERT_EQ(N, st.stored + st.not_stored);
    ASSERT_EQ(st.stored, st.entries);
    ASSERT_EQ(1, st.full);
    ASSERT_EQ(1, st.commit_errors);
    ASSERT_GE(st.commits, 1);
    /* A stored one answers its lookup. */
    hv_record_t *rec = prepared(&f, "http://f.test/0", FP, &v);
    ASSERT_EQ(1, rec->state->conditional);
    hv_record_free(rec);
    fix_close(&f);
    free(title);
}
