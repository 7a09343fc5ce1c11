/*
 * loop.h: the process at run time: the uv_loop_t, the signals, systemd's notifications and
 * the one order in which everything stops.
 *
 * hv_loop_run() tunes the process (malloc arenas, the threadpool's size, the open-file limit,
 * SIGPIPE), opens what the configuration asks for (the metrics endpoint, the re-crawling
 * store), starts the mode (the daemon: the batch host with the spool and, with source =
 * redis, the stream; or --once: one batch), runs the loop, and returns the exit status once
 * everything is closed and uv_loop_close() succeeded.
 *
 * Stopping (a signal, a failure of ours, or the --once batch's end) follows one sequence,
 * written as one function in loop.c (stop_step): the sources stop taking work and the engine
 * drains; once every batch has ended and completed, the sources close (the stream sends its
 * last acknowledgements), then the engine, then the re-crawling store (its last commits),
 * then the metrics endpoint, then the loop's own handles.
 *
 * Signals: INT and TERM drain (a second one stops at once), HUP is logged and ignored. The
 * daemon sends READY=1 once started, STATUS= when it changed (at most once a second: the
 * running batches' progress, hv_bhost_progress(), moves all the time), STOPPING=1 when the
 * stop begins, and WATCHDOG=1 twice per watchdog period when systemd asks for it; it logs
 * each running batch's progress every progress_interval (hv_bhost_log_progress()).
 */
#ifndef HARVESTD_LOOP_H
#define HARVESTD_LOOP_H

#include "harvestd/config.h"
#include "harvestd/tls.h"

/** The process's exit statuses (README, "Exit status"). */
enum { HV_EXIT_OK = 0, HV_EXIT_INTERNAL = 1, HV_EXIT_USAGE = 2, HV_EXIT_INTERRUPTED = 3 };

typedef struct {
    const char *config_path; /* the daemon's configuration file (its start line names it) */
    int progress;            /* --once's progress line: 1 on, 0 off, -1 on a terminal */
} hv_loop_opts_t;

/**
 * Run what `cfg` describes (--once when cfg->input_path is set, the daemon otherwise) until
 * it ends or is stopped, and return the exit status. `cfg` and `tls` (NULL: no https) must
 * outlive the call. A start that cannot succeed says why on stderr and returns
 * HV_EXIT_USAGE, after closing what was opened.
 */
int hv_loop_run(const hv_config_t *cfg, hv_tls_ctx_t *tls, const hv_loop_opts_t *opts);

#endif
