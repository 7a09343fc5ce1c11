/* redisurl.c: redis:// and rediss:// URLs, and the password file (see redisurl.h). */
#include "harvestd/redisurl.h"

#include <stdio.h>
#include <string.h>

#include "harvestd/common.h"
#include "harvestd/secretfile.h"
#include "harvestd/url.h"

const char *hv_redis_url_mask(const char *url, char *out, size_t cap)
{
    return hv_url_mask_userinfo(url, out, cap);
}

int hv_redis_url_parse(const char *url, hv_redis_addr_t *out, char *err, size_t errcap)
{
    char shown[HV_REDIS_URL_SHOWN_MAX];
    hv_redis_addr_t a;
    const char *p;
    hv_redis_url_mask(url, shown, sizeof(shown));
    memset(&a, 0, sizeof(a));
    a.port = 6379; /* also for rediss: Redis has no port of its own for TLS */
    if (strncmp(url, "redis://", 8) == 0) {
        p = url + 8;
    } else if (strncmp(url, "rediss://", 9) == 0) {
        p = url + 9;
        a.tls = 1;
    } else {
        snprintf(err, errcap, "'%s' is not a redis://HOST[:PORT][/DB] URL (nor rediss:// for "
                 "TLS)", shown);
        return -1;
    }
    const char *host_end;
    const char *at = strrchr(p, '@');
    if (at != NULL) {
        const char *colon = memchr(p, ':', (size_t)(at - p));
        if (colon == NULL) {
            snprintf(err, errcap, "'%s': the part before '@' needs a ':' (USER:PASSWORD, or "
                     ":PASSWORD for the default user)", shown);
            return -1;
        }
        if (hv_url_percent_decode(p, colon, a.user, sizeof(a.user)) != 0 ||
            hv_url_percent_decode(colon + 1, at, a.password, sizeof(a.password)) != 0) {
            snprintf(err, errcap, "'%s': the user or the password has a bad %%-escape, a NUL "
                     "byte, or is too long (%d and %d bytes at most)", shown,
                     HV_REDIS_USER_MAX - 1, HV_REDIS_PASSWORD_MAX - 1);
            goto fail;
        }
        p = at + 1;
    }
    if (strpbrk(p, "?#") != NULL) {
        snprintf(err, errcap, "'%s': a query or fragment is not supported", shown);
        goto fail;
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
    explicit_bzero(&a, sizeof(a)); /* the password's copy on the stack */
    return 0;
bad:
    snprintf(err, errcap, "'%s' is not a redis://HOST[:PORT][/DB] URL", shown);
fail:
    explicit_bzero(&a, sizeof(a));
    return -1;
}

int hv_redis_password_read(const char *path, char *out, size_t cap, char *err, size_t errcap)
{
    char buf[HV_REDIS_PASSWORD_MAX + 2];
    size_t len = 0;
    const char *nl = NULL;
    int rc = -1;

    /* The longest password and a CR LF, and one byte more to tell a longer file. */
    cap = HV_MIN(cap, sizeof(buf) - 2);
    if (hv_secret_file_read(path, "password file", buf, cap + 2, &len, err, errcap) != 0)
        goto out;
    nl = memchr(buf, '\n', len);
    if (nl != NULL && (size_t)(nl - buf) + 1 < len) {
        snprintf(err, errcap, "the password file %s has more than one line", path);
        goto out;
    }
    if (nl != NULL)
        len = (size_t)(nl - buf);
    if (len > 0 && buf[len - 1] == '\r')
        len--;
    if (len == 0) {
        snprintf(err, errcap, "the password file %s is empty", path);
        goto out;
    }
    if (len > cap - 1) {
        snprintf(err, errcap, "the password file %s holds more than %zu bytes", path, cap - 1);
        goto out;
    }
    if (memchr(buf, '\0', len) != NULL) {
        snprintf(err, errcap, "the password file %s has a NUL byte", path);
        goto out;
    }
    memcpy(out, buf, len);
    out[len] = '\0';
    rc = 0;
out:
    explicit_bzero(buf, sizeof(buf));
    return rc;
}

int hv_redis_url_load(const char *url, const char *password_file, hv_redis_addr_t *out,
                      char *err, size_t errcap)
{
    if (hv_redis_url_parse(url, out, err, errcap) != 0)
        return HV_REDIS_LOAD_URL;
    if (password_file != NULL &&
        hv_redis_password_read(password_file, out->password, sizeof(out->password), err,
                               errcap) != 0) {
        explicit_bzero(out->password, sizeof(out->password));
        return HV_REDIS_LOAD_PASSWORD_FILE;
    }
    if (out->user[0] != '\0' && out->password[0] == '\0') {
        char shown[HV_REDIS_URL_SHOWN_MAX];
        snprintf(err, errcap, "'%s': user %s has no password: give it in the URL "
                 "(USER:PASSWORD@) or in a password file",
                 hv_redis_url_mask(url, shown, sizeof(shown)), out->user);
        return HV_REDIS_LOAD_URL;
    }
    return 0;
}
