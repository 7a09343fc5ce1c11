/* storeentry.c: the store's entries as plain data (see storeentry.h). */
#include "harvestd/storeentry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

void hv_store_entry_clear(hv_store_entry_t *e)
{
    free(e->url);
    free(e->etag);
    free(e->last_modified);
    free(e->title);
    free(e->fields);
    free(e->content_type);
    free(e->charset);
    memset(e, 0, sizeof(*e));
    e->bytes = -1;
    e->max_age_s = -1;
}

void hv_store_entry_body_hash(const void *data, size_t len, char *out)
{
    /* Change detection, not a seal: a server that wants its page to look unchanged can
     * simply answer 304, so a cryptographic hash would buy nothing for its cost (SHA-256
     * was half of a cold run's CPU). */
    XXH128_hash_t h = XXH3_128bits(data, len);
    snprintf(out, HV_STORE_ENTRY_HASH_MAX, "xxh3-128:%016llx%016llx", (unsigned long long)h.high64,
             (unsigned long long)h.low64);
}
