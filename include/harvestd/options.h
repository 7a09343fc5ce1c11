/*
 * options.h: the command line of every harvestd command, read by one parser from one kind of
 * table (after curl's tool_getparam.c: a table of spellings, and one function that reads the
 * next argument against it). A command declares its rows and its rules (hv_opt_spec_t) and
 * calls hv_opt_next() until the end; what each option does stays with the command.
 *
 * What the parser reads, in every command:
 *   --NAME VALUE, --NAME=VALUE   an option that takes a value (the next argument is the value
 *                                whatever it looks like, "--" and "-x" included)
 *   --NAME                       a flag; --NAME=VALUE of a flag is refused, or read as an
 *                                unknown option (HV_OPT_FLAG_VALUE_UNKNOWN)
 *   -L VALUE, -L                 the row's `letter`: the whole word after the dash, so that a
 *                                row may be spelled "vv" (-vv); -LVALUE and -L=VALUE are not
 *                                read (they are unknown options)
 *   -                            alone: an argument (standard input), never an option
 *   --                           with HV_OPT_DASHDASH, the end of the options: every argument
 *                                after it is an argument; without, an unknown option
 *   WORD                         anything else that does not start with '-': an argument
 * An option may be given again: each occurrence is returned, in order, and the command decides
 * (a list, the last one, or "given twice").
 *
 * A long name that is no row (or a flag given a value, with HV_OPT_FLAG_VALUE_UNKNOWN) goes to
 * the spec's `unknown` hook when there is one, which may take it as an option of its own
 * (harvestd's directives: `--concurrency 8`, `--insecure`); without a hook, or when the hook
 * refuses it, it is an unknown option.
 *
 * Errors are one-line messages (no "harvestd: " prefix, no newline) in the spec's wording
 * (hv_opt_say_t), so that each command keeps the words it always had.
 *
 * Nothing is allocated and nothing is copied but a long name (into the hv_opt_arg_t): values
 * and words point into argv, which must outlive them.
 */
#ifndef HARVESTD_OPTIONS_H
#define HARVESTD_OPTIONS_H

#include <stddef.h>
#include <stdio.h>

/** Longest long name the parser reads, "--" excluded, plus its NUL; a longer one is unknown. */
#define HV_OPT_NAME_MAX 64

/** Whether an option takes a value. */
typedef enum {
    HV_OPT_FLAG,     /* none: --NAME, -L */
    HV_OPT_VALUE,    /* one: --NAME VALUE, --NAME=VALUE, -L VALUE */
    HV_OPT_OPTIONAL, /* one only as --NAME=VALUE; --NAME alone has none (value NULL) */
} hv_opt_kind_t;

/** One row of a command's table. Rows may be embedded at the start of a larger struct of the
 *  command's own (see hv_opt_spec_t.stride). */
typedef struct {
    const char *name;   /* --NAME; NULL: none */
    const char *alias;  /* --ALIAS: another spelling of the same option; NULL: none */
    const char *letter; /* -LETTER (the whole word after the dash); NULL: none */
    hv_opt_kind_t kind;
    int id; /* the command's own number for it */
    /* Its line in the command's --help and manual page (hv_opt_print_usage): the spelling
     * ("-o, --output FILE"), two or more spaces, then the meaning; a long spelling may stand
     * alone on the first line, the meaning on the lines after it ("\n" and spaces, which
     * align it in --help). NULL: not shown, or shown on another row's line. A row with
     * neither name nor letter is never matched: its line describes an argument. */
    const char *usage;
} hv_opt_t;

/** The command's own row (a `type` whose member `member` is the hv_opt_t) that `opt` is in. */
#define hv_opt_container(opt, type, member)                                                        \
    ((const type *)(const void *)((const char *)(opt)-offsetof(type, member)))

/** How the parser's own errors are worded (WORD: the argument as written; NAME: the option as
 *  written, without its =VALUE). */
typedef enum {
    /* "unknown option 'WORD'", "option 'NAME' needs a value", "option 'NAME' takes no value"
     * (enqueue, status) */
    HV_OPT_SAY_QUOTED,
    /* "unknown option: WORD", "NAME needs a value", "NAME takes no value" (merge, state) */
    HV_OPT_SAY_COLON,
    /* "unknown option: WORD" for --NAME, "unexpected argument: WORD" for -L, "missing value for
     * NAME", "NAME takes no value" (the daemon's and --once's command line) */
    HV_OPT_SAY_DAEMON,
} hv_opt_say_t;

/** Rules (hv_opt_spec_t.rules, or-ed). */
#define HV_OPT_DASHDASH 0x1u           /* "--" ends the options */
#define HV_OPT_FLAG_VALUE_UNKNOWN 0x2u /* --FLAG=VALUE is an unknown option, not an error */

/**
 * The hook for a long name that is no row: the kind of option `name` (its spelling without
 * "--" and =VALUE, at least one byte) is, HV_OPT_VALUE or HV_OPT_OPTIONAL, or -1: unknown.
 */
typedef int (*hv_opt_unknown_cb)(const char *name);

/** A command's command line. */
typedef struct {
    const hv_opt_t *opts; /* the first row */
    size_t nopts;
    size_t stride;  /* bytes from one row to the next; 0: sizeof(hv_opt_t) */
    unsigned rules; /* HV_OPT_DASHDASH, HV_OPT_FLAG_VALUE_UNKNOWN */
    hv_opt_say_t say;
    hv_opt_unknown_cb unknown; /* NULL: every long name that is no row is unknown */
} hv_opt_spec_t;

/** Where a parse is: argv[next] is read next. Set up by hv_opt_init(); read-only to others. */
typedef struct {
    const hv_opt_spec_t *spec;
    int argc;
    char **argv;
    int next;
    int args_only; /* "--" was read */
} hv_opt_parser_t;

/** What hv_opt_next() read. */
typedef struct {
    /* HV_OPT_OPTION: the row, or NULL for a long name the unknown hook took. */
    const hv_opt_t *opt;
    /* The argument as written: "--name=v", "-o", or the argument itself. */
    const char *word;
    /* HV_OPT_OPTION given as --NAME: NAME as written (an alias, or a name the hook took),
     * without "--" and =VALUE; "" for a letter. */
    char name[HV_OPT_NAME_MAX];
    /* HV_OPT_OPTION: the value (into argv); NULL for a flag, or an optional value not given. */
    const char *value;
    /* HV_OPT_ARGUMENT: it came after "--" (so "-" is a name, not standard input). */
    int after_dashdash;
} hv_opt_arg_t;

/** hv_opt_next()'s answers (an error is negative). */
enum {
    HV_OPT_END = 0,      /* every argument was read */
    HV_OPT_OPTION = 1,   /* an option, in *out */
    HV_OPT_ARGUMENT = 2, /* an argument that is no option, in out->word */
    HV_OPT_ERROR = -1,   /* a usage error, said in `err` */
};

/** The row at `i` (< spec->nopts) of `spec`'s table. */
const hv_opt_t *hv_opt_row(const hv_opt_spec_t *spec, size_t i);

/** Print every row's usage line of `spec`, in table order, each indented by two spaces (the
 *  options part of a command's --help). */
void hv_opt_print_usage(FILE *out, const hv_opt_spec_t *spec);

/** Start reading `argv` (argv[0], the command's name, is skipped) against `spec`; both must
 *  outlive the parser. */
void hv_opt_init(hv_opt_parser_t *p, const hv_opt_spec_t *spec, int argc, char **argv);

/**
 * Read the next option or argument (with its value, when it takes one) into *out:
 * HV_OPT_OPTION, HV_OPT_ARGUMENT, HV_OPT_END, or HV_OPT_ERROR with the message in `err` (an
 * unknown option, a missing value, a value given to a flag). After an error the parser stands
 * after the argument that failed; callers stop there.
 */
int hv_opt_next(hv_opt_parser_t *p, hv_opt_arg_t *out, char *err, size_t errcap);

#endif
