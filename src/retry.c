/* retry.c: the retry policy (see retry.h). */
#include "harvestd/retry.h"

#include <inttypes.h>

#include "harvestd/common.h"
#include "harvestd/job.h"
#include "harvestd/log.h"

int hv_retry_transient(const hv_config_t *cfg, const hv_record_t *rec)
{
    switch (rec->error_type) {
    case HV_ET_HTTP_STATUS:
        return rec->http_status >= 100 && rec->http_status <= 599 &&
               cfg->retry_status[rec->http_status];
    case HV_ET_CONNECT:
    case HV_ET_CONNECT_TIMEOUT:
    case HV_ET_READ_TIMEOUT:
    case HV_ET_TOTAL_TIMEOUT:
    case HV_ET_CONNECTION_RESET:
        return 1;
    case HV_ET_DNS:
        /* A name that does not exist will not exist in a second either. */
        return rec->detail == HV_D_DNS_TEMPORARY_FAILURE || rec->detail == HV_D_DNS_LOOKUP_EXCEEDED;
    case HV_ET_PROXY:
        /* A proxy that did not answer, broke the tunnel or refused it: the next attempt goes
         * to the next proxy of the list (fetch.c), which may serve. One that wants other
         * credentials will want them again. */
        return rec->detail == HV_D_PROXY_CONNECT_REFUSED ||
               rec->detail == HV_D_PROXY_CONNECT_TIMED_OUT ||
               rec->detail == HV_D_PROXY_CONNECT_ERROR || rec->detail == HV_D_PROXY_CLOSED ||
               rec->detail == HV_D_PROXY_HTTP_STATUS;
    case HV_ET_TLS:
        /* Broken handshakes can be transient; alerts and protocol errors are not. */
        return rec->detail == HV_D_TLS_CLOSED_DURING_HANDSHAKE ||
               rec->detail == HV_D_TLS_RESET_DURING_HANDSHAKE;
    default:
        return 0;
    }
}

int hv_retry_plan(const hv_config_t *cfg, const hv_record_t *rec, unsigned attempts,
                  int64_t retry_after_ms, int robots_retry, double rnd, uint64_t now,
                  hv_retry_plan_t *plan)
{
    if (attempts > cfg->retries)
        return 0;
    if (rec->error_type == HV_ET_ROBOTS ? !robots_retry : !hv_retry_transient(cfg, rec))
        return 0;
    uint64_t base = cfg->retry_base_ms << HV_MIN(attempts - 1, 30u);
    if (base > cfg->retry_max_ms || base < cfg->retry_base_ms)
        base = cfg->retry_max_ms;
    /* Exponential backoff plus up to as much again at random, so that many URLs failing
     * together do not all come back at the same instant. */
    uint64_t delay = base + (uint64_t)((double)base * rnd);
    if (delay > cfg->retry_max_ms)
        delay = cfg->retry_max_ms;
    int honour = rec->error_type == HV_ET_HTTP_STATUS &&
                 (rec->http_status == 429 || rec->http_status == 503) && retry_after_ms >= 0;
    if (honour) {
        if ((uint64_t)retry_after_ms > cfg->retry_after_max_ms)
            return 0; /* the server asks for longer than we wait: fail now with its status */
        delay = (uint64_t)retry_after_ms;
    }
    plan->at = now + delay;
    plan->delay_ms = delay;
    plan->retry_after = honour;
    return 1;
}

int hv_retry_job(const hv_config_t *cfg, const hv_job_t *job, double rnd, uint64_t now,
                 hv_retry_plan_t *plan)
{
    const hv_record_t *rec = job->rec;
    if (!hv_retry_plan(cfg, rec, job->attempts, job->retry_after_ms, job->robots_retry, rnd, now,
                       plan))
        return 0;
    HV_LOG(HV_LOG_INFO,
           "event=retry job=%" PRIu64 " attempt=%u delay_ms=%" PRIu64 " error_type=%s error=%s%s",
           job->id, job->attempts + 1, plan->delay_ms, hv_error_type_name(rec->error_type),
           rec->error ? rec->error : "", plan->retry_after ? " retry_after=1" : "");
    return 1;
}
