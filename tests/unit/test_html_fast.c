/* The title fast path must say exactly what the full parse says: every case here runs both
 * and compares, and checks which path settled it where that matters. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harvestd/common.h"
#include "harvestd/html.h"
#include "test.h"

/* Returns whether the fast path accepted; asserts it agrees with the full parse if so: of
 * the page, or of the prefix it parsed when the page is refused for what follows. */
static int same_title(const char *doc, size_t len)
{
    hv_html_result_t fast, full;
    int accepted = hv_html_title_fast(doc, len, &fast);
    int rc = hv_html_analyse(doc, len, &full);
    if (accepted && rc != 0) {
        ASSERT(fast.parsed > 0 && fast.parsed < len);
        hv_html_result_free(&full);
        rc = hv_html_analyse(doc, fast.parsed, &full);
    }
    if (accepted && (rc != 0 || (full.title == NULL) != (fast.title == NULL) ||
                     (full.title != NULL && strcmp(full.title, fast.title) != 0)))
        printf("# fast/full differ on: %.*s\n", (int)len, doc);
    if (accepted) {
        ASSERT_OK(rc);
        if (full.title == NULL || fast.title == NULL)
            ASSERT(full.title == NULL && fast.title == NULL);
        else
            ASSERT_STR_EQ(full.title, fast.title);
        hv_html_result_free(&fast);
    }
    hv_html_result_free(&full);
    return accepted;
}

#define SAME(s) same_title((s), sizeof(s) - 1)

TEST_IMPL(title_fast_plain_page_is_accepted)
{
    ASSERT_EQ(1, SAME("<!doctype html><html><head><title> A  \n plain\tpage </title></head>"
                      "<body><p>text</p></body></html>"));
    ASSERT_EQ(1, SAME("<TITLE>Upper case</TITLE ><body>"));
    ASSERT_EQ(1, SAME("<title>Entities &amp; &lt;b&gt; &eacute;</title>"));
    SAME("\xEF\xBB\xBF<title>After a BOM</title>"); /* gumbo keeps the BOM as text */
    ASSERT_EQ(1, SAME("<title>bad \xff\xfe utf-8</title><p>\xc3"));
}

TEST_IMPL(title_fast_keeps_control_characters)
{
    static const char doc[] = "<title>a\x1b[1m&#x10FF1B;\xF4\x8F\xBC\x80</title><p>\x1b</p>";
    ASSERT_EQ(1, SAME(doc));
    hv_html_result_t r;
    ASSERT_EQ(1, hv_html_title_fast(doc, sizeof(doc) - 1, &r));
    ASSERT_STR_EQ("a\x1b[1m\xF4\x8F\xBC\x9B\xF4\x8F\xBC\x80", r.title);
    hv_html_result_free(&r);
}

TEST_IMPL(title_fast_traps_fall_back_or_agree)
{
    /* Each of these must either fall back to the full parse or agree with it. */
    SAME("<!-- <title>in a comment</title> --><title>Real</title>");
    SAME("<script>var t = '<title>x</title>';</script><title>Real</title>");
    SAME("<textarea><title>in a textarea</title></textarea><title>Real</title>");
    SAME("<svg><title>svg title</title></svg><title>Real</title>");
    SAME("<body><svg><title>only svg</title></svg></body>");
    SAME("<title>unclosed");
    SAME("<p>no title at all</p>");
    SAME("<body><p>late</p><title>after the body</title></body>");
    SAME("<title></title><p>empty</p>");
    SAME("<title>   </title>");
    SAME("<table><title>in a table</title><tr><td>x</td></tr></table>");
    SAME("<template><title>in a template</title></template><title>Outside</title>");
    SAME("<title>first</title><title>second</title>");
    SAME("<noscript><title>noscript</title></noscript>");
    SAME("<style></title></style><title>after style</title>");
    SAME("<math><title>math</title></math><title>html</title>");
    SAME("<xmp></title></xmp><title>after xmp</title>");
    SAME("<title>a</title\n>");
    SAME("</title><title>stray end tag first</title>");
    SAME("<title>a<!-- c --></title>");
    SAME("<iframe><title>in iframe</title></iframe><title>after</title>");
    SAME("<plaintext></title><title>never</title>");
}

TEST_IMPL(title_fast_comment_trap_is_not_taken_from_the_comment)
{
    hv_html_result_t r;
    const char *doc = "<!-- </title> --><title>Real</title>";
    if (hv_html_title_fast(doc, strlen(doc), &r)) {
        ASSERT_STR_EQ("Real", r.title);
        hv_html_result_free(&r);
    }
}

/* gumbo reads only the prefix, so only the prefix is judged: a page whose body nests too
 * deep has its title settled from the head, while the full parse still refuses it. */
TEST_IMPL(title_fast_judges_only_what_gumbo_reads)
{
    size_t depth = HV_HTML_MAX_DEPTH + 10;
    size_t len = 64 + depth * 5;
    char *doc = malloc(len);
    size_t n = (size_t)snprintf(doc, len, "<title>deep</title>");
    size_t head = n;
    for (size_t i = 0; i < depth; i++) {
        memcpy(doc + n, "<div>", 5);
        n += 5;
    }
    hv_html_result_t r;
    ASSERT_EQ(1, hv_html_title_fast(doc, n, &r));
    ASSERT_STR_EQ("deep", r.title);
    ASSERT_EQ(head, r.parsed);
    hv_html_result_free(&r);
    ASSERT_EQ(HV_ENESTING, hv_html_analyse(doc, n, &r));
    ASSERT_EQ(n, r.parsed);
    hv_html_result_free(&r);
    free(doc);
}

/* The nesting before the cut is what gumbo would parse: the fast path refuses to settle it,
 * leaving the page to the full parse, which refuses it. */
TEST_IMPL(title_fast_refuses_a_prefix_the_full_parse_refuses)
{
    size_t depth = HV_HTML_MAX_DEPTH + 10;
    size_t len = 64 + depth * 5;
    char *doc = malloc(len);
    size_t n = 0;
    for (size_t i = 0; i < depth; i++) {
        memcpy(doc + n, "<div>", 5);
        n += 5;
    }
    n += (size_t)snprintf(doc + n, len - n, "<title>deep</title>");
    hv_html_result_t r;
    ASSERT_EQ(0, hv_html_title_fast(doc, n, &r));
    ASSERT_NULL(r.title);
    ASSERT_EQ(HV_ENESTING, hv_html_analyse(doc, n, &r));
    hv_html_result_free(&r);

    /* The same in the head: an attribute count the pre-scan refuses, before </title>. */
    char big[HV_PRESCAN_MAX_ATTRS * 8 + 64];
    size_t m = (size_t)snprintf(big, sizeof(big), "<head><meta");
    for (int i = 0; i <= HV_PRESCAN_MAX_ATTRS; i++)
        m += (size_t)snprintf(big + m, sizeof(big) - m, " a%d", i);
    m += (size_t)snprintf(big + m, sizeof(big) - m, "><title>x</title>");
    ASSERT_EQ(0, hv_html_title_fast(big, m, &r));
    ASSERT_NE(0, hv_html_analyse(big, m, &r));
    hv_html_result_free(&r);
    free(doc);
}

/* Deterministic pseudo-random pages built from fragments that stress the prefix cut. */
TEST_IMPL(title_fast_agrees_on_generated_pages)
{
    static const char *const parts[] = {
        "<title>T</title>", "<title>Two words</title>", "</title>", "<!--", "-->",
        "<script>", "</script>", "<svg>", "</svg>", "<p>", "<div>", "</div>", "<table>",
        "<td>", "<textarea>", "</textarea>", "<b>", "</b>", "text ", "&amp;", "<head>",
        "<body>", "<template>", "</template>", "<style>", "</style>", "<math>", "\xe2\x82\xac",
        "<title>", "<noscript>", "</noscript>", "<select>", "<option>", "<frameset>", "<a>",
    };
    unsigned seed = 12345;
    int accepted = 0;
    char doc[4096];
    for (int round = 0; round < 3000; round++) {
        size_t n = 0;
        int parts_n = 1 + (int)(seed % 12);
        for (int i = 0; i < parts_n; i++) {
            seed = seed * 1103515245u + 12345u;
            const char *p = parts[(seed >> 8) % HV_ARRAY_SIZE(parts)];
            size_t l = strlen(p);
            if (n + l >= sizeof(doc))
                break;
            memcpy(doc + n, p, l);
            n += l;
        }
        accepted += same_title(doc, n);
    }
    ASSERT_GT(accepted, 100); /* the fast path does get used */
}
