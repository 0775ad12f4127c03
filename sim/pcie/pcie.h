/* PCIe link between a host's root complex (memory, CPU) and one device (the
 * RNIC), TLP-level model: MPS/MRRS splitting, read completions, a limit on
 * outstanding read requests (tags), the root complex's flow-control
 * credits, the ordering rules and the relaxed-ordering attribute.
 *
 * Directions: "up" = device -> root complex (DMA write TLPs, read requests),
 * "down" = root complex -> device (read completions, CPU MMIO writes).
 * Each direction is a FIFO serialiser at the effective data-link rate; a TLP
 * costs its header bytes plus payload.  Posted writes in one direction
 * complete in issue order (so a CQE written after its data lands after it).
 *
 * The caller moves the bytes itself (memcpy) inside the completion callback:
 * for a DMA write the callback runs when the data are visible in host
 * memory; for a DMA read when the last completion reached the device.
 * Every operation has a kind (what the NIC moves: payload, WQE, CQE, ...),
 * used only for the per-kind counters: all kinds share the same link. */
#ifndef RNICSIM_PCIE_H
#define RNICSIM_PCIE_H

#include <stddef.h>
#include <stdint.h>

#include "../sim.h"

struct pcie_params {
    unsigned gen;                  /* 1..5: sets the per-lane rate and encoding */
    unsigned lanes;                /* 1, 2, 4, 8, 16 */
    uint32_t mps_bytes;            /* max payload size */
    uint32_t mrrs_bytes;           /* max read request size */
    uint32_t mwr_hdr_bytes;        /* MWr/MRd TLP overhead on the wire */
    uint32_t cpld_hdr_bytes;       /* CplD TLP overhead on the wire */
    uint32_t dllp_overhead_permil; /* link-layer (ACK/FC DLLP, SKP) loss, per mille */
    sim_time_t
        read_latency_ps; /* request at device -> first completion back, excl. serialisation */
    sim_time_t write_latency_ps; /* last MWr byte leaves device -> visible in memory */
    sim_time_t mmio_latency_ps;  /* CPU store -> doorbell seen by device, excl. serialisation */
    /* The host fetches the data of one DMA read (its MRds one after the
     * other) at this rate; different reads are fetched in parallel.
     * 0 = instantaneous (read_latency only). */
    uint64_t read_fetch_bps;
    /* Non-posted requests (MRd) the device may have outstanding: a tag is
     * held from the MRd's transmission until its last CplD arrived.  0 =
     * unlimited. */
    uint32_t tags;
    /* Flow-control credits the root complex's receiver advertises (0 =
     * infinite, as in an InitFC DLLP).  A TLP is transmitted only when the
     * credits it needs are free; they come back when the root complex has
     * processed it (docs/pcie.md, "Flow-control credits"). */
    uint32_t fc_ph_credits;  /* posted headers: 1 per MWr */
    uint32_t fc_pd_credits;  /* posted data: 1 per 16 B of MWr payload */
    uint32_t fc_nph_credits; /* non-posted headers: 1 per MRd */
    /* Variation of read_latency: a noise preset (sim/noise.h, by index;
     * 0 = none), one draw per group of MRds sent together (a DMA read's
     * first requests), on the link's own stream "noise/pcie/<name>".  An
     * interruption preset (NOISE_PERIODIC) is refused (pcie_params_check). */
    unsigned read_noise;
    /* The device's context and translation cache fills (kinds ctx_miss,
     * xlate_miss) pass its queued data reads (pcie.c enqueue_read). */
    bool meta_reads_first;
};

/* Defaults for Gen3 x16, MPS 256, MRRS 512, each field's source in pcie.c. */
void pcie_params_default(struct pcie_params *p);
/* 0, or -1 with the reason in why (a read_noise that is not a distribution). */
int pcie_params_check(const struct pcie_params *p, char *why, size_t why_len);
/* Raw rate of the link after line encoding, bits per second. */
uint64_t pcie_link_rate_bps(const struct pcie_params *p);
/* Effective rate after DLLP overhead (what TLP bytes are serialised at). */
uint64_t pcie_effective_rate_bps(const struct pcie_params *p);

struct pcie_link;

/* What an operation carries (counters only). */
enum pcie_kind {
    PCIE_K_PAYLOAD_RD,
    PCIE_K_PAYLOAD_WR,
    PCIE_K_WQE_FETCH,
    PCIE_K_CQE,
    PCIE_K_CTX_MISS,
    PCIE_K_XLATE_MISS,
    PCIE_K_ATOMIC,
    PCIE_K_DOORBELL,
    PCIE_K_OTHER,
    PCIE_K_COUNT
};
/* "payload_rd", "payload_wr", "wqe_fetch", "cqe", "ctx_miss", "xlate_miss",
 * "atomic", "doorbell", "other" */
extern const char *const pcie_kind_names[];

/* TLP relaxed-ordering attribute.  On a read: its completion data may be
 * produced before earlier posted writes are visible.  On a write: it is not
 * held behind earlier writes' visibility. */
#define PCIE_F_RELAXED 1u

struct pcie_link *pcie_link_create(struct sim *sim, const char *name, const struct pcie_params *p);
void pcie_link_destroy(struct pcie_link *l);

/* Device reads `bytes` of host memory.  Split into MRRS-sized MRd requests
 * (up), each answered by MPS-sized CplD completions (down).  `done` runs
 * when the last completion has arrived at the device. */
void pcie_dma_read(struct pcie_link *l, uint64_t bytes, sim_cb_fn done, void *a, void *b);
/* Device writes `bytes` to host memory as MPS-sized MWr TLPs (posted).
 * `done` runs when the data are visible in host memory. */
void pcie_dma_write(struct pcie_link *l, uint64_t bytes, sim_cb_fn done, void *a, void *b);
/* CPU writes `bytes` (doorbell 8 B, or a BlueFlame WQE of 64 B) to device
 * BAR space.  `done` runs when the device sees it. */
void pcie_mmio_write(struct pcie_link *l, uint64_t bytes, sim_cb_fn done, void *a, void *b);

/* The same with a kind and flags (PCIE_F_*); the three calls above are
 * these with PCIE_K_OTHER and no flags.  Unknown kinds count as "other". */
void pcie_dma_read_k(struct pcie_link *l, enum pcie_kind kind, unsigned flags, uint64_t bytes,
                     sim_cb_fn done, void *a, void *b);
void pcie_dma_write_k(struct pcie_link *l, enum pcie_kind kind, unsigned flags, uint64_t bytes,
                      sim_cb_fn done, void *a, void *b);
void pcie_mmio_write_k(struct pcie_link *l, enum pcie_kind kind, uint64_t bytes, sim_cb_fn done,
                       void *a, void *b);
/* Cut-through DMA write (docs/pcie.md "Cut-through"): the device had the
 * first bytes to write at head_ps (<= now) - a packet's payload arriving
 * from the wire - and has the last byte now.  The MWr TLPs may start
 * leaving at head_ps if the up direction was free then, but the last one
 * leaves no earlier than now + its own serialisation.  head_ps >= now (or
 * 0) is pcie_dma_write_k. */
void pcie_dma_write_ct_k(struct pcie_link *l, enum pcie_kind kind, unsigned flags, uint64_t bytes,
                         sim_time_t head_ps, sim_cb_fn done, void *a, void *b);
/* The same for a write that covers some 64 B lines only partly (docs/pcie.md
 * "Partial-line writes"): the root complex must merge each such line with
 * its current contents, a read-modify-write that holds its write path for
 * rmw_ps in all (the caller knows where the lines are: 0 when the line is
 * in the LLC, which merges it in place).  The write and every write after
 * it become visible that much later; posted credits stay held meanwhile, so
 * a stream of such writes slows the link down.  rmw_ps = 0 is
 * pcie_dma_write_ct_k. */
void pcie_dma_write_rmw_ct_k(struct pcie_link *l, enum pcie_kind kind, unsigned flags,
                             uint64_t bytes, sim_time_t head_ps, sim_time_t rmw_ps, sim_cb_fn done,
                             void *a, void *b);
/* The same for a read that continues a stream: the host fetches it after
 * the previous read of the same stream (*chain: when that fetch ends; the
 * caller owns it, 0 starts a new stream, and it must stay valid until
 * `done`).  A device reading one buffer with one read per packet gets the
 * host timing of one large read, whatever its packet size. */
void pcie_dma_read_chain_k(struct pcie_link *l, enum pcie_kind kind, unsigned flags, uint64_t bytes,
                           sim_time_t *chain, sim_cb_fn done, void *a, void *b);
/* For a DMA read of `bytes` that completed now: how long before now its
 * first completion (CplD) had fully arrived, when its completions came back
 * to back.  A device that streams the data on (cut-through) could use the
 * first bytes that much earlier. */
sim_time_t pcie_read_first_data_span_ps(const struct pcie_link *l, uint64_t bytes);

/* Traces (sim/trace.h, TRACE_G_PCIE): each operation's TLPs are one span
 * on the link's up or down track of host `id`; the device may name the QP
 * and PSN the next operation is for (cleared by it). */
void pcie_set_trace_id(struct pcie_link *l, uint32_t id);
void pcie_trace_ctx(struct pcie_link *l, uint32_t qpn, uint32_t psn);

struct pcie_counters {
    uint64_t tlp_up, tlp_down;     /* TLPs per direction */
    uint64_t bytes_up, bytes_down; /* wire bytes per direction (headers included) */
    uint64_t payload_up, payload_down;
    uint64_t dma_reads, dma_writes, mmio_writes;
    /* per kind, both directions: a read counts its MRds and its CplDs */
    uint64_t kind_tlps[PCIE_K_COUNT], kind_bytes[PCIE_K_COUNT]; /* wire bytes, headers incl. */
    uint64_t tag_stalls;    /* MRds that waited for a free tag */
    uint64_t credit_stalls; /* TLPs that waited for flow-control credits */
    uint64_t rmw_writes;    /* DMA writes the root complex had to merge (partial lines) */
    uint64_t rmw_ps;        /* ... its write path held for them in all */
};
const struct pcie_counters *pcie_link_counters(const struct pcie_link *l);
/* The link's max payload size (a posted write is cut into MWr TLPs of it). */
uint32_t pcie_link_mps_bytes(const struct pcie_link *l);

#endif /* RNICSIM_PCIE_H */
