/*
 * extract.h: extraction rule sets: named fields taken from a page with CSS selectors
 * (select.h), evaluated on the parse worker over the gumbo tree, producing the record's
 * "fields" object.
 *
 * A rule set is built from "key = value" pairs (a [rules "NAME"] config section, or
 * --extract / --extract-all on the command line):
 *     NAME = SELECTOR [@attr | ::html]     the first match (a string, or null)
 *     NAME[] = SELECTOR ...                every match (a list of strings)
 *     NAME.item = SELECTOR                 a repeated item: NAME is a list of objects ...
 *     NAME.FIELD = SELECTOR ...            ... whose FIELD is taken relative to each item
 *     NAME = @links                        built in: the absolute URLs of a[href], resolved
 *                                          against the final URL and <base href>
 * Rule sets are immutable once finished, and shared read-only by workers.
 *
 * What a page yields is bounded, whatever the page does: a rule keeps at most
 * HV_EXTRACT_MAX_MATCHES matches, a value at most HV_EXTRACT_VALUE_MAX bytes (cut visibly, with
 * HV_EXTRACT_CUT_MARK), and the whole "fields" object at most HV_EXTRACT_FIELDS_MAX bytes as
 * printed. Without the last bound, N nested matches around T bytes of text would cost N x T
 * ("d[] = div" on 1,000 nested divs around 300 KB: 300 MB), and a record the writer cannot
 * take would stop the batch.
 */
#ifndef HARVESTD_EXTRACT_H
#define HARVESTD_EXTRACT_H

#include <gumbo.h>
#include <stddef.h>
#include <stdint.h>

/** Matches kept per rule (and items per scoped rule); more are counted, not kept. */
#define HV_EXTRACT_MAX_MATCHES 100000

/** Longest value (text, @attr or ::html) kept, in bytes of UTF-8. A longer one is cut back to
 *  the last whole character that fits, and HV_EXTRACT_CUT_MARK is appended. Links are URLs of
 *  at most HV_URL_MAX bytes and never cut. */
#define HV_EXTRACT_VALUE_MAX ((size_t)1 << 20)

/** What ends a cut value: U+2026 and "[cut]". */
#define HV_EXTRACT_CUT_MARK "\xE2\x80\xA6[cut]"

/** Largest "fields" object, in bytes as the record prints it (escapes included). A page whose
 *  fields would be larger gets none: hv_ruleset_eval() fails with HV_ETOOBIG. */
#define HV_EXTRACT_FIELDS_MAX ((size_t)8 << 20)

typedef struct hv_ruleset_s hv_ruleset_t;

hv_ruleset_t *hv_ruleset_new(const char *name);

/** Add one rule. 0, or UV_EINVAL with a message (selector errors give their position). */
int hv_ruleset_add(hv_ruleset_t *rs, const char *key, const char *value, char *err,
                   size_t errcap);

/** Check the set is complete (every NAME.FIELD has its NAME.item). 0 or UV_EINVAL + err. */
int hv_ruleset_finish(hv_ruleset_t *rs, char *err, size_t errcap);

const char *hv_ruleset_name(const hv_ruleset_t *rs);
int hv_ruleset_empty(const hv_ruleset_t *rs);

/* The fingerprint of a title-only run, and the basis of every rule set's. Change the basis
 * when what a rule yields changes, so that stored results of older rules are not reused. */
#define HV_RULESET_FP_TITLE UINT64_C(0x7469746c652d3031) /* "title-01" */
#define HV_RULESET_FP_BASIS UINT64_C(0xcbf29ce484222325)

/** A 64-bit fingerprint of what the set produces: its rules, in order (not its name). NULL or
 *  an empty set: HV_RULESET_FP_TITLE. Equal rules give equal fingerprints across runs. */
uint64_t hv_ruleset_fingerprint(const hv_ruleset_t *rs);

/**
 * Evaluate the set over a parsed document. `src`/`len` are the bytes gumbo parsed (for
 * ::html), `base_url` the page's final URL (for @links). Returns 0 with *out a malloc'd JSON
 * object ("{...}") of at most HV_EXTRACT_FIELDS_MAX bytes, or HV_ETOOBIG with *out NULL when
 * the fields would be larger (evaluation stops as soon as that is known, so its time and
 * memory stay bounded by the limit too). Runs on a worker: touches only its arguments.
 */
int hv_ruleset_eval(const hv_ruleset_t *rs, const GumboNode *root, const char *src, size_t len,
                    const char *base_url, char **out);

void hv_ruleset_free(hv_ruleset_t *rs);

#endif
