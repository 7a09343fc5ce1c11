/*
 * test_streamkeys.c: a stream batch's output name: spelled as it always was while it fits a
 * file name, shortened with a hash of the whole name when it would not, and recognised by
 * merge either way.
 */
#include <stdlib.h>
#include <string.h>

#include "harvestd/common.h"
#include "harvestd/streamkeys.h"
#include "test.h"

/* 24 CJK characters and ".txt": 76 bytes, 220 once every non-ASCII byte is spelled %XX. */
static const char cjk[] = "\xe6\x95\xb0\xe6\x8d\xae\xe6\x8a\x93\xe5\x8f\x96\xe4\xbb\xbb\xe5\x8a\xa1"
                          "\xe6\x95\xb0\xe6\x8d\xae\xe6\x8a\x93\xe5\x8f\x96\xe4\xbb\xbb\xe5\x8a\xa1"
                          "\xe6\x95\xb0\xe6\x8d\xae\xe6\x8a\x93\xe5\x8f\x96\xe4\xbb\xbb\xe5\x8a\xa1"
                          "\xe6\x95\xb0\xe6\x8d\xae\xe6\x8a\x93\xe5\x8f\x96\xe4\xbb\xbb\xe5\x8a\xa1"
                          ".txt";

static void name_of(const char *batch, const char *consumer, char *out)
{
    ASSERT_OK(hv_streamkeys_output_name(batch, consumer, out, HV_STREAM_FILE_MAX + 1));
    /* The crash note, ".crashes" for ".jsonl", must fit too. */
    ASSERT_LE(strlen(out) - 6 + 8, HV_STREAM_FILE_MAX);
}

TEST_IMPL(streamkeys_names_that_fit_are_spelled_as_before)
{
    char name[HV_STREAM_FILE_MAX + 1];
    name_of("b1", "node-a", name);
    ASSERT_STR_EQ("b1.node-a.jsonl", name);
    name_of("urls.txt", "host:/var/spool", name);
    ASSERT_STR_EQ("urls.txt.host%3A%2Fvar%2Fspool.jsonl", name);
    name_of(".hidden/../x", "c", name);
    ASSERT_STR_EQ("%2Ehidden%2F..%2Fx.c.jsonl", name);
    ASSERT(hv_streamkeys_is_output_of("urls.txt.host%3A%2Fvar%2Fspool.jsonl", "urls.txt"));
    ASSERT(!hv_streamkeys_is_output_of("urls.txt.host%3A%2Fvar%2Fspool.jsonl", "urls"));
    ASSERT(!hv_streamkeys_is_output_of("urls.txt.jsonl", "urls.txt")); /* no consumer */
}

TEST_IMPL(streamkeys_a_name_too_long_is_shortened_with_its_hash)
{
    char name[HV_STREAM_FILE_MAX + 1], again[HV_STREAM_FILE_MAX + 1];
    /* The name that stopped every daemon: 220 spelled bytes and a consumer part of 34. */
    name_of(cjk, "worker-01%3A%2Fvar%2Fspool%2Fharvestd", name);
    ASSERT_NOT_NULL(strchr(name, '~'));
    ASSERT(strncmp(name, "%E6%95%B0", 9) == 0);
    ASSERT(hv_streamkeys_is_output_of(name, cjk));
    name_of(cjk, "worker-01%3A%2Fvar%2Fspool%2Fharvestd", again);
    ASSERT_STR_EQ(name, again); /* the same name every time, on every daemon */
    /* Cut between two spelled bytes, never inside one. */
    const char *tilde = strchr(name, '~');
    size_t prefix = (size_t)(tilde - name);
    ASSERT_EQ(0, prefix % 3);
    ASSERT_EQ(16, strcspn(tilde + 1, "."));
}

TEST_IMPL(streamkeys_long_names_differing_at_the_end_do_not_share_a_file)
{
    char *a = hv_xmalloc(10001), *b = hv_xmalloc(10001);
    char na[HV_STREAM_FILE_MAX + 1], nb[HV_STREAM_FILE_MAX + 1];
    memset(a, 'x', 10000);
    memset(b, 'x', 10000);
    a[10000] = b[10000] = '\0';
    b[9999] = 'y';
    name_of(a, "c", na);
    name_of(b, "c", nb);
    ASSERT(strcmp(na, nb) != 0);
    ASSERT(hv_streamkeys_is_output_of(na, a));
    ASSERT(!hv_streamkeys_is_output_of(na, b));
    ASSERT(!hv_streamkeys_is_output_of(nb, a));
    /* A name that only begins the same is not the batch either. */
    a[200] = '\0';
    ASSERT(!hv_streamkeys_is_output_of(na, a));
    free(a);
    free(b);
}

TEST_IMPL(streamkeys_the_limit_exactly)
{
    char name[HV_STREAM_FILE_MAX + 1], batch[300];
    /* With consumer "c", the batch part may have 255 - 8 - 1 - 1 = 245 bytes. */
    memset(batch, 'a', 245);
    batch[245] = '\0';
    name_of(batch, "c", name);
    ASSERT_NULL(strchr(name, '~'));
    ASSERT_EQ(245 + 8, strlen(name));
    batch[245] = 'a';
    batch[246] = '\0';
    name_of(batch, "c", name);
    ASSERT_NOT_NULL(strchr(name, '~'));
    ASSERT(hv_streamkeys_is_output_of(name, batch));
}

TEST_IMPL(streamkeys_a_long_consumer_is_shortened_too)
{
    char name[HV_STREAM_FILE_MAX + 1], consumer[400];
    memset(consumer, '/', 399);
    consumer[399] = '\0';
    name_of("b", consumer, name);
    const char *dot = strchr(name, '.');
    ASSERT_NOT_NULL(dot);
    ASSERT_LE(strlen(dot + 1) - 6, HV_STREAM_CONSUMER_PART_MAX);
    ASSERT(hv_streamkeys_is_output_of(name, "b"));
}

TEST_IMPL(streamkeys_a_forged_shortened_name_is_not_the_batch)
{
    char name[HV_STREAM_FILE_MAX + 1];
    name_of(cjk, "worker-01%3A%2Fvar%2Fspool%2Fharvestd", name);
    char *tilde = strchr(name, '~');
    ASSERT_NOT_NULL(tilde);
    ASSERT(hv_streamkeys_is_output_of(name, cjk));
    tilde[1] = tilde[1] == '0' ? '1' : '0'; /* another hash */
    ASSERT(!hv_streamkeys_is_output_of(name, cjk));
}

TEST_IMPL(streamkeys_entry_fields_the_daemon_can_place)
{
    uint64_t v = 0;
    ASSERT_OK(hv_streamkeys_line_field("1", 1, &v));
    ASSERT_EQ(1, v);
    ASSERT_OK(hv_streamkeys_line_field("9007199254740991", 16, &v));
    ASSERT(v == 9007199254740991ULL);
    static const char *const bad[] = {"", "0", "-1", "abc", " 16", "16 ", "+3", "1e3",
                                      "9007199254740992", "18446744073709551615",
                                      "18446744073709551616", "00000000000000001"};
    for (size_t i = 0; i < HV_ARRAY_SIZE(bad); i++)
        if (hv_streamkeys_line_field(bad[i], strlen(bad[i]), &v) == 0)
            hv_test_fail(__FILE__, __LINE__, "line '%s' taken as %llu", bad[i],
                         (unsigned long long)v);
    ASSERT_EQ(-1, hv_streamkeys_line_field("12\0" "3", 4, &v)); /* a NUL is not a digit */

    ASSERT(hv_streamkeys_batch_field_ok("plain", 5));
    ASSERT(hv_streamkeys_batch_field_ok(cjk, strlen(cjk)));
    ASSERT(!hv_streamkeys_batch_field_ok("plain\0x", 7));
    ASSERT(!hv_streamkeys_batch_field_ok("a\nb", 3));
    ASSERT(!hv_streamkeys_batch_field_ok("", 0));
    char *big = hv_xmalloc(HV_STREAM_BATCH_FIELD_MAX + 1);
    memset(big, 'x', HV_STREAM_BATCH_FIELD_MAX + 1);
    ASSERT(hv_streamkeys_batch_field_ok(big, HV_STREAM_BATCH_FIELD_MAX));
    ASSERT(!hv_streamkeys_batch_field_ok(big, HV_STREAM_BATCH_FIELD_MAX + 1));
    free(big);
}
