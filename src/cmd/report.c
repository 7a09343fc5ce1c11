/*
 * report.c: `harvestd report [-o FILE] [--top N] [--hosts N] OUTPUT.jsonl` (commands.h): the
 * command line, reading the output and writing the page, over the report library (report.h).
 *
 * The input is opened and read to its end before the page's file is created, so an input that
 * cannot be read leaves nothing behind; the page is written to a temporary file beside its
 * name and renamed over it, so a reader never sees half a page.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "harvestd/commands.h"
#include "harvestd/common.h"
#include "harvestd/config.h"
#include "harvestd/options.h"
#include "harvestd/report.h"

enum { EXIT_OK = 0, EXIT_IO = 1, EXIT_USAGE = 2 };

#define READ_CHUNK ((size_t)256 << 10)

typedef struct {
    const char *input;
    const char *output; /* NULL: the default */
    const char *top, *hosts;
    hv_report_opts_t opts;
    int help;
} report_args_t;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: harvestd report [-o FILE] [--top N] [--hosts N] OUTPUT.jsonl\n"
            "\n"
            "Sums up a harvestd output (the JSON Lines records of --once, the daemon or\n"
            "merge) as one HTML page to look at in a browser: records by status, error type\n"
            "and HTTP status; histograms of elapsed times and page sizes; a table of hosts;\n"
            "the slowest and the largest pages; the failed URLs grouped by error. The page\n"
            "is one self-contained file: no script, nothing fetched from elsewhere.\n"
            "\n"
            "The output is read once, line by line, in bounded memory, whatever its size;\n"
            "lines that are no record (not JSON, members of the wrong type, cut short, too\n"
            "long) are counted as unreadable and shown, never fatal.\n"
            "\n"
            "  OUTPUT.jsonl       the records ('-' for standard input)\n"
            "  -o, --output FILE  the page (default: OUTPUT with .jsonl replaced by\n"
            "                     .report.html, or .report.html added; standard output for\n"
            "                     standard input); '-' for standard output. It is written\n"
            "                     to FILE.tmp.PID and renamed over FILE, replacing an older\n"
            "                     page; never the input itself\n"
            "  --top N            rows of the slowest and largest tables (default %d, at\n"
            "                     most %d)\n"
            "  --hosts N          hosts shown one by one, by requests (default %d, at most\n"
            "                     %d); the rest are summed up in one row\n"
            "  -h, --help         this text\n"
            "\n"
            "A summary line on standard error counts the records and unreadable lines.\n"
            "\n"
            "Exit status: 0 written; 1 the page could not be written; 2 usage error, or the\n"
            "input cannot be read.\n",
            HV_REPORT_TOP_DEFAULT, HV_REPORT_ROWS_MAX, HV_REPORT_HOSTS_SHOWN_DEFAULT,
            HV_REPORT_ROWS_MAX);
}

static int usage_error(const char *msg)
{
    fprintf(stderr, "harvestd: %s\nTry 'harvestd report --help'.\n", msg);
    return EXIT_USAGE;
}

enum { O_OUTPUT, O_TOP, O_HOSTS, O_HELP };

static const hv_opt_t report_opts[] = {
    {.name = "output", .letter = "o", .kind = HV_OPT_VALUE, .id = O_OUTPUT},
    {.name = "top", .kind = HV_OPT_VALUE, .id = O_TOP},
    {.name = "hosts", .kind = HV_OPT_VALUE, .id = O_HOSTS},
    {.name = "help", .letter = "h", .id = O_HELP},
};

/* "--" ends the options; --help=x is an unknown option. */
static const hv_opt_spec_t report_spec = {
    .opts = report_opts,
    .nopts = HV_ARRAY_SIZE(report_opts),
    .rules = HV_OPT_DASHDASH | HV_OPT_FLAG_VALUE_UNKNOWN,
    .say = HV_OPT_SAY_COLON,
};

static int parse_rows(const char *name, const char *s, size_t *out, char *err, size_t errcap)
{
    uint64_t n;
    if (hv_parse_uint(s, &n) != 0 || n < 1 || n > HV_REPORT_ROWS_MAX)
        return hv_errf(err, errcap, -1, "%s: '%s' is not a number from 1 to %d", name, s,
                       HV_REPORT_ROWS_MAX);
    *out = (size_t)n;
    return 0;
}

static int parse_args(int argc, char **argv, report_args_t *a, char *err, size_t errcap)
{
    hv_opt_parser_t p;
    hv_opt_arg_t got;
    int what;
    memset(a, 0, sizeof(*a));
    hv_opt_init(&p, &report_spec, argc, argv);
    while ((what = hv_opt_next(&p, &got, err, errcap)) != HV_OPT_END) {
        if (what == HV_OPT_ERROR)
            return -1;
        if (what == HV_OPT_ARGUMENT) {
            if (a->input != NULL)
                return hv_errf(err, errcap, -1, "one output to report on, not two: %s", got.word);
            /* After "--", "-" is a file of that name. */
            a->input = strcmp(got.word, "-") == 0 && got.after_dashdash ? "./-" : got.word;
            continue;
        }
        if (got.opt->id == O_HELP) {
            a->help = 1;
            return 0;
        }
        static const char *const names[] = {
            [O_OUTPUT] = "-o", [O_TOP] = "--top", [O_HOSTS] = "--hosts"};
        const char **slot = got.opt->id == O_OUTPUT ? &a->output
                            : got.opt->id == O_TOP  ? &a->top
                                                    : &a->hosts;
        if (*slot != NULL)
            return hv_errf(err, errcap, -1, "%s given twice", names[got.opt->id]);
        *slot = got.value;
    }
    if (a->input == NULL)
        return hv_errf(err, errcap, -1, "missing OUTPUT.jsonl: the records to report on");
    if (a->input[0] == '\0')
        return hv_errf(err, errcap, -1, "OUTPUT.jsonl: an empty name");
    if (a->output != NULL && a->output[0] == '\0')
        return hv_errf(err, errcap, -1, "-o needs a file name ('-' for standard output)");
    if (a->top != NULL && parse_rows("--top", a->top, &a->opts.top, err, errcap) != 0)
        return -1;
    if (a->hosts != NULL && parse_rows("--hosts", a->hosts, &a->opts.hosts, err, errcap) != 0)
        return -1;
    return 0;
}

/* The page's default name: INPUT without ".jsonl", then ".report.html". */
static char *default_output(const char *input)
{
    size_t n = strlen(input);
    if (n > 6 && strcmp(input + n - 6, ".jsonl") == 0)
        n -= 6;
    size_t cap = n + sizeof(".report.html");
    char *out = hv_xmalloc(cap);
    snprintf(out, cap, "%.*s.report.html", (int)n, input);
    return out;
}

/* Read all of `fd` into the report. 0, or -errno of the read that failed. */
static int read_all(int fd, hv_report_t *r)
{
    char *buf = hv_xmalloc(READ_CHUNK);
    int rc = 0;
    for (;;) {
        ssize_t n = read(fd, buf, READ_CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = -errno;
            break;
        }
        if (n == 0)
            break;
        hv_report_feed(r, buf, (size_t)n);
    }
    free(buf);
    hv_report_finish(r);
    return rc;
}

/* The page into `f` and closed: 0, or a message in `err`. */
static int write_page(const hv_report_t *r, const hv_report_page_t *page, FILE *f, int sync,
                      const char *name, char *err, size_t errcap)
{
    int rc = hv_report_write_html(r, page, f);
    if (rc == 0 && fflush(f) != 0)
        rc = -errno;
    if (rc == 0 && sync && fsync(fileno(f)) != 0)
        rc = -errno;
    if (f != stdout && fclose(f) != 0 && rc == 0)
        rc = -errno;
    if (rc != 0)
        return hv_errf(err, errcap, rc, "cannot write %s: %s", name,
                       rc == UV_EIO ? "write error" : strerror(-rc));
    return 0;
}

/* The page to `path` by way of a temporary file beside it. */
static int write_file(const hv_report_t *r, const hv_report_page_t *page, const char *path,
                      char *err, size_t errcap)
{
    hv_cmd_tmp_t t;
    int rc = hv_cmd_tmp_open(&t, path, err, errcap);
    if (rc != 0)
        return rc;
    FILE *f = fdopen(t.fd, "w");
    if (f == NULL) {
        rc = hv_errf(err, errcap, -errno, "cannot write %s: %s", t.path, strerror(errno));
        goto out;
    }
    t.fd = -1; /* the stream's now: write_page closes it */
    if ((rc = write_page(r, page, f, 1, t.path, err, errcap)) != 0)
        goto out;
    if (rename(t.path, path) != 0) {
        rc = hv_errf(err, errcap, -errno, "cannot rename %s to %s: %s", t.path, path,
                     strerror(errno));
        goto out;
    }
    (void)hv_fsync_parent(path);
out:
    hv_cmd_tmp_close(&t, rc == 0);
    return rc;
}

static const char *plural(uint64_t n, const char *one, const char *many)
{
    return n == 1 ? one : many;
}

int hv_cmd_report(int argc, char **argv)
{
    report_args_t a;
    hv_report_t *r = NULL;
    char *output = NULL, err[1200], when[40];
    int fd = -1, status = EXIT_IO, rc;
    struct stat in_st, out_st;

    if (parse_args(argc, argv, &a, err, sizeof(err)) != 0) {
        status = usage_error(err);
        goto out;
    }
    if (a.help) {
        usage(stdout);
        status = EXIT_OK;
        goto out;
    }
    int from_stdin = strcmp(a.input, "-") == 0;
    output = hv_xstrdup(a.output != NULL ? a.output : from_stdin ? "-" : "");
    if (output[0] == '\0') {
        free(output);
        output = default_output(a.input);
    }
    fd = from_stdin ? STDIN_FILENO : open(a.input, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &in_st) != 0) {
        fprintf(stderr, "harvestd: cannot read %s: %s\n", a.input, strerror(errno));
        status = EXIT_USAGE;
        goto out;
    }
    if (S_ISDIR(in_st.st_mode)) {
        fprintf(stderr, "harvestd: cannot read %s: %s\n", a.input, strerror(EISDIR));
        status = EXIT_USAGE;
        goto out;
    }
    if (strcmp(output, "-") != 0 && stat(output, &out_st) == 0 && out_st.st_dev == in_st.st_dev &&
        out_st.st_ino == in_st.st_ino) {
        snprintf(err, sizeof(err), "the page %s would replace the output it reports on", output);
        status = usage_error(err);
        goto out;
    }

    r = hv_report_new(&a.opts);
    if ((rc = read_all(fd, r)) != 0) {
        fprintf(stderr, "harvestd: cannot read %s: %s\n", from_stdin ? "standard input" : a.input,
                strerror(-rc));
        status = EXIT_USAGE;
        goto out;
    }

    time_t now = time(NULL);
    struct tm tm;
    strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", gmtime_r(&now, &tm));
    hv_report_page_t page = {.source = from_stdin ? NULL : a.input, .generated_at = when};
    if (strcmp(output, "-") == 0)
        rc = write_page(r, &page, stdout, 0, "standard output", err, sizeof(err));
    else
        rc = write_file(r, &page, output, err, sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "harvestd: %s\n", err);
        status = EXIT_IO;
        goto out;
    }

    hv_report_totals_t t;
    hv_report_get_totals(r, &t);
    fprintf(stderr,
            "harvestd: report %s: %" PRIu64 " %s (%" PRIu64 " ok, %" PRIu64 " failed), %" PRIu64
            " unreadable %s, %" PRIu64 " %s%s\n",
            strcmp(output, "-") == 0 ? "on standard output" : output, t.records,
            plural(t.records, "record", "records"), t.ok, t.failed, t.unreadable,
            plural(t.unreadable, "line", "lines"), t.hosts, plural(t.hosts, "host", "hosts"),
            t.other_host_records > 0 ? " and more" : "");
    status = EXIT_OK;
out:
    if (fd > STDIN_FILENO)
        close(fd);
    hv_report_free(r);
    free(output);
    return status;
}
