/* The zero-sided switch program's data plane (Jasny et al., Section 4-6;
 * build spec 2.3-2.4): the switch is the only RDMA requester.  Per
 * transfer of thread t (one per consumer; replication: one per group):
 *
 *   1 TOKEN    the thread's packet picks a source (round robin), reads the
 *              mirrors, picks the batch n = min(available, free space,
 *              max batch, distance to either ring's end), reserves PSNs on
 *              both data QPs and becomes an RDMA READ to the producer
 *   2 rewrite  each READ RESPONSE becomes an RDMA WRITE to the consumer:
 *              opcode, AETH out, RETH in (first / only), PSN + offset,
 *              addresses; payload untouched, nothing buffered
 *   3 ACK      the consumer's ACK of the data is multicast to the thread's
 *              pointer group: one copy is the WRITE of the consumer's head,
 *              one the WRITE of the producer's tail, one recirculates as
 *   4 RELEASE  commit the tail, free the producer (load balancing), and try
 *              again (step 1) at once
 *
 * so the pointer WRITEs of one transfer are in flight together with the
 * next transfer (replication keeps the spec's sequence: head WRITE, its
 * ACK, tail WRITE, its ACK, release).  On each data QP the PSNs stay in
 * the order the operations are sent: a transfer reserves its data PSNs and
 * right after them its pointer WRITE's, and the pointer WRITE leaves the
 * switch before the next READ is issued.  The switch's producer tail
 * register is the committed read position (only items the consumer has
 * ACKed); its head and tail WRITEs only ever carry committed values.  Polls (a 4-byte READ of the
 * producer head / consumer tail on the endpoint's control QP, one packet-generator batch every poll
 * interval) or doorbells (the PU's 4-byte WRITE, ACKed by the switch)
 * update the mirrors.
 *
 * Reliability, the switch as an RC requester: each data QP has its PSN
 * allocator (x_next) and its expectation (x_exp: what it waits for, from
 * which PSN).  READ responses must arrive in PSN order: a gap, a NAK from
 * the consumer, or a timeout (a timer batch looks at each thread's phase
 * and the time of its last progress) re-issues the operation of the
 * current phase with the same PSNs: the READ again (the producer executes
 * a duplicate READ again; the rewritten WRITEs map to the same consumer
 * PSNs through the same offset, so the consumer drops what it has and
 * places the rest), or a pointer WRITE again (a duplicate is re-ACKed).
 * While a re-issued READ is pending, responses of the old one are dropped
 * (RECOVER) until the first one of the new READ arrives.
 *
 * Two operations outstanding on one QP: x_exp's PEND bit says the pointer
 * WRITE at PSN first - 1 is not yet acknowledged (an ACK at or past it, or
 * on the producer QP the first READ response, clears it).  Go-back-N: a
 * responder that lost it NAKs the next operation, so every re-issue of a
 * READ (or of the end-of-stream WRITE) while PEND is set first sends the
 * pointer WRITE again with its PSN and the committed value -- a multicast
 * to the pointer group keeping that copy and a recirculating one that
 * goes on with the re-issue.  A pointer WRITE with nothing behind it is
 * covered by a pointer timer: the thread's (t_pw) for its consumer head
 * WRITE, the producer's (p_pw) for its tail WRITE.
 *
 * Pipeline (--pipeline=W, shuffle): a consumer has W lanes (data QPs,
 * threads, commits in order as with --lanes) but only one of them has its
 * READ streaming at a time (c_busy, taken in the token pass, given back
 * when the READ's last response passes): the consumer's next READ leaves
 * then, while the last transfer's lane still waits for its ACK.
 *
 * Every register array lives in one stage and is touched at most once per
 * pass, in stage order (zs_dp.h has the plan); where a step needs an
 * earlier stage again, the packet recirculates.
 *
 * This file dispatches each pass to its step (zs_dp_int.h lists the files:
 * zs_token.c, zs_scan.c, zs_rewrite.c, zs_acks.c, zs_cnp.c, zs_mirrors.c,
 * zs_recovery.c, zs_emit.c, zs_phase.c) and declares the tables and
 * registers. */
#include <string.h>

#include "protocols/zerosided/zs_dp_int.h"

/* ---------------------------------------------------------------- the pipelines */

static void zs_ingress(struct ps_pass *x, struct pkt *p, void *prog)
{
    struct zs_dp *dp = prog;
    struct ps_meta *m = ps_pass_meta(x);
    if (m->ingress_port == PS_PORT_PKTGEN) {
        if (m->pktgen_app == ZS_APP_POLL) {
            zs_poll_gen(dp, x, p, m->pktgen_pkt);
            return;
        }
        if (m->pktgen_app == ZS_APP_TICK) {
            zs_tick(dp, x, p, m->pktgen_pkt);
            return;
        }
        /* ZS_APP_START: thread pktgen_pkt's first packet */
        struct zs_br b = {.type = ZS_BR_TOKEN, .t = (uint16_t)m->pktgen_pkt};
        memcpy(m->bridge, &b, sizeof(b));
        m->bridge_bytes = ZS_BR_WIRE_BYTES;
    }
    if (m->ingress_port == PS_PORT_PKTGEN || m->ingress_port == PS_PORT_RECIRC ||
        m->ingress_port == PS_PORT_CPU) {
        struct zs_br b;
        memcpy(&b, m->bridge, sizeof(b));
        const struct zs_thr_ent *th = ps_table_apply(x, dp->thr, b.t);
        if (!th) {
            ps_drop(x);
            return;
        }
        switch (b.type) {
        case ZS_BR_TOKEN:
        case ZS_BR_RELEASE:
        case ZS_BR_SCAN:
            if (dp->mode == ZS_REPLICATE)
                zs_scan_pass(dp, x, p, b, th);
            else
                zs_token_pass(dp, x, p, b, th);
            return;
        case ZS_BR_REISSUE:
            zs_reissue(dp, x, p, b, th);
            return;
        case ZS_BR_COMMIT:
            zs_commit_pass(dp, x, p, b, th);
            return;
        case ZS_BR_FIN:
            zs_fin_pass(dp, x, p, b, th);
            return;
        case ZS_BR_SLOTREL:
            zs_slotrel_pass(dp, x, b, th);
            return;
        default:
            ps_drop(x);
            return;
        }
    }
    if (p->dst_node != dp->sw_node) { /* ordinary traffic between hosts */
        ps_fwd(x, p->dst_node);
        return;
    }
    const struct zs_conn_ent *ce = ps_table_apply(x, dp->conn, p->dest_qpn);
    if (!ce) {
        dp->st.stray++;
        ps_drop(x);
        return;
    }
    switch (ce->kind) {
    case ZS_C_PDATA:
        if (p->opcode == IB_OPCODE_RC_ACKNOWLEDGE)
            zs_prod_ack(dp, x, p, ce);
        else
            zs_data_resp(dp, x, p, ce);
        return;
    case ZS_C_CDATA:
        if (p->opcode == PS_ROCE_OPCODE_CNP)
            zs_cnp_relay(dp, x, p, ce);
        else
            zs_cons_ack(dp, x, p, ce);
        return;
    default:
        zs_ctl_rx(dp, x, p, ce);
        return;
    }
}

/* A copy made for a pointer group: keep it or not; the producer's becomes
 * its tail WRITE, the recirculating one a switch-thread packet. */
static void ptr_copy(struct zs_dp *dp, struct ps_pass *x, struct pkt *p, const struct zs_br *b,
                     uint32_t rid)
{
    uint32_t k = rid == ZS_RID_CHEAD ? ZS_K_CHEAD : rid == ZS_RID_PTAIL ? ZS_K_PTAIL : ZS_K_RECIRC;
    if (!(b->keep & k)) {
        ps_drop(x);
        return;
    }
    if (rid == ZS_RID_PTAIL) {
        const struct zs_ep_ent *pe = ps_table_apply(x, dp->eprod, b->p);
        if (!pe) {
            ps_drop(x);
            return;
        }
        zs_build_ptr_write(dp, p, pe, b->wpsn, ZS_TAIL_OFF, b->wval);
    } else if (rid == ZS_RID_RECIRC) {
        p->payload_len = 0;
        p->frame_bytes = 64;
    } else {
        zs_ecn_mark(dp, x, p); /* a READ's last response, as a WRITE to the consumer */
    }
}

/* Replicas (rid = consumer index + 1): each copy gets its consumer's QP,
 * address and key.  Pointer groups: ptr_copy. */
static void zs_egress(struct ps_pass *x, struct pkt *p, void *prog)
{
    struct zs_dp *dp = prog;
    struct ps_meta *m = ps_pass_meta(x);
    if (m->rid == 0) {
        zs_ecn_mark(dp, x, p);
        return;
    }
    const struct zs_br *b = (const struct zs_br *)(const void *)m->bridge;
    if (m->rid >= ZS_RID_CHEAD) {
        ptr_copy(dp, x, p, b, m->rid);
        return;
    }
    const struct zs_ep_ent *c = ps_table_apply(x, dp->mcc, (uint64_t)b->t << 16 | (m->rid - 1));
    if (!c) {
        ps_drop(x);
        return;
    }
    ps_roce_address(dp->ps, p, c->node, c->pu_data_qpn, c->sw_data_qpn, p->psn);
    if (p->ext_hdrs & PKT_EXT_RETH) {
        p->reth_va += c->base;
        p->reth_rkey = c->rkey;
    }
    zs_ecn_mark(dp, x, p);
}

static const struct ps_dataplane zs_dataplane = {"zerosided", zs_ingress, zs_egress};

/* ---------------------------------------------------------------- declarations */

#define REG(field, name, stage, n, bits)                                                           \
    do {                                                                                           \
        if (!(dp->field = ps_reg_declare(ps, name, PS_INGRESS, stage, n, bits)))                   \
            return -1;                                                                             \
    } while (0)
#define TBL(field, name, g, stage, n, type)                                                        \
    do {                                                                                           \
        if (!(dp->field = ps_table_declare(ps, name, g, stage, n, sizeof(type))))                  \
            return -1;                                                                             \
    } while (0)

int zs_dp_install(struct zs_dp *dp)
{
    struct pswitch *ps = dp->ps;
    uint32_t np = dp->np ? dp->np : 1, nc = dp->nc ? dp->nc : 1, nt = dp->nt ? dp->nt : 1;
    uint32_t ne = np + nc;
    uint32_t ncq = nt > nc ? nt : nc; /* consumer data QPs: one per thread (lanes) */
    TBL(conn, "conn", PS_INGRESS, 0, 2 * ne + ncq - nc, struct zs_conn_ent);
    TBL(ep, "ep", PS_INGRESS, 0, ne, struct zs_ep_ent);
    TBL(thr, "thr", PS_INGRESS, 1, nt, struct zs_thr_ent);
    REG(p_ctl, "p_ctl", 1, np, 64);
    REG(c_ctl, "c_ctl", 1, nc, 64);
    REG(p_db, "p_db", 1, np, 32);
    REG(c_db, "c_db", 1, nc, 32);
    REG(t_rr, "t_rr", 2, nt, 16);
    REG(t_flags, "t_flags", 2, nt, 8);
    TBL(src, "src", PS_INGRESS, 3, nt * np, struct zs_src_ent);
    TBL(mc, "mc", PS_INGRESS, 3, nt * nc, uint16_t);
    REG(p_head, "p_head", 4, np, 32);
    REG(p_tail, "p_tail", 4, np, 32);
    REG(c_tail, "c_tail", 4, nc, 32);
    REG(p_lock, "p_lock", 5, np, 16);
    REG(n_busy, "n_busy", 5, ZS_SLOT_NODES, 64);
    if (dp->lanes > 1)
        REG(c_cmt, "c_cmt", 5, nc, 40);
    if (dp->stream)
        REG(c_busy, "c_busy", 5, nc, ZS_MAX_LANES);
    REG(c_head, "c_head", 6, nc, 32);
    REG(t_done, "t_done", 6, nt, 64);
    REG(t_chead, "t_chead", 6, nt, 32);
    REG(p_next, "p_next", 7, np, 24);
    REG(c_next, "c_next", 7, ncq, 24);
    REG(t_cnext, "t_cnext", 7, nt, 24);
    REG(p_exp, "p_exp", 8, np, 57);
    REG(c_exp, "c_exp", 8, ncq, 57);
    REG(t_ack, "t_ack", 8, nt, 64);
    REG(t_xfer, "t_xfer", 9, nt, 64);
    REG(t_ptrs, "t_ptrs", 9, nt, 64);
    REG(t_cva, "t_cva", 9, nt, 64);
    REG(t_off, "t_off", 9, nt, 24);
    REG(t_psn, "t_psn", 10, nt, 24);
    REG(t_phase, "t_phase", 10, nt, 64);
    REG(t_pw, "t_pw", 10, nt, 64);
    REG(p_pw, "p_pw", 10, np, 64);
    TBL(cons, "cons", PS_INGRESS, 11, nt, struct zs_ep_ent);
    TBL(prod, "prod", PS_INGRESS, 11, np, struct zs_ep_ent);
    TBL(mcc, "mcc", PS_EGRESS, 0, nt * nc, struct zs_ep_ent);
    TBL(eprod, "eprod", PS_EGRESS, 0, np, struct zs_ep_ent);
    return ps_load(ps, &zs_dataplane, dp);
}
