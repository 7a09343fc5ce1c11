/*
 * once.h: `harvestd --once FILE -o OUTPUT`: one URL list as one batch on the engine, with
 * its progress line on stderr and its summary line at the end. The loop (loop.h) runs it as
 * the daemon runs its sources: it stops it through the engine and waits for its end.
 *
 * The progress line (when asked for, or by default when stderr is a terminal) is redrawn at
 * most four times a second; every log line clears it first, so that the two never share a
 * line.
 */
#ifndef HARVESTD_ONCE_H
#define HARVESTD_ONCE_H

#include "harvestd/config.h"
#include "harvestd/engine.h"

typedef struct hv_once_s hv_once_t;

/**
 * Start the batch of cfg->input_path writing cfg->output_path on `e` (`progress`: 1 on, 0
 * off, -1 when stderr is a terminal). Returns 0 and *out; or 2 (a usage error: the input
 * cannot be opened, the output exists or cannot be created), said on stderr, with nothing
 * left to close. `done` runs once, on the loop, when the batch ended, with the process's
 * exit status: 0 every line has its record, 3 interrupted, 1 an internal failure (each said
 * on stderr, with the summary line when the output is trustworthy).
 */
int hv_once_start(hv_engine_t *e, int progress, void (*done)(void *ud, int exit_code), void *ud,
                  hv_once_t **out);

/** Free the runner after `done` ran (its progress timer closes with the loop's next turn). */
void hv_once_free(hv_once_t *o);

#endif
