/*
 * http.c: response parsing on llhttp plus our limits and decoding.
 *
 * llhttp hands us fragments that point into the caller's buffer; everything we keep is
 * copied into bounded buffers before the callback returns. Errors raised inside a callback
 * are stored in _err and win over llhttp's generic "callback failed" code.
 */
#include "harvestd/http.h"

#include <brotli/decode.h>
#include <zstd.h>
#include <zstd_errors.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <uv.h>

#include "harvestd/common.h"

enum {
    H_NONE,
    H_CONTENT_TYPE,
    H_CONTENT_ENCODING,
    H_LOCATION,
    H_RETRY_AFTER,
    H_ETAG,
    H_LAST_MODIFIED,
    H_CACHE_CONTROL,
    H_SKIP
};

/* A body bigger than our drain allowance is not worth reading just to reuse the connection;
 * the response is complete for us, the connection is not reusable. */
#define DRAIN_STOP 1

#define FIELD_MAX 64
#define CONTENT_TYPE_MAX 1024
#define VALIDATOR_MAX 1024     /* ETag, Last-Modified: longer ones are not kept */
#define CACHE_CONTROL_MAX 1024
#define ENCODING_MAX 256
#define PRESIZE_MAX (1024 * 1024) /* bytes of an announced body allocated up front */

static int on_message_begin(llhttp_t *p);
static int on_status(llhttp_t *p, const char *at, size_t len);
static int on_header_field(llhttp_t *p, const char *at, size_t len);
static int on_header_field_complete(llhttp_t *p);
static int on_header_value(llhttp_t *p, const char *at, size_t len);
static int on_header_value_complete(llhttp_t *p);
static int on_headers_complete(llhttp_t *p);
static int on_body(llhttp_t *p, const char *at, size_t len);
static int on_message_complete(llhttp_t *p);

static llhttp_settings_t settings;
static int settings_ready;

static hv_http_t *from_parser(llhttp_t *p)
{
    return p->data;
}

static void init_settings(void)
{
    llhttp_settings_init(&settings);
    settings.on_message_begin = on_message_begin;
    settings.on_status = on_status;
    settings.on_header_field = on_header_field;
    settings.on_header_field_complete = on_header_field_complete;
    settings.on_header_value = on_header_value;
    settings.on_header_value_complete = on_header_value_complete;
    settings.on_headers_complete = on_headers_complete;
    settings.on_body = on_body;
    settings.on_message_complete = on_message_complete;
    settings_ready = 1;
}

/* A validator goes back to the server as it came, if it can be a header value at all (and
 * is no longer than a response could have given us). */
static int header_safe(const char *v)
{
    if (v == NULL || *v == '\0')
        return 0;
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)v; *p; p++, n++)
        if ((*p < 0x20 && *p != '\t') || *p == 0x7f || n >= VALIDATOR_MAX)
            return 0;
    return 1;
}

/* The fields harvestd sends or rules out itself: a configured one would contradict the
 * framing, the connection management or re-crawling, or (User-Agent) the product token that
 * robots.txt is matched against. `why` ends the message. */
static const struct {
    const char *name;
    const char *why;
} owned_fields[] = {
    {"Host", "harvestd sends the URL's host"},
    {"Content-Length", "harvestd frames its requests"},
    {"Transfer-Encoding", "harvestd frames its requests"},
    {"TE", "harvestd frames its requests"},
    {"Trailer", "harvestd frames its requests"},
    {"Connection", "harvestd manages its connections"},
    {"Keep-Alive", "harvestd manages its connections"},
    {"Proxy-Connection", "harvestd manages its connections"},
    {"Upgrade", "harvestd manages its connections"},
    {"Proxy-Authorization", "proxy credentials are never sent to a server"},
    {"If-None-Match", "re-crawling sends it (recrawl = conditional)"},
    {"If-Modified-Since", "re-crawling sends it (recrawl = conditional)"},
    {"User-Agent", "set user_agent instead (robots.txt is matched against it)"},
};

/* RFC 9110 5.6.2: tchar. */
static int is_tchar(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

int hv_http_field_check(const char *name, const char *value, char *err, size_t errcap)
{
    size_t nlen = strlen(name), vlen = strlen(value);
    int shown = (int)HV_MIN(nlen, (size_t)64); /* a name in a message: its first 64 bytes */
    if (nlen == 0)
        return hv_errf(err, errcap, UV_EINVAL, "header: no name before ':' (expected "
                                               "'Name: value')");
    for (size_t i = 0; i < nlen; i++) {
        unsigned char c = (unsigned char)name[i];
        if (is_tchar(c))
            continue;
        if (c < 0x20 || c >= 0x7f) /* not shown as it is */
            return hv_errf(err, errcap, UV_EINVAL, "header: byte 0x%02x in a header name", c);
        return hv_errf(err, errcap, UV_EINVAL,
                       "header: '%.*s' is not a header name (letters, digits and "
                       "!#$%%&'*+-.^_`|~ only)",
                       shown, name);
    }
    if (nlen + 2 + vlen > HV_HTTP_FIELD_MAX)
        return hv_errf(err, errcap, UV_EINVAL, "header: '%.*s' is longer than %d bytes",
                       shown, name, HV_HTTP_FIELD_MAX);
    for (size_t i = 0; i < HV_ARRAY_SIZE(owned_fields); i++)
        if (strcasecmp(name, owned_fields[i].name) == 0)
            return hv_errf(err, errcap, UV_EINVAL, "header: '%s' cannot be configured: %s",
                           name, owned_fields[i].why);
    for (size_t i = 0; i < vlen; i++) {
        unsigned char c = (unsigned char)value[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return hv_errf(err, errcap, UV_EINVAL,
                           "header: '%.*s': control character 0x%02x in its value", shown,
                           name, c);
    }
    if (vlen > 0 && (value[0] == ' ' || value[0] == '\t' || value[vlen - 1] == ' ' ||
                     value[vlen - 1] == '\t'))
        return hv_errf(err, errcap, UV_EINVAL, "header: '%.*s': blanks around its value",
                       shown, name);
    return 0;
}

int hv_http_field_secret(const char *name)
{
    static const char *const parts[] = {"auth", "token", "key", "secret", "passw", "session",
                                        "cookie"};
    for (size_t i = 0; i < HV_ARRAY_SIZE(parts); i++)
        if (strcasestr(name, parts[i]) != NULL)
            return 1;
    return 0;
}

/* Append the strings up to NULL; the first failure sticks in *rc. */
__attribute__((sentinel)) static void put(hv_buf_t *b, int *rc, ...)
{
    va_list ap;
    va_start(ap, rc);
    for (const char *s; *rc == 0 && (s = va_arg(ap, const char *)) != NULL;)
        *rc = hv_buf_append(b, s, strlen(s));
    va_end(ap);
}

/* What a request carries besides its configured fields, the same over HTTP/1.1 and 2. */
typedef struct {
    int accept, accept_encoding; /* harvestd's own (no configured field of that name) */
    const char *inm, *ims;       /* the validators that may be sent (NULL: not sent) */
} request_plan_t;

/* Check the configured fields (when the configuration was read; again here, so that nothing
 * that could split a request is ever written) and plan the rest: 0, or UV_EINVAL. */
static int plan_request(request_plan_t *p, const hv_http_cond_t *cond,
                        const hv_http_field_t *fields, size_t nfields)
{
    char err[8];
    p->accept = p->accept_encoding = 1;
    for (size_t i = 0; i < nfields; i++) {
        if (hv_http_field_check(fields[i].name, fields[i].value, err, sizeof(err)) != 0)
            return UV_EINVAL;
        if (strcasecmp(fields[i].name, "Accept") == 0)
            p->accept = 0;
        else if (strcasecmp(fields[i].name, "Accept-Encoding") == 0)
            p->accept_encoding = 0;
    }
    p->inm = cond != NULL && header_safe(cond->etag) ? cond->etag : NULL;
    p->ims = cond != NULL && header_safe(cond->last_modified) ? cond->last_modified : NULL;
    return 0;
}

int hv_http_request(hv_buf_t *out, const hv_url_t *u, const char *user_agent,
                    const hv_http_cond_t *cond, const hv_http_via_t *via,
                    const hv_http_field_t *fields, size_t nfields)
{
    request_plan_t plan;
    int rc = 0;
    if (plan_request(&plan, cond, fields, nfields) != 0)
        return UV_EINVAL;
    int accept = plan.accept, accept_encoding = plan.accept_encoding;
    const char *inm = plan.inm, *ims = plan.ims;
    if (via != NULL && via->authorization != NULL && !header_safe(via->authorization))
        return UV_EINVAL;
    size_t start = out->len;
    /* To a proxy, the absolute form (RFC 9112 3.2.2): it has no other way to know the
     * origin. */
    put(out, &rc, "GET ", via != NULL ? u->href : u->target, " HTTP/1.1\r\nHost: ",
        u->authority, "\r\nUser-Agent: ", user_agent, "\r\n", NULL);
    if (via != NULL && via->authorization != NULL)
        put(out, &rc, "Proxy-Authorization: ", via->authorization, "\r\n", NULL);
    if (accept)
        put(out, &rc, "Accept: text/html,application/xhtml+xml\r\n", NULL);
    if (accept_encoding)
        put(out, &rc, "Accept-Encoding: gzip, deflate, br, zstd\r\n", NULL);
    for (size_t i = 0; i < nfields; i++)
        if (fields[i].value[0] != '\0')
            put(out, &rc, fields[i].name, ": ", fields[i].value, "\r\n", NULL);
    if (inm != NULL)
        put(out, &rc, "If-None-Match: ", inm, "\r\n", NULL);
    if (ims != NULL)
        put(out, &rc, "If-Modified-Since: ", ims, "\r\n", NULL);
    put(out, &rc, "Connection: keep-alive\r\n\r\n", NULL);
    if (rc != 0)
        out->len = start;
    return rc;
}

/* One field into `nv`, its name lower-cased into `store` at *used. */
static int put_nv(hv_http_nv_t *nv, size_t cap, size_t *n, char *store, size_t storecap,
                  size_t *used, const char *name, const char *value)
{
    size_t nlen = strlen(name);
    if (*n >= cap || storecap - *used < nlen)
        return HV_ETOOBIG;
    char *lower = store + *used;
    for (size_t i = 0; i < nlen; i++)
        lower[i] = (char)hv_ascii_lower((unsigned char)name[i]);
    *used += nlen;
    nv[(*n)++] = (hv_http_nv_t){lower, nlen, value, strlen(value)};
    return 0;
}

int hv_http_request_h2(hv_http_nv_t *nv, size_t cap, size_t *n, char *store, size_t storecap,
                       const hv_url_t *u, const char *user_agent, const hv_http_cond_t *cond,
                       const hv_http_field_t *fields, size_t nfields)
{
    request_plan_t plan;
    int rc = 0;
    size_t used = 0;
    *n = 0;
    if (plan_request(&plan, cond, fields, nfields) != 0)
        return UV_EINVAL;
    int accept = plan.accept, accept_encoding = plan.accept_encoding;
    const char *inm = plan.inm, *ims = plan.ims;
    rc = rc ? rc : put_nv(nv, cap, n, store, storecap, &used, ":method", "GET");
    rc = rc ? rc
            : put_nv(nv, cap, n, store, storecap, &used, ":scheme",
                     u->scheme == HV_SCHEME_HTTPS ? "https" : "http");
    rc = rc ? rc : put_nv(nv, cap, n, store, storecap, &used, ":authority", u->authority);
    rc = rc ? rc : put_nv(nv, cap, n, store, storecap, &used, ":path", u->target);
    rc = rc ? rc : put_nv(nv, cap, n, store, storecap, &used, "user-agent", user_agent);
    if (accept)
        rc = rc ? rc
                : put_nv(nv, cap, n, store, storecap, &used, "accept",
                         "text/html,application/xhtml+xml");
    if (accept_encoding)
        rc = rc ? rc
                : put_nv(nv, cap, n, store, storecap, &used, "accept-encoding",
                         "gzip, deflate, br, zstd");
    for (size_t i = 0; i < nfields; i++)
        if (fields[i].value[0] != '\0')
            rc = rc ? rc
                    : put_nv(nv, cap, n, store, storecap, &used, fields[i].name,
                             fields[i].value);
    if (inm != NULL)
        rc = rc ? rc : put_nv(nv, cap, n, store, storecap, &used, "if-none-match", inm);
    if (ims != NULL)
        rc = rc ? rc : put_nv(nv, cap, n, store, storecap, &used, "if-modified-since", ims);
    return rc;
}

static void reset_response(hv_http_t *h)
{
    h->status = 0;
    h->content_length = -1;
    hv_buf_reset(&h->content_type);
    hv_buf_reset(&h->location);
    hv_buf_reset(&h->retry_after);
    hv_buf_reset(&h->etag);
    hv_buf_reset(&h->last_modified);
    hv_buf_reset(&h->cache_control);
    h->cache_control_cut = 0;
    hv_buf_reset(&h->_field);
    h->_header = H_NONE;
    h->encoding = HV_ENC_IDENTITY;
}

void hv_http_init(hv_http_t *h, const hv_http_limits_t *limits, hv_http_head_cb on_head,
                  void *data)
{
    if (!settings_ready)
        init_settings();
    memset(h, 0, sizeof(*h));
    h->data = data;
    h->_limits = limits;
    h->_on_head = on_head;
    h->content_length = -1;
    hv_buf_init(&h->content_type, CONTENT_TYPE_MAX);
    hv_buf_init(&h->location, HV_URL_MAX);
    hv_buf_init(&h->retry_after, 64);
    hv_buf_init(&h->etag, VALIDATOR_MAX);
    hv_buf_init(&h->last_modified, VALIDATOR_MAX);
    hv_buf_init(&h->cache_control, CACHE_CONTROL_MAX);
    hv_buf_init(&h->body, limits->max_body);
    hv_buf_init(&h->_field, FIELD_MAX);
    llhttp_init(&h->_parser, HTTP_RESPONSE, &settings);
    h->_parser.data = h;
}

void hv_http_free(hv_http_t *h)
{
    hv_buf_free(&h->content_type);
    hv_buf_free(&h->location);
    hv_buf_free(&h->retry_after);
    hv_buf_free(&h->etag);
    hv_buf_free(&h->last_modified);
    hv_buf_free(&h->cache_control);
    hv_buf_free(&h->body);
    hv_buf_free(&h->_field);
    if (h->_z_init) {
        inflateEnd(&h->_z);
        h->_z_init = 0;
    }
    if (h->_br != NULL) {
        BrotliDecoderDestroyInstance(h->_br);
        h->_br = NULL;
    }
    ZSTD_freeDCtx(h->_zs);
    h->_zs = NULL;
}

/* Record what went wrong, as code and argument. */
static void set_fault(hv_http_t *h, hv_detail_t code, const char *arg)
{
    hv_fault_set(&h->fault, code, arg);
}

static int fail(hv_http_t *h, int err, hv_detail_t code, const char *arg)
{
    set_fault(h, code, arg);
    h->_err = err;
    return -1;
}

/* A limit given in bytes was passed: the detail names the limit. */
static int fail_size(hv_http_t *h, int err, hv_detail_t code, uint64_t limit)
{
    char size[32];
    hv_format_size(size, sizeof(size), limit);
    return fail(h, err, code, size);
}

/* Every byte of the head counts against max_header_bytes, plus the line framing that the
 * callbacks do not show us (": " and CRLF). */
static int count_head(hv_http_t *h, size_t len)
{
    h->_head_bytes += len;
    if (h->_head_bytes > h->_limits->max_header_bytes)
        return fail_size(h, HV_EPROTO, HV_D_HEADERS_EXCEED, h->_limits->max_header_bytes);
    return 0;
}

static int on_message_begin(llhttp_t *p)
{
    (void)p;
    return 0;
}

static int on_status(llhttp_t *p, const char *at, size_t len)
{
    (void)at;
    return count_head(from_parser(p), len);
}

static int on_header_field(llhttp_t *p, const char *at, size_t len)
{
    hv_http_t *h = from_parser(p);
    if (count_head(h, len) != 0)
        return -1;
    /* A name longer than FIELD_MAX is none we care about: remember that it is not. */
    if (h->_header != H_SKIP && hv_buf_append(&h->_field, at, len) != 0)
        h->_header = H_SKIP;
    return 0;
}

static int field_is(const hv_buf_t *f, const char *name)
{
    size_t len = f->len;
    /* Header names can arrive with trailing blanks; llhttp passes them on. */
    while (len > 0 && (f->data[len - 1] == ' ' || f->data[len - 1] == '\t'))
        len--;
    return hv_ascii_case_is(f->data, len, name);
}

static int field_name_done(hv_http_t *h)
{
    if (count_head(h, 4) != 0)
        return -1;
    if (h->_header == H_SKIP || h->_in_trailers) {
        /* unknown, over-long name; or a trailer field, which the head's results ignore */
        h->_header = H_SKIP;
    } else if (field_is(&h->_field, "content-type")) {
        h->_header = h->content_type.len == 0 ? H_CONTENT_TYPE : H_SKIP;
    } else if (field_is(&h->_field, "content-encoding")) {
        h->_header = H_CONTENT_ENCODING;
    } else if (field_is(&h->_field, "location")) {
        h->_header = h->location.len == 0 ? H_LOCATION : H_SKIP;
    } else if (field_is(&h->_field, "retry-after")) {
        h->_header = h->retry_after.len == 0 ? H_RETRY_AFTER : H_SKIP;
    } else if (field_is(&h->_field, "etag")) {
        h->_header = h->etag.len == 0 ? H_ETAG : H_SKIP;
    } else if (field_is(&h->_field, "last-modified")) {
        h->_header = h->last_modified.len == 0 ? H_LAST_MODIFIED : H_SKIP;
    } else if (field_is(&h->_field, "cache-control")) {
        h->_header = H_CACHE_CONTROL;
        /* Several headers are one list (RFC 9110 5.3). */
        if (h->cache_control.len > 0 && !h->cache_control_cut &&
            hv_buf_append(&h->cache_control, ",", 1) != 0)
            h->cache_control_cut = 1;
    } else {
        h->_header = H_SKIP;
    }
    hv_buf_reset(&h->_field);
    return 0;
}

static int on_header_field_complete(llhttp_t *p)
{
    return field_name_done(from_parser(p));
}

static int field_value(hv_http_t *h, const char *at, size_t len)
{
    if (count_head(h, len) != 0)
        return -1;
    switch (h->_header) {
    case H_CONTENT_TYPE:
        if (hv_buf_append(&h->content_type, at, len) != 0)
            return fail(h, HV_EPROTO, HV_D_CONTENT_TYPE_TOO_LONG, NULL);
        break;
    case H_LOCATION:
        if (hv_buf_append(&h->location, at, len) != 0)
            return fail(h, HV_EPROTO, HV_D_LOCATION_TOO_LONG, NULL);
        break;
    case H_RETRY_AFTER:
        /* Only advice: an absurd value is dropped, never an error; dropped whole, whatever
         * part of it arrived in earlier reads. */
        if (hv_buf_append(&h->retry_after, at, len) != 0) {
            hv_buf_reset(&h->retry_after);
            h->_header = H_SKIP;
        }
        break;
    case H_ETAG:
    case H_LAST_MODIFIED: {
        /* Validators are only an optimisation: an over-long one is dropped whole. */
        hv_buf_t *b = h->_header == H_ETAG ? &h->etag : &h->last_modified;
        if (hv_buf_append(b, at, len) != 0) {
            hv_buf_reset(b);
            h->_header = H_SKIP;
        }
        break;
    }
    case H_CACHE_CONTROL:
        if (!h->cache_control_cut && hv_buf_append(&h->cache_control, at, len) != 0)
            h->cache_control_cut = 1;
        break;
    case H_CONTENT_ENCODING:
        /* Collected in _field (free again once the name is classified). */
        if (hv_buf_append(&h->_field, at, len) != 0)
            h->encoding = HV_ENC_UNSUPPORTED;
        break;
    default:
        break;
    }
    return 0;
}

/* Classify one Content-Encoding header value. Several encodings (or several headers naming
 * a real one) are layered codings we do not undo. */
static void classify_encoding(hv_http_t *h)
{
    char v[FIELD_MAX + 1];
    size_t n = 0;
    for (size_t i = 0; i < h->_field.len && n < FIELD_MAX; i++) {
        char ch = h->_field.data[i];
        if (ch != ' ' && ch != '\t')
            v[n++] = (char)hv_ascii_lower((unsigned char)ch);
    }
    v[n] = '\0';
    hv_http_enc_t enc;
    if (n == 0 || strcmp(v, "identity") == 0)
        return;
    if (strcmp(v, "gzip") == 0 || strcmp(v, "x-gzip") == 0)
        enc = HV_ENC_GZIP;
    else if (strcmp(v, "deflate") == 0)
        enc = HV_ENC_DEFLATE;
    else if (strcmp(v, "br") == 0)
        enc = HV_ENC_BROTLI;
    else if (strcmp(v, "zstd") == 0)
        enc = HV_ENC_ZSTD;
    else
        enc = HV_ENC_UNSUPPORTED;
    h->encoding = h->encoding == HV_ENC_IDENTITY ? enc : HV_ENC_UNSUPPORTED;
}

static int on_header_value(llhttp_t *p, const char *at, size_t len)
{
    return field_value(from_parser(p), at, len);
}

static int field_value_done(hv_http_t *h)
{
    if (h->_header == H_CONTENT_ENCODING && h->encoding != HV_ENC_UNSUPPORTED)
        classify_encoding(h);
    hv_buf_t *b = h->_header == H_CONTENT_TYPE    ? &h->content_type
                  : h->_header == H_LOCATION      ? &h->location
                  : h->_header == H_RETRY_AFTER   ? &h->retry_after
                  : h->_header == H_ETAG          ? &h->etag
                  : h->_header == H_LAST_MODIFIED ? &h->last_modified
                  : h->_header == H_CACHE_CONTROL ? &h->cache_control
                                                  : NULL;
    if (b != NULL) {
        /* NUL-terminate for the owner; the byte is outside len. */
        if (hv_buf_reserve(b, 1) == 0 && b->data != NULL)
            b->data[b->len] = '\0';
    }
    hv_buf_reset(&h->_field);
    h->_header = H_NONE;
    return 0;
}

static int on_header_value_complete(llhttp_t *p)
{
    return field_value_done(from_parser(p));
}

static int head_done(hv_http_t *h);

static int on_headers_complete(llhttp_t *p)
{
    hv_http_t *h = from_parser(p);
    h->status = llhttp_get_status_code(p);
    if (h->status >= 100 && h->status < 200) {
        if (h->status == 101)
            return fail(h, HV_EPROTO, HV_D_UNEXPECTED_PROTOCOL_SWITCH, NULL);
        return 1; /* interim response: no body, the real one follows */
    }
    if (p->flags & F_CONTENT_LENGTH)
        h->content_length = (int64_t)p->content_length;
    return head_done(h);
}

/* The final head is complete: the owner decides about the body. -1 (failed), 0 (a body
 * follows) or 1 (no body). */
static int head_done(hv_http_t *h)
{
    h->_in_trailers = 1; /* what follows the body is trailer fields, not the head's */
    h->_body_mode = h->_on_head(h);
    if (h->_body_mode == HV_HTTP_BODY_ABORT)
        return fail(h, HV_ECANCELLED, HV_D_BODY_ABORTED, NULL);
    if (h->_body_mode == HV_HTTP_BODY_KEEP) {
        if (h->encoding == HV_ENC_UNSUPPORTED)
            return fail(h, HV_EPROTO, HV_D_UNSUPPORTED_CONTENT_ENCODING, NULL);
        if (h->encoding == HV_ENC_IDENTITY && h->content_length >= 0 && !h->_limits->truncate &&
            (uint64_t)h->content_length > h->_limits->max_body)
            return fail_size(h, HV_ETOOBIG, HV_D_RESPONSE_EXCEEDS, h->_limits->max_body);
        /* The size is announced: allocate it once instead of doubling into it (which copies
         * the body nine times for 40 KB and leaves up to half the allocation unused). Capped,
         * so that a server announcing more than it sends cannot make us reserve much. */
        if (h->encoding == HV_ENC_IDENTITY && h->content_length > 0) {
            size_t announced = (uint64_t)h->content_length < PRESIZE_MAX
                                   ? (size_t)h->content_length
                                   : (size_t)PRESIZE_MAX;
            hv_buf_presize(&h->body, HV_MIN(announced, h->body.max));
        }
    }
    /* A 204 or 304 never has a body, whatever Content-Length says: reading one would eat
     * the next response on this connection. */
    if (h->status == 204 || h->status == 304)
        return 1;
    return 0;
}

static int keep_body(hv_http_t *h, const char *data, size_t len)
{
    /* Read into the buffer's free part (hv_http_body_space), which never reaches past max. */
    if (h->body.data != NULL && data == h->body.data + h->body.len &&
        len <= HV_MIN(h->body.cap, h->body.max) - h->body.len) {
        h->body.len += len;
        return 0;
    }
    if (hv_buf_append(&h->body, data, len) == 0)
        return 0;
    if (h->_limits->truncate) {
        size_t room = h->body.max - h->body.len;
        hv_buf_append(&h->body, data, HV_MIN(room, len));
        h->truncated = 1;
        /* Enough: end the response here (the connection cannot be reused). */
        h->_err = DRAIN_STOP;
        return -1;
    }
    return fail_size(h, HV_ETOOBIG, HV_D_RESPONSE_EXCEEDS, h->_limits->max_body);
}

static const char *codec_name(const hv_http_t *h)
{
    return h->encoding == HV_ENC_GZIP     ? "gzip"
           : h->encoding == HV_ENC_BROTLI ? "brotli"
           : h->encoding == HV_ENC_ZSTD   ? "zstd"
                                          : "deflate";
}

/* `code` is one of the <codec>_... details. */
static int decode_error(hv_http_t *h, hv_detail_t code)
{
    return fail(h, HV_EDECODE, code, codec_name(h));
}

/* Run the decoder over one piece of compressed body. */
static int inflate_chunk(hv_http_t *h, const char *data, size_t len)
{
    unsigned char out[16384];

    if (h->_z_ignore)
        return 0;
    h->_z.next_in = (unsigned char *)(uintptr_t)data;
    h->_z.avail_in = (uInt)len;
    while (h->_z.avail_in > 0) {
        if (h->_z_end) {
            /* More bytes after a complete stream: gzip allows concatenated members; for
             * anything else, and for bytes that cannot start a gzip member (its magic is
             * 1f 8b), the trailer is junk that browsers ignore, and so do we. Deciding on
             * the magic, not on whether inflate finishes, keeps a single junk byte from
             * reading as a truncated member. */
            const unsigned char *in = h->_z.next_in;
            if (h->encoding != HV_ENC_GZIP || in[0] != 0x1f ||
                (h->_z.avail_in > 1 && in[1] != 0x8b)) {
                h->_z_ignore = 1;
                return 0;
            }
            inflateReset(&h->_z);
            h->_z_end = 0;
        }
        h->_z.next_out = out;
        h->_z.avail_out = sizeof(out);
        int zr = inflate(&h->_z, Z_NO_FLUSH);
        size_t produced = sizeof(out) - h->_z.avail_out;
        if (produced > 0 && keep_body(h, (const char *)out, produced) != 0)
            return -1;
        if (zr == Z_STREAM_END) {
            h->_z_end = 1;
            h->_z_members++;
            continue;
        }
        if (zr == Z_OK)
            continue;
        if (zr == Z_BUF_ERROR)
            return 0; /* needs more input */
        if (zr == Z_DATA_ERROR && h->_z_members > 0) {
            /* Not another gzip member after a complete one: trailing junk, ignored. */
            h->_z_end = 1;
            h->_z_ignore = 1;
            return 0;
        }
        return decode_error(h, HV_D_DECODE_CORRUPT);
    }
    return 0;
}

/* Brotli, streaming: output goes through keep_body, so the decoded-size limit stops a
 * decompression bomb at the first chunk past it. */
static int brotli_body(hv_http_t *h, const char *data, size_t len)
{
    if (h->_br == NULL) {
        h->_br = BrotliDecoderCreateInstance(NULL, NULL, NULL);
        if (h->_br == NULL)
            return decode_error(h, HV_D_DECODE_INIT_FAILED);
    }
    const uint8_t *in = (const uint8_t *)data;
    size_t avail_in = len;
    while (avail_in > 0 || BrotliDecoderHasMoreOutput(h->_br)) {
        if (h->_br_end)
            return 0; /* junk after the end of the stream, ignored like gzip's */
        uint8_t out[16384];
        uint8_t *next_out = out;
        size_t avail_out = sizeof(out);
        BrotliDecoderResult r =
            BrotliDecoderDecompressStream(h->_br, &avail_in, &in, &avail_out, &next_out, NULL);
        size_t produced = sizeof(out) - avail_out;
        if (produced > 0 && keep_body(h, (const char *)out, produced) != 0)
            return -1;
        if (r == BROTLI_DECODER_RESULT_ERROR)
            return decode_error(h, HV_D_DECODE_CORRUPT);
        if (r == BROTLI_DECODER_RESULT_SUCCESS)
            h->_br_end = 1;
        else if (r == BROTLI_DECODER_RESULT_NEEDS_MORE_INPUT)
            return 0;
    }
    return 0;
}

/* RFC 9659: a zstd content coding's window is at most 8 MiB. A frame that asks for more is
 * refused before its window is allocated. */
#define ZSTD_WINDOW_LOG_MAX 23

/* Whether the bytes after a complete zstd frame may start another frame (its magic number,
 * 28 b5 2f fd, or a skippable frame's, 5? 2a 4d 18), judged on what is there of its first
 * four bytes. */
static int zstd_frame_start(const unsigned char *p, size_t n)
{
    static const unsigned char frame[4] = {0x28, 0xb5, 0x2f, 0xfd};
    static const unsigned char skippable[4] = {0x50, 0x2a, 0x4d, 0x18};
    int is_frame = 1, is_skippable = 1;
    for (size_t i = 0; i < n && i < 4; i++) {
        is_frame &= p[i] == frame[i];
        is_skippable &= i == 0 ? (p[0] & 0xf0) == 0x50 : p[i] == skippable[i];
    }
    return is_frame || is_skippable;
}

/* zstd, streaming, frame after frame: output goes through keep_body, so the decoded-size
 * limit stops a decompression bomb at the first chunk past it. Bytes after a complete frame
 * that cannot start another are junk, ignored as gzip's are. */
static int zstd_body(hv_http_t *h, const char *data, size_t len)
{
    if (h->_zs == NULL) {
        h->_zs = ZSTD_createDCtx();
        if (h->_zs == NULL ||
            ZSTD_isError(ZSTD_DCtx_setParameter(h->_zs, ZSTD_d_windowLogMax, ZSTD_WINDOW_LOG_MAX)))
            return decode_error(h, HV_D_DECODE_INIT_FAILED);
    }
    ZSTD_inBuffer in = {data, len, 0};
    int more = 0; /* the last call filled the output: it may hold more */
    while (!h->_z_ignore && (in.pos < in.size || more)) {
        const unsigned char *next = (const unsigned char *)data + in.pos;
        if (h->_zs_end && in.pos < in.size) {
            if (!zstd_frame_start(next, in.size - in.pos)) {
                h->_z_ignore = 1;
                return 0;
            }
            h->_zs_end = 0;
        }
        unsigned char out[16384];
        ZSTD_outBuffer o = {out, sizeof(out), 0};
        size_t r = ZSTD_decompressStream(h->_zs, &o, &in);
        if (o.pos > 0 && keep_body(h, (const char *)out, o.pos) != 0)
            return -1;
        if (ZSTD_isError(r)) {
            if (ZSTD_getErrorCode(r) == ZSTD_error_frameParameter_windowTooLarge)
                return decode_error(h, HV_D_DECODE_WINDOW_TOO_LARGE);
            if (h->_zs_frames > 0) { /* not another frame after a complete one: junk */
                h->_zs_end = 1;
                h->_z_ignore = 1;
                return 0;
            }
            return decode_error(h, HV_D_DECODE_CORRUPT);
        }
        more = r != 0 && o.pos == o.size;
        if (r == 0) { /* the frame is decoded and flushed */
            h->_zs_end = 1;
            h->_zs_frames++;
        }
    }
    return 0;
}

static int inflate_body(hv_http_t *h, const char *data, size_t len)
{
    if (h->encoding == HV_ENC_BROTLI)
        return brotli_body(h, data, len);
    if (h->encoding == HV_ENC_ZSTD)
        return zstd_body(h, data, len);
    if (!h->_z_init) {
        int wbits = 15 + 32; /* zlib or gzip wrapper, detected from the first bytes */
        if (h->encoding == HV_ENC_DEFLATE) {
            /* "deflate" is sent both as RFC 1950 (zlib) and as a raw stream: the first two
             * bytes tell which (a zlib header is method 8 and a multiple of 31). */
            while (h->_z_hdr_len < 2 && len > 0) {
                h->_z_hdr[h->_z_hdr_len++] = (unsigned char)*data++;
                len--;
            }
            if (h->_z_hdr_len < 2)
                return 0;
            unsigned hdr = (unsigned)h->_z_hdr[0] << 8 | h->_z_hdr[1];
            wbits = (h->_z_hdr[0] & 0x0f) == 8 && hdr % 31 == 0 ? 15 : -15;
        }
        memset(&h->_z, 0, sizeof(h->_z));
        if (inflateInit2(&h->_z, wbits) != Z_OK)
            return decode_error(h, HV_D_DECODE_INIT_FAILED);
        h->_z_init = 1;
        if (h->_z_hdr_len > 0 && inflate_chunk(h, (const char *)h->_z_hdr, h->_z_hdr_len) != 0)
            return -1;
    }
    return inflate_chunk(h, data, len);
}

static int body_bytes(hv_http_t *h, const char *at, size_t len)
{
    if (h->_body_mode == HV_HTTP_BODY_DISCARD) {
        h->_drained += len;
        if (h->_drained > h->_limits->max_drain) {
            h->_err = DRAIN_STOP;
            return -1;
        }
        return 0;
    }
    if (h->encoding == HV_ENC_IDENTITY)
        return keep_body(h, at, len);
    return inflate_body(h, at, len) == 0 ? 0 : -1;
}

static int on_body(llhttp_t *p, const char *at, size_t len)
{
    return body_bytes(from_parser(p), at, len);
}

/* The body is whole: 0, or -1 when its coding ended short. */
static int body_done(hv_http_t *h)
{
    /* After a complete gzip member, a next one that ends within its 10-byte header holds
     * none of the page: junk (a lone stray 0x1f byte looks like its start), as junk of any
     * other length is. */
    if (h->_z_init && !h->_z_end && h->_z_members > 0 && h->_z.total_in < 10) {
        h->_z_end = 1;
        h->_z_ignore = 1;
    }
    if (h->_body_mode == HV_HTTP_BODY_KEEP &&
        ((h->_z_init && !h->_z_end) || (!h->_z_init && h->_z_hdr_len > 0) ||
         (h->_br != NULL && !h->_br_end) || (h->_zs != NULL && !h->_zs_end)))
        return decode_error(h, HV_D_DECODE_TRUNCATED);
    h->complete = 1;
    return 0;
}

static int on_message_complete(llhttp_t *p)
{
    hv_http_t *h = from_parser(p);
    if (h->status >= 100 && h->status < 200) {
        /* The interim response is done; parse the real one from the same bytes. */
        reset_response(h);
        return 0;
    }
    if (body_done(h) != 0)
        return -1;
    h->keep_alive = llhttp_should_keep_alive(p);
    return HPE_PAUSED;
}

/* llhttp's own error, named as llhttp names it: HPE_INVALID_CHUNK_SIZE is
 * "invalid_chunk_size". */
static int parser_error(hv_http_t *h, llhttp_errno_t e)
{
    const char *name = llhttp_errno_name(e);
    char arg[HV_DETAIL_ARG_MAX];
    size_t i = 0;
    if (strncmp(name, "HPE_", 4) == 0)
        name += 4;
    for (; name[i] != '\0' && i + 1 < sizeof(arg); i++)
        arg[i] = (char)hv_ascii_lower((unsigned char)name[i]);
    arg[i] = '\0';
    set_fault(h, HV_D_HTTP_PARSE, arg);
    return HV_EPROTO;
}

int hv_http_feed(hv_http_t *h, const char *data, size_t len)
{
    if (h->complete)
        return 1;
    h->bytes_in += len;
    llhttp_errno_t e = llhttp_execute(&h->_parser, data, len);
    if (e == HPE_OK)
        return 0;
    if (e == HPE_PAUSED && h->complete) {
        const char *pos = llhttp_get_error_pos(&h->_parser);
        /* Bytes after the response we asked for: the stream is out of step, never reuse. */
        if (pos != NULL && pos < data + len)
            h->keep_alive = 0;
        return 1;
    }
    if (h->_err == DRAIN_STOP) {
        h->_err = 0;
        h->complete = 1;
        h->keep_alive = 0;
        return 1;
    }
    if (h->_err != 0)
        return h->_err;
    return parser_error(h, e);
}

/* Below this much room a read goes to the connection's buffer: a body read a few bytes at a
 * time would cost more reads than the copy it spares. */
#define BODY_SPACE_MIN 4096

int hv_http_body_space(hv_http_t *h, char **base, size_t *len)
{
    const hv_buf_t *b = &h->body;
    if (!h->_in_trailers || h->complete || h->_err != 0 || h->_body_mode != HV_HTTP_BODY_KEEP ||
        h->encoding != HV_ENC_IDENTITY || h->content_length < 0 ||
        (h->_parser.flags & F_CHUNKED) != 0 || llhttp_get_errno(&h->_parser) != HPE_OK ||
        b->data == NULL || HV_MIN(b->cap, b->max) <= b->len ||
        (uint64_t)h->content_length <= b->len)
        return 0;
    size_t room = HV_MIN(b->cap, b->max) - b->len;
    uint64_t left = (uint64_t)h->content_length - b->len;
    if (room < BODY_SPACE_MIN && room < left)
        return 0;
    /* One byte more than announced where there is room: a read that fills its buffer makes
     * libuv read again at once (an EAGAIN, per page). A byte past the body is no body byte:
     * it is parsed as what follows, and a response followed by bytes is never reused. */
    size_t want = left < room ? (size_t)left + 1 : room;
    *base = b->data + b->len;
    *len = want;
    return 1;
}

int hv_http_eof(hv_http_t *h)
{
    if (h->complete)
        return 1;
    if (h->_err != 0)
        return h->_err;
    llhttp_errno_t e = llhttp_finish(&h->_parser);
    if (h->complete) {
        h->keep_alive = 0;
        return 1;
    }
    if (h->_err != 0)
        return h->_err;
    (void)e;
    if (h->bytes_in == 0)
        set_fault(h, HV_D_CLOSED_BEFORE_RESPONSE, NULL);
    else if (h->status == 0)
        set_fault(h, HV_D_CLOSED_IN_HEADERS, NULL);
    else
        set_fault(h, HV_D_CLOSED_MID_BODY, NULL);
    return HV_ECLOSED;
}

int64_t hv_http_retry_after_ms(const hv_http_t *h, int64_t now_unix_ms)
{
    char v[65];
    size_t n = HV_MIN(h->retry_after.len, sizeof(v) - 1);
    if (n == 0)
        return -1;
    memcpy(v, h->retry_after.data, n);
    v[n] = '\0';
    while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        v[--n] = '\0';
    const char *p = v;
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p >= '0' && *p <= '9') {
        /* delay-seconds = 1*DIGIT */
        uint64_t secs = 0;
        for (; *p >= '0' && *p <= '9'; p++) {
            secs = secs * 10 + (uint64_t)(*p - '0');
            if (secs > 100000000)
                return INT64_MAX / 2;
        }
        return *p == '\0' ? (int64_t)secs * 1000 : -1;
    }
    /* HTTP-date, IMF-fixdate form: "Sun, 06 Nov 1994 08:49:37 GMT" */
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    const char *end = strptime(p, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    if (end == NULL || *end != '\0')
        return -1;
    int64_t at = (int64_t)timegm(&tm) * 1000;
    return at > now_unix_ms ? at - now_unix_ms : 0;
}

void hv_http_media_type(const hv_http_t *h, char *out, size_t cap)
{
    size_t n = 0, i = 0;
    const char *s = h->content_type.data;
    size_t len = h->content_type.len;
    while (i < len && (s[i] == ' ' || s[i] == '\t'))
        i++;
    for (; i < len && s[i] != ';' && n + 1 < cap; i++) {
        if (s[i] == ' ' || s[i] == '\t')
            continue;
        out[n++] = (char)hv_ascii_lower((unsigned char)s[i]);
    }
    if (cap > 0)
        out[n] = '\0';
}

void hv_http_cache_control(const hv_http_t *h, int *no_store, int64_t *max_age_s)
{
    *no_store = h->cache_control_cut;
    *max_age_s = -1;
    if (h->cache_control.data == NULL)
        return;
    const char *p = h->cache_control.data, *end = p + h->cache_control.len;
    /* directive *( "," directive ), directive = token [ "=" ( token / quoted-string ) ] */
    while (p < end) {
        while (p < end && (*p == ' ' || *p == '\t' || *p == ','))
            p++;
        const char *name = p;
        while (p < end && *p != '=' && *p != ',' && *p != ' ' && *p != '\t')
            p++;
        size_t nlen = (size_t)(p - name);
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        const char *val = NULL;
        size_t vlen = 0;
        if (p < end && *p == '=') {
            p++;
            while (p < end && (*p == ' ' || *p == '\t'))
                p++;
            int quoted = p < end && *p == '"';
            if (quoted)
                p++;
            val = p;
            while (p < end && (quoted ? *p != '"' : (*p != ',' && *p != ' ' && *p != '\t')))
                p++;
            vlen = (size_t)(p - val);
            if (quoted && p < end)
                p++;
        }
        while (p < end && *p != ',')
            p++;
        if (hv_ascii_case_is(name, nlen, "no-store")) {
            *no_store = 1;
        } else if (hv_ascii_case_is(name, nlen, "max-age") && val != NULL && vlen > 0) {
            int64_t v = 0;
            size_t i;
            for (i = 0; i < vlen && val[i] >= '0' && val[i] <= '9'; i++)
                v = v > INT64_MAX / 10 - 10 ? INT64_MAX / 10 : v * 10 + (val[i] - '0');
            if (i == vlen)
                *max_age_s = v;
        }
    }
}

/* ---- HTTP/2: the head as fields, the body as data (h2.h frames them) ---- */

int hv_http_h2_field(hv_http_t *h, const char *name, size_t nlen, const char *value, size_t vlen)
{
    if (h->_err != 0)
        return h->_err;
    h->bytes_in += nlen + vlen;
    hv_buf_reset(&h->_field);
    h->_header = H_NONE;
    if (count_head(h, nlen) != 0)
        return h->_err;
    if (hv_buf_append(&h->_field, name, nlen) != 0)
        h->_header = H_SKIP;
    if (field_name_done(h) != 0 || field_value(h, value, vlen) != 0 || field_value_done(h) != 0)
        return h->_err;
    if (hv_ascii_case_is(name, nlen, "content-length")) {
        /* nghttp2 checks it against the DATA; read here for the early size check */
        int64_t n = 0;
        for (size_t i = 0; i < vlen && n >= 0; i++)
            n = value[i] >= '0' && value[i] <= '9' && n < INT64_MAX / 10 - 9
                    ? n * 10 + (value[i] - '0')
                    : -1;
        h->content_length = vlen > 0 ? n : -1;
    }
    return 0;
}

int hv_http_h2_head(hv_http_t *h, int status)
{
    if (h->_err != 0)
        return h->_err;
    h->status = status;
    int rc = head_done(h);
    if (rc < 0)
        return h->_err;
    if (rc == 1 || h->_body_mode == HV_HTTP_BODY_DISCARD) {
        h->complete = 1; /* nothing more wanted: the stream can go */
        return 1;
    }
    return 0;
}

int hv_http_h2_data(hv_http_t *h, const char *data, size_t len)
{
    if (h->complete)
        return 1;
    if (h->_err != 0)
        return h->_err;
    h->bytes_in += len;
    if (body_bytes(h, data, len) == 0)
        return 0;
    if (h->_err == DRAIN_STOP) { /* truncated as asked: enough */
        h->_err = 0;
        h->complete = 1;
        return 1;
    }
    return h->_err;
}

int hv_http_h2_end(hv_http_t *h)
{
    if (h->complete)
        return 1;
    if (h->_err != 0)
        return h->_err;
    if (h->status == 0) {
        set_fault(h, HV_D_CLOSED_IN_HEADERS, NULL);
        return HV_ECLOSED;
    }
    if (body_done(h) != 0)
        return h->_err;
    return 1;
}

int hv_http_h2_lost(hv_http_t *h)
{
    if (h->bytes_in == 0)
        set_fault(h, HV_D_CLOSED_BEFORE_RESPONSE, NULL);
    else if (h->status == 0)
        set_fault(h, HV_D_CLOSED_IN_HEADERS, NULL);
    else
        set_fault(h, HV_D_CLOSED_MID_BODY, NULL);
    return HV_ECLOSED;
}
