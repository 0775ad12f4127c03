/* rima_*: the portable append-queue layer (RIMA, Xue et al., Sections 3.1-3.2;
 * software emulation: Section 5.2.1, Table 6 row 4, "space creation by a
 * remote fetch-and-add").  docs/rima-portable.md is the manual.
 *
 * A receiver creates an append queue (struct rima_aq) on its PD; senders
 * append messages of any size to it over ordinary RC queue pairs; the
 * receiver polls messages {offset, length, source QP} and consumes them,
 * which moves the head in queue order (out-of-order consumption is allowed:
 * the head moves past the longest consumed prefix).
 *
 * Two implementations behind one API:
 *
 *  RIMA_HW  the hardware verbs of <rnicsim/rima.h> (ibv_create_aq,
 *           IBV_WR_APPEND, IBV_WC_RECV_APPEND, ibv_modify_aq(IBV_AQ_HEAD)):
 *           only in rnicsim's simulated NIC.
 *  RIMA_SW  standard verbs only: the region and two 64-bit control words
 *           (the tail, a monotonic byte position the senders advance with a
 *           remote FETCH_AND_ADD, and the head, which the receiver publishes
 *           and the senders READ) live in the receiver's memory; a sender
 *           reserves space with FETCH_AND_ADD and then RDMA-WRITE_WITH_IMMs
 *           the message at the returned offset; the receiver learns about it
 *           from the receive completion (zero-length receives on an SRQ the
 *           queue owns).
 *  RIMA_AUTO  HW if the device has append queues, else SW.  Built against
 *           the system libibverbs (RNICSIM_REAL_VERBS) there is no hardware
 *           verb: RIMA_AUTO is SW, RIMA_HW fails with EOPNOTSUPP.
 *
 * The receiver picks the mode; senders learn it from the exported
 * descriptor (struct rima_aq_remote, sent out of band as bytes).
 *
 * Usage, receiver:
 *     aq = rima_aq_create(pd, cq, &opts);
 *     for each sender QP: rima_aq_qp_init_attr(aq, &init_attr) before
 *         ibv_create_qp (SW: attaches the queue's SRQ and uses cq as the
 *         receive CQ; the QP needs IBV_ACCESS_REMOTE_WRITE |
 *         IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC, see
 *         RIMA_QP_ACCESS);
 *     rima_aq_export(aq, &remote); rima_remote_encode(&remote, bytes) -> OOB
 *     loop: n = rima_poll_aq(aq, max, msgs); ... rima_aq_consume(aq, &msgs[i]);
 * sender:
 *     rima_remote_decode(bytes, &remote);
 *     s = rima_sender_create(pd, qp, send_cq, &remote, &sopts);
 *     rima_post_append(s, wr_id, sge, nsge, IBV_SEND_SIGNALED);
 *     loop: rima_poll_sender(s, max, wcs);
 *
 * No globals: every state is in the structs (several instances run as
 * coroutines in one simulator process).  Uses only <infiniband/verbs.h>,
 * <rnicsim/host.h> and <rnicsim/rima.h>. */
#ifndef RNICSIM_PROTOCOLS_RIMA_H
#define RNICSIM_PROTOCOLS_RIMA_H

#include <infiniband/verbs.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum rima_mode {
    RIMA_AUTO = 0, /* HW when the device has append queues, else SW */
    RIMA_HW = 1,
    RIMA_SW = 2,
};

/* Access flags the receiver's QPs need for the SW mode (harmless for HW). */
#define RIMA_QP_ACCESS                                                                             \
    (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |                   \
     IBV_ACCESS_REMOTE_ATOMIC)

/* SW: imm carries the low 32 bits of the 8-aligned byte position, so a
 * region is at most 4 GiB; every reservation is rounded up to 8 bytes. */
#define RIMA_SW_MAX_REGION_BYTES (1ull << 32)
#define RIMA_SW_ALIGN_BYTES 8u
#define RIMA_MAX_SGE 4       /* SGEs per append */
#define RIMA_INLINE_MAX 256u /* IBV_SEND_INLINE: bytes copied at post time (SW) */

struct rima_aq_opts {
    enum rima_mode mode;
    uint64_t region_bytes; /* > 0; HW: a multiple of 4 KiB; SW: a multiple of 8,
                              <= RIMA_SW_MAX_REGION_BYTES */
    uint64_t chunk_bytes;  /* HW only: physical commit granularity (0 = driver
                              default, see docs/rima.md) */
    uint32_t flags;        /* HW only: enum ibv_aq_flags */
    uint32_t recv_depth;   /* SW only: zero-length receives kept posted on the
                              SRQ (0 = 512: one per in-flight message of 8
                              senders x 64, estimate) */
};

/* What travels out of band.  Encoded as RIMA_REMOTE_BYTES little-endian
 * bytes: magic "RIMA"@0 version@4 mode@5 aq_num@8 region_rkey@12
 * region_addr@16 region_bytes@24 ctrl_addr@32 ctrl_rkey@40 (the tail word
 * is at ctrl_addr, the head word at ctrl_addr + 8). */
struct rima_aq_remote {
    enum rima_mode mode; /* RIMA_HW or RIMA_SW */
    uint32_t aq_num;     /* HW: the queue number senders name */
    uint64_t region_addr, region_bytes;
    uint32_t region_rkey;
    uint64_t ctrl_addr; /* SW: tail word; head word at + 8 */
    uint32_t ctrl_rkey;
};
#define RIMA_REMOTE_BYTES 48
void rima_remote_encode(const struct rima_aq_remote *in, uint8_t out[RIMA_REMOTE_BYTES]);
/* 0, or -1 with errno EINVAL (bad magic, version or mode). */
int rima_remote_decode(const uint8_t in[RIMA_REMOTE_BYTES], struct rima_aq_remote *out);

/* A received message.  offset/addr: where it is in the region; len: its
 * length; qp_num: the receiving QP; src_qp: the sender's QP.  pos/span are
 * for rima_aq_consume (pos = monotonic byte position, span = the bytes it
 * holds in the queue). */
struct rima_msg {
    uint64_t offset;
    uint8_t *addr;
    uint32_t len;
    uint32_t qp_num, src_qp;
    uint64_t pos, span;
};

struct rima_aq_stats {
    enum rima_mode mode;
    uint64_t region_bytes;
    uint64_t messages, bytes;    /* delivered by rima_poll_aq */
    uint64_t consumed;           /* messages consumed */
    uint64_t pad_bytes;          /* SW: bytes of abandoned reservations (wrap);
                                    HW: wrap padding the head skipped */
    uint64_t head_pos;           /* monotonic head position */
    uint64_t peak_pending_bytes; /* max (end of a delivered message - head) */
    uint64_t footprint_bytes;    /* memory the queue pins: HW committed chunks
                                    + 0, SW region + control page + receive
                                    WQEs (recv_depth x 16 B, estimate) */
    uint32_t recv_depth;         /* SW: receives kept posted */
    uint64_t rnr_naks;           /* HW: appends the NIC refused for lack of room
                                    (the sender retries after its RNR timer) */
};

struct rima_aq; /* opaque */

/* NULL with errno: EINVAL (NULL pd or cq, region 0 or not a multiple of the
 * mode's granule, SW region > 4 GiB, unknown mode); EOPNOTSUPP (RIMA_HW
 * without hardware append queues, always under RNICSIM_REAL_VERBS);
 * ENOMEM; or the errno of the failing verb. */
struct rima_aq *rima_aq_create(struct ibv_pd *pd, struct ibv_cq *cq,
                               const struct rima_aq_opts *opts);
/* 0, or an errno value (as ibv_destroy_*). */
int rima_aq_destroy(struct rima_aq *aq);
enum rima_mode rima_aq_mode(const struct rima_aq *aq);
uint8_t *rima_aq_buf(const struct rima_aq *aq);
/* Fill the QP attributes a receiving QP needs: SW sets srq and recv_cq. */
void rima_aq_qp_init_attr(const struct rima_aq *aq, struct ibv_qp_init_attr *attr);
int rima_aq_export(const struct rima_aq *aq, struct rima_aq_remote *out);
/* Up to n messages (in completion order), or -1 with errno (a failed
 * completion: EIO; a malformed one: EPROTO).  A bad completion after good
 * ones: the good ones are returned now, the error with the next call.
 * Hole completions (IBV_WC_WR_FLUSH_ERR: an append whose receiving QP
 * failed before its last packet) are not delivered; the head moves over
 * them like padding. */
int rima_poll_aq(struct rima_aq *aq, int n, struct rima_msg *out);
/* Release a message's bytes; 0 or an errno value (EINVAL: NULL, or not a
 * message of the queue: outside [head, head + region), e.g. one consumed
 * before that the head has passed; a second consume of a message the head
 * has not passed yet is not detected). */
int rima_aq_consume(struct rima_aq *aq, const struct rima_msg *msg);
int rima_aq_query(struct rima_aq *aq, struct rima_aq_stats *out);

/* ------------------------------------------------------------ sender */

struct rima_sender_opts {
    uint32_t window;   /* appends in flight (0 = 64, perftest-like estimate) */
    uint32_t sq_depth; /* the QP's max_send_wr: WRs the layer may have
                          posted at once (0 = 2 x window + 2) */
};

struct rima_send_wc {
    uint64_t wr_id;
    enum ibv_wc_status status;
    uint32_t byte_len;
};

struct rima_sender_stats {
    uint64_t appends, faa, writes, head_reads, dead_reservations, flow_waits;
};

struct rima_sender; /* opaque */

/* qp: connected RC QP to the receiver; cq: its send CQ, used only by this
 * sender.  NULL with errno EINVAL / EOPNOTSUPP (HW descriptor under
 * RNICSIM_REAL_VERBS) / ENOMEM. */
struct rima_sender *rima_sender_create(struct ibv_pd *pd, struct ibv_qp *qp, struct ibv_cq *cq,
                                       const struct rima_aq_remote *dst,
                                       const struct rima_sender_opts *opts);
int rima_sender_destroy(struct rima_sender *s);
/* Append the message sg_list[0..num_sge) (total <= region in HW mode,
 * <= region / 2 in SW mode; 0 allowed).
 * flags: IBV_SEND_SIGNALED (report a completion), IBV_SEND_INLINE (copy up
 * to RIMA_INLINE_MAX bytes now), IBV_SEND_SOLICITED.  The buffers must stay
 * valid and registered until the completion (as ibv_post_send).  Returns 0
 * or an errno value: EINVAL bad argument (also a message too long for the region), ENOMEM window
 * full (poll first), EIO the sender failed earlier. */
int rima_post_append(struct rima_sender *s, uint64_t wr_id, const struct ibv_sge *sg_list,
                     int num_sge, unsigned int flags);
/* Make progress and return up to n completions of signaled appends (or of
 * failed ones), or -1 with errno. */
int rima_poll_sender(struct rima_sender *s, int n, struct rima_send_wc *wc);
/* Appends posted and not yet completed. */
uint32_t rima_sender_outstanding(const struct rima_sender *s);
void rima_sender_query(const struct rima_sender *s, struct rima_sender_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* RNICSIM_PROTOCOLS_RIMA_H */
