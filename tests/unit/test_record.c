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

TEST_IMPL(record_failed_input)
{
    hv_record_t *r = record("ftp://example.com/file");
    hv_record_fail(r, HV_STAGE_INPUT, HV_ET_UNSUPPORTED_SCHEME, "unsupported_scheme");
    ASSERT_EQ(0, r->ok);
    ASSERT_JSON(r, "{\"requested_url\":\"ftp://example.com/file\",\"status\":\"failed\","
                   "\"stage\":\"input\",\"error_type\":\"UnsupportedScheme\","
                   "\"error\":\"unsupported_scheme\"}\n");
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
    hv_record_fail(r, HV_STAGE_DOWNLOAD, HV_ET_DNS, "first");
    hv_record_fail(r, HV_STAGE_DOWNLOAD, HV_ET_HTTP_STATUS, "http_404"); /* replaces */
    ASSERT_JSON(r, "{\"requested_url\":\"http://example.com/missing\","
                   "\"url\":\"http://example.com/missing\",\"status\":\"failed\","
                   "\"http_status\":404,\"content_type\":\"text/html\",\"bytes\":0,"
                   "\"redirects\":0,\"elapsed_ms\":0,"
                   "\"fetched_at\":\"1970-01-01T00:00:00.000Z\","
                   "\"stage\":\"download\",\"error_type\":\"HttpStatus\","
                   "\"error\":\"http_404\"}\n");
    hv_record_fail(r, HV_STAGE_PARSE, HV_ET_MISSING_TITLE, NULL);
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
    hv_record_fail(r, HV_STAGE_PARSE, HV_ET_PROTOCOL, "bad\xC0\xAF");
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
