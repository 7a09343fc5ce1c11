/* prescan.c: the nesting and shape check that runs before every gumbo parse. Pure, no
 * allocation; runs on threadpool workers. */
#include "harvestd/prescan.h"

#include <assert.h>
#include <gumbo.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harvestd/common.h"

/*
 * The pre-scan runs the HTML tokenizer's rules for finding tags (comments, quoted attribute
 * values, raw-text elements) and a reduced copy of gumbo 0.10's tree builder: the stack of
 * open elements with namespaces, the list of active formatting elements, the head, table,
 * template, select, frameset and foreign-content modes, and the rules that close or reopen
 * elements implicitly, including gumbo's own departures from the current HTML standard.
 * Where it cannot tell, it keeps elements open: over-counting refuses a strange document,
 * while under-counting would hand gumbo exactly the input that it is slow on and that makes
 * its recursive destructor run deep. Its depth does not count html, head and body, nor the
 * leaf level. It was checked against gumbo's real trees on generated tag soup; since it
 * cannot be exact, hv_html_analyse() also measures the tree gumbo built (see html.c).
 */

/* What a tag name means (in HTML content unless said otherwise). */
enum {
    T_VOID = 1 << 0,        /* never has content (br, img) */
    T_RAW = 1 << 1,         /* raw text or RCDATA: the content is not markup (script) */
    T_SPECIAL = 1 << 2,     /* the spec's "special" category */
    T_FORMAT = 1 << 3,      /* formatting element (b, font): recorded for reconstruction */
    T_SCOPE = 1 << 4,       /* boundary of "has an element in scope" */
    T_CLOSES_P = 1 << 5,    /* the start tag closes an open p in button scope */
    T_IGNORE = 1 << 6,      /* html, head, body: one of each, never nested */
    T_BREAKOUT = 1 << 7,    /* the start tag leaves SVG/MathML content */
    T_SVG_IP = 1 << 8,      /* SVG integration point (foreignObject, desc, title) */
    T_MARKER = 1 << 9,      /* puts a marker on the list of active formatting elements */
    T_RECON = 1 << 10,      /* special, but its start tag reopens formatting elements */
    T_TSCOPE = 1 << 11,     /* boundary of "has an element in table scope" */
    T_END_SCOPE = 1 << 12,  /* the end tag closes the nearest match in scope */
    T_MATH_TEXT = 1 << 13,  /* MathML text integration point (mi, mtext) */
    T_MATH_ANNOT = 1 << 14, /* annotation-xml */
    T_NOFS = 1 << 15,       /* once seen, a frameset can no longer replace the body */
};

/* Tags with a rule of their own. */
enum {
    K_OTHER = 0,
    K_A,
    K_BR,
    K_BUTTON,
    K_CAPTION,
    K_COL,
    K_COLGROUP,
    K_DDDT,
    K_FONT,
    K_FORM,
    K_FRAMESET,
    K_HEADING,
    K_LI,
    K_LIST,
    K_MATH,
    K_MGLYPH,
    K_NOBR,
    K_OPTGROUP,
    K_OPTION,
    K_P,
    K_PLAINTEXT,
    K_RUBYTEXT,
    K_SELECT,
    K_SVG,
    K_TABLE,
    K_TCELL,
    K_TEMPLATE,
    K_TROW,
    K_TSECTION,
};

typedef struct {
    const char *name;
    uint16_t flags;
    uint8_t kind;
} hv_prescan_tag_t;

#define SP T_SPECIAL
#define CP T_CLOSES_P
#define BO T_BREAKOUT
#define ES T_END_SCOPE
#define FM (T_FORMAT | T_BREAKOUT)

/* Every tag name gumbo 0.10 knows, sorted in strcmp order. The set matters: gumbo
 * lets any unknown end tag close any unknown element. */
static const hv_prescan_tag_t hv_prescan_tags[] = {
    {"a", T_FORMAT, K_A},
    {"abbr", 0, K_OTHER},
    {"acronym", 0, K_OTHER},
    {"address", SP | CP | ES, K_OTHER},
    {"annotation-xml", T_MATH_ANNOT, K_OTHER},
    {"applet", SP | T_SCOPE | T_MARKER | T_RECON | ES | T_NOFS, K_OTHER},
    {"area", T_VOID | SP | T_RECON | T_NOFS, K_OTHER},
    {"article", SP | CP | ES, K_OTHER},
    {"aside", SP | CP | ES, K_OTHER},
    {"audio", 0, K_OTHER},
    {"b", FM, K_OTHER},
    {"base", T_VOID | SP, K_OTHER},
    {"basefont", T_VOID | SP, K_OTHER},
    {"bdi", 0, K_OTHER},
    {"bdo", 0, K_OTHER},
    {"bgsound", T_VOID | SP, K_OTHER},
    {"big", FM, K_OTHER},
    {"blink", 0, K_OTHER},
    {"blockquote", SP | CP | BO | ES, K_OTHER},
    {"body", T_IGNORE | SP | BO | T_NOFS, K_OTHER},
    {"br", T_VOID | SP | BO | T_RECON | T_NOFS, K_BR},
    {"button", SP | T_RECON | ES | T_NOFS, K_BUTTON},
    {"canvas", 0, K_OTHER},
    {"caption", SP | T_SCOPE | T_MARKER, K_CAPTION},
    {"center", SP | CP | BO | ES, K_OTHER},
    {"cite", 0, K_OTHER},
    {"code", FM, K_OTHER},
    {"col", T_VOID | SP, K_COL},
    {"colgroup", SP, K_COLGROUP},
    {"data", 0, K_OTHER},
    {"datalist", 0, K_OTHER},
    {"dd", SP | CP | BO | T_NOFS, K_DDDT},
    {"del", 0, K_OTHER},
    {"desc", T_SVG_IP, K_OTHER},
    {"details", SP | CP | ES, K_OTHER},
    {"dfn", 0, K_OTHER},
    {"dir", SP | CP | ES, K_OTHER},
    {"div", SP | CP | BO | ES, K_OTHER},
    {"dl", SP | CP | BO | ES, K_OTHER},
    {"dt", SP | CP | BO | T_NOFS, K_DDDT},
    {"em", FM, K_OTHER},
    {"embed", T_VOID | SP | BO | T_RECON | T_NOFS, K_OTHER},
    {"fieldset", SP | CP | ES, K_OTHER},
    {"figcaption", SP | CP | ES, K_OTHER},
    {"figure", SP | CP | ES, K_OTHER},
    {"font", T_FORMAT, K_FONT}, /* leaves foreign content only with color, face or size */
    {"footer", SP | CP | ES, K_OTHER},
    {"foreignobject", T_SVG_IP, K_OTHER},
    {"form", SP | CP, K_FORM},
    {"frame", T_VOID | SP, K_OTHER},
    {"frameset", SP, K_FRAMESET},
    {"h1", SP | CP | BO, K_HEADING},
    {"h2", SP | CP | BO, K_HEADING},
    {"h3", SP | CP | BO, K_HEADING},
    {"h4", SP | CP | BO, K_HEADING},
    {"h5", SP | CP | BO, K_HEADING},
    {"h6", SP | CP | BO, K_HEADING},
    {"head", T_IGNORE | SP | BO, K_OTHER},
    {"header", SP | CP | ES, K_OTHER},
    {"hgroup", SP | CP | ES, K_OTHER},
    {"hr", T_VOID | SP | CP | BO | T_NOFS, K_OTHER},
    {"html", T_IGNORE | SP | T_SCOPE | T_TSCOPE, K_OTHER},
    {"i", FM, K_OTHER},
    {"iframe", T_RAW | SP | T_NOFS, K_OTHER},
    {"image", T_VOID | T_RECON | T_NOFS, K_OTHER},
    {"img", T_VOID | SP | BO | T_RECON | T_NOFS, K_OTHER},
    {"input", T_VOID | SP | T_RECON | T_NOFS, K_OTHER},
    {"ins", 0, K_OTHER},
    {"isindex", T_VOID | SP | CP | T_NOFS, K_OTHER},
    {"kbd", 0, K_OTHER},
    {"keygen", T_VOID | SP | T_RECON | T_NOFS, K_OTHER},
    {"label", 0, K_OTHER},
    {"legend", 0, K_OTHER},
    {"li", SP | CP | BO | T_NOFS, K_LI},
    {"link", T_VOID | SP, K_OTHER},
    {"listing", SP | CP | BO | ES | T_NOFS, K_OTHER},
    {"main", CP, K_OTHER},
    {"malignmark", 0, K_MGLYPH},
    {"map", 0, K_OTHER},
    {"mark", 0, K_OTHER},
    {"marquee", SP | T_SCOPE | T_MARKER | T_RECON | ES | T_NOFS, K_OTHER},
    {"math", 0, K_MATH},
    {"menu", SP | CP | BO | ES, K_OTHER},
    {"menuitem", T_VOID | SP | T_RECON, K_OTHER},
    {"meta", T_VOID | SP | BO, K_OTHER},
    {"meter", 0, K_OTHER},
    {"mglyph", 0, K_MGLYPH},
    {"mi", T_MATH_TEXT, K_OTHER},
    {"mn", T_MATH_TEXT, K_OTHER},
    {"mo", T_MATH_TEXT, K_OTHER},
    {"ms", T_MATH_TEXT, K_OTHER},
    {"mtext", T_MATH_TEXT, K_OTHER},
    {"multicol", 0, K_OTHER},
    {"nav", SP | CP | ES, K_OTHER},
    {"nextid", 0, K_OTHER},
    {"nobr", FM, K_NOBR},
    {"noembed", T_RAW | SP, K_OTHER},
    {"noframes", T_RAW | SP, K_OTHER},
    {"noscript", SP | T_RECON, K_OTHER},
    {"object", SP | T_SCOPE | T_MARKER | T_RECON | ES | T_NOFS, K_OTHER},
    {"ol", SP | CP | BO | ES, K_LIST},
    {"optgroup", 0, K_OPTGROUP},
    {"option", 0, K_OPTION},
    {"output", 0, K_OTHER},
    {"p", SP | CP | BO, K_P},
    {"param", T_VOID | SP, K_OTHER},
    {"plaintext", SP | CP, K_PLAINTEXT},
    {"pre", SP | CP | BO | ES | T_NOFS, K_OTHER},
    {"progress", 0, K_OTHER},
    {"q", 0, K_OTHER},
    {"rb", 0, K_RUBYTEXT},
    {"rp", 0, K_RUBYTEXT},
    {"rt", 0, K_RUBYTEXT},
    {"rtc", 0, K_RUBYTEXT},
    {"ruby", BO, K_OTHER},
    {"s", FM, K_OTHER},
    {"samp", 0, K_OTHER},
    {"script", T_RAW | SP, K_OTHER},
    {"section", SP | CP | ES, K_OTHER},
    {"select", SP | T_RECON | T_NOFS, K_SELECT},
    {"small", FM, K_OTHER},
    {"source", T_VOID | SP, K_OTHER},
    {"spacer", 0, K_OTHER},
    {"span", BO, K_OTHER},
    {"strike", FM, K_OTHER},
    {"strong", FM, K_OTHER},
    {"style", T_RAW | SP, K_OTHER},
    {"sub", BO, K_OTHER},
    {"summary", SP | CP | ES, K_OTHER},
    {"sup", BO, K_OTHER},
    {"svg", 0, K_SVG},
    {"table", SP | T_SCOPE | T_TSCOPE | BO | T_NOFS, K_TABLE},
    {"tbody", SP, K_TSECTION},
    {"td", SP | T_SCOPE | T_MARKER, K_TCELL},
    {"template", SP | T_SCOPE | T_TSCOPE | T_MARKER | ES, K_TEMPLATE},
    {"textarea", T_RAW | SP | T_NOFS, K_OTHER},
    {"tfoot", SP, K_TSECTION},
    {"th", SP | T_SCOPE | T_MARKER, K_TCELL},
    {"thead", SP, K_TSECTION},
    {"time", 0, K_OTHER},
    {"title", T_RAW | SP | T_SVG_IP, K_OTHER},
    {"tr", SP, K_TROW},
    {"track", T_VOID | SP, K_OTHER},
    {"tt", FM, K_OTHER},
    {"u", FM, K_OTHER},
    {"ul", SP | CP | BO | ES, K_LIST},
    {"var", BO, K_OTHER},
    {"video", 0, K_OTHER},
    {"wbr", T_VOID | SP | T_RECON | T_NOFS, K_OTHER},
    {"xmp", T_RAW | SP | CP | T_RECON | T_NOFS, K_OTHER},
};

#undef SP
#undef CP
#undef BO
#undef ES
#undef FM

/* Longer than any name in the table: such names are unknown without a lookup. */
#define HV_PRESCAN_NAME_MAX 16

/* Open elements tracked one by one. Deeper levels (reachable only with a limit above
 * HV_PRESCAN_MAX_DEPTH) are merely counted, and any end tag closes one of them. */
#define HV_PRESCAN_STACK (HV_PRESCAN_MAX_DEPTH + 1)

/* How far below the current node the implicit rules look: past a full list of reopened
 * formatting elements (HV_PRESCAN_AFE_MAX) with room to spare. The bound keeps the scan linear
 * on hostile input (gumbo itself searches the whole stack), and a miss keeps elements open. */
#define HV_PRESCAN_WINDOW 512

/* Capacity of the list of active formatting elements. Only formatting elements left open
 * (and open cells, captions, objects) stay on it; a document that needs more is refused,
 * since each of them may be reopened, nested, at every piece of text. */
#define HV_PRESCAN_AFE_MAX 256

/* gumbo searches its stack of open elements for most tags, so its time grows with the sum
 * of the depths at each tag. Past this sum (about a quarter of a second of gumbo's time) a
 * document is refused even if it never gets deeper than the limit. */
#define HV_PRESCAN_WORK_MAX (128u * 1024 * 1024)

/* Reopened formatting elements allowed besides one per two bytes of input; the attributes
 * copied onto them have the same allowance. */
#define HV_PRESCAN_CLONES_MIN 4096

/* gumbo compares attribute names pairwise: its tokenizer each attribute of a tag with those
 * before it (to drop duplicates), its tree builder each attribute of a repeated html or body
 * tag with those already merged, and each new formatting element's attributes with those of
 * the same tag on the list of active formatting elements (the "Noah's Ark" clause). Past this
 * many comparisons (about a fifth of a second of gumbo's time) a document is refused. */
#define HV_PRESCAN_ATTR_WORK_MAX (64u * 1024 * 1024)

/* Scopes of the spec's "has an element in ... scope". */
enum { S_DEFAULT, S_BUTTON, S_LIST, S_TABLE, S_SELECT };

/* Flags of an open element. */
enum {
    E_FOREIGN = 1 << 0, /* SVG or MathML */
    E_MATH = 1 << 1,    /* MathML (SVG otherwise), with E_FOREIGN */
    E_IP = 1 << 2,      /* foreign, but start tags and text in it follow the HTML rules */
    E_NOMATCH = 1 << 3, /* name too long or too far into the input to compare */
    E_GONE = 1 << 4,    /* out of the stack but still an ancestor in the tree (</form>) */
};

/* A template's current insertion mode, in the top bits of its flags: its first tag chooses
 * between body content and the table modes, and closing table parts moves between those. */
enum { TM_NONE, TM_BODY, TM_TABLE, TM_TBODY, TM_ROW, TM_COLGROUP };
#define E_TMODE_SHIFT 5

/* An open element. The name is kept as a reference into the input: foreign end tags match
 * by name (HTML ones by tag, as in gumbo). */
typedef struct {
    uint32_t off;    /* name offset in the input */
    uint32_t serial; /* identifies the element for the list of formatting elements */
    uint16_t len;    /* name length */
    uint8_t id;      /* 1 + index into hv_prescan_tags; 0 for an unknown name */
    uint8_t flags;   /* E_* */
    uint8_t kind;    /* K_* of an HTML element, K_OTHER for foreign ones */
    uint8_t bits;    /* B_*: what the scope searches ask, worked out once at push */
} hv_prescan_entry_t;

/* Properties of an open element that the searches test on every step. */
enum {
    B_SCOPE = 1 << 0,   /* boundary of the default scope */
    B_TSCOPE = 1 << 1,  /* boundary of table scope */
    B_SPECIAL = 1 << 2, /* in the special category */
    B_FORMAT = 1 << 3,  /* formatting element */
    B_BUTTON = 1 << 4,  /* boundary of button scope too */
    B_LIST = 1 << 5,    /* boundary of list-item scope too */
    B_OPTION = 1 << 6,  /* option or optgroup: not a boundary of select scope */
};

/* An entry of the list of active formatting elements; id 0 is a marker. */
typedef struct {
    uint32_t serial;   /* the element it stands for */
    uint32_t attr_off; /* its attributes as written, for the "Noah's Ark" comparison */
    uint16_t attr_len;
    uint16_t nattrs;   /* how many (at most HV_PRESCAN_MAX_ATTRS) */
    uint8_t id;
    uint8_t unique;   /* attributes not comparable: never counts as identical */
    uint8_t on_stack; /* the element is open */
} hv_prescan_afe_t;

typedef struct {
    const char *s;
    size_t len;
    size_t limit;
    size_t depth;
    size_t max;
    hv_prescan_verdict_t verdict; /* the first refusal, HV_PRESCAN_OK until then */
    size_t bound;                 /* the bound it exceeded */
    int frameset_ok;        /* a frameset would still replace the body */
    int frameset_doc;       /* it did: only framesets nest from here on */
    size_t templates;       /* template elements open (a frameset is ignored inside one) */
    int form_pointer;       /* the parser's form element pointer is set: <form> is ignored */
    int in_head;            /* nothing has started the body yet */
    uint32_t head_noscript; /* serial of a noscript open in the head, or 0 */
    size_t clones;          /* elements reopened by reconstruction so far */
    size_t work;            /* sum of the depth at every tag */
    size_t attr_work;       /* attribute comparisons gumbo makes (HV_PRESCAN_ATTR_WORK_MAX) */
    size_t attr_copies;     /* attributes copied onto reopened and adopted clones */
    size_t html_attrs;      /* attributes of html start tags so far, repeats included */
    size_t body_attrs;      /* the same for body */
    uint32_t serial;
    size_t nafe;
    hv_prescan_afe_t afe[HV_PRESCAN_AFE_MAX];
    hv_prescan_entry_t stack[HV_PRESCAN_STACK];
} hv_prescan_scan_t;

/* A tag as the tokenizer sees it. */
typedef struct {
    size_t name;
    size_t name_len;
    size_t attrs; /* from the end of the name to the '>' */
    size_t attrs_end;
    size_t nattrs; /* attributes as written, duplicates included */
    int id;
    unsigned flags;
    int kind;
    int self_closing;
} hv_prescan_token_t;

/* skip_attrs() result when the input ends inside the tag: the tokenizer drops the tag. */
#define HV_PRESCAN_EOF SIZE_MAX

/* Tag ids (1 + index into hv_prescan_tags) by gumbo's tag number, and back: the table holds
 * exactly gumbo's tag names, so that a name is known here if and only if gumbo knows it. Built
 * once, by the first pre-scan of the process (any thread). */
static uint8_t hv_prescan_id_of[GUMBO_TAG_LAST + 1];
static GumboTag hv_prescan_gumbo_of[HV_ARRAY_SIZE(hv_prescan_tags)];
static pthread_once_t hv_prescan_ids_once = PTHREAD_ONCE_INIT;

static void hv_prescan_build_ids(void)
{
    _Static_assert(HV_ARRAY_SIZE(hv_prescan_tags) < 256, "ids are 8 bits");
    for (size_t i = 0; i < HV_ARRAY_SIZE(hv_prescan_tags); i++) {
        GumboTag g = gumbo_tag_enum(hv_prescan_tags[i].name);
        assert(g != GUMBO_TAG_UNKNOWN); /* the table lists gumbo 0.10's names only */
        hv_prescan_gumbo_of[i] = g;
        hv_prescan_id_of[g] = (uint8_t)(i + 1);
    }
}

/* The id of a tag name in any case, 0 for a name gumbo does not know. gumbo's own lookup is a
 * perfect hash, O(1) where a search of the names cost a quarter of every pre-scan. */
static int hv_prescan_lookup(const char *name, size_t len)
{
    GumboTag g = gumbo_tagn_enum(name, (unsigned)HV_MIN(len, (size_t)UINT_MAX));
    return g == GUMBO_TAG_UNKNOWN ? 0 : hv_prescan_id_of[g];
}

static unsigned hv_prescan_tag_flags(int id)
{
    return id > 0 ? hv_prescan_tags[id - 1].flags : 0;
}

static int hv_prescan_tag_kind(int id)
{
    return id > 0 ? hv_prescan_tags[id - 1].kind : K_OTHER;
}

static int hv_prescan_is(int id, GumboTag tag)
{
    return id > 0 && hv_prescan_gumbo_of[id - 1] == tag;
}

/* ---- tokenizer ---- */

/* The walk of hv_prescan_read_attr(). Finding a tag's end runs it at every attribute of every
 * page; inlined there (GCC would make it a call), the position stays in a register and the
 * stores of an attribute nobody reads go away. As a call it cost the pre-scan 7% more
 * instructions than the loop it replaced. */
__attribute__((always_inline)) static inline int
hv_prescan_attr_walk(const char *s, size_t len, size_t *pos, hv_prescan_attr_t *a)
{
    size_t p = *pos;
    while (p < len && (hv_ascii_is_space((unsigned char)s[p]) || s[p] == '/'))
        p++;
    if (p >= len)
        return -1;
    if (s[p] == '>') {
        *pos = p;
        return 0;
    }
    /* The name; its first byte may be anything, even '=' or a quote. */
    a->name = p++;
    while (p < len && !hv_ascii_is_space((unsigned char)s[p]) && s[p] != '/' && s[p] != '>' &&
           s[p] != '=')
        p++;
    a->name_len = p - a->name;
    a->value = p;
    a->value_len = 0;
    while (p < len && hv_ascii_is_space((unsigned char)s[p]))
        p++;
    if (p >= len)
        return -1;
    if (s[p] != '=') {
        *pos = p; /* no value: this byte starts what follows */
        return 1;
    }
    p++;
    while (p < len && hv_ascii_is_space((unsigned char)s[p]))
        p++;
    if (p >= len)
        return -1;
    if (s[p] == '"' || s[p] == '\'') {
        const char *q = memchr(s + p + 1, s[p], len - p - 1);
        if (q == NULL)
            return -1;
        a->value = p + 1;
        a->value_len = (size_t)(q - s) - a->value;
        *pos = (size_t)(q - s) + 1;
        return 1;
    }
    /* Unquoted. '/' belongs to the value: `<a href=/x/>` is not self-closing. */
    a->value = p;
    while (p < len && !hv_ascii_is_space((unsigned char)s[p]) && s[p] != '>')
        p++;
    if (p >= len)
        return -1;
    a->value_len = p - a->value;
    *pos = p;
    return 1;
}

int hv_prescan_read_attr(const char *s, size_t len, size_t *pos, hv_prescan_attr_t *a)
{
    return hv_prescan_attr_walk(s, len, pos, a);
}

/*
 * Skip the attributes of a tag whose name ends at `p`, up to and including the '>'. Quotes
 * open a value only after '=', as in the tokenizer: `<div "a>` ends at the first '>' and
 * `<div title="a>b">` at the second. Returns the offset after the '>', or HV_PRESCAN_EOF;
 * *nattrs counts the attributes passed (the tokenizer reads them even from a tag the end of
 * the input then drops).
 */
static size_t hv_prescan_skip_attrs(const char *s, size_t len, size_t p, int *self_closing,
                                    size_t *nattrs)
{
    hv_prescan_attr_t a;
    size_t from;
    int r;
    *nattrs = 0;
    for (;;) {
        from = p;
        r = hv_prescan_attr_walk(s, len, &p, &a);
        if (r <= 0)
            break;
        (*nattrs)++;
    }
    /* The last call skipped only whitespace and '/': "/>" closes the tag, "/ >" does not. */
    *self_closing = r == 0 && p > from && s[p - 1] == '/';
    return r == 0 ? p + 1 : HV_PRESCAN_EOF;
}

/* The first attribute of `t` (a complete tag) named `name`; the tokenizer drops later
 * duplicates. */
static int hv_prescan_get_attr(const hv_prescan_scan_t *sc, const hv_prescan_token_t *t,
                               const char *name, hv_prescan_attr_t *out)
{
    size_t p = t->attrs;
    hv_prescan_attr_t a;
    while (hv_prescan_read_attr(sc->s, sc->len, &p, &a) > 0) {
        if (hv_ascii_case_is(sc->s + a.name, a.name_len, name)) {
            *out = a;
            return 1;
        }
    }
    return 0;
}

/* Read the tag whose name starts at `p` (a letter); returns the offset after it. */
static size_t hv_prescan_read_tag(const char *s, size_t len, size_t p, hv_prescan_token_t *t)
{
    size_t e = p;
    while (e < len && !hv_ascii_is_space((unsigned char)s[e]) && s[e] != '/' && s[e] != '>')
        e++;
    t->name = p;
    t->name_len = e - p;
    t->id = hv_prescan_lookup(s + p, e - p);
    t->flags = hv_prescan_tag_flags(t->id);
    t->kind = hv_prescan_tag_kind(t->id);
    size_t next = hv_prescan_skip_attrs(s, len, e, &t->self_closing, &t->nattrs);
    t->attrs = e;
    t->attrs_end = next != HV_PRESCAN_EOF ? next - 1 : e;
    return next;
}

/* The attributes of `t` as written, trimmed, for comparing two formatting elements. */
static void hv_prescan_attr_text(const char *s, const hv_prescan_token_t *t, size_t *off,
                                 size_t *len)
{
    size_t a = t->attrs, b = t->attrs_end;
    while (a < b && hv_ascii_is_space((unsigned char)s[a]))
        a++;
    while (b > a && (hv_ascii_is_space((unsigned char)s[b - 1]) || s[b - 1] == '/'))
        b--;
    *off = a;
    *len = b - a;
}

/* End of a comment whose text starts at `p` (after "<!--"); len if it never ends. The
 * tokenizer ends comments at "-->" and "--!>", and takes "<!-->" and "<!--->" as empty. */
static size_t hv_prescan_skip_comment(const char *s, size_t len, size_t p)
{
    if (p < len && s[p] == '>')
        return p + 1;
    if (p + 1 < len && s[p] == '-' && s[p + 1] == '>')
        return p + 2;
    size_t from = p;
    while (from < len) {
        const char *gt = memchr(s + from, '>', len - from);
        if (gt == NULL)
            return len;
        size_t q = (size_t)(gt - s);
        if (q - p >= 2 && s[q - 1] == '-' && s[q - 2] == '-')
            return q + 1;
        if (q - p >= 3 && s[q - 1] == '!' && s[q - 2] == '-' && s[q - 3] == '-')
            return q + 1;
        from = q + 1;
    }
    return len;
}

/* Offset after the first '>' at or after `p`; len if there is none. */
static size_t hv_prescan_skip_to_gt(const char *s, size_t len, size_t p)
{
    if (p >= len)
        return len;
    const char *gt = memchr(s + p, '>', len - p);
    return gt != NULL ? (size_t)(gt - s) + 1 : len;
}

/* Skip the content of a raw-text or RCDATA element and its end tag (whose attributes
 * *nattrs counts); len if the element runs to the end of the input. */
static size_t hv_prescan_skip_raw(const char *s, size_t len, size_t p, const char *name,
                                  size_t *nattrs)
{
    *nattrs = 0;
    size_t n = strlen(name);
    while (p < len) {
        const char *lt = memchr(s + p, '<', len - p);
        if (lt == NULL)
            return len;
        size_t q = (size_t)(lt - s);
        p = q + 1;
        if (q + 2 + n >= len || s[q + 1] != '/')
            continue;
        size_t i = 0;
        while (i < n && hv_ascii_lower((unsigned char)s[q + 2 + i]) == (unsigned char)name[i])
            i++;
        if (i < n)
            continue;
        unsigned char after = (unsigned char)s[q + 2 + n];
        if (!hv_ascii_is_space(after) && after != '/' && after != '>')
            continue;
        int self_closing;
        size_t next = hv_prescan_skip_attrs(s, len, q + 2 + n, &self_closing, nattrs);
        return next == HV_PRESCAN_EOF ? len : next;
    }
    return len;
}

/* Whether a tag named `name` (lower case) starts at s[p] ("<name" or "</name"), followed by
 * a delimiter: whitespace, '/' or '>'. */
static int hv_prescan_tag_at(const char *s, size_t len, size_t p, const char *name)
{
    size_t n = strlen(name);
    if (p + n >= len)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (hv_ascii_lower((unsigned char)s[p + i]) != (unsigned char)name[i])
            return 0;
    unsigned char after = (unsigned char)s[p + n];
    return hv_ascii_is_space(after) || after == '/' || after == '>';
}

/*
 * Skip script content and its end tag. Scripts have their own tokenizer states: inside
 * "<!--", a "<script>" starts a double-escaped section in which "</script>" does not end the
 * script ("<script><!--<script></script>still script</script>"). Getting this wrong would
 * let markup hide from the pre-scan. Returns len if the script runs to the end; *nattrs
 * counts the attributes of the end tag.
 */
static size_t hv_prescan_skip_script(const char *s, size_t len, size_t p, size_t *nattrs)
{
    *nattrs = 0;
    enum { DATA, ESCAPED, DOUBLE } state = DATA;
    size_t dashes = 0;
    while (p < len) {
        char c = s[p];
        if (state == DATA) {
            if (c == '<' && p + 3 < len && memcmp(s + p, "<!--", 4) == 0) {
                state = ESCAPED;
                dashes = 2; /* "<!-->" closes again at once */
                p += 4;
                continue;
            }
            if (c == '<' && p + 1 < len && s[p + 1] == '/' &&
                hv_prescan_tag_at(s, len, p + 2, "script"))
                break;
            p++;
            continue;
        }
        if (c == '-') {
            dashes++;
            p++;
            continue;
        }
        if (c == '>' && dashes >= 2) {
            state = DATA;
            dashes = 0;
            p++;
            continue;
        }
        dashes = 0;
        if (c == '<' && p + 1 < len && s[p + 1] == '/' &&
            hv_prescan_tag_at(s, len, p + 2, "script")) {
            if (state == ESCAPED)
                break;
            state = ESCAPED; /* the end of the double-escaped part */
            p += 8;
            continue;
        }
        if (c == '<' && state == ESCAPED && hv_prescan_tag_at(s, len, p + 1, "script")) {
            state = DOUBLE;
            p += 7;
            continue;
        }
        p++;
    }
    if (p >= len)
        return len;
    int self_closing;
    size_t next = hv_prescan_skip_attrs(s, len, p + 8, &self_closing, nattrs);
    return next == HV_PRESCAN_EOF ? len : next;
}

/* ---- open elements ---- */

/* Refuse the document for `verdict` (the first reason found is the one reported); returns 1,
 * the "stop the scan" of the callers. */
static int hv_prescan_refuse(hv_prescan_scan_t *sc, hv_prescan_verdict_t verdict, size_t bound)
{
    if (sc->verdict == HV_PRESCAN_OK) {
        sc->verdict = verdict;
        sc->bound = bound;
    }
    return 1;
}

/* `n` more attribute comparisons of gumbo's; returns 1 to stop. */
static int hv_prescan_attr_work(hv_prescan_scan_t *sc, size_t n)
{
    sc->attr_work += n;
    if (sc->attr_work > HV_PRESCAN_ATTR_WORK_MAX)
        return hv_prescan_refuse(sc, HV_PRESCAN_ATTRIBUTE_WORK, HV_PRESCAN_ATTR_WORK_MAX);
    return 0;
}

/* The tokenizer reads a tag with `n` attributes (start or end tag, kept or dropped), each
 * compared with those before it. */
static int hv_prescan_tag_attrs(hv_prescan_scan_t *sc, size_t n)
{
    if (n > HV_PRESCAN_MAX_ATTRS)
        return hv_prescan_refuse(sc, HV_PRESCAN_ATTRIBUTES, HV_PRESCAN_MAX_ATTRS);
    return n > 1 ? hv_prescan_attr_work(sc, n * (n - 1) / 2) : 0;
}

/* An html or body start tag with `n` attributes: gumbo adds those the element lacks, looking
 * each up among those it has. Repeats are counted as if they were new names, which can only
 * overestimate. */
static int hv_prescan_merge_attrs(hv_prescan_scan_t *sc, size_t *merged, size_t n)
{
    if (hv_prescan_attr_work(sc, n * *merged))
        return 1;
    *merged += n;
    if (*merged > HV_PRESCAN_MAX_ATTRS)
        return hv_prescan_refuse(sc, HV_PRESCAN_MERGED_ATTRIBUTES, HV_PRESCAN_MAX_ATTRS);
    return 0;
}

/* A clone of a formatting element with `n` attributes: each is copied. */
static int hv_prescan_attr_copies(hv_prescan_scan_t *sc, size_t n)
{
    sc->attr_copies += n;
    if (sc->attr_copies > sc->len / 2 + HV_PRESCAN_CLONES_MIN)
        return hv_prescan_refuse(sc, HV_PRESCAN_ATTRIBUTE_COPIES,
                                 sc->len / 2 + HV_PRESCAN_CLONES_MIN);
    return 0;
}

static size_t hv_prescan_tracked(const hv_prescan_scan_t *sc)
{
    return HV_MIN(sc->depth, (size_t)HV_PRESCAN_STACK);
}

static hv_prescan_entry_t *hv_prescan_top(hv_prescan_scan_t *sc)
{
    if (sc->depth == 0 || sc->depth > HV_PRESCAN_STACK)
        return NULL;
    return &sc->stack[sc->depth - 1];
}

static int hv_prescan_foreign(const hv_prescan_entry_t *e)
{
    return (e->flags & E_FOREIGN) != 0;
}

static int hv_prescan_kind(const hv_prescan_entry_t *e)
{
    return e == NULL ? K_OTHER : e->kind;
}

/* The B_* bits of an element with tag `id` and E_* flags `eflags`. SVG foreignObject, desc,
 * title and MathML mi, mo, mn, ms, mtext, annotation-xml are special and scope boundaries
 * whatever their attributes; other foreign elements are neither. */
static unsigned hv_prescan_bits(int id, unsigned eflags)
{
    unsigned f = hv_prescan_tag_flags(id);
    if (eflags & E_FOREIGN) {
        unsigned special = (eflags & E_MATH) ? (f & (T_MATH_TEXT | T_MATH_ANNOT)) : (f & T_SVG_IP);
        return special ? B_SCOPE | B_SPECIAL : 0;
    }
    int kind = hv_prescan_tag_kind(id);
    unsigned b = 0;
    if (f & T_SCOPE)
        b |= B_SCOPE;
    if (f & T_TSCOPE)
        b |= B_TSCOPE;
    if (f & T_SPECIAL)
        b |= B_SPECIAL;
    if (f & T_FORMAT)
        b |= B_FORMAT;
    if (kind == K_BUTTON)
        b |= B_BUTTON;
    if (kind == K_LIST)
        b |= B_LIST;
    if (kind == K_OPTION || kind == K_OPTGROUP)
        b |= B_OPTION;
    return b;
}

static int hv_prescan_special(const hv_prescan_entry_t *e)
{
    return (e->bits & B_SPECIAL) != 0;
}

static int hv_prescan_barrier(const hv_prescan_entry_t *e, int scope)
{
    switch (scope) {
    case S_TABLE:
        return (e->bits & B_TSCOPE) != 0;
    case S_SELECT:
        return !(e->bits & B_OPTION);
    case S_BUTTON:
        return (e->bits & (B_SCOPE | B_BUTTON)) != 0;
    case S_LIST:
        return (e->bits & (B_SCOPE | B_LIST)) != 0;
    default:
        return (e->bits & B_SCOPE) != 0;
    }
}

/* Whether open element `e` has the name of end tag `t`. gumbo 0.10 compares HTML elements
 * by its tag enum, so any unknown end tag matches any unknown HTML element; foreign
 * elements are compared by name. */
static int hv_prescan_matches(const hv_prescan_scan_t *sc, const hv_prescan_entry_t *e,
                              const hv_prescan_token_t *t)
{
    if (e->id != t->id)
        return 0;
    if (t->id != 0 || !(e->flags & E_FOREIGN))
        return 1;
    if ((e->flags & E_NOMATCH) || e->len != t->name_len)
        return 0;
    for (size_t i = 0; i < t->name_len; i++)
        if (hv_ascii_lower((unsigned char)sc->s[e->off + i]) !=
            hv_ascii_lower((unsigned char)sc->s[t->name + i]))
            return 0;
    return 1;
}

/* Lowest index the implicit rules look at. */
static size_t hv_prescan_window_stop(const hv_prescan_scan_t *sc)
{
    size_t n = hv_prescan_tracked(sc);
    return n > HV_PRESCAN_WINDOW ? n - HV_PRESCAN_WINDOW : 0;
}

static int hv_prescan_tmode(const hv_prescan_entry_t *e)
{
    return e->flags >> E_TMODE_SHIFT;
}

static void hv_prescan_set_tmode(hv_prescan_entry_t *e, int mode)
{
    unsigned low = e->flags & ((1u << E_TMODE_SHIFT) - 1);
    e->flags = (uint8_t)(low | (unsigned)mode << E_TMODE_SHIFT);
}

/* Index of the open element with this serial within the window, or -1. */
static long hv_prescan_find_serial(const hv_prescan_scan_t *sc, uint32_t serial)
{
    size_t stop = hv_prescan_window_stop(sc);
    for (size_t i = hv_prescan_tracked(sc); i-- > stop;)
        if (sc->stack[i].serial == serial && !(sc->stack[i].flags & E_GONE))
            return (long)i;
    return -1;
}

/* Index of the list entry for the element with this serial, or -1. */
static long hv_prescan_afe_index(const hv_prescan_scan_t *sc, uint32_t serial)
{
    for (size_t k = sc->nafe; k-- > 0;)
        if (sc->afe[k].id != 0 && sc->afe[k].serial == serial)
            return (long)k;
    return -1;
}

/* Push an element; returns 1 if the scan must stop (the limit is exceeded). */
static int hv_prescan_push(hv_prescan_scan_t *sc, const hv_prescan_token_t *t, unsigned eflags)
{
    if (sc->serial == UINT32_MAX)
        return hv_prescan_refuse(sc, HV_PRESCAN_ELEMENTS, UINT32_MAX);
    sc->serial++;
    if (sc->depth < HV_PRESCAN_STACK) {
        hv_prescan_entry_t *e = &sc->stack[sc->depth];
        e->serial = sc->serial;
        e->id = (uint8_t)t->id;
        e->flags = (uint8_t)eflags;
        e->kind = (uint8_t)((eflags & E_FOREIGN) ? K_OTHER : hv_prescan_tag_kind(t->id));
        e->bits = (uint8_t)hv_prescan_bits(t->id, eflags);
        if (t->name > UINT32_MAX || t->name_len > UINT16_MAX) {
            e->off = 0;
            e->len = 0;
            e->flags |= E_NOMATCH;
        } else {
            e->off = (uint32_t)t->name;
            e->len = (uint16_t)t->name_len;
        }
    }
    if (!(eflags & E_FOREIGN) && hv_prescan_tag_kind(t->id) == K_TEMPLATE)
        sc->templates++;
    sc->depth++;
    if (sc->depth > sc->max)
        sc->max = sc->depth;
    return sc->depth > sc->limit;
}

/* Push an element the parser inserts on its own, such as the tbody of "<table><tr>". */
static int hv_prescan_push_implied(hv_prescan_scan_t *sc, GumboTag tag)
{
    hv_prescan_token_t t;
    memset(&t, 0, sizeof(t));
    t.id = hv_prescan_id_of[tag];
    return hv_prescan_push(sc, &t, 0);
}

static void hv_prescan_afe_remove(hv_prescan_scan_t *sc, size_t k)
{
    memmove(&sc->afe[k], &sc->afe[k + 1], (sc->nafe - k - 1) * sizeof(sc->afe[0]));
    sc->nafe--;
}

/* Closing a cell, caption, object... on purpose forgets the formatting elements opened
 * inside it. Popping one as a side effect (a </table> closing a stray marquee) does not:
 * gumbo then keeps the stale marker, and so does the model. */
static void hv_prescan_afe_clear_to_marker(hv_prescan_scan_t *sc)
{
    while (sc->nafe > 0) {
        int marker = sc->afe[sc->nafe - 1].id == 0;
        hv_prescan_afe_remove(sc, sc->nafe - 1);
        if (marker)
            break;
    }
}

/* Pop everything from `index` up. */
static void hv_prescan_pop_to(hv_prescan_scan_t *sc, long index)
{
    if (index < 0)
        return;
    size_t n = hv_prescan_tracked(sc);
    while (n > (size_t)index) {
        n--;
        if (hv_prescan_kind(&sc->stack[n]) == K_TEMPLATE)
            sc->templates--;
        if (sc->stack[n].bits & B_FORMAT) {
            long k = hv_prescan_afe_index(sc, sc->stack[n].serial);
            if (k >= 0)
                sc->afe[k].on_stack = 0;
        }
    }
    size_t old = sc->depth;
    sc->depth = (size_t)index;
    /* The current node is the last element still in the stack. */
    while (sc->depth > 0 && sc->depth <= HV_PRESCAN_STACK &&
           (sc->stack[sc->depth - 1].flags & E_GONE))
        sc->depth--;

    /* Back in a template, the mode follows from what closed: after a cell the template
     * holds a row, after a row a table body, after a section a table. */
    hv_prescan_entry_t *top = hv_prescan_top(sc);
    if (top != NULL && hv_prescan_kind(top) == K_TEMPLATE && old > sc->depth &&
        sc->depth < HV_PRESCAN_STACK) {
        switch (hv_prescan_kind(&sc->stack[sc->depth])) {
        case K_TCELL:
            hv_prescan_set_tmode(top, TM_ROW);
            break;
        case K_TROW:
            hv_prescan_set_tmode(top, TM_TBODY);
            break;
        case K_TSECTION:
        case K_CAPTION:
        case K_COLGROUP:
            hv_prescan_set_tmode(top, TM_TABLE);
            break;
        default:
            break;
        }
    }
}

static void hv_prescan_pop(hv_prescan_scan_t *sc)
{
    if (sc->depth > 0)
        hv_prescan_pop_to(sc, (long)sc->depth - 1);
}

/*
 * Take one element out of the stack of open elements (what </form> does). What was opened
 * inside it stays inside it in the tree, so it keeps its level until those close too.
 */
static void hv_prescan_remove_at(hv_prescan_scan_t *sc, long index)
{
    if (index < 0)
        return;
    if ((size_t)index + 1 == sc->depth)
        hv_prescan_pop_to(sc, index);
    else
        sc->stack[index].flags |= E_GONE;
}

/* Nearest HTML element of `kind` in `scope`, or -1. */
static long hv_prescan_find_kind(hv_prescan_scan_t *sc, int kind, int scope)
{
    if (sc->depth > HV_PRESCAN_STACK)
        return -1;
    size_t stop = hv_prescan_window_stop(sc);
    for (size_t i = sc->depth; i-- > stop;) {
        const hv_prescan_entry_t *e = &sc->stack[i];
        if (e->flags & E_GONE)
            continue;
        if (!hv_prescan_foreign(e) && hv_prescan_kind(e) == kind)
            return (long)i;
        if (hv_prescan_barrier(e, scope))
            return -1;
    }
    return -1;
}

/* Nearest HTML element named like `t` in `scope`, or -1. */
static long hv_prescan_find_name(hv_prescan_scan_t *sc, const hv_prescan_token_t *t, int scope)
{
    if (sc->depth > HV_PRESCAN_STACK)
        return -1;
    size_t stop = hv_prescan_window_stop(sc);
    for (size_t i = sc->depth; i-- > stop;) {
        const hv_prescan_entry_t *e = &sc->stack[i];
        if (e->flags & E_GONE)
            continue;
        if (!hv_prescan_foreign(e) && hv_prescan_matches(sc, e, t))
            return (long)i;
        if (hv_prescan_barrier(e, scope))
            return -1;
    }
    return -1;
}

/*
 * The table-related element that decides the parser's insertion mode (in table, in table
 * body, in row, in cell, in caption, in column group, in template); -1 and K_OTHER when none
 * is open nearby, which means "in body".
 */
static long hv_prescan_table_context(hv_prescan_scan_t *sc, int *kind)
{
    *kind = K_OTHER;
    if (sc->depth > HV_PRESCAN_STACK)
        return -1;
    size_t stop = hv_prescan_window_stop(sc);
    for (size_t i = sc->depth; i-- > stop;) {
        const hv_prescan_entry_t *e = &sc->stack[i];
        if ((e->flags & E_GONE) || hv_prescan_foreign(e))
            continue;
        int k = hv_prescan_kind(e);
        switch (k) {
        case K_TABLE:
        case K_TSECTION:
        case K_TROW:
        case K_TCELL:
        case K_CAPTION:
        case K_COLGROUP:
        case K_TEMPLATE:
            *kind = k;
            return (long)i;
        default:
            break;
        }
        if (hv_prescan_is(e->id, GUMBO_TAG_HTML))
            break;
    }
    return -1;
}

/* ---- active formatting elements ---- */

static int hv_prescan_afe_identical(const hv_prescan_scan_t *sc, const hv_prescan_afe_t *a,
                                    const hv_prescan_afe_t *b)
{
    return a->id == b->id && !a->unique && !b->unique && a->attr_len == b->attr_len &&
           memcmp(sc->s + a->attr_off, sc->s + b->attr_off, a->attr_len) == 0;
}

/* Record the element just pushed for `t`. Attributes are compared as written, which may
 * take two equal sets for different ones, and so only ever keeps more entries. */
static int hv_prescan_afe_add(hv_prescan_scan_t *sc, const hv_prescan_token_t *t)
{
    size_t off, len;
    hv_prescan_attr_text(sc->s, t, &off, &len);
    hv_prescan_afe_t a;
    a.serial = sc->serial;
    a.on_stack = 1;
    a.id = (uint8_t)t->id;
    a.unique = off > UINT32_MAX || len > UINT16_MAX;
    a.attr_off = a.unique ? 0 : (uint32_t)off;
    a.attr_len = a.unique ? 0 : (uint16_t)len;
    a.nattrs = (uint16_t)HV_MIN(t->nattrs, (size_t)UINT16_MAX);

    /* Noah's Ark: at most three identical entries after the last marker. gumbo compares the
     * attributes of each entry of the same tag with the new element's, each looked up among
     * the other's. */
    size_t same = 0, earliest = 0, compared = 0;
    for (size_t k = sc->nafe; k-- > 0 && sc->afe[k].id != 0;) {
        if (sc->afe[k].id == a.id)
            compared += (size_t)sc->afe[k].nattrs * a.nattrs;
        if (hv_prescan_afe_identical(sc, &sc->afe[k], &a)) {
            same++;
            earliest = k;
        }
    }
    if (hv_prescan_attr_work(sc, compared))
        return 1;
    if (same >= 3)
        hv_prescan_afe_remove(sc, earliest);
    if (sc->nafe == HV_PRESCAN_AFE_MAX)
        return hv_prescan_refuse(sc, HV_PRESCAN_FORMATTING_OPEN, HV_PRESCAN_AFE_MAX);
    sc->afe[sc->nafe++] = a;
    return 0;
}

/* A marker for the element just pushed for `t` (a cell, caption, template, applet, object or
 * marquee). A full list is reported by what `t` is. */
static int hv_prescan_afe_marker(hv_prescan_scan_t *sc, const hv_prescan_token_t *t)
{
    if (sc->nafe == HV_PRESCAN_AFE_MAX) {
        hv_prescan_verdict_t v = t->kind == K_TCELL || t->kind == K_CAPTION
                                     ? HV_PRESCAN_CELLS_NESTED
                                 : t->kind == K_TEMPLATE ? HV_PRESCAN_TEMPLATES_NESTED
                                                         : HV_PRESCAN_OBJECTS_NESTED;
        return hv_prescan_refuse(sc, v, HV_PRESCAN_AFE_MAX);
    }
    memset(&sc->afe[sc->nafe], 0, sizeof(sc->afe[0]));
    sc->nafe++;
    return 0;
}

/* Last entry for `id` after the last marker, or -1. */
static long hv_prescan_afe_find(const hv_prescan_scan_t *sc, int id)
{
    for (size_t k = sc->nafe; k-- > 0 && sc->afe[k].id != 0;)
        if (sc->afe[k].id == id)
            return (long)k;
    return -1;
}

/* Reopen the formatting elements that were closed implicitly (the spec's "reconstruct the
 * active formatting elements"): "<p><b>x</p>y" puts a new b around "y". */
static int hv_prescan_reconstruct(hv_prescan_scan_t *sc)
{
    if (sc->nafe == 0 || sc->depth >= HV_PRESCAN_STACK)
        return 0;
    size_t k = sc->nafe - 1;
    if (sc->afe[k].id == 0 || sc->afe[k].on_stack)
        return 0;
    while (k > 0 && sc->afe[k - 1].id != 0 && !sc->afe[k - 1].on_stack)
        k--;
    for (; k < sc->nafe; k++) {
        /* Each reopening is a new element in gumbo's tree: a few hundred open formatting
         * elements reopened at every word would build a tree far larger than the page. */
        if (++sc->clones > sc->len / 2 + HV_PRESCAN_CLONES_MIN)
            return hv_prescan_refuse(sc, HV_PRESCAN_FORMATTING_REOPENED,
                                     sc->len / 2 + HV_PRESCAN_CLONES_MIN);
        if (hv_prescan_attr_copies(sc, sc->afe[k].nattrs))
            return 1;
        hv_prescan_token_t t;
        memset(&t, 0, sizeof(t));
        t.id = sc->afe[k].id;
        if (hv_prescan_push(sc, &t, 0))
            return 1;
        sc->afe[k].serial = sc->serial;
        sc->afe[k].on_stack = 1;
    }
    return 0;
}

/* A fresh identity for an element the parser replaces by a clone. */
static int hv_prescan_new_serial(hv_prescan_scan_t *sc, uint32_t *serial)
{
    if (sc->serial == UINT32_MAX)
        return hv_prescan_refuse(sc, HV_PRESCAN_ELEMENTS, UINT32_MAX);
    *serial = ++sc->serial;
    return 0;
}

/*
 * The adoption agency algorithm, for an end tag of a formatting element (and a start tag of
 * a or nobr while one is open). Without a block (a special element) inside the formatting
 * element, the element simply closes. With one, the formatting element leaves the stack,
 * the block moves up to its parent, and a clone of the formatting element goes inside the
 * block around what it held; then the clone is adopted again, up to eight times. The stack
 * stays the path from the root to the current node throughout, so its height stays the
 * depth. Returns 1 if the tag is to be handled as "any other end tag".
 */
static int hv_prescan_adoption(hv_prescan_scan_t *sc, const hv_prescan_token_t *t)
{
    hv_prescan_entry_t *top = hv_prescan_top(sc);
    if (top != NULL && !hv_prescan_foreign(top) && hv_prescan_matches(sc, top, t) &&
        hv_prescan_afe_index(sc, top->serial) < 0) {
        hv_prescan_pop(sc);
        return 0;
    }
    for (int round = 0; round < 8; round++) {
        long k = hv_prescan_afe_find(sc, t->id);
        if (k < 0)
            return round == 0;
        if (!sc->afe[k].on_stack) {
            hv_prescan_afe_remove(sc, (size_t)k);
            return 0;
        }
        long pos = hv_prescan_find_serial(sc, sc->afe[k].serial);
        if (pos < 0) {
            /* Deeper than the window: leave it open. gumbo may still run the rounds left,
             * each cloning the element and up to three formatting elements above it; count
             * the attributes those clones would copy, as if each had the most. */
            size_t most = 0;
            for (size_t j = (size_t)k + 1; j < sc->nafe; j++)
                most = HV_MAX(most, (size_t)sc->afe[j].nattrs);
            hv_prescan_attr_copies(sc, (size_t)(8 - round) * (sc->afe[k].nattrs + 3 * most));
            return 0;
        }
        long block = -1;
        for (size_t j = (size_t)pos + 1; j < sc->depth; j++) {
            const hv_prescan_entry_t *e = &sc->stack[j];
            if (e->flags & E_GONE)
                continue;
            if (hv_prescan_barrier(e, S_DEFAULT))
                return 0; /* not in scope: ignored */
            if (block < 0 && hv_prescan_special(e))
                block = (long)j;
        }
        if (block < 0) {
            hv_prescan_afe_remove(sc, (size_t)k);
            hv_prescan_pop_to(sc, pos);
            return 0;
        }

        /* Rebuild the stack from `pos` up. gumbo looks at three elements below the block:
         * formatting ones stay (as clones), others leave the stack; anything further down
         * stays. Then come the block, the clone, and what was above the block. */
        hv_prescan_entry_t seg[HV_PRESCAN_WINDOW + 1];
        size_t n = 0, looked = 0;
        uint32_t serial;
        for (long j = block - 1; j > pos && looked < 3; j--) {
            hv_prescan_entry_t *e = &sc->stack[j];
            if (e->flags & E_GONE)
                continue;
            looked++;
            long a = hv_prescan_afe_index(sc, e->serial);
            if (a < 0) {
                e->flags |= E_GONE; /* dropped below */
                continue;
            }
            if (hv_prescan_new_serial(sc, &serial) ||
                hv_prescan_attr_copies(sc, sc->afe[a].nattrs))
                return 0; /* refused: the scan stops after this tag */
            e->serial = serial;
            sc->afe[a].serial = serial;
        }
        for (long j = pos + 1; j < block; j++)
            if (!(sc->stack[j].flags & E_GONE))
                seg[n++] = sc->stack[j];
        seg[n++] = sc->stack[block];
        if (hv_prescan_new_serial(sc, &serial) || hv_prescan_attr_copies(sc, sc->afe[k].nattrs))
            return 0;
        seg[n] = sc->stack[pos];
        seg[n++].serial = serial;
        sc->afe[k].serial = serial;
        for (size_t j = (size_t)block + 1; j < sc->depth; j++)
            seg[n++] = sc->stack[j];
        memcpy(&sc->stack[pos], seg, n * sizeof(seg[0]));
        sc->depth = (size_t)pos + n;
    }
    return 0;
}

/* A new li (dd, dt) closes the open one unless a special element other than address, div
 * or p lies in between (a nested list). */
static void hv_prescan_close_list_item(hv_prescan_scan_t *sc, int kind)
{
    if (sc->depth > HV_PRESCAN_STACK)
        return;
    size_t stop = hv_prescan_window_stop(sc);
    for (size_t i = sc->depth; i-- > stop;) {
        const hv_prescan_entry_t *e = &sc->stack[i];
        if (e->flags & E_GONE)
            continue;
        if (!hv_prescan_foreign(e) && hv_prescan_kind(e) == kind) {
            hv_prescan_pop_to(sc, (long)i);
            return;
        }
        if (!hv_prescan_special(e))
            continue;
        if (hv_prescan_foreign(e))
            return;
        if (!hv_prescan_is(e->id, GUMBO_TAG_ADDRESS) && !hv_prescan_is(e->id, GUMBO_TAG_DIV) &&
            !hv_prescan_is(e->id, GUMBO_TAG_P))
            return;
    }
}

/* ---- foreign content ---- */

/* 1 if the current node is an SVG/MathML element whose content is not HTML. */
static int hv_prescan_in_foreign(hv_prescan_scan_t *sc)
{
    hv_prescan_entry_t *top = hv_prescan_top(sc);
    return top != NULL && hv_prescan_foreign(top) && !(top->flags & E_IP);
}

/* Pop foreign elements until the current node is HTML or an integration point. */
static void hv_prescan_leave_foreign(hv_prescan_scan_t *sc)
{
    while (hv_prescan_in_foreign(sc))
        hv_prescan_pop(sc);
}

/* Push an SVG (`math` 0) or MathML element, working out whether it is an integration point:
 * annotation-xml is one only when its encoding says its content is HTML. */
static int hv_prescan_push_foreign(hv_prescan_scan_t *sc, const hv_prescan_token_t *t, int math)
{
    /* gumbo 0.10 works out its insertion mode from tag names alone, so an SVG or MathML
     * element named select, tr, td, template... puts it in a select or table mode inside
     * foreign content, from where it aborts on an assertion ("<table><svg><select><title>
     * <select><td>", "<math><tr><mi><template></template><svg><title><![CDATA[x]]>y").
     * Neither SVG nor MathML has such elements, so refusing costs nothing real. */
    switch (t->kind) {
    case K_SELECT:
    case K_TABLE:
    case K_TSECTION:
    case K_TROW:
    case K_TCELL:
    case K_CAPTION:
    case K_COLGROUP:
    case K_TEMPLATE:
    case K_FRAMESET:
        return hv_prescan_refuse(sc, HV_PRESCAN_KNOWN_CRASH, 0);
    default:
        if (t->flags & T_IGNORE) /* html, head, body */
            return hv_prescan_refuse(sc, HV_PRESCAN_KNOWN_CRASH, 0);
        break;
    }
    unsigned eflags = E_FOREIGN | (math ? E_MATH : 0);
    if (!math && (t->flags & T_SVG_IP))
        eflags |= E_IP;
    if (math && (t->flags & T_MATH_TEXT))
        eflags |= E_IP;
    hv_prescan_attr_t a;
    if (math && (t->flags & T_MATH_ANNOT) && hv_prescan_get_attr(sc, t, "encoding", &a) &&
        (hv_ascii_case_is(sc->s + a.value, a.value_len, "text/html") ||
         hv_ascii_case_is(sc->s + a.value, a.value_len, "application/xhtml+xml")))
        eflags |= E_IP;
    return hv_prescan_push(sc, t, eflags);
}

/* Whether a start tag in foreign content takes the parser back to HTML. */
static int hv_prescan_breaks_out(hv_prescan_scan_t *sc, const hv_prescan_token_t *t)
{
    if (t->flags & T_BREAKOUT)
        return 1;
    hv_prescan_attr_t a;
    return t->kind == K_FONT &&
           (hv_prescan_get_attr(sc, t, "color", &a) || hv_prescan_get_attr(sc, t, "face", &a) ||
            hv_prescan_get_attr(sc, t, "size", &a));
}

/* ---- tree building ---- */

/*
 * 1 if the parser is in its "in select" mode: a select is the current node, or only option
 * and optgroup lie above it. Nothing else gets inserted there, so the test is exact as long
 * as the model does not insert anything else either.
 */
static int hv_prescan_in_select(hv_prescan_scan_t *sc)
{
    int kind = hv_prescan_kind(hv_prescan_top(sc));
    if (kind != K_SELECT && kind != K_OPTION && kind != K_OPTGROUP)
        return 0;
    return hv_prescan_find_kind(sc, K_SELECT, S_SELECT) >= 0;
}

/* Whether the open select was opened in a table mode (a table part, or a template in one of
 * its table modes, is the nearest table-related element below it). */
static int hv_prescan_select_in_table(hv_prescan_scan_t *sc)
{
    long at = hv_prescan_find_kind(sc, K_SELECT, S_SELECT);
    if (at < 0)
        return 0;
    size_t stop = hv_prescan_window_stop(sc);
    for (size_t i = (size_t)at; i-- > stop;) {
        const hv_prescan_entry_t *e = &sc->stack[i];
        if ((e->flags & E_GONE) || hv_prescan_foreign(e))
            continue;
        switch (e->kind) {
        case K_TABLE:
        case K_TSECTION:
        case K_TROW:
        case K_TCELL:
        case K_CAPTION:
            return 1;
        case K_TEMPLATE:
            return hv_prescan_tmode(e) != TM_NONE && hv_prescan_tmode(e) != TM_BODY;
        default:
            break;
        }
    }
    return 0;
}

/*
 * Start tag inside a select: option and optgroup nest, select closes it, a few tags close it
 * and are then handled as usual, script and template are handled as usual, and everything
 * else is ignored, raw-text elements included. Returns -1 to go on with the usual rules.
 */
static int hv_prescan_start_in_select(hv_prescan_scan_t *sc, const hv_prescan_token_t *t)
{
    switch (t->kind) {
    case K_OPTION:
        if (hv_prescan_kind(hv_prescan_top(sc)) == K_OPTION)
            hv_prescan_pop(sc);
        return hv_prescan_push(sc, t, 0);
    case K_OPTGROUP:
        if (hv_prescan_kind(hv_prescan_top(sc)) == K_OPTION)
            hv_prescan_pop(sc);
        if (hv_prescan_kind(hv_prescan_top(sc)) == K_OPTGROUP)
            hv_prescan_pop(sc);
        return hv_prescan_push(sc, t, 0);
    case K_SELECT:
        hv_prescan_pop_to(sc, hv_prescan_find_kind(sc, K_SELECT, S_SELECT));
        return 0;
    case K_TABLE:
    case K_TSECTION:
    case K_TROW:
    case K_TCELL:
    case K_CAPTION:
        /* Only a select inside a table ("in select in table") gives way to table parts. */
        if (!hv_prescan_select_in_table(sc))
            return 0;
        hv_prescan_pop_to(sc, hv_prescan_find_kind(sc, K_SELECT, S_SELECT));
        return -1;
    default:
        break;
    }
    if (hv_prescan_is(t->id, GUMBO_TAG_INPUT) || hv_prescan_is(t->id, GUMBO_TAG_KEYGEN) ||
        hv_prescan_is(t->id, GUMBO_TAG_TEXTAREA)) {
        hv_prescan_pop_to(sc, hv_prescan_find_kind(sc, K_SELECT, S_SELECT));
        return -1;
    }
    if (hv_prescan_is(t->id, GUMBO_TAG_SCRIPT) || hv_prescan_is(t->id, GUMBO_TAG_TEMPLATE))
        return -1;
    return 0;
}

/* A table part in a template, by the template's mode (the first tag inside chose it). In a
 * table mode the stack is first cleared back to the template. Returns as
 * hv_prescan_start_table_part() does. */
static int hv_prescan_template_part(hv_prescan_scan_t *sc, long at, const hv_prescan_token_t *t)
{
    hv_prescan_entry_t *tmpl = &sc->stack[at];
    int mode = hv_prescan_tmode(tmpl);
    if (mode == TM_NONE) {
        switch (t->kind) {
        case K_TROW:
            mode = TM_TBODY;
            break;
        case K_TCELL:
            mode = TM_ROW;
            break;
        case K_TABLE:
            mode = TM_BODY;
            break;
        default:
            mode = TM_TABLE;
            break;
        }
        hv_prescan_set_tmode(tmpl, mode);
    }
    if (mode == TM_BODY || mode == TM_COLGROUP)
        return t->kind == K_TABLE ? 0 : -1;
    int takes;
    switch (mode) {
    case TM_TABLE:
        takes = t->kind != K_TABLE;
        break;
    case TM_TBODY:
        takes = t->kind == K_TROW || t->kind == K_TCELL;
        break;
    default: /* TM_ROW */
        takes = t->kind == K_TCELL;
        break;
    }
    if (!takes)
        return -1;
    hv_prescan_pop_to(sc, at + 1);
    if (t->kind == K_COL)
        return hv_prescan_push_implied(sc, GUMBO_TAG_COLGROUP) ? 1 : -1;
    if (mode == TM_TABLE && (t->kind == K_TCELL || t->kind == K_TROW) &&
        hv_prescan_push_implied(sc, GUMBO_TAG_TBODY))
        return 1;
    if (mode != TM_ROW && t->kind == K_TCELL)
        return hv_prescan_push_implied(sc, GUMBO_TAG_TR);
    return 0;
}

/*
 * Table structure: each of these closes what its place requires (a row closes the open
 * row, a cell the open cell, a section both) and gets the ancestors the parser inserts on
 * its own: a cell directly in a table gets a tbody and a tr. Outside a table the parser
 * ignores them. Returns 1 to stop, -1 if the tag is ignored, 0 to push it.
 */
static int hv_prescan_start_table_part(hv_prescan_scan_t *sc, const hv_prescan_token_t *t)
{
    for (;;) {
        int ctx;
        long at = hv_prescan_table_context(sc, &ctx);
        if (t->kind == K_TABLE && (ctx == K_TABLE || ctx == K_TSECTION || ctx == K_TROW)) {
            /* In a table (not in a cell) a table closes the open one, if it can see it. */
            long i = hv_prescan_find_kind(sc, K_TABLE, S_TABLE);
            if (i < 0)
                return -1;
            hv_prescan_pop_to(sc, i);
            continue;
        }
        switch (ctx) {
        case K_TEMPLATE:
            return hv_prescan_template_part(sc, at, t);
        case K_TCELL:
            if (t->kind == K_TABLE)
                return 0; /* a table in a cell nests */
            hv_prescan_pop_to(sc, at);
            hv_prescan_afe_clear_to_marker(sc);
            continue;
        case K_CAPTION:
            if (t->kind == K_TABLE)
                return 0;
            hv_prescan_pop_to(sc, at);
            hv_prescan_afe_clear_to_marker(sc);
            continue;
        case K_COLGROUP:
            if (t->kind == K_COL)
                return -1; /* a leaf in the open colgroup */
            hv_prescan_pop_to(sc, at);
            continue;
        case K_TROW:
            if (t->kind == K_TCELL) {
                hv_prescan_pop_to(sc, at + 1);
                return 0;
            }
            hv_prescan_pop_to(sc, at);
            continue;
        case K_TSECTION:
            if (t->kind == K_TCELL || t->kind == K_TROW) {
                hv_prescan_pop_to(sc, at + 1);
                return t->kind == K_TCELL && hv_prescan_push_implied(sc, GUMBO_TAG_TR);
            }
            hv_prescan_pop_to(sc, at);
            continue;
        case K_TABLE:
            hv_prescan_pop_to(sc, at + 1);
            if (t->kind == K_COL) /* a col directly in a table gets a colgroup */
                return hv_prescan_push_implied(sc, GUMBO_TAG_COLGROUP) ? 1 : -1;
            if (t->kind == K_TCELL || t->kind == K_TROW) {
                if (hv_prescan_push_implied(sc, GUMBO_TAG_TBODY))
                    return 1;
                if (t->kind == K_TCELL && hv_prescan_push_implied(sc, GUMBO_TAG_TR))
                    return 1;
            }
            return 0;
        default:
            return t->kind == K_TABLE ? 0 : -1;
        }
    }
}

/* Nearest HTML element called `name` in scope, or -1. */
static long hv_prescan_find_name_str(hv_prescan_scan_t *sc, GumboTag tag)
{
    hv_prescan_token_t t;
    memset(&t, 0, sizeof(t));
    t.id = hv_prescan_id_of[tag];
    return hv_prescan_find_name(sc, &t, S_DEFAULT);
}

/* The spec's "generate implied end tags" (keeping rtc if asked to). */
static void hv_prescan_close_implied(hv_prescan_scan_t *sc, int keep_rtc)
{
    for (;;) {
        hv_prescan_entry_t *top = hv_prescan_top(sc);
        int kind = hv_prescan_kind(top);
        if (kind != K_P && kind != K_LI && kind != K_DDDT && kind != K_OPTION &&
            kind != K_OPTGROUP && kind != K_RUBYTEXT)
            return;
        if (keep_rtc && hv_prescan_is(top->id, GUMBO_TAG_RTC))
            return;
        hv_prescan_pop(sc);
    }
}

/* Tags that the head keeps (inside a head noscript only the first group). */
static int hv_prescan_head_tag(const hv_prescan_token_t *t, int in_noscript)
{
    static const GumboTag noscript_ok[] = {GUMBO_TAG_BASEFONT, GUMBO_TAG_BGSOUND,
                                           GUMBO_TAG_HTML,     GUMBO_TAG_LINK,
                                           GUMBO_TAG_META,     GUMBO_TAG_NOFRAMES,
                                           GUMBO_TAG_STYLE};
    static const GumboTag head_ok[] = {GUMBO_TAG_BASE,     GUMBO_TAG_HEAD,     GUMBO_TAG_MENUITEM,
                                       GUMBO_TAG_NOSCRIPT, GUMBO_TAG_SCRIPT,   GUMBO_TAG_TEMPLATE,
                                       GUMBO_TAG_TITLE};
    for (size_t i = 0; i < HV_ARRAY_SIZE(noscript_ok); i++)
        if (hv_prescan_is(t->id, noscript_ok[i]))
            return 1;
    if (in_noscript)
        return 0;
    for (size_t i = 0; i < HV_ARRAY_SIZE(head_ok); i++)
        if (hv_prescan_is(t->id, head_ok[i]))
            return 1;
    return 0;
}

/* Body content begins: a noscript still open in the head closes first. */
static void hv_prescan_leave_head(hv_prescan_scan_t *sc)
{
    if (sc->head_noscript != 0)
        hv_prescan_pop_to(sc, hv_prescan_find_serial(sc, sc->head_noscript));
    sc->head_noscript = 0;
    sc->in_head = 0;
}

/*
 * Start tag while the parser is still in the head (and outside templates): a noscript there
 * holds only a few head tags, and anything that is not a head tag starts the body.
 * Returns -1 to go on with the body rules.
 */
static int hv_prescan_start_in_head(hv_prescan_scan_t *sc, const hv_prescan_token_t *t)
{
    int in_noscript = sc->head_noscript != 0;
    if (!hv_prescan_head_tag(t, in_noscript)) {
        hv_prescan_leave_head(sc);
        return -1;
    }
    if (hv_prescan_is(t->id, GUMBO_TAG_HEAD))
        return 0;
    if (hv_prescan_is(t->id, GUMBO_TAG_NOSCRIPT)) {
        if (in_noscript)
            return 0;
        if (hv_prescan_push(sc, t, 0))
            return 1;
        sc->head_noscript = sc->serial;
        return 0;
    }
    return -1;
}

/* <input type=hidden> leaves the chance of a frameset alone. */
static int hv_prescan_hidden_input(hv_prescan_scan_t *sc, const hv_prescan_token_t *t)
{
    hv_prescan_attr_t a;
    return hv_prescan_is(t->id, GUMBO_TAG_INPUT) && hv_prescan_get_attr(sc, t, "type", &a) &&
           hv_ascii_case_is(sc->s + a.value, a.value_len, "hidden");
}

/* Whether a start tag directly in a template makes the template's content body content:
 * anything but table parts and the tags that belong in a head does. */
static int hv_prescan_template_body(const hv_prescan_token_t *t)
{
    switch (t->kind) {
    case K_CAPTION:
    case K_COLGROUP:
    case K_TSECTION:
    case K_TROW:
    case K_TCELL:
    case K_TEMPLATE:
        return 0;
    default:
        break;
    }
    static const GumboTag head[] = {GUMBO_TAG_BASE,     GUMBO_TAG_BASEFONT, GUMBO_TAG_BGSOUND,
                                    GUMBO_TAG_COL,      GUMBO_TAG_LINK,     GUMBO_TAG_META,
                                    GUMBO_TAG_NOFRAMES, GUMBO_TAG_SCRIPT,   GUMBO_TAG_STYLE,
                                    GUMBO_TAG_TITLE};
    for (size_t i = 0; i < HV_ARRAY_SIZE(head); i++)
        if (hv_prescan_is(t->id, head[i]))
            return 0;
    return 1;
}

/* Start tag under the HTML rules; returns 1 to stop the scan. *raw is set if the content
 * that follows is text up to the matching end tag. */
static int hv_prescan_start_html(hv_prescan_scan_t *sc, const hv_prescan_token_t *t, int *raw)
{
    int r;
    if (sc->frameset_doc) {
        /* In a frameset document only framesets nest; noframes holds raw text. */
        if (t->kind == K_FRAMESET && hv_prescan_kind(hv_prescan_top(sc)) == K_FRAMESET)
            return hv_prescan_push(sc, t, 0);
        *raw = hv_prescan_is(t->id, GUMBO_TAG_NOFRAMES);
        return 0;
    }
    if (sc->in_head && sc->templates == 0) {
        r = hv_prescan_start_in_head(sc, t);
        if (r >= 0)
            return r;
    }
    if (hv_prescan_in_select(sc)) {
        r = hv_prescan_start_in_select(sc, t);
        if (r >= 0)
            return r;
    }
    hv_prescan_entry_t *top = hv_prescan_top(sc);
    if (hv_prescan_kind(top) == K_TEMPLATE) {
        if (hv_prescan_tmode(top) == TM_NONE && hv_prescan_is(t->id, GUMBO_TAG_COL))
            hv_prescan_set_tmode(top, TM_COLGROUP);
        else if (hv_prescan_tmode(top) == TM_NONE && hv_prescan_template_body(t))
            hv_prescan_set_tmode(top, TM_BODY);
        /* A template that began with <col> takes only col and template: the rest,
         * raw-text elements included, is ignored. */
        if (hv_prescan_tmode(top) == TM_COLGROUP && t->kind != K_TEMPLATE)
            return 0;
    }
    if ((t->flags & T_NOFS) && !hv_prescan_hidden_input(sc, t))
        sc->frameset_ok = 0;
    if (t->kind == K_FRAMESET) {
        /* Accepted only before body content: then it replaces the body. */
        if (!sc->frameset_ok || sc->templates > 0)
            return 0;
        hv_prescan_pop_to(sc, 0);
        sc->frameset_doc = 1;
        return hv_prescan_push(sc, t, 0);
    }
    /* In an open colgroup anything but col and template closes it. */
    if (hv_prescan_kind(hv_prescan_top(sc)) == K_COLGROUP && t->kind != K_COL &&
        t->kind != K_TEMPLATE && !hv_prescan_is(t->id, GUMBO_TAG_HTML))
        hv_prescan_pop(sc);
    if (t->flags & T_IGNORE)
        return 0;
    /* One form at a time: until </form>, even a form closed implicitly blocks the next
     * (except inside a template). */
    if (t->kind == K_FORM) {
        if (sc->form_pointer && sc->templates == 0)
            return 0;
        sc->form_pointer = 1;
    }
    /* li, dd and dt close an open list item first, then an open p. */
    if (t->kind == K_LI || t->kind == K_DDDT)
        hv_prescan_close_list_item(sc, t->kind);
    if (t->flags & T_CLOSES_P)
        hv_prescan_pop_to(sc, hv_prescan_find_kind(sc, K_P, S_BUTTON));

    int top_kind = hv_prescan_kind(hv_prescan_top(sc));
    switch (t->kind) {
    case K_HEADING:
        if (top_kind == K_HEADING)
            hv_prescan_pop(sc);
        break;
    case K_A:
        if (hv_prescan_afe_find(sc, t->id) >= 0)
            hv_prescan_adoption(sc, t);
        break;
    case K_NOBR:
        if (hv_prescan_reconstruct(sc))
            return 1;
        if (hv_prescan_find_kind(sc, K_NOBR, S_DEFAULT) >= 0)
            hv_prescan_adoption(sc, t);
        break;
    case K_BUTTON:
        hv_prescan_pop_to(sc, hv_prescan_find_kind(sc, K_BUTTON, S_DEFAULT));
        break;
    case K_OPTION:
        if (top_kind == K_OPTION)
            hv_prescan_pop(sc);
        break;
    case K_OPTGROUP:
        if (top_kind == K_OPTION)
            hv_prescan_pop(sc);
        break;
    case K_TABLE:
    case K_TSECTION:
    case K_TROW:
    case K_TCELL:
    case K_CAPTION:
    case K_COL:
    case K_COLGROUP:
        r = hv_prescan_start_table_part(sc, t);
        if (r != 0)
            return r > 0;
        break;
    case K_RUBYTEXT:
        /* Inside a ruby these close what has an implied end tag (p, li, dd, option...). */
        if (hv_prescan_find_name_str(sc, GUMBO_TAG_RUBY) >= 0)
            hv_prescan_close_implied(sc, hv_prescan_is(t->id, GUMBO_TAG_RT) ||
                                             hv_prescan_is(t->id, GUMBO_TAG_RP));
        break;
    case K_PLAINTEXT:
        /* Everything after <plaintext> is text. */
        hv_prescan_push(sc, t, 0);
        return 1;
    default:
        break;
    }

    /* Most start tags reopen formatting elements first; ruby text does not in gumbo. */
    if ((!(t->flags & T_SPECIAL) || (t->flags & T_RECON)) && t->kind != K_RUBYTEXT &&
        hv_prescan_reconstruct(sc))
        return 1;
    if (t->kind == K_SVG || t->kind == K_MATH)
        return t->self_closing ? 0 : hv_prescan_push_foreign(sc, t, t->kind == K_MATH);
    if (t->flags & T_RAW) {
        *raw = 1;
        return 0;
    }
    if (t->flags & T_VOID)
        return 0;
    if (hv_prescan_push(sc, t, 0))
        return 1;
    if (t->flags & T_FORMAT)
        return hv_prescan_afe_add(sc, t);
    if (t->flags & T_MARKER)
        return hv_prescan_afe_marker(sc, t);
    return 0;
}

/* End tag inside a select: only option, optgroup, select, template and, in a table, the
 * table parts (which close the select first) do anything. Returns -1 to go on as usual. */
static int hv_prescan_end_in_select(hv_prescan_scan_t *sc, const hv_prescan_token_t *t)
{
    switch (t->kind) {
    case K_OPTION:
        if (hv_prescan_kind(hv_prescan_top(sc)) == K_OPTION)
            hv_prescan_pop(sc);
        return 0;
    case K_OPTGROUP:
        if (hv_prescan_kind(hv_prescan_top(sc)) == K_OPTION && sc->depth >= 2 &&
            hv_prescan_kind(&sc->stack[sc->depth - 2]) == K_OPTGROUP)
            hv_prescan_pop(sc);
        if (hv_prescan_kind(hv_prescan_top(sc)) == K_OPTGROUP)
            hv_prescan_pop(sc);
        return 0;
    case K_SELECT:
        hv_prescan_pop_to(sc, hv_prescan_find_kind(sc, K_SELECT, S_SELECT));
        return 0;
    case K_TABLE:
    case K_TSECTION:
    case K_TROW:
    case K_TCELL:
    case K_CAPTION:
        if (hv_prescan_find_name(sc, t, S_TABLE) < 0)
            return 0;
        hv_prescan_pop_to(sc, hv_prescan_find_kind(sc, K_SELECT, S_SELECT));
        return -1;
    case K_TEMPLATE:
        return -1;
    default:
        return 0;
    }
}

/* End tag under the HTML rules; returns 1 to stop the scan. */
static int hv_prescan_end_html(hv_prescan_scan_t *sc, const hv_prescan_token_t *t)
{
    if (t->kind == K_BR)
        return hv_prescan_reconstruct(sc); /* </br> is taken as <br> (frameset still ok) */
    if (t->flags & (T_IGNORE | T_VOID))
        return 0;
    if (sc->depth > HV_PRESCAN_STACK) {
        sc->depth--;
        return 0;
    }
    if (hv_prescan_in_select(sc) && hv_prescan_end_in_select(sc, t) >= 0)
        return 0;
    switch (t->kind) {
    case K_P:
        hv_prescan_pop_to(sc, hv_prescan_find_kind(sc, K_P, S_BUTTON));
        return 0;
    case K_LI:
        hv_prescan_pop_to(sc, hv_prescan_find_kind(sc, K_LI, S_LIST));
        return 0;
    case K_DDDT:
        hv_prescan_pop_to(sc, hv_prescan_find_name(sc, t, S_DEFAULT));
        return 0;
    case K_HEADING:
        hv_prescan_pop_to(sc, hv_prescan_find_kind(sc, K_HEADING, S_DEFAULT));
        return 0;
    case K_FORM:
        /* </form> takes the form out of the stack but leaves what is open inside it. */
        sc->form_pointer = 0;
        hv_prescan_remove_at(sc, hv_prescan_find_kind(sc, K_FORM, S_DEFAULT));
        return 0;
    case K_TABLE:
    case K_TSECTION:
    case K_TROW:
    case K_TCELL:
    case K_CAPTION: {
        long i = hv_prescan_find_name(sc, t, S_TABLE);
        if (i < 0)
            return 0;
        /* Leaving a cell or caption this way closes it properly. */
        int ctx;
        hv_prescan_table_context(sc, &ctx);
        hv_prescan_pop_to(sc, i);
        if (ctx == K_TCELL || ctx == K_CAPTION)
            hv_prescan_afe_clear_to_marker(sc);
        return 0;
    }
    case K_COLGROUP:
        if (hv_prescan_kind(hv_prescan_top(sc)) == K_COLGROUP)
            hv_prescan_pop(sc);
        return 0;
    case K_TEMPLATE: {
        /* </template> closes the nearest template whatever lies in between. */
        size_t stop = hv_prescan_window_stop(sc);
        for (size_t j = sc->depth; j-- > stop;) {
            if (!(sc->stack[j].flags & E_GONE) && sc->stack[j].kind == K_TEMPLATE) {
                hv_prescan_pop_to(sc, (long)j);
                hv_prescan_afe_clear_to_marker(sc);
                break;
            }
        }
        return 0;
    }
    default:
        break;
    }
    if ((t->flags & T_FORMAT) && hv_prescan_adoption(sc, t) == 0)
        return 0;
    if (t->flags & T_END_SCOPE) {
        long i = hv_prescan_find_name(sc, t, S_DEFAULT);
        hv_prescan_pop_to(sc, i);
        if (i >= 0 && (t->flags & T_MARKER)) /* applet, marquee, object, template */
            hv_prescan_afe_clear_to_marker(sc);
        return 0;
    }
    /* Any other end tag closes the nearest element of its name, unless a special element
     * comes first; then it is ignored. */
    size_t stop = hv_prescan_window_stop(sc);
    for (size_t j = sc->depth; j-- > stop;) {
        const hv_prescan_entry_t *e = &sc->stack[j];
        if (e->flags & E_GONE)
            continue;
        if (!hv_prescan_foreign(e) && hv_prescan_matches(sc, e, t)) {
            hv_prescan_pop_to(sc, (long)j);
            return 0;
        }
        if (hv_prescan_special(e))
            return 0;
    }
    return 0;
}

static int hv_prescan_start_tag(hv_prescan_scan_t *sc, const hv_prescan_token_t *t, int *raw)
{
    *raw = 0;
    if (sc->depth >= HV_PRESCAN_STACK) {
        /* Untracked depth: count, and honour only what needs no stack. */
        *raw = (t->flags & T_RAW) != 0;
        if (t->flags & (T_VOID | T_IGNORE | T_RAW))
            return 0;
        return hv_prescan_push(sc, t, 0);
    }
    hv_prescan_entry_t *top = hv_prescan_top(sc);
    if (top != NULL && hv_prescan_foreign(top)) {
        int math = (top->flags & E_MATH) != 0;
        int html;
        if (top->flags & E_IP) /* a MathML text integration point keeps mglyph foreign */
            html = !(math && (hv_prescan_tag_flags(top->id) & T_MATH_TEXT) && t->kind == K_MGLYPH);
        else
            html = math && hv_prescan_is(top->id, GUMBO_TAG_ANNOTATION_XML) && t->kind == K_SVG;
        if (!html) {
            if (!hv_prescan_breaks_out(sc, t)) {
                /* In SVG and MathML "/>" does close, and raw-text rules do not apply. */
                if (t->self_closing)
                    return 0;
                return hv_prescan_push_foreign(sc, t, math);
            }
            hv_prescan_leave_foreign(sc);
        }
    }
    return hv_prescan_start_html(sc, t, raw);
}

static int hv_prescan_end_tag(hv_prescan_scan_t *sc, const hv_prescan_token_t *t)
{
    if (sc->frameset_doc) {
        if (t->kind == K_FRAMESET && hv_prescan_kind(hv_prescan_top(sc)) == K_FRAMESET)
            hv_prescan_pop(sc);
        return 0;
    }
    if (sc->in_head && sc->templates == 0) {
        /* In the head most end tags are ignored; </br>, </body> and </html> start the
         * body (the last two then do nothing more). */
        if (sc->head_noscript != 0 && hv_prescan_is(t->id, GUMBO_TAG_NOSCRIPT)) {
            hv_prescan_pop_to(sc, hv_prescan_find_serial(sc, sc->head_noscript));
            sc->head_noscript = 0;
            return 0;
        }
        if (hv_prescan_is(t->id, GUMBO_TAG_HEAD) && sc->head_noscript == 0) {
            sc->in_head = 0;
            return 0;
        }
        if (t->kind != K_BR && (sc->head_noscript != 0 || (!hv_prescan_is(t->id, GUMBO_TAG_BODY) &&
                                                           !hv_prescan_is(t->id, GUMBO_TAG_HTML))))
            return 0;
        hv_prescan_leave_head(sc);
    }
    hv_prescan_entry_t *top = hv_prescan_top(sc);
    if (top == NULL || !hv_prescan_foreign(top))
        return hv_prescan_end_html(sc, t);
    /* Foreign content: an end tag closes the nearest foreign element of its name, or is
     * handled as in HTML once an HTML element is reached. (Newer parsers leave foreign
     * content on </p> and </br>; gumbo 0.10 does not.) */
    size_t stop = hv_prescan_window_stop(sc);
    for (size_t j = sc->depth; j-- > stop;) {
        const hv_prescan_entry_t *e = &sc->stack[j];
        if (e->flags & E_GONE)
            continue;
        if (!hv_prescan_foreign(e))
            return hv_prescan_end_html(sc, t);
        if (hv_prescan_matches(sc, e, t)) {
            hv_prescan_pop_to(sc, (long)j);
            return 0;
        }
    }
    return 0;
}

/* (In an integration point directly in a table, gumbo 0.10 mixes up a CDATA section with
 * its pending table text and aborts on an assertion: "<table><svg><desc><![CDATA[ ]]> ".)
 * Whether a CDATA section here would hit gumbo 0.10's table-text assertion: the nearest
 * SVG/MathML element is an integration point and the parser is in a table mode (not in a
 * cell or caption, where text is ordinary). HTML elements above it are looked through, in
 * case gumbo has already closed one that the model keeps. */
static int hv_prescan_cdata_crashes(hv_prescan_scan_t *sc)
{
    if (sc->depth > HV_PRESCAN_STACK)
        return 0;
    size_t stop = hv_prescan_window_stop(sc);
    const hv_prescan_entry_t *nearest = NULL;
    for (size_t j = sc->depth; j-- > stop;) {
        if (hv_prescan_foreign(&sc->stack[j])) {
            nearest = &sc->stack[j];
            break;
        }
    }
    if (nearest == NULL || !(nearest->flags & E_IP))
        return 0;
    int ctx;
    hv_prescan_table_context(sc, &ctx);
    return ctx == K_TABLE || ctx == K_TSECTION || ctx == K_TROW || ctx == K_TEMPLATE ||
           ctx == K_COLGROUP;
}

/* Text [from, to) reopens formatting elements, as in "<p><b>x</p>y", and text other than
 * whitespace rules out a frameset. */
static int hv_prescan_text(hv_prescan_scan_t *sc, size_t from, size_t to)
{
    if (sc->frameset_doc)
        return 0;
    int colgroup = hv_prescan_kind(hv_prescan_top(sc)) == K_COLGROUP;
    for (size_t i = from; i < to && (sc->frameset_ok || sc->in_head || colgroup); i++) {
        if (!hv_ascii_is_space((unsigned char)sc->s[i])) {
            sc->frameset_ok = 0;
            if (sc->in_head && sc->templates == 0)
                hv_prescan_leave_head(sc);
            if (colgroup) /* text closes an open colgroup, as any tag but col does */
                hv_prescan_pop(sc);
            break;
        }
    }
    if (hv_prescan_in_foreign(sc) || hv_prescan_in_select(sc))
        return 0;
    return hv_prescan_reconstruct(sc);
}

void hv_prescan_check(const char *s, size_t len, size_t limit, hv_prescan_result_t *out)
{
    /* About 70 KiB: fine on any thread stack, and no allocation to fail. */
    hv_prescan_scan_t sc;
    pthread_once(&hv_prescan_ids_once, hv_prescan_build_ids);
    sc.s = s;
    sc.len = len;
    sc.limit = limit;
    sc.depth = 0;
    sc.max = 0;
    sc.verdict = HV_PRESCAN_OK;
    sc.bound = 0;
    sc.frameset_ok = 1;
    sc.frameset_doc = 0;
    sc.templates = 0;
    sc.form_pointer = 0;
    sc.in_head = 1;
    sc.head_noscript = 0;
    sc.clones = 0;
    sc.work = 0;
    sc.attr_work = 0;
    sc.attr_copies = 0;
    sc.html_attrs = 0;
    sc.body_attrs = 0;
    sc.serial = 0;
    sc.nafe = 0;

    size_t i = 0;
    while (i < len) {
        const char *lt = memchr(s + i, '<', len - i);
        if (lt == NULL) {
            hv_prescan_text(&sc, i, len);
            break;
        }
        if (lt > s + i && hv_prescan_text(&sc, i, (size_t)(lt - s)))
            break;
        i = (size_t)(lt - s);
        if (i + 1 >= len) {
            hv_prescan_text(&sc, i, len);
            break;
        }
        unsigned char c = (unsigned char)s[i + 1];
        hv_prescan_token_t t;
        int stop = 0;

        if (c == '!') {
            hv_prescan_entry_t *top = hv_prescan_top(&sc);
            if (i + 3 < len && s[i + 2] == '-' && s[i + 3] == '-') {
                i = hv_prescan_skip_comment(s, len, i + 4);
            } else if (len - i >= 9 && memcmp(s + i + 2, "[CDATA[", 7) == 0 &&
                       hv_prescan_cdata_crashes(&sc)) {
                hv_prescan_refuse(&sc, HV_PRESCAN_KNOWN_CRASH, 0);
                break;
            } else if (top != NULL && hv_prescan_foreign(top) && len - i >= 9 &&
                       memcmp(s + i + 2, "[CDATA[", 7) == 0) {
                /* CDATA sections exist only in foreign content; elsewhere they are bogus
                 * comments. */
                const char *end = memmem(s + i + 9, len - i - 9, "]]>", 3);
                i = end != NULL ? (size_t)(end - s) + 3 : len;
            } else {
                /* Doctype and bogus comments end at the first '>'. */
                i = hv_prescan_skip_to_gt(s, len, i + 2);
            }
        } else if (c == '?') {
            i = hv_prescan_skip_to_gt(s, len, i + 2);
        } else if (c == '/') {
            if (i + 2 >= len) {
                hv_prescan_text(&sc, i, len);
                break;
            }
            unsigned char d = (unsigned char)s[i + 2];
            if (hv_ascii_is_alpha(d)) {
                size_t next = hv_prescan_read_tag(s, len, i + 2, &t);
                if (hv_prescan_tag_attrs(&sc, t.nattrs) || next == HV_PRESCAN_EOF)
                    break;
                stop = hv_prescan_end_tag(&sc, &t);
                i = next;
            } else if (d == '>') {
                i += 3;
            } else {
                i = hv_prescan_skip_to_gt(s, len, i + 2);
            }
        } else if (hv_ascii_is_alpha(c)) {
            size_t next = hv_prescan_read_tag(s, len, i + 1, &t);
            if (hv_prescan_tag_attrs(&sc, t.nattrs) || next == HV_PRESCAN_EOF)
                break;
            if ((t.flags & T_IGNORE) && !hv_prescan_is(t.id, GUMBO_TAG_HEAD) &&
                hv_prescan_merge_attrs(&sc,
                                       hv_prescan_is(t.id, GUMBO_TAG_HTML) ? &sc.html_attrs
                                                                         : &sc.body_attrs,
                                       t.nattrs))
                break;
            int raw;
            stop = hv_prescan_start_tag(&sc, &t, &raw);
            i = next;
            size_t end_attrs = 0;
            if (raw && hv_prescan_is(t.id, GUMBO_TAG_SCRIPT))
                i = hv_prescan_skip_script(s, len, i, &end_attrs);
            else if (raw)
                i = hv_prescan_skip_raw(s, len, i, hv_prescan_tags[t.id - 1].name, &end_attrs);
            if (end_attrs > 0 && hv_prescan_tag_attrs(&sc, end_attrs))
                break;
        } else {
            /* A '<' that starts no tag is text. */
            stop = hv_prescan_text(&sc, i, i + 1);
            i++;
        }
        if (stop || sc.verdict != HV_PRESCAN_OK)
            break;
        sc.work += sc.depth;
        if (sc.work > HV_PRESCAN_WORK_MAX) {
            hv_prescan_refuse(&sc, HV_PRESCAN_DEPTH_SUM, HV_PRESCAN_WORK_MAX);
            break;
        }
    }
    if (sc.verdict == HV_PRESCAN_OK && sc.max > limit)
        hv_prescan_refuse(&sc, HV_PRESCAN_TOO_DEEP, limit);
    out->verdict = sc.verdict;
    out->bound = sc.bound;
    if (sc.verdict == HV_PRESCAN_OK)
        out->depth = sc.max;
    else
        out->depth = limit == SIZE_MAX ? limit : limit + 1;
}

size_t hv_prescan_depth(const char *s, size_t len, size_t limit)
{
    hv_prescan_result_t r;
    hv_prescan_check(s, len, limit, &r);
    return r.depth;
}
