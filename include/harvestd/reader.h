/*
 * reader.h: a URL file as an hv_source_t. The file is read in fixed chunks with uv_fs_read and
 * split into lines incrementally, so memory does not depend on the file's size. Blank lines
 * and lines starting with '#' are skipped; surrounding whitespace (including CR) is trimmed.
 * Lines longer than HV_READER_LINE_MAX are delivered as an `overlong` prefix.
 */
#ifndef HARVESTD_READER_H
#define HARVESTD_READER_H

#include <uv.h>

#include "harvestd/source.h"

#define HV_READER_CHUNK (64 * 1024)
#define HV_READER_LINE_MAX (16 * 1024)

/**
 * Open `path` ("-" for standard input) as a source; nothing is read before
 * hv_source_start(). Returns 0 and *out, or a UV_E* error from open().
 */
int hv_reader_open(uv_loop_t *loop, const char *path, hv_source_t **out);

/**
 * The rule set a URL file names on its first line, `#! rules=NAME` (a byte order mark before
 * it allowed), read from `fd` at offset 0 without moving its position (a blocking pread:
 * for start-up and the spool's claim, never the loop's hot path). Returns 1 and NAME in `name`
 * (cut to `cap` - 1 bytes), or 0 when the first line names none.
 */
int hv_reader_rules_name(int fd, char *name, size_t cap);

#endif
