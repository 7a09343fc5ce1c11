/*
 * storecheck.h: the state store's data file (DIR/data.mdb) checked by reading it, before LMDB
 * maps it. The store (store.h) calls this at every open: the daemon's, and `harvestd state`'s.
 *
 * LMDB trusts its file. A data.mdb cut short is opened, and the first lookup that reaches a
 * page past its end dies of SIGBUS, at every restart; a wrong root page number fails one of
 * LMDB's assertions (SIGABRT). What a few reads can tell is checked here, from LMDB 0.9's
 * on-disk layout (data format version 1) on a 64-bit little-endian machine, as lmdb.h and
 * mdb.c describe it:
 *   - both meta pages (pages 0 and 1): marked as meta pages, LMDB's magic number, the data
 *     format version, and one page size that LMDB can have written;
 *   - in each: the last page in use, and the root pages of both trees (the free-page list and
 *     the entries) within it and within the file; a tree without a root has depth 0; the older
 *     meta page names no more pages than the newer;
 *   - against the newer meta page, the one LMDB reads: the root pages are the tree pages they
 *     should be, and every page up to its last page is in the file, except pages that its
 *     free-page list holds. LMDB leaves pages that a transaction took and gave back unwritten,
 *     so a sound file may end a few pages before its last page; those are free, and nothing
 *     reads them. Any other page past the end means the file was cut short.
 * Damage inside the pages (a leaf page overwritten, a wrong page number in a branch) is not
 * seen here: hv_store_verify() walks every page for that.
 *
 * Another process may commit while the file is read: the meta pages are read again at the end,
 * and the check is made again when they changed. On other machines (32-bit, big-endian) the
 * layout differs and nothing is checked.
 */
#ifndef HARVESTD_STORECHECK_H
#define HARVESTD_STORECHECK_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    HV_STORECHECK_SOUND = 0, /* nothing wrong seen (or nothing checked on this machine) */
    HV_STORECHECK_FOREIGN,   /* not an LMDB data file, or one of another data format */
    HV_STORECHECK_DAMAGED,   /* an LMDB data file that LMDB must not map */
} hv_storecheck_verdict_t;

typedef struct {
    hv_storecheck_verdict_t verdict;
    char what[320];     /* what is wrong, for people ("" when sound) */
    uint32_t page_size; /* the rest: of the newer meta page, when its page was read */
    uint64_t last_page;
    uint64_t txnid;
    uint64_t file_bytes;
} hv_storecheck_t;

/**
 * Check the data file at `path` (an LMDB data.mdb that exists and is not empty): 0 with the
 * verdict in *out, or a UV_E* error when the file cannot be read (open, fstat, pread). Blocks:
 * a few reads, and the free-page list's pages when the file ends before its last page.
 */
int hv_storecheck_file(const char *path, hv_storecheck_t *out);

#endif
