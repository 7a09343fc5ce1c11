/*
 * runner.c: runs every registered unit test and prints TAP. `unit-tests [substring]`.
 *
 * Each test runs in a child process of its own, forked for it from a runner that has run
 * nothing yet, so a test starts from a clean process whatever the tests before it did, and a
 * test that crashes, hangs or trips a sanitizer fails alone: the runner goes on with the next
 * one. The parent waits for the child until a deadline (30 s, or HV_TEST_TIMEOUT seconds),
 * then kills it with SIGKILL and reaps it. The verdict comes from two places: the child's
 * exit status (a signal, a non-zero status such as a sanitizer's, or a normal exit) and an
 * outcome record the child fills in when the test returns, fails an assertion or skips, kept
 * in memory shared with the parent. A child that exits non-zero fails even if its test
 * passed: that is how a leak found by LeakSanitizer at the child's exit fails its own test.
 *
 * The child's stdout and stderr go to a temporary file that the parent copies into the TAP
 * stream once the child is gone, below the test's result line and as `#` comments, only
 * when the test failed. Capturing (rather than sharing the runner's stdout) keeps the stream
 * valid TAP whatever a test prints, puts a failure's assertion message or sanitizer report
 * under the line of the test it belongs to, leaves no half line from a child killed mid-write,
 * and cannot block a chatty child the way a full pipe would.
 *
 * HV_TEST_NOFORK=1 runs every test in the runner's own process instead (for a debugger):
 * no timeout, output straight to stdout, and the first crash ends the run.
 */
#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harvestd/common.h"
#include "test.h"

#define MAX_TESTS 1024
#define DEFAULT_TIMEOUT_S 30u
#define MAX_TIMEOUT_S 86400ul

static struct {
    const char *name;
    hv_test_fn fn;
} tests[MAX_TESTS];
static int ntests;
static jmp_buf test_jmp;

typedef enum {
    OUTCOME_NONE, /* the test has not come back (still running, or it left another way) */
    OUTCOME_PASS,
    OUTCOME_FAIL,
    OUTCOME_SKIP,
} outcome_t;

/* Filled in by the process that runs the test; shared with the parent when forked. */
typedef struct {
    outcome_t outcome;
    char skip_reason[256];
    char tmpdir[64]; /* made for the test, removed by the runner once the test is over */
} result_t;

static result_t *result;

void hv_test_register(const char *name, hv_test_fn fn)
{
    if (ntests == MAX_TESTS) {
        fprintf(stderr, "runner: too many tests\n");
        abort();
    }
    tests[ntests].name = name;
    tests[ntests].fn = fn;
    ntests++;
}

void hv_test_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    printf("# %s:%d: ", file, line);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    longjmp(test_jmp, 1);
}

void hv_test_skip(const char *why)
{
    snprintf(result->skip_reason, sizeof(result->skip_reason), "%s", why);
    longjmp(test_jmp, 2);
}

/* ---- files */

#define MAX_TMPPATHS 32

static char tmppaths[MAX_TMPPATHS][512];
static int ntmppaths;

const char *hv_test_tmpdir(void)
{
    if (result->tmpdir[0] == '\0') {
        snprintf(result->tmpdir, sizeof(result->tmpdir), "/tmp/harvestd-unit-XXXXXX");
        if (mkdtemp(result->tmpdir) == NULL) {
            result->tmpdir[0] = '\0';
            hv_test_fail(__FILE__, __LINE__, "mkdtemp: %s", strerror(errno));
        }
    }
    return result->tmpdir;
}

const char *hv_test_tmppath(const char *name)
{
    if (ntmppaths == MAX_TMPPATHS)
        hv_test_fail(__FILE__, __LINE__, "more than %d temporary paths", MAX_TMPPATHS);
    char *p = tmppaths[ntmppaths++];
    int n = snprintf(p, sizeof(tmppaths[0]), "%s/%s", hv_test_tmpdir(), name);
    if (n < 0 || (size_t)n >= sizeof(tmppaths[0]))
        hv_test_fail(__FILE__, __LINE__, "temporary path too long: %s", name);
    return p;
}

char *hv_test_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        hv_test_fail(__FILE__, __LINE__, "%s: %s", path, strerror(errno));
    size_t cap = 4096, n = 0, got;
    char *data = hv_xmalloc(cap);
    while ((got = fread(data + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (n == cap - 1)
            data = hv_xrealloc(data, cap *= 2);
    }
    int err = ferror(f);
    fclose(f);
    if (err) {
        free(data);
        hv_test_fail(__FILE__, __LINE__, "%s: cannot read it", path);
    }
    data[n] = '\0';
    if (len != NULL)
        *len = n;
    return data;
}

void hv_test_write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        hv_test_fail(__FILE__, __LINE__, "%s: %s", path, strerror(errno));
    size_t put = fwrite(data, 1, len, f);
    if (fclose(f) != 0 || put != len)
        hv_test_fail(__FILE__, __LINE__, "%s: cannot write it", path);
}

const char *hv_test_write_mode_file(const char *name, const void *data, size_t len,
                                    unsigned mode)
{
    const char *path = hv_test_tmppath(name);
    hv_test_write_file(path, data, len);
    if (chmod(path, (mode_t)mode) != 0)
        hv_test_fail(__FILE__, __LINE__, "%s: %s", path, strerror(errno));
    return path;
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if ((type == FTW_DP ? rmdir(path) : unlink(path)) != 0)
        fprintf(stderr, "runner: cannot remove %s: %s\n", path, strerror(errno));
    return 0;
}

static void remove_tmpdir(void)
{
    if (result->tmpdir[0] != '\0')
        nftw(result->tmpdir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    result->tmpdir[0] = '\0';
}

/* ---- loops */

typedef struct {
    int active; /* open handles that would keep uv_run going */
    int open;   /* open handles, active or not */
    char types[200];
} leftovers_t;

static void count_handle(uv_handle_t *h, void *arg)
{
    leftovers_t *l = arg;
    if (uv_is_closing(h))
        return;
    l->open++;
    if (uv_is_active(h))
        l->active++;
}

static void close_handle(uv_handle_t *h, void *arg)
{
    leftovers_t *l = arg;
    if (uv_is_closing(h))
        return;
    size_t used = strlen(l->types);
    snprintf(l->types + used, sizeof(l->types) - used, "%s%s", used ? ", " : "",
             uv_handle_type_name(uv_handle_get_type(h)));
    uv_close(h, NULL);
}

void hv_test_loop_close(const char *file, int line, uv_loop_t *loop)
{
    leftovers_t l;

    /* Let what is already under way finish (file requests, connects cancelled by a close,
     * close callbacks), but stop at the first open handle that would keep the loop running:
     * the test should have closed it, and waiting for it would only time out. */
    for (;;) {
        memset(&l, 0, sizeof(l));
        uv_walk(loop, count_handle, &l);
        if (l.active > 0 || !uv_loop_alive(loop))
            break;
        uv_run(loop, UV_RUN_ONCE);
    }
    /* Whatever is still open was left behind. Close it, so that the report below is about the
     * handles and not about the loop that cannot close because of them. */
    memset(&l, 0, sizeof(l));
    uv_walk(loop, count_handle, &l);
    uv_walk(loop, close_handle, &l);
    uv_run(loop, UV_RUN_DEFAULT);
    int rc = uv_loop_close(loop);
    if (l.open > 0)
        hv_test_fail(file, line, "%d handle%s left open: %s", l.open, l.open == 1 ? "" : "s",
                     l.types);
    if (rc != 0)
        hv_test_fail(file, line, "uv_loop_close() returned %s", uv_err_name(rc));
}

/* ---- running */

static int by_name(const void *a, const void *b)
{
    const char *const *x = a, *const *y = b;
    return strcmp(*x, *y);
}

/* setjmp lives in its own frame so that the caller's variables cannot be clobbered by
 * longjmp. Records and returns the outcome. */
static outcome_t run_here(hv_test_fn fn)
{
    result->outcome = OUTCOME_NONE;
    result->skip_reason[0] = '\0';
    ntmppaths = 0;
    switch (setjmp(test_jmp)) {
    case 0:
        fn();
        result->outcome = OUTCOME_PASS;
        break;
    case 2:
        result->outcome = OUTCOME_SKIP;
        break;
    default:
        result->outcome = OUTCOME_FAIL;
        break;
    }
    return result->outcome;
}

static void die(const char *what)
{
    fprintf(stderr, "runner: %s: %s\n", what, strerror(errno));
    exit(2);
}

static unsigned timeout_seconds(void)
{
    const char *s = getenv("HV_TEST_TIMEOUT");
    if (s == NULL || *s == '\0')
        return DEFAULT_TIMEOUT_S;
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno != 0 || *end != '\0' || *s < '0' || *s > '9' || v == 0 || v > MAX_TIMEOUT_S) {
        fprintf(stderr, "runner: HV_TEST_TIMEOUT=%s is not a number of seconds (1 to %lu)\n", s,
                MAX_TIMEOUT_S);
        exit(2);
    }
    return (unsigned)v;
}

/* Reap `pid` into *status before `timeout_s` seconds have passed: 0, or -1 when the deadline
 * came first (the child is still running). SIGCHLD is blocked, so a child that exits between
 * waitpid and sigtimedwait leaves its signal pending and the wait returns at once. */
static int reap_until(pid_t pid, unsigned timeout_s, int *status)
{
    struct timespec deadline, now;
    sigset_t chld;

    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += (time_t)timeout_s;
    for (;;) {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid)
            return 0;
        if (r < 0 && errno != EINTR)
            die("waitpid");
        clock_gettime(CLOCK_MONOTONIC, &now);
        struct timespec left = {deadline.tv_sec - now.tv_sec, deadline.tv_nsec - now.tv_nsec};
        if (left.tv_nsec < 0) {
            left.tv_sec--;
            left.tv_nsec += 1000000000L;
        }
        if (left.tv_sec < 0)
            return -1;
        if (sigtimedwait(&chld, NULL, &left) < 0 && errno != EAGAIN && errno != EINTR)
            die("sigtimedwait");
    }
}

/* Copy a failed test's captured output into the TAP stream, each line as a comment. */
static void copy_output(FILE *f)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;

    rewind(f);
    while ((len = getline(&line, &cap, f)) > 0) {
        if (line[len - 1] == '\n')
            line[--len] = '\0';
        fputs(line[0] == '#' ? "" : "# ", stdout);
        fputs(line, stdout);
        fputc('\n', stdout);
    }
    free(line);
}

/* Run one test in a child that writes into `out`; returns its outcome, with *why set for a
 * failure that the child could not report itself. */
static outcome_t run_forked(hv_test_fn fn, FILE *out, unsigned timeout_s,
                            const sigset_t *child_mask, char *why, size_t why_len)
{
    result->outcome = OUTCOME_NONE;
    /* Anything still buffered would otherwise be written twice, once by each process. */
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        if (dup2(fileno(out), STDOUT_FILENO) < 0 || dup2(fileno(out), STDERR_FILENO) < 0)
            _exit(125);
        sigprocmask(SIG_SETMASK, child_mask, NULL);
        outcome_t o = run_here(fn);
        fflush(stdout);
        /* exit, not _exit: a sanitizer's leak check runs at exit and fails this test alone. */
        exit(o == OUTCOME_FAIL ? 1 : 0);
    }

    int status = 0;
    if (reap_until(pid, timeout_s, &status) != 0) {
        kill(pid, SIGKILL);
        while (waitpid(pid, &status, 0) < 0)
            if (errno != EINTR)
                die("waitpid");
        snprintf(why, why_len, "timed out after %u s", timeout_s);
        return OUTCOME_FAIL;
    }
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        const char *abbrev = sigabbrev_np(sig);
        snprintf(why, why_len, "crashed: signal %d (SIG%s)", sig, abbrev ? abbrev : "?");
        return OUTCOME_FAIL;
    }
    if (result->outcome == OUTCOME_FAIL)
        return OUTCOME_FAIL; /* its assertion message is in `out` */
    if (WEXITSTATUS(status) != 0) {
        snprintf(why, why_len, "exited with status %d", WEXITSTATUS(status));
        return OUTCOME_FAIL;
    }
    if (result->outcome == OUTCOME_NONE) {
        snprintf(why, why_len, "exited with status 0 before the test returned");
        return OUTCOME_FAIL;
    }
    return result->outcome;
}

/* Run a test as number `n` and print its TAP lines; returns 1 if it failed. */
static int run_test(int n, const char *name, hv_test_fn fn, int nofork, unsigned timeout_s,
                    const sigset_t *child_mask)
{
    char why[128] = "";
    FILE *out = NULL;
    outcome_t o;

    if (nofork) {
        o = run_here(fn);
    } else {
        out = tmpfile();
        if (out == NULL)
            die("tmpfile");
        o = run_forked(fn, out, timeout_s, child_mask, why, sizeof(why));
    }
    remove_tmpdir();
    if (o == OUTCOME_PASS) {
        printf("ok %d - %s\n", n, name);
    } else if (o == OUTCOME_SKIP) {
        printf("ok %d - %s # SKIP %s\n", n, name, result->skip_reason);
    } else {
        printf("not ok %d - %s\n", n, name);
        if (out != NULL)
            copy_output(out);
        if (why[0] != '\0')
            printf("# %s\n", why);
    }
    if (out != NULL)
        fclose(out);
    fflush(stdout);
    return o == OUTCOME_FAIL;
}

int main(int argc, char **argv)
{
    const char *filter = argc > 1 ? argv[1] : NULL;
    const char *nofork_env = getenv("HV_TEST_NOFORK");
    int nofork = nofork_env != NULL && strcmp(nofork_env, "1") == 0;
    unsigned timeout_s = timeout_seconds();
    int selected = 0, failed = 0, n = 0;
    sigset_t child_mask;

    result = mmap(NULL, sizeof(*result), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (result == MAP_FAILED)
        die("mmap");
    sigprocmask(SIG_SETMASK, NULL, &child_mask);
    if (!nofork) {
        /* The parent waits for SIGCHLD with sigtimedwait, which needs the signal blocked and
         * not ignored (an ignored SIGCHLD would reap children before waitpid sees them). */
        sigset_t chld;
        signal(SIGCHLD, SIG_DFL);
        sigemptyset(&chld);
        sigaddset(&chld, SIGCHLD);
        sigprocmask(SIG_BLOCK, &chld, NULL);
    }

    /* Registration order depends on the linker; sort for stable output. */
    qsort(tests, (size_t)ntests, sizeof(tests[0]), by_name);
    for (int i = 0; i < ntests; i++)
        if (filter == NULL || strstr(tests[i].name, filter) != NULL)
            selected++;
    printf("1..%d\n", selected);
    for (int i = 0; i < ntests; i++) {
        if (filter != NULL && strstr(tests[i].name, filter) == NULL)
            continue;
        failed += run_test(++n, tests[i].name, tests[i].fn, nofork, timeout_s, &child_mask);
    }
    if (failed)
        printf("# %d of %d tests failed\n", failed, selected);
    return failed ? 1 : 0;
}
