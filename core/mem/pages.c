#include <sys/mman.h>

#include "mem/pages.h"

void *
mem_pages_alloc(size_t n)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void
mem_pages_free(void *p, size_t n)
{
    if (p != NULL)
        munmap(p, n);
}
