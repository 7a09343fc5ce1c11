#include "harvestd/buf.h"
#include "harvestd/common.h"
#include "harvestd/record.h"
#include "test.h"

#include <stdlib.h>

/* Serialise `r` into a fresh buffer and return it NUL-terminated (caller frees). */
static char *to_json(const hv_record_t *r)
{
    hv_buf_t b;
    hv_buf_init(&b, 1 << 20);
    ASSERT_OK(hv_record_append_json(r, &b));
    ASSERT_OK(hv_buf_append(&b, "", 1));
    size_t len;
    return hv_buf_steal(&b, &len);
}

#define ASSERT_JSON(r, want)                                                                       \
    do {                                                                                           \
        char *j_ = to_json(r);                                                                     \
        ASSERT_STR_EQ(want, j_);                                                                   \
        free(j_);                                                                                  \
    } while (0)

static hv_record_t *record(const char *url)
{
    return hv_record_new(url, strlen(url));
}

TEST_IMPL(record_new_has_everything_absent)
{
    hv_record_t *r = record("http://example.com/");
    ASSERT_STR_EQ("http://example.com/", r->requested_url);
    ASSERT_NULL(r->url);
    ASSERT_EQ(1, r->ok);
    ASSERT_EQ(0, r->http_status);
    ASSERT_NULL(r->title);
    ASSERT_NULL(r->content_type);
    ASSERT_EQ(-1, r->bytes);
    ASSERT_EQ(-1, r->redirects);
    ASSERT_EQ(-1, r->elapsed_ms);
    ASSERT_EQ(-1, r->fetched_at_ms);
    ASSERT_EQ(HV_STAGE_NONE, r->stage);
    ASSERT_EQ(HV_ET_NONE, r->error_type);
    ASSERT_EQ(HV_D_NONE, r->detail);
    ASSERT_NULL(r->error);
    ASSERT_JSON(r, "{\"requested_url\":\"http://example.com/\",\"status\":\"ok\"}\n");
    hv_record_free(r);
    hv_record_free(NULL);
}

TEST_IMPL(record_new_copies_len_bytes)
{
    const char line[] = "http://a/b trailing junk";
    hv_record_t *r = hv_record_new(line, 10);
    ASSERT_STR_EQ("http://a/b", r->requested_url);
    hv_record_free(r);
    r = hv_record_new(NULL, 0);
    ASSERT_STR_EQ("", r->requested_url);
    hv_record_free(r);
}

TEST_IMPL(record_full_ok_key_order)
{
    hv_record_t *r = record("http://example.com/");
    r->url = hv_xstrdup("https://example.com/");
    r->http_status = 200;
    r->title = hv_xstrdup("Example Domain");
    r->content_type = hv_xstrdup("text/html; charset=UTF-8");
    r->bytes = 1256;
    r->redirects = 1;
    r->elapsed_ms = 342;
    r->fetched_at_ms = INT64_C(1795953600123);
    ASSERT_JSON(r, "{\"requested_url\":\"http://example.com/\","
                   "\"url\":\"https://example.com/\","
                   "\"status\":\"ok\","
                   "\"http_status\":200,"
                   "\"title\":\"Example Domain\","
                   "\"content_type\":\"text/html; charset=UTF-8\","
                   "\"bytes\":1256,"
                   "\"redirects\":1,"
                   "\"elapsed_ms\":342,"
                   "\"fetched_at\":\"2026-11-29T12:00:00.123Z\"}\n");
    hv_record_free(r);
}

/* A 304's record: the re-crawling keys after fetched_at; its state is never output. */
TEST_IMPL(record_recrawl_keys_in_order)
{
    hv_record_t *r = record("http://a.test/");
    r->url = hv_xstrdup("http://a.test/");
    r->http_status = 304;
    r->title = hv_xstrdup("T");
    r->fetched_at_ms = INT64_C(1795953600123);
    r->modified_at_ms = INT64_C(1795953500000);
    r->not_modified = 1;
    hv_record_state_t *st = hv_record_state_new(r, "http://a.test/");
    st->etag = hv_xstrdup("\"e\"");
    ASSERT_JSON(r, "{\"requested_url\":\"http://a.test/\",\"url\":\"http://a.test/\","
                   "\"status\":\"ok\",\"http_status\":304,\"title\":\"T\","
                   "\"fetched_at\":\"2026-11-29T12:00:00.123Z\","
                   "\"modified_at\":\"2026-11-29T11:58:20.000Z\",\"not_modified\":true}\n");
    r->not_modified = 0;
    r->unchanged = 1;
    r->from_cache = 1;
    ASSERT_JSON(r, "{\"requested_url\":\"http://a.test/\",\"url\":\"http://a.test/\","
                   "\"status\":\"ok\",\"http_status\":304,\"title\":\"T\","
                   "\"fetched_at\":\"2026-11-29T12:00:00.123Z\","
                   "\"modified_at\":\"2026-11-29T11:58:20.000Z\",\"unchanged\":true,"
                   "\"from_cache\":true}\n");
    hv_record_free(r);
}

TEST_IMPL(record_failed_input)
{
    hv_record_t *r = record("ftp://example.com/file");
    hv_record_fail(r, HV_STAGE_INPUT, HV_ET_UNSUPPORTED_SCHEME, HV_D_UNSUPPORTED_SCHEME, NULL);
    ASSERT_EQ(0, r->ok);
    ASSERT_EQ(HV_D_UNSUPPORTED_SCHEME, r->detail);
    ASSERT_JSON(r, "{\"requested_url\":\"ftp://example.com/file\",\"status\":\"failed\","
                   "\"stage\":\"input\",\"error_type\":\"UnsupportedScheme\","
                   "\"error\":\"unsupported_scheme\"}\n");
    hv_record_free(r);
}

/* body_digest: 16 hex digits of XXH3-64, after bytes, only when known and asked for. */
TEST_IMPL(record_body_digest_only_when_asked)
{
    hv_record_t *r = record("http://example.com/");
    r->bytes = 3;
    r->body_digest = hv_record_body_digest("abc", 3);
    ASSERT(r->body_digest != hv_record_body_digest("abd", 3));
    ASSERT_EQ(hv_record_body_digest("", 0), hv_record_body_digest("x", 0));
    r->digest_known = 1;
    ASSERT_JSON(r, "{\"requested_url\":\"http://example.com/\",\"status\":\"ok\","
                   "\"bytes\":3}\n");
    r->digest_shown = 1;
    r->body_digest = 0x00ab;
    ASSERT_JSON(r, "{\"requested_url\":\"http://example.com/\",\"status\":\"ok\","
                   "\"bytes\":3,\"body_digest\":\"00000000000000ab\"}\n");
    r->digest_known = 0;
    ASSERT_JSON(r, "{\"requested_url\":\"http://example.com/\",\"status\":\"ok\","
                   "\"bytes\":3}\n");
    hv_record_free(r);
}

TEST_IMPL(record_failed_download_keeps_what_is_known)
{
    hv_record_t *r = record("http://example.com/missing");
    r->url = hv_xstrdup("http://example.com/missing");
    r->http_status = 404;
    r->content_type = hv_xstrdup("text/html");
    r->bytes = 0; /* zero is a value, not absence */
    r->redirects = 0;
    r->elapsed_ms = 0;
    r->fetched_at_ms = 0;
    hv_record_fail(r, HV_STAGE_DOWNLOAD, HV_ET_DNS, HV_D_NAME_NOT_RESOLVED, NULL);
    hv_record_fail(r, HV_STAGE_DOWNLOAD, HV_ET_HTTP_STATUS, HV_D_HTTP_STATUS, "404"); /* replaces */
    ASSERT_EQ(HV_D_HTTP_STATUS, r->detail);
    ASSERT_JSON(r, "{\"requested_url\":\"http://example.com/missing\","
                   "\"url\":\"http://example.com/missing\",\"status\":\"failed\","
                   "\"http_status\":404,\"content_type\":\"text/html\",\"bytes\":0,"
                   "\"redirects\":0,\"elapsed_ms\":0,"
                   "\"fetched_at\":\"1970-01-01T00:00:00.000Z\","
                   "\"stage\":\"download\",\"error_type\":\"HttpStatus\","
                   "\"error\":\"http_404\"}\n");
    hv_record_fail(r, HV_STAGE_PARSE, HV_ET_MISSING_TITLE, HV_D_NONE, NULL);
    ASSERT_EQ(HV_D_NONE, r->detail);
    ASSERT_NULL(r->error);
    ASSERT_JSON(r, "{\"requested_url\":\"http://example.com/missing\","
                   "\"url\":\"http://example.com/missing\",\"status\":\"failed\","
                   "\"http_status\":404,\"content_type\":\"text/html\",\"bytes\":0,"
                   "\"redirects\":0,\"elapsed_ms\":0,"
                   "\"fetched_at\":\"1970-01-01T00:00:00.000Z\","
                   "\"stage\":\"parse\",\"error_type\":\"MissingTitle\"}\n");
    hv_record_free(r);
}

TEST_IMPL(record_invalid_utf8_sanitised)
{
    hv_record_t *r = hv_record_new("http://h/\xFF", 10);
    r->url = hv_xstrdup("http://h/caf\xC3");
    r->title = hv_xstrdup("T\xE2\x82"
                          "A\xED\xA0\x80");
    r->content_type = hv_xstrdup("text/html\x80");
    /* A family whose text is all argument (llhttp's error names) passes bytes as they are. */
    hv_record_fail(r, HV_STAGE_PARSE, HV_ET_PROTOCOL, HV_D_HTTP_PARSE, "bad\xC0\xAF");
    ASSERT_JSON(r, "{\"requested_url\":\"http://h/\xEF\xBF\xBD\","
                   "\"url\":\"http://h/caf\xEF\xBF\xBD\",\"status\":\"failed\","
                   "\"title\":\"T\xEF\xBF\xBD"
                   "A\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\","
                   "\"content_type\":\"text/html\xEF\xBF\xBD\","
                   "\"stage\":\"parse\",\"error_type\":\"ProtocolError\","
                   "\"error\":\"bad\xEF\xBF\xBD\xEF\xBF\xBD\"}\n");
    /* The record itself is left as it was. */
    ASSERT_STR_EQ("http://h/caf\xC3", r->url);
    hv_record_free(r);
}

TEST_IMPL(record_strings_escaped)
{
    hv_record_t *r = record("http://h/");
    r->title = hv_xstrdup("say \"hi\"\\ \n\t\x01 caf\xC3\xA9 </script>");
    ASSERT_JSON(r, "{\"requested_url\":\"http://h/\",\"status\":\"ok\","
                   "\"title\":\"say \\\"hi\\\"\\\\ \\n\\t\\u0001 caf\xC3\xA9 </script>\"}\n");
    hv_record_free(r);
}

TEST_IMPL(record_large_integers_exact)
{
    hv_record_t *r = record("u");
    r->bytes = INT64_C(9007199254740993); /* 2^53 + 1: not a double */
    r->elapsed_ms = INT64_MAX;
    r->http_status = 599;
    r->redirects = 1000000;
    ASSERT_JSON(r, "{\"requested_url\":\"u\",\"status\":\"ok\",\"http_status\":599,"
                   "\"bytes\":9007199254740993,\"redirects\":1000000,"
                   "\"elapsed_ms\":9223372036854775807}\n");
    hv_record_free(r);
}

TEST_IMPL(record_too_big_appends_nothing)
{
    hv_record_t *r = record("http://example.com/a-fairly-long-url");
    hv_buf_t b;
    hv_buf_init(&b, 30);
    ASSERT_EQ(HV_ETOOBIG, hv_record_append_json(r, &b));
    ASSERT_EQ(0, b.len);

    /* With earlier content, that content stays as it was. */
    hv_buf_init(&b, 80);
    ASSERT_OK(hv_buf_append(&b, "previous line\n", 14));
    ASSERT_EQ(HV_ETOOBIG, hv_record_append_json(r, &b));
    ASSERT_EQ(14, b.len);
    ASSERT_MEM_EQ("previous line\n", b.data, 14);
    hv_buf_free(&b);

    /* Exactly enough room: line plus newline. */
    char *j = to_json(r);
    size_t need = strlen(j);
    free(j);
    hv_buf_init(&b, need);
    ASSERT_OK(hv_record_append_json(r, &b));
    ASSERT_EQ(need, b.len);
    ASSERT_EQ('\n', b.data[b.len - 1]);
    hv_buf_free(&b);
    hv_buf_init(&b, need - 1);
    ASSERT_EQ(HV_ETOOBIG, hv_record_append_json(r, &b));
    ASSERT_EQ(0, b.len);
    hv_buf_free(&b);
    hv_record_free(r);
}

TEST_IMPL(record_lines_accumulate)
{
    hv_record_t *a = record("a");
    hv_record_t *c = record("c");
    hv_buf_t b;
    hv_buf_init(&b, 1024);
    ASSERT_OK(hv_record_append_json(a, &b));
    ASSERT_OK(hv_record_append_json(c, &b));
    const char want[] = "{\"requested_url\":\"a\",\"status\":\"ok\"}\n"
                        "{\"requested_url\":\"c\",\"status\":\"ok\"}\n";
    ASSERT_EQ(sizeof(want) - 1, b.len);
    ASSERT_MEM_EQ(want, b.data, b.len);
    hv_buf_free(&b);
    hv_record_free(a);
    hv_record_free(c);
}

TEST_IMPL(record_names)
{
    ASSERT_STR_EQ("", hv_error_type_name(HV_ET_NONE));
    ASSERT_STR_EQ("InvalidUrl", hv_error_type_name(HV_ET_INVALID_URL));
    ASSERT_STR_EQ("UnsupportedScheme", hv_error_type_name(HV_ET_UNSUPPORTED_SCHEME));
    ASSERT_STR_EQ("DnsError", hv_error_type_name(HV_ET_DNS));
    ASSERT_STR_EQ("ConnectError", hv_error_type_name(HV_ET_CONNECT));
    ASSERT_STR_EQ("ConnectTimeout", hv_error_type_name(HV_ET_CONNECT_TIMEOUT));
    ASSERT_STR_EQ("ReadTimeout", hv_error_type_name(HV_ET_READ_TIMEOUT));
    ASSERT_STR_EQ("TotalTimeout", hv_error_type_name(HV_ET_TOTAL_TIMEOUT));
    ASSERT_STR_EQ("ConnectionReset", hv_error_type_name(HV_ET_CONNECTION_RESET));
    ASSERT_STR_EQ("ProtocolError", hv_error_type_name(HV_ET_PROTOCOL));
    ASSERT_STR_EQ("TooManyRedirects", hv_error_type_name(HV_ET_TOO_MANY_REDIRECTS));
    ASSERT_STR_EQ("PageTooLarge", hv_error_type_name(HV_ET_PAGE_TOO_LARGE));
    ASSERT_STR_EQ("UnexpectedContentType", hv_error_type_name(HV_ET_UNEXPECTED_CONTENT_TYPE));
    ASSERT_STR_EQ("HttpStatus", hv_error_type_name(HV_ET_HTTP_STATUS));
    ASSERT_STR_EQ("MissingTitle", hv_error_type_name(HV_ET_MISSING_TITLE));
    ASSERT_STR_EQ("TooDeeplyNested", hv_error_type_name(HV_ET_TOO_DEEPLY_NESTED));
    ASSERT_STR_EQ("UnparsableDocument", hv_error_type_name(HV_ET_UNPARSABLE_DOCUMENT));
    ASSERT_STR_EQ("TooManyAttributes", hv_error_type_name(HV_ET_TOO_MANY_ATTRIBUTES));
    ASSERT_STR_EQ("ExtractionTooLarge", hv_error_type_name(HV_ET_EXTRACTION_TOO_LARGE));
    /* Every type has a name (the table must keep up with the enum), and they differ. */
    for (int t = 1; t < HV_ET__COUNT; t++) {
        const char *name = hv_error_type_name((hv_error_type_t)t);
        ASSERT_NOT_NULL(name);
        ASSERT_GT(strlen(name), 0);
        for (int u = 1; u < t; u++)
            ASSERT(strcmp(name, hv_error_type_name((hv_error_type_t)u)) != 0);
    }
    ASSERT_STR_EQ("", hv_error_type_name(HV_ET__COUNT));
    ASSERT_STR_EQ("", hv_error_type_name((hv_error_type_t)-1));
    ASSERT_NULL(hv_stage_name(HV_STAGE_NONE));
    ASSERT_STR_EQ("input", hv_stage_name(HV_STAGE_INPUT));
    ASSERT_STR_EQ("download", hv_stage_name(HV_STAGE_DOWNLOAD));
    ASSERT_STR_EQ("parse", hv_stage_name(HV_STAGE_PARSE));
}

TEST_IMPL(record_rfc3339_formatting)
{
    char s[32];
    hv_format_rfc3339_ms(s, 0);
    ASSERT_STR_EQ("1970-01-01T00:00:00.000Z", s);
    hv_format_rfc3339_ms(s, INT64_C(1795953600123));
    ASSERT_STR_EQ("2026-11-29T12:00:00.123Z", s);
    hv_format_rfc3339_ms(s, INT64_C(951868799999));
    ASSERT_STR_EQ("2000-02-29T23:59:59.999Z", s);
    hv_format_rfc3339_ms(s, -1); /* floor, not truncation */
    ASSERT_STR_EQ("1969-12-31T23:59:59.999Z", s);
    hv_format_rfc3339_ms(s, INT64_C(253402300799999));
    ASSERT_STR_EQ("9999-12-31T23:59:59.999Z", s);
    ASSERT_EQ(24, strlen(s));
}

/* The same record, failed with `detail` and `arg`, as JSON. */
static char *failed_json(hv_error_type_t type, hv_detail_t detail, const char *arg)
{
    hv_record_t *r = record("http://h/");
    hv_record_fail(r, HV_STAGE_DOWNLOAD, type, detail, arg);
    ASSERT_EQ(detail, r->detail);
    char *j = to_json(r);
    hv_record_free(r);
    return j;
}

#define ASSERT_FAILED_JSON(want_type, want_error, type, detail, arg)                               \
    do {                                                                                           \
        char *j_ = failed_json(type, detail, arg);                                                 \
        ASSERT_STR_EQ("{\"requested_url\":\"http://h/\",\"status\":\"failed\","                    \
                      "\"stage\":\"download\",\"error_type\":\"" want_type "\","                   \
                      "\"error\":\"" want_error "\"}\n",                                           \
                      j_);                                                                         \
        free(j_);                                                                                  \
    } while (0)

TEST_IMPL(record_failed_with_a_code_prints_its_text)
{
    char arg[32];
    ASSERT_FAILED_JSON("ConnectError", "connection_refused", HV_ET_CONNECT, HV_D_CONNECTION_REFUSED,
                       NULL);
    ASSERT_FAILED_JSON("DnsError", "dns_temporary_failure", HV_ET_DNS, HV_D_DNS_TEMPORARY_FAILURE,
                       NULL);
    ASSERT_FAILED_JSON("HttpStatus", "http_404", HV_ET_HTTP_STATUS, HV_D_HTTP_STATUS, "404");
    ASSERT_FAILED_JSON("TooManyRedirects", "more_than_10_redirects", HV_ET_TOO_MANY_REDIRECTS,
                       HV_D_TOO_MANY_REDIRECTS, "10");
    ASSERT_FAILED_JSON("ProtocolError", "gzip_truncated", HV_ET_PROTOCOL, HV_D_DECODE_TRUNCATED,
                       "gzip");
    ASSERT_FAILED_JSON("TlsError", "tls_alert_40", HV_ET_TLS, HV_D_TLS_ALERT, "40");
    ASSERT_FAILED_JSON("CertificateError", "certificate_expired", HV_ET_CERTIFICATE,
                       HV_D_CERTIFICATE_EXPIRED, NULL);
    ASSERT_FAILED_JSON("RobotsDisallowed", "robots_txt_unavailable_connection_refused",
                       HV_ET_ROBOTS, HV_D_ROBOTS_UNAVAILABLE, "connection_refused");
    hv_detail_duration(arg, sizeof(arg), 30000);
    ASSERT_FAILED_JSON("TotalTimeout", "request_exceeded_30s", HV_ET_TOTAL_TIMEOUT,
                       HV_D_REQUEST_EXCEEDED, arg);
    hv_format_size(arg, sizeof(arg), 2 * 1024 * 1024);
    ASSERT_FAILED_JSON("PageTooLarge", "response_exceeds_2_mib", HV_ET_PAGE_TOO_LARGE,
                       HV_D_RESPONSE_EXCEEDS, arg);
}

TEST_IMPL(record_failure_text_is_never_cut)
{
    char arg[300];
    memset(arg, 'x', sizeof(arg) - 1);
    arg[sizeof(arg) - 1] = '\0';
    hv_record_t *r = record("http://h/");
    hv_record_fail(r, HV_STAGE_DOWNLOAD, HV_ET_ROBOTS, HV_D_ROBOTS_UNAVAILABLE, arg);
    ASSERT_EQ(strlen("robots_txt_unavailable_") + strlen(arg), strlen(r->error));
    hv_record_free(r);
}

/* A record of a page that parsed, with a title of `n` bytes `c`. */
static hv_record_t *record_with_title(size_t n, char c)
{
    hv_record_t *r = record("http://h/big");
    r->url = hv_xstrdup("http://h/big");
    r->http_status = 200;
    r->content_type = hv_xstrdup("text/html");
    r->bytes = 123;
    r->title = hv_xmalloc(n + 1);
    memset(r->title, c, n);
    r->title[n] = '\0';
    return r;
}

/* The line `r` gives in a buffer as large as the writer's (256 MiB), NUL-terminated. */
static char *line_of(const hv_record_t *r, size_t *len)
{
    hv_buf_t b;
    hv_buf_init(&b, (size_t)256 << 20);
    ASSERT_OK(hv_record_append_json(r, &b));
    ASSERT_OK(hv_buf_append(&b, "", 1));
    char *s = hv_buf_steal(&b, len);
    (*len)--;
    return s;
}

TEST_IMPL(record_too_large_to_print_becomes_a_failure_of_its_page)
{
    /* Whatever a page yields, its line stays within 32 MiB: a larger one would make the
     * writer fail the batch. It becomes that page's failure, keeping what is known but the
     * title and the fields. */
    static const char want[] =
        "{\"requested_url\":\"http://h/big\",\"url\":\"http://h/big\",\"status\":\"failed\","
        "\"http_status\":200,\"content_type\":\"text/html\",\"bytes\":123,\"stage\":\"parse\","
        "\"error_type\":\"ExtractionTooLarge\",\"error\":\"record_exceeds_32_mib\"}\n";
    size_t len;
    hv_record_t *r = record_with_title((size_t)40 << 20, 'x');
    char *line = line_of(r, &len);
    ASSERT_EQ(sizeof(want) - 1, len); /* (before comparing texts that may be 40 MiB) */
    ASSERT_STR_EQ(want, line);
    free(line);
    hv_record_free(r);

    /* Escapes count: 6 MiB of control characters print as 36 MiB. */
    r = record_with_title((size_t)6 << 20, '\x01');
    line = line_of(r, &len);
    ASSERT_EQ(sizeof(want) - 1, len); /* (before comparing texts that may be 40 MiB) */
    ASSERT_STR_EQ(want, line);
    free(line);
    hv_record_free(r);

    /* Fields too (they come printed already). */
    r = record_with_title(1, 'x');
    free(r->fields);
    r->fields = hv_xmalloc((size_t)33 << 20);
    memset(r->fields, 'x', (size_t)33 << 20);
    memcpy(r->fields, "{\"f\":\"", 6);
    memcpy(r->fields + ((size_t)33 << 20) - 3, "\"}", 3);
    line = line_of(r, &len);
    ASSERT_EQ(sizeof(want) - 1, len); /* (before comparing texts that may be 40 MiB) */
    ASSERT_STR_EQ(want, line);
    free(line);
    hv_record_free(r);

    /* Just under the limit, the line is kept whole. */
    r = record_with_title(((size_t)32 << 20) - 300, 'y');
    line = line_of(r, &len);
    ASSERT_LE(len, (size_t)32 << 20);
    ASSERT_GT(len, ((size_t)32 << 20) - 300);
    ASSERT(strstr(line, "\"status\":\"ok\"") != NULL);
    free(line);
    hv_record_free(r);
}
