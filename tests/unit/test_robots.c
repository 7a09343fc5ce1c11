#include "harvestd/common.h"
#include "harvestd/robots.h"
#include "test.h"

#include <stdarg.h>
#include <stdlib.h>
#include <uv.h>

static hv_robots_t *parse(const char *body, const char *product)
{
    return hv_robots_parse(body, strlen(body), product);
}

static int allowed(const hv_robots_t *r, const char *target)
{
    return hv_robots_allowed(r, target, strlen(target));
}

#define ASSERT_ALLOWED(r, target)                                                                  \
    do {                                                                                           \
        if (allowed((r), (target)) != 1)                                                           \
            hv_test_fail(__FILE__, __LINE__, "\"%s\" should be allowed", (target));                \
    } while (0)

#define ASSERT_DISALLOWED(r, target)                                                               \
    do {                                                                                           \
        if (allowed((r), (target)) != 0)                                                           \
            hv_test_fail(__FILE__, __LINE__, "\"%s\" should be disallowed", (target));             \
    } while (0)

/* Compile "User-agent: *" plus one Disallow line holding `pattern`. */
static hv_robots_t *disallow_one(const char *pattern)
{
    char body[256];
    int n = snprintf(body, sizeof(body), "User-agent: *\nDisallow: %s\n", pattern);
    ASSERT(n > 0 && (size_t)n < sizeof(body));
    return parse(body, "harvestd");
}

/*
 * The "examples of matching" table for path patterns: each pattern, the targets it matches
 * and the targets it does not. A matching target is disallowed by "Disallow: <pattern>".
 */
static const struct {
    const char *pattern;
    const char *matches[8];
    const char *misses[8];
} match_table[] = {
    {"/fish",
     {"/fish", "/fish.html", "/fish/salmon.html", "/fishheads", "/fishheads/yummy.html",
      "/fish.php?id=anything"},
     {"/Fish.asp", "/catfish", "/?id=fish", "/desert/fish"}},
    {"/fish*",
     {"/fish", "/fish.html", "/fish/salmon.html", "/fishheads", "/fishheads/yummy.html",
      "/fish.php?id=anything"},
     {"/Fish.asp", "/catfish", "/?id=fish", "/desert/fish"}},
    {"/fish/",
     {"/fish/", "/fish/?id=anything", "/fish/salmon.htm"},
     {"/fish", "/fish.html", "/animals/fish/", "/Fish/Salmon.asp"}},
    {"/*.php",
     {"/index.php", "/filename.php", "/folder/filename.php", "/folder/filename.php?parameters",
      "/folder/any.php.file.html", "/filename.php/"},
     {"/", "/windows.PHP"}},
    {"/*.php$",
     {"/filename.php", "/folder/filename.php"},
     {"/filename.php?parameters", "/filename.php/", "/filename.php5", "/windows.PHP"}},
    {"/fish*.php", {"/fish.php", "/fishheads/catfish.php?parameters"}, {"/Fish.PHP"}},
};

TEST_IMPL(robots_match_table)
{
    for (size_t i = 0; i < HV_ARRAY_SIZE(match_table); i++) {
        hv_robots_t *r = disallow_one(match_table[i].pattern);
        ASSERT_EQ(1, hv_robots_rules(r));
        for (size_t j = 0; j < HV_ARRAY_SIZE(match_table[i].matches); j++) {
            const char *t = match_table[i].matches[j];
            if (t != NULL && allowed(r, t) != 0)
                hv_test_fail(__FILE__, __LINE__, "%s should match %s", match_table[i].pattern, t);
        }
        for (size_t j = 0; j < HV_ARRAY_SIZE(match_table[i].misses); j++) {
            const char *t = match_table[i].misses[j];
            if (t != NULL && allowed(r, t) != 1)
                hv_test_fail(__FILE__, __LINE__, "%s should not match %s", match_table[i].pattern,
                             t);
        }
        hv_robots_free(r);
    }
}

/* RFC 9309 section 5.1: several groups, a group of two agents and an empty group. */
static const char rfc_simple[] = "User-Agent: *\n"
                                 "Disallow: *.gif$\n"
                                 "Disallow: /example/\n"
                                 "Allow: /publications/\n"
                                 "\n"
                                 "User-Agent: foobot\n"
                                 "Disallow:/\n"
                                 "Allow:/example/page.html\n"
                                 "Allow:/example/allowed.gif\n"
                                 "\n"
                                 "User-Agent: barbot\n"
                                 "User-Agent: bazbot\n"
                                 "Disallow: /example/page.html\n"
                                 "\n"
                                 "User-Agent: quxbot\n"
                                 "\n"
                                 "EOF\n";

TEST_IMPL(robots_rfc_simple_example)
{
    hv_robots_t *r = parse(rfc_simple, "foobot");
    ASSERT_EQ(3, hv_robots_rules(r));
    ASSERT_ALLOWED(r, "/example/page.html");
    ASSERT_ALLOWED(r, "/example/allowed.gif");
    ASSERT_DISALLOWED(r, "/example/other.gif");
    ASSERT_DISALLOWED(r, "/publications/");
    ASSERT_DISALLOWED(r, "/");
    hv_robots_free(r);

    const char *pair[] = {"barbot", "bazbot", "BazBot"};
    for (size_t i = 0; i < HV_ARRAY_SIZE(pair); i++) {
        r = parse(rfc_simple, pair[i]);
        ASSERT_EQ(1, hv_robots_rules(r));
        ASSERT_DISALLOWED(r, "/example/page.html");
        ASSERT_ALLOWED(r, "/example/page.htm");
        ASSERT_ALLOWED(r, "/example/x.gif");
        hv_robots_free(r);
    }

    /* quxbot has a group of its own, empty: everything is allowed, "*" does not apply. */
    r = parse(rfc_simple, "quxbot");
    ASSERT_EQ(0, hv_robots_rules(r));
    ASSERT_ALLOWED(r, "/example/");
    ASSERT_ALLOWED(r, "/a.gif");
    hv_robots_free(r);

    r = parse(rfc_simple, "harvestd");
    ASSERT_EQ(3, hv_robots_rules(r));
    ASSERT_DISALLOWED(r, "/a.gif");
    ASSERT_DISALLOWED(r, "/dir/b.gif");
    ASSERT_ALLOWED(r, "/a.gif?x");
    ASSERT_DISALLOWED(r, "/example/");
    ASSERT_DISALLOWED(r, "/example/page.html");
    ASSERT_ALLOWED(r, "/example");
    ASSERT_ALLOWED(r, "/publications/");
    ASSERT_ALLOWED(r, "/publications/x.pdf");
    ASSERT_ALLOWED(r, "/");
    hv_robots_free(r);
}

/* RFC 9309 section 5.2: the longest match decides. */
TEST_IMPL(robots_rfc_longest_match_example)
{
    hv_robots_t *r = parse("User-Agent: foobot\n"
                           "Allow: /example/page/\n"
                           "Disallow: /example/page/disallowed.gif\n",
                           "foobot");
    ASSERT_ALLOWED(r, "/example/page/");
    ASSERT_ALLOWED(r, "/example/page/allowed.gif");
    ASSERT_DISALLOWED(r, "/example/page/disallowed.gif");
    ASSERT_ALLOWED(r, "/elsewhere");
    hv_robots_free(r);
}

/* RFC 9309 section 2.2.2: allow and disallow lines, with percent-encoded and UTF-8 paths. */
TEST_IMPL(robots_rfc_allow_disallow)
{
    hv_robots_t *r = parse("User-Agent: *\n"
                           "Disallow: /foo/bar?baz=quz\n"
                           "Disallow: /foo/bar/\xE3\x83\x84\n"
                           "Disallow: /foo/bar/%E3%83%84\n"
                           "Disallow: /foo/bar/%62%61%7A\n",
                           "harvestd");
    ASSERT_EQ(4, hv_robots_rules(r));
    ASSERT_DISALLOWED(r, "/foo/bar?baz=quz");
    ASSERT_ALLOWED(r, "/foo/bar?baz=qu");
    ASSERT_DISALLOWED(r, "/foo/bar/%E3%83%84");
    ASSERT_DISALLOWED(r, "/foo/bar/%e3%83%84");
    ASSERT_DISALLOWED(r, "/foo/bar/\xE3\x83\x84");
    ASSERT_DISALLOWED(r, "/foo/bar/baz");
    ASSERT_DISALLOWED(r, "/foo/bar/%62az");
    ASSERT_ALLOWED(r, "/foo/bar/ba");
    ASSERT_ALLOWED(r, "/foo/bar");
    hv_robots_free(r);
}

TEST_IMPL(robots_group_selection)
{
    static const char body[] = "User-agent: *\n"
                               "Disallow: /star\n"
                               "\n"
                               "User-agent: HarvestD\n"
                               "Disallow: /ours\n";

    hv_robots_t *r = parse(body, "harvestd");
    ASSERT_EQ(1, hv_robots_rules(r));
    ASSERT_DISALLOWED(r, "/ours");
    ASSERT_ALLOWED(r, "/star");
    hv_robots_free(r);

    r = parse(body, "HARVESTD");
    ASSERT_DISALLOWED(r, "/ours");
    hv_robots_free(r);

    /* Our own name may carry a version; only its product token counts. */
    r = parse(body, "harvestd/0.1.0");
    ASSERT_DISALLOWED(r, "/ours");
    ASSERT_ALLOWED(r, "/star");
    hv_robots_free(r);

    r = parse(body, "otherbot");
    ASSERT_DISALLOWED(r, "/star");
    ASSERT_ALLOWED(r, "/ours");
    hv_robots_free(r);

    /* No product at all: only "*" can apply. */
    r = parse(body, NULL);
    ASSERT_DISALLOWED(r, "/star");
    hv_robots_free(r);
    r = parse(body, "");
    ASSERT_DISALLOWED(r, "/star");
    hv_robots_free(r);

    /* No "*" group and no group of ours: no rules. */
    r = parse("User-agent: otherbot\nDisallow: /\n", "harvestd");
    ASSERT_EQ(0, hv_robots_rules(r));
    ASSERT_ALLOWED(r, "/anything");
    hv_robots_free(r);
}

TEST_IMPL(robots_group_product_token)
{
    /* The value's product token is what precedes '/' or whitespace. */
    hv_robots_t *r = parse("User-agent: harvestd/1.2 (+https://example.com/bot)\n"
                           "Disallow: /a\n",
                           "harvestd");
    ASSERT_DISALLOWED(r, "/a");
    hv_robots_free(r);

    r = parse("User-agent: harvestd (compatible)\nDisallow: /a\n", "harvestd");
    ASSERT_DISALLOWED(r, "/a");
    hv_robots_free(r);

    /* A longer or shorter token is another crawler. */
    r = parse("User-agent: harvestd-news\nDisallow: /a\n"
              "User-agent: harvest\nDisallow: /b\n"
              "User-agent: *\nDisallow: /c\n",
              "harvestd");
    ASSERT_ALLOWED(r, "/a");
    ASSERT_ALLOWED(r, "/b");
    ASSERT_DISALLOWED(r, "/c");
    hv_robots_free(r);

    r = parse("User-agent: ExampleBot/1.2\nDisallow: /x\nUser-agent: *\nDisallow: /\n",
              "examplebot");
    ASSERT_DISALLOWED(r, "/x");
    ASSERT_ALLOWED(r, "/y");
    hv_robots_free(r);

    /* "*" with a version or a comment is still the catch-all group. */
    r = parse("User-agent: * # everyone\nDisallow: /x\n", "harvestd");
    ASSERT_DISALLOWED(r, "/x");
    hv_robots_free(r);
}

TEST_IMPL(robots_group_merge)
{
    static const char body[] = "User-agent: harvestd\n"
                               "Disallow: /one\n"
                               "\n"
                               "User-agent: *\n"
                               "Disallow: /star\n"
                               "\n"
                               "User-agent: otherbot\n"
                               "User-agent: HARVESTD\n"
                               "Disallow: /two\n"
                               "User-agent: thirdbot\n"
                               "Disallow: /three\n"
                               "User-agent: *\n"
                               "Disallow: /star2\n";

    hv_robots_t *r = parse(body, "harvestd");
    ASSERT_EQ(2, hv_robots_rules(r));
    ASSERT_DISALLOWED(r, "/one");
    ASSERT_DISALLOWED(r, "/two");
    ASSERT_ALLOWED(r, "/three");
    ASSERT_ALLOWED(r, "/star");
    ASSERT_ALLOWED(r, "/star2");
    hv_robots_free(r);

    /* The two "*" groups merge as well. */
    r = parse(body, "nobody");
    ASSERT_EQ(2, hv_robots_rules(r));
    ASSERT_DISALLOWED(r, "/star");
    ASSERT_DISALLOWED(r, "/star2");
    ASSERT_ALLOWED(r, "/one");
    hv_robots_free(r);

    /* A merged Allow from one group beats a shorter Disallow from the other. */
    r = parse("User-agent: harvestd\nDisallow: /\n"
              "User-agent: x\nDisallow: /z\n"
              "User-agent: harvestd\nAllow: /public\n",
              "harvestd");
    ASSERT_ALLOWED(r, "/public/a");
    ASSERT_DISALLOWED(r, "/private");
    hv_robots_free(r);
}

TEST_IMPL(robots_group_boundaries)
{
    /* A User-agent line after rules starts a new group. */
    hv_robots_t *r = parse("User-agent: harvestd\n"
                           "Disallow: /x\n"
                           "User-agent: otherbot\n"
                           "Disallow: /y\n",
                           "harvestd");
    ASSERT_DISALLOWED(r, "/x");
    ASSERT_ALLOWED(r, "/y");
    hv_robots_free(r);

    /* Consecutive User-agent lines, even with blank lines, comments and a Sitemap in
     * between, name one group. */
    r = parse("User-agent: otherbot\n"
              "\n"
              "# and us\n"
              "Sitemap: https://example.com/sitemap.xml\n"
              "User-agent: harvestd\n"
              "\n"
              "Disallow: /x\n",
              "harvestd");
    ASSERT_DISALLOWED(r, "/x");
    hv_robots_free(r);

    /* Rules before any User-agent line belong to no group. */
    r = parse("Disallow: /early\n"
              "Allow: /also-early\n"
              "Crawl-delay: 5\n"
              "User-agent: *\n"
              "Disallow: /late\n",
              "harvestd");
    ASSERT_EQ(1, hv_robots_rules(r));
    ASSERT_ALLOWED(r, "/early");
    ASSERT_DISALLOWED(r, "/late");
    ASSERT_EQ(0, hv_robots_crawl_delay_ms(r));
    hv_robots_free(r);

    /* Unknown keys and lines without a colon neither start nor end a group. */
    r = parse("User-agent: harvestd\n"
              "Noindex: /x\n"
              "Disallow /nocolon\n"
              "Host: example.com\n"
              "Disallow: /y\n",
              "harvestd");
    ASSERT_EQ(1, hv_robots_rules(r));
    ASSERT_ALLOWED(r, "/nocolon");
    ASSERT_ALLOWED(r, "/x");
    ASSERT_DISALLOWED(r, "/y");
    hv_robots_free(r);
}

TEST_IMPL(robots_keys_and_spacing)
{
    static const char *const bodies[] = {
        "USER-AGENT: harvestd\nDISALLOW: /x\n",
        "useragent: harvestd\ndisallow: /x\n",
        "User agent: harvestd\nDisallow: /x\n",
        "User-agent: harvestd\nDissallow: /x\n",
        "User-agent: harvestd\nDisalow: /x\n",
        "User-agent: harvestd\nDissalow: /x\n",
        "  User-agent  :   harvestd   \n\tDisallow\t:\t/x\t\n",
        "User-agent:harvestd\nDisallow:/x\n",
    };
    for (size_t i = 0; i < HV_ARRAY_SIZE(bodies); i++) {
        hv_robots_t *r = parse(bodies[i], "harvestd");
        if (hv_robots_rules(r) != 1 || allowed(r, "/x") != 0)
            hv_test_fail(__FILE__, __LINE__, "body %zu not understood", i);
        ASSERT_ALLOWED(r, "/y");
        hv_robots_free(r);
    }

    hv_robots_t *r = parse("User-agent: *\nALLOW: /x/y\nDisallow: /x\n", "harvestd");
    ASSERT_ALLOWED(r, "/x/y");
    ASSERT_DISALLOWED(r, "/x/z");
    hv_robots_free(r);
}

TEST_IMPL(robots_longest_match)
{
    hv_robots_t *r = parse("User-agent: *\nAllow: /p\nDisallow: /\n", "harvestd");
    ASSERT_ALLOWED(r, "/page");
    ASSERT_DISALLOWED(r, "/other");
    hv_robots_free(r);

    r = parse("User-agent: *\nAllow: /folder\nDisallow: /folder/page\n", "harvestd");
    ASSERT_ALLOWED(r, "/folder/other");
    ASSERT_DISALLOWED(r, "/folder/page.html");
    hv_robots_free(r);

    /* The length of the pattern as written counts, wildcards included. */
    r = parse("User-agent: *\nDisallow: /\nAllow: /$\n", "harvestd");
    ASSERT_ALLOWED(r, "/");
    ASSERT_DISALLOWED(r, "/x");
    hv_robots_free(r);

    r = parse("User-agent: *\nAllow: /page\nDisallow: /*.htm\n", "harvestd");
    ASSERT_DISALLOWED(r, "/page.htm"); /* 6 octets beat 5 */
    ASSERT_ALLOWED(r, "/page");
    hv_robots_free(r);
}

TEST_IMPL(robots_tie_goes_to_allow)
{
    /* Same pattern, both orders. */
    hv_robots_t *r = parse("User-agent: *\nAllow: /page\nDisallow: /page\n", "harvestd");
    ASSERT_ALLOWED(r, "/page");
    ASSERT_ALLOWED(r, "/page.html");
    hv_robots_free(r);
    r = parse("User-agent: *\nDisallow: /page\nAllow: /page\n", "harvestd");
    ASSERT_ALLOWED(r, "/page");
    hv_robots_free(r);

    /* Different patterns of equal length that both match. */
    r = parse("User-agent: *\nDisallow: /a*\nAllow: /a$\n", "harvestd");
    ASSERT_ALLOWED(r, "/a");
    ASSERT_DISALLOWED(r, "/ab");
    hv_robots_free(r);
    r = parse("User-agent: *\nDisallow: /*b\nAllow: /a*\n", "harvestd");
    ASSERT_ALLOWED(r, "/ab");
    ASSERT_DISALLOWED(r, "/cb");
    hv_robots_free(r);
}

TEST_IMPL(robots_empty_disallow)
{
    hv_robots_t *r = parse("User-agent: *\nDisallow:\n", "harvestd");
    ASSERT_EQ(0, hv_robots_rules(r));
    ASSERT_ALLOWED(r, "/");
    ASSERT_ALLOWED(r, "/anything?at=all");
    hv_robots_free(r);

    r = parse("User-agent: *\nDisallow:    # nothing here\n", "harvestd");
    ASSERT_EQ(0, hv_robots_rules(r));
    ASSERT_ALLOWED(r, "/x");
    hv_robots_free(r);

    /* An empty Disallow in our group still means the "*" group does not apply. */
    r = parse("User-agent: *\nDisallow: /\nUser-agent: harvestd\nDisallow:\n", "harvestd");
    ASSERT_ALLOWED(r, "/x");
    hv_robots_free(r);
}

TEST_IMPL(robots_ignores_non_paths)
{
    hv_robots_t *r = parse("User-agent: *\n"
                           "Disallow: fish\n"
                           "Disallow: http://example.com/x\n"
                           "Disallow: ?q\n"
                           "Disallow: $\n"
                           "Allow:\n",
                           "harvestd");
    ASSERT_EQ(0, hv_robots_rules(r));
    ASSERT_ALLOWED(r, "/fish");
    ASSERT_ALLOWED(r, "/x");
    hv_robots_free(r);

    /* A pattern may start with '*'. */
    r = parse("User-agent: *\nDisallow: *private\n", "harvestd");
    ASSERT_EQ(1, hv_robots_rules(r));
    ASSERT_DISALLOWED(r, "/my/private/x");
    ASSERT_ALLOWED(r, "/public");
    hv_robots_free(r);
}

TEST_IMPL(robots_line_endings_and_bom)
{
    static const char *const bodies[] = {
        "User-agent: *\r\nDisallow: /a\r\n",
        "User-agent: *\rDisallow: /a\r",
        "User-agent: *\nDisallow: /a",
        "User-agent: *\r\n\r\n\rDisallow: /a\n\r",
        "\xEF\xBB\xBFUser-agent: *\nDisallow: /a\n",
        "\xEF\xBB\xBFUser-agent: *\r\nDisallow: /a\r\n",
    };
    for (size_t i = 0; i < HV_ARRAY_SIZE(bodies); i++) {
        hv_robots_t *r = parse(bodies[i], "harvestd");
        if (hv_robots_rules(r) != 1 || allowed(r, "/a") != 0)
            hv_test_fail(__FILE__, __LINE__, "body %zu not understood", i);
        ASSERT_ALLOWED(r, "/b");
        hv_robots_free(r);
    }

    /* A BOM anywhere else is just bytes: here it spoils the key of the second line. */
    hv_robots_t *r = parse("User-agent: *\n\xEF\xBB\xBF"
                           "Disallow: /a\n",
                           "harvestd");
    ASSERT_EQ(0, hv_robots_rules(r));
    hv_robots_free(r);

    /* Only the BOM, or nothing at all. */
    r = parse("\xEF\xBB\xBF", "harvestd");
    ASSERT_EQ(0, hv_robots_rules(r));
    hv_robots_free(r);
    r = hv_robots_parse(NULL, 0, "harvestd");
    ASSERT_EQ(0, hv_robots_rules(r));
    ASSERT_ALLOWED(r, "/");
    hv_robots_free(r);

    /* NUL bytes inside the body do not end it. */
    static const char nul_body[] = "User-agent: *\nDisallow: /a\0b\nDisallow: /c\n";
    r = hv_robots_parse(nul_body, sizeof(nul_body) - 1, "harvestd");
    ASSERT_EQ(2, hv_robots_rules(r));
    ASSERT_DISALLOWED(r, "/c");
    ASSERT_ALLOWED(r, "/a");
    ASSERT_EQ(0, hv_robots_allowed(r, "/a\0b", 4));
    hv_robots_free(r);
}

TEST_IMPL(robots_comments)
{
    hv_robots_t *r = parse("# robots.txt for example.com\n"
                           "#User-agent: harvestd\n"
                           "#Disallow: /\n"
                           "User-agent: * # everybody\n"
                           "Disallow: /private # keep out\n"
                           "Disallow: /tmp#no space before the comment\n"
                           "   # an indented comment\n",
                           "harvestd");
    ASSERT_EQ(2, hv_robots_rules(r));
    ASSERT_DISALLOWED(r, "/private/x");
    ASSERT_ALLOWED(r, "/priv");
    ASSERT_DISALLOWED(r, "/tmp/x");
    ASSERT_ALLOWED(r, "/");
    hv_robots_free(r);
}

TEST_IMPL(robots_percent_encoding)
{
    /* Escapes of unreserved characters are decoded on both sides. */
    hv_robots_t *r = disallow_one("/%7Ejoe");
    ASSERT_DISALLOWED(r, "/~joe/index.html");
    ASSERT_DISALLOWED(r, "/%7ejoe/index.html");
    ASSERT_DISALLOWED(r, "/%7Ejoe");
    ASSERT_ALLOWED(r, "/joe");
    hv_robots_free(r);

    r = disallow_one("/~joe");
    ASSERT_DISALLOWED(r, "/%7Ejoe");
    ASSERT_DISALLOWED(r, "/%7ejoe/x");
    hv_robots_free(r);

    /* "%2F" is not '/': reserved escapes stay distinct, whatever the hex case. */
    r = disallow_one("/a%2fb");
    ASSERT_ALLOWED(r, "/a/b");
    ASSERT_DISALLOWED(r, "/a%2Fb");
    ASSERT_DISALLOWED(r, "/a%2fb/c");
    hv_robots_free(r);
    r = disallow_one("/a/b");
    ASSERT_ALLOWED(r, "/a%2Fb");
    ASSERT_DISALLOWED(r, "/a/b");
    hv_robots_free(r);

    /* Hex digits compare without regard to case. */
    r = disallow_one("/%e3%83%84");
    ASSERT_DISALLOWED(r, "/%E3%83%84");
    ASSERT_DISALLOWED(r, "/\xE3\x83\x84");
    hv_robots_free(r);

    /* Bytes that may not stand raw compare equal to their escape. */
    r = disallow_one("/a b|c");
    ASSERT_DISALLOWED(r, "/a%20b%7Cc");
    ASSERT_DISALLOWED(r, "/a b|c");
    ASSERT_ALLOWED(r, "/a+b|c");
    hv_robots_free(r);

    /* A '%' that starts no escape is a literal percent sign. */
    r = disallow_one("/100%");
    ASSERT_DISALLOWED(r, "/100%25");
    ASSERT_DISALLOWED(r, "/100%");
    ASSERT_DISALLOWED(r, "/100%zz");
    ASSERT_ALLOWED(r, "/100");
    hv_robots_free(r);

    /* An escaped '*' or '$' is a literal character, not a wildcard or an anchor. */
    r = disallow_one("/a%2Ab%24");
    ASSERT_EQ(1, hv_robots_rules(r));
    ASSERT_DISALLOWED(r, "/a%2Ab%24c");
    ASSERT_ALLOWED(r, "/axb");
    hv_robots_free(r);
}

TEST_IMPL(robots_query_strings)
{
    hv_robots_t *r = parse("User-agent: *\n"
                           "Disallow: /*?\n"
                           "Disallow: /search?q=\n"
                           "Allow: /*?lang=\n",
                           "harvestd");
    ASSERT_DISALLOWED(r, "/page?x=1");
    ASSERT_ALLOWED(r, "/page");
    ASSERT_DISALLOWED(r, "/search?q=cats");
    ASSERT_ALLOWED(r, "/search");
    ASSERT_ALLOWED(r, "/page?lang=en");
    hv_robots_free(r);

    r = disallow_one("/*.pdf$");
    ASSERT_DISALLOWED(r, "/doc.pdf");
    ASSERT_ALLOWED(r, "/doc.pdf?download=1");
    hv_robots_free(r);

    r = disallow_one("/*sessionid=");
    ASSERT_DISALLOWED(r, "/cart?item=3&sessionid=abc");
    ASSERT_ALLOWED(r, "/cart?item=3");
    hv_robots_free(r);
}

TEST_IMPL(robots_wildcards)
{
    hv_robots_t *r = disallow_one("*");
    ASSERT_DISALLOWED(r, "/");
    ASSERT_DISALLOWED(r, "/anything");
    hv_robots_free(r);

    r = disallow_one("/**/x**");
    ASSERT_DISALLOWED(r, "/a/b/x");
    ASSERT_DISALLOWED(r, "//x");
    ASSERT_ALLOWED(r, "/x");
    hv_robots_free(r);

    /* "*$" anchors nothing. */
    r = disallow_one("/a*$");
    ASSERT_DISALLOWED(r, "/a");
    ASSERT_DISALLOWED(r, "/abc?d");
    hv_robots_free(r);

    /* '$' anchors only at the end of a pattern; elsewhere it is a character. */
    r = disallow_one("/a$b");
    ASSERT_DISALLOWED(r, "/a$bc");
    ASSERT_ALLOWED(r, "/a");
    hv_robots_free(r);

    r = disallow_one("/x$");
    ASSERT_DISALLOWED(r, "/x");
    ASSERT_ALLOWED(r, "/x/");
    ASSERT_ALLOWED(r, "/x?");
    hv_robots_free(r);

    /* The last segment of an anchored pattern must not overlap the ones before it. */
    r = disallow_one("/ab*ba$");
    ASSERT_ALLOWED(r, "/aba");
    ASSERT_DISALLOWED(r, "/abba");
    ASSERT_DISALLOWED(r, "/ab-ba");
    hv_robots_free(r);

    /* Greedy segment matching must still find a later occurrence. */
    r = disallow_one("/*aab*c$");
    ASSERT_DISALLOWED(r, "/aaaabxc");
    ASSERT_DISALLOWED(r, "/abaabc");
    ASSERT_ALLOWED(r, "/aab");
    ASSERT_ALLOWED(r, "/aabcx");
    hv_robots_free(r);
}

TEST_IMPL(robots_always_allows_robots_txt)
{
    hv_robots_t *r = parse("User-agent: *\nDisallow: /\nDisallow: /robots.txt$\n", "harvestd");
    ASSERT_ALLOWED(r, "/robots.txt");
    ASSERT_ALLOWED(r, "/robots%2Etxt");
    ASSERT_DISALLOWED(r, "/robots.txt.bak");
    ASSERT_DISALLOWED(r, "/dir/robots.txt");
    ASSERT_DISALLOWED(r, "/");
    hv_robots_free(r);

    r = hv_robots_disallow_all();
    ASSERT_ALLOWED(r, "/robots.txt");
    hv_robots_free(r);
}

TEST_IMPL(robots_crawl_delay)
{
    static const struct {
        const char *value;
        uint64_t ms;
    } cases[] = {
        {"10", 10000},
        {"0.5", 500},
        {".25", 250},
        {"5.", 5000},
        {"1.2345", 1234},
        {"0", 0},
        {"3600", 3600000},
        {"7200", 3600000},
        {"99999999999999999999999", 3600000},
        {"3599.9999", 3599999},
        {"-1", 0},
        {"abc", 0},
        {"10s", 0},
        {"1e3", 0},
        {"1.2.3", 0},
        {".", 0},
        {"", 0},
        {"+5", 0},
        {"5 # seconds", 5000},
    };
    for (size_t i = 0; i < HV_ARRAY_SIZE(cases); i++) {
        char body[128];
        int n = snprintf(body, sizeof(body), "User-agent: *\nCrawl-delay: %s\n", cases[i].value);
        ASSERT(n > 0 && (size_t)n < sizeof(body));
        hv_robots_t *r = parse(body, "harvestd");
        if (hv_robots_crawl_delay_ms(r) != cases[i].ms)
            hv_test_fail(__FILE__, __LINE__, "Crawl-delay: %s gave %" PRIu64 " ms, want %" PRIu64,
                         cases[i].value, hv_robots_crawl_delay_ms(r), cases[i].ms);
        ASSERT_EQ(0, hv_robots_rules(r));
        hv_robots_free(r);
    }

    /* Taken from the group that applies, not from others. */
    static const char body[] = "User-agent: *\n"
                               "Crawl-delay: 30\n"
                               "Disallow: /x\n"
                               "User-agent: harvestd\n"
                               "crawl-delay: 2\n"
                               "Disallow: /y\n"
                               "User-agent: otherbot\n"
                               "Crawl-delay: 99\n";
    hv_robots_t *r = parse(body, "harvestd");
    ASSERT_EQ(2000, hv_robots_crawl_delay_ms(r));
    ASSERT_DISALLOWED(r, "/y");
    ASSERT_ALLOWED(r, "/x");
    hv_robots_free(r);
    r = parse(body, "somebot");
    ASSERT_EQ(30000, hv_robots_crawl_delay_ms(r));
    hv_robots_free(r);
    r = parse(body, "otherbot");
    ASSERT_EQ(99000, hv_robots_crawl_delay_ms(r));
    ASSERT_ALLOWED(r, "/x");
    hv_robots_free(r);

    /* A group of ours without a delay does not inherit the one of "*". */
    r = parse("User-agent: *\nCrawl-delay: 30\nUser-agent: harvestd\nDisallow: /y\n", "harvestd");
    ASSERT_EQ(0, hv_robots_crawl_delay_ms(r));
    hv_robots_free(r);

    /* Merged groups keep the largest delay; an invalid one changes nothing. */
    r = parse("User-agent: harvestd\nCrawl-delay: 1.5\n"
              "User-agent: x\nDisallow: /\n"
              "User-agent: harvestd\nCrawl-delay: 4\nCrawl-delay: soon\nCrawl-delay: 0.1\n",
              "harvestd");
    ASSERT_EQ(4000, hv_robots_crawl_delay_ms(r));
    hv_robots_free(r);

    /* A Crawl-delay line ends the User-agent run like any rule. */
    r = parse("User-agent: harvestd\nCrawl-delay: 1\nUser-agent: x\nDisallow: /a\n", "harvestd");
    ASSERT_EQ(1000, hv_robots_crawl_delay_ms(r));
    ASSERT_ALLOWED(r, "/a");
    hv_robots_free(r);
}

TEST_IMPL(robots_allow_all_disallow_all)
{
    hv_robots_t *r = hv_robots_allow_all();
    ASSERT_NOT_NULL(r);
    ASSERT_EQ(0, hv_robots_rules(r));
    ASSERT_EQ(0, hv_robots_crawl_delay_ms(r));
    ASSERT_ALLOWED(r, "/");
    ASSERT_ALLOWED(r, "/private?x=1");
    ASSERT_ALLOWED(r, "");
    hv_robots_free(r);

    r = hv_robots_disallow_all();
    ASSERT_NOT_NULL(r);
    ASSERT_EQ(1, hv_robots_rules(r));
    ASSERT_EQ(0, hv_robots_crawl_delay_ms(r));
    ASSERT_DISALLOWED(r, "/");
    ASSERT_DISALLOWED(r, "/private?x=1");
    ASSERT_DISALLOWED(r, "");
    ASSERT_DISALLOWED(r, "/?");
    hv_robots_free(r);

    hv_robots_free(NULL);
}

TEST_IMPL(robots_empty_target_is_root)
{
    hv_robots_t *r = disallow_one("/$");
    ASSERT_DISALLOWED(r, "");
    ASSERT_DISALLOWED(r, "/");
    ASSERT_ALLOWED(r, "/a");
    ASSERT_ALLOWED(r, "/?a");
    hv_robots_free(r);
}

/* Builds "/" followed by `n` copies of `c`, NUL-terminated. */
static char *repeat_path(char c, size_t n)
{
    char *p = hv_xmalloc(n + 2);
    p[0] = '/';
    memset(p + 1, c, n);
    p[n + 1] = '\0';
    return p;
}

TEST_IMPL(robots_pathological_patterns_are_fast)
{
    char pattern[4096];
    size_t n = 0;
    uint64_t start = hv_mono_ms();

    /* Backtracking would need on the order of len^9 steps for this pair. */
    hv_robots_t *r = disallow_one("/*a*a*a*a*a*a*a*a*a*b");
    char *as = repeat_path('a', 60000);
    for (int i = 0; i < 100; i++)
        ASSERT_ALLOWED(r, as);
    as[60000] = 'b';
    ASSERT_DISALLOWED(r, as);
    hv_robots_free(r);

    /* A pattern of a thousand stars, anchored and not. */
    n = (size_t)snprintf(pattern, sizeof(pattern), "User-agent: *\nDisallow: /");
    for (int i = 0; i < 1000; i++) {
        pattern[n++] = 'a';
        pattern[n++] = '*';
    }
    memcpy(pattern + n, "b$\nAllow: /*a*c\n", sizeof("b$\nAllow: /*a*c\n"));
    r = parse(pattern, "harvestd");
    ASSERT_EQ(2, hv_robots_rules(r));
    as[60000] = 'a';
    for (int i = 0; i < 100; i++)
        ASSERT_ALLOWED(r, as);
    as[60000] = 'b';
    ASSERT_DISALLOWED(r, as);
    as[1] = 'c';
    ASSERT_ALLOWED(r, as); /* the pattern must start with "/a" */
    hv_robots_free(r);
    free(as);

    /* Far below what any super-linear matcher would need, even under sanitizers. */
    ASSERT_LT(hv_mono_ms() - start, 5000);
}

/* Compile the body that `fmt` and its arguments make, for "harvestd". */
static hv_robots_t *parse_fmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static hv_robots_t *parse_fmt(const char *fmt, ...)
{
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    ASSERT(n >= 0);
    char *body = hv_xmalloc((size_t)n + 1);
    ASSERT_EQ(n, vsnprintf(body, (size_t)n + 1, fmt, again));
    va_end(again);
    hv_robots_t *r = hv_robots_parse(body, (size_t)n, "harvestd");
    free(body);
    return r;
}

/* `spec` with each "c{n}" written out as n copies of c: "/a{3}b" is "/aaab". */
static char *expand(const char *spec)
{
    size_t cap = 64, len = 0;
    char *out = hv_xmalloc(cap);
    for (const char *p = spec; *p != '\0'; p++) {
        char c = *p;
        size_t count = 1;
        if (p[1] == '{') {
            char *end;
            count = strtoul(p + 2, &end, 10);
            ASSERT(*end == '}');
            p = end;
        }
        if (len + count + 1 > cap) {
            cap = (len + count + 1) * 2;
            out = hv_xrealloc(out, cap);
        }
        memset(out + len, c, count);
        len += count;
    }
    out[len] = '\0';
    return out;
}

/*
 * A Disallow longer than 2,048 octets after normalisation is cut to the prefix that fits: the
 * cut pattern matches every target the whole one matched, so a limit never lets through what
 * the site forbade. It disallows more than was written, never less. Patterns and targets are
 * expand() specs.
 */
static const struct {
    const char *pattern;
    const char *disallowed[4];
    const char *allowed[3];
} long_disallows[] = {
    /* At the limit a pattern is kept whole. */
    {"/x{2047}", {"/x{2047}"}, {"/x{2046}y"}},
    /* Beyond it the first 2,048 octets decide. */
    {"/a{2999}", {"/a{2999}", "/a{2999}/more?q=1", "/a{2047}b"}, {"/aab", "/a{2046}b"}},
    /* A cut pattern no longer reaches the end of what it named: its "$" has to go, or it
     * would match nothing at all. */
    {"/a{2999}$", {"/a{2999}", "/a{2999}.html"}, {"/a{2046}"}},
    /* Wildcards before the cut keep working; one right at the cut is the implicit one at the
     * end of every pattern. */
    {"/*a{2999}", {"/a{2999}", "/dir/a{2999}"}, {"/dir/aaa"}},
    {"/a{2046}*b{999}", {"/a{2046}", "/a{2046}zzz"}, {"/a{2045}"}},
    /* Raw non-ASCII counts three octets per byte once encoded: 700 of them make 2,101. The
     * cut falls between escapes, after the 682 that fit with the '/', never inside one (a
     * pattern ending in "%" or "%E" would miss the second target). */
    {"/\xE9{700}", {"/\xE9{700}", "/\xE9{682}a"}, {"/\xE9{681}a"}},
    /* So does a lone '%', which stands for itself as "%25". */
    {"/a{2045}%", {"/a{2045}%25", "/a{2045}%"}, {"/a{2044}"}},
    {"/a{2044}%", {"/a{2044}%25"}, {"/a{2044}%26"}},
};

static void check_targets(const hv_robots_t *r, size_t rule, const char *const *targets, size_t n,
                          int want)
{
    for (size_t j = 0; j < n && targets[j] != NULL; j++) {
        char *t = expand(targets[j]);
        int got = allowed(r, t);
        free(t);
        if (got != want)
            hv_test_fail(__FILE__, __LINE__, "rule %zu: %s should be %s", rule, targets[j],
                         want ? "allowed" : "disallowed");
    }
}

TEST_IMPL(robots_long_disallow_is_truncated)
{
    for (size_t i = 0; i < HV_ARRAY_SIZE(long_disallows); i++) {
        char *pattern = expand(long_disallows[i].pattern);
        hv_robots_t *r = parse_fmt("User-agent: *\nDisallow: %s\n", pattern);
        free(pattern);
        ASSERT_EQ(1, hv_robots_rules(r));
        check_targets(r, i, long_disallows[i].disallowed,
                      HV_ARRAY_SIZE(long_disallows[i].disallowed), 0);
        check_targets(r, i, long_disallows[i].allowed, HV_ARRAY_SIZE(long_disallows[i].allowed), 1);
        hv_robots_free(r);
    }

    /* Very long targets are matched like any other. */
    hv_robots_t *r = disallow_one("/*zz$");
    char *target = repeat_path('y', 20000);
    ASSERT_ALLOWED(r, target);
    target[19999] = 'z';
    target[20000] = 'z';
    ASSERT_DISALLOWED(r, target);
    hv_robots_free(r);
    free(target);
}

/*
 * The longest match under the pattern limit. A Disallow cut to 2,048 octets keeps the length
 * it was written with, so an Allow that it beats as written (one of 2,048 octets would win a
 * tie with the cut length) still loses. An Allow too long to keep is dropped rather than cut:
 * a cut one would match targets its author never named, and win there by its written length,
 * while dropping it only disallows more.
 */
static const struct {
    const char *rules; /* an expand() spec */
    size_t kept;
    const char *target;
    int allowed;
} limit_precedence[] = {
    /* The cut Disallow against a kept Allow, in either order. */
    {"Allow: /a{2047}\nDisallow: /a{2999}\n", 2, "/a{2999}", 0},
    {"Disallow: /a{2999}\nAllow: /a{2047}\n", 2, "/a{2999}", 0},
    /* Targets only the Allow matched as written now meet the cut Disallow too. */
    {"Disallow: /a{2999}\nAllow: /a{2047}\n", 2, "/a{2047}", 0},
    /* Only the Disallow matches this one as written; so would a cut Allow, and win. */
    {"Disallow: /a{2099}\nAllow: /a{2499}\n", 1, "/a{2099}b", 0},
    /* As written the Allow wins here; without it the Disallow does. */
    {"Disallow: /a{2099}\nAllow: /a{2499}\n", 1, "/a{2499}", 0},
    {"Allow: /a{2499}\nDisallow: /\nAllow: /b\n", 2, "/a{2499}", 0},
    {"Allow: /a{2499}\nDisallow: /\nAllow: /b\n", 2, "/b", 1},
    /* What no kept rule matches stays allowed. */
    {"Allow: /a{2499}\nDisallow: /a{2099}\n", 1, "/a{1999}", 1},
};

TEST_IMPL(robots_limits_keep_the_longest_match_safe)
{
    for (size_t i = 0; i < HV_ARRAY_SIZE(limit_precedence); i++) {
        char *rules = expand(limit_precedence[i].rules);
        hv_robots_t *r = parse_fmt("User-agent: *\n%s", rules);
        free(rules);
        if (hv_robots_rules(r) != limit_precedence[i].kept)
            hv_test_fail(__FILE__, __LINE__, "case %zu: %zu rules kept", i, hv_robots_rules(r));
        check_targets(r, i, &limit_precedence[i].target, 1, limit_precedence[i].allowed);
        hv_robots_free(r);
    }
}

/* Past 10,000 rules Disallow rules are still kept, and only Allow rules are ignored. */
TEST_IMPL(robots_rules_past_the_cap)
{
    const size_t cap = 200 * 1024;
    char *body = hv_xmalloc(cap);
    size_t len = (size_t)snprintf(body, cap, "User-agent: *\n");
    for (int i = 0; i < 10000; i++)
        len += (size_t)snprintf(body + len, cap - len, "Allow: /a%05d\n", i);
    len += (size_t)snprintf(body + len, cap - len, "Disallow: /x\nAllow: /x/ok\nDisallow: /y$\n");
    ASSERT_LT(len, cap);
    hv_robots_t *r = hv_robots_parse(body, len, "harvestd");
    ASSERT_EQ(10002, hv_robots_rules(r));
    ASSERT_DISALLOWED(r, "/x/y");
    ASSERT_DISALLOWED(r, "/x/ok"); /* the Allow past the cap is ignored */
    ASSERT_DISALLOWED(r, "/y");
    ASSERT_ALLOWED(r, "/y/z");
    ASSERT_ALLOWED(r, "/a09999");
    ASSERT_ALLOWED(r, "/elsewhere");
    hv_robots_free(r);

    len = (size_t)snprintf(body, cap, "User-agent: *\n");
    for (int i = 0; i < 10000; i++)
        len += (size_t)snprintf(body + len, cap - len, "Disallow: /d%05d\n", i);
    len += (size_t)snprintf(body + len, cap - len, "Allow: /d00000/ok\nDisallow: /late\n");
    r = hv_robots_parse(body, len, "harvestd");
    ASSERT_EQ(10001, hv_robots_rules(r));
    ASSERT_DISALLOWED(r, "/d00000/ok");
    ASSERT_DISALLOWED(r, "/late/x");
    ASSERT_ALLOWED(r, "/elsewhere");
    hv_robots_free(r);
    free(body);
}

TEST_IMPL(robots_500_kib_body)
{
    const size_t cap = 500 * 1024;
    char *body = hv_xmalloc(cap + 1);
    size_t len = 0;
    size_t lines = 0;

    len += (size_t)snprintf(body, cap, "User-agent: *\nCrawl-delay: 1\n");
    for (;;) {
        char line[64];
        int n = snprintf(line, sizeof(line), "Disallow: /p%06zu/*.html$\n", lines);
        ASSERT(n > 0 && (size_t)n < sizeof(line));
        if (len + (size_t)n > cap)
            break;
        memcpy(body + len, line, (size_t)n);
        len += (size_t)n;
        lines++;
    }
    ASSERT_GT(lines, 10000);

    uint64_t start = hv_mono_ms();
    hv_robots_t *r = hv_robots_parse(body, len, "harvestd");
    ASSERT_EQ(lines, hv_robots_rules(r)); /* Disallow rules are kept past 10,000 */
    ASSERT_EQ(1000, hv_robots_crawl_delay_ms(r));
    ASSERT_DISALLOWED(r, "/p000000/a.html");
    ASSERT_DISALLOWED(r, "/p009999/dir/b.html");
    ASSERT_ALLOWED(r, "/p009999/b.htm");
    ASSERT_DISALLOWED(r, "/p010000/a.html");
    char last[32];
    snprintf(last, sizeof(last), "/p%06zu/z.html", lines - 1);
    ASSERT_DISALLOWED(r, last);
    ASSERT_ALLOWED(r, "/elsewhere");
    for (int i = 0; i < 200; i++)
        ASSERT_ALLOWED(r, "/p0099/not-a-rule.html");
    hv_robots_free(r);
    ASSERT_LT(hv_mono_ms() - start, 5000);

    /* The same size as a single line without a newline: a rule cut to 2,048 octets. */
    memset(body, '/', cap);
    memcpy(body, "User-agent: *\nDisallow: ", 24);
    r = hv_robots_parse(body, cap, "harvestd");
    ASSERT_EQ(1, hv_robots_rules(r));
    ASSERT_ALLOWED(r, "/");
    memset(body, '/', 2048);
    body[2048] = '\0';
    ASSERT_DISALLOWED(r, body);
    hv_robots_free(r);
    free(body);
}

/*
 * Random bodies made of robots.txt fragments: nothing may crash or leak, whatever the mix
 * (the sanitizer build checks the rest).
 */
TEST_IMPL(robots_random_bodies)
{
    static const char *const parts[] = {
        "User-agent: ",
        "harvestd",
        "*",
        "\n",
        "\r",
        "\r\n",
        "Disallow:",
        "Allow:",
        " ",
        "/",
        "*",
        "$",
        "%",
        "%2",
        "%7e",
        "#",
        "Crawl-delay: ",
        "0.5",
        "\xEF\xBB\xBF",
        "a",
        "?",
        ":",
        "\t",
        "\xFF",
        "Sitemap: /s",
        "useragent:",
    };
    static const char *const targets[] = {"/", "/a", "/a/b?c", "/%7E", "/*$", "", "/%", "/a$"};
    uint32_t seed = 12345;
    char body[512];

    for (int round = 0; round < 2000; round++) {
        size_t len = 0;
        for (;;) {
            seed = seed * 1103515245u + 12345u;
            const char *part = parts[(seed >> 16) % HV_ARRAY_SIZE(parts)];
            size_t n = strlen(part);
            if (len + n > sizeof(body))
                break;
            memcpy(body + len, part, n);
            len += n;
        }
        hv_robots_t *r = hv_robots_parse(body, len, "harvestd");
        ASSERT_LE(hv_robots_rules(r), len);
        ASSERT_LE(hv_robots_crawl_delay_ms(r), 3600000);
        for (size_t i = 0; i < HV_ARRAY_SIZE(targets); i++) {
            int ok = allowed(r, targets[i]);
            ASSERT(ok == 0 || ok == 1);
        }
        hv_robots_free(r);
    }
}

typedef struct {
    const hv_robots_t *r;
    int failures;
} robots_thread_arg_t;

static void robots_thread(void *p)
{
    robots_thread_arg_t *a = p;
    for (int i = 0; i < 20000; i++) {
        if (allowed(a->r, "/private/x") != 0 || allowed(a->r, "/public/x") != 1 ||
            allowed(a->r, "/%7Ejoe") != 0)
            a->failures++;
    }
}

/* One compiled set is shared read-only by the threads that consult it. */
TEST_IMPL(robots_shared_between_threads)
{
    hv_robots_t *r = parse("User-agent: *\nDisallow: /private\nDisallow: /~joe\n", "harvestd");
    uv_thread_t tids[4];
    robots_thread_arg_t args[4];

    for (size_t i = 0; i < HV_ARRAY_SIZE(tids); i++) {
        args[i].r = r;
        args[i].failures = 0;
        ASSERT_OK(uv_thread_create(&tids[i], robots_thread, &args[i]));
    }
    for (size_t i = 0; i < HV_ARRAY_SIZE(tids); i++) {
        ASSERT_OK(uv_thread_join(&tids[i]));
        ASSERT_EQ(0, args[i].failures);
    }
    hv_robots_free(r);
}
