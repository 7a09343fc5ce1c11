#include "harvestd/common.h"
#include "harvestd/url.h"
#include "test.h"

#include <stdlib.h>

static int parse(hv_url_t *u, const char *text, const char **why)
{
    *why = NULL;
    return hv_url_parse(u, text, strlen(text), why);
}

/* Parse `text` and check that it fails with `err` and `reason`, leaving `u` empty. */
#define ASSERT_PARSE_FAILS(text, err, reason)                                                      \
    do {                                                                                           \
        hv_url_t u_;                                                                               \
        const char *why_;                                                                          \
        memset(&u_, 0x5A, sizeof(u_));                                                             \
        ASSERT_EQ(err, parse(&u_, text, &why_));                                                   \
        ASSERT_STR_EQ(reason, why_);                                                               \
        ASSERT_NULL(u_.href);                                                                      \
        ASSERT_NULL(u_.host);                                                                      \
        ASSERT_NULL(u_.authority);                                                                 \
        ASSERT_NULL(u_.target);                                                                    \
        hv_url_free(&u_);                                                                          \
    } while (0)

/* Parse `text` and compare the normalised href. */
#define ASSERT_HREF(text, want)                                                                    \
    do {                                                                                           \
        hv_url_t u_;                                                                               \
        const char *why_;                                                                          \
        int rc_ = parse(&u_, text, &why_);                                                         \
        if (rc_ != 0)                                                                              \
            hv_test_fail(__FILE__, __LINE__, "parse(\"%s\") failed: %s", text, why_);              \
        ASSERT_STR_EQ(want, u_.href);                                                              \
        hv_url_free(&u_);                                                                          \
    } while (0)

static hv_url_t rfc_base;

static void resolve_base(const char *base)
{
    const char *why;
    hv_url_free(&rfc_base);
    ASSERT_OK(parse(&rfc_base, base, &why));
}

/* Resolve `ref` against the current base and compare the href. */
#define ASSERT_RESOLVES(ref, want)                                                                 \
    do {                                                                                           \
        hv_url_t r_;                                                                               \
        const char *why_ = NULL;                                                                   \
        int rc_ = hv_url_resolve(&r_, &rfc_base, ref, strlen(ref), &why_);                         \
        if (rc_ != 0)                                                                              \
            hv_test_fail(__FILE__, __LINE__, "resolve(\"%s\") failed: %s", ref, why_);             \
        ASSERT_STR_EQ(want, r_.href);                                                              \
        hv_url_free(&r_);                                                                          \
    } while (0)

#define ASSERT_RESOLVE_FAILS(ref, err, reason)                                                     \
    do {                                                                                           \
        hv_url_t r_;                                                                               \
        const char *why_ = NULL;                                                                   \
        ASSERT_EQ(err, hv_url_resolve(&r_, &rfc_base, ref, strlen(ref), &why_));                   \
        ASSERT_STR_EQ(reason, why_);                                                               \
        ASSERT_NULL(r_.href);                                                                      \
        hv_url_free(&r_);                                                                          \
    } while (0)

TEST_IMPL(url_parse_fields)
{
    hv_url_t u;
    const char *why;
    ASSERT_OK(parse(&u, "https://Example.ORG:8443/a/b?x=1&y=2#top", &why));
    ASSERT_EQ(HV_SCHEME_HTTPS, u.scheme);
    ASSERT_STR_EQ("example.org", u.host);
    ASSERT_EQ(0, u.host_is_ip);
    ASSERT_EQ(0, u.host_is_ipv6);
    ASSERT_EQ(8443, u.port);
    ASSERT_STR_EQ("example.org:8443", u.authority);
    ASSERT_STR_EQ("/a/b?x=1&y=2", u.target);
    ASSERT_STR_EQ("https://example.org:8443/a/b?x=1&y=2", u.href);
    hv_url_free(&u);
    ASSERT_NULL(u.href);
    hv_url_free(&u); /* twice is fine: the struct is zeroed */
}

TEST_IMPL(url_parse_defaults_and_normalisation)
{
    hv_url_t u;
    const char *why;
    ASSERT_OK(parse(&u, "HTTP://WWW.Example.com", &why));
    ASSERT_EQ(HV_SCHEME_HTTP, u.scheme);
    ASSERT_EQ(80, u.port);
    ASSERT_STR_EQ("www.example.com", u.authority);
    ASSERT_STR_EQ("/", u.target);
    ASSERT_STR_EQ("http://www.example.com/", u.href);
    hv_url_free(&u);

    ASSERT_HREF("http://example.com:80/x", "http://example.com/x");
    ASSERT_HREF("https://example.com:443/x", "https://example.com/x");
    ASSERT_HREF("http://example.com:443/x", "http://example.com:443/x");
    ASSERT_HREF("https://example.com:80/x", "https://example.com:80/x");
    ASSERT_HREF("http://example.com:/x", "http://example.com/x"); /* empty port: default */
    ASSERT_HREF("http://example.com:0080/", "http://example.com/");
    ASSERT_HREF("http://h/a/./b/../c/", "http://h/a/c/");
    ASSERT_HREF("http://h/../../x", "http://h/x");
    ASSERT_HREF("http://h/a/..", "http://h/");
    ASSERT_HREF("http://h/a//b", "http://h/a//b");
    ASSERT_HREF("http://h?q=1", "http://h/?q=1");
    ASSERT_HREF("http://h/p?", "http://h/p?"); /* an empty query is kept */
    ASSERT_HREF("http://h/p#frag", "http://h/p");
    ASSERT_HREF("http://h/p?q#frag#more", "http://h/p?q");
    ASSERT_HREF("http://h/%7euser/%3a", "http://h/~user/%3A");
}

TEST_IMPL(url_parse_iri_is_percent_encoded)
{
    hv_url_t u;
    const char *why;
    ASSERT_OK(parse(&u, "http://example.org/caf\xC3\xA9", &why));
    ASSERT_STR_EQ("http://example.org/caf%C3%A9", u.href);
    ASSERT_STR_EQ("/caf%C3%A9", u.target);
    hv_url_free(&u);
    ASSERT_HREF("http://h/\xC3\xA9?q=\xE2\x82\xAC#\xC3\xA9", "http://h/%C3%A9?q=%E2%82%AC");
}

TEST_IMPL(url_parse_characters_uriparser_refuses)
{
    ASSERT_HREF("http://h/x?a[]=1&b={c}|d^e`f", "http://h/x?a%5B%5D=1&b=%7Bc%7D%7Cd%5Ee%60f");
    ASSERT_HREF("http://h/\"<x>\"", "http://h/%22%3Cx%3E%22");
    ASSERT_HREF("http://h/100%", "http://h/100%25"); /* a stray '%' */
    ASSERT_HREF("http://h/%zz", "http://h/%25zz");
    ASSERT_HREF("http://h/a%20b", "http://h/a%20b");              /* a valid escape stays */
    ASSERT_HREF("http://h/a\\b\\c?d\\e", "http://h/a/b/c?d%5Ce"); /* '\\' is '/' in the path */
    ASSERT_HREF("http:\\\\h\\p", "http://h/p");
}

TEST_IMPL(url_parse_ip_literals)
{
    hv_url_t u;
    const char *why;
    ASSERT_OK(parse(&u, "http://[::1]:8080/", &why));
    ASSERT_STR_EQ("::1", u.host);
    ASSERT_EQ(1, u.host_is_ip);
    ASSERT_EQ(1, u.host_is_ipv6);
    ASSERT_EQ(8080, u.port);
    ASSERT_STR_EQ("[::1]:8080", u.authority);
    ASSERT_STR_EQ("/", u.target);
    ASSERT_STR_EQ("http://[::1]:8080/", u.href);
    hv_url_free(&u);

    ASSERT_OK(parse(&u, "https://[2001:DB8::A]/x", &why));
    ASSERT_STR_EQ("2001:db8::a", u.host); /* as written, lower-cased, not expanded */
    ASSERT_STR_EQ("[2001:db8::a]", u.authority);
    ASSERT_STR_EQ("https://[2001:db8::a]/x", u.href);
    hv_url_free(&u);

    ASSERT_OK(parse(&u, "http://192.0.2.7:81/x", &why));
    ASSERT_STR_EQ("192.0.2.7", u.host);
    ASSERT_EQ(1, u.host_is_ip);
    ASSERT_EQ(0, u.host_is_ipv6);
    ASSERT_STR_EQ("192.0.2.7:81", u.authority);
    hv_url_free(&u);

    /* It ends in a number, so it is an IPv4 address or nothing (WHATWG): not a name. */
    ASSERT_PARSE_FAILS("http://192.0.2.300/", HV_EURL, "invalid_host");
}

/* Every spelling of an IPv4 address that inet_aton() (and so getaddrinfo()) accepts is read
 * as that address and written as a dotted quad, so that the address guard and the Host
 * header see what a connection would reach. */
TEST_IMPL(url_parse_ipv4_in_every_spelling)
{
    static const struct {
        const char *in, *href;
    } cases[] = {
        {"http://2130706433/", "http://127.0.0.1/"},
        {"http://0x7f000001/", "http://127.0.0.1/"},
        {"http://0X7F000001:8080/x", "http://127.0.0.1:8080/x"},
        {"http://0x7f.1/", "http://127.0.0.1/"},
        {"http://0177.0.0.1/", "http://127.0.0.1/"},
        {"http://0177.1/", "http://127.0.0.1/"},
        {"http://127.1/", "http://127.0.0.1/"},
        {"http://127.0.1/", "http://127.0.0.1/"},
        {"http://127.0.0.1./", "http://127.0.0.1/"},
        {"http://0x7f.0.0.0x1/", "http://127.0.0.1/"},
        {"http://0/", "http://0.0.0.0/"},
        {"http://0x/", "http://0.0.0.0/"},
        {"http://4294967295/", "http://255.255.255.255/"},
        {"http://10.0x10.1/", "http://10.16.0.1/"},
        {"http://169.254.43518/", "http://169.254.169.254/"},
        {"http://00000000000000000000012.0.0.1/", "http://10.0.0.1/"},
    };
    for (size_t i = 0; i < HV_ARRAY_SIZE(cases); i++) {
        hv_url_t u;
        const char *why;
        ASSERT_OK(parse(&u, cases[i].in, &why));
        ASSERT_STR_EQ(cases[i].href, u.href);
        ASSERT_EQ(1, u.host_is_ip);
        ASSERT_EQ(0, u.host_is_ipv6);
        hv_url_free(&u);
    }
    /* Hosts that end in a number but are no address are invalid, never looked up. */
    static const char *const bad[] = {
        "http://1.2.3.4.5/",    "http://4294967296/",  "http://0x100000000/", "http://256.0.0.1/",
        "http://1.256.0.1/",    "http://1.2.65536/",   "http://1.16777216/",  "http://08.0.0.1/",
        "http://0x7g.0.0.1/",   "http://example.123/", "http://1..2/",        "http://.1/",
        "http://99999999999999999999/",
    };
    for (size_t i = 0; i < HV_ARRAY_SIZE(bad); i++)
        ASSERT_PARSE_FAILS(bad[i], HV_EURL, "invalid_host");
    /* Names that merely contain digits stay names. */
    static const char *const names[] = {"http://1e100/", "http://123.example/",
                                        "http://0x7f.example/", "http://1.2.3.x4/"};
    for (size_t i = 0; i < HV_ARRAY_SIZE(names); i++) {
        hv_url_t u;
        const char *why;
        ASSERT_OK(parse(&u, names[i], &why));
        ASSERT_EQ(0, u.host_is_ip);
        hv_url_free(&u);
    }
}

/* Hosts no connection could use are refused at input, not left to fail as ConnectError. */
TEST_IMPL(url_parse_hosts_no_connection_can_use)
{
    char host[300], url[400];
    memset(host, 'a', 63);
    host[63] = '\0';
    snprintf(url, sizeof(url), "http://%s.example/", host);
    ASSERT_HREF(url, url); /* a 63-octet label is the limit */
    memset(host, 'a', 64);
    host[64] = '\0';
    snprintf(url, sizeof(url), "http://%s.example/", host);
    ASSERT_PARSE_FAILS(url, HV_EURL, "invalid_host");
    /* 254 octets in all (four 62-octet labels and their dots): one past the DNS limit. */
    snprintf(host, sizeof(host), "%.62s.%.62s.%.62s.%.62s.aa", url + 7, url + 7, url + 7, url + 7);
    ASSERT_EQ(254, strlen(host));
    snprintf(url, sizeof(url), "http://%s/", host);
    ASSERT_PARSE_FAILS(url, HV_EURL, "invalid_host");
    host[253] = '\0';
    snprintf(url, sizeof(url), "http://%s/", host);
    ASSERT_HREF(url, url);
    ASSERT_PARSE_FAILS("http://a..b/", HV_EURL, "invalid_host");
    /* A link-local address means nothing without the interface it belongs to. */
    ASSERT_PARSE_FAILS("http://[fe80::1]/", HV_EURL, "invalid_host");
    ASSERT_PARSE_FAILS("http://[FEBF::1]/", HV_EURL, "invalid_host");
    ASSERT_HREF("http://[fec0::1]/", "http://[fec0::1]/");
}

/* Internationalised host names are looked up in their ASCII form (IDNA 2008 with UTS #46
 * mapping, as browsers do), in input lines and in Location headers alike. */
TEST_IMPL(url_parse_idn_hosts_become_punycode)
{
    ASSERT_HREF("http://caf\xC3\xA9.example/menu", "http://xn--caf-dma.example/menu");
    ASSERT_HREF("http://B\xC3\x9C" "CHER.example:8080/", "http://xn--bcher-kva.example:8080/");
    ASSERT_HREF("http://xn--caf-dma.example/", "http://xn--caf-dma.example/");
    /* U+3002, the ideographic full stop, separates labels too. */
    ASSERT_HREF("http://\xE4\xBE\x8B\xE3\x80\x82" "example/", "http://xn--fsq.example/");
    hv_url_t u;
    const char *why;
    ASSERT_OK(parse(&u, "http://caf\xC3\xA9.example/", &why));
    ASSERT_STR_EQ("xn--caf-dma.example", u.host);
    ASSERT_STR_EQ("xn--caf-dma.example", u.authority);
    hv_url_free(&u);
    /* What IDNA 2008 refuses is not a host: a bidi control, a symbol such as U+2603. */
    ASSERT_PARSE_FAILS("http://a\xE2\x80\xAE" "b.example/", HV_EURL, "invalid_host");
    ASSERT_PARSE_FAILS("https://\xE2\x98\x83.net/", HV_EURL, "invalid_host");
    resolve_base("http://h.example/a/b");
    ASSERT_RESOLVES("http://\xC3\xA9t\xC3\xA9.example/x", "http://xn--t-9fab.example/x");
    hv_url_free(&rfc_base);
}

/* "127.0.0.1." is the address 127.0.0.1, as the WHATWG IPv4 parser reads it; a name keeps
 * its trailing dot (an absolute DNS name). */
TEST_IMPL(url_parse_ipv4_with_a_trailing_dot)
{
    hv_url_t u;
    const char *why;
    ASSERT_OK(parse(&u, "http://127.0.0.1.:8080/x", &why));
    ASSERT_STR_EQ("127.0.0.1", u.host);
    ASSERT_EQ(1, u.host_is_ip);
    ASSERT_STR_EQ("127.0.0.1:8080", u.authority);
    ASSERT_STR_EQ("http://127.0.0.1:8080/x", u.href);
    hv_url_free(&u);
    ASSERT_OK(parse(&u, "http://example.org./", &why));
    ASSERT_STR_EQ("example.org.", u.host);
    ASSERT_EQ(0, u.host_is_ip);
    hv_url_free(&u);
}

TEST_IMPL(url_parse_error_reasons)
{
    char long_url[HV_URL_MAX + 2];
    memcpy(long_url, "http://h/", 9);
    memset(long_url + 9, 'a', sizeof(long_url) - 10);
    long_url[sizeof(long_url) - 1] = '\0';
    ASSERT_EQ(HV_URL_MAX + 1, strlen(long_url));
    ASSERT_PARSE_FAILS(long_url, HV_EURL, "line_exceeds_8_kib");
    long_url[HV_URL_MAX] = '\0'; /* exactly the limit is fine */
    ASSERT_HREF(long_url, long_url);

    ASSERT_PARSE_FAILS("http://h/\xC3", HV_EURL, "invalid_utf8");
    ASSERT_PARSE_FAILS("http://h/\xED\xA0\x80", HV_EURL, "invalid_utf8");
    ASSERT_PARSE_FAILS("http://h/a\tb", HV_EURL, "control_character");
    ASSERT_PARSE_FAILS("http://h/\x7F", HV_EURL, "control_character");
    ASSERT_PARSE_FAILS("http://h/a\x01 b", HV_EURL, "control_character"); /* checked first */
    ASSERT_PARSE_FAILS("http://h/a b", HV_EURL, "contains_space");
    ASSERT_PARSE_FAILS("example.com/x", HV_EURL, "not_absolute");
    ASSERT_PARSE_FAILS("//example.com/x", HV_EURL, "not_absolute");
    ASSERT_PARSE_FAILS("/x", HV_EURL, "not_absolute");
    ASSERT_PARSE_FAILS("", HV_EURL, "not_absolute");
    hv_url_t none;
    const char *why = NULL;
    ASSERT_EQ(HV_EURL, hv_url_parse(&none, NULL, 0, &why));
    ASSERT_STR_EQ("not_absolute", why);
    ASSERT_PARSE_FAILS("ftp://h/x", HV_ESCHEME, "unsupported_scheme");
    ASSERT_PARSE_FAILS("ftp://h/{", HV_ESCHEME, "unsupported_scheme");
    ASSERT_PARSE_FAILS("mailto:a@b", HV_ESCHEME, "unsupported_scheme");
    ASSERT_PARSE_FAILS("javascript:alert(1)", HV_ESCHEME, "unsupported_scheme");
    ASSERT_PARSE_FAILS("http:///x", HV_EURL, "empty_host");
    ASSERT_PARSE_FAILS("http://:80/x", HV_EURL, "empty_host");
    ASSERT_PARSE_FAILS("http:x", HV_EURL, "empty_host");
    ASSERT_PARSE_FAILS("http://h:0/", HV_EURL, "invalid_port");
    ASSERT_PARSE_FAILS("http://h:65536/", HV_EURL, "invalid_port");
    ASSERT_PARSE_FAILS("http://h:99999999999999999999/", HV_EURL, "invalid_port");
    ASSERT_HREF("http://h:65535/", "http://h:65535/");
    ASSERT_PARSE_FAILS("http://user:pw@h/", HV_EURL, "userinfo_not_supported");
    ASSERT_PARSE_FAILS("http://@h/", HV_EURL, "userinfo_not_supported");
    ASSERT_PARSE_FAILS("http://ex%41mple.com/", HV_EURL, "invalid_host");
    ASSERT_PARSE_FAILS("http://[v1.fe]/", HV_EURL, "malformed");
    ASSERT_PARSE_FAILS("http://[::1/", HV_EURL, "malformed");
    ASSERT_PARSE_FAILS("http://h:8a/", HV_EURL, "malformed");
}

TEST_IMPL(url_parse_reason_may_be_null)
{
    hv_url_t u;
    ASSERT_EQ(HV_EURL, hv_url_parse(&u, "nope", 4, NULL));
    ASSERT_OK(hv_url_parse(&u, "http://h/x", 10, NULL));
    hv_url_free(&u);
}

TEST_IMPL(url_parse_length_not_nul)
{
    /* Only `len` bytes count: the rest of the buffer is not part of the URL. */
    hv_url_t u;
    const char *why;
    ASSERT_OK(hv_url_parse(&u, "http://h/abc def", 12, &why));
    ASSERT_STR_EQ("http://h/abc", u.href);
    hv_url_free(&u);
}

TEST_IMPL(url_resolve_rfc3986_normal_examples)
{
    resolve_base("http://a/b/c/d;p?q");
    ASSERT_RESOLVE_FAILS("g:h", HV_ESCHEME, "unsupported_scheme"); /* RFC: "g:h" */
    ASSERT_RESOLVES("g", "http://a/b/c/g");
    ASSERT_RESOLVES("./g", "http://a/b/c/g");
    ASSERT_RESOLVES("g/", "http://a/b/c/g/");
    ASSERT_RESOLVES("/g", "http://a/g");
    ASSERT_RESOLVES("//g", "http://g/");
    ASSERT_RESOLVES("?y", "http://a/b/c/d;p?y");
    ASSERT_RESOLVES("g?y", "http://a/b/c/g?y");
    ASSERT_RESOLVES("#s", "http://a/b/c/d;p?q"); /* fragments are dropped */
    ASSERT_RESOLVES("g#s", "http://a/b/c/g");
    ASSERT_RESOLVES("g?y#s", "http://a/b/c/g?y");
    ASSERT_RESOLVES(";x", "http://a/b/c/;x");
    ASSERT_RESOLVES("g;x", "http://a/b/c/g;x");
    ASSERT_RESOLVES("g;x?y#s", "http://a/b/c/g;x?y");
    ASSERT_RESOLVES("", "http://a/b/c/d;p?q");
    ASSERT_RESOLVES(".", "http://a/b/c/");
    ASSERT_RESOLVES("./", "http://a/b/c/");
    ASSERT_RESOLVES("..", "http://a/b/");
    ASSERT_RESOLVES("../", "http://a/b/");
    ASSERT_RESOLVES("../g", "http://a/b/g");
    ASSERT_RESOLVES("../..", "http://a/");
    ASSERT_RESOLVES("../../", "http://a/");
    ASSERT_RESOLVES("../../g", "http://a/g");
    hv_url_free(&rfc_base);
}

TEST_IMPL(url_resolve_rfc3986_abnormal_examples)
{
    resolve_base("http://a/b/c/d;p?q");
    ASSERT_RESOLVES("../../../g", "http://a/g");
    ASSERT_RESOLVES("../../../../g", "http://a/g");
    ASSERT_RESOLVES("/./g", "http://a/g");
    ASSERT_RESOLVES("/../g", "http://a/g");
    ASSERT_RESOLVES("g.", "http://a/b/c/g.");
    ASSERT_RESOLVES(".g", "http://a/b/c/.g");
    ASSERT_RESOLVES("g..", "http://a/b/c/g..");
    ASSERT_RESOLVES("..g", "http://a/b/c/..g");
    ASSERT_RESOLVES("./../g", "http://a/b/g");
    ASSERT_RESOLVES("./g/.", "http://a/b/c/g/");
    ASSERT_RESOLVES("g/./h", "http://a/b/c/g/h");
    ASSERT_RESOLVES("g/../h", "http://a/b/c/h");
    ASSERT_RESOLVES("g;x=1/./y", "http://a/b/c/g;x=1/y");
    ASSERT_RESOLVES("g;x=1/../y", "http://a/b/c/y");
    ASSERT_RESOLVES("g?y/./x", "http://a/b/c/g?y/./x");
    ASSERT_RESOLVES("g?y/../x", "http://a/b/c/g?y/../x");
    ASSERT_RESOLVES("g#s/./x", "http://a/b/c/g");
    ASSERT_RESOLVES("g#s/../x", "http://a/b/c/g");
    /* RFC 3986 allows the backward-compatible reading, which browsers use for http. */
    ASSERT_RESOLVES("http:g", "http://a/b/c/g");
    hv_url_free(&rfc_base);
}

TEST_IMPL(url_resolve_location_values)
{
    resolve_base("https://example.com:8443/dir/page?x=1");
    ASSERT_RESOLVES("http://other.example/", "http://other.example/"); /* https -> http */
    ASSERT_RESOLVES("HTTPS://Other.Example:443/a", "https://other.example/a");
    ASSERT_RESOLVES("//cdn.example/x", "https://cdn.example/x"); /* scheme-relative */
    ASSERT_RESOLVES("//[::1]:81/z", "https://[::1]:81/z");
    ASSERT_RESOLVES("/abs", "https://example.com:8443/abs");
    ASSERT_RESOLVES("rel", "https://example.com:8443/dir/rel");
    ASSERT_RESOLVES("?only", "https://example.com:8443/dir/page?only");
    ASSERT_RESOLVES("/a b/c d", "https://example.com:8443/a%20b/c%20d");
    ASSERT_RESOLVES("/caf\xC3\xA9?q=\xC3\xA9", "https://example.com:8443/caf%C3%A9?q=%C3%A9");
    ASSERT_RESOLVES("/bad\xFF", "https://example.com:8443/bad%FF");
    ASSERT_RESOLVES("/a%20b", "https://example.com:8443/a%20b"); /* no double encoding */
    ASSERT_RESOLVES("/x?a=\"<>\"", "https://example.com:8443/x?a=%22%3C%3E%22");
    ASSERT_RESOLVES("  /trimmed \t", "https://example.com:8443/trimmed");
    ASSERT_RESOLVES("/new\r\nline", "https://example.com:8443/newline");
    ASSERT_RESOLVES("\\\\evil.example\\x", "https://evil.example/x"); /* like browsers */
    ASSERT_RESOLVES("/a\\b?c\\d", "https://example.com:8443/a/b?c%5Cd");
    ASSERT_RESOLVES("/p#frag ment", "https://example.com:8443/p");
    hv_url_free(&rfc_base);

    resolve_base("http://h/a/b");
    ASSERT_RESOLVES("https://h/a/b", "https://h/a/b"); /* http -> https */
    hv_url_free(&rfc_base);
}

TEST_IMPL(url_resolve_errors)
{
    resolve_base("http://h/a");
    ASSERT_RESOLVE_FAILS("ftp://h/x", HV_ESCHEME, "unsupported_scheme");
    ASSERT_RESOLVE_FAILS("javascript:void(0)", HV_ESCHEME, "unsupported_scheme");
    ASSERT_RESOLVE_FAILS("//us\xC3\xA9r@h/", HV_EURL, "non_ascii_host");
    ASSERT_RESOLVE_FAILS("//h:8\xC3\xA9/", HV_EURL, "non_ascii_host");
    ASSERT_RESOLVE_FAILS("//h:99999/", HV_EURL, "invalid_port");
    ASSERT_RESOLVE_FAILS("http://user@h/", HV_EURL, "userinfo_not_supported");
    ASSERT_RESOLVE_FAILS("//", HV_EURL, "empty_host");
    ASSERT_RESOLVE_FAILS("https:x", HV_EURL, "empty_host");
    ASSERT_RESOLVE_FAILS("//h h/", HV_EURL, "malformed");

    /* A reference over the limit, and one that only grows over it once encoded. */
    char big[HV_URL_MAX + 2];
    memset(big, 'a', sizeof(big) - 1);
    big[0] = '/';
    big[sizeof(big) - 1] = '\0';
    ASSERT_RESOLVE_FAILS(big, HV_EURL, "url_too_long");
    memset(big, ' ', HV_URL_MAX / 2);
    big[0] = '/';
    big[HV_URL_MAX / 2] = 'x';
    big[HV_URL_MAX / 2 + 1] = '\0';
    ASSERT_RESOLVE_FAILS(big, HV_EURL, "url_too_long");
    hv_url_free(&rfc_base);
}

TEST_IMPL(url_resolve_chain)
{
    /* Each redirect resolves against the previous URL. */
    hv_url_t a, b, c;
    const char *why;
    ASSERT_OK(parse(&a, "http://start.example/one/two", &why));
    ASSERT_OK(hv_url_resolve(&b, &a, "../three?x", 10, &why));
    ASSERT_STR_EQ("http://start.example/three?x", b.href);
    ASSERT_OK(hv_url_resolve(&c, &b, "//next.example:8080", 19, &why));
    ASSERT_STR_EQ("http://next.example:8080/", c.href);
    ASSERT_STR_EQ("next.example:8080", c.authority);
    ASSERT_STR_EQ("/", c.target);
    ASSERT_EQ(8080, c.port);
    hv_url_free(&a);
    hv_url_free(&b);
    hv_url_free(&c);
}

/* A host's origin is its key everywhere; with "/" after it, it parses back to the same host,
 * an IPv6 literal included. */
TEST_IMPL(url_origin_parses_back)
{
    static const char *const urls[] = {"http://Example.org/a?b", "https://example.org:8443/",
                                       "http://[::1]:8080/x", "https://[2001:db8::1]/"};
    static const char *const origins[] = {"http://example.org:80", "https://example.org:8443",
                                          "http://[::1]:8080", "https://[2001:db8::1]:443"};
    for (size_t i = 0; i < HV_ARRAY_SIZE(urls); i++) {
        hv_url_t u, back;
        char origin[HV_URL_MAX + 32], root[HV_URL_MAX + 40];
        ASSERT_OK(hv_url_parse(&u, urls[i], strlen(urls[i]), NULL));
        ASSERT_STR_EQ(origins[i], hv_url_origin(&u, origin, sizeof(origin)));
        snprintf(root, sizeof(root), "%s/", origin);
        ASSERT_OK(hv_url_parse(&back, root, strlen(root), NULL));
        ASSERT_STR_EQ(u.host, back.host);
        ASSERT_EQ(u.port, back.port);
        hv_url_free(&u);
        hv_url_free(&back);
    }
}
