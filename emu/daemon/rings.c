/* rnicsimd: the data path between a client's shared-memory rings and the
 * NIC model.
 *
 * In: the client's post_send / post_recv are the verbs shim's own
 * (verbs_shim/post.c, linked into the client library): they check each
 * WR, build the NIC's WQE and append it to a ring in shared memory; a
 * send list ends with a doorbell.  At the doorbell (and, for receive
 * rings, at the start of every step of the model, as a NIC reads the
 * receive queue when a message arrives) the daemon copies each new WQE out
 * of shared memory, checks what the NIC relies on - the client may write
 * anything there - and appends it to the NIC model's queue with
 * nic_sq_append / nic_rq_append / nic_srq_append; a send batch then rings
 * the model's doorbell (nic_sq_doorbell), whose MMIO write crosses the
 * modelled PCIe link.  The ring indices and the NIC's match one for one:
 * a slot is free for the client again when the NIC has completed it
 * (sq_comp, published), so the NIC's queue is never full when the daemon
 * appends.
 *
 * Out: after every step the CQEs the NIC model made visible are moved
 * from the model's CQ to the client's ring (a full ring drops the CQE and
 * sets `overflowed`: a CQ overrun), then the completion events the NIC
 * fired are written to the channel's pipe, so a woken client always finds
 * its CQE.  The QPs' and SRQs' queue state is published likewise.
 *
 * Arming: the client's ibv_req_notify_cq leaves one word in the CQ's
 * shared page (emu/proto.h) and rings.  The daemon takes it: if CQEs the
 * client could not have seen when it armed are already in the ring, the
 * event fires at once; otherwise the NIC's CQ is armed (nic_cq_arm) and
 * fires at the next CQE.  So there is exactly one event per arm, for the
 * first CQE after it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "emu/daemon/objects.h"

/* ---------------------------------------------------------------- checks */

/* What the NIC model relies on in a WQE written by an untrusted client:
 * a known opcode for the QP type, SGE count and lengths consistent,
 * inline bytes within the WQE, a UD destination that is a node. */
static bool send_wqe_ok(const struct emu_client *c, const struct emu_qp *eqp,
                        const struct nic_send_wqe *w)
{
    if (!shim_send_opcode_ok(eqp->qp->qp_type, w->opcode))
        return false;
    if (w->num_sge > NIC_MAX_SGE)
        return false;
    if (w->send_flags & IBV_SEND_INLINE)
        return w->length <= NIC_MAX_INLINE_BYTES;
    uint64_t total = 0;
    for (uint32_t i = 0; i < w->num_sge; i++)
        total += w->sge[i].length;
    if (total != w->length && !(total > UINT32_MAX && w->length == UINT32_MAX))
        return false;
    if (eqp->qp->qp_type == IBV_QPT_UD && w->ud_node >= c->emu->w->nhosts)
        return false;
    return true;
}

static bool recv_wqe_ok(const struct nic_recv_wqe *w, uint32_t max_sge)
{
    if (w->num_sge > max_sge || w->num_sge > NIC_MAX_SGE)
        return false;
    uint64_t total = 0;
    for (uint32_t i = 0; i < w->num_sge; i++)
        total += w->sge[i].length;
    return total == w->length || (total > UINT32_MAX && w->length == UINT32_MAX);
}

/* ---------------------------------------------------------------- in */

static bool drain_qp(struct emu_client *c, struct emu_qp *eqp)
{
    struct emu_qp_shm *sh = eqp->shm;
    struct nic_qp *nqp = eqp->nqp;
    uint64_t tail = atomic_load_explicit(&sh->sq_tail, memory_order_acquire);
    if (tail != eqp->sq_taken) {
        if (tail < eqp->sq_taken || tail - nqp->sq_comp > eqp->sq_depth) {
            emu_client_fail(c, "send ring index out of range");
            return false;
        }
        struct emu_send_wqe e; /* a copy: the client may write the ring meanwhile */
        struct nic_send_wqe w;
        uint64_t first = eqp->sq_taken;
        for (; eqp->sq_taken < tail; eqp->sq_taken++) {
            memcpy(&e, &emu_qp_sq(sh)[eqp->sq_taken % eqp->sq_depth], sizeof(e));
            w = e.w;
            w.inline_data = e.inline_bytes;
            w.inline_cap = sizeof(e.inline_bytes);
            if (!send_wqe_ok(c, eqp, &w) || nic_sq_append(nqp, &w) != 0) {
                emu_client_fail(c, "malformed send WQE");
                return false;
            }
        }
        if (eqp->sq_taken != first)
            nic_sq_doorbell(nqp);
    }
    if (eqp->rq_depth) {
        tail = atomic_load_explicit(&sh->rq_tail, memory_order_acquire);
        if (tail != eqp->rq_taken) {
            if (tail < eqp->rq_taken || tail - nqp->rq.head > eqp->rq_depth) {
                emu_client_fail(c, "receive ring index out of range");
                return false;
            }
            struct nic_recv_wqe w;
            for (; eqp->rq_taken < tail; eqp->rq_taken++) {
                memcpy(&w, &emu_qp_rq(sh)[eqp->rq_taken % eqp->rq_depth], sizeof(w));
                if (!recv_wqe_ok(&w, shim_qp(eqp->qp)->cap.max_recv_sge) ||
                    nic_rq_append(nqp, &w) != 0) {
                    emu_client_fail(c, "malformed receive WQE");
                    return false;
                }
            }
        }
    }
    return true;
}

static bool drain_srq(struct emu_client *c, struct emu_srq *es)
{
    struct nic_srq *ns = shim_srq(es->srq)->nsrq;
    uint64_t tail = atomic_load_explicit(&es->shm->tail, memory_order_acquire);
    if (tail == es->taken)
        return true;
    if (tail < es->taken || tail - es->taken > es->depth - nic_srq_count(ns)) {
        emu_client_fail(c, "SRQ ring index out of range");
        return false;
    }
    struct nic_recv_wqe w;
    for (; es->taken < tail; es->taken++) {
        memcpy(&w, &emu_srq_ring(es->shm)[es->taken % es->depth], sizeof(w));
        if (!recv_wqe_ok(&w, es->max_sge) || nic_srq_append(ns, &w) != 0) {
            emu_client_fail(c, "malformed SRQ WQE");
            return false;
        }
    }
    return true;
}

bool emu_rings_drain(struct emu_client *c)
{
    for (uint32_t i = 0; i < c->nobjs && !c->closing; i++) {
        struct emu_obj *o = &c->objs[i];
        if (o->kind == OBJ_QP && !drain_qp(c, o->u.qp))
            return false;
        if (o->kind == OBJ_SRQ && !drain_srq(c, o->u.srq))
            return false;
    }
    return !c->closing;
}

/* ---------------------------------------------------------------- out */

static void deliver_event(struct emu_cq *ecq)
{
    ecq->event_pending = false;
    if (!ecq->channel)
        return; /* armed without a channel: the event goes nowhere */
    struct emu_comp_event ev = {.cookie = ecq->cookie};
    if (write(ecq->channel->wr_fd, &ev, sizeof(ev)) != (ssize_t)sizeof(ev))
        ecq->channel->dropped++; /* the client does not read its events */
}

/* NIC callback, once per arm, when the next CQE became visible in the
 * model: delivered after that CQE has been forwarded. */
static void cq_notify(struct sim *sim, void *a, void *b)
{
    (void)sim;
    (void)b;
    struct emu_cq *ecq = a;
    ecq->event_pending = true;
}

void emu_rings_cq_created(struct emu_client *c, struct emu_cq *ecq)
{
    (void)c;
    nic_cq_set_notify(ecq->ncq, cq_notify, ecq, NULL);
}

static void forward_cq(struct emu_cq *ecq)
{
    struct emu_cq_shm *sh = ecq->shm;
    struct ibv_wc wc[32];
    uint64_t prod = atomic_load_explicit(&sh->prod, memory_order_relaxed);
    int n;
    bool moved = false;
    while ((n = nic_cq_poll(ecq->ncq, 32, wc)) > 0) {
        uint64_t cons = atomic_load_explicit(&sh->cons, memory_order_acquire);
        for (int i = 0; i < n; i++) {
            if (prod - cons >= ecq->depth) {
                ecq->overruns++;
                atomic_store_explicit(&sh->overflowed, 1, memory_order_relaxed);
                continue;
            }
            sh->ring[prod % ecq->depth] = wc[i];
            prod++;
            if (getenv("EMU_DEBUG"))
                fprintf(stderr, "fwd cq %p wr_id %llu status %d opcode %d prod %llu cons %llu\n",
                        (void *)ecq, (unsigned long long)wc[i].wr_id, wc[i].status, wc[i].opcode,
                        (unsigned long long)prod, (unsigned long long)cons);
        }
        moved = true;
    }
    if (moved)
        atomic_store_explicit(&sh->prod, prod, memory_order_release);
    if (ecq->event_pending)
        deliver_event(ecq);
}

static void publish_qp(struct emu_qp *eqp)
{
    struct emu_qp_shm *sh = eqp->shm;
    atomic_store_explicit(&sh->sq_comp, eqp->nqp->sq_comp, memory_order_release);
    atomic_store_explicit(&sh->rq_head, eqp->nqp->rq.head, memory_order_release);
    atomic_store_explicit(&sh->state, (uint32_t)eqp->nqp->state, memory_order_release);
}

static void publish_srq(struct emu_srq *es)
{
    /* entries the NIC has taken: those appended minus those still posted */
    struct nic_srq *ns = shim_srq(es->srq)->nsrq;
    atomic_store_explicit(&es->shm->head, es->taken - nic_srq_count(ns), memory_order_release);
}

/* Asynchronous events the shim queued on the client's context (SRQ
 * limit): to the client's async pipe, with its own object. */
static void forward_async(struct emu_client *c)
{
    struct ibv_async_event ev;
    /* only what is queued: inside the agent the shim's call would block */
    while (shim_ctx(c->ctx)->async_head && ibv_get_async_event(c->ctx, &ev) == 0) {
        struct emu_async_event out = {.type = (uint32_t)ev.event_type};
        if (ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED)
            for (uint32_t i = 0; i < c->nobjs; i++)
                if (c->objs[i].kind == OBJ_SRQ && c->objs[i].u.srq->srq == ev.element.srq)
                    out.cookie = c->objs[i].u.srq->cookie;
        ibv_ack_async_event(&ev);
        if (out.cookie && write(c->async_wr, &out, sizeof(out)) != (ssize_t)sizeof(out))
            break;
    }
}

/* Queue state goes out before CQEs: a client that takes a CQE must find
 * the WQE's slot free (on the NIC, sq_comp and the receive head move
 * before the CQE is written). */
static void publish_queues(struct emu_client *c)
{
    for (uint32_t i = 0; i < c->nobjs; i++) {
        struct emu_obj *o = &c->objs[i];
        if (o->kind == OBJ_QP)
            publish_qp(o->u.qp);
        else if (o->kind == OBJ_SRQ)
            publish_srq(o->u.srq);
    }
}

void emu_rings_publish(struct emu_client *c)
{
    emu_remote_flush_all(c->emu); /* the data of this step's CQEs first, everyone's */
    publish_queues(c);
    for (uint32_t i = 0; i < c->nobjs; i++)
        if (c->objs[i].kind == OBJ_CQ)
            forward_cq(c->objs[i].u.cq);
    forward_async(c);
}

void emu_rings_arm(struct emu_client *c)
{
    for (uint32_t i = 0; i < c->nobjs; i++) {
        if (c->objs[i].kind != OBJ_CQ)
            continue;
        struct emu_cq *ecq = c->objs[i].u.cq;
        uint64_t arm = atomic_exchange_explicit(&ecq->shm->arm, 0, memory_order_acq_rel);
        if (!(arm & EMU_ARM_VALID))
            continue;
        bool solicited = (arm & EMU_ARM_SOLICITED) != 0;
        uint64_t seen = arm >> 2;
        emu_remote_flush_all(c->emu);
        publish_queues(c);
        forward_cq(ecq); /* what the NIC has made visible so far */
        uint64_t prod = atomic_load_explicit(&ecq->shm->prod, memory_order_relaxed);
        bool fire = false;
        for (uint64_t k = seen; k < prod && prod - k <= ecq->depth; k++) {
            const struct ibv_wc *wc = &ecq->shm->ring[k % ecq->depth];
            /* the solicited bit is not kept in a CQE: for a
             * solicited-only arm, only an error completion fires at once */
            if (!solicited || wc->status != IBV_WC_SUCCESS) {
                fire = true;
                break;
            }
        }
        if (fire)
            deliver_event(ecq);
        else
            nic_cq_arm(ecq->ncq, solicited);
    }
}
