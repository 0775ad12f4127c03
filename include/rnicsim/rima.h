/* RIMA: remote indirect memory access (Xue, Vijaykumar, Thottethodi,
 * "Network Interface Architecture for Remote Indirect Memory Access (RIMA) in
 * Datacenters", Sections 3.1-3.2, Table 3).  docs/rima.md is the manual.
 *
 * A receiver creates an *append queue* (AQ): a large reserved virtual region
 * managed as a circular queue whose tail pointer lives in the NIC's tail
 * pointer table (TPT).  A sender posts IBV_WR_APPEND with the ordinary
 * ibv_post_send on an RC queue pair connected to the receiver, naming the
 * queue by its number (which travels out of band like an rkey).  The
 * receiver NIC advances the tail by the message length when the first packet
 * of the message arrives and places the message at the old tail; the
 * receiver posts no receives and gets one completion per message on the AQ's
 * CQ, giving the message's offset in the region and its length.  The head
 * pointer is kept by host software and advanced in queue order with
 * ibv_modify_aq(IBV_AQ_HEAD).
 *
 * Two ways to reach it:
 *
 *  - The hardware verbs below (ibv_create_aq ... and IBV_WR_APPEND through
 *    ibv_post_send) exist only in rnicsim's simulated NIC (verbs_shim/aq.c,
 *    sim/nic/aq.c).  A real rdma-core provider knows no IBV_WR_APPEND and
 *    rejects it (EINVAL), and the system libibverbs has no ibv_create_aq.
 *
 *  - The portable layer rima_* (protocols/rima/rima.h) which a program
 *    should use: in the simulator it drives either the hardware AQ or the
 *    software emulation over standard verbs (a remote FETCH_AND_ADD on the
 *    tail word, then RDMA WRITE_WITH_IMM at the returned offset); built
 *    against the system libibverbs it is always the software emulation.
 *
 * Transport: RC.  The paper builds RIMA on DCT; rnicsim models RC (and no
 * DCT), and an AQ, like an SRQ, is shared by every QP of its PD, so N
 * senders appending to one queue need N RC QPs at the receiver, as DCT
 * would avoid.  What RIMA changes (no receives, any size into one queue,
 * the TPT) is the same on both. */
#ifndef RNICSIM_RIMA_H
#define RNICSIM_RIMA_H

#include <infiniband/verbs.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Send work request opcode (outside the range rdma-core uses, 0..15):
 * wr.wr.rdma.rkey = the remote AQ number, wr.wr.rdma.remote_addr ignored,
 * sg_list = the message (0 .. min(region_bytes - 1, 1 GiB) bytes: the ring
 * never fills completely, and 1 GiB is the port's max_msg_sz),
 * IBV_SEND_INLINE allowed as for SEND.  ibv_wr_append() sets all three. */
#define IBV_WR_APPEND ((enum ibv_wr_opcode)0x40)
/* Sender completion opcode of an append. */
#define IBV_WC_APPEND ((enum ibv_wc_opcode)0x40)
/* Receiver completion opcode (IBV_WC_RECV bit set, so "opcode &
 * IBV_WC_RECV" still says "received"): wc.wr_id = the message's offset in
 * bytes from aq->buf, wc.byte_len = its length, wc.qp_num = the receiving
 * QP, wc.src_qp = the sender's QP.
 * Holes: the tail moves on a message's first packet.  If the receiving QP
 * goes to error or reset, or is destroyed, before the message's last
 * packet (its sender failed, ran out of retries, or went away), the NIC
 * writes a receiver completion with status IBV_WC_WR_FLUSH_ERR, opcode
 * IBV_WC_RECV_APPEND, wr_id = the offset, byte_len = the reserved length:
 * those bytes hold no message (partly written garbage at most) and the
 * consumer skips them when it advances the head. */
#define IBV_WC_RECV_APPEND ((enum ibv_wc_opcode)(IBV_WC_RECV | 0x40))

static inline void ibv_wr_append(struct ibv_send_wr *wr, uint32_t aq_num)
{
    wr->opcode = IBV_WR_APPEND;
    wr->wr.rdma.rkey = aq_num;
    wr->wr.rdma.remote_addr = 0;
}

/* The queue.  buf/region_bytes: the reserved virtual region the messages
 * land in (reserved by ibv_create_aq, registered internally; physical memory
 * is committed in chunks, see below).  aq_num: what senders name. */
struct ibv_aq {
    struct ibv_context *context;
    void *aq_context;
    struct ibv_pd *pd;
    struct ibv_cq *cq; /* receiver completions */
    uint32_t aq_num;
    uint32_t handle;
    uint8_t *buf;
    uint64_t region_bytes;
};

enum ibv_aq_flags {
    /* When the head catches up with the tail (the queue is empty), reset
     * both to offset 0 (the top of the region): Section 3.2.1, reuses the
     * same physical pages and translations. */
    IBV_AQ_F_RESET_ON_EMPTY = 1 << 0,
};

/* Attributes.  At create: region_bytes, chunk_bytes, watermark_bytes,
 * initial_chunks, flags (0 = the defaults documented in docs/rima.md).
 * ibv_query_aq fills everything; ibv_modify_aq takes the fields named by
 * the mask. */
struct ibv_aq_attr {
    uint64_t region_bytes;    /* virtual region (create; query) */
    uint64_t chunk_bytes;     /* physical commit granularity (create; query) */
    uint64_t watermark_bytes; /* low watermark: committed bytes left beyond
                                 the tail below which the NIC interrupts the
                                 host to commit the next chunk (Table 4:
                                 the reserve pool, line rate x L) */
    uint32_t initial_chunks;  /* chunks committed at create, from offset 0
                                 (0 = 1); query: as created */
    uint32_t flags;           /* enum ibv_aq_flags */
    uint64_t head;            /* offset of the oldest unconsumed byte (modify
                                 with IBV_AQ_HEAD: the new head, reached by
                                 consuming messages in queue order) */
    /* Read only (query): */
    uint64_t tail;            /* offset where the next message goes */
    uint64_t used_bytes;      /* tail - head, incl. wrap padding */
    uint64_t committed_bytes; /* physical memory committed now */
    uint64_t peak_used_bytes, peak_committed_bytes;
    uint64_t messages, bytes; /* appended so far */
    uint64_t watermark_irqs;  /* interrupts raised */
    uint64_t chunks_allocated, chunks_freed;
    uint64_t rnr_naks; /* appends refused: no room (region or commit) */
    /* committed_bytes = (initial_chunks + chunks_allocated - chunks_freed)
     * x chunk_bytes; chunks_allocated counts background allocations only */
};

enum ibv_aq_attr_mask {
    IBV_AQ_HEAD = 1 << 0,
    IBV_AQ_WATERMARK = 1 << 1,
    IBV_AQ_FLAGS = 1 << 2,
};

struct ibv_aq_init_attr {
    void *aq_context;
    struct ibv_cq *cq; /* where receiver completions go (required) */
    struct ibv_aq_attr attr;
};

/* Errors (errno, NULL / non-zero return as the SRQ verbs): EINVAL bad
 * argument (no cq, a cq of another context, sizes not multiples of 4 KiB,
 * chunk > region or region not a multiple of chunk, watermark > region,
 * initial_chunks > region / chunk, unknown flags or mask bits, head
 * outside the used part [head, tail]); ENOMEM the TPT is full (the
 * profile's rima.tpt_entries) or the region cannot be reserved;
 * EOPNOTSUPP the device has no RIMA (rima.tpt_entries = 0).
 * ibv_destroy_aq never fails but for a NULL aq (EINVAL): the queue goes at
 * once, appends still arriving for it fail at the sender with
 * IBV_WC_REM_ACCESS_ERR (docs/rima.md "API").
 *
 * Receiver completions (IBV_WC_RECV_APPEND) of one AQ come in the order
 * the messages' LAST packets were processed, which is not the queue (tail)
 * order: the tail order - the offsets - is the order the NIC's TPT served
 * the messages' FIRST packets, so a long message that started first may
 * complete after a short one that started later.  Consume by offset
 * (docs/rima.md "Completions").  A message that does not fit before
 * the end of the region goes to offset 0 (the rest of the lap becomes
 * padding) - on an empty queue head and tail move to 0 first, without
 * padding.  Room: a message that finds no room
 * (the head would be overtaken, or the memory at the tail is not yet
 * committed) is refused with an RNR NAK; the sender retries per its
 * rnr_retry and then completes with IBV_WC_RNR_RETRY_EXC_ERR.  A message
 * longer than region_bytes - 1: IBV_WC_REM_INV_REQ_ERR (longer than the
 * port's max_msg_sz of 1 GiB: IBV_WC_LOC_LEN_ERR at the sender, as a
 * SEND); an unknown queue number or a queue of another PD than the
 * receiving QP's: IBV_WC_REM_ACCESS_ERR.
 * A head update (IBV_AQ_HEAD) is an MMIO write the NIC applies when it
 * arrives.  The ring never becomes completely full (a message needs
 * used + padding + len <= region_bytes - 1), so head == tail always means
 * "empty": a head equal to the tail consumes everything, a head equal to
 * the current head moves nothing; a head of region_bytes is offset 0.  A
 * head write that arrives after the queue was reset to offset 0 (reset on
 * empty, or an empty queue restarting at 0) since it was issued is
 * ignored. */
struct ibv_aq *ibv_create_aq(struct ibv_pd *pd, struct ibv_aq_init_attr *init_attr);
int ibv_destroy_aq(struct ibv_aq *aq);
int ibv_query_aq(struct ibv_aq *aq, struct ibv_aq_attr *attr);
int ibv_modify_aq(struct ibv_aq *aq, struct ibv_aq_attr *attr, int attr_mask);

#ifdef __cplusplus
}
#endif

#endif /* RNICSIM_RIMA_H */
