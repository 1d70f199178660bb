#ifndef CHUTE_SPEC_FAIL_MALLOC_H
#define CHUTE_SPEC_FAIL_MALLOC_H

/* A counted malloc that can be made to fail (nghttp2's
 * tests/malloc_wrapper.h): a test defines malloc/free to these, then
 * includes the .c under test, so that file's allocations go through here.
 * fail_after = k lets k more mallocs succeed, then fails every one; -1
 * never fails. */

#include <stdlib.h>

static int fm_mallocs, fm_frees, fm_fail_after = -1;

static inline void *
fm_malloc(size_t n)
{
    if (fm_fail_after == 0)
        return NULL;
    if (fm_fail_after > 0)
        fm_fail_after--;
    fm_mallocs++;
    return malloc(n);
}

static inline void
fm_free(void *p)
{
    if (p != NULL)
        fm_frees++;
    free(p);
}

static inline void
fm_reset(void)
{
    fm_mallocs = fm_frees = 0;
    fm_fail_after = -1;
}

#endif
