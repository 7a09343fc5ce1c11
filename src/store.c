/* store.c: the per-URL store on LMDB (see store.h). */
#include "harvestd/store.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <uv.h>

#include "harvestd/common.h"

struct hv_store_s {
    MDB_env *env;
    MDB_dbi dbi;
    char *dir;
};

/* LMDB's own codes, and errno values it passes through, as UV_* errors. */
static int from_mdb(int rc)
{
    if (rc == 0)
        return 0;
    if (rc == MDB_NOTFOUND)
        return UV_ENOENT;
    if (rc == MDB_MAP_FULL || rc == MDB_TXN_FULL)
        return UV_ENOSPC;
    if (rc > 0 && rc < 4096)
        return uv_translate_sys_error(rc);
    return UV_EIO;
}

int hv_store_open(const char *dir, uint64_t max_bytes, hv_store_t **out, char *err,
                  size_t errcap)
{
    MDB_env *env = NULL;
    MDB_txn *txn = NULL;
    MDB_dbi dbi;
    int rc;

    *out = NULL;
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        snprintf(err, errcap, "cannot create the state store %s: %s", dir, strerror(errno));
        return uv_translate_sys_error(errno);
    }
    if ((rc = mdb_env_create(&env)) != 0 ||
        (rc = mdb_env_set_mapsize(env, (size_t)max_bytes)) != 0 ||
        (rc = mdb_env_set_maxreaders(env, 126)) != 0) {
        snprintf(err, errcap, "cannot set up the state store %s: %s", dir, mdb_strerror(rc));
        goto fail;
    }
    rc = mdb_env_open(env, dir, MDB_NOTLS | MDB_NOMETASYNC, 0644);
    if (rc != 0) {
        if (rc == MDB_INVALID || rc == MDB_VERSION_MISMATCH || rc == MDB_CORRUPTED)
            snprintf(err, errcap,
                     "the state store %s is not a usable LMDB store (%s): move it away or "
                     "delete %s/data.mdb and %s/lock.mdb to start with an empty one",
                     dir, mdb_strerror(rc), dir, dir);
        else
            snprintf(err, errcap, "cannot open the state store %s: %s", dir, mdb_strerror(rc));
        goto fail;
    }
    /* Reader slots of processes that died (a daemon killed mid-lookup) would pin old pages
     * and make the store grow: clear them. */
    int dead = 0;
    mdb_reader_check(env, &dead);
    if ((rc = mdb_txn_begin(env, NULL, 0, &txn)) == 0) {
        if ((rc = mdb_dbi_open(txn, NULL, 0, &dbi)) != 0)
            mdb_txn_abort(txn);
        else
            rc = mdb_txn_commit(txn); /* frees the transaction, failed or not */
    }
    if (rc != 0) {
        snprintf(err, errcap, "cannot read the state store %s: %s", dir, mdb_strerror(rc));
        goto fail;
    }
    hv_store_t *st = hv_xcalloc(1, sizeof(*st));
    st->env = env;
    st->dbi = dbi;
    st->dir = hv_xstrdup(dir);
    *out = st;
    return 0;
fail:
    if (env != NULL)
        mdb_env_close(env);
    return from_mdb(rc) != 0 ? from_mdb(rc) : UV_EIO;
}

/* ---- values: one small JSON object ---- */

static void store_oom(void)
{
    fprintf(stderr, "harvestd: out of memory encoding a state store entry\n");
    abort();
}

static void add_str(cJSON *o, const char *k, const char *v)
{
    if (v != NULL && cJSON_AddStringToObject(o, k, v) == NULL)
        store_oom();
}

static void add_num(cJSON *o, const char *k, double v)
{
    if (cJSON_AddNumberToObject(o, k, v) == NULL)
        store_oom();
}

static char *encode(const hv_store_entry_t *e)
{
    cJSON *o = cJSON_CreateObject();
    char fp[24];
    if (o == NULL)
        store_oom();
    add_str(o, "url", e->url);
    add_str(o, "etag", e->etag);
    add_str(o, "last_modified", e->last_modified);
    if (e->body_hash[0] != '\0')
        add_str(o, "body_hash", e->body_hash);
    add_str(o, "title", e->title);
    /* As text: reading an entry (once per URL, on the loop) then copies it instead of
     * parsing and printing it again. */
    add_str(o, "fields", e->fields);
    add_str(o, "content_type", e->content_type);
    add_str(o, "charset", e->charset);
    if (e->bytes >= 0)
        add_num(o, "bytes", (double)e->bytes);
    if (e->http_status > 0)
        add_num(o, "status", e->http_status);
    if (e->max_age_s >= 0)
        add_num(o, "max_age", (double)e->max_age_s);
    /* A 64-bit value does not survive a JSON number (a double): hex text. */
    snprintf(fp, sizeof(fp), "%016" PRIx64, e->rules_fp);
    add_str(o, "rules", fp);
    add_num(o, "fetched_at", (double)e->fetched_at_ms);
    add_num(o, "modified_at", (double)e->modified_at_ms);
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (text == NULL)
        store_oom();
    return text;
}

static char *dup_str(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? hv_xstrdup(v->valuestring) : NULL;
}

static int64_t get_num(const cJSON *o, const char *k, int64_t dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : dflt;
}

static int decode(const char *data, size_t len, hv_store_entry_t *e)
{
    cJSON *o = cJSON_ParseWithLength(data, len);
    memset(e, 0, sizeof(*e));
    e->bytes = -1;
    e->max_age_s = -1;
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return UV_EINVAL;
    }
    e->url = dup_str(o, "url");
    e->etag = dup_str(o, "etag");
    e->last_modified = dup_str(o, "last_modified");
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(o, "body_hash");
    if (cJSON_IsString(h) && strlen(h->valuestring) < sizeof(e->body_hash))
        snprintf(e->body_hash, sizeof(e->body_hash), "%s", h->valuestring);
    e->title = dup_str(o, "title");
    e->fields = dup_str(o, "fields");
    if (e->fields != NULL) {
        /* It goes into records as it is: it must be a JSON object, whatever the file holds. */
        cJSON *f = cJSON_Parse(e->fields);
        int valid = cJSON_IsObject(f);
        cJSON_Delete(f);
        if (!valid) {
            cJSON_Delete(o);
            hv_store_entry_clear(e);
            return UV_EINVAL;
        }
    }
    e->content_type = dup_str(o, "content_type");
    e->charset = dup_str(o, "charset");
    e->bytes = get_num(o, "bytes", -1);
    e->http_status = (int)get_num(o, "status", 0);
    e->max_age_s = get_num(o, "max_age", -1);
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(o, "rules");
    if (cJSON_IsString(r))
        e->rules_fp = strtoull(r->valuestring, NULL, 16);
    e->fetched_at_ms = get_num(o, "fetched_at", 0);
    e->modified_at_ms = get_num(o, "modified_at", e->fetched_at_ms);
    cJSON_Delete(o);
    return 0;
}

/* ---- operations ---- */

int hv_store_get(hv_store_t *st, const char *key, size_t key_len, hv_store_entry_t *out)
{
    MDB_txn *txn;
    MDB_val k = {key_len, (void *)(uintptr_t)key}, v;
    memset(out, 0, sizeof(*out));
    out->bytes = -1;
    out->max_age_s = -1;
    if (key_len == 0 || key_len > HV_STORE_KEY_MAX)
        return UV_ENOENT;
    int rc = mdb_txn_begin(st->env, NULL, MDB_RDONLY, &txn);
    if (rc != 0)
        return from_mdb(rc);
    rc = mdb_get(txn, st->dbi, &k, &v);
    if (rc == 0)
        rc = decode(v.mv_data, v.mv_size, out) == 0 ? 0 : MDB_NOTFOUND;
    mdb_txn_abort(txn);
    return from_mdb(rc);
}

int hv_store_write(hv_store_t *st, const hv_store_op_t *ops, size_t n)
{
    MDB_txn *txn;
    int rc = mdb_txn_begin(st->env, NULL, 0, &txn);
    if (rc != 0)
        return from_mdb(rc);
    for (size_t i = 0; i < n && rc == 0; i++) {
        const hv_store_op_t *op = &ops[i];
        if (op->key_len == 0 || op->key_len > HV_STORE_KEY_MAX)
            continue;
        MDB_val k = {op->key_len, (void *)(uintptr_t)op->key};
        if (op->entry == NULL) {
            rc = mdb_del(txn, st->dbi, &k, NULL);
            if (rc == MDB_NOTFOUND)
                rc = 0;
            continue;
        }
        char *text = encode(op->entry);
        MDB_val v = {strlen(text), text};
        rc = mdb_put(txn, st->dbi, &k, &v, 0);
        cJSON_free(text);
    }
    if (rc != 0) {
        mdb_txn_abort(txn);
        return from_mdb(rc);
    }
    return from_mdb(mdb_txn_commit(txn));
}

int hv_store_delete(hv_store_t *st, const char *key, size_t key_len)
{
    MDB_txn *txn;
    MDB_val k = {key_len, (void *)(uintptr_t)key};
    if (key_len == 0 || key_len > HV_STORE_KEY_MAX)
        return UV_ENOENT;
    int rc = mdb_txn_begin(st->env, NULL, 0, &txn);
    if (rc != 0)
        return from_mdb(rc);
    if ((rc = mdb_del(txn, st->dbi, &k, NULL)) != 0) {
        mdb_txn_abort(txn);
        return from_mdb(rc); /* MDB_NOTFOUND: UV_ENOENT */
    }
    return from_mdb(mdb_txn_commit(txn));
}

int hv_store_prune(hv_store_t *st, int64_t before_unix_ms, uint64_t *removed)
{
    MDB_txn *txn;
    MDB_cursor *cur;
    MDB_val k, v;
    *removed = 0;
    int rc = mdb_txn_begin(st->env, NULL, 0, &txn);
    if (rc != 0)
        return from_mdb(rc);
    if ((rc = mdb_cursor_open(txn, st->dbi, &cur)) != 0) {
        mdb_txn_abort(txn);
        return from_mdb(rc);
    }
    /* After mdb_cursor_del the cursor stands on the next entry, which MDB_NEXT returns. */
    while ((rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) == 0) {
        hv_store_entry_t e;
        int old = decode(v.mv_data, v.mv_size, &e) != 0 || e.fetched_at_ms < before_unix_ms;
        hv_store_entry_clear(&e);
        if (old) {
            if ((rc = mdb_cursor_del(cur, 0)) != 0)
                break;
            (*removed)++;
        }
    }
    mdb_cursor_close(cur);
    if (rc != MDB_NOTFOUND) {
        mdb_txn_abort(txn);
        *removed = 0;
        return from_mdb(rc);
    }
    return from_mdb(mdb_txn_commit(txn));
}

int hv_store_stats(hv_store_t *st, hv_store_stats_t *out)
{
    MDB_stat ms;
    MDB_envinfo info;
    MDB_txn *txn;
    memset(out, 0, sizeof(*out));
    int rc = mdb_txn_begin(st->env, NULL, MDB_RDONLY, &txn);
    if (rc != 0)
        return from_mdb(rc);
    rc = mdb_stat(txn, st->dbi, &ms);
    mdb_txn_abort(txn);
    if (rc != 0 || (rc = mdb_env_info(st->env, &info)) != 0)
        return from_mdb(rc);
    out->entries = ms.ms_entries;
    out->bytes_used = (uint64_t)(info.me_last_pgno + 1) * ms.ms_psize;
    out->map_bytes = info.me_mapsize;
    return 0;
}

void hv_store_close(hv_store_t *st)
{
    if (st == NULL)
        return;
    mdb_env_close(st->env);
    free(st->dir);
    free(st);
}

uint64_t hv_store_fingerprint(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t h = UINT64_C(14695981039346656037);
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= UINT64_C(1099511628211);
    }
    return h;
}
