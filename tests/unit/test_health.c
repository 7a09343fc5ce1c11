/* Run health: the size distribution and its median, the table of failing hosts, the last
 * minute's ring on a fake clock, and what the summaries and /metrics make of them. */
#include "harvestd/batch.h"
#include "harvestd/buf.h"
#include "harvestd/common.h"
#include "harvestd/health.h"
#include "harvestd/metrics.h"
#include "harvestd/record.h"
#include "test.h"

#include <math.h>
#include <stdlib.h>

static uint64_t fake_clock(void *ud)
{
    return *(const uint64_t *)ud;
}

/* A small deterministic generator (the tests must not depend on the run). */
static uint64_t lcg(uint64_t *state)
{
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return *state >> 33;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static double true_median(uint64_t *v, size_t n)
{
    qsort(v, n, sizeof(v[0]), cmp_u64);
    return n % 2 ? (double)v[n / 2] : ((double)v[n / 2 - 1] + (double)v[n / 2]) / 2.0;
}

/* ---- sizes ---- */

TEST_IMPL(health_sizes_exact_when_small_or_all_equal)
{
    hv_sizes_t s;
    memset(&s, 0, sizeof(s));
    ASSERT(hv_sizes_median(&s) == 0.0);
    ASSERT(hv_sizes_mean(&s) == 0.0);
    static const uint64_t small[] = {3, 0, 15, 7, 7};
    for (size_t i = 0; i < HV_ARRAY_SIZE(small); i++)
        hv_sizes_add(&s, small[i]);
    ASSERT(hv_sizes_median(&s) == 7.0);
    hv_sizes_add(&s, 9);
    ASSERT(hv_sizes_median(&s) == 7.0); /* 0 3 7 7 9 15 */
    ASSERT_EQ(0, s.min);
    ASSERT_EQ(15, s.max);

    /* Every page the same size, as block pages are: the median is that size exactly. */
    memset(&s, 0, sizeof(s));
    for (int i = 0; i < 1001; i++)
        hv_sizes_add(&s, 4987);
    ASSERT(hv_sizes_median(&s) == 4987.0);
    ASSERT(hv_sizes_mean(&s) == 4987.0);
    ASSERT_EQ(1001, s.count);
    ASSERT_EQ(1001u * 4987u, s.sum);
}

TEST_IMPL(health_sizes_median_within_an_eighth)
{
    /* Shapes: uniform over a wide range, log-uniform, two clusters (pages and block pages,
     * the middle falling in either), and a few values; each compared with the exact median. */
    enum { N = 4001 };
    uint64_t *v = hv_xmalloc(N * sizeof(*v));
    uint64_t st = 42;
    for (int shape = 0; shape < 6; shape++) {
        for (int rep = 0; rep < 20; rep++) {
            size_t n = shape == 5 ? 2 + (size_t)(lcg(&st) % 9) : N - (size_t)(rep % 2);
            hv_sizes_t s;
            memset(&s, 0, sizeof(s));
            for (size_t i = 0; i < n; i++) {
                uint64_t x;
                switch (shape) {
                case 0: x = 16 + lcg(&st) % 2000000; break;
                case 1: x = (uint64_t)1 << (4 + lcg(&st) % 26); x += lcg(&st) % x; break;
                case 2: x = lcg(&st) % 3 ? 1100 + lcg(&st) % 300 : 40000 + lcg(&st) % 90000; break;
                case 3: x = lcg(&st) % 3 ? 40000 + lcg(&st) % 90000 : 1100 + lcg(&st) % 300; break;
                case 4: x = 1000 + lcg(&st) % 50; break;
                default: x = lcg(&st) % 100000; break;
                }
                v[i] = x;
                hv_sizes_add(&s, x);
            }
            double want = true_median(v, n), got = hv_sizes_median(&s);
            if (want >= 16 && fabs(got - want) >= want / 8)
                hv_test_fail(__FILE__, __LINE__, "shape %d, %zu sizes: median %.1f, estimate %.1f",
                             shape, n, want, got);
            ASSERT(got >= (double)s.min && got <= (double)s.max);
        }
    }
    free(v);
}

TEST_IMPL(health_sizes_merge_is_adding_both)
{
    hv_sizes_t a, b, both;
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    memset(&both, 0, sizeof(both));
    uint64_t st = 7;
    for (int i = 0; i < 500; i++) {
        uint64_t x = lcg(&st) % 70000;
        hv_sizes_add(i % 3 ? &a : &b, x);
        hv_sizes_add(&both, x);
    }
    hv_sizes_t empty;
    memset(&empty, 0, sizeof(empty));
    hv_sizes_merge(&a, &empty);
    hv_sizes_merge(&empty, &b);
    ASSERT_MEM_EQ(&empty, &b, sizeof(b));
    hv_sizes_merge(&a, &b);
    ASSERT_MEM_EQ(&both, &a, sizeof(a));
}

TEST_IMPL(health_sizes_huge_and_saturated)
{
    hv_sizes_t s;
    memset(&s, 0, sizeof(s));
    hv_sizes_add(&s, (uint64_t)1 << 40); /* beyond the last bucket: counted in it */
    ASSERT(hv_sizes_median(&s) == (double)((uint64_t)1 << 40));
    ASSERT_EQ(1, s.bucket[HV_SIZES_BUCKETS - 1]);
    s.bucket[HV_SIZES_BUCKETS - 1] = UINT32_MAX - 1;
    hv_sizes_add(&s, UINT64_MAX);
    hv_sizes_add(&s, UINT64_MAX);
    ASSERT_EQ(UINT32_MAX, s.bucket[HV_SIZES_BUCKETS - 1]);
    ASSERT_EQ(UINT64_MAX, s.sum); /* saturated, not wrapped */
    ASSERT(hv_sizes_median(&s) <= (double)s.max);
}

/* ---- failing hosts ---- */

TEST_IMPL(health_tophosts_exact_while_the_table_holds_every_host)
{
    hv_tophosts_t t;
    memset(&t, 0, sizeof(t));
    for (int i = 0; i < 3; i++)
        hv_tophosts_add(&t, "http://b:80", 4);
    hv_tophosts_add(&t, "http://b:80", 9);
    for (int i = 0; i < 4; i++)
        hv_tophosts_add(&t, "http://a:80", 13);
    hv_tophosts_add(&t, "https://c:443", 2);
    hv_tophosts_add(&t, "https://c:443", 40); /* no such type: counted without one */
    ASSERT_EQ(3, t.n);
    const hv_tophost_t *top[5];
    ASSERT_EQ(2, hv_tophosts_top(&t, top, 2));
    ASSERT_EQ(3, hv_tophosts_top(&t, top, 5));
    /* Ties by name: a before b, both with 4. */
    ASSERT_STR_EQ("http://a:80", top[0]->host);
    ASSERT_STR_EQ("http://b:80", top[1]->host);
    ASSERT_STR_EQ("https://c:443", top[2]->host);
    ASSERT_EQ(4, top[0]->failed);
    ASSERT_EQ(4, top[1]->failed);
    ASSERT_EQ(2, top[2]->failed);
    ASSERT_EQ(0, top[0]->over);
    ASSERT_EQ(13, hv_tophost_type(top[0]));
    ASSERT_EQ(4, hv_tophost_type(top[1]));
    ASSERT_EQ(2, hv_tophost_type(top[2]));
    ASSERT_EQ(0, hv_tophosts_top(&t, top, 0));
    hv_tophosts_clear(&t);
    ASSERT_EQ(0, t.n);
    ASSERT_EQ(0, hv_tophosts_top(&t, top, 5));
}

TEST_IMPL(health_tophosts_bounded_and_finds_the_heavy_hitters)
{
    /* 20,000 hosts failing once each, interleaved with three hosts failing often: the table
     * never holds more than 64, and the three come out first, in order, never undercounted. */
    hv_tophosts_t t;
    memset(&t, 0, sizeof(t));
    uint64_t st = 99;
    unsigned want_a = 0, want_b = 0, want_c = 0;
    char host[64];
    for (int i = 0; i < 20000; i++) {
        snprintf(host, sizeof(host), "http://h%d.example:80", i);
        hv_tophosts_add(&t, host, 3);
        ASSERT_LE(t.n, HV_TOPHOSTS_SLOTS);
        uint64_t r = lcg(&st) % 100;
        if (r < 6) {
            hv_tophosts_add(&t, "http://a.example:80", r < 5 ? 13 : 4);
            want_a++;
        } else if (r < 10) {
            hv_tophosts_add(&t, "https://b.example:443", 17);
            want_b++;
        } else if (r < 12) {
            hv_tophosts_add(&t, "http://[::1]:8080", 4);
            want_c++;
        }
    }
    ASSERT_EQ(HV_TOPHOSTS_SLOTS, t.n);
    const hv_tophost_t *top[5];
    ASSERT_EQ(5, hv_tophosts_top(&t, top, 5));
    ASSERT_STR_EQ("http://a.example:80", top[0]->host);
    ASSERT_STR_EQ("https://b.example:443", top[1]->host);
    ASSERT_STR_EQ("http://[::1]:8080", top[2]->host);
    unsigned want[3] = {want_a, want_b, want_c};
    for (int i = 0; i < 3; i++) {
        ASSERT_GE(top[i]->failed, want[i]);
        ASSERT_LE(top[i]->failed - top[i]->over, want[i]);
    }
    ASSERT_EQ(13, hv_tophost_type(top[0]));
    ASSERT_EQ(17, hv_tophost_type(top[1]));
    for (int i = 1; i < 5; i++)
        ASSERT_GE(top[i - 1]->failed, top[i]->failed);
    hv_tophosts_clear(&t);
}

TEST_IMPL(health_host_key_of_urls)
{
    static const struct {
        const char *url, *want;
    } cases[] = {
        {"http://example.com/", "http://example.com:80"},
        {"https://example.com/a/b?c", "https://example.com:443"},
        {"https://a.example:8443/x", "https://a.example:8443"},
        {"http://h?q", "http://h:80"},
        {"http://h#f", "http://h:80"},
        {"http://h", "http://h:80"},
        {"http://127.0.0.1:5000/", "http://127.0.0.1:5000"},
        {"http://[::1]:8080/", "http://[::1]:8080"},
        {"https://[2001:db8::1]/", "https://[2001:db8::1]:443"},
        {"http://h:/", "http://h:80"},
        {"ftp://h/", NULL},
        {"not a url", NULL},
        {"http:///x", NULL},
        {"http://:80/", NULL},
        {"http://h:0/", NULL},
        {"http://h:70000/", NULL},
        {"http://h:8x/", NULL},
        {"http://[::1/", NULL},
        {"http://[::1]x/", NULL},
    };
    char key[HV_HOST_KEY_MAX];
    for (size_t i = 0; i < HV_ARRAY_SIZE(cases); i++) {
        int n = hv_health_host_key(key, sizeof(key), cases[i].url);
        if (cases[i].want == NULL) {
            if (n != -1)
                hv_test_fail(__FILE__, __LINE__, "%s: key %s, expected none", cases[i].url, key);
        } else {
            if (n < 0)
                hv_test_fail(__FILE__, __LINE__, "%s: no key", cases[i].url);
            ASSERT_STR_EQ(cases[i].want, key);
            ASSERT_EQ(strlen(cases[i].want), n);
        }
    }
    ASSERT_EQ(-1, hv_health_host_key(key, 10, "http://example.com/"));
    /* The longest name a URL may carry fits. */
    char url[300], label[64];
    memset(label, 'a', 63);
    label[63] = '\0';
    snprintf(url, sizeof(url), "https://%s.%s.%s.%.61s:65535/", label, label, label, label);
    ASSERT_EQ(8 + 253 + 6, hv_health_host_key(key, sizeof(key), url));
}

/* ---- the last minute ---- */

TEST_IMPL(health_minute_slots_expire_after_sixty_seconds)
{
    uint64_t now = 1000000; /* a loop's clock does not start at 0 */
    hv_minute_t *m = hv_minute_new(fake_clock, &now);
    hv_minute_figures_t f;
    hv_minute_figures(m, &f);
    ASSERT_EQ(0, f.ok + f.failed);
    ASSERT_EQ(1, f.seconds);

    hv_minute_add(m, 1, 200, 5000, 1);
    hv_minute_add(m, 1, 200, 7000, 2);
    hv_minute_add(m, 0, 503, -1, 4);
    now += 30500;
    hv_minute_add(m, 0, 0, -1, 0);
    hv_minute_add(m, 1, 304, -1, 1);
    hv_minute_figures(m, &f);
    ASSERT_EQ(3, f.ok);
    ASSERT_EQ(2, f.failed);
    ASSERT_EQ(8, f.requests);
    ASSERT_EQ(2, f.http_class[2]);
    ASSERT_EQ(1, f.http_class[3]);
    ASSERT_EQ(1, f.http_class[5]);
    ASSERT_EQ(2, f.ok_sizes.count);
    ASSERT(hv_sizes_mean(&f.ok_sizes) == 6000.0);
    ASSERT_EQ(31, f.seconds);

    /* 59.999 s after the first second began: still in; a moment later, out. */
    now = 1000000 + 59999;
    hv_minute_figures(m, &f);
    ASSERT_EQ(5, f.ok + f.failed);
    ASSERT_EQ(60, f.seconds);
    now = 1000000 + 60000;
    hv_minute_figures(m, &f);
    ASSERT_EQ(1, f.ok);
    ASSERT_EQ(1, f.failed);
    ASSERT_EQ(1, f.requests);
    ASSERT_EQ(0, f.ok_sizes.count);
    ASSERT_EQ(60, f.seconds);

    /* The first second's slot is reused, its old figures gone, not added to. */
    hv_minute_add(m, 1, 200, 100, 1);
    hv_minute_figures(m, &f);
    ASSERT_EQ(2, f.ok);
    ASSERT_EQ(1, f.ok_sizes.count);
    ASSERT(hv_sizes_median(&f.ok_sizes) == 100.0);

    /* Long silence: nothing is left, whatever the slots held. */
    now += 3600 * 1000;
    hv_minute_figures(m, &f);
    ASSERT_EQ(0, f.ok + f.failed + f.requests + f.ok_sizes.count);
    hv_minute_free(m);
}

TEST_IMPL(health_minute_every_second_of_a_minute)
{
    uint64_t now = 5000;
    hv_minute_t *m = hv_minute_new(fake_clock, &now);
    /* One ok record per second for two minutes: always the last 60 counted. */
    for (int i = 0; i < 120; i++) {
        hv_minute_add(m, 1, 200, 1000 + i, 2);
        hv_minute_figures_t f;
        hv_minute_figures(m, &f);
        ASSERT_EQ(HV_MIN(i + 1, 60), f.ok);
        ASSERT_EQ(2 * HV_MIN(i + 1, 60), f.requests);
        ASSERT_EQ(HV_MIN(i + 1, 60), f.seconds);
        ASSERT_EQ(1000 + (i >= 60 ? i - 59 : 0), f.ok_sizes.min);
        now += 1000;
    }
    hv_minute_free(m);
}

/* ---- records counted, and the page ---- */

static hv_record_t *page(int status, int64_t bytes)
{
    hv_record_t *r = hv_record_new("http://h/", 9);
    r->http_status = status;
    r->bytes = bytes;
    r->requests = 1;
    return r;
}

TEST_IMPL(health_record_counts_feed_sizes_and_the_minute)
{
    uint64_t now = 1000;
    hv_record_counts_t c;
    memset(&c, 0, sizeof(c));
    c.minute = hv_minute_new(fake_clock, &now);

    hv_record_t *recs[5];
    recs[0] = page(200, 4864); /* the middle of its bucket, as 100 is: the median is exact */
    recs[1] = page(200, 100);
    recs[2] = page(200, 9000);
    recs[2]->not_modified = 1; /* a 304: the stored page's size, not a download */
    recs[3] = page(503, 300);
    hv_record_fail(recs[3], HV_STAGE_DOWNLOAD, HV_ET_HTTP_STATUS, HV_D_HTTP_STATUS, "503");
    recs[4] = page(200, 20000);
    recs[4]->from_cache = 1;
    recs[4]->requests = 0;
    for (int i = 0; i < 5; i++)
        hv_record_counts_add(&c, recs[i]);
    ASSERT_EQ(4864, hv_record_ok_body_bytes(recs[0]));
    ASSERT_EQ(-1, hv_record_ok_body_bytes(recs[2]));
    ASSERT_EQ(-1, hv_record_ok_body_bytes(recs[3]));
    ASSERT_EQ(-1, hv_record_ok_body_bytes(recs[4]));
    ASSERT_EQ(2, c.ok_size_count);
    ASSERT_EQ(4964, c.ok_size_sum);
    ASSERT_EQ(1, c.ok_size_buckets[0]); /* 100 <= 256 */
    ASSERT_EQ(1, c.ok_size_buckets[3]); /* 4096 < 4864 <= 16384 */

    hv_buf_t out;
    hv_buf_init(&out, 1 << 20);
    hv_metrics_view_t view = {.records = &c};
    hv_metrics_render(&out, &view, NULL);
    hv_buf_append(&out, "", 1);
    const char *text = out.data;
    static const char *const want[] = {
        "\nharvestd_last_minute_records{status=\"ok\"} 4\n",
        "\nharvestd_last_minute_records{status=\"failed\"} 1\n",
        "\nharvestd_last_minute_ok_ratio 0.8\n",
        "\nharvestd_last_minute_http_responses{class=\"2xx\"} 4\n",
        "\nharvestd_last_minute_http_responses{class=\"5xx\"} 1\n",
        "\nharvestd_last_minute_http_responses{class=\"3xx\"} 0\n",
        "\nharvestd_last_minute_ok_body_bytes_mean 2482\n",
        "\nharvestd_last_minute_ok_body_bytes_median 2482\n",
        "\nharvestd_last_minute_requests_per_second 4\n",
        "\n# TYPE harvestd_ok_body_bytes histogram\n",
        "\nharvestd_ok_body_bytes_bucket{le=\"256\"} 1\n",
        "\nharvestd_ok_body_bytes_bucket{le=\"4096\"} 1\n",
        "\nharvestd_ok_body_bytes_bucket{le=\"16384\"} 2\n",
        "\nharvestd_ok_body_bytes_bucket{le=\"4194304\"} 2\n",
        "\nharvestd_ok_body_bytes_bucket{le=\"+Inf\"} 2\n",
        "\nharvestd_ok_body_bytes_sum 4964\n",
        "\nharvestd_ok_body_bytes_count 2\n",
    };
    for (size_t i = 0; i < HV_ARRAY_SIZE(want); i++)
        if (strstr(text, want[i]) == NULL)
            hv_test_fail(__FILE__, __LINE__, "no %s in:\n%s", want[i], text);

    /* A minute later the ratios have no value: their samples are absent, their families not. */
    now += 61000;
    hv_buf_reset(&out);
    hv_metrics_render(&out, &view, NULL);
    hv_buf_append(&out, "", 1);
    text = out.data;
    ASSERT_NOT_NULL(strstr(text, "\n# TYPE harvestd_last_minute_ok_ratio gauge\n"));
    ASSERT_NULL(strstr(text, "\nharvestd_last_minute_ok_ratio "));
    ASSERT_NULL(strstr(text, "\nharvestd_last_minute_ok_body_bytes_mean "));
    ASSERT_NULL(strstr(text, "\nharvestd_last_minute_ok_body_bytes_median "));
    ASSERT_NOT_NULL(strstr(text, "\nharvestd_last_minute_records{status=\"ok\"} 0\n"));
    ASSERT_NOT_NULL(strstr(text, "\nharvestd_last_minute_requests_per_second 0\n"));
    ASSERT_NOT_NULL(strstr(text, "\nharvestd_ok_body_bytes_count 2\n"));

    hv_buf_free(&out);
    for (int i = 0; i < 5; i++)
        hv_record_free(recs[i]);
    hv_minute_free(c.minute);
}

TEST_IMPL(health_batch_statuses_compact)
{
    hv_batch_stats_t *s = hv_xcalloc(1, sizeof(*s));
    char out[64];
    hv_batch_format_statuses(s, out, sizeof(out));
    ASSERT_STR_EQ("", out);
    s->by_status[404] = 3;
    s->by_status[200] = 20;
    s->by_status[503] = 1;
    hv_batch_format_statuses(s, out, sizeof(out));
    ASSERT_STR_EQ("200:20,404:3,503:1", out);
    /* More codes than room: cut short, and said so. */
    for (int code = 100; code < 600; code += 7)
        s->by_status[code] = 1;
    hv_batch_format_statuses(s, out, sizeof(out));
    ASSERT_EQ(0, strcmp(out + strlen(out) - 4, ",..."));
    ASSERT_LT(strlen(out), sizeof(out));
    hv_batch_format_statuses(s, out, 6);
    ASSERT_STR_EQ("...", out);
    free(s);
}
