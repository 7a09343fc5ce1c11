/*
 * html: the pre-scan (prescan.h) and the title analysis (html.h), with the title fast path
 * checked against the full parse.
 *
 * The input is a page. What the headers promise:
 *   - hv_prescan_depth() never answers above limit + 1, and a lower limit never finds a
 *     page shallower than a higher one did;
 *   - hv_prescan_read_attr() walks every tag's attributes within the bytes, always forward;
 *   - hv_html_analyse() returns 0, or refuses the page (HV_ENESTING, HV_ETOOBIG, UV_EINVAL:
 *     no title, a verdict other than HV_PRESCAN_OK, and for HV_PRESCAN_TOO_DEEP a depth above
 *     the bound), and a title that is trimmed, collapsed, non-empty UTF-8;
 *   - the title fast path, where it answers (1), says exactly what the full parse says: both
 *     titles NULL or the same bytes. When the full parse refuses the page, the fast path
 *     may still answer only because the refusal lies beyond the prefix it parsed: the full
 *     parse of that prefix accepts it, with the same title. Where it does not answer (0),
 *     it leaves nothing to free. tests/tools/title_equiv does the same comparison over
 *     files.
 * As in the daemon's parse workers, the fast path takes gumbo's memory from an arena.
 */
#include <string.h>

#include <uv.h>

#include "fuzz.h"
#include "harvestd/arena.h"
#include "harvestd/common.h"
#include "harvestd/html.h"
#include "harvestd/prescan.h"
#include "harvestd/utf8.h"

static hv_arena_t arena;

static void check_title(const char *t)
{
    if (t == NULL)
        return;
    size_t n = strlen(t);
    FUZZ_CHECK(n > 0, "empty title instead of NULL");
    FUZZ_CHECK(hv_utf8_valid(t, n), "title not UTF-8");
    FUZZ_CHECK(!hv_ascii_is_space((unsigned char)t[0]) &&
                   !hv_ascii_is_space((unsigned char)t[n - 1]),
               "title not trimmed: \"%s\"", t);
    for (size_t i = 0; i < n; i++) {
        FUZZ_CHECK(t[i] == ' ' || !hv_ascii_is_space((unsigned char)t[i]),
                   "whitespace other than ' ' in \"%s\"", t);
        FUZZ_CHECK(!(t[i] == ' ' && t[i + 1] == ' '), "whitespace not collapsed in \"%s\"", t);
    }
}

/* Every tag's attributes: offsets inside the bytes, *pos always moving forward. */
static void check_attrs(const char *s, size_t len)
{
    size_t tags = 0;
    for (const char *p = memchr(s, '<', len); p != NULL && tags < 256;
         p = memchr(p + 1, '<', len - (size_t)(p + 1 - s))) {
        size_t pos = (size_t)(p - s) + 1;
        while (pos < len && hv_ascii_is_alpha((unsigned char)s[pos]))
            pos++;
        if (pos == (size_t)(p - s) + 1)
            continue;
        tags++;
        hv_prescan_attr_t a;
        int r;
        size_t before = pos, count = 0;
        while ((r = hv_prescan_read_attr(s, len, &pos, &a)) == 1) {
            FUZZ_CHECK(pos > before && pos <= len, "attribute walk did not move forward");
            FUZZ_CHECK(a.name_len >= 1 && a.name >= before && a.name + a.name_len <= pos,
                       "attribute name outside the attribute");
            FUZZ_CHECK(a.value_len == 0 || (a.value >= a.name + a.name_len &&
                                            a.value + a.value_len <= pos),
                       "attribute value outside the attribute");
            before = pos;
            FUZZ_CHECK(++count <= len, "more attributes than bytes");
        }
        if (r == 0)
            FUZZ_CHECK(pos < len && s[pos] == '>', "tag end not at a '>'");
        else
            FUZZ_CHECK(r == -1 && pos == before, "read_attr %d, pos moved at the end", r);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *page = fuzz_strndup(data, size);

    /* The pre-scan at the daemon's bound and a lower one. */
    size_t depth = hv_prescan_depth(page, size, HV_PRESCAN_MAX_DEPTH);
    FUZZ_CHECK(depth <= HV_PRESCAN_MAX_DEPTH + 1, "depth %zu above limit + 1", depth);
    size_t low = hv_prescan_depth(page, size, 16);
    FUZZ_CHECK(low <= 17, "depth %zu above 16 + 1", low);
    FUZZ_CHECK(low == HV_MIN(depth, (size_t)17) || low == 17,
               "limit 16 gave %zu, limit %d gave %zu", low, HV_PRESCAN_MAX_DEPTH, depth);
    check_attrs(page, size);

    hv_html_result_t full, fast;
    memset(&fast, 0x5A, sizeof(fast));
    int rc = hv_html_analyse(page, size, &full);
    FUZZ_CHECK(rc == 0 || rc == HV_ENESTING || rc == HV_ETOOBIG || rc == UV_EINVAL,
               "analyse: %d", rc);
    FUZZ_CHECK(full.fields == NULL, "fields without rules");
    if (rc != 0) {
        FUZZ_CHECK(full.title == NULL, "a refused page has a title");
        FUZZ_CHECK(full.refusal != HV_PRESCAN_OK, "refused (%d) without a verdict", rc);
        if (full.refusal == HV_PRESCAN_TOO_DEEP)
            FUZZ_CHECK(full.depth > HV_HTML_MAX_DEPTH, "refused at depth %zu", full.depth);
    } else {
        FUZZ_CHECK(full.depth == depth, "analyse depth %zu, pre-scan %zu", full.depth, depth);
        check_title(full.title);
    }

    hv_html_use_arena(&arena);
    int took = hv_html_title_fast(page, size, &fast);
    hv_html_use_arena(NULL);
    FUZZ_CHECK(took == 0 || took == 1, "fast path returned %d", took);
    if (took == 1) {
        FUZZ_CHECK(fast.parsed > 0 && fast.parsed <= size, "fast path parsed %zu of %zu",
                   fast.parsed, size);
        if (rc != 0) {
            /* Refused for what lies beyond the prefix: compare with the prefix's full parse. */
            hv_html_result_free(&full);
            rc = hv_html_analyse(page, fast.parsed, &full);
            FUZZ_CHECK(rc == 0, "the fast path settled a prefix the full parse refuses (%d)",
                       rc);
        }
        FUZZ_CHECK((fast.title == NULL) == (full.title == NULL) &&
                       (fast.title == NULL || strcmp(fast.title, full.title) == 0),
                   "titles differ: fast \"%s\", full \"%s\"", fast.title ? fast.title : "(null)",
                   full.title ? full.title : "(null)");
        FUZZ_CHECK(fast.fields == NULL, "fast path fields");
        hv_html_result_free(&fast);
    } else {
        FUZZ_CHECK(fast.title == NULL && fast.fields == NULL, "the fast path left memory");
    }
    hv_html_result_free(&full);
    free(page);
    return 0;
}
