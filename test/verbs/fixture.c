/* Verbs-level test fixture: see fixture.h. */
#include "fixture.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/trace.h"
#include "verbs_shim/shim.h"

/* ---------------------------------------------------------------- loss hook */

static void fx_ingress(struct sim *sim, void *ctx, struct pkt *p)
{
    struct fx_port *pt = ctx;
    struct fx *fx = pt->fx;
    unsigned n = pt->node;
    fx->arrived[n]++;
    bool drop = fx->drop_fn && fx->drop_fn(fx, n, p, fx->drop_arg);
    if (!drop && fx->loss[n] > 0.0)
        drop = fx->loss[n] >= 1.0 || sim_rng_uniform(&fx->loss_rng[n]) < fx->loss[n];
    if (drop) {
        fx->dropped[n]++;
        struct trace_rec r = {.kind = TRACE_PKT_DROP,
                              .opcode = p->opcode,
                              .node = n,
                              .qpn = p->dest_qpn,
                              .psn = p->psn,
                              .len = p->payload_len,
                              .where = "fx loss hook"};
        sim_trace(sim, &r);
        pkt_free(fx->pool, p);
        return;
    }
    fx->nic_in[n].rx(sim, fx->nic_in[n].ctx, p);
}

void fx_set_loss(struct fx *fx, unsigned node, double p)
{
    if (node < fx->n_hosts)
        fx->loss[node] = p;
}

void fx_set_loss_all(struct fx *fx, double p)
{
    for (unsigned i = 0; i < fx->n_hosts; i++)
        fx->loss[i] = p;
}

void fx_set_drop_fn(struct fx *fx, fx_drop_fn fn, void *arg)
{
    fx->drop_fn = fn;
    fx->drop_arg = arg;
}

/* ---------------------------------------------------------------- world */

struct fx *fx_create_n(uint64_t seed, unsigned n_hosts, const struct nic_params *np)
{
    if (n_hosts < 2 || n_hosts > FX_MAX_HOSTS)
        return NULL;
    struct fx *fx = calloc(1, sizeof(*fx));
    if (!fx)
        return NULL;
    fx->n_hosts = n_hosts;
    fx->sim = sim_create(seed);
    fx->pool = pkt_pool_create();
    sim_waitq_init(&fx->kv_wq, "fx_get");
    if (np)
        fx->nicp = *np;
    else
        nic_params_default(&fx->nicp);

    struct topo_params tp;
    memset(&tp, 0, sizeof(tp));
    fabric_defaults(&tp);
    tp.kind = TOPO_STAR;
    tp.n_nodes = n_hosts;
    fx->topo = topo_create(fx->sim, &tp, fx->pool);

    struct host_cpu_params cpu;
    host_cpu_params_default(&cpu);
    struct pcie_params pp;
    pcie_params_default(&pp);
    for (unsigned i = 0; i < n_hosts; i++) {
        char name[32];
        snprintf(name, sizeof(name), "h%u", i);
        host_init(&fx->hosts[i], fx->sim, i, name, &cpu);
        snprintf(name, sizeof(name), "h%u.pcie", i);
        fx->pcie[i] = pcie_link_create(fx->sim, name, &pp);
        fx->nic[i] = nic_create(fx->sim, &fx->hosts[i], i, &fx->nicp, fx->pcie[i], fx->pool);
        fx->hosts[i].nic = fx->nic[i];
        fx->port[i] = (struct fx_port){fx, i};
        fx->nic_in[i] = nic_sink(fx->nic[i]);
        snprintf(name, sizeof(name), "fx.loss.%u", i);
        sim_rng_stream(fx->sim, &fx->loss_rng[i], name);
        topo_attach(fx->topo, i, (struct fabric_sink){fx_ingress, &fx->port[i]});
        nic_attach_uplink(fx->nic[i], topo_uplink(fx->topo, i));
    }
    return fx;
}

struct fx *fx_create(uint64_t seed, const struct nic_params *np)
{
    return fx_create_n(seed, 2, np);
}

struct sim_proc *fx_spawn(struct fx *fx, unsigned h, const char *name, sim_proc_fn fn, void *arg)
{
    return host_spawn(&fx->hosts[h], name, fn, arg, NULL, SIM_PROC_DEFAULT_STACK_BYTES);
}

enum sim_run_result fx_run(struct fx *fx)
{
    return sim_run(fx->sim, sim_now(fx->sim) + 10 * SIM_S);
}

enum sim_run_result fx_run_pair(struct fx *fx, const char *name0, sim_proc_fn fn0,
                                const char *name1, sim_proc_fn fn1, void *arg)
{
    fx_spawn(fx, 0, name0, fn0, arg);
    fx_spawn(fx, 1, name1, fn1, arg);
    enum sim_run_result rr = fx_run(fx);
    if (rr == SIM_RUN_DEADLOCK)
        sim_deadlock_report(fx->sim, stderr); /* who waits for what */
    return rr;
}

void fx_destroy(struct fx *fx)
{
    for (unsigned i = 0; i < FX_MAX_RCS; i++)
        if (fx->rcs[i])
            fx_rc_close(fx->rcs[i]);
    for (unsigned i = 0; i < fx->n_hosts; i++)
        nic_destroy(fx->nic[i]);
    for (unsigned i = 0; i < fx->n_hosts; i++)
        pcie_link_destroy(fx->pcie[i]);
    topo_destroy(fx->topo);
    for (unsigned i = 0; i < fx->n_hosts; i++)
        host_fini(&fx->hosts[i]);
    sim_destroy(fx->sim);
    pkt_pool_destroy(fx->pool);
    free(fx);
}

/* ---------------------------------------------------------------- rendezvous */

static struct fx_kv *kv_find(struct fx *fx, const char *key)
{
    for (unsigned i = 0; i < fx->n_kv; i++)
        if (strcmp(fx->kv[i].key, key) == 0)
            return &fx->kv[i];
    return NULL;
}

void fx_put(struct fx *fx, const char *key, const void *buf, size_t len)
{
    struct fx_kv *kv = kv_find(fx, key);
    if (!kv) {
        if (fx->n_kv == FX_MAX_KEYS || strlen(key) >= sizeof(kv->key) || len > FX_MAX_VALUE_BYTES) {
            fprintf(stderr, "fx_put: board full or value too large (%s)\n", key);
            abort();
        }
        kv = &fx->kv[fx->n_kv++];
        snprintf(kv->key, sizeof(kv->key), "%s", key);
    }
    if (len) /* fx_put(fx, key, NULL, 0) is a plain signal */
        memcpy(kv->value, buf, len);
    kv->len = len;
    if (!sim_waitq_empty(&fx->kv_wq))
        sim_waitq_wake_all(fx->sim, &fx->kv_wq);
}

void fx_get(struct fx *fx, const char *key, void *buf, size_t len)
{
    struct fx_kv *kv;
    while (!(kv = kv_find(fx, key)))
        sim_waitq_wait(&fx->kv_wq, "fx_get: waiting for a rendezvous key");
    if (len)
        memcpy(buf, kv->value, len < kv->len ? len : kv->len);
}

void fx_barrier(struct fx *fx, const char *name, const char *me, const char *peer)
{
    char key[48];
    uint8_t one = 1;
    snprintf(key, sizeof(key), "%s/%s", name, me);
    fx_put(fx, key, &one, 1);
    snprintf(key, sizeof(key), "%s/%s", name, peer);
    fx_get(fx, key, &one, 1);
}

/* ---------------------------------------------------------------- RC pair */

void fx_rc_default_opts(struct fx_rc_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->buf_bytes = 2u << 20;
    o->access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                IBV_ACCESS_REMOTE_ATOMIC;
    o->qp_access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    o->max_send_wr = 64;
    o->max_recv_wr = 64;
    o->max_send_sge = 4;
    o->max_recv_sge = 4;
    o->max_inline = 0;
    o->cq_depth = 256;
    o->qp_type = IBV_QPT_RC;
    o->qkey = 0x11111111u;
    o->timeout = 14;
    o->retry_cnt = 7;
    o->rnr_retry = 7;
    o->min_rnr_timer = 12;
    o->max_rd_atomic = 1;
}

static void rc_register(struct fx *fx, struct fx_rc *rc)
{
    for (unsigned i = 0; i < FX_MAX_RCS; i++)
        if (!fx->rcs[i]) {
            fx->rcs[i] = rc;
            return;
        }
    fprintf(stderr, "fx: too many open RC endpoints\n");
    abort();
}

static void rc_unregister(struct fx *fx, struct fx_rc *rc)
{
    for (unsigned i = 0; i < FX_MAX_RCS; i++)
        if (fx->rcs[i] == rc)
            fx->rcs[i] = NULL;
}

int fx_rc_open(struct fx *fx, struct fx_rc *rc, const struct fx_rc_opts *o)
{
    memset(rc, 0, sizeof(*rc));
    rc->fx = fx;
    if (o)
        rc->opts = *o;
    else
        fx_rc_default_opts(&rc->opts);
    rc_register(fx, rc);

    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (!list || n != 1) {
        if (list)
            ibv_free_device_list(list);
        return ENODEV;
    }
    rc->ctx = ibv_open_device(list[0]);
    ibv_free_device_list(list);
    if (!rc->ctx)
        return errno;
    rc->pd = ibv_alloc_pd(rc->ctx);
    if (!rc->pd)
        return errno;
    rc->buf_bytes = rc->opts.buf_bytes;
    rc->buf = aligned_alloc(4096, (rc->buf_bytes + 4095) / 4096 * 4096);
    if (!rc->buf)
        return ENOMEM;
    memset(rc->buf, 0, rc->buf_bytes);
    rc->mr = ibv_reg_mr(rc->pd, rc->buf, rc->buf_bytes, rc->opts.access);
    if (!rc->mr)
        return errno;
    if (rc->opts.use_channel) {
        rc->channel = ibv_create_comp_channel(rc->ctx);
        if (!rc->channel)
            return errno;
    }
    rc->scq = ibv_create_cq(rc->ctx, rc->opts.cq_depth, rc, rc->channel, 0);
    if (!rc->scq)
        return errno;
    rc->rcq = ibv_create_cq(rc->ctx, rc->opts.cq_depth, rc, rc->channel, 0);
    if (!rc->rcq)
        return errno;
    struct ibv_qp_init_attr ia = {
        .send_cq = rc->scq,
        .recv_cq = rc->rcq,
        .cap =
            {
                .max_send_wr = rc->opts.max_send_wr,
                .max_recv_wr = rc->opts.max_recv_wr,
                .max_send_sge = rc->opts.max_send_sge,
                .max_recv_sge = rc->opts.max_recv_sge,
                .max_inline_data = rc->opts.max_inline,
            },
        .qp_type = rc->opts.qp_type,
        .sq_sig_all = rc->opts.sq_sig_all,
    };
    rc->qp = ibv_create_qp(rc->pd, &ia);
    if (!rc->qp)
        return errno;
    union ibv_gid gid;
    if (ibv_query_gid(rc->ctx, 1, 0, &gid))
        return errno;
    rc->local.qpn = rc->qp->qp_num;
    rc->local.psn = (rc->qp->qp_num * 7919u) & 0xffffff;
    rc->local.gid = gid;
    rc->local.addr = (uintptr_t)rc->buf;
    rc->local.rkey = rc->mr->rkey;
    return 0;
}

int fx_rc_open_shared(struct fx_rc *rc, struct fx_rc *base, struct ibv_srq *srq)
{
    memset(rc, 0, sizeof(*rc));
    rc->fx = base->fx;
    rc->opts = base->opts;
    rc->shared = true;
    rc_register(rc->fx, rc);
    rc->ctx = base->ctx;
    rc->pd = base->pd;
    rc->mr = base->mr;
    rc->channel = base->channel;
    rc->scq = base->scq;
    rc->rcq = base->rcq;
    rc->buf = base->buf;
    rc->buf_bytes = base->buf_bytes;
    struct ibv_qp_init_attr ia = {
        .send_cq = rc->scq,
        .recv_cq = rc->rcq,
        .srq = srq,
        .cap =
            {
                .max_send_wr = rc->opts.max_send_wr,
                .max_recv_wr = rc->opts.max_recv_wr,
                .max_send_sge = rc->opts.max_send_sge,
                .max_recv_sge = rc->opts.max_recv_sge,
                .max_inline_data = rc->opts.max_inline,
            },
        .qp_type = rc->opts.qp_type,
        .sq_sig_all = rc->opts.sq_sig_all,
    };
    rc->qp = ibv_create_qp(rc->pd, &ia);
    if (!rc->qp)
        return errno;
    rc->local = base->local;
    rc->local.qpn = rc->qp->qp_num;
    rc->local.psn = (rc->qp->qp_num * 7919u) & 0xffffff;
    return 0;
}

int fx_rc_to_init(struct fx_rc *rc)
{
    struct ibv_qp_attr a = {
        .qp_state = IBV_QPS_INIT,
        .pkey_index = 0,
        .port_num = 1,
        .qp_access_flags = (unsigned)rc->opts.qp_access,
        .qkey = rc->opts.qkey,
    };
    int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
    mask |= rc->opts.qp_type == IBV_QPT_UD ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS;
    return ibv_modify_qp(rc->qp, &a, mask);
}

static void fx_ah_attr(const struct fx_ep_info *remote, struct ibv_ah_attr *ah)
{
    memset(ah, 0, sizeof(*ah));
    ah->is_global = 1;
    ah->grh.dgid = remote->gid;
    ah->grh.sgid_index = 0;
    ah->grh.hop_limit = 64;
    ah->port_num = 1;
}

int fx_rc_to_rtr(struct fx_rc *rc, const struct fx_ep_info *remote)
{
    struct ibv_qp_attr a = {
        .qp_state = IBV_QPS_RTR,
        .path_mtu = IBV_MTU_4096 < rc->fx->nicp.max_mtu ? IBV_MTU_4096 : rc->fx->nicp.max_mtu,
        .dest_qp_num = remote->qpn,
        .rq_psn = remote->psn,
        .max_dest_rd_atomic = rc->opts.max_rd_atomic,
        .min_rnr_timer = rc->opts.min_rnr_timer,
    };
    fx_ah_attr(remote, &a.ah_attr);
    int mask = IBV_QP_STATE;
    switch (rc->opts.qp_type) {
    case IBV_QPT_UD:
        if (!rc->ah) {
            rc->ah = ibv_create_ah(rc->pd, &a.ah_attr);
            if (!rc->ah)
                return errno;
        }
        break;
    case IBV_QPT_UC:
        mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
        break;
    default:
        mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
        break;
    }
    return ibv_modify_qp(rc->qp, &a, mask);
}

int fx_rc_to_rts(struct fx_rc *rc)
{
    struct ibv_qp_attr a = {
        .qp_state = IBV_QPS_RTS,
        .timeout = rc->opts.timeout,
        .retry_cnt = rc->opts.retry_cnt,
        .rnr_retry = rc->opts.rnr_retry,
        .sq_psn = rc->local.psn,
        .max_rd_atomic = rc->opts.max_rd_atomic,
    };
    int mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
    if (rc->opts.qp_type == IBV_QPT_RC)
        mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
    return ibv_modify_qp(rc->qp, &a, mask);
}

int fx_rc_connect(struct fx_rc *rc, const char *me, const char *peer)
{
    fx_put(rc->fx, me, &rc->local, sizeof(rc->local));
    fx_get(rc->fx, peer, &rc->remote, sizeof(rc->remote));
    int e = fx_rc_to_init(rc);
    if (!e)
        e = fx_rc_to_rtr(rc, &rc->remote);
    if (!e)
        e = fx_rc_to_rts(rc);
    return e;
}

void fx_rc_close(struct fx_rc *rc)
{
    if (rc->qp)
        ibv_destroy_qp(rc->qp);
    if (rc->ah)
        ibv_destroy_ah(rc->ah);
    if (rc->shared) {
        if (rc->fx)
            rc_unregister(rc->fx, rc);
        memset(rc, 0, sizeof(*rc));
        return;
    }
    if (rc->scq)
        ibv_destroy_cq(rc->scq);
    if (rc->rcq)
        ibv_destroy_cq(rc->rcq);
    if (rc->channel)
        ibv_destroy_comp_channel(rc->channel);
    if (rc->mr)
        ibv_dereg_mr(rc->mr);
    if (rc->pd)
        ibv_dealloc_pd(rc->pd);
    if (rc->ctx)
        ibv_close_device(rc->ctx);
    free(rc->buf);
    if (rc->fx)
        rc_unregister(rc->fx, rc);
    memset(rc, 0, sizeof(*rc));
}

int fx_poll_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
    for (;;) {
        int n = ibv_poll_cq(cq, 1, wc);
        if (n != 0)
            return n;
    }
}

int fx_post(struct fx_rc *rc, enum ibv_wr_opcode opcode, uint64_t wr_id, size_t off, uint32_t len,
            uint64_t roff, unsigned flags)
{
    struct ibv_sge sge = {.addr = (uintptr_t)(rc->buf + off), .length = len, .lkey = rc->mr->lkey};
    struct ibv_send_wr wr = {
        .wr_id = wr_id,
        .sg_list = &sge,
        .num_sge = 1,
        .opcode = opcode,
        .send_flags = flags,
    };
    if (rc->opts.qp_type == IBV_QPT_UD) {
        wr.wr.ud.ah = rc->ah;
        wr.wr.ud.remote_qpn = rc->remote.qpn;
        wr.wr.ud.remote_qkey = rc->opts.qkey;
    } else if (opcode == IBV_WR_ATOMIC_CMP_AND_SWP || opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
        wr.wr.atomic.remote_addr = rc->remote.addr + roff;
        wr.wr.atomic.rkey = rc->remote.rkey;
    } else {
        wr.wr.rdma.remote_addr = rc->remote.addr + roff;
        wr.wr.rdma.rkey = rc->remote.rkey;
    }
    struct ibv_send_wr *bad = NULL;
    return ibv_post_send(rc->qp, &wr, &bad);
}

int fx_post_recv(struct fx_rc *rc, uint64_t wr_id, size_t off, uint32_t len)
{
    struct ibv_sge sge = {.addr = (uintptr_t)(rc->buf + off), .length = len, .lkey = rc->mr->lkey};
    struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1};
    struct ibv_recv_wr *bad = NULL;
    return ibv_post_recv(rc->qp, &wr, &bad);
}

/* ---------------------------------------------------------------- topology */

int fx_use_topology(struct fx *fx, const struct topo_params *tp)
{
    if (!tp || tp->n_nodes != fx->n_hosts)
        return EINVAL;
    struct topology *t = topo_create(fx->sim, tp, fx->pool);
    if (!t)
        return EINVAL;
    topo_destroy(fx->topo);
    fx->topo = t;
    for (unsigned i = 0; i < fx->n_hosts; i++) {
        topo_attach(t, i, (struct fabric_sink){fx_ingress, &fx->port[i]});
        nic_attach_uplink(fx->nic[i], topo_uplink(t, i));
    }
    return 0;
}

/* ---------------------------------------------------------------- memory watcher */

static void watch_main(void *arg)
{
    struct fx_watch *w = arg;
    struct host *h = &w->fx->hosts[w->host];
    w->fn(w->arg);
    w->calls++;
    while (!w->stop) {
        sim_waitq_wait(&h->relax_wq, "fx_watch: waiting for a DMA write or CQE");
        w->fn(w->arg);
        w->calls++;
    }
    w->done = true;
}

void fx_watch_start(struct fx *fx, struct fx_watch *w, unsigned h, fx_watch_fn fn, void *arg)
{
    memset(w, 0, sizeof(*w));
    w->fx = fx;
    w->host = h;
    w->fn = fn;
    w->arg = arg;
    fx_spawn(fx, h, "fx_watch", watch_main, w);
}

void fx_watch_stop(struct fx_watch *w)
{
    w->stop = true;
    struct host *h = &w->fx->hosts[w->host];
    if (!sim_waitq_empty(&h->relax_wq))
        sim_waitq_wake_all(w->fx->sim, &h->relax_wq);
}

struct nic_cq *fx_nic_cq(struct ibv_cq *cq)
{
    return shim_cq(cq)->ncq;
}
