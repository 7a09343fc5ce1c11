/* pages.c: the page queue (see pages.h). */
#include "harvestd/pages.h"

#include <assert.h>
#include <stdlib.h>
#include <sys/queue.h>

#include "harvestd/common.h"

typedef struct page_s {
    void *owner;
    hv_record_t *rec;
    char *body;
    size_t len;
    TAILQ_ENTRY(page_s) link;
} page_t;

struct hv_pages_s {
    unsigned max_pages;
    uint64_t max_bytes;
    TAILQ_HEAD(, page_s) queue;
    hv_pages_stats_t stats;
};

hv_pages_t *hv_pages_new(unsigned max_pages, uint64_t max_bytes)
{
    hv_pages_t *q = hv_xcalloc(1, sizeof(*q));
    q->max_pages = max_pages;
    q->max_bytes = max_bytes;
    TAILQ_INIT(&q->queue);
    return q;
}

int hv_pages_reserve(hv_pages_t *q, size_t len)
{
    hv_pages_stats_t *s = &q->stats;
    s->pages++;
    s->bytes += len;
    s->hwm_pages = HV_MAX(s->hwm_pages, s->pages);
    s->hwm_bytes = HV_MAX(s->hwm_bytes, s->bytes);
    return s->pages >= q->max_pages || s->bytes >= q->max_bytes;
}

void hv_pages_unreserve(hv_pages_t *q, size_t len)
{
    assert(q->stats.pages > 0 && q->stats.bytes >= len);
    q->stats.pages--;
    q->stats.bytes -= len;
}

void hv_pages_push(hv_pages_t *q, void *owner, hv_record_t *rec, char *body, size_t len)
{
    page_t *pg = hv_xmalloc(sizeof(*pg));
    pg->owner = owner;
    pg->rec = rec;
    pg->body = body;
    pg->len = len;
    TAILQ_INSERT_TAIL(&q->queue, pg, link);
}

static void unlink_page(hv_pages_t *q, page_t *pg)
{
    TAILQ_REMOVE(&q->queue, pg, link);
    hv_pages_unreserve(q, pg->len);
    free(pg);
}

void *hv_pages_next_owner(hv_pages_t *q, int (*accepts)(void *owner))
{
    page_t *pg;
    TAILQ_FOREACH(pg, &q->queue, link)
    {
        if (accepts(pg->owner))
            return pg->owner;
    }
    return NULL;
}

/* A parse group takes at most this many bytes of pages. */
#define GROUP_BYTES (1024 * 1024)

void hv_pages_fill_group(hv_pages_t *q, const void *owner, hv_parse_group_t *g,
                         unsigned free_parsers)
{
    unsigned want = HV_MIN((q->stats.pages + free_parsers - 1) / free_parsers, HV_PARSE_GROUP);
    size_t bytes = 0;
    page_t *pg, *next;
    for (pg = TAILQ_FIRST(&q->queue); pg != NULL; pg = next) {
        next = TAILQ_NEXT(pg, link);
        if (pg->owner != owner)
            continue;
        hv_parse_group_add(g, pg->rec, pg->body, pg->len);
        bytes += pg->len;
        unlink_page(q, pg);
        if (hv_parse_group_size(g, NULL) >= want || bytes >= GROUP_BYTES)
            break;
    }
}

unsigned hv_pages_drop(hv_pages_t *q, const void *owner)
{
    unsigned n = 0;
    page_t *pg, *next;
    for (pg = TAILQ_FIRST(&q->queue); pg != NULL; pg = next) {
        next = TAILQ_NEXT(pg, link);
        if (pg->owner != owner)
            continue;
        hv_record_free(pg->rec);
        free(pg->body);
        unlink_page(q, pg);
        n++;
    }
    return n;
}

int hv_pages_low(const hv_pages_t *q)
{
    return q->stats.pages <= q->max_pages / 2 && q->stats.bytes <= q->max_bytes / 2;
}

const hv_pages_stats_t *hv_pages_stats(const hv_pages_t *q)
{
    return &q->stats;
}

void hv_pages_free(hv_pages_t *q)
{
    assert(TAILQ_EMPTY(&q->queue));
    free(q);
}
