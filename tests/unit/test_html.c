/*
 * The tree walk and the flattening after parsing are static in html.c: include it (its
 * public functions renamed, so that they do not clash with the library's). Every test here
 * then runs that copy, compiled from the same source.
 */
#define hv_html_analyse hv_html_test_analyse
#define hv_html_result_free hv_html_test_result_free
#define hv_html_analyse_rules hv_html_test_analyse_rules
#define hv_html_use_arena hv_html_test_use_arena
#define hv_html__gumbo_options hv_html_test__gumbo_options
#define hv_html__gumbo_destroy hv_html_test__gumbo_destroy
#define hv_html__too_deep hv_html_test__too_deep
#include "../../src/html/html.c"

#include "harvestd/buf.h"
#include "test.h"

#include <stdint.h>
#include <stdlib.h>

/* Analyse `doc` and return its title (caller frees), asserting success. */
static char *title_of(const char *doc)
{
    hv_html_result_t r;
    int rc = hv_html_analyse(doc, strlen(doc), &r);
    if (rc != 0)
        hv_test_fail(__FILE__, __LINE__, "analyse failed: %s", hv_err_name(rc));
    return r.title;
}

#define ASSERT_TITLE(doc, want)                                                                    \
    do {                                                                                           \
        char *t_ = title_of(doc);                                                                  \
        ASSERT_STR_EQ(want, t_);                                                                   \
        free(t_);                                                                                  \
    } while (0)

#define ASSERT_NO_TITLE(doc)                                                                       \
    do {                                                                                           \
        char *t_ = title_of(doc);                                                                  \
        ASSERT_NULL(t_);                                                                           \
    } while (0)

static size_t scan(const char *doc)
{
    return hv_prescan_depth(doc, strlen(doc), HV_HTML_MAX_DEPTH);
}

/* `unit` repeated `n` times, after `head`; malloc'd, NUL-terminated. */
static char *repeat(const char *head, const char *unit, size_t n, size_t *len)
{
    size_t h = strlen(head), u = strlen(unit);
    char *s = malloc(h + u * n + 1);
    ASSERT_NOT_NULL(s);
    memcpy(s, head, h);
    for (size_t i = 0; i < n; i++)
        memcpy(s + h + i * u, unit, u);
    s[h + u * n] = '\0';
    *len = h + u * n;
    return s;
}

TEST_IMPL(html_title_basic)
{
    ASSERT_TITLE("<!doctype html><html><head><title>Hello</title></head><body>x</body></html>",
                 "Hello");
    ASSERT_TITLE("<title>no html or head tags</title>", "no html or head tags");
    ASSERT_TITLE("<TITLE>Upper</TITLE>", "Upper");
}

TEST_IMPL(html_title_whitespace_collapsed_and_trimmed)
{
    ASSERT_TITLE("<title>\n   Hello \t\r\n  World \f </title>", "Hello World");
    ASSERT_TITLE("<title>a\n\nb</title>", "a b");
    /* Only ASCII whitespace collapses: U+00A0 (from &nbsp;) stays. */
    ASSERT_TITLE("<title> a&nbsp;b </title>", "a\xC2\xA0"
                                              "b");
}

TEST_IMPL(html_title_entities_decoded)
{
    ASSERT_TITLE("<title>Fish &amp; Chips &lt;3 &eacute;t&#233; &#x41;</title>",
                 "Fish & Chips <3 \xC3\xA9t\xC3\xA9 A");
    /* RCDATA: tags inside the title are text. */
    ASSERT_TITLE("<title>a <b>bold</b> claim</title>", "a <b>bold</b> claim");
}

TEST_IMPL(html_title_first_html_title_wins)
{
    ASSERT_TITLE("<title>first</title><title>second</title>", "first");
    /* An SVG <title> is not the document's title, even when it comes first. */
    ASSERT_TITLE("<body><svg><title>icon</title></svg><title>real</title></body>", "real");
    ASSERT_NO_TITLE("<body><svg><title>icon only</title></svg></body>");
    ASSERT_NO_TITLE("<math><mi><svg><title>deep icon</title></svg></mi></math>");
    /* Template contents are not part of the document. */
    ASSERT_TITLE("<template><title>inert</title></template><title>live</title>", "live");
}

TEST_IMPL(html_title_in_comment_or_script_ignored)
{
    ASSERT_TITLE("<!-- <title>commented</title> --><title>real</title>", "real");
    ASSERT_TITLE("<script>var t = '<title>in script</title>';</script><title>real</title>", "real");
    ASSERT_TITLE("<style>/* <title>in style</title> */</style><title>real</title>", "real");
    ASSERT_NO_TITLE("<textarea><title>in textarea</title></textarea>");
}

TEST_IMPL(html_title_missing_or_empty)
{
    ASSERT_NO_TITLE("");
    ASSERT_NO_TITLE("<html><head></head><body><h1>no title</h1></body></html>");
    ASSERT_NO_TITLE("<title></title>");
    ASSERT_NO_TITLE("<title> \t\n </title>");
    ASSERT_NO_TITLE("plain text, not even a tag");
    hv_html_result_t r;
    ASSERT_OK(hv_html_analyse(NULL, 0, &r));
    ASSERT_NULL(r.title);
    ASSERT_EQ(0, r.depth);
}

TEST_IMPL(html_title_invalid_utf8_replaced)
{
    ASSERT_TITLE("<title>caf\xC3 ok \xFF\xFE end</title>",
                 "caf\xEF\xBF\xBD ok \xEF\xBF\xBD\xEF\xBF\xBD end");
    ASSERT_TITLE("<title>\xE2\x82"
                 "A</title>",
                 "\xEF\xBF\xBD"
                 "A");
    /* Valid UTF-8 goes through untouched. */
    ASSERT_TITLE("<title>\xE6\x97\xA5\xE6\x9C\xAC</title>", "\xE6\x97\xA5\xE6\x9C\xAC");
}

TEST_IMPL(html_title_nul_bytes)
{
    /* The parser turns NUL into U+FFFD in RCDATA; the title stays a C string. */
    static const char doc[] = "<title>a\0b</title>";
    hv_html_result_t r;
    ASSERT_OK(hv_html_analyse(doc, sizeof(doc) - 1, &r));
    ASSERT_STR_EQ("a\xEF\xBF\xBD"
                  "b",
                  r.title);
    hv_html_result_free(&r);
    ASSERT_NULL(r.title);
    hv_html_result_free(&r); /* twice is fine */
}

/* The text gumbo alone puts in the title of `doc`, with no harvestd pass before or after
 * (nor whitespace collapsed); malloc'd. */
static char *gumbo_title(const char *doc)
{
    GumboOutput *g = gumbo_parse(doc);
    GumboNode *t = hv_html_find_title(g->document);
    ASSERT_NOT_NULL(t);
    ASSERT_EQ(1, t->v.element.children.length);
    const GumboNode *k = t->v.element.children.data[0];
    char *text = hv_xstrdup(k->v.text.text);
    gumbo_destroy_output(&kGumboDefaultOptions, g);
    return text;
}

TEST_IMPL(html_title_keeps_control_characters)
{
    /* The HTML Standard keeps C0 control characters in text (html5lib and browsers do; vim's
     * help pages are full of ESC); gumbo 0.10 alone would make them U+FFFD. */
    ASSERT_TITLE("<title>a\x1b[1mb</title>", "a\x1b[1mb");
    ASSERT_TITLE("<title>\x01\x02\x03\x04\x05\x06\x07\x08-\x0b-\x0e\x0f\x10\x11\x12\x13\x14\x15"
                 "\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f</title>",
                 "\x01\x02\x03\x04\x05\x06\x07\x08-\x0b-\x0e\x0f\x10\x11\x12\x13\x14\x15"
                 "\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f");
    /* TAB, LF, FF and CR are whitespace and collapse; VT is not whitespace in HTML. */
    ASSERT_TITLE("<title>\x0b a\t\n\x0c\r b \x0b</title>", "\x0b a b \x0b");
    /* In a page decoded from another charset too. */
    ASSERT_TITLE("<title>caf\xC3\xA9 \x1b</title>", "caf\xC3\xA9 \x1b");
    /* A character reference to a control character was kept already. */
    ASSERT_TITLE("<title>&#27;&#x1B;\x1b</title>", "\x1b\x1b\x1b");
}

TEST_IMPL(html_title_placeholders_never_collide)
{
    /* Pages without control characters: exactly what gumbo alone makes of them, whatever
     * they hold of the private-use characters the control characters are carried as (single
     * spaces only, so that collapsing whitespace changes nothing). */
    static const char *const pages[] = {
        "<title>\xF4\x8F\xBC\x80\xF4\x8F\xBC\x81\xF4\x8F\xBC\x9B\xF4\x8F\xBC\x9F\xF4\x8F\xBC\xA0"
        "\xF4\x8F\xBF\xBD</title>",
        "<title>&#x10FF00;&#x10ff1b;&#X10FF1F;&#1113883;&#1113856;&#x0010FF1B;&#x10FF1B.</title>",
        "<title>&#x1000000010FF1B; &#4296081179; &#x110000; &#99999999999999999999;</title>",
        "<title>&#; &#x; &#xZ; & # &amp;#x10FF1B;</title>",
        "<title>\xF4\x8F\xBC\x80&#x10FF1B;\xF4\x8F\xBC\x80\xF4\x8F\xBC\x80</title>",
    };
    for (size_t i = 0; i < HV_ARRAY_SIZE(pages); i++) {
        char *want = gumbo_title(pages[i]);
        ASSERT_NOT_NULL(want);
        ASSERT_TITLE(pages[i], want);
        free(want);
    }
    /* With control characters beside them, they still come out as they went in. */
    ASSERT_TITLE("<title>\x1b\xF4\x8F\xBC\x80\xF4\x8F\xBC\x9B&#x10FF1B;&#x10FF00;\x1b</title>",
                 "\x1b\xF4\x8F\xBC\x80\xF4\x8F\xBC\x9B\xF4\x8F\xBC\x9B\xF4\x8F\xBC\x80\x1b");
    /* A number gumbo wraps around to a space is whitespace like any other. */
    ASSERT_TITLE("<title>&#x100000020;\x1b&#4294967328;&#x100000020;\x1b&#x100000020;</title>",
                 "\x1b \x1b");
    /* NUL is not a control character the standard keeps: U+FFFD, beside one it keeps. */
    static const char nul[] = "<title>\x1b\0</title>";
    hv_html_result_t r;
    ASSERT_OK(hv_html_analyse(nul, sizeof(nul) - 1, &r));
    ASSERT_STR_EQ("\x1b\xEF\xBF\xBD", r.title);
    hv_html_result_free(&r);
}

TEST_IMPL(html_prescan_counts)
{
    ASSERT_EQ(0, scan(""));
    ASSERT_EQ(0, scan("just text"));
    ASSERT_EQ(3, scan("<div><div><div></div></div></div>"));
    ASSERT_EQ(3, scan("<div><span><a href=x>x</a></span></div>"));
    ASSERT_EQ(1, scan("</div></div><div>"));       /* stray end tags do not go negative */
    ASSERT_EQ(3, scan("<div/><div/><div/>"));      /* "/>" means nothing on HTML tags */
    ASSERT_EQ(1, scan("<svg><g/><g/><g/></svg>")); /* ... but closes foreign ones */
    ASSERT_EQ(2, scan("<svg><g><g/></g></svg>"));
    ASSERT_EQ(0, scan("<br><img src=x><hr><input><meta charset=utf-8>"));
    ASSERT_EQ(1, scan("<p>a<p>b<p>c")); /* implied end tags */
    ASSERT_EQ(2, scan("<ul><li>a<li>b<li>c</ul>"));
    ASSERT_EQ(4, scan("<ul><li><ul><li>nested</ul></ul>"));
    ASSERT_EQ(2, scan("<dl><dt>a<dd>b<dt>c<dd>d</dl>"));
    ASSERT_EQ(2, scan("<select><option>a<option>b<option>c</select>"));
    ASSERT_EQ(4, scan("<table><tr><td>a<td>b<tr><td>c</table>")); /* + implied tbody */
    ASSERT_EQ(2, scan("<p><b>x</p>y"));                           /* b is reopened around y */
    ASSERT_EQ(3, scan("<x-a><x-b><x-c>"));
}

TEST_IMPL(html_prescan_skips_comments_and_quotes)
{
    ASSERT_EQ(1, scan("<!-- <div><div><div> --><div>"));
    ASSERT_EQ(1, scan("<!--><div>")); /* "<!-->" is an empty comment */
    ASSERT_EQ(1, scan("<!-- a --!><div>"));
    ASSERT_EQ(1, scan("<div><!-- <div><div> never closed"));
    ASSERT_EQ(1, scan("<!DOCTYPE html><div>"));
    ASSERT_EQ(1, scan("<?xml version='1.0'?><div>"));
    ASSERT_EQ(2, scan("<div title='>'><div>")); /* '>' inside quotes */
    ASSERT_EQ(2, scan("<div title=\"a>b\" class='c>d'><div>"));
    ASSERT_EQ(0, scan("<div title='<div><div><div>")); /* unterminated quote: no tag */
    ASSERT_EQ(2, scan("<div \"odd><div>"));            /* a quote in a name opens nothing */
    ASSERT_EQ(2, scan("<a href=/x/><div>"));           /* '/' belongs to the value */
    ASSERT_EQ(0, scan("< div><3 <<<"));                /* '<' not starting a tag is text */
}

TEST_IMPL(html_prescan_raw_text_elements)
{
    size_t len;
    char *doc = repeat("<script>", "<div>", 10000, &len);
    ASSERT_EQ(0, hv_prescan_depth(doc, len, HV_HTML_MAX_DEPTH));
    free(doc);

    ASSERT_EQ(1, scan("<script>document.write('<div><div>')</script><div>"));
    ASSERT_EQ(1, scan("<SCRIPT>x</script ><div>"));
    ASSERT_EQ(1, scan("<style><div><div></style><div>"));
    ASSERT_EQ(1, scan("<textarea><div><div></textarea><div>"));
    ASSERT_EQ(1, scan("<title><div><div></title><div>"));
    ASSERT_EQ(0, scan("<script><div><div>")); /* never closed: the rest is script */
    ASSERT_EQ(1, scan("<script></scriptx><div></script><div>"));
    /* In SVG, <style> and <title> are ordinary elements; a breakout tag leaves SVG. */
    ASSERT_EQ(3, scan("<svg><style><g>"));
    ASSERT_EQ(2, scan("<svg><style><div><div>"));
}

/* The attributes of the tag in `doc` whose name ends at `from`, as "name=value;" pairs (a
 * value-less name has no '='), then "end" and the self-closing mark "/", or "eof". */
static void read_attrs(const char *doc, size_t from, char *out, size_t cap)
{
    size_t len = strlen(doc), pos = from, o = 0;
    hv_prescan_attr_t a;
    int r;
    out[0] = '\0';
    for (;;) {
        size_t before = pos;
        r = hv_prescan_read_attr(doc, len, &pos, &a);
        if (r < 0) {
            ASSERT_EQ(before, pos);
            snprintf(out + o, cap - o, "eof");
            return;
        }
        if (r == 0) {
            ASSERT_EQ('>', doc[pos]);
            snprintf(out + o, cap - o, "end%s", pos > before && doc[pos - 1] == '/' ? "/" : "");
            return;
        }
        ASSERT_GT(a.name_len, 0);
        o += (size_t)snprintf(out + o, cap - o, "%.*s", (int)a.name_len, doc + a.name);
        if (a.value_len > 0)
            o += (size_t)snprintf(out + o, cap - o, "=%.*s", (int)a.value_len, doc + a.value);
        o += (size_t)snprintf(out + o, cap - o, ";");
        ASSERT_LT(o, cap);
    }
}

#define ASSERT_ATTRS(doc, from, want)                                                              \
    do {                                                                                           \
        char got_[256];                                                                            \
        read_attrs(doc, from, got_, sizeof(got_));                                                 \
        ASSERT_STR_EQ(want, got_);                                                                 \
    } while (0)

TEST_IMPL(html_prescan_read_attr)
{
    ASSERT_ATTRS("<a>", 2, "end");
    ASSERT_ATTRS("<a HREF=x Title = 'y z'>", 2, "HREF=x;Title=y z;end");
    ASSERT_ATTRS("<div title=\"a>b\" class='c>d'>", 4, "title=a>b;class=c>d;end");
    ASSERT_ATTRS("<a href=/x/>", 2, "href=/x/;end"); /* '/' belongs to the value */
    ASSERT_ATTRS("<br/>", 3, "end/");                /* self-closing */
    ASSERT_ATTRS("<br / >", 3, "end");               /* "/ >" is not */
    ASSERT_ATTRS("<a x/>", 2, "x;end/");
    ASSERT_ATTRS("<a x=\"y\"/>", 2, "x=y;end/");
    ASSERT_ATTRS("<a x= />", 2, "x=/;end");
    ASSERT_ATTRS("<a x=>", 2, "x;end");                /* an empty value */
    ASSERT_ATTRS("<a ==x>", 2, "==x;end");             /* the name is "=" */
    ASSERT_ATTRS("<div \"odd>", 4, "\"odd;end");       /* a quote in a name opens nothing */
    ASSERT_ATTRS("<a b c=d b=e>", 2, "b;c=d;b=e;end"); /* duplicates are all returned */
    ASSERT_ATTRS("<a x\t\n=\f'v'\ry>", 2, "x=v;y;end");
    ASSERT_ATTRS("<a x='never closed>", 2, "eof");
    ASSERT_ATTRS("<a x=y", 2, "eof");
    ASSERT_ATTRS("<a x", 2, "eof");
    ASSERT_ATTRS("<a x=", 2, "eof");
    ASSERT_ATTRS("<a x /", 2, "x;eof");
}

TEST_IMPL(html_prescan_limit)
{
    ASSERT_EQ(3, hv_prescan_depth("<i><i><i>", 9, 3));
    ASSERT_EQ(3, hv_prescan_depth("<i><i><i>", 9, 2)); /* limit + 1 */
    ASSERT_EQ(1, hv_prescan_depth("<i><i><i>", 9, 0));
}

TEST_IMPL(html_deep_nesting_refused)
{
    size_t len;
    char *doc = repeat("<title>deep</title>", "<div>", 5000, &len);
    hv_html_result_t r;
    ASSERT_EQ(HV_ENESTING, hv_html_analyse(doc, len, &r));
    ASSERT_EQ(HV_HTML_MAX_DEPTH + 1, r.depth);
    ASSERT_NULL(r.title);
    hv_html_result_free(&r);
    free(doc);

    /* Just under the limit is parsed. */
    doc = repeat("<title>ok</title>", "<div>", HV_HTML_MAX_DEPTH - 1, &len);
    ASSERT_OK(hv_html_analyse(doc, len, &r));
    ASSERT_EQ(HV_HTML_MAX_DEPTH - 1, r.depth);
    ASSERT_STR_EQ("ok", r.title);
    hv_html_result_free(&r);
    free(doc);
}

TEST_IMPL(html_very_deep_nesting_refused_quickly)
{
    size_t len;
    char *doc = repeat("", "<span>", 100000, &len);
    uint64_t start = hv_mono_ms();
    hv_html_result_t r;
    ASSERT_EQ(HV_ENESTING, hv_html_analyse(doc, len, &r));
    ASSERT_LT(hv_mono_ms() - start, 1000); /* gumbo alone would take tens of seconds */
    ASSERT_EQ(HV_HTML_MAX_DEPTH + 1, r.depth);
    free(doc);
}

TEST_IMPL(html_many_siblings_not_refused)
{
    static const char *const units[] = {"<p>x",      "<li>x", "<br>",       "<p>",
                                        "<option>x", "<td>x", "<dt>a<dd>b", "<img src=a>"};
    for (size_t i = 0; i < HV_ARRAY_SIZE(units); i++) {
        size_t len;
        char *doc = repeat("<title>many</title><ul><table><tr><select>", units[i], 100000, &len);
        hv_html_result_t r;
        int rc = hv_html_analyse(doc, len, &r);
        if (rc != 0)
            hv_test_fail(__FILE__, __LINE__, "\"%s\" x 100000: %s (depth %zu)", units[i],
                         hv_err_name(rc), r.depth);
        ASSERT_LT(r.depth, 10);
        ASSERT_STR_EQ("many", r.title);
        hv_html_result_free(&r);
        free(doc);
    }
}

TEST_IMPL(html_reopened_formatting_elements_counted)
{
    /* Unclosed formatting elements are reopened inside every new paragraph: 200 distinct
     * ones make gumbo build 200 elements per 8 bytes of input, which the pre-scan refuses
     * although the depth stays near 200. */
    char head[200 * 16 + 8];
    size_t o = 0;
    o += (size_t)snprintf(head + o, sizeof(head) - o, "<p>");
    for (int i = 0; i < 200; i++)
        o += (size_t)snprintf(head + o, sizeof(head) - o, "<b id=%d>", i);
    size_t len;
    char *doc = repeat(head, "</p><p>x", 2000, &len);
    ASSERT_EQ(HV_HTML_MAX_DEPTH + 1, hv_prescan_depth(doc, len, HV_HTML_MAX_DEPTH));
    free(doc);

    /* Identical ones are kept to three (the parser's "Noah's Ark" clause). */
    doc = repeat("", "<p><b>x", 50000, &len);
    ASSERT_LT(hv_prescan_depth(doc, len, HV_HTML_MAX_DEPTH), 10);
    free(doc);
}

TEST_IMPL(html_tree_depth_and_flatten)
{
    /* The check after parsing: measure gumbo's tree without recursion, and flatten it so
     * that gumbo_destroy_output() does not recurse (ASan checks that everything is freed
     * exactly once). */
    size_t len;
    char *doc = repeat("<title>t</title>", "<div>", 3000, &len);
    hv_arena_t arena;
    hv_arena_init(&arena);
    /* With malloc, then with an arena: the new child array must come from the same one. */
    for (int round = 0; round < 2; round++) {
        hv_html_use_arena(round == 0 ? NULL : &arena);
        GumboOptions opts;
        hv_html__gumbo_options(&opts);
        GumboOutput *out = gumbo_parse_with_options(&opts, doc, len);
        ASSERT_EQ(3002, hv_html_tree_depth(out->document)); /* html, body, 3000 divs */
        ASSERT_NOT_NULL(hv_html_find_title(out->document));
        hv_html_flatten(&opts, out->document);
        ASSERT_EQ(1, hv_html_tree_depth(out->document));
        /* html, head, title, its text, body and the divs, all children of the document */
        ASSERT_EQ(3005, out->document->v.document.children.length);
        hv_html__gumbo_destroy(&opts, out);
    }
    hv_html_use_arena(NULL);
    hv_arena_free(&arena);
    free(doc);
}

TEST_IMPL(html_prescan_follows_foreign_content)
{
    /* MathML foster-parented out of tables nests in gumbo in ways the pre-scan does not
     * model; a MathML "frameset" never occurs in real documents, and is refused. */
    size_t len;
    char *doc = repeat("<title>x</title>", "<math><frameset><mtext></li><table>", 6000, &len);
    hv_html_result_t r;
    ASSERT_EQ(UV_EINVAL, hv_html_analyse(doc, len, &r));
    ASSERT_EQ(HV_PRESCAN_KNOWN_CRASH, r.refusal);
    ASSERT_NULL(r.title);
    free(doc);
}

TEST_IMPL(html_gumbo_assertion_inputs_refused)
{
    /* gumbo 0.10 aborts the process on these (an SVG/MathML "select" confuses its
     * insertion mode); they must never reach it. */
    static const char *const bad[] = {
        "<table><svg><select><title><select><td>",
        "<table><math><select><mi><select><tr>",
        "<table><svg><select><title><select><table>",
    };
    for (size_t i = 0; i < HV_ARRAY_SIZE(bad); i++) {
        hv_html_result_t r;
        ASSERT_EQ(UV_EINVAL, hv_html_analyse(bad[i], strlen(bad[i]), &r));
        ASSERT_EQ(HV_PRESCAN_KNOWN_CRASH, r.refusal);
        ASSERT_NULL(r.title);
    }
    /* An HTML select inside an SVG integration point is fine. */
    ASSERT_TITLE("<title>t</title><svg><foreignObject><select><option>a</select>", "t");
}

/* The verdict and bound of `doc` (malloc'd, freed here). */
static void assert_verdict(char *doc, size_t len, hv_prescan_verdict_t verdict, size_t bound,
                           int line)
{
    hv_prescan_result_t r;
    hv_prescan_check(doc, len, HV_HTML_MAX_DEPTH, &r);
    if (r.verdict != verdict || r.bound != bound)
        hv_test_fail(__FILE__, line, "verdict %d bound %zu, expected %d bound %zu", (int)r.verdict,
                     r.bound, (int)verdict, bound);
    if (verdict != HV_PRESCAN_OK && r.depth != HV_HTML_MAX_DEPTH + 1)
        hv_test_fail(__FILE__, line, "refused with depth %zu", r.depth);
    free(doc);
}

TEST_IMPL(html_prescan_verdicts_name_the_bound)
{
    size_t len;
    char *doc;

    doc = repeat("<title>t</title>", "<div>", 10, &len);
    assert_verdict(doc, len, HV_PRESCAN_OK, 0, __LINE__);
    doc = repeat("<title>t</title>", "<div>", 5000, &len);
    assert_verdict(doc, len, HV_PRESCAN_TOO_DEEP, HV_HTML_MAX_DEPTH, __LINE__);
    /* Markers on the list of active formatting elements, by what did not fit. */
    doc = repeat("", "<table><tr><td>", 257, &len);
    assert_verdict(doc, len, HV_PRESCAN_CELLS_NESTED, 256, __LINE__);
    doc = repeat("", "<table><caption>", 257, &len);
    assert_verdict(doc, len, HV_PRESCAN_CELLS_NESTED, 256, __LINE__);
    doc = repeat("", "<table><tr><td>", 256, &len);
    assert_verdict(doc, len, HV_PRESCAN_OK, 0, __LINE__);
    doc = repeat("", "<template>", 257, &len);
    assert_verdict(doc, len, HV_PRESCAN_TEMPLATES_NESTED, 256, __LINE__);
    doc = repeat("", "<object>", 257, &len);
    assert_verdict(doc, len, HV_PRESCAN_OBJECTS_NESTED, 256, __LINE__);
    doc = repeat("", "<marquee>", 257, &len);
    assert_verdict(doc, len, HV_PRESCAN_OBJECTS_NESTED, 256, __LINE__);
    /* Formatting elements (distinct, so that the Noah's Ark clause keeps them all). */
    char fmt[300 * 16];
    size_t o = 0;
    for (int i = 0; i < 257; i++)
        o += (size_t)snprintf(fmt + o, sizeof(fmt) - o, "<b id=%d>", i);
    doc = repeat(fmt, "", 0, &len);
    assert_verdict(doc, len, HV_PRESCAN_FORMATTING_OPEN, 256, __LINE__);
    /* Reopened at every paragraph: the allowance is half the length plus 4096. */
    o = (size_t)snprintf(fmt, sizeof(fmt), "<p>");
    for (int i = 0; i < 200; i++)
        o += (size_t)snprintf(fmt + o, sizeof(fmt) - o, "<b id=%d>", i);
    doc = repeat(fmt, "</p><p>x", 2000, &len);
    assert_verdict(doc, len, HV_PRESCAN_FORMATTING_REOPENED, len / 2 + 4096, __LINE__);
    /* 4000 levels, then 35000 tags at that depth: 140 million. */
    size_t deep;
    char *head = repeat("", "<div>", 4000, &deep);
    doc = repeat(head, "<br>", 35000, &len);
    free(head);
    assert_verdict(doc, len, HV_PRESCAN_DEPTH_SUM, 128u * 1024 * 1024, __LINE__);
    /* The shapes gumbo 0.10 aborts on. */
    static const char *const crash[] = {"<table><svg><select><title><select><td>",
                                        "<table><svg><desc><![CDATA[ ]]> ", "<svg><html>",
                                        "<math><template>", "<svg><tr>"};
    for (size_t i = 0; i < HV_ARRAY_SIZE(crash); i++) {
        doc = repeat(crash[i], "", 0, &len);
        assert_verdict(doc, len, HV_PRESCAN_KNOWN_CRASH, 0, __LINE__);
    }
    /* The first reason found is the one reported: the cells, not the depth after them. */
    head = repeat("", "<table><tr><td>", 300, &deep);
    doc = repeat(head, "<div>", 5000, &len);
    free(head);
    assert_verdict(doc, len, HV_PRESCAN_CELLS_NESTED, 256, __LINE__);
    /* A limit of the caller's is the bound of its refusal. */
    hv_prescan_result_t r;
    hv_prescan_check("<i><i><i>", 9, 2, &r);
    ASSERT_EQ(HV_PRESCAN_TOO_DEEP, r.verdict);
    ASSERT_EQ(2, r.bound);
    ASSERT_EQ(3, r.depth);
}

TEST_IMPL(html_refusals_reach_the_result)
{
    size_t len;
    char *doc = repeat("<title>t</title>", "<template>", 300, &len);
    hv_html_result_t r;
    ASSERT_EQ(HV_ENESTING, hv_html_analyse(doc, len, &r));
    ASSERT_EQ(HV_PRESCAN_TEMPLATES_NESTED, r.refusal);
    ASSERT_EQ(256, r.bound);
    ASSERT_NULL(r.title);
    free(doc);

    doc = repeat("<title>t</title>", "<div>", 10, &len);
    ASSERT_OK(hv_html_analyse(doc, len, &r));
    ASSERT_EQ(HV_PRESCAN_OK, r.refusal);
    hv_html_result_free(&r);
    free(doc);
}

/* "<open" + n distinct attributes (a0 a1 ...) + ">" + rest, appended to `b`. */
static void put_tag(hv_buf_t *b, const char *open, size_t n, size_t first, const char *rest)
{
    char name[32];
    ASSERT_OK(hv_buf_append(b, open, strlen(open)));
    for (size_t i = 0; i < n; i++) {
        int k = snprintf(name, sizeof(name), " a%zx", first + i);
        ASSERT_OK(hv_buf_append(b, name, (size_t)k));
    }
    ASSERT_OK(hv_buf_append(b, ">", 1));
    ASSERT_OK(hv_buf_append(b, rest, strlen(rest)));
}

static char *take(hv_buf_t *b, size_t *len)
{
    ASSERT_OK(hv_buf_append(b, "", 1));
    char *s = hv_buf_steal(b, len);
    (*len)--;
    hv_buf_init(b, SIZE_MAX / 2);
    return s;
}

/* `n` nested formatting elements, tags taken in turn from `tags`, each with the same 64
 * attributes and then one, z, that differs. */
static void put_nested_formatting(hv_buf_t *b, const char *const *tags, size_t ntags, int n)
{
    char z[32];
    for (int i = 0; i < n; i++) {
        put_tag(b, tags[(size_t)i % ntags], 64, 0, "");
        b->len--; /* reopen the tag for z */
        snprintf(z, sizeof(z), " z=%d>", i);
        ASSERT_OK(hv_buf_append(b, z, strlen(z)));
    }
}

/* The verdict on what `b` holds, which is then emptied. */
static void assert_built(hv_buf_t *b, hv_prescan_verdict_t verdict, size_t bound, int line)
{
    size_t len;
    char *doc = take(b, &len);
    assert_verdict(doc, len, verdict, bound, line);
}

TEST_IMPL(html_prescan_attribute_bounds)
{
    hv_buf_t b;
    size_t len;
    char *doc;
    hv_buf_init(&b, SIZE_MAX / 2);

    /* One tag: start or end, kept or cut short by the end of the input; duplicates count. */
    put_tag(&b, "<title>t</title><div", 256, 0, "x</div>");
    assert_built(&b, HV_PRESCAN_OK, 0, __LINE__);
    put_tag(&b, "<div", 257, 0, "x</div>");
    assert_built(&b, HV_PRESCAN_ATTRIBUTES, 256, __LINE__);
    put_tag(&b, "<div>x</div", 257, 0, "");
    assert_built(&b, HV_PRESCAN_ATTRIBUTES, 256, __LINE__);
    put_tag(&b, "<script>x</script", 257, 0, "<p>");
    assert_built(&b, HV_PRESCAN_ATTRIBUTES, 256, __LINE__);
    put_tag(&b, "<textarea>x</textarea", 257, 0, "<p>");
    assert_built(&b, HV_PRESCAN_ATTRIBUTES, 256, __LINE__);
    put_tag(&b, "<p>x", 0, 0, "");
    for (int i = 0; i < 257; i++)
        ASSERT_OK(hv_buf_append(&b, " a", 2));
    assert_built(&b, HV_PRESCAN_OK, 0, __LINE__); /* "<p>x> a a a ..." is text: no tag */
    ASSERT_OK(hv_buf_append(&b, "<div", 4));
    for (int i = 0; i < 300; i++)
        ASSERT_OK(hv_buf_append(&b, " a", 2));
    assert_built(&b, HV_PRESCAN_ATTRIBUTES, 256, __LINE__); /* no '>' */
    ASSERT_OK(hv_buf_append(&b, "<div", 4));
    for (int i = 0; i < 257; i++)
        ASSERT_OK(hv_buf_append(&b, " a=1", 4));
    ASSERT_OK(hv_buf_append(&b, ">", 1));
    assert_built(&b, HV_PRESCAN_ATTRIBUTES, 256, __LINE__);

    /* html and body tags are merged into one element each: their attributes add up. */
    put_tag(&b, "<html", 100, 0, "");
    put_tag(&b, "<html", 100, 0, "");
    put_tag(&b, "<body", 200, 0, "x");
    assert_built(&b, HV_PRESCAN_OK, 0, __LINE__);
    for (int i = 0; i < 3; i++)
        put_tag(&b, "<html", 100, 0, "");
    assert_built(&b, HV_PRESCAN_MERGED_ATTRIBUTES, 256, __LINE__);
    ASSERT_OK(hv_buf_append(&b, "x", 1));
    for (size_t i = 0; i < 3; i++)
        put_tag(&b, "<body", 100, 100 * i, "");
    assert_built(&b, HV_PRESCAN_MERGED_ATTRIBUTES, 256, __LINE__);
    put_tag(&b, "<head", 200, 0, "");
    put_tag(&b, "<head", 200, 0, "x"); /* a second head is ignored, not merged */
    assert_built(&b, HV_PRESCAN_OK, 0, __LINE__);

    /* Formatting elements of one tag with differing attributes: gumbo compares each new one
     * with every entry, attribute by attribute (nested 150 deep: 47 million, accepted; 200
     * deep: 84 million). */
    static const char *const b_only[] = {"<b"};
    put_nested_formatting(&b, b_only, 1, 150);
    assert_built(&b, HV_PRESCAN_OK, 0, __LINE__);
    put_nested_formatting(&b, b_only, 1, 200);
    assert_built(&b, HV_PRESCAN_ATTRIBUTE_WORK, 64u * 1024 * 1024, __LINE__);
    /* Different tags are not compared. */
    static const char *const tags[] = {"<b", "<i", "<u", "<s", "<em", "<strong", "<code", "<big"};
    put_nested_formatting(&b, tags, HV_ARRAY_SIZE(tags), 200);
    assert_built(&b, HV_PRESCAN_OK, 0, __LINE__);

    /* Each reopening copies the attributes: at most half the length plus 4096 in all. */
    put_tag(&b, "<p><b", 64, 0, "x</p>");
    for (int i = 0; i < 2000; i++)
        ASSERT_OK(hv_buf_append(&b, "<p>y</p>", 8));
    doc = take(&b, &len);
    assert_verdict(doc, len, HV_PRESCAN_ATTRIBUTE_COPIES, len / 2 + 4096, __LINE__);
    put_tag(&b, "<p><b", 1, 0, "x</p>");
    for (int i = 0; i < 2000; i++)
        ASSERT_OK(hv_buf_append(&b, "<p>y</p>", 8));
    assert_built(&b, HV_PRESCAN_OK, 0, __LINE__);
    /* So does the adoption agency, even below the levels the pre-scan follows. */
    for (int r = 0; r < 10; r++) {
        put_tag(&b, "<b", 256, 0, "");
        for (int i = 0; i < 600; i++)
            ASSERT_OK(hv_buf_append(&b, "<div>", 5));
        for (int i = 0; i < 600; i++)
            ASSERT_OK(hv_buf_append(&b, "</b>x", 5));
        for (int i = 0; i < 600; i++)
            ASSERT_OK(hv_buf_append(&b, "</div>", 6));
    }
    doc = take(&b, &len);
    assert_verdict(doc, len, HV_PRESCAN_ATTRIBUTE_COPIES, len / 2 + 4096, __LINE__);
    hv_buf_free(&b);
}

TEST_IMPL(html_many_attributes_refused_quickly)
{
    /* 100,000 attributes on one tag: gumbo alone would take minutes. */
    hv_buf_t b;
    hv_buf_init(&b, SIZE_MAX / 2);
    put_tag(&b, "<title>t</title><div", 100000, 0, "x</div>");
    size_t len;
    char *doc = take(&b, &len);
    hv_buf_free(&b);
    uint64_t start = hv_mono_ms();
    hv_html_result_t r;
    ASSERT_EQ(HV_ETOOBIG, hv_html_analyse(doc, len, &r));
    ASSERT_LT(hv_mono_ms() - start, 1000);
    ASSERT_EQ(HV_PRESCAN_ATTRIBUTES, r.refusal);
    ASSERT_EQ(HV_PRESCAN_MAX_ATTRS, r.bound);
    ASSERT_NULL(r.title);
    /* The fast path parses the head alone, which is fine: it settles the title, quickly. */
    start = hv_mono_ms();
    ASSERT_EQ(1, hv_html_title_fast(doc, len, &r));
    ASSERT_LT(hv_mono_ms() - start, 1000);
    ASSERT_STR_EQ("t", r.title);
    hv_html_test_result_free(&r);
    free(doc);
}
