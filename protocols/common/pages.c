/* Buffers on pages of their own (see pages.h). */
#include "protocols/common/pages.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static size_t pages_round(size_t bytes)
{
    if (bytes > SIZE_MAX - PAGES_BYTES)
        return 0;
    return bytes ? (bytes + PAGES_BYTES - 1) / PAGES_BYTES * PAGES_BYTES : PAGES_BYTES;
}

void *pages_alloc(size_t bytes)
{
    size_t n = pages_round(bytes);
    void *p = NULL;
    if (!n || posix_memalign(&p, PAGES_BYTES, n) != 0)
        return NULL;
    return p;
}

void *pages_zalloc(size_t bytes)
{
    void *p = pages_alloc(bytes);
    if (p)
        memset(p, 0, pages_round(bytes));
    return p;
}

void pages_free(void *p)
{
    free(p);
}

void *pages_map(size_t bytes)
{
    size_t n = pages_round(bytes);
    if (!n)
        return NULL;
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void pages_unmap(void *p, size_t bytes)
{
    if (p)
        munmap(p, pages_round(bytes));
}
