/* Peer memory: memory of another PCIe device of the host -- a GPU's
 * (GPUDirect RDMA through nvidia-peermem), an FPGA's HBM exposed through a
 * PCIe BAR -- registered with the RNIC through PeerDirect (Jasny et al.
 * 3.2: "the RDMA NIC can directly access the FPGA's memory through PCIe
 * without the involvement of the CPU").  The NIC reaches it peer to peer:
 * an MR inside a peer region (nic_mr.peer) has its DMA timed on the
 * device's own PCIe link model (xlate.c mem_go) -- its lanes and the
 * device's read latency -- instead of the NIC's link to the root complex.
 * Translation (MPT/MTT) is the same as for host memory.  The NIC's own
 * link is not charged for peer traffic (in a server whose NIC and GPU sit
 * under one PCIe switch the NIC's x16 link carries it too; the model keeps
 * the two apart, which only matters when a NIC moves host and peer data at
 * line rate at once). */
#include <errno.h>
#include <stdlib.h>

#include "nic_priv.h"

int nic_peer_mem_add(struct nic *nic, void *base, uint64_t len, struct pcie_link *link)
{
    uint8_t *b = base;
    if (!nic || !b || !len || !link) {
        errno = EINVAL;
        return -1;
    }
    for (uint32_t i = 0; i < nic->n_peer; i++) {
        const struct nic_peer_region *r = &nic->peer[i];
        if (b < r->base + r->len && r->base < b + len) {
            errno = EINVAL;
            return -1;
        }
    }
    struct nic_peer_region *n = realloc(nic->peer, (nic->n_peer + 1) * sizeof(*n));
    if (!n) {
        errno = ENOMEM;
        return -1;
    }
    nic->peer = n;
    nic->peer[nic->n_peer++] = (struct nic_peer_region){b, len, link};
    return 0;
}

void nic_peer_mem_remove(struct nic *nic, void *base)
{
    for (uint32_t i = 0; nic && i < nic->n_peer; i++)
        if (nic->peer[i].base == base) {
            nic->peer[i] = nic->peer[--nic->n_peer];
            return;
        }
}

struct pcie_link *nic_peer_link_of(const struct nic *nic, const void *addr, uint64_t len)
{
    const uint8_t *a = addr;
    for (uint32_t i = 0; a && i < nic->n_peer; i++) {
        const struct nic_peer_region *r = &nic->peer[i];
        if (a >= r->base && len <= r->len && (uint64_t)(a - r->base) <= r->len - len)
            return r->link;
    }
    return NULL;
}
