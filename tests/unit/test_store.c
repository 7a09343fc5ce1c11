/*
 * test_store.c: the per-URL state store on a real LMDB environment in the test's directory.
 */
#include <cjson/cJSON.h>
#include <lmdb.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include "harvestd/common.h"
#include "harvestd/store.h"
#include "harvestd/storecheck.h"
#include "harvestd/utf8.h"
#include "test.h"

static hv_store_t *open_store(const char *name, uint64_t max_bytes)
{
    char err[1024];
    hv_store_t *st = NULL;
    int rc = hv_store_open(hv_test_tmppath(name), max_bytes, &st, err, sizeof(err));
    if (rc != 0)
        fprintf(stderr, "%s\n", err);
    ASSERT_OK(rc);
    return st;
}

static hv_store_entry_t sample(int64_t fetched_at)
{
    static char url[] = "http://a.test/final", etag[] = "\"v1\"",
                lm[] = "Wed, 02 Dec 2026 10:00:00 GMT", title[] = "T\xc3\xa9tre",
                fields[] = "{\"a\":[1,\"x\"],\"b\":null}", ct[] = "text/html",
                cs[] = "utf-8";
    hv_store_entry_t e;
    memset(&e, 0, sizeof(e));
    e.url = url;
    e.etag = etag;
    e.last_modified = lm;
    snprintf(e.body_hash, sizeof(e.body_hash), "%064d", 7);
    e.title = title;
    e.fields = fields;
    e.content_type = ct;
    e.charset = cs;
    e.bytes = 1234;
    e.rules_fp = UINT64_C(0xfedcba9876543210); /* above 2^53: kept exactly */
    e.fetched_at_ms = fetched_at;
    e.modified_at_ms = fetched_at - 5000;
    return e;
}

static void put(hv_store_t *st, const char *key, const hv_store_entry_t *e)
{
    hv_store_op_t op = {key, strlen(key), e};
    ASSERT_OK(hv_store_write(st, &op, 1));
}

TEST_IMPL(store_keeps_every_field_of_an_entry)
{
    hv_store_t *st = open_store("state", 16 << 20);
    hv_store_entry_t in = sample(1796210000123), out;
    put(st, "http://a.test/", &in);
    ASSERT_OK(hv_store_get(st, "http://a.test/", 14, &out));
    ASSERT_STR_EQ(in.url, out.url);
    ASSERT_STR_EQ(in.etag, out.etag);
    ASSERT_STR_EQ(in.last_modified, out.last_modified);
    ASSERT_STR_EQ(in.body_hash, out.body_hash);
    ASSERT_STR_EQ(in.title, out.title);
    ASSERT_STR_EQ(in.fields, out.fields);
    ASSERT_STR_EQ(in.content_type, out.content_type);
    ASSERT_STR_EQ(in.charset, out.charset);
    ASSERT_EQ(in.bytes, out.bytes);
    ASSERT(in.rules_fp == out.rules_fp);
    ASSERT_EQ(in.fetched_at_ms, out.fetched_at_ms);
    ASSERT_EQ(in.modified_at_ms, out.modified_at_ms);
    hv_store_entry_clear(&out);
    /* Absent fields stay absent. */
    hv_store_entry_t bare;
    memset(&bare, 0, sizeof(bare));
    bare.bytes = -1;
    put(st, "http://b.test/", &bare);
    ASSERT_OK(hv_store_get(st, "http://b.test/", 14, &out));
    ASSERT_NULL(out.url);
    ASSERT_NULL(out.etag);
    ASSERT_NULL(out.fields);
    ASSERT_EQ(-1, out.bytes);
    ASSERT_STR_EQ("", out.body_hash);
    hv_store_entry_clear(&out);
    hv_store_close(st);
}

TEST_IMPL(store_misses_deletes_and_overlong_keys)
{
    hv_store_t *st = open_store("state", 16 << 20);
    hv_store_entry_t e = sample(1), out;
    ASSERT_EQ(UV_ENOENT, hv_store_get(st, "http://none.test/", 17, &out));
    put(st, "k", &e);
    hv_store_op_t del = {"k", 1, NULL};
    ASSERT_OK(hv_store_write(st, &del, 1));
    ASSERT_EQ(UV_ENOENT, hv_store_get(st, "k", 1, &out));
    ASSERT_OK(hv_store_write(st, &del, 1)); /* deleting what is not there is fine */
    char longkey[HV_STORE_KEY_MAX + 2];
    memset(longkey, 'x', sizeof(longkey) - 1);
    longkey[sizeof(longkey) - 1] = '\0';
    put(st, longkey, &e); /* not stored, not an error */
    ASSERT_EQ(UV_ENOENT, hv_store_get(st, longkey, strlen(longkey), &out));
    hv_store_stats_t s;
    ASSERT_OK(hv_store_stats(st, &s));
    ASSERT_EQ(0, s.entries);
    hv_store_close(st);
}

/* A raw value under `key`, written with LMDB itself while the store is closed. */
static void put_raw(const char *name, const char *key, const char *value)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    MDB_val k = {strlen(key), (void *)(uintptr_t)key};
    MDB_val v = {strlen(value), (void *)(uintptr_t)value};
    ASSERT_OK(mdb_env_create(&env));
    ASSERT_OK(mdb_env_set_mapsize(env, 16 << 20));
    ASSERT_OK(mdb_env_open(env, hv_test_tmppath(name), MDB_NOTLS, 0644));
    ASSERT_OK(mdb_txn_begin(env, NULL, 0, &txn));
    ASSERT_OK(mdb_dbi_open(txn, NULL, 0, &dbi));
    ASSERT_OK(mdb_put(txn, dbi, &k, &v, 0));
    ASSERT_OK(mdb_txn_commit(txn));
    mdb_env_close(env);
}

TEST_IMPL(store_delete_tells_whether_there_was_an_entry)
{
    hv_store_t *st = open_store("state", 16 << 20);
    hv_store_entry_t e = sample(7), out;
    put(st, "http://a.test/", &e);
    put(st, "http://b.test/", &e);
    ASSERT_OK(hv_store_delete(st, "http://a.test/", 14));
    ASSERT_EQ(UV_ENOENT, hv_store_get(st, "http://a.test/", 14, &out));
    ASSERT_EQ(UV_ENOENT, hv_store_delete(st, "http://a.test/", 14));
    ASSERT_EQ(UV_ENOENT, hv_store_delete(st, "", 0));
    char longkey[HV_STORE_KEY_MAX + 2];
    memset(longkey, 'x', sizeof(longkey) - 1);
    longkey[sizeof(longkey) - 1] = '\0';
    ASSERT_EQ(UV_ENOENT, hv_store_delete(st, longkey, strlen(longkey)));
    /* The other entry is untouched. */
    ASSERT_OK(hv_store_get(st, "http://b.test/", 14, &out));
    hv_store_entry_clear(&out);
    hv_store_stats_t s;
    ASSERT_OK(hv_store_stats(st, &s));
    ASSERT_EQ(1, s.entries);
    hv_store_close(st);

    /* A value that is not an entry reads as absent, but is there to delete. */
    put_raw("state", "http://c.test/", "not json");
    st = open_store("state", 16 << 20);
    ASSERT_EQ(UV_ENOENT, hv_store_get(st, "http://c.test/", 14, &out));
    ASSERT_OK(hv_store_delete(st, "http://c.test/", 14));
    ASSERT_EQ(UV_ENOENT, hv_store_delete(st, "http://c.test/", 14));
    ASSERT_OK(hv_store_stats(st, &s));
    ASSERT_EQ(1, s.entries);
    hv_store_close(st);
}

TEST_IMPL(store_entries_survive_reopening)
{
    hv_store_t *st = open_store("state", 16 << 20);
    hv_store_entry_t e = sample(42), out;
    hv_store_op_t ops[3] = {{"a", 1, &e}, {"b", 1, &e}, {"c", 1, &e}};
    ASSERT_OK(hv_store_write(st, ops, 3));
    hv_store_close(st);
    st = open_store("state", 16 << 20);
    hv_store_stats_t s;
    ASSERT_OK(hv_store_stats(st, &s));
    ASSERT_EQ(3, s.entries);
    ASSERT_GT(s.bytes_used, 0);
    ASSERT_EQ(16 << 20, s.map_bytes);
    ASSERT_OK(hv_store_get(st, "b", 1, &out));
    ASSERT_EQ(42, out.fetched_at_ms);
    hv_store_entry_clear(&out);
    hv_store_close(st);
}

/* A full store refuses the whole transaction and stays readable. */
TEST_IMPL(store_bound_refuses_a_write_that_does_not_fit)
{
    hv_store_t *st = open_store("state", 1 << 20);
    hv_store_entry_t e = sample(1);
    char *big = hv_xmalloc(4096);
    memset(big, 'y', 4095);
    big[4095] = '\0';
    e.title = big;
    char key[32];
    int rc = 0, stored = 0;
    for (int i = 0; i < 10000 && rc == 0; i++) {
        snprintf(key, sizeof(key), "http://k.test/%d", i);
        hv_store_op_t op = {key, strlen(key), &e};
        rc = hv_store_write(st, &op, 1);
        stored += rc == 0;
    }
    ASSERT_EQ(UV_ENOSPC, rc);
    ASSERT_GT(stored, 10);
    hv_store_stats_t s;
    ASSERT_OK(hv_store_stats(st, &s));
    ASSERT_EQ((uint64_t)stored, s.entries);
    hv_store_entry_t out;
    ASSERT_OK(hv_store_get(st, "http://k.test/0", 15, &out));
    ASSERT_STR_EQ(big, out.title);
    hv_store_entry_clear(&out);
    /* Making room (a delete) lets writes in again. */
    hv_store_op_t del = {"http://k.test/0", 15, NULL};
    ASSERT_OK(hv_store_write(st, &del, 1));
    free(big);
    hv_store_close(st);
}

TEST_IMPL(store_prune_drops_entries_fetched_before)
{
    hv_store_t *st = open_store("state", 16 << 20);
    for (int i = 0; i < 10; i++) {
        char key[16];
        hv_store_entry_t e = sample(1000 * i);
        snprintf(key, sizeof(key), "u%d", i);
        put(st, key, &e);
    }
    uint64_t removed = 0;
    ASSERT_OK(hv_store_prune(st, 4500, &removed));
    ASSERT_EQ(5, removed); /* 0, 1000, ..., 4000 */
    hv_store_entry_t out;
    ASSERT_EQ(UV_ENOENT, hv_store_get(st, "u4", 2, &out));
    ASSERT_OK(hv_store_get(st, "u5", 2, &out));
    hv_store_entry_clear(&out);
    hv_store_stats_t s;
    ASSERT_OK(hv_store_stats(st, &s));
    ASSERT_EQ(5, s.entries);
    hv_store_close(st);
}

TEST_IMPL(store_that_is_not_lmdb_is_a_clear_error)
{
    const char *dir = hv_test_tmppath("junk");
    char path[1024], err[1024];
    ASSERT_OK(mkdir(dir, 0755));
    snprintf(path, sizeof(path), "%s/data.mdb", dir);
    char garbage[8192];
    memset(garbage, 0x5a, sizeof(garbage));
    hv_test_write_file(path, garbage, sizeof(garbage));
    hv_store_t *st = NULL;
    ASSERT_NE(0, hv_store_open(dir, 16 << 20, &st, err, sizeof(err)));
    ASSERT_NULL(st);
    ASSERT(strstr(err, dir) != NULL);
    ASSERT(strstr(err, "not a usable LMDB store") != NULL);
    ASSERT(strstr(err, "data.mdb") != NULL);
}

TEST_IMPL(store_fingerprint_is_stable_and_tells_texts_apart)
{
    ASSERT(hv_store_fingerprint("title", 5) == hv_store_fingerprint("title", 5));
    ASSERT(hv_store_fingerprint("a=h1", 4) != hv_store_fingerprint("a=h2", 4));
    ASSERT(hv_store_fingerprint("", 0) == UINT64_C(14695981039346656037));
}

/* Fields go into records as they are stored: an entry whose fields are no JSON object (a
 * damaged file) reads as no entry, never as a record that is not JSON. */
TEST_IMPL(store_entry_with_broken_fields_reads_as_absent)
{
    hv_store_t *st = open_store("state", 16 << 20);
    hv_store_entry_t in = sample(1796210000123), out;
    char bad[] = "{\"a\":";
    in.fields = bad;
    put(st, "http://a.test/bad", &in);
    ASSERT_EQ(UV_ENOENT, hv_store_get(st, "http://a.test/bad", 17, &out));
    char list[] = "[1]";
    in.fields = list;
    put(st, "http://a.test/list", &in);
    ASSERT_EQ(UV_ENOENT, hv_store_get(st, "http://a.test/list", 18, &out));
    hv_store_close(st);
}

TEST_IMPL(store_entry_body_hash_names_its_kind_and_tells_bodies_apart)
{
    char a[HV_STORE_ENTRY_HASH_MAX], b[HV_STORE_ENTRY_HASH_MAX], c[HV_STORE_ENTRY_HASH_MAX];
    hv_store_entry_body_hash("<p>one</p>", 10, a);
    hv_store_entry_body_hash("<p>one</p>", 10, b);
    hv_store_entry_body_hash("<p>onf</p>", 10, c);
    ASSERT_STR_EQ(a, b);
    ASSERT_EQ(1, strcmp(a, c) != 0);
    ASSERT_EQ(41, strlen(a));
    ASSERT_EQ(0, strncmp(a, "xxh3-128:", 9));
    hv_store_entry_body_hash("", 0, c);
    ASSERT_EQ(41, strlen(c));
}

/* ---- the data file checked before LMDB maps it (storecheck.h) ---- */

/* Offsets in a meta page of LMDB 0.9 on a 64-bit little-endian machine (storecheck.c). */
enum {
    OFF_MAGIC = 16,
    OFF_VERSION = 20,
    OFF_PAGE_SIZE = 40,
    OFF_FREE_DEPTH = 46,
    OFF_FREE_ROOT = 80,
    OFF_MAIN_DEPTH = 94,
    OFF_MAIN_ROOT = 128,
    OFF_LAST = 136,
    OFF_TXNID = 144,
};

static uint64_t file_u64(const char *path, uint64_t off, int width)
{
    unsigned char b[8] = {0};
    FILE *f = fopen(path, "rb");
    ASSERT_NOT_NULL(f);
    ASSERT_OK(fseek(f, (long)off, SEEK_SET));
    ASSERT_EQ(1, fread(b, (size_t)width, 1, f));
    fclose(f);
    uint64_t v = 0;
    for (int i = width - 1; i >= 0; i--)
        v = v << 8 | b[i];
    return v;
}

static void file_put(const char *path, uint64_t off, int width, uint64_t v)
{
    unsigned char b[8];
    for (int i = 0; i < width; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    FILE *f = fopen(path, "r+b");
    ASSERT_NOT_NULL(f);
    ASSERT_OK(fseek(f, (long)off, SEEK_SET));
    ASSERT_EQ(1, fwrite(b, (size_t)width, 1, f));
    ASSERT_OK(fclose(f));
}

/* A store of `n` entries with 300-byte titles (a tree of depth 2), closed; its data.mdb. */
static const char *filled_store(const char *name, int n)
{
    static char path[1100];
    hv_store_t *st = open_store(name, 16 << 20);
    hv_store_entry_t e = sample(1);
    char title[301];
    memset(title, 't', 300);
    title[300] = '\0';
    e.title = title;
    hv_store_op_t *ops = hv_xcalloc((size_t)n, sizeof(*ops));
    char(*keys)[32] = hv_xcalloc((size_t)n, sizeof(*keys));
    for (int i = 0; i < n; i++) {
        snprintf(keys[i], sizeof(keys[i]), "http://k.test/%d", i);
        ops[i] = (hv_store_op_t){keys[i], strlen(keys[i]), &e};
    }
    ASSERT_OK(hv_store_write(st, ops, (size_t)n));
    free(ops);
    free(keys);
    hv_store_close(st);
    snprintf(path, sizeof(path), "%s/data.mdb", hv_test_tmppath(name));
    return path;
}

/* The meta page LMDB reads: the one of the later transaction. */
static int newest_meta(const char *path, uint32_t page_size)
{
    return file_u64(path, OFF_TXNID, 8) < file_u64(path, page_size + OFF_TXNID, 8);
}

/* Opening `name` fails with a message that names it, says `what` and how to discard it. */
static void assert_refused(const char *name, const char *what)
{
    char err[2048];
    hv_store_t *st = NULL;
    const char *dir = hv_test_tmppath(name);
    ASSERT_NE(0, hv_store_open(dir, 16 << 20, &st, err, sizeof(err)));
    ASSERT_NULL(st);
    if (strstr(err, what) == NULL)
        hv_test_fail(__FILE__, __LINE__, "\"%s\" not in: %s", what, err);
    ASSERT_NOT_NULL(strstr(err, dir));
    ASSERT_NOT_NULL(strstr(err, "/data.mdb and "));
    ASSERT_NOT_NULL(strstr(err, "/lock.mdb to start with an empty one"));
    ASSERT_NE(0, hv_store_open_existing(dir, &st, err, sizeof(err)));
    ASSERT_NULL(st);
}

/* LMDB opens a data.mdb cut short, and a lookup that reaches a page past its end dies of
 * SIGBUS: the store refuses it before LMDB maps it. */
TEST_IMPL(store_refuses_a_data_file_cut_short)
{
    const char *path = filled_store("state", 400);
    hv_storecheck_t c;
    struct stat sb;
    ASSERT_OK(stat(path, &sb));
    uint32_t page = (uint32_t)file_u64(path, OFF_PAGE_SIZE, 4);
    ASSERT_OK(hv_storecheck_file(path, &c));
    ASSERT_EQ(HV_STORECHECK_SOUND, c.verdict);
    ASSERT_EQ((uint64_t)sb.st_size / page - 1, c.last_page);
    ASSERT_GT(c.last_page, 20);
    /* To a third, to one page less, to a byte less: each loses pages in use. */
    off_t sizes[] = {sb.st_size / page / 3 * page, sb.st_size - page, sb.st_size - 1,
                     2 * (off_t)page, 100};
    for (size_t i = 0; i < HV_ARRAY_SIZE(sizes); i++) {
        ASSERT_OK(truncate(path, sizes[i]));
        ASSERT_OK(hv_storecheck_file(path, &c));
        ASSERT_EQ(HV_STORECHECK_DAMAGED, c.verdict);
        assert_refused("state", i < 4 ? "is damaged (" : "is damaged");
        assert_refused("state", sizes[i] > 100 ? "cut short" : "too short");
    }
}

/* Wrong numbers in a meta page, each on its own, from a sound store. */
TEST_IMPL(store_refuses_meta_pages_that_do_not_hold_together)
{
    const char *path = filled_store("state", 400);
    size_t len;
    char *sound = hv_test_read_file(path, &len);
    uint32_t page = (uint32_t)file_u64(path, OFF_PAGE_SIZE, 4);
    uint64_t m = (uint64_t)newest_meta(path, page) * page, old = page - m;
    uint64_t last = file_u64(path, m + OFF_LAST, 8), root = file_u64(path, m + OFF_MAIN_ROOT, 8);
    ASSERT_EQ(2, file_u64(path, m + OFF_MAIN_DEPTH, 2));
    struct {
        uint64_t off;
        int width;
        uint64_t value;
        const char *what;
    } cases[] = {
        {m + OFF_MAIN_ROOT, 8, 1, "names page 1 as the root of the entries"},
        {m + OFF_MAIN_ROOT, 8, last + 1, "as the root of the entries"},
        {m + OFF_MAIN_ROOT, 8, root == 2 ? 3 : 2, "is not a branch page"}, /* a leaf */
        {m + OFF_MAIN_DEPTH, 2, 0, "(depth 0)"},
        {m + OFF_MAIN_DEPTH, 2, 1, "is not a leaf page"},
        {m + OFF_FREE_DEPTH, 2, 1, "root of the free-page list (depth 1)"},
        {m + OFF_LAST, 8, (uint64_t)1 << 40, "cut short"},
        {m + OFF_LAST, 8, 0, "says its last page is 0"},
        {m + OFF_MAGIC, 4, 0, m == 0 ? "not a usable LMDB store" : "has no LMDB magic number"},
        {0 + OFF_MAGIC, 4, 0xdeadbeef, "not a usable LMDB store (" },
        {m + OFF_VERSION, 4, 2, "LMDB data format version 2"},
        {OFF_PAGE_SIZE, 4, 3000, "pages are 3000 bytes"},
        {page + OFF_PAGE_SIZE, 4, page * 2, "pages are"},
        {old + OFF_LAST, 8, last + 1, "older meta page"},
        {m + 10, 2, 0, "is not marked as a meta page"},
    };
    for (size_t i = 0; i < HV_ARRAY_SIZE(cases); i++) {
        hv_test_write_file(path, sound, len);
        file_put(path, cases[i].off, cases[i].width, cases[i].value);
        assert_refused("state", cases[i].what);
    }
    /* Put back, the store opens and reads. */
    hv_test_write_file(path, sound, len);
    hv_store_t *st = open_store("state", 16 << 20);
    hv_store_entry_t out;
    ASSERT_OK(hv_store_get(st, "http://k.test/399", 17, &out));
    hv_store_entry_clear(&out);
    hv_store_close(st);
    free(sound);
}

/* A transaction that puts a large value (an overflow run taken at the end of the file) and
 * deletes it again gives the run back unwritten: the file ends before its last page, and the
 * missing pages are on the free-page list. That store is sound and must open; cut one page
 * that is in use, and it must not. */
TEST_IMPL(store_accepts_a_file_that_ends_with_free_pages)
{
    const char *dir = hv_test_tmppath("state");
    static char big[40000];
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    MDB_val k = {3, (void *)(uintptr_t)"big"}, v = {sizeof(big), big};
    hv_store_t *st = open_store("state", 16 << 20);
    hv_store_entry_t e = sample(1), out;
    for (int i = 0; i < 50; i++) {
        char key[32];
        snprintf(key, sizeof(key), "http://k.test/%d", i);
        put(st, key, &e);
    }
    hv_store_close(st);
    /* Pages freed two transactions ago are reused: the put below looks for a run among them. */
    put_raw("state", "http://k.test/1", "{}");
    put_raw("state", "http://k.test/2", "{}");
    ASSERT_OK(mdb_env_create(&env));
    ASSERT_OK(mdb_env_set_mapsize(env, 16 << 20));
    ASSERT_OK(mdb_env_open(env, dir, MDB_NOTLS, 0644));
    ASSERT_OK(mdb_txn_begin(env, NULL, 0, &txn));
    ASSERT_OK(mdb_dbi_open(txn, NULL, 0, &dbi));
    ASSERT_OK(mdb_put(txn, dbi, &k, &v, 0));
    ASSERT_OK(mdb_del(txn, dbi, &k, NULL));
    ASSERT_OK(mdb_txn_commit(txn));
    mdb_env_close(env);

    char path[1100];
    struct stat sb;
    hv_storecheck_t c;
    snprintf(path, sizeof(path), "%s/data.mdb", dir);
    ASSERT_OK(stat(path, &sb));
    ASSERT_OK(hv_storecheck_file(path, &c));
    ASSERT_EQ(HV_STORECHECK_SOUND, c.verdict);
    uint64_t file_pages = (uint64_t)sb.st_size / c.page_size;
    ASSERT_GT(c.last_page + 1, file_pages + 5); /* LMDB 0.9.24 leaves the run unwritten */
    st = open_store("state", 16 << 20);
    ASSERT_OK(hv_store_get(st, "http://k.test/49", 16, &out));
    hv_store_entry_clear(&out);
    hv_store_close(st);
    hv_store_verify_t ver;
    char err[1024];
    ASSERT_OK(hv_store_verify(dir, &ver, err, sizeof(err)));
    ASSERT_EQ(1, ver.sound);
    ASSERT_EQ(50, ver.entries);
    ASSERT_EQ(c.last_page + 1, ver.pages);
    ASSERT_GT(ver.free_pages, c.last_page + 1 - file_pages - 1);
    /* One page less: a page in use is gone. */
    ASSERT_OK(truncate(path, sb.st_size - (off_t)c.page_size));
    assert_refused("state", "cut short");
}

/* ---- verify: every page, in a child process ---- */

/* A leaf page of the entries that is not their root (a tree of depth 2). */
static uint64_t some_leaf(const char *path, uint32_t page, uint64_t root)
{
    size_t len;
    char *data = hv_test_read_file(path, &len);
    uint64_t found = 0;
    for (uint64_t p = 2; found == 0 && (p + 1) * page <= len; p++) {
        const unsigned char *h = (const unsigned char *)data + p * page;
        if (p != root && (h[10] & 0x0f) == 0x02)
            found = p;
    }
    free(data);
    ASSERT_NE(0, found);
    return found;
}

TEST_IMPL(store_verify_reads_every_page_of_a_sound_store)
{
    const char *path = filled_store("state", 400);
    hv_store_verify_t v;
    hv_storecheck_t c;
    char err[1024];
    ASSERT_OK(hv_storecheck_file(path, &c));
    ASSERT_OK(hv_store_verify(hv_test_tmppath("state"), &v, err, sizeof(err)));
    ASSERT_EQ(1, v.sound);
    ASSERT_STR_EQ("", v.what);
    ASSERT_EQ(0, v.signal);
    ASSERT_EQ(400, v.entries);
    ASSERT_EQ(0, v.undecodable);
    ASSERT_EQ(c.last_page + 1, v.pages);
    /* Pages freed by later writes are counted as free, and still add up. */
    hv_store_t *st = open_store("state", 16 << 20);
    for (int i = 0; i < 100; i++) {
        char key[32];
        snprintf(key, sizeof(key), "http://k.test/%d", 3 * i);
        ASSERT_OK(hv_store_delete(st, key, strlen(key)));
    }
    hv_store_close(st);
    put_raw("state", "http://k.test/junk", "not an entry");
    ASSERT_OK(hv_store_verify(hv_test_tmppath("state"), &v, err, sizeof(err)));
    ASSERT_EQ(1, v.sound);
    ASSERT_EQ(301, v.entries);
    ASSERT_EQ(1, v.undecodable);
    ASSERT_GT(v.free_pages, 0);
    /* No store: an error, as for opening one. */
    ASSERT_EQ(UV_ENOENT, hv_store_verify(hv_test_tmppath("none"), &v, err, sizeof(err)));
    ASSERT_NOT_NULL(strstr(err, "no state store at"));
    /* A store LMDB will not open (its lock file a directory) is an error, not damage. */
    char lock[1100];
    snprintf(lock, sizeof(lock), "%s/lock.mdb", hv_test_tmppath("state"));
    ASSERT_OK(unlink(lock));
    ASSERT_OK(mkdir(lock, 0755));
    ASSERT_NE(0, hv_store_verify(hv_test_tmppath("state"), &v, err, sizeof(err)));
    ASSERT_NOT_NULL(strstr(err, "cannot open the state store"));
    ASSERT_EQ(0, v.sound);
}

/* Damage the open checks cannot see is found, and the parent lives to say so. */
TEST_IMPL(store_verify_finds_damage_inside_pages)
{
    const char *path = filled_store("state", 400);
    const char *dir = hv_test_tmppath("state");
    size_t len;
    char *sound = hv_test_read_file(path, &len);
    uint32_t page = (uint32_t)file_u64(path, OFF_PAGE_SIZE, 4);
    uint64_t m = (uint64_t)newest_meta(path, page) * page;
    uint64_t leaf = some_leaf(path, page, file_u64(path, m + OFF_MAIN_ROOT, 8));
    hv_store_verify_t v;
    char err[1024];
    hv_store_t *st;

    /* A leaf page zeroed: LMDB fails an assertion walking into it. */
    char *zero = hv_xcalloc(1, page);
    FILE *f = fopen(path, "r+b");
    ASSERT_NOT_NULL(f);
    ASSERT_OK(fseek(f, (long)(leaf * page), SEEK_SET));
    ASSERT_EQ(1, fwrite(zero, page, 1, f));
    ASSERT_OK(fclose(f));
    free(zero);
    st = open_store("state", 16 << 20); /* the open checks cannot see it */
    hv_store_close(st);
    ASSERT_OK(hv_store_verify(dir, &v, err, sizeof(err)));
    ASSERT_EQ(0, v.sound);
    ASSERT(v.signal == SIGABRT || strstr(v.what, "LMDB stopped the walk") != NULL);
    ASSERT_LT(v.entries, 400);

    /* A value whose size says 16 MiB: reading it runs past the end of the file (SIGBUS). */
    hv_test_write_file(path, sound, len);
    uint64_t node = leaf * page + file_u64(path, leaf * page + 16, 2);
    file_put(path, node, 4, 0x00ffffff);
    ASSERT_OK(hv_store_verify(dir, &v, err, sizeof(err)));
    ASSERT_EQ(0, v.sound);
    ASSERT_EQ(SIGBUS, v.signal);
    ASSERT_NOT_NULL(strstr(v.what, "SIGBUS"));
    /* The killed walk's reader slot is cleared: while a daemon holds the store open, it would
     * keep writers from reusing the pages it saw (the first process to open a store clears
     * the slots, so one holds it open here). */
    int ready[2];
    char byte;
    ASSERT_OK(pipe(ready));
    pid_t holder = fork();
    ASSERT_GE(holder, 0);
    if (holder == 0) {
        MDB_env *held;
        if (mdb_env_create(&held) != 0 || mdb_env_set_mapsize(held, (size_t)1 << 30) != 0 ||
            mdb_env_open(held, dir, MDB_RDONLY | MDB_NOTLS, 0644) != 0)
            _exit(1);
        if (write(ready[1], "r", 1) != 1)
            _exit(1);
        pause();
        _exit(0);
    }
    ASSERT_EQ(1, read(ready[0], &byte, 1));
    ASSERT_OK(hv_store_verify(dir, &v, err, sizeof(err)));
    ASSERT_EQ(SIGBUS, v.signal);
    MDB_env *env;
    int dead = -1;
    ASSERT_OK(mdb_env_create(&env));
    ASSERT_OK(mdb_env_set_mapsize(env, (size_t)1 << 30));
    ASSERT_OK(mdb_env_open(env, dir, MDB_RDONLY | MDB_NOTLS, 0644));
    ASSERT_OK(mdb_reader_check(env, &dead));
    mdb_env_close(env);
    kill(holder, SIGKILL);
    waitpid(holder, NULL, 0);
    close(ready[0]);
    close(ready[1]);
    ASSERT_EQ(0, dead);
    hv_test_write_file(path, sound, len);
    ASSERT_OK(hv_store_verify(dir, &v, err, sizeof(err)));
    ASSERT_EQ(1, v.sound);

    /* One more page in the file and in use by the meta page, in no tree and not free. */
    uint64_t last = file_u64(path, m + OFF_LAST, 8);
    char *grown = hv_xcalloc(1, len + page);
    memcpy(grown, sound, len);
    hv_test_write_file(path, grown, len + page);
    free(grown);
    file_put(path, m + OFF_LAST, 8, last + 1);
    ASSERT_OK(hv_store_verify(dir, &v, err, sizeof(err)));
    ASSERT_EQ(0, v.sound);
    ASSERT_EQ(0, v.signal);
    ASSERT_NOT_NULL(strstr(v.what, "do not add up"));
    ASSERT_EQ(400, v.entries);

    /* What the open checks refuse, verify reports without a walk. */
    ASSERT_OK(truncate(path, (off_t)len / 2));
    ASSERT_OK(hv_store_verify(dir, &v, err, sizeof(err)));
    ASSERT_EQ(0, v.sound);
    ASSERT_EQ(0, v.entries);
    ASSERT_NOT_NULL(strstr(v.what, "cut short"));
    free(sound);
}

/* ---- a commit that does not fit ---- */

/* 870 entries of 1.5 KiB do not fit a 1 MiB map together: one transaction stores none of
 * them, hv_store_write_fitting() the most that fit, in order. */
TEST_IMPL(store_write_fitting_commits_what_fits)
{
    enum { N = 870 };
    hv_store_t *st = open_store("state", 1 << 20);
    hv_store_entry_t e = sample(1), out;
    char *title = hv_xmalloc(1501);
    memset(title, 'f', 1500);
    title[1500] = '\0';
    e.title = title;
    static char keys[N][32];
    static hv_store_op_t ops[N];
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof(keys[i]), "http://f.test/%03d", i);
        ops[i] = (hv_store_op_t){keys[i], strlen(keys[i]), &e};
    }
    hv_store_stats_t s;
    ASSERT_EQ(UV_ENOSPC, hv_store_write(st, ops, N));
    ASSERT_OK(hv_store_stats(st, &s));
    ASSERT_EQ(0, s.entries);

    hv_store_written_t w;
    ASSERT_EQ(UV_ENOSPC, hv_store_write_fitting(st, ops, N, &w));
    ASSERT_GT(w.written, 100); /* about 250: two entries a page, and pages copied per commit */
    ASSERT_LT(w.written, N);
    ASSERT_GE(w.commits, 1);
    ASSERT_LE(w.commits, 12);
    ASSERT_OK(hv_store_stats(st, &s));
    ASSERT_EQ(w.written, s.entries);
    ASSERT_OK(hv_store_get(st, keys[0], strlen(keys[0]), &out));
    hv_store_entry_clear(&out);
    ASSERT_OK(hv_store_get(st, keys[w.written - 1], strlen(keys[w.written - 1]), &out));
    ASSERT_STR_EQ(title, out.title);
    hv_store_entry_clear(&out);
    ASSERT_EQ(UV_ENOENT, hv_store_get(st, keys[w.written], strlen(keys[w.written]), &out));
    /* Not even one more fits now; the store reads as before. */
    ASSERT_EQ(UV_ENOSPC, hv_store_write_fitting(st, ops + w.written, N - w.written, &w));
    ASSERT_EQ(0, w.written);
    ASSERT_EQ(0, w.commits);
    hv_store_close(st);

    /* What fits whole is one transaction. */
    st = open_store("roomy", 16 << 20);
    ASSERT_OK(hv_store_write_fitting(st, ops, N, &w));
    ASSERT_EQ(N, w.written);
    ASSERT_EQ(1, w.commits);
    ASSERT_OK(hv_store_write_fitting(st, ops, 0, &w));
    ASSERT_EQ(0, w.commits);
    hv_store_close(st);
    free(title);
}

/* ---- entries as people see them ---- */

/* An ETag is any bytes the server sent (Latin-1 here): stored as it came, to be sent back as
 * it came; shown (`harvestd state get`) as valid UTF-8, U+FFFD for what is not. */
TEST_IMPL(store_shows_any_stored_bytes_as_valid_json)
{
    hv_store_t *st = open_store("state", 16 << 20);
    hv_store_entry_t e = sample(1796210000123), out;
    char etag[] = "\"caf\xe9\"", lm[] = "Wed, 02 Dec 2026 \xff\xfe GMT", ct[] = "text/\xc3";
    e.etag = etag;
    e.last_modified = lm;
    e.content_type = ct;
    put(st, "http://a.test/", &e);
    ASSERT_OK(hv_store_get(st, "http://a.test/", 14, &out));
    ASSERT_STR_EQ(etag, out.etag); /* the bytes themselves */
    ASSERT_STR_EQ(lm, out.last_modified);
    char *text = hv_store_entry_show("http://a.test/", &out);
    ASSERT_EQ(1, hv_utf8_valid(text, strlen(text)));
    cJSON *o = cJSON_Parse(text);
    ASSERT_NOT_NULL(o);
    ASSERT_STR_EQ("\"caf\xef\xbf\xbd\"", cJSON_GetObjectItem(o, "etag")->valuestring);
    ASSERT_STR_EQ("Wed, 02 Dec 2026 \xef\xbf\xbd\xef\xbf\xbd GMT",
                  cJSON_GetObjectItem(o, "last_modified")->valuestring);
    ASSERT_STR_EQ("text/\xef\xbf\xbd", cJSON_GetObjectItem(o, "content_type")->valuestring);
    ASSERT_STR_EQ("T\xc3\xa9tre", cJSON_GetObjectItem(o, "title")->valuestring); /* as it was */
    cJSON_Delete(o);
    free(text);
    hv_store_entry_clear(&out);
    hv_store_close(st);
}

/* Fields go into records as their text is: in valid UTF-8 and without raw control characters
 * (cJSON escapes those when it prints fields), or the entry reads as absent. */
TEST_IMPL(store_fields_that_a_record_could_not_carry_read_as_absent)
{
    hv_store_t *st = open_store("state", 16 << 20);
    hv_store_entry_t in = sample(1796210000123), out;
    char latin[] = "{\"a\":\"caf\xe9\"}", control[] = "{\"a\":\"x\x01y\"}",
         escaped[] = "{\"a\":\"x\\u0001y\"}";
    in.fields = latin;
    put(st, "http://a.test/latin", &in);
    ASSERT_EQ(UV_ENOENT, hv_store_get(st, "http://a.test/latin", 19, &out));
    in.fields = control;
    put(st, "http://a.test/control", &in);
    ASSERT_EQ(UV_ENOENT, hv_store_get(st, "http://a.test/control", 21, &out));
    in.fields = escaped;
    put(st, "http://a.test/escaped", &in);
    ASSERT_OK(hv_store_get(st, "http://a.test/escaped", 21, &out));
    ASSERT_STR_EQ(escaped, out.fields);
    hv_store_entry_clear(&out);
    hv_store_close(st);
}

/* ---- TLS sessions ---- */

static hv_store_session_t session(const char *name, const unsigned char *data, size_t len,
                                  int64_t saved_at, int64_t life_ms)
{
    hv_store_session_t s = {name, data, len, saved_at, saved_at + life_ms, UINT64_C(0xabcdef)};
    return s;
}

TEST_IMPL(store_keeps_tls_sessions_apart_from_url_entries)
{
    hv_store_t *st = open_store("sessions", 16 << 20);
    unsigned char blob[300], buf[HV_STORE_SESSION_MAX];
    hv_store_session_t got;
    hv_store_stats_t s;
    uint64_t dropped = 9, removed = 0;
    int64_t now = hv_now_unix_ms();
    for (size_t i = 0; i < sizeof(blob); i++)
        blob[i] = (unsigned char)(i * 7);
    hv_store_entry_t e = sample(now - 1000);
    put(st, "http://a.test/", &e);
    hv_store_session_t in = session("a.test:443", blob, sizeof(blob), now - 10, 3600 * 1000);
    ASSERT_OK(hv_store_sessions_put(st, &in, 1, now, 16, &dropped));
    ASSERT_EQ(0, dropped);
    hv_store_close(st);

    /* Another run: the same bytes, times and trust. */
    st = open_store("sessions", 16 << 20);
    ASSERT_OK(hv_store_session_get(st, "a.test:443", now, buf, sizeof(buf), &got));
    ASSERT_EQ(sizeof(blob), got.len);
    ASSERT_OK(memcmp(blob, got.data, sizeof(blob)));
    ASSERT(got.data == buf);
    ASSERT_STR_EQ("a.test:443", got.name);
    ASSERT_EQ(now - 10, got.saved_at_ms);
    ASSERT_EQ(now - 10 + 3600 * 1000, got.expires_at_ms);
    ASSERT_EQ(UINT64_C(0xabcdef), got.trust);
    ASSERT_EQ(UV_ENOENT, hv_store_session_get(st, "a.test:8443", now, buf, sizeof(buf), &got));
    ASSERT_EQ(UV_ENOENT, hv_store_session_get(st, "", now, buf, sizeof(buf), &got));

    /* Not an entry: the URL commands neither see nor count it. */
    hv_store_entry_t out;
    ASSERT_EQ(UV_ENOENT, hv_store_get(st, HV_STORE_SESSION_PREFIX "a.test:443",
                                      strlen(HV_STORE_SESSION_PREFIX "a.test:443"), &out));
    ASSERT_OK(hv_store_stats(st, &s));
    ASSERT_EQ(1, s.entries);
    ASSERT_EQ(1, s.sessions);
    /* Pruning entries older than a minute keeps the session saved 10 ms ago, and counts
     * only entries... */
    ASSERT_OK(hv_store_prune(st, now - 60 * 1000, &removed));
    ASSERT_EQ(0, removed);
    ASSERT_OK(hv_store_session_get(st, "a.test:443", now, buf, sizeof(buf), &got));
    /* ... and one of everything before now drops both. */
    ASSERT_OK(hv_store_prune(st, now, &removed));
    ASSERT_EQ(1, removed);
    ASSERT_OK(hv_store_stats(st, &s));
    ASSERT_EQ(0, s.entries);
    ASSERT_EQ(0, s.sessions);
    hv_store_close(st);
}

TEST_IMPL(store_tls_sessions_expire)
{
    hv_store_t *st = open_store("sessions-expire", 16 << 20);
    unsigned char blob[64] = {1, 2, 3}, buf[HV_STORE_SESSION_MAX];
    hv_store_session_t got;
    hv_store_stats_t s;
    uint64_t dropped = 0;
    int64_t now = hv_now_unix_ms();
    hv_store_session_t in[] = {
        session("old:443", blob, sizeof(blob), now - 2000, 1000),  /* expired a second ago */
        session("new:443", blob, sizeof(blob), now, 1000),
        /* Longer than the most a session is kept: not written. */
        session("long:443", blob, sizeof(blob), now, HV_STORE_SESSION_MAX_AGE_MS + 1),
        /* No bytes, too many: not written. */
        session("empty:443", blob, 0, now, 1000),
        session("big:443", blob, HV_STORE_SESSION_MAX + 1, now, 1000),
    };
    ASSERT_OK(hv_store_sessions_put(st, in, HV_ARRAY_SIZE(in), now, 16, &dropped));
    /* The expired one went in the same transaction's sweep. */
    ASSERT_EQ(1, dropped);
    ASSERT_OK(hv_store_stats(st, &s));
    ASSERT_EQ(1, s.sessions);
    ASSERT_OK(hv_store_session_get(st, "new:443", now, buf, sizeof(buf), &got));
    ASSERT_EQ(UV_ENOENT, hv_store_session_get(st, "long:443", now, buf, sizeof(buf), &got));
    /* Read past its expiry, it is absent; the next sweep drops it. */
    ASSERT_EQ(UV_ENOENT, hv_store_session_get(st, "new:443", now + 1000, buf, sizeof(buf), &got));
    ASSERT_OK(hv_store_sessions_put(st, NULL, 0, now + 1000, 16, &dropped));
    ASSERT_EQ(1, dropped);
    ASSERT_OK(hv_store_stats(st, &s));
    ASSERT_EQ(0, s.sessions);
    hv_store_close(st);
}

TEST_IMPL(store_tls_sessions_are_capped_oldest_first)
{
    hv_store_t *st = open_store("sessions-cap", 16 << 20);
    unsigned char blob[100] = {9}, buf[HV_STORE_SESSION_MAX];
    hv_store_session_t got, in[10];
    char names[10][24];
    hv_store_stats_t s;
    uint64_t dropped = 0;
    int64_t now = hv_now_unix_ms();
    /* Saved in an order other than their names': h3 oldest ... */
    for (int i = 0; i < 10; i++) {
        snprintf(names[i], sizeof(names[i]), "h%d:443", i);
        in[i] = session(names[i], blob, sizeof(blob), now - 1000 + ((i + 7) % 10) * 10, 60000);
    }
    ASSERT_OK(hv_store_sessions_put(st, in, 6, now, 4, &dropped));
    ASSERT_EQ(2, dropped);
    ASSERT_OK(hv_store_sessions_put(st, in + 6, 4, now, 4, &dropped));
    ASSERT_EQ(4, dropped);
    ASSERT_OK(hv_store_stats(st, &s));
    ASSERT_EQ(4, s.sessions);
    /* The four saved last are kept: saved at offsets 60..90, h9 h0 h1 h2. */
    for (int i = 0; i < 10; i++) {
        int kept = i == 9 || i <= 2;
        ASSERT_EQ(kept ? 0 : UV_ENOENT,
                  hv_store_session_get(st, names[i], now, buf, sizeof(buf), &got));
    }
    hv_store_close(st);
}

TEST_IMPL(store_damaged_tls_session_reads_as_absent)
{
    hv_store_t *st = open_store("sessions-damaged", 16 << 20);
    unsigned char blob[32] = {5}, buf[HV_STORE_SESSION_MAX];
    hv_store_session_t got;
    hv_store_stats_t s;
    hv_store_verify_t v;
    uint64_t dropped = 0;
    char err[1024];
    int64_t now = hv_now_unix_ms();
    hv_store_session_t in = session("ok:443", blob, sizeof(blob), now, 60000);
    ASSERT_OK(hv_store_sessions_put(st, &in, 1, now, 16, NULL));
    hv_store_close(st);
    put_raw("sessions-damaged", HV_STORE_SESSION_PREFIX "bad:443", "{\"not\":\"a session\"}");
    put_raw("sessions-damaged", HV_STORE_SESSION_PREFIX "short:443", "HVTS");

    ASSERT_OK(hv_store_verify(hv_test_tmppath("sessions-damaged"), &v, err, sizeof(err)));
    ASSERT_EQ(1, v.sound);
    ASSERT_EQ(0, v.entries);
    ASSERT_EQ(3, v.sessions);
    st = open_store("sessions-damaged", 16 << 20);
    ASSERT_EQ(UV_ENOENT, hv_store_session_get(st, "bad:443", now, buf, sizeof(buf), &got));
    ASSERT_EQ(UV_ENOENT, hv_store_session_get(st, "short:443", now, buf, sizeof(buf), &got));
    ASSERT_OK(hv_store_session_get(st, "ok:443", now, buf, sizeof(buf), &got));
    /* The next write's sweep drops what does not decode. */
    ASSERT_OK(hv_store_sessions_put(st, NULL, 0, now, 16, &dropped));
    ASSERT_EQ(2, dropped);
    ASSERT_OK(hv_store_stats(st, &s));
    ASSERT_EQ(1, s.sessions);
    ASSERT_EQ(0, s.entries);
    hv_store_close(st);
}
