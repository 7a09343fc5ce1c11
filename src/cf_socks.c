/* cf_socks.c: a SOCKS5 tunnel as a layer of the chain (cf_socks.h). */
#include "harvestd/cf_socks.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harvestd/common.h"
#include "harvestd/log.h"

typedef enum {
    S_RESOLVING,   /* socks5: the target's name */
    S_GREETING,    /* methods offered, the proxy's choice awaited */
    S_LOGIN,       /* RFC 1929 sent, its status awaited */
    S_CONNECTING,  /* CONNECT sent, the reply awaited */
    S_OPEN,
} socks_state_t;

typedef struct {
    hv_cf_t cf;
    socks_state_t state;
    int remote_dns;
    char *host;
    int host_is_ip;
    uint16_t port;
    char user[HV_PROXY_CRED_MAX];
    char password[HV_PROXY_CRED_MAX];
    int has_auth;
    struct sockaddr_storage target; /* socks5: the address sent */
    hv_dns_waiter_t waiter;
    uint8_t in[512];                /* a reply so far (the longest: 4 + 1 + 255 + 2 bytes) */
    size_t in_len;
} cf_socks_t;

static hv_cf_t *socks_create(hv_conn_t *c, const void *arg)
{
    const hv_proxy_target_t *a = arg;
    (void)c;
    if (strlen(a->host) > 255)
        return NULL;
    cf_socks_t *t = hv_xcalloc(1, sizeof(*t));
    t->remote_dns = a->proxy->kind == HV_PROXY_SOCKS5H;
    t->host = hv_xstrdup(a->host);
    t->host_is_ip = a->host_is_ip;
    t->port = a->port;
    t->has_auth = a->proxy->has_auth;
    memcpy(t->user, a->proxy->user, sizeof(t->user));
    memcpy(t->password, a->proxy->password, sizeof(t->password));
    return &t->cf;
}

/* The lookup of the target's name goes with the connection's close, as conn's own does. */
static void socks_close(hv_cf_t *cf)
{
    cf_socks_t *t = hv_container_of(cf, cf_socks_t, cf);
    hv_dns_cancel(&t->waiter);
}

static void socks_destroy(hv_cf_t *cf)
{
    cf_socks_t *t = hv_container_of(cf, cf_socks_t, cf);
    hv_dns_cancel(&t->waiter); /* (a layer whose connection never closed: nothing waits) */
    explicit_bzero(t->password, sizeof(t->password));
    free(t->host);
    free(t);
}

static void socks_fail(cf_socks_t *t, hv_detail_t code)
{
    hv_cf_fail_with(&t->cf, HV_EPROXY, code, NULL);
}

static void send_or_fail(cf_socks_t *t, const uint8_t *msg, size_t len)
{
    if (hv_cf_down(&t->cf, (const char *)msg, len) != 0)
        socks_fail(t, HV_D_PROXY_CLOSED);
}

static void greet(cf_socks_t *t)
{
    uint8_t hello[4] = {5, 1, 0x00, 0};
    if (t->has_auth) {
        hello[1] = 2;
        hello[3] = 0x02;
    }
    t->state = S_GREETING;
    send_or_fail(t, hello, t->has_auth ? 4 : 3);
}

static void socks_request(cf_socks_t *t)
{
    uint8_t req[4 + 1 + 255 + 2];
    size_t n = 0;
    req[n++] = 5;
    req[n++] = 1; /* CONNECT */
    req[n++] = 0;
    if (t->remote_dns) {
        size_t len = strlen(t->host);
        req[n++] = 3; /* a domain name */
        req[n++] = (uint8_t)len;
        memcpy(req + n, t->host, len);
        n += len;
    } else if (t->target.ss_family == AF_INET6) {
        req[n++] = 4;
        memcpy(req + n, &((struct sockaddr_in6 *)&t->target)->sin6_addr, 16);
        n += 16;
    } else {
        req[n++] = 1;
        memcpy(req + n, &((struct sockaddr_in *)&t->target)->sin_addr, 4);
        n += 4;
    }
    req[n++] = (uint8_t)(t->port >> 8);
    req[n++] = (uint8_t)(t->port & 0xff);
    t->state = S_CONNECTING;
    send_or_fail(t, req, n);
}

/* socks5: the first of the target's addresses that the guard allows, or the refusal. */
static void resolved(cf_socks_t *t, hv_dns_entry_t *e)
{
    hv_conn_env_t *env = hv_cf_env(&t->cf);
    hv_addr_class_t first_refusal = HV_ADDR_PUBLIC;
    const struct sockaddr *sa;
    for (unsigned i = 0; (sa = hv_dns_entry_addr(e, i)) != NULL; i++) {
        hv_addr_class_t cls = hv_guard_check(env->guard, sa);
        if (cls == HV_ADDR_PUBLIC) {
            memset(&t->target, 0, sizeof(t->target));
            memcpy(&t->target, sa, sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                             : sizeof(struct sockaddr_in));
            hv_dns_unref(e);
            greet(t);
            return;
        }
        env->stats->blocked[cls]++;
        if (first_refusal == HV_ADDR_PUBLIC)
            first_refusal = cls;
    }
    hv_dns_unref(e);
    HV_LOG(HV_LOG_INFO, "event=address_blocked host=%s via=socks class=%s", t->host,
           hv_addr_class_name(first_refusal));
    if (first_refusal == HV_ADDR_PUBLIC)
        hv_cf_fail_with(&t->cf, UV_EAI_NODATA, HV_D_NO_ADDRESS_FOR_NAME, NULL);
    else
        hv_cf_fail_with(&t->cf, HV_EBLOCKED, hv_addr_class_detail(first_refusal), NULL);
}

static void on_dns(hv_dns_waiter_t *w, hv_dns_entry_t *e, int status)
{
    cf_socks_t *t = hv_container_of(w, cf_socks_t, waiter);
    if (hv_cf_conn_closing(&t->cf)) {
        if (e != NULL)
            hv_dns_unref(e);
        return;
    }
    if (status != 0) {
        hv_cf_fail(&t->cf, status); /* the target's name: a DnsError, as without a proxy */
        return;
    }
    resolved(t, e);
}

static void open_socks(hv_cf_t *cf)
{
    cf_socks_t *t = hv_container_of(cf, cf_socks_t, cf);
    if (t->remote_dns) {
        greet(t);
        return;
    }
    if (t->host_is_ip) {
        struct sockaddr_storage ss;
        memset(&ss, 0, sizeof(ss));
        if (uv_ip4_addr(t->host, 0, (struct sockaddr_in *)&ss) != 0 &&
            uv_ip6_addr(t->host, 0, (struct sockaddr_in6 *)&ss) != 0) {
            socks_fail(t, HV_D_SOCKS_ADDRESS_TYPE_NOT_SUPPORTED);
            return;
        }
        hv_conn_env_t *env = hv_cf_env(cf);
        hv_addr_class_t cls = hv_guard_check(env->guard, (struct sockaddr *)&ss);
        if (cls != HV_ADDR_PUBLIC) {
            env->stats->blocked[cls]++;
            hv_cf_fail_with(cf, HV_EBLOCKED, hv_addr_class_detail(cls), NULL);
            return;
        }
        t->target = ss;
        greet(t);
        return;
    }
    t->state = S_RESOLVING;
    t->waiter.cb = on_dns;
    hv_dns_entry_t *e = NULL;
    int rc = hv_dns_lookup(hv_cf_env(cf)->dns, t->host, &t->waiter, &e);
    if (rc == 1)
        resolved(t, e);
    else if (rc < 0)
        hv_cf_fail(cf, rc);
}

static const hv_detail_t reply_details[] = {
    [1] = HV_D_SOCKS_GENERAL_FAILURE,       [2] = HV_D_SOCKS_NOT_ALLOWED,
    [3] = HV_D_SOCKS_NETWORK_UNREACHABLE,   [4] = HV_D_SOCKS_HOST_UNREACHABLE,
    [5] = HV_D_SOCKS_CONNECTION_REFUSED,    [6] = HV_D_SOCKS_TTL_EXPIRED,
    [7] = HV_D_SOCKS_COMMAND_NOT_SUPPORTED, [8] = HV_D_SOCKS_ADDRESS_TYPE_NOT_SUPPORTED,
};

/* How many bytes the reply awaited in this state has, once `have` bytes of it are known
 * (0: not known yet). */
static size_t reply_len(const cf_socks_t *t)
{
    switch (t->state) {
    case S_GREETING:
    case S_LOGIN:
        return 2;
    case S_CONNECTING:
        if (t->in_len < 5)
            return 0;
        switch (t->in[3]) {
        case 1:
            return 4 + 4 + 2;
        case 4:
            return 4 + 16 + 2;
        case 3:
            return 4 + 1 + (size_t)t->in[4] + 2;
        default:
            return SIZE_MAX; /* not a reply */
        }
    default:
        return 0;
    }
}

/* A complete reply in `in`: act on it. */
static void on_reply(cf_socks_t *t)
{
    const uint8_t *r = t->in;
    switch (t->state) {
    case S_GREETING:
        if (r[0] != 5) {
            socks_fail(t, HV_D_SOCKS_BAD_REPLY);
        } else if (r[1] == 0x00) {
            socks_request(t);
        } else if (r[1] == 0x02 && t->has_auth) {
            uint8_t msg[3 + 2 * 255];
            size_t ulen = strlen(t->user), plen = strlen(t->password), n = 0;
            if (ulen > 255 || plen > 255) {
                socks_fail(t, HV_D_SOCKS_AUTH_FAILED);
                return;
            }
            msg[n++] = 1;
            msg[n++] = (uint8_t)ulen;
            memcpy(msg + n, t->user, ulen);
            n += ulen;
            msg[n++] = (uint8_t)plen;
            memcpy(msg + n, t->password, plen);
            n += plen;
            t->state = S_LOGIN;
            send_or_fail(t, msg, n);
            explicit_bzero(msg, sizeof(msg));
        } else {
            socks_fail(t, HV_D_SOCKS_NO_ACCEPTABLE_METHOD);
        }
        return;
    case S_LOGIN:
        if (r[0] != 1)
            socks_fail(t, HV_D_SOCKS_BAD_REPLY);
        else if (r[1] != 0)
            socks_fail(t, HV_D_SOCKS_AUTH_FAILED);
        else
            socks_request(t);
        return;
    case S_CONNECTING:
        if (r[0] != 5 || r[2] != 0) {
            socks_fail(t, HV_D_SOCKS_BAD_REPLY);
        } else if (r[1] != 0) {
            socks_fail(t, r[1] < HV_ARRAY_SIZE(reply_details) && reply_details[r[1]] != HV_D_NONE
                        ? reply_details[r[1]]
                        : HV_D_SOCKS_BAD_REPLY);
        } else {
            t->state = S_OPEN;
            t->cf.passthrough = 1;
            hv_cf_quickack(&t->cf);
            hv_cf_opened(&t->cf);
        }
        return;
    default:
        return;
    }
}

static void recv_socks(hv_cf_t *cf, const char *data, size_t len)
{
    cf_socks_t *t = hv_container_of(cf, cf_socks_t, cf);
    while (len > 0 && t->state != S_OPEN) {
        if (t->state == S_RESOLVING) {
            socks_fail(t, HV_D_SOCKS_BAD_REPLY); /* it speaks before it was asked */
            return;
        }
        size_t want = reply_len(t);
        if (want == SIZE_MAX) {
            socks_fail(t, HV_D_SOCKS_BAD_REPLY);
            return;
        }
        /* Take only what belongs to this reply (the bytes after it are the next one's or,
         * once open, the target's). Before the length is known, take up to 5 bytes. */
        size_t goal = want != 0 ? want : 5;
        size_t take = HV_MIN(len, goal - t->in_len);
        memcpy(t->in + t->in_len, data, take);
        t->in_len += take;
        data += take;
        len -= take;
        want = reply_len(t);
        if (want == SIZE_MAX) {
            socks_fail(t, HV_D_SOCKS_BAD_REPLY);
            return;
        }
        if (want == 0 || t->in_len < want)
            continue;
        t->in_len = 0;
        socks_state_t before = t->state;
        on_reply(t);
        if (hv_cf_conn_closing(cf) || t->state == before)
            return; /* failed */
    }
    if (t->state == S_OPEN && len > 0)
        hv_cf_up(cf, data, len);
}

static int socks_ended(hv_cf_t *cf, int err)
{
    (void)err;
    hv_fault_t f = {HV_D_PROXY_CLOSED, ""};
    hv_cf_set_fault(cf, &f);
    return HV_EPROXY;
}

const hv_cf_type_t hv_cf_socks = {
    .name = "socks5",
    .create = socks_create,
    .open = open_socks,
    .recv = recv_socks,
    .send = hv_cf_down, /* open: a pass-through */
    .ended = socks_ended,
    .close = socks_close,
    .destroy = socks_destroy,
};
