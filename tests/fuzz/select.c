/*
 * select: the CSS selector compiler and matcher (select.h) over gumbo trees, and the rule
 * set that carries a selector into a record (extract.h).
 *
 * Input: "SELECTOR\0DOCUMENT". Without a NUL byte the whole input is the selector, matched
 * over a fixed page. The selector is compiled (a failure must name a position); the document
 * goes through what the html module does before gumbo (the nesting pre-scan, which refuses
 * what gumbo cannot take, and UTF-8 repair) and is parsed as the daemon parses it. Then:
 *   - matching counts the same with and without room for results and stops at `max`;
 *   - matches are elements below the scope, in document order, each once;
 *   - matching again inside a match finds only nodes below it;
 *   - every value is NUL-terminated UTF-8; ::html needs the source;
 *   - the same selector as a rule ("f[]" and "f") evaluates to a JSON object through
 *     hv_html_analyse_rules(), the daemon's path.
 */
#include <cjson/cJSON.h>
#include <gumbo.h>
#include <string.h>

#include <uv.h>

#include "fuzz.h"
#include "harvestd/common.h"
#include "harvestd/extract.h"
#include "harvestd/html.h"
#include "harvestd/prescan.h"
#include "harvestd/select.h"
#include "harvestd/utf8.h"

#define MAX_CHECKED 64

static const char fixed_doc[] =
    "<!doctype html><html><head><title>T</title></head><body>"
    "<div id=main class='box wide'>"
    "<p class=intro>One</p>"
    "<p class='intro x'>Two</p>"
    "<section><p class=deep>Three</p></section>"
    "<a href='https://example.com/a.html' lang=en-GB rel='nofollow noopener'>A</a>"
    "<a href='/b.pdf' data-id=7 rel=next>B</a>"
    "<table><tr><td>1<td>2</table><svg viewBox='0 0 1 1'><clipPath id=c><rect/></clipPath>"
    "<title>svg</title></svg><template><p>in a template</p></template>"
    "<ul><li>a<li>b<li>c</ul><![CDATA[x]]><!-- comment -->&amp;&nbsp;"
    "</div>"
    "<p id=last>Four</p>"
    "</body></html>";

/* Depth of `n` below the document (the document is 0). */
static size_t depth_of(const GumboNode *n)
{
    size_t d = 0;
    for (; n->parent != NULL; n = n->parent)
        d++;
    return d;
}

static int is_below(const GumboNode *n, const GumboNode *scope)
{
    for (n = n->parent; n != NULL; n = n->parent)
        if (n == scope)
            return 1;
    return 0;
}

/* Whether `a` comes strictly before `b` in document order (pre-order). */
static int before(const GumboNode *a, const GumboNode *b)
{
    if (a == b)
        return 0;
    size_t da = depth_of(a), db = depth_of(b);
    const GumboNode *x = a, *y = b;
    /* An ancestor comes before its descendants. */
    while (db > da) {
        y = y->parent;
        db--;
    }
    if (y == a)
        return 1;
    while (da > db) {
        x = x->parent;
        da--;
    }
    if (x == b)
        return 0;
    while (x->parent != y->parent) {
        x = x->parent;
        y = y->parent;
    }
    return x->index_within_parent < y->index_within_parent;
}

static void check_matches(const hv_selector_t *s, const GumboNode *scope, const char *src,
                          size_t len, int nested)
{
    const GumboNode *out[MAX_CHECKED];
    size_t total = hv_selector_match(s, scope, NULL, 0, 0);
    size_t n = hv_selector_match(s, scope, out, MAX_CHECKED, 0);
    FUZZ_CHECK(n == total, "%zu matches with room, %zu without", n, total);
    if (total > 0) {
        size_t one = hv_selector_match(s, scope, out, 1, 1);
        FUZZ_CHECK(one == 1, "max 1 gave %zu", one);
        size_t capped = hv_selector_match(s, scope, out, MAX_CHECKED, 3);
        FUZZ_CHECK(capped == HV_MIN(total, (size_t)3), "max 3 of %zu gave %zu", total, capped);
        n = hv_selector_match(s, scope, out, MAX_CHECKED, 0);
    }
    size_t kept = HV_MIN(n, (size_t)MAX_CHECKED);
    for (size_t i = 0; i < kept; i++) {
        const GumboNode *m = out[i];
        FUZZ_CHECK(m->type == GUMBO_NODE_ELEMENT || m->type == GUMBO_NODE_TEMPLATE,
                   "match %zu is node type %d", i, (int)m->type);
        FUZZ_CHECK(is_below(m, scope), "match %zu is not below the scope", i);
        if (i > 0)
            FUZZ_CHECK(before(out[i - 1], m), "matches %zu and %zu out of document order", i - 1,
                       i);
        char *v = hv_selector_value(s, m, src, len);
        if (v != NULL) {
            FUZZ_CHECK(hv_utf8_valid(v, strlen(v)), "value of match %zu is not UTF-8", i);
        } else {
            FUZZ_CHECK(hv_selector_take(s) == HV_TAKE_ATTR, "no value for a text/html take");
        }
        /* Values come from the tree alone (::html is serialised, not sliced): the source
         * bytes change nothing. */
        char *w = hv_selector_value(s, m, NULL, 0);
        FUZZ_CHECK((v == NULL) == (w == NULL) && (v == NULL || strcmp(v, w) == 0),
                   "value of match %zu depends on the source bytes", i);
        free(v);
        free(w);
    }
    /* Matching within the first few matches stays inside them. */
    for (size_t i = 0; !nested && i < HV_MIN(kept, (size_t)4); i++)
        check_matches(s, out[i], src, len, 1);
}

static void check_rules(const char *selector, const char *doc, size_t len)
{
    static const char *const keys[] = {"f", "f[]"};
    for (size_t k = 0; k < HV_ARRAY_SIZE(keys); k++) {
        char err[512];
        hv_ruleset_t *rs = hv_ruleset_new("fuzz");
        int rc = hv_ruleset_add(rs, keys[k], selector, err, sizeof(err));
        FUZZ_CHECK(rc == 0, "rule %s = \"%s\" refused: %s", keys[k], selector, err);
        FUZZ_CHECK(hv_ruleset_finish(rs, err, sizeof(err)) == 0, "finish: %s", err);
        hv_html_result_t r;
        rc = hv_html_analyse_rules(doc, len, rs, "https://example.com/dir/p.html", &r);
        if (rc == 0) {
            FUZZ_CHECK(r.fields != NULL, "no fields");
            FUZZ_CHECK(hv_utf8_valid(r.fields, strlen(r.fields)), "fields not UTF-8");
            cJSON *j = cJSON_Parse(r.fields);
            FUZZ_CHECK(j != NULL && cJSON_IsObject(j), "fields not an object: %s", r.fields);
            cJSON_Delete(j);
        } else {
            FUZZ_CHECK((rc == HV_ENESTING || rc == HV_ETOOBIG || rc == UV_EINVAL) &&
                           r.fields == NULL,
                       "analyse: %d", rc);
        }
        hv_html_result_free(&r);
        hv_ruleset_free(rs);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, '\0', size);
    size_t sel_len = nul != NULL ? (size_t)(nul - data) : size;
    char *selector = fuzz_strndup(data, sel_len);
    char *doc;
    size_t doc_len;
    if (nul != NULL) {
        doc_len = size - sel_len - 1;
        doc = fuzz_strndup(nul + 1, doc_len);
    } else {
        doc_len = sizeof(fixed_doc) - 1;
        doc = fuzz_strndup(fixed_doc, doc_len);
    }

    char err[256], small[12];
    memset(err, 'x', sizeof(err));
    hv_selector_t *s = hv_selector_compile(selector, err, sizeof(err));
    /* A short error buffer and none at all must be just as safe. */
    hv_selector_t *s2 = hv_selector_compile(selector, small, sizeof(small));
    FUZZ_CHECK((s == NULL) == (s2 == NULL), "compiles with one error buffer, not another");
    if (s2 != NULL)
        FUZZ_CHECK(hv_selector_take(s2) == hv_selector_take(s), "take differs");
    hv_selector_free(s2);
    s2 = hv_selector_compile(selector, NULL, 0);
    FUZZ_CHECK((s == NULL) == (s2 == NULL), "compiles without an error buffer, not with one");
    hv_selector_free(s2);
    if (s == NULL) {
        FUZZ_CHECK(memchr(err, '\0', sizeof(err)) != NULL, "error not terminated");
        FUZZ_CHECK(strncmp(err, "position ", 9) == 0, "error without a position: %s", err);
        size_t pos = strtoul(err + 9, NULL, 10);
        FUZZ_CHECK(pos >= 1 && pos <= sel_len + 1, "position %zu in %zu bytes", pos, sel_len);
        FUZZ_CHECK(memchr(small, '\0', sizeof(small)) != NULL, "short error not terminated");
        goto out;
    }
    FUZZ_CHECK((hv_selector_take(s) == HV_TAKE_ATTR) == (hv_selector_attr(s) != NULL),
               "attribute name and take disagree");
    if (hv_selector_attr(s) != NULL)
        for (const char *p = hv_selector_attr(s); *p != '\0'; p++)
            FUZZ_CHECK(!(*p >= 'A' && *p <= 'Z'), "attribute not lower-cased");

    /* What the html module does before gumbo sees a page. */
    if (hv_prescan_depth(doc, doc_len, HV_PRESCAN_MAX_DEPTH) <= HV_PRESCAN_MAX_DEPTH) {
        char *clean = NULL;
        const char *text = doc;
        size_t text_len = doc_len;
        if (!hv_utf8_valid(doc, doc_len)) {
            clean = hv_utf8_sanitize(doc, doc_len, &text_len);
            text = clean;
        }
        GumboOptions opts = kGumboDefaultOptions;
        opts.max_errors = 0;
        GumboOutput *g = gumbo_parse_with_options(&opts, text, text_len);
        check_matches(s, g->document, text, text_len, 0);
        /* Beyond the page's bytes nothing is read: a source cut short is clamped. */
        const GumboNode *first = NULL;
        if (hv_selector_match(s, g->document, &first, 1, 1) == 1) {
            free(hv_selector_value(s, first, text, text_len / 2));
            free(hv_selector_value(s, first, text, 0));
        }
        gumbo_destroy_output(&opts, g);
        free(clean);
    }
    check_rules(selector, doc, doc_len);
out:
    hv_selector_free(s);
    free(selector);
    free(doc);
    return 0;
}
