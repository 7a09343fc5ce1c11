/*
 * test_proxy.c: proxy URLs, lists and no_proxy (proxy.h).
 */
#include <string.h>

#include "harvestd/proxy.h"
#include "test.h"

TEST_IMPL(proxy_parse_forms)
{
    hv_proxy_t p;
    char err[256];
    ASSERT_OK(hv_proxy_parse("http://proxy.example", &p, err, sizeof(err)));
    ASSERT_EQ(HV_PROXY_HTTP, p.kind);
    ASSERT_STR_EQ("proxy.example", p.host);
    ASSERT_EQ(3128, p.port);
    ASSERT_EQ(0, p.has_auth);
    ASSERT_STR_EQ("http://proxy.example:3128", p.shown);

    ASSERT_OK(hv_proxy_parse("SOCKS5h://Alice:s%40cret@[::1]:9050/", &p, err, sizeof(err)));
    ASSERT_EQ(HV_PROXY_SOCKS5H, p.kind);
    ASSERT_STR_EQ("::1", p.host);
    ASSERT_EQ(1, p.host_is_ip);
    ASSERT_EQ(9050, p.port);
    ASSERT_STR_EQ("Alice", p.user);
    ASSERT_STR_EQ("s@cret", p.password);
    ASSERT_STR_EQ("socks5h://[::1]:9050", p.shown);

    ASSERT_OK(hv_proxy_parse("socks5://10.0.0.7", &p, err, sizeof(err)));
    ASSERT_EQ(1080, p.port);
    ASSERT_EQ(1, p.host_is_ip);
}

TEST_IMPL(proxy_parse_refusals_never_quote_the_password)
{
    static const char *const bad[] = {
        "ftp://user:hunter2@p:21", "http://user:hunter2@p:0", "http://user:hunter2@p:70000",
        "http://user:hunter2@p/path", "http://user:hunter2@p?q", "http://hunter2@p",
        "http://user:hunter2@", "http://user:hunter2@[::1", "http://user:hun%2@p",
        "http://user:hunter2@a b", "http://user:hunter2@p:12x",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        hv_proxy_t p;
        char err[256];
        ASSERT_EQ(-1, hv_proxy_parse(bad[i], &p, err, sizeof(err)));
        ASSERT(strstr(err, "hunter2") == NULL);
        ASSERT(strstr(err, "***") != NULL);
        ASSERT_EQ(0, p.has_auth); /* wiped */
    }
}

TEST_IMPL(proxy_list_none_and_format)
{
    hv_proxy_list_t l;
    char err[256], out[512];
    memset(&l, 0, sizeof(l));
    ASSERT_OK(hv_proxy_list_parse(" http://u:p@a:1 ,socks5://b ", &l, err, sizeof(err)));
    ASSERT_EQ(1, l.given);
    ASSERT_EQ(2, l.count);
    ASSERT_OK(hv_proxy_list_format(&l, out, sizeof(out)));
    ASSERT_STR_EQ("http://u:***@a:1, socks5://b:1080", out);
    ASSERT_OK(hv_proxy_list_parse("none", &l, err, sizeof(err)));
    ASSERT_EQ(1, l.given);
    ASSERT_EQ(0, l.count);
    ASSERT_OK(hv_proxy_list_format(&l, out, sizeof(out)));
    ASSERT_STR_EQ("none", out);
    ASSERT_EQ(-1, hv_proxy_list_parse("http://a, ,http://b", &l, err, sizeof(err)));
    ASSERT_EQ(0, l.count); /* unchanged on error: still none */
    hv_proxy_list_free(&l);
}

TEST_IMPL(proxy_basic_auth)
{
    hv_proxy_t p;
    char err[256], out[128];
    ASSERT_OK(hv_proxy_parse("http://Aladdin:open%20sesame@p", &p, err, sizeof(err)));
    ASSERT_OK(hv_proxy_basic_auth(&p, out, sizeof(out)));
    ASSERT_STR_EQ("Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==", out); /* RFC 7617's example */
    ASSERT_EQ(-1, hv_proxy_basic_auth(&p, out, 10));
}

TEST_IMPL(proxy_no_proxy_matching)
{
    hv_no_proxy_t np;
    char bad[64], out[256];
    ASSERT_OK(hv_no_proxy_parse("Example.org, .internal.test, 10.0.0.0/8, fd00::/8", &np, bad,
                                sizeof(bad)));
    ASSERT(hv_no_proxy_match(&np, "example.org", 0));
    ASSERT(hv_no_proxy_match(&np, "www.example.org", 0));
    ASSERT(!hv_no_proxy_match(&np, "badexample.org", 0));
    ASSERT(hv_no_proxy_match(&np, "internal.test", 0));
    ASSERT(hv_no_proxy_match(&np, "a.b.internal.test", 0));
    ASSERT(hv_no_proxy_match(&np, "10.1.2.3", 1));
    ASSERT(!hv_no_proxy_match(&np, "11.1.2.3", 1));
    ASSERT(hv_no_proxy_match(&np, "fd00::1", 1));
    ASSERT_OK(hv_no_proxy_format(&np, out, sizeof(out)));
    ASSERT_STR_EQ("example.org, internal.test, 10.0.0.0/8, fd00::/8", out);
    ASSERT_EQ(-1, hv_no_proxy_parse("a, b c", &np, bad, sizeof(bad)));
    ASSERT_STR_EQ("b c", bad);
    ASSERT_OK(hv_no_proxy_parse("*", &np, bad, sizeof(bad)));
    ASSERT(hv_no_proxy_match(&np, "anything", 0));
    ASSERT_OK(hv_no_proxy_parse("", &np, bad, sizeof(bad)));
    ASSERT(!hv_no_proxy_match(&np, "anything", 0));
}
