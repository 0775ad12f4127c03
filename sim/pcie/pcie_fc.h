/* Pools of a limited resource held until a known release time: the tags of
 * outstanding read requests and the root complex's flow-control credits
 * (internal to sim/pcie; the model is described in docs/pcie.md).
 *
 * A pool is a ring of groups of units (TLPs) in the order they were taken.
 * The release times of a group's units are a closed form, so a group of
 * thousands of TLPs costs one entry and O(1) arithmetic:
 *
 *   release(j) = max(a + j*s, b + j*s2, c)   for j < n - 1
 *   release(n - 1) = t_last
 *
 * (a posted write: a = first TLP visible, s = one TLP; a read's tags: the
 * max-plus closed form of its completion stream).  Releases are asked for
 * at non-decreasing times.  In an ordered pool (posted credits) release
 * times are non-decreasing along the ring and only its head is examined;
 * an unordered pool (tags, non-posted credits, whose reads the host
 * fetches at their own pace: docs/pcie.md "Read fetch rate") examines
 * only the groups with a release due: its groups sit in a min-heap keyed
 * by the release time of each one's next unit, so a release costs
 * O(log groups) and a look at the earliest next release O(1).  (A scan of
 * every group held was 36 % of the last-level cache misses of a 1024-host
 * permutation: ~60 groups of a NIC's reads are held at once.) */
#ifndef RNICSIM_PCIE_FC_H
#define RNICSIM_PCIE_FC_H

#include <stddef.h>
#include <stdint.h>

#include "../sim.h"

/* One cache line: a pool's groups are read on most PCIe events of a busy
 * NIC, and with a thousand NICs they are not cached (72 bytes straddled
 * two lines).  n fits 32 bits: a group is one DMA's TLPs or MRds, and a
 * message is at most 2^31 bytes, so at most 2^24 TLPs of 128 bytes. */
struct fc_group {
    sim_time_t a, s, b, s2, c, t_last;
    uint32_t n, i;                 /* units in the group; how many already released (n: all) */
    uint32_t data_each, data_last; /* data credits per unit; of the last unit */
};

/* Unordered pools: a heap entry, the next release of group g[slot]. */
struct fc_heap_ent {
    sim_time_t next;
    size_t slot;
};

struct fc_pool {
    uint64_t hdr_cap, data_cap; /* 0 = unlimited */
    uint64_t hdr_out, data_out; /* held by the groups */
    /* ordered: a ring, size a power of two (index & (size - 1));
     * unordered: slots (size of them, `len` in use, free ones chained
     * through fc_group.i), with `heap` ordering the used ones: a 4-ary
     * heap whose entry k sits at heap[k + 3], so that the four children
     * of an entry share one 64-byte line (line-aligned allocations) */
    struct fc_group *g;
    size_t size, head, len;
    int unordered; /* groups may release out of taking order */
    struct fc_heap_ent *heap;
    size_t free_slot; /* unordered: first free slot + 1 (0: none) */
};

void fc_pool_init(struct fc_pool *p, uint64_t hdr_cap, uint64_t data_cap);
/* Mark the pool unordered (see above). */
void fc_pool_set_unordered(struct fc_pool *p);
void fc_pool_free(struct fc_pool *p);
/* Release every unit whose release time is <= t. */
void fc_pool_release_until(struct fc_pool *p, sim_time_t t);
/* Release time of the next unit to come back; SIM_TIME_NEVER if none held. */
sim_time_t fc_pool_next_release(const struct fc_pool *p);
/* Units free now (after fc_pool_release_until), given `extra_hdr` more held
 * outside the ring; UINT64_MAX if unlimited. */
uint64_t fc_pool_hdr_free(const struct fc_pool *p, uint64_t extra_hdr);
/* Do `hdr` units and `data` credits fit now? */
int fc_pool_fits(const struct fc_pool *p, uint64_t extra_hdr, uint64_t hdr, uint64_t data);
/* Earliest time >= t at which one unit of `data` credits fits (releases
 * up to it).  The pool must be able to hold it at all (data <= data_cap). */
sim_time_t fc_pool_wait(struct fc_pool *p, sim_time_t t, uint64_t data);
/* Take the units of a group (`g.i` must be 0).  Returns 0, or -1 when out
 * of memory. */
int fc_pool_push(struct fc_pool *p, const struct fc_group *g);

#endif /* RNICSIM_PCIE_FC_H */
