/* The built-in traffic generator (traffic.h): workloads posted straight
 * into the NIC model, completions taken from CQ notification callbacks.
 *
 *   arrivals (start event, or one Poisson event per host)
 *     -> flow_launch: a connection of the host pair (an idle one, or a new
 *        RC QP pair, connected at once: connection set-up is not modelled)
 *     -> post_more: WRITEs of at most message_bytes, at most `depth`
 *        outstanding, one doorbell per batch (nic_sq_append, nic_sq_doorbell)
 *     -> the NIC: doorbell MMIO, WQE fetch, payload DMA, packets, fabric,
 *        responder placement, ACKs, CQE DMA write
 *     -> host_cq_event (the CQ's notification; the CQ is drained and armed
 *        again at once, so it never holds more than a few CQEs)
 *     -> wc_done: more WRITEs, or flow_finish (FCT, connection idle again)
 *
 * Memory.  Each host has one PD, one CQ (depth 64) and one MR.  With
 * payloads carried the MR covers a buffer of the largest flow size that
 * every flow of the host reads from and writes into (contents are not
 * checked unless `verify`); with `payload: none` it covers a range of
 * addresses that nothing dereferences, so no buffer exists at all.  With
 * `verify`, each connection gets its own destination region at the
 * receiver (its own MR), the sources hold a pattern of their host, and a
 * finished flow's bytes are compared with it.
 *
 * Randomness: one stream per purpose and host ("traffic.pattern",
 * "traffic.h<i>"), so a seed gives the same flows whatever else changes. */
#include "traffic.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "../nic/opcode.h"

const char *const traffic_pattern_names[] = {"permutation", "incast", "all-to-all", "poisson",
                                             NULL};
const uint64_t traffic_bucket_max_bytes[TRAFFIC_BUCKETS] = {10000, 100000, 1000000, 10000000,
                                                            UINT64_MAX};

enum {
    TG_CQ_DEPTH = 64,          /* drained at every CQE */
    TG_MAX_MESSAGE = 1u << 30, /* NIC_MAX_MSG_BYTES */
    TG_POLL_BATCH = 16,
};
#define TG_NO_FLOW UINT64_MAX
/* `payload: none`: MRs cover addresses from here on, never dereferenced
 * (every copy is skipped by the NIC, pkt.h) */
#define TG_FAKE_BASE ((uint64_t)1 << 44)
#define TG_FAKE_STRIDE ((uint64_t)1 << 31)

struct tg_conn {
    struct tg_conn *next_idle;
    uint32_t src, dst;
    struct nic_qp *sqp, *dqp; /* sender's and receiver's QP */
    uint64_t flow;            /* TG_NO_FLOW when idle */
    uint64_t posted;          /* bytes of the flow posted */
    uint32_t outstanding;     /* WRITEs in flight */
    uint8_t *region;          /* verify: this connection's destination region */
    struct nic_mr *region_mr;
};

/* Host pair (src, dst) -> its idle connections (open addressing). */
struct tg_pair {
    uint64_t key; /* src * n + dst + 1; 0 = empty slot */
    struct tg_conn *idle;
};

struct tg_host {
    struct traffic *t;
    uint32_t id;
    struct nic *nic;
    struct nic_pd *pd;
    struct nic_mr *mr;
    struct nic_cq *cq;
    uint8_t *buf;  /* payloads carried: the host's buffer */
    uint64_t base; /* address of byte 0 of the MR */
    struct sim_rng rng;
    struct sim_event arrive_ev; /* poisson */
    bool arriving;
};

struct traffic {
    struct sim *sim;
    struct traffic_params p;
    struct topology *topo;
    uint32_t n;
    struct tg_host *hosts;
    bool payload;
    uint64_t max_size, buf_bytes;
    struct sim_rng rng; /* pattern choices */

    struct traffic_flow *flows;
    size_t n_flows, cap_flows;
    uint64_t unfinished;
    uint32_t hosts_arriving;
    bool arrivals_done, started;
    double mean_gap_ps; /* poisson: mean time between a host's arrivals */

    struct tg_pair *pairs;
    size_t pair_cap, n_pairs;
    struct tg_conn **conns;
    size_t n_conns, cap_conns;

    uint64_t verified, verify_bad;
    struct sim_event start_ev;
    sim_cb_fn done_fn;
    void *done_a, *done_b;
    bool done_called;
};

static void *tg_alloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) {
        fprintf(stderr, "rnicsim: traffic generator: out of memory\n");
        abort();
    }
    return p;
}

static void *tg_realloc(void *p, size_t bytes)
{
    void *np = realloc(p, bytes);
    if (!np) {
        fprintf(stderr, "rnicsim: traffic generator: out of memory\n");
        abort();
    }
    return np;
}

void traffic_params_default(struct traffic_params *p)
{
    memset(p, 0, sizeof(*p));
    p->pattern = TRAFFIC_PERMUTATION;
    p->sizes = FLOWSIZE_FIXED;
    p->size_bytes = 1u << 20;
    p->qps_per_host = 1;
    p->senders = 16;
    p->receiver = 0;
    p->load = 0.3;
    p->message_bytes = 0; /* = the flow, up to 1 GiB */
    p->depth = 1;
    p->mtu_bytes = 4096;
    /* perftest's default local ACK timeout exponent (CALIBRATION.md,
     * Transports: t = 14, ~67 ms) */
    p->ack_timeout = 14;
    p->traffic_class = 3; /* RoCE's usual lossless priority (DSCP 26) */
}

static int fail(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *why, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
    return -1;
}

static int check_params(const struct traffic_params *p, uint32_t n, bool payload, char *why,
                        size_t len)
{
    if ((unsigned)p->pattern >= TRAFFIC_PATTERN_COUNT || (unsigned)p->sizes >= FLOWSIZE_DIST_COUNT)
        return fail(why, len, "unknown pattern or size distribution");
    if (n < 2)
        return fail(why, len, "the traffic generator needs at least 2 hosts");
    if (p->sizes == FLOWSIZE_FIXED && p->size_bytes == 0)
        return fail(why, len, "flow size must be at least 1 byte");
    if (p->qps_per_host == 0)
        return fail(why, len, "qps_per_host must be at least 1");
    if (p->depth == 0)
        return fail(why, len, "depth must be at least 1");
    if (p->message_bytes > TG_MAX_MESSAGE)
        return fail(why, len, "message size above 1 GiB (the NIC's max_msg_sz)");
    if (p->mtu_bytes < 256 || p->mtu_bytes > 4096 || (p->mtu_bytes & (p->mtu_bytes - 1)))
        return fail(why, len, "mtu must be 256, 512, 1024, 2048 or 4096");
    if (p->ack_timeout > 31)
        return fail(why, len, "ack timeout exponent above 31");
    if (p->pattern == TRAFFIC_INCAST && (p->receiver >= n || p->senders == 0 || p->senders > n - 1))
        return fail(why, len, "incast: receiver must be a host and senders 1..%u", n - 1);
    if (p->pattern == TRAFFIC_POISSON) {
        if (!(p->load > 0.0 && p->load <= 1.0))
            return fail(why, len, "poisson: load must be in (0, 1]");
        if (p->max_flows == 0 && p->duration_ps == 0)
            return fail(why, len, "poisson: give a duration or a number of flows");
    }
    if (p->verify && !payload)
        return fail(why, len,
                    "the data check (verify) needs payload bytes, and the run has payload: none");
    if (p->window_to_ps && p->window_to_ps <= p->window_from_ps)
        return fail(why, len, "fairness window: 'to' must be later than 'from'");
    return 0;
}

/* ---------------------------------------------------------------- set-up */

static void host_cq_event(struct sim *sim, void *a, void *b);
static void poisson_arrive(struct sim *sim, struct sim_event *ev);

/* Byte k of host h's source buffer when verifying. */
static uint8_t pattern_byte(uint32_t h, uint64_t k)
{
    return (uint8_t)(k * 131u + h * 7u + 1u + (k >> 12));
}

static int tg_host_init(struct traffic *t, struct tg_host *h, uint32_t id, struct nic *nic,
                        char *why, size_t len)
{
    h->t = t;
    h->id = id;
    h->nic = nic;
    h->pd = nic_pd_alloc(nic);
    h->cq = h->pd ? nic_cq_create(nic, TG_CQ_DEPTH) : NULL;
    if (!h->pd || !h->cq)
        return fail(why, len, "h%u: cannot create a PD and CQ: %s", id, strerror(errno));
    int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    if (t->payload) {
        h->buf = tg_alloc(1, t->buf_bytes);
        if (t->p.verify)
            for (uint64_t k = 0; k < t->buf_bytes; k++)
                h->buf[k] = pattern_byte(id, k);
        h->base = (uint64_t)(uintptr_t)h->buf;
        h->mr = nic_mr_reg(h->pd, h->buf, t->buf_bytes, h->base, access);
    } else {
        h->base = TG_FAKE_BASE + (uint64_t)id * TG_FAKE_STRIDE;
        h->mr = nic_mr_reg(h->pd, (void *)(uintptr_t)h->base, t->buf_bytes, h->base, access);
    }
    if (!h->mr)
        return fail(why, len, "h%u: cannot register the buffer: %s", id, strerror(errno));
    nic_cq_set_notify(h->cq, host_cq_event, h, NULL);
    nic_cq_arm(h->cq, false);
    char name[32];
    snprintf(name, sizeof(name), "traffic.h%u", id);
    sim_rng_stream(t->sim, &h->rng, name);
    sim_event_init(&h->arrive_ev, poisson_arrive, h, "traffic.arrive");
    return 0;
}

static void start_ev_fn(struct sim *sim, struct sim_event *ev);

struct traffic *traffic_create(struct sim *sim, struct nic *const *nics, uint32_t n_hosts,
                               struct topology *topo, const struct traffic_params *p, char *why,
                               size_t why_len)
{
    if (!sim || !nics || !p) {
        fail(why, why_len, "traffic generator: nothing to run on");
        return NULL;
    }
    bool payload = n_hosts ? nic_payload_carried(nics[0]) : true;
    if (check_params(p, n_hosts, payload, why, why_len))
        return NULL;
    struct traffic *t = tg_alloc(1, sizeof(*t));
    t->sim = sim;
    t->p = *p;
    t->topo = topo;
    t->n = n_hosts;
    t->payload = payload;
    t->max_size = flowsize_max(p->sizes, p->size_bytes);
    if (t->p.message_bytes == 0)
        t->p.message_bytes = t->max_size < TG_MAX_MESSAGE ? t->max_size : TG_MAX_MESSAGE;
    t->buf_bytes = t->max_size;
    sim_rng_stream(sim, &t->rng, "traffic.pattern");
    sim_event_init(&t->start_ev, start_ev_fn, t, "traffic.start");
    if (p->pattern == TRAFFIC_POISSON) {
        uint64_t rate = link_get_params(topo_uplink(topo, 0))->rate_bps;
        double mean = flowsize_mean(p->sizes, p->size_bytes);
        /* HPCC's traffic_gen.py: per host, mean inter-arrival =
         * mean flow size / (load x host link rate) */
        t->mean_gap_ps = mean * 8.0 * 1e12 / (p->load * (double)rate);
    }
    t->hosts = tg_alloc(n_hosts, sizeof(*t->hosts));
    for (uint32_t i = 0; i < n_hosts; i++)
        if (tg_host_init(t, &t->hosts[i], i, nics[i], why, why_len)) {
            traffic_destroy(t);
            return NULL;
        }
    return t;
}

void traffic_destroy(struct traffic *t)
{
    if (!t)
        return;
    sim_cancel(t->sim, &t->start_ev);
    for (uint32_t i = 0; t->hosts && i < t->n; i++) {
        sim_cancel(t->sim, &t->hosts[i].arrive_ev);
        if (t->hosts[i].cq)
            nic_cq_set_notify(t->hosts[i].cq, NULL, NULL, NULL);
        free(t->hosts[i].buf);
    }
    for (size_t i = 0; i < t->n_conns; i++) {
        free(t->conns[i]->region);
        free(t->conns[i]);
    }
    free(t->conns);
    free(t->pairs);
    free(t->flows);
    free(t->hosts);
    free(t);
}

/* ---------------------------------------------------------------- connections */

static struct tg_pair *pair_of(struct traffic *t, uint32_t src, uint32_t dst)
{
    uint64_t key = (uint64_t)src * t->n + dst + 1;
    if (2 * (t->n_pairs + 1) > t->pair_cap) {
        size_t cap = t->pair_cap ? 2 * t->pair_cap : 64;
        struct tg_pair *np = tg_alloc(cap, sizeof(*np));
        for (size_t i = 0; i < t->pair_cap; i++) {
            if (!t->pairs[i].key)
                continue;
            size_t j = (size_t)(t->pairs[i].key * 0x9e3779b97f4a7c15ull >> 20) & (cap - 1);
            while (np[j].key)
                j = (j + 1) & (cap - 1);
            np[j] = t->pairs[i];
        }
        free(t->pairs);
        t->pairs = np;
        t->pair_cap = cap;
    }
    size_t j = (size_t)(key * 0x9e3779b97f4a7c15ull >> 20) & (t->pair_cap - 1);
    while (t->pairs[j].key && t->pairs[j].key != key)
        j = (j + 1) & (t->pair_cap - 1);
    if (!t->pairs[j].key) {
        t->pairs[j].key = key;
        t->n_pairs++;
    }
    return &t->pairs[j];
}

/* RESET -> INIT -> RTR -> RTS towards (remote node, remote QPN), with the
 * attributes a connection manager would set (the shim's checks are not
 * needed: the values are valid by construction). */
static int qp_connect(struct traffic *t, struct nic_qp *qp, uint32_t remote_node,
                      uint32_t remote_qpn)
{
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    if (nic_qp_modify(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
        return -1;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = (enum ibv_mtu)(IBV_MTU_256 + __builtin_ctz(t->p.mtu_bytes / 256));
    a.dest_qp_num = remote_qpn;
    a.rq_psn = 0;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.is_global = 1;
    a.ah_attr.port_num = 1;
    a.ah_attr.grh.hop_limit = 64;
    a.ah_attr.grh.traffic_class = (uint8_t)(t->p.traffic_class << 5); /* DSCP class selector */
    a.ah_attr.sl = t->p.traffic_class; /* on InfiniBand the priority is the SL's VL */
    nic_gid_of_node(remote_node, &a.ah_attr.grh.dgid);
    if (nic_qp_modify(qp, &a,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
        return -1;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = 0;
    a.timeout = t->p.ack_timeout;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    return nic_qp_modify(qp, &a,
                         IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                             IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC)
               ? -1
               : 0;
}

static struct nic_qp *make_qp(struct tg_host *h, uint32_t send_wr)
{
    struct nic_qp_init init;
    memset(&init, 0, sizeof(init));
    init.qp_type = IBV_QPT_RC;
    init.pd = h->pd;
    init.send_cq = h->cq;
    init.recv_cq = h->cq;
    init.cap.max_send_wr = send_wr;
    init.cap.max_recv_wr = 1;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    return nic_qp_create(h->nic, &init);
}

static struct tg_conn *conn_new(struct traffic *t, uint32_t src, uint32_t dst)
{
    struct tg_host *hs = &t->hosts[src], *hd = &t->hosts[dst];
    struct tg_conn *c = tg_alloc(1, sizeof(*c));
    c->src = src;
    c->dst = dst;
    c->flow = TG_NO_FLOW;
    c->sqp = make_qp(hs, t->p.depth);
    c->dqp = make_qp(hd, 1);
    if (!c->sqp || !c->dqp || qp_connect(t, c->sqp, dst, c->dqp->qpn) ||
        qp_connect(t, c->dqp, src, c->sqp->qpn)) {
        fprintf(stderr, "rnicsim: traffic generator: cannot create a QP pair h%u -> h%u: %s\n", src,
                dst, strerror(errno));
        abort();
    }
    if (t->p.verify) {
        c->region = tg_alloc(1, t->buf_bytes);
        c->region_mr = nic_mr_reg(hd->pd, c->region, t->buf_bytes, (uint64_t)(uintptr_t)c->region,
                                  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
        if (!c->region_mr) {
            fprintf(stderr, "rnicsim: traffic generator: cannot register a region at h%u\n", dst);
            abort();
        }
    }
    if (t->n_conns == t->cap_conns) {
        t->cap_conns = t->cap_conns ? 2 * t->cap_conns : 64;
        t->conns = tg_realloc(t->conns, t->cap_conns * sizeof(*t->conns));
    }
    t->conns[t->n_conns++] = c;
    return c;
}

/* ---------------------------------------------------------------- flows */

/* What the flow would take alone: its wire bytes at the bottleneck rate,
 * plus the one-way time of its last packet over the path and the ACK's way
 * back (store and forward at every hop, cable delays, switch latencies). */
static sim_time_t ideal_fct(const struct traffic *t, uint32_t src, uint32_t dst, uint64_t size)
{
    /* the source NIC's framing (the generator's QPs address by GID) */
    enum pkt_framing f = nic_framing(t->hosts[src].nic, true);
    uint32_t gap = pkt_framings[f].gap_bytes;
    uint32_t mtu = t->p.mtu_bytes;
    uint64_t msg = t->p.message_bytes;
    uint64_t wire = 0, last = 0;
    for (uint64_t off = 0; off < size; off += msg) {
        uint64_t m = size - off < msg ? size - off : msg;
        uint64_t np = (m + mtu - 1) / mtu;
        for (uint64_t k = 0; k < np; k++) {
            uint32_t len = (uint32_t)(k + 1 < np ? mtu : m - k * mtu);
            uint8_t op = np == 1       ? IB_OPCODE_RC_RDMA_WRITE_ONLY
                         : k == 0      ? IB_OPCODE_RC_RDMA_WRITE_FIRST
                         : k + 1 == np ? IB_OPCODE_RC_RDMA_WRITE_LAST
                                       : IB_OPCODE_RC_RDMA_WRITE_MIDDLE;
            last = nic_frame_bytes(f, op, len) + gap;
            wire += last;
            if (k > 4 && k + 2 < np) { /* the middle packets are all alike */
                uint64_t mid = np - 2 - k;
                wire += mid * (nic_frame_bytes(f, IB_OPCODE_RC_RDMA_WRITE_MIDDLE, mtu) + gap);
                k += mid;
            }
        }
    }
    struct topo_path_info go, back;
    if (topo_path(t->topo, src, dst, (uint32_t)last, &go) ||
        topo_path(t->topo, dst, src, nic_frame_bytes(f, IB_OPCODE_RC_ACKNOWLEDGE, 0) + gap, &back))
        return 0;
    uint64_t before_last = wire - last;
    return sim_bytes_to_ps(before_last, go.min_rate_bps) + go.one_way_ps + back.one_way_ps;
}

static void check_done(struct traffic *t)
{
    if (t->arrivals_done && t->unfinished == 0 && !t->done_called) {
        t->done_called = true;
        if (t->done_fn)
            t->done_fn(t->sim, t->done_a, t->done_b);
    }
}

static void post_more(struct traffic *t, struct tg_conn *c)
{
    struct traffic_flow *f = &t->flows[c->flow];
    struct tg_host *hs = &t->hosts[c->src], *hd = &t->hosts[c->dst];
    bool rung = false;
    while (c->outstanding < t->p.depth && c->posted < f->size) {
        uint64_t len = f->size - c->posted;
        if (len > t->p.message_bytes)
            len = t->p.message_bytes;
        struct nic_send_wqe w;
        memset(&w, 0, offsetof(struct nic_send_wqe, inline_data));
        w.wr_id = (uint64_t)(uintptr_t)c;
        w.opcode = IBV_WR_RDMA_WRITE;
        w.num_sge = 1;
        w.sge[0].addr = hs->base + c->posted;
        w.sge[0].length = (uint32_t)len;
        w.sge[0].lkey = hs->mr->lkey;
        w.length = (uint32_t)len;
        if (c->region) {
            w.remote_addr = (uint64_t)(uintptr_t)c->region + c->posted;
            w.rkey = c->region_mr->rkey;
        } else {
            w.remote_addr = hd->base + c->posted;
            w.rkey = hd->mr->rkey;
        }
        w.signaled = true;
        if (nic_sq_append(c->sqp, &w))
            break; /* cannot happen: the SQ holds `depth` WRs */
        c->posted += len;
        c->outstanding++;
        rung = true;
    }
    if (rung)
        nic_sq_doorbell(c->sqp);
}

static void flow_launch(struct traffic *t, uint32_t src, uint32_t dst, uint64_t size)
{
    if (t->n_flows == t->cap_flows) {
        t->cap_flows = t->cap_flows ? 2 * t->cap_flows : 1024;
        t->flows = tg_realloc(t->flows, t->cap_flows * sizeof(*t->flows));
    }
    uint64_t id = t->n_flows++;
    struct traffic_flow *f = &t->flows[id];
    memset(f, 0, sizeof(*f));
    f->src = src;
    f->dst = dst;
    f->size = size;
    f->start_ps = sim_now(t->sim);
    f->ideal_ps = ideal_fct(t, src, dst, size);
    t->unfinished++;
    struct tg_pair *pr = pair_of(t, src, dst);
    struct tg_conn *c = pr->idle;
    if (c)
        pr->idle = c->next_idle;
    else
        c = conn_new(t, src, dst);
    c->next_idle = NULL;
    c->flow = id;
    c->posted = 0;
    c->outstanding = 0;
    post_more(t, c);
}

/* A transfer of `size` from src to dst, split over qps_per_host flows. */
static void transfer(struct traffic *t, uint32_t src, uint32_t dst, uint64_t size)
{
    uint32_t q = t->p.qps_per_host;
    uint64_t part = size / q, rest = size % q;
    for (uint32_t k = 0; k < q; k++) {
        uint64_t s = part + (k < rest ? 1 : 0);
        if (s)
            flow_launch(t, src, dst, s);
    }
}

static void verify_flow(struct traffic *t, const struct tg_conn *c, const struct traffic_flow *f)
{
    t->verified++;
    for (uint64_t k = 0; k < f->size; k++)
        if (c->region[k] != pattern_byte(f->src, k)) {
            t->verify_bad++;
            return;
        }
}

static void flow_finish(struct traffic *t, struct tg_conn *c)
{
    struct traffic_flow *f = &t->flows[c->flow];
    f->end_ps = sim_now(t->sim);
    t->unfinished--;
    if (c->region && !f->failed)
        verify_flow(t, c, f);
    c->flow = TG_NO_FLOW;
    if (!f->failed) { /* a QP in error is not used again */
        struct tg_pair *pr = pair_of(t, c->src, c->dst);
        c->next_idle = pr->idle;
        pr->idle = c;
    }
    check_done(t);
}

static void wc_done(struct traffic *t, const struct ibv_wc *wc)
{
    struct tg_conn *c = (struct tg_conn *)(uintptr_t)wc->wr_id;
    if (c->flow == TG_NO_FLOW)
        return; /* a flushed WR of a failed flow */
    struct traffic_flow *f = &t->flows[c->flow];
    uint64_t len = f->size - f->done_bytes;
    if (len > t->p.message_bytes)
        len = t->p.message_bytes;
    c->outstanding--;
    if (wc->status != IBV_WC_SUCCESS) {
        f->failed = true;
        flow_finish(t, c);
        return;
    }
    f->done_bytes += len;
    sim_time_t now = sim_now(t->sim);
    if (t->p.window_to_ps && now >= t->p.window_from_ps && now < t->p.window_to_ps)
        f->window_bytes += len;
    if (f->done_bytes == f->size)
        flow_finish(t, c);
    else
        post_more(t, c);
}

static void host_cq_event(struct sim *sim, void *a, void *b)
{
    (void)sim;
    (void)b;
    struct tg_host *h = a;
    struct ibv_wc wc[TG_POLL_BATCH];
    int n;
    while ((n = nic_cq_poll(h->cq, TG_POLL_BATCH, wc)) > 0)
        for (int i = 0; i < n; i++)
            wc_done(h->t, &wc[i]);
    nic_cq_arm(h->cq, false);
}

/* ---------------------------------------------------------------- patterns */

/* A random permutation without fixed points: shuffle, then swap each fixed
 * point with its neighbour (what htsim's gen_permutation.py does). */
static void derangement(struct traffic *t, uint32_t *dst)
{
    uint32_t n = t->n;
    for (uint32_t i = 0; i < n; i++)
        dst[i] = i;
    for (uint32_t i = n - 1; i > 0; i--) {
        uint32_t j = (uint32_t)sim_rng_below(&t->rng, (uint64_t)i + 1);
        uint32_t tmp = dst[i];
        dst[i] = dst[j];
        dst[j] = tmp;
    }
    for (uint32_t i = 0; i < n; i++)
        if (dst[i] == i) {
            uint32_t k = (i + 1) % n;
            uint32_t tmp = dst[i];
            dst[i] = dst[k];
            dst[k] = tmp;
        }
}

static void start_ev_fn(struct sim *sim, struct sim_event *ev)
{
    (void)sim;
    struct traffic *t = ev->ctx;
    uint32_t n = t->n;
    switch (t->p.pattern) {
    case TRAFFIC_PERMUTATION: {
        uint32_t *dst = tg_alloc(n, sizeof(*dst));
        derangement(t, dst);
        for (uint32_t i = 0; i < n; i++)
            transfer(t, i, dst[i], t->p.size_bytes);
        free(dst);
        break;
    }
    case TRAFFIC_INCAST: {
        uint32_t *others = tg_alloc(n, sizeof(*others));
        uint32_t k = 0;
        for (uint32_t i = 0; i < n; i++)
            if (i != t->p.receiver)
                others[k++] = i;
        for (uint32_t i = 0; i < t->p.senders; i++) { /* a random choice of senders */
            uint32_t j = i + (uint32_t)sim_rng_below(&t->rng, k - i);
            uint32_t tmp = others[i];
            others[i] = others[j];
            others[j] = tmp;
            transfer(t, others[i], t->p.receiver, t->p.size_bytes);
        }
        free(others);
        break;
    }
    case TRAFFIC_ALL_TO_ALL:
        for (uint32_t i = 0; i < n; i++)
            for (uint32_t j = 1; j < n; j++)
                transfer(t, i, (i + j) % n, t->p.size_bytes);
        break;
    case TRAFFIC_POISSON:
    case TRAFFIC_PATTERN_COUNT:
        break;
    }
    t->arrivals_done = true;
    check_done(t);
}

static sim_time_t exp_gap(struct traffic *t, struct tg_host *h)
{
    double u = sim_rng_uniform(&h->rng);
    double g = -log(1.0 - u) * t->mean_gap_ps;
    return g < 1e18 ? (sim_time_t)g : (sim_time_t)1e18;
}

static void host_stop_arrivals(struct traffic *t, struct tg_host *h)
{
    if (!h->arriving)
        return;
    h->arriving = false;
    sim_cancel(t->sim, &h->arrive_ev);
    if (--t->hosts_arriving == 0) {
        t->arrivals_done = true;
        check_done(t);
    }
}

static void poisson_arrive(struct sim *sim, struct sim_event *ev)
{
    struct tg_host *h = ev->ctx;
    struct traffic *t = h->t;
    sim_time_t now = sim_now(sim);
    if ((t->p.duration_ps && now >= t->p.start_ps + t->p.duration_ps) ||
        (t->p.max_flows && t->n_flows >= t->p.max_flows)) {
        if (t->p.max_flows && t->n_flows >= t->p.max_flows)
            for (uint32_t i = 0; i < t->n; i++)
                host_stop_arrivals(t, &t->hosts[i]);
        host_stop_arrivals(t, h);
        return;
    }
    uint32_t dst = (uint32_t)sim_rng_below(&h->rng, t->n - 1);
    if (dst >= h->id)
        dst++;
    uint64_t size = flowsize_sample(t->p.sizes, t->p.size_bytes, &h->rng);
    sim_schedule_in(sim, &h->arrive_ev, exp_gap(t, h));
    flow_launch(t, h->id, dst, size);
}

void traffic_start(struct traffic *t, sim_cb_fn done_fn, void *a, void *b)
{
    if (t->started)
        return;
    t->started = true;
    t->done_fn = done_fn;
    t->done_a = a;
    t->done_b = b;
    if (t->p.pattern != TRAFFIC_POISSON) {
        sim_schedule_at(t->sim, &t->start_ev, t->p.start_ps);
        return;
    }
    for (uint32_t i = 0; i < t->n; i++) {
        struct tg_host *h = &t->hosts[i];
        h->arriving = true;
        t->hosts_arriving++;
        sim_schedule_at(t->sim, &h->arrive_ev, t->p.start_ps + exp_gap(t, h));
    }
}

/* ---------------------------------------------------------------- results */

const struct traffic_flow *traffic_flows(const struct traffic *t, size_t *n)
{
    *n = t->n_flows;
    return t->flows;
}

uint64_t traffic_unfinished(const struct traffic *t)
{
    return t->unfinished;
}

uint64_t traffic_qps(const struct traffic *t)
{
    return 2 * (uint64_t)t->n_conns;
}

const struct traffic_params *traffic_get_params(const struct traffic *t)
{
    return &t->p;
}

void traffic_verify_counts(const struct traffic *t, uint64_t *checked, uint64_t *bad)
{
    *checked = t->verified;
    *bad = t->verify_bad;
}

/* Slowdowns go into the exact histograms as thousandths. */
#define SLOW_SCALE 1000.0

void traffic_stats(const struct traffic *t, struct traffic_stats *s)
{
    memset(s, 0, sizeof(*s));
    struct sim_hist fct[TRAFFIC_BUCKETS + 1], slow[TRAFFIC_BUCKETS + 1];
    double slow_sum[TRAFFIC_BUCKETS + 1] = {0};
    for (int b = 0; b <= TRAFFIC_BUCKETS; b++) {
        sim_hist_init(&fct[b]);
        sim_hist_init(&slow[b]);
    }
    double sx = 0, sxx = 0;
    uint64_t nj = 0;
    for (size_t i = 0; i < t->n_flows; i++) {
        const struct traffic_flow *f = &t->flows[i];
        s->flows++;
        if (t->p.window_to_ps && f->start_ps < t->p.window_to_ps) {
            double x = (double)f->window_bytes;
            sx += x;
            sxx += x * x;
            nj++;
        }
        if (!f->end_ps) {
            s->unfinished++;
            continue;
        }
        if (f->failed) {
            s->failed++;
            continue;
        }
        if (f->end_ps > s->last_end_ps)
            s->last_end_ps = f->end_ps;
        int b = 0;
        while (b < TRAFFIC_BUCKETS - 1 && f->size > traffic_bucket_max_bytes[b])
            b++;
        sim_time_t d = f->end_ps - f->start_ps;
        double sl = f->ideal_ps ? (double)d / (double)f->ideal_ps : 0.0;
        for (int k = 0; k < 2; k++) {
            int bb = k ? TRAFFIC_BUCKETS : b;
            sim_hist_add(&fct[bb], d);
            sim_hist_add(&slow[bb], (uint64_t)llround(sl * SLOW_SCALE));
            slow_sum[bb] += sl;
        }
    }
    for (int b = 0; b <= TRAFFIC_BUCKETS; b++) {
        size_t n = sim_hist_count(&fct[b]);
        s->bucket[b].flows = n;
        if (n) {
            s->bucket[b].fct_p50_ps = sim_hist_percentile(&fct[b], 50);
            s->bucket[b].fct_p95_ps = sim_hist_percentile(&fct[b], 95);
            s->bucket[b].fct_p99_ps = sim_hist_percentile(&fct[b], 99);
            s->bucket[b].fct_max_ps = sim_hist_percentile(&fct[b], 100);
            s->bucket[b].slow_p50 = (double)sim_hist_percentile(&slow[b], 50) / SLOW_SCALE;
            s->bucket[b].slow_p95 = (double)sim_hist_percentile(&slow[b], 95) / SLOW_SCALE;
            s->bucket[b].slow_p99 = (double)sim_hist_percentile(&slow[b], 99) / SLOW_SCALE;
            s->bucket[b].slow_mean = slow_sum[b] / (double)n;
        }
        sim_hist_free(&fct[b]);
        sim_hist_free(&slow[b]);
    }
    /* Jain's fairness index (Jain, Chiu & Hawe, DEC-TR-301, 1984) */
    s->jain = nj && sxx > 0 ? sx * sx / ((double)nj * sxx) : 0.0;
}

int traffic_write_flows_csv(const struct traffic *t, FILE *f)
{
    fprintf(f, "src,dst,size_bytes,start_ns,fct_ns,ideal_ns,slowdown,status\n");
    for (size_t i = 0; i < t->n_flows; i++) {
        const struct traffic_flow *fl = &t->flows[i];
        const char *st = fl->failed ? "failed" : fl->end_ps ? "done" : "unfinished";
        double fct = fl->end_ps ? (double)(fl->end_ps - fl->start_ps) / 1000.0 : 0.0;
        double sl = fl->end_ps && fl->ideal_ps
                        ? (double)(fl->end_ps - fl->start_ps) / (double)fl->ideal_ps
                        : 0.0;
        fprintf(f, "%u,%u,%llu,%.3f,%.3f,%.3f,%.4f,%s\n", fl->src, fl->dst,
                (unsigned long long)fl->size, (double)fl->start_ps / 1000.0, fct,
                (double)fl->ideal_ps / 1000.0, sl, st);
    }
    return ferror(f) ? -1 : 0;
}
