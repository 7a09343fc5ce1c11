/* storecheck.c: the store's data file checked before LMDB maps it (storecheck.h). */
#include "harvestd/storecheck.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "harvestd/common.h"

/*
 * LMDB 0.9's file, data format version 1, as written on a 64-bit little-endian machine. Every
 * page starts with a 16-byte header: its number (8 bytes), 2 unused, its flags (2), then the
 * bounds of its free space (2 + 2), or for the first page of an overflow run the run's length
 * (4). A meta page's header is followed by the meta record: magic (4), version (4), a fixed
 * address (8), the map size (8), two tree records of 48 bytes (the free-page list's, whose
 * first 4 bytes are the page size, then the entries'), the last page in use (8) and the
 * transaction that wrote it (8). A tree record: 4 bytes (the page size, in the free list's),
 * flags (2), depth (2), branch, leaf and overflow page counts, entries, root page (8 each).
 */
#define PAGE_HEADER 16
#define P_BRANCH 0x01
#define P_LEAF 0x02
#define P_OVERFLOW 0x04
#define P_META 0x08
#define P_KIND (P_BRANCH | P_LEAF | P_OVERFLOW | P_META)
#define META_MAGIC UINT32_C(0xBEEFC0DE)
#define META_VERSION 1
#define META_TREES 24 /* offsets within the meta record */
#define TREE_BYTES 48
#define META_LAST (META_TREES + 2 * TREE_BYTES)
#define META_TXNID (META_LAST + 8)
#define META_BYTES (META_TXNID + 8)
#define META_SPAN (PAGE_HEADER + META_BYTES)
#define NO_PAGE UINT64_MAX
/* A node in a tree page: data size or child page (low 16 bits, next 16), flags (2; the child
 * page's top 16 bits in a branch), key size (2), then the key and the data. */
#define NODE_HEADER 8
#define F_BIGDATA 0x01 /* the data is an overflow run; the node holds its first page */
/* No tree is deeper than LMDB's cursor stack. */
#define MAX_DEPTH 32
/* LMDB 0.9 takes the system's page size, at most 32 KiB. */
#define PAGE_SIZE_MIN 512
#define PAGE_SIZE_MAX 32768
/* A writer that keeps committing while the file is read: check again, this many times. */
#define ATTEMPTS 5

enum { FREE_TREE = 0, MAIN_TREE = 1 };
static const char *const tree_names[] = {"free-page list", "entries"};

typedef struct {
    uint64_t pgno;
    unsigned flags;
    uint32_t magic, version, page_size;
    struct {
        unsigned depth;
        uint64_t root;
    } tree[2];
    uint64_t last;
    uint64_t txnid;
} meta_t;

static uint16_t get16(const unsigned char *p)
{
    return (uint16_t)(p[0] | (unsigned)p[1] << 8);
}

static uint32_t get32(const unsigned char *p)
{
    return (uint32_t)get16(p) | (uint32_t)get16(p + 2) << 16;
}

static uint64_t get64(const unsigned char *p)
{
    return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

static void parse_meta(const unsigned char *page, meta_t *m)
{
    const unsigned char *r = page + PAGE_HEADER;
    m->pgno = get64(page);
    m->flags = get16(page + 10);
    m->magic = get32(r);
    m->version = get32(r + 4);
    m->page_size = get32(r + META_TREES);
    for (int t = 0; t < 2; t++) {
        const unsigned char *rec = r + META_TREES + t * TREE_BYTES;
        m->tree[t].depth = get16(rec + 6);
        m->tree[t].root = get64(rec + 40);
    }
    m->last = get64(r + META_LAST);
    m->txnid = get64(r + META_TXNID);
}

/* pread all of `len` bytes: 0, 1 when the file ends first, or a UV_E* error. */
static int read_at(int fd, void *buf, size_t len, uint64_t off)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread(fd, (char *)buf + got, len - got, (off_t)(off + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return uv_translate_sys_error(errno);
        if (n == 0)
            return 1;
        got += (size_t)n;
    }
    return 0;
}

typedef struct {
    int fd;
    hv_storecheck_t *out;
    uint32_t page_size;
    uint64_t file_pages; /* whole pages in the file */
    uint64_t lo, hi;     /* free pages looked for: those past the end of the file */
    uint64_t *found;     /* ... as the free-page list names them */
    size_t nfound, capfound;
    uint64_t budget; /* pages that may still be read (a list that loops ends) */
    unsigned char *pages[MAX_DEPTH];
    int err; /* a read that failed: UV_E* */
} walk_t;

/* Say what is wrong (the first thing only) and stop: returns 1. */
__attribute__((format(printf, 3, 4))) static int
damaged(hv_storecheck_t *out, hv_storecheck_verdict_t verdict, const char *fmt, ...)
{
    if (out->verdict == HV_STORECHECK_SOUND) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(out->what, sizeof(out->what), fmt, ap);
        va_end(ap);
        out->verdict = verdict;
    }
    return 1;
}

/* A read of the walk that did not get its bytes: an error, or the file ended (1). Stops. */
static int read_failed(walk_t *w, int rc)
{
    if (rc < 0)
        w->err = rc;
    else
        damaged(w->out, HV_STORECHECK_DAMAGED, "cut short: it ends inside the free-page list");
    return 1;
}

static void found_add(walk_t *w, uint64_t pgno)
{
    if (w->nfound == w->capfound) {
        w->capfound = w->capfound ? w->capfound * 2 : 64;
        w->found = hv_xrealloc(w->found, w->capfound * sizeof(*w->found));
    }
    w->found[w->nfound++] = pgno;
}

/* One record of the free-page list: a count, then that many page numbers (8 bytes each). */
static int free_record(walk_t *w, uint64_t where, const unsigned char *data, size_t len)
{
    uint64_t n = len >= 8 ? get64(data) : 0;
    if (len < 8 || n > len / 8 - 1)
        return damaged(w->out, HV_STORECHECK_DAMAGED,
                       "a record of the free-page list on page %" PRIu64 " is malformed", where);
    for (uint64_t i = 1; i <= n; i++) {
        uint64_t pgno = get64(data + 8 * i);
        if (pgno >= w->lo && pgno <= w->hi)
            found_add(w, pgno);
    }
    return 0;
}

/* A record kept on an overflow run of pages (`len` bytes from its first page's data). */
static int free_record_overflow(walk_t *w, uint64_t where, uint64_t first, size_t len)
{
    unsigned char head[PAGE_HEADER];
    int rc;
    if (first < 2 || first >= w->file_pages)
        return damaged(w->out, HV_STORECHECK_DAMAGED,
                       "the free-page list names page %" PRIu64 ", past the end of the file",
                       first);
    if ((rc = read_at(w->fd, head, sizeof(head), first * w->page_size)) != 0)
        return read_failed(w, rc);
    uint32_t run = get32(head + 12);
    if (get64(head) != first || (get16(head + 10) & P_KIND) != P_OVERFLOW || run == 0 ||
        run > w->file_pages - first || len > (uint64_t)run * w->page_size - PAGE_HEADER)
        return damaged(w->out, HV_STORECHECK_DAMAGED,
                       "page %" PRIu64 " of the free-page list is not the overflow run that page "
                       "%" PRIu64 " names",
                       first, where);
    if (run > w->budget)
        return damaged(w->out, HV_STORECHECK_DAMAGED, "the free-page list loops");
    w->budget -= run;
    unsigned char *data = hv_xmalloc(len > 0 ? len : 1);
    rc = read_at(w->fd, data, len, first * w->page_size + PAGE_HEADER);
    rc = rc == 0 ? free_record(w, where, data, len) : read_failed(w, rc);
    free(data);
    return rc;
}

/* Collect the page numbers in [lo, hi] from the subtree at `pgno`: 0, or 1 to stop. */
static int walk_free(walk_t *w, uint64_t pgno, unsigned level)
{
    if (level >= MAX_DEPTH)
        return damaged(w->out, HV_STORECHECK_DAMAGED, "the free-page list is deeper than %d",
                       MAX_DEPTH);
    if (pgno < 2 || pgno >= w->file_pages)
        return damaged(w->out, HV_STORECHECK_DAMAGED,
                       "the free-page list names page %" PRIu64 ", past the end of the file", pgno);
    if (w->budget == 0)
        return damaged(w->out, HV_STORECHECK_DAMAGED, "the free-page list loops");
    w->budget--;
    if (w->pages[level] == NULL)
        w->pages[level] = hv_xmalloc(w->page_size);
    unsigned char *p = w->pages[level];
    int rc = read_at(w->fd, p, w->page_size, pgno * w->page_size);
    if (rc != 0)
        return read_failed(w, rc);
    unsigned kind = get16(p + 10) & P_KIND;
    unsigned lower = get16(p + 12), upper = get16(p + 14);
    if (get64(p) != pgno || (kind != P_BRANCH && kind != P_LEAF) || lower < PAGE_HEADER ||
        lower > upper || upper > w->page_size || (lower - PAGE_HEADER) % 2 != 0)
        return damaged(w->out, HV_STORECHECK_DAMAGED,
                       "page %" PRIu64 " of the free-page list is not a tree page", pgno);
    for (unsigned i = 0; i < (lower - PAGE_HEADER) / 2; i++) {
        unsigned off = get16(p + PAGE_HEADER + 2 * i);
        if (off < upper || off + NODE_HEADER > w->page_size)
            return damaged(w->out, HV_STORECHECK_DAMAGED,
                           "page %" PRIu64 " of the free-page list is malformed", pgno);
        const unsigned char *node = p + off;
        uint64_t lohi = get16(node) | (uint64_t)get16(node + 2) << 16;
        unsigned nflags = get16(node + 4), ksize = get16(node + 6);
        if (kind == P_BRANCH) {
            if (walk_free(w, lohi | (uint64_t)nflags << 32, level + 1) != 0)
                return 1;
            continue;
        }
        size_t start = off + NODE_HEADER + ksize;
        if (nflags & F_BIGDATA) {
            if (start + 8 > w->page_size)
                return damaged(w->out, HV_STORECHECK_DAMAGED,
                               "page %" PRIu64 " of the free-page list is malformed", pgno);
            rc = free_record_overflow(w, pgno, get64(p + start), (size_t)lohi);
        } else {
            if (start + lohi > w->page_size)
                return damaged(w->out, HV_STORECHECK_DAMAGED,
                               "page %" PRIu64 " of the free-page list is malformed", pgno);
            rc = free_record(w, pgno, p + start, (size_t)lohi);
        }
        if (rc != 0)
            return 1;
    }
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Pages [file_pages, m->last] are not in the file: whether the free-page list of `m` holds
 * every one of them. 0 (the verdict says), or a UV_E* error. */
static int check_tail(int fd, const meta_t *m, uint64_t file_pages, uint64_t file_bytes,
                      hv_storecheck_t *out)
{
    walk_t w;
    memset(&w, 0, sizeof(w));
    w.fd = fd;
    w.out = out;
    w.page_size = m->page_size;
    w.file_pages = file_pages;
    w.lo = file_pages;
    w.hi = m->last;
    w.budget = file_pages;
    uint64_t missing = m->last - file_pages + 1;
    /* A list of so many pages would not fit in the file. */
    if (m->tree[FREE_TREE].root != NO_PAGE && missing <= file_bytes / 8)
        walk_free(&w, m->tree[FREE_TREE].root, 0);
    if (w.err == 0 && out->verdict == HV_STORECHECK_SOUND) {
        uint64_t distinct = 0;
        if (w.nfound > 0)
            qsort(w.found, w.nfound, sizeof(*w.found), cmp_u64);
        for (size_t i = 0; i < w.nfound; i++)
            distinct += i == 0 || w.found[i] != w.found[i - 1];
        if (distinct < missing)
            damaged(out, HV_STORECHECK_DAMAGED,
                    "cut short: %" PRIu64 " bytes, %" PRIu64 " whole pages of %" PRIu32
                    ", but its newest meta page (transaction %" PRIu64 ") has pages up to %" PRIu64
                    " in use",
                    file_bytes, file_pages, m->page_size, m->txnid, m->last);
    }
    for (int i = 0; i < MAX_DEPTH; i++)
        free(w.pages[i]);
    free(w.found);
    return w.err;
}

/* What a meta page says on its own (`which`: 0 or 1). 0 when it holds together. */
static int check_meta(const meta_t *m, int which, uint32_t page_size, hv_storecheck_t *out)
{
    /* Another program's file has no magic number; a damaged one has lost it. */
    if (m->magic != META_MAGIC)
        return damaged(out, which == 0 ? HV_STORECHECK_FOREIGN : HV_STORECHECK_DAMAGED,
                       "meta page %d has no LMDB magic number", which);
    if (m->version != META_VERSION)
        return damaged(out, HV_STORECHECK_FOREIGN,
                       "meta page %d is of LMDB data format version %" PRIu32
                       ", this harvestd reads version %d",
                       which, m->version, META_VERSION);
    if (!(m->flags & P_META) || m->pgno != (uint64_t)which)
        return damaged(out, HV_STORECHECK_DAMAGED, "page %d is not marked as a meta page", which);
    if (m->page_size != page_size)
        return damaged(out, HV_STORECHECK_DAMAGED,
                       "meta page %d says pages are %" PRIu32 " bytes, meta page 0 %" PRIu32, which,
                       m->page_size, page_size);
    if (m->last < 1 || m->last > UINT64_MAX / page_size - 1)
        return damaged(out, HV_STORECHECK_DAMAGED,
                       "meta page %d (transaction %" PRIu64 ") says its last page is %" PRIu64,
                       which, m->txnid, m->last);
    for (int t = 0; t < 2; t++) {
        uint64_t root = m->tree[t].root;
        unsigned depth = m->tree[t].depth;
        if (root == NO_PAGE ? depth != 0
                            : root < 2 || root > m->last || depth < 1 || depth > MAX_DEPTH)
            return damaged(out, HV_STORECHECK_DAMAGED,
                           "meta page %d (transaction %" PRIu64 ") names page %" PRIu64
                           " as the root of the %s (depth %u), its last page being %" PRIu64,
                           which, m->txnid, root, tree_names[t], depth, m->last);
    }
    return 0;
}

/* The root pages of the newer meta page: in the file, and tree pages of the right kind. */
static int check_roots(int fd, const meta_t *m, uint64_t file_pages, hv_storecheck_t *out)
{
    for (int t = 0; t < 2; t++) {
        uint64_t root = m->tree[t].root;
        unsigned char head[PAGE_HEADER];
        if (root == NO_PAGE)
            continue;
        int rc = root < file_pages ? read_at(fd, head, sizeof(head), root * m->page_size) : 1;
        if (rc < 0)
            return rc;
        if (rc > 0) {
            damaged(out, HV_STORECHECK_DAMAGED,
                    "cut short: the root page %" PRIu64 " of the %s is past the end of the file",
                    root, tree_names[t]);
            return 0;
        }
        unsigned want = m->tree[t].depth == 1 ? P_LEAF : P_BRANCH;
        if (get64(head) != root || (get16(head + 10) & P_KIND) != want) {
            damaged(out, HV_STORECHECK_DAMAGED,
                    "page %" PRIu64 ", the root of the %s (transaction %" PRIu64
                    "), is not a %s page",
                    root, tree_names[t], m->txnid, want == P_LEAF ? "leaf" : "branch");
            return 0;
        }
    }
    return 0;
}

/* Read the meta pages into `raw` (zeroed first): how many bytes, or a UV_E* error. */
static int read_metas(int fd, unsigned char raw[2][META_SPAN], size_t *got)
{
    uint32_t page_size;
    int rc;
    memset(raw, 0, 2 * META_SPAN);
    *got = 0;
    if ((rc = read_at(fd, raw[0], META_SPAN, 0)) != 0)
        return rc < 0 ? rc : 0;
    *got = META_SPAN;
    page_size = get32(raw[0] + PAGE_HEADER + META_TREES);
    if (page_size < PAGE_SIZE_MIN || page_size > PAGE_SIZE_MAX)
        return 0;
    if ((rc = read_at(fd, raw[1], META_SPAN, page_size)) != 0)
        return rc < 0 ? rc : 0;
    *got = 2 * META_SPAN;
    return 0;
}

/* One check of the file from the meta pages in `raw` (`got` bytes of them). */
static int check_file(int fd, unsigned char raw[2][META_SPAN], size_t got, hv_storecheck_t *out)
{
    meta_t m[2];
    struct stat sb;
    parse_meta(raw[0], &m[0]);
    if (got < META_SPAN) {
        damaged(out, m[0].magic == META_MAGIC ? HV_STORECHECK_DAMAGED : HV_STORECHECK_FOREIGN,
                "too short for LMDB's first meta page");
        return 0;
    }
    uint32_t page_size = m[0].page_size;
    if (m[0].magic == META_MAGIC && m[0].version == META_VERSION &&
        (page_size < PAGE_SIZE_MIN || page_size > PAGE_SIZE_MAX ||
         (page_size & (page_size - 1)) != 0)) {
        damaged(out, HV_STORECHECK_DAMAGED, "meta page 0 says pages are %" PRIu32 " bytes",
                page_size);
        return 0;
    }
    if (check_meta(&m[0], 0, page_size, out) != 0)
        return 0;
    if (got < 2 * META_SPAN) {
        damaged(out, HV_STORECHECK_DAMAGED, "cut short: it ends before its second meta page");
        return 0;
    }
    parse_meta(raw[1], &m[1]);
    if (check_meta(&m[1], 1, page_size, out) != 0)
        return 0;
    /* The size after the meta pages: a writer grows the file before it writes a meta page. */
    if (fstat(fd, &sb) != 0)
        return uv_translate_sys_error(errno);
    uint64_t bytes = (uint64_t)sb.st_size, pages = bytes / page_size;
    const meta_t *newer = &m[m[0].txnid < m[1].txnid], *older = &m[m[0].txnid >= m[1].txnid];
    out->page_size = page_size;
    out->last_page = newer->last;
    out->txnid = newer->txnid;
    out->file_bytes = bytes;
    if (older->last > newer->last) {
        damaged(out, HV_STORECHECK_DAMAGED,
                "its older meta page (transaction %" PRIu64 ") has more pages in use (%" PRIu64
                ") than the newer (transaction %" PRIu64 ", %" PRIu64 ")",
                older->txnid, older->last, newer->txnid, newer->last);
        return 0;
    }
    /* The older meta page's roots were written when it was: they are in the file. */
    for (int t = 0; t < 2; t++)
        if (older->tree[t].root != NO_PAGE && older->tree[t].root >= pages) {
            damaged(out, HV_STORECHECK_DAMAGED,
                    "cut short: the root page %" PRIu64 " of the %s (transaction %" PRIu64
                    ") is past the end of the file",
                    older->tree[t].root, tree_names[t], older->txnid);
            return 0;
        }
    int rc = check_roots(fd, newer, pages, out);
    if (rc != 0 || out->verdict != HV_STORECHECK_SOUND)
        return rc;
    if (newer->last >= pages)
        return check_tail(fd, newer, pages, bytes, out);
    return 0;
}

int hv_storecheck_file(const char *path, hv_storecheck_t *out)
{
    memset(out, 0, sizeof(*out));
#if UINTPTR_MAX != UINT64_MAX || !defined(__BYTE_ORDER__) ||                                       \
    __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
    (void)path;
    return 0; /* another layout: LMDB's own checks only */
#else
    unsigned char before[2][META_SPAN], after[2][META_SPAN];
    size_t got, got_after;
    int rc = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return uv_translate_sys_error(errno);
    for (int attempt = 0; attempt < ATTEMPTS; attempt++) {
        memset(out, 0, sizeof(*out));
        if ((rc = read_metas(fd, before, &got)) != 0)
            break;
        if ((rc = check_file(fd, before, got, out)) != 0)
            break;
        if ((rc = read_metas(fd, after, &got_after)) != 0)
            break;
        if (got == got_after && memcmp(before, after, sizeof(before)) == 0)
            goto out;
    }
    /* A store that a writer kept changing under the check is a store in use, not a damaged
     * one; LMDB reads it under its lock. */
    if (rc == 0)
        memset(out, 0, sizeof(*out));
out:
    close(fd);
    return rc;
#endif
}
