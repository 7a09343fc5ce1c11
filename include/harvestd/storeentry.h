/*
 * storeentry.h: what the store (store.h) keeps of one URL, as plain data: the entry, how to
 * clear one, and the body hash it compares. Apart from the store so that a record can carry
 * the entry its URL was compared with (re-crawling's state, record.h) and the parser can hash
 * a body without depending on LMDB or on re-crawling; store.h includes it.
 */
#ifndef HARVESTD_STOREENTRY_H
#define HARVESTD_STOREENTRY_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    char *url;            /* final URL; NULL: absent (likewise for every string) */
    char *etag;
    char *last_modified;
    char body_hash[65]; /* "xxh3-128:HEX" (hv_store_entry_body_hash); "" when not known */
    char *title;
    char *fields;         /* a JSON object text */
    char *content_type;
    char *charset;
    int64_t bytes;        /* -1: absent */
    int http_status;      /* of the response that brought the content; 0: absent */
    int64_t max_age_s;    /* the response's Cache-Control max-age; -1: absent */
    uint64_t rules_fp;    /* fingerprint of the extraction rules (0: title only) */
    int64_t fetched_at_ms;  /* Unix ms */
    int64_t modified_at_ms; /* Unix ms: when the content was last seen to change */
} hv_store_entry_t;

/** Free what an entry holds (not the struct) and reset it. */
void hv_store_entry_clear(hv_store_entry_t *e);

/** Longest text hv_store_entry_body_hash() writes, NUL included. */
#define HV_STORE_ENTRY_HASH_MAX 42

/**
 * The fingerprint of a decoded body, as stored (body_hash): "xxh3-128:" and 32 hex digits
 * (XXH3's 128-bit hash, at memory speed; the name says which hash, so that entries of another
 * one never match). Pure: the parse worker calls it. `out` holds HV_STORE_ENTRY_HASH_MAX bytes.
 */
void hv_store_entry_body_hash(const void *data, size_t len, char *out);

#endif
