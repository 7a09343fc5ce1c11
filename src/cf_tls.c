/* cf_tls.c: the TLS layer of a connection's chain (cf_tls.h). */
#include "harvestd/cf_tls.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harvestd/common.h"

/* Plaintext encrypted per flush of the outbound buffer: a few records. */
#define WRITE_SLICE (64 * 1024)

typedef struct {
    hv_cf_t cf;
    hv_tls_ctx_t *ctx;
    char *host;
    int host_is_ip;
    char *session_key;
    int h2;              /* offer ALPN h2 */
    hv_tls_t *tls;       /* made when the layer opens */
    int handshaken;
    hv_tlspool_t *pool;  /* NULL: every step on the loop */
    hv_tlspool_job_t job;
    int busy;            /* a step runs on a worker: nothing here touches `tls` */
    int step;            /* its result */
    int orphaned;        /* destroyed meanwhile: the job's end frees the layer */
} cf_tls_t;

/* Decrypted records are delivered before each call returns, and deliveries never nest (a
 * paused connection's records wait for the loop): one buffer serves every connection. Loop
 * thread only. */
static char plain_buf[HV_CONN_READ_BUF];

static hv_cf_t *create(hv_conn_t *c, const void *arg)
{
    const hv_cf_tls_arg_t *a = arg;
    (void)c;
    cf_tls_t *t = hv_xcalloc(1, sizeof(*t));
    t->ctx = a->ctx;
    t->host = hv_xstrdup(a->host);
    t->host_is_ip = a->host_is_ip;
    t->h2 = a->h2;
    t->pool = a->pool;
    size_t n = strlen(a->host) + 8;
    t->session_key = hv_xmalloc(n);
    snprintf(t->session_key, n, "%s:%u", a->host, (unsigned)a->port);
    return &t->cf;
}

static void free_layer(cf_tls_t *t)
{
    hv_tls_free(t->tls);
    free(t->host);
    free(t->session_key);
    free(t);
}

static void destroy(hv_cf_t *cf)
{
    cf_tls_t *t = hv_container_of(cf, cf_tls_t, cf);
    if (t->busy) { /* a worker has its session: the job's end frees it */
        t->orphaned = 1;
        return;
    }
    free_layer(t);
}

/* Send on whatever mbedtls produced during the last call. */
static int flush(cf_tls_t *t)
{
    const char *data;
    size_t len;
    hv_tls_out(t->tls, &data, &len);
    if (len == 0)
        return 0;
    int rc = hv_cf_down(&t->cf, data, len);
    hv_tls_out_clear(t->tls);
    return rc;
}

static void failed(cf_tls_t *t, int err)
{
    hv_cf_set_fault(&t->cf, hv_tls_fault(t->tls));
    hv_cf_fail(&t->cf, err);
}

/* What a handshake step came to (hv_tls_handshake()'s result): send what it wrote, and the
 * layer is open, fails, or waits for more. */
static void handshake_result(cf_tls_t *t, int rc)
{
    hv_cf_t *cf = &t->cf;
    int wrc = flush(t);
    if (rc < 0) {
        failed(t, rc);
        return;
    }
    if (wrc != 0) {
        hv_fault_t f = {HV_D_TLS_WRITE_FAILED, ""};
        hv_cf_set_fault(cf, &f);
        hv_cf_fail(cf, wrc);
        return;
    }
    if (rc == 1)
        return;
    t->handshaken = 1;
    hv_cf_opened(cf);
}

static void step_work(hv_tlspool_job_t *job)
{
    cf_tls_t *t = hv_container_of(job, cf_tls_t, job);
    t->step = hv_tls_handshake_step(t->tls);
}

static void step_done(hv_tlspool_job_t *job)
{
    cf_tls_t *t = hv_container_of(job, cf_tls_t, job);
    t->busy = 0;
    if (t->orphaned) {
        free_layer(t);
        return;
    }
    if (job->cancelled || hv_cf_conn_closing(&t->cf))
        return;
    hv_cf_hold(&t->cf, 0);
    handshake_result(t, hv_tls_handshake_finish(t->tls, t->step));
}

/* Move the session forward with what is buffered: finish the handshake (its steps on a
 * crypto worker when there is a pool: reading waits meanwhile), then decrypt and deliver
 * records for as long as the owner keeps reading on. */
static void progress(cf_tls_t *t)
{
    hv_cf_t *cf = &t->cf;
    if (!t->handshaken) {
        if (t->busy)
            return;
        if (t->pool == NULL || hv_tls_handshake_idle(t->tls)) {
            handshake_result(t, hv_tls_handshake(t->tls));
            return;
        }
        t->busy = 1;
        hv_cf_hold(cf, 1);
        hv_tlspool_submit(t->pool, &t->job);
        return;
    }
    while (hv_cf_conn_open(cf) && hv_cf_reading(cf)) {
        /* Plaintext goes where the owner wants it (a body's buffer) when it says so. */
        char *dst = plain_buf;
        size_t cap = sizeof(plain_buf);
        if (!hv_cf_up_space(cf, &dst, &cap)) {
            dst = plain_buf;
            cap = sizeof(plain_buf);
        }
        ssize_t n = hv_tls_read(t->tls, dst, cap);
        flush(t);
        if (n == 0)
            return;
        if (n < 0) {
            if (n == UV_EOF)
                hv_cf_fail(cf, UV_EOF);
            else
                failed(t, (int)n);
            return;
        }
        hv_cf_up(cf, dst, (size_t)n);
    }
}

static void open_tls(hv_cf_t *cf)
{
    cf_tls_t *t = hv_container_of(cf, cf_tls_t, cf);
    t->tls = hv_tls_new_alpn(t->ctx, t->host, t->host_is_ip, t->session_key, t->h2);
    t->job.work = step_work;
    t->job.done = step_done;
    handshake_result(t, hv_tls_handshake(t->tls)); /* the ClientHello: on the loop, cheap */
}

static void in_space(hv_cf_t *cf, char **base, size_t *len)
{
    cf_tls_t *t = hv_container_of(cf, cf_tls_t, cf);
    hv_tls_in_space(t->tls, base, len);
}

static void in_commit(hv_cf_t *cf, size_t n)
{
    cf_tls_t *t = hv_container_of(cf, cf_tls_t, cf);
    hv_tls_in_commit(t->tls, n);
    progress(t);
}

/* Ciphertext handed up by a layer below (what a tunnel received with its own reply). */
static void recv_tls(hv_cf_t *cf, const char *data, size_t len)
{
    cf_tls_t *t = hv_container_of(cf, cf_tls_t, cf);
    while (len > 0) {
        char *room;
        size_t cap;
        hv_tls_in_space(t->tls, &room, &cap);
        if (cap == 0) {
            hv_fault_t f = {HV_D_TLS_INVALID_RECORD, ""};
            hv_cf_set_fault(cf, &f);
            hv_cf_fail(cf, HV_ETLS);
            return;
        }
        size_t n = HV_MIN(cap, len);
        memcpy(room, data, n);
        hv_tls_in_commit(t->tls, n);
        data += n;
        len -= n;
    }
    progress(t);
}

static int send_tls(hv_cf_t *cf, const char *data, size_t len)
{
    cf_tls_t *t = hv_container_of(cf, cf_tls_t, cf);
    /* A slice at a time, each flushed before the next: the session's outbound buffer is
     * bounded (tls.c), and a write may be larger than it (a Redis command of a megabyte). */
    do {
        size_t n = HV_MIN(len, (size_t)WRITE_SLICE);
        int rc = hv_tls_write(t->tls, data, n);
        if (rc != 0) {
            hv_cf_set_fault(cf, hv_tls_fault(t->tls));
            return rc;
        }
        rc = flush(t);
        if (rc != 0)
            return rc;
        data += n;
        len -= n;
    } while (len > 0);
    return 0;
}

/* The socket ended during the handshake: a failed handshake, counted with the others. */
static int ended(hv_cf_t *cf, int err)
{
    cf_tls_t *t = hv_container_of(cf, cf_tls_t, cf);
    hv_tls_count_failure(t->tls);
    hv_fault_t f = {err == UV_EOF ? HV_D_TLS_CLOSED_DURING_HANDSHAKE
                                  : HV_D_TLS_RESET_DURING_HANDSHAKE, ""};
    hv_cf_set_fault(cf, &f);
    return HV_ETLS;
}

static int buffered(const hv_cf_t *cf)
{
    const cf_tls_t *t = (const cf_tls_t *)cf; /* its first member */
    return t->tls != NULL && t->handshaken && hv_tls_has_buffered(t->tls);
}

static void pump(hv_cf_t *cf)
{
    progress(hv_container_of(cf, cf_tls_t, cf));
}

const hv_cf_type_t hv_cf_tls = {
    .name = "tls",
    .create = create,
    .open = open_tls,
    .recv = recv_tls,
    .send = send_tls,
    .ended = ended,
    .in_space = in_space,
    .in_commit = in_commit,
    .buffered = buffered,
    .pump = pump,
    .destroy = destroy,
};

const char *hv_cf_tls_alpn(const hv_conn_t *c)
{
    const hv_cf_t *cf = hv_conn_layer(c, &hv_cf_tls);
    if (cf == NULL)
        return NULL;
    const cf_tls_t *t = (const cf_tls_t *)(const void *)((const char *)cf -
                                                         offsetof(cf_tls_t, cf));
    return t->tls != NULL ? hv_tls_alpn(t->tls) : NULL;
}
