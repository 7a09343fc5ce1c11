/*
 * streamcmd.c: `harvestd enqueue` and `harvestd status` (commands.h), over the key schema of
 * streamkeys.h.
 *
 * Each command owns a loop and one Redis connection (redis.h) and is written as a sequence of
 * steps: a step sends its commands (pipelined), and the loop runs until their replies are in.
 * Reply callbacks only record what came back, or report the first failure; the step after
 * them decides. The loop also runs the file reader (reader.h) for enqueue, which pauses when
 * a chunk of lines is full.
 *
 * enqueue adds a file in chunks, each with one script (the text is below) that checks the
 * batch's `added` count is the one this run expects, then adds the chunk's entries and bumps
 * the count, all at once: a chunk is either wholly in the stream or not at all. A rerun reads
 * `added` and skips that many URL lines of the file, so an interrupted enqueue (killed at any
 * point) is finished by running it again, and a second enqueue of the same batch running at
 * the same time fails at its next chunk instead of adding lines twice.
 *
 * status reads the batch hashes and the group's pending list. Which batch a pending entry
 * belongs to is in the entry itself, so each pending id is looked up with XRANGE, a page of
 * them pipelined at a time.
 */
#include "harvestd/streamcmd.h"

#include <assert.h>
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <uthash.h>
#include <uv.h>

#include "harvestd/commands.h"
#include "harvestd/common.h"
#include "harvestd/config.h"
#include "harvestd/dns.h"
#include "harvestd/log.h"
#include "harvestd/reader.h"
#include "harvestd/redis.h"
#include "harvestd/source.h"
#include "harvestd/streamkeys.h"

#define CONNECT_TIMEOUT_MS 5000
#define REPLY_TIMEOUT_MS 10000

enum { EXIT_OK = 0, EXIT_REDIS = 1, EXIT_USAGE = 2, EXIT_INCOMPLETE = 3 };

/* ------------------------------------------------------------------------------ options */

enum { O_REDIS, O_STREAM, O_BATCH, O_RULES, O_GROUP, O_JSON, O_TIMEOUT, O_HELP };

#define OPT_ARG (-2) /* not an option: an argument */
#define OPT_END (-3)
#define OPT_BAD (-1)

typedef struct {
    const char *name;
    int takes_value;
    int id;
} optdef_t;

static const optdef_t enqueue_opts[] = {
    {"redis", 1, O_REDIS}, {"stream", 1, O_STREAM},   {"batch", 1, O_BATCH},
    {"rules", 1, O_RULES}, {"timeout", 1, O_TIMEOUT}, {"help", 0, O_HELP},
};

static const optdef_t status_opts[] = {
    {"redis", 1, O_REDIS}, {"stream", 1, O_STREAM},   {"group", 1, O_GROUP}, {"batch", 1, O_BATCH},
    {"json", 0, O_JSON},   {"timeout", 1, O_TIMEOUT}, {"help", 0, O_HELP},
};

/* The next option at argv[*i] (its id, *value its value or NULL), an argument (OPT_ARG, in
 * *value), the end, or OPT_BAD with a message in err. */
static int next_opt(int argc, char **argv, int *i, int *args_only, const optdef_t *defs,
                    size_t ndefs, const char **value, char *err, size_t errcap)
{
    for (;;) {
        if (*i >= argc)
            return OPT_END;
        const char *arg = argv[(*i)++];
        if (*args_only || arg[0] != '-' || arg[1] == '\0') {
            *value = arg;
            return OPT_ARG;
        }
        if (strcmp(arg, "--") == 0) {
            *args_only = 1;
            continue;
        }
        if (arg[1] != '-')
            break;
        const char *eq = strchr(arg, '=');
        size_t nlen = eq != NULL ? (size_t)(eq - arg - 2) : strlen(arg + 2);
        for (size_t k = 0; k < ndefs; k++) {
            if (strlen(defs[k].name) != nlen || memcmp(defs[k].name, arg + 2, nlen) != 0)
                continue;
            if (!defs[k].takes_value) {
                if (eq != NULL) {
                    snprintf(err, errcap, "option '--%s' takes no value", defs[k].name);
                    return OPT_BAD;
                }
                *value = NULL;
            } else if (eq != NULL) {
                *value = eq + 1;
            } else if (*i < argc) {
                *value = argv[(*i)++];
            } else {
                snprintf(err, errcap, "option '--%s' needs a value", defs[k].name);
                return OPT_BAD;
            }
            return defs[k].id;
        }
        break;
    }
    snprintf(err, errcap, "unknown option '%s'", argv[*i - 1]);
    return OPT_BAD;
}

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
    if (v[0] == '\0' || strlen(v) > HV_STREAMCMD_NAME_MAX) {
        snprintf(err, errcap, "--%s: a name of 1 to %d bytes is needed", what,
                 HV_STREAMCMD_NAME_MAX);
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

int hv_streamcmd_parse_enqueue(int argc, char **argv, hv_enqueue_args_t *out, char *err,
                               size_t errcap)
{
    int i = 1, args_only = 0, id;
    const char *v = NULL;
    memset(out, 0, sizeof(*out));
    out->stream = HV_STREAM_DEFAULT;
    out->rules = "";
    while ((id = next_opt(argc, argv, &i, &args_only, enqueue_opts, HV_ARRAY_SIZE(enqueue_opts), &v,
                          err, errcap)) != OPT_END) {
        switch (id) {
        case OPT_BAD:
            return -1;
        case OPT_ARG:
            if (out->file != NULL) {
                snprintf(err, errcap, "one FILE at a time ('%s' is a second)", v);
                return -1;
            }
            out->file = v;
            break;
        case O_REDIS:
            out->redis_url = v;
            break;
        case O_STREAM:
            out->stream = v;
            break;
        case O_BATCH:
            out->batch = v;
            break;
        case O_RULES:
            out->rules = v;
            break;
        case O_TIMEOUT:
            if (parse_timeout(v, &out->timeout_ms, err, errcap) != 0)
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
    if (out->file == NULL) {
        snprintf(err, errcap, "a FILE to enqueue is needed ('-' for standard input)");
        return -1;
    }
    if (out->batch == NULL) {
        if (strcmp(out->file, "-") == 0) {
            snprintf(err, errcap, "standard input needs --batch NAME");
            return -1;
        }
        const char *slash = strrchr(out->file, '/');
        out->batch = slash != NULL ? slash + 1 : out->file;
    }
    return check_batch(out->batch, err, errcap);
}

int hv_streamcmd_parse_status(int argc, char **argv, hv_status_args_t *out, char *err,
                              size_t errcap)
{
    int i = 1, args_only = 0, id;
    const char *v = NULL;
    memset(out, 0, sizeof(*out));
    out->stream = HV_STREAM_DEFAULT;
    out->group = HV_STREAM_GROUP_DEFAULT;
    out->batches = hv_xcalloc((size_t)argc + 1, sizeof(*out->batches));
    while ((id = next_opt(argc, argv, &i, &args_only, status_opts, HV_ARRAY_SIZE(status_opts), &v,
                          err, errcap)) != OPT_END) {
        switch (id) {
        case OPT_BAD:
            goto bad;
        case OPT_ARG:
            snprintf(err, errcap, "status takes no arguments ('%s')", v);
            goto bad;
        case O_REDIS:
            out->redis_url = v;
            break;
        case O_STREAM:
            out->stream = v;
            break;
        case O_GROUP:
            out->group = v;
            break;
        case O_BATCH: {
            if (check_batch(v, err, errcap) != 0)
                goto bad;
            size_t k = 0;
            while (k < out->nbatches && strcmp(out->batches[k], v) != 0)
                k++;
            if (k == out->nbatches)
                out->batches[out->nbatches++] = v;
            break;
        }
        case O_JSON:
            out->json = 1;
            break;
        case O_TIMEOUT:
            if (parse_timeout(v, &out->timeout_ms, err, errcap) != 0)
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

/* ------------------------------------------------------------------------------ client */

/* A loop with one connection. The first failure is reported on stderr, with the server's
 * URL; what fails after it (commands cancelled by the broken connection) is not. */
typedef struct {
    uv_loop_t loop;
    hv_dns_t *dns;
    hv_conn_stats_t stats;
    hv_conn_env_t env;
    hv_redis_t *r;
    const char *url;
    uint64_t connect_timeout_ms;
    uint64_t reply_timeout_ms;
    int connecting;
    int failed;
} client_t;

__attribute__((format(printf, 3, 0))) static void client_vfail(client_t *s, int url_said,
                                                             const char *fmt, va_list ap)
{
    char msg[1024];
    if (s->failed)
        return;
    s->failed = 1;
    vsnprintf(msg, sizeof(msg), fmt, ap);
    if (url_said)
        fprintf(stderr, "harvestd: redis: %s\n", msg);
    else
        fprintf(stderr, "harvestd: redis: %s (%s)\n", msg, s->url);
}

__attribute__((format(printf, 2, 3))) static void client_fail(client_t *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    client_vfail(s, 0, fmt, ap);
    va_end(ap);
}

__attribute__((format(printf, 2, 3))) static void client_fail_at(client_t *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    client_vfail(s, 1, fmt, ap);
    va_end(ap);
}

static void client_fail_connect(client_t *s, int status)
{
    if (status == UV_ETIMEDOUT)
        client_fail_at(s, "cannot connect to %s: no answer within %" PRIu64 " ms", s->url,
                       s->connect_timeout_ms);
    else
        client_fail_at(s, "cannot connect to %s: %s (%s)", s->url, hv_strerror(status),
                       hv_err_name(status));
}

/* A command (`what`: its name and key) that got no reply within `ms`. */
static void client_fail_status_within(client_t *s, const char *what, int status, uint64_t ms)
{
    if (status == UV_ETIMEDOUT)
        client_fail(s, "%s: no reply within %" PRIu64 " ms", what, ms);
    else if (status == UV_EOF)
        client_fail(s, "%s: the server closed the connection", what);
    else
        client_fail(s, "%s: %s (%s)", what, hv_strerror(status), hv_err_name(status));
}

static void client_fail_status(client_t *s, const char *what, int status)
{
    client_fail_status_within(s, what, status, s->reply_timeout_ms);
}

/* A failed connect: the connection's, or that of the SELECT made once connected (whose
 * reply is due within the connect timeout). */
static void on_client_connect(hv_redis_t *r, int status)
{
    client_t *s = hv_redis_data(r);
    if (status == HV_EREFUSED)
        client_fail(s, "SELECT: %s", hv_redis_refusal(r));
    else if (status != 0 && hv_redis_failed_command(r) != NULL)
        client_fail_status_within(s, hv_redis_failed_command(r), status, s->connect_timeout_ms);
    else if (status != 0)
        client_fail_connect(s, status);
    s->connecting = 0;
}

static void on_client_error(hv_redis_t *r, int err)
{
    client_t *s = hv_redis_data(r);
    if (err == UV_EOF)
        client_fail_at(s, "%s closed the connection", s->url);
    else
        client_fail_at(s, "connection to %s lost: %s (%s)", s->url, hv_strerror(err),
                       hv_err_name(err));
}

static const hv_redis_cbs_t client_cbs = {on_client_connect, on_client_error};

/* A reply a callback can use: status 0 and not an error reply. Otherwise the failure is
 * reported as `what`'s (the command and its key). */
static int reply_usable(client_t *s, const char *what, int status, const redisReply *reply)
{
    if (status != 0) {
        client_fail_status(s, what, status);
        return 0;
    }
    if (reply->type == REDIS_REPLY_ERROR) {
        client_fail(s, "%s: %.*s", what, (int)reply->len, reply->str);
        return 0;
    }
    return 1;
}

static void unexpected(client_t *s, const char *what, const redisReply *reply)
{
    client_fail(s, "%s: unexpected reply (type %d)", what, reply->type);
}

static void client_send(client_t *s, int argc, const char **argv, const size_t *lens,
                        hv_redis_reply_cb cb, void *data)
{
    size_t own[8];
    if (s->failed)
        return;
    if (lens == NULL) {
        assert(argc <= (int)HV_ARRAY_SIZE(own));
        for (int k = 0; k < argc && k < (int)HV_ARRAY_SIZE(own); k++)
            own[k] = strlen(argv[k]);
        lens = own;
    }
    int rc = hv_redis_command(s->r, argc, argv, lens, s->reply_timeout_ms, cb, data);
    if (rc != 0)
        client_fail_status(s, argv[0], rc);
}

#define SEND(s, cb, data, ...)                                                                     \
    client_send((s), (int)HV_ARRAY_SIZE(((const char *[]){__VA_ARGS__})),                          \
                (const char *[]){__VA_ARGS__}, NULL, (cb), (data))

/* One turn of the loop, for a caller waiting for something the loop brings. A loop with
 * nothing left to run while it waits is a bug of ours, reported as a failure rather than
 * spun on. */
static void client_turn(client_t *s)
{
    if (uv_run(&s->loop, UV_RUN_ONCE) == 0 && !s->failed)
        client_fail(s, "internal error: nothing left to wait for");
}

/* Wait for every reply due. 0, or -1 once anything failed. */
static int client_wait(client_t *s)
{
    while (!s->failed && hv_redis_pending(s->r) > 0)
        if (uv_run(&s->loop, UV_RUN_ONCE) == 0 && hv_redis_pending(s->r) > 0)
            client_fail(s, "internal error: replies due but nothing left to wait for");
    return s->failed ? -1 : 0;
}

static int client_init(client_t *s, const char *url, uint64_t timeout_ms)
{
    memset(s, 0, sizeof(*s));
    s->url = url;
    s->connect_timeout_ms = timeout_ms != 0 ? timeout_ms : CONNECT_TIMEOUT_MS;
    s->reply_timeout_ms = timeout_ms != 0 ? timeout_ms : REPLY_TIMEOUT_MS;
    int rc = uv_loop_init(&s->loop);
    if (rc != 0) {
        fprintf(stderr, "harvestd: cannot start a loop: %s\n", hv_strerror(rc));
        return -1;
    }
    s->dns = hv_dns_new(&s->loop, 60000, 4);
    s->env.loop = &s->loop;
    s->env.dns = s->dns;
    s->env.guard = NULL; /* the operator's server, not a fetched URL's */
    s->env.stats = &s->stats;
    return 0;
}

/* Connect (on the URL's database). 0, or -1 (reported). */
static int client_connect(client_t *s, const hv_redis_addr_t *addr)
{
    int rc = hv_redis_connect(&s->env, addr, s->connect_timeout_ms, &client_cbs, s, &s->r);
    if (rc != 0) {
        client_fail_connect(s, rc);
        return -1;
    }
    s->connecting = 1;
    while (s->connecting && !s->failed)
        client_turn(s);
    s->connecting = 0;
    return s->failed ? -1 : 0;
}

static void on_leftover(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h)) {
        HV_LOG(HV_LOG_WARNING, "event=leftover_handle type=%s", uv_handle_type_name(h->type));
        uv_close(h, NULL);
    }
}

/* Close the connection and the loop. Everything else on the loop is closed first. */
static void client_close(client_t *s)
{
    if (s->r != NULL) {
        s->failed = 1; /* what is cancelled now is not news */
        hv_redis_close(s->r);
        s->r = NULL;
    }
    hv_dns_close(s->dns);
    uv_run(&s->loop, UV_RUN_DEFAULT);
    if (uv_loop_close(&s->loop) != 0) {
        uv_walk(&s->loop, on_leftover, NULL);
        uv_run(&s->loop, UV_RUN_DEFAULT);
        uv_loop_close(&s->loop);
    }
}

/* TYPE KEY: the key is missing, or of the type wanted; any other type is a failure. */
typedef struct {
    client_t *s;
    const char *key;
    const char *want;
    int exists;
} type_check_t;

static void on_type(hv_redis_t *r, void *data, int status, const redisReply *reply)
{
    type_check_t *t = data;
    char what[HV_STREAMCMD_NAME_MAX + HV_STREAM_BATCH_MAX + 32];
    (void)r;
    snprintf(what, sizeof(what), "TYPE %s", t->key);
    if (!reply_usable(t->s, what, status, reply))
        return;
    if (reply->type != REDIS_REPLY_STATUS) {
        unexpected(t->s, what, reply);
        return;
    }
    if (strcmp(reply->str, "none") == 0)
        return;
    if (strcmp(reply->str, t->want) != 0) {
        client_fail(t->s, "%s is a %s, not a %s", t->key, reply->str, t->want);
        return;
    }
    t->exists = 1;
}

static void send_type(type_check_t *t, client_t *s, const char *key, const char *want)
{
    t->s = s;
    t->key = key;
    t->want = want;
    t->exists = 0;
    SEND(s, on_type, t, "TYPE", key);
}

/* A hash field holding a count: 0 when missing (nil), 1 when read, -1 (reported) when it
 * holds something else. */
static int field_count(client_t *s, const char *key, const char *field, const redisReply *v,
                       uint64_t *out)
{
    *out = 0;
    if (v->type == REDIS_REPLY_NIL)
        return 0;
    if (v->type == REDIS_REPLY_STRING && hv_parse_uint(v->str, out) == 0)
        return 1;
    client_fail(s, "%s: field %s is not a count: '%.*s'", key, field,
                v->type == REDIS_REPLY_STRING ? (int)HV_MIN(v->len, 64) : 0,
                v->type == REDIS_REPLY_STRING ? v->str : "");
    return -1;
}

/* ------------------------------------------------------------------------------ enqueue */

/*
 * The script of one chunk. KEYS: the stream, the batch's hash, the set of batches. ARGV: the
 * `added` count the chunk follows, the rules name ("" for none), the batch's name, its total
 * ("" but in the last chunk), then a line number and a URL per entry. Every check comes
 * before the first write, so that a refused chunk leaves nothing behind (a script's writes
 * are not undone when it fails half-way). Error replies start with a code of ours.
 */
static const char enqueue_script[] =
    "for i, t in ipairs({'stream', 'hash', 'set'}) do\n"
    "  local have = redis.call('TYPE', KEYS[i]).ok\n"
    "  if have ~= 'none' and have ~= t then\n"
    "    return redis.error_reply('HVTYPE ' .. KEYS[i] .. ' is a ' .. have .. ', not a ' .. t)\n"
    "  end\n"
    "end\n"
    "local added = redis.call('HGET', KEYS[2], 'added') or '0'\n"
    "if tonumber(added) ~= tonumber(ARGV[1]) then\n"
    "  return redis.error_reply('HVADDED ' .. added)\n"
    "end\n"
    "local rules = redis.call('HGET', KEYS[2], 'rules')\n"
    "if rules and rules ~= ARGV[2] then\n"
    "  return redis.error_reply('HVRULES ' .. rules)\n"
    "end\n"
    "if ARGV[4] ~= '' then\n"
    "  local total = redis.call('HGET', KEYS[2], 'total')\n"
    "  if total and total ~= ARGV[4] then\n"
    "    return redis.error_reply('HVTOTAL ' .. total)\n"
    "  end\n"
    "end\n"
    "local n = 0\n"
    "for i = 5, #ARGV - 1, 2 do\n"
    "  if ARGV[2] == '' then\n"
    "    redis.call('XADD', KEYS[1], '*', 'batch', ARGV[3], 'line', ARGV[i], 'url', ARGV[i + 1])\n"
    "  else\n"
    "    redis.call('XADD', KEYS[1], '*', 'batch', ARGV[3], 'line', ARGV[i], 'url', ARGV[i + 1],\n"
    "               'rules', ARGV[2])\n"
    "  end\n"
    "  n = n + 1\n"
    "end\n"
    "redis.call('HINCRBY', KEYS[2], 'added', n)\n"
    "redis.call('HSETNX', KEYS[2], 'rules', ARGV[2])\n"
    "if ARGV[4] ~= '' then\n"
    "  redis.call('HSET', KEYS[2], 'total', ARGV[4])\n"
    "end\n"
    "redis.call('SADD', KEYS[3], ARGV[3])\n"
    "return tonumber(added) + n\n";

#define CHUNK_LINES 500
#define CHUNK_BYTES (1024 * 1024)
#define SCRIPT_ARGS 10 /* EVALSHA sha 3 KEYS[1..3] ARGV[1..4] */

typedef enum {
    CHUNK_WAITING,
    CHUNK_ADDED,
    CHUNK_NOSCRIPT, /* the script cache was emptied since SCRIPT LOAD: send the text */
    CHUNK_RACE,     /* `added` is not what this run expects: another enqueue of the batch */
    CHUNK_RULES,    /* the batch got other rules meanwhile */
    CHUNK_TOTAL,    /* the batch's total is another */
    CHUNK_FAILED,   /* reported */
} chunk_outcome_t;

typedef struct {
    client_t s;
    const hv_enqueue_args_t *a;
    char key_batch[HV_STREAMCMD_NAME_MAX + HV_STREAM_BATCH_MAX + 16];
    char key_batches[HV_STREAMCMD_NAME_MAX + 16];
    type_check_t types[3];
    hv_source_t *src;
    char sha[41];

    /* The batch's hash before this run. */
    uint64_t added0;
    int has_total;
    uint64_t total0;
    char *rules0; /* NULL: not set */

    /* Reading. */
    uint64_t seen; /* URL lines read, those already added included */
    int chunk_ready;
    int ended;
    int read_status;
    int grew; /* the file has more lines than the batch's total */

    /* The chunk being filled, then in flight. */
    size_t n;
    char lineno[CHUNK_LINES][24];
    size_t url_off[CHUNK_LINES];
    size_t url_len[CHUNK_LINES];
    size_t arena_len;
    char arena[CHUNK_BYTES + HV_READER_LINE_MAX];
    const char *argv[SCRIPT_ARGS + 2 * CHUNK_LINES];
    size_t argvlen[SCRIPT_ARGS + 2 * CHUNK_LINES];
    chunk_outcome_t outcome;
    char outcome_text[256];

    uint64_t added; /* by this run */
} enqueue_t;

static void enqueue_help(FILE *out)
{
    fprintf(out,
            "usage: harvestd enqueue --redis redis://HOST[:PORT][/DB] [OPTIONS] FILE|-\n"
            "\n"
            "Adds the URL lines of FILE ('-' for standard input) to a Redis stream as one batch,\n"
            "with the line rules of --once: surrounding whitespace is trimmed, blank lines and\n"
            "lines starting with '#' are skipped, and each entry carries its line number in the\n"
            "file. Lines go in atomic chunks: a rerun of an interrupted enqueue adds the rest,\n"
            "and every line of a batch is added exactly once.\n"
            "\n"
            "  --redis URL         the Redis server (required)\n"
            "  --stream NAME       the stream (default " HV_STREAM_DEFAULT ")\n"
            "  --batch NAME        the batch (default: FILE's base name; needed for '-')\n"
            "  --rules NAME        the [rules \"NAME\"] set the daemons apply to the batch\n"
            "  --timeout DURATION  for the connection and for each reply (default 5s to\n"
            "                      connect, 10s per reply; a bare number is in seconds)\n"
            "  --help              this text\n"
            "\n"
            "Prints one summary line. Exit status: 0 enqueued, 1 Redis failure or a file that\n"
            "changed since the batch was started (what was added stays; a rerun continues),\n"
            "2 usage error.\n");
}

static int on_enqueue_line(void *ud, const char *line, size_t len, uint64_t lineno, int overlong,
                           const hv_line_meta_t *meta)
{
    enqueue_t *e = ud;
    /* An overlong line is added as the prefix the reader kept: longer than any URL, it is
     * failed as invalid by the daemon that takes it, as --once fails it. */
    (void)overlong, (void)meta;
    e->seen++;
    if (e->seen <= e->added0)
        return 0;
    if (e->has_total && e->seen > e->total0) {
        e->grew = 1;
        return 1;
    }
    size_t i = e->n++;
    snprintf(e->lineno[i], sizeof(e->lineno[i]), "%" PRIu64, lineno);
    len = HV_MIN(len, (size_t)HV_READER_LINE_MAX); /* the reader's bound already */
    memcpy(e->arena + e->arena_len, line, len);
    e->url_off[i] = e->arena_len;
    e->url_len[i] = len;
    e->arena_len += len;
    if (e->n == CHUNK_LINES || e->arena_len >= CHUNK_BYTES) {
        e->chunk_ready = 1;
        return 1;
    }
    return 0;
}

static void on_enqueue_end(void *ud, int status)
{
    enqueue_t *e = ud;
    e->ended = 1;
    e->read_status = status;
}

static const hv_sink_t enqueue_sink = {on_enqueue_line, on_enqueue_end};

static void on_batch_hash(hv_redis_t *r, void *data, int status, const redisReply *reply)
{
    enqueue_t *e = data;
    char what[sizeof(e->key_batch) + 16];
    (void)r;
    snprintf(what, sizeof(what), "HMGET %s", e->key_batch);
    if (!reply_usable(&e->s, what, status, reply))
        return;
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 3) {
        unexpected(&e->s, what, reply);
        return;
    }
    if (field_count(&e->s, e->key_batch, "added", reply->element[0], &e->added0) < 0)
        return;
    int t = field_count(&e->s, e->key_batch, "total", reply->element[1], &e->total0);
    if (t < 0)
        return;
    e->has_total = t;
    const redisReply *rules = reply->element[2];
    if (rules->type == REDIS_REPLY_STRING)
        e->rules0 = hv_xstrndup(rules->str, rules->len);
}

static void on_script_load(hv_redis_t *r, void *data, int status, const redisReply *reply)
{
    enqueue_t *e = data;
    (void)r;
    if (!reply_usable(&e->s, "SCRIPT LOAD", status, reply))
        return;
    if (reply->type != REDIS_REPLY_STRING || reply->len != 40) {
        unexpected(&e->s, "SCRIPT LOAD", reply);
        return;
    }
    memcpy(e->sha, reply->str, 40);
    e->sha[40] = '\0';
}

static int starts_with(const redisReply *reply, const char *prefix)
{
    size_t n = strlen(prefix);
    return reply->len >= n && memcmp(reply->str, prefix, n) == 0;
}

static void on_chunk(hv_redis_t *r, void *data, int status, const redisReply *reply)
{
    enqueue_t *e = data;
    char what[128];
    (void)r;
    if (status == 0 && reply->type == REDIS_REPLY_ERROR) {
        static const struct {
            const char *code;
            chunk_outcome_t outcome;
        } codes[] = {{"NOSCRIPT", CHUNK_NOSCRIPT},
                     {"HVADDED ", CHUNK_RACE},
                     {"HVRULES ", CHUNK_RULES},
                     {"HVTOTAL ", CHUNK_TOTAL}};
        for (size_t k = 0; k < HV_ARRAY_SIZE(codes); k++) {
            if (starts_with(reply, codes[k].code)) {
                size_t n = strlen(codes[k].code);
                snprintf(e->outcome_text, sizeof(e->outcome_text), "%.*s", (int)(reply->len - n),
                         reply->str + n);
                e->outcome = codes[k].outcome;
                return;
            }
        }
        if (starts_with(reply, "HVTYPE ")) {
            client_fail(&e->s, "%.*s", (int)(reply->len - 7), reply->str + 7);
            e->outcome = CHUNK_FAILED;
            return;
        }
    }
    if (e->n > 0)
        snprintf(what, sizeof(what), "adding lines %s to %s", e->lineno[0], e->lineno[e->n - 1]);
    else
        snprintf(what, sizeof(what), "setting the batch's total");
    if (!reply_usable(&e->s, what, status, reply)) {
        e->outcome = CHUNK_FAILED;
        return;
    }
    if (reply->type != REDIS_REPLY_INTEGER ||
        (uint64_t)reply->integer != e->added0 + e->added + e->n) {
        client_fail(&e->s, "%s: unexpected reply", what);
        e->outcome = CHUNK_FAILED;
        return;
    }
    e->outcome = CHUNK_ADDED;
}

static void send_chunk(enqueue_t *e, int final, int with_text)
{
    char expected[24], total[24];
    snprintf(expected, sizeof(expected), "%" PRIu64, e->added0 + e->added);
    if (final)
        snprintf(total, sizeof(total), "%" PRIu64, e->seen);
    else
        total[0] = '\0';
    const char *head[SCRIPT_ARGS] = {with_text ? "EVAL" : "EVALSHA",
                                     with_text ? enqueue_script : e->sha,
                                     "3",
                                     e->a->stream,
                                     e->key_batch,
                                     e->key_batches,
                                     expected,
                                     e->a->rules,
                                     e->a->batch,
                                     total};
    for (int k = 0; k < SCRIPT_ARGS; k++) {
        e->argv[k] = head[k];
        e->argvlen[k] = strlen(head[k]);
    }
    for (size_t i = 0; i < e->n; i++) {
        e->argv[SCRIPT_ARGS + 2 * i] = e->lineno[i];
        e->argvlen[SCRIPT_ARGS + 2 * i] = strlen(e->lineno[i]);
        e->argv[SCRIPT_ARGS + 2 * i + 1] = e->arena + e->url_off[i];
        e->argvlen[SCRIPT_ARGS + 2 * i + 1] = e->url_len[i];
    }
    e->outcome = CHUNK_WAITING;
    client_send(&e->s, SCRIPT_ARGS + 2 * (int)e->n, e->argv, e->argvlen, on_chunk, e);
}

/* Add the chunk (the last one with the total); EXIT_OK, or the exit status (reported). */
static int add_chunk(enqueue_t *e, int final)
{
    send_chunk(e, final, 0);
    client_wait(&e->s);
    if (e->outcome == CHUNK_NOSCRIPT) {
        send_chunk(e, final, 1);
        client_wait(&e->s);
    }
    switch (e->outcome) {
    case CHUNK_ADDED:
        e->added += e->n;
        e->n = 0;
        e->arena_len = 0;
        return EXIT_OK;
    case CHUNK_RACE:
        fprintf(stderr,
                "harvestd: batch %s: its added count is %s where this run expected %" PRIu64
                ": another enqueue of the batch is running (rerun it when that one is done)\n",
                e->a->batch, e->outcome_text, e->added0 + e->added);
        return EXIT_REDIS;
    case CHUNK_RULES:
        fprintf(stderr, "harvestd: batch %s: rules '%s' were set meanwhile (this run: '%s')\n",
                e->a->batch, e->outcome_text, e->a->rules);
        return EXIT_USAGE;
    case CHUNK_TOTAL:
        fprintf(stderr,
                "harvestd: batch %s has a total of %s lines, but '%s' has %" PRIu64
                ": the file changed since the batch was enqueued\n",
                e->a->batch, e->outcome_text, e->a->file, e->seen);
        return EXIT_REDIS;
    case CHUNK_NOSCRIPT:
        client_fail(&e->s, "EVAL: the server says NOSCRIPT for the script's own text");
        return EXIT_REDIS;
    case CHUNK_WAITING:
    case CHUNK_FAILED:
        break;
    }
    return EXIT_REDIS;
}

/* Read the batch's hash (and check each key's type), load the script. */
static int enqueue_prepare(enqueue_t *e)
{
    client_t *s = &e->s;
    send_type(&e->types[0], s, e->a->stream, "stream");
    send_type(&e->types[1], s, e->key_batch, "hash");
    send_type(&e->types[2], s, e->key_batches, "set");
    SEND(s, on_batch_hash, e, "HMGET", e->key_batch, "added", "total", "rules");
    SEND(s, on_script_load, e, "SCRIPT", "LOAD", enqueue_script);
    if (client_wait(s) != 0)
        return EXIT_REDIS;
    if (e->rules0 != NULL && strcmp(e->rules0, e->a->rules) != 0) {
        fprintf(stderr,
                "harvestd: batch %s was enqueued with rules '%s', this run has '%s': a batch has "
                "one rules set ('' for none)\n",
                e->a->batch, e->rules0, e->a->rules);
        return EXIT_USAGE;
    }
    if (e->added0 > 0)
        fprintf(stderr, "harvestd: resuming: %" PRIu64 " lines already added\n", e->added0);
    return EXIT_OK;
}

/* Read the file and add it chunk by chunk, then set the total. */
static int enqueue_load(enqueue_t *e)
{
    client_t *s = &e->s;
    hv_source_start(e->src, &enqueue_sink, e);
    for (;;) {
        while (!e->chunk_ready && !e->ended && !e->grew && !s->failed)
            client_turn(s);
        if (s->failed)
            return EXIT_REDIS;
        if (e->grew) {
            fprintf(stderr,
                    "harvestd: batch %s has a total of %" PRIu64 " lines, but '%s' has more: "
                    "the file changed since the batch was enqueued\n",
                    e->a->batch, e->total0, e->a->file);
            return EXIT_REDIS;
        }
        if (e->ended && e->read_status == 0 && e->seen < e->added0) {
            fprintf(stderr,
                    "harvestd: batch %s has %" PRIu64 " lines added, but '%s' has only %" PRIu64
                    ": the file changed since the batch was enqueued\n",
                    e->a->batch, e->added0, e->a->file, e->seen);
            return EXIT_REDIS;
        }
        if (e->ended && e->read_status == 0 && e->has_total && e->seen != e->total0) {
            fprintf(stderr,
                    "harvestd: batch %s has a total of %" PRIu64 " lines, but '%s' has %" PRIu64
                    ": the file changed since the batch was enqueued\n",
                    e->a->batch, e->total0, e->a->file, e->seen);
            return EXIT_REDIS;
        }
        if (e->ended && e->read_status != 0) {
            fprintf(stderr, "harvestd: cannot read '%s': %s (%s)\n", e->a->file,
                    hv_strerror(e->read_status), hv_err_name(e->read_status));
            return EXIT_REDIS;
        }
        int rc = add_chunk(e, e->ended);
        if (rc != EXIT_OK || e->ended)
            return rc;
        e->chunk_ready = 0;
        hv_source_resume(e->src);
    }
}

int hv_cmd_enqueue(int argc, char **argv)
{
    hv_enqueue_args_t a;
    char err[1200];
    if (hv_streamcmd_parse_enqueue(argc, argv, &a, err, sizeof(err)) != 0)
        return usage_error("enqueue", err);
    if (a.help) {
        enqueue_help(stdout);
        return EXIT_OK;
    }
    /* A server that goes away must be a failed write, not a killed process. */
    signal(SIGPIPE, SIG_IGN);

    enqueue_t *e = hv_xcalloc(1, sizeof(*e));
    int rc = EXIT_OK, inited = 0, orc;
    e->a = &a;
    if (hv_streamkeys_batch(a.stream, a.batch, e->key_batch, sizeof(e->key_batch)) != 0 ||
        hv_streamkeys_batches(a.stream, e->key_batches, sizeof(e->key_batches)) != 0) {
        rc = usage_error("enqueue", "the stream or batch name is too long");
        goto out;
    }
    if (strcmp(a.file, "-") != 0) {
        struct stat st;
        if (stat(a.file, &st) == 0 && S_ISDIR(st.st_mode)) {
            snprintf(err, sizeof(err), "'%s' is a directory, not a URL file", a.file);
            rc = usage_error("enqueue", err);
            goto out;
        }
    }
    if (client_init(&e->s, a.redis_url, a.timeout_ms) != 0) {
        rc = EXIT_REDIS;
        goto out;
    }
    inited = 1;
    /* The file is opened before Redis is touched: a path that cannot be read is a mistake
     * in the command line. */
    orc = hv_reader_open(&e->s.loop, a.file, &e->src);
    if (orc != 0) {
        snprintf(err, sizeof(err), "cannot open '%s': %s", a.file, hv_strerror(orc));
        rc = usage_error("enqueue", err);
        goto out;
    }
    if (client_connect(&e->s, &a.addr) != 0) {
        rc = EXIT_REDIS;
        goto out;
    }
    rc = enqueue_prepare(e);
    if (rc == EXIT_OK)
        rc = enqueue_load(e);
    if (rc == EXIT_OK) {
        printf("harvestd: enqueued batch %s on %s: %" PRIu64 " lines added (%" PRIu64
               " already there), total %" PRIu64 "\n",
               a.batch, a.stream, e->added, e->added0, e->seen);
        fflush(stdout);
    }
out:
    if (e->src != NULL)
        hv_source_close(e->src);
    if (inited)
        client_close(&e->s);
    free(e->rules0);
    free(e);
    return rc;
}

/* ------------------------------------------------------------------------------ status */

/* A page of the group's pending list, then one XRANGE per entry of it. */
#define PAGE_SIZE 1000

typedef struct {
    char *name;
    uint64_t n;
} count_t;

typedef struct {
    count_t *v;
    size_t n;
    size_t cap;
} counts_t;

static void counts_add(counts_t *c, const char *name, size_t len, uint64_t n)
{
    for (size_t i = 0; i < c->n; i++) {
        if (strlen(c->v[i].name) == len && memcmp(c->v[i].name, name, len) == 0) {
            c->v[i].n += n;
            return;
        }
    }
    if (c->n == c->cap) {
        c->cap = c->cap != 0 ? 2 * c->cap : 4;
        c->v = hv_xrealloc(c->v, c->cap * sizeof(*c->v));
    }
    c->v[c->n].name = hv_xstrndup(name, len);
    c->v[c->n].n = n;
    c->n++;
}

static int count_cmp(const void *x, const void *y)
{
    return strcmp(((const count_t *)x)->name, ((const count_t *)y)->name);
}

static void counts_sort(counts_t *c)
{
    if (c->n > 1)
        qsort(c->v, c->n, sizeof(*c->v), count_cmp);
}

static void counts_free(counts_t *c)
{
    for (size_t i = 0; i < c->n; i++)
        free(c->v[i].name);
    free(c->v);
    memset(c, 0, sizeof(*c));
}

typedef struct status_s status_t;

typedef struct {
    status_t *st;
    char *name;
    char *key;
    type_check_t type;
    uint64_t added, total, done, ok, failed;
    int has_total;
    uint64_t pending;
    counts_t holders;
    UT_hash_handle hh;
} sbatch_t;

typedef struct {
    status_t *st;
    char id[48];
    char *consumer;
} pending_entry_t;

struct status_s {
    client_t s;
    const hv_status_args_t *a;
    char key_batches[HV_STREAMCMD_NAME_MAX + 16];
    type_check_t stream_type;
    type_check_t batches_type;
    sbatch_t **list; /* sorted by name (when read from the set) or as given */
    size_t nlist;
    size_t caplist;
    sbatch_t *by_name;

    int group_exists;
    uint64_t group_pending;
    int has_lag;
    uint64_t lag;
    counts_t consumers;
    uint64_t gone;  /* pending entries no longer in the stream, or without a batch field */
    uint64_t other; /* pending entries of batches not shown */

    pending_entry_t page[PAGE_SIZE];
    size_t npage;
};

static void status_help(FILE *out)
{
    fprintf(out,
            "usage: harvestd status --redis redis://HOST[:PORT][/DB] [OPTIONS]\n"
            "\n"
            "Shows each batch of a stream (the --batch ones, else every batch enqueued): lines\n"
            "added, its total, entries done (ok and failed), entries pending in the consumer\n"
            "group and which consumers hold them; then the group's pending entries per\n"
            "consumer. A batch is complete when its total is known and every line is done.\n"
            "\n"
            "  --redis URL         the Redis server (required)\n"
            "  --stream NAME       the stream (default " HV_STREAM_DEFAULT ")\n"
            "  --group NAME        the consumer group (default " HV_STREAM_GROUP_DEFAULT ")\n"
            "  --batch NAME        a batch to show (repeatable)\n"
            "  --json              one JSON object instead of text lines\n"
            "  --timeout DURATION  for the connection and for each reply (default 5s to\n"
            "                      connect, 10s per reply; a bare number is in seconds)\n"
            "  --help              this text\n"
            "\n"
            "Exit status: 0 every batch shown is complete, 3 some are not (or unknown),\n"
            "1 Redis failure, 2 usage error.\n");
}

static sbatch_t *status_add_batch(status_t *st, const char *name, size_t len)
{
    sbatch_t *b;
    HASH_FIND(hh, st->by_name, name, len, b);
    if (b != NULL)
        return b;
    b = hv_xcalloc(1, sizeof(*b));
    b->st = st;
    b->name = hv_xstrndup(name, len);
    size_t cap = strlen(st->a->stream) + len + 16;
    b->key = hv_xmalloc(cap);
    hv_streamkeys_batch(st->a->stream, b->name, b->key, cap);
    HASH_ADD_KEYPTR(hh, st->by_name, b->name, len, b);
    if (st->nlist == st->caplist) {
        st->caplist = st->caplist != 0 ? 2 * st->caplist : 16;
        st->list = hv_xrealloc(st->list, st->caplist * sizeof(*st->list));
    }
    st->list[st->nlist++] = b;
    return b;
}

static int batch_cmp(const void *x, const void *y)
{
    return strcmp((*(sbatch_t *const *)x)->name, (*(sbatch_t *const *)y)->name);
}

static void on_members(hv_redis_t *r, void *data, int status, const redisReply *reply)
{
    status_t *st = data;
    char what[sizeof(st->key_batches) + 16];
    (void)r;
    snprintf(what, sizeof(what), "SMEMBERS %s", st->key_batches);
    if (!reply_usable(&st->s, what, status, reply))
        return;
    if (reply->type != REDIS_REPLY_ARRAY) {
        unexpected(&st->s, what, reply);
        return;
    }
    for (size_t i = 0; i < reply->elements; i++)
        if (reply->element[i]->type == REDIS_REPLY_STRING)
            status_add_batch(st, reply->element[i]->str, reply->element[i]->len);
}

static void on_batch_fields(hv_redis_t *r, void *data, int status, const redisReply *reply)
{
    sbatch_t *b = data;
    client_t *s = &b->st->s;
    static const char *const names[] = {"added", "total", "done", "ok", "failed"};
    uint64_t *fields[] = {&b->added, &b->total, &b->done, &b->ok, &b->failed};
    char what[HV_STREAMCMD_NAME_MAX + HV_STREAM_BATCH_MAX + 32];
    (void)r;
    snprintf(what, sizeof(what), "HMGET %s", b->key);
    if (!reply_usable(s, what, status, reply))
        return;
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != HV_ARRAY_SIZE(names)) {
        unexpected(s, what, reply);
        return;
    }
    for (size_t i = 0; i < HV_ARRAY_SIZE(names); i++) {
        int got = field_count(s, b->key, names[i], reply->element[i], fields[i]);
        if (got < 0)
            return;
        if (i == 1)
            b->has_total = got;
    }
}

/* XINFO GROUPS: the group's lag (Redis 7; nil when the server cannot tell). */
static void on_groups(hv_redis_t *r, void *data, int status, const redisReply *reply)
{
    status_t *st = data;
    (void)r;
    if (!reply_usable(&st->s, "XINFO GROUPS", status, reply))
        return;
    if (reply->type != REDIS_REPLY_ARRAY) {
        unexpected(&st->s, "XINFO GROUPS", reply);
        return;
    }
    for (size_t i = 0; i < reply->elements; i++) {
        const redisReply *g = reply->element[i];
        const redisReply *name = NULL, *lag = NULL;
        if (g->type != REDIS_REPLY_ARRAY)
            continue;
        for (size_t k = 0; k + 1 < g->elements; k += 2) {
            const redisReply *key = g->element[k];
            if (key->type != REDIS_REPLY_STRING && key->type != REDIS_REPLY_STATUS)
                continue;
            if (strcmp(key->str, "name") == 0)
                name = g->element[k + 1];
            else if (strcmp(key->str, "lag") == 0)
                lag = g->element[k + 1];
        }
        if (name == NULL || name->type != REDIS_REPLY_STRING ||
            strcmp(name->str, st->a->group) != 0)
            continue;
        if (lag != NULL && lag->type == REDIS_REPLY_INTEGER && lag->integer >= 0) {
            st->has_lag = 1;
            st->lag = (uint64_t)lag->integer;
        }
    }
}

/* XPENDING S G: the group's pending count and the count per consumer; NOGROUP when the
 * group is not there. */
static void on_summary(hv_redis_t *r, void *data, int status, const redisReply *reply)
{
    status_t *st = data;
    (void)r;
    if (status == 0 && reply->type == REDIS_REPLY_ERROR && starts_with(reply, "NOGROUP")) {
        st->group_exists = 0;
        return;
    }
    if (!reply_usable(&st->s, "XPENDING", status, reply))
        return;
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 4 ||
        reply->element[0]->type != REDIS_REPLY_INTEGER) {
        unexpected(&st->s, "XPENDING", reply);
        return;
    }
    st->group_exists = 1;
    st->group_pending = (uint64_t)reply->element[0]->integer;
    const redisReply *cs = reply->element[3];
    for (size_t i = 0; cs->type == REDIS_REPLY_ARRAY && i < cs->elements; i++) {
        const redisReply *c = cs->element[i];
        uint64_t n = 0;
        if (c->type != REDIS_REPLY_ARRAY || c->elements != 2 ||
            c->element[0]->type != REDIS_REPLY_STRING)
            continue;
        if (c->element[1]->type == REDIS_REPLY_STRING)
            hv_parse_uint(c->element[1]->str, &n);
        else if (c->element[1]->type == REDIS_REPLY_INTEGER)
            n = (uint64_t)c->element[1]->integer;
        counts_add(&st->consumers, c->element[0]->str, c->element[0]->len, n);
    }
}

/* XPENDING S G START + COUNT: a page of [id, consumer, idle, deliveries]. */
static void on_page(hv_redis_t *r, void *data, int status, const redisReply *reply)
{
    status_t *st = data;
    (void)r;
    if (status == 0 && reply->type == REDIS_REPLY_ERROR && starts_with(reply, "NOGROUP")) {
        return; /* the group went away between two pages */
    }
    if (!reply_usable(&st->s, "XPENDING (extended)", status, reply))
        return;
    if (reply->type != REDIS_REPLY_ARRAY) {
        unexpected(&st->s, "XPENDING (extended)", reply);
        return;
    }
    for (size_t i = 0; i < reply->elements && st->npage < PAGE_SIZE; i++) {
        const redisReply *p = reply->element[i];
        if (p->type != REDIS_REPLY_ARRAY || p->elements < 2 ||
            p->element[0]->type != REDIS_REPLY_STRING ||
            p->element[1]->type != REDIS_REPLY_STRING ||
            p->element[0]->len >= sizeof(st->page[0].id)) {
            unexpected(&st->s, "XPENDING (extended)", reply);
            return;
        }
        pending_entry_t *pe = &st->page[st->npage++];
        pe->st = st;
        memcpy(pe->id, p->element[0]->str, p->element[0]->len + 1);
        pe->consumer = hv_xstrndup(p->element[1]->str, p->element[1]->len);
    }
}

/* XRANGE S ID ID: the pending entry's batch. */
static void on_entry(hv_redis_t *r, void *data, int status, const redisReply *reply)
{
    pending_entry_t *pe = data;
    status_t *st = pe->st;
    (void)r;
    if (!reply_usable(&st->s, "XRANGE", status, reply))
        return;
    if (reply->type != REDIS_REPLY_ARRAY) {
        unexpected(&st->s, "XRANGE", reply);
        return;
    }
    const redisReply *batch = NULL;
    if (reply->elements == 1 && reply->element[0]->type == REDIS_REPLY_ARRAY &&
        reply->element[0]->elements == 2) {
        const redisReply *f = reply->element[0]->element[1];
        for (size_t k = 0; f->type == REDIS_REPLY_ARRAY && k + 1 < f->elements; k += 2)
            if (f->element[k]->type == REDIS_REPLY_STRING &&
                strcmp(f->element[k]->str, "batch") == 0 &&
                f->element[k + 1]->type == REDIS_REPLY_STRING)
                batch = f->element[k + 1];
    }
    if (batch == NULL) {
        st->gone++;
        return;
    }
    sbatch_t *b;
    HASH_FIND(hh, st->by_name, batch->str, batch->len, b);
    if (b == NULL) {
        st->other++;
        return;
    }
    b->pending++;
    counts_add(&b->holders, pe->consumer, strlen(pe->consumer), 1);
}

static void page_free(status_t *st)
{
    for (size_t i = 0; i < st->npage; i++)
        free(st->page[i].consumer);
    st->npage = 0;
}

/* Walk the group's pending list a page at a time, each entry to its batch. */
static int status_pending(status_t *st)
{
    client_t *s = &st->s;
    char start[sizeof(st->page[0].id) + 1] = "-";
    char count[16];
    snprintf(count, sizeof(count), "%d", PAGE_SIZE);
    for (;;) {
        SEND(s, on_page, st, "XPENDING", st->a->stream, st->a->group, start, "+", count);
        if (client_wait(s) != 0)
            break;
        size_t n = st->npage;
        for (size_t i = 0; i < n; i++) {
            pending_entry_t *pe = &st->page[i];
            SEND(s, on_entry, pe, "XRANGE", st->a->stream, pe->id, pe->id);
        }
        if (client_wait(s) != 0 || n < PAGE_SIZE)
            break;
        snprintf(start, sizeof(start), "(%s", st->page[n - 1].id);
        page_free(st);
    }
    page_free(st);
    return s->failed ? -1 : 0;
}

static int batch_complete(const sbatch_t *b)
{
    return b->type.exists && b->has_total && b->done == b->total;
}

static void print_text(const status_t *st)
{
    for (size_t i = 0; i < st->nlist; i++) {
        const sbatch_t *b = st->list[i];
        if (!b->type.exists) {
            printf("batch %s: unknown\n", b->name);
            continue;
        }
        char total[24] = "unknown";
        if (b->has_total)
            snprintf(total, sizeof(total), "%" PRIu64, b->total);
        printf("batch %s: added %" PRIu64 " total %s done %" PRIu64 " pending %" PRIu64
               " ok %" PRIu64 " failed %" PRIu64 " %s",
               b->name, b->added, total, b->done, b->pending, b->ok, b->failed,
               batch_complete(b) ? "complete" : "incomplete");
        if (b->holders.n > 0) {
            printf(" holders:");
            for (size_t k = 0; k < b->holders.n; k++)
                printf(" %s=%" PRIu64, b->holders.v[k].name, b->holders.v[k].n);
        }
        printf("\n");
    }
    if (!st->group_exists) {
        printf("group %s: not created yet\n", st->a->group);
        return;
    }
    printf("group %s: pending %" PRIu64, st->a->group, st->group_pending);
    if (st->has_lag)
        printf(" lag %" PRIu64, st->lag);
    printf(" consumers %zu", st->consumers.n);
    if (st->gone > 0)
        printf(" (%" PRIu64 " pending entries no longer in the stream)", st->gone);
    printf("\n");
    for (size_t k = 0; k < st->consumers.n; k++)
        printf("consumer %s: pending %" PRIu64 "\n", st->consumers.v[k].name, st->consumers.v[k].n);
}

static cJSON *counts_json(const counts_t *c)
{
    cJSON *o = cJSON_CreateObject();
    for (size_t k = 0; k < c->n; k++)
        cJSON_AddNumberToObject(o, c->v[k].name, (double)c->v[k].n);
    return o;
}

static int print_json(const status_t *st)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "stream", st->a->stream);
    cJSON_AddStringToObject(root, "group", st->a->group);
    cJSON_AddBoolToObject(root, "group_exists", st->group_exists);
    cJSON_AddNumberToObject(root, "pending", (double)st->group_pending);
    if (st->has_lag)
        cJSON_AddNumberToObject(root, "lag", (double)st->lag);
    else
        cJSON_AddNullToObject(root, "lag");
    cJSON *batches = cJSON_AddArrayToObject(root, "batches");
    for (size_t i = 0; i < st->nlist; i++) {
        const sbatch_t *b = st->list[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", b->name);
        if (!b->type.exists)
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
        cJSON_AddBoolToObject(o, "complete", batch_complete(b));
        cJSON_AddItemToObject(o, "holders", counts_json(&b->holders));
        cJSON_AddItemToArray(batches, o);
    }
    cJSON_AddItemToObject(root, "consumers", counts_json(&st->consumers));
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

static int status_run(status_t *st)
{
    client_t *s = &st->s;
    const hv_status_args_t *a = st->a;
    send_type(&st->stream_type, s, a->stream, "stream");
    send_type(&st->batches_type, s, st->key_batches, "set");
    if (a->nbatches == 0)
        SEND(s, on_members, st, "SMEMBERS", st->key_batches);
    else
        for (size_t i = 0; i < a->nbatches; i++)
            status_add_batch(st, a->batches[i], strlen(a->batches[i]));
    if (client_wait(s) != 0)
        return EXIT_REDIS;
    if (a->nbatches == 0 && st->nlist > 1)
        qsort(st->list, st->nlist, sizeof(*st->list), batch_cmp);

    for (size_t i = 0; i < st->nlist; i++) {
        sbatch_t *b = st->list[i];
        send_type(&b->type, s, b->key, "hash");
        SEND(s, on_batch_fields, b, "HMGET", b->key, "added", "total", "done", "ok", "failed");
    }
    if (st->stream_type.exists) {
        SEND(s, on_summary, st, "XPENDING", a->stream, a->group);
        SEND(s, on_groups, st, "XINFO", "GROUPS", a->stream);
    }
    if (client_wait(s) != 0)
        return EXIT_REDIS;
    if (st->group_exists && st->group_pending > 0 && st->nlist > 0 && status_pending(st) != 0)
        return EXIT_REDIS;

    for (size_t i = 0; i < st->nlist; i++)
        counts_sort(&st->list[i]->holders);
    counts_sort(&st->consumers);
    if (a->json) {
        if (print_json(st) != 0)
            return EXIT_REDIS;
    } else {
        print_text(st);
    }
    fflush(stdout);
    for (size_t i = 0; i < st->nlist; i++)
        if (!batch_complete(st->list[i]))
            return EXIT_INCOMPLETE;
    return EXIT_OK;
}

int hv_cmd_status(int argc, char **argv)
{
    hv_status_args_t a;
    char err[1200];
    if (hv_streamcmd_parse_status(argc, argv, &a, err, sizeof(err)) != 0)
        return usage_error("status", err);
    if (a.help) {
        hv_streamcmd_status_args_free(&a);
        status_help(stdout);
        return EXIT_OK;
    }
    signal(SIGPIPE, SIG_IGN);

    status_t *st = hv_xcalloc(1, sizeof(*st));
    int rc;
    st->a = &a;
    if (hv_streamkeys_batches(a.stream, st->key_batches, sizeof(st->key_batches)) != 0) {
        rc = usage_error("status", "the stream name is too long");
        goto out;
    }
    if (client_init(&st->s, a.redis_url, a.timeout_ms) != 0) {
        rc = EXIT_REDIS;
        goto out;
    }
    rc = client_connect(&st->s, &a.addr) == 0 ? status_run(st) : EXIT_REDIS;
    client_close(&st->s);
out:
    page_free(st);
    HASH_CLEAR(hh, st->by_name);
    for (size_t i = 0; i < st->nlist; i++) {
        counts_free(&st->list[i]->holders);
        free(st->list[i]->name);
        free(st->list[i]->key);
        free(st->list[i]);
    }
    free(st->list);
    counts_free(&st->consumers);
    free(st);
    hv_streamcmd_status_args_free(&a);
    return rc;
}
