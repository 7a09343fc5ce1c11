/*
 * guard.h: the address guard, which decides whether harvestd may connect to a socket address.
 *
 * A daemon that fetches whatever URLs are dropped into a directory must not become a way into
 * the network it runs in: cloud metadata at 169.254.169.254, admin ports on 127.0.0.1, the
 * intranet. conn asks the guard about the exact address it is about to connect to, after the
 * name lookup, for every address of a host's fallback list; a name that resolves to a public
 * address once and to 127.0.0.1 the next time (DNS rebinding) is judged on what it resolved
 * to this time.
 *
 * The classifier is pure: it knows the special-purpose ranges of RFC 6890 that lead into a
 * local network (loopback, private, link-local, shared, multicast, ...) and judges an IPv4
 * address carried inside an IPv6 one (::ffff:a.b.c.d, ::a.b.c.d, 64:ff9b::/96, 2002::/16) as
 * that IPv4 address. The guard adds the user's exceptions (allow_addresses) or is off
 * (allow_private_addresses).
 */
#ifndef HARVESTD_GUARD_H
#define HARVESTD_GUARD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "harvestd/detail.h"

/* Why an address is refused; HV_ADDR_PUBLIC is the one class that is allowed. */
typedef enum {
    HV_ADDR_PUBLIC = 0,
    HV_ADDR_UNSPECIFIED,     /* 0.0.0.0/8 ("this network"), ::/128 */
    HV_ADDR_LOOPBACK,        /* 127.0.0.0/8, ::1 */
    HV_ADDR_PRIVATE,         /* 10/8, 172.16/12, 192.168/16, fc00::/7 */
    HV_ADDR_SHARED,          /* 100.64.0.0/10, carrier-grade NAT */
    HV_ADDR_LINK_LOCAL,      /* 169.254/16, fe80::/10 */
    HV_ADDR_SPECIAL_PURPOSE, /* 192.0.0.0/24, IETF protocol assignments */
    HV_ADDR_BENCHMARKING,    /* 198.18.0.0/15 */
    HV_ADDR_MULTICAST,       /* 224.0.0.0/4, ff00::/8 */
    HV_ADDR_RESERVED,        /* 240.0.0.0/4 but the broadcast address */
    HV_ADDR_BROADCAST,       /* 255.255.255.255 */
    HV_ADDR__COUNT
} hv_addr_class_t;

/** The longest allow_addresses list, in entries. */
#define HV_GUARD_MAX_ALLOW 64

/** An address range: `bits` leading bits of `addr` (4 or 16 bytes, network order). */
typedef struct {
    uint8_t family; /* AF_INET or AF_INET6 */
    uint8_t bits;
    uint8_t addr[16];
} hv_cidr_t;

/** The user's exceptions (allow_addresses), kept by value in the configuration. */
typedef struct {
    unsigned count;
    hv_cidr_t cidr[HV_GUARD_MAX_ALLOW];
} hv_allow_list_t;

/** What conn consults. `off`: every address is allowed (allow_private_addresses). */
typedef struct {
    int off;
    const hv_allow_list_t *allow; /* NULL: no exceptions */
} hv_guard_t;

/** The class of `sa` (AF_INET or AF_INET6; another family is HV_ADDR_RESERVED), with an
 *  embedded IPv4 address judged as itself. */
hv_addr_class_t hv_addr_classify(const struct sockaddr *sa);

/** "loopback", "link_local", ...: the class as records and metrics spell it ("" for PUBLIC). */
const char *hv_addr_class_name(hv_addr_class_t c);

/** The failure detail of a refusal (HV_D_BLOCKED_LOOPBACK_ADDRESS...); HV_D_NONE for PUBLIC. */
hv_detail_t hv_addr_class_detail(hv_addr_class_t c);

/**
 * May `sa` be connected to? HV_ADDR_PUBLIC if so: the guard is off, the address is public,
 * or it (or the IPv4 address it carries) lies in an allowed range. Otherwise the class that
 * refuses it. `g` NULL allows everything.
 */
hv_addr_class_t hv_guard_check(const hv_guard_t *g, const struct sockaddr *sa);

/** Parse one range: "10.0.0.0/8", "fd00::/8", or a bare address (a /32 or /128). Host bits
 *  set below the prefix are cleared. 0, or -1 if it is not a range. */
int hv_cidr_parse(const char *text, size_t len, hv_cidr_t *out);

/** Whether the address `addr` (4 or 16 bytes, network order, of `family`) lies in `c`. */
int hv_cidr_contains(const hv_cidr_t *c, int family, const uint8_t *addr);

/** Print `c` as hv_cidr_parse() reads it back ("10.0.0.0/8"). 0, or -1 if `cap` is short. */
int hv_cidr_format(const hv_cidr_t *c, char *out, size_t cap);

/**
 * Parse a comma-separated list of ranges (spaces around entries allowed; "" is an empty list)
 * into `out`. 0; or, with `out` unchanged and `bad` (NUL-terminated, at most `badcap` bytes)
 * set: -1, `bad` being the entry that is not a range (the list, for an empty entry), or -2 for
 * more than HV_GUARD_MAX_ALLOW entries (`bad` being the list).
 */
int hv_allow_list_parse(const char *text, hv_allow_list_t *out, char *bad, size_t badcap);

#endif
