/*
 * state.c: `harvestd state --state-dir DIR VERB` (commands.h): the per-URL state store
 * (store.h) from the command line: how big it is, one URL's entry, forgetting one, pruning by
 * age, reading every page of it. The command line, the answers and the exit status; the store
 * does the rest.
 *
 * The command works on a store that exists and never creates one
 * (hv_store_open_existing()): a mistyped directory must say so rather than leave an empty
 * store behind. Keys are URLs normalised by hv_url_parse(), as the daemon stores them.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "harvestd/commands.h"
#include "harvestd/common.h"
#include "harvestd/config.h"
#include "harvestd/options.h"
#include "harvestd/store.h"
#include "harvestd/url.h"

enum { EXIT_OK = 0, EXIT_IO = 1, EXIT_USAGE = 2, EXIT_ABSENT = 3 };

#define DAY_MS ((uint64_t)24 * 3600 * 1000)

typedef enum { VERB_NONE, VERB_STATS, VERB_GET, VERB_FORGET, VERB_PRUNE, VERB_VERIFY } verb_t;

static const char *const verb_names[] = {[VERB_STATS] = "stats",
                                         [VERB_GET] = "get",
                                         [VERB_FORGET] = "forget",
                                         [VERB_PRUNE] = "prune",
                                         [VERB_VERIFY] = "verify"};

typedef struct {
    const char *dir;
    const char *url;        /* get, forget */
    const char *older_than; /* prune */
    verb_t verb;
    int json;
    int help;
} state_args_t;

enum { O_STATE_DIR, O_OLDER_THAN, O_JSON, O_HELP };

static const hv_opt_t state_opts[] = {
    {.name = "state-dir", .kind = HV_OPT_VALUE, .id = O_STATE_DIR,
     .usage = "--state-dir DIR        the store's directory (required)"},
    {.name = "older-than", .kind = HV_OPT_VALUE, .id = O_OLDER_THAN,
     .usage = "--older-than DURATION  for prune: a number with ms, s, m, h or d (days); a bare\n"
              "                       number is in seconds"},
    {.name = "json", .id = O_JSON,
     .usage = "--json                 answers as JSON objects: {\"entries\":N,\"bytes_used\":N,\n"
              "                       \"map_bytes\":N}, {\"forgot\":true|false,\"url\":\"...\"},\n"
              "                       {\"pruned\":N,\"entries\":M},\n"
              "                       {\"sound\":true,\"entries\":N,\"pages\":N,\"free_pages\":N}\n"
              "                       or {\"sound\":false,\"entries_walked\":N,\n"
              "                       \"damage\":\"...\"}"},
    {.name = "help", .letter = "h", .id = O_HELP, .usage = "-h, --help             this text"},
};

/* "--" ends the options; --json=x is an unknown option. */
const hv_opt_spec_t hv_cmd_state_spec = {
    .opts = state_opts,
    .nopts = HV_ARRAY_SIZE(state_opts),
    .rules = HV_OPT_DASHDASH | HV_OPT_FLAG_VALUE_UNKNOWN,
    .say = HV_OPT_SAY_COLON,
};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: harvestd state --state-dir DIR [--json] stats\n"
            "       harvestd state --state-dir DIR [--json] get URL\n"
            "       harvestd state --state-dir DIR [--json] forget URL\n"
            "       harvestd state --state-dir DIR [--json] prune --older-than DURATION\n"
            "       harvestd state --state-dir DIR [--json] verify\n"
            "\n"
            "Inspects and trims the per-URL state store in DIR (an LMDB environment:\n"
            "DIR/data.mdb and DIR/lock.mdb), also while daemons use it. The store must\n"
            "exist: this command never creates one. One line per answer:\n"
            "\n"
            "  stats       entries=N bytes_used=N map_bytes=N (map_bytes: the map this\n"
            "              command opened the store with), and tls_sessions=N when the\n"
            "              store keeps TLS sessions (not counted in entries)\n"
            "  get URL     the entry as one JSON object, with or without --json: url_key,\n"
            "              url, etag, last_modified, body_hash, title, fields, content_type,\n"
            "              charset, bytes, http_status, max_age, rules, fetched_at,\n"
            "              modified_at (absent ones left\n"
            "              out; times in RFC 3339 UTC with milliseconds)\n"
            "  forget URL  deletes the entry: forgot URL\n"
            "  prune       deletes the entries fetched more than DURATION ago:\n"
            "              pruned=N entries=M (M: the entries left); TLS sessions saved\n"
            "              before then, or expired, go too (uncounted)\n"
            "  verify      reads every page of the store, in a child process that a damaged\n"
            "              page may kill: sound entries=N pages=N free_pages=N (and\n"
            "              tls_sessions=N when there are), or\n"
            "              damaged entries_walked=N and what is wrong on standard error\n"
            "\n"
            "Every verb first checks what can be checked cheaply (data.mdb's size and its\n"
            "meta pages) and refuses a store that fails: it is damaged. A store damaged\n"
            "inside its pages is not detected until verify reads them (a lookup that meets\n"
            "such a page may crash the daemon).\n"
            "\n"
            "URL is normalised as the daemon does before it is looked up (scheme and host\n"
            "lower-cased, default port dropped, '/' for an empty path, no fragment):\n"
            "HTTP://A.TEST finds the entry of http://a.test/.\n"
            "\n");
    hv_opt_print_usage(out, &hv_cmd_state_spec);
    fprintf(out,
            "\n"
            "Options may come before or after the verb. An absent entry is said on standard\n"
            "error, \"harvestd: no entry for URL\" (forget --json: {\"forgot\":false,...}).\n"
            "\n"
            "Exit status: 0 answered; 1 no store in DIR, a store that cannot be opened (a\n"
            "damaged or corrupt one: the message says how to discard it), damage that\n"
            "verify found, or an I/O error; 2 usage error (also a URL that does not parse);\n"
            "3 the entry asked for is absent. verify exits 0 only on a sound store.\n");
}

static int usage_error(const char *msg)
{
    fprintf(stderr, "harvestd: %s\nTry 'harvestd state --help'.\n", msg);
    return EXIT_USAGE;
}

/* ------------------------------------------------------------------------------ arguments */

static verb_t find_verb(const char *word)
{
    for (size_t v = VERB_STATS; v < HV_ARRAY_SIZE(verb_names); v++)
        if (strcmp(word, verb_names[v]) == 0)
            return (verb_t)v;
    return VERB_NONE;
}

static int parse_args(int argc, char **argv, state_args_t *a, char *err, size_t errcap)
{
    hv_opt_parser_t p;
    hv_opt_arg_t got;
    int what;
    memset(a, 0, sizeof(*a));
    hv_opt_init(&p, &hv_cmd_state_spec, argc, argv);
    while ((what = hv_opt_next(&p, &got, err, errcap)) != HV_OPT_END) {
        if (what == HV_OPT_ERROR)
            return -1;
        if (what == HV_OPT_ARGUMENT) {
            if (a->verb == VERB_NONE) {
                if ((a->verb = find_verb(got.word)) == VERB_NONE)
                    return hv_errf(err, errcap, -1,
                                   "unknown verb: %s (stats, get, forget, prune or verify)",
                                   got.word);
            } else if ((a->verb == VERB_GET || a->verb == VERB_FORGET) && a->url == NULL) {
                a->url = got.word;
            } else {
                return hv_errf(err, errcap, -1, "unexpected argument: %s", got.word);
            }
            continue;
        }
        if (got.opt->id == O_HELP) {
            a->help = 1;
            return 0;
        }
        if (got.opt->id == O_JSON) {
            a->json = 1;
            continue;
        }
        int is_dir = got.opt->id == O_STATE_DIR;
        const char **slot = is_dir ? &a->dir : &a->older_than;
        if (*slot != NULL)
            return hv_errf(err, errcap, -1, "%s given twice",
                           is_dir ? "--state-dir" : "--older-than");
        *slot = got.value;
    }
    if (a->dir == NULL)
        return hv_errf(err, errcap, -1, "missing --state-dir DIR");
    if (a->dir[0] == '\0')
        return hv_errf(err, errcap, -1, "--state-dir needs a directory, not an empty name");
    if (a->verb == VERB_NONE)
        return hv_errf(err, errcap, -1,
                       "missing a verb: stats, get URL, forget URL, prune --older-than DURATION "
                       "or verify");
    if ((a->verb == VERB_GET || a->verb == VERB_FORGET) && a->url == NULL)
        return hv_errf(err, errcap, -1, "%s needs a URL", verb_names[a->verb]);
    if (a->verb == VERB_PRUNE && a->older_than == NULL)
        return hv_errf(err, errcap, -1, "prune needs --older-than DURATION");
    if (a->verb != VERB_PRUNE && a->older_than != NULL)
        return hv_errf(err, errcap, -1, "--older-than is for prune only");
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
        return hv_errf(err, errcap, -1, "--older-than: '%s' is too long a duration", s);
    if (rc != 0)
        return hv_errf(err, errcap, -1,
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

static int store_error(const char *what, const char *dir, int rc)
{
    fprintf(stderr, "harvestd: cannot %s the state store %s: %s\n", what, dir, hv_strerror(rc));
    return EXIT_IO;
}

/* ------------------------------------------------------------------------------ verbs */

static int do_stats(hv_store_t *st, const state_args_t *a)
{
    hv_store_stats_t s;
    int rc = hv_store_stats(st, &s);
    if (rc != 0)
        return store_error("read", a->dir, rc);
    printf(a->json ? "{\"entries\":%" PRIu64 ",\"bytes_used\":%" PRIu64 ",\"map_bytes\":%" PRIu64
                   : "entries=%" PRIu64 " bytes_used=%" PRIu64 " map_bytes=%" PRIu64,
           s.entries, s.bytes_used, s.map_bytes);
    /* Only a store that keeps TLS sessions says how many. */
    if (s.sessions > 0)
        printf(a->json ? ",\"tls_sessions\":%" PRIu64 : " tls_sessions=%" PRIu64, s.sessions);
    printf(a->json ? "}\n" : "\n");
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
    char *text = hv_store_entry_show(key, &e);
    printf("%s\n", text);
    free(text);
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
        if (o == NULL || cJSON_AddBoolToObject(o, "forgot", rc == 0) == NULL ||
            cJSON_AddStringToObject(o, "url", key) == NULL)
            oom();
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

/* The whole store read, in a child process (hv_store_verify); it opens the store itself. */
static int do_verify(const state_args_t *a)
{
    hv_store_verify_t v;
    char err[3300];
    if (hv_store_verify(a->dir, &v, err, sizeof(err)) != 0) {
        fprintf(stderr, "harvestd: %s\n", err);
        return EXIT_IO;
    }
    if (a->json) {
        cJSON *o = cJSON_CreateObject();
        if (o == NULL || cJSON_AddBoolToObject(o, "sound", v.sound) == NULL ||
            cJSON_AddNumberToObject(o, v.sound ? "entries" : "entries_walked",
                                    (double)v.entries) == NULL ||
            (v.sound && (cJSON_AddNumberToObject(o, "pages", (double)v.pages) == NULL ||
                         cJSON_AddNumberToObject(o, "free_pages", (double)v.free_pages) == NULL)) ||
            (v.sound && v.sessions > 0 &&
             cJSON_AddNumberToObject(o, "tls_sessions", (double)v.sessions) == NULL) ||
            (!v.sound && cJSON_AddStringToObject(o, "damage", v.what) == NULL))
            oom();
        char *text = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        if (text == NULL)
            oom();
        printf("%s\n", text);
        cJSON_free(text);
    } else if (v.sound) {
        printf("sound entries=%" PRIu64 " pages=%" PRIu64 " free_pages=%" PRIu64, v.entries,
               v.pages, v.free_pages);
        if (v.sessions > 0)
            printf(" tls_sessions=%" PRIu64, v.sessions);
        printf("\n");
    } else {
        printf("damaged entries_walked=%" PRIu64 "\n", v.entries);
    }
    if (v.sound)
        return EXIT_OK;
    fprintf(stderr,
            "harvestd: the state store %s is damaged (%s): move it away or delete %s/data.mdb and "
            "%s/lock.mdb to start with an empty one\n",
            a->dir, v.what, a->dir, a->dir);
    return EXIT_IO;
}

/* ------------------------------------------------------------------------------ command */

int hv_cmd_state(int argc, char **argv)
{
    state_args_t a;
    hv_url_t u;
    hv_store_t *st = NULL;
    char err[3300];
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
    if (a.verb == VERB_VERIFY) {
        status = do_verify(&a);
        goto flush;
    }
    if (hv_store_open_existing(a.dir, &st, err, sizeof(err)) != 0) {
        fprintf(stderr, "harvestd: %s\n", err);
        status = EXIT_IO;
        goto out;
    }
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
    case VERB_VERIFY: /* above: it opens the store in its child */
    case VERB_NONE:
    default:
        status = EXIT_USAGE; /* parse_args() requires a verb */
        break;
    }
flush:
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
