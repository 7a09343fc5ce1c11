/*
 * report.h: a harvestd output (JSONL records, record.h) summed up as one HTML page that a
 * person would rather look at than read: records by status, error type and HTTP status,
 * histograms of elapsed times and page sizes, a table of hosts, the slowest and the largest
 * pages, and the failures grouped by error. The command (`harvestd report`, commands.h) is a
 * thin layer over these functions: it reads the file and hands its bytes to hv_report_feed().
 *
 * The output is read once, front to back, in pieces of any size: nothing is kept per record,
 * so memory does not grow with the file. What is kept, and its bounds (the defaults; a test
 * may lower them through hv_report_opts_t):
 *   - the line being read: up to HV_REPORT_LINE_MAX bytes (a longer line is no record
 *     harvestd wrote; it is counted unreadable and skipped without being held);
 *   - per host (of requested_url): counts, up to HV_REPORT_HOST_TYPES failure types, and a
 *     histogram of elapsed times (HV_REPORT_FINE_BUCKETS counters) from which the median is
 *     read. The first HV_REPORT_HOSTS_MAX hosts are kept one by one; the records of any host
 *     after them are counted together, as "other hosts";
 *   - error types: the first HV_REPORT_ERROR_TYPES_MAX names, the rest counted together;
 *   - failure groups (error_type and error, the error's first HV_REPORT_TEXT_MAX bytes): the
 *     first HV_REPORT_GROUPS_MAX, each with up to HV_REPORT_SAMPLES sample URLs (the first
 *     HV_REPORT_TEXT_MAX bytes of each); failures of any later group are counted together;
 *   - the N slowest and the N largest records (hv_report_opts_t.top), in two small heaps;
 *   - counters: by HTTP status (0-999), histograms of fixed buckets, the first
 *     HV_REPORT_UNREADABLE_SAMPLES unreadable lines (their first bytes).
 * With the defaults that is under 16 MiB besides the line, however long the file.
 *
 * Lines are not parsed into trees: a small scanner checks each line's JSON syntax (RFC 8259)
 * and takes only the members of the top-level object that the report uses, so a hostile line
 * of millions of tiny values costs no more memory than its own bytes. A line is a record when
 * it is a JSON object with a string `requested_url`, `status` "ok" or "failed", and every
 * other member the report reads of its type: strings `url`, `title`, `stage`, `error_type`,
 * `error`, `fetched_at`; non-negative integers `http_status` (0-999), `bytes`, `elapsed_ms`.
 * (Of a member given twice, the last counts.) Any other line is unreadable, counted by why
 * (hv_report_line_t), never fatal.
 *
 * The page is self-contained: inline CSS and SVG, no script, no external resource (a
 * Content-Security-Policy says so to the browser as well). Every text taken from the file is
 * escaped for HTML, with ill-formed UTF-8, control characters and bidirectional overrides
 * shown as U+FFFD (hv_report_html_escape()).
 *
 * Medians (overall and per host) are read from histograms of 4 buckets per doubling: the
 * value shown is the middle of the bucket that holds the median, within 12.5 % of it.
 */
#ifndef HARVESTD_REPORT_H
#define HARVESTD_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "harvestd/record.h"

/** Longest line read as a possible record (the longest record harvestd writes). */
#define HV_REPORT_LINE_MAX HV_RECORD_LINE_MAX
/** JSON nested deeper than this is unreadable (HV_REPORT_LINE_TOO_DEEP). */
#define HV_REPORT_DEPTH_MAX 512
/** Hosts kept one by one; later hosts are counted together. */
#define HV_REPORT_HOSTS_MAX 4096
/** Longest host (host[:port] of requested_url) kept; a longer one counts as no host. */
#define HV_REPORT_HOST_LEN_MAX 300
/** Failure types kept per host; further types of the host are counted together. */
#define HV_REPORT_HOST_TYPES 4
/** Distinct error_type names kept; further names are counted together. */
#define HV_REPORT_ERROR_TYPES_MAX 64
/** Longest error_type kept (longer ones are cut). */
#define HV_REPORT_ERROR_TYPE_LEN 64
/** Failure groups kept; failures of further groups are counted together. */
#define HV_REPORT_GROUPS_MAX 1024
/** Sample URLs kept per failure group. */
#define HV_REPORT_SAMPLES 3
/** Bytes kept of an error text, a sample URL, an unreadable line (cut at a character). */
#define HV_REPORT_TEXT_MAX 512
/** Bytes kept of the URL and of the title of a slowest or largest record. */
#define HV_REPORT_URL_MAX 2048
#define HV_REPORT_TITLE_MAX 256
/** Unreadable lines shown with their first bytes. */
#define HV_REPORT_UNREADABLE_SAMPLES 10
/** Counters of a median histogram: values 0-7 exactly, then 4 buckets per doubling up to
 *  2^40 (later values go into the last). */
#define HV_REPORT_FINE_BUCKETS 156
/** Default and largest rows of the slowest and largest tables, and of the host table. */
#define HV_REPORT_TOP_DEFAULT 20
#define HV_REPORT_HOSTS_SHOWN_DEFAULT 50
#define HV_REPORT_ROWS_MAX 1000
/** Failure groups shown (the rest are summed up in one row). */
#define HV_REPORT_GROUPS_SHOWN 50

/** What one line was (hv_report_add_line()): a record, or why it is unreadable. */
typedef enum {
    HV_REPORT_LINE_RECORD = 0,
    HV_REPORT_LINE_EMPTY,      /* nothing but blanks */
    HV_REPORT_LINE_NOT_JSON,   /* not one JSON text */
    HV_REPORT_LINE_CUT,        /* the last line, without its newline, and not JSON: cut short */
    HV_REPORT_LINE_TOO_DEEP,   /* JSON nested deeper than HV_REPORT_DEPTH_MAX */
    HV_REPORT_LINE_NOT_OBJECT, /* JSON, but not an object */
    HV_REPORT_LINE_BAD_FIELD,  /* an object, but a member is missing or of the wrong type */
    HV_REPORT_LINE_TOO_LONG,   /* longer than the line limit */
    HV_REPORT_LINE__COUNT
} hv_report_line_t;

/** Bounds of one report; a field left 0 takes its default. */
typedef struct {
    size_t top;        /* rows of the slowest and largest tables: HV_REPORT_TOP_DEFAULT */
    size_t hosts;      /* hosts shown in the table: HV_REPORT_HOSTS_SHOWN_DEFAULT */
    size_t hosts_max;  /* hosts kept one by one: HV_REPORT_HOSTS_MAX */
    size_t groups_max; /* failure groups kept: HV_REPORT_GROUPS_MAX */
    size_t line_max;   /* longest line read: HV_REPORT_LINE_MAX */
} hv_report_opts_t;

typedef struct hv_report_s hv_report_t;

/** What the page says at its top: the file's name (shown as given; NULL: "standard input")
 *  and when the report was made (any text; NULL: left out). */
typedef struct {
    const char *source;
    const char *generated_at;
} hv_report_page_t;

/** Totals so far. */
typedef struct {
    uint64_t lines; /* records + unreadable */
    uint64_t records, ok, failed;
    uint64_t unreadable;
    uint64_t by_reason[HV_REPORT_LINE__COUNT]; /* [HV_REPORT_LINE_RECORD]: records */
    uint64_t hosts;                            /* hosts kept one by one ("no host" included) */
    uint64_t other_host_records;               /* records of hosts past hosts_max */
    uint64_t groups;                           /* failure groups kept */
    uint64_t other_group_failures;             /* failures of groups past groups_max */
} hv_report_totals_t;

/** One host's figures (hv_report_get_host()). */
typedef struct {
    uint64_t requests, ok, failed;
    uint64_t median_ms; /* estimated (see above); 0 when no record had elapsed_ms */
    uint64_t timed;     /* records with elapsed_ms */
} hv_report_host_t;

/** A report with bounds `opts` (NULL: the defaults; values above HV_REPORT_ROWS_MAX are
 *  lowered to it). Aborts on OOM, like hv_xmalloc(). */
hv_report_t *hv_report_new(const hv_report_opts_t *opts);

/** Free everything (NULL is fine). */
void hv_report_free(hv_report_t *r);

/**
 * The next `len` bytes of the file, in pieces of any size: lines end with '\n' and may be
 * split anywhere. Each complete line is counted as hv_report_add_line() counts it; a line
 * longer than the limit is dropped as it arrives (HV_REPORT_LINE_TOO_LONG at its end).
 */
void hv_report_feed(hv_report_t *r, const char *data, size_t len);

/** The end of the file: a last line without its newline is counted (a line that is no JSON
 *  is then HV_REPORT_LINE_CUT). Call once, after the last hv_report_feed(). */
void hv_report_finish(hv_report_t *r);

/**
 * Count one line (`len` bytes without its newline; it may hold any bytes, NULs included, and
 * need not be NUL-terminated) as the next line of the file, and say what it was. A line
 * longer than the limit is HV_REPORT_LINE_TOO_LONG without being read.
 */
hv_report_line_t hv_report_add_line(hv_report_t *r, const char *line, size_t len);

/** The totals so far. */
void hv_report_get_totals(const hv_report_t *r, hv_report_totals_t *out);

/** Failed records with error_type `name` ("" for those without one); the failures whose type
 *  came after the first HV_REPORT_ERROR_TYPES_MAX are not found under their name. */
uint64_t hv_report_error_type_count(const hv_report_t *r, const char *name);

/** Failures of the group (`error_type`, `error`; "" for absent), 0 when there is none. */
uint64_t hv_report_group_count(const hv_report_t *r, const char *error_type, const char *error);

/** The figures of `host` (host[:port] as hv_report_host_of() spells it; "" for the records
 *  without a host). 0, or UV_ENOENT when the host is not kept one by one. */
int hv_report_get_host(const hv_report_t *r, const char *host, hv_report_host_t *out);

/**
 * The host a URL is counted under: its authority without user information, ASCII letters in
 * lower case ("HTTP://u@Example.COM:8080/x" -> "example.com:8080"), written into `out`
 * (`cap` bytes, NUL-terminated). 0 with "" when `url` has no scheme://host, or a host longer
 * than HV_REPORT_HOST_LEN_MAX (or `cap` - 1). Returns the length.
 */
size_t hv_report_host_of(const char *url, size_t len, char *out, size_t cap);

/**
 * Write the page to `out`. 0, or UV_EIO when `out` reports a write error (ferror(); the
 * caller still closes it). The page depends only on the lines counted and on `page`.
 */
int hv_report_write_html(const hv_report_t *r, const hv_report_page_t *page, FILE *out);

/**
 * Write `len` bytes of `s` as HTML text, fit for element content and quoted attribute
 * values: & < > " ' as character references; ill-formed UTF-8, NUL and other control
 * characters (tab, which becomes a space, aside), U+2028/U+2029 and the bidirectional
 * embedding, override and isolate characters as U+FFFD.
 */
void hv_report_html_escape(FILE *out, const char *s, size_t len);

/** The bucket of `v` in a median histogram (0 .. HV_REPORT_FINE_BUCKETS - 1), and the value
 *  a bucket stands for (the middle of its range). */
unsigned hv_report_fine_bucket(uint64_t v);
uint64_t hv_report_fine_value(unsigned bucket);

#endif
