/*
 * man.c: the manual pages, harvestd(1) and harvestd.conf(5), written at build time from a
 * template of prose (src/man/) and the tables the program itself reads: the option tables of
 * the commands (their rows' usage lines) and the directive table (config.h). An option or a
 * directive therefore cannot be added without its entry, nor its meaning or default change
 * in one place only. `make man` runs `harvestd --help-man=TEMPLATE` for each page.
 *
 * Everything that comes from a table is escaped for roff here: backslashes, a dash that starts
 * a word (an option, so that it prints as a minus and can be searched for), a line that would
 * start with a control character, and anything beyond ASCII (as \[uXXXX]).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "harvestd/commands.h"
#include "harvestd/common.h"
#include "harvestd/config.h"
#include "harvestd/options.h"

#define EXIT_TEMPLATE 2

static int is_alnum(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* One UTF-8 sequence at s (at most `len` bytes) as \[uXXXX]: the bytes it took, or 0 when it
 * is not well formed (the byte is then written as a replacement character). */
static size_t put_utf8(FILE *out, const unsigned char *s, size_t len)
{
    unsigned cp;
    size_t n = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc0 ? 2 : 0;
    if (n == 0 || n > len)
        return 0;
    cp = s[0] & (0x7fu >> n);
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3fu);
    }
    fprintf(out, "\\[u%04X]", cp);
    return n;
}

/* `len` bytes of text for a filled paragraph: a line break becomes a space, runs of spaces one
 * space (the help texts align their lines with them). */
static void put_text(FILE *out, const char *text, size_t len)
{
    const unsigned char *s = (const unsigned char *)text;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = s[i];
        if (c == '\n' || c == ' ') {
            while (i + 1 < len && (s[i + 1] == ' ' || s[i + 1] == '\n'))
                i++;
            fputc(' ', out);
        } else if (c == '\\') {
            fputs("\\e", out);
        } else if (c == '-' && (i == 0 || !is_alnum(s[i - 1]))) {
            fputs("\\-", out);
        } else if (c >= 0x80) {
            size_t n = put_utf8(out, s + i, len - i);
            if (n == 0)
                fputs("\\[uFFFD]", out);
            else
                i += n - 1;
        } else {
            fputc(c, out);
        }
    }
}

/* A line of text from a table: never one that roff would read as a request. */
static void put_line(FILE *out, const char *text, size_t len)
{
    if (len > 0 && (text[0] == '.' || text[0] == '\''))
        fputs("\\&", out);
    put_text(out, text, len);
    fputc('\n', out);
}

/* An option's name in bold, every dash a minus, so that it can be copied and searched for. */
static void put_option(FILE *out, const char *s, size_t len)
{
    fputs("\\fB", out);
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '-')
            fputs("\\-", out);
        else
            fputc(s[i], out);
    }
    fputs("\\fR", out);
}

static int starts_option(const char *s, size_t i)
{
    return s[i] == '-' && (i == 0 || !is_alnum((unsigned char)s[i - 1]));
}

static int starts_placeholder(const char *s, size_t i)
{
    return s[i] >= 'A' && s[i] <= 'Z' && (i == 0 || !is_alnum((unsigned char)s[i - 1]));
}

/* How an option is written ("-o, --output FILE", "--header 'NAME: VALUE'"): its dashed words
 * in bold, the words in capitals (what the user supplies) in italics, the rest as it is. */
static void put_spelling(FILE *out, const char *s, size_t len)
{
    size_t i = 0;
    if (len > 0 && (s[0] == '.' || s[0] == '\''))
        fputs("\\&", out);
    while (i < len) {
        size_t j = i + 1;
        if (starts_option(s, i)) {
            while (j < len && (s[j] == '-' || is_alnum((unsigned char)s[j])))
                j++;
            put_option(out, s + i, j - i);
        } else if (starts_placeholder(s, i)) {
            while (j < len && ((s[j] >= 'A' && s[j] <= 'Z') || s[j] == '_' ||
                               (s[j] >= '0' && s[j] <= '9')))
                j++;
            fputs("\\fI", out);
            put_text(out, s + i, j - i);
            fputs("\\fR", out);
        } else {
            while (j < len && !starts_option(s, j) && !starts_placeholder(s, j))
                j++;
            put_text(out, s + i, j - i);
        }
        i = j;
    }
}

/* A usage line as a tagged paragraph: its spelling, then its meaning. The spelling ends at
 * the first two spaces of the first line, or with that line when the meaning follows on the
 * next ones. */
static int put_usage(FILE *out, const char *usage, const char *where)
{
    const char *nl = strchr(usage, '\n');
    size_t first = nl != NULL ? (size_t)(nl - usage) : strlen(usage);
    const char *gap = memmem(usage, first, "  ", 2);
    size_t spell = gap != NULL ? (size_t)(gap - usage) : first;
    const char *meaning = usage + spell;
    while (*meaning == ' ' || *meaning == '\n')
        meaning++;
    if (*meaning == '\0') {
        fprintf(stderr, "harvestd: %s: the usage line '%s' says nothing of what it does\n", where,
                usage);
        return EXIT_TEMPLATE;
    }
    fputs(".TP\n", out);
    put_spelling(out, usage, spell);
    fputc('\n', out);
    put_line(out, meaning, strlen(meaning));
    return 0;
}

static int put_options(FILE *out, const hv_opt_spec_t *spec, const char *where)
{
    int rc = 0;
    for (size_t i = 0; i < spec->nopts && rc == 0; i++)
        if (hv_opt_row(spec, i)->usage != NULL)
            rc = put_usage(out, hv_opt_row(spec, i)->usage, where);
    return rc;
}

/* A meaning from a table as a sentence of its own: on its own line, ending in a period. */
static void put_sentence(FILE *out, const char *text)
{
    size_t len = strlen(text);
    if (len > 0 && (text[0] == '.' || text[0] == '\''))
        fputs("\\&", out);
    put_text(out, text, len);
    fputs(len > 0 && text[len - 1] == '.' ? "\n" : ".\n", out);
}

/* --NAME for directive NAME: dashes for underscores. */
static void option_name(const char *name, char *out, size_t cap)
{
    snprintf(out, cap, "--%s", name);
    for (char *p = out + 2; *p != '\0'; p++)
        if (*p == '_')
            *p = '-';
}

static void put_default(FILE *out, const hv_config_doc_t *doc)
{
    if (doc->def[0] == '\0') {
        fputs("none", out);
        return;
    }
    fputs("\\fB", out);
    put_text(out, doc->def, strlen(doc->def));
    fputs("\\fR", out);
}

/* Every directive as an option of harvestd(1). A switch (yes|no) is given alone. */
static void put_directive_options(FILE *out)
{
    hv_config_doc_t doc;
    for (size_t i = 0; hv_config_describe(i, &doc) == 0; i++) {
        char opt[96];
        option_name(doc.name, opt, sizeof(opt));
        fputs(".TP\n", out);
        put_option(out, opt, strlen(opt));
        if (strcmp(doc.value, "yes|no") == 0)
            fputs("[=\\fIyes\\fR|\\fIno\\fR]\n", out);
        else
            fprintf(out, " \\fI%s\\fR\n", doc.value);
        put_text(out, doc.help, strlen(doc.help));
        fputs(" (default ", out);
        put_default(out, &doc);
        fputs(")\n", out);
    }
}

/* Every directive as a line of harvestd.conf(5): name = VALUE, its meaning, what its values
 * are, its default. */
static void put_directives(FILE *out)
{
    hv_config_doc_t doc;
    for (size_t i = 0; hv_config_describe(i, &doc) == 0; i++) {
        fputs(".TP\n\\fB", out);
        put_text(out, doc.name, strlen(doc.name));
        fprintf(out, "\\fR = \\fI%s\\fR\n", doc.value);
        put_sentence(out, doc.help);
        fputs(".br\n", out);
        if (doc.values[0] != '\0') {
            fputs("Values: ", out);
            put_text(out, doc.values, strlen(doc.values));
            fputs(". ", out);
        }
        fputs("Default: ", out);
        put_default(out, &doc);
        fputs(".\n", out);
    }
}

static void put_host_keys(FILE *out)
{
    const char *key;
    for (size_t i = 0; (key = hv_config_host_key(i)) != NULL; i++) {
        fputs(i > 0 ? ", \\fB" : "\\fB", out);
        put_text(out, key, strlen(key));
        fputs("\\fR", out);
    }
    fputc('\n', out);
}

/* The table a template line names, written out: 0, or EXIT_TEMPLATE for a name that is none. */
static int put_table(FILE *out, const char *name, const hv_opt_spec_t *cli, const char *where)
{
    static const struct {
        const char *name;
        const hv_opt_spec_t *spec;
    } commands[] = {
        {"@OPTIONS enqueue@", &hv_cmd_enqueue_spec},
        {"@OPTIONS status@", &hv_cmd_status_spec},
        {"@OPTIONS merge@", &hv_cmd_merge_spec},
        {"@OPTIONS state@", &hv_cmd_state_spec},
    };
    if (strcmp(name, "@OPTIONS@") == 0)
        return put_options(out, cli, where);
    for (size_t i = 0; i < HV_ARRAY_SIZE(commands); i++)
        if (strcmp(name, commands[i].name) == 0)
            return put_options(out, commands[i].spec, where);
    if (strcmp(name, "@DIRECTIVE_OPTIONS@") == 0)
        put_directive_options(out);
    else if (strcmp(name, "@DIRECTIVES@") == 0)
        put_directives(out);
    else if (strcmp(name, "@HOST_KEYS@") == 0)
        put_host_keys(out);
    else {
        fprintf(stderr, "harvestd: %s: no table called %s\n", where, name);
        return EXIT_TEMPLATE;
    }
    return 0;
}

/* A line of prose, with @VERSION@ replaced. */
static void put_template_line(FILE *out, const char *line)
{
    static const char version[] = "@VERSION@";
    const char *at;
    while ((at = strstr(line, version)) != NULL) {
        fwrite(line, 1, (size_t)(at - line), out);
        fputs(HV_VERSION, out);
        line = at + sizeof(version) - 1;
    }
    fputs(line, out);
    fputc('\n', out);
}

int hv_cmd_man(const char *template_path, FILE *out, const hv_opt_spec_t *cli)
{
    FILE *in = fopen(template_path, "r");
    char *line = NULL, where[1100];
    size_t cap = 0;
    ssize_t len;
    int rc = 0, lineno = 0;

    if (in == NULL) {
        fprintf(stderr, "harvestd: cannot read %s: %s\n", template_path, strerror(errno));
        return EXIT_TEMPLATE;
    }
    while (rc == 0 && (len = getline(&line, &cap, in)) >= 0) {
        lineno++;
        if (len > 0 && line[len - 1] == '\n')
            line[--len] = '\0';
        snprintf(where, sizeof(where), "%.1000s:%d", template_path, lineno);
        if (len > 1 && line[0] == '@' && line[len - 1] == '@' && strcmp(line, "@VERSION@") != 0)
            rc = put_table(out, line, cli, where);
        else
            put_template_line(out, line);
    }
    if (rc == 0 && ferror(in)) {
        fprintf(stderr, "harvestd: cannot read %s: %s\n", template_path, strerror(errno));
        rc = EXIT_TEMPLATE;
    }
    free(line);
    fclose(in);
    if (rc == 0 && fflush(out) != 0) {
        fprintf(stderr, "harvestd: cannot write the manual page: %s\n", strerror(errno));
        rc = EXIT_TEMPLATE;
    }
    return rc;
}
