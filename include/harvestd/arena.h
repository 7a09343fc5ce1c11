/*
 * arena.h: a bump allocator for gumbo's trees.
 *
 * gumbo allocates every node, attribute, string and vector piece by piece and frees them one
 * by one when the tree is destroyed: with malloc, that is about 15% of a parse. A tree lives
 * exactly as long as one parse, so its memory can come from a few large chunks that are
 * forgotten all at once afterwards. gumbo's allocator hooks (GumboOptions.allocator,
 * .deallocator, .userdata) call hv_arena_alloc and hv_arena_dealloc.
 *
 * Freed pieces are not reused (gumbo grows a vector by allocating a larger one and freeing
 * the old), so an arena holds somewhat more than the tree. Past HV_ARENA_MAX bytes an arena
 * spills: further pieces come from malloc and are freed one by one, so a huge page costs what
 * it costs with malloc alone. An arena is used by one thread at a time.
 */
#ifndef HARVESTD_ARENA_H
#define HARVESTD_ARENA_H

#include <stddef.h>

/** Bytes an arena hands out from its chunks before it spills to malloc. */
#define HV_ARENA_MAX (16u * 1024 * 1024)

typedef struct hv_arena_chunk_s hv_arena_chunk_t;

typedef struct {
    hv_arena_chunk_t *_chunks; /* newest first; the newest is the one being filled */
    size_t _total;             /* bytes of all chunks */
    int _spilled;              /* some pieces came from malloc since the last reset */
} hv_arena_t;

/** An empty arena. Allocates nothing. */
void hv_arena_init(hv_arena_t *a);
/** `size` bytes aligned for any type, valid until the next reset. Never NULL (aborts on OOM,
 *  as gumbo does). `ud` is the arena (GumboAllocatorFunction). */
void *hv_arena_alloc(void *ud, size_t size);
/** Free one piece: nothing for a piece from a chunk, free() for a spilled one. NULL is
 *  ignored. `ud` is the arena (GumboDeallocatorFunction). */
void hv_arena_dealloc(void *ud, void *ptr);
/** Forget every piece from the chunks, keeping the first chunk for the next tree. Spilled
 *  pieces must have been freed already (gumbo_destroy_output does). */
void hv_arena_reset(hv_arena_t *a);
/** Free every chunk. The arena is empty and reusable afterwards. */
void hv_arena_free(hv_arena_t *a);

#endif
