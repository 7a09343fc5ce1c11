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

#endif
