/* runner.c: runs every registered unit test and prints TAP. `unit-tests [substring]`. */
#include <stdarg.h>
#include <stdlib.h>

#include "test.h"

#define MAX_TESTS 1024

static struct {
    const char *name;
    hv_test_fn fn;
} tests[MAX_TESTS];
static int ntests;
static jmp_buf test_jmp;
static const char *skip_reason;

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
    skip_reason = why;
    longjmp(test_jmp, 2);
}

static int by_name(const void *a, const void *b)
{
    const char *const *x = a, *const *y = b;
    return strcmp(*x, *y);
}

/* setjmp lives in its own frame so that main's counters cannot be clobbered by longjmp. */
static int run_one(hv_test_fn fn)
{
    int rc = setjmp(test_jmp);
    if (rc == 0)
        fn();
    return rc;
}

int main(int argc, char **argv)
{
    const char *filter = argc > 1 ? argv[1] : NULL;
    int selected = 0, failed = 0, n = 0;

    /* Registration order depends on the linker; sort for stable output. */
    qsort(tests, (size_t)ntests, sizeof(tests[0]), by_name);
    for (int i = 0; i < ntests; i++)
        if (filter == NULL || strstr(tests[i].name, filter) != NULL)
            selected++;
    printf("1..%d\n", selected);
    for (int i = 0; i < ntests; i++) {
        if (filter != NULL && strstr(tests[i].name, filter) == NULL)
            continue;
        n++;
        fflush(stdout);
        int rc = run_one(tests[i].fn);
        if (rc == 0) {
            printf("ok %d - %s\n", n, tests[i].name);
        } else if (rc == 2) {
            printf("ok %d - %s # SKIP %s\n", n, tests[i].name, skip_reason);
        } else {
            printf("not ok %d - %s\n", n, tests[i].name);
            failed++;
        }
    }
    if (failed)
        printf("# %d of %d tests failed\n", failed, selected);
    return failed ? 1 : 0;
}
