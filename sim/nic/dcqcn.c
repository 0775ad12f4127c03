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

static void clamp(const struct nic_params *p, uint64_t line, struct nic_dcqcn *d)
{
    uint64_t lo = p->dcqcn_min_rate_bps;
    if (d->rt_bps > line)
        d->rt_bps = line;
    if (d->rc_bps > line)
        d->rc_bps = line;
    if (d->rc_bps < lo)
        d->rc_bps = lo;
}

/* Back within 1 Mb/s of line rate: unthrottled. */
static bool recovered(uint64_t rc_bps, uint64_t line)
{
    return rc_bps + 1000000 >= line;
}

/* The arithmetic of one rate-increase step after the timer (by_timer) or
 * the byte counter; false when the QP is back at line rate. */
static bool increase_rate(const struct nic_params *p, uint64_t line, struct nic_dcqcn *d,
                          bool by_timer)
{
    if (by_timer)
        d->t_count++;
    else
        d->bc_count++;
    uint32_t hi = d->t_count > d->bc_count ? d->t_count : d->bc_count;
    uint32_t lo = d->t_count < d->bc_count ? d->t_count : d->bc_count;
    uint32_t f = p->dcqcn_f;
    if (hi <= f) {
        /* fast recovery (the first F stages): towards the rate before the cut */
    } else if (lo > f) {
        d->rt_bps += (uint64_t)(lo - f) * p->dcqcn_rhai_bps;
    } else {
        d->rt_bps += p->dcqcn_rai_bps;
    }
    clamp(p, line, d);
    d->rc_bps = (d->rt_bps + d->rc_bps) / 2;
    d->increases++;
    if (recovered(d->rc_bps, line)) {
        d->rc_bps = line;
        d->active = false;
        d->dormant = false;
        return false;
    }
    return true;
}

bool nic_dcqcn_tick(const struct nic_params *p, uint64_t line_bps, struct nic_dcqcn *d)
{
    d->alpha *= 1.0 - DCQCN_G; /* alpha's timer fires first at equal times (rate_cut) */
    return increase_rate(p, line_bps, d, true);
}

/* n ticks of an idle QP (no bytes sent: the byte-counter stage B stays).
 * Each tick adds an increment to Rt -- 0 in fast recovery, R_AI when
 * additive, (min(t, B) - F) R_HAI when hyper -- and halves the gap
 * e = Rt - Rc towards it: e' = ceil((e + inc) / 2), whatever Rt is.  Once
 * the increment is the same for every later tick (additive with B <= F,
 * or hyper with t >= B) and e is a fixed point of that map (reached
 * within ~64 ticks: e halves), m ticks are Rt += m inc, Rc = Rt - e, as
 * long as Rt stays within the line rate and Rc short of recovery; the
 * ticks before and after that (fast recovery, e converging, the approach
 * to line rate) are stepped.  alpha decays by (1 - g) per tick as a
 * product, not a power: pow() rounds differently from the stepped
 * product, and a later cut must see the same alpha to the last bit. */
uint64_t nic_dcqcn_ticks(const struct nic_params *p, uint64_t line_bps, struct nic_dcqcn *d,
                         uint64_t n)
{
    uint64_t done = 0;
    uint32_t f = p->dcqcn_f;
    while (done < n && d->active) {
        uint32_t t1 = d->t_count + 1, b = d->bc_count;
        uint64_t inc = 0;
        bool steady = false;
        if ((t1 > b ? t1 : b) <= f) {
            steady = false; /* fast recovery: at most F ticks */
        } else if ((t1 < b ? t1 : b) > f) {
            inc = (uint64_t)((t1 < b ? t1 : b) - f) * p->dcqcn_rhai_bps;
            steady = t1 >= b;
        } else {
            inc = p->dcqcn_rai_bps;
            steady = b <= f;
        }
        uint64_t rt = d->rt_bps, rc = d->rc_bps;
        uint64_t m = 0;
        if (steady && inc && rt >= rc && rc >= p->dcqcn_min_rate_bps && rt <= line_bps &&
            rt + inc <= line_bps) {
            uint64_t e = rt - rc;
            uint64_t e1 = rt + inc - (rt + inc + rc) / 2;
            if (e1 == e) {
                m = (line_bps - rt) / inc; /* Rt within the line rate */
                /* Rc = Rt + k inc - e short of recovery for every k <= m */
                if (line_bps + e <= rt + 1000000) {
                    m = 0;
                } else {
                    uint64_t x = line_bps + e - rt - 1000000; /* need k inc < x */
                    uint64_t kmax = (x - 1) / inc;
                    if (kmax < m)
                        m = kmax;
                }
                if (m > n - done)
                    m = n - done;
            }
        }
        if (m == 0) {
            nic_dcqcn_tick(p, line_bps, d);
            done++;
            continue;
        }
        d->rt_bps = rt + m * inc;
        d->rc_bps = d->rt_bps - (rt - rc);
        d->t_count += (uint32_t)m;
        d->increases += m;
        for (uint64_t k = 0; k < m; k++)
            d->alpha *= 1.0 - DCQCN_G;
        done += m;
    }
    return done;
}

/* A rate-increase step with its effects on the QP's pacing and timers. */
static void increase(struct nic_rl *rl, bool by_timer)
{
    struct nic *nic = rl->qp->nic;
    struct nic_dcqcn *d = &rl->dcqcn;
    if (!increase_rate(&nic->p, line_rate(nic), d, by_timer)) {
        sim_cancel(nic->sim, &d->alpha_ev);
        sim_cancel(nic->sim, &d->incr_ev);
        nic_rl_set_cc_rate(rl, 0);
        return;
    }
    nic_rl_set_cc_rate(rl, d->rc_bps);
}

/* The timer stage.  A QP that sent nothing since the last tick and is not
 * waiting for its pacing slot is idle: its timers stop (dormant) and the
 * ticks it misses are applied in closed form when it next sends, is cut
 * or is asked its rate (nic_dcqcn_wake, nic_dcqcn_rate_now).  Ticks at
 * the very instant of that wake-up are applied before it. */
static void incr_fn(struct sim *sim, struct sim_event *ev)
{
    struct nic_rl *rl = ev->ctx;
    struct nic_dcqcn *d = &rl->dcqcn;
    sim_time_t period = rl->qp->nic->p.dcqcn_timer_ps;
    increase(rl, true);
    if (!d->active)
        return;
    if (!d->tx_since_tick && !rl->held) {
        d->dormant = true;
        d->next_tick_ps = sim_time_add(sim_now(sim), period);
        sim_cancel(sim, &d->alpha_ev);
        return;
    }
    d->tx_since_tick = false;
    sim_schedule_in(sim, &d->incr_ev, period);
}

/* Ticks of a dormant QP due by `now`. */
static uint64_t ticks_due(const struct nic_dcqcn *d, sim_time_t now, sim_time_t period)
{
    if (!d->dormant || now < d->next_tick_ps || !period)
        return 0;
    return (now - d->next_tick_ps) / period + 1;
}

void nic_dcqcn_wake(struct nic_rl *rl)
{
    struct nic_dcqcn *d = &rl->dcqcn;
    if (!d->dormant)
        return;
    struct nic *nic = rl->qp->nic;
    sim_time_t period = nic->p.dcqcn_timer_ps;
    uint64_t n = ticks_due(d, sim_now(nic->sim), period);
    d->dormant = false;
    nic_dcqcn_ticks(&nic->p, line_rate(nic), d, n);
    if (!d->active) {
        nic_rl_set_cc_rate(rl, 0);
        return;
    }
    nic_rl_set_cc_rate(rl, d->rc_bps);
    d->tx_since_tick = false;
    sim_time_t next = sim_time_add(d->next_tick_ps, sim_time_mul(n, period));
    sim_schedule_at(nic->sim, &d->alpha_ev, next);
    sim_schedule_at(nic->sim, &d->incr_ev, next);
}

uint64_t nic_dcqcn_rate_now(const struct nic_rl *rl)
{
    const struct nic_dcqcn *d = &rl->dcqcn;
    if (!d->dormant)
        return rl->cc_rate_bps;
    const struct nic *nic = rl->qp->nic;
    struct nic_dcqcn copy = *d;
    nic_dcqcn_ticks(&nic->p, line_rate(nic), &copy,
                    ticks_due(d, sim_now(nic->sim), nic->p.dcqcn_timer_ps));
    return copy.active ? copy.rc_bps : 0;
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
    rl->dcqcn.dormant = false;
}

/* A CNP for `qp`: cut the rate. */
static void rate_cut(struct nic_qp *qp)
{
    struct nic *nic = qp->nic;
    struct nic_rl *rl = nic_rl_of(qp);
    struct nic_dcqcn *d = &rl->dcqcn;
    nic_dcqcn_wake(rl);
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
    d->tx_since_tick = false;
    clamp(&nic->p, line_rate(nic), d);
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
    nic_dcqcn_wake(rl);
    if (!d->active)
        return;
    d->tx_since_tick = true;
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
    nic_pkt_route_fields(nic, c, &qp->attr.ah_attr);
    c->prio = (uint8_t)(nic->p.cnp_prio & 7);
    /* RoCEv2 CNP (IBA Annex A17.9.3): BTH + 16 reserved bytes + ICRC.  On an
     * InfiniBand port the same packet in IB framing stands for the CNP of
     * IB congestion control (IBA Annex A10), which carries the BECN: the
     * DCQCN reaction is kept, the frame is the port's */
    if (!c->no_bytes)
        memset(pkt_payload_reserve(nic->pool, c, NIC_CNP_RESERVED_BYTES), 0,
               NIC_CNP_RESERVED_BYTES);
    c->payload_len = NIC_CNP_RESERVED_BYTES;
    c->framing = nic_framing(nic, qp->attr.ah_attr.is_global);
    c->frame_bytes =
        pkt_framed_bytes(c->framing, PKT_BTH_BYTES + NIC_CNP_RESERVED_BYTES + PKT_ICRC_BYTES);
    nic->cnt.cnps_tx++;
    nic_tx_ctrl(nic, c);
}
