/*
 * test_bhost.c: the batch host on a real loop and engine, with inputs that need no network
 * (lines that are not URLs, lines a resume skips or fails as ParserCrashed). The step hook
 * records what the workers do, in order, and holds one step to show the loop keeps serving.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harvestd/bhost.h"
#include "harvestd/common.h"
#include "harvestd/config.h"
#include "harvestd/engine.h"
#include "fixtures.h"
#include "test.h"

/* ---- the fixture: a loop, an engine, a host, a spool-like directory ---- */

typedef struct {
    fx_daemon_t d;
    char out[512], active[512], done[512];
    int started, ended;
    hv_hosted_prep_t prep;
    int status;
    hv_bhost_step_t step;
    char detail[1300];
    uint64_t records, ok, failed, skipped, recovered;
} fx_t;

/* What the workers did, in order (the hook runs on them). */
static pthread_mutex_t steps_lock = PTHREAD_MUTEX_INITIALIZER;
static char steps[512];
static const char *hold_step;      /* this step sleeps HOLD_MS first */
static atomic_int holding;
#define HOLD_MS 300

static void record_step(const char *step, const char *path)
{
    (void)path;
    pthread_mutex_lock(&steps_lock);
    size_t n = strlen(steps);
    snprintf(steps + n, sizeof(steps) - n, "%s%s", n ? " " : "", step);
    pthread_mutex_unlock(&steps_lock);
    if (hold_step != NULL && strcmp(step, hold_step) == 0) {
        atomic_store(&holding, 1);
        usleep(HOLD_MS * 1000);
        atomic_store(&holding, 0);
    }
}

static void fx_init(fx_t *f)
{
    memset(f, 0, sizeof(*f));
    steps[0] = '\0';
    hold_step = NULL;
    fx_daemon_init(&f->d, NULL);
    hv_bhost__set_step_hook(f->d.host, record_step);
    snprintf(f->out, sizeof(f->out), "%s/out", hv_test_tmpdir());
    snprintf(f->active, sizeof(f->active), "%s/active", hv_test_tmpdir());
    snprintf(f->done, sizeof(f->done), "%s/done", hv_test_tmpdir());
    ASSERT_OK(mkdir(f->out, 0750));
    ASSERT_OK(mkdir(f->active, 0750));
    ASSERT_OK(mkdir(f->done, 0750));
}

static void fx_close(fx_t *f)
{
    fx_daemon_close(&f->d);
}

static void on_start(void *ud, hv_hosted_t *hb, const hv_hosted_prep_t *prep)
{
    fx_t *f = ud;
    ASSERT_NOT_NULL(hv_hosted_batch(hb));
    f->started++;
    f->prep = *prep;
}

static void on_end(void *ud, hv_hosted_t *hb, const hv_hosted_end_t *end)
{
    fx_t *f = ud;
    ASSERT_NULL(hv_hosted_batch(hb)); /* not running any more */
    f->ended++;
    f->status = end->status;
    f->step = end->step;
    snprintf(f->detail, sizeof(f->detail), "%s", end->detail);
    if (end->batch != NULL) {
        const hv_batch_stats_t *s = hv_batch_stats(end->batch);
        f->records = s->records;
        f->ok = s->ok;
        f->failed = s->failed;
        f->skipped = s->skipped;
        f->recovered = s->recovered;
    }
}

static const hv_hosted_cbs_t cbs = {on_start, NULL, on_end};

static const char *path_in(char *buf, size_t cap, const char *dir, const char *name)
{
    snprintf(buf, cap, "%s/%s", dir, name);
    return buf;
}

static int exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* A timer that counts its ticks while a step is held. */
typedef struct {
    uv_timer_t t;
    int ticks_while_held;
    fx_t *f;
} ticker_t;

static void on_tick(uv_timer_t *t)
{
    ticker_t *k = hv_container_of(t, ticker_t, t);
    if (atomic_load(&holding))
        k->ticks_while_held++;
    if (k->f->ended)
        uv_close((uv_handle_t *)t, NULL);
}

/* ---- tests ---- */

TEST_IMPL(bhost_completes_in_order_off_the_loop)
{
    fx_t f;
    char input[600], output[600], note[600], summary[600], done[600];
    static const char *const lines[] = {"not a url", "ftp://example.invalid/x"};
    int closed = 0;
    fx_init(&f);
    path_in(input, sizeof(input), f.active, "b.txt");
    path_in(output, sizeof(output), f.out, "b.txt.jsonl");
    path_in(note, sizeof(note), f.out, "b.txt.crashes");
    path_in(summary, sizeof(summary), f.out, "b.txt.summary.json");
    path_in(done, sizeof(done), f.done, "b.txt");
    hv_test_write_file(input, "not a url\nftp://example.invalid/x\n", 34);
    hv_test_write_file(note, "stale\n", 6); /* an older batch's: gone before anything runs */
    hold_step = "summary";

    hv_hosted_opts_t opts = {
        .output = HV_BHOST_NEW,
        .name = "b.txt",
        .output_path = output,
        .crash_note = note,
        .summary_path = summary,
        .input_path = input,
        .done_dir = f.done,
    };
    ticker_t k = {.f = &f};
    uv_timer_init(&f.d.loop, &k.t);
    uv_timer_start(&k.t, on_tick, 5, 5);
    hv_hosted_t *hb = hv_bhost_start(f.d.host, &opts, fx_lines_source(&f.d.loop, lines, 2, &closed), &cbs, &f);
    ASSERT_NOT_NULL(hb);
    ASSERT_NULL(hv_hosted_batch(hb)); /* preparing */
    ASSERT_EQ(1, hv_bhost_count(f.d.host));
    uv_run(&f.d.loop, UV_RUN_DEFAULT);

    ASSERT_EQ(1, f.started);
    ASSERT_EQ(1, f.ended);
    ASSERT_EQ(0, f.status);
    ASSERT_EQ(1, closed);
    ASSERT_EQ(2, f.records);
    ASSERT_EQ(2, f.failed);
    ASSERT_STR_EQ("unlink_stale_note unlink_note summary move", steps);
    /* The loop went on serving while the summary's step was held (a 5 ms timer, 300 ms). */
    ASSERT_GE(k.ticks_while_held, 20);
    ASSERT(!exists(note));
    ASSERT(!exists(input));
    ASSERT(exists(done));
    char *text = hv_test_read_file(summary, NULL);
    ASSERT_NOT_NULL(strstr(text, "\"batch\":\t\"b.txt\""));
    ASSERT_NOT_NULL(strstr(text, "\"failed\":\t2"));
    free(text);
    text = hv_test_read_file(output, NULL);
    ASSERT_NOT_NULL(strstr(text, "\"error_type\":\"InvalidUrl\""));
    ASSERT_NOT_NULL(strstr(text, "\"error_type\":\"UnsupportedScheme\""));
    free(text);
    fx_close(&f);
}

TEST_IMPL(bhost_resume_repairs_skips_and_fails_crashed_lines)
{
    fx_t f;
    char output[600], note[600], summary[600];
    static const char *const lines[] = {"http://ok.test/a", "http://crash.test/b", "not a url"};
    fx_init(&f);
    path_in(output, sizeof(output), f.out, "r.txt.jsonl");
    path_in(note, sizeof(note), f.out, "r.txt.crashes");
    path_in(summary, sizeof(summary), f.out, "r.txt.summary.json");
    static const char before[] = "{\"requested_url\":\"http://ok.test/a\",\"status\":\"ok\","
                                 "\"http_status\":200,\"bytes\":10}\n{\"requested_url\":\"torn";
    hv_test_write_file(output, before, sizeof(before) - 1);
    hv_test_write_file(note, "http://crash.test/b\n", 20);
    hv_hosted_opts_t opts = {
        .output = HV_BHOST_RESUME,
        .name = "r.txt",
        .output_path = output,
        .crash_note = note,
        .summary_path = summary,
    };
    hv_bhost_start(f.d.host, &opts, fx_lines_source(&f.d.loop, lines, 3, NULL), &cbs, &f);
    uv_run(&f.d.loop, UV_RUN_DEFAULT);

    ASSERT_EQ(0, f.status);
    ASSERT_EQ(1, f.prep.resumed);
    ASSERT_EQ(1, f.prep.repair.records);
    ASSERT_EQ(1, f.prep.repair.ok);
    ASSERT_EQ(strlen("{\"requested_url\":\"torn"), f.prep.repair.truncated);
    ASSERT_EQ(1, f.skipped);   /* the ok line */
    ASSERT_EQ(1, f.recovered); /* its record, counted in the batch's figures */
    ASSERT_EQ(3, f.records);   /* and ParserCrashed, InvalidUrl: nothing fetched */
    ASSERT_EQ(1, f.ok);
    ASSERT_EQ(2, f.failed);
    ASSERT_STR_EQ("repair read_note unlink_note summary", steps);
    ASSERT(!exists(note));
    /* The summary covers the whole output: the kept record's status and bytes too. */
    char *text = hv_test_read_file(summary, NULL);
    ASSERT_NOT_NULL(strstr(text, "\"records\":\t3,"));
    ASSERT_NOT_NULL(strstr(text, "\"ok\":\t1,"));
    ASSERT_NOT_NULL(strstr(text, "\"resumed\":\t1,"));
    ASSERT_NOT_NULL(strstr(text, "\"http_statuses\":\t{\n\t\t\"200\":\t1\n\t}"));
    ASSERT_NOT_NULL(strstr(text, "\"body_bytes_total\":\t10,"));
    ASSERT_NOT_NULL(strstr(text, "\"ok_body_bytes_mean\":\t10,"));
    free(text);
    text = hv_test_read_file(output, NULL);
    ASSERT(strncmp(text, before, strlen(before) - strlen("{\"requested_url\":\"torn")) == 0);
    ASSERT_NOT_NULL(strstr(text, "\"error_type\":\"ParserCrashed\""));
    ASSERT_NULL(strstr(text, "torn"));
    free(text);
    fx_close(&f);
}

TEST_IMPL(bhost_shared_output_is_created_and_appended)
{
    fx_t f;
    char output[600];
    static const char *const lines[] = {"not a url"};
    fx_init(&f);
    path_in(output, sizeof(output), f.out, "s.n.jsonl");
    hv_hosted_opts_t opts = {.output = HV_BHOST_SHARED, .name = "s", .output_path = output};
    for (int round = 0; round < 2; round++) {
        hv_bhost_start(f.d.host, &opts, fx_lines_source(&f.d.loop, lines, 1, NULL), &cbs, &f);
        uv_run(&f.d.loop, UV_RUN_DEFAULT);
        ASSERT_EQ(0, f.status);
    }
    ASSERT_STR_EQ("create create", steps);
    size_t len;
    char *text = hv_test_read_file(output, &len);
    char *second = strchr(text, '\n');
    ASSERT_NOT_NULL(second);
    ASSERT_NOT_NULL(strstr(second + 1, "InvalidUrl")); /* two records: appended */
    free(text);
    fx_close(&f);
}

TEST_IMPL(bhost_failures_name_their_step_and_file)
{
    fx_t f;
    char output[600], summary[600];
    static const char *const lines[] = {"not a url"};
    int closed = 0;
    fx_init(&f);

    /* Preparing: the shared output's directory is missing. */
    path_in(output, sizeof(output), f.out, "missing/s.jsonl");
    hv_hosted_opts_t opts = {.output = HV_BHOST_SHARED, .name = "s", .output_path = output};
    hv_bhost_start(f.d.host, &opts, fx_lines_source(&f.d.loop, lines, 1, &closed), &cbs, &f);
    uv_run(&f.d.loop, UV_RUN_DEFAULT);
    ASSERT_EQ(UV_ENOENT, f.status);
    ASSERT_EQ(HV_BHOST_STEP_PREPARE, f.step);
    ASSERT_EQ(0, f.started);
    ASSERT_EQ(1, closed); /* the source never ran, and is closed */
    ASSERT_NOT_NULL(strstr(f.detail, "creating "));
    ASSERT_NOT_NULL(strstr(f.detail, "missing/s.jsonl"));

    /* Opening: a new output that exists already. */
    path_in(output, sizeof(output), f.out, "taken.jsonl");
    hv_test_write_file(output, "", 0);
    opts = (hv_hosted_opts_t){.output = HV_BHOST_NEW, .name = "taken", .output_path = output};
    hv_bhost_start(f.d.host, &opts, fx_lines_source(&f.d.loop, lines, 1, &closed), &cbs, &f);
    uv_run(&f.d.loop, UV_RUN_DEFAULT);
    ASSERT_EQ(UV_EEXIST, f.status);
    ASSERT_EQ(HV_BHOST_STEP_OPEN, f.step);
    ASSERT_EQ(2, closed);

    /* Completing: the summary's directory is missing; the input stays where it is. */
    char input[600];
    path_in(input, sizeof(input), f.active, "c.txt");
    hv_test_write_file(input, "not a url\n", 10);
    path_in(output, sizeof(output), f.out, "c.txt.jsonl");
    path_in(summary, sizeof(summary), f.out, "gone/c.txt.summary.json");
    opts = (hv_hosted_opts_t){.output = HV_BHOST_NEW, .name = "c.txt", .output_path = output,
                              .summary_path = summary, .input_path = input,
                              .done_dir = f.done};
    hv_bhost_start(f.d.host, &opts, fx_lines_source(&f.d.loop, lines, 1, NULL), &cbs, &f);
    uv_run(&f.d.loop, UV_RUN_DEFAULT);
    ASSERT_EQ(UV_ENOENT, f.status);
    ASSERT_EQ(HV_BHOST_STEP_COMPLETE, f.step);
    ASSERT_NOT_NULL(strstr(f.detail, "writing "));
    ASSERT_NOT_NULL(strstr(f.detail, "gone/c.txt.summary.json"));
    ASSERT(exists(input));
    fx_close(&f);
}

TEST_IMPL(bhost_stopped_while_preparing_never_starts)
{
    fx_t f;
    char output[600];
    static const char *const lines[] = {"not a url"};
    int closed = 0;
    fx_init(&f);
    path_in(output, sizeof(output), f.out, "x.jsonl");
    hv_hosted_opts_t opts = {.output = HV_BHOST_NEW, .name = "x", .output_path = output};
    hv_bhost_start(f.d.host, &opts, fx_lines_source(&f.d.loop, lines, 1, &closed), &cbs, &f);
    hv_bhost_stop(f.d.host);
    uv_run(&f.d.loop, UV_RUN_DEFAULT);
    ASSERT_EQ(HV_ECANCELLED, f.status);
    ASSERT_EQ(HV_BHOST_STEP_PREPARE, f.step);
    ASSERT_EQ(0, f.started);
    ASSERT_EQ(1, closed);
    ASSERT(!exists(output));
    fx_close(&f);
}

TEST_IMPL(bhost_done_batch_only_removes_the_note_and_moves_the_input)
{
    fx_t f;
    char input[600], note[600], output[600], done[600];
    fx_init(&f);
    path_in(input, sizeof(input), f.active, "d.txt");
    path_in(note, sizeof(note), f.out, "d.txt.crashes");
    path_in(output, sizeof(output), f.out, "d.txt.jsonl");
    path_in(done, sizeof(done), f.done, "d.txt");
    hv_test_write_file(input, "x\n", 2);
    hv_test_write_file(done, "taken\n", 6); /* the move takes the next free name */
    hv_test_write_file(note, "x\n", 2);
    hv_hosted_opts_t opts = {.output = HV_BHOST_DONE, .name = "d.txt", .output_path = output,
                             .crash_note = note, .input_path = input, .done_dir = f.done};
    hv_bhost_start(f.d.host, &opts, NULL, &cbs, &f);
    uv_run(&f.d.loop, UV_RUN_DEFAULT);
    ASSERT_EQ(0, f.status);
    ASSERT_EQ(0, f.started);
    ASSERT_STR_EQ("unlink_note move", steps);
    ASSERT(!exists(note) && !exists(input));
    path_in(done, sizeof(done), f.done, "d.txt.1");
    ASSERT(exists(done));
    fx_close(&f);
}
