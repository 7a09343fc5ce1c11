/*
 * streamkeys.h: what harvestd keeps in Redis for the stream source, and how a batch's name
 * becomes part of a file name. One place, shared by the daemon's consumer (stream.c), the
 * `enqueue` and `status` commands (streamctl.c) and `merge` (merge.c).
 *
 * For a stream S (redis_stream, default "harvestd:urls"):
 *   S                   the stream; one entry per input line, fields
 *                       batch (name), line (1-based line number in the file), url, and
 *                       optionally rules (a [rules "NAME"] set)
 *   S:batches           a set: the names of every batch enqueued on S
 *   S:batch:NAME        a hash, one per batch:
 *                         added   lines added so far (enqueue, with the entries, atomically)
 *                         total   the batch's line count, set when enqueue read the whole file
 *                         rules   the rules name the batch was enqueued with ("" for none)
 *                         done    entries acknowledged (the consumers' ack, atomically with
 *                                 the XACK of each entry it removed from the group's pending
 *                                 list), and of those:
 *                         ok      ... with an ok record
 *                         failed  ... with a failed record
 *   S:dead              a stream: the entries no batch could take (a batch or line field
 *                       harvestd cannot place), each moved there by the daemon that read it,
 *                       atomically with its acknowledgement: fields id (the entry's id in
 *                       S), reason, consumer, then the entry's own fields as they were
 * The consumer group (redis_group, default "harvestd") is created by the daemons.
 */
#ifndef HARVESTD_STREAMKEYS_H
#define HARVESTD_STREAMKEYS_H

#include <stddef.h>
#include <stdint.h>

#define HV_STREAM_DEFAULT "harvestd:urls"
#define HV_STREAM_GROUP_DEFAULT "harvestd"

/** Longest batch name enqueue accepts (bytes). */
#define HV_STREAM_BATCH_MAX 200

/** Longest stream or group name the commands accept (bytes). */
#define HV_STREAM_NAME_MAX 512

/** "S:batches" into `out`: 0, or -1 when it does not fit. */
int hv_streamkeys_batches(const char *stream, char *out, size_t cap);

/** "S:dead" into `out`: 0, or -1 when it does not fit. */
int hv_streamkeys_dead(const char *stream, char *out, size_t cap);

/** Longest batch name the daemon takes from an entry (bytes); a longer one is a dead letter.
 *  (A slot holds its name while it has entries: at most queue_size slots.) */
#define HV_STREAM_BATCH_FIELD_MAX 16384

/** The largest line number an entry may carry: JSON readers keep integers up to 2^53 - 1
 *  exact. */
#define HV_STREAM_LINE_MAX 9007199254740991ULL

/** Whether the `len` bytes of an entry's batch field make a batch the daemon can take: 1 to
 *  HV_STREAM_BATCH_FIELD_MAX bytes, no NUL or other control byte. */
int hv_streamkeys_batch_field_ok(const char *field, size_t len);

/** An entry's line field as a number: decimal digits only, 1 to HV_STREAM_LINE_MAX. 0 and
 *  *out, or -1. */
int hv_streamkeys_line_field(const char *field, size_t len, uint64_t *out);

/** "S:batch:NAME" into `out`: 0, or -1 when it does not fit. */
int hv_streamkeys_batch(const char *stream, const char *batch, char *out, size_t cap);

/**
 * `name` as part of a file name: bytes of [A-Za-z0-9_-] stay, and '.' when `keep_dots` (but
 * never a leading one); every other byte becomes %XX (upper-case hex), so that no name can
 * reach another directory or hide as a dotfile, and two names never share a spelling. 0, or
 * -1 when it does not fit (up to 3 bytes per input byte, plus the NUL).
 */
int hv_streamkeys_file_part(const char *name, int keep_dots, char *out, size_t cap);

/** Longest name of a file harvestd makes for a batch (NAME_MAX): its output, and its crash
 *  note ("BATCH.CONSUMER.crashes", the longer of the two). */
#define HV_STREAM_FILE_MAX 255

/** Longest consumer part of an output name. */
#define HV_STREAM_CONSUMER_PART_MAX 100

/**
 * The output file name of `batch`'s records written by `consumer`: "BATCH.CONSUMER.jsonl",
 * both parts spelled by hv_streamkeys_file_part(), the consumer's with its dots encoded too,
 * so that the last dot before ".jsonl" always separates the two. A part too long for the file
 * name to stay within HV_STREAM_FILE_MAX with ".crashes" (the consumer's: beyond
 * HV_STREAM_CONSUMER_PART_MAX; the batch's: beyond what the consumer's leaves) keeps its
 * spelling's beginning, cut between two encoded bytes, and ends with "~" and 16 hex digits
 * of a 64-bit hash of the whole name (XXH3): no spelled name has a '~', so a shortened name
 * never meets a spelled one, and two names share a shortened spelling only if both their
 * beginnings and their hashes are the same. Any batch name has an output name. 0, or -1
 * when `out` is too small (cap >= HV_STREAM_FILE_MAX + 1 always fits).
 */
int hv_streamkeys_output_name(const char *batch, const char *consumer, char *out, size_t cap);

/** Whether `file_name` (a base name) is an output of `batch` (by any consumer). */
int hv_streamkeys_is_output_of(const char *file_name, const char *batch);

/** Whether `name` is a batch name enqueue accepts: 1 to HV_STREAM_BATCH_MAX bytes and no
 *  control characters. */
int hv_streamkeys_batch_name_ok(const char *name);

#endif
