/* spool.c: claiming, resuming, completing and rejecting spool files. */
#include "harvestd/spool.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/queue.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harvestd/batch.h"
#include "harvestd/common.h"
#include "harvestd/handles.h"
#include "harvestd/log.h"
#include "harvestd/reader.h"
#include "harvestd/record.h"
#include "harvestd/resume.h"
#include "harvestd/streamkeys.h"
#include "harvestd/utf8.h"

#define MAX_SUFFIX 10000
#define SCAN_MAX 10000
#define SCAN_DEBOUNCE_MS 20

typedef struct sbatch_s {
    hv_spool_t *sp;
    char *name;
    char *active_path;
    char *out_path;
    char *summary_path;
    char *crash_path;         /* out/NAME.crashes: input lines whose page crashed the parser */
    int lock_fd;
    int resumed;
    hv_okset_t *okset;
    hv_okset_t *crashed;      /* lines whose page crashed the parser (note or record); NULL: new */
    hv_batch_t *batch;
    TAILQ_ENTRY(sbatch_s) link;
} sbatch_t;

struct hv_spool_s {
    uv_loop_t *loop;
    const hv_config_t *cfg;
    hv_engine_t *engine;
    hv_spool_cbs_t cbs;
    void *ud;
    char *incoming;
    char *active;
    char *done;
    char *rejected;
    char *out;
    uv_fs_event_t event;
    uv_timer_t timer;
    hv_handles_t handles;      /* event, timer */
    int handles_closed;
    int stopping;
    int closing;
    void (*closed)(void *ud);
    void *closed_ud;
    TAILQ_HEAD(, sbatch_s) batches;
    unsigned nactive;
    hv_spool_stats_t stats;
};

static void scan(hv_spool_t *sp);
static void on_handles_closed(hv_handles_t *hs);

static char *join(const char *dir, const char *name, const char *suffix)
{
    size_t n = strlen(dir) + strlen(name) + strlen(suffix) + 2;
    char *p = hv_xmalloc(n);
    snprintf(p, n, "%s/%s%s", dir, name, suffix);
    return p;
}

static int exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

static int ensure_dir(const char *path, char *err, size_t errcap)
{
    struct stat st;
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode))
            return 0;
        snprintf(err, errcap, "%s exists and is not a directory", path);
        return UV_ENOTDIR;
    }
    if (mkdir(path, 0750) != 0 && errno != EEXIST) {
        int e = errno;
        snprintf(err, errcap, "cannot create %s: %s", path, strerror(e));
        return uv_translate_sys_error(e);
    }
    return 0;
}

/* Every subdirectory is written: files are renamed into and out of each, outputs and notes
 * are created in out/. One that cannot be would fail batch after batch, so it stops the
 * start instead. */
static int ensure_writable(const char *path, char *err, size_t errcap)
{
    if (faccessat(AT_FDCWD, path, W_OK | X_OK, AT_EACCESS) == 0)
        return 0;
    int e = errno;
    snprintf(err, errcap, "cannot write to %s: %s", path, strerror(e));
    return uv_translate_sys_error(e);
}

static void spool_free(hv_spool_t *sp)
{
    free(sp->incoming);
    free(sp->active);
    free(sp->done);
    free(sp->rejected);
    free(sp->out);
    free(sp);
}

int hv_spool_open(uv_loop_t *loop, const hv_config_t *cfg, hv_engine_t *engine,
                  const hv_spool_cbs_t *cbs, void *ud, hv_spool_t **out, char *err,
                  size_t errcap)
{
    struct stat st;
    char where[1100];

    *out = NULL;
    hv_config_where(cfg, "spool_dir", where, sizeof(where));
    int e = stat(cfg->spool_dir, &st) != 0 ? errno : S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
    if (e != 0) {
        snprintf(err, errcap, "%s: spool_dir: %s is not a directory (%s)", where, cfg->spool_dir,
                 e == ENOTDIR ? "not a directory" : strerror(e));
        return uv_translate_sys_error(e);
    }
    hv_spool_t *sp = hv_xcalloc(1, sizeof(*sp));
    sp->loop = loop;
    sp->cfg = cfg;
    sp->engine = engine;
    sp->cbs = *cbs;
    sp->ud = ud;
    sp->incoming = join(cfg->spool_dir, "incoming", "");
    sp->active = join(cfg->spool_dir, "active", "");
    sp->done = join(cfg->spool_dir, "done", "");
    sp->rejected = join(cfg->spool_dir, "rejected", "");
    sp->out = join(cfg->spool_dir, "out", "");
    TAILQ_INIT(&sp->batches);
    const char *dirs[] = {sp->incoming, sp->active, sp->done, sp->rejected, sp->out};
    for (size_t i = 0; i < HV_ARRAY_SIZE(dirs); i++) {
        int rc = ensure_dir(dirs[i], err, errcap);
        if (rc == 0)
            rc = ensure_writable(dirs[i], err, errcap);
        if (rc != 0) {
            spool_free(sp);
            return rc;
        }
    }
    /* From here on the spool owns handles: it goes only through hv_spool_close(). */
    hv_handles_init(&sp->handles, on_handles_closed);
    uv_timer_init(loop, &sp->timer);
    uv_fs_event_init(loop, &sp->event);
    sp->timer.data = sp;
    sp->event.data = sp;
    hv_handles_own(&sp->handles, (uv_handle_t *)&sp->timer);
    hv_handles_own(&sp->handles, (uv_handle_t *)&sp->event);
    *out = sp;
    return 0;
}

/* ---- moving files ---- */

/* Rename `from` into `dir` as `name`, or `name.1`, `name.2`... whichever is free; never
 * replaces a file. Returns 0 with the final name in *final (malloc'd), or a UV_E* error. */
static int move_unique(const char *from, const char *dir, const char *name, char **final)
{
    char suffix[32];
    for (int i = 0; i < MAX_SUFFIX; i++) {
        if (i == 0)
            suffix[0] = '\0';
        else
            snprintf(suffix, sizeof(suffix), ".%d", i);
        char *to = join(dir, name, suffix);
        int rc = renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE);
        int e = errno;
        free(to);
        if (rc == 0) {
            if (final != NULL) {
                size_t n = strlen(name) + strlen(suffix) + 1;
                *final = hv_xmalloc(n);
                snprintf(*final, n, "%s%s", name, suffix);
            }
            return 0;
        }
        if (e != EEXIST)
            return uv_translate_sys_error(e);
    }
    return UV_EEXIST;
}

static void fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

static void reject(hv_spool_t *sp, const char *from, const char *name, const char *reason)
{
    char *final = NULL;
    int rc = move_unique(from, sp->rejected, name, &final);
    if (rc != 0) {
        HV_LOG(HV_LOG_WARNING, "event=reject_failed file=\"%s\" reason=\"%s\" err=%s", from,
               reason, uv_err_name(rc));
        return;
    }
    /* The reason appears whole or not at all: written beside the batches in active/ (a
     * dotfile nothing claims) and renamed into place. */
    char *reason_path = join(sp->rejected, final, ".reason");
    char *tmp_path = join(sp->active, ".reason-", final);
    FILE *f = fopen(tmp_path, "w");
    if (f != NULL) {
        /* Each errno is taken right after the call that failed. */
        int e = fprintf(f, "%s\n", reason) < 0 ? errno : 0;
        if (fclose(f) != 0 && e == 0)
            e = errno;
        if (e == 0 && rename(tmp_path, reason_path) != 0)
            e = errno;
        if (e != 0) {
            HV_LOG(HV_LOG_WARNING, "event=reject_reason_failed file=\"%s\" err=%s", reason_path,
                   strerror(e));
            unlink(tmp_path);
        }
    }
    HV_LOG(HV_LOG_WARNING, "event=rejected file=\"%s\" reason=\"%s\"", final, reason);
    sp->stats.rejected++;
    free(tmp_path);
    free(reason_path);
    free(final);
}

/* ---- summaries ---- */

static void add_uint(cJSON *obj, const char *key, uint64_t v)
{
    char digits[32];
    snprintf(digits, sizeof(digits), "%" PRIu64, v);
    cJSON_AddItemToObject(obj, key, cJSON_CreateRaw(digits));
}

/* Write all of `data`: 0, or the UV_E* error of the write that failed. A write that takes
 * nothing sets no errno, and is UV_EIO. */
static int write_all(int fd, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t w = write(fd, data, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return uv_translate_sys_error(errno);
        if (w == 0)
            return UV_EIO;
        data += w;
        len -= (size_t)w;
    }
    return 0;
}

static int write_summary(sbatch_t *sb, int64_t finished_ms, char *err, size_t errcap)
{
    hv_spool_t *sp = sb->sp;
    const hv_batch_stats_t *s = hv_batch_stats(sb->batch);
    char ts[32], digits[64];
    int rc = 0;

    cJSON *root = cJSON_CreateObject();
    size_t name_len;
    char *name = hv_utf8_sanitize(sb->name, strlen(sb->name), &name_len);
    cJSON_AddStringToObject(root, "batch", name);
    free(name);
    add_uint(root, "records", s->records + s->skipped);
    add_uint(root, "ok", s->ok + s->skipped);
    add_uint(root, "failed", s->failed);
    add_uint(root, "resumed", s->skipped);
    cJSON *types = cJSON_AddObjectToObject(root, "error_types");
    for (int t = 1; t < HV_ET__COUNT; t++)
        if (s->by_type[t] > 0)
            add_uint(types, hv_error_type_name((hv_error_type_t)t), s->by_type[t]);
    cJSON *statuses = cJSON_AddObjectToObject(root, "http_statuses");
    for (int code = 100; code < 600; code++) {
        if (s->by_status[code] > 0) {
            snprintf(digits, sizeof(digits), "%d", code);
            add_uint(statuses, digits, s->by_status[code]);
        }
    }
    add_uint(root, "body_bytes_total", s->body_bytes);
    add_uint(root, "body_bytes_mean", s->with_bytes ? s->body_bytes / s->with_bytes : 0);
    if (hv_engine_recrawl(sp->engine) != NULL) {
        cJSON *re = cJSON_AddObjectToObject(root, "recrawl");
        add_uint(re, "not_modified", s->not_modified);
        add_uint(re, "unchanged", s->unchanged);
        add_uint(re, "from_cache", s->from_cache);
    }
    hv_format_rfc3339_ms(ts, s->started_unix_ms);
    cJSON_AddStringToObject(root, "started_at", ts);
    hv_format_rfc3339_ms(ts, finished_ms);
    cJSON_AddStringToObject(root, "finished_at", ts);
    double elapsed = (double)(finished_ms - s->started_unix_ms) / 1000.0;
    snprintf(digits, sizeof(digits), "%.3f", elapsed);
    cJSON_AddItemToObject(root, "elapsed_s", cJSON_CreateRaw(digits));
    snprintf(digits, sizeof(digits), "%.1f", elapsed > 0 ? (double)s->records / elapsed : 0.0);
    cJSON_AddItemToObject(root, "pages_per_s", cJSON_CreateRaw(digits));
    char *text = cJSON_Print(root);
    cJSON_Delete(root);

    /* temporary file, fsync, rename, fsync the directory: all or nothing */
    size_t n = strlen(sp->out) + strlen(sb->name) + 32;
    char *tmp = hv_xmalloc(n);
    snprintf(tmp, n, "%s/.%s.summary.tmp", sp->out, sb->name);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        rc = uv_translate_sys_error(errno);
        goto out;
    }
    rc = write_all(fd, text, strlen(text));
    if (rc == 0)
        rc = write_all(fd, "\n", 1);
    if (rc == 0 && fsync(fd) != 0)
        rc = uv_translate_sys_error(errno);
    close(fd);
    if (rc == 0 && rename(tmp, sb->summary_path) != 0)
        rc = uv_translate_sys_error(errno);
    if (rc == 0)
        fsync_dir(sp->out);
    else
        unlink(tmp);

out:
    if (rc != 0)
        snprintf(err, errcap, "writing %s: %s", sb->summary_path, uv_strerror(rc));
    free(tmp);
    free(text);
    return rc;
}

/* ---- batches ---- */

static void sbatch_free(sbatch_t *sb)
{
    if (sb->lock_fd >= 0)
        close(sb->lock_fd); /* releases the flock */
    hv_okset_free(sb->okset);
    hv_okset_free(sb->crashed);
    free(sb->crash_path);
    free(sb->name);
    free(sb->active_path);
    free(sb->out_path);
    free(sb->summary_path);
    free(sb);
}

static void maybe_closed(hv_spool_t *sp)
{
    if (sp->closing && sp->handles_closed && sp->nactive == 0) {
        void (*closed)(void *) = sp->closed;
        void *ud = sp->closed_ud;
        spool_free(sp);
        if (closed != NULL)
            closed(ud);
    }
}

static void on_handles_closed(hv_handles_t *hs)
{
    hv_spool_t *sp = hv_container_of(hs, hv_spool_t, handles);
    sp->handles_closed = 1;
    maybe_closed(sp);
}

/*
 * The completion order. A batch completes in these steps, each one durable before the next:
 *
 *   1. the output is fsynced (the batch's writer, before on_batch_done gets status 0);
 *   2. the crash note is removed (its lines have their ParserCrashed records now);
 *   3. the summary is renamed into place: the output is complete;
 *   4. the input moves to done/: the batch is over.
 *
 * Users (and tests) wait for the summary or for done/, so everything before either must be
 * final by then: a note removed after the move would still be there for whoever saw done/.
 * An interruption between two steps leaves what a restart finishes: before 3 the batch
 * resumes (between 2 and 3 its noted lines, the note gone, are fetched again), after 3
 * start_batch only does step 4 (and step 2 again, for a note left by an older order).
 */

/* Step 2: 0 once no crash note is left (synced), or the error with its message in `err`. */
static int remove_crash_note(sbatch_t *sb, char *err, size_t errcap)
{
    if (unlink(sb->crash_path) == 0) {
        fsync_dir(sb->sp->out);
        return 0;
    }
    int e = errno;
    if (e == ENOENT)
        return 0;
    snprintf(err, errcap, "removing %s: %s", sb->crash_path, strerror(e));
    return uv_translate_sys_error(e);
}

/* Step 4. A batch whose input cannot move is complete all the same: its summary says so. */
static void move_to_done(sbatch_t *sb)
{
    hv_spool_t *sp = sb->sp;
    int rc = move_unique(sb->active_path, sp->done, sb->name, NULL);
    if (rc != 0)
        HV_LOG(HV_LOG_WARNING, "event=move_to_done_failed batch=\"%s\" err=%s", sb->name,
               uv_err_name(rc));
    else
        fsync_dir(sp->done);
}

/* Steps 2 to 4, the output being synced. 0, or the error with its message in `err`. */
static int complete_batch(sbatch_t *sb, char *err, size_t errcap)
{
    int rc = remove_crash_note(sb, err, errcap);
    if (rc == 0)
        rc = write_summary(sb, hv_now_unix_ms(), err, errcap);
    if (rc == 0)
        move_to_done(sb);
    return rc;
}

static void on_batch_done(void *ud, hv_batch_t *b, int status, const char *detail)
{
    sbatch_t *sb = ud;
    hv_spool_t *sp = sb->sp;
    char line[2048], err[1200];
    hv_batch_format_stats(b, uv_now(sp->loop), line, sizeof(line));

    if (status == 0) {
        int rc = complete_batch(sb, err, sizeof(err));
        if (rc != 0) {
            HV_LOG(HV_LOG_ERROR, "event=complete_failed batch=\"%s\" error=\"%s\"", sb->name,
                   err);
            sp->cbs.on_fatal(sp->ud, rc, err);
        } else {
            sp->stats.completed++;
            sp->stats.records += hv_batch_stats(b)->records;
            HV_LOG(HV_LOG_NOTICE, "event=batch_done batch=\"%s\" %s", sb->name, line);
        }
    } else if (status == HV_ECANCELLED) {
        HV_LOG(HV_LOG_NOTICE, "event=batch_interrupted batch=\"%s\" %s", sb->name, line);
    } else {
        HV_LOG(HV_LOG_ERROR, "event=batch_failed batch=\"%s\" error=\"%s failed: %s\" %s",
               sb->name, detail, hv_strerror(status), line);
        sp->cbs.on_fatal(sp->ud, status, detail);
    }
    hv_batch_free(b);
    TAILQ_REMOVE(&sp->batches, sb, link);
    sp->nactive--;
    sbatch_free(sb);
    sp->cbs.on_progress(sp->ud);
    if (!sp->stopping && !sp->closing)
        scan(sp); /* a slot is free */
    maybe_closed(sp);
}

static int skip_line(void *ud, const char *line, size_t len)
{
    sbatch_t *sb = ud;
    if (sb->okset != NULL && hv_okset_take(sb->okset, line, len))
        return HV_BATCH_SKIP;
    if (sb->crashed != NULL && hv_okset_take(sb->crashed, line, len)) {
        hv_okset_add(sb->crashed, line, len); /* every occurrence of the line */
        return HV_BATCH_CRASHED;
    }
    return HV_BATCH_FETCH;
}

/* Look at the start of the input: a NUL byte means it is not a URL list. */
static int looks_binary(int fd, char *reason, size_t cap)
{
    char buf[65536];
    ssize_t n = pread(fd, buf, sizeof(buf), 0);
    if (n < 0) {
        snprintf(reason, cap, "unreadable: %s", strerror(errno));
        return 1;
    }
    const char *nul = memchr(buf, '\0', (size_t)n);
    if (nul != NULL) {
        snprintf(reason, cap, "binary file: NUL byte at offset %zu", (size_t)(nul - buf));
        return 1;
    }
    return 0;
}

/* The extraction rules for a file: a first line "#! rules=NAME" picks a [rules "NAME"] set
 * (an unknown name rejects the file), otherwise default_rules applies. */
static int pick_rules(hv_spool_t *sp, int fd, const hv_ruleset_t **out, char *reason, size_t cap)
{
    char line[256];
    ssize_t n = pread(fd, line, sizeof(line) - 1, 0);
    *out = hv_config_ruleset(sp->cfg, sp->cfg->default_rules);
    if (n <= 0)
        return 0;
    line[n] = '\0';
    line[strcspn(line, "\r\n")] = '\0';
    if (strncmp(line, "#!", 2) != 0)
        return 0;
    const char *p = strstr(line + 2, "rules=");
    if (p == NULL)
        return 0;
    p += 6;
    size_t len = strcspn(p, " \t");
    char name[128];
    snprintf(name, sizeof(name), "%.*s", (int)HV_MIN(len, sizeof(name) - 1), p);
    *out = hv_config_ruleset(sp->cfg, name);
    if (*out == NULL) {
        int w = snprintf(reason, cap, "unknown rule set '%.100s' named on the first line", name);
        (void)w; /* a cut reason is still a reason */
        return -1;
    }
    return 0;
}

/* The batch's paths, holding the lock on its input (sbatch_free releases it). */
static sbatch_t *sbatch_new(hv_spool_t *sp, const char *name, int lock_fd, int resume)
{
    sbatch_t *sb = hv_xcalloc(1, sizeof(*sb));
    sb->sp = sp;
    sb->name = hv_xstrdup(name);
    sb->lock_fd = lock_fd;
    sb->resumed = resume;
    sb->active_path = join(sp->active, name, "");
    sb->out_path = join(sp->out, name, ".jsonl");
    sb->summary_path = join(sp->out, name, ".summary.json");
    sb->crash_path = join(sp->out, name, ".crashes");
    if (!resume)
        unlink(sb->crash_path); /* a stale one cannot be this batch's */
    return sb;
}

/* Resuming: repair the output (keep its complete records, cut what the interruption tore)
 * and read the crash note. 0, or the error with its message in `err`. */
static int resume_output(sbatch_t *sb, char *err, size_t errcap)
{
    hv_repair_t rep;
    sb->okset = hv_okset_new();
    sb->crashed = hv_okset_new();
    /* A crash is known from the note, or, once the note is gone, from its ParserCrashed
     * record (interrupted between removing the note and the summary). */
    int rc = hv_output_repair(sb->out_path, sb->okset, sb->crashed, &rep, err, errcap);
    if (rc != 0)
        return rc;
    hv_crash_note_read(sb->crash_path, sb->name, sb->crashed);
    HV_LOG(HV_LOG_NOTICE,
           "event=batch_resumed batch=\"%s\" records=%" PRIu64 " ok=%" PRIu64
           " parser_crashed=%" PRIu64 " truncated_bytes=%" PRIu64 " bad_lines=%" PRIu64,
           sb->name, rep.records, rep.ok, rep.crashed, rep.truncated, rep.bad_lines);
    sb->sp->stats.resumed++;
    return 0;
}

/* Start (or resume) the batch for active/<name>, whose lock we hold in lock_fd. A file that
 * cannot be a batch is rejected (`reason`); a failure of ours is fatal (`rc`, `err`). */
static void start_batch(hv_spool_t *sp, const char *name, int lock_fd, int resume)
{
    sbatch_t *sb = sbatch_new(sp, name, lock_fd, resume);
    char reason[256] = "", err[1200];
    const hv_ruleset_t *rules = NULL;
    hv_source_t *src = NULL;
    hv_batch_opts_t opts;
    int rc = 0;

    if (resume && exists(sb->summary_path)) {
        /* Completed, then interrupted before the input moved to done/. */
        HV_LOG(HV_LOG_NOTICE, "event=batch_already_complete batch=\"%s\"", name);
        rc = remove_crash_note(sb, err, sizeof(err));
        if (rc != 0)
            HV_LOG(HV_LOG_ERROR, "event=complete_failed batch=\"%s\" error=\"%s\"", name, err);
        else
            move_to_done(sb);
        goto out;
    }
    if (looks_binary(lock_fd, reason, sizeof(reason)) ||
        pick_rules(sp, lock_fd, &rules, reason, sizeof(reason)) != 0)
        goto out;
    rc = resume ? resume_output(sb, err, sizeof(err)) : 0;
    if (rc != 0) {
        HV_LOG(HV_LOG_ERROR, "event=resume_failed batch=\"%s\" error=\"%s\"", name, err);
        goto out;
    }
    rc = hv_reader_open(sp->loop, sb->active_path, &src);
    if (rc != 0) {
        snprintf(reason, sizeof(reason), "unreadable: %s", uv_strerror(rc));
        rc = 0; /* the file's fault, not ours */
        goto out;
    }
    opts = (hv_batch_opts_t){
        .name = name,
        .output_path = sb->out_path,
        /* A resumed batch appends, unless it had written nothing: then it starts afresh. */
        .output_append = resume && exists(sb->out_path),
        .fsync = sp->cfg->fsync,
        .fsync_interval_ms = sp->cfg->fsync_interval_ms,
        .skip = resume ? skip_line : NULL,
        .skip_ud = sb,
        .rules = rules,
        .crash_note = sb->crash_path,
    };
    TAILQ_INSERT_TAIL(&sp->batches, sb, link);
    sp->nactive++;
    rc = hv_batch_new(sp->engine, &opts, src, on_batch_done, sb, &sb->batch);
    if (rc != 0) {
        TAILQ_REMOVE(&sp->batches, sb, link);
        sp->nactive--;
        snprintf(err, sizeof(err), "opening %s: %s", sb->out_path, uv_strerror(rc));
        HV_LOG(HV_LOG_ERROR, "event=batch_start_failed batch=\"%s\" error=\"%s\"", name, err);
        goto out;
    }
    HV_LOG(HV_LOG_NOTICE, "event=batch_start batch=\"%s\" output=\"%s\" resume=%d", name,
           sb->out_path, resume);
    src = NULL; /* the batch's now, and sb is the spool's */
    sb = NULL;
    sp->cbs.on_progress(sp->ud);

out:
    if (reason[0] != '\0')
        reject(sp, sb->active_path, name, reason);
    if (src != NULL)
        hv_source_close(src);
    if (sb != NULL)
        sbatch_free(sb);
    if (rc != 0)
        sp->cbs.on_fatal(sp->ud, rc, err);
}

/* Open and lock active/<name>: the fd, -1 if another daemon holds it, or -2 (unreadable,
 * with the reason). */
static int lock_input(const char *path, char *reason, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        snprintf(reason, cap, "unreadable: %s", strerror(errno));
        return -2;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* With the stream as a source too, out/ also holds BATCH.CONSUMER.jsonl: a spool file named
 * like X.CONSUMER would write where the stream's batch X does. */
static int looks_like_stream_output(const hv_spool_t *sp, const char *name)
{
    char tail[3 * 256 + 16];
    if (!(sp->cfg->sources & HV_SOURCE_REDIS) ||
        hv_streamkeys_output_name("x", sp->cfg->redis_consumer, tail, sizeof(tail)) != 0)
        return 0;
    size_t tn = strlen(tail) - 1 - 6, n = strlen(name); /* ".CONSUMER" */
    return n > tn && memcmp(name + n - tn, tail + 1, tn) == 0;
}

static int name_in_use(hv_spool_t *sp, const char *name)
{
    if (looks_like_stream_output(sp, name))
        return 1;
    char *paths[4] = {join(sp->out, name, ".jsonl"), join(sp->out, name, ".summary.json"),
                      join(sp->active, name, ""), join(sp->done, name, "")};
    int used = 0;
    for (int i = 0; i < 4; i++) {
        used |= exists(paths[i]);
        free(paths[i]);
    }
    return used;
}

static void claim(hv_spool_t *sp, const char *name)
{
    char *from = join(sp->incoming, name, "");
    char *target = NULL;
    char suffix[32], reason[256];

    for (int i = 0; i < MAX_SUFFIX && target == NULL; i++) {
        if (i == 0)
            suffix[0] = '\0';
        else
            snprintf(suffix, sizeof(suffix), ".%d", i);
        size_t n = strlen(name) + strlen(suffix) + 1;
        char *cand = hv_xmalloc(n);
        snprintf(cand, n, "%s%s", name, suffix);
        if (name_in_use(sp, cand)) {
            free(cand);
            continue;
        }
        char *to = join(sp->active, cand, "");
        int rc = renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE);
        int e = errno;
        free(to);
        if (rc == 0) {
            target = cand;
            break;
        }
        free(cand);
        if (e == ENOENT)
            goto out; /* another daemon took it first */
        if (e != EEXIST) {
            HV_LOG(HV_LOG_WARNING, "event=claim_failed file=\"%s\" err=%s", name,
                   uv_err_name(uv_translate_sys_error(e)));
            goto out;
        }
    }
    if (target == NULL)
        goto out;
    char *path = join(sp->active, target, "");
    int fd = lock_input(path, reason, sizeof(reason));
    if (fd == -2)
        reject(sp, path, target, reason);
    else if (fd >= 0)
        start_batch(sp, target, fd, 0);
    free(path);

out:
    free(target);
    free(from);
}

typedef struct {
    char *name;
    int64_t mtime_ns;
} entry_t;

static int by_age(const void *a, const void *b)
{
    const entry_t *x = a, *y = b;
    if (x->mtime_ns != y->mtime_ns)
        return x->mtime_ns < y->mtime_ns ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int ignored_name(const char *name)
{
    size_t n = strlen(name);
    return name[0] == '.' || (n >= 4 && strcmp(name + n - 4, ".tmp") == 0);
}

/* List regular files of `dir` (oldest first); returns how many, *out malloc'd. */
static size_t list_files(const char *dir, entry_t **out)
{
    uv_fs_t req;
    uv_dirent_t ent;
    size_t n = 0, cap = 0;
    entry_t *v = NULL;

    *out = NULL;
    if (uv_fs_scandir(NULL, &req, dir, 0, NULL) < 0) {
        uv_fs_req_cleanup(&req);
        return 0;
    }
    while (n < SCAN_MAX && uv_fs_scandir_next(&req, &ent) != UV_EOF) {
        if (ignored_name(ent.name))
            continue;
        if (ent.type != UV_DIRENT_FILE && ent.type != UV_DIRENT_UNKNOWN)
            continue;
        char *path = join(dir, ent.name, "");
        struct stat st;
        int ok = lstat(path, &st) == 0 && S_ISREG(st.st_mode);
        free(path);
        if (!ok)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            v = hv_xrealloc(v, cap * sizeof(*v));
        }
        v[n].name = hv_xstrdup(ent.name);
        v[n].mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
        n++;
    }
    uv_fs_req_cleanup(&req);
    if (n > 1)
        qsort(v, n, sizeof(*v), by_age);
    *out = v;
    return n;
}

static void free_list(entry_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i].name);
    free(v);
}

static int is_running(const hv_spool_t *sp, const char *name)
{
    const sbatch_t *sb;
    TAILQ_FOREACH(sb, &sp->batches, link)
    {
        if (strcmp(sb->name, name) == 0)
            return 1;
    }
    return 0;
}

/* Resume files left in active/ (by us before a restart, or by a daemon that died), within
 * max_active_batches; a file another live daemon holds stays locked and is skipped. */
static void resume_active(hv_spool_t *sp)
{
    entry_t *v;
    char reason[256];
    size_t n = list_files(sp->active, &v);
    for (size_t i = 0; i < n && !sp->stopping && sp->nactive < sp->cfg->max_active_batches; i++) {
        if (is_running(sp, v[i].name))
            continue;
        char *path = join(sp->active, v[i].name, "");
        int fd = lock_input(path, reason, sizeof(reason));
        if (fd == -2)
            reject(sp, path, v[i].name, reason);
        else if (fd == -1)
            HV_LOG(HV_LOG_DEBUG, "event=skip_locked batch=\"%s\"", v[i].name);
        else
            start_batch(sp, v[i].name, fd, 1);
        free(path);
    }
    free_list(v, n);
}

static void scan(hv_spool_t *sp)
{
    if (sp->stopping || sp->closing || sp->nactive >= sp->cfg->max_active_batches)
        return;
    resume_active(sp);
    entry_t *v;
    size_t n = list_files(sp->incoming, &v);
    for (size_t i = 0; i < n && !sp->stopping && sp->nactive < sp->cfg->max_active_batches; i++)
        claim(sp, v[i].name);
    free_list(v, n);
}

static void on_timer(uv_timer_t *t)
{
    scan(t->data);
}

static void on_fs_event(uv_fs_event_t *h, const char *filename, int events, int status)
{
    hv_spool_t *sp = h->data;
    (void)filename;
    (void)events;
    if (status < 0) {
        HV_LOG(HV_LOG_WARNING, "event=watch_error dir=\"%s\" err=%s", sp->incoming,
               uv_err_name(status));
        return;
    }
    /* Events come in bursts (one per file, and our own renames): scan once shortly after,
     * then keep the periodic rescan going. */
    uv_timer_start(&sp->timer, on_timer, SCAN_DEBOUNCE_MS, sp->cfg->rescan_interval_ms);
}

/* inotify refused for want of a resource (the host's watch or instance limit, memory) is
 * not the spool's fault: the periodic rescan finds the files alone, later but all the same.
 * Anything else (incoming/ not readable, say) would defeat the rescan too. */
static int watch_unavailable(int rc)
{
    return rc == UV_ENOSPC || rc == UV_EMFILE || rc == UV_ENFILE || rc == UV_ENOMEM ||
           rc == UV_ENOSYS;
}

static const char *watch_hint(int rc)
{
    switch (rc) {
    case UV_ENOSPC:
        return ": the inotify watch limit is used up (fs.inotify.max_user_watches)";
    case UV_EMFILE:
        return ": the inotify instance limit (fs.inotify.max_user_instances) or the open-file "
               "limit is reached";
    default:
        return "";
    }
}

int hv_spool_start(hv_spool_t *sp, char *err, size_t errcap)
{
    int rc = uv_fs_event_start(&sp->event, on_fs_event, sp->incoming, 0);
    if (rc != 0 && !watch_unavailable(rc)) {
        snprintf(err, errcap, "cannot watch %s: %s", sp->incoming, uv_strerror(rc));
        return rc;
    }
    if (rc != 0)
        HV_LOG(HV_LOG_WARNING,
               "event=watch_unavailable dir=\"%s\" error=\"inotify: %s (%s)%s\" "
               "rescan_interval_ms=%" PRIu64 " note=\"relying on the periodic rescan every "
               "rescan_interval to find new files\"",
               sp->incoming, uv_strerror(rc), uv_err_name(rc), watch_hint(rc),
               sp->cfg->rescan_interval_ms);
    uv_timer_start(&sp->timer, on_timer, sp->cfg->rescan_interval_ms, sp->cfg->rescan_interval_ms);
    scan(sp);
    return 0;
}

void hv_spool_stop(hv_spool_t *sp)
{
    sp->stopping = 1;
    uv_timer_stop(&sp->timer);
    uv_fs_event_stop(&sp->event);
}

const hv_spool_stats_t *hv_spool_stats(const hv_spool_t *sp)
{
    static hv_spool_stats_t copy;
    copy = sp->stats;
    copy.active = sp->nactive;
    return &copy;
}


void hv_spool_close(hv_spool_t *sp, void (*done)(void *ud), void *ud)
{
    hv_spool_stop(sp);
    sp->closing = 1;
    sp->closed = done;
    sp->closed_ud = ud;
    hv_handles_close_all(&sp->handles);
}
