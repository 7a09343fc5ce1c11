/*
 * sched.h: which waiting job gets the next request slot.
 *
 * Jobs wait in per-host FIFO queues (host = scheme + host + port). A host is "ready" while it
 * has waiting jobs and fewer than per_host requests in flight; ready hosts take turns in
 * round-robin order, so one slow host at its limit never blocks the others. The global limit
 * caps requests in flight across hosts, and an owner-supplied gate can hold all dispatching
 * (backpressure from downstream, shutdown).
 *
 * Host entries also carry the idle keep-alive connections of that host (managed by fetch);
 * an entry is freed as soon as it has no waiting, in-flight or idle work, so memory follows
 * the active hosts, not every host ever seen.
 *
 * The scheduler touches no sockets.
 */
#ifndef HARVESTD_SCHED_H
#define HARVESTD_SCHED_H

#include <sys/queue.h>
#include <uthash.h>

#include "harvestd/conn.h"
#include "harvestd/job.h"

typedef struct hv_host_s {
    char *key;                 /* "http://example.org:80" */
    char *name;                /* host name or IP literal (no brackets) */
    int is_ip;
    uint16_t port;
    hv_scheme_t scheme;
    struct hv_job_list_s waiting;
    unsigned nwaiting;
    unsigned inflight;
    TAILQ_HEAD(, hv_conn_s) idle;   /* pooled connections, newest first (fetch) */
    unsigned nidle;
    /* private */
    int _ready;
    TAILQ_ENTRY(hv_host_s) _ready_link;
    UT_hash_handle hh;
} hv_host_t;

typedef struct hv_sched_s hv_sched_t;

/** Start downloading `job` (it holds a slot until hv_sched_done). May call back into the
 * scheduler synchronously. */
typedef void (*hv_sched_start_cb)(void *ud, hv_job_t *job);
/** Whether a new request may start now. */
typedef int (*hv_sched_gate_cb)(void *ud);

hv_sched_t *hv_sched_new(unsigned concurrency, unsigned per_host, hv_sched_start_cb start,
                         hv_sched_gate_cb gate, void *ud);

/** Queue `job` behind (or, with `front`, ahead of) its host's waiting jobs. Does not
 * dispatch: call hv_sched_kick(). */
void hv_sched_submit(hv_sched_t *s, hv_job_t *job, int front);

/** `job` no longer holds its slot (finished, failed or redirected). */
void hv_sched_done(hv_sched_t *s, hv_job_t *job);

/** Start as many waiting jobs as the limits and the gate allow. Re-entrant safe. */
void hv_sched_kick(hv_sched_t *s);

/** Free `h` if nothing refers to it any more (after fetch removed an idle connection). */
void hv_sched_host_gc(hv_sched_t *s, hv_host_t *h);

/** Remove every waiting job and pass it to `drop` (shutdown). */
void hv_sched_drop_waiting(hv_sched_t *s, void (*drop)(void *ud, hv_job_t *job), void *ud);

unsigned hv_sched_waiting(const hv_sched_t *s);
unsigned hv_sched_inflight(const hv_sched_t *s);
unsigned hv_sched_hosts(const hv_sched_t *s);

/** Free the scheduler; it must hold no jobs and no idle connections. */
void hv_sched_free(hv_sched_t *s);

#endif
