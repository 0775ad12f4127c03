/* The data path: ibv_post_send and ibv_post_recv.
 *
 * The CPU side of posting is modelled here: each work request is checked
 * (errno on misuse, as mlx5 answers it), converted into a NIC WQE and
 * appended to the queue in host memory; inline payload is copied from the
 * caller's buffers now, as the CPU reads them at post time.  A post list
 * rings ONE doorbell after the last valid WR (doorbell batching), and the
 * call is charged host.cpu.post_send_ps once plus post_send_wqe_ps per WR
 * attempted (post_recv_ps per WR for receives), and the doorbell waits
 * until the thread's previous one has drained (host.cpu.doorbell_gap,
 * sim/host.c host_doorbell) -- with host.cpu.provider mlx4 only a
 * BlueFlame post flushes; the others ring an uncached doorbell
 * (host.cpu.uc_doorbell_gap, post_is_blueflame below).
 * The receive queue has no doorbell: the NIC reads it when a message
 * arrives.
 *
 * The first failing WR is returned in *bad_wr with its errno; the WRs
 * before it stay posted (and are rung). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <rnicsim/rima.h>

#include "shim.h"
#include "sim/nic/opcode.h"
#include "sim/trace.h"

/* Opcodes each send queue accepts (IBA 9.4 / Table 38: RC has every
 * operation, UC SEND and RDMA WRITE, UD SEND only).  A table, not
 * branches; anything else is EINVAL at post, as mlx5 answers an opcode
 * its QP type lacks. */
enum { SHIM_N_WR_OPCODES = IBV_WR_ATOMIC_FETCH_AND_ADD + 1 };
enum { QPT_RC_BIT = 1, QPT_UC_BIT = 2, QPT_UD_BIT = 4 };
static const uint8_t send_opcode_qpts[SHIM_N_WR_OPCODES] = {
    [IBV_WR_RDMA_WRITE] = QPT_RC_BIT | QPT_UC_BIT,
    [IBV_WR_RDMA_WRITE_WITH_IMM] = QPT_RC_BIT | QPT_UC_BIT,
    [IBV_WR_SEND] = QPT_RC_BIT | QPT_UC_BIT | QPT_UD_BIT,
    [IBV_WR_SEND_WITH_IMM] = QPT_RC_BIT | QPT_UC_BIT | QPT_UD_BIT,
    [IBV_WR_RDMA_READ] = QPT_RC_BIT,
    [IBV_WR_ATOMIC_CMP_AND_SWP] = QPT_RC_BIT,
    [IBV_WR_ATOMIC_FETCH_AND_ADD] = QPT_RC_BIT,
};

bool shim_send_opcode_ok(enum ibv_qp_type t, enum ibv_wr_opcode op)
{
    /* RIMA append (rnicsim/rima.h): RC only, like READ and atomics */
    if ((unsigned)op == (unsigned)IBV_WR_APPEND)
        return t == IBV_QPT_RC;
    /* an XRC initiator posts what an RC QP posts (IBA Annex A14); an
     * XRC target posts nothing */
    if (t == IBV_QPT_XRC_SEND)
        t = IBV_QPT_RC;
    uint8_t bit = t == IBV_QPT_RC   ? QPT_RC_BIT
                  : t == IBV_QPT_UC ? QPT_UC_BIT
                  : t == IBV_QPT_UD ? QPT_UD_BIT
                                    : 0;
    return (unsigned)op < SHIM_N_WR_OPCODES && (send_opcode_qpts[op] & bit);
}

/* Transport personalities (DESIGN.md "Transports"; sim/nic/pers.h): what
 * an RC QP may post when its NIC carries RC work as EFA SRD or 1RMA
 * (Taranov et al. Table 1).  A WR outside it is refused with EINVAL -- what
 * the EFA provider answers an opcode its QPs lack (rdma-core
 * providers/efa/verbs.c, efa_post_send_validate_wr) -- and one line on
 * stderr naming the transport and the opcode.  max_msg_bytes 0 = the
 * port's active MTU (single-packet messages). */
#define WR_BIT(op) (1u << (op))
static const struct {
    uint32_t opcodes; /* WR_BIT(enum ibv_wr_opcode) allowed */
    uint32_t max_msg_bytes;
    const char *size_rule; /* what the size limit is, for the message */
    unsigned send_flags;   /* the send_flags accepted */
} personality_rules[] = {
    /* the EFA provider refuses any flag but SIGNALED and INLINE with
     * EINVAL (rdma-core providers/efa/verbs.c, efa_post_send_validate):
     * no FENCE, SOLICITED or IP_CSUM */
    [NIC_TRANSPORT_EFA_SRD] = {WR_BIT(IBV_WR_SEND) | WR_BIT(IBV_WR_SEND_WITH_IMM) |
                                   WR_BIT(IBV_WR_RDMA_READ),
                               0, "messages are single packets of at most the port MTU",
                               IBV_SEND_SIGNALED | IBV_SEND_INLINE},
    /* CALIBRATION.md, Transports "1RMA: ops <= 4 KiB"; no public provider
     * to say which flags it refuses */
    [NIC_TRANSPORT_ONERMA] = {WR_BIT(IBV_WR_RDMA_READ) | WR_BIT(IBV_WR_RDMA_WRITE), 4096,
                              "ops are at most 4096 bytes", ~0u},
};

/* The personality of an RC QP's NIC (IB / IB_AR: no restriction). */
static enum nic_transport qp_personality(const struct shim_qp *sqp)
{
    if (sqp->qp.qp_type != IBV_QPT_RC)
        return NIC_TRANSPORT_IB;
    enum nic_transport t = (enum nic_transport)nic_get_params(sqp->nqp->nic)->transport;
    return t == NIC_TRANSPORT_EFA_SRD || t == NIC_TRANSPORT_ONERMA ? t : NIC_TRANSPORT_IB;
}

static const char *wr_opcode_name(unsigned op, char *buf, size_t len)
{
    const char *name = nic_wr_opcode_name(op);
    if (name)
        return name;
    snprintf(buf, len, "opcode %u", op);
    return buf;
}

/* The opcode of `wr` on personality `t`: 0, or EINVAL with the message on
 * stderr. */
static int check_personality_op(const struct shim_qp *sqp, enum nic_transport t,
                                const struct ibv_send_wr *wr)
{
    unsigned op = (unsigned)wr->opcode;
    unsigned bad_flags = (unsigned)wr->send_flags & ~personality_rules[t].send_flags;
    if (bad_flags) {
        fprintf(stderr,
                "rnicsim: %s accepts only the send flags SIGNALED and INLINE (flags 0x%x; "
                "post_send on qp 0x%x refused, EINVAL)\n",
                nic_transport_names[t], bad_flags, sqp->qp.qp_num);
        nic_note_wr_refused(sqp->nqp->nic);
        return EINVAL;
    }
    if (op < 32 && (personality_rules[t].opcodes & WR_BIT(op)))
        return 0;
    char buf[24];
    fprintf(stderr, "rnicsim: %s has no %s (post_send on qp 0x%x refused, EINVAL)\n",
            nic_transport_names[t], wr_opcode_name(op, buf, sizeof(buf)), sqp->qp.qp_num);
    nic_note_wr_refused(sqp->nqp->nic);
    return EINVAL;
}

/* Its size (`total` bytes): 0, or EINVAL with the message on stderr. */
static int check_personality_size(const struct shim_qp *sqp, enum nic_transport t,
                                  const struct ibv_send_wr *wr, uint64_t total)
{
    uint32_t max = personality_rules[t].max_msg_bytes;
    if (!max)
        max = 128u << nic_get_params(sqp->nqp->nic)->max_mtu; /* IBV_MTU_256 = 1 .. 4096 = 5 */
    if (total <= max)
        return 0;
    char buf[24];
    fprintf(stderr,
            "rnicsim: %s %s: %s of %llu bytes > %u (post_send on qp 0x%x refused, EINVAL)\n",
            nic_transport_names[t], personality_rules[t].size_rule,
            wr_opcode_name((unsigned)wr->opcode, buf, sizeof(buf)), (unsigned long long)total, max,
            sqp->qp.qp_num);
    nic_note_wr_refused(sqp->nqp->nic);
    return EINVAL;
}

static bool opcode_is_atomic(enum ibv_wr_opcode op)
{
    return op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

enum { SHIM_ATOMIC_BYTES = 8 };

/* Check one send WR and build its WQE.  Returns 0 or EINVAL.  `pers`:
 * the QP's transport personality (qp_personality). */
static int build_send_wqe(const struct shim_qp *sqp, enum nic_transport pers,
                          const struct ibv_send_wr *wr, struct nic_send_wqe *wqe)
{
    if (!shim_send_opcode_ok(sqp->qp.qp_type, wr->opcode))
        return EINVAL;
    if (pers != NIC_TRANSPORT_IB && check_personality_op(sqp, pers, wr))
        return EINVAL;
    /* UD: the destination is the WR's address handle, of this context */
    if (sqp->qp.qp_type == IBV_QPT_UD &&
        (!wr->wr.ud.ah || wr->wr.ud.ah->context != sqp->qp.context))
        return EINVAL;
    if (wr->num_sge < 0 || (uint32_t)wr->num_sge > sqp->cap.max_send_sge ||
        wr->num_sge > NIC_MAX_SGE || (wr->num_sge > 0 && !wr->sg_list))
        return EINVAL;
    bool is_inline = (wr->send_flags & IBV_SEND_INLINE) != 0;
    bool is_atomic = opcode_is_atomic(wr->opcode);
    if (is_inline && (wr->opcode == IBV_WR_RDMA_READ || is_atomic))
        return EINVAL;
    if (is_atomic && (wr->num_sge != 1 || wr->sg_list[0].length != SHIM_ATOMIC_BYTES))
        return EINVAL;

    uint64_t total = 0;
    for (int i = 0; i < wr->num_sge; i++)
        total += wr->sg_list[i].length;
    if (is_inline && total > sqp->cap.max_inline_data)
        return EINVAL;
    if (pers != NIC_TRANSPORT_IB && check_personality_size(sqp, pers, wr, total))
        return EINVAL;

    memset(wqe, 0, offsetof(struct nic_send_wqe, inline_data));
    wqe->wr_id = wr->wr_id;
    wqe->opcode = wr->opcode;
    wqe->send_flags = wr->send_flags;
    wqe->imm_data = wr->imm_data;
    wqe->num_sge = (uint32_t)wr->num_sge;
    for (int i = 0; i < wr->num_sge; i++) {
        wqe->sge[i].addr = wr->sg_list[i].addr;
        wqe->sge[i].length = wr->sg_list[i].length;
        wqe->sge[i].lkey = wr->sg_list[i].lkey;
    }
    /* Longer than any message the port accepts: saturate, the NIC answers
     * with a length error completion. */
    wqe->length = total > UINT32_MAX ? UINT32_MAX : (uint32_t)total;
    wqe->signaled = sqp->sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED);
    if (is_atomic) {
        wqe->remote_addr = wr->wr.atomic.remote_addr;
        wqe->rkey = wr->wr.atomic.rkey;
        wqe->compare_add = wr->wr.atomic.compare_add;
        wqe->swap = wr->wr.atomic.swap;
    } else if (wr->opcode != IBV_WR_SEND && wr->opcode != IBV_WR_SEND_WITH_IMM) {
        wqe->remote_addr = wr->wr.rdma.remote_addr;
        wqe->rkey = wr->wr.rdma.rkey;
    }
    if (sqp->qp.qp_type == IBV_QPT_XRC_SEND)
        wqe->xrc_srqn = wr->qp_type.xrc.remote_srqn & 0xffffff;
    if (sqp->qp.qp_type == IBV_QPT_UD) {
        wqe->ud_node = shim_ah(wr->wr.ud.ah)->node;
        const struct ibv_ah_attr *ua = &shim_ah(wr->wr.ud.ah)->attr;
        wqe->ud_grh = ua->is_global != 0;
        wqe->ud_sl = ua->sl;
        wqe->ud_tclass = ua->grh.traffic_class;
        wqe->ud_hop_limit = ua->grh.hop_limit;
        wqe->ud_flow_label = ua->grh.flow_label;
        wqe->ud_qpn = wr->wr.ud.remote_qpn & 0xffffff;
        /* IBA 10.2.4: a WR Q_Key with the high-order bit set means "use
         * the QP's Q_Key" (the privileged-Q_Key rule is not modelled) */
        wqe->ud_qkey =
            (wr->wr.ud.remote_qkey & 0x80000000u) ? sqp->nqp->attr.qkey : wr->wr.ud.remote_qkey;
    }
    if (is_inline) {
        /* The CPU copies the payload into the WQE now: later changes to
         * the source buffers do not affect what is sent. */
        size_t off = 0;
        for (int i = 0; i < wr->num_sge; i++) {
            const struct ibv_sge *s = &wr->sg_list[i];
            if (s->length)
                memcpy(wqe->inline_data + off, (const void *)(uintptr_t)s->addr, s->length);
            off += s->length;
        }
    }
    return 0;
}

/* Bytes of a scatter/gather list (TRACE_POST len). */
static uint32_t sge_bytes(const struct ibv_sge *sg, int n)
{
    uint64_t total = 0;
    for (int i = 0; sg && i < n; i++)
        total += sg[i].length;
    return total > UINT32_MAX ? UINT32_MAX : (uint32_t)total;
}

/* The provider's post path (host.cpu.provider, docs/host.md "Posting per
 * provider").  libmlx4 -- rdma-core providers/mlx4/qp.c mlx4_post_send, and
 * the same test in MLNX_OFED's libmlx4 (__ring_db) -- copies the WQE
 * through the write-combining BlueFlame register and flushes it only when
 * one WR was posted (nreq == 1), that WR is "inl" and its WQE is more than
 * one and at most bf_buf_size / 16 16-byte units.  "inl" is set by inline
 * data, by an RDMA READ (libmlx4 commit 662a765, 2007: "Use BlueFlame for
 * RDMA_READ work requests too") and by an RDMA WRITE without a
 * scatter/gather entry (ef656a5, 2012).  Every other post -- a post list, a
 * non-inline SEND or WRITE, an atomic -- writes the send doorbell with one
 * uncached 32-bit store (mmio_write32_be(ctx->uar + MLX4_SEND_DOORBELL))
 * and no flush.  bf_buf_size is half the BlueFlame register
 * (mlx4_init_context: bf_buf_size = bf_reg_size / 2): 256 B of ConnectX-3's
 * 512 B register.  MLNX_OFED's libmlx4 (__ring_db) tests (inl || prefer_bf)
 * and turns prefer_bf on unless MLX4_POST_SEND_PREFER_BF=0
 * (read_init_vars), so there any single WR whose WQE fits goes through
 * BlueFlame: provider mlx4-ofed. */
enum { MLX4_BF_BUF_BYTES = 256, MLX4_INLINE_ALIGN = 64, MLX4_INLINE_SEG_BYTES = 4 };

/* The size of libmlx4's WQE for w in 16-byte units (fence_size): the
 * control segment, the remote address (READ/WRITE) or remote address and
 * atomic segments, UD's datagram segment, then inline data in segments of a
 * 4-byte header that never cross a 64-byte boundary, or 16 B per SGE. */
static unsigned mlx4_wqe_units(enum ibv_qp_type t, const struct ibv_send_wr *w)
{
    unsigned hdr = 16; /* struct mlx4_wqe_ctrl_seg */
    if (t == IBV_QPT_UD)
        hdr += 48; /* struct mlx4_wqe_datagram_seg */
    else if (w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD)
        hdr += 16 + 16; /* raddr + atomic segments */
    else if (w->opcode == IBV_WR_RDMA_READ || w->opcode == IBV_WR_RDMA_WRITE ||
             w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
        hdr += 16; /* struct mlx4_wqe_raddr_seg */
    if (!(w->send_flags & IBV_SEND_INLINE) || w->num_sge <= 0)
        return hdr / 16 + (unsigned)(w->num_sge > 0 ? w->num_sge : 0);
    uint32_t inl = sge_bytes(w->sg_list, w->num_sge), len = inl;
    unsigned off = (hdr + MLX4_INLINE_SEG_BYTES) % MLX4_INLINE_ALIGN, nseg = 0;
    while (len >= MLX4_INLINE_ALIGN - off) { /* a segment filled to the boundary */
        len -= MLX4_INLINE_ALIGN - off;
        nseg++;
        off = MLX4_INLINE_SEG_BYTES;
    }
    if (len)
        nseg++;
    return hdr / 16 + (unsigned)((inl + nseg * MLX4_INLINE_SEG_BYTES + 15) / 16);
}

/* Does this post (posted WRs from head) go through the BlueFlame register
 * with a write-combining flush?  mlx5: every post flushes; its BlueFlame
 * copy (the WQE with the doorbell) is the NIC's decision (nic_sq_doorbell). */
static bool post_is_blueflame(const struct host *h, enum ibv_qp_type t,
                              const struct ibv_send_wr *head, unsigned posted)
{
    if (!h || h->cpu.post_provider == HOST_PROVIDER_MLX5)
        return true;
    if (posted != 1)
        return false;
    /* MLNX_OFED's libmlx4 tests (inl || prefer_bf), prefer_bf on by
     * default (read_init_vars: MLX4_POST_SEND_PREFER_BF unset -> 1) */
    bool prefer_bf = h->cpu.post_provider == HOST_PROVIDER_MLX4_OFED;
    bool inl = prefer_bf ||
               ((head->send_flags & IBV_SEND_INLINE) && head->num_sge > 0 &&
                sge_bytes(head->sg_list, head->num_sge) > 0) ||
               head->opcode == IBV_WR_RDMA_READ ||
               ((head->opcode == IBV_WR_RDMA_WRITE || head->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) &&
                head->num_sge == 0);
    unsigned units = mlx4_wqe_units(t, head);
    return inl && units > 1 && units <= MLX4_BF_BUF_BYTES / 16;
}

/* ops.post_send.  Returns 0 or an errno with *bad_wr at the first WR not
 * posted: EINVAL (QP in RESET/INIT/RTR, opcode not valid on the QP type
 * (UC: no READ/atomics; UD: SEND only), UD without an AH, too many
 * SGEs, inline READ/atomic, inline payload above max_inline_data, atomic
 * without exactly one 8-byte SGE, NULL list; on an EFA SRD / 1RMA NIC an
 * opcode or size the personality lacks, with a message on stderr),
 * ENOMEM (send queue full).  With `all_or_nothing` (ibv_wr_complete)
 * every WR is checked, and the room in the send queue, before any is
 * posted. */
static int post_send(struct shim_qp *sqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr,
                     bool all_or_nothing)
{
    host_note_call();
    struct ibv_qp *qp = &sqp->qp;
    struct host *h = host_of_current();
    sim_time_t t0 = h ? sim_now(h->sim) : 0;
    uint64_t first_idx = sqp->nqp->sq_tail; /* the first WR's send queue index */
    int rc = 0;
    unsigned attempted = 0, posted = 0;
    struct nic_send_wqe wqe;
    uint8_t inline_bytes[NIC_MAX_INLINE_BYTES]; /* the inline payload until the NIC copies it */
    wqe.inline_data = inline_bytes;
    wqe.inline_cap = sizeof(inline_bytes);
    struct ibv_send_wr *head = wr;

    if (!wr) {
        rc = EINVAL;
    } else {
        enum ibv_qp_state st = sqp->nqp->state;
        if (st == IBV_QPS_RESET || st == IBV_QPS_INIT || st == IBV_QPS_RTR)
            rc = EINVAL;
    }
    enum nic_transport pers = rc ? NIC_TRANSPORT_IB : qp_personality(sqp);
    if (!rc && all_or_nothing) {
        uint64_t n = 0;
        for (struct ibv_send_wr *w = wr; !rc && w; w = w->next, n++)
            rc = build_send_wqe(sqp, pers, w, &wqe);
        const struct nic_qp *nq = sqp->nqp;
        if (!rc && n > nq->sq_depth - (nq->sq_tail - nq->sq_comp))
            rc = ENOMEM;
        attempted = rc ? 0 : (unsigned)n;
    }
    for (; !rc && wr; wr = wr->next) {
        if (!all_or_nothing)
            attempted++;
        rc = build_send_wqe(sqp, pers, wr, &wqe);
        if (!rc)
            rc = nic_sq_append(sqp->nqp, &wqe);
        if (rc)
            break;
        posted++;
    }
    if (rc && bad_wr)
        *bad_wr = wr;

    if (h && attempted)
        host_charge(
            sim_time_add(h->cpu.post_send_ps, sim_time_mul(attempted, h->cpu.post_send_wqe_ps)));
    if (posted) {
        struct shim_context *sctx = shim_ctx(qp->context);
        bool mlx4 = h && h->cpu.post_provider != HOST_PROVIDER_MLX5;
        bool bf = post_is_blueflame(h, qp->qp_type, head, posted);
        /* the BlueFlame lock: libmlx4 takes it around every BlueFlame copy
         * (READs too); for mlx5 the model keeps it to single inline WRs */
        bool locked = h && h->cpu.bf_lock_context && posted == 1 && !sqp->bf_dedicated &&
                      (mlx4 ? bf : (head->send_flags & IBV_SEND_INLINE) != 0);
        if (locked)
            host_doorbell_locked(&sctx->bf_free_ps, &sctx->bf_core);
        else if (bf)
            host_doorbell(); /* the previous doorbell store of this thread drained */
        else
            host_doorbell_uc(); /* libmlx4's uncached send doorbell, no flush */
        if (mlx4)
            nic_sq_ring(sqp->nqp, bf); /* the WQE came with the doorbell only if BlueFlame */
        else
            nic_sq_doorbell(sqp->nqp);
    }
    if (h && sim_trace_on(h->sim, TRACE_G_HOST)) /* the call's span: WRs posted, errno */
        host_trace_call(
            host_thread_current(), t0, sim_now(h->sim), "ibv_post_send",
            &(struct trace_rec){.qpn = qp->qp_num,
                                .opcode = head ? (uint8_t)head->opcode : 0,
                                .len = head ? sge_bytes(head->sg_list, head->num_sge) : 0,
                                .val = posted,
                                .status = (uint16_t)rc});
    if (h && posted && sim_trace_enabled(h->sim)) { /* TRACE_POST (sim/trace.h) */
        uint64_t idx = first_idx;
        for (const struct ibv_send_wr *w = head; w && w != wr; w = w->next)
            sim_trace_post(h->sim, h->id, qp->qp_num, (uint8_t)w->opcode,
                           sge_bytes(w->sg_list, w->num_sge), idx++);
    }
    return rc;
}

int shim_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr)
{
    return post_send(shim_qp(qp), wr, bad_wr, false);
}

int shim_post_send_batch(struct shim_qp *sqp, struct ibv_send_wr *wr)
{
    return post_send(sqp, wr, NULL, true);
}

int shim_recv_wqe(const struct ibv_recv_wr *wr, uint32_t max_sge, struct nic_recv_wqe *wqe)
{
    if (wr->num_sge < 0 || (uint32_t)wr->num_sge > max_sge || wr->num_sge > NIC_MAX_SGE ||
        (wr->num_sge > 0 && !wr->sg_list))
        return EINVAL;
    memset(wqe, 0, sizeof(*wqe));
    wqe->wr_id = wr->wr_id;
    wqe->num_sge = (uint32_t)wr->num_sge;
    uint64_t total = 0;
    for (int i = 0; i < wr->num_sge; i++) {
        wqe->sge[i].addr = wr->sg_list[i].addr;
        wqe->sge[i].length = wr->sg_list[i].length;
        wqe->sge[i].lkey = wr->sg_list[i].lkey;
        total += wr->sg_list[i].length;
    }
    wqe->length = total > UINT32_MAX ? UINT32_MAX : (uint32_t)total;
    return 0;
}

/* ops.post_recv.  Returns 0 or an errno with *bad_wr at the first WR not
 * posted: EINVAL (QP in RESET, too many SGEs, NULL list), ENOMEM (receive
 * queue full, an XRC QP, or the QP has an SRQ: mlx5 gives such a QP a receive queue
 * of size 0, so mlx5_post_recv's mlx5_wq_overflow check answers ENOMEM
 * for the first WR; rxe would say EINVAL). */
int shim_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr)
{
    host_note_call();
    struct host *h = host_of_current();
    sim_time_t t0 = h ? sim_now(h->sim) : 0;
    struct shim_qp *sqp = shim_qp(qp);
    int rc = 0;
    unsigned attempted = 0;
    struct nic_recv_wqe wqe;
    struct ibv_recv_wr *head = wr;

    if (!wr)
        rc = EINVAL;
    else if (sqp->srq || qp->qp_type == IBV_QPT_XRC_SEND || qp->qp_type == IBV_QPT_XRC_RECV)
        rc = ENOMEM; /* XRC QPs have no receive queue either (size 0 in mlx5) */
    else if (sqp->nqp->state == IBV_QPS_RESET)
        rc = EINVAL;
    for (; !rc && wr; wr = wr->next) {
        attempted++;
        rc = shim_recv_wqe(wr, sqp->cap.max_recv_sge, &wqe);
        if (!rc)
            rc = nic_rq_append(sqp->nqp, &wqe);
        if (rc)
            break;
    }
    if (rc && bad_wr)
        *bad_wr = wr;

    if (h && attempted)
        host_charge(sim_time_mul(attempted, h->cpu.post_recv_ps));
    if (h && sim_trace_on(h->sim, TRACE_G_HOST))
        host_trace_call(
            host_thread_current(), t0, sim_now(h->sim), "ibv_post_recv",
            &(struct trace_rec){.qpn = qp->qp_num,
                                .len = head ? sge_bytes(head->sg_list, head->num_sge) : 0,
                                .val = attempted - (rc ? 1u : 0u),
                                .status = (uint16_t)rc});
    if (h && sim_trace_enabled(h->sim)) /* TRACE_POST (sim/trace.h) */
        for (const struct ibv_recv_wr *w = head; w && w != wr; w = w->next)
            sim_trace_post(h->sim, h->id, qp->qp_num, TRACE_POST_RECV,
                           sge_bytes(w->sg_list, w->num_sge), 0);
    return rc;
}
