/* resume.c: output repair and the set of URLs that already have an ok record. */
#include "harvestd/resume.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "harvestd/common.h"
#include "harvestd/record.h"

typedef struct {
    uint64_t hash; /* 0 marks an empty slot */
    uint64_t count;
} slot_t;

struct hv_okset_s {
    slot_t *slots;
    size_t cap; /* power of two */
    size_t used;
};

/* FNV-1a with a murmur-style finaliser: good spread, and 2^-64 odds that two URLs collide. */
static uint64_t url_hash(const char *s, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ULL;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h != 0 ? h : 1;
}

hv_okset_t *hv_okset_new(void)
{
    hv_okset_t *s = hv_xcalloc(1, sizeof(*s));
    s->cap = 64;
    s->slots = hv_xcalloc(s->cap, sizeof(slot_t));
    return s;
}

static slot_t *find(const hv_okset_t *s, uint64_t h)
{
    size_t i = (size_t)h & (s->cap - 1);
    while (s->slots[i].hash != 0 && s->slots[i].hash != h)
        i = (i + 1) & (s->cap - 1);
    return &s->slots[i];
}

static void grow(hv_okset_t *s)
{
    slot_t *old = s->slots;
    size_t oldcap = s->cap;
    s->cap *= 2;
    s->slots = hv_xcalloc(s->cap, sizeof(slot_t));
    for (size_t i = 0; i < oldcap; i++)
        if (old[i].hash != 0)
            *find(s, old[i].hash) = old[i];
    free(old);
}

void hv_okset_add(hv_okset_t *s, const char *url, size_t len)
{
    if ((s->used + 1) * 4 > s->cap * 3)
        grow(s);
    uint64_t h = url_hash(url, len);
    slot_t *slot = find(s, h);
    if (slot->hash == 0) {
        slot->hash = h;
        s->used++;
    }
    slot->count++;
}

int hv_okset_take(hv_okset_t *s, const char *url, size_t len)
{
    slot_t *slot = find(s, url_hash(url, len));
    if (slot->hash == 0 || slot->count == 0)
        return 0;
    slot->count--;
    return 1;
}

void hv_okset_free(hv_okset_t *s)
{
    if (s == NULL)
        return;
    free(s->slots);
    free(s);
}

/* The figures of one kept ok record, as batch.c counts a record it writes. */
static void count_kept(hv_kept_t *k, const cJSON *obj)
{
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(obj, "http_status");
    const cJSON *bytes = cJSON_GetObjectItemCaseSensitive(obj, "bytes");
    int not_modified = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(obj, "not_modified"));
    int from_cache = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(obj, "from_cache"));
    k->records++;
    if (cJSON_IsNumber(code) && code->valuedouble >= 100 && code->valuedouble < 600)
        k->by_status[(int)code->valuedouble]++;
    if (cJSON_IsNumber(bytes) && bytes->valuedouble >= 0 && bytes->valuedouble < 9.0e15) {
        uint64_t n = (uint64_t)bytes->valuedouble;
        k->body_bytes += n;
        k->with_bytes++;
        if (!not_modified && !from_cache)
            hv_sizes_add(&k->ok_sizes, n);
    }
    k->not_modified += not_modified != 0;
    k->unchanged += cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(obj, "unchanged")) != 0;
    k->from_cache += from_cache != 0;
}

/* Parse one line; 1 if it is exactly one JSON object (and record its ok URL), else 0: an
 * object followed by anything, even a blank, is not a line we wrote. */
static int take_line(const char *line, size_t len, hv_okset_t *set, hv_okset_t *crashed,
                     hv_repair_t *out)
{
    const char *end = NULL;
    cJSON *obj = cJSON_ParseWithLengthOpts(line, len, &end, 0);
    if (obj == NULL || !cJSON_IsObject(obj) || end != line + len) {
        cJSON_Delete(obj);
        return 0;
    }
    out->records++;
    const cJSON *url = cJSON_GetObjectItemCaseSensitive(obj, "requested_url");
    const cJSON *status = cJSON_GetObjectItemCaseSensitive(obj, "status");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(obj, "error_type");
    if (cJSON_IsString(url) && cJSON_IsString(status) && strcmp(status->valuestring, "ok") == 0) {
        out->ok++;
        count_kept(&out->kept, obj);
        if (set != NULL)
            hv_okset_add(set, url->valuestring, strlen(url->valuestring));
    } else if (cJSON_IsString(url) && cJSON_IsString(type) &&
               strcmp(type->valuestring, hv_error_type_name(HV_ET_PARSER_CRASHED)) == 0) {
        out->crashed++;
        if (crashed != NULL)
            hv_okset_add(crashed, url->valuestring, strlen(url->valuestring));
    }
    cJSON_Delete(obj);
    return 1;
}

int hv_output_repair(const char *path, hv_okset_t *set, hv_okset_t *crashed, hv_repair_t *out,
                     char *err, size_t errcap)
{
    FILE *f = NULL;
    char *line = NULL;
    size_t cap = 0;
    int rc = 0;

    memset(out, 0, sizeof(*out));
    f = fopen(path, "r+");
    if (f == NULL) {
        if (errno == ENOENT)
            return 0;
        rc = -errno;
        snprintf(err, errcap, "cannot open %s for repair: %s", path, strerror(errno));
        goto out;
    }
    long good_end = 0; /* offset just past the last complete, valid line */
    long pos = 0;
    int pending_bad = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, f)) > 0) {
        int complete = line[n - 1] == '\n';
        size_t len = (size_t)n - (complete ? 1 : 0);
        pos += n;
        if (complete && take_line(line, len, set, crashed, out)) {
            out->bad_lines += (uint64_t)pending_bad;
            pending_bad = 0;
            good_end = pos;
        } else if (complete) {
            /* Bad only if something valid follows; at the end it is part of the tear. */
            pending_bad++;
        }
    }
    if (ferror(f)) {
        rc = UV_EIO;
        snprintf(err, errcap, "cannot read %s: %s", path, strerror(errno));
        goto out;
    }
    if (pos > good_end) {
        out->truncated = (uint64_t)(pos - good_end);
        if (ftruncate(fileno(f), good_end) != 0 || fsync(fileno(f)) != 0) {
            rc = -errno;
            snprintf(err, errcap, "cannot repair %s: %s", path, strerror(errno));
            goto out;
        }
    }

out:
    free(line);
    if (f != NULL)
        fclose(f);
    return rc;
}

void hv_crash_note_read(const char *path, hv_okset_t *set, hv_buf_t *noted)
{
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return;
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, f)) > 0) {
        if (line[n - 1] != '\n')
            break; /* torn by the crash: the page was not noted */
        if (n > 1) {
            hv_okset_add(set, line, (size_t)n - 1);
            if (noted != NULL)
                (void)hv_buf_append(noted, line, (size_t)n); /* past its bound: not told */
        }
    }
    free(line);
    fclose(f);
}
