/* arena.c: a bump allocator for gumbo's trees (see arena.h). */
#include "harvestd/arena.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "harvestd/common.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
/* Under AddressSanitizer every piece is followed by a poisoned red zone and a chunk's unused
 * space stays poisoned, so an overrun or a use after reset is reported as with malloc. */
#define REDZONE 16
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define REDZONE 0
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define ALIGN (_Alignof(max_align_t))
#define FIRST_CHUNK (64 * 1024)
#define MAX_CHUNK (1024 * 1024)

struct hv_arena_chunk_s {
    hv_arena_chunk_t *next;
    size_t size; /* bytes of data */
    size_t used;
    max_align_t data[];
};

void hv_arena_init(hv_arena_t *a)
{
    a->_chunks = NULL;
    a->_total = 0;
    a->_spilled = 0;
}

static hv_arena_chunk_t *chunk_new(hv_arena_t *a, size_t size)
{
    hv_arena_chunk_t *c = hv_xmalloc(sizeof(*c) + size);
    c->next = NULL;
    c->size = size;
    c->used = 0;
    POISON(c->data, size);
    a->_total += size;
    return c;
}

void *hv_arena_alloc(void *ud, size_t size)
{
    hv_arena_t *a = ud;
    if (size > SIZE_MAX / 2)
        return hv_xmalloc(size); /* aborts: nothing asks for this much */
    size_t need = ((size ? size : 1) + REDZONE + ALIGN - 1) / ALIGN * ALIGN;
    hv_arena_chunk_t *c = a->_chunks;
    if (c == NULL || c->size - c->used < need) {
        if (a->_total + need > HV_ARENA_MAX) {
            a->_spilled = 1;
            return hv_xmalloc(size);
        }
        if (need > MAX_CHUNK / 4) {
            /* A large piece gets a chunk of its own, behind the one being filled. */
            hv_arena_chunk_t *big = chunk_new(a, need);
            big->used = need;
            if (c != NULL) {
                big->next = c->next;
                c->next = big;
            } else {
                a->_chunks = big;
            }
            UNPOISON(big->data, size);
            return big->data;
        }
        /* Chunks grow with the arena, so that a big tree takes few of them. */
        size_t csize = HV_MIN(HV_MAX(a->_total, (size_t)FIRST_CHUNK), (size_t)MAX_CHUNK);
        c = chunk_new(a, HV_MAX(csize, need));
        c->next = a->_chunks;
        a->_chunks = c;
    }
    char *p = (char *)c->data + c->used;
    c->used += need;
    UNPOISON(p, size);
    return p;
}

static int in_chunks(const hv_arena_t *a, const void *ptr)
{
    uintptr_t u = (uintptr_t)ptr;
    for (const hv_arena_chunk_t *c = a->_chunks; c != NULL; c = c->next) {
        uintptr_t base = (uintptr_t)c->data;
        if (u >= base && u < base + c->size)
            return 1;
    }
    return 0;
}

void hv_arena_dealloc(void *ud, void *ptr)
{
    hv_arena_t *a = ud;
    /* Until the arena spills every piece is from a chunk: freeing costs nothing. */
    if (ptr == NULL || !a->_spilled || in_chunks(a, ptr))
        return;
    free(ptr);
}

void hv_arena_reset(hv_arena_t *a)
{
    hv_arena_chunk_t *keep = NULL;
    hv_arena_chunk_t *c = a->_chunks;
    while (c != NULL) {
        hv_arena_chunk_t *next = c->next;
        /* Keep the oldest chunk when it is an ordinary one: the next tree starts in it. */
        if (next == NULL && c->size <= MAX_CHUNK)
            keep = c;
        else
            free(c);
        c = next;
    }
    a->_chunks = keep;
    a->_total = 0;
    a->_spilled = 0;
    if (keep != NULL) {
        keep->used = 0;
        POISON(keep->data, keep->size);
        a->_total = keep->size;
    }
}

void hv_arena_free(hv_arena_t *a)
{
    hv_arena_reset(a);
    free(a->_chunks);
    hv_arena_init(a);
}
