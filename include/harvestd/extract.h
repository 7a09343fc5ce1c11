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
 */
#ifndef HARVESTD_EXTRACT_H
#define HARVESTD_EXTRACT_H

#include <gumbo.h>
#include <stddef.h>

/** Matches kept per rule (and items per scoped rule); more are counted, not kept. */
#define HV_EXTRACT_MAX_MATCHES 100000

typedef struct hv_ruleset_s hv_ruleset_t;

hv_ruleset_t *hv_ruleset_new(const char *name);

/** Add one rule. 0, or UV_EINVAL with a message (selector errors give their position). */
int hv_ruleset_add(hv_ruleset_t *rs, const char *key, const char *value, char *err,
                   size_t errcap);

/** Check the set is complete (every NAME.FIELD has its NAME.item). 0 or UV_EINVAL + err. */
int hv_ruleset_finish(hv_ruleset_t *rs, char *err, size_t errcap);

const char *hv_ruleset_name(const hv_ruleset_t *rs);
int hv_ruleset_empty(const hv_ruleset_t *rs);

/**
 * Evaluate the set over a parsed document. `src`/`len` are the bytes gumbo parsed (for
 * ::html), `base_url` the page's final URL (for @links). Returns a malloc'd JSON object
 * ("{...}"), never NULL. Runs on a worker: touches only its arguments.
 */
char *hv_ruleset_eval(const hv_ruleset_t *rs, const GumboNode *root, const char *src,
                      size_t len, const char *base_url);

void hv_ruleset_free(hv_ruleset_t *rs);

#endif
