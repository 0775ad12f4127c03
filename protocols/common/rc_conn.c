/* Shared RC connection set-up of the protocol drivers (see rc_conn.h). */
#include "protocols/common/rc_conn.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "protocols/common/pages.h"
#include "rnicsim/host.h"

static const char *const rc_conn_role_names[] = {[RC_CONN_ROLE_NONE] = "none",
                                                 [RC_CONN_ROLE_SERVER] = "server",
                                                 [RC_CONN_ROLE_CLIENT] = "client"};

const char *rc_conn_role_name(enum rc_conn_role role)
{
    return rc_conn_role_names[role];
}

const char *rc_conn_peer_role_name(enum rc_conn_role role)
{
    return rc_conn_role_names[role == RC_CONN_ROLE_SERVER ? RC_CONN_ROLE_CLIENT
                                                          : RC_CONN_ROLE_SERVER];
}

/* ------------------------------------------------------------ wire format */

void rc_conn_put_le(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

uint64_t rc_conn_get_le(const uint8_t *p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

void rc_conn_info_encode(const struct rc_conn_info *in, uint8_t out[RC_CONN_INFO_BYTES])
{
    memset(out, 0, RC_CONN_INFO_BYTES);
    rc_conn_put_le(out + 0, in->qpn, 4);
    rc_conn_put_le(out + 4, in->psn, 4);
    rc_conn_put_le(out + 8, in->rkey, 4);
    rc_conn_put_le(out + 12, in->opts_hash, 4);
    rc_conn_put_le(out + 16, in->lid, 2);
    out[18] = in->atomic_ok;
    memcpy(out + 20, in->gid, 16);
    rc_conn_put_le(out + 36, in->addr, 8);
    rc_conn_put_le(out + 44, in->buf_bytes, 8);
}

void rc_conn_info_decode(const uint8_t in[RC_CONN_INFO_BYTES], struct rc_conn_info *out)
{
    out->qpn = (uint32_t)rc_conn_get_le(in + 0, 4);
    out->psn = (uint32_t)rc_conn_get_le(in + 4, 4);
    out->rkey = (uint32_t)rc_conn_get_le(in + 8, 4);
    out->opts_hash = (uint32_t)rc_conn_get_le(in + 12, 4);
    out->lid = (uint16_t)rc_conn_get_le(in + 16, 2);
    out->atomic_ok = in[18];
    memcpy(out->gid, in + 20, 16);
    out->addr = rc_conn_get_le(in + 36, 8);
    out->buf_bytes = rc_conn_get_le(in + 44, 8);
}

/* ------------------------------------------------------------ options */

uint32_t rc_conn_hash_words(const uint64_t *words, size_t n)
{
    uint32_t h = 2166136261u; /* FNV-1a-32 offset basis */
    for (size_t i = 0; i < n; i++)
        for (int b = 0; b < 8; b++) {
            h ^= (uint8_t)(words[i] >> (8 * b));
            h *= 16777619u; /* FNV-1a-32 prime */
        }
    return h;
}

enum ibv_mtu rc_conn_mtu_enum(uint32_t bytes)
{
    switch (bytes) {
    case 256:
        return IBV_MTU_256;
    case 512:
        return IBV_MTU_512;
    case 1024:
        return IBV_MTU_1024;
    case 2048:
        return IBV_MTU_2048;
    default:
        return IBV_MTU_4096;
    }
}

/* ------------------------------------------------------------ resources */

void rc_conn_init(struct rc_conn *c, const char *prog, enum rc_conn_role role, const char *name)
{
    memset(c, 0, sizeof(*c));
    c->prog = prog;
    c->role = role;
    c->name = name;
    c->qp_type = IBV_QPT_RC;
}

int rc_conn_open_device(struct rc_conn *c)
{
    int num = 0;
    struct ibv_device **list = ibv_get_device_list(&num);
    if (!list || num <= 0) {
        printf("no RDMA device found\n");
        if (list)
            ibv_free_device_list(list);
        return -1;
    }
    c->ctx = ibv_open_device(list[0]);
    snprintf(c->dev_name, sizeof(c->dev_name), "%s", ibv_get_device_name(list[0]));
    if (!c->ctx) {
        fprintf(stderr, "%s: cannot open %s: %s\n", c->prog, c->dev_name, strerror(errno));
        ibv_free_device_list(list);
        return -1;
    }
    ibv_free_device_list(list);
    return 0;
}

int rc_conn_query(struct rc_conn *c, struct ibv_device_attr *dev, uint32_t mtu_bytes)
{
    if ((dev && ibv_query_device(c->ctx, dev)) || ibv_query_port(c->ctx, RC_CONN_PORT, &c->port) ||
        ibv_query_gid(c->ctx, RC_CONN_PORT, 0, &c->gid)) {
        fprintf(stderr, "%s: %s query failed\n", c->prog, dev ? "device/port" : "port");
        return -1;
    }
    c->mtu = mtu_bytes ? rc_conn_mtu_enum(mtu_bytes) : c->port.active_mtu;
    if (c->mtu < IBV_MTU_256 || c->mtu > IBV_MTU_4096)
        c->mtu = IBV_MTU_1024;
    return 0;
}

int rc_conn_alloc_buf(struct rc_conn *c, size_t bytes)
{
    c->buf_bytes = bytes;
    c->buf = pages_zalloc(bytes);
    if (!c->buf) {
        fprintf(stderr, "%s: cannot allocate %zu bytes\n", c->prog, bytes);
        return -1;
    }
    return 0;
}

int rc_conn_create_pd_mr(struct rc_conn *c, int access)
{
    c->pd = ibv_alloc_pd(c->ctx);
    if (!c->pd) {
        fprintf(stderr, "%s: ibv_alloc_pd: %s\n", c->prog, strerror(errno));
        return -1;
    }
    c->mr = ibv_reg_mr(c->pd, c->buf, c->buf_bytes, access);
    if (!c->mr) {
        fprintf(stderr, "%s: ibv_reg_mr: %s\n", c->prog, strerror(errno));
        return -1;
    }
    return 0;
}

int rc_conn_create_cqs(struct rc_conn *c, uint32_t send_depth, uint32_t recv_depth)
{
    c->scq = ibv_create_cq(c->ctx, (int)send_depth, NULL, NULL, 0);
    c->rcq = ibv_create_cq(c->ctx, (int)recv_depth, NULL, NULL, 0);
    if (!c->scq || !c->rcq) {
        fprintf(stderr, "%s: ibv_create_cq: %s\n", c->prog, strerror(errno));
        return -1;
    }
    return 0;
}

int rc_conn_create_qp(struct rc_conn *c, uint32_t max_send_wr, uint32_t max_recv_wr,
                      uint32_t want_inline, uint32_t *got_inline)
{
    int attempts = want_inline ? 2 : 1;
    for (int attempt = 0; attempt < attempts && !c->qp; attempt++) {
        struct ibv_qp_init_attr ia = {
            .send_cq = c->scq,
            .recv_cq = c->rcq,
            .cap = {.max_send_wr = max_send_wr,
                    .max_recv_wr = max_recv_wr,
                    .max_send_sge = 1,
                    .max_recv_sge = 1,
                    .max_inline_data = attempt == 0 ? want_inline : 0},
            .qp_type = c->qp_type,
        };
        c->qp = ibv_create_qp(c->pd, &ia);
        if (c->qp && got_inline)
            *got_inline = ia.cap.max_inline_data;
        else if (!c->qp && attempt == 0 && want_inline)
            fprintf(stderr, "%s: QP with %u inline bytes refused, retrying without inline\n",
                    c->prog, want_inline);
    }
    if (!c->qp) {
        fprintf(stderr, "%s: ibv_create_qp: %s\n", c->prog, strerror(errno));
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ out of band */

int rc_conn_exchange(struct rc_conn *c, uint32_t opts_hash, uint8_t atomic_ok)
{
    char key[RC_CONN_KEY_MAX];
    uint8_t wire[RC_CONN_INFO_BYTES];
    c->local.qpn = c->qp->qp_num;
    /* Deterministic 24-bit PSN (perftest draws one at random). */
    c->local.psn = (c->qp->qp_num * 2654435761u + (uint32_t)c->role) & 0xffffffu;
    c->local.rkey = c->mr->rkey;
    c->local.lid = c->port.lid;
    memcpy(c->local.gid, c->gid.raw, 16);
    c->local.addr = (uint64_t)(uintptr_t)c->buf;
    c->local.buf_bytes = c->buf_bytes;
    c->local.opts_hash = opts_hash;
    c->local.atomic_ok = atomic_ok;
    rc_conn_info_encode(&c->local, wire);
    snprintf(key, sizeof(key), "%s/%s", c->name, rc_conn_role_name(c->role));
    if (rc_conn_oob_put(c->prog, key, wire, sizeof(wire)) != 0)
        return -1;
    snprintf(key, sizeof(key), "%s/%s", c->name, rc_conn_peer_role_name(c->role));
    if (rc_conn_oob_get(c->prog, key, wire, sizeof(wire)) != 0)
        return -1;
    rc_conn_info_decode(wire, &c->peer);
    return 0;
}

/* Whether the address vector to the peer is global (carries a GRH): on a
 * RoCE port always (the GID is the address), on an InfiniBand port only
 * across subnets, which one fabric never is -- as perftest without -g and
 * HERD-style code that addresses the peer by its LID.  A GRH is 40 bytes of
 * every InfiniBand packet (docs/nic.md "Framing"). */
static uint8_t rc_conn_global(const struct rc_conn *c)
{
    return c->port.link_layer != IBV_LINK_LAYER_INFINIBAND;
}

/* A UD QP: INIT with the pair's Q_Key, RTR and RTS carry no peer (each
 * send names it through the address handle made here). */
static int rc_conn_connect_ud(struct rc_conn *c)
{
    struct ibv_qp_attr a = {
        .qp_state = IBV_QPS_INIT,
        .pkey_index = 0,
        .port_num = RC_CONN_PORT,
        .qkey = RC_CONN_UD_QKEY,
    };
    int err =
        ibv_modify_qp(c->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
    if (!err) {
        memset(&a, 0, sizeof(a));
        a.qp_state = IBV_QPS_RTR;
        err = ibv_modify_qp(c->qp, &a, IBV_QP_STATE);
    }
    if (!err) {
        memset(&a, 0, sizeof(a));
        a.qp_state = IBV_QPS_RTS;
        a.sq_psn = c->local.psn;
        err = ibv_modify_qp(c->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
    }
    if (err) {
        fprintf(stderr, "%s: modify_qp (UD): %s\n", c->prog, strerror(err));
        return -1;
    }
    struct ibv_ah_attr aa = {
        .is_global = rc_conn_global(c), .dlid = c->peer.lid, .port_num = RC_CONN_PORT};
    memcpy(aa.grh.dgid.raw, c->peer.gid, 16);
    aa.grh.sgid_index = 0;
    aa.grh.hop_limit = 64;
    c->ah = ibv_create_ah(c->pd, &aa);
    if (!c->ah) {
        fprintf(stderr, "%s: ibv_create_ah: %s\n", c->prog, strerror(errno));
        return -1;
    }
    return 0;
}

int rc_conn_connect(struct rc_conn *c, int access, uint8_t rd_atomic)
{
    if (c->qp_type == IBV_QPT_UD)
        return rc_conn_connect_ud(c);
    struct ibv_qp_attr a = {
        .qp_state = IBV_QPS_INIT,
        .pkey_index = 0,
        .port_num = RC_CONN_PORT,
        .qp_access_flags = (unsigned)access,
    };
    int err = ibv_modify_qp(c->qp, &a,
                            IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    if (err) {
        fprintf(stderr, "%s: modify_qp INIT: %s\n", c->prog, strerror(err));
        return -1;
    }
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = c->mtu;
    a.dest_qp_num = c->peer.qpn;
    a.rq_psn = c->peer.psn;
    bool rc = c->qp_type != IBV_QPT_UC;
    if (rc) {
        a.max_dest_rd_atomic = rd_atomic;
        a.min_rnr_timer = 12; /* perftest's value: 0.64 ms */
    }
    a.ah_attr.is_global = rc_conn_global(c);
    memcpy(a.ah_attr.grh.dgid.raw, c->peer.gid, 16);
    a.ah_attr.grh.sgid_index = 0;
    a.ah_attr.grh.hop_limit = 64;
    a.ah_attr.dlid = c->peer.lid;
    a.ah_attr.port_num = RC_CONN_PORT;
    int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
    if (rc) /* UC rows of the kernel's qp_state_table have neither */
        mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    err = ibv_modify_qp(c->qp, &a, mask);
    if (err) {
        fprintf(stderr, "%s: modify_qp RTR: %s\n", c->prog, strerror(err));
        return -1;
    }
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = c->local.psn;
    mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
    if (rc) {
        a.timeout = 14;  /* perftest default: 4.096 us * 2^14 = 67 ms */
        a.retry_cnt = 7; /* perftest default */
        a.rnr_retry = 7; /* infinite, as perftest */
        a.max_rd_atomic = rd_atomic;
        mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
    }
    err = ibv_modify_qp(c->qp, &a, mask);
    if (err) {
        fprintf(stderr, "%s: modify_qp RTS: %s\n", c->prog, strerror(err));
        return -1;
    }
    return 0;
}

int rc_conn_barrier(struct rc_conn *c, int status, int on_error)
{
    char key[RC_CONN_KEY_MAX];
    uint8_t mine[4], theirs[4];
    uint32_t k = c->sync_seq++;
    rc_conn_put_le(mine, (uint32_t)status, 4);
    snprintf(key, sizeof(key), "%s/sync/%" PRIu32 "/%s", c->name, k, rc_conn_role_name(c->role));
    if (host_oob_put(key, mine, sizeof(mine)) != 0)
        return on_error;
    snprintf(key, sizeof(key), "%s/sync/%" PRIu32 "/%s", c->name, k,
             rc_conn_peer_role_name(c->role));
    if (host_oob_get(key, theirs, sizeof(theirs)) != 0)
        return on_error;
    return (int)rc_conn_get_le(theirs, 4);
}

void rc_conn_close(struct rc_conn *c)
{
    if (c->ah)
        ibv_destroy_ah(c->ah);
    if (c->qp)
        ibv_destroy_qp(c->qp);
    if (c->scq)
        ibv_destroy_cq(c->scq);
    if (c->rcq)
        ibv_destroy_cq(c->rcq);
    if (c->mr)
        ibv_dereg_mr(c->mr);
    if (c->pd)
        ibv_dealloc_pd(c->pd);
    if (c->ctx)
        ibv_close_device(c->ctx);
    free(c->buf);
    c->buf = NULL;
}

int rc_conn_oob_put(const char *prog, const char *key, const void *buf, size_t len)
{
    if (host_oob_put(key, buf, len) != 0) {
        fprintf(stderr, "%s: out-of-band put %s failed: %s\n", prog, key, strerror(errno));
        return -1;
    }
    return 0;
}

int rc_conn_oob_get(const char *prog, const char *key, void *buf, size_t len)
{
    if (host_oob_get(key, buf, len) != 0) {
        fprintf(stderr, "%s: out-of-band get %s failed: %s\n", prog, key, strerror(errno));
        return -1;
    }
    return 0;
}

static int star_put(const char *prog, const char *key, int v)
{
    uint8_t w[4];
    rc_conn_put_le(w, (uint32_t)v, 4);
    return rc_conn_oob_put(prog, key, w, sizeof(w));
}

static int star_get(const char *prog, const char *key, int *v)
{
    uint8_t w[4];
    if (rc_conn_oob_get(prog, key, w, sizeof(w)) != 0)
        return -1;
    *v = (int)rc_conn_get_le(w, 4);
    return 0;
}

int rc_conn_star_barrier(const char *prog, const char *name, uint32_t seq, bool hub,
                         uint64_t first_id, uint64_t n_members, uint64_t my_id, int status)
{
    char key[RC_CONN_NAME_MAX + 64];
    int all = status, s;
    if (hub) {
        for (uint64_t i = first_id; i < first_id + n_members; i++) {
            snprintf(key, sizeof(key), "%s/sync/%" PRIu32 "/c%" PRIu64, name, seq, i);
            if (star_get(prog, key, &s))
                return 1;
            all = s > all ? s : all;
        }
        snprintf(key, sizeof(key), "%s/sync/%" PRIu32 "/s", name, seq);
        return star_put(prog, key, all) ? 1 : all;
    }
    snprintf(key, sizeof(key), "%s/sync/%" PRIu32 "/c%" PRIu64, name, seq, my_id);
    if (star_put(prog, key, status))
        return 1;
    snprintf(key, sizeof(key), "%s/sync/%" PRIu32 "/s", name, seq);
    if (star_get(prog, key, &s))
        return 1;
    return s > status ? s : status;
}
