/*
 * test_sched.c: which waiting job gets the next request slot, and when (sched.h).
 *
 * The scheduler is pure, so a test drives it by hand: a clock it advances (f->now), a global
 * gate it can close, and a start callback that only writes down which job started. Jobs are
 * named by their path ("a1" is http://127.0.0.1/a1); host 'a' is 127.0.0.1, 'b' 127.0.0.2 and
 * so on. Nothing is fetched: a job "ends" when the test calls done(). Each check of started()
 * lists, in order, the jobs started since the previous check.
 *
 * Per-host limits and pacing come from a real hv_polite_t built from the configuration.
 */
#include <stdlib.h>
#include <string.h>

#include "harvestd/common.h"
#include "harvestd/config.h"
#include "harvestd/job.h"
#include "harvestd/polite.h"
#include "harvestd/record.h"
#include "harvestd/robots.h"
#include "harvestd/sched.h"
#include "harvestd/url.h"
#include "test.h"

#define MAX_JOBS 32
#define MAX_FLOWS 4
#define T0 UINT64_C(100000) /* the clock at the start of each test */

typedef struct {
    hv_config_t cfg;
    hv_polite_t *polite;
    hv_sched_t *s;
    uint64_t now;
    int gate;   /* the global gate: 1 open */
    int refuse; /* start ends each job at once (robots.txt refused it) */
    hv_flow_t *flows[MAX_FLOWS];
    int flow_gate[MAX_FLOWS];
    unsigned nflows;
    hv_job_t *jobs[MAX_JOBS + 1]; /* by id, from 1 */
    int running[MAX_JOBS + 1];
    unsigned njobs;
    char log[512];         /* names started since the last started() */
    char dropped_log[512]; /* names passed to the drop callback */
    char seen[512];
} fx_t;

static uint64_t on_clock(void *ud)
{
    const fx_t *f = ud;
    return f->now;
}

static int on_gate(void *ud)
{
    const fx_t *f = ud;
    return f->gate;
}

static int on_flow_gate(void *ud)
{
    const int *open = ud;
    return *open;
}

static const char *job_name(const hv_job_t *job)
{
    return job->url.target + 1;
}

static void log_name(char *log, size_t cap, const hv_job_t *job)
{
    size_t n = strlen(log);
    snprintf(log + n, cap - n, "%s%s", n > 0 ? " " : "", job_name(job));
}

static void on_start(void *ud, hv_job_t *job)
{
    fx_t *f = ud;
    log_name(f->log, sizeof(f->log), job);
    if (f->refuse)
        hv_sched_done(f->s, job);
    else
        f->running[job->id] = 1;
}

static void on_drop(void *ud, hv_job_t *job)
{
    fx_t *f = ud;
    ASSERT_NULL(job->host);
    log_name(f->dropped_log, sizeof(f->dropped_log), job);
}

/* A new flow (a batch), its gate open. */
static hv_flow_t *fx_flow(fx_t *f, int privileged)
{
    ASSERT_LT(f->nflows, MAX_FLOWS);
    unsigned i = f->nflows++;
    f->flow_gate[i] = 1;
    f->flows[i] = hv_sched_flow_new(f->s, on_flow_gate, &f->flow_gate[i], privileged);
    ASSERT(hv_sched_flow_data(f->flows[i]) == &f->flow_gate[i]);
    return f->flows[i];
}

/* A scheduler over `concurrency` slots, `per_host` requests per host and `delay_ms` between
 * request starts on one host, with robots.txt rules awaited when `robots` is set; returns its
 * first flow (an ordinary one). */
static hv_flow_t *fx_init(fx_t *f, unsigned concurrency, unsigned per_host, uint64_t delay_ms,
                          int robots)
{
    char err[256];
    memset(f, 0, sizeof(*f));
    hv_config_defaults(&f->cfg);
    f->cfg.per_host = per_host;
    f->cfg.host_delay_ms = delay_ms;
    ASSERT_OK(hv_config_finish(&f->cfg, err, sizeof(err)));
    f->polite = hv_polite_new(&f->cfg);
    f->now = T0;
    f->gate = 1;
    f->s = hv_sched_new(concurrency, f->polite, robots, on_clock, on_start, on_gate, f);
    return fx_flow(f, 0);
}

static int *flow_gate(fx_t *f, const hv_flow_t *flow)
{
    for (unsigned i = 0; i < f->nflows; i++)
        if (f->flows[i] == flow)
            return &f->flow_gate[i];
    hv_test_fail(__FILE__, __LINE__, "not a flow of this test");
}

/* A job for http://127.0.0.N/NAME, `name` being `len` bytes. */
static hv_job_t *new_job(fx_t *f, char host, const char *name, size_t len)
{
    char text[128];
    hv_url_t url;
    ASSERT_LT(f->njobs, MAX_JOBS);
    snprintf(text, sizeof(text), "http://127.0.0.%d/%.*s", host - 'a' + 1, (int)len, name);
    ASSERT_OK(hv_url_parse(&url, text, strlen(text), NULL));
    unsigned id = ++f->njobs;
    f->jobs[id] = hv_job_new(id, HV_JOB_PAGE, hv_record_new(text, strlen(text)), &url);
    return f->jobs[id];
}

/* Submit one job per space-separated name in `names`, all for host `host`. */
static void submit(fx_t *f, hv_flow_t *flow, char host, const char *names, int front)
{
    for (const char *name = names; *name != '\0'; name += strspn(name, " ")) {
        size_t len = strcspn(name, " ");
        hv_sched_submit(f->s, flow, new_job(f, host, name, len), front);
        name += len;
    }
}

static hv_job_t *find_job(fx_t *f, const char *name)
{
    for (unsigned i = 1; i <= f->njobs; i++)
        if (strcmp(job_name(f->jobs[i]), name) == 0)
            return f->jobs[i];
    hv_test_fail(__FILE__, __LINE__, "no job %s", name);
}

/* The running job `name` ends: its slot is free. */
static void done(fx_t *f, const char *name)
{
    hv_job_t *job = find_job(f, name);
    ASSERT(f->running[job->id]);
    f->running[job->id] = 0;
    hv_sched_done(f->s, job);
}

/* The running job `name` failed and is to be tried again at `not_before`. */
static void retry_at(fx_t *f, const char *name, uint64_t not_before)
{
    hv_job_t *job = find_job(f, name);
    done(f, name);
    hv_sched_delay(f->s, job, not_before);
}

/* The names started since the last call, in order. */
static const char *started(fx_t *f)
{
    snprintf(f->seen, sizeof(f->seen), "%s", f->log);
    f->log[0] = '\0';
    return f->seen;
}

/* Kick with `max` and check that exactly the jobs named in `want` start, in that order. */
#define KICK(f, max, want) kick_line(__LINE__, (f), (max), (want))

static void kick_line(int line, fx_t *f, unsigned max, const char *want)
{
    unsigned n = hv_sched_kick(f->s, max), names = 0;
    for (const char *w = want; *w != '\0'; w += strspn(w, " "), names++)
        w += strcspn(w, " ");
    const char *got = started(f);
    if (strcmp(got, want) != 0 || n != names)
        hv_test_fail(__FILE__, line, "kick(%u) started \"%s\" (returned %u), want \"%s\"", max, got,
                     n, want);
}

static int by_name(const void *a, const void *b)
{
    const char *const *x = a, *const *y = b;
    return strcmp(*x, *y);
}

/* The names passed to the drop callback so far, sorted (drop promises no order). */
static const char *dropped(fx_t *f)
{
    char copy[sizeof(f->dropped_log)], *names[MAX_JOBS];
    size_t n = 0, len = 0;
    snprintf(copy, sizeof(copy), "%s", f->dropped_log);
    for (char *w = copy; *w != '\0' && n < MAX_JOBS;) {
        names[n++] = w;
        w += strcspn(w, " ");
        if (*w == ' ')
            *w++ = '\0';
    }
    qsort(names, n, sizeof(names[0]), by_name);
    f->seen[0] = '\0';
    for (size_t i = 0; i < n; i++)
        len +=
            (size_t)snprintf(f->seen + len, sizeof(f->seen) - len, "%s%s", i ? " " : "", names[i]);
    return f->seen;
}

/* The clock moves to `now`; the caller's timer fires. */
static void advance(fx_t *f, uint64_t now)
{
    f->now = now;
    hv_sched_tick(f->s);
}

static hv_host_t *host_of(fx_t *f, char host)
{
    char key[64];
    snprintf(key, sizeof(key), "http://127.0.0.%d:80", host - 'a' + 1);
    return hv_sched_host_find(f->s, key);
}

/* The flow's jobs waiting for a slot, waiting out a delay and holding a slot. */
#define CHECK_FLOW(flow, waiting, delayed, inflight)                                               \
    check_flow_line(__LINE__, (flow), (waiting), (delayed), (inflight))

static void check_flow_line(int line, const hv_flow_t *flow, unsigned waiting, unsigned delayed,
                            unsigned inflight)
{
    if (hv_sched_flow_waiting(flow) != waiting || hv_sched_flow_delayed(flow) != delayed ||
        hv_sched_flow_inflight(flow) != inflight)
        hv_test_fail(__FILE__, line, "flow waiting/delayed/inflight %u/%u/%u, want %u/%u/%u",
                     hv_sched_flow_waiting(flow), hv_sched_flow_delayed(flow),
                     hv_sched_flow_inflight(flow), waiting, delayed, inflight);
}

/* End the test: drop what still waits, end what still runs, and free everything. Once no
 * job refers to a host, its entry must be gone. */
static void fx_free(fx_t *f)
{
    for (unsigned i = 0; i < f->nflows; i++)
        hv_sched_drop(f->s, f->flows[i], on_drop, f);
    for (unsigned i = 1; i <= f->njobs; i++)
        if (f->running[i])
            done(f, job_name(f->jobs[i]));
    ASSERT_EQ(0, hv_sched_waiting(f->s));
    ASSERT_EQ(0, hv_sched_delayed(f->s));
    ASSERT_EQ(0, hv_sched_inflight(f->s));
    ASSERT_EQ(0, hv_sched_hosts(f->s));
    for (unsigned i = 0; i < f->nflows; i++)
        hv_sched_flow_free(f->s, f->flows[i]);
    hv_sched_free(f->s);
    hv_polite_free(f->polite);
    for (unsigned i = 1; i <= f->njobs; i++)
        hv_job_free(f->jobs[i]);
}

/* ---- limits ---- */

TEST_IMPL(sched_global_concurrency_limit)
{
    fx_t f;
    hv_flow_t *flow = fx_init(&f, 3, 4, 0, 0);
    submit(&f, flow, 'a', "a1 a2", 0);
    submit(&f, flow, 'b', "b1 b2", 0);
    submit(&f, flow, 'c', "c1 c2", 0);
    KICK(&f, 100, "a1 b1 c1");
    ASSERT_EQ(3, hv_sched_inflight(f.s));
    ASSERT_EQ(3, hv_sched_waiting(f.s));
    KICK(&f, 100, ""); /* every slot is taken, whatever the host */
    done(&f, "b1");
    KICK(&f, 100, "a2");
    fx_free(&f);
}

/* The host's limit is its polite entry's current one (per_host, or less when throttled). */
TEST_IMPL(sched_per_host_limit)
{
    fx_t f;
    hv_flow_t *flow = fx_init(&f, 10, 2, 0, 0);
    submit(&f, flow, 'a', "a1 a2 a3 a4", 0);
    KICK(&f, 100, "a1 a2");
    hv_host_t *a = host_of(&f, 'a');
    ASSERT_NOT_NULL(a);
    ASSERT_EQ(2, a->pol->limit);
    ASSERT_EQ(2, a->inflight);
    done(&f, "a1");
    KICK(&f, 100, "a3");

    /* The throttle lowers the limit: nothing starts until the host is below it. */
    a->pol->limit = 1;
    hv_sched_host_changed(f.s, a);
    done(&f, "a2");
    KICK(&f, 100, "");
    done(&f, "a3");
    KICK(&f, 100, "a4");
    fx_free(&f);
}

/* ---- fairness ---- */

/* Within a flow hosts take turns, and a host at its limit drops out of the turn: a slow host's
 * URLs queued first never hold back the URLs for other hosts (no head-of-line blocking). */
TEST_IMPL(sched_round_robin_between_hosts_no_head_of_line_blocking)
{
    fx_t f;
    hv_flow_t *flow = fx_init(&f, 10, 1, 0, 0);
    submit(&f, flow, 'a', "a1 a2 a3", 0);
    submit(&f, flow, 'b', "b1 b2 b3", 0);
    submit(&f, flow, 'c', "c1", 0);
    KICK(&f, 100, "a1 b1 c1");
    /* a1 hangs; b keeps going. */
    done(&f, "b1");
    KICK(&f, 100, "b2");
    done(&f, "b2");
    KICK(&f, 100, "b3");
    ASSERT_EQ(2, hv_sched_flow_waiting(flow)); /* a2 a3, behind the slow a1 only */
    done(&f, "a1");
    KICK(&f, 100, "a2");

    /* With room for all, the turns interleave the hosts. */
    fx_t g;
    flow = fx_init(&g, 10, 4, 0, 0);
    submit(&g, flow, 'a', "a1 a2 a3", 0);
    submit(&g, flow, 'b', "b1 b2", 0);
    KICK(&g, 100, "a1 b1 a2 b2 a3");
    fx_free(&g);
    fx_free(&f);
}

/* Between flows the one with the fewest requests in flight goes first: a small batch that
 * arrives while a big one is running is served at once, even on the same host. */
TEST_IMPL(sched_least_loaded_flow_first_small_batch_not_starved)
{
    fx_t f;
    hv_flow_t *big = fx_init(&f, 5, 10, 0, 0);
    submit(&f, big, 'a', "big1 big2 big3 big4 big5 big6 big7 big8", 0);
    KICK(&f, 2, "big1 big2");
    hv_flow_t *small = fx_flow(&f, 0);
    submit(&f, small, 'a', "small1 small2", 0);
    /* small (0 in flight) before big (2); at 2 and 2 the one that waited longest. */
    KICK(&f, 100, "small1 small2 big3");
    CHECK_FLOW(small, 0, 0, 2);
    CHECK_FLOW(big, 5, 0, 3);
    fx_free(&f);
}

/* Two flows with equal load alternate. */
TEST_IMPL(sched_equal_flows_take_turns)
{
    fx_t f;
    hv_flow_t *one = fx_init(&f, 10, 10, 0, 0), *two = fx_flow(&f, 0);
    submit(&f, one, 'a', "one1 one2 one3", 0);
    submit(&f, two, 'b', "two1 two2 two3", 0);
    KICK(&f, 100, "one1 two1 one2 two2 one3 two3");
    fx_free(&f);
}

/* `front` queues ahead of the host's other waiting jobs (a redirect that already waited). */
TEST_IMPL(sched_front_submission_goes_ahead)
{
    fx_t f;
    hv_flow_t *flow = fx_init(&f, 10, 1, 0, 0);
    submit(&f, flow, 'a', "a1 a2", 0);
    submit(&f, flow, 'a', "urgent", 1);
    KICK(&f, 100, "urgent");
    done(&f, "urgent");
    KICK(&f, 100, "a1");
    fx_free(&f);
}

/* ---- slots and kicks ---- */

/* hv_sched_done() frees the slot but starts nothing itself: jobs start only from kick. */
TEST_IMPL(sched_done_releases_slot_for_next_kick)
{
    fx_t f;
    hv_flow_t *flow = fx_init(&f, 1, 4, 0, 0);
    submit(&f, flow, 'a', "a1 a2", 0);
    KICK(&f, 100, "a1");
    CHECK_FLOW(flow, 1, 0, 1);
    done(&f, "a1");
    ASSERT_STR_EQ("", started(&f));
    CHECK_FLOW(flow, 1, 0, 0);
    ASSERT_EQ(0, hv_sched_inflight(f.s));
    KICK(&f, 100, "a2");
    CHECK_FLOW(flow, 0, 0, 1);
    fx_free(&f);
}

TEST_IMPL(sched_kick_starts_at_most_max)
{
    fx_t f;
    hv_flow_t *flow = fx_init(&f, 10, 4, 0, 0);
    submit(&f, flow, 'a', "a1 a2 a3", 0);
    submit(&f, flow, 'b', "b1 b2", 0);
    KICK(&f, 2, "a1 b1");
    KICK(&f, 0, "");
    KICK(&f, 1, "a2");
    KICK(&f, 10, "b2 a3"); /* fewer waiting than max */
    fx_free(&f);
}

/* `start` may end its job at once (robots.txt refused it): the slot is free again within the
 * same kick, which goes on with the next job. */
TEST_IMPL(sched_start_may_end_its_job_at_once)
{
    fx_t f;
    hv_flow_t *flow = fx_init(&f, 1, 1, 0, 0);
    submit(&f, flow, 'a', "a1 a2 a3", 0);
    f.refuse = 1;
    KICK(&f, 100, "a1 a2 a3");
    CHECK_FLOW(flow, 0, 0, 0);
    ASSERT_EQ(0, hv_sched_hosts(f.s));
    fx_free(&f);
}

/* ---- gates ---- */

/* The global gate (downstream is full) holds every flow; nothing is lost meanwhile. */
TEST_IMPL(sched_global_gate_closed_starts_nothing)
{
    fx_t f;
    hv_flow_t *flow = fx_init(&f, 10, 4, 0, 0);
    submit(&f, flow, 'a', "a1 a2", 0);
    f.gate = 0;
    KICK(&f, 100, "");
    CHECK_FLOW(flow, 2, 0, 0);
    f.gate = 1;
    KICK(&f, 100, "a1 a2");
    fx_free(&f);
}

/* A flow's own gate (its batch's backpressure) holds that flow only: the others go on, even
 * for the same host. */
TEST_IMPL(sched_flow_gate_closed_holds_only_that_flow)
{
    fx_t f;
    hv_flow_t *held = fx_init(&f, 10, 4, 0, 0), *other = fx_flow(&f, 0);
    submit(&f, held, 'a', "held1 held2", 0);
    submit(&f, other, 'a', "other1", 0);
    *flow_gate(&f, held) = 0;
    KICK(&f, 100, "other1");
    CHECK_FLOW(held, 2, 0, 0);
    /* With every ready flow held, nothing starts. */
    KICK(&f, 100, "");
    *flow_gate(&f, held) = 1;
    KICK(&f, 100, "held1 held2");
    fx_free(&f);
}

/* ---- time: pacing and delays ---- */

/* With host_delay, a host's next request waits until its pol->next_start_ms; next_wakeup says
 * when that is, and tick (the caller's timer) lets it go. Other hosts are not held. */
TEST_IMPL(sched_host_delay_paces_starts_until_tick)
{
    fx_t f;
    hv_flow_t *flow = fx_init(&f, 10, 4, 1000, 0);
    submit(&f, flow, 'a', "a1 a2 a3", 0);
    submit(&f, flow, 'b', "b1", 0);
    ASSERT_EQ(0, hv_sched_next_wakeup(f.s));
    KICK(&f, 100, "a1 b1");
    ASSERT_EQ(T0 + 1000, host_of(&f, 'a')->pol->next_start_ms);
    ASSERT_EQ(T0 + 1000, hv_sched_next_wakeup(f.s));
    advance(&f, T0 + 999);
    KICK(&f, 100, "");
    advance(&f, T0 + 1000);
    KICK(&f, 100, "a2");
    ASSERT_EQ(T0 + 2000, hv_sched_next_wakeup(f.s));
    /* A late timer: the delay counts from the start, not from when it was due. */
    advance(&f, T0 + 2500);
    KICK(&f, 100, "a3");
    ASSERT_EQ(T0 + 3500, host_of(&f, 'a')->pol->next_start_ms);
    fx_free(&f);
}

/* A delayed job (a retry after its backoff) holds no slot and does not start before its
 * not-before time, even on an idle host; once due, tick queues it ahead of its flow's other
 * jobs for that host: it has waited already. */
TEST_IMPL(sched_delayed_job_waits_then_goes_first)
{
    fx_t f;
    hv_flow_t *flow = fx_init(&f, 10, 1, 0, 0);
    submit(&f, flow, 'a', "retry a1 a2 a3", 0);
    KICK(&f, 100, "retry");
    CHECK_FLOW(flow, 3, 0, 1);
    retry_at(&f, "retry", T0 + 5000);
    CHECK_FLOW(flow, 3, 1, 0);
    ASSERT_EQ(1, hv_sched_delayed(f.s));
    ASSERT_EQ(T0 + 5000, hv_sched_next_wakeup(f.s));

    KICK(&f, 100, "a1");
    CHECK_FLOW(flow, 2, 1, 1);
    advance(&f, T0 + 4999);
    done(&f, "a1");
    KICK(&f, 100, "a2"); /* the host is free, but the retry is not due */
    CHECK_FLOW(flow, 1, 1, 1);

    advance(&f, T0 + 5000);
    CHECK_FLOW(flow, 2, 0, 1);
    ASSERT_EQ(0, hv_sched_next_wakeup(f.s));
    done(&f, "a2");
    KICK(&f, 100, "retry"); /* ahead of a3 */
    CHECK_FLOW(flow, 1, 0, 1);
    fx_free(&f);
}

/* Delayed jobs come due in not-before order, whatever order they were delayed in. */
TEST_IMPL(sched_delayed_jobs_due_in_time_order)
{
    fx_t f;
    hv_flow_t *flow = fx_init(&f, 10, 10, 0, 0);
    submit(&f, flow, 'a', "late early middle", 0);
    KICK(&f, 100, "late early middle");
    retry_at(&f, "late", T0 + 3000);
    retry_at(&f, "early", T0 + 1000);
    retry_at(&f, "middle", T0 + 2000);
    CHECK_FLOW(flow, 0, 3, 0);
    ASSERT_EQ(T0 + 1000, hv_sched_next_wakeup(f.s));
    advance(&f, T0 + 1000);
    KICK(&f, 100, "early");
    ASSERT_EQ(T0 + 2000, hv_sched_next_wakeup(f.s));
    advance(&f, T0 + 2000);
    KICK(&f, 100, "middle");
    ASSERT_EQ(T0 + 3000, hv_sched_next_wakeup(f.s));
    advance(&f, T0 + 3000);
    KICK(&f, 100, "late");
    ASSERT_EQ(0, hv_sched_next_wakeup(f.s));
    CHECK_FLOW(flow, 0, 0, 3);
    fx_free(&f);
}

/* The caller arms one timer: for whichever comes first, a delayed job or a paced host. */
TEST_IMPL(sched_next_wakeup_is_min_of_delayed_and_paced)
{
    fx_t f;
    hv_flow_t *flow = fx_init(&f, 10, 4, 1000, 0);
    submit(&f, flow, 'a', "a1 a2", 0);
    submit(&f, flow, 'b', "b1", 0);
    KICK(&f, 100, "a1 b1");
    ASSERT_EQ(T0 + 1000, hv_sched_next_wakeup(f.s)); /* a2: paced */
    retry_at(&f, "b1", T0 + 3000);
    ASSERT_EQ(T0 + 1000, hv_sched_next_wakeup(f.s));
    retry_at(&f, "a1", T0 + 400);
    ASSERT_EQ(T0 + 400, hv_sched_next_wakeup(f.s));
    advance(&f, T0 + 400);
    ASSERT_EQ(T0 + 1000, hv_sched_next_wakeup(f.s)); /* a1 is due but its host is paced */
    KICK(&f, 100, "");
    advance(&f, T0 + 1000);
    ASSERT_EQ(T0 + 3000, hv_sched_next_wakeup(f.s));
    KICK(&f, 100, "a1");
    fx_free(&f);
}

/* ---- dropping a flow ---- */

/* Dropping a flow (its batch is cancelled) hands each of its waiting and delayed jobs to the
 * callback; its running jobs and the other flows are untouched. */
TEST_IMPL(sched_drop_removes_only_that_flows_waiting_and_delayed_jobs)
{
    fx_t f;
    hv_flow_t *gone = fx_init(&f, 10, 1, 0, 0), *kept = fx_flow(&f, 0);
    submit(&f, gone, 'a', "g-run g-wait", 0);
    submit(&f, gone, 'b', "g-retry", 0);
    submit(&f, kept, 'c', "k-retry k-wait", 0);
    KICK(&f, 100, "g-run k-retry g-retry");
    retry_at(&f, "g-retry", T0 + 1000);
    retry_at(&f, "k-retry", T0 + 1000);
    CHECK_FLOW(gone, 1, 1, 1);
    CHECK_FLOW(kept, 1, 1, 0);

    hv_sched_drop(f.s, gone, on_drop, &f);
    ASSERT_STR_EQ("g-retry g-wait", dropped(&f));
    CHECK_FLOW(gone, 0, 0, 1);
    CHECK_FLOW(kept, 1, 1, 0);
    ASSERT_EQ(1, hv_sched_delayed(f.s));
    ASSERT_NULL(host_of(&f, 'b'));     /* only the dropped retry referred to it */
    ASSERT_NOT_NULL(host_of(&f, 'a')); /* g-run still runs there */
    advance(&f, T0 + 1000);
    KICK(&f, 100, "k-retry");
    fx_free(&f);
}

/* Which delayed jobs drop finds must not depend on where they sit in the scheduler's heap.
 * Delaying these six in this order leaves "f-late" in a leaf and "f-soon" last; removing the
 * leaf moves "f-soon" into its place and then up, past the position drop has reached. */
TEST_IMPL(sched_drop_finds_every_delayed_job_of_the_flow)
{
    static const struct {
        int of_dropped_flow;
        const char *name;
        uint64_t not_before;
    } delays[] = {
        {0, "x1", 1},      {0, "x10", 10}, {0, "x2", 2},
        {1, "f-late", 20}, {0, "x21", 21}, {1, "f-soon", 3},
    };
    fx_t f;
    hv_flow_t *kept = fx_init(&f, 10, 10, 0, 0), *gone = fx_flow(&f, 0);
    for (size_t i = 0; i < HV_ARRAY_SIZE(delays); i++)
        submit(&f, delays[i].of_dropped_flow ? gone : kept, 'a', delays[i].name, 0);
    ASSERT_EQ(6, hv_sched_kick(f.s, 100));
    for (size_t i = 0; i < HV_ARRAY_SIZE(delays); i++)
        retry_at(&f, delays[i].name, T0 + delays[i].not_before);
    CHECK_FLOW(gone, 0, 2, 0);

    hv_sched_drop(f.s, gone, on_drop, &f);
    ASSERT_EQ(0, hv_sched_flow_delayed(gone));
    /* What is left is still a heap: the earliest kept job is due first. */
    ASSERT_EQ(T0 + 1, hv_sched_next_wakeup(f.s));
    ASSERT_STR_EQ("f-late f-soon", dropped(&f));
    CHECK_FLOW(kept, 0, 4, 0);
    ASSERT_EQ(4, hv_sched_delayed(f.s));
    fx_free(&f);
}

/* ---- robots.txt ---- */

/* The robots job for `host` as the engine makes it: on a privileged flow, the host's rules
 * FETCHING meanwhile. */
static void fetch_robots(fx_t *f, hv_flow_t *privileged, char host)
{
    submit(f, privileged, host, "robots.txt", 0);
    host_of(f, host)->pol->robots_state = HV_ROBOTS_FETCHING;
}

/* The robots job ended with rules valid until `expires`: the host's queues are re-evaluated. */
static void robots_known(fx_t *f, hv_host_t *h, uint64_t expires)
{
    h->pol->robots = hv_robots_allow_all();
    h->pol->robots_state = HV_ROBOTS_READY;
    h->pol->robots_expires_ms = expires;
    done(f, "robots.txt");
    hv_sched_host_changed(f->s, h);
}

/* With robots.txt obeyed, an ordinary flow's jobs wait for their host's rules, and the host
 * is named once however many jobs wait; the privileged flow's robots job starts anyway, and
 * once the rules are known the waiting jobs go. */
TEST_IMPL(sched_robots_jobs_wait_for_rules_host_named_once)
{
    fx_t f;
    hv_flow_t *flow = fx_init(&f, 10, 4, 0, 1), *robots = fx_flow(&f, 1);
    submit(&f, flow, 'a', "a1 a2 a3", 0);
    KICK(&f, 100, "");
    hv_host_t *a = hv_sched_robots_wanted(f.s);
    ASSERT_NOT_NULL(a);
    ASSERT(a == host_of(&f, 'a'));
    ASSERT_STR_EQ("127.0.0.1", a->name);
    ASSERT_NULL(hv_sched_robots_wanted(f.s)); /* once, not once per job */

    fetch_robots(&f, robots, 'a');
    submit(&f, flow, 'a', "a4", 0);
    ASSERT_NULL(hv_sched_robots_wanted(f.s)); /* a fetch is in flight already */
    KICK(&f, 100, "robots.txt");
    CHECK_FLOW(flow, 4, 0, 0);

    robots_known(&f, a, f.now + 60000);
    KICK(&f, 100, "a1 a2 a3 a4");
    CHECK_FLOW(flow, 0, 0, 4);
    fx_free(&f);
}

/* Hosts are named in the order their first job arrived, each once. */
TEST_IMPL(sched_robots_wanted_names_each_host_once)
{
    fx_t f;
    hv_flow_t *one = fx_init(&f, 10, 4, 0, 1), *two = fx_flow(&f, 0);
    submit(&f, one, 'b', "b1 b2", 0);
    submit(&f, two, 'a', "a1", 0);
    submit(&f, two, 'b', "b3", 0);
    ASSERT(hv_sched_robots_wanted(f.s) == host_of(&f, 'b'));
    ASSERT(hv_sched_robots_wanted(f.s) == host_of(&f, 'a'));
    ASSERT_NULL(hv_sched_robots_wanted(f.s));
    fx_free(&f);
}

/* Rules past their expiry still apply while the next copy is fetched: the host is named
 * again, but its jobs do not wait. */
TEST_IMPL(sched_robots_expired_rules_named_again_jobs_go_on)
{
    fx_t f;
    hv_flow_t *flow = fx_init(&f, 10, 4, 0, 1), *robots = fx_flow(&f, 1);
    submit(&f, flow, 'a', "a1", 0);
    hv_host_t *a = hv_sched_robots_wanted(f.s);
    fetch_robots(&f, robots, 'a');
    KICK(&f, 100, "robots.txt");
    robots_known(&f, a, T0 + 1000);
    KICK(&f, 100, "a1");

    f.now = T0 + 1000;
    submit(&f, flow, 'a', "a2", 0);
    ASSERT(hv_sched_robots_wanted(f.s) == a);
    KICK(&f, 100, "a2");
    fx_free(&f);
}

/* Without `robots` nothing waits for rules and no host is named. */
TEST_IMPL(sched_robots_off_nothing_waits)
{
    fx_t f;
    hv_flow_t *flow = fx_init(&f, 10, 4, 0, 0);
    submit(&f, flow, 'a', "a1", 0);
    ASSERT_NULL(hv_sched_robots_wanted(f.s));
    KICK(&f, 100, "a1");
    fx_free(&f);
}

/* ---- host entries ---- */

/* A host entry lives while a job waits for it or runs on it, so memory follows the active
 * hosts; what polite knows about the host outlives it. */
TEST_IMPL(sched_host_entries_freed_when_unreferenced)
{
    fx_t f;
    hv_flow_t *flow = fx_init(&f, 10, 4, 0, 0);
    submit(&f, flow, 'a', "a1", 0);
    submit(&f, flow, 'b', "b1 b2", 0);
    ASSERT_EQ(2, hv_sched_hosts(f.s));
    hv_host_t *a = host_of(&f, 'a');
    ASSERT_STR_EQ("http://127.0.0.1:80", a->key);
    ASSERT_STR_EQ("http://127.0.0.1:80", a->pol->key);
    ASSERT_EQ(80, a->port);
    ASSERT_EQ(1, a->is_ip);
    hv_hostpol_t *pol = a->pol;
    pol->limit = 3; /* as the throttle would leave it */
    KICK(&f, 2, "a1 b1");
    ASSERT_EQ(2, hv_sched_hosts(f.s)); /* a1 runs, b2 waits */
    done(&f, "a1");
    ASSERT_EQ(1, hv_sched_hosts(f.s));
    ASSERT_NULL(host_of(&f, 'a'));
    done(&f, "b1");
    ASSERT_EQ(1, hv_sched_hosts(f.s)); /* b2 still waits */

    submit(&f, flow, 'a', "a2", 0);
    ASSERT(host_of(&f, 'a')->pol == pol);
    ASSERT_EQ(3, host_of(&f, 'a')->pol->limit);
    KICK(&f, 100, "b2 a2");
    done(&f, "a2");
    done(&f, "b2");
    ASSERT_EQ(0, hv_sched_hosts(f.s));
    fx_free(&f);
}
