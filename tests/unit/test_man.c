/*
 * test_man.c: the manual pages' generator (hv_cmd_man(), src/cmd/man.c): a template's prose
 * passes as it is, its table lines become the tables' entries escaped for roff, and a
 * template or a table that would leave a hole in the page is an error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harvestd/commands.h"
#include "harvestd/common.h"
#include "harvestd/config.h"
#include "harvestd/options.h"
#include "test.h"

static const hv_opt_t cli_rows[] = {
    {.name = "config", .letter = "c", .kind = HV_OPT_VALUE,
     .usage = "-c, --config FILE  INI configuration"},
    {.name = "quiet"},
    {.name = "header", .kind = HV_OPT_VALUE,
     .usage = "--header 'NAME: VALUE'\n"
              "                   .dots first, C:\\path: a header"},
    {.usage = "DIR_OR_FILE        what to read"},
};
static const hv_opt_spec_t cli = {.opts = cli_rows, .nopts = HV_ARRAY_SIZE(cli_rows)};

/* The page `template` makes (NUL-terminated, the caller frees it) and the status in *rc. */
static char *page_of(const char *template_text, const hv_opt_spec_t *spec, int *rc)
{
    const char *path = hv_test_tmppath("page.in");
    char *text = NULL;
    size_t len = 0;
    hv_test_write_file(path, template_text, strlen(template_text));
    FILE *f = open_memstream(&text, &len);
    if (f == NULL)
        hv_test_fail(__FILE__, __LINE__, "open_memstream failed");
    *rc = hv_cmd_man(path, f, spec);
    fclose(f);
    return text;
}

TEST_IMPL(man_prose_and_options)
{
    int rc;
    char *page = page_of(".TH X 1 \"\" \"harvestd @VERSION@\"\n"
                         "Some @prose@ with @ signs.\n"
                         "@OPTIONS@\n"
                         ".SH END\n",
                         &cli, &rc);
    ASSERT_EQ(0, rc);
    ASSERT_STR_EQ(".TH X 1 \"\" \"harvestd " HV_VERSION "\"\n"
                  "Some @prose@ with @ signs.\n"
                  ".TP\n"
                  "\\fB\\-c\\fR, \\fB\\-\\-config\\fR \\fIFILE\\fR\n"
                  "INI configuration\n"
                  ".TP\n"
                  "\\fB\\-\\-header\\fR '\\fINAME\\fR: \\fIVALUE\\fR'\n"
                  "\\&.dots first, C:\\epath: a header\n"
                  ".TP\n"
                  "\\fIDIR_OR_FILE\\fR\n"
                  "what to read\n"
                  ".SH END\n",
                  page);
    free(page);
}

/* Every directive as an option of harvestd(1) and a line of harvestd.conf(5), with its
 * default; the [host] keys on one line. */
TEST_IMPL(man_directives)
{
    int rc;
    char *page = page_of("@DIRECTIVE_OPTIONS@\n@DIRECTIVES@\n@HOST_KEYS@\n", &cli, &rc);
    hv_config_doc_t doc;
    ASSERT_EQ(0, rc);
    for (size_t i = 0; hv_config_describe(i, &doc) == 0; i++) {
        char conf[128];
        snprintf(conf, sizeof(conf), ".TP\n\\fB%s\\fR = \\fI%s\\fR\n", doc.name, doc.value);
        if (strstr(page, conf) == NULL)
            hv_test_fail(__FILE__, __LINE__, "no entry for %s in:\n%s", doc.name, page);
    }
    ASSERT_NOT_NULL(strstr(page, ".TP\n\\fB\\-\\-max\\-redirects\\fR \\fIN\\fR\n"
                                 "redirects followed per URL (default \\fB10\\fR)\n"));
    ASSERT_NOT_NULL(strstr(page, ".TP\n\\fB\\-\\-insecure\\fR[=\\fIyes\\fR|\\fIno\\fR]\n"));
    ASSERT_NOT_NULL(strstr(page, "(default none)\n"));
    ASSERT_NOT_NULL(strstr(page, "redirects followed per URL.\n.br\n"
                                 "Values: a whole number from 0 to 100. Default: \\fB10\\fR.\n"));
    ASSERT_NOT_NULL(strstr(page, "\\fBper_host\\fR, \\fBhost_delay\\fR, "));
    ASSERT_NOT_NULL(strstr(page, ", \\fBheader\\fR\n"));
    free(page);
}

/* Every command's table has its line. */
TEST_IMPL(man_command_options)
{
    int rc;
    char *page = page_of("@OPTIONS enqueue@\n@OPTIONS status@\n@OPTIONS merge@\n"
                         "@OPTIONS state@\n",
                         &cli, &rc);
    ASSERT_EQ(0, rc);
    ASSERT_NOT_NULL(strstr(page, "\\fB\\-\\-redis\\-password\\-file\\fR \\fIFILE\\fR\n"
                                 "the password, instead of the URL's (one line; readable by "
                                 "its owner only)\n"));
    ASSERT_NOT_NULL(strstr(page, "\\fB\\-\\-group\\fR \\fINAME\\fR\n"));
    ASSERT_NOT_NULL(strstr(page, "\\fB\\-o\\fR, \\fB\\-\\-output\\fR \\fIFILE\\fR\n"));
    ASSERT_NOT_NULL(strstr(page, "\\fB\\-\\-older\\-than\\fR \\fIDURATION\\fR\n"));
    free(page);
}

/* A name that is no table, a usage line that says nothing, a template that is not there:
 * errors, said on stderr. */
TEST_IMPL(man_holes_are_errors)
{
    static const hv_opt_t mute_rows[] = {{.name = "mute", .usage = "--mute"}};
    static const hv_opt_spec_t mute = {.opts = mute_rows, .nopts = 1};
    int rc;
    free(page_of("prose\n@OPTIONS nosuch@\n", &cli, &rc));
    ASSERT_EQ(2, rc);
    free(page_of("@OPTIONS@\n", &mute, &rc));
    ASSERT_EQ(2, rc);
    FILE *f = fopen("/dev/null", "w");
    ASSERT_NOT_NULL(f);
    ASSERT_EQ(2, hv_cmd_man(hv_test_tmppath("missing.in"), f, &cli));
    fclose(f);
}
