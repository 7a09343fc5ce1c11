/* procstat: the process's own figures for /metrics (process_*). */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "harvestd/procstat.h"
#include "test.h"

static int parse(const char *line, uint64_t *start, uint64_t *vsize, uint64_t *rss)
{
    return hv_procstat__parse_stat(line, strlen(line), start, vsize, rss);
}

TEST_IMPL(procstat_stat_fields_counted_from_the_last_paren)
{
    uint64_t start = 0, vsize = 0, rss = 0;
    /* A real line: starttime 3952793, vsize 3133440, rss 413. */
    ASSERT_OK(parse("29443 (cat) R 29437 29437 14175 0 -1 4194304 98 0 0 0 0 0 0 0 20 0 1 0 "
                    "3952793 3133440 413 18446744073709551615 94060143947776 0\n",
                    &start, &vsize, &rss));
    ASSERT_EQ(3952793, start);
    ASSERT_EQ(3133440, vsize);
    ASSERT_EQ(413, rss);
    /* The command name is the process's to choose: blanks, parentheses, digits. */
    ASSERT_OK(parse("7 (a) 1 2 3 (b) ) S -1 1 1 0 -1 0 0 0 0 0 5 6 0 0 20 0 3 0 42 4096 7 0",
                    &start, &vsize, &rss));
    ASSERT_EQ(42, start);
    ASSERT_EQ(4096, vsize);
    ASSERT_EQ(7, rss);
    /* Lines without the fields. */
    ASSERT_EQ(-1, parse("", &start, &vsize, &rss));
    ASSERT_EQ(-1,
              parse("1 cat R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 3 4 5", &start, &vsize, &rss));
    ASSERT_EQ(-1,
              parse("1 (cat) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 3 4", &start, &vsize, &rss));
    ASSERT_EQ(
        -1, parse("1 (cat) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 3 -4 5", &start, &vsize, &rss));
    ASSERT_EQ(-1, parse("1 (cat) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 3 4 "
                        "99999999999999999999999",
                        &start, &vsize, &rss));
}

TEST_IMPL(procstat_btime)
{
    uint64_t btime = 0;
    static const char text[] = "cpu  1 2 3 4\ncpu0 1 2 3 4\nintr 5 6\nctxt 7\nbtime 1700000000\n"
                               "processes 9\n";
    ASSERT_OK(hv_procstat__parse_btime(text, strlen(text), &btime));
    ASSERT_EQ(1700000000, btime);
    static const char last[] = "cpu 1\nbtime 12";
    ASSERT_OK(hv_procstat__parse_btime(last, strlen(last), &btime));
    ASSERT_EQ(12, btime);
    static const char none[] = "cpu 1\nxbtime 5\nbtime\nbtime x\nbtime 5x\n";
    ASSERT_EQ(-1, hv_procstat__parse_btime(none, strlen(none), &btime));
}

/* This process's figures are there and sane, and follow what it does. */
TEST_IMPL(procstat_reads_this_process)
{
    hv_procstat_t a, b;
    struct rlimit rl;
    hv_procstat_read(&a);
    ASSERT_EQ(HV_PROCSTAT_CPU | HV_PROCSTAT_MEMORY | HV_PROCSTAT_OPEN_FDS | HV_PROCSTAT_START_TIME,
              a.have & ~(unsigned)HV_PROCSTAT_MAX_FDS);
    ASSERT_OK(getrlimit(RLIMIT_NOFILE, &rl));
    if (rl.rlim_cur != RLIM_INFINITY)
        ASSERT_EQ(rl.rlim_cur, a.max_fds);
    ASSERT_GT(a.resident_bytes, 1 << 20);
    ASSERT_GE(a.virtual_bytes, a.resident_bytes);
    ASSERT_GE(a.open_fds, 3);
    time_t now = time(NULL);
    ASSERT(a.start_time <= (double)now + 1);
    ASSERT(a.start_time > (double)now - 3600);

    /* Two more descriptors open; some CPU time spent. */
    int fds[2];
    ASSERT_OK(pipe(fds));
    volatile uint64_t x = 0;
    hv_procstat_read(&b);
    for (int round = 0; round < 1000 && b.cpu_seconds <= a.cpu_seconds; round++) {
        for (uint64_t i = 0; i < 1000000; i++)
            x += i * i;
        hv_procstat_read(&b);
    }
    ASSERT(b.cpu_seconds > a.cpu_seconds);
    ASSERT_EQ(a.open_fds + 2, b.open_fds);
    ASSERT(b.start_time == a.start_time);
    close(fds[0]);
    close(fds[1]);
}
