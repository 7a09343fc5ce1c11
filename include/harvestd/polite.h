/*
 * polite.h: what harvestd remembers about each host between requests, so that it stays
 * polite: the pacing (concurrency, delay between request starts, jitter), the adaptive
 * throttle (AIMD: halve concurrency and double the delay when a host answers 429/503 or its
 * latency climbs; give back one step after a run of successes), and its robots.txt.
 *
 * Entries are keyed by scheme://host:port and outlive the scheduler's host entries (which
 * come and go with the jobs); unreferenced entries are evicted oldest first beyond a bound,
 * so memory follows the hosts seen recently. Loop thread only.
 *
 * robots.txt: the scheduler holds a host's jobs while its rules are unknown and names the
 * host; the engine fetches /robots.txt as an ordinary job and hands the outcome here
 * (hv_polite_robots_ended), where the policy lives: 2xx parses the rules, 4xx allows
 * everything, anything else disallows everything for a minute (RFC 9309 2.3.1.4) and says
 * why. When that failure is one the pages' own requests would meet just the same and for
 * good (the name does not exist, the certificate is not accepted), the pages report it
 * instead of a refusal. Before a page job starts, hv_polite_admit() decides. Pure: the
 * caller gives the time. Jobs are read, never written: a reference taken for a job is
 * returned for the engine to keep in job->pol (job.h), and only a refused job's record is
 * filled in.
 */
#ifndef HARVESTD_POLITE_H
#define HARVESTD_POLITE_H

#include <stdint.h>
#include <sys/queue.h>
#include <uthash.h>

#include "harvestd/config.h"
#include "harvestd/record.h"
#include "harvestd/robots.h"
#include "harvestd/url.h"

struct hv_job_s;

typedef enum {
    HV_ROBOTS_UNKNOWN = 0,  /* not fetched (or expired) */
    HV_ROBOTS_FETCHING,     /* a fetch is in flight; the host's jobs wait */
    HV_ROBOTS_READY,        /* rules known */
} hv_robots_state_t;

typedef struct hv_hostpol_s {
    char *key;
    /* pacing: current and configured */
    unsigned limit;
    unsigned base_limit;
    uint64_t delay_ms;
    uint64_t base_delay_ms;
    double jitter;
    uint64_t next_start_ms;  /* loop time before which no request may start */
    uint64_t last_start_ms;  /* when the last request started */
    uint64_t prev_next_start_ms; /* next_start_ms before the last start (hv_polite_unstart) */
    /* adaptive */
    double ewma_ms;          /* smoothed response time */
    double floor_ms;         /* the best smoothed response time seen (slowly forgotten) */
    unsigned successes;      /* since the last change */
    uint64_t last_decrease_ms;
    uint64_t decreases;
    /* robots.txt */
    hv_robots_state_t robots_state;
    hv_robots_t *robots;
    int robots_unavailable;  /* the rules are a stand-in: robots.txt could not be fetched */
    int robots_final;        /* ... for a reason that asking again soon would not change (a
                                name that does not exist, an untrusted certificate) */
    char robots_why[48];     /* ... and why: http_503, connection_refused, ... */
    hv_error_type_t robots_fail_type; /* ... and, when a page's own request would meet the
                                         same failure for good, its type (else HV_ET_NONE) */
    hv_fault_t robots_fault;          /* ... and detail, which such pages report */
    uint64_t robots_expires_ms;
    /* block detection: set by the engine while the host is suspect (block.h); its jobs wait,
     * as for robots.txt, but for privileged ones (the probe) */
    int held;
    /* private */
    unsigned _refs;
    TAILQ_ENTRY(hv_hostpol_s) _lru;
    UT_hash_handle hh;
} hv_hostpol_t;

typedef struct hv_polite_s hv_polite_t;

typedef struct {
    uint64_t decreases;      /* adaptive slow-downs */
    uint64_t increases;      /* adaptive speed-ups */
    unsigned throttled;      /* hosts currently below their configured pace */
    uint64_t robots_fetches; /* robots.txt requests made */
    uint64_t robots_disallowed; /* page requests refused by robots.txt */
} hv_polite_stats_t;

hv_polite_t *hv_polite_new(const hv_config_t *cfg);
void hv_polite_free(hv_polite_t *p);

/** The entry for `key` (created with the configured pace for host name `host`), referenced. */
hv_hostpol_t *hv_polite_get(hv_polite_t *p, const char *key, const char *host);
void hv_polite_put(hv_polite_t *p, hv_hostpol_t *h);

/**
 * The gap after a request start on a host whose delay is `delay_ms` (configured, Crawl-delay
 * or throttled: whichever is in force) and jitter `jitter` (a fraction), for the random draw
 * `rnd` in [0, 1]: delay_ms x (1 + jitter x rnd). The delay is the least gap; jitter only
 * adds to it.
 */
uint64_t hv_polite_jittered(uint64_t delay_ms, double jitter, double rnd);

/** A request to the host was started at `now`: set when the next may start, at least the
 * host's delay later (hv_polite_jittered() with a fresh draw). */
void hv_polite_started(hv_polite_t *p, hv_hostpol_t *h, uint64_t now);

/** The request announced by the last hv_polite_started() never went out (robots.txt refused
 * it): give its pacing slot back. */
void hv_polite_unstart(hv_hostpol_t *h);

/**
 * Tell the throttle how a request went: `status` is the final HTTP status (0 for a transport
 * failure or timeout), `latency_ms` the time to the response (0 unknown). Returns 1 when the
 * host's pace changed (its jobs may have to be re-evaluated).
 */
int hv_polite_feedback(hv_polite_t *p, hv_hostpol_t *h, int status, int timeout,
                       uint64_t latency_ms, uint64_t now);

/**
 * A page job is about to start on its host, whose entry is `h`. When robots.txt lets it:
 * returns `h`, referenced for the attempt, for the caller to keep in job->pol, and releases
 * the reference job->pol held until then (a redirect moved the job from another host). When
 * robots.txt refuses it: returns NULL, the record says why (RobotsDisallowed), *robots_retry
 * whether a later attempt could pass, and the host's pacing slot is given back (no request
 * went out). When robots.txt could not be fetched for a failure the page's own request would
 * meet for good, the record carries that failure instead (DnsError, CertificateError: the
 * same type and detail, stage download), and *robots_retry is 0. The job itself is not
 * changed.
 */
hv_hostpol_t *hv_polite_admit(hv_polite_t *p, hv_hostpol_t *h, const struct hv_job_s *job,
                              uint64_t now, int *robots_retry);

/**
 * The attempt of a page job ended as its record says: tell the host's throttle
 * (hv_polite_feedback) and release the reference job->pol holds, which the caller then
 * forgets. Returns 1 when the host's pace changed, with the host's key in *key (valid until
 * the next call into polite).
 */
int hv_polite_attempt_ended(hv_polite_t *p, const struct hv_job_s *job, uint64_t now,
                            const char **key);

/** Raise the host's delay to at least `ms` (robots.txt Crawl-delay). */
void hv_polite_min_delay(hv_hostpol_t *h, uint64_t ms);

/**
 * The request for the robots.txt of `h`, scheme://name:port/robots.txt: returns its record
 * with the URL in *url, both for the job the caller makes of them, and `h` referenced for that
 * job (its pol: the host the rules are for); the host's state is now FETCHING. NULL when no
 * request can be made (everything is allowed then, at `now`).
 */
hv_record_t *hv_polite_robots_request(hv_polite_t *p, hv_hostpol_t *h, hv_scheme_t scheme,
                                      const char *name, uint16_t port, uint64_t now, hv_url_t *url);

/**
 * A robots.txt job (made of hv_polite_robots_request's record and URL, its pol the host) ended,
 * as job->end says: the host's rules and when they expire are set from the response, or
 * forgotten if the job was cancelled or `abandon` is set (shutting down). The job stays the
 * caller's; the caller re-evaluates the host's queues.
 */
void hv_polite_robots_ended(hv_polite_t *p, const struct hv_job_s *job, int abandon,
                            uint64_t now);

const hv_polite_stats_t *hv_polite_stats(const hv_polite_t *p);

#endif
