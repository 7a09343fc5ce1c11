/*
 * conn.c: TCP client connections.
 *
 * Closing: a connection owns three handles (tcp, timer, an idle for reports from the loop),
 * registered with its hv_handles_t; hv_conn_close() closes them and the memory goes in the
 * last close callback.
 * A connect attempt that fails with more addresses to try closes the tcp handle with
 * on_tcp_retry_close, which opens a new one, unless the connection was closed meanwhile:
 * then it counts as the tcp handle's final close.
 * Pending connect and write requests complete with UV_ECANCELED before the close callbacks
 * and touch nothing but their own memory.
 */
#include "harvestd/conn.h"

#include <arpa/inet.h>
#include <inttypes.h>
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
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
static void tls_progress(hv_conn_t *c);
static void on_write_cb(uv_write_t *req, int status);

static void set_state(hv_conn_t *c, hv_conn_state_t st)
{
    HV_LOG(HV_LOG_DEBUG, "event=conn_state conn=%" PRIu64 " from=%s to=%s", c->id,
           state_names[c->state], state_names[st]);
    c->state = st;
}

static void on_closed(hv_handles_t *hs)
{
    hv_conn_t *c = hv_container_of(hs, hv_conn_t, _handles);
    hv_tls_free(c->_tls);
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

static const struct sockaddr *current_addr(const hv_conn_t *c)
{
    if (c->_is_literal)
        return c->_addr_idx == 0 ? (const struct sockaddr *)&c->_literal : NULL;
    return hv_dns_entry_addr(c->_dns_entry, c->_addr_idx);
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

/* Connect to the current address, moving past addresses that the guard refuses or that fail
 * synchronously. Returns 0 when a connect is under way, else out_of_addresses(). The guard
 * sees the very address handed to the kernel: nothing is connected that it did not allow. */
static int try_connect(hv_conn_t *c)
{
    const struct sockaddr *sa;

    for (; (sa = current_addr(c)) != NULL; c->_addr_idx++) {
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
        c->_connect_req.data = c;
        if (c->_tried++ == 0)
            c->_env->stats->opened++;
        c->_last_err = uv_tcp_connect(&c->_connect_req, &c->_tcp, (struct sockaddr *)&ss,
                                      on_connected);
        if (c->_last_err == 0)
            return 0;
    }
    return out_of_addresses(c);
}

static void fail_connect(hv_conn_t *c, int status)
{
    release_dns(c);
    c->cbs->on_connect(c, status);
}

static void on_connected(uv_connect_t *req, int status)
{
    hv_conn_t *c = req->data;
    if (status == UV_ECANCELED || c->state == HV_CONN_CLOSING)
        return;
    if (status != 0) {
        HV_LOG(HV_LOG_DEBUG, "event=connect_failed conn=%" PRIu64 " addr_idx=%u err=%s", c->id,
               c->_addr_idx, uv_err_name(status));
        c->_last_err = status;
        c->_addr_idx++;
        if (current_addr(c) != NULL) {
            /* A handle whose connect failed cannot connect again: replace it. */
            uv_close((uv_handle_t *)&c->_tcp, on_tcp_retry_close);
            return;
        }
        fail_connect(c, status);
        return;
    }
    release_dns(c);
    uv_tcp_nodelay(&c->_tcp, 1);
    if (c->_tls_ctx == NULL) {
        set_state(c, HV_CONN_OPEN);
        c->cbs->on_connect(c, 0);
        return;
    }
    char key[300];
    snprintf(key, sizeof(key), "%s:%u", c->_host, (unsigned)c->_port);
    c->_tls = hv_tls_new(c->_tls_ctx, c->_host, c->_is_literal, key);
    set_state(c, HV_CONN_HANDSHAKING);
    c->_reading = 0;
    if (uv_read_start((uv_stream_t *)&c->_tcp, on_alloc, on_read) == 0)
        c->_reading = 1;
    tls_progress(c); /* sends the ClientHello */
}

static void on_tcp_retry_close(uv_handle_t *h)
{
    hv_conn_t *c = h->data;
    if (c->state == HV_CONN_CLOSING) {
        hv_handles_closed(&c->_handles);
        return;
    }
    uv_tcp_init(c->_env->loop, &c->_tcp);
    c->_tcp.data = c;
    int rc = try_connect(c);
    if (rc != 0)
        fail_connect(c, rc);
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
    int rc = try_connect(c);
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
    if (c->state == HV_CONN_OPEN && c->_reading)
        tls_progress(c);
}

int hv_conn_connect(hv_conn_env_t *env, hv_tls_ctx_t *tls, const char *host, int host_is_ip,
                    uint16_t port, const hv_conn_cbs_t *cbs, void *data, hv_conn_t **out)
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
    c->_tls_ctx = tls;
    uv_tcp_init(loop, &c->_tcp);
    uv_timer_init(loop, &c->_timer);
    uv_idle_init(loop, &c->_later);
    c->_tcp.data = c;
    c->_timer.data = c;
    c->_later.data = c;
    hv_handles_init(&c->_handles, on_closed);
    hv_handles_own(&c->_handles, (uv_handle_t *)&c->_tcp);
    hv_handles_own(&c->_handles, (uv_handle_t *)&c->_timer);
    hv_handles_own(&c->_handles, (uv_handle_t *)&c->_later);

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
    rc = try_connect(c);
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

/* One read buffer for every connection: what on_read receives (or TLS decrypts) is consumed
 * before the callback returns, and deliveries never nest (a paused TLS connection's buffered
 * records are delivered from its idle handle, not from inside another callback). Per
 * connection, 64 KiB each came to 2 MiB of touched memory at 32 connections and more at
 * 1,000. Connections live on the loop thread only. */
static char read_buf[HV_CONN_READ_BUF];

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    hv_conn_t *c = h->data;
    (void)suggested;
    if (c->_tls != NULL) {
        /* Ciphertext goes straight into the session's inbound buffer. */
        size_t len;
        hv_tls_in_space(c->_tls, &buf->base, &len);
        buf->len = len;
        return;
    }
    buf->base = read_buf;
    buf->len = sizeof(read_buf);
}

/* Write a copy of [data, data+len): the copy belongs to the write request until on_write_cb. */
static int write_copy(hv_conn_t *c, const char *data, size_t len)
{
    write_req_t *wr = hv_xmalloc(sizeof(*wr) + len);
    memcpy(wr->data, data, len);
    wr->conn = c;
    wr->buf = uv_buf_init(wr->data, (unsigned)len);
    int rc = uv_write(&wr->req, (uv_stream_t *)&c->_tcp, &wr->buf, 1, on_write_cb);
    if (rc != 0)
        free(wr);
    return rc;
}

/* Send whatever mbedtls produced during the last call. */
static int tls_flush(hv_conn_t *c)
{
    const char *data;
    size_t len;
    hv_tls_out(c->_tls, &data, &len);
    if (len == 0)
        return 0;
    int rc = write_copy(c, data, len);
    hv_tls_out_clear(c->_tls);
    return rc;
}

static void tls_failed(hv_conn_t *c, int err)
{
    c->_error = *hv_tls_fault(c->_tls);
    hv_conn_read_stop(c);
    if (c->state == HV_CONN_HANDSHAKING)
        c->cbs->on_connect(c, err);
    else
        c->cbs->on_error(c, err);
}

/* Move the TLS session forward with what is buffered: finish the handshake, then decrypt
 * and deliver records for as long as the owner keeps reading on. */
static void tls_progress(hv_conn_t *c)
{
    if (c->state == HV_CONN_HANDSHAKING) {
        int rc = hv_tls_handshake(c->_tls);
        int wrc = tls_flush(c);
        if (rc < 0) {
            tls_failed(c, rc);
            return;
        }
        if (wrc != 0) {
            hv_fault_set(&c->_error, HV_D_TLS_WRITE_FAILED, NULL);
            hv_conn_read_stop(c);
            c->cbs->on_connect(c, wrc);
            return;
        }
        if (rc == 1)
            return;
        set_state(c, HV_CONN_OPEN);
        /* The owner decides whether to read: stop until it asks. */
        hv_conn_read_stop(c);
        c->cbs->on_connect(c, 0);
        return;
    }
    while (c->state == HV_CONN_OPEN && c->_reading) {
        ssize_t n = hv_tls_read(c->_tls, read_buf, sizeof(read_buf));
        tls_flush(c);
        if (n == 0)
            return;
        if (n < 0) {
            if (n == UV_EOF) {
                hv_conn_read_stop(c);
                c->cbs->on_error(c, UV_EOF);
            } else {
                tls_failed(c, (int)n);
            }
            return;
        }
        c->cbs->on_read(c, read_buf, (size_t)n);
    }
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    hv_conn_t *c = s->data;
    (void)buf;
    if (nread == 0 || c->state == HV_CONN_CLOSING)
        return; /* EAGAIN, or bytes nobody wants any more */
    /* UV_ENOBUFS (a full TLS inbound buffer) cannot happen while every read is decrypted at
     * once and reads stop when decryption pauses; should it, it is reported as an error
     * below rather than left to stall the connection. */
    if (nread < 0) {
        hv_conn_read_stop(c);
        if (c->state == HV_CONN_HANDSHAKING) {
            hv_tls_count_failure(c->_tls);
            hv_fault_set(&c->_error,
                         nread == UV_EOF ? HV_D_TLS_CLOSED_DURING_HANDSHAKE
                                         : HV_D_TLS_RESET_DURING_HANDSHAKE,
                         NULL);
            c->cbs->on_connect(c, HV_ETLS);
            return;
        }
        c->cbs->on_error(c, (int)nread);
        return;
    }
    if (c->_tls != NULL) {
        hv_tls_in_commit(c->_tls, (size_t)nread);
        tls_progress(c);
        return;
    }
    c->cbs->on_read(c, read_buf, (size_t)nread);
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

/* Plaintext encrypted per flush of the outbound buffer: a few records. */
#define TLS_WRITE_SLICE (64 * 1024)

int hv_conn_write(hv_conn_t *c, const char *data, size_t len)
{
    if (c->state != HV_CONN_OPEN)
        return UV_ENOTCONN;
    if (c->_tls == NULL)
        return write_copy(c, data, len);
    /* A slice at a time, each flushed before the next: the session's outbound buffer is
     * bounded (tls.c), and a write may be larger than it (a Redis command of a megabyte). */
    do {
        size_t n = HV_MIN(len, (size_t)TLS_WRITE_SLICE);
        int rc = hv_tls_write(c->_tls, data, n);
        if (rc != 0) {
            c->_error = *hv_tls_fault(c->_tls);
            return rc;
        }
        rc = tls_flush(c);
        if (rc != 0)
            return rc;
        data += n;
        len -= n;
    } while (len > 0);
    return 0;
}

void hv_conn_read_start(hv_conn_t *c)
{
    if (c->state != HV_CONN_OPEN || c->_reading)
        return;
    if (uv_read_start((uv_stream_t *)&c->_tcp, on_alloc, on_read) == 0)
        c->_reading = 1;
    /* Records decrypted or received while paused produce no socket event: deliver them
     * from the loop (not from inside this call, which an owner may make mid-callback). */
    if (c->_reading && c->_tls != NULL && hv_tls_has_buffered(c->_tls))
        uv_idle_start(&c->_later, on_later);
}

void hv_conn_read_stop(hv_conn_t *c)
{
    if (c->_deferred == 0)
        uv_idle_stop(&c->_later);
    if (!c->_reading)
        return;
    uv_read_stop((uv_stream_t *)&c->_tcp);
    c->_reading = 0;
}

void hv_conn_set_owner(hv_conn_t *c, const hv_conn_cbs_t *cbs, void *data)
{
    c->cbs = cbs;
    c->data = data;
}

const hv_fault_t *hv_conn_error(const hv_conn_t *c)
{
    return &c->_error;
}

int hv_conn_is_tls(const hv_conn_t *c)
{
    return c->_tls_ctx != NULL;
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
    hv_conn_read_stop(c);
    uv_timer_stop(&c->_timer);
    hv_handles_close_all(&c->_handles); /* a tcp handle closing to retry is left to that */
}
