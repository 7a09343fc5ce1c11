/*
 * config.h: every tunable of harvestd in one immutable struct, filled from the config file
 * and then from the command line by one directive table (config.c), whose types each have a
 * setter (text to field) and a formatter (field to text that sets it again).
 *
 * Each directive has one canonical name (`max_bytes`); on the command line it is spelled
 * `--max-bytes VALUE` or `--max-bytes=VALUE`. Sizes take k/m/g suffixes (powers of 1024),
 * durations take ms/s/m/h suffixes; a bare number is in the unit the directive names.
 */
#ifndef HARVESTD_CONFIG_H
#define HARVESTD_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "harvestd/extract.h"
#include "harvestd/guard.h"
#include "harvestd/log.h"
#include "harvestd/proxy.h"

/** One configured request header, `header = Name: value` (README, "Request headers"). */
typedef struct {
    char *name;
    char *value; /* "": not sent, nor a default or global header of that name */
    int line;    /* where it was set: >0 line of config_file, -1 command line */
} hv_conf_header_t;

#define HV_HEADERS_MAX 32                /* headers of one scope: global, or one [host] */
#define HV_HEADERS_BYTES_MAX (16 * 1024) /* ... and their "Name: value\r\n" bytes together */

/** The headers of one scope in the order given, one per name (case-insensitive). */
typedef struct {
    unsigned n;
    size_t bytes;
    hv_conf_header_t h[HV_HEADERS_MAX];
} hv_headers_t;

/** Per-host overrides from a [host "NAME"] section ("*.example.org": any subdomain). */
typedef struct {
    char name[256];
    hv_headers_t *headers; /* the section's request headers; NULL: none */
    unsigned per_host;
    int per_host_set;
    uint64_t delay_ms;
    int delay_set;
    double jitter;
    int jitter_set;
    int block_detection;
    int block_detection_set;
    int http2_prior_knowledge;
    int http2_prior_knowledge_set;
    hv_proxy_list_t proxy;  /* given: the host's own list (or none) */
} hv_host_rule_t;

/** Where the daemon takes work from (a set). */
enum { HV_SOURCE_SPOOL = 1, HV_SOURCE_REDIS = 2 };

/** Whether pages are fetched again conditionally (recrawl.h). */
typedef enum { HV_RECRAWL_OFF, HV_RECRAWL_CONDITIONAL } hv_recrawl_mode_t;

/** How a proxy is chosen among several (proxy_rotation). */
typedef enum { HV_ROTATE_HOST, HV_ROTATE_REQUEST } hv_rotation_t;

/** Whether TLS connections offer HTTP/2 (http2). */
typedef enum { HV_HTTP2_OFF, HV_HTTP2_AUTO } hv_http2_t;

/** When batch outputs are fsynced (the daemon's; --once syncs once, at the end). */
typedef enum { HV_FSYNC_NEVER, HV_FSYNC_INTERVAL, HV_FSYNC_ALWAYS } hv_fsync_t;

#define HV_HOST_RULES_MAX 128
#define HV_RULESETS_MAX 32

typedef struct {
    /* run mode */
    const char *input_path;   /* --once FILE */
    const char *output_path;  /* -o FILE, "-" for stdout */

    /* concurrency and queues */
    unsigned concurrency;       /* requests in flight, all hosts */
    unsigned per_host;          /* requests in flight per scheme+host+port */
    unsigned queue_size;        /* jobs waiting for a slot before the reader pauses */
    unsigned page_queue;        /* downloaded pages waiting for a parser */
    uint64_t page_queue_bytes;  /* ... and their bytes */
    unsigned result_queue;      /* finished records waiting for the writer */
    unsigned parse_jobs;        /* parses in flight on the threadpool; 0 = number of CPUs */
    int title_fast_path;        /* parse only up to </title> when that settles the title */

    /* HTTP */
    uint64_t max_bytes;         /* decoded body limit */
    uint64_t max_header_bytes;  /* status line + headers */
    unsigned max_redirects;
    char user_agent[256];
    uint64_t connect_timeout_ms; /* DNS + TCP connect */
    uint64_t read_timeout_ms;    /* longest silence while waiting for response bytes */
    uint64_t total_timeout_ms;   /* whole request, redirects included */
    uint64_t keepalive_timeout_ms; /* idle pooled connections are closed after this */
    uint64_t dns_ttl_ms;
    char ca_file[1024];         /* PEM trust store; empty: the system bundle */
    int insecure;               /* no certificate verification */
    hv_allow_list_t allow_addresses; /* ranges the address guard lets through */
    unsigned tls_workers;       /* crypto worker threads for handshakes; 0 = number of CPUs */
    hv_http2_t http2;           /* TLS connections offer ALPN h2 */
    int http2_prior_knowledge;  /* http URLs go over cleartext h2 (h2c) */
    uint64_t http2_window;      /* each HTTP/2 stream's receive window */
    int allow_private_addresses; /* the address guard is off */

    /* politeness */
    uint64_t host_delay_ms;      /* least time between request starts on one host */
    double host_delay_jitter;    /* random extra delay, up to this fraction of it */
    int adaptive;                /* AIMD per-host concurrency and delay */
    int obey_robots;             /* fetch and obey robots.txt */
    int block_detection;         /* watch hosts for block pages (block.h) */
    unsigned block_same_body;    /* distinct URLs with one body that make a host suspect */
    uint64_t block_probe_delay_ms;     /* pause before a suspect host's probe */
    uint64_t block_probe_max_delay_ms; /* a blocked host's re-probes: the longest pause */
    int record_digest;           /* records carry body_digest */

    /* proxies */
    hv_proxy_list_t proxy;       /* given with count 0: none (direct) */
    char proxy_credentials_file[1024]; /* credentials for proxies without their own; empty: none */
    hv_no_proxy_t no_proxy;
    hv_rotation_t proxy_rotation;
    int proxy_remote_dns;        /* socks5h allowed (the guard cannot see its targets) */
    unsigned proxy_connections;  /* most connections open through one proxy; 0: no cap */
    uint64_t robots_ttl_ms;
    uint64_t robots_max_bytes;
    hv_host_rule_t host_rules[HV_HOST_RULES_MAX];
    unsigned nhost_rules;
    hv_headers_t *headers;       /* request headers for every host; NULL: none */

    /* extraction */
    hv_ruleset_t *rulesets[HV_RULESETS_MAX]; /* [rules "NAME"] sections; "" = command line */
    unsigned nrulesets;
    char default_rules[64];      /* the set a batch uses when it names none */

    /* retries */
    unsigned retries;            /* further attempts after a transient failure */
    uint64_t retry_base_ms;      /* backoff: base x 2^(attempt-1), plus jitter */
    uint64_t retry_max_ms;       /* cap of one backoff delay */
    uint64_t retry_after_max_ms; /* a longer Retry-After fails the URL at once */
    unsigned char retry_status[600]; /* HTTP statuses worth retrying */

    /* output and shutdown */
    uint64_t flush_ms;          /* a completed record reaches the kernel within this */
    uint64_t drain_timeout_ms;  /* in-flight requests get this long after SIGINT/SIGTERM */
    hv_fsync_t fsync;
    uint64_t fsync_interval_ms;

    /* the spool daemon */
    char spool_dir[1024];
    unsigned max_active_batches;
    uint64_t rescan_interval_ms;
    uint64_t progress_interval_ms; /* a batch_progress log line per running batch; 0: none */

    /* the daemon's sources; the Redis stream (stream.h) */
    unsigned sources;            /* HV_SOURCE_* bits */
    char redis_url[1024];        /* redis://[[USER]:PASSWORD@]HOST[:PORT][/DB] */
    char redis_password_file[1024]; /* the password, instead of redis_url's; empty: none */
    char redis_stream[256];
    char redis_group[256];
    char redis_consumer[256];    /* empty: HOSTNAME:SPOOL_DIR */
    uint64_t redis_claim_idle_ms; /* entries idle this long are taken over by a live daemon */
    unsigned redis_max_deliveries; /* an entry delivered more often is poisoned (dead letter) */

    /* re-crawling (recrawl.h) and its store (store.h) */
    hv_recrawl_mode_t recrawl;
    char state_dir[1024];        /* empty: SPOOL_DIR/state (the daemon) */
    uint64_t state_max_bytes;
    uint64_t recrawl_min_age_ms; /* younger stored records answer without a request */

    /* where each directive was last set: 0 default, >0 line of config_file, -1 command line */
    int origin[96];
    char config_file[1024];

    char metrics_listen[128];   /* "127.0.0.1:9464"; empty: no endpoint */
    hv_log_level_t log_level;
} hv_config_t;

/** Fill `cfg` with the documented defaults. */
void hv_config_defaults(hv_config_t *cfg);

/**
 * Set directive `name` (canonical, '_' or '-' separated) from text `value`. On error returns
 * UV_EINVAL / UV_ENOENT (unknown directive) / UV_ERANGE and writes a message without the
 * source location into `err` (e.g. "max_bytes: '12q' is not a size (use k, m or g)").
 */
int hv_config_set(hv_config_t *cfg, const char *name, const char *value, char *err, size_t errcap);

/**
 * Read an INI config file: `key = value` lines (directives as above), `#` or `;` comment
 * lines, and a comment after a value from a `#` with a blank before it and a blank or the
 * line's end after it, or from a `;` after a blank (other `#` are the value's). Errors name
 * the file and line: unknown keys, bad values, over-long lines (never silently truncated), a
 * key set twice in one section or at the top (but `header`), with the line of the first.
 * Returns 0, or UV_EINVAL with the message in `err`.
 */
int hv_config_load_file(hv_config_t *cfg, const char *path, char *err, size_t errcap);

/** The effective per_host, host_delay and jitter for host name `host`: a [host] section that
 * names it exactly, else one whose "*.suffix" matches, else the global values. */
void hv_config_host_policy(const hv_config_t *cfg, const char *host, unsigned *per_host,
                           uint64_t *delay_ms, double *jitter);

/** The proxies for requests to `host` (a name, or an IP literal with `host_is_ip`): its
 *  [host] section's `proxy` (exact name, else the longest "*.suffix"), else the global one;
 *  NULL when it goes direct (none given, `proxy = none`, or no_proxy matches it). */
const hv_proxy_list_t *hv_config_host_proxies(const hv_config_t *cfg, const char *host,
                                               int host_is_ip);

/** Whether block detection watches host name `host`: its [host] section's block_detection
 *  (exact name, else the longest "*.suffix"), else the global one. */
/** Whether http URLs of `host` go over cleartext HTTP/2 (http2_prior_knowledge). */
int hv_config_host_h2c(const hv_config_t *cfg, const char *host);

int hv_config_host_block_detection(const hv_config_t *cfg, const char *host);

/** "file:line" or "command line" or "default" for where `name` got its value. */
void hv_config_where(const hv_config_t *cfg, const char *name, char *out, size_t cap);

/** Whether `name` was set explicitly (file or command line). */
int hv_config_is_set(const hv_config_t *cfg, const char *name);

/** Whether `name` was set on the command line. */
int hv_config_from_cli(const hv_config_t *cfg, const char *name);

/** Mark `name` as set from the command line (after a successful hv_config_set). */
void hv_config_mark_cli(hv_config_t *cfg, const char *name);

/**
 * Add request header `text` ("Name: value", checked by hv_http_field_check()) to the [host]
 * section `host`, or to the global ones for NULL; `line` is where it was set (>0 line of
 * config_file, -1 the command line). The command line's replaces a file's of the same name
 * in the same scope; a name given twice in the file (or twice on the command line) is an
 * error. At most HV_HEADERS_MAX headers and HV_HEADERS_BYTES_MAX bytes per scope. 0, or
 * UV_EINVAL with a message that never quotes the value.
 */
int hv_config_add_header(hv_config_t *cfg, const char *host, const char *text, int line,
                         char *err, size_t errcap);

/**
 * The request headers of a request to host name `host`, into `out` (room for
 * 2 * HV_HEADERS_MAX): the global ones, each replaced by the header of the same name of the
 * [host] section that applies to `host` (exact name, else the longest "*.suffix"), then that
 * section's others. Without `global_credentials` the global Authorization and Cookie are left
 * out (a redirect took the request away from its first origin: fetch.c). Empty values are
 * included: they stand for "not sent". Returns the count; the entries stay valid as long as
 * `cfg`.
 */
size_t hv_config_request_headers(const hv_config_t *cfg, const char *host,
                                 int global_credentials, const hv_conf_header_t **out);

/** `--check-config`'s list of the request headers, as config lines with where each was set;
 *  a secret's value (hv_http_field_secret) is shown as ***. Nothing when there are none. */
void hv_config_print_headers(const hv_config_t *cfg, FILE *out);

/** Add one extraction rule to the set `set` ("" for the command line's). 0 or UV_EINVAL. */
int hv_config_add_rule(hv_config_t *cfg, const char *set, const char *key, const char *value,
                       char *err, size_t errcap);

/** The rule set called `name` (NULL for none or unknown). */
const hv_ruleset_t *hv_config_ruleset(const hv_config_t *cfg, const char *name);

/** Release what the configuration allocated (rule sets, request headers). */
void hv_config_free(hv_config_t *cfg);

/** Whether directive `name` is a yes/no switch (on the command line it takes no value). */
int hv_config_is_flag(const char *name);

/** Resolve derived defaults (parse_jobs = CPUs) and cross-checks; read the files the
 *  configuration names that must be right before the start (proxy_credentials_file, whose
 *  entries it gives to the proxies; redis_password_file): 0 or UV_EINVAL + `err`, which
 *  names the directive, where it was set and the file. */
int hv_config_finish(hv_config_t *cfg, char *err, size_t errcap);

/** The daemon's look at the system before it opens anything (and `--check-config`'s): its
 *  spool_dir exists (the daemon creates its subdirectories, not the spool itself). 0, or a
 *  UV_E* error with a message naming where spool_dir was set (the file and line; or that it
 *  is not set and its default is missing) and why. Nothing for --once. */
int hv_config_check_system(const hv_config_t *cfg, char *err, size_t errcap);

/**
 * Write directive `name`'s value in `cfg` as text that hv_config_set() reads back to the same
 * value: sizes in the largest of k, m, g that divides them, durations in h or s where they
 * divide (ms for the directives whose bare number is ms), status sets in ascending order.
 * Returns 0, UV_ENOENT (unknown directive) or UV_ENOBUFS (`out` cut at `cap`).
 */
int hv_config_format(const hv_config_t *cfg, const char *name, char *out, size_t cap);

/** The canonical name of the directive at `i` in table order, or NULL past the last one. */
const char *hv_config_directive_name(size_t i);

/** What the manual says of a directive (hv_config_describe()). */
typedef struct {
    const char *name;   /* canonical: snake_case */
    const char *help;   /* its meaning, as --help shows it */
    const char *value;  /* the word that stands for its value: N, SIZE, DURATION, yes|no... */
    char values[192];   /* what its values are, with the range of a number, size or duration;
                           "" when the meaning lists them */
    char def[2048];     /* its default as hv_config_format() writes it; "" for none */
} hv_config_doc_t;

/** Describe the directive at `i` in table order into `doc`: 0, or UV_ENOENT past the last. */
int hv_config_describe(size_t i, hv_config_doc_t *doc);

/** The key at `i` that a [host "NAME"] section takes (in order; "header" last), or NULL past
 *  the last one. */
const char *hv_config_host_key(size_t i);

/** Print every directive with its default (through hv_config_format) and meaning (--help). */
void hv_config_print_help(FILE *out);

/* Parsers shared with other modules and tests. */
int hv_parse_size(const char *s, uint64_t *out);
int hv_parse_duration_ms(const char *s, uint64_t bare_unit_ms, uint64_t *out);
int hv_parse_uint(const char *s, uint64_t *out);

#endif
