/* Test harness for the NIC engines without the verbs shim: two hosts, PCIe,
 * a star fabric and two NICs, driven through sim/nic/nic.h from event
 * callbacks (no simulated processes).  Between the fabric and each NIC sits
 * a sink that can drop chosen packets, to exercise loss recovery.
 * Header-only (static functions) so each test_nic_*.c stays one file. */
#ifndef RNICSIM_TEST_NIC_HARNESS_H
#define RNICSIM_TEST_NIC_HARNESS_H

#include <stdlib.h>
#include <string.h>

#include "sim/fabric/fabric.h"
#include "sim/host.h"
#include "sim/nic/nic.h"
#include "sim/pcie/pcie.h"

struct nh;

struct nh_port {
    struct nh *h;
    unsigned node;
};

struct nh {
    struct sim *sim;
    struct pkt_pool *pool;
    struct topology *topo;
    struct host host[2];
    struct pcie_link *pcie[2];
    struct nic *nic[2];
    struct fabric_sink sink[2];
    struct nh_port port[2];
    /* loss injection at the ingress of node drop_node */
    int drop_node;      /* -1: none */
    int drop_opcode;    /* -1: any */
    int64_t drop_psn;   /* -1: any */
    unsigned drop_left; /* packets still to drop */
    unsigned dropped;
};

static inline void nh_rx(struct sim *sim, void *ctx, struct pkt *p)
{
    struct nh_port *pt = ctx;
    struct nh *h = pt->h;
    if (h->drop_left && (int)pt->node == h->drop_node &&
        (h->drop_opcode < 0 || p->opcode == h->drop_opcode) &&
        (h->drop_psn < 0 || (int64_t)p->psn == h->drop_psn)) {
        h->drop_left--;
        h->dropped++;
        pkt_free(h->pool, p);
        return;
    }
    h->sink[pt->node].rx(sim, h->sink[pt->node].ctx, p);
}

static inline struct nh *nh_create(const struct nic_params *np)
{
    struct nh *h = calloc(1, sizeof(*h));
    h->sim = sim_create(7);
    h->pool = pkt_pool_create();
    h->drop_node = -1;
    h->drop_opcode = -1;
    h->drop_psn = -1;
    struct topo_params tp;
    memset(&tp, 0, sizeof(tp));
    fabric_defaults(&tp);
    tp.kind = TOPO_STAR;
    tp.n_nodes = 2;
    h->topo = topo_create(h->sim, &tp, h->pool);
    struct host_cpu_params cpu;
    host_cpu_params_default(&cpu);
    struct pcie_params pp;
    pcie_params_default(&pp);
    struct nic_params p;
    if (np)
        p = *np;
    else
        nic_params_default(&p);
    for (unsigned i = 0; i < 2; i++) {
        host_init(&h->host[i], h->sim, i, i ? "h1" : "h0", &cpu);
        h->pcie[i] = pcie_link_create(h->sim, i ? "h1.pcie" : "h0.pcie", &pp);
        h->nic[i] = nic_create(h->sim, &h->host[i], i, &p, h->pcie[i], h->pool);
        h->host[i].nic = h->nic[i];
        h->sink[i] = nic_sink(h->nic[i]);
        h->port[i] = (struct nh_port){h, i};
        topo_attach(h->topo, i, (struct fabric_sink){nh_rx, &h->port[i]});
        nic_attach_uplink(h->nic[i], topo_uplink(h->topo, i));
    }
    return h;
}

static inline void nh_destroy(struct nh *h)
{
    for (unsigned i = 0; i < 2; i++)
        nic_destroy(h->nic[i]);
    for (unsigned i = 0; i < 2; i++)
        pcie_link_destroy(h->pcie[i]);
    topo_destroy(h->topo);
    sim_destroy(h->sim);
    pkt_pool_destroy(h->pool);
    free(h);
}

static inline void nh_run_for(struct nh *h, sim_time_t dt)
{
    sim_run(h->sim, sim_now(h->sim) + dt);
}

/* ---------------------------------------------------------------- endpoints */

struct nh_ep {
    struct nh *h;
    unsigned node;
    struct nic *nic;
    struct nic_pd *pd;
    struct nic_mr *mr;
    struct nic_cq *scq, *rcq;
    struct nic_qp *qp;
    uint8_t *buf;
    size_t bytes;
};

struct nh_conn {
    enum ibv_mtu mtu;
    uint8_t timeout, retry_cnt, rnr_retry, min_rnr_timer, max_rd_atomic;
    uint32_t psn; /* initial PSN of each side's send queue */
};

static inline void nh_conn_default(struct nh_conn *c)
{
    c->mtu = IBV_MTU_1024;
    c->timeout = 14;
    c->retry_cnt = 7;
    c->rnr_retry = 7;
    c->min_rnr_timer = 12;
    c->max_rd_atomic = 1;
    c->psn = 0xfffff0; /* wraps within most tests */
}

static inline void nh_ep_open(struct nh *h, unsigned node, struct nh_ep *e, size_t bytes,
                              uint32_t sq_depth, uint32_t cq_depth)
{
    memset(e, 0, sizeof(*e));
    e->h = h;
    e->node = node;
    e->nic = h->nic[node];
    e->bytes = bytes;
    e->buf = aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
    memset(e->buf, 0, bytes);
    e->pd = nic_pd_alloc(e->nic);
    e->mr = nic_mr_reg(e->pd, e->buf, bytes, (uintptr_t)e->buf,
                       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                           IBV_ACCESS_REMOTE_ATOMIC);
    e->scq = nic_cq_create(e->nic, cq_depth);
    e->rcq = nic_cq_create(e->nic, cq_depth);
    struct nic_qp_init init = {
        .qp_type = IBV_QPT_RC,
        .pd = e->pd,
        .send_cq = e->scq,
        .recv_cq = e->rcq,
        .cap = {.max_send_wr = sq_depth,
                .max_recv_wr = sq_depth,
                .max_send_sge = 4,
                .max_recv_sge = 4,
                .max_inline_data = 0},
    };
    e->qp = nic_qp_create(e->nic, &init);
}

static inline void nh_ep_close(struct nh_ep *e)
{
    nic_qp_destroy(e->qp);
    nic_cq_destroy(e->scq);
    nic_cq_destroy(e->rcq);
    nic_mr_dereg(e->mr);
    nic_pd_free(e->pd);
    free(e->buf);
}

/* Bring `a` to RTS towards `b`. */
static inline void nh_ep_connect(struct nh_ep *a, const struct nh_ep *b, const struct nh_conn *c)
{
    struct ibv_qp_attr at;
    memset(&at, 0, sizeof(at));
    at.qp_state = IBV_QPS_INIT;
    at.port_num = 1;
    at.qp_access_flags =
        IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    nic_qp_modify(a->qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    at.qp_state = IBV_QPS_RTR;
    at.path_mtu = c->mtu;
    at.dest_qp_num = b->qp->qpn;
    at.rq_psn = c->psn;
    at.max_dest_rd_atomic = 16;
    at.min_rnr_timer = c->min_rnr_timer;
    at.ah_attr.is_global = 1;
    at.ah_attr.port_num = 1;
    nic_gid_of_node(b->node, &at.ah_attr.grh.dgid);
    nic_qp_modify(a->qp, &at,
                  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    at.qp_state = IBV_QPS_RTS;
    at.timeout = c->timeout;
    at.retry_cnt = c->retry_cnt;
    at.rnr_retry = c->rnr_retry;
    at.sq_psn = c->psn;
    at.max_rd_atomic = c->max_rd_atomic;
    nic_qp_modify(a->qp, &at,
                  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                      IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

/* Append one WR (one SGE [off, off+len) of e->buf; remote offset roff of
 * peer's buffer) without ringing the doorbell. */
static inline int nh_append(struct nh_ep *e, enum ibv_wr_opcode op, uint64_t wr_id, size_t off,
                            uint32_t len, const struct nh_ep *peer, size_t roff, unsigned flags)
{
    struct nic_send_wqe w;
    memset(&w, 0, offsetof(struct nic_send_wqe, inline_data));
    w.wr_id = wr_id;
    w.opcode = op;
    w.send_flags = flags;
    w.num_sge = 1;
    w.sge[0] = (struct nic_sge){(uintptr_t)(e->buf + off), len, e->mr->lkey};
    w.length = len;
    w.signaled = (flags & IBV_SEND_SIGNALED) != 0;
    if (peer) {
        w.remote_addr = (uintptr_t)(peer->buf + roff);
        w.rkey = peer->mr->rkey;
    }
    return nic_sq_append(e->qp, &w);
}

static inline int nh_post(struct nh_ep *e, enum ibv_wr_opcode op, uint64_t wr_id, size_t off,
                          uint32_t len, const struct nh_ep *peer, size_t roff, unsigned flags)
{
    int rc = nh_append(e, op, wr_id, off, len, peer, roff, flags);
    if (!rc)
        nic_sq_doorbell(e->qp);
    return rc;
}

static inline int nh_post_recv(struct nh_ep *e, uint64_t wr_id, size_t off, uint32_t len)
{
    struct nic_recv_wqe r;
    memset(&r, 0, sizeof(r));
    r.wr_id = wr_id;
    r.num_sge = 1;
    r.sge[0] = (struct nic_sge){(uintptr_t)(e->buf + off), len, e->mr->lkey};
    r.length = len;
    return nic_rq_append(e->qp, &r);
}

static inline void nh_fill(uint8_t *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)((i * 131u + seed * 17u) >> 2);
}

#endif /* RNICSIM_TEST_NIC_HARNESS_H */
