/*
 * test_redis.c: the Redis connection against a server made in the test, on 127.0.0.1 only.
 *
 * The server parses requests with hiredis's reader, as Redis would read them, and answers
 * PING with +PONG and ECHO with its argument; HANG gets no answer (for the timeouts), and
 * QUIT makes it close the connection. SELECT takes databases 0 to 15, as Redis does by
 * default, unless the server was told to leave it unanswered. A server given a password
 * answers AUTH as Redis does (+OK, or -WRONGPASS), and -NOAUTH to anything before it; it
 * records the first commands' names and AUTH's arguments. The address is an IP literal: the
 * dns cache the client is given must end with zero lookups.
 *
 * A hostile or broken server is scripted with a plan: segments of bytes, each repeated a
 * number of times, sent in order as the answer to PLAN (or to SELECT), a piece at a time as
 * the client reads them, so that a plan of hundreds of megabytes costs the server one piece.
 * Commands after the plan's are not answered (it may end with their replies).
 */
#include <hiredis/read.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harvestd/common.h"
#include "harvestd/dns.h"
#include "harvestd/redis.h"
#include "test.h"

typedef struct {
    const char *data;
    size_t len;
    uint64_t times; /* at least 1 */
} segment_t;

typedef struct {
    uv_tcp_t listener;
    uv_tcp_t peer;
    int accepted;
    int peer_open;
    int hung;        /* a HANG came: nothing more is answered, as behind a blocking command */
    int hang_select; /* SELECT hangs too */
    int plan_select; /* SELECT is answered with the plan */
    const char *user;     /* AUTH: the user it takes (NULL: the default user only) ... */
    const char *password; /* ... and the password (NULL: no AUTH needed) */
    int hang_auth;        /* AUTH gets no answer */
    int authed;
    int auth_argc;        /* AUTH's arguments after its name, as they came */
    char auth_args[2][64];
    char names[8][16];    /* the first commands' names, in order */
    int commands;
    int selected_first; /* the first command was a SELECT */
    unsigned long db;   /* the database of the last SELECT */
    uint16_t port;
    redisReader *reader;
    segment_t plan[8];
    int nplan;
    int plan_at;         /* the segment being sent ... */
    uint64_t plan_times; /* ... and how many times it was */
    uint64_t sent;       /* bytes of the plan written */
    char buf[4096];
} server_t;

typedef struct {
    uv_write_t req;
    char data[];
} swrite_t;

static void on_swritten(uv_write_t *req, int status)
{
    (void)status;
    free(hv_container_of(req, swrite_t, req));
}

static void server_send(server_t *s, const char *data, size_t len)
{
    swrite_t *w = hv_xmalloc(sizeof(*w) + len);
    memcpy(w->data, data, len);
    uv_buf_t b = uv_buf_init(w->data, (unsigned)len);
    if (uv_write(&w->req, (uv_stream_t *)&s->peer, &b, 1, on_swritten) != 0)
        free(w);
}

static void server_str(server_t *s, const char *str)
{
    server_send(s, str, strlen(str));
}

static void server_close_peer(server_t *s)
{
    if (s->peer_open) {
        s->peer_open = 0;
        uv_close((uv_handle_t *)&s->peer, NULL);
    }
}

#define PIECE (256 * 1024)

static void plan_send(server_t *s);

static void on_plan_written(uv_write_t *req, int status)
{
    server_t *s = req->handle->data;
    free(hv_container_of(req, swrite_t, req));
    if (status == 0 && s->peer_open)
        plan_send(s);
}

/* The next piece of the plan: whole repetitions of its segments, about PIECE bytes. */
static void plan_send(server_t *s)
{
    size_t len = 0;
    int at = s->plan_at;
    uint64_t times = s->plan_times;
    while (at < s->nplan && len < PIECE) {
        len += s->plan[at].len;
        if (++times == s->plan[at].times) {
            at++;
            times = 0;
        }
    }
    if (len == 0)
        return; /* all sent */
    swrite_t *w = hv_xmalloc(sizeof(*w) + len);
    for (size_t off = 0; off < len;) {
        const segment_t *seg = &s->plan[s->plan_at];
        memcpy(w->data + off, seg->data, seg->len);
        off += seg->len;
        if (++s->plan_times == seg->times) {
            s->plan_at++;
            s->plan_times = 0;
        }
    }
    s->sent += len;
    uv_buf_t b = uv_buf_init(w->data, (unsigned)len);
    if (uv_write(&w->req, (uv_stream_t *)&s->peer, &b, 1, on_plan_written) != 0)
        free(w);
}

static void plan_add(server_t *s, const char *data, size_t len, uint64_t times)
{
    ASSERT(s->nplan < (int)HV_ARRAY_SIZE(s->plan));
    ASSERT(times > 0);
    s->plan[s->nplan++] = (segment_t){data, len, times};
}

static void plan_str(server_t *s, const char *str, uint64_t times)
{
    plan_add(s, str, strlen(str), times);
}

static void on_salloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    server_t *s = h->data;
    (void)suggested;
    buf->base = s->buf;
    buf->len = sizeof(s->buf);
}

static void on_sread(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    server_t *s = st->data;
    if (nread < 0) {
        server_close_peer(s);
        return;
    }
    redisReaderFeed(s->reader, buf->base, (size_t)nread);
    void *req;
    while (redisReaderGetReply(s->reader, &req) == REDIS_OK && req != NULL) {
        redisReply *q = req;
        ASSERT_EQ(REDIS_REPLY_ARRAY, q->type);
        const char *cmd = q->element[0]->str;
        if (s->commands < (int)HV_ARRAY_SIZE(s->names))
            snprintf(s->names[s->commands], sizeof(s->names[0]), "%s", cmd);
        if (strcmp(cmd, "SELECT") == 0) {
            s->selected_first |= s->commands == 0;
            s->db = strtoul(q->element[1]->str, NULL, 10);
        }
        s->commands++;
        if (s->hung) {
            /* nothing */
        } else if (strcmp(cmd, "AUTH") == 0 && s->hang_auth) {
            s->hung = 1;
        } else if (strcmp(cmd, "AUTH") == 0) {
            s->auth_argc = (int)q->elements - 1;
            for (int i = 0; i < s->auth_argc && i < 2; i++)
                snprintf(s->auth_args[i], sizeof(s->auth_args[i]), "%s", q->element[i + 1]->str);
            const redisReply *pw = q->element[q->elements - 1];
            int user_ok = q->elements == 2 ? s->user == NULL
                                           : s->user != NULL && q->elements == 3 &&
                                                 strcmp(q->element[1]->str, s->user) == 0;
            s->authed = user_ok && s->password != NULL && pw->len == strlen(s->password) &&
                        memcmp(pw->str, s->password, pw->len) == 0;
            if (s->authed)
                server_send(s, "+OK\r\n", 5);
            else
                server_str(s, "-WRONGPASS invalid username-password pair or user is "
                              "disabled.\r\n");
        } else if (s->password != NULL && !s->authed) {
            server_str(s, "-NOAUTH Authentication required.\r\n");
        } else if (strcmp(cmd, "SELECT") == 0 && s->hang_select) {
            s->hung = 1;
        } else if (strcmp(cmd, "PLAN") == 0 || (strcmp(cmd, "SELECT") == 0 && s->plan_select)) {
            s->hung = 1;
            plan_send(s);
        } else if (strcmp(cmd, "SELECT") == 0) {
            if (strtoul(q->element[1]->str, NULL, 10) < 16)
                server_send(s, "+OK\r\n", 5);
            else
                server_send(s, "-ERR DB index is out of range\r\n", 31);
        } else if (strcmp(cmd, "PING") == 0) {
            server_send(s, "+PONG\r\n", 7);
        } else if (strcmp(cmd, "ECHO") == 0) {
            char head[32];
            int n = snprintf(head, sizeof(head), "$%zu\r\n", q->element[1]->len);
            server_send(s, head, (size_t)n);
            server_send(s, q->element[1]->str, q->element[1]->len);
            server_send(s, "\r\n", 2);
        } else if (strcmp(cmd, "QUIT") == 0) {
            server_close_peer(s);
        } else if (strcmp(cmd, "HANG") == 0) {
            s->hung = 1;
        }
        freeReplyObject(q);
        if (!s->peer_open)
            return;
    }
}

static void on_sconnection(uv_stream_t *l, int status)
{
    server_t *s = l->data;
    ASSERT_OK(status);
    ASSERT_EQ(0, s->accepted);
    uv_tcp_init(l->loop, &s->peer);
    s->peer.data = s;
    ASSERT_OK(uv_accept(l, (uv_stream_t *)&s->peer));
    s->accepted++;
    s->peer_open = 1;
    uv_read_start((uv_stream_t *)&s->peer, on_salloc, on_sread);
}

static void server_listen(uv_loop_t *loop, server_t *s)
{
    struct sockaddr_in addr;
    struct sockaddr_storage bound;
    int len = sizeof(bound);
    memset(s, 0, sizeof(*s));
    s->reader = redisReaderCreate();
    ASSERT_OK(uv_ip4_addr("127.0.0.1", 0, &addr));
    ASSERT_OK(uv_tcp_init(loop, &s->listener));
    s->listener.data = s;
    ASSERT_OK(uv_tcp_bind(&s->listener, (const struct sockaddr *)&addr, 0));
    ASSERT_OK(uv_listen((uv_stream_t *)&s->listener, 8, on_sconnection));
    ASSERT_OK(uv_tcp_getsockname(&s->listener, (struct sockaddr *)&bound, &len));
    s->port = ntohs(((struct sockaddr_in *)&bound)->sin_port);
}

static void server_stop(server_t *s)
{
    server_close_peer(s);
    if (!uv_is_closing((uv_handle_t *)&s->listener))
        uv_close((uv_handle_t *)&s->listener, NULL);
}

/* ---- the client */

typedef struct {
    uv_loop_t loop;
    server_t srv;
    hv_conn_stats_t stats;
    hv_conn_env_t env; /* no address guard: the server is the operator's */
    hv_redis_t *r;
    int connect_status;
    int connects;
    int errors;
    int last_error;
    int replies;
    int status[8];
    char text[8][32];
    int type[8];
    size_t len[8];      /* a string's length */
    size_t elements[8]; /* an array's */
    int depth[8];       /* arrays nested in the reply, down its first elements */
    int close_on_reply; /* close the connection from this reply's callback (1-based), if ok */
    char refusal[64];   /* a failed connect: hv_redis_refusal() */
    const char *failed_command;
    char limit[128];     /* hv_redis_limit() when the owner heard of the failure */
    const char *cmds[8]; /* scenario 4: these commands, pipelined ... */
    int ncmds;
    uint64_t cmd_timeout; /* ... each with this timeout */
} fixture_t;

static void on_reply(hv_redis_t *r, void *data, int status, const redisReply *reply)
{
    fixture_t *f = hv_redis_data(r);
    int i = f->replies++;
    ASSERT(i < 8);
    ASSERT_EQ((intptr_t)i, (intptr_t)data); /* in the order sent */
    f->status[i] = status;
    if (status == 0) {
        ASSERT(reply != NULL);
        f->type[i] = reply->type;
        if (reply->str != NULL) {
            size_t n = HV_MIN(reply->len, sizeof(f->text[i]) - 1);
            memcpy(f->text[i], reply->str, n);
            f->text[i][n] = '\0';
            f->len[i] = reply->len;
        }
        f->elements[i] = reply->elements;
        for (const redisReply *q = reply; q->type == REDIS_REPLY_ARRAY && q->elements > 0;
             q = q->element[0])
            f->depth[i]++;
    } else {
        ASSERT_NULL(reply);
        /* A broken bound is readable from the first callback that hears of it. */
        ASSERT_EQ(status == HV_ETOOBIG, hv_redis_limit(r) != NULL);
    }
    if (f->close_on_reply == f->replies && status == 0) {
        hv_redis_close(r);
        server_stop(&f->srv);
    }
}

static void send_cmd(fixture_t *f, int n, const char *a, const char *b, size_t blen,
                     uint64_t timeout)
{
    const char *argv[2] = {a, b};
    size_t argvlen[2] = {strlen(a), blen};
    ASSERT_OK(hv_redis_command(f->r, b != NULL ? 2 : 1, argv, argvlen, timeout, on_reply,
                               (void *)(intptr_t)n));
}

static void on_connect_script(hv_redis_t *r, int status);

static void on_error(hv_redis_t *r, int err)
{
    fixture_t *f = hv_redis_data(r);
    f->errors++;
    f->last_error = err;
    if (hv_redis_limit(r) != NULL)
        snprintf(f->limit, sizeof(f->limit), "%s", hv_redis_limit(r));
    hv_redis_close(r);
    server_stop(&f->srv);
}

static int scenario;

static void on_connect_script(hv_redis_t *r, int status)
{
    fixture_t *f = hv_redis_data(r);
    f->connects++;
    f->connect_status = status;
    if (status != 0) {
        f->failed_command = hv_redis_failed_command(r);
        if (hv_redis_refusal(r) != NULL)
            snprintf(f->refusal, sizeof(f->refusal), "%s", hv_redis_refusal(r));
        if (hv_redis_limit(r) != NULL)
            snprintf(f->limit, sizeof(f->limit), "%s", hv_redis_limit(r));
        hv_redis_close(r);
        server_stop(&f->srv);
        return;
    }
    static const char binary[] = {'a', '\0', 'b', '\r', '\n'};
    switch (scenario) {
    case 0: /* pipelined, binary-safe, in order */
        send_cmd(f, 0, "PING", NULL, 0, 1000);
        send_cmd(f, 1, "ECHO", binary, sizeof(binary), 1000);
        send_cmd(f, 2, "ECHO", "", 0, 1000);
        f->close_on_reply = 3;
        break;
    case 1: /* no answer in time: the connection breaks, and the later command fails too */
        send_cmd(f, 0, "HANG", NULL, 0, 50);
        send_cmd(f, 1, "PING", NULL, 0, 5000);
        break;
    case 2: /* the server goes away with a command pending */
        send_cmd(f, 0, "PING", NULL, 0, 1000);
        send_cmd(f, 1, "QUIT", NULL, 0, 1000);
        send_cmd(f, 2, "PING", NULL, 0, 1000);
        break;
    case 3: /* closing with commands pending cancels them, inside the call */
        send_cmd(f, 0, "HANG", NULL, 0, 1000);
        send_cmd(f, 1, "HANG", NULL, 0, 1000);
        hv_redis_close(r);
        ASSERT_EQ(2, f->replies);
        ASSERT_EQ(UV_ENOTCONN, hv_redis_command(r, 0, NULL, NULL, 10, on_reply, NULL));
        server_stop(&f->srv);
        break;
    case 4: /* the fixture's commands */
        for (int i = 0; i < f->ncmds; i++)
            send_cmd(f, i, f->cmds[i], NULL, 0, f->cmd_timeout);
        f->close_on_reply = f->ncmds;
        break;
    }
}

static const hv_redis_cbs_t cbs = {on_connect_script, on_error};

static void run_addr(fixture_t *f, int which, const hv_redis_addr_t *addr, uint64_t timeout_ms)
{
    scenario = which;
    ASSERT_OK(hv_redis_connect(&f->env, NULL, addr, timeout_ms, &cbs, f, &f->r));
    ASSERT_EQ(0, f->connects); /* reported from the loop */
    uv_run(&f->loop, UV_RUN_DEFAULT);
    ASSERT_EQ(0, hv_dns_stats(f->env.dns)->lookups);
    hv_dns_close(f->env.dns);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    redisReaderFree(f->srv.reader);
    ASSERT_LOOP_CLOSE(&f->loop);
}

static void run_db(fixture_t *f, int which, uint16_t port, unsigned db, uint64_t timeout_ms)
{
    hv_redis_addr_t addr = {.host = "127.0.0.1", .port = port, .db = db};
    run_addr(f, which, &addr, timeout_ms);
}

static void run(fixture_t *f, int which, uint16_t port)
{
    run_db(f, which, port, 0, 2000);
}

static void fixture_init(fixture_t *f)
{
    memset(f, 0, sizeof(*f));
    ASSERT_OK(uv_loop_init(&f->loop));
    f->env.loop = &f->loop;
    f->env.dns = hv_dns_new(&f->loop, 1000, 8);
    f->env.stats = &f->stats;
    server_listen(&f->loop, &f->srv);
}

TEST_IMPL(redis_pipelined_replies_come_in_order)
{
    fixture_t f;
    fixture_init(&f);
    run(&f, 0, f.srv.port);
    ASSERT_EQ(0, f.connect_status);
    ASSERT_EQ(3, f.replies);
    ASSERT_EQ(0, f.status[0] + f.status[1] + f.status[2]);
    ASSERT_STR_EQ("PONG", f.text[0]);
    ASSERT_EQ(0, memcmp(f.text[1], "a\0b\r\n", 5));
    ASSERT_STR_EQ("", f.text[2]);
    ASSERT_EQ(0, f.errors);
}

/* Database 0 is where a connection starts: no SELECT. */
TEST_IMPL(redis_database_0_needs_no_select)
{
    fixture_t f;
    fixture_init(&f);
    run_db(&f, 0, f.srv.port, 0, 2000);
    ASSERT_EQ(0, f.connect_status);
    ASSERT_EQ(0, f.srv.selected_first);
    ASSERT_EQ(3, f.srv.commands);
    ASSERT_EQ(3, f.replies);
}

/* A database other than 0 is selected before the owner hears of the connection, so that its
 * first command already goes there. */
TEST_IMPL(redis_select_comes_before_the_owner)
{
    fixture_t f;
    fixture_init(&f);
    run_db(&f, 0, f.srv.port, 3, 2000);
    ASSERT_EQ(1, f.connects);
    ASSERT_EQ(0, f.connect_status);
    ASSERT_EQ(1, f.srv.selected_first);
    ASSERT_EQ(3, f.srv.db);
    ASSERT_EQ(4, f.srv.commands);
    ASSERT_EQ(3, f.replies);
    ASSERT_STR_EQ("PONG", f.text[0]);
    ASSERT_EQ(0, f.errors);
}

/* A refused SELECT is a failed connect, with the server's words. */
TEST_IMPL(redis_select_refused_is_a_failed_connect)
{
    fixture_t f;
    fixture_init(&f);
    run_db(&f, 0, f.srv.port, 20, 2000);
    ASSERT_EQ(1, f.connects);
    ASSERT_EQ(HV_EREFUSED, f.connect_status);
    ASSERT_STR_EQ("SELECT", f.failed_command);
    ASSERT_STR_EQ("ERR DB index is out of range", f.refusal);
    ASSERT_EQ(1, f.srv.commands);
    ASSERT_EQ(0, f.replies);
    ASSERT_EQ(0, f.errors);
}

/* A SELECT without a reply fails the connect within the connect timeout. */
TEST_IMPL(redis_select_without_reply_times_out)
{
    fixture_t f;
    fixture_init(&f);
    f.srv.hang_select = 1;
    uint64_t t0 = uv_now(&f.loop);
    run_db(&f, 0, f.srv.port, 1, 100);
    ASSERT_EQ(1, f.connects);
    ASSERT_EQ(UV_ETIMEDOUT, f.connect_status);
    ASSERT_STR_EQ("SELECT", f.failed_command);
    ASSERT_EQ(0, f.refusal[0]);
    ASSERT_LT(uv_now(&f.loop) - t0, 2000);
    ASSERT_EQ(0, f.errors);
}

/* ---- logging in */

static void run_login(fixture_t *f, const char *user, const char *password, unsigned db,
                      uint64_t timeout_ms)
{
    hv_redis_addr_t addr = {.host = "127.0.0.1", .port = f->srv.port, .db = db};
    snprintf(addr.user, sizeof(addr.user), "%s", user);
    snprintf(addr.password, sizeof(addr.password), "%s", password);
    run_addr(f, 0, &addr, timeout_ms);
}

/* With a user and a password, AUTH USER PASSWORD goes first, then SELECT, and only then does
 * the owner hear of the connection: its first command runs logged in, on its database. */
TEST_IMPL(redis_auth_then_select_come_before_the_owner)
{
    fixture_t f;
    fixture_init(&f);
    f.srv.user = "alice";
    f.srv.password = "s3cret";
    run_login(&f, "alice", "s3cret", 3, 2000);
    ASSERT_EQ(1, f.connects);
    ASSERT_EQ(0, f.connect_status);
    ASSERT_STR_EQ("AUTH", f.srv.names[0]);
    ASSERT_EQ(2, f.srv.auth_argc);
    ASSERT_STR_EQ("alice", f.srv.auth_args[0]);
    ASSERT_STR_EQ("s3cret", f.srv.auth_args[1]);
    ASSERT_STR_EQ("SELECT", f.srv.names[1]);
    ASSERT_EQ(3, f.srv.db);
    ASSERT_STR_EQ("PING", f.srv.names[2]);
    ASSERT_EQ(5, f.srv.commands);
    ASSERT_EQ(3, f.replies);
    ASSERT_EQ(0, f.status[0] + f.status[1] + f.status[2]);
    ASSERT_STR_EQ("PONG", f.text[0]);
    ASSERT_EQ(0, f.errors);
}

/* A password alone logs in as the default user: AUTH PASSWORD, one argument; database 0
 * needs no SELECT. */
TEST_IMPL(redis_auth_with_a_password_alone_is_the_default_user)
{
    fixture_t f;
    fixture_init(&f);
    f.srv.password = "pw";
    run_login(&f, "", "pw", 0, 2000);
    ASSERT_EQ(0, f.connect_status);
    ASSERT_STR_EQ("AUTH", f.srv.names[0]);
    ASSERT_EQ(1, f.srv.auth_argc);
    ASSERT_STR_EQ("pw", f.srv.auth_args[0]);
    ASSERT_STR_EQ("PING", f.srv.names[1]);
    ASSERT_EQ(4, f.srv.commands);
    ASSERT_EQ(3, f.replies);
    ASSERT_STR_EQ("PONG", f.text[0]);
}

/* Without a password nothing is sent before the owner's commands, and a server that wants
 * one answers them with NOAUTH (the owner's to report). */
TEST_IMPL(redis_no_password_sends_no_auth)
{
    fixture_t f;
    fixture_init(&f);
    f.srv.password = "pw";
    run_login(&f, "", "", 0, 2000);
    ASSERT_EQ(0, f.connect_status);
    ASSERT_STR_EQ("PING", f.srv.names[0]);
    ASSERT_EQ(0, f.srv.auth_argc);
    ASSERT_EQ(3, f.replies);
    ASSERT_EQ(REDIS_REPLY_ERROR, f.type[0]);
    ASSERT_STR_EQ("NOAUTH Authentication required.", f.text[0]);
}

/* A refused AUTH is a failed connect naming AUTH, with the server's words; SELECT is not
 * sent after it, and the owner sends nothing. */
TEST_IMPL(redis_auth_refused_is_a_failed_connect)
{
    fixture_t f;
    fixture_init(&f);
    f.srv.user = "alice";
    f.srv.password = "s3cret";
    run_login(&f, "alice", "wrong", 3, 2000);
    ASSERT_EQ(1, f.connects);
    ASSERT_EQ(HV_EREFUSED, f.connect_status);
    ASSERT_STR_EQ("AUTH", f.failed_command);
    ASSERT_STR_EQ("WRONGPASS invalid username-password pair or user is disabled.", f.refusal);
    ASSERT_EQ(1, f.srv.commands);
    ASSERT_EQ(0, f.replies);
    ASSERT_EQ(0, f.errors);
}

/* An AUTH without a reply fails the connect within the connect timeout, naming AUTH. */
TEST_IMPL(redis_auth_without_reply_times_out)
{
    fixture_t f;
    fixture_init(&f);
    f.srv.password = "pw";
    f.srv.hang_auth = 1;
    uint64_t t0 = uv_now(&f.loop);
    run_login(&f, "", "pw", 1, 100);
    ASSERT_EQ(1, f.connects);
    ASSERT_EQ(UV_ETIMEDOUT, f.connect_status);
    ASSERT_STR_EQ("AUTH", f.failed_command);
    ASSERT_EQ(0, f.refusal[0]);
    ASSERT_EQ(1, f.srv.commands);
    ASSERT_LT(uv_now(&f.loop) - t0, 2000);
}

TEST_IMPL(redis_a_late_reply_breaks_the_connection)
{
    fixture_t f;
    fixture_init(&f);
    uint64_t t0 = uv_now(&f.loop);
    run(&f, 1, f.srv.port);
    ASSERT_EQ(2, f.replies);
    ASSERT_EQ(UV_ETIMEDOUT, f.status[0]);
    ASSERT_EQ(UV_ETIMEDOUT, f.status[1]);
    ASSERT_EQ(1, f.errors);
    ASSERT_EQ(UV_ETIMEDOUT, f.last_error);
    ASSERT_LT(uv_now(&f.loop) - t0, 2000);
}

TEST_IMPL(redis_the_server_going_away_fails_what_is_pending)
{
    fixture_t f;
    fixture_init(&f);
    run(&f, 2, f.srv.port);
    ASSERT_EQ(3, f.replies);
    ASSERT_EQ(0, f.status[0]);
    ASSERT_STR_EQ("PONG", f.text[0]);
    ASSERT(f.status[1] != 0 && f.status[2] != 0);
    ASSERT_EQ(1, f.errors);
}

TEST_IMPL(redis_close_cancels_pending_commands)
{
    fixture_t f;
    fixture_init(&f);
    run(&f, 3, f.srv.port);
    ASSERT_EQ(2, f.replies);
    ASSERT_EQ(UV_ECANCELED, f.status[0]);
    ASSERT_EQ(UV_ECANCELED, f.status[1]);
    ASSERT_EQ(0, f.errors);
}

TEST_IMPL(redis_connect_refused)
{
    fixture_t f;
    fixture_init(&f);
    uint16_t port = f.srv.port;
    server_stop(&f.srv); /* nothing listens there any more */
    uv_run(&f.loop, UV_RUN_DEFAULT);
    run(&f, 0, port);
    ASSERT_EQ(1, f.connects);
    ASSERT_EQ(UV_ECONNREFUSED, f.connect_status);
    ASSERT_EQ(0, f.replies);
}

/* A connection that was never made names no failed command and no refusal. */
TEST_IMPL(redis_connect_refused_is_no_select_failure)
{
    fixture_t f;
    fixture_init(&f);
    uint16_t port = f.srv.port;
    server_stop(&f.srv);
    uv_run(&f.loop, UV_RUN_DEFAULT);
    run_db(&f, 0, port, 5, 2000);
    ASSERT_EQ(UV_ECONNREFUSED, f.connect_status);
    ASSERT_NULL(f.failed_command);
    ASSERT_EQ(0, f.refusal[0]);
}

/* ---- the bounds on a reply (redis.h) */

#define MIB (1024 * 1024)

/* `n` bytes of `c`, framed as "$n\r\n...\r\n" when `bulk`; the caller frees it. */
static char *filled(char c, size_t n, int bulk, size_t *len)
{
    char *p = hv_xmalloc(n + 32);
    size_t at = 0;
    if (bulk)
        at = (size_t)snprintf(p, 32, "$%zu\r\n", n);
    memset(p + at, c, n);
    at += n;
    if (bulk) {
        memcpy(p + at, "\r\n", 2);
        at += 2;
    }
    *len = at;
    return p;
}

/* Connect and send `cmds` (one of them PLAN), each due within `timeout_ms`. */
static void run_plan(fixture_t *f, const char *const *cmds, int n, uint64_t timeout_ms)
{
    for (int i = 0; i < n; i++)
        f->cmds[i] = cmds[i];
    f->ncmds = n;
    f->cmd_timeout = timeout_ms;
    run(f, 4, f->srv.port);
    ASSERT_EQ(0, f->connect_status);
}

/* A connection broken by a bound: every command pending failed with HV_ETOOBIG, the owner
 * heard it once, and the bound is named. */
static void check_refused(const fixture_t *f, int first_failed, const char *limit)
{
    ASSERT_EQ(f->ncmds, f->replies);
    for (int i = first_failed; i < f->ncmds; i++)
        ASSERT_EQ(HV_ETOOBIG, f->status[i]);
    ASSERT_EQ(1, f->errors);
    ASSERT_EQ(HV_ETOOBIG, f->last_error);
    ASSERT_STR_EQ(limit, f->limit);
}

/* "$99999999999" is refused when its digits arrive: not at the command's timeout, and not
 * after the gigabytes it announces. What came before it is answered. */
TEST_IMPL(redis_a_huge_bulk_header_is_refused_when_it_arrives)
{
    fixture_t f;
    fixture_init(&f);
    size_t flen;
    char *filler = filled('x', 64 * 1024, 0, &flen);
    plan_str(&f.srv, "$99999999999\r\n", 1);
    plan_add(&f.srv, filler, flen, 1024); /* 64 MiB, never the announced length */
    static const char *const cmds[] = {"PING", "PLAN", "PING"};
    uint64_t t0 = uv_now(&f.loop);
    run_plan(&f, cmds, 3, 5000);
    ASSERT_EQ(0, f.status[0]);
    ASSERT_STR_EQ("PONG", f.text[0]);
    check_refused(&f, 1, "a bulk string longer than 1048576 bytes");
    ASSERT_LT(uv_now(&f.loop) - t0, 2000);
    ASSERT_LT(f.srv.sent, 16 * MIB);
    free(filler);
}

/* "*999999999" likewise, before hiredis allocates the array it announces. */
TEST_IMPL(redis_a_huge_array_header_is_refused_when_it_arrives)
{
    fixture_t f;
    fixture_init(&f);
    plan_str(&f.srv, "*999999999\r\n", 1);
    plan_str(&f.srv, ":1\r\n", 1024 * 1024);
    static const char *const cmds[] = {"PLAN"};
    uint64_t t0 = uv_now(&f.loop);
    run_plan(&f, cmds, 1, 5000);
    check_refused(&f, 0, "arrays of more than 1048576 elements in one reply");
    ASSERT_LT(uv_now(&f.loop) - t0, 2000);
}

/* Elements count over the whole reply: two arrays within the bound each, over it together. */
TEST_IMPL(redis_elements_count_over_the_whole_reply)
{
    fixture_t f;
    fixture_init(&f);
    plan_str(&f.srv, "*2\r\n*1048574\r\n", 1);
    plan_str(&f.srv, ":1\r\n", 1048574);
    plan_str(&f.srv, "*1\r\n:1\r\n", 1); /* one element more than the bound */
    static const char *const cmds[] = {"PLAN"};
    run_plan(&f, cmds, 1, 10000);
    check_refused(&f, 0, "arrays of more than 1048576 elements in one reply");
}

TEST_IMPL(redis_arrays_nested_too_deep_are_refused)
{
    fixture_t f;
    fixture_init(&f);
    plan_str(&f.srv, "*1\r\n", HV_REDIS_MAX_DEPTH + 1);
    plan_str(&f.srv, ":1\r\n", 1);
    static const char *const cmds[] = {"PLAN"};
    run_plan(&f, cmds, 1, 5000);
    check_refused(&f, 0, "arrays nested deeper than 8");
}

TEST_IMPL(redis_an_endless_status_line_is_refused)
{
    fixture_t f;
    fixture_init(&f);
    size_t flen;
    char *filler = filled('s', 64 * 1024, 0, &flen);
    plan_str(&f.srv, "+", 1);
    plan_add(&f.srv, filler, flen, 1024); /* 64 MiB, no CRLF */
    static const char *const cmds[] = {"PLAN"};
    run_plan(&f, cmds, 1, 10000);
    check_refused(&f, 0, "a status, error or integer line longer than 1048576 bytes");
    ASSERT_LT(f.srv.sent, 16 * MIB);
    free(filler);
}

/* A reply that keeps coming, each element within its bounds, never complete: refused by its
 * bytes, long before the timeout, after about HV_REDIS_MAX_REPLY_BYTES of it. */
TEST_IMPL(redis_a_reply_that_never_ends_is_bounded_by_bytes)
{
    fixture_t f;
    fixture_init(&f);
    size_t ulen;
    char *unit = filled('t', 64 * 1024, 1, &ulen);
    plan_str(&f.srv, "*1048576\r\n", 1);
    plan_add(&f.srv, unit, ulen, 2 * (HV_REDIS_MAX_REPLY_BYTES / (64 * 1024))); /* 256 MiB */
    static const char *const cmds[] = {"PLAN", "PING"};
    uint64_t t0 = uv_now(&f.loop);
    run_plan(&f, cmds, 2, 25000);
    check_refused(&f, 0, "a reply longer than 134217728 bytes");
    ASSERT_LT(uv_now(&f.loop) - t0, 20000);
    ASSERT_GE(f.srv.sent, HV_REDIS_MAX_REPLY_BYTES - 64 * 1024);
    ASSERT_LT(f.srv.sent, HV_REDIS_MAX_REPLY_BYTES + 16 * MIB);
    free(unit);
}

/* The bounds are refused during SELECT too: a failed connect, the bound named. */
TEST_IMPL(redis_a_bound_broken_during_select_fails_the_connect)
{
    fixture_t f;
    fixture_init(&f);
    f.srv.plan_select = 1;
    plan_str(&f.srv, "$99999999999\r\n", 1);
    run_db(&f, 0, f.srv.port, 2, 2000);
    ASSERT_EQ(1, f.connects);
    ASSERT_EQ(HV_ETOOBIG, f.connect_status);
    ASSERT_STR_EQ("SELECT", f.failed_command);
    ASSERT_STR_EQ("a bulk string longer than 1048576 bytes", f.limit);
    ASSERT_EQ(0, f.errors);
}

/* Exactly at each bound is still a reply: a bulk string and a status line of
 * HV_REDIS_MAX_BULK bytes, HV_REDIS_MAX_ELEMENTS elements in one array and in two, arrays
 * HV_REDIS_MAX_DEPTH deep. */
TEST_IMPL(redis_replies_at_each_bound_are_accepted)
{
    fixture_t f;
    fixture_init(&f);
    size_t blen;
    char *bulk = filled('b', HV_REDIS_MAX_BULK, 1, &blen);
    char *line = hv_xmalloc(HV_REDIS_MAX_BULK + 3);
    line[0] = '+';
    memset(line + 1, 'l', HV_REDIS_MAX_BULK);
    memcpy(line + 1 + HV_REDIS_MAX_BULK, "\r\n", 2);
    plan_add(&f.srv, bulk, blen, 1);
    plan_add(&f.srv, line, HV_REDIS_MAX_BULK + 3, 1);
    plan_str(&f.srv, "*1048576\r\n", 1);
    plan_str(&f.srv, ":1\r\n", HV_REDIS_MAX_ELEMENTS);
    plan_str(&f.srv, "*2\r\n*1048574\r\n", 1);
    plan_str(&f.srv, ":1\r\n", HV_REDIS_MAX_ELEMENTS - 2);
    plan_str(&f.srv, "*0\r\n", 1);
    plan_str(&f.srv, "*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:7\r\n", 1);
    static const char *const cmds[] = {"PLAN", "P2", "P3", "P4", "P5"};
    run_plan(&f, cmds, 5, 10000);
    ASSERT_EQ(5, f.replies);
    ASSERT_EQ(0, f.status[0] + f.status[1] + f.status[2] + f.status[3] + f.status[4]);
    ASSERT_EQ(REDIS_REPLY_STRING, f.type[0]);
    ASSERT_EQ(HV_REDIS_MAX_BULK, f.len[0]);
    ASSERT_EQ(REDIS_REPLY_STATUS, f.type[1]);
    ASSERT_EQ(HV_REDIS_MAX_BULK, f.len[1]);
    ASSERT_EQ(REDIS_REPLY_ARRAY, f.type[2]);
    ASSERT_EQ(HV_REDIS_MAX_ELEMENTS, f.elements[2]);
    ASSERT_EQ(REDIS_REPLY_ARRAY, f.type[3]);
    ASSERT_EQ(2, f.elements[3]);
    ASSERT_EQ(REDIS_REPLY_ARRAY, f.type[4]);
    ASSERT_EQ(HV_REDIS_MAX_DEPTH, f.depth[4]);
    ASSERT_EQ(0, f.errors);
    free(line);
    free(bulk);
}

/* A reply of exactly HV_REDIS_MAX_REPLY_BYTES is a reply, and the count starts again with
 * the next one. */
TEST_IMPL(redis_a_reply_of_the_most_bytes_is_accepted)
{
    fixture_t f;
    fixture_init(&f);
    size_t ulen, llen;
    char *unit = filled('m', HV_REDIS_MAX_BULK, 1, &ulen);
    char head[32];
    size_t n = HV_REDIS_MAX_REPLY_BYTES / ulen + 1; /* elements: full ones and a last */
    size_t hlen = (size_t)snprintf(head, sizeof(head), "*%zu\r\n", n);
    size_t rest = HV_REDIS_MAX_REPLY_BYTES - hlen - (n - 1) * ulen; /* the last, framed */
    size_t last = 0;
    for (size_t digits = 1; digits < 10; digits++) /* "$" digits CRLF, data, CRLF */
        if (rest > digits + 5 && snprintf(NULL, 0, "%zu", rest - digits - 5) == (int)digits)
            last = rest - digits - 5;
    ASSERT_GT(last, 0);
    char *tail = filled('z', last, 1, &llen);
    ASSERT_EQ(rest, llen);
    plan_add(&f.srv, head, hlen, 1);
    plan_add(&f.srv, unit, ulen, n - 1);
    plan_add(&f.srv, tail, llen, 1);
    plan_str(&f.srv, "*1\r\n+PONG\r\n", 1);
    static const char *const cmds[] = {"PLAN", "PING"};
    run_plan(&f, cmds, 2, 20000);
    ASSERT_EQ(HV_REDIS_MAX_REPLY_BYTES, f.srv.sent - 11);
    ASSERT_EQ(2, f.replies);
    ASSERT_EQ(0, f.status[0] + f.status[1]);
    ASSERT_EQ(n, f.elements[0]);
    ASSERT_EQ(1, f.elements[1]);
    ASSERT_EQ(0, f.errors);
    free(tail);
    free(unit);
}

/* ---- redis:// URLs */

TEST_IMPL(redis_url_parse)
{
    static const struct {
        const char *url, *host;
        uint16_t port;
        unsigned db;
    } good[] = {
        {"redis://127.0.0.1", "127.0.0.1", 6379, 0},
        {"redis://127.0.0.1:7000", "127.0.0.1", 7000, 0},
        {"redis://queue.internal:6380/3", "queue.internal", 6380, 3},
        {"redis://localhost/2", "localhost", 6379, 2},
        {"redis://[::1]:6390/1", "::1", 6390, 1},
        {"redis://[::1]", "::1", 6379, 0},
        {"redis://h/", "h", 6379, 0},
    };
    for (size_t i = 0; i < HV_ARRAY_SIZE(good); i++) {
        hv_redis_addr_t a;
        char err[256];
        if (hv_redis_url_parse(good[i].url, &a, err, sizeof(err)) != 0)
            hv_test_fail(__FILE__, __LINE__, "%s: %s", good[i].url, err);
        ASSERT_STR_EQ(good[i].host, a.host);
        ASSERT_EQ(good[i].port, a.port);
        ASSERT_EQ(good[i].db, a.db);
    }
    static const char *const bad[] = {
        "", "127.0.0.1:6379", "http://127.0.0.1", "redis://", "redis://:6379", "redis://h:0",
        "redis://h:65536", "redis://h:x", "redis://h/x", "redis://h/16000", "redis://[::1",
        "redis://h:1/2/3", "redis://h?db=1", "redisss://h", "rediss:/h",
    };
    for (size_t i = 0; i < HV_ARRAY_SIZE(bad); i++) {
        hv_redis_addr_t a;
        char err[256] = "";
        if (hv_redis_url_parse(bad[i], &a, err, sizeof(err)) == 0)
            hv_test_fail(__FILE__, __LINE__, "'%s' parsed", bad[i]);
        ASSERT(strstr(err, bad[i]) != NULL || bad[i][0] == '\0');
    }
}

/* rediss:// is the same URL over TLS, on the same default port. */
TEST_IMPL(redis_url_rediss_is_tls)
{
    hv_redis_addr_t a;
    char err[256];
    ASSERT_OK(hv_redis_url_parse("rediss://queue.internal", &a, err, sizeof(err)));
    ASSERT_EQ(1, a.tls);
    ASSERT_STR_EQ("queue.internal", a.host);
    ASSERT_EQ(6379, a.port);
    ASSERT_OK(hv_redis_url_parse("rediss://alice:pw@[::1]:6380/4", &a, err, sizeof(err)));
    ASSERT_EQ(1, a.tls);
    ASSERT_STR_EQ("alice", a.user);
    ASSERT_STR_EQ("pw", a.password);
    ASSERT_STR_EQ("::1", a.host);
    ASSERT_EQ(6380, a.port);
    ASSERT_EQ(4, a.db);
    ASSERT_OK(hv_redis_url_parse("redis://h", &a, err, sizeof(err)));
    ASSERT_EQ(0, a.tls);
    ASSERT_EQ(-1, hv_redis_url_parse("http://h", &a, err, sizeof(err)));
    ASSERT(strstr(err, "(nor rediss:// for TLS)") != NULL);
}

/* A rediss address needs a TLS context: refused at once without one, nothing connected. */
TEST_IMPL(redis_rediss_without_a_tls_context_is_refused)
{
    fixture_t f;
    fixture_init(&f);
    hv_redis_addr_t addr = {.host = "127.0.0.1", .port = f.srv.port, .tls = 1};
    ASSERT_EQ(UV_EINVAL, hv_redis_connect(&f.env, NULL, &addr, 1000, &cbs, &f, &f.r));
    ASSERT_NULL(f.r);
    server_stop(&f.srv);
    hv_dns_close(f.env.dns);
    uv_run(&f.loop, UV_RUN_DEFAULT);
    redisReaderFree(f.srv.reader);
    ASSERT_EQ(0, f.srv.accepted);
    ASSERT_LOOP_CLOSE(&f.loop);
}

/* The user information: USER:PASSWORD or :PASSWORD, percent-decoded, up to the last '@'. */
TEST_IMPL(redis_url_user_and_password)
{
    static const struct {
        const char *url, *user, *password, *host;
        uint16_t port;
        unsigned db;
    } good[] = {
        {"redis://alice:s3cret@h:7000/2", "alice", "s3cret", "h", 7000, 2},
        {"redis://:pw@127.0.0.1", "", "pw", "127.0.0.1", 6379, 0},
        {"redis://al%69ce:p%40ss%2Fw%3A%25@[::1]:1/1", "alice", "p@ss/w:%", "::1", 1, 1},
        {"redis://u:p@ss@h", "u", "p@ss", "h", 6379, 0},
        {"redis://u:a:b/c@h/3", "u", "a:b/c", "h", 6379, 3},
        {"redis://u:@h", "u", "", "h", 6379, 0},
        {"redis://:@h", "", "", "h", 6379, 0},
        {"redis://h", "", "", "h", 6379, 0},
    };
    for (size_t i = 0; i < HV_ARRAY_SIZE(good); i++) {
        hv_redis_addr_t a;
        char err[256];
        if (hv_redis_url_parse(good[i].url, &a, err, sizeof(err)) != 0)
            hv_test_fail(__FILE__, __LINE__, "%s: %s", good[i].url, err);
        ASSERT_STR_EQ(good[i].user, a.user);
        ASSERT_STR_EQ(good[i].password, a.password);
        ASSERT_STR_EQ(good[i].host, a.host);
        ASSERT_EQ(good[i].port, a.port);
        ASSERT_EQ(good[i].db, a.db);
    }
    static const struct {
        const char *url, *says;
    } bad[] = {
        {"redis://secret@h", "needs a ':'"},
        {"redis://@h", "needs a ':'"},
        {"redis://u:%zz@h", "bad %-escape"},
        {"redis://u:%4@h", "bad %-escape"},
        {"redis://u:a%00b@h", "NUL"},
        {"redis://u:p@h?x=1", "query"},
        {"redis://u:p@", "is not a redis://"},
    };
    for (size_t i = 0; i < HV_ARRAY_SIZE(bad); i++) {
        hv_redis_addr_t a;
        char err[256] = "";
        if (hv_redis_url_parse(bad[i].url, &a, err, sizeof(err)) == 0)
            hv_test_fail(__FILE__, __LINE__, "'%s' parsed", bad[i].url);
        if (strstr(err, bad[i].says) == NULL)
            hv_test_fail(__FILE__, __LINE__, "%s: %s", bad[i].url, err);
    }
    /* The longest user and password fit; one byte more does not. */
    char url[HV_REDIS_USER_MAX + HV_REDIS_PASSWORD_MAX + 32], err[256];
    hv_redis_addr_t a;
    snprintf(url, sizeof(url), "redis://%0*d:%0*d@h", HV_REDIS_USER_MAX - 1, 0,
             HV_REDIS_PASSWORD_MAX - 1, 0);
    ASSERT_OK(hv_redis_url_parse(url, &a, err, sizeof(err)));
    ASSERT_EQ(HV_REDIS_USER_MAX - 1, strlen(a.user));
    ASSERT_EQ(HV_REDIS_PASSWORD_MAX - 1, strlen(a.password));
    snprintf(url, sizeof(url), "redis://%0*d:x@h", HV_REDIS_USER_MAX, 0);
    ASSERT_EQ(-1, hv_redis_url_parse(url, &a, err, sizeof(err)));
    snprintf(url, sizeof(url), "redis://:%0*d@h", HV_REDIS_PASSWORD_MAX, 0);
    ASSERT_EQ(-1, hv_redis_url_parse(url, &a, err, sizeof(err)));
}

/* ---- the password file */

/* One line, its newline (and a CR before it) not part of the password. */
TEST_IMPL(redis_password_file_is_one_line)
{
    static const struct {
        const char *data, *password;
    } good[] = {
        {"s3cret\n", "s3cret"}, {"s3cret\r\n", "s3cret"}, {"s3cret", "s3cret"},
        {" spaced out \n", " spaced out "}, {"a\rb\n", "a\rb"},
    };
    for (size_t i = 0; i < HV_ARRAY_SIZE(good); i++) {
        char out[HV_REDIS_PASSWORD_MAX], err[512];
        const char *path = hv_test_write_mode_file("pw", good[i].data, strlen(good[i].data), 0600);
        if (hv_redis_password_read(path, out, sizeof(out), err, sizeof(err)) != 0)
            hv_test_fail(__FILE__, __LINE__, "'%s': %s", good[i].data, err);
        ASSERT_STR_EQ(good[i].password, out);
    }
    /* 0400 does as well as 0600; the longest password fits, with its CR LF. */
    char big[HV_REDIS_PASSWORD_MAX + 2], out[HV_REDIS_PASSWORD_MAX], err[512];
    memset(big, 'x', sizeof(big));
    memcpy(big + HV_REDIS_PASSWORD_MAX - 1, "\r\n", 2);
    const char *path = hv_test_write_mode_file("big", big, HV_REDIS_PASSWORD_MAX + 1, 0400);
    ASSERT_OK(hv_redis_password_read(path, out, sizeof(out), err, sizeof(err)));
    ASSERT_EQ(HV_REDIS_PASSWORD_MAX - 1, strlen(out));
}

/* What is refused, each naming the file. */
TEST_IMPL(redis_password_file_refusals)
{
    char big[HV_REDIS_PASSWORD_MAX + 8];
    memset(big, 'x', sizeof(big));
    static const struct {
        const char *data;
        size_t len;
        mode_t mode;
        const char *says;
    } bad[] = {
        {"pw\n", 3, 0644, "is readable by its group and others (mode 0644): let only its owner "
                          "read it (chmod 600)"},
        {"pw\n", 3, 0640, "is readable by its group (mode 0640)"},
        {"pw\n", 3, 0604, "is readable by others (mode 0604)"},
        {"", 0, 0600, "is empty"},
        {"\n", 1, 0600, "is empty"},
        {"\r\n", 2, 0600, "is empty"},
        {"pw\nmore\n", 8, 0600, "has more than one line"},
        {"pw\n\n", 4, 0600, "has more than one line"},
        {"p\0w\n", 4, 0600, "has a NUL byte"},
        {NULL, HV_REDIS_PASSWORD_MAX, 0600, "holds more than 1023 bytes"},
        {NULL, HV_REDIS_PASSWORD_MAX + 8, 0600, "holds more than 1023 bytes"},
    };
    for (size_t i = 0; i < HV_ARRAY_SIZE(bad); i++) {
        char out[HV_REDIS_PASSWORD_MAX] = "", err[512] = "", want[600];
        const char *path = hv_test_write_mode_file("pw", bad[i].data != NULL ? bad[i].data : big, bad[i].len,
                                   bad[i].mode);
        ASSERT_EQ(-1, hv_redis_password_read(path, out, sizeof(out), err, sizeof(err)));
        snprintf(want, sizeof(want), "the password file %s %s", path, bad[i].says);
        if (strncmp(err, want, strlen(want)) != 0)
            hv_test_fail(__FILE__, __LINE__, "case %zu: '%s' does not start '%s'", i, err, want);
        ASSERT_STR_EQ("", out);
    }
    char out[64], err[512], want[600], path[512];
    snprintf(path, sizeof(path), "%s/missing", hv_test_tmpdir());
    ASSERT_EQ(-1, hv_redis_password_read(path, out, sizeof(out), err, sizeof(err)));
    snprintf(want, sizeof(want), "cannot read the password file %s: no such file or directory",
             path);
    ASSERT_STR_EQ(want, err);
    ASSERT_EQ(-1, hv_redis_password_read(hv_test_tmpdir(), out, sizeof(out), err, sizeof(err)));
    snprintf(want, sizeof(want), "the password file %s is not a regular file", hv_test_tmpdir());
    ASSERT_STR_EQ(want, err);
}

/* The file's password wins over the URL's, which may still name the user; a user left
 * without a password is refused, as is a file that will not do. */
TEST_IMPL(redis_url_load_takes_the_password_file)
{
    hv_redis_addr_t a;
    char err[512];
    const char *path = hv_test_write_mode_file("pw", "from-file\n", 10, 0600);
    ASSERT_OK(hv_redis_url_load("redis://alice:from-url@h/2", path, &a, err, sizeof(err)));
    ASSERT_STR_EQ("alice", a.user);
    ASSERT_STR_EQ("from-file", a.password);
    ASSERT_EQ(2, a.db);
    ASSERT_OK(hv_redis_url_load("redis://alice:@h", path, &a, err, sizeof(err)));
    ASSERT_STR_EQ("alice", a.user);
    ASSERT_STR_EQ("from-file", a.password);
    ASSERT_OK(hv_redis_url_load("redis://h", path, &a, err, sizeof(err)));
    ASSERT_STR_EQ("", a.user);
    ASSERT_STR_EQ("from-file", a.password);
    ASSERT_OK(hv_redis_url_load("redis://:pw@h", NULL, &a, err, sizeof(err)));
    ASSERT_STR_EQ("pw", a.password);
    ASSERT_OK(hv_redis_url_load("redis://h", NULL, &a, err, sizeof(err)));
    ASSERT_STR_EQ("", a.password);

    ASSERT_EQ(HV_REDIS_LOAD_URL, hv_redis_url_load("redis://alice:@h", NULL, &a, err,
                                                   sizeof(err)));
    ASSERT(strstr(err, "user alice has no password") != NULL);
    ASSERT_EQ(HV_REDIS_LOAD_URL, hv_redis_url_load("http://h", path, &a, err, sizeof(err)));
    path = hv_test_write_mode_file("pw", "from-file\n", 10, 0644);
    ASSERT_EQ(HV_REDIS_LOAD_PASSWORD_FILE,
              hv_redis_url_load("redis://:from-url@h", path, &a, err, sizeof(err)));
    ASSERT(strstr(err, "mode 0644") != NULL);
}

/* ---- showing a URL */

/* The password is shown as ***, the rest as written; a user information without ':' (a
 * password to redis-cli) is hidden whole; text that is no URL is masked the same way. */
TEST_IMPL(redis_url_mask_hides_the_password)
{
    static const struct {
        const char *url, *shown;
    } cases[] = {
        {"redis://alice:s3cret@host:6379/2", "redis://alice:***@host:6379/2"},
        {"redis://:s3cret@host", "redis://:***@host"},
        {"rediss://al%69ce:p%40ss@[::1]:6380", "rediss://al%69ce:***@[::1]:6380"},
        {"redis://u:p@ss@h/1", "redis://u:***@h/1"},
        {"redis://u:a:b/c@h", "redis://u:***@h"},
        {"redis://s3cret@host", "redis://***@host"},
        {"redis://alice:@host", "redis://alice:@host"},
        {"redis://host:6379/0", "redis://host:6379/0"},
        {"redis://host", "redis://host"},
        {"http://u:s3cret@x:99999/?q", "http://u:***@x:99999/?q"},
        {"u:s3cret@host", "u:***@host"},
        {"s3cret@host", "***@host"},
        {"", ""},
    };
    for (size_t i = 0; i < HV_ARRAY_SIZE(cases); i++) {
        char out[HV_REDIS_URL_SHOWN_MAX];
        ASSERT(hv_redis_url_mask(cases[i].url, out, sizeof(out)) == out);
        ASSERT_STR_EQ(cases[i].shown, out);
    }
    /* Cut short, it keeps what fits of the shown text: never the password. */
    char small[12];
    hv_redis_url_mask("redis://alice:s3cret@host", small, sizeof(small));
    ASSERT_STR_EQ("redis://ali", small);
    char tiny[18];
    hv_redis_url_mask("redis://alice:s3cret@host", tiny, sizeof(tiny));
    ASSERT_STR_EQ("redis://alice:***", tiny);
}

/* Every message about a URL shows it masked: the password is nowhere in it. */
TEST_IMPL(redis_url_errors_show_the_url_masked)
{
    static const char *const bad[] = {
        "redis://alice:s3cret@host:0",      "redis://alice:s3cret@host/99999",
        "redis://alice:s3cret@host?x=1",    "rediss://alice:s3cret%zz@host",
        "redis://s3cret@host",              "http://alice:s3cret@host",
    };
    for (size_t i = 0; i < HV_ARRAY_SIZE(bad); i++) {
        hv_redis_addr_t a;
        char err[512] = "";
        ASSERT_EQ(-1, hv_redis_url_parse(bad[i], &a, err, sizeof(err)));
        if (strstr(err, "s3cret") != NULL || strstr(err, "***@host") == NULL)
            hv_test_fail(__FILE__, __LINE__, "%s: %s", bad[i], err);
    }
    hv_redis_addr_t a;
    char err[512];
    ASSERT_EQ(HV_REDIS_LOAD_URL, hv_redis_url_load("redis://alice:@host", NULL, &a, err,
                                                   sizeof(err)));
    ASSERT(strstr(err, "'redis://alice:@host'") != NULL);
}
