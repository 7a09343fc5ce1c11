/*
 * tlspool.c: the crypto workers (see tlspool.h).
 *
 * One mutex guards the two lists: jobs to run (FIFO) and jobs done (handed back in order by
 * the async handle). Workers sleep on a condition variable. The loop owns everything else.
 */
#include "harvestd/tlspool.h"

#include <pthread.h>
#include <stdlib.h>

#include "harvestd/common.h"
#include "harvestd/log.h"

struct hv_tlspool_s {
    hv_tls_ctx_t *ctx;
    pthread_mutex_t lock;
    pthread_cond_t more;
    hv_tlspool_job_t *todo, *todo_tail; /* under lock */
    hv_tlspool_job_t *done, *done_tail; /* under lock */
    int stopping;                       /* under lock */
    pthread_t *threads;
    unsigned nthreads;
    uv_async_t async;
    hv_tlspool_stats_t stats;           /* loop thread */
};

static void push(hv_tlspool_job_t **head, hv_tlspool_job_t **tail, hv_tlspool_job_t *job)
{
    job->next = NULL;
    if (*tail != NULL)
        (*tail)->next = job;
    else
        *head = job;
    *tail = job;
}

static void *worker(void *arg)
{
    hv_tlspool_t *p = arg;
    hv_tls_thread_start(p->ctx);
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (p->todo == NULL && !p->stopping)
            pthread_cond_wait(&p->more, &p->lock);
        if (p->todo == NULL)
            break; /* stopping, and nothing left in hand */
        hv_tlspool_job_t *job = p->todo;
        p->todo = job->next;
        if (p->todo == NULL)
            p->todo_tail = NULL;
        int stopping = p->stopping;
        pthread_mutex_unlock(&p->lock);
        job->cancelled = stopping;
        if (!stopping)
            job->work(job);
        pthread_mutex_lock(&p->lock);
        push(&p->done, &p->done_tail, job);
        if (!stopping)
            uv_async_send(&p->async);
    }
    pthread_mutex_unlock(&p->lock);
    hv_tls_thread_stop();
    return NULL;
}

/* Hand the finished jobs back, in the order they finished. */
static void run_done(hv_tlspool_t *p)
{
    pthread_mutex_lock(&p->lock);
    hv_tlspool_job_t *job = p->done;
    p->done = p->done_tail = NULL;
    pthread_mutex_unlock(&p->lock);
    while (job != NULL) {
        hv_tlspool_job_t *next = job->next;
        p->stats.jobs++;
        job->done(job);
        job = next;
    }
}

static void on_async(uv_async_t *h)
{
    run_done(h->data);
}

hv_tlspool_t *hv_tlspool_new(uv_loop_t *loop, hv_tls_ctx_t *ctx, unsigned n)
{
    hv_tlspool_t *p = hv_xcalloc(1, sizeof(*p));
    p->ctx = ctx;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->more, NULL);
    uv_async_init(loop, &p->async, on_async);
    p->async.data = p;
    p->threads = hv_xcalloc(HV_MAX(n, 1u), sizeof(*p->threads));
    for (unsigned i = 0; i < HV_MAX(n, 1u); i++) {
        if (pthread_create(&p->threads[p->nthreads], NULL, worker, p) != 0)
            break;
        p->nthreads++;
    }
    p->stats.workers = p->nthreads;
    if (p->nthreads == 0) {
        HV_LOG(HV_LOG_WARNING, "event=tls_workers_unavailable note=\"handshakes run on the "
               "loop thread\"");
        hv_tlspool_free(p);
        return NULL;
    }
    return p;
}

void hv_tlspool_submit(hv_tlspool_t *p, hv_tlspool_job_t *job)
{
    job->cancelled = 0;
    pthread_mutex_lock(&p->lock);
    push(&p->todo, &p->todo_tail, job);
    pthread_cond_signal(&p->more);
    pthread_mutex_unlock(&p->lock);
}

const hv_tlspool_stats_t *hv_tlspool_stats(const hv_tlspool_t *p)
{
    return &p->stats;
}

static void on_closed(uv_handle_t *h)
{
    hv_tlspool_t *p = h->data;
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->more);
    free(p->threads);
    free(p);
}

void hv_tlspool_free(hv_tlspool_t *p)
{
    pthread_mutex_lock(&p->lock);
    p->stopping = 1;
    pthread_cond_broadcast(&p->more);
    pthread_mutex_unlock(&p->lock);
    for (unsigned i = 0; i < p->nthreads; i++)
        pthread_join(p->threads[i], NULL);
    /* Jobs never started (no worker left) are done too, unworked. */
    pthread_mutex_lock(&p->lock);
    while (p->todo != NULL) {
        hv_tlspool_job_t *job = p->todo;
        p->todo = job->next;
        job->cancelled = 1;
        push(&p->done, &p->done_tail, job);
    }
    p->todo_tail = NULL;
    pthread_mutex_unlock(&p->lock);
    run_done(p);
    uv_close((uv_handle_t *)&p->async, on_closed);
}
