/* The zero-sided switch program: what its control plane (zs_switch.c) and
 * data plane (zs_dataplane.c) share -- table entries, the bridged header
 * of switch-thread packets, the register arrays and their stages.
 *
 * Stage plan (ingress; each array in one stage, at most 4 per stage, every
 * pass touching them in increasing stage order -- sim/pswitch enforces it):
 *
 *   0  tables conn (switch QPN -> connection), ep (endpoint, for polls)
 *   1  table thr (thread); p_ctl c_ctl (poll READs on the control QPs),
 *      p_db c_db (doorbells)
 *   2  t_rr (round robin over a thread's sources), t_flags (stop)
 *   3  tables src ((thread, slot) -> producer), mc ((thread, i) -> consumer)
 *   4  p_head p_tail c_tail (mirrors; the switch-owned producer tail)
 *   5  p_lock (load balancing, lanes: producer owned by one thread), n_busy
 *      (per producer node, the threads transferring out of it: uplink slots),
 *      c_cmt (lanes: a consumer's committed head, end flag, lanes finished),
 *      c_busy (pipeline: the lanes whose READ streams into the consumer)
 *   6  c_head (switch-owned consumer head; picks the batch), t_done, t_chead
 *   7  p_next c_next t_cnext (PSN allocators of the data QPs; c_*: one per
 *      consumer data QP, i.e. per thread)
 *   8  p_exp c_exp t_ack (what each data QP waits for: the RC requester)
 *   9  t_xfer t_ptrs t_cva t_off (the transfer in flight)
 *  10  t_psn t_phase (reissue PSN, phase and progress time for timeouts),
 *      t_pw p_pw (the timers of a thread's head WRITE, a producer's tail WRITE)
 *  11  tables cons (thread -> consumer), prod (producer)
 *  egress 0: tables mcc ((thread, replica) -> consumer) for replication,
 *      eprod (producer) for the producer-tail copy of a pointer group */
#ifndef RNICSIM_ZS_DP_H
#define RNICSIM_ZS_DP_H

#include <stdint.h>

#include "protocols/zerosided/zs.h"
#include "sim/pswitch/pswitch.h"

#define ZS_NO_THREAD 0xffffu
#define ZS_NO_PROD 0xffffu /* a RELEASE pass with no producer to commit or unlock */

/* connection kinds (table conn) */
enum { ZS_C_PDATA = 1, ZS_C_PCTL, ZS_C_CDATA, ZS_C_CCTL };

struct zs_conn_ent {
    uint8_t kind;
    uint8_t rid;  /* replicate: the consumer's replica id in its group */
    uint16_t idx; /* producer p or consumer c */
    uint16_t t;   /* the thread (consumers; producers of pairs / shuffle), else ZS_NO_THREAD */
    uint16_t pad;
    uint32_t pu_node, pu_qpn; /* the PU's QP on this connection (doorbell ACKs) */
};

/* An endpoint as the data plane addresses it (tables ep, src, cons, prod,
 * mcc). */
struct zs_ep_ent {
    uint32_t node;
    uint32_t pu_data_qpn, pu_ctl_qpn;
    uint32_t sw_data_qpn, sw_ctl_qpn;
    uint32_t rkey;
    uint64_t base;
    uint32_t item_bytes, capacity;
    uint16_t idx;
    uint8_t producer;
    uint8_t pad;
};

struct zs_src_ent {
    uint16_t p;
    uint16_t pad[3];
    struct zs_ep_ent ep;
};

struct zs_thr_ent {
    uint16_t c;         /* the consumer (replicate: unused) */
    uint16_t n_src;     /* producer slots */
    uint16_t n_cons;    /* replicate: consumers of the group (= multicast group members) */
    uint16_t group;     /* replicate: multicast group */
    uint32_t max_batch; /* items per transfer at most */
    uint32_t item_bytes, capacity; /* the consumer ring (replicate: every consumer's) */
    uint32_t slots;    /* transfers in flight out of one producer node at most (0 = no limit) */
    uint64_t cbase;    /* the consumer ring (not replicate) */
    uint64_t all_done; /* t_done when every source is done */
    uint16_t lane;     /* shuffle: this thread's lane of consumer c (its data QP) */
    uint16_t lanes;    /* threads (data QPs) consumer c has; > 1: commits in order (c_cmt) */
    uint32_t stream; /* pipeline: READs streaming into consumer c at once at most (0 = no limit) */
};

/* Bridged header of switch-thread packets (ps_meta.bridge). */
enum zs_br_type {
    ZS_BR_TOKEN = 1, /* try a transfer (step 1) */
    ZS_BR_RELEASE,   /* the producer tail WRITE was ACKed: commit it, free the producer */
    ZS_BR_REISSUE,   /* redo the operation of `phase` (timeout, NAK, gap) */
    ZS_BR_SCAN,      /* replicate: minimum space over the consumers, one per pass */
    ZS_BR_TICK2,     /* a timer pass found an expired phase: decide in a second pass */
    ZS_BR_COMMIT,    /* lanes: the data are ACKed; commit [ptail, v) into the consumer's
                        head once every earlier transfer has, then the pointer WRITEs */
    ZS_BR_FIN,       /* lanes: a lane other than 0 has finished its stream */
    ZS_BR_SLOTREL,   /* a READ's last response passed in order (p_exp's verdict): give
                        back its uplink slot (n_busy) and the consumer's stream slot
                        (c_busy), which sit in a stage before p_exp */
};

/* REISSUE of a pointer WRITE whose timer expired (not thread phases): the
 * consumer head WRITE of thread t (t_pw), the tail WRITE of producer p (p_pw). */
#define ZS_RE_PTRS 0x20u
#define ZS_RE_PPTR 0x21u

struct zs_br {
    uint8_t type, phase; /* RELEASE: phase = ZS_BRF_SLOT if an uplink slot is held */
    uint16_t t;
    uint16_t p;            /* RELEASE / REISSUE: the producer; SCAN: the source slot's producer */
    uint16_t i;            /* SCAN: the next consumer to look at */
    uint32_t v;            /* RELEASE: the new producer tail; SCAN: running minimum space */
    uint32_t avail, ptail; /* SCAN: the producer's state when the scan started */
    uint16_t j;            /* SCAN: the source slot; RELEASE: the producer's node */
    uint8_t keep;          /* pointer group: the copies (ZS_K_*) this packet keeps */
    uint8_t pad;
    uint32_t wpsn, wval; /* pointer group: the producer tail WRITE's PSN and value */
};
#define ZS_BR_WIRE_BYTES 32u /* the fields above, packed */
#define ZS_BRF_SLOT 1u
#define ZS_BRF_PTAIL 2u /* RELEASE: the transfer's producer tail WRITE has been sent */
#define ZS_BRF_CSLOT 4u /* RELEASE: the consumer's stream slot (pipeline) is held */

/* Pointer groups (pairs, shuffle, load balancing): one multicast group per
 * (thread, source slot) with three members, so that one packet becomes the
 * consumer head WRITE, the producer tail WRITE and the thread's next pass
 * at once (the overlap of the pointer WRITEs with the next transfer). */
#define ZS_RID_CHEAD 0x100u  /* to the consumer: the head WRITE built in ingress */
#define ZS_RID_PTAIL 0x101u  /* to the producer: the tail WRITE, built in egress */
#define ZS_RID_RECIRC 0x102u /* to the recirculation port: the thread goes on */
#define ZS_K_CHEAD 1u
#define ZS_K_PTAIL 2u
#define ZS_K_RECIRC 4u
#define ZS_GRP_PTR(t, s, n_src) (2u + (uint32_t)(t) * (uint32_t)(n_src) + (uint32_t)(s))

/* n_busy entries: producer nodes (fabric node id modulo this) */
#define ZS_SLOT_NODES 64u

/* Thread phases (t_phase). */
enum zs_phase {
    ZS_PH_OFF = 0, /* not started */
    ZS_PH_IDLE,    /* the token circulates, looking for work */
    ZS_PH_READ,    /* READ issued, data flowing to the consumer */
    ZS_PH_CHEAD,   /* consumer head WRITE issued */
    ZS_PH_PTAIL,   /* producer tail WRITE issued */
    ZS_PH_RELEASE, /* its ACK came: the release pass is on its way */
    ZS_PH_FINAL,   /* end-of-stream head WRITE issued */
    ZS_PH_DONE,    /* the consumer knows the stream ended */
    ZS_PH_COMMIT,  /* lanes: data ACKed, waiting for earlier transfers to commit */
    ZS_PH_N
};

/* Packet-generator applications. */
enum { ZS_APP_POLL = 1, ZS_APP_TICK = 2, ZS_APP_START = 3 };

struct zs_dp_stats {
    uint64_t transfers, items, bytes;
    uint64_t tokens_idle; /* attempts that found nothing to move */
    uint64_t lock_busy;   /* load balancing: the producer was held by another thread */
    uint64_t slot_busy;   /* the producer's node had every uplink slot taken */
    uint64_t stream_busy; /* pipeline: another lane's READ was streaming into the consumer */
    uint64_t reissues_read, reissues_ptr, timeouts, token_restarts;
    uint64_t ptr_ahead; /* pointer WRITEs re-sent ahead of a re-issued op on their QP */
    uint64_t resp_gaps, resp_dups, naks_rx, fatal_naks;
    uint64_t polls_tx, polls_rx, doorbells_rx, doorbell_naks;
    uint64_t scans; /* replicate: consumer passes of the minimum-space scan */
    uint64_t threads_done;
    uint64_t commit_waits;      /* lanes: commit passes that found an earlier transfer pending */
    uint64_t stray;             /* packets for the switch that match nothing */
    uint64_t cnps_relayed;      /* consumers' CNPs sent on to the producer of the data */
    uint64_t cnps_dropped;      /* ... and those of a thread that has read nothing yet */
    uint64_t ecn_marked;        /* data WRITEs marked CE from the switch's own queue depth */
    uint64_t phase_ns[ZS_PH_N]; /* time the threads spent in each phase */
    uint64_t c_noread_ns, c_read_ns; /* consumers' time with no READ / some READ on its way */
    uint64_t c_reads_max;            /* the most READs on their way to one consumer at once */
    uint64_t n_reads_max;   /* the most READs on their way out of one producer node at once */
    uint64_t slot_releases; /* SLOTREL passes (a READ's last response, after the verdict) */
};

struct zs_dp {
    struct pswitch *ps;
    uint32_t sw_node;
    int mode;             /* enum zs_mode */
    uint32_t mtu_bytes;   /* RoCE path MTU the PU QPs use */
    uint32_t np, nc, nt;  /* producers, consumers, threads (arrays sized for these) */
    uint64_t rto_ns;      /* data-QP operation timeout */
    uint64_t poll_rto_ns; /* a poll READ still unanswered after this is sent again */
    bool doorbell;
    uint32_t lanes;  /* shuffle: threads (data QPs) per consumer */
    uint32_t stream; /* pipeline: lanes of a consumer streaming at once at most (0 = no limit) */
    uint32_t n_src;  /* source slots per thread (pointer groups ZS_GRP_PTR) */
    /* ECN marking from the egress queue depth (zs_cnp.c): RED on the
     * packet's enq_qdepth, 0 at kmin, pmax at kmax, every packet above
     * (ecn_kmax_bytes 0: off) */
    uint64_t ecn_kmin_bytes, ecn_kmax_bytes;
    uint32_t ecn_pmax_ppm;
    /* tables */
    struct ps_table *conn, *thr, *ep, *src, *mc, *cons, *prod, *mcc, *eprod;
    /* registers */
    struct ps_reg *p_ctl, *c_ctl, *p_db, *c_db;
    struct ps_reg *t_rr, *t_flags;
    struct ps_reg *p_head, *p_tail, *c_tail;
    struct ps_reg *p_lock, *n_busy, *c_cmt, *c_busy;
    struct ps_reg *c_head, *t_done, *t_chead;
    struct ps_reg *p_next, *c_next, *t_cnext;
    struct ps_reg *p_exp, *c_exp, *t_ack;
    struct ps_reg *t_xfer, *t_ptrs, *t_cva, *t_off;
    struct ps_reg *t_psn, *t_phase, *t_pw, *p_pw;
    struct zs_dp_stats st; /* counters (P4 Counter externs) */
    uint64_t *ph_at_ns;    /* measurement only: when each thread entered its phase */
    uint32_t *c_reads;     /* measurement only: per consumer, READs sent whose last response
                              has not passed */
    uint64_t *c_at_ns;     /* ... since when c_reads[c] has its value */
    uint32_t *n_reads;     /* measurement only: per producer node (n_busy index), READs sent
                              whose last response has not passed */
    uint8_t *ph_cur;
};

/* c_cmt cells (lanes): committed head 0..30, end flag 31 (ZS_DONE_BIT),
 * lanes other than 0 that have finished 32..39 */
#define ZS_CMT_FIN_SHIFT 32

/* t_flags bits */
#define ZS_TF_STOP 1u

/* Declare every table and register (sized for np, nc, nt) and load the
 * data plane; -1 with the switch's reason in ps_last_error. */
int zs_dp_install(struct zs_dp *dp);

#endif /* RNICSIM_ZS_DP_H */
