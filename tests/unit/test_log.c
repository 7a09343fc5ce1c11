/*
 * test_log.c: log lines as written to stderr (captured in a file): one line per event
 * whatever the values hold.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harvestd/log.h"
#include "test.h"

/* What hv_log_write() writes for `value` in "event=x value=%s", read back from a file that
 * stood in for stderr. Freed by the caller. */
static char *logged(const char *value, size_t *len)
{
    const char *path = hv_test_tmppath("stderr");
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0);
    int saved = dup(STDERR_FILENO);
    ASSERT_GE(saved, 0);
    ASSERT_EQ(STDERR_FILENO, dup2(fd, STDERR_FILENO));
    hv_log_write(HV_LOG_ERROR, "event=x value=%s", value);
    dup2(saved, STDERR_FILENO);
    close(saved);
    close(fd);
    return hv_test_read_file(path, len);
}

TEST_IMPL(log_control_bytes_cannot_forge_a_line)
{
    size_t len;
    char *text = logged("ERR no\nharvestd: level=error event=forged\r\x1b[2J\x7f\t.", &len);
    ASSERT_STR_EQ("harvestd: level=error event=x value=ERR no\\x0aharvestd: level=error "
                  "event=forged\\x0d\\x1b[2J\\x7f\\x09.\n",
                  text);
    ASSERT_EQ(strlen(text), len);
    free(text);
}

TEST_IMPL(log_long_line_is_cut_and_still_ends_the_line)
{
    char value[6000];
    memset(value, '\n', sizeof(value) - 1);
    value[sizeof(value) - 1] = '\0';
    size_t len;
    char *text = logged(value, &len);
    ASSERT_LE(len, 4096);
    ASSERT_EQ('\n', text[len - 1]);
    ASSERT_NULL(memchr(text, '\n', len - 1)); /* one line: every LF of the value escaped */
    /* Cut at a whole escape, never inside one. */
    const char *last = strrchr(text, '\\');
    ASSERT_NOT_NULL(last);
    ASSERT_EQ(text + len - 1, last + 4);
    free(text);
}

TEST_IMPL(log_plain_text_is_unchanged)
{
    size_t len;
    char *text = logged("caf\xc3\xa9 \"quoted\" 100%", &len);
    ASSERT_STR_EQ("harvestd: level=error event=x value=caf\xc3\xa9 \"quoted\" 100%\n", text);
    free(text);
}
