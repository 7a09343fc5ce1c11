/*
 * handles.h: closing an owner's libuv handles together, and freeing the owner only after the
 * last one has closed (libuv: "memory can only be released in close_cb or after it has
 * returned").
 *
 * An owner embeds an hv_handles_t next to its handles, registers each handle after its
 * uv_*_init() with hv_handles_own(), and ends with hv_handles_close_all(). Each handle is
 * closed once (a handle already closing is left to whoever closes it); when the last close
 * callback has run, `on_closed` gets the hv_handles_t, from which the owner is recovered with
 * hv_container_of() and freed.
 *
 * While closing, a handle's `data` points at the hv_handles_t: the handle's own callbacks no
 * longer run by then. A handle that its owner closes itself with another callback (to reopen
 * it, say) and that then turns out to be the last, is counted with hv_handles_closed().
 */
#ifndef HARVESTD_HANDLES_H
#define HARVESTD_HANDLES_H

#include <uv.h>

#define HV_HANDLES_MAX 8

typedef struct hv_handles_s hv_handles_t;

struct hv_handles_s {
    void (*on_closed)(hv_handles_t *hs);
    uv_handle_t *handles[HV_HANDLES_MAX];
    unsigned n;
    unsigned open;             /* registered handles whose close callback has not run */
    int closing;
};

/** `on_closed` may be NULL (an owner with nothing to free). */
void hv_handles_init(hv_handles_t *hs, void (*on_closed)(hv_handles_t *hs));

/** Count `h` (initialised) as the owner's. At most HV_HANDLES_MAX handles. */
void hv_handles_own(hv_handles_t *hs, uv_handle_t *h);

/** Close every registered handle not already closing; idempotent. */
void hv_handles_close_all(hv_handles_t *hs);

/** A registered handle that the owner closed with its own callback has closed. */
void hv_handles_closed(hv_handles_t *hs);

#endif
