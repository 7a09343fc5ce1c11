/*
 * redisurl.h: where a Redis server is, as the operator writes it (redis_url,
 * redis://HOST[:PORT][/DB]). Pure parsing, apart from the connection (redis.h) so that the
 * configuration can check the URL without depending on connections; redis.h includes it.
 */
#ifndef HARVESTD_REDISURL_H
#define HARVESTD_REDISURL_H

#include <stddef.h>
#include <stdint.h>

/** Where a Redis server is: redis://HOST[:PORT][/DB]. */
typedef struct {
    char host[256]; /* a name or an IP literal (IPv6 without its brackets) */
    uint16_t port;  /* 6379 by default */
    unsigned db;    /* 0 by default */
} hv_redis_addr_t;

/** Parse `url`: 0, or -1 with a message in `err` (what is wrong, quoting the URL). Only the
 *  redis scheme, no user or password, no query; DB 0 to 15 999. */
int hv_redis_url_parse(const char *url, hv_redis_addr_t *out, char *err, size_t errcap);

#endif
