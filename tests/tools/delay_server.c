/*
 * delay_server: a latency-bound origin for the benchmark. Every HTTP request is answered after a
 * fixed delay (100 ms by default) with a small HTML page, on many loopback addresses at once.
 *
 *   delay_server --port P [--first K] [--count N] [--delay SECONDS]
 *
 * Binds 127.0.H.L:P for k = K .. K+N-1 with H = 1 + k / 250 and L = 1 + k % 250 (never
 * 127.0.0.x; on Linux all of 127.0.0.0/8 is local, so each address is a distinct host for the
 * client on the same machine), SO_REUSEADDR and a listen backlog of 4096. Defaults: K = 0,
 * N = 125, delay 0.1 s. Prints one line "ready <pid>" on stdout once every socket listens, or
 * "error <text>" and exits 1 if one cannot be bound (a bad command line is exit status 2). Serves
 * until SIGTERM or SIGINT, then prints one JSON line of statistics and exits 0:
 *
 *   addresses       N
 *   requests        responses sent
 *   connections     connections accepted
 *   lag_mean_ms / lag_p99_ms / lag_max_ms
 *                   how late responses left compared to arrival + delay: how busy this process
 *                   was (or the machine). The mean and the maximum cover every response, the
 *                   p99 the first 200,000.
 *   stall_p99_ms / stall_max_ms
 *                   how late a 10 ms ticker ran while requests were waiting: time this process
 *                   was runnable but not running (a busy machine) or stuck in a long callback
 *   cpu_s, cpu_user_s, cpu_sys_s
 *                   CPU of this process while serving (on loopback the kernel's TCP work for
 *                   the peer is partly charged to the sender, so sys is not all the server's)
 *   busy_s          the span from the first request to the last response (cpu_s / busy_s is
 *                   the share of one core this process used)
 *
 * HTTP/1.1 keep-alive is honoured: a request head containing "Connection: close" (any case) is
 * answered with "Connection: close" and the connection is closed after that response, dropping
 * any later pipelined request. Request bodies are not expected (GET only): a head ends at the
 * first "\r\n\r\n". An unfinished head above 64 KiB, or more than 4,096 requests waiting on one
 * connection, closes the connection. Pipelined requests are answered in arrival order.
 *
 * All delays are equal, so due times follow arrival order: the process keeps one FIFO of
 * waiting responses and one timer armed for the oldest, instead of a timer per request. That
 * timer is a timerfd watched by a uv_poll_t rather than a uv_timer_t: libuv's timers count
 * whole milliseconds of a loop time taken at the start of each iteration, which makes every
 * response about a millisecond late (1% of the benchmark's bound), where a timerfd set to the
 * absolute due time on CLOCK_MONOTONIC (uv_hrtime()'s clock) fires within tens of
 * microseconds. The benchmark runs on Linux only (it relies on 127.0.0.0/8 being local).
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "harvestd/common.h"

#define TITLE "Latency test page"
#define BODY                                                                                       \
    "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" TITLE               \
    "</title></head><body><h1>Delayed</h1><p>This page was served after a fixed delay "            \
    "\xe2\x80\x94 ok.</p></body></html>\n"
#define HEAD                                                                                       \
    "HTTP/1.1 200 OK\r\nServer: delay\r\nContent-Type: text/html; charset=utf-8\r\n"               \
    "Content-Length: %zu\r\nConnection: %s\r\n\r\n%s"

enum {
    MAX_HEAD = 64 * 1024,       /* an unfinished head above this closes the connection */
    IN_START = 4 * 1024,        /* first size of a connection's input buffer */
    IN_MAX = MAX_HEAD + 4,      /* the largest head we accept plus its "\r\n\r\n" */
    PIPELINE_MAX = 4096,        /* requests waiting on one connection */
    LAG_SAMPLES = 200 * 1000,   /* lag samples kept for the p99 */
    STALL_SAMPLES = 200 * 1000, /* ticker samples kept (33 minutes of waiting at 100/s) */
    TICK_MS = 10,
    LISTEN_BACKLOG = 4096,
    MAX_ADDRESSES = 254 * 250, /* k with 1 + k / 250 <= 254 */
};

typedef struct conn_s {
    uv_tcp_t tcp;
    char *in; /* unparsed request bytes, at most IN_MAX */
    size_t in_len;
    size_t in_cap;
    size_t scanned;   /* in[0 .. scanned) holds no "\r\n\r\n" start */
    unsigned pending; /* entries in the response queue that point here */
    unsigned writes;  /* uv_write requests not yet called back */
    int done;         /* answered "Connection: close" or failed: send nothing more */
    int closing;      /* uv_close called */
    int closed;       /* close callback ran */
} conn_t;

typedef struct {
    conn_t *conn;
    uint64_t arrived_ns;
    int keep;
} pending_t;

typedef struct {
    uv_write_t req;
    conn_t *conn;
} write_req_t;

typedef struct {
    uv_loop_t *loop;
    uv_tcp_t *listeners;
    int nlisteners;
    int respond_fd; /* timerfd armed for the oldest waiting response, or -1 */
    uv_poll_t respond_poll;
    uv_timer_t tick_timer;
    uv_signal_t sigterm;
    uv_signal_t sigint;
    uint64_t delay_ns;
    int stopping;

    /* Waiting responses, oldest first: a ring of `cap` (a power of two) entries. */
    pending_t *queue;
    size_t q_head;
    size_t q_len;
    size_t q_cap;

    uint64_t requests;
    uint64_t connections;
    int64_t *lags;
    size_t nlags;
    double lag_sum_ns;
    int64_t lag_max_ns;
    uint64_t first_ns; /* arrival of the first request, 0 before */
    uint64_t last_ns;  /* the last response */
    int64_t *stalls;
    size_t nstalls;
    int64_t stall_max_ns;
    uint64_t tick_armed_ns;
    int tick_busy;
    struct rusage ru_start;
} server_t;

static server_t srv;
static char response_keep[512];
static char response_close[512];
static size_t response_keep_len;
static size_t response_close_len;

static void conn_close(conn_t *conn);

/* ---- the response queue -------------------------------------------------------------------- */

static void queue_push(conn_t *conn, uint64_t arrived_ns, int keep)
{
    if (srv.q_len == srv.q_cap) {
        size_t cap = srv.q_cap ? srv.q_cap * 2 : 1024;
        pending_t *q = hv_xmalloc(cap * sizeof(*q));
        for (size_t i = 0; i < srv.q_len; i++)
            q[i] = srv.queue[(srv.q_head + i) & (srv.q_cap - 1)];
        free(srv.queue);
        srv.queue = q;
        srv.q_cap = cap;
        srv.q_head = 0;
    }
    srv.queue[(srv.q_head + srv.q_len) & (srv.q_cap - 1)] =
        (pending_t){.conn = conn, .arrived_ns = arrived_ns, .keep = keep};
    srv.q_len++;
}

static pending_t queue_pop(void)
{
    pending_t p = srv.queue[srv.q_head];
    srv.q_head = (srv.q_head + 1) & (srv.q_cap - 1);
    srv.q_len--;
    return p;
}

/* ---- connections ------------------------------------------------------------------------- */

/* A connection is freed when its handle has closed and no queued response points to it. */
static void conn_release(conn_t *conn)
{
    if (conn->closed && conn->pending == 0) {
        free(conn->in);
        free(conn);
    }
}

static void on_conn_close(uv_handle_t *h)
{
    conn_t *conn = hv_container_of(h, conn_t, tcp);
    conn->closed = 1;
    conn_release(conn);
}

static void conn_close(conn_t *conn)
{
    if (conn->closing)
        return;
    conn->closing = 1;
    conn->done = 1;
    uv_close((uv_handle_t *)&conn->tcp, on_conn_close);
}

static void on_write(uv_write_t *req, int status)
{
    write_req_t *wr = hv_container_of(req, write_req_t, req);
    conn_t *conn = wr->conn;
    free(wr);
    conn->writes--;
    if (status == UV_ECANCELED)
        return; /* the connection is closing */
    if (status < 0 || (conn->done && conn->writes == 0))
        conn_close(conn);
}

/* The responses are constant: most leave in one uv_try_write(), and only what the socket did
 * not take goes through a write request (which points into the same constant bytes). */
static void send_response(conn_t *conn, int keep)
{
    char *data = keep ? response_keep : response_close;
    size_t len = keep ? response_keep_len : response_close_len;
    uv_stream_t *stream = (uv_stream_t *)&conn->tcp;
    uv_buf_t buf = uv_buf_init(data, (unsigned)len);

    int n = uv_try_write(stream, &buf, 1);
    if (n == (int)len) {
        if (!keep)
            conn_close(conn);
        return;
    }
    if (n < 0 && n != UV_EAGAIN) {
        conn_close(conn);
        return;
    }
    size_t sent = n > 0 ? (size_t)n : 0;
    write_req_t *wr = hv_xmalloc(sizeof(*wr));
    wr->conn = conn;
    buf = uv_buf_init(data + sent, (unsigned)(len - sent));
    if (uv_write(&wr->req, stream, &buf, 1, on_write) < 0) {
        free(wr);
        conn_close(conn);
        return;
    }
    conn->writes++;
    if (!keep) {
        conn->done = 1; /* closed in on_write once the response is out */
        uv_read_stop(stream);
    }
}

static void arm_respond_timer(void);

static void respond(pending_t p)
{
    conn_t *conn = p.conn;
    conn->pending--;
    if (!conn->done) {
        uint64_t now = uv_hrtime();
        int64_t lag = (int64_t)(now - p.arrived_ns - srv.delay_ns);
        srv.requests++;
        srv.last_ns = now;
        srv.lag_sum_ns += (double)lag;
        if (srv.nlags < LAG_SAMPLES)
            srv.lags[srv.nlags++] = lag;
        if (lag > srv.lag_max_ns)
            srv.lag_max_ns = lag;
        send_response(conn, p.keep);
    }
    conn_release(conn);
}

static void on_respond_due(uv_poll_t *h, int status, int events)
{
    (void)h;
    (void)status;
    (void)events;
    uint64_t expirations;
    if (read(srv.respond_fd, &expirations, sizeof(expirations)) < 0 && errno != EAGAIN) {
        fprintf(stderr, "delay_server: read(timerfd): %s\n", strerror(errno));
        abort();
    }
    uint64_t now = uv_hrtime();
    while (srv.q_len > 0 && srv.queue[srv.q_head].arrived_ns + srv.delay_ns <= now)
        respond(queue_pop());
    arm_respond_timer();
}

/* Arm the timer for the oldest waiting response (a due time already past fires at once). */
static void arm_respond_timer(void)
{
    if (srv.q_len == 0 || srv.stopping)
        return;
    uint64_t due = srv.queue[srv.q_head].arrived_ns + srv.delay_ns;
    struct itimerspec its = {
        .it_value = {.tv_sec = (time_t)(due / 1000000000), .tv_nsec = (long)(due % 1000000000)}};
    if (timerfd_settime(srv.respond_fd, TFD_TIMER_ABSTIME, &its, NULL) < 0) {
        fprintf(stderr, "delay_server: timerfd_settime: %s\n", strerror(errno));
        abort(); /* only EINVAL or EFAULT: a bug of ours */
    }
}

/* Whether `s[0 .. n)` contains `needle` (lower case), ignoring ASCII case. */
static int contains_ci(const char *s, size_t n, const char *needle)
{
    size_t m = strlen(needle);
    for (size_t i = 0; i + m <= n; i++) {
        if (strncasecmp(s + i, needle, m) == 0)
            return 1;
    }
    return 0;
}

static void parse_heads(conn_t *conn)
{
    size_t off = 0; /* start of the current head */
    size_t from = conn->scanned;
    for (;;) {
        const char *end = memmem(conn->in + from, conn->in_len - from, "\r\n\r\n", 4);
        if (end == NULL)
            break;
        uint64_t now = uv_hrtime();
        size_t head_len = (size_t)(end - (conn->in + off));
        int keep = !contains_ci(conn->in + off, head_len, "connection: close");
        off += head_len + 4;
        from = off;
        if (conn->pending >= PIPELINE_MAX) {
            conn_close(conn);
            return;
        }
        if (srv.first_ns == 0)
            srv.first_ns = now;
        conn->pending++;
        queue_push(conn, now, keep);
        if (srv.q_len == 1)
            arm_respond_timer();
    }
    size_t left = conn->in_len - off;
    if (left > MAX_HEAD) {
        conn_close(conn);
        return;
    }
    memmove(conn->in, conn->in + off, left);
    conn->in_len = left;
    conn->scanned = left > 3 ? left - 3 : 0;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    conn_t *conn = hv_container_of(h, conn_t, tcp);
    if (conn->in_cap - conn->in_len < 1024 && conn->in_cap < IN_MAX) {
        size_t cap = conn->in_cap ? HV_MIN(2 * conn->in_cap, (size_t)IN_MAX) : IN_START;
        conn->in = hv_xrealloc(conn->in, cap);
        conn->in_cap = cap;
    }
    /* A full buffer (only possible with a head we would refuse anyway) reads as UV_ENOBUFS. */
    if (conn->in == NULL)
        *buf = uv_buf_init(NULL, 0);
    else
        *buf = uv_buf_init(conn->in + conn->in_len, (unsigned)(conn->in_cap - conn->in_len));
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    (void)buf;
    conn_t *conn = hv_container_of(stream, conn_t, tcp);
    if (nread < 0) { /* UV_EOF, a reset, or UV_ENOBUFS */
        conn_close(conn);
        return;
    }
    conn->in_len += (size_t)nread;
    if (nread > 0)
        parse_heads(conn);
}

static void on_connection(uv_stream_t *server, int status)
{
    if (status < 0) {
        fprintf(stderr, "delay_server: accept: %s\n", uv_strerror(status));
        return;
    }
    conn_t *conn = hv_xcalloc(1, sizeof(*conn));
    uv_tcp_init(srv.loop, &conn->tcp);
    conn->tcp.data = conn; /* tells the shutdown walk that this handle is a connection */
    if (uv_accept(server, (uv_stream_t *)&conn->tcp) < 0) {
        conn_close(conn);
        return;
    }
    srv.connections++;
    uv_tcp_nodelay(&conn->tcp, 1);
    if (uv_read_start((uv_stream_t *)&conn->tcp, on_alloc, on_read) < 0)
        conn_close(conn);
}

/* ---- ticker, report, shutdown ------------------------------------------------------------ */

static void arm_tick(void);

static void on_tick(uv_timer_t *t)
{
    (void)t;
    if (srv.tick_busy) {
        int64_t stall = (int64_t)(uv_hrtime() - srv.tick_armed_ns) - (int64_t)TICK_MS * 1000000;
        stall = HV_MAX(stall, 0);
        if (srv.nstalls < STALL_SAMPLES)
            srv.stalls[srv.nstalls++] = stall;
        if (stall > srv.stall_max_ns)
            srv.stall_max_ns = stall;
    }
    arm_tick();
}

/* Like the delay, a tick that starts while requests wait is measured from the clock, so a
 * busy loop or machine shows as ticks that run late. */
static void arm_tick(void)
{
    srv.tick_armed_ns = uv_hrtime();
    srv.tick_busy = srv.q_len > 0;
    uv_timer_start(&srv.tick_timer, on_tick, TICK_MS, 0);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static double ms(double ns)
{
    return ns / 1e6;
}

static double tv_s(struct timeval tv)
{
    return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

static void report(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double user = tv_s(ru.ru_utime) - tv_s(srv.ru_start.ru_utime);
    double sys = tv_s(ru.ru_stime) - tv_s(srv.ru_start.ru_stime);
    qsort(srv.lags, srv.nlags, sizeof(*srv.lags), cmp_i64);
    qsort(srv.stalls, srv.nstalls, sizeof(*srv.stalls), cmp_i64);
    double lag_mean = srv.requests ? srv.lag_sum_ns / (double)srv.requests : 0.0;
    double lag_p99 = srv.nlags ? (double)srv.lags[(size_t)(0.99 * (double)(srv.nlags - 1))] : 0.0;
    double stall_p99 =
        srv.nstalls ? (double)srv.stalls[(size_t)(0.99 * (double)(srv.nstalls - 1))] : 0.0;
    double busy = srv.first_ns && srv.last_ns > srv.first_ns
                      ? (double)(srv.last_ns - srv.first_ns) / 1e9
                      : 0.0;
    printf("{\"addresses\": %d, \"requests\": %llu, \"connections\": %llu, "
           "\"lag_mean_ms\": %.3f, \"lag_p99_ms\": %.3f, \"lag_max_ms\": %.3f, "
           "\"stall_p99_ms\": %.3f, \"stall_max_ms\": %.3f, \"cpu_s\": %.3f, "
           "\"cpu_user_s\": %.3f, \"cpu_sys_s\": %.3f, \"busy_s\": %.3f}\n",
           srv.nlisteners, (unsigned long long)srv.requests, (unsigned long long)srv.connections,
           ms(lag_mean), ms(lag_p99), ms((double)srv.lag_max_ns), ms(stall_p99),
           ms((double)srv.stall_max_ns), user + sys, user, sys, busy);
    fflush(stdout);
}

static void close_walk(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (uv_is_closing(h))
        return;
    if (h->type == UV_TCP && h->data != NULL)
        conn_close(h->data);
    else
        uv_close(h, NULL);
}

/* Drop every waiting response and close every handle; uv_run() then returns. */
static void close_all(void)
{
    srv.stopping = 1;
    while (srv.q_len > 0) {
        pending_t p = queue_pop();
        p.conn->pending--;
        conn_release(p.conn);
    }
    uv_walk(srv.loop, close_walk, NULL);
}

static void on_signal(uv_signal_t *h, int signum)
{
    (void)h;
    (void)signum;
    if (srv.stopping)
        return;
    report();
    close_all();
    /* Closing the signal handles restored the default actions: a second signal must not cut
     * the exit short. */
    signal(SIGTERM, SIG_IGN);
    signal(SIGINT, SIG_IGN);
}

/* ---- command line and start-up ------------------------------------------------------------ */

static void usage(const char *why)
{
    if (why != NULL)
        fprintf(stderr, "delay_server: %s\n", why);
    fprintf(stderr, "usage: delay_server --port P [--first K] [--count N] [--delay SECONDS]\n");
    exit(2);
}

static long parse_long(const char *opt, const char *value, long min, long max)
{
    char *end;
    errno = 0;
    long v = strtol(value, &end, 10);
    if (errno != 0 || end == value || *end != '\0' || v < min || v > max) {
        fprintf(stderr, "delay_server: %s wants an integer from %ld to %ld, not \"%s\"\n", opt, min,
                max, value);
        usage(NULL);
    }
    return v;
}

static double parse_seconds(const char *opt, const char *value)
{
    char *end;
    errno = 0;
    double v = strtod(value, &end);
    if (errno != 0 || end == value || *end != '\0' || !isfinite(v) || v < 0 || v > 3600) {
        fprintf(stderr, "delay_server: %s wants seconds from 0 to 3600, not \"%s\"\n", opt, value);
        usage(NULL);
    }
    return v;
}

static void format_address(char *out, size_t cap, long k)
{
    snprintf(out, cap, "127.0.%ld.%ld", 1 + k / 250, 1 + k % 250);
}

static size_t build_response(char *out, size_t cap, const char *connection)
{
    int n = snprintf(out, cap, HEAD, strlen(BODY), connection, BODY);
    if (n < 0 || (size_t)n >= cap)
        abort(); /* the buffers are sized for these constants */
    return (size_t)n;
}

/* Binds every address, serves until a signal, then closes everything; the exit status. */
static int serve(long port, long first, long count, double delay)
{
    int rc = 1, err = 0;
    char addr[32] = "";

    srv.loop = uv_default_loop();
    srv.respond_fd = -1;
    srv.delay_ns = (uint64_t)llround(delay * 1e9);
    srv.lags = hv_xmalloc(LAG_SAMPLES * sizeof(*srv.lags));
    srv.stalls = hv_xmalloc(STALL_SAMPLES * sizeof(*srv.stalls));
    srv.listeners = hv_xcalloc((size_t)count, sizeof(*srv.listeners));
    uv_timer_init(srv.loop, &srv.tick_timer);
    uv_signal_init(srv.loop, &srv.sigterm);
    uv_signal_init(srv.loop, &srv.sigint);

    srv.respond_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (srv.respond_fd < 0) {
        printf("error timerfd_create: %s\n", strerror(errno));
        goto out;
    }
    uv_poll_init(srv.loop, &srv.respond_poll, srv.respond_fd);
    err = uv_poll_start(&srv.respond_poll, UV_READABLE, on_respond_due);
    if (err < 0) {
        printf("error cannot poll a timerfd: %s\n", uv_strerror(err));
        goto out;
    }

    /* libuv sets SO_REUSEADDR on every TCP socket it binds; an address in use shows up in
     * either uv_tcp_bind() or uv_listen(). */
    for (long k = first; k < first + count; k++) {
        struct sockaddr_in sa;
        uv_tcp_t *l = &srv.listeners[srv.nlisteners];
        format_address(addr, sizeof(addr), k);
        uv_tcp_init(srv.loop, l);
        srv.nlisteners++;
        err = uv_ip4_addr(addr, (int)port, &sa);
        if (err == 0)
            err = uv_tcp_bind(l, (const struct sockaddr *)&sa, 0);
        if (err == 0)
            err = uv_listen((uv_stream_t *)l, LISTEN_BACKLOG, on_connection);
        if (err < 0) {
            printf("error cannot bind %s:%ld: %s\n", addr, port, uv_strerror(err));
            goto out;
        }
    }
    err = uv_signal_start(&srv.sigterm, on_signal, SIGTERM);
    if (err == 0)
        err = uv_signal_start(&srv.sigint, on_signal, SIGINT);
    if (err < 0) {
        printf("error cannot catch signals: %s\n", uv_strerror(err));
        goto out;
    }
    getrusage(RUSAGE_SELF, &srv.ru_start);
    arm_tick();
    printf("ready %d\n", (int)getpid());
    rc = 0;

out:
    fflush(stdout);
    if (rc != 0)
        close_all();
    uv_run(srv.loop, UV_RUN_DEFAULT); /* until on_signal() has closed every handle */
    if (uv_loop_close(srv.loop) != 0) {
        fprintf(stderr, "delay_server: handles left open at exit\n");
        rc = 1;
    }
    if (srv.respond_fd >= 0)
        close(srv.respond_fd); /* after its poll handle has closed */
    free(srv.listeners);
    free(srv.lags);
    free(srv.stalls);
    free(srv.queue);
    return rc;
}

int main(int argc, char **argv)
{
    long port = -1, first = 0, count = 125;
    double delay = 0.1;
    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i];
        if (strcmp(opt, "-h") == 0 || strcmp(opt, "--help") == 0)
            usage(NULL);
        const char *eq = strchr(opt, '=');
        size_t name_len = eq ? (size_t)(eq - opt) : strlen(opt);
        const char *value = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (value == NULL)
            usage("an option lacks its value");
        if (name_len == 6 && strncmp(opt, "--port", 6) == 0)
            port = parse_long("--port", value, 1, 65535);
        else if (name_len == 7 && strncmp(opt, "--first", 7) == 0)
            first = parse_long("--first", value, 0, MAX_ADDRESSES - 1);
        else if (name_len == 7 && strncmp(opt, "--count", 7) == 0)
            count = parse_long("--count", value, 1, MAX_ADDRESSES);
        else if (name_len == 7 && strncmp(opt, "--delay", 7) == 0)
            delay = parse_seconds("--delay", value);
        else
            usage("unknown option");
    }
    if (port < 0)
        usage("--port is required");
    if (first + count > MAX_ADDRESSES)
        usage("--first + --count goes past 127.0.254.250");

    signal(SIGPIPE, SIG_IGN); /* a peer gone mid-write is an error code, not a signal */
    response_keep_len = build_response(response_keep, sizeof(response_keep), "keep-alive");
    response_close_len = build_response(response_close, sizeof(response_close), "close");
    return serve(port, first, count, delay);
}
