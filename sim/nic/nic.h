/* The RNIC model: verbs objects as the NIC sees them (PD, MR, CQ, QP
 * context with its send and receive queues) and the engines that move data
 * (requester, responder, completer), modelled on Linux rxe.
 *
 * Split of work with verbs_shim/:
 *  - verbs_shim/ is the "provider + kernel verbs" layer: it owns the public
 *    ibv_* structs, validates arguments and QP transitions/attribute masks
 *    (errno on misuse), charges CPU time, and calls the functions below.
 *  - sim/nic/ owns the hardware state and all timing below the doorbell:
 *    doorbell MMIO, WQE fetch, payload DMA, packets, responder checks,
 *    placement, ACKs, CQE DMA writes.  Wire and protection errors become
 *    completion statuses here, exactly as real verbs report them.
 *
 * The NIC includes <infiniband/verbs.h> for the enums and for struct ibv_wc:
 * a CQE *is* a struct ibv_wc once it is visible to software. */
#ifndef RNICSIM_NIC_H
#define RNICSIM_NIC_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>

#include "../fabric/fabric.h"
#include "../host.h"
#include "../pcie/pcie.h"
#include "../pkt.h"
#include "../sim.h"

/* ---------------------------------------------------------------- profile */

/* Transport personality (DESIGN.md "Transports"): how the NIC carries
 * what an RC QP posts.  IB is InfiniBand / RoCE RC; IB_AR is RC over
 * adaptive routing (packets of a message may arrive and be placed out of
 * order, messages complete in order); EFA_SRD and ONERMA give RC-API
 * programs the semantics of AWS EFA's SRD and of Google's 1RMA. */
enum nic_transport {
    NIC_TRANSPORT_IB,
    NIC_TRANSPORT_IB_AR,
    NIC_TRANSPORT_EFA_SRD,
    NIC_TRANSPORT_ONERMA,
};
extern const char *const nic_transport_names[]; /* "ib", "ib-ar", "efa-srd", "1rma", NULL */

/* DMA ordering of payload writes into host memory (DESIGN.md "RNIC"):
 * STRICT: a message's bytes land in address order and before its CQE;
 * RELAXED: the write chunks of a message may land in any order; only the
 * CQE is ordered after all of them.  An MR registered with
 * IBV_ACCESS_RELAXED_ORDERING is relaxed whatever this says. */
enum nic_dma_ordering {
    NIC_DMA_STRICT,
    NIC_DMA_RELAXED,
};
extern const char *const nic_dma_ordering_names[]; /* "strict", "relaxed", NULL */

/* What deregistering an MR invalidates in the NIC's translation caches:
 * its own entries, or everything (a cache-wide flush). */
enum nic_dereg_flush {
    NIC_DEREG_FLUSH_MR,
    NIC_DEREG_FLUSH_ALL,
};
extern const char *const nic_dereg_flush_names[]; /* "mr", "all", NULL */

/* Replacement inside a set of the NIC's caches (cache.h). */
enum nic_cache_replacement {
    NIC_CACHE_RANDOM,
    NIC_CACHE_LRU,
};
extern const char *const nic_cache_replacement_names[]; /* "random", "lru", NULL */

/* What one entry of the requester's READ/atomic-context cache holds
 * (ctx.c): the response state of a QP (ConnectX-5/6), or of one
 * outstanding READ/atomic, its WQE (ConnectX-3). */
enum nic_rd_ctx_per {
    NIC_RD_CTX_PER_QP,
    NIC_RD_CTX_PER_READ,
};
extern const char *const nic_rd_ctx_per_names[]; /* "qp", "read", NULL */

/* What the port reports itself as: a RoCEv2 (Ethernet) port, with GIDs
 * and no LIDs, or an InfiniBand port with LID node_id + 1, which
 * addresses without a GRH work on (e.g. ibv_rc_pingpong without -g).  The
 * packets and their timing are the same model either way. */
enum nic_link_layer {
    NIC_LINK_ETHERNET,
    NIC_LINK_IB,
};
extern const char *const nic_link_layer_names[]; /* "ethernet", "ib", NULL */

struct nic_params {
    /* what ibv_query_device reports as the device's identity (programs
     * such as perftest pick defaults by it) */
    uint32_t vendor_id, vendor_part_id;
    uint64_t port_rate_bps;      /* reported by query_port; the link sets the real rate */
    enum ibv_mtu max_mtu;        /* largest path MTU the port accepts */
    sim_time_t doorbell_proc_ps; /* doorbell seen -> WQE fetch issued */
    sim_time_t wqe_proc_ps;      /* per WQE processing in the send engine */
    sim_time_t tx_pkt_proc_ps;   /* per packet built (send pipeline occupancy) */
    sim_time_t rx_pkt_proc_ps;   /* per packet received (receive pipeline occupancy) */
    uint32_t wqe_bytes;          /* WQE size fetched per WR (64 B basic segment) */
    uint32_t wqe_sge_bytes;      /* extra bytes per SGE (16 B data segment) */
    uint32_t cqe_bytes;          /* CQE DMA write size (64 B on mlx5) */
    uint32_t max_inline_bytes;   /* max_inline_data reported / accepted */
    bool blueflame;              /* small WQEs written through the doorbell (no fetch) */
    uint32_t max_qp_rd_atom;     /* device limit for max_rd_atomic */
    uint32_t max_qp_wr, max_sge, max_cqe, max_qp, max_cq, max_mr;
    /* shared receive queues (srq.c): 0 = the NIC_DEFAULT_MAX_SRQ* below */
    uint32_t max_srq, max_srq_wr, max_srq_sge;
    /* receive (port) buffer per priority (VL), bytes (0 = unbounded): an
     * arriving packet holds ceil(frame / 64) 64 B blocks of it until its
     * processing unit is done with it; on InfiniBand ports (link_layer ib)
     * the link's credits (IBA 7.9, link_set_credits) stop the sender when
     * it is full.  At least one packet of the largest MTU. */
    uint64_t rx_buffer_bytes;
    uint32_t ack_every_pkts;   /* responder coalescing: ACK at least every N packets */
    sim_time_t atomic_proc_ps; /* atomic unit occupancy per op (plus the PCIe RMW) */
    uint32_t transport;        /* enum nic_transport */
    uint32_t dma_ordering;     /* enum nic_dma_ordering */
    uint32_t link_layer;       /* enum nic_link_layer (what query_port reports) */
    /* transport personalities (srd.c, onerma.c; docs/nic.md) */
    sim_time_t srd_rto_ps;        /* EFA SRD: retransmission timeout of an unacknowledged packet */
    sim_time_t onerma_timeout_ps; /* 1RMA: an op not completed by then fails (fail-fast) */
    /* DMA ordering and IB adaptive routing (dma.c, resp.c; docs/nic.md) */
    sim_time_t dma_ro_max_delay_ps; /* relaxed: extra visibility delay of a write chunk, <= this */
    sim_time_t ar_max_delay_ps;     /* ib-ar: extra delay of each request packet, <= this */
    sim_time_t ar_nak_delay_ps;     /* ib-ar: a PSN hole this old is a loss: sequence NAK */
    /* caches inside the RNIC (ctx.c, xlate.c, cache.c; docs/nic.md "Caches") */
    uint32_t pus;               /* processing units: QP-context fetches in flight at most */
    uint32_t qpc_cache_entries; /* QP contexts the NIC holds (0 = no cache model) */
    uint32_t qpc_bytes;         /* one QP context, read over PCIe on a miss */
    uint32_t mpt_cache_entries; /* memory-key (MPT) entries held (0 = no model) */
    uint32_t mpt_bytes;         /* one MPT entry, read on a miss */
    uint32_t mtt_cache_entries; /* page translations (MTT) held (0 = no model) */
    uint32_t mtt_bytes;         /* one MTT entry, read on a miss */
    uint32_t xlate_max_misses;  /* translation fetches in flight at most */
    uint32_t qpc_ways, mpt_ways, mtt_ways; /* set-associativity (0 = fully associative) */
    uint32_t cache_replacement;            /* enum nic_cache_replacement */
    /* requester READ/atomic contexts (comp.c): QPs with READs or atomics
     * outstanding whose response state the NIC holds on chip; a response
     * for a QP that is not there waits for a PCIe read of it */
    uint32_t rd_ctx_entries; /* 0 = no model */
    uint32_t rd_ctx_ways;
    uint32_t rd_ctx_bytes;
    /* how a miss is handled, per generation: at most rd_ctx_max_misses
     * fetched at once, context and tracker misses in one FIFO (0 = nic.pus
     * per table, overlapped over the processing units), a context miss
     * holding the miss handler rd_ctx_miss_proc_ps after its PCIe read
     * (ConnectX-3: one at a time, a slow path; docs/nic.md) */
    uint32_t rd_ctx_max_misses;
    uint32_t rd_ctx_per; /* enum nic_rd_ctx_per */
    /* with contexts per outstanding READ: QPs with READs/atomics
     * outstanding whose READ-response tracker (expected response PSN, which
     * WQE it fills) is on chip as well, fully associative LRU; a response
     * of a QP that is not there is a miss of the same handler (0 = none) */
    uint32_t rd_qp_entries;
    /* outstanding-WQE cache (ctx.c): the send WQEs the NIC started and
     * holds until they complete (wqe_cache_entries, 0 = no model); a
     * response completing one that was evicted re-reads it (nic.wqe bytes)
     * over PCIe, holding its processing unit; misses overlap over nic.pus */
    uint32_t wqe_cache_entries;
    uint32_t wqe_cache_ways;
    /* receive-WQE fetch (ctx.c): a message that consumes a receive WQE
     * needs it on chip; the NIC holds prefetched WQEs for rwqe_cache_entries
     * receive queues (QPs' or SRQs'; 0 = no model) and fetches rwqe_prefetch
     * WQEs of rwqe_bytes each by one PCIe read when it has none */
    uint32_t rwqe_cache_entries;
    uint32_t rwqe_ways;
    uint32_t rwqe_prefetch;
    uint32_t rwqe_bytes;
    /* transmit arbitration (nic.c tx_take): a source (a QP's requester or
     * responder) sends up to tx_burst_pkts packets in a row before the next
     * source with packets ready gets its turn (1 = one packet each in turn) */
    uint32_t tx_burst_pkts;
    sim_time_t rd_ctx_miss_proc_ps;
    /* responder READ engine (resp.c): every accepted READ request occupies
     * it this long, one after the other; at most max_rd_resp READs are
     * served (responses not yet all built) at once per NIC (0 = no limit) */
    sim_time_t rd_req_proc_ps;
    uint32_t max_rd_resp;
    /* atomics (atomic.c): device memory is dm_banks banks, each busy
     * dm_access_ps per access (its bandwidth) */
    uint32_t dm_banks;
    /* memory registration (mr.c; docs/nic.md "Memory registration"): the
     * driver talks to the NIC through a command interface that executes
     * one command at a time, cmd_proc_ps each; a registration writes its
     * page translations mtt_per_cmd per command.  mr_write_allocate: the
     * NIC's MPT/MTT caches take the entries a registration writes (evicting
     * others); dereg_flush: what a deregistration invalidates. */
    sim_time_t cmd_proc_ps;
    uint32_t mtt_per_cmd;
    bool mr_write_allocate;
    uint32_t dereg_flush; /* enum nic_dereg_flush */
    bool hugepages;       /* host memory on 2 MiB pages: one MTT entry per 2 MiB */
    /* device memory (dm.c) */
    uint64_t dm_bytes;       /* on-NIC memory for ibv_alloc_dm (0 = none) */
    sim_time_t dm_access_ps; /* one access to device memory by the NIC */
    bool cqe_compression;    /* mlx5 CQE compression: 8 B mini-CQEs after a full one */
    /* RIMA append queues (aq.c; docs/rima.md "NIC model") */
    uint32_t rima_tpt_entries; /* tail pointer table entries = AQs at most (0 = no RIMA) */
    sim_time_t rima_tpt_ps;    /* one TPT lookup + tail add (per appended message) */
    sim_time_t rima_alloc_ps;  /* host: background allocation of one chunk after a watermark IRQ */
    /* DCQCN congestion control (dcqcn.c; docs/lossless.md) */
    bool dcqcn;                        /* ECT on sent packets, CNPs, rate control */
    sim_time_t cnp_interval_ps;        /* a QP sends at most one CNP per this */
    sim_time_t dcqcn_timer_ps;         /* rate-increase timer T and alpha timer K */
    uint64_t dcqcn_byte_counter_bytes; /* byte counter B */
    uint64_t dcqcn_rai_bps;            /* additive increase R_AI */
    uint64_t dcqcn_rhai_bps;           /* hyper increase R_HAI */
    uint64_t dcqcn_min_rate_bps;       /* a QP is never cut below this */
    uint32_t dcqcn_f;                  /* fast-recovery stages F */
    uint32_t cnp_prio;                 /* priority of CNPs */
};

/* ConnectX-5-like defaults; each field's source is in nic.c. */
void nic_params_default(struct nic_params *p);

/* ---------------------------------------------------------------- objects */

struct nic;

struct nic_pd {
    struct nic *nic;
    uint32_t handle;
    uint32_t n_users; /* MRs + QPs using it */
};

struct nic_mr {
    struct nic *nic;
    struct nic_pd *pd;
    uint8_t *host_addr; /* where the bytes live in simulator memory */
    uint64_t iova;      /* address the NIC translates (== host_addr unless iova2) */
    uint64_t length;
    uint32_t lkey, rkey;
    int access; /* enum ibv_access_flags */
    bool valid;
    uint8_t page_shift; /* translation page: 12 (4 KiB) or 21 (2 MiB huge pages) */
    uint64_t wire_base; /* the address iova stands for on the wire (nic_wire_va) */
    struct nic_dm *dm;  /* registered on device memory (ibv_reg_dm_mr), else NULL */
    /* on peer memory (a GPU's / FPGA's, nic_peer_mem_add): DMA goes over
     * that device's PCIe link, else NULL */
    struct pcie_link *peer;
    /* Whose memory the bytes are (hostmem.c): NULL = the simulator's own,
     * at host_addr; else an accessor (emulation mode: another process's
     * registered memory, emu/daemon/remote_mem.c). */
    const struct nic_host_mem *mem;
    void *mem_ctx;
};

/* Access to memory behind an MR that is not the simulator's own.  Each
 * call names a range inside the MR (hostmem.c checks); 0 or an errno. */
struct nic_host_mem {
    int (*read)(void *ctx, const struct nic_mr *mr, void *dst, const uint8_t *host, size_t len);
    int (*write)(void *ctx, const struct nic_mr *mr, uint8_t *host, const void *src, size_t len);
};

/* Device memory (ibv_alloc_dm): bytes inside the NIC.  RDMA to an MR on
 * it never crosses PCIe. */
struct nic_dm {
    struct nic *nic;
    uint8_t *buf; /* simulator memory standing for the on-chip SRAM */
    uint64_t length;
    uint64_t rounded; /* what it takes of nic.dm_bytes */
    uint32_t n_mrs;   /* MRs registered on it (free -> EBUSY) */
};

struct nic_cq {
    struct nic *nic;
    struct host *host;
    uint32_t id;
    struct ibv_wc *ring; /* visible CQEs; written by nic_cq_push() */
    sim_time_t *ring_ps; /* when each became visible (completion timestamps) */
    uint32_t depth;
    uint64_t prod, cons;
    bool overflowed;       /* a CQE found the ring full: the CQ is in error (cq.c) */
    uint64_t cqes_dropped; /* CQEs not written because the CQ is in error */
    /* CQ error (overrun): one call, when it happens (IBV_EVENT_CQ_ERR) */
    sim_cb_fn error_fn;
    void *error_a, *error_b;
    uint32_t n_qps; /* QPs attached (destroy -> EBUSY) */
    /* completion-channel notification: one call per arm, for the next CQE */
    bool armed, armed_solicited_only;
    sim_cb_fn notify_fn;
    void *notify_a, *notify_b;
    struct sim_waitq wq; /* processes blocked on this CQ specifically */
};

enum { NIC_MAX_SGE = 16, NIC_MAX_INLINE_BYTES = 512 };
/* UD: every receive buffer starts with a 40-byte slot for the GRH (IBA
 * 11.4.1.2 "Post Receive Request"); byte_len includes it. */
enum { NIC_GRH_BYTES = 40 };

struct nic_sge {
    uint64_t addr;
    uint32_t length;
    uint32_t lkey;
};

struct nic_send_wqe {
    uint64_t wr_id;
    enum ibv_wr_opcode opcode;
    unsigned send_flags;
    uint32_t imm_data; /* network byte order, as given */
    uint32_t num_sge;
    struct nic_sge sge[NIC_MAX_SGE];
    uint64_t remote_addr;
    uint32_t rkey;
    uint64_t compare_add, swap;
    uint32_t length; /* total bytes (sum of SGEs, or inline length) */
    /* UD: destination resolved from the AH, Q_Key to send (already the
     * QP's Q_Key if the WR's had the high bit set) */
    uint32_t ud_node, ud_qpn, ud_qkey;
    bool ud_grh; /* UD: the AH is global (is_global): an IB packet carries a GRH */
    /* UD: the AH's SL and GRH fields (pkt.ib_sl, grh_*) */
    uint8_t ud_sl, ud_tclass, ud_hop_limit;
    uint32_t ud_flow_label;
    uint32_t xrc_srqn; /* XRC initiator: the target's SRQ (wr.qp_type.xrc.remote_srqn) */
    /* IBV_SEND_INLINE payload (`length` bytes).  In a WQE being posted:
     * the poster's copy.  In the NIC's send queue: the slot's own buffer,
     * allocated when the slot first holds an inline WQE and grown to the
     * largest payload it has held (inline_cap), freed with the QP; a slot
     * that never held one has none.  (A 512-byte array in every slot was
     * most of the memory of a run with 12 k QPs of 256 WQEs: docs/nic.md
     * "Send queue memory".)  Slots trade buffers when WQEs move
     * (nic_sq_move). */
    uint8_t *inline_data;
    uint32_t inline_cap;
    bool signaled; /* IBV_SEND_SIGNALED or sq_sig_all */
    /* engine state (requester/completer) */
    uint32_t first_psn, last_psn;
    uint32_t state;
};

struct nic_recv_wqe {
    uint64_t wr_id;
    uint32_t num_sge;
    struct nic_sge sge[NIC_MAX_SGE];
    uint32_t length;
};

/* A ring of posted receive WQEs: [head, tail) posted, not yet taken.  A
 * QP's own receive queue, or the ring of a shared receive queue. */
struct nic_rq {
    struct nic_recv_wqe *ring;
    uint32_t depth; /* the limit: max_recv_wr (max_wr of an SRQ) */
    uint32_t cap;   /* slots in ring: a QP's grows to depth as posting needs (qp.c) */
    uint64_t head, tail;
    uint32_t prefetched; /* WQEs the NIC fetched ahead and holds (ctx.c) */
};

/* XRC domain (xrc.c, IBA Annex A14): what ties XRC SRQs to the XRC
 * target QPs allowed to fill them.  A target QP delivers a message only
 * into an SRQ of its own domain. */
struct nic_xrcd {
    struct nic *nic;
    uint32_t xrcdn;
    uint32_t n_users; /* XRC SRQs and target QPs in it (close -> EBUSY) */
    /* a domain opened through a file (ibv_open_xrcd with an fd) is found
     * again by that file's identity on this device; `opens` counts the
     * handles open on it */
    bool shared;
    uint64_t file_dev, file_ino;
    uint32_t opens;
};

/* Shared receive queue (srq.c): one ring of receive WQEs that every QP
 * created with it consumes, in arrival order of their messages.  The
 * limit event (IBV_EVENT_SRQ_LIMIT_REACHED) fires once when a QP takes a
 * WQE and fewer than `limit` stay posted; then the SRQ is disarmed
 * (limit = 0) until IBV_SRQ_LIMIT arms it again. */
struct nic_srq {
    struct nic *nic;
    uint32_t srqn;
    struct nic_pd *pd; /* receive SGEs are checked against it */
    struct nic_rq rq;
    uint32_t max_sge;
    uint32_t limit;  /* armed while non-zero */
    uint32_t n_qps;  /* QPs attached (destroy -> EBUSY) */
    uint64_t taken;  /* WQEs taken by QPs since creation */
    uint32_t events; /* limit events raised */
    sim_cb_fn limit_fn;
    void *limit_a, *limit_b;
    /* XRC SRQ (xrc.c): its domain and the CQ its receive completions go
     * to (whichever target QP took the WQE); NULL for a basic SRQ */
    struct nic_xrcd *xrcd;
    struct nic_cq *cq;
};

/* Which side of XRC a QP is (xrc.c).  An XRC QP is an RC QP to the
 * engines (init.qp_type IBV_QPT_RC): the initiator has no receive side
 * and puts the XRC opcodes and the XRCETH on its requests; the target has
 * no send queue and no receive queue, and takes each message's receive
 * WQE from the XRC SRQ of its domain that the XRCETH names. */
enum nic_xrc_role { NIC_XRC_NONE, NIC_XRC_INI, NIC_XRC_TGT };

struct nic_qp_init {
    enum ibv_qp_type qp_type;
    enum nic_xrc_role xrc; /* NIC_XRC_NONE unless XRC (qp_type is then RC) */
    struct nic_xrcd *xrcd; /* the target's domain (NIC_XRC_TGT) */
    struct nic_pd *pd;
    struct nic_cq *send_cq, *recv_cq;
    struct nic_srq *srq;   /* NULL: the QP has its own receive queue */
    struct ibv_qp_cap cap; /* already validated and rounded by the shim */
    bool sq_sig_all;
};

struct nic_qp_engine; /* requester/responder/completer state, private to sim/nic */

struct nic_qp {
    struct nic *nic;
    uint32_t qpn;
    struct nic_qp_init init;
    enum ibv_qp_state state;
    struct ibv_qp_attr attr; /* current attributes (as last modified) */
    uint32_t dest_node;      /* fabric node resolved from attr.ah_attr */

    /* send queue: [sq_comp, sq_tail) posted and not yet completed;
     * [sq_next, sq_db) rung but not yet started by the requester. */
    struct nic_send_wqe *sq;
    uint32_t sq_depth; /* the limit: max_send_wr */
    uint32_t sq_cap;   /* slots in sq: grows to sq_depth as posting needs (qp.c) */
    uint64_t sq_comp, sq_next, sq_db, sq_tail;
    /* receive queue: the QP's own ring (unused with an SRQ), or the SRQ
     * with the WQE taken from it for the message in progress (srq_wqe,
     * valid while srq_held).  The engines use the nic_rq_* helpers of
     * nic_priv.h, which cover both. */
    struct nic_rq rq;
    struct nic_srq *srq;
    struct nic_recv_wqe srq_wqe;
    bool srq_held;

    struct nic_qp_engine *eng;
    /* the QP went to error because it cannot report completions (its CQ
     * overran): one call (IBV_EVENT_QP_FATAL) */
    sim_cb_fn fatal_fn;
    void *fatal_a, *fatal_b;
};

/* RIMA append queue (aq.c; include/rnicsim/rima.h, docs/rima.md): a
 * virtual region of region_bytes managed as a ring.  head/tail are offsets
 * in [0, region_bytes); used_bytes = bytes from head to tail (messages and
 * wrap padding), so (head + used) % region == tail.  Physical memory is
 * committed per chunk (committed[i] for chunk i of chunk_bytes).  The TPT
 * entry (index `slot` of the NIC's table) is this structure's tail. */
/* Queue numbers: slot in the low NIC_AQ_SLOT_BITS, a generation in the
 * high 32 - NIC_AQ_SLOT_BITS bits (a slot must be created and destroyed
 * 2^20 - 1 times before a number comes back); rima.tpt_entries is at most
 * NIC_AQ_MAX_TPT_ENTRIES. */
enum { NIC_AQ_SLOT_BITS = 12 };
#define NIC_AQ_MAX_TPT_ENTRIES (1u << NIC_AQ_SLOT_BITS)

struct nic_aq {
    struct nic *nic;
    struct nic_pd *pd;
    struct nic_cq *cq;
    struct nic_mr *mr; /* the region, registered internally (LOCAL_WRITE) */
    uint32_t aqn;      /* generation << NIC_AQ_SLOT_BITS | slot: what senders name */
    uint64_t serial;   /* unique per NIC and AQ ever created (never reused) */
    uint64_t epoch;    /* bumped when head and tail move to 0 (reset / restart) */
    uint32_t slot;
    uint8_t *buf;
    uint64_t region_bytes, chunk_bytes, watermark_bytes;
    uint32_t flags; /* enum ibv_aq_flags */
    uint64_t head, tail, used_bytes;
    uint32_t n_chunks, n_committed;
    uint8_t *committed;
    bool alloc_pending; /* a chunk allocation in flight (one at a time) */
    uint32_t alloc_chunk;
    struct sim_event alloc_ev;
    uint64_t peak_used_bytes, peak_committed_bytes;
    uint64_t messages, bytes, watermark_irqs, chunks_allocated, chunks_freed, rnr_naks;
    uint64_t head_updates_ignored; /* MMIO head updates no longer valid on arrival */
    uint64_t need_bytes;           /* the last refused message's need from the tail (0: none) */
};

/* Create-time configuration (already validated by the shim). */
struct nic_aq_cfg {
    uint8_t *buf;
    uint64_t region_bytes, chunk_bytes, watermark_bytes;
    uint32_t initial_chunks, flags;
};

/* ---------------------------------------------------------------- device */

struct nic_counters {
    uint64_t doorbells, wqes_fetched, wqes_completed;
    uint64_t pkts_tx, pkts_rx, bytes_tx, bytes_rx;
    uint64_t acks_tx, acks_rx, naks_tx, naks_rx;
    uint64_t cqes_written;
    uint64_t dma_reads, dma_writes;
    uint64_t rx_drops;     /* packets dropped by the NIC: unknown / wrong-state QPs, bad PSN,
                              Q_Key mismatch, UC messages abandoned, UD without a receive */
    uint64_t qkey_drops;   /* UD packets whose DETH Q_Key is not the QP's */
    uint64_t uc_msg_drops; /* UC messages abandoned part-way or refused (gap, no receive,
                              access); whole messages lost on the wire are not seen */
    uint64_t ud_no_recv;   /* UD messages dropped for want of a posted receive */
    uint64_t xrc_bad_srqn; /* XRC requests NAKed: XRCETH names no XRC SRQ of the domain */
    /* READ/atomic requests held for a slot of a full responder work FIFO (resp.c) */
    uint64_t resp_work_waits;
    /* transport personalities */
    uint64_t srd_retransmits; /* EFA SRD packets sent again after a timeout or an RNR NAK */
    uint64_t srd_duplicates;  /* EFA SRD messages received again (ACKed, not delivered) */
    uint64_t srd_rnr_naks;    /* EFA SRD SENDs refused for want of a posted receive */
    uint64_t onerma_timeouts; /* 1RMA ops failed by the fail-fast timeout */
    uint64_t wr_refused;      /* WRs refused at post time: opcode or size the transport lacks */
    /* DMA ordering (dma.c) */
    uint64_t dma_ro_chunks;    /* payload chunks (one MPS-sized MWr each) written relaxed */
    uint64_t dma_ro_overtaken; /* relaxed chunks visible after a chunk issued later */
    uint64_t dma_strict_waits; /* strict writes (CQEs, ...) and reads held behind relaxed ones */
    /* IB adaptive routing (resp.c) */
    uint64_t ar_ooo_pkts;     /* request packets that arrived ahead of a missing earlier PSN */
    uint64_t ar_ooo_placed;   /* ... of which placed at once (packets of the current message) */
    uint64_t ar_dup_drops;    /* copies of a packet already held in the reorder window */
    uint64_t ar_window_drops; /* packets beyond the reorder window (NIC_AR_WINDOW PSNs) */
    uint64_t ar_gap_naks;     /* PSN sequence NAKs for a hole older than ar_nak_delay_ps */
    /* caches inside the RNIC: copied from the caches' own counters when read */
    uint64_t qpc_hits, qpc_misses, qpc_evictions;
    uint64_t mpt_hits, mpt_misses, mtt_hits, mtt_misses, mtt_evictions;
    uint64_t rd_ctx_hits, rd_ctx_misses;       /* requester READ/atomic contexts */
    uint64_t rd_qp_hits, rd_qp_misses;         /* requester per-QP READ-response trackers */
    uint64_t wqe_cache_hits, wqe_cache_misses; /* outstanding send WQEs */
    uint64_t rwqe_hits, rwqe_misses;           /* receive WQEs on chip / fetched */
    uint64_t rd_engine_waits;                  /* READ requests that waited for the READ engine */
    uint64_t rx_pu_stalls;    /* times the receive pipeline stopped: every PU waited */
    uint64_t acks_merged;     /* held ACKs dropped for a later one of their QP (cumulative) */
    uint64_t xlate_waits;     /* DMA operations held in the in-order translation unit */
    uint64_t dm_accesses;     /* NIC accesses to device memory (no PCIe) */
    uint64_t atomic_waits;    /* atomics held behind one on the same address */
    uint64_t cqes_compressed; /* CQEs written as 8 B mini-CQEs */
    /* most of the receive buffer held at once (nic.rx_buffer) */
    uint64_t rx_buf_max_bytes;
    /* RIMA (aq.c) */
    uint64_t rima_appends;  /* append messages accepted (tail advanced) */
    uint64_t rima_rnr_naks; /* append messages refused for want of room */
    /* DCQCN (dcqcn.c) */
    uint64_t cnps_tx, cnps_rx; /* congestion notification packets sent / received */
    /* memory registration (mr.c): bytes of the MRs registered now, and the
     * most ever registered at once (rnicsim table2's memory columns) */
    uint64_t mr_bytes, mr_bytes_peak;
    uint64_t nic_cmds;          /* commands executed by the command interface (mr.c) */
    uint64_t xlate_invalidated; /* MPT/MTT cache entries dropped by (de/re)registration */
};

/* `node_id` is the NIC's fabric address (LID = node_id + 1, GID index 0 is
 * the IPv4-mapped RoCEv2 GID ::ffff:10.0.0.(node_id+1)). */
struct nic *nic_create(struct sim *sim, struct host *host, uint32_t node_id,
                       const struct nic_params *p, struct pcie_link *pcie, struct pkt_pool *pool);
void nic_destroy(struct nic *nic);
/* Egress to the fabric; ingress arrives through nic_sink(). */
void nic_attach_uplink(struct nic *nic, struct link *uplink);
/* The receive buffer (nic.rx_buffer) a packet of the largest MTU needs:
 * 4 KiB of payload + the largest IB headers (LRH, GRH, BTH, RETH, ICRC,
 * VCRC: 86 B), in 64 B blocks. */
#define NIC_RX_BUF_MIN_BYTES 4224u
/* Bytes of the receive buffer held now at priority (VL) `prio`. */
uint64_t nic_rx_buf_bytes(const struct nic *nic, unsigned prio);
struct fabric_sink nic_sink(struct nic *nic);
const struct nic_params *nic_get_params(const struct nic *nic);
const struct nic_counters *nic_get_counters(struct nic *nic);
/* The verbs layer refused a WR because this NIC's transport lacks its
 * opcode or size (counted; `rnicsim check-order` reports "not runnable"). */
void nic_note_wr_refused(struct nic *nic);
uint32_t nic_node_id(const struct nic *nic);
/* The framing of a packet this NIC sends to an address vector that is
 * global (`grh`) or not (sim/pkt.h): RoCEv2 on an Ethernet port; on an
 * InfiniBand port an LRH, and a GRH only for a global address vector (IBA
 * 8.3.1: a packet inside the subnet carries none). */
enum pkt_framing nic_framing(const struct nic *nic, bool grh);
/* False when the NIC's packet pool carries no payload bytes (`payload:
 * none`): DMA moves sizes, no bytes are read or written in host memory. */
bool nic_payload_carried(const struct nic *nic);
struct host *nic_host(const struct nic *nic);
/* RoCEv2 UDP source port of a flow between two QPNs (the kernel's
 * rdma_calc_flow_label + rdma_get_udp_sport); qp.c. */
uint16_t nic_roce_udp_sport(uint32_t lqpn, uint32_t rqpn);
/* Resolve a GID / LID to a fabric node id; -1 if unknown. */
int64_t nic_node_from_gid(const union ibv_gid *gid);
void nic_gid_of_node(uint32_t node_id, union ibv_gid *gid);

/* PD / MR.  Return NULL with errno set on failure. */
struct nic_pd *nic_pd_alloc(struct nic *nic);
int nic_pd_free(struct nic_pd *pd); /* EBUSY while in use */
struct nic_mr *nic_mr_reg(struct nic_pd *pd, void *addr, uint64_t length, uint64_t iova,
                          int access);
int nic_mr_dereg(struct nic_mr *mr);
/* Change an MR in place (ibv_rereg_mr): flags are enum ibv_rereg_mr_flags;
 * CHANGE_TRANSLATION takes addr / length / iova, CHANGE_PD pd,
 * CHANGE_ACCESS access.  The keys stay; the NIC's cached translations of
 * the MR are invalidated.  Returns 0 or an errno (the MR is unchanged). */
int nic_mr_rereg(struct nic_mr *mr, int flags, struct nic_pd *pd, void *addr, uint64_t length,
                 uint64_t iova, int access);
/* Pages (of the NIC's translation page size) that [addr, addr+length) spans. */
uint64_t nic_mr_pages(const struct nic *nic, const void *addr, uint64_t length);
/* The pages of a registered MR, of the page size it was registered with
 * (also once its memory is gone: deregistration after free). */
uint64_t nic_mr_pages_of(const struct nic_mr *mr);
/* `n` commands through the NIC's command interface issued now (after those
 * already queued): the delay until they are done.  The verbs layer sleeps
 * the calling thread that long (ibv_reg_mr waits for the firmware). */
sim_time_t nic_cmd_delay(struct nic *nic, uint32_t n);

/* The NIC's reads and writes of an MR's bytes (hostmem.c): a memcpy, or
 * mr->mem.  A range that is not inside the MR is refused (EFAULT) and
 * nothing is copied; a refused or failed read leaves zeros in `dst`. */
void nic_mr_set_host_mem(struct nic_mr *mr, const struct nic_host_mem *mem, void *ctx);
int nic_host_read(const struct nic_mr *mr, void *dst, const uint8_t *host, size_t len);
int nic_host_write(const struct nic_mr *mr, uint8_t *host, const void *src, size_t len);
/* Device memory: NULL with errno ENOMEM past nic.dm_bytes in all (EINVAL
 * for length 0, EOPNOTSUPP when the NIC has none); free: EBUSY while MRs
 * use it. */
struct nic_dm *nic_dm_alloc(struct nic *nic, uint64_t length);
int nic_dm_free(struct nic_dm *dm);
/* MR over [offset, offset+length) of the device memory; addresses are
 * zero-based (iova = offset 0 of the MR), as mlx5 requires. */
struct nic_mr *nic_mr_reg_dm(struct nic_pd *pd, struct nic_dm *dm, uint64_t offset, uint64_t length,
                             int access);

/* The address a packet carries for `va` in the MR of key `rkey` (RETH,
 * AtomicETH), as packet captures write it: an MR registered at its
 * process address (iova == the buffer) is given, at registration, a wire
 * address of its own (NIC_WIRE_VA_BASE upwards, page-aligned, in
 * registration order), as if the simulated host had mapped its buffers
 * one after another; so a capture is the same bytes in every run although
 * the buffers' process addresses differ.  An MR with an iova the program
 * chose (ibv_reg_mr_iova2, device memory) keeps it.  False if no MR has
 * that key. */
bool nic_wire_va(struct nic *nic, uint32_t rkey, uint64_t va, uint64_t *wire_va);
#define NIC_WIRE_VA_BASE 0x100000000ull
/* Peer memory (PeerDirect / GPUDirect RDMA; peer.c): [base, base+len)
 * is memory of another PCIe device of the host (a GPU, an FPGA's HBM
 * behind its BAR) that the NIC reaches peer-to-peer.  An MR registered
 * inside it has its DMA reads and writes timed on `link` (the device's
 * PCIe link model: its rate, its read latency) instead of the NIC's link
 * to host memory.  add: -1 with errno ENOMEM / EINVAL (overlap). */
int nic_peer_mem_add(struct nic *nic, void *base, uint64_t len, struct pcie_link *link);
void nic_peer_mem_remove(struct nic *nic, void *base);

/* UD multicast (mcast.c; ibv_attach_mcast): a multicast GID names group
 * nic_mcast_group_of_gid(); a UD QP attached to a group receives a copy of
 * every packet sent to PKT_MCAST_NODE | group with destination QP 0xFFFFFF.
 * The NIC tells the fabric (set with nic_set_mcast_notify) when its first
 * QP joins a group and its last leaves; a join the fabric refuses fails
 * the attach with the notifier's errno (ENOTSUP: a ring has no multicast
 * tree).  attach: EINVAL (not UD / bad GID), ENOMEM, ENOTSUP; detach:
 * EINVAL (not attached). */
int64_t nic_mcast_group_of_gid(const union ibv_gid *gid);
int nic_mcast_attach(struct nic_qp *qp, uint32_t group);
int nic_mcast_detach(struct nic_qp *qp, uint32_t group);
typedef int (*nic_mcast_notify_fn)(void *ctx, uint32_t node, uint32_t group, bool join);
void nic_set_mcast_notify(struct nic *nic, nic_mcast_notify_fn fn, void *ctx);
#define NIC_MCAST_QPN 0xffffffu

/* CQ */
struct nic_cq *nic_cq_create(struct nic *nic, uint32_t depth);
int nic_cq_destroy(struct nic_cq *cq); /* EBUSY while QPs use it */
/* Take up to n visible CQEs.  No time is charged here.  nic_cq_poll_ts
 * also gives the simulated time each became visible (ts may be NULL). */
int nic_cq_poll(struct nic_cq *cq, int n, struct ibv_wc *wc);
int nic_cq_poll_ts(struct nic_cq *cq, int n, struct ibv_wc *wc, sim_time_t *ts);
/* Change the depth (ibv_resize_cq): EINVAL if 0, above max_cqe or below
 * the CQEs waiting to be polled; ENOMEM. */
int nic_cq_resize(struct nic_cq *cq, uint32_t depth);
/* Make a CQE visible now (called by the completer/responder when the CQE
 * DMA write lands): appends, wakes cq->wq and host->cqe_wq, fires an armed
 * notification. */
void nic_cq_push(struct nic_cq *cq, const struct ibv_wc *wc);
void nic_cq_arm(struct nic_cq *cq, bool solicited_only);
void nic_cq_set_notify(struct nic_cq *cq, sim_cb_fn fn, void *a, void *b);
/* fn(sim, a, b) once when the CQ overruns (a CQE finds the ring full): the
 * CQ is then in error and takes no more CQEs, and every QP completing into
 * it goes to the error state with its fatal_fn called (IBA 11.6.3.1, CQ
 * error and local work queue catastrophic error). */
void nic_cq_set_error_notify(struct nic_cq *cq, sim_cb_fn fn, void *a, void *b);

/* QP.  The shim has validated the transition and attribute mask. */
struct nic_qp *nic_qp_create(struct nic *nic, const struct nic_qp_init *init);
int nic_qp_destroy(struct nic_qp *qp);
int nic_qp_modify(struct nic_qp *qp, const struct ibv_qp_attr *attr, int attr_mask);
/* fn(sim, a, b) when the QP goes to error because its CQ overran. */
void nic_qp_set_fatal_notify(struct nic_qp *qp, sim_cb_fn fn, void *a, void *b);
struct nic_qp *nic_qp_lookup(struct nic *nic, uint32_t qpn);

/* Append WQEs to the queues (the CPU writing into the host-memory rings).
 * Return ENOMEM when the queue is full (the rest are not posted); a QP
 * with an SRQ has no receive queue of its own: nic_rq_append is ENOMEM. */
int nic_sq_append(struct nic_qp *qp, const struct nic_send_wqe *wqe);
int nic_rq_append(struct nic_qp *qp, const struct nic_recv_wqe *wqe);
/* SRQ.  The shim has validated max_wr / max_sge against nic_srq_caps.
 * Return NULL with errno set on failure. */
struct nic_srq *nic_srq_create(struct nic_pd *pd, uint32_t max_wr, uint32_t max_sge);
int nic_srq_destroy(struct nic_srq *srq); /* EBUSY while QPs use it */
/* XRC (xrc.c).  Domains: open a private one (shared false) or the one of
 * file (dev, ino) on this NIC, the kernel's rules: none yet and !create
 * -> EAGAIN, one already and excl -> EINVAL; ENOMEM at 2^24 domains.
 * close: a handle of a shared domain with other handles open just goes;
 * else EBUSY while SRQs or target QPs use it.  An XRC SRQ
 * is an SRQ of `pd` in domain `xrcd` whose receive completions go to
 * `cq`; it counts as a user of both.  nic_xrc_srq_find: the live XRC SRQ
 * numbered `srqn` in `xrcd`, or NULL (unknown, not XRC, other domain). */
struct nic_xrcd *nic_xrcd_open(struct nic *nic, bool shared, uint64_t dev, uint64_t ino,
                               bool create, bool excl);
int nic_xrcd_close(struct nic_xrcd *xrcd);
struct nic_srq *nic_xrc_srq_create(struct nic_pd *pd, struct nic_xrcd *xrcd, struct nic_cq *cq,
                                   uint32_t max_wr, uint32_t max_sge);
struct nic_srq *nic_xrc_srq_find(const struct nic_xrcd *xrcd, uint32_t srqn);
/* Append a receive WQE to the SRQ; ENOMEM when full. */
int nic_srq_append(struct nic_srq *srq, const struct nic_recv_wqe *wqe);
/* Arm the limit event for `limit` (0 disarms). */
void nic_srq_arm(struct nic_srq *srq, uint32_t limit);
/* fn(sim, a, b) is called once per limit event, when it happens. */
void nic_srq_set_limit_notify(struct nic_srq *srq, sim_cb_fn fn, void *a, void *b);
/* Receive WQEs posted and not yet taken by a QP. */
uint32_t nic_srq_count(const struct nic_srq *srq);
/* The device's SRQ limits: nic_params max_srq / max_srq_wr / max_srq_sge,
 * or the NIC_DEFAULT_MAX_SRQ* where those are 0; max_sge <= NIC_MAX_SGE. */
void nic_srq_caps(const struct nic *nic, uint32_t *max_srq, uint32_t *max_wr, uint32_t *max_sge);
/* ibv_devinfo -v on ConnectX-5 (MT4119): max_srq 8388608, max_srq_wr
 * 32767, max_srq_sge 31 (the model holds at most NIC_MAX_SGE). */
enum { NIC_DEFAULT_MAX_SRQ = 8388608, NIC_DEFAULT_MAX_SRQ_WR = 32767 };

/* RIMA append queues (aq.c).  create: NULL with errno EOPNOTSUPP (no
 * TPT), ENOMEM (TPT full, or the MR); `cfg` was validated by the shim.
 * The AQ counts as a user of its CQ (nic_cq_destroy -> EBUSY) and of its
 * PD (through its MR).  destroy: the TPT entry and the MR go at once. */
struct nic_aq *nic_aq_create(struct nic_pd *pd, struct nic_cq *cq, const struct nic_aq_cfg *cfg);
int nic_aq_destroy(struct nic_aq *aq);
/* Bytes the head would advance by if moved to `head` (an offset in
 * [0, region]; head == tail means "everything"), or -1 if `head` is not in
 * the used part [head, tail]. */
int64_t nic_aq_head_advance(const struct nic_aq *aq, uint64_t head);
/* Host software moved the head: an 8-byte MMIO write; the NIC applies it
 * (re-checked, reset-on-empty, chunks freed, watermark) when it arrives. */
void nic_aq_write_head(struct nic_aq *aq, uint64_t head);
/* Change the watermark / flags (control path, applied at once). */
void nic_aq_set_watermark(struct nic_aq *aq, uint64_t watermark_bytes);
void nic_aq_set_flags(struct nic_aq *aq, uint32_t flags);

/* Ring the send doorbell for everything appended so far: an MMIO write
 * crosses PCIe (carrying the WQE itself when BlueFlame applies) and the
 * requester starts when it arrives. */
void nic_sq_doorbell(struct nic_qp *qp);
/* The same when the provider decided how it rang: wqe_with_doorbell = the
 * WQE came through the BlueFlame register (libmlx4 does that only for a
 * single BlueFlame-eligible WR, sized in its own WQE format; otherwise the
 * NIC fetches the WQE).  The NIC still needs nic.blueflame and one WQE. */
void nic_sq_ring(struct nic_qp *qp, bool wqe_with_doorbell);
/* Per-QP rate limit (IBV_QP_RATE_LIMIT, ibv_modify_qp_rate_limit):
 * pacing of the QP's requester packets at `rate_bps` (0 = none); the
 * rate in force is also bounded by DCQCN's (ratelimit.c). */
int nic_qp_set_rate_limit(struct nic_qp *qp, uint64_t rate_bps);
/* The QP's rate in force now (0 = line rate). */
uint64_t nic_qp_rate_bps(const struct nic_qp *qp);
/* Move the QP to the error state now and flush every outstanding WR
 * with IBV_WC_WR_FLUSH_ERR (used by modify-to-ERR and by the engines). */
void nic_qp_to_error(struct nic_qp *qp);

#endif /* RNICSIM_NIC_H */
