/*
 * conn.h: one client connection: name lookup (through the dns cache), TCP connect to the
 * host's addresses as Happy Eyeballs does (RFC 8305: the families alternate, starting with
 * the lookup's first; the next address is tried when one fails, or 250 ms after the last
 * attempt started while it has not connected, two attempts at most at once; the first to
 * connect wins), bounded reads, owned writes and one timer, and above the TCP stream a chain
 * of layers (filters), bottom first: a proxy tunnel, TLS.
 *
 * The connection is a plaintext byte stream to whoever owns it (fetch, redis): it hands up
 * what the top layer delivers and sends what it is given through the layers. The owner never
 * learns which layers there are; conn itself knows none of them: a layer is a type
 * (hv_cf_type_t, below) and its argument, given to hv_conn_connect() by whoever assembles the
 * chain, and a new layer is a new file (cf_tls.c).
 *
 * Ownership: the owner creates the connection, swaps callbacks with hv_conn_set_owner() as it
 * moves between a request and the idle pool, and ends it with hv_conn_close(). After that
 * call the owner must forget the pointer: the memory is freed in the last handle's close
 * callback, and no callback of the owner runs any more. The owner keeps its own bookkeeping
 * (fetch's pool lists) in its own structs: every field of hv_conn_t is conn's to write.
 *
 * States: RESOLVING -> CONNECTING -> [HANDSHAKING: the layers open, bottom first] -> OPEN ->
 * CLOSING.
 *
 * The address guard (guard.h) is asked about every address just before it is connected to:
 * a refused address is skipped as if it had failed, without a packet sent, and when the guard
 * refused every address of the host the connection fails with HV_EBLOCKED (the class in
 * hv_conn_error()). The guard sees the address the socket connects to: a proxy's, when the
 * chain starts with a proxy tunnel.
 *
 * Reading: while a layer opens, the socket is read for it; once all are open, on_connect(0)
 * reports it and reading stops until the owner asks. The bytes read go to the lowest layer
 * that is not yet a pass-through (an open tunnel passes bytes on untouched); a layer that
 * offers room of its own (TLS's inbound buffer) has the socket read straight into it.
 * A layer that holds data of its own (TLS records decrypted only while reading is on)
 * delivers it from the loop once reading resumes, never inside hv_conn_read_start().
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

/** Size of the read buffer all connections share (reads are consumed synchronously). */
#define HV_CONN_READ_BUF (64 * 1024)

typedef struct hv_conn_s hv_conn_t;
typedef struct hv_cf_s hv_cf_t;
typedef struct hv_cf_type_s hv_cf_type_t;

/** One layer of a chain: its type, and the argument its `create` reads (only during
 *  hv_conn_connect(): it may live on the caller's stack). */
typedef struct {
    const hv_cf_type_t *type;
    const void *arg;
} hv_conn_layer_t;

/** Addresses of a host tried in one connect, and the delay before the next attempt starts
 *  while one is still under way (RFC 8305's Connection Attempt Delay). */
#define HV_CONN_ADDRS_MAX 16
#define HV_CONN_ATTEMPT_DELAY_MS 250

/** Layers a chain may have above TCP. */
#define HV_CONN_LAYERS_MAX 4

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
     * tried address's connect error, HV_EBLOCKED when the guard refused every address, or a
     * layer's failure (HV_ETLS / HV_ECERT from a TLS handshake...; the detail of these in
     * hv_conn_error()). The owner closes a failed connection. */
    void (*on_connect)(hv_conn_t *c, int status);
    /** Bytes arrived. The callee may pause reads, write, or close the connection. */
    void (*on_read)(hv_conn_t *c, const char *data, size_t len);
    /** The peer closed (UV_EOF) or a read/write failed. The connection stays open until the
     * owner closes it. */
    void (*on_error)(hv_conn_t *c, int err);
    /** The timer armed with hv_conn_set_timer() fired. */
    void (*on_timeout)(hv_conn_t *c);
} hv_conn_cbs_t;

/** Where the owner would have the next read's bytes go (a body's buffer, say, to spare a
 * copy): 1 with `*base` and `*len` (> 0) valid until the on_read that follows, 0 for the
 * connection's own buffer. Asked only when no layer reads for the owner (plain TCP). */
typedef int (*hv_conn_space_cb)(hv_conn_t *c, char **base, size_t *len);

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
    uv_tcp_t _tcps[2];          /* two racers for Happy Eyeballs (RFC 8305) */
    uv_connect_t _reqs[2];
    int _busy[2];               /* ... connecting */
    int _replacing[2];          /* ... closing, to be opened again */
    uv_tcp_t *_sock;            /* the one that connected */
    uv_timer_t _he;             /* the delay before the next attempt starts */
    unsigned _order[HV_CONN_ADDRS_MAX]; /* the addresses in the order they are tried */
    unsigned _norder, _next;
    uv_timer_t _timer;
    uv_idle_t _later;           /* reports from the loop: data a layer buffered while reading
                                   was paused, a failure known inside hv_conn_connect() */
    int _deferred;              /* that failure, until _later reports it */
    hv_cf_t *_bottom;           /* the chain, bottom first (NULL: plain TCP) */
    hv_cf_t *_top;
    hv_fault_t _error;          /* a layer's last failure, or the guard's refusal */
    hv_dns_waiter_t _dns_waiter;
    hv_dns_entry_t *_dns_entry;
    char *_host;
    struct sockaddr_storage _literal; /* the address when the host is an IP literal */
    int _is_literal;
    unsigned _tried;            /* addresses a connect was started to */
    int _last_err;              /* the last of those connects' errors */
    hv_addr_class_t _blocked;   /* the first address the guard refused, HV_ADDR_PUBLIC if none */
    uint16_t _port;
    int _reading;               /* bytes are wanted: by the owner once open, by the layers
                                   while they open */
    int _held;                  /* a layer works on what it has: the socket waits meanwhile */
    int _sock_on;               /* the socket is being read (uv_read_start) */
    int _quickack;              /* ACK every read at once (a layer asked: hv_cf_quickack()) */
    hv_conn_space_cb _space;    /* the owner's read space (hv_conn_set_space), or NULL */
    hv_handles_t _handles;      /* the tcp racers, timer, delay, idle: the memory goes when
                                   all have closed */
};

/**
 * Start a connection to host:port: look the name up (skipped when `host_is_ip`), then connect
 * to each address the guard allows in turn until one accepts, then open the `nlayers` layers
 * (at most HV_CONN_LAYERS_MAX), bottom first. Returns 0 with *out set, after which
 * `cbs->on_connect` reports the outcome (never from inside this call); or a negative error
 * known at once (a remembered lookup failure, EMFILE, a layer that cannot be made...) with
 * *out NULL and nothing to free.
 */
int hv_conn_connect(hv_conn_env_t *env, const hv_conn_layer_t *layers, unsigned nlayers,
                    const char *host, int host_is_ip, uint16_t port, const hv_conn_cbs_t *cbs,
                    void *data, hv_conn_t **out);

/** Hand the connection to another owner: `cbs` and `data` get its callbacks from now on.
 *  The previous owner's read space (hv_conn_set_space) is forgotten. */
void hv_conn_set_owner(hv_conn_t *c, const hv_conn_cbs_t *cbs, void *data);

/** The owner offers space for reads (see hv_conn_space_cb); NULL withdraws it. */
void hv_conn_set_space(hv_conn_t *c, hv_conn_space_cb space);

/** Detail of a layer's last failure (HV_D_CERTIFICATE_EXPIRED...) or of the guard's refusal
 *  (HV_D_BLOCKED_LOOPBACK_ADDRESS...), code HV_D_NONE if none. Valid as long as the
 *  connection. */
const hv_fault_t *hv_conn_error(const hv_conn_t *c);

/** Whether the chain has a layer of `type`. */
int hv_conn_has_layer(const hv_conn_t *c, const hv_cf_type_t *type);

/** The chain's layer of `type`, NULL if none (for that layer's own accessors). */
const hv_cf_t *hv_conn_layer(const hv_conn_t *c, const hv_cf_type_t *type);

/** The type of the layer opening now (HANDSHAKING), NULL in any other state. */
const hv_cf_type_t *hv_conn_opening(const hv_conn_t *c);

/** Queue `len` bytes for sending (copied). 0, or a UV_E* error (connection not open). */
int hv_conn_write(hv_conn_t *c, const char *data, size_t len);

void hv_conn_read_start(hv_conn_t *c);
void hv_conn_read_stop(hv_conn_t *c);

/** (Re)arm the connection's single timer; 0 stops it. */
void hv_conn_set_timer(hv_conn_t *c, uint64_t ms);

/** Begin closing; idempotent. The pointer must not be used afterwards. */
void hv_conn_close(hv_conn_t *c);

/* ---- layers (filters) ----
 *
 * A layer sits between the one below (another layer, or the socket) and the one above
 * (another layer, or the owner). It moves bytes with hv_cf_down() and hv_cf_up(), reports
 * that it finished opening with hv_cf_opened(), and a failure with hv_cf_fail(); conn calls
 * its operations below. Every call happens on the loop, never nested in another layer's
 * call for the same connection except as the chain passes bytes up or down. */

/** A layer's operations. `create`, `open`, `recv`, `send` and `destroy` are required. */
struct hv_cf_type_s {
    const char *name;
    /** A new layer (its state begins with an hv_cf_t) for `arg`; NULL if it cannot be made. */
    hv_cf_t *(*create)(hv_conn_t *c, const void *arg);
    /** The layers below are open: begin this one's opening (send a CONNECT, a ClientHello).
     *  Call hv_cf_opened() when it is done, or hv_cf_fail(). */
    void (*open)(hv_cf_t *cf);
    /** Bytes from below (copied by the callee if it keeps them). */
    void (*recv)(hv_cf_t *cf, const char *data, size_t len);
    /** Bytes from above, to send on: 0, or an error. */
    int (*send)(hv_cf_t *cf, const char *data, size_t len);
    /** The socket ended (UV_EOF) or failed (`err`) while this layer was opening: the status
     *  to report (its detail set with hv_cf_set_fault()). NULL: `err` as it is. */
    int (*ended)(hv_cf_t *cf, int err);
    /** Optional: room to read the socket straight into (while this layer is the lowest that
     *  is not a pass-through), and the bytes then read there. */
    void (*in_space)(hv_cf_t *cf, char **base, size_t *len);
    void (*in_commit)(hv_cf_t *cf, size_t n);
    /** Optional: whether data waits for delivery, and its delivery (reading is on). */
    int (*buffered)(const hv_cf_t *cf);
    void (*pump)(hv_cf_t *cf);
    /** Optional: the connection is closing (hv_conn_close()): let go at once of what waits on
     *  the loop for the layer (a name lookup), as the connection does of its own. */
    void (*close)(hv_cf_t *cf);
    /** The last close callback ran: free the layer. */
    void (*destroy)(hv_cf_t *cf);
};

struct hv_cf_s {
    const hv_cf_type_t *type;
    hv_conn_t *conn;
    hv_cf_t *below;        /* NULL: the socket */
    hv_cf_t *above;        /* NULL: the owner */
    int passthrough;       /* open, and it passes bytes on untouched both ways */
};

/** Send bytes to the layer below (the socket, at the bottom). 0, or an error. */
int hv_cf_down(hv_cf_t *cf, const char *data, size_t len);
/** Deliver bytes to the layer above (the owner, at the top, once the connection is open). */
void hv_cf_up(hv_cf_t *cf, const char *data, size_t len);
/** For the top layer of an open connection: the owner's room for the bytes it will deliver
 *  next (see hv_conn_space_cb), so that a layer that makes bytes (TLS decryption) makes them
 *  there and delivers them in place with hv_cf_up(). 0: deliver from the layer's own buffer. */
int hv_cf_up_space(hv_cf_t *cf, char **base, size_t *len);
/** The layer finished opening: the next one opens, or the connection is open. */
void hv_cf_opened(hv_cf_t *cf);
/** The layer failed with `err` (its detail set with hv_cf_set_fault() first): the owner hears
 *  of it as a failed connect while opening, else as an error. Reading stops. */
void hv_cf_fail(hv_cf_t *cf, int err);
/** The detail hv_conn_error() reports. */
void hv_cf_set_fault(hv_cf_t *cf, const hv_fault_t *fault);

/** hv_cf_set_fault() with detail `code` (and `arg`, NULL for none), then hv_cf_fail(). */
void hv_cf_fail_with(hv_cf_t *cf, int err, hv_detail_t code, const char *arg);
/** Whether the owner reads now (a layer holding data delivers it only then). */
int hv_cf_reading(const hv_cf_t *cf);
/** Whether the whole chain is open (the owner has heard on_connect(0)). */
int hv_cf_conn_open(const hv_cf_t *cf);
/** ACK what the socket receives at once from now on, rather than after the kernel's delayed
 *  ACK: for a layer whose peer relays in small writes that wait for our ACK (a proxy's
 *  tunnel without TCP_NODELAY: the last piece of each answer would wait up to 40 ms). */
void hv_cf_quickack(hv_cf_t *cf);
/** While a layer works on what it received elsewhere (a TLS step on a crypto worker), the
 *  socket is not read, whatever the owner asks meanwhile: hold (1), then release (0). */
void hv_cf_hold(hv_cf_t *cf, int hold);
/** Whether the connection is closing (a layer's own asynchronous work ends quietly then). */
int hv_cf_conn_closing(const hv_cf_t *cf);
/** What the connection shares with others: the DNS cache, the address guard, the figures
 *  (a layer that resolves a name of its own checks its addresses with the same guard). */
hv_conn_env_t *hv_cf_env(const hv_cf_t *cf);

#endif
