/* DCQCN (Zhu et al., "Congestion Control for Large-Scale RDMA
 * Deployments", SIGCOMM 2015): the NIC's congestion control for RoCEv2.
 *
 * Congestion point: the switches mark ECN-capable packets CE with RED on
 * their egress queues (link.c, topology.ecn).  The NIC sends its RoCE
 * packets ECT(0) when DCQCN is on (nic.c).
 *
 * Notification point (receiver): a request packet that arrives marked CE
 * makes the QP send a CNP (BTH opcode 0x81, destination = the sender's QP)
 * to the sender, at most one per QP every cnp_interval_ps.  CNPs go out as
 * NIC control packets, ahead of data, on priority cnp_prio.
 *
 * Reaction point (sender), per QP, rates in bits/s:
 *   CNP:               Rt = Rc; Rc = Rc (1 - alpha/2); alpha = (1-g) alpha + g;
 *                      timer and byte-counter stages restart
 *   every K w/o CNP:   alpha = (1-g) alpha
 *   timer (every T) or byte counter (every B bytes sent), stage i = that
 *   counter, j = the other:
 *     max(i, j) <= F   fast recovery:  Rc = (Rt + Rc) / 2
 *     min(i, j) > F    hyper increase: Rt += (min(i, j) - F) R_HAI; Rc = (Rt + Rc) / 2
 *     otherwise        additive:       Rt += R_AI;                  Rc = (Rt + Rc) / 2
 *   Rates stay within [min rate, line rate]; when Rc is back at line rate
 *   the QP is unthrottled and its timers stop (no events for idle QPs).
 * alpha starts at 1 and Rc at line rate.  The QP's pacing is the rate
 * limiter's (ratelimit.c).  Parameters: nic_params (nic.c has sources). */
#include <math.h>
#include <string.h>

#include "ratelimit.h"

/* DCQCN paper: g = 1/256 (the EWMA gain of alpha). */
#define DCQCN_G (1.0 / 256.0)

static uint64_t line_rate(const struct nic *nic)
{
    if (nic->uplink)
        return link_get_params(nic->uplink)->rate_bps;
    return nic->p.port_rate_bps;
}

static void alpha_fn(struct sim *sim, struct sim_event *ev)
{
    struct nic_rl *rl = ev->ctx;
    struct nic_dcqcn *d = &rl->dcqcn;
    d->alpha *= 1.0 - DCQCN_G;
    if (d->active)
        sim_schedule_in(sim, &d->alpha_ev, rl->qp->nic->p.dcqcn_timer_ps);
}

static void clamp(struct nic *nic, struct nic_dcqcn *d)
{
    uint64_t line = line_rate(nic), lo = nic->p.dcqcn_min_rate_bps;
    if (d->rt_bps > line)
        d->rt_bps = line;
    if (d->rc_bps > line)
        d->rc_bps = line;
    if (d->rc_bps < lo)
        d->rc_bps = lo;
}

/* One rate-increase step after the timer (by_timer) or the byte counter. */
static void increase(struct nic_rl *rl, bool by_timer)
{
    struct nic *nic = rl->qp->nic;
    struct nic_dcqcn *d = &rl->dcqcn;
    if (by_timer)
        d->t_count++;
    else
        d->bc_count++;
    uint32_t hi = d->t_count > d->bc_count ? d->t_count : d->bc_count;
    uint32_t lo = d->t_count < d->bc_count ? d->t_count : d->bc_count;
    uint32_t f = nic->p.dcqcn_f;
    if (hi <= f) {
        /* fast recovery (the first F stages): towards the rate before the cut */
    } else if (lo > f) {
        d->rt_bps += (uint64_t)(lo - f) * nic->p.dcqcn_rhai_bps;
    } else {
        d->rt_bps += nic->p.dcqcn_rai_bps;
    }
    clamp(nic, d);
    d->rc_bps = (d->rt_bps + d->rc_bps) / 2;
    d->increases++;
    uint64_t line = line_rate(nic);
    if (d->rc_bps + 1000000 >= line) { /* back within 1 Mb/s of line rate: unthrottled */
        d->rc_bps = line;
        d->active = false;
        sim_cancel(nic->sim, &d->alpha_ev);
        sim_cancel(nic->sim, &d->incr_ev);
        nic_rl_set_cc_rate(rl, 0);
        return;
    }
    nic_rl_set_cc_rate(rl, d->rc_bps);
}

static void incr_fn(struct sim *sim, struct sim_event *ev)
{
    struct nic_rl *rl = ev->ctx;
    increase(rl, true);
    if (rl->dcqcn.active)
        sim_schedule_in(sim, &rl->dcqcn.incr_ev, rl->qp->nic->p.dcqcn_timer_ps);
}

void nic_dcqcn_init(struct nic_rl *rl)
{
    struct nic_dcqcn *d = &rl->dcqcn;
    memset(d, 0, sizeof(*d));
    d->alpha = 1.0;
    sim_event_init(&d->alpha_ev, alpha_fn, rl, "nic.dcqcn.alpha");
    sim_event_init(&d->incr_ev, incr_fn, rl, "nic.dcqcn.increase");
}

void nic_dcqcn_stop(struct nic_rl *rl)
{
    struct sim *sim = rl->qp->nic->sim;
    sim_cancel(sim, &rl->dcqcn.alpha_ev);
    sim_cancel(sim, &rl->dcqcn.incr_ev);
    rl->dcqcn.active = false;
}

/* A CNP for `qp`: cut the rate. */
static void rate_cut(struct nic_qp *qp)
{
    struct nic *nic = qp->nic;
    struct nic_rl *rl = nic_rl_of(qp);
    struct nic_dcqcn *d = &rl->dcqcn;
    if (!d->active) {
        d->rc_bps = d->rt_bps = line_rate(nic);
        d->active = true;
    }
    d->rt_bps = d->rc_bps;
    d->rc_bps = (uint64_t)llround((double)d->rc_bps * (1.0 - d->alpha / 2.0));
    d->alpha = (1.0 - DCQCN_G) * d->alpha + DCQCN_G;
    d->t_count = d->bc_count = 0;
    d->bytes = 0;
    d->cuts++;
    clamp(nic, d);
    nic_rl_set_cc_rate(rl, d->rc_bps);
    sim_schedule_in(nic->sim, &d->alpha_ev, nic->p.dcqcn_timer_ps);
    sim_schedule_in(nic->sim, &d->incr_ev, nic->p.dcqcn_timer_ps);
}

void nic_dcqcn_rp_cnp(struct nic *nic, const struct pkt *p)
{
    nic->cnt.cnps_rx++;
    struct nic_qp *qp = nic_qp_lookup(nic, p->dest_qpn);
    if (!qp || !nic->p.dcqcn || !nic_qp_can_send(qp))
        return;
    rate_cut(qp);
}

void nic_dcqcn_on_tx(struct nic_qp *qp, uint32_t wire_bytes)
{
    struct nic_rl *rl = qp->eng->rl;
    struct nic_dcqcn *d = &rl->dcqcn;
    if (!d->active)
        return;
    d->bytes += wire_bytes;
    if (d->bytes >= qp->nic->p.dcqcn_byte_counter_bytes) {
        d->bytes = 0;
        increase(rl, false);
    }
}

void nic_dcqcn_np_rx(struct nic_qp *qp, const struct pkt *p)
{
    (void)p;
    struct nic *nic = qp->nic;
    struct nic_rl *rl = nic_rl_of(qp);
    struct nic_dcqcn *d = &rl->dcqcn;
    sim_time_t now = sim_now(nic->sim);
    if (d->cnp_sent && now - d->last_cnp_tx_ps < nic->p.cnp_interval_ps)
        return;
    d->cnp_sent = true;
    d->last_cnp_tx_ps = now;
    struct pkt *c = pkt_alloc(nic->pool);
    c->src_node = nic->node_id;
    c->dst_node = qp->dest_node;
    c->src_qpn = qp->qpn;
    c->dest_qpn = qp->attr.dest_qp_num & NIC_PSN_MASK;
    c->opcode = NIC_OPCODE_CNP;
    c->udp_sport = qp->eng->udp_sport;
    c->prio = (uint8_t)(nic->p.cnp_prio & 7);
    /* RoCEv2 CNP (IBA Annex A17.9.3): BTH + 16 reserved bytes + ICRC */
    c->payload_len = NIC_CNP_RESERVED_BYTES;
    if (!c->no_bytes)
        memset(c->payload, 0, NIC_CNP_RESERVED_BYTES);
    c->frame_bytes = PKT_ETH_HDR_BYTES + PKT_IPV4_HDR_BYTES + PKT_UDP_HDR_BYTES + PKT_BTH_BYTES +
                     NIC_CNP_RESERVED_BYTES + PKT_ICRC_BYTES + PKT_ETH_FCS_BYTES;
    if (c->frame_bytes < 64)
        c->frame_bytes = 64;
    nic->cnt.cnps_tx++;
    nic_tx_ctrl(nic, c);
}
