/* handles.c: see handles.h. */
#include "harvestd/handles.h"

#include <assert.h>
#include <string.h>

void hv_handles_init(hv_handles_t *hs, void (*on_closed)(hv_handles_t *hs))
{
    memset(hs, 0, sizeof(*hs));
    hs->on_closed = on_closed;
}

void hv_handles_own(hv_handles_t *hs, uv_handle_t *h)
{
    assert(hs->n < HV_HANDLES_MAX && !hs->closing);
    hs->handles[hs->n++] = h;
    hs->open++;
}

void hv_handles_closed(hv_handles_t *hs)
{
    assert(hs->open > 0);
    if (--hs->open == 0 && hs->closing && hs->on_closed != NULL)
        hs->on_closed(hs); /* last: the owner may free the memory holding hs */
}

static void on_close(uv_handle_t *h)
{
    hv_handles_closed(h->data);
}

void hv_handles_close_all(hv_handles_t *hs)
{
    if (hs->closing)
        return;
    hs->closing = 1;
    for (unsigned i = 0; i < hs->n; i++) {
        uv_handle_t *h = hs->handles[i];
        if (uv_is_closing(h))
            continue;
        h->data = hs;
        uv_close(h, on_close);
    }
}
