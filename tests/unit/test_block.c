/*
 * test_block.c: the block detector (block.h). It is pure: each test feeds attempts, pages
 * and probe outcomes at times of its own and checks the states, verdicts and signs.
 */
#include <stdio.h>
#include <string.h>

#include "harvestd/block.h"
#include "test.h"

#define HOST "http://shop.test:80"
#define DELAY 1000

static hv_block_t *detector(void)
{
    hv_block_params_t p = {.same_body = 3, .probe_delay_ms = DELAY,
                           .probe_max_delay_ms = 8 * DELAY};
    return hv_block_new(&p);
}

/* A 2xx page of HOST: URL /pN with body digest `digest` and `bytes`. */
static hv_block_verdict_t page(hv_block_t *b, unsigned n, uint64_t digest, int64_t bytes,
                               uint64_t now, hv_block_change_t *change, hv_fault_t *why)
{
    char url[64];
    snprintf(url, sizeof(url), "http://shop.test/p%u", n);
    hv_block_page_t pg = {.url = url, .http_status = 200, .digest = digest, .bytes = bytes,
                          .title = "t", .stored_bytes = -1};
    return hv_block_page(b, HOST, &pg, now, change, why);
}

static const char *sign(hv_fault_t f)
{
    static char text[HV_DETAIL_TEXT_MAX];
    hv_detail_format(text, sizeof(text), f.code, f.arg);
    return text;
}

/* Ten real pages, then the same body from every URL: the third such makes the host suspect
 * and is held, the probe of a real page gets the block page: blocked, and the next page with
 * that body fails while a real one passes. */
TEST_IMPL(block_same_body_suspect_probe_blocked)
{
    hv_block_t *b = detector();
    hv_block_change_t c;
    hv_fault_t why;
    for (unsigned i = 0; i < 10; i++)
        ASSERT_EQ(HV_BLOCK_PASS, page(b, i, 1000 + i, 5000, 10, &c, &why));
    ASSERT_EQ(HV_BLOCK_PASS, page(b, 10, 42, 300, 20, &c, &why));
    ASSERT_EQ(HV_BLOCK_PASS, page(b, 11, 42, 300, 21, &c, &why));
    ASSERT_EQ(HV_BLOCK_UNCHANGED, c);
    ASSERT_EQ(HV_BLOCK_HOLD, page(b, 12, 42, 300, 22, &c, &why));
    ASSERT_EQ(HV_BLOCK_BECAME_SUSPECT, c);
    ASSERT_EQ(HV_BLOCK_SUSPECT, hv_block_state(b, HOST));
    ASSERT_STR_EQ("same_body_as_3_urls", sign(hv_block_why(b, HOST)));
    /* Pages in flight: the shared body waits, a real one passes. */
    ASSERT_EQ(HV_BLOCK_HOLD, page(b, 13, 42, 300, 23, &c, &why));
    ASSERT_EQ(HV_BLOCK_PASS, page(b, 14, 77, 5000, 23, &c, &why));
    ASSERT_EQ(1, hv_block_stats(b)->suspect);

    /* The probe is due after the pause, for the newest page of its own. */
    const char *url;
    ASSERT_EQ(22 + DELAY, hv_block_next_due(b));
    ASSERT_NULL(hv_block_probe_due(b, 22 + DELAY - 1, &url));
    ASSERT_STR_EQ(HOST, hv_block_probe_due(b, 22 + DELAY, &url));
    ASSERT_STR_EQ("http://shop.test/p9", url);
    ASSERT_EQ(0, hv_block_next_due(b)); /* asked for: no other until it ends */
    ASSERT_EQ(HV_BLOCK_BECAME_BLOCKED,
              hv_block_probe_ended(b, HOST, 200, 1, 42, 300, 0.0, 1100));
    ASSERT_EQ(HV_BLOCK_BLOCKED, hv_block_state(b, HOST));
    ASSERT_EQ(0, hv_block_stats(b)->suspect);
    ASSERT_EQ(1, hv_block_stats(b)->blocked);
    ASSERT_EQ(1, hv_block_stats(b)->verdicts_blocked);

    ASSERT_EQ(HV_BLOCK_FAIL, page(b, 15, 42, 300, 1200, &c, &why));
    ASSERT_STR_EQ("same_body_as_3_urls", sign(why));
    ASSERT_EQ(HV_BLOCK_PASS, page(b, 16, 78, 5000, 1200, &c, &why));
    ASSERT(hv_block_refuses(b, HOST, &why));
    ASSERT(!hv_block_refuses(b, "http://other.test:80", &why));
    hv_block_free(b);
}

/* Identical pages that are real (soft 404s): the probe gets its page back, the host is clear,
 * and the shared digest no longer makes it suspect. */
TEST_IMPL(block_probe_with_content_clears_and_remembers_the_digest)
{
    hv_block_t *b = detector();
    hv_block_change_t c;
    hv_fault_t why;
    const char *url;
    ASSERT_EQ(HV_BLOCK_PASS, page(b, 0, 500, 8000, 0, &c, &why));
    for (unsigned i = 1; i <= 2; i++)
        ASSERT_EQ(HV_BLOCK_PASS, page(b, i, 404, 900, 0, &c, &why));
    ASSERT_EQ(HV_BLOCK_HOLD, page(b, 3, 404, 900, 0, &c, &why));
    ASSERT_NOT_NULL(hv_block_probe_due(b, DELAY, &url));
    ASSERT_STR_EQ("http://shop.test/p0", url); /* not one that gave the shared body */
    ASSERT_EQ(HV_BLOCK_BECAME_CLEAR, hv_block_probe_ended(b, HOST, 200, 1, 500, 8000, 0, DELAY));
    ASSERT_EQ(HV_BLOCK_CLEAR, hv_block_state(b, HOST));
    ASSERT_EQ(1, hv_block_stats(b)->verdicts_cleared);
    for (unsigned i = 4; i < 20; i++) {
        ASSERT_EQ(HV_BLOCK_PASS, page(b, i, 404, 900, DELAY, &c, &why));
        ASSERT_EQ(HV_BLOCK_UNCHANGED, c);
    }
    hv_block_free(b);
}

/* The same URL twice is one URL; another host's pages are another host's. */
TEST_IMPL(block_same_body_counts_distinct_urls_per_host)
{
    hv_block_t *b = detector();
    hv_block_change_t c;
    hv_fault_t why;
    ASSERT_EQ(HV_BLOCK_PASS, page(b, 100, 7, 5000, 0, &c, &why));
    for (unsigned i = 0; i < 5; i++)
        ASSERT_EQ(HV_BLOCK_PASS, page(b, 7, 42, 300, i, &c, &why));
    hv_block_page_t pg = {.url = "http://other.test/x", .http_status = 200, .digest = 42,
                          .bytes = 300, .stored_bytes = -1};
    ASSERT_EQ(HV_BLOCK_PASS, hv_block_page(b, "http://other.test:80", &pg, 5, &c, &why));
    ASSERT_EQ(HV_BLOCK_PASS, page(b, 8, 42, 300, 6, &c, &why));
    ASSERT_EQ(HV_BLOCK_CLEAR, hv_block_state(b, HOST));
    ASSERT_EQ(HV_BLOCK_HOLD, page(b, 9, 42, 300, 7, &c, &why));
    hv_block_free(b);
}

/* 403s after successes: a burst once they are 5 of the last 8 attempts. */
TEST_IMPL(block_status_burst_after_successes)
{
    hv_block_t *b = detector();
    for (unsigned i = 0; i < 4; i++)
        ASSERT_EQ(HV_BLOCK_UNCHANGED, hv_block_attempt(b, HOST, 200, 5000, 10, i));
    for (unsigned i = 0; i < 4; i++)
        ASSERT_EQ(HV_BLOCK_UNCHANGED, hv_block_attempt(b, HOST, 403, -1, 1, 10 + i));
    ASSERT_EQ(HV_BLOCK_BECAME_SUSPECT, hv_block_attempt(b, HOST, 403, -1, 1, 20));
    ASSERT_STR_EQ("status_burst_403", sign(hv_block_why(b, HOST)));
    /* A host that never answered 2xx is not "blocked", only failing. */
    for (unsigned i = 0; i < 8; i++)
        ASSERT_EQ(HV_BLOCK_UNCHANGED, hv_block_attempt(b, "http://deny.test:80", 403, -1, 1, i));
    /* No response says nothing. */
    for (unsigned i = 0; i < 8; i++)
        ASSERT_EQ(HV_BLOCK_UNCHANGED, hv_block_attempt(b, "http://x.test:80", 0, -1, 1, i));
    /* The probe meets a 429: blocked; the re-probe's pause doubles; a 200 clears it. */
    const char *url;
    ASSERT_NOT_NULL(hv_block_probe_due(b, 20 + DELAY, &url));
    ASSERT_STR_EQ("http://shop.test:80/", url); /* no page of its own parsed: the root */
    ASSERT_EQ(HV_BLOCK_BECAME_BLOCKED, hv_block_probe_ended(b, HOST, 429, 0, 0, -1, 0, 2000));
    hv_fault_t why;
    ASSERT(hv_block_refuses(b, HOST, &why));
    ASSERT_EQ(2000 + DELAY, hv_block_next_due(b));
    ASSERT_NOT_NULL(hv_block_probe_due(b, 2000 + DELAY, &url));
    ASSERT_EQ(HV_BLOCK_UNCHANGED, hv_block_probe_ended(b, HOST, 403, 0, 0, -1, 1.0, 3000));
    ASSERT_EQ(3000 + 2 * DELAY + DELAY / 2, hv_block_next_due(b)); /* doubled, 25% jitter */
    ASSERT(hv_block_refuses(b, HOST, &why));
    ASSERT_NOT_NULL(hv_block_probe_due(b, 6000, &url));
    ASSERT_EQ(HV_BLOCK_BECAME_CLEAR, hv_block_probe_ended(b, HOST, 200, 1, 9, 5000, 0, 6000));
    ASSERT(!hv_block_refuses(b, HOST, &why));
    hv_block_free(b);
}

/* A blocked host nobody asks for is forgotten at its next probe time, not probed. */
TEST_IMPL(block_unwanted_blocked_host_is_forgotten)
{
    hv_block_t *b = detector();
    hv_block_change_t c;
    hv_fault_t why;
    const char *url;
    page(b, 100, 7, 5000, 0, &c, &why); /* a page of its own first */
    for (unsigned i = 0; i < 3; i++)
        page(b, i, 42, 300, 0, &c, &why);
    ASSERT_NOT_NULL(hv_block_probe_due(b, DELAY, &url));
    ASSERT_EQ(HV_BLOCK_BECAME_BLOCKED, hv_block_probe_ended(b, HOST, 200, 1, 42, 300, 0, DELAY));
    ASSERT_NULL(hv_block_probe_due(b, 10 * DELAY, &url));
    ASSERT_EQ(HV_BLOCK_CLEAR, hv_block_state(b, HOST));
    ASSERT_EQ(0, hv_block_stats(b)->blocked);
    ASSERT_EQ(1, hv_block_stats(b)->probes);
    hv_block_free(b);
}

/* A probe without a response is tried again, three times in all, then counts as blocked. */
TEST_IMPL(block_probe_without_response_is_retried_then_blocks)
{
    hv_block_t *b = detector();
    hv_block_change_t c;
    hv_fault_t why;
    const char *url;
    page(b, 100, 7, 5000, 0, &c, &why); /* a page of its own first */
    for (unsigned i = 0; i < 3; i++)
        page(b, i, 42, 300, 0, &c, &why);
    uint64_t now = 0;
    for (unsigned i = 0; i < 2; i++) {
        now = hv_block_next_due(b);
        ASSERT_NOT_NULL(hv_block_probe_due(b, now, &url));
        ASSERT_EQ(HV_BLOCK_UNCHANGED, hv_block_probe_ended(b, HOST, 0, 0, 0, -1, 0, now));
        ASSERT_EQ(HV_BLOCK_SUSPECT, hv_block_state(b, HOST));
    }
    now = hv_block_next_due(b);
    ASSERT_NOT_NULL(hv_block_probe_due(b, now, &url));
    ASSERT_EQ(HV_BLOCK_BECAME_BLOCKED, hv_block_probe_ended(b, HOST, 0, 0, 0, -1, 0, now));
    hv_block_free(b);
}

/* Pages much smaller than before (on loopback, where latency says nothing): a ratio turn;
 * the small pages are held, a big one passes; a probe of a big page that comes back big
 * clears the host. */
TEST_IMPL(block_ratio_turn)
{
    hv_block_t *b = detector();
    hv_block_change_t c = HV_BLOCK_UNCHANGED;
    hv_fault_t why;
    unsigned i;
    for (i = 0; i < 20; i++) {
        ASSERT_EQ(HV_BLOCK_UNCHANGED, hv_block_attempt(b, HOST, 200, 40000, 1, i));
        ASSERT_EQ(HV_BLOCK_PASS, page(b, i, 100 + i, 40000, i, &c, &why));
    }
    for (; i < 40 && c == HV_BLOCK_UNCHANGED; i++)
        c = hv_block_attempt(b, HOST, 200, 500 + i, 1, i); /* each body its own */
    ASSERT_EQ(HV_BLOCK_BECAME_SUSPECT, c);
    ASSERT_LT(i, 30);
    ASSERT_STR_EQ("ratio_turn", sign(hv_block_why(b, HOST)));
    ASSERT_EQ(HV_BLOCK_HOLD, page(b, 50, 7, 520, 50, &c, &why));
    ASSERT_EQ(HV_BLOCK_PASS, page(b, 51, 8, 39000, 50, &c, &why));
    const char *url;
    ASSERT_NOT_NULL(hv_block_probe_due(b, 50 + DELAY, &url));
    ASSERT_STR_EQ("http://shop.test/p19", url); /* the newest before the turn */
    ASSERT_EQ(HV_BLOCK_BECAME_CLEAR,
              hv_block_probe_ended(b, HOST, 200, 1, 999, 38000, 0, 50 + DELAY));
    hv_block_free(b);
}

/* One body for every URL from the first (an application shell, a parked domain): nothing to
 * compare with, never suspect. */
TEST_IMPL(block_one_body_from_the_start_is_not_suspect)
{
    hv_block_t *b = detector();
    hv_block_change_t c;
    hv_fault_t why;
    for (unsigned i = 0; i < 50; i++) {
        ASSERT_EQ(HV_BLOCK_PASS, page(b, i, 42, 3000, i, &c, &why));
        ASSERT_EQ(HV_BLOCK_UNCHANGED, c);
    }
    hv_block_free(b);
}

/* Template pages that differ: nothing. */
TEST_IMPL(block_distinct_pages_never_suspect)
{
    hv_block_t *b = detector();
    hv_block_change_t c;
    hv_fault_t why;
    for (unsigned i = 0; i < 2000; i++) {
        int64_t bytes = 20000 + (int64_t)(i * 7919 % 5000);
        ASSERT_EQ(HV_BLOCK_UNCHANGED, hv_block_attempt(b, HOST, 200, bytes, 3, i));
        ASSERT_EQ(HV_BLOCK_PASS, page(b, i, 0x9e3779b97f4a7c15ull * (i + 1), bytes, i, &c, &why));
        ASSERT_EQ(HV_BLOCK_UNCHANGED, c);
    }
    ASSERT_EQ(0, hv_block_stats(b)->probes);
    hv_block_free(b);
}

/* Re-crawled pages: three that come back under a quarter of their stored size, or three
 * that switch from their stored titles to one title. */
TEST_IMPL(block_size_collapse_and_one_title_against_the_store)
{
    hv_block_t *b = detector();
    hv_block_change_t c = HV_BLOCK_UNCHANGED;
    hv_fault_t why;
    char url[32];
    unsigned i;
    for (i = 0; i < 3; i++) {
        snprintf(url, sizeof(url), "http://shop.test/s%u", i);
        hv_block_page_t pg = {.url = url, .http_status = 200, .digest = 50 + i, .bytes = 700,
                              .title = "t", .stored_bytes = 30000, .stored_title = "t"};
        ASSERT_EQ(i < 2 ? HV_BLOCK_PASS : HV_BLOCK_HOLD,
                  hv_block_page(b, HOST, &pg, i, &c, &why));
    }
    ASSERT_EQ(HV_BLOCK_BECAME_SUSPECT, c);
    ASSERT_STR_EQ("size_collapse", sign(hv_block_why(b, HOST)));

    const char *host2 = "https://news.test:443";
    for (i = 0; i < 3; i++) {
        char stored[16];
        snprintf(url, sizeof(url), "https://news.test/a%u", i);
        snprintf(stored, sizeof(stored), "Article %u", i);
        hv_block_page_t pg = {.url = url, .http_status = 200, .digest = 60 + i, .bytes = 30000,
                              .title = "Please verify you are human", .stored_bytes = 31000,
                              .stored_title = stored};
        ASSERT_EQ(i < 2 ? HV_BLOCK_PASS : HV_BLOCK_HOLD,
                  hv_block_page(b, host2, &pg, i, &c, &why));
    }
    ASSERT_STR_EQ("one_title", sign(hv_block_why(b, host2)));
    hv_block_free(b);
}

/* Memory is bounded: clear hosts beyond the bound are forgotten, suspect ones are kept. */
TEST_IMPL(block_hosts_are_bounded)
{
    hv_block_t *b = detector();
    hv_block_change_t c;
    hv_fault_t why;
    page(b, 100, 7, 5000, 0, &c, &why); /* a page of its own first */
    for (unsigned i = 0; i < 3; i++)
        page(b, i, 42, 300, 0, &c, &why);
    /* A clear host two pages short of suspect (a page of its own, then two alike). */
    static const char *const first = "http://first.test:80";
    static const char *const first_urls[] = {"http://first.test/own", "http://first.test/a",
                                             "http://first.test/b", "http://first.test/c"};
    for (unsigned i = 0; i < 3; i++) {
        hv_block_page_t pg = {.url = first_urls[i], .http_status = 200, .digest = i ? 42 : 7,
                              .bytes = 300, .title = "t", .stored_bytes = -1};
        ASSERT_EQ(HV_BLOCK_PASS, hv_block_page(b, first, &pg, 0, &c, &why));
    }
    char key[64], url[64];
    for (unsigned i = 0; i < HV_BLOCK_HOSTS_MAX + 100; i++) {
        snprintf(key, sizeof(key), "http://h%u.test:80", i);
        snprintf(url, sizeof(url), "http://h%u.test/", i);
        hv_block_page_t pg = {.url = url, .http_status = 200, .digest = i, .bytes = 1,
                              .stored_bytes = -1};
        hv_block_page(b, key, &pg, 1, &c, &why);
        ASSERT_EQ(HV_BLOCK_UNCHANGED, hv_block_attempt(b, key, 200, 1, 1, 1));
    }
    ASSERT_EQ(HV_BLOCK_SUSPECT, hv_block_state(b, HOST));
    /* The clear host was forgotten: a third page alike starts its count again. */
    hv_block_page_t third = {.url = first_urls[3], .http_status = 200, .digest = 42,
                             .bytes = 300, .title = "t", .stored_bytes = -1};
    ASSERT_EQ(HV_BLOCK_PASS, hv_block_page(b, first, &third, 2, &c, &why));
    hv_block_free(b);
}
