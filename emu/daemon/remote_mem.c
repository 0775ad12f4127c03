/* rnicsimd: the NIC's DMA into a client's registered memory.
 *
 * An MR a client registers keeps the client's own virtual addresses
 * (host_addr is an address in the client, never dereferenced here) and
 * gets this accessor (sim/nic/hostmem.c): reads and writes are
 * process_vm_readv / process_vm_writev of the client's pid.  hostmem.c has
 * already checked that the range lies inside the MR, so the daemon never
 * reads or writes client memory that no MR covers.  The kernel allows
 * these calls between processes of the same user (the daemon only
 * serves its own user; with Yama ptrace_scope 1 the client library
 * declares the daemon its ptracer, PR_SET_PTRACER).
 *
 * Registration checks that the pages exist (and are writable when the MR
 * may be written), which is when pinning them would fail with EFAULT on
 * hardware.  If the client unmaps them later a DMA fails; it is counted
 * (dma_faults) and the bytes are not moved, as pinned pages would not
 * have gone away on hardware. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>

#include "emu/daemon/objects.h"

/* process_vm_* move at most IOV_MAX pieces and may stop short: loop. */
static int vm_copy(struct emu_client *c, bool write, void *local, uint64_t remote, size_t len)
{
    size_t done = 0;
    if (c->closing) /* the process is gone or going: its memory with it */
        return ESRCH;
    while (done < len) {
        struct iovec l = {.iov_base = (char *)local + done, .iov_len = len - done};
        struct iovec r = {.iov_base = (void *)(uintptr_t)(remote + done), .iov_len = len - done};
        ssize_t n = write ? process_vm_writev(c->pid, &l, 1, &r, 1, 0)
                          : process_vm_readv(c->pid, &l, 1, &r, 1, 0);
        if (n <= 0) {
            int e = n < 0 ? errno : EFAULT;
            c->emu->dma_faults++;
            if (c->dma_faults++ == 0) /* the first of each client */
                fprintf(stderr, "rnicsimd: %s: DMA %s of %zu bytes at 0x%" PRIx64 " failed: %s\n",
                        c->name, write ? "write" : "read", len - done, remote + done, strerror(e));
            return e;
        }
        done += (size_t)n;
    }
    return 0;
}

static int remote_read(void *ctx, const struct nic_mr *mr, void *dst, const uint8_t *host,
                       size_t len)
{
    (void)mr;
    return vm_copy(ctx, false, dst, (uint64_t)(uintptr_t)host, len);
}

static int remote_write(void *ctx, const struct nic_mr *mr, uint8_t *host, const void *src,
                        size_t len)
{
    (void)mr;
    return vm_copy(ctx, true, (void *)(uintptr_t)src, (uint64_t)(uintptr_t)host, len);
}

const struct nic_host_mem emu_remote_mem = {.read = remote_read, .write = remote_write};

int emu_check_mapped(pid_t pid, uint64_t addr, uint64_t len, bool write)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return EFAULT;
    uint64_t want = addr, end = addr + len;
    char line[512];
    /* the mappings are sorted: walk them, covering [addr, end) */
    while (want < end && fgets(line, sizeof(line), f)) {
        uint64_t lo, hi;
        char perms[8];
        if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s", &lo, &hi, perms) != 3)
            continue;
        if (hi <= want)
            continue;
        if (lo > want || perms[0] != 'r' || (write && perms[1] != 'w'))
            break;
        want = hi;
    }
    fclose(f);
    return want >= end ? 0 : EFAULT;
}
