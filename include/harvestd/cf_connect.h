/*
 * cf_connect.h: an HTTP proxy's tunnel as a layer of a connection's chain (conn.h): the
 * connection is made to the proxy, and this layer opens by asking it to CONNECT to the
 * target (with Proxy-Authorization: Basic when the proxy has a user), then passes bytes on
 * untouched both ways: a TLS layer above it talks to the target inside the tunnel.
 *
 * The proxy's reply head is read up to 16 KiB; a 2xx opens the tunnel, anything else fails
 * the connection with HV_EPROXY and a detail in hv_conn_error(): proxy_auth_required_407,
 * proxy_http_<status>, proxy_closed_connection, proxy_bad_reply, proxy_reply_too_large.
 */
#ifndef HARVESTD_CF_CONNECT_H
#define HARVESTD_CF_CONNECT_H

#include <stdint.h>

#include "harvestd/conn.h"
#include "harvestd/proxy.h"

/** Its argument: an hv_proxy_target_t (proxy.h) through an HV_PROXY_HTTP proxy. */
extern const hv_cf_type_t hv_cf_connect;

/** The largest proxy reply head read. */
#define HV_CF_CONNECT_REPLY_MAX (16 * 1024)

#endif
