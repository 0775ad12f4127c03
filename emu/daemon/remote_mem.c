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
 * have gone away on hardware.  Writes are combined (below). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/uio.h>

#include "emu/daemon/objects.h"

/* process_vm_* may stop short: loop over what is left. */
static int vm_move(struct emu_client *c, bool write, struct iovec *local, unsigned nl,
                   struct iovec *remote, unsigned nr)
{
    while (nl && nr) {
        ssize_t n = write ? process_vm_writev(c->pid, local, nl, remote, nr, 0)
                          : process_vm_readv(c->pid, local, nl, remote, nr, 0);
        if (n <= 0) {
            int e = n < 0 ? errno : EFAULT;
            c->emu->dma_faults++;
            if (c->dma_faults++ == 0) /* the first of each client */
                fprintf(stderr, "rnicsimd: %s: DMA %s at 0x%" PRIx64 " failed: %s\n", c->name,
                        write ? "write" : "read", (uint64_t)(uintptr_t)remote->iov_base,
                        strerror(e));
            return e;
        }
        /* drop what was moved from both lists */
        for (size_t left = (size_t)n; left;) {
            size_t k = left < local->iov_len ? left : local->iov_len;
            local->iov_base = (char *)local->iov_base + k;
            local->iov_len -= k;
            left -= k;
            if (!local->iov_len) {
                local++;
                nl--;
            }
        }
        for (size_t left = (size_t)n; left;) {
            size_t k = left < remote->iov_len ? left : remote->iov_len;
            remote->iov_base = (char *)remote->iov_base + k;
            remote->iov_len -= k;
            left -= k;
            if (!remote->iov_len) {
                remote++;
                nr--;
            }
        }
        while (nl && !local->iov_len) {
            local++;
            nl--;
        }
        while (nr && !remote->iov_len) {
            remote++;
            nr--;
        }
    }
    return 0;
}

/* Write combining.  The NIC model places a payload in PCIe-sized pieces
 * (256 B by default), each at its own instant; a system call per piece
 * would make the daemon spend most of its time in the kernel.  Writes are
 * therefore gathered per client, in the order the model makes them, and
 * written with one process_vm_writev when the current step of the model
 * ends (before any CQE of the step is forwarded, so a CQE never arrives
 * before its data), before the daemon reads that client's memory (a READ
 * sees every earlier write), when the buffer is full, and before the
 * client goes.  The client can see the bytes no earlier than at the end of
 * the step in which they landed; the order of the pieces is kept. */
enum { WC_BYTES = 1 << 20, WC_IOVS = 512 };

struct emu_wc {
    uint8_t *data;
    size_t used;
    struct iovec local[WC_IOVS], remote[WC_IOVS];
    unsigned n;
};

int emu_remote_flush(struct emu_client *c)
{
    struct emu_wc *w = c->wc;
    if (!w || !w->n)
        return 0;
    int rc = c->closing ? ESRCH : vm_move(c, true, w->local, w->n, w->remote, w->n);
    w->n = 0;
    w->used = 0;
    return rc;
}

void emu_remote_flush_all(struct emu *e)
{
    for (struct emu_client *c = e->clients; c; c = c->next)
        emu_remote_flush(c);
}

void emu_remote_free(struct emu_client *c)
{
    if (c->wc) {
        free(c->wc->data);
        free(c->wc);
        c->wc = NULL;
    }
}

static int remote_read(void *ctx, const struct nic_mr *mr, void *dst, const uint8_t *host,
                       size_t len)
{
    (void)mr;
    struct emu_client *c = ctx;
    if (c->closing) /* the process is gone or going: its memory with it */
        return ESRCH;
    emu_remote_flush(c);
    struct iovec l = {.iov_base = dst, .iov_len = len};
    struct iovec r = {.iov_base = (void *)(uintptr_t)host, .iov_len = len};
    return vm_move(c, false, &l, 1, &r, 1);
}

static int remote_write(void *ctx, const struct nic_mr *mr, uint8_t *host, const void *src,
                        size_t len)
{
    (void)mr;
    struct emu_client *c = ctx;
    if (c->closing)
        return ESRCH;
    if (!c->wc) {
        c->wc = calloc(1, sizeof(*c->wc));
        if (c->wc)
            c->wc->data = malloc(WC_BYTES);
        if (!c->wc || !c->wc->data) {
            emu_remote_free(c);
            struct iovec l = {.iov_base = (void *)(uintptr_t)src, .iov_len = len};
            struct iovec r = {.iov_base = host, .iov_len = len};
            return vm_move(c, true, &l, 1, &r, 1);
        }
    }
    struct emu_wc *w = c->wc;
    if (len > WC_BYTES) { /* larger than the buffer: on its own, in order */
        emu_remote_flush(c);
        struct iovec l = {.iov_base = (void *)(uintptr_t)src, .iov_len = len};
        struct iovec r = {.iov_base = host, .iov_len = len};
        return vm_move(c, true, &l, 1, &r, 1);
    }
    if (w->used + len > WC_BYTES || w->n == WC_IOVS)
        emu_remote_flush(c);
    memcpy(w->data + w->used, src, len);
    struct iovec *pl = w->n ? &w->local[w->n - 1] : NULL, *pr = w->n ? &w->remote[w->n - 1] : NULL;
    if (pl && (uint8_t *)pr->iov_base + pr->iov_len == host &&
        (uint8_t *)pl->iov_base + pl->iov_len == w->data + w->used) {
        pl->iov_len += len; /* continues the previous piece */
        pr->iov_len += len;
    } else {
        w->local[w->n] = (struct iovec){.iov_base = w->data + w->used, .iov_len = len};
        w->remote[w->n] = (struct iovec){.iov_base = host, .iov_len = len};
        w->n++;
    }
    w->used += len;
    return 0;
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
