/*
 * select.h: extraction rules: a practical subset of CSS selectors evaluated over a gumbo
 * tree, plus what to take from each match. Compilation happens once (config load, on the
 * loop); evaluation runs on parse workers and touches only its arguments (a compiled
 * selector is read-only there, so workers may share it).
 *
 * Selector grammar (a group separated by ','): compound selectors joined by descendant
 * (whitespace) and child ('>') combinators; a compound is an optional type selector (or
 * '*') followed by any of: .class, #id, [attr], [attr=value], [attr~=value], [attr^=value],
 * [attr$=value], [attr*=value] (values bare identifiers or "quoted"/'quoted', optionally
 * followed by the flag i or s), :first-child, :nth-child(n) (n a positive integer), :scope.
 * Type and attribute names match ASCII case-insensitively. Classes and ids match exactly;
 * attribute values too, except for the attributes the HTML standard lists as compared ASCII
 * case-insensitively on HTML elements (type, http-equiv, rel, lang, dir, align, charset,
 * method, media, target...: see nocase_attrs in select.c); the flag i makes any comparison
 * case-insensitive and s makes it exact (Selectors 4).
 *   - Identifiers are runs of ASCII letters, digits, '-', '_' and non-ASCII characters; they
 *     may start with a digit or '-' (ids such as "#123" occur on real pages). Escapes are not
 *     supported outside quotes. Inside quotes a backslash takes the next character literally
 *     (\" \' \\); escapes by code point (\41) are rejected.
 *   - Whitespace is allowed around '>', ',' and inside [ ] and :nth-child( ). Pseudo-class
 *     names are case-insensitive. Not supported: namespaces ("svg|rect", "[a|=b]"), nth-child
 *     formulas (2n+1, odd), other pseudo-classes.
 *   - [a^=""], [a$=""], [a*=""] and [a~=""] match nothing, as in CSS. Classes and [a~=v]
 *     split the attribute on ASCII whitespace.
 *   - Type selectors compare the tag name in every namespace (HTML, SVG, MathML): gumbo's
 *     name for tags it knows, the source spelling for the others (so "clippath" matches
 *     <clipPath>). :first-child and :nth-child count element siblings only.
 *   - Limits: 1024 bytes of text, 64 compound selectors in the whole group and 16 in one
 *     member, :nth-child(n) with n at most 1000000.
 *
 * What to take follows the selector: nothing (the text, whitespace runs collapsed to one
 * space and trimmed), "@attr" (the attribute's value) or "::html" (the outer HTML, serialised
 * from the tree as browsers' outerHTML):
 *     "h3 a"            text of the first match
 *     "h3 a @title"     attribute title of the first match
 *     "div.x ::html"    outer HTML of the first match (serialised from the tree)
 * The take part applies to the whole group and must end the text ("a@href" and "a ::HTML"
 * are accepted too; "a @href x" is not). A rule marked "all" returns every match as a list
 * instead of the first.
 *
 * Text is the concatenation of the text, whitespace and CDATA nodes below the match, in
 * document order (comments excluded, no separators added between elements), then collapsed
 * as above (ASCII whitespace only: U+00A0 stays).
 *
 * The outer HTML is serialised from the tree as browsers' outerHTML is (the HTML Standard's
 * "serialising HTML fragments": the element's start tag, its children, its end tag), so an
 * element the tree builder closed implicitly, re-created (misnested "<b>1<p>2</b>" gives two
 * b elements, "<b>1</b>" and "<b>2</b>") or inserted (tbody, the empty p of a stray </p>)
 * comes out as the tree has it, not as the source spelled it:
 *   - names in lower case (gumbo's for the tags it knows, the source spelling ASCII
 *     lower-cased for the others), SVG names and SVG/MathML attribute names in the camel case
 *     the tree builder gives them (clipPath, viewBox, definitionURL), namespaced attributes
 *     with their prefix (xlink:href, xml:lang, xmlns:xlink);
 *   - attributes in tree order as name="value", with & U+00A0 " written &amp; &nbsp; &quot;;
 *   - text with & U+00A0 < > written &amp; &nbsp; &lt; &gt;, except in style, script, xmp,
 *     iframe, noembed, noframes and plaintext (HTML elements), whose text is written as it is.
 *     noscript is parsed with scripting off, so its content is elements and escaped text;
 *   - comments as <!--data-->, CDATA sections as text, no end tag for void elements (area,
 *     base, br, col, embed, hr, img, input, link, meta, source, track, wbr and the legacy
 *     basefont, bgsound, frame, keygen, param), a template's content as its children.
 * NUL bytes never reach the tree: the parser drops them from text or makes them U+FFFD.
 *
 * Control characters: the HTML Standard keeps the C0 controls other than NUL in text and
 * attribute values (html5lib and browsers do; vim's help pages are full of ESC), but gumbo
 * 0.10's input decoder replaces U+0001..U+001F (all but TAB, LF, FF and CR) with U+FFFD. The
 * text handed to gumbo therefore goes through hv_selector_protect_controls(), which writes each
 * of them as a placeholder gumbo keeps, and everything read out of the tree maps them back:
 * the values here (text, attributes, names, outer HTML, and the attribute values selectors
 * compare), and the title (read with hv_selector_text()). The placeholders
 * are the private-use characters U+10FF01..U+10FF1F for the controls, and U+10FF00 as an
 * escape that makes the next character stand for itself: it is written before every
 * character of U+10FF00..U+10FF1F that the page itself has, and before every numeric
 * character reference that could decode to one ("&#x10FF1B;", or a number too large, which
 * gumbo lets wrap around), so what the page says never reads as a placeholder. In contexts
 * that do not decode references (script, comments), the escape stands before the '&' and
 * makes only that '&' stand for itself. The escape is a character like any other to the
 * tokenizer and the tree builder (never whitespace, never markup), as the controls are, so
 * protection changes no tree shape. A tree parsed without protection reads the same as long as
 * its text has none of U+10FF00..U+10FF1F.
 *
 * Scoped rules: a rule may have an item selector and fields relative to each item, giving a
 * list of objects: item "article.product_pod" with fields title = "h3 a @title" and
 * price = "p.price_color". Field selectors are relative to their item: every compound of
 * the chain must match inside the item (jQuery's find() and parsel behave the same way), so
 * "div p" under an item that itself sits in a div only finds p elements below a div inside
 * the item. :scope is the item itself: ":scope @href" takes the item's own attribute,
 * ":scope > td" its children only. In a selector of the page (no item), :scope is the root
 * element.
 *
 * Compile errors name the 1-based character position of the fault, e.g.
 * "position 7: expected ']'" for "a[href", "position 3: empty selector in group" for "a,,b".
 */
#ifndef HARVESTD_SELECT_H
#define HARVESTD_SELECT_H

#include <gumbo.h>
#include <stddef.h>

typedef struct hv_selector_s hv_selector_t;

typedef enum { HV_TAKE_TEXT, HV_TAKE_ATTR, HV_TAKE_HTML } hv_take_t;

/**
 * Compile "SELECTOR [@attr | ::html]". Returns the selector (free with hv_selector_free), or
 * NULL with a NUL-terminated message in `err` (truncated to `errcap`; `err` may be NULL) that
 * gives the 1-based character position of the fault ("position 7: expected ']'").
 */
hv_selector_t *hv_selector_compile(const char *text, char *err, size_t errcap);
void hv_selector_free(hv_selector_t *s);

hv_take_t hv_selector_take(const hv_selector_t *s);
/** The attribute name of "@attr", lower-cased, owned by `s`; NULL unless HV_TAKE_ATTR. */
const char *hv_selector_attr(const hv_selector_t *s);

/**
 * Matches of `s` among the descendants of `scope` (not `scope` itself), in document order,
 * each once even if several group members match, at most `max` (0: no limit). Combinators
 * only look at ancestors below `scope` (see "Scoped rules"); pass the document node to
 * search a whole page. Writes up to `cap` node pointers into `out` (may be NULL when `cap`
 * is 0) and returns the number of matches found (which may exceed cap). Iterative: no
 * recursion over the tree; the cost is about one test per element plus the ancestor walks
 * of descendant combinators.
 */
size_t hv_selector_match(const hv_selector_t *s, const GumboNode *scope, const GumboNode **out,
                         size_t cap, size_t max);

/**
 * The value `s` takes from `node`: malloc'd, NUL-terminated UTF-8 text (collapsed/trimmed
 * text, the attribute value with entities decoded, or the outer HTML serialised from the
 * tree as above); the caller frees it. NULL when the attribute is missing. Everything comes
 * from the tree: `source` and `source_len` (the bytes that were parsed) are not read and may
 * be NULL and 0. Iterative: the depth of the tree does not matter.
 */
char *hv_selector_value(const hv_selector_t *s, const GumboNode *node, const char *source,
                        size_t source_len);

/**
 * hv_selector_value() cut to at most `max` bytes, at a character boundary: a longer value is
 * cut back to the last whole character that fits, and *cut (when not NULL) is set to 1 (else
 * 0). The work is bounded by `max` as well: the text is collected, the attribute copied and
 * the outer HTML serialised into a buffer of at most `max` + 1 bytes, and no further (the walk
 * of a text still visits the elements on its way).
 */
char *hv_selector_value_max(const hv_selector_t *s, const GumboNode *node, const char *source,
                            size_t source_len, size_t max, int *cut);

/**
 * The text of `node` as a rule with nothing to take gives it (see above: text, whitespace and
 * CDATA below it, whitespace collapsed and trimmed, control characters restored), without a
 * limit: malloc'd, or NULL when that leaves nothing. The title is read with it.
 */
char *hv_selector_text(const GumboNode *node);

/**
 * The text [s, s+len) (valid UTF-8) made ready for gumbo, as described under "Control
 * characters" above: a malloc'd, NUL-terminated copy with its length in *out_len, or NULL
 * (nothing allocated, *out_len untouched) when the text needs no change, which is the case
 * for pages without control characters, without U+10FF00..U+10FF1F and without references to
 * them. Changes are local to the characters they replace, so protecting a prefix that ends at
 * an ASCII '>' gives a prefix of the protected whole.
 */
char *hv_selector_protect_controls(const char *s, size_t len, size_t *out_len);

/**
 * Map the placeholders in the `len` bytes at `s` back to what they stand for, in place
 * (the text only shrinks). Returns the new length; when it is shorter, s[new length] is set
 * to NUL. For text read from a tree parsed from protected input by other means than the
 * functions here, which restore what they return themselves.
 */
size_t hv_selector_restore_controls(char *s, size_t len);

#endif
