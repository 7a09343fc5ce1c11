/*
 * block.h: the block detector. A site that starts refusing a crawler rarely says 403: it
 * answers 200 with a small "Access denied" or "Just a moment..." page, the same bytes for
 * every URL, fast. Each of those would be an `ok` record. The detector watches each host
 * (scheme://host:port, the scheduler's key) for the signs, none of which needs configuring:
 *
 *   same body       `same_body` distinct URLs answer 2xx with one decoded body (its 64-bit
 *                   digest, which the parser computes while it walks the body anyway);
 *   status burst    401/403/429/503 are the majority of the host's last attempts, after it
 *                   had answered 2xx;
 *   size collapse   with re-crawling, pages come back far smaller than the store has them;
 *   one title       with re-crawling, pages switch from their stored titles to one shared
 *                   title;
 *   ratio turn      the host's 2xx pages get much smaller and faster at once than they were.
 *
 * A sign makes the host SUSPECT. Its jobs wait (the engine holds the host, as while its
 * robots.txt is fetched), and the records of its pages that match the sign (the shared
 * digest, the collapsed size, the shared title) wait too, in the engine. After a pause one
 * probe fetches again a URL of the host that earlier gave a page of its own (the host's root
 * when none is known). The probe decides:
 *   - it answers with that page (or another real one): the pages were real duplicates (soft
 *     404s, an ignored parameter). The host is CLEAR again, the held records are written ok,
 *     and the shared digest is remembered as "not a block" for the host;
 *   - it answers with the shared body, a block status, a collapsed page or not at all (three
 *     times): the host is BLOCKED. The held records, and those of its later pages that match
 *     the sign, fail (`Blocked`, the sign as `error`); its later jobs fail without a request.
 * A blocked host is probed again after a pause that doubles (with jitter) up to a bound, and
 * is CLEAR again when a probe answers with content.
 *
 * Pure: no loop, no I/O; the caller gives the time. Loop thread only. Memory is bounded: a
 * fixed amount per host, and hosts beyond HV_BLOCK_HOSTS_MAX that are CLEAR are forgotten,
 * least recently seen first.
 */
#ifndef HARVESTD_BLOCK_H
#define HARVESTD_BLOCK_H

#include <stddef.h>
#include <stdint.h>

#include "harvestd/detail.h"

/* Hosts remembered at once (suspect and blocked ones are never forgotten). */
#define HV_BLOCK_HOSTS_MAX 4096

typedef struct hv_block_s hv_block_t;

typedef enum {
    HV_BLOCK_CLEAR = 0,
    HV_BLOCK_SUSPECT,   /* a sign was seen: jobs and matching records wait for the probe */
    HV_BLOCK_BLOCKED,   /* the probe confirmed it: matching records and later jobs fail */
} hv_block_state_t;

/** What a call changed for the host: what the engine must do about its jobs and records. */
typedef enum {
    HV_BLOCK_UNCHANGED = 0,
    HV_BLOCK_BECAME_SUSPECT,  /* hold the host's jobs */
    HV_BLOCK_BECAME_BLOCKED,  /* fail the held records; jobs go on, to fail at dispatch */
    HV_BLOCK_BECAME_CLEAR,    /* write the held records ok; jobs go on */
} hv_block_change_t;

/** What to do with one record. */
typedef enum {
    HV_BLOCK_PASS = 0,  /* it goes on as it is */
    HV_BLOCK_HOLD,      /* it matches the sign of a suspect host: wait for the verdict */
    HV_BLOCK_FAIL,      /* it matches the sign of a blocked host: it fails (Blocked) */
} hv_block_verdict_t;

typedef struct {
    unsigned same_body;        /* distinct URLs with one body that make a host suspect (>= 2) */
    uint64_t probe_delay_ms;   /* pause before the first probe, and the first re-probe */
    uint64_t probe_max_delay_ms; /* the re-probes' pause doubles up to this */
} hv_block_params_t;

typedef struct {
    unsigned suspect;          /* hosts SUSPECT now */
    unsigned blocked;          /* hosts BLOCKED now */
    uint64_t verdicts_blocked; /* probes that confirmed a block */
    uint64_t verdicts_cleared; /* probes that cleared a host */
    uint64_t probes;           /* probes asked for */
} hv_block_stats_t;

/** What a parsed page says, for hv_block_page(). */
typedef struct {
    const char *url;           /* the requested URL (what a probe would fetch again) */
    const char *final_url;     /* the URL after redirects: distinct URLs are counted by it
                                  (many URLs redirected to one page are one page); NULL: url */
    int http_status;           /* the final status */
    uint64_t digest;           /* of the decoded body */
    int64_t bytes;             /* decoded body bytes */
    const char *title;         /* NULL: none */
    int64_t stored_bytes;      /* re-crawling: what the store had; -1: nothing stored */
    const char *stored_title;  /* re-crawling: the stored title; NULL: none */
} hv_block_page_t;

hv_block_t *hv_block_new(const hv_block_params_t *p);
void hv_block_free(hv_block_t *b);

/**
 * An attempt on host `key` ended at `now` with final status `status` (0: no response) after
 * `latency_ms`, with `bytes` of decoded body (-1: none). Feeds the status burst and the ratio
 * turn; may make the host suspect.
 */
hv_block_change_t hv_block_attempt(hv_block_t *b, const char *key, int status, int64_t bytes,
                                   uint64_t latency_ms, uint64_t now);

/**
 * A page of host `key` was parsed. Feeds the same body, size collapse and one title signs
 * (and remembers the URL as a probe candidate); may make the host suspect (*change). Returns
 * what to do with its record; with HV_BLOCK_FAIL, `why` is the sign.
 */
hv_block_verdict_t hv_block_page(hv_block_t *b, const char *key, const hv_block_page_t *pg,
                                 uint64_t now, hv_block_change_t *change, hv_fault_t *why);

/** Whether a job of host `key` must fail without a request (the host is BLOCKED); `why` is
 *  the sign. */
int hv_block_refuses(hv_block_t *b, const char *key, hv_fault_t *why);

/** The state of host `key` (CLEAR for a host not remembered). */
hv_block_state_t hv_block_state(const hv_block_t *b, const char *key);

/**
 * The next host whose probe is due at `now`: returns its key, with the URL to fetch in *url
 * (both valid until the next call that changes the detector); the host now waits for that
 * probe's hv_block_probe_ended(). NULL when none is due.
 */
const char *hv_block_probe_due(hv_block_t *b, uint64_t now, const char **url);

/** When the next probe is due (0: none). */
uint64_t hv_block_next_due(const hv_block_t *b);

/**
 * The probe of host `key` ended at `now`: `status` the final status (0: no response),
 * `has_body` with `digest` and `bytes` of its decoded body. `rnd` in [0, 1] draws the jitter
 * of the next pause. Returns the change (BLOCKED or CLEAR, or UNCHANGED while a probe that
 * got no response is retried).
 */
hv_block_change_t hv_block_probe_ended(hv_block_t *b, const char *key, int status,
                                       int has_body, uint64_t digest, int64_t bytes,
                                       double rnd, uint64_t now);

/** The sign that made host `key` suspect or blocked (HV_D_NONE when clear). */
hv_fault_t hv_block_why(const hv_block_t *b, const char *key);

const hv_block_stats_t *hv_block_stats(const hv_block_t *b);

#endif
