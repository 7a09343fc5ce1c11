/*
 * main.c: the command line and start-up: which command or mode, the configuration, the TLS
 * context; then the loop (loop.h) runs the daemon or --once, and its exit status is ours.
 *
 *   harvestd -c FILE              the spool daemon (foreground; systemd supervises it)
 *   harvestd --check-config -c FILE
 *   harvestd --once FILE -o OUT   one URL list, then exit
 *   harvestd enqueue|status|merge ...  the stream commands (commands.h)
 *   harvestd state --state-dir DIR ...  inspect and trim the state store (commands.h)
 *   harvestd report OUTPUT.jsonl ...    an HTML page summing up an output (commands.h)
 *
 * Exit status: 0 done (--once: every input line has its record; daemon: drained after
 * SIGTERM); 1 internal failure (an output could not be written...); 2 usage or configuration
 * error; 3 --once interrupted by SIGINT/SIGTERM after a graceful drain.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "harvestd/commands.h"
#include "harvestd/common.h"
#include "harvestd/config.h"
#include "harvestd/log.h"
#include "harvestd/loop.h"
#include "harvestd/options.h"
#include "harvestd/tls.h"

enum { EXIT_OK = HV_EXIT_OK, EXIT_USAGE = HV_EXIT_USAGE };

typedef struct {
    hv_config_t cfg;
    const char *config_path;
    int check_only;
    int progress;         /* -1 auto (a terminal), 0 off, 1 on */
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
    hv_opt_t spelling; /* --NAME, --ALIAS, -LETTER, whether it takes a value, its usage line */
    const char *fixed; /* the value of one that takes none */
    int (*now)(app_t *app, const char *value);
    int (*later)(app_t *app, const arg_t *a);
    const char *target;
};

static void usage(FILE *out);
static int man_page(const char *template_path);

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

static int opt_help_man(app_t *app, const char *value)
{
    (void)app;
    return man_page(value);
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

/* --header 'Name: value': a request header for every host, over the file's of that name. */
static int add_header(app_t *app, const arg_t *a)
{
    char err[1200];
    if (hv_config_add_header(&app->cfg, NULL, a->value, -1, err, sizeof(err)) != 0)
        return usage_error(err, NULL);
    return EXIT_OK;
}

/* The rows that have a usage line (spelling.usage, options.h) print it in --help and the
 * manual page, in this order. */
static const cli_option_t cli_options[] = {
    {{.name = "config", .alias = "c", .letter = "c", .kind = HV_OPT_VALUE,
      .usage = "-c, --config FILE      INI configuration (command-line options override it)"},
     .now = opt_config},
    {{.name = "check-config",
      .usage = "--check-config         with -c: validate the configuration, list the request\n"
               "                       headers (secrets masked) and exit"},
     .now = opt_check_config},
    {{.name = "once", .kind = HV_OPT_VALUE,
      .usage = "--once FILE            fetch the URLs of FILE (one per line; '-': standard\n"
               "                       input), write a JSON record for each to OUTPUT, exit"},
     .now = opt_once},
    {{.name = "output", .alias = "o", .letter = "o", .kind = HV_OPT_VALUE,
      .usage = "-o, --output OUTPUT    with --once: the records (created; must not exist; '-'\n"
               "                       for standard output)"},
     .now = opt_output},
    {{.name = "progress",
      .usage = "--progress, --no-progress  live progress line on stderr (default: when a "
               "terminal)"},
     .fixed = "yes",
     .now = opt_progress},
    {{.name = "no-progress"}, .fixed = "no", .now = opt_progress},
    {{.name = "extract", .kind = HV_OPT_VALUE,
      .usage = "--extract NAME=SELECTOR      a field: the first match (SELECTOR [@attr|::html])"},
     .later = add_extract_rule,
     .target = ""},
    {{.name = "extract-all", .alias = "extract_all", .kind = HV_OPT_VALUE,
      .usage = "--extract-all NAME=SELECTOR  a field: every match, as a list"},
     .later = add_extract_rule,
     .target = "[]"},
    {{.name = "links",
      .usage = "--links                the page's links (absolute URLs) as field 'links'"},
     .fixed = "links=@links",
     .later = add_extract_rule,
     .target = ""},
    {{.name = "rules", .kind = HV_OPT_VALUE,
      .usage = "--rules NAME           use the config's [rules \"NAME\"] set"},
     .later = set_directive,
     .target = "default_rules"},
    {{.name = "header", .kind = HV_OPT_VALUE,
      .usage = "--header 'NAME: VALUE'  a request header for every host (repeatable)"},
     .later = add_header},
    {{.letter = "v",
      .usage = "-v                     more logging (-vv for debug); -q for warnings only"},
     .fixed = "info",
     .later = set_directive,
     .target = "log_level"},
    {{.letter = "vv"}, .fixed = "debug", .later = set_directive, .target = "log_level"},
    {{.letter = "q"}, .fixed = "warning", .later = set_directive, .target = "log_level"},
    {{.name = "digest",
      .usage = "--digest               records carry body_digest (record_digest = yes)"},
     .fixed = "yes",
     .later = set_directive,
     .target = "record_digest"},
    {{.name = "help", .letter = "h", .usage = "-h, --help             this text"},
     .now = opt_help},
    {{.name = "version", .usage = "--version              the version"}, .now = opt_version},
    /* The manual pages' generator (`make man`), for the build only. */
    {{.name = "help-man", .kind = HV_OPT_VALUE}, .now = opt_help_man},
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
            "       harvestd report OUTPUT.jsonl [-o PAGE]  an HTML page summing up an output\n"
            "\n");
    hv_opt_print_usage(out, &cli_spec);
    fprintf(out, "\n"
                 "Directives (config 'name = value', or --name VALUE / --name=VALUE here;\n"
                 "sizes take k/m/g, durations ms/s/m/h):\n");
    hv_config_print_help(out);
    fprintf(out, "\nExit status: 0 done, 1 internal failure, 2 usage or configuration error,\n"
                 "3 --once interrupted.\n");
}

/* The manual page of `template_path` (hv_cmd_man()) on stdout: ARGS_ANSWERED or EXIT_USAGE. */
static int man_page(const char *template_path)
{
    return hv_cmd_man(template_path, stdout, &cli_spec) == 0 ? ARGS_ANSWERED : EXIT_USAGE;
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
        (hv_check_readable("config file", app->config_path, err, sizeof(err)) != 0 ||
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

int main(int argc, char **argv)
{
    app_t app;
    hv_tls_ctx_t *tls = NULL;
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
    if (argc > 1 && strcmp(argv[1], "report") == 0)
        return hv_cmd_report(argc - 1, argv + 1);

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

    rc = app.cfg.ca_file[0] ? hv_check_readable("CA file", app.cfg.ca_file, err, sizeof(err)) : 0;
    if (rc == 0)
        rc = hv_tls_ctx_new(app.cfg.ca_file[0] ? app.cfg.ca_file : NULL, app.cfg.insecure, &tls,
                            err, sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "harvestd: %s\n", err);
        hv_config_free(&app.cfg);
        return EXIT_USAGE;
    }
    if (app.check_only && hv_config_check_system(&app.cfg, err, sizeof(err)) != 0) {
        fprintf(stderr, "harvestd: %s\n", err);
        rc = EXIT_USAGE;
    } else if (app.check_only) {
        printf("harvestd: configuration OK%s%s\n", app.config_path ? ": " : "",
               app.config_path ? app.config_path : "");
        hv_config_print_headers(&app.cfg, stdout);
    } else {
        hv_loop_opts_t opts = {.config_path = app.config_path, .progress = app.progress};
        rc = hv_loop_run(&app.cfg, tls, &opts);
    }
    hv_tls_ctx_free(tls);
    hv_config_free(&app.cfg);
    return rc;
}
