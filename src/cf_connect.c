/* cf_connect.c: an HTTP proxy's CONNECT tunnel as a layer of the chain (cf_connect.h). */
#include "harvestd/cf_connect.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harvestd/common.h"

typedef struct {
    hv_cf_t cf;
    char *request;     /* the CONNECT request head, sent when the layer opens */
    size_t request_len;
    char *reply;       /* the reply head so far */
    size_t reply_len;
} cf_connect_t;

static hv_cf_t *create(hv_conn_t *c, const void *arg)
{
    const hv_proxy_target_t *a = arg;
    char auth[2 * HV_PROXY_CRED_MAX + 64] = "";
    (void)c;
    if (a->proxy->has_auth) {
        char value[sizeof(auth) - 32];
        if (hv_proxy_basic_auth(a->proxy, value, sizeof(value)) != 0)
            return NULL;
        snprintf(auth, sizeof(auth), "Proxy-Authorization: %s\r\n", value);
        explicit_bzero(value, sizeof(value));
    }
    int v6 = strchr(a->host, ':') != NULL;
    char target[HV_PROXY_HOST_MAX + 16];
    snprintf(target, sizeof(target), v6 ? "[%s]:%u" : "%s:%u", a->host, (unsigned)a->port);
    cf_connect_t *t = hv_xcalloc(1, sizeof(*t));
    size_t cap = 2 * strlen(target) + strlen(auth) + 64;
    t->request = hv_xmalloc(cap);
    int n = snprintf(t->request, cap, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n%s\r\n", target,
                     target, auth);
    t->request_len = (size_t)n;
    explicit_bzero(auth, sizeof(auth));
    return &t->cf;
}

static void destroy(hv_cf_t *cf)
{
    cf_connect_t *t = hv_container_of(cf, cf_connect_t, cf);
    if (t->request != NULL)
        explicit_bzero(t->request, t->request_len); /* the proxy's credentials */
    free(t->request);
    free(t->reply);
    free(t);
}

static void fail(cf_connect_t *t, hv_detail_t code, const char *arg)
{
    hv_cf_fail_with(&t->cf, HV_EPROXY, code, arg);
}

static void open_connect(hv_cf_t *cf)
{
    cf_connect_t *t = hv_container_of(cf, cf_connect_t, cf);
    int rc = hv_cf_down(cf, t->request, t->request_len);
    explicit_bzero(t->request, t->request_len);
    free(t->request);
    t->request = NULL;
    if (rc != 0) {
        char name[32];
        fail(t, HV_D_PROXY_CONNECT_ERROR, hv_err_name_arg(name, sizeof(name), rc, 1));
    }
}

/* "HTTP/1.x NNN ..." at the start of the head: the status, or -1. */
static int reply_status(const char *head, size_t len)
{
    if (len < 12 || memcmp(head, "HTTP/1.", 7) != 0 || !hv_ascii_is_digit((unsigned char)head[7]) ||
        head[8] != ' ')
        return -1;
    int status = 0;
    for (int i = 9; i < 12; i++) {
        if (!hv_ascii_is_digit((unsigned char)head[i]))
            return -1;
        status = status * 10 + (head[i] - '0');
    }
    if (len > 12 && head[12] != ' ' && head[12] != '\r')
        return -1;
    return status;
}

static void recv_connect(hv_cf_t *cf, const char *data, size_t len)
{
    cf_connect_t *t = hv_container_of(cf, cf_connect_t, cf);
    size_t room = HV_CF_CONNECT_REPLY_MAX - t->reply_len;
    size_t take = HV_MIN(len, room);
    if (t->reply == NULL)
        t->reply = hv_xmalloc(HV_CF_CONNECT_REPLY_MAX);
    memcpy(t->reply + t->reply_len, data, take);
    size_t before = t->reply_len;
    t->reply_len += take;
    /* Only where the end could be new: the last 3 bytes kept, and what came now. */
    size_t from = before > 3 ? before - 3 : 0;
    const char *end = memmem(t->reply + from, t->reply_len - from, "\r\n\r\n", 4);
    if (end == NULL) {
        if (t->reply_len == HV_CF_CONNECT_REPLY_MAX)
            fail(t, HV_D_PROXY_REPLY_TOO_LARGE, NULL);
        return;
    }
    size_t head_len = (size_t)(end - t->reply) + 4;
    int status = reply_status(t->reply, head_len);
    if (status < 0) {
        fail(t, HV_D_PROXY_BAD_REPLY, NULL);
        return;
    }
    if (status == 407) {
        fail(t, HV_D_PROXY_AUTH_REQUIRED, NULL);
        return;
    }
    if (status < 200 || status > 299) {
        char arg[16];
        snprintf(arg, sizeof(arg), "%d", status);
        fail(t, HV_D_PROXY_HTTP_STATUS, arg);
        return;
    }
    /* The tunnel is open: bytes that came after the head are the target's, from now on
     * everything passes. */
    size_t used = head_len - before; /* of this call's data */
    free(t->reply);
    t->reply = NULL;
    cf->passthrough = 1;
    hv_cf_quickack(cf);
    hv_cf_opened(cf);
    if (used < len)
        hv_cf_up(cf, data + used, len - used);
}

static int ended(hv_cf_t *cf, int err)
{
    cf_connect_t *t = hv_container_of(cf, cf_connect_t, cf);
    (void)err;
    hv_fault_t f = {HV_D_PROXY_CLOSED, ""};
    hv_cf_set_fault(&t->cf, &f);
    return HV_EPROXY;
}

const hv_cf_type_t hv_cf_connect = {
    .name = "connect",
    .create = create,
    .open = open_connect,
    .recv = recv_connect,
    .send = hv_cf_down, /* open: a pass-through */
    .ended = ended,
    .destroy = destroy,
};
