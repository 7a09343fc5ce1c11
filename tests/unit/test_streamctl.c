/*
 * test_streamctl.c: status's reading of XINFO CONSUMERS (streamctl.h), from replies as a
 * server sends them (RESP bytes through hiredis's reader): Redis 7.0's and 7.2's, and replies
 * of the wrong shape, which fail without being trusted further.
 */
#include <hiredis/read.h>
#include <stdlib.h>
#include <string.h>

#include "harvestd/streamctl.h"
#include "test.h"

static redisReply *reply_of(const char *resp)
{
    redisReader *rd = redisReaderCreate();
    void *reply = NULL;
    ASSERT_NOT_NULL(rd);
    ASSERT_EQ(REDIS_OK, redisReaderFeed(rd, resp, strlen(resp)));
    ASSERT_EQ(REDIS_OK, redisReaderGetReply(rd, &reply));
    ASSERT_NOT_NULL(reply);
    redisReaderFree(rd);
    return reply;
}

/* The consumers of `resp` as "NAME=PENDING/IDLE ..." (IDLE -1: not told), or "error: WHY". */
static void consumers_of(const char *resp, char *out, size_t cap)
{
    redisReply *reply = reply_of(resp);
    hv_streamctl_tally_t t = {0};
    char err[256];
    if (hv_streamctl__consumers(reply, &t, err, sizeof(err)) != 0) {
        snprintf(out, cap, "error: %s", err);
    } else {
        size_t n = 0;
        out[0] = '\0';
        for (size_t i = 0; i < t.n && n < cap; i++) {
            int w = snprintf(out + n, cap - n, "%s%s=%" PRIu64 "/%" PRId64, i > 0 ? " " : "",
                             t.v[i].name, t.v[i].n, t.v[i].idle_ms);
            n += w > 0 ? (size_t)w : 0;
        }
    }
    hv_streamctl__tally_free(&t);
    freeReplyObject(reply);
}

#define ASSERT_CONSUMERS(want, resp)                                                               \
    do {                                                                                           \
        char got_[512];                                                                            \
        consumers_of((resp), got_, sizeof(got_));                                                  \
        if (strcmp(got_, (want)) != 0)                                                             \
            hv_test_fail(__FILE__, __LINE__, "got \"%s\", expected \"%s\"", got_, (want));         \
    } while (0)

TEST_IMPL(streamctl_consumers_as_servers_send_them)
{
    /* Redis 7.0: name, pending, idle. A consumer holding nothing is listed too. */
    ASSERT_CONSUMERS("a=5/1234 b=0/99",
                     "*2\r\n"
                     "*6\r\n$4\r\nname\r\n$1\r\na\r\n$7\r\npending\r\n:5\r\n$4\r\nidle\r\n:1234\r\n"
                     "*6\r\n$4\r\nname\r\n$1\r\nb\r\n$7\r\npending\r\n:0\r\n$4\r\nidle\r\n:99\r\n");
    /* Redis 7.2 adds inactive; fields in another order are read by name. */
    ASSERT_CONSUMERS("c:/spool=7/10", "*1\r\n*8\r\n$7\r\npending\r\n:7\r\n$8\r\ninactive\r\n:-1\r\n"
                                      "$4\r\nidle\r\n:10\r\n$4\r\nname\r\n$8\r\nc:/spool\r\n");
    /* No consumer yet. */
    ASSERT_CONSUMERS("", "*0\r\n");
    /* Field names as status lines; an idle time that is no count is left unknown. */
    ASSERT_CONSUMERS("d=1/-1 e=2/-1",
                     "*2\r\n*4\r\n+name\r\n$1\r\nd\r\n+pending\r\n:1\r\n"
                     "*6\r\n$4\r\nname\r\n$1\r\ne\r\n$7\r\npending\r\n:2\r\n$4\r\nidle\r\n:-5\r\n");
    /* One name twice (a server's fault): its counts add up, the shorter idle time wins. */
    ASSERT_CONSUMERS("f=3/20",
                     "*2\r\n"
                     "*6\r\n$4\r\nname\r\n$1\r\nf\r\n$7\r\npending\r\n:1\r\n$4\r\nidle\r\n:50\r\n"
                     "*6\r\n$4\r\nname\r\n$1\r\nf\r\n$7\r\npending\r\n:2\r\n$4\r\nidle\r\n:20\r\n");
}

TEST_IMPL(streamctl_consumers_of_the_wrong_shape_fail)
{
    ASSERT_CONSUMERS("error: not an array (type 1)", "$2\r\nok\r\n");
    ASSERT_CONSUMERS("error: not an array (type 3)", ":1\r\n");
    ASSERT_CONSUMERS("error: not an array (type 4)", "*-1\r\n");
    ASSERT_CONSUMERS("error: consumer 1 is not a list of fields (type 1, 0 elements)",
                     "*1\r\n$1\r\nx\r\n");
    ASSERT_CONSUMERS("error: consumer 1 is not a list of fields (type 4, 0 elements)",
                     "*1\r\n$-1\r\n");
    ASSERT_CONSUMERS("error: consumer 2 is not a list of fields (type 2, 3 elements)",
                     "*2\r\n*4\r\n$4\r\nname\r\n$1\r\na\r\n$7\r\npending\r\n:0\r\n"
                     "*3\r\n$4\r\nname\r\n$1\r\nb\r\n$7\r\npending\r\n");
    ASSERT_CONSUMERS("error: consumer 1: a field name of type 3", "*1\r\n*2\r\n:1\r\n$1\r\na\r\n");
    ASSERT_CONSUMERS("error: consumer 1: a field name of type 2", "*1\r\n*2\r\n*0\r\n$1\r\na\r\n");
    ASSERT_CONSUMERS("error: consumer 1 has no name", "*1\r\n*2\r\n$7\r\npending\r\n:1\r\n");
    ASSERT_CONSUMERS("error: consumer 1 has no name",
                     "*1\r\n*4\r\n$4\r\nname\r\n:7\r\n$7\r\npending\r\n:1\r\n");
    ASSERT_CONSUMERS("error: consumer 1 has no name",
                     "*1\r\n*4\r\n$4\r\nname\r\n*1\r\n$1\r\na\r\n$7\r\npending\r\n:1\r\n");
    ASSERT_CONSUMERS("error: consumer 1 has no pending count",
                     "*1\r\n*2\r\n$4\r\nname\r\n$1\r\na\r\n");
    ASSERT_CONSUMERS("error: consumer 1 has no pending count",
                     "*1\r\n*4\r\n$4\r\nname\r\n$1\r\na\r\n$7\r\npending\r\n$1\r\n5\r\n");
    ASSERT_CONSUMERS("error: consumer 1 has no pending count",
                     "*1\r\n*4\r\n$4\r\nname\r\n$1\r\na\r\n$7\r\npending\r\n:-1\r\n");
    ASSERT_CONSUMERS("error: consumer 1 has no pending count",
                     "*1\r\n*4\r\n$4\r\nname\r\n$1\r\na\r\n$7\r\npending\r\n$-1\r\n");
}
