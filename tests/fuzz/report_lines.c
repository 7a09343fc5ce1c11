/*
 * report_lines: the report of an output (report.h): its lines scanned and counted, and the
 * page written.
 *
 * Input: one byte choosing the size of the pieces the file is fed in, one choosing the
 * bounds, then the file. The file is counted twice, fed whole and fed in pieces, under small
 * bounds (hosts, groups, rows, line length) so that every "counted together" path is reached.
 * What report.h promises:
 *   - the page depends only on the lines: the two pages are the same bytes;
 *   - every line is counted once: lines = records + unreadable = the file's lines, and
 *     records = ok + failed;
 *   - the page is valid UTF-8, and every '<' in it opens (or closes) one of the page's own
 *     elements: nothing from the file becomes markup.
 */
#include <string.h>
#include <strings.h>

#include "fuzz.h"
#include "harvestd/common.h"
#include "harvestd/report.h"
#include "harvestd/utf8.h"

static const char *const tags[] = {
    "!DOCTYPE", "html", "head", "meta", "title",  "style", "body",    "header", "h1",
    "h2",       "div",  "nav",  "a ",   "a>",     "main",  "section", "span",   "table",
    "tr",       "th",   "td",   "svg",  "rect",   "line",  "text",    "g ",     "g>",
    "p ",       "p>",   "ul",   "li",   "footer", "code",  "!--"};

static char *page_of(const hv_report_t *r, size_t *len)
{
    static const hv_report_page_t page = {.source = "fuzz.jsonl", .generated_at = "now"};
    char *text = NULL;
    FILE *f = open_memstream(&text, len);
    FUZZ_CHECK(f != NULL, "open_memstream");
    FUZZ_CHECK(hv_report_write_html(r, &page, f) == 0, "write failed");
    FUZZ_CHECK(fclose(f) == 0, "fclose");
    return text;
}

static void check_markup(const char *html, size_t len)
{
    FUZZ_CHECK(hv_utf8_valid(html, len), "the page is not UTF-8");
    FUZZ_CHECK(strlen(html) == len, "a NUL in the page");
    for (const char *p = strchr(html, '<'); p != NULL; p = strchr(p + 1, '<')) {
        const char *q = p[1] == '/' ? p + 2 : p + 1;
        int known = 0;
        for (size_t i = 0; i < HV_ARRAY_SIZE(tags) && !known; i++)
            known = strncmp(q, tags[i], strlen(tags[i])) == 0;
        FUZZ_CHECK(known, "markup from the file: %.60s", p);
    }
    FUZZ_CHECK(strcasestr(html, "<script") == NULL, "a script element");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input_t in = {data, size};
    size_t piece = 1 + fuzz_byte(&in) % 64;
    uint8_t bounds = fuzz_byte(&in);
    hv_report_opts_t o = {
        .top = 1 + (bounds & 3),
        .hosts = 1 + ((bounds >> 2) & 3),
        .hosts_max = 1 + ((bounds >> 4) & 3),
        .groups_max = 1 + ((bounds >> 6) & 3),
        .line_max = 64 + 64 * (size_t)(bounds & 7),
    };
    char *file = fuzz_strndup(in.p, in.left);
    size_t n = in.left;

    hv_report_t *whole = hv_report_new(&o), *split = hv_report_new(&o);
    hv_report_feed(whole, file, n);
    hv_report_finish(whole);
    for (size_t i = 0; i < n; i += piece)
        hv_report_feed(split, file + i, HV_MIN(piece, n - i));
    hv_report_finish(split);

    size_t lines = 0;
    for (size_t i = 0; i < n; i++)
        lines += file[i] == '\n';
    if (n > 0 && file[n - 1] != '\n')
        lines++;
    hv_report_totals_t t;
    hv_report_get_totals(whole, &t);
    FUZZ_CHECK(t.lines == lines, "%llu lines counted of %zu", (unsigned long long)t.lines, lines);
    FUZZ_CHECK(t.records + t.unreadable == t.lines, "records + unreadable != lines");
    FUZZ_CHECK(t.ok + t.failed == t.records, "ok + failed != records");
    FUZZ_CHECK(t.hosts <= o.hosts_max && t.groups <= o.groups_max, "past the bounds");

    size_t alen, blen;
    char *a = page_of(whole, &alen), *b = page_of(split, &blen);
    FUZZ_CHECK(alen == blen && memcmp(a, b, alen) == 0,
               "the page differs when the file comes in pieces of %zu", piece);
    check_markup(a, alen);

    free(a);
    free(b);
    hv_report_free(whole);
    hv_report_free(split);
    free(file);
    return 0;
}
