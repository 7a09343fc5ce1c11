/* html.c: the document analysis (gumbo): the title, the nesting check of the built tree and
 * extraction rules. Runs on threadpool workers. */
#include "harvestd/html.h"

#include <gumbo.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "harvestd/common.h"
#include "harvestd/prescan.h"
#include "harvestd/select.h"
#include "harvestd/utf8.h"
#include "html_int.h"

/* How much deeper than HV_HTML_MAX_DEPTH a parsed tree may be before it is refused. */
#define HV_HTML_TREE_SLACK 8

/* Children to walk into: templates only if asked (their contents are not part of the
 * document, so the title is never looked for there). */
static GumboVector *hv_html_kids(GumboNode *n, int templates)
{
    if (n->type == GUMBO_NODE_DOCUMENT)
        return &n->v.document.children;
    if (n->type == GUMBO_NODE_ELEMENT || (templates && n->type == GUMBO_NODE_TEMPLATE))
        return &n->v.element.children;
    return NULL;
}

/*
 * The node after `n` in document order below `root`, or NULL; *depth follows the level.
 * No recursion and no stack: the tree may be far deeper than the pre-scan thought, and
 * gumbo's parent pointers and indexes are enough to climb back.
 */
static GumboNode *hv_html_next(GumboNode *root, GumboNode *n, int templates, size_t *depth)
{
    GumboVector *kids = hv_html_kids(n, templates);
    if (kids != NULL && kids->length > 0) {
        (*depth)++;
        return kids->data[0];
    }
    while (n != root && n->parent != NULL) {
        GumboVector *sibs = hv_html_kids(n->parent, 1);
        if (sibs == NULL)
            return NULL;
        size_t at = n->index_within_parent;
        if (at >= sibs->length || sibs->data[at] != n) {
            /* Should not happen; find the node rather than trust a stale index. */
            for (at = 0; at < sibs->length && sibs->data[at] != n; at++)
                ;
        }
        if (at + 1 < sibs->length)
            return sibs->data[at + 1];
        n = n->parent;
        (*depth)--;
    }
    return NULL;
}

/* The first HTML <title> in document order (an SVG title does not count). */
static GumboNode *hv_html_find_title(GumboNode *root)
{
    size_t depth = 0;
    for (GumboNode *n = root; n != NULL; n = hv_html_next(root, n, 0, &depth)) {
        if (n->type == GUMBO_NODE_ELEMENT && n->v.element.tag == GUMBO_TAG_TITLE &&
            n->v.element.tag_namespace == GUMBO_NAMESPACE_HTML)
            return n;
    }
    return NULL;
}

/* Element nesting of the parsed tree, html being level 1. */
static size_t hv_html_tree_depth(GumboNode *root)
{
    size_t depth = 0, deepest = 0;
    for (GumboNode *n = root; n != NULL; n = hv_html_next(root, n, 1, &depth))
        if (depth > deepest)
            deepest = depth;
    return deepest;
}

/*
 * Make every node a child of the document, so that gumbo_destroy_output(), which recurses,
 * stays shallow on a tree the pre-scan underestimated. The document's new child array comes
 * from the parse's allocator, which gumbo_destroy_output() frees it with.
 */
static void hv_html_flatten(const GumboOptions *o, GumboNode *doc)
{
    size_t count = 0, depth = 0;
    for (GumboNode *n = hv_html_next(doc, doc, 1, &depth); n != NULL;
         n = hv_html_next(doc, n, 1, &depth))
        count++;
    GumboNode **all = o->allocator(o->userdata, HV_MAX(count, (size_t)1) * sizeof(*all));
    size_t i = 0;
    depth = 0;
    for (GumboNode *n = hv_html_next(doc, doc, 1, &depth); n != NULL;
         n = hv_html_next(doc, n, 1, &depth))
        all[i++] = n;
    for (i = 0; i < count; i++) {
        if (all[i]->type == GUMBO_NODE_ELEMENT || all[i]->type == GUMBO_NODE_TEMPLATE)
            all[i]->v.element.children.length = 0; /* the array itself is still freed */
        all[i]->parent = doc;
        all[i]->index_within_parent = i;
    }
    o->deallocator(o->userdata, doc->v.document.children.data);
    doc->v.document.children.data = (void **)all;
    doc->v.document.children.length = (unsigned int)count;
    doc->v.document.children.capacity = (unsigned int)count;
}

static __thread hv_arena_t *thread_arena;

void hv_html_use_arena(hv_arena_t *a)
{
    thread_arena = a;
}

void hv_html__gumbo_options(GumboOptions *o)
{
    *o = kGumboDefaultOptions;
    o->max_errors = 0;
    if (thread_arena != NULL) {
        o->allocator = hv_arena_alloc;
        o->deallocator = hv_arena_dealloc;
        o->userdata = thread_arena;
    }
}

void hv_html__gumbo_destroy(GumboOptions *o, GumboOutput *doc)
{
    gumbo_destroy_output(o, doc);
    if (o->allocator == hv_arena_alloc)
        hv_arena_reset(o->userdata);
}

/* What hv_html_analyse() returns for a document the pre-scan refused. */
static int hv_html_refusal_rc(hv_prescan_verdict_t v)
{
    switch (v) {
    case HV_PRESCAN_KNOWN_CRASH:
        return UV_EINVAL;
    case HV_PRESCAN_ATTRIBUTES:
    case HV_PRESCAN_MERGED_ATTRIBUTES:
    case HV_PRESCAN_ATTRIBUTE_COPIES:
    case HV_PRESCAN_ATTRIBUTE_WORK:
        return HV_ETOOBIG;
    default:
        return HV_ENESTING;
    }
}

int hv_html_analyse(const char *body, size_t len, hv_html_result_t *out)
{
    return hv_html_analyse_rules(body, len, NULL, NULL, out);
}

int hv_html_analyse_rules(const char *body, size_t len, const hv_ruleset_t *rules,
                          const char *base_url, hv_html_result_t *out)
{
    /* gumbo aborts the process when malloc fails: the options keep max_errors at 0. */
    GumboOptions opts;
    GumboOutput *doc = NULL;
    GumboNode *title = NULL;
    char *clean = NULL, *protected = NULL;
    const char *text = body;
    size_t text_len = len;
    size_t deepest = 0;
    hv_prescan_result_t scan;
    int rc = 0;

    hv_html__gumbo_options(&opts);
    if (body == NULL) {
        body = text = "";
        len = text_len = 0;
    }
    out->title = NULL;
    out->fields = NULL;
    hv_prescan_check(body, len, HV_HTML_MAX_DEPTH, &scan);
    out->depth = scan.depth;
    out->refusal = scan.verdict;
    out->bound = scan.bound;
    out->parsed = len;
    if (scan.verdict != HV_PRESCAN_OK) {
        rc = hv_html_refusal_rc(scan.verdict);
        goto out;
    }

    /* Most documents are valid UTF-8; only the others pay for a copy. */
    if (!hv_utf8_valid(body, len)) {
        clean = hv_utf8_sanitize(body, len, &text_len);
        text = clean;
    }
    /* gumbo would replace control characters with U+FFFD (see select.h). */
    if ((protected = hv_selector_protect_controls(text, text_len, &text_len)) != NULL)
        text = protected;

    doc = gumbo_parse_with_options(&opts, text, text_len);

    /* The pre-scan follows gumbo closely but not exactly. Measure what gumbo built, and
     * refuse (and flatten before freeing) a tree that came out deeper than allowed. The
     * slack covers html, body, leaves and the odd implied element the estimate skips. */
    if ((deepest = hv_html__too_deep(&opts, doc)) != 0) {
        out->depth = deepest;
        out->refusal = HV_PRESCAN_TOO_DEEP;
        out->bound = HV_HTML_MAX_DEPTH;
        rc = HV_ENESTING;
        goto out;
    }

    title = hv_html_find_title(doc->document);
    if (title != NULL)
        out->title = hv_selector_text(title); /* collapsed and trimmed, NULL if empty */
    if (!hv_ruleset_empty(rules))
        rc = hv_ruleset_eval(rules, doc->document, text, text_len, base_url, &out->fields);

out:
    if (doc != NULL)
        hv_html__gumbo_destroy(&opts, doc);
    free(protected);
    free(clean);
    return rc;
}

size_t hv_html__too_deep(const GumboOptions *o, GumboOutput *doc)
{
    size_t deepest = hv_html_tree_depth(doc->document);
    if (deepest <= HV_HTML_MAX_DEPTH + HV_HTML_TREE_SLACK)
        return 0;
    hv_html_flatten(o, doc->document);
    return deepest;
}

void hv_html_result_free(hv_html_result_t *r)
{
    if (r == NULL)
        return;
    free(r->title);
    r->title = NULL;
    free(r->fields);
    r->fields = NULL;
}
