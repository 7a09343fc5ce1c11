/*
 * redis.c: a Redis connection (see redis.h).
 *
 * Handles: the tcp handle and one timer, registered with an hv_handles_t; the memory goes in
 * the last close callback, so state can be checked after any owner callback, which may have
 * closed the connection. The timer serves the connect timeout, then the deadline of the
 * oldest command waiting for its reply (replies come in order, so it is the next one due).
 */
#include "harvestd/redis.h"

#include <hiredis/read.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "harvestd/common.h"
#include "harvestd/handles.h"
#include "harvestd/log.h"

typedef enum { ST_RESOLVING, ST_CONNECTING, ST_OPEN, ST_BROKEN, ST_CLOSING } state_t;

typedef struct pending_s {
    hv_redis_reply_cb cb;
    void *data;
    uint64_t deadline;
    TAILQ_ENTRY(pending_s) link;
} pending_t;

typedef struct {
    uv_write_t req;
    char *cmd;
} write_t;

struct hv_redis_s {
    uv_loop_t *loop;
    state_t state;
    const hv_redis_cbs_t *cbs;
    void *data;
    uint16_t port;
    uv_getaddrinfo_t gai;
    int resolving;
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_connect_t connect_req;
    redisReader *reader;
    TAILQ_HEAD(, pending_s) pending;
    size_t npending;
    char buf[16 * 1024];
    hv_handles_t handles;
};

int hv_redis_url_parse(const char *url, hv_redis_addr_t *out, char *err, size_t errcap)
{
    static const char scheme[] = "redis://";
    hv_redis_addr_t a;
    memset(&a, 0, sizeof(a));
    a.port = 6379;
    if (strncmp(url, scheme, sizeof(scheme) - 1) != 0) {
        snprintf(err, errcap, "'%s' is not a redis://HOST[:PORT][/DB] URL%s", url,
                 strncmp(url, "rediss://", 9) == 0 ? " (TLS to Redis is not supported)" : "");
        return -1;
    }
    const char *p = url + sizeof(scheme) - 1;
    const char *host_end;
    if (strpbrk(p, "@?#") != NULL) {
        snprintf(err, errcap, "'%s': a user, password, query or fragment is not supported", url);
        return -1;
    }
    if (*p == '[') {
        host_end = strchr(p, ']');
        if (host_end == NULL)
            goto bad;
        p++;
    } else {
        host_end = p + strcspn(p, ":/");
    }
    size_t hlen = (size_t)(host_end - p);
    if (hlen == 0 || hlen >= sizeof(a.host))
        goto bad;
    memcpy(a.host, p, hlen);
    p = host_end + (*host_end == ']');
    if (*p == ':') {
        unsigned long port = 0;
        size_t n = 0;
        for (p++; hv_ascii_is_digit((unsigned char)*p) && n < 6; p++, n++)
            port = port * 10 + (unsigned long)(*p - '0');
        if (n == 0 || port == 0 || port > 65535)
            goto bad;
        a.port = (uint16_t)port;
    }
    if (*p == '/') {
        unsigned long db = 0;
        size_t n = 0;
        for (p++; hv_ascii_is_digit((unsigned char)*p) && n < 6; p++, n++)
            db = db * 10 + (unsigned long)(*p - '0');
        if ((n == 0 && *p != '\0') || db > 15999)
            goto bad;
        a.db = (unsigned)db;
    }
    if (*p != '\0')
        goto bad;
    *out = a;
    return 0;
bad:
    snprintf(err, errcap, "'%s' is not a redis://HOST[:PORT][/DB] URL", url);
    return -1;
}

static void on_closed(hv_handles_t *hs)
{
    hv_redis_t *r = hv_container_of(hs, hv_redis_t, handles);
    if (r->resolving)
        return; /* the lookup's callback frees it */
    redisReaderFree(r->reader);
    free(r);
}

/* Fail every pending command with `status`, oldest first. Stops if a callback closed the
 * connection (hv_redis_close() fails the rest itself). */
static void fail_pending(hv_redis_t *r, int status)
{
    pending_t *p;
    while ((p = TAILQ_FIRST(&r->pending)) != NULL) {
        TAILQ_REMOVE(&r->pending, p, link);
        r->npending--;
        hv_redis_reply_cb cb = p->cb;
        void *data = p->data;
        free(p);
        cb(r, data, status, NULL);
    }
}

static void on_timer(uv_timer_t *t);

/* The timer follows the oldest pending command, or stops. */
static void arm(hv_redis_t *r)
{
    pending_t *p = TAILQ_FIRST(&r->pending);
    if (r->state != ST_OPEN || p == NULL) {
        uv_timer_stop(&r->timer);
        return;
    }
    uint64_t now = uv_now(r->loop);
    uv_timer_start(&r->timer, on_timer, p->deadline > now ? p->deadline - now : 1, 0);
}

/* The open connection cannot go on: fail what waits, then tell the owner. */
static void broken(hv_redis_t *r, int err)
{
    if (r->state != ST_OPEN)
        return;
    HV_LOG(HV_LOG_INFO, "event=redis_broken port=%u err=%s pending=%zu", (unsigned)r->port,
           hv_err_name(err), r->npending);
    r->state = ST_BROKEN;
    uv_read_stop((uv_stream_t *)&r->tcp);
    uv_timer_stop(&r->timer);
    fail_pending(r, err);
    if (r->state == ST_BROKEN)
        r->cbs->on_error(r, err);
}

static void connect_failed(hv_redis_t *r, int status)
{
    r->state = ST_BROKEN;
    uv_timer_stop(&r->timer);
    r->cbs->on_connect(r, status);
}

static void on_timer(uv_timer_t *t)
{
    hv_redis_t *r = t->data;
    if (r->state == ST_RESOLVING || r->state == ST_CONNECTING)
        connect_failed(r, UV_ETIMEDOUT);
    else if (r->state == ST_OPEN)
        broken(r, UV_ETIMEDOUT);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    hv_redis_t *r = h->data;
    (void)suggested;
    buf->base = r->buf;
    buf->len = sizeof(r->buf);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    hv_redis_t *r = s->data;
    if (nread == 0 || r->state != ST_OPEN)
        return;
    if (nread < 0) {
        broken(r, (int)nread);
        return;
    }
    if (redisReaderFeed(r->reader, buf->base, (size_t)nread) != REDIS_OK) {
        broken(r, HV_EPROTO);
        return;
    }
    for (;;) {
        void *reply = NULL;
        if (redisReaderGetReply(r->reader, &reply) != REDIS_OK) {
            broken(r, HV_EPROTO);
            return;
        }
        if (reply == NULL)
            break;
        pending_t *p = TAILQ_FIRST(&r->pending);
        if (p == NULL) { /* a reply nobody asked for */
            freeReplyObject(reply);
            broken(r, HV_EPROTO);
            return;
        }
        TAILQ_REMOVE(&r->pending, p, link);
        r->npending--;
        p->cb(r, p->data, 0, reply);
        free(p);
        freeReplyObject(reply);
        if (r->state != ST_OPEN)
            return; /* the callback closed the connection */
    }
    arm(r);
}

static void on_connected(uv_connect_t *req, int status)
{
    hv_redis_t *r = req->data;
    if (status == UV_ECANCELED || r->state != ST_CONNECTING)
        return;
    if (status != 0) {
        connect_failed(r, status);
        return;
    }
    uv_tcp_nodelay(&r->tcp, 1);
    int rc = uv_read_start((uv_stream_t *)&r->tcp, on_alloc, on_read);
    if (rc != 0) {
        connect_failed(r, rc);
        return;
    }
    r->state = ST_OPEN;
    uv_timer_stop(&r->timer);
    r->cbs->on_connect(r, 0);
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    hv_redis_t *r = req->data;
    r->resolving = 0;
    if (r->state == ST_CLOSING) {
        uv_freeaddrinfo(res);
        if (r->handles.open == 0)
            on_closed(&r->handles); /* the handles closed while the lookup ran */
        return;
    }
    if (status != 0) {
        connect_failed(r, status);
        return;
    }
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    memcpy(&ss, res->ai_addr, res->ai_addrlen);
    uv_freeaddrinfo(res);
    if (ss.ss_family == AF_INET6)
        ((struct sockaddr_in6 *)&ss)->sin6_port = htons(r->port);
    else
        ((struct sockaddr_in *)&ss)->sin_port = htons(r->port);
    r->state = ST_CONNECTING;
    r->connect_req.data = r;
    int rc = uv_tcp_connect(&r->connect_req, &r->tcp, (struct sockaddr *)&ss, on_connected);
    if (rc != 0)
        connect_failed(r, rc);
}

int hv_redis_connect(uv_loop_t *loop, const char *host, uint16_t port, uint64_t timeout_ms,
                     const hv_redis_cbs_t *cbs, void *data, hv_redis_t **out)
{
    *out = NULL;
    hv_redis_t *r = hv_xcalloc(1, sizeof(*r));
    r->loop = loop;
    r->cbs = cbs;
    r->data = data;
    r->port = port;
    r->state = ST_RESOLVING;
    r->reader = redisReaderCreate();
    if (r->reader == NULL) {
        free(r);
        return UV_ENOMEM;
    }
    TAILQ_INIT(&r->pending);
    uv_tcp_init(loop, &r->tcp);
    uv_timer_init(loop, &r->timer);
    r->tcp.data = r;
    r->timer.data = r;
    hv_handles_init(&r->handles, on_closed);
    hv_handles_own(&r->handles, (uv_handle_t *)&r->tcp);
    hv_handles_own(&r->handles, (uv_handle_t *)&r->timer);

    struct addrinfo hints;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    r->gai.data = r;
    int rc = uv_getaddrinfo(loop, &r->gai, on_resolved, host, NULL, &hints);
    if (rc != 0) {
        hv_redis_close(r);
        return rc;
    }
    r->resolving = 1;
    uv_timer_start(&r->timer, on_timer, timeout_ms > 0 ? timeout_ms : 1, 0);
    *out = r;
    return 0;
}

static void on_written(uv_write_t *req, int status)
{
    write_t *w = hv_container_of(req, write_t, req);
    hv_redis_t *r = req->data;
    redisFreeCommand(w->cmd);
    free(w);
    if (status != 0 && status != UV_ECANCELED)
        broken(r, status);
}

int hv_redis_command(hv_redis_t *r, int argc, const char **argv, const size_t *argvlen,
                     uint64_t timeout_ms, hv_redis_reply_cb cb, void *data)
{
    if (r->state != ST_OPEN)
        return UV_ENOTCONN;
    write_t *w = hv_xmalloc(sizeof(*w));
    int len = redisFormatCommandArgv(&w->cmd, argc, argv, argvlen);
    if (len < 0) {
        free(w);
        return UV_ENOMEM;
    }
    uv_buf_t b = uv_buf_init(w->cmd, (unsigned)len);
    w->req.data = r;
    int rc = uv_write(&w->req, (uv_stream_t *)&r->tcp, &b, 1, on_written);
    if (rc != 0) {
        redisFreeCommand(w->cmd);
        free(w);
        return rc;
    }
    pending_t *p = hv_xmalloc(sizeof(*p));
    p->cb = cb;
    p->data = data;
    p->deadline = uv_now(r->loop) + timeout_ms;
    TAILQ_INSERT_TAIL(&r->pending, p, link);
    if (r->npending++ == 0)
        arm(r);
    return 0;
}

size_t hv_redis_pending(const hv_redis_t *r)
{
    return r->npending;
}

void *hv_redis_data(const hv_redis_t *r)
{
    return r->data;
}

void hv_redis_close(hv_redis_t *r)
{
    if (r->state == ST_CLOSING)
        return;
    r->state = ST_CLOSING;
    if (r->resolving)
        uv_cancel((uv_req_t *)&r->gai);
    uv_timer_stop(&r->timer);
    fail_pending(r, UV_ECANCELED);
    hv_handles_close_all(&r->handles);
}
