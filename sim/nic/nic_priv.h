/* Internal header of the RNIC model (sim/nic/): the device structure, the
 * per-QP engine state, the pooled contexts that carry an operation across
 * PCIe, and the prototypes each file offers the others, grouped by file.
 * Nothing outside sim/nic/ includes this. */
#ifndef RNICSIM_NIC_PRIV_H
#define RNICSIM_NIC_PRIV_H

#include "../trace.h"
#include "cache.h"
#include "nic.h"
#include "opcode.h"

/* Model constants (structure of the engines, not calibrated hardware
 * numbers; docs/nic.md explains each). */
enum {
    NIC_STAGE_SLOTS = 256,           /* packets a QP half may hold between build and wire */
    NIC_STAGE_MAX_BYTES = 64 * 1024, /* payload bytes a QP half may prefetch by DMA */
    NIC_RESP_WORK_SLOTS = 64,        /* responder work FIFO (ACKs, reads, atomics) */
    NIC_TX_LINK_PKTS = 2,            /* frames the NIC keeps queued on its uplink */
    NIC_ATOMIC_HISTORY = 16,         /* most replies kept for duplicate atomics (the QP keeps
                                        max_dest_rd_atomic of them, <= max_qp_rd_atom = 16) */
    NIC_BF_MAX_BYTES = 256,          /* BlueFlame buffer: larger WQEs are fetched */
    NIC_MAX_MSG_BYTES = 1u << 30,    /* port max_msg_sz (the shim reports the same) */
    NIC_AR_WINDOW = 256,             /* ib-ar: PSNs ahead of the expected one a responder holds */
    NIC_PAGE_SHIFT = 12,             /* 4 KiB pages */
    NIC_HUGE_PAGE_SHIFT = 21,        /* 2 MiB huge pages (x86-64) */
    NIC_MTT_LINE = 8,                /* MTT entries fetched together (8 x 8 B = 64 B) */
    NIC_MINI_CQE_BYTES = 8,          /* mlx5 CQE compression: a mini-CQE (Linux mlx5 en_rx.c) */
    NIC_CQE_MINI_PER_TITLE = 8,      /* ... at most 8 mini-CQEs per compressed block */
    NIC_FETCH_STREAM_BYTES = 4096,   /* a message's payload is fetched as host streams of one
                                        4 KiB page each, whatever the MTU (docs/nic.md) */
    NIC_FETCH_CHAINS = 16,           /* streams a QP half tells apart while their reads wait
                                        to be sent: NIC_STAGE_MAX_BYTES / 4 KiB, all of them
                                        for 4 KiB pieces (see nic_fetch_chain for smaller) */
};

/* ---------------------------------------------------------------- staging rings */

/* Packets of one QP half (requester or responder) in PSN order, from the
 * moment they are built to the moment the transmit engine takes them.  A
 * packet whose payload DMA read is still in flight is not `ready`; the TX
 * engine only ever takes the head, so packets leave in PSN order. */
struct nic_stage_ent {
    struct pkt *pkt;
    struct nic_op *pend; /* its payload read is done, waiting for earlier entries (nic.c) */
    bool ready;
};

struct nic_stage {
    struct nic_stage_ent *e; /* ring of `cap` entries (a power of two), grown on demand */
    uint32_t cap;
    uint32_t head, tail; /* free-running; count = tail - head */
    uint32_t bytes;      /* payload bytes staged */
};
/* Entry i (free-running index) of a stage ring. */
static inline struct nic_stage_ent *nic_stage_at(const struct nic_stage *s, uint32_t i)
{
    return &s->e[i & (s->cap - 1)];
}
/* The head entry is a packet ready to send. */
static inline bool nic_stage_head_ready(const struct nic_stage *s)
{
    return s->head != s->tail && nic_stage_at(s, s->head)->ready;
}

/* A packet source the transmit engine serves round robin. */
enum nic_txsrc_kind { NIC_TXSRC_REQ, NIC_TXSRC_RESP, NIC_TXSRC_PERS /* srd.c, onerma.c */ };

struct nic_txsrc {
    struct nic_txsrc *next;
    struct nic_qp *qp;
    struct nic_stage *stage;
    uint8_t kind; /* enum nic_txsrc_kind */
    bool queued;
    uint32_t burst; /* packets sent in a row in its current turn (nic.tx_burst_pkts) */
};

/* ---------------------------------------------------------------- pooled operation contexts */

/* Everything that crosses PCIe (or waits in a NIC queue) and must find its
 * way back carries one of these: a DMA read filling a packet, a DMA write
 * placing a packet's payload, a CQE write, a doorbell, an atomic.  `epoch`
 * is the QP's epoch at issue: a QP that went to RESET/ERR or retransmitted
 * since ignores the result. */
enum nic_op_kind {
    NIC_OP_DOORBELL,
    NIC_OP_FETCH,
    NIC_OP_REQ_PAYLOAD,  /* requester: host -> packet */
    NIC_OP_RESP_PAYLOAD, /* responder READ: host -> packet */
    NIC_OP_PLACE,        /* packet / 8 bytes -> host */
    NIC_OP_CQE,
    NIC_OP_ATOMIC,
    NIC_OP_RD_ENGINE, /* a READ request waiting for the responder's READ engine */
};

struct nic_seg {
    uint8_t *host; /* simulator address */
    uint32_t key;  /* MR key, re-checked when the DMA completes */
    uint32_t len;
};

/* Field order is hot first: nic_op_alloc sets the first line (and
 * place_qp, mem_chain, cq, tr_t0 in the second), so taking an op from the
 * free list touches two lines, not the five it touched when the segment
 * list and the CQE came before them (a 1024-host fabric does not keep the
 * NICs' ops cached between two uses). */
struct nic_op {
    _Alignas(64) struct nic_op *next; /* free list / atomic unit queue */
    struct nic *nic;
    struct nic_qp *qp; /* holds a reference while set */
    uint32_t epoch;
    uint8_t kind;
    bool flag;
    bool solicited;
    uint64_t v;
    struct pkt *pkt;
    uint32_t n_seg;
    struct nic_qp *place_qp; /* placement: counted in its QP (dma.c), a ref */
    /* second line */
    sim_time_t *mem_chain; /* payload reads: the host fetch stream it continues (xlate.c) */
    struct nic_cq *cq;     /* CQE */
    /* trace (sim/trace.h): when the operation was issued, and the first WQE
     * index a doorbell / WQE fetch covers */
    sim_time_t tr_t0;
    uint64_t tr_from;
    /* address translation and host-memory access (xlate.c) */
    struct nic_op *xl_next;           /* translation FIFO */
    uint32_t xl_pending;              /* cache entries still being fetched */
    bool xl_dm;                       /* every segment is in device memory */
    bool mem_write;                   /* nic_mem_read / nic_mem_write */
    uint8_t mem_kind;                 /* enum pcie_kind of the access */
    struct pcie_link *xl_peer;        /* every segment is in this peer device's memory */
    void (*xl_go)(struct nic_op *op); /* runs once translated, in FIFO order */
    uint64_t mem_bytes;
    sim_cb_fn mem_done;
    void *mem_b;
    /* placement write (dma.c): source bytes, trace tags, relaxed chunks */
    const uint8_t *dma_src;
    const char *dma_where;
    uint32_t dma_qpn, dma_psn;
    uint32_t dma_len;       /* bytes placed */
    uint32_t dma_left;      /* relaxed: chunks not yet visible */
    sim_time_t dma_head_ps; /* cut-through: the payload's first bytes were here then (0: now) */
    uint64_t dma_seq0;      /* relaxed: issue number of the first chunk */
    /* atomic */
    uint8_t atomic_opcode;
    uint64_t swap_add, compare;
    struct nic_seg seg[NIC_MAX_SGE + 1];
    uint8_t data8[8];
    uint8_t grh[NIC_GRH_BYTES]; /* UD receive: the GRH written before the payload */
    struct ibv_wc wc;           /* CQE */
};

/* DMA ordering state of a NIC (dma.c): relaxed chunks may pass earlier
 * writes; strict writes and reads wait until every earlier relaxed chunk
 * is visible (`horizon_ps`). */
struct nic_dma {
    struct sim_rng rng, ar_rng; /* streams "nic<N>.dma" and "nic<N>.ar" */
    bool rng_ready;
    sim_time_t horizon_ps; /* latest visibility time of a relaxed chunk issued so far */
    uint64_t next_seq;     /* relaxed chunks, numbered in issue order */
    uint64_t landed_hi;    /* 1 + the highest number of a chunk already visible */
    uint32_t ro_mrs;       /* live MRs registered with IBV_ACCESS_RELAXED_ORDERING */
};

/* ---------------------------------------------------------------- the device */

struct nic {
    struct sim *sim;
    struct host *host;
    uint32_t node_id;
    struct nic_params p;
    struct pcie_link *pcie;
    struct pkt_pool *pool;
    bool no_payload; /* `payload: none`: packets carry sizes, no bytes (pkt.h) */
    struct link *uplink;
    struct nic_counters cnt;

    /* objects */
    uint32_t next_pd_handle, next_cq_id, next_qpn;
    struct nic_pd **pds;
    uint32_t n_pds, cap_pds;
    struct nic_cq **cqs; /* live and zombie CQs */
    uint32_t n_cqs, cap_cqs, n_live_cqs;
    struct nic_qp **qp_tbl; /* open addressing by qpn & mask, live QPs */
    uint32_t qp_tbl_mask, n_qps;
    struct nic_qp **zombie_qps; /* destroyed, still referenced by in-flight operations */
    uint32_t n_zombie_qps, cap_zombie_qps;
    struct nic_srq **srqs; /* live SRQs (srq.c) */
    uint32_t n_srqs, cap_srqs, next_srqn;
    struct nic_xrcd **xrcds; /* open XRC domains (xrc.c) */
    uint32_t n_xrcds, cap_xrcds, next_xrcdn;
    struct nic_peer_region *peer; /* peer memory regions (peer.c) */
    uint32_t n_peer;
    struct nic_mcast_att *mcast; /* (group, QP) attachments (mcast.c) */
    uint32_t n_mcast, cap_mcast;
    nic_mcast_notify_fn mcast_notify;
    void *mcast_ctx;
    struct nic_mr **mr_tbl; /* index = key >> 8 */
    uint8_t *mr_gen;
    uint32_t mr_cap, n_mrs, mr_next_free_hint;
    uint64_t wire_va_next; /* next MR's wire address (nic_wire_va) */

    /* transmit engine: round robin over QP halves with a ready packet;
     * NIC-level control packets (a NAK sent as the QP enters ERR) first */
    struct nic_txsrc *txq_head, *txq_tail;
    struct pkt *ctrl_head, *ctrl_tail;
    struct pkt *tx_building; /* in the pipeline for tx_pkt_proc_ps */
    struct pkt *tx_hand;     /* built, waiting for room on the uplink */
    unsigned tx_link_pkts;   /* frames handed to the uplink since it was last idle */
    uint64_t tx_idle_seen;   /* the uplink's link_idle_count when last looked at */
    bool tx_taking;          /* inside tx_take (source hooks may queue sources) */
    struct sim_event tx_ev;

    /* receive pipeline */
    struct pkt *rx_head, *rx_tail;
    uint32_t rx_units_busy;     /* processing units holding a packet (nic.pus of them) */
    sim_time_t rx_unit_free_ps; /* since then at least one unit has been free */
    /* receive buffer (nic.rx_buffer): bytes held per priority, in 64 B
     * blocks x 64; the credits go back to the link that delivers to us */
    struct link *rx_credit_link;
    uint64_t rx_buf_bytes[PKT_PRIOS];

    /* responder READ engine (readeng.c): READ requests waiting, in work */
    struct nic_op *rde_head, *rde_tail, *rde_cur;
    uint32_t rd_in_service;
    struct sim_event rde_ev;

    /* atomic unit (atomic.c): ops waiting, addresses being updated */
    struct nic_op *atom_head, *atom_tail;
    sim_time_t atom_alu_free_ps; /* the unit's ALU is busy until then */
    uint8_t **atom_busy;
    uint32_t n_atom_busy, cap_atom_busy;

    /* DMA ordering model (dma.c) */
    struct nic_dma dma;

    /* caches inside the RNIC (ctx.c, xlate.c; docs/nic.md "Caches") */
    struct nic_cache qpc; /* QP contexts, key = QPN; fetches hold a processing unit */
    struct nic_cache rdc; /* requester READ/atomic contexts, key = QPN (ctx.c) */
    struct nic_cache rdq; /* requester per-QP READ-response trackers, key = QPN */
    /* the requester's READ miss handler (ctx.c): misses of rdc and rdq
     * waiting for it (FIFO), being handled, and spare records */
    struct nic_rd_miss *rdm_head, *rdm_tail, *rdm_free, *rdm_all;
    uint32_t rdm_busy;
    struct nic_cache rwq;             /* receive queues with prefetched WQEs (ctx.c) */
    struct nic_cache wqc;             /* outstanding send WQEs, key = QPN, last PSN (ctx.c) */
    struct nic_cache mpt, mtt;        /* memory keys (key = MR index), pages (mr index, page) */
    struct nic_op *xl_head, *xl_tail; /* DMA operations in translation, issue order */
    bool xl_pumping;
    bool rx_stalled; /* every processing unit busy: received packets wait */

    /* command interface (mr.c): busy until then */
    sim_time_t cmd_free_ps;

    /* device memory (dm.c) */
    struct nic_dm **dms;
    uint32_t n_dms, cap_dms;
    uint64_t dm_used_bytes;
    sim_time_t *dm_bank_free_ps; /* per bank (nic.dm_banks): busy until then */

    /* RIMA tail pointer table (aq.c): rima_tpt_entries slots */
    struct nic_aq **tpt;
    uint32_t *tpt_gen;            /* per slot, bumped when its AQ goes (stale numbers fail) */
    uint64_t aq_serial;           /* AQs created so far (nic_aq.serial) */
    uint32_t n_aqs;               /* live AQs */
    sim_time_t tpt_busy_until_ps; /* the TPT's read-add-write port is busy until then */

    /* operation context pool */
    struct nic_op *op_free;
    struct nic_op **op_slabs;
    uint32_t n_op_slabs, cap_op_slabs;
};

/* ---------------------------------------------------------------- per-QP engine state */

/* Requester states (req.c has the diagram). */
enum nic_req_state {
    NIC_REQ_IDLE,           /* nothing fetched to start (or SQD) */
    NIC_REQ_NEXT_WQE,       /* pick the next WQE */
    NIC_REQ_WQE_PROC,       /* wqe_proc_ps of engine time running */
    NIC_REQ_SEGMENT,        /* building packets of the current WQE */
    NIC_REQ_WAIT_SPACE,     /* staging ring / prefetch window full */
    NIC_REQ_WAIT_RD_ATOMIC, /* max_rd_atomic READ/atomics outstanding, or a fence */
    NIC_REQ_WAIT_RNR,       /* RNR NAK back-off */
    NIC_REQ_WAIT_CTX,       /* QP context being fetched (ctx.c) */
    NIC_REQ_STOPPED,        /* error: the completer finishes the QP */
    NIC_REQ_N_STATES,
};

/* State of a send WQE (nic_send_wqe.state). */
enum nic_wqe_state {
    NIC_WQE_QUEUED = 0, /* not started */
    NIC_WQE_RETRY,      /* to be (re)sent from req_pkt on (go back N) */
    NIC_WQE_STARTED,    /* PSNs assigned, packets being built */
    NIC_WQE_SENT,       /* every packet built */
    NIC_WQE_DONE,       /* acknowledged / response placed */
    NIC_WQE_ERROR,      /* completes with eng->err_status */
};

/* Responder work items, served in order (they produce response packets). */
enum nic_resp_work_kind {
    NIC_RW_ACK,           /* ACK or NAK (aeth syndrome) */
    NIC_RW_READ,          /* read response packets */
    NIC_RW_ATOMIC,        /* atomic ACK after the atomic unit ran */
    NIC_RW_ATOMIC_REPLAY, /* atomic ACK of a duplicate, from the history */
};

struct nic_resp_work {
    uint8_t kind;
    bool dup;         /* re-executed READ: not counted in rd_resp_outstanding */
    bool eng_wait;    /* READ: not yet through the NIC's READ engine (readeng.c) */
    bool eng_counted; /* READ: counted in the engine's READs in service */
    uint8_t syndrome;
    uint8_t atomic_opcode;
    uint32_t psn, msn;
    uint32_t key;
    uint8_t *host;
    uint32_t len, npkts, done_pkts;
    uint64_t swap_add, compare, orig;
    uint64_t place_need; /* ACK: leaves once this many placements of the QP landed */
};

/* IB adaptive routing (resp.c): request packets that arrived ahead of the
 * expected PSN, held until the responder reaches them in PSN order.  A
 * packet of the message in progress is placed at once; what is held then
 * is a header-only copy (`placed` bit set). */
struct nic_ar_window {
    struct pkt *slot[NIC_AR_WINDOW]; /* PSN p at slot[p % NIC_AR_WINDOW] */
    uint64_t placed[NIC_AR_WINDOW / 64];
};

struct nic_ar {
    /* allocated when the first packet is held: 2 KB that every RC QP
     * carried, ib-ar or not */
    struct nic_ar_window *win;
    uint32_t held;     /* slots in use */
    uint32_t msg_psn;  /* first PSN of the message in progress (resp_msg != 0) */
    uint32_t gap_epsn; /* expected PSN when the hole timer was armed */
    struct sim_event gap_ev;
};

struct nic_atomic_hist {
    uint32_t psn;
    bool valid;
    bool pending; /* accepted, the atomic unit has not read the original yet */
    uint64_t orig;
};

struct nic_qp_engine {
    struct nic_qp *qp;
    uint32_t refs;      /* 1 for the table + one per in-flight op / queued TX source */
    bool dead;          /* destroyed: freed when refs reaches 0 */
    uint32_t epoch;     /* bumped by RESET/ERR/destroy: in-flight results are dropped */
    uint32_t req_epoch; /* also bumped by every go-back-N rewind */
    uint32_t mtu_bytes;
    uint16_t udp_sport;

    /* requester */
    enum nic_req_state req_state;
    bool req_running, req_again;
    struct sim_event req_ev;
    sim_time_t req_busy_until;      /* send engine occupied by the last WQE started */
    uint64_t fetch_issued, fetched; /* WQE indices */
    uint64_t req_idx;               /* WQE being built */
    uint32_t req_pkt;               /* next packet index within it */
    uint32_t next_psn;              /* PSN of the next new WQE */
    uint32_t rd_outstanding;        /* READ/atomic WQEs started, not completed */
    uint32_t rd_posted;             /* READ/atomic WQEs in [sq_comp, sq_tail) */
    uint32_t tx_psn_hi;             /* highest PSN covered by a transmitted request */
    /* payload fetch streams (req.c): one slot per stream, the last NIC_FETCH_CHAINS */
    sim_time_t req_fetch_chain[NIC_FETCH_CHAINS];
    uint8_t req_fetch_cur;
    struct nic_stage req_stage;
    struct nic_txsrc req_src;

    /* completer */
    uint32_t comp_psn;    /* every PSN before it is acknowledged */
    uint32_t comp_rd_pkt; /* read response packets received for the head READ */
    uint32_t retry_left, rnr_left;
    uint32_t gap_psn; /* went back to it for a missing response ... */
    bool gap_pending; /* ... and no progress since: do not go back again */
    enum ibv_wc_status err_status;
    sim_time_t timer_deadline; /* SIM_TIME_NEVER: no timer */
    struct sim_event timer_ev;
    struct sim_event rnr_ev;

    /* receive pipeline (nic.c): when the QP's latest packet leaves its
     * processing unit - a later one never leaves before it */
    sim_time_t rx_done_ps;
    /* a packet of the QP waits in a unit for a context or WQE (ctx.c):
     * later ones are held behind it, in order, each in its unit */
    bool rx_waiting;
    struct pkt *rx_hold_head, *rx_hold_tail;

    /* responder */
    uint32_t epsn, msn;
    bool nak_sent;      /* one NAK per sequence gap / RNR until the PSN arrives */
    bool uc_drop;       /* UC: drop packets until the next FIRST/ONLY (message abandoned) */
    uint32_t resp_msg;  /* 0, NIC_OPF_SEND or NIC_OPF_WRITE: multi-packet message in progress */
    uint32_t resp_off;  /* bytes of the message received */
    uint32_t resp_len;  /* WRITE: RETH DMA length */
    uint32_t resp_key;  /* WRITE: MR key */
    uint8_t *resp_host; /* WRITE: where byte 0 of the message goes */
    uint32_t pkts_since_ack;
    uint32_t rd_resp_outstanding;
    /* READ response payload fetch streams (resp.c), as req_fetch_chain */
    sim_time_t resp_fetch_chain[NIC_FETCH_CHAINS];
    uint8_t resp_fetch_cur;
    /* ring of work_cap (a power of two, grown up to NIC_RESP_WORK_SLOTS
     * on demand: most QPs never hold more than an ACK or two, and 64 slots
     * were 5 KB of every QP); item i at nic_resp_work_at(e, i) */
    struct nic_resp_work *work;
    uint32_t work_cap;
    uint32_t work_head, work_tail;
    struct nic_atomic_hist atomic_hist[NIC_ATOMIC_HISTORY];
    uint32_t atomic_hist_next;
    struct nic_stage resp_stage;
    struct nic_txsrc resp_src;
    struct nic_ar ar;                    /* ib-ar reorder window (resp.c) */
    uint64_t place_issued, place_landed; /* placements of the QP (dma.c): ACKs wait */
    /* RIMA append in progress (resp.c, aq.c): the queue and the offset the
     * TPT gave its first packet; while a first packet waits for the TPT
     * (aq_wait) the QP's later packets queue behind it (aq_held_*) */
    uint32_t resp_aqn;
    uint64_t resp_aq_serial; /* the AQ itself (a number could name a later one) */
    uint64_t resp_aq_off;
    bool resp_aq_open; /* its tail moved, its receiver CQE not yet written */
    struct pkt *aq_wait, *aq_held_head, *aq_held_tail;
    struct sim_event aq_ev;
    /* a READ or atomic request that found the work FIFO full waits for a
     * slot (resp.c check_resource); the QP's later packets queue behind it
     * in aq_held_* */
    struct pkt *work_wait;

    /* transport personality state (pers.c), allocated on first use */
    struct nic_pers *pers;
    /* rate limiter and congestion control (ratelimit.c, dcqcn.c), on first use */
    struct nic_rl *rl;
};

/* Responder work item `idx` (free-running index in [work_head, work_tail)). */
static inline struct nic_resp_work *nic_resp_work_at(const struct nic_qp_engine *e, uint32_t idx)
{
    return &e->work[idx & (e->work_cap - 1)];
}

/* ---------------------------------------------------------------- nic.c */

struct nic_op *nic_op_alloc(struct nic *nic, enum nic_op_kind kind, struct nic_qp *qp);
void nic_op_free(struct nic_op *op);
/* True if the op's QP is gone, or changed epoch since the op was issued. */
bool nic_op_stale(const struct nic_op *op);
/* A source's head packet became ready: make sure the TX engine serves it. */
void nic_tx_src_ready(struct nic *nic, struct nic_txsrc *src);
/* A NIC-level packet (not tied to QP state) to send next. */
void nic_tx_ctrl(struct nic *nic, struct pkt *p);
/* The address vector's routing fields of a packet (pkt.ib_sl, grh_*) and
 * its priority: on Ethernet the DSCP class selector of the traffic class,
 * on InfiniBand the VL of the SL (nic_ib_sl_vl). */
void nic_pkt_route_fields(const struct nic *nic, struct pkt *p, const struct ibv_ah_attr *ah);
/* The virtual lane of a service level: an SL-to-VL table mapping SL i to
 * VL i mod 8 (eight data VLs, one per fabric priority; IBA 7.6.6 lets the
 * subnet manager program any table). */
static inline uint8_t nic_ib_sl_vl(uint8_t sl)
{
    return sl & 7;
}
/* Fill the addressing fields of a packet from `qp`. */
void nic_pkt_address(const struct nic_qp *qp, struct pkt *p, uint8_t opcode, uint32_t psn,
                     uint32_t payload_len);
/* Memory copies of a DMA that completed: seg -> buf (read) or buf -> seg
 * (write), skipping segments whose MR was deregistered meanwhile. */
void nic_copy_from_host(struct nic *nic, const struct nic_op *op, uint8_t *buf);
void nic_copy_to_host(struct nic *nic, const struct nic_op *op, const uint8_t *buf);
void nic_stage_init(struct nic_stage *s);
void nic_stage_fini(struct nic_stage *s);
static inline uint32_t nic_stage_count(const struct nic_stage *s)
{
    return s->tail - s->head;
}
/* The fetch-stream slot of one payload read (docs/nic.md "Payload fetch"):
 * a new stream (a message's first packet, or the first of a 4 KiB piece)
 * takes the next of the QP half's slots and clears it.  The PCIe link reads
 * and updates the slot when the read's MRds are sent, which can be after
 * later streams have started (reads waiting for credits or tags): with one
 * slot per QP half those later streams reset it, and every read of the
 * half then chained behind the last one sent, one stream at the read fetch
 * rate instead of several in parallel.  The slots are reused in turn: 16
 * hold every 4 KiB piece the QP half's 64 KiB of prefetch can have waiting,
 * but messages under 4 KiB make one stream each, and when more than 16 of
 * them wait at once a new one clears a slot an older one still uses (a
 * single-packet message only writes it: its own read has nothing to chain
 * behind; a multi-packet one's next read then starts unchained, or behind
 * the newer message's read).  Known approximation, left for its cost: a
 * slot per packet the stage can hold would be 2 x 256 x 8 B per QP. */
static inline sim_time_t *nic_fetch_chain(sim_time_t *slots, uint8_t *cur, bool new_stream)
{
    if (new_stream) {
        *cur = (uint8_t)((*cur + 1) % NIC_FETCH_CHAINS);
        slots[*cur] = 0;
    }
    return &slots[*cur];
}

static inline bool nic_stage_full(const struct nic_stage *s, uint32_t more_bytes)
{
    return nic_stage_count(s) >= NIC_STAGE_SLOTS ||
           (s->bytes && s->bytes + more_bytes > NIC_STAGE_MAX_BYTES);
}
static inline struct nic_stage_ent *nic_stage_tail_ent(struct nic_stage *s)
{
    return s->tail == s->head ? NULL : nic_stage_at(s, s->tail - 1);
}
void nic_stage_push(struct nic_stage *s, struct pkt *p, bool ready);
/* Mark the entry holding `p` ready (and the payload reads behind it that
 * waited for it: nic_payload_fetched); false if the ring no longer holds
 * it (cleared by an error or a rewind: the caller frees the packet). */
bool nic_stage_mark_ready(struct nic *nic, struct nic_stage *s, const struct pkt *p);
/* sim_cb_fn for the DMA read that fills a staged packet (a = the op,
 * b = the struct nic_txsrc whose stage holds it): copy the bytes, mark the
 * packet ready and wake the transmit engine; a stale op frees its packet. */
void nic_payload_fetched(struct sim *sim, void *op, void *src);
/* Drop every entry: ready packets are freed, packets still waiting for a
 * DMA read stay owned by that read's op (which frees them on return). */
void nic_stage_clear(struct nic *nic, struct nic_stage *s);

/* Trace records (sim/trace.h) of the NIC: no-ops unless the trace is on. */
/* The packet fields of a record, seen from this NIC: qpn = its QP, peer /
 * peer_qpn = the other end (tx: p's destination; rx: p's source). */
static inline void nic_trace_pkt_fields(struct trace_rec *r, const struct pkt *p, bool tx)
{
    r->opcode = p->opcode;
    r->psn = p->psn;
    r->len = p->payload_len;
    r->qpn = tx ? p->src_qpn : p->dest_qpn;
    r->peer = tx ? p->dst_node : p->src_node;
    r->peer_qpn = tx ? p->dest_qpn : p->src_qpn;
}
static inline void nic_trace_pkt(struct nic *nic, enum trace_kind kind, const struct pkt *p,
                                 uint32_t qpn, const char *where)
{
    if (!sim_trace_enabled(nic->sim))
        return;
    struct trace_rec r = {.kind = (uint8_t)kind, .node = nic->node_id, .where = where};
    nic_trace_pkt_fields(&r, p, kind == TRACE_PKT_TX);
    r.qpn = qpn;
    if (kind == TRACE_PKT_DROP)
        r.track = TRK_RX;
    sim_trace(nic->sim, &r);
}
/* The NIC's engines are traced (TRACE_G_NIC). */
static inline bool nic_tr(const struct nic *nic)
{
    return sim_trace_on(nic->sim, TRACE_G_NIC);
}
/* A span [t0, t0 + dur] of engine `trk` of this NIC (TRACE_G_NIC). */
static inline void nic_trace_span(struct nic *nic, enum trace_track trk, sim_time_t t0,
                                  sim_time_t dur, struct trace_rec *r)
{
    r->track = (uint8_t)trk;
    r->node = nic->node_id;
    sim_trace_span(nic->sim, r, t0, dur);
}
/* A point event of engine `trk` now. */
static inline void nic_trace_instant(struct nic *nic, enum trace_track trk, struct trace_rec *r)
{
    r->kind = TRACE_INSTANT;
    r->track = (uint8_t)trk;
    r->node = nic->node_id;
    r->t0_ps = sim_now(nic->sim);
    sim_trace(nic->sim, r);
}
/* The QP and PSN an operation is for (traces). */
uint32_t nic_op_trace_qpn(const struct nic_op *op);
uint32_t nic_op_trace_psn(const struct nic_op *op);
/* Name the QP / PSN of the next PCIe operation (its TLP records). */
static inline void nic_pcie_trace_ctx(struct nic *nic, const struct nic_op *op)
{
    if (nic->pcie && sim_trace_on(nic->sim, TRACE_G_PCIE))
        pcie_trace_ctx(nic->pcie, op ? nic_op_trace_qpn(op) : 0, op ? nic_op_trace_psn(op) : 0);
}
/* One TRACE_DMA_WRITE per segment of a placement write that landed. */
void nic_trace_dma_write(struct nic *nic, const struct nic_op *op, uint32_t qpn, const char *where);

/* ---------------------------------------------------------------- dma.c */

/* Write `len` bytes from `src` into op's segments (set by the caller) with
 * the DMA ordering of the NIC / of the MRs (docs/nic.md "DMA ordering"),
 * memcpy'ing each piece at the instant it becomes visible and waking the
 * host's pollers; then op->pkt (which `src` may point into) and op are
 * freed.  qpn / psn (0: none) / where tag the TRACE_DMA_WRITE records. */
void nic_dma_place(struct nic *nic, struct nic_op *op, const uint8_t *src, uint32_t len,
                   uint32_t qpn, uint32_t psn, const char *where);
/* A strict write (CQE, atomic result) just became visible at the PCIe
 * level, or a DMA read's data just arrived: PCIe does not let it pass an
 * earlier relaxed write that is not visible yet.  Returns true if it must
 * wait: fn(a, b) is then called (once) when it may go on. */
bool nic_dma_wait_relaxed(struct nic *nic, sim_cb_fn fn, void *a, void *b);
/* Extra time the part [off, off + len) of op's segments needs because it
 * is memory on the other socket than the NIC (host_dma_numa_delay: the
 * inter-socket link; a read crosses it twice).  0 when the host's
 * programs placed no memory away from the NIC. */
sim_time_t nic_dma_numa_delay(struct nic *nic, const struct nic_op *op, uint32_t off, uint32_t len,
                              bool write);
/* Does op touch memory on the other socket (no link time reserved)? */
bool nic_dma_numa_remote(const struct nic *nic, const struct nic_op *op);
/* The NIC's random stream for ib-ar packet delays. */
struct sim_rng *nic_dma_ar_rng(struct nic *nic);

/* ---------------------------------------------------------------- mr.c */

enum nic_mr_status {
    NIC_MR_OK,
    NIC_MR_BAD_KEY,
    NIC_MR_BAD_PD,
    NIC_MR_BOUNDS,
    NIC_MR_ACCESS,
};
struct nic_mr *nic_mr_lookup(struct nic *nic, uint32_t key);
/* Check [va, va+len) of the MR named by `key` for `pd` and `access` (bits
 * of enum ibv_access_flags that must all be set); on success *host is the
 * simulator address of va. */
enum nic_mr_status nic_mr_check(struct nic *nic, uint32_t key, const struct nic_pd *pd, uint64_t va,
                                uint64_t len, int access, uint8_t **host);
void nic_mr_teardown(struct nic *nic);

/* ---------------------------------------------------------------- cq.c */

/* Write a CQE: a cqe_bytes DMA write, then nic_cq_push when it lands. */
void nic_cqe_write(struct nic *nic, struct nic_cq *cq, const struct ibv_wc *wc, bool solicited);
/* The same for the send WQE at send queue index `wqe_idx` (traces follow
 * the work request to its CQE). */
void nic_cqe_write_wqe(struct nic *nic, struct nic_cq *cq, const struct ibv_wc *wc,
                       uint64_t wqe_idx);
void nic_cq_teardown(struct nic *nic);

/* ---------------------------------------------------------------- qp.c */

void nic_qp_get(struct nic_qp *qp);
void nic_qp_put(struct nic_qp *qp);
void nic_qp_teardown(struct nic *nic);
/* Flush CQEs for every send WQE in [sq_comp, sq_tail) / every receive WQE
 * of the QP: its own posted ones, or with an SRQ only the one it took for
 * the message in progress (the SRQ's stay for the other QPs). */
void nic_qp_flush_sq(struct nic_qp *qp);
void nic_qp_flush_rq(struct nic_qp *qp);
static inline struct nic_send_wqe *nic_sq_wqe(struct nic_qp *qp, uint64_t idx)
{
    return &qp->sq[idx % qp->sq_cap];
}
/* Move the WQE of slot src into slot dst (out-of-order completion squeezes
 * the queue, pers.c): the slots trade their inline buffers, so each keeps
 * exactly one (src's content is stale after the move). */
static inline void nic_sq_move(struct nic_send_wqe *dst, struct nic_send_wqe *src)
{
    uint8_t *buf = dst->inline_data;
    uint32_t cap = dst->inline_cap;
    *dst = *src;
    src->inline_data = buf;
    src->inline_cap = cap;
}

/* Receive queues, own or shared.  The responder (resp.c, srd.c) asks
 * nic_rq_empty before a message that needs a receive, takes the WQE with
 * nic_rq_cur (with an SRQ the first call of a message dequeues it from
 * the SRQ into qp->srq_wqe: from then on it belongs to the QP) and
 * retires it with nic_rq_consume when the receive completes. */
static inline struct nic_recv_wqe *nic_rq_at(const struct nic_rq *rq, uint64_t idx)
{
    return &rq->ring[idx % rq->cap];
}
static inline uint32_t nic_rq_count(const struct nic_rq *rq)
{
    return (uint32_t)(rq->tail - rq->head);
}
static inline bool nic_rq_empty(const struct nic_qp *qp)
{
    if (qp->srq)
        return !qp->srq_held && qp->srq->rq.head == qp->srq->rq.tail;
    return qp->rq.head == qp->rq.tail;
}
/* srq.c: dequeue the SRQ's head WQE into qp->srq_wqe (limit event). */
void nic_srq_take(struct nic_qp *qp);
static inline struct nic_recv_wqe *nic_rq_cur(struct nic_qp *qp)
{
    if (!qp->srq)
        return nic_rq_at(&qp->rq, qp->rq.head);
    if (!qp->srq_held)
        nic_srq_take(qp);
    return &qp->srq_wqe;
}
static inline void nic_rq_consume(struct nic_qp *qp)
{
    if (qp->srq)
        qp->srq_held = false;
    else
        qp->rq.head++;
}
/* The PD receive SGEs are checked against: the SRQ's or the QP's. */
static inline const struct nic_pd *nic_rq_pd(const struct nic_qp *qp)
{
    return qp->srq ? qp->srq->pd : qp->init.pd;
}
/* srq.c: free every SRQ (nic_destroy, through nic_qp_teardown). */
void nic_srq_teardown(struct nic *nic);
/* xrc.c: free every XRC domain (nic_qp_teardown); an XRC SRQ is being
 * destroyed (srq.c: 0, or EBUSY while a target holds one of its WQEs); bind target QP `qp` to the
 * XRC SRQ numbered `srqn` for the message that starts (false: no such SRQ in the QP's domain). */
void nic_xrcd_teardown(struct nic *nic);
int nic_xrc_srq_gone(struct nic_srq *srq);
bool nic_xrc_tgt_bind(struct nic_qp *qp, uint32_t srqn);
/* The CQ receive completions of `qp` go to: an XRC target's are its
 * current SRQ's (NULL before its first message), others the QP's. */
static inline struct nic_cq *nic_qp_recv_cq(const struct nic_qp *qp)
{
    if (qp->init.xrc == NIC_XRC_TGT)
        return qp->srq ? qp->srq->cq : NULL;
    return qp->init.recv_cq;
}
static inline bool nic_qp_can_send(const struct nic_qp *qp)
{
    return qp->state == IBV_QPS_RTS || qp->state == IBV_QPS_SQD;
}
static inline bool nic_qp_can_receive(const struct nic_qp *qp)
{
    return qp->state == IBV_QPS_RTR || qp->state == IBV_QPS_RTS || qp->state == IBV_QPS_SQD ||
           qp->state == IBV_QPS_SQE; /* UC/UD: the receive queue works on in SQE */
}
static inline bool nic_qp_reliable(const struct nic_qp *qp)
{
    return qp->init.qp_type == IBV_QPT_RC;
}
/* UC/UD send error (IBA 10.3.1 SQE): the WQE's error CQE is written, the
 * requester stops, every later send WR is flushed; receives go on. */
void nic_qp_to_sqe(struct nic_qp *qp);

/* ---------------------------------------------------------------- req.c */

void nic_req_init(struct nic_qp *qp);
/* Run the requester now (re-entrancy safe). */
void nic_req_kick(struct nic_qp *qp);
/* Go back N: resend from `psn` (a PSN of a WQE in [sq_comp, req_idx]). */
void nic_req_rewind(struct nic_qp *qp, uint32_t psn);
/* The TX engine took packet `p` of the requester. */
void nic_req_on_tx(struct nic_qp *qp, const struct pkt *p);
/* Stop the requester (error / reset / destroy). */
void nic_req_stop(struct nic_qp *qp);
bool nic_wqe_is_rd_atomic(const struct nic_send_wqe *w);
uint32_t nic_wqe_npkts(const struct nic_send_wqe *w, uint32_t mtu);
/* Gather the SGE pieces covering [off, off+len) of `sge` into op segments
 * (keys looked up now).  Returns false if a key no longer resolves. */
bool nic_sges_to_segs(struct nic *nic, const struct nic_sge *sge, uint32_t num_sge, uint32_t off,
                      uint32_t len, struct nic_op *op);

/* ---------------------------------------------------------------- resp.c */

void nic_resp_init(struct nic_qp *qp);
void nic_resp_rx(struct nic_qp *qp, struct pkt *p);
/* The TX engine took a responder packet. */
void nic_resp_on_tx(struct nic_qp *qp, const struct pkt *p);
/* dma.c: a placement of the QP landed: an ACK held back for it may go (an
 * ACK never leaves before the data it acknowledges are visible in the
 * responder's memory). */
void nic_resp_placed(struct nic_qp *qp);
void nic_resp_stop(struct nic_qp *qp);
/* nic.c receive path: the adaptive-routing path skew of an arriving packet
 * (ib-ar request packets: uniform on [0, ar_max_delay_ps]; else 0). */
sim_time_t nic_ar_skew_ps(struct nic *nic, const struct pkt *p);

/* ---------------------------------------------------------------- readeng.c */

void nic_rdeng_init(struct nic *nic);
/* READ work item `idx` (free-running index into qp's work FIFO) waits for
 * the READ engine; resp.c builds its response packets once it is through
 * (nic_resp_kick). */
void nic_rdeng_submit(struct nic_qp *qp, uint32_t idx);
/* A READ counted in service has all its response packets built. */
void nic_rdeng_done(struct nic *nic);
void nic_rdeng_teardown(struct nic *nic);
/* resp.c: build what the QP's work FIFO allows now. */
void nic_resp_kick(struct nic_qp *qp);

/* ---------------------------------------------------------------- atomic.c */

/* Carry out the atomic `op` (seg[0] = the 8 target bytes, atomic_opcode,
 * swap_add, compare; op->pkt = its ACK, staged not ready): serialised with
 * every other atomic on the same address; marks the ACK ready at the end. */
void nic_atomic_submit(struct nic *nic, struct nic_op *op);
void nic_atomic_teardown(struct nic *nic);

/* ---------------------------------------------------------------- comp.c */

void nic_comp_init(struct nic_qp *qp);
void nic_comp_rx(struct nic_qp *qp, struct pkt *p);
/* Complete what can be completed, in order (CQEs for signalled WQEs). */
void nic_comp_advance(struct nic_qp *qp);
/* The requester transmitted a request covering PSNs up to tx_psn_hi. */
void nic_comp_on_tx(struct nic_qp *qp);
/* UC/UD: request packet `psn` left on the wire; a WQE whose last packet
 * has left is complete (no ACKs on unreliable transports). */
void nic_comp_unreliable_tx(struct nic_qp *qp, uint32_t psn);
/* Fail WQE `idx` with `status` (it completes in order, then the QP errors). */
void nic_comp_fail_wqe(struct nic_qp *qp, uint64_t idx, enum ibv_wc_status status);
void nic_comp_stop(struct nic_qp *qp);
enum ibv_wc_opcode nic_wc_opcode(enum ibv_wr_opcode op);
uint32_t nic_vendor_err(enum ibv_wc_status st);

/* ---------------------------------------------------------------- ctx.c */

int nic_ctx_init(struct nic *nic);
void nic_ctx_fini(struct nic *nic);
/* The engine needs QP `qpn`'s context: true if it is in the QP-context
 * cache; else fn(a, b) runs when it has been fetched (the fetch holds one
 * of the nic.pus processing units). */
bool nic_ctx_access(struct nic *nic, uint32_t qpn, sim_cb_fn fn, void *a, void *b);
/* The QP went away: its contexts leave the caches. */
void nic_ctx_forget(struct nic *nic, uint32_t qpn);
/* Requester READ/atomic context of QP `qpn` (docs/nic.md "READ and atomic
 * engines"): the requester started a READ/atomic (the NIC writes the
 * context: present), or a response arrived and needs it (true if present;
 * else fn(a, b) when fetched, the fetch holding a processing unit). */
/* psn: the READ's / atomic's first PSN (its key with nic.rd_ctx_per: read) */
void nic_rdctx_started(struct nic *nic, uint32_t qpn, uint32_t psn);
bool nic_rdctx_access(struct nic *nic, uint32_t qpn, uint32_t psn, sim_cb_fn fn, void *a, void *b);
/* ... and, looked up before it, the QP's READ-response tracker
 * (nic.rd_qp_entries; true when none is modelled) */
bool nic_rdqp_access(struct nic *nic, uint32_t qpn, sim_cb_fn fn, void *a, void *b);
/* The send engine started WQE (qpn, last_psn) / a response completing it
 * needs it on chip (nic.wqe_cache_*): true, or false and fn(a, b) once
 * it was re-read. */
void nic_wqe_started(struct nic *nic, uint32_t qpn, uint32_t last_psn);
/* nic.c: QP qp is being destroyed: its held received packets go on (and
 * are dropped for want of a QP). */
void nic_rx_qp_gone(struct nic *nic, struct nic_qp *qp);
bool nic_wqe_access(struct nic *nic, uint32_t qpn, uint32_t psn, sim_cb_fn fn, void *a, void *b);
/* A response that waited for its entry was served: the entry retires
 * (hits retire in the access itself). */
void nic_wqe_retire(struct nic *nic, uint32_t qpn, uint32_t psn);
void nic_rdctx_retire(struct nic *nic, uint32_t qpn, uint32_t psn);
/* QP qpn has no READ/atomic outstanding any more: its per-QP tracker
 * (nic.rd_qp_entries) leaves the chip. */
void nic_rdctx_qp_idle(struct nic *nic, uint32_t qpn);
/* Packet p (a request to QP qp) consumes a receive WQE: true if the NIC
 * holds one of the receive queue's WQEs (nic.rwqe_*), else false and
 * fn(a, b) once they were fetched. */
bool nic_rwqe_access(struct nic *nic, struct nic_qp *qp, sim_cb_fn fn, void *a, void *b);
/* Make cache c set-associative / random as the profile says (cache `name`
 * of this NIC names its random stream). */
int nic_cache_configure(struct nic *nic, struct nic_cache *c, uint32_t ways);
/* nic.c: give waiting received packets to free processing units. */
void nic_rx_pump(struct nic *nic);

/* ---------------------------------------------------------------- xlate.c */

int nic_xlate_init(struct nic *nic);
void nic_xlate_fini(struct nic *nic);
/* Translate the op's segments (MPT entry of each key, MTT entry of each
 * page) through the caches, then run go(op).  Every NIC access to host
 * memory through an MR goes through this one in-order unit, so DMA
 * operations reach PCIe in the order they were issued, whatever missed. */
void nic_xlate(struct nic *nic, struct nic_op *op, void (*go)(struct nic_op *op));
/* Read / write `bytes` at the op's segments: translation, then a PCIe DMA
 * of `kind` (enum pcie_kind), or a device-memory access when every segment
 * is in device memory; done(sim, op, b) when the data are in the NIC
 * (read) / visible (write).  Segments may be empty (CQEs). */
void nic_mem_read(struct nic *nic, struct nic_op *op, unsigned kind, uint64_t bytes, sim_cb_fn done,
                  void *b);
void nic_mem_write(struct nic *nic, struct nic_op *op, unsigned kind, uint64_t bytes,
                   sim_cb_fn done, void *b);
/* The MR is going away or changing: its cached key and page translations
 * are invalidated (everything, with nic.dereg_flush all). */
void nic_xlate_forget_mr(struct nic *nic, const struct nic_mr *mr);
/* A registration wrote the MR's key and translations: with
 * nic.mr_write_allocate the caches take them (evicting others). */
void nic_xlate_learn_mr(struct nic *nic, const struct nic_mr *mr);

/* ---------------------------------------------------------------- aq.c */

enum nic_aq_status {
    NIC_AQ_OK,
    NIC_AQ_NO_QUEUE, /* unknown number, or an AQ of another PD: remote access NAK */
    NIC_AQ_TOO_BIG,  /* longer than region - 1 (never full): invalid request NAK */
    NIC_AQ_NO_ROOM,  /* region or committed memory full: RNR NAK */
};
/* The live AQ named `aqn`, or NULL. */
struct nic_aq *nic_aq_lookup(struct nic *nic, uint32_t aqn);
/* The TPT step of an append's first packet: look up `aqn` (must be of
 * `pd`), check room for `len` bytes and advance the tail atomically;
 * *off = where the message goes.  Counts messages / RNR refusals. */
enum nic_aq_status nic_aq_reserve(struct nic *nic, uint32_t aqn, const struct nic_pd *pd,
                                  uint64_t len, uint64_t *off);
/* When a TPT lookup + add issued now is done (the TPT serves one at a
 * time, rima_tpt_ps each). */
sim_time_t nic_aq_tpt_done_ps(struct nic *nic);
void nic_aq_teardown(struct nic *nic);

/* ---------------------------------------------------------------- mcast.c */

struct nic_mcast_att {
    uint32_t group, qpn;
};
/* A UD packet to QPN 0xFFFFFF: a copy to every QP attached to its group
 * (consumes p). */
void nic_mcast_rx(struct nic *nic, struct pkt *p);
/* A QP goes away: its attachments too. */
void nic_mcast_qp_gone(struct nic_qp *qp);

/* ---------------------------------------------------------------- peer.c */

struct nic_peer_region {
    uint8_t *base;
    uint64_t len;
    struct pcie_link *link;
};
/* The link of the peer region holding all of [addr, addr+len), or NULL. */
struct pcie_link *nic_peer_link_of(const struct nic *nic, const void *addr, uint64_t len);

/* ---------------------------------------------------------------- dm.c */

void nic_dm_teardown(struct nic *nic);
/* An access by `op` to device memory starting now: the delay until it is
 * done, its bank (by the address of its first segment) busy meanwhile. */
sim_time_t nic_dm_access_delay(struct nic *nic, const struct nic_op *op);

/* ---------------------------------------------------------------- pers.c, srd.c, onerma.c */

/* Transport personalities (DESIGN.md "Transports"): the RC QPs of a NIC
 * whose nic_params.transport is EFA_SRD or ONERMA are carried out by
 * srd.c / onerma.c (pers.h) instead of the IB requester, responder and
 * completer; these are the hooks the IB engines call. */
static inline bool nic_qp_pers(const struct nic_qp *qp)
{
    return qp->nic->p.transport >= NIC_TRANSPORT_EFA_SRD && qp->init.qp_type == IBV_QPT_RC;
}
/* req.c: the requester entry (WQEs fetched, QP to RTS, credit back). */
void nic_pers_kick(struct nic_qp *qp);
/* nic.c: a packet with a personality opcode arrived for `qp`. */
void nic_pers_rx(struct nic_qp *qp, struct pkt *p);
/* nic.c: the TX engine took packet `p` from the personality source `src`. */
void nic_pers_on_tx(struct nic_qp *qp, struct nic_txsrc *src, const struct pkt *p);
/* qp.c: engines stop (RESET / ERR / destroy); completed-out-of-order WQEs
 * leave the send queue so that a flush reports only the others. */
void nic_pers_stop(struct nic_qp *qp);
/* qp.c: the QP's memory goes. */
void nic_pers_free(struct nic_qp *qp);
/* qp.c: the send queue is full; free the slots of WQEs that completed out
 * of order (true if any was freed). */
bool nic_pers_sq_reclaim(struct nic_qp *qp);

#endif /* RNICSIM_NIC_PRIV_H */
