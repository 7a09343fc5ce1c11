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

#include "harvestd/extract.h"
#include "harvestd/record.h"

typedef struct hv_parse_s hv_parse_t;

/** A parse ended: `rec` is complete (ok with a title, or a parse failure) and passes to the
 * callee with the `tag` it was submitted with. With `cancelled` set the record was abandoned
 * instead (shutdown) and the callee frees it. */
typedef void (*hv_parse_done_cb)(void *ud, void *tag, hv_record_t *rec, int cancelled);

/** With `title_fast_path`, a page whose title the prefix settles is not parsed in full (see
 * hv_html_title_fast()). */
hv_parse_t *hv_parse_new(uv_loop_t *loop, int title_fast_path, hv_parse_done_cb done, void *ud);

/** Pages analysed by one threadpool work item at most. */
#define HV_PARSE_GROUP 128

typedef struct hv_parse_group_s hv_parse_group_t;

/** Start a group of pages of one batch (`tag` comes back with each result). Pages are decoded
 * to UTF-8 (charset.h) and analysed; with non-empty `rules` (shared, read-only, outliving the
 * group) the whole page is parsed and the fields extracted. `crash_note` (NULL: none; must
 * outlive the group) is the path of the batch's crash note: see hv_parse_catch_crashes(). */
hv_parse_group_t *hv_parse_group_new(hv_parse_t *p, void *tag, const hv_ruleset_t *rules,
                                     const char *crash_note);
/** Add a page: `body` (malloc'd) and `rec` are taken over. UV_ENOBUFS when the group is full
 * (nothing taken). */
int hv_parse_group_add(hv_parse_group_t *g, hv_record_t *rec, char *body, size_t len);
/** Pages in the group (and their bytes in *bytes when non-NULL). */
unsigned hv_parse_group_size(const hv_parse_group_t *g, size_t *bytes);
/** Hand the group (at least one page) to the threadpool. */
void hv_parse_group_submit(hv_parse_group_t *g);

/** Groups submitted and not yet done: the pipeline keeps this below parse_jobs. */
unsigned hv_parse_busy(const hv_parse_t *p);

/** Cancel parses with `tag` (NULL: all) that have not started yet (they end with
 * `cancelled`). */
void hv_parse_cancel_pending(hv_parse_t *p, const void *tag);

/**
 * From now on, a fatal signal (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT) raised while a worker
 * parses a page first appends that page's input line and a newline to its group's crash
 * note (open(2), write(2), fsync(2) and close(2) only: the file appears only then), then
 * takes its previous course (the process dies). The
 * daemon calls this once at start: after a restart, the batch fails that line as
 * ParserCrashed instead of fetching it again into the same crash. Not thread-safe against
 * other sigaction() calls; call it from the main thread before any parse.
 */
void hv_parse_catch_crashes(void);

/** Free the stage; no parse may be in flight. */
void hv_parse_free(hv_parse_t *p);

#endif
