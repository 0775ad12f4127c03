/* Plumbing of the read-based Taranov channels (see read_common.h). */
#include "protocols/taranov/read_common.h"

#include <endian.h>
#include <errno.h>
#include <stdatomic.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rnicsim/host.h>

#include "protocols/common/pages.h"

#define RD_PORT 1
#define RD_PAGE_BYTES 4096u

int rd_fail(struct chan *c, int err, const char *what)
{
    if (err <= 0)
        err = EIO;
    snprintf(c->err, sizeof(c->err), "%s: %s: %s", c->ops ? c->ops->name : "read channel", what,
             strerror(err));
    return -err;
}

int rd_check_cfg(struct chan *c, bool ring)
{
    struct chan_config *g = &c->cfg;
    if (!g->name || !*g->name)
        return rd_fail(c, EINVAL, "cfg.name is required");
    if (!g->max_msg_bytes)
        g->max_msg_bytes = RD_MSG_DEFAULT;
    if (!g->slots)
        g->slots = RD_SLOTS_DEFAULT;
    if (!g->receivers)
        g->receivers = 1;
    if (!g->senders)
        g->senders = 1;
    if (g->senders != 1)
        return rd_fail(c, EINVAL, "read channels have one sender (cfg.senders must be 1)");
    if (g->max_msg_bytes > (1u << 30) || g->slots > 4096)
        return rd_fail(c, EINVAL, "max_msg_bytes above 1 GiB or slots above 4096");
    if (ring) {
        if (!g->ring_bytes)
            g->ring_bytes = RD_RING_DEFAULT;
        if (g->ring_bytes % RD_PAGE_BYTES || g->ring_bytes > (1u << 30))
            return rd_fail(c, EINVAL, "ring_bytes must be a multiple of 4 KiB up to 1 GiB");
        /* a record and the next bell must fit with room to spare */
        if (rd_align8(g->max_msg_bytes) + 2 * RD_HDR_BYTES > g->ring_bytes / 2)
            return rd_fail(c, EINVAL, "max_msg_bytes must fit in half the ring");
        if (g->receivers > RD_MAX_PEERS)
            return rd_fail(c, EINVAL, "too many readers (cfg.receivers above 16)");
    } else if (g->receivers != 1) {
        return rd_fail(c, EINVAL, "read slot channels are point to point (cfg.receivers 1)");
    }
    if (g->role == CHAN_RECEIVER && g->id >= g->receivers)
        return rd_fail(c, EINVAL, "cfg.id must be below cfg.receivers");
    return 0;
}

/* ---------------------------------------------------------------- endpoint */

int rd_ep_open(struct chan *c, struct rd_ep *ep, uint32_t npeers, uint32_t recv_wr, bool channel)
{
    memset(ep, 0, sizeof(*ep));
    if (npeers == 0 || npeers > RD_MAX_PEERS)
        return rd_fail(c, EINVAL, "number of peers");
    ep->npeers = npeers;
    if (channel) {
        ep->cch = ibv_create_comp_channel(c->ctx);
        if (!ep->cch)
            return rd_fail(c, errno, "ibv_create_comp_channel");
    }
    int sdepth = (int)(npeers * RD_SEND_WR), rdepth = (int)(npeers * (recv_wr ? recv_wr : 1));
    ep->scq = ibv_create_cq(c->ctx, sdepth, NULL, NULL, 0);
    ep->rcq = ibv_create_cq(c->ctx, rdepth, NULL, ep->cch, 0);
    if (!ep->scq || !ep->rcq)
        return rd_fail(c, errno, "ibv_create_cq");
    for (uint32_t i = 0; i < npeers; i++) {
        struct ibv_qp_init_attr ia = {
            .send_cq = ep->scq,
            .recv_cq = ep->rcq,
            .cap = {.max_send_wr = RD_SEND_WR,
                    .max_recv_wr = recv_wr ? recv_wr : 1,
                    .max_send_sge = 2,
                    .max_recv_sge = 1,
                    .max_inline_data = RD_INLINE_BYTES},
            .qp_type = IBV_QPT_RC,
        };
        ep->qp[i] = ibv_create_qp(c->pd, &ia);
        if (!ep->qp[i])
            return rd_fail(c, errno, "ibv_create_qp");
    }
    return 0;
}

static int rd_modify(struct chan *c, struct ibv_qp *qp, const struct rd_wire *remote,
                     const struct rd_wire *local)
{
    struct ibv_port_attr port;
    struct ibv_device_attr dev;
    if (ibv_query_port(c->ctx, RD_PORT, &port) || ibv_query_device(c->ctx, &dev))
        return rd_fail(c, errno ? errno : EIO, "query port/device");
    enum ibv_mtu mtu = port.active_mtu;
    if (c->cfg.mtu_bytes) {
        static const uint32_t mtus[] = {256, 512, 1024, 2048, 4096};
        mtu = 0;
        for (unsigned k = 0; k < 5; k++)
            if (mtus[k] == c->cfg.mtu_bytes)
                mtu = (enum ibv_mtu)(IBV_MTU_256 + (int)k);
        if (!mtu)
            return rd_fail(c, EINVAL, "cfg.mtu_bytes must be 256..4096, a power of two");
    }
    /* outstanding READs per QP: the device's limit, at most 16 (mlx5) */
    uint8_t rd_atomic = (uint8_t)(dev.max_qp_rd_atom > 16 ? 16 : dev.max_qp_rd_atom);
    if (!rd_atomic)
        rd_atomic = 1;
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
                            .port_num = RD_PORT,
                            .qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                               IBV_ACCESS_REMOTE_READ};
    int err =
        ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    if (err)
        return rd_fail(c, err, "modify_qp INIT");
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = mtu;
    a.dest_qp_num = remote->qpn;
    a.rq_psn = remote->psn;
    a.max_dest_rd_atomic = rd_atomic;
    a.min_rnr_timer = 12; /* perftest's value */
    a.ah_attr.is_global = 1;
    memcpy(a.ah_attr.grh.dgid.raw, remote->gid, 16);
    a.ah_attr.grh.hop_limit = 64;
    a.ah_attr.dlid = remote->lid;
    a.ah_attr.port_num = RD_PORT;
    err = ibv_modify_qp(qp, &a,
                        IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                            IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (err)
        return rd_fail(c, err, "modify_qp RTR");
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = local->psn;
    a.timeout = 14;  /* perftest default */
    a.retry_cnt = 7; /* perftest default */
    a.rnr_retry = 7; /* infinite: notifications may beat a repost */
    a.max_rd_atomic = rd_atomic;
    err = ibv_modify_qp(qp, &a,
                        IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                            IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
    if (err)
        return rd_fail(c, err, "modify_qp RTS");
    return 0;
}

static void rd_key(char *key, size_t n, const struct chan *c, char who, const char *what,
                   uint32_t id)
{
    snprintf(key, n, "%s/%c%s%" PRIu32, c->cfg.name, who, what, id);
}

int rd_ep_connect(struct chan *c, struct rd_ep *ep, uint32_t i, uint32_t id, struct rd_wire *local)
{
    struct ibv_port_attr port;
    union ibv_gid gid;
    if (ibv_query_port(c->ctx, RD_PORT, &port) || ibv_query_gid(c->ctx, RD_PORT, 0, &gid))
        return rd_fail(c, errno ? errno : EIO, "query port/gid");
    local->qpn = ep->qp[i]->qp_num;
    local->psn = (ep->qp[i]->qp_num * 2654435761u) & 0xffffffu; /* any 24-bit PSN */
    local->lid = port.lid;
    memcpy(local->gid, gid.raw, 16);
    char me = c->cfg.role == CHAN_SENDER ? 's' : 'r', peer = me == 's' ? 'r' : 's';
    char key[160];
    rd_key(key, sizeof(key), c, me, "", id);
    if (host_oob_put(key, local, sizeof(*local)))
        return rd_fail(c, errno, "host_oob_put");
    rd_key(key, sizeof(key), c, peer, "", id);
    if (host_oob_get(key, &ep->remote[i], sizeof(ep->remote[i])))
        return rd_fail(c, errno, "host_oob_get (is the peer the same channel?)");
    if (ep->remote[i].param != local->param)
        return rd_fail(c, EINVAL, "peer has another configuration (slots / sizes differ)");
    return rd_modify(c, ep->qp[i], &ep->remote[i], local);
}

int rd_ready_put(struct chan *c, uint32_t id)
{
    char key[160];
    uint8_t one = 1;
    rd_key(key, sizeof(key), c, 'r', "ready", id);
    return host_oob_put(key, &one, 1) ? rd_fail(c, errno, "host_oob_put") : 0;
}

int rd_ready_get(struct chan *c, uint32_t id)
{
    char key[160];
    uint8_t one = 0;
    rd_key(key, sizeof(key), c, 'r', "ready", id);
    return host_oob_get(key, &one, 1) ? rd_fail(c, errno, "host_oob_get") : 0;
}

void rd_ep_close(struct rd_ep *ep)
{
    for (uint32_t i = 0; i < ep->npeers; i++)
        if (ep->qp[i])
            ibv_destroy_qp(ep->qp[i]);
    for (unsigned k = 0; k < ep->cache.n; k++)
        ibv_dereg_mr(ep->cache.mr[k]);
    if (ep->scq)
        ibv_destroy_cq(ep->scq);
    if (ep->rcq)
        ibv_destroy_cq(ep->rcq);
    if (ep->cch)
        ibv_destroy_comp_channel(ep->cch);
    memset(ep, 0, sizeof(*ep));
}

/* ---------------------------------------------------------------- posting */

static int rd_reap(struct chan *c, struct rd_ep *ep, bool wait, enum rd_wr_kind kind, uint64_t n)
{
    struct ibv_wc wc[16];
    for (;;) {
        if (wait && ep->done[kind] >= n)
            return 0;
        /* no empty polls when nothing is in flight: two in a row park the
         * thread in the simulator until a CQE or DMA write lands here */
        uint64_t inflight = 0;
        for (uint32_t i = 0; i < ep->npeers; i++)
            inflight += ep->outstanding[i];
        if (!inflight)
            return wait ? rd_fail(c, EPROTO, "waiting for a work request never posted") : 0;
        int got = chan_poll_cq(c, ep->scq, 16, wc);
        if (got < 0)
            return rd_fail(c, EIO, "ibv_poll_cq");
        for (int k = 0; k < got; k++) {
            for (uint32_t i = 0; i < ep->npeers; i++)
                if (ep->qp[i]->qp_num == wc[k].qp_num && ep->outstanding[i])
                    ep->outstanding[i]--;
            if (wc[k].status != IBV_WC_SUCCESS) {
                snprintf(c->err, sizeof(c->err), "%s: work request failed: %s",
                         c->ops ? c->ops->name : "read channel", ibv_wc_status_str(wc[k].status));
                return -EIO;
            }
            unsigned kd = RD_WR_KIND(wc[k].wr_id);
            if (kd <= RD_WR_RECV && RD_WR_N(wc[k].wr_id) > ep->done[kd])
                ep->done[kd] = RD_WR_N(wc[k].wr_id);
        }
        if (!wait && got < 16)
            return 0;
        /* an empty poll parks the process in the simulator */
    }
}

int rd_drain(struct chan *c, struct rd_ep *ep)
{
    return rd_reap(c, ep, false, RD_WR_CTL, 0);
}

int rd_wait(struct chan *c, struct rd_ep *ep, enum rd_wr_kind kind, uint64_t n)
{
    return rd_reap(c, ep, true, kind, n);
}

int rd_post(struct chan *c, struct rd_ep *ep, uint32_t i, enum ibv_wr_opcode op, uint64_t wr_id,
            struct ibv_sge *sge, int nsge, uint64_t raddr, uint32_t rkey, uint32_t imm,
            unsigned flags)
{
    int err = rd_drain(c, ep);
    while (!err && ep->outstanding[i] >= RD_SEND_WR)
        err = rd_drain(c, ep); /* full send queue: empty polls in a row park until a CQE */
    if (err)
        return err;
    struct ibv_send_wr wr = {.wr_id = wr_id,
                             .sg_list = sge,
                             .num_sge = nsge,
                             .opcode = op,
                             .send_flags = IBV_SEND_SIGNALED | flags,
                             .imm_data = htobe32(imm)};
    if (op == IBV_WR_RDMA_READ || op == IBV_WR_RDMA_WRITE || op == IBV_WR_RDMA_WRITE_WITH_IMM) {
        wr.wr.rdma.remote_addr = raddr;
        wr.wr.rdma.rkey = rkey;
    }
    struct ibv_send_wr *bad = NULL;
    err = ibv_post_send(ep->qp[i], &wr, &bad);
    if (err)
        return rd_fail(c, err, "ibv_post_send");
    ep->outstanding[i]++;
    return 0;
}

int rd_write_ctl(struct chan *c, struct rd_ep *ep, uint32_t i, const void *src, uint32_t len,
                 uint64_t raddr, uint32_t rkey)
{
    struct ibv_sge sge = {.addr = (uintptr_t)src, .length = len, .lkey = 0};
    return rd_post(c, ep, i, IBV_WR_RDMA_WRITE, RD_WR_ID(RD_WR_CTL, ++ep->next_id), &sge, 1, raddr,
                   rkey, 0, IBV_SEND_INLINE);
}

int rd_post_recv(struct chan *c, struct rd_ep *ep, uint32_t i, uint64_t wr_id, void *addr,
                 uint32_t len, uint32_t lkey)
{
    struct ibv_sge sge = {.addr = (uintptr_t)addr, .length = len, .lkey = lkey};
    struct ibv_recv_wr wr = {.wr_id = wr_id,
                             .sg_list = addr ? &sge : NULL,
                             .num_sge = addr ? 1 : 0},
                       *bad = NULL;
    int err = ibv_post_recv(ep->qp[i], &wr, &bad);
    return err ? rd_fail(c, err, "ibv_post_recv") : 0;
}

int rd_poll_recv(struct chan *c, struct rd_ep *ep, bool block, struct ibv_wc *wc)
{
    /* Non-blocking: look twice.  The cost of an empty ibv_poll_cq is charged
     * after it looked, so a CQE landing meanwhile would not wake a caller
     * that host_relax()es on CHAN_AGAIN; the second look sees it (in the
     * simulator the second empty poll in a row also parks until something
     * lands on this host). */
    for (int looks = 0;; looks++) {
        int got = chan_poll_cq(c, ep->rcq, 1, wc);
        if (got < 0)
            return rd_fail(c, EIO, "ibv_poll_cq");
        if (got == 1) {
            if (wc->status != IBV_WC_SUCCESS) {
                snprintf(c->err, sizeof(c->err), "%s: receive failed: %s",
                         c->ops ? c->ops->name : "read channel", ibv_wc_status_str(wc->status));
                return -EIO;
            }
            return 0;
        }
        if (!block || !ep->cch) {
            if (looks == 0)
                continue;
            return CHAN_AGAIN;
        }
        if (!ep->armed) {
            if (ibv_req_notify_cq(ep->rcq, 0))
                return rd_fail(c, EIO, "ibv_req_notify_cq");
            ep->armed = true;
            continue; /* poll once more: a CQE may have raced the arming */
        }
        struct ibv_cq *cq = NULL;
        void *cq_ctx = NULL;
        if (ibv_get_cq_event(ep->cch, &cq, &cq_ctx))
            return rd_fail(c, errno, "ibv_get_cq_event");
        ibv_ack_cq_events(cq, 1);
        ep->armed = false;
    }
}

/* ---------------------------------------------------------------- asynchronous polls */

int rd_apoll_start(struct chan *c, struct rd_ep *ep, struct rd_apoll *p, unsigned tag,
                   uint64_t *reads, void *local, uint32_t len, uint32_t lkey, uint64_t raddr,
                   uint32_t rkey)
{
    if (p->n)
        rd_apoll_finish(c, ep, p);
    struct ibv_sge sge = {.addr = (uintptr_t)local, .length = len, .lkey = lkey};
    uint64_t n = ++*reads;
    int err =
        rd_post(c, ep, 0, IBV_WR_RDMA_READ, RD_WR_ID(RD_WR_READ, n), &sge, 1, raddr, rkey, 0, 0);
    if (err)
        return err;
    p->n = n;
    p->tag = tag;
    return 0;
}

int rd_apoll_check(struct chan *c, struct rd_ep *ep, struct rd_apoll *p, unsigned tag)
{
    if (p->n && p->tag != tag)
        rd_apoll_finish(c, ep, p);
    if (!p->n)
        return CHAN_AGAIN;
    /* Wait for it (one round trip at most): returning CHAN_AGAIN after an
     * empty ibv_poll_cq could lose the completion to a caller's
     * host_relax(), as the poll's cost is charged after it looked. */
    int err = rd_wait(c, ep, RD_WR_READ, p->n);
    if (err)
        return err;
    p->n = 0;
    return 0;
}

void rd_apoll_finish(struct chan *c, struct rd_ep *ep, struct rd_apoll *p)
{
    if (p->n)
        rd_wait(c, ep, RD_WR_READ, p->n);
    p->n = 0;
}

/* ---------------------------------------------------------------- registration cache */

struct ibv_mr *rd_cache_reg(struct chan *c, struct rd_ep *ep, void *addr, size_t len, int access)
{
    uintptr_t a = (uintptr_t)addr;
    for (unsigned k = 0; k < ep->cache.n; k++) {
        struct ibv_mr *mr = ep->cache.mr[k];
        uintptr_t b = (uintptr_t)mr->addr;
        if (a >= b && a + len <= b + mr->length)
            return mr;
    }
    struct ibv_mr *mr = ibv_reg_mr(c->pd, addr, len ? len : 1, access);
    if (!mr) {
        rd_fail(c, errno, "ibv_reg_mr of a zero-copy region");
        return NULL;
    }
    if (ep->cache.n < RD_CACHE_MRS) {
        ep->cache.mr[ep->cache.n++] = mr;
    } else { /* evict round robin; its region is no longer in flight (in-order use) */
        unsigned k = ep->cache.next++ % RD_CACHE_MRS;
        ibv_dereg_mr(ep->cache.mr[k]);
        ep->cache.mr[k] = mr;
    }
    return mr;
}

int rd_circ_map(struct chan *c, struct rd_circ *m, size_t bytes)
{
    /* channel.c's mapping (a memfd mapped twice back to back) */
    m->bytes = bytes;
    m->base = chan_ring_map(bytes);
    return m->base ? 0 : rd_fail(c, errno, "mapping the circular ring");
}

void rd_circ_unmap(struct rd_circ *m)
{
    if (m->base)
        chan_ring_unmap(m->base, m->bytes);
    m->base = NULL;
}

/* ---------------------------------------------------------------- release */

int rd_rel_init(struct rd_release *r, uint32_t n)
{
    memset(r, 0, sizeof(*r));
    r->n = n;
    r->freed = calloc(n, sizeof(bool));
    return r->freed ? 0 : -ENOMEM;
}

void rd_rel_destroy(struct rd_release *r)
{
    free(r->freed);
    r->freed = NULL;
}

int rd_rel_free(struct rd_release *r, uint64_t idx)
{
    if (idx < r->released || idx >= r->held || r->freed[idx % r->n])
        return -EINVAL;
    r->freed[idx % r->n] = true;
    int k = 0;
    while (r->released < r->held && r->freed[r->released % r->n]) {
        r->freed[r->released % r->n] = false;
        r->released++;
        k++;
    }
    return k;
}

/* ---------------------------------------------------------------- read ring core */

enum { RD_RING_WIRE_RING = 0, RD_RING_WIRE_CTL = 1 };

static uint64_t rd_tail_off(uint32_t i)
{
    return (uint64_t)RD_LINE_BYTES * (1 + i);
}

static int rd_ring_open_inner(struct chan *c, const struct rd_ring_variant *v);

int rd_ring_open(struct chan *c, const struct rd_ring_variant *v)
{
    int err = rd_ring_open_inner(c, v);
    if (err) {
        char why[sizeof(c->err)];
        memcpy(why, c->err, sizeof(why));
        rd_ring_close(c);
        memcpy(c->err, why, sizeof(why));
    }
    return err;
}

static int rd_ring_open_inner(struct chan *c, const struct rd_ring_variant *v)
{
    int err = rd_check_cfg(c, true);
    if (err)
        return err;
    struct rd_ring *g = calloc(1, sizeof(*g));
    if (!g)
        return rd_fail(c, ENOMEM, "calloc");
    c->impl = g;
    g->v = v;
    g->R = c->cfg.ring_bytes;
    bool sender = c->cfg.role == CHAN_SENDER;
    uint32_t slots = c->cfg.slots;
    g->ends = calloc(slots, sizeof(uint64_t));
    g->held_end = calloc(slots, sizeof(uint64_t));
    g->zc_wait = calloc(slots, sizeof(uint64_t));
    if (!g->ends || !g->held_end || !g->zc_wait || rd_rel_init(&g->rel, slots))
        return rd_fail(c, ENOMEM, "calloc");
    if ((err = rd_circ_map(c, &g->mem, g->R)))
        return err;
    size_t ctl_bytes = rd_tail_off(RD_MAX_PEERS);
    g->ctl = pages_zalloc(ctl_bytes);
    if (!g->ctl)
        return rd_fail(c, ENOMEM, "allocating the control words");
    int ring_access = sender ? IBV_ACCESS_REMOTE_READ : IBV_ACCESS_LOCAL_WRITE;
    g->mem_mr = ibv_reg_mr(c->pd, g->mem.base, 2 * g->R, ring_access);
    g->ctl_mr =
        ibv_reg_mr(c->pd, g->ctl, ctl_bytes,
                   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    if (!g->mem_mr || !g->ctl_mr)
        return rd_fail(c, errno, "ibv_reg_mr");
    uint32_t npeers = sender ? c->cfg.receivers : 1;
    uint32_t recv_wr = v->notify && !sender ? slots : 1;
    if ((err = rd_ep_open(c, &g->ep, npeers, recv_wr, !sender && c->cfg.blocking)))
        return err;
    /* both sides must agree on ring size, slots and readers */
    uint32_t param = (uint32_t)(g->R / 4096) ^ (slots << 16) ^ (c->cfg.receivers << 28);
    for (uint32_t i = 0; i < npeers; i++) {
        struct rd_wire w = {.param = param};
        if (sender) {
            w.addr[RD_RING_WIRE_RING] = (uintptr_t)g->mem.base;
            w.rkey[RD_RING_WIRE_RING] = g->mem_mr->rkey;
            w.addr[RD_RING_WIRE_CTL] = (uintptr_t)g->ctl;
            w.rkey[RD_RING_WIRE_CTL] = g->ctl_mr->rkey;
        }
        uint32_t id = sender ? i : c->cfg.id;
        if ((err = rd_ep_connect(c, &g->ep, i, id, &w)))
            return err;
    }
    if (sender) {
        for (uint32_t i = 0; i < npeers; i++)
            if ((err = rd_ready_get(c, i)))
                return err;
        return 0;
    }
    const struct rd_wire *s = &g->ep.remote[0];
    g->r_ring = s->addr[RD_RING_WIRE_RING];
    g->r_ring_rkey = s->rkey[RD_RING_WIRE_RING];
    g->r_head = s->addr[RD_RING_WIRE_CTL];
    g->r_tail = s->addr[RD_RING_WIRE_CTL] + rd_tail_off(c->cfg.id);
    g->r_ctl_rkey = s->rkey[RD_RING_WIRE_CTL];
    if (v->notify)
        for (uint32_t k = 0; k < slots; k++)
            if ((err = rd_post_recv(c, &g->ep, 0, RD_WR_ID(RD_WR_RECV, k), NULL, 0, 0)))
                return err;
    return rd_ready_put(c, c->cfg.id);
}

/* Sender: the smallest tail its readers wrote back. */
static void rd_ring_update_tail(struct chan *c, struct rd_ring *g)
{
    uint64_t m = UINT64_MAX;
    for (uint32_t i = 0; i < c->cfg.receivers; i++) {
        uint64_t t = *(volatile uint64_t *)(void *)(g->ctl + rd_tail_off(i));
        if (t < m)
            m = t;
    }
    atomic_thread_fence(memory_order_acquire);
    g->min_tail = m;
    while (g->acked < g->sent && g->ends[g->acked % c->cfg.slots] <= m)
        g->acked++;
}

/* Reader: write the processed tail back (Section 6's "write slot inlined
 * bell" back-channel) if it moved. */
static int rd_ring_report(struct chan *c, struct rd_ring *g)
{
    if (g->released_pos == g->reported)
        return rd_drain(c, &g->ep);
    g->reported = g->released_pos;
    g->reported_msgs = g->rel.released;
    return rd_write_ctl(c, &g->ep, 0, &g->reported, sizeof(g->reported), g->r_tail, g->r_ctl_rkey);
}

void rd_ring_close(struct chan *c)
{
    struct rd_ring *g = c->impl;
    if (!g)
        return;
    if (g->ep.npeers && g->ctl && c->cfg.role == CHAN_SENDER) {
        /* readers READ the ring until they are done: wait for every tail
         * (our own notifications first; then memory only, so the last tail
         * landing wakes host_relax) */
        rd_wait(c, &g->ep, RD_WR_CTL, g->ep.next_id);
        for (;;) {
            rd_ring_update_tail(c, g);
            if (g->min_tail >= g->head)
                break;
            host_relax();
        }
    } else if (g->ep.npeers && g->ep.qp[0]) {
        rd_apoll_finish(c, &g->ep, &g->poll);
        if (rd_ring_report(c, g) == 0)
            rd_wait(c, &g->ep, RD_WR_CTL, g->ep.next_id);
    }
    rd_ep_close(&g->ep);
    if (g->mem_mr)
        ibv_dereg_mr(g->mem_mr);
    if (g->ctl_mr)
        ibv_dereg_mr(g->ctl_mr);
    rd_circ_unmap(&g->mem);
    free(g->ctl);
    free(g->ends);
    free(g->held_end);
    free(g->zc_wait);
    rd_rel_destroy(&g->rel);
    free(g);
    c->impl = NULL;
}

int rd_ring_send(struct chan *c, const struct chan_region *r, uint64_t *handle)
{
    struct rd_ring *g = c->impl;
    if (c->cfg.role != CHAN_SENDER)
        return rd_fail(c, EINVAL, "send on a receiver");
    if (r->len > c->cfg.max_msg_bytes)
        return rd_fail(c, EMSGSIZE, "message above max_msg_bytes");
    size_t rec = RD_HDR_BYTES + rd_align8(r->len);
    rd_ring_update_tail(c, g);
    if (g->sent - g->acked >= c->cfg.slots ||
        g->head + rec + g->v->tail_gap_bytes - g->min_tail > g->R)
        return CHAN_AGAIN;
    int err = rd_drain(c, &g->ep);
    if (err)
        return err;
    host_memcpy(g->mem.base + (g->head + RD_HDR_BYTES) % g->R, r->addr, r->len);
    if ((err = g->v->publish(c, g, g->sent, g->head, (uint32_t)r->len)))
        return err;
    g->ends[g->sent % c->cfg.slots] = g->head + rec;
    g->head += rec;
    g->sent++;
    if (handle)
        *handle = g->sent;
    return 0;
}

int rd_ring_test_send(struct chan *c, uint64_t handle)
{
    /* the message was copied into the ring by chan_send: its buffer is
     * free at once (the ring family is not zero-copy on send) */
    struct rd_ring *g = c->impl;
    if (handle == 0 || handle > g->sent)
        return rd_fail(c, EINVAL, "unknown send handle");
    return 0;
}

int rd_ring_stage(struct chan *c, struct rd_ring *g, uint64_t from, uint64_t to)
{
    if (to <= from)
        return 0;
    struct ibv_sge sge = {.addr = (uintptr_t)(g->mem.base + from % g->R),
                          .length = (uint32_t)(to - from),
                          .lkey = g->mem_mr->lkey};
    int err = rd_post(c, &g->ep, 0, IBV_WR_RDMA_READ, RD_WR_ID(RD_WR_READ, ++g->reads), &sge, 1,
                      g->r_ring + from % g->R, g->r_ring_rkey, 0, 0);
    if (!err)
        err = rd_wait(c, &g->ep, RD_WR_READ, g->reads);
    if (!err && to > g->staged_end)
        g->staged_end = to;
    return err;
}

/* Learn the next record. */
static int rd_ring_next(struct chan *c, struct rd_ring *g)
{
    if (g->have_cur)
        return 0;
    int err = g->v->learn(c, g);
    if (err)
        return err;
    if (g->cur_len > c->cfg.max_msg_bytes)
        return rd_fail(c, EPROTO, "record length above max_msg_bytes");
    g->have_cur = true;
    return 0;
}

/* Take the learnt record: hold it, move past it. */
static uint64_t rd_ring_take(struct chan *c, struct rd_ring *g)
{
    uint64_t idx = rd_rel_hold(&g->rel);
    uint64_t end = g->pos + RD_HDR_BYTES + rd_align8(g->cur_len);
    g->held_end[idx % c->cfg.slots] = end;
    g->pos = end;
    if (g->staged_end < end)
        g->staged_end = end;
    g->have_cur = false;
    g->msgs++;
    return idx;
}

int rd_ring_recv(struct chan *c, struct chan_region *out)
{
    struct rd_ring *g = c->impl;
    if (c->cfg.role != CHAN_RECEIVER)
        return rd_fail(c, EINVAL, "recv on a sender");
    if (rd_rel_full(&g->rel))
        return CHAN_AGAIN;
    int err = rd_ring_next(c, g);
    if (err)
        return err;
    uint64_t data = g->pos + RD_HDR_BYTES, end = data + g->cur_len;
    if (g->staged_end < end && (err = rd_ring_stage(c, g, g->staged_end, end)))
        return err;
    out->addr = g->mem.base + data % g->R;
    out->len = g->cur_len;
    out->lkey = g->mem_mr->lkey;
    out->priv = rd_ring_take(c, g);
    return 0;
}

static int rd_ring_release(struct chan *c, struct rd_ring *g, uint64_t idx)
{
    int k = rd_rel_free(&g->rel, idx);
    if (k < 0)
        return rd_fail(c, EINVAL, "region not held (freed twice?)");
    if (k == 0)
        return 0;
    g->released_pos = g->held_end[(g->rel.released - 1) % c->cfg.slots];
    /* Write the tail back once half the ring or half the message window
     * is processed (and at close).  Deadlock-free: a sender that finds no
     * room has more than half the ring (a record and the gap take at most
     * half, rd_check_cfg) or all cfg.slots messages unacknowledged, so a
     * reader that processed everything crossed one of the halves. */
    if (g->released_pos - g->reported >= g->R / 2 ||
        g->rel.released - g->reported_msgs >= (c->cfg.slots + 1) / 2)
        return rd_ring_report(c, g);
    return 0;
}

int rd_ring_free(struct chan *c, struct chan_region *r)
{
    struct rd_ring *g = c->impl;
    return rd_ring_release(c, g, r->priv);
}

int rd_ring_can_recv(struct chan *c, struct chan_region_option *opt)
{
    struct rd_ring *g = c->impl;
    if (c->cfg.role != CHAN_RECEIVER)
        return rd_fail(c, EINVAL, "can_recv on a sender");
    if (rd_rel_full(&g->rel))
        return CHAN_AGAIN;
    int err = rd_ring_next(c, g);
    if (err)
        return err;
    opt->len = g->cur_len;
    opt->priv = g->pos;
    return 0;
}

int rd_ring_recv_into(struct chan *c, const struct chan_region_option *opt,
                      const struct chan_region *dst, uint64_t *handle)
{
    struct rd_ring *g = c->impl;
    if (!g->have_cur || opt->priv != g->pos)
        return rd_fail(c, EINVAL, "option is not the next message (call can_recv)");
    if (dst->len < g->cur_len)
        return rd_fail(c, EMSGSIZE, "destination smaller than the message");
    uint64_t data = g->pos + RD_HDR_BYTES, end = data + g->cur_len;
    /* what prefetching already brought is copied (Table 2 note d), the
     * rest is READ straight into the destination */
    uint64_t have = g->staged_end > data ? (g->staged_end < end ? g->staged_end : end) : data;
    if (have > data)
        host_memcpy(dst->addr, g->mem.base + data % g->R, have - data);
    uint64_t wait_n = 0;
    if (have < end) {
        struct ibv_sge sge = {.addr = (uintptr_t)dst->addr + (have - data),
                              .length = (uint32_t)(end - have),
                              .lkey = dst->lkey};
        wait_n = ++g->reads;
        int err = rd_post(c, &g->ep, 0, IBV_WR_RDMA_READ, RD_WR_ID(RD_WR_DATA, wait_n), &sge, 1,
                          g->r_ring + have % g->R, g->r_ring_rkey, 0, 0);
        if (err)
            return err;
    }
    uint64_t idx = rd_ring_take(c, g);
    g->zc_wait[idx % c->cfg.slots] = wait_n;
    *handle = idx + 1;
    return 0;
}

int rd_ring_test_recv(struct chan *c, uint64_t handle)
{
    struct rd_ring *g = c->impl;
    if (handle == 0 || handle > g->rel.held)
        return rd_fail(c, EINVAL, "unknown receive handle");
    uint64_t idx = handle - 1;
    if (idx < g->rel.released || g->rel.freed[idx % g->rel.n])
        return 0;
    int err = rd_drain(c, &g->ep);
    if (err)
        return err;
    if (g->ep.done[RD_WR_DATA] < g->zc_wait[idx % c->cfg.slots])
        return CHAN_AGAIN;
    return rd_ring_release(c, g, idx);
}

/* ---------------------------------------------------------------- read slot core */

static int rd_slot_open_inner(struct chan *c, struct rd_slot *s, const struct rd_slot_layout *l)
{
    bool sender = c->cfg.role == CHAN_SENDER;
    s->stride = l->stride;
    s->mem_bytes = sender ? l->send_table_bytes + RD_LINE_BYTES : l->recv_bytes;
    s->mem = pages_zalloc(s->mem_bytes);
    s->hdr = pages_zalloc(RD_LINE_BYTES);
    s->zc_wait = calloc(c->cfg.slots, sizeof(uint64_t));
    s->priv = calloc(1, l->priv_bytes ? l->priv_bytes : 1);
    if (!s->priv || !s->mem || !s->hdr || !s->zc_wait || rd_rel_init(&s->rel, c->cfg.slots))
        return rd_fail(c, ENOMEM, "allocating slots");
    s->mem_mr = ibv_reg_mr(c->pd, s->mem, s->mem_bytes,
                           IBV_ACCESS_LOCAL_WRITE | (sender ? l->send_access : l->recv_access));
    s->hdr_mr = ibv_reg_mr(c->pd, s->hdr, RD_LINE_BYTES, IBV_ACCESS_LOCAL_WRITE);
    if (!s->mem_mr || !s->hdr_mr)
        return rd_fail(c, errno, "ibv_reg_mr");
    int err = rd_ep_open(c, &s->ep, 1, sender ? 1 : l->recv_wr, !sender && c->cfg.blocking);
    if (err)
        return err;
    struct rd_wire w = {.param = (uint32_t)c->cfg.slots ^ ((uint32_t)c->cfg.max_msg_bytes << 12)};
    w.addr[0] = (uintptr_t)s->mem;
    w.rkey[0] = s->mem_mr->rkey;
    if ((err = rd_ep_connect(c, &s->ep, 0, 0, &w)))
        return err;
    const struct rd_wire *p = &s->ep.remote[0];
    if (sender) {
        s->r_buf = p->addr[0];
        s->r_buf_rkey = p->rkey[0];
        return rd_ready_get(c, 0);
    }
    s->r_addr = p->addr[0];
    s->r_rkey = p->rkey[0];
    s->r_ack = p->addr[0] + l->send_table_bytes;
    if (l->post_initial && (err = l->post_initial(c, s)))
        return err;
    return rd_ready_put(c, 0);
}

int rd_slot_open(struct chan *c, const struct rd_slot_layout *l)
{
    struct rd_slot *s = calloc(1, sizeof(*s));
    if (!s)
        return rd_fail(c, ENOMEM, "calloc");
    c->impl = s;
    s->sender_writes = l->sender_writes;
    s->ack_every = l->ack_every;
    int err = rd_slot_open_inner(c, s, l);
    if (err) {
        char why[sizeof(c->err)];
        memcpy(why, c->err, sizeof(why));
        rd_slot_close(c);
        memcpy(c->err, why, sizeof(why));
    }
    return err;
}

uint64_t rd_slot_acked(struct rd_slot *s)
{
    uint64_t a = *(volatile uint64_t *)(void *)(s->mem + s->mem_bytes - RD_LINE_BYTES);
    atomic_thread_fence(memory_order_acquire);
    return a;
}

void rd_slot_close(struct chan *c)
{
    struct rd_slot *s = c->impl;
    if (!s)
        return;
    if (s->ep.npeers && s->ep.qp[0] && s->mem) {
        if (c->cfg.role == CHAN_SENDER) {
            /* the receiver may still READ the slots: wait for its acks and
             * for our own work requests */
            if (s->sender_writes)
                rd_wait(c, &s->ep, RD_WR_DATA, s->sent);
            else if (rd_wait(c, &s->ep, RD_WR_CTL, s->ep.next_id) == 0)
                while (rd_slot_acked(s) < s->sent)
                    host_relax(); /* memory only: the last ack wakes it */
        } else {
            rd_apoll_finish(c, &s->ep, &s->poll);
            if (!s->sender_writes)
                rd_slot_ack(c, s); /* the last, partial batch */
            rd_wait(c, &s->ep, RD_WR_CTL, s->ep.next_id);
        }
    }
    rd_ep_close(&s->ep);
    if (s->mem_mr)
        ibv_dereg_mr(s->mem_mr);
    if (s->hdr_mr)
        ibv_dereg_mr(s->hdr_mr);
    free(s->mem);
    free(s->hdr);
    free(s->zc_wait);
    rd_rel_destroy(&s->rel);
    free(s->priv);
    free(s);
    c->impl = NULL;
}

int rd_slot_read(struct chan *c, struct rd_slot *s, enum rd_wr_kind kind, void *local, uint32_t len,
                 uint32_t lkey, uint64_t raddr, uint32_t rkey, uint64_t *n)
{
    struct ibv_sge sge = {.addr = (uintptr_t)local, .length = len, .lkey = lkey};
    *n = ++s->reads;
    return rd_post(c, &s->ep, 0, IBV_WR_RDMA_READ, RD_WR_ID(kind, *n), &sge, 1, raddr, rkey, 0, 0);
}

int rd_slot_release(struct chan *c, struct rd_slot *s, uint64_t idx)
{
    int k = rd_rel_free(&s->rel, idx);
    if (k < 0)
        return rd_fail(c, EINVAL, "region not held (freed twice?)");
    /* Acknowledge once half the slots are processed (and at close): a
     * sender without a free slot has all cfg.slots unacknowledged.  A
     * zero-copy sender (ack_every) waits for each message's acknowledgement
     * to reuse its buffer (chan_test_send), so those go one by one. */
    uint64_t batch = s->ack_every ? 1 : (c->cfg.slots + 1) / 2;
    if (k == 0 || s->rel.released - s->ack_sent < batch)
        return 0;
    return rd_slot_ack(c, s);
}

int rd_slot_ack(struct chan *c, struct rd_slot *s)
{
    if (s->ack_sent == s->rel.released)
        return 0;
    s->ack_sent = s->rel.released;
    return rd_write_ctl(c, &s->ep, 0, &s->ack_sent, sizeof(s->ack_sent), s->r_ack, s->r_rkey);
}

int rd_slot_free(struct chan *c, struct chan_region *r)
{
    return rd_slot_release(c, c->impl, r->priv);
}

int rd_slot_test_recv(struct chan *c, uint64_t handle)
{
    struct rd_slot *s = c->impl;
    if (handle == 0 || handle > s->rel.held)
        return rd_fail(c, EINVAL, "unknown receive handle");
    uint64_t idx = handle - 1;
    if (idx < s->rel.released || s->rel.freed[idx % s->rel.n])
        return 0;
    int err = rd_drain(c, &s->ep);
    if (err)
        return err;
    if (s->ep.done[RD_WR_DATA] < s->zc_wait[idx % c->cfg.slots])
        return CHAN_AGAIN;
    return rd_slot_release(c, s, idx);
}

int rd_slot_test_send_acked(struct chan *c, uint64_t handle)
{
    struct rd_slot *s = c->impl;
    if (handle == 0 || handle > s->sent)
        return rd_fail(c, EINVAL, "unknown send handle");
    /* memory only: the acknowledgement is a DMA write that wakes a caller's
     * host_relax(); the send queue is reaped by chan_send */
    return rd_slot_acked(s) >= handle ? 0 : CHAN_AGAIN;
}

/* The receive path of the read slot channels that learn of a message
 * first (detached bell, notify receiver): `learn` fills s->cur_*. */
int rd_slot_recv_learned(struct chan *c, rd_slot_learn_fn learn, size_t bufs_off,
                         struct chan_region *out)
{
    struct rd_slot *s = c->impl;
    if (c->cfg.role != CHAN_RECEIVER)
        return rd_fail(c, EINVAL, "recv on a sender");
    if (rd_rel_full(&s->rel))
        return CHAN_AGAIN;
    int err = learn(c, s);
    if (err)
        return err;
    uint8_t *buf = s->mem + bufs_off + (s->recvd % c->cfg.slots) * s->stride;
    if (s->cur_len) {
        uint64_t n;
        err = rd_slot_read(c, s, RD_WR_DATA, buf, s->cur_len, s->mem_mr->lkey, s->cur_addr,
                           s->cur_rkey, &n);
        if (!err)
            err = rd_wait(c, &s->ep, RD_WR_DATA, n);
        if (err)
            return err;
    }
    out->addr = buf;
    out->len = s->cur_len;
    out->lkey = s->mem_mr->lkey;
    out->priv = rd_rel_hold(&s->rel);
    s->have_cur = false;
    s->recvd++;
    return 0;
}

int rd_slot_can_recv_learned(struct chan *c, rd_slot_learn_fn learn, struct chan_region_option *opt)
{
    struct rd_slot *s = c->impl;
    if (c->cfg.role != CHAN_RECEIVER)
        return rd_fail(c, EINVAL, "can_recv on a sender");
    if (rd_rel_full(&s->rel))
        return CHAN_AGAIN;
    int err = learn(c, s);
    if (err)
        return err;
    opt->len = s->cur_len;
    opt->priv = s->recvd;
    return 0;
}

int rd_slot_recv_into(struct chan *c, const struct chan_region_option *opt,
                      const struct chan_region *dst, uint64_t *handle)
{
    struct rd_slot *s = c->impl;
    if (!s->have_cur || opt->priv != s->recvd)
        return rd_fail(c, EINVAL, "option is not the next message (call can_recv)");
    if (dst->len < s->cur_len)
        return rd_fail(c, EMSGSIZE, "destination smaller than the message");
    uint64_t n = 0;
    if (s->cur_len) {
        int err = rd_slot_read(c, s, RD_WR_DATA, dst->addr, s->cur_len, dst->lkey, s->cur_addr,
                               s->cur_rkey, &n);
        if (err)
            return err;
    }
    uint64_t idx = rd_rel_hold(&s->rel);
    s->zc_wait[idx % c->cfg.slots] = n;
    s->have_cur = false;
    s->recvd++;
    *handle = idx + 1;
    return 0;
}
