/* zs_switch: the control plane of the zero-sided switch program, run on
 * the programmable switch's CPU (host sw0).  It declares the data plane's
 * tables and registers and loads it (zs_dataplane.c), learns every PU
 * endpoint out of band (the coordinator's job in the paper: buffers and
 * QPs are set up, then the switch is programmed), gives each endpoint the
 * switch's QP numbers and PSNs, writes the table entries, starts one
 * thread packet per consumer thread and the packet-generator batches
 * (polls, timers), and then stays off the data path: it only waits for
 * the data plane's digests (a thread's stream ended, an error NAK) and for
 * the times consumers join or leave (elasticity).
 *
 *   zs_switch --flow=NAME --mode=pairs|shuffle|lb|replicate --producers=N --consumers=M
 *             [--batch=ITEMS | --batch-bytes=SIZE] [--poll=TIME | --doorbell]
 *             [--rto=TIME] [--tick=TIME] [--mtu=BYTES] [--active=K]
 *             [--join=C@TIME[,...]] [--leave=C@TIME[,...]] [--ecn=KMIN:KMAX:PMAX|off]
 *
 * --ecn: the egress marks data WRITEs CE from the depth of the queue they
 * join (RED; default DCQCN's 5000:200000:1%), which the consumer's NIC
 * answers with a CNP the switch relays to the producer (zs_cnp.c).
 *
 * Out-of-band keys (host_oob): the PU puts zs/<flow>/<ep> (struct
 * zs_ep_desc; ep = p<i>, p<i>.<j> for shuffle, c<j>), the switch answers
 * zs/<flow>/<ep>/sw (struct zs_sw_desc), the PU puts zs/<flow>/<ep>/ready
 * once its QPs are in RTS; when the threads run, the switch puts
 * zs/<flow>/start and the PUs begin.  When every thread has finished the switch puts
 * zs/<flow>/switch_done and reports the table "zs_switch". */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocols/common/rc_conn.h"
#include "protocols/zerosided/zs_dp.h"
#include "protocols/zerosided/zs_switch.h"
#include "rnicsim/host.h"
#include "sim/nic/nic.h"
#include "sim/nic/opcode.h"

const char *const zs_mode_names[] = {"pairs", "shuffle", "lb", "replicate", NULL};
const char *const zs_pu_kind_names[] = {"cpu", "gpu", "fpga", NULL};

#define PROG "zs_switch"
#define MAX_EVENTS 64
/* First PSN of endpoint e's data QP: near the top of the 24-bit space, so
 * every run goes through the wrap to 0 on both the switch and the PU. */
#define PSN_START(e) ((0xfffc00u + (uint32_t)(e)*1009u) & NIC_PSN_MASK)
/* The switch's QPN of thread t's data QP when it is a lane (1..) of its
 * consumer (endpoints use 0x100 + 2e, 0x101 + 2e) */
#define ZS_LANE_QPN(t) (0x10000u + (uint32_t)(t))

struct sched_ev {
    uint64_t at_ns;
    uint32_t c;
    bool join;
};

struct zs_sw {
    const char *flow;
    int mode;
    uint32_t producers, consumers; /* N, M as given */
    uint64_t batch_items, batch_bytes;
    uint64_t poll_ns, rto_ns, tick_ns;
    uint32_t mtu;
    bool doorbell;
    uint32_t active;
    int64_t uplink_slots; /* -1: one producer node's share of the threads (shuffle) */
    uint32_t lanes;       /* shuffle: data QPs (threads) per consumer */
    uint32_t pipeline;    /* --pipeline=W: W lanes, one READ streaming into a consumer at once */
    uint32_t *lane_qpn;   /* the consumer PU's QP of each thread (lanes 1..) */
    struct zs_qos qos;    /* --qos: per-flow rate schedule (n_steps 0: none) */
    uint64_t qos_rate_bps;
    uint64_t ecn_kmin, ecn_kmax; /* --ecn (kmax 0: off) */
    uint32_t ecn_pmax_ppm;
    struct sched_ev ev[MAX_EVENTS];
    uint32_t n_ev;
    struct zs_dp dp;
    struct zs_ep_desc *pdesc, *cdesc;
    struct zs_ep_ent *pent, *cent;
    bool *c_started;
};

static int parse_mode(const char *s)
{
    for (int i = 0; zs_mode_names[i]; i++)
        if (strcmp(s, zs_mode_names[i]) == 0)
            return i;
    return -1;
}

/* "C@TIME,C@TIME" */
static int parse_sched(struct zs_sw *z, const char *s, bool join)
{
    while (*s) {
        char *end;
        unsigned long c = strtoul(s, &end, 10);
        if (end == s || *end != '@')
            return -1;
        const char *t = end + 1;
        const char *comma = strchr(t, ',');
        char tb[32];
        size_t len = comma ? (size_t)(comma - t) : strlen(t);
        if (len == 0 || len >= sizeof(tb) || z->n_ev == MAX_EVENTS)
            return -1;
        memcpy(tb, t, len);
        tb[len] = '\0';
        uint64_t ns;
        if (!rc_conn_parse_time(tb, &ns))
            return -1;
        z->ev[z->n_ev++] = (struct sched_ev){.at_ns = ns, .c = (uint32_t)c, .join = join};
        s = comma ? comma + 1 : t + len;
    }
    return 0;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: " PROG " --flow=NAME --mode=pairs|shuffle|lb|replicate --producers=N "
            "--consumers=M\n"
            "       [--batch=ITEMS | --batch-bytes=SIZE] [--poll=TIME | --doorbell] [--rto=TIME]\n"
            "       [--tick=TIME] [--mtu=BYTES] [--active=K] [--join=C@TIME,...] "
            "[--leave=C@TIME,...]\n"
            "       [--uplink-slots=N|auto] [--lanes=N | --pipeline=W] "
            "[--qos=TIME:R1/R2/...,TIME:...] [--qos-rate=RATE]\n"
            "       [--ecn=KMIN:KMAX:PMAX|off]\n");
}

/* --ecn=KMIN:KMAX:PMAX (sizes, PMAX a fraction or N%) or --ecn=off */
static int parse_ecn(struct zs_sw *z, const char *arg)
{
    if (!strcmp(arg, "off")) {
        z->ecn_kmin = z->ecn_kmax = 0;
        return 0;
    }
    char buf[128];
    snprintf(buf, sizeof(buf), "%s", arg);
    char *c1 = strchr(buf, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (!c2)
        return -1;
    *c1 = *c2 = 0;
    uint64_t kmin, kmax;
    if (!rc_conn_parse_size(buf, &kmin) || !rc_conn_parse_size(c1 + 1, &kmax) || kmax <= kmin)
        return -1;
    char *end;
    double pmax = strtod(c2 + 1, &end);
    if (end == c2 + 1)
        return -1;
    if (*end == '%') {
        pmax /= 100.0;
        end++;
    }
    if (*end || !(pmax > 0.0) || pmax > 1.0)
        return -1;
    z->ecn_kmin = kmin;
    z->ecn_kmax = kmax;
    z->ecn_pmax_ppm = (uint32_t)(pmax * 1e6 + 0.5);
    return 0;
}

/* --qos=TIME:R1/R2/...,TIME:...: from TIME on (after the start) flow i
 * gets the share Ri / sum of the link (the ratios; 0 stops a flow). */
static int parse_qos(struct zs_sw *z, const char *arg)
{
    struct zs_qos *q = &z->qos;
    char buf[512];
    snprintf(buf, sizeof(buf), "%s", arg);
    char *save = NULL;
    q->n_steps = 0;
    for (char *step = strtok_r(buf, ",", &save); step; step = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(step, ':');
        if (!colon || q->n_steps == ZS_QOS_STEPS)
            return -1;
        *colon = 0;
        uint64_t at;
        if (!rc_conn_parse_time(step, &at) || (q->n_steps && at <= q->at_ns[q->n_steps - 1]))
            return -1;
        uint32_t n = 0;
        char *save2 = NULL;
        for (char *r = strtok_r(colon + 1, "/", &save2); r; r = strtok_r(NULL, "/", &save2)) {
            uint64_t v;
            if (n == ZS_QOS_FLOWS || !rc_conn_parse_uint(r, 0, 1000000, &v))
                return -1;
            q->rate_bps[q->n_steps][n++] = v; /* the ratio, made a rate below */
        }
        if (!n || (q->n_flows && n != q->n_flows))
            return -1;
        q->n_flows = n;
        q->at_ns[q->n_steps++] = at;
    }
    return q->n_steps ? 0 : -1;
}

/* The ratios as rates: shares of --qos-rate. */
static void qos_rates(struct zs_sw *z)
{
    struct zs_qos *q = &z->qos;
    for (uint32_t k = 0; k < q->n_steps; k++) {
        uint64_t sum = 0;
        for (uint32_t i = 0; i < q->n_flows; i++)
            sum += q->rate_bps[k][i];
        for (uint32_t i = 0; i < q->n_flows; i++)
            q->rate_bps[k][i] =
                sum ? (uint64_t)((double)z->qos_rate_bps * (double)q->rate_bps[k][i] / (double)sum)
                    : 0;
    }
}

static int parse_args(struct zs_sw *z, int argc, char **argv)
{
    static const struct option opts[] = {
        {"flow", required_argument, 0, 'f'},
        {"mode", required_argument, 0, 'm'},
        {"producers", required_argument, 0, 'n'},
        {"consumers", required_argument, 0, 'c'},
        {"batch", required_argument, 0, 'b'},
        {"batch-bytes", required_argument, 0, 'B'},
        {"poll", required_argument, 0, 'p'},
        {"doorbell", no_argument, 0, 'd'},
        {"rto", required_argument, 0, 'r'},
        {"tick", required_argument, 0, 't'},
        {"mtu", required_argument, 0, 'u'},
        {"active", required_argument, 0, 'a'},
        {"join", required_argument, 0, 'j'},
        {"leave", required_argument, 0, 'l'},
        {"uplink-slots", required_argument, 0, 's'},
        {"qos", required_argument, 0, 'q'},
        {"qos-rate", required_argument, 0, 'Q'},
        {"lanes", required_argument, 0, 'L'},
        {"ecn", required_argument, 0, 'e'},
        {"pipeline", required_argument, 0, 'P'}, /* lanes, one READ streaming at a time */
        {0, 0, 0, 0},
    };
    z->mode = -1;
    z->batch_bytes = 4u << 20; /* the paper's recommended cap: 4 MiB */
    z->poll_ns = 10000;
    z->rto_ns = 200000;
    z->mtu = 1024;
    z->uplink_slots = -1;
    z->lanes = 1;
    z->qos_rate_bps = 100000000000ull;
    /* DCQCN's marking (Zhu et al., SIGCOMM 2015, section 6: Kmin 5 KB,
     * Kmax 200 KB, Pmax 1 %), the settings the fabric's switches use
     * (topology `ecn: {}`: 5000 and 200000 bytes) */
    z->ecn_kmin = 5000;
    z->ecn_kmax = 200000;
    z->ecn_pmax_ppm = 10000;
    uint64_t v;
    int o;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 'f':
            z->flow = optarg;
            break;
        case 'm':
            z->mode = parse_mode(optarg);
            break;
        case 'n':
            if (!rc_conn_parse_uint(optarg, 1, ZS_MAX_PRODUCERS, &v))
                goto bad;
            z->producers = (uint32_t)v;
            break;
        case 'c':
            if (!rc_conn_parse_uint(optarg, 1, 1024, &v))
                goto bad;
            z->consumers = (uint32_t)v;
            break;
        case 'b':
            if (!rc_conn_parse_uint(optarg, 1, 1u << 30, &z->batch_items))
                goto bad;
            break;
        case 'B':
            if (!rc_conn_parse_uint(optarg, 1, 1u << 30, &z->batch_bytes))
                goto bad;
            break;
        case 'p':
            if (!rc_conn_parse_time(optarg, &z->poll_ns) || z->poll_ns == 0)
                goto bad;
            break;
        case 'd':
            z->doorbell = true;
            break;
        case 'r':
            if (!rc_conn_parse_time(optarg, &z->rto_ns) || z->rto_ns < 1000)
                goto bad;
            break;
        case 't':
            if (!rc_conn_parse_time(optarg, &z->tick_ns) || z->tick_ns == 0)
                goto bad;
            break;
        case 'u':
            if (!rc_conn_parse_uint(optarg, 256, 4096, &v) || (v & (v - 1)))
                goto bad;
            z->mtu = (uint32_t)v;
            break;
        case 'a':
            if (!rc_conn_parse_uint(optarg, 1, 1024, &v))
                goto bad;
            z->active = (uint32_t)v;
            break;
        case 's':
            if (!strcmp(optarg, "auto"))
                z->uplink_slots = -1;
            else if (rc_conn_parse_uint(optarg, 0, 255, &v))
                z->uplink_slots = (int64_t)v;
            else
                goto bad;
            break;
        case 'L':
            if (!rc_conn_parse_uint(optarg, 1, ZS_MAX_LANES, &v))
                goto bad;
            z->lanes = (uint32_t)v;
            break;
        case 'P':
            if (!rc_conn_parse_uint(optarg, 1, ZS_MAX_LANES, &v))
                goto bad;
            z->pipeline = (uint32_t)v;
            break;
        case 'e':
            if (parse_ecn(z, optarg))
                goto bad;
            break;
        case 'q':
            if (parse_qos(z, optarg))
                goto bad;
            break;
        case 'Q':
            if (!rc_conn_parse_rate(optarg, &v) || !v)
                goto bad;
            z->qos_rate_bps = v * 8;
            break;
        case 'j':
        case 'l':
            if (parse_sched(z, optarg, o == 'j'))
                goto bad;
            break;
        default:
            usage();
            return -1;
        }
    }
    if (!z->flow || z->mode < 0 || !z->producers || !z->consumers) {
        fprintf(stderr, PROG ": --flow, --mode, --producers and --consumers are required\n");
        usage();
        return -1;
    }
    if (z->mode == ZS_PAIRS && z->producers != z->consumers) {
        fprintf(stderr, PROG ": pairs: --producers must equal --consumers\n");
        return -1;
    }
    if (z->pipeline > 1 && z->lanes > 1) {
        fprintf(stderr, PROG ": --pipeline=W already gives each consumer W lanes; give it or "
                             "--lanes, not both\n");
        return -1;
    }
    if (z->pipeline > 1)
        z->lanes = z->pipeline;
    if (z->lanes > 1 && z->mode != ZS_SHUFFLE) {
        fprintf(stderr, PROG ": --lanes and --pipeline need --mode=shuffle (a consumer with one "
                             "source has nothing to overlap; load balancing and replication keep "
                             "one)\n");
        return -1;
    }
    if (z->mode == ZS_REPLICATE && z->consumers > ZS_MAX_CONSUMERS) {
        fprintf(stderr, PROG ": replicate: at most %d consumers\n", ZS_MAX_CONSUMERS);
        return -1;
    }
    if (z->qos.n_steps && (z->mode != ZS_PAIRS || z->qos.n_flows != z->producers)) {
        fprintf(stderr, PROG ": --qos needs --mode=pairs and one ratio per flow\n");
        return -1;
    }
    qos_rates(z);
    if (!z->tick_ns)
        z->tick_ns = z->rto_ns / 4;
    if (!z->active || z->mode != ZS_LB)
        z->active = z->consumers;
    if (z->active > z->consumers)
        z->active = z->consumers;
    for (uint32_t i = 0; i < z->n_ev; i++)
        if (z->ev[i].c >= z->consumers || z->mode != ZS_LB) {
            fprintf(stderr, PROG ": --join / --leave need --mode=lb and a consumer below %u\n",
                    z->consumers);
            return -1;
        }
    return 0;
bad:
    fprintf(stderr, PROG ": bad option value '%s'\n", optarg);
    usage();
    return -1;
}

/* ---------------------------------------------------------------- endpoints */

static void ep_key(const struct zs_sw *z, bool producer, uint32_t idx, char *buf, size_t len)
{
    if (!producer)
        snprintf(buf, len, "zs/%s/c%u", z->flow, idx);
    else if (z->mode == ZS_SHUFFLE)
        snprintf(buf, len, "zs/%s/p%u.%u", z->flow, idx / z->consumers, idx % z->consumers);
    else
        snprintf(buf, len, "zs/%s/p%u", z->flow, idx);
}

static uint32_t ep_index(const struct zs_sw *z, bool producer, uint32_t idx)
{
    return producer ? idx : z->dp.np + idx;
}

/* The thread of consumer c and (pairs, shuffle) of producer p. */
static uint32_t thread_of(const struct zs_sw *z, bool producer, uint32_t idx)
{
    switch (z->mode) {
    case ZS_PAIRS:
        return idx;
    case ZS_SHUFFLE:
        return producer ? idx % z->consumers : idx;
    case ZS_REPLICATE:
        return 0;
    default:
        return producer ? ZS_NO_THREAD : idx;
    }
}

/* Learn endpoint (producer / consumer idx), answer with the switch's QPs,
 * and program its table entries and registers. */
static int setup_endpoint(struct zs_sw *z, bool producer, uint32_t idx)
{
    struct pswitch *ps = z->dp.ps;
    char key[160];
    ep_key(z, producer, idx, key, sizeof(key));
    struct zs_ep_desc *d = producer ? &z->pdesc[idx] : &z->cdesc[idx];
    if (host_oob_get(key, d, sizeof(*d))) {
        fprintf(stderr, PROG ": %s: %s\n", key, strerror(errno));
        return -1;
    }
    int64_t node = nic_node_from_gid((const union ibv_gid *)(const void *)d->gid);
    if (node < 0 || d->item_bytes < ZS_MIN_ITEM_BYTES || d->capacity == 0 ||
        d->item_bytes > (1u << 30) / d->capacity) {
        fprintf(stderr, PROG ": %s: bad endpoint (GID, item size %u, capacity %u)\n", key,
                d->item_bytes, d->capacity);
        return -1;
    }
    uint32_t e = ep_index(z, producer, idx);
    struct zs_sw_desc sd;
    memset(&sd, 0, sizeof(sd));
    nic_gid_of_node(ps_node_id(ps), (union ibv_gid *)(void *)sd.gid);
    sd.data_qpn = 0x100 + 2 * e;
    sd.ctl_qpn = 0x101 + 2 * e;
    /* PSNs start at different, non-zero points (24-bit arithmetic
     * exercised); a replication group's consumers start alike, so the
     * switch keeps one PSN counter for all of them */
    sd.data_psn = (z->mode == ZS_REPLICATE && !producer) ? 0x00fff0u : PSN_START(e);
    sd.ctl_psn = (e * 7919u + 3u) & NIC_PSN_MASK;
    if (!producer && z->lanes > 1) {
        /* lanes 1..: thread l * M + idx, its own data QP on both sides */
        sd.lanes = z->lanes;
        for (uint32_t l = 1; l < z->lanes; l++) {
            uint32_t t = l * z->consumers + idx;
            sd.lane_qpn[l] = ZS_LANE_QPN(t);
            sd.lane_psn[l] = PSN_START(z->dp.np + z->dp.nc + t);
            if (ps_reg_set(z->dp.c_next, t, sd.lane_psn[l]))
                goto full;
        }
    }
    struct zs_ep_ent ent = {.node = (uint32_t)node,
                            .pu_data_qpn = d->data_qpn,
                            .pu_ctl_qpn = d->ctl_qpn,
                            .sw_data_qpn = sd.data_qpn,
                            .sw_ctl_qpn = sd.ctl_qpn,
                            .rkey = d->rkey,
                            .base = d->base,
                            .item_bytes = d->item_bytes,
                            .capacity = d->capacity,
                            .idx = (uint16_t)idx,
                            .producer = producer};
    if (producer)
        z->pent[idx] = ent;
    else
        z->cent[idx] = ent;
    uint32_t t = thread_of(z, producer, idx);
    struct zs_conn_ent cd = {.kind = producer ? ZS_C_PDATA : ZS_C_CDATA,
                             .rid = (uint8_t)(producer ? 0 : idx),
                             .idx = (uint16_t)idx,
                             .t = (uint16_t)t,
                             .pu_node = (uint32_t)node,
                             .pu_qpn = d->data_qpn};
    struct zs_conn_ent cc = cd;
    cc.kind = producer ? ZS_C_PCTL : ZS_C_CCTL;
    cc.pu_qpn = d->ctl_qpn;
    if (ps_table_add(z->dp.conn, sd.data_qpn, &cd) || ps_table_add(z->dp.conn, sd.ctl_qpn, &cc) ||
        ps_table_add(z->dp.ep, e, &ent))
        goto full;
    if (producer) {
        if (ps_table_add(z->dp.prod, idx, &ent) || ps_table_add(z->dp.eprod, idx, &ent) ||
            ps_reg_set(z->dp.p_next, idx, sd.data_psn) ||
            ps_reg_set(z->dp.p_ctl, idx, sd.ctl_psn) ||
            ps_reg_set(z->dp.p_db, idx, d->ctl_sq_psn & NIC_PSN_MASK))
            goto full;
    } else {
        if (ps_reg_set(z->dp.c_next, idx, sd.data_psn) ||
            ps_reg_set(z->dp.c_ctl, idx, sd.ctl_psn) ||
            ps_reg_set(z->dp.c_db, idx, d->ctl_sq_psn & NIC_PSN_MASK))
            goto full;
    }
    snprintf(key + strlen(key), sizeof(key) - strlen(key), "/sw");
    host_oob_put(key, &sd, sizeof(sd));
    return 0;
full:
    fprintf(stderr, PROG ": %s: switch tables full: %s\n", key, strerror(errno));
    return -1;
}

static int wait_ready(struct zs_sw *z, bool producer, uint32_t idx)
{
    char key[160];
    ep_key(z, producer, idx, key, sizeof(key));
    snprintf(key + strlen(key), sizeof(key) - strlen(key), "/ready");
    struct zs_ready rd;
    if (host_oob_get(key, &rd, sizeof(rd)) || rd.ok != 1) {
        fprintf(stderr, PROG ": %s: endpoint failed to connect\n", key);
        return -1;
    }
    for (uint32_t l = 1; !producer && l < z->lanes; l++) {
        /* the lane's connection: a consumer data QP of thread t */
        uint32_t t = l * z->consumers + idx;
        struct zs_conn_ent cd = {.kind = ZS_C_CDATA,
                                 .idx = (uint16_t)t,
                                 .t = (uint16_t)t,
                                 .pu_node = z->cent[idx].node,
                                 .pu_qpn = rd.lane_qpn[l]};
        z->lane_qpn[t] = rd.lane_qpn[l];
        if (!rd.lane_qpn[l] || ps_table_add(z->dp.conn, ZS_LANE_QPN(t), &cd)) {
            fprintf(stderr, PROG ": %s: lane %u: %s\n", key, l,
                    rd.lane_qpn[l] ? strerror(errno) : "no QP");
            return -1;
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- threads */

static uint32_t n_src_of(const struct zs_sw *z)
{
    return z->mode == ZS_PAIRS ? 1 : z->producers;
}

static uint32_t src_p(const struct zs_sw *z, uint32_t t, uint32_t slot)
{
    switch (z->mode) {
    case ZS_PAIRS:
        return t;
    case ZS_SHUFFLE:
        return slot * z->consumers + t;
    default:
        return slot;
    }
}

/* Transfers in flight out of one producer node at most: given, or (auto,
 * shuffle) the threads spread evenly over the producers' nodes. */
static uint32_t uplink_slots(const struct zs_sw *z, uint32_t ns)
{
    if (z->uplink_slots >= 0)
        return ns > 1 && z->dp.nt <= 64 ? (uint32_t)z->uplink_slots : 0;
    if (z->mode != ZS_SHUFFLE || ns <= 1 || z->dp.nt > 64) /* n_busy: one bit a thread */
        return 0;
    bool seen[ZS_SLOT_NODES] = {0};
    uint32_t nodes = 0;
    for (uint32_t p = 0; p < z->dp.np; p++)
        if (!seen[z->pent[p].node % ZS_SLOT_NODES]) {
            seen[z->pent[p].node % ZS_SLOT_NODES] = true;
            nodes++;
        }
    /* pipeline: a consumer has one READ streaming at a time, and a slot is
     * held only while the READ streams */
    uint32_t streams = z->dp.stream ? z->consumers * z->dp.stream : z->dp.nt;
    return (streams + nodes - 1) / nodes;
}

/* Table entries of thread t (consumer c). */
static int program_thread(struct zs_sw *z, uint32_t t)
{
    struct zs_dp *dp = &z->dp;
    uint32_t ns = n_src_of(z);
    uint32_t c = z->mode == ZS_REPLICATE ? 0 : t % z->consumers, lane = t / z->consumers;
    struct zs_ep_ent lep = z->cent[c];
    if (lane > 0) { /* the lane's data QP */
        lep.pu_data_qpn = z->lane_qpn[t];
        lep.sw_data_qpn = ZS_LANE_QPN(t);
    }
    const struct zs_ep_ent *c0 = &lep;
    uint64_t max = z->batch_items ? z->batch_items : z->batch_bytes / c0->item_bytes;
    if (max == 0)
        max = 1;
    if (max > UINT32_MAX)
        max = UINT32_MAX;
    struct zs_thr_ent th = {.c = (uint16_t)c,
                            .lane = (uint16_t)lane,
                            .lanes = (uint16_t)z->lanes,
                            .n_src = (uint16_t)ns,
                            .n_cons = (uint16_t)(z->mode == ZS_REPLICATE ? z->consumers : 1),
                            .group = 1,
                            .max_batch = (uint32_t)max,
                            .item_bytes = c0->item_bytes,
                            .capacity = c0->capacity,
                            .slots = uplink_slots(z, ns),
                            .stream = dp->stream,
                            .cbase = c0->base,
                            .all_done = ns >= 64 ? UINT64_MAX : (1ull << ns) - 1};
    for (uint32_t s = 0; s < ns; s++) {
        uint32_t p = src_p(z, c, s);
        if (z->pent[p].item_bytes != c0->item_bytes) {
            fprintf(stderr, PROG ": producer %u has %u-byte items, its consumer %u-byte ones\n", p,
                    z->pent[p].item_bytes, c0->item_bytes);
            return -1;
        }
        struct zs_src_ent se = {.p = (uint16_t)p, .ep = z->pent[p]};
        if (ps_table_add(dp->src, (uint64_t)t << 16 | s, &se))
            goto full;
        if (z->mode != ZS_REPLICATE) {
            /* the pointer group of (t, s): consumer head WRITE, producer
             * tail WRITE, the thread's next pass */
            struct ps_mcast_member m[3] = {{.node = c0->node, .rid = ZS_RID_CHEAD},
                                           {.node = z->pent[p].node, .rid = ZS_RID_PTAIL},
                                           {.node = PS_PORT_RECIRC, .rid = ZS_RID_RECIRC}};
            if (ps_mcast_set(dp->ps, ZS_GRP_PTR(t, s, ns), m, 3))
                goto full;
        }
    }
    if (z->mode == ZS_REPLICATE) {
        struct ps_mcast_member m[ZS_MAX_CONSUMERS];
        for (uint32_t i = 0; i < z->consumers; i++) {
            if (z->cent[i].capacity != c0->capacity || z->cent[i].item_bytes != c0->item_bytes) {
                fprintf(stderr, PROG ": replicate: every consumer ring must be alike\n");
                return -1;
            }
            uint16_t ci = (uint16_t)i;
            if (ps_table_add(dp->mc, (uint64_t)t << 16 | i, &ci) ||
                ps_table_add(dp->mcc, (uint64_t)t << 16 | i, &z->cent[i]))
                goto full;
            m[i] = (struct ps_mcast_member){.node = z->cent[i].node, .rid = i + 1};
        }
        if (ps_mcast_set(dp->ps, 1, m, z->consumers) || ps_reg_set(dp->t_cnext, t, 0x00fff0u))
            goto full;
    }
    /* thread t starts its round robin at slot t*N/M: were every consumer
     * to begin at producer 0 (and then move in step) they would all pull
     * from one producer's link at a time while the others idle */
    uint32_t nt = dp->nt;
    if (ps_table_add(dp->thr, t, &th) || ps_table_add(dp->cons, t, c0) ||
        ps_reg_set(dp->t_rr, t, (uint64_t)t * ns / nt % ns))
        goto full;
    return 0;
full:
    fprintf(stderr, PROG ": thread %u: switch tables full: %s\n", t, strerror(errno));
    return -1;
}

/* ---------------------------------------------------------------- main */

static double per_xfer_us(const struct zs_dp_stats *st, uint32_t phase)
{
    return st->transfers ? (double)st->phase_ns[phase] / 1e3 / (double)st->transfers : 0;
}

/* Uplink-slot and stream-slot bits still set (measurement, at the end). */
static uint32_t slots_left(const struct zs_dp *dp)
{
    uint32_t n = 0;
    for (uint32_t k = 0; k < ZS_SLOT_NODES; k++)
        n += (uint32_t)__builtin_popcountll(ps_reg_peek(dp->n_busy, k));
    for (uint32_t c = 0; dp->c_busy && c < dp->nc; c++)
        n += (uint32_t)__builtin_popcountll(ps_reg_peek(dp->c_busy, c));
    return n;
}

static void report(struct zs_sw *z, uint64_t t_start_ns, uint32_t fatal)
{
    const struct zs_dp_stats *st = &z->dp.st;
    const struct ps_counters *pc = ps_get_counters(z->dp.ps);
    /* state per flow: the registers and table entries one producer-consumer
     * pair uses (the paper: ~50 B of registers, ~700 B of tables) */
    uint64_t reg_bytes = 0, tbl_bytes = 0;
    for (uint32_t i = 0; i < ps_n_resources(z->dp.ps); i++) {
        struct ps_resource r;
        ps_resource(z->dp.ps, i, &r);
        uint64_t per = r.entries ? r.sram_bytes / r.entries : 0;
        if (r.table)
            tbl_bytes += per;
        else
            reg_bytes += per;
    }
    struct host_kv kv[] = {
        {"transfers", (double)st->transfers},
        {"items", (double)st->items},
        {"bytes", (double)st->bytes},
        {"mean_batch_items", st->transfers ? (double)st->items / (double)st->transfers : 0},
        {"tokens_idle", (double)st->tokens_idle},
        {"lock_busy", (double)st->lock_busy},
        {"slot_busy", (double)st->slot_busy},
        {"reissues_read", (double)st->reissues_read},
        {"reissues_ptr", (double)st->reissues_ptr},
        {"ptr_ahead", (double)st->ptr_ahead},
        {"timeouts", (double)st->timeouts},
        {"token_restarts", (double)st->token_restarts},
        {"resp_gaps", (double)st->resp_gaps},
        {"resp_dups", (double)st->resp_dups},
        {"naks_rx", (double)st->naks_rx},
        {"fatal_naks", (double)(st->fatal_naks + fatal)},
        {"polls_tx", (double)st->polls_tx},
        {"polls_rx", (double)st->polls_rx},
        {"doorbells_rx", (double)st->doorbells_rx},
        {"scans", (double)st->scans},
        {"threads_done", (double)st->threads_done},
        {"lanes", (double)z->lanes},
        {"commit_waits", (double)st->commit_waits},
        {"pipeline", (double)(z->pipeline > 1 ? z->pipeline : 1)},
        {"stream_busy", (double)st->stream_busy},
        /* the consumers' time with a READ on its way to them (request to
         * last response), of their time since their first READ */
        {"cons_read_share", st->c_read_ns + st->c_noread_ns
                                ? (double)st->c_read_ns / (double)(st->c_read_ns + st->c_noread_ns)
                                : 0.0},
        {"cons_reads_max", (double)st->c_reads_max},
        /* the most READs on their way out of one producer node (at most the
         * uplink slots when they are used), the SLOTREL passes that gave
         * slots back after a READ's last response, and the slot bits still
         * set when the program ends (0: none leaked) */
        {"node_reads_max", (double)st->n_reads_max},
        {"slot_releases", (double)st->slot_releases},
        {"slots_left", (double)slots_left(&z->dp)},
        {"stray", (double)st->stray},
        {"cnps_relayed", (double)st->cnps_relayed},
        {"cnps_dropped", (double)st->cnps_dropped},
        {"ingress_passes", (double)pc->ingress_passes},
        {"recirculations", (double)pc->recirculations},
        {"recirc_drops", (double)pc->recirc_drops},
        {"reg_bytes_per_flow", (double)reg_bytes},
        {"table_bytes_per_flow", (double)tbl_bytes},
        {"run_ns", (double)(host_now_ns() - t_start_ns)},
        /* where a thread's time goes, per transfer (us): the READ until the
         * data are ACKed, the two pointer WRITEs, the release pass, and the
         * search for the next batch (idle) */
        {"read_us", per_xfer_us(st, ZS_PH_READ)},
        {"chead_us", per_xfer_us(st, ZS_PH_CHEAD)},
        {"ptail_us", per_xfer_us(st, ZS_PH_PTAIL)},
        {"release_us", per_xfer_us(st, ZS_PH_RELEASE)},
        {"idle_us", per_xfer_us(st, ZS_PH_IDLE)},
        {"commit_us", per_xfer_us(st, ZS_PH_COMMIT)},
        /* data WRITEs the switch marked CE from its own egress queues (in
         * the table only when non-zero: without ECN-capable traffic,
         * i.e. without DCQCN, nothing is marked) */
        {"ecn_marked", (double)st->ecn_marked},
    };
    size_t n_kv = sizeof(kv) / sizeof(kv[0]) - (st->ecn_marked ? 0 : 1);
    host_report("zs_switch", kv, n_kv);
    printf(PROG ": %s: %" PRIu64 " transfers, %" PRIu64 " items, mean batch %.1f, "
                "%" PRIu64 " READ re-issues, %" PRIu64 " pointer re-issues, %" PRIu64
                " timeouts, %" PRIu64 " recirculations\n",
           z->flow, st->transfers, st->items,
           st->transfers ? (double)st->items / (double)st->transfers : 0.0, st->reissues_read,
           st->reissues_ptr, st->timeouts, pc->recirculations);
}

int zs_switch_main(int argc, char **argv)
{
    struct zs_sw *z = calloc(1, sizeof(*z));
    if (!z)
        return 1;
    int rc = 1;
    struct pswitch *ps = ps_current();
    if (!ps) {
        fprintf(stderr, PROG ": must run on a programmable switch's CPU (host sw0 with "
                             "topology.switch.programmable: true)\n");
        goto out;
    }
    if (parse_args(z, argc, argv))
        goto out;
    struct zs_dp *dp = &z->dp;
    dp->ps = ps;
    dp->sw_node = ps_node_id(ps);
    dp->mode = z->mode;
    dp->mtu_bytes = z->mtu;
    dp->np = z->mode == ZS_SHUFFLE ? z->producers * z->consumers : z->producers;
    dp->nc = z->consumers;
    dp->nt = z->mode == ZS_REPLICATE ? 1 : z->consumers * z->lanes;
    dp->lanes = z->lanes;
    dp->stream = z->pipeline > 1 ? 1 : 0;
    dp->n_src = n_src_of(z);
    dp->rto_ns = z->rto_ns;
    dp->poll_rto_ns = z->poll_ns * 4 > 20000 ? z->poll_ns * 4 : 20000;
    dp->doorbell = z->doorbell;
    dp->ecn_kmin_bytes = z->ecn_kmin;
    dp->ecn_kmax_bytes = z->ecn_kmax;
    dp->ecn_pmax_ppm = z->ecn_pmax_ppm;
    if (zs_dp_install(dp)) {
        fprintf(stderr, PROG ": cannot install the data plane: %s\n", ps_last_error(ps));
        goto out;
    }
    z->pdesc = calloc(dp->np, sizeof(*z->pdesc));
    z->cdesc = calloc(dp->nc, sizeof(*z->cdesc));
    z->pent = calloc(dp->np, sizeof(*z->pent));
    z->cent = calloc(dp->nc, sizeof(*z->cent));
    z->c_started = calloc(dp->nc, sizeof(*z->c_started));
    dp->ph_at_ns = calloc(dp->nt, sizeof(*dp->ph_at_ns));
    dp->ph_cur = calloc(dp->nt, sizeof(*dp->ph_cur));
    dp->c_reads = calloc(dp->nc, sizeof(*dp->c_reads));
    dp->c_at_ns = calloc(dp->nc, sizeof(*dp->c_at_ns));
    dp->n_reads = calloc(ZS_SLOT_NODES, sizeof(*dp->n_reads));
    z->lane_qpn = calloc(dp->nt, sizeof(*z->lane_qpn));
    if (!z->lane_qpn || !z->pdesc || !z->cdesc || !z->pent || !z->cent || !z->c_started ||
        !dp->ph_at_ns || !dp->ph_cur || !dp->c_reads || !dp->c_at_ns || !dp->n_reads)
        goto out;
    /* the endpoints present from the start */
    for (uint32_t p = 0; p < dp->np; p++)
        if (setup_endpoint(z, true, p))
            goto out;
    for (uint32_t c = 0; c < z->active; c++)
        if (setup_endpoint(z, false, c))
            goto out;
    for (uint32_t p = 0; p < dp->np; p++)
        if (wait_ready(z, true, p))
            goto out;
    for (uint32_t c = 0; c < z->active; c++)
        if (wait_ready(z, false, c))
            goto out;
    uint32_t n_threads = z->mode == ZS_REPLICATE ? 1 : z->active * z->lanes;
    for (uint32_t t = 0; t < n_threads; t++) {
        if (program_thread(z, t))
            goto out;
        if (z->mode != ZS_REPLICATE)
            z->c_started[t % z->consumers] = true;
    }
    if (!z->doorbell && ps_pktgen_enable(ps, ZS_APP_POLL, z->poll_ns * SIM_NS, dp->np + dp->nc))
        goto out;
    /* timer packet i: thread i and producer i */
    if (ps_pktgen_enable(ps, ZS_APP_TICK, z->tick_ns * SIM_NS, dp->nt > dp->np ? dp->nt : dp->np))
        goto out;
    /* every thread's first packet, from one generator batch; then the PUs go */
    /* (no timer baseline: each register write from this CPU takes time, so
     * a baseline written here could expire before the generator's batch
     * runs -- with 4 threads at a 50 us timeout it did, and the timer then
     * started a second packet for the same thread.  A thread's first pass
     * sets its phase; until then the timer ignores it, and a generator
     * packet is not lost.) */
    if (ps_pktgen_once(ps, ZS_APP_START, n_threads))
        goto out;
    uint64_t t0 = host_now_ns();
    char skey[160];
    if (z->qos.n_steps) { /* before the start: the producers' side reads it then */
        snprintf(skey, sizeof(skey), "zs/%s/qos", z->flow);
        host_oob_put(skey, &z->qos, sizeof(z->qos));
    }
    snprintf(skey, sizeof(skey), "zs/%s/start", z->flow);
    uint32_t go = 1;
    host_oob_put(skey, &go, sizeof(go));
    /* off the data path: wait for the streams to end, joins and leaves */
    uint32_t running = n_threads, fatal = 0, next_ev = 0;
    /* events in time order */
    for (uint32_t i = 1; i < z->n_ev; i++)
        for (uint32_t k = i; k > 0 && z->ev[k].at_ns < z->ev[k - 1].at_ns; k--) {
            struct sched_ev tmp = z->ev[k];
            z->ev[k] = z->ev[k - 1];
            z->ev[k - 1] = tmp;
        }
    while (running > 0 || next_ev < z->n_ev) {
        sim_time_t deadline =
            next_ev < z->n_ev ? (sim_time_t)(t0 + z->ev[next_ev].at_ns) * SIM_NS : SIM_TIME_NEVER;
        uint32_t d[3];
        size_t got = ps_digest_recv(ps, d, sizeof(d), deadline);
        if (got == sizeof(d)) {
            if (d[0] == 1)
                running--;
            else if (d[0] == 2) {
                fatal++;
                fprintf(stderr,
                        PROG ": thread %u: the PU answered with an error NAK (syndrome "
                             "0x%02x)\n",
                        d[1], d[2]);
            }
            continue;
        }
        if (next_ev >= z->n_ev)
            break;
        const struct sched_ev *ev = &z->ev[next_ev++];
        if (ev->join && !z->c_started[ev->c]) {
            struct zs_br b = {.type = ZS_BR_TOKEN, .t = (uint16_t)ev->c};
            if (setup_endpoint(z, false, ev->c) || wait_ready(z, false, ev->c) ||
                program_thread(z, ev->c) ||
                ps_reg_set(dp->t_phase, ev->c, (uint64_t)ZS_PH_IDLE | (host_now_ns() + 1) << 8) ||
                ps_inject(ps, &b, sizeof(b)))
                goto out;
            z->c_started[ev->c] = true;
            running++;
        } else if (!ev->join && z->c_started[ev->c]) {
            ps_reg_set(dp->t_flags, ev->c, ZS_TF_STOP);
        }
    }
    /* A thread is done when its consumer has the end of its stream, but the
     * last producer tail WRITEs may still be out (they overlap the next
     * transfer, the end included): the data plane's pointer timers (t_pw, p_pw)
     * stay on until each is acknowledged -- else a producer whose last tail
     * WRITE was lost would wait for it forever. */
    for (uint32_t round = 0; round < 64; round++) {
        bool armed = false;
        for (uint32_t t = 0; t < dp->nt && !armed; t++)
            armed = (ps_reg_get(dp->t_pw, t) & 1) != 0;
        for (uint32_t p = 0; p < dp->np && !armed; p++)
            armed = (ps_reg_get(dp->p_pw, p) & 1) != 0;
        if (!armed)
            break;
        uint32_t d[3];
        ps_digest_recv(ps, d, sizeof(d), (sim_time_t)(host_now_ns() + z->rto_ns) * SIM_NS);
    }
    ps_pktgen_disable(ps, ZS_APP_POLL);
    ps_pktgen_disable(ps, ZS_APP_TICK);
    report(z, t0, fatal);
    char key[160];
    snprintf(key, sizeof(key), "zs/%s/switch_done", z->flow);
    uint32_t one = 1;
    host_oob_put(key, &one, sizeof(one));
    rc = fatal ? 1 : 0;
out:
    free(z->pdesc);
    free(z->cdesc);
    free(z->pent);
    free(z->cent);
    free(z->c_started);
    free(z->lane_qpn);
    free(z->dp.ph_at_ns);
    free(z->dp.ph_cur);
    free(z->dp.c_reads);
    free(z->dp.c_at_ns);
    free(z->dp.n_reads);
    free(z);
    return rc;
}
