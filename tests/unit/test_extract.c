/* test_extract.c: rule sets evaluated over gumbo trees, and the bounds of what they keep. */
#include "harvestd/extract.h"

#include <cjson/cJSON.h>
#include <stdlib.h>

#include "harvestd/buf.h"
#include "harvestd/common.h"
#include "harvestd/html.h"
#include "harvestd/utf8.h"
#include "test.h"

/* A rule set from "KEY", "VALUE" pairs, NULL-terminated. */
static hv_ruleset_t *rules(const char *const *kv)
{
    char err[256];
    hv_ruleset_t *rs = hv_ruleset_new("test");
    for (size_t i = 0; kv[i] != NULL; i += 2)
        if (hv_ruleset_add(rs, kv[i], kv[i + 1], err, sizeof(err)) != 0)
            hv_test_fail(__FILE__, __LINE__, "%s = %s: %s", kv[i], kv[i + 1], err);
    ASSERT_OK(hv_ruleset_finish(rs, err, sizeof(err)));
    return rs;
}

/* Evaluate `kv` over `doc` (of `len` bytes); returns the rc, *json the fields or NULL. */
static int eval(const char *doc, size_t len, const char *const *kv, char **json)
{
    hv_ruleset_t *rs = rules(kv);
    GumboOptions opts = kGumboDefaultOptions;
    opts.max_errors = 0;
    GumboOutput *out = gumbo_parse_with_options(&opts, doc, len);
    static char unset[] = "unset";
    *json = unset;
    int rc = hv_ruleset_eval(rs, out->document, doc, len, "http://127.0.0.1/page", json);
    gumbo_destroy_output(&opts, out);
    hv_ruleset_free(rs);
    if (rc == 0) {
        ASSERT_NOT_NULL(*json);
        ASSERT(hv_utf8_valid(*json, strlen(*json)));
        ASSERT_LE(strlen(*json), HV_EXTRACT_FIELDS_MAX);
    } else {
        ASSERT_NULL(*json);
    }
    return rc;
}

/* A document built from pieces, NUL-terminated, in a buffer that the caller frees. */
typedef struct {
    hv_buf_t b;
} doc_t;

static void put(doc_t *d, const char *s, size_t n, size_t times)
{
    for (size_t i = 0; i < times; i++)
        ASSERT_OK(hv_buf_append(&d->b, s, n));
}

#define PUTS(d, s, times) put(d, s, strlen(s), times)

static char *finish(doc_t *d, size_t *len)
{
    ASSERT_OK(hv_buf_append(&d->b, "", 1));
    char *s = hv_buf_steal(&d->b, len);
    (*len)--;
    return s;
}

TEST_IMPL(extract_small_fields_as_before)
{
    static const char doc[] = "<title>t</title><h2>One</h2><h2>Two</h2>"
                              "<div class=item><a href=/x>x</a><b>1</b></div>"
                              "<div class=item><a href=y>y</a></div>";
    static const char *const kv[] = {"first", "h2", "all[]", "h2", "items.item", "div.item",
                                     "items.b", "b", "links", "@links", NULL};
    char *json;
    ASSERT_OK(eval(doc, sizeof(doc) - 1, kv, &json));
    ASSERT_STR_EQ("{\"first\":\"One\",\"all\":[\"One\",\"Two\"],\"items\":[{\"b\":\"1\"},"
                  "{\"b\":null}],\"links\":[\"http://127.0.0.1/x\",\"http://127.0.0.1/y\"]}",
                  json);
    free(json);
}

TEST_IMPL(extract_nested_matches_stop_at_the_budget)
{
    /* 1000 nested divs around 30 KB: each match's text is the 30 KB, 30 MB in all. */
    doc_t d;
    hv_buf_init(&d.b, SIZE_MAX / 2);
    PUTS(&d, "<title>t</title>", 1);
    PUTS(&d, "<div>", 1000);
    PUTS(&d, "word ", 6000);
    PUTS(&d, "</div>", 1000);
    size_t len;
    char *doc = finish(&d, &len);
    static const char *const all[] = {"d[]", "div", NULL};
    char *json;
    uint64_t start = hv_mono_ms();
    ASSERT_EQ(HV_ETOOBIG, eval(doc, len, all, &json));
    ASSERT_LT(hv_mono_ms() - start, 2000);
    /* The same through scoped rules, and as ::html. */
    static const char *const items[] = {"d.item", "div", "d.t", "div", NULL};
    ASSERT_EQ(HV_ETOOBIG, eval(doc, len, items, &json));
    static const char *const html[] = {"d[]", "div ::html", NULL};
    ASSERT_EQ(HV_ETOOBIG, eval(doc, len, html, &json));
    free(doc);

    /* Within the budget they are all kept: 100 levels, 3 MB. */
    hv_buf_init(&d.b, SIZE_MAX / 2);
    PUTS(&d, "<div>", 100);
    PUTS(&d, "word ", 6000);
    PUTS(&d, "</div>", 100);
    doc = finish(&d, &len);
    ASSERT_OK(eval(doc, len, all, &json));
    ASSERT_EQ(strlen("{\"d\":[]}") + 100 * (29999 + 2) + 99, strlen(json));
    free(json);
    free(doc);
}

TEST_IMPL(extract_budget_is_the_printed_size)
{
    /* Eight values of 1,000,000 bytes print as 8,000,0xx bytes: kept; nine are too many. */
    for (int n = 8; n <= 9; n++) {
        doc_t d;
        hv_buf_init(&d.b, SIZE_MAX / 2);
        for (int i = 0; i < n; i++) {
            PUTS(&d, "<p>", 1);
            PUTS(&d, "x", 1000000);
            PUTS(&d, "</p>", 1);
        }
        size_t len;
        char *doc = finish(&d, &len);
        static const char *const kv[] = {"p[]", "p", NULL};
        char *json;
        int rc = eval(doc, len, kv, &json);
        if (n == 8) {
            ASSERT_OK(rc);
            ASSERT_EQ(8 + 8 * 1000002 + 7, strlen(json)); /* {"p":[ "x...", ... ]} */
            free(json);
        } else {
            ASSERT_EQ(HV_ETOOBIG, rc);
        }
        free(doc);
    }
    /* Escapes count: a control character (from a character reference, which the parser
     * keeps) prints as six bytes. One value of 1 MiB of them is 6 MiB, two are 12. */
    doc_t d;
    hv_buf_init(&d.b, SIZE_MAX / 2);
    PUTS(&d, "<p>", 1);
    PUTS(&d, "&#1;", (size_t)3 << 19);
    PUTS(&d, "</p>", 1);
    size_t len;
    char *doc = finish(&d, &len);
    static const char *const one[] = {"a", "p ::html", NULL};
    static const char *const two[] = {"a", "p ::html", "b", "p ::html", NULL};
    char *json;
    ASSERT_OK(eval(doc, len, one, &json));
    /* "<p>", then 1 MiB - 3 control characters */
    ASSERT_EQ(3 + 6 * (HV_EXTRACT_VALUE_MAX - 3) + strlen("{\"a\":\"\"}") +
                  strlen(HV_EXTRACT_CUT_MARK),
              strlen(json));
    free(json);
    ASSERT_EQ(HV_ETOOBIG, eval(doc, len, two, &json));
    free(doc);
}

TEST_IMPL(extract_long_values_are_cut_with_the_mark)
{
    doc_t d;
    hv_buf_init(&d.b, SIZE_MAX / 2);
    PUTS(&d, "<p title=\"", 1);
    PUTS(&d, "t", HV_EXTRACT_VALUE_MAX + 10);
    PUTS(&d, "\">", 1);
    PUTS(&d, "\xC3\xA9", 600000); /* 1.2 MB of two-byte characters */
    PUTS(&d, "</p><i>", 1);
    PUTS(&d, "i", HV_EXTRACT_VALUE_MAX);
    PUTS(&d, "</i>", 1);
    size_t len;
    char *doc = finish(&d, &len);
    static const char *const kv[] = {"text", "p", "attr", "p @title", "html", "p ::html",
                                     "exact", "i", NULL};
    char *json;
    ASSERT_OK(eval(doc, len, kv, &json));
    /* {"text":"éé...…[cut]","attr":"tt...…[cut]","html":"<p title=\"tt...…[cut]",
     *  "exact":"ii..."} */
    const char *mark = HV_EXTRACT_CUT_MARK;
    size_t m = strlen(mark), v = HV_EXTRACT_VALUE_MAX;
    const char *p = json;
    ASSERT_MEM_EQ("{\"text\":\"", p, 9);
    p += 9;
    for (size_t i = 0; i < v; i += 2)
        ASSERT_MEM_EQ("\xC3\xA9", p + i, 2);
    p += v;
    ASSERT_MEM_EQ(mark, p, m);
    p += m;
    ASSERT_MEM_EQ("\",\"attr\":\"", p, 10);
    p += 10;
    ASSERT_EQ('t', p[v - 1]);
    ASSERT_MEM_EQ(mark, p + v, m);
    p += v + m;
    ASSERT_MEM_EQ("\",\"html\":\"<p title=\\\"ttt", p, 24);
    p += 10;
    /* (the quote of the source prints escaped: one byte more than the value holds) */
    ASSERT_MEM_EQ(mark, p + v + 1, m);
    p += v + 1 + m;
    ASSERT_MEM_EQ("\",\"exact\":\"", p, 11);
    p += 11;
    ASSERT_EQ('i', p[v - 1]);
    ASSERT_STR_EQ("\"}", p + v);
    free(json);
    free(doc);
}

TEST_IMPL(extract_links_stop_at_the_budget)
{
    /* Relative links against an 8 KB base: each resolves to 8 KB. */
    for (int n = 100; n <= 2000; n += 1900) {
        doc_t d;
        hv_buf_init(&d.b, SIZE_MAX / 2);
        PUTS(&d, "<base href=\"http://127.0.0.1/", 1);
        PUTS(&d, "b", 8000);
        PUTS(&d, "/\">", 1);
        PUTS(&d, "<a href=a>x</a>", (size_t)n);
        size_t len;
        char *doc = finish(&d, &len);
        static const char *const kv[] = {"links", "@links", NULL};
        char *json;
        int rc = eval(doc, len, kv, &json);
        if (n == 100) {
            ASSERT_OK(rc);
            ASSERT_GT(strlen(json), 100 * 8000);
            free(json);
        } else {
            ASSERT_EQ(HV_ETOOBIG, rc);
        }
        free(doc);
    }
}

/* The fields `kv` take from `doc` through the whole analysis (html.c: the text gumbo parses
 * is prepared there); malloc'd JSON. */
static char *analysed_fields(const char *doc, size_t len, const char *const *kv)
{
    hv_ruleset_t *rs = rules(kv);
    hv_html_result_t r;
    ASSERT_OK(hv_html_analyse_rules(doc, len, rs, "http://127.0.0.1/", &r));
    char *fields = r.fields;
    r.fields = NULL;
    hv_html_result_free(&r);
    hv_ruleset_free(rs);
    ASSERT_NOT_NULL(fields);
    return fields;
}

TEST_IMPL(extract_fields_keep_control_characters)
{
    static const char *const kv[] = {"t", "p", "a", "p @title", "h", "div ::html",
                                     "m", "p[title='x\xF4\x8F\xBC\x9By'] @id", NULL};
    /* Text, attribute values, names from the source and outer HTML keep them. */
    static const char doc[] = "<div><p title='x\x1by' id=one>a\x1b" "b<x\x1b>c</x\x1b></p>"
                              "<script>\x02<</script><!--\x03--></div>"
                              "<p title='x&#x10FF1B;y' id=two>d</p>";
    char *json = analysed_fields(doc, sizeof(doc) - 1, kv);
    ASSERT_STR_EQ("{\"t\":\"a\\u001bbc\",\"a\":\"x\\u001by\","
                  "\"h\":\"<div><p title=\\\"x\\u001by\\\" id=\\\"one\\\">a\\u001bb<x\\u001b>c"
                  "</x\\u001b></p><script>\\u0002<</script><!--\\u0003--></div>\","
                  "\"m\":\"two\"}",
                  json);
    free(json);

    /* The private-use characters of the page itself come out as they went in: in text, in
     * attributes, literal or as references (decoded where the tokenizer decodes them). */
    static const char *const kv2[] = {"t", "p", "a", "p @title", "h", "p ::html", NULL};
    static const char doc2[] = "<p title='\xF4\x8F\xBC\x80&#x10FF1B;\x1b'>\xF4\x8F\xBC\x9B"
                               "&#x10FF00;\x1b<style>&#x10FF1B;\xF4\x8F\xBC\x81</style></p>";
    json = analysed_fields(doc2, sizeof(doc2) - 1, kv2);
    ASSERT_STR_EQ("{\"t\":\"\xF4\x8F\xBC\x9B\xF4\x8F\xBC\x80\\u001b&#x10FF1B;\xF4\x8F\xBC\x81\","
                  "\"a\":\"\xF4\x8F\xBC\x80\xF4\x8F\xBC\x9B\\u001b\","
                  "\"h\":\"<p title=\\\"\xF4\x8F\xBC\x80\xF4\x8F\xBC\x9B\\u001b\\\">"
                  "\xF4\x8F\xBC\x9B\xF4\x8F\xBC\x80\\u001b<style>&#x10FF1B;\xF4\x8F\xBC\x81"
                  "</style></p>\"}",
                  json);
    free(json);
}

/* The value limit counts the characters that come out, not the placeholders they travel as. */
TEST_IMPL(extract_control_characters_cut_at_the_value_limit)
{
    doc_t d;
    hv_buf_init(&d.b, SIZE_MAX / 2);
    PUTS(&d, "<p title=\"", 1);
    PUTS(&d, "\x1b", HV_EXTRACT_VALUE_MAX + 10);
    PUTS(&d, "\">", 1);
    PUTS(&d, "\x1b", HV_EXTRACT_VALUE_MAX + 10);
    PUTS(&d, "</p>", 1);
    size_t len;
    char *doc = finish(&d, &len);
    static const char *const attr[] = {"v", "p @title", NULL};
    static const char *const text[] = {"v", "p", NULL};
    static const char *const html[] = {"v", "p ::html", NULL};
    const char *const *const sets[] = {attr, text, html};
    for (size_t k = 0; k < HV_ARRAY_SIZE(sets); k++) {
        char *json = analysed_fields(doc, len, sets[k]);
        cJSON *obj = cJSON_Parse(json);
        ASSERT_NOT_NULL(obj);
        const char *v = cJSON_GetObjectItem(obj, "v")->valuestring;
        size_t n = strlen(v), m = strlen(HV_EXTRACT_CUT_MARK);
        ASSERT_EQ(HV_EXTRACT_VALUE_MAX + m, n);
        ASSERT_STR_EQ(HV_EXTRACT_CUT_MARK, v + n - m);
        size_t from = k == 2 ? strlen("<p title=\"") : 0;
        for (size_t i = from; i < n - m; i++)
            ASSERT_EQ('\x1b', v[i]);
        cJSON_Delete(obj);
        free(json);
    }
    free(doc);
}

static hv_ruleset_t *rules_of(const char *name, const char *const *kv)
{
    char err[256];
    hv_ruleset_t *rs = hv_ruleset_new(name);
    for (; kv[0] != NULL; kv += 2)
        ASSERT_OK(hv_ruleset_add(rs, kv[0], kv[1], err, sizeof(err)));
    ASSERT_OK(hv_ruleset_finish(rs, err, sizeof(err)));
    return rs;
}

/* The fingerprint is what the rules produce: their keys, selectors and order, not the name. */
TEST_IMPL(extract_fingerprint_follows_the_rules)
{
    static const char *const ab[] = {"a", "h1", "b[]", "p @title", NULL};
    static const char *const ba[] = {"b[]", "p @title", "a", "h1", NULL};
    static const char *const ab2[] = {"a", "h1", "b[]", "p @titles", NULL};
    static const char *const none[] = {NULL};
    hv_ruleset_t *x = rules_of("x", ab), *y = rules_of("y", ab), *z = rules_of("x", ba),
                 *w = rules_of("x", ab2), *e = rules_of("e", none);
    ASSERT_EQ(hv_ruleset_fingerprint(x), hv_ruleset_fingerprint(y));
    ASSERT_EQ(1, hv_ruleset_fingerprint(x) != hv_ruleset_fingerprint(z));
    ASSERT_EQ(1, hv_ruleset_fingerprint(x) != hv_ruleset_fingerprint(w));
    ASSERT_EQ(HV_RULESET_FP_TITLE, hv_ruleset_fingerprint(e));
    ASSERT_EQ(HV_RULESET_FP_TITLE, hv_ruleset_fingerprint(NULL));
    ASSERT_EQ(1, hv_ruleset_fingerprint(x) != HV_RULESET_FP_TITLE);
    /* A rule that was refused leaves the fingerprint as it was. */
    char err[256];
    uint64_t before = hv_ruleset_fingerprint(y);
    ASSERT_EQ(UV_EINVAL, hv_ruleset_add(y, "c", "p[", err, sizeof(err)));
    ASSERT_EQ(before, hv_ruleset_fingerprint(y));
    hv_ruleset_free(x);
    hv_ruleset_free(y);
    hv_ruleset_free(z);
    hv_ruleset_free(w);
    hv_ruleset_free(e);
}
