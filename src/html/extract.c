/*
 * extract.c: rule sets and their evaluation into the record's "fields" object.
 *
 * A rule is one of: first match, all matches, a scoped list (item selector plus fields), or
 * the built-in links list. Evaluation builds a cJSON tree on the worker and prints it; the
 * record carries the printed object.
 */
#include "harvestd/extract.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <uriparser/Uri.h>
#include <uv.h>

#include "harvestd/common.h"
#include "harvestd/select.h"
#include "harvestd/url.h"

#define MAX_RULES 64
#define MAX_FIELDS 32
#define NAME_MAX_LEN 64

typedef enum { R_FIRST, R_ALL, R_SCOPED, R_LINKS } rule_kind_t;

typedef struct {
    char name[NAME_MAX_LEN];
    hv_selector_t *sel;
} field_t;

typedef struct {
    char name[NAME_MAX_LEN];
    rule_kind_t kind;
    hv_selector_t *sel;        /* R_FIRST, R_ALL; the item selector for R_SCOPED */
    field_t fields[MAX_FIELDS];
    unsigned nfields;
} rule_t;

struct hv_ruleset_s {
    char *name;
    rule_t rules[MAX_RULES];
    unsigned nrules;
    uint64_t fp;  /* FNV-1a over the rules as added (hv_ruleset_fingerprint) */
};

hv_ruleset_t *hv_ruleset_new(const char *name)
{
    hv_ruleset_t *rs = hv_xcalloc(1, sizeof(*rs));
    rs->name = hv_xstrdup(name != NULL ? name : "");
    rs->fp = HV_RULESET_FP_BASIS;
    return rs;
}

const char *hv_ruleset_name(const hv_ruleset_t *rs)
{
    return rs->name;
}

int hv_ruleset_empty(const hv_ruleset_t *rs)
{
    return rs == NULL || rs->nrules == 0;
}

static int valid_name(const char *s, size_t n)
{
    if (n == 0 || n >= NAME_MAX_LEN)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!(hv_ascii_is_alpha(c) || hv_ascii_is_digit(c) || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

static rule_t *find_rule(hv_ruleset_t *rs, const char *name, size_t n)
{
    for (unsigned i = 0; i < rs->nrules; i++)
        if (strlen(rs->rules[i].name) == n && strncmp(rs->rules[i].name, name, n) == 0)
            return &rs->rules[i];
    return NULL;
}

static rule_t *new_rule(hv_ruleset_t *rs, const char *name, size_t n, rule_kind_t kind,
                        char *err, size_t errcap)
{
    if (rs->nrules == MAX_RULES) {
        snprintf(err, errcap, "too many rules (at most %d)", MAX_RULES);
        return NULL;
    }
    rule_t *r = &rs->rules[rs->nrules++];
    memset(r, 0, sizeof(*r));
    memcpy(r->name, name, n);
    r->kind = kind;
    return r;
}

static int add_rule(hv_ruleset_t *rs, const char *key, const char *value, char *err,
                    size_t errcap);

/* What the rules are, in order (their order is the order of the fields). */
static void fold(uint64_t *h, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        *h ^= (unsigned char)s[i];
        *h *= UINT64_C(1099511628211);
    }
}

int hv_ruleset_add(hv_ruleset_t *rs, const char *key, const char *value, char *err,
                   size_t errcap)
{
    int rc = add_rule(rs, key, value, err, errcap);
    if (rc == 0) {
        fold(&rs->fp, key, strlen(key) + 1);
        fold(&rs->fp, value, strlen(value) + 1);
    }
    return rc;
}

uint64_t hv_ruleset_fingerprint(const hv_ruleset_t *rs)
{
    return rs != NULL && rs->nrules > 0 ? rs->fp : HV_RULESET_FP_TITLE;
}

static int add_rule(hv_ruleset_t *rs, const char *key, const char *value, char *err,
                    size_t errcap)
{
    size_t klen = strlen(key);
    const char *dot = strchr(key, '.');
    int all = klen > 2 && strcmp(key + klen - 2, "[]") == 0;
    size_t nlen = dot != NULL ? (size_t)(dot - key) : all ? klen - 2 : klen;
    char selerr[256];

    if (!valid_name(key, nlen) || (dot != NULL && all)) {
        snprintf(err, errcap, "'%s' is not a field name (letters, digits, '_', '-'; NAME[] for "
                              "every match, NAME.item and NAME.FIELD for a list of objects)",
                 key);
        return UV_EINVAL;
    }
    if (dot == NULL && find_rule(rs, key, nlen) != NULL) {
        snprintf(err, errcap, "field '%.*s' is defined twice", (int)nlen, key);
        return UV_EINVAL;
    }
    if (dot == NULL && strcmp(value, "@links") == 0)
        return new_rule(rs, key, nlen, R_LINKS, err, errcap) != NULL ? 0 : UV_EINVAL;

    hv_selector_t *sel = hv_selector_compile(value, selerr, sizeof(selerr));
    if (sel == NULL) {
        snprintf(err, errcap, "%s: selector '%s': %s", key, value, selerr);
        return UV_EINVAL;
    }
    if (dot == NULL) {
        rule_t *r = new_rule(rs, key, nlen, all ? R_ALL : R_FIRST, err, errcap);
        if (r == NULL) {
            hv_selector_free(sel);
            return UV_EINVAL;
        }
        r->sel = sel;
        return 0;
    }
    /* NAME.item or NAME.FIELD */
    const char *sub = dot + 1;
    rule_t *r = find_rule(rs, key, nlen);
    if (r != NULL && r->kind != R_SCOPED) {
        snprintf(err, errcap, "'%.*s' is both a field and a list of items", (int)nlen, key);
        hv_selector_free(sel);
        return UV_EINVAL;
    }
    if (r == NULL && (r = new_rule(rs, key, nlen, R_SCOPED, err, errcap)) == NULL) {
        hv_selector_free(sel);
        return UV_EINVAL;
    }
    if (strcmp(sub, "item") == 0) {
        if (r->sel != NULL) {
            snprintf(err, errcap, "'%.*s.item' is defined twice", (int)nlen, key);
            hv_selector_free(sel);
            return UV_EINVAL;
        }
        r->sel = sel;
        return 0;
    }
    if (!valid_name(sub, strlen(sub)) || r->nfields == MAX_FIELDS) {
        snprintf(err, errcap, "'%s': bad field name or too many fields (at most %d)", key,
                 MAX_FIELDS);
        hv_selector_free(sel);
        return UV_EINVAL;
    }
    field_t *f = &r->fields[r->nfields++];
    snprintf(f->name, sizeof(f->name), "%s", sub);
    f->sel = sel;
    return 0;
}

int hv_ruleset_finish(hv_ruleset_t *rs, char *err, size_t errcap)
{
    for (unsigned i = 0; i < rs->nrules; i++) {
        const rule_t *r = &rs->rules[i];
        if (r->kind == R_SCOPED && (r->sel == NULL || r->nfields == 0)) {
            snprintf(err, errcap, "'%s' needs both %s.item and at least one %s.FIELD", r->name,
                     r->name, r->name);
            return UV_EINVAL;
        }
    }
    return 0;
}

void hv_ruleset_free(hv_ruleset_t *rs)
{
    if (rs == NULL)
        return;
    for (unsigned i = 0; i < rs->nrules; i++) {
        hv_selector_free(rs->rules[i].sel);
        for (unsigned j = 0; j < rs->rules[i].nfields; j++)
            hv_selector_free(rs->rules[i].fields[j].sel);
    }
    free(rs->name);
    free(rs);
}

/* ---- evaluation ---- */

/*
 * One evaluation: the page, and the bytes of JSON the fields have taken so far. Each value is
 * charged as cJSON will print it before it is added, so evaluation stops at the first value
 * that would pass HV_EXTRACT_FIELDS_MAX, having built no more than that.
 */
typedef struct {
    const char *src;
    size_t len;
    size_t used;
    int over;
} eval_t;

/* Charge `n` bytes of output; 1 once the budget is gone. */
static int charge(eval_t *e, size_t n)
{
    e->used += n;
    if (e->used > HV_EXTRACT_FIELDS_MAX)
        e->over = 1;
    return e->over;
}

/* Bytes cJSON prints for the string `s`: quotes, two for '"', '\\' and \b \f \n \r \t, six
 * (\u00XX) for the other control characters, one for everything else. */
static size_t json_string_len(const char *s)
{
    size_t n = 2;
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
        if (*p == '"' || *p == '\\' || *p == '\b' || *p == '\f' || *p == '\n' || *p == '\r' ||
            *p == '\t')
            n += 2;
        else if (*p < 0x20)
            n += 6;
        else
            n += 1;
    }
    return n;
}

/* A member "name": and the comma after it. */
static int charge_key(eval_t *e, const char *name)
{
    return charge(e, strlen(name) + 4);
}

/* A string of the fields, charged; NULL (and `v` freed) once over the budget. */
static cJSON *string_of(eval_t *e, char *v)
{
    if (charge(e, json_string_len(v) + 1)) {
        free(v);
        return NULL;
    }
    cJSON *j = cJSON_CreateString(v);
    free(v);
    return j;
}

static cJSON *value_of(eval_t *e, const hv_selector_t *sel, const GumboNode *node)
{
    int cut;
    char *v = hv_selector_value_max(sel, node, e->src, e->len, HV_EXTRACT_VALUE_MAX, &cut);
    if (v == NULL)
        return charge(e, 5) ? NULL : cJSON_CreateNull();
    if (cut) {
        size_t n = strlen(v);
        v = hv_xrealloc(v, n + sizeof(HV_EXTRACT_CUT_MARK));
        memcpy(v + n, HV_EXTRACT_CUT_MARK, sizeof(HV_EXTRACT_CUT_MARK));
    }
    return string_of(e, v);
}

static cJSON *first_match(eval_t *e, const hv_selector_t *sel, const GumboNode *scope)
{
    const GumboNode *node = NULL;
    if (hv_selector_match(sel, scope, &node, 1, 1) == 0)
        return charge(e, 5) ? NULL : cJSON_CreateNull();
    return value_of(e, sel, node);
}

static const GumboNode **matches(const hv_selector_t *sel, const GumboNode *scope, size_t *n)
{
    size_t cap = 64;
    const GumboNode **v = hv_xmalloc(cap * sizeof(*v));
    size_t found = hv_selector_match(sel, scope, v, cap, HV_EXTRACT_MAX_MATCHES);
    if (found > cap) {
        free(v);
        cap = found;
        v = hv_xmalloc(cap * sizeof(*v));
        found = hv_selector_match(sel, scope, v, cap, HV_EXTRACT_MAX_MATCHES);
    }
    *n = HV_MIN(found, cap);
    return v;
}

/* <base href> (the first one with an href), resolved against the page URL. */
static char *base_of(const GumboNode *root, const char *page_url)
{
    char sel_err[128];
    hv_selector_t *sel = hv_selector_compile("base[href] @href", sel_err, sizeof(sel_err));
    char *base = NULL;
    if (sel != NULL) {
        const GumboNode *node = NULL;
        if (hv_selector_match(sel, root, &node, 1, 1) > 0)
            base = hv_selector_value(sel, node, NULL, 0);
        hv_selector_free(sel);
    }
    if (base == NULL)
        return hv_xstrdup(page_url);
    hv_url_t page, resolved;
    const char *reason;
    char *out = NULL;
    if (hv_url_parse(&page, page_url, strlen(page_url), &reason) == 0) {
        if (hv_url_resolve(&resolved, &page, base, strlen(base), &reason) == 0) {
            out = hv_xstrdup(resolved.href);
            hv_url_free(&resolved);
        }
        hv_url_free(&page);
    }
    free(base);
    return out != NULL ? out : hv_xstrdup(page_url);
}

static cJSON *links(eval_t *e, const GumboNode *root, const char *page_url)
{
    cJSON *list = cJSON_CreateArray();
    char err[128];
    if (page_url == NULL)
        return list;
    char *base_text = base_of(root, page_url);
    hv_url_t base;
    const char *reason;
    if (hv_url_parse(&base, base_text, strlen(base_text), &reason) != 0) {
        free(base_text);
        return list;
    }
    hv_selector_t *sel = hv_selector_compile("a[href] @href", err, sizeof(err));
    size_t n = 0;
    const GumboNode **v = matches(sel, root, &n);
    for (size_t i = 0; i < n && !e->over; i++) {
        char *href = hv_selector_value(sel, v[i], NULL, 0);
        hv_url_t u;
        /* Only links we could fetch: http(s) URLs that resolve (mailto:, javascript: and
         * malformed ones are left out). */
        if (href != NULL && hv_url_resolve(&u, &base, href, strlen(href), &reason) == 0) {
            cJSON *link = string_of(e, hv_xstrdup(u.href));
            if (link != NULL)
                cJSON_AddItemToArray(list, link);
            hv_url_free(&u);
        }
        free(href);
    }
    free(v);
    hv_selector_free(sel);
    hv_url_free(&base);
    free(base_text);
    return list;
}

/* Every match of `r`, as a list of strings. */
static cJSON *all_matches(eval_t *e, const rule_t *r, const GumboNode *root)
{
    size_t n;
    const GumboNode **v = matches(r->sel, root, &n);
    cJSON *list = cJSON_CreateArray();
    for (size_t k = 0; k < n; k++) {
        cJSON *one = value_of(e, r->sel, v[k]);
        if (one == NULL)
            break;
        cJSON_AddItemToArray(list, one);
    }
    free(v);
    return list;
}

/* Each item of `r`, as a list of objects of its fields. */
static cJSON *scoped(eval_t *e, const rule_t *r, const GumboNode *root)
{
    size_t n;
    const GumboNode **items = matches(r->sel, root, &n);
    cJSON *list = cJSON_CreateArray();
    for (size_t k = 0; k < n && !charge(e, 3); k++) {
        cJSON *item = cJSON_CreateObject();
        cJSON_AddItemToArray(list, item);
        for (unsigned f = 0; f < r->nfields; f++) {
            if (charge_key(e, r->fields[f].name))
                break;
            cJSON *field = first_match(e, r->fields[f].sel, items[k]);
            if (field == NULL)
                break;
            cJSON_AddItemToObject(item, r->fields[f].name, field);
        }
    }
    free(items);
    return list;
}

int hv_ruleset_eval(const hv_ruleset_t *rs, const GumboNode *root, const char *src, size_t len,
                    const char *base_url, char **out)
{
    eval_t e = {.src = src, .len = len, .used = 2, .over = 0};
    cJSON *obj = cJSON_CreateObject();
    *out = NULL;
    for (unsigned i = 0; i < rs->nrules && !charge_key(&e, rs->rules[i].name); i++) {
        const rule_t *r = &rs->rules[i];
        cJSON *val = NULL;
        switch (r->kind) {
        case R_FIRST:
            val = first_match(&e, r->sel, root);
            break;
        case R_ALL:
            val = all_matches(&e, r, root);
            break;
        case R_SCOPED:
            val = scoped(&e, r, root);
            break;
        case R_LINKS:
            val = links(&e, root, base_url);
            break;
        }
        if (val != NULL)
            cJSON_AddItemToObject(obj, r->name, val);
        /* A list's brackets (its members charged their own commas). */
        if (e.over || (r->kind != R_FIRST && charge(&e, 2)))
            break;
    }
    char *text = e.over ? NULL : cJSON_PrintUnformatted(obj);
    cJSON_Delete(obj);
    if (e.over)
        return HV_ETOOBIG;
    if (text == NULL) {
        /* cJSON reports allocation failure with NULL; like hv_xmalloc we do not go on. */
        fprintf(stderr, "harvestd: out of memory printing extracted fields\n");
        abort();
    }
    /* The charges count a comma after every member, so they are never below the printed
     * size; the printed size still decides. */
    if (strlen(text) > HV_EXTRACT_FIELDS_MAX) {
        free(text);
        return HV_ETOOBIG;
    }
    *out = text; /* cJSON allocates with malloc: the record frees it with free() */
    return 0;
}
