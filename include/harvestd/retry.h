/*
 * retry.h: whether a failed download is tried again, and when. Pure policy: it reads the
 * failure and the configuration, and the caller supplies the time and the random draw, so
 * that every decision can be replayed in a test.
 *
 * Retried: HTTP statuses in retry_statuses, connect errors and timeouts, resets, temporary
 * DNS failures and handshakes the peer broke off; a refusal by a robots.txt that was
 * unreachable "for now". Never: other 4xx, certificate errors, names that do not exist.
 * The delay is retry_base x 2^(attempt-1) plus up to as much again at random, capped by
 * retry_max; a Retry-After on 429/503 replaces it, and one above retry_after_max means no
 * retry at all (the URL fails now, with the server's status).
 */
#ifndef HARVESTD_RETRY_H
#define HARVESTD_RETRY_H

#include <stdint.h>

#include "harvestd/config.h"
#include "harvestd/record.h"

/** Would the same request plausibly succeed a little later? */
int hv_retry_transient(const hv_config_t *cfg, const hv_record_t *rec);

typedef struct {
    uint64_t at;          /* time the next attempt may start */
    uint64_t delay_ms;    /* at - now */
    int retry_after;      /* the delay is the server's Retry-After */
} hv_retry_plan_t;

/**
 * Plan the attempt after a failure described by `rec`. `attempts` were made so far,
 * `retry_after_ms` is the server's Retry-After (-1: none), `robots_retry` says the failure is
 * a refusal by an unreachable robots.txt that may pass later, `rnd` is a draw in [0, 1] for
 * the jitter and `now` the current time. Returns 1 with *plan filled, or 0: no retry.
 */
int hv_retry_plan(const hv_config_t *cfg, const hv_record_t *rec, unsigned attempts,
                  int64_t retry_after_ms, int robots_retry, double rnd, uint64_t now,
                  hv_retry_plan_t *plan);

struct hv_job_s;

/**
 * hv_retry_plan() for a job whose attempt failed, from its record, attempts, Retry-After and
 * robots_retry; a retry is logged. The job is not changed: on 1 the caller (the engine)
 * counts the attempt, has fetch start the next one clean (hv_fetch_next_attempt) and holds
 * the job until plan->at.
 */
int hv_retry_job(const hv_config_t *cfg, const struct hv_job_s *job, double rnd, uint64_t now,
                 hv_retry_plan_t *plan);

#endif
