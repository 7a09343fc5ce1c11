/*
 * block.c: the block detector's per-host signs, probes and verdicts (block.h).
 *
 * Each host keeps small fixed tables: the last bodies seen (digest and the distinct URLs that
 * gave it), the last new titles (with re-crawling), the last attempts' statuses, two moving
 * averages of the pages' size and latency, and two URLs that gave pages of their own, for a
 * probe. The thresholds are constants here, documented in README.md ("Block pages and run
 * health"); only `same_body` and the probe pauses are the operator's.
 */
#include "harvestd/block.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <uthash.h>
#include <xxhash.h>

#include "harvestd/common.h"

#define BODIES 16          /* bodies (and new titles) remembered per host */
#define URLS_MAX 8         /* distinct URLs counted per body: same_body is at most this */
#define NOT_BLOCKS 16      /* digests a probe cleared, per host */
#define WINDOW 8           /* attempts the status burst looks at */
#define BURST_MIN 5        /* ... of which this many 401/403/429/503 make a burst */
#define CANDIDATES 2       /* URLs that gave pages of their own, for the probe */
#define CANDIDATE_URL_MAX 2048 /* a longer URL is not kept as a candidate */
#define RATIO_BASE 16      /* 2xx pages before the ratio turn is watched */
#define RATIO_MIN_BYTES 2048 /* ... and the least mean size it watches */
#define LATENCY_UNSEEN_MS 5 /* a mean latency below this cannot get "faster" */
#define COLLAPSE_FACTOR 4  /* "much smaller": under a quarter */
#define COLLAPSE_MIN_BYTES 1024 /* a stored page smaller than this cannot collapse */
#define COLLAPSE_WINDOW 8  /* re-crawled pages the size collapse looks at */
#define COLLAPSE_MIN 3     /* ... of which this many collapsed make the sign */
#define PROBE_TRIES 3      /* probes without a response before the host counts as blocked */

typedef struct {
    uint64_t hash;         /* body digest, or title hash */
    uint64_t seen;         /* order of last use, for replacement */
    unsigned nurls;
    uint64_t urls[URLS_MAX];
} seen_t;

typedef struct {
    char *url;             /* NULL: empty slot */
    uint64_t digest;
    int64_t bytes;
    uint64_t title;
} candidate_t;

typedef struct host_s {
    char *key;
    hv_block_state_t state;
    hv_fault_t why;
    uint64_t sign_hash;        /* same body: the digest; one title: the title's hash */
    int64_t sign_bytes;        /* ratio turn: pages under this size match */

    seen_t bodies[BODIES];
    seen_t titles[BODIES];
    uint64_t tick;
    uint64_t not_block[NOT_BLOCKS];
    unsigned nnot_block;

    int had_success;
    int window[WINDOW];        /* statuses of the last attempts (0: empty slot) */
    unsigned wpos;

    unsigned nok;              /* 2xx attempts with a body since the averages started */
    double slow_bytes, slow_ms, fast_bytes, fast_ms;

    uint8_t collapsed[COLLAPSE_WINDOW];
    unsigned cpos, ncollapse_seen;

    candidate_t cand[CANDIDATES];
    unsigned cpos_next;

    /* the probe */
    char *probe_url;
    candidate_t probe_of;      /* what the probed URL gave before (url NULL: the root) */
    uint64_t due_ms;           /* 0: no probe planned */
    int probing;               /* asked for, not ended */
    unsigned probe_failures;
    uint64_t pause_ms;         /* the blocked host's current pause between probes */
    uint64_t refused;          /* jobs refused since the last probe */

    TAILQ_ENTRY(host_s) lru;   /* CLEAR hosts, least recently seen first */
    TAILQ_ENTRY(host_s) watched; /* SUSPECT and BLOCKED hosts */
    UT_hash_handle hh;
} host_t;

struct hv_block_s {
    hv_block_params_t p;
    host_t *hosts;
    unsigned nhosts;
    TAILQ_HEAD(, host_s) lru;
    TAILQ_HEAD(, host_s) watched;
    hv_block_stats_t stats;
};

static uint64_t text_hash(const char *s)
{
    return XXH3_64bits(s, strlen(s));
}

hv_block_t *hv_block_new(const hv_block_params_t *p)
{
    hv_block_t *b = hv_xcalloc(1, sizeof(*b));
    b->p = *p;
    if (b->p.same_body < 2)
        b->p.same_body = 2;
    if (b->p.same_body > URLS_MAX)
        b->p.same_body = URLS_MAX;
    TAILQ_INIT(&b->lru);
    TAILQ_INIT(&b->watched);
    return b;
}

static void candidate_clear(candidate_t *c)
{
    free(c->url);
    memset(c, 0, sizeof(*c));
}

static void host_free(host_t *h)
{
    for (unsigned i = 0; i < CANDIDATES; i++)
        candidate_clear(&h->cand[i]);
    candidate_clear(&h->probe_of);
    free(h->probe_url);
    free(h->key);
    free(h);
}

void hv_block_free(hv_block_t *b)
{
    if (b == NULL)
        return;
    host_t *h, *tmp;
    HASH_ITER(hh, b->hosts, h, tmp) {
        HASH_DEL(b->hosts, h);
        host_free(h);
    }
    free(b);
}

static host_t *find(const hv_block_t *b, const char *key)
{
    host_t *h;
    HASH_FIND_STR(b->hosts, key, h);
    return h;
}

/* The host's entry, made when missing; a CLEAR host moves to the end of the LRU list. */
static host_t *get(hv_block_t *b, const char *key)
{
    host_t *h = find(b, key);
    if (h != NULL) {
        if (h->state == HV_BLOCK_CLEAR) {
            TAILQ_REMOVE(&b->lru, h, lru);
            TAILQ_INSERT_TAIL(&b->lru, h, lru);
        }
        return h;
    }
    if (b->nhosts >= HV_BLOCK_HOSTS_MAX) {
        host_t *old = TAILQ_FIRST(&b->lru);
        if (old != NULL) {
            TAILQ_REMOVE(&b->lru, old, lru);
            HASH_DEL(b->hosts, old);
            host_free(old);
            b->nhosts--;
        }
    }
    h = hv_xcalloc(1, sizeof(*h));
    h->key = hv_xstrdup(key);
    HASH_ADD_KEYPTR(hh, b->hosts, h->key, strlen(h->key), h);
    TAILQ_INSERT_TAIL(&b->lru, h, lru);
    b->nhosts++;
    return h;
}

/* ---- the signs ---- */

static int is_block_status(int status)
{
    return status == 401 || status == 403 || status == 429 || status == 503;
}

static int not_a_block(const host_t *h, uint64_t hash)
{
    unsigned n = HV_MIN(h->nnot_block, (unsigned)NOT_BLOCKS);
    for (unsigned i = 0; i < n; i++)
        if (h->not_block[i] == hash)
            return 1;
    return 0;
}

/* Count `url` against `hash` in `table`; returns the distinct URLs that gave it. */
static unsigned seen_count(host_t *h, seen_t *table, uint64_t hash, uint64_t url)
{
    seen_t *e = NULL, *oldest = &table[0];
    for (unsigned i = 0; i < BODIES; i++) {
        if (table[i].nurls > 0 && table[i].hash == hash) {
            e = &table[i];
            break;
        }
        if (table[i].seen < oldest->seen)
            oldest = &table[i];
    }
    if (e == NULL) {
        e = oldest;
        memset(e, 0, sizeof(*e));
        e->hash = hash;
    }
    e->seen = ++h->tick;
    for (unsigned i = 0; i < e->nurls; i++)
        if (e->urls[i] == url)
            return e->nurls;
    if (e->nurls < URLS_MAX)
        e->urls[e->nurls++] = url;
    return e->nurls;
}

static void seen_forget(seen_t *table, uint64_t hash)
{
    for (unsigned i = 0; i < BODIES; i++)
        if (table[i].hash == hash)
            memset(&table[i], 0, sizeof(table[i]));
}

static int collapsed(int64_t bytes, int64_t stored)
{
    return stored >= COLLAPSE_MIN_BYTES && bytes >= 0 && bytes * COLLAPSE_FACTOR < stored;
}

/* Whether a page of `h` matches the sign it is suspect or blocked for. */
static int matches(const host_t *h, const hv_block_page_t *pg, uint64_t title)
{
    switch (h->why.code) {
    case HV_D_BLOCK_SAME_BODY:
        return pg->digest == h->sign_hash;
    case HV_D_BLOCK_ONE_TITLE:
        return pg->title != NULL && title == h->sign_hash;
    case HV_D_BLOCK_SIZE_COLLAPSE:
        return collapsed(pg->bytes, pg->stored_bytes);
    case HV_D_BLOCK_RATIO_TURN:
        return pg->bytes >= 0 && pg->bytes < h->sign_bytes;
    default:
        return 0; /* a status burst: its pages are failures already */
    }
}

/* The URL the probe of `h` fetches: the newest candidate that does not match the sign. */
static void choose_probe(host_t *h)
{
    const candidate_t *best = NULL;
    for (unsigned k = 0; k < CANDIDATES; k++) {
        /* newest first: cpos_next - 1, cpos_next - 2, ... */
        const candidate_t *c = &h->cand[(h->cpos_next + CANDIDATES - 1 - k) % CANDIDATES];
        if (c->url == NULL)
            continue;
        /* (a candidate's title is known by its hash: any title, for matches()) */
        hv_block_page_t pg = {.digest = c->digest, .bytes = c->bytes, .stored_bytes = -1,
                              .title = ""};
        if (matches(h, &pg, c->title))
            continue;
        best = c;
        break;
    }
    free(h->probe_url);
    candidate_clear(&h->probe_of);
    if (best != NULL) {
        h->probe_url = hv_xstrdup(best->url);
        h->probe_of = *best;
        h->probe_of.url = hv_xstrdup(best->url);
    } else {
        size_t n = strlen(h->key) + 2;
        h->probe_url = hv_xmalloc(n);
        snprintf(h->probe_url, n, "%s/", h->key);
    }
}

/* With re-crawling, the probe fetches the page that showed the sign again, and compares it
 * with what the store had (its size: a digest of the stored body is not kept here). */
static void probe_stored(host_t *h, const hv_block_page_t *pg)
{
    free(h->probe_url);
    candidate_clear(&h->probe_of);
    h->probe_url = hv_xstrdup(pg->url);
    h->probe_of.url = hv_xstrdup(pg->url);
    h->probe_of.bytes = pg->stored_bytes;
}

static void suspect(hv_block_t *b, host_t *h, hv_detail_t sign, const char *arg, uint64_t now)
{
    h->state = HV_BLOCK_SUSPECT;
    h->why.code = sign;
    snprintf(h->why.arg, sizeof(h->why.arg), "%s", arg != NULL ? arg : "");
    h->due_ms = now + b->p.probe_delay_ms;
    h->probing = 0;
    h->probe_failures = 0;
    h->pause_ms = b->p.probe_delay_ms;
    h->refused = 0;
    choose_probe(h);
    TAILQ_REMOVE(&b->lru, h, lru);
    TAILQ_INSERT_TAIL(&b->watched, h, watched);
    b->stats.suspect++;
}

/* Back to CLEAR with every sign forgotten but the digests known not to be blocks. */
static void clear(hv_block_t *b, host_t *h)
{
    if (h->state == HV_BLOCK_SUSPECT)
        b->stats.suspect--;
    else if (h->state == HV_BLOCK_BLOCKED)
        b->stats.blocked--;
    if (h->state != HV_BLOCK_CLEAR) {
        TAILQ_REMOVE(&b->watched, h, watched);
        TAILQ_INSERT_TAIL(&b->lru, h, lru);
    }
    seen_forget(h->bodies, h->sign_hash);
    seen_forget(h->titles, h->sign_hash);
    h->state = HV_BLOCK_CLEAR;
    memset(&h->why, 0, sizeof(h->why));
    h->sign_hash = 0;
    h->sign_bytes = 0;
    memset(h->window, 0, sizeof(h->window));
    h->nok = 0;
    memset(h->collapsed, 0, sizeof(h->collapsed));
    h->ncollapse_seen = 0;
    h->due_ms = 0;
    h->probing = 0;
    free(h->probe_url);
    h->probe_url = NULL;
    candidate_clear(&h->probe_of);
}

hv_block_change_t hv_block_attempt(hv_block_t *b, const char *key, int status, int64_t bytes,
                                   uint64_t latency_ms, uint64_t now)
{
    if (status == 0)
        return HV_BLOCK_UNCHANGED; /* no answer says nothing about blocking */
    host_t *h = get(b, key);
    if (h->state != HV_BLOCK_CLEAR)
        return HV_BLOCK_UNCHANGED;
    int ok = status >= 200 && status < 300;
    h->had_success |= ok;
    h->window[h->wpos] = status;
    h->wpos = (h->wpos + 1) % WINDOW;
    unsigned burst = 0;
    for (unsigned i = 0; i < WINDOW; i++)
        burst += is_block_status(h->window[i]);
    if (h->had_success && burst >= BURST_MIN) {
        char arg[16];
        snprintf(arg, sizeof(arg), "%d", status);
        suspect(b, h, HV_D_BLOCK_STATUS_BURST, is_block_status(status) ? arg : "", now);
        return HV_BLOCK_BECAME_SUSPECT;
    }
    if (!ok || bytes < 0)
        return HV_BLOCK_UNCHANGED;
    /* The ratio turn: a slow average (the host as it was) and a fast one (as it is now). */
    double x = (double)bytes, ms = (double)latency_ms;
    h->nok++;
    if (h->nok <= RATIO_BASE) {
        h->slow_bytes += (x - h->slow_bytes) / h->nok;
        h->slow_ms += (ms - h->slow_ms) / h->nok;
        h->fast_bytes = h->slow_bytes;
        h->fast_ms = h->slow_ms;
        return HV_BLOCK_UNCHANGED;
    }
    h->slow_bytes += (x - h->slow_bytes) / 32;
    h->slow_ms += (ms - h->slow_ms) / 32;
    h->fast_bytes += (x - h->fast_bytes) / 4;
    h->fast_ms += (ms - h->fast_ms) / 4;
    if (h->slow_bytes >= RATIO_MIN_BYTES &&
        h->fast_bytes * COLLAPSE_FACTOR < h->slow_bytes &&
        (h->slow_ms < LATENCY_UNSEEN_MS || h->fast_ms * 2 <= h->slow_ms)) {
        h->sign_bytes = (int64_t)(h->slow_bytes / COLLAPSE_FACTOR);
        suspect(b, h, HV_D_BLOCK_RATIO_TURN, NULL, now);
        return HV_BLOCK_BECAME_SUSPECT;
    }
    return HV_BLOCK_UNCHANGED;
}

/* Whether the host gave a page of its own, with another body than `digest`: a host that
 * answers every URL with one body from the start (an application shell, a parked domain)
 * has nothing to compare with, and is not suspected for it. */
static int had_other_page(const host_t *h, uint64_t digest)
{
    for (unsigned i = 0; i < CANDIDATES; i++)
        if (h->cand[i].url != NULL && h->cand[i].digest != digest)
            return 1;
    return 0;
}

static void remember_candidate(host_t *h, const hv_block_page_t *pg, uint64_t title)
{
    if (strlen(pg->url) >= CANDIDATE_URL_MAX)
        return;
    /* Only a page of its own: not a body that another URL gave too. */
    for (unsigned i = 0; i < BODIES; i++)
        if (h->bodies[i].nurls > 1 && h->bodies[i].hash == pg->digest)
            return;
    /* One slot per body: a page fetched again must not push out the other candidate. */
    for (unsigned i = 0; i < CANDIDATES; i++)
        if (h->cand[i].url != NULL && h->cand[i].digest == pg->digest)
            return;
    candidate_t *c = &h->cand[h->cpos_next];
    candidate_clear(c);
    c->url = hv_xstrdup(pg->url);
    c->digest = pg->digest;
    c->bytes = pg->bytes;
    c->title = title;
    h->cpos_next = (h->cpos_next + 1) % CANDIDATES;
}

hv_block_verdict_t hv_block_page(hv_block_t *b, const char *key, const hv_block_page_t *pg,
                                 uint64_t now, hv_block_change_t *change, hv_fault_t *why)
{
    *change = HV_BLOCK_UNCHANGED;
    if (pg->http_status < 200 || pg->http_status >= 300)
        return HV_BLOCK_PASS;
    host_t *h = get(b, key);
    uint64_t title = pg->title != NULL ? text_hash(pg->title) : 0;
    if (h->state == HV_BLOCK_CLEAR && !not_a_block(h, pg->digest)) {
        uint64_t url = text_hash(pg->final_url != NULL ? pg->final_url : pg->url);
        unsigned n = seen_count(h, h->bodies, pg->digest, url);
        if (n >= b->p.same_body && had_other_page(h, pg->digest)) {
            char arg[16];
            snprintf(arg, sizeof(arg), "%u", n);
            h->sign_hash = pg->digest;
            suspect(b, h, HV_D_BLOCK_SAME_BODY, arg, now);
            *change = HV_BLOCK_BECAME_SUSPECT;
        } else if (pg->stored_bytes >= 0) {
            /* Re-crawled: compare with what the store had. */
            h->collapsed[h->cpos] = (uint8_t)collapsed(pg->bytes, pg->stored_bytes);
            h->cpos = (h->cpos + 1) % COLLAPSE_WINDOW;
            unsigned c = 0;
            for (unsigned i = 0; i < COLLAPSE_WINDOW; i++)
                c += h->collapsed[i];
            int new_title = pg->title != NULL && pg->stored_title != NULL &&
                            strcmp(pg->title, pg->stored_title) != 0 &&
                            !not_a_block(h, title);
            if (c >= COLLAPSE_MIN) {
                suspect(b, h, HV_D_BLOCK_SIZE_COLLAPSE, NULL, now);
                probe_stored(h, pg);
                *change = HV_BLOCK_BECAME_SUSPECT;
            } else if (new_title &&
                       seen_count(h, h->titles, title, url) >= b->p.same_body) {
                h->sign_hash = title;
                suspect(b, h, HV_D_BLOCK_ONE_TITLE, NULL, now);
                probe_stored(h, pg);
                *change = HV_BLOCK_BECAME_SUSPECT;
            }
        }
        if (h->state == HV_BLOCK_CLEAR) {
            /* A collapsed page is no page of its own, for a probe. */
            if (!collapsed(pg->bytes, pg->stored_bytes))
                remember_candidate(h, pg, title);
            return HV_BLOCK_PASS;
        }
    }
    if (h->state == HV_BLOCK_CLEAR || !matches(h, pg, title))
        return HV_BLOCK_PASS;
    if (h->state == HV_BLOCK_SUSPECT)
        return HV_BLOCK_HOLD;
    *why = h->why;
    return HV_BLOCK_FAIL;
}

int hv_block_refuses(hv_block_t *b, const char *key, hv_fault_t *why)
{
    host_t *h = find(b, key);
    if (h == NULL || h->state != HV_BLOCK_BLOCKED)
        return 0;
    h->refused++;
    *why = h->why;
    return 1;
}

hv_block_state_t hv_block_state(const hv_block_t *b, const char *key)
{
    const host_t *h = find(b, key);
    return h != NULL ? h->state : HV_BLOCK_CLEAR;
}

hv_fault_t hv_block_why(const hv_block_t *b, const char *key)
{
    const host_t *h = find(b, key);
    hv_fault_t none = {HV_D_NONE, ""};
    return h != NULL ? h->why : none;
}

const char *hv_block_probe_due(hv_block_t *b, uint64_t now, const char **url)
{
    host_t *h, *next;
    for (h = TAILQ_FIRST(&b->watched); h != NULL; h = next) {
        next = TAILQ_NEXT(h, watched);
        if (h->probing || h->due_ms == 0 || h->due_ms > now)
            continue;
        /* A blocked host nobody asked for since its last probe is forgotten, not probed:
         * probing it for ever would be impolite, and its next jobs start afresh. */
        if (h->state == HV_BLOCK_BLOCKED && h->refused == 0) {
            clear(b, h);
            continue;
        }
        h->probing = 1;
        h->refused = 0;
        b->stats.probes++;
        *url = h->probe_url;
        return h->key;
    }
    return NULL;
}

uint64_t hv_block_next_due(const hv_block_t *b)
{
    uint64_t at = 0;
    const host_t *h;
    TAILQ_FOREACH(h, &b->watched, watched)
        if (!h->probing && h->due_ms != 0 && (at == 0 || h->due_ms < at))
            at = h->due_ms;
    return at;
}

/* Does the probe's answer show content, rather than the block? */
static int probe_shows_content(const host_t *h, int status, int has_body, uint64_t digest,
                               int64_t bytes)
{
    if (status == 0 || is_block_status(status))
        return 0;
    /* Neither a page nor a refusal (a 404, a 500...): nothing confirms the sign. */
    if (status < 200 || status >= 300)
        return 1;
    if (!has_body)
        return 0;
    if (h->why.code == HV_D_BLOCK_SAME_BODY && digest == h->sign_hash)
        return 0;
    const candidate_t *was = &h->probe_of;
    if (was->url != NULL) {
        if (digest == was->digest)
            return 1; /* its own page, as before */
        return bytes * COLLAPSE_FACTOR >= was->bytes; /* changed, but not collapsed */
    }
    /* The root, never seen before: not the shared body, and not collapsed. */
    if (h->why.code == HV_D_BLOCK_RATIO_TURN)
        return bytes >= h->sign_bytes;
    return 1;
}

hv_block_change_t hv_block_probe_ended(hv_block_t *b, const char *key, int status,
                                       int has_body, uint64_t digest, int64_t bytes,
                                       double rnd, uint64_t now)
{
    host_t *h = find(b, key);
    if (h == NULL || h->state == HV_BLOCK_CLEAR || !h->probing)
        return HV_BLOCK_UNCHANGED;
    h->probing = 0;
    if (status == 0 && h->state == HV_BLOCK_SUSPECT && ++h->probe_failures < PROBE_TRIES) {
        h->due_ms = now + b->p.probe_delay_ms;
        return HV_BLOCK_UNCHANGED;
    }
    if (probe_shows_content(h, status, has_body, digest, bytes)) {
        /* Suspect and cleared: the shared body or title was real (soft 404s, an ignored
         * parameter); remember it, so that it does not make the host suspect again. */
        if (h->state == HV_BLOCK_SUSPECT &&
            (h->why.code == HV_D_BLOCK_SAME_BODY || h->why.code == HV_D_BLOCK_ONE_TITLE))
            h->not_block[h->nnot_block++ % NOT_BLOCKS] = h->sign_hash;
        clear(b, h);
        b->stats.verdicts_cleared++;
        return HV_BLOCK_BECAME_CLEAR;
    }
    hv_block_change_t change = HV_BLOCK_UNCHANGED;
    if (h->state == HV_BLOCK_SUSPECT) {
        b->stats.suspect--;
        b->stats.blocked++;
        b->stats.verdicts_blocked++;
        h->state = HV_BLOCK_BLOCKED;
        change = HV_BLOCK_BECAME_BLOCKED;
    } else {
        h->pause_ms = HV_MIN(h->pause_ms * 2, b->p.probe_max_delay_ms);
    }
    h->due_ms = now + h->pause_ms + (uint64_t)((double)h->pause_ms * 0.25 * rnd);
    return change;
}

const hv_block_stats_t *hv_block_stats(const hv_block_t *b)
{
    return &b->stats;
}
