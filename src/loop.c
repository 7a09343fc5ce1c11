/*
 * loop.c: the process at run time (see loop.h).
 *
 * Everything the process runs hangs off one hv_loop_t on the stack of hv_loop_run(). Starting
 * is a straight line; stopping is stop_step(), one function that reads top to bottom and is
 * called again whenever what it waits for may have happened (a batch ended, a source, the
 * engine, the store or the endpoint closed), as Redis's prepareForShutdown() is the one place
 * that says what stops first.
 */
#include "harvestd/loop.h"

#include <assert.h>
#include <inttypes.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <systemd/sd-daemon.h>
#include <uv.h>

#include "harvestd/bhost.h"
#include "harvestd/charset.h"
#include "harvestd/common.h"
#include "harvestd/engine.h"
#include "harvestd/handles.h"
#include "harvestd/log.h"
#include "harvestd/metrics.h"
#include "harvestd/once.h"
#include "harvestd/parse.h"
#include "harvestd/recrawl.h"
#include "harvestd/spool.h"
#include "harvestd/stream.h"
#include "harvestd/utf8.h"

/* STATUS= is sent at most this often (and only when it changed). */
#define STATUS_INTERVAL_MS 1000
/* The running batches it names, and the bytes of each name it shows: systemctl status shows
 * one line of it, so it summarises. */
#define STATUS_BATCHES 3
#define STATUS_NAME_MAX 24

typedef enum {
    ST_STARTING,       /* opening what the configuration asks for */
    ST_RUNNING,
    ST_DRAINING,       /* sources stopped, the engine stopping: every batch must end */
    ST_CLOSE_STREAM,   /* the stream's last acknowledgements, then its links */
    ST_CLOSE_SPOOL,    /* the spool's watchers */
    ST_CLOSE_ENGINE,   /* idle connections, the DNS cache, robots.txt */
    ST_CLOSE_STORE,    /* the re-crawling store's last commits */
    ST_CLOSE_METRICS,  /* the endpoint and its clients */
    ST_CLOSED,         /* the loop's own handles close; uv_run returns */
} stage_t;

typedef struct {
    uv_loop_t loop;
    const hv_config_t *cfg;
    hv_tls_ctx_t *tls;
    const char *config_path;
    stage_t stage;
    int exit_code;
    int signals;
    unsigned unready;            /* daemon: sources (and start_daemon) not yet ready */
    int closing;                 /* the current stage's object is closing */

    hv_record_counts_t records;  /* counted by the engine, shown by the endpoint */
    hv_metrics_view_t view;
    hv_metrics_server_t *metrics;
    hv_recrawl_t *recrawl;
    hv_engine_t *engine;
    hv_bhost_t *host;            /* daemon */
    hv_spool_t *spool;           /* daemon */
    hv_stream_t *stream;         /* daemon with source = redis */
    hv_once_t *once;             /* --once, until its batch ended */

    uv_signal_t sigint;
    uv_signal_t sigterm;
    uv_signal_t sighup;
    uv_timer_t status_timer;
    uv_timer_t watchdog_timer;
    uv_timer_t progress_timer;   /* daemon: batch_progress lines every progress_interval */
    hv_handles_t handles;        /* the above: closed last */
    char status[1024];           /* the last STATUS= sent, */
    uint64_t status_ms;          /* and when */
} hv_loop_t;

static void stop_step(hv_loop_t *l);

/* ---- the process ---- */

/* The threadpool is shared by parses, file I/O and DNS lookups; it must be larger than the
 * parse limit or lookups would queue behind parses. Set before the first request. */
static void size_threadpool(unsigned parse_jobs)
{
    if (getenv("UV_THREADPOOL_SIZE") != NULL)
        return;
    char n[16];
    snprintf(n, sizeof(n), "%u", HV_MIN(parse_jobs + 4, 1024u));
    setenv("UV_THREADPOOL_SIZE", n, 1);
}

/*
 * glibc's malloc gives each thread that allocates an arena of its own (up to eight per CPU),
 * which grows to that thread's peak and is seldom given back; and every time a large block
 * is freed it raises its mmap threshold to that block's size (up to 32 MiB), after which
 * multi-MiB page bodies come from the heap and fragment it. With parse threads handling pages
 * of up to max_bytes, peak RSS was about four times what is in flight. Two arenas (the
 * loop's, the workers') and a fixed threshold keep it near that: blocks above it (big page
 * bodies) are mapped on their own and unmapped when freed. The threshold sits above the parse
 * arena's largest chunk (1 MiB), which is reused from the heap: a lower one made every parse
 * fault its tree's pages in afresh (2.5 s of system time per 300 pages of 0.5-2 MB).
 * Measured on 300 such pages with rules and --links: peak RSS 159-164 MiB with glibc's
 * defaults, 106-112 MiB with these, for 5-15% more CPU. A fixed mmap threshold also fixes
 * the trim threshold at its 128 KiB default: with page bodies of tens of KiB coming and going
 * at the top of the heap, the heap was shrunk and grown again (and its pages faulted in
 * afresh) every few dozen pages; 4 MiB kept free at the top stops that (for 20,000 pages of
 * ~40 KB: brk calls 1,757 -> 64, page faults 7,601 -> 2,879, CPU 992 -> 848 ms). Set before
 * any thread starts; MALLOC_ARENA_MAX, MALLOC_MMAP_THRESHOLD_ and MALLOC_TRIM_THRESHOLD_ in
 * the environment win.
 */
#define MALLOC_ARENAS 2
#define MALLOC_MMAP_THRESHOLD (1024 * 1024 + 64 * 1024)
#define MALLOC_TRIM_THRESHOLD (4 * 1024 * 1024)

static void tune_malloc(void)
{
    if (getenv("MALLOC_ARENA_MAX") == NULL)
        mallopt(M_ARENA_MAX, MALLOC_ARENAS);
    if (getenv("MALLOC_MMAP_THRESHOLD_") == NULL)
        mallopt(M_MMAP_THRESHOLD, MALLOC_MMAP_THRESHOLD);
    if (getenv("MALLOC_TRIM_THRESHOLD_") == NULL)
        mallopt(M_TRIM_THRESHOLD, MALLOC_TRIM_THRESHOLD);
}

/* Use every file descriptor we are allowed: connections, outputs and inputs all need one. */
static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static void tune_process(const hv_config_t *cfg)
{
    tune_malloc();
    size_threadpool(cfg->parse_jobs);
    hv_charset_preload();
    raise_nofile();
    /* A reader that went away must surface as a write error (EPIPE), not kill us. */
    signal(SIGPIPE, SIG_IGN);
}

/* ---- systemd ---- */

static int daemon_mode(const hv_loop_t *l)
{
    return l->cfg->input_path == NULL;
}

/* A batch name from outside (a file name, a stream's batch) as STATUS= shows it: valid
 * UTF-8, no control byte (a newline would end the assignment), at most STATUS_NAME_MAX bytes
 * cut on a character's boundary, "..." marking the cut. */
static void status_name(char *out, size_t cap, const char *name)
{
    size_t len, n = 0;
    char *clean = hv_utf8_sanitize(name, strlen(name), &len);
    int cut = len > STATUS_NAME_MAX;
    if (cut)
        len = hv_utf8_cut(clean, len, STATUS_NAME_MAX - 3);
    for (size_t i = 0; i < len && n + 1 < cap; i++) {
        unsigned char c = (unsigned char)clean[i];
        out[n++] = c < 0x20 || c == 0x7f ? '?' : (char)c;
    }
    out[n] = '\0';
    if (cut)
        snprintf(out + n, cap - n, "...");
    free(clean);
}

/* " (a.txt 1200/3000 40% ETA 1m10s, b.txt 20/~900 2%, c 7, +2 more)": the running batches,
 * lines with their record of the input's lines (~: an estimate), none while there are none. */
static void status_batches(const hv_loop_t *l, char *out, size_t cap)
{
    hv_hosted_progress_t v[STATUS_BATCHES];
    unsigned n = l->host != NULL ? hv_bhost_progress(l->host, v, STATUS_BATCHES) : 0;
    size_t len = 0;
    out[0] = '\0';
    for (unsigned i = 0; i < n && i < STATUS_BATCHES; i++) {
        const hv_batch_progress_t *p = &v[i].p;
        char name[STATUS_NAME_MAX + 8], total[64] = "", eta[32];
        status_name(name, sizeof(name), v[i].name);
        if (p->lines_total > 0) {
            hv_batch_format_eta(eta, sizeof(eta), p->eta_s);
            snprintf(total, sizeof(total), "/%s%" PRIu64 " %u%%%s%s",
                     p->total_exact ? "" : "~", p->lines_total,
                     (unsigned)(100 * HV_MIN(p->done, p->lines_total) / p->lines_total),
                     p->eta_s >= 0 ? " ETA " : "", p->eta_s >= 0 ? eta : "");
        }
        int m = snprintf(out + len, cap - len, "%s%s %" PRIu64 "%s", i == 0 ? " (" : ", ", name,
                         p->done, total);
        if (m < 0 || (size_t)m >= cap - len)
            break;
        len += (size_t)m;
    }
    if (n > STATUS_BATCHES) {
        int m = snprintf(out + len, cap - len, ", +%u more", n - STATUS_BATCHES);
        if (m > 0 && (size_t)m < cap - len)
            len += (size_t)m;
    }
    if (n > 0 && len + 1 < cap)
        snprintf(out + len, cap - len, ")");
}

/* Compose STATUS=, and send it when it changed: at once with `force` (a change of stage), else
 * when the last one is STATUS_INTERVAL_MS old (the status timer sends what waited). */
static void notify_status(hv_loop_t *l, int force)
{
    if (!daemon_mode(l) || l->spool == NULL)
        return;
    hv_spool_stats_t s;
    char stream[256] = "", batches[384], text[sizeof(l->status)];
    unsigned active;
    hv_spool_stats(l->spool, &s);
    active = s.active;
    if (l->stream != NULL) {
        hv_stream_stats_t st;
        hv_stream_stats(l->stream, &st);
        active += st.batches;
        snprintf(stream, sizeof(stream), "; redis %s, %u entries held, %" PRIu64 " acknowledged",
                 st.up ? "up" : "down", st.held, st.acked);
    }
    uint64_t records = l->records.ok;
    for (int t = 0; t < HV_ET__COUNT; t++)
        records += l->records.failed[t];
    status_batches(l, batches, sizeof(batches));
    snprintf(text, sizeof(text),
             "%s: %u active%s, %" PRIu64 " done, %" PRIu64 " rejected, %" PRIu64
             " records written%s",
             l->stage == ST_RUNNING ? "running" : "draining", active, batches, s.completed,
             s.rejected, records, stream);
    uint64_t now = uv_now(&l->loop);
    if (strcmp(text, l->status) == 0 ||
        (!force && l->status_ms != 0 && now - l->status_ms < STATUS_INTERVAL_MS))
        return;
    memcpy(l->status, text, sizeof(l->status));
    l->status_ms = now;
    sd_notifyf(0, "STATUS=%s", text);
}

static void on_status_timer(uv_timer_t *t)
{
    notify_status(t->data, 0);
}

static void on_progress_timer(uv_timer_t *t)
{
    hv_loop_t *l = t->data;
    if (l->host != NULL)
        hv_bhost_log_progress(l->host);
}

static void on_watchdog(uv_timer_t *t)
{
    (void)t;
    sd_notify(0, "WATCHDOG=1");
}

/* ---- stopping ---- */

/* Begin the stop: sources take no more work, the engine drains (at once with `force`). A
 * second call (a second signal) only forces the engine. */
static void stop(hv_loop_t *l, int force)
{
    if (l->stage == ST_RUNNING) {
        l->stage = ST_DRAINING;
        if (daemon_mode(l)) {
            sd_notify(0, "STOPPING=1");
            HV_LOG(HV_LOG_NOTICE, "event=stopping drain_timeout_ms=%" PRIu64 " force=%d",
                   l->cfg->drain_timeout_ms, force);
            hv_spool_stop(l->spool);
            hv_bhost_stop(l->host);
            if (l->stream != NULL)
                hv_stream_stop(l->stream);
        }
    }
    if (l->engine != NULL && (daemon_mode(l) || l->once != NULL))
        hv_engine_stop(l->engine, force);
    notify_status(l, 1);
    stop_step(l);
}

/* A start that failed: nothing was claimed, so nothing drains; what was opened closes. */
static void stop_failed_start(hv_loop_t *l, int exit_code)
{
    l->exit_code = exit_code;
    if (l->host != NULL)
        hv_bhost_stop(l->host);
    l->stage = ST_DRAINING;
    stop_step(l);
}

/* The object the current stage was closing has closed: forget it and go on. */
static void on_closed(void *ud)
{
    hv_loop_t *l = ud;
    switch (l->stage) {
    case ST_CLOSE_STREAM:
        l->stream = NULL;
        break;
    case ST_CLOSE_SPOOL:
        l->spool = NULL;
        break;
    case ST_CLOSE_ENGINE:
        l->engine = NULL;
        break;
    case ST_CLOSE_STORE:
        l->recrawl = NULL;
        break;
    case ST_CLOSE_METRICS:
        l->metrics = NULL;
        break;
    default:
        assert(0 && "a close callback outside its stage");
    }
    l->closing = 0;
    stop_step(l);
}

/*
 * The stop order, top to bottom. Each stage either completes at once and falls through to
 * the next, or starts closing one object and returns; that object's close callback calls
 * stop_step() again. A stage's object leaves the metrics view when its close begins (a
 * closing object's figures are no longer safe to read).
 */
static void stop_step(hv_loop_t *l)
{
    if (l->closing)
        return; /* the current stage's object is closing: its callback comes back */
    switch (l->stage) {
    case ST_STARTING:
    case ST_RUNNING:
        return;

    case ST_DRAINING:
        /* Every batch ends (drained, or stopped at once) and, when it completed, its
         * completion is durable: the batch host reports each end. */
        if (l->once != NULL || (l->engine != NULL && hv_engine_batches(l->engine) > 0) ||
            (l->host != NULL && hv_bhost_count(l->host) > 0))
            return;
        uv_timer_stop(&l->status_timer);
        uv_timer_stop(&l->watchdog_timer);
        uv_timer_stop(&l->progress_timer);
        l->stage = ST_CLOSE_STREAM;
        /* fall through */

    case ST_CLOSE_STREAM:
        if (l->stream != NULL) {
            l->closing = 1;
            l->view.stream = NULL;
            hv_stream_close(l->stream, on_closed, l);
            return;
        }
        l->stage = ST_CLOSE_SPOOL;
        /* fall through */

    case ST_CLOSE_SPOOL:
        if (l->spool != NULL) {
            l->closing = 1;
            l->view.spool = NULL;
            hv_spool_close(l->spool, on_closed, l);
            return;
        }
        l->view.host = NULL;
        hv_bhost_free(l->host);
        l->host = NULL;
        l->stage = ST_CLOSE_ENGINE;
        /* fall through */

    case ST_CLOSE_ENGINE:
        if (l->engine != NULL) {
            l->closing = 1;
            l->view.engine = NULL;
            hv_engine_close(l->engine, on_closed, l);
            return;
        }
        l->stage = ST_CLOSE_STORE;
        /* fall through */

    case ST_CLOSE_STORE:
        if (l->recrawl != NULL) {
            l->closing = 1;
            l->view.recrawl = NULL;
            hv_recrawl_close(l->recrawl, on_closed, l);
            return;
        }
        l->stage = ST_CLOSE_METRICS;
        /* fall through */

    case ST_CLOSE_METRICS:
        if (l->metrics != NULL) {
            l->closing = 1;
            hv_metrics_close(l->metrics, on_closed, l);
            return;
        }
        l->stage = ST_CLOSED;
        hv_handles_close_all(&l->handles);
        return;

    case ST_CLOSED:
        return;
    }
}

/* ---- signals ---- */

static void on_signal(uv_signal_t *h, int signum)
{
    hv_loop_t *l = h->data;
    if (signum == SIGHUP) {
        HV_LOG(HV_LOG_NOTICE, "event=signal signal=HUP action=ignored (restart to reload)");
        return;
    }
    l->signals++;
    HV_LOG(HV_LOG_NOTICE, "event=signal signal=%s action=%s", signum == SIGINT ? "INT" : "TERM",
           l->signals == 1 ? "drain" : "stop");
    if (l->stage == ST_RUNNING || l->stage == ST_DRAINING)
        stop(l, l->signals > 1);
}

/* Signal handlers exist before READY=1 can be sent: a stop request that follows readiness at
 * once must drain, not kill. */
static void start_signals(hv_loop_t *l)
{
    uv_signal_t *sigs[] = {&l->sigint, &l->sigterm, &l->sighup};
    int nums[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < HV_ARRAY_SIZE(sigs); i++) {
        uv_signal_init(&l->loop, sigs[i]);
        sigs[i]->data = l;
        hv_handles_own(&l->handles, (uv_handle_t *)sigs[i]);
        uv_signal_start(sigs[i], on_signal, nums[i]);
    }
}

/* ---- the sources ---- */

/* The daemon is ready once its sources are: the start-up scan's batches started, the
 * stream's outputs repaired. Then (not when a stop came first) it says so. */
static void on_source_ready(void *ud)
{
    hv_loop_t *l = ud;
    const hv_config_t *cfg = l->cfg;
    if (--l->unready > 0 || l->stage != ST_RUNNING)
        return;
    uv_timer_start(&l->status_timer, on_status_timer, STATUS_INTERVAL_MS, STATUS_INTERVAL_MS);
    if (cfg->progress_interval_ms > 0)
        uv_timer_start(&l->progress_timer, on_progress_timer, cfg->progress_interval_ms,
                       cfg->progress_interval_ms);
    uint64_t usec = 0;
    if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
        uint64_t ms = usec / 2000; /* ping twice per period */
        uv_timer_start(&l->watchdog_timer, on_watchdog, 0, ms > 0 ? ms : 1);
    }
    HV_LOG(HV_LOG_NOTICE,
           "event=start mode=daemon version=%s config=%s spool_dir=%s source=%s%s%s "
           "concurrency=%u per_host=%u max_active_batches=%u address_guard=%s "
           "allowed_ranges=%u",
           HV_VERSION, l->config_path, cfg->spool_dir,
           cfg->sources & HV_SOURCE_SPOOL ? "spool" : "",
           cfg->sources == (HV_SOURCE_SPOOL | HV_SOURCE_REDIS) ? "," : "",
           cfg->sources & HV_SOURCE_REDIS ? "redis" : "", cfg->concurrency, cfg->per_host,
           cfg->max_active_batches, cfg->allow_private_addresses ? "off" : "on",
           cfg->allow_addresses.count);
    sd_notify(0, "READY=1");
    notify_status(l, 1);
}

static void on_source_progress(void *ud)
{
    hv_loop_t *l = ud;
    notify_status(l, 0);
    stop_step(l);
}

static void on_fatal(hv_loop_t *l, int err, const char *detail, const char *note)
{
    HV_LOG(HV_LOG_ERROR, "event=fatal error=\"%s\" err=%s action=stop note=\"%s\"", detail,
           hv_err_name(err), note);
    l->exit_code = HV_EXIT_INTERNAL;
    if (l->stage == ST_RUNNING)
        stop(l, 0);
}

static void on_spool_fatal(void *ud, int err, const char *detail)
{
    on_fatal(ud, err, detail, "the batch stays in active/ and resumes after a restart");
}

static void on_stream_fatal(void *ud, int err, const char *detail)
{
    on_fatal(ud, err, detail, "entries not acknowledged stay pending and are processed again");
}

static void on_once_done(void *ud, int exit_code)
{
    hv_loop_t *l = ud;
    hv_once_free(l->once);
    l->once = NULL;
    l->exit_code = exit_code;
    if (l->stage == ST_RUNNING)
        l->stage = ST_DRAINING; /* the batch ended by itself: nothing to stop */
    stop_step(l);
}

static int start_once(hv_loop_t *l, int progress)
{
    l->engine = hv_engine_new(&l->loop, l->cfg, l->tls, &l->records);
    hv_engine_use_recrawl(l->engine, l->recrawl);
    l->view.engine = l->engine;
    int rc = hv_once_start(l->engine, progress, on_once_done, l, &l->once);
    if (rc == HV_EXIT_OK)
        l->stage = ST_RUNNING;
    return rc;
}

static int start_daemon(hv_loop_t *l)
{
    static const hv_spool_cbs_t spool_cbs = {on_spool_fatal, on_source_progress,
                                             on_source_ready};
    static const hv_stream_cbs_t stream_cbs = {on_stream_fatal, on_source_progress,
                                               on_source_ready};
    const hv_config_t *cfg = l->cfg;
    char err[1500], out_dir[1100];

    /* A page that crashes the parser is noted, so that the restart does not fetch it into
     * the same crash (parse.h). */
    hv_parse_catch_crashes();
    l->engine = hv_engine_new(&l->loop, cfg, l->tls, &l->records);
    hv_engine_use_recrawl(l->engine, l->recrawl);
    l->view.engine = l->engine;
    l->host = hv_bhost_new(l->engine);
    l->view.host = l->host;
    if (hv_spool_open(&l->loop, cfg, l->host, &spool_cbs, l, &l->spool, err, sizeof(err)) != 0)
        goto failed;
    l->view.spool = l->spool;
    if (cfg->sources & HV_SOURCE_REDIS) {
        snprintf(out_dir, sizeof(out_dir), "%s/out", cfg->spool_dir);
        if (hv_stream_open(&l->loop, cfg, l->host, l->engine, out_dir, &stream_cbs, l,
                           &l->stream, err, sizeof(err)) != 0)
            goto failed;
        l->view.stream = l->stream;
    }
    /* Running from here: a source may be ready (and a signal may stop it) at once. This
     * function holds one count of `unready` until the sources are started. */
    l->stage = ST_RUNNING;
    l->unready = 1 + ((cfg->sources & HV_SOURCE_SPOOL) != 0) + (l->stream != NULL);
    if ((cfg->sources & HV_SOURCE_SPOOL) && hv_spool_start(l->spool, err, sizeof(err)) != 0)
        goto failed;
    if (l->stream != NULL)
        hv_stream_start(l->stream);
    on_source_ready(l);
    return HV_EXIT_OK;

failed:
    fprintf(stderr, "harvestd: %s\n", err);
    return HV_EXIT_USAGE;
}

/* ---- what the configuration opens ---- */

/* What the daemon needs of the system before it opens anything: a missing spool is said as
 * such, not as the state store it would hold. */
static int check_system(hv_loop_t *l)
{
    char err[1300];
    if (hv_config_check_system(l->cfg, err, sizeof(err)) == 0)
        return HV_EXIT_OK;
    fprintf(stderr, "harvestd: %s\n", err);
    return HV_EXIT_USAGE;
}

/* The metrics endpoint, when configured (the server closes itself when it cannot listen). */
static int start_metrics(hv_loop_t *l)
{
    char err[1200];
    if (l->cfg->metrics_listen[0] == '\0')
        return HV_EXIT_OK;
    if (hv_metrics_start(&l->loop, l->cfg->metrics_listen, &l->view, &l->metrics, err,
                         sizeof(err)) == 0)
        return HV_EXIT_OK;
    fprintf(stderr, "harvestd: %s\n", err);
    return HV_EXIT_USAGE;
}

/* The re-crawling store, when configured: one that cannot be opened is a start-up error,
 * never a batch's. */
static int open_recrawl(hv_loop_t *l)
{
    char err[3300];
    if (l->cfg->recrawl == HV_RECRAWL_OFF)
        return HV_EXIT_OK;
    if (hv_recrawl_open(&l->loop, l->cfg, &l->recrawl, err, sizeof(err)) != 0) {
        fprintf(stderr, "harvestd: %s\n", err);
        return HV_EXIT_USAGE;
    }
    l->view.recrawl = l->recrawl;
    /* TLS sessions are kept in the store too, so that a re-crawl resumes them. */
    if (l->tls != NULL)
        hv_recrawl_use_tls(l->recrawl, l->tls);
    return HV_EXIT_OK;
}

static void close_walk_cb(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h)) {
        HV_LOG(HV_LOG_WARNING, "event=leftover_handle type=%s", uv_handle_type_name(h->type));
        uv_close(h, NULL);
    }
}

/* The clock of the last minute's figures: the loop's, as every other time on it. */
static uint64_t loop_clock(void *ud)
{
    return uv_now(ud);
}

int hv_loop_run(const hv_config_t *cfg, hv_tls_ctx_t *tls, const hv_loop_opts_t *opts)
{
    hv_loop_t l;
    memset(&l, 0, sizeof(l));
    l.cfg = cfg;
    l.tls = tls;
    l.config_path = opts->config_path;
    l.view.records = &l.records;
    if (cfg->insecure)
        fprintf(stderr, "harvestd: warning: --insecure: TLS certificates are NOT verified; "
                        "any server can impersonate any site\n");
    if (cfg->allow_private_addresses)
        HV_LOG(HV_LOG_WARNING, "event=address_guard_off reason=allow_private_addresses "
                               "(connections may reach loopback, private and link-local "
                               "addresses)");
    tune_process(cfg);

    /* From here on every way out, a failed start included, goes through stop_step(), which
     * closes what was opened, and the loop runs dry below. */
    uv_loop_init(&l.loop);
    l.records.minute = hv_minute_new(loop_clock, &l.loop);
    hv_handles_init(&l.handles, NULL);
    uv_timer_init(&l.loop, &l.status_timer);
    uv_timer_init(&l.loop, &l.watchdog_timer);
    uv_timer_init(&l.loop, &l.progress_timer);
    l.status_timer.data = l.watchdog_timer.data = l.progress_timer.data = &l;
    hv_handles_own(&l.handles, (uv_handle_t *)&l.status_timer);
    hv_handles_own(&l.handles, (uv_handle_t *)&l.watchdog_timer);
    hv_handles_own(&l.handles, (uv_handle_t *)&l.progress_timer);
    int rc = check_system(&l);
    if (rc == HV_EXIT_OK)
        rc = start_metrics(&l);
    if (rc == HV_EXIT_OK)
        rc = open_recrawl(&l);
    if (rc == HV_EXIT_OK) {
        start_signals(&l);
        rc = daemon_mode(&l) ? start_daemon(&l) : start_once(&l, opts->progress);
    }
    if (rc != HV_EXIT_OK)
        stop_failed_start(&l, rc);
    uv_run(&l.loop, UV_RUN_DEFAULT);

    /* Everything should be closed by now; anything left is a bug we still clean up. */
    uv_walk(&l.loop, close_walk_cb, NULL);
    uv_run(&l.loop, UV_RUN_DEFAULT);
    rc = uv_loop_close(&l.loop);
    assert(rc == 0);
    (void)rc;
    hv_minute_free(l.records.minute);
    hv_charset_unload();
    return l.exit_code;
}
