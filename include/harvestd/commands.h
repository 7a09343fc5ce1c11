/*
 * commands.h: the subcommands of harvestd (the first argument names one). Each takes the
 * arguments after its name (argv[0] is the name), prints what it has to say and returns the
 * process's exit status.
 *
 *   harvestd enqueue --redis URL [--stream S] [--batch NAME] [--rules NAME] FILE|-
 *   harvestd status  --redis URL [--stream S] [--group G] [--batch NAME] [--json]
 *   harvestd merge   --batch NAME -o FILE DIR_OR_FILE...
 */
#ifndef HARVESTD_COMMANDS_H
#define HARVESTD_COMMANDS_H

/** Add a URL file's lines to a stream: 0, 1 on a Redis failure, 2 on a usage error. */
int hv_cmd_enqueue(int argc, char **argv);

/** Per-batch progress: 0 every listed batch complete, 3 some not, 1 Redis failure, 2 usage. */
int hv_cmd_status(int argc, char **argv);

/** One record per line of a batch from per-daemon outputs: 0, 1 (I/O), 2 (usage). */
int hv_cmd_merge(int argc, char **argv);

#endif
