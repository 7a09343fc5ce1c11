/*
 * test.h: the unit-test harness. Tests register themselves with TEST_IMPL and run under a
 * TAP runner (runner.c). A failed ASSERT prints both sides with file:line and abandons the
 * test; the runner then goes on with the next one. Each test runs in a process of its own
 * with a deadline (see runner.c), so a crash or a hang fails that test alone.
 *
 *   TEST_IMPL(buf_append_limit) {
 *       ASSERT_EQ(HV_ETOOBIG, hv_buf_append(&b, "x", 1));
 *   }
 */
#ifndef HARVESTD_TEST_H
#define HARVESTD_TEST_H

#include <inttypes.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <uv.h>

typedef void (*hv_test_fn)(void);

void hv_test_register(const char *name, hv_test_fn fn);
void hv_test_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));
void hv_test_skip(const char *why) __attribute__((noreturn));

#define TEST_IMPL(name)                                                                    \
    static void test_##name(void);                                                         \
    __attribute__((constructor)) static void register_##name(void)                         \
    {                                                                                      \
        hv_test_register(#name, test_##name);                                              \
    }                                                                                      \
    static void test_##name(void)

#define ASSERT(expr)                                                                       \
    do {                                                                                   \
        if (!(expr))                                                                       \
            hv_test_fail(__FILE__, __LINE__, "assertion failed: %s", #expr);               \
    } while (0)

#define ASSERT_INT_OP(a, op, b)                                                            \
    do {                                                                                   \
        intmax_t a_ = (intmax_t)(a), b_ = (intmax_t)(b);                                   \
        if (!(a_ op b_))                                                                   \
            hv_test_fail(__FILE__, __LINE__, "%s %s %s: %jd vs %jd", #a, #op, #b, a_, b_); \
    } while (0)

#define ASSERT_EQ(a, b) ASSERT_INT_OP(a, ==, b)
#define ASSERT_NE(a, b) ASSERT_INT_OP(a, !=, b)
#define ASSERT_LT(a, b) ASSERT_INT_OP(a, <, b)
#define ASSERT_LE(a, b) ASSERT_INT_OP(a, <=, b)
#define ASSERT_GT(a, b) ASSERT_INT_OP(a, >, b)
#define ASSERT_GE(a, b) ASSERT_INT_OP(a, >=, b)
#define ASSERT_OK(a) ASSERT_EQ(0, a)

#define ASSERT_NULL(p)                                                                     \
    do {                                                                                   \
        if ((p) != NULL)                                                                   \
            hv_test_fail(__FILE__, __LINE__, "%s is not NULL", #p);                        \
    } while (0)

#define ASSERT_NOT_NULL(p)                                                                 \
    do {                                                                                   \
        if ((p) == NULL)                                                                   \
            hv_test_fail(__FILE__, __LINE__, "%s is NULL", #p);                            \
    } while (0)

#define ASSERT_STR_EQ(a, b)                                                                \
    do {                                                                                   \
        const char *a_ = (a), *b_ = (b);                                                   \
        if (a_ == NULL || b_ == NULL || strcmp(a_, b_) != 0)                               \
            hv_test_fail(__FILE__, __LINE__, "%s == %s: \"%s\" vs \"%s\"", #a, #b,         \
                         a_ ? a_ : "(null)", b_ ? b_ : "(null)");                          \
    } while (0)

#define ASSERT_MEM_EQ(a, b, n)                                                             \
    do {                                                                                   \
        if (memcmp((a), (b), (n)) != 0)                                                    \
            hv_test_fail(__FILE__, __LINE__, "%s and %s differ in the first %zu bytes", #a, \
                         #b, (size_t)(n));                                                 \
    } while (0)

#define RETURN_SKIP(why) hv_test_skip(why)

/*
 * Files: a test's own temporary directory under /tmp, made on first use and removed by the
 * runner when the test is over, whatever its outcome. A path from hv_test_tmppath() stays
 * valid until the test ends. hv_test_read_file() and hv_test_write_file() fail the test on
 * any error; hv_test_read_file() returns a NUL-terminated copy (the caller frees it).
 */
const char *hv_test_tmpdir(void);
const char *hv_test_tmppath(const char *name);
char *hv_test_read_file(const char *path, size_t *len);
void hv_test_write_file(const char *path, const void *data, size_t len);
/* hv_test_write_file() into hv_test_tmppath(name), then chmod to `mode`: the path. */
const char *hv_test_write_mode_file(const char *name, const void *data, size_t len,
                                    unsigned mode);

/*
 * The end of every test that runs a loop (libuv's MAKE_VALGRIND_HAPPY, made strict): lets
 * what is under way finish (requests, close callbacks), then fails the test if any handle is
 * still open, naming their types, after closing them; then asserts uv_loop_close() == 0.
 * A test closes what it opened; this only proves it did.
 *
 *   hv_conn_close(c);
 *   uv_close((uv_handle_t *)&server, NULL);
 *   ASSERT_LOOP_CLOSE(&loop);
 */
void hv_test_loop_close(const char *file, int line, uv_loop_t *loop);
#define ASSERT_LOOP_CLOSE(loop) hv_test_loop_close(__FILE__, __LINE__, (loop))

#endif
