/* select.c: compiling extraction selectors and evaluating them over a gumbo tree. */
#include "harvestd/select.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "harvestd/buf.h"
#include "harvestd/common.h"
#include "harvestd/utf8.h"

/*
 * Selectors come from the operator's configuration, so these limits exist to catch mistakes
 * and to keep the work per candidate node small and predictable, not to fend off attacks.
 */
#define HV_SEL_MAX_LEN 1024     /* bytes of selector text */
#define HV_SEL_MAX_COMPOUNDS 64 /* compound selectors in a whole group */
#define HV_SEL_MAX_CHAIN 16     /* compound selectors in one member of a group */
#define HV_SEL_MAX_NTH 1000000  /* largest n in :nth-child(n) */
#define HV_SEL_POS_SLOTS 64     /* sibling-position cache entries (power of two) */
#define HV_SEL_NAME_SHOWN 32    /* bytes of a bad name quoted back in an error */

typedef enum {
    HV_SEL_CLASS,       /* .name */
    HV_SEL_ID,          /* #name */
    HV_SEL_ATTR,        /* [name] or [name op value] */
    HV_SEL_FIRST_CHILD, /* :first-child */
    HV_SEL_SCOPE,       /* :scope */
    HV_SEL_NTH_CHILD,   /* :nth-child(n) */
} hv_sel_kind_t;

typedef enum {
    HV_SEL_OP_EXISTS, /* [a] */
    HV_SEL_OP_EQUALS, /* [a=v] */
    HV_SEL_OP_WORD,   /* [a~=v]: one of the whitespace-separated words */
    HV_SEL_OP_PREFIX, /* [a^=v] */
    HV_SEL_OP_SUFFIX, /* [a$=v] */
    HV_SEL_OP_SUBSTR, /* [a*=v] */
} hv_sel_op_t;

typedef struct {
    hv_sel_kind_t kind;
    hv_sel_op_t op;
    char *name;       /* attribute name, lower-case (HV_SEL_ATTR) */
    char *value;      /* class, id or attribute value, NUL-terminated */
    size_t value_len;
    size_t nth;       /* n of :nth-child(n); 1 for :first-child */
    int nocase;       /* HV_SEL_ATTR: 1 [v i], 0 [v s], -1 as HTML says for the attribute */
} hv_sel_simple_t;

typedef enum {
    HV_SEL_COMB_NONE,       /* first compound of a chain */
    HV_SEL_COMB_DESCENDANT, /* whitespace: the previous compound matches some ancestor */
    HV_SEL_COMB_CHILD,      /* '>': the previous compound matches the parent */
} hv_sel_comb_t;

typedef struct {
    char *type;         /* lower-case type name; NULL for '*' or no type selector */
    size_t type_len;
    GumboTag tag;       /* gumbo's tag for `type`; GUMBO_TAG_UNKNOWN compares names */
    hv_sel_comb_t comb; /* how the compound on the left relates to this one */
    size_t first;       /* simple selectors: simples[first, first + count) */
    size_t count;
} hv_sel_compound_t;

typedef struct {
    size_t first; /* compounds[first, first + count), written left to right */
    size_t count;
} hv_sel_complex_t;

struct hv_selector_s {
    hv_sel_complex_t complexes[HV_SEL_MAX_COMPOUNDS];
    size_t ncomplex;
    hv_sel_compound_t compounds[HV_SEL_MAX_COMPOUNDS];
    size_t ncompound;
    hv_sel_simple_t *simples;
    size_t nsimple;
    size_t simple_cap;
    int uses_position; /* some compound has :first-child or :nth-child */
    int uses_scope;    /* some compound has :scope */
    hv_take_t take;
    char *attr; /* HV_TAKE_ATTR: lower-case attribute name */
};

/* ---------------------------------------------------------------------------------------- */
/* Compilation                                                                              */
/* ---------------------------------------------------------------------------------------- */

typedef struct {
    const char *text;
    size_t len;
    size_t pos; /* byte offset of the next unread character */
    hv_selector_t *sel;
    char *err;
    size_t errcap;
} hv_sel_parser_t;

/* Identifier characters: CSS's, without escapes. Bytes of multi-byte UTF-8 sequences count,
 * so non-ASCII class names work. Leading digits and hyphens are allowed: real pages use ids
 * such as "123", and being stricter than the page would only frustrate the operator. */
static int is_ident(unsigned char c)
{
    return hv_ascii_is_alpha(c) || hv_ascii_is_digit(c) || c == '-' || c == '_' || c >= 0x80;
}

static unsigned char peek(const hv_sel_parser_t *p, size_t ahead)
{
    return p->pos + ahead < p->len ? (unsigned char)p->text[p->pos + ahead] : '\0';
}

static int skip_ws(hv_sel_parser_t *p)
{
    size_t start = p->pos;
    while (p->pos < p->len && hv_ascii_is_space((unsigned char)p->text[p->pos]))
        p->pos++;
    return p->pos != start;
}

/* Error positions count characters, not bytes, so that they agree with what an editor shows
 * for a selector containing non-ASCII class names. */
static size_t char_position(const char *text, size_t off)
{
    size_t n = 1;
    for (size_t i = 0; i < off; i++)
        if (((unsigned char)text[i] & 0xC0) != 0x80)
            n++;
    return n;
}

__attribute__((format(printf, 3, 4))) static int fail(hv_sel_parser_t *p, size_t at,
                                                       const char *fmt, ...)
{
    if (p->err == NULL || p->errcap == 0)
        return -1;
    int n = snprintf(p->err, p->errcap, "position %zu: ", char_position(p->text, at));
    if (n < 0 || (size_t)n >= p->errcap)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err + n, p->errcap - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

/* "unexpected 'x'" for the character at `at`, without echoing control or non-ASCII bytes. */
static int fail_unexpected(hv_sel_parser_t *p, size_t at, const char *after)
{
    unsigned char c = (unsigned char)p->text[at];
    if (c > 0x20 && c < 0x7f)
        return fail(p, at, "unexpected '%c'%s", c, after);
    return fail(p, at, "unexpected character%s", after);
}

/* Reads an identifier (lower-cased if asked) into a new string; NULL if there is none. */
static char *read_ident(hv_sel_parser_t *p, int fold, size_t *len_out)
{
    size_t start = p->pos;
    while (p->pos < p->len && is_ident((unsigned char)p->text[p->pos]))
        p->pos++;
    size_t len = p->pos - start;
    if (len_out != NULL)
        *len_out = len;
    if (len == 0)
        return NULL;
    char *s = hv_xstrndup(p->text + start, len);
    if (fold)
        for (size_t i = 0; i < len; i++)
            s[i] = (char)hv_ascii_lower((unsigned char)s[i]);
    return s;
}

static int starts_compound(const hv_sel_parser_t *p)
{
    unsigned char c = peek(p, 0);
    return c == '*' || c == '.' || c == '#' || c == '[' || (c == ':' && peek(p, 1) != ':') ||
           is_ident(c);
}

static hv_sel_simple_t *add_simple(hv_sel_parser_t *p, hv_sel_kind_t kind)
{
    hv_selector_t *s = p->sel;
    if (s->nsimple == s->simple_cap) {
        s->simple_cap = s->simple_cap ? s->simple_cap * 2 : 8;
        s->simples = hv_xrealloc(s->simples, s->simple_cap * sizeof(s->simples[0]));
    }
    hv_sel_simple_t *sp = &s->simples[s->nsimple++];
    memset(sp, 0, sizeof(*sp));
    sp->kind = kind;
    s->compounds[s->ncompound - 1].count++;
    return sp;
}

/*
 * A quoted value: the quote at p->pos up to its twin. A backslash takes the next character
 * literally (\" \' \\); escapes by code point (\41) are refused rather than half-supported.
 */
static int read_quoted(hv_sel_parser_t *p, char **out, size_t *out_len)
{
    size_t open = p->pos;
    char quote = p->text[p->pos++];
    char *buf = hv_xmalloc(p->len - p->pos + 1);
    size_t n = 0;

    for (;;) {
        if (p->pos >= p->len) {
            free(buf);
            return fail(p, open, "unterminated quoted value");
        }
        char c = p->text[p->pos];
        if (c == quote) {
            p->pos++;
            break;
        }
        if (c == '\\') {
            unsigned char next = peek(p, 1);
            if (next == '\0') {
                free(buf);
                return fail(p, open, "unterminated quoted value");
            }
            if (hv_ascii_is_hex(next) || next == '\n' || next == '\r' || next == '\f') {
                free(buf);
                return fail(p, p->pos, "escapes by code point are not supported");
            }
            buf[n++] = (char)next;
            p->pos += 2;
            continue;
        }
        buf[n++] = c;
        p->pos++;
    }
    buf[n] = '\0';
    *out = buf;
    *out_len = n;
    return 0;
}

/* "[name]", "[name op value]" with optional whitespace inside the brackets. */
static int parse_attr(hv_sel_parser_t *p)
{
    p->pos++; /* '[' */
    skip_ws(p);
    size_t name_at = p->pos;
    char *name = read_ident(p, 1, NULL);
    if (name == NULL) {
        if (p->pos >= p->len)
            return fail(p, p->pos, "expected ']'");
        return fail(p, name_at, "expected an attribute name after '['");
    }
    hv_sel_simple_t *sp = add_simple(p, HV_SEL_ATTR);
    sp->name = name; /* owned by the selector from here on */
    sp->op = HV_SEL_OP_EXISTS;
    sp->nocase = -1;
    skip_ws(p);

    unsigned char c = peek(p, 0), c1 = peek(p, 1);
    if (c == ']') {
        p->pos++;
        return 0;
    }
    size_t op_at = p->pos;
    if (c == '=') {
        sp->op = HV_SEL_OP_EQUALS;
        p->pos++;
    } else if ((c == '~' || c == '^' || c == '$' || c == '*') && c1 == '=') {
        sp->op = c == '~'   ? HV_SEL_OP_WORD
                 : c == '^' ? HV_SEL_OP_PREFIX
                 : c == '$' ? HV_SEL_OP_SUFFIX
                            : HV_SEL_OP_SUBSTR;
        p->pos += 2;
    } else if ((c == '|' || c == '!') && c1 == '=') {
        return fail(p, op_at, "unsupported operator '%c='", c);
    } else if (c == '~' || c == '^' || c == '$' || c == '*' || c == '|' || c == '!') {
        return fail(p, op_at + 1, "expected '=' after '%c'", c);
    } else {
        return fail(p, op_at, "expected ']'");
    }
    size_t op_len = p->pos - op_at;

    skip_ws(p);
    c = peek(p, 0);
    if (c == '"' || c == '\'') {
        if (read_quoted(p, &sp->value, &sp->value_len) != 0)
            return -1;
    } else {
        sp->value = read_ident(p, 0, &sp->value_len);
        if (sp->value == NULL)
            return fail(p, p->pos, "expected a value after '%.*s'", (int)op_len,
                        p->text + op_at);
    }
    skip_ws(p);
    /* Selectors 4 flags: i compares the value ASCII case-insensitively, s exactly. */
    unsigned char flag = hv_ascii_lower(peek(p, 0));
    if ((flag == 'i' || flag == 's') && !is_ident(peek(p, 1))) {
        sp->nocase = flag == 'i';
        p->pos++;
        skip_ws(p);
    }
    if (peek(p, 0) != ']')
        return fail(p, p->pos, "expected ']'");
    p->pos++;
    return 0;
}

static int parse_pseudo(hv_sel_parser_t *p)
{
    size_t colon = p->pos++;
    size_t name_at = p->pos;
    while (p->pos < p->len && is_ident((unsigned char)p->text[p->pos]))
        p->pos++;
    size_t name_len = p->pos - name_at;
    const char *name = p->text + name_at;

    if (name_len == 0)
        return fail(p, name_at, "expected a pseudo-class name after ':'");
    if (hv_ascii_case_is(name, name_len, "scope")) {
        add_simple(p, HV_SEL_SCOPE);
        p->sel->uses_scope = 1;
        return 0;
    }
    if (hv_ascii_case_is(name, name_len, "first-child")) {
        hv_sel_simple_t *sp = add_simple(p, HV_SEL_FIRST_CHILD);
        sp->nth = 1;
        p->sel->uses_position = 1;
        return 0;
    }
    if (!hv_ascii_case_is(name, name_len, "nth-child"))
        return fail(p, colon, "unknown pseudo-class ':%.*s'",
                    (int)HV_MIN(name_len, (size_t)HV_SEL_NAME_SHOWN), name);

    if (peek(p, 0) != '(')
        return fail(p, p->pos, "expected '(' after ':nth-child'");
    p->pos++;
    skip_ws(p);
    size_t num_at = p->pos;
    size_t n = 0;
    while (p->pos < p->len && hv_ascii_is_digit((unsigned char)p->text[p->pos])) {
        n = n * 10 + (size_t)(p->text[p->pos] - '0');
        if (n > HV_SEL_MAX_NTH)
            return fail(p, num_at, ":nth-child index larger than %d", HV_SEL_MAX_NTH);
        p->pos++;
    }
    /* Formulas (2n+1, odd, -n+3) are outside the subset: say so at the argument itself
     * instead of complaining about a missing ')' further on. */
    unsigned char after = peek(p, 0);
    if (p->pos == num_at || n == 0 || is_ident(after) || after == '+')
        return fail(p, num_at, ":nth-child needs a positive integer");
    skip_ws(p);
    if (peek(p, 0) != ')')
        return fail(p, p->pos, "expected ')'");
    p->pos++;
    hv_sel_simple_t *sp = add_simple(p, HV_SEL_NTH_CHILD);
    sp->nth = n;
    p->sel->uses_position = 1;
    return 0;
}

static int parse_compound(hv_sel_parser_t *p, hv_sel_comb_t comb, size_t chain_first)
{
    hv_selector_t *s = p->sel;
    size_t at = p->pos;

    if (s->ncompound == HV_SEL_MAX_COMPOUNDS)
        return fail(p, at, "more than %d compound selectors", HV_SEL_MAX_COMPOUNDS);
    if (s->ncompound - chain_first == HV_SEL_MAX_CHAIN)
        return fail(p, at, "more than %d compound selectors in one chain", HV_SEL_MAX_CHAIN);
    hv_sel_compound_t *c = &s->compounds[s->ncompound++];
    memset(c, 0, sizeof(*c));
    c->comb = comb;
    c->first = s->nsimple;
    c->tag = GUMBO_TAG_UNKNOWN;

    if (peek(p, 0) == '*') {
        p->pos++;
    } else if (is_ident(peek(p, 0))) {
        c->type = read_ident(p, 1, &c->type_len);
        c->tag = gumbo_tag_enum(c->type);
    }

    for (;;) {
        unsigned char ch = peek(p, 0);
        int rc = 0;
        if (ch == '.' || ch == '#') {
            p->pos++;
            char *v;
            size_t vlen;
            if ((v = read_ident(p, 0, &vlen)) == NULL)
                return fail(p, p->pos, ch == '.' ? "expected a class name after '.'"
                                                 : "expected an id after '#'");
            hv_sel_simple_t *sp = add_simple(p, ch == '.' ? HV_SEL_CLASS : HV_SEL_ID);
            sp->value = v;
            sp->value_len = vlen;
        } else if (ch == '[') {
            rc = parse_attr(p);
        } else if (ch == ':' && peek(p, 1) != ':') {
            rc = parse_pseudo(p);
        } else {
            break;
        }
        if (rc != 0)
            return rc;
    }
    /* Callers only come here when starts_compound() said yes, so something was read. */
    return 0;
}

static int parse_complex(hv_sel_parser_t *p)
{
    hv_selector_t *s = p->sel;
    size_t first = s->ncompound;

    if (parse_compound(p, HV_SEL_COMB_NONE, first) != 0)
        return -1;
    for (;;) {
        int had_ws = skip_ws(p);
        if (peek(p, 0) == '>') {
            p->pos++;
            skip_ws(p);
            if (!starts_compound(p))
                return fail(p, p->pos, "expected a selector after '>'");
            if (parse_compound(p, HV_SEL_COMB_CHILD, first) != 0)
                return -1;
        } else if (had_ws && starts_compound(p)) {
            if (parse_compound(p, HV_SEL_COMB_DESCENDANT, first) != 0)
                return -1;
        } else {
            break;
        }
    }
    hv_sel_complex_t *cx = &s->complexes[s->ncomplex++];
    cx->first = first;
    cx->count = s->ncompound - first;
    return 0;
}

/* Why no selector starts at p->pos, as the message for the group member that is missing. */
static int fail_missing(hv_sel_parser_t *p, int after_comma)
{
    size_t at = p->pos;
    unsigned char c = peek(p, 0);

    if (c == ',')
        return fail(p, at, "empty selector in group");
    if (after_comma)
        return fail(p, at, "expected a selector after ','");
    if (c == '\0')
        return fail(p, 0, "empty selector");
    if (c == '>')
        return fail(p, at, "expected a selector before '>'");
    if (c == '@')
        return fail(p, at, "expected a selector before '@'");
    if (c == ':')
        return fail(p, at, "expected a selector before '::'");
    return fail_unexpected(p, at, "");
}

static int parse_take(hv_sel_parser_t *p)
{
    hv_selector_t *s = p->sel;
    size_t at = p->pos;

    if (peek(p, 0) == '@') {
        p->pos++;
        s->attr = read_ident(p, 1, NULL);
        if (s->attr == NULL)
            return fail(p, p->pos, "expected an attribute name after '@'");
        s->take = HV_TAKE_ATTR;
    } else if (peek(p, 0) == ':' && peek(p, 1) == ':') {
        p->pos += 2;
        size_t name_at = p->pos;
        while (p->pos < p->len && is_ident((unsigned char)p->text[p->pos]))
            p->pos++;
        size_t name_len = p->pos - name_at;
        if (!hv_ascii_case_is(p->text + name_at, name_len, "html"))
            return fail(p, at, "unsupported '::%.*s' (only '::html' is allowed)",
                        (int)HV_MIN(name_len, (size_t)HV_SEL_NAME_SHOWN), p->text + name_at);
        s->take = HV_TAKE_HTML;
    } else {
        s->take = HV_TAKE_TEXT;
        return 0;
    }
    size_t take_end = p->pos;
    skip_ws(p);
    if (p->pos < p->len) {
        char after[HV_SEL_NAME_SHOWN + 16];
        snprintf(after, sizeof(after), " after '%.*s'",
                 (int)HV_MIN(take_end - at, (size_t)HV_SEL_NAME_SHOWN), p->text + at);
        return fail_unexpected(p, p->pos, after);
    }
    return 0;
}

static int parse_selector(hv_sel_parser_t *p)
{
    for (int after_comma = 0;; after_comma = 1) {
        skip_ws(p);
        if (!starts_compound(p))
            return fail_missing(p, after_comma);
        if (parse_complex(p) != 0)
            return -1;
        skip_ws(p);
        if (peek(p, 0) != ',')
            break;
        p->pos++;
    }
    if (parse_take(p) != 0)
        return -1;
    if (p->pos < p->len)
        return fail_unexpected(p, p->pos, "");
    return 0;
}

hv_selector_t *hv_selector_compile(const char *text, char *err, size_t errcap)
{
    hv_sel_parser_t p = {0};
    hv_selector_t *sel = NULL;
    int rc = -1;

    if (err != NULL && errcap > 0)
        err[0] = '\0';
    p.text = text != NULL ? text : "";
    p.len = strnlen(p.text, HV_SEL_MAX_LEN + 1);
    p.err = err;
    p.errcap = errcap;
    if (p.len > HV_SEL_MAX_LEN) {
        fail(&p, 0, "selector longer than %d bytes", HV_SEL_MAX_LEN);
        goto out;
    }
    sel = hv_xcalloc(1, sizeof(*sel));
    p.sel = sel;
    if (parse_selector(&p) != 0)
        goto out;
    rc = 0;

out:
    if (rc != 0) {
        hv_selector_free(sel);
        sel = NULL;
    }
    return sel;
}

void hv_selector_free(hv_selector_t *s)
{
    if (s == NULL)
        return;
    for (size_t i = 0; i < s->ncompound; i++)
        free(s->compounds[i].type);
    for (size_t i = 0; i < s->nsimple; i++) {
        free(s->simples[i].name);
        free(s->simples[i].value);
    }
    free(s->simples);
    free(s->attr);
    free(s);
}

hv_take_t hv_selector_take(const hv_selector_t *s)
{
    return s->take;
}

const char *hv_selector_attr(const hv_selector_t *s)
{
    return s->take == HV_TAKE_ATTR ? s->attr : NULL;
}

/* ---------------------------------------------------------------------------------------- */
/* Tree helpers                                                                             */
/* ---------------------------------------------------------------------------------------- */

static int is_element(const GumboNode *n)
{
    return n->type == GUMBO_NODE_ELEMENT || n->type == GUMBO_NODE_TEMPLATE;
}

static int is_text(const GumboNode *n)
{
    return n->type == GUMBO_NODE_TEXT || n->type == GUMBO_NODE_WHITESPACE ||
           n->type == GUMBO_NODE_CDATA;
}

static const GumboVector *children_of(const GumboNode *n)
{
    if (n->type == GUMBO_NODE_DOCUMENT)
        return &n->v.document.children;
    if (is_element(n))
        return &n->v.element.children;
    return NULL;
}

/*
 * The node after `n` in document order within the subtree of `root` (entering n's children
 * first when `descend`), or NULL at the end. Parent pointers and child indexes replace the
 * call stack, so the depth of the page does not matter.
 */
static const GumboNode *next_node(const GumboNode *n, const GumboNode *root, int descend)
{
    const GumboVector *kids = descend ? children_of(n) : NULL;
    if (kids != NULL && kids->length > 0)
        return kids->data[0];
    while (n != root) {
        const GumboNode *parent = n->parent;
        if (parent == NULL)
            return NULL;
        kids = children_of(parent);
        size_t next = n->index_within_parent + 1;
        if (kids != NULL && next < kids->length)
            return kids->data[next];
        n = parent;
    }
    return NULL;
}

/* The name in a tag's source text ("<Foo a=1>", "</foo >"): after '<' or '</', up to
 * whitespace, '/' or '>'. Empty when the text is not a tag (parser-inserted elements). */
static hv_slice_t tag_name(const char *s, size_t len)
{
    hv_slice_t name = {NULL, 0};
    size_t i = 0;
    if (s == NULL || len == 0 || s[0] != '<')
        return name;
    i = (len > 1 && s[1] == '/') ? 2 : 1;
    size_t start = i;
    while (i < len && !hv_ascii_is_space((unsigned char)s[i]) && s[i] != '/' && s[i] != '>')
        i++;
    name.ptr = s + start;
    name.len = i - start;
    return name;
}

/* The element's tag name: gumbo's for tags it knows, the source text's for the others. */
static hv_slice_t element_name(const GumboElement *el)
{
    if (el->tag != GUMBO_TAG_UNKNOWN) {
        const char *name = gumbo_normalized_tagname(el->tag);
        hv_slice_t s = {name, strlen(name)};
        return s;
    }
    return tag_name(el->original_tag.data, el->original_tag.length);
}

/* ---------------------------------------------------------------------------------------- */
/* Control characters through gumbo                                                         */
/* ---------------------------------------------------------------------------------------- */

/*
 * The placeholders are U+10FF00..U+10FF1F, private-use characters at the very end of Unicode
 * that gumbo keeps as they are: U+10FF00 + c stands for the control character c, and
 * U+10FF00 itself is the escape that says "the next character is the page's own". In UTF-8
 * they are F4 8F BC 80..9F, so text without the byte F4 has none.
 */
#define HV_SEL_ESCAPE_CP 0x10FF00u
#define HV_SEL_ESCAPE "\xF4\x8F\xBC\x80"

/* The control characters gumbo 0.10 replaces and the HTML Standard keeps: C0 but NUL (which
 * the standard replaces or drops itself) and TAB, LF, FF, CR (whitespace, which gumbo keeps). */
static int is_spoilt_control(unsigned char c)
{
    return c > 0 && c < 0x20 && c != '\t' && c != '\n' && c != '\f' && c != '\r';
}

/* Which placeholder [p, p+n) starts with (0 is the escape), or -1 for none. */
static int placeholder_at(const char *p, size_t n)
{
    if (n < 4 || p[0] != '\xF4' || p[1] != '\x8F' || p[2] != '\xBC')
        return -1;
    unsigned char last = (unsigned char)p[3];
    return last >= 0x80 && last <= 0x9F ? last - 0x80 : -1;
}

/*
 * Whether the numeric character reference whose digits start at p ("x1B;..." after "&#")
 * could decode to a placeholder: its value is at least the escape's, or larger than any code
 * point (gumbo 0.10 lets such a number wrap around, so it could land anywhere).
 */
static int ref_may_be_placeholder(const char *p, size_t n)
{
    int hex = n > 0 && (p[0] == 'x' || p[0] == 'X');
    size_t i = (size_t)hex, start = i;
    uint32_t v = 0;

    for (; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        unsigned d;
        if (hv_ascii_is_digit(c))
            d = c - '0';
        else if (hex && hv_ascii_is_alpha(c) && (c | 0x20) <= 'f')
            d = (c | 0x20) - 'a' + 10;
        else
            break;
        if (v < 0x110000) /* past that it only grows: stop before it overflows */
            v = v * (hex ? 16 : 10) + d;
    }
    return i > start && v >= HV_SEL_ESCAPE_CP;
}

/* One pass of hv_selector_protect_controls(): writes to `out` unless it is NULL, returns the
 * length. Every change makes the text longer, so the same length means no change. Runs of
 * bytes that cannot start a change are skipped (or copied) whole: this pass sees every page. */
static size_t protect(const char *s, size_t len, char *out)
{
    size_t o = 0;

    for (size_t i = 0; i < len; i++) {
        size_t run = i;
        while (run < len && (unsigned char)s[run] >= 0x20 && s[run] != '&' &&
               (unsigned char)s[run] != 0xF4)
            run++;
        if (out != NULL)
            memcpy(out + o, s + i, run - i);
        o += run - i;
        if ((i = run) == len)
            break;
        unsigned char c = (unsigned char)s[i];
        int escape = 0;
        if (is_spoilt_control(c)) {
            if (out != NULL) {
                memcpy(out + o, HV_SEL_ESCAPE, 3);
                out[o + 3] = (char)(0x80 + c);
            }
            o += 4;
            continue;
        }
        if (c == 0xF4)
            escape = placeholder_at(s + i, len - i) >= 0;
        else if (c == '&' && i + 1 < len && s[i + 1] == '#')
            escape = ref_may_be_placeholder(s + i + 2, len - i - 2);
        if (escape) {
            if (out != NULL)
                memcpy(out + o, HV_SEL_ESCAPE, 4);
            o += 4;
        }
        if (out != NULL)
            out[o] = (char)c;
        o++;
    }
    return o;
}

char *hv_selector_protect_controls(const char *s, size_t len, size_t *out_len)
{
    size_t n = protect(s, len, NULL);
    if (n == len)
        return NULL;
    char *out = hv_xmalloc(n + 1);
    protect(s, len, out);
    out[n] = '\0';
    *out_len = n;
    return out;
}

/*
 * One step of restoring [p, p+n): consumes the bytes it returns the count of and sets `emit`
 * to what they stand for. A run without placeholders stands for itself; the escape stands
 * for nothing and makes the next character stand for itself, even a placeholder; any other
 * placeholder stands for its control character.
 */
static size_t restore_step(const char *p, size_t n, int *escaped, hv_slice_t *emit)
{
    static const char controls[32] = {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10,
                                      11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
                                      22, 23, 24, 25, 26, 27, 28, 29, 30, 31};
    const char *f = memchr(p, '\xF4', n);
    if (f != p) {
        emit->ptr = p;
        emit->len = f != NULL ? (size_t)(f - p) : n;
        *escaped = 0;
        return emit->len;
    }
    int k = placeholder_at(p, n);
    size_t used = k < 0 ? 1 : 4;
    emit->ptr = p;
    emit->len = used;
    if (k >= 0 && !*escaped) {
        emit->ptr = &controls[k];
        emit->len = k > 0;
    }
    *escaped = k == 0 && !*escaped;
    return used;
}

size_t hv_selector_restore_controls(char *s, size_t len)
{
    size_t o = 0;
    int escaped = 0;

    for (size_t i = 0; i < len;) {
        hv_slice_t emit;
        i += restore_step(s + i, len - i, &escaped, &emit);
        memmove(s + o, emit.ptr, emit.len);
        o += emit.len;
    }
    if (o < len)
        s[o] = '\0';
    return o;
}

/* The *len bytes at `v` with their placeholders restored: in *copy (malloc'd, for the caller
 * to free) when they have any, else `v` itself with *copy NULL. *len becomes the new length. */
static const char *restored(const char *v, size_t *len, char **copy)
{
    *copy = NULL;
    if (*len == 0 || memchr(v, '\xF4', *len) == NULL)
        return v;
    *copy = hv_xmalloc(*len + 1); /* not strndup: a name from the source may hold a NUL */
    memcpy(*copy, v, *len);
    (*copy)[*len] = '\0';
    *len = hv_selector_restore_controls(*copy, *len);
    return *copy;
}

/* ---------------------------------------------------------------------------------------- */
/* Matching                                                                                 */
/* ---------------------------------------------------------------------------------------- */

typedef struct {
    const GumboNode *parent;
    size_t index;  /* a child index in parent */
    size_t before; /* element children of parent before that index */
} hv_sel_pos_t;

typedef struct {
    const GumboNode *scope;
    const GumboNode *scope_element; /* what :scope matches */
    hv_sel_pos_t pos[HV_SEL_POS_SLOTS];
} hv_sel_match_t;

/*
 * Whether `node` is the n-th element child of its parent. Counting siblings on every test
 * would be quadratic on a list of 50,000 items, so each evaluation keeps, per parent (hashed
 * into a few slots), the count at the last index it computed. Document order visits siblings
 * left to right, so later siblings continue from there. Without a usable slot, counting
 * backwards stops as soon as n elements are seen, which keeps small n cheap anyway.
 */
static int is_nth_element(hv_sel_match_t *m, const GumboNode *node, size_t n)
{
    const GumboNode *parent = node->parent;
    const GumboVector *kids = parent != NULL ? children_of(parent) : NULL;
    size_t idx = node->index_within_parent;

    if (kids == NULL || idx >= kids->length || kids->data[idx] != node)
        return n == 1;
    if (idx < n - 1)
        return 0;

    uintptr_t h = (uintptr_t)parent >> 4;
    h ^= h >> 7;
    h ^= h >> 17;
    hv_sel_pos_t *slot = &m->pos[h & (HV_SEL_POS_SLOTS - 1)];
    size_t before = 0;

    if (slot->parent == parent && slot->index <= idx) {
        before = slot->before;
        for (size_t i = slot->index; i < idx; i++)
            before += is_element(kids->data[i]);
    } else {
        for (size_t i = idx; i-- > 0;) {
            if (is_element(kids->data[i]) && ++before >= n)
                return 0;
        }
    }
    slot->parent = parent;
    slot->index = idx;
    slot->before = before;
    return before == n - 1;
}

/* Whether ASCII-whitespace-separated `list` contains `word` (never for an empty word). */
static int same(const char *a, const char *b, size_t n, int nocase);

static int has_word(const char *list, const char *word, size_t wlen, int nocase)
{
    const char *p = list;
    while (*p != '\0') {
        while (hv_ascii_is_space((unsigned char)*p))
            p++;
        const char *start = p;
        while (*p != '\0' && !hv_ascii_is_space((unsigned char)*p))
            p++;
        if ((size_t)(p - start) == wlen && wlen > 0 && same(start, word, wlen, nocase))
            return 1;
    }
    return 0;
}

static const char *attr_value(const GumboNode *node, const char *name)
{
    /* gumbo compares names ASCII case-insensitively, which also covers the camel-case names
     * it gives SVG attributes (viewBox). */
    const GumboAttribute *a = gumbo_get_attribute(&node->v.element.attributes, name);
    return a != NULL ? a->value : NULL;
}

/* The attributes whose values selectors compare ASCII case-insensitively on HTML elements
 * (HTML Standard, "Case-sensitivity of selectors"), sorted for bsearch. */
static const char *const nocase_attrs[] = {
    "accept",   "accept-charset", "align",   "alink",    "axis",      "bgcolor",  "charset",
    "checked",  "clear",          "codetype", "color",   "compact",   "declare",  "defer",
    "dir",      "direction",      "disabled", "enctype", "face",      "frame",    "hreflang",
    "http-equiv", "lang",         "language", "link",    "media",     "method",   "multiple",
    "nohref",   "noresize",       "noshade", "nowrap",   "readonly",  "rel",      "rev",
    "rules",    "scope",          "scrolling", "selected", "shape",   "target",   "text",
    "type",     "valign",         "valuetype", "vlink",
};

static int cmp_name(const void *key, const void *elem)
{
    return strcmp(key, *(const char *const *)elem);
}

static int html_nocase_attr(const char *name)
{
    return bsearch(name, nocase_attrs, HV_ARRAY_SIZE(nocase_attrs), sizeof(nocase_attrs[0]),
                   cmp_name) != NULL;
}

/* [a, a+n) equals [b, b+n), ASCII case-insensitively when `nocase`. */
static int same(const char *a, const char *b, size_t n, int nocase)
{
    return nocase ? hv_ascii_case_eq(a, n, b, n) : memcmp(a, b, n) == 0;
}

static int match_attr(const hv_sel_simple_t *sp, const char *v, int nocase)
{
    size_t vlen = strlen(v), n = sp->value_len;

    switch (sp->op) {
    case HV_SEL_OP_EXISTS:
        return 1;
    case HV_SEL_OP_EQUALS:
        return vlen == n && same(v, sp->value, n, nocase);
    case HV_SEL_OP_WORD:
        return has_word(v, sp->value, n, nocase);
    case HV_SEL_OP_PREFIX:
        return n > 0 && vlen >= n && same(v, sp->value, n, nocase);
    case HV_SEL_OP_SUFFIX:
        return n > 0 && vlen >= n && same(v + vlen - n, sp->value, n, nocase);
    case HV_SEL_OP_SUBSTR:
        if (!nocase)
            return n > 0 && strstr(v, sp->value) != NULL;
        for (size_t i = 0; n > 0 && i + n <= vlen; i++)
            if (same(v + i, sp->value, n, 1))
                return 1;
        return 0;
    }
    return 0;
}

static int match_compound(hv_sel_match_t *m, const hv_selector_t *s, const hv_sel_compound_t *c,
                          const GumboNode *node)
{
    const GumboElement *el = &node->v.element;

    if (c->type != NULL) {
        if (c->tag != GUMBO_TAG_UNKNOWN) {
            if (el->tag != c->tag)
                return 0;
        } else {
            if (el->tag != GUMBO_TAG_UNKNOWN)
                return 0;
            hv_slice_t name = element_name(el);
            char *copy;
            const char *n = restored(name.ptr, &name.len, &copy);
            int same_name = hv_ascii_case_eq(n, name.len, c->type, c->type_len);
            free(copy);
            if (!same_name)
                return 0;
        }
    }
    for (size_t i = 0; i < c->count; i++) {
        const hv_sel_simple_t *sp = &s->simples[c->first + i];
        const char *v = NULL;
        char *copy = NULL;
        int ok = 1;
        switch (sp->kind) {
        case HV_SEL_CLASS:
        case HV_SEL_ID:
        case HV_SEL_ATTR:
            v = attr_value(node, sp->kind == HV_SEL_CLASS ? "class"
                                 : sp->kind == HV_SEL_ID  ? "id"
                                                          : sp->name);
            if (v == NULL)
                return 0;
            /* Compared as the page wrote it: control characters restored (see select.h). */
            size_t vlen = strlen(v);
            v = restored(v, &vlen, &copy);
            if (sp->kind == HV_SEL_CLASS)
                ok = has_word(v, sp->value, sp->value_len, 0);
            else if (sp->kind == HV_SEL_ID)
                ok = strcmp(v, sp->value) == 0;
            else
                ok = match_attr(sp, v,
                                sp->nocase >= 0 ? sp->nocase
                                                : el->tag_namespace == GUMBO_NAMESPACE_HTML &&
                                                      html_nocase_attr(sp->name));
            free(copy);
            if (!ok)
                return 0;
            break;
        case HV_SEL_FIRST_CHILD:
        case HV_SEL_NTH_CHILD:
            if (!is_nth_element(m, node, sp->nth))
                return 0;
            break;
        case HV_SEL_SCOPE:
            if (node != m->scope_element)
                return 0;
            break;
        }
    }
    return 1;
}

static int compound_has_scope(const hv_selector_t *s, const hv_sel_compound_t *c)
{
    for (size_t i = 0; i < c->count; i++)
        if (s->simples[c->first + i].kind == HV_SEL_SCOPE)
            return 1;
    return 0;
}

/* The element parent of `n` inside the scope: combinators never look at the scope itself or
 * above it, which makes field selectors relative to their item; only a compound with :scope
 * (`to_scope`) may be the scope element itself. */
static const GumboNode *parent_in_scope(const hv_sel_match_t *m, const GumboNode *n,
                                        int to_scope)
{
    if (to_scope && n->parent == m->scope_element && m->scope_element != NULL)
        return m->scope_element;
    const GumboNode *p = n->parent;
    if (p == NULL || p == m->scope || !is_element(p))
        return NULL;
    return p;
}

/*
 * Right-to-left: the last compound must match `node`, then each compound to the left must
 * match its parent ('>') or some ancestor (' '). Only the most recent descendant step ever
 * needs retrying: when a child step fails, the compound found by that descendant step is
 * looked for further up. When a descendant search runs out of ancestors, no other choice
 * could help, since retrying an earlier (lower) descendant step only moves everything higher,
 * so the node does not match. One saved position replaces the recursion of a naive matcher.
 */
static int match_complex(hv_sel_match_t *m, const hv_selector_t *s, const hv_sel_complex_t *cx,
                         const GumboNode *node)
{
    const hv_sel_compound_t *c = &s->compounds[cx->first];
    size_t i = cx->count - 1; /* the compound that `cur` matched */
    const GumboNode *cur = node;
    size_t retry_level = 0; /* 0: no descendant step to retry */
    const GumboNode *retry_node = NULL;

    if (!match_compound(m, s, &c[i], node))
        return 0;
    while (i > 0) {
        const GumboNode *from = cur;
        int to_scope = s->uses_scope && compound_has_scope(s, &c[i - 1]);
        if (c[i].comb == HV_SEL_COMB_CHILD) {
            const GumboNode *parent = parent_in_scope(m, cur, to_scope);
            if (parent != NULL && match_compound(m, s, &c[i - 1], parent)) {
                cur = parent;
                i--;
                continue;
            }
            if (retry_level == 0)
                return 0;
            i = retry_level;
            from = retry_node;
        }
        const GumboNode *a = parent_in_scope(m, from, to_scope);
        while (a != NULL && a != m->scope_element && !match_compound(m, s, &c[i - 1], a))
            a = parent_in_scope(m, a, to_scope);
        if (a != NULL && a == m->scope_element && !match_compound(m, s, &c[i - 1], a))
            a = NULL;
        if (a == NULL)
            return 0;
        retry_level = i;
        retry_node = a;
        cur = a;
        i--;
    }
    return 1;
}

/* What :scope matches under `scope`: the scope itself, or under a document its root element. */
static const GumboNode *scope_element(const GumboNode *scope)
{
    if (is_element(scope))
        return scope;
    const GumboVector *kids = children_of(scope);
    for (size_t i = 0; kids != NULL && i < kids->length; i++)
        if (is_element(kids->data[i]))
            return kids->data[i];
    return NULL;
}

size_t hv_selector_match(const hv_selector_t *s, const GumboNode *scope, const GumboNode **out,
                         size_t cap, size_t max)
{
    hv_sel_match_t m;
    size_t found = 0;

    if (s == NULL || scope == NULL)
        return 0;
    m.scope = scope;
    m.scope_element = scope_element(scope);
    if (s->uses_position)
        memset(m.pos, 0, sizeof(m.pos));

    /* With :scope, the scope element itself may match ("" under a page: the html element,
     * which the walk below reaches anyway). */
    const GumboNode *first = next_node(scope, scope, 1);
    if (s->uses_scope && is_element(scope))
        first = scope;
    for (const GumboNode *n = first; n != NULL; n = next_node(n, scope, 1)) {
        if (!is_element(n))
            continue;
        size_t k;
        for (k = 0; k < s->ncomplex; k++)
            if (match_complex(&m, s, &s->complexes[k], n))
                break;
        if (k == s->ncomplex)
            continue;
        if (out != NULL && found < cap)
            out[found] = n;
        found++;
        if (max != 0 && found == max)
            break;
    }
    return found;
}

/* ---------------------------------------------------------------------------------------- */
/* Values                                                                                   */
/* ---------------------------------------------------------------------------------------- */


/*
 * Every value is written into one of these: a buffer that keeps at most `limit` bytes, one
 * past the most the value may have, which tells whether it went on and where a cut falls.
 * Writers check `full` and stop, so the work stays bounded by the limit too.
 */
typedef struct {
    hv_buf_t buf;
    size_t limit;
    int full;
    int escaped; /* the last character read was the escape placeholder */
} hv_sel_out_t;

static void out_init(hv_sel_out_t *o, size_t max)
{
    o->limit = max == SIZE_MAX ? max : max + 1;
    hv_buf_init(&o->buf, o->limit == SIZE_MAX ? SIZE_MAX : o->limit + 1); /* and the NUL */
    o->full = 0;
    o->escaped = 0;
}

static void out_raw(hv_sel_out_t *o, const char *p, size_t n)
{
    if (o->full || n == 0)
        return;
    if (n >= o->limit - o->buf.len) {
        n = o->limit - o->buf.len;
        o->full = 1;
    }
    hv_buf_append(&o->buf, p, n); /* within the buffer's maximum: cannot fail */
}

/* Text from the tree, its placeholders turned back into what they stand for. */
static void out_put(hv_sel_out_t *o, const char *p, size_t n)
{
    while (n > 0 && !o->full) {
        hv_slice_t emit;
        size_t used = restore_step(p, n, &o->escaped, &emit);
        out_raw(o, emit.ptr, emit.len);
        p += used;
        n -= used;
    }
}

static void out_puts(hv_sel_out_t *o, const char *s)
{
    out_put(o, s, strlen(s));
}

/* How many of the `len` bytes of UTF-8 at `s` to keep so that at most `max` remain and no
 * character is split: `s[max]`, when it continues a character, takes that character out. */
static size_t utf8_fit(const char *s, size_t len, size_t max)
{
    if (len <= max)
        return len;
    size_t n = max;
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
        n--;
    return n;
}

/* The value written to `o`, cut to `max` bytes at a character boundary, NUL-terminated and
 * guaranteed UTF-8. gumbo already hands out valid UTF-8, so the repair path only runs if
 * that assumption ever breaks. */
static char *out_finish(hv_sel_out_t *o, size_t max, int *cut)
{
    size_t keep = utf8_fit(o->buf.data, o->buf.len, max);
    *cut = keep < o->buf.len;
    o->buf.len = keep;
    hv_buf_append(&o->buf, "", 1);
    size_t n;
    char *s = hv_buf_steal(&o->buf, &n);
    if (hv_utf8_valid(s, keep))
        return s;
    char *fixed = hv_utf8_sanitize(s, keep, &n);
    free(s);
    return fixed;
}

/* [p, p+n) with runs of ASCII whitespace collapsed to one space, none at the start; *space
 * says whether whitespace is pending (it is written only if something follows). */
static void put_collapsed(hv_sel_out_t *o, const char *p, size_t n, int *space)
{
    size_t i = 0;

    while (i < n && !o->full) {
        if (hv_ascii_is_space((unsigned char)p[i])) {
            *space = o->buf.len > 0;
            i++;
            continue;
        }
        size_t run = i;
        while (run < n && !hv_ascii_is_space((unsigned char)p[run]))
            run++;
        if (*space)
            out_raw(o, " ", 1);
        *space = 0;
        out_raw(o, p + i, run - i);
        i = run;
    }
}

/* The text under `root`, runs of ASCII whitespace collapsed to one space, both ends trimmed.
 * Placeholders are restored first, so that whitespace the page escaped collapses too. */
static void put_text(hv_sel_out_t *o, const GumboNode *root)
{
    int space = 0;

    for (const GumboNode *n = root; n != NULL && !o->full; n = next_node(n, root, 1)) {
        if (!is_text(n))
            continue;
        const char *t = n->v.text.text;
        size_t left = strlen(t);
        while (left > 0 && !o->full) {
            hv_slice_t emit;
            size_t used = restore_step(t, left, &o->escaped, &emit);
            put_collapsed(o, emit.ptr, emit.len, &space);
            t += used;
            left -= used;
        }
    }
}

char *hv_selector_text(const GumboNode *node)
{
    hv_sel_out_t o;
    int cut;

    out_init(&o, SIZE_MAX);
    put_text(&o, node);
    if (o.buf.len == 0) {
        hv_buf_free(&o.buf);
        return NULL;
    }
    return out_finish(&o, SIZE_MAX, &cut);
}

/* ---------------------------------------------------------------------------------------- */
/* Outer HTML                                                                               */
/* ---------------------------------------------------------------------------------------- */

/*
 * The outer HTML is written from the tree as the HTML Standard's fragment serialisation
 * algorithm does it (what browsers' outerHTML gives), not copied from the source: elements
 * the tree builder closed, re-created (misnested formatting elements) or inserted (tbody, an
 * empty p for a stray </p>) come out as the tree has them.
 */

/* Text (`attr` 0) or an attribute value (`attr` 1) with the characters that would end it
 * escaped: & and U+00A0 in both, < and > in text, " in attribute values. */
static void put_escaped(hv_sel_out_t *o, const char *t, int attr)
{
    const char *run = t;

    for (; *t != '\0' && !o->full; t++) {
        const char *rep;
        size_t skip = 1;
        switch (*t) {
        case '&':
            rep = "&amp;";
            break;
        case '"':
            if (!attr)
                continue;
            rep = "&quot;";
            break;
        case '<':
            if (attr)
                continue;
            rep = "&lt;";
            break;
        case '>':
            if (attr)
                continue;
            rep = "&gt;";
            break;
        case '\xC2':
            if (t[1] != '\xA0')
                continue;
            rep = "&nbsp;";
            skip = 2;
            break;
        default:
            continue;
        }
        out_put(o, run, (size_t)(t - run));
        out_puts(o, rep);
        t += skip - 1;
        run = t + 1;
    }
    out_put(o, run, (size_t)(t - run));
}

/* A name from the source, ASCII lower-cased (as the tokenizer does), NUL as U+FFFD. */
static void put_lower(hv_sel_out_t *o, const char *p, size_t n)
{
    char chunk[128];
    size_t k = 0;

    for (size_t i = 0; i < n && !o->full; i++) {
        if (k + 3 > sizeof(chunk)) {
            out_put(o, chunk, k);
            k = 0;
        }
        unsigned char c = (unsigned char)p[i];
        if (c == '\0') {
            memcpy(chunk + k, "\xEF\xBF\xBD", 3);
            k += 3;
        } else {
            chunk[k++] = (char)(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c);
        }
    }
    out_put(o, chunk, k);
}

/* The element's name: gumbo's for tags it knows, else the source spelling lower-cased; in
 * SVG, the camel case the tree builder gives (clipPath, foreignObject). */
static void put_element_name(hv_sel_out_t *o, const GumboElement *el)
{
    hv_slice_t name = element_name(el);
    if (el->tag_namespace == GUMBO_NAMESPACE_SVG && name.len > 0) {
        GumboStringPiece piece = {name.ptr, name.len};
        const char *svg = gumbo_normalize_svg_tagname(&piece);
        if (svg != NULL) {
            out_puts(o, svg);
            return;
        }
    }
    if (el->tag != GUMBO_TAG_UNKNOWN)
        out_put(o, name.ptr, name.len);
    else
        put_lower(o, name.ptr, name.len);
}

/* Elements that have no end tag: the HTML Standard's void elements and the legacy ones it
 * serialises the same way. */
static int is_void(const GumboElement *el)
{
    if (el->tag_namespace != GUMBO_NAMESPACE_HTML)
        return 0;
    switch (el->tag) {
    case GUMBO_TAG_AREA:
    case GUMBO_TAG_BASE:
    case GUMBO_TAG_BASEFONT:
    case GUMBO_TAG_BGSOUND:
    case GUMBO_TAG_BR:
    case GUMBO_TAG_COL:
    case GUMBO_TAG_EMBED:
    case GUMBO_TAG_FRAME:
    case GUMBO_TAG_HR:
    case GUMBO_TAG_IMG:
    case GUMBO_TAG_INPUT:
    case GUMBO_TAG_KEYGEN:
    case GUMBO_TAG_LINK:
    case GUMBO_TAG_META:
    case GUMBO_TAG_PARAM:
    case GUMBO_TAG_SOURCE:
    case GUMBO_TAG_TRACK:
    case GUMBO_TAG_WBR:
        return 1;
    default:
        return 0;
    }
}

/*
 * Whether the text of `n` is written as it is: the content of the HTML elements whose text
 * the tokenizer does not decode. noscript is not among them: gumbo parses with scripting
 * off, so what a noscript holds is elements and text like anywhere else, and escaping its
 * text keeps the output a faithful picture of that tree.
 */
static int in_raw_text(const GumboNode *n)
{
    const GumboNode *p = n->parent;
    if (p == NULL || !is_element(p) || p->v.element.tag_namespace != GUMBO_NAMESPACE_HTML)
        return 0;
    switch (p->v.element.tag) {
    case GUMBO_TAG_IFRAME:
    case GUMBO_TAG_NOEMBED:
    case GUMBO_TAG_NOFRAMES:
    case GUMBO_TAG_PLAINTEXT:
    case GUMBO_TAG_SCRIPT:
    case GUMBO_TAG_STYLE:
    case GUMBO_TAG_XMP:
        return 1;
    default:
        return 0;
    }
}

static void put_start_tag(hv_sel_out_t *o, const GumboElement *el)
{
    out_put(o, "<", 1);
    put_element_name(o, el);
    for (size_t i = 0; i < el->attributes.length && !o->full; i++) {
        const GumboAttribute *a = el->attributes.data[i];
        out_put(o, " ", 1);
        /* gumbo keeps the local name of the attributes it put in a namespace. */
        switch (a->attr_namespace) {
        case GUMBO_ATTR_NAMESPACE_XLINK:
            out_puts(o, "xlink:");
            break;
        case GUMBO_ATTR_NAMESPACE_XML:
            out_puts(o, "xml:");
            break;
        case GUMBO_ATTR_NAMESPACE_XMLNS:
            if (strcmp(a->name, "xmlns") != 0)
                out_puts(o, "xmlns:");
            break;
        case GUMBO_ATTR_NAMESPACE_NONE:
            break;
        }
        out_puts(o, a->name);
        out_put(o, "=\"", 2);
        put_escaped(o, a->value, 1);
        out_put(o, "\"", 1);
    }
    out_put(o, ">", 1);
}

/* Writes what comes before the children of `n`; returns the children to write next (NULL
 * when there are none to enter). */
static const GumboVector *put_open(hv_sel_out_t *o, const GumboNode *n)
{
    switch (n->type) {
    case GUMBO_NODE_DOCUMENT:
        if (n->v.document.has_doctype) {
            out_puts(o, "<!DOCTYPE ");
            out_puts(o, n->v.document.name);
            out_put(o, ">", 1);
        }
        return &n->v.document.children;
    case GUMBO_NODE_ELEMENT:
    case GUMBO_NODE_TEMPLATE:
        put_start_tag(o, &n->v.element);
        /* A template's children in gumbo are its content, which is what it serialises. */
        return is_void(&n->v.element) ? NULL : &n->v.element.children;
    case GUMBO_NODE_COMMENT:
        out_put(o, "<!--", 4);
        out_puts(o, n->v.text.text);
        out_put(o, "-->", 3);
        return NULL;
    case GUMBO_NODE_TEXT:
    case GUMBO_NODE_WHITESPACE:
    case GUMBO_NODE_CDATA: /* a CDATA section is text to the serialiser */
        if (in_raw_text(n))
            out_puts(o, n->v.text.text);
        else
            put_escaped(o, n->v.text.text, 0);
        return NULL;
    }
    return NULL;
}

static void put_close(hv_sel_out_t *o, const GumboNode *n)
{
    if (!is_element(n) || is_void(&n->v.element))
        return;
    out_put(o, "</", 2);
    put_element_name(o, &n->v.element);
    out_put(o, ">", 1);
}

/* The node and everything below it, in document order, walked with parent pointers and
 * child indexes rather than recursion: the depth of the page does not matter. */
static void put_html(hv_sel_out_t *o, const GumboNode *root)
{
    const GumboNode *n = root;

    while (!o->full) {
        const GumboVector *kids = put_open(o, n);
        if (kids != NULL && kids->length > 0) {
            n = kids->data[0];
            continue;
        }
        /* Nothing to enter: close `n`, and every ancestor whose last child it closes. */
        for (;;) {
            put_close(o, n);
            if (n == root || n->parent == NULL)
                return;
            const GumboVector *sibs = children_of(n->parent);
            size_t next = n->index_within_parent + 1;
            if (sibs != NULL && next < sibs->length) {
                n = sibs->data[next];
                break;
            }
            n = n->parent;
        }
    }
}

char *hv_selector_value_max(const hv_selector_t *s, const GumboNode *node, const char *source,
                            size_t source_len, size_t max, int *cut)
{
    hv_sel_out_t o;
    int dummy;

    (void)source;
    (void)source_len;
    if (cut == NULL)
        cut = &dummy;
    *cut = 0;
    if (s == NULL || node == NULL)
        return NULL;
    out_init(&o, max);
    switch (s->take) {
    case HV_TAKE_ATTR: {
        if (!is_element(node))
            return NULL;
        const char *v = attr_value(node, s->attr);
        if (v == NULL)
            return NULL;
        out_put(&o, v, strlen(v)); /* stops where the buffer is full */
        break;
    }
    case HV_TAKE_HTML:
        put_html(&o, node);
        break;
    case HV_TAKE_TEXT:
        put_text(&o, node);
        break;
    }
    return out_finish(&o, max, cut);
}

char *hv_selector_value(const hv_selector_t *s, const GumboNode *node, const char *source,
                        size_t source_len)
{
    return hv_selector_value_max(s, node, source, source_len, SIZE_MAX, NULL);
}
