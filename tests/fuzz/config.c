/*
 * config: the configuration file (config.h), [host "NAME"] and [rules "NAME"] sections
 * included.
 *
 * The input is the file: it is written to a memory file and read with hv_config_load_file()
 * through /proc/self/fd, the path the daemon takes. A file that loads is then finished as the
 * daemon does (hv_config_finish: every rule set complete), and the harness checks what
 * config.h promises:
 *   - every directive formats to text that hv_config_set() reads back to the same value;
 *   - the host policy of each [host] name (and of a subdomain of it) is defined;
 *   - each rule set evaluates over a small page to a JSON object (valid UTF-8, as records
 *     need).
 * Everything is freed, whether the file loads or not.
 */
#include <cjson/cJSON.h>
#include <gumbo.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>
#include <uv.h>

#include "fuzz.h"
#include "harvestd/common.h"
#include "harvestd/config.h"
#include "harvestd/extract.h"
#include "harvestd/http.h"
#include "harvestd/utf8.h"

static const char page[] =
    "<!doctype html><html><head><title>T</title><base href='/base/'></head><body>"
    "<div id=main class='box wide'><h1>Head</h1>"
    "<article class=product_pod><h3><a href='a.html' title='Book A'>A</a></h3>"
    "<p class=price_color>1.00</p></article>"
    "<article class=product_pod><h3><a href='/b.html' title='Book B'>B</a></h3>"
    "<p class=price_color>2.00</p></article>"
    "<ul><li>one</li><li>two<li>three</ul><svg><clipPath id=c/></svg>"
    "<a href='https://other.example/x?y#z' rel='next'>next</a></div></body></html>";

static int memfd = -1;
static char path[64];
static GumboOutput *tree;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    memfd = memfd_create("harvestd-fuzz-config", 0);
    if (memfd < 0) {
        perror("memfd_create");
        abort();
    }
    snprintf(path, sizeof(path), "/proc/self/fd/%d", memfd);
    GumboOptions opts = kGumboDefaultOptions;
    opts.max_errors = 0;
    tree = gumbo_parse_with_options(&opts, page, sizeof(page) - 1);
    return 0;
}

static void write_file(const uint8_t *data, size_t size)
{
    if (ftruncate(memfd, 0) != 0 || lseek(memfd, 0, SEEK_SET) != 0)
        abort();
    while (size > 0) {
        ssize_t n = write(memfd, data, size);
        if (n <= 0)
            abort();
        data += n;
        size -= (size_t)n;
    }
}

/* Format, set, format: the same text and the same field. */
static void check_round_trips(const hv_config_t *cfg)
{
    hv_config_t *again = malloc(sizeof(*again));
    char text[4096], text2[4096], err[512];
    const char *name;

    memcpy(again, cfg, sizeof(*again));
    /* The one directive that owns memory: `again` gets its own list when it is set. */
    memset(&again->proxy, 0, sizeof(again->proxy));
    for (size_t i = 0; (name = hv_config_directive_name(i)) != NULL; i++) {
        int rc = hv_config_format(cfg, name, text, sizeof(text));
        FUZZ_CHECK(rc == 0, "format %s: %d", name, rc);
        rc = hv_config_set(again, name, text, err, sizeof(err));
        FUZZ_CHECK(rc == 0, "%s = \"%s\" (as formatted) does not set again: %s", name, text, err);
        rc = hv_config_format(again, name, text2, sizeof(text2));
        FUZZ_CHECK(rc == 0 && strcmp(text, text2) == 0, "%s: \"%s\" then \"%s\"", name, text,
                   text2);
        char where[1200];
        hv_config_where(cfg, name, where, sizeof(where));
        FUZZ_CHECK(where[0] != '\0', "%s: no origin", name);
    }
    /* `again` shares cfg's rule sets and [host] sections: only its own list and the struct
     * are freed. */
    hv_proxy_list_free(&again->proxy);
    free(again);
}

/* Every header a request to `host` would carry is one hv_http_request() accepts, once per
 * name, and the head they make stays within its bound. */
static void check_request_headers(const hv_config_t *cfg, const char *host)
{
    const hv_conf_header_t *h[2 * HV_HEADERS_MAX];
    hv_http_field_t fields[2 * HV_HEADERS_MAX];
    char err[512];
    for (int credentials = 0; credentials <= 1; credentials++) {
        size_t n = hv_config_request_headers(cfg, host, credentials, h);
        FUZZ_CHECK(n <= 2 * HV_HEADERS_MAX, "%zu headers for %s", n, host);
        for (size_t i = 0; i < n; i++) {
            FUZZ_CHECK(hv_http_field_check(h[i]->name, h[i]->value, err, sizeof(err)) == 0,
                       "header for %s refused: %s", host, err);
            for (size_t j = 0; j < i; j++)
                FUZZ_CHECK(strcasecmp(h[i]->name, h[j]->name) != 0, "%s twice for %s",
                           h[i]->name, host);
            fields[i] = (hv_http_field_t){h[i]->name, h[i]->value};
        }
        hv_url_t u;
        memset(&u, 0, sizeof(u));
        u.target = (char *)(uintptr_t) "/";
        u.authority = (char *)(uintptr_t)host;
        hv_buf_t b;
        hv_buf_init(&b, HV_HTTP_REQUEST_MAX);
        int rc = hv_http_request(&b, &u, cfg->user_agent, NULL, NULL, fields, n);
        FUZZ_CHECK(rc == 0, "request for %s: %d", host, rc);
        hv_buf_free(&b);
    }
}

static void check_hosts(const hv_config_t *cfg)
{
    for (unsigned i = 0; i < cfg->nhost_rules; i++) {
        const char *name = cfg->host_rules[i].name;
        char sub[300];
        unsigned per_host;
        uint64_t delay;
        double jitter;
        hv_config_host_policy(cfg, name, &per_host, &delay, &jitter);
        FUZZ_CHECK(jitter >= 0 && jitter <= 1, "jitter %f for %s", jitter, name);
        snprintf(sub, sizeof(sub), "www.%s", name[0] == '*' ? name + 2 : name);
        hv_config_host_policy(cfg, sub, &per_host, &delay, &jitter);
        FUZZ_CHECK(jitter >= 0 && jitter <= 1, "jitter %f for %s", jitter, sub);
        check_request_headers(cfg, name);
        check_request_headers(cfg, sub);
    }
    check_request_headers(cfg, "other.example");
}

static void check_rules(const hv_config_t *cfg)
{
    for (unsigned i = 0; i < cfg->nrulesets; i++) {
        const hv_ruleset_t *rs = cfg->rulesets[i];
        FUZZ_CHECK(hv_config_ruleset(cfg, hv_ruleset_name(rs)) != NULL, "rule set lost");
        if (hv_ruleset_empty(rs))
            continue;
        char *json = NULL;
        int rc = hv_ruleset_eval(rs, tree->document, page, sizeof(page) - 1,
                                 "https://example.com/dir/page.html", &json);
        FUZZ_CHECK(rc == 0 && json != NULL, "no fields (%d) on a small page", rc);
        FUZZ_CHECK(hv_utf8_valid(json, strlen(json)), "fields not UTF-8: %s", json);
        cJSON *parsed = cJSON_Parse(json);
        FUZZ_CHECK(parsed != NULL && cJSON_IsObject(parsed), "fields not an object: %s", json);
        cJSON_Delete(parsed);
        free(json);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    hv_config_t *cfg = malloc(sizeof(*cfg));
    char err[1024];

    write_file(data, size);
    hv_config_defaults(cfg);
    err[0] = '\0';
    int rc = hv_config_load_file(cfg, path, err, sizeof(err));
    if (rc == 0) {
        rc = hv_config_finish(cfg, err, sizeof(err));
        check_round_trips(cfg);
        check_hosts(cfg);
        if (rc == 0)
            check_rules(cfg);
    } else {
        FUZZ_CHECK(rc == UV_EINVAL, "load: %d", rc);
        FUZZ_CHECK(strncmp(err, path, strlen(path)) == 0, "error without the file: %s", err);
    }
    FUZZ_CHECK(cfg->nhost_rules <= HV_HOST_RULES_MAX, "%u host rules", cfg->nhost_rules);
    FUZZ_CHECK(cfg->nrulesets <= HV_RULESETS_MAX, "%u rule sets", cfg->nrulesets);
    hv_config_free(cfg);
    free(cfg);
    return 0;
}
