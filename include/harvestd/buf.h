/*
 * buf.h: a growable byte buffer with a hard maximum (after curl's dynbuf).
 *
 * Growth is geometric up to `max`; an append that would pass `max` fails with HV_ETOOBIG and
 * leaves the buffer unchanged, so a caller can never silently truncate.
 */
#ifndef HARVESTD_BUF_H
#define HARVESTD_BUF_H

#include <stddef.h>

typedef struct {
    char *data;
    size_t len;
    size_t cap;
    size_t max;
} hv_buf_t;

/** Initialise an empty buffer that may hold at most `max` bytes. Allocates nothing. */
void hv_buf_init(hv_buf_t *b, size_t max);
/** Append `len` bytes; 0, or HV_ETOOBIG if the result would exceed `max`. */
int hv_buf_append(hv_buf_t *b, const void *data, size_t len);
/** Ensure room for `extra` more bytes without appending; 0 or HV_ETOOBIG. */
int hv_buf_reserve(hv_buf_t *b, size_t extra);
/** Make the allocation at least `total` bytes at once (rounded up to whole pages, no geometric
 *  slack), as when the final size is announced; 0, or HV_ETOOBIG if `total` exceeds `max`.
 *  Later appends past it grow as usual. */
int hv_buf_presize(hv_buf_t *b, size_t total);
/** Forget the contents, keep the allocation. */
void hv_buf_reset(hv_buf_t *b);
/** Free the allocation; the buffer is empty and reusable afterwards. */
void hv_buf_free(hv_buf_t *b);
/** Hand the allocation to the caller (NULL if empty), shrunk to whole pages when growth left
 *  much slack; the buffer becomes empty. */
char *hv_buf_steal(hv_buf_t *b, size_t *len);

#endif
