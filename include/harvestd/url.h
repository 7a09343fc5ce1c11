/*
 * url.h: absolute http(s) URLs: validation of input lines, normalisation, and resolution of
 * redirect targets (RFC 3986 via uriparser). Pure functions: safe on any thread.
 *
 * An hv_url_t owns its strings; hv_url_free() releases them. All strings are ASCII.
 */
#ifndef HARVESTD_URL_H
#define HARVESTD_URL_H

#include <stddef.h>
#include <stdint.h>

#include "harvestd/detail.h"

/** Longest input line / URL we accept, in bytes. */
#define HV_URL_MAX 8192

typedef enum { HV_SCHEME_HTTP = 0, HV_SCHEME_HTTPS = 1 } hv_scheme_t;

typedef struct {
    hv_scheme_t scheme;
    char *host;      /* lower-cased host name or IP literal, IPv6 without brackets */
    int host_is_ip;  /* IPv4 or IPv6 literal: no DNS lookup needed, no TLS SNI */
    int host_is_ipv6;
    uint16_t port;   /* explicit port, or 80/443 by scheme */
    char *authority; /* Host header value: host ("[v6]" bracketed), ":port" only if not default */
    char *target;    /* request target: path plus "?query", never empty ("/"), no fragment */
    char *href;      /* the whole normalised URL without fragment, as records report it */
} hv_url_t;

/**
 * Parse an absolute http/https URL (an input line, already trimmed). Non-ASCII bytes in the
 * path, query or fragment are percent-encoded first (IRIs work), as are the other bytes
 * uriparser refuses there ('"', '<', '>', '^', '`', '{', '|', '}', '[', ']') and a '%' that
 * starts no valid escape ("100%" becomes "100%25"); valid escapes are kept. '\' before the
 * query becomes '/', as browsers read http(s) URLs ("http:\\h\p" is "http://h/p"); after
 * it, '\' is encoded. The scheme and host are lower-cased, a default port (also an empty
 * one, "http://h:/") is dropped, an empty path becomes "/", dot segments are removed (path
 * escapes of unreserved characters are decoded, hex digits upper-cased), an empty query
 * "?" is kept and the fragment is dropped. The host keeps its original text: an IPv6
 * literal is not expanded. host_is_ip is set for dotted-quad IPv4 and for IPv6 literals.
 *
 * Returns 0 and fills `u`, or HV_EURL with *reason one of (roughly in the order checked; the
 * texts of HV_D_LINE_EXCEEDS_8_KIB, HV_D_INVALID_UTF8 ... HV_D_URL_TOO_LONG):
 *   "line_exceeds_8_kib"     len > HV_URL_MAX
 *   "invalid_utf8"           not well-formed UTF-8
 *   "control_character"      a byte below 0x20, or 0x7F
 *   "contains_space"
 *   "not_absolute"           no scheme ("example.com/x", "//example.com/x", "/x")
 *   "non_ascii_host"         non-ASCII bytes in the credentials or the port (a non-ASCII host
 *                            name is converted to its IDNA 2008 / UTS #46 ASCII form first)
 *   "malformed"              rejected by uriparser; also IPvFuture literals ("[v1.x]")
 *   "userinfo_not_supported" "user:pw@" present, even empty ("http://@h/"): credentials
 *                            would end up in records and logs, so such URLs are refused
 *   "empty_host"             "http:///x", "http://:80/", "http:x"
 *   "invalid_host"           a '%' in the host; a name IDNA refuses, a DNS label over 63
 *                            octets, a name over 253, an empty label; a link-local IPv6
 *                            literal (fe80::/10 needs a zone)
 *   "invalid_port"           0, above 65535
 *   "url_too_long"           the normalised URL (after encoding) exceeds HV_URL_MAX
 * or HV_ESCHEME (*reason "unsupported_scheme") for a scheme other than http/https, which
 * is checked before anything after the scheme ("ftp://x/{" is unsupported, not malformed).
 * *reason, when non-NULL, receives a static machine-readable string on error. On error `u`
 * is zeroed and holds nothing to free.
 */
int hv_url_parse(hv_url_t *u, const char *text, size_t len, const char **reason);

/** hv_url_parse() with the reason as a detail code (HV_D_MALFORMED...), for callers that act
 *  on it or put it in a record; `reason` may be NULL and is set only on error. */
int hv_url_parse_detail(hv_url_t *u, const char *text, size_t len, hv_detail_t *reason);

/**
 * Resolve a redirect target `ref` (a Location header value: absolute, scheme-relative,
 * absolute-path, relative, "?query" only, or "" for the same document) against `base` per
 * RFC 3986 section 5. As the WHATWG URL parser does, leading and trailing C0 controls and
 * spaces are stripped and tabs and newlines removed first. Then the same rewriting as in
 * hv_url_parse() applies, except that spaces, controls and invalid UTF-8 in the path and
 * query are percent-encoded rather than refused ("/a b" becomes "/a%20b"). A reference
 * with the base's scheme and no authority ("http:g") is relative, as in browsers (the
 * RFC's backward-compatible reading). A reference longer than HV_URL_MAX after cleaning is
 * refused with "url_too_long". Otherwise the same results and errors as hv_url_parse().
 */
int hv_url_resolve(hv_url_t *out, const hv_url_t *base, const char *ref, size_t len,
                   const char **reason);

/** Release the strings of `u` (safe on a zeroed struct). */
void hv_url_free(hv_url_t *u);

/** Percent-decode [p, end) into `out` (of `cap` bytes, NUL included): 0, or -1 for a '%'
 *  without two hex digits after it, a NUL byte, or a result that does not fit. */
int hv_url_percent_decode(const char *p, const char *end, char *out, size_t cap);

/** `url` as logs may show it: a password in its user information as "***" (the rest as
 *  written: "http://alice:***@proxy:3128"), a user information without ':' hidden whole
 *  ("X@host" becomes "***@host"). Works on any text, parsed or not. Returns `out`. */
const char *hv_url_mask_userinfo(const char *url, char *out, size_t cap);

/** The origin of `u`, "scheme://host:port" (an IPv6 host in brackets, so that the origin
 *  followed by a path parses as a URL), into `out`; returns `out`. The key of a host
 *  everywhere (scheduling, politeness, the block detector, the connection pool). */
const char *hv_url_origin(const hv_url_t *u, char *out, size_t cap);

#endif
