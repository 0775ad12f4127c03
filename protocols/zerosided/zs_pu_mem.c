/* PU ring memory (zs_pu_mem.h): a CPU's ring in host memory, a GPU's or
 * FPGA's in the device's memory (host_device_alloc: the RNIC reaches it
 * peer to peer over the device's PCIe link). */
#include "protocols/zerosided/zs_pu_mem.h"

#include <stdlib.h>

#include "protocols/zerosided/zs.h"
#include "rnicsim/host.h"

uint8_t *zs_pu_mem_alloc(int kind, size_t bytes)
{
    if (kind == ZS_PU_CPU) {
        void *p = NULL;
        return posix_memalign(&p, 4096, bytes) == 0 ? p : NULL;
    }
    return host_device_alloc(zs_pu_kind_names[kind], bytes);
}

void zs_pu_mem_free(int kind, uint8_t *p, size_t bytes)
{
    (void)bytes;
    if (!p)
        return;
    if (kind == ZS_PU_CPU)
        free(p);
    else
        host_device_free(p);
}
