/* spool.c: watching, claiming and rejecting spool files; their batches run on the batch host
 * (bhost.h), which prepares, completes and syncs them. */
#include "harvestd/spool.h"

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

#include "harvestd/bhost.h"
#include "harvestd/common.h"
#include "harvestd/handles.h"
#include "harvestd/log.h"
#include "harvestd/reader.h"
#include "harvestd/streamkeys.h"

#define MAX_SUFFIX 10000 /* as hv_rename_unique() */
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
    int complete;             /* completed before an interruption: only moved to done/ */
    int startup;              /* found by the start-up scan, not yet started */
    TAILQ_ENTRY(sbatch_s) link;
} sbatch_t;

struct hv_spool_s {
    uv_loop_t *loop;
    const hv_config_t *cfg;
    hv_bhost_t *host;
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
    int first_scan;            /* hv_spool_start()'s scan runs */
    unsigned starting;         /* batches of that scan not yet started or ended */
    int ready_told;
    hv_spool_stats_t stats;
};

static void scan(hv_spool_t *sp);
static void on_timer(uv_timer_t *t);
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

/* What follows the cause of a spool directory that cannot be created or written: under
 * systemd, ProtectSystem=strict makes every path read-only that the unit's ReadWritePaths=
 * does not list, so a spool_dir moved elsewhere fails with EROFS until a drop-in adds it. */
static const char *writable_hint(int e)
{
    return e == EROFS ? " (under systemd, the unit's ReadWritePaths= must include spool_dir: "
                        "see README, \"The daemon\")"
                      : "";
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
        snprintf(err, errcap, "cannot create %s: %s%s", path, strerror(e), writable_hint(e));
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
    snprintf(err, errcap, "cannot write to %s: %s%s", path, strerror(e), writable_hint(e));
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

int hv_spool_open(uv_loop_t *loop, const hv_config_t *cfg, hv_bhost_t *host,
                  const hv_spool_cbs_t *cbs, void *ud, hv_spool_t **out, char *err,
                  size_t errcap)
{
    *out = NULL;
    int rc = hv_config_check_system(cfg, err, errcap);
    if (rc != 0)
        return rc;
    hv_spool_t *sp = hv_xcalloc(1, sizeof(*sp));
    sp->loop = loop;
    sp->cfg = cfg;
    sp->host = host;
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
        rc = ensure_dir(dirs[i], err, errcap);
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

/* ---- rejecting ---- */

static void reject(hv_spool_t *sp, const char *from, const char *name, const char *reason)
{
    char *final = NULL;
    int rc = hv_rename_unique(from, sp->rejected, name, &final);
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

/* ---- batches ---- */

static void sbatch_free(sbatch_t *sb)
{
    if (sb->lock_fd >= 0)
        close(sb->lock_fd); /* releases the flock */
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

/* Ready once the start-up scan's batches have all started (or ended). */
static void maybe_ready(hv_spool_t *sp)
{
    if (sp->ready_told || sp->first_scan || sp->starting > 0)
        return;
    sp->ready_told = 1;
    sp->cbs.on_ready(sp->ud);
}

static void started(sbatch_t *sb)
{
    if (sb->startup) {
        sb->startup = 0;
        sb->sp->starting--;
        maybe_ready(sb->sp);
    }
}

/* A batch slot is free: claim from the timer, never from inside the host's report. */
static void rescan_soon(hv_spool_t *sp)
{
    if (!sp->stopping && !sp->closing)
        uv_timer_start(&sp->timer, on_timer, 0, sp->cfg->rescan_interval_ms);
}

static void on_batch_start(void *ud, hv_hosted_t *hb, const hv_hosted_prep_t *prep)
{
    sbatch_t *sb = ud;
    hv_spool_t *sp = sb->sp;
    (void)hb;
    if (prep->resumed) {
        const hv_repair_t *rep = &prep->repair;
        HV_LOG(HV_LOG_NOTICE,
               "event=batch_resumed batch=\"%s\" records=%" PRIu64 " ok=%" PRIu64
               " parser_crashed=%" PRIu64 " truncated_bytes=%" PRIu64 " bad_lines=%" PRIu64,
               sb->name, rep->records, rep->ok, rep->crashed, rep->truncated, rep->bad_lines);
        sp->stats.resumed++;
    }
    HV_LOG(HV_LOG_NOTICE, "event=batch_start batch=\"%s\" output=\"%s\" resume=%d", sb->name,
           sb->out_path, prep->resumed);
    sp->cbs.on_progress(sp->ud);
    started(sb);
}

/* The batch is over, and when it completed its completion steps are durable (bhost.h). */
static void on_batch_end(void *ud, hv_hosted_t *hb, const hv_hosted_end_t *end)
{
    sbatch_t *sb = ud;
    hv_spool_t *sp = sb->sp;
    char line[2048] = "";
    (void)hb;
    if (end->batch != NULL)
        hv_batch_format_stats(end->batch, uv_now(sp->loop), line, sizeof(line));

    if (end->status == 0 && !sb->complete) {
        sp->stats.completed++;
        const hv_batch_stats_t *bs = hv_batch_stats(end->batch);
        sp->stats.records += bs->records - bs->recovered; /* written by this process */
        HV_LOG(HV_LOG_NOTICE, "event=batch_done batch=\"%s\" %s", sb->name, line);
    } else if (end->status == HV_ECANCELLED) {
        if (end->batch != NULL)
            HV_LOG(HV_LOG_NOTICE, "event=batch_interrupted batch=\"%s\" %s", sb->name, line);
    } else if (end->status != 0) {
        switch (end->step) {
        case HV_BHOST_STEP_PREPARE:
            HV_LOG(HV_LOG_ERROR, "event=resume_failed batch=\"%s\" error=\"%s\"", sb->name,
                   end->detail);
            break;
        case HV_BHOST_STEP_OPEN:
            HV_LOG(HV_LOG_ERROR, "event=batch_start_failed batch=\"%s\" error=\"%s\"",
                   sb->name, end->detail);
            break;
        case HV_BHOST_STEP_BATCH:
            HV_LOG(HV_LOG_ERROR, "event=batch_failed batch=\"%s\" error=\"%s failed: %s\" %s",
                   sb->name, end->detail, hv_strerror(end->status), line);
            break;
        case HV_BHOST_STEP_COMPLETE:
            HV_LOG(HV_LOG_ERROR, "event=complete_failed batch=\"%s\" error=\"%s\"", sb->name,
                   end->detail);
            break;
        }
        sp->cbs.on_fatal(sp->ud, end->status, end->detail);
    }
    TAILQ_REMOVE(&sp->batches, sb, link);
    sp->nactive--;
    started(sb);
    sbatch_free(sb);
    sp->cbs.on_progress(sp->ud);
    rescan_soon(sp);
    maybe_closed(sp);
}

static const hv_hosted_cbs_t hosted_cbs = {on_batch_start, NULL, on_batch_end};

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
    char name[128];
    *out = hv_config_ruleset(sp->cfg, sp->cfg->default_rules);
    if (!hv_reader_rules_name(fd, name, sizeof(name)))
        return 0;
    *out = hv_config_ruleset(sp->cfg, name);
    if (*out == NULL) {
        int w = snprintf(reason, cap, "unknown rule set '%.100s' named on the first line", name);
        (void)w; /* a cut reason is still a reason */
        return -1;
    }
    return 0;
}

/* The batch's paths, holding the lock on its input (sbatch_free releases it). */
static sbatch_t *sbatch_new(hv_spool_t *sp, const char *name, int lock_fd)
{
    sbatch_t *sb = hv_xcalloc(1, sizeof(*sb));
    sb->sp = sp;
    sb->name = hv_xstrdup(name);
    sb->lock_fd = lock_fd;
    sb->active_path = join(sp->active, name, "");
    sb->out_path = join(sp->out, name, ".jsonl");
    sb->summary_path = join(sp->out, name, ".summary.json");
    sb->crash_path = join(sp->out, name, ".crashes");
    return sb;
}

/* Start (or resume) the batch for active/<name>, whose lock we hold in lock_fd, on the host.
 * A file that cannot be a batch is rejected; a failure of ours is told by the host's end. */
static void start_batch(hv_spool_t *sp, const char *name, int lock_fd, int resume)
{
    sbatch_t *sb = sbatch_new(sp, name, lock_fd);
    char reason[256] = "";
    const hv_ruleset_t *rules = NULL;
    hv_source_t *src = NULL;
    hv_bhost_output_t output = resume ? HV_BHOST_RESUME : HV_BHOST_NEW;

    if (resume && exists(sb->summary_path)) {
        /* Completed, then interrupted before the input moved to done/. */
        HV_LOG(HV_LOG_NOTICE, "event=batch_already_complete batch=\"%s\"", name);
        sb->complete = 1;
        output = HV_BHOST_DONE;
    } else if (looks_binary(lock_fd, reason, sizeof(reason)) ||
               pick_rules(sp, lock_fd, &rules, reason, sizeof(reason)) != 0) {
        goto out;
    } else {
        int rc = hv_reader_open(sp->loop, sb->active_path, &src);
        if (rc != 0) {
            snprintf(reason, sizeof(reason), "unreadable: %s", uv_strerror(rc));
            goto out; /* the file's fault, not ours */
        }
    }
    hv_hosted_opts_t opts = {
        .output = output,
        .name = name,
        .output_path = sb->out_path,
        .crash_note = sb->crash_path,
        .summary_path = sb->summary_path,
        .input_path = sb->active_path,
        .done_dir = sp->done,
        .rules = rules,
    };
    TAILQ_INSERT_TAIL(&sp->batches, sb, link);
    sp->nactive++;
    if (sp->first_scan) {
        sb->startup = 1;
        sp->starting++;
    }
    hv_bhost_start(sp->host, &opts, src, &hosted_cbs, sb);
    return;

out:
    reject(sp, sb->active_path, name, reason);
    sbatch_free(sb);
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
    char tail[HV_STREAM_FILE_MAX + 1];
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
    sp->first_scan = 1;
    scan(sp);
    sp->first_scan = 0;
    maybe_ready(sp);
    return 0;
}

void hv_spool_stop(hv_spool_t *sp)
{
    sp->stopping = 1;
    uv_timer_stop(&sp->timer);
    uv_fs_event_stop(&sp->event);
}

void hv_spool_stats(const hv_spool_t *sp, hv_spool_stats_t *out)
{
    *out = sp->stats;
    out->active = sp->nactive;
}


void hv_spool_close(hv_spool_t *sp, void (*done)(void *ud), void *ud)
{
    hv_spool_stop(sp);
    sp->closing = 1;
    sp->closed = done;
    sp->closed_ud = ud;
    hv_handles_close_all(&sp->handles);
}
