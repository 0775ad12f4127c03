/* The channel registry and the helpers every channel shares (channel.h):
 * opening an endpoint, registered send / receive memory, RC QPs connected
 * through host_oob, the acknowledgement words of Section 6, and the
 * virtually circular ring mapping of Section 4 ("Software tricks").
 *
 * Only verbs, host_* and POSIX (memfd_create, mmap): builds in the
 * simulator and against the system libibverbs alike. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "protocols/common/pages.h"
#include "protocols/taranov/channel.h"
#include "protocols/taranov/ch_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <rnicsim/host.h>

/* ---------------------------------------------------------------- registry */

extern const struct chan_ops chan_send_normal, chan_send_shared, chan_send_bufferless;
extern const struct chan_ops chan_write_slot_detached, chan_write_slot_inlined, chan_write_slot_imm,
    chan_write_slot_reserve;
extern const struct chan_ops chan_ring_detached, chan_ring_imm, chan_ring_inlined_zero,
    chan_ring_inlined_nozero;
extern const struct chan_ops chan_shared_ring_imm, chan_shared_ring_inlined;
extern const struct chan_ops chan_read_slot_detached, chan_read_slot_inlined, chan_read_slot_notify,
    chan_read_slot_indirect, chan_read_ring_detached, chan_read_ring_inlined, chan_read_ring_notify;

/* Table 2 order: send/recv, write slot, ring, shared ring, read slot, read
 * ring. */
const struct chan_ops *const chan_registry[] = {
    &chan_send_normal,         &chan_send_shared,         &chan_send_bufferless,
    &chan_write_slot_detached, &chan_write_slot_inlined,  &chan_write_slot_imm,
    &chan_write_slot_reserve,  &chan_ring_detached,       &chan_ring_imm,
    &chan_ring_inlined_zero,   &chan_ring_inlined_nozero, &chan_shared_ring_imm,
    &chan_shared_ring_inlined, &chan_read_slot_detached,  &chan_read_slot_inlined,
    &chan_read_slot_notify,    &chan_read_slot_indirect,  &chan_read_ring_detached,
    &chan_read_ring_inlined,   &chan_read_ring_notify,    NULL,
};

const struct chan_ops *chan_find(const char *name)
{
    if (!name)
        return NULL;
    for (const struct chan_ops *const *p = chan_registry; *p; p++)
        if (strcmp((*p)->name, name) == 0)
            return *p;
    return NULL;
}

/* ---------------------------------------------------------------- errors */

int chan_fail(struct chan *c, int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof(c->err), fmt, ap);
    va_end(ap);
    return err > 0 ? -err : (err < 0 ? err : -EIO);
}

/* ---------------------------------------------------------------- endpoint */

int chan_open(struct chan *c, const struct chan_ops *ops, const struct chan_config *cfg)
{
    memset(c, 0, sizeof(*c));
    c->ops = ops;
    if (!ops || !cfg || !cfg->name)
        return chan_fail(c, EINVAL, "chan_open: no channel or no name");
    c->cfg = *cfg;
    if (c->cfg.senders == 0)
        c->cfg.senders = 1;
    if (c->cfg.receivers == 0)
        c->cfg.receivers = 1;
    if (c->cfg.senders > 1 && !ops->features.shared)
        return chan_fail(c, EINVAL, "%s: one sender only (not an N:1 channel)", ops->name);
    if (c->cfg.receivers > 1 && !ops->features.multi_reader)
        return chan_fail(c, EINVAL, "%s: one receiver only (not a 1:N channel)", ops->name);
    if (c->cfg.role == CHAN_SENDER && c->cfg.id >= c->cfg.senders && !ops->features.multi_reader)
        return chan_fail(c, EINVAL, "%s: sender id %u >= senders %u", ops->name, c->cfg.id,
                         c->cfg.senders);
    if (c->cfg.slots == 0)
        return chan_fail(c, EINVAL, "%s: slots must be > 0", ops->name);
    if (cfg->ctx) {
        c->ctx = cfg->ctx;
    } else {
        int n = 0;
        struct ibv_device **devs = ibv_get_device_list(&n);
        if (!devs || n == 0) {
            if (devs)
                ibv_free_device_list(devs);
            return chan_fail(c, ENODEV, "no RDMA device found");
        }
        c->ctx = ibv_open_device(devs[0]);
        ibv_free_device_list(devs);
        if (!c->ctx)
            return chan_fail(c, errno ? errno : ENODEV, "ibv_open_device: %s", strerror(errno));
        c->own_ctx = true;
    }
    c->pd = ibv_alloc_pd(c->ctx);
    if (!c->pd) {
        int e = errno ? errno : ENOMEM;
        if (c->own_ctx)
            ibv_close_device(c->ctx);
        c->ctx = NULL;
        return chan_fail(c, e, "ibv_alloc_pd: %s", strerror(e));
    }
    int rc = ops->open(c);
    if (rc < 0) {
        char why[sizeof(c->err)];
        memcpy(why, c->err, sizeof(why));
        chan_close(c);
        memcpy(c->err, why, sizeof(why));
        return rc;
    }
    return 0;
}

void chan_close(struct chan *c)
{
    if (c->ops && c->impl)
        c->ops->close(c);
    c->impl = NULL;
    if (c->pd)
        ibv_dealloc_pd(c->pd);
    c->pd = NULL;
    if (c->own_ctx && c->ctx)
        ibv_close_device(c->ctx);
    c->ctx = NULL;
    c->own_ctx = false;
}

/* chan_alloc keeps its MR in priv (a pointer, as the region belongs to the
 * caller and only chan_release looks at it). */
int chan_alloc(struct chan *c, size_t len, struct chan_region *r)
{
    memset(r, 0, sizeof(*r));
    size_t bytes = len ? (len + PAGES_BYTES - 1) / PAGES_BYTES * PAGES_BYTES : PAGES_BYTES;
    void *p = pages_zalloc(bytes);
    if (!p)
        return chan_fail(c, ENOMEM, "chan_alloc: no memory for %zu bytes", bytes);
    struct ibv_mr *mr = ibv_reg_mr(
        c->pd, p, bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    if (!mr) {
        int e = errno ? errno : ENOMEM;
        free(p);
        return chan_fail(c, e, "chan_alloc: ibv_reg_mr: %s", strerror(e));
    }
    r->addr = p;
    r->len = len;
    r->lkey = mr->lkey;
    r->priv = (uint64_t)(uintptr_t)mr;
    return 0;
}

void chan_release(struct chan *c, struct chan_region *r)
{
    (void)c;
    struct ibv_mr *mr = (struct ibv_mr *)(uintptr_t)r->priv;
    void *p = mr ? mr->addr : NULL;
    if (mr)
        ibv_dereg_mr(mr);
    free(p);
    memset(r, 0, sizeof(*r));
}

/* ---------------------------------------------------------------- RC QPs */

enum {
    CHAN_PORT = 1,
    CHAN_RD_ATOMIC = 16,      /* outstanding READs/atomics: ConnectX-5's max_qp_rd_atom */
    CHAN_INLINE_DEFAULT = 64, /* estimate: a 16-byte ack or 8-byte bell inline; mlx5 gives >= 64 */
    CHAN_INLINE_MIN = 16,     /* a chan_ack (CHAN_ACK_WORDS x 8 bytes) inline */
    CHAN_QP_SGE = 4,          /* header, data, padding, trailer (Section 4, "Hardware tricks") */
    CHAN_KEY_MAX = 192,
    CHAN_BLOB_MAX = 256,
};

/* Connection data on the wire (little-endian): qpn@0 psn@4 lid@8 mtu@10
 * rd_atomic@11 gid@12, then the channel's blob. */
#define CHAN_QPINFO_BYTES 28

static void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static uint64_t get_le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

int chan_qp_create(struct chan *c, struct chan_qp *q, struct ibv_cq *scq, struct ibv_cq *rcq,
                   struct ibv_srq *srq, uint32_t max_send_wr, uint32_t max_recv_wr,
                   uint32_t max_inline)
{
    memset(q, 0, sizeof(*q));
    q->scq = scq;
    q->rcq = rcq;
    struct ibv_qp_init_attr a = {
        .send_cq = scq,
        .recv_cq = rcq,
        .srq = srq,
        .cap =
            {
                .max_send_wr = max_send_wr,
                .max_recv_wr = srq ? 0 : max_recv_wr,
                .max_send_sge = CHAN_QP_SGE,
                .max_recv_sge = 1,
                .max_inline_data = max_inline ? max_inline : CHAN_INLINE_DEFAULT,
            },
        .qp_type = IBV_QPT_RC,
        .sq_sig_all = 0,
    };
    q->qp = ibv_create_qp(c->pd, &a);
    /* Added (efa-acks): with the default asked for, a device that offers
     * less inline data (EFA: 32 bytes, profiles/efa-srd.yaml) refuses the
     * QP with EINVAL; ask for less, down to the 16 bytes of an ack. */
    while (!q->qp && errno == EINVAL && !max_inline &&
           a.cap.max_inline_data / 2 >= CHAN_INLINE_MIN) {
        a.cap.max_inline_data /= 2;
        q->qp = ibv_create_qp(c->pd, &a);
    }
    if (!q->qp)
        return chan_fail(c, errno ? errno : ENOMEM, "ibv_create_qp (%u send, %u recv WRs): %s",
                         max_send_wr, max_recv_wr, strerror(errno));
    q->max_inline = a.cap.max_inline_data;
    /* INIT now, so the channel can post receives before connecting */
    int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                 IBV_ACCESS_REMOTE_ATOMIC;
    struct ibv_qp_attr qa = {
        .qp_state = IBV_QPS_INIT,
        .pkey_index = 0,
        .port_num = CHAN_PORT,
        .qp_access_flags = (unsigned)access,
    };
    int err = ibv_modify_qp(q->qp, &qa,
                            IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    if (err)
        return chan_fail(c, err, "modify_qp INIT: %s", strerror(err));
    return 0;
}

const char *chan_link_name(char *buf, size_t len, uint32_t id)
{
    snprintf(buf, len, "s%u", id);
    return buf;
}

int chan_qp_connect(struct chan *c, struct chan_qp *q, const char *link, const void *mine,
                    void *theirs, size_t blob_bytes)
{
    if (blob_bytes > CHAN_BLOB_MAX)
        return chan_fail(c, EINVAL, "chan_qp_connect: blob of %zu bytes", blob_bytes);
    struct ibv_port_attr port;
    union ibv_gid gid;
    if (ibv_query_port(c->ctx, CHAN_PORT, &port) != 0)
        return chan_fail(c, EIO, "ibv_query_port: %s", strerror(errno));
    if (ibv_query_gid(c->ctx, CHAN_PORT, 0, &gid) != 0)
        return chan_fail(c, EIO, "ibv_query_gid: %s", strerror(errno));
    struct ibv_device_attr dev;
    uint8_t rd_atomic = CHAN_RD_ATOMIC;
    if (ibv_query_device(c->ctx, &dev) == 0 && dev.max_qp_rd_atom > 0 &&
        dev.max_qp_rd_atom < rd_atomic)
        rd_atomic = (uint8_t)dev.max_qp_rd_atom;
    enum ibv_mtu mtu = port.active_mtu;
    if (c->cfg.mtu_bytes) {
        static const uint32_t b[] = {256, 512, 1024, 2048, 4096};
        mtu = IBV_MTU_256;
        for (int i = 0; i < 5; i++)
            if (c->cfg.mtu_bytes >= b[i])
                mtu = (enum ibv_mtu)(IBV_MTU_256 + i);
        if (mtu > port.active_mtu)
            mtu = port.active_mtu;
    }
    /* A PSN from the QP number: distinct per QP, deterministic. */
    uint32_t psn = (q->qp->qp_num * 2654435761u) & 0xffffffu;
    uint8_t msg[CHAN_QPINFO_BYTES + CHAN_BLOB_MAX], peer[CHAN_QPINFO_BYTES + CHAN_BLOB_MAX];
    memset(msg, 0, sizeof(msg));
    put_le(msg + 0, q->qp->qp_num, 4);
    put_le(msg + 4, psn, 4);
    put_le(msg + 8, port.lid, 2);
    msg[10] = (uint8_t)mtu;
    msg[11] = rd_atomic;
    memcpy(msg + 12, gid.raw, 16);
    if (blob_bytes)
        memcpy(msg + CHAN_QPINFO_BYTES, mine, blob_bytes);
    const char *me = c->cfg.role == CHAN_SENDER ? "snd" : "rcv";
    const char *other = c->cfg.role == CHAN_SENDER ? "rcv" : "snd";
    char key[CHAN_KEY_MAX];
    snprintf(key, sizeof(key), "%s/%s/%s", c->cfg.name, link, me);
    size_t n = CHAN_QPINFO_BYTES + blob_bytes;
    if (host_oob_put(key, msg, n) != 0)
        return chan_fail(c, errno ? errno : EIO, "host_oob_put %s: %s", key, strerror(errno));
    snprintf(key, sizeof(key), "%s/%s/%s", c->cfg.name, link, other);
    if (host_oob_get(key, peer, n) != 0)
        return chan_fail(c, errno ? errno : EIO,
                         "host_oob_get %s: %s (both ends must open the same channel)", key,
                         strerror(errno));
    if (blob_bytes)
        memcpy(theirs, peer + CHAN_QPINFO_BYTES, blob_bytes);
    if (peer[10] < mtu)
        mtu = (enum ibv_mtu)peer[10];
    if (peer[11] < rd_atomic)
        rd_atomic = peer[11];

    struct ibv_qp_attr a;
    memset(&a, 0, sizeof(a));
    int err;
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = mtu;
    a.dest_qp_num = (uint32_t)get_le(peer + 0, 4);
    a.rq_psn = (uint32_t)get_le(peer + 4, 4);
    a.max_dest_rd_atomic = rd_atomic;
    a.min_rnr_timer = 12; /* perftest's value: 0.64 ms */
    a.ah_attr.is_global = 1;
    memcpy(a.ah_attr.grh.dgid.raw, peer + 12, 16);
    a.ah_attr.grh.sgid_index = 0;
    a.ah_attr.grh.hop_limit = 64;
    a.ah_attr.dlid = (uint16_t)get_le(peer + 8, 2);
    a.ah_attr.port_num = CHAN_PORT;
    err = ibv_modify_qp(q->qp, &a,
                        IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                            IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (err)
        return chan_fail(c, err, "modify_qp RTR: %s", strerror(err));
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = psn;
    a.timeout = 14;  /* perftest default: 4.096 us * 2^14 = 67 ms */
    a.retry_cnt = 7; /* perftest default */
    a.rnr_retry = 7; /* infinite: a receiver late to repost is waited for */
    a.max_rd_atomic = rd_atomic;
    err = ibv_modify_qp(q->qp, &a,
                        IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                            IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
    if (err)
        return chan_fail(c, err, "modify_qp RTS: %s", strerror(err));
    /* Both ends in RTS before either sends: a request that reached a QP
     * still in INIT would be dropped and retransmitted only after the
     * 67 ms timeout. */
    uint8_t one = 1;
    snprintf(key, sizeof(key), "%s/%s/%s/rts", c->cfg.name, link, me);
    if (host_oob_put(key, &one, 1) != 0)
        return chan_fail(c, errno ? errno : EIO, "host_oob_put %s: %s", key, strerror(errno));
    snprintf(key, sizeof(key), "%s/%s/%s/rts", c->cfg.name, link, other);
    if (host_oob_get(key, &one, 1) != 0)
        return chan_fail(c, errno ? errno : EIO, "host_oob_get %s: %s", key, strerror(errno));
    return 0;
}

void chan_qp_destroy(struct chan_qp *q)
{
    if (q->qp)
        ibv_destroy_qp(q->qp);
    q->qp = NULL;
}

int chan_poll_cq(struct chan *c, struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
    int got = ibv_poll_cq(cq, n, wc);
    c->polled = true;
    return got;
}

void chan_relax(struct chan *c)
{
    if (c->polled) {
        /* The attempt polled a CQ: the next attempt's poll is the spin
         * (simulator: the second empty poll in a row parks until something
         * lands and polls again, with no lost wake-up); host_relax() here
         * could miss a completion that landed while a poll - empty or not -
         * was being charged. */
        c->polled = false;
        return;
    }
    host_relax();
}

int chan_poll_send_cq(struct chan *c, struct ibv_cq *cq, uint64_t *done)
{
    struct ibv_wc wc[16];
    int n = chan_poll_cq(c, cq, 16, wc);
    if (n < 0)
        return chan_fail(c, EIO, "ibv_poll_cq failed");
    for (int i = 0; i < n; i++) {
        if (wc[i].status != IBV_WC_SUCCESS)
            return chan_fail(c, EIO, "send completion error: %s (wr_id %llu)",
                             ibv_wc_status_str(wc[i].status), (unsigned long long)wc[i].wr_id);
        if (wc[i].wr_id > *done)
            *done = wc[i].wr_id;
    }
    return n;
}

/* ---------------------------------------------------------------- circular ring */

void *chan_ring_map(size_t ring_bytes)
{
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0)
        page = 4096;
    if (ring_bytes == 0 || ring_bytes % (size_t)page != 0) {
        errno = EINVAL;
        return NULL;
    }
    int fd = memfd_create("rnicsim-taranov-ring", MFD_CLOEXEC);
    if (fd < 0)
        return NULL;
    if (ftruncate(fd, (off_t)ring_bytes) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return NULL;
    }
    /* Reserve 2 * ring_bytes of address space, then map the file over
     * both halves. */
    uint8_t *base =
        mmap(NULL, 2 * ring_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) {
        int e = errno;
        close(fd);
        errno = e;
        return NULL;
    }
    for (int half = 0; half < 2; half++) {
        void *p = mmap(base + (size_t)half * ring_bytes, ring_bytes, PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_FIXED, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            munmap(base, 2 * ring_bytes);
            close(fd);
            errno = e;
            return NULL;
        }
    }
    close(fd); /* the mappings keep the pages */
    return base;
}

void chan_ring_unmap(void *base, size_t ring_bytes)
{
    if (base)
        munmap(base, 2 * ring_bytes);
}

/* ---------------------------------------------------------------- ack words */

/* Ack WRITEs in flight per QP (estimate: acks are rare, one per slots / 2
 * messages or ring / 4 bytes, so 8 never throttles). */
enum { CHAN_ACK_OUTSTANDING = 8 };

int chan_ack_init_sender(struct chan *c, struct chan_ack *a, uint64_t *addr, uint32_t *rkey)
{
    memset(a, 0, sizeof(*a));
    void *p = NULL;
    if (posix_memalign(&p, 64, 64) != 0)
        return chan_fail(c, ENOMEM, "ack words: no memory");
    memset(p, 0, 64);
    a->mr = ibv_reg_mr(c->pd, p, 64, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (!a->mr) {
        int e = errno ? errno : ENOMEM;
        free(p);
        return chan_fail(c, e, "ack words: ibv_reg_mr: %s", strerror(e));
    }
    a->words = p;
    *addr = (uint64_t)(uintptr_t)p;
    *rkey = a->mr->rkey;
    return 0;
}

void chan_ack_init_receiver(struct chan_ack *a, uint64_t addr, uint32_t rkey)
{
    memset(a, 0, sizeof(*a));
    a->remote_addr = addr;
    a->rkey = rkey;
}

int chan_ack_flush(struct chan *c, struct chan_ack *a, struct chan_qp *q,
                   const uint64_t every[CHAN_ACK_WORDS])
{
    bool due = false;
    for (int i = 0; i < CHAN_ACK_WORDS; i++) {
        uint64_t d = a->value[i] - a->sent[i];
        if (d > 0 && d >= every[i])
            due = true;
    }
    if (!due)
        return 0;
    while (a->posted - a->done >= CHAN_ACK_OUTSTANDING) {
        int n = chan_poll_send_cq(c, q->scq, &a->done);
        if (n < 0)
            return n;
        /* an empty poll after an empty poll parks in the simulator until
         * something lands, and re-polls: no host_relax here */
    }
    if (q->max_inline < sizeof(a->value))
        return chan_fail(c, EOPNOTSUPP, "ack %s needs %zu bytes of inline data, QP has %u",
                         a->by_send ? "SEND" : "WRITE", sizeof(a->value), q->max_inline);
    uint64_t v[CHAN_ACK_WORDS];
    memcpy(v, a->value, sizeof(v));
    struct ibv_sge sge = {.addr = (uint64_t)(uintptr_t)v, .length = sizeof(v), .lkey = 0};
    struct ibv_send_wr wr = {
        .wr_id = ++a->posted,
        .sg_list = &sge,
        .num_sge = 1,
        .opcode = a->by_send ? IBV_WR_SEND : IBV_WR_RDMA_WRITE,
        .send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED,
    };
    if (!a->by_send) {
        wr.wr.rdma.remote_addr = a->remote_addr;
        wr.wr.rdma.rkey = a->rkey;
    }
    struct ibv_send_wr *bad = NULL;
    int err = ibv_post_send(q->qp, &wr, &bad);
    if (err) {
        a->posted--;
        return chan_fail(c, err, "ack %s: ibv_post_send: %s", a->by_send ? "SEND" : "WRITE",
                         strerror(err));
    }
    memcpy(a->sent, v, sizeof(v));
    return 0;
}

/* Credit receive i of a SEND-mode sender (wr_id i). */
static int ack_post_recv(struct chan *c, struct chan_ack *a, uint32_t i)
{
    struct ibv_sge sge = {.addr = (uint64_t)(uintptr_t)(a->rbuf + (size_t)i * CHAN_ACK_WORDS),
                          .length = CHAN_ACK_WORDS * sizeof(uint64_t),
                          .lkey = a->rmr->lkey};
    struct ibv_recv_wr wr = {.wr_id = i, .sg_list = &sge, .num_sge = 1};
    struct ibv_recv_wr *bad = NULL;
    int err = ibv_post_recv(a->rqp, &wr, &bad);
    return err ? chan_fail(c, err, "credit receive: ibv_post_recv: %s", strerror(err)) : 0;
}

int chan_ack_post_recvs(struct chan *c, struct chan_ack *a, struct ibv_qp *qp, struct ibv_cq *rcq)
{
    size_t bytes = (size_t)CHAN_ACK_RECVS * CHAN_ACK_WORDS * sizeof(uint64_t);
    a->rbuf = pages_zalloc(bytes);
    if (!a->rbuf)
        return chan_fail(c, ENOMEM, "credit receives: no memory");
    a->rmr = ibv_reg_mr(c->pd, a->rbuf, bytes, IBV_ACCESS_LOCAL_WRITE);
    if (!a->rmr)
        return chan_fail(c, errno ? errno : ENOMEM, "credit receives: ibv_reg_mr: %s",
                         strerror(errno));
    a->by_send = true;
    a->rqp = qp;
    a->rcq = rcq;
    for (uint32_t i = 0; i < CHAN_ACK_RECVS; i++) {
        int rc = ack_post_recv(c, a, i);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int chan_ack_poll(struct chan *c, struct chan_ack *a)
{
    if (!a->by_send)
        return 0;
    struct ibv_wc wc[CHAN_ACK_RECVS];
    int n = chan_poll_cq(c, a->rcq, CHAN_ACK_RECVS, wc);
    if (n < 0)
        return chan_fail(c, EIO, "credit receives: ibv_poll_cq failed");
    for (int k = 0; k < n; k++) {
        if (wc[k].status != IBV_WC_SUCCESS)
            return chan_fail(c, EIO, "credit receive: %s", ibv_wc_status_str(wc[k].status));
        uint32_t i = (uint32_t)wc[k].wr_id;
        if (i >= CHAN_ACK_RECVS || wc[k].byte_len != CHAN_ACK_WORDS * sizeof(uint64_t))
            return chan_fail(c, EIO, "credit receive %" PRIu64 " of %u bytes: not a credit",
                             (uint64_t)wc[k].wr_id, wc[k].byte_len);
        /* monotonic counters, possibly out of order: keep the largest */
        const uint64_t *v = a->rbuf + (size_t)i * CHAN_ACK_WORDS;
        for (int w = 0; w < CHAN_ACK_WORDS; w++)
            if (v[w] > a->words[w])
                a->words[w] = v[w];
        int rc = ack_post_recv(c, a, i);
        if (rc < 0)
            return rc;
    }
    return n;
}

void chan_ack_destroy(struct chan_ack *a)
{
    if (a->rmr)
        ibv_dereg_mr(a->rmr);
    free(a->rbuf);
    a->rmr = NULL;
    a->rbuf = NULL;
    if (a->mr) {
        void *p = a->mr->addr;
        ibv_dereg_mr(a->mr);
        free(p);
    }
    a->mr = NULL;
    a->words = NULL;
}

/* ---------------------------------------------------------------- blocking receive */

int chan_cq_block(struct chan *c, struct ibv_comp_channel *ch, struct ibv_cq *cq, struct ibv_wc *wc)
{
    /* Arm first, then look once more: a completion that arrived before the
     * arming raises no event. */
    if (ibv_req_notify_cq(cq, 0) != 0)
        return chan_fail(c, EIO, "ibv_req_notify_cq failed");
    int n = ibv_poll_cq(cq, 1, wc);
    if (n != 0)
        return n < 0 ? chan_fail(c, EIO, "ibv_poll_cq failed") : n;
    struct ibv_cq *ev_cq = NULL;
    void *ev_ctx = NULL;
    c->polled = false;
    if (ibv_get_cq_event(ch, &ev_cq, &ev_ctx) != 0)
        return chan_fail(c, errno ? errno : EIO, "ibv_get_cq_event: %s", strerror(errno));
    ibv_ack_cq_events(ev_cq, 1);
    n = ibv_poll_cq(cq, 1, wc);
    return n < 0 ? chan_fail(c, EIO, "ibv_poll_cq failed") : n;
}

int chan_post_send(struct chan *c, struct ibv_qp *qp, struct ibv_send_wr *wr)
{
    struct ibv_send_wr *bad = NULL;
    int err = ibv_post_send(qp, wr, &bad);
    if (err)
        return chan_fail(c, err, "%s: ibv_post_send: %s", c->ops->name, strerror(err));
    return 0;
}

int chan_post_recv0(struct chan *c, struct ibv_qp *qp, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        struct ibv_recv_wr wr = {.wr_id = 0, .sg_list = NULL, .num_sge = 0}, *bad = NULL;
        int err = ibv_post_recv(qp, &wr, &bad);
        if (err)
            return chan_fail(c, err, "%s: post receive: %s", c->ops->name, strerror(err));
    }
    return 0;
}
