/*
 * statecmd.c: `harvestd state --state-dir DIR VERB`: the per-URL state store (store.h) from
 * the command line: how big it is, one URL's entry, forgetting one, pruning by age.
 *
 * The command works on a store that exists and never creates one: a mistyped directory must
 * say so rather than leave an empty store behind. Keys are URLs normalised by hv_url_parse(),
 * as the daemon stores them.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <uv.h>

#include "harvestd/commands.h"
#include "harvestd/common.h"
#include "harvestd/config.h"
#include "harvestd/record.h"
#include "harvestd/store.h"
#include "harvestd/url.h"

enum { EXIT_OK = 0, EXIT_IO = 1, EXIT_USAGE = 2, EXIT_ABSENT = 3 };

#define GIB ((uint64_t)1 << 30)
#define DAY_MS ((uint64_t)24 * 3600 * 1000)

typedef enum { VERB_NONE, VERB_STATS, VERB_GET, VERB_FORGET, VERB_PRUNE } verb_t;

static const char *const verb_names[] = {
    [VERB_STATS] = "stats", [VERB_GET] = "get", [VERB_FORGET] = "forget", [VERB_PRUNE] = "prune"};

typedef struct {
    const char *dir;
    const char *url;        /* get, forget */
    const char *older_than; /* prune */
    verb_t verb;
    int json;
    int help;
} state_args_t;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: harvestd state --state-dir DIR [--json] stats\n"
            "       harvestd state --state-dir DIR [--json] get URL\n"
            "       harvestd state --state-dir DIR [--json] forget URL\n"
            "       harvestd state --state-dir DIR [--json] prune --older-than DURATION\n"
            "\n"
            "Inspects and trims the per-URL state store in DIR (an LMDB environment:\n"
            "DIR/data.mdb and DIR/lock.mdb), also while daemons use it. The store must\n"
            "exist: this command never creates one. One line per answer:\n"
            "\n"
            "  stats       entries=N bytes_used=N map_bytes=N (map_bytes: the map this\n"
            "              command opened the store with)\n"
            "  get URL     the entry as one JSON object, with or without --json: url_key,\n"
            "              url, etag, last_modified, body_hash, title, fields, content_type,\n"
            "              charset, bytes, http_status, max_age, rules, fetched_at,\n"
            "              modified_at (absent ones left\n"
            "              out; times in RFC 3339 UTC with milliseconds)\n"
            "  forget URL  deletes the entry: forgot URL\n"
            "  prune       deletes the entries fetched more than DURATION ago:\n"
            "              pruned=N entries=M (M: the entries left)\n"
            "\n"
            "URL is normalised as the daemon does before it is looked up (scheme and host\n"
            "lower-cased, default port dropped, '/' for an empty path, no fragment):\n"
            "HTTP://A.TEST finds the entry of http://a.test/.\n"
            "\n"
            "  --state-dir DIR        the store's directory (required)\n"
            "  --older-than DURATION  for prune: a number with ms, s, m, h or d (days); a bare\n"
            "                         number is in seconds\n"
            "  --json                 answers as JSON objects: {\"entries\":N,\"bytes_used\":N,\n"
            "                         \"map_bytes\":N}, {\"forgot\":true|false,\"url\":\"...\"},\n"
            "                         {\"pruned\":N,\"entries\":M}\n"
            "  -h, --help             this text\n"
            "\n"
            "Options may come before or after the verb. An absent entry is said on standard\n"
            "error, \"harvestd: no entry for URL\" (forget --json: {\"forgot\":false,...}).\n"
            "\n"
            "Exit status: 0 answered; 1 no store in DIR, a store that cannot be opened (a\n"
            "corrupt one: the message says how to discard it) or an I/O error; 2 usage error\n"
            "(also a URL that does not parse); 3 the entry asked for is absent.\n");
}

static int usage_error(const char *msg)
{
    fprintf(stderr, "harvestd: %s\nTry 'harvestd state --help'.\n", msg);
    return EXIT_USAGE;
}

__attribute__((format(printf, 3, 4))) static int fail(char *err, size_t errcap, const char *fmt,
                                                      ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errcap, fmt, ap);
    va_end(ap);
    return -1;
}

/* ------------------------------------------------------------------------------ arguments */

/* The value of option `name` at argv[*i] ("--name=V" or "--name V"): 1 and the value in *val,
 * 0 when argv[*i] is not this option, -1 when the value is missing. */
static int opt_value(int argc, char **argv, int *i, const char *name, const char **val)
{
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, "--", 2) != 0 || strncmp(a + 2, name, n) != 0)
        return 0;
    if (a[2 + n] == '=') {
        *val = a + 3 + n;
        return 1;
    }
    if (a[2 + n] != '\0')
        return 0;
    if (*i + 1 >= argc)
        return -1;
    *val = argv[++*i];
    return 1;
}

static verb_t find_verb(const char *word)
{
    for (size_t v = VERB_STATS; v < HV_ARRAY_SIZE(verb_names); v++)
        if (strcmp(word, verb_names[v]) == 0)
            return (verb_t)v;
    return VERB_NONE;
}

static int parse_args(int argc, char **argv, state_args_t *a, char *err, size_t errcap)
{
    int options = 1;
    memset(a, 0, sizeof(*a));
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *val = NULL;
        int r;
        if (!options || arg[0] != '-' || strcmp(arg, "-") == 0) {
            if (a->verb == VERB_NONE) {
                if ((a->verb = find_verb(arg)) == VERB_NONE)
                    return fail(err, errcap, "unknown verb: %s (stats, get, forget or prune)", arg);
            } else if ((a->verb == VERB_GET || a->verb == VERB_FORGET) && a->url == NULL) {
                a->url = arg;
            } else {
                return fail(err, errcap, "unexpected argument: %s", arg);
            }
        } else if (strcmp(arg, "--") == 0) {
            options = 0;
        } else if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            a->help = 1;
            return 0;
        } else if (strcmp(arg, "--json") == 0) {
            a->json = 1;
        } else if ((r = opt_value(argc, argv, &i, "state-dir", &val)) != 0 ||
                   (r = opt_value(argc, argv, &i, "older-than", &val)) != 0) {
            int is_dir = strncmp(arg, "--state-dir", 11) == 0;
            const char **slot = is_dir ? &a->dir : &a->older_than;
            const char *name = is_dir ? "--state-dir" : "--older-than";
            if (r < 0)
                return fail(err, errcap, "%s needs a value", name);
            if (*slot != NULL)
                return fail(err, errcap, "%s given twice", name);
            *slot = val;
        } else {
            return fail(err, errcap, "unknown option: %s", arg);
        }
    }
    if (a->dir == NULL)
        return fail(err, errcap, "missing --state-dir DIR");
    if (a->dir[0] == '\0')
        return fail(err, errcap, "--state-dir needs a directory, not an empty name");
    if (a->verb == VERB_NONE)
        return fail(err, errcap,
                    "missing a verb: stats, get URL, forget URL or prune --older-than DURATION");
    if ((a->verb == VERB_GET || a->verb == VERB_FORGET) && a->url == NULL)
        return fail(err, errcap, "%s needs a URL", verb_names[a->verb]);
    if (a->verb == VERB_PRUNE && a->older_than == NULL)
        return fail(err, errcap, "prune needs --older-than DURATION");
    if (a->verb != VERB_PRUNE && a->older_than != NULL)
        return fail(err, errcap, "--older-than is for prune only");
    return 0;
}

/* DURATION of --older-than in ms: hv_parse_duration_ms() (a bare number is seconds), and a
 * number of days with "d", which the configuration's durations do not take. */
static int parse_age(const char *s, uint64_t *ms, char *err, size_t errcap)
{
    size_t n = strlen(s);
    int rc;
    if (n >= 2 && (s[n - 1] == 'd' || s[n - 1] == 'D')) {
        char num[24];
        size_t k = 0;
        while (k < n - 1 && s[k] >= '0' && s[k] <= '9')
            k++;
        if (k != n - 1) {
            rc = UV_EINVAL; /* "1hd" */
        } else if (k >= sizeof(num)) {
            rc = UV_ERANGE;
        } else {
            memcpy(num, s, k);
            num[k] = '\0';
            rc = hv_parse_duration_ms(num, DAY_MS, ms);
        }
    } else {
        rc = hv_parse_duration_ms(s, 1000, ms);
    }
    if (rc == 0 && *ms > (uint64_t)INT64_MAX)
        rc = UV_ERANGE;
    if (rc == UV_ERANGE)
        return fail(err, errcap, "--older-than: '%s' is too long a duration", s);
    if (rc != 0)
        return fail(err, errcap,
                    "--older-than: '%s' is not a duration (a number with ms, s, m, h or d; a "
                    "bare number is in seconds)",
                    s);
    return 0;
}

/* ------------------------------------------------------------------------------ the store */

static void oom(void)
{
    fprintf(stderr, "harvestd: out of memory\n");
    abort();
}

/*
 * Open the store in `dir` if there is one: EXIT_OK and *out, or the exit status, said on
 * stderr. hv_store_open() would create a missing store, hence the checks first. The map is
 * the next whole GiB above data.mdb's size, at least 1 GiB: never below what the store holds
 * (LMDB persists only increases of the map size, so the daemon's own bound is not lowered
 * either), with room for the pages a delete copies.
 */
static int open_existing(const char *dir, hv_store_t **out)
{
    char err[1500];
    struct stat sb;
    size_t n = strlen(dir) + sizeof("/data.mdb");
    char *data = hv_xmalloc(n);
    int status = EXIT_IO;

    *out = NULL;
    snprintf(data, n, "%s/data.mdb", dir);
    if (stat(dir, &sb) != 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            fprintf(stderr, "harvestd: no state store at %s\n", dir);
        else
            fprintf(stderr, "harvestd: cannot read the state store %s: %s\n", dir, strerror(errno));
        goto out;
    }
    if (!S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "harvestd: no state store at %s (not a directory)\n", dir);
        goto out;
    }
    if (stat(data, &sb) != 0) {
        if (errno == ENOENT)
            fprintf(stderr, "harvestd: no state store at %s\n", dir);
        else
            fprintf(stderr, "harvestd: cannot read the state store %s: %s: %s\n", dir, data,
                    strerror(errno));
        goto out;
    }
    /* LMDB would make an empty file a new store: there is nothing in it to inspect. */
    if (!S_ISREG(sb.st_mode) || sb.st_size == 0) {
        fprintf(stderr, "harvestd: no state store at %s (%s is %s)\n", dir, data,
                S_ISREG(sb.st_mode) ? "empty" : "not a regular file");
        goto out;
    }
    uint64_t map = ((uint64_t)sb.st_size / GIB + 1) * GIB;
    if (hv_store_open(dir, map, out, err, sizeof(err)) != 0) {
        fprintf(stderr, "harvestd: %s\n", err);
        goto out;
    }
    status = EXIT_OK;
out:
    free(data);
    return status;
}

static int store_error(const char *what, const char *dir, int rc)
{
    fprintf(stderr, "harvestd: cannot %s the state store %s: %s\n", what, dir, hv_strerror(rc));
    return EXIT_IO;
}

/* ------------------------------------------------------------------------------ verbs */

static void add_str(cJSON *o, const char *k, const char *v)
{
    if (v != NULL && cJSON_AddStringToObject(o, k, v) == NULL)
        oom();
}

/* The entry as one JSON object text (free with cJSON_free). */
static char *entry_json(const char *key, const hv_store_entry_t *e)
{
    char fp[24], at[32];
    cJSON *o = cJSON_CreateObject();
    if (o == NULL)
        oom();
    add_str(o, "url_key", key);
    add_str(o, "url", e->url);
    add_str(o, "etag", e->etag);
    add_str(o, "last_modified", e->last_modified);
    if (e->body_hash[0] != '\0')
        add_str(o, "body_hash", e->body_hash);
    add_str(o, "title", e->title);
    if (e->fields != NULL) {
        /* The store printed it from a parsed object: valid JSON. */
        cJSON *f = cJSON_CreateRaw(e->fields);
        if (f == NULL || !cJSON_AddItemToObject(o, "fields", f))
            oom();
    }
    add_str(o, "content_type", e->content_type);
    add_str(o, "charset", e->charset);
    if (e->bytes >= 0 && cJSON_AddNumberToObject(o, "bytes", (double)e->bytes) == NULL)
        oom();
    if (e->http_status > 0 && cJSON_AddNumberToObject(o, "http_status", e->http_status) == NULL)
        oom();
    if (e->max_age_s >= 0 && cJSON_AddNumberToObject(o, "max_age", (double)e->max_age_s) == NULL)
        oom();
    snprintf(fp, sizeof(fp), "%016" PRIx64, e->rules_fp);
    add_str(o, "rules", fp);
    hv_format_rfc3339_ms(at, e->fetched_at_ms);
    add_str(o, "fetched_at", at);
    hv_format_rfc3339_ms(at, e->modified_at_ms);
    add_str(o, "modified_at", at);
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (text == NULL)
        oom();
    return text;
}

static int do_stats(hv_store_t *st, const state_args_t *a)
{
    hv_store_stats_t s;
    int rc = hv_store_stats(st, &s);
    if (rc != 0)
        return store_error("read", a->dir, rc);
    printf(a->json ? "{\"entries\":%" PRIu64 ",\"bytes_used\":%" PRIu64 ",\"map_bytes\":%" PRIu64
                     "}\n"
                   : "entries=%" PRIu64 " bytes_used=%" PRIu64 " map_bytes=%" PRIu64 "\n",
           s.entries, s.bytes_used, s.map_bytes);
    return EXIT_OK;
}

static int do_get(hv_store_t *st, const state_args_t *a, const char *key)
{
    hv_store_entry_t e;
    int rc = hv_store_get(st, key, strlen(key), &e);
    if (rc == UV_ENOENT) {
        fprintf(stderr, "harvestd: no entry for %s\n", key);
        return EXIT_ABSENT;
    }
    if (rc != 0)
        return store_error("read", a->dir, rc);
    char *text = entry_json(key, &e);
    printf("%s\n", text);
    cJSON_free(text);
    hv_store_entry_clear(&e);
    return EXIT_OK;
}

static int do_forget(hv_store_t *st, const state_args_t *a, const char *key)
{
    int rc = hv_store_delete(st, key, strlen(key));
    if (rc != 0 && rc != UV_ENOENT)
        return store_error("write", a->dir, rc);
    if (a->json) {
        cJSON *o = cJSON_CreateObject();
        if (o == NULL || cJSON_AddBoolToObject(o, "forgot", rc == 0) == NULL)
            oom();
        add_str(o, "url", key);
        char *text = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        if (text == NULL)
            oom();
        printf("%s\n", text);
        cJSON_free(text);
    } else if (rc == 0) {
        printf("forgot %s\n", key);
    } else {
        fprintf(stderr, "harvestd: no entry for %s\n", key);
    }
    return rc == 0 ? EXIT_OK : EXIT_ABSENT;
}

static int do_prune(hv_store_t *st, const state_args_t *a, uint64_t age_ms)
{
    uint64_t removed = 0;
    hv_store_stats_t s;
    int rc = hv_store_prune(st, hv_now_unix_ms() - (int64_t)age_ms, &removed);
    if (rc != 0)
        return store_error("write", a->dir, rc);
    if ((rc = hv_store_stats(st, &s)) != 0)
        return store_error("read", a->dir, rc);
    printf(a->json ? "{\"pruned\":%" PRIu64 ",\"entries\":%" PRIu64 "}\n"
                   : "pruned=%" PRIu64 " entries=%" PRIu64 "\n",
           removed, s.entries);
    return EXIT_OK;
}

/* ------------------------------------------------------------------------------ command */

int hv_cmd_state(int argc, char **argv)
{
    state_args_t a;
    hv_url_t u;
    hv_store_t *st = NULL;
    char err[1024];
    const char *reason = NULL;
    uint64_t age_ms = 0;
    int status;

    memset(&u, 0, sizeof(u));
    if (parse_args(argc, argv, &a, err, sizeof(err)) != 0)
        return usage_error(err);
    if (a.help) {
        usage(stdout);
        return EXIT_OK;
    }
    if (a.verb == VERB_PRUNE && parse_age(a.older_than, &age_ms, err, sizeof(err)) != 0)
        return usage_error(err);
    if (a.url != NULL && hv_url_parse(&u, a.url, strlen(a.url), &reason) != 0) {
        snprintf(err, sizeof(err), "%s: not a URL the daemon fetches (%s)", a.url,
                 reason != NULL ? reason : "malformed");
        return usage_error(err);
    }
    if ((status = open_existing(a.dir, &st)) != EXIT_OK)
        goto out;
    switch (a.verb) {
    case VERB_STATS:
        status = do_stats(st, &a);
        break;
    case VERB_GET:
        status = do_get(st, &a, u.href);
        break;
    case VERB_FORGET:
        status = do_forget(st, &a, u.href);
        break;
    case VERB_PRUNE:
        status = do_prune(st, &a, age_ms);
        break;
    case VERB_NONE:
    default:
        status = EXIT_USAGE; /* parse_args() requires a verb */
        break;
    }
    /* An answer that did not reach standard output (a full disk, a closed pipe) is a
     * failure, not a success with nothing said. */
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "harvestd: cannot write standard output: %s\n", strerror(errno));
        status = EXIT_IO;
    }
out:
    hv_store_close(st);
    hv_url_free(&u);
    return status;
}
