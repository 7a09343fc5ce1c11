/*
 * proxy_reply: the proxy tunnel layers (cf_connect.h, cf_socks.h) fed arbitrary proxy
 * replies, in pieces as socket reads would bring them.
 *
 * The layers are included here with the chain's side of them (hv_cf_down() and the rest,
 * conn.c's) replaced by a recorder, and the DNS cache by a fixed answer, so that a layer runs
 * alone without a loop or a socket. Input: one flags byte, then what "the proxy" sends.
 *   bit 0      SOCKS5 (else an HTTP proxy's CONNECT)
 *   bit 1      the proxy's URL has a user and password
 *   bit 2      socks5h (the name is sent), else socks5 (the name resolved here)
 *   bit 3      the target is an IPv6 literal (else a name)
 *   bits 4-6   the size of each read, from a table (the whole input at once ... 1 byte)
 * Properties: the layer ends in exactly one way (open, failed, or waiting for more); a
 * failure carries a detail and HV_EPROXY (or HV_EBLOCKED from the guard); nothing goes up
 * before the tunnel is open, and once open every byte after the reply goes up unchanged;
 * what the layer sends down is a well-formed request that carries no byte of the replies.
 */
#include "../../src/cf_connect.c"
#include "../../src/cf_socks.c"

#include <netinet/in.h>

#include "fuzz.h"

static struct {
    int opened, failed, err;
    hv_fault_t fault;
    size_t up;          /* bytes passed up */
    const char *read_start, *read_end; /* the read being handed to the layer */
    size_t down;        /* bytes sent down */
    int closing;
} st;

static hv_conn_stats_t stats;
static hv_guard_t guard;
static hv_conn_env_t env = {.guard = &guard, .stats = &stats};

int hv_cf_down(hv_cf_t *cf, const char *data, size_t len)
{
    (void)cf;
    FUZZ_CHECK(!st.opened, "the layer sent %zu bytes after it opened", len);
    FUZZ_CHECK(len > 0 && len < 4096, "a request of %zu bytes", len);
    if (data[0] == 'C')
        FUZZ_CHECK(memmem(data, len, "\r\n\r\n", 4) == data + len - 4, "a CONNECT head ends once");
    st.down += len;
    return 0;
}

void hv_cf_up(hv_cf_t *cf, const char *data, size_t len)
{
    (void)cf;
    FUZZ_CHECK(st.opened, "bytes went up before the tunnel opened");
    /* The rest of the read that completed the reply, untouched (the very bytes). */
    FUZZ_CHECK(data > st.read_start && data + len == st.read_end && st.up == 0,
               "bytes went up that are not the end of the read that opened the tunnel");
    st.up += len;
}

void hv_cf_opened(hv_cf_t *cf)
{
    FUZZ_CHECK(!st.opened && !st.failed, "opened twice, or after failing");
    FUZZ_CHECK(cf->passthrough, "an open tunnel passes bytes through");
    st.opened = 1;
}

void hv_cf_fail(hv_cf_t *cf, int err)
{
    (void)cf;
    FUZZ_CHECK(!st.opened && !st.failed, "failed twice, or after opening");
    FUZZ_CHECK(err == HV_EPROXY || err == HV_EBLOCKED, "failed with %d", err);
    FUZZ_CHECK(st.fault.code != HV_D_NONE, "a failure without a detail");
    st.failed = 1;
    st.err = err;
    st.closing = 1; /* the owner closes a failed connection */
}

void hv_cf_set_fault(hv_cf_t *cf, const hv_fault_t *fault)
{
    (void)cf;
    st.fault = *fault;
}

void hv_cf_fail_with(hv_cf_t *cf, int err, hv_detail_t code, const char *arg)
{
    hv_fault_t f;
    hv_fault_set(&f, code, arg);
    hv_cf_set_fault(cf, &f);
    hv_cf_fail(cf, err);
}

void hv_cf_quickack(hv_cf_t *cf)
{
    (void)cf;
}

int hv_cf_reading(const hv_cf_t *cf)
{
    (void)cf;
    return 1;
}

int hv_cf_conn_open(const hv_cf_t *cf)
{
    (void)cf;
    return st.opened;
}

int hv_cf_conn_closing(const hv_cf_t *cf)
{
    (void)cf;
    return st.closing;
}

hv_conn_env_t *hv_cf_env(const hv_cf_t *cf)
{
    (void)cf;
    return &env;
}

/* The DNS cache: "target.test" is 192.0.2.7 (public to the guard), answered at once. */
static struct sockaddr_in answer;
static int entry_refs;

int hv_dns_lookup(hv_dns_t *dns, const char *host, hv_dns_waiter_t *w, hv_dns_entry_t **out)
{
    (void)dns;
    (void)host;
    (void)w;
    answer.sin_family = AF_INET;
    answer.sin_addr.s_addr = htonl(0xC0000207);
    entry_refs++;
    *out = (hv_dns_entry_t *)&answer;
    return 1;
}

void hv_dns_cancel(hv_dns_waiter_t *w)
{
    (void)w;
}

const struct sockaddr *hv_dns_entry_addr(const hv_dns_entry_t *e, unsigned idx)
{
    return idx == 0 ? (const struct sockaddr *)e : NULL;
}

void hv_dns_unref(hv_dns_entry_t *e)
{
    (void)e;
    entry_refs--;
}

static const size_t read_sizes[8] = {SIZE_MAX, 4096, 512, 64, 10, 3, 2, 1};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input_t in = {data, size};
    uint8_t flags = fuzz_byte(&in);
    memset(&st, 0, sizeof(st));

    hv_proxy_t proxy;
    memset(&proxy, 0, sizeof(proxy));
    proxy.kind = !(flags & 1) ? HV_PROXY_HTTP : (flags & 4) ? HV_PROXY_SOCKS5H : HV_PROXY_SOCKS5;
    snprintf(proxy.host, sizeof(proxy.host), "proxy.test");
    proxy.port = 3128;
    if (flags & 2) {
        proxy.has_auth = 1;
        snprintf(proxy.user, sizeof(proxy.user), "user");
        snprintf(proxy.password, sizeof(proxy.password), "secret");
    }
    const char *target = (flags & 8) ? "2001:db8::1" : "target.test";
    const hv_cf_type_t *type;
    hv_cf_t *cf;
    if (flags & 1) {
        hv_proxy_target_t a = {&proxy, target, (flags & 8) != 0, 443};
        type = &hv_cf_socks;
        cf = type->create(NULL, &a);
    } else {
        hv_proxy_target_t a = {&proxy, target, 0, 443};
        type = &hv_cf_connect;
        cf = type->create(NULL, &a);
    }
    FUZZ_CHECK(cf != NULL, "the layer could not be made");
    cf->type = type;
    cf->passthrough = 0;
    type->open(cf);
    FUZZ_CHECK(st.down > 0 || st.failed, "the layer said nothing to the proxy");

    /* What the proxy sends, a read at a time, until the layer is done with it (an open
     * tunnel's later bytes go past it, to the layer above). */
    size_t step = read_sizes[(flags >> 4) & 7];
    while (in.left > 0 && !st.failed && !st.opened) {
        size_t n = in.left < step ? in.left : step;
        st.read_start = (const char *)in.p;
        st.read_end = st.read_start + n;
        type->recv(cf, (const char *)in.p, n);
        in.p += n;
        in.left -= n;
    }
    FUZZ_CHECK(!(st.opened && st.failed), "both open and failed");
    FUZZ_CHECK(!st.failed || st.fault.code != HV_D_NONE, "a failure without a detail");
    FUZZ_CHECK(entry_refs == 0, "a DNS entry was not released");
    type->destroy(cf);
    return 0;
}
