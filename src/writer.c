/* writer.c: batched, ordered, asynchronous appends with one write in flight. */
#include "harvestd/writer.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harvestd/buf.h"
#include "harvestd/common.h"
#include "harvestd/log.h"

/* Start a write at once when this much is pending instead of waiting for the timer. */
#define FLUSH_BYTES (64 * 1024)
/* Above this, the writer is "full" and the pipeline stops handing it records. */
#define HIGH_WATER (1024 * 1024)
/* Hard cap of the pending buffer: a few maximal records. */
#define PENDING_MAX ((size_t)256 << 20)
/* Records are pushed only while the buffer is below HIGH_WATER, so a full buffer would be a
 * write error of ours: a record that fits the cap of its line must always fit here. */
_Static_assert(PENDING_MAX >= HIGH_WATER + HV_RECORD_LINE_MAX,
               "the pending buffer takes any record pushed below the high-water mark");

struct hv_writer_s {
    uv_loop_t *loop;
    uv_file fd;
    int is_stdout;
    hv_writer_cbs_t cbs;
    void *ud;
    uint64_t flush_ms;
    int fsync_always;
    uint64_t fsync_interval_ms;
    uint64_t last_sync_ms;
    int syncing;
    int dirty;                /* written since the last fsync */
    uint64_t sync_want;       /* hv_writer_sync_soon(): records to fsync without waiting */
    int eager;                /* hv_writer_set_eager(): write and sync at once */
    uint64_t pending_n;       /* records in `pending` */
    uint64_t inflight_n;      /* records in `inflight` */
    uint64_t written;         /* records wholly written to the file */
    uint64_t sync_upto;       /* records the fsync in flight covers */
    uint64_t durable;         /* records reported durable */
    hv_buf_t pending;
    hv_buf_t inflight;
    size_t inflight_off;
    int writing;
    int err;
    int finishing;
    void (*done)(void *ud, int status);
    uv_fs_t write_req;
    uv_fs_t sync_req;
    uv_timer_t timer;
    int timer_armed;
    uint64_t bytes;
};

static void start_write(hv_writer_t *w);

/* Under the policy, the first `n` records are durable now. */
static void report_durable(hv_writer_t *w, uint64_t n)
{
    if (n <= w->durable)
        return;
    w->durable = n;
    if (w->cbs.on_durable != NULL)
        w->cbs.on_durable(w->ud, n);
}

/* Whether the policy syncs while writing (else only at the end, or never for stdout). */
static int syncs(const hv_writer_t *w)
{
    return !w->is_stdout && (w->fsync_always || w->fsync_interval_ms > 0);
}

int hv_writer_open(uv_loop_t *loop, const char *path, const hv_writer_opts_t *opts,
                   const hv_writer_cbs_t *cbs, void *ud, hv_writer_t **out)
{
    uv_fs_t req;
    uv_file fd;

    *out = NULL;
    if (strcmp(path, "-") == 0) {
        fd = STDOUT_FILENO;
    } else {
        int flags = O_WRONLY | O_APPEND | O_CLOEXEC | (opts->append ? 0 : O_CREAT | O_EXCL);
        fd = uv_fs_open(NULL, &req, path, flags, 0644, NULL);
        uv_fs_req_cleanup(&req);
        if (fd < 0)
            return fd;
    }
    hv_writer_t *w = hv_xcalloc(1, sizeof(*w));
    w->loop = loop;
    w->fd = fd;
    w->is_stdout = fd == STDOUT_FILENO;
    w->cbs = *cbs;
    w->ud = ud;
    w->flush_ms = opts->flush_ms;
    w->fsync_always = opts->fsync_always;
    w->fsync_interval_ms = opts->fsync_interval_ms;
    w->last_sync_ms = uv_now(loop);
    hv_buf_init(&w->pending, PENDING_MAX);
    hv_buf_init(&w->inflight, PENDING_MAX);
    uv_timer_init(loop, &w->timer);
    w->timer.data = w;
    *out = w;
    return 0;
}

static void fail(hv_writer_t *w, int err)
{
    if (w->err != 0)
        return;
    w->err = err;
    uv_timer_stop(&w->timer);
    w->cbs.on_error(w->ud, err);
}

static void start_sync(hv_writer_t *w);

static void on_timer(uv_timer_t *t)
{
    hv_writer_t *w = t->data;
    w->timer_armed = 0;
    if (w->pending.len > 0)
        start_write(w);
    else if (w->dirty && !w->writing && !w->syncing && w->err == 0)
        start_sync(w);
}

static void on_timer_close(uv_handle_t *h)
{
    hv_writer_t *w = h->data;
    hv_buf_free(&w->pending);
    hv_buf_free(&w->inflight);
    free(w);
}

static void complete_finish(hv_writer_t *w)
{
    if (w->err == 0)
        report_durable(w, w->written);
    if (!w->is_stdout) {
        uv_fs_t req;
        int rc = uv_fs_close(NULL, &req, w->fd, NULL);
        uv_fs_req_cleanup(&req);
        if (rc != 0 && w->err == 0)
            w->err = rc;
    }
    w->done(w->ud, w->err);
    uv_close((uv_handle_t *)&w->timer, on_timer_close);
}

static void on_finish_timer(uv_timer_t *t)
{
    complete_finish(t->data);
}

static void on_fsync(uv_fs_t *req)
{
    hv_writer_t *w = req->data;
    int rc = (int)req->result;
    uv_fs_req_cleanup(req);
    if (rc < 0 && w->err == 0)
        w->err = rc;
    complete_finish(w);
}

static void maybe_finish(hv_writer_t *w)
{
    if (!w->finishing || w->writing || w->syncing || (w->pending.len > 0 && w->err == 0))
        return;
    w->finishing = 0; /* once */
    if (w->err != 0 || w->is_stdout) {
        /* Standard output may be a pipe or a terminal: there is nothing to fsync. The done
         * callback always runs from the loop, never inside the caller's own call. */
        uv_timer_start(&w->timer, on_finish_timer, 0, 0);
        return;
    }
    w->sync_req.data = w;
    int rc = uv_fs_fsync(w->loop, &w->sync_req, w->fd, on_fsync);
    if (rc != 0) {
        w->err = rc;
        uv_timer_start(&w->timer, on_finish_timer, 0, 0);
    }
}

static void write_more(hv_writer_t *w);
static void on_policy_fsync(uv_fs_t *req);

static void on_write(uv_fs_t *req)
{
    hv_writer_t *w = req->data;
    ssize_t n = req->result;
    uv_fs_req_cleanup(req);

    if (n < 0) {
        w->writing = 0;
        fail(w, (int)n);
        maybe_finish(w);
        return;
    }
    if (n == 0) {
        /* No progress on a non-empty write: treat as an I/O error rather than spin. */
        w->writing = 0;
        fail(w, UV_EIO);
        maybe_finish(w);
        return;
    }
    w->bytes += (uint64_t)n;
    w->inflight_off += (size_t)n;
    if (w->inflight_off < w->inflight.len) {
        /* A short write (a full disk starts this way): continue with the rest; the next
         * attempt reports the real error if there is one. */
        write_more(w);
        return;
    }
    w->writing = 0;
    hv_buf_reset(&w->inflight);
    w->inflight_off = 0;
    w->written += w->inflight_n;
    w->inflight_n = 0;
    w->dirty = !w->is_stdout;
    if (!syncs(w))
        report_durable(w, w->written); /* as durable as this policy makes them */
    if (w->dirty && !w->finishing && syncs(w)) {
        uint64_t since = uv_now(w->loop) - w->last_sync_ms;
        if (w->fsync_always || w->eager || w->sync_want > w->sync_upto ||
            since >= w->fsync_interval_ms) {
            start_sync(w);
            if (w->syncing) {
                w->cbs.on_drain(w->ud);
                return;
            }
        } else if (!w->timer_armed && w->pending.len == 0) {
            /* Nothing else to write soon: make sure these bytes reach the disk in time. */
            uv_timer_start(&w->timer, on_timer, w->fsync_interval_ms - since, 0);
            w->timer_armed = 1;
        }
    }
    /* Whatever arrived during this write has waited long enough already. */
    if (w->pending.len > 0)
        start_write(w);
    w->cbs.on_drain(w->ud);
    maybe_finish(w);
}

/* Durability policy: the next write waits for this fsync (one operation at a time). */
static void start_sync(hv_writer_t *w)
{
    w->syncing = 1;
    w->dirty = 0;
    w->sync_upto = w->written;
    w->sync_req.data = w;
    int rc = uv_fs_fsync(w->loop, &w->sync_req, w->fd, on_policy_fsync);
    if (rc != 0) {
        w->syncing = 0;
        fail(w, rc);
    }
}

static void on_policy_fsync(uv_fs_t *req)
{
    hv_writer_t *w = req->data;
    int rc = (int)req->result;
    uv_fs_req_cleanup(req);
    w->syncing = 0;
    w->last_sync_ms = uv_now(w->loop);
    if (rc < 0)
        fail(w, rc);
    else
        report_durable(w, w->sync_upto);
    if (w->pending.len > 0)
        start_write(w);
    w->cbs.on_drain(w->ud);
    maybe_finish(w);
}

static void write_more(hv_writer_t *w)
{
    uv_buf_t buf = uv_buf_init(w->inflight.data + w->inflight_off,
                               (unsigned)(w->inflight.len - w->inflight_off));
    w->write_req.data = w;
    int rc = uv_fs_write(w->loop, &w->write_req, w->fd, &buf, 1, -1, on_write);
    if (rc != 0) {
        w->writing = 0;
        fail(w, rc);
    }
}

static void start_write(hv_writer_t *w)
{
    if (w->writing || w->syncing || w->err != 0 || w->pending.len == 0)
        return;
    if (w->timer_armed) {
        uv_timer_stop(&w->timer);
        w->timer_armed = 0;
    }
    hv_buf_t tmp = w->inflight;
    w->inflight = w->pending;
    w->pending = tmp;
    w->inflight_n = w->pending_n;
    w->pending_n = 0;
    w->inflight_off = 0;
    w->writing = 1;
    write_more(w);
}

int hv_writer_push(hv_writer_t *w, hv_record_t *rec)
{
    if (w->err != 0) {
        hv_record_free(rec);
        return w->err;
    }
    int rc = hv_record_append_json(rec, &w->pending);
    hv_record_free(rec);
    if (rc != 0) {
        fail(w, rc);
        return rc;
    }
    w->pending_n++;
    if (w->pending.len >= FLUSH_BYTES || w->flush_ms == 0 || w->eager) {
        start_write(w);
    } else if (!w->writing && !w->syncing &&
               (!w->timer_armed || uv_timer_get_due_in(&w->timer) > w->flush_ms)) {
        /* (An armed timer may be waiting for a distant fsync: records must not wait that
         * long.) */
        uv_timer_start(&w->timer, on_timer, w->flush_ms, 0);
        w->timer_armed = 1;
    }
    return 0;
}

int hv_writer_full(const hv_writer_t *w)
{
    return w->pending.len >= HIGH_WATER;
}

void hv_writer_finish(hv_writer_t *w, void (*done)(void *ud, int status))
{
    w->done = done;
    w->finishing = 1;
    start_write(w);
    maybe_finish(w);
}

uint64_t hv_writer_bytes(const hv_writer_t *w)
{
    return w->bytes;
}

void hv_writer_sync_soon(hv_writer_t *w)
{
    /* Once finishing, the finish's own fsync covers everything (and owns sync_req: its
     * `finishing` flag is cleared when that fsync starts, `done` is not). */
    if (!syncs(w) || w->err != 0 || w->finishing || w->done != NULL)
        return;
    w->sync_want = w->written + w->inflight_n + w->pending_n;
    if (w->writing || w->syncing || w->pending.len > 0) {
        /* The writes in flight and pending end with an fsync. */
        if (w->pending.len > 0)
            start_write(w);
    } else if (w->dirty) {
        if (w->timer_armed) {
            uv_timer_stop(&w->timer);
            w->timer_armed = 0;
        }
        start_sync(w);
    }
}

uint64_t hv_writer_unsynced(const hv_writer_t *w)
{
    return w->pending_n + w->inflight_n + (w->written - w->durable);
}

void hv_writer_set_eager(hv_writer_t *w, int on)
{
    w->eager = on;
    if (on)
        hv_writer_sync_soon(w);
}
