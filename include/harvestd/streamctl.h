/*
 * streamctl.h: a stream's batches from outside the daemons: adding a URL file to the stream
 * as one batch, and reading the progress of batches. The `enqueue` and `status` commands
 * (src/cmd/streamcmd.c) are front ends over these calls: they read the command line, print
 * and choose the exit status.
 *
 * Each call owns a loop and one Redis connection (redis.h) on it, connected to the URL's
 * database, and blocks: it is written as a sequence of steps, where a step sends its commands
 * (pipelined) and the loop runs until their replies are in. Reply callbacks only record what
 * came back, or the first failure; the step after them decides. The loop also runs the file
 * reader (reader.h) for enqueue, which pauses when a chunk of lines is full.
 *
 * enqueue adds a file in chunks, each with one script that checks the batch's `added` count
 * is the one this run expects, then adds the chunk's entries and bumps the count, all at
 * once: a chunk is either wholly in the stream or not at all. A rerun reads `added` and skips
 * that many URL lines of the file, so an interrupted enqueue (killed at any point) is
 * finished by running it again, and a second enqueue of the same batch running at the same
 * time fails at its next chunk instead of adding lines twice.
 *
 * status reads the batch hashes, the group's consumers (XINFO CONSUMERS: every consumer the
 * group has, with its pending count and idle time, those holding nothing included) and its
 * pending list. Which batch a pending entry belongs to is in the entry itself, so each
 * pending id is looked up with XRANGE, a page of them pipelined at a time. Replies are the
 * server's to shape: one that is not of the shape asked for fails the call, naming the
 * command, and is never trusted further.
 *
 * Failures come back as an hv_streamctl_rc_t with one line in `err` (no "harvestd: " prefix,
 * no newline). A Redis failure reads "redis: WHAT (URL)", or "redis: WHAT" when WHAT names
 * the server already, the URL's password shown as *** (hv_redis_url_mask()); it is the first failure only (what fails after it, commands cancelled
 * by a broken connection, is not news).
 */
#ifndef HARVESTD_STREAMCTL_H
#define HARVESTD_STREAMCTL_H

#include <stddef.h>
#include <stdint.h>

#include "harvestd/redis.h"

/** What a failed call means to the command (0: it did not fail). */
typedef enum {
    HV_STREAMCTL_OK = 0,
    HV_STREAMCTL_FAILED,   /* Redis failed, the file could not be read, or it changed since
                              the batch was started */
    HV_STREAMCTL_USAGE,    /* the command line names what cannot be used: a name too long, a
                              FILE that is a directory or cannot be opened */
    HV_STREAMCTL_CONFLICT, /* the batch was enqueued with other rules than this run's */
} hv_streamctl_rc_t;

/** The server, and the commands' one timeout. */
typedef struct {
    const char *url;      /* as given: it names the server in messages (masked) */
    hv_redis_addr_t addr; /* url, parsed */
    hv_tls_ctx_t *tls;    /* for a rediss:// addr (outlives the call); NULL for redis:// */
    uint64_t timeout_ms;  /* to connect, and for each reply; 0: 5 s to connect, 10 s per reply */
} hv_streamctl_server_t;

/* ------------------------------------------------------------------------------ enqueue */

typedef struct hv_streamctl_enqueue_s hv_streamctl_enqueue_t;

/** A file to add as a batch. Every string must outlive the enqueue. */
typedef struct {
    hv_streamctl_server_t server;
    const char *stream;
    const char *batch;
    const char *rules; /* the [rules "NAME"] set the daemons apply; "" for none */
    const char *file;  /* a path, or "-" for standard input */
} hv_streamctl_batch_spec_t;

/** How many lines: the batch had before this run, this run added, and the file's URL lines
 *  (complete once hv_streamctl_enqueue_run() returned HV_STREAMCTL_OK). */
typedef struct {
    uint64_t already;
    uint64_t added;
    uint64_t total;
} hv_streamctl_counts_t;

/**
 * Get ready to add `spec->file`: open it (before Redis is touched, so that a path that
 * cannot be read is a usage error), connect, check the type of each key, read the batch's
 * hash and load the script. *out is set whatever the outcome; free it with
 * hv_streamctl_enqueue_free(). HV_STREAMCTL_CONFLICT: the batch has other rules.
 */
hv_streamctl_rc_t hv_streamctl_enqueue_open(const hv_streamctl_batch_spec_t *spec,
                                            hv_streamctl_enqueue_t **out, char *err, size_t errcap);

/** Add the file's lines the batch does not have yet, chunk by chunk, then its total (after
 *  an OK from hv_streamctl_enqueue_open()). HV_STREAMCTL_CONFLICT: the batch got other rules
 *  meanwhile. */
hv_streamctl_rc_t hv_streamctl_enqueue_run(hv_streamctl_enqueue_t *e, char *err, size_t errcap);

/** The counts so far. */
void hv_streamctl_enqueue_counts(const hv_streamctl_enqueue_t *e, hv_streamctl_counts_t *out);

/** Close the file, the connection and the loop, and free (NULL is fine). */
void hv_streamctl_enqueue_free(hv_streamctl_enqueue_t *e);

/* ------------------------------------------------------------------------------ status */

/** A count per name (a consumer). */
typedef struct {
    char *name;
    uint64_t n;
    int64_t idle_ms; /* the group's consumers: milliseconds since the consumer last read or
                        claimed (XINFO CONSUMERS `idle`); -1 when not told (and in holders) */
} hv_streamctl_count_t;

typedef struct {
    hv_streamctl_count_t *v; /* by name, once read */
    size_t n;
    size_t cap;
} hv_streamctl_tally_t;

/** One batch: its hash (counts absent from it are 0), and its entries the group holds. */
typedef struct {
    char *name;
    int exists; /* the batch's hash is there; else the batch is unknown */
    uint64_t added, total, done, ok, failed;
    uint64_t dead;                /* of `failed`: poisoned entries moved to the dead letters */
    int has_total;
    uint64_t pending;             /* its entries in the group's pending list */
    hv_streamctl_tally_t holders; /* ... per consumer holding them */
} hv_streamctl_batch_t;

/** The progress of a stream's batches, and its group's pending entries. */
typedef struct {
    const char *stream;
    const char *group;
    hv_streamctl_batch_t **batches; /* as asked for, or every batch of the stream by name */
    size_t nbatches;
    int group_exists;
    uint64_t group_pending;
    int has_lag; /* the server tells the group's lag (Redis 7) */
    uint64_t lag;
    hv_streamctl_tally_t consumers; /* every consumer of the group: its pending entries, its
                                       idle time */
    uint64_t gone;  /* pending entries no longer in the stream, or without a batch field */
    uint64_t other; /* pending entries of batches not asked for */
    uint64_t dead_letters; /* entries in S:dead (stream.h: no batch could take them) */
} hv_streamctl_status_t;

/**
 * Read the progress of `batches` (each once; none: every batch enqueued on `stream`) and of
 * `group` on `stream`. *out is set whatever the outcome; free it with
 * hv_streamctl_status_free(). The strings must outlive *out.
 */
hv_streamctl_rc_t hv_streamctl_status_read(const hv_streamctl_server_t *server, const char *stream,
                                           const char *group, const char *const *batches,
                                           size_t nbatches, hv_streamctl_status_t **out, char *err,
                                           size_t errcap);

/**
 * The consumers of an XINFO CONSUMERS reply (an array with an array of field-value pairs per
 * consumer) added to `out`: `name` (a string) and `pending` (an
 * integer, at least 0) are needed, `idle` is taken when it is an integer of at least 0 (else
 * idle_ms is -1), other fields are passed over. 0, or -1 with what is wrong in `err` (the
 * reply is not an array, a consumer is not an array of pairs, a field's name is not a string,
 * a needed field is missing or not of its type); `out` may then hold the consumers before
 * the fault.
 */
int hv_streamctl__consumers(const redisReply *reply, hv_streamctl_tally_t *out, char *err,
                            size_t errcap);

/** Free the names and the array of a tally (from hv_streamctl__consumers()). */
void hv_streamctl__tally_free(hv_streamctl_tally_t *t);

/** Whether every line of the batch is done: its total is known and reached. */
int hv_streamctl_batch_complete(const hv_streamctl_batch_t *b);

void hv_streamctl_status_free(hv_streamctl_status_t *st);

#endif
