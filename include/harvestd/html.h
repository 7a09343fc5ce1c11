/*
 * html.h: what harvestd reads out of an HTML document. Pure functions that run on libuv
 * threadpool workers (see parse.h): they touch only their arguments.
 *
 * gumbo 0.10 costs time quadratic in nesting depth and its destructor recurses, so every
 * document is pre-scanned and refused above HV_HTML_MAX_DEPTH levels before gumbo sees it.
 * The pre-scan is an estimate; a tree that still comes out deeper is refused after parsing
 * and flattened before it is freed, so the destructor never recurses deeply.
 */
#ifndef HARVESTD_HTML_H
#define HARVESTD_HTML_H

#include <stddef.h>

#include "harvestd/arena.h"
#include "harvestd/extract.h"

/**
 * Deepest element nesting we hand to gumbo (about 30 ms of parse time for one chain this
 * deep; gumbo's time also grows with the depth at every tag, which the pre-scan caps).
 */
#define HV_HTML_MAX_DEPTH 4096

typedef struct {
    char *title;         /* malloc'd text of the first HTML <title>, whitespace collapsed and
                            trimmed; NULL if there is none or it is empty */
    size_t depth;        /* pre-scan estimate of the deepest nesting (see hv_html_analyse) */
    char *fields;        /* malloc'd JSON object of extracted fields (hv_html_analyse_rules) */
} hv_html_result_t;

/**
 * Estimate the element nesting depth of [s, s+len) without building a tree: count start tags
 * of elements that can contain others, minus end tags; skip comments, doctype, raw-text and
 * RCDATA elements (script, style, textarea, title, ...), void elements, self-closed foreign
 * tags and elements whose end tag is optional and implied by a sibling (p, li, td, option,
 * ...). The implied closing and reopening follow gumbo 0.10's tree builder (misnested
 * formatting elements, tables, templates, select, SVG/MathML). html, head, body and leaves
 * are not counted, so gumbo's tree is typically 2-3 levels deeper than the estimate.
 * Stops as soon as the depth exceeds `limit` and returns limit + 1; also returns limit + 1
 * (without exceeding it) for documents that would cost gumbo far more than their depth
 * suggests: more than 256 formatting elements left open in one scope, reopened formatting
 * elements beyond len/2 + 4096, or a sum of depths over all tags above 2^27; and for an
 * SVG/MathML element named like an HTML select, table part, template, frameset, html,
 * head or body, or a CDATA section in an SVG/MathML integration point directly in a table:
 * those make gumbo 0.10 abort on an assertion. O(len) with a bounded factor, no allocation,
 * about 70 KiB of stack.
 */
size_t hv_html_prescan_depth(const char *s, size_t len, size_t limit);

/**
 * Analyse one document. [body, body+len) need not be valid UTF-8: invalid sequences are
 * replaced by U+FFFD before parsing. Returns 0 and fills `out` (title may be NULL), or
 * HV_ENESTING (title NULL, out->depth set) if the pre-scan exceeds HV_HTML_MAX_DEPTH, or if
 * the tree gumbo built turns out deeper than HV_HTML_MAX_DEPTH + 8 after all (out->depth is
 * then the measured depth, html being level 1). The caller frees the result with
 * hv_html_result_free(); nothing else stays allocated, on success or error.
 */
int hv_html_analyse(const char *body, size_t len, hv_html_result_t *out);

void hv_html_result_free(hv_html_result_t *r);

/**
 * From now on, parses on the calling thread take gumbo's memory from `a` (NULL: from malloc,
 * the default), resetting it after each tree; the caller keeps `a` alive until it sets
 * another and frees it itself. For a threadpool worker analysing a group of pages.
 */
void hv_html_use_arena(hv_arena_t *a);

/**
 * hv_html_analyse() plus extraction: when `rules` is non-empty, out->fields receives the
 * rules' JSON object (malloc'd), evaluated over the same tree; `base_url` is the page's final
 * URL (for @links). A refused document (HV_ENESTING) gets no fields.
 */
int hv_html_analyse_rules(const char *body, size_t len, const hv_ruleset_t *rules,
                          const char *base_url, hv_html_result_t *out);

/**
 * The title fast path: parse only the page's prefix up to the first "</title" end tag.
 * Returns 1 with `out` filled when that settles the title exactly as hv_html_analyse() would
 * (the first HTML <title> of the prefix was closed by an explicit end tag in it; the
 * nesting bound holds for the whole page), else 0 with nothing to free: parse the whole page.
 */
int hv_html_title_fast(const char *body, size_t len, hv_html_result_t *out);

#endif
