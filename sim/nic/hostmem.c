/* The NIC's accesses to the bytes of an MR.
 *
 * In simulation an MR's bytes are memory of the simulator process and an
 * access is a memcpy at host_addr.  In emulation mode (emu/) they belong
 * to another process - the program that registered them - and the MR
 * carries an accessor (struct nic_host_mem) that reaches them, e.g. with
 * process_vm_readv/writev.  Either way the range must lie inside the MR:
 * the engines have checked keys and bounds already, and this is the last
 * line that keeps a DMA from touching memory no MR covers. */
#include <errno.h>
#include <string.h>

#include "nic.h"

void nic_mr_set_host_mem(struct nic_mr *mr, const struct nic_host_mem *mem, void *ctx)
{
    mr->mem = mem;
    mr->mem_ctx = ctx;
}

static bool in_mr(const struct nic_mr *mr, const uint8_t *host, size_t len)
{
    uintptr_t a = (uintptr_t)host, base = (uintptr_t)mr->host_addr;
    return a >= base && len <= mr->length && a - base <= mr->length - len;
}

int nic_host_read(const struct nic_mr *mr, void *dst, const uint8_t *host, size_t len)
{
    if (!in_mr(mr, host, len)) {
        memset(dst, 0, len);
        return EFAULT;
    }
    if (!mr->mem) {
        memcpy(dst, host, len);
        return 0;
    }
    int rc = mr->mem->read(mr->mem_ctx, mr, dst, host, len);
    if (rc)
        memset(dst, 0, len);
    return rc;
}

int nic_host_write(const struct nic_mr *mr, uint8_t *host, const void *src, size_t len)
{
    if (!in_mr(mr, host, len))
        return EFAULT;
    if (!mr->mem) {
        memcpy(host, src, len);
        return 0;
    }
    return mr->mem->write(mr->mem_ctx, mr, host, src, len);
}
