/*
 * commands.h: the subcommands of harvestd (the first argument names one). Each takes the
 * arguments after its name (argv[0] is the name), prints what it has to say and returns the
 * process's exit status.
 *
 *   harvestd enqueue --redis URL [--stream S] [--batch NAME] [--rules NAME] FILE|-
 *   harvestd status  --redis URL [--stream S] [--group G] [--batch NAME] [--json]
 *   harvestd merge   --batch NAME [--entries N] -o FILE DIR_OR_FILE...
 *   harvestd state   --state-dir DIR [--json] stats|get URL|forget URL|prune --older-than D
 *   harvestd report  [-o FILE] [--top N] [--hosts N] OUTPUT.jsonl
 */
#ifndef HARVESTD_COMMANDS_H
#define HARVESTD_COMMANDS_H

#include <signal.h>
#include <stdio.h>

#include "harvestd/options.h"

/** Each command's option table: its command line, and the option lines of its --help and of
 *  the manual page (the rows' usage). */
extern const hv_opt_spec_t hv_cmd_enqueue_spec;
extern const hv_opt_spec_t hv_cmd_status_spec;
extern const hv_opt_spec_t hv_cmd_merge_spec;
extern const hv_opt_spec_t hv_cmd_state_spec;

/** The signals that remove a command's temporary output when they end the process. */
#define HV_CMD_TMP_SIGNALS 3

/** A command's output while it is written: PATH.tmp.PID beside its final name, removed when
 *  SIGINT, SIGTERM or SIGHUP ends the command meanwhile (then the process ends as the signal
 *  would have ended it). The command writes `fd`, gives the file its name, then closes. */
typedef struct {
    char *path; /* the temporary file's */
    int fd;     /* open for writing; the command may close it itself and set -1 */
    struct sigaction old[HV_CMD_TMP_SIGNALS];
} hv_cmd_tmp_t;

/** Create the temporary file for the output `path` (O_EXCL) and arm the signals: 0, or an
 *  error with a message in `err` (nothing is left to close then). */
int hv_cmd_tmp_open(hv_cmd_tmp_t *t, const char *path, char *err, size_t errcap);
/** Close `fd` if still open, remove the file unless it was `published` (renamed to its name),
 *  restore the signals' previous handlers. */
void hv_cmd_tmp_close(hv_cmd_tmp_t *t, int published);

/** Add a URL file's lines to a stream: 0, 1 on a Redis failure, 2 on a usage error. */
int hv_cmd_enqueue(int argc, char **argv);

/** Per-batch progress: 0 every listed batch complete, 3 some not, 1 Redis failure, 2 usage. */
int hv_cmd_status(int argc, char **argv);

/** One record per line of a batch from per-daemon outputs: 0, 1 (I/O), 2 (usage). */
int hv_cmd_merge(int argc, char **argv);

/**
 * The per-URL state store of DIR (store.h), which must exist (it is never created): `stats`,
 * `get URL` (the entry as one JSON line), `forget URL`, `prune --older-than DURATION` (a
 * bare number is seconds; ms/s/m/h/d). URL is normalised with hv_url_parse() into the key the
 * daemon uses. Exit status: 0 answered, 1 no store / a store that cannot be opened / I/O,
 * 2 usage (also an unparsable URL), 3 the entry asked for (get, forget) is absent.
 */
int hv_cmd_state(int argc, char **argv);

/**
 * One HTML page summing up a harvestd output (report.h), written to -o FILE (default: the
 * input's name with .jsonl replaced by .report.html; '-' standard output) through a temporary
 * file renamed over it. The input is read to its end before the page is created. Exit status:
 * 0 written, 1 the page could not be written, 2 usage error or an input that cannot be read.
 */
int hv_cmd_report(int argc, char **argv);

/**
 * A manual page (roff) from the template at `template_path`, written to `out`: the template's
 * text as it is, but for the lines that name a table, which become that table's entries, and
 * @VERSION@, which becomes the version. `cli` is the daemon's own option table (main.c). The
 * lines:
 *
 *   @OPTIONS@             the rows of `cli` that have a usage line
 *   @OPTIONS CMD@         the same for command CMD (enqueue, status, merge, state)
 *   @DIRECTIVE_OPTIONS@   every directive as --name VALUE, with its meaning and default
 *   @DIRECTIVES@          every directive as name = VALUE, with its meaning, the values it
 *                         takes and its default (harvestd.conf(5))
 *   @HOST_KEYS@           the keys a [host "NAME"] section takes
 *
 * Returns 0, or 2 (said on stderr) when the template cannot be read, names a table that does
 * not exist, or a usage line has no meaning: a manual page is never written with a hole.
 */
int hv_cmd_man(const char *template_path, FILE *out, const hv_opt_spec_t *cli);

#endif
