#include "harvestd/arena.h"
#include "harvestd/common.h"
#include "test.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

TEST_IMPL(arena_pieces_are_aligned_and_disjoint)
{
    hv_arena_t a;
    hv_arena_init(&a);
    enum { N = 2000 };
    unsigned char *p[N];
    size_t n[N];
    for (int i = 0; i < N; i++) {
        n[i] = (size_t)(i * 37 % 1500); /* 0 .. 1499 bytes, several chunks in all */
        p[i] = hv_arena_alloc(&a, n[i]);
        ASSERT_NOT_NULL(p[i]);
        ASSERT_EQ(0, (uintptr_t)p[i] % _Alignof(max_align_t));
        memset(p[i], i & 0xff, n[i]);
    }
    for (int i = 0; i < N; i++)
        for (size_t k = 0; k < n[i]; k++)
            ASSERT_EQ(i & 0xff, p[i][k]);
    for (int i = 0; i < N; i++)
        hv_arena_dealloc(&a, p[i]); /* nothing to do: all from chunks */
    hv_arena_dealloc(&a, NULL);
    hv_arena_free(&a);
}

TEST_IMPL(arena_reset_keeps_the_first_chunk)
{
    hv_arena_t a;
    hv_arena_init(&a);
    for (int i = 0; i < 1000; i++)
        hv_arena_alloc(&a, 1000); /* about 1 MB: several chunks */
    ASSERT_GT(a._total, 1000000);
    hv_arena_reset(&a);
    ASSERT_EQ(64 * 1024, a._total);
    char *p = hv_arena_alloc(&a, 100);
    memset(p, 'x', 100);
    ASSERT_EQ(64 * 1024, a._total); /* the kept chunk serves the next tree */
    hv_arena_free(&a);
    ASSERT_NULL(a._chunks);
    ASSERT_EQ(0, a._total);
}

TEST_IMPL(arena_spills_past_its_maximum)
{
    hv_arena_t a;
    hv_arena_init(&a);
    enum { N = 24 };
    char *big[N];
    /* Pieces of 1 MiB get chunks of their own; past HV_ARENA_MAX they come from malloc, and
     * freeing them must free them (LeakSanitizer checks) while chunk pieces stay. */
    for (int i = 0; i < N; i++) {
        big[i] = hv_arena_alloc(&a, 1024 * 1024);
        memset(big[i], 'a' + i, 1024 * 1024);
    }
    ASSERT_LE(a._total, HV_ARENA_MAX);
    ASSERT_EQ(1, a._spilled);
    char *small = hv_arena_alloc(&a, 10); /* a new chunk would pass the maximum too */
    memset(small, 's', 10);
    for (int i = 0; i < N; i++) {
        ASSERT_EQ('a' + i, big[i][0]);
        ASSERT_EQ('a' + i, big[i][1024 * 1024 - 1]);
    }
    for (int i = 0; i < N; i++)
        hv_arena_dealloc(&a, big[i]);
    hv_arena_dealloc(&a, small);
    hv_arena_reset(&a);
    ASSERT_EQ(0, a._spilled);
    char *again = hv_arena_alloc(&a, 4096);
    memset(again, 'z', 4096);
    hv_arena_free(&a);
}
