/* zs_pu: a processing unit of a zero-sided flow (Jasny et al. 3.2): it
 * sets its rings up once (memory, two RC QPs per ring connected to the
 * switch, table of its rings given to the switch out of band), and then
 * only pushes items into its ring(s) or pops them -- local loads and
 * stores; it posts no verbs on the data path (doorbell mode: one 4-byte
 * WRITE per pointer update, for PUs that can).
 *
 *   zs_pu --flow=NAME --role=producer|consumer|worker|echo-client|echo-server --index=I
 *         --mode=pairs|shuffle|lb|replicate [--producers=N] [--consumers=M]
 *         --item=SIZE (--capacity=ITEMS | --ring=BYTES) [--items=COUNT | --bytes=SIZE]
 *         [--kind=cpu|gpu|fpga] [--rate=RATE] [--mtu=BYTES] [--doorbell] [--series=TIME]
 *         [--start=TIME] [--echo-rate=ITEMS_PER_S] [--chunk=ITEMS] [--rings=K]
 *         [--exclude=FIRST:COUNT] [--active-below=K] [--qos]
 *
 * --rings=K runs K PUs of the same role, indices I .. I+K-1, as threads of
 * one program (several kernels of one GPU, several CPU cores).  --exclude
 * (shuffle producers): consumers FIRST .. FIRST+COUNT-1 get no items (the
 * producer's own node, when only remote traffic is wanted).
 *
 * Producer I writes --items items (shuffle: item k goes to consumer
 * zs_key_dest(I, k, M), a uniform key-based partitioning; one ring per
 * consumer); a
 * consumer checks every item (right producer and destination, pattern,
 * per-producer sequence: consecutive for pairs / shuffle / replicate,
 * increasing for load balancing) and at the end compares what it got with
 * what the producers published (replicate: also the global order, one hash
 * over the whole sequence, equal at every consumer; load balancing:
 * consumer 0 checks that the consumers together got every item once).
 * --rate is the PU's production / consumption rate (e.g. 80Gbps, 25GBps;
 * default: a CPU copies at the host's memcpy rate, a GPU or FPGA is not
 * the limit).  echo-client pushes items at --echo-rate into its ring (the
 * producer of pair I) and measures the time until the echo-server (the
 * other node) has pushed each one back (ring I+1): half of it is the
 * one-way latency (Fig. 10).
 *
 * Results: table zs_consumer (bytes, items, first / last item time), zs_src
 * (per producer), zs_series (with --series: cumulative bytes over time),
 * zs_producer, zs_latency (echo), order_check / order_violation (the
 * contract of `rnicsim check-order`). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocols/common/pages.h"
#include "protocols/common/rc_conn.h"
#include "protocols/zerosided/zs.h"
#include "protocols/zerosided/zs_pu_mem.h"
#include "protocols/zerosided/zs_switch.h"
#include "protocols/zerosided/zs_verbs.h"
#include "rnicsim/host.h"

#define PROG "zs_pu"
#define MAX_RINGS 64

enum role { R_PRODUCER, R_CONSUMER, R_ECHO_CLIENT, R_ECHO_SERVER, R_WORKER };

struct ring {
    char key[128];
    uint8_t *mem;
    size_t bytes;
    struct ibv_mr *mr;
    struct ibv_qp *dqp, *cqp;
    struct ibv_qp *lqp[ZS_MAX_LANES]; /* lanes 1.. (the switch asked for them) */
    uint32_t item, cap;
    volatile uint8_t *hdr;
    uint32_t ptr;        /* producer: head (published); consumer: tail */
    uint32_t db_sent;    /* doorbell: the value last posted */
    bool db_busy;        /* a doorbell WRITE is in flight */
    uint64_t seq;        /* producer: next sequence number of this ring's stream */
    uint64_t hash;       /* producer: sum of the keys written */
    uint32_t ctl_sq_psn; /* first PSN of the doorbell WRITEs */
};

struct src_stat {
    uint64_t items, bytes, hash;
    uint64_t next_seq; /* strict order: the next expected */
    bool any;
};

struct pu {
    const char *flow;
    enum role role;
    int mode;
    uint32_t index, producers, consumers;
    uint32_t item, capacity;
    uint64_t items;
    int kind;
    uint64_t rate_bps; /* bytes per second; 0 = not the limit */
    uint32_t mtu;
    bool doorbell;
    bool qos; /* --qos: apply the switch's per-flow rate schedule (zs.h) */
    uint64_t series_ns, start_ns, chunk;
    bool chunk_set, consumers_set, producers_set;
    uint64_t echo_rate;
    uint32_t instances;      /* --rings */
    uint32_t ex_first, ex_n; /* --exclude=FIRST:COUNT */
    struct zv_dev dev;
    struct ibv_cq *cq;
    struct ring rings[MAX_RINGS];
    uint32_t n_rings;
    uint32_t n_prod_rings; /* rings[0 .. n_prod_rings-1] are produced into */
    uint32_t cons_ring;    /* the consumed one */
    uint8_t *scratch;
    struct src_stat src[ZS_MAX_PRODUCERS];
    uint64_t order_hash, checked;
    bool violation;
    /* echo */
    uint64_t *echo_sent_ns;
    uint64_t echo_got;
    struct {
        uint64_t *v;
        size_t n;
    } lat; /* echo: one-way latency samples (ns) */
};

/* ---------------------------------------------------------------- options */

static int find_name(const char *s, const char *const *names)
{
    for (int i = 0; names[i]; i++)
        if (!strcmp(s, names[i]))
            return i;
    return -1;
}

static int parse_args(struct pu *u, int argc, char **argv)
{
    static const struct option opts[] = {
        {"flow", required_argument, 0, 'f'},
        {"role", required_argument, 0, 'r'},
        {"index", required_argument, 0, 'i'},
        {"mode", required_argument, 0, 'm'},
        {"producers", required_argument, 0, 'n'},
        {"consumers", required_argument, 0, 'c'},
        {"item", required_argument, 0, 's'},
        {"capacity", required_argument, 0, 'C'},
        {"items", required_argument, 0, 'k'},
        {"kind", required_argument, 0, 'K'},
        {"rate", required_argument, 0, 'R'},
        {"mtu", required_argument, 0, 'u'},
        {"doorbell", no_argument, 0, 'd'},
        {"series", required_argument, 0, 'S'},
        {"start", required_argument, 0, 't'},
        {"echo-rate", required_argument, 0, 'e'},
        {"chunk", required_argument, 0, 'h'},
        {"rings", required_argument, 0, 'N'},
        {"bytes", required_argument, 0, 'B'},
        {"ring", required_argument, 0, 'G'},
        {"exclude", required_argument, 0, 'x'},
        {"active-below", required_argument, 0, 'A'},
        {"qos", no_argument, 0, 'q'},
        {0, 0, 0, 0},
    };
    static const char *const roles[] = {"producer",    "consumer", "echo-client",
                                        "echo-server", "worker",   NULL};
    u->mode = ZS_PAIRS;
    u->item = 4096;
    u->capacity = 256;
    u->producers = u->consumers = 1;
    u->mtu = 1024;
    int role = -1, o;
    uint64_t v, bytes = 0, ring = 0;
    int64_t active_below = -1;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 'f':
            u->flow = optarg;
            break;
        case 'r':
            role = find_name(optarg, roles);
            break;
        case 'i':
            if (!rc_conn_parse_uint(optarg, 0, 1023, &v))
                goto bad;
            u->index = (uint32_t)v;
            break;
        case 'm':
            if ((u->mode = find_name(optarg, zs_mode_names)) < 0)
                goto bad;
            break;
        case 'n':
            if (!rc_conn_parse_uint(optarg, 1, ZS_MAX_PRODUCERS, &v))
                goto bad;
            u->producers = (uint32_t)v;
            u->producers_set = true;
            break;
        case 'c':
            if (!rc_conn_parse_uint(optarg, 1, MAX_RINGS, &v))
                goto bad;
            u->consumers = (uint32_t)v;
            u->consumers_set = true;
            break;
        case 's':
            if (!rc_conn_parse_uint(optarg, ZS_MIN_ITEM_BYTES, 1u << 30, &v))
                goto bad;
            u->item = (uint32_t)v;
            break;
        case 'C':
            if (!rc_conn_parse_uint(optarg, 1, 1u << 30, &v))
                goto bad;
            u->capacity = (uint32_t)v;
            break;
        case 'k':
            if (!rc_conn_parse_uint(optarg, 0, ZS_PTR_MASK, &u->items))
                goto bad;
            break;
        case 'K':
            if ((u->kind = find_name(optarg, zs_pu_kind_names)) < 0)
                goto bad;
            break;
        case 'R':
            if (!rc_conn_parse_rate(optarg, &u->rate_bps))
                goto bad;
            break;
        case 'u':
            if (!rc_conn_parse_uint(optarg, 256, 4096, &v) || (v & (v - 1)))
                goto bad;
            u->mtu = (uint32_t)v;
            break;
        case 'd':
            u->doorbell = true;
            break;
        case 'q':
            u->qos = true;
            break;
        case 'S':
            if (!rc_conn_parse_time(optarg, &u->series_ns) || !u->series_ns)
                goto bad;
            break;
        case 't':
            if (!rc_conn_parse_time(optarg, &u->start_ns))
                goto bad;
            break;
        case 'e':
            if (!rc_conn_parse_uint(optarg, 1, 1000000000, &u->echo_rate))
                goto bad;
            break;
        case 'A':
            if (!rc_conn_parse_uint(optarg, 0, 1024, &v))
                goto bad;
            active_below = (int64_t)v;
            break;
        case 'x': {
            unsigned a, b;
            if (sscanf(optarg, "%u:%u", &a, &b) != 2)
                goto bad;
            u->ex_first = a;
            u->ex_n = b;
            break;
        }
        case 'B':
            if (!rc_conn_parse_uint(optarg, 1, 1ull << 40, &bytes))
                goto bad;
            break;
        case 'G':
            if (!rc_conn_parse_uint(optarg, 1, 1u << 30, &ring))
                goto bad;
            break;
        case 'N':
            if (!rc_conn_parse_uint(optarg, 1, 64, &v))
                goto bad;
            u->instances = (uint32_t)v;
            break;
        case 'h':
            if (!rc_conn_parse_uint(optarg, 1, 1u << 20, &u->chunk))
                goto bad;
            u->chunk_set = true;
            break;
        default:
            return -1;
        }
    }
    if (!u->flow || role < 0) {
        fprintf(stderr, PROG ": --flow and --role are required\n");
        return -1;
    }
    u->role = (enum role)role;
    /* --bytes: the items that many bytes make; --ring: the capacity that fits */
    if (bytes)
        u->items = (bytes + u->item - 1) / u->item;
    if (ring)
        u->capacity = ring / u->item > 2 ? (uint32_t)(ring / u->item) : 2;
    /* --active-below=K: producers K and up produce nothing (a sweep over
     * the number of producers with one scenario) */
    if (active_below >= 0 && u->index >= (uint64_t)active_below)
        u->items = 0;
    if ((uint64_t)u->item * u->capacity > (1u << 30)) {
        fprintf(stderr, PROG ": --item x --capacity above 1 GiB\n");
        return -1;
    }
    if (u->ex_n && (u->mode != ZS_SHUFFLE || u->ex_first + u->ex_n > u->consumers ||
                    u->ex_n >= u->consumers)) {
        fprintf(stderr, PROG ": --exclude=FIRST:COUNT needs --mode=shuffle and leaves a "
                             "consumer\n");
        return -1;
    }
    if ((u->role == R_ECHO_CLIENT || u->role == R_ECHO_SERVER) &&
        (u->item < ZS_ITEM_HDR_BYTES + 24 || u->mode != ZS_PAIRS)) {
        fprintf(stderr, PROG ": echo roles need --mode=pairs and items of at least 48 B\n");
        return -1;
    }
    if (u->role == R_ECHO_CLIENT && !u->echo_rate) {
        fprintf(stderr, PROG ": echo-client needs --echo-rate\n");
        return -1;
    }
    return 0;
bad:
    fprintf(stderr, PROG ": bad option value '%s'\n", optarg);
    return -1;
}

/* ---------------------------------------------------------------- set-up */

static int open_device(struct pu *u)
{
    if (zv_open(&u->dev, PROG))
        return -1;
    if (!(u->cq = ibv_create_cq(u->dev.ctx, 256, NULL, NULL, 0))) {
        fprintf(stderr, PROG ": ibv_create_cq: %s\n", strerror(errno));
        return -1;
    }
    return 0;
}

/* One ring: memory, MR, data and control QPs, published to the switch
 * (every ring is published before any waits for the switch's answer: the
 * switch learns endpoints in its own order). */
static int ring_open(struct pu *u, struct ring *r, const char *key)
{
    snprintf(r->key, sizeof(r->key), "%s", key);
    r->item = u->item;
    r->cap = u->capacity;
    r->bytes = ZS_HDR_BYTES + (size_t)u->item * u->capacity;
    r->mem = zs_pu_mem_alloc(u->kind, r->bytes);
    if (!r->mem) {
        fprintf(stderr, PROG ": %s: cannot allocate %zu bytes of %s memory\n", key, r->bytes,
                zs_pu_kind_names[u->kind]);
        return -1;
    }
    memset(r->mem, 0, r->bytes);
    r->hdr = r->mem;
    r->mr = ibv_reg_mr(u->dev.pd, r->mem, r->bytes,
                       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);
    r->dqp = zv_qp(&u->dev, u->cq, u->cq, IBV_QPT_RC, 16, 1);
    r->cqp = zv_qp(&u->dev, u->cq, u->cq, IBV_QPT_RC, 16, 1);
    if (!r->mr || !r->dqp || !r->cqp) {
        fprintf(stderr, PROG ": %s: MR / QP: %s\n", key, strerror(errno));
        return -1;
    }
    struct zs_ep_desc d;
    memset(&d, 0, sizeof(d));
    memcpy(d.gid, u->dev.gid.raw, 16);
    d.data_qpn = r->dqp->qp_num;
    d.ctl_qpn = r->cqp->qp_num;
    d.ctl_sq_psn = (r->cqp->qp_num * 2654435761u) & 0xffffffu;
    d.rkey = r->mr->rkey;
    d.base = (uint64_t)(uintptr_t)r->mem;
    d.item_bytes = r->item;
    d.capacity = r->cap;
    d.kind = (uint32_t)u->kind;
    d.doorbell = u->doorbell;
    host_oob_put(key, &d, sizeof(d));
    r->ctl_sq_psn = d.ctl_sq_psn;
    return 0;
}

/* Connect a published ring's QPs to the switch's (once it answered). */
static int ring_connect(struct pu *u, struct ring *r)
{
    const char *key = r->key;
    char k2[160];
    snprintf(k2, sizeof(k2), "%s/sw", key);
    struct zs_sw_desc sd;
    if (host_oob_get(k2, &sd, sizeof(sd))) {
        fprintf(stderr, PROG ": %s: no answer from the switch\n", key);
        return -1;
    }
    enum ibv_mtu mtu = rc_conn_mtu_enum(u->mtu);
    if (zv_rc_up(r->dqp, sd.gid, sd.data_qpn, sd.data_psn, 0, mtu) ||
        zv_rc_up(r->cqp, sd.gid, sd.ctl_qpn, sd.ctl_psn, r->ctl_sq_psn, mtu)) {
        fprintf(stderr, PROG ": %s: connecting to the switch: %s\n", key, strerror(errno));
        return -1;
    }
    struct zs_ready rd = {.ok = 1};
    for (uint32_t l = 1; l < sd.lanes && l < ZS_MAX_LANES; l++) {
        /* one more data QP, for the switch's thread of lane l */
        r->lqp[l] = zv_qp(&u->dev, u->cq, u->cq, IBV_QPT_RC, 16, 1);
        if (!r->lqp[l] || zv_rc_up(r->lqp[l], sd.gid, sd.lane_qpn[l], sd.lane_psn[l], 0, mtu)) {
            fprintf(stderr, PROG ": %s: lane %u: %s\n", key, l, strerror(errno));
            return -1;
        }
        rd.lane_qpn[l] = r->lqp[l]->qp_num;
    }
    snprintf(k2, sizeof(k2), "%s/ready", key);
    host_oob_put(k2, &rd, sizeof(rd));
    return 0;
}

/* Connect every ring, then wait until the switch runs the flow. */
static int connect_all(struct pu *u)
{
    for (uint32_t i = 0; i < u->n_rings; i++)
        if (ring_connect(u, &u->rings[i]))
            return -1;
    char key[160];
    uint32_t go;
    snprintf(key, sizeof(key), "zs/%s/start", u->flow);
    return host_oob_get(key, &go, sizeof(go));
}

static void ring_close(struct ring *r, int kind)
{
    if (r->dqp)
        ibv_destroy_qp(r->dqp);
    if (r->cqp)
        ibv_destroy_qp(r->cqp);
    for (uint32_t l = 1; l < ZS_MAX_LANES; l++)
        if (r->lqp[l])
            ibv_destroy_qp(r->lqp[l]);
    if (r->mr)
        ibv_dereg_mr(r->mr);
    zs_pu_mem_free(kind, r->mem, r->bytes);
}

/* ---------------------------------------------------------------- pointers */

/* Reap doorbell completions; a ring whose pointer moved meanwhile rings
 * again. */
static void db_reap(struct pu *u);

static void db_ring(struct pu *u, struct ring *r)
{
    if (!u->doorbell || r->db_busy || r->db_sent == r->ptr)
        return;
    uint32_t v = r->ptr;
    uint8_t le[4];
    zs_store_le32(le, v);
    struct ibv_sge sge = {.addr = (uintptr_t)le, .length = 4, .lkey = 0};
    struct ibv_send_wr wr = {.wr_id = (uintptr_t)r,
                             .sg_list = &sge,
                             .num_sge = 1,
                             .opcode = IBV_WR_RDMA_WRITE,
                             .send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE};
    wr.wr.rdma.remote_addr = 0;
    wr.wr.rdma.rkey = 0;
    struct ibv_send_wr *bad = NULL;
    if (ibv_post_send(r->cqp, &wr, &bad) == 0) {
        r->db_busy = true;
        r->db_sent = v;
    }
}

static void db_reap(struct pu *u)
{
    if (!u->doorbell)
        return;
    struct ibv_wc wc[8];
    int n = ibv_poll_cq(u->cq, 8, wc);
    for (int i = 0; i < n; i++) {
        struct ring *r = (struct ring *)(uintptr_t)wc[i].wr_id;
        r->db_busy = false;
        if (wc[i].status != IBV_WC_SUCCESS)
            fprintf(stderr, PROG ": %s: doorbell failed: %s\n", r->key,
                    ibv_wc_status_str(wc[i].status));
        else
            db_ring(u, r);
    }
}

/* A release store of the producer head / consumer tail (and a doorbell). */
static void publish(struct pu *u, struct ring *r, uint32_t v, bool producer)
{
    r->ptr = v;
    __atomic_thread_fence(__ATOMIC_RELEASE);
    zs_store_le32(r->hdr + (producer ? ZS_HEAD_OFF : ZS_TAIL_OFF), v);
    db_reap(u);
    db_ring(u, r);
}

/* Time a PU spends producing / consuming `bytes` (CPU without a rate: the
 * copy at the host's memcpy rate). */
static void work(struct pu *u, const uint8_t *src, size_t bytes)
{
    if (!bytes)
        return;
    if (u->rate_bps) {
        host_compute((uint64_t)((double)bytes * 1e9 / (double)u->rate_bps));
        return;
    }
    if (u->kind == ZS_PU_CPU && src)
        host_memcpy(u->scratch, src, bytes);
}

/* Wait until memory may have changed (and reap doorbell completions). */
static void pu_wait(struct pu *u)
{
    db_reap(u);
    host_relax();
}

/* ---------------------------------------------------------------- QoS */

/* --qos: the control path next to a producer (zs.h): from the start on,
 * step k of the switch's schedule sets this flow's data QP to its rate with
 * ibv_modify_qp_rate_limit; the NIC's per-QP limiter paces the READ
 * responses that carry the flow.  The producing PU knows nothing of it. */
static void qos_agent(void *arg)
{
    struct pu *u = arg;
    struct zs_qos q;
    char key[160];
    snprintf(key, sizeof(key), "zs/%s/qos", u->flow);
    if (host_oob_get(key, &q, sizeof(q)) || u->index >= q.n_flows)
        return;
    uint64_t t0 = host_now_ns();
    for (uint32_t k = 0; k < q.n_steps; k++) {
        uint64_t now = host_now_ns();
        if (now < t0 + q.at_ns[k])
            host_compute(t0 + q.at_ns[k] - now);
        struct ibv_qp_rate_limit_attr a = {.rate_limit =
                                               (uint32_t)(q.rate_bps[k][u->index] / 1000)};
        if (!a.rate_limit && q.rate_bps[k][u->index])
            a.rate_limit = 1; /* 0 would lift the limit */
        int err = ibv_modify_qp_rate_limit(u->rings[0].dqp, &a);
        if (err)
            fprintf(stderr, PROG ": qos: ibv_modify_qp_rate_limit: %s\n", strerror(err));
    }
}

/* ---------------------------------------------------------------- producer */

static uint32_t dest_of(const struct pu *u, uint64_t k)
{
    if (u->mode != ZS_SHUFFLE)
        return 0;
    /* --exclude: the consumers of the producer's own node get nothing */
    uint32_t d = zs_key_dest(u->index, k, u->consumers - u->ex_n);
    return d >= u->ex_first ? d + u->ex_n : d;
}

static void ring_item_write(struct pu *u, struct ring *r, uint32_t head, uint32_t dest)
{
    uint8_t *slot = r->mem + ZS_HDR_BYTES + (size_t)(head % r->cap) * r->item;
    zs_item_fill(slot, r->item, u->index, dest, r->seq);
    r->hash += zs_item_key(u->index, dest, r->seq);
    r->seq++;
}

/* Publish every ring's head after paying for the items written since the
 * last publication. */
static void flush(struct pu *u, const uint32_t *local, uint64_t *pending_bytes)
{
    work(u, u->rings[0].mem + ZS_HDR_BYTES, *pending_bytes);
    *pending_bytes = 0;
    for (uint32_t i = 0; i < u->n_prod_rings; i++)
        if (local[i] != u->rings[i].ptr)
            publish(u, &u->rings[i], local[i], true);
}

struct prod_st {
    uint64_t t0, t_produced, k, pending;
    uint64_t pub_items; /* publish after this many items (all rings together) */
    uint32_t local[MAX_RINGS];
    bool ended;
};

/* Produce until a chunk is published or the next item's ring is full;
 * after the last item, publish the end of the stream.  True if anything
 * moved. */
static bool produce_step(struct pu *u, struct prod_st *ps)
{
    bool did = false;
    while (ps->k < u->items) {
        uint32_t d = dest_of(u, ps->k);
        struct ring *r = &u->rings[u->mode == ZS_SHUFFLE ? d : 0];
        uint32_t *h = &ps->local[r - u->rings];
        uint32_t tail = zs_load_le32(r->hdr + ZS_TAIL_OFF) & ZS_PTR_MASK;
        if (((*h - tail) & ZS_PTR_MASK) >= r->cap) { /* full: publish, let the switch work */
            flush(u, ps->local, &ps->pending);
            return did;
        }
        ring_item_write(u, r, *h, u->mode == ZS_SHUFFLE ? d : 0);
        *h = (*h + 1) & ZS_PTR_MASK;
        ps->pending += r->item;
        ps->k++;
        did = true;
        if (ps->pending >= ps->pub_items * u->item || ps->k == u->items) {
            flush(u, ps->local, &ps->pending);
            return true;
        }
    }
    if (!ps->ended) { /* end of stream */
        ps->t_produced = host_now_ns();
        for (uint32_t i = 0; i < u->n_prod_rings; i++)
            publish(u, &u->rings[i], ps->local[i] | ZS_DONE_BIT, true);
        ps->ended = true;
        did = true;
    }
    return did;
}

/* The switch took everything. */
static bool producer_drained(const struct pu *u, const struct prod_st *ps)
{
    for (uint32_t i = 0; i < u->n_prod_rings; i++)
        if ((zs_load_le32(u->rings[i].hdr + ZS_TAIL_OFF) & ZS_PTR_MASK) != ps->local[i])
            return false;
    return ps->ended;
}

static void producer_report(struct pu *u, const struct prod_st *ps)
{
    /* what went where, for the consumers' checks */
    for (uint32_t i = 0; i < u->n_prod_rings; i++) {
        char key[160];
        snprintf(key, sizeof(key), "zs/%s/pstat/%u/%u", u->flow, u->index,
                 u->mode == ZS_SHUFFLE ? i : 0);
        uint64_t st[2] = {u->rings[i].seq, u->rings[i].hash};
        host_oob_put(key, st, sizeof(st));
    }
    struct host_kv kv[] = {
        {"producer", u->index},
        {"items", (double)u->items},
        {"bytes", (double)(u->items * u->item)},
        {"t_start_ns", (double)ps->t0},
        {"t_produced_ns", (double)ps->t_produced},
        {"t_drained_ns", (double)host_now_ns()},
    };
    host_report("zs_producer", kv, sizeof(kv) / sizeof(kv[0]));
}

/* How often a producer publishes its heads: every --chunk items, by default
 * about 256 KiB of items over all its rings, but at least once per 1/16 of
 * a ring's capacity on average over the rings.  A head that moves only
 * every quarter ring (4 rings of 256 KiB, 16-byte tuples: Fig. 15 at one
 * node) makes the switch see a ring's items in bursts; symmetric producers
 * then run in step, producing while the switch waits and waiting on full
 * rings while it transfers (docs/zero-sided.md, Fig. 15). */
static struct prod_st prod_start(const struct pu *u)
{
    struct prod_st ps = {.t0 = host_now_ns(), .pub_items = u->chunk};
    uint64_t per_16th = (uint64_t)u->n_prod_rings * u->capacity / 16;
    if (!u->chunk_set && per_16th && per_16th < ps.pub_items)
        ps.pub_items = per_16th;
    return ps;
}

static int run_producer(struct pu *u)
{
    struct prod_st ps = prod_start(u);
    while (!producer_drained(u, &ps))
        if (!produce_step(u, &ps))
            pu_wait(u);
    producer_report(u, &ps);
    return 0;
}

/* ---------------------------------------------------------------- consumer */

static void violation(struct pu *u, const char *what, uint32_t producer, uint64_t seq,
                      uint64_t want)
{
    if (u->violation)
        return;
    u->violation = true;
    fprintf(stderr,
            PROG ": VIOLATION: consumer %u (%s): %s: producer %u sequence %" PRIu64
                 " (expected %" PRIu64 ")\n",
            u->index, u->flow, what, producer, seq, want);
    struct host_kv kv[] = {{"consumer", u->index},
                           {"producer", producer},
                           {"seq", (double)seq},
                           {"expected", (double)want},
                           {"t_ns", (double)host_now_ns()}};
    host_report("order_violation", kv, sizeof(kv) / sizeof(kv[0]));
}

/* Check one item and account for it. */
static void take_item(struct pu *u, const uint8_t *item, uint32_t bytes)
{
    uint32_t pr;
    uint64_t seq;
    uint32_t dest = u->mode == ZS_SHUFFLE ? u->index : 0;
    if (!zs_item_check(item, bytes, dest, &pr, &seq) || pr >= ZS_MAX_PRODUCERS) {
        violation(u, "corrupt or misdirected item", pr, seq, 0);
        return;
    }
    struct src_stat *s = &u->src[pr];
    bool strict = u->mode != ZS_LB;
    if (strict ? seq != s->next_seq : (s->any && seq < s->next_seq)) {
        violation(u, strict ? "item out of order, lost or duplicated" : "duplicated item", pr, seq,
                  s->next_seq);
        return;
    }
    s->next_seq = seq + 1;
    s->any = true;
    s->items++;
    s->bytes += bytes;
    uint64_t key = zs_item_key(pr, dest, seq);
    s->hash += key;
    u->order_hash = zs_mix(u->order_hash ^ key);
    u->checked++;
}

static uint64_t total_bytes(const struct pu *u)
{
    uint64_t b = 0;
    for (uint32_t i = 0; i < ZS_MAX_PRODUCERS; i++)
        b += u->src[i].bytes;
    return b;
}

struct cons_st {
    uint64_t t_first, t_last, next_series, first_bytes;
    uint64_t t_head; /* when the head was last seen to move */
    uint64_t step;   /* items taken (and freed) per step at most */
    uint32_t tail, head;
    bool done;
};

/* Take what the consumer ring has (one contiguous piece, at most a
 * chunk): 1 if something was taken, 0 if nothing, -1 on a violation;
 * done once the end of the stream is seen and everything taken. */
static int consume_step(struct pu *u, struct cons_st *cs)
{
    struct ring *r = &u->rings[u->cons_ring];
    uint32_t head = zs_load_le32(r->hdr + ZS_HEAD_OFF);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    uint32_t h = head & ZS_PTR_MASK;
    uint32_t n = (h - cs->tail) & ZS_PTR_MASK;
    if (n == 0) {
        cs->done = (head & ZS_DONE_BIT) != 0;
        return 0;
    }
    if (h != cs->head) {
        cs->head = h;
        cs->t_head = host_now_ns();
    }
    if (n > cs->step)
        n = (uint32_t)cs->step;
    uint32_t first = cs->tail % r->cap, run = r->cap - first;
    if (run < n)
        n = run; /* one contiguous piece per step */
    if (!cs->t_first) {
        cs->t_first = host_now_ns();
        cs->first_bytes = (uint64_t)((h - cs->tail) & ZS_PTR_MASK) * r->item;
    }
    const uint8_t *base = r->mem + ZS_HDR_BYTES + (size_t)first * r->item;
    for (uint32_t i = 0; i < n && !u->violation; i++)
        take_item(u, base + (size_t)i * r->item, r->item);
    if (u->violation)
        return -1;
    work(u, base, (size_t)n * r->item);
    cs->tail = (cs->tail + n) & ZS_PTR_MASK;
    publish(u, r, cs->tail, false);
    cs->t_last = host_now_ns();
    if (u->series_ns) {
        if (!cs->next_series)
            cs->next_series = (cs->t_first / u->series_ns + 1) * u->series_ns;
        while (cs->t_last >= cs->next_series) {
            struct host_kv kv[] = {{"consumer", u->index},
                                   {"t_ns", (double)cs->next_series},
                                   {"bytes", (double)total_bytes(u)}};
            host_report("zs_series", kv, 3);
            for (uint32_t q = 0;
                 u->mode == ZS_REPLICATE && u->producers > 1 && q < ZS_MAX_PRODUCERS; q++)
                if (u->src[q].bytes) { /* per producer (fairness, Fig. 14) */
                    struct host_kv sk[] = {{"consumer", u->index},
                                           {"producer", q},
                                           {"t_ns", (double)cs->next_series},
                                           {"bytes", (double)u->src[q].bytes}};
                    host_report("zs_series_src", sk, 4);
                }
            cs->next_series += u->series_ns;
        }
    }
    return 1;
}

static void consumer_report(struct pu *u, const struct cons_st *cs)
{
    uint64_t bytes = total_bytes(u);
    /* arrival bandwidth: from the first look to the last time the head
     * moved (not to the end of consuming the last batch) */
    double secs = cs->t_head > cs->t_first ? (double)(cs->t_head - cs->t_first) * 1e-9 : 0;
    struct host_kv kv[] = {
        {"consumer", u->index},
        {"items", (double)u->checked},
        {"bytes", (double)bytes},
        {"t_first_ns", (double)cs->t_first},
        {"t_last_ns", (double)cs->t_last},
        {"t_head_ns", (double)cs->t_head},
        {"first_bytes", (double)cs->first_bytes}, /* already there at the first look */
        /* what arrived after the first look, per second until the last arrival */
        {"gbps", secs > 0 ? (double)(bytes - cs->first_bytes) * 8 / secs / 1e9 : 0},
    };
    host_report("zs_consumer", kv, sizeof(kv) / sizeof(kv[0]));
    for (uint32_t p = 0; p < ZS_MAX_PRODUCERS; p++)
        if (u->src[p].items) {
            struct host_kv s[] = {{"consumer", u->index},
                                  {"producer", p},
                                  {"items", (double)u->src[p].items},
                                  {"bytes", (double)u->src[p].bytes}};
            host_report("zs_src", s, 4);
        }
}

static int run_consumer(struct pu *u)
{
    struct cons_st cs = {.step = u->chunk};
    while (!cs.done) {
        int r = consume_step(u, &cs);
        if (r < 0)
            return 1;
        if (r == 0 && !cs.done)
            pu_wait(u);
    }
    consumer_report(u, &cs);
    return 0;
}

/* A worker thread both produces (its shuffle rings) and consumes (its
 * ring), as the paper's CPU workers do (Fig. 9). */
/* A worker is a producer and a consumer in one thread, which pushes and
 * pops item by item in the paper (head++ / tail++ per item).  The model
 * alternates a produce step and a consume step, so the two steps must be
 * alike: a 256 KiB produce step (a whole 256 KiB consumer ring) between
 * consume steps leaves the worker's own ring unread -- full, as the
 * switch sees it -- for a whole ring's copy time.  Both steps are 1/16 of
 * the consumer ring, the producers' publication rule (prod_start). */
static int run_worker(struct pu *u)
{
    struct prod_st ps = prod_start(u);
    struct cons_st cs = {.step = u->chunk};
    uint32_t cap = u->rings[u->cons_ring].cap;
    if (!u->chunk_set && cap / 16 && cap / 16 < cs.step)
        cs.step = ps.pub_items = cap / 16;
    bool drained = false;
    while (!cs.done || !drained) {
        bool did = !drained && produce_step(u, &ps);
        int r = cs.done ? 0 : consume_step(u, &cs);
        if (r < 0)
            return 1;
        drained = drained || producer_drained(u, &ps);
        if (!did && r == 0 && (!cs.done || !drained))
            pu_wait(u);
    }
    producer_report(u, &ps);
    consumer_report(u, &cs);
    return 0;
}

/* After the stream: compare with what the producers wrote. */
static int final_checks(struct pu *u)
{
    char key[160];
    uint32_t dest = u->mode == ZS_SHUFFLE ? u->index : 0;
    /* publish this consumer's view */
    uint64_t mine[2 * ZS_MAX_PRODUCERS + 2];
    for (uint32_t p = 0; p < ZS_MAX_PRODUCERS; p++) {
        mine[2 * p] = u->src[p].items;
        mine[2 * p + 1] = u->src[p].hash;
    }
    mine[2 * ZS_MAX_PRODUCERS] = u->order_hash;
    mine[2 * ZS_MAX_PRODUCERS + 1] = u->checked;
    snprintf(key, sizeof(key), "zs/%s/cstat/%u", u->flow, u->index);
    host_oob_put(key, mine, sizeof(mine));
    if (u->mode == ZS_LB && u->index != 0)
        return 0; /* consumer 0 checks the union */
    uint64_t sum_items[ZS_MAX_PRODUCERS] = {0}, sum_hash[ZS_MAX_PRODUCERS] = {0};
    /* load balancing: consumer 0 sums every consumer's view; else its own */
    uint32_t first_c = u->mode == ZS_LB ? 0 : u->index;
    uint32_t end_c = u->mode == ZS_LB ? u->consumers : u->index + 1;
    for (uint32_t c = first_c; c < end_c; c++) {
        uint64_t v[2 * ZS_MAX_PRODUCERS + 2];
        if (c == u->index) {
            memcpy(v, mine, sizeof(v));
        } else {
            snprintf(key, sizeof(key), "zs/%s/cstat/%u", u->flow, c);
            if (host_oob_get(key, v, sizeof(v)))
                return 1;
        }
        for (uint32_t p = 0; p < ZS_MAX_PRODUCERS; p++) {
            sum_items[p] += v[2 * p];
            sum_hash[p] += v[2 * p + 1];
        }
    }
    uint32_t first_p = u->mode == ZS_PAIRS ? u->index : 0;
    uint32_t last_p = u->mode == ZS_PAIRS ? u->index + 1 : u->producers;
    for (uint32_t p = first_p; p < last_p; p++) {
        uint64_t st[2];
        snprintf(key, sizeof(key), "zs/%s/pstat/%u/%u", u->flow, p, dest);
        if (host_oob_get(key, st, sizeof(st)))
            return 1;
        if (sum_items[p] != st[0] || sum_hash[p] != st[1]) {
            violation(u,
                      u->mode == ZS_LB ? "the consumers together did not get every item once"
                                       : "items missing at the end of the stream",
                      p, sum_items[p], st[0]);
            return 1;
        }
    }
    if (u->mode == ZS_REPLICATE && u->index == 0) {
        for (uint32_t c = 1; c < u->consumers; c++) {
            uint64_t v[2 * ZS_MAX_PRODUCERS + 2];
            snprintf(key, sizeof(key), "zs/%s/cstat/%u", u->flow, c);
            if (host_oob_get(key, v, sizeof(v)))
                return 1;
            if (v[2 * ZS_MAX_PRODUCERS] != u->order_hash ||
                v[2 * ZS_MAX_PRODUCERS + 1] != u->checked) {
                violation(u, "consumers saw different global orders", c,
                          v[2 * ZS_MAX_PRODUCERS + 1], u->checked);
                return 1;
            }
        }
    }
    return 0;
}

/* The consumer's verdict for `rnicsim check-order` (table order_check), after
 * the end-of-stream comparison (final) when there is one. */
static int checked(struct pu *u, bool final)
{
    if (final && final_checks(u))
        return 1;
    struct host_kv kv[] = {{"messages_checked", (double)u->checked}};
    host_report("order_check", kv, 1);
    return 0;
}

/* ---------------------------------------------------------------- echo (latency) */

#define ECHO_TS_OFF ZS_ITEM_HDR_BYTES + 8 /* after the pattern word */

struct echo_rx {
    struct pu *u;
    struct ring *in;
};

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* echo-client receiver thread: every echo's round trip */
static void echo_client_rx(void *arg)
{
    struct echo_rx *e = arg;
    struct pu *u = e->u;
    struct ring *r = e->in;
    uint32_t tail = 0;
    while (u->echo_got < u->items) {
        uint32_t h = zs_load_le32(r->hdr + ZS_HEAD_OFF) & ZS_PTR_MASK;
        if (h == tail) {
            pu_wait(u);
            continue;
        }
        uint64_t now = host_now_ns();
        while (tail != h) {
            const uint8_t *it = r->mem + ZS_HDR_BYTES + (size_t)(tail % r->cap) * r->item;
            uint32_t pr;
            uint64_t seq, sent;
            if (!zs_item_check(it, r->item, 0, &pr, &seq) || pr != u->index || seq != u->echo_got) {
                violation(u, "echo out of order or corrupt", pr, seq, u->echo_got);
                return;
            }
            memcpy(&sent, it + ECHO_TS_OFF, 8);
            u->lat.v[u->lat.n++] = (now - sent) / 2;
            u->echo_got++;
            tail = (tail + 1) & ZS_PTR_MASK;
        }
        publish(u, r, tail, false);
    }
}

static int run_echo_client(struct pu *u)
{
    struct ring *out = &u->rings[0], *in = &u->rings[1];
    u->lat.v = calloc(u->items ? u->items : 1, sizeof(uint64_t));
    if (!u->lat.v)
        return 1;
    struct echo_rx e = {u, in};
    int th = host_thread_start(echo_client_rx, &e);
    if (th < 0)
        return 1;
    uint64_t t0 = host_now_ns(), head = 0;
    double gap = 1e9 / (double)u->echo_rate;
    for (uint64_t k = 0; k < u->items && !u->violation;) {
        uint64_t due = t0 + (uint64_t)((double)k * gap), now = host_now_ns();
        if (due > now) {
            host_compute(due - now);
            continue;
        }
        uint32_t tail = zs_load_le32(out->hdr + ZS_TAIL_OFF) & ZS_PTR_MASK;
        if (((head - tail) & ZS_PTR_MASK) >= out->cap) { /* saturated: wait for room */
            pu_wait(u);
            continue;
        }
        /* every item due by now (a burst at most one ring) */
        uint32_t pushed = 0;
        while (k < u->items && t0 + (uint64_t)((double)k * gap) <= now &&
               ((head - tail) & ZS_PTR_MASK) < out->cap) {
            uint8_t *slot = out->mem + ZS_HDR_BYTES + (size_t)(head % out->cap) * out->item;
            zs_item_fill(slot, out->item, u->index, 0, out->seq++);
            uint64_t ts = t0 + (uint64_t)((double)k * gap); /* the offered time */
            memcpy(slot + ECHO_TS_OFF, &ts, 8);
            head = (head + 1) & ZS_PTR_MASK;
            k++;
            pushed++;
        }
        publish(u, out, (uint32_t)head, true);
        (void)pushed;
    }
    host_thread_join(th);
    publish(u, out, (uint32_t)head | ZS_DONE_BIT, true);
    if (u->violation)
        return 1;
    qsort(u->lat.v, u->lat.n, sizeof(uint64_t), cmp_u64);
    uint64_t med = u->lat.n ? u->lat.v[(u->lat.n - 1) / 2] : 0;
    uint64_t p99 = u->lat.n ? u->lat.v[(u->lat.n * 99 + 99) / 100 - 1] : 0;
    uint64_t el = host_now_ns() - t0;
    struct host_kv kv[] = {{"client", u->index},
                           {"items", (double)u->lat.n},
                           {"offered_items_per_s", (double)u->echo_rate},
                           {"achieved_items_per_s", el ? (double)u->lat.n * 1e9 / (double)el : 0},
                           {"median_ns", (double)med},
                           {"p99_ns", (double)p99},
                           {"min_ns", u->lat.n ? (double)u->lat.v[0] : 0},
                           {"max_ns", u->lat.n ? (double)u->lat.v[u->lat.n - 1] : 0}};
    host_report("zs_latency", kv, sizeof(kv) / sizeof(kv[0]));
    printf(PROG ": echo %s: %zu items at %" PRIu64 "/s: one-way median %.2f us, p99 %.2f us\n",
           u->flow, u->lat.n, u->echo_rate, (double)med / 1e3, (double)p99 / 1e3);
    u->checked = u->lat.n;
    free(u->lat.v);
    return 0;
}

/* echo-server: every item from ring 0 (consumer) back out on ring 1 */
static int run_echo_server(struct pu *u)
{
    struct ring *in = &u->rings[0], *out = &u->rings[1];
    uint32_t tail = 0, head = 0;
    for (;;) {
        uint32_t hv = zs_load_le32(in->hdr + ZS_HEAD_OFF), h = hv & ZS_PTR_MASK;
        uint32_t otail = zs_load_le32(out->hdr + ZS_TAIL_OFF) & ZS_PTR_MASK;
        if (h == tail) {
            if (hv & ZS_DONE_BIT)
                break;
            pu_wait(u);
            continue;
        }
        if (((head - otail) & ZS_PTR_MASK) >= out->cap) {
            pu_wait(u);
            continue;
        }
        uint32_t moved = 0;
        while (tail != h && ((head - otail) & ZS_PTR_MASK) < out->cap) {
            memcpy(out->mem + ZS_HDR_BYTES + (size_t)(head % out->cap) * out->item,
                   in->mem + ZS_HDR_BYTES + (size_t)(tail % in->cap) * in->item, in->item);
            tail = (tail + 1) & ZS_PTR_MASK;
            head = (head + 1) & ZS_PTR_MASK;
            moved++;
        }
        work(u, NULL, (size_t)moved * in->item);
        publish(u, in, tail, false);
        publish(u, out, head, true);
        u->checked += moved;
    }
    publish(u, out, head | ZS_DONE_BIT, true);
    return 0;
}

/* ---------------------------------------------------------------- main */

/* One PU: set-up, its role, tear-down; frees u. */
static int pu_run(struct pu *u)
{
    int rc = 1;
    if (((u->role == R_CONSUMER || u->role == R_WORKER) && u->consumers_set &&
         u->index >= u->consumers) ||
        (u->role == R_PRODUCER && u->producers_set && u->index >= u->producers)) {
        free(u); /* beyond --consumers / --producers: not part of this run */
        return 0;
    }
    if (u->start_ns)
        host_compute(u->start_ns); /* a PU that joins later */
    if (!u->chunk_set)             /* publish / take about 256 KiB at a time */
        u->chunk = (256u << 10) / u->item ? (256u << 10) / u->item : 1;
    if (u->chunk > u->capacity)
        u->chunk = u->capacity;
    /* page aligned (pages.h): where a malloc'd block starts inside its
     * lines depends on the heap, and the host model counts the lines a
     * copy touches */
    u->scratch = pages_alloc((size_t)u->item * u->chunk);
    if (!u->scratch || open_device(u))
        goto out;
    char key[128];
    switch (u->role) {
    case R_PRODUCER:
        u->n_rings = u->mode == ZS_SHUFFLE ? u->consumers : 1;
        for (uint32_t j = 0; j < u->n_rings; j++) {
            if (u->mode == ZS_SHUFFLE)
                snprintf(key, sizeof(key), "zs/%s/p%u.%u", u->flow, u->index, j);
            else
                snprintf(key, sizeof(key), "zs/%s/p%u", u->flow, u->index);
            if (ring_open(u, &u->rings[j], key))
                goto out;
        }
        u->n_prod_rings = u->n_rings;
        if (connect_all(u))
            goto out;
        {
            int agent = u->qos ? host_thread_start(qos_agent, u) : -1;
            if (u->qos && agent < 0)
                goto out;
            rc = run_producer(u);
            if (agent >= 0 && host_thread_join(agent))
                rc = 1;
        }
        break;
    case R_WORKER:
        if (u->mode != ZS_SHUFFLE) {
            fprintf(stderr, PROG ": a worker needs --mode=shuffle\n");
            goto out;
        }
        u->n_prod_rings = u->consumers;
        for (uint32_t j = 0; j < u->consumers; j++) {
            snprintf(key, sizeof(key), "zs/%s/p%u.%u", u->flow, u->index, j);
            if (ring_open(u, &u->rings[j], key))
                goto out;
        }
        u->cons_ring = u->n_rings = u->consumers + 1;
        u->cons_ring--;
        snprintf(key, sizeof(key), "zs/%s/c%u", u->flow, u->index);
        if (ring_open(u, &u->rings[u->cons_ring], key) || connect_all(u))
            goto out;
        rc = run_worker(u);
        if (rc == 0)
            rc = checked(u, true);
        break;
    case R_CONSUMER:
        u->n_rings = 1;
        snprintf(key, sizeof(key), "zs/%s/c%u", u->flow, u->index);
        if (ring_open(u, &u->rings[0], key) || connect_all(u))
            goto out;
        rc = run_consumer(u);
        if (rc == 0)
            rc = checked(u, true);
        break;
    case R_ECHO_CLIENT:
    case R_ECHO_SERVER: {
        /* pairs I and I+1: the client produces I and consumes I+1, the
         * server consumes I and produces I+1 */
        bool client = u->role == R_ECHO_CLIENT;
        u->n_rings = 2;
        snprintf(key, sizeof(key), client ? "zs/%s/p%u" : "zs/%s/c%u", u->flow, u->index);
        if (ring_open(u, &u->rings[0], key))
            goto out;
        snprintf(key, sizeof(key), client ? "zs/%s/c%u" : "zs/%s/p%u", u->flow, u->index + 1);
        if (ring_open(u, &u->rings[1], key) || connect_all(u))
            goto out;
        rc = client ? run_echo_client(u) : run_echo_server(u);
        if (rc == 0 && client)
            rc = checked(u, false);
        break;
    }
    }

    /* the switch may still poll: keep the QPs until it is done */
    {
        uint32_t one;
        snprintf(key, sizeof(key), "zs/%s/switch_done", u->flow);
        if (rc == 0)
            host_oob_get(key, &one, sizeof(one));
    }
out:
    for (uint32_t i = 0; i < u->n_rings; i++)
        ring_close(&u->rings[i], u->kind);
    if (u->cq)
        ibv_destroy_cq(u->cq);
    zv_close(&u->dev);
    free(u->scratch);
    free(u);
    return rc;
}

struct pu_thread {
    struct pu *u;
    int rc;
};

static void pu_thread_fn(void *arg)
{
    struct pu_thread *t = arg;
    t->rc = pu_run(t->u);
}

/* --rings=K: K PUs of the same role and kind, indices I .. I+K-1 (threads
 * of one program: several kernels on one GPU, several cores). */
int zs_pu_main(int argc, char **argv)
{
    struct pu *u = calloc(1, sizeof(*u));
    if (!u)
        return 1;
    if (parse_args(u, argc, argv)) {
        free(u);
        return 1;
    }
    uint32_t k = u->instances ? u->instances : 1;
    struct pu_thread *t = calloc(k, sizeof(*t));
    int *th = calloc(k, sizeof(*th));
    int rc = 0;
    if (!t || !th) {
        free(t);
        free(th);
        free(u);
        return 1;
    }
    for (uint32_t i = 1; i < k; i++) {
        t[i].u = malloc(sizeof(*u));
        if (!t[i].u) {
            rc = 1;
            k = i;
            break;
        }
        *t[i].u = *u;
        t[i].u->index = u->index + i;
        th[i] = host_thread_start(pu_thread_fn, &t[i]);
        if (th[i] < 0) {
            free(t[i].u);
            rc = 1;
            k = i;
            break;
        }
    }
    rc |= pu_run(u);
    for (uint32_t i = 1; i < k; i++) {
        host_thread_join(th[i]);
        rc |= t[i].rc;
    }
    free(t);
    free(th);
    return rc;
}
