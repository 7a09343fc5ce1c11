/*
 * reader.c: incremental line reader over uv_fs_read.
 *
 * At most one read is in flight. After a read, lines are delivered from the chunk until the
 * sink asks to pause; resume continues from the same position. A line that spans chunks is
 * carried in a bounded buffer; beyond its bound the rest of the line is dropped and the line
 * is flagged overlong.
 */
#include "harvestd/reader.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harvestd/common.h"

typedef struct {
    hv_source_t base;
    uv_loop_t *loop;
    char *path;
    uv_file fd;
    hv_sink_t sink;
    void *ud;
    uv_fs_t read_req;
    int reading;
    int paused;
    int eof;
    int closed;
    int ended;
    char chunk[HV_READER_CHUNK];
    size_t chunk_len;
    size_t chunk_pos;
    char line[HV_READER_LINE_MAX];
    size_t line_len;
    int line_overlong;
    uint64_t lineno;
    uint64_t offset; /* bytes read from the file */
    uint64_t size;   /* a regular file's size at open; 0: not known */
    uv_idle_t kick; /* starts reading (and resumes) from the loop, not from the caller */
} reader_t;

static void reader_start(hv_source_t *s, const hv_sink_t *sink, void *ud);
static void reader_resume(hv_source_t *s);
static void reader_close(hv_source_t *s);
static const char *reader_name(const hv_source_t *s);
int hv_reader_rules_name(int fd, char *name, size_t cap)
{
    char line[256];
    ssize_t n = pread(fd, line, sizeof(line) - 1, 0);
    if (n <= 0 || cap == 0)
        return 0;
    line[n] = '\0';
    line[strcspn(line, "\r\n")] = '\0';
    const char *p = line;
    if (memcmp(p, "\xef\xbb\xbf", 3) == 0)
        p += 3;
    if (strncmp(p, "#!", 2) != 0 || (p = strstr(p + 2, "rules=")) == NULL)
        return 0;
    p += 6;
    size_t len = HV_MIN(strcspn(p, " \t"), cap - 1);
    memcpy(name, p, len);
    name[len] = '\0';
    return 1;
}

static void reader_position(const hv_source_t *s, uint64_t *consumed, uint64_t *size);

static const hv_source_ops_t reader_ops = {reader_start, reader_resume, reader_close,
                                           reader_name, reader_position};

/* Deliver one complete line; returns the sink's pause request. */
static int deliver(reader_t *r, const char *s, size_t len, int overlong)
{
    r->lineno++;
    /* Editors on some systems start a UTF-8 file with a byte order mark: it is not part of
     * the first URL. */
    if (r->lineno == 1 && len >= 3 && memcmp(s, "\xef\xbb\xbf", 3) == 0) {
        s += 3;
        len -= 3;
    }
    /* An overlong line is a prefix: its start is trimmed and read for '#' like any line's,
     * its end (which was cut) is not. */
    while (len > 0 && hv_ascii_is_ctype_space((unsigned char)*s)) {
        s++;
        len--;
    }
    while (!overlong && len > 0 && hv_ascii_is_ctype_space((unsigned char)s[len - 1]))
        len--;
    if ((len == 0 && !overlong) || (len > 0 && *s == '#'))
        return 0;
    return r->sink.on_line(r->ud, s, len, r->lineno, overlong, NULL);
}

static void finish(reader_t *r, int status)
{
    if (r->ended)
        return;
    r->ended = 1;
    r->sink.on_end(r->ud, status);
}

/* Append to the carried line, remembering if it outgrew the buffer. */
static void carry(reader_t *r, const char *s, size_t len)
{
    size_t room = sizeof(r->line) - r->line_len;
    if (len > room) {
        len = room;
        r->line_overlong = 1;
    }
    memcpy(r->line + r->line_len, s, len);
    r->line_len += len;
}

static void on_read(uv_fs_t *req);

static void on_kick_close(uv_handle_t *h)
{
    reader_t *r = hv_container_of(h, reader_t, kick);
    free(r->path);
    free(r);
}

static void close_fd(reader_t *r)
{
    if (r->fd != STDIN_FILENO) {
        uv_fs_t req;
        uv_fs_close(NULL, &req, r->fd, NULL);
        uv_fs_req_cleanup(&req);
    }
}

/* The fd is closed only when no read is in flight, so it cannot be reused under one. */
static void destroy(reader_t *r)
{
    close_fd(r);
    uv_close((uv_handle_t *)&r->kick, on_kick_close);
}

static void start_read(reader_t *r)
{
    if (r->reading || r->eof || r->closed)
        return;
    r->read_req.data = r;
    uv_buf_t buf = uv_buf_init(r->chunk, sizeof(r->chunk));
    int rc = uv_fs_read(r->loop, &r->read_req, r->fd, &buf, 1, -1, on_read);
    if (rc != 0) {
        finish(r, rc);
        return;
    }
    r->reading = 1;
}

/* Hand out lines from the current chunk until it is used up or the sink pauses. */
static void pump(reader_t *r)
{
    while (!r->paused && !r->closed) {
        if (r->chunk_pos == r->chunk_len) {
            if (!r->eof) {
                start_read(r);
                return;
            }
            if (r->line_len > 0 || r->line_overlong) {
                /* Last line without a newline. */
                int overlong = r->line_overlong;
                size_t len = r->line_len;
                r->line_len = 0;
                r->line_overlong = 0;
                r->paused = deliver(r, r->line, len, overlong);
                continue;
            }
            finish(r, 0);
            return;
        }
        const char *start = r->chunk + r->chunk_pos;
        size_t avail = r->chunk_len - r->chunk_pos;
        const char *nl = memchr(start, '\n', avail);
        if (nl == NULL) {
            carry(r, start, avail);
            r->chunk_pos = r->chunk_len;
            continue;
        }
        size_t len = (size_t)(nl - start);
        r->chunk_pos += len + 1;
        if (r->line_len == 0 && !r->line_overlong) {
            /* Within one chunk: held to the same limit as a line carried across chunks. */
            int overlong = len > HV_READER_LINE_MAX;
            r->paused = deliver(r, start, overlong ? HV_READER_LINE_MAX : len, overlong);
        } else {
            carry(r, start, len);
            int overlong = r->line_overlong;
            size_t total = r->line_len;
            r->line_len = 0;
            r->line_overlong = 0;
            r->paused = deliver(r, r->line, total, overlong);
        }
    }
}

static void on_read(uv_fs_t *req)
{
    reader_t *r = req->data;
    ssize_t n = req->result;
    uv_fs_req_cleanup(req);
    r->reading = 0;
    if (r->closed) {
        destroy(r);
        return;
    }
    if (n < 0) {
        finish(r, (int)n);
        return;
    }
    if (n == 0)
        r->eof = 1;
    r->offset += (uint64_t)n;
    r->chunk_len = (size_t)n;
    r->chunk_pos = 0;
    pump(r);
}

static void on_kick(uv_idle_t *h)
{
    reader_t *r = h->data;
    uv_idle_stop(h);
    pump(r);
}

static void reader_start(hv_source_t *s, const hv_sink_t *sink, void *ud)
{
    reader_t *r = (reader_t *)s;
    r->sink = *sink;
    r->ud = ud;
    uv_idle_start(&r->kick, on_kick);
}

static void reader_resume(hv_source_t *s)
{
    reader_t *r = (reader_t *)s;
    if (!r->paused || r->closed)
        return;
    r->paused = 0;
    uv_idle_start(&r->kick, on_kick);
}

static void reader_close(hv_source_t *s)
{
    reader_t *r = (reader_t *)s;
    if (r->closed)
        return;
    r->closed = 1;
    uv_idle_stop(&r->kick);
    if (r->reading)
        return; /* on_read destroys once the read returns */
    destroy(r);
}

static const char *reader_name(const hv_source_t *s)
{
    return ((const reader_t *)s)->path;
}

/* What is read but not yet delivered (the rest of the chunk, a line carried over) is not
 * consumed. */
static void reader_position(const hv_source_t *s, uint64_t *consumed, uint64_t *size)
{
    const reader_t *r = (const reader_t *)s;
    uint64_t pending = (uint64_t)(r->chunk_len - r->chunk_pos) + r->line_len;
    *consumed = r->offset > pending ? r->offset - pending : 0;
    *size = r->size;
}

int hv_reader_open(uv_loop_t *loop, const char *path, hv_source_t **out)
{
    uv_fs_t req;
    uv_file fd;

    *out = NULL;
    if (strcmp(path, "-") == 0) {
        fd = STDIN_FILENO;
    } else {
        fd = uv_fs_open(NULL, &req, path, O_RDONLY | O_CLOEXEC, 0, NULL);
        uv_fs_req_cleanup(&req);
        if (fd < 0)
            return fd;
    }
    /* A directory opens O_RDONLY but fails at the first read, after the output was created:
     * refuse it here, where the caller still treats it as a bad argument. */
    int known = uv_fs_fstat(NULL, &req, fd, NULL) == 0;
    int is_dir = known && S_ISDIR(req.statbuf.st_mode);
    uint64_t size = known && S_ISREG(req.statbuf.st_mode) ? req.statbuf.st_size : 0;
    uv_fs_req_cleanup(&req);
    if (is_dir) {
        if (fd != STDIN_FILENO)
            uv_fs_close(NULL, &req, fd, NULL);
        uv_fs_req_cleanup(&req);
        return UV_EISDIR;
    }
    reader_t *r = hv_xcalloc(1, sizeof(*r));
    r->base.ops = &reader_ops;
    r->loop = loop;
    r->path = hv_xstrdup(path);
    r->fd = fd;
    r->size = size;
    uv_idle_init(loop, &r->kick);
    r->kick.data = r;
    *out = &r->base;
    return 0;
}
