/*
 * merge.c: `harvestd merge --batch NAME [--entries N] -o FILE DIR_OR_FILE...` (commands.h): the
 * command line, the output file and the summary, over the merge library (merge.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "harvestd/commands.h"
#include "harvestd/common.h"
#include "harvestd/config.h"
#include "harvestd/merge.h"
#include "harvestd/options.h"
#include "harvestd/streamkeys.h"

#define EXIT_IO 1
#define EXIT_USAGE 2

typedef struct {
    const char *batch;
    const char *output;
    const char *entries; /* NULL: not given */
    uint64_t nentries;   /* ... its value */
    const char **inputs;
    size_t ninputs;
    int help;
} merge_args_t;

enum { O_BATCH, O_OUTPUT, O_ENTRIES, O_HELP };

static const hv_opt_t merge_opts[] = {
    {.name = "batch", .kind = HV_OPT_VALUE, .id = O_BATCH,
     .usage = "--batch NAME       the batch (as enqueue named it)"},
    {.name = "entries", .kind = HV_OPT_VALUE, .id = O_ENTRIES,
     .usage = "--entries N        the batch's number of entries: its total, as enqueue and\n"
              "                   status print it; the summary then counts the entries\n"
              "                   without a record"},
    {.name = "output", .letter = "o", .kind = HV_OPT_VALUE, .id = O_OUTPUT,
     .usage = "-o, --output FILE  created, never replaced; written to FILE.tmp.PID, fsynced\n"
              "                   and renamed into place; '-' for standard output"},
    {.usage = "DIR_OR_FILE        a file is read as it is, whatever its name; a directory\n"
              "                   (a daemon's spool) for the batch's files in it and in DIR/out"},
    {.name = "help", .letter = "h", .id = O_HELP, .usage = "-h, --help         this text"},
};

/* "--" ends the options; --help=x is an unknown option. */
const hv_opt_spec_t hv_cmd_merge_spec = {
    .opts = merge_opts,
    .nopts = HV_ARRAY_SIZE(merge_opts),
    .rules = HV_OPT_DASHDASH | HV_OPT_FLAG_VALUE_UNKNOWN,
    .say = HV_OPT_SAY_COLON,
};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: harvestd merge --batch NAME [--entries N] -o FILE DIR_OR_FILE...\n"
            "\n"
            "Gathers the records of stream batch NAME that several daemons wrote, each to its\n"
            "own out/NAME.CONSUMER.jsonl, into FILE: exactly one record per input line, in\n"
            "line order. For a line with several records the last one wins: the later\n"
            "fetched_at (one with a fetched_at beats one without), then the one read later\n"
            "(inputs in the order given, then position in the file). Records are copied as\n"
            "they were written; one that is not valid JSON as written (raw NUL or control\n"
            "bytes, ill-formed UTF-8: a damaged or hand-made output) is written repaired.\n"
            "\n");
    hv_opt_print_usage(out, &hv_cmd_merge_spec);
    fprintf(out,
            "\n"
            "A summary line on standard error counts records, duplicates dropped, lines\n"
            "without a record, and the lines skipped: invalid, torn (a last line cut short by\n"
            "a crash) and of other batches; and the records repaired, if any. A record's line\n"
            "is its line in the enqueued file, so the file's blank and comment lines, which\n"
            "were no entries, count as lines without a record too; with --entries, the\n"
            "entries without a record are counted instead.\n"
            "\n"
            "Exit status: 0 merged; 1 an input could not be read or FILE written; 2 usage\n"
            "error (including an existing FILE, and no output of the batch in the inputs).\n");
}

static int parse_args(int argc, char **argv, merge_args_t *a, char *err, size_t errcap)
{
    hv_opt_parser_t p;
    hv_opt_arg_t got;
    int what;
    memset(a, 0, sizeof(*a));
    a->inputs = hv_xcalloc((size_t)(argc > 0 ? argc : 1), sizeof(*a->inputs));
    hv_opt_init(&p, &hv_cmd_merge_spec, argc, argv);
    while ((what = hv_opt_next(&p, &got, err, errcap)) != HV_OPT_END) {
        if (what == HV_OPT_ERROR)
            return -1;
        if (what == HV_OPT_ARGUMENT) {
            if (strcmp(got.word, "-") == 0 && !got.after_dashdash)
                return hv_errf(err, errcap, -1,
                               "standard input cannot be an input: merge reads each input twice "
                               "(./- names a file called -)");
            a->inputs[a->ninputs++] = got.word;
            continue;
        }
        if (got.opt->id == O_HELP) {
            a->help = 1;
            return 0;
        }
        static const char *const names[] = {
            [O_BATCH] = "--batch", [O_OUTPUT] = "-o", [O_ENTRIES] = "--entries"};
        const char **slot = got.opt->id == O_BATCH    ? &a->batch
                            : got.opt->id == O_OUTPUT ? &a->output
                                                      : &a->entries;
        if (*slot != NULL)
            return hv_errf(err, errcap, -1, "%s given twice", names[got.opt->id]);
        *slot = got.value;
    }
    if (a->entries != NULL && hv_parse_uint(a->entries, &a->nentries) != 0)
        return hv_errf(err, errcap, -1, "--entries: '%s' is not a count", a->entries);
    if (a->batch == NULL)
        return hv_errf(err, errcap, -1, "missing --batch NAME");
    if (!hv_streamkeys_batch_name_ok(a->batch))
        return hv_errf(err, errcap, -1, "bad batch name (1 to %d bytes, no control characters)",
                       HV_STREAM_BATCH_MAX);
    if (a->output == NULL || a->output[0] == '\0')
        return hv_errf(err, errcap, -1, "missing -o FILE ('-' for standard output)");
    if (a->ninputs == 0)
        return hv_errf(err, errcap, -1,
                       "no inputs: name the daemons' spool directories or output files");
    return 0;
}

static int usage_error(const char *msg)
{
    fprintf(stderr, "harvestd: %s\nTry 'harvestd merge --help'.\n", msg);
    return EXIT_USAGE;
}

/* Give the finished temporary file its name, never over an existing file: renameat2() with
 * RENAME_NOREPLACE where the file system has it, else link() and unlink(). */
static int publish(const char *tmp, const char *path)
{
    if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) == 0)
        return 0;
    if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP)
        return -errno;
    if (link(tmp, path) != 0)
        return -errno;
    unlink(tmp);
    return 0;
}

/* The winners to `path` ("-": standard output). 0, UV_EEXIST (another file took the name
 * meanwhile), or another error with a message in `err`. */
static int write_output(hv_merge_t *m, const char *path, char *err, size_t errcap)
{
    if (strcmp(path, "-") == 0)
        return hv_merge_write(m, STDOUT_FILENO, "standard output", err, errcap);
    hv_cmd_tmp_t t;
    int rc = hv_cmd_tmp_open(&t, path, err, errcap);
    if (rc != 0)
        return rc;
    if ((rc = hv_merge_write(m, t.fd, t.path, err, errcap)) != 0)
        goto out;
    if (fsync(t.fd) != 0) {
        rc = hv_errf(err, errcap, -errno, "cannot write %s: fsync: %s", t.path, strerror(errno));
        goto out;
    }
    int c = close(t.fd);
    t.fd = -1;
    if (c != 0) {
        rc = hv_errf(err, errcap, -errno, "cannot write %s: %s", t.path, strerror(errno));
        goto out;
    }
    if ((rc = publish(t.path, path)) != 0) {
        hv_errf(err, errcap, rc, "cannot create %s: %s", path, strerror(-rc));
        goto out;
    }
    (void)hv_fsync_parent(path); /* the new name durable too, as far as the directory allows */
out:
    hv_cmd_tmp_close(&t, rc == 0);
    return rc;
}

static const char *plural(uint64_t n, const char *one, const char *many)
{
    return n == 1 ? one : many;
}

static void print_summary(const char *batch, const hv_merge_stats_t *s)
{
    char lines[192] = "";
    if (s->entries_known && s->winners > s->entries)
        snprintf(lines, sizeof(lines),
                 " (lines %" PRIu64 "-%" PRIu64 "; %" PRIu64
                 " %s with a record, more than the %" PRIu64 " %s given)",
                 s->first_line, s->last_line, s->winners, plural(s->winners, "line", "lines"),
                 s->entries, plural(s->entries, "entry", "entries"));
    else if (s->entries_known && s->winners > 0)
        snprintf(lines, sizeof(lines),
                 " (lines %" PRIu64 "-%" PRIu64 "; %" PRIu64 " of %" PRIu64 " %s without a record)",
                 s->first_line, s->last_line, s->missing, s->entries,
                 plural(s->entries, "entry", "entries"));
    else if (s->entries_known)
        snprintf(lines, sizeof(lines), " (%" PRIu64 " of %" PRIu64 " %s without a record)",
                 s->missing, s->entries, plural(s->entries, "entry", "entries"));
    else if (s->winners > 0 && s->first_line == 1)
        snprintf(lines, sizeof(lines), " (lines 1-%" PRIu64 ", %" PRIu64 " without a record)",
                 s->last_line, s->gaps);
    else if (s->winners > 0)
        snprintf(lines, sizeof(lines),
                 " (lines %" PRIu64 "-%" PRIu64 "; %" PRIu64 " of lines 1-%" PRIu64
                 " without a record)",
                 s->first_line, s->last_line, s->gaps, s->last_line);
    char repaired[96] = "";
    if (s->repaired > 0)
        snprintf(repaired, sizeof(repaired),
                 "; %" PRIu64 " %s repaired (not valid JSON as written)", s->repaired,
                 plural(s->repaired, "record", "records"));
    fprintf(stderr,
            "harvestd: merged batch %s: %" PRIu64 " %s%s from %" PRIu64 " %s; %" PRIu64
            " %s dropped; %" PRIu64 " invalid %s, %" PRIu64 " torn %s, %" PRIu64
            " of other batches%s\n",
            batch, s->winners, plural(s->winners, "record", "records"), lines, s->files,
            plural(s->files, "file", "files"), s->duplicates,
            plural(s->duplicates, "duplicate", "duplicates"), s->invalid,
            plural(s->invalid, "line", "lines"), s->torn, plural(s->torn, "line", "lines"),
            s->other, repaired);
}

/* "no output files of batch NAME (NAME.*.jsonl) in D1, D2 or their out/" */
static void print_no_files(const char *batch, const merge_args_t *a)
{
    char part[3 * HV_STREAM_BATCH_MAX + 1];
    if (hv_streamkeys_file_part(batch, 1, part, sizeof(part)) != 0)
        part[0] = '\0';
    fprintf(stderr, "harvestd: no output files of batch %s (%s.CONSUMER.jsonl) in ", batch, part);
    for (size_t i = 0; i < a->ninputs; i++)
        fprintf(stderr, "%s%s", a->inputs[i],
                i + 2 < a->ninputs    ? ", "
                : i + 2 == a->ninputs ? " or "
                                      : "");
    fprintf(stderr, " (nor in %s)\nTry 'harvestd merge --help'.\n",
            a->ninputs == 1 ? "its out/" : "their out/");
}

int hv_cmd_merge(int argc, char **argv)
{
    merge_args_t a;
    hv_merge_t *m = NULL;
    char err[1024];
    int rc = 0, status = EXIT_IO;
    struct stat st;
    hv_merge_stats_t s;

    if (parse_args(argc, argv, &a, err, sizeof(err)) != 0) {
        status = usage_error(err);
        goto out;
    }
    if (a.help) {
        usage(stdout);
        status = 0;
        goto out;
    }
    if (strcmp(a.output, "-") != 0 && lstat(a.output, &st) == 0) {
        snprintf(err, sizeof(err), "output %s already exists; refusing to replace it", a.output);
        status = usage_error(err);
        goto out;
    }
    m = hv_merge_new(a.batch);
    if (a.entries != NULL)
        hv_merge_set_entries(m, a.nentries);
    for (size_t i = 0; i < a.ninputs; i++) {
        if ((rc = hv_merge_add_input(m, a.inputs[i], err, sizeof(err))) != 0) {
            if (rc == UV_ENOENT) {
                status = usage_error(err);
            } else {
                fprintf(stderr, "harvestd: %s\n", err);
                status = EXIT_IO;
            }
            goto out;
        }
    }
    if (hv_merge_nfiles(m) == 0) {
        print_no_files(a.batch, &a);
        status = EXIT_USAGE;
        goto out;
    }
    if ((rc = hv_merge_index(m, err, sizeof(err))) != 0) {
        fprintf(stderr, "harvestd: %s\n", err);
        status = EXIT_IO;
        goto out;
    }
    hv_merge_select(m);
    if ((rc = write_output(m, a.output, err, sizeof(err))) != 0) {
        if (rc == UV_EEXIST) {
            snprintf(err, sizeof(err), "output %s already exists; refusing to replace it",
                     a.output);
            status = usage_error(err);
        } else {
            fprintf(stderr, "harvestd: %s\n", err);
            status = EXIT_IO;
        }
        goto out;
    }
    hv_merge_get_stats(m, &s);
    print_summary(a.batch, &s);
    status = 0;
out:
    free(a.inputs);
    hv_merge_free(m);
    return status;
}
