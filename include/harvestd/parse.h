/*
 * parse.h: the parse stage. Each page runs hv_html_analyse() on the libuv threadpool; the
 * work item owns the body and the record while it runs and touches nothing else. The result
 * is applied to the record back on the loop and handed to `done`.
 *
 * The stage itself does not limit how many parses run: the pipeline keeps that below
 * parse_jobs so the threadpool stays free for DNS and file I/O.
 */
#ifndef HARVESTD_PARSE_H
#define HARVESTD_PARSE_H

#include <stddef.h>
#include <uv.h>

#include "harvestd/record.h"

typedef struct hv_parse_s hv_parse_t;

/** A parse ended: `rec` is complete (ok with a title, or a parse failure) and passes to the
 * callee with the `tag` it was submitted with. With `cancelled` set the record was abandoned
 * instead (shutdown) and the callee frees it. */
typedef void (*hv_parse_done_cb)(void *ud, void *tag, hv_record_t *rec, int cancelled);

/** With `title_fast_path`, a page whose title the prefix settles is not parsed in full (see
 * hv_html_title_fast()). */
hv_parse_t *hv_parse_new(uv_loop_t *loop, int title_fast_path, hv_parse_done_cb done, void *ud);

/** Queue a parse of `body` (malloc'd, taken over) for `rec` (taken over); `tag` comes back
 * with the result. */
void hv_parse_submit(hv_parse_t *p, void *tag, hv_record_t *rec, char *body, size_t len);

/** Parses submitted and not yet done. */
unsigned hv_parse_inflight(const hv_parse_t *p);

/** Cancel parses with `tag` (NULL: all) that have not started yet (they end with
 * `cancelled`). */
void hv_parse_cancel_pending(hv_parse_t *p, const void *tag);

/** Free the stage; no parse may be in flight. */
void hv_parse_free(hv_parse_t *p);

#endif
