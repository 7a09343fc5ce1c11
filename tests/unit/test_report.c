/*
 * test_report.c: the report of an output (report.h): what a line is (the scanner against
 * JSON's grammar and the record's member types), how records are counted (by status, error
 * type, group, host; the bounds on hosts, groups and lines; the slowest and largest), that
 * the page does not depend on how the file is split into pieces, and that text from the file
 * reaches the page escaped.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <uv.h>

#include "harvestd/common.h"
#include "harvestd/report.h"
#include "harvestd/utf8.h"
#include "test.h"

#define FFFD "\xEF\xBF\xBD"

static const hv_report_page_t page = {.source = "out.jsonl", .generated_at = "then"};

/* The page of `r` (the caller frees it). */
static char *html_of(const hv_report_t *r)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ASSERT_NOT_NULL(f);
    ASSERT_OK(hv_report_write_html(r, &page, f));
    ASSERT_OK(fclose(f));
    ASSERT_EQ(strlen(text), len);
    ASSERT(hv_utf8_valid(text, len));
    return text;
}

/* hv_report_html_escape() of a literal (which may hold NULs). */
static char *escaped(const char *s, size_t len)
{
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    ASSERT_NOT_NULL(f);
    hv_report_html_escape(f, s, len);
    ASSERT_OK(fclose(f));
    return text;
}

#define ASSERT_ESCAPED(in, want)                                                                   \
    do {                                                                                           \
        char *e_ = escaped(in, sizeof(in) - 1);                                                    \
        ASSERT_STR_EQ(want, e_);                                                                   \
        free(e_);                                                                                  \
    } while (0)

static hv_report_line_t line_is(const char *line, size_t len)
{
    hv_report_t *r = hv_report_new(NULL);
    hv_report_line_t what = hv_report_add_line(r, line, len);
    hv_report_totals_t t;
    hv_report_get_totals(r, &t);
    ASSERT_EQ(1, t.lines);
    ASSERT_EQ(1, t.by_reason[what]);
    hv_report_free(r);
    return what;
}

#define LINE_IS(want, lit) ASSERT_EQ(want, line_is(lit, sizeof(lit) - 1))

#define REC "\"requested_url\":\"http://a.test/\",\"status\":\"ok\""

TEST_IMPL(report_line_records_and_types)
{
    LINE_IS(HV_REPORT_LINE_RECORD, "{" REC "}");
    LINE_IS(HV_REPORT_LINE_RECORD, " \t{ " REC " , \"x\" : [1, {\"y\": null}, -0.5e+3, true] }\r");
    LINE_IS(HV_REPORT_LINE_RECORD, "{" REC ",\"http_status\":404,\"bytes\":1e3,\"elapsed_ms\":0}");
    LINE_IS(HV_REPORT_LINE_RECORD, "{" REC ",\"bytes\":12.0,\"title\":\"\\u00e9\\ud83d\\ude00\"}");
    LINE_IS(HV_REPORT_LINE_RECORD, "{\"requested_url\":\"u\",\"status\":\"failed\"}");
    /* A name spelled with escapes is the name; of a name given twice, the last counts. */
    LINE_IS(HV_REPORT_LINE_RECORD, "{\"requested_url\":\"u\",\"\\u0073tatus\":\"ok\"}");
    LINE_IS(HV_REPORT_LINE_RECORD, "{\"requested_url\":\"u\",\"status\":\"no\",\"status\":\"ok\"}");
    /* Members the report does not read may be of any type. */
    LINE_IS(HV_REPORT_LINE_RECORD, "{" REC ",\"redirects\":\"many\",\"fields\":{\"a\":[]}}");

    LINE_IS(HV_REPORT_LINE_BAD_FIELD, "{}");
    LINE_IS(HV_REPORT_LINE_BAD_FIELD, "{\"status\":\"ok\"}");
    LINE_IS(HV_REPORT_LINE_BAD_FIELD, "{\"requested_url\":\"u\"}");
    LINE_IS(HV_REPORT_LINE_BAD_FIELD, "{\"requested_url\":\"u\",\"status\":\"maybe\"}");
    LINE_IS(HV_REPORT_LINE_BAD_FIELD, "{\"requested_url\":\"u\",\"status\":\"okay-long-text\"}");
    LINE_IS(HV_REPORT_LINE_BAD_FIELD, "{\"requested_url\":7,\"status\":\"ok\"}");
    LINE_IS(HV_REPORT_LINE_BAD_FIELD, "{\"requested_url\":null,\"status\":\"ok\"}");
    LINE_IS(HV_REPORT_LINE_BAD_FIELD, "{" REC ",\"http_status\":1000}");
    LINE_IS(HV_REPORT_LINE_BAD_FIELD, "{" REC ",\"http_status\":\"200\"}");
    LINE_IS(HV_REPORT_LINE_BAD_FIELD, "{" REC ",\"bytes\":-1}");
    LINE_IS(HV_REPORT_LINE_BAD_FIELD, "{" REC ",\"bytes\":1.5}");
    LINE_IS(HV_REPORT_LINE_BAD_FIELD, "{" REC ",\"bytes\":1e300}");
    LINE_IS(HV_REPORT_LINE_BAD_FIELD, "{" REC ",\"bytes\":9007199254740993}");
    LINE_IS(HV_REPORT_LINE_BAD_FIELD, "{" REC ",\"elapsed_ms\":\"5\"}");
    LINE_IS(HV_REPORT_LINE_BAD_FIELD, "{" REC ",\"elapsed_ms\":true}");
    LINE_IS(HV_REPORT_LINE_BAD_FIELD, "{" REC ",\"title\":5}");
    LINE_IS(HV_REPORT_LINE_BAD_FIELD, "{" REC ",\"error\":[\"x\"]}");
    LINE_IS(HV_REPORT_LINE_BAD_FIELD, "{" REC ",\"url\":{}}");
}

TEST_IMPL(report_line_json_syntax)
{
    LINE_IS(HV_REPORT_LINE_EMPTY, "");
    LINE_IS(HV_REPORT_LINE_EMPTY, " \t\r");
    LINE_IS(HV_REPORT_LINE_NOT_OBJECT, "[1,2]");
    LINE_IS(HV_REPORT_LINE_NOT_OBJECT, " \"text\" ");
    LINE_IS(HV_REPORT_LINE_NOT_OBJECT, "null");
    LINE_IS(HV_REPORT_LINE_NOT_OBJECT, "-12.5E-3");
    LINE_IS(HV_REPORT_LINE_NOT_JSON, "not json");
    LINE_IS(HV_REPORT_LINE_NOT_JSON, "nul");
    LINE_IS(HV_REPORT_LINE_NOT_JSON, "[1,2");
    LINE_IS(HV_REPORT_LINE_NOT_JSON, "[1,]");
    LINE_IS(HV_REPORT_LINE_NOT_JSON, "{" REC "} x");
    LINE_IS(HV_REPORT_LINE_NOT_JSON, "{" REC "}{}");
    LINE_IS(HV_REPORT_LINE_NOT_JSON, "{" REC ",}");
    LINE_IS(HV_REPORT_LINE_NOT_JSON, "{" REC ",\"a\"}");
    LINE_IS(HV_REPORT_LINE_NOT_JSON, "{" REC ",\"a\":tru}");
    LINE_IS(HV_REPORT_LINE_NOT_JSON, "{" REC ",\"a\":01}");
    LINE_IS(HV_REPORT_LINE_NOT_JSON, "{" REC ",\"a\":1.}");
    LINE_IS(HV_REPORT_LINE_NOT_JSON, "{" REC ",\"a\":.5}");
    LINE_IS(HV_REPORT_LINE_NOT_JSON, "{" REC ",\"a\":1e}");
    LINE_IS(HV_REPORT_LINE_NOT_JSON, "{" REC ",\"a\":+1}");
    LINE_IS(HV_REPORT_LINE_NOT_JSON, "{" REC ",\"a\":\"\\x\"}");
    LINE_IS(HV_REPORT_LINE_NOT_JSON, "{" REC ",\"a\":\"\\u12\"}");
    LINE_IS(HV_REPORT_LINE_NOT_JSON, "{" REC ",\"a\":\"tab\there\"}");
    LINE_IS(HV_REPORT_LINE_NOT_JSON, "{" REC ",\"a\":\"nul\0here\"}");
    LINE_IS(HV_REPORT_LINE_NOT_JSON, "{" REC ",\"a\":\"open}");
    LINE_IS(HV_REPORT_LINE_NOT_JSON, "{'requested_url':'u'}");
    LINE_IS(HV_REPORT_LINE_NOT_JSON, "{" REC ",\"a\":1}\0");

    /* Nesting: HV_REPORT_DEPTH_MAX containers are fine, one more is not. */
    char deep[2 * HV_REPORT_DEPTH_MAX + 64];
    size_t n = 0;
    for (int i = 0; i < HV_REPORT_DEPTH_MAX; i++)
        deep[n++] = '[';
    for (int i = 0; i < HV_REPORT_DEPTH_MAX; i++)
        deep[n++] = ']';
    ASSERT_EQ(HV_REPORT_LINE_NOT_OBJECT, line_is(deep, n));
    n = 0;
    for (int i = 0; i <= HV_REPORT_DEPTH_MAX; i++)
        deep[n++] = '[';
    ASSERT_EQ(HV_REPORT_LINE_TOO_DEEP, line_is(deep, n));
    static const char head[] = "{" REC ",\"x\":";
    memcpy(deep, head, sizeof(head) - 1);
    n = sizeof(head) - 1;
    for (int i = 0; i < HV_REPORT_DEPTH_MAX; i++)
        deep[n++] = '[';
    ASSERT_EQ(HV_REPORT_LINE_TOO_DEEP, line_is(deep, n));
}

static void feed_lines(hv_report_t *r, const char *text)
{
    hv_report_feed(r, text, strlen(text));
}

TEST_IMPL(report_counts)
{
    hv_report_t *r = hv_report_new(NULL);
    feed_lines(r,
               "{\"requested_url\":\"http://A.test/1\",\"status\":\"ok\",\"http_status\":200,"
               "\"bytes\":1000,\"elapsed_ms\":10}\n"
               "{\"requested_url\":\"http://a.test/2\",\"status\":\"failed\",\"http_status\":404,"
               "\"elapsed_ms\":20,\"stage\":\"download\",\"error_type\":\"HttpStatus\","
               "\"error\":\"http_404\"}\n"
               "{\"requested_url\":\"http://a.test/3\",\"status\":\"failed\",\"http_status\":404,"
               "\"elapsed_ms\":30,\"stage\":\"download\",\"error_type\":\"HttpStatus\","
               "\"error\":\"http_404\"}\n"
               "{\"requested_url\":\"https://u:p@b.test:8443/x\",\"status\":\"failed\","
               "\"elapsed_ms\":40,\"stage\":\"download\",\"error_type\":\"ConnectError\","
               "\"error\":\"connect_refused\"}\n"
               "{\"requested_url\":\"not a url\",\"status\":\"failed\",\"stage\":\"input\","
               "\"error_type\":\"InvalidUrl\",\"error\":\"not_absolute\"}\n"
               "{\"requested_url\":\"x\",\"status\":\"failed\"}\n"
               "garbage\n"
               "\n"
               "{\"requested_url\":\"x\",\"status\":\"ok\",\"bytes\":\"12\"}\n");
    hv_report_finish(r);
    hv_report_totals_t t;
    hv_report_get_totals(r, &t);
    ASSERT_EQ(9, t.lines);
    ASSERT_EQ(6, t.records);
    ASSERT_EQ(1, t.ok);
    ASSERT_EQ(5, t.failed);
    ASSERT_EQ(3, t.unreadable);
    ASSERT_EQ(1, t.by_reason[HV_REPORT_LINE_NOT_JSON]);
    ASSERT_EQ(1, t.by_reason[HV_REPORT_LINE_EMPTY]);
    ASSERT_EQ(1, t.by_reason[HV_REPORT_LINE_BAD_FIELD]);
    ASSERT_EQ(3, t.hosts); /* a.test, b.test:8443 and no host */
    ASSERT_EQ(0, t.other_host_records);
    ASSERT_EQ(4, t.groups);

    ASSERT_EQ(2, hv_report_error_type_count(r, "HttpStatus"));
    ASSERT_EQ(1, hv_report_error_type_count(r, "ConnectError"));
    ASSERT_EQ(1, hv_report_error_type_count(r, "InvalidUrl"));
    ASSERT_EQ(1, hv_report_error_type_count(r, ""));
    ASSERT_EQ(0, hv_report_error_type_count(r, "DnsError"));
    ASSERT_EQ(2, hv_report_group_count(r, "HttpStatus", "http_404"));
    ASSERT_EQ(1, hv_report_group_count(r, "", ""));
    ASSERT_EQ(0, hv_report_group_count(r, "HttpStatus", "http_40"));

    hv_report_host_t h;
    ASSERT_OK(hv_report_get_host(r, "a.test", &h));
    ASSERT_EQ(3, h.requests);
    ASSERT_EQ(1, h.ok);
    ASSERT_EQ(2, h.failed);
    ASSERT_EQ(3, h.timed);
    ASSERT_EQ(hv_report_fine_value(hv_report_fine_bucket(20)), h.median_ms);
    ASSERT_OK(hv_report_get_host(r, "b.test:8443", &h));
    ASSERT_EQ(1, h.failed);
    ASSERT_OK(hv_report_get_host(r, "", &h));
    ASSERT_EQ(2, h.requests);
    ASSERT_EQ(0, h.timed);
    ASSERT_EQ(UV_ENOENT, hv_report_get_host(r, "c.test", &h));

    char *html = html_of(r);
    ASSERT_NOT_NULL(strstr(html, "data-total=\"records\" data-n=\"6\""));
    ASSERT_NOT_NULL(strstr(html, "data-total=\"unreadable\" data-n=\"3\""));
    ASSERT_NOT_NULL(strstr(html, "<tr data-error-type=\"HttpStatus\" data-count=\"2\">"));
    ASSERT_NOT_NULL(strstr(html, "<tr data-http-status=\"404\" data-count=\"2\">"));
    ASSERT_NOT_NULL(strstr(html, "<tr data-host=\"a.test\" data-requests=\"3\" data-ok=\"1\" "
                                 "data-failed=\"2\">"));
    ASSERT_NOT_NULL(strstr(html, "data-error-type=\"HttpStatus\" data-error=\"http_404\" "
                                 "data-count=\"2\""));
    ASSERT_NOT_NULL(strstr(html, "<tr data-reason=\"not-json\" data-count=\"1\">"));
    ASSERT_NOT_NULL(strstr(html, "<span data-stage=\"download\" data-n=\"3\">"));
    ASSERT_NOT_NULL(strstr(html, "<g class=\"bucket\" data-lo=\"20\" data-ok=\"0\" "
                                 "data-failed=\"3\">")); /* 20, 30 and 40 ms */
    ASSERT_NULL(strstr(html, "other hosts"));
    free(html);
    hv_report_free(r);
}

/* A file of every kind of line: records, unreadable ones, a last line without newline. */
static const char mixed[] =
    "{\"requested_url\":\"http://a.test/1\",\"status\":\"ok\",\"http_status\":200,\"title\":"
    "\"A "
    "\\\"one\\\"\",\"bytes\":1500,\"elapsed_ms\":12,\"fetched_at\":\"2026-01-02T03:04:05.678Z\"}\n"
    "{\"requested_url\":\"http://b.test/\",\"status\":\"failed\",\"elapsed_ms\":3000,"
    "\"stage\":\"download\",\"error_type\":\"ReadTimeout\",\"error\":\"read_timeout\"}\n"
    "\xff\xfe not json \xe2\x82\n"
    "\r\n"
    "{\"requested_url\":\"http://c.test/x?q=1\",\"status\":\"ok\",\"bytes\":99999,"
    "\"elapsed_ms\":250,\"fetched_at\":\"2026-01-01T00:00:00.000Z\"}\n"
    "[{\"requested_url\":\"http://d.test/\"}]\n"
    "{\"requested_url\":\"http://a.test/9\",\"status\":\"failed\",\"http_status\":503,"
    "\"error_type\":\"HttpStatus\",\"error\":\"http_503\",\"elapsed_ms\":3000}\n"
    "{\"requested_url\":\"http://a.te";

TEST_IMPL(report_pieces_do_not_matter)
{
    hv_report_t *whole = hv_report_new(NULL);
    hv_report_feed(whole, mixed, sizeof(mixed) - 1);
    hv_report_finish(whole);
    char *want = html_of(whole);
    hv_report_totals_t t;
    hv_report_get_totals(whole, &t);
    ASSERT_EQ(8, t.lines);
    ASSERT_EQ(4, t.records);
    ASSERT_EQ(1, t.by_reason[HV_REPORT_LINE_CUT]);
    ASSERT_EQ(1, t.by_reason[HV_REPORT_LINE_NOT_OBJECT]);
    ASSERT_NOT_NULL(strstr(want, "fetched_at from 2026-01-01T00:00:00.000Z to "
                                 "2026-01-02T03:04:05.678Z"));
    ASSERT_NOT_NULL(strstr(want, ">2026-01-01 00:00:00</div><div class=\"s\">to 2026-01-02 "
                                 "03:04:05 UTC</div>"));
    hv_report_free(whole);

    /* Byte by byte, and split in two at every offset. */
    hv_report_t *r = hv_report_new(NULL);
    for (size_t i = 0; i < sizeof(mixed) - 1; i++)
        hv_report_feed(r, mixed + i, 1);
    hv_report_finish(r);
    char *got = html_of(r);
    ASSERT_STR_EQ(want, got);
    free(got);
    hv_report_free(r);
    for (size_t cut = 0; cut < sizeof(mixed); cut++) {
        r = hv_report_new(NULL);
        hv_report_feed(r, mixed, cut);
        hv_report_feed(r, mixed + cut, sizeof(mixed) - 1 - cut);
        hv_report_finish(r);
        got = html_of(r);
        if (strcmp(want, got) != 0)
            hv_test_fail(__FILE__, __LINE__, "the page differs when split at %zu", cut);
        free(got);
        hv_report_free(r);
    }
    free(want);
}

TEST_IMPL(report_long_lines_skipped)
{
    hv_report_opts_t o = {.line_max = 100};
    char longline[301];
    memset(longline, 'x', 300);
    longline[0] = '{';
    longline[300] = '\0';
    static const char rec[] = "{\"requested_url\":\"http://a.test/\",\"status\":\"ok\"}\n";

    for (size_t piece = 1; piece <= 400; piece = piece * 3 + 1) {
        hv_report_t *r = hv_report_new(&o);
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        /* A line of exactly the limit is read; longer ones are not, wherever they end. */
        fprintf(f, "%s%.100s\n%s%s\n%s%s", rec, longline, rec, longline, rec, longline);
        fclose(f);
        for (size_t i = 0; i < len; i += piece)
            hv_report_feed(r, text + i, HV_MIN(piece, len - i));
        hv_report_finish(r);
        free(text);
        hv_report_totals_t t;
        hv_report_get_totals(r, &t);
        ASSERT_EQ(6, t.lines);
        ASSERT_EQ(3, t.records);
        ASSERT_EQ(2, t.by_reason[HV_REPORT_LINE_TOO_LONG]);
        ASSERT_EQ(1, t.by_reason[HV_REPORT_LINE_NOT_JSON]); /* the line of exactly 100 */
        char *html = html_of(r);
        /* The lines are numbered as they stand in the file. */
        ASSERT_NOT_NULL(strstr(html, "<tr data-line=\"2\"><td class=\"n\">2</td><td>not JSON"));
        ASSERT_NOT_NULL(strstr(html, "<tr data-line=\"4\"><td class=\"n\">4</td><td>too long"));
        ASSERT_NOT_NULL(strstr(html, "<tr data-line=\"6\"><td class=\"n\">6</td><td>too long"));
        /* Its first bytes are shown, and that there were more. */
        ASSERT_NOT_NULL(strstr(html, "xxxx\xE2\x80\xA6</td></tr>"));
        free(html);
        hv_report_free(r);
    }
    /* Given whole, a line past the limit is not read either. */
    hv_report_t *r = hv_report_new(&o);
    ASSERT_EQ(HV_REPORT_LINE_TOO_LONG, hv_report_add_line(r, longline, 300));
    hv_report_free(r);
}

TEST_IMPL(report_last_line)
{
    static const char whole[] = "{\"requested_url\":\"u\",\"status\":\"ok\"}";
    hv_report_t *r = hv_report_new(NULL);
    hv_report_feed(r, whole, sizeof(whole) - 1);
    hv_report_finish(r);
    hv_report_totals_t t;
    hv_report_get_totals(r, &t);
    ASSERT_EQ(1, t.records);
    ASSERT_EQ(1, t.lines);
    hv_report_free(r);

    r = hv_report_new(NULL);
    hv_report_feed(r, whole, 10);
    hv_report_finish(r);
    hv_report_get_totals(r, &t);
    ASSERT_EQ(1, t.by_reason[HV_REPORT_LINE_CUT]);
    hv_report_free(r);

    /* The same bytes ended by a newline are no last line cut short: they are not JSON. */
    r = hv_report_new(NULL);
    hv_report_feed(r, whole, 10);
    hv_report_feed(r, "\n", 1);
    hv_report_finish(r);
    hv_report_get_totals(r, &t);
    ASSERT_EQ(1, t.by_reason[HV_REPORT_LINE_NOT_JSON]);
    ASSERT_EQ(0, t.by_reason[HV_REPORT_LINE_CUT]);
    hv_report_free(r);

    /* An empty file: no lines, and a page that says so. */
    r = hv_report_new(NULL);
    hv_report_finish(r);
    hv_report_get_totals(r, &t);
    ASSERT_EQ(0, t.lines);
    char *html = html_of(r);
    ASSERT_NOT_NULL(strstr(html, "Every line is a record."));
    free(html);
    hv_report_free(r);
}

TEST_IMPL(report_html_escape)
{
    ASSERT_ESCAPED("<script>alert('x&y')</script>\"",
                   "&lt;script&gt;alert(&#39;x&amp;y&#39;)&lt;/script&gt;&quot;");
    ASSERT_ESCAPED("caf\xC3\xA9 \xF0\x9F\x98\x80", "caf\xC3\xA9 \xF0\x9F\x98\x80");
    ASSERT_ESCAPED("a\tb", "a b");
    ASSERT_ESCAPED("a\0b\x01\x7F", "a" FFFD "b" FFFD FFFD);
    ASSERT_ESCAPED("\xFF", FFFD);
    ASSERT_ESCAPED("\xC0\xAF", FFFD FFFD);                 /* overlong '/' */
    ASSERT_ESCAPED("\xED\xA0\x80", FFFD FFFD FFFD);        /* a surrogate */
    ASSERT_ESCAPED("x\xE2\x82", "x" FFFD FFFD);            /* cut short */
    ASSERT_ESCAPED("\xE2\x80\xAEtxt.exe", FFFD "txt.exe"); /* right-to-left override */
    ASSERT_ESCAPED("\xE2\x81\xA6"
                   "a\xE2\x80\xA8",
                   FFFD "a" FFFD);    /* isolate, line separator */
    ASSERT_ESCAPED("\xC2\x85", FFFD); /* a C1 control */
    ASSERT_ESCAPED("", "");
}

TEST_IMPL(report_page_escapes_file_text)
{
    hv_report_t *r = hv_report_new(NULL);
    feed_lines(
        r, "{\"requested_url\":\"http://<script>x</script>.test/\\\"><img src=x>\","
           "\"status\":\"failed\",\"elapsed_ms\":5,\"bytes\":3,\"title\":\"<script>t</script>\","
           "\"stage\":\"<b>\",\"error_type\":\"<img src=x onerror=alert(1)>\","
           "\"error\":\"<script>alert(2)</script>\"}\n"
           "{\"requested_url\":\"http://a.test/\",\"status\":\"ok\",\"elapsed_ms\":5,"
           "\"title\":\"\\u003cscript\\u003ealert(3)\\u003c/script\\u003e\"}\n"
           "<script>alert(4)</script>\n");
    hv_report_finish(r);
    char *html = html_of(r);
    ASSERT_NULL(strcasestr(html, "<script"));
    ASSERT_NULL(strcasestr(html, "<img"));
    ASSERT_NULL(strcasestr(html, "<b>"));
    ASSERT_NOT_NULL(strstr(html, "&lt;script&gt;alert(2)&lt;/script&gt;"));
    ASSERT_NOT_NULL(strstr(html, "&lt;script&gt;alert(3)&lt;/script&gt;"));
    ASSERT_NOT_NULL(strstr(html, "&lt;script&gt;alert(4)&lt;/script&gt;"));
    ASSERT_NOT_NULL(strstr(html, "data-error-type=\"&lt;img src=x onerror=alert(1)&gt;\""));
    ASSERT_NOT_NULL(strstr(html, "http://&lt;script&gt;x&lt;/script&gt;.test/&quot;&gt;"));
    /* No element but the page's own: every '<' starts a tag of this list. */
    static const char *const tags[] = {
        "!DOCTYPE", "html", "head", "meta", "title",  "style", "body",    "header", "h1",
        "h2",       "div",  "nav",  "a ",   "a>",     "main",  "section", "span",   "table",
        "tr",       "th",   "td",   "svg",  "rect",   "line",  "text",    "g ",     "g>",
        "p ",       "p>",   "ul",   "li",   "footer", "code",  "!--"};
    for (const char *p = strchr(html, '<'); p != NULL; p = strchr(p + 1, '<')) {
        const char *q = p[1] == '/' ? p + 2 : p + 1;
        int known = 0;
        for (size_t i = 0; i < HV_ARRAY_SIZE(tags) && !known; i++)
            known = strncmp(q, tags[i], strlen(tags[i])) == 0;
        if (!known)
            hv_test_fail(__FILE__, __LINE__, "an unexpected tag: %.40s", p);
    }
    free(html);
    hv_report_free(r);
}

TEST_IMPL(report_host_of)
{
    static const struct {
        const char *url, *host;
    } cases[] = {
        {"http://a.test/x", "a.test"},
        {"HTTPS://User:Pw@Example.COM:8443/p?q#f", "example.com:8443"},
        {"http://[::1]:8080/", "[::1]:8080"},
        {"http://a.test?x=1", "a.test"},
        {"http://a.test#top", "a.test"},
        {"http://a.test", "a.test"},
        {"http://u@v@w.test/", "w.test"},
        {"git+ssh://h.test/r", "h.test"},
        {"http:///path", ""},
        {"http://user@/", ""},
        {"a.test/x", ""},
        {"1http://a.test/", ""},
        {"", ""},
        {"not a url", ""},
    };
    char out[HV_REPORT_HOST_LEN_MAX + 1];
    for (size_t i = 0; i < HV_ARRAY_SIZE(cases); i++) {
        size_t n = hv_report_host_of(cases[i].url, strlen(cases[i].url), out, sizeof(out));
        ASSERT_STR_EQ(cases[i].host, out);
        ASSERT_EQ(strlen(cases[i].host), n);
    }
    char url[HV_REPORT_HOST_LEN_MAX + 32];
    memset(url, 'h', sizeof(url));
    memcpy(url, "http://", 7);
    ASSERT_EQ(HV_REPORT_HOST_LEN_MAX,
              hv_report_host_of(url, 7 + HV_REPORT_HOST_LEN_MAX, out, sizeof(out)));
    ASSERT_EQ(0, hv_report_host_of(url, 8 + HV_REPORT_HOST_LEN_MAX, out, sizeof(out)));
    ASSERT_STR_EQ("", out);
    ASSERT_EQ(0, hv_report_host_of("http://abcdef/", 14, out, 4)); /* no room */
}

static void add_rec(hv_report_t *r, const char *host, int ok, const char *type, uint64_t elapsed)
{
    char line[512];
    int n =
        snprintf(line, sizeof(line),
                 "{\"requested_url\":\"http://%s/\",\"status\":\"%s\",\"elapsed_ms\":%llu%s%s%s}",
                 host, ok ? "ok" : "failed", (unsigned long long)elapsed,
                 type ? ",\"error_type\":\"" : "", type ? type : "", type ? "\"" : "");
    ASSERT_EQ(HV_REPORT_LINE_RECORD, hv_report_add_line(r, line, (size_t)n));
}

TEST_IMPL(report_host_bounds)
{
    hv_report_opts_t o = {.hosts_max = 3, .hosts = 2};
    hv_report_t *r = hv_report_new(&o);
    /* h1: 4 requests, h2: 3, h3: 2 (kept); h4, h5 come after the bound. */
    for (int i = 0; i < 4; i++)
        add_rec(r, "h1.test", i > 0, i == 0 ? "DnsError" : NULL, 100);
    for (int i = 0; i < 3; i++)
        add_rec(r, "h2.test", 1, NULL, 200);
    add_rec(r, "h3.test", 0, "HttpStatus", 1000);
    add_rec(r, "h3.test", 0, "HttpStatus", 1000);
    add_rec(r, "h4.test", 0, "ConnectError", 3000);
    add_rec(r, "h5.test", 1, NULL, 3000);
    add_rec(r, "h1.test", 1, NULL, 100); /* a host kept stays kept */
    hv_report_totals_t t;
    hv_report_get_totals(r, &t);
    ASSERT_EQ(3, t.hosts);
    ASSERT_EQ(2, t.other_host_records);
    hv_report_host_t h;
    ASSERT_OK(hv_report_get_host(r, "h1.test", &h));
    ASSERT_EQ(5, h.requests);
    ASSERT_EQ(UV_ENOENT, hv_report_get_host(r, "h4.test", &h));
    char *html = html_of(r);
    ASSERT_NOT_NULL(strstr(html, "<tr data-host=\"h1.test\" data-requests=\"5\""));
    ASSERT_NOT_NULL(strstr(html, "<tr data-host=\"h2.test\" data-requests=\"3\""));
    ASSERT_NULL(strstr(html, "data-host=\"h3.test\""));
    /* The other hosts: h3 (not shown) and h4, h5 (not told apart). */
    ASSERT_NOT_NULL(strstr(html, "<tr class=\"sum\" data-other-hosts=\"1\" data-requests=\"4\" "
                                 "data-ok=\"1\" data-failed=\"3\">"));
    ASSERT_NOT_NULL(strstr(html, "<td>other hosts (1 and more)</td>"));
    ASSERT_NOT_NULL(strstr(html, "HttpStatus 2, ConnectError 1"));
    ASSERT_NOT_NULL(strstr(html, "the 2 records of hosts after them"));
    /* Their median: of 1000, 1000, 3000, 3000 the lower one. */
    char want[64];
    snprintf(want, sizeof(want), "data-median-ms=\"%llu\"",
             (unsigned long long)hv_report_fine_value(hv_report_fine_bucket(1000)));
    ASSERT_NOT_NULL(strstr(strstr(html, "data-other-hosts"), want));
    free(html);
    hv_report_free(r);

    /* Every host kept is shown: the other hosts are those not told apart. */
    o = (hv_report_opts_t){.hosts_max = 1, .hosts = 5};
    r = hv_report_new(&o);
    add_rec(r, "h1.test", 1, NULL, 100);
    add_rec(r, "h2.test", 1, NULL, 100);
    html = html_of(r);
    ASSERT_NOT_NULL(strstr(html, "<td>other hosts (not told apart)</td>"));
    free(html);
    hv_report_free(r);
}

TEST_IMPL(report_group_and_type_bounds)
{
    hv_report_opts_t o = {.groups_max = 2};
    hv_report_t *r = hv_report_new(&o);
    char line[256];
    for (int i = 0; i < 5; i++) {
        int n = snprintf(line, sizeof(line),
                         "{\"requested_url\":\"http://a.test/%d\",\"status\":\"failed\","
                         "\"error_type\":\"T%d\",\"error\":\"e\"}",
                         i, i % 3);
        ASSERT_EQ(HV_REPORT_LINE_RECORD, hv_report_add_line(r, line, (size_t)n));
    }
    hv_report_totals_t t;
    hv_report_get_totals(r, &t);
    ASSERT_EQ(2, t.groups);
    ASSERT_EQ(1, t.other_group_failures); /* T2 */
    ASSERT_EQ(2, hv_report_group_count(r, "T0", "e"));
    ASSERT_EQ(0, hv_report_group_count(r, "T2", "e"));
    char *html = html_of(r);
    ASSERT_NOT_NULL(strstr(html, "<tr class=\"sum\" data-ungrouped=\"1\" data-count=\"1\">"));
    /* The samples: the first URLs of the group, in file order. */
    ASSERT_NOT_NULL(strstr(html, "<li>http://a.test/0</li><li>http://a.test/3</li></ul>"));
    free(html);
    hv_report_free(r);

    /* Error types past the first HV_REPORT_ERROR_TYPES_MAX are counted together. */
    r = hv_report_new(NULL);
    for (int i = 0; i < HV_REPORT_ERROR_TYPES_MAX + 3; i++) {
        int n =
            snprintf(line, sizeof(line),
                     "{\"requested_url\":\"u\",\"status\":\"failed\",\"error_type\":\"T%d\"}", i);
        ASSERT_EQ(HV_REPORT_LINE_RECORD, hv_report_add_line(r, line, (size_t)n));
    }
    ASSERT_EQ(1, hv_report_error_type_count(r, "T0"));
    ASSERT_EQ(0, hv_report_error_type_count(r, "T64"));
    html = html_of(r);
    ASSERT_NOT_NULL(
        strstr(html, "<tr class=\"sum\" data-error-type-other=\"1\" data-count=\"3\">"));
    free(html);
    hv_report_free(r);
}

/* The data-line values of the rows of section `id`, in page order, as "1,2,3". */
static void rows_of(const char *html, const char *id, char *out, size_t cap)
{
    char start[64];
    snprintf(start, sizeof(start), "<section id=\"%s\">", id);
    const char *p = strstr(html, start), *end = p ? strstr(p, "</section>") : NULL;
    ASSERT_NOT_NULL(end);
    size_t n = 0;
    out[0] = '\0';
    for (p = strstr(p, "<tr data-line=\""); p != NULL && p < end;
         p = strstr(p + 1, "<tr data-line=\"")) {
        n += (size_t)snprintf(out + n, cap - n, "%s%ld", n ? "," : "", strtol(p + 15, NULL, 10));
        ASSERT_LT(n, cap);
    }
}

TEST_IMPL(report_slowest_and_largest)
{
    hv_report_opts_t o = {.top = 3};
    hv_report_t *r = hv_report_new(&o);
    static const unsigned long long elapsed[] = {50, 10, 70, 70, 5, 90, 70, 20};
    static const unsigned long long bytes[] = {1, 2, 3, 4, 5, 6, 7, 8};
    char line[256];
    for (size_t i = 0; i < HV_ARRAY_SIZE(elapsed); i++) {
        int n = snprintf(line, sizeof(line),
                         "{\"requested_url\":\"http://a.test/%zu\",\"status\":\"ok\","
                         "\"elapsed_ms\":%llu,\"bytes\":%llu}",
                         i + 1, elapsed[i], bytes[i]);
        ASSERT_EQ(HV_REPORT_LINE_RECORD, hv_report_add_line(r, line, (size_t)n));
    }
    char *html = html_of(r);
    char rows[128];
    /* 90 (line 6), then of the three 70s the first two. */
    rows_of(html, "slowest", rows, sizeof(rows));
    ASSERT_STR_EQ("6,3,4", rows);
    rows_of(html, "largest", rows, sizeof(rows));
    ASSERT_STR_EQ("8,7,6", rows);
    free(html);
    hv_report_free(r);
}

TEST_IMPL(report_fine_buckets)
{
    unsigned prev = 0;
    for (uint64_t v = 0; v < 200000; v += 1 + v / 64) {
        unsigned b = hv_report_fine_bucket(v);
        ASSERT_LT(b, HV_REPORT_FINE_BUCKETS);
        ASSERT_GE(b, prev); /* buckets follow the values */
        prev = b;
        uint64_t m = hv_report_fine_value(b);
        ASSERT_EQ(b, hv_report_fine_bucket(m)); /* a bucket's value is in it */
        uint64_t diff = m > v ? m - v : v - m;
        ASSERT_LE(diff * 8, v); /* within an eighth */
    }
    for (unsigned b = 0; b < HV_REPORT_FINE_BUCKETS; b++)
        ASSERT_EQ(b, hv_report_fine_bucket(hv_report_fine_value(b)));
    ASSERT_EQ(HV_REPORT_FINE_BUCKETS - 1, hv_report_fine_bucket(UINT64_MAX));
    ASSERT_EQ(HV_REPORT_FINE_BUCKETS - 1, hv_report_fine_bucket((uint64_t)1 << 40));
    ASSERT_EQ(HV_REPORT_FINE_BUCKETS - 1, hv_report_fine_bucket(((uint64_t)1 << 40) - 1));
    ASSERT_EQ(HV_REPORT_FINE_BUCKETS - 4, hv_report_fine_bucket((uint64_t)1 << 39));
}
