/* streamkeys.c: the names of harvestd's Redis keys and of stream batch files (see
 * streamkeys.h). */
#include "harvestd/streamkeys.h"

#include <stdio.h>
#include <string.h>

static int fits(int n, size_t cap)
{
    return n >= 0 && (size_t)n < cap ? 0 : -1;
}

int hv_streamkeys_batches(const char *stream, char *out, size_t cap)
{
    return fits(snprintf(out, cap, "%s:batches", stream), cap);
}

int hv_streamkeys_batch(const char *stream, const char *batch, char *out, size_t cap)
{
    return fits(snprintf(out, cap, "%s:batch:%s", stream, batch), cap);
}

static int plain(unsigned char c, size_t at, int keep_dots)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '-' || (c == '.' && at > 0 && keep_dots);
}

int hv_streamkeys_file_part(const char *name, int keep_dots, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;
    for (size_t i = 0; name[i] != '\0'; i++) {
        unsigned char c = (unsigned char)name[i];
        if (plain(c, i, keep_dots)) {
            if (n + 1 >= cap)
                return -1;
            out[n++] = (char)c;
        } else {
            if (n + 3 >= cap)
                return -1;
            out[n++] = '%';
            out[n++] = hex[c >> 4];
            out[n++] = hex[c & 15];
        }
    }
    if (n >= cap)
        return -1;
    out[n] = '\0';
    return 0;
}

int hv_streamkeys_batch_name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > HV_STREAM_BATCH_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c < 0x20 || c == 0x7f)
            return 0;
    }
    return 1;
}

int hv_streamkeys_output_name(const char *batch, const char *consumer, char *out, size_t cap)
{
    char b[3 * HV_STREAM_BATCH_MAX + 1], c[3 * 256 + 1];
    if (hv_streamkeys_file_part(batch, 1, b, sizeof(b)) != 0 ||
        hv_streamkeys_file_part(consumer, 0, c, sizeof(c)) != 0)
        return -1;
    return fits(snprintf(out, cap, "%s.%s.jsonl", b, c), cap);
}

int hv_streamkeys_is_output_of(const char *file_name, const char *batch)
{
    char b[3 * HV_STREAM_BATCH_MAX + 1];
    size_t n = strlen(file_name), bn;
    if (hv_streamkeys_file_part(batch, 1, b, sizeof(b)) != 0)
        return 0;
    bn = strlen(b);
    /* NAME "." CONSUMER ".jsonl", CONSUMER non-empty and without a dot */
    if (n < bn + 1 + 1 + 6 || strncmp(file_name, b, bn) != 0 || file_name[bn] != '.' ||
        strcmp(file_name + n - 6, ".jsonl") != 0)
        return 0;
    for (size_t i = bn + 1; i < n - 6; i++)
        if (file_name[i] == '.' || file_name[i] == '/')
            return 0;
    return 1;
}
