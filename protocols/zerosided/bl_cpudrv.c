/* zs_cpudrv: the CPU-driven baseline of zero-sided RDMA (Jasny et al.
 * Fig. 1a, 6; the pipelined GPU join's shuffle of Fig. 15): the same rings
 * and PU kernels, but a CPU thread on the producers' node moves the items:
 *
 *   GPU kernel k   writes items into its ring (GPU memory), then the head
 *   CPU core c     for each of its flows (flows are spread over the cores):
 *                  load the ring head (an uncached read of GPU memory over
 *                  PCIe, --head-read), and for every new item post an RDMA
 *                  WRITE of it (GPUDirect: the NIC reads GPU memory) and a
 *                  WRITE of the remote head, as one post; READ the remote
 *                  tail when the remote ring looks full; on completions,
 *                  store the ring's tail (GPU memory, --tail-write)
 *   remote         a zs_pu consumer (--mode=pairs) on the other node: it
 *                  cannot tell this sender from the switch
 *
 *   zs_cpudrv --flow=NAME --flows=K --cores=C --item=SIZE (--capacity=ITEMS | --ring=BYTES)
 *             (--items=COUNT | --bytes=SIZE) [--kind=gpu|cpu] [--rate=RGbps]
 *             [--head-read=TIME] [--tail-write=TIME] [--first=F]
 *
 * It answers the consumers' endpoints zs/<flow>/c<f> as the switch would
 * (zs/<flow>/c<f>/sw), so the consumer side is the zero-sided one.  The
 * producers' check sums go to zs/<flow>/pstat/<f>/0. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocols/common/rc_conn.h"
#include "protocols/zerosided/zs.h"
#include "protocols/zerosided/zs_pu_mem.h"
#include "protocols/zerosided/zs_switch.h"
#include "protocols/zerosided/zs_verbs.h"
#include "rnicsim/host.h"

#define PROG "zs_cpudrv"
#define MAX_FLOWS 64
#define MAX_CORES 32
#define SQ_DEPTH 512 /* send queue of a flow's QP */

struct cflow {
    uint32_t id; /* the pair index (consumer zs/<flow>/c<id>) */
    uint8_t *mem;
    size_t bytes;
    struct ibv_mr *mr;
    struct ibv_qp *qp;
    struct ibv_cq *cq; /* the core's */
    volatile uint8_t *hdr;
    struct zs_ep_desc remote; /* the consumer's ring */
    /* the kernel */
    uint64_t seq, hash;
    /* the core */
    uint32_t sent, acked, rtail, sent_sig;
    bool tail_read, done_sent;
    uint8_t rtail_buf[8];
    struct ibv_mr *rtail_mr;
};

struct cdrv {
    const char *flow;
    uint32_t flows, cores, first, item, cap;
    uint64_t items, rate_bps, head_read_ns, tail_write_ns;
    int kind;
    struct zv_dev dev;
    struct cflow f[MAX_FLOWS];
    struct ibv_cq *cq[MAX_CORES];
    uint32_t core_id[MAX_CORES];
    int failed;
};

struct core_arg {
    struct cdrv *d;
    uint32_t c;
};

/* ---------------------------------------------------------------- the GPU kernels */

struct kern_arg {
    struct cdrv *d;
    struct cflow *f;
};

static void kernel(void *arg)
{
    struct kern_arg *ka = arg;
    struct cdrv *d = ka->d;
    struct cflow *f = ka->f;
    uint32_t head = 0;
    uint32_t chunk = (256u << 10) / d->item ? (256u << 10) / d->item : 1;
    if (chunk > d->cap)
        chunk = d->cap;
    for (uint64_t k = 0; k < d->items;) {
        uint32_t tail = zs_load_le32(f->hdr + ZS_TAIL_OFF) & ZS_PTR_MASK;
        uint32_t room = d->cap - ((head - tail) & ZS_PTR_MASK);
        if (!room) {
            host_relax();
            continue;
        }
        uint32_t n = room < chunk ? room : chunk;
        if (n > d->items - k)
            n = (uint32_t)(d->items - k);
        for (uint32_t i = 0; i < n; i++) {
            uint8_t *slot = f->mem + ZS_HDR_BYTES + (size_t)((head + i) % d->cap) * d->item;
            zs_item_fill(slot, d->item, f->id, 0, f->seq);
            f->hash += zs_item_key(f->id, 0, f->seq);
            f->seq++;
        }
        if (d->rate_bps)
            host_compute((uint64_t)((double)n * d->item * 1e9 / (double)d->rate_bps));
        head = (head + n) & ZS_PTR_MASK;
        k += n;
        __atomic_thread_fence(__ATOMIC_RELEASE);
        zs_store_le32(f->hdr + ZS_HEAD_OFF, head);
        host_compute(0); /* the store is seen: wake the core polling it */
    }
    zs_store_le32(f->hdr + ZS_HEAD_OFF, head | ZS_DONE_BIT);
    host_compute(0);
}

/* ---------------------------------------------------------------- the CPU cores */

enum { WR_DATA = 1, WR_TAIL_READ = 2 };

static uint64_t wr_id(uint32_t flow, uint32_t kind, uint32_t upto)
{
    return (uint64_t)flow << 40 | (uint64_t)kind << 32 | upto;
}

/* One look at flow f: post what it has; true if it did something. */
static bool serve(struct cdrv *d, struct cflow *f)
{
    host_compute(d->head_read_ns); /* uncached load of the head in GPU memory */
    uint32_t hv = zs_load_le32(f->hdr + ZS_HEAD_OFF), head = hv & ZS_PTR_MASK;
    bool did = false;
    while (f->sent != head) {
        /* two WRs per item in the send queue until completed */
        if (2 * ((f->sent - f->acked) & ZS_PTR_MASK) + 8 > SQ_DEPTH)
            break;
        uint32_t used = (f->sent - f->rtail) & ZS_PTR_MASK;
        if (used >= f->remote.capacity) {
            if (!f->tail_read) { /* the remote ring looks full: where is its tail? */
                struct ibv_sge sge = {(uintptr_t)f->rtail_buf, 4, f->rtail_mr->lkey};
                struct ibv_send_wr wr = {.wr_id = wr_id(f->id, WR_TAIL_READ, 0),
                                         .sg_list = &sge,
                                         .num_sge = 1,
                                         .opcode = IBV_WR_RDMA_READ,
                                         .send_flags = IBV_SEND_SIGNALED};
                wr.wr.rdma.remote_addr = f->remote.base + ZS_TAIL_OFF;
                wr.wr.rdma.rkey = f->remote.rkey;
                struct ibv_send_wr *bad;
                if (ibv_post_send(f->qp, &wr, &bad) == 0)
                    f->tail_read = true;
            }
            break;
        }
        /* one item: its WRITE and the remote head's, in one post */
        uint32_t slot = f->sent % d->cap, rslot = f->sent % f->remote.capacity;
        uint32_t next = (f->sent + 1) & ZS_PTR_MASK;
        uint8_t le[4];
        zs_store_le32(le, next);
        struct ibv_sge s_item = {(uintptr_t)(f->mem + ZS_HDR_BYTES + (size_t)slot * d->item),
                                 d->item, f->mr->lkey};
        struct ibv_sge s_head = {(uintptr_t)le, 4, 0};
        bool sig = ((next - f->sent_sig) & ZS_PTR_MASK) >= 16 || next == head;
        struct ibv_send_wr w_head = {.wr_id = wr_id(f->id, WR_DATA, next),
                                     .sg_list = &s_head,
                                     .num_sge = 1,
                                     .opcode = IBV_WR_RDMA_WRITE,
                                     .send_flags = IBV_SEND_INLINE | (sig ? IBV_SEND_SIGNALED : 0)};
        w_head.wr.rdma.remote_addr = f->remote.base + ZS_HEAD_OFF;
        w_head.wr.rdma.rkey = f->remote.rkey;
        struct ibv_send_wr w_item = {.wr_id = 0,
                                     .next = &w_head,
                                     .sg_list = &s_item,
                                     .num_sge = 1,
                                     .opcode = IBV_WR_RDMA_WRITE};
        w_item.wr.rdma.remote_addr = f->remote.base + ZS_HDR_BYTES + (uint64_t)rslot * d->item;
        w_item.wr.rdma.rkey = f->remote.rkey;
        struct ibv_send_wr *bad;
        int err = ibv_post_send(f->qp, &w_item, &bad);
        if (err) {
            fprintf(stderr, PROG ": flow %u: ibv_post_send: %s\n", f->id, strerror(err));
            d->failed = 1;
            return false;
        }
        if (sig)
            f->sent_sig = next;
        f->sent = next;
        did = true;
    }
    if ((hv & ZS_DONE_BIT) && f->sent == head && f->acked == head && !f->done_sent) {
        uint8_t le[4];
        zs_store_le32(le, head | ZS_DONE_BIT);
        struct ibv_sge s = {(uintptr_t)le, 4, 0};
        struct ibv_send_wr w = {.wr_id = wr_id(f->id, WR_DATA, head),
                                .sg_list = &s,
                                .num_sge = 1,
                                .opcode = IBV_WR_RDMA_WRITE,
                                .send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED};
        w.wr.rdma.remote_addr = f->remote.base + ZS_HEAD_OFF;
        w.wr.rdma.rkey = f->remote.rkey;
        struct ibv_send_wr *bad;
        if (ibv_post_send(f->qp, &w, &bad) == 0)
            f->done_sent = true;
        did = true;
    }
    return did;
}

static void core(void *arg)
{
    struct core_arg *ca = arg;
    struct cdrv *d = ca->d;
    uint32_t mine = 0;
    for (uint32_t i = ca->c; i < d->flows; i += d->cores)
        mine++;
    uint32_t finished = 0;
    while (finished < mine && !d->failed) {
        bool did = false;
        for (uint32_t i = ca->c; i < d->flows; i += d->cores)
            if (!d->f[i].done_sent || d->f[i].acked != d->f[i].sent)
                did |= serve(d, &d->f[i]);
        struct ibv_wc wc[16];
        int n = ibv_poll_cq(d->cq[ca->c], 16, wc);
        for (int k = 0; k < n; k++) {
            if (wc[k].status != IBV_WC_SUCCESS) {
                fprintf(stderr, PROG ": completion error %s\n", ibv_wc_status_str(wc[k].status));
                d->failed = 1;
                return;
            }
            struct cflow *f = &d->f[(wc[k].wr_id >> 40) - d->first];
            if (((wc[k].wr_id >> 32) & 0xff) == WR_TAIL_READ) {
                f->rtail = zs_load_le32(f->rtail_buf) & ZS_PTR_MASK;
                f->tail_read = false;
                continue;
            }
            uint32_t upto = (uint32_t)wc[k].wr_id & ZS_PTR_MASK;
            if (upto != f->acked) { /* the ring's space is free again */
                f->acked = upto;
                host_compute(d->tail_write_ns);
                zs_store_le32(f->hdr + ZS_TAIL_OFF, upto);
            }
            if (f->done_sent && f->acked == f->sent && (uint32_t)wc[k].wr_id == f->sent)
                finished++;
        }
        did |= n > 0;
        if (!did)
            host_relax();
    }
}

/* ---------------------------------------------------------------- main */

static int parse(struct cdrv *d, int argc, char **argv)
{
    static const struct option opts[] = {
        {"flow", required_argument, 0, 'f'},      {"flows", required_argument, 0, 'k'},
        {"cores", required_argument, 0, 'c'},     {"item", required_argument, 0, 's'},
        {"capacity", required_argument, 0, 'C'},  {"items", required_argument, 0, 'n'},
        {"kind", required_argument, 0, 'K'},      {"rate", required_argument, 0, 'R'},
        {"head-read", required_argument, 0, 'h'}, {"tail-write", required_argument, 0, 't'},
        {"first", required_argument, 0, 'F'},     {"bytes", required_argument, 0, 'B'},
        {"ring", required_argument, 0, 'G'},      {0, 0, 0, 0},
    };
    d->flows = d->cores = 1;
    d->item = 4096;
    d->cap = 256;
    d->kind = ZS_PU_GPU;
    /* an uncached CPU load from GPU memory through the BAR: a PCIe round
     * trip (pcie.read_latency 531 ns) plus the GPU's side, estimated at
     * 800 ns; a posted store of the tail: 100 ns (estimates) */
    d->head_read_ns = 800;
    d->tail_write_ns = 100;
    uint64_t v, bytes = 0, ring = 0;
    int o;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 'f':
            d->flow = optarg;
            break;
        case 'B':
            if (!rc_conn_parse_uint(optarg, 1, 1ull << 40, &bytes))
                goto bad;
            break;
        case 'G':
            if (!rc_conn_parse_uint(optarg, 1, 1u << 30, &ring))
                goto bad;
            break;
        case 'k':
            if (!rc_conn_parse_uint(optarg, 1, MAX_FLOWS, &v))
                goto bad;
            d->flows = (uint32_t)v;
            break;
        case 'c':
            if (!rc_conn_parse_uint(optarg, 1, MAX_CORES, &v))
                goto bad;
            d->cores = (uint32_t)v;
            break;
        case 's':
            if (!rc_conn_parse_uint(optarg, ZS_MIN_ITEM_BYTES, 1u << 30, &v))
                goto bad;
            d->item = (uint32_t)v;
            break;
        case 'C':
            if (!rc_conn_parse_uint(optarg, 1, 1u << 30, &v))
                goto bad;
            d->cap = (uint32_t)v;
            break;
        case 'n':
            if (!rc_conn_parse_uint(optarg, 1, ZS_PTR_MASK, &d->items))
                goto bad;
            break;
        case 'K':
            d->kind = strcmp(optarg, "cpu") == 0 ? ZS_PU_CPU : ZS_PU_GPU;
            break;
        case 'R':
            if (!rc_conn_parse_rate(optarg, &d->rate_bps))
                goto bad;
            break;
        case 'h':
            if (!rc_conn_parse_time(optarg, &d->head_read_ns))
                goto bad;
            break;
        case 't':
            if (!rc_conn_parse_time(optarg, &d->tail_write_ns))
                goto bad;
            break;
        case 'F':
            if (!rc_conn_parse_uint(optarg, 0, 1023, &v))
                goto bad;
            d->first = (uint32_t)v;
            break;
        default:
            return -1;
        }
    }
    if (bytes)
        d->items = (bytes + d->item - 1) / d->item;
    if (ring)
        d->cap = ring / d->item > 2 ? (uint32_t)(ring / d->item) : 2;
    if (!d->flow || !d->items) {
        fprintf(stderr, PROG ": --flow and --items are required\n");
        return -1;
    }
    if (d->cores > d->flows)
        d->cores = d->flows;
    return 0;
bad:
    fprintf(stderr, PROG ": bad option value '%s'\n", optarg);
    return -1;
}

int zs_cpudrv_main(int argc, char **argv)
{
    struct cdrv *d = calloc(1, sizeof(*d));
    if (!d)
        return 1;
    int rc = 1;
    if (parse(d, argc, argv) || zv_open(&d->dev, PROG))
        goto out;
    for (uint32_t c = 0; c < d->cores; c++)
        if (!(d->cq[c] = ibv_create_cq(d->dev.ctx, 1024, NULL, NULL, 0)))
            goto out;
    /* every flow: the kernel's ring, a QP to the consumer (answered like the switch) */
    for (uint32_t i = 0; i < d->flows; i++) {
        struct cflow *f = &d->f[i];
        f->id = d->first + i;
        f->bytes = ZS_HDR_BYTES + (size_t)d->item * d->cap;
        f->mem = zs_pu_mem_alloc(d->kind, f->bytes);
        if (!f->mem)
            goto out;
        memset(f->mem, 0, f->bytes);
        f->hdr = f->mem;
        f->cq = d->cq[i % d->cores];
        f->mr = ibv_reg_mr(d->dev.pd, f->mem, f->bytes, IBV_ACCESS_LOCAL_WRITE);
        f->rtail_mr =
            ibv_reg_mr(d->dev.pd, f->rtail_buf, sizeof(f->rtail_buf), IBV_ACCESS_LOCAL_WRITE);
        f->qp = zv_qp(&d->dev, f->cq, f->cq, IBV_QPT_RC, SQ_DEPTH, 1);
        if (!f->mr || !f->rtail_mr || !f->qp)
            goto out;
        char key[128];
        snprintf(key, sizeof(key), "zs/%s/c%u", d->flow, f->id);
        if (host_oob_get(key, &f->remote, sizeof(f->remote)))
            goto out;
        struct zs_sw_desc sd;
        memset(&sd, 0, sizeof(sd));
        memcpy(sd.gid, d->dev.gid.raw, 16);
        sd.data_qpn = f->qp->qp_num;
        sd.ctl_qpn = f->qp->qp_num; /* the consumer's control QP stays idle */
        sd.data_psn = 100 + f->id;
        snprintf(key, sizeof(key), "zs/%s/c%u/sw", d->flow, f->id);
        host_oob_put(key, &sd, sizeof(sd));
        if (zv_rc_up(f->qp, f->remote.gid, f->remote.data_qpn, 0, sd.data_psn, IBV_MTU_1024)) {
            fprintf(stderr, PROG ": flow %u: connect: %s\n", f->id, strerror(errno));
            goto out;
        }
        snprintf(key, sizeof(key), "zs/%s/c%u/ready", d->flow, f->id);
        struct zs_ready ok;
        if (host_oob_get(key, &ok, sizeof(ok)))
            goto out;
    }
    char gokey[128];
    snprintf(gokey, sizeof(gokey), "zs/%s/start", d->flow);
    uint32_t go = 1;
    host_oob_put(gokey, &go, sizeof(go));
    uint64_t t_start = host_now_ns();
    struct kern_arg ka[MAX_FLOWS];
    struct core_arg ca[MAX_CORES];
    int th[MAX_FLOWS + MAX_CORES], nth = 0;
    for (uint32_t i = 0; i < d->flows; i++) {
        ka[i] = (struct kern_arg){d, &d->f[i]};
        th[nth++] = host_thread_start(kernel, &ka[i]);
    }
    for (uint32_t c = 0; c < d->cores; c++) {
        ca[c] = (struct core_arg){d, c};
        th[nth++] = host_thread_start(core, &ca[c]);
    }
    for (int i = 0; i < nth; i++)
        if (th[i] < 0 || host_thread_join(th[i]))
            d->failed = 1;
    for (uint32_t i = 0; i < d->flows; i++) {
        char key[128];
        snprintf(key, sizeof(key), "zs/%s/pstat/%u/0", d->flow, d->f[i].id);
        uint64_t st[2] = {d->f[i].seq, d->f[i].hash};
        host_oob_put(key, st, sizeof(st));
        /* as the zero-sided producers report it (the job's start) */
        struct host_kv kv[] = {{"producer", d->f[i].id},
                               {"items", (double)d->f[i].seq},
                               {"bytes", (double)(d->f[i].seq * d->item)},
                               {"t_start_ns", (double)t_start},
                               {"t_drained_ns", (double)host_now_ns()}};
        host_report("zs_producer", kv, sizeof(kv) / sizeof(kv[0]));
    }
    char key[128];
    snprintf(key, sizeof(key), "zs/%s/switch_done", d->flow);
    uint32_t one = 1;
    host_oob_put(key, &one, sizeof(one));
    rc = d->failed;
out:
    for (uint32_t i = 0; i < d->flows; i++) {
        struct cflow *f = &d->f[i];
        if (f->qp)
            ibv_destroy_qp(f->qp);
        if (f->mr)
            ibv_dereg_mr(f->mr);
        if (f->rtail_mr)
            ibv_dereg_mr(f->rtail_mr);
        zs_pu_mem_free(d->kind, f->mem, f->bytes);
    }
    for (uint32_t c = 0; c < d->cores; c++)
        if (d->cq[c])
            ibv_destroy_cq(d->cq[c]);
    zv_close(&d->dev);
    free(d);
    return rc;
}
