/*
 * source.h: where URLs come from. The pipeline consumes lines from any source through this
 * small interface (a URL file, or the entries of one batch of a Redis stream) and
 * pushes back by returning "pause" from on_line.
 */
#ifndef HARVESTD_SOURCE_H
#define HARVESTD_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#include "harvestd/detail.h"

typedef struct hv_source_s hv_source_t;

/** What a line brings besides its text (a stream entry; a file's lines bring nothing). */
typedef struct {
    const char *token;  /* the entry's id: its record carries it to the acknowledgement */
    const char *batch;  /* its record carries the batch and the line number (lineno) */
    hv_detail_t reject; /* not HV_D_NONE: the line gets a failed input record with this
                           detail instead of a fetch */
    int poisoned;       /* with `reject`: its error_type is Poisoned, not InvalidEntry */
} hv_line_meta_t;

/** What a source delivers to (implemented by the pipeline). */
typedef struct {
    /** One input line, already trimmed, never blank or a comment; `lineno` is 1-based.
     * `overlong` says the line was longer than the source keeps (the text is a prefix).
     * `meta` is NULL, or what a stream entry brings (valid during the call).
     * Returns 0 to continue, 1 to pause until hv_source_resume(). */
    int (*on_line)(void *ud, const char *line, size_t len, uint64_t lineno, int overlong,
                   const hv_line_meta_t *meta);
    /** No more lines: status 0 at the end of input, or a UV_E* read error. */
    void (*on_end)(void *ud, int status);
} hv_sink_t;

typedef struct {
    /** Begin delivering to `sink` (from the next loop iteration, never inside this call). */
    void (*start)(hv_source_t *s, const hv_sink_t *sink, void *ud);
    void (*resume)(hv_source_t *s);
    /** Stop delivering; the source frees itself (possibly later, after pending I/O). */
    void (*close)(hv_source_t *s);
    const char *(*name)(const hv_source_t *s);
    /** Optional (NULL: unknown): how many bytes of the input the lines delivered so far
     *  span, of `*size` in all (0: a size not known in advance, such as a pipe's). */
    void (*position)(const hv_source_t *s, uint64_t *consumed, uint64_t *size);
} hv_source_ops_t;

struct hv_source_s {
    const hv_source_ops_t *ops;
};

static inline void hv_source_start(hv_source_t *s, const hv_sink_t *sink, void *ud)
{
    s->ops->start(s, sink, ud);
}

static inline void hv_source_resume(hv_source_t *s)
{
    s->ops->resume(s);
}

static inline void hv_source_close(hv_source_t *s)
{
    s->ops->close(s);
}

/** The source's position (see hv_source_ops_t.position); 0 and 0 when it cannot tell. */
static inline void hv_source_position(const hv_source_t *s, uint64_t *consumed, uint64_t *size)
{
    *consumed = *size = 0;
    if (s->ops->position != NULL)
        s->ops->position(s, consumed, size);
}

#endif
