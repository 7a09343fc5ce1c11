/*
 * robots.h: robots.txt (RFC 9309) parsing and matching. Pure functions: no I/O, no globals.
 *
 * A robots.txt body is compiled once per host into the rules of the group that applies to
 * our product token (the User-agent group whose name matches it case-insensitively, several
 * such groups merged; else the "*" group, several merged; else no rules). A group that names
 * us applies even if it holds no rules. Matching follows RFC 9309: the longest matching Allow
 * or Disallow pattern wins (length in octets of the normalised pattern, '*' and '$'
 * included), Allow wins a tie, "*" matches any sequence of characters and a trailing "$"
 * anchors the end; an empty Disallow allows everything. /robots.txt itself (with any query)
 * is always allowed.
 *
 * Parsing: records are "key: value" with case-insensitive keys and optional whitespace;
 * '#' starts a comment; lines end in CR, LF or CRLF; a leading UTF-8 BOM is skipped. The
 * misspellings "useragent", "user agent", "dissallow", "dissalow" and "disalow" are
 * accepted. Rules before the first User-agent line, values that start with neither '/' nor
 * '*', and unknown keys (Sitemap included) are ignored.
 *
 * Limits, none of which can allow what the file disallows: a Disallow pattern longer than
 * 2,048 octets after normalisation is cut to its first 2,048 (never inside an escape, without
 * its '$', and keeping the length it was written with for the longest match), so it
 * disallows more than written, never less; a longer Allow is ignored. Past 10,000 rules in
 * the applicable groups, Allow rules are ignored and Disallow rules still kept. A target
 * longer than 64 KiB is disallowed when there are rules. Matching one rule is linear in the
 * pattern plus the target whatever the number of '*'.
 *
 * A compiled hv_robots_t is immutable: any number of threads may call hv_robots_allowed()
 * and the other getters on it at once. Freeing it must wait until they are done.
 */
#ifndef HARVESTD_ROBOTS_H
#define HARVESTD_ROBOTS_H

#include <stddef.h>
#include <stdint.h>

typedef struct hv_robots_s hv_robots_t;

/**
 * Compile `body` (len bytes, any bytes; at most the first 500 KiB are considered by the
 * caller) for `product` (our product token, e.g. "harvestd"; only the part before a '/' or
 * whitespace counts, and NULL or "" selects the "*" group). Never fails: unparseable lines
 * are skipped. `body` and `product` are not referenced after return. Free with
 * hv_robots_free().
 */
hv_robots_t *hv_robots_parse(const char *body, size_t len, const char *product);

/** A rule set that allows everything (4xx robots.txt, or obey_robots off). */
hv_robots_t *hv_robots_allow_all(void);

/** A rule set that disallows everything (5xx or unreachable robots.txt). */
hv_robots_t *hv_robots_disallow_all(void);

/**
 * Whether `target` (a request target: path plus optional "?query", as sent on the request
 * line) may be fetched: 1 if allowed, 0 if not. Percent-encodings are compared after
 * normalising hex digits to upper case, and unreserved characters that are percent-encoded
 * in either the rule or the target are decoded first, so "/%7Ejoe" and "/~joe" match, while
 * reserved ones stay encoded ("%2F" is not "/"). Bytes that may not appear raw in a URI
 * (controls, space, non-ASCII, '|' ...) are percent-encoded on both sides, and a '%' that
 * starts no valid escape stands for itself ("%25"). An empty target means "/".
 */
int hv_robots_allowed(const hv_robots_t *r, const char *target, size_t len);

/**
 * Crawl-delay of the applicable group in milliseconds (non-standard), or 0 if none. Integer
 * or decimal seconds ("10", "0.5") are accepted, anything else is ignored; merged groups
 * give the largest value, and the result is capped at one hour.
 */
uint64_t hv_robots_crawl_delay_ms(const hv_robots_t *r);

/** Number of rules kept (for logs). */
size_t hv_robots_rules(const hv_robots_t *r);

/** Free a rule set; NULL is accepted and ignored. */
void hv_robots_free(hv_robots_t *r);

#endif
