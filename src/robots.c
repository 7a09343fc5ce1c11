/* robots.c: robots.txt parsing and matching after RFC 9309. Pure: no I/O, no globals. */
#include "harvestd/robots.h"

#include <stdlib.h>
#include <string.h>

#include "harvestd/common.h"

/*
 * Limits. The body is bounded by the caller (500 KiB by default, the minimum RFC 9309 asks
 * parsers to read), and these bound what we keep and how long a match can take. No limit may
 * turn "disallowed" into "allowed", so each one is met by disallowing more than the file
 * says, never less:
 * - A pattern longer than ROBOTS_MAX_PATTERN octets after normalisation: a Disallow is cut to
 *   the prefix that fits, which matches every target the whole one matched (and more), with
 *   its '$' dropped and the priority it was written with; an Allow is dropped, because a cut
 *   one would allow what its author never named.
 * - Past ROBOTS_MAX_RULES rules in a group, Allow rules are ignored and Disallow rules are
 *   still kept: only the body's bound limits those.
 */
#define ROBOTS_MAX_RULES 10000
#define ROBOTS_MAX_PATTERN 2048
/* Targets come from the URL module (HV_URL_MAX). One far beyond that is not worth the
 * allocation and is answered "disallowed" when there are rules to check. */
#define ROBOTS_MAX_TARGET (64 * 1024)
/* Crawl-delay is capped so that one hostile file cannot park a host queue for days. */
#define ROBOTS_MAX_DELAY_MS (3600ULL * 1000)

typedef struct {
    char *pat;   /* normalised; '*' is the only wildcard, never two in a row, no '$' */
    size_t len;  /* bytes in pat */
    size_t prio; /* octets of the normalised pattern as written, '*' and '$' included */
    unsigned allow : 1;
    unsigned anchored : 1; /* the pattern ended in '$': it must match the whole target */
} robots_rule_t;

struct hv_robots_s {
    robots_rule_t *rules; /* sorted: longest first, Allow before Disallow of equal length */
    size_t nrules;
    uint64_t delay_ms;
};

/* The rules and crawl-delay collected from one kind of group (ours, or "*"). */
typedef struct {
    robots_rule_t *rules;
    size_t n;
    size_t cap;
    uint64_t delay_ms;
} robots_acc_t;

enum {
    KEY_OTHER,
    KEY_USER_AGENT,
    KEY_ALLOW,
    KEY_DISALLOW,
    KEY_CRAWL_DELAY,
};

/* Spellings seen in the wild besides the RFC's own; misspelt keys are common enough that
 * ignoring them would crawl what the site owner meant to keep out. */
static const struct {
    const char *name;
    int key;
} robots_keys[] = {
    {"user-agent", KEY_USER_AGENT},   {"useragent", KEY_USER_AGENT},
    {"user agent", KEY_USER_AGENT},   {"allow", KEY_ALLOW},
    {"disallow", KEY_DISALLOW},       {"dissallow", KEY_DISALLOW},
    {"disalow", KEY_DISALLOW},        {"dissalow", KEY_DISALLOW},
    {"crawl-delay", KEY_CRAWL_DELAY}, {"crawldelay", KEY_CRAWL_DELAY},
    {"crawl delay", KEY_CRAWL_DELAY},
};


/* RFC 3986 unreserved: percent-encoding these never changes what a URI means. */
static int is_unreserved(unsigned char c)
{
    return hv_ascii_is_alpha(c) || hv_ascii_is_digit(c) || c == '-' || c == '.' || c == '_' ||
           c == '~';
}

/*
 * Characters that may stand unencoded in a path or query. Everything else (controls, space,
 * non-ASCII, and ASCII that RFC 3986 does not allow there) is percent-encoded, as RFC 9309
 * asks for non-ASCII, so that a raw byte in robots.txt and its escape in a target compare
 * equal. '%' is handled separately.
 */
static int keeps_raw(unsigned char c)
{
    if (is_unreserved(c))
        return 1;
    switch (c) {
    case '!':
    case '$':
    case '&':
    case '\'':
    case '(':
    case ')':
    case '*':
    case '+':
    case ',':
    case ';':
    case '=':
    case ':':
    case '@':
    case '/':
    case '?':
        return 1;
    default:
        return 0;
    }
}

/*
 * The canonical form of [in, in+n): valid escapes get upper case hex, escapes of unreserved
 * characters are decoded, and bytes that may not stand raw are encoded. A '%' that does not
 * start a valid escape is itself encoded as "%25". Rules and targets go through the same
 * function, so both sides meet in one spelling while reserved escapes such as "%2F" stay
 * distinct from the character they encode.
 * At most `cap` bytes are written to `out`, *outlen of them, and never part of an escape:
 * once something does not fit nothing more is written, so what is written is always a prefix
 * of the whole form. Returns the length of the whole form.
 */
static size_t normalise(const char *in, size_t n, char *out, size_t cap, size_t *outlen)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t w = 0, whole = 0;

    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)in[i];
        int hi = -1, lo = -1, encode;
        if (c == '%' && n - i >= 3) {
            hi = hv_ascii_hex_value((unsigned char)in[i + 1]);
            lo = hv_ascii_hex_value((unsigned char)in[i + 2]);
        }
        if (hi >= 0 && lo >= 0) {
            c = (unsigned char)(hi << 4 | lo);
            i += 2;
            encode = !is_unreserved(c);
        } else {
            encode = !keeps_raw(c);
        }
        char unit[3] = {(char)c};
        size_t ulen = 1;
        if (encode) {
            unit[0] = '%';
            unit[1] = hex[c >> 4];
            unit[2] = hex[c & 0x0F];
            ulen = 3;
        }
        if (w == whole && w + ulen <= cap) {
            memcpy(out + w, unit, ulen);
            w += ulen;
        }
        whole += ulen;
    }
    *outlen = w;
    return whole;
}

/*
 * Whether the pattern matches a prefix of the target (all of it when anchored). '*' matches
 * any run of bytes. Taking the leftmost occurrence of each literal segment between stars is
 * enough for such globs: a later occurrence can only leave less room for the segments after
 * it. With memmem() each segment search is linear, so a match costs O(pattern + target)
 * whatever the number of stars, where naive backtracking would be exponential.
 */
static int glob_match(const robots_rule_t *r, const char *t, size_t tlen)
{
    const char *p = r->pat;
    size_t plen = r->len;
    const char *star = memchr(p, '*', plen);
    size_t seg = star ? (size_t)(star - p) : plen;

    if (seg > tlen || memcmp(p, t, seg) != 0)
        return 0;
    if (star == NULL)
        return r->anchored ? seg == tlen : 1;

    size_t pi = seg + 1;
    size_t ti = seg;
    for (;;) {
        if (pi == plen)
            return 1;
        star = memchr(p + pi, '*', plen - pi);
        seg = star ? (size_t)(star - (p + pi)) : plen - pi;
        if (star == NULL && r->anchored) {
            /* The last segment of an anchored pattern has to end the target. */
            return seg <= tlen - ti && memcmp(p + pi, t + tlen - seg, seg) == 0;
        }
        const char *hit = memmem(t + ti, tlen - ti, p + pi, seg);
        if (hit == NULL)
            return 0;
        ti = (size_t)(hit - t) + seg;
        if (star == NULL)
            return 1;
        pi += seg + 1;
    }
}

static void acc_free(robots_acc_t *a)
{
    for (size_t i = 0; i < a->n; i++)
        free(a->rules[i].pat);
    free(a->rules);
    a->rules = NULL;
    a->n = a->cap = 0;
}

static void acc_add_rule(robots_acc_t *a, const char *v, size_t vlen, int allow)
{
    char buf[ROBOTS_MAX_PATTERN];
    size_t n;
    int anchored = 0;

    /* An empty Disallow allows everything, which is what having no rule means; an empty
     * Allow says nothing. Values that are not paths (full URLs, bare words) are ignored. */
    if (vlen == 0 || (v[0] != '/' && v[0] != '*'))
        return;
    /* Ignoring an Allow can only disallow more; a Disallow is kept whatever the count. */
    if (allow && a->n >= ROBOTS_MAX_RULES)
        return;
    if (v[vlen - 1] == '$') {
        anchored = 1;
        vlen--;
    }
    size_t whole = normalise(v, vlen, buf, sizeof(buf), &n);

    robots_rule_t r;
    /* The priority is the pattern as written, even when it is cut below: a shorter one could
     * lose to (or tie with) an Allow that the whole pattern beats. */
    r.prio = whole + (size_t)anchored;
    if (n < whole) {
        if (allow)
            return;
        /* A cut pattern no longer reaches the end of what it named. */
        anchored = 0;
    }
    r.allow = allow ? 1 : 0;

    /* Runs of stars match what one star matches; collapsing them keeps the matcher simple. */
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        if (buf[i] == '*' && w > 0 && buf[w - 1] == '*')
            continue;
        buf[w++] = buf[i];
    }
    /* Prefix matching already ends in an implicit star, and "*$" anchors nothing. */
    if (w > 0 && buf[w - 1] == '*') {
        w--;
        anchored = 0;
    }
    r.anchored = anchored ? 1 : 0;
    r.pat = hv_xstrndup(buf, w);
    r.len = w;

    if (a->n == a->cap) {
        a->cap = a->cap ? a->cap * 2 : 16;
        a->rules = hv_xrealloc(a->rules, a->cap * sizeof(*a->rules));
    }
    a->rules[a->n++] = r;
}

/*
 * Crawl-delay in seconds, integer or decimal ("10", "0.5", ".25"), to milliseconds. Digits
 * past the millisecond are dropped and values past the cap saturate. Returns -1 for
 * anything else (negative, exponent, units), which the caller then ignores.
 */
static int parse_delay(const char *v, size_t n, uint64_t *ms)
{
    uint64_t secs = 0, frac = 0, scale = 100;
    size_t i = 0, digits = 0;

    for (; i < n && hv_ascii_is_digit((unsigned char)v[i]); i++, digits++)
        if (secs <= ROBOTS_MAX_DELAY_MS / 1000)
            secs = secs * 10 + (uint64_t)(v[i] - '0');
    if (i < n && v[i] == '.') {
        for (i++; i < n && hv_ascii_is_digit((unsigned char)v[i]); i++, digits++) {
            frac += (uint64_t)(v[i] - '0') * scale;
            scale /= 10;
        }
    }
    if (i != n || digits == 0)
        return -1;
    *ms = secs > ROBOTS_MAX_DELAY_MS / 1000 ? ROBOTS_MAX_DELAY_MS
                                            : HV_MIN(secs * 1000 + frac, ROBOTS_MAX_DELAY_MS);
    return 0;
}

/* The product token of a User-agent value or of our own name: up to the first '/' or
 * whitespace, so "ExampleBot/1.2 (+https://example.com)" names ExampleBot. */
static size_t product_token_len(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && s[i] != '/' && !hv_ascii_is_blank((unsigned char)s[i]))
        i++;
    return i;
}

static int lookup_key(const char *k, size_t n)
{
    for (size_t i = 0; i < HV_ARRAY_SIZE(robots_keys); i++)
        if (hv_ascii_case_eq(k, n, robots_keys[i].name, strlen(robots_keys[i].name)))
            return robots_keys[i].key;
    return KEY_OTHER;
}

static int by_priority(const void *x, const void *y)
{
    const robots_rule_t *a = x, *b = y;
    if (a->prio != b->prio)
        return a->prio > b->prio ? -1 : 1;
    return (int)b->allow - (int)a->allow;
}

static hv_robots_t *robots_from_acc(robots_acc_t *a)
{
    hv_robots_t *r = hv_xcalloc(1, sizeof(*r));
    r->rules = a->rules;
    r->nrules = a->n;
    r->delay_ms = a->delay_ms;
    a->rules = NULL;
    a->n = a->cap = 0;
    if (r->nrules > 1)
        qsort(r->rules, r->nrules, sizeof(*r->rules), by_priority);
    return r;
}

hv_robots_t *hv_robots_parse(const char *body, size_t len, const char *product)
{
    robots_acc_t ours = {0}, star = {0};
    const char *end;
    const char *p;
    size_t plen = product ? product_token_len(product, strlen(product)) : 0;
    int seen_ours = 0;
    /* Where we are in the group grammar: before any User-agent, in a run of User-agent
     * lines (which together name one group), or in the rules that follow them. */
    enum { BEFORE_GROUPS, IN_AGENTS, IN_RULES } state = BEFORE_GROUPS;
    int group_ours = 0, group_star = 0;

    if (body == NULL) {
        body = "";
        len = 0;
    }
    end = body + len;
    p = body;
    if (len >= 3 && memcmp(body, "\xEF\xBB\xBF", 3) == 0)
        p += 3;

    while (p < end) {
        const char *line = p;
        while (p < end && *p != '\n' && *p != '\r')
            p++;
        const char *eol = p;
        /* CR, LF and CRLF all end a line. */
        if (p < end)
            p += (*p == '\r' && end - p > 1 && p[1] == '\n') ? 2 : 1;

        const char *hash = memchr(line, '#', (size_t)(eol - line));
        if (hash != NULL)
            eol = hash;
        const char *colon = memchr(line, ':', (size_t)(eol - line));
        if (colon == NULL)
            continue;

        const char *k = line, *ke = colon;
        while (k < ke && hv_ascii_is_blank((unsigned char)*k))
            k++;
        while (ke > k && hv_ascii_is_blank((unsigned char)ke[-1]))
            ke--;
        const char *v = colon + 1, *ve = eol;
        while (v < ve && hv_ascii_is_blank((unsigned char)*v))
            v++;
        while (ve > v && hv_ascii_is_blank((unsigned char)ve[-1]))
            ve--;
        size_t vlen = (size_t)(ve - v);

        int key = lookup_key(k, (size_t)(ke - k));
        if (key == KEY_OTHER)
            continue; /* Sitemap and unknown records belong to no group and end none. */

        if (key == KEY_USER_AGENT) {
            if (state != IN_AGENTS) {
                group_ours = group_star = 0;
                state = IN_AGENTS;
            }
            size_t tlen = product_token_len(v, vlen);
            if (tlen == 1 && v[0] == '*') {
                group_star = 1;
            } else if (plen > 0 && hv_ascii_case_eq(v, tlen, product, plen)) {
                group_ours = 1;
                seen_ours = 1;
            }
            continue;
        }

        /* A rule before the first User-agent line belongs to no group. */
        if (state == BEFORE_GROUPS)
            continue;
        state = IN_RULES;
        robots_acc_t *acc = group_ours ? &ours : group_star ? &star : NULL;
        if (acc == NULL)
            continue;

        if (key == KEY_CRAWL_DELAY) {
            uint64_t ms;
            /* Merged groups may name several delays; the politest one is kept. */
            if (parse_delay(v, vlen, &ms) == 0)
                acc->delay_ms = HV_MAX(acc->delay_ms, ms);
        } else {
            acc_add_rule(acc, v, vlen, key == KEY_ALLOW);
        }
    }

    /* A group naming us wins even when it has no rules: RFC 9309 falls back to "*" only
     * when no group matches the product token. */
    hv_robots_t *r = robots_from_acc(seen_ours ? &ours : &star);
    acc_free(&ours);
    acc_free(&star);
    return r;
}

hv_robots_t *hv_robots_allow_all(void)
{
    return hv_xcalloc(1, sizeof(hv_robots_t));
}

hv_robots_t *hv_robots_disallow_all(void)
{
    hv_robots_t *r = hv_xcalloc(1, sizeof(*r));
    r->rules = hv_xcalloc(1, sizeof(*r->rules));
    r->rules[0].pat = hv_xstrndup("/", 1);
    r->rules[0].len = 1;
    r->rules[0].prio = 1;
    r->rules[0].allow = 0;
    r->nrules = 1;
    return r;
}

int hv_robots_allowed(const hv_robots_t *r, const char *target, size_t len)
{
    char small[1024];
    char *buf = small;
    size_t cap = sizeof(small);
    size_t n = 0;
    size_t path_len;
    const char *q;
    int allowed = 1;

    if (r->nrules == 0)
        goto out;
    if (len == 0) {
        target = "/";
        len = 1;
    }
    if (len > ROBOTS_MAX_TARGET) {
        allowed = 0;
        goto out;
    }
    /* Each input byte becomes at most three, so the normalised target always fits. */
    if (len * 3 > cap) {
        cap = len * 3;
        buf = hv_xmalloc(cap);
    }
    normalise(target, len, buf, cap, &n);

    /* The crawler must always be able to fetch the rules themselves. */
    q = memchr(buf, '?', n);
    path_len = q ? (size_t)(q - buf) : n;
    if (path_len == sizeof("/robots.txt") - 1 && memcmp(buf, "/robots.txt", path_len) == 0)
        goto out;

    /* Rules are sorted by priority, so the first match is the longest one. */
    for (size_t i = 0; i < r->nrules; i++) {
        if (glob_match(&r->rules[i], buf, n)) {
            allowed = r->rules[i].allow;
            break;
        }
    }

out:
    if (buf != small)
        free(buf);
    return allowed;
}

uint64_t hv_robots_crawl_delay_ms(const hv_robots_t *r)
{
    return r->delay_ms;
}

size_t hv_robots_rules(const hv_robots_t *r)
{
    return r->nrules;
}

void hv_robots_free(hv_robots_t *r)
{
    if (r == NULL)
        return;
    for (size_t i = 0; i < r->nrules; i++)
        free(r->rules[i].pat);
    free(r->rules);
    free(r);
}
