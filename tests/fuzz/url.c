/*
 * url: input lines and redirect targets (url.h).
 *
 * The input is a URL file: lines split at '\n', trimmed and skipped as the reader does
 * (reader.h: surrounding whitespace, blank lines, '#' comments), each parsed as an input line
 * (hv_url_parse, and hv_url_parse_detail, which must agree with it). Every raw line, untrimmed,
 * is also resolved as a Location value (hv_url_resolve) against the last line that parsed,
 * or a fixed base before the first, as fetch.c does for each redirect.
 *
 * What url.h promises of every URL it returns, checked on each:
 *   - every string is ASCII without controls or spaces, href has no fragment, the target
 *     starts with '/', the authority is the host (bracketed for IPv6) plus a non-default port;
 *   - href is what the fields spell ("scheme://" authority target);
 *   - the result is normalised: parsing its href gives the same URL again, and resolving it
 *     (absolute) or "" against it gives it back.
 */
#include <string.h>

#include "fuzz.h"
#include "harvestd/common.h"
#include "harvestd/detail.h"
#include "harvestd/url.h"

static int url_eq(const hv_url_t *a, const hv_url_t *b)
{
    return a->scheme == b->scheme && strcmp(a->host, b->host) == 0 &&
           a->host_is_ip == b->host_is_ip && a->host_is_ipv6 == b->host_is_ipv6 &&
           a->port == b->port && strcmp(a->authority, b->authority) == 0 &&
           strcmp(a->target, b->target) == 0 && strcmp(a->href, b->href) == 0;
}

static void check_text(const char *what, const char *s, const char *href)
{
    FUZZ_CHECK(s != NULL, "%s is NULL (href %s)", what, href ? href : "(null)");
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++)
        FUZZ_CHECK(*p > 0x20 && *p < 0x7f, "%s holds byte 0x%02x: \"%s\"", what, *p, s);
}

/* Everything url.h says about a URL it handed out. */
static void check_url(const hv_url_t *u)
{
    check_text("href", u->href, u->href);
    check_text("host", u->host, u->href);
    check_text("authority", u->authority, u->href);
    check_text("target", u->target, u->href);
    FUZZ_CHECK(u->scheme == HV_SCHEME_HTTP || u->scheme == HV_SCHEME_HTTPS, "scheme %d",
               (int)u->scheme);
    FUZZ_CHECK(u->host[0] != '\0', "empty host in %s", u->href);
    FUZZ_CHECK(u->port != 0, "port 0 in %s", u->href);
    FUZZ_CHECK(u->target[0] == '/', "target \"%s\"", u->target);
    FUZZ_CHECK(strchr(u->href, '#') == NULL, "fragment in %s", u->href);
    FUZZ_CHECK(strchr(u->host, '%') == NULL, "'%%' in host %s", u->host);
    FUZZ_CHECK(strchr(u->host, '@') == NULL, "userinfo in %s", u->href);
    FUZZ_CHECK(!u->host_is_ipv6 || u->host_is_ip, "IPv6 but not IP: %s", u->href);
    FUZZ_CHECK(strlen(u->href) <= HV_URL_MAX, "href of %zu bytes", strlen(u->href));
    for (const char *p = u->host; *p != '\0'; p++)
        FUZZ_CHECK(!(*p >= 'A' && *p <= 'Z'), "host not lower-cased: %s", u->host);

    /* The authority: host, bracketed if IPv6, and ":port" unless it is the scheme's default. */
    char auth[HV_URL_MAX + 16];
    uint16_t def = u->scheme == HV_SCHEME_HTTPS ? 443 : 80;
    int n;
    if (u->port == def)
        n = snprintf(auth, sizeof(auth), u->host_is_ipv6 ? "[%s]" : "%s", u->host);
    else
        n = snprintf(auth, sizeof(auth), u->host_is_ipv6 ? "[%s]:%u" : "%s:%u", u->host,
                     (unsigned)u->port);
    FUZZ_CHECK(n > 0 && (size_t)n < sizeof(auth), "authority too long");
    FUZZ_CHECK(strcmp(auth, u->authority) == 0, "authority \"%s\", expected \"%s\"",
               u->authority, auth);

    /* href = scheme "://" authority target */
    const char *scheme = u->scheme == HV_SCHEME_HTTPS ? "https://" : "http://";
    size_t sl = strlen(scheme), al = strlen(u->authority);
    FUZZ_CHECK(strncmp(u->href, scheme, sl) == 0 && strncmp(u->href + sl, u->authority, al) == 0 &&
                   strcmp(u->href + sl + al, u->target) == 0,
               "href %s is not %s%s%s", u->href, scheme, u->authority, u->target);

    /* Normalised: the href parses back to the same URL. */
    hv_url_t again;
    const char *why = NULL;
    int rc = hv_url_parse(&again, u->href, strlen(u->href), &why);
    FUZZ_CHECK(rc == 0, "href %s does not parse again: %s", u->href, why);
    FUZZ_CHECK(url_eq(u, &again), "href %s parses to %s", u->href, again.href);
    hv_url_free(&again);

    /* An absolute URL resolves to itself against any base, and "" to the base itself. */
    rc = hv_url_resolve(&again, u, u->href, strlen(u->href), &why);
    FUZZ_CHECK(rc == 0 && url_eq(u, &again), "%s resolved against itself: %s", u->href,
               rc == 0 ? again.href : why);
    hv_url_free(&again);
    rc = hv_url_resolve(&again, u, "", 0, &why);
    FUZZ_CHECK(rc == 0 && url_eq(u, &again), "\"\" against %s: %s", u->href,
               rc == 0 ? again.href : why);
    hv_url_free(&again);
}

static void check_failed(const hv_url_t *u, int rc, const char *why)
{
    FUZZ_CHECK(rc == HV_EURL || rc == HV_ESCHEME, "result %d", rc);
    FUZZ_CHECK(why != NULL && why[0] != '\0', "no reason for %d", rc);
    FUZZ_CHECK((rc == HV_ESCHEME) == (strcmp(why, "unsupported_scheme") == 0), "%d with %s", rc,
               why);
    FUZZ_CHECK(u->href == NULL && u->host == NULL && u->authority == NULL && u->target == NULL,
               "a failed result holds strings");
}

static int is_trim_space(unsigned char c)
{
    return hv_ascii_is_ctype_space(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char fixed_base[] = "https://example.com:8443/dir/page?x=1";
    hv_url_t base, u;
    const char *why = NULL;

    FUZZ_CHECK(hv_url_parse(&base, fixed_base, strlen(fixed_base), &why) == 0, "fixed base");

    size_t pos = 0;
    while (pos < size) {
        const uint8_t *nl = memchr(data + pos, '\n', size - pos);
        size_t end = nl != NULL ? (size_t)(nl - data) : size;
        /* Each line in a buffer of its own size, so that reads past it are caught. */
        char *raw = fuzz_strndup(data + pos, end - pos);
        size_t raw_len = end - pos;
        pos = end + 1;

        /* As a Location value against the current base. */
        why = NULL;
        int rc = hv_url_resolve(&u, &base, raw, raw_len, &why);
        if (rc == 0)
            check_url(&u);
        else
            check_failed(&u, rc, why);
        hv_url_free(&u);

        /* As an input line. */
        const char *s = raw;
        size_t len = raw_len;
        while (len > 0 && is_trim_space((unsigned char)*s)) {
            s++;
            len--;
        }
        while (len > 0 && is_trim_space((unsigned char)s[len - 1]))
            len--;
        if (len == 0 || *s == '#') {
            free(raw);
            continue;
        }
        char *line = fuzz_strndup(s, len);
        why = NULL;
        rc = hv_url_parse(&u, line, len, &why);
        hv_url_t u2;
        hv_detail_t code = HV_D_NONE;
        int rc2 = hv_url_parse_detail(&u2, line, len, &code);
        FUZZ_CHECK(rc == rc2, "parse %d, parse_detail %d", rc, rc2);
        if (rc == 0) {
            check_url(&u);
            FUZZ_CHECK(url_eq(&u, &u2), "parse and parse_detail differ");
            hv_url_free(&base);
            base = u; /* the next redirect resolves against this one */
            memset(&u, 0, sizeof(u));
        } else {
            check_failed(&u, rc, why);
            FUZZ_CHECK(strcmp(hv_detail_str(code), why) == 0, "code %d is \"%s\", reason \"%s\"",
                       (int)code, hv_detail_str(code), why);
        }
        hv_url_free(&u);
        hv_url_free(&u2);
        free(line);
        free(raw);
    }
    hv_url_free(&base);
    return 0;
}
