/* streamkeys.c: the names of harvestd's Redis keys and of stream batch files (see
 * streamkeys.h). */
#include "harvestd/streamkeys.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <xxhash.h>

static int fits(int n, size_t cap)
{
    return n >= 0 && (size_t)n < cap ? 0 : -1;
}

int hv_streamkeys_batches(const char *stream, char *out, size_t cap)
{
    return fits(snprintf(out, cap, "%s:batches", stream), cap);
}

int hv_streamkeys_dead(const char *stream, char *out, size_t cap)
{
    return fits(snprintf(out, cap, "%s:dead", stream), cap);
}

int hv_streamkeys_batch_field_ok(const char *field, size_t len)
{
    if (len == 0 || len > HV_STREAM_BATCH_FIELD_MAX)
        return 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)field[i];
        if (c < 0x20 || c == 0x7f)
            return 0;
    }
    return 1;
}

int hv_streamkeys_line_field(const char *field, size_t len, uint64_t *out)
{
    uint64_t v = 0;
    if (len == 0 || len > 16)
        return -1;
    for (size_t i = 0; i < len; i++) {
        if (field[i] < '0' || field[i] > '9')
            return -1;
        v = v * 10 + (uint64_t)(field[i] - '0');
    }
    if (v == 0 || v > HV_STREAM_LINE_MAX)
        return -1;
    *out = v;
    return 0;
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

/* "~" and 16 hex digits: the end of a shortened part. */
#define HASH_TAIL 17

/* Bytes of `name` spelled by hv_streamkeys_file_part(). */
static size_t spelled_len(const char *name, int keep_dots)
{
    size_t n = 0;
    for (size_t i = 0; name[i] != '\0'; i++)
        n += plain((unsigned char)name[i], i, keep_dots) ? 1 : 3;
    return n;
}

/* `name` spelled, or, when that is longer than `max` bytes, its shortened spelling (see
 * streamkeys.h). `cap` must exceed `max`, and `max` HASH_TAIL. */
static void bounded_part(const char *name, int keep_dots, size_t max, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    int shorten = spelled_len(name, keep_dots) > max;
    size_t room = shorten ? max - HASH_TAIL : max, n = 0;
    (void)cap;
    for (size_t i = 0; name[i] != '\0'; i++) {
        unsigned char c = (unsigned char)name[i];
        int p = plain(c, i, keep_dots);
        if (n + (p ? 1 : 3) > room)
            break;
        if (p) {
            out[n++] = (char)c;
        } else {
            out[n++] = '%';
            out[n++] = hex[c >> 4];
            out[n++] = hex[c & 15];
        }
    }
    if (shorten)
        n += (size_t)snprintf(out + n, cap - n, "~%016llx",
                              (unsigned long long)XXH3_64bits(name, strlen(name)));
    out[n] = '\0';
}

/* The longest batch part beside a consumer part of `consumer_len` bytes. */
static size_t batch_part_max(size_t consumer_len)
{
    return HV_STREAM_FILE_MAX - (sizeof(".crashes") - 1) - 1 - consumer_len;
}

int hv_streamkeys_output_name(const char *batch, const char *consumer, char *out, size_t cap)
{
    char b[HV_STREAM_FILE_MAX + 1], c[HV_STREAM_CONSUMER_PART_MAX + 1];
    bounded_part(consumer, 0, HV_STREAM_CONSUMER_PART_MAX, c, sizeof(c));
    bounded_part(batch, 1, batch_part_max(strlen(c)), b, sizeof(b));
    return fits(snprintf(out, cap, "%s.%s.jsonl", b, c), cap);
}

/* Whether `part` (`len` bytes of a file name) is `batch`'s part, spelled or shortened. */
static int is_batch_part(const char *part, size_t len, const char *batch)
{
    const char *tilde = memchr(part, '~', len);
    size_t plen = tilde != NULL ? (size_t)(tilde - part) : len;
    char hash[HASH_TAIL + 1];
    if (tilde != NULL) {
        snprintf(hash, sizeof(hash), "~%016llx",
                 (unsigned long long)XXH3_64bits(batch, strlen(batch)));
        if (len - plen != HASH_TAIL || memcmp(tilde, hash, HASH_TAIL) != 0)
            return 0;
    }
    /* The part's spelled bytes are the beginning of the batch's spelling (all of it when not
     * shortened). */
    char piece[4];
    size_t n = 0;
    for (size_t i = 0; batch[i] != '\0'; i++) {
        unsigned char ch = (unsigned char)batch[i];
        size_t k = plain(ch, i, 1) ? 1 : 3;
        if (k == 1)
            piece[0] = (char)ch;
        else
            snprintf(piece, sizeof(piece), "%%%02X", ch);
        if (n + k > plen)
            return tilde != NULL && n == plen;
        if (memcmp(part + n, piece, k) != 0)
            return 0;
        n += k;
    }
    return tilde == NULL && n == plen;
}

int hv_streamkeys_is_output_of(const char *file_name, const char *batch)
{
    size_t n = strlen(file_name);
    /* NAME "." CONSUMER ".jsonl", CONSUMER non-empty and without a dot */
    if (n < 1 + 1 + 1 + 6 || strcmp(file_name + n - 6, ".jsonl") != 0)
        return 0;
    size_t dot = n - 6;
    while (dot > 0 && file_name[dot - 1] != '.' && file_name[dot - 1] != '/')
        dot--;
    if (dot < 2 || file_name[dot - 1] != '.' || dot == n - 6)
        return 0;
    return is_batch_part(file_name, dot - 1, batch);
}

