/* Internal header of the Huang & Ghandeharizadeh protocol driver
 * (protocols/huang, docs/huang.md): the five RC request/response protocols
 * over the M:1, 1:M and M:M abstractions.
 *
 *   layout.c  who talks to whom: the nodes, threads and QPs (links) of an
 *             abstraction, pure functions of the options
 *   frame.c   the bytes: marker framing, request and value patterns, checks
 *   huang.c   options, set-up, out-of-band exchange, results
 *   thread.c  the requesting and responding threads' data path
 *
 * Written only against <infiniband/verbs.h> and <rnicsim/host.h>, so the
 * same files build into the simulator and against real rdma-core. */
#ifndef RNICSIM_PROTOCOLS_HUANG_HG_H
#define RNICSIM_PROTOCOLS_HUANG_HG_H

#include <infiniband/verbs.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocols/common/rc_conn.h"
#include "rnicsim/host.h"

#define HG_MAX_NODES 512      /* nodes of one configuration (the paper: 29) */
#define HG_MAX_THREADS 64     /* threads of one node (the paper pins at most 16) */
#define HG_MAX_R 4096         /* pending requests per QP (the paper: up to 256) */
#define HG_MIN_L 16           /* a request carries tag, link and slot (16 B) */
#define HG_MIN_V 16           /* a value carries the same header */
#define HG_MAX_V (1u << 24)   /* 16 MiB values */
#define HG_FRAME_OVERHEAD 6u  /* length (4), marker, ..., marker */
#define HG_MARKER 0xa5u       /* the marker byte (any non-zero value) */
#define HG_HDR_BYTES 16u      /* tag u64, link u32, slot u32 */
#define HG_DENSE_VALUE 8192u  /* values up to this size carry the pattern in every byte */
#define HG_PATTERN_EDGE 4096u /* larger ones in their first and last 4 KiB (docs/huang.md) */
#define HG_POLL_BATCH 32
/* The CPU cost of the protocol's own memory accesses (spec 3.7 item 4) is
 * the host model's (docs/host.md "Memory"): a scan pass loads the marker
 * line of every slot it examines, taking a message reads its bytes and
 * zeroes them, answering writes the header; each costs per 64 B line by
 * the line's state (a line the NIC wrote since: a DDIO LLC hit or a miss;
 * one the thread's core still has: a hit), charged once per turn with the
 * misses of the turn overlapping (host_touch_add / host_touch_charge). */
#define HG_KEY_MAX (RC_CONN_NAME_MAX + 64)

enum hg_abs { HG_M1, HG_1M, HG_MM, HG_ABS_COUNT };
enum hg_proto {
    HG_SEND_SEND,
    HG_SEND_WRITE,
    HG_WRITE_SEND,
    HG_WRITE_WRITE,
    HG_READ,
    HG_PROTO_COUNT
};
enum hg_verb { HG_NONE, HG_SEND, HG_WRITE, HG_RDMA_READ };

/* The protocol facts (Huang Table III and Section III). */
struct hg_proto_info {
    const char *name;
    enum hg_verb req;  /* verb the requester issues a request with */
    enum hg_verb resp; /* verb the responder answers with (NONE: READ) */
};
extern const struct hg_proto_info hg_protos[HG_PROTO_COUNT];
extern const char *const hg_abs_names[HG_ABS_COUNT];

struct hg_opts {
    enum hg_abs abs;
    enum hg_proto proto;
    char name[RC_CONN_NAME_MAX];
    uint32_t node;         /* this program's node */
    uint32_t P, Q, N;      /* requesting nodes (M:1), responding nodes (1:M), nodes (M:M) */
    uint32_t S;            /* requesting threads per node */
    uint32_t R;            /* pending requests per QP */
    uint32_t L, V;         /* request and value bytes */
    uint32_t resp_threads; /* M:1 responding threads; 0 = the paper's rule */
    uint64_t warmup_ns, duration_ns;
    bool post_list;     /* one post (doorbell) per QP for the requests a poll found */
    uint32_t mtu_bytes; /* 0 = the port's active MTU */
    int oob_role;       /* --server / --client given (real hardware), 0 none */
};

/* ------------------------------------------------------------ layout.c */

/* A link is one RC connection: requesting thread (req_node, req_thread) to
 * responding thread (resp_node, resp_thread), one QP at each end. */
struct hg_link {
    uint32_t req_node, req_thread, resp_node, resp_thread;
};

/* Nodes taking part (M:1: P + 1, 1:M: Q + 1, M:M: N), numbered 0.. . */
uint32_t hg_nodes(const struct hg_opts *o);
/* Responding threads of the M:1 responder (the paper: 14 x 2 QPs for
 * P = 28, S = 1; else 16, or fewer when there are fewer QPs). */
uint32_t hg_m1_resp_threads(const struct hg_opts *o);
/* Threads of `node`: requesting ones get thread numbers [0, *req), responding
 * ones [*resp_base, *resp_base + *resp). */
void hg_node_threads(const struct hg_opts *o, uint32_t node, uint32_t *req, uint32_t *resp,
                     uint32_t *resp_base);
/* Every link of the configuration in canonical order (requesting node,
 * requesting thread, responding node); returns the count, fills out[] when
 * not NULL. */
uint64_t hg_links(const struct hg_opts *o, struct hg_link *out);
/* Whether the node's QPs fit: the largest QP count of any node. */
uint64_t hg_max_qps_per_node(const struct hg_opts *o);

/* ------------------------------------------------------------ frame.c */

/* Bytes of a request slot and a response slot in a QP's buffer array. */
static inline uint32_t hg_req_slot_bytes(const struct hg_opts *o)
{
    return o->L + HG_FRAME_OVERHEAD;
}
static inline uint32_t hg_resp_slot_bytes(const struct hg_opts *o)
{
    return o->V + HG_FRAME_OVERHEAD;
}

/* Tag of the u-th request (from 0) in slot `slot`: unique per QP, 1.. */
static inline uint64_t hg_tag(uint64_t u, uint32_t slot, uint32_t R)
{
    return u * R + slot + 1;
}

uint8_t hg_key_byte(uint64_t tag, uint32_t j);
uint8_t hg_value_byte(uint32_t j, uint32_t V);
void hg_put_hdr(uint8_t *p, uint64_t tag, uint32_t link, uint32_t slot);
void hg_get_hdr(const uint8_t *p, uint64_t *tag, uint32_t *link, uint32_t *slot);
/* The request payload (L bytes). */
void hg_fill_request(uint8_t *p, uint32_t L, uint64_t tag, uint32_t link, uint32_t slot);
/* The value body (bytes HG_HDR_BYTES.. V-1). */
void hg_fill_value_body(uint8_t *p, uint32_t V);

/* Marker framing of a WRITE message of B payload bytes at m:
 * [0..3] B, [4] marker, [5 .. 5+B-1] payload, [5+B] marker. */
void hg_frame_set(uint8_t *m, uint32_t B);
enum hg_frame_state { HG_FRAME_EMPTY, HG_FRAME_PARTIAL, HG_FRAME_COMPLETE, HG_FRAME_BAD_LEN };
/* What a reader sees in the slot: nothing, the first marker only, both
 * markers (with B == want_len), or a length that is not want_len. */
enum hg_frame_state hg_frame_poll(const uint8_t *m, uint32_t want_len);

/* Checks; each returns 0 or fills why[] and returns the index of the first
 * bad byte + 1 (so a non-zero value). */
uint32_t hg_check_request(const uint8_t *p, uint32_t L, uint64_t tag, uint32_t link, uint32_t slot,
                          char *why, size_t why_len);
uint32_t hg_check_value(const uint8_t *p, uint32_t V, uint64_t tag, uint32_t link, uint32_t slot,
                        char *why, size_t why_len);

/* ------------------------------------------------------------ huang.c / thread.c */

struct hg;

/* One QP: this end of a link. */
struct hg_qp {
    struct ibv_qp *qp;
    uint32_t link; /* index in the configuration's link list */
    uint32_t peer_node;
    uint32_t peer_qpn;
    uint64_t peer_addr; /* the peer's buffer array of this link */
    uint32_t peer_rkey;
    uint8_t *region;    /* this end's buffer array: R request slots, then R response slots */
    uint32_t rkey;      /* of the MR holding it */
    uint32_t *uses;     /* per slot: requests issued (requester) / served (responder) */
    uint64_t *issue_ns; /* requester: when slot i's request was issued */
    uint64_t sq_posted, sq_done; /* send WRs posted / retired (selective signalling) */
    uint32_t rq_next;            /* next receive buffer to (re)post, cyclic */
    uint32_t outstanding;        /* requester: requests without a response */
    /* Slots to issue (requester) / answer (responder) now: a ring of R,
     * pend[(phead + k) % R] for k < npend.  A ring because a post that waits
     * for send-queue room polls, and the poll may add slots of the QP being
     * posted; a slot is either outstanding or here, so npend <= R. */
    uint32_t *pend;
    uint32_t phead, npend;
    uint32_t nrecv; /* receives consumed, to repost */
    bool dirty;     /* in the thread's dirty list */
};

struct hg_thread {
    struct hg *hg;
    uint32_t idx; /* the paper's thread number k on this node */
    bool requesting;
    struct ibv_cq *cq;
    struct ibv_mr *mr;
    uint8_t *buf;
    size_t buf_bytes;
    struct hg_qp *qps;
    uint32_t nqps;
    /* QPs with pending work: a ring of nqps, dirty[(dhead + k) % nqps] for
     * k < ndirty; a QP is in it at most once (hg_qp.dirty). */
    uint32_t *dirty;
    uint32_t dhead, ndirty;
    uint32_t sq_depth, sig_every;
    struct ibv_send_wr *wr; /* scratch for one post list */
    struct ibv_sge *sge;
    struct ibv_recv_wr *rwr;
    struct ibv_sge *rsge;
    int handle; /* host_thread_start handle */
    int rc;     /* exit status of the thread */
    /* results (requester: responses; responder: requests served) */
    uint64_t responses, lat_sum_ns, lat_n, checked, bytes_checked, scans, slots_scanned;
    struct host_touches touch; /* this turn's memory accesses, charged at its end */
    uint64_t t0_ns, t1_ns;     /* the measurement window */
    uint64_t now;              /* time of the current turn */
    /* Requester: a response is counted when its request was posted inside
     * the window [t0, t1) (each post at its own time; the requests posted
     * before t1 are all answered while the thread drains).  Counting by the
     * time a response is *found* is coarse: a thread finds its responses a
     * turn at a time, and a turn of a CPU-bound thread re-posts everything it
     * found (at S = 16 in 1:M, or S = 1 in M:M with WRITE responses, over a
     * millisecond), so a window of a few turns was off by up to a turn at
     * each end; posts are spread through the turn one post cost apart.  The
     * polls are counted to say how many turns a window held. */
    uint64_t obs_ns;         /* time of the current poll */
    uint64_t obs_prev_ns;    /* the previous poll in the window, UINT64_MAX: none yet */
    uint64_t obs_gap_max_ns; /* longest time between two polls in the window */
    uint64_t obs_counted;    /* polls in the window */
    /* Requester: when the thread had found as many responses as it had
     * requests outstanding at start (R x nqps), from hg.start_ns; UINT64_MAX
     * until then.  A window opening before this measures the start-up round
     * (docs/huang.md "The window matters"). */
    uint64_t round1_ns;
    bool stopping; /* requester: the window is over, draining */
};

struct hg {
    struct hg_opts o;
    const char *prog;
    struct rc_conn conn; /* device, port, GID, MTU, PD */
    struct ibv_device_attr dev;
    int access;
    uint8_t rd_atomic;
    uint32_t max_inline;
    uint32_t nodes;
    struct hg_link *links;
    uint64_t nlinks;
    struct hg_thread *threads;
    uint32_t nthreads;
    uint32_t region_bytes; /* one QP's buffer array, rounded up to 64 */
    uint32_t sync_seq;
    atomic_bool stop; /* responders: every requester has drained */
    bool no_device;
    bool violation;    /* a torn read was found (exit 1) */
    uint64_t start_ns; /* after the start barrier */
};

/* thread.c */
void hg_requester_run(void *arg);
void hg_responder_run(void *arg);
/* Post the receives a QP needs before the start (SEND-framed side). */
int hg_post_initial_recvs(struct hg_thread *t, struct hg_qp *q, bool requests);
/* Prepare a responder's value slots (body pattern; READ: the whole value). */
void hg_prepare_values(struct hg_thread *t);

#endif
