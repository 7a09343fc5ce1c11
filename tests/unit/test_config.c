#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "harvestd/common.h"
#include "harvestd/config.h"
#include "harvestd/http.h"
#include "test.h"

TEST_IMPL(config_defaults)
{
    hv_config_t c;
    hv_config_defaults(&c);
    ASSERT_EQ(32, c.concurrency);
    ASSERT_EQ(4, c.per_host);
    ASSERT_EQ(2u << 20, c.max_bytes);
    ASSERT_EQ(64u << 10, c.max_header_bytes);
    ASSERT_EQ(10, c.max_redirects);
    ASSERT_EQ(5000, c.connect_timeout_ms);
    ASSERT_EQ(15000, c.read_timeout_ms);
    ASSERT_EQ(30000, c.total_timeout_ms);
    ASSERT_EQ(200, c.flush_ms);
    ASSERT(strncmp(c.user_agent, "harvestd/", 9) == 0);
}

TEST_IMPL(config_units_and_dashes)
{
    hv_config_t c;
    char err[256];
    hv_config_defaults(&c);
    ASSERT_OK(hv_config_set(&c, "max-bytes", "64k", err, sizeof(err)));
    ASSERT_EQ(65536, c.max_bytes);
    ASSERT_OK(hv_config_set(&c, "read_timeout", "500ms", err, sizeof(err)));
    ASSERT_EQ(500, c.read_timeout_ms);
    ASSERT_OK(hv_config_set(&c, "read_timeout", "2", err, sizeof(err)));
    ASSERT_EQ(2000, c.read_timeout_ms);
    ASSERT_OK(hv_config_set(&c, "flush-ms", "50", err, sizeof(err)));
    ASSERT_EQ(50, c.flush_ms);
}

TEST_IMPL(config_rejects_bad_values)
{
    hv_config_t c;
    char err[256];
    hv_config_defaults(&c);
    ASSERT_EQ(UV_ENOENT, hv_config_set(&c, "no_such_thing", "1", err, sizeof(err)));
    ASSERT_EQ(UV_EINVAL, hv_config_set(&c, "concurrency", "12x", err, sizeof(err)));
    ASSERT_EQ(UV_EINVAL, hv_config_set(&c, "concurrency", "-1", err, sizeof(err)));
    ASSERT_EQ(UV_ERANGE, hv_config_set(&c, "concurrency", "0", err, sizeof(err)));
    ASSERT(strstr(err, "concurrency") != NULL);
    ASSERT_EQ(UV_EINVAL, hv_config_set(&c, "max_bytes", "12q", err, sizeof(err)));
    ASSERT_EQ(UV_ERANGE, hv_config_set(&c, "max_bytes", "99999999999999999999", err, sizeof(err)));
    ASSERT_EQ(UV_EINVAL, hv_config_set(&c, "user_agent", "a\r\nX-Injected: 1", err, sizeof(err)));
    ASSERT_EQ(UV_EINVAL, hv_config_set(&c, "log_level", "loud", err, sizeof(err)));
    ASSERT_EQ(32, c.concurrency); /* unchanged by failures */
}

/* Every default, written by its type's formatter, reads back to the same field: a config
 * built only from formatted text equals the defaults byte for byte. */
TEST_IMPL(config_defaults_survive_format_and_set)
{
    hv_config_t *def = calloc(1, sizeof(*def)), *again = calloc(1, sizeof(*again));
    char text[2048], text2[2048], err[256];
    const char *name;
    size_t n = 0;
    ASSERT_NOT_NULL(def);
    ASSERT_NOT_NULL(again);
    hv_config_defaults(def);
    for (n = 0; (name = hv_config_directive_name(n)) != NULL; n++) {
        ASSERT_OK(hv_config_format(def, name, text, sizeof(text)));
        ASSERT_OK(hv_config_set(again, name, text, err, sizeof(err)));
        ASSERT_OK(hv_config_format(again, name, text2, sizeof(text2)));
        ASSERT_STR_EQ(text, text2);
    }
    ASSERT_GT(n, 30);
    ASSERT_OK(memcmp(def, again, sizeof(*def)));
    free(def);
    free(again);
}

/* `name = value` in, `want` out. */
static void check_format(hv_config_t *c, const char *name, const char *value, const char *want)
{
    char text[256], err[256];
    if (hv_config_set(c, name, value, err, sizeof(err)) != 0)
        hv_test_fail(__FILE__, __LINE__, "%s = %s: %s", name, value, err);
    ASSERT_OK(hv_config_format(c, name, text, sizeof(text)));
    ASSERT_STR_EQ(want, text);
}

TEST_IMPL(config_format_canonical_text)
{
    hv_config_t c;
    char text[8];
    hv_config_defaults(&c);
    check_format(&c, "concurrency", "007", "7");
    check_format(&c, "max_bytes", "1536", "1536");
    check_format(&c, "max_bytes", "2048k", "2m");
    check_format(&c, "max_bytes", "1G", "1g");
    check_format(&c, "page_queue_bytes", "3072", "3k");
    check_format(&c, "read_timeout", "2", "2s");
    check_format(&c, "read_timeout", "1m", "60s");
    check_format(&c, "read_timeout", "1500ms", "1500ms");
    check_format(&c, "total_timeout", "120m", "2h");
    check_format(&c, "dns_ttl", "0", "0s");
    check_format(&c, "flush_ms", "1s", "1000ms");
    check_format(&c, "host_delay", "0", "0ms");
    check_format(&c, "host_delay_jitter", "0.25", "0.25");
    check_format(&c, "host_delay_jitter", "1e-3", "0.001");
    check_format(&c, "host_delay_jitter", "1", "1");
    check_format(&c, "retry_statuses", "503, 429,503", "429,503");
    check_format(&c, "retry_statuses", "", "");
    check_format(&c, "insecure", "on", "yes");
    check_format(&c, "insecure", "0", "no");
    check_format(&c, "log_level", "debug", "debug");
    check_format(&c, "log_level", "error", "error");
    check_format(&c, "fsync", "always", "always");
    check_format(&c, "fsync", "never", "never");
    check_format(&c, "user-agent", "an agent/1.0", "an agent/1.0");
    check_format(&c, "ca_file", "", "");
    ASSERT_EQ(HV_FSYNC_NEVER, c.fsync);
    ASSERT_EQ(UV_ENOENT, hv_config_format(&c, "no_such_thing", text, sizeof(text)));
    ASSERT_STR_EQ("", text);
    ASSERT_EQ(UV_ENOBUFS, hv_config_format(&c, "user_agent", text, sizeof(text)));
    check_format(&c, "retry_statuses", "429,503", "429,503");
    ASSERT_EQ(UV_ENOBUFS, hv_config_format(&c, "retry_statuses", text, 6));
    ASSERT_EQ(5, (int)strlen(text)); /* cut, still a string */
}

/* Each type's message, word for word: scripts and tests match on them. */
TEST_IMPL(config_error_messages)
{
    static const struct {
        const char *name, *value, *message;
        int code;
    } cases[] = {
        {"concurrency", "abc", "concurrency: 'abc' is not a whole number", UV_EINVAL},
        {"concurrency", "0", "concurrency: '0' is out of range (1..10000)", UV_ERANGE},
        {"max_bytes", "lots", "max_bytes: 'lots' is not a size (a number with k, m or g)",
         UV_EINVAL},
        {"max_bytes", "1", "max_bytes: '1' is out of range (1024..1073741824)", UV_ERANGE},
        {"read_timeout", "soon",
         "read_timeout: 'soon' is not a duration (a number with ms, s, m or h)", UV_EINVAL},
        {"rescan_interval", "10ms", "rescan_interval: '10ms' is out of range (100ms..3600000ms)",
         UV_ERANGE},
        {"user_agent", "", "user_agent: '' is empty or too long", UV_EINVAL},
        {"user_agent", "a\tb", "user_agent: control character in 'a\tb'", UV_EINVAL},
        {"insecure", "maybe", "insecure: 'maybe' is not yes or no", UV_EINVAL},
        {"log_level", "loud",
         "log_level: 'loud' is not one of debug, info, notice, warning, error", UV_EINVAL},
        {"fsync", "sometimes", "fsync: 'sometimes' is not never, interval or always",
         UV_EINVAL},
        {"retry_statuses", "429,x", "retry_statuses: '429,x' is not a list of HTTP statuses "
                                    "(e.g. 429,503)", UV_EINVAL},
        {"retry_statuses", "600", "retry_statuses: '600' is not a list of HTTP statuses "
                                  "(e.g. 429,503)", UV_EINVAL},
        {"host_delay_jitter", "1.5", "host_delay_jitter: '1.5' is not a fraction from 0 to 1",
         UV_EINVAL},
        {"frobnicate", "1", "unknown directive 'frobnicate'", UV_ENOENT},
    };
    hv_config_t c, before;
    char err[256];
    hv_config_defaults(&c);
    memcpy(&before, &c, sizeof(c));
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ASSERT_EQ(cases[i].code, hv_config_set(&c, cases[i].name, cases[i].value, err,
                                               sizeof(err)));
        ASSERT_STR_EQ(cases[i].message, err);
    }
    char path[4096];
    memset(path, 'p', sizeof(path) - 1);
    path[sizeof(path) - 1] = '\0';
    ASSERT_EQ(UV_EINVAL, hv_config_set(&c, "spool_dir", path, err, sizeof(err)));
    ASSERT_STR_EQ("spool_dir: path too long", err);
    ASSERT_OK(memcmp(&before, &c, sizeof(c))); /* no failure touched a field */
}

/* The level words of the formatter are the ones the log module parses. */
TEST_IMPL(config_log_level_words_match_the_log_module)
{
    hv_config_t c;
    char text[32];
    hv_config_defaults(&c);
    for (int l = HV_LOG_DEBUG; l <= HV_LOG_ERROR; l++) {
        hv_log_level_t parsed;
        c.log_level = (hv_log_level_t)l;
        ASSERT_OK(hv_config_format(&c, "log_level", text, sizeof(text)));
        ASSERT_OK(hv_log_level_parse(text, &parsed));
        ASSERT_EQ(l, (int)parsed);
    }
}

/* Load `text` as a config file; the message, if any, without its "FILE:" prefix. */
static int load_text(hv_config_t *c, const char *text, char *err, size_t errcap)
{
    char path[] = "/tmp/harvestd-test-config-XXXXXX";
    int fd = mkstemp(path);
    ASSERT_GE(fd, 0);
    FILE *f = fdopen(fd, "w");
    ASSERT_NOT_NULL(f);
    fputs(text, f);
    fclose(f);
    err[0] = '\0';
    int rc = hv_config_load_file(c, path, err, errcap);
    unlink(path);
    size_t plen = strlen(path);
    if (strncmp(err, path, plen) == 0 && err[plen] == ':')
        memmove(err, err + plen + 1, strlen(err + plen + 1) + 1);
    return rc;
}

/* block_detection per [host]: exact name, else the longest "*.suffix", else the global. */
TEST_IMPL(config_host_block_detection)
{
    hv_config_t c;
    char err[512];
    hv_config_defaults(&c);
    ASSERT_OK(load_text(&c,
                        "[host \"*.example.org\"]\n"
                        "block_detection = no\n"
                        "[host \"www.example.org\"]\n"
                        "block_detection = yes\n"
                        "[host \"slow.example.net\"]\n"
                        "per_host = 1\n",
                        err, sizeof(err)));
    ASSERT_OK(hv_config_finish(&c, err, sizeof(err)));
    ASSERT_EQ(1, c.block_detection);
    ASSERT_EQ(0, hv_config_host_block_detection(&c, "a.example.org"));
    ASSERT_EQ(1, hv_config_host_block_detection(&c, "www.example.org"));
    ASSERT_EQ(1, hv_config_host_block_detection(&c, "slow.example.net")); /* not set there */
    ASSERT_EQ(1, hv_config_host_block_detection(&c, "example.com"));
    hv_config_free(&c);
}

TEST_IMPL(config_host_and_rules_sections)
{
    hv_config_t c;
    char err[512], where[1200];
    unsigned per_host;
    uint64_t delay;
    double jitter;
    hv_config_defaults(&c);
    ASSERT_OK(load_text(&c,
                        "per_host = 6\n"
                        "[host \"Example.ORG\"]\n"
                        "per_host = 2\n"
                        "host-delay = 1s\n"
                        "[ HOST  \"*.example.net\" ]\n"
                        "host_delay_jitter = 0.5\n"
                        "[rules \"Books\"]\n"
                        "title = h1\n",
                        err, sizeof(err)));
    ASSERT_OK(hv_config_finish(&c, err, sizeof(err)));
    hv_config_host_policy(&c, "example.org", &per_host, &delay, &jitter);
    ASSERT_EQ(2, per_host);
    ASSERT_EQ(1000, delay);
    ASSERT(jitter == 0.0);
    hv_config_host_policy(&c, "a.b.example.net", &per_host, &delay, &jitter);
    ASSERT_EQ(6, per_host);
    ASSERT_EQ(0, delay);
    ASSERT(jitter == 0.5);
    hv_config_host_policy(&c, "example.net", &per_host, &delay, &jitter);
    ASSERT(jitter == 0.0);
    ASSERT_NOT_NULL(hv_config_ruleset(&c, "Books")); /* rule set names keep their case */
    ASSERT_NULL(hv_config_ruleset(&c, "books"));
    /* Section keys are not directives: only the global per_host has an origin. */
    hv_config_where(&c, "per_host", where, sizeof(where));
    ASSERT(strstr(where, ":1") != NULL);
    ASSERT(hv_config_is_set(&c, "per_host"));
    ASSERT(!hv_config_is_set(&c, "host_delay"));
    hv_config_free(&c);
}

TEST_IMPL(config_section_errors)
{
    static const struct {
        const char *text, *message;
    } cases[] = {
        {"[host \"A\"]\nconcurrency = 3\n",
         "2: [host \"a\"]: 'concurrency' cannot be set per host (per_host, host_delay, "
         "host_delay_jitter, block_detection, http2_prior_knowledge, proxy, header can)"},
        {"[host \"a\"]\nper-host = 0\n", "2: per_host: '0' is out of range (1..1000)"},
        {"[host \"a\"]\nhost_delay = soon\n",
         "2: host_delay: 'soon' is not a duration (a number with ms, s, m or h)"},
        {"concurrency = 2\n[main]\n",
         "2: unknown section [main] (known: [host \"NAME\"], [rules \"NAME\"])"},
        {"[host a]\n", "1: unknown section [host a] (known: [host \"NAME\"], [rules \"NAME\"])"},
        {"[rules \"\"]\n",
         "1: unknown section [rules \"\"] (known: [host \"NAME\"], [rules \"NAME\"])"},
        {"frobnicate = 1\n", "1: unknown directive 'frobnicate'"},
    };
    char err[512];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        hv_config_t c;
        hv_config_defaults(&c);
        ASSERT_EQ(UV_EINVAL, load_text(&c, cases[i].text, err, sizeof(err)));
        ASSERT_STR_EQ(cases[i].message, err);
        hv_config_free(&c);
    }
}

/* A comment after a value: '#' between blanks (or a blank and the end of the line), or ';'
 * after a blank (inih's rule). Every other '#' is part of the value. */
TEST_IMPL(config_comments_after_values)
{
    hv_config_t c;
    char err[512];
    hv_config_defaults(&c);
    ASSERT_OK(load_text(&c,
                        "concurrency = 8 # eight\n"
                        "per_host = 3\t#\ttabs\n"
                        "queue_size = 100 #\n"
                        "max_redirects = 4 ; inih's own\n"
                        "user_agent = bot#1 (+http://bot.example/#about) #2\n"
                        "redis_url = redis://:pa#ss@127.0.0.1:6379 # a password with '#'\n"
                        "[rules \"r\"]\n"
                        "a = div #main h1 # a descendant with an id\n"
                        "b = a#top\n"
                        "[host \"h.example\"] # a host\n"
                        "header = X-Tag: #1 #2   # a header value with '#'\n"
                        "per_host = 2 # two\n",
                        err, sizeof(err)));
    ASSERT_STR_EQ("", err);
    ASSERT_OK(hv_config_finish(&c, err, sizeof(err)));
    ASSERT_EQ(8, c.concurrency);
    ASSERT_EQ(3, c.per_host);
    ASSERT_EQ(100, c.queue_size);
    ASSERT_EQ(4, c.max_redirects);
    ASSERT_STR_EQ("bot#1 (+http://bot.example/#about) #2", c.user_agent);
    ASSERT_STR_EQ("redis://:pa#ss@127.0.0.1:6379", c.redis_url);
    ASSERT_NOT_NULL(hv_config_ruleset(&c, "r"));
    const hv_conf_header_t *h[2 * HV_HEADERS_MAX];
    ASSERT_EQ(1, hv_config_request_headers(&c, "h.example", 1, h));
    ASSERT_STR_EQ("X-Tag", h[0]->name);
    ASSERT_STR_EQ("#1 #2", h[0]->value);
    unsigned per_host;
    uint64_t delay;
    double jitter;
    hv_config_host_policy(&c, "h.example", &per_host, &delay, &jitter);
    ASSERT_EQ(2, per_host);
    hv_config_free(&c);

    /* '#' right after the value is no comment: the value is refused, not cut. */
    hv_config_defaults(&c);
    ASSERT_EQ(UV_EINVAL, load_text(&c, "concurrency = 8#eight\n", err, sizeof(err)));
    ASSERT_STR_EQ("1: concurrency: '8#eight' is not a whole number", err);
    ASSERT_EQ(UV_EINVAL, load_text(&c, "concurrency = 8 #eight\n", err, sizeof(err)));
    ASSERT_STR_EQ("1: concurrency: '8 #eight' is not a whole number", err);
    hv_config_free(&c);
}

/* A key set twice where one value would silently win is an error naming both lines; header
 * lines repeat (one header each). */
TEST_IMPL(config_keys_set_twice)
{
    static const struct {
        const char *text, *message;
    } cases[] = {
        {"concurrency = 8\nper_host = 2\nconcurrency = 9\n",
         "3: concurrency: already set on line 1"},
        {"max_bytes = 1m\n# max-bytes is max_bytes\nmax-bytes = 2m\n",
         "3: max_bytes: already set on line 1"},
        {"[host \"a.test\"]\nper_host = 1\n[host \"b.test\"]\nper_host = 1\n"
         "[host \"A.TEST\"]\nper-host = 2\n",
         "6: per_host: already set on line 2, in [host \"a.test\"]"},
        {"[rules \"r\"]\nitems.item = li\nitems.name = a\nitems.name = b\n",
         "4: items.name: already set on line 3, in [rules \"r\"]"},
        {"[rules \"r\"]\ntitle = h1\n[rules \"s\"]\ntitle = h1\n[rules \"r\"]\ntitle = h2\n",
         "6: title: already set on line 2, in [rules \"r\"]"},
    };
    char err[512];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        hv_config_t c;
        hv_config_defaults(&c);
        ASSERT_EQ(UV_EINVAL, load_text(&c, cases[i].text, err, sizeof(err)));
        ASSERT_STR_EQ(cases[i].message, err);
        hv_config_free(&c);
    }

    /* The same key in another place, and header lines, are fine. */
    hv_config_t c;
    hv_config_defaults(&c);
    ASSERT_OK(load_text(&c,
                        "per_host = 3\n"
                        "header = X-A: 1\n"
                        "header = X-B: 2\n"
                        "[host \"a.test\"]\n"
                        "per_host = 1\n"
                        "header = X-A: 3\n"
                        "header = X-B: 4\n"
                        "[host \"b.test\"]\n"
                        "per_host = 2\n"
                        "[rules \"r\"]\n"
                        "per_host = h1\n",
                        err, sizeof(err)));
    ASSERT_EQ(3, c.per_host);
    hv_config_free(&c);
}

TEST_IMPL(config_too_many_host_sections)
{
    hv_config_t *c = calloc(1, sizeof(*c));
    char *text = calloc(HV_HOST_RULES_MAX + 1, 64), err[512];
    size_t len = 0;
    ASSERT_NOT_NULL(c);
    ASSERT_NOT_NULL(text);
    for (int i = 0; i <= HV_HOST_RULES_MAX; i++)
        len += (size_t)snprintf(text + len, 64, "[host \"h%d\"]\nper_host=1\n", i);
    hv_config_defaults(c);
    ASSERT_EQ(UV_EINVAL, load_text(c, text, err, sizeof(err)));
    ASSERT_STR_EQ("258: too many [host] sections (at most 128)", err);
    ASSERT_EQ(HV_HOST_RULES_MAX, c->nhost_rules);
    hv_config_free(c);
    free(c);
    free(text);
}

/* The headers of a request to `host`, as "Name: value" lines in `out`. */
static const char *request_headers(const hv_config_t *c, const char *host, int credentials,
                                   char *out, size_t cap)
{
    const hv_conf_header_t *h[2 * HV_HEADERS_MAX];
    size_t n = hv_config_request_headers(c, host, credentials, h), len = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(out + len, cap - len, "%s: %s\n", h[i]->name, h[i]->value);
    return out;
}

/* Global headers go to every host; a [host] section's (exact name, else the longest
 * "*.suffix") replace the global ones of their names and add their others, for that host
 * alone. Without the first origin's credentials, the global Authorization and Cookie stay
 * behind, a host's own do not. */
TEST_IMPL(config_request_headers_by_host)
{
    hv_config_t c;
    char err[512], got[2048];
    hv_config_defaults(&c);
    ASSERT_OK(load_text(&c,
                        "header = Accept-Language: en-GB, en;q=0.8\n"
                        "header = Authorization:   Bearer global-token  \n"
                        "header = Cookie: consent=yes\n"
                        "header=X-Empty:\n"
                        "[host \"API.example.org\"]\n"
                        "per_host = 1\n"
                        "header = authorization: Bearer api-token\n"
                        "header = X-Api-Version: 2\n"
                        "[host \"*.example.org\"]\n"
                        "header = Accept-Language: fr\n"
                        "header = X-Empty: now-set\n"
                        "[rules \"r\"]\n"
                        "header = h1\n", /* a field named "header", not a request header */
                        err, sizeof(err)));
    ASSERT_OK(hv_config_finish(&c, err, sizeof(err)));
    ASSERT_STR_EQ("Accept-Language: en-GB, en;q=0.8\nAuthorization: Bearer global-token\n"
                  "Cookie: consent=yes\nX-Empty: \n",
                  request_headers(&c, "other.test", 1, got, sizeof(got)));
    ASSERT_STR_EQ("Accept-Language: en-GB, en;q=0.8\nauthorization: Bearer api-token\n"
                  "Cookie: consent=yes\nX-Empty: \nX-Api-Version: 2\n",
                  request_headers(&c, "api.example.org", 1, got, sizeof(got)));
    ASSERT_STR_EQ("Accept-Language: fr\nAuthorization: Bearer global-token\n"
                  "Cookie: consent=yes\nX-Empty: now-set\n",
                  request_headers(&c, "www.example.org", 1, got, sizeof(got)));
    /* After a redirect away from the first origin. */
    ASSERT_STR_EQ("Accept-Language: en-GB, en;q=0.8\nX-Empty: \n",
                  request_headers(&c, "other.test", 0, got, sizeof(got)));
    ASSERT_STR_EQ("Accept-Language: en-GB, en;q=0.8\nauthorization: Bearer api-token\n"
                  "X-Empty: \nX-Api-Version: 2\n",
                  request_headers(&c, "api.example.org", 0, got, sizeof(got)));
    ASSERT_NOT_NULL(hv_config_ruleset(&c, "r"));
    hv_config_free(&c);
    /* None configured: none sent. */
    hv_config_defaults(&c);
    ASSERT_STR_EQ("", request_headers(&c, "a.test", 1, got, sizeof(got)));
    hv_config_free(&c);
}

/* Each refusal names the file's line; none quotes a value. */
TEST_IMPL(config_header_errors)
{
    static const struct {
        const char *text, *message;
    } cases[] = {
        {"concurrency = 2\nheader = Authorization Bearer s3cret\n",
         "2: header: expected 'Name: value' (no ':')"},
        {"header = X Y: s3cret\n", "1: header: 'X Y' is not a header name (letters, digits "
                                   "and !#$%&'*+-.^_`|~ only)"},
        {"header = : s3cret\n", "1: header: no name before ':' (expected 'Name: value')"},
        {"\n\nheader = Host: s3cret.test\n",
         "3: header: 'Host' cannot be configured: harvestd sends the URL's host"},
        {"[host \"a\"]\nheader = Transfer-Encoding: chunked\n",
         "2: header: 'Transfer-Encoding' cannot be configured: harvestd frames its requests"},
        {"header = User-Agent: s3cret\n", "1: header: 'User-Agent' cannot be configured: set "
                                          "user_agent instead (robots.txt is matched against it)"},
        {"header = Proxy-Authorization: Basic s3cret\n",
         "1: header: 'Proxy-Authorization' cannot be configured: proxy credentials are never "
         "sent to a server"},
        {"header = If-None-Match: \"s3cret\"\n", "1: header: 'If-None-Match' cannot be "
                                                 "configured: re-crawling sends it (recrawl = "
                                                 "conditional)"},
        {"header = Cookie: a=s3cret\x01\n",
         "1: header: 'Cookie': control character 0x01 in its value"},
        {"header = Cookie: a=1\nheader = cookie: b=s3cret\n",
         "2: header: 'cookie' is already set (line 1), in the global headers"},
        {"[host \"A\"]\nheader = X-A: 1\n[host \"b\"]\nheader = X-A: 1\n[host \"a\"]\n"
         "header = X-A: s3cret\n",
         "6: header: 'X-A' is already set (line 2), in the [host \"a\"] headers"},
    };
    char err[512];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        hv_config_t c;
        hv_config_defaults(&c);
        ASSERT_EQ(UV_EINVAL, load_text(&c, cases[i].text, err, sizeof(err)));
        ASSERT_STR_EQ(cases[i].message, err);
        ASSERT_NULL(strstr(err, "s3cret"));
        hv_config_free(&c);
    }
}

/* 32 headers per scope (global, each [host]), 16 KiB of them; the command line's replaces
 * the file's of its name, and is no more allowed twice than a file's. */
TEST_IMPL(config_header_bounds_and_command_line)
{
    hv_config_t c;
    char text[64 * 40], err[512], got[2048];
    size_t len = 0;
    hv_config_defaults(&c);
    for (int i = 0; i < HV_HEADERS_MAX; i++)
        len += (size_t)snprintf(text + len, sizeof(text) - len, "header = X-%d: %d\n", i, i);
    len += (size_t)snprintf(text + len, sizeof(text) - len, "[host \"a\"]\n");
    for (int i = 0; i <= HV_HEADERS_MAX; i++)
        len += (size_t)snprintf(text + len, sizeof(text) - len, "header = Y-%d: %d\n", i, i);
    ASSERT_EQ(UV_EINVAL, load_text(&c, text, err, sizeof(err)));
    ASSERT_STR_EQ("66: header: more than 32 [host \"a\"] headers", err);
    ASSERT_EQ(UV_EINVAL, hv_config_add_header(&c, NULL, "X-32: 1", -1, err, sizeof(err)));
    ASSERT_STR_EQ("header: more than 32 global headers", err);
    /* Replacing one is no new one. */
    ASSERT_OK(hv_config_add_header(&c, NULL, "x-0: from the command line", -1, err,
                                   sizeof(err)));
    ASSERT_EQ(UV_EINVAL, hv_config_add_header(&c, NULL, "X-0: again", -1, err, sizeof(err)));
    ASSERT_STR_EQ("header: 'X-0' is already set (the command line), in the global headers",
                  err);
    request_headers(&c, "b.test", 1, got, sizeof(got));
    ASSERT(strncmp(got, "x-0: from the command line\nX-1: 1\n", 34) == 0);
    hv_config_free(&c);

    /* The bytes: two headers of 8 KiB less a little fit, a third does not. */
    static char big[HV_HTTP_FIELD_MAX + 2]; /* "D: " and 8190 bytes: 8193 */
    hv_config_defaults(&c);
    memset(big, 'v', sizeof(big) - 1);
    memcpy(big, "A: ", 3);
    big[8000] = '\0';
    ASSERT_OK(hv_config_add_header(&c, "h", big, -1, err, sizeof(err)));
    big[0] = 'B';
    ASSERT_OK(hv_config_add_header(&c, "h", big, -1, err, sizeof(err)));
    big[0] = 'C';
    ASSERT_EQ(UV_EINVAL, hv_config_add_header(&c, "h", big, -1, err, sizeof(err)));
    ASSERT_STR_EQ("header: the [host \"h\"] headers add up to more than 16384 bytes", err);
    ASSERT_OK(hv_config_add_header(&c, NULL, big, -1, err, sizeof(err))); /* another scope */
    memset(big, 'v', sizeof(big) - 1);
    memcpy(big, "D: ", 3);
    big[sizeof(big) - 1] = '\0';
    ASSERT_EQ(UV_EINVAL, hv_config_add_header(&c, NULL, big, -1, err, sizeof(err)));
    ASSERT_STR_EQ("header: 'D' is longer than 8192 bytes", err);
    hv_config_free(&c);
}

/* --check-config's list: where each header was set, secrets as ***. */
TEST_IMPL(config_print_headers_masks_secrets)
{
    hv_config_t c;
    char err[512], *text = NULL;
    size_t len = 0;
    hv_config_defaults(&c);
    ASSERT_OK(load_text(&c,
                        "header = Accept-Language: de\n"
                        "header = Cookie: session=s3cret\n"
                        "[host \"api.test\"]\n"
                        "header = Authorization: Bearer s3cret\n"
                        "header = X-Api-Key: s3cret\n"
                        "header = Cookie:\n",
                        err, sizeof(err)));
    ASSERT_OK(hv_config_add_header(&c, NULL, "Proxy-Note: visible", -1, err, sizeof(err)));
    snprintf(c.config_file, sizeof(c.config_file), "h.conf");
    FILE *f = open_memstream(&text, &len);
    ASSERT_NOT_NULL(f);
    hv_config_print_headers(&c, f);
    fclose(f);
    ASSERT_STR_EQ("# request headers (secret values shown as ***)\n"
                  "header = Accept-Language: de  # h.conf:1\n"
                  "header = Cookie: ***  # h.conf:2\n"
                  "header = Proxy-Note: visible  # command line\n"
                  "[host \"api.test\"]\n"
                  "header = Authorization: ***  # h.conf:4\n"
                  "header = X-Api-Key: ***  # h.conf:5\n"
                  "header = Cookie:   # h.conf:6\n",
                  text);
    free(text);
    hv_config_free(&c);
    /* None: nothing printed. */
    hv_config_defaults(&c);
    text = NULL;
    f = open_memstream(&text, &len);
    hv_config_print_headers(&c, f);
    fclose(f);
    ASSERT_STR_EQ("", text);
    free(text);
}

/* --help shows each default through its formatter, in the form the table writes it. */
TEST_IMPL(config_help_shows_canonical_defaults)
{
    static const char *const lines[] = {
        "  --max-bytes            largest decoded response body; larger pages fail with "
        "PageTooLarge (default 2m)\n",
        "  --retry-base           first backoff delay; each retry doubles it, plus up to as much "
        "again in random jitter (default 1000ms)\n",
        "  --robots-ttl           how long a host's robots.txt is reused (default 24h)\n",
        "  --dns-ttl              how long a resolved host name is reused (default 60s)\n",
        "  --retry-statuses       HTTP statuses worth retrying (comma-separated) "
        "(default 429,500,502,503,504)\n",
        "  --host-delay-jitter    random extra time after host_delay, up to this fraction of it "
        "(0.2: up to 20% more) "
        "(default 0)\n",
        "  --fsync                when outputs are fsynced: never, interval or always (daemon; "
        "--once syncs at the end) (default interval)\n",
        "  --log-level            debug, info, notice, warning or error (default notice)\n",
        "  --metrics-listen       ADDRESS:PORT of the Prometheus endpoint (GET /metrics): "
        "127.0.0.1:9464, [::1]:9464, or localhost:9464 (127.0.0.1, never looked up); empty: off "
        "(default none)\n",
    };
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ASSERT_NOT_NULL(f);
    hv_config_print_help(f);
    fclose(f);
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
        if (strstr(text, lines[i]) == NULL)
            hv_test_fail(__FILE__, __LINE__, "not in --help: %s", lines[i]);
    free(text);
}

/* What the manual pages say of a directive: its value's word, what its values are with the
 * range of a number, size or duration (written as the formatter writes values), and its
 * default; the [host] keys end with header. */
TEST_IMPL(config_describe_for_the_manual)
{
    static const struct {
        const char *name, *value, *values, *def;
    } want[] = {
        {"concurrency", "N", "a whole number from 1 to 10000", "32"},
        {"max_bytes", "SIZE", "a size in bytes, with k, m or g (powers of 1024), from 1k to 1g",
         "2m"},
        {"read_timeout", "DURATION",
         "a duration, with ms, s, m or h, from 1ms to 1h; a bare number is in seconds", "15s"},
        {"flush_ms", "DURATION",
         "a duration, with ms, s, m or h, from 0ms to 3600000ms; a bare number is in "
         "milliseconds",
         "200ms"},
        {"insecure", "yes|no", "yes or no (true or false, on or off, 1 or 0)", "no"},
        {"host_delay_jitter", "FRACTION", "a number from 0 to 1", "0"},
        {"state_dir", "DIR", "", ""},
        {"ca_file", "FILE", "", ""},
        {"log_level", "LEVEL", "", "notice"},
    };
    hv_config_doc_t doc;
    size_t n, found = 0;
    for (n = 0; hv_config_describe(n, &doc) == 0; n++) {
        ASSERT_STR_EQ(hv_config_directive_name(n), doc.name);
        ASSERT(doc.help != NULL && doc.help[0] != '\0');
        for (size_t i = 0; i < HV_ARRAY_SIZE(want); i++) {
            if (strcmp(want[i].name, doc.name) != 0)
                continue;
            ASSERT_STR_EQ(want[i].value, doc.value);
            ASSERT_STR_EQ(want[i].values, doc.values);
            ASSERT_STR_EQ(want[i].def, doc.def);
            found++;
        }
    }
    ASSERT_EQ(HV_ARRAY_SIZE(want), found);
    ASSERT_NULL(hv_config_directive_name(n));
    ASSERT_EQ(UV_ENOENT, hv_config_describe(n, &doc));
    const char *key, *last = NULL;
    for (n = 0; (key = hv_config_host_key(n)) != NULL; n++)
        last = key;
    ASSERT_STR_EQ("per_host", hv_config_host_key(0));
    ASSERT_STR_EQ("header", last);
}

/* proxy_credentials_file: read when the configuration is finished, its entries given to the
 * global list and to every [host] list; the dump shows the key's path and the proxies as
 * configured. */
TEST_IMPL(config_proxy_credentials_file)
{
    static const char creds[] = "# proxies\n10.0.0.7:3128 crawler:s3cret\n* other:hunter2\n";
    hv_config_t c;
    char err[1500], text[1200], path[600];
    snprintf(path, sizeof(path), "%s",
             hv_test_write_mode_file("proxies.cred", creds, sizeof(creds) - 1, 0600));
    hv_config_defaults(&c);
    snprintf(text, sizeof(text),
             "proxy = http://10.0.0.7:3128\n"
             "proxy_credentials_file = %s\n"
             "[host \"api.example.org\"]\n"
             "proxy = socks5://10.0.0.8, http://own:urlpw@10.0.0.7:3128\n", path);
    ASSERT_OK(load_text(&c, text, err, sizeof(err)));
    if (hv_config_finish(&c, err, sizeof(err)) != 0)
        hv_test_fail(__FILE__, __LINE__, "%s", err);
    const hv_proxy_list_t *l = hv_config_host_proxies(&c, "example.com", 0);
    ASSERT_NOT_NULL(l);
    ASSERT_STR_EQ("crawler", l->proxy[0].user);
    ASSERT_STR_EQ("s3cret", l->proxy[0].password);
    l = hv_config_host_proxies(&c, "api.example.org", 0);
    ASSERT_NOT_NULL(l);
    ASSERT_STR_EQ("other", l->proxy[0].user);
    ASSERT_STR_EQ("hunter2", l->proxy[0].password);
    ASSERT_STR_EQ("own", l->proxy[1].user); /* the URL's own win */
    ASSERT_OK(hv_config_format(&c, "proxy_credentials_file", text, sizeof(text)));
    ASSERT_STR_EQ(path, text);
    ASSERT_OK(hv_config_format(&c, "proxy", text, sizeof(text)));
    ASSERT_STR_EQ("http://10.0.0.7:3128", text);
    /* Finished again (the file read again): the same. */
    ASSERT_OK(hv_config_finish(&c, err, sizeof(err)));
    ASSERT_STR_EQ("crawler", c.proxy.proxy[0].user);
    hv_config_free(&c);
}

/* What stops the start: each message says where the key was set, then the file (and its
 * line), never a password. */
TEST_IMPL(config_proxy_credentials_file_errors)
{
    char big[HV_PROXY_CREDS_FILE_MAX + 1];
    memset(big, '#', sizeof(big));
    const struct {
        const char *data;
        size_t len;
        mode_t mode;
        const char *proxy, *says; /* "%s" stands for the file */
    } cases[] = {
        {"* u:hunter2\n", 12, 0640, "http://p:1",
         "the proxy credentials file %s is readable by its group (mode 0640): let only its "
         "owner read it (chmod 600)"},
        {"* u:hunter2\n", 12, 0604, "http://p:1",
         "the proxy credentials file %s is readable by others (mode 0604)"},
        {"p:1 u:x\np:2 hunter2\n", 20, 0600, "http://p:1, http://p:2",
         "%s:2: the credentials (***) must be USER:PASSWORD"},
        {"p:1 u:x\np:3 u:hunter2\n", 22, 0600, "http://p:1",
         "%s:2: p:3 matches no proxy of the configuration"},
        {"* u:hunter2\n", 12, 0600, "none", "%s:1: * matches no proxy of the configuration"},
        {"# none\n", 7, 0600, "http://p:1", "%s: no entry"},
        {big, sizeof(big), 0600, "http://p:1",
         "the proxy credentials file %s holds more than 65536 bytes"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        hv_config_t c;
        char err[1500], want[1500], path[600];
        snprintf(path, sizeof(path), "%s",
                 hv_test_write_mode_file("p.cred", cases[i].data, cases[i].len, cases[i].mode));
        hv_config_defaults(&c);
        ASSERT_OK(hv_config_set(&c, "proxy", cases[i].proxy, err, sizeof(err)));
        ASSERT_OK(hv_config_set(&c, "proxy-credentials-file", path, err, sizeof(err)));
        hv_config_mark_cli(&c, "proxy_credentials_file");
        ASSERT_EQ(UV_EINVAL, hv_config_finish(&c, err, sizeof(err)));
        const char *mark = strstr(cases[i].says, "%s");
        snprintf(want, sizeof(want), "command line: proxy_credentials_file: %.*s%s%s",
                 (int)(mark - cases[i].says), cases[i].says, path, mark + 2);
        if (strncmp(err, want, strlen(want)) != 0)
            hv_test_fail(__FILE__, __LINE__, "case %zu: '%s' does not start '%s'", i, err, want);
        ASSERT(strstr(err, "hunter2") == NULL);
        hv_config_free(&c);
    }
    hv_config_t c;
    char err[1500], want[1500], path[600];
    snprintf(path, sizeof(path), "%s/no-such-file", hv_test_tmpdir());
    hv_config_defaults(&c);
    ASSERT_OK(hv_config_set(&c, "proxy", "http://p:1", err, sizeof(err)));
    ASSERT_OK(hv_config_set(&c, "proxy_credentials_file", path, err, sizeof(err)));
    hv_config_mark_cli(&c, "proxy_credentials_file");
    ASSERT_EQ(UV_EINVAL, hv_config_finish(&c, err, sizeof(err)));
    snprintf(want, sizeof(want), "command line: proxy_credentials_file: cannot read the proxy "
             "credentials file %s: no such file or directory", path);
    ASSERT_STR_EQ(want, err);
    hv_config_free(&c);
}
