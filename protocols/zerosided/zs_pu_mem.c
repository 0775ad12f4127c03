/* PU ring memory (zs_pu_mem.h). */
#include "protocols/zerosided/zs_pu_mem.h"

#include <stdlib.h>

#include "protocols/zerosided/zs.h"
#include "rnicsim/host.h"

uint8_t *zs_pu_mem_alloc(int kind, size_t bytes)
{
    (void)kind;
    void *p = NULL;
    if (posix_memalign(&p, 4096, bytes) != 0)
        return NULL;
    return p;
}

void zs_pu_mem_free(int kind, uint8_t *p, size_t bytes)
{
    (void)kind;
    (void)bytes;
    free(p);
}
