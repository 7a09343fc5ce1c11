/* job.c: the life of an hv_job_t's memory (see job.h for who writes which fields). */
#include "harvestd/job.h"

#include <stdlib.h>

#include "harvestd/common.h"

hv_job_t *hv_job_new(uint64_t id, hv_job_kind_t kind, hv_record_t *rec, hv_url_t *url)
{
    hv_job_t *job = hv_xcalloc(1, sizeof(*job));
    job->id = id;
    job->kind = kind;
    job->rec = rec;
    job->url = *url;
    job->attempts = 1;
    job->retry_after_ms = -1;
    return job;
}

void hv_job_fill_record(const hv_job_t *job, uint64_t now)
{
    hv_record_t *rec = job->rec;
    free(rec->url);
    rec->url = hv_xstrdup(job->url.href);
    rec->redirects = (int)job->redirects;
    rec->attempts = (int)(job->attempts > 0 ? job->attempts : 1);
    rec->elapsed_ms = (int64_t)(now - job->started_ms);
    rec->fetched_at_ms = hv_now_unix_ms();
}

hv_record_t *hv_job_take_record(hv_job_t *job)
{
    hv_record_t *rec = job->rec;
    job->rec = NULL;
    return rec;
}

char *hv_job_take_body(hv_job_t *job)
{
    char *body = job->body;
    job->body = NULL;
    return body;
}

void hv_job_free(hv_job_t *job)
{
    hv_record_free(job->rec);
    hv_url_free(&job->url);
    free(job->first_origin);
    free(job->body);
    free(job);
}
