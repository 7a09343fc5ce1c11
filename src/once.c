/* once.c: one URL list as one batch, its progress line and its summary (see once.h). */
#include "harvestd/once.h"

#include <assert.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harvestd/batch.h"
#include "harvestd/common.h"
#include "harvestd/handles.h"
#include "harvestd/log.h"
#include "harvestd/reader.h"

/* Exit statuses (as main.c documents them). */
enum { EXIT_OK = 0, EXIT_INTERNAL = 1, EXIT_USAGE = 2, EXIT_INTERRUPTED = 3 };

#define PROGRESS_MS 250

struct hv_once_s {
    hv_engine_t *e;
    const hv_config_t *cfg;
    hv_batch_t *batch;
    uv_timer_t progress_timer;
    hv_handles_t handles;  /* the timer: the runner is freed when it has closed */
    int progress;          /* the line is drawn */
    int progress_shown;    /* it is on the terminal now */
    int freed;
    void (*done)(void *ud, int exit_code);
    void *ud;
};

/* ---- the progress line ---- */

static void on_progress(uv_timer_t *t)
{
    hv_once_t *o = t->data;
    if (o->batch == NULL)
        return;
    hv_batch_progress_t p;
    char eta[32];
    hv_batch_progress(o->batch, uv_now(hv_engine_loop(o->e)), &p);
    hv_batch_format_eta(eta, sizeof(eta), p.eta_s);
    /* The total: exact once the input is read; before, estimated from the share of the file
     * read ("~"), or, from a pipe, the lines read so far ("+"). */
    fprintf(stderr, "\r\033[K%" PRIu64 "/%s%" PRIu64 "%s  ok %" PRIu64 "  failed %" PRIu64
                    "  %.0f pages/s  ETA %s",
            p.done, p.total_exact || p.lines_total == 0 ? "" : "~",
            p.lines_total > 0 ? p.lines_total : p.lines_read,
            p.total_exact || p.lines_total > 0 ? "" : "+", p.ok, p.failed, p.pages_per_s, eta);
    fflush(stderr);
    o->progress_shown = 1;
}

/* Log lines must not land at the end of the progress line: clear it first (the next tick
 * draws it again). */
static void progress_clear(void *ud)
{
    hv_once_t *o = ud;
    if (o->progress_shown) {
        fprintf(stderr, "\r\033[K");
        fflush(stderr);
        o->progress_shown = 0;
    }
}

static void progress_stop(hv_once_t *o)
{
    if (!o->progress)
        return;
    o->progress = 0;
    uv_timer_stop(&o->progress_timer);
    progress_clear(o);
    hv_log_set_before(NULL, NULL);
}

/* ---- the batch ---- */

/* The rule set the input names on its first line (see hv_reader_rules_name); 0 for none or
 * standard input. */
static int rules_named(const char *path, char *name, size_t cap)
{
    if (strcmp(path, "-") == 0)
        return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    int named = hv_reader_rules_name(fd, name, cap);
    close(fd);
    return named;
}

static void on_batch_done(void *ud, hv_batch_t *b, int status, const char *detail)
{
    hv_once_t *o = ud;
    char line[4096], engine_stats[1024];
    int code;

    progress_stop(o);
    /* The summary counts what reached the output: after an internal failure it would count
     * records that never did, so there is none then (as in the daemon). */
    if (status == 0 || status == HV_ECANCELLED) {
        hv_engine_stats_t st;
        hv_engine_stats(o->e, &st);
        hv_batch_format_stats(b, uv_now(hv_engine_loop(o->e)), line, sizeof(line));
        hv_engine_format_stats(engine_stats, sizeof(engine_stats), &st);
        fprintf(stderr, "harvestd: summary %s%s\n", line, engine_stats);
    }
    if (status == 0) {
        code = EXIT_OK;
    } else if (status == HV_ECANCELLED) {
        fprintf(stderr, "harvestd: interrupted: %s is incomplete\n", o->cfg->output_path);
        code = EXIT_INTERRUPTED;
    } else {
        fprintf(stderr, "harvestd: error: %s failed: %s (%s); the output is incomplete\n",
                detail, hv_err_name(status), hv_strerror(status));
        code = EXIT_INTERNAL;
    }
    hv_batch_free(b);
    o->batch = NULL;
    o->done(o->ud, code);
}

static void on_handles_closed(hv_handles_t *hs)
{
    free(hv_container_of(hs, hv_once_t, handles));
}

int hv_once_start(hv_engine_t *e, int progress, void (*done)(void *ud, int exit_code), void *ud,
                  hv_once_t **out)
{
    const hv_config_t *cfg = hv_engine_config(e);
    uv_loop_t *loop = hv_engine_loop(e);
    hv_source_t *src = NULL;
    *out = NULL;
    int rc = hv_reader_open(loop, cfg->input_path, &src);
    if (rc != 0) {
        fprintf(stderr, "harvestd: cannot open input %s: %s\n", cfg->input_path, hv_strerror(rc));
        return EXIT_USAGE;
    }
    hv_once_t *o = hv_xcalloc(1, sizeof(*o));
    o->e = e;
    o->cfg = cfg;
    o->done = done;
    o->ud = ud;
    /* Rules given on the command line (--extract, --rules) win over the set the file names on
     * its first line (as a spool file does), which wins over the configuration's default. */
    const hv_ruleset_t *rules = hv_config_ruleset(cfg, "");
    char named[128];
    if (hv_ruleset_empty(rules) && !hv_config_from_cli(cfg, "default_rules") &&
        rules_named(cfg->input_path, named, sizeof(named))) {
        rules = hv_config_ruleset(cfg, named);
        if (rules == NULL) {
            fprintf(stderr, "harvestd: %s:1: unknown rule set '%s' (no [rules \"%s\"] in the "
                            "configuration)\n", cfg->input_path, named, named);
            hv_source_close(src);
            free(o);
            return EXIT_USAGE;
        }
    }
    if (hv_ruleset_empty(rules))
        rules = hv_config_ruleset(cfg, cfg->default_rules);
    hv_batch_opts_t opts = {
        .name = cfg->input_path,
        .output_path = cfg->output_path,
        .fsync = HV_FSYNC_NEVER, /* one fsync at the end is enough for --once */
        .rules = rules,
        .crash_note = NULL, /* nothing resumes a --once run */
    };
    rc = hv_batch_new(e, &opts, src, on_batch_done, o, &o->batch);
    if (rc != 0) {
        if (rc == UV_EEXIST)
            fprintf(stderr, "harvestd: output %s already exists; refusing to append to it\n",
                    cfg->output_path);
        else
            fprintf(stderr, "harvestd: cannot create output %s: %s\n", cfg->output_path,
                    hv_strerror(rc));
        hv_source_close(src);
        free(o);
        return EXIT_USAGE;
    }
    hv_handles_init(&o->handles, on_handles_closed);
    uv_timer_init(loop, &o->progress_timer);
    o->progress_timer.data = o;
    hv_handles_own(&o->handles, (uv_handle_t *)&o->progress_timer);
    /* Records written to the terminal the line is drawn on would be glued to it. */
    int records_on_tty = strcmp(cfg->output_path, "-") == 0 && uv_guess_handle(1) == UV_TTY;
    if (progress < 0)
        progress = uv_guess_handle(2) == UV_TTY && !records_on_tty;
    else if (progress == 1 && records_on_tty)
        progress = 0;
    if (progress == 1) {
        o->progress = 1;
        uv_timer_start(&o->progress_timer, on_progress, PROGRESS_MS, PROGRESS_MS);
        hv_log_set_before(progress_clear, o);
    }
    HV_LOG(HV_LOG_INFO,
           "event=start mode=once version=%s input=%s output=%s concurrency=%u per_host=%u "
           "parse_jobs=%u address_guard=%s allowed_ranges=%u",
           HV_VERSION, cfg->input_path, cfg->output_path, cfg->concurrency, cfg->per_host,
           cfg->parse_jobs, cfg->allow_private_addresses ? "off" : "on",
           cfg->allow_addresses.count);
    *out = o;
    return EXIT_OK;
}

void hv_once_free(hv_once_t *o)
{
    if (o == NULL)
        return;
    assert(o->batch == NULL); /* freed only after its batch ended */
    progress_stop(o);
    hv_handles_close_all(&o->handles);
}
