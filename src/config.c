/*
 * config.c: the directive table. One row per tunable names its type, its field in
 * hv_config_t, its range, its default and its help text. One row per type knows how text
 * becomes such a field (and what to say when it cannot) and how the field becomes text
 * again. hv_config_set() is a lookup in the first table plus a call through the second, and
 * --help shows the defaults through the formatters, so a new option is one row here plus a
 * field in hv_config_t.
 *
 * The sections a file may have ([host "NAME"], [rules "NAME"]) have a table of their own
 * below: each kind, the keys it accepts and the function that stores them.
 */
#include "harvestd/config.h"

#include <arpa/inet.h>
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include <ini.h>
#include <uthash.h>

#include "harvestd/common.h"
#include "harvestd/http.h"
#include "harvestd/redisurl.h"
#include "harvestd/secretfile.h"
#include "harvestd/streamkeys.h"

typedef enum {
    T_UINT,
    T_SIZE,
    T_DURATION,
    T_STRING,
    T_LEVEL,
    T_BOOL,
    T_PATH,
    T_FSYNC,
    T_STATUSES,
    T_FRACTION,
    T_ADDRESSES,
    T_SOURCES,
    T_RECRAWL,
    T_PROXIES,
    T_NO_PROXY,
    T_ROTATION,
    T_HTTP2
} dtype_t;

typedef struct {
    const char *name;
    dtype_t type;
    size_t offset;
    size_t width;     /* sizeof the field (unsigned or uint64_t; string capacity) */
    uint64_t min, max;
    uint64_t unit_ms; /* T_DURATION: unit of a bare number */
    const char *def;  /* default, as text (as its type's formatter writes it) */
    const char *help;
} directive_t;

/*
 * What a type knows. `set` reads `value` into `field`, or leaves the field as it was and
 * returns UV_EINVAL or UV_ERANGE with a message that names the directive. `format` writes
 * text that `set` reads back to the same value: 0, or UV_ENOBUFS if `cap` cut it. `value` is
 * the word the manual writes for a value of the type, `what` says what such a value is (NULL
 * when each directive's help lists its words).
 */
typedef struct {
    int (*set)(const directive_t *d, void *field, const char *value, char *err, size_t errcap);
    int (*format)(const directive_t *d, const void *field, char *out, size_t cap);
    const char *value;
    const char *what;
} type_ops_t;

#define F(field) offsetof(hv_config_t, field), sizeof(((hv_config_t *)0)->field)
#define MIB (UINT64_C(1) << 20)
#define HOUR_MS UINT64_C(3600000)

static const directive_t directives[] = {
    {"concurrency", T_UINT, F(concurrency), 1, 10000, 0, "32",
     "requests in flight across all hosts"},
    {"per_host", T_UINT, F(per_host), 1, 1000, 0, "4",
     "requests in flight to one scheme+host+port"},
    {"queue_size", T_UINT, F(queue_size), 1, 1000000, 0, "1024",
     "URLs waiting for a request slot; the input is read no further while it is full"},
    {"page_queue", T_UINT, F(page_queue), 1, 100000, 0, "256",
     "downloaded pages waiting for a parser; connections stop reading while it is full"},
    {"page_queue_bytes", T_SIZE, F(page_queue_bytes), 1, 64 * 1024 * MIB, 0, "4m",
     "bytes of downloaded pages waiting for a parser (full at or above this)"},
    {"result_queue", T_UINT, F(result_queue), 1, 1000000, 0, "256",
     "finished records waiting for the writer; parsing and downloads pause while it is full"},
    {"parse_jobs", T_UINT, F(parse_jobs), 0, 256, 0, "0",
     "parses in flight on the threadpool (0: one per CPU)"},
    {"title_fast_path", T_BOOL, F(title_fast_path), 0, 1, 0, "yes",
     "parse only the start of a page, up to </title>, when that settles its title exactly"},
    {"max_bytes", T_SIZE, F(max_bytes), 1024, 1024 * MIB, 0, "2m",
     "largest decoded response body; larger pages fail with PageTooLarge"},
    {"max_header_bytes", T_SIZE, F(max_header_bytes), 1024, 16 * MIB, 0, "64k",
     "largest response head (status line and headers)"},
    {"max_redirects", T_UINT, F(max_redirects), 0, 100, 0, "10", "redirects followed per URL"},
    {"user_agent", T_STRING, F(user_agent), 0, 0, 0, "harvestd/" HV_VERSION,
     "User-Agent request header"},
    {"connect_timeout", T_DURATION, F(connect_timeout_ms), 1, HOUR_MS, 1000, "5s",
     "DNS lookup plus TCP connect"},
    {"read_timeout", T_DURATION, F(read_timeout_ms), 1, HOUR_MS, 1000, "15s",
     "longest silence while a response is expected"},
    {"total_timeout", T_DURATION, F(total_timeout_ms), 1, 24 * HOUR_MS, 1000, "30s",
     "whole request, redirects included"},
    {"keepalive_timeout", T_DURATION, F(keepalive_timeout_ms), 1, HOUR_MS, 1000, "10s",
     "idle pooled connections are closed after this"},
    {"dns_ttl", T_DURATION, F(dns_ttl_ms), 0, 24 * HOUR_MS, 1000, "60s",
     "how long a resolved host name is reused"},
    {"host_delay", T_DURATION, F(host_delay_ms), 0, HOUR_MS, 1, "0ms",
     "least time between two request starts on one host (a [host \"NAME\"] section can "
     "override it, and per_host, for one host)"},
    {"host_delay_jitter", T_FRACTION, F(host_delay_jitter), 0, 1, 0, "0",
     "random extra time after host_delay, up to this fraction of it (0.2: up to 20% more)"},
    {"adaptive", T_BOOL, F(adaptive), 0, 1, 0, "no",
     "slow down for a host that answers 429/503 or gets slower (halve its concurrency, "
     "double its delay), speed up again gradually on success"},
    {"obey_robots", T_BOOL, F(obey_robots), 0, 1, 0, "no",
     "fetch /robots.txt before the first request to a host and obey it (RFC 9309)"},
    {"robots_ttl", T_DURATION, F(robots_ttl_ms), 1000, 30 * 24 * HOUR_MS, 1000, "24h",
     "how long a host's robots.txt is reused"},
    {"robots_max_bytes", T_SIZE, F(robots_max_bytes), 1024, 16 * MIB, 0, "500k",
     "largest robots.txt read (the rest is ignored)"},
    {"block_detection", T_BOOL, F(block_detection), 0, 1, 0, "yes",
     "watch each host for block pages (one body for many URLs, bursts of 403/429, pages that "
     "shrink); a blocked host's pages fail with Blocked instead of being written ok"},
    {"block_same_body", T_UINT, F(block_same_body), 2, 8, 0, "3",
     "distinct URLs of one host answering with one body that make it suspect"},
    {"block_probe_delay", T_DURATION, F(block_probe_delay_ms), 100, HOUR_MS, 1000, "5s",
     "pause before a suspect host is probed, and before a blocked host's first re-probe"},
    {"block_probe_max_delay", T_DURATION, F(block_probe_max_delay_ms), 100, 24 * HOUR_MS, 1000,
     "10m", "a blocked host is probed again after a pause that doubles up to this"},
    {"record_digest", T_BOOL, F(record_digest), 0, 1, 0, "no",
     "records of parsed pages carry body_digest, 16 hex digits of their decoded body's XXH3-64"},
    {"tls_workers", T_UINT, F(tls_workers), 0, 256, 0, "0",
     "threads that run TLS handshakes' public-key work off the event loop (0: one per CPU)"},
    {"http2", T_HTTP2, F(http2), 0, 0, 0, "auto",
     "auto: TLS connections offer HTTP/2 (ALPN h2, then http/1.1) and one connection carries "
     "a host's requests as streams; off: HTTP/1.1 only"},
    {"http2_prior_knowledge", T_BOOL, F(http2_prior_knowledge), 0, 1, 0, "no",
     "http:// URLs go over cleartext HTTP/2 (h2c) without asking, to servers known to speak "
     "it (usually set in a [host \"NAME\"] section)"},
    {"http2_window", T_SIZE, F(http2_window), 16 * 1024, 16 * MIB, 0, "256k",
     "each HTTP/2 stream's receive window: what a server may send on it before harvestd has "
     "taken the data (while the page queue is full, streams x this is what a connection holds)"},
    {"proxy", T_PROXIES, F(proxy), 0, 0, 0, "",
     "requests go through these proxies, comma-separated: http://[USER:PASSWORD@]HOST[:PORT] "
     "(CONNECT for https URLs), socks5:// or socks5h://...; none or empty: direct (a "
     "[host \"NAME\"] section may set its own, or none)"},
    {"proxy_credentials_file", T_PATH, F(proxy_credentials_file), 0, 0, 0, "",
     "credentials for the proxies whose URL has none, from a file its owner alone may read: "
     "a line each, HOST:PORT USER:PASSWORD (percent-encoded), or * USER:PASSWORD for the "
     "others; empty: none"},
    {"no_proxy", T_NO_PROXY, F(no_proxy), 0, 0, 0, "",
     "hosts that go direct whatever proxy says: names (with their subdomains), .domains, "
     "address ranges, or *"},
    {"proxy_remote_dns", T_BOOL, F(proxy_remote_dns), 0, 1, 0, "no",
     "allow socks5h:// proxies, which resolve the target's name themselves: the address "
     "guard sees only the proxy then"},
    {"proxy_rotation", T_ROTATION, F(proxy_rotation), 0, 0, 0, "host",
     "with several proxies: host (each host keeps one proxy while it works, so connections "
     "are reused) or request (a proxy per request, reusing that pair's idle connections)"},
    {"proxy_connections", T_UINT, F(proxy_connections), 0, 100000, 0, "0",
     "most connections open through one proxy at a time, in use and idle (requests beyond "
     "them wait their turn); 0: no cap but concurrency"},
    {"retries", T_UINT, F(retries), 0, 20, 0, "3",
     "further attempts after a transient failure (429/5xx in retry_statuses, connect errors, "
     "resets, timeouts)"},
    {"retry_base", T_DURATION, F(retry_base_ms), 1, HOUR_MS, 1, "1000ms",
     "first backoff delay; each retry doubles it, plus up to as much again in random jitter"},
    {"retry_max", T_DURATION, F(retry_max_ms), 1, 24 * HOUR_MS, 1, "60000ms",
     "longest backoff delay"},
    {"retry_after_max", T_DURATION, F(retry_after_max_ms), 0, 24 * HOUR_MS, 1000, "300s",
     "a Retry-After (on 429/503) longer than this fails the URL at once"},
    {"retry_statuses", T_STATUSES, F(retry_status), 0, 0, 0, "429,500,502,503,504",
     "HTTP statuses worth retrying (comma-separated)"},
    {"flush_ms", T_DURATION, F(flush_ms), 0, HOUR_MS, 1, "200ms",
     "a completed record is written within this delay"},
    {"drain_timeout", T_DURATION, F(drain_timeout_ms), 0, HOUR_MS, 1000, "20s",
     "after SIGINT/SIGTERM, in-flight requests get this long to finish (--once: 5s)"},
    {"fsync", T_FSYNC, F(fsync), 0, 0, 0, "interval",
     "when outputs are fsynced: never, interval or always (daemon; --once syncs at the end)"},
    {"fsync_interval", T_DURATION, F(fsync_interval_ms), 1, HOUR_MS, 1, "1000ms",
     "with fsync = interval, the longest time written records stay unsynced"},
    {"spool_dir", T_PATH, F(spool_dir), 0, 0, 0, "/var/spool/harvestd",
     "the daemon's spool: incoming/, active/, done/, rejected/, out/"},
    {"max_active_batches", T_UINT, F(max_active_batches), 1, 1000, 0, "4",
     "spool files processed at once (they share the concurrency limits fairly)"},
    {"rescan_interval", T_DURATION, F(rescan_interval_ms), 100, HOUR_MS, 1000, "5s",
     "the spool is rescanned this often in case a file-system event was missed"},
    {"progress_interval", T_DURATION, F(progress_interval_ms), 0, 24 * HOUR_MS, 1000, "60s",
     "the daemon logs each running batch's progress (event=batch_progress) this often; 0: "
     "never"},
    {"source", T_SOURCES, F(sources), 0, 0, 0, "spool",
     "where the daemon takes work from: spool, redis, or both (spool, redis)"},
    {"redis_url", T_PATH, F(redis_url), 0, 0, 0, "",
     "with source = redis: the server, redis://[[USER]:PASSWORD@]HOST[:PORT][/DB] "
     "(rediss:// for TLS)"},
    {"redis_password_file", T_PATH, F(redis_password_file), 0, 0, 0, "",
     "with source = redis: a file holding the password (one line; readable by its owner "
     "only), used instead of one in redis_url; empty: none"},
    {"redis_stream", T_PATH, F(redis_stream), 0, 0, 0, HV_STREAM_DEFAULT,
     "the stream the daemon consumes (harvestd enqueue adds to it)"},
    {"redis_group", T_PATH, F(redis_group), 0, 0, 0, HV_STREAM_GROUP_DEFAULT,
     "the consumer group the daemons share (created when missing)"},
    {"redis_consumer", T_PATH, F(redis_consumer), 0, 0, 0, "",
     "this daemon's consumer name, the same across its restarts; empty: HOSTNAME:SPOOL_DIR"},
    {"redis_claim_idle", T_DURATION, F(redis_claim_idle_ms), 1000, 24 * HOUR_MS, 1000, "60s",
     "entries another consumer has held this long without a sign of life are taken over"},
    {"redis_max_deliveries", T_UINT, F(redis_max_deliveries), 1, 1000, 0, "5",
     "an entry delivered more often than this (its daemons died on it) gets a Poisoned record "
     "and goes to the dead letters"},
    {"recrawl", T_RECRAWL, F(recrawl), 0, 0, 0, "off",
     "off, or conditional: remember each URL's last ok record and validators, and ask the "
     "server whether the page changed (If-None-Match, If-Modified-Since)"},
    {"state_dir", T_PATH, F(state_dir), 0, 0, 0, "",
     "the re-crawling store (an LMDB environment); empty: SPOOL_DIR/state (the daemon; "
     "--once needs --state-dir)"},
    {"state_max_bytes", T_SIZE, F(state_max_bytes), MIB, UINT64_C(1) << 40, 0, "1g",
     "the store's bound: when full it stops storing (a warning) and pages are still fetched"},
    {"recrawl_min_age", T_DURATION, F(recrawl_min_age_ms), 0, 365 * 24 * HOUR_MS, 1000, "0s",
     "a URL whose stored record is younger than this is answered from the store without a "
     "request (from_cache); 0: always ask the server"},
    {"ca_file", T_PATH, F(ca_file), 0, 0, 0, "",
     "PEM file of trusted CA certificates, for https and rediss (empty: "
     "/etc/ssl/certs/ca-certificates.crt)"},
    {"insecure", T_BOOL, F(insecure), 0, 1, 0, "no",
     "do not verify TLS certificates, of https and rediss (never do this in production)"},
    {"allow_addresses", T_ADDRESSES, F(allow_addresses), 0, 0, 0, "",
     "address ranges connections may reach although the address guard refuses them "
     "(comma-separated CIDRs: 127.0.0.1/32, fd00::/8); empty: none"},
    {"allow_private_addresses", T_BOOL, F(allow_private_addresses), 0, 1, 0, "no",
     "turn the address guard off: connect to loopback, private, link-local... addresses too"},
    {"default_rules", T_PATH, F(default_rules), 0, 0, 0, "",
     "the [rules \"NAME\"] set a batch uses when it names none (a spool file names one on its "
     "first line: #! rules=NAME); empty: title only"},
    {"metrics_listen", T_PATH, F(metrics_listen), 0, 0, 0, "",
     "ADDRESS:PORT of the Prometheus endpoint (GET /metrics): 127.0.0.1:9464, [::1]:9464, or "
     "localhost:9464 (127.0.0.1, never looked up); empty: off"},
    {"log_level", T_LEVEL, F(log_level), 0, 0, 0, "notice",
     "debug, info, notice, warning or error"},
};

int hv_parse_uint(const char *s, uint64_t *out)
{
    if (*s < '0' || *s > '9')
        return UV_EINVAL;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno == ERANGE)
        return UV_ERANGE;
    if (*end != '\0')
        return UV_EINVAL;
    *out = v;
    return 0;
}

/* A number followed by an optional unit; multiplies with overflow checks. */
static int parse_scaled(const char *s, const char *const *units, const uint64_t *scale,
                        size_t nunits, uint64_t bare, uint64_t *out)
{
    if (*s < '0' || *s > '9')
        return UV_EINVAL;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno == ERANGE)
        return UV_ERANGE;
    uint64_t mult = 0;
    if (*end == '\0') {
        mult = bare;
    } else {
        for (size_t i = 0; i < nunits; i++)
            if (strcasecmp(end, units[i]) == 0)
                mult = scale[i];
    }
    if (mult == 0)
        return UV_EINVAL;
    if (v > UINT64_MAX / mult)
        return UV_ERANGE;
    *out = v * mult;
    return 0;
}

int hv_parse_size(const char *s, uint64_t *out)
{
    static const char *const units[] = {"b", "k", "kb", "kib", "m", "mb", "mib", "g", "gb", "gib"};
    static const uint64_t scale[] = {1, 1 << 10, 1 << 10, 1 << 10, 1 << 20, 1 << 20, 1 << 20,
                                     1 << 30, 1 << 30, 1 << 30};
    return parse_scaled(s, units, scale, HV_ARRAY_SIZE(units), 1, out);
}

int hv_parse_duration_ms(const char *s, uint64_t bare_unit_ms, uint64_t *out)
{
    static const char *const units[] = {"ms", "s", "m", "h"};
    static const uint64_t scale[] = {1, 1000, 60000, 3600000};
    return parse_scaled(s, units, scale, HV_ARRAY_SIZE(units), bare_unit_ms, out);
}

/* Append to `buf` (holding *len bytes) without overflowing: 0, or UV_ENOBUFS once cut. */
__attribute__((format(printf, 4, 5))) static int appendf(char *buf, size_t cap, size_t *len,
                                                         const char *fmt, ...)
{
    if (*len >= cap)
        return UV_ENOBUFS;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *len, cap - *len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= cap - *len) {
        *len = cap;
        return UV_ENOBUFS;
    }
    *len += (size_t)n;
    return 0;
}

/* ---- the types: one setter and one formatter each ---- */

static uint64_t load_uint(const void *field, size_t width)
{
    return width == sizeof(uint64_t) ? *(const uint64_t *)field : *(const unsigned *)field;
}

/* The numeric types share their range check and their store. */
static int store_in_range(const directive_t *d, void *field, const char *value, uint64_t v,
                          char *err, size_t errcap)
{
    if (v < d->min || v > d->max) {
        char range[96];
        if (d->type == T_DURATION)
            snprintf(range, sizeof(range), "%" PRIu64 "ms..%" PRIu64 "ms", d->min, d->max);
        else
            snprintf(range, sizeof(range), "%" PRIu64 "..%" PRIu64, d->min, d->max);
        return hv_errf(err, errcap, UV_ERANGE, "%s: '%s' is out of range (%s)", d->name, value,
                         range);
    }
    if (d->width == sizeof(uint64_t))
        *(uint64_t *)field = v;
    else
        *(unsigned *)field = (unsigned)v;
    return 0;
}

static int set_uint(const directive_t *d, void *field, const char *value, char *err,
                    size_t errcap)
{
    uint64_t v;
    int rc = hv_parse_uint(value, &v);
    if (rc != 0)
        return hv_errf(err, errcap, rc, "%s: '%s' is not a whole number", d->name, value);
    return store_in_range(d, field, value, v, err, errcap);
}

static int format_uint(const directive_t *d, const void *field, char *out, size_t cap)
{
    size_t n = 0;
    return appendf(out, cap, &n, "%" PRIu64, load_uint(field, d->width));
}

static int set_size(const directive_t *d, void *field, const char *value, char *err,
                    size_t errcap)
{
    uint64_t v;
    int rc = hv_parse_size(value, &v);
    if (rc != 0)
        return hv_errf(err, errcap, rc, "%s: '%s' is not a size (a number with k, m or g)",
                         d->name, value);
    return store_in_range(d, field, value, v, err, errcap);
}

/* In the largest unit that divides the size exactly: 64k, 2m, 1536. */
static int format_size(const directive_t *d, const void *field, char *out, size_t cap)
{
    static const char units[] = "gmk";
    uint64_t v = load_uint(field, d->width);
    size_t n = 0;
    for (int i = 0; i < 3; i++) {
        uint64_t scale = UINT64_C(1) << (10 * (3 - i));
        if (v != 0 && v % scale == 0)
            return appendf(out, cap, &n, "%" PRIu64 "%c", v / scale, units[i]);
    }
    return appendf(out, cap, &n, "%" PRIu64, v);
}

static int set_duration(const directive_t *d, void *field, const char *value, char *err,
                        size_t errcap)
{
    uint64_t v;
    int rc = hv_parse_duration_ms(value, d->unit_ms, &v);
    if (rc != 0)
        return hv_errf(err, errcap, rc,
                         "%s: '%s' is not a duration (a number with ms, s, m or h)", d->name,
                         value);
    return store_in_range(d, field, value, v, err, errcap);
}

/* A directive whose bare number means milliseconds is shown in ms (flush_ms = 200ms); the
 * others in whole hours or seconds where they can be. Never in minutes: "1m" reads like a
 * size. */
static int format_duration(const directive_t *d, const void *field, char *out, size_t cap)
{
    uint64_t v = load_uint(field, d->width);
    size_t n = 0;
    if (d->unit_ms >= 1000 && v != 0 && v % HOUR_MS == 0)
        return appendf(out, cap, &n, "%" PRIu64 "h", v / HOUR_MS);
    if (d->unit_ms >= 1000 && v % 1000 == 0)
        return appendf(out, cap, &n, "%" PRIu64 "s", v / 1000);
    return appendf(out, cap, &n, "%" PRIu64 "ms", v);
}

static int set_string(const directive_t *d, void *field, const char *value, char *err,
                      size_t errcap)
{
    size_t len = strlen(value);
    if (len == 0 || len >= d->width)
        return hv_errf(err, errcap, UV_EINVAL, "%s: '%s' is empty or too long", d->name,
                         value);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)value[i];
        /* The value goes into a request header: no controls, no line breaks. */
        if (c < 0x20 || c == 0x7f)
            return hv_errf(err, errcap, UV_EINVAL, "%s: control character in '%s'", d->name,
                             value);
    }
    memcpy(field, value, len + 1);
    return 0;
}

static int set_path(const directive_t *d, void *field, const char *value, char *err,
                    size_t errcap)
{
    size_t len = strlen(value);
    if (len >= d->width)
        return hv_errf(err, errcap, UV_EINVAL, "%s: path too long", d->name);
    memcpy(field, value, len + 1);
    return 0;
}

/* Strings and paths are their own text. */
static int format_text(const directive_t *d, const void *field, char *out, size_t cap)
{
    size_t n = 0;
    (void)d;
    return appendf(out, cap, &n, "%s", (const char *)field);
}

static int set_bool(const directive_t *d, void *field, const char *value, char *err,
                    size_t errcap)
{
    static const char *const yes[] = {"yes", "true", "on", "1"};
    static const char *const no[] = {"no", "false", "off", "0"};
    for (size_t i = 0; i < HV_ARRAY_SIZE(yes); i++) {
        if (strcmp(value, yes[i]) == 0 || strcmp(value, no[i]) == 0) {
            *(int *)field = strcmp(value, yes[i]) == 0;
            return 0;
        }
    }
    return hv_errf(err, errcap, UV_EINVAL, "%s: '%s' is not yes or no", d->name, value);
}

static int format_bool(const directive_t *d, const void *field, char *out, size_t cap)
{
    size_t n = 0;
    (void)d;
    return appendf(out, cap, &n, "%s", *(const int *)field ? "yes" : "no");
}

/* The words of the two enumerated types, indexed by their values. */
static const char *const level_names[] = {
    [HV_LOG_DEBUG] = "debug", [HV_LOG_INFO] = "info",   [HV_LOG_NOTICE] = "notice",
    [HV_LOG_WARNING] = "warning", [HV_LOG_ERROR] = "error",
};
static const char *const recrawl_names[] = {[HV_RECRAWL_OFF] = "off",
                                             [HV_RECRAWL_CONDITIONAL] = "conditional"};
static const char *const fsync_names[] = {
    [HV_FSYNC_NEVER] = "never", [HV_FSYNC_INTERVAL] = "interval", [HV_FSYNC_ALWAYS] = "always"};

/* The index of `value` among `names`, or -1 with "NAME: 'VALUE' is not A, B or C" in `err`. */
static int name_index(const directive_t *d, const char *const *names, size_t nnames,
                      const char *value, char *err, size_t errcap)
{
    char list[128];
    size_t n = 0;
    for (size_t i = 0; i < nnames; i++)
        if (strcmp(value, names[i]) == 0)
            return (int)i;
    list[0] = '\0';
    for (size_t i = 0; i < nnames; i++)
        appendf(list, sizeof(list), &n, "%s%s", i == 0 ? "" : i + 1 < nnames ? ", " : " or ",
                names[i]);
    hv_errf(err, errcap, UV_EINVAL, "%s: '%s' is not %s", d->name, value, list);
    return -1;
}

static int format_name(const char *const *names, size_t nnames, int v, char *out, size_t cap)
{
    size_t n = 0;
    return appendf(out, cap, &n, "%s", v >= 0 && (size_t)v < nnames ? names[v] : "?");
}

static int set_level(const directive_t *d, void *field, const char *value, char *err,
                     size_t errcap)
{
    hv_log_level_t lvl;
    if (hv_log_level_parse(value, &lvl) != 0)
        return hv_errf(err, errcap, UV_EINVAL,
                         "%s: '%s' is not one of debug, info, notice, warning, error", d->name,
                         value);
    *(hv_log_level_t *)field = lvl;
    return 0;
}

static int format_level(const directive_t *d, const void *field, char *out, size_t cap)
{
    (void)d;
    return format_name(level_names, HV_ARRAY_SIZE(level_names), (int)*(const hv_log_level_t *)field,
                       out, cap);
}

static int set_fsync(const directive_t *d, void *field, const char *value, char *err,
                     size_t errcap)
{
    int i = name_index(d, fsync_names, HV_ARRAY_SIZE(fsync_names), value, err, errcap);
    if (i < 0)
        return UV_EINVAL;
    *(hv_fsync_t *)field = (hv_fsync_t)i;
    return 0;
}

static int format_fsync(const directive_t *d, const void *field, char *out, size_t cap)
{
    (void)d;
    return format_name(fsync_names, HV_ARRAY_SIZE(fsync_names), (int)*(const hv_fsync_t *)field,
                       out, cap);
}

static int set_recrawl(const directive_t *d, void *field, const char *value, char *err,
                       size_t errcap)
{
    int i = name_index(d, recrawl_names, HV_ARRAY_SIZE(recrawl_names), value, err, errcap);
    if (i < 0)
        return UV_EINVAL;
    *(hv_recrawl_mode_t *)field = (hv_recrawl_mode_t)i;
    return 0;
}

static int format_recrawl(const directive_t *d, const void *field, char *out, size_t cap)
{
    (void)d;
    return format_name(recrawl_names, HV_ARRAY_SIZE(recrawl_names),
                       (int)*(const hv_recrawl_mode_t *)field, out, cap);
}

/* proxy: "URL[, URL...]", "none", or "" (not given). Errors quote the URLs masked. */
static int set_proxies(const directive_t *d, void *field, const char *value, char *err,
                       size_t errcap)
{
    char msg[512];
    if (value[0] == '\0') {
        hv_proxy_list_free(field);
        return 0;
    }
    if (hv_proxy_list_parse(value, field, msg, sizeof(msg)) != 0)
        return hv_errf(err, errcap, UV_EINVAL, "%s: %s", d->name, msg);
    return 0;
}

static int format_proxies(const directive_t *d, const void *field, char *out, size_t cap)
{
    (void)d;
    return hv_proxy_list_format(field, out, cap) == 0 ? 0 : UV_ENOBUFS;
}

static int set_no_proxy(const directive_t *d, void *field, const char *value, char *err,
                        size_t errcap)
{
    char bad[256];
    if (hv_no_proxy_parse(value, field, bad, sizeof(bad)) != 0)
        return hv_errf(err, errcap, UV_EINVAL,
                       "%s: '%s' is not a host name, .domain, address range or *", d->name,
                       bad);
    return 0;
}

static int format_no_proxy(const directive_t *d, const void *field, char *out, size_t cap)
{
    (void)d;
    return hv_no_proxy_format(field, out, cap) == 0 ? 0 : UV_ENOBUFS;
}

static const char *const rotation_names[] = {[HV_ROTATE_HOST] = "host",
                                              [HV_ROTATE_REQUEST] = "request"};

static int set_rotation(const directive_t *d, void *field, const char *value, char *err,
                        size_t errcap)
{
    int i = name_index(d, rotation_names, HV_ARRAY_SIZE(rotation_names), value, err, errcap);
    if (i < 0)
        return UV_EINVAL;
    *(hv_rotation_t *)field = (hv_rotation_t)i;
    return 0;
}

static const char *const http2_names[] = {[HV_HTTP2_OFF] = "off", [HV_HTTP2_AUTO] = "auto"};

static int set_http2(const directive_t *d, void *field, const char *value, char *err,
                     size_t errcap)
{
    int i = name_index(d, http2_names, HV_ARRAY_SIZE(http2_names), value, err, errcap);
    if (i < 0)
        return UV_EINVAL;
    *(hv_http2_t *)field = (hv_http2_t)i;
    return 0;
}

static int format_http2(const directive_t *d, const void *field, char *out, size_t cap)
{
    (void)d;
    return format_name(http2_names, HV_ARRAY_SIZE(http2_names), (int)*(const hv_http2_t *)field,
                       out, cap);
}

static int format_rotation(const directive_t *d, const void *field, char *out, size_t cap)
{
    (void)d;
    return format_name(rotation_names, HV_ARRAY_SIZE(rotation_names),
                       (int)*(const hv_rotation_t *)field, out, cap);
}

/* A set of HTTP statuses, one flag per code (the field is indexed by the status). */
#define STATUS_END 600

static int set_statuses(const directive_t *d, void *field, const char *value, char *err,
                        size_t errcap)
{
    unsigned char set[STATUS_END];
    const char *p = value;
    memset(set, 0, sizeof(set));
    for (;;) {
        while (*p == ' ' || *p == ',')
            p++;
        if (*p == '\0')
            break;
        char *end;
        unsigned long code = strtoul(p, &end, 10);
        if (end == p || code < 100 || code >= STATUS_END)
            goto bad;
        set[code] = 1;
        for (p = end; *p == ' '; p++)
            ;
        if (*p != ',' && *p != '\0')
            goto bad;
    }
    memcpy(field, set, sizeof(set));
    return 0;
bad:
    return hv_errf(err, errcap, UV_EINVAL,
                     "%s: '%s' is not a list of HTTP statuses (e.g. 429,503)", d->name, value);
}

static int format_statuses(const directive_t *d, const void *field, char *out, size_t cap)
{
    const unsigned char *set = field;
    size_t n = 0;
    int rc = 0;
    (void)d;
    if (cap > 0)
        out[0] = '\0';
    for (unsigned code = 100; code < STATUS_END && rc == 0; code++)
        if (set[code])
            rc = appendf(out, cap, &n, "%s%u", n > 0 ? "," : "", code);
    return rc;
}

static int set_fraction(const directive_t *d, void *field, const char *value, char *err,
                        size_t errcap)
{
    char *end;
    errno = 0;
    double f = strtod(value, &end);
    if (errno != 0 || end == value || *end != '\0' || !(f >= 0.0 && f <= 1.0))
        return hv_errf(err, errcap, UV_EINVAL, "%s: '%s' is not a fraction from 0 to 1",
                         d->name, value);
    *(double *)field = f;
    return 0;
}

/* The shortest decimal that reads back as the same double (0.2, not 0.20000000000000001). */
static int format_fraction(const directive_t *d, const void *field, char *out, size_t cap)
{
    double f = *(const double *)field;
    int rc = 0;
    (void)d;
    for (int prec = 1; prec <= 17; prec++) {
        size_t n = 0;
        rc = appendf(out, cap, &n, "%.*g", prec, f);
        if (rc != 0 || strtod(out, NULL) == f)
            break;
    }
    return rc;
}

static int set_addresses(const directive_t *d, void *field, const char *value, char *err,
                         size_t errcap)
{
    char bad[256];
    int rc = hv_allow_list_parse(value, field, bad, sizeof(bad));
    if (rc == -2)
        return hv_errf(err, errcap, UV_EINVAL, "%s: more than %d ranges", d->name,
                         HV_GUARD_MAX_ALLOW);
    if (rc != 0)
        return hv_errf(err, errcap, UV_EINVAL,
                         "%s: '%s' is not an address range (e.g. 10.0.0.0/8, fd00::/8, "
                         "127.0.0.1)",
                         d->name, bad);
    return 0;
}

static int format_addresses(const directive_t *d, const void *field, char *out, size_t cap)
{
    const hv_allow_list_t *list = field;
    size_t n = 0;
    int rc = 0;
    (void)d;
    if (cap > 0)
        out[0] = '\0';
    for (unsigned i = 0; i < list->count && rc == 0; i++) {
        char one[INET6_ADDRSTRLEN + 8];
        if (hv_cidr_format(&list->cidr[i], one, sizeof(one)) != 0)
            return UV_ENOBUFS;
        rc = appendf(out, cap, &n, "%s%s", i > 0 ? ", " : "", one);
    }
    return rc;
}

static int set_sources(const directive_t *d, void *field, const char *value, char *err,
                       size_t errcap)
{
    unsigned set = 0;
    const char *p = value;
    while (*p != '\0') {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        size_t n = strcspn(p, " \t,");
        if (n == 0)
            break;
        if (n == 5 && strncmp(p, "spool", 5) == 0)
            set |= HV_SOURCE_SPOOL;
        else if (n == 5 && strncmp(p, "redis", 5) == 0)
            set |= HV_SOURCE_REDIS;
        else
            return hv_errf(err, errcap, UV_EINVAL,
                             "%s: '%.*s' is not a source (spool, redis, or both)", d->name,
                             (int)n, p);
        p += n;
    }
    if (set == 0)
        return hv_errf(err, errcap, UV_EINVAL, "%s: name spool, redis, or both", d->name);
    *(unsigned *)field = set;
    return 0;
}

static int format_sources(const directive_t *d, const void *field, char *out, size_t cap)
{
    unsigned set = *(const unsigned *)field;
    size_t n = 0;
    (void)d;
    return appendf(out, cap, &n, "%s%s%s", set & HV_SOURCE_SPOOL ? "spool" : "",
                   set == (HV_SOURCE_SPOOL | HV_SOURCE_REDIS) ? ", " : "",
                   set & HV_SOURCE_REDIS ? "redis" : "");
}

static const type_ops_t types[] = {
    [T_UINT] = {set_uint, format_uint, "N", "a whole number"},
    [T_SIZE] = {set_size, format_size, "SIZE", "a size in bytes, with k, m or g (powers of 1024)"},
    [T_DURATION] = {set_duration, format_duration, "DURATION", "a duration, with ms, s, m or h"},
    [T_STRING] = {set_string, format_text, "TEXT", "text without control characters"},
    [T_LEVEL] = {set_level, format_level, "LEVEL", NULL},
    [T_BOOL] = {set_bool, format_bool, "yes|no", "yes or no (true or false, on or off, 1 or 0)"},
    [T_PATH] = {set_path, format_text, "VALUE", NULL},
    [T_FSYNC] = {set_fsync, format_fsync, "MODE", NULL},
    [T_STATUSES] = {set_statuses, format_statuses, "LIST", NULL},
    [T_FRACTION] = {set_fraction, format_fraction, "FRACTION", "a number from 0 to 1"},
    [T_ADDRESSES] = {set_addresses, format_addresses, "LIST", NULL},
    [T_SOURCES] = {set_sources, format_sources, "LIST", NULL},
    [T_RECRAWL] = {set_recrawl, format_recrawl, "MODE", NULL},
    [T_PROXIES] = {set_proxies, format_proxies, "LIST", NULL},
    [T_NO_PROXY] = {set_no_proxy, format_no_proxy, "LIST", NULL},
    [T_ROTATION] = {set_rotation, format_rotation, "MODE", NULL},
    [T_HTTP2] = {set_http2, format_http2, "MODE", NULL},
};

/* ---- directives by name ---- */

static const directive_t *find_directive(const char *name)
{
    char canon[64];
    size_t n = strlen(name);
    if (n >= sizeof(canon))
        return NULL;
    for (size_t i = 0; i <= n; i++)
        canon[i] = name[i] == '-' ? '_' : name[i];
    for (size_t i = 0; i < HV_ARRAY_SIZE(directives); i++)
        if (strcmp(directives[i].name, canon) == 0)
            return &directives[i];
    return NULL;
}

int hv_config_is_flag(const char *name)
{
    const directive_t *d = find_directive(name);
    return d != NULL && d->type == T_BOOL;
}

int hv_config_set(hv_config_t *cfg, const char *name, const char *value, char *err, size_t errcap)
{
    const directive_t *d = find_directive(name);
    if (d == NULL)
        return hv_errf(err, errcap, UV_ENOENT, "unknown directive '%s'", name);
    return types[d->type].set(d, (char *)cfg + d->offset, value, err, errcap);
}

int hv_config_format(const hv_config_t *cfg, const char *name, char *out, size_t cap)
{
    const directive_t *d = find_directive(name);
    if (cap > 0)
        out[0] = '\0';
    if (d == NULL)
        return UV_ENOENT;
    return types[d->type].format(d, (const char *)cfg + d->offset, out, cap);
}

const char *hv_config_directive_name(size_t i)
{
    return i < HV_ARRAY_SIZE(directives) ? directives[i].name : NULL;
}

static int directive_index(const directive_t *d)
{
    return (int)(d - directives);
}

void hv_config_where(const hv_config_t *cfg, const char *name, char *out, size_t cap)
{
    const directive_t *d = find_directive(name);
    int o = d != NULL ? cfg->origin[directive_index(d)] : 0;
    if (o > 0)
        snprintf(out, cap, "%s:%d", cfg->config_file, o);
    else if (o < 0)
        snprintf(out, cap, "command line");
    else
        snprintf(out, cap, "default");
}

int hv_config_is_set(const hv_config_t *cfg, const char *name)
{
    const directive_t *d = find_directive(name);
    return d != NULL && cfg->origin[directive_index(d)] != 0;
}

int hv_config_from_cli(const hv_config_t *cfg, const char *name)
{
    const directive_t *d = find_directive(name);
    return d != NULL && cfg->origin[directive_index(d)] == -1;
}

void hv_config_mark_cli(hv_config_t *cfg, const char *name)
{
    const directive_t *d = find_directive(name);
    if (d != NULL)
        cfg->origin[directive_index(d)] = -1;
}

/* ---- sections: [KIND "NAME"] ---- */

/* A key a section accepts. Its value is read by the setter of the global directive of the
 * same name, into the field at `offset` (of `width` bytes) of the section's own struct, and
 * the int at `given` records that it was set. */
typedef struct {
    const char *name;
    size_t offset, width, given;
} section_key_t;

typedef struct section_s section_t;
struct section_s {
    const char *kind;          /* [KIND "NAME"]; KIND in any case */
    int fold_case;             /* NAME is a host name: stored lower-cased */
    const section_key_t *keys; /* NULL: any key, the handler judges it */
    size_t nkeys;
    int (*set)(hv_config_t *cfg, const section_t *s, const char *name, const char *key,
               const char *value, int line, char *err, size_t errcap);
};

static int set_host_key(hv_config_t *cfg, const section_t *s, const char *name, const char *key,
                        const char *value, int line, char *err, size_t errcap);
static int set_rules_key(hv_config_t *cfg, const section_t *s, const char *name,
                         const char *key, const char *value, int line, char *err,
                         size_t errcap);

#define HOST_KEY(key, field, given)                                                        \
    {key, offsetof(hv_host_rule_t, field), sizeof(((hv_host_rule_t *)0)->field),            \
     offsetof(hv_host_rule_t, given)}

static const section_key_t host_keys[] = {
    HOST_KEY("per_host", per_host, per_host_set),
    HOST_KEY("host_delay", delay_ms, delay_set),
    HOST_KEY("host_delay_jitter", jitter, jitter_set),
    HOST_KEY("block_detection", block_detection, block_detection_set),
    HOST_KEY("http2_prior_knowledge", http2_prior_knowledge, http2_prior_knowledge_set),
    HOST_KEY("proxy", proxy, proxy.given),
};

static const section_t sections[] = {
    {"host", 1, host_keys, HV_ARRAY_SIZE(host_keys), set_host_key},
    {"rules", 0, NULL, 0, set_rules_key},
};

/* The longest NAME of a section (that of a host rule). */
#define SECTION_NAME_MAX sizeof(((hv_host_rule_t *)0)->name)

/* `KIND "name"` -> name in out (as written); 0, or -1 if the section is not of that kind. */
static int quoted_section(const char *section, const char *kind, char *out, size_t cap)
{
    const char *p = section;
    size_t klen = strlen(kind);
    while (*p == ' ' || *p == '\t')
        p++;
    if (strncasecmp(p, kind, klen) != 0 || (p[klen] != ' ' && p[klen] != '\t'))
        return -1;
    p += klen;
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p != '"')
        return -1;
    const char *end = strchr(p + 1, '"');
    if (end == NULL || end == p + 1 || (size_t)(end - p - 1) >= cap)
        return -1;
    for (const char *q = end + 1; *q != '\0'; q++)
        if (*q != ' ' && *q != '\t')
            return -1;
    size_t n = (size_t)(end - p - 1);
    memcpy(out, p + 1, n);
    out[n] = '\0';
    return 0;
}

/* The row for the text between [ and ], with its NAME in `name`; NULL for none. */
static const section_t *find_section(const char *section, char name[SECTION_NAME_MAX])
{
    for (size_t i = 0; i < HV_ARRAY_SIZE(sections); i++) {
        const section_t *s = &sections[i];
        if (quoted_section(section, s->kind, name, SECTION_NAME_MAX) != 0)
            continue;
        for (char *c = name; s->fold_case && *c != '\0'; c++)
            *c = (char)tolower((unsigned char)*c);
        return s;
    }
    return NULL;
}

static int unknown_section(char *err, size_t errcap, int len, const char *text)
{
    char known[256];
    size_t n = 0;
    for (size_t i = 0; i < HV_ARRAY_SIZE(sections); i++)
        appendf(known, sizeof(known), &n, "%s[%s \"NAME\"]", i > 0 ? ", " : "", sections[i].kind);
    return hv_errf(err, errcap, UV_EINVAL, "unknown section [%.*s] (known: %s)", len, text,
                     known);
}

static int set_in_section(hv_config_t *cfg, const char *section, const char *key,
                          const char *value, int line, char *err, size_t errcap)
{
    char name[SECTION_NAME_MAX];
    const section_t *s = find_section(section, name);
    if (s == NULL)
        return unknown_section(err, errcap, (int)strlen(section), section);
    return s->set(cfg, s, name, key, value, line, err, errcap);
}

/* The [host] section called `name` (lower-cased), created when missing; NULL: no room. */
static hv_host_rule_t *host_section(hv_config_t *cfg, const char *name, char *err,
                                    size_t errcap)
{
    for (unsigned i = 0; i < cfg->nhost_rules; i++)
        if (strcmp(cfg->host_rules[i].name, name) == 0)
            return &cfg->host_rules[i];
    if (cfg->nhost_rules == HV_HOST_RULES_MAX) {
        hv_errf(err, errcap, UV_EINVAL, "too many [host] sections (at most %d)",
                HV_HOST_RULES_MAX);
        return NULL;
    }
    hv_host_rule_t *r = &cfg->host_rules[cfg->nhost_rules++];
    memset(r, 0, sizeof(*r));
    snprintf(r->name, sizeof(r->name), "%s", name);
    return r;
}

/* [host "NAME"]: the host's own per_host, host_delay, host_delay_jitter, block_detection,
 * and its request headers. */
static int set_host_key(hv_config_t *cfg, const section_t *s, const char *name, const char *key,
                        const char *value, int line, char *err, size_t errcap)
{
    if (strcmp(key, "header") == 0)
        return hv_config_add_header(cfg, name, value, line, err, errcap);
    hv_host_rule_t *r = host_section(cfg, name, err, errcap);
    if (r == NULL)
        return UV_EINVAL;
    const directive_t *d = find_directive(key);
    for (size_t i = 0; d != NULL && i < s->nkeys; i++) {
        const section_key_t *k = &s->keys[i];
        if (strcmp(d->name, k->name) != 0)
            continue;
        assert(d->width == k->width);
        int rc = types[d->type].set(d, (char *)r + k->offset, value, err, errcap);
        if (rc == 0)
            *(int *)((char *)r + k->given) = 1;
        return rc;
    }
    char can[256];
    size_t n = 0;
    for (size_t i = 0; i < s->nkeys; i++)
        appendf(can, sizeof(can), &n, "%s, ", s->keys[i].name);
    return hv_errf(err, errcap, UV_EINVAL, "[%s \"%s\"]: '%s' cannot be set per %s (%sheader can)",
                     s->kind, name, key, s->kind, can);
}

/* [rules "NAME"]: every key is an extraction rule of the set NAME. */
static int set_rules_key(hv_config_t *cfg, const section_t *s, const char *name,
                         const char *key, const char *value, int line, char *err,
                         size_t errcap)
{
    (void)s, (void)line;
    return hv_config_add_rule(cfg, name, key, value, err, errcap);
}

/* ---- INI files (inih) ---- */

/* A key the file has set, under its section: "KIND\x1fNAME\x1fKEY" ("" for the top), with the
 * section's NAME as find_section() stores it and KEY as the directive's canonical name. */
typedef struct {
    int line;
    UT_hash_handle hh;
    char id[];
} seen_key_t;

typedef struct {
    FILE *f;
    const char *path;
    int line;
    int too_long;
    hv_config_t *cfg;
    char *err;
    size_t errcap;
    int failed;
    seen_key_t *seen;
} ini_state_t;

/* A comment after a value is a '#' with a blank before it and a blank or the line's end after
 * it: "8 # eight" is 8, while "a#id", "div #main" (a selector), "http://h/#top" and "#1" in a
 * header value keep their '#'. Values are never quoted, so this is the one rule. (inih
 * itself ends a value at a ';' after a blank.) */
static void cut_comment(char *line)
{
    for (char *q = line + 1; *q != '\0'; q++) {
        if (*q != '#' || (q[-1] != ' ' && q[-1] != '\t'))
            continue;
        if (q[1] == '\0' || q[1] == ' ' || q[1] == '\t' || q[1] == '\r' || q[1] == '\n') {
            *q = '\0';
            return;
        }
    }
}

/* inih's reader: one line at a time, so that we know the line number, and so that an
 * over-long line is an error instead of being cut (inih's own buffer is INI_MAX_LINE). */
static char *ini_read_line(char *str, int num, void *stream)
{
    ini_state_t *st = stream;
    char buf[4096];
    if (st->failed || fgets(buf, sizeof(buf), st->f) == NULL)
        return NULL;
    st->line++;
    size_t len = strlen(buf);
    int complete = len > 0 && buf[len - 1] == '\n';
    if (!complete && !feof(st->f)) {
        st->too_long = 1;
        return NULL;
    }
    /* The limit counts the characters of the line, whether or not a newline ends it. */
    size_t content = len - (complete ? 1 : 0);
    if (content > (size_t)num - 2) {
        st->too_long = 1;
        return NULL;
    }
    /* Leading blanks would make inih read the line as a continuation of the previous
     * value; a config line never means that here. */
    char *p = buf;
    while (*p == ' ' || *p == '\t')
        p++;
    cut_comment(p);
    len = strlen(p);
    /* inih reports sections only through the keys under them: check headers here, so that
     * an unknown section is an error on its own line even when it is empty. */
    if (*p == '[') {
        char *close = strchr(p, ']');
        size_t nlen = close != NULL ? (size_t)(close - p - 1) : strlen(p + 1);
        char section[300], name[SECTION_NAME_MAX], msg[512];
        snprintf(section, sizeof(section), "%.*s", (int)HV_MIN(nlen, sizeof(section) - 1), p + 1);
        if (close == NULL || find_section(section, name) == NULL) {
            unknown_section(msg, sizeof(msg), (int)HV_MIN(nlen, (size_t)100), p + 1);
            snprintf(st->err, st->errcap, "%s:%d: %s", st->path, st->line, msg);
            st->failed = 1;
            return NULL;
        }
    }
    memcpy(str, p, len + 1);
    return str;
}

/* The [host] section for `host`: the one that names it exactly, else the longest "*.suffix"
 * that matches; NULL: none. */
static const hv_host_rule_t *host_rule(const hv_config_t *cfg, const char *host)
{
    const hv_host_rule_t *exact = NULL, *wild = NULL;
    size_t hlen = strlen(host), best = 0;
    for (unsigned i = 0; i < cfg->nhost_rules; i++) {
        const hv_host_rule_t *r = &cfg->host_rules[i];
        if (strcmp(r->name, host) == 0) {
            exact = r;
        } else if (r->name[0] == '*' && r->name[1] == '.') {
            size_t slen = strlen(r->name + 1); /* ".example.org" */
            if (hlen > slen && strcmp(host + hlen - slen, r->name + 1) == 0 && slen > best) {
                wild = r;
                best = slen;
            }
        }
    }
    return exact != NULL ? exact : wild;
}

void hv_config_host_policy(const hv_config_t *cfg, const char *host, unsigned *per_host,
                           uint64_t *delay_ms, double *jitter)
{
    const hv_host_rule_t *r = host_rule(cfg, host);
    *per_host = r != NULL && r->per_host_set ? r->per_host : cfg->per_host;
    *delay_ms = r != NULL && r->delay_set ? r->delay_ms : cfg->host_delay_ms;
    *jitter = r != NULL && r->jitter_set ? r->jitter : cfg->host_delay_jitter;
}

const hv_proxy_list_t *hv_config_host_proxies(const hv_config_t *cfg, const char *host,
                                               int host_is_ip)
{
    if (hv_no_proxy_match(&cfg->no_proxy, host, host_is_ip))
        return NULL;
    const hv_host_rule_t *r = host_rule(cfg, host);
    const hv_proxy_list_t *l = r != NULL && r->proxy.given ? &r->proxy : &cfg->proxy;
    return l->count > 0 ? l : NULL;
}

int hv_config_host_h2c(const hv_config_t *cfg, const char *host)
{
    const hv_host_rule_t *r = cfg->nhost_rules > 0 ? host_rule(cfg, host) : NULL;
    return r != NULL && r->http2_prior_knowledge_set ? r->http2_prior_knowledge
                                                      : cfg->http2_prior_knowledge;
}

int hv_config_host_block_detection(const hv_config_t *cfg, const char *host)
{
    const hv_host_rule_t *r = host_rule(cfg, host);
    return r != NULL && r->block_detection_set ? r->block_detection : cfg->block_detection;
}

/* ---- request headers ---- */

/* Where a header was set, for messages: "line 12" or "the command line". */
static const char *header_where(int line, char *out, size_t cap)
{
    if (line > 0)
        snprintf(out, cap, "line %d", line);
    else
        snprintf(out, cap, "the command line");
    return out;
}

int hv_config_add_header(hv_config_t *cfg, const char *host, const char *text, int line,
                         char *err, size_t errcap)
{
    char scope[300], where[32];
    char *name = NULL, *value = NULL;
    hv_headers_t **hs = &cfg->headers, *h;
    hv_conf_header_t *slot = NULL;
    size_t nlen, vlen, bytes;
    const char *colon, *v;
    int rc;

    /* No message quotes the text: all of it after the name may be a secret. */
    colon = strchr(text, ':');
    if (colon == NULL)
        return hv_errf(err, errcap, UV_EINVAL, "header: expected 'Name: value' (no ':')");
    nlen = (size_t)(colon - text);
    for (v = colon + 1; *v == ' ' || *v == '\t'; v++)
        ;
    for (vlen = strlen(v); vlen > 0 && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t'); vlen--)
        ;
    name = hv_xstrndup(text, nlen);
    value = hv_xstrndup(v, vlen);
    rc = hv_http_field_check(name, value, err, errcap);
    if (rc != 0)
        goto out;
    snprintf(scope, sizeof(scope), "global");
    if (host != NULL) {
        hv_host_rule_t *r = host_section(cfg, host, err, errcap);
        if (r == NULL) {
            rc = UV_EINVAL;
            goto out;
        }
        hs = &r->headers;
        snprintf(scope, sizeof(scope), "[host \"%s\"]", host);
    }
    if (*hs == NULL)
        *hs = hv_xcalloc(1, sizeof(**hs));
    h = *hs;
    for (unsigned i = 0; i < h->n; i++)
        if (strcasecmp(h->h[i].name, name) == 0)
            slot = &h->h[i];
    /* The command line overrides the file, one header by another of its name; twice in one
     * place is a mistake (two Cookie lines are not two cookies: join them with "; "). */
    if (slot != NULL && (slot->line > 0) == (line > 0)) {
        rc = hv_errf(err, errcap, UV_EINVAL, "header: '%s' is already set (%s), in the %s "
                     "headers", name, header_where(slot->line, where, sizeof(where)), scope);
        goto out;
    }
    if (slot == NULL && h->n == HV_HEADERS_MAX) {
        rc = hv_errf(err, errcap, UV_EINVAL, "header: more than %d %s headers", HV_HEADERS_MAX,
                     scope);
        goto out;
    }
    /* "Name: value\r\n", in place of the one it replaces. */
    bytes = h->bytes + nlen + vlen + 4;
    if (slot != NULL)
        bytes -= strlen(slot->name) + strlen(slot->value) + 4;
    if (bytes > HV_HEADERS_BYTES_MAX) {
        rc = hv_errf(err, errcap, UV_EINVAL, "header: the %s headers add up to more than %d "
                     "bytes", scope, HV_HEADERS_BYTES_MAX);
        goto out;
    }
    if (slot == NULL) {
        slot = &h->h[h->n++];
    } else {
        free(slot->name);
        free(slot->value);
    }
    slot->name = name;
    slot->value = value;
    slot->line = line;
    h->bytes = bytes;
    name = value = NULL;
out:
    free(name);
    free(value);
    return rc;
}

/* The global headers that stay with the first origin of a request (curl does the same with
 * its custom Authorization and Cookie headers): credentials for one site that a redirect must
 * not hand to another. */
static int is_credential(const char *name)
{
    return strcasecmp(name, "Authorization") == 0 || strcasecmp(name, "Cookie") == 0;
}

static const hv_conf_header_t *find_header(const hv_headers_t *hs, const char *name)
{
    for (unsigned i = 0; hs != NULL && i < hs->n; i++)
        if (strcasecmp(hs->h[i].name, name) == 0)
            return &hs->h[i];
    return NULL;
}

size_t hv_config_request_headers(const hv_config_t *cfg, const char *host,
                                 int global_credentials, const hv_conf_header_t **out)
{
    const hv_host_rule_t *r = host_rule(cfg, host);
    const hv_headers_t *own = r != NULL ? r->headers : NULL, *global = cfg->headers;
    size_t n = 0;
    for (unsigned i = 0; global != NULL && i < global->n; i++) {
        const hv_conf_header_t *g = &global->h[i];
        const hv_conf_header_t *o = find_header(own, g->name);
        if (o != NULL)
            out[n++] = o;
        else if (global_credentials || !is_credential(g->name))
            out[n++] = g;
    }
    for (unsigned i = 0; own != NULL && i < own->n; i++)
        if (find_header(global, own->h[i].name) == NULL)
            out[n++] = &own->h[i];
    return n;
}

static void print_headers(const hv_config_t *cfg, const hv_headers_t *hs, FILE *out)
{
    char where[1100];
    for (unsigned i = 0; hs != NULL && i < hs->n; i++) {
        const hv_conf_header_t *h = &hs->h[i];
        if (h->line > 0)
            snprintf(where, sizeof(where), "%s:%d", cfg->config_file, h->line);
        else
            snprintf(where, sizeof(where), "command line");
        fprintf(out, "header = %s: %s  # %s\n", h->name,
                hv_http_field_secret(h->name) && h->value[0] != '\0' ? "***" : h->value, where);
    }
}

void hv_config_print_headers(const hv_config_t *cfg, FILE *out)
{
    int any = cfg->headers != NULL && cfg->headers->n > 0;
    for (unsigned i = 0; i < cfg->nhost_rules; i++)
        any |= cfg->host_rules[i].headers != NULL && cfg->host_rules[i].headers->n > 0;
    if (!any)
        return;
    fprintf(out, "# request headers (secret values shown as ***)\n");
    print_headers(cfg, cfg->headers, out);
    for (unsigned i = 0; i < cfg->nhost_rules; i++) {
        const hv_host_rule_t *r = &cfg->host_rules[i];
        if (r->headers == NULL || r->headers->n == 0)
            continue;
        fprintf(out, "[host \"%s\"]\n", r->name);
        print_headers(cfg, r->headers, out);
    }
}

int hv_config_add_rule(hv_config_t *cfg, const char *set, const char *key, const char *value,
                       char *err, size_t errcap)
{
    hv_ruleset_t *rs = NULL;
    for (unsigned i = 0; i < cfg->nrulesets; i++)
        if (strcmp(hv_ruleset_name(cfg->rulesets[i]), set) == 0)
            rs = cfg->rulesets[i];
    if (rs == NULL) {
        if (cfg->nrulesets == HV_RULESETS_MAX) {
            snprintf(err, errcap, "too many rule sets (at most %d)", HV_RULESETS_MAX);
            return UV_EINVAL;
        }
        rs = hv_ruleset_new(set);
        cfg->rulesets[cfg->nrulesets++] = rs;
    }
    return hv_ruleset_add(rs, key, value, err, errcap);
}

const hv_ruleset_t *hv_config_ruleset(const hv_config_t *cfg, const char *name)
{
    if (name == NULL)
        return NULL;
    for (unsigned i = 0; i < cfg->nrulesets; i++)
        if (strcmp(hv_ruleset_name(cfg->rulesets[i]), name) == 0)
            return cfg->rulesets[i];
    return NULL;
}

static void free_headers(hv_headers_t **hs)
{
    if (*hs == NULL)
        return;
    for (unsigned i = 0; i < (*hs)->n; i++) {
        free((*hs)->h[i].name);
        free((*hs)->h[i].value);
    }
    free(*hs);
    *hs = NULL;
}

void hv_config_free(hv_config_t *cfg)
{
    for (unsigned i = 0; i < cfg->nrulesets; i++)
        hv_ruleset_free(cfg->rulesets[i]);
    cfg->nrulesets = 0;
    hv_proxy_list_free(&cfg->proxy);
    free_headers(&cfg->headers);
    for (unsigned i = 0; i < cfg->nhost_rules; i++) {
        hv_proxy_list_free(&cfg->host_rules[i].proxy);
        free_headers(&cfg->host_rules[i].headers);
    }
}

/* A key given twice in one section (or twice at the top; two [host] sections of one name are
 * one section) is an error naming the line that set it first: one value would silently win.
 * `header` is the one key that repeats (a header each; hv_config_add_header() refuses a name
 * twice). 0, or UV_EINVAL with the message in `msg`. */
static int check_once(ini_state_t *st, const char *section, const char *key, char *msg,
                      size_t msgcap)
{
    char name[SECTION_NAME_MAX] = "", id[2 * SECTION_NAME_MAX + 128];
    const section_t *s = NULL;
    if (strcmp(key, "header") == 0)
        return 0;
    if (section[0] != '\0' && (s = find_section(section, name)) == NULL)
        return 0; /* the section's own error comes */
    /* Directives by their canonical name (max-bytes is max_bytes); rule names as written. */
    const directive_t *d = s == NULL || s->keys != NULL ? find_directive(key) : NULL;
    const char *canon = d != NULL ? d->name : key;
    int n = snprintf(id, sizeof(id), "%s\x1f%s\x1f%s", s != NULL ? s->kind : "", name, canon);
    if (n < 0 || (size_t)n >= sizeof(id))
        return 0; /* a key too long to be any: its own error comes */
    seen_key_t *k;
    HASH_FIND_STR(st->seen, id, k);
    if (k != NULL) {
        if (s == NULL)
            return hv_errf(msg, msgcap, UV_EINVAL, "%s: already set on line %d", canon, k->line);
        return hv_errf(msg, msgcap, UV_EINVAL, "%s: already set on line %d, in [%s \"%s\"]", canon,
                       k->line, s->kind, name);
    }
    k = hv_xmalloc(sizeof(*k) + (size_t)n + 1);
    k->line = st->line;
    memcpy(k->id, id, (size_t)n + 1);
    HASH_ADD_STR(st->seen, id, k);
    return 0;
}

static void seen_free(ini_state_t *st)
{
    seen_key_t *k, *tmp;
    HASH_ITER(hh, st->seen, k, tmp)
    {
        HASH_DEL(st->seen, k);
        free(k);
    }
}

static int on_ini_entry(void *user, const char *section, const char *name, const char *value)
{
    ini_state_t *st = user;
    char msg[512];
    if (st->failed)
        return 0;
    int header = section[0] == '\0' && strcmp(name, "header") == 0;
    int rc = check_once(st, section, name, msg, sizeof(msg));
    if (rc == 0 && section[0] != '\0')
        rc = set_in_section(st->cfg, section, name, value, st->line, msg, sizeof(msg));
    else if (rc == 0 && header)
        rc = hv_config_add_header(st->cfg, NULL, value, st->line, msg, sizeof(msg));
    else if (rc == 0)
        rc = hv_config_set(st->cfg, name, value, msg, sizeof(msg));
    if (rc != 0) {
        snprintf(st->err, st->errcap, "%s:%d: %s", st->path, st->line, msg);
        st->failed = 1;
        return 0;
    }
    if (section[0] == '\0' && !header)
        st->cfg->origin[directive_index(find_directive(name))] = st->line;
    return 1;
}

int hv_config_load_file(hv_config_t *cfg, const char *path, char *err, size_t errcap)
{
    ini_state_t st;
    memset(&st, 0, sizeof(st));
    st.path = path;
    st.cfg = cfg;
    st.err = err;
    st.errcap = errcap;
    st.f = fopen(path, "r");
    if (st.f == NULL) {
        snprintf(err, errcap, "cannot read config file %s: %s", path, strerror(errno));
        return UV_EINVAL;
    }
    snprintf(cfg->config_file, sizeof(cfg->config_file), "%s", path);
    int rc = ini_parse_stream(ini_read_line, &st, on_ini_entry, &st);
    fclose(st.f);
    seen_free(&st);
    if (st.too_long) {
        snprintf(err, errcap, "%s:%d: line too long (at most %d characters)", path, st.line,
                 INI_MAX_LINE - 2);
        return UV_EINVAL;
    }
    if (st.failed)
        return UV_EINVAL;
    if (rc != 0) {
        snprintf(err, errcap, "%s:%d: syntax error (expected 'key = value' or a comment)", path,
                 rc > 0 ? rc : st.line);
        return UV_EINVAL;
    }
    return 0;
}

void hv_config_defaults(hv_config_t *cfg)
{
    char err[256];
    memset(cfg, 0, sizeof(*cfg));
    _Static_assert(HV_ARRAY_SIZE(directives) <= HV_ARRAY_SIZE(cfg->origin), "origin[] too small");
    for (size_t i = 0; i < HV_ARRAY_SIZE(directives); i++) {
        int rc = hv_config_set(cfg, directives[i].name, directives[i].def, err, sizeof(err));
        if (rc != 0) {
            /* A default that does not parse is a bug in the table above. */
            fprintf(stderr, "harvestd: bad built-in default: %s\n", err);
            abort();
        }
    }
}

/* HOSTNAME:SPOOL_DIR (the spool as an absolute path when it exists): stable across restarts,
 * and different for two daemons unless they share a spool. */
static void default_consumer(hv_config_t *cfg)
{
    char host[256] = "localhost", dir[PATH_MAX];
    if (gethostname(host, sizeof(host) - 1) != 0)
        snprintf(host, sizeof(host), "localhost");
    host[sizeof(host) - 1] = '\0';
    if (realpath(cfg->spool_dir, dir) == NULL)
        snprintf(dir, sizeof(dir), "%s", cfg->spool_dir);
    snprintf(cfg->redis_consumer, sizeof(cfg->redis_consumer), "%.64s:%.180s", host, dir);
}

int hv_config_check_system(const hv_config_t *cfg, char *err, size_t errcap)
{
    struct stat st;
    char where[1100];
    if (cfg->input_path != NULL)
        return 0;
    int e = stat(cfg->spool_dir, &st) != 0 ? errno : S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
    if (e == 0)
        return 0;
    const char *why = e == ENOTDIR ? "not a directory" : strerror(e);
    if (hv_config_is_set(cfg, "spool_dir")) {
        hv_config_where(cfg, "spool_dir", where, sizeof(where));
        return hv_errf(err, errcap, uv_translate_sys_error(e),
                       "%s: spool_dir: %s is not a directory (%s)", where, cfg->spool_dir, why);
    }
    return hv_errf(err, errcap, uv_translate_sys_error(e),
                   "%s: spool_dir is not set, and its default %s is not a directory (%s): set "
                   "spool_dir in the configuration or give --spool-dir",
                   cfg->config_file[0] != '\0' ? cfg->config_file : "harvestd", cfg->spool_dir,
                   why);
}

/* proxy_credentials_file: its entries given to every list's proxies that have no credentials
 * of their URL, each entry used by one proxy at least. The file is read here, where the
 * configuration is checked, so that --check-config and the start fail on one that will not
 * do, naming it, its line and never a password. */
static int load_proxy_credentials(hv_config_t *cfg, char *err, size_t errcap)
{
    const char *path = cfg->proxy_credentials_file;
    char *text = hv_xmalloc(HV_PROXY_CREDS_FILE_MAX + 1);
    char where[1100], msg[1400];
    hv_proxy_creds_t creds;
    size_t len = 0;
    int rc = UV_EINVAL;

    memset(&creds, 0, sizeof(creds));
    /* One byte more than the bound tells a longer file. */
    if (hv_secret_file_read(path, "proxy credentials file", text, HV_PROXY_CREDS_FILE_MAX + 1,
                            &len, msg, sizeof(msg)) != 0)
        goto out;
    if (len > HV_PROXY_CREDS_FILE_MAX) {
        snprintf(msg, sizeof(msg), "the proxy credentials file %s holds more than %d bytes",
                 path, HV_PROXY_CREDS_FILE_MAX);
        goto out;
    }
    if (hv_proxy_creds_parse(text, len, path, &creds, msg, sizeof(msg)) != 0)
        goto out;
    hv_proxy_creds_apply(&creds, &cfg->proxy);
    for (unsigned i = 0; i < cfg->nhost_rules; i++)
        hv_proxy_creds_apply(&creds, &cfg->host_rules[i].proxy);
    if (hv_proxy_creds_check(&creds, path, msg, sizeof(msg)) != 0)
        goto out;
    rc = 0;
out:
    if (rc != 0) {
        hv_config_where(cfg, "proxy_credentials_file", where, sizeof(where));
        snprintf(err, errcap, "%s: proxy_credentials_file: %s", where, msg);
    }
    hv_proxy_creds_free(&creds);
    explicit_bzero(text, HV_PROXY_CREDS_FILE_MAX + 1);
    free(text);
    return rc;
}

int hv_config_finish(hv_config_t *cfg, char *err, size_t errcap)
{
    for (unsigned i = 0; i < cfg->nrulesets; i++) {
        char msg[400];
        if (hv_ruleset_finish(cfg->rulesets[i], msg, sizeof(msg)) != 0) {
            snprintf(err, errcap, "rules \"%s\": %s", hv_ruleset_name(cfg->rulesets[i]), msg);
            return UV_EINVAL;
        }
    }
    if (cfg->default_rules[0] != '\0' && hv_config_ruleset(cfg, cfg->default_rules) == NULL) {
        snprintf(err, errcap, "default_rules: no [rules \"%s\"] section", cfg->default_rules);
        return UV_EINVAL;
    }
    if (cfg->parse_jobs == 0) {
        unsigned n = uv_available_parallelism();
        cfg->parse_jobs = n > 0 ? n : 1;
    }
    if (cfg->per_host > cfg->concurrency)
        cfg->per_host = cfg->concurrency;
    /* socks5h sends names to the proxy: the address guard cannot see where they lead. */
    for (unsigned r = 0; !cfg->proxy_remote_dns && r <= cfg->nhost_rules; r++) {
        const hv_proxy_list_t *l = r < cfg->nhost_rules ? &cfg->host_rules[r].proxy : &cfg->proxy;
        for (unsigned i = 0; i < l->count; i++) {
            if (l->proxy[i].kind != HV_PROXY_SOCKS5H)
                continue;
            char where[1100];
            hv_config_where(cfg, "proxy", where, sizeof(where));
            snprintf(err, errcap,
                     "%s: proxy: %s resolves names at the proxy, where the address guard "
                     "cannot check them: set proxy_remote_dns = yes to allow it, or use "
                     "socks5://", where, l->proxy[i].shown);
            return UV_EINVAL;
        }
    }
    if (cfg->proxy_credentials_file[0] != '\0') {
        int rc = load_proxy_credentials(cfg, err, errcap);
        if (rc != 0)
            return rc;
    }
    if (cfg->sources & HV_SOURCE_REDIS) {
        char where[1100], msg[1200];
        hv_redis_addr_t addr;
        if (cfg->redis_url[0] == '\0') {
            hv_config_where(cfg, "source", where, sizeof(where));
            snprintf(err, errcap, "%s: source = redis needs redis_url (redis://HOST:PORT)", where);
            return UV_EINVAL;
        }
        /* The password file is read here too, so that --check-config (and the start) fails
         * on one that would not do; the daemon reads it again when it opens the stream. */
        const char *pwfile =
            cfg->redis_password_file[0] != '\0' ? cfg->redis_password_file : NULL;
        int rc = hv_redis_url_load(cfg->redis_url, pwfile, &addr, msg, sizeof(msg));
        explicit_bzero(&addr, sizeof(addr));
        if (rc != 0) {
            const char *name = rc == HV_REDIS_LOAD_PASSWORD_FILE ? "redis_password_file"
                                                                 : "redis_url";
            hv_config_where(cfg, name, where, sizeof(where));
            snprintf(err, errcap, "%s: %s: %s", where, name, msg);
            return UV_EINVAL;
        }
        if (cfg->redis_stream[0] == '\0' || cfg->redis_group[0] == '\0') {
            snprintf(err, errcap, "redis_stream and redis_group must not be empty");
            return UV_EINVAL;
        }
        if (cfg->redis_consumer[0] == '\0')
            default_consumer(cfg);
    }
    return 0;
}

/* A bound of a numeric directive, as its formatter writes a value. */
static void format_bound(const directive_t *d, uint64_t v, char *out, size_t cap)
{
    unsigned narrow = (unsigned)v;
    types[d->type].format(d, d->width == sizeof(uint64_t) ? (const void *)&v : &narrow, out, cap);
}

int hv_config_describe(size_t i, hv_config_doc_t *doc)
{
    memset(doc, 0, sizeof(*doc));
    if (i >= HV_ARRAY_SIZE(directives))
        return UV_ENOENT;
    const directive_t *d = &directives[i];
    const type_ops_t *t = &types[d->type];
    doc->name = d->name;
    doc->help = d->help;
    doc->value = t->value;
    /* A path is named for what it leads to. */
    size_t len = strlen(d->name);
    if (d->type == T_PATH && len > 4 && strcmp(d->name + len - 4, "_dir") == 0)
        doc->value = "DIR";
    else if (d->type == T_PATH && len > 5 && strcmp(d->name + len - 5, "_file") == 0)
        doc->value = "FILE";
    /* Shown as the formatter writes the value: what one would type to set it again. */
    hv_config_t *def = hv_xmalloc(sizeof(*def));
    hv_config_defaults(def);
    hv_config_format(def, d->name, doc->def, sizeof(doc->def));
    hv_config_free(def);
    free(def);
    if (t->what == NULL)
        return 0;
    size_t n = 0;
    appendf(doc->values, sizeof(doc->values), &n, "%s", t->what);
    if (d->type == T_UINT || d->type == T_SIZE || d->type == T_DURATION) {
        char lo[32], hi[32];
        format_bound(d, d->min, lo, sizeof(lo));
        format_bound(d, d->max, hi, sizeof(hi));
        appendf(doc->values, sizeof(doc->values), &n, "%s from %s to %s",
                d->type == T_UINT ? "" : ",", lo, hi);
    }
    if (d->type == T_DURATION)
        appendf(doc->values, sizeof(doc->values), &n, "; a bare number is in %s",
                d->unit_ms == 1 ? "milliseconds" : "seconds");
    return 0;
}

const char *hv_config_host_key(size_t i)
{
    /* Request headers are no directive: they are the one key read by a setter of their own. */
    if (i < HV_ARRAY_SIZE(host_keys))
        return host_keys[i].name;
    return i == HV_ARRAY_SIZE(host_keys) ? "header" : NULL;
}

void hv_config_print_help(FILE *out)
{
    hv_config_doc_t doc;
    for (size_t i = 0; hv_config_describe(i, &doc) == 0; i++) {
        char opt[64];
        snprintf(opt, sizeof(opt), "--%s", doc.name);
        for (char *p = opt + 2; *p; p++)
            if (*p == '_')
                *p = '-';
        fprintf(out, "  %-22s %s (default %s)\n", opt, doc.help, doc.def[0] ? doc.def : "none");
    }
}
