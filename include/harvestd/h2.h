/*
 * h2.h: one HTTP/2 connection (RFC 9113) on nghttp2: a session that carries many requests
 * (streams) at once over an open connection (conn.h), of which it becomes the owner.
 *
 * Where it sits: conn gives a byte stream (TCP, a proxy's tunnel, TLS with ALPN "h2"); the
 * session frames requests onto it and hands each stream's response up as header fields, data
 * and an ending. It knows nothing of jobs, records or pools: fetch assembles requests and
 * decides what an ending means (h2.h's `hv_h2_end_t` says what happened, precisely enough to
 * tell a stream the server never processed from one it broke off).
 *
 * Flow control is backpressure: automatic WINDOW_UPDATEs are off, each stream gets a window
 * of `stream_window` bytes, and the data a stream delivered is given back to the server
 * (nghttp2_session_consume) at once unless the session is held (hv_h2_hold()): then it is
 * given back only when the hold ends. A held session keeps reading its socket (PING,
 * SETTINGS and GOAWAY are answered), so a slow consumer closes the windows of its streams,
 * not the connection, and what a held session can receive is bounded by streams x window.
 *
 * Time: the session owns the connection's one timer. Each stream may have a deadline (loop
 * time); the earliest is armed, and on_timeout reports each stream whose deadline passed.
 * With no stream open, the session is idle: after `idle_ms` it ends itself (GOAWAY, close).
 *
 * Endings: every stream submitted ends exactly once through on_end, unless the owner cancels
 * it first (hv_h2_cancel: no callback for it afterwards). When the connection ends (the
 * peer's close, a protocol error, a GOAWAY once its last streams are done, the idle timeout,
 * hv_h2_close()), every stream still open ends (its kind says how), then on_gone reports
 * that the session is finished; its memory goes then (at once, or when the call of ours that
 * ended it returns). The owner must not use the session after on_gone nor after
 * hv_h2_close().
 *
 * Callbacks run from the loop (socket and timer callbacks), never from inside hv_h2_submit,
 * hv_h2_cancel, hv_h2_hold or hv_h2_close.
 */
#ifndef HARVESTD_H2_H
#define HARVESTD_H2_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "harvestd/conn.h"

typedef struct hv_h2_s hv_h2_t;

/** How a stream ended. */
typedef enum {
    HV_H2_COMPLETE,    /* the response is whole (END_STREAM) */
    HV_H2_UNPROCESSED, /* the server did not process it (REFUSED_STREAM, or above a GOAWAY's
                          last stream id): safe to send again, on another connection */
    HV_H2_RESET,       /* the server reset it: `code` */
    HV_H2_LOCAL,       /* we reset it: a callback refused, or nghttp2 found the server's
                          frames for it invalid (`code`, and `lib_error` when nghttp2's) */
    HV_H2_LOST,        /* the connection ended under it: `err` (UV_EOF, a read error,
                          HV_ETLS...), or the GOAWAY's `code` when one came, or nghttp2's
                          `lib_error` on a connection-level protocol error */
} hv_h2_end_kind_t;

typedef struct {
    hv_h2_end_kind_t kind;
    uint32_t code;  /* an HTTP/2 error code (RFC 9113 7): RESET, LOCAL, LOST after a GOAWAY */
    int goaway;     /* LOST: the server sent a GOAWAY (with `code`) before the end */
    int ours;       /* LOST: `code` is the error of our GOAWAY: the server's frames broke the
                       protocol (`lib_error` says how, when nghttp2 said) */
    int err;        /* LOST: the connection's error, 0 if the session ended it itself */
    int lib_error;  /* LOCAL, LOST: nghttp2's error (negative), 0 if none */
} hv_h2_end_t;

typedef struct {
    /** A field of the response head of stream `sd` (pseudo-fields too: ":status"). Interim
     *  (1xx) heads are dropped before they reach here. Non-zero resets the stream (it then
     *  ends LOCAL). */
    int (*on_field)(void *sd, const char *name, size_t nlen, const char *value, size_t vlen);
    /** The final head is complete: its `status`. Non-zero resets the stream. */
    int (*on_head)(void *sd, int status);
    /** Body bytes of stream `sd`. Non-zero resets the stream. */
    int (*on_data)(void *sd, const char *data, size_t len);
    /** Stream `sd` ended (never after hv_h2_cancel() on it). */
    void (*on_end)(void *sd, const hv_h2_end_t *end);
    /** The deadline of stream `sd` passed (it stays open: the owner cancels it or sets
     *  another deadline). */
    void (*on_timeout)(void *sd);
    /** Room may have changed: a stream ended, the server's SETTINGS came. */
    void (*on_room)(void *owner);
    /** The session is finished (after every open stream's on_end). */
    void (*on_gone)(void *owner);
} hv_h2_cbs_t;

typedef struct {
    uint32_t max_streams;     /* streams open at once at most (also limited by the server) */
    uint32_t stream_window;   /* each stream's receive window, bytes */
    uint32_t max_header_list; /* SETTINGS_MAX_HEADER_LIST_SIZE we announce */
    uint64_t idle_ms;         /* an idle session ends after this */
} hv_h2_settings_t;

/** A request field; `name` lower-case. */
typedef struct {
    const char *name;
    size_t nlen;
    const char *value;
    size_t vlen;
} hv_h2_field_t;

typedef struct {
    uint64_t sessions;        /* sessions started */
    uint64_t streams;         /* streams submitted */
    uint64_t refused;         /* streams the server did not process (UNPROCESSED) */
    uint64_t reset;           /* streams the server reset (RESET) */
    uint64_t goaways;         /* GOAWAYs received */
} hv_h2_stats_t;

/**
 * Start a session on open connection `c` (the client preface and SETTINGS go out at once);
 * the session owns `c` from now on. `stats` (shared, outlives the session) is counted into.
 * Returns NULL only when nghttp2 cannot be set up (then `c` is closed).
 */
hv_h2_t *hv_h2_new(uv_loop_t *loop, hv_conn_t *c, const hv_h2_settings_t *set,
                   const hv_h2_cbs_t *cbs, void *owner, hv_h2_stats_t *stats);

/** Streams that may be submitted now: min(max_streams, the server's limit) less those open;
 *  0 once the session is going away. */
unsigned hv_h2_room(const hv_h2_t *s);

/** Whether the server's first SETTINGS came (until then hv_h2_room() allows one stream). */
int hv_h2_settled(const hv_h2_t *s);

/** Streams open. */
unsigned hv_h2_open_streams(const hv_h2_t *s);

/** Send a GET (a head only) with `fields` (pseudo-fields first); `sd` is handed to the
 *  stream's callbacks. Returns the stream id (> 0), or a negative error (no room: UV_EAGAIN;
 *  nghttp2 refused the fields: UV_EINVAL). */
int32_t hv_h2_submit(hv_h2_t *s, const hv_h2_field_t *fields, size_t n, void *sd);

/** Reset stream `id` (CANCEL): it ends without a callback; its unread data is given back. */
void hv_h2_cancel(hv_h2_t *s, int32_t id);

/** Stream `id`'s deadline, loop time in ms (0: none). */
void hv_h2_set_deadline(hv_h2_t *s, int32_t id, uint64_t due_ms);

/** Hold (1) or release (0) the data the streams delivered (see above). */
void hv_h2_hold(hv_h2_t *s, int on);

/** Bytes delivered while held and not yet given back (what the hold keeps in memory). */
uint64_t hv_h2_held(const hv_h2_t *s);

/** End the session now (GOAWAY when it can still send, then close): open streams end
 *  without callbacks, and no callback runs any more. */
void hv_h2_close(hv_h2_t *s);

/** The HTTP/2 error code's name, lower case ("refused_stream"), or "unknown". */
const char *hv_h2_code_name(uint32_t code);

/** What broke the protocol in a LOCAL ending or a LOST one that is `ours`, lower case:
 *  nghttp2's finding when it has a name of its own ("invalid_header", "flooded",
 *  "settings_expected"), else the code's name ("protocol_error"). */
const char *hv_h2_end_name(const hv_h2_end_t *e);

/* For the fuzz target: a session over no connection, fed frames directly. Its output is
 * dropped; callbacks run from inside hv_h2_fuzz_feed. */
hv_h2_t *hv_h2_fuzz_new(const hv_h2_settings_t *set, const hv_h2_cbs_t *cbs, void *owner,
                        hv_h2_stats_t *stats);
/** Feed bytes from the "server"; returns 0, or a negative nghttp2 error once it gave up. */
int hv_h2_fuzz_feed(hv_h2_t *s, const uint8_t *data, size_t len);
void hv_h2_fuzz_free(hv_h2_t *s);

#endif
