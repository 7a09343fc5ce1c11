/*
 * test_reader.c: URL files read through the source interface on a real loop.
 *
 * The sink keeps a copy of every line it is given (text, line number, overlong flag) and how
 * the input ended; the tests write a file into their temporary directory, run the loop and
 * compare. A sink may pause (return 1 from on_line) at a chosen line, or close the source
 * there.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harvestd/buf.h"
#include "harvestd/common.h"
#include "harvestd/reader.h"
#include "test.h"

#define MAX_LINES 20000

typedef struct {
    char *text;
    size_t len;
    uint64_t lineno;
    int overlong;
} line_t;

typedef struct {
    uv_loop_t loop;
    hv_source_t *src;
    line_t lines[MAX_LINES];
    int nlines;
    int ended;
    int end_status;
    int in_call; /* inside hv_source_start() or hv_source_resume() */
    int called_back_inside;
    uint64_t pause_at; /* return 1 from on_line for this line number (0: never) */
    uint64_t close_at; /* close the source from on_line at this line number (0: never) */
    int closed;
} sink_t;

static int on_line(void *ud, const char *line, size_t len, uint64_t lineno, int overlong,
                   const hv_line_meta_t *meta)
{
    sink_t *k = ud;
    ASSERT_NULL(meta);
    if (k->in_call)
        k->called_back_inside = 1;
    if (k->nlines < MAX_LINES) {
        line_t *l = &k->lines[k->nlines];
        l->text = hv_xstrndup(line, len);
        l->len = len;
        l->lineno = lineno;
        l->overlong = overlong;
    }
    k->nlines++;
    if (lineno == k->close_at) {
        hv_source_close(k->src);
        k->closed = 1;
        return 0;
    }
    return lineno == k->pause_at;
}

static void on_end(void *ud, int status)
{
    sink_t *k = ud;
    if (k->in_call)
        k->called_back_inside = 1;
    k->ended++;
    k->end_status = status;
}

static const hv_sink_t sink_cbs = {on_line, on_end};

/* A sink on a fresh loop, reading `data` from a file of the test's. */
static sink_t *sink_new(const char *data, size_t len)
{
    sink_t *k = hv_xcalloc(1, sizeof(*k));
    const char *path = hv_test_tmppath("urls.txt");
    hv_test_write_file(path, data, len);
    ASSERT_OK(uv_loop_init(&k->loop));
    ASSERT_OK(hv_reader_open(&k->loop, path, &k->src));
    ASSERT_NOT_NULL(k->src);
    ASSERT_STR_EQ(path, k->src->ops->name(k->src));
    return k;
}

static void sink_start(sink_t *k)
{
    k->in_call = 1;
    hv_source_start(k->src, &sink_cbs, k);
    k->in_call = 0;
    ASSERT_EQ(0, k->nlines + k->ended); /* delivery starts from the loop */
}

static void sink_resume(sink_t *k)
{
    int before = k->nlines;
    k->in_call = 1;
    hv_source_resume(k->src);
    k->in_call = 0;
    ASSERT_EQ(before, k->nlines);
}

/* Close the source (unless the sink did), check the loop closes clean, free the sink. */
static void sink_free(sink_t *k)
{
    ASSERT_EQ(0, k->called_back_inside);
    if (!k->closed)
        hv_source_close(k->src);
    ASSERT_LOOP_CLOSE(&k->loop);
    for (int i = 0; i < k->nlines && i < MAX_LINES; i++)
        free(k->lines[i].text);
    free(k);
}

/* Read `data` to its end in one go. */
static sink_t *read_all(const char *data, size_t len)
{
    sink_t *k = sink_new(data, len);
    sink_start(k);
    uv_run(&k->loop, UV_RUN_DEFAULT);
    ASSERT_EQ(1, k->ended);
    return k;
}

#define ASSERT_LINE(k, i, want, want_lineno)                                                       \
    do {                                                                                           \
        ASSERT_LT((i), (k)->nlines);                                                               \
        ASSERT_STR_EQ((want), (k)->lines[i].text);                                                 \
        ASSERT_EQ((want_lineno), (k)->lines[i].lineno);                                            \
        ASSERT_EQ(0, (k)->lines[i].overlong);                                                      \
    } while (0)

TEST_IMPL(reader_skips_blanks_and_comments_and_trims)
{
    static const char data[] = "  http://a.test/  \r\n"
                               "\n"
                               "# a comment\n"
                               "   # an indented comment\n"
                               " \t \r\n"
                               "\thttp://b.test/x?y=1\r\n"
                               "http://c.test/ # not a comment\n";
    sink_t *k = read_all(data, sizeof(data) - 1);
    ASSERT_EQ(0, k->end_status);
    ASSERT_EQ(3, k->nlines);
    ASSERT_LINE(k, 0, "http://a.test/", 1);
    ASSERT_LINE(k, 1, "http://b.test/x?y=1", 6);
    ASSERT_LINE(k, 2, "http://c.test/ # not a comment", 7);
    sink_free(k);
}

TEST_IMPL(reader_last_line_without_newline)
{
    static const char data[] = "http://a.test/\nhttp://b.test/";
    sink_t *k = read_all(data, sizeof(data) - 1);
    ASSERT_EQ(0, k->end_status);
    ASSERT_EQ(2, k->nlines);
    ASSERT_LINE(k, 0, "http://a.test/", 1);
    ASSERT_LINE(k, 1, "http://b.test/", 2);
    sink_free(k);
}

TEST_IMPL(reader_empty_and_comment_only_files)
{
    sink_t *k = read_all("", 0);
    ASSERT_EQ(0, k->end_status);
    ASSERT_EQ(0, k->nlines);
    sink_free(k);

    static const char data[] = "\n\n# nothing\n  \r\n# at all";
    k = read_all(data, sizeof(data) - 1);
    ASSERT_EQ(0, k->end_status);
    ASSERT_EQ(0, k->nlines);
    sink_free(k);
}

/* `n` lines "http://h.test/<i>", one per line number, crossing several read chunks. */
static char *numbered_lines(int n, size_t *len)
{
    hv_buf_t b;
    hv_buf_init(&b, (size_t)64 << 20);
    for (int i = 1; i <= n; i++) {
        char line[48];
        int m = snprintf(line, sizeof(line), "http://h.test/%d\n", i);
        ASSERT_OK(hv_buf_append(&b, line, (size_t)m));
    }
    return hv_buf_steal(&b, len);
}

TEST_IMPL(reader_file_larger_than_its_buffer)
{
    size_t len;
    const int n = 15000; /* about 300 KiB: several chunks, lines split across each boundary */
    char *data = numbered_lines(n, &len);
    ASSERT_GT(len, 4 * HV_READER_CHUNK);
    sink_t *k = read_all(data, len);
    free(data);
    ASSERT_EQ(0, k->end_status);
    ASSERT_EQ(n, k->nlines);
    for (int i = 0; i < n; i++) {
        char want[48];
        snprintf(want, sizeof(want), "http://h.test/%d", i + 1);
        ASSERT_LINE(k, i, want, (uint64_t)i + 1);
    }
    sink_free(k);
}

/* A file made of `pad` bytes of short lines, then a line of `long_len` 'x's, then "tail".
 * *pad_lines says how many lines the padding has. */
static char *with_long_line(size_t pad, size_t long_len, size_t *len, uint64_t *pad_lines)
{
    hv_buf_t b;
    hv_buf_init(&b, (size_t)64 << 20);
    *pad_lines = 0;
    while (b.len < pad) {
        if (pad - b.len >= 15)
            ASSERT_OK(hv_buf_append(&b, "http://p.test/\n", 15));
        else
            ASSERT_OK(hv_buf_append(&b, "\n", 1)); /* blank lines count too */
        (*pad_lines)++;
    }
    char *x = hv_xmalloc(long_len);
    memset(x, 'x', long_len);
    ASSERT_OK(hv_buf_append(&b, x, long_len));
    free(x);
    ASSERT_OK(hv_buf_append(&b, "\ntail\n", 6));
    return hv_buf_steal(&b, len);
}

/* Read a file whose long line starts at offset `pad`; *at is that line's index. */
static sink_t *read_long_line(size_t pad, size_t long_len, int *at)
{
    size_t len;
    uint64_t pad_lines;
    char *data = with_long_line(pad, long_len, &len, &pad_lines);
    sink_t *k = read_all(data, len);
    free(data);
    ASSERT_EQ(0, k->end_status);
    ASSERT_GE(k->nlines, 2);
    *at = k->nlines - 2;
    ASSERT_EQ(pad_lines + 1, k->lines[*at].lineno);
    ASSERT_LINE(k, k->nlines - 1, "tail", pad_lines + 2);
    return k;
}

TEST_IMPL(reader_overlong_line_across_chunks_is_a_flagged_prefix)
{
    int at;
    /* The long line starts a little before the end of the first chunk. */
    sink_t *k = read_long_line(HV_READER_CHUNK - 1000, HV_READER_LINE_MAX + 5000, &at);
    ASSERT_EQ(1, k->lines[at].overlong);
    ASSERT_EQ(HV_READER_LINE_MAX, k->lines[at].len);
    for (size_t i = 0; i < k->lines[at].len; i++)
        ASSERT_EQ('x', k->lines[at].text[i]);
    sink_free(k);
}

TEST_IMPL(reader_line_of_exactly_the_limit_is_whole)
{
    int at;
    sink_t *k = read_long_line(HV_READER_CHUNK - 1000, HV_READER_LINE_MAX, &at);
    ASSERT_EQ(0, k->lines[at].overlong);
    ASSERT_EQ(HV_READER_LINE_MAX, k->lines[at].len);
    sink_free(k);
}

/* A file of `pad` bytes of URL lines, then `line` (`len` bytes), then "tail". */
static sink_t *read_around(size_t pad, const char *line, size_t line_len, uint64_t *pad_lines)
{
    hv_buf_t b;
    hv_buf_init(&b, (size_t)64 << 20);
    *pad_lines = 0;
    while (b.len + 15 <= pad) {
        ASSERT_OK(hv_buf_append(&b, "http://p.test/\n", 15));
        (*pad_lines)++;
    }
    ASSERT_OK(hv_buf_append(&b, line, line_len));
    ASSERT_OK(hv_buf_append(&b, "\ntail\n", 6));
    size_t len;
    char *data = hv_buf_steal(&b, &len);
    sink_t *k = read_all(data, len);
    free(data);
    ASSERT_EQ(0, k->end_status);
    return k;
}

/* A long comment is a comment, and a long line loses its leading blanks, wherever the line
 * falls: at the start of the file, or across the end of the first read chunk. */
TEST_IMPL(reader_long_lines_are_treated_alike_at_any_offset)
{
    static const size_t offsets[] = {0, HV_READER_CHUNK - 4000};
    size_t len = HV_READER_LINE_MAX + 4000;
    char *comment = hv_xmalloc(len), *spaced = hv_xmalloc(len);
    memset(comment, 'c', len);
    memcpy(comment, "  # ", 4);
    memset(spaced, 'x', len);
    memset(spaced, ' ', 10);
    for (size_t i = 0; i < HV_ARRAY_SIZE(offsets); i++) {
        uint64_t pad_lines;
        sink_t *k = read_around(offsets[i], comment, len, &pad_lines);
        ASSERT_EQ((int)pad_lines + 1, k->nlines); /* the comment yields nothing */
        ASSERT_LINE(k, k->nlines - 1, "tail", pad_lines + 2);
        sink_free(k);

        k = read_around(offsets[i], spaced, len, &pad_lines);
        ASSERT_EQ((int)pad_lines + 2, k->nlines);
        ASSERT_EQ(1, k->lines[pad_lines].overlong);
        ASSERT_EQ('x', k->lines[pad_lines].text[0]);
        sink_free(k);
    }
    free(comment);
    free(spaced);
}

TEST_IMPL(reader_overlong_line_within_one_chunk)
{
    int at;
    /* The long line starts the file and ends inside the first chunk. */
    sink_t *k = read_long_line(0, HV_READER_LINE_MAX + 5000, &at);
    ASSERT_EQ(1, k->lines[at].overlong);
    ASSERT_EQ(HV_READER_LINE_MAX, k->lines[at].len);
    sink_free(k);
}

TEST_IMPL(reader_overlong_last_line_without_newline)
{
    size_t len = HV_READER_CHUNK + 100;
    char *data = hv_xmalloc(len);
    memset(data, 'y', len);
    memcpy(data, "http://a.test/\n", 15);
    sink_t *k = read_all(data, len);
    free(data);
    ASSERT_EQ(0, k->end_status);
    ASSERT_EQ(2, k->nlines);
    ASSERT_LINE(k, 0, "http://a.test/", 1);
    ASSERT_EQ(2, k->lines[1].lineno);
    ASSERT_EQ(1, k->lines[1].overlong);
    ASSERT_EQ(HV_READER_LINE_MAX, k->lines[1].len);
    sink_free(k);
}

TEST_IMPL(reader_pauses_until_resumed)
{
    static const char data[] = "http://a.test/\nhttp://b.test/\n\nhttp://c.test/\n";
    sink_t *k = sink_new(data, sizeof(data) - 1);
    k->pause_at = 2;
    sink_start(k);
    uv_run(&k->loop, UV_RUN_DEFAULT); /* returns: a paused source keeps nothing going */
    ASSERT_EQ(2, k->nlines);
    ASSERT_EQ(0, k->ended);
    uv_run(&k->loop, UV_RUN_DEFAULT);
    ASSERT_EQ(2, k->nlines); /* still paused */
    sink_resume(k);
    uv_run(&k->loop, UV_RUN_DEFAULT);
    ASSERT_EQ(1, k->ended);
    ASSERT_EQ(0, k->end_status);
    ASSERT_EQ(3, k->nlines);
    ASSERT_LINE(k, 1, "http://b.test/", 2);
    ASSERT_LINE(k, 2, "http://c.test/", 4);
    sink_resume(k); /* resuming a source that is not paused changes nothing */
    uv_run(&k->loop, UV_RUN_DEFAULT);
    ASSERT_EQ(1, k->ended);
    sink_free(k);
}

TEST_IMPL(reader_pause_on_every_line_of_a_large_file)
{
    size_t len;
    const int n = 6000;
    char *data = numbered_lines(n, &len);
    sink_t *k = sink_new(data, len);
    free(data);
    sink_start(k);
    for (int i = 1; i <= n && !k->ended; i++) {
        k->pause_at = (uint64_t)i;
        if (i > 1)
            sink_resume(k);
        uv_run(&k->loop, UV_RUN_DEFAULT);
        ASSERT_EQ(i, k->nlines);
    }
    k->pause_at = 0;
    sink_resume(k);
    uv_run(&k->loop, UV_RUN_DEFAULT);
    ASSERT_EQ(1, k->ended);
    ASSERT_EQ(n, k->nlines);
    ASSERT_LINE(k, n - 1, "http://h.test/6000", (uint64_t)n);
    sink_free(k);
}

TEST_IMPL(reader_close_while_paused)
{
    static const char data[] = "http://a.test/\nhttp://b.test/\nhttp://c.test/\n";
    sink_t *k = sink_new(data, sizeof(data) - 1);
    k->pause_at = 1;
    sink_start(k);
    uv_run(&k->loop, UV_RUN_DEFAULT);
    ASSERT_EQ(1, k->nlines);
    sink_free(k); /* closes it: no more lines, no end, nothing left on the loop */
}

TEST_IMPL(reader_close_from_inside_on_line)
{
    size_t len;
    char *data = numbered_lines(10000, &len);
    sink_t *k = sink_new(data, len);
    free(data);
    k->close_at = 3;
    sink_start(k);
    uv_run(&k->loop, UV_RUN_DEFAULT);
    ASSERT_EQ(3, k->nlines);
    ASSERT_EQ(0, k->ended);
    sink_free(k);
}

/* Standard input becomes the read end of a pipe (each test runs in a process of its own; the
 * old stdin comes back in stdin_restore). Returns the write end. A read of an empty pipe
 * waits in the threadpool until the test writes or closes the write end: a read in flight
 * on demand. */
static int stdin_pipe(int *saved)
{
    int fds[2];
    ASSERT_OK(pipe(fds));
    *saved = dup(STDIN_FILENO);
    ASSERT_GE(*saved, 0);
    ASSERT_EQ(STDIN_FILENO, dup2(fds[0], STDIN_FILENO));
    close(fds[0]);
    return fds[1];
}

static void stdin_restore(int saved)
{
    ASSERT_EQ(STDIN_FILENO, dup2(saved, STDIN_FILENO));
    close(saved);
}

static void put(int fd, const char *s)
{
    ASSERT_EQ((ssize_t)strlen(s), write(fd, s, strlen(s)));
}

/* A sink on a fresh loop reading standard input. */
static sink_t *sink_new_stdin(void)
{
    sink_t *k = hv_xcalloc(1, sizeof(*k));
    ASSERT_OK(uv_loop_init(&k->loop));
    ASSERT_OK(hv_reader_open(&k->loop, "-", &k->src));
    ASSERT_STR_EQ("-", k->src->ops->name(k->src));
    return k;
}

TEST_IMPL(reader_lines_split_across_reads)
{
    int saved, w = stdin_pipe(&saved);
    sink_t *k = sink_new_stdin();
    sink_start(k);
    put(w, "http://a.test/\nhttp://b.te");
    while (k->nlines < 1)
        uv_run(&k->loop, UV_RUN_ONCE);
    ASSERT_LINE(k, 0, "http://a.test/", 1);
    put(w, "st/\r\n\n# c\nhttp://c.test/");
    while (k->nlines < 2)
        uv_run(&k->loop, UV_RUN_ONCE);
    ASSERT_LINE(k, 1, "http://b.test/", 2);
    ASSERT_EQ(0, k->ended);
    close(w); /* the end of input ends the last line */
    uv_run(&k->loop, UV_RUN_DEFAULT);
    ASSERT_EQ(1, k->ended);
    ASSERT_EQ(0, k->end_status);
    ASSERT_EQ(3, k->nlines);
    ASSERT_LINE(k, 2, "http://c.test/", 5);
    sink_free(k);
    stdin_restore(saved);
}

TEST_IMPL(reader_close_with_a_read_in_flight)
{
    int saved, w = stdin_pipe(&saved);
    sink_t *k = sink_new_stdin();
    sink_start(k);
    /* One loop iteration runs the start, which issues a read of the empty pipe. */
    uv_run(&k->loop, UV_RUN_NOWAIT);
    hv_source_close(k->src);
    k->closed = 1;
    put(w, "http://a.test/\n");
    close(w);
    uv_run(&k->loop, UV_RUN_DEFAULT); /* the read completes into a closed source */
    ASSERT_EQ(0, k->nlines);
    ASSERT_EQ(0, k->ended);
    sink_free(k);
    stdin_restore(saved);
}

TEST_IMPL(reader_close_before_start)
{
    sink_t *k = sink_new("http://a.test/\n", 15);
    sink_free(k);
}

TEST_IMPL(reader_read_error_ends_the_input)
{
    sink_t *k = hv_xcalloc(1, sizeof(*k));
    ASSERT_OK(uv_loop_init(&k->loop));
    ASSERT_EQ(UV_ENOENT, hv_reader_open(&k->loop, hv_test_tmppath("missing.txt"), &k->src));
    ASSERT_NULL(k->src);
    /* A directory would open and fail at its first read: it is refused at open, before the
     * caller has created anything for it. */
    ASSERT_EQ(UV_EISDIR, hv_reader_open(&k->loop, hv_test_tmpdir(), &k->src));
    ASSERT_NULL(k->src);
    /* A file whose first read fails: the process's own memory at address 0 (EIO). */
    ASSERT_OK(hv_reader_open(&k->loop, "/proc/self/mem", &k->src));
    sink_start(k);
    uv_run(&k->loop, UV_RUN_DEFAULT);
    ASSERT_EQ(1, k->ended);
    ASSERT_EQ(UV_EIO, k->end_status);
    ASSERT_EQ(0, k->nlines);
    sink_free(k);
}

/* The position tells how far the lines delivered reach (what a batch estimates its total
 * from): paused on a line, the bytes up to its end; at the end, the whole file. */
TEST_IMPL(reader_position_spans_the_lines_delivered)
{
    size_t len;
    const int n = 10000; /* several chunks */
    char *data = numbered_lines(n, &len);
    sink_t *k = sink_new(data, len);
    uint64_t consumed, size;
    hv_source_position(k->src, &consumed, &size);
    ASSERT_EQ(0, consumed);
    ASSERT_EQ(len, size);
    k->pause_at = 7000;
    sink_start(k);
    uv_run(&k->loop, UV_RUN_DEFAULT);
    ASSERT_EQ(7000, k->nlines);
    hv_source_position(k->src, &consumed, &size);
    char *end = strstr(data, "http://h.test/7000\n");
    ASSERT_NOT_NULL(end);
    ASSERT_EQ((uint64_t)(end - data) + strlen("http://h.test/7000\n"), consumed);
    ASSERT_EQ(len, size);
    sink_resume(k);
    uv_run(&k->loop, UV_RUN_DEFAULT);
    ASSERT_EQ(1, k->ended);
    hv_source_position(k->src, &consumed, &size);
    ASSERT_EQ(len, consumed);
    free(data);
    sink_free(k);
}
