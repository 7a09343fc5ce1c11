/*
 * test_options.c: the one option parser (options.h), table-driven. Each case is a command
 * line read against one of three specs, shaped like those of the commands (enqueue's quoted
 * words, merge's and state's colon words, the daemon's words and its directive hook), and
 * the trace of everything hv_opt_next() returned until the end or the first error:
 *
 *   O<id>[=value]    an option of the table (its row's id), with its value if any
 *   O<id>/<name>     ... given by the long name or alias <name>
 *   D<name>[=value]  a long name the unknown hook took (a directive)
 *   A<word>          an argument; A*<word> after "--"
 *   .                the end
 *   E<message>       an error, the message as the command prints it
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harvestd/commands.h"
#include "harvestd/common.h"
#include "harvestd/options.h"
#include "test.h"

/* The ids the traces show. */
enum {
    REDIS = 1,
    BATCH = 2,
    HELP = 3,
    JSON = 4,
    OUTPUT = 5,
    CONFIG = 6,
    LINKS = 7,
    V = 8,
    VV = 9,
    ONCE = 10
};

/* enqueue and status: long options only, quoted words, "--FLAG=x" is an error. */
static const hv_opt_t quoted_opts[] = {
    {.name = "redis", .kind = HV_OPT_VALUE, .id = REDIS},
    {.name = "batch", .kind = HV_OPT_VALUE, .id = BATCH},
    {.name = "json", .id = JSON},
    {.name = "help", .id = HELP},
};
static const hv_opt_spec_t quoted = {
    .opts = quoted_opts,
    .nopts = HV_ARRAY_SIZE(quoted_opts),
    .rules = HV_OPT_DASHDASH,
    .say = HV_OPT_SAY_QUOTED,
};

/* merge and state: letters too, colon words, "--FLAG=x" is an unknown option. */
static const hv_opt_t colon_opts[] = {
    {.name = "batch", .kind = HV_OPT_VALUE, .id = BATCH},
    {.name = "output", .letter = "o", .kind = HV_OPT_VALUE, .id = OUTPUT},
    {.name = "json", .id = JSON},
    {.name = "help", .letter = "h", .id = HELP},
};
static const hv_opt_spec_t colon = {
    .opts = colon_opts,
    .nopts = HV_ARRAY_SIZE(colon_opts),
    .rules = HV_OPT_DASHDASH | HV_OPT_FLAG_VALUE_UNKNOWN,
    .say = HV_OPT_SAY_COLON,
};

/* The daemon's: rows embedded in a larger struct of the command's own, aliases, -v and -vv, no
 * "--", and every other long name a directive ("insecure" a flag, "refused" not one). */
typedef struct {
    const char *before; /* the row need not be the first member */
    hv_opt_t spelling;
    const char *fixed;
} daemon_row_t;

static const daemon_row_t daemon_rows[] = {
    {"c",
     {.name = "config", .alias = "c", .letter = "c", .kind = HV_OPT_VALUE, .id = CONFIG},
     NULL},
    {"l", {.name = "links", .id = LINKS}, "links=@links"},
    {"v", {.letter = "v", .id = V}, "info"},
    {"vv", {.letter = "vv", .id = VV}, "debug"},
    {"once", {.name = "once", .kind = HV_OPT_VALUE, .id = ONCE}, NULL},
    {"o",
     {.name = "output", .alias = "o", .letter = "o", .kind = HV_OPT_VALUE, .id = OUTPUT},
     NULL},
};

static int directive(const char *name)
{
    if (strcmp(name, "refused") == 0)
        return -1;
    return strcmp(name, "insecure") == 0 ? HV_OPT_OPTIONAL : HV_OPT_VALUE;
}

static const hv_opt_spec_t daemonlike = {
    .opts = &daemon_rows[0].spelling,
    .nopts = HV_ARRAY_SIZE(daemon_rows),
    .stride = sizeof(daemon_rows[0]),
    .rules = HV_OPT_FLAG_VALUE_UNKNOWN,
    .say = HV_OPT_SAY_DAEMON,
    .unknown = directive,
};

#define MAX_ARGS 8

typedef struct {
    const hv_opt_spec_t *spec;
    const char *argv[MAX_ARGS]; /* after the command's name; NULL-terminated */
    const char *trace;
} case_t;

static const case_t cases[] = {
    /* --name VALUE, --name=VALUE, an empty value, and a value that looks like an option. */
    {&quoted, {"--redis", "redis://h", "f"}, "O1=redis://h Af ."},
    {&quoted, {"--redis=redis://h", "--batch=", "f"}, "O1=redis://h O2= Af ."},
    {&quoted, {"--batch", "--json", "--redis", "-x"}, "O2=--json O1=-x ."},
    {&quoted, {"--batch=a=b"}, "O2=a=b ."},
    /* Flags. */
    {&quoted, {"--json", "--help"}, "O4 O3 ."},
    {&quoted, {"--help=1"}, "Eoption '--help' takes no value"},
    {&colon, {"--help=1"}, "Eunknown option: --help=1"},
    {&colon, {"--json=", "x"}, "Eunknown option: --json="},
    /* Missing values. */
    {&quoted, {"f", "--redis"}, "Af Eoption '--redis' needs a value"},
    {&colon, {"--batch"}, "E--batch needs a value"},
    {&colon, {"-o"}, "E-o needs a value"},
    {&colon, {"--output"}, "E--output needs a value"},
    {&daemonlike, {"-c"}, "Emissing value for -c"},
    {&daemonlike, {"--concurrency"}, "Emissing value for --concurrency"},
    /* Unknown options: the whole word, in each wording. */
    {&quoted, {"--bogus=1", "f"}, "Eunknown option '--bogus=1'"},
    {&quoted, {"-b", "x"}, "Eunknown option '-b'"},
    {&colon, {"--frob", "f"}, "Eunknown option: --frob"},
    {&colon, {"--batchx"}, "Eunknown option: --batchx"},
    {&colon, {"-o=x"}, "Eunknown option: -o=x"},
    {&colon, {"-oX"}, "Eunknown option: -oX"},
    {&daemonlike, {"-x"}, "Eunexpected argument: -x"},
    {&daemonlike, {"-vvv"}, "Eunexpected argument: -vvv"},
    {&daemonlike, {"--refused", "1"}, "Eunknown option: --refused"},
    /* Letters: -L VALUE, a word of more than one letter, aliases as long names. */
    {&colon, {"-o", "out", "-h"}, "O5=out O3 ."},
    {&daemonlike, {"-v", "-vv", "-o", "-", "--o", "x"}, "O8 O9 O5=- O5/o=x ."},
    {&daemonlike, {"--c=a.conf", "--config", "b.conf"}, "O6/c=a.conf O6=b.conf ."},
    /* "-" alone is an argument, before and after "--"; "--" ends the options. */
    {&quoted, {"-", "--", "--json", "-", "x"}, "A- A*--json A*- A*x ."},
    {&quoted, {"--", "--"}, "A*-- ."},
    {&colon, {"a", "--", "-o", "b"}, "Aa A*-o A*b ."},
    /* Without the rule, "--" is an unknown option; so is "--=x". */
    {&daemonlike, {"--"}, "Eunknown option: --"},
    {&daemonlike, {"--=x"}, "Eunknown option: --=x"},
    {&daemonlike, {"-"}, "A- ."},
    {&daemonlike, {"file"}, "Afile ."},
    /* Repeated options are each returned, in order. */
    {&quoted, {"--batch", "b", "--batch=a", "--batch", "b"}, "O2=b O2=a O2=b ."},
    /* The daemonlike's directives: a value, a flag with and without one, and a flag row given a
     * value, which is then a directive of that name. */
    {&daemonlike, {"--concurrency", "8", "--per_host=2"}, "Dconcurrency=8 Dper_host=2 ."},
    {&daemonlike, {"--insecure", "--insecure=no", "x"}, "Dinsecure Dinsecure=no Ax ."},
    {&daemonlike, {"--links", "--links=x"}, "O7 Dlinks=x ."},
    {&daemonlike, {"--once", "urls", "--links"}, "O10=urls O7 ."},
    /* A name too long for the parser is unknown, not a directive. */
    {&daemonlike,
     {"--aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "1"},
     "Eunknown option: --aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"},
    {&daemonlike,
     {"--aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "1"},
     "Daaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa=1 ."},
    /* Nothing at all. */
    {&colon, {NULL}, "."},
};

/* Whether the option was given under a long name other than its row's name (an alias). */
static int other_name(const hv_opt_arg_t *a)
{
    return a->name[0] != '\0' && (a->opt->name == NULL || strcmp(a->name, a->opt->name) != 0);
}

/* Everything hv_opt_next() returns for `c`, as a trace (see the top of the file). */
static void trace_of(const case_t *c, char *out, size_t cap)
{
    const char *argv[MAX_ARGS + 2] = {"cmd"};
    int argc = 1;
    for (size_t i = 0; i < MAX_ARGS && c->argv[i] != NULL; i++)
        argv[argc++] = c->argv[i];
    hv_opt_parser_t p;
    hv_opt_arg_t a;
    char err[256];
    size_t used = 0;
    int k;
    out[0] = '\0';
    hv_opt_init(&p, c->spec, argc, (char **)(void *)argv);
    do {
        char one[sizeof(err) + HV_OPT_NAME_MAX + 16];
        memset(err, 'x', sizeof(err));
        k = hv_opt_next(&p, &a, err, sizeof(err));
        if (k == HV_OPT_ERROR)
            snprintf(one, sizeof(one), "E%s", err);
        else if (k == HV_OPT_END)
            snprintf(one, sizeof(one), ".");
        else if (k == HV_OPT_ARGUMENT)
            snprintf(one, sizeof(one), "A%s%s", a.after_dashdash ? "*" : "", a.word);
        else if (a.opt == NULL)
            snprintf(one, sizeof(one), "D%s%s%s", a.name, a.value != NULL ? "=" : "",
                     a.value != NULL ? a.value : "");
        else
            snprintf(one, sizeof(one), "O%d%s%s%s%s", a.opt->id, other_name(&a) ? "/" : "",
                     other_name(&a) ? a.name : "", a.value != NULL ? "=" : "",
                     a.value != NULL ? a.value : "");
        if (used < cap)
            used += (size_t)snprintf(out + used, cap - used, "%s%s", used > 0 ? " " : "", one);
    } while (k == HV_OPT_OPTION || k == HV_OPT_ARGUMENT);
}

TEST_IMPL(options_every_rule)
{
    for (size_t i = 0; i < HV_ARRAY_SIZE(cases); i++) {
        char got[1024];
        trace_of(&cases[i], got, sizeof(got));
        if (strcmp(got, cases[i].trace) != 0)
            hv_test_fail(__FILE__, __LINE__, "case %zu (%s ...): \"%s\", want \"%s\"", i,
                         cases[i].argv[0] != NULL ? cases[i].argv[0] : "", got, cases[i].trace);
    }
}

/* The fields of one option: its word, its name as written, and the row found back from it
 * (hv_opt_container) when the rows are embedded. */
TEST_IMPL(options_what_an_option_carries)
{
    const char *argv[] = {"harvestd", "--o=out.jsonl", "-vv", "--insecure"};
    hv_opt_parser_t p;
    hv_opt_arg_t a;
    char err[128];
    hv_opt_init(&p, &daemonlike, HV_ARRAY_SIZE(argv), (char **)(void *)argv);

    ASSERT_EQ(HV_OPT_OPTION, hv_opt_next(&p, &a, err, sizeof(err)));
    ASSERT_STR_EQ("--o=out.jsonl", a.word);
    ASSERT_STR_EQ("o", a.name);
    ASSERT_STR_EQ("out.jsonl", a.value);
    ASSERT(hv_opt_container(a.opt, daemon_row_t, spelling) == &daemon_rows[5]);

    ASSERT_EQ(HV_OPT_OPTION, hv_opt_next(&p, &a, err, sizeof(err)));
    ASSERT_STR_EQ("-vv", a.word);
    ASSERT_STR_EQ("", a.name);
    ASSERT_NULL(a.value);
    ASSERT_STR_EQ("debug", hv_opt_container(a.opt, daemon_row_t, spelling)->fixed);

    ASSERT_EQ(HV_OPT_OPTION, hv_opt_next(&p, &a, err, sizeof(err)));
    ASSERT_NULL(a.opt);
    ASSERT_STR_EQ("insecure", a.name);
    ASSERT_NULL(a.value);

    ASSERT_EQ(HV_OPT_END, hv_opt_next(&p, &a, err, sizeof(err)));
    ASSERT_EQ(HV_OPT_END, hv_opt_next(&p, &a, err, sizeof(err)));
}

/* A message longer than the buffer is cut, never overrun. */
TEST_IMPL(options_error_fits_the_buffer)
{
    const char *argv[] = {"cmd", "--a-rather-long-unknown-option"};
    hv_opt_parser_t p;
    hv_opt_arg_t a;
    char err[12];
    hv_opt_init(&p, &quoted, HV_ARRAY_SIZE(argv), (char **)(void *)argv);
    ASSERT_EQ(HV_OPT_ERROR, hv_opt_next(&p, &a, err, sizeof(err)));
    ASSERT_STR_EQ("unknown opt", err);
}

/* The usage lines in table order, each indented, their continuation lines too; rows without
 * one are not shown, and a row that is no option (an argument's) is. */
TEST_IMPL(options_print_usage)
{
    static const hv_opt_t rows[] = {
        {.name = "batch", .kind = HV_OPT_VALUE, .usage = "--batch NAME  the batch"},
        {.name = "hidden"},
        {.usage = "FILE          a file\n              read whole"},
        {.name = "help", .letter = "h", .usage = "-h, --help    this text"},
    };
    static const hv_opt_spec_t spec = {.opts = rows, .nopts = HV_ARRAY_SIZE(rows)};
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ASSERT_NOT_NULL(f);
    hv_opt_print_usage(f, &spec);
    fclose(f);
    ASSERT_STR_EQ("  --batch NAME  the batch\n"
                  "  FILE          a file\n"
                  "                read whole\n"
                  "  -h, --help    this text\n",
                  text);
    free(text);
}

/* Every option of every command has its line in the command's --help (and so in the manual
 * page, which is made from the same rows): an option added without one fails here. */
TEST_IMPL(options_every_command_option_is_shown)
{
    static const struct {
        const char *name;
        const hv_opt_spec_t *spec;
    } commands[] = {{"enqueue", &hv_cmd_enqueue_spec},
                    {"status", &hv_cmd_status_spec},
                    {"merge", &hv_cmd_merge_spec},
                    {"state", &hv_cmd_state_spec}};
    for (size_t c = 0; c < HV_ARRAY_SIZE(commands); c++) {
        for (size_t i = 0; i < commands[c].spec->nopts; i++) {
            const hv_opt_t *o = hv_opt_row(commands[c].spec, i);
            if (o->usage == NULL)
                hv_test_fail(__FILE__, __LINE__, "harvestd %s: --%s has no usage line",
                             commands[c].name, o->name != NULL ? o->name : o->letter);
            else if (o->name != NULL && strstr(o->usage, o->name) == NULL)
                hv_test_fail(__FILE__, __LINE__, "harvestd %s: --%s's usage line is %s's",
                             commands[c].name, o->name, o->usage);
        }
    }
}
