/* redisurl.c: redis:// URLs (see redisurl.h). */
#include "harvestd/redisurl.h"

#include <stdio.h>
#include <string.h>

#include "harvestd/common.h"

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
