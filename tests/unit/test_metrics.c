/* metrics: the endpoint's address (metrics_listen). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "harvestd/metrics.h"
#include "test.h"

/* `listen` parsed, as "ADDRESS PORT" (or "refused"). */
static const char *listen_as(const char *listen, char *out, size_t cap)
{
    struct sockaddr_storage ss;
    char addr[INET6_ADDRSTRLEN];
    memset(&ss, 0xa5, sizeof(ss));
    if (hv_metrics_parse_listen(listen, &ss) != 0) {
        snprintf(out, cap, "refused");
    } else if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &in->sin_addr, addr, sizeof(addr));
        snprintf(out, cap, "%s %u", addr, ntohs(in->sin_port));
    } else if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &in6->sin6_addr, addr, sizeof(addr));
        snprintf(out, cap, "[%s] %u", addr, ntohs(in6->sin6_port));
    } else {
        snprintf(out, cap, "family %d", (int)ss.ss_family);
    }
    return out;
}

TEST_IMPL(metrics_listen_addresses)
{
    static const struct {
        const char *listen, *want;
    } cases[] = {
        {"127.0.0.1:9464", "127.0.0.1 9464"},
        {"0.0.0.0:0", "0.0.0.0 0"},
        {"[::1]:9464", "[::1] 9464"},
        {"[::]:80", "[::] 80"},
        /* localhost is 127.0.0.1 whatever /etc/hosts or a DNS server would say. */
        {"localhost:9464", "127.0.0.1 9464"},
        {"LocalHost:1", "127.0.0.1 1"},
        {"localhost:65535", "127.0.0.1 65535"},
        /* No other name is looked up, nor localhost in brackets or with a dot. */
        {"[localhost]:9464", "refused"},
        {"localhost.:9464", "refused"},
        {"localhost6:9464", "refused"},
        {"metrics.example.org:9464", "refused"},
        {"localhost", "refused"},
        {"localhost:", "refused"},
        {"localhost:65536", "refused"},
        {"localhost: 80", "refused"},
        {"localhost:+80", "refused"},
        {"localhost:80x", "refused"},
        {":9464", "refused"},
        {"[::1]9464", "refused"},
        {"", "refused"},
    };
    char got[128];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        listen_as(cases[i].listen, got, sizeof(got));
        if (strcmp(got, cases[i].want) != 0)
            hv_test_fail(__FILE__, __LINE__, "'%s': %s, expected %s", cases[i].listen, got,
                         cases[i].want);
    }
}
