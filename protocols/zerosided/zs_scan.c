/* Step 1 of a replicated transfer: the free space of the consumer rings is
 * the minimum over the group's consumers, one consumer a pass (a packet
 * reaches one entry of a register array per pass); the last pass picks the
 * batch and issues the READ. */

#include "protocols/zerosided/zs_dp_int.h"

/* replicate: pass 0 picks the source and reads consumer 0; pass i reads
 * consumer i (a packet reaches one entry of an array per pass, so the
 * minimum free space over M consumers takes M passes); the last one picks
 * the batch and issues the READ.  Every consumer of the group has the same
 * head (the same items, in the same order), kept once in t_chead. */
void zs_scan_pass(struct zs_dp *dp, struct ps_pass *x, struct pkt *p, struct zs_br b,
                  const struct zs_thr_ent *th)
{
    uint32_t t = b.t;
    bool first = b.type != ZS_BR_SCAN;
    uint32_t flags = 0;
    bool pdone = false;
    if (b.type == ZS_BR_RELEASE) { /* commit the tail, then scan afresh */
        struct a_tail at = {.write = true, .v = b.v};
        ps_reg_exec(x, dp->p_tail, b.p, zs_act_tail, &at);
        zs_set_phase(dp, x, t, ZS_PH_IDLE);
        struct zs_br nb = {.type = ZS_BR_TOKEN, .t = (uint16_t)t};
        zs_recirc_as(x, p, &nb);
        return;
    }
    if (first) {
        flags = (uint32_t)ps_reg_read(x, dp->t_flags, t);
        uint32_t rr[2] = {th->n_src, 1};
        b.j = (uint16_t)ps_reg_exec(x, dp->t_rr, t, zs_act_rr, rr);
        b.i = 0;
    }
    dp->st.scans++;
    const struct zs_src_ent *src = ps_table_apply(x, dp->src, (uint64_t)t << 16 | b.j);
    const uint16_t *c = ps_table_apply(x, dp->mc, (uint64_t)t << 16 | b.i);
    if (!src || !c) {
        ps_drop(x);
        return;
    }
    if (first) {
        uint32_t phead = (uint32_t)ps_reg_read(x, dp->p_head, src->p);
        b.ptail = (uint32_t)ps_reg_read(x, dp->p_tail, src->p);
        b.avail = ((phead & ZS_PTR_MASK) - b.ptail) & ZS_PTR_MASK;
        pdone = (phead & ZS_DONE_BIT) && b.avail == 0;
        if (flags & ZS_TF_STOP)
            b.avail = 0;
        b.p = src->p;
        b.v = 0;
    }
    uint32_t ctail = (uint32_t)ps_reg_read(x, dp->c_tail, *c) & ZS_PTR_MASK;
    bool last = b.i + 1u >= th->n_cons || b.avail == 0;
    struct a_take tk = {.avail = last ? b.avail : 0,
                        .ctail = ctail,
                        .ccap = th->capacity,
                        .pend = src->ep.capacity - b.ptail % src->ep.capacity,
                        .max = th->max_batch,
                        .used_max = b.v,
                        .repl = true};
    uint64_t r = ps_reg_exec(x, dp->t_chead, t, zs_act_take, &tk); /* n = 0 unless last */
    uint32_t chead = (uint32_t)r, n = (uint32_t)(r >> 32);
    struct a_u64 bit = {.v = pdone ? 1ull << b.j : 0};
    uint64_t done = ps_reg_exec(x, dp->t_done, t, zs_act_or, &bit);
    if (!last) {
        uint32_t used = (chead - ctail) & ZS_PTR_MASK;
        if (used > b.v)
            b.v = used;
        b.type = ZS_BR_SCAN;
        b.i++;
        zs_set_phase(dp, x, t, ZS_PH_IDLE);
        zs_recirc_as(x, p, &b);
        return;
    }
    if (n == 0) {
        if ((done & th->all_done) == th->all_done || (flags & ZS_TF_STOP)) {
            zs_issue_final(dp, x, p, t, th, chead);
            return;
        }
        dp->st.tokens_idle++;
        zs_set_phase(dp, x, t, ZS_PH_IDLE);
        struct zs_br nb = {.type = ZS_BR_TOKEN, .t = (uint16_t)t};
        zs_recirc_as(x, p, &nb);
        return;
    }
    uint32_t item = src->ep.item_bytes;
    uint64_t bytes = (uint64_t)n * item;
    uint32_t np = zs_npkts(dp, bytes);
    uint32_t res = np + 1;
    uint32_t pfirst = (uint32_t)ps_reg_exec(x, dp->p_next, src->p, zs_act_alloc, &res);
    uint32_t cfirst = (uint32_t)ps_reg_exec(x, dp->t_cnext, t, zs_act_alloc, &res);
    struct a_ev pe = {.ev = EV_READ_ISSUE, .first = pfirst};
    ps_reg_exec(x, dp->p_exp, src->p, zs_act_pexp, &pe);
    struct a_ev ae = {.ev = EV_READ_ISSUE, .state = X_DATA, .exp = cfirst + np - 1};
    ps_reg_exec(x, dp->t_ack, t, zs_act_tack, &ae);
    ps_reg_write(x, dp->t_xfer, t, (uint64_t)src->p | (uint64_t)n << 16);
    ps_reg_write(x, dp->t_ptrs, t,
                 (uint64_t)((chead + n) & ZS_PTR_MASK) | (uint64_t)((b.ptail + n) & ZS_PTR_MASK)
                                                             << 32);
    ps_reg_write(x, dp->t_cva, t, ZS_HDR_BYTES + (uint64_t)(chead % th->capacity) * th->item_bytes);
    ps_reg_write(x, dp->t_off, t, PSN(cfirst - pfirst));
    ps_reg_write(x, dp->t_psn, t, PSN(pfirst + np));
    zs_set_phase(dp, x, t, ZS_PH_READ);
    dp->st.transfers++;
    dp->st.items += n;
    dp->st.bytes += bytes;
    zs_emit_read(dp, x, p, &src->ep, false, pfirst,
                 src->ep.base + ZS_HDR_BYTES + (uint64_t)(b.ptail % src->ep.capacity) * item,
                 (uint32_t)bytes);
}
