/* log.c: stderr logging. One write(2) per line so concurrent writers never interleave.
 *
 * Values from outside (Redis replies, URLs, headers, file names) reach log lines through the
 * callers' formats; a control byte among them (a bare LF above all) could make one event
 * look like two, so every control byte of a formatted line is written as \xHH here, where
 * no caller can forget it. */
#include "harvestd/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

hv_log_level_t hv_log_level = HV_LOG_NOTICE;

static const char *const level_names[] = {"debug", "info", "notice", "warning", "error"};
/* syslog priorities of the levels above (debug 7 ... err 3) */
static const int level_priority[] = {7, 6, 5, 4, 3};
static int to_journal;
static void (*before_write)(void *ud);
static void *before_write_ud;

void hv_log_set_before(void (*fn)(void *ud), void *ud)
{
    before_write = fn;
    before_write_ud = ud;
}

void hv_log_init(void)
{
    const char *js = getenv("JOURNAL_STREAM");
    struct stat st;
    unsigned long long dev, ino;
    if (js == NULL || sscanf(js, "%llu:%llu", &dev, &ino) != 2 || fstat(STDERR_FILENO, &st) != 0)
        return;
    to_journal = (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

/* Control bytes (C0 and DEL) of `msg` as \xHH, into `out` (`cap` bytes, one kept for the
 * newline). Returns the length written. */
static size_t escape_controls(char *out, size_t cap, const char *msg, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)msg[i];
        if (c >= 0x20 && c != 0x7f) {
            if (n + 1 >= cap)
                break;
            out[n++] = (char)c;
        } else {
            if (n + 4 >= cap)
                break;
            out[n++] = '\\';
            out[n++] = 'x';
            out[n++] = hex[c >> 4];
            out[n++] = hex[c & 15];
        }
    }
    return n;
}

void hv_log_write(hv_log_level_t lvl, const char *fmt, ...)
{
    char msg[4096], line[4096];
    int n = to_journal ? snprintf(line, sizeof(line), "<%d>level=%s ", level_priority[lvl],
                                  level_names[lvl])
                       : snprintf(line, sizeof(line), "harvestd: level=%s ", level_names[lvl]);
    if (n < 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (m < 0)
        m = 0;
    size_t mlen = (size_t)m < sizeof(msg) ? (size_t)m : sizeof(msg) - 1;
    size_t room = sizeof(line) - (size_t)n - 1; /* keep one byte for '\n' */
    size_t len = (size_t)n + escape_controls(line + n, room + 1, msg, mlen);
    line[len++] = '\n';
    if (before_write != NULL)
        before_write(before_write_ud);
    /* A lost log line is better than a stalled loop: retry only EINTR. */
    ssize_t w;
    do
        w = write(STDERR_FILENO, line, len);
    while (w < 0 && errno == EINTR);
}

int hv_log_level_parse(const char *name, hv_log_level_t *out)
{
    for (int i = 0; i < (int)(sizeof(level_names) / sizeof(level_names[0])); i++) {
        if (strcmp(name, level_names[i]) == 0) {
            *out = (hv_log_level_t)i;
            return 0;
        }
    }
    return UV_EINVAL;
}

const char *hv_log_url(char *out, unsigned cap, const char *url)
{
    size_t len = strlen(url);
    if (len < cap) {
        memcpy(out, url, len + 1);
    } else {
        memcpy(out, url, cap - 4);
        memcpy(out + cap - 4, "...", 4);
    }
    return out;
}
