/* options.c: one parser for every command's command line (see options.h). */
#include "harvestd/options.h"

#include <string.h>

#include "harvestd/common.h"

typedef enum { SAY_UNKNOWN, SAY_UNKNOWN_LETTER, SAY_NO_VALUE, SAY_FLAG_VALUE } say_what_t;

/* The message of an error in the spec's wording. `subject` is the word for the unknown ones,
 * the option as written (without =VALUE, `len` bytes) for the others. */
static int say(const hv_opt_parser_t *p, say_what_t what, const char *subject, size_t len,
               char *err, size_t errcap)
{
    int n = (int)HV_MIN(len, (size_t)0x7fffffff);
    switch (p->spec->say) {
    case HV_OPT_SAY_QUOTED:
        if (what == SAY_UNKNOWN || what == SAY_UNKNOWN_LETTER)
            return hv_errf(err, errcap, HV_OPT_ERROR, "unknown option '%.*s'", n, subject);
        if (what == SAY_NO_VALUE)
            return hv_errf(err, errcap, HV_OPT_ERROR, "option '%.*s' needs a value", n, subject);
        return hv_errf(err, errcap, HV_OPT_ERROR, "option '%.*s' takes no value", n, subject);
    case HV_OPT_SAY_DAEMON:
        if (what == SAY_UNKNOWN_LETTER)
            return hv_errf(err, errcap, HV_OPT_ERROR, "unexpected argument: %.*s", n, subject);
        if (what == SAY_NO_VALUE)
            return hv_errf(err, errcap, HV_OPT_ERROR, "missing value for %.*s", n, subject);
        break;
    case HV_OPT_SAY_COLON:
        if (what == SAY_NO_VALUE)
            return hv_errf(err, errcap, HV_OPT_ERROR, "%.*s needs a value", n, subject);
        break;
    }
    if (what == SAY_FLAG_VALUE)
        return hv_errf(err, errcap, HV_OPT_ERROR, "%.*s takes no value", n, subject);
    return hv_errf(err, errcap, HV_OPT_ERROR, "unknown option: %.*s", n, subject);
}

const hv_opt_t *hv_opt_row(const hv_opt_spec_t *spec, size_t i)
{
    size_t stride = spec->stride != 0 ? spec->stride : sizeof(hv_opt_t);
    return (const hv_opt_t *)(const void *)((const char *)spec->opts + i * stride);
}

void hv_opt_print_usage(FILE *out, const hv_opt_spec_t *spec)
{
    for (size_t i = 0; i < spec->nopts; i++) {
        const char *u = hv_opt_row(spec, i)->usage;
        if (u == NULL)
            continue;
        fputs("  ", out);
        for (; *u != '\0'; u++) {
            fputc(*u, out);
            if (*u == '\n')
                fputs("  ", out);
        }
        fputc('\n', out);
    }
}

static int is(const char *spelling, const char *s, size_t len)
{
    return spelling != NULL && strlen(spelling) == len && memcmp(spelling, s, len) == 0;
}

/* The row spelled --`s` (`len` bytes) or, when !long_form, -`s`; NULL for none. */
static const hv_opt_t *find(const hv_opt_spec_t *spec, const char *s, size_t len, int long_form)
{
    for (size_t i = 0; i < spec->nopts; i++) {
        const hv_opt_t *o = hv_opt_row(spec, i);
        if (long_form ? is(o->name, s, len) || is(o->alias, s, len) : is(o->letter, s, len))
            return o;
    }
    return NULL;
}

void hv_opt_init(hv_opt_parser_t *p, const hv_opt_spec_t *spec, int argc, char **argv)
{
    memset(p, 0, sizeof(*p));
    p->spec = spec;
    p->argc = argc;
    p->argv = argv;
    p->next = 1;
}

int hv_opt_next(hv_opt_parser_t *p, hv_opt_arg_t *out, char *err, size_t errcap)
{
    const hv_opt_spec_t *spec = p->spec;
    const char *word, *eq = NULL;
    size_t len;
    hv_opt_kind_t kind;

    memset(out, 0, sizeof(*out));
    for (;;) {
        if (p->next >= p->argc)
            return HV_OPT_END;
        word = p->argv[p->next++];
        out->word = word;
        if (p->args_only || word[0] != '-' || word[1] == '\0') {
            out->after_dashdash = p->args_only;
            return HV_OPT_ARGUMENT;
        }
        if (!(spec->rules & HV_OPT_DASHDASH) || strcmp(word, "--") != 0)
            break;
        p->args_only = 1;
    }

    if (word[1] != '-') {
        out->opt = find(spec, word + 1, strlen(word + 1), 0);
        if (out->opt == NULL)
            return say(p, SAY_UNKNOWN_LETTER, word, strlen(word), err, errcap);
        kind = out->opt->kind;
        len = strlen(word);
    } else {
        eq = strchr(word, '=');
        len = eq != NULL ? (size_t)(eq - word) : strlen(word); /* the option as written */
        size_t n = len - 2;
        if (n == 0 || n >= sizeof(out->name))
            return say(p, SAY_UNKNOWN, word, strlen(word), err, errcap);
        memcpy(out->name, word + 2, n);
        out->name[n] = '\0';
        out->opt = find(spec, out->name, n, 1);
        if (out->opt != NULL && out->opt->kind == HV_OPT_FLAG && eq != NULL) {
            if (!(spec->rules & HV_OPT_FLAG_VALUE_UNKNOWN))
                return say(p, SAY_FLAG_VALUE, word, len, err, errcap);
            out->opt = NULL; /* then as any name that is no row */
        }
        if (out->opt != NULL) {
            kind = out->opt->kind;
        } else {
            int k = spec->unknown != NULL ? spec->unknown(out->name) : -1;
            if (k != HV_OPT_VALUE && k != HV_OPT_OPTIONAL)
                return say(p, SAY_UNKNOWN, word, strlen(word), err, errcap);
            kind = (hv_opt_kind_t)k;
        }
    }

    if (kind == HV_OPT_FLAG)
        return HV_OPT_OPTION;
    if (eq != NULL)
        out->value = eq + 1;
    else if (kind == HV_OPT_OPTIONAL)
        out->value = NULL;
    else if (p->next < p->argc)
        out->value = p->argv[p->next++];
    else
        return say(p, SAY_NO_VALUE, word, len, err, errcap);
    return HV_OPT_OPTION;
}
