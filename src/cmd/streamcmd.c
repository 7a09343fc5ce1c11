/*
 * streamcmd.c: `harvestd enqueue` and `harvestd status` (commands.h): their command lines
 * (streamcmd.h), what they print and their exit status, over streamctl.h, which does the work.
 */
#include "harvestd/streamcmd.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harvestd/commands.h"
#include "harvestd/common.h"
#include "harvestd/config.h"
#include "harvestd/options.h"
#include "harvestd/streamctl.h"
#include "harvestd/streamkeys.h"
#include "harvestd/tls.h"

enum { EXIT_OK = 0, EXIT_REDIS = 1, EXIT_USAGE = 2, EXIT_INCOMPLETE = 3 };

/* ------------------------------------------------------------------------------ options */

enum {
    O_REDIS,
    O_PASSWORD_FILE,
    O_CA_FILE,
    O_INSECURE,
    O_STREAM,
    O_BATCH,
    O_RULES,
    O_GROUP,
    O_JSON,
    O_TIMEOUT,
    O_CONFIG,
    O_HELP
};

/* The lines both commands' --help share. */
#define USAGE_REDIS                                                                                \
    "--redis URL         the Redis server (required):\n"                                         \
    "                    redis[s]://[[USER]:PASSWORD@]HOST[:PORT][/DB]"
#define USAGE_PASSWORD_FILE                                                                        \
    "--redis-password-file FILE\n"                                                                \
    "                    the password, instead of the URL's (one line; readable\n"                \
    "                    by its owner only)"
#define USAGE_CA_FILE                                                                              \
    "--ca-file FILE      rediss://: the CAs the server's certificate is checked\n"                \
    "                    against (default: the system's)"
#define USAGE_INSECURE "--insecure          rediss://: do not check the server's certificate"
#define USAGE_STREAM "--stream NAME       the stream (default " HV_STREAM_DEFAULT ")"
#define USAGE_TIMEOUT                                                                              \
    "--timeout DURATION  for the connection and for each reply (default 5s to\n"                 \
    "                    connect, 10s per reply; a bare number is in seconds)"
#define USAGE_HELP "--help              this text"

/* The rows both commands open with: where the stream is and how to reach it. */
#define CONNECTION_ROWS                                                                            \
    {.name = "redis", .kind = HV_OPT_VALUE, .id = O_REDIS, .usage = USAGE_REDIS},                  \
    {.name = "redis-password-file", .kind = HV_OPT_VALUE, .id = O_PASSWORD_FILE,                   \
     .usage = USAGE_PASSWORD_FILE},                                                                \
    {.name = "ca-file", .kind = HV_OPT_VALUE, .id = O_CA_FILE, .usage = USAGE_CA_FILE},            \
    {.name = "insecure", .id = O_INSECURE, .usage = USAGE_INSECURE},                               \
    {.name = "stream", .kind = HV_OPT_VALUE, .id = O_STREAM, .usage = USAGE_STREAM}

static const hv_opt_t enqueue_opts[] = {
    CONNECTION_ROWS,
    {.name = "batch", .kind = HV_OPT_VALUE, .id = O_BATCH,
     .usage = "--batch NAME        the batch (default: FILE's base name; needed for '-')"},
    {.name = "rules", .kind = HV_OPT_VALUE, .id = O_RULES,
     .usage = "--rules NAME        the [rules \"NAME\"] set the daemons apply to the batch\n"
              "                    (not checked without -c: an unknown NAME fails each entry)"},
    {.name = "config", .letter = "c", .kind = HV_OPT_VALUE, .id = O_CONFIG,
     .usage = "-c, --config FILE   the daemons' configuration: --rules must name one of its\n"
              "                    [rules] sections"},
    {.name = "timeout", .kind = HV_OPT_VALUE, .id = O_TIMEOUT, .usage = USAGE_TIMEOUT},
    {.name = "help", .id = O_HELP, .usage = USAGE_HELP},
};

static const hv_opt_t status_opts[] = {
    CONNECTION_ROWS,
    {.name = "group", .kind = HV_OPT_VALUE, .id = O_GROUP,
     .usage = "--group NAME        the consumer group (default " HV_STREAM_GROUP_DEFAULT ")"},
    {.name = "batch", .kind = HV_OPT_VALUE, .id = O_BATCH,
     .usage = "--batch NAME        a batch to show (repeatable)"},
    {.name = "json", .id = O_JSON,
     .usage = "--json              one JSON object instead of text lines"},
    {.name = "timeout", .kind = HV_OPT_VALUE, .id = O_TIMEOUT, .usage = USAGE_TIMEOUT},
    {.name = "help", .id = O_HELP, .usage = USAGE_HELP},
};

/* Long options (and enqueue's -c); "--" ends them; a flag given a value is an error of its
 * own. */
const hv_opt_spec_t hv_cmd_enqueue_spec = {
    .opts = enqueue_opts,
    .nopts = HV_ARRAY_SIZE(enqueue_opts),
    .rules = HV_OPT_DASHDASH,
    .say = HV_OPT_SAY_QUOTED,
};

const hv_opt_spec_t hv_cmd_status_spec = {
    .opts = status_opts,
    .nopts = HV_ARRAY_SIZE(status_opts),
    .rules = HV_OPT_DASHDASH,
    .say = HV_OPT_SAY_QUOTED,
};

static int parse_timeout(const char *v, uint64_t *out, char *err, size_t errcap)
{
    if (hv_parse_duration_ms(v, 1000, out) != 0 || *out == 0) {
        snprintf(err, errcap, "--timeout: '%s' is not a duration above zero (10s, 500ms)", v);
        return -1;
    }
    return 0;
}

static int check_name(const char *what, const char *v, char *err, size_t errcap)
{
    if (v[0] == '\0' || strlen(v) > HV_STREAM_NAME_MAX) {
        snprintf(err, errcap, "--%s: a name of 1 to %d bytes is needed", what, HV_STREAM_NAME_MAX);
        return -1;
    }
    return 0;
}

static int check_batch(const char *v, char *err, size_t errcap)
{
    if (!hv_streamkeys_batch_name_ok(v)) {
        snprintf(err, errcap, "'%s' is not a batch name (1 to %d bytes, no control characters)", v,
                 HV_STREAM_BATCH_MAX);
        return -1;
    }
    return 0;
}

static int check_redis(const char *url, hv_redis_addr_t *addr, char *err, size_t errcap)
{
    if (url == NULL) {
        snprintf(err, errcap, "--redis redis://HOST[:PORT][/DB] is required");
        return -1;
    }
    return hv_redis_url_parse(url, addr, err, errcap);
}

/* The options both commands take to reach Redis: 1 when `id` is one of them (kept). */
static int server_option(int id, const char *value, const char **url, const char **password_file,
                         const char **ca_file, int *insecure)
{
    switch (id) {
    case O_REDIS:
        *url = value;
        return 1;
    case O_PASSWORD_FILE:
        *password_file = value;
        return 1;
    case O_CA_FILE:
        *ca_file = value;
        return 1;
    case O_INSECURE:
        *insecure = 1;
        return 1;
    default:
        return 0;
    }
}

int hv_streamcmd_parse_enqueue(int argc, char **argv, hv_enqueue_args_t *out, char *err,
                               size_t errcap)
{
    hv_opt_parser_t p;
    hv_opt_arg_t a;
    int what;
    memset(out, 0, sizeof(*out));
    out->stream = HV_STREAM_DEFAULT;
    out->rules = "";
    hv_opt_init(&p, &hv_cmd_enqueue_spec, argc, argv);
    while ((what = hv_opt_next(&p, &a, err, errcap)) != HV_OPT_END) {
        if (what == HV_OPT_ERROR)
            return -1;
        if (what == HV_OPT_ARGUMENT) {
            if (out->file != NULL)
                return hv_errf(err, errcap, -1, "one FILE at a time ('%s' is a second)", a.word);
            out->file = a.word;
            continue;
        }
        if (server_option(a.opt->id, a.value, &out->redis_url, &out->password_file,
                          &out->ca_file, &out->insecure))
            continue;
        switch (a.opt->id) {
        case O_STREAM:
            out->stream = a.value;
            break;
        case O_BATCH:
            out->batch = a.value;
            break;
        case O_RULES:
            out->rules = a.value;
            break;
        case O_CONFIG:
            out->config = a.value;
            break;
        case O_TIMEOUT:
            if (parse_timeout(a.value, &out->timeout_ms, err, errcap) != 0)
                return -1;
            break;
        case O_HELP:
            out->help = 1;
            return 0;
        }
    }
    if (check_redis(out->redis_url, &out->addr, err, errcap) != 0 ||
        check_name("stream", out->stream, err, errcap) != 0)
        return -1;
    if (out->file == NULL)
        return hv_errf(err, errcap, -1, "a FILE to enqueue is needed ('-' for standard input)");
    if (out->batch == NULL) {
        if (strcmp(out->file, "-") == 0)
            return hv_errf(err, errcap, -1, "standard input needs --batch NAME");
        const char *slash = strrchr(out->file, '/');
        out->batch = slash != NULL ? slash + 1 : out->file;
    }
    return check_batch(out->batch, err, errcap);
}

int hv_streamcmd_parse_status(int argc, char **argv, hv_status_args_t *out, char *err,
                              size_t errcap)
{
    hv_opt_parser_t p;
    hv_opt_arg_t a;
    int what;
    memset(out, 0, sizeof(*out));
    out->stream = HV_STREAM_DEFAULT;
    out->group = HV_STREAM_GROUP_DEFAULT;
    out->batches = hv_xcalloc((size_t)argc + 1, sizeof(*out->batches));
    hv_opt_init(&p, &hv_cmd_status_spec, argc, argv);
    while ((what = hv_opt_next(&p, &a, err, errcap)) != HV_OPT_END) {
        if (what == HV_OPT_ERROR)
            goto bad;
        if (what == HV_OPT_ARGUMENT) {
            hv_errf(err, errcap, -1, "status takes no arguments ('%s')", a.word);
            goto bad;
        }
        if (server_option(a.opt->id, a.value, &out->redis_url, &out->password_file,
                          &out->ca_file, &out->insecure))
            continue;
        switch (a.opt->id) {
        case O_STREAM:
            out->stream = a.value;
            break;
        case O_GROUP:
            out->group = a.value;
            break;
        case O_BATCH: {
            if (check_batch(a.value, err, errcap) != 0)
                goto bad;
            size_t k = 0;
            while (k < out->nbatches && strcmp(out->batches[k], a.value) != 0)
                k++;
            if (k == out->nbatches)
                out->batches[out->nbatches++] = a.value;
            break;
        }
        case O_JSON:
            out->json = 1;
            break;
        case O_TIMEOUT:
            if (parse_timeout(a.value, &out->timeout_ms, err, errcap) != 0)
                goto bad;
            break;
        case O_HELP:
            out->help = 1;
            return 0;
        }
    }
    if (check_redis(out->redis_url, &out->addr, err, errcap) != 0 ||
        check_name("stream", out->stream, err, errcap) != 0 ||
        check_name("group", out->group, err, errcap) != 0)
        goto bad;
    return 0;
bad:
    hv_streamcmd_status_args_free(out);
    return -1;
}

void hv_streamcmd_status_args_free(hv_status_args_t *a)
{
    free(a->batches);
    a->batches = NULL;
    a->nbatches = 0;
}

static int usage_error(const char *cmd, const char *msg)
{
    fprintf(stderr, "harvestd: %s\nTry 'harvestd %s --help'.\n", msg, cmd);
    return EXIT_USAGE;
}

/* The server's address with its login settled (the password file read), and for rediss://
 * a TLS context with the trust store (`ca_file`, else the system's) or none (`insecure`), as
 * the daemon's: 0, or EXIT_USAGE said on stderr (naming the file, or the URL's user without a
 * password), like a daemon whose configuration cannot start. */
static int open_server(const char *url, const char *password_file, const char *ca_file,
                       int insecure, hv_redis_addr_t *addr, hv_tls_ctx_t **tls)
{
    char err[2048];
    *tls = NULL;
    if (hv_redis_url_load(url, password_file, addr, err, sizeof(err)) != 0)
        goto fail;
    if (!addr->tls)
        return 0;
    if ((ca_file != NULL && hv_check_readable("CA file", ca_file, err, sizeof(err)) != 0) ||
        hv_tls_ctx_new(ca_file, insecure, tls, err, sizeof(err)) != 0)
        goto fail;
    if (insecure)
        fprintf(stderr, "harvestd: warning: --insecure: the Redis server's certificate is NOT "
                        "verified\n");
    return 0;
fail:
    explicit_bzero(addr, sizeof(*addr));
    fprintf(stderr, "harvestd: %s\n", err);
    return EXIT_USAGE;
}

/* A failed call of streamctl's, said on stderr: the exit status. */
static int failed(const char *cmd, hv_streamctl_rc_t rc, const char *err)
{
    if (rc == HV_STREAMCTL_USAGE)
        return usage_error(cmd, err);
    fprintf(stderr, "harvestd: %s\n", err);
    return rc == HV_STREAMCTL_CONFLICT ? EXIT_USAGE : EXIT_REDIS;
}

/* ------------------------------------------------------------------------------ enqueue */

int hv_streamcmd_check_rules(const char *config, const char *rules, char *err, size_t errcap)
{
    hv_config_t *cfg = hv_xmalloc(sizeof(*cfg));
    char msg[1600];
    int rc = -1;

    hv_config_defaults(cfg);
    if (hv_check_readable("config file", config, msg, sizeof(msg)) != 0 ||
        hv_config_load_file(cfg, config, msg, sizeof(msg)) != 0) {
        snprintf(err, errcap, "-c: %s", msg);
        goto out;
    }
    if (rules[0] == '\0' || hv_config_ruleset(cfg, rules) != NULL) {
        rc = 0;
        goto out;
    }
    /* What the daemons would record for each entry of the batch (unknown_rules), said once
     * before any is added, with the names the file has. */
    size_t n = 0;
    msg[0] = '\0';
    for (unsigned i = 0; i < cfg->nrulesets && n < sizeof(msg); i++) {
        int w = snprintf(msg + n, sizeof(msg) - n, "%s'%s'", i > 0 ? ", " : "",
                         hv_ruleset_name(cfg->rulesets[i]));
        n += w > 0 ? (size_t)w : 0;
    }
    snprintf(err, errcap, "--rules '%s': %s has no [rules \"%s\"] section (%s%s)", rules, config,
             rules, cfg->nrulesets > 0 ? "it has " : "it has none", msg);
out:
    hv_config_free(cfg);
    free(cfg);
    return rc;
}

static void enqueue_help(FILE *out)
{
    fprintf(out,
            "usage: harvestd enqueue --redis URL [OPTIONS] FILE|-\n"
            "\n"
            "Adds the URL lines of FILE ('-' for standard input) to a Redis stream as one batch,\n"
            "with the line rules of --once: surrounding whitespace is trimmed, blank lines and\n"
            "lines starting with '#' are skipped, and each entry carries its line number in the\n"
            "file. Lines go in atomic chunks: a rerun of an interrupted enqueue adds the rest,\n"
            "and every line of a batch is added exactly once.\n"
            "\n");
    hv_opt_print_usage(out, &hv_cmd_enqueue_spec);
    fprintf(out,
            "\n"
            "Prints one summary line. Exit status: 0 enqueued, 1 Redis failure or a file that\n"
            "changed since the batch was started (what was added stays; a rerun continues),\n"
            "2 usage error (or a password file that cannot be used).\n");
}

int hv_cmd_enqueue(int argc, char **argv)
{
    hv_enqueue_args_t a;
    hv_streamctl_enqueue_t *e = NULL;
    hv_tls_ctx_t *tls = NULL;
    hv_streamctl_counts_t n;
    char err[2048];
    int status = EXIT_OK;

    if (hv_streamcmd_parse_enqueue(argc, argv, &a, err, sizeof(err)) != 0)
        return usage_error("enqueue", err);
    if (a.help) {
        enqueue_help(stdout);
        return EXIT_OK;
    }
    if (a.config != NULL && hv_streamcmd_check_rules(a.config, a.rules, err, sizeof(err)) != 0) {
        explicit_bzero(&a.addr, sizeof(a.addr));
        return usage_error("enqueue", err);
    }
    if (open_server(a.redis_url, a.password_file, a.ca_file, a.insecure, &a.addr, &tls) != 0)
        return EXIT_USAGE;
    /* A server that goes away must be a failed write, not a killed process. */
    signal(SIGPIPE, SIG_IGN);

    hv_streamctl_batch_spec_t spec = {
        .server = {.url = a.redis_url, .addr = a.addr, .tls = tls, .timeout_ms = a.timeout_ms},
        .stream = a.stream,
        .batch = a.batch,
        .rules = a.rules,
        .file = a.file,
    };
    hv_streamctl_rc_t rc = hv_streamctl_enqueue_open(&spec, &e, err, sizeof(err));
    if (rc == HV_STREAMCTL_OK) {
        hv_streamctl_enqueue_counts(e, &n);
        if (n.already > 0)
            fprintf(stderr, "harvestd: resuming: %" PRIu64 " lines already added\n", n.already);
        rc = hv_streamctl_enqueue_run(e, err, sizeof(err));
    }
    if (rc == HV_STREAMCTL_OK) {
        hv_streamctl_enqueue_counts(e, &n);
        printf("harvestd: enqueued batch %s on %s: %" PRIu64 " lines added (%" PRIu64
               " already there), total %" PRIu64 "\n",
               a.batch, a.stream, n.added, n.already, n.total);
        fflush(stdout);
    } else {
        status = failed("enqueue", rc, err);
    }
    hv_streamctl_enqueue_free(e);
    hv_tls_ctx_free(tls);
    explicit_bzero(&a.addr, sizeof(a.addr));
    explicit_bzero(&spec.server.addr, sizeof(spec.server.addr));
    return status;
}

/* ------------------------------------------------------------------------------ status */

static void status_help(FILE *out)
{
    fprintf(out,
            "usage: harvestd status --redis URL [OPTIONS]\n"
            "\n"
            "Shows each batch of a stream (the --batch ones, else every batch enqueued): lines\n"
            "added, its total, entries done (ok and failed), entries pending in the consumer\n"
            "group and which consumers hold them; then every consumer of the group, with the\n"
            "entries it holds and how long it has been idle. A batch is complete when its total\n"
            "is known and every line is done.\n"
            "\n");
    hv_opt_print_usage(out, &hv_cmd_status_spec);
    fprintf(out,
            "\n"
            "Exit status: 0 every batch shown is complete, 3 some are not (or unknown),\n"
            "1 Redis failure, 2 usage error (or a password file that cannot be used).\n");
}

static void print_text(const hv_streamctl_status_t *st)
{
    for (size_t i = 0; i < st->nbatches; i++) {
        const hv_streamctl_batch_t *b = st->batches[i];
        if (!b->exists) {
            printf("batch %s: unknown\n", b->name);
            continue;
        }
        char total[24] = "unknown";
        if (b->has_total)
            snprintf(total, sizeof(total), "%" PRIu64, b->total);
        printf("batch %s: added %" PRIu64 " total %s done %" PRIu64 " pending %" PRIu64
               " ok %" PRIu64 " failed %" PRIu64 " %s",
               b->name, b->added, total, b->done, b->pending, b->ok, b->failed,
               hv_streamctl_batch_complete(b) ? "complete" : "incomplete");
        if (b->dead > 0)
            printf(" dead %" PRIu64, b->dead);
        if (b->holders.n > 0) {
            printf(" holders:");
            for (size_t k = 0; k < b->holders.n; k++)
                printf(" %s=%" PRIu64, b->holders.v[k].name, b->holders.v[k].n);
        }
        printf("\n");
    }
    if (!st->group_exists) {
        printf("group %s: not created yet\n", st->group);
        return;
    }
    printf("group %s: pending %" PRIu64, st->group, st->group_pending);
    if (st->has_lag)
        printf(" lag %" PRIu64, st->lag);
    printf(" consumers %zu", st->consumers.n);
    if (st->dead_letters > 0)
        printf(" dead_letters %" PRIu64, st->dead_letters);
    if (st->gone > 0)
        printf(" (%" PRIu64 " pending entries no longer in the stream)", st->gone);
    printf("\n");
    for (size_t k = 0; k < st->consumers.n; k++) {
        const hv_streamctl_count_t *c = &st->consumers.v[k];
        printf("consumer %s: pending %" PRIu64, c->name, c->n);
        if (c->idle_ms >= 0)
            printf(" idle %" PRId64 ".%01" PRId64 "s", c->idle_ms / 1000, c->idle_ms % 1000 / 100);
        printf("\n");
    }
}

static cJSON *counts_json(const hv_streamctl_tally_t *c)
{
    cJSON *o = cJSON_CreateObject();
    for (size_t k = 0; k < c->n; k++)
        cJSON_AddNumberToObject(o, c->v[k].name, (double)c->v[k].n);
    return o;
}

/* {"NAME": {"pending": N, "idle_ms": MS or null}, ...} */
static cJSON *consumers_json(const hv_streamctl_tally_t *c)
{
    cJSON *o = cJSON_CreateObject();
    for (size_t k = 0; k < c->n; k++) {
        cJSON *one = cJSON_CreateObject();
        cJSON_AddNumberToObject(one, "pending", (double)c->v[k].n);
        if (c->v[k].idle_ms >= 0)
            cJSON_AddNumberToObject(one, "idle_ms", (double)c->v[k].idle_ms);
        else
            cJSON_AddNullToObject(one, "idle_ms");
        cJSON_AddItemToObject(o, c->v[k].name, one);
    }
    return o;
}

static int print_json(const hv_streamctl_status_t *st)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "stream", st->stream);
    cJSON_AddStringToObject(root, "group", st->group);
    cJSON_AddBoolToObject(root, "group_exists", st->group_exists);
    cJSON_AddNumberToObject(root, "pending", (double)st->group_pending);
    if (st->has_lag)
        cJSON_AddNumberToObject(root, "lag", (double)st->lag);
    else
        cJSON_AddNullToObject(root, "lag");
    cJSON *batches = cJSON_AddArrayToObject(root, "batches");
    for (size_t i = 0; i < st->nbatches; i++) {
        const hv_streamctl_batch_t *b = st->batches[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", b->name);
        if (!b->exists)
            cJSON_AddBoolToObject(o, "unknown", 1);
        cJSON_AddNumberToObject(o, "added", (double)b->added);
        if (b->has_total)
            cJSON_AddNumberToObject(o, "total", (double)b->total);
        else
            cJSON_AddNullToObject(o, "total");
        cJSON_AddNumberToObject(o, "done", (double)b->done);
        cJSON_AddNumberToObject(o, "pending", (double)b->pending);
        cJSON_AddNumberToObject(o, "ok", (double)b->ok);
        cJSON_AddNumberToObject(o, "failed", (double)b->failed);
        if (b->dead > 0)
            cJSON_AddNumberToObject(o, "dead", (double)b->dead);
        cJSON_AddBoolToObject(o, "complete", hv_streamctl_batch_complete(b));
        cJSON_AddItemToObject(o, "holders", counts_json(&b->holders));
        cJSON_AddItemToArray(batches, o);
    }
    cJSON_AddItemToObject(root, "consumers", consumers_json(&st->consumers));
    if (st->dead_letters > 0)
        cJSON_AddNumberToObject(root, "dead_letters", (double)st->dead_letters);
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (text == NULL) {
        fprintf(stderr, "harvestd: status: out of memory printing JSON\n");
        return -1;
    }
    printf("%s\n", text);
    cJSON_free(text);
    return 0;
}

int hv_cmd_status(int argc, char **argv)
{
    hv_status_args_t a;
    hv_streamctl_status_t *st = NULL;
    hv_tls_ctx_t *tls = NULL;
    char err[2048];
    int status = EXIT_OK;

    if (hv_streamcmd_parse_status(argc, argv, &a, err, sizeof(err)) != 0)
        return usage_error("status", err);
    if (a.help) {
        hv_streamcmd_status_args_free(&a);
        status_help(stdout);
        return EXIT_OK;
    }
    if (open_server(a.redis_url, a.password_file, a.ca_file, a.insecure, &a.addr, &tls) != 0) {
        hv_streamcmd_status_args_free(&a);
        return EXIT_USAGE;
    }
    signal(SIGPIPE, SIG_IGN);

    hv_streamctl_server_t server = {
        .url = a.redis_url, .addr = a.addr, .tls = tls, .timeout_ms = a.timeout_ms};
    hv_streamctl_rc_t rc = hv_streamctl_status_read(&server, a.stream, a.group, a.batches,
                                                    a.nbatches, &st, err, sizeof(err));
    if (rc != HV_STREAMCTL_OK) {
        status = failed("status", rc, err);
        goto out;
    }
    if (a.json) {
        if (print_json(st) != 0) {
            status = EXIT_REDIS;
            goto out;
        }
    } else {
        print_text(st);
    }
    fflush(stdout);
    for (size_t i = 0; i < st->nbatches; i++)
        if (!hv_streamctl_batch_complete(st->batches[i]))
            status = EXIT_INCOMPLETE;
out:
    hv_streamctl_status_free(st);
    hv_streamcmd_status_args_free(&a);
    hv_tls_ctx_free(tls);
    explicit_bzero(&a.addr, sizeof(a.addr));
    explicit_bzero(&server.addr, sizeof(server.addr));
    return status;
}
