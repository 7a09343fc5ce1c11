/* store.c: the per-URL store on LMDB (see store.h). */
#include "harvestd/store.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <lmdb.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include "harvestd/common.h"
#include "harvestd/record.h"
#include "harvestd/storecheck.h"
#include "harvestd/utf8.h"

struct hv_store_s {
    MDB_env *env;
    MDB_dbi dbi;
    char *dir;
};

/* Less room than this on the store's filesystem, after a commit failed with EIO, is a full
 * disk: LMDB turns a short write (the filesystem filled up during it) into EIO. */
#define DISK_FULL_MARGIN ((uint64_t)1 << 20)

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

/* How to start afresh, at the end of every message about a store that cannot be used. */
#define DISCARD_HINT                                                                               \
    ": move it away or delete %s/data.mdb and %s/lock.mdb to start with an empty one"

/* Check DIR/data.mdb before LMDB maps it (storecheck.h): 0 with the verdict in *check (sound
 * when there is no file yet, or an empty one: LMDB makes a new store of it, or says what is
 * wrong with what is not a file), or an error with the message. */
static int check_data_file(const char *dir, hv_storecheck_t *check, char *err, size_t errcap)
{
    size_t n = strlen(dir) + sizeof("/data.mdb");
    char *path = hv_xmalloc(n);
    struct stat sb;
    int rc = 0;
    memset(check, 0, sizeof(*check));
    snprintf(path, n, "%s/data.mdb", dir);
    if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0 &&
        (rc = hv_storecheck_file(path, check)) != 0)
        hv_errf(err, errcap, rc, "cannot read the state store %s: %s: %s", dir, path,
                hv_strerror(rc));
    free(path);
    return rc;
}

/* The same, for opening: a store it refuses is an error whose message says how to discard it. */
static int check_before_open(const char *dir, char *err, size_t errcap)
{
    hv_storecheck_t check;
    int rc = check_data_file(dir, &check, err, errcap);
    if (rc != 0)
        return rc;
    if (check.verdict == HV_STORECHECK_FOREIGN)
        return hv_errf(
            err, errcap, UV_EIO,
            "the state store %s is not a usable LMDB store (%s/data.mdb: %s)" DISCARD_HINT, dir,
            dir, check.what, dir, dir);
    if (check.verdict == HV_STORECHECK_DAMAGED)
        return hv_errf(err, errcap, UV_EIO,
                       "the state store %s is damaged (%s/data.mdb: %s)" DISCARD_HINT, dir, dir,
                       check.what, dir, dir);
    return 0;
}

/* A write transaction's result as a UV_* error; *disk says whether a UV_ENOSPC is the disk's
 * (no room on the filesystem) rather than the map's (the bound). */
static int write_error(const hv_store_t *st, int rc, int *disk)
{
    struct statvfs vfs;
    *disk = 0;
    if (rc == ENOSPC || rc == EDQUOT || rc == EFBIG) {
        *disk = 1;
        return UV_ENOSPC;
    }
    if (rc == EIO && statvfs(st->dir, &vfs) == 0 &&
        (uint64_t)vfs.f_bavail * vfs.f_frsize < DISK_FULL_MARGIN) {
        *disk = 1;
        return UV_ENOSPC;
    }
    return from_mdb(rc);
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
    if ((rc = check_before_open(dir, err, errcap)) != 0)
        return rc;
    if ((rc = mdb_env_create(&env)) != 0 ||
        (rc = mdb_env_set_mapsize(env, (size_t)max_bytes)) != 0 ||
        (rc = mdb_env_set_maxreaders(env, 126)) != 0) {
        snprintf(err, errcap, "cannot set up the state store %s: %s", dir, mdb_strerror(rc));
        goto fail;
    }
    rc = mdb_env_open(env, dir, MDB_NOTLS | MDB_NOMETASYNC, 0644);
    if (rc != 0) {
        if (rc == MDB_INVALID || rc == MDB_VERSION_MISMATCH || rc == MDB_CORRUPTED)
            snprintf(err, errcap, "the state store %s is not a usable LMDB store (%s)" DISCARD_HINT,
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

/* The store in `dir` exists: 0 with the map to open it with in *map_bytes (the next whole GiB
 * above data.mdb's size), or an error with the message (UV_ENOENT: there is none). */
static int existing_map(const char *dir, uint64_t *map_bytes, char *err, size_t errcap)
{
    const uint64_t gib = (uint64_t)1 << 30;
    struct stat sb;
    size_t n = strlen(dir) + sizeof("/data.mdb");
    char *data = hv_xmalloc(n);
    int rc = 0;

    snprintf(data, n, "%s/data.mdb", dir);
    if (stat(dir, &sb) != 0) {
        int e = errno;
        if (e == ENOENT || e == ENOTDIR)
            rc = hv_errf(err, errcap, UV_ENOENT, "no state store at %s", dir);
        else
            rc = hv_errf(err, errcap, uv_translate_sys_error(e),
                         "cannot read the state store %s: %s", dir, strerror(e));
        goto out;
    }
    if (!S_ISDIR(sb.st_mode)) {
        rc = hv_errf(err, errcap, UV_ENOENT, "no state store at %s (not a directory)", dir);
        goto out;
    }
    if (stat(data, &sb) != 0) {
        int e = errno;
        if (e == ENOENT)
            rc = hv_errf(err, errcap, UV_ENOENT, "no state store at %s", dir);
        else
            rc = hv_errf(err, errcap, uv_translate_sys_error(e),
                         "cannot read the state store %s: %s: %s", dir, data, strerror(e));
        goto out;
    }
    /* LMDB would make an empty file a new store: there is nothing in it to inspect. */
    if (!S_ISREG(sb.st_mode) || sb.st_size == 0) {
        rc = hv_errf(err, errcap, UV_ENOENT, "no state store at %s (%s is %s)", dir, data,
                     S_ISREG(sb.st_mode) ? "empty" : "not a regular file");
        goto out;
    }
    *map_bytes = ((uint64_t)sb.st_size / gib + 1) * gib;
out:
    free(data);
    return rc;
}

int hv_store_open_existing(const char *dir, hv_store_t **out, char *err, size_t errcap)
{
    uint64_t map_bytes = 0;
    int rc = existing_map(dir, &map_bytes, err, errcap);
    *out = NULL;
    if (rc != 0)
        return rc;
    return hv_store_open(dir, map_bytes, out, err, errcap);
}

/* ---- values: one small JSON object ---- */

/* What a field holds, which says when it is absent and how each form spells it. */
typedef enum {
    F_TEXT,   /* char *; NULL: absent */
    F_HASH,   /* char[65]; "": absent */
    F_JSON,   /* char *, a JSON object's text: a string in the store, itself when shown */
    F_COUNT,  /* int64_t; -1: absent */
    F_STATUS, /* int; 0: absent */
    F_FP,     /* uint64_t, as 16 hex digits (a JSON number would not hold 64 bits) */
    F_TIME,   /* int64_t Unix ms: a number in the store, RFC 3339 UTC when shown */
} field_kind_t;

/* An entry's fields, in the order both forms list them: the store's value (`stored`), and
 * the entry as people see it (`shown`, hv_store_entry_show()). The one list of them. */
static const struct {
    const char *stored;
    const char *shown;
    field_kind_t kind;
    size_t off;
} entry_fields[] = {
    {"url", "url", F_TEXT, offsetof(hv_store_entry_t, url)},
    {"etag", "etag", F_TEXT, offsetof(hv_store_entry_t, etag)},
    {"last_modified", "last_modified", F_TEXT, offsetof(hv_store_entry_t, last_modified)},
    {"body_hash", "body_hash", F_HASH, offsetof(hv_store_entry_t, body_hash)},
    {"title", "title", F_TEXT, offsetof(hv_store_entry_t, title)},
    /* As text in the store: reading an entry (once per URL, on the loop) then copies it
     * instead of parsing and printing it again. */
    {"fields", "fields", F_JSON, offsetof(hv_store_entry_t, fields)},
    {"content_type", "content_type", F_TEXT, offsetof(hv_store_entry_t, content_type)},
    {"charset", "charset", F_TEXT, offsetof(hv_store_entry_t, charset)},
    {"bytes", "bytes", F_COUNT, offsetof(hv_store_entry_t, bytes)},
    {"status", "http_status", F_STATUS, offsetof(hv_store_entry_t, http_status)},
    {"max_age", "max_age", F_COUNT, offsetof(hv_store_entry_t, max_age_s)},
    {"rules", "rules", F_FP, offsetof(hv_store_entry_t, rules_fp)},
    {"fetched_at", "fetched_at", F_TIME, offsetof(hv_store_entry_t, fetched_at_ms)},
    {"modified_at", "modified_at", F_TIME, offsetof(hv_store_entry_t, modified_at_ms)},
};

#define FIELD(e, i, type) ((type *)(void *)((char *)(e) + entry_fields[i].off))
#define CFIELD(e, i, type) ((type const *)(const void *)((const char *)(e) + entry_fields[i].off))

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

/* As people see it: text from the network may be any bytes (an ETag with Latin-1 in it) and
 * is stored as it came, to be sent back as it came; shown, it is valid UTF-8, like a record. */
static void add_shown_str(cJSON *o, const char *k, const char *v)
{
    char *clean = NULL;
    if (v != NULL && !hv_utf8_valid(v, strlen(v)))
        clean = hv_utf8_sanitize(v, strlen(v), NULL);
    add_str(o, k, clean != NULL ? clean : v);
    free(clean);
}

static void add_num(cJSON *o, const char *k, double v)
{
    if (cJSON_AddNumberToObject(o, k, v) == NULL)
        store_oom();
}

/* Add the fields of `e` that are present to `o`, in the store's form or as shown. */
static void add_fields(cJSON *o, const hv_store_entry_t *e, int shown)
{
    for (size_t i = 0; i < HV_ARRAY_SIZE(entry_fields); i++) {
        const char *k = shown ? entry_fields[i].shown : entry_fields[i].stored;
        char text[32];
        switch (entry_fields[i].kind) {
        case F_TEXT:
            if (shown)
                add_shown_str(o, k, *CFIELD(e, i, char *));
            else
                add_str(o, k, *CFIELD(e, i, char *));
            break;
        case F_HASH:
            if (CFIELD(e, i, char)[0] != '\0')
                add_str(o, k, CFIELD(e, i, char));
            break;
        case F_JSON:
            if (!shown || *CFIELD(e, i, char *) == NULL) {
                add_str(o, k, *CFIELD(e, i, char *));
            } else {
                /* It was checked when read (fields_usable): a JSON object in UTF-8. */
                cJSON *raw = cJSON_CreateRaw(*CFIELD(e, i, char *));
                if (raw == NULL || !cJSON_AddItemToObject(o, k, raw))
                    store_oom();
            }
            break;
        case F_COUNT:
            if (*CFIELD(e, i, int64_t) >= 0)
                add_num(o, k, (double)*CFIELD(e, i, int64_t));
            break;
        case F_STATUS:
            if (*CFIELD(e, i, int) > 0)
                add_num(o, k, *CFIELD(e, i, int));
            break;
        case F_FP:
            snprintf(text, sizeof(text), "%016" PRIx64, *CFIELD(e, i, uint64_t));
            add_str(o, k, text);
            break;
        case F_TIME:
            if (!shown) {
                add_num(o, k, (double)*CFIELD(e, i, int64_t));
            } else {
                hv_format_rfc3339_ms(text, *CFIELD(e, i, int64_t));
                add_str(o, k, text);
            }
            break;
        }
    }
}

static char *print(cJSON *o)
{
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (text == NULL)
        store_oom();
    return text;
}

static char *encode(const hv_store_entry_t *e)
{
    cJSON *o = cJSON_CreateObject();
    if (o == NULL)
        store_oom();
    add_fields(o, e, 0);
    return print(o);
}

char *hv_store_entry_show(const char *key, const hv_store_entry_t *e)
{
    cJSON *o = cJSON_CreateObject();
    if (o == NULL)
        store_oom();
    add_str(o, "url_key", key);
    add_fields(o, e, 1);
    char *text = print(o);
    char *copy = hv_xstrdup(text);
    cJSON_free(text);
    return copy;
}

static int64_t get_num(const cJSON *v, int64_t dflt)
{
    return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : dflt;
}

/* Fields go into records as they are: they must be a JSON object as cJSON prints one (no
 * raw control characters), in valid UTF-8, whatever the file holds. */
static int fields_usable(const char *text)
{
    size_t len = strlen(text);
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)text[i] < 0x20)
            return 0;
    if (!hv_utf8_valid(text, len))
        return 0;
    cJSON *f = cJSON_ParseWithLength(text, len);
    int usable = cJSON_IsObject(f);
    cJSON_Delete(f);
    return usable;
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
    for (size_t i = 0; i < HV_ARRAY_SIZE(entry_fields); i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, entry_fields[i].stored);
        switch (entry_fields[i].kind) {
        case F_TEXT:
        case F_JSON:
            *FIELD(e, i, char *) = cJSON_IsString(v) ? hv_xstrdup(v->valuestring) : NULL;
            break;
        case F_HASH:
            if (cJSON_IsString(v) && strlen(v->valuestring) < sizeof(e->body_hash))
                snprintf(FIELD(e, i, char), sizeof(e->body_hash), "%s", v->valuestring);
            break;
        case F_COUNT:
            *FIELD(e, i, int64_t) = get_num(v, -1);
            break;
        case F_STATUS:
            *FIELD(e, i, int) = (int)get_num(v, 0);
            break;
        case F_FP:
            if (cJSON_IsString(v))
                *FIELD(e, i, uint64_t) = strtoull(v->valuestring, NULL, 16);
            break;
        case F_TIME:
            *FIELD(e, i, int64_t) = get_num(v, 0);
            break;
        }
    }
    /* An entry without modified_at last changed when it was fetched. */
    if (!cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(o, "modified_at")))
        e->modified_at_ms = e->fetched_at_ms;
    cJSON_Delete(o);
    if (e->fields != NULL && !fields_usable(e->fields)) {
        hv_store_entry_clear(e);
        return UV_EINVAL;
    }
    return 0;
}

/* ---- TLS sessions: binary values under HV_STORE_SESSION_PREFIX ---- */

#define SESSION_PREFIX_LEN (sizeof(HV_STORE_SESSION_PREFIX) - 1)
/* "HVTS", format 1, three zero bytes, then saved_at, expires_at and trust (big-endian). */
#define SESSION_MAGIC "HVTS\x01\0\0\0"
#define SESSION_HEADER 32

static int is_session_key(const MDB_val *k)
{
    return k->mv_size > SESSION_PREFIX_LEN &&
           memcmp(k->mv_data, HV_STORE_SESSION_PREFIX, SESSION_PREFIX_LEN) == 0;
}

static void put_be64(unsigned char *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        p[i] = (unsigned char)v;
}

static uint64_t get_be64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

/* The header of a session value into *out (data, len point into `v`): 0, or UV_EINVAL for
 * what is no session of this format. */
static int session_decode(const MDB_val *v, hv_store_session_t *out)
{
    const unsigned char *p = v->mv_data;
    memset(out, 0, sizeof(*out));
    if (v->mv_size <= SESSION_HEADER || v->mv_size - SESSION_HEADER > HV_STORE_SESSION_MAX ||
        memcmp(p, SESSION_MAGIC, 8) != 0)
        return UV_EINVAL;
    out->saved_at_ms = (int64_t)get_be64(p + 8);
    out->expires_at_ms = (int64_t)get_be64(p + 16);
    out->trust = get_be64(p + 24);
    out->data = p + SESSION_HEADER;
    out->len = v->mv_size - SESSION_HEADER;
    if (out->saved_at_ms <= 0 || out->expires_at_ms <= out->saved_at_ms ||
        out->expires_at_ms - out->saved_at_ms > HV_STORE_SESSION_MAX_AGE_MS)
        return UV_EINVAL;
    return 0;
}

/* Whether a session value is to go: undecodable, or expired at `now_ms`. */
static int session_stale(const MDB_val *v, int64_t now_ms)
{
    hv_store_session_t s;
    return session_decode(v, &s) != 0 || now_ms >= s.expires_at_ms;
}

/* The key of the session `name` into `key` (HV_STORE_KEY_MAX + 1 bytes): its length, or 0
 * when the name is empty or too long. */
static size_t session_key(const char *name, char *key)
{
    size_t n = strlen(name);
    if (n == 0 || SESSION_PREFIX_LEN + n > HV_STORE_KEY_MAX)
        return 0;
    memcpy(key, HV_STORE_SESSION_PREFIX, SESSION_PREFIX_LEN);
    memcpy(key + SESSION_PREFIX_LEN, name, n);
    return SESSION_PREFIX_LEN + n;
}

int hv_store_session_get(hv_store_t *st, const char *name, int64_t now_ms, unsigned char *buf,
                         size_t cap, hv_store_session_t *out)
{
    char key[HV_STORE_KEY_MAX + 1];
    MDB_txn *txn;
    MDB_val k = {session_key(name, key), key}, v;
    memset(out, 0, sizeof(*out));
    if (k.mv_size == 0)
        return UV_ENOENT;
    int rc = mdb_txn_begin(st->env, NULL, MDB_RDONLY, &txn);
    if (rc != 0)
        return from_mdb(rc);
    rc = mdb_get(txn, st->dbi, &k, &v);
    if (rc == 0) {
        hv_store_session_t s;
        if (session_decode(&v, &s) != 0 || now_ms >= s.expires_at_ms || s.len > cap) {
            rc = MDB_NOTFOUND;
        } else {
            memcpy(buf, s.data, s.len);
            *out = s;
            out->data = buf;
            out->name = name;
        }
    }
    mdb_txn_abort(txn);
    return from_mdb(rc);
}

/* What the sweep keeps of a session it may still drop for room. */
typedef struct {
    int64_t saved_at_ms;
    size_t len;
    char key[HV_STORE_KEY_MAX];
} kept_session_t;

static int by_saved_at(const void *a, const void *b)
{
    const kept_session_t *x = a, *y = b;
    return (x->saved_at_ms > y->saved_at_ms) - (x->saved_at_ms < y->saved_at_ms);
}

/* In `txn`: drop the expired and undecodable sessions and, beyond `keep_max`, the oldest.
 * LMDB's code; *dropped counts. */
static int session_sweep(MDB_txn *txn, MDB_dbi dbi, int64_t now_ms, size_t keep_max,
                         uint64_t *dropped)
{
    MDB_cursor *cur;
    MDB_val k = {SESSION_PREFIX_LEN, (void *)(uintptr_t)HV_STORE_SESSION_PREFIX}, v;
    kept_session_t *kept = NULL;
    size_t nkept = 0, capkept = 0;
    int rc = mdb_cursor_open(txn, dbi, &cur);
    if (rc != 0)
        return rc;
    /* Session keys sort together: from the prefix on, until a key without it. After
     * mdb_cursor_del the cursor stands on the next key, which MDB_NEXT returns. */
    MDB_cursor_op op = MDB_SET_RANGE;
    while ((rc = mdb_cursor_get(cur, &k, &v, op)) == 0 && is_session_key(&k)) {
        hv_store_session_t s;
        op = MDB_NEXT;
        if (session_decode(&v, &s) != 0 || now_ms >= s.expires_at_ms) {
            if ((rc = mdb_cursor_del(cur, 0)) != 0)
                break;
            (*dropped)++;
            continue;
        }
        if (nkept == capkept) {
            capkept = capkept > 0 ? capkept * 2 : 64;
            kept = hv_xrealloc(kept, capkept * sizeof(*kept));
        }
        kept[nkept].saved_at_ms = s.saved_at_ms;
        kept[nkept].len = k.mv_size;
        memcpy(kept[nkept].key, k.mv_data, k.mv_size);
        nkept++;
    }
    mdb_cursor_close(cur);
    if (rc == MDB_NOTFOUND || rc == 0)
        rc = 0;
    if (rc == 0 && nkept > keep_max) {
        qsort(kept, nkept, sizeof(*kept), by_saved_at);
        for (size_t i = 0; i < nkept - keep_max && rc == 0; i++) {
            MDB_val dk = {kept[i].len, kept[i].key};
            rc = mdb_del(txn, dbi, &dk, NULL);
            if (rc == 0)
                (*dropped)++;
            else if (rc == MDB_NOTFOUND)
                rc = 0;
        }
    }
    free(kept);
    return rc;
}

int hv_store_sessions_put(hv_store_t *st, const hv_store_session_t *s, size_t n, int64_t now_ms,
                          size_t keep_max, uint64_t *dropped)
{
    MDB_txn *txn;
    uint64_t gone = 0;
    int disk;
    unsigned char *value = hv_xmalloc(SESSION_HEADER + HV_STORE_SESSION_MAX);
    int rc = mdb_txn_begin(st->env, NULL, 0, &txn);
    if (dropped != NULL)
        *dropped = 0;
    if (rc != 0)
        goto out;
    for (size_t i = 0; i < n && rc == 0; i++) {
        char key[HV_STORE_KEY_MAX + 1];
        MDB_val k = {session_key(s[i].name, key), key};
        if (k.mv_size == 0 || s[i].len == 0 || s[i].len > HV_STORE_SESSION_MAX ||
            s[i].saved_at_ms <= 0 || s[i].expires_at_ms <= s[i].saved_at_ms ||
            s[i].expires_at_ms - s[i].saved_at_ms > HV_STORE_SESSION_MAX_AGE_MS)
            continue;
        memcpy(value, SESSION_MAGIC, 8);
        put_be64(value + 8, (uint64_t)s[i].saved_at_ms);
        put_be64(value + 16, (uint64_t)s[i].expires_at_ms);
        put_be64(value + 24, s[i].trust);
        memcpy(value + SESSION_HEADER, s[i].data, s[i].len);
        MDB_val v = {SESSION_HEADER + s[i].len, value};
        rc = mdb_put(txn, st->dbi, &k, &v, 0);
    }
    if (rc == 0)
        rc = session_sweep(txn, st->dbi, now_ms, keep_max, &gone);
    if (rc != 0)
        mdb_txn_abort(txn);
    else
        rc = mdb_txn_commit(txn);
    if (rc == 0 && dropped != NULL)
        *dropped = gone;
out:
    explicit_bzero(value, SESSION_HEADER + HV_STORE_SESSION_MAX);
    free(value);
    return write_error(st, rc, &disk);
}

/* Sessions in `txn` (a range of the sorted keys, bounded by the sweep's keep_max). */
static int count_sessions(MDB_txn *txn, MDB_dbi dbi, uint64_t *n)
{
    MDB_cursor *cur;
    MDB_val k = {SESSION_PREFIX_LEN, (void *)(uintptr_t)HV_STORE_SESSION_PREFIX}, v;
    *n = 0;
    int rc = mdb_cursor_open(txn, dbi, &cur);
    if (rc != 0)
        return rc;
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); rc == 0 && is_session_key(&k);
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT))
        (*n)++;
    mdb_cursor_close(cur);
    return rc == MDB_NOTFOUND ? 0 : rc;
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

/* Apply `ops` in one transaction: 0, or LMDB's code (or the errno it passes through). */
static int write_txn(hv_store_t *st, const hv_store_op_t *ops, size_t n)
{
    MDB_txn *txn;
    int rc = mdb_txn_begin(st->env, NULL, 0, &txn);
    if (rc != 0)
        return rc;
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
        return rc;
    }
    return mdb_txn_commit(txn);
}

int hv_store_write(hv_store_t *st, const hv_store_op_t *ops, size_t n)
{
    int disk;
    return write_error(st, write_txn(st, ops, n), &disk);
}

int hv_store_write_fitting(hv_store_t *st, const hv_store_op_t *ops, size_t n,
                           hv_store_written_t *out)
{
    size_t piece = n;
    memset(out, 0, sizeof(*out));
    while (out->written < n) {
        size_t k = piece < n - out->written ? piece : n - out->written;
        int disk, rc = write_error(st, write_txn(st, ops + out->written, k), &disk);
        if (rc == 0) {
            out->written += k;
            out->commits++;
            continue;
        }
        out->disk_full |= disk;
        /* A transaction refused for the map's bound wrote nothing: a smaller one may fit
         * (halving finds the most that does in a few tries). So may one refused for the
         * disk: the pages it wrote past the end stay in the file, and the next transaction
         * writes its pages there again. */
        if (rc == UV_ENOSPC && k > 1) {
            piece = k / 2;
            continue;
        }
        /* After a full disk, what fails next fails of it. */
        return out->disk_full ? UV_ENOSPC : rc;
    }
    return 0;
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
    int64_t now_ms = hv_now_unix_ms();
    while ((rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) == 0) {
        if (is_session_key(&k)) {
            hv_store_session_t s;
            if (session_stale(&v, now_ms) ||
                (session_decode(&v, &s) == 0 && s.saved_at_ms < before_unix_ms))
                if ((rc = mdb_cursor_del(cur, 0)) != 0)
                    break;
            continue;
        }
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
    uint64_t sessions = 0;
    rc = mdb_stat(txn, st->dbi, &ms);
    if (rc == 0)
        rc = count_sessions(txn, st->dbi, &sessions);
    mdb_txn_abort(txn);
    if (rc != 0 || (rc = mdb_env_info(st->env, &info)) != 0)
        return from_mdb(rc);
    out->sessions = sessions;
    out->entries = ms.ms_entries >= sessions ? ms.ms_entries - sessions : 0;
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

/* ---- verify: every page, in a child process ---- */

/* What the walking child leaves its parent, in memory they share. The counts grow as the walk
 * goes, so that one that dies still says how far it got. */
typedef struct {
    volatile uint64_t entries, undecodable, sessions, pages, free_pages;
    volatile int finished;    /* the walk reached its end (what says whether it found damage) */
    volatile int unopenable;  /* LMDB would not open the store: no walk (what says why) */
    char what[400];
} walk_report_t;

static volatile unsigned char touched;

/* Read a byte of every page of [p, p+len) and its last: a page past the end of the file
 * faults here, in the child. */
static void touch(const void *p, size_t len, size_t page)
{
    const volatile unsigned char *b = p;
    unsigned char x = 0;
    for (size_t i = 0; i < len; i += page)
        x ^= b[i];
    if (len > 0)
        x ^= b[len - 1];
    touched = x;
}

__attribute__((format(printf, 2, 3))) static void walk_found(walk_report_t *r, const char *fmt,
                                                             ...)
{
    if (r->what[0] == '\0') {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->what, sizeof(r->what), fmt, ap);
        va_end(ap);
    }
}

/* Every entry, then every record of the free-page list, in one read transaction. */
static void walk_trees(MDB_env *env, walk_report_t *r)
{
    MDB_txn *txn = NULL;
    MDB_cursor *cur = NULL;
    MDB_envinfo info;
    MDB_stat main_st, free_st;
    MDB_dbi dbi;
    MDB_val k, v;
    int rc, counted = 0;

    /* The snapshot's last page is the newest meta page's when no commit came in between. */
    for (int attempt = 0; attempt < 10 && !counted; attempt++) {
        if (txn != NULL)
            mdb_txn_abort(txn);
        if ((rc = mdb_txn_begin(env, NULL, MDB_RDONLY, &txn)) != 0 ||
            (rc = mdb_env_info(env, &info)) != 0) {
            walk_found(r, "LMDB cannot read it: %s", mdb_strerror(rc));
            txn = NULL;
            goto out;
        }
        counted = info.me_last_txnid == mdb_txn_id(txn);
    }
    if ((rc = mdb_dbi_open(txn, NULL, 0, &dbi)) != 0 || (rc = mdb_stat(txn, dbi, &main_st)) != 0 ||
        (rc = mdb_stat(txn, 0, &free_st)) != 0 || (rc = mdb_cursor_open(txn, dbi, &cur)) != 0) {
        walk_found(r, "LMDB cannot read it: %s", mdb_strerror(rc));
        goto out;
    }
    r->pages = (uint64_t)info.me_last_pgno + 1;
    while ((rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) == 0) {
        hv_store_entry_t e;
        touch(k.mv_data, k.mv_size, main_st.ms_psize);
        touch(v.mv_data, v.mv_size, main_st.ms_psize);
        if (is_session_key(&k))
            r->sessions++; /* one that does not decode is dropped by the next sweep */
        else if (decode(v.mv_data, v.mv_size, &e) == 0)
            hv_store_entry_clear(&e);
        else
            r->undecodable++;
        r->entries++;
    }
    if (rc != MDB_NOTFOUND) {
        walk_found(r, "LMDB stopped the walk through the entries after %" PRIu64 " of them: %s",
                   r->entries, mdb_strerror(rc));
        goto out;
    }
    if (r->entries != main_st.ms_entries) {
        walk_found(r, "the walk found %" PRIu64 " entries, the store says it holds %zu",
                   r->entries, main_st.ms_entries);
        goto out;
    }
    mdb_cursor_close(cur);
    if ((rc = mdb_cursor_open(txn, 0, &cur)) != 0) {
        cur = NULL;
        walk_found(r, "LMDB cannot read its free-page list: %s", mdb_strerror(rc));
        goto out;
    }
    /* A record: a count, then that many page numbers (as storecheck.c reads them too). */
    while ((rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) == 0) {
        const unsigned char *ids = v.mv_data;
        uint64_t n = 0, pgno;
        touch(v.mv_data, v.mv_size, free_st.ms_psize);
        if (v.mv_size >= 8)
            memcpy(&n, ids, 8);
        if (v.mv_size < 8 || n > v.mv_size / 8 - 1) {
            walk_found(r, "a record of the free-page list is malformed");
            goto out;
        }
        for (uint64_t i = 1; i <= n; i++) {
            memcpy(&pgno, ids + 8 * i, 8);
            if (pgno < 2 || pgno >= r->pages) {
                walk_found(r, "the free-page list names page %" PRIu64 ", of %" PRIu64 " in use",
                           pgno, r->pages);
                goto out;
            }
        }
        r->free_pages += n;
    }
    if (rc != MDB_NOTFOUND) {
        walk_found(r, "LMDB stopped the walk through the free-page list: %s", mdb_strerror(rc));
        goto out;
    }
    /* Every page but the two meta pages is in one tree or on the free-page list. */
    uint64_t in_trees = main_st.ms_branch_pages + main_st.ms_leaf_pages +
                        main_st.ms_overflow_pages + free_st.ms_branch_pages +
                        free_st.ms_leaf_pages + free_st.ms_overflow_pages;
    if (counted && in_trees + r->free_pages + 2 != r->pages)
        walk_found(r,
                   "its pages do not add up: %" PRIu64 " in the trees, %" PRIu64
                   " free and 2 meta pages, but %" PRIu64 " in use",
                   in_trees, (uint64_t)r->free_pages, (uint64_t)r->pages);
    r->finished = 1;
out:
    if (cur != NULL)
        mdb_cursor_close(cur);
    if (txn != NULL)
        mdb_txn_abort(txn);
}

/* The child: a read-only environment, and the walk. Never returns. */
static void walk_child(const char *dir, uint64_t map_bytes, walk_report_t *r)
{
    struct rlimit no_core = {0, 0};
    MDB_env *env = NULL;
    int rc;
    /* The faults looked for are reported by the parent: no core dump, no handler of ours. */
    setrlimit(RLIMIT_CORE, &no_core);
    signal(SIGBUS, SIG_DFL);
    signal(SIGSEGV, SIG_DFL);
    if ((rc = mdb_env_create(&env)) != 0 ||
        (rc = mdb_env_set_mapsize(env, (size_t)map_bytes)) != 0 ||
        (rc = mdb_env_set_maxreaders(env, 126)) != 0 ||
        (rc = mdb_env_open(env, dir, MDB_RDONLY | MDB_NOTLS, 0644)) != 0) {
        r->unopenable = 1;
        walk_found(r, "%s", mdb_strerror(rc));
    } else
        walk_trees(env, r);
    if (env != NULL)
        mdb_env_close(env);
    _exit(0);
}

/* A child killed inside its read transaction left its reader slot: clear it, or it would keep
 * writers from reusing the pages it saw. */
static void clear_dead_readers(const char *dir, uint64_t map_bytes)
{
    MDB_env *env = NULL;
    int dead = 0;
    if (mdb_env_create(&env) == 0 && mdb_env_set_mapsize(env, (size_t)map_bytes) == 0 &&
        mdb_env_set_maxreaders(env, 126) == 0 &&
        mdb_env_open(env, dir, MDB_RDONLY | MDB_NOTLS, 0644) == 0)
        mdb_reader_check(env, &dead);
    if (env != NULL)
        mdb_env_close(env);
}

static const char *signal_meaning(int sig)
{
    switch (sig) {
    case SIGBUS:
        return "SIGBUS (a page past the end of the file)";
    case SIGSEGV:
        return "SIGSEGV (a page that points outside the file)";
    case SIGABRT:
        return "SIGABRT (an LMDB assertion)";
    default:
        return "a signal";
    }
}

int hv_store_verify(const char *dir, hv_store_verify_t *out, char *err, size_t errcap)
{
    hv_storecheck_t check;
    uint64_t map_bytes = 0;
    int rc, status = 0;
    walk_report_t *r = MAP_FAILED;
    pid_t pid;

    memset(out, 0, sizeof(*out));
    if ((rc = existing_map(dir, &map_bytes, err, errcap)) != 0 ||
        (rc = check_data_file(dir, &check, err, errcap)) != 0)
        goto out;
    out->pages = check.last_page + 1;
    if (check.verdict != HV_STORECHECK_SOUND) {
        snprintf(out->what, sizeof(out->what), "%s/data.mdb: %s", dir, check.what);
        goto out;
    }
    r = mmap(NULL, sizeof(*r), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (r == MAP_FAILED) {
        rc = hv_errf(err, errcap, uv_translate_sys_error(errno),
                     "cannot verify the state store %s: mmap: %s", dir, strerror(errno));
        goto out;
    }
    memset(r, 0, sizeof(*r));
    fflush(NULL);
    if ((pid = fork()) < 0) {
        rc = hv_errf(err, errcap, uv_translate_sys_error(errno),
                     "cannot verify the state store %s: fork: %s", dir, strerror(errno));
        goto out;
    }
    if (pid == 0)
        walk_child(dir, map_bytes, r);
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            rc = hv_errf(err, errcap, uv_translate_sys_error(errno),
                         "cannot verify the state store %s: waitpid: %s", dir, strerror(errno));
            goto out;
        }
    }
    out->entries = r->entries - r->sessions;
    out->sessions = r->sessions;
    out->undecodable = r->undecodable;
    out->free_pages = r->free_pages;
    if (r->pages > 0)
        out->pages = r->pages;
    if (WIFSIGNALED(status)) {
        out->signal = WTERMSIG(status);
        snprintf(out->what, sizeof(out->what),
                 "the walk through its pages was killed after %" PRIu64 " entries by %s",
                 out->entries, signal_meaning(out->signal));
        clear_dead_readers(dir, map_bytes);
    } else if (r->unopenable) {
        /* Not a finding about the pages: the store could not be read at all. */
        rc = hv_errf(err, errcap, UV_EIO, "cannot open the state store %s to verify it: %s", dir,
                     r->what);
    } else if (!r->finished || r->what[0] != '\0') {
        snprintf(out->what, sizeof(out->what), "%s",
                 r->what[0] != '\0' ? r->what : "the walk through its pages did not finish");
    } else {
        out->sound = 1;
    }
out:
    if (r != MAP_FAILED)
        munmap(r, sizeof(*r));
    return rc;
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
