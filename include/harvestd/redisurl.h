/*
 * redisurl.h: where a Redis server is and who logs in to it, as the operator writes it
 * (redis_url): redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]. Pure parsing, apart from the
 * connection (redis.h) so that the configuration can check the URL without depending on
 * connections; redis.h includes it.
 *
 * The user information is USER:PASSWORD (AUTH USER PASSWORD, an ACL user) or :PASSWORD (AUTH
 * PASSWORD, the default user), each part percent-decoded; it ends at the last '@', so that a
 * password with an '@' or a '/' written as it is still parses. Without a ':' it would be
 * ambiguous (redis-cli reads `redis://X@HOST` as a password, RFC 3986 and most clients as a
 * user name), and is refused.
 */
#ifndef HARVESTD_REDISURL_H
#define HARVESTD_REDISURL_H

#include <stddef.h>
#include <stdint.h>

/** Room for a user name and for a password, NUL included. */
#define HV_REDIS_USER_MAX 256
#define HV_REDIS_PASSWORD_MAX 1024

/** Where a Redis server is, and who logs in. */
typedef struct {
    char host[256]; /* a name or an IP literal (IPv6 without its brackets) */
    uint16_t port;  /* 6379 by default */
    unsigned db;    /* 0 by default */
    char user[HV_REDIS_USER_MAX];         /* "": the default user */
    char password[HV_REDIS_PASSWORD_MAX]; /* "": no AUTH */
} hv_redis_addr_t;

/** Parse `url`: 0, or -1 with a message in `err` (what is wrong, quoting the URL). The redis
 *  scheme; a user and a password as above (percent-decoded; no NUL byte, at most
 *  HV_REDIS_USER_MAX - 1 and HV_REDIS_PASSWORD_MAX - 1 bytes); no query; DB 0 to 15 999. */
int hv_redis_url_parse(const char *url, hv_redis_addr_t *out, char *err, size_t errcap);

#endif
