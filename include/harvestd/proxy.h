/*
 * proxy.h: the operator's proxies: `proxy = URL[, URL...]` (globally and per [host]
 * section), `proxy = none`, and `no_proxy`, parsed apart from the connections so that the
 * configuration can check them.
 *
 *   http://[USER:PASSWORD@]HOST[:PORT]     CONNECT for https URLs, absolute-form requests
 *                                          for http URLs; port 3128 unless given
 *   socks5://[USER:PASSWORD@]HOST[:PORT]   (RFC 1928/1929; the name resolved by harvestd)
 *   socks5h://[USER:PASSWORD@]HOST[:PORT]  (the name sent to the proxy); port 1080
 *
 * The user and password are percent-decoded. A proxy is shown (logs, records, metrics,
 * errors) as `shown`: its URL without the user information. Pure: no I/O.
 */
#ifndef HARVESTD_PROXY_H
#define HARVESTD_PROXY_H

#include <stddef.h>
#include <stdint.h>

#include "harvestd/guard.h"

typedef enum {
    HV_PROXY_HTTP = 0,
    HV_PROXY_SOCKS5,   /* harvestd resolves the target: the guard sees its address */
    HV_PROXY_SOCKS5H,  /* the proxy resolves the target: the guard sees only the proxy */
} hv_proxy_kind_t;

#define HV_PROXY_HOST_MAX 256
#define HV_PROXY_CRED_MAX 256
/* Longest `shown`: "socks5h://" + host (bracketed) + ":65535". */
#define HV_PROXY_SHOWN_MAX (16 + HV_PROXY_HOST_MAX + 8)
/* Proxies in one list. */
#define HV_PROXIES_MAX 64

typedef struct {
    hv_proxy_kind_t kind;
    char host[HV_PROXY_HOST_MAX]; /* name or IP literal (IPv6 without brackets) */
    int host_is_ip;
    uint16_t port;
    int has_auth;                 /* a user information was given */
    char user[HV_PROXY_CRED_MAX];
    char password[HV_PROXY_CRED_MAX];
    char shown[HV_PROXY_SHOWN_MAX]; /* "http://proxy.example:3128": no user information */
} hv_proxy_t;

/** A list of proxies, or "none" (go direct). Zeroed: not given. */
typedef struct {
    int given;      /* set by the operator (a [host] section's list replaces the global one) */
    unsigned count; /* 0 with `given`: proxy = none */
    hv_proxy_t *proxy; /* `count` entries (owned: hv_proxy_list_free) */
} hv_proxy_list_t;

/** `no_proxy`: names (each matching itself and its subdomains; a leading '.' is the same),
 *  address ranges (matching IP-literal hosts), or "*" (every host). */
#define HV_NO_PROXY_MAX 64
typedef struct {
    int all;
    unsigned nnames;
    char names[HV_NO_PROXY_MAX][256]; /* lower case, without the leading '.' */
    hv_allow_list_t ranges;
} hv_no_proxy_t;

/** Parse "host, .domain, 10.0.0.0/8, ..." ("" is an empty list) into `out`: 0, or -1 with the
 *  bad entry in `bad`. */
int hv_no_proxy_parse(const char *text, hv_no_proxy_t *out, char *bad, size_t badcap);

/** Whether `host` (lower case; an IP literal with `host_is_ip`) goes direct. */
int hv_no_proxy_match(const hv_no_proxy_t *np, const char *host, int host_is_ip);

/** Format the list as it parses back. 0, or -1 if `cap` is short. */
int hv_no_proxy_format(const hv_no_proxy_t *np, char *out, size_t cap);

/** Parse one proxy URL. 0, or -1 with the reason in `err`, which quotes the URL masked. */
int hv_proxy_parse(const char *text, hv_proxy_t *out, char *err, size_t errcap);

/** Parse "URL[, URL...]" or "none" into `out` (replacing what it held). 0, or -1 with `err`. */
int hv_proxy_list_parse(const char *text, hv_proxy_list_t *out, char *err, size_t errcap);

/** The list as the configuration would set it again, each URL masked ("none" for none). */
int hv_proxy_list_format(const hv_proxy_list_t *l, char *out, size_t cap);

void hv_proxy_list_free(hv_proxy_list_t *l);

/** The "Basic ..." value of Proxy-Authorization for `p` (has_auth) into `out`; -1 if it does
 *  not fit. */
int hv_proxy_basic_auth(const hv_proxy_t *p, char *out, size_t cap);

#endif
