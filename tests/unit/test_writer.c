/*
 * test_writer.c: the JSONL writer on a real loop, writing into the test's temporary directory.
 *
 * Every test follows the writer's life: open, push, run the loop, finish, and check what the
 * file holds byte for byte. The callbacks only count and remember; the assertions are made
 * after the loop returns, so a failed one never leaves the writer half-way through a callback.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "harvestd/common.h"
#include "harvestd/record.h"
#include "harvestd/writer.h"
#include "test.h"

/* ---- fsync, counted */

/* This definition takes the place of libc's fsync() for the whole test binary, libuv's calls
 * included (they run on the threadpool), and forwards to the system call. It counts the calls
 * made on the file a test watches. */
static dev_t watched_dev;
static ino_t watched_ino;
static atomic_int fsyncs;

int fsync(int fd)
{
    struct stat st;
    if (watched_ino != 0 && fstat(fd, &st) == 0 && st.st_dev == watched_dev &&
        st.st_ino == watched_ino)
        atomic_fetch_add(&fsyncs, 1);
    return (int)syscall(SYS_fsync, fd);
}

static void watch_fsyncs(const char *path)
{
    struct stat st;
    ASSERT_OK(stat(path, &st));
    watched_dev = st.st_dev;
    watched_ino = st.st_ino;
    atomic_store(&fsyncs, 0);
}

/* ---- the fixture */

typedef struct {
    uv_loop_t loop;
    hv_writer_t *w;
    int drains;
    int errors;
    int last_error;
    int in_finish;   /* inside the hv_writer_finish() call */
    int done;        /* the finish callback ran */
    int done_inside; /* ... from inside hv_writer_finish() (it must not) */
    int done_status;
    uint64_t done_bytes; /* hv_writer_bytes() when the finish callback ran */
    int fsyncs_at_done;
    uint64_t first_drain_ms; /* loop time of the first drain */
    int full_at_first_drain;
    void (*drain_hook)(void *f);
    uint64_t durable;        /* the last count on_durable reported */
    int durable_calls;
    int durable_fsyncs;      /* fsyncs of the file made when it was last reported */
    int durable_shrank;      /* a report went backwards (it must not) */
    int durable_after_done;  /* a report came after the finish callback (it must not) */
} fixture_t;

static void on_drain(void *ud)
{
    fixture_t *f = ud;
    if (f->drains++ == 0) {
        f->first_drain_ms = uv_now(&f->loop);
        f->full_at_first_drain = hv_writer_full(f->w);
    }
    if (f->drain_hook != NULL)
        f->drain_hook(f);
}

static void on_error(void *ud, int err)
{
    fixture_t *f = ud;
    f->errors++;
    f->last_error = err;
}

static void on_done(void *ud, int status)
{
    fixture_t *f = ud;
    f->done++;
    f->done_inside = f->in_finish;
    f->done_status = status;
    f->done_bytes = hv_writer_bytes(f->w);
    f->fsyncs_at_done = atomic_load(&fsyncs);
    f->w = NULL; /* the writer frees itself after this returns */
}

static void on_durable(void *ud, uint64_t records)
{
    fixture_t *f = ud;
    if (records <= f->durable)
        f->durable_shrank = 1;
    if (f->done)
        f->durable_after_done = 1;
    f->durable = records;
    f->durable_calls++;
    f->durable_fsyncs = atomic_load(&fsyncs);
}

static const hv_writer_cbs_t cbs = {on_drain, on_error, on_durable};

static void fixture_init(fixture_t *f)
{
    memset(f, 0, sizeof(*f));
    ASSERT_OK(uv_loop_init(&f->loop));
}

static int fixture_open(fixture_t *f, const char *path, const hv_writer_opts_t *opts)
{
    return hv_writer_open(&f->loop, path, opts, &cbs, f, &f->w);
}

/* A writer with `opts` on "out.jsonl" in the test's directory; returns that path. */
static const char *fixture_start(fixture_t *f, hv_writer_opts_t opts)
{
    const char *path = hv_test_tmppath("out.jsonl");
    fixture_init(f);
    ASSERT_OK(fixture_open(f, path, &opts));
    ASSERT_NOT_NULL(f->w);
    return path;
}

/* Finish the writer, run the loop until it is gone, and check the status it finished with. */
static void fixture_finish(fixture_t *f, int want_status)
{
    f->in_finish = 1;
    hv_writer_finish(f->w, on_done);
    f->in_finish = 0;
    uv_run(&f->loop, UV_RUN_DEFAULT);
    ASSERT_EQ(1, f->done);
    ASSERT_EQ(0, f->done_inside);
    ASSERT_EQ(want_status, f->done_status);
}

static hv_record_t *ok_record(const char *url, const char *title)
{
    hv_record_t *r = hv_record_new(url, strlen(url));
    if (title != NULL)
        r->title = hv_xstrdup(title);
    return r;
}

static hv_record_t *failed_record(const char *url)
{
    hv_record_t *r = hv_record_new(url, strlen(url));
    r->http_status = 404;
    hv_record_fail(r, HV_STAGE_DOWNLOAD, HV_ET_HTTP_STATUS, HV_D_HTTP_STATUS, "404");
    return r;
}

static void assert_file_is(const char *path, const char *want)
{
    char *got = hv_test_read_file(path, NULL);
    ASSERT_STR_EQ(want, got);
    free(got);
}

#define LINE_A "{\"requested_url\":\"http://a.test/\",\"status\":\"ok\",\"title\":\"A\"}\n"
#define LINE_B                                                                                     \
    "{\"requested_url\":\"http://b.test/x\",\"status\":\"failed\",\"http_status\":404,"            \
    "\"stage\":\"download\",\"error_type\":\"HttpStatus\",\"error\":\"http_404\"}\n"
#define LINE_C "{\"requested_url\":\"http://c.test/\",\"status\":\"ok\"}\n"

/* ---- tests */

TEST_IMPL(writer_writes_one_json_line_per_record)
{
    fixture_t f;
    const char *path = fixture_start(&f, (hv_writer_opts_t){.flush_ms = 10});
    ASSERT_NOT_NULL(f.w);
    ASSERT_OK(hv_writer_push(f.w, ok_record("http://a.test/", "A")));
    ASSERT_OK(hv_writer_push(f.w, failed_record("http://b.test/x")));
    ASSERT_OK(hv_writer_push(f.w, ok_record("http://c.test/", NULL)));
    fixture_finish(&f, 0);
    ASSERT_EQ(0, f.errors);
    ASSERT_EQ(strlen(LINE_A LINE_B LINE_C), f.done_bytes);
    assert_file_is(path, LINE_A LINE_B LINE_C);
    ASSERT_LOOP_CLOSE(&f.loop);
}

TEST_IMPL(writer_never_reuses_an_existing_file)
{
    fixture_t f;
    const char *path = hv_test_tmppath("out.jsonl");
    hv_writer_opts_t opts = {.flush_ms = 10};

    fixture_init(&f);
    hv_test_write_file(path, "keep\n", 5);
    ASSERT_EQ(UV_EEXIST, fixture_open(&f, path, &opts));
    ASSERT_NULL(f.w);
    assert_file_is(path, "keep\n");
    /* Appending reopens; it never creates. */
    opts.append = 1;
    ASSERT_EQ(UV_ENOENT, fixture_open(&f, hv_test_tmppath("missing.jsonl"), &opts));
    ASSERT_NULL(f.w);
    ASSERT_EQ(UV_EISDIR, fixture_open(&f, hv_test_tmpdir(), &opts));
    ASSERT_LOOP_CLOSE(&f.loop);
}

TEST_IMPL(writer_append_mode_keeps_what_the_file_holds)
{
    fixture_t f;
    const char *path = hv_test_tmppath("out.jsonl");
    hv_writer_opts_t opts = {.append = 1, .flush_ms = 10};

    fixture_init(&f);
    hv_test_write_file(path, LINE_A, strlen(LINE_A));
    ASSERT_OK(fixture_open(&f, path, &opts));
    ASSERT_OK(hv_writer_push(f.w, ok_record("http://c.test/", NULL)));
    fixture_finish(&f, 0);
    ASSERT_EQ(strlen(LINE_C), f.done_bytes); /* what this writer wrote, not the file's size */
    assert_file_is(path, LINE_A LINE_C);
    ASSERT_LOOP_CLOSE(&f.loop);
}

/* Looks at the file while the writer's flush delay is still running. */
typedef struct {
    uv_timer_t timer;
    const char *path;
    fixture_t *f;
    int ran;
    size_t file_size;
    int drains;
} probe_t;

static void on_probe(uv_timer_t *t)
{
    probe_t *p = hv_container_of(t, probe_t, timer);
    struct stat st;
    p->ran = 1;
    p->file_size = stat(p->path, &st) == 0 ? (size_t)st.st_size : (size_t)-1;
    p->drains = p->f->drains;
    uv_close((uv_handle_t *)t, NULL);
}

TEST_IMPL(writer_flush_ms_batches_records_into_one_write)
{
    fixture_t f;
    probe_t probe;
    const char *path = fixture_start(&f, (hv_writer_opts_t){.flush_ms = 100});
    uv_update_time(&f.loop);
    uint64_t t0 = uv_now(&f.loop);
    ASSERT_OK(hv_writer_push(f.w, ok_record("http://a.test/", "A")));
    ASSERT_OK(hv_writer_push(f.w, failed_record("http://b.test/x")));
    ASSERT_OK(hv_writer_push(f.w, ok_record("http://c.test/", NULL)));
    memset(&probe, 0, sizeof(probe));
    probe.path = path;
    probe.f = &f;
    ASSERT_OK(uv_timer_init(&f.loop, &probe.timer));
    ASSERT_OK(uv_timer_start(&probe.timer, on_probe, 30, 0));
    uv_run(&f.loop, UV_RUN_DEFAULT);

    ASSERT_EQ(1, probe.ran);
    ASSERT_EQ(0, probe.file_size); /* at 30 ms the records still wait */
    ASSERT_EQ(0, probe.drains);
    ASSERT_EQ(1, f.drains); /* then one write carried all three */
    ASSERT_GE(f.first_drain_ms - t0, 100);
    assert_file_is(path, LINE_A LINE_B LINE_C);
    fixture_finish(&f, 0);
    ASSERT_LOOP_CLOSE(&f.loop);
}

TEST_IMPL(writer_flush_ms_zero_starts_each_write_at_once)
{
    fixture_t f;
    const char *path = fixture_start(&f, (hv_writer_opts_t){.flush_ms = 0});
    /* The first record's write is in flight when the second arrives: that one waits for it,
     * then goes out in a write of its own. */
    ASSERT_OK(hv_writer_push(f.w, ok_record("http://a.test/", "A")));
    ASSERT_OK(hv_writer_push(f.w, ok_record("http://c.test/", NULL)));
    uv_run(&f.loop, UV_RUN_DEFAULT);
    ASSERT_EQ(2, f.drains);
    assert_file_is(path, LINE_A LINE_C);
    fixture_finish(&f, 0);
    ASSERT_LOOP_CLOSE(&f.loop);
}

/* A record of about `title_len` bytes whose line is easy to rebuild: see
 * append_expected_line. */
static hv_record_t *big_record(int i, size_t title_len)
{
    char url[64];
    snprintf(url, sizeof(url), "http://big.test/%d", i);
    hv_record_t *r = hv_record_new(url, strlen(url));
    r->title = hv_xmalloc(title_len + 1);
    memset(r->title, 'a' + i % 26, title_len);
    r->title[title_len] = '\0';
    return r;
}

static void append_expected_line(hv_buf_t *out, int i, size_t title_len)
{
    char head[96];
    int n = snprintf(head, sizeof(head),
                     "{\"requested_url\":\"http://big.test/%d\",\"status\":\"ok\",\"title\":\"", i);
    ASSERT_OK(hv_buf_append(out, head, (size_t)n));
    char *title = hv_xmalloc(title_len);
    memset(title, 'a' + i % 26, title_len);
    ASSERT_OK(hv_buf_append(out, title, title_len));
    free(title);
    ASSERT_OK(hv_buf_append(out, "\"}\n", 3));
}

/* The file holds records 0..n-1 made by big_record, in order, and nothing else; returns its
 * size. */
static size_t assert_big_records(const char *path, int n, size_t title_len)
{
    hv_buf_t want;
    size_t len;
    hv_buf_init(&want, (size_t)1 << 30);
    for (int i = 0; i < n; i++)
        append_expected_line(&want, i, title_len);
    char *got = hv_test_read_file(path, &len);
    ASSERT_EQ(want.len, len);
    ASSERT_MEM_EQ(want.data, got, len);
    free(got);
    hv_buf_free(&want);
    return len;
}

TEST_IMPL(writer_a_full_batch_does_not_wait_for_flush_ms)
{
    fixture_t f;
    const size_t title_len = 8 * 1024;
    const int n = 10; /* over the 64 KiB that start a write without waiting */

    const char *path = fixture_start(&f, (hv_writer_opts_t){.flush_ms = 60000});
    uv_update_time(&f.loop);
    uint64_t t0 = uv_now(&f.loop);
    for (int i = 0; i < n; i++)
        ASSERT_OK(hv_writer_push(f.w, big_record(i, title_len)));
    uv_run(&f.loop, UV_RUN_DEFAULT);
    ASSERT_GE(f.drains, 1);
    ASSERT_LT(f.first_drain_ms - t0, 10000);
    fixture_finish(&f, 0);
    assert_big_records(path, n, title_len);
    ASSERT_LOOP_CLOSE(&f.loop);
}

TEST_IMPL(writer_is_full_until_a_write_drains_it)
{
    fixture_t f;
    const size_t title_len = 64 * 1024;
    int n = 0;

    const char *path = fixture_start(&f, (hv_writer_opts_t){.flush_ms = 60000});
    ASSERT_EQ(0, hv_writer_full(f.w));
    /* Without the loop running, the first write stays in flight and the rest piles up. */
    while (!hv_writer_full(f.w)) {
        ASSERT_LT(n, 64); /* 4 MiB of records and still not full */
        ASSERT_OK(hv_writer_push(f.w, big_record(n++, title_len)));
    }
    ASSERT_GE(n, 16); /* full means about 1 MiB waiting, not one record */
    /* Full is advice: the writer still takes a record. */
    ASSERT_OK(hv_writer_push(f.w, big_record(n++, title_len)));
    uv_run(&f.loop, UV_RUN_DEFAULT);
    ASSERT_GE(f.drains, 1);
    ASSERT_EQ(0, f.full_at_first_drain);
    ASSERT_EQ(0, hv_writer_full(f.w));
    fixture_finish(&f, 0);
    ASSERT_EQ(0, f.errors);
    ASSERT_EQ(assert_big_records(path, n, title_len), f.done_bytes);
    ASSERT_LOOP_CLOSE(&f.loop);
}

TEST_IMPL(writer_finish_writes_what_is_pending_and_fsyncs)
{
    fixture_t f;
    const char *path = fixture_start(&f, (hv_writer_opts_t){.flush_ms = 60000});
    watch_fsyncs(path);
    ASSERT_OK(hv_writer_push(f.w, ok_record("http://a.test/", "A")));
    /* Finishing does not wait for the minute-long flush delay. */
    uv_update_time(&f.loop);
    uint64_t t0 = uv_now(&f.loop);
    fixture_finish(&f, 0);
    ASSERT_LT(uv_now(&f.loop) - t0, 10000);
    ASSERT_EQ(1, f.drains);
    ASSERT_GE(f.fsyncs_at_done, 1);
    assert_file_is(path, LINE_A);
    ASSERT_LOOP_CLOSE(&f.loop);
}

TEST_IMPL(writer_finish_with_nothing_written)
{
    fixture_t f;
    const char *path = fixture_start(&f, (hv_writer_opts_t){.flush_ms = 10});
    fixture_finish(&f, 0); /* its callback still comes from the loop */
    ASSERT_EQ(0, f.done_bytes);
    ASSERT_EQ(0, f.drains);
    assert_file_is(path, "");
    ASSERT_LOOP_CLOSE(&f.loop);
}

/* Push one more record from each of the first two drains, so that each goes out alone. */
static void push_next(void *ud)
{
    fixture_t *f = ud;
    if (f->drains <= 2)
        ASSERT_OK(hv_writer_push(f->w, ok_record("http://c.test/", NULL)));
}

TEST_IMPL(writer_fsync_always_syncs_every_write)
{
    fixture_t f;
    const char *path = fixture_start(&f, (hv_writer_opts_t){.flush_ms = 0, .fsync_always = 1});
    watch_fsyncs(path);
    f.drain_hook = push_next;
    ASSERT_OK(hv_writer_push(f.w, ok_record("http://c.test/", NULL)));
    uv_run(&f.loop, UV_RUN_DEFAULT);
    ASSERT_GE(f.drains, 3); /* (a drain follows each write and each fsync) */
    fixture_finish(&f, 0);
    ASSERT_GE(f.fsyncs_at_done, 3);
    assert_file_is(path, LINE_C LINE_C LINE_C);
    ASSERT_LOOP_CLOSE(&f.loop);
}

TEST_IMPL(writer_error_is_reported_once_and_sticks)
{
    fixture_t f;
    hv_writer_opts_t opts = {.append = 1, .flush_ms = 0};

    fixture_init(&f);
    /* /dev/full accepts the open and fails every write with ENOSPC. */
    int rc = fixture_open(&f, "/dev/full", &opts);
    if (rc == UV_ENOENT || rc == UV_EACCES) {
        ASSERT_LOOP_CLOSE(&f.loop);
        RETURN_SKIP("no writable /dev/full");
    }
    ASSERT_OK(rc);
    ASSERT_OK(hv_writer_push(f.w, ok_record("http://a.test/", "A")));
    uv_run(&f.loop, UV_RUN_DEFAULT);
    ASSERT_EQ(1, f.errors);
    ASSERT_EQ(UV_ENOSPC, f.last_error);
    ASSERT_EQ(0, f.drains);
    /* From now on every push is refused with the same error (and the record freed), and
     * on_error is not called again. */
    ASSERT_EQ(UV_ENOSPC, hv_writer_push(f.w, ok_record("http://c.test/", NULL)));
    ASSERT_EQ(UV_ENOSPC, hv_writer_push(f.w, failed_record("http://b.test/x")));
    uv_run(&f.loop, UV_RUN_DEFAULT);
    fixture_finish(&f, UV_ENOSPC);
    ASSERT_EQ(1, f.errors);
    ASSERT_EQ(0, f.done_bytes);
    ASSERT_LOOP_CLOSE(&f.loop);
}

/* ---- durability: what on_durable reports, under each policy */

TEST_IMPL(writer_durable_after_each_fsync_with_fsync_always)
{
    fixture_t f;
    const char *path = fixture_start(&f, (hv_writer_opts_t){.flush_ms = 0, .fsync_always = 1});
    watch_fsyncs(path);
    f.drain_hook = push_next;
    ASSERT_OK(hv_writer_push(f.w, ok_record("http://c.test/", NULL)));
    uv_run(&f.loop, UV_RUN_DEFAULT);
    /* Three writes, each reported only once its own fsync had been made. */
    ASSERT_EQ(3, f.durable);
    ASSERT_GE(f.durable_calls, 3);
    ASSERT_GE(f.durable_fsyncs, 3);
    ASSERT_EQ(0, f.durable_shrank);
    fixture_finish(&f, 0);
    ASSERT_EQ(3, f.durable);
    ASSERT_EQ(0, f.durable_after_done);
    ASSERT_LOOP_CLOSE(&f.loop);
}

/* With an hour's interval nothing is durable before the finish... */
TEST_IMPL(writer_durable_waits_for_the_interval_or_the_finish)
{
    fixture_t f;
    const char *path =
        fixture_start(&f, (hv_writer_opts_t){.flush_ms = 0, .fsync_interval_ms = 3600000});
    watch_fsyncs(path);
    ASSERT_OK(hv_writer_push(f.w, ok_record("http://a.test/", "A")));
    ASSERT_OK(hv_writer_push(f.w, ok_record("http://c.test/", NULL)));
    /* Run until the write is done; the hour-long fsync timer keeps the loop alive. */
    while (f.drains == 0)
        uv_run(&f.loop, UV_RUN_ONCE);
    ASSERT_EQ(0, f.durable_calls);
    ASSERT_EQ(2, hv_writer_unsynced(f.w));
    ASSERT_EQ(0, atomic_load(&fsyncs));
    fixture_finish(&f, 0);
    ASSERT_EQ(2, f.durable);
    ASSERT_EQ(1, f.durable_calls);
    ASSERT_GE(f.durable_fsyncs, 1); /* reported after the finish's fsync */
    ASSERT_EQ(0, f.durable_after_done);
    ASSERT_LOOP_CLOSE(&f.loop);
}

/* ... unless someone waits for it: hv_writer_sync_soon() syncs at once. */
static void sync_soon_once(void *ud)
{
    fixture_t *f = ud;
    if (f->drains == 1)
        hv_writer_sync_soon(f->w);
}

TEST_IMPL(writer_sync_soon_makes_written_records_durable_without_the_interval)
{
    fixture_t f;
    const char *path =
        fixture_start(&f, (hv_writer_opts_t){.flush_ms = 0, .fsync_interval_ms = 3600000});
    watch_fsyncs(path);
    f.drain_hook = sync_soon_once;
    ASSERT_OK(hv_writer_push(f.w, ok_record("http://a.test/", "A")));
    ASSERT_OK(hv_writer_push(f.w, ok_record("http://c.test/", NULL)));
    /* What is written and pending is synced (the first record is being written alone), then
     * reported. */
    hv_writer_sync_soon(f.w);
    while (f.durable < 2)
        uv_run(&f.loop, UV_RUN_ONCE);
    ASSERT_GE(f.durable_fsyncs, 1);
    ASSERT_EQ(0, f.durable_shrank);
    ASSERT_EQ(0, hv_writer_unsynced(f.w));
    /* A third record, after the report: the hour's interval again holds it. */
    ASSERT_OK(hv_writer_push(f.w, ok_record("http://c.test/", NULL)));
    while (f.drains < 3)
        uv_run(&f.loop, UV_RUN_ONCE);
    ASSERT_EQ(2, f.durable);
    ASSERT_EQ(1, hv_writer_unsynced(f.w));
    fixture_finish(&f, 0);
    ASSERT_EQ(3, f.durable);
    assert_file_is(path, LINE_A LINE_C LINE_C);
    ASSERT_LOOP_CLOSE(&f.loop);
}

/* A policy that never syncs: durable as soon as the kernel has it. */
TEST_IMPL(writer_durable_on_write_when_the_policy_never_syncs)
{
    fixture_t f;
    const char *path = fixture_start(&f, (hv_writer_opts_t){.flush_ms = 0});
    watch_fsyncs(path);
    ASSERT_OK(hv_writer_push(f.w, ok_record("http://a.test/", "A")));
    while (f.drains == 0)
        uv_run(&f.loop, UV_RUN_ONCE);
    ASSERT_EQ(1, f.durable);
    ASSERT_EQ(0, f.durable_fsyncs);
    fixture_finish(&f, 0);
    ASSERT_EQ(1, f.durable);
    ASSERT_LOOP_CLOSE(&f.loop);
}

/* Eager: no flush delay and an fsync after each write, whatever the interval says. */
TEST_IMPL(writer_eager_writes_and_syncs_each_record_at_once)
{
    fixture_t f;
    const char *path =
        fixture_start(&f, (hv_writer_opts_t){.flush_ms = 60000, .fsync_interval_ms = 3600000});
    watch_fsyncs(path);
    hv_writer_set_eager(f.w, 1);
    ASSERT_OK(hv_writer_push(f.w, ok_record("http://a.test/", "A")));
    while (f.durable < 1)
        uv_run(&f.loop, UV_RUN_ONCE);
    ASSERT_EQ(1, atomic_load(&fsyncs));
    ASSERT_OK(hv_writer_push(f.w, ok_record("http://c.test/", NULL)));
    while (f.durable < 2)
        uv_run(&f.loop, UV_RUN_ONCE);
    ASSERT_EQ(2, atomic_load(&fsyncs));
    /* Back to the minute's flush delay: the next record waits. */
    hv_writer_set_eager(f.w, 0);
    ASSERT_OK(hv_writer_push(f.w, ok_record("http://c.test/", NULL)));
    uv_run(&f.loop, UV_RUN_NOWAIT);
    ASSERT_EQ(0, hv_writer_bytes(f.w) > strlen(LINE_A LINE_C) ? 1 : 0);
    fixture_finish(&f, 0);
    ASSERT_EQ(3, f.durable);
    assert_file_is(path, LINE_A LINE_C LINE_C);
    ASSERT_LOOP_CLOSE(&f.loop);
}

/* Asking for an early fsync while the writer finishes is a no-op: the finish's own fsync
 * covers everything (a second fsync on its request corrupted it, and `done` ran twice). */
static void sync_soon_always(void *ud)
{
    fixture_t *f = ud;
    if (f->w != NULL)
        hv_writer_sync_soon(f->w);
}

TEST_IMPL(writer_sync_soon_while_finishing_does_nothing)
{
    fixture_t f;
    const char *path =
        fixture_start(&f, (hv_writer_opts_t){.flush_ms = 0, .fsync_interval_ms = 3600000});
    watch_fsyncs(path);
    ASSERT_OK(hv_writer_push(f.w, ok_record("http://a.test/", "A")));
    while (f.drains == 0)
        uv_run(&f.loop, UV_RUN_ONCE); /* written, dirty, not synced */
    f.drain_hook = sync_soon_always;
    f.in_finish = 1;
    hv_writer_finish(f.w, on_done);
    f.in_finish = 0;
    hv_writer_sync_soon(f.w);
    uv_run(&f.loop, UV_RUN_ONCE);
    if (f.w != NULL)
        hv_writer_sync_soon(f.w); /* the finish's fsync is in flight now */
    uv_run(&f.loop, UV_RUN_DEFAULT);
    ASSERT_EQ(1, f.done);
    ASSERT_EQ(0, f.done_status);
    ASSERT_EQ(1, atomic_load(&fsyncs));
    ASSERT_EQ(1, f.durable);
    assert_file_is(path, LINE_A);
    ASSERT_LOOP_CLOSE(&f.loop);
}
