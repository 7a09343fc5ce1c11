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
 * given should have no address guard. A connection is "connected" once it is on the URL's
 * database: when that is not 0, the connection sends SELECT before anything else and reports
 * on_connect only after the server said yes, so that no command of the owner's can reach
 * another database. A refused SELECT is a failed connect (HV_EREFUSED, with the server's
 * words in hv_redis_refusal()).
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

typedef struct hv_redis_s hv_redis_t;

/** A command's outcome: status 0 with `reply` (which may be a REDIS_REPLY_ERROR: the server
 *  refused the command), or a UV_* error with `reply` NULL (UV_ETIMEDOUT, UV_ECANCELED, the
 *  connection's error). The reply belongs to the connection: copy what must outlive the call. */
typedef void (*hv_redis_reply_cb)(hv_redis_t *r, void *data, int status, const redisReply *reply);

typedef struct {
    /** Connected and on the URL's database (0), or not: a UV_* error (UV_ETIMEDOUT after the
     *  connect timeout, or when SELECT got no reply in time), or HV_EREFUSED when the server
     *  refused SELECT. The owner closes a connection that failed. */
    void (*on_connect)(hv_redis_t *r, int status);
    /** The open connection broke (the server closed it, a reply did not parse, a command
     *  timed out); every pending command has had its callback. The owner closes it. */
    void (*on_error)(hv_redis_t *r, int err);
} hv_redis_cbs_t;

/** Connect to addr's host (an IP literal, or a name looked up through env's dns cache) and
 *  port within `timeout_ms`, then, when addr->db is not 0, select that database (its reply is
 *  due within `timeout_ms` too). `addr` is copied. 0 with *out set, after which
 *  cbs->on_connect reports (never from inside this call), or a negative error with *out NULL. */
int hv_redis_connect(hv_conn_env_t *env, const hv_redis_addr_t *addr, uint64_t timeout_ms,
                     const hv_redis_cbs_t *cbs, void *data, hv_redis_t **out);

/** After on_connect reported a failure: "SELECT" when the connection was made and selecting
 *  the database failed (refused, no reply in time, or the connection broke), NULL when no
 *  connection was made. */
const char *hv_redis_failed_command(const hv_redis_t *r);

/** After on_connect reported HV_EREFUSED: the server's error reply to SELECT (valid until
 *  hv_redis_close()); NULL otherwise. */
const char *hv_redis_refusal(const hv_redis_t *r);

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
