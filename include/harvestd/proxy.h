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
 * errors) as `shown`: its URL without the user information.
 *
 * The credentials may also come from a file (proxy_credentials_file), so that passwords need
 * not sit in the configuration: one entry a line,
 *
 *   HOST:PORT USER:PASSWORD    for the proxies at HOST:PORT (HOST as in the URLs: a name, an
 *                              IPv4 literal or a bracketed IPv6 literal; the port required)
 *   * USER:PASSWORD            for every proxy without an entry of its own
 *
 * the user and password percent-decoded as in the URLs; blank lines and lines starting with
 * '#' are left out. The line splits at its first run of blanks: the credentials are the rest
 * of it, without the blanks (and CR) that end it, so a password may hold a blank. A proxy
 * whose URL has its own user information keeps it. The configuration reads the file
 * (secretfile.h) and gives its text to hv_proxy_creds_parse(), then each proxy list to
 * hv_proxy_creds_apply(), then checks that every entry was used. Pure: no I/O.
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
    int has_auth;                 /* a user and a password are sent */
    int auth_from_file;           /* ... and came from the credentials file, not the URL */
    char user[HV_PROXY_CRED_MAX];
    char password[HV_PROXY_CRED_MAX];
    char shown[HV_PROXY_SHOWN_MAX]; /* "http://proxy.example:3128": no user information */
} hv_proxy_t;

/** Where a tunnel through `proxy` leads (the argument of the tunnel layers, cf_connect.h and
 *  cf_socks.h; read while the connection is made only). */
typedef struct {
    const hv_proxy_t *proxy;
    const char *host;        /* the target: a name or an IP literal (IPv6 without brackets) */
    int host_is_ip;
    uint16_t port;
} hv_proxy_target_t;

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

/** The list as the configuration would set it again, each URL masked ("none" for none);
 *  credentials from the file are not the URL's and are left out. */
int hv_proxy_list_format(const hv_proxy_list_t *l, char *out, size_t cap);

void hv_proxy_list_free(hv_proxy_list_t *l);

/** One entry of the credentials file. */
typedef struct {
    int any;                       /* "*": every proxy without an entry of its own */
    char host[HV_PROXY_HOST_MAX];  /* as hv_proxy_t's: lower case, IPv6 without brackets */
    int host_is_ip;
    uint16_t port;
    char user[HV_PROXY_CRED_MAX];
    char password[HV_PROXY_CRED_MAX];
    unsigned line;                 /* where it is in the file */
    unsigned matched;              /* proxies it matched (hv_proxy_creds_apply) */
} hv_proxy_cred_t;

/** The entries of a credentials file. Zeroed: none. */
typedef struct {
    unsigned count;
    hv_proxy_cred_t *cred; /* `count` entries (owned: hv_proxy_creds_free wipes them) */
} hv_proxy_creds_t;

/** The largest credentials file, and the most entries it may have. */
#define HV_PROXY_CREDS_FILE_MAX (64 * 1024)
#define HV_PROXY_CREDS_MAX 1024

/**
 * Parse the `len` bytes of `text`, the credentials file called `name`, into `out`.
 * 0, or -1 with a message in `err` that starts "NAME:LINE: " and never holds a password (a
 * user is shown as `USER:***`): a NUL byte, a line without credentials, a first field that is
 * neither HOST:PORT nor "*", credentials that are not USER:PASSWORD (percent-encoded, at most
 * HV_PROXY_CRED_MAX - 1 bytes each), a second entry for one HOST:PORT (or a second "*"), more
 * than HV_PROXY_CREDS_MAX entries; or "NAME: no entry" for a file with none. On failure `out` is
 * left as it was, and no copy of a password is left behind.
 */
int hv_proxy_creds_parse(const char *text, size_t len, const char *name, hv_proxy_creds_t *out,
                         char *err, size_t errcap);

/**
 * Give the entries of `c` to the proxies of `l`: each proxy matches the entry for its host
 * and port (a name's case aside, an IP literal by its address), else the "*" entry, and that
 * entry counts it (`matched`). A proxy with credentials of its URL keeps them; the others
 * take the entry's (`auth_from_file`), or none when no entry matches. Applying a file again
 * replaces what an earlier one gave.
 */
void hv_proxy_creds_apply(hv_proxy_creds_t *c, hv_proxy_list_t *l);

/** After hv_proxy_creds_apply() on every list: 0, or -1 for the first entry that matched no
 *  proxy, with "NAME:LINE: HOST:PORT matches no proxy of the configuration" in `err` (a typo
 *  there would otherwise send no credentials, unnoticed). */
int hv_proxy_creds_check(const hv_proxy_creds_t *c, const char *name, char *err, size_t errcap);

/** Wipe and free the entries. */
void hv_proxy_creds_free(hv_proxy_creds_t *c);

/** The "Basic ..." value of Proxy-Authorization for `p` (has_auth) into `out`; -1 if it does
 *  not fit. */
int hv_proxy_basic_auth(const hv_proxy_t *p, char *out, size_t cap);

#endif
