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
 * path, query or fragment are percent-encoded first (IRIs work); the scheme and host are
 * lower-cased, a default port is dropped, an empty path becomes "/", dot segments are
 * removed and the fragment is dropped.
 *
 * Returns 0 and fills `u`, or
 *   HV_EURL    (*reason e.g. "line_exceeds_8_kib", "invalid_utf8", "control_character",
 *               "contains_space", "not_absolute", "empty_host", "invalid_port", "malformed")
 *   HV_ESCHEME (*reason "unsupported_scheme") for a scheme other than http/https.
 * *reason, when non-NULL, receives a static machine-readable string on error. On error `u`
 * holds nothing to free.
 */
int hv_url_parse(hv_url_t *u, const char *text, size_t len, const char **reason);

/**
 * Resolve a redirect target `ref` (a Location header value: absolute, scheme-relative,
 * absolute-path or relative) against `base` per RFC 3986 section 5. Before parsing, bytes
 * that uriparser rejects (space, non-ASCII, '"', '<', '>', '\\', '^', '`', '{', '|', '}',
 * controls) are percent-encoded, as browsers do. Same results and errors as hv_url_parse().
 */
int hv_url_resolve(hv_url_t *out, const hv_url_t *base, const char *ref, size_t len,
                   const char **reason);

/** Release the strings of `u` (safe on a zeroed struct). */
void hv_url_free(hv_url_t *u);

#endif
