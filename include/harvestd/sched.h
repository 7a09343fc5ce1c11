/*
 * sched.h: which waiting job gets the next request slot.
 *
 * Two levels keep everyone moving:
 *   - among flows (one per batch) the one with the fewest requests in flight goes first, so
 *     a huge batch cannot starve a small one that arrived later, even on a shared host;
 *   - within a flow, hosts (scheme + host + port) take turns, so a slow host at its limit
 *     never blocks URLs for other hosts (no head-of-line blocking).
 * Limits are global: `concurrency` requests in flight in all, and per host (whatever the
 * flow) the host's current limit and pacing delay from polite.h. A global gate (downstream backpressure) and a per-flow gate (that batch's own
 * backpressure or shutdown) can hold dispatching.
 *
 * Host entries also carry that host's idle keep-alive connections (managed by fetch). Every
 * entry is freed as soon as nothing refers to it, so memory follows the active hosts, not every
 * host ever seen. The scheduler touches no sockets.
 */
#ifndef HARVESTD_SCHED_H
#define HARVESTD_SCHED_H

#include <sys/queue.h>
#include <uthash.h>

#include "harvestd/conn.h"
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
    TAILQ_HEAD(, hv_conn_s) idle;   /* pooled connections, newest first (fetch) */
    unsigned nidle;
    hv_hostpol_t *pol;              /* pacing, throttle and robots.txt (polite) */
    /* private */
    int _paced;                     /* waiting for pol->next_start_ms */
    TAILQ_ENTRY(hv_host_s) _paced_link;
    TAILQ_HEAD(, hv_fhost_s) _fhosts; /* this host's queues, one per flow with waiting jobs */
    unsigned _nfhosts;
    UT_hash_handle hh;
} hv_host_t;

/** Start downloading `job` (it holds a slot until hv_sched_done). May call back into the
 * scheduler synchronously. */
typedef void (*hv_sched_start_cb)(void *ud, hv_job_t *job);
/** Whether a new request may start now (globally, or for one flow). */
typedef int (*hv_sched_gate_cb)(void *ud);

/** A host's robots.txt is needed (its jobs wait until pol->robots is set). Called at the end
 * of hv_sched_submit, which the callee may call again (to queue the robots.txt request). */
typedef void (*hv_sched_robots_cb)(void *ud, hv_host_t *h);

/**
 * A scheduler over `concurrency` slots. Per-host limits and pacing come from `polite`
 * (shared, outlives the scheduler). With `robots` non-NULL, jobs of ordinary flows wait for
 * their host's robots.txt rules, and `robots` is asked to fetch them.
 */
hv_sched_t *hv_sched_new(uv_loop_t *loop, unsigned concurrency, hv_polite_t *polite,
                         hv_sched_start_cb start, hv_sched_gate_cb gate,
                         hv_sched_robots_cb robots, void *ud);

/** A new flow (a batch's share of the scheduler). `gate` may be NULL (always open). A
 * `privileged` flow's jobs do not wait for robots.txt (they fetch it). */
hv_flow_t *hv_sched_flow_new(hv_sched_t *s, hv_sched_gate_cb gate, void *ud, int privileged);
/** Free a flow; it must have no waiting jobs (drop them first). */
void hv_sched_flow_free(hv_sched_t *s, hv_flow_t *flow);
/** Jobs of `flow` waiting for a slot. */
unsigned hv_sched_flow_waiting(const hv_flow_t *flow);
/** The `ud` given to hv_sched_flow_new. */
void *hv_sched_flow_data(const hv_flow_t *flow);

/** Queue `job` in `flow` behind (or, with `front`, ahead of) its host's waiting jobs. Does
 * not dispatch: call hv_sched_kick(). */
void hv_sched_submit(hv_sched_t *s, hv_flow_t *flow, hv_job_t *job, int front);

/** `job` no longer holds its slot (finished, failed or redirected). */
void hv_sched_done(hv_sched_t *s, hv_job_t *job);

/** Start as many waiting jobs as the limits and gates allow, at most `max`; returns how many
 *  were started. Re-entrant safe: a call from inside a start callback returns 0 and the
 *  outer call goes on, within its own `max`. */
unsigned hv_sched_kick(hv_sched_t *s, unsigned max);

/** The host entry for key "scheme://host:port", or NULL. */
hv_host_t *hv_sched_host_find(hv_sched_t *s, const char *key);

/** The host's pace or robots.txt state changed: re-evaluate its queues. */
void hv_sched_host_changed(hv_sched_t *s, hv_host_t *h);

/** Loop time at which a paced host may start its next request (0: none waiting). */
uint64_t hv_sched_next_wakeup(const hv_sched_t *s);

/** Release hosts whose pacing delay has passed; call hv_sched_kick() after. */
void hv_sched_tick(hv_sched_t *s);

/** Free `h` if nothing refers to it any more (after fetch removed an idle connection). */
void hv_sched_host_gc(hv_sched_t *s, hv_host_t *h);

/** Remove every waiting job of `flow` and pass it to `drop`. */
void hv_sched_drop_waiting(hv_sched_t *s, hv_flow_t *flow,
                           void (*drop)(void *ud, hv_job_t *job), void *ud);

unsigned hv_sched_waiting(const hv_sched_t *s);
unsigned hv_sched_inflight(const hv_sched_t *s);
unsigned hv_sched_hosts(const hv_sched_t *s);

/** Free the scheduler; it must hold no flows, jobs or idle connections. */
void hv_sched_free(hv_sched_t *s);

#endif
