/*
 * dns.h: a small cache in front of uv_getaddrinfo.
 *
 * Concurrent lookups of one name share a single getaddrinfo request; results (and failures,
 * briefly) are reused for a TTL. The cache is bounded: beyond `max_entries`, unreferenced
 * entries are evicted oldest first, so memory does not grow with the number of hosts seen.
 *
 * A caller embeds an hv_dns_waiter_t, calls hv_dns_lookup(), and either gets the answer at
 * once (return 1) or a callback later (return 0). A waiter that loses interest calls
 * hv_dns_cancel(); its callback then never runs. A delivered entry is referenced for the
 * caller, who releases it with hv_dns_unref() when done with its addresses.
 */
#ifndef HARVESTD_DNS_H
#define HARVESTD_DNS_H

#include <stdint.h>
#include <sys/queue.h>
#include <uv.h>

typedef struct hv_dns_s hv_dns_t;
typedef struct hv_dns_entry_s hv_dns_entry_t;
typedef struct hv_dns_waiter_s hv_dns_waiter_t;

/** Called on the loop with status 0 and a referenced entry, or a UV_EAI_* error and NULL. */
typedef void (*hv_dns_cb)(hv_dns_waiter_t *w, hv_dns_entry_t *e, int status);

struct hv_dns_waiter_s {
    hv_dns_cb cb;
    hv_dns_entry_t *_pending; /* entry being resolved for us, NULL when not waiting */
    TAILQ_ENTRY(hv_dns_waiter_s) _link;
};

typedef struct {
    uint64_t lookups; /* getaddrinfo requests issued */
    uint64_t hits;    /* answered from the cache or by joining a lookup in flight */
} hv_dns_stats_t;

hv_dns_t *hv_dns_new(uv_loop_t *loop, uint64_t ttl_ms, unsigned max_entries);

/**
 * Look `host` up. Returns 1 with *out set (referenced) when the answer is cached, 0 when the
 * callback will run later, or a negative UV_EAI_* error remembered from a recent failure.
 */
int hv_dns_lookup(hv_dns_t *dns, const char *host, hv_dns_waiter_t *w, hv_dns_entry_t **out);

/** Withdraw a waiting waiter (no-op if it is not waiting). */
void hv_dns_cancel(hv_dns_waiter_t *w);

/** The idx-th address of an entry (port not set), or NULL past the end. */
const struct sockaddr *hv_dns_entry_addr(const hv_dns_entry_t *e, unsigned idx);

void hv_dns_unref(hv_dns_entry_t *e);

const hv_dns_stats_t *hv_dns_stats(const hv_dns_t *dns);

/**
 * Shut the cache down: cancel what can be cancelled; the object frees itself once the last
 * getaddrinfo request has returned. No waiter may be waiting any more.
 */
void hv_dns_close(hv_dns_t *dns);

#endif
