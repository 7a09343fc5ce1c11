/*
 * html_fast.c: the title fast path.
 *
 * Most runs want only the title, which sits near the top of a page. Parse only the prefix
 * that ends with the first "</title" end tag and accept the result only when the first HTML
 * <title> of that prefix sits in <head> and was closed by an explicit end tag inside it;
 * anything else (the end tag was inside a comment or a script, there is no title before it,
 * an SVG title, a title in the body...) falls back to the whole page.
 *
 * The pre-scan checks the prefix, which is exactly what gumbo parses here. That keeps the
 * guarantee of the full path: gumbo never sees bytes the pre-scan did not judge as gumbo will
 * read them. The pre-scan runs gumbo's tokenizer and tree-builder rules, which only ever look
 * at what came before (a prefix is a document that ends early, and both end a tag cut short
 * or an open comment the same way), so its verdict on the prefix is its verdict on what gumbo
 * builds from the prefix; what lies after the cut is never parsed and cannot make gumbo slow,
 * deep or crash. A page whose body is refused (nested 10,000 deep, say) therefore has its
 * title settled from the head in a title-only run, and is still refused wherever its whole
 * tree is parsed (rules, or a title the prefix does not settle).
 */
#include <gumbo.h>
#include <stdlib.h>
#include <string.h>

#include "harvestd/common.h"
#include "harvestd/html.h"
#include "harvestd/prescan.h"
#include "harvestd/select.h"
#include "harvestd/utf8.h"
#include "html_int.h"

/* Offset just past the '>' of the first "</title" end tag, or 0 if there is none. */
static size_t title_end_cut(const char *s, size_t len)
{
    static const char tag[] = "/title";
    if (s == NULL || len == 0)
        return 0;
    const char *p = s, *end = s + len;
    while ((p = memchr(p, '<', (size_t)(end - p))) != NULL) {
        p++;
        if ((size_t)(end - p) < sizeof(tag))
            return 0;
        if (hv_ascii_case_prefix(p, (size_t)(end - p), tag)) {
            char after = p[sizeof(tag) - 1];
            if (after == '>' || after == '/' || hv_ascii_is_space((unsigned char)after)) {
                const char *gt = memchr(p, '>', (size_t)(end - p));
                return gt != NULL ? (size_t)(gt - s) + 1 : 0;
            }
        }
    }
    return 0;
}

/* The first <title> in the HTML namespace, in document order, walked without recursion. */
static const GumboNode *first_title(const GumboNode *root)
{
    const GumboNode *n = root;
    while (n != NULL) {
        /* Template contents are not part of the document (the DOM keeps them in a separate
         * fragment), so a title inside a template is not the page's title. */
        if (n->type == GUMBO_NODE_ELEMENT) {
            const GumboElement *el = &n->v.element;
            if (el->tag == GUMBO_TAG_TITLE && el->tag_namespace == GUMBO_NAMESPACE_HTML)
                return n;
            if (el->children.length > 0) {
                n = el->children.data[0];
                continue;
            }
        } else if (n->type == GUMBO_NODE_DOCUMENT && n->v.document.children.length > 0) {
            n = n->v.document.children.data[0];
            continue;
        }
        /* next sibling, climbing up as needed */
        while (n != NULL && n != root) {
            const GumboNode *parent = n->parent;
            const GumboVector *kids = parent == NULL ? NULL
                                      : parent->type == GUMBO_NODE_DOCUMENT
                                          ? &parent->v.document.children
                                          : &parent->v.element.children;
            if (kids != NULL && n->index_within_parent + 1 < kids->length) {
                n = kids->data[n->index_within_parent + 1];
                break;
            }
            n = parent;
        }
        if (n == root)
            return NULL;
    }
    return NULL;
}

int hv_html_title_fast(const char *body, size_t len, hv_html_result_t *out)
{
    char *fixed = NULL, *protected = NULL;
    GumboOutput *g = NULL;
    int accepted = 0;

    memset(out, 0, sizeof(*out));
    size_t cut = title_end_cut(body, len);
    if (cut == 0)
        return 0;
    /* The bytes gumbo will parse, and no more (see the top of this file). */
    hv_prescan_result_t scan;
    hv_prescan_check(body, cut, HV_HTML_MAX_DEPTH, &scan);
    if (scan.verdict != HV_PRESCAN_OK)
        return 0;
    const char *text = body;
    size_t tlen = cut;
    if (!hv_utf8_valid(body, cut)) {
        /* The cut follows an ASCII '>', so repairing the prefix alone gives the same bytes as
         * repairing the whole page. */
        fixed = hv_utf8_sanitize(body, cut, &tlen);
        text = fixed;
    }
    /* As the full parse does; the cut follows a '>', so this is a prefix of its text too. */
    if ((protected = hv_selector_protect_controls(text, tlen, &tlen)) != NULL)
        text = protected;
    GumboOptions opts;
    hv_html__gumbo_options(&opts);
    g = gumbo_parse_with_options(&opts, text, tlen);
    /* Like the full parse, keep nothing from a tree that came out too deep. */
    const GumboNode *t = hv_html__too_deep(&opts, g) == 0 ? first_title(g->document) : NULL;
    /* Only a title inside <head> is settled by the prefix: later markup can neither move it
     * nor put another title before it in tree order (a title in the body can be displaced by
     * a later <frameset>, or preceded by one foster-parented out of a table). */
    if (t != NULL && t->v.element.original_end_tag.length > 0 && t->parent != NULL &&
        t->parent->type == GUMBO_NODE_ELEMENT && t->parent->v.element.tag == GUMBO_TAG_HEAD) {
        out->title = hv_selector_text(t); /* as the full parse reads it */
        out->depth = scan.depth;
        out->parsed = cut;
        accepted = 1;
    }
    hv_html__gumbo_destroy(&opts, g);
    free(protected);
    free(fixed);
    return accepted;
}
