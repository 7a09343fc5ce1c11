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

#endif
