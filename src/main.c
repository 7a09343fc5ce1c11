/*
 * main.c: command line, the loop, signals, systemd notification and exit status.
 *
 *   harvestd -c FILE              the spool daemon (foreground; systemd supervises it)
 *   harvestd --check-config -c FILE
 *   harvestd --once FILE -o OUT   one URL list, then exit
 *   harvestd enqueue|status|merge ...  the stream commands (commands.h)
 *   harvestd state --state-dir DIR ...  inspect and trim the state store (commands.h)
 *
 * Exit status: 0 done (--once: every input line has its record; daemon: drained after
 * SIGTERM); 1 internal failure (an output could not be written...); 2 usage or configuration
 * error; 3 --once interrupted by SIGINT/SIGTERM after a graceful drain.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>
#include <uv.h>

#include "harvestd/batch.h"
#include "harvestd/charset.h"
#include "harvestd/commands.h"
#include "harvestd/common.h"
#include "harvestd/config.h"
#include "harvestd/engine.h"
#include "harvestd/handles.h"
#include "harvestd/log.h"
#include "harvestd/parse.h"
#include "harvestd/metrics.h"
#include "harvestd/options.h"
#include "harvestd/reader.h"
#include "harvestd/spool.h"
#include "harvestd/recrawl.h"
#include "harvestd/stream.h"
#include "harvestd/tls.h"

enum { EXIT_OK = 0, EXIT_INTERNAL = 1, EXIT_USAGE = 2, EXIT_INTERRUPTED = 3 };

#define STATUS_INTERVAL_MS 5000

typedef struct {
    uv_loop_t loop;
    hv_config_t cfg;
    const char *config_path;
    int check_only;
    hv_engine_t *engine;
    hv_batch_t *batch;    /* --once */
    hv_spool_t *spool;    /* daemon: the spool (its out/ holds the stream's outputs too) */
    hv_stream_t *stream;  /* daemon with source = redis */
    hv_recrawl_t *recrawl; /* recrawl = conditional: the store */
    int stream_closing;
    hv_tls_ctx_t *tls;
    uv_signal_t sigint;
    uv_signal_t sigterm;
    uv_signal_t sighup;
    uv_timer_t status_timer;
    uv_timer_t watchdog_timer;
    uv_timer_t progress_timer;
    int progress;         /* -1 auto (a terminal), 0 off, 1 on */
    int progress_shown;
    hv_metrics_server_t *metrics;
    hv_handles_t handles;  /* signals and timers: closed once, when everything else is */
    int signals;
    int stopping;
    int exit_code;
} app_t;

static int usage_error(const char *msg, const char *arg)
{
    fprintf(stderr, "harvestd: %s%s\nTry 'harvestd --help'.\n", msg, arg ? arg : "");
    return EXIT_USAGE;
}

/* parse_args: --help or --version was answered; the process exits 0 without running. */
#define ARGS_ANSWERED (-1)

/* One command-line argument (with its value) that acts after the config file is read: a
 * directive, or an option that stands for one or adds an extraction rule. */
typedef struct cli_option_s cli_option_t;
typedef struct {
    const cli_option_t *opt;    /* NULL: the directive `name` */
    char name[HV_OPT_NAME_MAX]; /* as written, without the dashes */
    const char *value;
} arg_t;

/*
 * An option that is not a directive. `now` runs as the command line is read (the mode, the
 * files, --help); `later` runs after the config file, in command-line order with the
 * directives, so that the command line overrides the file. `target` is what `later` works
 * on: the directive an option stands for, or the suffix of the extraction key.
 */
struct cli_option_s {
    hv_opt_t spelling; /* --NAME, --ALIAS, -LETTER, and whether it takes a value (options.h) */
    const char *fixed; /* the value of one that takes none */
    int (*now)(app_t *app, const char *value);
    int (*later)(app_t *app, const arg_t *a);
    const char *target;
    const char *usage; /* its line in --help; NULL: described on another's line */
};

static void usage(FILE *out);

static int opt_help(app_t *app, const char *value)
{
    (void)app, (void)value;
    usage(stdout);
    return ARGS_ANSWERED;
}

static int opt_version(app_t *app, const char *value)
{
    (void)app, (void)value;
    printf("harvestd %s\n", HV_VERSION);
    return ARGS_ANSWERED;
}

static int opt_check_config(app_t *app, const char *value)
{
    (void)value;
    app->check_only = 1;
    return EXIT_OK;
}

static int opt_progress(app_t *app, const char *value)
{
    app->progress = strcmp(value, "yes") == 0;
    return EXIT_OK;
}

static int opt_once(app_t *app, const char *value)
{
    app->cfg.input_path = value;
    return EXIT_OK;
}

static int opt_output(app_t *app, const char *value)
{
    app->cfg.output_path = value;
    return EXIT_OK;
}

static int opt_config(app_t *app, const char *value)
{
    app->config_path = value;
    return EXIT_OK;
}

/* --NAME VALUE for a directive, or an option that stands for one (-v, --rules). */
static int set_directive(app_t *app, const arg_t *a)
{
    const char *name = a->opt != NULL ? a->opt->target : a->name;
    char err[1200];
    int rc = hv_config_set(&app->cfg, name, a->value, err, sizeof(err));
    if (rc == UV_ENOENT)
        return usage_error("unknown option: --", name);
    if (rc != 0)
        return usage_error(err, NULL);
    hv_config_mark_cli(&app->cfg, name);
    return EXIT_OK;
}

/* --extract NAME=SELECTOR (and --extract-all, --links): a rule of the command line's set. */
static int add_extract_rule(app_t *app, const arg_t *a)
{
    const char *eq = strchr(a->value, '=');
    char key[80], err[1200];
    if (eq == NULL || eq == a->value || (size_t)(eq - a->value) >= 64)
        return usage_error("--extract wants NAME=SELECTOR, got: ", a->value);
    snprintf(key, sizeof(key), "%.*s%s", (int)(eq - a->value), a->value, a->opt->target);
    if (hv_config_add_rule(&app->cfg, "", key, eq + 1, err, sizeof(err)) != 0)
        return usage_error(err, NULL);
    return EXIT_OK;
}

/* The rows that have a usage line print it in --help, in this order. */
static const cli_option_t cli_options[] = {
    {{.name = "config", .alias = "c", .letter = "c", .kind = HV_OPT_VALUE},
     .now = opt_config,
     .usage = "-c, --config FILE      INI configuration (command-line options override it)"},
    {{.name = "progress"},
     .fixed = "yes",
     .now = opt_progress,
     .usage = "--progress, --no-progress  live progress line on stderr (default: when a "
              "terminal)"},
    {{.name = "no-progress"}, .fixed = "no", .now = opt_progress},
    {{.name = "extract", .kind = HV_OPT_VALUE},
     .later = add_extract_rule,
     .target = "",
     .usage = "--extract NAME=SELECTOR      a field: the first match (SELECTOR [@attr|::html])"},
    {{.name = "extract-all", .alias = "extract_all", .kind = HV_OPT_VALUE},
     .later = add_extract_rule,
     .target = "[]",
     .usage = "--extract-all NAME=SELECTOR  a field: every match, as a list"},
    {{.name = "links"},
     .fixed = "links=@links",
     .later = add_extract_rule,
     .target = "",
     .usage = "--links                the page's links (absolute URLs) as field 'links'"},
    {{.name = "rules", .kind = HV_OPT_VALUE},
     .later = set_directive,
     .target = "default_rules",
     .usage = "--rules NAME           use the config's [rules \"NAME\"] set"},
    {{.letter = "v"},
     .fixed = "info",
     .later = set_directive,
     .target = "log_level",
     .usage = "-v                     more logging (-vv for debug); -q for warnings only"},
    {{.letter = "vv"}, .fixed = "debug", .later = set_directive, .target = "log_level"},
    {{.letter = "q"}, .fixed = "warning", .later = set_directive, .target = "log_level"},
    {{.name = "help", .letter = "h"}, .now = opt_help, .usage = "--help, --version"},
    {{.name = "version"}, .now = opt_version},
    {{.name = "once", .kind = HV_OPT_VALUE}, .now = opt_once},
    {{.name = "output", .alias = "o", .letter = "o", .kind = HV_OPT_VALUE}, .now = opt_output},
    {{.name = "check-config"}, .now = opt_check_config},
};

/* Anything spelled --NAME that is no option here is a directive: hv_config_set() judges the
 * name once the config file is read. A directive that is a flag needs no value ("yes"). */
static int directive_kind(const char *name)
{
    return hv_config_is_flag(name) ? HV_OPT_OPTIONAL : HV_OPT_VALUE;
}

/* An option that takes no value given one (--links=x) is read as a directive, so an unknown
 * one. */
static const hv_opt_spec_t cli_spec = {
    .opts = &cli_options[0].spelling,
    .nopts = HV_ARRAY_SIZE(cli_options),
    .stride = sizeof(cli_options[0]),
    .rules = HV_OPT_FLAG_VALUE_UNKNOWN,
    .say = HV_OPT_SAY_DAEMON,
    .unknown = directive_kind,
};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: harvestd -c CONFIG                 run the spool daemon (foreground)\n"
            "       harvestd --check-config -c CONFIG  validate the configuration and exit\n"
            "       harvestd --once FILE -o OUTPUT     fetch one URL list, then exit\n"
            "       harvestd enqueue --redis URL FILE  add a URL list to a Redis stream\n"
            "       harvestd status --redis URL        progress of the stream's batches\n"
            "       harvestd merge --batch NAME -o FILE DIR...  one record per line\n"
            "       harvestd state --state-dir DIR VERB  stats|get|forget|prune the state store\n"
            "\n"
            "--once reads FILE (one URL per line, '-' for standard input) and writes one JSON\n"
            "record per URL to OUTPUT (created; must not exist; '-' for standard output).\n"
            "\n");
    for (size_t i = 0; i < HV_ARRAY_SIZE(cli_options); i++)
        if (cli_options[i].usage != NULL)
            fprintf(out, "  %s\n", cli_options[i].usage);
    fprintf(out, "\n"
                 "Directives (config 'name = value', or --name VALUE / --name=VALUE here;\n"
                 "sizes take k/m/g, durations ms/s/m/h):\n");
    hv_config_print_help(out);
    fprintf(out, "\nExit status: 0 done, 1 internal failure, 2 usage or configuration error,\n"
                 "3 --once interrupted.\n");
}

/* One option of the command line: run it now (`now`), or keep it for after the config file. */
static int take_option(app_t *app, const hv_opt_arg_t *got, arg_t *later, size_t *nlater)
{
    const cli_option_t *o =
        got->opt != NULL ? hv_opt_container(got->opt, cli_option_t, spelling) : NULL;
    const char *value = o != NULL && o->spelling.kind == HV_OPT_FLAG ? o->fixed
                        : got->value != NULL                         ? got->value
                                                                     : "yes";
    if (o != NULL && o->now != NULL)
        return o->now(app, value);
    arg_t *a = &later[(*nlater)++];
    a->opt = o;
    memcpy(a->name, got->name, sizeof(a->name));
    a->value = value;
    return EXIT_OK;
}

/* After the command line: a mode, its files, and the values derived from them. */
static int check_mode(app_t *app)
{
    hv_config_t *cfg = &app->cfg;
    char err[1200];
    if (cfg->input_path != NULL && cfg->output_path == NULL)
        return usage_error("no output: give -o FILE (or -o - for standard output)", NULL);
    if (cfg->input_path == NULL && cfg->output_path != NULL)
        return usage_error("-o is for --once FILE", NULL);
    if (cfg->input_path == NULL && app->config_path == NULL)
        return usage_error("nothing to do: give -c CONFIG (daemon) or --once FILE -o OUTPUT",
                           NULL);
    /* --once finishes or gives up in seconds; the daemon's default drain is longer. */
    if (cfg->input_path != NULL && !hv_config_is_set(cfg, "drain_timeout"))
        cfg->drain_timeout_ms = 5000;
    if (hv_config_finish(cfg, err, sizeof(err)) != 0)
        return usage_error(err, NULL);
    if (cfg->recrawl != HV_RECRAWL_OFF && cfg->state_dir[0] == '\0') {
        if (cfg->input_path != NULL)
            return usage_error("--recrawl conditional needs --state-dir DIR (the store)", NULL);
        snprintf(cfg->state_dir, sizeof(cfg->state_dir), "%.1000s/state", cfg->spool_dir);
    }
    return EXIT_OK;
}

/* Whether `path` can be opened for reading as a file: 0, or the error with "cannot read WHAT
 * PATH: errno text" in `err`. The modules that load it fall back to their own library's
 * words (a directory reads as an empty config; mbedtls says "PK - Read/write of file
 * failed"), so start-up asks first. */
static int check_readable(const char *what, const char *path, char *err, size_t errcap)
{
    struct stat st;
    int e = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        e = errno;
    else if (fstat(fd, &st) != 0)
        e = errno;
    else if (S_ISDIR(st.st_mode))
        e = EISDIR;
    if (fd >= 0)
        close(fd);
    if (e == 0)
        return 0;
    snprintf(err, errcap, "cannot read %s %s: %s", what, path, strerror(e));
    return uv_translate_sys_error(e);
}

/* The config file is read once the whole command line is, wherever -c stands in it; what
 * the command line sets (`later`) is then applied over it, in order. EXIT_OK, EXIT_USAGE, or
 * ARGS_ANSWERED. */
static int parse_args(app_t *app, int argc, char **argv)
{
    arg_t *later = hv_xcalloc((size_t)argc, sizeof(*later));
    size_t nlater = 0;
    hv_opt_parser_t p;
    hv_opt_arg_t got;
    char err[1200];
    int rc = EXIT_OK, what;

    hv_opt_init(&p, &cli_spec, argc, argv);
    while (rc == EXIT_OK && (what = hv_opt_next(&p, &got, err, sizeof(err))) != HV_OPT_END) {
        if (what == HV_OPT_ERROR)
            rc = usage_error(err, NULL);
        else if (what == HV_OPT_ARGUMENT)
            rc = usage_error("unexpected argument: ", got.word);
        else
            rc = take_option(app, &got, later, &nlater);
    }
    if (rc != EXIT_OK)
        goto out;
    if (app->config_path != NULL &&
        (check_readable("config file", app->config_path, err, sizeof(err)) != 0 ||
         hv_config_load_file(&app->cfg, app->config_path, err, sizeof(err)) != 0)) {
        fprintf(stderr, "harvestd: %s\n", err);
        rc = EXIT_USAGE;
        goto out;
    }
    for (size_t k = 0; k < nlater && rc == EXIT_OK; k++)
        rc = later[k].opt != NULL ? later[k].opt->later(app, &later[k])
                                  : set_directive(app, &later[k]);
    if (rc == EXIT_OK)
        rc = check_mode(app);
out:
    free(later);
    return rc;
}

static void close_walk_cb(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h)) {
        HV_LOG(HV_LOG_WARNING, "event=leftover_handle type=%s", uv_handle_type_name(h->type));
        uv_close(h, NULL);
    }
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

/*
 * glibc's malloc gives each thread that allocates an arena of its own (up to eight per CPU),
 * which grows to that thread's peak and is seldom given back; and every time a large block
 * is freed it raises its mmap threshold to that block's size (up to 32 MiB), after which
 * multi-MiB page bodies come from the heap and fragment it. With parse threads handling pages
 * of up to max_bytes, peak RSS was about four times what is in flight. Two arenas (the
 * loop's, the workers') and a fixed threshold keep it near that: blocks above it (big page
 * bodies) are mapped on their own and unmapped when freed. The threshold sits above the parse
 * arena's largest chunk (1 MiB), which is reused from the heap: a lower one made every parse
 * fault its tree's pages in afresh (2.5 s of system time per 300 pages of 0.5-2 MB).
 * Measured on 300 such pages with rules and --links: peak RSS 159-164 MiB with glibc's
 * defaults, 106-112 MiB with these, for 5-15% more CPU. Set before any thread starts;
 * MALLOC_ARENA_MAX and MALLOC_MMAP_THRESHOLD_ in the environment win.
 */
#define MALLOC_ARENAS 2
#define MALLOC_MMAP_THRESHOLD (1024 * 1024 + 64 * 1024)

static void tune_malloc(void)
{
    if (getenv("MALLOC_ARENA_MAX") == NULL)
        mallopt(M_ARENA_MAX, MALLOC_ARENAS);
    if (getenv("MALLOC_MMAP_THRESHOLD_") == NULL)
        mallopt(M_MMAP_THRESHOLD, MALLOC_MMAP_THRESHOLD);
}

/* Use every file descriptor we are allowed: connections, outputs and inputs all need one. */
static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* ---- --once ---- */

/* The last step of every way out: the loop then runs dry. */
static void close_app(app_t *app)
{
    /* Its last commits run on the threadpool; the loop runs until they are done. */
    if (app->recrawl != NULL) {
        hv_recrawl_close(app->recrawl, NULL, NULL);
        app->recrawl = NULL;
    }
    if (app->metrics != NULL) {
        hv_metrics_close(app->metrics, NULL, NULL);
        app->metrics = NULL;
    }
    hv_handles_close_all(&app->handles);
}

static void on_engine_closed(void *ud)
{
    app_t *app = ud;
    app->engine = NULL;
    close_app(app);
}

static void render_recrawl(hv_buf_t *out, const hv_recrawl_stats_t *st)
{
    hv_metrics_counter(out, "harvestd_recrawl_lookups_total",
                       "URLs looked up in the re-crawling store.", st->lookups);
    hv_metrics_counter(out, "harvestd_recrawl_conditional_total",
                       "URLs fetched with the stored validators.", st->conditional);
    hv_metrics_counter(out, "harvestd_recrawl_not_modified_total",
                       "Conditional requests answered 304 Not Modified.", st->not_modified);
    hv_metrics_counter(out, "harvestd_recrawl_unchanged_total",
                       "200 answers whose body was the stored one.", st->unchanged);
    hv_metrics_counter(out, "harvestd_recrawl_from_cache_total",
                       "URLs answered from the store without a request (recrawl_min_age).",
                       st->from_cache);
    hv_metrics_counter(out, "harvestd_recrawl_requests_avoided_total",
                       "Requests not made: answers from the store.", st->from_cache);
    hv_metrics_counter(out, "harvestd_recrawl_body_bytes_avoided_total",
                       "Stored body bytes not transferred (304s and answers from the store).",
                       st->bytes_avoided);
    hv_metrics_counter(out, "harvestd_store_entries_written_total",
                       "Store entries committed after their record was durable.", st->stored);
    hv_metrics_counter(out, "harvestd_store_entries_not_stored_total",
                       "ok records not stored (no-store, too large, store full or failing).",
                       st->not_stored);
    hv_metrics_counter(out, "harvestd_store_commits_total", "Store transactions committed.",
                       st->commits);
    hv_metrics_counter(out, "harvestd_store_commit_errors_total",
                       "Store transactions that failed (storing then stops).",
                       st->commit_errors);
    hv_metrics_gauge(out, "harvestd_store_full", "1 once the store reached state_max_bytes.",
                     (double)st->full);
    hv_metrics_gauge(out, "harvestd_store_entries", "Entries in the store.",
                     (double)st->entries);
    hv_metrics_gauge(out, "harvestd_store_bytes", "Bytes of the store in use.",
                     (double)st->bytes_used);
    hv_metrics_gauge(out, "harvestd_store_max_bytes", "The store's bound (state_max_bytes).",
                     (double)st->map_bytes);
}

static void render_metrics(void *ud, hv_buf_t *out)
{
    app_t *app = ud;
    if (app->engine != NULL) {
        hv_engine_stats_t st;
        hv_engine_stats(app->engine, &st);
        hv_metrics_render_engine(out, &st);
    }
    if (app->spool != NULL) {
        const hv_spool_stats_t *s = hv_spool_stats(app->spool);
        hv_metrics_counter(out, "harvestd_batches_completed_total", "Spool batches completed.",
                           s->completed);
        hv_metrics_counter(out, "harvestd_batches_rejected_total", "Spool files rejected.",
                           s->rejected);
        hv_metrics_counter(out, "harvestd_batches_resumed_total",
                           "Spool batches resumed at start-up.", s->resumed);
    }
    if (app->stream != NULL) {
        hv_stream_stats_t st;
        hv_stream_stats(app->stream, &st);
        hv_metrics_gauge(out, "harvestd_redis_up", "1 while both Redis connections are open.",
                         (double)st.up);
        hv_metrics_gauge(out, "harvestd_stream_entries_held",
                         "Stream entries delivered to this daemon and not yet acknowledged.",
                         (double)st.held);
        hv_metrics_gauge(out, "harvestd_stream_acks_waiting",
                         "Held entries whose record is durable, waiting for their XACK.",
                         (double)st.acks_waiting);
        hv_metrics_gauge(out, "harvestd_stream_batches_open", "Stream batch outputs open.",
                         (double)st.batches);
        hv_metrics_counter(out, "harvestd_stream_entries_read_total",
                           "Stream entries received by XREADGROUP.", st.read);
        hv_metrics_counter(out, "harvestd_stream_entries_reclaimed_total",
                           "Stream entries taken over from idle consumers.", st.reclaimed);
        hv_metrics_counter(out, "harvestd_stream_entries_acked_total",
                           "Stream entries acknowledged after their record was durable.",
                           st.acked);
        hv_metrics_counter(out, "harvestd_stream_entries_lost_total",
                           "Held entries another consumer took over meanwhile.", st.lost);
        hv_metrics_counter(out, "harvestd_stream_entries_invalid_total",
                           "Stream entries without a url, with unknown rules, or deleted.",
                           st.invalid);
        hv_metrics_counter(out, "harvestd_redis_disconnects_total",
                           "Redis connections lost.", st.reconnects);
    }
    if (app->recrawl != NULL) {
        hv_recrawl_stats_t st;
        hv_recrawl_stats(app->recrawl, &st);
        render_recrawl(out, &st);
    }
}

/* ---- the --once progress line ---- */

static void format_eta(char *out, size_t cap, double seconds)
{
    if (seconds < 0 || seconds > 99 * 3600)
        snprintf(out, cap, "--:--");
    else if (seconds >= 3600)
        snprintf(out, cap, "%dh%02dm", (int)seconds / 3600, ((int)seconds / 60) % 60);
    else
        snprintf(out, cap, "%dm%02ds", (int)seconds / 60, (int)seconds % 60);
}

static void on_progress(uv_timer_t *t)
{
    app_t *app = t->data;
    if (app->batch == NULL)
        return;
    const hv_batch_stats_t *s = hv_batch_stats(app->batch);
    double elapsed = (double)(uv_now(&app->loop) - s->started_ms) / 1000.0;
    double rate = elapsed > 0 ? (double)s->records / elapsed : 0;
    char eta[32];
    int known = hv_batch_input_done(app->batch);
    format_eta(eta, sizeof(eta), known && rate > 0 ? (double)(s->lines - s->records) / rate : -1);
    fprintf(stderr, "\r\033[K%" PRIu64 "/%" PRIu64 "%s  ok %" PRIu64 "  failed %" PRIu64
                    "  %.0f pages/s  ETA %s",
            s->records, s->lines, known ? "" : "+", s->ok, s->failed, rate, eta);
    fflush(stderr);
    app->progress_shown = 1;
}

static void progress_clear(app_t *app)
{
    if (app->progress_shown) {
        fprintf(stderr, "\r\033[K");
        fflush(stderr);
        app->progress_shown = 0;
    }
}

/* Log lines must not land at the end of the progress line: clear it first (the next tick
 * draws it again). */
static app_t *progress_app;

static void clear_progress_before_log(void)
{
    if (progress_app != NULL)
        progress_clear(progress_app);
}

static void on_once_done(void *ud, hv_batch_t *b, int status, const char *detail)
{
    app_t *app = ud;
    char line[4096], engine_stats[1024];

    if (app->progress == 1) {
        uv_timer_stop(&app->progress_timer);
        progress_clear(app);
        hv_log_set_before(NULL);
        progress_app = NULL;
    }
    /* The summary counts what reached the output: after an internal failure it would count
     * records that never did, so there is none then (as in the daemon). */
    if (status == 0 || status == HV_ECANCELLED) {
        hv_engine_stats_t st;
        hv_engine_stats(app->engine, &st);
        hv_batch_format_stats(b, uv_now(&app->loop), line, sizeof(line));
        hv_metrics_format_engine(engine_stats, sizeof(engine_stats), &st);
        fprintf(stderr, "harvestd: summary %s%s\n", line, engine_stats);
    }
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

static int start_once(app_t *app)
{
    hv_source_t *src = NULL;
    int rc = hv_reader_open(&app->loop, app->cfg.input_path, &src);
    if (rc != 0) {
        fprintf(stderr, "harvestd: cannot open input %s: %s\n", app->cfg.input_path,
                hv_strerror(rc));
        return EXIT_USAGE;
    }
    app->engine = hv_engine_new(&app->loop, &app->cfg, app->tls);
    hv_engine_use_recrawl(app->engine, app->recrawl);
    /* Rules given on the command line win over the configuration's default set. */
    const hv_ruleset_t *rules = hv_config_ruleset(&app->cfg, "");
    if (hv_ruleset_empty(rules))
        rules = hv_config_ruleset(&app->cfg, app->cfg.default_rules);
    hv_batch_opts_t opts = {
        .name = app->cfg.input_path,
        .output_path = app->cfg.output_path,
        .fsync = HV_FSYNC_NEVER, /* one fsync at the end is enough for --once */
        .rules = rules,
        .crash_note = NULL, /* nothing resumes a --once run */
    };
    rc = hv_batch_new(app->engine, &opts, src, on_once_done, app, &app->batch);
    if (rc != 0) {
        if (rc == UV_EEXIST)
            fprintf(stderr, "harvestd: output %s already exists; refusing to append to it\n",
                    app->cfg.output_path);
        else
            fprintf(stderr, "harvestd: cannot create output %s: %s\n", app->cfg.output_path,
                    hv_strerror(rc));
        hv_source_close(src);
        hv_engine_close(app->engine, NULL, NULL);
        app->engine = NULL;
        return EXIT_USAGE;
    }
    if (app->progress < 0)
        app->progress = uv_guess_handle(2) == UV_TTY;
    if (app->progress == 1) {
        /* At most four redraws a second. */
        uv_timer_init(&app->loop, &app->progress_timer);
        app->progress_timer.data = app;
        hv_handles_own(&app->handles, (uv_handle_t *)&app->progress_timer);
        uv_timer_start(&app->progress_timer, on_progress, 250, 250);
        progress_app = app;
        hv_log_set_before(clear_progress_before_log);
    }
    HV_LOG(HV_LOG_INFO,
           "event=start mode=once version=%s input=%s output=%s concurrency=%u per_host=%u "
           "parse_jobs=%u address_guard=%s allowed_ranges=%u",
           HV_VERSION, app->cfg.input_path, app->cfg.output_path, app->cfg.concurrency,
           app->cfg.per_host, app->cfg.parse_jobs, app->cfg.allow_private_addresses ? "off" : "on",
           app->cfg.allow_addresses.count);
    return EXIT_OK;
}

/* ---- the daemon ---- */

static void notify_status(app_t *app)
{
    const hv_spool_stats_t *s = hv_spool_stats(app->spool);
    char stream[256] = "";
    if (app->stream != NULL) {
        hv_stream_stats_t st;
        hv_stream_stats(app->stream, &st);
        snprintf(stream, sizeof(stream),
                 "; redis %s, %u entries held, %" PRIu64 " acknowledged",
                 st.up ? "up" : "down", st.held, st.acked);
    }
    sd_notifyf(0,
               "STATUS=%s: %u active, %" PRIu64 " done, %" PRIu64 " rejected, %" PRIu64
               " records written%s",
               app->stopping ? "draining" : "running", s->active, s->completed, s->rejected,
               s->records, stream);
}

static void on_spool_closed(void *ud)
{
    app_t *app = ud;
    app->spool = NULL;
    /* Both read the spool: they stop now and close with the other handles. */
    uv_timer_stop(&app->status_timer);
    uv_timer_stop(&app->watchdog_timer);
    hv_engine_close(app->engine, on_engine_closed, app);
}

static void on_spool_progress(void *ud);

static void daemon_stop(app_t *app, int force)
{
    if (!app->stopping) {
        app->stopping = 1;
        sd_notify(0, "STOPPING=1");
        HV_LOG(HV_LOG_NOTICE, "event=stopping drain_timeout_ms=%" PRIu64 " force=%d",
               app->cfg.drain_timeout_ms, force);
        hv_spool_stop(app->spool);
        if (app->stream != NULL)
            hv_stream_stop(app->stream);
    }
    hv_engine_stop(app->engine, force);
    notify_status(app);
    on_spool_progress(app); /* closes at once when no batch is running */
}

static void on_stream_closed(void *ud)
{
    app_t *app = ud;
    app->stream = NULL;
    on_spool_progress(app);
}

/* The stop sequence, once no batch is left: the stream (its last acknowledgements), then the
 * spool, then the engine. */
static void on_spool_progress(void *ud)
{
    app_t *app = ud;
    if (app->spool == NULL)
        return;
    notify_status(app);
    if (!app->stopping || hv_engine_batches(app->engine) != 0 ||
        hv_spool_stats(app->spool)->active != 0)
        return;
    if (app->stream != NULL) {
        if (!app->stream_closing) {
            app->stream_closing = 1;
            hv_stream_close(app->stream, on_stream_closed, app);
        }
        return;
    }
    hv_spool_close(app->spool, on_spool_closed, app);
}

static void on_spool_fatal(void *ud, int err, const char *detail)
{
    app_t *app = ud;
    HV_LOG(HV_LOG_ERROR,
           "event=fatal error=\"%s\" err=%s action=stop note=\"the batch stays in active/ and "
           "resumes after a restart\"",
           detail, hv_err_name(err));
    app->exit_code = EXIT_INTERNAL;
    daemon_stop(app, 0);
}

static void on_stream_fatal(void *ud, int err, const char *detail)
{
    app_t *app = ud;
    HV_LOG(HV_LOG_ERROR,
           "event=fatal error=\"%s\" err=%s action=stop note=\"entries not acknowledged stay "
           "pending and are processed again\"",
           detail, hv_err_name(err));
    app->exit_code = EXIT_INTERNAL;
    daemon_stop(app, 0);
}

static void on_status_timer(uv_timer_t *t)
{
    notify_status(t->data);
}

static void on_watchdog(uv_timer_t *t)
{
    (void)t;
    sd_notify(0, "WATCHDOG=1");
}

static int start_daemon(app_t *app)
{
    char err[1500];
    static const hv_spool_cbs_t cbs = {on_spool_fatal, on_spool_progress};

    /* A page that crashes the parser is noted, so that the restart does not fetch it into
     * the same crash (parse.h). */
    hv_parse_catch_crashes();
    app->engine = hv_engine_new(&app->loop, &app->cfg, app->tls);
    hv_engine_use_recrawl(app->engine, app->recrawl);
    int rc = hv_spool_open(&app->loop, &app->cfg, app->engine, &cbs, app, &app->spool, err,
                           sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "harvestd: %s\n", err);
        hv_engine_close(app->engine, NULL, NULL);
        app->engine = NULL;
        return EXIT_USAGE;
    }
    uv_timer_init(&app->loop, &app->status_timer);
    uv_timer_init(&app->loop, &app->watchdog_timer);
    app->status_timer.data = app;
    app->watchdog_timer.data = app;
    hv_handles_own(&app->handles, (uv_handle_t *)&app->status_timer);
    hv_handles_own(&app->handles, (uv_handle_t *)&app->watchdog_timer);
    if (app->cfg.sources & HV_SOURCE_REDIS) {
        static const hv_stream_cbs_t scbs = {on_stream_fatal, on_spool_progress};
        char out_dir[1100];
        snprintf(out_dir, sizeof(out_dir), "%s/out", app->cfg.spool_dir);
        rc = hv_stream_open(&app->loop, &app->cfg, app->engine, out_dir, &scbs, app,
                            &app->stream, err, sizeof(err));
        if (rc != 0) {
            fprintf(stderr, "harvestd: %s\n", err);
            hv_spool_close(app->spool, on_spool_closed, app);
            return EXIT_USAGE;
        }
    }
    rc = app->cfg.sources & HV_SOURCE_SPOOL ? hv_spool_start(app->spool, err, sizeof(err)) : 0;
    if (rc != 0) {
        /* Nothing was claimed: no drain, just the stream's and the spool's handles, then the
         * engine's. */
        fprintf(stderr, "harvestd: %s\n", err);
        app->stopping = 1;
        on_spool_progress(app);
        return EXIT_USAGE;
    }
    if (app->stream != NULL)
        hv_stream_start(app->stream);
    uv_timer_start(&app->status_timer, on_status_timer, STATUS_INTERVAL_MS, STATUS_INTERVAL_MS);
    uint64_t usec = 0;
    if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
        uint64_t ms = usec / 2000; /* ping twice per period */
        uv_timer_start(&app->watchdog_timer, on_watchdog, 0, ms > 0 ? ms : 1);
    }
    HV_LOG(HV_LOG_NOTICE,
           "event=start mode=daemon version=%s config=%s spool_dir=%s source=%s%s%s "
           "concurrency=%u per_host=%u max_active_batches=%u address_guard=%s "
           "allowed_ranges=%u",
           HV_VERSION, app->config_path, app->cfg.spool_dir,
           app->cfg.sources & HV_SOURCE_SPOOL ? "spool" : "",
           app->cfg.sources == (HV_SOURCE_SPOOL | HV_SOURCE_REDIS) ? "," : "",
           app->cfg.sources & HV_SOURCE_REDIS ? "redis" : "", app->cfg.concurrency,
           app->cfg.per_host, app->cfg.max_active_batches,
           app->cfg.allow_private_addresses ? "off" : "on", app->cfg.allow_addresses.count);
    sd_notify(0, "READY=1");
    notify_status(app);
    return EXIT_OK;
}

/* ---- signals ---- */

static void on_signal(uv_signal_t *h, int signum)
{
    app_t *app = h->data;
    if (signum == SIGHUP) {
        HV_LOG(HV_LOG_NOTICE, "event=signal signal=HUP action=ignored (restart to reload)");
        return;
    }
    app->signals++;
    HV_LOG(HV_LOG_NOTICE, "event=signal signal=%s action=%s", signum == SIGINT ? "INT" : "TERM",
           app->signals == 1 ? "drain" : "stop");
    if (app->engine == NULL)
        return;
    if (app->spool != NULL)
        daemon_stop(app, app->signals > 1);
    else
        hv_engine_stop(app->engine, app->signals > 1);
}

/* Signal handlers exist before READY=1 can be sent: a stop request that follows readiness at
 * once must drain, not kill. */
static void start_signals(app_t *app)
{
    uv_signal_init(&app->loop, &app->sigint);
    uv_signal_init(&app->loop, &app->sigterm);
    uv_signal_init(&app->loop, &app->sighup);
    app->sigint.data = app->sigterm.data = app->sighup.data = app;
    hv_handles_own(&app->handles, (uv_handle_t *)&app->sigint);
    hv_handles_own(&app->handles, (uv_handle_t *)&app->sigterm);
    hv_handles_own(&app->handles, (uv_handle_t *)&app->sighup);
    uv_signal_start(&app->sigint, on_signal, SIGINT);
    uv_signal_start(&app->sigterm, on_signal, SIGTERM);
    uv_signal_start(&app->sighup, on_signal, SIGHUP);
}

/* The re-crawling store, when configured: EXIT_OK, or EXIT_USAGE said on stderr (a store
 * that cannot be opened is a start-up error, never a batch's). */
static int open_recrawl(app_t *app)
{
    char err[3300];
    if (app->cfg.recrawl == HV_RECRAWL_OFF)
        return EXIT_OK;
    if (hv_recrawl_open(&app->loop, &app->cfg, &app->recrawl, err, sizeof(err)) == 0)
        return EXIT_OK;
    fprintf(stderr, "harvestd: %s\n", err);
    return EXIT_USAGE;
}

/* The metrics endpoint, when configured: EXIT_OK, or EXIT_USAGE said on stderr (the server
 * closes itself then). */
static int start_metrics(app_t *app)
{
    char err[1200];
    if (app->cfg.metrics_listen[0] == '\0')
        return EXIT_OK;
    if (hv_metrics_start(&app->loop, app->cfg.metrics_listen, render_metrics, app, &app->metrics,
                         err, sizeof(err)) == 0)
        return EXIT_OK;
    fprintf(stderr, "harvestd: %s\n", err);
    return EXIT_USAGE;
}

int main(int argc, char **argv)
{
    app_t app;
    char err[1200];
    int rc;

    if (argc > 1 && strcmp(argv[1], "enqueue") == 0)
        return hv_cmd_enqueue(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "status") == 0)
        return hv_cmd_status(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "merge") == 0)
        return hv_cmd_merge(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "state") == 0)
        return hv_cmd_state(argc - 1, argv + 1);

    memset(&app, 0, sizeof(app));
    app.progress = -1;
    /* Backoff jitter only needs to differ between processes and runs. */
    srandom((unsigned)(uv_hrtime() ^ ((uint64_t)uv_os_getpid() << 16)));
    hv_log_init();
    hv_config_defaults(&app.cfg);
    rc = parse_args(&app, argc, argv);
    if (rc != EXIT_OK) {
        hv_config_free(&app.cfg);
        return rc == ARGS_ANSWERED ? EXIT_OK : rc;
    }
    hv_log_level = app.cfg.log_level;

    rc = app.cfg.ca_file[0] ? check_readable("CA file", app.cfg.ca_file, err, sizeof(err)) : 0;
    if (rc == 0)
        rc = hv_tls_ctx_new(app.cfg.ca_file[0] ? app.cfg.ca_file : NULL, app.cfg.insecure,
                            &app.tls, err, sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "harvestd: %s\n", err);
        hv_config_free(&app.cfg);
        return EXIT_USAGE;
    }
    if (app.check_only) {
        rc = EXIT_OK;
        if (app.cfg.input_path == NULL) {
            uv_fs_t req;
            char where[1100];
            hv_config_where(&app.cfg, "spool_dir", where, sizeof(where));
            if (uv_fs_stat(NULL, &req, app.cfg.spool_dir, NULL) != 0 ||
                !S_ISDIR(req.statbuf.st_mode)) {
                fprintf(stderr, "harvestd: %s: spool_dir: %s is not a directory\n", where,
                        app.cfg.spool_dir);
                rc = EXIT_USAGE;
            }
            uv_fs_req_cleanup(&req);
        }
        if (rc == EXIT_OK)
            printf("harvestd: configuration OK%s%s\n", app.config_path ? ": " : "",
                   app.config_path ? app.config_path : "");
        hv_tls_ctx_free(app.tls);
        hv_config_free(&app.cfg);
        return rc;
    }
    if (app.cfg.insecure)
        fprintf(stderr, "harvestd: warning: --insecure: TLS certificates are NOT verified; "
                        "any server can impersonate any site\n");
    if (app.cfg.allow_private_addresses)
        HV_LOG(HV_LOG_WARNING, "event=address_guard_off reason=allow_private_addresses "
                               "(connections may reach loopback, private and link-local "
                               "addresses)");
    tune_malloc();
    size_threadpool(app.cfg.parse_jobs);
    hv_charset_preload();
    raise_nofile();
    /* A reader that went away must surface as a write error (EPIPE), not kill us. */
    signal(SIGPIPE, SIG_IGN);

    /* From here on every way out, a failed start included, closes what was opened and runs
     * the loop dry below. */
    uv_loop_init(&app.loop);
    hv_handles_init(&app.handles, NULL);
    rc = start_metrics(&app);
    if (rc == EXIT_OK)
        rc = open_recrawl(&app);
    if (rc == EXIT_OK) {
        start_signals(&app);
        rc = app.cfg.input_path != NULL ? start_once(&app) : start_daemon(&app);
    }
    if (rc != EXIT_OK && app.spool == NULL)
        close_app(&app); /* nothing runs that would close them later (the spool's close does) */
    if (rc != EXIT_OK)
        app.exit_code = rc;
    uv_run(&app.loop, UV_RUN_DEFAULT);

    /* Everything should be closed by now; anything left is a bug we still clean up. */
    uv_walk(&app.loop, close_walk_cb, NULL);
    uv_run(&app.loop, UV_RUN_DEFAULT);
    rc = uv_loop_close(&app.loop);
    assert(rc == 0);
    (void)rc;
    hv_tls_ctx_free(app.tls);
    hv_config_free(&app.cfg);
    hv_charset_unload();
    return app.exit_code;
}
