/*
 * h2.c: one HTTP/2 connection on nghttp2 (see h2.h).
 *
 * nghttp2 is driven in memory: what the connection reads goes to nghttp2_session_mem_recv,
 * and after every call that may have queued frames, flush() collects nghttp2_session_mem_send's
 * output into one write. nghttp2 calls back into this file from inside those calls; the
 * owner's callbacks run from there too, and may call hv_h2_cancel() or hv_h2_close() on the
 * session. So the session is freed only once the outermost call returns (`depth`), and a
 * closed session makes no further callback.
 *
 * A stream's state is ours (stream_t, nghttp2's stream user data) from submit to its end: what
 * its frames said (END_STREAM seen, the server's RST_STREAM) decides how it ended when
 * nghttp2 closes it, since nghttp2 reports only an error code there.
 */
#include "harvestd/h2.h"

#include <nghttp2/nghttp2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "harvestd/buf.h"
#include "harvestd/common.h"
#include "harvestd/log.h"

/* Largest write gathered from nghttp2 before it goes to the connection. */
#define OUT_MAX (256 * 1024)

typedef struct stream_s {
    hv_h2_t *s;
    int32_t id;
    void *sd;                 /* NULL once cancelled */
    uint64_t due;
    uint64_t held;            /* delivered while held, not yet given back */
    int status;               /* of the head being read */
    int head_done;            /* the final head was reported: HEADERS now are trailers */
    int end_stream;           /* the server's END_STREAM came */
    int peer_rst;             /* the server's RST_STREAM came, with rst_code */
    uint32_t rst_code;
    int refused;              /* a callback refused: we reset it */
    int lib_error;            /* nghttp2 found its frames invalid */
    TAILQ_ENTRY(stream_s) link;
} stream_t;

struct hv_h2_s {
    hv_conn_t *conn;          /* NULL: a fuzzing session */
    nghttp2_session *ng;
    const hv_h2_cbs_t *cbs;
    void *owner;
    hv_h2_settings_t set;
    hv_h2_stats_t *stats;
    TAILQ_HEAD(, stream_s) streams;
    unsigned nstreams;
    int hold;
    uint64_t held;
    int depth;                /* calls of ours on the stack */
    int closed;               /* no more callbacks; freed when depth returns to 0 */
    int ended;                /* the streams' endings and on_gone were reported */
    int goaway;               /* the server's GOAWAY came */
    int32_t goaway_last;
    uint32_t goaway_code;
    int sent_goaway_error;    /* we sent a GOAWAY with an error: the server was at fault */
    uint32_t sent_code;
    int lib_error;            /* nghttp2's connection-level error */
    int starting;             /* inside hv_h2_new: no callback */
    int settled;              /* the server's first SETTINGS came */
    uv_loop_t *loop;
    uint64_t armed;           /* the due time the timer is armed for (0: none) */
    uint64_t idle_since;      /* no stream open since then (0: streams open) */
    hv_buf_t out;
};

static const char *const code_names[] = {
    "no_error",           "protocol_error",      "internal_error",      "flow_control_error",
    "settings_timeout",   "stream_closed",       "frame_size_error",    "refused_stream",
    "cancel",             "compression_error",   "connect_error",       "enhance_your_calm",
    "inadequate_security", "http_1_1_required",
};

const char *hv_h2_code_name(uint32_t code)
{
    return code < HV_ARRAY_SIZE(code_names) ? code_names[code] : "unknown";
}

static uint64_t now_ms(const hv_h2_t *s)
{
    return s->loop != NULL ? uv_now(s->loop) : 0;
}

/* ---- ending ---- */

static void free_session(hv_h2_t *s)
{
    stream_t *st;
    s->closed = 1;
    if (s->ng != NULL)
        nghttp2_session_del(s->ng);
    while ((st = TAILQ_FIRST(&s->streams)) != NULL) {
        TAILQ_REMOVE(&s->streams, st, link);
        free(st);
    }
    hv_buf_free(&s->out);
    free(s);
}

static void flush(hv_h2_t *s);
static void arm(hv_h2_t *s);

/* Calls of ours nest (the owner's callbacks call back in); nghttp2 may be asked for output
 * only by the outermost, never from inside its own callbacks. */
static void enter(hv_h2_t *s)
{
    s->depth++;
}

/* Leave a call of ours: the outermost sends what was queued; the last one out frees a
 * closed session. (The timer is armed where a deadline comes earlier or the session goes
 * idle; one that fires early finds nothing due and re-arms.) */
static void leave(hv_h2_t *s)
{
    if (s->depth == 1 && !s->closed)
        flush(s);
    if (--s->depth == 0 && s->closed)
        free_session(s);
}

/* The connection is over: each open stream ends (LOST), then the owner hears on_gone. */
static void end_session(hv_h2_t *s, int err)
{
    if (s->ended || s->closed)
        return;
    s->ended = 1;
    enter(s);
    stream_t *st;
    while (!s->closed && (st = TAILQ_FIRST(&s->streams)) != NULL) {
        TAILQ_REMOVE(&s->streams, st, link);
        s->nstreams--;
        nghttp2_session_set_stream_user_data(s->ng, st->id, NULL);
        void *sd = st->sd;
        hv_h2_end_t end = {.kind = HV_H2_LOST, .err = err};
        if (s->goaway && st->id > s->goaway_last) {
            end.kind = HV_H2_UNPROCESSED;
            s->stats->refused++;
        } else if (s->sent_goaway_error) {
            end.code = s->sent_code;
            end.ours = 1;
            end.lib_error = s->lib_error;
            end.err = 0;
        } else if (s->goaway) {
            end.goaway = 1;
            end.code = s->goaway_code;
        }
        free(st);
        if (sd != NULL)
            s->cbs->on_end(sd, &end);
    }
    if (s->conn != NULL) {
        hv_conn_close(s->conn);
        s->conn = NULL;
    }
    if (!s->closed) {
        s->closed = 1;
        if (!s->starting)
            s->cbs->on_gone(s->owner);
    }
    leave(s);
}

/* ---- output ---- */

static void flush(hv_h2_t *s)
{
    if (s->ended)
        return;
    for (;;) {
        const uint8_t *p;
        ssize_t n = nghttp2_session_mem_send(s->ng, &p);
        if (n < 0) {
            s->lib_error = (int)n;
            end_session(s, 0);
            return;
        }
        if (n == 0 || s->out.len + (size_t)n > OUT_MAX) {
            if (s->out.len > 0 && s->conn != NULL) {
                int rc = hv_conn_write(s->conn, s->out.data, s->out.len);
                hv_buf_reset(&s->out);
                if (rc != 0) {
                    end_session(s, rc);
                    return;
                }
            }
            hv_buf_reset(&s->out);
        }
        if (n == 0)
            break;
        if (hv_buf_append(&s->out, p, (size_t)n) != 0) { /* one frame over OUT_MAX */
            if (s->conn != NULL && hv_conn_write(s->conn, (const char *)p, (size_t)n) != 0) {
                end_session(s, UV_ENOBUFS);
                return;
            }
        }
    }
    if (!nghttp2_session_want_read(s->ng) && !nghttp2_session_want_write(s->ng))
        end_session(s, 0);
}

/* ---- time ---- */

static void arm(hv_h2_t *s)
{
    if (s->conn == NULL || s->ended)
        return;
    uint64_t first = 0;
    stream_t *st;
    TAILQ_FOREACH(st, &s->streams, link)
        if (st->sd != NULL && st->due != 0 && (first == 0 || st->due < first))
            first = st->due;
    if (s->nstreams == 0 && s->idle_since != 0) {
        uint64_t idle = s->idle_since + s->set.idle_ms;
        if (first == 0 || idle < first)
            first = idle;
    }
    if (first == s->armed)
        return; /* (the timer already fires then) */
    s->armed = first;
    uint64_t now = now_ms(s);
    hv_conn_set_timer(s->conn, first == 0 ? 0 : first > now ? first - now : 1);
}

static void stream_gone(hv_h2_t *s, stream_t *st)
{
    TAILQ_REMOVE(&s->streams, st, link);
    s->nstreams--;
    if (st->held > 0) {
        s->held -= st->held;
        nghttp2_session_consume_connection(s->ng, st->held);
    }
    free(st);
    if (s->nstreams == 0) {
        s->idle_since = now_ms(s);
        arm(s);
    }
}

/* ---- nghttp2's callbacks ---- */

static stream_t *stream_of(nghttp2_session *ng, int32_t id)
{
    return id > 0 ? nghttp2_session_get_stream_user_data(ng, id) : NULL;
}

static int on_begin_headers(nghttp2_session *ng, const nghttp2_frame *frame, void *ud)
{
    (void)ud;
    stream_t *st = stream_of(ng, frame->hd.stream_id);
    if (st != NULL && !st->head_done)
        st->status = 0;
    return 0;
}

static int on_header(nghttp2_session *ng, const nghttp2_frame *frame, const uint8_t *name,
                     size_t nlen, const uint8_t *value, size_t vlen, uint8_t flags, void *ud)
{
    (void)flags;
    hv_h2_t *s = ud;
    stream_t *st = stream_of(ng, frame->hd.stream_id);
    if (st == NULL || st->sd == NULL || st->head_done || s->closed ||
        frame->hd.type != NGHTTP2_HEADERS)
        return 0; /* trailers, pushes, or a stream no one reads any more */
    if (nlen == 7 && memcmp(name, ":status", 7) == 0) {
        int status = 0;
        for (size_t i = 0; i < vlen && i < 3; i++)
            status = status * 10 + (value[i] - '0'); /* nghttp2 checked: 3 digits */
        st->status = status;
        return 0;
    }
    if (st->status >= 100 && st->status < 200)
        return 0; /* an interim head's fields */
    if (s->cbs->on_field(st->sd, (const char *)name, nlen, (const char *)value, vlen) != 0) {
        st->refused = 1;
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    return 0;
}

static int on_frame_recv(nghttp2_session *ng, const nghttp2_frame *frame, void *ud)
{
    hv_h2_t *s = ud;
    if (s->closed)
        return 0;
    switch (frame->hd.type) {
    case NGHTTP2_GOAWAY:
        s->goaway = 1;
        s->goaway_last = frame->goaway.last_stream_id;
        s->goaway_code = frame->goaway.error_code;
        s->stats->goaways++;
        HV_LOG(HV_LOG_DEBUG, "event=h2_goaway conn=%" PRIu64 " last_stream=%d code=%s",
               s->conn != NULL ? s->conn->id : 0, (int)s->goaway_last,
               hv_h2_code_name(s->goaway_code));
        return 0;
    case NGHTTP2_SETTINGS:
        if (!(frame->hd.flags & NGHTTP2_FLAG_ACK)) {
            s->settled = 1;
            if (s->cbs->on_room != NULL)
                s->cbs->on_room(s->owner);
        }
        return 0;
    case NGHTTP2_RST_STREAM: {
        stream_t *st = stream_of(ng, frame->hd.stream_id);
        if (st != NULL) {
            st->peer_rst = 1;
            st->rst_code = frame->rst_stream.error_code;
        }
        return 0;
    }
    case NGHTTP2_HEADERS:
    case NGHTTP2_DATA: {
        stream_t *st = stream_of(ng, frame->hd.stream_id);
        if (st == NULL || st->sd == NULL)
            return 0;
        if (frame->hd.type == NGHTTP2_HEADERS && !st->head_done && st->status >= 200) {
            st->head_done = 1;
            if (s->cbs->on_head(st->sd, st->status) != 0) {
                st->refused = 1;
                nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_CANCEL);
                return 0;
            }
        }
        if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)
            st->end_stream = 1;
        return 0;
    }
    default:
        return 0;
    }
}

static int on_frame_send(nghttp2_session *ng, const nghttp2_frame *frame, void *ud)
{
    (void)ng;
    hv_h2_t *s = ud;
    if (frame->hd.type == NGHTTP2_GOAWAY && frame->goaway.error_code != NGHTTP2_NO_ERROR) {
        s->sent_goaway_error = 1;
        s->sent_code = frame->goaway.error_code;
    }
    return 0;
}

static int on_data(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data,
                   size_t len, void *ud)
{
    (void)flags;
    hv_h2_t *s = ud;
    stream_t *st = stream_of(ng, id);
    if (st == NULL || st->sd == NULL || s->closed || st->refused) {
        nghttp2_session_consume(ng, id, len); /* no one reads it: give it back */
        return 0;
    }
    if (s->cbs->on_data(st->sd, (const char *)data, len) != 0) {
        st->refused = 1;
        nghttp2_session_consume(ng, id, len);
        nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
        return 0;
    }
    if (s->hold) {
        st->held += len;
        s->held += len;
    } else {
        nghttp2_session_consume(ng, id, len);
    }
    return 0;
}

static int on_stream_close(nghttp2_session *ng, int32_t id, uint32_t code, void *ud)
{
    hv_h2_t *s = ud;
    stream_t *st = stream_of(ng, id);
    if (st == NULL)
        return 0;
    nghttp2_session_set_stream_user_data(ng, id, NULL);
    void *sd = st->sd;
    hv_h2_end_t end = {.kind = HV_H2_COMPLETE, .code = code};
    if (st->end_stream && code == NGHTTP2_NO_ERROR && st->head_done && !st->refused) {
        end.kind = HV_H2_COMPLETE;
    } else if (st->peer_rst && st->rst_code == NGHTTP2_REFUSED_STREAM) {
        end.kind = HV_H2_UNPROCESSED;
        s->stats->refused++;
    } else if (st->peer_rst && !st->refused) {
        end.kind = HV_H2_RESET;
        end.code = st->rst_code;
        s->stats->reset++;
    } else if (!st->refused && s->goaway && id > s->goaway_last) {
        end.kind = HV_H2_UNPROCESSED;
        s->stats->refused++;
    } else if (st->end_stream && st->head_done && !st->refused) {
        end.kind = HV_H2_COMPLETE; /* whole, then reset (NO_ERROR or not): it is whole */
    } else {
        end.kind = HV_H2_LOCAL;
        end.lib_error = st->lib_error;
        if (st->refused)
            end.code = NGHTTP2_CANCEL;
    }
    stream_gone(s, st);
    if (sd != NULL && !s->closed) {
        s->cbs->on_end(sd, &end);
        if (!s->closed && s->cbs->on_room != NULL && !s->ended)
            s->cbs->on_room(s->owner);
    }
    return 0;
}

static int on_invalid_frame(nghttp2_session *ng, const nghttp2_frame *frame, int lib_error,
                            void *ud)
{
    hv_h2_t *s = ud;
    stream_t *st = stream_of(ng, frame->hd.stream_id);
    if (st != NULL)
        st->lib_error = lib_error;
    else
        s->lib_error = lib_error;
    return 0;
}

static int on_invalid_header(nghttp2_session *ng, const nghttp2_frame *frame,
                             const uint8_t *name, size_t nlen, const uint8_t *value,
                             size_t vlen, uint8_t flags, void *ud)
{
    (void)name;
    (void)nlen;
    (void)value;
    (void)vlen;
    (void)flags;
    (void)ud;
    stream_t *st = stream_of(ng, frame->hd.stream_id);
    if (st != NULL)
        st->lib_error = NGHTTP2_ERR_HTTP_HEADER;
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* a field RFC 9113 forbids: reset */
}

static int on_error(nghttp2_session *ng, int lib_error, const char *msg, size_t len, void *ud)
{
    (void)ng;
    hv_h2_t *s = ud;
    if (s->lib_error == 0)
        s->lib_error = lib_error;
    HV_LOG(HV_LOG_DEBUG, "event=h2_error conn=%" PRIu64 " error=\"%.*s\"",
           s->conn != NULL ? s->conn->id : 0, (int)HV_MIN(len, 200), msg);
    return 0;
}

/* ---- the connection's callbacks (the session owns it) ---- */

static void conn_on_connect(hv_conn_t *c, int status)
{
    (void)c;
    (void)status; /* the session starts on an open connection */
}

static void conn_on_read(hv_conn_t *c, const char *data, size_t len)
{
    hv_h2_t *s = c->data;
    enter(s);
    ssize_t n = nghttp2_session_mem_recv(s->ng, (const uint8_t *)data, len);
    if (n < 0 && !s->closed) {
        /* A fatal error (a flood, a callback's failure): say so, and end. */
        s->lib_error = (int)n;
        nghttp2_session_terminate_session(s->ng, NGHTTP2_PROTOCOL_ERROR);
        flush(s);
        end_session(s, 0);
    }
    leave(s);
}

static void conn_on_error(hv_conn_t *c, int err)
{
    hv_h2_t *s = c->data;
    enter(s);
    end_session(s, err);
    leave(s);
}

static void conn_on_timeout(hv_conn_t *c)
{
    hv_h2_t *s = c->data;
    uint64_t now = now_ms(s);
    s->armed = 0; /* (it fired) */
    enter(s);
    if (s->nstreams == 0 && s->idle_since != 0 && s->idle_since + s->set.idle_ms <= now) {
        nghttp2_session_terminate_session(s->ng, NGHTTP2_NO_ERROR);
        flush(s);
        end_session(s, 0);
        leave(s);
        return;
    }
    /* Each stream whose deadline passed, one at a time: the owner's answer may change the
     * list (cancel the stream, close the session). */
    for (int again = 1; again && !s->closed;) {
        again = 0;
        stream_t *st;
        TAILQ_FOREACH(st, &s->streams, link)
        {
            if (st->sd != NULL && st->due != 0 && st->due <= now) {
                st->due = 0;
                s->cbs->on_timeout(st->sd);
                again = 1;
                break;
            }
        }
    }
    if (!s->closed)
        arm(s);
    leave(s);
}

static const hv_conn_cbs_t conn_cbs = {conn_on_connect, conn_on_read, conn_on_error,
                                       conn_on_timeout};

/* ---- the session ---- */

static hv_h2_t *session_new(uv_loop_t *loop, hv_conn_t *c, const hv_h2_settings_t *set,
                            const hv_h2_cbs_t *cbs, void *owner, hv_h2_stats_t *stats)
{
    hv_h2_t *s = hv_xcalloc(1, sizeof(*s));
    s->conn = c;
    s->loop = loop;
    s->set = *set;
    s->cbs = cbs;
    s->owner = owner;
    s->stats = stats;
    TAILQ_INIT(&s->streams);
    hv_buf_init(&s->out, OUT_MAX);

    nghttp2_session_callbacks *cb;
    nghttp2_option *opt;
    if (nghttp2_session_callbacks_new(&cb) != 0) {
        free_session(s);
        return NULL;
    }
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
    nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
    nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(cb, on_invalid_frame);
    nghttp2_session_callbacks_set_on_invalid_header_callback(cb, on_invalid_header);
    nghttp2_session_callbacks_set_error_callback2(cb, on_error);
    int rc = nghttp2_option_new(&opt);
    if (rc == 0) {
        nghttp2_option_set_no_auto_window_update(opt, 1);
        /* Until the server's SETTINGS say otherwise, one stream: a server that allows fewer
         * than we would open must not see them refused. */
        nghttp2_option_set_peer_max_concurrent_streams(opt, 1);
        nghttp2_option_set_max_settings(opt, 64);
        rc = nghttp2_session_client_new2(&s->ng, cb, s, opt);
        nghttp2_option_del(opt);
    }
    nghttp2_session_callbacks_del(cb);
    if (rc != 0) {
        s->ng = NULL;
        free_session(s);
        return NULL;
    }
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, set->stream_window},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, set->max_header_list},
    };
    nghttp2_submit_settings(s->ng, NGHTTP2_FLAG_NONE, iv, HV_ARRAY_SIZE(iv));
    /* The connection's window: every stream's at once. */
    uint64_t conn_window = (uint64_t)set->stream_window * HV_MAX(set->max_streams, 1u);
    nghttp2_session_set_local_window_size(s->ng, NGHTTP2_FLAG_NONE, 0,
                                          (int32_t)HV_MIN(conn_window, (uint64_t)INT32_MAX));
    stats->sessions++;
    return s;
}

hv_h2_t *hv_h2_new(uv_loop_t *loop, hv_conn_t *c, const hv_h2_settings_t *set,
                   const hv_h2_cbs_t *cbs, void *owner, hv_h2_stats_t *stats)
{
    hv_h2_t *s = session_new(loop, c, set, cbs, owner, stats);
    if (s == NULL) {
        hv_conn_close(c);
        return NULL;
    }
    hv_conn_set_owner(c, &conn_cbs, s);
    hv_conn_read_start(c);
    s->idle_since = now_ms(s);
    s->starting = 1;
    enter(s);
    flush(s);
    if (s->ended) { /* (nghttp2 could not even write its preface) */
        free_session(s);
        return NULL;
    }
    leave(s);
    s->starting = 0;
    arm(s); /* the idle timeout, until a stream starts */
    return s;
}

unsigned hv_h2_room(const hv_h2_t *s)
{
    if (s->closed || s->ended || s->goaway || !nghttp2_session_check_request_allowed(s->ng))
        return 0;
    uint32_t peer = nghttp2_session_get_remote_settings(s->ng,
                                                        NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
    uint32_t limit = HV_MIN(s->set.max_streams, peer);
    return s->nstreams < limit ? limit - s->nstreams : 0;
}

int hv_h2_settled(const hv_h2_t *s)
{
    return s->settled;
}

unsigned hv_h2_open_streams(const hv_h2_t *s)
{
    return s->nstreams;
}

/* nghttp2_nv's pointers are not const, but nghttp2 copies the fields and never writes them. */
static uint8_t *bytes(const char *p)
{
    uint8_t *q;
    memcpy(&q, &p, sizeof(q));
    return q;
}

int32_t hv_h2_submit(hv_h2_t *s, const hv_h2_field_t *fields, size_t n, void *sd)
{
    if (hv_h2_room(s) == 0)
        return UV_EAGAIN;
    nghttp2_nv nv[64 + 2 * 32];
    if (n > HV_ARRAY_SIZE(nv))
        return UV_EINVAL;
    for (size_t i = 0; i < n; i++)
        nv[i] = (nghttp2_nv){bytes(fields[i].name), bytes(fields[i].value), fields[i].nlen,
                             fields[i].vlen, NGHTTP2_NV_FLAG_NONE};
    stream_t *st = hv_xcalloc(1, sizeof(*st));
    st->s = s;
    st->sd = sd;
    int32_t id = nghttp2_submit_request(s->ng, NULL, nv, n, NULL, st);
    if (id < 0) {
        free(st);
        return UV_EINVAL;
    }
    st->id = id;
    TAILQ_INSERT_TAIL(&s->streams, st, link);
    s->nstreams++;
    s->idle_since = 0;
    s->stats->streams++;
    enter(s);
    leave(s); /* sends it, unless inside a callback of ours: then the outermost call does */
    return id;
}

void hv_h2_cancel(hv_h2_t *s, int32_t id)
{
    if (s->closed || s->ended)
        return;
    stream_t *st = stream_of(s->ng, id);
    if (st == NULL)
        return;
    st->sd = NULL;
    if (st->held > 0) {
        nghttp2_session_consume(s->ng, id, st->held);
        s->held -= st->held;
        st->held = 0;
    }
    nghttp2_submit_rst_stream(s->ng, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
    enter(s);
    leave(s);
}

void hv_h2_set_deadline(hv_h2_t *s, int32_t id, uint64_t due_ms)
{
    stream_t *st = s->closed ? NULL : stream_of(s->ng, id);
    if (st == NULL)
        return;
    st->due = due_ms;
    if (due_ms != 0 && (s->armed == 0 || due_ms < s->armed))
        arm(s);
    else if (due_ms == 0 && s->armed != 0)
        arm(s);
}

void hv_h2_hold(hv_h2_t *s, int on)
{
    if (s->closed || s->hold == on)
        return;
    s->hold = on;
    if (on)
        return;
    stream_t *st;
    TAILQ_FOREACH(st, &s->streams, link)
    {
        if (st->held > 0) {
            nghttp2_session_consume(s->ng, st->id, st->held);
            st->held = 0;
        }
    }
    s->held = 0;
    enter(s);
    leave(s);
}

uint64_t hv_h2_held(const hv_h2_t *s)
{
    return s->held;
}

void hv_h2_close(hv_h2_t *s)
{
    if (s->closed)
        return;
    s->closed = 1;
    if (!s->ended && s->conn != NULL && s->depth == 0) { /* (not from inside nghttp2) */
        nghttp2_session_terminate_session(s->ng, NGHTTP2_NO_ERROR);
        const uint8_t *p;
        ssize_t n;
        while ((n = nghttp2_session_mem_send(s->ng, &p)) > 0)
            (void)hv_conn_write(s->conn, (const char *)p, (size_t)n);
    }
    s->ended = 1;
    if (s->conn != NULL) {
        hv_conn_close(s->conn);
        s->conn = NULL;
    }
    if (s->depth == 0)
        free_session(s);
}

/* ---- fuzzing ---- */

hv_h2_t *hv_h2_fuzz_new(const hv_h2_settings_t *set, const hv_h2_cbs_t *cbs, void *owner,
                        hv_h2_stats_t *stats)
{
    hv_h2_t *s = session_new(NULL, NULL, set, cbs, owner, stats);
    if (s != NULL) {
        s->starting = 1;
        enter(s);
        flush(s);
        s->depth--;
        s->starting = 0;
    }
    return s;
}

int hv_h2_fuzz_feed(hv_h2_t *s, const uint8_t *data, size_t len)
{
    if (s->closed)
        return NGHTTP2_ERR_EOF;
    enter(s);
    ssize_t n = nghttp2_session_mem_recv(s->ng, data, len);
    if (n < 0 && !s->closed) {
        s->lib_error = (int)n;
        end_session(s, 0);
    } else if (!s->closed) {
        flush(s);
    }
    int closed = s->closed;
    s->depth--; /* the owner frees it (hv_h2_fuzz_free) */
    return n < 0 ? (int)n : closed ? NGHTTP2_ERR_EOF : 0;
}

void hv_h2_fuzz_free(hv_h2_t *s)
{
    if (!s->closed) {
        s->closed = 1;
        s->ended = 1;
    }
    free_session(s);
}

const char *hv_h2_end_name(const hv_h2_end_t *e)
{
    switch (e->lib_error) {
    case NGHTTP2_ERR_HTTP_HEADER:
        return "invalid_header";
    case NGHTTP2_ERR_HTTP_MESSAGING:
        return "invalid_message";
    case NGHTTP2_ERR_FLOODED:
        return "flooded";
    case NGHTTP2_ERR_HEADER_COMP:
        return "compression_error";
    case NGHTTP2_ERR_FLOW_CONTROL:
        return "flow_control_error";
    case NGHTTP2_ERR_FRAME_SIZE_ERROR:
        return "frame_size_error";
    case NGHTTP2_ERR_SETTINGS_EXPECTED:
        return "settings_expected";
    case NGHTTP2_ERR_BAD_CLIENT_MAGIC: /* (a server's error) */
    case NGHTTP2_ERR_PROTO:
    case 0:
    default:
        return hv_h2_code_name(e->code);
    }
}
