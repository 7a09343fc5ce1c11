/*
 * log.h: levelled logging to stderr, one event a line in key=value form.
 *
 * HV_LOG checks the level before formatting anything (arguments are not evaluated when the
 * level is off). Call it only on the loop thread: threadpool workers return their findings
 * and let the loop log them.
 */
#ifndef HARVESTD_LOG_H
#define HARVESTD_LOG_H

typedef enum {
    HV_LOG_DEBUG = 0,
    HV_LOG_INFO,
    HV_LOG_NOTICE,
    HV_LOG_WARNING,
    HV_LOG_ERROR,
} hv_log_level_t;

extern hv_log_level_t hv_log_level;

/** Detect whether stderr is the systemd journal (JOURNAL_STREAM): lines then carry a
 * "<N>" priority prefix instead of the program name. Call once at start-up. */
void hv_log_init(void);

#define HV_LOG(lvl, ...)                                                                   \
    do {                                                                                   \
        if ((lvl) >= hv_log_level)                                                         \
            hv_log_write((lvl), __VA_ARGS__);                                              \
    } while (0)

void hv_log_write(hv_log_level_t lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/** A function run with `ud` before every log line (e.g. to clear a progress line on a
 *  terminal); NULL: none. Loop thread only, like HV_LOG. */
void hv_log_set_before(void (*fn)(void *ud), void *ud);

/** Parse "debug|info|notice|warning|error"; 0 on success, UV_EINVAL otherwise. */
int hv_log_level_parse(const char *name, hv_log_level_t *out);

/** Write a URL into `out` for a log line: at most `cap`-1 bytes, cut with "..." if longer. */
const char *hv_log_url(char *out, unsigned cap, const char *url);

#endif
