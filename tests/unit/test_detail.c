/* First, so that the header is seen to compile on its own. */
#include "harvestd/detail.h"

#include "harvestd/common.h"
#include "harvestd/config.h"
#include "harvestd/http.h"
#include "harvestd/record.h"
#include "harvestd/retry.h"
#include "test.h"

#include <stdlib.h>

/* The record text of `d` with `arg`, in a static buffer. */
static const char *text(hv_detail_t d, const char *arg)
{
    static char out[HV_DETAIL_TEXT_MAX];
    int n = hv_detail_format(out, sizeof(out), d, arg);
    ASSERT_GE(n, 0);
    ASSERT_LT(n, (int)sizeof(out));
    ASSERT_EQ((size_t)n, strlen(out));
    return out;
}

TEST_IMPL(detail_every_code_has_a_unique_text)
{
    ASSERT_STR_EQ("", hv_detail_str(HV_D_NONE));
    for (int i = 1; i < HV_D__COUNT; i++) {
        const char *s = hv_detail_str((hv_detail_t)i);
        if (s[0] == '\0')
            hv_test_fail(__FILE__, __LINE__, "detail %d has no text", i);
        for (int j = 1; j < i; j++)
            if (strcmp(s, hv_detail_str((hv_detail_t)j)) == 0)
                hv_test_fail(__FILE__, __LINE__, "details %d and %d are both \"%s\"", j, i, s);
    }
}

TEST_IMPL(detail_texts_are_machine_readable)
{
    /* Lower case, digits and '_' (plus '-' in tls_error_-0x...), and at most one placeholder
     * per family, so that the text around the argument is constant. */
    for (int i = 1; i < HV_D__COUNT; i++) {
        const char *s = hv_detail_str((hv_detail_t)i);
        int opens = 0, closes = 0;
        for (const char *p = s; *p != '\0'; p++) {
            opens += *p == '<';
            closes += *p == '>';
            if (*p == '<' || *p == '>' || *p == '_' || *p == '-' || hv_ascii_is_digit(*p) ||
                (*p >= 'a' && *p <= 'z'))
                continue;
            hv_test_fail(__FILE__, __LINE__, "detail \"%s\" has '%c'", s, *p);
        }
        ASSERT_LE(opens, 1);
        ASSERT_EQ(opens, closes);
        ASSERT_EQ(opens, hv_detail_has_arg((hv_detail_t)i));
    }
}

TEST_IMPL(detail_out_of_range_is_empty)
{
    ASSERT_STR_EQ("", hv_detail_str(HV_D__COUNT));
    ASSERT_STR_EQ("", hv_detail_str((hv_detail_t)-1));
    ASSERT_EQ(0, hv_detail_has_arg(HV_D__COUNT));
    ASSERT_STR_EQ("", text(HV_D__COUNT, "x"));
}

TEST_IMPL(detail_fixed_texts_ignore_the_argument)
{
    ASSERT_STR_EQ("connection_refused", text(HV_D_CONNECTION_REFUSED, NULL));
    ASSERT_STR_EQ("connection_refused", text(HV_D_CONNECTION_REFUSED, "ignored"));
    ASSERT_STR_EQ("dns_temporary_failure", text(HV_D_DNS_TEMPORARY_FAILURE, NULL));
    ASSERT_STR_EQ("tls_connection_reset_during_handshake",
                  text(HV_D_TLS_RESET_DURING_HANDSHAKE, NULL));
    ASSERT_STR_EQ("line_exceeds_8_kib", text(HV_D_LINE_EXCEEDS_8_KIB, NULL));
    ASSERT_STR_EQ("parser_crashed_on_this_page", text(HV_D_PARSER_CRASHED, NULL));
    ASSERT_STR_EQ("", text(HV_D_NONE, "x"));
}

TEST_IMPL(detail_families_format_as_records_print_them)
{
    char arg[32];
    ASSERT_STR_EQ("http_404", text(HV_D_HTTP_STATUS, "404"));
    ASSERT_STR_EQ("more_than_5_redirects", text(HV_D_TOO_MANY_REDIRECTS, "5"));
    ASSERT_STR_EQ("nesting_exceeds_512", text(HV_D_NESTING_EXCEEDS, "512"));
    ASSERT_STR_EQ("gzip_truncated", text(HV_D_DECODE_TRUNCATED, "gzip"));
    ASSERT_STR_EQ("brotli_corrupt", text(HV_D_DECODE_CORRUPT, "brotli"));
    ASSERT_STR_EQ("deflate_init_failed", text(HV_D_DECODE_INIT_FAILED, "deflate"));
    ASSERT_STR_EQ("invalid_chunk_size", text(HV_D_HTTP_PARSE, "invalid_chunk_size"));
    ASSERT_STR_EQ("tls_alert_40", text(HV_D_TLS_ALERT, "40"));
    ASSERT_STR_EQ("tls_error_-0x7280", text(HV_D_TLS_ERROR, "7280"));
    ASSERT_STR_EQ("connect_connaborted", text(HV_D_CONNECT_ERROR, "connaborted"));
    ASSERT_STR_EQ("connection_error_pipe", text(HV_D_CONNECTION_ERROR, "pipe"));
    ASSERT_STR_EQ("dns_fail", text(HV_D_DNS_ERROR, "fail"));
    ASSERT_STR_EQ("robots_txt_unavailable_http_500", text(HV_D_ROBOTS_UNAVAILABLE, "http_500"));
    ASSERT_STR_EQ("http_", text(HV_D_HTTP_STATUS, NULL));

    hv_detail_duration(arg, sizeof(arg), 30000);
    ASSERT_STR_EQ("request_exceeded_30s", text(HV_D_REQUEST_EXCEEDED, arg));
    hv_detail_duration(arg, sizeof(arg), 1500);
    ASSERT_STR_EQ("no_data_for_1500ms", text(HV_D_NO_DATA_FOR, arg));
    hv_detail_duration(arg, sizeof(arg), 0);
    ASSERT_STR_EQ("dns_lookup_exceeded_0s", text(HV_D_DNS_LOOKUP_EXCEEDED, arg));
    hv_detail_duration(arg, sizeof(arg), 10000);
    ASSERT_STR_EQ("no_tls_handshake_within_10s", text(HV_D_NO_TLS_HANDSHAKE_WITHIN, arg));
    ASSERT_STR_EQ("no_connection_within_10s", text(HV_D_NO_CONNECTION_WITHIN, arg));

    hv_format_size(arg, sizeof(arg), 2 * 1024 * 1024);
    ASSERT_STR_EQ("response_exceeds_2_mib", text(HV_D_RESPONSE_EXCEEDS, arg));
    hv_format_size(arg, sizeof(arg), 64 * 1024);
    ASSERT_STR_EQ("headers_exceed_64_kib", text(HV_D_HEADERS_EXCEED, arg));
}

TEST_IMPL(detail_format_truncates_like_snprintf)
{
    char out[8];
    ASSERT_EQ(9, hv_detail_format(out, sizeof(out), HV_D_HTTP_STATUS, "4044"));
    ASSERT_STR_EQ("http_40", out);
    ASSERT_EQ(18, hv_detail_format(out, sizeof(out), HV_D_CONNECTION_REFUSED, NULL));
    ASSERT_STR_EQ("connect", out);
    ASSERT_EQ(9, hv_detail_format(NULL, 0, HV_D_HTTP_STATUS, "4044"));
}

TEST_IMPL(detail_fault_keeps_code_and_argument)
{
    hv_fault_t f;
    hv_fault_set(&f, HV_D_CONNECTION_RESET, NULL);
    ASSERT_EQ(HV_D_CONNECTION_RESET, f.code);
    ASSERT_STR_EQ("", f.arg);
    hv_fault_setf(&f, HV_D_HTTP_STATUS, "%d", 503);
    ASSERT_EQ(HV_D_HTTP_STATUS, f.code);
    ASSERT_STR_EQ("503", f.arg);
    ASSERT_STR_EQ("http_503", text(f.code, f.arg));

    /* An over-long argument is cut, never overflows. */
    char arg[2 * HV_DETAIL_ARG_MAX];
    memset(arg, 'a', sizeof(arg) - 1);
    arg[sizeof(arg) - 1] = '\0';
    hv_fault_set(&f, HV_D_ROBOTS_UNAVAILABLE, arg);
    ASSERT_EQ(HV_DETAIL_ARG_MAX - 1, strlen(f.arg));
    ASSERT_LT(strlen(text(f.code, f.arg)), HV_DETAIL_TEXT_MAX);
}

/* A record that failed at download with `type` and `detail`. */
static hv_record_t *failed(hv_error_type_t type, hv_detail_t detail, const char *arg)
{
    hv_record_t *r = hv_record_new("http://h/", 9);
    hv_record_fail(r, HV_STAGE_DOWNLOAD, type, detail, arg);
    return r;
}

static int transient(hv_error_type_t type, hv_detail_t detail, const char *arg)
{
    hv_config_t cfg;
    hv_config_defaults(&cfg);
    hv_record_t *r = failed(type, detail, arg);
    int yes = hv_retry_transient(&cfg, r);
    hv_record_free(r);
    hv_config_free(&cfg);
    return yes;
}

TEST_IMPL(detail_retry_decides_on_the_code)
{
    ASSERT_EQ(1, transient(HV_ET_DNS, HV_D_DNS_TEMPORARY_FAILURE, NULL));
    ASSERT_EQ(1, transient(HV_ET_DNS, HV_D_DNS_LOOKUP_EXCEEDED, "10s"));
    ASSERT_EQ(0, transient(HV_ET_DNS, HV_D_NAME_NOT_RESOLVED, NULL));
    ASSERT_EQ(0, transient(HV_ET_DNS, HV_D_NO_ADDRESS_FOR_NAME, NULL));
    ASSERT_EQ(0, transient(HV_ET_DNS, HV_D_DNS_ERROR, "fail"));
    ASSERT_EQ(1, transient(HV_ET_TLS, HV_D_TLS_CLOSED_DURING_HANDSHAKE, NULL));
    ASSERT_EQ(1, transient(HV_ET_TLS, HV_D_TLS_RESET_DURING_HANDSHAKE, NULL));
    ASSERT_EQ(0, transient(HV_ET_TLS, HV_D_TLS_ALERT, "40"));
    ASSERT_EQ(0, transient(HV_ET_CERTIFICATE, HV_D_CERTIFICATE_EXPIRED, NULL));
    ASSERT_EQ(1, transient(HV_ET_CONNECT, HV_D_CONNECTION_REFUSED, NULL));

    /* The words do not matter: a record whose text says otherwise is judged by its code. */
    hv_config_t cfg;
    hv_config_defaults(&cfg);
    hv_record_t *r = failed(HV_ET_DNS, HV_D_NAME_NOT_RESOLVED, NULL);
    free(r->error);
    r->error = hv_xstrdup("dns_temporary_failure");
    ASSERT_EQ(0, hv_retry_transient(&cfg, r));
    hv_record_free(r);
    hv_config_free(&cfg);
}

static hv_http_body_t keep_body(hv_http_t *h)
{
    (void)h;
    return HV_HTTP_BODY_KEEP;
}

/* Feed `resp` whole (then EOF if asked) and check the fault the exchange reports and the text
 * records print for it. */
#define ASSERT_HTTP_FAULT(resp, eof, want_rc, want_code, want_arg, want_text)                      \
    do {                                                                                           \
        hv_http_limits_t lim_ = {1024, 1024, 64, 0};                                               \
        hv_http_t h_;                                                                              \
        hv_http_init(&h_, &lim_, keep_body, NULL);                                                 \
        int rc_ = hv_http_feed(&h_, resp, strlen(resp));                                           \
        if (rc_ == 0 && (eof))                                                                     \
            rc_ = hv_http_eof(&h_);                                                                \
        ASSERT_EQ(want_rc, rc_);                                                                   \
        ASSERT_EQ(want_code, h_.fault.code);                                                       \
        ASSERT_STR_EQ(want_arg, h_.fault.arg);                                                     \
        ASSERT_STR_EQ(want_text, text(h_.fault.code, h_.fault.arg));                               \
        hv_http_free(&h_);                                                                         \
    } while (0)

TEST_IMPL(detail_http_reports_codes)
{
    ASSERT_HTTP_FAULT("", 1, HV_ECLOSED, HV_D_CLOSED_BEFORE_RESPONSE, "",
                      "connection_closed_before_response");
    ASSERT_HTTP_FAULT("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", 1, HV_ECLOSED,
                      HV_D_CLOSED_MID_BODY, "", "connection_closed_mid_body");
    ASSERT_HTTP_FAULT("HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n", 0, HV_ETOOBIG,
                      HV_D_RESPONSE_EXCEEDS, "1_kib", "response_exceeds_1_kib");
    ASSERT_HTTP_FAULT("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 0, HV_EPROTO,
                      HV_D_HTTP_PARSE, "invalid_chunk_size", "invalid_chunk_size");
    ASSERT_HTTP_FAULT("HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 4\r\n\r\n"
                      "abcd",
                      0, HV_EDECODE, HV_D_DECODE_CORRUPT, "gzip", "gzip_corrupt");
}
