#include "harvestd/buf.h"
#include "harvestd/common.h"
#include "test.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>

TEST_IMPL(buf_append_within_limit)
{
    hv_buf_t b;
    hv_buf_init(&b, 8);
    ASSERT_OK(hv_buf_append(&b, "abcd", 4));
    ASSERT_OK(hv_buf_append(&b, "efgh", 4));
    ASSERT_EQ(8, b.len);
    ASSERT_MEM_EQ("abcdefgh", b.data, 8);
    hv_buf_free(&b);
}

TEST_IMPL(buf_append_over_limit_leaves_buffer_unchanged)
{
    hv_buf_t b;
    hv_buf_init(&b, 8);
    ASSERT_OK(hv_buf_append(&b, "abcdef", 6));
    ASSERT_EQ(HV_ETOOBIG, hv_buf_append(&b, "xyz", 3));
    ASSERT_EQ(6, b.len);
    ASSERT_LE(b.cap, 8);
    hv_buf_free(&b);
}

TEST_IMPL(buf_steal_transfers_ownership)
{
    hv_buf_t b;
    size_t len;
    hv_buf_init(&b, 1 << 20);
    ASSERT_OK(hv_buf_append(&b, "hello", 5));
    char *p = hv_buf_steal(&b, &len);
    ASSERT_EQ(5, len);
    ASSERT_NULL(b.data);
    ASSERT_EQ(0, b.len);
    free(p);
}

TEST_IMPL(buf_presize_allocates_whole_pages_once_within_max)
{
    hv_buf_t b;
    hv_buf_init(&b, 100000);
    ASSERT_EQ(HV_ETOOBIG, hv_buf_presize(&b, 100001));
    ASSERT_NULL(b.data);
    ASSERT_OK(hv_buf_presize(&b, 40000));
    ASSERT_EQ(40960, b.cap); /* whole pages */
    char chunk[1000];
    memset(chunk, 'x', sizeof(chunk));
    for (int i = 0; i < 40; i++)
        ASSERT_OK(hv_buf_append(&b, chunk, sizeof(chunk)));
    ASSERT_EQ(40960, b.cap); /* filled without a reallocation */
    ASSERT_OK(hv_buf_presize(&b, 10));
    ASSERT_EQ(40960, b.cap); /* never shrinks */
    ASSERT_OK(hv_buf_presize(&b, 99000));
    ASSERT_EQ(100000, b.cap); /* rounding stops at the limit */
    ASSERT_OK(hv_buf_append(&b, "y", 1)); /* past the announced size: grows as usual */
    ASSERT_EQ(40001, b.len);
    ASSERT_EQ('y', b.data[40000]);
    hv_buf_free(&b);
}

TEST_IMPL(buf_steal_gives_back_growth_slack)
{
    hv_buf_t b;
    size_t len;
    hv_buf_init(&b, 1 << 20);
    char chunk[1000];
    memset(chunk, 'z', sizeof(chunk));
    for (int i = 0; i < 33; i++) /* 33,000 bytes: doubling stops at 65,536 */
        ASSERT_OK(hv_buf_append(&b, chunk, sizeof(chunk)));
    ASSERT_EQ(65536, b.cap);
    char *p = hv_buf_steal(&b, &len);
    ASSERT_EQ(33000, len);
    ASSERT_LT(malloc_usable_size(p), 36864 + 64); /* 33,000 rounded up to whole pages */
    ASSERT_EQ('z', p[0]);
    ASSERT_EQ('z', p[32999]);
    free(p);
}

TEST_IMPL(format_size_units)
{
    char s[32];
    hv_format_size(s, sizeof(s), 2u << 20);
    ASSERT_STR_EQ("2_mib", s);
    hv_format_size(s, sizeof(s), 64u << 10);
    ASSERT_STR_EQ("64_kib", s);
    hv_format_size(s, sizeof(s), 1000);
    ASSERT_STR_EQ("1000_bytes", s);
}
