/* zs_dfirepl: the replication baseline of Jasny et al. Fig. 12 -- DFI's
 * replicate flow (Thostrup et al. 2022) over RDMA UD multicast with
 * two-sided SEND / RECEIVE, with or without software global ordering.
 *
 *   source  fills segments (at most one UD message, 4 KiB) with tuples and
 *           SENDs each to the multicast group; it never has more than
 *           --window segments unconsumed at the slowest target (credits
 *           the targets RDMA-WRITE back, one per half window); with
 *           --ordered each segment first takes a global sequence number
 *           from a sequencer (an RDMA FETCH_AND_ADD on a counter in target
 *           0's memory, up to 16 in flight), as DFI's ordered multicast
 *           does
 *   target  keeps --window receives posted, takes segments in sequence
 *           order (ordered: holds early ones back), checks every tuple and
 *           reposts; every tuple of the stream must arrive, in order
 *
 *   zs_dfirepl --flow=NAME --role=source|target --index=I --targets=M
 *              --tuple=SIZE --bytes=SIZE [--ordered] [--window=S] [--rate=RATE]
 *
 * --rate: the PU's production (source) / consumption (target) rate, as
 * for zs_pu (default: a copy at the host's memcpy rate). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocols/common/pages.h"
#include "protocols/common/rc_conn.h"
#include "protocols/zerosided/zs.h"
#include "protocols/zerosided/zs_switch.h"
#include "protocols/zerosided/zs_verbs.h"
#include "rnicsim/host.h"

#define PROG "zs_dfirepl"
#define MAX_T 32
#define SEG 4096u /* one UD message (the path MTU) */
#define GRH 40u
#define HDR 16u /* {sequence u64, tuples u32, end u32} */
#define QKEY 0x1234567u
#define SEQ_WINDOW 16

struct dr {
    const char *flow;
    bool source, ordered;
    uint32_t index, targets, tuple, window;
    uint64_t bytes, items, rate;
    struct zv_dev dev;
    struct ibv_cq *cq, *rcq;
    struct ibv_qp *ud, *rc[MAX_T], *seq_qp;
    struct ibv_ah *ah;
    uint8_t *mem;
    size_t mem_bytes;
    struct ibv_mr *mr;
    union ibv_gid mgid;
    uint64_t credit_addr, seq_addr; /* the source's credit words; target 0's sequencer */
    uint32_t credit_rkey, seq_rkey;
};

static void cost(struct dr *d, uint8_t *scratch, const uint8_t *src, uint64_t bytes)
{
    if (d->rate)
        host_compute((uint64_t)((double)bytes * 1e9 / (double)d->rate));
    else
        host_memcpy(scratch, src, bytes);
}

static int post_recv(struct dr *d, uint32_t slot)
{
    struct ibv_sge sge = {(uintptr_t)(d->mem + (size_t)slot * (GRH + SEG)), GRH + SEG, d->mr->lkey};
    struct ibv_recv_wr wr = {.wr_id = slot, .sg_list = &sge, .num_sge = 1}, *bad;
    return ibv_post_recv(d->ud, &wr, &bad);
}

/* ---------------------------------------------------------------- source */

static int source(struct dr *d)
{
    uint32_t per = (SEG - HDR) / d->tuple;
    uint64_t nseg = (d->items + per - 1) / per + 1; /* + the end marker */
    /* memory: window x SEG staging, credits[M], sequence numbers */
    uint8_t *stage = d->mem, *scratch = pages_alloc(SEG);
    volatile uint64_t *credit = (volatile uint64_t *)(void *)(d->mem + (size_t)d->window * SEG);
    uint64_t *seqs = (uint64_t *)(void *)(d->mem + (size_t)d->window * SEG + MAX_T * 8);
    if (!scratch)
        return 1;
    uint64_t sent = 0, k = 0, seq_posted = 0, seq_got = 0, hash = 0;
    uint32_t inflight = 0;
    while (sent < nseg || inflight) {
        bool did = false;
        /* ordered: sequence numbers ahead of the segments */
        while (d->ordered && seq_posted < nseg && seq_posted - seq_got < SEQ_WINDOW &&
               seq_posted < sent + SEQ_WINDOW) {
            struct ibv_sge sge = {(uintptr_t)&seqs[seq_posted % SEQ_WINDOW], 8, d->mr->lkey};
            struct ibv_send_wr wr = {.wr_id = 1ull << 40 | seq_posted,
                                     .sg_list = &sge,
                                     .num_sge = 1,
                                     .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
                                     .send_flags = IBV_SEND_SIGNALED},
                               *bad;
            wr.wr.atomic.remote_addr = d->seq_addr;
            wr.wr.atomic.rkey = d->seq_rkey;
            wr.wr.atomic.compare_add = 1;
            if (ibv_post_send(d->seq_qp, &wr, &bad))
                return 1;
            seq_posted++;
            did = true;
        }
        uint64_t min_credit = UINT64_MAX;
        for (uint32_t t = 0; t < d->targets; t++)
            if (credit[t] < min_credit)
                min_credit = credit[t];
        if (sent < nseg && sent - min_credit < d->window && inflight < d->window &&
            (!d->ordered || seq_got > sent)) {
            uint8_t *seg = stage + (size_t)(sent % d->window) * SEG;
            uint32_t n = 0;
            for (; n < per && k < d->items; n++, k++) {
                zs_item_fill(seg + HDR + (size_t)n * d->tuple, d->tuple, d->index, 0, k);
                hash += zs_item_key(d->index, 0, k);
            }
            uint64_t seqno = d->ordered ? seqs[sent % SEQ_WINDOW] : sent;
            uint32_t h2[2] = {n, k == d->items && n == 0 ? 1u : 0u};
            memcpy(seg, &seqno, 8);
            memcpy(seg + 8, h2, 8);
            cost(d, scratch, seg, (uint64_t)n * d->tuple);
            struct ibv_sge sge = {(uintptr_t)seg, HDR + n * d->tuple, d->mr->lkey};
            struct ibv_send_wr wr = {.wr_id = sent,
                                     .sg_list = &sge,
                                     .num_sge = 1,
                                     .opcode = IBV_WR_SEND,
                                     .send_flags = IBV_SEND_SIGNALED},
                               *bad;
            wr.wr.ud.ah = d->ah;
            wr.wr.ud.remote_qpn = 0xffffff;
            wr.wr.ud.remote_qkey = QKEY;
            int err = ibv_post_send(d->ud, &wr, &bad);
            if (err) {
                fprintf(stderr, PROG ": send: %s\n", strerror(err));
                return 1;
            }
            sent++;
            inflight++;
            did = true;
        }
        struct ibv_wc wc[16];
        int got = ibv_poll_cq(d->cq, 16, wc);
        for (int i = 0; i < got; i++) {
            if (wc[i].status != IBV_WC_SUCCESS) {
                fprintf(stderr, PROG ": %s\n", ibv_wc_status_str(wc[i].status));
                return 1;
            }
            if (wc[i].wr_id >> 40)
                seq_got++;
            else
                inflight--;
        }
        did |= got > 0;
        if (!did)
            host_relax();
    }
    /* the targets check what arrived against this */
    char key[128];
    snprintf(key, sizeof(key), "dr/%s/stat", d->flow);
    uint64_t st[2] = {d->items, hash};
    host_oob_put(key, st, sizeof(st));
    free(scratch);
    return 0;
}

/* ---------------------------------------------------------------- target */

static int target(struct dr *d)
{
    uint8_t *scratch = pages_alloc(SEG);
    uint64_t next_seq = 0, items = 0, hash = 0, consumed = 0, t_first = 0, t_last = 0;
    uint64_t t0 = host_now_ns();
    uint32_t *held = calloc(d->window, sizeof(*held)); /* ordered: slot + 1 of a held segment */
    if (!scratch || !held)
        return 1;
    bool end = false;
    while (!end) {
        struct ibv_wc wc[16];
        int got = ibv_poll_cq(d->rcq, 16, wc);
        if (got < 0)
            return 1;
        for (int i = 0; i < got; i++) {
            if (wc[i].status != IBV_WC_SUCCESS) {
                fprintf(stderr, PROG ": target %u: %s\n", d->index,
                        ibv_wc_status_str(wc[i].status));
                return 1;
            }
            uint32_t slot = (uint32_t)wc[i].wr_id;
            uint64_t seqno;
            memcpy(&seqno, d->mem + (size_t)slot * (GRH + SEG) + GRH, 8);
            if (seqno < next_seq || seqno >= next_seq + d->window) {
                fprintf(stderr,
                        PROG ": VIOLATION: target %u: segment %" PRIu64 " (expected %" PRIu64 ")\n",
                        d->index, seqno, next_seq);
                return 1;
            }
            held[seqno % d->window] = slot + 1; /* in order, or held until its turn */
        }
        /* deliver what is next in the (global) order */
        while (held[next_seq % d->window]) {
            uint32_t slot = held[next_seq % d->window] - 1;
            held[next_seq % d->window] = 0;
            const uint8_t *seg = d->mem + (size_t)slot * (GRH + SEG) + GRH;
            uint32_t h2[2];
            memcpy(h2, seg + 8, 8);
            if (!t_first)
                t_first = host_now_ns();
            for (uint32_t t = 0; t < h2[0]; t++) {
                uint32_t pr;
                uint64_t sq;
                if (!zs_item_check(seg + HDR + (size_t)t * d->tuple, d->tuple, 0, &pr, &sq) ||
                    sq != items) {
                    fprintf(stderr,
                            PROG ": VIOLATION: target %u: tuple %" PRIu64 " (expected %" PRIu64
                                 ")\n",
                            d->index, sq, items);
                    return 1;
                }
                hash += zs_item_key(pr, 0, sq);
                items++;
            }
            cost(d, scratch, seg + HDR, (uint64_t)h2[0] * d->tuple);
            t_last = host_now_ns();
            end = h2[1] != 0;
            next_seq++;
            if (post_recv(d, slot))
                return 1;
            if (++consumed % (d->window / 2) == 0 || end) { /* credits to the source */
                uint64_t c = next_seq;
                struct ibv_sge sge = {(uintptr_t)&c, 8, 0};
                struct ibv_send_wr wr = {.opcode = IBV_WR_RDMA_WRITE,
                                         .sg_list = &sge,
                                         .num_sge = 1,
                                         .send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED},
                                   *bad;
                wr.wr.rdma.remote_addr = d->credit_addr + d->index * 8;
                wr.wr.rdma.rkey = d->credit_rkey;
                if (ibv_post_send(d->rc[0], &wr, &bad) || zv_wait(d->cq, 1, PROG))
                    return 1;
            }
            if (end)
                break;
        }
    }
    char key[128];
    uint64_t st[2];
    snprintf(key, sizeof(key), "dr/%s/stat", d->flow);
    host_oob_get(key, st, sizeof(st));
    if (st[0] != items || st[1] != hash) {
        fprintf(stderr, PROG ": VIOLATION: target %u got %" PRIu64 " of %" PRIu64 " tuples\n",
                d->index, items, st[0]);
        return 1;
    }
    double secs = (double)(t_last - t_first) * 1e-9;
    struct host_kv kv[] = {{"consumer", d->index},
                           {"items", (double)items},
                           {"bytes", (double)(items * d->tuple)},
                           {"t_start_ns", (double)t0},
                           {"t_first_ns", (double)t_first},
                           {"t_last_ns", (double)t_last},
                           {"first_bytes", 0},
                           {"gbps", secs > 0 ? (double)(items * d->tuple) * 8 / secs / 1e9 : 0}};
    host_report("zs_consumer", kv, sizeof(kv) / sizeof(kv[0]));
    struct host_kv oc[] = {{"messages_checked", (double)items}};
    host_report("order_check", oc, 1);
    free(scratch);
    free(held);
    return 0;
}

/* ---------------------------------------------------------------- set-up */

int zs_dfirepl_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"flow", required_argument, 0, 'f'},  {"role", required_argument, 0, 'r'},
        {"index", required_argument, 0, 'i'}, {"targets", required_argument, 0, 'm'},
        {"tuple", required_argument, 0, 't'}, {"bytes", required_argument, 0, 'b'},
        {"ordered", no_argument, 0, 'o'},     {"window", required_argument, 0, 'w'},
        {"rate", required_argument, 0, 'R'},  {0, 0, 0, 0},
    };
    struct dr *d = calloc(1, sizeof(*d));
    if (!d)
        return 1;
    d->tuple = 64;
    d->window = 64;
    int o, rc = 1, role = -1;
    uint64_t v;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 'f':
            d->flow = optarg;
            break;
        case 'r':
            role = !strcmp(optarg, "source") ? 1 : !strcmp(optarg, "target") ? 0 : -1;
            break;
        case 'i':
            if (!rc_conn_parse_uint(optarg, 0, MAX_T - 1, &v))
                goto bad;
            d->index = (uint32_t)v;
            break;
        case 'm':
            if (!rc_conn_parse_uint(optarg, 1, MAX_T, &v))
                goto bad;
            d->targets = (uint32_t)v;
            break;
        case 't':
            if (!rc_conn_parse_uint(optarg, ZS_MIN_ITEM_BYTES, SEG - HDR, &v))
                goto bad;
            d->tuple = (uint32_t)v;
            break;
        case 'b':
            if (!rc_conn_parse_uint(optarg, 1, 1ull << 36, &d->bytes))
                goto bad;
            break;
        case 'o':
            d->ordered = true;
            break;
        case 'w':
            if (!rc_conn_parse_uint(optarg, 4, 4096, &v))
                goto bad;
            d->window = (uint32_t)v;
            break;
        case 'R':
            if (!rc_conn_parse_rate(optarg, &d->rate))
                goto bad;
            break;
        default:
            goto out;
        }
    }
    if (!d->flow || role < 0 || !d->targets || (role == 1 && !d->bytes)) {
        fprintf(stderr, PROG ": --flow, --role, --targets (and --bytes at the source) are "
                             "required\n");
        goto out;
    }
    d->source = role == 1;
    if (!d->source && d->index >= d->targets) { /* not part of this run */
        rc = 0;
        goto out;
    }
    d->items = (d->bytes + d->tuple - 1) / d->tuple;
    if (zv_open(&d->dev, PROG))
        goto out;
    /* the group: ::ffff:239.x.y.z from the flow's name */
    uint32_t h = 2166136261u;
    for (const char *c = d->flow; *c; c++)
        h = (h ^ (uint8_t)*c) * 16777619u;
    d->mgid.raw[10] = d->mgid.raw[11] = 0xff;
    d->mgid.raw[12] = 239;
    d->mgid.raw[13] = (uint8_t)(h >> 16);
    d->mgid.raw[14] = (uint8_t)(h >> 8);
    d->mgid.raw[15] = (uint8_t)h;
    d->mem_bytes = d->source ? (size_t)d->window * SEG + MAX_T * 8 + SEQ_WINDOW * 8
                             : (size_t)d->window * (GRH + SEG) + 64;
    if (posix_memalign((void **)&d->mem, 4096, d->mem_bytes))
        goto out;
    memset(d->mem, 0, d->mem_bytes);
    d->mr = ibv_reg_mr(d->dev.pd, d->mem, d->mem_bytes,
                       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
    d->cq = ibv_create_cq(d->dev.ctx, 4096, NULL, NULL, 0);
    d->rcq = ibv_create_cq(d->dev.ctx, 4096, NULL, NULL, 0);
    if (!d->mr || !d->cq || !d->rcq)
        goto out;
    d->ud = zv_qp(&d->dev, d->cq, d->rcq, IBV_QPT_UD, 2 * d->window, d->window);
    if (!d->ud || zv_ud_up(d->ud, QKEY, 1))
        goto out;
    char key[128];
    struct zv_ep ep;
    if (d->source) {
        struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1};
        aa.grh.dgid = d->mgid;
        aa.grh.hop_limit = 64;
        if (!(d->ah = ibv_create_ah(d->dev.pd, &aa)))
            goto out;
        for (uint32_t t = 0; t < d->targets; t++) {
            if (!(d->rc[t] = zv_qp(&d->dev, d->cq, d->cq, IBV_QPT_RC, 16, 1)))
                goto out;
            snprintf(key, sizeof(key), "dr/%s/src.%u", d->flow, t);
            zv_ep_put(key, &d->dev, d->rc[t], d->mr, 1);
        }
        if (!(d->seq_qp = zv_qp(&d->dev, d->cq, d->cq, IBV_QPT_RC, 2 * SEQ_WINDOW, 1)))
            goto out;
        snprintf(key, sizeof(key), "dr/%s/src.seq", d->flow);
        zv_ep_put(key, &d->dev, d->seq_qp, d->mr, 1);
        for (uint32_t t = 0; t < d->targets; t++) {
            snprintf(key, sizeof(key), "dr/%s/tgt.%u", d->flow, t);
            if (zv_ep_get(key, &ep) || zv_rc_up(d->rc[t], ep.gid, ep.qpn, 1, 1, IBV_MTU_1024))
                goto out;
        }
        snprintf(key, sizeof(key), "dr/%s/tgt.seq", d->flow);
        if (zv_ep_get(key, &ep) || zv_rc_up(d->seq_qp, ep.gid, ep.qpn, 1, 1, IBV_MTU_1024))
            goto out;
        d->seq_addr = ep.addr + (size_t)d->window * (GRH + SEG);
        d->seq_rkey = ep.rkey;
        for (uint32_t t = 0; t < d->targets; t++) {
            uint32_t one;
            snprintf(key, sizeof(key), "dr/%s/ready.%u", d->flow, t);
            host_oob_get(key, &one, sizeof(one));
        }
        rc = source(d);
    } else {
        if (ibv_attach_mcast(d->ud, &d->mgid, 0)) {
            fprintf(stderr, PROG ": ibv_attach_mcast failed\n");
            goto out;
        }
        if (!(d->rc[0] = zv_qp(&d->dev, d->cq, d->cq, IBV_QPT_RC, 16, 1)))
            goto out;
        snprintf(key, sizeof(key), "dr/%s/tgt.%u", d->flow, d->index);
        zv_ep_put(key, &d->dev, d->rc[0], d->mr, 1);
        if (d->index == 0) { /* the sequencer's counter lives here */
            if (!(d->seq_qp = zv_qp(&d->dev, d->cq, d->cq, IBV_QPT_RC, 4, 1)))
                goto out;
            snprintf(key, sizeof(key), "dr/%s/tgt.seq", d->flow);
            zv_ep_put(key, &d->dev, d->seq_qp, d->mr, 1);
            snprintf(key, sizeof(key), "dr/%s/src.seq", d->flow);
            if (zv_ep_get(key, &ep) || zv_rc_up(d->seq_qp, ep.gid, ep.qpn, 1, 1, IBV_MTU_1024))
                goto out;
        }
        snprintf(key, sizeof(key), "dr/%s/src.%u", d->flow, d->index);
        if (zv_ep_get(key, &ep) || zv_rc_up(d->rc[0], ep.gid, ep.qpn, 1, 1, IBV_MTU_1024))
            goto out;
        d->credit_addr = ep.addr + (size_t)d->window * SEG;
        d->credit_rkey = ep.rkey;
        uint32_t one = 1;
        snprintf(key, sizeof(key), "dr/%s/ready.%u", d->flow, d->index);
        /* receives posted before the source may send */
        for (uint32_t s = 0; s < d->window; s++)
            if (post_recv(d, s))
                goto out;
        host_oob_put(key, &one, sizeof(one));
        rc = target(d);
    }
    /* keep the QPs until everyone is done */
    snprintf(key, sizeof(key), "dr/%s/done.%c%u", d->flow, d->source ? 's' : 't', d->index);
    uint32_t one = 1;
    host_oob_put(key, &one, sizeof(one));
    snprintf(key, sizeof(key), "dr/%s/done.s0", d->flow);
    host_oob_get(key, &one, sizeof(one));
    for (uint32_t t = 0; t < d->targets; t++) {
        snprintf(key, sizeof(key), "dr/%s/done.t%u", d->flow, t);
        host_oob_get(key, &one, sizeof(one));
    }
    goto out;
bad:
    fprintf(stderr, PROG ": bad option value '%s'\n", optarg);
out:
    for (uint32_t t = 0; t < MAX_T; t++)
        if (d->rc[t])
            ibv_destroy_qp(d->rc[t]);
    if (d->seq_qp)
        ibv_destroy_qp(d->seq_qp);
    if (d->ud)
        ibv_destroy_qp(d->ud);
    if (d->ah)
        ibv_destroy_ah(d->ah);
    if (d->mr)
        ibv_dereg_mr(d->mr);
    if (d->cq)
        ibv_destroy_cq(d->cq);
    if (d->rcq)
        ibv_destroy_cq(d->rcq);
    zv_close(&d->dev);
    free(d->mem);
    free(d);
    return rc;
}
