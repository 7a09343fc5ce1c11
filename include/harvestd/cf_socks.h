/*
 * cf_socks.h: a SOCKS5 proxy's tunnel as a layer of a connection's chain (conn.h), RFC 1928
 * with RFC 1929's user and password.
 *
 * The connection is made to the proxy; this layer opens by greeting it (offering no
 * authentication, and user/password when the proxy's URL has them), logging in if asked,
 * then asking it to CONNECT to the target, and passes bytes on untouched once it says yes.
 * With socks5:// harvestd resolves the target's name itself (through the connection's DNS
 * cache), checks each address with the address guard exactly as for a direct connection,
 * and sends the first allowed address: a name that leads only to refused addresses fails
 * with HV_EBLOCKED. With socks5h:// the name is sent and the proxy resolves it: the guard
 * sees only the proxy (the configuration allows that only with proxy_remote_dns = yes).
 *
 * Replies may come in any pieces. Failures are HV_EPROXY with socks_* details in
 * hv_conn_error() (socks_auth_failed, socks_host_unreachable, socks_connection_refused...);
 * a proxy that closes mid-way is proxy_closed_connection.
 */
#ifndef HARVESTD_CF_SOCKS_H
#define HARVESTD_CF_SOCKS_H

#include <stdint.h>

#include "harvestd/conn.h"
#include "harvestd/proxy.h"

/** Its argument: an hv_proxy_target_t (proxy.h) through an HV_PROXY_SOCKS5 or
 *  HV_PROXY_SOCKS5H proxy. */
extern const hv_cf_type_t hv_cf_socks;

#endif
