/* guard.c: the address guard (see guard.h). */
#include "harvestd/guard.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "harvestd/common.h"

typedef struct {
    const char *name;
    hv_detail_t detail;
} class_info_t;

static const class_info_t classes[HV_ADDR__COUNT] = {
    [HV_ADDR_PUBLIC] = {"", HV_D_NONE},
    [HV_ADDR_UNSPECIFIED] = {"unspecified", HV_D_BLOCKED_UNSPECIFIED_ADDRESS},
    [HV_ADDR_LOOPBACK] = {"loopback", HV_D_BLOCKED_LOOPBACK_ADDRESS},
    [HV_ADDR_PRIVATE] = {"private", HV_D_BLOCKED_PRIVATE_ADDRESS},
    [HV_ADDR_SHARED] = {"shared", HV_D_BLOCKED_SHARED_ADDRESS},
    [HV_ADDR_LINK_LOCAL] = {"link_local", HV_D_BLOCKED_LINK_LOCAL_ADDRESS},
    [HV_ADDR_SPECIAL_PURPOSE] = {"special_purpose", HV_D_BLOCKED_SPECIAL_PURPOSE_ADDRESS},
    [HV_ADDR_BENCHMARKING] = {"benchmarking", HV_D_BLOCKED_BENCHMARKING_ADDRESS},
    [HV_ADDR_MULTICAST] = {"multicast", HV_D_BLOCKED_MULTICAST_ADDRESS},
    [HV_ADDR_RESERVED] = {"reserved", HV_D_BLOCKED_RESERVED_ADDRESS},
    [HV_ADDR_BROADCAST] = {"broadcast", HV_D_BLOCKED_BROADCAST_ADDRESS},
};

const char *hv_addr_class_name(hv_addr_class_t c)
{
    return (unsigned)c < HV_ADDR__COUNT ? classes[c].name : "";
}

hv_detail_t hv_addr_class_detail(hv_addr_class_t c)
{
    return (unsigned)c < HV_ADDR__COUNT ? classes[c].detail : HV_D_NONE;
}

/* A range of the tables below: `bits` leading bits of `prefix`. */
typedef struct {
    uint8_t prefix[16];
    uint8_t bits;
    hv_addr_class_t cls;
} range_t;

/* First match wins: 255.255.255.255 before 240/4. */
static const range_t v4_ranges[] = {
    {{0, 0, 0, 0}, 8, HV_ADDR_UNSPECIFIED},
    {{10, 0, 0, 0}, 8, HV_ADDR_PRIVATE},
    {{100, 64, 0, 0}, 10, HV_ADDR_SHARED},
    {{127, 0, 0, 0}, 8, HV_ADDR_LOOPBACK},
    {{169, 254, 0, 0}, 16, HV_ADDR_LINK_LOCAL},
    {{172, 16, 0, 0}, 12, HV_ADDR_PRIVATE},
    {{192, 0, 0, 0}, 24, HV_ADDR_SPECIAL_PURPOSE},
    {{192, 168, 0, 0}, 16, HV_ADDR_PRIVATE},
    {{198, 18, 0, 0}, 15, HV_ADDR_BENCHMARKING},
    {{224, 0, 0, 0}, 4, HV_ADDR_MULTICAST},
    {{255, 255, 255, 255}, 32, HV_ADDR_BROADCAST},
    {{240, 0, 0, 0}, 4, HV_ADDR_RESERVED},
};

/* IPv6 ranges of their own; the ones that carry an IPv4 address are in embedded_v4(). */
static const range_t v6_ranges[] = {
    {{0}, 128, HV_ADDR_UNSPECIFIED},
    {{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, 128, HV_ADDR_LOOPBACK},
    /* 64:ff9b:1::/48, NAT64 for local use (RFC 8215): where it leads is the operator's. */
    {{0x00, 0x64, 0xff, 0x9b, 0x00, 0x01}, 48, HV_ADDR_PRIVATE},
    {{0xfc}, 7, HV_ADDR_PRIVATE},
    {{0xfe, 0x80}, 10, HV_ADDR_LINK_LOCAL},
    /* fec0::/10, the deprecated site-local addresses, which some networks still route. */
    {{0xfe, 0xc0}, 10, HV_ADDR_PRIVATE},
    {{0xff}, 8, HV_ADDR_MULTICAST},
};

static int prefix_match(const uint8_t *addr, const uint8_t *prefix, unsigned bits)
{
    unsigned whole = bits / 8, rest = bits % 8;
    if (memcmp(addr, prefix, whole) != 0)
        return 0;
    if (rest == 0)
        return 1;
    uint8_t mask = (uint8_t)(0xff << (8 - rest));
    return (addr[whole] & mask) == (prefix[whole] & mask);
}

int hv_cidr_contains(const hv_cidr_t *c, int family, const uint8_t *addr)
{
    return c->family == family && prefix_match(addr, c->addr, c->bits);
}

static hv_addr_class_t classify_v4(const uint8_t a[4])
{
    for (size_t i = 0; i < HV_ARRAY_SIZE(v4_ranges); i++)
        if (prefix_match(a, v4_ranges[i].prefix, v4_ranges[i].bits))
            return v4_ranges[i].cls;
    return HV_ADDR_PUBLIC;
}

/* The IPv4 address an IPv6 one carries, copied to `v4`: IPv4-mapped (::ffff:a.b.c.d),
 * IPv4-translated (::ffff:0:a.b.c.d), IPv4-compatible (::a.b.c.d, but :: and ::1, which are
 * IPv6's own), NAT64 (64:ff9b::/96) and 6to4 (2002:aabb:ccdd::/48). 1 if there is one. A
 * connection to any of these can end at that IPv4 address, through the kernel or a gateway. */
static int embedded_v4(const uint8_t a[16], uint8_t v4[4])
{
    static const uint8_t zero[12] = {0};
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    static const uint8_t translated[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0};
    static const uint8_t nat64[12] = {0x00, 0x64, 0xff, 0x9b};
    if (memcmp(a, mapped, 12) == 0 || memcmp(a, translated, 12) == 0 ||
        memcmp(a, nat64, 12) == 0) {
        memcpy(v4, a + 12, 4);
        return 1;
    }
    if (memcmp(a, zero, 12) == 0) {
        static const uint8_t one[4] = {0, 0, 0, 1};
        if (memcmp(a + 12, zero, 4) == 0 || memcmp(a + 12, one, 4) == 0)
            return 0;
        memcpy(v4, a + 12, 4);
        return 1;
    }
    if (a[0] == 0x20 && a[1] == 0x02) {
        memcpy(v4, a + 2, 4);
        return 1;
    }
    return 0;
}

static hv_addr_class_t classify_v6(const uint8_t a[16])
{
    uint8_t v4[4];
    if (embedded_v4(a, v4))
        return classify_v4(v4);
    for (size_t i = 0; i < HV_ARRAY_SIZE(v6_ranges); i++)
        if (prefix_match(a, v6_ranges[i].prefix, v6_ranges[i].bits))
            return v6_ranges[i].cls;
    return HV_ADDR_PUBLIC;
}

hv_addr_class_t hv_addr_classify(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return classify_v4((const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr);
    if (sa->sa_family == AF_INET6)
        return classify_v6((const uint8_t *)&((const struct sockaddr_in6 *)sa)->sin6_addr);
    return HV_ADDR_RESERVED;
}

static int allowed(const hv_allow_list_t *allow, int family, const uint8_t *addr)
{
    for (unsigned i = 0; i < allow->count; i++) {
        const hv_cidr_t *c = &allow->cidr[i];
        if (c->family == family && prefix_match(addr, c->addr, c->bits))
            return 1;
    }
    return 0;
}

hv_addr_class_t hv_guard_check(const hv_guard_t *g, const struct sockaddr *sa)
{
    if (g == NULL || g->off)
        return HV_ADDR_PUBLIC;
    hv_addr_class_t cls = hv_addr_classify(sa);
    if (cls == HV_ADDR_PUBLIC || g->allow == NULL)
        return cls;
    if (sa->sa_family == AF_INET) {
        const uint8_t *a = (const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr;
        return allowed(g->allow, AF_INET, a) ? HV_ADDR_PUBLIC : cls;
    }
    if (sa->sa_family == AF_INET6) {
        const uint8_t *a = (const uint8_t *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
        uint8_t v4[4];
        if (allowed(g->allow, AF_INET6, a) ||
            (embedded_v4(a, v4) && allowed(g->allow, AF_INET, v4)))
            return HV_ADDR_PUBLIC;
    }
    return cls;
}

int hv_cidr_parse(const char *text, size_t len, hv_cidr_t *out)
{
    char buf[INET6_ADDRSTRLEN + 8];
    if (len == 0 || len >= sizeof(buf))
        return -1;
    memcpy(buf, text, len);
    buf[len] = '\0';

    hv_cidr_t c;
    memset(&c, 0, sizeof(c));
    char *slash = strchr(buf, '/');
    if (slash != NULL)
        *slash = '\0';
    if (inet_pton(AF_INET, buf, c.addr) == 1) {
        c.family = AF_INET;
        c.bits = 32;
    } else if (inet_pton(AF_INET6, buf, c.addr) == 1) {
        c.family = AF_INET6;
        c.bits = 128;
    } else {
        return -1;
    }
    if (slash != NULL) {
        const char *p = slash + 1;
        unsigned bits = 0;
        size_t n = 0;
        for (; hv_ascii_is_digit((unsigned char)p[n]) && n < 3; n++)
            bits = bits * 10 + (unsigned)(p[n] - '0');
        if (n == 0 || p[n] != '\0' || bits > c.bits)
            return -1;
        c.bits = (uint8_t)bits;
    }
    /* Clear the host bits, so that 10.1.2.3/8 is 10.0.0.0/8. */
    size_t width = c.family == AF_INET ? 4 : 16;
    for (size_t i = 0; i < width; i++) {
        unsigned keep = c.bits > i * 8 ? c.bits - (unsigned)i * 8 : 0;
        if (keep < 8)
            c.addr[i] &= (uint8_t)(0xff << (8 - keep));
    }
    *out = c;
    return 0;
}

int hv_cidr_format(const hv_cidr_t *c, char *out, size_t cap)
{
    char addr[INET6_ADDRSTRLEN];
    if (inet_ntop(c->family, c->addr, addr, sizeof(addr)) == NULL)
        return -1;
    int n = snprintf(out, cap, "%s/%u", addr, (unsigned)c->bits);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

static void copy_bad(char *bad, size_t badcap, const char *s, size_t n)
{
    if (badcap == 0)
        return;
    n = HV_MIN(n, badcap - 1);
    memcpy(bad, s, n);
    bad[n] = '\0';
}

int hv_allow_list_parse(const char *text, hv_allow_list_t *out, char *bad, size_t badcap)
{
    hv_allow_list_t list;
    const char *p = text;
    memset(&list, 0, sizeof(list));
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p == '\0') {
        *out = list;
        return 0;
    }
    for (;;) {
        while (*p == ' ' || *p == '\t')
            p++;
        const char *start = p;
        while (*p != ',' && *p != '\0')
            p++;
        const char *end = p;
        while (end > start && (end[-1] == ' ' || end[-1] == '\t'))
            end--;
        if (end == start) {
            copy_bad(bad, badcap, text, strlen(text)); /* an empty entry: "a,,b", "a," */
            return -1;
        }
        if (list.count == HV_GUARD_MAX_ALLOW) {
            copy_bad(bad, badcap, text, strlen(text));
            return -2;
        }
        if (hv_cidr_parse(start, (size_t)(end - start), &list.cidr[list.count]) != 0) {
            copy_bad(bad, badcap, start, (size_t)(end - start));
            return -1;
        }
        list.count++;
        if (*p == '\0')
            break;
        p++;
    }
    *out = list;
    return 0;
}
