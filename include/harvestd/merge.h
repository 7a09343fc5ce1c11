/*
 * merge.h: gathering the outputs several daemons wrote for one stream batch into the file a
 * single `--once` run would have written: one record per input line, in line order. The
 * command (`harvestd merge`, commands.h) is a thin layer over these functions.
 *
 * Every daemon that took entries of batch NAME wrote their records to its own
 * out/NAME.CONSUMER.jsonl (hv_streamkeys_output_name()). Delivery is at-least-once, so a line
 * may have several records, in one file or in several. For one line the last record wins:
 * the later `fetched_at` (a record with one beats a record without); on a tie, the one read
 * later (inputs in the order added, then position in the file).
 *
 * Memory: only an index is kept per record (line, fetched_at as a number, file, offset,
 * length, whether it needs repair: 32 bytes), never the record's text. Selection sorts the
 * index in place and keeps the winners; writing copies each winner's bytes from its file
 * with pread(), exactly as they were written. Lines longer than HV_RECORD_LINE_MAX are not
 * records harvestd wrote, and are skipped without being held in memory.
 *
 * What is written is always JSON (RFC 8259), one object a line. The writer's records are,
 * but a damaged or hand-made output may hold lines cJSON reads and no JSON parser should: raw
 * NUL or control bytes, ill-formed UTF-8, numbers such as 01 or 1., a byte order mark.
 * Indexing tells such a record apart (hv_merge_parse_line(): HV_MERGE_LINE_REPAIRED), and
 * writing re-serialises it (hv_merge_repair_line()) from its bytes read again, so repair
 * costs no memory either. Records that are valid as written, the writer's, are copied.
 *
 * Use: hv_merge_new(), hv_merge_add_input() for each argument, hv_merge_index(),
 * hv_merge_select(), hv_merge_write(), hv_merge_get_stats(), hv_merge_free(). Every function
 * that can fail returns 0 or a negative UV_E* error, with a one-line message (naming the file
 * and the system's error text) in `err`.
 */
#ifndef HARVESTD_MERGE_H
#define HARVESTD_MERGE_H

#include <stddef.h>
#include <stdint.h>

typedef struct hv_merge_s hv_merge_t;

typedef struct {
    uint64_t files;      /* input files read (each one once, however often it was named) */
    uint64_t records;    /* records of the batch found */
    uint64_t winners;    /* of which kept: one per line */
    uint64_t duplicates; /* records - winners */
    uint64_t first_line; /* the lowest and highest line with a record; 0 when none */
    uint64_t last_line;
    uint64_t gaps;     /* line numbers in 1..last_line without a record. Blank and comment
                          lines of the enqueued file were no entries (enqueue numbers
                          entries by their line in the file), so these are not all
                          missing records: `missing` is, when the entries are known */
    uint64_t invalid;  /* complete lines that are not a record, even repaired: not one
                          JSON object and nothing else, no string "batch", "line" not an
                          integer >= 1, or longer than HV_RECORD_LINE_MAX */
    uint64_t torn;     /* last lines without their newline (a write cut short by a crash;
                          the entry was never acknowledged, so it is processed again) */
    uint64_t other;    /* records of another batch */
    uint64_t repaired; /* winners written re-serialised: not valid JSON as written
                          (hv_merge_repair_line()) */
    int entries_known; /* the batch's number of entries was told (hv_merge_set_entries()) */
    uint64_t entries;  /* ... that number */
    uint64_t missing;  /* ... and how many of them have no record: entries - winners, or 0
                          when fewer entries were told than lines have a record */
} hv_merge_stats_t;

/** What one line of an output is to the merge of a batch (hv_merge_parse_line()). */
typedef enum {
    HV_MERGE_LINE_RECORD,      /* a record of the batch, valid JSON as it is */
    HV_MERGE_LINE_INVALID,     /* not a record at all */
    HV_MERGE_LINE_OTHER_BATCH, /* a record of another batch (whatever its "line") */
    HV_MERGE_LINE_REPAIRED,    /* a record of the batch once repaired (hv_merge_repair_line()) */
} hv_merge_line_t;

/** A merge of batch `batch` (copied). Aborts on OOM, like hv_xmalloc(). */
hv_merge_t *hv_merge_new(const char *batch);

/** Free everything (NULL is fine). */
void hv_merge_free(hv_merge_t *m);

/**
 * Add one input. A directory stands for the batch's outputs in it and in its "out"
 * subdirectory when that exists (so a spool directory can be named): the entries whose base
 * name hv_streamkeys_is_output_of() the batch, the directory's own in name order, then
 * out/'s in name order. Anything else is taken as a file whatever its name. A file added
 * before (the same device and inode) is not added again.
 *
 * Returns 0; UV_ENOENT when there is no such name as `path`; another UV_E* when a directory
 * cannot be listed, or when an input, or a matching entry of a directory, cannot be followed
 * or is not a regular file (a merge reads its inputs twice, so pipes and devices cannot be
 * inputs). A name that is there but leads nowhere is UV_EIO, never UV_ENOENT: a symbolic link
 * to nothing (as `path`, as an entry, or as the directory's out/) and an entry removed
 * between listing the directory and opening it are inputs that cannot be read, the message
 * names them.
 */
int hv_merge_add_input(hv_merge_t *m, const char *path, char *err, size_t errcap);

/**
 * Tell the merge how many entries the batch has: its `total` in Redis (S:batch:NAME,
 * streamkeys.h), which `harvestd enqueue` and `harvestd status` print. Line numbers alone
 * cannot tell an entry without a record from a blank or comment line of the file, which never
 * was an entry; with the number, hv_merge_get_stats() counts the entries without a record
 * (`missing`). Outputs of any harvestd version are merged the same with it or without.
 */
void hv_merge_set_entries(hv_merge_t *m, uint64_t entries);

/** The files added so far, in reading order: their number, and the path of the i-th. */
size_t hv_merge_nfiles(const hv_merge_t *m);
const char *hv_merge_file_path(const hv_merge_t *m, size_t i);

/** Read every file added and index its lines. 0, or UV_E* (a file could not be read). */
int hv_merge_index(hv_merge_t *m, char *err, size_t errcap);

/** Sort the index and keep the winner of each line (no I/O; call after hv_merge_index()). */
void hv_merge_select(hv_merge_t *m);

/** hv_merge_select() with the depth at which the sort gives up quicksort for heapsort
 *  given (0: heapsort at once), so that tests reach every path of the sort. */
void hv_merge__select_depth(hv_merge_t *m, unsigned depth);

/**
 * Write the winners in ascending line order to `fd`, each its original bytes (repaired when
 * they need it) and '\n'. `out_name` names the output in error messages. Every input is
 * opened again and checked to be the file that was indexed, and each record still ends where
 * it did (and one to repair still can be). 0, or UV_E* (an input could not be read or had
 * changed, or `fd` could not be written).
 */
int hv_merge_write(hv_merge_t *m, int fd, const char *out_name, char *err, size_t errcap);

/** The counts so far (complete after hv_merge_select()). */
void hv_merge_get_stats(const hv_merge_t *m, hv_merge_stats_t *out);

/**
 * Classify one line (`text`, `len` bytes, without its newline; it may hold NULs) for the
 * merge of `batch`. A line that is valid JSON as it is (RFC 8259, UTF-8) is classified as it
 * stands; any other, by its repaired form (hv_merge_repair_line()): a record of the batch
 * there is HV_MERGE_LINE_REPAIRED, a line without one INVALID. For a record of the batch,
 * `*line` is its line and `*at` its fetched_at key (hv_merge_time_key(); 0 when absent or not
 * a time).
 */
hv_merge_line_t hv_merge_parse_line(const char *text, size_t len, const char *batch, uint64_t *line,
                                    uint64_t *at);

/**
 * A line (`len` bytes, NULs allowed) as valid JSON, the way harvestd repairs a record: every
 * ill-formed UTF-8 sequence (a maximal subpart, as hv_utf8_sanitize() has it) and every raw
 * NUL in a string (which no JSON string and no cJSON string holds) becomes U+FFFD; the result
 * is read with cJSON, as the whole line has to be one object, and printed compactly. So other
 * control bytes in strings become escapes, control bytes between tokens (blanks to cJSON)
 * and a byte order mark go, and numbers are spelled as cJSON prints them; keys keep their
 * order. A malloc'd, NUL-terminated text (`*out_len` its length; free with free()), or NULL
 * when there is no object to be read, or its repaired line would be longer than
 * HV_RECORD_LINE_MAX.
 */
char *hv_merge_repair_line(const char *text, size_t len, size_t *out_len);

/**
 * An RFC 3339 UTC time "YYYY-MM-DDTHH:MM:SS[.fraction]Z" as a number that orders like the
 * time, to the millisecond (YYYYMMDDhhmmssmmm; further digits of the fraction are ignored).
 * 0 for NULL and for anything else (an offset other than Z, a field out of range), which
 * merges as if there were no time.
 */
uint64_t hv_merge_time_key(const char *s);

#endif
