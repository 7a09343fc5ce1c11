/* proxy.c: proxy URLs and lists (proxy.h). */
#include "harvestd/proxy.h"

#include <arpa/inet.h>
#include <mbedtls/base64.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harvestd/common.h"
#include "harvestd/url.h"

static const struct {
    const char *prefix;
    hv_proxy_kind_t kind;
    uint16_t port;
} schemes[] = {
    {"http://", HV_PROXY_HTTP, 3128},
    {"socks5://", HV_PROXY_SOCKS5, 1080},
    {"socks5h://", HV_PROXY_SOCKS5H, 1080},
};

/* HOST[:PORT] in [p, end), the whole of it: a name, an IPv4 literal or a bracketed IPv6
 * literal, lower-cased into `host` (HV_PROXY_HOST_MAX bytes; IPv6 without its brackets), and
 * the port into `*port` when given (left as it was otherwise, unless `need_port`). 0 or -1.
 * Proxy URLs and the credentials file's entries name hosts alike. */
static int parse_host_port(const char *p, const char *end, char *host, int *host_is_ip,
                           uint16_t *port, int need_port)
{
    const char *start = p, *host_end;
    if (p < end && *p == '[') {
        start = p + 1;
        host_end = memchr(start, ']', (size_t)(end - start));
        if (host_end == NULL)
            return -1;
        p = host_end + 1;
    } else {
        for (host_end = p; host_end < end && *host_end != ':' && *host_end != '/'; host_end++)
            ;
        p = host_end;
    }
    size_t hlen = (size_t)(host_end - start);
    if (hlen == 0 || hlen >= HV_PROXY_HOST_MAX)
        return -1;
    for (size_t i = 0; i < hlen; i++) {
        unsigned char ch = (unsigned char)start[i];
        if (!(hv_ascii_is_alpha(ch) || hv_ascii_is_digit(ch) || ch == '.' || ch == '-' ||
              ch == ':' || ch == '_'))
            return -1;
        host[i] = (char)hv_ascii_lower(ch);
    }
    host[hlen] = '\0';
    struct in6_addr a6;
    struct in_addr a4;
    *host_is_ip = inet_pton(AF_INET, host, &a4) == 1 || inet_pton(AF_INET6, host, &a6) == 1;
    if (strchr(host, ':') != NULL && !*host_is_ip)
        return -1;
    if (p < end && *p == ':') {
        unsigned long v = 0;
        size_t digits = 0;
        for (p++; p < end && hv_ascii_is_digit((unsigned char)*p) && digits < 6; p++, digits++)
            v = v * 10 + (unsigned long)(*p - '0');
        if (digits == 0 || p != end || v == 0 || v > 65535)
            return -1;
        *port = (uint16_t)v;
    } else if (p != end || need_port) {
        return -1;
    }
    return 0;
}

int hv_proxy_parse(const char *text, hv_proxy_t *out, char *err, size_t errcap)
{
    char shown[HV_PROXY_SHOWN_MAX + 64];
    hv_url_mask_userinfo(text, shown, sizeof(shown));
    memset(out, 0, sizeof(*out));
    const char *p = NULL;
    for (size_t i = 0; i < HV_ARRAY_SIZE(schemes); i++) {
        size_t n = strlen(schemes[i].prefix);
        if (strncasecmp(text, schemes[i].prefix, n) == 0) {
            p = text + n;
            out->kind = schemes[i].kind;
            out->port = schemes[i].port;
        }
    }
    static const char *const prefixes[] = {"http://", "socks5://", "socks5h://"};
    if (p == NULL) {
        snprintf(err, errcap, "'%s' is not a proxy URL (http://, socks5:// or socks5h://"
                 "[USER:PASSWORD@]HOST[:PORT])", shown);
        goto fail;
    }
    const char *end = p + strcspn(p, "/?#");
    if (*end != '\0' && strcmp(end, "/") != 0) {
        snprintf(err, errcap, "'%s': a proxy URL has no path, query or fragment", shown);
        goto fail;
    }
    const char *at = memrchr(p, '@', (size_t)(end - p));
    if (at != NULL) {
        const char *colon = memchr(p, ':', (size_t)(at - p));
        if (colon == NULL ||
            hv_url_percent_decode(p, colon, out->user, sizeof(out->user)) != 0 ||
            hv_url_percent_decode(colon + 1, at, out->password, sizeof(out->password)) != 0) {
            snprintf(err, errcap, "'%s': the user information must be USER:PASSWORD, "
                     "percent-encoded, at most %d bytes each", shown, HV_PROXY_CRED_MAX - 1);
            goto fail;
        }
        out->has_auth = 1;
        p = at + 1;
    }
    if (parse_host_port(p, end, out->host, &out->host_is_ip, &out->port, 0) != 0)
        goto bad;
    snprintf(out->shown, sizeof(out->shown),
             strchr(out->host, ':') != NULL ? "%s[%s]:%u" : "%s%s:%u", prefixes[out->kind],
             out->host, (unsigned)out->port);
    return 0;
bad:
    snprintf(err, errcap, "'%s' is not a proxy URL (http://, socks5:// or socks5h://"
             "[USER:PASSWORD@]HOST[:PORT])", shown);
fail:
    explicit_bzero(out, sizeof(*out));
    return -1;
}

void hv_proxy_list_free(hv_proxy_list_t *l)
{
    if (l->proxy != NULL)
        explicit_bzero(l->proxy, l->count * sizeof(*l->proxy));
    free(l->proxy);
    memset(l, 0, sizeof(*l));
}

int hv_proxy_list_parse(const char *text, hv_proxy_list_t *out, char *err, size_t errcap)
{
    hv_proxy_list_t l = {.given = 1};
    const char *p = text;
    while (*p == ' ' || *p == '\t')
        p++;
    if (strcasecmp(p, "none") == 0) {
        hv_proxy_list_free(out);
        *out = l;
        return 0;
    }
    l.proxy = hv_xcalloc(HV_PROXIES_MAX, sizeof(*l.proxy));
    while (*p != '\0') {
        size_t n = strcspn(p, ",");
        char one[2048];
        while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
            n--;
        if (n == 0 || n >= sizeof(one)) {
            snprintf(err, errcap, n == 0 ? "an empty proxy in the list"
                                         : "a proxy URL longer than %zu bytes", sizeof(one) - 1);
            goto fail;
        }
        if (l.count == HV_PROXIES_MAX) {
            snprintf(err, errcap, "more than %d proxies", HV_PROXIES_MAX);
            goto fail;
        }
        memcpy(one, p, n);
        one[n] = '\0';
        int rc = hv_proxy_parse(one, &l.proxy[l.count], err, errcap);
        explicit_bzero(one, sizeof(one));
        if (rc != 0)
            goto fail;
        l.count++;
        p += strcspn(p, ",");
        if (*p == ',')
            p++;
        while (*p == ' ' || *p == '\t')
            p++;
    }
    if (l.count == 0) {
        snprintf(err, errcap, "no proxy given (a list of URLs, or none)");
        goto fail;
    }
    hv_proxy_list_free(out);
    *out = l;
    return 0;
fail:
    hv_proxy_list_free(&l);
    return -1;
}

int hv_proxy_list_format(const hv_proxy_list_t *l, char *out, size_t cap)
{
    size_t n = 0;
    if (cap == 0)
        return -1;
    out[0] = '\0';
    if (l->given && l->count == 0)
        return snprintf(out, cap, "none") < (int)cap ? 0 : -1;
    for (unsigned i = 0; i < l->count; i++) {
        const hv_proxy_t *p = &l->proxy[i];
        const char *rest = strstr(p->shown, "://") + 3;
        int url_auth = p->has_auth && !p->auth_from_file;
        int w = snprintf(out + n, cap - n, "%s%.*s%s%s%s", i > 0 ? ", " : "",
                         (int)(rest - p->shown), p->shown, url_auth ? p->user : "",
                         url_auth ? ":***@" : "", rest);
        if (w < 0 || (size_t)w >= cap - n)
            return -1;
        n += (size_t)w;
    }
    return 0;
}

/* ---- the credentials file ---- */

/* "host:port" as an entry names it ("[::1]:3128"), or "*". */
static const char *cred_shown(const hv_proxy_cred_t *e, char *out, size_t cap)
{
    if (e->any)
        snprintf(out, cap, "*");
    else
        snprintf(out, cap, strchr(e->host, ':') != NULL ? "[%s]:%u" : "%s:%u", e->host,
                 (unsigned)e->port);
    return out;
}

/* One host, as two names (lower case alike) or as two addresses. */
static int same_host(const char *a, int a_ip, const char *b, int b_ip)
{
    unsigned char x[16], y[16];
    if (!a_ip || !b_ip)
        return !a_ip && !b_ip && strcmp(a, b) == 0;
    int fa = strchr(a, ':') != NULL ? AF_INET6 : AF_INET;
    int fb = strchr(b, ':') != NULL ? AF_INET6 : AF_INET;
    return fa == fb && inet_pton(fa, a, x) == 1 && inet_pton(fb, b, y) == 1 &&
           memcmp(x, y, fa == AF_INET6 ? 16 : 4) == 0;
}

/* The line [p, end) (without its newline) into `e`: 0, or -1 with what is wrong in `err`
 * (after the caller's "NAME:LINE: "). Nothing here quotes what follows the user. */
static int parse_cred_line(const char *p, const char *end, hv_proxy_cred_t *e, char *err,
                           size_t errcap)
{
    const char *field_end = p, *cred;
    while (field_end < end && !hv_ascii_is_blank((unsigned char)*field_end))
        field_end++;
    for (cred = field_end; cred < end && hv_ascii_is_blank((unsigned char)*cred); cred++)
        ;
    if (cred == end) {
        snprintf(err, errcap, "expected HOST:PORT USER:PASSWORD, or * USER:PASSWORD");
        return -1;
    }
    if (field_end - p == 1 && *p == '*') {
        e->any = 1;
    } else if (parse_host_port(p, field_end, e->host, &e->host_is_ip, &e->port, 1) != 0) {
        snprintf(err, errcap, "the first field is neither HOST:PORT (a name, an IPv4 address "
                 "or a bracketed IPv6 address, and a port) nor *");
        return -1;
    }
    const char *colon = memchr(cred, ':', (size_t)(end - cred));
    if (colon == NULL) {
        snprintf(err, errcap, "the credentials (***) must be USER:PASSWORD");
        return -1;
    }
    if (hv_url_percent_decode(cred, colon, e->user, sizeof(e->user)) != 0 ||
        hv_url_percent_decode(colon + 1, end, e->password, sizeof(e->password)) != 0) {
        snprintf(err, errcap, "'%.*s:***': the user and the password must be percent-encoded, "
                 "at most %d bytes each", (int)HV_MIN((size_t)(colon - cred),
                                                      (size_t)3 * HV_PROXY_CRED_MAX),
                 cred, HV_PROXY_CRED_MAX - 1);
        return -1;
    }
    return 0;
}

int hv_proxy_creds_parse(const char *text, size_t len, const char *name, hv_proxy_creds_t *out,
                         char *err, size_t errcap)
{
    hv_proxy_creds_t c = {0};
    hv_proxy_cred_t e;
    const char *p = text, *stop = text + len;
    unsigned line = 0, room = 0;
    char why[1024], shown[HV_PROXY_HOST_MAX + 16];

    memset(&e, 0, sizeof(e));
    while (p < stop) {
        const char *nl = memchr(p, '\n', (size_t)(stop - p));
        const char *end = nl != NULL ? nl : stop, *next = nl != NULL ? nl + 1 : stop;
        line++;
        if (memchr(p, '\0', (size_t)(end - p)) != NULL) {
            snprintf(why, sizeof(why), "a NUL byte");
            goto bad;
        }
        while (p < end && hv_ascii_is_blank((unsigned char)*p))
            p++;
        while (end > p && (hv_ascii_is_blank((unsigned char)end[-1]) || end[-1] == '\r'))
            end--;
        if (p == end || *p == '#') {
            p = next;
            continue;
        }
        memset(&e, 0, sizeof(e));
        if (parse_cred_line(p, end, &e, why, sizeof(why)) != 0)
            goto bad;
        e.line = line;
        for (unsigned i = 0; i < c.count; i++) {
            const hv_proxy_cred_t *o = &c.cred[i];
            if (o->any == e.any && (e.any || (o->port == e.port &&
                                              same_host(o->host, o->host_is_ip, e.host,
                                                        e.host_is_ip)))) {
                snprintf(why, sizeof(why), "a second entry for %s (the first is on line %u)",
                         cred_shown(&e, shown, sizeof(shown)), o->line);
                goto bad;
            }
        }
        if (c.count == HV_PROXY_CREDS_MAX) {
            snprintf(why, sizeof(why), "more than %d entries", HV_PROXY_CREDS_MAX);
            goto bad;
        }
        if (c.count == room) {
            /* Grown by hand, so that the array left behind is wiped before it is freed. */
            unsigned n = c.count;
            room = room == 0 ? 8 : HV_MIN(2 * room, (unsigned)HV_PROXY_CREDS_MAX);
            hv_proxy_cred_t *bigger = hv_xcalloc(room, sizeof(*bigger));
            if (n > 0)
                memcpy(bigger, c.cred, n * sizeof(*c.cred));
            hv_proxy_creds_free(&c);
            c.cred = bigger;
            c.count = n;
        }
        c.cred[c.count++] = e;
        explicit_bzero(&e, sizeof(e));
        p = next;
    }
    if (c.count == 0) {
        snprintf(err, errcap, "%s: no entry (HOST:PORT USER:PASSWORD, or * USER:PASSWORD)",
                 name);
        return -1;
    }
    *out = c;
    return 0;
bad:
    snprintf(err, errcap, "%s:%u: %s", name, line, why);
    explicit_bzero(&e, sizeof(e));
    hv_proxy_creds_free(&c);
    return -1;
}

void hv_proxy_creds_apply(hv_proxy_creds_t *c, hv_proxy_list_t *l)
{
    for (unsigned i = 0; i < l->count; i++) {
        hv_proxy_t *p = &l->proxy[i];
        hv_proxy_cred_t *own = NULL, *any = NULL;
        for (unsigned k = 0; k < c->count; k++) {
            hv_proxy_cred_t *e = &c->cred[k];
            if (e->any)
                any = e;
            else if (e->port == p->port && same_host(e->host, e->host_is_ip, p->host,
                                                     p->host_is_ip))
                own = e;
        }
        hv_proxy_cred_t *e = own != NULL ? own : any;
        if (e != NULL)
            e->matched++;
        if (p->has_auth && !p->auth_from_file)
            continue;
        explicit_bzero(p->user, sizeof(p->user));
        explicit_bzero(p->password, sizeof(p->password));
        p->has_auth = p->auth_from_file = e != NULL;
        if (e != NULL) {
            memcpy(p->user, e->user, sizeof(p->user));
            memcpy(p->password, e->password, sizeof(p->password));
        }
    }
}

int hv_proxy_creds_check(const hv_proxy_creds_t *c, const char *name, char *err, size_t errcap)
{
    char shown[HV_PROXY_HOST_MAX + 16];
    for (unsigned i = 0; i < c->count; i++) {
        const hv_proxy_cred_t *e = &c->cred[i];
        if (e->matched > 0)
            continue;
        snprintf(err, errcap, "%s:%u: %s matches no proxy of the configuration%s", name,
                 e->line, cred_shown(e, shown, sizeof(shown)),
                 e->any ? " (every proxy has an entry of its own)" : "");
        return -1;
    }
    return 0;
}

void hv_proxy_creds_free(hv_proxy_creds_t *c)
{
    if (c->cred != NULL)
        explicit_bzero(c->cred, c->count * sizeof(*c->cred));
    free(c->cred);
    memset(c, 0, sizeof(*c));
}

int hv_proxy_basic_auth(const hv_proxy_t *p, char *out, size_t cap)
{
    unsigned char plain[2 * HV_PROXY_CRED_MAX + 2];
    int n = snprintf((char *)plain, sizeof(plain), "%s:%s", p->user, p->password);
    size_t olen = 0;
    if (n < 0 || cap < 7)
        return -1;
    memcpy(out, "Basic ", 6);
    int rc = mbedtls_base64_encode((unsigned char *)out + 6, cap - 6, &olen, plain, (size_t)n);
    explicit_bzero(plain, sizeof(plain));
    return rc == 0 ? 0 : -1;
}

/* ---- no_proxy ---- */

int hv_no_proxy_parse(const char *text, hv_no_proxy_t *out, char *bad, size_t badcap)
{
    hv_no_proxy_t np;
    memset(&np, 0, sizeof(np));
    const char *p = text;
    while (*p != '\0') {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        size_t n = strcspn(p, ",");
        while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
            n--;
        if (n == 0)
            break;
        hv_cidr_t cidr;
        if (n == 1 && p[0] == '*') {
            np.all = 1;
        } else if (hv_cidr_parse(p, n, &cidr) == 0) {
            if (np.ranges.count == HV_GUARD_MAX_ALLOW)
                goto bad;
            np.ranges.cidr[np.ranges.count++] = cidr;
        } else {
            const char *name = p[0] == '.' ? p + 1 : p;
            size_t len = n - (size_t)(name - p);
            if (len == 0 || len >= sizeof(np.names[0]) || np.nnames == HV_NO_PROXY_MAX)
                goto bad;
            for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char)name[i];
                if (!(hv_ascii_is_alpha(c) || hv_ascii_is_digit(c) || c == '-' || c == '.' ||
                      c == '_'))
                    goto bad;
                np.names[np.nnames][i] = (char)hv_ascii_lower(c);
            }
            np.names[np.nnames][len] = '\0';
            np.nnames++;
        }
        p += strcspn(p, ",");
        continue;
bad:
        snprintf(bad, badcap, "%.*s", (int)n, p);
        return -1;
    }
    *out = np;
    return 0;
}

int hv_no_proxy_match(const hv_no_proxy_t *np, const char *host, int host_is_ip)
{
    if (np->all)
        return 1;
    if (host_is_ip) {
        uint8_t a[16];
        int family = strchr(host, ':') != NULL ? AF_INET6 : AF_INET;
        if (inet_pton(family, host, a) != 1)
            return 0;
        for (unsigned i = 0; i < np->ranges.count; i++)
            if (hv_cidr_contains(&np->ranges.cidr[i], family, a))
                return 1;
    }
    size_t hlen = strlen(host);
    for (unsigned i = 0; i < np->nnames; i++) {
        size_t n = strlen(np->names[i]);
        if (hlen == n ? strcmp(host, np->names[i]) == 0
                      : hlen > n && host[hlen - n - 1] == '.' &&
                            strcmp(host + hlen - n, np->names[i]) == 0)
            return 1;
    }
    return 0;
}

int hv_no_proxy_format(const hv_no_proxy_t *np, char *out, size_t cap)
{
    size_t n = 0;
    int first = 1;
    if (cap == 0)
        return -1;
    out[0] = '\0';
#define PUT(...)                                                                          \
    do {                                                                                  \
        int w_ = snprintf(out + n, cap - n, __VA_ARGS__);                                 \
        if (w_ < 0 || (size_t)w_ >= cap - n)                                              \
            return -1;                                                                    \
        n += (size_t)w_;                                                                  \
        first = 0;                                                                        \
    } while (0)
    if (np->all)
        PUT("*");
    for (unsigned i = 0; i < np->nnames; i++)
        PUT("%s%s", first ? "" : ", ", np->names[i]);
    for (unsigned i = 0; i < np->ranges.count; i++) {
        char one[64];
        if (hv_cidr_format(&np->ranges.cidr[i], one, sizeof(one)) != 0)
            return -1;
        PUT("%s%s", first ? "" : ", ", one);
    }
#undef PUT
    return 0;
}
