/* The per-request arena: bump allocation inside chunks, alignment, the
 * large-block path, copies, reset keeping one chunk, and every allocation
 * failing cleanly (malloc is counted and can be made to fail: the test
 * includes arena.c so its calls go through the counter). */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../fail_malloc.h"

#define malloc(n) fm_malloc(n)
#define free(p) fm_free(p)
#include "../../../core/mem/arena.c"
#undef malloc
#undef free

static int
setup(void **state)
{
    fm_reset();
    return 0;
}

static void
test_empty(void **state)
{
    struct mem_arena a;

    mem_arena_init(&a);
    assert_int_equal(mem_arena_bytes(&a), 0);
    mem_arena_reset(&a);
    mem_arena_fini(&a);
    assert_int_equal(fm_mallocs, 0);
}

/* Small allocations share one chunk, come out aligned and do not overlap. */
static void
test_bump(void **state)
{
    struct mem_arena a;
    unsigned char *p[64];
    size_t i;

    mem_arena_init(&a);
    for (i = 0; i < 64; i++) {
        p[i] = mem_arena_alloc(&a, i % 7 + 1);
        assert_non_null(p[i]);
        assert_int_equal((uintptr_t)p[i] % ALIGN, 0);
        memset(p[i], (int)i, i % 7 + 1);
    }
    assert_int_equal(fm_mallocs, 1);
    assert_int_equal(mem_arena_bytes(&a), CHUNK_BYTES);
    for (i = 0; i < 64; i++)
        for (size_t k = 0; k < i % 7 + 1; k++)
            assert_int_equal(p[i][k], i);
    /* n == 0 is a valid pointer, and still aligned. */
    assert_non_null(mem_arena_alloc(&a, 0));
    mem_arena_fini(&a);
    assert_int_equal(fm_frees, fm_mallocs);
}

/* A full chunk starts a new one; the last byte of a chunk is usable. */
static void
test_chunk_fill(void **state)
{
    struct mem_arena a;
    size_t n = LARGE_OVER & ~(ALIGN - 1), got = 0;
    unsigned char *q;

    mem_arena_init(&a);
    while (got + n <= CHUNK_BYTES) {
        q = mem_arena_alloc(&a, n);
        assert_non_null(q);
        memset(q, 0xab, n);
        got += n;
    }
    assert_int_equal(fm_mallocs, 1);
    if (got < CHUNK_BYTES) {
        q = mem_arena_alloc(&a, CHUNK_BYTES - got);
        assert_non_null(q);
        q[CHUNK_BYTES - got - 1] = 1; /* the chunk's last byte (ASan checks) */
        assert_int_equal(fm_mallocs, 1);
    }
    assert_non_null(mem_arena_alloc(&a, 1));
    assert_int_equal(fm_mallocs, 2);
    assert_int_equal(mem_arena_bytes(&a), 2 * CHUNK_BYTES);
    mem_arena_fini(&a);
    assert_int_equal(fm_frees, 2);
}

/* Over a quarter chunk: a block of its own, the chunk left as it was. */
static void
test_large(void **state)
{
    struct mem_arena a;
    unsigned char *small, *big, *after;

    mem_arena_init(&a);
    small = mem_arena_alloc(&a, 16);
    big = mem_arena_alloc(&a, LARGE_OVER + 1);
    assert_non_null(big);
    assert_int_equal((uintptr_t)big % ALIGN, 0);
    memset(big, 0x5a, LARGE_OVER + 1);
    after = mem_arena_alloc(&a, 16);
    assert_ptr_equal(after, small + 16); /* the chunk went on bumping */
    assert_int_equal(fm_mallocs, 2);
    assert_int_equal(mem_arena_bytes(&a), CHUNK_BYTES + LARGE_OVER + 1);
    big = mem_arena_alloc(&a, 1 << 20);
    assert_non_null(big);
    big[(1 << 20) - 1] = 1;
    /* Absurd sizes fail without touching the arena. */
    assert_null(mem_arena_alloc(&a, SIZE_MAX));
    assert_null(mem_arena_alloc(&a, SIZE_MAX - 8));
    assert_int_equal(fm_mallocs, 3);
    mem_arena_fini(&a);
    assert_int_equal(fm_frees, 3);
}

static void
test_copies(void **state)
{
    struct mem_arena a;
    char src[] = "Host: example.test";
    char *s;
    struct mem_slice sl;

    mem_arena_init(&a);
    s = mem_arena_strdup(&a, src);
    assert_string_equal(s, src);
    assert_ptr_not_equal(s, src);
    s = mem_arena_strndup(&a, src, 4);
    assert_string_equal(s, "Host");
    s = mem_arena_memdup(&a, src, sizeof(src));
    assert_memory_equal(s, src, sizeof(src));
    assert_non_null(mem_arena_memdup(&a, NULL, 0));
    sl = mem_arena_slice(&a, mem_slice(src + 6, 7));
    assert_int_equal(sl.len, 7);
    assert_memory_equal(sl.ptr, "example", 7);
    assert_ptr_not_equal(sl.ptr, src + 6);
    sl = mem_arena_slice(&a, mem_slice(NULL, 0));
    assert_non_null(sl.ptr);
    assert_int_equal(sl.len, 0);
    /* A large copy goes the large way and is intact. */
    {
        char big[3000];

        memset(big, 'x', sizeof(big));
        big[sizeof(big) - 1] = '\0';
        s = mem_arena_strdup(&a, big);
        assert_string_equal(s, big);
    }
    mem_arena_fini(&a);
    assert_int_equal(fm_frees, fm_mallocs);
}

/* Reset frees everything but the first chunk and starts it over: a
 * request after request use costs no malloc once warm. */
static void
test_reset_reuse(void **state)
{
    struct mem_arena a;
    void *first;
    int warm;

    mem_arena_init(&a);
    first = mem_arena_alloc(&a, 32);
    for (int i = 0; i < 500; i++)
        assert_non_null(mem_arena_alloc(&a, 100));
    assert_non_null(mem_arena_alloc(&a, 10000));
    assert_true(fm_mallocs > 10);
    mem_arena_reset(&a);
    assert_int_equal(fm_frees, fm_mallocs - 1);
    assert_int_equal(mem_arena_bytes(&a), CHUNK_BYTES);
    assert_ptr_equal(mem_arena_alloc(&a, 32), first);
    mem_arena_reset(&a);
    warm = fm_mallocs;
    for (int r = 0; r < 1000; r++) {
        assert_non_null(mem_arena_strdup(&a, "GET /index.html HTTP/1.1"));
        assert_non_null(mem_arena_alloc(&a, 512));
        mem_arena_reset(&a);
    }
    assert_int_equal(fm_mallocs, warm);
    mem_arena_fini(&a);
    assert_int_equal(fm_frees, fm_mallocs);
    assert_int_equal(mem_arena_bytes(&a), 0);
    /* An arena fini'ed is an empty one again. */
    assert_non_null(mem_arena_alloc(&a, 8));
    mem_arena_fini(&a);
    assert_int_equal(fm_frees, fm_mallocs);
}

/* Every malloc the arena makes, failed in turn: NULL comes back, what was
 * handed out before stays valid, and nothing leaks. */
static void
test_malloc_failures(void **state)
{
    for (int k = 0; k < 8; k++) {
        struct mem_arena a;
        int failed = 0;

        fm_reset();
        fm_fail_after = k;
        mem_arena_init(&a);
        for (int i = 0; i < 40 && !failed; i++) {
            char *s = i % 5 == 4 ? mem_arena_alloc(&a, 2000) : mem_arena_alloc(&a, 400);

            if (s == NULL) {
                failed = 1;
                break;
            }
            memset(s, 'a', i % 5 == 4 ? 2000 : 400);
        }
        assert_true(failed);
        /* While malloc fails, whatever needs a new block fails too (a
         * small one may still fit in the current chunk). */
        {
            static char big[LARGE_OVER + 1];

            assert_null(mem_arena_strndup(&a, big, sizeof(big)));
            assert_null(mem_arena_memdup(&a, big, sizeof(big)));
            assert_null(mem_arena_slice(&a, mem_slice(big, sizeof(big))).ptr);
        }
        fm_fail_after = -1;
        assert_non_null(mem_arena_strdup(&a, "x"));
        mem_arena_fini(&a);
        assert_int_equal(fm_frees, fm_mallocs);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_empty, setup),
        cmocka_unit_test_setup(test_bump, setup),
        cmocka_unit_test_setup(test_chunk_fill, setup),
        cmocka_unit_test_setup(test_large, setup),
        cmocka_unit_test_setup(test_copies, setup),
        cmocka_unit_test_setup(test_reset_reuse, setup),
        cmocka_unit_test_setup(test_malloc_failures, setup),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
