/*
 * procstat.h: the process's own figures, those every Prometheus exporter shows as process_*:
 * CPU time, memory, file descriptors and start time. They are read when asked for (at each
 * scrape of /metrics), from getrusage(), getrlimit() and the kernel's /proc files of the
 * process (/proc/self/stat, /proc/self/fd, and /proc/stat for the boot time): small files
 * the kernel writes on reading, which never wait on a disk, so the loop may read them.
 * Linux only; a figure that cannot be read is left out (its bit in `have` is clear).
 */
#ifndef HARVESTD_PROCSTAT_H
#define HARVESTD_PROCSTAT_H

#include <stddef.h>
#include <stdint.h>

/** Bits of hv_procstat_t.have: the figures that were read. */
enum {
    HV_PROCSTAT_CPU = 1u << 0,
    HV_PROCSTAT_MEMORY = 1u << 1, /* resident_bytes and virtual_bytes */
    HV_PROCSTAT_OPEN_FDS = 1u << 2,
    HV_PROCSTAT_MAX_FDS = 1u << 3,
    HV_PROCSTAT_START_TIME = 1u << 4,
};

typedef struct {
    unsigned have;           /* HV_PROCSTAT_* */
    double cpu_seconds;      /* user and system time of every thread, so far */
    uint64_t resident_bytes; /* resident set size */
    uint64_t virtual_bytes;  /* address space size */
    uint64_t open_fds;       /* open file descriptors (the one used to count them excluded) */
    uint64_t max_fds;        /* the soft RLIMIT_NOFILE; left out when unlimited */
    double start_time;       /* when the process started, in seconds since the Unix epoch */
} hv_procstat_t;

/** Read the figures of the calling process into *out (every field set; `have` says which
 *  were read). */
void hv_procstat_read(hv_procstat_t *out);

/**
 * The fields of a /proc/PID/stat line that hv_procstat_read() uses: starttime (clock ticks
 * after boot), vsize (bytes) and rss (pages). The command name in parentheses may hold any
 * byte, ')' and blanks included: the fields are counted from the line's last ')'. 0, or -1
 * for a line that does not have them.
 */
int hv_procstat__parse_stat(const char *line, size_t len, uint64_t *starttime, uint64_t *vsize,
                            uint64_t *rss);

/** The boot time (btime, seconds since the Unix epoch) from the text of /proc/stat. 0, or -1
 *  without a btime line. */
int hv_procstat__parse_btime(const char *text, size_t len, uint64_t *btime);

#endif
