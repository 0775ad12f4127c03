/* zs_nvshmem: the NVSHMEM baseline of Jasny et al. Fig. 8 -- GPU-initiated
 * non-blocking PUTs (nvshmem_putmem_nbi) between GPUs, without any CPU
 * after launch and without distributed coordination (a uniform workload:
 * NVSHMEM's best case, as the paper says).
 *
 * Every node runs K "kernels" (threads standing for GPU thread blocks
 * that post their own WQEs, as NVSHMEM's InfiniBand GPUDirect Async
 * transport does); each puts items from its GPU memory into the symmetric
 * heap (GPU memory) of the other nodes, round robin, keeping at most
 * --window puts outstanding (nvshmem_quiet when the window is full).  No
 * receiver code runs: the data land in the heap.  Each node reports the
 * bytes it put and when its puts completed.
 *
 *   zs_nvshmem --flow=NAME --nodes=N --index=I [--kernels=K] --item=SIZE
 *              --bytes=SIZE (per kernel) [--window=W] */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocols/common/rc_conn.h"
#include "protocols/zerosided/zs_switch.h"
#include "protocols/zerosided/zs_verbs.h"
#include "rnicsim/host.h"

#define PROG "zs_nvshmem"
#define MAX_NODES 16
#define MAX_KERNELS 8
#define HEAP_SLOTS 4 /* items of the symmetric heap per (source node, kernel) */

struct nv {
    const char *flow;
    uint32_t nodes, index, kernels, window;
    uint64_t item, bytes;
    struct zv_dev dev;
    uint8_t *src, *heap;
    size_t src_bytes, heap_bytes;
    struct ibv_mr *src_mr, *heap_mr;
    struct ibv_cq *cq[MAX_KERNELS];
    struct ibv_qp *qp[MAX_KERNELS][MAX_NODES]; /* kernel k -> node j */
    struct zv_ep peer_heap[MAX_NODES];
    uint64_t t_done[MAX_KERNELS], put_bytes[MAX_KERNELS];
    int failed;
};

struct karg {
    struct nv *n;
    uint32_t k;
};

static void kernel(void *arg)
{
    struct karg *ka = arg;
    struct nv *n = ka->n;
    uint32_t k = ka->k;
    uint64_t puts = n->bytes / n->item, posted = 0, done = 0;
    uint32_t dest = (n->index + 1) % n->nodes;
    while (done < puts && !n->failed) {
        while (posted < puts && posted - done < n->window) {
            if (dest == n->index)
                dest = (dest + 1) % n->nodes;
            /* my slot in the destination's heap: (source node, kernel) */
            uint64_t slot =
                ((uint64_t)n->index * n->kernels + k) * HEAP_SLOTS + posted % HEAP_SLOTS;
            struct ibv_sge sge = {(uintptr_t)(n->src + (size_t)k * n->item), (uint32_t)n->item,
                                  n->src_mr->lkey};
            struct ibv_send_wr wr = {.wr_id = posted,
                                     .sg_list = &sge,
                                     .num_sge = 1,
                                     .opcode = IBV_WR_RDMA_WRITE,
                                     .send_flags = IBV_SEND_SIGNALED};
            wr.wr.rdma.remote_addr = n->peer_heap[dest].addr + slot * n->item;
            wr.wr.rdma.rkey = n->peer_heap[dest].rkey;
            struct ibv_send_wr *bad;
            int err = ibv_post_send(n->qp[k][dest], &wr, &bad);
            if (err) {
                fprintf(stderr, PROG ": post: %s\n", strerror(err));
                n->failed = 1;
                return;
            }
            posted++;
            dest = (dest + 1) % n->nodes;
        }
        struct ibv_wc wc[16];
        int got = ibv_poll_cq(n->cq[k], 16, wc); /* nvshmem_quiet */
        for (int i = 0; i < got; i++)
            if (wc[i].status != IBV_WC_SUCCESS) {
                fprintf(stderr, PROG ": put failed: %s\n", ibv_wc_status_str(wc[i].status));
                n->failed = 1;
            }
        done += (uint64_t)(got > 0 ? got : 0);
    }
    n->t_done[k] = host_now_ns();
    n->put_bytes[k] = done * n->item;
}

int zs_nvshmem_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"flow", required_argument, 0, 'f'},   {"nodes", required_argument, 0, 'n'},
        {"index", required_argument, 0, 'i'},  {"kernels", required_argument, 0, 'k'},
        {"item", required_argument, 0, 's'},   {"bytes", required_argument, 0, 'b'},
        {"window", required_argument, 0, 'w'}, {0, 0, 0, 0},
    };
    struct nv *n = calloc(1, sizeof(*n));
    if (!n)
        return 1;
    n->kernels = 2;
    n->window = 8;
    n->item = 512 << 10;
    int o, rc = 1;
    uint64_t v;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 'f':
            n->flow = optarg;
            break;
        case 'n':
            if (!rc_conn_parse_uint(optarg, 2, MAX_NODES, &v))
                goto bad;
            n->nodes = (uint32_t)v;
            break;
        case 'i':
            if (!rc_conn_parse_uint(optarg, 0, MAX_NODES - 1, &v))
                goto bad;
            n->index = (uint32_t)v;
            break;
        case 'k':
            if (!rc_conn_parse_uint(optarg, 1, MAX_KERNELS, &v))
                goto bad;
            n->kernels = (uint32_t)v;
            break;
        case 's':
            if (!rc_conn_parse_uint(optarg, 1, 1u << 30, &n->item))
                goto bad;
            break;
        case 'b':
            if (!rc_conn_parse_uint(optarg, 1, 1ull << 40, &n->bytes))
                goto bad;
            break;
        case 'w':
            if (!rc_conn_parse_uint(optarg, 1, 256, &v))
                goto bad;
            n->window = (uint32_t)v;
            break;
        default:
            goto out;
        }
    }
    if (!n->flow || !n->nodes || n->index >= n->nodes || !n->bytes) {
        fprintf(stderr, PROG ": --flow, --nodes, --index and --bytes are required\n");
        goto out;
    }
    if (zv_open(&n->dev, PROG))
        goto out;
    n->src_bytes = n->kernels * n->item;
    n->heap_bytes = (size_t)n->nodes * n->kernels * HEAP_SLOTS * n->item;
    n->src = host_device_alloc("gpu", n->src_bytes);
    n->heap = host_device_alloc("gpu", n->heap_bytes);
    if (!n->src || !n->heap) {
        fprintf(stderr, PROG ": GPU memory: %s\n", strerror(errno));
        goto out;
    }
    memset(n->src, 0x5a, n->src_bytes);
    n->src_mr = ibv_reg_mr(n->dev.pd, n->src, n->src_bytes, IBV_ACCESS_LOCAL_WRITE);
    n->heap_mr = ibv_reg_mr(n->dev.pd, n->heap, n->heap_bytes,
                            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (!n->src_mr || !n->heap_mr)
        goto out;
    char key[128];
    for (uint32_t k = 0; k < n->kernels; k++) {
        if (!(n->cq[k] = ibv_create_cq(n->dev.ctx, 512, NULL, NULL, 0)))
            goto out;
        for (uint32_t j = 0; j < n->nodes; j++) {
            if (j == n->index)
                continue;
            if (!(n->qp[k][j] = zv_qp(&n->dev, n->cq[k], n->cq[k], IBV_QPT_RC, 256, 1)))
                goto out;
            /* the QP from (my node, kernel k) to node j, and node j's end of it */
            snprintf(key, sizeof(key), "nv/%s/%u.%u->%u", n->flow, n->index, k, j);
            zv_ep_put(key, &n->dev, n->qp[k][j], n->heap_mr, 1);
        }
    }
    /* a node receives from (j, k) on a QP of its own: the pairs are symmetric,
     * so kernel k's QP to j talks to j's kernel k QP to me */
    for (uint32_t k = 0; k < n->kernels; k++)
        for (uint32_t j = 0; j < n->nodes; j++) {
            if (j == n->index)
                continue;
            struct zv_ep ep;
            snprintf(key, sizeof(key), "nv/%s/%u.%u->%u", n->flow, j, k, n->index);
            if (zv_ep_get(key, &ep))
                goto out;
            n->peer_heap[j] = ep;
            if (zv_rc_up(n->qp[k][j], ep.gid, ep.qpn, ep.psn, 1, IBV_MTU_1024))
                goto out;
        }
    /* everyone connected (a barrier: NVSHMEM's init) */
    snprintf(key, sizeof(key), "nv/%s/up/%u", n->flow, n->index);
    uint32_t one = 1;
    host_oob_put(key, &one, sizeof(one));
    for (uint32_t j = 0; j < n->nodes; j++) {
        snprintf(key, sizeof(key), "nv/%s/up/%u", n->flow, j);
        host_oob_get(key, &one, sizeof(one));
    }
    uint64_t t0 = host_now_ns();
    struct karg ka[MAX_KERNELS];
    int th[MAX_KERNELS];
    for (uint32_t k = 0; k < n->kernels; k++) {
        ka[k] = (struct karg){n, k};
        th[k] = host_thread_start(kernel, &ka[k]);
    }
    uint64_t bytes = 0, t1 = t0;
    for (uint32_t k = 0; k < n->kernels; k++) {
        host_thread_join(th[k]);
        bytes += n->put_bytes[k];
        if (n->t_done[k] > t1)
            t1 = n->t_done[k];
    }
    struct host_kv kv[] = {{"node", n->index},
                           {"bytes", (double)bytes},
                           {"t_start_ns", (double)t0},
                           {"t_done_ns", (double)t1},
                           {"gbps", t1 > t0 ? (double)bytes * 8 / (double)(t1 - t0) : 0}};
    host_report("nvshmem", kv, sizeof(kv) / sizeof(kv[0]));
    /* keep the QPs until every node is done (its peers still put into my heap) */
    snprintf(key, sizeof(key), "nv/%s/done/%u", n->flow, n->index);
    host_oob_put(key, &one, sizeof(one));
    for (uint32_t j = 0; j < n->nodes; j++) {
        snprintf(key, sizeof(key), "nv/%s/done/%u", n->flow, j);
        host_oob_get(key, &one, sizeof(one));
    }
    rc = n->failed;
    goto out;
bad:
    fprintf(stderr, PROG ": bad option value '%s'\n", optarg);
out:
    for (uint32_t k = 0; k < MAX_KERNELS; k++) {
        for (uint32_t j = 0; j < MAX_NODES; j++)
            if (n->qp[k][j])
                ibv_destroy_qp(n->qp[k][j]);
        if (n->cq[k])
            ibv_destroy_cq(n->cq[k]);
    }
    if (n->src_mr)
        ibv_dereg_mr(n->src_mr);
    if (n->heap_mr)
        ibv_dereg_mr(n->heap_mr);
    host_device_free(n->src);
    host_device_free(n->heap);
    zv_close(&n->dev);
    free(n);
    return rc;
}
