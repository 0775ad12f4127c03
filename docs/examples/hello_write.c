/* hello_write: the smallest complete rnicsim user program.
 *
 * The client RDMA-WRITEs "hello from <host>" into the server's buffer; the
 * server spins on its memory (host_relax) until the message has landed and
 * prints it.  Connection data go through the out-of-band board.
 *
 * Simulator (ibv_* and host_* come from rnicsim):
 *   cc -shared -fPIC -I<repo>/include hello_write.c -o hello_write.so
 * Real hardware (rdma-core + the POSIX host layer):
 *   cc -I<repo>/include hello_write.c <repo>/tools/real/host_posix.c \
 *      -libverbs -lpthread -o hello_write
 *   ./hello_write --server            (on one machine)
 *   ./hello_write --client SERVERHOST (on the other) */
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rnicsim/host.h>

#define MSG_BYTES 64

/* What each side tells the other. */
struct conn_info {
    uint32_t qpn, rkey;
    uint64_t addr;
    uint16_t lid; /* InfiniBand link layer; unused on RoCE */
    uint8_t gid[16];
};

int main(int argc, char **argv)
{
    int server = argc > 1 && strcmp(argv[1], "--server") == 0;
    int client = argc > 1 && strcmp(argv[1], "--client") == 0;
    if (!server && !client) {
        fprintf(stderr, "usage: %s --server | --client [server-host]\n", argv[0]);
        return 1;
    }

    /* Device, protection domain, memory, completion queue, queue pair. */
    int num = 0;
    struct ibv_device **devs = ibv_get_device_list(&num);
    if (!devs || num == 0) {
        printf("no RDMA device found\n");
        return 1;
    }
    struct ibv_context *ctx = ibv_open_device(devs[0]);
    ibv_free_device_list(devs);
    if (!ctx)
        return 1;
    union ibv_gid gid;
    struct ibv_port_attr port;
    if (ibv_query_port(ctx, 1, &port) || ibv_query_gid(ctx, 1, 0, &gid))
        return 1;
    struct ibv_pd *pd = ibv_alloc_pd(ctx);
    char *buf = calloc(1, MSG_BYTES);
    struct ibv_mr *mr =
        pd && buf ? ibv_reg_mr(pd, buf, MSG_BYTES, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)
                  : NULL;
    struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
    struct ibv_qp_init_attr qia = {
        .send_cq = cq,
        .recv_cq = cq,
        .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
        .qp_type = IBV_QPT_RC,
    };
    struct ibv_qp *qp = mr && cq ? ibv_create_qp(pd, &qia) : NULL;
    if (!qp) {
        fprintf(stderr, "resource allocation failed\n");
        return 1;
    }

    /* Swap QP number, rkey, address and GID through the out-of-band board. */
    struct conn_info me = {.qpn = qp->qp_num,
                           .rkey = mr->rkey,
                           .addr = (uintptr_t)buf,
                           .lid = port.lid},
                     peer;
    memcpy(me.gid, gid.raw, 16);
    host_oob_put(server ? "hello/server" : "hello/client", &me, sizeof(me));
    if (host_oob_get(server ? "hello/client" : "hello/server", &peer, sizeof(peer)))
        return 1;

    /* RESET -> INIT -> RTR -> RTS. */
    struct ibv_qp_attr a = {
        .qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = IBV_ACCESS_REMOTE_WRITE};
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
        return 1;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = port.active_mtu;
    a.dest_qp_num = peer.qpn;
    a.rq_psn = 0;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.hop_limit = 64;
    memcpy(a.ah_attr.grh.dgid.raw, peer.gid, 16);
    a.ah_attr.dlid = peer.lid;
    a.ah_attr.port_num = 1;
    if (ibv_modify_qp(qp, &a,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
        return 1;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.sq_psn = 0;
    a.max_rd_atomic = 1;
    if (ibv_modify_qp(qp, &a,
                      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                          IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
        return 1;
    /* Both QPs must be ready before anything is sent. */
    char ready = 1;
    host_oob_put(server ? "hello/ready/server" : "hello/ready/client", &ready, 1);
    host_oob_get(server ? "hello/ready/client" : "hello/ready/server", &ready, 1);

    int rc = 0;
    if (client) {
        snprintf(buf, MSG_BYTES - 1, "hello from %s", host_name());
        buf[MSG_BYTES - 1] = 1; /* "message complete" flag, lands last */
        struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = MSG_BYTES, .lkey = mr->lkey};
        struct ibv_send_wr wr = {.sg_list = &sge,
                                 .num_sge = 1,
                                 .opcode = IBV_WR_RDMA_WRITE,
                                 .send_flags = IBV_SEND_SIGNALED,
                                 .wr = {.rdma = {.remote_addr = peer.addr, .rkey = peer.rkey}}};
        struct ibv_send_wr *bad;
        struct ibv_wc wc;
        if (ibv_post_send(qp, &wr, &bad))
            return 1;
        while (ibv_poll_cq(cq, 1, &wc) == 0)
            ; /* an empty poll parks the simulated thread until a CQE lands */
        rc = wc.status == IBV_WC_SUCCESS ? 0 : 1;
        printf("client: write %s\n", ibv_wc_status_str(wc.status));
    } else {
        /* RDMA WRITE data land in order, so when the flag in the last byte
         * is there the text before it is too (the perftest trick). */
        volatile char *flag = &buf[MSG_BYTES - 1];
        while (*flag != 1)
            host_relax(); /* in the simulator: sleep until a DMA lands */
        printf("server %s received: \"%s\"\n", host_name(), buf);
    }
    /* Do not tear the QP down under the peer's feet. */
    host_oob_put(server ? "hello/done/server" : "hello/done/client", &ready, 1);
    host_oob_get(server ? "hello/done/client" : "hello/done/server", &ready, 1);

    ibv_destroy_qp(qp);
    ibv_destroy_cq(cq);
    ibv_dereg_mr(mr);
    ibv_dealloc_pd(pd);
    ibv_close_device(ctx);
    free(buf);
    return rc;
}
