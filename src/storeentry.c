/* storeentry.c: the store's entries as plain data (see storeentry.h). */
#include "harvestd/storeentry.h"

#include <stdlib.h>
#include <string.h>

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
