/* log.c: stderr logging. One write(2) per line so concurrent writers never interleave. */
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

void hv_log_write(hv_log_level_t lvl, const char *fmt, ...)
{
    char line[4096];
    int n = to_journal ? snprintf(line, sizeof(line), "<%d>level=%s ", level_priority[lvl],
                                  level_names[lvl])
                       : snprintf(line, sizeof(line), "harvestd: level=%s ", level_names[lvl]);
    if (n < 0)
        return;
    size_t room = sizeof(line) - (size_t)n - 1; /* keep one byte for '\n' */
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, room, fmt, ap);
    va_end(ap);
    if (m < 0)
        m = 0;
    size_t len = (size_t)n + ((size_t)m < room ? (size_t)m : room - 1);
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
