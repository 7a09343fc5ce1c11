/*
 * metrics.c: the page of figures, and a small Prometheus endpoint on the loop.
 *
 * Each client owns a tcp handle and a timer (the whole exchange must finish within
 * CLIENT_TIMEOUT_MS); the client is freed when both are closed. One request per connection:
 * the response is written, then the connection closes, lingering (as nginx's lingering_close
 * does): our side is shut down and whatever the client still sends is read and dropped until
 * it closes, for LINGER_MS and LINGER_BYTES at most. Closing at once with request bytes
 * unread (an oversized or pipelined request) makes the kernel send a reset, which can destroy
 * the response before the client has read it (RFC 9112, section 9.6).
 */
#include "harvestd/metrics.h"

#include <inttypes.h>
#include <llhttp.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "harvestd/common.h"
#include "harvestd/handles.h"
#include "harvestd/procstat.h"
#include "harvestd/utf8.h"

#define MAX_REQUEST 8192
#define MAX_CLIENTS 64
#define CLIENT_TIMEOUT_MS 10000
#define LINGER_MS 2000
#define LINGER_BYTES (1024 * 1024)
#define LAG_PROBE_MS 500

static void appendf(hv_buf_t *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void appendf(hv_buf_t *out, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (n > 0)
        hv_buf_append(out, line, HV_MIN((size_t)n, sizeof(line) - 1));
}

static void counter(hv_buf_t *out, const char *name, const char *help, uint64_t v)
{
    appendf(out, "# HELP %s %s\n# TYPE %s counter\n%s %" PRIu64 "\n", name, help, name, name, v);
}

static void gauge_head(hv_buf_t *out, const char *name, const char *help)
{
    appendf(out, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name);
}

static void sample(hv_buf_t *out, const char *name, double v)
{
    /* Whole numbers (bytes, entries) exactly; others to six digits. */
    if (v > -9007199254740992.0 && v < 9007199254740992.0 && v == (double)(int64_t)v)
        appendf(out, "%s %" PRId64 "\n", name, (int64_t)v);
    else
        appendf(out, "%s %.6g\n", name, v);
}

static void gauge(hv_buf_t *out, const char *name, const char *help, double v)
{
    gauge_head(out, name, help);
    sample(out, name, v);
}

static void render_engine(hv_buf_t *out, const hv_engine_stats_t *s)
{
    const hv_fetch_stats_t *f = &s->fetch;
    const hv_dns_stats_t *d = &s->dns;

    gauge(out, "harvestd_requests_in_flight", "Requests being downloaded.",
                     s->requests_in_flight);
    gauge(out, "harvestd_jobs_waiting", "URLs waiting for a request slot.",
                     s->jobs_waiting);
    gauge(out, "harvestd_page_queue_depth", "Pages waiting for a parser.",
                     s->queue.pages);
    gauge(out, "harvestd_page_queue_bytes", "Bytes of pages waiting for a parser.",
                     (double)s->queue.bytes);
    gauge(out, "harvestd_page_queue_high_water", "Most pages ever waiting at once.",
                     s->queue.hwm_pages);
    gauge(out, "harvestd_page_queue_high_water_bytes",
                     "Most page bytes ever waiting at once.", (double)s->queue.hwm_bytes);
    counter(out, "harvestd_read_pauses_total",
                       "Times the page queue filled and every connection stopped reading.",
                       s->read_pauses);
    gauge(out, "harvestd_batches_active", "Batches running.", s->batches);
    counter(out, "harvestd_connections_opened_total",
                       "TCP connects started (refused ones count, blocked addresses not).",
                       f->conn.opened);
    counter(out, "harvestd_connections_reused_total",
                       "Requests sent on a pooled keep-alive connection.",
                       f->connections_reused);
    counter(out, "harvestd_stale_connection_retries_total",
                       "Requests retried because a pooled connection had been closed.",
                       f->stale_retries);
    counter(out, "harvestd_http2_connections_total",
            "Connections that spoke HTTP/2 (the others of connections_opened spoke HTTP/1.1).",
            f->connections_h2);
    counter(out, "harvestd_http2_streams_total", "HTTP/2 streams opened (one per request).",
            f->h2.streams);
    counter(out, "harvestd_http2_streams_refused_total",
            "HTTP/2 streams the server did not process (REFUSED_STREAM, above a GOAWAY's last "
            "stream): sent again.",
            f->h2.refused);
    counter(out, "harvestd_http2_streams_reset_total", "HTTP/2 streams the server reset.",
            f->h2.reset);
    counter(out, "harvestd_http2_goaways_total", "HTTP/2 GOAWAY frames received.",
            f->h2.goaways);
    counter(out, "harvestd_requests_total",
            "Requests sent: every attempt, redirect hop, stale connection retry, robots.txt.",
            f->requests);
    counter(out, "harvestd_redirects_total", "Redirects followed.", f->redirects);
    appendf(out, "# HELP harvestd_blocked_addresses_total Addresses the address guard refused "
                 "to connect to, by class.\n"
                 "# TYPE harvestd_blocked_addresses_total counter\n");
    for (int c = 1; c < HV_ADDR__COUNT; c++)
        appendf(out, "harvestd_blocked_addresses_total{class=\"%s\"} %" PRIu64 "\n",
                hv_addr_class_name((hv_addr_class_t)c), f->conn.blocked[c]);
    counter(out, "harvestd_retries_total", "Retries scheduled after a transient failure.",
                       s->retries);
    counter(out, "harvestd_dns_lookups_total", "getaddrinfo calls made.", d->lookups);
    counter(out, "harvestd_robots_fetches_total", "robots.txt requests made.",
                       s->polite.robots_fetches);
    counter(out, "harvestd_robots_disallowed_total",
                       "URLs not fetched because robots.txt disallows them.",
                       s->polite.robots_disallowed);
    counter(out, "harvestd_throttle_decreases_total",
                       "Times a host's pace was lowered (429/503, timeouts, latency).",
                       s->polite.decreases);
    counter(out, "harvestd_throttle_increases_total",
                       "Times a throttled host's pace was raised again (adaptive speed-ups).",
                       s->polite.increases);
    gauge(out, "harvestd_hosts_throttled", "Hosts below their configured pace.",
                     s->polite.throttled);
    counter(out, "harvestd_dns_cache_hits_total",
                       "Lookups answered by the cache or a lookup in flight.", d->hits);
    /* One series per configured proxy URL: configured, not input, so bounded. */
    static const struct {
        const char *name, *type, *help;
    } proxy_series[] = {
        {"harvestd_proxy_requests_total", "counter", "Requests written through each proxy."},
        {"harvestd_proxy_failures_total", "counter",
         "Attempts that failed at each proxy (ProxyError)."},
        {"harvestd_proxy_set_aside", "gauge",
         "Whether each proxy is set aside after repeated failures."},
        {"harvestd_proxy_connections", "gauge",
         "Connections open through each proxy, in use and idle."},
        {"harvestd_proxy_waits_total", "counter",
         "Requests that waited for room under proxy_connections."},
    };
    for (unsigned k = 0; f->nproxies > 0 && k < HV_ARRAY_SIZE(proxy_series); k++) {
        appendf(out, "# HELP %s %s\n# TYPE %s %s\n", proxy_series[k].name,
                proxy_series[k].help, proxy_series[k].name, proxy_series[k].type);
        for (unsigned i = 0; i < f->nproxies; i++) {
            const hv_proxy_stats_t *p = &f->proxies[i];
            uint64_t v = k == 0 ? p->requests
                         : k == 1 ? p->failures
                         : k == 2 ? (uint64_t)(p->aside_until > s->taken_ms)
                         : k == 3 ? p->open
                                  : p->waits;
            appendf(out, "%s{proxy=\"%s\"} %" PRIu64 "\n", proxy_series[k].name, p->proxy, v);
        }
    }
    /* The block detector's (zero when it is off: the series exist either way). */
    appendf(out,
            "# HELP harvestd_block_hosts Hosts the block detector suspects or found blocked.\n"
            "# TYPE harvestd_block_hosts gauge\n"
            "harvestd_block_hosts{state=\"suspect\"} %u\n"
            "harvestd_block_hosts{state=\"blocked\"} %u\n"
            "# HELP harvestd_block_verdicts_total Probes that confirmed or cleared a block.\n"
            "# TYPE harvestd_block_verdicts_total counter\n"
            "harvestd_block_verdicts_total{verdict=\"blocked\"} %" PRIu64 "\n"
            "harvestd_block_verdicts_total{verdict=\"cleared\"} %" PRIu64 "\n",
            s->block.suspect, s->block.blocked, s->block.verdicts_blocked,
            s->block.verdicts_cleared);
    counter(out, "harvestd_block_probes_total", "Block probes requested.", s->block.probes);
    gauge(out, "harvestd_block_records_held",
          "Records held until their host's block verdict.", s->block_held);
    if (s->has_tls) {
        appendf(out,
                "# HELP harvestd_tls_handshakes_total TLS handshakes completed.\n"
                "# TYPE harvestd_tls_handshakes_total counter\n"
                "harvestd_tls_handshakes_total{kind=\"full\"} %" PRIu64 "\n"
                "harvestd_tls_handshakes_total{kind=\"resumed\"} %" PRIu64 "\n",
                s->tls.handshakes, s->tls.resumed);
        counter(out, "harvestd_tls_failures_total", "TLS handshakes that failed.",
                           s->tls.failures);
        appendf(out,
                "# HELP harvestd_tls_chains_total Servers' certificate chains checked, by how: "
                "whole against the trust store, from an intermediate verified before, or a "
                "leaf verified before for the same host.\n"
                "# TYPE harvestd_tls_chains_total counter\n"
                "harvestd_tls_chains_total{how=\"verified\"} %" PRIu64 "\n"
                "harvestd_tls_chains_total{how=\"anchored\"} %" PRIu64 "\n"
                "harvestd_tls_chains_total{how=\"cached\"} %" PRIu64 "\n",
                s->tls.chains_verified, s->tls.chains_anchored, s->tls.chains_cached);
    }
}

/* What runs: harvestd's version and the libuv it is linked to, as labels of a constant 1
 * (Prometheus's *_build_info convention, to be joined on by other series' queries). */
static void render_build_info(hv_buf_t *out)
{
    gauge_head(out, "harvestd_build_info",
               "A constant 1 labelled by the version of harvestd and of the libuv it runs on.");
    appendf(out, "harvestd_build_info{version=\"%s\",libuv=\"%s\"} 1\n", HV_VERSION,
            uv_version_string());
}

/* The process_* metrics of Prometheus's client libraries, by their names, types and units.
 * CPU seconds and the start time are printed in full: %.6g would round a start time of
 * 1.7e9 seconds to the hour. */
static void render_process(hv_buf_t *out)
{
    hv_procstat_t ps;
    hv_procstat_read(&ps);
    if (ps.have & HV_PROCSTAT_CPU)
        appendf(out,
                "# HELP process_cpu_seconds_total Total user and system CPU time spent in "
                "seconds.\n# TYPE process_cpu_seconds_total counter\n"
                "process_cpu_seconds_total %.6f\n",
                ps.cpu_seconds);
    if (ps.have & HV_PROCSTAT_OPEN_FDS)
        gauge(out, "process_open_fds", "Number of open file descriptors.", (double)ps.open_fds);
    if (ps.have & HV_PROCSTAT_MAX_FDS)
        gauge(out, "process_max_fds", "Maximum number of open file descriptors.",
              (double)ps.max_fds);
    if (ps.have & HV_PROCSTAT_MEMORY) {
        gauge(out, "process_virtual_memory_bytes", "Virtual memory size in bytes.",
              (double)ps.virtual_bytes);
        gauge(out, "process_resident_memory_bytes", "Resident memory size in bytes.",
              (double)ps.resident_bytes);
    }
    if (ps.have & HV_PROCSTAT_START_TIME)
        appendf(out,
                "# HELP process_start_time_seconds Start time of the process since unix epoch "
                "in seconds.\n# TYPE process_start_time_seconds gauge\n"
                "process_start_time_seconds %.2f\n",
                ps.start_time);
}

static void render_records(hv_buf_t *out, const hv_record_counts_t *m)
{
    uint64_t failed = 0;
    for (int t = 0; t < HV_ET__COUNT; t++)
        failed += m->failed[t];

    appendf(out, "# HELP harvestd_records_total Records written, by status.\n"
                 "# TYPE harvestd_records_total counter\n"
                 "harvestd_records_total{status=\"ok\"} %" PRIu64 "\n"
                 "harvestd_records_total{status=\"failed\"} %" PRIu64 "\n",
            m->ok, failed);
    appendf(out, "# HELP harvestd_record_errors_total Failed records, by error_type.\n"
                 "# TYPE harvestd_record_errors_total counter\n");
    for (int t = 1; t < HV_ET__COUNT; t++)
        appendf(out, "harvestd_record_errors_total{error_type=\"%s\"} %" PRIu64 "\n",
                hv_error_type_name((hv_error_type_t)t), m->failed[t]);
    appendf(out, "# HELP harvestd_http_responses_total Final HTTP responses, by status class.\n"
                 "# TYPE harvestd_http_responses_total counter\n");
    for (int c = 1; c <= 5; c++)
        appendf(out, "harvestd_http_responses_total{class=\"%dxx\"} %" PRIu64 "\n", c,
                m->http_status_class[c]);
    counter(out, "harvestd_downloaded_bytes_total",
                       "Decoded body bytes of the pages downloaded.", m->body_bytes);
    appendf(out, "# HELP harvestd_parse_duration_seconds Time to parse one page.\n"
                 "# TYPE harvestd_parse_duration_seconds histogram\n");
    uint64_t cum = 0;
    for (int i = 0; i < HV_PARSE_BUCKETS; i++) {
        cum += m->parse_buckets[i];
        appendf(out, "harvestd_parse_duration_seconds_bucket{le=\"%g\"} %" PRIu64 "\n",
                hv_parse_bucket_bounds[i], cum);
    }
    cum += m->parse_buckets[HV_PARSE_BUCKETS];
    appendf(out,
            "harvestd_parse_duration_seconds_bucket{le=\"+Inf\"} %" PRIu64 "\n"
            "harvestd_parse_duration_seconds_sum %.6f\n"
            "harvestd_parse_duration_seconds_count %" PRIu64 "\n",
            cum, m->parse_seconds_sum, m->parse_count);
    appendf(out, "# HELP harvestd_ok_body_bytes Decoded body size of the ok pages downloaded "
                 "(not 304s, not answers from the store).\n"
                 "# TYPE harvestd_ok_body_bytes histogram\n");
    cum = 0;
    for (int i = 0; i < HV_OK_SIZE_BUCKETS; i++) {
        cum += m->ok_size_buckets[i];
        appendf(out, "harvestd_ok_body_bytes_bucket{le=\"%" PRIu64 "\"} %" PRIu64 "\n",
                hv_ok_size_bucket_bounds[i], cum);
    }
    cum += m->ok_size_buckets[HV_OK_SIZE_BUCKETS];
    appendf(out,
            "harvestd_ok_body_bytes_bucket{le=\"+Inf\"} %" PRIu64 "\n"
            "harvestd_ok_body_bytes_sum %" PRIu64 "\n"
            "harvestd_ok_body_bytes_count %" PRIu64 "\n",
            cum, m->ok_size_sum, m->ok_size_count);
}

/* The last minute's figures, so that a change shows as a change: the totals move too slowly
 * once a run is long. A gauge whose value is undefined now (a ratio of nothing) has its head
 * and no sample: the series is absent, which neither a graph nor an alert takes for a value. */
static void render_last_minute(hv_buf_t *out, const hv_minute_t *minute)
{
    hv_minute_figures_t fig;
    if (minute != NULL)
        hv_minute_figures(minute, &fig);
    else
        memset(&fig, 0, sizeof(fig));
    uint64_t records = fig.ok + fig.failed;

    appendf(out, "# HELP harvestd_last_minute_records Records counted in the last 60 seconds, "
                 "by status.\n"
                 "# TYPE harvestd_last_minute_records gauge\n"
                 "harvestd_last_minute_records{status=\"ok\"} %" PRIu64 "\n"
                 "harvestd_last_minute_records{status=\"failed\"} %" PRIu64 "\n",
            fig.ok, fig.failed);
    gauge_head(out, "harvestd_last_minute_ok_ratio",
               "ok records / records in the last 60 seconds (absent without records).");
    if (records > 0)
        sample(out, "harvestd_last_minute_ok_ratio", (double)fig.ok / (double)records);
    appendf(out, "# HELP harvestd_last_minute_http_responses Final HTTP responses in the last "
                 "60 seconds, by status class.\n"
                 "# TYPE harvestd_last_minute_http_responses gauge\n");
    for (int c = 1; c <= 5; c++)
        appendf(out, "harvestd_last_minute_http_responses{class=\"%dxx\"} %" PRIu64 "\n", c,
                fig.http_class[c]);
    gauge_head(out, "harvestd_last_minute_ok_body_bytes_mean",
               "Mean decoded body size of the ok pages downloaded in the last 60 seconds "
               "(absent without any).");
    if (fig.ok_sizes.count > 0)
        sample(out, "harvestd_last_minute_ok_body_bytes_mean", hv_sizes_mean(&fig.ok_sizes));
    gauge_head(out, "harvestd_last_minute_ok_body_bytes_median",
               "Median decoded body size of the ok pages downloaded in the last 60 seconds, "
               "within 12.5% (absent without any).");
    if (fig.ok_sizes.count > 0)
        sample(out, "harvestd_last_minute_ok_body_bytes_median",
               round(hv_sizes_median(&fig.ok_sizes)));
    gauge(out, "harvestd_last_minute_requests_per_second",
          "Requests sent for the records of the last 60 seconds, per second.",
          fig.seconds > 0 ? (double)fig.requests / fig.seconds : 0.0);
}

static void render_spool(hv_buf_t *out, const hv_spool_stats_t *s)
{
    counter(out, "harvestd_batches_completed_total", "Spool batches completed.", s->completed);
    counter(out, "harvestd_batches_rejected_total", "Spool files rejected.", s->rejected);
    counter(out, "harvestd_batches_resumed_total", "Spool batches resumed at start-up.",
            s->resumed);
}

static void render_stream(hv_buf_t *out, const hv_stream_stats_t *st)
{
    gauge(out, "harvestd_redis_up", "1 while both Redis connections are open.", (double)st->up);
    gauge(out, "harvestd_stream_entries_held",
          "Stream entries delivered to this daemon and not yet acknowledged.", (double)st->held);
    gauge(out, "harvestd_stream_acks_waiting",
          "Held entries whose record is durable, waiting for their XACK.",
          (double)st->acks_waiting);
    gauge(out, "harvestd_stream_batches_open", "Stream batch outputs open.",
          (double)st->batches);
    counter(out, "harvestd_stream_entries_read_total", "Stream entries received by XREADGROUP.",
            st->read);
    counter(out, "harvestd_stream_entries_reclaimed_total",
            "Stream entries taken over from idle consumers.", st->reclaimed);
    counter(out, "harvestd_stream_entries_acked_total",
            "Stream entries acknowledged after their record was durable.", st->acked);
    counter(out, "harvestd_stream_entries_lost_total",
            "Held entries another consumer took over meanwhile.", st->lost);
    counter(out, "harvestd_stream_entries_invalid_total",
            "Stream entries without a url, with unknown rules, or deleted.", st->invalid);
    counter(out, "harvestd_stream_entries_dead_total",
            "Stream entries moved to the dead letters (S:dead): no batch could take them.",
            st->dead);
    counter(out, "harvestd_redis_disconnects_total", "Redis connections lost.", st->reconnects);
}

static void render_recrawl(hv_buf_t *out, const hv_recrawl_stats_t *st)
{
    counter(out, "harvestd_recrawl_lookups_total", "URLs looked up in the re-crawling store.",
            st->lookups);
    counter(out, "harvestd_recrawl_conditional_total", "URLs fetched with the stored validators.",
            st->conditional);
    counter(out, "harvestd_recrawl_not_modified_total",
            "Conditional requests answered 304 Not Modified.", st->not_modified);
    counter(out, "harvestd_recrawl_unchanged_total", "200 answers whose body was the stored one.",
            st->unchanged);
    counter(out, "harvestd_recrawl_from_cache_total",
            "URLs answered from the store without a request (recrawl_min_age).", st->from_cache);
    counter(out, "harvestd_recrawl_requests_avoided_total", "Requests not made: answers from the store.",
            st->from_cache);
    counter(out, "harvestd_recrawl_body_bytes_avoided_total",
            "Stored body bytes not transferred (304s and answers from the store).",
            st->bytes_avoided);
    counter(out, "harvestd_store_entries_written_total",
            "Store entries committed after their record was durable.", st->stored);
    counter(out, "harvestd_store_entries_not_stored_total",
            "ok records not stored (no-store, too large, store full or failing).", st->not_stored);
    counter(out, "harvestd_store_commits_total", "Store transactions committed.", st->commits);
    counter(out, "harvestd_store_commit_errors_total",
            "Store transactions (commits, or a lookup) that failed (storing then stops).",
            st->commit_errors);
    counter(out, "harvestd_tls_sessions_loaded_total",
            "TLS sessions imported from the store (kept by earlier runs).",
            st->tls_sessions_loaded);
    counter(out, "harvestd_tls_sessions_stored_total", "TLS sessions committed to the store.",
            st->tls_sessions_stored);
    gauge(out, "harvestd_store_full", "1 once the store reached state_max_bytes.",
          (double)st->full);
    gauge(out, "harvestd_store_entries", "Entries in the store.", (double)st->entries);
    gauge(out, "harvestd_store_tls_sessions", "TLS sessions in the store.",
          (double)st->tls_sessions);
    gauge(out, "harvestd_store_bytes", "Bytes of the store in use.", (double)st->bytes_used);
    gauge(out, "harvestd_store_max_bytes", "The store's bound (state_max_bytes).",
          (double)st->map_bytes);
}

/* ---- the running batches ---- */

/* A label value's room: a name of HV_METRICS_LABEL_MAX bytes, some escaped, and a " #N". */
#define LABEL_CAP (HV_METRICS_LABEL_MAX * 2 + 16)

/*
 * A batch name comes from outside (a file name, a stream's batch): as a label value it is
 * valid UTF-8, cut to HV_METRICS_LABEL_MAX bytes on a character's boundary (and to what its
 * escapes leave room for), "..." marking the cut, with \\, \" and \n escaped as the text
 * format wants and other control bytes written as the text \xHH (as in the log).
 */
static void label_value(char *out, size_t cap, const char *name)
{
    size_t len, n = 0;
    char *clean = hv_utf8_sanitize(name, strlen(name), &len);
    int cut = len > HV_METRICS_LABEL_MAX;
    if (cut)
        len = hv_utf8_cut(clean, len, HV_METRICS_LABEL_MAX - 3);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)clean[i];
        char esc[8];
        if (c == '\\' || c == '"')
            snprintf(esc, sizeof(esc), "\\%c", c);
        else if (c == '\n')
            snprintf(esc, sizeof(esc), "\\n");
        else if (c < 0x20 || c == 0x7f)
            snprintf(esc, sizeof(esc), "\\\\x%02X", c);
        else
            snprintf(esc, sizeof(esc), "%c", c);
        size_t m = strlen(esc);
        /* A character's bytes stay together; room is kept for "..." and the NUL. */
        size_t end = i + 1;
        while (end < len && ((unsigned char)clean[end] & 0xc0) == 0x80)
            end++;
        if (n + m + (end - i - 1) + 4 > cap) {
            cut = 1;
            break;
        }
        memcpy(out + n, esc, m);
        n += m;
        memcpy(out + n, clean + i + 1, end - i - 1);
        n += end - i - 1;
        i = end - 1;
    }
    out[n] = '\0';
    if (cut)
        snprintf(out + n, cap - n, "...");
    free(clean);
}

static int label_taken(char labels[][LABEL_CAP], unsigned i)
{
    for (unsigned j = 0; j < i; j++)
        if (strcmp(labels[i], labels[j]) == 0)
            return 1;
    return 0;
}

/* Gauges per running batch, labelled by its name; a batch's series go when it ends. Names
 * that read the same once cut (or a spool file and a stream batch of one name) get " #2",
 * " #3"... so that no two series share a label set. */
static void render_batches(hv_buf_t *out, const hv_bhost_t *host)
{
    hv_hosted_progress_t v[HV_METRICS_BATCHES_MAX];
    char labels[HV_METRICS_BATCHES_MAX][LABEL_CAP];
    unsigned running = hv_bhost_progress(host, v, HV_METRICS_BATCHES_MAX);
    unsigned n = HV_MIN(running, (unsigned)HV_METRICS_BATCHES_MAX);
    for (unsigned i = 0; i < n; i++) {
        char base[LABEL_CAP - 8];
        label_value(base, sizeof(base), v[i].name);
        snprintf(labels[i], LABEL_CAP, "%s", base);
        for (unsigned k = 2; label_taken(labels, i); k++)
            snprintf(labels[i], LABEL_CAP, "%s #%u", base, k);
    }
    char help[128];
    snprintf(help, sizeof(help),
             "Running batches beyond the first %d, left out of the harvestd_batch_* series.",
             HV_METRICS_BATCHES_MAX);
    gauge(out, "harvestd_batches_unlabelled", help, running - n);
    gauge_head(out, "harvestd_batch_lines_read",
               "Input lines each running batch has read (lines skipped on resume too).");
    for (unsigned i = 0; i < n; i++)
        appendf(out, "harvestd_batch_lines_read{batch=\"%s\"} %" PRIu64 "\n", labels[i],
                v[i].p.lines_read);
    /* Not "_total": that suffix is for counters. */
    gauge_head(out, "harvestd_batch_input_lines",
               "Input lines of each running batch, once its input is read whole.");
    for (unsigned i = 0; i < n; i++)
        if (v[i].p.total_exact)
            appendf(out, "harvestd_batch_input_lines{batch=\"%s\"} %" PRIu64 "\n", labels[i],
                    v[i].p.lines_total);
    gauge_head(out, "harvestd_batch_lines_done",
               "Input lines of each running batch that have their record (resumed ones too).");
    for (unsigned i = 0; i < n; i++)
        appendf(out, "harvestd_batch_lines_done{batch=\"%s\"} %" PRIu64 "\n", labels[i],
                v[i].p.done);
    gauge_head(out, "harvestd_batch_records",
               "Records of each running batch, by status (those kept from before a resume "
               "too).");
    for (unsigned i = 0; i < n; i++) {
        appendf(out, "harvestd_batch_records{batch=\"%s\",status=\"ok\"} %" PRIu64 "\n",
                labels[i], v[i].p.ok);
        appendf(out, "harvestd_batch_records{batch=\"%s\",status=\"failed\"} %" PRIu64 "\n",
                labels[i], v[i].p.failed);
    }
    gauge_head(out, "harvestd_batch_pages_per_second",
               "Records per second of each running batch since it started.");
    for (unsigned i = 0; i < n; i++)
        appendf(out, "harvestd_batch_pages_per_second{batch=\"%s\"} %.6g\n", labels[i],
                v[i].p.pages_per_s);
    gauge_head(out, "harvestd_batch_eta_seconds",
               "Seconds each running batch still needs at its pace, from its total or an "
               "estimate of it (absent while neither is known).");
    for (unsigned i = 0; i < n; i++)
        if (v[i].p.eta_s >= 0)
            appendf(out, "harvestd_batch_eta_seconds{batch=\"%s\"} %.0f\n", labels[i],
                    v[i].p.eta_s);
}

/* ---- server ---- */

typedef struct client_s {
    struct hv_metrics_server_s *srv;
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_write_t wreq;
    uv_shutdown_t sreq;
    llhttp_t parser;
    char url[64];
    size_t url_len;
    int url_bad;
    size_t bytes;
    int responded;
    hv_handles_t handles;      /* tcp, timer */
    hv_buf_t response;
    char rbuf[2048];
    TAILQ_ENTRY(client_s) link;
} client_t;

struct hv_metrics_server_s {
    uv_loop_t *loop;
    uv_tcp_t listener;
    uv_timer_t lag;
    uint64_t lag_expected_ns;
    double lag_seconds;       /* at the last probe */
    double lag_max_seconds;
    const hv_metrics_view_t *view;
    TAILQ_HEAD(, client_s) clients;
    unsigned nclients;
    hv_handles_t handles;      /* lag probe, listener */
    int handles_closed;
    int closing;
    void (*done)(void *ud);
    void *done_ud;
};

static int on_url(llhttp_t *p, const char *at, size_t len);
static int on_request_complete(llhttp_t *p);

static const llhttp_settings_t req_settings = {
    .on_url = on_url,
    .on_message_complete = on_request_complete,
};

void hv_metrics_render(hv_buf_t *out, const hv_metrics_view_t *view,
                       const hv_metrics_server_t *m)
{
    static const hv_record_counts_t none;
    render_build_info(out);
    render_process(out);
    render_records(out, view->records != NULL ? view->records : &none);
    render_last_minute(out, view->records != NULL ? view->records->minute : NULL);
    gauge(out, "harvestd_event_loop_lag_seconds", "Delay of the event loop at the last probe.",
          m != NULL ? m->lag_seconds : 0.0);
    gauge(out, "harvestd_event_loop_lag_max_seconds", "Largest event-loop delay seen.",
          m != NULL ? m->lag_max_seconds : 0.0);
    if (view->engine != NULL) {
        hv_engine_stats_t st;
        hv_engine_stats(view->engine, &st);
        render_engine(out, &st);
    }
    if (view->spool != NULL) {
        hv_spool_stats_t s;
        hv_spool_stats(view->spool, &s);
        render_spool(out, &s);
    }
    if (view->stream != NULL) {
        hv_stream_stats_t s;
        hv_stream_stats(view->stream, &s);
        render_stream(out, &s);
    }
    if (view->recrawl != NULL) {
        hv_recrawl_stats_t s;
        hv_recrawl_stats(view->recrawl, &s);
        render_recrawl(out, &s);
    }
    if (view->host != NULL)
        render_batches(out, view->host);
}

static void maybe_done(struct hv_metrics_server_s *m)
{
    if (m->closing && m->handles_closed && m->nclients == 0) {
        void (*done)(void *) = m->done;
        void *ud = m->done_ud;
        free(m);
        if (done != NULL)
            done(ud);
    }
}

static void on_client_closed(hv_handles_t *hs)
{
    client_t *c = hv_container_of(hs, client_t, handles);
    struct hv_metrics_server_s *m = c->srv;
    TAILQ_REMOVE(&m->clients, c, link);
    m->nclients--;
    hv_buf_free(&c->response);
    free(c);
    maybe_done(m);
}

static void client_close(client_t *c)
{
    hv_handles_close_all(&c->handles);
}

static void on_client_timeout(uv_timer_t *t);
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);

static void on_linger_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    client_t *c = s->data;
    (void)buf;
    if (nread == 0)
        return;
    if (nread < 0) {
        client_close(c); /* the client closed too (or failed): done */
        return;
    }
    c->bytes += (size_t)nread;
    if (c->bytes > MAX_REQUEST + LINGER_BYTES)
        client_close(c);
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
    if (status != 0)
        client_close(req->data); /* UV_ECANCELED when closed meanwhile: idempotent */
}

static void on_written(uv_write_t *req, int status)
{
    client_t *c = req->data;
    if (status != 0 || uv_is_closing((uv_handle_t *)&c->tcp)) {
        client_close(c);
        return;
    }
    c->sreq.data = c;
    if (uv_shutdown(&c->sreq, (uv_stream_t *)&c->tcp, on_shutdown) != 0 ||
        uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_linger_read) != 0) {
        client_close(c);
        return;
    }
    uv_timer_start(&c->timer, on_client_timeout, LINGER_MS, 0);
}

static void respond(client_t *c, int code, const char *reason, const char *ctype, hv_buf_t *body)
{
    char head[256];
    if (c->responded)
        return;
    c->responded = 1;
    uv_read_stop((uv_stream_t *)&c->tcp);
    size_t blen = body != NULL ? body->len : strlen(reason) + 1;
    int n = snprintf(head, sizeof(head),
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n",
                     code, reason, ctype, blen);
    hv_buf_init(&c->response, (size_t)64 << 20);
    hv_buf_append(&c->response, head, (size_t)n);
    if (body != NULL) {
        hv_buf_append(&c->response, body->data, body->len);
    } else {
        hv_buf_append(&c->response, reason, strlen(reason));
        hv_buf_append(&c->response, "\n", 1);
    }
    uv_buf_t b = uv_buf_init(c->response.data, (unsigned)c->response.len);
    c->wreq.data = c;
    if (uv_write(&c->wreq, (uv_stream_t *)&c->tcp, &b, 1, on_written) != 0)
        client_close(c);
}

static int on_url(llhttp_t *p, const char *at, size_t len)
{
    client_t *c = p->data;
    if (c->url_len + len >= sizeof(c->url)) {
        c->url_bad = 1;
        return 0;
    }
    memcpy(c->url + c->url_len, at, len);
    c->url_len += len;
    c->url[c->url_len] = '\0';
    return 0;
}

static int on_request_complete(llhttp_t *p)
{
    client_t *c = p->data;
    struct hv_metrics_server_s *m = c->srv;
    if (llhttp_get_method(p) != HTTP_GET) {
        respond(c, 405, "Method Not Allowed", "text/plain", NULL);
    } else if (c->url_bad || (strcmp(c->url, "/metrics") != 0 &&
                              strncmp(c->url, "/metrics?", 9) != 0)) {
        respond(c, 404, "Not Found", "text/plain", NULL);
    } else {
        hv_buf_t body;
        hv_buf_init(&body, (size_t)16 << 20);
        hv_metrics_render(&body, m->view, m);
        respond(c, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", &body);
        hv_buf_free(&body);
    }
    return HPE_PAUSED;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    client_t *c = h->data;
    (void)suggested;
    buf->base = c->rbuf;
    buf->len = sizeof(c->rbuf);
}

static void on_client_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    client_t *c = s->data;
    (void)buf;
    if (nread == 0 || c->responded)
        return;
    if (nread < 0) {
        client_close(c);
        return;
    }
    c->bytes += (size_t)nread;
    if (c->bytes > MAX_REQUEST) {
        respond(c, 400, "Bad Request", "text/plain", NULL);
        return;
    }
    llhttp_errno_t e = llhttp_execute(&c->parser, c->rbuf, (size_t)nread);
    if (e != HPE_OK && e != HPE_PAUSED)
        respond(c, 400, "Bad Request", "text/plain", NULL);
}

static void on_client_timeout(uv_timer_t *t)
{
    client_close(t->data);
}

static void on_connection(uv_stream_t *server, int status)
{
    struct hv_metrics_server_s *m = server->data;
    if (status != 0 || m->closing)
        return;
    client_t *c = hv_xcalloc(1, sizeof(*c));
    c->srv = m;
    uv_tcp_init(m->loop, &c->tcp);
    uv_timer_init(m->loop, &c->timer);
    c->tcp.data = c;
    c->timer.data = c;
    hv_handles_init(&c->handles, on_client_closed);
    hv_handles_own(&c->handles, (uv_handle_t *)&c->tcp);
    hv_handles_own(&c->handles, (uv_handle_t *)&c->timer);
    TAILQ_INSERT_TAIL(&m->clients, c, link);
    m->nclients++;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0) {
        client_close(c);
        return;
    }
    if (m->nclients > MAX_CLIENTS) {
        /* Full of idle or slow clients: the oldest one goes, so a scrape always gets in. */
        client_t *old = TAILQ_FIRST(&m->clients);
        while (old != NULL && uv_is_closing((uv_handle_t *)&old->tcp))
            old = TAILQ_NEXT(old, link);
        if (old != NULL && old != c)
            client_close(old);
    }
    llhttp_init(&c->parser, HTTP_REQUEST, &req_settings);
    c->parser.data = c;
    uv_timer_start(&c->timer, on_client_timeout, CLIENT_TIMEOUT_MS, 0);
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_client_read);
}

static void on_lag_probe(uv_timer_t *t)
{
    struct hv_metrics_server_s *m = t->data;
    uint64_t now = uv_hrtime();
    double lag = now > m->lag_expected_ns ? (double)(now - m->lag_expected_ns) / 1e9 : 0.0;
    m->lag_seconds = lag;
    if (lag > m->lag_max_seconds)
        m->lag_max_seconds = lag;
    m->lag_expected_ns = now + (uint64_t)LAG_PROBE_MS * 1000000u;
}

static void on_server_closed(hv_handles_t *hs)
{
    struct hv_metrics_server_s *m = hv_container_of(hs, struct hv_metrics_server_s, handles);
    m->handles_closed = 1;
    maybe_done(m);
}

static struct hv_metrics_server_s *server_new(uv_loop_t *loop)
{
    struct hv_metrics_server_s *m = hv_xcalloc(1, sizeof(*m));
    m->loop = loop;
    TAILQ_INIT(&m->clients);
    uv_timer_init(loop, &m->lag);
    m->lag.data = m;
    hv_handles_init(&m->handles, on_server_closed);
    hv_handles_own(&m->handles, (uv_handle_t *)&m->lag);
    m->lag_expected_ns = uv_hrtime() + (uint64_t)LAG_PROBE_MS * 1000000u;
    uv_timer_start(&m->lag, on_lag_probe, LAG_PROBE_MS, LAG_PROBE_MS);
    uv_unref((uv_handle_t *)&m->lag); /* the probe alone never keeps the loop alive */
    return m;
}

int hv_metrics_parse_listen(const char *listen, struct sockaddr_storage *ss)
{
    char host[128];
    const char *colon = strrchr(listen, ':');
    if (colon == NULL || colon == listen)
        return UV_EINVAL;
    size_t hlen = (size_t)(colon - listen);
    int bracketed = listen[0] == '[' && hlen >= 2 && listen[hlen - 1] == ']';
    if (bracketed) {
        listen++;
        hlen -= 2;
    }
    if (hlen >= sizeof(host))
        return UV_EINVAL;
    memcpy(host, listen, hlen);
    host[hlen] = '\0';
    if (colon[1] < '0' || colon[1] > '9')
        return UV_EINVAL;
    char *end;
    unsigned long port = strtoul(colon + 1, &end, 10);
    if (*end != '\0' || port > 65535)
        return UV_EINVAL;
    memset(ss, 0, sizeof(*ss));
    /* localhost is taken as a name for 127.0.0.1, never looked up: the resolver would block
     * the start on a DNS server for a name whose answer is known, and /etc/hosts may also
     * give ::1, or nothing. */
    if (!bracketed && hv_ascii_case_is(host, hlen, "localhost"))
        return uv_ip4_addr("127.0.0.1", (int)port, (struct sockaddr_in *)ss);
    if (uv_ip4_addr(host, (int)port, (struct sockaddr_in *)ss) == 0)
        return 0;
    if (uv_ip6_addr(host, (int)port, (struct sockaddr_in6 *)ss) == 0)
        return 0;
    return UV_EINVAL;
}

int hv_metrics_start(uv_loop_t *loop, const char *listen, const hv_metrics_view_t *view,
                     hv_metrics_server_t **out, char *err, size_t errcap)
{
    struct sockaddr_storage ss;
    *out = NULL;
    if (hv_metrics_parse_listen(listen, &ss) != 0) {
        snprintf(err, errcap,
                 "metrics_listen: '%s' is not ADDRESS:PORT (127.0.0.1:9464, localhost:9464, "
                 "[::1]:9464)",
                 listen);
        return UV_EINVAL;
    }
    struct hv_metrics_server_s *m = server_new(loop);
    m->view = view;
    uv_tcp_init(loop, &m->listener);
    m->listener.data = m;
    hv_handles_own(&m->handles, (uv_handle_t *)&m->listener);
    int rc = uv_tcp_bind(&m->listener, (struct sockaddr *)&ss, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&m->listener, 64, on_connection);
    if (rc != 0) {
        snprintf(err, errcap, "metrics_listen: cannot listen on %s: %s", listen, uv_strerror(rc));
        hv_metrics_close(m, NULL, NULL);
        return rc;
    }
    *out = m;
    return 0;
}

void hv_metrics_close(hv_metrics_server_t *m, void (*done)(void *ud), void *ud)
{
    client_t *c;
    m->closing = 1;
    m->done = done;
    m->done_ud = ud;
    TAILQ_FOREACH(c, &m->clients, link)
        client_close(c);
    hv_handles_close_all(&m->handles);
}
