/* procstat.c: the process's own figures (see procstat.h). */
#include "harvestd/procstat.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <unistd.h>

#include "harvestd/common.h"

/* Room for /proc/self/stat (about 300 bytes) and for the head of /proc/stat up to btime: the
 * per-CPU lines come first, about 100 bytes each, and a read of this size covers a few
 * hundred CPUs. A longer /proc/stat without btime in it leaves the start time out. */
#define STAT_MAX 65536

/* Up to cap - 1 bytes of `path`, NUL-terminated: the length, or -1. */
static ssize_t read_small(const char *path, char *buf, size_t cap)
{
    int fd;
    do
        fd = open(path, O_RDONLY | O_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    if (fd < 0)
        return -1;
    size_t len = 0;
    while (len < cap - 1) {
        ssize_t n = read(fd, buf + len, cap - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    buf[len] = '\0';
    return (ssize_t)len;
}

/* The next blank-separated decimal field from *p (moved past it): 0, or -1. */
static int next_uint(const char **p, const char *end, uint64_t *out)
{
    const char *s = *p;
    while (s < end && *s == ' ')
        s++;
    if (s == end || !hv_ascii_is_digit((unsigned char)*s))
        return -1;
    uint64_t v = 0;
    for (; s < end && hv_ascii_is_digit((unsigned char)*s); s++) {
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *p = s;
    *out = v;
    return 0;
}

/* The next blank-separated field, whatever it holds (the state letter, signed numbers). */
static int skip_field(const char **p, const char *end)
{
    const char *s = *p;
    while (s < end && *s == ' ')
        s++;
    if (s == end || *s == '\n')
        return -1;
    while (s < end && *s != ' ' && *s != '\n')
        s++;
    *p = s;
    return 0;
}

int hv_procstat__parse_stat(const char *line, size_t len, uint64_t *starttime, uint64_t *vsize,
                            uint64_t *rss)
{
    const char *end = line + len, *p = NULL;
    for (const char *q = line; q < end; q++)
        if (*q == ')')
            p = q + 1;
    if (p == NULL)
        return -1;
    /* After the name: state (3), ppid ... itrealvalue (4-21), starttime (22), vsize (23),
     * rss (24), as proc(5) numbers them. */
    for (int field = 3; field < 22; field++)
        if (skip_field(&p, end) != 0)
            return -1;
    if (next_uint(&p, end, starttime) != 0 || next_uint(&p, end, vsize) != 0 ||
        next_uint(&p, end, rss) != 0)
        return -1;
    return 0;
}

int hv_procstat__parse_btime(const char *text, size_t len, uint64_t *btime)
{
    const char *end = text + len;
    for (const char *p = text; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *eol = nl != NULL ? nl : end;
        if (eol - p > 6 && memcmp(p, "btime ", 6) == 0) {
            const char *v = p + 6;
            return next_uint(&v, eol, btime) == 0 && v == eol ? 0 : -1;
        }
        p = nl != NULL ? nl + 1 : end;
    }
    return -1;
}

/* Entries of /proc/self/fd but the one of the directory being read. */
static int count_fds(uint64_t *out)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        return -1;
    int own = dirfd(d);
    uint64_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char *endp;
        long fd = strtol(e->d_name, &endp, 10);
        if (*endp == '\0' && fd != own)
            n++;
    }
    closedir(d);
    *out = n;
    return 0;
}

void hv_procstat_read(hv_procstat_t *out)
{
    struct rusage ru;
    struct rlimit rl;
    memset(out, 0, sizeof(*out));

    if (getrusage(RUSAGE_SELF, &ru) == 0) {
        out->cpu_seconds = (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
                           ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) / 1e6;
        out->have |= HV_PROCSTAT_CPU;
    }
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        out->max_fds = (uint64_t)rl.rlim_cur;
        out->have |= HV_PROCSTAT_MAX_FDS;
    }
    if (count_fds(&out->open_fds) == 0)
        out->have |= HV_PROCSTAT_OPEN_FDS;

    char *buf = hv_xmalloc(STAT_MAX);
    uint64_t starttime, vsize, rss, btime;
    ssize_t n = read_small("/proc/self/stat", buf, STAT_MAX);
    if (n > 0 && hv_procstat__parse_stat(buf, (size_t)n, &starttime, &vsize, &rss) == 0) {
        long page = sysconf(_SC_PAGESIZE), ticks = sysconf(_SC_CLK_TCK);
        if (page > 0) {
            out->resident_bytes = rss * (uint64_t)page;
            out->virtual_bytes = vsize;
            out->have |= HV_PROCSTAT_MEMORY;
        }
        n = read_small("/proc/stat", buf, STAT_MAX);
        if (ticks > 0 && n > 0 && hv_procstat__parse_btime(buf, (size_t)n, &btime) == 0) {
            out->start_time = (double)btime + (double)starttime / (double)ticks;
            out->have |= HV_PROCSTAT_START_TIME;
        }
    }
    free(buf);
}
