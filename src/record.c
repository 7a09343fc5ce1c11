/* record.c: output records and their JSON form (cJSON). */
#include "harvestd/record.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#include "harvestd/common.h"
#include "harvestd/utf8.h"

static const char *const hv_error_type_names[HV_ET__COUNT] = {
    [HV_ET_NONE] = "",
    [HV_ET_INVALID_URL] = "InvalidUrl",
    [HV_ET_UNSUPPORTED_SCHEME] = "UnsupportedScheme",
    [HV_ET_DNS] = "DnsError",
    [HV_ET_CONNECT] = "ConnectError",
    [HV_ET_CONNECT_TIMEOUT] = "ConnectTimeout",
    [HV_ET_READ_TIMEOUT] = "ReadTimeout",
    [HV_ET_TOTAL_TIMEOUT] = "TotalTimeout",
    [HV_ET_CONNECTION_RESET] = "ConnectionReset",
    [HV_ET_PROTOCOL] = "ProtocolError",
    [HV_ET_TOO_MANY_REDIRECTS] = "TooManyRedirects",
    [HV_ET_PAGE_TOO_LARGE] = "PageTooLarge",
    [HV_ET_UNEXPECTED_CONTENT_TYPE] = "UnexpectedContentType",
    [HV_ET_HTTP_STATUS] = "HttpStatus",
    [HV_ET_MISSING_TITLE] = "MissingTitle",
    [HV_ET_TOO_DEEPLY_NESTED] = "TooDeeplyNested",
    [HV_ET_CERTIFICATE] = "CertificateError",
    [HV_ET_TLS] = "TlsError",
    [HV_ET_ROBOTS] = "RobotsDisallowed",
    [HV_ET_PARSER_CRASHED] = "ParserCrashed",
    [HV_ET_UNPARSABLE_DOCUMENT] = "UnparsableDocument",
    [HV_ET_TOO_MANY_ATTRIBUTES] = "TooManyAttributes",
    [HV_ET_EXTRACTION_TOO_LARGE] = "ExtractionTooLarge",
    [HV_ET_BLOCKED_ADDRESS] = "BlockedAddress",
    [HV_ET_INVALID_ENTRY] = "InvalidEntry",
    [HV_ET_POISONED] = "Poisoned",
    [HV_ET_BLOCKED] = "Blocked",
    [HV_ET_PROXY] = "ProxyError",
};

/* The line as a C string: a NUL byte becomes U+FFFD (as invalid UTF-8 is shown), so that
 * the record shows the whole line instead of stopping there. */
static char *line_text(const char *line, size_t len)
{
    if (memchr(line, '\0', len) == NULL)
        return hv_xstrndup(line, len);
    static const char fffd[] = "\xef\xbf\xbd";
    char *out = hv_xmalloc(len * 3 + 1), *o = out;
    for (size_t i = 0; i < len; i++) {
        if (line[i] == '\0') {
            memcpy(o, fffd, 3);
            o += 3;
        } else {
            *o++ = line[i];
        }
    }
    *o = '\0';
    return out;
}

hv_record_t *hv_record_new(const char *requested_url, size_t len)
{
    hv_record_t *r = hv_xcalloc(1, sizeof(*r));
    r->requested_url = requested_url != NULL ? line_text(requested_url, len) : hv_xstrdup("");
    r->url = NULL;
    r->ok = 1;
    r->http_status = 0;
    r->title = NULL;
    r->content_type = NULL;
    r->bytes = -1;
    r->redirects = -1;
    r->attempts = -1;
    r->elapsed_ms = -1;
    r->fetched_at_ms = -1;
    r->modified_at_ms = -1;
    r->stage = HV_STAGE_NONE;
    r->error_type = HV_ET_NONE;
    r->detail = HV_D_NONE;
    r->error = NULL;
    return r;
}

void hv_record_fail(hv_record_t *r, hv_stage_t stage, hv_error_type_t type, hv_detail_t detail,
                    const char *arg)
{
    r->ok = 0;
    r->stage = stage;
    r->error_type = type;
    r->detail = detail;
    free(r->error);
    r->error = NULL;
    if (detail != HV_D_NONE) {
        /* Sized exactly, so that no argument is ever cut. */
        size_t n = (size_t)hv_detail_format(NULL, 0, detail, arg) + 1;
        r->error = hv_xmalloc(n);
        hv_detail_format(r->error, n, detail, arg);
    }
}

uint64_t hv_record_body_digest(const void *data, size_t len)
{
    return XXH3_64bits(data, len);
}

void hv_record_free(hv_record_t *r)
{
    if (r == NULL)
        return;
    free(r->requested_url);
    free(r->batch);
    free(r->token);
    free(r->url);
    free(r->proxy);
    free(r->title);
    free(r->content_type);
    free(r->charset);
    free(r->fields);
    free(r->error);
    free(r->host_key);
    if (r->state != NULL) {
        free(r->state->key);
        hv_store_entry_clear(&r->state->prev);
        free(r->state->etag);
        free(r->state->last_modified);
        free(r->state);
    }
    free(r);
}

hv_record_state_t *hv_record_state_new(hv_record_t *r, const char *key)
{
    hv_record_state_t *st = hv_xcalloc(1, sizeof(*st));
    st->key = hv_xstrdup(key);
    hv_store_entry_clear(&st->prev);
    st->max_age_s = -1;
    r->state = st;
    return st;
}

const double hv_parse_bucket_bounds[HV_PARSE_BUCKETS] = {0.001, 0.0025, 0.005, 0.01, 0.025,
                                                         0.05,  0.1,    0.25,  0.5,  1.0};

const uint64_t hv_ok_size_bucket_bounds[HV_OK_SIZE_BUCKETS] = {
    256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304};

int64_t hv_record_ok_body_bytes(const hv_record_t *rec)
{
    /* A 304 or an answer from the store says nothing of what the site serves now. */
    if (!rec->ok || rec->bytes < 0 || rec->not_modified || rec->from_cache)
        return -1;
    return rec->bytes;
}

void hv_record_counts_add(hv_record_counts_t *c, const hv_record_t *rec)
{
    int64_t ok_bytes = hv_record_ok_body_bytes(rec);
    if (ok_bytes >= 0) {
        int i = 0;
        while (i < HV_OK_SIZE_BUCKETS && (uint64_t)ok_bytes > hv_ok_size_bucket_bounds[i])
            i++;
        c->ok_size_buckets[i]++;
        c->ok_size_sum += (uint64_t)ok_bytes;
        c->ok_size_count++;
    }
    if (c->minute != NULL)
        hv_minute_add(c->minute, rec->ok, rec->http_status, ok_bytes, rec->requests);
    if (rec->ok)
        c->ok++;
    else
        c->failed[rec->error_type]++;
    if (rec->http_status >= 100 && rec->http_status < 600)
        c->http_status_class[rec->http_status / 100]++;
    /* A 304 or an answer from the store brought no body. */
    if (rec->bytes > 0 && !rec->not_modified && !rec->from_cache)
        c->body_bytes += (uint64_t)rec->bytes;
    if (rec->parse_ns > 0) {
        double seconds = (double)rec->parse_ns / 1e9;
        int i = 0;
        while (i < HV_PARSE_BUCKETS && seconds > hv_parse_bucket_bounds[i])
            i++;
        c->parse_buckets[i]++;
        c->parse_seconds_sum += seconds;
        c->parse_count++;
    }
}

const char *hv_error_type_name(hv_error_type_t t)
{
    /* A value past the table, or a hole left when the enum grew: "" rather than NULL. */
    if ((unsigned)t >= HV_ET__COUNT || hv_error_type_names[t] == NULL)
        return "";
    return hv_error_type_names[t];
}

const char *hv_stage_name(hv_stage_t s)
{
    switch (s) {
    case HV_STAGE_INPUT:
        return "input";
    case HV_STAGE_DOWNLOAD:
        return "download";
    case HV_STAGE_PARSE:
        return "parse";
    default:
        return NULL;
    }
}

void hv_format_rfc3339_ms(char out[32], int64_t unix_ms)
{
    /* Floor division, so that times before 1970 still get a 0..999 millisecond part. */
    int64_t secs = unix_ms / 1000;
    int64_t ms = unix_ms % 1000;
    if (ms < 0) {
        ms += 1000;
        secs--;
    }
    time_t t = (time_t)secs;
    struct tm tm;
    int n = -1;
    if (gmtime_r(&t, &tm) != NULL)
        n = snprintf(out, 32, "%04lld-%02d-%02dT%02d:%02d:%02d.%03dZ", (long long)tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)ms);
    /* Only instants gmtime_r cannot represent get here: say so, not print a wrong date. */
    if (n < 0 || n >= 32)
        snprintf(out, 32, "%s", "invalid-time");
}

/* cJSON reports allocation failure with NULL; like hv_xmalloc we do not try to go on. */
static void hv_record_oom(void)
{
    fprintf(stderr, "harvestd: out of memory building a JSON record\n");
    abort();
}

/* cJSON copies bytes as they are, so invalid UTF-8 would reach the output file. */
static void hv_record_add_string(cJSON *obj, const char *key, const char *value)
{
    size_t len = strlen(value);
    char *clean = NULL;
    if (!hv_utf8_valid(value, len))
        clean = hv_utf8_sanitize(value, len, NULL);
    if (cJSON_AddStringToObject(obj, key, clean != NULL ? clean : value) == NULL)
        hv_record_oom();
    free(clean);
}

/* cJSON keeps numbers as doubles and prints large ones in exponent form or inexactly; raw
 * digits print every int64 exactly. */
static void hv_record_add_int(cJSON *obj, const char *key, int64_t value)
{
    char digits[24];
    snprintf(digits, sizeof(digits), "%" PRId64, value);
    if (cJSON_AddRawToObject(obj, key, digits) == NULL)
        hv_record_oom();
}

static void hv_record_add_bool(cJSON *obj, const char *key)
{
    if (cJSON_AddTrueToObject(obj, key) == NULL)
        hv_record_oom();
}

/* The record as one line of JSON, without the newline (free with cJSON_free). */
static char *hv_record_print(const hv_record_t *r)
{
    cJSON *obj = cJSON_CreateObject();
    if (obj == NULL)
        hv_record_oom();

    hv_record_add_string(obj, "requested_url", r->requested_url != NULL ? r->requested_url : "");
    if (r->batch != NULL) {
        hv_record_add_string(obj, "batch", r->batch);
        hv_record_add_int(obj, "line", (int64_t)r->line);
    }
    if (r->url != NULL)
        hv_record_add_string(obj, "url", r->url);
    if (r->proxy != NULL)
        hv_record_add_string(obj, "proxy", r->proxy);
    hv_record_add_string(obj, "status", r->ok ? "ok" : "failed");
    if (r->http_status > 0)
        hv_record_add_int(obj, "http_status", r->http_status);
    if (r->http_version != NULL)
        hv_record_add_string(obj, "http_version", r->http_version);
    if (r->title != NULL)
        hv_record_add_string(obj, "title", r->title);
    if (r->fields != NULL) {
        /* Built and printed by cJSON on the parse worker from UTF-8 text: already JSON. */
        cJSON *raw = cJSON_CreateRaw(r->fields);
        if (raw == NULL || !cJSON_AddItemToObject(obj, "fields", raw))
            hv_record_oom();
    }
    if (r->content_type != NULL)
        hv_record_add_string(obj, "content_type", r->content_type);
    if (r->charset != NULL)
        hv_record_add_string(obj, "charset", r->charset);
    if (r->bytes >= 0)
        hv_record_add_int(obj, "bytes", r->bytes);
    if (r->digest_known && r->digest_shown) {
        char hex[17];
        snprintf(hex, sizeof(hex), "%016" PRIx64, r->body_digest);
        hv_record_add_string(obj, "body_digest", hex);
    }
    if (r->redirects >= 0)
        hv_record_add_int(obj, "redirects", r->redirects);
    if (r->attempts >= 0)
        hv_record_add_int(obj, "attempts", r->attempts);
    if (r->elapsed_ms >= 0)
        hv_record_add_int(obj, "elapsed_ms", r->elapsed_ms);
    if (r->fetched_at_ms >= 0) {
        char when[32];
        hv_format_rfc3339_ms(when, r->fetched_at_ms);
        hv_record_add_string(obj, "fetched_at", when);
    }
    if (r->modified_at_ms >= 0) {
        char when[32];
        hv_format_rfc3339_ms(when, r->modified_at_ms);
        hv_record_add_string(obj, "modified_at", when);
    }
    if (r->not_modified)
        hv_record_add_bool(obj, "not_modified");
    if (r->unchanged)
        hv_record_add_bool(obj, "unchanged");
    if (r->from_cache)
        hv_record_add_bool(obj, "from_cache");
    const char *stage = hv_stage_name(r->stage);
    if (stage != NULL)
        hv_record_add_string(obj, "stage", stage);
    if (r->error_type != HV_ET_NONE)
        hv_record_add_string(obj, "error_type", hv_error_type_name(r->error_type));
    if (r->error != NULL)
        hv_record_add_string(obj, "error", r->error);

    char *text = cJSON_PrintUnformatted(obj);
    if (text == NULL)
        hv_record_oom();
    cJSON_Delete(obj);
    return text;
}

int hv_record_append_json(const hv_record_t *r, hv_buf_t *out)
{
    char *text = hv_record_print(r);
    size_t n = strlen(text);
    int rc = 0;

    if (n + 1 > HV_RECORD_LINE_MAX) {
        /* A line the writer could not take would fail the whole batch, and the page would
         * fail it again after every restart: the page fails instead. What is left (URLs,
         * headers, numbers) is bounded far below the limit. */
        char size[32], error[HV_DETAIL_TEXT_MAX];
        hv_format_size(size, sizeof(size), HV_RECORD_LINE_MAX);
        hv_detail_format(error, sizeof(error), HV_D_RECORD_EXCEEDS, size);
        hv_record_t failed = *r;
        failed.title = NULL;
        failed.fields = NULL;
        failed.ok = 0;
        failed.stage = HV_STAGE_PARSE;
        failed.error_type = HV_ET_EXTRACTION_TOO_LARGE;
        failed.detail = HV_D_RECORD_EXCEEDS;
        failed.error = error;
        cJSON_free(text);
        text = hv_record_print(&failed);
        n = strlen(text);
    }

    /* The line and its newline go in whole or not at all: reserve once, then both appends
     * fit. Rewriting cJSON's string to add the '\n' would tie us to its allocator. */
    rc = hv_buf_reserve(out, n + 1);
    if (rc != 0)
        goto out;
    hv_buf_append(out, text, n);
    hv_buf_append(out, "\n", 1);

out:
    cJSON_free(text);
    return rc;
}
