/*
 * prescan.h: the check every document passes before gumbo sees it.
 *
 * What it guarantees: gumbo never gets a document it would choke on. gumbo 0.10 costs time
 * quadratic in nesting depth (it searches its stack of open elements at most tags), its
 * destructor recurses once per level, and some malformed shapes make it abort the process on
 * an internal assertion. A parse runs on a threadpool worker inside the daemon, so any of
 * these would stall or end every batch in flight. The pre-scan reads the bytes once, models
 * enough of gumbo's tree builder to estimate the depth it would build, and refuses the
 * document when it is too deep, would cost gumbo far more than its depth suggests, or has one
 * of the shapes known to trip gumbo's assertions. Each refusal is a verdict of its own, with
 * the bound it met, so that records can say what was refused.
 *
 * The estimate errs on the deep side where it cannot tell, but it is not exact: the html
 * module also measures the tree gumbo built and refuses (and flattens before freeing) one
 * that still came out deeper than HV_PRESCAN_MAX_DEPTH plus a little slack.
 *
 * Who calls it: the html module, before each gumbo parse (hv_html_analyse(),
 * hv_html_analyse_rules() and the title fast path, which checks the whole page although it
 * parses only a prefix). The charset module's <meta> prescan reads attributes with the same
 * walk (hv_prescan_read_attr()). Pure functions: they read only their arguments, allocate
 * nothing and are safe on any thread.
 */
#ifndef HARVESTD_PRESCAN_H
#define HARVESTD_PRESCAN_H

#include <stddef.h>

/**
 * Deepest element nesting handed to gumbo (about 30 ms of parse time for one chain this
 * deep; gumbo's time also grows with the depth at every tag, which the pre-scan caps). Limits
 * up to this one are tracked element by element; deeper levels are only counted.
 */
#define HV_PRESCAN_MAX_DEPTH 4096

/**
 * Most attributes of one tag handed to gumbo, and of all html (and all body) start tags
 * together, which gumbo merges into one element. gumbo's tokenizer compares each attribute of
 * a tag with those before it, and its tree builder each attribute of a repeated html or body
 * tag with those already merged, so a tag's cost grows with the square of its attributes.
 * Measured on gumbo 0.10 (2 MiB pages made of tags with n distinct attributes each, time per
 * attribute): flat at about 200 ns up to n = 64, 370 ns at 128, 560 ns at 256, 1.1 us at 512,
 * 2 us at 1024; one tag of 10,000 attributes takes 0.3 s and one of 50,000 six seconds. At
 * 256 a page of nothing but such tags costs about three times an ordinary page of its size;
 * real pages stay far below (a few attributes per tag, rarely a few dozen).
 */
#define HV_PRESCAN_MAX_ATTRS 256

/**
 * What the pre-scan decided about a document: HV_PRESCAN_OK, or the bound it refused the
 * document for. Records name each one (parse.c maps them to error_type and error).
 */
typedef enum {
    HV_PRESCAN_OK = 0,
    HV_PRESCAN_TOO_DEEP,            /* elements nested deeper than the limit */
    HV_PRESCAN_DEPTH_SUM,           /* the depths at every tag add up to more than 2^27 */
    HV_PRESCAN_FORMATTING_OPEN,     /* more than 256 formatting elements left open in one
                                       scope (with the markers below, one list of 256) */
    HV_PRESCAN_FORMATTING_REOPENED, /* formatting elements reopened beyond len/2 + 4096 */
    HV_PRESCAN_CELLS_NESTED,        /* td, th or caption nested more than 256 deep */
    HV_PRESCAN_TEMPLATES_NESTED,    /* template nested more than 256 deep */
    HV_PRESCAN_OBJECTS_NESTED,      /* applet, object or marquee nested more than 256 deep */
    HV_PRESCAN_ELEMENTS,            /* more than 2^32 - 1 elements, clones included */
    HV_PRESCAN_KNOWN_CRASH,         /* a shape that makes gumbo 0.10 abort on an assertion */
    HV_PRESCAN_ATTRIBUTES,          /* a tag with more than HV_PRESCAN_MAX_ATTRS attributes */
    HV_PRESCAN_MERGED_ATTRIBUTES,   /* html (or body) start tags with more in all */
    HV_PRESCAN_ATTRIBUTE_COPIES,    /* attributes copied onto reopened elements beyond
                                       len/2 + 4096 */
    HV_PRESCAN_ATTRIBUTE_WORK,      /* gumbo would compare attributes more than 2^26 times */
} hv_prescan_verdict_t;

typedef struct {
    hv_prescan_verdict_t verdict;
    size_t depth; /* the estimated depth; limit + 1 when the document is refused */
    size_t bound; /* the bound the refused document exceeded (the depth limit, 256, the
                     reopening allowance...); 0 for HV_PRESCAN_OK and HV_PRESCAN_KNOWN_CRASH */
} hv_prescan_result_t;

/**
 * Check [s, s+len) before gumbo parses it. Estimates the element nesting depth without
 * building a tree: counts start tags of elements that can contain others, minus end tags;
 * skips comments, doctype, raw-text and RCDATA elements (script, style, textarea, title, ...),
 * void elements, self-closed foreign tags and elements whose end tag is optional and implied
 * by a sibling (p, li, td, option, ...). The implied closing and reopening follow gumbo 0.10's
 * tree builder (misnested formatting elements, tables, templates, select, SVG/MathML). html,
 * head, body and leaves are not counted, so gumbo's tree is typically 2-3 levels deeper than
 * the estimate.
 *
 * Refuses (out->verdict, out->bound; out->depth = limit + 1) the first time one of these
 * holds, and stops there:
 *   - the depth exceeds `limit` (HV_PRESCAN_TOO_DEEP, bound `limit`);
 *   - documents that would cost gumbo far more than their depth suggests: the list of active
 *     formatting elements (formatting elements left open, and a marker for each open td, th,
 *     caption, template, applet, object and marquee) needs more than 256 entries in all
 *     (HV_PRESCAN_FORMATTING_OPEN, _CELLS_NESTED, _TEMPLATES_NESTED or _OBJECTS_NESTED, by
 *     the entry that did not fit; bound 256), formatting elements are reopened more than
 *     len/2 + 4096 times (HV_PRESCAN_FORMATTING_REOPENED, bound len/2 + 4096), the depths at
 *     every tag add up to more than 2^27 (HV_PRESCAN_DEPTH_SUM), or the elements and their
 *     clones outnumber 2^32 - 1 (HV_PRESCAN_ELEMENTS);
 *   - an SVG/MathML element named like an HTML select, table part, template, frameset, html,
 *     head or body, or a CDATA section in an SVG/MathML integration point directly in a
 *     table: those make gumbo 0.10 abort on an assertion (HV_PRESCAN_KNOWN_CRASH);
 *   - attributes gumbo would spend far more on than their bytes suggest: a tag (start or
 *     end, even one the end of the input cuts short) with more than HV_PRESCAN_MAX_ATTRS
 *     attributes as written, duplicates included (HV_PRESCAN_ATTRIBUTES); html start tags, or
 *     body start tags, with more than that in all (HV_PRESCAN_MERGED_ATTRIBUTES; repeats
 *     count as new names); more attributes copied onto reopened and adopted formatting
 *     elements than len/2 + 4096 (HV_PRESCAN_ATTRIBUTE_COPIES: each reopening copies them
 *     all); or more than 2^26 pairwise comparisons of attributes: those of a tag among
 *     themselves, of a repeated html or body tag with those merged before, and of a new
 *     formatting element with each entry of its tag on the list of active formatting
 *     elements (HV_PRESCAN_ATTRIBUTE_WORK; about a fifth of a second of gumbo's time).
 * O(len) with a bounded factor, no allocation, about 70 KiB of stack.
 */
void hv_prescan_check(const char *s, size_t len, size_t limit, hv_prescan_result_t *out);

/** hv_prescan_check()'s depth alone: the estimate, or limit + 1 for a refused document. */
size_t hv_prescan_depth(const char *s, size_t len, size_t limit);

/** One attribute of a tag, as offsets into the bytes read. */
typedef struct {
    size_t name;      /* the name as written, not lower-cased */
    size_t name_len;  /* at least 1 */
    size_t value;     /* the value without its quotes, character references not decoded */
    size_t value_len; /* 0 for an attribute without a value */
} hv_prescan_attr_t;

/**
 * Read the next attribute of a tag, from *pos (just after the tag name, or where the previous
 * call left it) within [s, s+len). This is the walk of the HTML tokenizer's attribute states,
 * which the HTML standard's "get an attribute" (the encoding prescan) follows too: skip
 * whitespace and '/'; a name runs to whitespace, '/', '>' or '=' (its first byte may be
 * anything, even '=' or a quote); an '=' (whitespace around it allowed) brings a value, quoted
 * with " or ' (and then free to hold '>'), or else running to whitespace or '>' ('/' belongs
 * to it).
 * Returns 1 with *a filled and *pos after the attribute; 0 when the tag ends, with *pos at
 * its '>' (the tag is self-closing, "/>", when this call moved *pos and the byte before that
 * '>' is '/'); -1 when the bytes run out first (the tokenizer drops such a tag), with *pos
 * unchanged. Every attribute is returned, later duplicates of a name too: the tokenizer keeps
 * the first.
 */
int hv_prescan_read_attr(const char *s, size_t len, size_t *pos, hv_prescan_attr_t *a);

#endif
