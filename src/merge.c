/*
 * merge.c: one record per line of a stream batch from several daemons' outputs (see merge.h
 * for what is merged and how the winner of a line is chosen). The command is
 * src/cmd/merge.c.
 */
#include "harvestd/merge.h"

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
#include <uv.h>

#include "harvestd/common.h"
#include "harvestd/record.h"
#include "harvestd/streamkeys.h"
#include "harvestd/utf8.h"

/* Reading: the buffer starts small and grows up to one whole line of the longest record. */
#define READ_CHUNK ((size_t)64 << 10)
/* Writing: winners are gathered into one buffer and written in large pieces. */
#define WRITE_BUF ((size_t)1 << 20)

/* JSON texts nested deeper are not valid here (cJSON refuses them beyond 1000 anyway). */
#define JSON_DEPTH_MAX 1024

/* One record of the batch, as the index keeps it. */
typedef struct {
    uint64_t line;
    uint64_t at;         /* hv_merge_time_key() of fetched_at; 0: none */
    uint64_t off;        /* where the record starts in its file */
    uint32_t file;       /* index into hv_merge_t.files: with `off`, the reading order */
    uint32_t len : 31;   /* the record's bytes, without its newline */
    uint32_t repair : 1; /* not valid JSON as written: written by hv_merge_repair_line() */
} entry_t;

_Static_assert(sizeof(entry_t) == 32, "the index is meant to stay at 32 bytes a record");
_Static_assert(HV_RECORD_LINE_MAX < ((size_t)1 << 31), "a record's length fits entry_t.len");

typedef struct {
    char *path;
    dev_t dev; /* the file that was indexed: writing checks it reads the same one */
    ino_t ino;
} input_t;

struct hv_merge_s {
    char *batch;
    input_t *files;
    size_t nfiles, capfiles;
    entry_t *v;
    size_t n, cap;
    hv_merge_stats_t st;
};

hv_merge_t *hv_merge_new(const char *batch)
{
    hv_merge_t *m = hv_xcalloc(1, sizeof(*m));
    m->batch = hv_xstrdup(batch);
    return m;
}

void hv_merge_free(hv_merge_t *m)
{
    if (m == NULL)
        return;
    for (size_t i = 0; i < m->nfiles; i++)
        free(m->files[i].path);
    free(m->files);
    free(m->v);
    free(m->batch);
    free(m);
}

size_t hv_merge_nfiles(const hv_merge_t *m)
{
    return m->nfiles;
}

const char *hv_merge_file_path(const hv_merge_t *m, size_t i)
{
    return i < m->nfiles ? m->files[i].path : NULL;
}

void hv_merge_set_entries(hv_merge_t *m, uint64_t entries)
{
    m->st.entries_known = 1;
    m->st.entries = entries;
}

void hv_merge_get_stats(const hv_merge_t *m, hv_merge_stats_t *out)
{
    *out = m->st;
    out->files = m->nfiles;
    out->missing =
        m->st.entries_known && m->st.entries > m->st.winners ? m->st.entries - m->st.winners : 0;
}

/* ------------------------------------------------------------------------------ inputs */

static void add_file(hv_merge_t *m, const char *path, const struct stat *st)
{
    for (size_t i = 0; i < m->nfiles; i++)
        if (m->files[i].dev == st->st_dev && m->files[i].ino == st->st_ino)
            return; /* named twice (a spool and one of its files): its records count once */
    if (m->nfiles == m->capfiles) {
        m->capfiles = m->capfiles ? 2 * m->capfiles : 16;
        m->files = hv_xrealloc(m->files, m->capfiles * sizeof(*m->files));
    }
    m->files[m->nfiles++] =
        (input_t){.path = hv_xstrdup(path), .dev = st->st_dev, .ino = st->st_ino};
}

static char *join(const char *dir, const char *name)
{
    size_t dn = strlen(dir), len = dn + 1 + strlen(name) + 1;
    char *p = hv_xmalloc(len);
    snprintf(p, len, "%s%s%s", dir, dn > 0 && dir[dn - 1] == '/' ? "" : "/", name);
    return p;
}

/*
 * stat() of `path` failed with `e`. ENOENT from a name that is there is a symbolic link to
 * nothing, or an entry that went away after the directory was listed: an input that cannot
 * be read, never "no such input" (UV_ENOENT, which the command takes for a mistyped name).
 * `what` starts the message ("cannot read ").
 */
static int cannot_follow(const char *path, const char *what, int e, char *err, size_t errcap)
{
    struct stat lst;
    char to[256];
    if (e != ENOENT)
        return hv_errf(err, errcap, -e, "%s%s: %s", what, path, strerror(e));
    if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode)) {
        ssize_t n = readlink(path, to, sizeof(to) - 1);
        to[n > 0 ? (size_t)n : 0] = '\0';
        return hv_errf(err, errcap, UV_EIO, "%s%s: dangling symbolic link (to %s%s)", what, path,
                       n > 0 ? to : "?", n == (ssize_t)sizeof(to) - 1 ? "..." : "");
    }
    return hv_errf(err, errcap, UV_EIO, "%s%s: %s (removed while it was being read)", what, path,
                   strerror(e));
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The batch's outputs among the entries of `dir`, in name order. */
static int add_dir(hv_merge_t *m, const char *dir, char *err, size_t errcap)
{
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    DIR *d = opendir(dir);
    if (d == NULL)
        return hv_errf(err, errcap, -errno, "cannot read directory %s: %s", dir, strerror(errno));
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (de == NULL) {
            if (errno != 0)
                rc = hv_errf(err, errcap, -errno, "cannot read directory %s: %s", dir,
                             strerror(errno));
            break;
        }
        if (!hv_streamkeys_is_output_of(de->d_name, m->batch))
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            names = hv_xrealloc(names, cap * sizeof(*names));
        }
        names[n++] = hv_xstrdup(de->d_name);
    }
    closedir(d);
    if (n > 1)
        qsort(names, n, sizeof(*names), by_name);
    for (size_t i = 0; i < n && rc == 0; i++) {
        char *p = join(dir, names[i]);
        struct stat st;
        if (stat(p, &st) != 0)
            rc = cannot_follow(p, "cannot read ", errno, err, errcap);
        else if (!S_ISREG(st.st_mode))
            rc = hv_errf(err, errcap, UV_EFTYPE, "cannot read %s: not a regular file", p);
        else
            add_file(m, p, &st);
        free(p);
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return rc;
}

int hv_merge_add_input(hv_merge_t *m, const char *path, char *err, size_t errcap)
{
    struct stat st, lst;
    if (stat(path, &st) != 0) {
        int e = errno;
        if (e == ENOENT && lstat(path, &lst) != 0) /* not there at all */
            return hv_errf(err, errcap, UV_ENOENT, "%s: %s", path, strerror(e));
        if (e == ENOENT)
            return cannot_follow(path, "cannot read ", e, err, errcap);
        return hv_errf(err, errcap, -e, "%s: %s", path, strerror(e));
    }
    if (S_ISREG(st.st_mode)) {
        add_file(m, path, &st);
        return 0;
    }
    if (!S_ISDIR(st.st_mode))
        return hv_errf(err, errcap, UV_EFTYPE,
                       "cannot read %s: not a regular file or a directory (inputs are read twice)",
                       path);
    int rc = add_dir(m, path, err, errcap);
    if (rc != 0)
        return rc;
    char *out = join(path, "out");
    if (stat(out, &st) == 0) {
        if (S_ISDIR(st.st_mode))
            rc = add_dir(m, out, err, errcap);
    } else {
        int e = errno; /* ENOENT from a name that is there: out/ is a link to nothing */
        if (e != ENOENT || lstat(out, &st) == 0)
            rc = cannot_follow(out, "cannot read directory ", e, err, errcap);
    }
    free(out);
    return rc;
}

/* ------------------------------------------------------------------------------ parsing */

/* `n` digits at `s` as a number, or -1. */
static int digits(const char *s, size_t n)
{
    int v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

uint64_t hv_merge_time_key(const char *s)
{
    if (s == NULL || strlen(s) < 20)
        return 0;
    int year = digits(s, 4), mon = digits(s + 5, 2), day = digits(s + 8, 2);
    int hour = digits(s + 11, 2), min = digits(s + 14, 2), sec = digits(s + 17, 2);
    if (s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') || s[13] != ':' ||
        s[16] != ':' || year < 0 || mon < 1 || mon > 12 || day < 1 || day > 31 || hour < 0 ||
        hour > 23 || min < 0 || min > 59 || sec < 0 || sec > 60)
        return 0;
    const char *p = s + 19;
    int ms = 0;
    if (*p == '.') {
        int nd = 0;
        for (p++; *p >= '0' && *p <= '9'; p++, nd++)
            if (nd < 3)
                ms = ms * 10 + (*p - '0');
        if (nd == 0)
            return 0;
        for (; nd < 3; nd++)
            ms *= 10;
    }
    if ((*p != 'Z' && *p != 'z') || p[1] != '\0')
        return 0;
    uint64_t v = (uint64_t)year;
    v = v * 100 + (uint64_t)mon;
    v = v * 100 + (uint64_t)day;
    v = v * 100 + (uint64_t)hour;
    v = v * 100 + (uint64_t)min;
    v = v * 100 + (uint64_t)sec;
    return v * 1000 + (uint64_t)ms;
}

/* ------------------------------------------------------------------------------ JSON */

static int is_blank(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static int is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

static const unsigned char *skip_blanks(const unsigned char *p, const unsigned char *end)
{
    while (p < end && is_blank(*p))
        p++;
    return p;
}

/* The string at `p` (its opening quote): the byte after it, or NULL. */
static const unsigned char *scan_string(const unsigned char *p, const unsigned char *end)
{
    for (p++; p < end; p++) {
        if (*p == '"')
            return p + 1;
        if (*p < 0x20)
            return NULL;
        if (*p != '\\')
            continue;
        if (++p == end)
            return NULL;
        switch (*p) {
        case '"':
        case '\\':
        case '/':
        case 'b':
        case 'f':
        case 'n':
        case 'r':
        case 't':
            break;
        case 'u':
            if (end - p < 5)
                return NULL;
            for (int i = 1; i <= 4; i++)
                if (!is_digit(p[i]) && !((p[i] | 0x20) >= 'a' && (p[i] | 0x20) <= 'f'))
                    return NULL;
            p += 4;
            break;
        default:
            return NULL;
        }
    }
    return NULL;
}

/* The number at `p` as RFC 8259 spells one: the byte after it, or NULL. */
static const unsigned char *scan_number(const unsigned char *p, const unsigned char *end)
{
    if (p < end && *p == '-')
        p++;
    if (p == end || !is_digit(*p))
        return NULL;
    if (*p++ != '0')
        while (p < end && is_digit(*p))
            p++;
    if (p < end && *p == '.') {
        if (++p == end || !is_digit(*p))
            return NULL;
        while (p < end && is_digit(*p))
            p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        if (++p < end && (*p == '+' || *p == '-'))
            p++;
        if (p == end || !is_digit(*p))
            return NULL;
        while (p < end && is_digit(*p))
            p++;
    }
    return p;
}

static const unsigned char *scan_word(const unsigned char *p, const unsigned char *end,
                                      const char *word)
{
    size_t n = strlen(word);
    return (size_t)(end - p) >= n && memcmp(p, word, n) == 0 ? p + n : NULL;
}

/*
 * Whether [text, text+len) is one JSON text as RFC 8259 has it, in UTF-8. cJSON reads more:
 * any byte up to a space as a blank (NULs included), raw control bytes in strings, bytes of
 * any kind, "01", "1." and "1.e5", a byte order mark. A line it reads that this refuses is
 * written repaired.
 */
static int json_valid(const char *text, size_t len)
{
    const unsigned char *p = (const unsigned char *)text, *end = p + len;
    unsigned char open[JSON_DEPTH_MAX]; /* '{' or '[' of each enclosing value */
    size_t depth = 0;
    enum { WANT_VALUE, WANT_KEY, AFTER_VALUE } want = WANT_VALUE;

    if (!hv_utf8_valid(text, len))
        return 0;
    for (;;) {
        p = skip_blanks(p, end);
        if (want == AFTER_VALUE) {
            if (depth == 0)
                return p == end;
            if (p == end)
                return 0;
            if (*p == ',') {
                want = open[depth - 1] == '{' ? WANT_KEY : WANT_VALUE;
            } else if (*p == (open[depth - 1] == '{' ? '}' : ']')) {
                depth--;
            } else {
                return 0;
            }
            p++;
            continue;
        }
        if (p == end)
            return 0;
        if (want == WANT_KEY) {
            if (*p != '"' || (p = scan_string(p, end)) == NULL)
                return 0;
            p = skip_blanks(p, end);
            if (p == end || *p != ':')
                return 0;
            p++;
            want = WANT_VALUE;
            continue;
        }
        switch (*p) {
        case '{':
        case '[':
            if (depth == JSON_DEPTH_MAX)
                return 0;
            open[depth++] = *p;
            p = skip_blanks(p + 1, end);
            if (p < end && *p == (open[depth - 1] == '{' ? '}' : ']')) {
                depth--;
                p++;
                want = AFTER_VALUE;
            } else {
                want = open[depth - 1] == '{' ? WANT_KEY : WANT_VALUE;
            }
            continue;
        case '"':
            p = scan_string(p, end);
            break;
        case 't':
            p = scan_word(p, end, "true");
            break;
        case 'f':
            p = scan_word(p, end, "false");
            break;
        case 'n':
            p = scan_word(p, end, "null");
            break;
        default:
            p = scan_number(p, end);
            break;
        }
        if (p == NULL)
            return 0;
        want = AFTER_VALUE;
    }
}

/* Exactly one object and nothing after it, not even a blank: the writer's lines, and what
 * resume.c keeps. NULL for anything else. */
static cJSON *parse_object(const char *text, size_t len)
{
    const char *end = NULL;
    cJSON *obj = len > 0 ? cJSON_ParseWithLengthOpts(text, len, &end, 0) : NULL;
    if (obj != NULL && (!cJSON_IsObject(obj) || end != text + len)) {
        cJSON_Delete(obj);
        obj = NULL;
    }
    return obj;
}

/* `s` (`*n` bytes, valid UTF-8) with each NUL inside a string made U+FFFD; `s` itself when it
 * holds none, else a new copy (`s` is freed). Strings are found as cJSON finds them: a quote
 * opens one, and inside, a backslash takes the byte after it along. NULs between tokens stay:
 * they are blanks to cJSON. */
static char *nuls_in_strings(char *s, size_t *n)
{
    size_t nuls = 0, len = *n;
    if (memchr(s, '\0', len) == NULL)
        return s;
    for (size_t i = 0; i < len; i++)
        nuls += s[i] == '\0';
    char *out = hv_xmalloc(len + 2 * nuls + 1), *o = out;
    int in_string = 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (in_string && c == '\0') {
            memcpy(o, "\xEF\xBF\xBD", 3);
            o += 3;
            continue;
        }
        *o++ = c;
        if (!in_string) {
            in_string = c == '"';
        } else if (c == '\\' && i + 1 < len && s[i + 1] != '\0') {
            *o++ = s[++i];
        } else if (c == '"') {
            in_string = 0;
        }
    }
    *o = '\0';
    *n = (size_t)(o - out);
    free(s);
    return out;
}

/* hv_merge_repair_line(), and the object it printed when `obj` is not NULL (the caller
 * deletes it). */
static char *repair(const char *text, size_t len, size_t *out_len, cJSON **obj)
{
    size_t n = 0;
    char *s = nuls_in_strings(hv_utf8_sanitize(text, len, &n), &n);
    cJSON *o = parse_object(s, n);
    char *printed = o != NULL ? cJSON_PrintUnformatted(o) : NULL, *out = NULL;
    free(s);
    if (printed != NULL) {
        n = strlen(printed);
        /* Checked, not assumed: only valid JSON is ever written, and no line a later merge
         * or resume would take for too long. */
        if (n < HV_RECORD_LINE_MAX && json_valid(printed, n)) {
            out = hv_xmalloc(n + 1);
            memcpy(out, printed, n + 1);
            *out_len = n;
        }
        cJSON_free(printed);
    }
    if (obj != NULL && out != NULL)
        *obj = o;
    else
        cJSON_Delete(o);
    return out;
}

char *hv_merge_repair_line(const char *text, size_t len, size_t *out_len)
{
    return repair(text, len, out_len, NULL);
}

/* What the object `obj` (NULL: not one) is to the merge of `batch`. */
static hv_merge_line_t classify(const cJSON *obj, const char *batch, uint64_t *line, uint64_t *at)
{
    if (obj == NULL)
        return HV_MERGE_LINE_INVALID;
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(obj, "batch");
    if (!cJSON_IsString(b))
        return HV_MERGE_LINE_INVALID;
    if (strcmp(b->valuestring, batch) != 0)
        return HV_MERGE_LINE_OTHER_BATCH;
    /* A double holds every integer up to 2^53 exactly; cJSON keeps numbers as doubles. */
    const cJSON *l = cJSON_GetObjectItemCaseSensitive(obj, "line");
    if (!cJSON_IsNumber(l) || !(l->valuedouble >= 1 && l->valuedouble <= 9007199254740992.0) ||
        l->valuedouble != (double)(uint64_t)l->valuedouble)
        return HV_MERGE_LINE_INVALID;
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(obj, "fetched_at");
    *line = (uint64_t)l->valuedouble;
    *at = cJSON_IsString(f) ? hv_merge_time_key(f->valuestring) : 0;
    return HV_MERGE_LINE_RECORD;
}

hv_merge_line_t hv_merge_parse_line(const char *text, size_t len, const char *batch, uint64_t *line,
                                    uint64_t *at)
{
    hv_merge_line_t kind;
    cJSON *obj = NULL;
    if (json_valid(text, len)) {
        obj = parse_object(text, len);
        kind = classify(obj, batch, line, at);
    } else {
        size_t n;
        char *fixed = repair(text, len, &n, &obj);
        free(fixed);
        kind = classify(obj, batch, line, at);
        if (kind == HV_MERGE_LINE_RECORD)
            kind = HV_MERGE_LINE_REPAIRED;
    }
    cJSON_Delete(obj);
    return kind;
}

/* ------------------------------------------------------------------------------ indexing */

/* 0, or UV_ENOMEM when the index cannot grow (it is sized by the inputs, so running out is
 * an error to report, not a reason to abort). */
static int index_line(hv_merge_t *m, uint32_t fi, uint64_t off, const char *text, size_t len)
{
    entry_t e = {.off = off, .file = fi, .len = (uint32_t)len};
    switch (hv_merge_parse_line(text, len, m->batch, &e.line, &e.at)) {
    case HV_MERGE_LINE_RECORD:
        break;
    case HV_MERGE_LINE_REPAIRED:
        e.repair = 1;
        break;
    case HV_MERGE_LINE_OTHER_BATCH:
        m->st.other++;
        return 0;
    case HV_MERGE_LINE_INVALID:
    default:
        m->st.invalid++;
        return 0;
    }
    if (m->n == m->cap) {
        /* Grow by half, not double: the index is the merge's memory. Large blocks are
         * mmap()ed, so glibc's realloc moves them with mremap() rather than copying. */
        size_t cap = m->cap ? m->cap + m->cap / 2 : 4096;
        entry_t *v = cap < SIZE_MAX / sizeof(*v) ? realloc(m->v, cap * sizeof(*v)) : NULL;
        if (v == NULL)
            return UV_ENOMEM;
        m->v = v;
        m->cap = cap;
    }
    m->v[m->n++] = e;
    m->st.records++;
    return 0;
}

static int read_some(int fd, char *p, size_t n, size_t *got)
{
    ssize_t r;
    do
        r = read(fd, p, n);
    while (r < 0 && errno == EINTR);
    if (r < 0)
        return -errno;
    *got = (size_t)r;
    return 0;
}

/*
 * Index the lines of file `fi`. The buffer holds the current line from its start, and grows
 * until that line's newline is in it, but never beyond HV_RECORD_LINE_MAX (the longest line
 * the writer writes, newline included): a longer line is skipped up to its newline, with
 * nothing of it kept.
 */
static int index_file(hv_merge_t *m, uint32_t fi, char *err, size_t errcap)
{
    input_t *in = &m->files[fi];
    size_t cap = READ_CHUNK, have = 0;
    char *buf = NULL;
    uint64_t base = 0; /* the file offset of buf[0] */
    int skipping = 0, rc = 0;
    struct stat st;

    int fd = open(in->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return hv_errf(err, errcap, -errno, "cannot read %s: %s", in->path, strerror(errno));
    if (fstat(fd, &st) != 0) {
        rc = hv_errf(err, errcap, -errno, "cannot read %s: %s", in->path, strerror(errno));
        goto out;
    }
    in->dev = st.st_dev;
    in->ino = st.st_ino;
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    buf = hv_xmalloc(cap);
    for (;;) {
        size_t got = 0;
        if ((rc = read_some(fd, buf + have, cap - have, &got)) != 0) {
            rc = hv_errf(err, errcap, rc, "cannot read %s: %s", in->path, strerror(-rc));
            goto out;
        }
        if (got == 0)
            break;
        size_t scan = have, start = 0;
        have += got;
        const char *nl;
        while ((nl = memchr(buf + scan, '\n', have - scan)) != NULL) {
            size_t end = (size_t)(nl - buf);
            if (skipping) {
                m->st.invalid++;
            } else if (index_line(m, fi, base + start, buf + start, end - start) != 0) {
                rc = hv_errf(err, errcap, UV_ENOMEM,
                             "out of memory for the index, after %zu records (%s, offset %" PRIu64
                             ")",
                             m->n, in->path, base + start);
                goto out;
            }
            skipping = 0;
            start = scan = end + 1;
        }
        /* Keep the unfinished line, at the start of the buffer. */
        if (start > 0) {
            memmove(buf, buf + start, have - start);
            have -= start;
            base += start;
        }
        if (have == cap) {
            if (cap < HV_RECORD_LINE_MAX) {
                cap = HV_MIN(2 * cap, HV_RECORD_LINE_MAX);
                buf = hv_xrealloc(buf, cap);
            } else {
                skipping = 1;
                base += have;
                have = 0;
            }
        }
    }
    if (have > 0 || skipping)
        m->st.torn++;

out:
    free(buf);
    close(fd);
    return rc;
}

int hv_merge_index(hv_merge_t *m, char *err, size_t errcap)
{
    if (m->nfiles > UINT32_MAX)
        return hv_errf(err, errcap, UV_E2BIG, "too many input files (%zu)", m->nfiles);
    for (size_t i = 0; i < m->nfiles; i++) {
        int rc = index_file(m, (uint32_t)i, err, errcap);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* ------------------------------------------------------------------------------ selection */

/* Line ascending; within a line, the winner last: earlier fetched_at first (none is
 * earliest), then reading order. Every entry has its own (file, off), so no two are equal. */
static inline int before(const entry_t *x, const entry_t *y)
{
    if (x->line != y->line)
        return x->line < y->line;
    if (x->at != y->at)
        return x->at < y->at;
    if (x->file != y->file)
        return x->file < y->file;
    return x->off < y->off;
}

static inline void swap(entry_t *a, entry_t *b)
{
    entry_t t = *a;
    *a = *b;
    *b = t;
}

static void insertion_sort(entry_t *v, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        entry_t x = v[i];
        size_t j = i;
        for (; j > 0 && before(&x, &v[j - 1]); j--)
            v[j] = v[j - 1];
        v[j] = x;
    }
}

static void sift_down(entry_t *v, size_t root, size_t n)
{
    for (size_t child; (child = 2 * root + 1) < n; root = child) {
        if (child + 1 < n && before(&v[child], &v[child + 1]))
            child++;
        if (!before(&v[root], &v[child]))
            return;
        swap(&v[root], &v[child]);
    }
}

static void heap_sort(entry_t *v, size_t n)
{
    for (size_t i = n / 2; i-- > 0;)
        sift_down(v, i, n);
    for (size_t i = n; i-- > 1;) {
        swap(&v[0], &v[i]);
        sift_down(v, 0, i);
    }
}

/*
 * In place (introsort: quicksort, heapsort past a depth bound, insertion sort for short
 * runs). glibc's qsort() may allocate a copy of the whole array for a merge sort, which
 * would double the merge's memory at its peak.
 */
static void sort_entries(entry_t *v, size_t n, unsigned depth)
{
    while (n > 16) {
        if (depth-- == 0) {
            heap_sort(v, n);
            return;
        }
        size_t mid = n / 2;
        if (before(&v[mid], &v[0]))
            swap(&v[mid], &v[0]);
        if (before(&v[n - 1], &v[mid])) {
            swap(&v[n - 1], &v[mid]);
            if (before(&v[mid], &v[0]))
                swap(&v[mid], &v[0]);
        }
        const entry_t pivot = v[mid];
        /* Hoare's partition: [0, j] <= pivot <= [j + 1, n). The pivot is the median of
         * three distinct entries, so both sides are non-empty. */
        size_t i = 0, j = n - 1;
        for (;;) {
            while (before(&v[i], &pivot))
                i++;
            while (before(&pivot, &v[j]))
                j--;
            if (i >= j)
                break;
            swap(&v[i], &v[j]);
            i++;
            j--;
        }
        size_t left = j + 1;
        if (left < n - left) {
            sort_entries(v, left, depth);
            v += left;
            n -= left;
        } else {
            sort_entries(v + left, n - left, depth);
            n = left;
        }
    }
    insertion_sort(v, n);
}

void hv_merge_select(hv_merge_t *m)
{
    unsigned depth = 0;
    for (size_t k = m->n; k > 0; k >>= 1)
        depth += 2;
    hv_merge__select_depth(m, depth);
}

void hv_merge__select_depth(hv_merge_t *m, unsigned depth)
{
    sort_entries(m->v, m->n, depth);
    size_t w = 0;
    for (size_t i = 0; i < m->n; i++)
        if (i + 1 == m->n || m->v[i + 1].line != m->v[i].line)
            m->v[w++] = m->v[i];
    m->n = w;
    if (w == 0) {
        free(m->v);
        m->v = NULL;
        m->cap = 0;
    } else if (w < m->cap) {
        m->v = hv_xrealloc(m->v, w * sizeof(*m->v));
        m->cap = w;
    }
    m->st.winners = w;
    m->st.duplicates = m->st.records - w;
    m->st.first_line = w ? m->v[0].line : 0;
    m->st.last_line = w ? m->v[w - 1].line : 0;
    m->st.gaps = w ? m->st.last_line - w : 0;
    m->st.repaired = 0;
    for (size_t i = 0; i < w; i++)
        m->st.repaired += m->v[i].repair;
}

/* ------------------------------------------------------------------------------ writing */

/* `n` bytes at `off`: 0, 1 when the file ends first, or -errno. */
static int pread_all(int fd, char *p, size_t n, uint64_t off)
{
    while (n > 0) {
        ssize_t r = pread(fd, p, n, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r == 0)
            return 1;
        p += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

static void close_all(int *fds, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (fds[i] >= 0) {
            close(fds[i]);
            fds[i] = -1;
        }
}

/* File `fi`, opened on first use and checked to be the file indexed. Running out of
 * descriptors closes the others (there may be more inputs than a process may open). */
static int input_fd(hv_merge_t *m, int *fds, uint32_t fi, char *err, size_t errcap)
{
    const input_t *in = &m->files[fi];
    if (fds[fi] >= 0)
        return fds[fi];
    int fd = open(in->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
        close_all(fds, m->nfiles);
        fd = open(in->path, O_RDONLY | O_CLOEXEC);
    }
    if (fd < 0)
        return hv_errf(err, errcap, -errno, "cannot read %s: %s", in->path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_dev != in->dev || st.st_ino != in->ino) {
        close(fd);
        return hv_errf(err, errcap, UV_EIO, "%s was replaced while merging", in->path);
    }
    return fds[fi] = fd;
}

/* `text` and a newline to `out` through `buf` (`*used` bytes in it so far). 0, or -errno. */
static int put_line(int out, char *buf, size_t *used, const char *text, size_t n)
{
    int rc;
    if (n + 1 > WRITE_BUF - *used && *used > 0) {
        if ((rc = hv_write_all(out, buf, *used)) != 0)
            return rc;
        *used = 0;
    }
    if (n + 1 > WRITE_BUF) {
        if ((rc = hv_write_all(out, text, n)) != 0)
            return rc;
        return hv_write_all(out, "\n", 1);
    }
    memcpy(buf + *used, text, n);
    buf[*used + n] = '\n';
    *used += n + 1;
    return 0;
}

int hv_merge_write(hv_merge_t *m, int out, const char *out_name, char *err, size_t errcap)
{
    int *fds = hv_xmalloc((m->nfiles ? m->nfiles : 1) * sizeof(*fds));
    char *buf = hv_xmalloc(WRITE_BUF), *big = NULL;
    size_t used = 0, bigcap = 0;
    int rc = 0;

    for (size_t i = 0; i < m->nfiles; i++)
        fds[i] = -1;
    for (size_t i = 0; i < m->n; i++) {
        const entry_t *e = &m->v[i];
        size_t need = (size_t)e->len + 1; /* its newline too: proof that it still ends there */
        int fd = input_fd(m, fds, e->file, err, errcap);
        if (fd < 0) {
            rc = fd;
            goto out;
        }
        if (need > WRITE_BUF - used && used > 0) {
            if ((rc = hv_write_all(out, buf, used)) != 0)
                goto write_failed;
            used = 0;
        }
        char *dst = buf + used;
        if (need > WRITE_BUF) {
            if (need > bigcap) {
                free(big);
                big = hv_xmalloc(need);
                bigcap = need;
            }
            dst = big;
        }
        int r = pread_all(fd, dst, need, e->off);
        if (r < 0) {
            rc =
                hv_errf(err, errcap, r, "cannot read %s: %s", m->files[e->file].path, strerror(-r));
            goto out;
        }
        if (r > 0 || dst[e->len] != '\n') {
            rc = hv_errf(err, errcap, UV_EIO,
                         "%s changed while merging (the record at offset %" PRIu64
                         " is no longer there)",
                         m->files[e->file].path, e->off);
            goto out;
        }
        if (e->repair) {
            /* Repaired as when it was indexed (the same bytes, so the same result). */
            size_t n = 0;
            char *fixed = hv_merge_repair_line(dst, e->len, &n);
            if (fixed == NULL) {
                rc = hv_errf(err, errcap, UV_EIO,
                             "%s changed while merging (the record at offset %" PRIu64
                             " is no longer one)",
                             m->files[e->file].path, e->off);
                goto out;
            }
            rc = put_line(out, buf, &used, fixed, n);
            free(fixed);
            if (rc != 0)
                goto write_failed;
        } else if (dst == big) {
            if ((rc = hv_write_all(out, big, need)) != 0)
                goto write_failed;
        } else {
            used += need;
        }
    }
    if (used > 0 && (rc = hv_write_all(out, buf, used)) != 0)
        goto write_failed;
    goto out;

write_failed:
    rc = hv_errf(err, errcap, rc, "cannot write %s: %s", out_name, strerror(-rc));
out:
    close_all(fds, m->nfiles);
    free(fds);
    free(buf);
    free(big);
    return rc;
}
