/*
 * pages.h: the page queue between the download and parse stages, bounded by count and by
 * bytes. A page is reserved the moment its download ends (inside the I/O callback, so the
 * bound holds exactly), queued with its record in the engine's next pass, and leaves in
 * parse groups: only for owners (flows) that can take more records, so that one batch whose
 * writer is behind does not hold up the others.
 *
 * Backpressure is a return value: hv_pages_reserve() says when the queue became full (every
 * connection should stop reading); hv_pages_low() when it has drained enough to resume.
 * Loop thread only; no handles.
 */
#ifndef HARVESTD_PAGES_H
#define HARVESTD_PAGES_H

#include <stddef.h>
#include <stdint.h>

#include "harvestd/parse.h"
#include "harvestd/record.h"

typedef struct hv_pages_s hv_pages_t;

typedef struct {
    unsigned pages;            /* reserved or queued now */
    uint64_t bytes;
    unsigned hwm_pages;
    uint64_t hwm_bytes;
} hv_pages_stats_t;

/** A queue that is full at `max_pages` pages or `max_bytes` bytes. */
hv_pages_t *hv_pages_new(unsigned max_pages, uint64_t max_bytes);

/** Count a page of `len` bytes that is on its way. Returns 1 when the queue is now full. */
int hv_pages_reserve(hv_pages_t *q, size_t len);
/** A reserved page will not come after all. */
void hv_pages_unreserve(hv_pages_t *q, size_t len);

/** Queue a reserved page of `owner`: `rec` and `body` (malloc'd, `len` bytes) taken over. */
void hv_pages_push(hv_pages_t *q, void *owner, hv_record_t *rec, char *body, size_t len);

/** The owner of the oldest queued page whose owner `accepts` more records; NULL if none. */
void *hv_pages_next_owner(hv_pages_t *q, int (*accepts)(void *owner));

/** Move `owner`'s oldest pages into `g`: enough to share the queue evenly over `free_parsers`,
 * within HV_PARSE_GROUP pages and 1 MiB. */
void hv_pages_fill_group(hv_pages_t *q, const void *owner, hv_parse_group_t *g,
                         unsigned free_parsers);

/** Free `owner`'s queued pages and their records; returns how many there were. */
unsigned hv_pages_drop(hv_pages_t *q, const void *owner);

/** Whether the queue has drained to half of both bounds (reads may resume). */
int hv_pages_low(const hv_pages_t *q);

const hv_pages_stats_t *hv_pages_stats(const hv_pages_t *q);

/** Free the queue; it must be empty. */
void hv_pages_free(hv_pages_t *q);

#endif
