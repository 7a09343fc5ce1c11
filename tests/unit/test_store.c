/*
 * test_store.c: the per-URL state store on a real LMDB environment in the test's directory.
 */
#include <lmdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <uv.h>

#include "harvestd/common.h"
#include "harvestd/store.h"
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
