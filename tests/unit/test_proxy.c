/*
 * test_proxy.c: proxy URLs, lists, the credentials file and no_proxy (proxy.h).
 */
#include <stdlib.h>
#include <string.h>

#include "harvestd/common.h"
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
        "http://user:hunter2@a b", "http://user:hunter2@p:12x", "http://user:hunter2@p:+80",
        "http://user:hunter2@p: 80",
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

/* ---- the credentials file */

static void creds_parse_ok(const char *text, hv_proxy_creds_t *c)
{
    char err[512];
    memset(c, 0, sizeof(*c));
    if (hv_proxy_creds_parse(text, strlen(text), "creds", c, err, sizeof(err)) != 0)
        hv_test_fail(__FILE__, __LINE__, "'%s': %s", text, err);
}

TEST_IMPL(proxy_creds_parse_and_apply)
{
    static const char text[] =
        "# crawler proxies\n"
        "\n"
        "   # indented comment\n"
        "P.Example:3128\tcrawler:s%40cret pass  \r\n"
        "[0:0::1]:1080 sock:pw:with:colons\n"
        "10.0.0.7:8080 %61lice:\n"
        "* everyone:fallback\n";
    hv_proxy_creds_t c;
    hv_proxy_list_t l, host;
    char err[256], out[512];
    memset(&l, 0, sizeof(l));
    memset(&host, 0, sizeof(host));
    creds_parse_ok(text, &c);
    ASSERT_EQ(4, c.count);
    ASSERT_STR_EQ("p.example", c.cred[0].host);
    ASSERT_EQ(3128, c.cred[0].port);
    ASSERT_STR_EQ("crawler", c.cred[0].user);
    ASSERT_STR_EQ("s@cret pass", c.cred[0].password); /* a blank inside, none at the end */
    ASSERT_EQ(4, c.cred[0].line);
    ASSERT_STR_EQ("0:0::1", c.cred[1].host);
    ASSERT_STR_EQ("pw:with:colons", c.cred[1].password);
    ASSERT_STR_EQ("alice", c.cred[2].user);
    ASSERT_STR_EQ("", c.cred[2].password);
    ASSERT_EQ(1, c.cred[3].any);

    /* The name's case aside, an address by its value; "*" for the rest; a URL's own kept. */
    ASSERT_OK(hv_proxy_list_parse("http://proxy.example:3128, socks5h://[::1]:1080, "
                                  "http://own:urlpw@p.example:3128, socks5://other.example",
                                  &l, err, sizeof(err)));
    ASSERT_OK(hv_proxy_list_parse("http://10.0.0.7:8080", &host, err, sizeof(err)));
    hv_proxy_creds_apply(&c, &l);
    hv_proxy_creds_apply(&c, &host);
    ASSERT_OK(hv_proxy_creds_check(&c, "creds", err, sizeof(err)));
    ASSERT_EQ(1, c.cred[0].matched); /* p.example:3128, whose URL keeps its own */
    ASSERT_EQ(2, c.cred[3].matched); /* proxy.example, other.example */
    ASSERT_EQ(1, l.proxy[0].has_auth);
    ASSERT_EQ(1, l.proxy[0].auth_from_file);
    ASSERT_STR_EQ("everyone", l.proxy[0].user); /* proxy.example is not p.example */
    ASSERT_STR_EQ("sock", l.proxy[1].user);
    ASSERT_STR_EQ("pw:with:colons", l.proxy[1].password);
    ASSERT_EQ(1, l.proxy[2].has_auth);
    ASSERT_EQ(0, l.proxy[2].auth_from_file);
    ASSERT_STR_EQ("own", l.proxy[2].user);
    ASSERT_STR_EQ("urlpw", l.proxy[2].password);
    ASSERT_STR_EQ("everyone", l.proxy[3].user);
    ASSERT_STR_EQ("fallback", l.proxy[3].password);
    ASSERT_STR_EQ("alice", host.proxy[0].user);
    ASSERT_EQ(1, host.proxy[0].auth_from_file);
    /* The file's credentials are not the URL's: the list formats as configured. */
    ASSERT_OK(hv_proxy_list_format(&l, out, sizeof(out)));
    ASSERT_STR_EQ("http://proxy.example:3128, socks5h://[::1]:1080, "
                  "http://own:***@p.example:3128, socks5://other.example:1080", out);
    ASSERT_OK(hv_proxy_basic_auth(&host.proxy[0], out, sizeof(out)));
    ASSERT_STR_EQ("Basic YWxpY2U6", out); /* "alice:" */
    hv_proxy_creds_free(&c);
    ASSERT_EQ(0, c.count);

    /* Read again: what the first file gave is replaced, or taken back. */
    creds_parse_ok("p.example:3128 crawler:new\n", &c);
    hv_proxy_creds_apply(&c, &l);
    hv_proxy_creds_apply(&c, &host);
    ASSERT_EQ(0, l.proxy[0].has_auth);
    ASSERT_STR_EQ("", l.proxy[0].user);
    ASSERT_STR_EQ("", l.proxy[0].password);
    ASSERT_EQ(0, l.proxy[1].has_auth);
    ASSERT_STR_EQ("own", l.proxy[2].user);
    ASSERT_EQ(0, host.proxy[0].has_auth);
    ASSERT_EQ(1, c.cred[0].matched);
    hv_proxy_creds_free(&c);
    hv_proxy_list_free(&l);
    hv_proxy_list_free(&host);
}

/* Each refusal names the file and the line, and no message holds a password. */
TEST_IMPL(proxy_creds_refusals_never_quote_the_password)
{
    char longpw[600], longline[700];
    memset(longpw, 'h', sizeof(longpw));
    longpw[sizeof(longpw) - 1] = '\0';
    snprintf(longline, sizeof(longline), "p:1 u:hunter2%s\n", longpw);
    static const char nul[] = "p:1 u:hunter2\0x\n";
    const struct {
        const char *text;
        size_t len;
        const char *says;
    } bad[] = {
        {"# first\np:3128\n", 0, "creds:2: expected HOST:PORT USER:PASSWORD, or * "
                                 "USER:PASSWORD"},
        {"u:hunter2\n", 0, "creds:1: expected HOST:PORT"},
        {"p u:hunter2\n", 0, "creds:1: the first field is neither HOST:PORT"},
        {"p: u:hunter2\n", 0, "creds:1: the first field is neither HOST:PORT"},
        {"p:0 u:hunter2\n", 0, "creds:1: the first field is neither"},
        {"p:65536 u:hunter2\n", 0, "creds:1: the first field is neither"},
        {"p:+80 u:hunter2\n", 0, "creds:1: the first field is neither"},
        {"::1:80 u:hunter2\n", 0, "creds:1: the first field is neither"},
        {"[::1:80 u:hunter2\n", 0, "creds:1: the first field is neither"},
        {"http://p:80 u:hunter2\n", 0, "creds:1: the first field is neither"},
        {"** u:hunter2\n", 0, "creds:1: the first field is neither"},
        {"u:hunter2 p:80\n", 0, "creds:1: the first field is neither"},
        {"p:80 hunter2\n", 0, "creds:1: the credentials (***) must be USER:PASSWORD"},
        {"p:80 alice:hun%2ter2\n", 0, "creds:1: 'alice:***': the user and the password must "
                                      "be percent-encoded, at most 255 bytes each"},
        {"p:80 alice:hunter2%00\n", 0, "creds:1: 'alice:***'"},
        {"p:80 al%zice:hunter2\n", 0, "creds:1: 'al%zice:***'"},
        {longline, 0, "creds:1: 'u:***'"},
        {"P:80 a:x\n\np:80 b:hunter2\n", 0, "creds:3: a second entry for p:80 (the first is "
                                             "on line 1)"},
        {"[::1]:80 a:x\n[0::1]:80 b:hunter2\n", 0, "creds:2: a second entry for [0::1]:80 (the "
                                                "first is on line 1)"},
        {"* a:x\n* b:hunter2\n", 0, "creds:2: a second entry for * (the first is on line 1)"},
        {nul, sizeof(nul) - 1, "creds:1: a NUL byte"},
        {"", 0, "creds: no entry (HOST:PORT USER:PASSWORD, or * USER:PASSWORD)"},
        {"# only a comment\n\n  \n", 0, "creds: no entry"},
    };
    for (size_t i = 0; i < HV_ARRAY_SIZE(bad); i++) {
        hv_proxy_creds_t c;
        char err[512] = "";
        size_t len = bad[i].len > 0 ? bad[i].len : strlen(bad[i].text);
        memset(&c, 0, sizeof(c));
        ASSERT_EQ(-1, hv_proxy_creds_parse(bad[i].text, len, "creds", &c, err, sizeof(err)));
        if (strncmp(err, bad[i].says, strlen(bad[i].says)) != 0)
            hv_test_fail(__FILE__, __LINE__, "case %zu: '%s' does not start '%s'", i, err,
                         bad[i].says);
        ASSERT(strstr(err, "hunter2") == NULL);
        ASSERT_EQ(0, c.count);
        ASSERT_NULL(c.cred);
    }

    /* More entries than the bound. */
    size_t cap = (HV_PROXY_CREDS_MAX + 1) * 24, n = 0;
    char *many = malloc(cap);
    ASSERT_NOT_NULL(many);
    for (int i = 0; i <= HV_PROXY_CREDS_MAX; i++)
        n += (size_t)snprintf(many + n, cap - n, "h%d:80 u:hunter2\n", i);
    hv_proxy_creds_t c;
    char err[512];
    memset(&c, 0, sizeof(c));
    ASSERT_EQ(-1, hv_proxy_creds_parse(many, n, "creds", &c, err, sizeof(err)));
    ASSERT_STR_EQ("creds:1025: more than 1024 entries", err);
    free(many);
}

/* An entry that gives credentials to no proxy is a mistake (a typo would send none). */
TEST_IMPL(proxy_creds_entry_matching_no_proxy)
{
    hv_proxy_creds_t c;
    hv_proxy_list_t l;
    char err[512];
    memset(&l, 0, sizeof(l));
    ASSERT_OK(hv_proxy_list_parse("http://proxy.example:3128", &l, err, sizeof(err)));
    creds_parse_ok("proxy.example:3128 u:hunter2\nproxy.exmaple:3128 u:hunter2\n", &c);
    hv_proxy_creds_apply(&c, &l);
    ASSERT_EQ(-1, hv_proxy_creds_check(&c, "/etc/harvestd/proxies.cred", err, sizeof(err)));
    ASSERT_STR_EQ("/etc/harvestd/proxies.cred:2: proxy.exmaple:3128 matches no proxy of the "
                  "configuration", err);
    hv_proxy_creds_free(&c);
    /* Another port is another proxy. */
    creds_parse_ok("proxy.example:3129 u:hunter2\n", &c);
    hv_proxy_creds_apply(&c, &l);
    ASSERT_EQ(-1, hv_proxy_creds_check(&c, "creds", err, sizeof(err)));
    ASSERT_EQ(0, l.proxy[0].has_auth);
    hv_proxy_creds_free(&c);
    /* "*" with every proxy given its own entry. */
    creds_parse_ok("* u:hunter2\nproxy.example:3128 u:x\n", &c);
    hv_proxy_creds_apply(&c, &l);
    ASSERT_EQ(-1, hv_proxy_creds_check(&c, "creds", err, sizeof(err)));
    ASSERT_STR_EQ("creds:1: * matches no proxy of the configuration (every proxy has an entry "
                  "of its own)", err);
    hv_proxy_creds_free(&c);
    /* An entry for a proxy whose URL has credentials matches it, and changes nothing. */
    ASSERT_OK(hv_proxy_list_parse("http://a:b@proxy.example:3128", &l, err, sizeof(err)));
    creds_parse_ok("proxy.example:3128 u:hunter2\n", &c);
    hv_proxy_creds_apply(&c, &l);
    ASSERT_OK(hv_proxy_creds_check(&c, "creds", err, sizeof(err)));
    ASSERT_STR_EQ("a", l.proxy[0].user);
    ASSERT_STR_EQ("b", l.proxy[0].password);
    hv_proxy_creds_free(&c);
    hv_proxy_list_free(&l);
}
