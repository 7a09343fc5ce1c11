/*
 * test_guard.c: the address classifier and the guard, as pure functions on socket addresses.
 * Nothing here opens a socket: this is where the ranges no test may send a packet to (10/8,
 * 169.254/16, fc00::/7...) are covered.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "harvestd/common.h"
#include "harvestd/guard.h"
#include "test.h"

/* A textual address (IPv4 or IPv6) as a socket address. */
static const struct sockaddr *to_sockaddr(const char *text, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof(*ss));
    if (inet_pton(AF_INET, text, &((struct sockaddr_in *)ss)->sin_addr) == 1) {
        ss->ss_family = AF_INET;
    } else {
        ASSERT_EQ(1, inet_pton(AF_INET6, text, &((struct sockaddr_in6 *)ss)->sin6_addr));
        ss->ss_family = AF_INET6;
    }
    return (const struct sockaddr *)ss;
}

static hv_addr_class_t class_of(const char *text)
{
    struct sockaddr_storage ss;
    return hv_addr_classify(to_sockaddr(text, &ss));
}

static hv_addr_class_t check(const hv_guard_t *g, const char *text)
{
    struct sockaddr_storage ss;
    return hv_guard_check(g, to_sockaddr(text, &ss));
}

#define ASSERT_CLASS(want, text)                                                                   \
    do {                                                                                           \
        hv_addr_class_t got_ = class_of(text);                                                     \
        if (got_ != (want))                                                                        \
            hv_test_fail(__FILE__, __LINE__, "%s: class '%s', want '%s'", text,                    \
                         hv_addr_class_name(got_), hv_addr_class_name(want));                      \
    } while (0)

/* Every denied IPv4 range at its first and last address, and the public neighbours just
 * outside it. */
TEST_IMPL(guard_ipv4_ranges_and_their_edges)
{
    static const struct {
        const char *first, *last, *before, *after;
        hv_addr_class_t cls;
    } ranges[] = {
        {"0.0.0.0", "0.255.255.255", NULL, "1.0.0.0", HV_ADDR_UNSPECIFIED},
        {"10.0.0.0", "10.255.255.255", "9.255.255.255", "11.0.0.0", HV_ADDR_PRIVATE},
        {"100.64.0.0", "100.127.255.255", "100.63.255.255", "100.128.0.0", HV_ADDR_SHARED},
        {"127.0.0.0", "127.255.255.255", "126.255.255.255", "128.0.0.0", HV_ADDR_LOOPBACK},
        {"169.254.0.0", "169.254.255.255", "169.253.255.255", "169.255.0.0", HV_ADDR_LINK_LOCAL},
        {"172.16.0.0", "172.31.255.255", "172.15.255.255", "172.32.0.0", HV_ADDR_PRIVATE},
        {"192.0.0.0", "192.0.0.255", "191.255.255.255", "192.0.1.0", HV_ADDR_SPECIAL_PURPOSE},
        {"192.168.0.0", "192.168.255.255", "192.167.255.255", "192.169.0.0", HV_ADDR_PRIVATE},
        {"198.18.0.0", "198.19.255.255", "198.17.255.255", "198.20.0.0", HV_ADDR_BENCHMARKING},
        {"224.0.0.0", "239.255.255.255", "223.255.255.255", NULL, HV_ADDR_MULTICAST},
        {"240.0.0.0", "255.255.255.254", NULL, NULL, HV_ADDR_RESERVED},
        {"255.255.255.255", "255.255.255.255", NULL, NULL, HV_ADDR_BROADCAST},
    };
    for (size_t i = 0; i < HV_ARRAY_SIZE(ranges); i++) {
        ASSERT_CLASS(ranges[i].cls, ranges[i].first);
        ASSERT_CLASS(ranges[i].cls, ranges[i].last);
        if (ranges[i].before != NULL)
            ASSERT_CLASS(HV_ADDR_PUBLIC, ranges[i].before);
        if (ranges[i].after != NULL)
            ASSERT_CLASS(HV_ADDR_PUBLIC, ranges[i].after);
    }
    ASSERT_CLASS(HV_ADDR_LINK_LOCAL, "169.254.169.254"); /* cloud metadata */
    ASSERT_CLASS(HV_ADDR_PUBLIC, "8.8.8.8");
    ASSERT_CLASS(HV_ADDR_PUBLIC, "192.0.2.1"); /* documentation ranges are not special here */
}

TEST_IMPL(guard_ipv6_ranges)
{
    ASSERT_CLASS(HV_ADDR_UNSPECIFIED, "::");
    ASSERT_CLASS(HV_ADDR_LOOPBACK, "::1");
    ASSERT_CLASS(HV_ADDR_PRIVATE, "fc00::");
    ASSERT_CLASS(HV_ADDR_PRIVATE, "fd12:3456::1");
    ASSERT_CLASS(HV_ADDR_PRIVATE, "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff");
    ASSERT_CLASS(HV_ADDR_PUBLIC, "fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff");
    ASSERT_CLASS(HV_ADDR_LINK_LOCAL, "fe80::1");
    ASSERT_CLASS(HV_ADDR_LINK_LOCAL, "febf:ffff::1");
    ASSERT_CLASS(HV_ADDR_PRIVATE, "fec0::1"); /* deprecated site-local */
    ASSERT_CLASS(HV_ADDR_PUBLIC, "fe00::1");
    ASSERT_CLASS(HV_ADDR_MULTICAST, "ff02::1");
    ASSERT_CLASS(HV_ADDR_MULTICAST, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff");
    ASSERT_CLASS(HV_ADDR_PRIVATE, "64:ff9b:1::a00:1"); /* NAT64 for local use */
    ASSERT_CLASS(HV_ADDR_PUBLIC, "2001:4860:4860::8888");
    ASSERT_CLASS(HV_ADDR_PUBLIC, "::2:0:0:1"); /* not an IPv4-compatible form */
}

/* An IPv4 address carried in an IPv6 one is judged as itself, whichever the carrier. */
TEST_IMPL(guard_ipv4_embedded_in_ipv6)
{
    static const char *const carriers[] = {"::ffff:", "::ffff:0:", "::", "64:ff9b::"};
    static const struct {
        const char *v4;
        hv_addr_class_t cls;
    } inner[] = {
        {"127.0.0.1", HV_ADDR_LOOPBACK},         {"10.1.2.3", HV_ADDR_PRIVATE},
        {"169.254.169.254", HV_ADDR_LINK_LOCAL}, {"100.64.0.1", HV_ADDR_SHARED},
        {"192.168.1.1", HV_ADDR_PRIVATE},        {"172.16.0.1", HV_ADDR_PRIVATE},
        {"0.0.0.7", HV_ADDR_UNSPECIFIED},        {"224.0.0.1", HV_ADDR_MULTICAST},
        {"255.255.255.255", HV_ADDR_BROADCAST},  {"8.8.8.8", HV_ADDR_PUBLIC},
    };
    for (size_t c = 0; c < HV_ARRAY_SIZE(carriers); c++) {
        for (size_t i = 0; i < HV_ARRAY_SIZE(inner); i++) {
            char text[64];
            snprintf(text, sizeof(text), "%s%s", carriers[c], inner[i].v4);
            ASSERT_CLASS(inner[i].cls, text);
        }
    }
    /* 6to4: the IPv4 address is bits 16 to 47. */
    ASSERT_CLASS(HV_ADDR_LOOPBACK, "2002:7f00:1::");
    ASSERT_CLASS(HV_ADDR_LINK_LOCAL, "2002:a9fe:a9fe::1");
    ASSERT_CLASS(HV_ADDR_PRIVATE, "2002:c0a8:0101:1::1");
    ASSERT_CLASS(HV_ADDR_PUBLIC, "2002:0808:0808::1");
    /* The two IPv4-compatible-looking addresses that are IPv6's own. */
    ASSERT_CLASS(HV_ADDR_UNSPECIFIED, "::0.0.0.0");
    ASSERT_CLASS(HV_ADDR_LOOPBACK, "::0.0.0.1");
}

TEST_IMPL(guard_class_names_and_details)
{
    ASSERT_STR_EQ("", hv_addr_class_name(HV_ADDR_PUBLIC));
    ASSERT_EQ(HV_D_NONE, hv_addr_class_detail(HV_ADDR_PUBLIC));
    for (int c = 1; c < HV_ADDR__COUNT; c++) {
        char want[96];
        snprintf(want, sizeof(want), "blocked_%s_address", hv_addr_class_name((hv_addr_class_t)c));
        ASSERT_STR_EQ(want, hv_detail_str(hv_addr_class_detail((hv_addr_class_t)c)));
    }
    ASSERT_STR_EQ("blocked_link_local_address",
                  hv_detail_str(hv_addr_class_detail(HV_ADDR_LINK_LOCAL)));
    ASSERT_STR_EQ("", hv_addr_class_name(HV_ADDR__COUNT));
}

/* An address of another family is refused: the guard does not know where it leads. */
TEST_IMPL(guard_unknown_family_is_refused)
{
    struct sockaddr sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_family = AF_UNIX;
    ASSERT_EQ(HV_ADDR_RESERVED, hv_addr_classify(&sa));
    hv_guard_t g = {0, NULL};
    ASSERT_EQ(HV_ADDR_RESERVED, hv_guard_check(&g, &sa));
}

TEST_IMPL(guard_allow_list_and_off)
{
    hv_allow_list_t allow;
    ASSERT_OK(hv_allow_list_parse(" 127.0.0.1/32 , 10.0.0.0/8,fd00::/8", &allow, NULL, 0));
    ASSERT_EQ(3, allow.count);
    hv_guard_t g = {0, &allow};
    ASSERT_EQ(HV_ADDR_PUBLIC, check(&g, "127.0.0.1"));
    ASSERT_EQ(HV_ADDR_LOOPBACK, check(&g, "127.0.0.2"));
    ASSERT_EQ(HV_ADDR_LOOPBACK, check(&g, "::1"));
    ASSERT_EQ(HV_ADDR_PUBLIC, check(&g, "10.200.0.1"));
    ASSERT_EQ(HV_ADDR_PRIVATE, check(&g, "192.168.0.1"));
    ASSERT_EQ(HV_ADDR_PUBLIC, check(&g, "fd00::1"));
    ASSERT_EQ(HV_ADDR_PRIVATE, check(&g, "fc00::1"));
    ASSERT_EQ(HV_ADDR_PUBLIC, check(&g, "8.8.8.8"));
    /* An allowed IPv4 address is allowed in its IPv6 carriers too, and only it. */
    ASSERT_EQ(HV_ADDR_PUBLIC, check(&g, "::ffff:127.0.0.1"));
    ASSERT_EQ(HV_ADDR_PUBLIC, check(&g, "64:ff9b::a01:203"));
    ASSERT_EQ(HV_ADDR_LOOPBACK, check(&g, "::ffff:127.0.0.2"));
    /* An IPv6 range does not allow the IPv4 addresses it happens to contain. */
    hv_allow_list_t v6;
    ASSERT_OK(hv_allow_list_parse("::ffff:0:0/96", &v6, NULL, 0));
    hv_guard_t g6 = {0, &v6};
    ASSERT_EQ(HV_ADDR_PUBLIC, check(&g6, "::ffff:10.0.0.1"));
    ASSERT_EQ(HV_ADDR_PRIVATE, check(&g6, "10.0.0.1"));

    hv_guard_t none = {0, NULL};
    ASSERT_EQ(HV_ADDR_LOOPBACK, check(&none, "127.0.0.1"));
    hv_guard_t off = {1, NULL};
    ASSERT_EQ(HV_ADDR_PUBLIC, check(&off, "127.0.0.1"));
    ASSERT_EQ(HV_ADDR_PUBLIC, check(&off, "169.254.169.254"));
    ASSERT_EQ(HV_ADDR_PUBLIC, check(NULL, "10.0.0.1"));
}

TEST_IMPL(guard_cidr_parse_and_format)
{
    static const struct {
        const char *in, *out;
    } good[] = {
        {"10.0.0.0/8", "10.0.0.0/8"},
        {"10.1.2.3/8", "10.0.0.0/8"},
        {"127.0.0.1", "127.0.0.1/32"},
        {"0.0.0.0/0", "0.0.0.0/0"},
        {"172.16.5.4/12", "172.16.0.0/12"},
        {"::1", "::1/128"},
        {"fd00::/8", "fd00::/8"},
        {"FD12:3456::7/16", "fd12::/16"},
        {"::/0", "::/0"},
        {"2001:db8::1/127", "2001:db8::/127"},
    };
    for (size_t i = 0; i < HV_ARRAY_SIZE(good); i++) {
        hv_cidr_t c;
        char text[64];
        ASSERT_OK(hv_cidr_parse(good[i].in, strlen(good[i].in), &c));
        ASSERT_OK(hv_cidr_format(&c, text, sizeof(text)));
        ASSERT_STR_EQ(good[i].out, text);
    }
    static const char *const bad[] = {
        "",           "banana",     "10.0.0.0/33", "::1/129",    "1.2.3.4/",
        "1.2.3.4/-1", "1.2.3.4/8x", "1.2.3",       "2130706433", "10.0.0.0/08000",
        "1.2.3.4 /8", "[::1]",      "fe80::1%lo",
    };
    for (size_t i = 0; i < HV_ARRAY_SIZE(bad); i++) {
        hv_cidr_t c;
        if (hv_cidr_parse(bad[i], strlen(bad[i]), &c) == 0)
            hv_test_fail(__FILE__, __LINE__, "'%s' parsed as a range", bad[i]);
    }
    hv_cidr_t c;
    char small[8];
    ASSERT_OK(hv_cidr_parse("10.0.0.0/8", 10, &c));
    ASSERT_EQ(-1, hv_cidr_format(&c, small, sizeof(small)));
}

TEST_IMPL(guard_allow_list_parse_errors)
{
    hv_allow_list_t list;
    char bad[64];
    ASSERT_OK(hv_allow_list_parse("", &list, bad, sizeof(bad)));
    ASSERT_EQ(0, list.count);
    ASSERT_OK(hv_allow_list_parse("   ", &list, bad, sizeof(bad)));
    ASSERT_EQ(0, list.count);

    ASSERT_OK(hv_allow_list_parse("127.0.0.1", &list, bad, sizeof(bad)));
    ASSERT_EQ(-1, hv_allow_list_parse("10.0.0.0/8, banana ,::1", &list, bad, sizeof(bad)));
    ASSERT_STR_EQ("banana", bad);
    ASSERT_EQ(1, list.count); /* unchanged */
    ASSERT_EQ(-1, hv_allow_list_parse("10.0.0.0/8,,::1", &list, bad, sizeof(bad)));
    ASSERT_EQ(-1, hv_allow_list_parse("10.0.0.0/8,", &list, bad, sizeof(bad)));
    ASSERT_EQ(-1, hv_allow_list_parse(",10.0.0.0/8", &list, bad, sizeof(bad)));

    char many[HV_GUARD_MAX_ALLOW * 16 + 32];
    size_t n = 0;
    for (int i = 0; i <= HV_GUARD_MAX_ALLOW; i++)
        n += (size_t)snprintf(many + n, sizeof(many) - n, "%s10.0.%d.0/24", i ? "," : "", i);
    ASSERT_EQ(-2, hv_allow_list_parse(many, &list, bad, sizeof(bad)));
    many[n - strlen(",10.0.64.0/24")] = '\0';
    ASSERT_OK(hv_allow_list_parse(many, &list, bad, sizeof(bad)));
    ASSERT_EQ(HV_GUARD_MAX_ALLOW, list.count);
}
