/*
 * redis.h: one connection to a Redis server on harvestd's own loop.
 *
 * hiredis is used for what it does well, its reply parser (redisReader) and its command
 * formatter (redisFormatCommandArgv); the connection is harvestd's own hv_conn_t (lookup
 * through the dns cache, address fallback, owned writes, one timer for the connect timeout
 * and the timeout of every command). hiredis 0.14's async context never reports connect
 * errors and has no timeouts.
 *
 * Commands are pipelined: each is written as it is issued, and replies come back in the order
 * the commands were sent, each to its own callback. A command that gets no reply within its
 * timeout fails the connection: Redis answers in order, so every later reply would be late too.
 *
 * The address is the operator's (redis_url), not a fetched URL's: the connection environment
 * given should have no address guard. A rediss:// address runs TLS on the connection, as conn
 * runs it for https (the same hv_tls_* sessions over memory, the owner's shared context: its
 * trust store, `insecure`): the certificate is checked against the host (a name, also sent as
 * SNI, or an IP literal against the certificate's addresses), and the handshake is part of the
 * connect, under the connect timeout. Nothing else here knows which it runs. A connection is "connected" once it is logged in and on
 * the URL's database: when the address has a user or a password, the connection sends AUTH
 * ([USER] PASSWORD) before anything else, then, when the database is not 0, SELECT, and reports
 * on_connect only after the server said yes to both, so that no command of the owner's can
 * run as another user or reach another database. A refused AUTH or SELECT is a failed connect
 * (HV_EREFUSED, hv_redis_failed_command() names which, with the server's words in
 * hv_redis_refusal()). The password is wiped from the connection's memory when it is freed.
 *
 * Every reply is bounded (the HV_REDIS_MAX_* limits below): the framing is scanned as bytes
 * arrive, before hiredis's reader buffers them, so that a header announcing too much is
 * refused when it arrives rather than after the bytes it announced. A reply that breaks a
 * bound breaks the connection like a reply that does not parse, with HV_ETOOBIG, and
 * hv_redis_limit() names the bound. hiredis 0.14's reader has no such bounds of its own.
 *
 * Ownership: hv_redis_close() fails what is pending with UV_ECANCELED (from inside the call)
 * and frees the hv_redis_t (once no callback of its own is running); the pointer must not be
 * used after it. It may be called from any callback.
 */
#ifndef HARVESTD_REDIS_H
#define HARVESTD_REDIS_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "harvestd/conn.h"
#include "harvestd/redisurl.h"
#include "harvestd/tls.h"

/*
 * The bounds on one reply. The largest reply harvestd asks for is the stream's XREADGROUP: at
 * most `concurrency` entries (10000 at most; XAUTOCLAIM asks for 1000 at most), each a few
 * fields and a URL of at most 8 KiB (HV_URL_MAX): about 86 MB, in 110,000 elements, nested
 * five deep (the streams, a stream, its entries, an entry, its fields). The status command
 * reads pages of 1000 pending entries and one small reply per entry. Each bound leaves room
 * above that, and is far below what would hurt the daemon.
 */
/** Longest bulk string, status, error or integer line: 128 times the longest URL (a batch or
 *  rules name, an entry id, a server's error text are all far shorter). */
#define HV_REDIS_MAX_BULK (1024 * 1024)
/** Elements one reply's arrays may announce, all of its arrays together (so also the length of
 *  any one array): about ten times the 110,000 of the largest read. Counting them together bounds
 *  what hiredis allocates for a reply, which is mostly per element, not per byte. */
#define HV_REDIS_MAX_ELEMENTS (1024 * 1024)
/** Arrays nested in one another: three more than the five of XREADGROUP's reply, and as deep
 *  as hiredis 0.14's reader goes at all. */
#define HV_REDIS_MAX_DEPTH 8
/** Bytes of one reply, counted as they arrive (the part of a reply the reader holds before it
 *  is complete is within this too): half again the 86 MB of the largest read. */
#define HV_REDIS_MAX_REPLY_BYTES (128 * 1024 * 1024)

typedef struct hv_redis_s hv_redis_t;

/** A command's outcome: status 0 with `reply` (which may be a REDIS_REPLY_ERROR: the server
 *  refused the command), or a UV_* error with `reply` NULL (UV_ETIMEDOUT, UV_ECANCELED, the
 *  connection's error). The reply belongs to the connection: copy what must outlive the call. */
typedef void (*hv_redis_reply_cb)(hv_redis_t *r, void *data, int status, const redisReply *reply);

typedef struct {
    /** Connected, logged in and on the URL's database (0), or not: a UV_* error
     *  (UV_ETIMEDOUT after the connect timeout, or when AUTH or SELECT got no reply in time),
     *  HV_ETLS or HV_ECERT when the TLS handshake failed (see hv_redis_tls_error()),
     *  HV_EREFUSED when the server refused AUTH or SELECT, HV_ETOOBIG when its reply broke a
     *  bound. The owner closes a connection that failed. */
    void (*on_connect)(hv_redis_t *r, int status);
    /** The open connection broke (the server closed it, a reply did not parse, a command
     *  timed out, a reply broke a bound: HV_ETOOBIG, see hv_redis_limit()); every pending
     *  command has had its callback, with the same error. The owner closes it. */
    void (*on_error)(hv_redis_t *r, int err);
} hv_redis_cbs_t;

/** Connect to addr's host (an IP literal, or a name looked up through env's dns cache) and
 *  port within `timeout_ms` (for rediss, the TLS handshake with `tls` included; `tls` is not
 *  used for redis://, and may be NULL then: a rediss address without one is UV_EINVAL), then, when addr->user or addr->password is not empty, log in
 *  (AUTH as addr->user, or as the default user when that is empty), then, when addr->db is not 0,
 *  select that database (each reply is due within `timeout_ms` too). `addr` is copied. 0 with
 *  *out set, after which cbs->on_connect reports (never from inside this call), or a negative
 *  error with *out NULL. */
int hv_redis_connect(hv_conn_env_t *env, hv_tls_ctx_t *tls, const hv_redis_addr_t *addr,
                     uint64_t timeout_ms, const hv_redis_cbs_t *cbs, void *data, hv_redis_t **out);

/** After on_connect reported a failure: "AUTH" or "SELECT" when the connection was made and
 *  logging in or selecting the database failed (refused, no reply in time, or the connection
 *  broke), NULL when no connection was made. */
const char *hv_redis_failed_command(const hv_redis_t *r);

/** After on_connect reported HV_EREFUSED: the server's error reply to AUTH or SELECT (valid
 *  until hv_redis_close()); NULL otherwise. */
const char *hv_redis_refusal(const hv_redis_t *r);

/** After a failure with HV_ETLS or HV_ECERT (on_connect, or on_error for a record that did
 *  not decrypt): what failed, as records name it ("certificate_untrusted",
 *  "certificate_hostname_mismatch", "tls_alert_40"), valid until hv_redis_close(). NULL
 *  otherwise. */
const char *hv_redis_tls_error(const hv_redis_t *r);

/** After a failure with HV_ETOOBIG (on_error, on_connect, or a command's callback): the bound
 *  the reply broke, as text naming it and its value ("a bulk string longer than 1048576
 *  bytes"), for the owner's log or message; valid until hv_redis_close(). NULL otherwise. */
const char *hv_redis_limit(const hv_redis_t *r);

/** Send a command of `argc` arguments (binary-safe, `argvlen` bytes each). Its reply is due
 *  within `timeout_ms` (for a blocking command, its block time and some slack). 0, or
 *  UV_ENOTCONN (not connected, or broken) with the callback not called. */
int hv_redis_command(hv_redis_t *r, int argc, const char **argv, const size_t *argvlen,
                     uint64_t timeout_ms, hv_redis_reply_cb cb, void *data);

/** Commands sent whose reply has not come yet. */
size_t hv_redis_pending(const hv_redis_t *r);

/** The owner's pointer given at connect. */
void *hv_redis_data(const hv_redis_t *r);

/** Close; pending commands fail with UV_ECANCELED before this returns. Idempotent. */
void hv_redis_close(hv_redis_t *r);

#endif
