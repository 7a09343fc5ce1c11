/*
 * test_secretfile.c: a secret's file read within its bound (secretfile.h). The refusals
 * (mode, not a regular file, missing) are tested through their users, in test_redis.c and
 * test_config.c, word for word.
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harvestd/secretfile.h"
#include "test.h"

TEST_IMPL(secret_file_reads_within_its_bound)
{
    char path[512], buf[8], err[600];
    size_t len = 99;
    snprintf(path, sizeof(path), "%s", hv_test_write_mode_file("secret", "0123456789", 10, 0400));
    /* Longer than the buffer: the buffer full, which is how a caller tells. */
    ASSERT_OK(hv_secret_file_read(path, "test file", buf, sizeof(buf), &len, err, sizeof(err)));
    ASSERT_EQ(sizeof(buf), len);
    ASSERT_OK(memcmp(buf, "01234567", 8));
    ASSERT_OK(truncate(path, 3));
    ASSERT_OK(hv_secret_file_read(path, "test file", buf, sizeof(buf), &len, err, sizeof(err)));
    ASSERT_EQ(3, len);
    /* A FIFO in the file's place is refused, not waited on. */
    snprintf(path, sizeof(path), "%s/fifo", hv_test_tmpdir());
    ASSERT_OK(mkfifo(path, 0600));
    ASSERT_EQ(-1, hv_secret_file_read(path, "test file", buf, sizeof(buf), &len, err,
                                      sizeof(err)));
    ASSERT(strstr(err, "the test file ") == err && strstr(err, "is not a regular file"));
    ASSERT_EQ(0, len);
}
