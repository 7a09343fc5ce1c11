/* streamctl.c: a stream's batches from outside the daemons (see streamctl.h). */
#include "harvestd/streamctl.h"

#include <assert.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <uthash.h>
#include <uv.h>

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

/* ------------------------------------------------------------------------------ session */

/* A loop of the call's own with one connection on it, run until what is waited for comes.
 * The first failure is kept in `err`, with the server's URL (its password masked); what
 * fails after it (commands cancelled by the broken connection) is not news. */
typedef struct {
    uv_loop_t loop;
    int loop_open;
    hv_dns_t *dns;
    hv_conn_stats_t stats;
    hv_conn_env_t env;
    hv_redis_t *r;
    char url[HV_REDIS_URL_SHOWN_MAX]; /* the server's URL as messages show it */
    uint64_t connect_timeout_ms;
    uint64_t reply_timeout_ms;
    int connecting;
    int failed;
    char err[2700];
} session_t;

__attribute__((format(printf, 3, 0))) static void session_vfail(session_t *s, int url_said,
                                                                const char *fmt, va_list ap)
{
    char msg[1600];
    if (s->failed)
        return;
    s->failed = 1;
    vsnprintf(msg, sizeof(msg), fmt, ap);
    if (url_said)
        snprintf(s->err, sizeof(s->err), "redis: %s", msg);
    else
        snprintf(s->err, sizeof(s->err), "redis: %s (%s)", msg, s->url);
}

__attribute__((format(printf, 2, 3))) static void session_fail(session_t *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    session_vfail(s, 0, fmt, ap);
    va_end(ap);
}

/* A failure whose text names the server already. */
__attribute__((format(printf, 2, 3))) static void session_fail_at(session_t *s, const char *fmt,
                                                                  ...)
{
    va_list ap;
    va_start(ap, fmt);
    session_vfail(s, 1, fmt, ap);
    va_end(ap);
}

/* A command (`what`: its name and key) that got no reply within `ms`, or whose connection
 * failed with `status`. */
static void session_fail_status_within(session_t *s, const char *what, int status, uint64_t ms)
{
    if (status == HV_ETOOBIG && s->r != NULL && hv_redis_limit(s->r) != NULL)
        session_fail(s, "%s: the reply is over harvestd's limit: %s", what, hv_redis_limit(s->r));
    else if (status == UV_ETIMEDOUT)
        session_fail(s, "%s: no reply within %" PRIu64 " ms", what, ms);
    else if (status == UV_EOF)
        session_fail(s, "%s: the server closed the connection", what);
    else
        session_fail(s, "%s: %s (%s)", what, hv_strerror(status), hv_err_name(status));
}

static void session_fail_status(session_t *s, const char *what, int status)
{
    session_fail_status_within(s, what, status, s->reply_timeout_ms);
}

/* A connect that failed with `status` (`tls_error`: the TLS failure's detail, or NULL). */
static void session_fail_connect(session_t *s, int status, const char *tls_error)
{
    if (status == UV_ETIMEDOUT)
        session_fail_at(s, "cannot connect to %s: no answer within %" PRIu64 " ms", s->url,
                        s->connect_timeout_ms);
    else if (tls_error != NULL)
        session_fail_at(s, "cannot connect to %s: %s: %s (%s)", s->url, hv_strerror(status),
                        tls_error, hv_err_name(status));
    else
        session_fail_at(s, "cannot connect to %s: %s (%s)", s->url, hv_strerror(status),
                        hv_err_name(status));
}

/* A failed connect: the connection's, or that of the AUTH or SELECT made once connected
 * (whose reply is due within the connect timeout). */
static void on_session_connect(hv_redis_t *r, int status)
{
    session_t *s = hv_redis_data(r);
    if (status == HV_EREFUSED)
        session_fail(s, "%s: %s", hv_redis_failed_command(r), hv_redis_refusal(r));
    else if (status != 0 && hv_redis_failed_command(r) != NULL)
        session_fail_status_within(s, hv_redis_failed_command(r), status, s->connect_timeout_ms);
    else if (status != 0)
        session_fail_connect(s, status, hv_redis_tls_error(r));
    s->connecting = 0;
}

static void on_session_error(hv_redis_t *r, int err)
{
    session_t *s = hv_redis_data(r);
    if (err == UV_EOF)
        session_fail_at(s, "%s closed the connection", s->url);
    else if (hv_redis_tls_error(r) != NULL)
        session_fail_at(s, "connection to %s lost: %s: %s (%s)", s->url, hv_strerror(err),
                        hv_redis_tls_error(r), hv_err_name(err));
    else if (err == HV_ETOOBIG && hv_redis_limit(r) != NULL)
        session_fail_at(s, "%s sent a reply over harvestd's limit: %s", s->url, hv_redis_limit(r));
    else
        session_fail_at(s, "connection to %s lost: %s (%s)", s->url, hv_strerror(err),
                        hv_err_name(err));
}

static const hv_redis_cbs_t session_cbs = {on_session_connect, on_session_error};

/* A reply a callback can use: status 0 and not an error reply. Otherwise the failure is
 * recorded as `what`'s (the command and its key). */
static int reply_usable(session_t *s, const char *what, int status, const redisReply *reply)
{
    if (status != 0) {
        session_fail_status(s, what, status);
        return 0;
    }
    if (reply->type == REDIS_REPLY_ERROR) {
        session_fail(s, "%s: %.*s", what, (int)reply->len, reply->str);
        return 0;
    }
    return 1;
}

static void unexpected(session_t *s, const char *what, const redisReply *reply)
{
    session_fail(s, "%s: unexpected reply (type %d)", what, reply->type);
}

static void session_send(session_t *s, int argc, const char **argv, const size_t *lens,
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
        session_fail_status(s, argv[0], rc);
}

#define SEND(s, cb, data, ...)                                                                     \
    session_send((s), (int)HV_ARRAY_SIZE(((const char *[]){__VA_ARGS__})),                         \
                 (const char *[]){__VA_ARGS__}, NULL, (cb), (data))

/* One turn of the loop, for a caller waiting for something the loop brings. A loop with
 * nothing left to run while it waits is a bug of ours, recorded as a failure rather than
 * spun on. */
static void session_turn(session_t *s)
{
    if (uv_run(&s->loop, UV_RUN_ONCE) == 0 && !s->failed)
        session_fail(s, "internal error: nothing left to wait for");
}

/* Wait for every reply due. 0, or -1 once anything failed. */
static int session_wait(session_t *s)
{
    while (!s->failed && hv_redis_pending(s->r) > 0)
        if (uv_run(&s->loop, UV_RUN_ONCE) == 0 && hv_redis_pending(s->r) > 0)
            session_fail(s, "internal error: replies due but nothing left to wait for");
    return s->failed ? -1 : 0;
}

/* The loop, not connected yet: 0, or -1 with the message in `err`. */
static int session_init(session_t *s, const hv_streamctl_server_t *server, char *err, size_t errcap)
{
    memset(s, 0, sizeof(*s));
    hv_redis_url_mask(server->url, s->url, sizeof(s->url));
    s->connect_timeout_ms = server->timeout_ms != 0 ? server->timeout_ms : CONNECT_TIMEOUT_MS;
    s->reply_timeout_ms = server->timeout_ms != 0 ? server->timeout_ms : REPLY_TIMEOUT_MS;
    int rc = uv_loop_init(&s->loop);
    if (rc != 0)
        return hv_errf(err, errcap, -1, "cannot start a loop: %s", hv_strerror(rc));
    s->loop_open = 1;
    s->dns = hv_dns_new(&s->loop, 60000, 4);
    s->env.loop = &s->loop;
    s->env.dns = s->dns;
    s->env.guard = NULL; /* the operator's server, not a fetched URL's */
    s->env.stats = &s->stats;
    return 0;
}

/* Connect (logged in, on the URL's database). 0, or -1 (recorded). */
static int session_connect(session_t *s, const hv_streamctl_server_t *server)
{
    int rc = hv_redis_connect(&s->env, server->tls, &server->addr, s->connect_timeout_ms,
                              &session_cbs, s, &s->r);
    if (rc != 0) {
        session_fail_connect(s, rc, NULL);
        return -1;
    }
    s->connecting = 1;
    while (s->connecting && !s->failed)
        session_turn(s);
    s->connecting = 0;
    return s->failed ? -1 : 0;
}

/* The failure recorded, into the caller's `err`: HV_STREAMCTL_FAILED. */
static hv_streamctl_rc_t session_failure(const session_t *s, char *err, size_t errcap)
{
    return hv_errf(err, errcap, HV_STREAMCTL_FAILED, "%s", s->err);
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
static void session_close(session_t *s)
{
    if (!s->loop_open)
        return;
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
    s->loop_open = 0;
}

/* TYPE KEY: the key is missing, or of the type wanted; any other type is a failure. */
typedef struct {
    session_t *s;
    const char *key;
    const char *want;
    int exists;
} type_check_t;

static void on_type(hv_redis_t *r, void *data, int status, const redisReply *reply)
{
    type_check_t *t = data;
    char what[HV_STREAM_NAME_MAX + HV_STREAM_BATCH_MAX + 32];
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
        session_fail(t->s, "%s is a %s, not a %s", t->key, reply->str, t->want);
        return;
    }
    t->exists = 1;
}

static void send_type(type_check_t *t, session_t *s, const char *key, const char *want)
{
    t->s = s;
    t->key = key;
    t->want = want;
    t->exists = 0;
    SEND(s, on_type, t, "TYPE", key);
}

/* A hash field holding a count: 0 when missing (nil), 1 when read, -1 (recorded) when it
 * holds something else. */
static int field_count(session_t *s, const char *key, const char *field, const redisReply *v,
                       uint64_t *out)
{
    *out = 0;
    if (v->type == REDIS_REPLY_NIL)
        return 0;
    if (v->type == REDIS_REPLY_STRING && hv_parse_uint(v->str, out) == 0)
        return 1;
    session_fail(s, "%s: field %s is not a count: '%.*s'", key, field,
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
    CHUNK_FAILED,   /* recorded in the session */
} chunk_outcome_t;

typedef struct hv_streamctl_enqueue_s {
    session_t s;
    hv_streamctl_batch_spec_t a;
    char key_batch[HV_STREAM_NAME_MAX + HV_STREAM_BATCH_MAX + 16];
    char key_batches[HV_STREAM_NAME_MAX + 16];
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
            session_fail(&e->s, "%.*s", (int)(reply->len - 7), reply->str + 7);
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
        session_fail(&e->s, "%s: unexpected reply", what);
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
                                     e->a.stream,
                                     e->key_batch,
                                     e->key_batches,
                                     expected,
                                     e->a.rules,
                                     e->a.batch,
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
    session_send(&e->s, SCRIPT_ARGS + 2 * (int)e->n, e->argv, e->argvlen, on_chunk, e);
}

/* Add the chunk (the last one with the total). */
static hv_streamctl_rc_t add_chunk(enqueue_t *e, int final, char *err, size_t errcap)
{
    send_chunk(e, final, 0);
    session_wait(&e->s);
    if (e->outcome == CHUNK_NOSCRIPT) {
        send_chunk(e, final, 1);
        session_wait(&e->s);
    }
    switch (e->outcome) {
    case CHUNK_ADDED:
        e->added += e->n;
        e->n = 0;
        e->arena_len = 0;
        return HV_STREAMCTL_OK;
    case CHUNK_RACE:
        return hv_errf(err, errcap, HV_STREAMCTL_FAILED,
                       "batch %s: its added count is %s where this run expected %" PRIu64
                       ": another enqueue of the batch is running (rerun it when that one is "
                       "done)",
                       e->a.batch, e->outcome_text, e->added0 + e->added);
    case CHUNK_RULES:
        return hv_errf(err, errcap, HV_STREAMCTL_CONFLICT,
                       "batch %s: rules '%s' were set meanwhile (this run: '%s')", e->a.batch,
                       e->outcome_text, e->a.rules);
    case CHUNK_TOTAL:
        return hv_errf(err, errcap, HV_STREAMCTL_FAILED,
                       "batch %s has a total of %s lines, but '%s' has %" PRIu64
                       ": the file changed since the batch was enqueued",
                       e->a.batch, e->outcome_text, e->a.file, e->seen);
    case CHUNK_NOSCRIPT:
        session_fail(&e->s, "EVAL: the server says NOSCRIPT for the script's own text");
        break;
    case CHUNK_WAITING:
    case CHUNK_FAILED:
        break;
    }
    return session_failure(&e->s, err, errcap);
}

/* Read the batch's hash (and check each key's type), load the script. */
static hv_streamctl_rc_t enqueue_prepare(enqueue_t *e, char *err, size_t errcap)
{
    session_t *s = &e->s;
    send_type(&e->types[0], s, e->a.stream, "stream");
    send_type(&e->types[1], s, e->key_batch, "hash");
    send_type(&e->types[2], s, e->key_batches, "set");
    SEND(s, on_batch_hash, e, "HMGET", e->key_batch, "added", "total", "rules");
    SEND(s, on_script_load, e, "SCRIPT", "LOAD", enqueue_script);
    if (session_wait(s) != 0)
        return session_failure(s, err, errcap);
    if (e->rules0 != NULL && strcmp(e->rules0, e->a.rules) != 0)
        return hv_errf(err, errcap, HV_STREAMCTL_CONFLICT,
                       "batch %s was enqueued with rules '%s', this run has '%s': a batch has "
                       "one rules set ('' for none)",
                       e->a.batch, e->rules0, e->a.rules);
    return HV_STREAMCTL_OK;
}

hv_streamctl_rc_t hv_streamctl_enqueue_open(const hv_streamctl_batch_spec_t *spec,
                                            hv_streamctl_enqueue_t **out, char *err, size_t errcap)
{
    enqueue_t *e = hv_xcalloc(1, sizeof(*e));
    struct stat st;
    int rc;

    *out = e;
    e->a = *spec;
    if (hv_streamkeys_batch(spec->stream, spec->batch, e->key_batch, sizeof(e->key_batch)) != 0 ||
        hv_streamkeys_batches(spec->stream, e->key_batches, sizeof(e->key_batches)) != 0)
        return hv_errf(err, errcap, HV_STREAMCTL_USAGE, "the stream or batch name is too long");
    if (strcmp(spec->file, "-") != 0 && stat(spec->file, &st) == 0 && S_ISDIR(st.st_mode))
        return hv_errf(err, errcap, HV_STREAMCTL_USAGE, "'%s' is a directory, not a URL file",
                       spec->file);
    if (session_init(&e->s, &spec->server, err, errcap) != 0)
        return HV_STREAMCTL_FAILED;
    /* The file is opened before Redis is touched: a path that cannot be read is a mistake in
     * the command line. */
    rc = hv_reader_open(&e->s.loop, spec->file, &e->src);
    if (rc != 0)
        return hv_errf(err, errcap, HV_STREAMCTL_USAGE, "cannot open '%s': %s", spec->file,
                       hv_strerror(rc));
    if (session_connect(&e->s, &spec->server) != 0)
        return session_failure(&e->s, err, errcap);
    return enqueue_prepare(e, err, errcap);
}

hv_streamctl_rc_t hv_streamctl_enqueue_run(hv_streamctl_enqueue_t *e, char *err, size_t errcap)
{
    session_t *s = &e->s;
    hv_source_start(e->src, &enqueue_sink, e);
    for (;;) {
        while (!e->chunk_ready && !e->ended && !e->grew && !s->failed)
            session_turn(s);
        if (s->failed)
            return session_failure(s, err, errcap);
        if (e->grew)
            return hv_errf(err, errcap, HV_STREAMCTL_FAILED,
                           "batch %s has a total of %" PRIu64 " lines, but '%s' has more: "
                           "the file changed since the batch was enqueued",
                           e->a.batch, e->total0, e->a.file);
        if (e->ended && e->read_status == 0 && e->seen < e->added0)
            return hv_errf(err, errcap, HV_STREAMCTL_FAILED,
                           "batch %s has %" PRIu64 " lines added, but '%s' has only %" PRIu64
                           ": the file changed since the batch was enqueued",
                           e->a.batch, e->added0, e->a.file, e->seen);
        if (e->ended && e->read_status == 0 && e->has_total && e->seen != e->total0)
            return hv_errf(err, errcap, HV_STREAMCTL_FAILED,
                           "batch %s has a total of %" PRIu64 " lines, but '%s' has %" PRIu64
                           ": the file changed since the batch was enqueued",
                           e->a.batch, e->total0, e->a.file, e->seen);
        if (e->ended && e->read_status != 0)
            return hv_errf(err, errcap, HV_STREAMCTL_FAILED, "cannot read '%s': %s (%s)", e->a.file,
                           hv_strerror(e->read_status), hv_err_name(e->read_status));
        hv_streamctl_rc_t rc = add_chunk(e, e->ended, err, errcap);
        if (rc != HV_STREAMCTL_OK || e->ended)
            return rc;
        e->chunk_ready = 0;
        hv_source_resume(e->src);
    }
}

void hv_streamctl_enqueue_counts(const hv_streamctl_enqueue_t *e, hv_streamctl_counts_t *out)
{
    out->already = e->added0;
    out->added = e->added;
    out->total = e->seen;
}

void hv_streamctl_enqueue_free(hv_streamctl_enqueue_t *e)
{
    if (e == NULL)
        return;
    if (e->src != NULL)
        hv_source_close(e->src);
    session_close(&e->s);
    free(e->rules0);
    free(e);
}

/* ------------------------------------------------------------------------------ status */

/* A page of the group's pending list, then one XRANGE per entry of it. */
#define PAGE_SIZE 1000
/* Batch names asked for per SSCAN of the set of batches: each reply stays small (redis.h's
 * bounds) however many batches the stream has had. */
#define MEMBERS_PAGE "1000"

static hv_streamctl_count_t *counts_add(hv_streamctl_tally_t *c, const char *name, size_t len,
                                        uint64_t n)
{
    for (size_t i = 0; i < c->n; i++) {
        if (strlen(c->v[i].name) == len && memcmp(c->v[i].name, name, len) == 0) {
            c->v[i].n += n;
            return &c->v[i];
        }
    }
    if (c->n == c->cap) {
        c->cap = c->cap != 0 ? 2 * c->cap : 4;
        c->v = hv_xrealloc(c->v, c->cap * sizeof(*c->v));
    }
    hv_streamctl_count_t *e = &c->v[c->n++];
    e->name = hv_xstrndup(name, len);
    e->n = n;
    e->idle_ms = -1;
    return e;
}

static int count_cmp(const void *x, const void *y)
{
    return strcmp(((const hv_streamctl_count_t *)x)->name, ((const hv_streamctl_count_t *)y)->name);
}

static void counts_sort(hv_streamctl_tally_t *c)
{
    if (c->n > 1)
        qsort(c->v, c->n, sizeof(*c->v), count_cmp);
}

static void counts_free(hv_streamctl_tally_t *c)
{
    for (size_t i = 0; i < c->n; i++)
        free(c->v[i].name);
    free(c->v);
    memset(c, 0, sizeof(*c));
}

void hv_streamctl__tally_free(hv_streamctl_tally_t *t)
{
    counts_free(t);
}

/* An XINFO reply's field name: a bulk string (a status line from a server that sends one).
 * NULL for anything else. */
static const char *field_name(const redisReply *k)
{
    return k->type == REDIS_REPLY_STRING || k->type == REDIS_REPLY_STATUS ? k->str : NULL;
}

int hv_streamctl__consumers(const redisReply *reply, hv_streamctl_tally_t *out, char *err,
                            size_t errcap)
{
    if (reply->type != REDIS_REPLY_ARRAY)
        return hv_errf(err, errcap, -1, "not an array (type %d)", reply->type);
    for (size_t i = 0; i < reply->elements; i++) {
        const redisReply *c = reply->element[i];
        const redisReply *name = NULL, *pending = NULL, *idle = NULL;
        if (c->type != REDIS_REPLY_ARRAY || c->elements % 2 != 0)
            return hv_errf(err, errcap, -1,
                           "consumer %zu is not a list of fields (type %d, %zu elements)", i + 1,
                           c->type, c->elements);
        for (size_t k = 0; k < c->elements; k += 2) {
            const char *key = field_name(c->element[k]);
            if (key == NULL)
                return hv_errf(err, errcap, -1, "consumer %zu: a field name of type %d", i + 1,
                               c->element[k]->type);
            if (strcmp(key, "name") == 0)
                name = c->element[k + 1];
            else if (strcmp(key, "pending") == 0)
                pending = c->element[k + 1];
            else if (strcmp(key, "idle") == 0)
                idle = c->element[k + 1];
        }
        if (name == NULL || name->type != REDIS_REPLY_STRING)
            return hv_errf(err, errcap, -1, "consumer %zu has no name", i + 1);
        if (pending == NULL || pending->type != REDIS_REPLY_INTEGER || pending->integer < 0)
            return hv_errf(err, errcap, -1, "consumer %zu has no pending count", i + 1);
        hv_streamctl_count_t *e = counts_add(out, name->str, name->len, (uint64_t)pending->integer);
        if (idle != NULL && idle->type == REDIS_REPLY_INTEGER && idle->integer >= 0 &&
            (e->idle_ms < 0 || idle->integer < e->idle_ms))
            e->idle_ms = idle->integer;
    }
    return 0;
}

typedef struct status_s status_t;

typedef struct {
    hv_streamctl_batch_t pub;
    status_t *st;
    char *key;
    type_check_t type;
    UT_hash_handle hh;
} sbatch_t;

typedef struct {
    status_t *st;
    char id[48];
    char *consumer;
} pending_entry_t;

struct status_s {
    hv_streamctl_status_t pub;
    session_t s;
    char key_batches[HV_STREAM_NAME_MAX + 16];
    char key_dead[HV_STREAM_NAME_MAX + 16];
    type_check_t stream_type;
    type_check_t batches_type;
    char cursor[24]; /* SSCAN's, "0" once the set is read */
    sbatch_t **list; /* sorted by name (when read from the set) or as given */
    size_t nlist;
    size_t caplist;
    sbatch_t *by_name;

    pending_entry_t page[PAGE_SIZE];
    size_t npage;
};

static sbatch_t *status_add_batch(status_t *st, const char *name, size_t len)
{
    sbatch_t *b;
    HASH_FIND(hh, st->by_name, name, len, b);
    if (b != NULL)
        return b;
    b = hv_xcalloc(1, sizeof(*b));
    b->st = st;
    b->pub.name = hv_xstrndup(name, len);
    size_t cap = strlen(st->pub.stream) + len + 16;
    b->key = hv_xmalloc(cap);
    hv_streamkeys_batch(st->pub.stream, b->pub.name, b->key, cap);
    HASH_ADD_KEYPTR(hh, st->by_name, b->pub.name, len, b);
    if (st->nlist == st->caplist) {
        st->caplist = st->caplist != 0 ? 2 * st->caplist : 16;
        st->list = hv_xrealloc(st->list, st->caplist * sizeof(*st->list));
    }
    st->list[st->nlist++] = b;
    return b;
}

static int batch_cmp(const void *x, const void *y)
{
    return strcmp((*(sbatch_t *const *)x)->pub.name, (*(sbatch_t *const *)y)->pub.name);
}

/* SSCAN S:batches CURSOR COUNT n: [next cursor, [name...]]. A name may come twice (the set
 * was resized meanwhile): status_add_batch() keeps one. */
static void on_members(hv_redis_t *r, void *data, int status, const redisReply *reply)
{
    status_t *st = data;
    char what[sizeof(st->key_batches) + 16];
    (void)r;
    snprintf(what, sizeof(what), "SSCAN %s", st->key_batches);
    if (!reply_usable(&st->s, what, status, reply))
        return;
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
        reply->element[0]->type != REDIS_REPLY_STRING ||
        reply->element[0]->len >= sizeof(st->cursor) ||
        reply->element[1]->type != REDIS_REPLY_ARRAY) {
        unexpected(&st->s, what, reply);
        return;
    }
    memcpy(st->cursor, reply->element[0]->str, reply->element[0]->len + 1);
    const redisReply *names = reply->element[1];
    for (size_t i = 0; i < names->elements; i++)
        if (names->element[i]->type == REDIS_REPLY_STRING)
            status_add_batch(st, names->element[i]->str, names->element[i]->len);
}

static void on_batch_fields(hv_redis_t *r, void *data, int status, const redisReply *reply)
{
    sbatch_t *b = data;
    session_t *s = &b->st->s;
    static const char *const names[] = {"added", "total", "done", "ok", "failed", "dead"};
    uint64_t *fields[] = {&b->pub.added, &b->pub.total, &b->pub.done,
                          &b->pub.ok,    &b->pub.failed, &b->pub.dead};
    char what[HV_STREAM_NAME_MAX + HV_STREAM_BATCH_MAX + 32];
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
            b->pub.has_total = got;
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
            strcmp(name->str, st->pub.group) != 0)
            continue;
        if (lag != NULL && lag->type == REDIS_REPLY_INTEGER && lag->integer >= 0) {
            st->pub.has_lag = 1;
            st->pub.lag = (uint64_t)lag->integer;
        }
    }
}

/* XLEN S:dead: the dead letters (0 when there is no such stream). */
static void on_dead_letters(hv_redis_t *r, void *data, int status, const redisReply *reply)
{
    status_t *st = data;
    (void)r;
    if (status == 0 && reply->type == REDIS_REPLY_ERROR && starts_with(reply, "WRONGTYPE"))
        return; /* not ours to count */
    if (!reply_usable(&st->s, "XLEN", status, reply))
        return;
    if (reply->type != REDIS_REPLY_INTEGER || reply->integer < 0) {
        unexpected(&st->s, "XLEN", reply);
        return;
    }
    st->pub.dead_letters = (uint64_t)reply->integer;
}

/* XPENDING S G: the group's pending count; NOGROUP when the group is not there. */
static void on_summary(hv_redis_t *r, void *data, int status, const redisReply *reply)
{
    status_t *st = data;
    (void)r;
    if (status == 0 && reply->type == REDIS_REPLY_ERROR && starts_with(reply, "NOGROUP")) {
        st->pub.group_exists = 0;
        return;
    }
    if (!reply_usable(&st->s, "XPENDING", status, reply))
        return;
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 4 ||
        reply->element[0]->type != REDIS_REPLY_INTEGER) {
        unexpected(&st->s, "XPENDING", reply);
        return;
    }
    st->pub.group_exists = 1;
    st->pub.group_pending = (uint64_t)reply->element[0]->integer;
}

/* XINFO CONSUMERS S G: every consumer of the group, those holding nothing included (XPENDING
 * names only those that hold entries); NOGROUP when the group is not there. */
static void on_consumers(hv_redis_t *r, void *data, int status, const redisReply *reply)
{
    status_t *st = data;
    char why[256];
    (void)r;
    if (status == 0 && reply->type == REDIS_REPLY_ERROR && starts_with(reply, "NOGROUP"))
        return;
    if (!reply_usable(&st->s, "XINFO CONSUMERS", status, reply))
        return;
    if (hv_streamctl__consumers(reply, &st->pub.consumers, why, sizeof(why)) != 0)
        session_fail(&st->s, "XINFO CONSUMERS: unexpected reply: %s", why);
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
        st->pub.gone++;
        return;
    }
    sbatch_t *b;
    HASH_FIND(hh, st->by_name, batch->str, batch->len, b);
    if (b == NULL) {
        st->pub.other++;
        return;
    }
    b->pub.pending++;
    counts_add(&b->pub.holders, pe->consumer, strlen(pe->consumer), 1);
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
    session_t *s = &st->s;
    char start[sizeof(st->page[0].id) + 1] = "-";
    char count[16];
    snprintf(count, sizeof(count), "%d", PAGE_SIZE);
    for (;;) {
        SEND(s, on_page, st, "XPENDING", st->pub.stream, st->pub.group, start, "+", count);
        if (session_wait(s) != 0)
            break;
        size_t n = st->npage;
        for (size_t i = 0; i < n; i++) {
            pending_entry_t *pe = &st->page[i];
            SEND(s, on_entry, pe, "XRANGE", st->pub.stream, pe->id, pe->id);
        }
        if (session_wait(s) != 0 || n < PAGE_SIZE)
            break;
        snprintf(start, sizeof(start), "(%s", st->page[n - 1].id);
        page_free(st);
    }
    page_free(st);
    return s->failed ? -1 : 0;
}

int hv_streamctl_batch_complete(const hv_streamctl_batch_t *b)
{
    return b->exists && b->has_total && b->done == b->total;
}

/* The batches' hashes, the group's summary and lag, then its pending entries. */
static int status_run(status_t *st, const char *const *batches, size_t nbatches)
{
    session_t *s = &st->s;
    send_type(&st->stream_type, s, st->pub.stream, "stream");
    send_type(&st->batches_type, s, st->key_batches, "set");
    if (nbatches == 0)
        SEND(s, on_members, st, "SSCAN", st->key_batches, "0", "COUNT", MEMBERS_PAGE);
    else
        for (size_t i = 0; i < nbatches; i++)
            status_add_batch(st, batches[i], strlen(batches[i]));
    if (session_wait(s) != 0)
        return -1;
    while (nbatches == 0 && strcmp(st->cursor, "0") != 0) {
        char cursor[sizeof(st->cursor)];
        memcpy(cursor, st->cursor, sizeof(cursor));
        SEND(s, on_members, st, "SSCAN", st->key_batches, cursor, "COUNT", MEMBERS_PAGE);
        if (session_wait(s) != 0)
            return -1;
    }
    if (nbatches == 0 && st->nlist > 1)
        qsort(st->list, st->nlist, sizeof(*st->list), batch_cmp);

    for (size_t i = 0; i < st->nlist; i++) {
        sbatch_t *b = st->list[i];
        send_type(&b->type, s, b->key, "hash");
        SEND(s, on_batch_fields, b, "HMGET", b->key, "added", "total", "done", "ok", "failed",
             "dead");
    }
    SEND(s, on_dead_letters, st, "XLEN", st->key_dead);
    if (st->stream_type.exists) {
        SEND(s, on_summary, st, "XPENDING", st->pub.stream, st->pub.group);
        SEND(s, on_consumers, st, "XINFO", "CONSUMERS", st->pub.stream, st->pub.group);
        SEND(s, on_groups, st, "XINFO", "GROUPS", st->pub.stream);
    }
    if (session_wait(s) != 0)
        return -1;
    if (st->pub.group_exists && st->pub.group_pending > 0 && st->nlist > 0 &&
        status_pending(st) != 0)
        return -1;
    return 0;
}

hv_streamctl_rc_t hv_streamctl_status_read(const hv_streamctl_server_t *server, const char *stream,
                                           const char *group, const char *const *batches,
                                           size_t nbatches, hv_streamctl_status_t **out, char *err,
                                           size_t errcap)
{
    status_t *st = hv_xcalloc(1, sizeof(*st));
    hv_streamctl_rc_t rc = HV_STREAMCTL_OK;

    *out = &st->pub;
    st->pub.stream = stream;
    st->pub.group = group;
    if (hv_streamkeys_batches(stream, st->key_batches, sizeof(st->key_batches)) != 0 ||
        hv_streamkeys_dead(stream, st->key_dead, sizeof(st->key_dead)) != 0)
        return hv_errf(err, errcap, HV_STREAMCTL_USAGE, "the stream name is too long");
    if (session_init(&st->s, server, err, errcap) != 0)
        return HV_STREAMCTL_FAILED;
    if (session_connect(&st->s, server) != 0 || status_run(st, batches, nbatches) != 0)
        rc = session_failure(&st->s, err, errcap);
    session_close(&st->s);
    page_free(st);
    if (rc != HV_STREAMCTL_OK)
        return rc;

    st->pub.batches = hv_xcalloc(st->nlist, sizeof(*st->pub.batches));
    st->pub.nbatches = st->nlist;
    for (size_t i = 0; i < st->nlist; i++) {
        sbatch_t *b = st->list[i];
        b->pub.exists = b->type.exists;
        counts_sort(&b->pub.holders);
        st->pub.batches[i] = &b->pub;
    }
    counts_sort(&st->pub.consumers);
    return HV_STREAMCTL_OK;
}

void hv_streamctl_status_free(hv_streamctl_status_t *pub)
{
    if (pub == NULL)
        return;
    status_t *st = hv_container_of(pub, status_t, pub);
    page_free(st);
    HASH_CLEAR(hh, st->by_name);
    for (size_t i = 0; i < st->nlist; i++) {
        counts_free(&st->list[i]->pub.holders);
        free(st->list[i]->pub.name);
        free(st->list[i]->key);
        free(st->list[i]);
    }
    free(st->list);
    free(st->pub.batches);
    counts_free(&st->pub.consumers);
    free(st);
}
