/*
 * test_spool.c: the spool on a real loop, engine and batch host: scanning, claiming under a
 * free name, locks, rejections, the bound on active batches, readiness. Inputs need no
 * network (lines that are not URLs become InvalidUrl records).
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixtures.h"
#include "harvestd/common.h"
#include "harvestd/spool.h"
#include "test.h"

typedef struct {
    fx_daemon_t d;
    char root[512];
    hv_spool_t *sp;
    int ready;
    int fatal;
    unsigned max_active_seen;
    uint64_t want_done;      /* stop the loop once this many batches completed (and rejected) */
    uint64_t want_rejected;
    uv_timer_t watchdog;
    int closed;
} fx_t;

static void check_done(fx_t *f)
{
    hv_spool_stats_t s;
    hv_spool_stats(f->sp, &s);
    f->max_active_seen = HV_MAX(f->max_active_seen, s.active);
    if (s.completed >= f->want_done && s.rejected >= f->want_rejected && s.active == 0)
        uv_stop(&f->d.loop);
}

static void on_fatal(void *ud, int err, const char *detail)
{
    fx_t *f = ud;
    (void)err, (void)detail;
    f->fatal++;
}

static void on_progress(void *ud)
{
    check_done(ud);
}

static void on_ready(void *ud)
{
    fx_t *f = ud;
    f->ready++;
}

static const hv_spool_cbs_t cbs = {on_fatal, on_progress, on_ready};

static void on_watchdog(uv_timer_t *t)
{
    (void)t;
    hv_test_fail(__FILE__, __LINE__, "the spool did not finish its batches within 10 s");
}

static const char *path(fx_t *f, const char *sub, const char *name)
{
    static char buf[4][1024];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, sizeof(buf[0]), "%s/%s%s%s", f->root, sub, name[0] ? "/" : "", name);
    return p;
}

static int exists(const char *p)
{
    struct stat st;
    return lstat(p, &st) == 0;
}

static void put(fx_t *f, const char *sub, const char *name, const char *text)
{
    hv_test_write_file(path(f, sub, name), text, strlen(text));
}

static void fx_open(fx_t *f, const char *max_active)
{
    char err[1200];
    memset(f, 0, sizeof(*f));
    snprintf(f->root, sizeof(f->root), "%s/spool", hv_test_tmpdir());
    ASSERT_OK(mkdir(f->root, 0750));
    const char *directives[] = {"spool_dir", f->root, "max_active_batches", max_active,
                                "rescan_interval", "100ms", NULL};
    fx_daemon_init(&f->d, directives);
    ASSERT_OK(hv_spool_open(&f->d.loop, &f->d.cfg, f->d.host, &cbs, f, &f->sp, err,
                            sizeof(err)));
    uv_timer_init(&f->d.loop, &f->watchdog);
}

/* Start, and run until `done` batches completed and `rejected` files were rejected. */
static void run(fx_t *f, uint64_t done, uint64_t rejected)
{
    char err[1200];
    f->want_done = done;
    f->want_rejected = rejected;
    if (f->ready == 0)
        ASSERT_OK(hv_spool_start(f->sp, err, sizeof(err)));
    uv_timer_start(&f->watchdog, on_watchdog, 10000, 0);
    uv_run(&f->d.loop, UV_RUN_DEFAULT);
    uv_timer_stop(&f->watchdog);
}

static void on_closed(void *ud)
{
    fx_t *f = ud;
    f->closed = 1;
}

/* The daemon's stop order, for what is left: sources, batches, then the rest. */
static void fx_close(fx_t *f)
{
    hv_spool_stop(f->sp);
    hv_bhost_stop(f->d.host);
    hv_engine_stop(f->d.engine, 1);
    while (hv_bhost_count(f->d.host) > 0)
        uv_run(&f->d.loop, UV_RUN_ONCE);
    hv_spool_close(f->sp, on_closed, f);
    uv_close((uv_handle_t *)&f->watchdog, NULL);
    uv_run(&f->d.loop, UV_RUN_DEFAULT);
    ASSERT_EQ(1, f->closed);
    fx_daemon_close(&f->d);
}

TEST_IMPL(spool_claims_runs_and_completes_every_file)
{
    fx_t f;
    fx_open(&f, "4");
    put(&f, "incoming", "a.txt", "not a url\nftp://x.invalid/\n");
    put(&f, "incoming", "b.txt", "# a comment\nnot a url either\n");
    put(&f, "incoming", ".hidden", "not a url\n");
    put(&f, "incoming", "c.txt.tmp", "not a url\n");
    run(&f, 2, 0);
    ASSERT_EQ(1, f.ready);
    ASSERT_EQ(0, f.fatal);
    for (const char *const *n = (const char *const[]){"a.txt", "b.txt", NULL}; *n; n++) {
        char name[64];
        ASSERT(exists(path(&f, "done", *n)));
        ASSERT(!exists(path(&f, "active", *n)));
        snprintf(name, sizeof(name), "%s.summary.json", *n);
        ASSERT(exists(path(&f, "out", name)));
    }
    /* Dotfiles and *.tmp are someone's files still being written: never taken. */
    ASSERT(exists(path(&f, "incoming", ".hidden")));
    ASSERT(exists(path(&f, "incoming", "c.txt.tmp")));
    char *text = hv_test_read_file(path(&f, "out", "a.txt.jsonl"), NULL);
    ASSERT_NOT_NULL(strstr(text, "\"error_type\":\"InvalidUrl\""));
    ASSERT_NOT_NULL(strstr(text, "\"error_type\":\"UnsupportedScheme\""));
    free(text);
    text = hv_test_read_file(path(&f, "out", "b.txt.summary.json"), NULL);
    ASSERT_NOT_NULL(strstr(text, "\"records\":\t1"));
    free(text);
    fx_close(&f);
}

TEST_IMPL(spool_claims_under_a_free_name)
{
    fx_t f;
    fx_open(&f, "4");
    /* x.txt's output is taken (a leftover), so is x.txt.1 in done/: it runs as x.txt.2. */
    put(&f, "out", "x.txt.jsonl", "{\"requested_url\":\"old\",\"status\":\"ok\"}\n");
    put(&f, "done", "x.txt.1", "old\n");
    put(&f, "incoming", "x.txt", "not a url\n");
    run(&f, 1, 0);
    ASSERT(exists(path(&f, "done", "x.txt.2")));
    ASSERT(exists(path(&f, "out", "x.txt.2.summary.json")));
    char *text = hv_test_read_file(path(&f, "out", "x.txt.jsonl"), NULL);
    ASSERT_STR_EQ("{\"requested_url\":\"old\",\"status\":\"ok\"}\n", text);
    free(text);
    fx_close(&f);
}

TEST_IMPL(spool_rejects_what_cannot_be_a_batch)
{
    fx_t f;
    fx_open(&f, "4");
    static const char binary[] = "http://a.test/\n\0\x01\x02";
    hv_test_write_file(path(&f, "incoming", "bin.txt"), binary, sizeof(binary) - 1);
    put(&f, "incoming", "rules.txt", "#! rules=nope\nnot a url\n");
    put(&f, "incoming", "good.txt", "not a url\n");
    run(&f, 1, 2);
    ASSERT_EQ(0, f.fatal);
    char *why = hv_test_read_file(path(&f, "rejected", "bin.txt.reason"), NULL);
    ASSERT_STR_EQ("binary file: NUL byte at offset 15\n", why);
    free(why);
    why = hv_test_read_file(path(&f, "rejected", "rules.txt.reason"), NULL);
    ASSERT_STR_EQ("unknown rule set 'nope' named on the first line\n", why);
    free(why);
    ASSERT(exists(path(&f, "rejected", "bin.txt")));
    ASSERT(exists(path(&f, "done", "good.txt")));
    fx_close(&f);
}

TEST_IMPL(spool_leaves_a_batch_another_daemon_holds)
{
    fx_t f;
    fx_open(&f, "4");
    /* A file in active/ that another daemon holds (its flock) is not resumed; an unheld one
     * is, before the start-up scan says it is ready. */
    put(&f, "active", "held.txt", "not a url\n");
    put(&f, "active", "left.txt", "not a url\n");
    int fd = open(path(&f, "active", "held.txt"), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_OK(flock(fd, LOCK_EX | LOCK_NB));
    run(&f, 1, 0);
    ASSERT(exists(path(&f, "done", "left.txt")));
    ASSERT(exists(path(&f, "active", "held.txt")));
    ASSERT(!exists(path(&f, "out", "held.txt.jsonl")));
    hv_spool_stats_t s;
    hv_spool_stats(f.sp, &s);
    ASSERT_EQ(1, s.resumed);
    /* Released: the next rescan resumes it. */
    close(fd);
    run(&f, 2, 0);
    ASSERT(exists(path(&f, "done", "held.txt")));
    fx_close(&f);
}

TEST_IMPL(spool_runs_at_most_max_active_batches)
{
    fx_t f;
    fx_open(&f, "2");
    static const char *const names[] = {"1.txt", "2.txt", "3.txt", "4.txt", "5.txt", "6.txt"};
    for (size_t i = 0; i < HV_ARRAY_SIZE(names); i++)
        put(&f, "incoming", names[i], "not a url\nnot a url\nnot a url\n");
    run(&f, HV_ARRAY_SIZE(names), 0);
    ASSERT_EQ(2, f.max_active_seen);
    for (size_t i = 0; i < HV_ARRAY_SIZE(names); i++)
        ASSERT(exists(path(&f, "done", names[i])));
    fx_close(&f);
}
