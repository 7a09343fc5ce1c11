/*
 * conn.h: one client connection: name lookup (through the dns cache), TCP connect with
 * fallback to the host's next address, bounded reads, owned writes and one timer.
 *
 * The connection is a plaintext byte stream to whoever owns it (fetch): it hands up what it
 * reads and sends what it is given. A TLS layer slots in below this interface without the
 * owner noticing.
 *
 * Ownership: the owner creates the connection, swaps callbacks with hv_conn_set_owner() as it
 * moves between a request and the idle pool, and ends it with hv_conn_close(). After that
 * call the owner must forget the pointer: the memory is freed in the last handle's close
 * callback, and no callback of the owner runs any more. The owner keeps its own bookkeeping
 * (fetch's pool lists) in its own structs: every field of hv_conn_t is conn's to write.
 *
 * States: RESOLVING -> CONNECTING -> [HANDSHAKING] -> OPEN -> CLOSING.
 *
 * The address guard (guard.h) is asked about every address just before it is connected to:
 * a refused address is skipped as if it had failed, without a packet sent, and when the guard
 * refused every address of the host the connection fails with HV_EBLOCKED (the class in
 * hv_conn_error()).
 *
 * TLS: with a TLS context the connection runs the handshake after connecting and reports
 * on_connect only once it is complete; from then on it carries plaintext like any other.
 * Ciphertext is read straight into the session's inbound buffer and decrypted only while
 * reading is on, so a paused connection decrypts nothing further; what was already buffered
 * is delivered (from the loop, never inside hv_conn_read_start) once reading resumes.
 */
#ifndef HARVESTD_CONN_H
#define HARVESTD_CONN_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "harvestd/detail.h"
#include "harvestd/dns.h"
#include "harvestd/guard.h"
#include "harvestd/handles.h"
#include "harvestd/tls.h"

/** Size of the read buffer all connections share (reads are consumed synchronously). */
#define HV_CONN_READ_BUF (64 * 1024)

typedef struct hv_conn_s hv_conn_t;

typedef struct {
    uint64_t opened;                  /* connections that started a TCP connect */
    uint64_t blocked[HV_ADDR__COUNT]; /* addresses the guard refused, by class */
} hv_conn_stats_t;

/** What an owner's connections share. It must outlive every connection made with it. */
typedef struct {
    uv_loop_t *loop;
    hv_dns_t *dns;
    const hv_guard_t *guard; /* NULL: every address may be connected to */
    hv_conn_stats_t *stats;
} hv_conn_env_t;

typedef struct {
    /** The connection is open (0), or failed: a UV_EAI_* code from the lookup, the last
     * tried address's connect error, HV_EBLOCKED when the guard refused every address, or
     * HV_ETLS / HV_ECERT from the handshake (detail of the last three in hv_conn_error()).
     * The owner closes a failed connection. */
    void (*on_connect)(hv_conn_t *c, int status);
    /** Bytes arrived. The callee may pause reads, write, or close the connection. */
    void (*on_read)(hv_conn_t *c, const char *data, size_t len);
    /** The peer closed (UV_EOF) or a read/write failed. The connection stays open until the
     * owner closes it. */
    void (*on_error)(hv_conn_t *c, int err);
    /** The timer armed with hv_conn_set_timer() fired. */
    void (*on_timeout)(hv_conn_t *c);
} hv_conn_cbs_t;

typedef enum {
    HV_CONN_RESOLVING,
    HV_CONN_CONNECTING,
    HV_CONN_HANDSHAKING,
    HV_CONN_OPEN,
    HV_CONN_CLOSING,
} hv_conn_state_t;

struct hv_conn_s {
    uint64_t id;
    hv_conn_state_t state;
    const hv_conn_cbs_t *cbs;   /* current owner's callbacks (hv_conn_set_owner) */
    void *data;                 /* current owner */

    /* private */
    hv_conn_env_t *_env;
    uv_tcp_t _tcp;
    uv_timer_t _timer;
    uv_idle_t _later;           /* reports from the loop: TLS data buffered while reading was
                                   paused, a failure known inside hv_conn_connect() */
    int _deferred;              /* that failure, until _later reports it */
    hv_tls_ctx_t *_tls_ctx;
    hv_tls_t *_tls;
    hv_fault_t _error;          /* the last TLS failure, or the guard's refusal */
    uv_connect_t _connect_req;
    hv_dns_waiter_t _dns_waiter;
    hv_dns_entry_t *_dns_entry;
    char *_host;
    struct sockaddr_storage _literal; /* the address when the host is an IP literal */
    int _is_literal;
    unsigned _addr_idx;
    unsigned _tried;            /* addresses a connect was started to */
    int _last_err;              /* the last of those connects' errors */
    hv_addr_class_t _blocked;   /* the first address the guard refused, HV_ADDR_PUBLIC if none */
    uint16_t _port;
    int _reading;
    hv_handles_t _handles;      /* tcp, timer, drain: the memory goes when all have closed */
};

/**
 * Start a connection to host:port: look the name up (skipped when `host_is_ip`), then connect
 * to each address the guard allows in turn until one accepts, then (with `tls` non-NULL) run
 * the handshake. Returns 0 with *out set, after which `cbs->on_connect` reports the outcome
 * (never from inside this call); or a negative error known at once (a remembered lookup
 * failure, EMFILE...) with *out NULL and nothing to free.
 */
int hv_conn_connect(hv_conn_env_t *env, hv_tls_ctx_t *tls, const char *host, int host_is_ip,
                    uint16_t port, const hv_conn_cbs_t *cbs, void *data, hv_conn_t **out);

/** Hand the connection to another owner: `cbs` and `data` get its callbacks from now on. */
void hv_conn_set_owner(hv_conn_t *c, const hv_conn_cbs_t *cbs, void *data);

/** Detail of the last TLS failure (HV_D_CERTIFICATE_EXPIRED...) or of the guard's refusal
 *  (HV_D_BLOCKED_LOOPBACK_ADDRESS...), code HV_D_NONE if none. Valid as long as the
 *  connection. */
const hv_fault_t *hv_conn_error(const hv_conn_t *c);

/** Whether this connection runs TLS. */
int hv_conn_is_tls(const hv_conn_t *c);

/** Queue `len` bytes for sending (copied). 0, or a UV_E* error (connection not open). */
int hv_conn_write(hv_conn_t *c, const char *data, size_t len);

void hv_conn_read_start(hv_conn_t *c);
void hv_conn_read_stop(hv_conn_t *c);

/** (Re)arm the connection's single timer; 0 stops it. */
void hv_conn_set_timer(hv_conn_t *c, uint64_t ms);

/** Begin closing; idempotent. The pointer must not be used afterwards. */
void hv_conn_close(hv_conn_t *c);

#endif
