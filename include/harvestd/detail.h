/*
 * detail.h: failure details, the `error` of a failed record: one code per way a URL can fail
 * and one table of the texts that records print for them.
 *
 * Policy (retries, robots.txt) decides on the code; only output and logs use the text, so
 * rewording a text can never change what the daemon does. A detail is either fixed
 * ("connection_refused") or a family: constant text around one argument, written as a
 * "<placeholder>" in the table ("http_<status>", "more_than_<n>_redirects",
 * "<codec>_corrupt"). The layer that finds the failure supplies the argument already spelled
 * (a status, a duration from hv_detail_duration(), a size from hv_format_size(), a lower-case
 * error name), and hv_detail_format() puts the two together.
 *
 * This is a leaf module, like common: the layers that find failures (url, http, tls, conn)
 * report codes without knowing about records, and record.h builds on it.
 */
#ifndef HARVESTD_DETAIL_H
#define HARVESTD_DETAIL_H

#include <stddef.h>
#include <stdint.h>

/* Keep the table in detail.c in step; the unit tests check that every code has a text. */
typedef enum {
    HV_D_NONE = 0,

    /* input: a line that is not a URL we fetch (hv_url_parse_detail()) */
    HV_D_LINE_EXCEEDS_8_KIB,
    HV_D_INVALID_UTF8,
    HV_D_CONTROL_CHARACTER,
    HV_D_CONTAINS_SPACE,
    HV_D_NOT_ABSOLUTE,
    HV_D_NON_ASCII_HOST,
    HV_D_MALFORMED,
    HV_D_USERINFO_NOT_SUPPORTED,
    HV_D_EMPTY_HOST,
    HV_D_INVALID_HOST,
    HV_D_INVALID_PORT,
    HV_D_URL_TOO_LONG,
    HV_D_UNSUPPORTED_SCHEME,
    /* input: a stream entry that names no work we can do */
    HV_D_ENTRY_WITHOUT_URL,
    HV_D_UNKNOWN_RULES,
    HV_D_DELIVERED_TOO_OFTEN,     /* an entry whose processing kept killing daemons */

    /* name lookup */
    HV_D_NAME_NOT_RESOLVED,
    HV_D_DNS_TEMPORARY_FAILURE,
    HV_D_NO_ADDRESS_FOR_NAME,
    HV_D_DNS_ERROR,               /* dns_<error>: another getaddrinfo failure */
    HV_D_DNS_LOOKUP_EXCEEDED,     /* dns_lookup_exceeded_<duration> */

    /* connecting */
    HV_D_CONNECTION_REFUSED,
    HV_D_NETWORK_UNREACHABLE,
    HV_D_HOST_UNREACHABLE,
    HV_D_CONNECT_TIMED_OUT,
    HV_D_CONNECT_ERROR,           /* connect_<error> */
    HV_D_NO_CONNECTION_WITHIN,    /* no_connection_within_<duration> */
    HV_D_NO_TLS_HANDSHAKE_WITHIN, /* no_tls_handshake_within_<duration> */
    HV_D_HTTPS_NOT_SUPPORTED,

    /* the address guard refused every address of the host (guard.h) */
    HV_D_BLOCKED_UNSPECIFIED_ADDRESS,
    HV_D_BLOCKED_LOOPBACK_ADDRESS,
    HV_D_BLOCKED_PRIVATE_ADDRESS,
    HV_D_BLOCKED_SHARED_ADDRESS,
    HV_D_BLOCKED_LINK_LOCAL_ADDRESS,
    HV_D_BLOCKED_SPECIAL_PURPOSE_ADDRESS,
    HV_D_BLOCKED_BENCHMARKING_ADDRESS,
    HV_D_BLOCKED_MULTICAST_ADDRESS,
    HV_D_BLOCKED_RESERVED_ADDRESS,
    HV_D_BLOCKED_BROADCAST_ADDRESS,

    /* TLS */
    HV_D_CERTIFICATE_UNTRUSTED,
    HV_D_CERTIFICATE_EXPIRED,
    HV_D_CERTIFICATE_NOT_YET_VALID,
    HV_D_CERTIFICATE_HOSTNAME_MISMATCH,
    HV_D_CERTIFICATE_REVOKED,
    HV_D_CERTIFICATE_INVALID,
    HV_D_TLS_ALERT,               /* tls_alert_<description>: the peer's fatal alert */
    HV_D_TLS_ALERT_UNKNOWN,       /* an alert whose description could not be read */
    HV_D_TLS_CLOSED_DURING_HANDSHAKE,
    HV_D_TLS_RESET_DURING_HANDSHAKE,
    HV_D_TLS_PROTOCOL_VERSION,
    HV_D_TLS_NO_SHARED_CIPHER,
    HV_D_TLS_INVALID_RECORD,
    HV_D_TLS_WRITE_BLOCKED,
    HV_D_TLS_WRITE_FAILED,
    HV_D_TLS_ERROR,               /* tls_error_-0x<code>: another mbedtls error */
    HV_D_TLS_FAILED,              /* a TLS failure that left no detail */

    /* the exchange */
    HV_D_CONNECTION_RESET,
    HV_D_CONNECTION_ERROR,        /* connection_error_<error> */
    HV_D_CLOSED_BEFORE_RESPONSE,
    HV_D_CLOSED_IN_HEADERS,
    HV_D_CLOSED_MID_BODY,
    HV_D_REQUEST_EXCEEDED,        /* request_exceeded_<duration>: the whole-request deadline */
    HV_D_NO_DATA_FOR,             /* no_data_for_<duration>: the read timeout */

    /* the response */
    HV_D_HTTP_STATUS,             /* http_<status> */
    HV_D_TOO_MANY_REDIRECTS,      /* more_than_<n>_redirects */
    HV_D_REDIRECT_TO_UNSUPPORTED_SCHEME,
    HV_D_INVALID_REDIRECT_LOCATION,
    HV_D_UNEXPECTED_CONTENT_TYPE,
    HV_D_HEADERS_EXCEED,          /* headers_exceed_<size> */
    HV_D_RESPONSE_EXCEEDS,        /* response_exceeds_<size> */
    HV_D_CONTENT_TYPE_TOO_LONG,
    HV_D_LOCATION_TOO_LONG,
    HV_D_UNEXPECTED_PROTOCOL_SWITCH,
    HV_D_UNSUPPORTED_CONTENT_ENCODING,
    HV_D_BODY_ABORTED,            /* the owner stopped the body (it reports its own detail) */
    HV_D_DECODE_CORRUPT,          /* <codec>_corrupt */
    HV_D_DECODE_TRUNCATED,        /* <codec>_truncated */
    HV_D_DECODE_INIT_FAILED,      /* <codec>_init_failed */
    HV_D_DECODE_WINDOW_TOO_LARGE, /* <codec>_window_too_large: zstd's, over 8 MiB */
    HV_D_HTTP_PARSE,              /* llhttp's error name, lower case, without "HPE_" */
    /* HTTP/2 */
    HV_D_STREAM_RESET,            /* stream_reset_<code>: the server's RST_STREAM */
    HV_D_GOAWAY,                  /* goaway_<code>: the server's GOAWAY ended the stream */
    HV_D_H2_ERROR,                /* h2_<code>: the server's frames broke HTTP/2 */

    /* robots.txt */
    HV_D_DISALLOWED_BY_ROBOTS,
    HV_D_ROBOTS_UNAVAILABLE,      /* robots_txt_unavailable_<cause> */

    /* parsing */
    HV_D_NO_TITLE,
    HV_D_NESTING_EXCEEDS,         /* nesting_exceeds_<depth> */
    HV_D_PARSER_CRASHED,
    /* the pre-scan's other refusals (prescan.h), each with the bound it met */
    HV_D_DEPTH_SUM_EXCEEDS,       /* depth_sum_exceeds_<n>: the depths at every tag, added */
    HV_D_FORMATTING_OPEN_BEYOND,  /* formatting_elements_open_beyond_<n> */
    HV_D_FORMATTING_REOPENED_BEYOND, /* formatting_elements_reopened_beyond_<n> */
    HV_D_TABLE_CELLS_NESTED_BEYOND,  /* table_cells_nested_beyond_<n>: td, th, caption */
    HV_D_TEMPLATES_NESTED_BEYOND, /* templates_nested_beyond_<n> */
    HV_D_OBJECTS_NESTED_BEYOND,   /* objects_nested_beyond_<n>: applet, object, marquee */
    HV_D_ELEMENTS_EXCEED,         /* elements_exceed_<n>: elements and their clones */
    HV_D_KNOWN_TO_CRASH_PARSER,   /* a shape that makes gumbo 0.10 abort */
    HV_D_ATTRIBUTES_EXCEED,       /* attributes_exceed_<n>: one tag */
    HV_D_MERGED_ATTRIBUTES_EXCEED, /* merged_attributes_exceed_<n>: html or body tags */
    HV_D_ATTRIBUTE_COPIES_EXCEED, /* attribute_copies_exceed_<n>: onto reopened elements */
    HV_D_ATTRIBUTE_COMPARISONS_EXCEED, /* attribute_comparisons_exceed_<n> */
    /* what a page yields */
    HV_D_FIELDS_EXCEED,           /* fields_exceed_<size>: the extracted fields, printed */
    HV_D_RECORD_EXCEEDS,          /* record_exceeds_<size>: the whole record, printed */

    /* a proxy (proxy.h, cf_connect.h) */
    HV_D_PROXY_CONNECT_REFUSED,   /* the proxy's own address refused the connection */
    HV_D_PROXY_CONNECT_TIMED_OUT,
    HV_D_NO_PROXY_CONNECTION_WITHIN, /* no_proxy_connection_within_<duration>: waited under
                                        proxy_connections until the deadline */
    HV_D_PROXY_CONNECT_ERROR,     /* proxy_connect_error_<error> */
    HV_D_PROXY_NAME_NOT_RESOLVED, /* the proxy's own name */
    HV_D_PROXY_AUTH_REQUIRED,     /* proxy_auth_required_407 */
    HV_D_PROXY_HTTP_STATUS,       /* proxy_http_<status>: CONNECT refused */
    HV_D_PROXY_CLOSED,            /* closed before its reply was complete */
    HV_D_PROXY_BAD_REPLY,
    HV_D_PROXY_REPLY_TOO_LARGE,
    HV_D_SOCKS_NO_ACCEPTABLE_METHOD, /* the SOCKS5 proxy takes neither no auth nor ours */
    HV_D_SOCKS_AUTH_FAILED,
    HV_D_SOCKS_GENERAL_FAILURE,   /* the SOCKS5 replies (RFC 1928 6) ... */
    HV_D_SOCKS_NOT_ALLOWED,
    HV_D_SOCKS_NETWORK_UNREACHABLE,
    HV_D_SOCKS_HOST_UNREACHABLE,
    HV_D_SOCKS_CONNECTION_REFUSED,
    HV_D_SOCKS_TTL_EXPIRED,
    HV_D_SOCKS_COMMAND_NOT_SUPPORTED,
    HV_D_SOCKS_ADDRESS_TYPE_NOT_SUPPORTED,
    HV_D_SOCKS_BAD_REPLY,         /* ... and one that is none of them */

    /* the block detector (block.h): the sign that made the host's pages block pages */
    HV_D_BLOCK_SAME_BODY,         /* same_body_as_<n>_urls */
    HV_D_BLOCK_STATUS_BURST,      /* status_burst_<status> */
    HV_D_BLOCK_SIZE_COLLAPSE,
    HV_D_BLOCK_ONE_TITLE,
    HV_D_BLOCK_RATIO_TURN,

    HV_D__COUNT
} hv_detail_t;

/** Room for a family's argument, NUL included (llhttp's longest error name fits). */
#define HV_DETAIL_ARG_MAX 48
/** Room for any detail text, NUL included: the longest constant part plus an argument. */
#define HV_DETAIL_TEXT_MAX 96

/** A detail as the layer that found it keeps it: the code, and a family's argument. */
typedef struct {
    hv_detail_t code; /* HV_D_NONE: nothing failed */
    char arg[HV_DETAIL_ARG_MAX]; /* "" for fixed details */
} hv_fault_t;

/** The table entry of `d`: the text of a fixed detail, a family's text with its
 *  "<placeholder>"; "" for HV_D_NONE and values outside the enum. Never NULL. */
const char *hv_detail_str(hv_detail_t d);

/** 1 if `d` is a family, whose text takes an argument. */
int hv_detail_has_arg(hv_detail_t d);

/**
 * The text records print for `d`: the fixed text, or the family's text with `arg` (NULL: "")
 * in place of its placeholder; `arg` is ignored by fixed details. Writes at most `cap` bytes,
 * NUL included, and returns the length of the whole text, like snprintf().
 */
int hv_detail_format(char *out, size_t cap, hv_detail_t d, const char *arg);

/** Set `f` to `code` with argument `arg` (NULL: none), cut to HV_DETAIL_ARG_MAX - 1 bytes. */
void hv_fault_set(hv_fault_t *f, hv_detail_t code, const char *arg);

/** hv_fault_set() with the argument formatted from `fmt` ("%d" and a status). */
void hv_fault_setf(hv_fault_t *f, hv_detail_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/** A duration as family arguments spell it: 30000 -> "30s", 1500 -> "1500ms". */
void hv_detail_duration(char *out, size_t cap, uint64_t ms);

#endif
