/*
 * store_put: write entries into a state store (store.h) for the tests of `harvestd state`,
 * until the daemon writes the store itself.
 *
 *   store_put DIR KEY JSON [KEY JSON]...
 *
 * Opens (creating) the store in DIR with a 64 MiB map and puts every KEY, used as it is (not
 * normalised), in one hv_store_write() transaction. JSON is an object with the entry's
 * fields, all optional: "url", "etag", "last_modified", "body_hash", "title", "content_type",
 * "charset" (strings), "fields" (an object), "bytes", "fetched_at", "modified_at" (numbers;
 * the times in Unix ms) and "rules" (hex text). Exit status 0, 1 when the store cannot be
 * opened or written, 2 on a usage error.
 */
#define TOOL_NAME "store_put"

#include <cjson/cJSON.h>
#include <inttypes.h>

#include "harvestd/common.h"
#include "harvestd/store.h"
#include "tool.h"

static char *str_of(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (v == NULL)
        return NULL;
    if (!cJSON_IsString(v))
        die("not a string", k);
    return hv_xstrdup(v->valuestring);
}

static int64_t num_of(const cJSON *o, const char *k, int64_t dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (v == NULL)
        return dflt;
    if (!cJSON_IsNumber(v))
        die("not a number", k);
    return (int64_t)v->valuedouble;
}

static void fill(hv_store_entry_t *e, const char *json)
{
    cJSON *o = cJSON_Parse(json);
    if (!cJSON_IsObject(o))
        die("not a JSON object", json);
    memset(e, 0, sizeof(*e));
    e->url = str_of(o, "url");
    e->etag = str_of(o, "etag");
    e->last_modified = str_of(o, "last_modified");
    char *sha = str_of(o, "body_hash");
    if (sha != NULL) {
        if (strlen(sha) >= sizeof(e->body_hash))
            die("body_hash is too long", sha);
        snprintf(e->body_hash, sizeof(e->body_hash), "%s", sha);
        free(sha);
    }
    e->title = str_of(o, "title");
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, "fields");
    if (f != NULL) {
        if (!cJSON_IsObject(f))
            die("not an object", "fields");
        char *text = cJSON_PrintUnformatted(f);
        if (text == NULL)
            die("out of memory", NULL);
        e->fields = hv_xstrdup(text);
        cJSON_free(text);
    }
    e->content_type = str_of(o, "content_type");
    e->charset = str_of(o, "charset");
    e->bytes = num_of(o, "bytes", -1);
    e->http_status = (int)num_of(o, "http_status", 0);
    e->max_age_s = num_of(o, "max_age", -1);
    char *rules = str_of(o, "rules");
    if (rules != NULL) {
        e->rules_fp = strtoull(rules, NULL, 16);
        free(rules);
    }
    e->fetched_at_ms = num_of(o, "fetched_at", 0);
    e->modified_at_ms = num_of(o, "modified_at", e->fetched_at_ms);
    cJSON_Delete(o);
}

int main(int argc, char **argv)
{
    if (argc < 4 || (argc - 2) % 2 != 0) {
        fprintf(stderr, "usage: store_put DIR KEY JSON [KEY JSON]...\n");
        return 2;
    }
    size_t n = (size_t)(argc - 2) / 2;
    hv_store_entry_t *entries = hv_xcalloc(n, sizeof(*entries));
    hv_store_op_t *ops = hv_xcalloc(n, sizeof(*ops));
    for (size_t i = 0; i < n; i++) {
        fill(&entries[i], argv[3 + 2 * i]);
        ops[i] = (hv_store_op_t){argv[2 + 2 * i], strlen(argv[2 + 2 * i]), &entries[i]};
    }
    char err[1500];
    hv_store_t *st = NULL;
    int status = 0, rc = hv_store_open(argv[1], (uint64_t)64 << 20, &st, err, sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "store_put: %s\n", err);
        status = 1;
    } else if ((rc = hv_store_write(st, ops, n)) != 0) {
        fprintf(stderr, "store_put: cannot write %s: %s\n", argv[1], hv_strerror(rc));
        status = 1;
    }
    hv_store_close(st);
    for (size_t i = 0; i < n; i++)
        hv_store_entry_clear(&entries[i]);
    free(entries);
    free(ops);
    return status;
}
