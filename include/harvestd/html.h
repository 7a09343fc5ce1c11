/*
 * html.h: what harvestd reads out of an HTML document. Pure functions that run on libuv
 * threadpool workers (see parse.h): they touch only their arguments.
 *
 * gumbo 0.10 costs time quadratic in nesting depth and its destructor recurses, so every
 * document goes through the pre-scan (prescan.h) and is refused above HV_HTML_MAX_DEPTH
 * levels before gumbo sees it. The pre-scan is an estimate; a tree that still comes out
 * deeper is refused after parsing and flattened before it is freed, so the destructor never
 * recurses deeply.
 */
#ifndef HARVESTD_HTML_H
#define HARVESTD_HTML_H

#include <stddef.h>

#include "harvestd/arena.h"
#include "harvestd/extract.h"
#include "harvestd/prescan.h"

/** Deepest element nesting we hand to gumbo: the pre-scan's bound. */
#define HV_HTML_MAX_DEPTH HV_PRESCAN_MAX_DEPTH

typedef struct {
    char *title;         /* malloc'd text of the first HTML <title>, whitespace collapsed and
                            trimmed; NULL if there is none or it is empty */
    size_t depth;        /* pre-scan estimate of the deepest nesting (see hv_html_analyse) */
    char *fields;        /* malloc'd JSON object of extracted fields (hv_html_analyse_rules) */
    hv_prescan_verdict_t refusal; /* why the document was refused (HV_PRESCAN_OK: it was
                                     not): the pre-scan's verdict, or HV_PRESCAN_TOO_DEEP
                                     for a tree that came out too deep */
    size_t bound;        /* the bound a refused document exceeded (hv_prescan_result_t) */
    size_t parsed;       /* bytes the pre-scan and gumbo read: all of them, or the title fast
                            path's prefix */
} hv_html_result_t;

/**
 * Analyse one document. [body, body+len) need not be valid UTF-8: invalid sequences are
 * replaced by U+FFFD before parsing. Returns 0 and fills `out` (title may be NULL, refusal
 * HV_PRESCAN_OK), or refuses the document (title NULL; out->refusal and out->bound say which
 * bound, out->depth the estimate) with:
 *   - HV_ENESTING when the pre-scan refuses it for its nesting (the verdicts not named
 *     below), or when the tree gumbo built turns out deeper than
 *     HV_HTML_MAX_DEPTH + 8 after all (HV_PRESCAN_TOO_DEEP; out->depth is then the measured
 *     depth, html being level 1);
 *   - HV_ETOOBIG when the pre-scan refuses it for its attributes (HV_PRESCAN_ATTRIBUTES,
 *     _MERGED_ATTRIBUTES, _ATTRIBUTE_COPIES, _ATTRIBUTE_WORK);
 *   - UV_EINVAL for a document of a shape known to crash gumbo (HV_PRESCAN_KNOWN_CRASH).
 * The caller frees the result with hv_html_result_free(); nothing else stays allocated, on
 * success or error.
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
 * URL (for @links). A refused document gets no fields. Fields that would exceed
 * HV_EXTRACT_FIELDS_MAX are none either: HV_ETOOBIG with out->refusal HV_PRESCAN_OK (the
 * title is still filled in).
 */
int hv_html_analyse_rules(const char *body, size_t len, const hv_ruleset_t *rules,
                          const char *base_url, hv_html_result_t *out);

/**
 * The title fast path: parse only the page's prefix up to the first "</title" end tag.
 * Returns 1 with `out` filled when that settles the title exactly as hv_html_analyse() would
 * (the first HTML <title> of the prefix was closed by an explicit end tag in it; the
 * pre-scan accepts the whole page), else 0 with nothing to free: parse the whole page.
 */
int hv_html_title_fast(const char *body, size_t len, hv_html_result_t *out);

#endif
