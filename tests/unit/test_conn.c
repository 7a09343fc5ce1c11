/*
 * test_conn.c: client connections against a server made in the test, on 127.0.0.1 only.
 *
 * The server listens on 127.0.0.1 port 0 (the kernel picks a free port) and, for its one
 * accepted connection, can send a greeting or a flood of bytes, echo what it reads, check a
 * byte pattern, and shut its side down after so many bytes. The client connects to the IP
 * literal with host_is_ip = 1, so no name is ever looked up: the dns cache it is given must
 * end with zero lookups. The address guard lets 127.0.0.1/32 through, as allow_addresses
 * would; the guard tests take that exception away. Callbacks record what happened and close
 * what the scenario is done with; the test asserts after the loop has returned.
 */
#include <stdlib.h>

#include "harvestd/common.h"
#include "harvestd/cf_tls.h"
#include "harvestd/conn.h"
#include "harvestd/dns.h"
#include "harvestd/guard.h"
#include "test.h"

#define LOOPBACK "127.0.0.1"

/* ---- the server */

typedef struct server_s server_t;

typedef struct {
    uv_tcp_t tcp;
    server_t *srv;
    uv_shutdown_t shutdown_req;
    int shutting;
    char buf[64 * 1024];
} peer_t;

struct server_s {
    uv_tcp_t listener;
    int listening;
    uint16_t port;
    /* what it does */
    const char *greeting; /* sent on accept */
    size_t flood;         /* bytes sent on accept, after the greeting */
    int echo;             /* send back what it reads */
    int check_pattern;    /* what it reads must be pattern_byte(0), pattern_byte(1)... */
    size_t shut_after;    /* shut its side down once it has read this many bytes (0: never) */
    /* what happened */
    int accepted;
    size_t received;
    int pattern_broken;
    int peer_ended; /* it read the client's EOF or an error */
};

typedef struct {
    uv_write_t req;
    uv_buf_t buf;
    char data[];
} server_write_t;

static char pattern_byte(size_t i)
{
    return (char)(i * 7 % 251);
}

static void on_server_write(uv_write_t *req, int status)
{
    (void)status; /* a client that went away: nothing to do */
    free(hv_container_of(req, server_write_t, req));
}

static void server_send(peer_t *p, const char *data, size_t len)
{
    server_write_t *w = hv_xmalloc(sizeof(*w) + len);
    memcpy(w->data, data, len);
    w->buf = uv_buf_init(w->data, (unsigned)len);
    if (uv_write(&w->req, (uv_stream_t *)&p->tcp, &w->buf, 1, on_server_write) != 0)
        free(w);
}

static void on_peer_close(uv_handle_t *h)
{
    free(hv_container_of((uv_tcp_t *)h, peer_t, tcp));
}

static void on_peer_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    peer_t *p = hv_container_of((uv_tcp_t *)h, peer_t, tcp);
    (void)suggested;
    *buf = uv_buf_init(p->buf, sizeof(p->buf));
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
    (void)req;
    (void)status; /* the client's EOF (or an error) closes the peer */
}

static void on_peer_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    peer_t *p = hv_container_of((uv_tcp_t *)s, peer_t, tcp);
    server_t *srv = p->srv;
    if (nread < 0) {
        srv->peer_ended = 1;
        uv_close((uv_handle_t *)s, on_peer_close);
        return;
    }
    if (srv->check_pattern)
        for (ssize_t i = 0; i < nread; i++)
            if (buf->base[i] != pattern_byte(srv->received + (size_t)i))
                srv->pattern_broken = 1;
    srv->received += (size_t)nread;
    if (srv->echo && nread > 0)
        server_send(p, buf->base, (size_t)nread);
    if (srv->shut_after > 0 && srv->received >= srv->shut_after && !p->shutting) {
        p->shutting = 1; /* after the writes queued so far */
        uv_shutdown(&p->shutdown_req, s, on_shutdown);
    }
}

static void on_connection(uv_stream_t *listener, int status)
{
    server_t *srv = hv_container_of((uv_tcp_t *)listener, server_t, listener);
    if (status != 0)
        return;
    peer_t *p = hv_xcalloc(1, sizeof(*p));
    p->srv = srv;
    uv_tcp_init(listener->loop, &p->tcp);
    if (uv_accept(listener, (uv_stream_t *)&p->tcp) != 0) {
        uv_close((uv_handle_t *)&p->tcp, on_peer_close);
        return;
    }
    srv->accepted++;
    uv_read_start((uv_stream_t *)&p->tcp, on_peer_alloc, on_peer_read);
    if (srv->greeting != NULL)
        server_send(p, srv->greeting, strlen(srv->greeting));
    if (srv->flood > 0) {
        char *data = hv_xmalloc(srv->flood);
        for (size_t i = 0; i < srv->flood; i++)
            data[i] = pattern_byte(i);
        server_send(p, data, srv->flood);
        free(data);
    }
}

static void server_listen(uv_loop_t *loop, server_t *srv)
{
    struct sockaddr_in addr;
    struct sockaddr_storage bound;
    int len = sizeof(bound);

    ASSERT_OK(uv_ip4_addr(LOOPBACK, 0, &addr));
    ASSERT_OK(uv_tcp_init(loop, &srv->listener));
    srv->listening = 1;
    ASSERT_OK(uv_tcp_bind(&srv->listener, (const struct sockaddr *)&addr, 0));
    ASSERT_OK(uv_listen((uv_stream_t *)&srv->listener, 8, on_connection));
    ASSERT_OK(uv_tcp_getsockname(&srv->listener, (struct sockaddr *)&bound, &len));
    srv->port = ntohs(((struct sockaddr_in *)&bound)->sin_port);
    ASSERT_NE(0, srv->port);
}

/* Stop accepting. An accepted connection closes itself when the client goes away. */
static void server_close(server_t *srv)
{
    if (srv->listening) {
        srv->listening = 0;
        uv_close((uv_handle_t *)&srv->listener, NULL);
    }
}

/* A port on 127.0.0.1 that nothing listens on: bound, read, and closed again. */
static uint16_t closed_port(uv_loop_t *loop)
{
    uv_tcp_t tcp;
    struct sockaddr_in addr;
    struct sockaddr_storage bound;
    int len = sizeof(bound);

    ASSERT_OK(uv_ip4_addr(LOOPBACK, 0, &addr));
    ASSERT_OK(uv_tcp_init(loop, &tcp));
    ASSERT_OK(uv_tcp_bind(&tcp, (const struct sockaddr *)&addr, 0));
    ASSERT_OK(uv_tcp_getsockname(&tcp, (struct sockaddr *)&bound, &len));
    uv_close((uv_handle_t *)&tcp, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
    return ntohs(((struct sockaddr_in *)&bound)->sin_port);
}

/* ---- the client */

typedef struct {
    uv_loop_t loop;
    server_t srv;
    hv_dns_t *dns;
    hv_allow_list_t allow;
    hv_guard_t guard;
    hv_conn_stats_t stats;
    hv_conn_env_t env;
    hv_conn_t *c;
    int in_connect;  /* inside hv_conn_connect() */
    int closed;      /* hv_conn_close() was called */
    int after_close; /* callbacks that ran after it */
    int connects;
    int connect_status;
    int connect_inside; /* on_connect ran inside hv_conn_connect() */
    int reads;
    char got[4096];
    size_t got_len;
    size_t got_total;
    int errors;
    int last_error;
    int timeouts;
    int phase;
    uint64_t t0;
    uint64_t timeout_at;
    size_t got_len_at_timeout;
    int reads_at_timeout;
} fixture_t;

static void fixture_init(fixture_t *f)
{
    memset(f, 0, sizeof(*f));
    ASSERT_OK(uv_loop_init(&f->loop));
    f->dns = hv_dns_new(&f->loop, 1000, 8);
    ASSERT_OK(hv_allow_list_parse(LOOPBACK "/32", &f->allow, NULL, 0));
    f->guard.allow = &f->allow;
    f->env.loop = &f->loop;
    f->env.dns = f->dns;
    f->env.guard = &f->guard;
    f->env.stats = &f->stats;
}

/* Close what is still open (the client at most once) and stop the server. */
static void close_all(fixture_t *f)
{
    if (f->c != NULL && !f->closed) {
        f->closed = 1;
        hv_conn_close(f->c);
    }
    f->c = NULL;
    server_close(&f->srv);
}

static void fixture_done(fixture_t *f)
{
    ASSERT_EQ(0, f->after_close);
    ASSERT_EQ(0, hv_dns_stats(f->dns)->lookups); /* an IP literal is never looked up */
    hv_dns_close(f->dns);
    ASSERT_LOOP_CLOSE(&f->loop);
}

static int fixture_connect(fixture_t *f, uint16_t port, const hv_conn_cbs_t *cbs)
{
    f->in_connect = 1;
    int rc = hv_conn_connect(&f->env, NULL, 0, LOOPBACK, 1, port, cbs, f, &f->c);
    f->in_connect = 0;
    return rc;
}

/* What every callback does first: count, and catch calls after close. */
static fixture_t *enter(hv_conn_t *c)
{
    fixture_t *f = c->data;
    if (f->closed)
        f->after_close++;
    return f;
}

static void record_connect(hv_conn_t *c, int status)
{
    fixture_t *f = enter(c);
    f->connects++;
    f->connect_status = status;
    f->connect_inside = f->in_connect;
}

static void record_read(hv_conn_t *c, const char *data, size_t len)
{
    fixture_t *f = enter(c);
    f->reads++;
    f->got_total += len;
    size_t room = sizeof(f->got) - 1 - f->got_len;
    size_t n = len < room ? len : room;
    memcpy(f->got + f->got_len, data, n);
    f->got_len += n;
    f->got[f->got_len] = '\0';
}

static void record_error(hv_conn_t *c, int err)
{
    fixture_t *f = enter(c);
    f->errors++;
    f->last_error = err;
}

static void record_timeout(hv_conn_t *c)
{
    fixture_t *f = enter(c);
    f->timeouts++;
    f->timeout_at = uv_now(&f->loop);
}

/* Any failure to connect ends the scenario. */
static void connect_or_close(hv_conn_t *c, int status)
{
    record_connect(c, status);
    if (status != 0)
        close_all(c->data);
}

/* ---- echo: connect, write, read the echo, then the server's EOF */

static void echo_on_connect(hv_conn_t *c, int status)
{
    connect_or_close(c, status);
    if (status != 0)
        return;
    ASSERT_EQ(HV_CONN_OPEN, c->state);
    hv_conn_read_start(c);
    ASSERT_OK(hv_conn_write(c, "hello", 5));
}

static void close_on_error(hv_conn_t *c, int err)
{
    record_error(c, err);
    close_all(c->data);
}

static const hv_conn_cbs_t echo_cbs = {echo_on_connect, record_read, close_on_error,
                                       record_timeout};

TEST_IMPL(conn_echo_then_the_peer_closes)
{
    fixture_t f;
    fixture_init(&f);
    f.srv.echo = 1;
    f.srv.shut_after = 5;
    server_listen(&f.loop, &f.srv);
    ASSERT_OK(fixture_connect(&f, f.srv.port, &echo_cbs));
    ASSERT_NOT_NULL(f.c);
    ASSERT_EQ(0, hv_conn_has_layer(f.c, &hv_cf_tls));
    ASSERT_EQ(UV_ENOTCONN, hv_conn_write(f.c, "early", 5)); /* not open yet */
    uv_run(&f.loop, UV_RUN_DEFAULT);

    ASSERT_EQ(1, f.connects);
    ASSERT_EQ(0, f.connect_status);
    ASSERT_EQ(0, f.connect_inside);
    ASSERT_STR_EQ("hello", f.got);
    ASSERT_EQ(1, f.errors);
    ASSERT_EQ(UV_EOF, f.last_error);
    ASSERT_EQ(0, f.timeouts);
    ASSERT_EQ(1, f.srv.accepted);
    ASSERT_EQ(5, f.srv.received);
    ASSERT_EQ(1, f.srv.peer_ended);
    fixture_done(&f);
}

/* ---- a large write is copied and arrives whole, in order */

static void big_on_connect(hv_conn_t *c, int status)
{
    connect_or_close(c, status);
    if (status != 0)
        return;
    size_t len = 1024 * 1024;
    char *data = hv_xmalloc(len);
    for (size_t i = 0; i < len; i++)
        data[i] = pattern_byte(i);
    hv_conn_read_start(c);
    ASSERT_OK(hv_conn_write(c, data, len));
    memset(data, 0, len); /* the connection sends its own copy */
    free(data);
}

static const hv_conn_cbs_t big_cbs = {big_on_connect, record_read, close_on_error, record_timeout};

TEST_IMPL(conn_large_write_arrives_whole)
{
    fixture_t f;
    fixture_init(&f);
    f.srv.check_pattern = 1;
    f.srv.shut_after = 1024 * 1024;
    server_listen(&f.loop, &f.srv);
    ASSERT_OK(fixture_connect(&f, f.srv.port, &big_cbs));
    uv_run(&f.loop, UV_RUN_DEFAULT);
    ASSERT_EQ(0, f.connect_status);
    ASSERT_EQ(1024 * 1024, f.srv.received);
    ASSERT_EQ(0, f.srv.pattern_broken);
    ASSERT_EQ(UV_EOF, f.last_error);
    fixture_done(&f);
}

/* ---- connection refused */

TEST_IMPL(conn_refused)
{
    fixture_t f;
    fixture_init(&f);
    uint16_t port = closed_port(&f.loop);
    ASSERT_OK(fixture_connect(&f, port, &echo_cbs));
    ASSERT_NOT_NULL(f.c);
    uv_run(&f.loop, UV_RUN_DEFAULT);
    ASSERT_EQ(1, f.connects);
    ASSERT_EQ(UV_ECONNREFUSED, f.connect_status);
    ASSERT_EQ(0, f.connect_inside);
    ASSERT_EQ(0, f.reads + f.errors + f.timeouts);
    fixture_done(&f);
}

/* ---- the address guard */

/* Without the exception, 127.0.0.1 is refused before any packet: the server accepts nothing
 * and the failure is reported from the loop, with its class, like any connect failure. */
TEST_IMPL(conn_guard_refuses_loopback_before_connecting)
{
    fixture_t f;
    fixture_init(&f);
    f.allow.count = 0;
    server_listen(&f.loop, &f.srv);
    ASSERT_OK(fixture_connect(&f, f.srv.port, &echo_cbs));
    ASSERT_NOT_NULL(f.c);
    ASSERT_EQ(0, f.connects);
    ASSERT_EQ(HV_D_BLOCKED_LOOPBACK_ADDRESS, hv_conn_error(f.c)->code);
    uv_run(&f.loop, UV_RUN_DEFAULT);
    ASSERT_EQ(1, f.connects);
    ASSERT_EQ(HV_EBLOCKED, f.connect_status);
    ASSERT_EQ(0, f.connect_inside);
    ASSERT_EQ(0, f.srv.accepted);
    ASSERT_EQ(1, f.stats.blocked[HV_ADDR_LOOPBACK]);
    ASSERT_EQ(0, f.stats.opened); /* no socket was connected */
    ASSERT_EQ(0, f.reads + f.errors + f.timeouts);
    fixture_done(&f);
}

/* The same refusal with the guard off connects, so the test above cannot pass for a broken
 * server. */
TEST_IMPL(conn_guard_off_connects_to_loopback)
{
    fixture_t f;
    fixture_init(&f);
    f.allow.count = 0;
    f.guard.off = 1;
    f.srv.echo = 1;
    f.srv.shut_after = 5;
    server_listen(&f.loop, &f.srv);
    ASSERT_OK(fixture_connect(&f, f.srv.port, &echo_cbs));
    uv_run(&f.loop, UV_RUN_DEFAULT);
    ASSERT_EQ(0, f.connect_status);
    ASSERT_STR_EQ("hello", f.got);
    ASSERT_EQ(1, f.srv.accepted);
    ASSERT_EQ(0, f.stats.blocked[HV_ADDR_LOOPBACK]);
    ASSERT_EQ(1, f.stats.opened);
    fixture_done(&f);
}

/* Closing a refused connection before the loop reports it: no callback, nothing leaks. */
TEST_IMPL(conn_guard_close_before_the_refusal_is_reported)
{
    fixture_t f;
    fixture_init(&f);
    f.allow.count = 0;
    server_listen(&f.loop, &f.srv);
    ASSERT_OK(fixture_connect(&f, f.srv.port, &echo_cbs));
    close_all(&f);
    uv_run(&f.loop, UV_RUN_DEFAULT);
    ASSERT_EQ(0, f.connects);
    ASSERT_EQ(0, f.srv.accepted);
    fixture_done(&f);
}

/* ---- closing while the connect is under way: no callback at all */

TEST_IMPL(conn_close_while_connecting)
{
    fixture_t f;
    fixture_init(&f);
    server_listen(&f.loop, &f.srv);
    ASSERT_OK(fixture_connect(&f, f.srv.port, &echo_cbs));
    ASSERT_EQ(HV_CONN_CONNECTING, f.c->state);
    close_all(&f);
    uv_run(&f.loop, UV_RUN_DEFAULT);
    ASSERT_EQ(0, f.connects + f.reads + f.errors + f.timeouts);
    fixture_done(&f);
}

/* ---- the timer */

static void timer_on_connect(hv_conn_t *c, int status)
{
    fixture_t *f = c->data;
    connect_or_close(c, status);
    if (status != 0)
        return;
    f->t0 = uv_now(&f->loop);
    hv_conn_set_timer(c, 5000);
    hv_conn_set_timer(c, 30); /* re-arming replaces the deadline */
}

static void close_on_timeout(hv_conn_t *c)
{
    record_timeout(c);
    close_all(c->data);
}

static const hv_conn_cbs_t timer_cbs = {timer_on_connect, record_read, record_error,
                                        close_on_timeout};

TEST_IMPL(conn_timer_fires_on_timeout)
{
    fixture_t f;
    fixture_init(&f);
    server_listen(&f.loop, &f.srv);
    ASSERT_OK(fixture_connect(&f, f.srv.port, &timer_cbs));
    uv_run(&f.loop, UV_RUN_DEFAULT);
    ASSERT_EQ(0, f.connect_status);
    ASSERT_EQ(1, f.timeouts);
    ASSERT_GE(f.timeout_at - f.t0, 30);
    ASSERT_LT(f.timeout_at - f.t0, 5000);
    fixture_done(&f);
}

typedef struct {
    uv_timer_t timer;
    fixture_t *f;
} watch_t;

static void on_watch_close(uv_handle_t *h)
{
    free(hv_container_of((uv_timer_t *)h, watch_t, timer));
}

static void on_watch(uv_timer_t *t)
{
    watch_t *w = hv_container_of(t, watch_t, timer);
    close_all(w->f);
    uv_close((uv_handle_t *)t, on_watch_close);
}

static void stopped_timer_on_connect(hv_conn_t *c, int status)
{
    fixture_t *f = c->data;
    connect_or_close(c, status);
    if (status != 0)
        return;
    hv_conn_set_timer(c, 20);
    hv_conn_set_timer(c, 0); /* stops it */
    /* A timer of the test's own ends the scenario well after the 20 ms. */
    watch_t *w = hv_xcalloc(1, sizeof(*w));
    w->f = f;
    uv_timer_init(&f->loop, &w->timer);
    uv_timer_start(&w->timer, on_watch, 120, 0);
}

static const hv_conn_cbs_t stopped_timer_cbs = {stopped_timer_on_connect, record_read, record_error,
                                                close_on_timeout};

TEST_IMPL(conn_timer_zero_stops_it)
{
    fixture_t f;
    fixture_init(&f);
    server_listen(&f.loop, &f.srv);
    ASSERT_OK(fixture_connect(&f, f.srv.port, &stopped_timer_cbs));
    uv_run(&f.loop, UV_RUN_DEFAULT);
    ASSERT_EQ(0, f.connect_status);
    ASSERT_EQ(0, f.timeouts);
    fixture_done(&f);
}

/* ---- closing from inside on_read, twice in a row */

static void read_on_connect(hv_conn_t *c, int status)
{
    connect_or_close(c, status);
    if (status == 0)
        hv_conn_read_start(c);
}

static void close_twice_on_read(hv_conn_t *c, const char *data, size_t len)
{
    fixture_t *f = c->data;
    record_read(c, data, len);
    f->closed = 1;
    hv_conn_close(c);
    hv_conn_close(c); /* idempotent: the memory is freed later, from the loop */
    f->c = NULL;
    server_close(&f->srv);
}

static const hv_conn_cbs_t close_on_read_cbs = {read_on_connect, close_twice_on_read, record_error,
                                                record_timeout};

TEST_IMPL(conn_close_twice_from_inside_on_read)
{
    fixture_t f;
    fixture_init(&f);
    f.srv.flood = 1024 * 1024; /* much more than one read: the rest is never delivered */
    server_listen(&f.loop, &f.srv);
    ASSERT_OK(fixture_connect(&f, f.srv.port, &close_on_read_cbs));
    uv_run(&f.loop, UV_RUN_DEFAULT);
    ASSERT_EQ(0, f.connect_status);
    ASSERT_EQ(1, f.reads);
    ASSERT_LT(f.got_total, 1024 * 1024);
    ASSERT_EQ(0, f.errors);
    ASSERT_EQ(1, f.srv.peer_ended);
    fixture_done(&f); /* and no callback ran after the close */
}

/* ---- reading stops and starts on demand
 *
 * The server greets with "hello" at once and echoes. Phase 1: not reading; after 50 ms
 * nothing has been delivered; start reading and get "hello". Phase 2: stop reading from
 * inside on_read, send "ping" (echoed at once); after 50 ms still only "hello"; start again
 * and get "ping". */

static void pause_on_connect(hv_conn_t *c, int status)
{
    fixture_t *f = c->data;
    connect_or_close(c, status);
    if (status != 0)
        return;
    f->phase = 1;
    hv_conn_set_timer(c, 50);
}

static void pause_on_timeout(hv_conn_t *c)
{
    fixture_t *f = c->data;
    record_timeout(c);
    if (f->phase == 1)
        f->reads_at_timeout = f->reads;
    else
        f->got_len_at_timeout = f->got_len;
    hv_conn_read_start(c);
}

static void pause_on_read(hv_conn_t *c, const char *data, size_t len)
{
    fixture_t *f = c->data;
    record_read(c, data, len);
    if (f->phase == 1 && f->got_len >= 5) {
        f->phase = 2;
        hv_conn_read_stop(c);
        ASSERT_OK(hv_conn_write(c, "ping", 4));
        hv_conn_set_timer(c, 50);
    } else if (f->phase == 2 && f->got_len >= 9) {
        close_all(f);
    }
}

static const hv_conn_cbs_t pause_cbs = {pause_on_connect, pause_on_read, close_on_error,
                                        pause_on_timeout};

TEST_IMPL(conn_read_stop_and_start)
{
    fixture_t f;
    fixture_init(&f);
    f.srv.greeting = "hello";
    f.srv.echo = 1;
    server_listen(&f.loop, &f.srv);
    ASSERT_OK(fixture_connect(&f, f.srv.port, &pause_cbs));
    uv_run(&f.loop, UV_RUN_DEFAULT);
    ASSERT_EQ(0, f.connect_status);
    ASSERT_EQ(2, f.timeouts);
    ASSERT_EQ(0, f.reads_at_timeout);   /* nothing before the first read_start */
    ASSERT_EQ(5, f.got_len_at_timeout); /* nothing while stopped */
    ASSERT_STR_EQ("helloping", f.got);
    ASSERT_EQ(0, f.errors);
    fixture_done(&f);
}
