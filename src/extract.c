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
};

hv_ruleset_t *hv_ruleset_new(const char *name)
{
    hv_ruleset_t *rs = hv_xcalloc(1, sizeof(*rs));
    rs->name = hv_xstrdup(name != NULL ? name : "");
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

int hv_ruleset_add(hv_ruleset_t *rs, const char *key, const char *value, char *err,
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

static cJSON *value_of(const hv_selector_t *sel, const GumboNode *node, const char *src,
                       size_t len)
{
    char *v = hv_selector_value(sel, node, src, len);
    if (v == NULL)
        return cJSON_CreateNull();
    cJSON *j = cJSON_CreateString(v);
    free(v);
    return j;
}

static cJSON *first_match(const hv_selector_t *sel, const GumboNode *scope, const char *src,
                          size_t len)
{
    const GumboNode *node = NULL;
    if (hv_selector_match(sel, scope, &node, 1, 1) == 0)
        return cJSON_CreateNull();
    return value_of(sel, node, src, len);
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
static char *base_of(const GumboNode *root, const char *page_url, char *err, size_t errcap)
{
    char sel_err[128];
    (void)err;
    (void)errcap;
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

static cJSON *links(const GumboNode *root, const char *page_url)
{
    cJSON *list = cJSON_CreateArray();
    char err[128];
    if (page_url == NULL)
        return list;
    char *base_text = base_of(root, page_url, err, sizeof(err));
    hv_url_t base;
    const char *reason;
    if (hv_url_parse(&base, base_text, strlen(base_text), &reason) != 0) {
        free(base_text);
        return list;
    }
    hv_selector_t *sel = hv_selector_compile("a[href] @href", err, sizeof(err));
    size_t n = 0;
    const GumboNode **v = matches(sel, root, &n);
    for (size_t i = 0; i < n; i++) {
        char *href = hv_selector_value(sel, v[i], NULL, 0);
        hv_url_t u;
        /* Only links we could fetch: http(s) URLs that resolve (mailto:, javascript: and
         * malformed ones are left out). */
        if (href != NULL && hv_url_resolve(&u, &base, href, strlen(href), &reason) == 0) {
            cJSON_AddItemToArray(list, cJSON_CreateString(u.href));
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

char *hv_ruleset_eval(const hv_ruleset_t *rs, const GumboNode *root, const char *src,
                      size_t len, const char *base_url)
{
    cJSON *obj = cJSON_CreateObject();
    for (unsigned i = 0; i < rs->nrules; i++) {
        const rule_t *r = &rs->rules[i];
        cJSON *val = NULL;
        switch (r->kind) {
        case R_FIRST:
            val = first_match(r->sel, root, src, len);
            break;
        case R_ALL: {
            size_t n;
            const GumboNode **v = matches(r->sel, root, &n);
            val = cJSON_CreateArray();
            for (size_t k = 0; k < n; k++)
                cJSON_AddItemToArray(val, value_of(r->sel, v[k], src, len));
            free(v);
            break;
        }
        case R_SCOPED: {
            size_t n;
            const GumboNode **items = matches(r->sel, root, &n);
            val = cJSON_CreateArray();
            for (size_t k = 0; k < n; k++) {
                cJSON *item = cJSON_CreateObject();
                for (unsigned f = 0; f < r->nfields; f++)
                    cJSON_AddItemToObject(item, r->fields[f].name,
                                          first_match(r->fields[f].sel, items[k], src, len));
                cJSON_AddItemToArray(val, item);
            }
            free(items);
            break;
        }
        case R_LINKS:
            val = links(root, base_url);
            break;
        }
        cJSON_AddItemToObject(obj, r->name, val);
    }
    char *text = cJSON_PrintUnformatted(obj);
    cJSON_Delete(obj);
    if (text == NULL)
        return hv_xstrdup("{}");
    return text;
}
