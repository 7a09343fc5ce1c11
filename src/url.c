/* url.c: http(s) URL validation, normalisation and redirect resolution on top of uriparser. */
#include "harvestd/url.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <idn2.h>
#include <uriparser/Uri.h>

#include "harvestd/common.h"
#include "harvestd/utf8.h"

/* The text of HV_D_LINE_EXCEEDS_8_KIB spells the limit out; keep them in step. */
_Static_assert(HV_URL_MAX == 8192, "detail \"line_exceeds_8_kib\" names HV_URL_MAX");

#define HV_URL_HTTP_PORT 80
#define HV_URL_HTTPS_PORT 443

/* Where the parts of a reference start and end, found without a full parse. */
typedef struct {
    size_t len;        /* bytes before the fragment ('#' and after are dropped) */
    size_t scheme_len; /* 0 if there is no scheme */
    size_t path_end;   /* first '?' (or len): '\\' counts as '/' before it */
    size_t auth_start; /* authority range; auth_start == auth_end == 0 if absent */
    size_t auth_end;
    int has_authority;
} hv_url_layout_t;

/*
 * Bytes that uriparser refuses anywhere in a path or query, and which browsers percent-encode
 * (or pass through raw) instead of failing: controls, space, non-ASCII and the ASCII
 * characters RFC 3986 reserves for other uses or leaves out altogether. '%' is handled by
 * the caller because a valid escape must survive as it is.
 */
static int hv_url_needs_escape(unsigned char c)
{
    if (c <= 0x20 || c >= 0x7F)
        return 1;
    switch (c) {
    case '"':
    case '<':
    case '>':
    case '\\':
    case '^':
    case '`':
    case '{':
    case '|':
    case '}':
    case '[':
    case ']':
        return 1;
    default:
        return 0;
    }
}

static int hv_url_is_slash(const char *s, size_t i, const hv_url_layout_t *l)
{
    return s[i] == '/' || (s[i] == '\\' && i < l->path_end);
}

/*
 * Split [s, s+len) into scheme, authority and the rest, the way the URL will be read once
 * '\\' before the query has become '/' (browsers treat the two alike in http(s) URLs, so
 * "http:\\\\host\\a" and a Location of "\\\\host\\a" mean what a browser makes of them).
 */
static void hv_url_layout(const char *s, size_t len, hv_url_layout_t *l)
{
    const char *hash = memchr(s, '#', len);
    memset(l, 0, sizeof(*l));
    l->len = hash != NULL ? (size_t)(hash - s) : len;

    const char *q = memchr(s, '?', l->len);
    l->path_end = q != NULL ? (size_t)(q - s) : l->len;

    /* scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":" */
    size_t i = 0;
    if (l->len > 0 && hv_ascii_is_alpha((unsigned char)s[0])) {
        i = 1;
        while (i < l->len &&
               (hv_ascii_is_alpha((unsigned char)s[i]) || hv_ascii_is_digit((unsigned char)s[i]) ||
                s[i] == '+' || s[i] == '-' || s[i] == '.'))
            i++;
        if (i < l->len && s[i] == ':') {
            l->scheme_len = i;
            i++;
        } else {
            i = 0;
        }
    }

    if (i + 1 < l->path_end && hv_url_is_slash(s, i, l) && hv_url_is_slash(s, i + 1, l)) {
        size_t a = i + 2, e = a;
        while (e < l->len && !hv_url_is_slash(s, e, l) && s[e] != '?')
            e++;
        l->has_authority = 1;
        l->auth_start = a;
        l->auth_end = e;
    }
}

static int hv_url_scheme_ok(const char *s, size_t len)
{
    return hv_ascii_case_is(s, len, "http") || hv_ascii_case_is(s, len, "https");
}

static int hv_url_prepare(const char *s, size_t len, char **out, size_t *out_len,
                          hv_detail_t *reason);

/*
 * The authority of [s, s+len) holds non-ASCII bytes: an internationalised host name. It is
 * converted to its ASCII form (IDNA 2008 with UTS #46 non-transitional mapping, as browsers
 * do: "café.example" is "xn--caf-dma.example"), then the URL is prepared as any other.
 * Non-ASCII bytes in credentials or a port are refused (non_ascii_host), and so is what IDNA
 * refuses (invalid_host).
 */
static int hv_url_prepare_idn(const char *s, size_t len, const hv_url_layout_t *l, char **out,
                              size_t *out_len, hv_detail_t *reason)
{
    size_t host_start = l->auth_start, host_end = l->auth_end;
    for (size_t i = l->auth_start; i < l->auth_end; i++)
        if (s[i] == '@')
            host_start = i + 1;
    for (size_t i = host_start; i < host_end; i++) {
        if (s[i] == ':') {
            host_end = i;
            break;
        }
    }
    for (size_t i = l->auth_start; i < l->auth_end; i++) {
        if ((unsigned char)s[i] >= 0x80 && (i < host_start || i >= host_end)) {
            *reason = HV_D_NON_ASCII_HOST;
            return HV_EURL;
        }
    }
    char *name = hv_xstrndup(s + host_start, host_end - host_start), *ace = NULL;
    int rc = idn2_to_ascii_8z(name, &ace, IDN2_NONTRANSITIONAL | IDN2_NFC_INPUT);
    free(name);
    if (rc != IDN2_OK) {
        *reason = HV_D_INVALID_HOST;
        return HV_EURL;
    }
    size_t ace_len = strlen(ace);
    size_t n = host_start + ace_len + (len - host_end);
    char *text = hv_xmalloc(n + 1);
    memcpy(text, s, host_start);
    memcpy(text + host_start, ace, ace_len);
    memcpy(text + host_start + ace_len, s + host_end, len - host_end);
    text[n] = '\0';
    idn2_free(ace);
    rc = hv_url_prepare(text, n, out, out_len, reason);
    free(text);
    return rc;
}

/*
 * Rewrite [s, s+len) into a string uriparser accepts: the fragment is cut off (records never
 * carry it), '\\' before the query becomes '/', and every byte uriparser would refuse in the
 * path or query is percent-encoded, including a '%' that does not start a valid escape
 * ("100%" becomes "100%25", which is what the author meant). The scheme and authority are
 * copied as they are (an internationalised host in its ASCII form, see above); anything odd
 * in the authority is left for uriparser to refuse. *out is malloc'd and NUL-terminated.
 */
static int hv_url_prepare(const char *s, size_t len, char **out, size_t *out_len,
                          hv_detail_t *reason)
{
    hv_url_layout_t l;
    hv_url_layout(s, len, &l);

    if (l.has_authority) {
        for (size_t i = l.auth_start; i < l.auth_end; i++) {
            if ((unsigned char)s[i] >= 0x80)
                return hv_url_prepare_idn(s, len, &l, out, out_len, reason);
        }
    }

    static const char hex[] = "0123456789ABCDEF";
    char *buf = hv_xmalloc(l.len * 3 + 1);
    size_t o = 0;
    for (size_t i = 0; i < l.len; i++) {
        unsigned char c = (unsigned char)s[i];
        int in_prefix = i < l.scheme_len + 1 && l.scheme_len > 0;
        int in_auth = l.has_authority && i >= l.auth_start && i < l.auth_end;
        if (in_prefix || in_auth) {
            buf[o++] = (char)c;
        } else if (c == '\\' && i < l.path_end) {
            buf[o++] = '/';
        } else if (c == '%' && i + 2 < l.len && hv_ascii_is_hex((unsigned char)s[i + 1]) &&
                   hv_ascii_is_hex((unsigned char)s[i + 2])) {
            buf[o++] = '%';
        } else if (c == '%' || hv_url_needs_escape(c)) {
            buf[o++] = '%';
            buf[o++] = hex[c >> 4];
            buf[o++] = hex[c & 0x0F];
        } else {
            buf[o++] = (char)c;
        }
    }
    buf[o] = '\0';
    *out = buf;
    *out_len = o;
    return 0;
}

static size_t hv_url_range_len(const UriTextRangeA *r)
{
    return r->first != NULL ? (size_t)(r->afterLast - r->first) : 0;
}

/* Copy `n` bytes to *p and advance it. */
static void hv_url_put(char **p, const char *s, size_t n)
{
    memcpy(*p, s, n);
    *p += n;
}

/* Whether a registered name can be looked up in the DNS: labels of 1 to 63 octets, 253 in
 * all, one trailing dot allowed (an absolute name). */
static int dns_name_ok(const char *name, size_t len)
{
    if (len > 0 && name[len - 1] == '.')
        len--;
    if (len == 0 || len > 253)
        return 0;
    size_t label = 0;
    for (size_t i = 0; i < len; i++) {
        if (name[i] != '.') {
            label++;
            continue;
        }
        if (label == 0 || label > 63)
            return 0;
        label = 0;
    }
    return label > 0 && label <= 63;
}

/* One part of an IPv4 host: decimal, octal after a leading 0, hex after "0x" ("0x" alone is
 * 0). -1 if it is not a number; values past 2^32 saturate (and are then too large). */
static int64_t ipv4_number(const char *s, size_t len)
{
    unsigned base = 10;
    if (len >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        base = 16;
        s += 2;
        len -= 2;
    } else if (len >= 2 && s[0] == '0') {
        base = 8;
        s++;
        len--;
    }
    if (len == 0 && base != 16)
        return -1;
    int64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        int d = base == 16 || hv_ascii_is_digit(c) ? hv_ascii_hex_value(c) : -1;
        if (d < 0 || (unsigned)d >= base)
            return -1;
        v = v * base + d;
        if (v > UINT32_MAX)
            v = (int64_t)UINT32_MAX + 1;
    }
    return v;
}

/*
 * The WHATWG URL Standard's IPv4 host parser: a host whose last label is a number (all
 * digits, or "0x" and hex digits; a trailing dot is ignored) is an IPv4 address of 1 to 4
 * parts, where the last part fills the bytes the others leave ("127.1", "2130706433"). That
 * is how inet_aton(), and so getaddrinfo(), read such hosts too. 1 with *out set (network
 * order); 0 for a host that does not end in a number (a name); -1 for one that does but is no
 * address ("1.2.3.4.5", "256.0.0.1", "example.123"), which is an invalid host.
 */
static int ipv4_parse(const char *host, size_t len, uint32_t *out)
{
    const char *part[5];
    size_t plen[5], n = 0;
    if (len > 0 && host[len - 1] == '.')
        len--;
    if (len == 0)
        return 0;
    const char *last = host + len;
    while (last > host && last[-1] != '.')
        last--;
    size_t last_len = (size_t)(host + len - last), digits = 0, xdigits = 0;
    for (size_t i = 0; i < last_len; i++) {
        digits += hv_ascii_is_digit((unsigned char)last[i]) != 0;
        xdigits += i >= 2 && hv_ascii_is_hex((unsigned char)last[i]);
    }
    int hex = last_len >= 2 && last[0] == '0' && (last[1] == 'x' || last[1] == 'X') &&
              xdigits == last_len - 2;
    if (!hex && (last_len == 0 || digits != last_len))
        return 0;
    for (const char *p = host, *end = host + len;;) {
        const char *dot = memchr(p, '.', (size_t)(end - p));
        if (n == 4)
            return -1;
        part[n] = p;
        plen[n++] = dot != NULL ? (size_t)(dot - p) : (size_t)(end - p);
        if (dot == NULL)
            break;
        p = dot + 1;
    }
    uint64_t addr = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t v = ipv4_number(part[i], plen[i]);
        uint64_t room = i + 1 < n ? 256 : UINT64_C(1) << (8 * (5 - n));
        if (v < 0 || (uint64_t)v >= room)
            return -1;
        addr = i + 1 < n ? addr | (uint64_t)v << (8 * (3 - i)) : addr + (uint64_t)v;
    }
    *out = htonl((uint32_t)addr);
    return 1;
}

/*
 * Turn a parsed, resolved and normalised absolute URI into `u`. The host is taken from the
 * original text, lower-cased: uriparser would print an IPv6 literal fully expanded.
 */


static int hv_url_from_uri(hv_url_t *u, const UriUriA *uri, hv_detail_t *reason)
{
    size_t scheme_len = hv_url_range_len(&uri->scheme);
    if (scheme_len == 0) {
        *reason = HV_D_NOT_ABSOLUTE;
        return HV_EURL;
    }
    hv_scheme_t scheme;
    if (hv_ascii_case_is(uri->scheme.first, scheme_len, "http")) {
        scheme = HV_SCHEME_HTTP;
    } else if (hv_ascii_case_is(uri->scheme.first, scheme_len, "https")) {
        scheme = HV_SCHEME_HTTPS;
    } else {
        *reason = HV_D_UNSUPPORTED_SCHEME;
        return HV_ESCHEME;
    }

    /* Credentials would end up in records and logs, and a fetcher has no use for them. */
    if (uri->userInfo.first != NULL) {
        *reason = HV_D_USERINFO_NOT_SUPPORTED;
        return HV_EURL;
    }
    if (uri->hostData.ipFuture.first != NULL) {
        *reason = HV_D_MALFORMED;
        return HV_EURL;
    }
    size_t host_len = hv_url_range_len(&uri->hostText);
    if (host_len == 0) {
        *reason = HV_D_EMPTY_HOST;
        return HV_EURL;
    }
    /* A percent-escape in a host only makes sense for IDN in UTF-8, which we refuse in raw
     * form as well; a DNS name never contains '%'. */
    if (memchr(uri->hostText.first, '%', host_len) != NULL) {
        *reason = HV_D_INVALID_HOST;
        return HV_EURL;
    }

    int is_ipv6 = uri->hostData.ip6 != NULL;
    int is_ipv4 = uri->hostData.ip4 != NULL;
    if (is_ipv6 && uri->hostData.ip6->data[0] == 0xfe && (uri->hostData.ip6->data[1] & 0xc0) == 0x80) {
        /* fe80::/10 means nothing without the interface it belongs to (a zone). */
        *reason = HV_D_INVALID_HOST;
        return HV_EURL;
    }
    const char *host_src = uri->hostText.first;
    char v4text[INET_ADDRSTRLEN];
    if (!is_ipv6 && !is_ipv4) {
        /* "2130706433", "0x7f.1", "0177.0.0.1", "127.0.0.1.": the addresses resolvers read
         * them as, spelled the one way the address guard and the Host header expect. */
        struct in_addr a;
        int v4 = ipv4_parse(host_src, host_len, &a.s_addr);
        if (v4 < 0) {
            *reason = HV_D_INVALID_HOST;
            return HV_EURL;
        }
        if (v4 > 0) {
            inet_ntop(AF_INET, &a, v4text, sizeof(v4text));
            host_src = v4text;
            host_len = strlen(v4text);
            is_ipv4 = 1;
        } else if (!dns_name_ok(host_src, host_len)) {
            *reason = HV_D_INVALID_HOST;
            return HV_EURL;
        }
    }

    uint16_t def_port = scheme == HV_SCHEME_HTTPS ? HV_URL_HTTPS_PORT : HV_URL_HTTP_PORT;
    unsigned long port = def_port;
    size_t port_len = hv_url_range_len(&uri->portText);
    if (port_len > 0) {
        /* uriparser checks that the port is all digits but not its range. */
        port = 0;
        for (size_t i = 0; i < port_len; i++) {
            unsigned char c = (unsigned char)uri->portText.first[i];
            if (!hv_ascii_is_digit(c)) {
                *reason = HV_D_INVALID_PORT;
                return HV_EURL;
            }
            port = port * 10 + (unsigned long)(c - '0');
            if (port > 65535) {
                *reason = HV_D_INVALID_PORT;
                return HV_EURL;
            }
        }
        if (port == 0) {
            *reason = HV_D_INVALID_PORT;
            return HV_EURL;
        }
    }

    char port_text[8] = "";
    size_t port_text_len = 0;
    if (port != def_port) {
        int n = snprintf(port_text, sizeof(port_text), ":%lu", port);
        if (n < 0 || (size_t)n >= sizeof(port_text)) {
            *reason = HV_D_INVALID_PORT;
            return HV_EURL;
        }
        port_text_len = (size_t)n;
    }

    size_t path_len = 0;
    for (const UriPathSegmentA *seg = uri->pathHead; seg != NULL; seg = seg->next)
        path_len += 1 + hv_url_range_len(&seg->text);
    if (path_len == 0)
        path_len = 1;
    size_t query_len = uri->query.first != NULL ? 1 + hv_url_range_len(&uri->query) : 0;
    size_t auth_len = host_len + (is_ipv6 ? 2 : 0) + port_text_len;
    const char *scheme_text = scheme == HV_SCHEME_HTTPS ? "https://" : "http://";
    size_t href_len = strlen(scheme_text) + auth_len + path_len + query_len;
    if (href_len > HV_URL_MAX) {
        *reason = HV_D_URL_TOO_LONG;
        return HV_EURL;
    }

    char *host = hv_xmalloc(host_len + 1);
    for (size_t i = 0; i < host_len; i++)
        host[i] = (char)hv_ascii_lower((unsigned char)host_src[i]);
    host[host_len] = '\0';

    char *authority = hv_xmalloc(auth_len + 1);
    char *p = authority;
    if (is_ipv6)
        hv_url_put(&p, "[", 1);
    hv_url_put(&p, host, host_len);
    if (is_ipv6)
        hv_url_put(&p, "]", 1);
    hv_url_put(&p, port_text, port_text_len);
    *p = '\0';

    char *target = hv_xmalloc(path_len + query_len + 1);
    p = target;
    if (uri->pathHead == NULL) {
        hv_url_put(&p, "/", 1);
    } else {
        for (const UriPathSegmentA *seg = uri->pathHead; seg != NULL; seg = seg->next) {
            hv_url_put(&p, "/", 1);
            hv_url_put(&p, seg->text.first, hv_url_range_len(&seg->text));
        }
    }
    if (uri->query.first != NULL) {
        hv_url_put(&p, "?", 1);
        hv_url_put(&p, uri->query.first, hv_url_range_len(&uri->query));
    }
    *p = '\0';

    char *href = hv_xmalloc(href_len + 1);
    p = href;
    hv_url_put(&p, scheme_text, strlen(scheme_text));
    hv_url_put(&p, authority, auth_len);
    hv_url_put(&p, target, path_len + query_len);
    *p = '\0';

    u->scheme = scheme;
    u->host = host;
    u->host_is_ip = is_ipv4 || is_ipv6;
    u->host_is_ipv6 = is_ipv6;
    u->port = (uint16_t)port;
    u->authority = authority;
    u->target = target;
    u->href = href;
    return 0;
}

int hv_url_parse_detail(hv_url_t *u, const char *text, size_t len, hv_detail_t *reason)
{
    hv_detail_t why = HV_D_NONE;
    char *prepared = NULL;
    size_t prepared_len = 0;
    UriUriA uri;
    int have_uri = 0;
    int rc;

    memset(u, 0, sizeof(*u));

    if (len > HV_URL_MAX) {
        why = HV_D_LINE_EXCEEDS_8_KIB;
        rc = HV_EURL;
        goto out;
    }
    if (len == 0) {
        why = HV_D_NOT_ABSOLUTE;
        rc = HV_EURL;
        goto out;
    }
    if (!hv_utf8_valid(text, len)) {
        why = HV_D_INVALID_UTF8;
        rc = HV_EURL;
        goto out;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c < 0x20 || c == 0x7F) {
            why = HV_D_CONTROL_CHARACTER;
            rc = HV_EURL;
            goto out;
        }
    }
    if (memchr(text, ' ', len) != NULL) {
        why = HV_D_CONTAINS_SPACE;
        rc = HV_EURL;
        goto out;
    }

    /* Look at the scheme before uriparser does, so that "ftp://x/{" is reported as an
     * unsupported scheme rather than as malformed. */
    hv_url_layout_t l;
    hv_url_layout(text, len, &l);
    if (l.scheme_len == 0) {
        why = HV_D_NOT_ABSOLUTE;
        rc = HV_EURL;
        goto out;
    }
    if (!hv_url_scheme_ok(text, l.scheme_len)) {
        why = HV_D_UNSUPPORTED_SCHEME;
        rc = HV_ESCHEME;
        goto out;
    }

    rc = hv_url_prepare(text, len, &prepared, &prepared_len, &why);
    if (rc != 0)
        goto out;
    if (uriParseSingleUriExA(&uri, prepared, prepared + prepared_len, NULL) != URI_SUCCESS) {
        why = HV_D_MALFORMED;
        rc = HV_EURL;
        goto out;
    }
    have_uri = 1;
    if (uriNormalizeSyntaxExA(&uri, URI_NORMALIZE_PATH) != URI_SUCCESS) {
        why = HV_D_MALFORMED;
        rc = HV_EURL;
        goto out;
    }
    rc = hv_url_from_uri(u, &uri, &why);

out:
    if (have_uri)
        uriFreeUriMembersA(&uri);
    free(prepared);
    if (rc != 0 && reason != NULL)
        *reason = why;
    return rc;
}

/*
 * Location values are cleaned the way the WHATWG URL parser does before anything else:
 * leading and trailing C0 controls and spaces go, and tabs and newlines anywhere go.
 */
static char *hv_url_clean_ref(const char *ref, size_t len, size_t *out_len)
{
    while (len > 0 && (unsigned char)ref[0] <= 0x20) {
        ref++;
        len--;
    }
    while (len > 0 && (unsigned char)ref[len - 1] <= 0x20)
        len--;
    char *buf = hv_xmalloc(len + 1);
    size_t o = 0;
    for (size_t i = 0; i < len; i++)
        if (ref[i] != '\t' && ref[i] != '\n' && ref[i] != '\r')
            buf[o++] = ref[i];
    buf[o] = '\0';
    *out_len = o;
    return buf;
}

/* hv_url_resolve(), with the reason as a code. */
static int hv_url_resolve_detail(hv_url_t *out, const hv_url_t *base, const char *ref,
                                 size_t len, hv_detail_t *reason)
{
    hv_detail_t why = HV_D_NONE;
    char *clean = NULL, *prepared = NULL;
    size_t clean_len = 0, prepared_len = 0;
    UriUriA base_uri, ref_uri, abs_uri;
    int have_base = 0, have_ref = 0, have_abs = 0;
    int rc;

    memset(out, 0, sizeof(*out));

    if (base == NULL || base->href == NULL) {
        why = HV_D_NOT_ABSOLUTE;
        rc = HV_EURL;
        goto out;
    }
    clean = hv_url_clean_ref(ref, len, &clean_len);
    if (clean_len > HV_URL_MAX) {
        why = HV_D_URL_TOO_LONG;
        rc = HV_EURL;
        goto out;
    }

    hv_url_layout_t l;
    hv_url_layout(clean, clean_len, &l);
    if (l.scheme_len > 0 && !hv_url_scheme_ok(clean, l.scheme_len)) {
        why = HV_D_UNSUPPORTED_SCHEME;
        rc = HV_ESCHEME;
        goto out;
    }

    rc = hv_url_prepare(clean, clean_len, &prepared, &prepared_len, &why);
    if (rc != 0)
        goto out;
    if (uriParseSingleUriA(&base_uri, base->href, NULL) != URI_SUCCESS) {
        why = HV_D_MALFORMED;
        rc = HV_EURL;
        goto out;
    }
    have_base = 1;
    if (uriParseSingleUriExA(&ref_uri, prepared, prepared + prepared_len, NULL) != URI_SUCCESS) {
        why = HV_D_MALFORMED;
        rc = HV_EURL;
        goto out;
    }
    have_ref = 1;
    /* "http:g" against an http base is relative, as in browsers (RFC 3986 section 5.2.2
     * allows this for backward compatibility). */
    if (uriAddBaseUriExA(&abs_uri, &ref_uri, &base_uri, URI_RESOLVE_IDENTICAL_SCHEME_COMPAT) !=
        URI_SUCCESS) {
        why = HV_D_MALFORMED;
        rc = HV_EURL;
        goto out;
    }
    have_abs = 1;
    if (uriNormalizeSyntaxExA(&abs_uri, URI_NORMALIZE_PATH) != URI_SUCCESS) {
        why = HV_D_MALFORMED;
        rc = HV_EURL;
        goto out;
    }
    rc = hv_url_from_uri(out, &abs_uri, &why);

out:
    if (have_abs)
        uriFreeUriMembersA(&abs_uri);
    if (have_ref)
        uriFreeUriMembersA(&ref_uri);
    if (have_base)
        uriFreeUriMembersA(&base_uri);
    free(prepared);
    free(clean);
    if (rc != 0 && reason != NULL)
        *reason = why;
    return rc;
}

/* Callers of the text interface get the reason's text from the detail table. */
static void hv_url_reason_text(int rc, hv_detail_t why, const char **reason)
{
    if (rc != 0 && reason != NULL)
        *reason = hv_detail_str(why);
}

int hv_url_parse(hv_url_t *u, const char *text, size_t len, const char **reason)
{
    hv_detail_t why = HV_D_NONE;
    int rc = hv_url_parse_detail(u, text, len, &why);
    hv_url_reason_text(rc, why, reason);
    return rc;
}

int hv_url_resolve(hv_url_t *out, const hv_url_t *base, const char *ref, size_t len,
                   const char **reason)
{
    hv_detail_t why = HV_D_NONE;
    int rc = hv_url_resolve_detail(out, base, ref, len, &why);
    hv_url_reason_text(rc, why, reason);
    return rc;
}

void hv_url_free(hv_url_t *u)
{
    free(u->host);
    free(u->authority);
    free(u->target);
    free(u->href);
    memset(u, 0, sizeof(*u));
}

/* ---- user information (the operator's URLs: proxies, Redis) ---- */

int hv_url_percent_decode(const char *p, const char *end, char *out, size_t cap)
{
    size_t n = 0;
    while (p < end) {
        unsigned char c = (unsigned char)*p++;
        if (c == '%') {
            if (end - p < 2 || !hv_ascii_is_hex((unsigned char)p[0]) ||
                !hv_ascii_is_hex((unsigned char)p[1]))
                return -1;
            c = (unsigned char)(hv_ascii_hex_value((unsigned char)p[0]) * 16 +
                                hv_ascii_hex_value((unsigned char)p[1]));
            p += 2;
        }
        if (c == '\0' || n + 1 >= cap)
            return -1;
        out[n++] = (char)c;
    }
    out[n] = '\0';
    return 0;
}

const char *hv_url_mask_userinfo(const char *url, char *out, size_t cap)
{
    const char *scheme_end = strstr(url, "://");
    const char *info = scheme_end != NULL ? scheme_end + 3 : url;
    const char *at = strrchr(info, '@');
    if (at == NULL) {
        snprintf(out, cap, "%s", url);
        return out;
    }
    const char *colon = memchr(info, ':', (size_t)(at - info));
    /* Kept: up to the password (the user's ':' included), or up to the user information. */
    const char *keep_end = colon != NULL ? colon + 1 : info;
    int hidden = keep_end < at; /* an empty password hides nothing */
    snprintf(out, cap, "%.*s%s%s", (int)(keep_end - url), url, hidden ? "***" : "", at);
    return out;
}

const char *hv_url_origin(const hv_url_t *u, char *out, size_t cap)
{
    int v6 = strchr(u->host, ':') != NULL;
    snprintf(out, cap, "%s://%s%s%s:%u", u->scheme == HV_SCHEME_HTTPS ? "https" : "http",
             v6 ? "[" : "", u->host, v6 ? "]" : "", (unsigned)u->port);
    return out;
}
