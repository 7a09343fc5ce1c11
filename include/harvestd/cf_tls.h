/*
 * cf_tls.h: TLS as a layer of a connection's chain (conn.h), over tls.h's sessions in memory.
 *
 * Opening runs the handshake (the ClientHello goes out when the layers below are open: over
 * a proxy tunnel, inside it), with SNI and the certificate checked against `host`, and the
 * session cached per host:port for resumption. Open, the layer encrypts what the owner sends
 * (a large write a slice at a time, each slice's records flushed before the next: the
 * session's outbound buffer is bounded) and decrypts only while the owner reads, so a paused
 * connection decrypts nothing further; records already buffered are delivered from the loop
 * once reading resumes. Failures carry tls.h's details (certificate_untrusted, tls_alert_40,
 * tls_closed_during_handshake...) in hv_conn_error().
 */
#ifndef HARVESTD_CF_TLS_H
#define HARVESTD_CF_TLS_H

#include <stdint.h>

#include "harvestd/conn.h"
#include "harvestd/tls.h"
#include "harvestd/tlspool.h"

/** What a TLS layer is made from (read during hv_conn_connect() only). */
typedef struct {
    hv_tls_ctx_t *ctx;    /* trust store and settings; outlives the connection */
    const char *host;     /* the name the certificate must hold (and SNI), or an IP literal */
    int host_is_ip;
    uint16_t port;        /* with host, selects the cached session to resume */
    int h2;               /* offer ALPN "h2" before "http/1.1" (tls.h: hv_tls_new_alpn) */
    hv_tlspool_t *pool;   /* runs the handshake's steps after the ClientHello; NULL: on the
                             loop thread. It must outlive the connection's handshake. */
} hv_cf_tls_arg_t;

extern const hv_cf_type_t hv_cf_tls;

/** The protocol the TLS layer of `c` agreed on by ALPN ("h2", "http/1.1"); NULL when it has
 *  none, or no TLS layer. */
const char *hv_cf_tls_alpn(const hv_conn_t *c);

#endif
