/* The crypto workers: jobs run off the loop thread and come back to it, in full, and a pool
 * stopped with jobs queued hands them back unworked. */
#include <pthread.h>
#include <stdlib.h>
#include <uv.h>

#include "harvestd/common.h"
#include "harvestd/tls.h"
#include "harvestd/tlspool.h"
#include "test.h"

#define JOBS 200

typedef struct {
    hv_tlspool_job_t job;
    pthread_t ran_on;
    int worked;
    int done;
    unsigned *done_count;
} job_t;

static pthread_t loop_thread;

static void work(hv_tlspool_job_t *j)
{
    job_t *x = hv_container_of(j, job_t, job);
    x->ran_on = pthread_self();
    x->worked++;
}

static void done(hv_tlspool_job_t *j)
{
    job_t *x = hv_container_of(j, job_t, job);
    ASSERT(pthread_equal(pthread_self(), loop_thread));
    x->done++;
    (*x->done_count)++;
}

/* JOBS jobs, submitted to `p`, counting their ends in *ndone. */
static job_t *submit_jobs(hv_tlspool_t *p, unsigned *ndone)
{
    job_t *jobs = hv_xcalloc(JOBS, sizeof(*jobs));
    for (int i = 0; i < JOBS; i++) {
        jobs[i].job.work = work;
        jobs[i].job.done = done;
        jobs[i].done_count = ndone;
        hv_tlspool_submit(p, &jobs[i].job);
    }
    return jobs;
}

static hv_tls_ctx_t *new_ctx(void)
{
    hv_tls_ctx_t *ctx;
    char err[256];
    ASSERT_EQ(0, hv_tls_ctx_new(NULL, 1, &ctx, err, sizeof(err)));
    return ctx;
}

TEST_IMPL(tlspool_runs_jobs_off_the_loop_and_hands_them_back)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    loop_thread = pthread_self();
    hv_tls_ctx_t *ctx = new_ctx();
    hv_tlspool_t *p = hv_tlspool_new(&loop, ctx, 2);
    ASSERT(p != NULL);
    ASSERT_EQ(2, hv_tlspool_stats(p)->workers);
    unsigned ndone = 0;
    job_t *jobs = submit_jobs(p, &ndone);
    ASSERT_EQ(0, ndone); /* never from inside submit */
    while (ndone < JOBS)
        uv_run(&loop, UV_RUN_ONCE);
    for (int i = 0; i < JOBS; i++) {
        ASSERT_EQ(1, jobs[i].worked);
        ASSERT_EQ(1, jobs[i].done);
        ASSERT(!jobs[i].job.cancelled);
        ASSERT(!pthread_equal(jobs[i].ran_on, loop_thread));
    }
    ASSERT_EQ(JOBS, hv_tlspool_stats(p)->jobs);
    hv_tlspool_free(p);
    free(jobs);
    hv_tls_ctx_free(ctx);
    ASSERT_LOOP_CLOSE(&loop);
}

TEST_IMPL(tlspool_free_hands_back_what_is_queued)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    loop_thread = pthread_self();
    hv_tls_ctx_t *ctx = new_ctx();
    hv_tlspool_t *p = hv_tlspool_new(&loop, ctx, 1);
    unsigned ndone = 0;
    job_t *jobs = submit_jobs(p, &ndone);
    /* Stopped at once: whatever the worker had not started comes back unworked, and every
     * job's `done` has run when hv_tlspool_free returns. */
    hv_tlspool_free(p);
    ASSERT_EQ(JOBS, ndone);
    for (int i = 0; i < JOBS; i++) {
        ASSERT_EQ(1, jobs[i].done);
        ASSERT_EQ(jobs[i].job.cancelled ? 0 : 1, jobs[i].worked);
    }
    free(jobs);
    hv_tls_ctx_free(ctx);
    ASSERT_LOOP_CLOSE(&loop);
}
