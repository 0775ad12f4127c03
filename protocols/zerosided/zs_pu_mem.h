/* Where a PU's ring lives: host memory for a CPU, device memory (reached
 * by the RNIC peer-to-peer over PCIe) for a GPU or an FPGA. */
#ifndef RNICSIM_ZS_PU_MEM_H
#define RNICSIM_ZS_PU_MEM_H

#include <stddef.h>
#include <stdint.h>

/* kind: enum zs_pu_kind.  NULL with errno on failure. */
uint8_t *zs_pu_mem_alloc(int kind, size_t bytes);
void zs_pu_mem_free(int kind, uint8_t *p, size_t bytes);

#endif
