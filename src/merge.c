/*
 * merge.c: `harvestd merge --batch NAME -o FILE DIR_OR_FILE...`: the outputs several daemons
 * wrote for one stream batch, made into the file one `--once` run would have written: one
 * record per line, in line order, the last record of a line winning.
 *
 * "Last" across daemons is the later `fetched_at` (a record with one beats a record
 * without); on a tie, the one read later (argument order, then position in its file). Only
 * an index is kept per record (line, fetched_at, file, offset, length: 32 bytes); the
 * winners' bytes are then copied from their files as they are, never re-serialised.
 */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harvestd/commands.h"
#include "harvestd/common.h"
#include "harvestd/streamkeys.h"

enum { M_OK = 0, M_IO = 1, M_USAGE = 2 };

typedef struct {
    uint64_t line;
    uint64_t at;   /* fetched_at as YYYYMMDDhhmmssmmm; 0: absent */
    uint64_t off;
    uint32_t file;
    uint32_t len;  /* the record's bytes, without its newline */
} entry_t;

typedef struct {
    const char *batch;
    const char *output;
    char **files;
    size_t nfiles, capfiles;
    entry_t *v;
    size_t n, cap;
    uint64_t invalid, torn, other, too_long;
} merge_t;

static int usage(const char *msg, const char *arg)
{
    fprintf(stderr, "harvestd: merge: %s%s\nTry 'harvestd merge --help'.\n", msg,
            arg != NULL ? arg : "");
    return M_USAGE;
}

static void help(void)
{
    printf("usage: harvestd merge --batch NAME -o FILE DIR_OR_FILE...\n"
           "\n"
           "Reads the records of stream batch NAME that daemons wrote (a FILE as it is; a DIR\n"
           "for the batch's files in it and in DIR/out, i.e. a spool) and writes FILE (created;\n"
           "'-' for standard output): exactly one record per line, in line order, the last\n"
           "record of a line winning (the later fetched_at, then the later file and position).\n"
           "\n"
           "Exit status: 0 merged, 1 a file could not be read or written, 2 usage error.\n");
}

static void add_file(merge_t *m, const char *path)
{
    if (m->nfiles == m->capfiles) {
        m->capfiles = m->capfiles ? 2 * m->capfiles : 16;
        m->files = hv_xrealloc(m->files, m->capfiles * sizeof(*m->files));
    }
    m->files[m->nfiles++] = hv_xstrdup(path);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The batch's outputs in `dir`, sorted by name. */
static int add_dir(merge_t *m, const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return errno == ENOENT ? 0 : -errno;
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!hv_streamkeys_is_output_of(de->d_name, m->batch))
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            names = hv_xrealloc(names, cap * sizeof(*names));
        }
        names[n++] = hv_xstrdup(de->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof(*names), by_name);
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(dir) + 1 + strlen(names[i]) + 1;
        char *p = hv_xmalloc(len);
        snprintf(p, len, "%s/%s", dir, names[i]);
        struct stat st;
        if (stat(p, &st) == 0 && S_ISREG(st.st_mode))
            add_file(m, p);
        free(p);
        free(names[i]);
    }
    free(names);
    return 0;
}

/* "2026-12-02T13:49:36.216Z" as 20261202134936216; 0 for anything else. */
static uint64_t when_key(const char *s)
{
    static const char shape[] = "dddd-dd-ddTdd:dd:dd.dddZ";
    uint64_t v = 0;
    if (s == NULL || strlen(s) != sizeof(shape) - 1)
        return 0;
    for (size_t i = 0; shape[i] != '\0'; i++) {
        if (shape[i] == 'd') {
            if (s[i] < '0' || s[i] > '9')
                return 0;
            v = v * 10 + (uint64_t)(s[i] - '0');
        } else if (s[i] != shape[i]) {
            return 0;
        }
    }
    return v;
}

static void add_entry(merge_t *m, const entry_t *e)
{
    if (m->n == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 4096;
        m->v = hv_xrealloc(m->v, m->cap * sizeof(*m->v));
    }
    m->v[m->n++] = *e;
}

/* One line of file `fi` at `off` (without its newline; `complete`: it had one). */
static void index_line(merge_t *m, uint32_t fi, uint64_t off, const char *text, size_t len,
                       int complete)
{
    cJSON *obj = cJSON_ParseWithLength(text, len);
    const cJSON *batch = cJSON_GetObjectItemCaseSensitive(obj, "batch");
    const cJSON *line = cJSON_GetObjectItemCaseSensitive(obj, "line");
    if (!cJSON_IsObject(obj) || !cJSON_IsString(batch) || !cJSON_IsNumber(line) ||
        line->valuedouble < 1 || line->valuedouble > 9007199254740992.0 ||
        line->valuedouble != (double)(uint64_t)line->valuedouble) {
        if (!complete)
            m->torn++;
        else if (cJSON_IsObject(obj) && cJSON_IsString(batch) && strcmp(batch->valuestring, m->batch) != 0)
            m->other++;
        else
            m->invalid++;
        cJSON_Delete(obj);
        return;
    }
    if (strcmp(batch->valuestring, m->batch) != 0) {
        m->other++;
        cJSON_Delete(obj);
        return;
    }
    if (len > UINT32_MAX) {
        m->too_long++;
        cJSON_Delete(obj);
        return;
    }
    const cJSON *at = cJSON_GetObjectItemCaseSensitive(obj, "fetched_at");
    entry_t e = {
        .line = (uint64_t)line->valuedouble,
        .at = cJSON_IsString(at) ? when_key(at->valuestring) : 0,
        .off = off,
        .file = fi,
        .len = (uint32_t)len,
    };
    cJSON_Delete(obj);
    add_entry(m, &e);
}

static int index_file(merge_t *m, uint32_t fi, char *err, size_t errcap)
{
    FILE *f = fopen(m->files[fi], "rb");
    if (f == NULL) {
        snprintf(err, errcap, "cannot read %s: %s", m->files[fi], strerror(errno));
        return -1;
    }
    char *buf = NULL;
    size_t cap = 0;
    uint64_t off = 0;
    ssize_t n;
    errno = 0;
    while ((n = getline(&buf, &cap, f)) > 0) {
        int complete = buf[n - 1] == '\n';
        size_t len = (size_t)n - (complete ? 1 : 0);
        if (len > 0)
            index_line(m, fi, off, buf, len, complete);
        off += (uint64_t)n;
    }
    int rc = ferror(f) ? -1 : 0;
    if (rc != 0)
        snprintf(err, errcap, "cannot read %s: %s", m->files[fi], strerror(errno ? errno : EIO));
    free(buf);
    fclose(f);
    return rc;
}

/* Line ascending; within a line the winner last. */
static int by_line_then_age(const void *a, const void *b)
{
    const entry_t *x = a, *y = b;
    if (x->line != y->line)
        return x->line < y->line ? -1 : 1;
    if (x->at != y->at)
        return x->at < y->at ? -1 : 1;
    if (x->file != y->file)
        return x->file < y->file ? -1 : 1;
    return x->off < y->off ? -1 : x->off > y->off;
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* The winners to `fd`; counts them in *records. */
static int write_winners(merge_t *m, int fd, uint64_t *records, char *err, size_t errcap)
{
    int *fds = hv_xcalloc(m->nfiles, sizeof(*fds));
    char *rec = NULL;
    size_t reccap = 0;
    int rc = 0;
    for (size_t i = 0; i < m->nfiles; i++)
        fds[i] = -1;
    for (size_t i = 0; i < m->n && rc == 0; i++) {
        if (i + 1 < m->n && m->v[i + 1].line == m->v[i].line)
            continue; /* a later one wins */
        const entry_t *e = &m->v[i];
        if (fds[e->file] < 0 && (fds[e->file] = open(m->files[e->file], O_RDONLY | O_CLOEXEC)) < 0) {
            snprintf(err, errcap, "cannot read %s: %s", m->files[e->file], strerror(errno));
            rc = -1;
            break;
        }
        if ((size_t)e->len + 1 > reccap) {
            reccap = (size_t)e->len + 1;
            rec = hv_xrealloc(rec, reccap);
        }
        ssize_t got = pread(fds[e->file], rec, e->len, (off_t)e->off);
        if (got != (ssize_t)e->len) {
            snprintf(err, errcap, "cannot read %s: %s", m->files[e->file],
                     got < 0 ? strerror(errno) : "the file changed while merging");
            rc = -1;
            break;
        }
        rec[e->len] = '\n';
        if (write_all(fd, rec, (size_t)e->len + 1) != 0) {
            snprintf(err, errcap, "cannot write %s: %s", m->output, strerror(errno));
            rc = -1;
            break;
        }
        (*records)++;
    }
    for (size_t i = 0; i < m->nfiles; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    free(fds);
    free(rec);
    return rc;
}

/* Write through a temporary file in FILE's directory, fsynced, then linked into place
 * (never over an existing file). */
static int write_output(merge_t *m, uint64_t *records, char *err, size_t errcap)
{
    if (strcmp(m->output, "-") == 0)
        return write_winners(m, STDOUT_FILENO, records, err, errcap);
    size_t n = strlen(m->output) + 32;
    char *tmp = hv_xmalloc(n);
    snprintf(tmp, n, "%s.tmp.%ld", m->output, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    int rc = -1;
    if (fd < 0) {
        snprintf(err, errcap, "cannot create %s: %s", tmp, strerror(errno));
        free(tmp);
        return -1;
    }
    if (write_winners(m, fd, records, err, errcap) != 0)
        goto out;
    if (fsync(fd) != 0) {
        snprintf(err, errcap, "cannot write %s: %s", m->output, strerror(errno));
        goto out;
    }
    if (link(tmp, m->output) != 0) {
        snprintf(err, errcap, "cannot create %s: %s", m->output, strerror(errno));
        goto out;
    }
    rc = 0;
out:
    close(fd);
    unlink(tmp);
    free(tmp);
    return rc;
}

static void merge_free(merge_t *m)
{
    for (size_t i = 0; i < m->nfiles; i++)
        free(m->files[i]);
    free(m->files);
    free(m->v);
}

int hv_cmd_merge(int argc, char **argv)
{
    merge_t m = {0};
    char err[2048];
    int rc = M_OK, only_inputs = 0;
    const char **inputs = hv_xcalloc((size_t)argc + 1, sizeof(*inputs));
    size_t ninputs = 0;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (only_inputs || a[0] != '-' || strcmp(a, "-") == 0) {
            inputs[ninputs++] = a;
        } else if (strcmp(a, "--") == 0) {
            only_inputs = 1;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            help();
            goto done;
        } else if (strcmp(a, "--batch") == 0 || strcmp(a, "-o") == 0 ||
                   strcmp(a, "--output") == 0) {
            if (i + 1 >= argc) {
                rc = usage("missing value for ", a);
                goto done;
            }
            if (strcmp(a, "--batch") == 0)
                m.batch = argv[++i];
            else
                m.output = argv[++i];
        } else if (strncmp(a, "--batch=", 8) == 0) {
            m.batch = a + 8;
        } else if (strncmp(a, "--output=", 9) == 0) {
            m.output = a + 9;
        } else {
            rc = usage("unknown option: ", a);
            goto done;
        }
    }
    if (m.batch == NULL || m.batch[0] == '\0') {
        rc = usage("give the batch: --batch NAME", NULL);
        goto done;
    }
    if (m.output == NULL) {
        rc = usage("give the output: -o FILE (- for standard output)", NULL);
        goto done;
    }
    if (ninputs == 0) {
        rc = usage("give the daemons' outputs: directories (spools) or files", NULL);
        goto done;
    }
    struct stat st;
    if (strcmp(m.output, "-") != 0 && lstat(m.output, &st) == 0) {
        fprintf(stderr, "harvestd: merge: output %s already exists; refusing to replace it\n",
                m.output);
        rc = M_USAGE;
        goto done;
    }
    for (size_t i = 0; i < ninputs; i++) {
        if (stat(inputs[i], &st) != 0) {
            fprintf(stderr, "harvestd: merge: %s: %s\n", inputs[i], strerror(errno));
            rc = errno == ENOENT ? M_USAGE : M_IO;
            goto done;
        }
        if (S_ISDIR(st.st_mode)) {
            size_t n = strlen(inputs[i]) + 5;
            char *out = hv_xmalloc(n);
            snprintf(out, n, "%s/out", inputs[i]);
            int e = add_dir(&m, inputs[i]);
            if (e == 0)
                e = add_dir(&m, out);
            free(out);
            if (e != 0) {
                fprintf(stderr, "harvestd: merge: cannot read %s: %s\n", inputs[i], strerror(-e));
                rc = M_IO;
                goto done;
            }
        } else {
            add_file(&m, inputs[i]);
        }
    }
    if (m.nfiles == 0) {
        fprintf(stderr, "harvestd: merge: no output files of batch %s in the directories given\n",
                m.batch);
        rc = M_USAGE;
        goto done;
    }
    for (size_t i = 0; i < m.nfiles; i++) {
        if (index_file(&m, (uint32_t)i, err, sizeof(err)) != 0) {
            fprintf(stderr, "harvestd: merge: %s\n", err);
            rc = M_IO;
            goto done;
        }
    }
    qsort(m.v, m.n, sizeof(*m.v), by_line_then_age);
    uint64_t records = 0;
    if (write_output(&m, &records, err, sizeof(err)) != 0) {
        fprintf(stderr, "harvestd: merge: %s\n", err);
        rc = M_IO;
        goto done;
    }
    uint64_t first = m.n ? m.v[0].line : 0, last = m.n ? m.v[m.n - 1].line : 0;
    uint64_t gaps = m.n ? last - first + 1 - records : 0;
    fprintf(stderr,
            "harvestd: merged batch %s: %" PRIu64 " records (lines %" PRIu64 "-%" PRIu64
            ", %" PRIu64 " without a record) from %zu files; %" PRIu64
            " duplicates dropped; %" PRIu64 " invalid lines, %" PRIu64 " torn, %" PRIu64
            " of other batches\n",
            m.batch, records, first, last, gaps, m.nfiles, (uint64_t)m.n - records, m.invalid,
            m.torn, m.other + m.too_long);
done:
    free(inputs);
    merge_free(&m);
    return rc;
}
