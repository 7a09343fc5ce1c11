/*
 * test_streamcmd.c: the command lines of enqueue and status (streamcmd.h): defaults, both
 * spellings of an option, `--` and `-`, and each usage error. Nothing here touches a network.
 */
#include <stdlib.h>
#include <string.h>

#include "harvestd/streamcmd.h"
#include "harvestd/streamkeys.h"
#include "test.h"

#define ARGC(a) ((int)(sizeof(a) / sizeof((a)[0])))

static char err[1200];

static int enqueue_args(int argc, const char **argv, hv_enqueue_args_t *out)
{
    err[0] = '\0';
    return hv_streamcmd_parse_enqueue(argc, (char **)(void *)argv, out, err, sizeof(err));
}

static int status_args(int argc, const char **argv, hv_status_args_t *out)
{
    err[0] = '\0';
    return hv_streamcmd_parse_status(argc, (char **)(void *)argv, out, err, sizeof(err));
}

/* Refused, with `want` in the message. */
#define ASSERT_ENQUEUE_USAGE(want, ...)                                                            \
    do {                                                                                           \
        const char *uargv[] = {"enqueue", __VA_ARGS__};                                            \
        hv_enqueue_args_t uargs;                                                                   \
        ASSERT_EQ(-1, enqueue_args(ARGC(uargv), uargv, &uargs));                                   \
        if (strstr(err, (want)) == NULL)                                                           \
            hv_test_fail(__FILE__, __LINE__, "\"%s\" not in \"%s\"", (want), err);                 \
    } while (0)

#define ASSERT_STATUS_USAGE(want, ...)                                                             \
    do {                                                                                           \
        const char *uargv[] = {"status", __VA_ARGS__};                                             \
        hv_status_args_t uargs;                                                                    \
        ASSERT_EQ(-1, status_args(ARGC(uargv), uargv, &uargs));                                    \
        ASSERT_NULL(uargs.batches);                                                                \
        if (strstr(err, (want)) == NULL)                                                           \
            hv_test_fail(__FILE__, __LINE__, "\"%s\" not in \"%s\"", (want), err);                 \
    } while (0)

TEST_IMPL(streamcmd_enqueue_defaults)
{
    const char *argv[] = {"enqueue", "--redis", "redis://127.0.0.1", "lists/urls.txt"};
    hv_enqueue_args_t a;
    ASSERT_OK(enqueue_args(ARGC(argv), argv, &a));
    ASSERT_EQ(0, a.help);
    ASSERT_STR_EQ("redis://127.0.0.1", a.redis_url);
    ASSERT_STR_EQ("127.0.0.1", a.addr.host);
    ASSERT_EQ(6379, a.addr.port);
    ASSERT_EQ(0, a.addr.db);
    ASSERT_STR_EQ(HV_STREAM_DEFAULT, a.stream);
    ASSERT_STR_EQ("urls.txt", a.batch); /* the file's base name */
    ASSERT_STR_EQ("", a.rules);
    ASSERT_STR_EQ("lists/urls.txt", a.file);
    ASSERT_EQ(0, a.timeout_ms);
}

TEST_IMPL(streamcmd_enqueue_every_option)
{
    const char *argv[] = {
        "enqueue",      "--stream=s",     "--batch", "b",
        "--rules=news", "--timeout",      "1500ms",  "--redis=redis://[::1]:7000/2",
        "--",           "--not-an-option"};
    hv_enqueue_args_t a;
    ASSERT_OK(enqueue_args(ARGC(argv), argv, &a));
    ASSERT_STR_EQ("::1", a.addr.host);
    ASSERT_EQ(7000, a.addr.port);
    ASSERT_EQ(2, a.addr.db);
    ASSERT_STR_EQ("s", a.stream);
    ASSERT_STR_EQ("b", a.batch);
    ASSERT_STR_EQ("news", a.rules);
    ASSERT_EQ(1500, a.timeout_ms);
    ASSERT_STR_EQ("--not-an-option", a.file);

    /* Standard input, with its batch; a bare number of seconds; an empty value. */
    const char *in[] = {"enqueue",   "--redis", "redis://h", "--batch", "in",
                        "--timeout", "3",       "--rules=",  "-"};
    ASSERT_OK(enqueue_args(ARGC(in), in, &a));
    ASSERT_STR_EQ("-", a.file);
    ASSERT_STR_EQ("in", a.batch);
    ASSERT_STR_EQ("", a.rules);
    ASSERT_EQ(3000, a.timeout_ms);
}

/* The login and TLS options: kept for the command, which reads the password file and makes
 * the TLS context before connecting; the URL's own user and password are parsed here. */
TEST_IMPL(streamcmd_login_and_tls_options)
{
    const char *argv[] = {"enqueue",    "--redis",       "rediss://alice:pw@q.internal:6380",
                          "--ca-file",  "/etc/ca.pem",   "--insecure",
                          "--redis-password-file=/run/pw", "f"};
    hv_enqueue_args_t a;
    ASSERT_OK(enqueue_args(ARGC(argv), argv, &a));
    ASSERT_EQ(1, a.addr.tls);
    ASSERT_STR_EQ("alice", a.addr.user);
    ASSERT_STR_EQ("pw", a.addr.password);
    ASSERT_STR_EQ("q.internal", a.addr.host);
    ASSERT_EQ(6380, a.addr.port);
    ASSERT_STR_EQ("/etc/ca.pem", a.ca_file);
    ASSERT_EQ(1, a.insecure);
    ASSERT_STR_EQ("/run/pw", a.password_file);

    const char *st[] = {"status", "--redis=rediss://h", "--ca-file=/ca.pem",
                        "--redis-password-file", "/pw"};
    hv_status_args_t b;
    ASSERT_OK(status_args(ARGC(st), st, &b));
    ASSERT_EQ(1, b.addr.tls);
    ASSERT_STR_EQ("/ca.pem", b.ca_file);
    ASSERT_EQ(0, b.insecure);
    ASSERT_STR_EQ("/pw", b.password_file);
    hv_streamcmd_status_args_free(&b);

    const char *plain[] = {"status", "--redis=redis://h"};
    ASSERT_OK(status_args(ARGC(plain), plain, &b));
    ASSERT_EQ(0, b.addr.tls);
    ASSERT_NULL(b.ca_file);
    ASSERT_NULL(b.password_file);
    hv_streamcmd_status_args_free(&b);
}

TEST_IMPL(streamcmd_enqueue_help_needs_nothing_else)
{
    const char *argv[] = {"enqueue", "--help"};
    hv_enqueue_args_t a;
    ASSERT_OK(enqueue_args(ARGC(argv), argv, &a));
    ASSERT_EQ(1, a.help);
}

TEST_IMPL(streamcmd_enqueue_usage_errors)
{
    char long_batch[HV_STREAM_BATCH_MAX + 2];
    memset(long_batch, 'b', sizeof(long_batch) - 1);
    long_batch[sizeof(long_batch) - 1] = '\0';

    ASSERT_ENQUEUE_USAGE("--redis redis://HOST[:PORT][/DB] is required", "f");
    ASSERT_ENQUEUE_USAGE("is not a redis://", "--redis", "localhost:6379", "f");
    ASSERT_ENQUEUE_USAGE("(nor rediss:// for TLS)", "--redis", "redisx://h", "f");
    ASSERT_ENQUEUE_USAGE("needs a ':'", "--redis", "rediss://secret@h", "f");
    ASSERT_ENQUEUE_USAGE("option '--ca-file' needs a value", "--redis", "rediss://h", "f",
                         "--ca-file");
    ASSERT_ENQUEUE_USAGE("takes no value", "--redis", "rediss://h", "--insecure=yes", "f");
    ASSERT_ENQUEUE_USAGE("a FILE to enqueue is needed", "--redis", "redis://h");
    ASSERT_ENQUEUE_USAGE("one FILE at a time ('g' is a second)", "--redis", "redis://h", "f", "g");
    ASSERT_ENQUEUE_USAGE("standard input needs --batch NAME", "--redis", "redis://h", "-");
    ASSERT_ENQUEUE_USAGE("unknown option '--bogus=1'", "--redis", "redis://h", "--bogus=1", "f");
    ASSERT_ENQUEUE_USAGE("unknown option '-b'", "--redis", "redis://h", "-b", "x", "f");
    ASSERT_ENQUEUE_USAGE("unknown option '--json'", "--redis", "redis://h", "--json", "f");
    ASSERT_ENQUEUE_USAGE("option '--redis' needs a value", "f", "--redis");
    ASSERT_ENQUEUE_USAGE("option '--help' takes no value", "--help=1");
    ASSERT_ENQUEUE_USAGE("'' is not a batch name", "--redis", "redis://h", "--batch=", "f");
    ASSERT_ENQUEUE_USAGE("is not a batch name", "--redis", "redis://h", "--batch", "a\x01", "f");
    ASSERT_ENQUEUE_USAGE("is not a batch name", "--redis", "redis://h", "--batch", long_batch, "f");
    ASSERT_ENQUEUE_USAGE("'' is not a batch name", "--redis", "redis://h", "dir/");
    ASSERT_ENQUEUE_USAGE("--stream: a name", "--redis", "redis://h", "--stream=", "f");
    ASSERT_ENQUEUE_USAGE("--timeout: 'soon'", "--redis", "redis://h", "--timeout", "soon", "f");
    ASSERT_ENQUEUE_USAGE("--timeout: '0s'", "--redis", "redis://h", "--timeout", "0s", "f");
}

/* -c CONFIG: kept for the command, which checks --rules against the file's [rules] sets. */
TEST_IMPL(streamcmd_enqueue_config)
{
    const char *argv[] = {"enqueue", "--redis", "redis://h", "-c", "/etc/h.conf", "f"};
    hv_enqueue_args_t a;
    ASSERT_OK(enqueue_args(ARGC(argv), argv, &a));
    ASSERT_STR_EQ("/etc/h.conf", a.config);
    const char *eq[] = {"enqueue", "--config=/etc/g.conf", "--redis", "redis://h", "f"};
    ASSERT_OK(enqueue_args(ARGC(eq), eq, &a));
    ASSERT_STR_EQ("/etc/g.conf", a.config);
    const char *none[] = {"enqueue", "--redis", "redis://h", "f"};
    ASSERT_OK(enqueue_args(ARGC(none), none, &a));
    ASSERT_NULL(a.config);
    ASSERT_ENQUEUE_USAGE("option '-c' needs a value", "--redis", "redis://h", "f", "-c");
}

TEST_IMPL(streamcmd_enqueue_rules_checked_against_the_config)
{
    static const char conf[] = "spool_dir = /nowhere\n"
                               "[rules \"books\"]\ntitle = h1\n"
                               "[rules \"news\"]\nheadline = h2\n";
    const char *path = hv_test_tmppath("h.conf");
    hv_test_write_file(path, conf, sizeof(conf) - 1);
    ASSERT_OK(hv_streamcmd_check_rules(path, "books", err, sizeof(err)));
    ASSERT_OK(hv_streamcmd_check_rules(path, "news", err, sizeof(err)));
    ASSERT_OK(hv_streamcmd_check_rules(path, "", err, sizeof(err))); /* no --rules */
    ASSERT_EQ(-1, hv_streamcmd_check_rules(path, "bookz", err, sizeof(err)));
    char want[1200];
    snprintf(want, sizeof(want),
             "--rules 'bookz': %s has no [rules \"bookz\"] section (it has 'books', 'news')", path);
    ASSERT_STR_EQ(want, err);
    /* Names are compared as written, as the daemons do. */
    ASSERT_EQ(-1, hv_streamcmd_check_rules(path, "Books", err, sizeof(err)));

    static const char bare[] = "concurrency = 4\n";
    const char *plain = hv_test_tmppath("plain.conf");
    hv_test_write_file(plain, bare, sizeof(bare) - 1);
    ASSERT_EQ(-1, hv_streamcmd_check_rules(plain, "books", err, sizeof(err)));
    snprintf(want, sizeof(want),
             "--rules 'books': %s has no [rules \"books\"] section (it has none)", plain);
    ASSERT_STR_EQ(want, err);

    /* A file that does not load is an error whatever --rules says. */
    static const char bad[] = "concurrency = lots\n";
    const char *broken = hv_test_tmppath("bad.conf");
    hv_test_write_file(broken, bad, sizeof(bad) - 1);
    ASSERT_EQ(-1, hv_streamcmd_check_rules(broken, "", err, sizeof(err)));
    snprintf(want, sizeof(want), "-c: %s:1: concurrency: 'lots' is not a whole number", broken);
    ASSERT_STR_EQ(want, err);
    ASSERT_EQ(-1,
              hv_streamcmd_check_rules(hv_test_tmppath("missing.conf"), "books", err, sizeof(err)));
    if (strstr(err, "missing.conf") == NULL)
        hv_test_fail(__FILE__, __LINE__, "the missing file is not named: %s", err);
}

TEST_IMPL(streamcmd_status_defaults_and_batches)
{
    const char *argv[] = {"status",  "--redis", "redis://10.0.0.1:1234",
                          "--batch", "b",       "--batch=a",
                          "--batch", "b",       "--json",
                          "--group", "g"};
    hv_status_args_t a;
    ASSERT_OK(status_args(ARGC(argv), argv, &a));
    ASSERT_STR_EQ("10.0.0.1", a.addr.host);
    ASSERT_EQ(1234, a.addr.port);
    ASSERT_STR_EQ(HV_STREAM_DEFAULT, a.stream);
    ASSERT_STR_EQ("g", a.group);
    ASSERT_EQ(1, a.json);
    ASSERT_EQ(2, a.nbatches); /* each once, in the order given */
    ASSERT_STR_EQ("b", a.batches[0]);
    ASSERT_STR_EQ("a", a.batches[1]);
    hv_streamcmd_status_args_free(&a);
    ASSERT_NULL(a.batches);

    const char *plain[] = {"status", "--redis=redis://h"};
    ASSERT_OK(status_args(ARGC(plain), plain, &a));
    ASSERT_STR_EQ(HV_STREAM_GROUP_DEFAULT, a.group);
    ASSERT_EQ(0, a.nbatches);
    ASSERT_EQ(0, a.json);
    hv_streamcmd_status_args_free(&a);

    const char *help[] = {"status", "--help"};
    ASSERT_OK(status_args(ARGC(help), help, &a));
    ASSERT_EQ(1, a.help);
    hv_streamcmd_status_args_free(&a);
}

TEST_IMPL(streamcmd_status_usage_errors)
{
    ASSERT_STATUS_USAGE("--redis redis://HOST[:PORT][/DB] is required", "--json");
    ASSERT_STATUS_USAGE("status takes no arguments ('x')", "--redis", "redis://h", "x");
    ASSERT_STATUS_USAGE("status takes no arguments ('-')", "--redis", "redis://h", "-");
    ASSERT_STATUS_USAGE("is not a batch name", "--redis", "redis://h", "--batch", "a\nb");
    ASSERT_STATUS_USAGE("option '--json' takes no value", "--redis", "redis://h", "--json=no");
    ASSERT_STATUS_USAGE("--group: a name", "--redis", "redis://h", "--group=");
    ASSERT_STATUS_USAGE("unknown option '--rules'", "--redis", "redis://h", "--rules", "r");
    ASSERT_STATUS_USAGE("is not a redis://", "--redis", "redis://h:0");
}
