/*
 * resume.h: picking a batch up again after a crash or a kill.
 *
 * The output of an interrupted batch is repaired (a torn last line, i.e. one without its
 * newline or not valid JSON, is truncated away) and read to learn which requested URLs
 * already have an `ok` record. Those input lines are skipped when the batch runs again; every
 * other line (no record, or a failed one) is processed again and appended, so for one URL the
 * last record wins.
 *
 * Duplicated input lines are counted: two `ok` records for a URL skip two of its lines, one
 * skips one. The set keeps a 64-bit hash and a count per URL (16 bytes), not the URL itself.
 */
#ifndef HARVESTD_RESUME_H
#define HARVESTD_RESUME_H

#include <stddef.h>
#include <stdint.h>

#include "harvestd/buf.h"
#include "harvestd/health.h"

typedef struct hv_okset_s hv_okset_t;

hv_okset_t *hv_okset_new(void);
void hv_okset_add(hv_okset_t *s, const char *url, size_t len);
/** If `url` has an unused ok record, use it up and return 1; else 0. */
int hv_okset_take(hv_okset_t *s, const char *url, size_t len);
void hv_okset_free(hv_okset_t *s);

/** The figures of the ok records a repair kept: a resumed batch counts them as its own
 *  (they are the records of the lines it skips), so that its summary covers the whole output.
 *  Only what a record carries: `requests` is not written, so it stays this run's. */
typedef struct {
    uint64_t records;        /* the ok records kept (hv_repair_t.ok) */
    uint64_t by_status[600]; /* by http_status (100..599) */
    uint64_t body_bytes;     /* sum of `bytes` over those that have it */
    uint64_t with_bytes;
    uint64_t not_modified;
    uint64_t unchanged;
    uint64_t from_cache;
    hv_sizes_t ok_sizes;     /* `bytes` of the pages downloaded (not 304s, not from_cache) */
} hv_kept_t;

typedef struct {
    uint64_t records;        /* complete records kept */
    uint64_t ok;             /* of which ok (added to the set) */
    uint64_t crashed;        /* of which ParserCrashed */
    uint64_t truncated;      /* bytes cut off the end (a torn last line) */
    uint64_t bad_lines;      /* invalid lines before the last one (kept, reported) */
    hv_kept_t kept;          /* what the `ok` records hold */
} hv_repair_t;

/**
 * Repair the JSONL output at `path` in place, add its ok records to `ok` (and their figures to
 * out->kept) and the URLs of its ParserCrashed records to `crashed` (either may be NULL): such
 * a page has its final record, and fetching it again would only repeat the crash. A missing file is not an error (nothing
 * to resume). Returns 0, or a UV_E* error with a message in `err`. Blocking file I/O (the
 * file is read whole, and a cut is fsynced): the daemon calls it on the threadpool (bhost.h).
 */
int hv_output_repair(const char *path, hv_okset_t *ok, hv_okset_t *crashed, hv_repair_t *out,
                     char *err, size_t errcap);

/**
 * Add the lines of a batch's crash note (the input lines whose pages took the parser down,
 * see hv_parse_catch_crashes()) to `set`, and append each, with its newline, to `noted`
 * (NULL: not wanted; lines past the buffer's bound are not appended) so that the caller can
 * log them. Nothing when there is no note, or it cannot be read (those pages are then tried
 * again); a torn last line (the crash cut it) is not a noted page. Blocking file I/O and no
 * logging: it runs on a worker (bhost.h).
 */
void hv_crash_note_read(const char *path, hv_okset_t *set, hv_buf_t *noted);

#endif
