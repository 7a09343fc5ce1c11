/* test_select.c: selector compilation, matching and values over gumbo trees. */
#include "harvestd/select.h"

#include <stdlib.h>

#include "harvestd/common.h"
#include "harvestd/utf8.h"
#include "test.h"

typedef struct {
    GumboOptions opts;
    GumboOutput *out;
    const char *src;
    size_t len;
} page_t;

static void page_open(page_t *pg, const char *src, size_t len)
{
    pg->opts = kGumboDefaultOptions;
    pg->opts.max_errors = 0;
    pg->src = src;
    pg->len = len;
    pg->out = gumbo_parse_with_options(&pg->opts, src, len);
    ASSERT_NOT_NULL(pg->out);
}

static void page_close(page_t *pg)
{
    gumbo_destroy_output(&pg->opts, pg->out);
    pg->out = NULL;
}

static hv_selector_t *compile_ok(const char *text)
{
    char err[256];
    hv_selector_t *s = hv_selector_compile(text, err, sizeof(err));
    if (s == NULL)
        hv_test_fail(__FILE__, __LINE__, "compile \"%s\": %s", text, err);
    return s;
}

/* Appends `v` (or "(null)") to the '|'-separated list in buf. */
static void join(char *buf, size_t cap, size_t *used, const char *v)
{
    int n = snprintf(buf + *used, cap - *used, "%s%s", *used > 0 ? "|" : "", v ? v : "(null)");
    ASSERT(n >= 0 && (size_t)n < cap - *used);
    *used += (size_t)n;
}

/*
 * Every value `selector` takes from the page `doc`, in document order, joined with '|'
 * ("" when nothing matches). The result is static: copy it before the next call.
 */
static const char *select_all(const char *doc, const char *selector)
{
    static char buf[8192];
    const GumboNode *nodes[64];
    page_t pg;
    size_t used = 0;

    buf[0] = '\0';
    hv_selector_t *s = compile_ok(selector);
    page_open(&pg, doc, strlen(doc));
    size_t n = hv_selector_match(s, pg.out->document, nodes, HV_ARRAY_SIZE(nodes), 0);
    ASSERT_LE(n, HV_ARRAY_SIZE(nodes));
    for (size_t i = 0; i < n; i++) {
        char *v = hv_selector_value(s, nodes[i], doc, strlen(doc));
        join(buf, sizeof(buf), &used, v);
        free(v);
    }
    page_close(&pg);
    hv_selector_free(s);
    return buf;
}

/* The compile error for `selector`, asserting that compilation fails. Static buffer. */
static const char *compile_error(const char *selector)
{
    static char err[256];
    memset(err, 'x', sizeof(err));
    hv_selector_t *s = hv_selector_compile(selector, err, sizeof(err));
    if (s != NULL) {
        hv_selector_free(s);
        hv_test_fail(__FILE__, __LINE__, "\"%s\" compiled", selector);
    }
    return err;
}

static const char *const basic_doc =
    "<!doctype html><html><head><title>T</title></head><body>"
    "<div id=main class='box wide'>"
    "<p class=intro>One</p>"
    "<p class='intro x'>Two</p>"
    "<section><p class=deep>Three</p></section>"
    "<a href='https://example.com/a.html' lang=en-GB rel='nofollow noopener'>A</a>"
    "<a href='/b.pdf' data-id=7 rel=next>B</a>"
    "</div>"
    "<p id=last>Four</p>"
    "</body></html>";

TEST_IMPL(select_type_and_universal)
{
    ASSERT_STR_EQ("One|Two|Three|Four", select_all(basic_doc, "p"));
    ASSERT_STR_EQ("T", select_all(basic_doc, "title"));
    ASSERT_STR_EQ("", select_all(basic_doc, "table"));
    /* Every element child of the div, in document order. */
    ASSERT_STR_EQ("One|Two|Three|A|B", select_all(basic_doc, "#main > *"));
    ASSERT_STR_EQ("Three", select_all(basic_doc, "section *"));
}

TEST_IMPL(select_class_and_id)
{
    ASSERT_STR_EQ("One|Two", select_all(basic_doc, ".intro"));
    ASSERT_STR_EQ("Two", select_all(basic_doc, "p.intro.x"));
    ASSERT_STR_EQ("Two", select_all(basic_doc, ".x.intro"));
    ASSERT_STR_EQ("", select_all(basic_doc, ".intro.deep"));
    ASSERT_STR_EQ("Four", select_all(basic_doc, "#last"));
    ASSERT_STR_EQ("Four", select_all(basic_doc, "p#last"));
    ASSERT_STR_EQ("", select_all(basic_doc, "div#last"));
    ASSERT_STR_EQ("Three", select_all(basic_doc, "div#main.wide.box p.deep"));
    /* Classes are split on any ASCII whitespace and compared exactly. */
    ASSERT_STR_EQ("y", select_all("<b class=\"\tfoo\nbar\r\fbaz \">y</b>", ".bar"));
    ASSERT_STR_EQ("y", select_all("<b class=\"\tfoo\nbar\r\fbaz \">y</b>", ".baz.foo"));
    ASSERT_STR_EQ("", select_all("<b class=\"foobar\">y</b>", ".foo"));
    ASSERT_STR_EQ("", select_all("<b class=\"Foo\">y</b>", ".foo"));
    ASSERT_STR_EQ("", select_all("<b id=\"Main\">y</b>", "#main"));
    /* Non-ASCII class names and ids that start with a digit. */
    ASSERT_STR_EQ("y", select_all("<b class=\"caf\xc3\xa9 x\">y</b>", ".caf\xc3\xa9"));
    ASSERT_STR_EQ("z", select_all("<i id=123>z</i>", "#123"));
}

TEST_IMPL(select_attributes)
{
    ASSERT_STR_EQ("A|B", select_all(basic_doc, "[href]"));
    ASSERT_STR_EQ("B", select_all(basic_doc, "a[data-id]"));
    ASSERT_STR_EQ("B", select_all(basic_doc, "[ data-id = 7 ]"));
    ASSERT_STR_EQ("B", select_all(basic_doc, "[data-id=\"7\"]"));
    ASSERT_STR_EQ("B", select_all(basic_doc, "[data-id='7']"));
    ASSERT_STR_EQ("", select_all(basic_doc, "[data-id=70]"));

    /* ~= : one of the words */
    ASSERT_STR_EQ("A", select_all(basic_doc, "a[rel~=noopener]"));
    ASSERT_STR_EQ("A", select_all(basic_doc, "a[rel~='nofollow']"));
    ASSERT_STR_EQ("", select_all(basic_doc, "a[rel~=follow]"));
    ASSERT_STR_EQ("", select_all(basic_doc, "a[rel~='nofollow noopener']"));
    ASSERT_STR_EQ("", select_all(basic_doc, "a[rel~=\"\"]"));

    /* ^= $= *= */
    ASSERT_STR_EQ("A", select_all(basic_doc, "a[href^=\"https://\"]"));
    ASSERT_STR_EQ("A", select_all(basic_doc, "a[lang^=en]"));
    ASSERT_STR_EQ("B", select_all(basic_doc, "a[href$='.pdf']"));
    ASSERT_STR_EQ("A", select_all(basic_doc, "a[lang$=GB]"));
    ASSERT_STR_EQ("A|B", select_all(basic_doc, "a[href*=\"/\"]"));
    ASSERT_STR_EQ("A", select_all(basic_doc, "a[href*=example]"));
    ASSERT_STR_EQ("", select_all(basic_doc, "a[href*=EXAMPLE]"));
    /* An empty value never matches these operators (but does match '='). */
    ASSERT_STR_EQ("", select_all(basic_doc, "a[href^=\"\"]"));
    ASSERT_STR_EQ("", select_all(basic_doc, "a[href$='']"));
    ASSERT_STR_EQ("", select_all(basic_doc, "a[href*='']"));
    ASSERT_STR_EQ("c", select_all("<input value=''><b title=''>c</b>", "[title='']"));

    /* Values are compared after entity decoding; quotes may hold spaces and escapes. */
    ASSERT_STR_EQ("q", select_all("<b title='a &amp; b'>q</b>", "b[title='a & b']"));
    ASSERT_STR_EQ("q", select_all("<b title='say \"hi\"'>q</b>", "[title=\"say \\\"hi\\\"\"]"));
    ASSERT_STR_EQ("q", select_all("<b title=\"it's\">q</b>", "[title='it\\'s']"));
}

TEST_IMPL(select_combinators)
{
    const char *doc = "<div class=a><p>1</p><span><p>2</p></span></div><p>3</p>"
                      "<div class=b><div class=c><p>4</p></div></div>";
    ASSERT_STR_EQ("1|2|4", select_all(doc, "div p"));
    ASSERT_STR_EQ("1|4", select_all(doc, "div > p"));
    ASSERT_STR_EQ("1|4", select_all(doc, "div>p"));
    ASSERT_STR_EQ("2", select_all(doc, "div.a span > p"));
    ASSERT_STR_EQ("", select_all(doc, "div.a > p > p"));
    ASSERT_STR_EQ("4", select_all(doc, ".b > .c > p"));
    ASSERT_STR_EQ("", select_all(doc, ".b > p"));
    ASSERT_STR_EQ("4", select_all(doc, ".b p"));
    ASSERT_STR_EQ("4", select_all(doc, "body > .b div p"));

    /* A child step after a descendant step has to retry the descendant step higher up:
     * the nearest div.x above the p is not a child of section, the next one is. */
    const char *retry = "<section><div class=x><div><div class=x><div><p>5</p></div></div>"
                        "</div></div></section>";
    ASSERT_STR_EQ("5", select_all(retry, "section > div.x p"));
    ASSERT_STR_EQ("5", select_all(retry, "section > .x > div > .x > div > p"));
    ASSERT_STR_EQ("", select_all(retry, "section > .x > p"));
    ASSERT_STR_EQ("5", select_all(retry, "section .x div p"));
    ASSERT_STR_EQ("", select_all(retry, "p section"));
}

TEST_IMPL(select_position)
{
    /* Text, whitespace and comments between the elements do not count. */
    const char *doc = "<ul>\n  <!-- c -->text<li>a</li> <li>b</li><!-- x --><li>c</li>\n</ul>"
                      "<ol><li><b>x</b><i>y</i></li></ol>";
    ASSERT_STR_EQ("a|xy", select_all(doc, "li:first-child"));
    ASSERT_STR_EQ("a", select_all(doc, "ul > :first-child"));
    ASSERT_STR_EQ("b", select_all(doc, "li:nth-child(2)"));
    ASSERT_STR_EQ("b", select_all(doc, "li:NTH-CHILD( 2 )"));
    ASSERT_STR_EQ("c", select_all(doc, "ul li:nth-child(3)"));
    ASSERT_STR_EQ("", select_all(doc, "li:nth-child(4)"));
    ASSERT_STR_EQ("y", select_all(doc, "ol :nth-child(2)"));
    ASSERT_STR_EQ("x", select_all(doc, "li:first-child > b:first-child"));
    ASSERT_STR_EQ("a|xy", select_all(doc, "li:first-child:nth-child(1)"));
    ASSERT_STR_EQ("a", select_all(doc, "ul > li:first-child:nth-child(1)"));
    /* html is the first element child of the document; head of html. */
    ASSERT_STR_EQ("T", select_all(basic_doc, "html:first-child > head:first-child title"));
}

TEST_IMPL(select_groups)
{
    /* Document order, whichever member matched, and each element once. */
    ASSERT_STR_EQ("One|Two|Four", select_all(basic_doc, "#last, .intro"));
    ASSERT_STR_EQ("One|Two|Three|A|Four", select_all(basic_doc, "p , [lang] ,p.deep,.intro"));
    ASSERT_STR_EQ("One|Two|Three|Four", select_all(basic_doc, "p, p, *.intro"));
    ASSERT_STR_EQ("a.html|/b.pdf",
                  select_all("<a href=a.html>1</a><a href=/b.pdf>2</a>", "a[href$=pdf], a @href"));
}

TEST_IMPL(select_case_insensitive_names)
{
    ASSERT_STR_EQ("One|Two|Three|Four", select_all(basic_doc, "P"));
    ASSERT_STR_EQ("Three", select_all(basic_doc, "DIV SeCtIoN > P"));
    ASSERT_STR_EQ("A", select_all(basic_doc, "A[HREF^='https'][LANG=en-GB]"));
    ASSERT_STR_EQ("One|Two", select_all("<DIV CLASS=intro>One</DIV><dIv Class=intro>Two</dIv>",
                                        "div.intro"));
    ASSERT_STR_EQ("/x", select_all("<a HREF=/x>1</a>", "a @HREF"));
    /* Unknown elements are compared by their source spelling. */
    ASSERT_STR_EQ("z|w", select_all("<Foo-Bar x=1>z</FOO-BAR><foo-bar>w</foo-bar>", "foo-bar"));
    ASSERT_STR_EQ("z|w", select_all("<Foo-Bar x=1>z</FOO-BAR><foo-bar>w</foo-bar>", "FOO-BAR"));
    /* Values stay case-sensitive. */
    ASSERT_STR_EQ("", select_all("<a HREF=/x>1</a>", "a[href='/X']"));
}

TEST_IMPL(select_foreign_and_template)
{
    const char *doc = "<svg viewBox='0 0 1 1'><clipPath id=c><rect width=1 /></clipPath>"
                      "<foreignObject><p>in</p></foreignObject><title>st</title></svg>"
                      "<math><mi>x</mi></math><template><b>t</b></template>";
    ASSERT_STR_EQ("c", select_all(doc, "svg clippath @id"));
    ASSERT_STR_EQ("c", select_all(doc, "clipPath @ID"));
    ASSERT_STR_EQ("1", select_all(doc, "svg > clipPath > rect @width"));
    ASSERT_STR_EQ("0 0 1 1", select_all(doc, "svg @viewbox"));
    ASSERT_STR_EQ("0 0 1 1", select_all(doc, "[viewBox='0 0 1 1'] @viewBox"));
    ASSERT_STR_EQ("in", select_all(doc, "foreignobject > p"));
    ASSERT_STR_EQ("st", select_all(doc, "svg title"));
    ASSERT_STR_EQ("x", select_all(doc, "math > mi"));
    ASSERT_STR_EQ("t", select_all(doc, "template > b"));
}

TEST_IMPL(select_text_values)
{
    ASSERT_STR_EQ("a b c \xc2\xa0" "d e",
                  select_all("<p>  a \n\t b <b> c </b>&nbsp;d\r\n e  </p>", "p"));
    ASSERT_STR_EQ("ab", select_all("<p>a<!-- not me -->b</p>", "p"));
    ASSERT_STR_EQ("xy", select_all("<div><span>x</span><span>y</span></div>", "div"));
    ASSERT_STR_EQ("", select_all("<div> \n </div>", "div"));
    ASSERT_STR_EQ("", select_all("<div><img src=x></div>", "div"));
    ASSERT_STR_EQ("<&> \xe2\x82\xac", select_all("<p>&lt;&amp;&gt; &euro;</p>", "p"));
    ASSERT_STR_EQ("cd", select_all("<svg><text><![CDATA[cd]]></text></svg>", "text"));
    ASSERT_STR_EQ("TOneTwoThreeABFour", select_all(basic_doc, "html"));
}

TEST_IMPL(select_attr_values)
{
    const char *doc = "<a href='/x?a=1&amp;b=2' title='Caf&eacute;' data-e=''>l</a>";
    ASSERT_STR_EQ("/x?a=1&b=2", select_all(doc, "a @href"));
    ASSERT_STR_EQ("Caf\xc3\xa9", select_all(doc, "a@title"));
    ASSERT_STR_EQ("", select_all(doc, "a @data-e"));
    ASSERT_STR_EQ("(null)", select_all(doc, "a @missing"));

    hv_selector_t *s = compile_ok("h3 a @Title");
    ASSERT_EQ(HV_TAKE_ATTR, hv_selector_take(s));
    ASSERT_STR_EQ("title", hv_selector_attr(s));
    hv_selector_free(s);
    s = compile_ok("h3 a");
    ASSERT_EQ(HV_TAKE_TEXT, hv_selector_take(s));
    ASSERT_NULL(hv_selector_attr(s));
    hv_selector_free(s);
    s = compile_ok("  div.x   ::HTML  ");
    ASSERT_EQ(HV_TAKE_HTML, hv_selector_take(s));
    ASSERT_NULL(hv_selector_attr(s));
    hv_selector_free(s);
}

/* HTML lists the attributes whose values selectors compare ASCII case-insensitively in HTML
 * documents (type, http-equiv, rel, lang...); the Selectors 4 flags say so explicitly. */
TEST_IMPL(select_attr_values_html_compares_without_case)
{
    const char *doc = "<ol type=A><li>x</li></ol>"
                      "<meta http-equiv=Content-Type content='text/html; charset=utf-8'>"
                      "<a rel='NoFollow Next' href=/n data-k=AbC>n</a>";
    ASSERT_STR_EQ("x", select_all(doc, "ol[type=\"a\"] li"));
    ASSERT_STR_EQ("text/html; charset=utf-8",
                  select_all(doc, "meta[http-equiv=\"content-type\"] @content"));
    ASSERT_STR_EQ("/n", select_all(doc, "a[rel~=nofollow] @href"));
    ASSERT_STR_EQ("/n", select_all(doc, "a[rel^=nofollow] @href"));
    /* Other attributes compare exactly, unless the rule says i. */
    ASSERT_STR_EQ("", select_all(doc, "a[data-k=abc] @href"));
    ASSERT_STR_EQ("/n", select_all(doc, "a[data-k=abc i] @href"));
    ASSERT_STR_EQ("/n", select_all(doc, "a[data-k$=\"BC\" I] @href"));
    ASSERT_STR_EQ("/n", select_all(doc, "a[data-k*=b i] @href"));
    /* ... and s makes a listed one exact. */
    ASSERT_STR_EQ("", select_all(doc, "ol[type=a s] li"));
    ASSERT_STR_EQ("x", select_all(doc, "ol[type=A s] li"));
    /* In SVG, type is just an attribute. */
    ASSERT_STR_EQ("", select_all("<svg><rect type=A /></svg>", "rect[type=a] @type"));
}

/* Every value `selector` takes inside each element `items` matches, items in order, values
 * joined with '|' and items with ';'. Static result. */
static const char *select_in_items(const char *doc, const char *items, const char *selector)
{
    static char buf[4096];
    const GumboNode *found[16], *nodes[16];
    page_t pg;
    size_t used = 0;
    buf[0] = '\0';
    hv_selector_t *is = compile_ok(items), *s = compile_ok(selector);
    page_open(&pg, doc, strlen(doc));
    size_t n = hv_selector_match(is, pg.out->document, found, HV_ARRAY_SIZE(found), 0);
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            used += (size_t)snprintf(buf + used, sizeof(buf) - used, ";");
        size_t k = hv_selector_match(s, found[i], nodes, HV_ARRAY_SIZE(nodes), 0);
        for (size_t j = 0; j < k; j++) {
            char *v = hv_selector_value(s, nodes[j], doc, strlen(doc));
            used += (size_t)snprintf(buf + used, sizeof(buf) - used, "%s%s", j > 0 ? "|" : "", v);
            free(v);
        }
    }
    page_close(&pg);
    hv_selector_free(is);
    hv_selector_free(s);
    return buf;
}

/* :scope is the item itself in a field selector, the root element in a page's; selectors
 * without it still look only inside the item. */
TEST_IMPL(select_scope_is_the_item)
{
    const char *doc = "<div><ul><li data-v=1><b>one</b></li><li data-v=2><b>two</b><i><b>2b</b></i>"
                      "</li></ul></div>";
    ASSERT_STR_EQ("1;2", select_in_items(doc, "li", ":scope @data-v"));
    ASSERT_STR_EQ("one;two", select_in_items(doc, "li", ":scope > b"));
    ASSERT_STR_EQ("one;two|2b", select_in_items(doc, "li", ":scope b"));
    ASSERT_STR_EQ("one;two|2b", select_in_items(doc, "li", "b"));
    ASSERT_STR_EQ(";", select_in_items(doc, "li", "li b"));
    ASSERT_STR_EQ(";", select_in_items(doc, "li", "div b"));
    ASSERT_STR_EQ("1;2", select_in_items(doc, "li", "li:scope @data-v"));
    ASSERT_STR_EQ(";", select_in_items(doc, "li", "p:scope @data-v"));
    /* On the page, :scope is the html element. */
    ASSERT_STR_EQ("x", select_all("<p>x</p>", ":scope > body > p"));
    ASSERT_STR_EQ("en", select_all("<html lang=en><p>x</p>", ":scope @lang"));
}

TEST_IMPL(select_html_values)
{
    ASSERT_STR_EQ("<div class=\"x\"><b>y</b> z</div>",
                  select_all("<p>a</p><div class=x><b>y</b> z</div><p>b</p>", "div.x ::html"));
    ASSERT_STR_EQ("<img src=\"a\">|<br>", select_all("<p><img src=a> t<br/></p>", "img, br ::html"));
    /* Closed implicitly: the end tag comes from the tree, not from the source. */
    ASSERT_STR_EQ("<p>a</p>|<p>b <i>c</i></p>", select_all("<p>a<p>b <i>c</i></body>", "p::html"));
    ASSERT_STR_EQ("<span>x</span>", select_all("<div><span>x</div>", "span ::html"));
    ASSERT_STR_EQ("<div><span>x</span></div>", select_all("<div><span>x</div>", "div ::html"));
    ASSERT_STR_EQ("<foo-bar a=\"1\">z</foo-bar>",
                  select_all("<Foo-Bar a=1>z</FOO-BAR>", "foo-bar::html"));
    ASSERT_STR_EQ("<td>1</td>|<td>2</td>",
                  select_all("<table><tr><td>1</td><td>2</table>", "td ::html"));
    /* Elements the parser inserts are serialised like the others. */
    ASSERT_STR_EQ("<tbody><tr><td>2</td></tr></tbody>",
                  select_all("<table><tr><td>2</td></tr></table>", "tbody ::html"));
    /* The parser turns CR LF into LF. */
    ASSERT_STR_EQ("<p>\xc3\xa9\n\xe2\x82\xac<b>x</b></p>",
                  select_all("<p>\xc3\xa9\r\n\xe2\x82\xac<b>x</b></p>", "p ::html"));
    ASSERT_STR_EQ("<b>&amp; <!-- c --></b>", select_all("<b>&amp; <!-- c --></b>", "b ::html"));
    /* Self-closing syntax on an element that is not void means nothing in HTML. */
    ASSERT_STR_EQ("<div>x</div>", select_all("<div/>x", "div ::html"));

    /* The source is not needed: the tree has everything. */
    const char *src = "<div><b class=k>bold</b></div>";
    page_t pg;
    const GumboNode *node;
    hv_selector_t *s = compile_ok("b ::html");
    page_open(&pg, src, strlen(src));
    ASSERT_EQ(1, hv_selector_match(s, pg.out->document, &node, 1, 0));
    char *v = hv_selector_value(s, node, NULL, 0);
    ASSERT_STR_EQ("<b class=\"k\">bold</b>", v);
    free(v);
    page_close(&pg);
    hv_selector_free(s);

    /* A NUL byte in text is dropped by the parser (in an attribute value it is U+FFFD). */
    static const char with_nul[] = "<p title='a\0b'>a\0b</p>";
    s = compile_ok("p ::html");
    page_open(&pg, with_nul, sizeof(with_nul) - 1);
    ASSERT_EQ(1, hv_selector_match(s, pg.out->document, &node, 1, 0));
    v = hv_selector_value(s, node, with_nul, sizeof(with_nul) - 1);
    ASSERT_STR_EQ("<p title=\"a\xef\xbf\xbd" "b\">ab</p>", v);
    free(v);
    page_close(&pg);
    hv_selector_free(s);
}

/* Elements re-created or closed by the tree builder come out as the tree has them, as
 * browsers' outerHTML does. */
TEST_IMPL(select_html_misnested_and_implied)
{
    const char *b = "<p><b>one<p>two</b></p>";
    ASSERT_STR_EQ("<b>one</b>|<b>two</b>", select_all(b, "b ::html"));
    ASSERT_STR_EQ("<p><b>one</b></p>|<p><b>two</b></p>", select_all(b, "p ::html"));
    ASSERT_STR_EQ("<font color=\"red\"></font>|<font color=\"red\">r</font>",
                  select_all("<font color=red><p>r</font>s</p>", "font ::html"));
    ASSERT_STR_EQ("<a href=\"x\">1</a>|<a href=\"x\">2</a>",
                  select_all("<a href=x>1<div>2</a>3</div>", "a ::html"));
    ASSERT_STR_EQ("<div><a href=\"x\">2</a>3</div>",
                  select_all("<a href=x>1<div>2</a>3</div>", "div ::html"));
    ASSERT_STR_EQ("<code>c</code>|<code>d</code>",
                  select_all("<code>c<h1>d</code>e</h1>", "code ::html"));
    /* A stray </p> creates an empty p. */
    ASSERT_STR_EQ("<p></p>", select_all("<div></p>x</div>", "p ::html"));
    ASSERT_STR_EQ("<div><p></p>x</div>", select_all("<div></p>x</div>", "div ::html"));
}

TEST_IMPL(select_html_escaping)
{
    /* Attribute values: & U+00A0 and " are escaped, nothing else. */
    ASSERT_STR_EQ("<p title=\"a&amp;b &quot;q&quot; <x> &nbsp;'\" id=\"i\"></p>",
                  select_all("<p title='a&amp;b \"q\" <x> &nbsp;&#39;' id=i></p>", "p ::html"));
    /* Text: & U+00A0 < and >; quotes stay. */
    ASSERT_STR_EQ("<p>1 &lt; 2 &gt; 0 &amp; \"q\"&nbsp;'\xc2\xa1</p>",
                  select_all("<p>1 &lt; 2 > 0 &amp; \"q\"\xc2\xa0'\xc2\xa1</p>", "p ::html"));
    /* The text of style, script, xmp, iframe, noembed and noframes is written as it is. */
    const char *raw = "<div><style>a>b{c:\"&amp;\"}</style><script>a<b&&c</script>"
                      "<xmp><b>&amp;</xmp><iframe><i>&amp;</i></iframe><noembed>1 > 0</noembed>"
                      "<noframes>&</noframes></div>";
    ASSERT_STR_EQ(raw, select_all(raw, "div ::html"));
    ASSERT_STR_EQ("<plaintext>a<b>&amp;</plaintext>",
                  select_all("<plaintext>a<b>&amp;", "plaintext ::html"));
    /* noscript is parsed as with scripting off: its content is elements and text, escaped
     * as anywhere else. */
    ASSERT_STR_EQ("<noscript><i>1 &gt; 0</i></noscript>",
                  select_all("<p>x</p><noscript><i>1 > 0</i></noscript>", "noscript ::html"));
    /* In SVG, style is an element like any other. */
    ASSERT_STR_EQ("<style>1 &gt; 0</style>", select_all("<svg><style>1 > 0</style></svg>",
                                                       "style ::html"));
    /* Comments are written as they are; CDATA sections are text. */
    ASSERT_STR_EQ("<div><!-- a <b>&amp; --><!----></div>",
                  select_all("<div><!-- a <b>&amp; --><!----></div>", "div ::html"));
    ASSERT_STR_EQ("<svg>a&lt;b</svg>", select_all("<svg><![CDATA[a<b]]></svg>", "svg ::html"));
}

TEST_IMPL(select_html_void_elements)
{
    ASSERT_STR_EQ("<p>a<br>b<img src=\"x\" alt=\"y\">c<input type=\"text\"><wbr></p>",
                  select_all("<p>a<br/>b<img src=x alt=y>c<input type=text><wbr></p>",
                             "p ::html"));
    ASSERT_STR_EQ("<head><base href=\"/\"><link rel=\"x\"><meta charset=\"utf-8\"></head>",
                  select_all("<head><base href=/><link rel=x><meta charset=utf-8></head>",
                             "head ::html"));
    ASSERT_STR_EQ("<div><object><param name=\"a\" value=\"b\"></object><embed src=\"e\">"
                  "<audio><source src=\"s\"><track src=\"t\"></audio><keygen name=\"k\">"
                  "<basefont size=\"1\"><bgsound src=\"b\"><map><area href=\"h\"></map><hr></div>",
                  select_all("<div><object><param name=a value=b></object><embed src=e>"
                             "<audio><source src=s><track src=t></audio><keygen name=k>"
                             "<basefont size=1><bgsound src=b><map><area href=h></map><hr></div>",
                             "div ::html"));
    ASSERT_STR_EQ("<colgroup><col span=\"2\"></colgroup>",
                  select_all("<table><col span=2></table>", "colgroup ::html"));
    ASSERT_STR_EQ("<frameset><frame src=\"a\"></frameset>",
                  select_all("<frameset><frame src=a></frameset>", "frameset ::html"));
}

TEST_IMPL(select_html_foreign_and_template)
{
    /* SVG names as the parser adjusts them; elements without children still get end tags. */
    ASSERT_STR_EQ("<svg viewBox=\"0 0 1 1\"><clipPath id=\"c\"><rect width=\"1\"></rect>"
                  "</clipPath><linearGradient></linearGradient><foreignObject><p>in</p>"
                  "</foreignObject><foo></foo></svg>",
                  select_all("<svg viewbox='0 0 1 1'><clippath id=c><rect width=1 /></clipPath>"
                             "<LINEARGRADIENT/><foreignObject><p>in</p></foreignObject>"
                             "<Foo/></svg>",
                             "svg ::html"));
    /* Namespaced attributes get their prefixes back. */
    ASSERT_STR_EQ("<svg xmlns:xlink=\"u\" xml:lang=\"e\"><use xlink:href=\"#a\"></use></svg>",
                  select_all("<svg xmlns:xlink=u xml:lang=e><use xlink:href=#a /></svg>",
                             "svg ::html"));
    ASSERT_STR_EQ("<math definitionURL=\"d\"><mi>x</mi></math>",
                  select_all("<math definitionurl=d><mi>x</mi></math>", "math ::html"));
    /* A template serialises its content. */
    ASSERT_STR_EQ("<div><template><b>t</b>&amp;</template></div>",
                  select_all("<div><template><b>t</b>&amp;</template></div>", "div ::html"));
    ASSERT_STR_EQ("<template><b>t</b>&amp;</template>",
                  select_all("<div><template><b>t</b>&amp;</template></div>", "template ::html"));
}

/* restore(protect(s)) for the `len` bytes at `s`, asserting it gives `s` back. */
static void assert_round_trip(const char *s, size_t len)
{
    size_t n = 0;
    char *p = hv_selector_protect_controls(s, len, &n);
    if (p == NULL) {
        for (size_t i = 0; i < len; i++)
            ASSERT(s[i] == '\0' || s[i] == '\t' || s[i] == '\n' || s[i] == '\f' ||
                   s[i] == '\r' || (unsigned char)s[i] >= 0x20);
        return;
    }
    ASSERT_GT(n, len);
    for (size_t i = 0; i < n; i++) /* no control gumbo would replace is left */
        ASSERT((unsigned char)p[i] >= 0x20 || p[i] == '\0' || p[i] == '\t' || p[i] == '\n' ||
               p[i] == '\f' || p[i] == '\r');
    ASSERT_EQ(len, hv_selector_restore_controls(p, n));
    ASSERT_MEM_EQ(s, p, len);
    free(p);
}

TEST_IMPL(select_controls_protect_and_restore)
{
    /* Most pages need nothing: no copy. */
    size_t n = 99;
    static const char plain[] = "<p title='&#27;&#x10FEFF;'>\t\n\f\r\0 &#; &#x; &# \xC3\xA9</p>";
    ASSERT_NULL(hv_selector_protect_controls(plain, sizeof(plain) - 1, &n));
    ASSERT_EQ(99, n);

    /* A control becomes its placeholder; the page's own placeholder characters and the
     * references that could decode to one get the escape in front. */
    char *p = hv_selector_protect_controls("a\x1b" "b", 3, &n);
    ASSERT_EQ(6, n);
    ASSERT_STR_EQ("a\xF4\x8F\xBC\x9B" "b", p);
    free(p);
    static const char own[] = "\xF4\x8F\xBC\x9B&#x10FF1B;&#1113856;&#x110000;";
    p = hv_selector_protect_controls(own, sizeof(own) - 1, &n);
    ASSERT_STR_EQ("\xF4\x8F\xBC\x80\xF4\x8F\xBC\x9B\xF4\x8F\xBC\x80&#x10FF1B;"
                  "\xF4\x8F\xBC\x80&#1113856;\xF4\x8F\xBC\x80&#x110000;", p);
    ASSERT_EQ(sizeof(own) - 1 + 16, n);
    free(p);

    /* In place; a lone escape at the end stands for nothing. */
    char text[] = "x\xF4\x8F\xBC\x81\xF4\x8F\xBC\x80\xF4\x8F\xBC\x81y\xF4\x8F\xBC\x80";
    ASSERT_EQ(7, hv_selector_restore_controls(text, sizeof(text) - 1));
    ASSERT_STR_EQ("x\x01\xF4\x8F\xBC\x81y", text);

    /* Whatever the text, restoring what was protected gives it back. */
    static const char *const pieces[] = {
        "a",  "\x1b", "\x01", "\x1f", "\x0b", "\t", "\n", "\r", "&", "#", "x", "X", "1", "0",
        "F",  "f",    ";",    "<",    "\xF4\x8F\xBC\x80", "\xF4\x8F\xBC\x9B",
        "\xF4\x8F\xBC\x9F",   "\xF4\x8F\xBC\xA0",         "\xF4\x8F\xBF\xBD", "\xC3\xA9",
        "&#x10FF1B;", "&#1113883;", "&#x10FF00", "&#4296081179;",
    };
    static const char nul[] = "\0a\x1b\0";
    assert_round_trip(nul, sizeof(nul) - 1);
    uint32_t seed = 12345;
    for (int round = 0; round < 5000; round++) {
        char buf[512];
        size_t len = 0;
        seed = seed * 1103515245u + 12345u;
        size_t count = (seed >> 16) % 24;
        for (size_t i = 0; i < count; i++) {
            seed = seed * 1103515245u + 12345u;
            const char *piece = pieces[(seed >> 16) % HV_ARRAY_SIZE(pieces)];
            memcpy(buf + len, piece, strlen(piece));
            len += strlen(piece);
        }
        assert_round_trip(buf, len);
    }
}

static const char *const catalogue =
    "<html><body><div class=page><ol class=row>"
    "<li><article class=product_pod><div class=image_container><a href=a.html>"
    "<img src=a.jpg alt='A Light in the Attic'></a></div>"
    "<h3><a href=a.html title='A Light in the Attic'>A Light in the ...</a></h3>"
    "<div class=product_price><p class=price_color>\xc2\xa3" "51.77</p>"
    "<p class='instock availability'>\n    In stock\n</p></div></article></li>"
    "<li><article class=product_pod>"
    "<h3><a href=b.html title='Tipping the Velvet'>Tipping the Velvet</a></h3>"
    "<div class=product_price><p class=price_color>\xc2\xa3" "53.74</p></div></article></li>"
    "<li><article class=product_pod>"
    "<h3><a href=c.html title='Soumission &amp; Co'>Soumission</a></h3>"
    "<div class=product_price><p class=price_color> \xc2\xa3" "50.10 </p></div></article></li>"
    "</ol><p class=price_color>not a product</p></div></body></html>";

TEST_IMPL(select_scoped_catalogue)
{
    page_t pg;
    const GumboNode *items[8];
    const char *want_title[] = {"A Light in the Attic", "Tipping the Velvet", "Soumission & Co"};
    const char *want_price[] = {"\xc2\xa3" "51.77", "\xc2\xa3" "53.74", "\xc2\xa3" "50.10"};
    hv_selector_t *item = compile_ok("article.product_pod");
    hv_selector_t *title = compile_ok("h3 a @title");
    hv_selector_t *price = compile_ok("p.price_color");
    hv_selector_t *link = compile_ok("h3 > a @href");

    page_open(&pg, catalogue, strlen(catalogue));
    ASSERT_EQ(3, hv_selector_match(item, pg.out->document, items, HV_ARRAY_SIZE(items), 0));
    for (size_t i = 0; i < 3; i++) {
        const GumboNode *m;
        ASSERT_EQ(1, hv_selector_match(title, items[i], &m, 1, 1));
        char *v = hv_selector_value(title, m, catalogue, strlen(catalogue));
        ASSERT_STR_EQ(want_title[i], v);
        free(v);
        ASSERT_EQ(1, hv_selector_match(price, items[i], &m, 1, 1));
        v = hv_selector_value(price, m, catalogue, strlen(catalogue));
        ASSERT_STR_EQ(want_price[i], v);
        free(v);
        ASSERT_EQ(1, hv_selector_match(link, items[i], &m, 1, 0));
        v = hv_selector_value(link, m, catalogue, strlen(catalogue));
        ASSERT(hv_utf8_valid(v, strlen(v)));
        ASSERT_EQ('a' + (int)i, v[0]);
        free(v);
    }
    /* The page has a fourth price outside any product. */
    ASSERT_EQ(4, hv_selector_match(price, pg.out->document, NULL, 0, 0));
    page_close(&pg);
    hv_selector_free(item);
    hv_selector_free(title);
    hv_selector_free(price);
    hv_selector_free(link);
}

TEST_IMPL(select_scope_boundaries)
{
    const char *doc = "<div class=outer><section class=item><p>1</p><div><p>2</p></div></section>"
                      "</div>";
    page_t pg;
    const GumboNode *item, *m[4];
    hv_selector_t *is = compile_ok("section.item");
    page_open(&pg, doc, strlen(doc));
    ASSERT_EQ(1, hv_selector_match(is, pg.out->document, &item, 1, 0));

    /* Not the scope itself, and no compound may match the scope or its ancestors. */
    hv_selector_t *s = compile_ok("section");
    ASSERT_EQ(0, hv_selector_match(s, item, m, 4, 0));
    hv_selector_free(s);
    s = compile_ok("div p");
    ASSERT_EQ(1, hv_selector_match(s, item, m, 4, 0));
    ASSERT_EQ(2, hv_selector_match(s, pg.out->document, m, 4, 0));
    hv_selector_free(s);
    s = compile_ok(".item > p");
    ASSERT_EQ(0, hv_selector_match(s, item, m, 4, 0));
    hv_selector_free(s);
    s = compile_ok("p");
    ASSERT_EQ(2, hv_selector_match(s, item, m, 4, 0));
    /* cap and max */
    ASSERT_EQ(2, hv_selector_match(s, item, m, 1, 0));
    ASSERT_EQ(2, hv_selector_match(s, item, NULL, 0, 0));
    ASSERT_EQ(1, hv_selector_match(s, item, m, 4, 1));
    char *v = hv_selector_value(s, m[0], doc, strlen(doc));
    ASSERT_STR_EQ("1", v);
    free(v);
    /* :first-child counts in the real parent even when that parent is the scope. */
    hv_selector_free(s);
    s = compile_ok("p:first-child");
    ASSERT_EQ(2, hv_selector_match(s, item, m, 4, 0));
    hv_selector_free(s);

    page_close(&pg);
    hv_selector_free(is);
}

TEST_IMPL(select_errors)
{
    static const struct {
        const char *selector;
        const char *error;
    } cases[] = {
        {"", "position 1: empty selector"},
        {"   ", "position 1: empty selector"},
        {"a[href", "position 7: expected ']'"},
        {"a[href=x", "position 9: expected ']'"},
        {"a[href=x y]", "position 10: expected ']'"},
        {"[", "position 2: expected ']'"},
        {"[=b]", "position 2: expected an attribute name after '['"},
        {"a]", "position 2: unexpected ']'"},
        {"a[href=\"x]", "position 8: unterminated quoted value"},
        {"a[title='it\\']", "position 9: unterminated quoted value"},
        {"[a=\"\\41\"]", "position 5: escapes by code point are not supported"},
        {"p:nth-child(2", "position 14: expected ')'"},
        {"p:nth-child(2]", "position 14: expected ')'"},
        {"a)", "position 2: unexpected ')'"},
        {"a(b)", "position 2: unexpected '('"},
        {"p:hover", "position 2: unknown pseudo-class ':hover'"},
        {"p:last-child", "position 2: unknown pseudo-class ':last-child'"},
        {"a :", "position 4: expected a pseudo-class name after ':'"},
        {"p:nth-child(0)", "position 13: :nth-child needs a positive integer"},
        {"p:nth-child()", "position 13: :nth-child needs a positive integer"},
        {"p:nth-child(odd)", "position 13: :nth-child needs a positive integer"},
        {"p:nth-child(2n+1)", "position 13: :nth-child needs a positive integer"},
        {"p:nth-child(-1)", "position 13: :nth-child needs a positive integer"},
        {"p:nth-child(99999999)", "position 13: :nth-child index larger than 1000000"},
        {"p:nth-child", "position 12: expected '(' after ':nth-child'"},
        {"a >", "position 4: expected a selector after '>'"},
        {"a > ", "position 5: expected a selector after '>'"},
        {"a > > b", "position 5: expected a selector after '>'"},
        {"a > , b", "position 5: expected a selector after '>'"},
        {"a > @href", "position 5: expected a selector after '>'"},
        {"> a", "position 1: expected a selector before '>'"},
        {"a,,b", "position 3: empty selector in group"},
        {",a", "position 1: empty selector in group"},
        {"a, ,b", "position 4: empty selector in group"},
        {"a,", "position 3: expected a selector after ','"},
        {"a, @href", "position 4: expected a selector after ','"},
        {"[a|=b]", "position 3: unsupported operator '|='"},
        {"[a!=b]", "position 3: unsupported operator '!='"},
        {"[a~b]", "position 4: expected '=' after '~'"},
        {"[a=]", "position 4: expected a value after '='"},
        {"[a^= ]", "position 6: expected a value after '^='"},
        {"a @title x", "position 10: unexpected 'x' after '@title'"},
        {"a @title, b", "position 9: unexpected ',' after '@title'"},
        {"a ::html b", "position 10: unexpected 'b' after '::html'"},
        {"a ::html @x", "position 10: unexpected '@' after '::html'"},
        {"a @", "position 4: expected an attribute name after '@'"},
        {"a @ title", "position 4: expected an attribute name after '@'"},
        {"a ::text", "position 3: unsupported '::text' (only '::html' is allowed)"},
        {"a::before", "position 2: unsupported '::before' (only '::html' is allowed)"},
        {"a ::", "position 3: unsupported '::' (only '::html' is allowed)"},
        {"@title", "position 1: expected a selector before '@'"},
        {"::html", "position 1: expected a selector before '::'"},
        {"a.", "position 3: expected a class name after '.'"},
        {"#", "position 2: expected an id after '#'"},
        {"a b{", "position 4: unexpected '{'"},
        {"a\\.b", "position 2: unexpected '\\'"},
        {"svg|rect", "position 4: unexpected '|'"},
        {"[a=b ix]", "position 6: expected ']'"},
        {"[a=b i s]", "position 8: expected ']'"},
        {"a\x01", "position 2: unexpected character"},
        /* Positions count characters: the first two are two bytes each. */
        {"\xc3\xa9\xc3\xa9[x", "position 5: expected ']'"},
    };

    for (size_t i = 0; i < HV_ARRAY_SIZE(cases); i++) {
        const char *err = compile_error(cases[i].selector);
        if (strcmp(err, cases[i].error) != 0)
            hv_test_fail(__FILE__, __LINE__, "\"%s\": got \"%s\", want \"%s\"",
                         cases[i].selector, err, cases[i].error);
    }
    /* NULL text is an empty selector; a NULL or tiny error buffer is fine. */
    ASSERT_STR_EQ("position 1: empty selector", compile_error(NULL));
    ASSERT_NULL(hv_selector_compile("a[", NULL, 0));
    char tiny[8];
    ASSERT_NULL(hv_selector_compile("a[", tiny, sizeof(tiny)));
    ASSERT_STR_EQ("positio", tiny);
}

TEST_IMPL(select_limits)
{
    char text[2048];

    /* 1024 bytes compile; 1025 do not. */
    memset(text, 'a', 1024);
    text[1024] = '\0';
    hv_selector_t *s = compile_ok(text);
    hv_selector_free(s);
    memset(text, 'a', 1025);
    text[1025] = '\0';
    ASSERT_STR_EQ("position 1: selector longer than 1024 bytes", compile_error(text));

    /* 16 compounds in a chain, 64 in a group. */
    size_t n = 0;
    for (int i = 0; i < 16; i++)
        n += (size_t)snprintf(text + n, sizeof(text) - n, "%sa", i ? " " : "");
    s = compile_ok(text);
    hv_selector_free(s);
    snprintf(text + n, sizeof(text) - n, " b");
    ASSERT_STR_EQ("position 33: more than 16 compound selectors in one chain",
                  compile_error(text));

    n = 0;
    for (int i = 0; i < 64; i++)
        n += (size_t)snprintf(text + n, sizeof(text) - n, "%sa", i ? "," : "");
    s = compile_ok(text);
    hv_selector_free(s);
    snprintf(text + n, sizeof(text) - n, ",b");
    ASSERT_STR_EQ("position 129: more than 64 compound selectors", compile_error(text));

    s = compile_ok("li:nth-child(1000000)");
    hv_selector_free(s);
}

/* `unit` repeated `n` times between `head` and `tail`; malloc'd, NUL-terminated. */
static char *repeat(const char *head, const char *unit, size_t n, const char *tail, size_t *len)
{
    size_t h = strlen(head), u = strlen(unit), t = strlen(tail);
    char *s = malloc(h + u * n + t + 1);
    ASSERT_NOT_NULL(s);
    memcpy(s, head, h);
    for (size_t i = 0; i < n; i++)
        memcpy(s + h + i * u, unit, u);
    memcpy(s + h + u * n, tail, t + 1);
    *len = h + u * n + t;
    return s;
}

TEST_IMPL(select_deep_nesting)
{
    enum { DEPTH = 10000 };
    size_t open_len, close_len;
    char *opens = repeat("<html><body>", "<div>", DEPTH, "<span class=t>deep <b>end</b></span>",
                         &open_len);
    char *closes = repeat("", "</div>", DEPTH, "</body></html>", &close_len);
    char *doc = malloc(open_len + close_len + 1);
    ASSERT_NOT_NULL(doc);
    memcpy(doc, opens, open_len);
    memcpy(doc + open_len, closes, close_len + 1);
    free(opens);
    free(closes);

    page_t pg;
    const GumboNode *m[4];
    page_open(&pg, doc, open_len + close_len);

    hv_selector_t *s = compile_ok("body > div div > span.t");
    ASSERT_EQ(1, hv_selector_match(s, pg.out->document, m, 4, 0));
    char *v = hv_selector_value(s, m[0], doc, open_len + close_len);
    ASSERT_STR_EQ("deep end", v);
    free(v);
    hv_selector_free(s);

    /* No match: every div walks all the way up for the missing ancestor. */
    s = compile_ok("article div");
    ASSERT_EQ(0, hv_selector_match(s, pg.out->document, m, 4, 0));
    hv_selector_free(s);

    s = compile_ok("div:first-child");
    ASSERT_EQ(DEPTH, hv_selector_match(s, pg.out->document, NULL, 0, 0));
    hv_selector_free(s);

    /* Text and outer HTML of the outermost div walk all 10,000 levels. */
    s = compile_ok("body > div");
    ASSERT_EQ(1, hv_selector_match(s, pg.out->document, m, 4, 0));
    v = hv_selector_value(s, m[0], doc, open_len + close_len);
    ASSERT_STR_EQ("deep end", v);
    free(v);
    hv_selector_free(s);
    s = compile_ok("body > div ::html");
    ASSERT_EQ(1, hv_selector_match(s, pg.out->document, m, 4, 0));
    v = hv_selector_value(s, m[0], doc, open_len + close_len);
    static const char inner[] = "<span class=\"t\">deep <b>end</b></span>";
    ASSERT_EQ(DEPTH * strlen("<div></div>") + strlen(inner), strlen(v));
    for (size_t i = 0; i < DEPTH; i++)
        ASSERT_MEM_EQ("<div>", v + 5 * i, 5);
    ASSERT_MEM_EQ(inner, v + 5 * DEPTH, strlen(inner));
    for (size_t i = 0; i < DEPTH; i++)
        ASSERT_MEM_EQ("</div>", v + 5 * DEPTH + strlen(inner) + 6 * i, 6);
    free(v);
    hv_selector_free(s);

    page_close(&pg);
    free(doc);
}

TEST_IMPL(select_large_page)
{
    enum { ITEMS = 50000 };
    size_t len;
    /* About 1 MiB: 50,000 list items of 21 bytes inside padding text. */
    char *doc = repeat("<html><body><ul id=list>", "<li class=m><i>x</i>\n", ITEMS,
                       "</ul><p>tail</p></body></html>", &len);
    ASSERT_GE(len, 1000000);

    page_t pg;
    page_open(&pg, doc, len);
    const GumboNode **nodes = malloc(ITEMS * sizeof(*nodes));
    ASSERT_NOT_NULL(nodes);

    hv_selector_t *s = compile_ok("body ul#list > li.m");
    uint64_t t0 = hv_mono_ms();
    ASSERT_EQ(ITEMS, hv_selector_match(s, pg.out->document, nodes, ITEMS, 0));
    size_t total = 0;
    for (size_t i = 0; i < ITEMS; i++) {
        char *v = hv_selector_value(s, nodes[i], doc, len);
        total += strlen(v);
        free(v);
    }
    uint64_t t1 = hv_mono_ms();
    ASSERT_EQ(ITEMS, total);
    hv_selector_free(s);

    /* Position tests on 50,000 siblings stay linear. */
    s = compile_ok("li:nth-child(40000) > i, li:first-child i");
    ASSERT_EQ(2, hv_selector_match(s, pg.out->document, nodes, ITEMS, 0));
    ASSERT_EQ(0, nodes[0]->parent->index_within_parent);
    ASSERT_EQ(39999, nodes[1]->parent->index_within_parent);
    hv_selector_free(s);
    s = compile_ok("html li:nth-child(50000)");
    ASSERT_EQ(1, hv_selector_match(s, pg.out->document, nodes, ITEMS, 0));
    hv_selector_free(s);
    uint64_t t2 = hv_mono_ms();

    /* The outer HTML of the whole list, cut short, costs what it keeps, not the page. */
    s = compile_ok("ul ::html");
    ASSERT_EQ(1, hv_selector_match(s, pg.out->document, nodes, 1, 0));
    for (int i = 0; i < 2000; i++) {
        int cut = 0;
        char *v = hv_selector_value_max(s, nodes[0], NULL, 0, 24, &cut);
        ASSERT_STR_EQ("<ul id=\"list\"><li class=", v);
        ASSERT_EQ(1, cut);
        free(v);
    }
    hv_selector_free(s);
    uint64_t t3 = hv_mono_ms();

    printf("# select: 50000 matches + values in %" PRIu64 " ms, nth-child scans in %" PRIu64
           " ms, 2000 cut outer HTMLs in %" PRIu64 " ms\n", t1 - t0, t2 - t1, t3 - t2);
    ASSERT_LT(t1 - t0, 2000);
    ASSERT_LT(t2 - t1, 2000);
    ASSERT_LT(t3 - t2, 2000);

    free(nodes);
    page_close(&pg);
    free(doc);
}

/* The value of the first match of `selector` in `doc`, cut to `max` bytes. Static copy. */
static const char *value_max(const char *doc, size_t len, const char *selector, size_t max,
                             int *cut)
{
    static char buf[256];
    page_t pg;
    const GumboNode *node = NULL;
    hv_selector_t *s = compile_ok(selector);
    page_open(&pg, doc, len);
    ASSERT_EQ(1, hv_selector_match(s, pg.out->document, &node, 1, 1));
    *cut = -1;
    char *v = hv_selector_value_max(s, node, doc, len, max, cut);
    ASSERT_NOT_NULL(v);
    ASSERT(hv_utf8_valid(v, strlen(v)));
    ASSERT_LT(strlen(v), sizeof(buf));
    snprintf(buf, sizeof(buf), "%s", v);
    free(v);
    page_close(&pg);
    hv_selector_free(s);
    return buf;
}

#define ASSERT_VALUE_MAX(doc, selector, max, want, want_cut)                                   \
    do {                                                                                       \
        int cut_;                                                                              \
        ASSERT_STR_EQ(want, value_max(doc, sizeof(doc) - 1, selector, max, &cut_));            \
        ASSERT_EQ(want_cut, cut_);                                                             \
    } while (0)

TEST_IMPL(select_value_max_cuts_at_a_character_boundary)
{
    static const char text[] = "<p>  aaaa \n bbbb  </p>";
    ASSERT_VALUE_MAX(text, "p", 6, "aaaa b", 1);
    ASSERT_VALUE_MAX(text, "p", 9, "aaaa bbbb", 0); /* exactly the whole value */
    ASSERT_VALUE_MAX(text, "p", 8, "aaaa bbb", 1);
    ASSERT_VALUE_MAX(text, "p", 5, "aaaa ", 1);
    ASSERT_VALUE_MAX(text, "p", 0, "", 1);
    ASSERT_VALUE_MAX(text, "p", 1000, "aaaa bbbb", 0);

    /* Two-byte characters are never split. */
    static const char e[] = "<p title=\"\xC3\xA9\xC3\xA9\xC3\xA9\">\xC3\xA9\xC3\xA9\xC3\xA9</p>";
    ASSERT_VALUE_MAX(e, "p", 5, "\xC3\xA9\xC3\xA9", 1);
    ASSERT_VALUE_MAX(e, "p", 6, "\xC3\xA9\xC3\xA9\xC3\xA9", 0);
    ASSERT_VALUE_MAX(e, "p @title", 3, "\xC3\xA9", 1);
    ASSERT_VALUE_MAX(e, "p @title", 6, "\xC3\xA9\xC3\xA9\xC3\xA9", 0);
    ASSERT_VALUE_MAX(e, "p ::html", 14, "<p title=\"\xC3\xA9\xC3\xA9", 1);
    ASSERT_VALUE_MAX(e, "p ::html", 13, "<p title=\"\xC3\xA9", 1);
    ASSERT_VALUE_MAX(e, "p ::html", 11, "<p title=\"", 1);

    /* A three-byte character of the serialised text, whole or not at all. */
    static const char euro[] = "<p>\xE2\x82\xAC</p>";
    ASSERT_VALUE_MAX(euro, "p ::html", 5, "<p>", 1);
    ASSERT_VALUE_MAX(euro, "p ::html", 6, "<p>\xE2\x82\xAC", 1);
    ASSERT_VALUE_MAX(euro, "p ::html", 10, "<p>\xE2\x82\xAC</p>", 0);
    ASSERT_VALUE_MAX(euro, "p ::html", 9, "<p>\xE2\x82\xAC</p", 1);
}
