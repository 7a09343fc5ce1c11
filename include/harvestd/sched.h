/*
 * sched.h: which waiting job gets the next request slot, and when.
 *
 * Two levels keep everyone moving:
 *   - among flows (one per batch) the one with the fewest requests in flight goes first, so
 *     a huge batch cannot starve a small one that arrived later, even on a shared host;
 *   - within a flow, hosts (scheme + host + port) take turns, so a slow host at its limit
 *     never blocks URLs for other hosts (no head-of-line blocking).
 * Limits are global: `concurrency` requests in flight in all, and per host (whatever the
 * flow) the host's current limit and pacing delay from polite.h. A global gate (downstream
 * backpressure) and a per-flow gate (that batch's own backpressure or shutdown) can hold
 * dispatching.
 *
 * Jobs also wait for time: a job handed to hv_sched_delay() (a retry after its backoff) holds
 * no slot and no host until its not-before time, then queues ahead of its flow's other jobs
 * for that host. hv_sched_next_wakeup() says when the next delayed job or paced host is due;
 * the caller arms a timer and calls hv_sched_tick() then.
 *
 * The scheduler is pure: it touches no sockets and no loop, reads the time from the clock it
 * is given, and starts jobs only from hv_sched_kick(). Its one upward call, `start`, may end
 * the job it was given at once (hv_sched_done(): robots.txt refused it) but must not call
 * hv_sched_kick() again. Host entries are freed as soon as no job refers to them, so
 * memory follows the active hosts, not every host ever seen.
 */
#ifndef HARVESTD_SCHED_H
#define HARVESTD_SCHED_H

#include <stdint.h>
#include <sys/queue.h>
#include <uthash.h>

#include "harvestd/job.h"
#include "harvestd/polite.h"

typedef struct hv_sched_s hv_sched_t;
typedef struct hv_flow_s hv_flow_t;
typedef struct hv_fhost_s hv_fhost_t;

typedef struct hv_host_s {
    char *key;                 /* "http://example.org:80" */
    char *name;                /* host name or IP literal (no brackets) */
    int is_ip;
    uint16_t port;
    hv_scheme_t scheme;
    unsigned inflight;
    hv_hostpol_t *pol;              /* pacing, throttle and robots.txt (polite) */
    /* private */
    int _paced;                     /* waiting for pol->next_start_ms */
    TAILQ_ENTRY(hv_host_s) _paced_link;
    int _robots_wanted;             /* in _robots list: its robots.txt is needed */
    TAILQ_ENTRY(hv_host_s) _robots_link;
    TAILQ_HEAD(, hv_fhost_s) _fhosts; /* this host's queues, one per flow with waiting jobs */
    unsigned _nfhosts;
    UT_hash_handle hh;
} hv_host_t;

/** Start downloading `job`, which now holds a slot until hv_sched_done() (which this
 * callback may call for it, and for no other job). */
typedef void (*hv_sched_start_cb)(void *ud, hv_job_t *job);
/** Whether a new request may start now (globally, or for one flow). */
typedef int (*hv_sched_gate_cb)(void *ud);
/** The current time in milliseconds (a loop's uv_now, or a test's clock). */
typedef uint64_t (*hv_sched_clock_cb)(void *ud);

/**
 * A scheduler over `concurrency` slots. Per-host limits and pacing come from `polite`
 * (shared, outlives the scheduler). With `robots` set, jobs of ordinary flows wait for their
 * host's robots.txt rules, and hv_sched_robots_wanted() names the hosts that need them.
 * `start`, `gate` and `clock` get `ud`.
 */
hv_sched_t *hv_sched_new(unsigned concurrency, hv_polite_t *polite, int robots,
                         hv_sched_clock_cb clock, hv_sched_start_cb start, hv_sched_gate_cb gate,
                         void *ud);

/** A new flow (a batch's share of the scheduler). `gate` may be NULL (always open). A
 * `privileged` flow's jobs do not wait for robots.txt (they fetch it). */
hv_flow_t *hv_sched_flow_new(hv_sched_t *s, hv_sched_gate_cb gate, void *ud, int privileged);
/** Free a flow; it must have no jobs waiting, delayed or in flight (drop them first). */
void hv_sched_flow_free(hv_sched_t *s, hv_flow_t *flow);
/** Jobs of `flow` waiting for a slot, waiting out a delay, holding a slot. */
unsigned hv_sched_flow_waiting(const hv_flow_t *flow);
unsigned hv_sched_flow_delayed(const hv_flow_t *flow);
unsigned hv_sched_flow_inflight(const hv_flow_t *flow);
/** The `ud` given to hv_sched_flow_new. */
void *hv_sched_flow_data(const hv_flow_t *flow);

/** Queue `job` in `flow` behind (or, with `front`, ahead of) its host's waiting jobs. */
void hv_sched_submit(hv_sched_t *s, hv_flow_t *flow, hv_job_t *job, int front);

/** Hold `job` (of job->flow, holding no slot) until `not_before`, then queue it in front. */
void hv_sched_delay(hv_sched_t *s, hv_job_t *job, uint64_t not_before);

/** `job` no longer holds its slot (ended, failed or redirected). */
void hv_sched_done(hv_sched_t *s, hv_job_t *job);

/** Start as many waiting jobs as the limits and gates allow, at most `max`; returns how many
 * were started. */
unsigned hv_sched_kick(hv_sched_t *s, unsigned max);

/** The next host whose robots.txt is needed (its jobs wait), removed from that list; NULL when
 * none. The caller fetches it and sets pol->robots_state. */
hv_host_t *hv_sched_robots_wanted(hv_sched_t *s);

/** The host entry for key "scheme://host:port", or NULL. */
hv_host_t *hv_sched_host_find(hv_sched_t *s, const char *key);

/** The host's pace or robots.txt state changed: re-evaluate its queues. */
void hv_sched_host_changed(hv_sched_t *s, hv_host_t *h);

/** Clock time at which a paced host or a delayed job is next due (0: none). */
uint64_t hv_sched_next_wakeup(const hv_sched_t *s);

/** Release paced hosts and delayed jobs that are due; call hv_sched_kick() after. */
void hv_sched_tick(hv_sched_t *s);

/** Remove every waiting and delayed job of `flow`, passing each to `drop`. */
void hv_sched_drop(hv_sched_t *s, hv_flow_t *flow, void (*drop)(void *ud, hv_job_t *job),
                   void *ud);

unsigned hv_sched_waiting(const hv_sched_t *s);
unsigned hv_sched_delayed(const hv_sched_t *s);
unsigned hv_sched_inflight(const hv_sched_t *s);
unsigned hv_sched_hosts(const hv_sched_t *s);

/** Free the scheduler; it must hold no flows or jobs. */
void hv_sched_free(hv_sched_t *s);

#endif
