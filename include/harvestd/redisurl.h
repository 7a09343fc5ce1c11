/*
 * redisurl.h: where a Redis server is and who logs in to it, as the operator writes it
 * (redis_url): redis://[[USER]:PASSWORD@]HOST[:PORT][/DB], or rediss://... for TLS, and the
 * password file that may stand for the password (redis_password_file). Parsing and that one small read, apart from
 * the connection (redis.h) so that the configuration can check both without depending on
 * connections; redis.h includes it.
 *
 * The user information is USER:PASSWORD (AUTH USER PASSWORD, an ACL user) or :PASSWORD (AUTH
 * PASSWORD, the default user), each part percent-decoded; it ends at the last '@', so that a
 * password with an '@' or a '/' written as it is still parses. Without a ':' it would be
 * ambiguous (redis-cli reads `redis://X@HOST` as a password, RFC 3986 and most clients as a
 * user name), and is refused.
 *
 * The password is a secret: wherever a URL is shown (logs, fatal errors, command messages,
 * --check-config), it is shown through hv_redis_url_mask(), never as given.
 */
#ifndef HARVESTD_REDISURL_H
#define HARVESTD_REDISURL_H

#include <stddef.h>
#include <stdint.h>

/** Room for a user name and for a password, NUL included. */
#define HV_REDIS_USER_MAX 256
#define HV_REDIS_PASSWORD_MAX 1024
/** Room for any URL hv_redis_url_parse() takes, as hv_redis_url_mask() shows it: a user
 *  percent-encoded, the host, a port and a database (the password is three bytes). */
#define HV_REDIS_URL_SHOWN_MAX (3 * HV_REDIS_USER_MAX + 256 + 64)

/** Where a Redis server is, and who logs in. */
typedef struct {
    char host[256]; /* a name or an IP literal (IPv6 without its brackets) */
    uint16_t port;  /* 6379 by default, for either scheme */
    unsigned db;    /* 0 by default */
    int tls;        /* rediss://: TLS, the certificate checked against `host` */
    char user[HV_REDIS_USER_MAX];         /* "": the default user */
    char password[HV_REDIS_PASSWORD_MAX]; /* "": no AUTH */
} hv_redis_addr_t;

/** `url` as it may be shown: the password replaced by "***" (redis://alice:***@host:6379/0,
 *  redis://:***@host), and a user information without a ':' (which redis-cli reads as a
 *  password) replaced whole (***@host after the scheme). The rest is left as written. Any text will
 *  do, a URL that does not parse included: the user information is what precedes the last
 *  '@' after the "://" (or after the start, without one). Writes at most `cap` bytes (`cap`
 *  > 0), NUL included, cutting what does not fit; the secret is never among what is kept.
 *  Returns `out`. */
const char *hv_redis_url_mask(const char *url, char *out, size_t cap);

/** Parse `url`: 0, or -1 with a message in `err` (what is wrong, quoting the URL masked).
 *  The redis and rediss schemes; a user and a password as above (percent-decoded; no NUL
 *  byte, at most HV_REDIS_USER_MAX - 1 and HV_REDIS_PASSWORD_MAX - 1 bytes); no query; DB 0
 *  to 15 999. */
int hv_redis_url_parse(const char *url, hv_redis_addr_t *out, char *err, size_t errcap);

/** Read the password in the file at `path` into `out` (`cap` bytes, NUL included): its one
 *  line, without the newline that ends it (nor a CR before that). Refused, with a message in
 *  `err` naming the file: one that cannot be opened or read, is not a regular file, is
 *  readable by its group or by others (say so, with its mode: a secret any local user could
 *  read is no secret), is empty, has a second line or a NUL byte, or holds more than cap - 1
 *  bytes. The mode is that of the file opened, not of the path looked at before. 0 or -1. */
int hv_redis_password_read(const char *path, char *out, size_t cap, char *err, size_t errcap);

/** Where hv_redis_url_load() failed. */
#define HV_REDIS_LOAD_URL (-1)           /* the URL (or a user it names without a password) */
#define HV_REDIS_LOAD_PASSWORD_FILE (-2) /* the password file */

/** The address `url` names with its login settled: parsed, then the password read from
 *  `password_file` (NULL: none) in place of the URL's, then a user left without a password
 *  refused (AUTH would be refused). 0, or HV_REDIS_LOAD_URL or HV_REDIS_LOAD_PASSWORD_FILE
 *  with a message in `err`. */
int hv_redis_url_load(const char *url, const char *password_file, hv_redis_addr_t *out,
                      char *err, size_t errcap);

#endif
