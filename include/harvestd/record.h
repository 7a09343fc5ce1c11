/*
 * record.h: one output record per input line, and its JSON form.
 *
 * A record is plain data owned by whoever holds it: the fetch stage builds it, the parse
 * stage completes it, the writer serialises and frees it. Keys are emitted in a fixed order
 * and absent fields are omitted:
 *   requested_url, batch, line, url, proxy, status, http_status, title, fields, content_type,
 *   charset, bytes, body_digest, redirects, attempts, elapsed_ms, fetched_at, modified_at, not_modified,
 *   unchanged, from_cache, stage, error_type, error
 * (batch and line only on records of stream entries, whose output mixes no other batch;
 * modified_at and the three flags only with re-crawling, recrawl.h; body_digest only when
 * asked for, record_digest).
 *
 * A failure is an error_type (the broad class) and a detail (detail.h): code and text are set
 * together by hv_record_fail(). Policy decides on the code; `error`, its text, is only output.
 */
#ifndef HARVESTD_RECORD_H
#define HARVESTD_RECORD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "harvestd/buf.h"
#include "harvestd/detail.h"
#include "harvestd/health.h"
#include "harvestd/storeentry.h"

typedef enum {
    HV_STAGE_NONE = 0,
    HV_STAGE_INPUT,
    HV_STAGE_DOWNLOAD,
    HV_STAGE_PARSE,
} hv_stage_t;

/* The stable error_type vocabulary of records. Keep hv_error_type_name() in step. */
typedef enum {
    HV_ET_NONE = 0,
    HV_ET_INVALID_URL,
    HV_ET_UNSUPPORTED_SCHEME,
    HV_ET_DNS,
    HV_ET_CONNECT,
    HV_ET_CONNECT_TIMEOUT,
    HV_ET_READ_TIMEOUT,
    HV_ET_TOTAL_TIMEOUT,
    HV_ET_CONNECTION_RESET,
    HV_ET_PROTOCOL,
    HV_ET_TOO_MANY_REDIRECTS,
    HV_ET_PAGE_TOO_LARGE,
    HV_ET_UNEXPECTED_CONTENT_TYPE,
    HV_ET_HTTP_STATUS,
    HV_ET_MISSING_TITLE,
    HV_ET_TOO_DEEPLY_NESTED,
    HV_ET_CERTIFICATE,
    HV_ET_TLS,
    HV_ET_ROBOTS,
    HV_ET_PARSER_CRASHED,
    HV_ET_UNPARSABLE_DOCUMENT,
    HV_ET_TOO_MANY_ATTRIBUTES,
    HV_ET_EXTRACTION_TOO_LARGE,
    HV_ET_BLOCKED_ADDRESS,
    HV_ET_INVALID_ENTRY,
    HV_ET_POISONED,
    HV_ET_BLOCKED,
    HV_ET_PROXY,
    HV_ET__COUNT
} hv_error_type_t;

/**
 * What re-crawling (recrawl.h) keeps with a record of a page: what the store said of its URL
 * and what the response said about storing it. Not output; NULL while re-crawling is off.
 */
typedef struct {
    char *key;              /* the store key: the normalised requested URL */
    hv_store_entry_t prev;  /* the stored entry (prev.fetched_at_ms == 0: none) */
    int conditional;        /* prev's validators are to be sent to prev.url */
    char *etag;             /* validators of the final response; NULL: absent */
    char *last_modified;
    int no_store;           /* Cache-Control: no-store (or too long to read) */
    int64_t max_age_s;      /* Cache-Control: max-age; -1: absent */
    char body_hash[65];   /* of the decoded body, by the parser; "": not known */
    uint64_t rules_fp;      /* fingerprint of what produced title and fields */
} hv_record_state_t;

typedef struct hv_record_s {
    char *requested_url;    /* the input line as given (trimmed); required */
    char *batch;            /* a stream entry's batch; NULL: absent (and so is line) */
    uint64_t line;          /* with batch: the entry's line number in its input */
    char *token;            /* a stream entry's id, for its acknowledgement; not output */
    char *url;              /* final URL after redirects, or NULL */
    char *proxy;            /* the proxy of the last request (its URL without credentials) */
    int ok;                 /* status "ok" vs "failed" */
    int http_status;        /* 0: absent */
    const char *http_version; /* "1.1" or "2" (static) with a response head; NULL: absent */
    char *title;            /* NULL: absent */
    char *content_type;     /* NULL: absent */
    char *charset;          /* encoding the page was decoded from; NULL: absent */
    char *fields;           /* extracted fields, a JSON object text; NULL: absent */
    int64_t bytes;          /* decoded body bytes; -1: absent */
    int redirects;          /* -1: absent */
    int attempts;           /* download attempts made (retries + 1); -1: absent */
    unsigned requests;      /* requests sent for it: every attempt, redirect hop and stale
                               connection retry (not output; 0: none, e.g. from_cache) */
    int64_t elapsed_ms;     /* -1: absent */
    int64_t fetched_at_ms;  /* Unix ms; -1: absent */
    int64_t modified_at_ms; /* Unix ms: when the content was last seen to change; -1: absent */
    int not_modified;       /* the answer was 304 Not Modified: content is the stored one */
    int unchanged;          /* a 200 whose body is the stored one */
    int from_cache;         /* answered from the store, no request made */
    uint64_t body_digest;   /* hv_record_body_digest() of the decoded body, by the parser */
    int digest_wanted;      /* ... which hashes it only then (block detection, record_digest) */
    int digest_known;       /* ... when it hashed one */
    int digest_shown;       /* ... output as body_digest (record_digest = yes) */
    hv_record_state_t *state; /* re-crawling's (not output); NULL: none */
    char *host_key;         /* the block detector's host, scheme://host:port of the last
                               attempt (not output); NULL: not watched */
    uint64_t parse_ns;      /* what the parser took; 0: not parsed (not output) */
    hv_stage_t stage;       /* HV_STAGE_NONE when ok */
    hv_error_type_t error_type;
    hv_detail_t detail;     /* what failed, for decisions; HV_D_NONE when ok */
    char *error;            /* the detail's text, what records print; NULL when ok */
    TAILQ_ENTRY(hv_record_s) link; /* result-queue linkage, owned by the queue holder */
} hv_record_t;

/** A new record with every optional field absent; requested_url is copied. */
hv_record_t *hv_record_new(const char *requested_url, size_t len);

/**
 * Mark `r` failed with `detail`, replacing any earlier failure. `arg` is a family's argument
 * ("404" for HV_D_HTTP_STATUS; NULL: none) and is ignored by fixed details. `error` becomes the
 * detail's text (hv_detail_format()), or NULL for HV_D_NONE.
 */
void hv_record_fail(hv_record_t *r, hv_stage_t stage, hv_error_type_t type, hv_detail_t detail,
                    const char *arg);

/** Give `r` an empty re-crawling state for store key `key` (copied); returns it. */
hv_record_state_t *hv_record_state_new(hv_record_t *r, const char *key);

/** The 64-bit digest of a decoded body (XXH3-64): what records carry as body_digest (16 hex
 *  digits) and the block detector compares across URLs. */
uint64_t hv_record_body_digest(const void *data, size_t len);

/** Free the record and its strings (NULL is fine). */
void hv_record_free(hv_record_t *r);

/** "InvalidUrl", "DnsError", ...; "" for HV_ET_NONE. */
const char *hv_error_type_name(hv_error_type_t t);

/* Upper bounds (seconds) of the parse-time histogram's buckets; +Inf is implicit. */
#define HV_PARSE_BUCKETS 10
extern const double hv_parse_bucket_bounds[HV_PARSE_BUCKETS];

/* Upper bounds (bytes) of the buckets of ok page sizes, powers of 4; +Inf is implicit. */
#define HV_OK_SIZE_BUCKETS 8
extern const uint64_t hv_ok_size_bucket_bounds[HV_OK_SIZE_BUCKETS];

/** Records counted as they reach their batch's output (the record figures of /metrics). */
typedef struct {
    uint64_t ok;
    uint64_t failed[HV_ET__COUNT];      /* by error_type */
    uint64_t http_status_class[6];      /* [2] = 2xx ... ; [0] unused */
    uint64_t body_bytes;                /* decoded bytes of the pages downloaded */
    uint64_t parse_buckets[HV_PARSE_BUCKETS + 1];
    double parse_seconds_sum;
    uint64_t parse_count;
    uint64_t ok_size_buckets[HV_OK_SIZE_BUCKETS + 1]; /* ok pages downloaded, by size */
    uint64_t ok_size_sum;
    uint64_t ok_size_count;
    hv_minute_t *minute;                /* the last minute's figures (the owner's); NULL: none */
} hv_record_counts_t;

/** Count `rec` (and its parse time, if it was parsed) into `c`, and into the last minute. */
void hv_record_counts_add(hv_record_counts_t *c, const hv_record_t *rec);

/** The decoded size of an ok page that was downloaded (not a 304, not from the store), the
 *  size the health figures describe; -1 for any other record. */
int64_t hv_record_ok_body_bytes(const hv_record_t *rec);

/** "input", "download", "parse"; NULL for HV_STAGE_NONE. */
const char *hv_stage_name(hv_stage_t s);

/** Longest line hv_record_append_json() writes, newline included. */
#define HV_RECORD_LINE_MAX ((size_t)32 << 20)

/**
 * Serialise `r` as one line of JSON followed by '\n', appended to `out`. Every string is made
 * valid UTF-8 first. A record whose line would exceed HV_RECORD_LINE_MAX (a huge title, or
 * fields near their own limit on top of one) is written as its page's failure instead:
 * the same record without title and fields, failed at stage parse with ExtractionTooLarge and
 * record_exceeds_<size>; `r` itself is not changed. Returns 0, or HV_ETOOBIG if `out` has no
 * room (nothing is appended then).
 */
int hv_record_append_json(const hv_record_t *r, hv_buf_t *out);

/** RFC 3339 UTC with milliseconds, "2026-11-29T12:00:00.123Z"; `out` needs 25 bytes. */
void hv_format_rfc3339_ms(char out[32], int64_t unix_ms);

#endif
