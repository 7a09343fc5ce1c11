/*
 * test_stream.c: the Redis stream source (stream.h) on a real loop, engine and batch host,
 * against a Redis peer scripted in the test: a uv_tcp_t listener on 127.0.0.1 in the same
 * loop. The peer reads each command with hiredis's reader, as Redis would, records it (the
 * connection it came on, its arguments, the source's figures when it arrived) and answers
 * from the test's hook, or else as Redis would for the stream the test laid out:
 *
 *   XGROUP CREATE      +OK
 *   XREADGROUP ... ID  the test's pending entries after ID (the pending phase), COUNT at most
 *   XREADGROUP ... >   the test's new entries not yet delivered, COUNT at most; with none
 *                      left, nothing until BLOCK ms have passed, then nil
 *   EVAL (2 keys)      the acknowledgement script: the number of ids
 *   EVAL (1 key)       the refresh script: nothing lost
 *   XACK               :1
 *   XAUTOCLAIM         nothing to take over
 *
 * Every XREADGROUP and XAUTOCLAIM is checked against the bound as it arrives (COUNT plus the
 * entries held at most queue_size), and the entries held after every loop iteration. At the
 * end of each test the links are checked: reads have a connection of their own, and every
 * other connection begins by creating the group.
 *
 * Entries need no network: "not a url" gets an InvalidUrl record, an entry without a url an
 * InvalidEntry one. Waiting is on events: the loop runs until a condition holds (looked at
 * after each iteration's I/O and before the loop sleeps), under a watchdog timer that fails
 * the test. The stop is the daemon's (loop.c): the stream and the host stop, the engine
 * stops, the batches end, then the stream closes.
 */
#include <cjson/cJSON.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harvestd/bhost.h"
#include "harvestd/common.h"
#include "harvestd/engine.h"
#include "harvestd/stream.h"
#include "fixtures.h"
#include "test.h"

#define MAX_PEERS 8
#define MAX_CMDS 4096
#define MAX_ARGS 32
#define MAX_ENTRIES 32
#define WAIT_MS 10000
#define BACKOFF_MIN_MS 200 /* stream.h: reconnects with backoff, 0.2 s doubling */

#define STREAM "harvestd:urls"
#define GROUP "harvestd"
#define CONSUMER "c1"

typedef struct tc_s tc_t;

/* One connection accepted by the scripted peer. */
typedef struct {
    tc_t *t;
    int idx;               /* in the order accepted */
    uv_tcp_t tcp;
    uv_timer_t block;      /* a blocking read with nothing to give: nil after BLOCK ms */
    redisReader *reader;
    int open;
    int closes;            /* handles still closing */
    int blocked;
    int hold;              /* replies are kept in `held` until peer_release() */
    char *held;
    size_t nheld;
    uint64_t accepted_at;
    char buf[16384];
} peer_t;

/* One command as it arrived. */
typedef struct {
    int peer;
    int argc;
    char *argv[MAX_ARGS];
    hv_stream_stats_t st;  /* the source's figures when it arrived */
    uint64_t at;
} cmd_t;

/* An entry of the scripted stream: its id and its [id, fields] as RESP. */
typedef struct {
    char id[32];
    char resp[512];
} sentry_t;

struct tc_s {
    fx_daemon_t d;
    unsigned bound;
    char out[600];
    uv_os_sock_t fd;
    uv_tcp_t listener;
    uint16_t port;
    char url[64];
    peer_t peers[MAX_PEERS];
    int npeers;
    cmd_t *cmds;
    int ncmds;
    sentry_t pending[MAX_ENTRIES];
    int npending;
    sentry_t entries[MAX_ENTRIES];
    int nentries, next_entry;
    /* The test's script: 1 when it answered (or chose not to), 0 for the default answer. */
    int (*hook)(tc_t *t, peer_t *p, const cmd_t *c);

    uv_timer_t watchdog;
    uv_check_t check;
    uv_prepare_t prepare;
    int timed_out;
    int (*until)(tc_t *t);
    uint64_t want;         /* for the conditions below */
    unsigned max_held;

    hv_stream_t *s;
    uint64_t started_at;
    int ready, fatals, fatal_err;
    char fatal_detail[1100];
    int stopping, closing, closed;

    /* the scripted stream's XPENDING answers */
    int deliveries;
    const char *owner;

    /* the hooks' own */
    int evals;
    int seen_new;
    int groups, reads;
    uint64_t dropped_at;
};

/* ---- commands ---- */

static int is(const cmd_t *c, const char *name)
{
    return strcmp(c->argv[0], name) == 0;
}

/* The dead-letter script: it adds to S:dead. */
static int is_dead(const cmd_t *c)
{
    return is(c, "EVAL") && c->argc >= 2 && strstr(c->argv[1], "XADD") != NULL;
}

static int is_ack(const cmd_t *c)
{
    return is(c, "EVAL") && c->argc >= 3 && strcmp(c->argv[2], "2") == 0 && !is_dead(c);
}

static int is_new_read(const cmd_t *c)
{
    return is(c, "XREADGROUP") && strcmp(c->argv[c->argc - 1], ">") == 0;
}

/* The arguments from `from` on, joined by spaces. */
static const char *args(const cmd_t *c, int from, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int i = from; i < c->argc && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%s", i > from ? " " : "", c->argv[i]);
    ASSERT_LT(n, cap);
    return buf;
}

/* The value after the argument `name` (COUNT, BLOCK), or NULL. */
static const char *opt(const cmd_t *c, const char *name)
{
    for (int i = 1; i + 1 < c->argc; i++)
        if (strcmp(c->argv[i], name) == 0)
            return c->argv[i + 1];
    return NULL;
}

static unsigned count_of(const cmd_t *c)
{
    const char *v = opt(c, "COUNT");
    ASSERT_NOT_NULL(v);
    return (unsigned)strtoul(v, NULL, 10);
}

/* The index of the first command named `name` at or after `from`, or -1. */
static int find(const tc_t *t, const char *name, int from)
{
    for (int i = from; i < t->ncmds; i++)
        if (is(&t->cmds[i], name))
            return i;
    return -1;
}

static int count_cmds(const tc_t *t, const char *name)
{
    int n = 0;
    for (int i = 0; i < t->ncmds; i++)
        n += is(&t->cmds[i], name);
    return n;
}

static hv_stream_stats_t stats(const tc_t *t)
{
    hv_stream_stats_t st;
    memset(&st, 0, sizeof(st));
    if (t->s != NULL)
        hv_stream_stats(t->s, &st);
    return st;
}

/* ---- the scripted peer ---- */

typedef struct {
    uv_write_t req;
    char data[];
} swrite_t;

static void on_swritten(uv_write_t *req, int status)
{
    (void)status;
    free(hv_container_of(req, swrite_t, req));
}

static void peer_write(peer_t *p, const char *data, size_t len)
{
    if (!p->open)
        return;
    if (p->hold) {
        p->held = realloc(p->held, p->nheld + len);
        ASSERT_NOT_NULL(p->held);
        memcpy(p->held + p->nheld, data, len);
        p->nheld += len;
        return;
    }
    swrite_t *w = hv_xmalloc(sizeof(*w) + len);
    memcpy(w->data, data, len);
    uv_buf_t b = uv_buf_init(w->data, (unsigned)len);
    if (uv_write(&w->req, (uv_stream_t *)&p->tcp, &b, 1, on_swritten) != 0)
        free(w);
}

static void peer_send(peer_t *p, const char *text)
{
    peer_write(p, text, strlen(text));
}

/* Send what was held back, in order, and answer at once from now on. */
static void peer_release(peer_t *p)
{
    char *held = p->held;
    size_t n = p->nheld;
    p->hold = 0;
    p->held = NULL;
    p->nheld = 0;
    if (n > 0)
        peer_write(p, held, n);
    free(held);
}

static void on_peer_closed(uv_handle_t *h)
{
    peer_t *p = h->data;
    if (--p->closes == 0) {
        redisReaderFree(p->reader);
        p->reader = NULL;
    }
}

/* The server closes the connection (or saw it closed). */
static void peer_drop(peer_t *p)
{
    if (!p->open)
        return;
    p->open = 0;
    p->blocked = 0;
    p->hold = 0;
    free(p->held);
    p->held = NULL;
    p->nheld = 0;
    p->closes = 2;
    uv_close((uv_handle_t *)&p->tcp, on_peer_closed);
    uv_close((uv_handle_t *)&p->block, on_peer_closed);
}

static void drop_all(tc_t *t)
{
    for (int i = 0; i < t->npeers; i++)
        peer_drop(&t->peers[i]);
}

static void bulk(char *out, size_t cap, size_t *n, const char *s)
{
    *n += (size_t)snprintf(out + *n, cap - *n, "$%zu\r\n%s\r\n", strlen(s), s);
    ASSERT_LT(*n, cap);
}

/* An entry [id, [batch, B, line, L, url, U]]; no url field when `url` is NULL; deleted (its
 * fields nil, as XREADGROUP gives a pending entry deleted meanwhile) when `batch` is NULL. */
static void entry(sentry_t *e, const char *id, const char *batch, const char *line,
                  const char *url)
{
    size_t n = 0;
    snprintf(e->id, sizeof(e->id), "%s", id);
    n += (size_t)snprintf(e->resp, sizeof(e->resp), "*2\r\n");
    bulk(e->resp, sizeof(e->resp), &n, id);
    if (batch == NULL) {
        n += (size_t)snprintf(e->resp + n, sizeof(e->resp) - n, "*-1\r\n");
        ASSERT_LT(n, sizeof(e->resp));
        return;
    }
    n += (size_t)snprintf(e->resp + n, sizeof(e->resp) - n, "*%d\r\n", url != NULL ? 6 : 4);
    bulk(e->resp, sizeof(e->resp), &n, "batch");
    bulk(e->resp, sizeof(e->resp), &n, batch);
    bulk(e->resp, sizeof(e->resp), &n, "line");
    bulk(e->resp, sizeof(e->resp), &n, line);
    if (url != NULL) {
        bulk(e->resp, sizeof(e->resp), &n, "url");
        bulk(e->resp, sizeof(e->resp), &n, url);
    }
}

/* XREADGROUP's reply: [[key, [entry...]]]. */
static void send_entries(peer_t *p, const char *key, const sentry_t *e, int n)
{
    char buf[MAX_ENTRIES * 600];
    size_t len = (size_t)snprintf(buf, sizeof(buf), "*1\r\n*2\r\n");
    bulk(buf, sizeof(buf), &len, key);
    len += (size_t)snprintf(buf + len, sizeof(buf) - len, "*%d\r\n", n);
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s", e[i].resp);
    ASSERT_LT(len, sizeof(buf));
    peer_write(p, buf, len);
}

static void on_block_timeout(uv_timer_t *h)
{
    peer_t *p = h->data;
    p->blocked = 0;
    peer_send(p, "*-1\r\n");
}

static void serve_read(tc_t *t, peer_t *p, const cmd_t *c)
{
    const char *key = c->argv[c->argc - 2], *id = c->argv[c->argc - 1];
    int count = (int)count_of(c);
    if (strcmp(id, ">") != 0) {
        int start = 0;
        if (strcmp(id, "0") != 0) {
            start = t->npending;
            for (int i = 0; i < t->npending; i++)
                if (strcmp(t->pending[i].id, id) == 0)
                    start = i + 1;
        }
        send_entries(p, key, t->pending + start, HV_MIN(count, t->npending - start));
        return;
    }
    int avail = t->nentries - t->next_entry;
    if (avail > 0) {
        int n = HV_MIN(count, avail);
        send_entries(p, key, t->entries + t->next_entry, n);
        t->next_entry += n;
        return;
    }
    const char *block = opt(c, "BLOCK");
    if (block == NULL) {
        peer_send(p, "*-1\r\n");
        return;
    }
    p->blocked = 1;
    uv_timer_start(&p->block, on_block_timeout, strtoul(block, NULL, 10), 0);
}

static void answer(tc_t *t, peer_t *p, const cmd_t *c)
{
    char reply[64];
    if (is(c, "XGROUP")) {
        peer_send(p, "+OK\r\n");
    } else if (is(c, "XREADGROUP")) {
        serve_read(t, p, c);
    } else if (is_ack(c)) {
        snprintf(reply, sizeof(reply), ":%d\r\n", (c->argc - 6) / 2);
        peer_send(p, reply);
    } else if (is_dead(c)) {
        peer_send(p, ":1\r\n");
    } else if (is(c, "EVAL")) {
        peer_send(p, "*0\r\n"); /* the refresh: none of ours was taken */
    } else if (is(c, "XACK")) {
        snprintf(reply, sizeof(reply), ":%d\r\n", c->argc - 3);
        peer_send(p, reply);
    } else if (is(c, "XAUTOCLAIM")) {
        peer_send(p, "*3\r\n$3\r\n0-0\r\n*0\r\n*0\r\n");
    } else if (is(c, "XPENDING") && c->argc >= 6) {
        /* An entry pending for the consumer, delivered t->deliveries times (2: read once,
         * then again). */
        char buf[256];
        int n = snprintf(buf, sizeof(buf), "*1\r\n*4\r\n$%zu\r\n%s\r\n$%zu\r\n%s\r\n:1000\r\n:%d\r\n",
                         strlen(c->argv[3]), c->argv[3], strlen(t->owner), t->owner,
                         t->deliveries);
        peer_write(p, buf, (size_t)n);
    } else {
        peer_send(p, "-ERR unknown command\r\n");
    }
}

static void serve(peer_t *p, redisReply *q)
{
    tc_t *t = p->t;
    ASSERT_EQ(REDIS_REPLY_ARRAY, q->type);
    ASSERT_GE(q->elements, 1);
    ASSERT_LE(q->elements, MAX_ARGS);
    ASSERT(!p->blocked); /* nothing is sent behind a blocking read */
    ASSERT_LT(t->ncmds, MAX_CMDS);
    cmd_t *c = &t->cmds[t->ncmds++];
    c->peer = p->idx;
    c->argc = (int)q->elements;
    for (size_t i = 0; i < q->elements; i++) {
        ASSERT_EQ(REDIS_REPLY_STRING, q->element[i]->type);
        c->argv[i] = hv_xstrndup(q->element[i]->str, q->element[i]->len);
    }
    freeReplyObject(q);
    c->st = stats(t);
    c->at = uv_now(&t->d.loop);
    /* The bound: what a read or a claim asks for fits beside what is held. */
    if ((is(c, "XREADGROUP") || is(c, "XAUTOCLAIM")) && t->s != NULL) {
        ASSERT_GE(count_of(c), 1);
        ASSERT_LE(count_of(c) + c->st.held, t->bound);
    }
    if (t->hook != NULL && t->hook(t, p, c))
        return;
    answer(t, p, c);
}

static void on_salloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    peer_t *p = h->data;
    (void)suggested;
    buf->base = p->buf;
    buf->len = sizeof(p->buf);
}

static void on_sread(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    peer_t *p = st->data;
    if (nread < 0) {
        peer_drop(p);
        return;
    }
    ASSERT_EQ(REDIS_OK, redisReaderFeed(p->reader, buf->base, (size_t)nread));
    while (p->open) {
        void *q = NULL;
        ASSERT_EQ(REDIS_OK, redisReaderGetReply(p->reader, &q));
        if (q == NULL)
            break;
        serve(p, q);
    }
}

static void on_sconnection(uv_stream_t *l, int status)
{
    tc_t *t = l->data;
    ASSERT_OK(status);
    ASSERT_LT(t->npeers, MAX_PEERS);
    peer_t *p = &t->peers[t->npeers];
    p->t = t;
    p->idx = t->npeers++;
    ASSERT_OK(uv_tcp_init(l->loop, &p->tcp));
    ASSERT_OK(uv_timer_init(l->loop, &p->block));
    p->tcp.data = p->block.data = p;
    p->reader = redisReaderCreate();
    p->open = 1;
    p->accepted_at = uv_now(l->loop);
    ASSERT_OK(uv_accept(l, (uv_stream_t *)&p->tcp));
    ASSERT_OK(uv_read_start((uv_stream_t *)&p->tcp, on_salloc, on_sread));
}

/* A socket bound to 127.0.0.1 on a free port, before the loop exists (the port goes into
 * the configuration); the loop adopts it in tc_open(). */
static void bind_port(tc_t *t)
{
    struct sockaddr_in addr;
    socklen_t len = sizeof(addr);
    t->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(t->fd, 0);
    ASSERT_OK(uv_ip4_addr("127.0.0.1", 0, &addr));
    ASSERT_OK(bind(t->fd, (const struct sockaddr *)&addr, sizeof(addr)));
    ASSERT_OK(getsockname(t->fd, (struct sockaddr *)&addr, &len));
    t->port = ntohs(addr.sin_port);
    snprintf(t->url, sizeof(t->url), "redis://127.0.0.1:%u", (unsigned)t->port);
}

/* ---- the source and waiting ---- */

static void on_watchdog(uv_timer_t *h)
{
    tc_t *t = h->data;
    t->timed_out = 1;
    uv_stop(h->loop);
}

/* After each iteration's I/O (check) and before the loop waits for more (prepare), so that
 * what timers, idle and close callbacks changed is seen before the loop sleeps. */
static void look(tc_t *t, uv_loop_t *loop)
{
    hv_stream_stats_t st = stats(t);
    ASSERT_LE(st.held, t->bound);
    if (st.held > t->max_held)
        t->max_held = st.held;
    if (t->until != NULL && t->until(t))
        uv_stop(loop);
}

static void on_check(uv_check_t *h)
{
    look(h->data, h->loop);
}

static void on_prepare(uv_prepare_t *h)
{
    look(h->data, h->loop);
}

/* Run the loop until `until` holds; fail after WAIT_MS. */
static void run_until(tc_t *t, int (*until)(tc_t *t), const char *what)
{
    t->timed_out = 0;
    t->until = until;
    uv_timer_start(&t->watchdog, on_watchdog, WAIT_MS, 0);
    while (!until(t) && !t->timed_out)
        uv_run(&t->d.loop, UV_RUN_DEFAULT);
    uv_timer_stop(&t->watchdog);
    t->until = NULL;
    if (!until(t))
        hv_test_fail(__FILE__, __LINE__, "timed out after %d ms waiting for %s", WAIT_MS, what);
}

static void on_ready(void *ud)
{
    tc_t *t = ud;
    t->ready++;
}

static void on_fatal(void *ud, int err, const char *detail)
{
    tc_t *t = ud;
    t->fatals++;
    t->fatal_err = err;
    snprintf(t->fatal_detail, sizeof(t->fatal_detail), "%s", detail);
}

static void on_closed(void *ud)
{
    tc_t *t = ud;
    t->s = NULL;
    t->closed = 1;
}

/* The daemon's stop_step(): the stream closes once no batch is left. */
static void close_when_drained(tc_t *t)
{
    if (!t->stopping || t->closing)
        return;
    if (hv_engine_batches(t->d.engine) > 0 || hv_bhost_count(t->d.host) > 0)
        return;
    t->closing = 1;
    hv_stream_close(t->s, on_closed, t);
}

static void on_progress(void *ud)
{
    close_when_drained(ud);
}

static const hv_stream_cbs_t stream_cbs = {on_fatal, on_progress, on_ready};

/* A daemon with source = redis on the scripted peer, its bound `bound`, plus `extra`
 * directives (name, value pairs, NULL-terminated; NULL for none). The stream is opened, not
 * started. */
static tc_t *tc_open(unsigned bound, const char *const *extra)
{
    tc_t *t = hv_xcalloc(1, sizeof(*t));
    char qs[16], err[1200];
    const char *dirs[48];
    size_t n = 0;
    t->cmds = hv_xcalloc(MAX_CMDS, sizeof(*t->cmds));
    t->bound = bound;
    t->deliveries = 2;
    t->owner = CONSUMER;
    bind_port(t);
    snprintf(qs, sizeof(qs), "%u", bound);
    const char *base[] = {"source", "redis", "redis_url", t->url, "redis_consumer", CONSUMER,
                          "queue_size", qs, "fsync", "always", "spool_dir", hv_test_tmpdir()};
    for (size_t i = 0; i < HV_ARRAY_SIZE(base); i++)
        dirs[n++] = base[i];
    for (size_t i = 0; extra != NULL && extra[i] != NULL; i++)
        dirs[n++] = extra[i];
    ASSERT_LT(n, HV_ARRAY_SIZE(dirs));
    dirs[n] = NULL;
    fx_daemon_init(&t->d, dirs);
    snprintf(t->out, sizeof(t->out), "%s/out", hv_test_tmpdir());
    ASSERT_OK(mkdir(t->out, 0750));

    ASSERT_OK(uv_tcp_init(&t->d.loop, &t->listener));
    t->listener.data = t;
    ASSERT_OK(uv_tcp_open(&t->listener, t->fd));
    ASSERT_OK(uv_listen((uv_stream_t *)&t->listener, 8, on_sconnection));
    ASSERT_OK(uv_timer_init(&t->d.loop, &t->watchdog));
    t->watchdog.data = t;
    ASSERT_OK(uv_check_init(&t->d.loop, &t->check));
    t->check.data = t;
    ASSERT_OK(uv_check_start(&t->check, on_check));
    ASSERT_OK(uv_prepare_init(&t->d.loop, &t->prepare));
    t->prepare.data = t;
    ASSERT_OK(uv_prepare_start(&t->prepare, on_prepare));

    ASSERT_OK(hv_stream_open(&t->d.loop, &t->d.cfg, t->d.host, t->d.engine, t->out,
                             &stream_cbs, t, &t->s, err, sizeof(err)));
    return t;
}

static void tc_start(tc_t *t)
{
    t->started_at = uv_now(&t->d.loop);
    hv_stream_start(t->s);
}

static int is_closed(tc_t *t)
{
    return t->closed;
}

/* The daemon's stop (loop.c stop(), then stop_step()): the stream and the host stop, the
 * engine drains, the batches end, the stream closes. */
static void tc_stop(tc_t *t)
{
    t->stopping = 1;
    hv_bhost_stop(t->d.host);
    hv_stream_stop(t->s);
    hv_engine_stop(t->d.engine, 0);
    close_when_drained(t);
    run_until(t, is_closed, "the stream to close");
}

/* Reads have a connection of their own; every other connection begins with XGROUP CREATE
 * (the group is made, and the key's type checked, at every connect). */
static void check_links(const tc_t *t)
{
    for (int p = 0; p < t->npeers; p++) {
        int reads = 0, others = 0, first = -1;
        for (int i = 0; i < t->ncmds; i++) {
            if (t->cmds[i].peer != p)
                continue;
            if (first < 0)
                first = i;
            if (is(&t->cmds[i], "XREADGROUP"))
                reads++;
            else
                others++;
        }
        ASSERT(reads == 0 || others == 0);
        if (others > 0)
            ASSERT_STR_EQ("XGROUP", t->cmds[first].argv[0]);
    }
}

/* Whether command `i` came on a write link (one that began with XGROUP). */
static int on_write_link(const tc_t *t, int i)
{
    for (int j = 0; j <= i; j++)
        if (t->cmds[j].peer == t->cmds[i].peer)
            return is(&t->cmds[j], "XGROUP");
    return 0;
}

static void tc_close(tc_t *t)
{
    if (!t->closed)
        tc_stop(t);
    check_links(t);
    drop_all(t);
    if (!uv_is_closing((uv_handle_t *)&t->listener))
        uv_close((uv_handle_t *)&t->listener, NULL);
    uv_close((uv_handle_t *)&t->watchdog, NULL);
    uv_close((uv_handle_t *)&t->check, NULL);
    uv_close((uv_handle_t *)&t->prepare, NULL);
    fx_daemon_close(&t->d);
    for (int i = 0; i < t->ncmds; i++)
        for (int j = 0; j < t->cmds[i].argc; j++)
            free(t->cmds[i].argv[j]);
    free(t->cmds);
    free(t);
}

/* ---- outputs ---- */

typedef struct {
    int n;
    int64_t line[MAX_ENTRIES];
    char url[MAX_ENTRIES][32];
    char batch[MAX_ENTRIES][32];
    char error_type[MAX_ENTRIES][32];
    char error[MAX_ENTRIES][64];
} records_t;

static void copy_str(char *out, size_t cap, const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    snprintf(out, cap, "%s", cJSON_IsString(v) ? v->valuestring : "-");
}

/* Every line of out/BATCH.c1.jsonl, each a whole JSON record. */
static void read_records(const tc_t *t, const char *batch, records_t *r)
{
    char path[700];
    snprintf(path, sizeof(path), "%s/%s." CONSUMER ".jsonl", t->out, batch);
    char *text = hv_test_read_file(path, NULL), *line = text, *nl;
    memset(r, 0, sizeof(*r));
    for (; (nl = strchr(line, '\n')) != NULL; line = nl + 1) {
        *nl = '\0';
        ASSERT_LT(r->n, MAX_ENTRIES);
        cJSON *rec = cJSON_Parse(line);
        if (rec == NULL)
            hv_test_fail(__FILE__, __LINE__, "not a JSON record: %s", line);
        const cJSON *ln = cJSON_GetObjectItemCaseSensitive(rec, "line");
        r->line[r->n] = cJSON_IsNumber(ln) ? (int64_t)ln->valuedouble : -1;
        copy_str(r->url[r->n], sizeof(r->url[0]), rec, "requested_url");
        copy_str(r->batch[r->n], sizeof(r->batch[0]), rec, "batch");
        copy_str(r->error_type[r->n], sizeof(r->error_type[0]), rec, "error_type");
        copy_str(r->error[r->n], sizeof(r->error[0]), rec, "error");
        r->n++;
        cJSON_Delete(rec);
    }
    if (*line != '\0')
        hv_test_fail(__FILE__, __LINE__, "%s ends with a torn line: %s", path, line);
    free(text);
}

/* ---- conditions ---- */

static int acked_want(tc_t *t)
{
    return stats(t).acked >= t->want;
}

static int fatal_seen(tc_t *t)
{
    return t->fatals > 0;
}

/* ---- 1. start-up ---- */

static int hook_startup(tc_t *t, peer_t *p, const cmd_t *c)
{
    if (is(c, "XGROUP")) {
        peer_send(p, "-BUSYGROUP Consumer Group name already exists\r\n");
        return 1;
    }
    /* The pending entries stay held (their acknowledgements unanswered) until the first
     * new read has come, so that its COUNT shows them. */
    if (is_ack(c) && !t->seen_new)
        p->hold = 1;
    if (is_new_read(c) && !t->seen_new) {
        t->seen_new = 1;
        for (int i = 0; i < t->npeers; i++)
            if (t->peers[i].hold)
                peer_release(&t->peers[i]);
    }
    return 0;
}

static int startup_done(tc_t *t)
{
    return t->seen_new && stats(t).acked >= 3;
}

TEST_IMPL(stream_startup_creates_group_reads_pending_then_new)
{
    char buf[512];
    tc_t *t = tc_open(8, NULL);
    t->hook = hook_startup;
    entry(&t->pending[0], "1-1", "b", "1", "not a url");
    entry(&t->pending[1], "1-2", "b", "2", "not a url");
    entry(&t->pending[2], "1-3", "b", "3", "not a url");
    t->npending = 3;
    tc_start(t);
    run_until(t, startup_done, "the new read and three acknowledgements");
    ASSERT_EQ(1, t->ready);
    ASSERT_EQ(0, t->fatals); /* BUSYGROUP: the group is there, which is fine */

    /* The group first, on the write link; ... */
    ASSERT_GE(t->ncmds, 4);
    ASSERT_STR_EQ("XGROUP CREATE " STREAM " " GROUP " 0 MKSTREAM",
                  args(&t->cmds[0], 0, buf, sizeof(buf)));
    /* ... then this consumer's pending entries from ID 0, nothing held, the whole bound; ... */
    int r1 = find(t, "XREADGROUP", 0);
    ASSERT_GT(r1, 0);
    ASSERT_NE(t->cmds[0].peer, t->cmds[r1].peer);
    ASSERT_STR_EQ("XREADGROUP GROUP " GROUP " " CONSUMER " COUNT 8 STREAMS " STREAM " 0",
                  args(&t->cmds[r1], 0, buf, sizeof(buf)));
    ASSERT_EQ(0, t->cmds[r1].st.held);
    /* ... on from the last pending id, asking only for what the three held leave free; ... */
    int r2 = find(t, "XREADGROUP", r1 + 1);
    ASSERT_GT(r2, r1);
    ASSERT_EQ(3, t->cmds[r2].st.held);
    ASSERT_STR_EQ("XREADGROUP GROUP " GROUP " " CONSUMER " COUNT 5 STREAMS " STREAM " 1-3",
                  args(&t->cmds[r2], 0, buf, sizeof(buf)));
    /* ... and, the pending list read, new entries ('>'), blocking, still within the bound. */
    int r3 = find(t, "XREADGROUP", r2 + 1);
    ASSERT_GT(r3, r2);
    ASSERT_EQ(3, t->cmds[r3].st.held);
    ASSERT_STR_EQ("XREADGROUP GROUP " GROUP " " CONSUMER " COUNT 5 BLOCK 100 STREAMS " STREAM " >",
                  args(&t->cmds[r3], 0, buf, sizeof(buf)));
    /* No new read before the pending list was read to its end. */
    for (int i = 0; i < r3; i++)
        ASSERT(!is_new_read(&t->cmds[i]));
    /* The group was not created again: BUSYGROUP is an answer, not a failure. */
    ASSERT_EQ(1, count_cmds(t, "XGROUP"));

    hv_stream_stats_t st = stats(t);
    ASSERT_EQ(3, st.read);
    ASSERT_EQ(3, st.acked);
    ASSERT_EQ(0, st.held);
    ASSERT_EQ(1, st.up);
    tc_close(t);
}

/* ---- 2. an entry's record, then its acknowledgement ---- */

static int hook_durable_first(tc_t *t, peer_t *p, const cmd_t *c)
{
    char buf[512];
    (void)p;
    if (!is_ack(c))
        return 0;
    t->evals++;
    /* The record is in the output when the acknowledgement arrives. */
    records_t r;
    read_records(t, "b", &r);
    ASSERT_EQ(1, r.n);
    ASSERT_STR_EQ("not a url", r.url[0]);
    ASSERT_STR_EQ("b", r.batch[0]);
    ASSERT_EQ(7, r.line[0]);
    ASSERT_STR_EQ("InvalidUrl", r.error_type[0]);
    /* The script, with the stream and the batch's hash, the group, the id and 0 (failed). */
    ASSERT_NOT_NULL(strstr(c->argv[1], "XACK"));
    ASSERT_NOT_NULL(strstr(c->argv[1], "HINCRBY"));
    ASSERT_STR_EQ("2 " STREAM " " STREAM ":batch:b " GROUP " 5-1 0", args(c, 2, buf, sizeof(buf)));
    ASSERT_EQ(1, c->st.held);
    ASSERT_EQ(1, c->st.acks_waiting);
    ASSERT_EQ(0, c->st.acked);
    ASSERT_EQ(1, c->st.batches);
    ASSERT_EQ(1, c->st.up);
    return 0;
}

/* The record is held back in the writer (flush_ms an hour; one request at a time, so every
 * read gets all it asked for and the output is not synced early) until the stream runs dry
 * (a read answered nil after BLOCK), when it is written and synced at once: an acknowledgement
 * sent before the record was durable would find the output empty. */
TEST_IMPL(stream_ack_only_after_record_is_written)
{
    static const char *const extra[] = {"concurrency", "1", "flush_ms", "3600s", NULL};
    tc_t *t = tc_open(8, extra);
    t->hook = hook_durable_first;
    entry(&t->entries[0], "5-1", "b", "7", "not a url");
    t->nentries = 1;
    t->want = 1;
    tc_start(t);
    run_until(t, acked_want, "the acknowledgement");
    ASSERT_EQ(1, t->evals);
    int ack = find(t, "EVAL", 0);
    ASSERT(on_write_link(t, ack));
    hv_stream_stats_t st = stats(t);
    ASSERT_EQ(1, st.up);
    ASSERT_EQ(1, st.read);
    ASSERT_EQ(1, st.acked);
    ASSERT_EQ(0, st.held);
    ASSERT_EQ(0, st.acks_waiting);
    ASSERT_EQ(0, st.invalid); /* a bad URL is a record, not a bad entry */
    tc_close(t);
}

/* ---- 3. an entry deleted while pending ---- */

TEST_IMPL(stream_deleted_entry_gets_plain_xack_and_no_record)
{
    char buf[512];
    tc_t *t = tc_open(8, NULL);
    entry(&t->pending[0], "7-1", NULL, NULL, NULL); /* deleted: its fields are nil */
    entry(&t->pending[1], "7-2", "b", "2", "not a url");
    t->npending = 2;
    t->want = 1;
    tc_start(t);
    run_until(t, acked_want, "the acknowledgement of 7-2");

    /* The deleted entry: a plain XACK on the write link, before anything else is acked. */
    int x = find(t, "XACK", 0), ack = find(t, "EVAL", 0);
    ASSERT_GE(x, 0);
    ASSERT_STR_EQ("XACK " STREAM " " GROUP " 7-1", args(&t->cmds[x], 0, buf, sizeof(buf)));
    ASSERT(on_write_link(t, x));
    ASSERT_EQ(1, count_cmds(t, "XACK"));
    ASSERT_GT(ack, x);
    /* The script acknowledges the other entry alone. */
    ASSERT_STR_EQ("2 " STREAM " " STREAM ":batch:b " GROUP " 7-2 0",
                  args(&t->cmds[ack], 2, buf, sizeof(buf)));
    /* One record: the other entry's. */
    records_t r;
    read_records(t, "b", &r);
    ASSERT_EQ(1, r.n);
    ASSERT_EQ(2, r.line[0]);
    hv_stream_stats_t st = stats(t);
    ASSERT_EQ(1, st.invalid);
    ASSERT_EQ(1, st.read);
    ASSERT_EQ(1, st.acked);
    ASSERT_EQ(0, st.held);
    tc_close(t);
}

/* ---- 4. the group gone, the key of another type ---- */

static int hook_nogroup(tc_t *t, peer_t *p, const cmd_t *c)
{
    if (is(c, "XREADGROUP") && count_cmds(t, "XREADGROUP") == 1) {
        peer_send(p, "-NOGROUP No such key '" STREAM "' or consumer group '" GROUP
                     "' in XREADGROUP with GROUP option\r\n");
        return 1;
    }
    return 0;
}

/* The group created again, and the pending list read from its start after it. */
static int regrouped(tc_t *t)
{
    int g2 = find(t, "XGROUP", find(t, "XGROUP", 0) + 1);
    return g2 > 0 && find(t, "XREADGROUP", g2) > g2;
}

TEST_IMPL(stream_nogroup_creates_group_again)
{
    char buf[512];
    tc_t *t = tc_open(8, NULL);
    t->hook = hook_nogroup;
    tc_start(t);
    run_until(t, regrouped, "the group created again");
    ASSERT_EQ(0, t->fatals);
    /* In that order: the group, a read refused, the group again, the pending read again. */
    ASSERT_STR_EQ("XGROUP", t->cmds[0].argv[0]);
    ASSERT_STR_EQ("XREADGROUP", t->cmds[1].argv[0]);
    ASSERT_STR_EQ("XGROUP CREATE " STREAM " " GROUP " 0 MKSTREAM",
                  args(&t->cmds[2], 0, buf, sizeof(buf)));
    ASSERT(on_write_link(t, 2));
    ASSERT_STR_EQ("XREADGROUP GROUP " GROUP " " CONSUMER " COUNT 8 STREAMS " STREAM " 0",
                  args(&t->cmds[3], 0, buf, sizeof(buf)));
    tc_close(t);
}

static int hook_wrongtype_group(tc_t *t, peer_t *p, const cmd_t *c)
{
    (void)t;
    if (!is(c, "XGROUP"))
        return 0;
    peer_send(p, "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n");
    return 1;
}

TEST_IMPL(stream_wrongtype_on_group_create_is_fatal)
{
    char want[256];
    tc_t *t = tc_open(8, NULL);
    t->hook = hook_wrongtype_group;
    tc_start(t);
    run_until(t, fatal_seen, "the fatal error");
    ASSERT_EQ(1, t->fatals);
    ASSERT_EQ(UV_EINVAL, t->fatal_err);
    snprintf(want, sizeof(want), "redis_stream " STREAM " at %s is not a stream", t->url);
    if (strstr(t->fatal_detail, want) == NULL)
        hv_test_fail(__FILE__, __LINE__, "'%s' does not say '%s'", t->fatal_detail, want);
    tc_stop(t);
    /* Nothing was read from a key that is not a stream. */
    ASSERT_EQ(0, count_cmds(t, "XREADGROUP"));
    ASSERT_EQ(1, t->fatals);
    tc_close(t);
}

static int hook_wrongtype_read(tc_t *t, peer_t *p, const cmd_t *c)
{
    (void)t;
    if (!is(c, "XREADGROUP"))
        return 0;
    peer_send(p, "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n");
    return 1;
}

TEST_IMPL(stream_wrongtype_on_read_is_fatal)
{
    char want[256];
    tc_t *t = tc_open(8, NULL);
    t->hook = hook_wrongtype_read;
    tc_start(t);
    run_until(t, fatal_seen, "the fatal error");
    ASSERT_EQ(UV_EINVAL, t->fatal_err);
    snprintf(want, sizeof(want), "redis_stream " STREAM " at %s is not a stream", t->url);
    if (strstr(t->fatal_detail, want) == NULL)
        hv_test_fail(__FILE__, __LINE__, "'%s' does not say '%s'", t->fatal_detail, want);
    tc_stop(t);
    ASSERT_EQ(1, count_cmds(t, "XREADGROUP")); /* no read after it */
    ASSERT_EQ(1, t->fatals);
    tc_close(t);
}

/* ---- 5. Redis going away ---- */

static int hook_drop_on_first_ack(tc_t *t, peer_t *p, const cmd_t *c)
{
    (void)p;
    if (!is_ack(c) || t->evals++ > 0)
        return 0;
    /* As a restart: every connection closes, the acknowledgement unanswered. */
    t->dropped_at = uv_now(&t->d.loop);
    drop_all(t);
    return 1;
}

/* The acknowledgement went through on a new connection, and reading started again. */
static int reconnected(tc_t *t)
{
    if (stats(t).acked < 1)
        return 0;
    for (int i = 0; i < t->ncmds; i++)
        if (t->cmds[i].peer >= 2 && is(&t->cmds[i], "XREADGROUP"))
            return 1;
    return 0;
}

TEST_IMPL(stream_reconnects_and_resends_failed_ack)
{
    char a1[512], a2[512];
    tc_t *t = tc_open(8, NULL);
    t->hook = hook_drop_on_first_ack;
    entry(&t->entries[0], "9-1", "b", "1", "not a url");
    t->nentries = 1;
    tc_start(t);
    run_until(t, reconnected, "the acknowledgement on a new connection");
    ASSERT_EQ(0, t->fatals);
    ASSERT_EQ(2, t->evals);
    ASSERT_EQ(4, t->npeers); /* both links, twice */
    int e1 = find(t, "EVAL", 0), e2 = find(t, "EVAL", e1 + 1);
    ASSERT_GT(e2, e1);
    /* The same acknowledgement, again, on a connection accepted after the backoff, which
     * began by creating the group. */
    ASSERT_STR_EQ(args(&t->cmds[e1], 2, a1, sizeof(a1)), args(&t->cmds[e2], 2, a2, sizeof(a2)));
    ASSERT_STR_EQ("2 " STREAM " " STREAM ":batch:b " GROUP " 9-1 0", a2);
    const peer_t *np = &t->peers[t->cmds[e2].peer];
    ASSERT_GE(np->idx, 2);
    ASSERT_GE(np->accepted_at, t->dropped_at + BACKOFF_MIN_MS);
    ASSERT(on_write_link(t, e2));
    /* While away, the entry stayed held, its acknowledgement waiting. */
    ASSERT_EQ(1, t->cmds[e2].st.held);
    ASSERT_EQ(1, t->cmds[e2].st.acks_waiting);
    /* The record was written once. */
    records_t r;
    read_records(t, "b", &r);
    ASSERT_EQ(1, r.n);
    hv_stream_stats_t st = stats(t);
    ASSERT_EQ(2, st.reconnects);
    ASSERT_EQ(1, st.acked);
    ASSERT_EQ(0, st.held);
    ASSERT_EQ(1, st.up);
    tc_close(t);
}

static int hook_go_away(tc_t *t, peer_t *p, const cmd_t *c)
{
    (void)p;
    if (!is_ack(c))
        return 0;
    t->evals++;
    /* Redis goes away and stays away: nothing listens any more. */
    drop_all(t);
    uv_close((uv_handle_t *)&t->listener, NULL);
    return 1;
}

static int both_down(tc_t *t)
{
    hv_stream_stats_t st = stats(t);
    return !st.up && st.reconnects == 2;
}

TEST_IMPL(stream_close_gives_up_acks_after_drain_timeout)
{
    static const char *const extra[] = {"drain_timeout", "1s", NULL};
    tc_t *t = tc_open(8, extra);
    t->hook = hook_go_away;
    entry(&t->entries[0], "6-1", "b", "1", "not a url");
    t->nentries = 1;
    tc_start(t);
    run_until(t, both_down, "both links down");
    /* The acknowledgement is kept for when Redis is back. */
    hv_stream_stats_t st = stats(t);
    ASSERT_EQ(1, st.held);
    ASSERT_EQ(1, st.acks_waiting);
    ASSERT_EQ(0, st.acked);
    /* Closing waits drain_timeout for Redis, then gives the acknowledgement up: the entry
     * stays pending and is processed again later. */
    uint64_t t0 = uv_now(&t->d.loop);
    tc_stop(t);
    ASSERT_GE(uv_now(&t->d.loop), t0 + 1000);
    ASSERT_EQ(1, t->evals);
    ASSERT_EQ(0, t->fatals);
    tc_close(t);
}

/* ---- more: the bound, taking over, a refused script ---- */

TEST_IMPL(stream_holds_at_most_queue_size)
{
    char ids[MAX_ENTRIES][32], lines[MAX_ENTRIES][16];
    int seen[MAX_ENTRIES] = {0};
    tc_t *t = tc_open(4, NULL);
    /* Odd lines a bad URL, even ones no url at all. */
    for (int i = 0; i < 10; i++) {
        snprintf(ids[i], sizeof(ids[i]), "10-%d", i + 1);
        snprintf(lines[i], sizeof(lines[i]), "%d", i + 1);
        entry(&t->entries[i], ids[i], "b", lines[i], i % 2 == 0 ? "not a url" : NULL);
    }
    t->nentries = 10;
    t->want = 10;
    tc_start(t);
    run_until(t, acked_want, "ten acknowledgements");
    /* Every read asked within the bound (checked as each arrived) and the bound was used. */
    ASSERT_EQ(4, t->max_held);
    ASSERT_GE(count_cmds(t, "XREADGROUP"), 4);
    /* Each id acknowledged once, as failed. */
    for (int i = 0; i < t->ncmds; i++) {
        const cmd_t *c = &t->cmds[i];
        if (!is_ack(c))
            continue;
        for (int a = 6; a + 1 < c->argc; a += 2) {
            int k = -1;
            for (int j = 0; j < 10; j++)
                if (strcmp(ids[j], c->argv[a]) == 0)
                    k = j;
            ASSERT_GE(k, 0);
            ASSERT_STR_EQ("0", c->argv[a + 1]);
            seen[k]++;
        }
    }
    for (int j = 0; j < 10; j++)
        ASSERT_EQ(1, seen[j]);
    /* One record per line, of the kind its entry asks for. */
    records_t r;
    int lines_seen[11] = {0};
    read_records(t, "b", &r);
    ASSERT_EQ(10, r.n);
    for (int i = 0; i < r.n; i++) {
        ASSERT(r.line[i] >= 1 && r.line[i] <= 10);
        lines_seen[r.line[i]]++;
        ASSERT_STR_EQ(r.line[i] % 2 == 1 ? "InvalidUrl" : "InvalidEntry", r.error_type[i]);
        if (r.line[i] % 2 == 0)
            ASSERT_STR_EQ("entry_has_no_url", r.error[i]);
    }
    for (int l = 1; l <= 10; l++)
        ASSERT_EQ(1, lines_seen[l]);
    hv_stream_stats_t st = stats(t);
    ASSERT_EQ(10, st.read);
    ASSERT_EQ(10, st.acked);
    ASSERT_EQ(5, st.invalid);
    ASSERT_EQ(0, st.held);
    tc_close(t);
}

static int hook_claim(tc_t *t, peer_t *p, const cmd_t *c)
{
    /* The three entries read stay held (their acknowledgement unanswered) until the first
     * XAUTOCLAIM, whose COUNT must leave room for them. */
    if (is_ack(c) && count_cmds(t, "XAUTOCLAIM") == 0)
        p->hold = 1;
    if (!is(c, "XAUTOCLAIM") || count_cmds(t, "XAUTOCLAIM") > 1)
        return 0;
    peer_release(p);
    /* [next cursor, [entry...], [deleted id...]] */
    sentry_t e;
    char buf[1024];
    entry(&e, "3-1", "c", "4", "not a url");
    snprintf(buf, sizeof(buf), "*3\r\n$3\r\n0-0\r\n*1\r\n%s*0\r\n", e.resp);
    peer_send(p, buf);
    return 1;
}

TEST_IMPL(stream_xautoclaim_entries_are_reclaimed)
{
    static const char *const extra[] = {"redis_claim_idle", "1s", NULL};
    char buf[512];
    tc_t *t = tc_open(8, extra);
    t->hook = hook_claim;
    entry(&t->entries[0], "2-1", "b", "1", "not a url");
    entry(&t->entries[1], "2-2", "b", "2", "not a url");
    entry(&t->entries[2], "2-3", "b", "3", "not a url");
    t->nentries = 3;
    t->want = 4;
    tc_start(t);
    run_until(t, acked_want, "the acknowledgement of the entry taken over");
    /* Idle for longer than redis_claim_idle, half that period after the start, on the write
     * link, asking for no more than the three held leave free. */
    int x = find(t, "XAUTOCLAIM", 0);
    ASSERT_GE(x, 0);
    ASSERT_EQ(3, t->cmds[x].st.held);
    ASSERT_STR_EQ("XAUTOCLAIM " STREAM " " GROUP " " CONSUMER " 1000 0-0 COUNT 5",
                  args(&t->cmds[x], 0, buf, sizeof(buf)));
    ASSERT_GE(t->cmds[x].at, t->started_at + 500);
    ASSERT(on_write_link(t, x));
    /* The entry taken over: its record in its batch's output, then its acknowledgement. */
    int ack = -1;
    for (int i = 0; i < t->ncmds && ack < 0; i++)
        if (is_ack(&t->cmds[i]) && strcmp(t->cmds[i].argv[6], "3-1") == 0)
            ack = i;
    ASSERT_GT(ack, x);
    ASSERT_STR_EQ("2 " STREAM " " STREAM ":batch:c " GROUP " 3-1 0",
                  args(&t->cmds[ack], 2, buf, sizeof(buf)));
    records_t r;
    read_records(t, "c", &r);
    ASSERT_EQ(1, r.n);
    ASSERT_EQ(4, r.line[0]);
    hv_stream_stats_t st = stats(t);
    ASSERT_EQ(1, st.reclaimed);
    ASSERT_EQ(3, st.read);
    ASSERT_EQ(4, st.acked);
    tc_close(t);
}

static int hook_refuse_ack(tc_t *t, peer_t *p, const cmd_t *c)
{
    if (!is_ack(c))
        return 0;
    t->evals++;
    peer_send(p, "-ERR Error running script: @user_script:3: out of memory\r\n");
    return 1;
}

/* The first acknowledgement refused; nothing answered after it. */
static int hook_refuse_first_ack(tc_t *t, peer_t *p, const cmd_t *c)
{
    if (!is_ack(c) || t->evals > 0)
        return 0;
    hook_refuse_ack(t, p, c);
    p->hold = 1;
    return 1;
}

TEST_IMPL(stream_refused_ack_script_is_fatal)
{
    tc_t *t = tc_open(8, NULL);
    t->hook = hook_refuse_first_ack;
    entry(&t->entries[0], "4-1", "b", "1", "not a url");
    t->nentries = 1;
    tc_start(t);
    run_until(t, fatal_seen, "the fatal error");
    ASSERT_EQ(1, t->fatals);
    ASSERT_EQ(UV_EINVAL, t->fatal_err);
    ASSERT_STR_EQ("acknowledging on " STREAM ": ERR Error running script: @user_script:3: "
                  "out of memory", t->fatal_detail);
    hv_stream_stats_t st = stats(t);
    ASSERT_EQ(0, st.acked);
    ASSERT_EQ(1, st.held); /* kept: it stays pending, processed again at the next start */
    ASSERT_EQ(1, st.acks_waiting);
    /* A fatal error ends the wait for acknowledgements at once: the close does not wait for
     * drain_timeout (20 s, longer than the watchdog). */
    tc_stop(t);
    ASSERT_EQ(1, t->fatals);
    tc_close(t);
}

/* Once the server refused the acknowledgement script (fatal), the script is not sent again:
 * resending it round trip after round trip while the daemon drains (up to drain_timeout)
 * would give Redis thousands of refused scripts a second, and the entries stay pending
 * either way (stream.h). */
TEST_IMPL(stream_refused_ack_is_not_sent_again)
{
    tc_t *t = tc_open(8, NULL);
    t->hook = hook_refuse_ack;
    entry(&t->entries[0], "4-1", "b", "1", "not a url");
    t->nentries = 1;
    tc_start(t);
    run_until(t, fatal_seen, "the fatal error");
    tc_stop(t);
    int evals = t->evals;
    tc_close(t);
    ASSERT_EQ(1, evals);
}

/* ---- Redis not ready ---- */

/* As a Redis restarted with its data, loading it, then a replica after a failover: the first
 * group creation is answered LOADING, the first read BUSY (a long script), the first
 * acknowledgement READONLY. None of it is the daemon's failure: each time the link goes down
 * and connects again after the backoff, as when the connection is lost. */
static int hook_not_ready(tc_t *t, peer_t *p, const cmd_t *c)
{
    if (is(c, "XGROUP") && t->groups++ == 0) {
        peer_send(p, "-LOADING Redis is loading the dataset in memory\r\n");
        return 1;
    }
    if (is(c, "XREADGROUP") && t->reads++ == 0) {
        peer_send(p, "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or "
                     "SHUTDOWN NOSAVE.\r\n");
        return 1;
    }
    if (is_ack(c) && t->evals++ == 0) {
        peer_send(p, "-READONLY You can't write against a read only replica.\r\n");
        return 1;
    }
    return 0;
}

TEST_IMPL(stream_redis_not_ready_is_waited_for)
{
    tc_t *t = tc_open(8, NULL);
    t->hook = hook_not_ready;
    entry(&t->entries[0], "3-1", "b", "1", "not a url");
    t->nentries = 1;
    t->want = 1;
    tc_start(t);
    run_until(t, acked_want, "the acknowledgement after Redis was ready");
    ASSERT_EQ(0, t->fatals);
    ASSERT_GE(t->groups, 3); /* LOADING; again after it; again after READONLY */
    ASSERT_GE(t->reads, 2);
    ASSERT_EQ(2, t->evals);
    /* Each time on a new connection, after the backoff. */
    int g1 = find(t, "XGROUP", 0), g2 = find(t, "XGROUP", g1 + 1);
    ASSERT_NE(t->cmds[g1].peer, t->cmds[g2].peer);
    ASSERT_GE(t->cmds[g2].at, t->cmds[g1].at + BACKOFF_MIN_MS);
    int e1 = find(t, "EVAL", 0), e2 = find(t, "EVAL", e1 + 1);
    ASSERT_NE(t->cmds[e1].peer, t->cmds[e2].peer);
    records_t r;
    read_records(t, "b", &r);
    ASSERT_EQ(1, r.n);
    hv_stream_stats_t st = stats(t);
    ASSERT_EQ(1, st.acked);
    ASSERT_EQ(0, st.held);
    tc_close(t);
}

/* ---- a reply with more than was asked for ---- */

/* A broken server: the first new read gets every entry, whatever its COUNT said. */
static int hook_over_count(tc_t *t, peer_t *p, const cmd_t *c)
{
    if (!is_new_read(c) || t->seen_new)
        return 0;
    t->seen_new = 1;
    send_entries(p, c->argv[c->argc - 2], t->entries, t->nentries);
    t->next_entry = t->nentries;
    return 1;
}

TEST_IMPL(stream_keeps_no_more_than_it_asked_for)
{
    char id[32], line[16];
    tc_t *t = tc_open(4, NULL);
    t->hook = hook_over_count;
    for (int i = 0; i < 12; i++) {
        snprintf(id, sizeof(id), "8-%d", i + 1);
        snprintf(line, sizeof(line), "%d", i + 1);
        entry(&t->entries[i], id, "b", line, "not a url");
    }
    t->nentries = 12;
    t->want = 4;
    tc_start(t);
    run_until(t, acked_want, "the entries that fit the bound");
    /* The bound held throughout (look() checks it at every iteration); what the read asked
     * for was kept, the rest left pending for XAUTOCLAIM to find again. */
    ASSERT_LE(t->max_held, 4);
    hv_stream_stats_t st = stats(t);
    ASSERT_EQ(4, st.read);
    ASSERT_EQ(4, st.acked);
    records_t r;
    read_records(t, "b", &r);
    ASSERT_EQ(4, r.n);
    tc_close(t);
}

/* ---- delivery counts ---- */

static int dead_seen(tc_t *t)
{
    return stats(t).dead >= 1;
}

TEST_IMPL(stream_poisoned_entry_gets_a_record_and_a_dead_letter)
{
    char buf[1024];
    tc_t *t = tc_open(8, NULL);
    /* Read again from the pending list after its sixth delivery: its daemons kept dying. */
    t->deliveries = 6;
    entry(&t->pending[0], "6-1", "b", "4", "http://crash.test/");
    t->npending = 1;
    tc_start(t);
    run_until(t, dead_seen, "the dead letter");
    int x = find(t, "XPENDING", 0);
    ASSERT_GE(x, 0);
    ASSERT_STR_EQ("XPENDING " STREAM " " GROUP " 6-1 6-1 1", args(&t->cmds[x], 0, buf, sizeof(buf)));
    ASSERT(on_write_link(t, x));
    /* The dead letter, moved with its acknowledgement and counted in its batch. */
    int d = -1;
    for (int i = 0; i < t->ncmds; i++)
        if (is_dead(&t->cmds[i]))
            d = i;
    ASSERT_GE(d, 0);
    ASSERT_STR_EQ("3 " STREAM " " STREAM ":dead " STREAM ":batch:b " GROUP " 6-1 poisoned " CONSUMER
                  " batch b line 4 url http://crash.test/",
                  args(&t->cmds[d], 2, buf, sizeof(buf)));
    ASSERT_EQ(0, count_cmds(t, "XACK"));
    for (int i = 0; i < t->ncmds; i++)
        ASSERT(!is_ack(&t->cmds[i])); /* not acknowledged the usual way as well */
    /* Its line has its record, written before the dead letter went: never fetched. */
    records_t r;
    read_records(t, "b", &r);
    ASSERT_EQ(1, r.n);
    ASSERT_STR_EQ("Poisoned", r.error_type[0]);
    ASSERT_STR_EQ("delivered_too_often", r.error[0]);
    ASSERT_EQ(0, t->fatals);
    tc_close(t);
}

TEST_IMPL(stream_redelivered_entry_within_the_bound_is_processed)
{
    tc_t *t = tc_open(8, NULL);
    t->deliveries = 5; /* redis_max_deliveries: still processed */
    entry(&t->pending[0], "5-1", "b", "1", "not a url");
    t->npending = 1;
    t->want = 1;
    tc_start(t);
    run_until(t, acked_want, "the acknowledgement");
    ASSERT_EQ(1, count_cmds(t, "XPENDING"));
    ASSERT_EQ(0, stats(t).dead);
    records_t r;
    read_records(t, "b", &r);
    ASSERT_EQ(1, r.n);
    ASSERT_STR_EQ("InvalidUrl", r.error_type[0]);
    tc_close(t);
}

static int lost_seen(tc_t *t)
{
    return stats(t).lost >= 1;
}

TEST_IMPL(stream_redelivered_entry_taken_meanwhile_is_left_to_its_owner)
{
    tc_t *t = tc_open(8, NULL);
    t->owner = "another";
    entry(&t->pending[0], "7-1", "b", "1", "not a url");
    t->npending = 1;
    tc_start(t);
    run_until(t, lost_seen, "the entry found taken");
    hv_stream_stats_t st = stats(t);
    ASSERT_EQ(0, st.held);
    ASSERT_EQ(0, st.acked);
    /* No record: the batch's output, if it was made at all, is empty. */
    char path[700];
    struct stat sb;
    snprintf(path, sizeof(path), "%s/b." CONSUMER ".jsonl", t->out);
    tc_close(t);
    ASSERT(stat(path, &sb) != 0 || sb.st_size == 0);
}
