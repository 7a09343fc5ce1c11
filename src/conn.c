/*
 * conn.c: TCP client connections, and the chain of layers above them (conn.h).
 *
 * Closing: a connection owns five handles (two tcp handles that race for Happy Eyeballs, the
 * timer, the Happy Eyeballs delay, an idle for reports from the loop), registered with its
 * hv_handles_t; hv_conn_close() closes them and the memory goes in the last close callback.
 * A connect attempt that fails with more addresses to try closes the tcp handle with
 * on_tcp_retry_close, which opens a new one, unless the connection was closed meanwhile:
 * then it counts as the tcp handle's final close.
 * Pending connect and write requests complete with UV_ECANCELED before the close callbacks
 * and touch nothing but their own memory and the connection's fields (still there: it goes
 * only after its tcp handles' close callbacks).
 */
#include "harvestd/conn.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>

#include "harvestd/common.h"
#include "harvestd/log.h"

typedef struct {
    uv_write_t req;
    hv_conn_t *conn;
    uv_buf_t buf;
    char data[];
} write_req_t;

static uint64_t next_conn_id = 1;

static const char *const state_names[] = {"resolving", "connecting", "handshaking", "open",
                                         "closing"};

static void on_connected(uv_connect_t *req, int status);
static void on_tcp_retry_close(uv_handle_t *h);
static void on_tcp_retired(uv_handle_t *h);
static void on_he_timer(uv_timer_t *t);
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

/* Read the socket exactly when someone wants its bytes (the owner, or the conn for an
 * opening layer: `_reading`) and no layer holds it (`_held`). */
static void sock_sync(hv_conn_t *c)
{
    int want = c->_reading && !c->_held && c->_sock != NULL &&
               (c->state == HV_CONN_HANDSHAKING || c->state == HV_CONN_OPEN);
    if (want && !c->_sock_on) {
        if (uv_read_start((uv_stream_t *)c->_sock, on_alloc, on_read) == 0)
            c->_sock_on = 1;
    } else if (!want && c->_sock_on) {
        uv_read_stop((uv_stream_t *)c->_sock);
        c->_sock_on = 0;
    }
}
static void on_write_cb(uv_write_t *req, int status);
static void open_layer(hv_conn_t *c, hv_cf_t *cf);
static void quickack(hv_conn_t *c);

static void set_state(hv_conn_t *c, hv_conn_state_t st)
{
    HV_LOG(HV_LOG_DEBUG, "event=conn_state conn=%" PRIu64 " from=%s to=%s", c->id,
           state_names[c->state], state_names[st]);
    c->state = st;
}

static void on_closed(hv_handles_t *hs)
{
    hv_conn_t *c = hv_container_of(hs, hv_conn_t, _handles);
    hv_cf_t *cf = c->_bottom;
    while (cf != NULL) {
        hv_cf_t *above = cf->above;
        cf->type->destroy(cf);
        cf = above;
    }
    free(c->_host);
    free(c);
}

static void release_dns(hv_conn_t *c)
{
    hv_dns_cancel(&c->_dns_waiter);
    if (c->_dns_entry != NULL) {
        hv_dns_unref(c->_dns_entry);
        c->_dns_entry = NULL;
    }
}

static void on_timer(uv_timer_t *t)
{
    hv_conn_t *c = t->data;
    if (c->state != HV_CONN_CLOSING)
        c->cbs->on_timeout(c);
}

static const struct sockaddr *addr_at(const hv_conn_t *c, unsigned idx)
{
    if (c->_is_literal)
        return idx == 0 ? (const struct sockaddr *)&c->_literal : NULL;
    return hv_dns_entry_addr(c->_dns_entry, idx);
}

/* The order the addresses are tried in (RFC 8305 4): the families alternate, starting with
 * the family of the first address the lookup gave. */
static void plan_addresses(hv_conn_t *c)
{
    unsigned fam_a[HV_CONN_ADDRS_MAX], fam_b[HV_CONN_ADDRS_MAX], na = 0, nb = 0;
    const struct sockaddr *first = addr_at(c, 0), *sa;
    for (unsigned i = 0; i < HV_CONN_ADDRS_MAX && (sa = addr_at(c, i)) != NULL; i++) {
        if (sa->sa_family == first->sa_family)
            fam_a[na++] = i;
        else
            fam_b[nb++] = i;
    }
    c->_norder = 0;
    c->_next = 0;
    for (unsigned i = 0; i < na || i < nb; i++) {
        if (i < na)
            c->_order[c->_norder++] = fam_a[i];
        if (i < nb)
            c->_order[c->_norder++] = fam_b[i];
    }
}

/* Why no connect is under way once the addresses ran out: the last tried address's error,
 * or, when the guard refused every address, HV_EBLOCKED with the first refusal's class. */
static int out_of_addresses(hv_conn_t *c)
{
    if (c->_tried > 0 || c->_blocked == HV_ADDR_PUBLIC)
        return c->_last_err != 0 ? c->_last_err : UV_EADDRNOTAVAIL;
    hv_fault_set(&c->_error, hv_addr_class_detail(c->_blocked), NULL);
    return HV_EBLOCKED;
}

static void log_blocked(const hv_conn_t *c, const struct sockaddr *sa, hv_addr_class_t cls)
{
    char addr[INET6_ADDRSTRLEN] = "?";
    const void *raw = sa->sa_family == AF_INET6
                          ? (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr
                          : (const void *)&((const struct sockaddr_in *)sa)->sin_addr;
    inet_ntop(sa->sa_family, raw, addr, sizeof(addr));
    HV_LOG(HV_LOG_INFO, "event=address_blocked conn=%" PRIu64 " host=%s addr=%s class=%s", c->id,
           c->_host, addr, hv_addr_class_name(cls));
}

static int racing(const hv_conn_t *c)
{
    return c->_busy[0] || c->_busy[1];
}

/* Start a connect on racer `slot` to the next address in the plan, moving past addresses
 * that the guard refuses or that fail synchronously. Returns 0 when a connect is under way,
 * else out_of_addresses(). The guard sees the very address handed to the kernel: nothing is
 * connected that it did not allow. */
static int start_attempt(hv_conn_t *c, unsigned slot)
{
    while (c->_next < c->_norder) {
        const struct sockaddr *sa = addr_at(c, c->_order[c->_next++]);
        hv_addr_class_t cls = hv_guard_check(c->_env->guard, sa);
        if (cls != HV_ADDR_PUBLIC) {
            c->_env->stats->blocked[cls]++;
            log_blocked(c, sa, cls);
            if (c->_blocked == HV_ADDR_PUBLIC)
                c->_blocked = cls;
            continue;
        }
        struct sockaddr_storage ss;
        size_t salen = sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                 : sizeof(struct sockaddr_in);
        memset(&ss, 0, sizeof(ss));
        memcpy(&ss, sa, salen);
        if (ss.ss_family == AF_INET6)
            ((struct sockaddr_in6 *)&ss)->sin6_port = htons(c->_port);
        else
            ((struct sockaddr_in *)&ss)->sin_port = htons(c->_port);
        c->_reqs[slot].data = c;
        if (c->_tried++ == 0)
            c->_env->stats->opened++;
        c->_last_err = uv_tcp_connect(&c->_reqs[slot], &c->_tcps[slot], (struct sockaddr *)&ss,
                                      on_connected);
        if (c->_last_err == 0) {
            c->_busy[slot] = 1;
            /* RFC 8305 5: the next attempt starts if this one has not succeeded within the
             * delay, not only once it failed. */
            if (c->_next < c->_norder)
                uv_timer_start(&c->_he, on_he_timer, HV_CONN_ATTEMPT_DELAY_MS, 0);
            return 0;
        }
    }
    return out_of_addresses(c);
}

static void fail_connect(hv_conn_t *c, int status)
{
    uv_timer_stop(&c->_he);
    release_dns(c);
    c->cbs->on_connect(c, status);
}

/* The racer that is not connecting (and not closing to be replaced), or -1. */
static int idle_racer(const hv_conn_t *c)
{
    for (int i = 0; i < 2; i++)
        if (!c->_busy[i] && !c->_replacing[i])
            return i;
    return -1;
}

static void on_he_timer(uv_timer_t *t)
{
    hv_conn_t *c = t->data;
    int slot = idle_racer(c);
    if (c->state != HV_CONN_CONNECTING || slot < 0 || c->_next >= c->_norder)
        return;
    HV_LOG(HV_LOG_DEBUG, "event=connect_race conn=%" PRIu64 " next=%u", c->id, c->_next);
    int rc = start_attempt(c, (unsigned)slot);
    if (rc != 0 && !racing(c) && !c->_replacing[0] && !c->_replacing[1])
        fail_connect(c, rc);
}

static void on_connected(uv_connect_t *req, int status)
{
    hv_conn_t *c = req->data;
    unsigned slot = (unsigned)(req - c->_reqs);
    c->_busy[slot] = 0;
    if (status == UV_ECANCELED || c->state != HV_CONN_CONNECTING)
        return;
    if (status != 0) {
        HV_LOG(HV_LOG_DEBUG, "event=connect_failed conn=%" PRIu64 " slot=%u err=%s", c->id,
               slot, uv_err_name(status));
        c->_last_err = status;
        if (c->_next < c->_norder) {
            /* A handle whose connect failed cannot connect again: replace it, and try the
             * next address at once (RFC 8305 5: a failure does not wait for the delay). */
            c->_replacing[slot] = 1;
            uv_close((uv_handle_t *)&c->_tcps[slot], on_tcp_retry_close);
            return;
        }
        if (!racing(c) && !c->_replacing[0] && !c->_replacing[1])
            fail_connect(c, status);
        return;
    }
    /* The first to connect wins; the other attempt, if any, is dropped. */
    uv_timer_stop(&c->_he);
    c->_sock = &c->_tcps[slot];
    unsigned other = 1 - slot;
    if (c->_busy[other]) {
        c->_busy[other] = 0;
        c->_replacing[other] = 1;
        uv_close((uv_handle_t *)&c->_tcps[other], on_tcp_retired);
    }
    release_dns(c);
    uv_tcp_nodelay(c->_sock, 1);
    if (c->_bottom == NULL) {
        set_state(c, HV_CONN_OPEN);
        c->cbs->on_connect(c, 0);
        return;
    }
    set_state(c, HV_CONN_HANDSHAKING);
    c->_reading = 1;
    sock_sync(c);
    open_layer(c, c->_bottom);
}

/* A racer's handle that the connection closed itself has closed: it is opened again, idle,
 * and its slot returned; -1 when the connection is closing meanwhile (then this close counts
 * as the handle's last, and the connection may be gone). */
static int racer_reopened(uv_handle_t *h)
{
    hv_conn_t *c = h->data;
    int slot = (int)((uv_tcp_t *)h - c->_tcps);
    c->_replacing[slot] = 0;
    if (c->state == HV_CONN_CLOSING) {
        hv_handles_closed(&c->_handles);
        return -1;
    }
    uv_tcp_init(c->_env->loop, &c->_tcps[slot]);
    c->_tcps[slot].data = c;
    return slot;
}

/* A racer closed to be replaced: try the next address on it. */
static void on_tcp_retry_close(uv_handle_t *h)
{
    hv_conn_t *c = h->data;
    int slot = racer_reopened(h);
    if (slot < 0 || c->state != HV_CONN_CONNECTING)
        return;
    int rc = start_attempt(c, (unsigned)slot);
    if (rc != 0 && !racing(c))
        fail_connect(c, rc);
}

/* The racer that lost: idle until the connection closes. */
static void on_tcp_retired(uv_handle_t *h)
{
    (void)racer_reopened(h);
}

static void on_dns(hv_dns_waiter_t *w, hv_dns_entry_t *e, int status)
{
    hv_conn_t *c = hv_container_of(w, hv_conn_t, _dns_waiter);
    if (status != 0) {
        fail_connect(c, status);
        return;
    }
    c->_dns_entry = e;
    set_state(c, HV_CONN_CONNECTING);
    plan_addresses(c);
    int rc = start_attempt(c, 0);
    if (rc != 0)
        fail_connect(c, rc);
}

static void on_later(uv_idle_t *h)
{
    hv_conn_t *c = h->data;
    uv_idle_stop(h);
    if (c->_deferred != 0) {
        int status = c->_deferred;
        c->_deferred = 0;
        if (c->state == HV_CONN_CONNECTING)
            fail_connect(c, status);
        return;
    }
    for (hv_cf_t *cf = c->_bottom; cf != NULL && c->state == HV_CONN_OPEN && c->_reading;
         cf = cf->above)
        if (cf->type->pump != NULL && cf->type->buffered != NULL && cf->type->buffered(cf))
            cf->type->pump(cf);
}

int hv_conn_connect(hv_conn_env_t *env, const hv_conn_layer_t *layers, unsigned nlayers,
                    const char *host, int host_is_ip, uint16_t port, const hv_conn_cbs_t *cbs,
                    void *data, hv_conn_t **out)
{
    uv_loop_t *loop = env->loop;
    hv_conn_t *c = hv_xcalloc(1, sizeof(*c));
    int rc = 0;

    *out = NULL;
    c->id = next_conn_id++;
    c->state = HV_CONN_RESOLVING;
    c->cbs = cbs;
    c->data = data;
    c->_env = env;
    c->_port = port;
    c->_host = hv_xstrdup(host);
    c->_dns_waiter.cb = on_dns;
    hv_handles_init(&c->_handles, on_closed);
    for (int i = 0; i < 2; i++) {
        uv_tcp_init(loop, &c->_tcps[i]);
        c->_tcps[i].data = c;
        hv_handles_own(&c->_handles, (uv_handle_t *)&c->_tcps[i]);
    }
    c->_sock = &c->_tcps[0];
    uv_timer_init(loop, &c->_timer);
    uv_timer_init(loop, &c->_he);
    uv_idle_init(loop, &c->_later);
    c->_timer.data = c;
    c->_he.data = c;
    c->_later.data = c;
    hv_handles_own(&c->_handles, (uv_handle_t *)&c->_timer);
    hv_handles_own(&c->_handles, (uv_handle_t *)&c->_he);
    hv_handles_own(&c->_handles, (uv_handle_t *)&c->_later);

    if (nlayers > HV_CONN_LAYERS_MAX) {
        rc = UV_EINVAL;
        goto fail;
    }
    for (unsigned i = 0; i < nlayers; i++) {
        hv_cf_t *cf = layers[i].type->create(c, layers[i].arg);
        if (cf == NULL) {
            rc = UV_ENOMEM;
            goto fail;
        }
        cf->type = layers[i].type;
        cf->conn = c;
        cf->below = c->_top;
        cf->above = NULL;
        cf->passthrough = 0;
        if (c->_top != NULL)
            c->_top->above = cf;
        else
            c->_bottom = cf;
        c->_top = cf;
    }

    if (host_is_ip) {
        if (uv_ip4_addr(host, port, (struct sockaddr_in *)&c->_literal) == 0 ||
            uv_ip6_addr(host, port, (struct sockaddr_in6 *)&c->_literal) == 0)
            c->_is_literal = 1;
    }
    if (!c->_is_literal) {
        rc = hv_dns_lookup(env->dns, host, &c->_dns_waiter, &c->_dns_entry);
        if (rc == 0) {
            *out = c; /* on_dns continues */
            return 0;
        }
        if (rc < 0)
            goto fail;
    }
    set_state(c, HV_CONN_CONNECTING);
    plan_addresses(c);
    rc = start_attempt(c, 0);
    if (rc == HV_EBLOCKED) {
        /* Reported like any connect failure, from the loop, with its detail. */
        c->_deferred = rc;
        uv_idle_start(&c->_later, on_later);
        rc = 0;
    }
    if (rc != 0)
        goto fail;
    *out = c;
    return 0;

fail:
    release_dns(c);
    hv_conn_close(c);
    return rc;
}

/* One read buffer for every connection: what on_read receives is consumed before the
 * callback returns, and deliveries never nest (a layer's buffered data is delivered from the
 * connection's idle handle, not from inside another callback). Per connection, 64 KiB each
 * came to 2 MiB of touched memory at 32 connections and more at 1,000. Connections live on
 * the loop thread only. */
static char read_buf[HV_CONN_READ_BUF];

/* The layer the socket's bytes are for: the lowest that is not a pass-through (NULL: the
 * owner). */
static hv_cf_t *consumer(const hv_conn_t *c)
{
    hv_cf_t *cf = c->_bottom;
    while (cf != NULL && cf->passthrough)
        cf = cf->above;
    return cf;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    hv_conn_t *c = h->data;
    hv_cf_t *cf = consumer(c);
    (void)suggested;
    if (cf != NULL && cf->type->in_space != NULL) {
        size_t len;
        cf->type->in_space(cf, &buf->base, &len);
        buf->len = len;
        return;
    }
    if (cf == NULL && c->_space != NULL && c->state == HV_CONN_OPEN) {
        size_t len = 0;
        if (c->_space(c, &buf->base, &len) && len > 0) {
            buf->len = len;
            return;
        }
    }
    buf->base = read_buf;
    buf->len = sizeof(read_buf);
}

/* Write [data, data+len): at once when the socket takes it all, else a copy of what is left,
 * which belongs to a write request until on_write_cb. The direct attempt is not only a saved
 * allocation: a completed uv_write_t makes libuv drop its POLLOUT interest on a socket it also
 * reads, which costs an epoll_ctl per request on a keep-alive connection. An error of the
 * attempt is left to the request to meet again and report as before (asynchronously). */
static int write_copy(hv_conn_t *c, const char *data, size_t len)
{
    uv_buf_t now = uv_buf_init((char *)(uintptr_t)data, (unsigned)len);
    int n = uv_try_write((uv_stream_t *)c->_sock, &now, 1);
    if (n > 0) {
        if ((size_t)n == len)
            return 0;
        data += n;
        len -= (size_t)n;
    }
    write_req_t *wr = hv_xmalloc(sizeof(*wr) + len);
    memcpy(wr->data, data, len);
    wr->conn = c;
    wr->buf = uv_buf_init(wr->data, (unsigned)len);
    int rc = uv_write(&wr->req, (uv_stream_t *)c->_sock, &wr->buf, 1, on_write_cb);
    if (rc != 0)
        free(wr);
    return rc;
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    hv_conn_t *c = s->data;
    if (nread == 0 || c->state == HV_CONN_CLOSING)
        return; /* EAGAIN, or bytes nobody wants any more */
    hv_cf_t *cf = consumer(c);
    if (c->_quickack && nread > 0)
        quickack(c);
    /* UV_ENOBUFS (a layer's full inbound buffer) cannot happen while every read is consumed
     * at once and reads stop when a layer pauses; should it, it is reported as an error below
     * rather than left to stall the connection. */
    if (nread < 0) {
        hv_conn_read_stop(c);
        if (c->state == HV_CONN_HANDSHAKING) {
            int err = (int)nread;
            if (cf != NULL && cf->type->ended != NULL)
                err = cf->type->ended(cf, err);
            c->cbs->on_connect(c, err);
            return;
        }
        c->cbs->on_error(c, (int)nread);
        return;
    }
    if (cf == NULL)
        c->cbs->on_read(c, buf->base, (size_t)nread);
    else if (cf->type->in_space != NULL)
        cf->type->in_commit(cf, (size_t)nread);
    else
        cf->type->recv(cf, read_buf, (size_t)nread);
}

static void on_write_cb(uv_write_t *req, int status)
{
    write_req_t *wr = hv_container_of(req, write_req_t, req);
    hv_conn_t *c = wr->conn;
    free(wr);
    if (status == 0 || status == UV_ECANCELED || c->state == HV_CONN_CLOSING)
        return;
    c->cbs->on_error(c, status);
}

int hv_conn_write(hv_conn_t *c, const char *data, size_t len)
{
    if (c->state != HV_CONN_OPEN)
        return UV_ENOTCONN;
    if (c->_top == NULL)
        return write_copy(c, data, len);
    return c->_top->type->send(c->_top, data, len);
}

void hv_conn_read_start(hv_conn_t *c)
{
    if (c->state != HV_CONN_OPEN || c->_reading)
        return;
    c->_reading = 1;
    sock_sync(c);
    /* Data a layer holds while paused produces no socket event: deliver it from the loop
     * (not from inside this call, which an owner may make mid-callback). */
    for (hv_cf_t *cf = c->_bottom; c->_reading && cf != NULL; cf = cf->above)
        if (cf->type->buffered != NULL && cf->type->buffered(cf))
            uv_idle_start(&c->_later, on_later);
}

void hv_conn_read_stop(hv_conn_t *c)
{
    if (c->_deferred == 0)
        uv_idle_stop(&c->_later);
    if (!c->_reading)
        return;
    c->_reading = 0;
    sock_sync(c);
}

void hv_conn_set_owner(hv_conn_t *c, const hv_conn_cbs_t *cbs, void *data)
{
    c->cbs = cbs;
    c->data = data;
    c->_space = NULL;
}

void hv_conn_set_space(hv_conn_t *c, hv_conn_space_cb space)
{
    c->_space = space;
}

const hv_fault_t *hv_conn_error(const hv_conn_t *c)
{
    return &c->_error;
}

const hv_cf_type_t *hv_conn_opening(const hv_conn_t *c)
{
    if (c->state != HV_CONN_HANDSHAKING)
        return NULL;
    const hv_cf_t *cf = consumer(c);
    return cf != NULL ? cf->type : NULL;
}

const hv_cf_t *hv_conn_layer(const hv_conn_t *c, const hv_cf_type_t *type)
{
    for (const hv_cf_t *cf = c->_bottom; cf != NULL; cf = cf->above)
        if (cf->type == type)
            return cf;
    return NULL;
}

int hv_conn_has_layer(const hv_conn_t *c, const hv_cf_type_t *type)
{
    return hv_conn_layer(c, type) != NULL;
}

void hv_conn_set_timer(hv_conn_t *c, uint64_t ms)
{
    if (c->state == HV_CONN_CLOSING)
        return;
    if (ms == 0)
        uv_timer_stop(&c->_timer);
    else
        uv_timer_start(&c->_timer, on_timer, ms, 0);
}

void hv_conn_close(hv_conn_t *c)
{
    if (c->state == HV_CONN_CLOSING)
        return;
    set_state(c, HV_CONN_CLOSING);
    release_dns(c);
    for (hv_cf_t *cf = c->_bottom; cf != NULL; cf = cf->above)
        if (cf->type->close != NULL)
            cf->type->close(cf);
    hv_conn_read_stop(c);
    uv_timer_stop(&c->_timer);
    hv_handles_close_all(&c->_handles); /* a tcp handle closing to retry is left to that */
}

/* ---- layers ---- */

static void open_layer(hv_conn_t *c, hv_cf_t *cf)
{
    HV_LOG(HV_LOG_DEBUG, "event=conn_layer_open conn=%" PRIu64 " layer=%s", c->id,
           cf->type->name);
    cf->type->open(cf);
}

int hv_cf_down(hv_cf_t *cf, const char *data, size_t len)
{
    hv_cf_t *below = cf->below;
    while (below != NULL && below->passthrough)
        below = below->below;
    if (below == NULL)
        return write_copy(cf->conn, data, len);
    return below->type->send(below, data, len);
}

void hv_cf_up(hv_cf_t *cf, const char *data, size_t len)
{
    hv_conn_t *c = cf->conn;
    if (len == 0 || c->state == HV_CONN_CLOSING)
        return;
    if (cf->above != NULL) {
        cf->above->type->recv(cf->above, data, len);
        return;
    }
    if (c->state == HV_CONN_OPEN)
        c->cbs->on_read(c, data, len);
}

int hv_cf_up_space(hv_cf_t *cf, char **base, size_t *len)
{
    hv_conn_t *c = cf->conn;
    *len = 0;
    if (cf->above != NULL || c->_space == NULL || c->state != HV_CONN_OPEN)
        return 0;
    return c->_space(c, base, len) && *len > 0;
}

void hv_cf_opened(hv_cf_t *cf)
{
    hv_conn_t *c = cf->conn;
    if (c->state != HV_CONN_HANDSHAKING)
        return;
    if (cf->above != NULL) {
        open_layer(c, cf->above);
        return;
    }
    set_state(c, HV_CONN_OPEN);
    /* The owner decides whether to read: stop until it asks. */
    hv_conn_read_stop(c);
    c->cbs->on_connect(c, 0);
}

void hv_cf_fail(hv_cf_t *cf, int err)
{
    hv_conn_t *c = cf->conn;
    if (c->state == HV_CONN_CLOSING)
        return;
    hv_conn_read_stop(c);
    if (c->state == HV_CONN_HANDSHAKING)
        c->cbs->on_connect(c, err);
    else
        c->cbs->on_error(c, err);
}

void hv_cf_set_fault(hv_cf_t *cf, const hv_fault_t *fault)
{
    cf->conn->_error = *fault;
}

void hv_cf_fail_with(hv_cf_t *cf, int err, hv_detail_t code, const char *arg)
{
    hv_fault_t f;
    hv_fault_set(&f, code, arg);
    hv_cf_set_fault(cf, &f);
    hv_cf_fail(cf, err);
}

void hv_cf_hold(hv_cf_t *cf, int hold)
{
    hv_conn_t *c = cf->conn;
    if (c->state != HV_CONN_HANDSHAKING && c->state != HV_CONN_OPEN)
        return;
    c->_held = hold;
    sock_sync(c);
}

int hv_cf_reading(const hv_cf_t *cf)
{
    return cf->conn->_reading;
}

int hv_cf_conn_open(const hv_cf_t *cf)
{
    return cf->conn->state == HV_CONN_OPEN;
}

/* Linux turns quick ACKs off again on its own after a while: they are asked for anew after
 * every read. */
static void quickack(hv_conn_t *c)
{
#ifdef TCP_QUICKACK
    uv_os_fd_t fd;
    int on = 1;
    if (uv_fileno((uv_handle_t *)c->_sock, &fd) == 0)
        (void)setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &on, sizeof(on));
#else
    (void)c;
#endif
}

void hv_cf_quickack(hv_cf_t *cf)
{
    cf->conn->_quickack = 1;
    quickack(cf->conn);
}

int hv_cf_conn_closing(const hv_cf_t *cf)
{
    return cf->conn->state == HV_CONN_CLOSING;
}

hv_conn_env_t *hv_cf_env(const hv_cf_t *cf)
{
    return cf->conn->_env;
}
