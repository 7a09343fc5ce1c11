/*
 * tool.h: what the measuring tools under tests/tools share. Each tool is one .c file linked
 * with the project's objects; define TOOL_NAME (for messages) before including this.
 */
#ifndef HARVESTD_TOOL_H
#define HARVESTD_TOOL_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harvestd/buf.h"

/* Report and exit with status 2 (a usage or input problem, not a measurement). */
static inline _Noreturn void die(const char *what, const char *arg)
{
    fprintf(stderr, "%s: %s%s%s\n", TOOL_NAME, what, arg ? ": " : "", arg ? arg : "");
    exit(2);
}

/* The whole file in a malloc'd buffer (not NUL-terminated: documents may hold NUL bytes). */
static inline char *load_file(const char *path, size_t *len_out)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        die(strerror(errno), path);
    hv_buf_t b;
    hv_buf_init(&b, SIZE_MAX);
    for (;;) {
        hv_buf_reserve(&b, 64 * 1024);
        size_t got = fread(b.data + b.len, 1, b.cap - b.len, f);
        if (got == 0)
            break;
        b.len += got;
    }
    if (ferror(f))
        die("read error", path);
    fclose(f);
    char *data = hv_buf_steal(&b, len_out);
    return data != NULL ? data : calloc(1, 1); /* empty file: a valid empty buffer */
}

#endif
