/* Priority-based flow control (IEEE 802.1Qbb) at a switch's ingress ports.
 *
 * Each ingress port counts, per priority, the bytes of frames that came in
 * on it and are still in the switch (in the forwarding pipeline or queued
 * at an egress port): admitted on arrival (pfc_admit), released when the
 * frame leaves its egress queue, sent or dropped (pfc_release, called from
 * the egress links' dequeue hook).  For a lossless priority:
 *
 *   bytes >= xoff              send PAUSE(prio, quanta) upstream, on the
 *                              port's own egress link (the other direction
 *                              of the cable); repeat it every quanta/2 while
 *                              still above xon, so the upstream never
 *                              resumes by expiry while congested
 *   bytes <= xon (after xoff)  send PAUSE(prio, 0): resume
 *   bytes > xoff + headroom    drop (pfc_headroom_drops): the headroom was
 *                              too small for what was in flight; 0 when it
 *                              covers the cable's round trip
 *
 * The upstream transmitter (a switch's egress link or a NIC's uplink)
 * stops starting frames of that priority when the pause frame reaches it
 * (link.c), so a pause costs a frame time + the cable delay to take effect:
 * that is what the headroom absorbs.  Pauses propagate by themselves: a
 * paused egress port's queue grows, which fills the ingress counters of the
 * ports feeding it, which pause their upstreams in turn.
 *
 * With credits (pfc_params.credits, an InfiniBand switch; IBA vol. 1 7.9)
 * the same per-port, per-priority accounting is the port's receive buffer
 * of xoff_bytes: the feeding link's transmitter counts the credits
 * (link_set_credits, link.c) and never sends past it, and a frame leaving
 * the switch gives its blocks back (link_credit_return).  Nothing is sent
 * upstream but credit, so there is no threshold, headroom or drop, and no
 * XOFF arms the deadlock detector. */
#include <stdlib.h>
#include <string.h>

#include "pfc.h"

struct pfc_port {
    struct sim *sim;
    struct pkt_pool *pool;
    struct link *in, *out; /* the ingress link and the port's egress (towards upstream) */
    const struct pfc_params *pp;
    struct switch_counters *c;
    uint64_t bytes[PKT_PRIOS];
    uint8_t paused; /* priorities we sent XOFF for */
    uint64_t headroom_bytes;
    struct sim_event refresh_ev;
};

static void send_pause(struct pfc_port *pt, uint8_t mask, bool xoff)
{
    if (!pt->out || !mask)
        return;
    struct pkt *f = pkt_alloc(pt->pool);
    f->kind = PKT_PFC;
    f->frame_bytes = PKT_PFC_FRAME_BYTES;
    f->pfc_enable = mask;
    for (unsigned c = 0; c < PKT_PRIOS; c++)
        if (mask & (1u << c))
            f->pfc_quanta[c] = xoff ? pt->pp->quanta : 0;
    link_send_ctrl(pt->out, f);
    if (xoff && pt->pp->on_xoff)
        pt->pp->on_xoff(pt->pp->on_xoff_ctx);
    if (xoff)
        pt->c->pfc_xoff_sent++;
    else
        pt->c->pfc_xon_sent++;
}

/* Half the pause time at the upstream's rate: XOFF again before it lapses. */
static sim_time_t refresh_ps(const struct pfc_port *pt)
{
    uint64_t rate = link_get_params(pt->in)->rate_bps;
    return sim_bytes_to_ps((uint64_t)pt->pp->quanta * 64 / 2, rate);
}

static void refresh_fn(struct sim *sim, struct sim_event *ev)
{
    (void)sim;
    struct pfc_port *pt = ev->ctx;
    if (!pt->paused)
        return;
    send_pause(pt, pt->paused, true);
    sim_schedule_in(pt->sim, &pt->refresh_ev, refresh_ps(pt));
}

uint64_t pfc_default_headroom(const struct link *in)
{
    /* IEEE 802.1Qbb-2011 Annex N (PFC delay model): what arrives after the
     * XOFF decision = two cable delays of data at the link rate, plus a
     * maximum frame the upstream had started, plus the pause frame waiting
     * behind the frame our own port was sending, plus one more maximum
     * frame of response time.  Maximum frame: a 4 KiB-MTU RoCEv2 frame. */
    const struct link_params *lp = link_get_params(in);
    uint64_t cable = (uint64_t)((__uint128_t)lp->delay_ps * lp->rate_bps / 8 / 1000000000000ull);
    uint64_t max_frame = PKT_MAX_PAYLOAD_BYTES + 128;
    return 2 * cable + 3 * max_frame + PKT_PFC_FRAME_BYTES;
}

struct pfc_port *pfc_port_create(struct sim *sim, struct pkt_pool *pool, struct link *in,
                                 const struct pfc_params *pp, struct switch_counters *c)
{
    struct pfc_port *pt = calloc(1, sizeof(*pt));
    if (!pt)
        return NULL;
    pt->sim = sim;
    pt->pool = pool;
    pt->in = in;
    pt->out = in ? link_peer(in) : NULL;
    pt->pp = pp;
    pt->c = c;
    pt->headroom_bytes = pp->headroom_bytes ? pp->headroom_bytes
                         : in               ? pfc_default_headroom(in)
                                            : 0;
    sim_event_init(&pt->refresh_ev, refresh_fn, pt, "pfc.refresh");
    if (pp->credits && in)
        link_set_credits(in, pp->prio_mask, pp->xoff_bytes);
    return pt;
}

void pfc_port_destroy(struct pfc_port *pt)
{
    if (!pt)
        return;
    sim_cancel(pt->sim, &pt->refresh_ev);
    free(pt);
}

bool pfc_admit(struct pfc_port *pt, const struct pkt *p)
{
    if (p->kind != PKT_ROCE || !(pt->pp->prio_mask & (1u << p->prio)))
        return true;
    uint64_t wire = pkt_wire_bytes(p);
    if (pt->pp->credits) { /* the upstream sent it on credit: it fits */
        pt->bytes[p->prio] += wire;
        return true;
    }
    if (pt->bytes[p->prio] + wire > pt->pp->xoff_bytes + pt->headroom_bytes) {
        pt->c->pfc_headroom_drops++;
        return false;
    }
    pt->bytes[p->prio] += wire;
    if (pt->bytes[p->prio] >= pt->pp->xoff_bytes && !(pt->paused & (1u << p->prio))) {
        if (!pt->out)
            pt->out = link_peer(pt->in); /* the peer may be wired after the port */
        bool first = !pt->paused;
        pt->paused |= (uint8_t)(1u << p->prio);
        send_pause(pt, (uint8_t)(1u << p->prio), true);
        if (first)
            sim_schedule_in(pt->sim, &pt->refresh_ev, refresh_ps(pt));
    }
    return true;
}

void pfc_release(struct pfc_port *pt, const struct pkt *p)
{
    if (p->kind != PKT_ROCE || !(pt->pp->prio_mask & (1u << p->prio)))
        return;
    uint64_t wire = pkt_wire_bytes(p);
    pt->bytes[p->prio] = pt->bytes[p->prio] > wire ? pt->bytes[p->prio] - wire : 0;
    if (pt->pp->credits) {
        if (pt->in)
            link_credit_return(pt->in, p);
        return;
    }
    if ((pt->paused & (1u << p->prio)) && pt->bytes[p->prio] <= pt->pp->xon_bytes) {
        pt->paused &= (uint8_t) ~(1u << p->prio);
        send_pause(pt, (uint8_t)(1u << p->prio), false);
        if (!pt->paused)
            sim_cancel(pt->sim, &pt->refresh_ev);
    }
}

uint64_t pfc_port_bytes(const struct pfc_port *pt, unsigned prio)
{
    return prio < PKT_PRIOS ? pt->bytes[prio] : 0;
}
uint8_t pfc_port_paused(const struct pfc_port *pt)
{
    return pt->paused;
}
uint8_t pfc_port_timed(const struct pfc_port *pt)
{
    return pt->pp->credits ? pt->pp->prio_mask : pt->paused;
}
uint64_t pfc_port_headroom(const struct pfc_port *pt)
{
    return pt->headroom_bytes;
}
