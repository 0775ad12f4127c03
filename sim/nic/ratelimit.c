/* Per-QP rate limiter (ratelimit.h): pacing of a QP's requester packets at
 * min(user limit, congestion control rate).  It serves IBV_QP_RATE_LIMIT /
 * ibv_modify_qp_rate_limit (mlx5's per-QP packet pacing) and DCQCN's
 * reaction point (dcqcn.c).  State is allocated per QP on first use, so a
 * QP that never is limited costs one NULL pointer. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ratelimit.h"

static void rl_ev_fn(struct sim *sim, struct sim_event *ev)
{
    (void)sim;
    struct nic_rl *rl = ev->ctx;
    struct nic_txsrc *src = rl->held;
    rl->held = NULL;
    if (src && !rl->qp->eng->dead)
        nic_tx_src_ready(rl->qp->nic, src);
}

struct nic_rl *nic_rl_of(struct nic_qp *qp)
{
    struct nic_qp_engine *e = qp->eng;
    if (!e->rl) {
        e->rl = calloc(1, sizeof(*e->rl));
        if (!e->rl) {
            fprintf(stderr, "rnicsim: out of memory for a rate limiter\n");
            abort();
        }
        e->rl->qp = qp;
        sim_event_init(&e->rl->ev, rl_ev_fn, e->rl, "nic.ratelimit");
        nic_dcqcn_init(e->rl);
    }
    return e->rl;
}

void nic_rl_free(struct nic_qp *qp)
{
    struct nic_rl *rl = qp->eng->rl;
    if (!rl)
        return;
    sim_cancel(qp->nic->sim, &rl->ev);
    nic_dcqcn_stop(rl);
    free(rl);
    qp->eng->rl = NULL;
}

uint64_t nic_rl_rate(const struct nic_rl *rl)
{
    uint64_t a = rl->limit_bps, b = rl->cc_rate_bps;
    if (!a)
        return b;
    if (!b)
        return a;
    return a < b ? a : b;
}

bool nic_rl_hold(struct nic_qp *qp, struct nic_txsrc *src)
{
    struct nic_rl *rl = qp->eng->rl;
    if (rl)
        nic_dcqcn_wake(rl); /* an idle throttled QP catches up before it sends */
    if (!rl || !nic_rl_rate(rl))
        return false;
    struct sim *sim = qp->nic->sim;
    if (sim_now(sim) >= rl->next_ps)
        return false;
    rl->held = src;
    if (!sim_event_pending(&rl->ev))
        sim_schedule_at(sim, &rl->ev, rl->next_ps);
    return true;
}

void nic_rl_on_tx(struct nic_qp *qp, const struct pkt *p)
{
    struct nic_rl *rl = qp->eng->rl;
    if (!rl)
        return;
    uint32_t wire = pkt_wire_bytes(p);
    nic_dcqcn_on_tx(qp, wire);
    uint64_t rate = nic_rl_rate(rl);
    if (!rate)
        return;
    sim_time_t now = sim_now(qp->nic->sim);
    sim_time_t start = rl->next_ps > now ? rl->next_ps : now;
    rl->next_ps = start + sim_bytes_to_ps(wire, rate);
}

void nic_rl_set_cc_rate(struct nic_rl *rl, uint64_t rate_bps)
{
    rl->cc_rate_bps = rate_bps;
}

int nic_qp_set_rate_limit(struct nic_qp *qp, uint64_t rate_bps)
{
    if (!qp)
        return EINVAL;
    if (!rate_bps && !qp->eng->rl)
        return 0;
    struct nic_rl *rl = nic_rl_of(qp);
    rl->limit_bps = rate_bps;
    if (rl->held && !sim_event_pending(&rl->ev)) /* re-evaluate at once */
        sim_schedule_at(qp->nic->sim, &rl->ev, sim_now(qp->nic->sim));
    return 0;
}

uint64_t nic_qp_rate_bps(const struct nic_qp *qp)
{
    const struct nic_rl *rl = qp->eng->rl;
    if (!rl)
        return 0;
    struct nic_rl now = {.limit_bps = rl->limit_bps, .cc_rate_bps = nic_dcqcn_rate_now(rl)};
    return nic_rl_rate(&now);
}
