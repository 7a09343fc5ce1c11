/*
 * parse_limit: how fast gumbo alone parses a set of HTML files on every core.
 *
 *   parse_limit [--threads N] [--count N] [--repeat R] (--list FILE | --dir DIR)
 *
 * Reads the files first (paths one per line from FILE, or every regular file under DIR, sorted),
 * keeps them in memory, then starts one thread per CPU (uv_available_parallelism(); --threads
 * overrides). The threads take documents from a shared counter and parse each exactly as a
 * plain gumbo user would: kGumboDefaultOptions with max_errors = 0, gumbo_parse_with_options(),
 * gumbo_destroy_output(). Nothing else (no title search, no UTF-8 check, no depth pre-scan), so
 * the figure is the ceiling of any gumbo-based full-page parser on this machine.
 *
 * --count takes the first N files (default all); --repeat parses the whole set R times.
 * Prints one JSON line on stdout:
 *   {"pages":..,"bytes":..,"threads":..,"seconds":..,"cpu_s":..,"pages_per_s":..,"mb_per_s":..}
 * where MB is 10^6 bytes, seconds is the wall time of the parse phase only and cpu_s the
 * process's user+system time over that phase. Exit status 0, or 2 on a usage or I/O error.
 */
#include <errno.h>
#include <ftw.h>
#include <gumbo.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "harvestd/common.h"

#define TOOL_NAME "parse_limit"
#include "tool.h"

typedef struct {
    char *data;
    size_t len;
} doc_t;

typedef struct {
    char **items;
    size_t len;
    size_t cap;
} strvec_t;

static doc_t *docs;
static size_t ndocs;
static size_t total_jobs;
static atomic_size_t next_job;
static pthread_barrier_t start_barrier;
static strvec_t walked;

static void strvec_push(strvec_t *v, const char *s)
{
    if (v->len == v->cap) {
        v->cap = v->cap ? v->cap * 2 : 1024;
        v->items = hv_xrealloc(v->items, v->cap * sizeof(*v->items));
    }
    size_t n = strlen(s);
    char *copy = hv_xrealloc(NULL, n + 1);
    memcpy(copy, s, n + 1);
    v->items[v->len++] = copy;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int walk_cb(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if (type == FTW_F)
        strvec_push(&walked, path);
    return 0;
}

static void read_list(const char *file, strvec_t *out)
{
    FILE *f = fopen(file, "r");
    if (f == NULL)
        die(strerror(errno), file);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, f)) >= 0) {
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = '\0';
        if (n > 0 && line[0] != '#')
            strvec_push(out, line);
    }
    free(line);
    fclose(f);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static void *worker(void *arg)
{
    (void)arg;
    GumboOptions opts = kGumboDefaultOptions;
    opts.max_errors = 0;
    pthread_barrier_wait(&start_barrier);
    for (;;) {
        size_t job = atomic_fetch_add(&next_job, 1);
        if (job >= total_jobs)
            break;
        const doc_t *d = &docs[job % ndocs];
        GumboOutput *out = gumbo_parse_with_options(&opts, d->data, d->len);
        gumbo_destroy_output(&opts, out);
    }
    return NULL;
}

static unsigned long parse_count(const char *opt, const char *value)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(value, &end, 10);
    if (errno != 0 || end == value || *end != '\0' || v == 0)
        die("expected a positive number after", opt);
    return v;
}

static void usage(void)
{
    fprintf(stderr, "usage: parse_limit [--threads N] [--count N] [--repeat R] "
                    "(--list FILE | --dir DIR)\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *list = NULL, *dir = NULL;
    unsigned long threads = uv_available_parallelism();
    unsigned long count = 0, repeat = 1;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc)
            usage();
        const char *v = argv[++i];
        if (strcmp(a, "--list") == 0)
            list = v;
        else if (strcmp(a, "--dir") == 0)
            dir = v;
        else if (strcmp(a, "--threads") == 0)
            threads = parse_count(a, v);
        else if (strcmp(a, "--count") == 0)
            count = parse_count(a, v);
        else if (strcmp(a, "--repeat") == 0)
            repeat = parse_count(a, v);
        else
            usage();
    }
    if ((list == NULL) == (dir == NULL))
        usage();
    if (threads == 0)
        threads = 1;

    strvec_t paths = {0};
    if (list != NULL) {
        read_list(list, &paths);
    } else {
        if (nftw(dir, walk_cb, 32, FTW_PHYS) != 0)
            die(strerror(errno), dir);
        qsort(walked.items, walked.len, sizeof(*walked.items), cmp_str);
        paths = walked;
    }
    ndocs = paths.len;
    if (count != 0 && count < ndocs)
        ndocs = count;
    if (ndocs == 0)
        die("no files to parse", NULL);

    docs = hv_xrealloc(NULL, ndocs * sizeof(*docs));
    size_t bytes = 0;
    for (size_t i = 0; i < ndocs; i++) {
        docs[i].data = load_file(paths.items[i], &docs[i].len);
        bytes += docs[i].len;
    }
    total_jobs = ndocs * repeat;

    pthread_t *tids = hv_xrealloc(NULL, threads * sizeof(*tids));
    if (pthread_barrier_init(&start_barrier, NULL, (unsigned)threads + 1) != 0)
        die("pthread_barrier_init failed", NULL);
    for (unsigned long t = 0; t < threads; t++)
        if (pthread_create(&tids[t], NULL, worker, NULL) != 0)
            die("pthread_create failed", NULL);
    double cpu0 = cpu_s();
    double t0 = now_s();
    pthread_barrier_wait(&start_barrier);
    for (unsigned long t = 0; t < threads; t++)
        pthread_join(tids[t], NULL);
    double seconds = now_s() - t0;
    double cpu = cpu_s() - cpu0;
    if (seconds <= 0)
        seconds = 1e-9;

    double total_bytes = (double)bytes * (double)repeat;
    printf("{\"pages\":%zu,\"bytes\":%.0f,\"threads\":%lu,\"seconds\":%.4f,\"cpu_s\":%.4f,"
           "\"pages_per_s\":%.1f,\"mb_per_s\":%.2f}\n",
           total_jobs, total_bytes, threads, seconds, cpu, (double)total_jobs / seconds,
           total_bytes / 1e6 / seconds);

    for (size_t i = 0; i < ndocs; i++)
        free(docs[i].data);
    free(docs);
    for (size_t i = 0; i < paths.len; i++)
        free(paths.items[i]);
    free(paths.items);
    free(tids);
    pthread_barrier_destroy(&start_barrier);
    return 0;
}
