/* The responder's READ engine (docs/nic.md "READ and atomic engines").
 *
 * An RDMA READ costs the responder more than a WRITE: besides the packet's
 * trip through a processing unit it must be turned into a DMA read of the
 * requested bytes and a stream of response packets.  Every accepted READ
 * request (resp.c: execute, and re-executed duplicates) passes this engine
 * in arrival order, one at a time, for nic.rd_req_proc each; only then are
 * its response packets built.  nic.max_rd_resp bounds the READs being
 * served at once per NIC (accepted by the engine, responses not all built;
 * 0 = no bound beyond each QP's max_dest_rd_atomic): further requests wait
 * in the engine's FIFO.
 *
 * One intrusive event per NIC; a waiting request is a pooled nic_op
 * holding its QP.  A request whose QP reset or errored since (epoch) or
 * whose work item is gone is dropped when it reaches the head. */
#include "nic_priv.h"

static void rde_serve(struct nic *nic);

static struct nic_resp_work *rde_item(struct nic_op *op)
{
    struct nic_qp_engine *e = op->qp->eng;
    uint32_t idx = (uint32_t)op->v;
    if (nic_op_stale(op) || (int32_t)(idx - e->work_head) < 0 || (int32_t)(idx - e->work_tail) >= 0)
        return NULL;
    struct nic_resp_work *w = nic_resp_work_at(e, idx);
    return w->kind == NIC_RW_READ && w->eng_wait ? w : NULL;
}

static void rde_ev_fn(struct sim *sim, struct sim_event *ev)
{
    (void)sim;
    struct nic *nic = ev->ctx;
    struct nic_op *op = nic->rde_cur;
    nic->rde_cur = NULL;
    struct nic_resp_work *w = rde_item(op);
    if (w) {
        w->eng_wait = false;
        if (nic->p.max_rd_resp) {
            w->eng_counted = true;
            nic->rd_in_service++;
        }
        nic_resp_kick(op->qp);
    }
    nic_op_free(op);
    rde_serve(nic);
}

static void rde_serve(struct nic *nic)
{
    while (!nic->rde_cur && nic->rde_head) {
        struct nic_op *op = nic->rde_head;
        if (!rde_item(op)) { /* its QP reset or errored: drop it */
            nic->rde_head = op->next;
            if (!nic->rde_head)
                nic->rde_tail = NULL;
            nic_op_free(op);
            continue;
        }
        if (nic->p.max_rd_resp && nic->rd_in_service >= nic->p.max_rd_resp)
            return; /* nic_rdeng_done resumes */
        nic->rde_head = op->next;
        if (!nic->rde_head)
            nic->rde_tail = NULL;
        op->next = NULL;
        nic->rde_cur = op;
        sim_schedule_in(nic->sim, &nic->rde_ev, nic->p.rd_req_proc_ps);
        const struct nic_resp_work *w = nic_tr(nic) ? rde_item(op) : NULL;
        if (w)
            nic_trace_span(
                nic, TRK_RDENG, sim_now(nic->sim), nic->p.rd_req_proc_ps,
                &(struct trace_rec){
                    .qpn = op->qp->qpn, .psn = w->psn, .len = w->len, .where = "READ request"});
    }
}

void nic_rdeng_init(struct nic *nic)
{
    sim_event_init(&nic->rde_ev, rde_ev_fn, nic, "nic.read_engine");
}

void nic_rdeng_submit(struct nic_qp *qp, uint32_t idx)
{
    struct nic *nic = qp->nic;
    struct nic_op *op = nic_op_alloc(nic, NIC_OP_RD_ENGINE, qp);
    op->v = idx;
    if (nic->rde_cur || nic->rde_head)
        nic->cnt.rd_engine_waits++;
    if (nic->rde_tail)
        nic->rde_tail->next = op;
    else
        nic->rde_head = op;
    nic->rde_tail = op;
    rde_serve(nic);
}

void nic_rdeng_done(struct nic *nic)
{
    if (nic->rd_in_service)
        nic->rd_in_service--;
    rde_serve(nic);
}

void nic_rdeng_teardown(struct nic *nic)
{
    sim_cancel(nic->sim, &nic->rde_ev);
    nic->rde_head = nic->rde_tail = nic->rde_cur = NULL; /* ops go with their pool */
}
