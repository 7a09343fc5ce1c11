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
    const char *host = p, *host_end;
    if (*p == '[') {
        host = p + 1;
        host_end = memchr(host, ']', (size_t)(end - host));
        if (host_end == NULL)
            goto bad;
        p = host_end + 1;
    } else {
        host_end = p + strcspn(p, ":/");
        if (host_end > end)
            host_end = end;
        p = host_end;
    }
    size_t hlen = (size_t)(host_end - host);
    if (hlen == 0 || hlen >= sizeof(out->host))
        goto bad;
    memcpy(out->host, host, hlen);
    out->host[hlen] = '\0';
    for (char *c = out->host; *c != '\0'; c++) {
        unsigned char ch = (unsigned char)*c;
        if (!(hv_ascii_is_alpha(ch) || hv_ascii_is_digit(ch) || ch == '.' || ch == '-' ||
              ch == ':' || ch == '_'))
            goto bad;
        *c = (char)hv_ascii_lower(ch);
    }
    struct in6_addr a6;
    struct in_addr a4;
    out->host_is_ip = inet_pton(AF_INET, out->host, &a4) == 1 ||
                      inet_pton(AF_INET6, out->host, &a6) == 1;
    if (strchr(out->host, ':') != NULL && !out->host_is_ip)
        goto bad;
    if (p < end && *p == ':') {
        char *num_end;
        unsigned long port = strtoul(p + 1, &num_end, 10);
        if (num_end == p + 1 || num_end != end || port == 0 || port > 65535)
            goto bad;
        out->port = (uint16_t)port;
    } else if (p != end) {
        goto bad;
    }
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
        int w = snprintf(out + n, cap - n, "%s%.*s%s%s%s", i > 0 ? ", " : "",
                         (int)(rest - p->shown), p->shown, p->has_auth ? p->user : "",
                         p->has_auth ? ":***@" : "", rest);
        if (w < 0 || (size_t)w >= cap - n)
            return -1;
        n += (size_t)w;
    }
    return 0;
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
