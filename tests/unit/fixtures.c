/* fixtures.c: see fixtures.h. */
#include "fixtures.h"

#include <string.h>

#include "harvestd/detail.h"
#include "test.h"

/* Whether `text` is the family `d`'s text with some argument, copied into `arg`. */
static int family_match(hv_detail_t d, const char *text, char *arg, size_t cap)
{
    const char *tmpl = hv_detail_str(d), *open = strchr(tmpl, '<'), *close = strchr(tmpl, '>');
    if (open == NULL || close == NULL)
        return 0;
    size_t pre = (size_t)(open - tmpl), post = strlen(close + 1), len = strlen(text);
    if (len <= pre + post || strncmp(text, tmpl, pre) != 0 ||
        strcmp(text + len - post, close + 1) != 0 || len - pre - post >= cap)
        return 0;
    memcpy(arg, text + pre, len - pre - post);
    arg[len - pre - post] = '\0';
    return 1;
}

void fx_fail_record(hv_record_t *rec, hv_stage_t stage, hv_error_type_t type, const char *text)
{
    char arg[HV_DETAIL_ARG_MAX];
    if (text == NULL) { /* a failure that left no detail */
        hv_record_fail(rec, stage, type, HV_D_NONE, NULL);
        return;
    }
    /* A fixed text first: "dns_temporary_failure" is not the family dns_<error>. */
    for (int d = 1; d < HV_D__COUNT; d++) {
        if (!hv_detail_has_arg((hv_detail_t)d) && strcmp(hv_detail_str((hv_detail_t)d), text) == 0) {
            hv_record_fail(rec, stage, type, (hv_detail_t)d, NULL);
            return;
        }
    }
    /* Then the family with the longest constant text around the argument. */
    int best = 0;
    size_t best_len = 0;
    for (int d = 1; d < HV_D__COUNT; d++) {
        const char *tmpl = hv_detail_str((hv_detail_t)d), *open = strchr(tmpl, '<');
        const char *close = open != NULL ? strchr(open, '>') : NULL;
        size_t fixed = close != NULL ? strlen(tmpl) - (size_t)(close + 1 - open) : 0;
        if (hv_detail_has_arg((hv_detail_t)d) && (best == 0 || fixed > best_len) &&
            family_match((hv_detail_t)d, text, arg, sizeof(arg))) {
            best = d;
            best_len = fixed;
        }
    }
    if (best == 0)
        hv_test_fail(__FILE__, __LINE__, "no detail code spells '%s'", text);
    family_match((hv_detail_t)best, text, arg, sizeof(arg));
    hv_record_fail(rec, stage, type, (hv_detail_t)best, arg);
    ASSERT_STR_EQ(text, rec->error);
}
