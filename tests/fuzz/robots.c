/*
 * robots: robots.txt parsing and matching (robots.h).
 *
 * Input: one byte choosing our product token, then the robots.txt body. The body is compiled
 * for the product, and matched against targets taken from the body itself (each line's value
 * as a path, and variants of it) plus a few fixed ones. What robots.h promises:
 *   - /robots.txt is always allowed; answers are 0 or 1; the limits hold;
 *   - only the product token before '/' or whitespace counts, case-insensitively: the
 *     product with a version and another case gives the same answers;
 *   - a target with its unreserved characters percent-encoded, or with the hex digits of its
 *     escapes in the other case, gets the same answer;
 *   - the allow-all and disallow-all sets say so.
 */
#include <string.h>

#include "fuzz.h"
#include "harvestd/common.h"
#include "harvestd/robots.h"

#define MAX_TARGETS 96
#define TARGET_MAX 600

static const char *const products[][2] = {
    {"harvestd", "HarvestD/0.1 (+https://example.com/bot)"},
    {"harvestd/1.0", "HARVESTD"},
    {"googlebot", "Googlebot/2.1"},
    {NULL, ""},
    {"*", "*/1"},
    {"my-bot_2", "MY-BOT_2 extra words"},
};

static int unreserved(unsigned char c)
{
    return hv_ascii_is_alpha(c) || hv_ascii_is_digit(c) || c == '-' || c == '.' || c == '_' ||
           c == '~';
}

/* `t` with every unreserved character outside its escapes percent-encoded (what a client may
 * send). */
static size_t encode_unreserved(const char *t, size_t len, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (size_t i = 0; i < len && o + 3 < cap; i++) {
        unsigned char c = (unsigned char)t[i];
        if (c == '%' && i + 2 < len && hv_ascii_is_hex((unsigned char)t[i + 1]) &&
            hv_ascii_is_hex((unsigned char)t[i + 2])) {
            /* An escape stays as it is. */
            memcpy(out + o, t + i, 3);
            o += 3;
            i += 2;
        } else if (unreserved(c) && i > 0) { /* the first '/' stays: still a path */
            out[o++] = '%';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        } else {
            out[o++] = (char)c;
        }
    }
    return o;
}

/* `t` with the hex digits of its valid escapes in the other case. */
static void flip_escapes(char *t, size_t len)
{
    for (size_t i = 0; i + 2 < len; i++) {
        if (t[i] == '%' && hv_ascii_is_hex((unsigned char)t[i + 1]) &&
            hv_ascii_is_hex((unsigned char)t[i + 2])) {
            for (size_t k = 1; k <= 2; k++) {
                char c = t[i + k];
                t[i + k] = c >= 'a' && c <= 'f' ? (char)(c - 32) : c >= 'A' && c <= 'F' ? (char)(c + 32) : c;
            }
            i += 2;
        }
    }
}

typedef struct {
    char *t[MAX_TARGETS];
    size_t len[MAX_TARGETS];
    size_t n;
} targets_t;

static void add(targets_t *ts, const char *s, size_t len)
{
    if (ts->n == MAX_TARGETS || len > TARGET_MAX)
        return;
    ts->t[ts->n] = fuzz_strndup(s, len);
    ts->len[ts->n] = len;
    ts->n++;
}

/* Each line's value ("Disallow: /x*y$" -> "/x*y$"), the value without '*' and '$', and
 * longer and shorter versions of it. */
static void targets_from(targets_t *ts, const char *body, size_t len)
{
    size_t pos = 0;
    while (pos < len && ts->n + 4 <= MAX_TARGETS) {
        const char *line = body + pos;
        const char *end = memchr(line, '\n', len - pos);
        size_t n = end != NULL ? (size_t)(end - line) : len - pos;
        pos += n + 1;
        const char *colon = memchr(line, ':', n);
        if (colon == NULL)
            continue;
        const char *v = colon + 1;
        size_t vlen = n - (size_t)(v - line);
        while (vlen > 0 && hv_ascii_is_blank((unsigned char)*v)) {
            v++;
            vlen--;
        }
        const char *hash = memchr(v, '#', vlen);
        if (hash != NULL)
            vlen = (size_t)(hash - v);
        while (vlen > 0 && (hv_ascii_is_blank((unsigned char)v[vlen - 1]) || v[vlen - 1] == '\r'))
            vlen--;
        if (vlen == 0 || vlen > TARGET_MAX - 2)
            continue;
        add(ts, v, vlen);
        char plain[TARGET_MAX + 2];
        size_t p = 0;
        for (size_t i = 0; i < vlen; i++)
            if (v[i] != '*' && v[i] != '$')
                plain[p++] = v[i];
        add(ts, plain, p);
        plain[p++] = 'x';
        add(ts, plain, p);
        add(ts, v, vlen / 2);
    }
}

static void check_same(const hv_robots_t *a, const hv_robots_t *b, const targets_t *ts,
                       const char *what)
{
    FUZZ_CHECK(hv_robots_rules(a) == hv_robots_rules(b), "%s: %zu vs %zu rules", what,
               hv_robots_rules(a), hv_robots_rules(b));
    FUZZ_CHECK(hv_robots_crawl_delay_ms(a) == hv_robots_crawl_delay_ms(b), "%s: crawl delay",
               what);
    for (size_t i = 0; i < ts->n; i++)
        FUZZ_CHECK(hv_robots_allowed(a, ts->t[i], ts->len[i]) ==
                       hv_robots_allowed(b, ts->t[i], ts->len[i]),
                   "%s: \"%s\" answered differently", what, ts->t[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input_t in = {data, size};
    size_t which = fuzz_byte(&in) % HV_ARRAY_SIZE(products);
    size_t len = in.left;
    char *body = fuzz_strndup(in.p, len);

    hv_robots_t *r = hv_robots_parse(body, len, products[which][0]);
    FUZZ_CHECK(r != NULL, "parse returned NULL");
    FUZZ_CHECK(hv_robots_rules(r) <= 10000, "%zu rules kept", hv_robots_rules(r));
    FUZZ_CHECK(hv_robots_crawl_delay_ms(r) <= 3600000, "crawl delay %llu",
               (unsigned long long)hv_robots_crawl_delay_ms(r));

    targets_t ts = {.n = 0};
    static const char *const fixed[] = {"/", "", "/index.html", "/a/b?c=d", "/%7Ejoe", "/~joe",
                                        "/%2F", "/*", "/$", "/fish.php?id=1"};
    for (size_t i = 0; i < HV_ARRAY_SIZE(fixed); i++)
        add(&ts, fixed[i], strlen(fixed[i]));
    targets_from(&ts, body, len);

    static const char *const always[] = {"/robots.txt", "/robots.txt?x=1", "/robots.txt?"};
    for (size_t i = 0; i < HV_ARRAY_SIZE(always); i++)
        FUZZ_CHECK(hv_robots_allowed(r, always[i], strlen(always[i])) == 1, "%s disallowed",
                   always[i]);

    hv_robots_t *all = hv_robots_allow_all(), *none = hv_robots_disallow_all();
    for (size_t i = 0; i < ts.n; i++) {
        int a = hv_robots_allowed(r, ts.t[i], ts.len[i]);
        FUZZ_CHECK(a == 0 || a == 1, "answer %d", a);
        FUZZ_CHECK(hv_robots_allowed(all, ts.t[i], ts.len[i]) == 1, "allow-all refused %s",
                   ts.t[i]);
        /* Only a path that is /robots.txt itself may pass a disallow-all set. */
        if (ts.len[i] > 0 && ts.t[i][0] == '/' && strncmp(ts.t[i], "/robots.txt", 11) != 0)
            FUZZ_CHECK(hv_robots_allowed(none, ts.t[i], ts.len[i]) == 0,
                       "disallow-all allowed %s", ts.t[i]);
        char enc[3 * TARGET_MAX + 4];
        size_t elen = encode_unreserved(ts.t[i], ts.len[i], enc, sizeof(enc));
        FUZZ_CHECK(hv_robots_allowed(r, enc, elen) == a, "\"%s\" and \"%.*s\" differ", ts.t[i],
                   (int)elen, enc);
        char *flipped = fuzz_strndup(ts.t[i], ts.len[i]);
        flip_escapes(flipped, ts.len[i]);
        FUZZ_CHECK(hv_robots_allowed(r, flipped, ts.len[i]) == a, "\"%s\" and \"%s\" differ",
                   ts.t[i], flipped);
        free(flipped);
    }

    hv_robots_t *r2 = hv_robots_parse(body, len, products[which][1]);
    check_same(r, r2, &ts, "another spelling of the product");
    hv_robots_free(r2);

    hv_robots_free(all);
    hv_robots_free(none);
    hv_robots_free(r);
    hv_robots_free(NULL);
    for (size_t i = 0; i < ts.n; i++)
        free(ts.t[i]);
    free(body);
    return 0;
}
