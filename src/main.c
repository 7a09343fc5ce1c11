/*
 * main.c: command line, the loop, signals and exit status.
 *
 * Exit status: 0 every input line has its record; 1 internal failure (the output is
 * incomplete); 2 usage error; 3 interrupted by SIGINT/SIGTERM after a graceful drain.
 */
#include <assert.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "harvestd/common.h"
#include "harvestd/config.h"
#include "harvestd/log.h"
#include "harvestd/batch.h"
#include "harvestd/engine.h"
#include "harvestd/reader.h"
#include "harvestd/tls.h"

enum { EXIT_OK = 0, EXIT_INTERNAL = 1, EXIT_USAGE = 2, EXIT_INTERRUPTED = 3 };

typedef struct {
    uv_loop_t loop;
    hv_config_t cfg;
    hv_engine_t *engine;
    hv_batch_t *batch;
    hv_tls_ctx_t *tls;
    uv_signal_t sigint;
    uv_signal_t sigterm;
    int signals;
    int exit_code;
} app_t;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: harvestd --once FILE -o OUTPUT [options]\n"
            "\n"
            "Fetch every URL listed in FILE (one per line, '-' for standard input) and write one\n"
            "JSON record per URL to OUTPUT (created; must not exist; '-' for standard output).\n"
            "\n"
            "  --once FILE            the URL list\n"
            "  -o, --output FILE      the JSONL output\n"
            "  --insecure             do not verify TLS certificates (prints a warning)\n"
            "  -v                     more logging (-vv for debug); -q for warnings only\n"
            "  --help, --version\n"
            "\n"
            "Tunables (--name VALUE or --name=VALUE; sizes take k/m/g, durations ms/s/m/h):\n");
    hv_config_print_help(out);
    fprintf(out, "\nExit status: 0 done, 1 internal failure, 2 usage error, 3 interrupted.\n");
}

static int usage_error(const char *msg, const char *arg)
{
    fprintf(stderr, "harvestd: %s%s%s\n", msg, arg ? arg : "", "\nTry 'harvestd --help'.");
    return EXIT_USAGE;
}

static int parse_args(app_t *app, int argc, char **argv)
{
    hv_config_t *cfg = &app->cfg;
    char err[512];

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(EXIT_OK);
        }
        if (strcmp(a, "--version") == 0) {
            printf("harvestd %s\n", HV_VERSION);
            exit(EXIT_OK);
        }
        if (strcmp(a, "-v") == 0 || strcmp(a, "-vv") == 0 || strcmp(a, "-q") == 0) {
            cfg->log_level = a[1] == 'q' ? HV_LOG_WARNING : a[2] ? HV_LOG_DEBUG : HV_LOG_INFO;
            continue;
        }
        if (strncmp(a, "--", 2) != 0 && strcmp(a, "-o") != 0)
            return usage_error("unexpected argument: ", a);

        /* --name=value or --name value */
        char name[64];
        const char *value = NULL;
        const char *eq = strchr(a, '=');
        const char *n = a[1] == '-' ? a + 2 : a + 1;
        size_t nlen = eq ? (size_t)(eq - n) : strlen(n);
        if (nlen == 0 || nlen >= sizeof(name))
            return usage_error("unknown option: ", a);
        memcpy(name, n, nlen);
        name[nlen] = '\0';
        if (eq != NULL) {
            value = eq + 1;
        } else if (hv_config_is_flag(name)) {
            value = "yes";
        } else {
            if (i + 1 >= argc)
                return usage_error("missing value for ", a);
            value = argv[++i];
        }
        if (strcmp(name, "once") == 0) {
            cfg->input_path = value;
        } else if (strcmp(name, "o") == 0 || strcmp(name, "output") == 0) {
            cfg->output_path = value;
        } else {
            int rc = hv_config_set(cfg, name, value, err, sizeof(err));
            if (rc == UV_ENOENT)
                return usage_error("unknown option: ", a);
            if (rc != 0)
                return usage_error(err, NULL);
        }
    }
    if (cfg->input_path == NULL)
        return usage_error("no input: give --once FILE", NULL);
    if (cfg->output_path == NULL)
        return usage_error("no output: give -o FILE (or -o - for standard output)", NULL);
    if (hv_config_finish(cfg, err, sizeof(err)) != 0)
        return usage_error(err, NULL);
    return EXIT_OK;
}

static void close_walk_cb(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h)) {
        HV_LOG(HV_LOG_WARNING, "event=leftover_handle type=%s", uv_handle_type_name(h->type));
        uv_close(h, NULL);
    }
}

static void on_engine_closed(void *ud)
{
    app_t *app = ud;
    app->engine = NULL;
    uv_close((uv_handle_t *)&app->sigint, NULL);
    uv_close((uv_handle_t *)&app->sigterm, NULL);
}

static void on_done(void *ud, hv_batch_t *b, int status, const char *detail)
{
    app_t *app = ud;
    char line[4096], engine_stats[1024];

    hv_batch_format_stats(b, uv_now(&app->loop), line, sizeof(line));
    hv_engine_format_stats(app->engine, engine_stats, sizeof(engine_stats));
    fprintf(stderr, "harvestd: summary %s%s\n", line, engine_stats);
    if (status == 0) {
        app->exit_code = EXIT_OK;
    } else if (status == HV_ECANCELLED) {
        fprintf(stderr, "harvestd: interrupted: %s is incomplete\n", app->cfg.output_path);
        app->exit_code = EXIT_INTERRUPTED;
    } else {
        fprintf(stderr, "harvestd: error: %s failed: %s (%s); the output is incomplete\n",
                detail, hv_err_name(status), hv_strerror(status));
        app->exit_code = EXIT_INTERNAL;
    }
    hv_batch_free(b);
    app->batch = NULL;
    hv_engine_close(app->engine, on_engine_closed, app);
}

static void on_signal(uv_signal_t *h, int signum)
{
    app_t *app = h->data;
    app->signals++;
    HV_LOG(HV_LOG_NOTICE, "event=signal signal=%s action=%s", signum == SIGINT ? "INT" : "TERM",
           app->signals == 1 ? "drain" : "stop");
    if (app->engine != NULL)
        hv_engine_stop(app->engine, app->signals > 1);
}

/* The threadpool is shared by parses, file I/O and DNS lookups; it must be larger than the
 * parse limit or lookups would queue behind parses. Set before the first request. */
static void size_threadpool(unsigned parse_jobs)
{
    if (getenv("UV_THREADPOOL_SIZE") != NULL)
        return;
    char n[16];
    snprintf(n, sizeof(n), "%u", HV_MIN(parse_jobs + 4, 1024u));
    setenv("UV_THREADPOOL_SIZE", n, 1);
}

int main(int argc, char **argv)
{
    app_t app;
    hv_source_t *src = NULL;
    int rc;

    memset(&app, 0, sizeof(app));
    hv_config_defaults(&app.cfg);
    rc = parse_args(&app, argc, argv);
    if (rc != EXIT_OK)
        return rc;
    hv_log_level = app.cfg.log_level;
    size_threadpool(app.cfg.parse_jobs);
    /* A reader that went away must surface as a write error (EPIPE), not kill us. */
    signal(SIGPIPE, SIG_IGN);

    char err[512];
    rc = hv_tls_ctx_new(app.cfg.ca_file[0] ? app.cfg.ca_file : NULL, app.cfg.insecure, &app.tls,
                        err, sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "harvestd: %s\n", err);
        return EXIT_USAGE;
    }
    if (app.cfg.insecure)
        fprintf(stderr, "harvestd: warning: --insecure: TLS certificates are NOT verified; "
                        "any server can impersonate any site\n");

    uv_loop_init(&app.loop);
    rc = hv_reader_open(&app.loop, app.cfg.input_path, &src);
    if (rc != 0) {
        fprintf(stderr, "harvestd: cannot open input %s: %s\n", app.cfg.input_path,
                hv_strerror(rc));
        uv_loop_close(&app.loop);
        hv_tls_ctx_free(app.tls);
        return EXIT_USAGE;
    }
    app.engine = hv_engine_new(&app.loop, &app.cfg, app.tls);
    hv_batch_opts_t opts = {
        .name = app.cfg.input_path,
        .output_path = app.cfg.output_path,
        .fsync = HV_FSYNC_NEVER, /* one fsync at the end is enough for --once */
    };
    rc = hv_batch_new(app.engine, &opts, src, on_done, &app, &app.batch);
    if (rc != 0) {
        if (rc == UV_EEXIST)
            fprintf(stderr, "harvestd: output %s already exists; refusing to append to it\n",
                    app.cfg.output_path);
        else
            fprintf(stderr, "harvestd: cannot create output %s: %s\n", app.cfg.output_path,
                    hv_strerror(rc));
        hv_source_close(src);
        hv_engine_close(app.engine, NULL, NULL);
        uv_run(&app.loop, UV_RUN_DEFAULT);
        uv_loop_close(&app.loop);
        hv_tls_ctx_free(app.tls);
        return EXIT_USAGE;
    }
    uv_signal_init(&app.loop, &app.sigint);
    uv_signal_init(&app.loop, &app.sigterm);
    app.sigint.data = &app;
    app.sigterm.data = &app;
    uv_signal_start(&app.sigint, on_signal, SIGINT);
    uv_signal_start(&app.sigterm, on_signal, SIGTERM);

    HV_LOG(HV_LOG_INFO, "event=start version=%s input=%s output=%s concurrency=%u per_host=%u "
           "parse_jobs=%u", HV_VERSION, app.cfg.input_path, app.cfg.output_path,
           app.cfg.concurrency, app.cfg.per_host, app.cfg.parse_jobs);
    uv_run(&app.loop, UV_RUN_DEFAULT);

    /* Everything should be closed by now; anything left is a bug we still clean up. */
    uv_walk(&app.loop, close_walk_cb, NULL);
    uv_run(&app.loop, UV_RUN_DEFAULT);
    rc = uv_loop_close(&app.loop);
    assert(rc == 0);
    (void)rc;
    hv_tls_ctx_free(app.tls);
    return app.exit_code;
}
