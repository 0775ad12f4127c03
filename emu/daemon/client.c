/* rnicsimd: client connections and their control calls.
 *
 * The socket lives in a directory of mode 0700 owned by the user (and is
 * itself 0600); a connecting process must also have the daemon's uid
 * (SO_PEERCRED), so only the user's own programs can attach, and only
 * they can be reached by the NIC's DMA (process_vm_writev needs the same
 * uid anyway).
 *
 * A connection starts with EMU_OP_HELLO naming the host (RNICSIM_HOST).
 * A device-list hello is answered at once and the client hangs up; an
 * open hello starts the client's agent: a simulator process on that host
 * (host_spawn) that runs each control call through the verbs shim - the
 * same checks, errnos and state machines as in simulation, and the same
 * CPU cost (host.cpu.control_verb) in simulated time - and answers it.
 * Each request is handed to the agent as an event at the wall-clock time
 * it arrived (emu_inject), after the client's rings have been drained, so
 * a post made before a control call reaches the NIC before it.
 *
 * When the connection closes - ibv_close_device, exit or crash - the
 * agent destroys what is left: QPs go to ERR (their outstanding WRs are
 * flushed) and are destroyed, then SRQs, AHs, MRs, CQs, PDs.  A peer QP
 * connected to a destroyed QP sees what it would on a fabric: its packets
 * go unanswered and its WRs complete with IBV_WC_RETRY_EXC_ERR when the
 * retry count runs out.  Other clients are not touched. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "emu/daemon/objects.h"

/* ---------------------------------------------------------------- the socket */

/* mkdir -p with mode 0700 for the last component; an existing directory
 * must be ours and closed to others. */
static int private_dir(const char *dir, char *why, size_t why_len)
{
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        snprintf(why, why_len, "cannot create %s: %s", dir, strerror(errno));
        return -1;
    }
    struct stat st;
    if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(why, why_len, "%s is not a directory", dir);
        return -1;
    }
    if (st.st_uid != geteuid()) {
        snprintf(why, why_len, "%s belongs to uid %u, not to this user (%u)", dir,
                 (unsigned)st.st_uid, (unsigned)geteuid());
        return -1;
    }
    if (st.st_mode & 077) {
        if (chmod(dir, 0700) != 0) {
            snprintf(why, why_len, "cannot make %s private (mode 0700): %s", dir, strerror(errno));
            return -1;
        }
    }
    return 0;
}

static void accept_cb(struct ev_loop *loop, ev_io *w, int revents);

int emu_listen(struct emu *e, const char *path, char *why, size_t why_len)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path)) {
        snprintf(why, why_len, "socket path too long: %s", path);
        return -1;
    }
    e->sock_path = xstrdup_or_die(path);
    e->sock_dir = xstrdup_or_die(path);
    char *slash = strrchr(e->sock_dir, '/');
    if (slash && slash != e->sock_dir) {
        *slash = '\0';
        if (private_dir(e->sock_dir, why, why_len))
            return -1;
    } else {
        free(e->sock_dir);
        e->sock_dir = NULL;
    }
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        snprintf(why, why_len, "socket: %s", strerror(errno));
        return -1;
    }
    /* A socket file left by a daemon that died is removed; one that
     * answers belongs to a running daemon. */
    int probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
        close(probe);
        close(fd);
        snprintf(why, why_len, "another rnicsimd is serving %s", path);
        return -1;
    }
    if (probe >= 0)
        close(probe);
    unlink(path);
    mode_t old = umask(077);
    int rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    umask(old);
    if (rc != 0 || chmod(path, 0600) != 0 || listen(fd, 64) != 0) {
        snprintf(why, why_len, "cannot listen on %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    e->listen_fd = fd;
    ev_io_init(&e->listen_w, accept_cb, fd, EV_READ);
    e->listen_w.data = e;
    ev_io_start(e->loop, &e->listen_w);
    return 0;
}

/* ---------------------------------------------------------------- messages */

static int send_reply(struct emu_client *c, const struct emu_rep *rep, const int *fds, int nfds)
{
    struct iovec iov = {.iov_base = (void *)(uintptr_t)rep, .iov_len = sizeof(*rep)};
    union {
        char buf[CMSG_SPACE(sizeof(int) * 4)];
        struct cmsghdr align;
    } u;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    if (nfds > 0) {
        memset(&u, 0, sizeof(u));
        m.msg_control = u.buf;
        m.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
        struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
        memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)nfds);
    }
    ssize_t n;
    do
        n = sendmsg(c->fd, &m, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n == (ssize_t)sizeof(*rep) ? 0 : -1;
}

/* ---------------------------------------------------------------- objects */

static uint32_t obj_add(struct emu_client *c, enum emu_obj_kind kind, void *p)
{
    uint32_t i;
    for (i = 0; i < c->nobjs; i++)
        if (c->objs[i].kind == OBJ_FREE)
            break;
    if (i == c->nobjs) {
        c->objs = xrealloc_or_die(c->objs, (c->nobjs + 1) * sizeof(*c->objs));
        c->nobjs++;
    }
    c->objs[i].kind = kind;
    c->objs[i].u.pd = p; /* union of pointers */
    return i + 1;
}

static struct emu_obj *obj_get(struct emu_client *c, uint32_t h, enum emu_obj_kind kind)
{
    if (h == 0 || h > c->nobjs || c->objs[h - 1].kind != kind)
        return NULL;
    return &c->objs[h - 1];
}

/* A memfd of `bytes`, mapped shared: the daemon's side of a ring. */
static void *shm_create(const char *name, size_t bytes, int *fd_out)
{
    int fd = memfd_create(name, MFD_CLOEXEC);
    if (fd < 0)
        return NULL;
    if (ftruncate(fd, (off_t)bytes) != 0) {
        close(fd);
        return NULL;
    }
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        close(fd);
        return NULL;
    }
    *fd_out = fd;
    return p;
}

/* ---------------------------------------------------------------- control calls */

static int do_reg_mr(struct emu_client *c, const struct emu_req *q, struct emu_rep *r)
{
    struct emu_obj *o = obj_get(c, q->handle, OBJ_PD);
    if (!o)
        return EINVAL;
    const unsigned acc = q->u.reg_mr.access;
    bool write =
        (acc & (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) != 0;
    /* The shim's argument checks first (errno as rdma-core), then whether
     * the pages exist in the client (pinning: EFAULT). */
    struct ibv_mr *mr = ibv_reg_mr_iova2(o->u.pd, (void *)(uintptr_t)q->u.reg_mr.addr,
                                         q->u.reg_mr.length, q->u.reg_mr.iova, acc);
    if (!mr)
        return errno ? errno : ENOMEM;
    int rc = emu_check_mapped(c->pid, q->u.reg_mr.addr, q->u.reg_mr.length, write);
    if (rc) {
        ibv_dereg_mr(mr);
        return rc;
    }
    nic_mr_set_host_mem(shim_mr(mr)->nmr, &emu_remote_mem, c);
    r->handle = obj_add(c, OBJ_MR, mr);
    r->u.mr.lkey = mr->lkey;
    r->u.mr.rkey = mr->rkey;
    return 0;
}

static int do_create_cq(struct emu_client *c, const struct emu_req *q, struct emu_rep *r, int *fd)
{
    struct emu_channel *ch = NULL;
    if (q->u.create_cq.channel) {
        struct emu_obj *o = obj_get(c, q->u.create_cq.channel, OBJ_CHANNEL);
        if (!o)
            return EINVAL;
        ch = o->u.channel;
    }
    struct ibv_cq *cq =
        ibv_create_cq(c->ctx, q->u.create_cq.cqe, NULL, NULL, (int)q->u.create_cq.comp_vector);
    if (!cq)
        return errno ? errno : ENOMEM;
    struct emu_cq *ecq = xcalloc_or_die(1, sizeof(*ecq));
    ecq->cq = cq;
    ecq->ncq = shim_cq(cq)->ncq;
    ecq->depth = (uint32_t)cq->cqe;
    ecq->shm_bytes = emu_cq_shm_bytes(ecq->depth);
    ecq->shm = shm_create("rnicsim-cq", ecq->shm_bytes, fd);
    if (!ecq->shm) {
        int e = errno;
        ibv_destroy_cq(cq);
        free(ecq);
        return e ? e : ENOMEM;
    }
    ecq->shm->depth = ecq->depth;
    ecq->cookie = q->u.create_cq.cookie;
    ecq->channel = ch;
    if (ch)
        ch->refs++;
    r->handle = obj_add(c, OBJ_CQ, ecq);
    r->u.cq.depth = ecq->depth;
    emu_rings_cq_created(c, ecq);
    return 0;
}

static void cq_free(struct emu_cq *ecq)
{
    if (ecq->channel)
        ecq->channel->refs--;
    munmap(ecq->shm, ecq->shm_bytes);
    free(ecq);
}

static int do_create_qp(struct emu_client *c, const struct emu_req *q, struct emu_rep *r, int *fd)
{
    struct emu_obj *po = obj_get(c, q->handle, OBJ_PD);
    struct emu_obj *so = obj_get(c, q->u.create_qp.send_cq, OBJ_CQ);
    struct emu_obj *ro = obj_get(c, q->u.create_qp.recv_cq, OBJ_CQ);
    struct emu_obj *sr = q->u.create_qp.srq ? obj_get(c, q->u.create_qp.srq, OBJ_SRQ) : NULL;
    if (!po || !so || !ro || (q->u.create_qp.srq && !sr))
        return EINVAL;
    struct ibv_qp_init_attr init = {
        .send_cq = so->u.cq->cq,
        .recv_cq = ro->u.cq->cq,
        .srq = sr ? sr->u.srq->srq : NULL,
        .cap = q->u.create_qp.cap,
        .qp_type = (enum ibv_qp_type)q->u.create_qp.qp_type,
        .sq_sig_all = (int)q->u.create_qp.sq_sig_all,
    };
    struct ibv_qp *qp = ibv_create_qp(po->u.pd, &init);
    if (!qp)
        return errno ? errno : ENOMEM;
    struct emu_qp *eqp = xcalloc_or_die(1, sizeof(*eqp));
    eqp->qp = qp;
    eqp->nqp = shim_qp(qp)->nqp;
    eqp->send_cq = so->u.cq;
    eqp->recv_cq = ro->u.cq;
    eqp->srq = sr ? sr->u.srq : NULL;
    eqp->sq_depth = eqp->nqp->sq_depth;
    eqp->rq_depth = eqp->nqp->rq.depth;
    eqp->shm_bytes = emu_qp_shm_bytes(eqp->sq_depth, eqp->rq_depth);
    eqp->shm = shm_create("rnicsim-qp", eqp->shm_bytes, fd);
    if (!eqp->shm) {
        int e = errno;
        ibv_destroy_qp(qp);
        free(eqp);
        return e ? e : ENOMEM;
    }
    eqp->shm->sq_depth = eqp->sq_depth;
    eqp->shm->rq_depth = eqp->rq_depth;
    atomic_store(&eqp->shm->state, (uint32_t)IBV_QPS_RESET);
    so->u.cq->refs++;
    ro->u.cq->refs++;
    r->handle = obj_add(c, OBJ_QP, eqp);
    r->u.qp.qpn = qp->qp_num;
    r->u.qp.sq_depth = eqp->sq_depth;
    r->u.qp.rq_depth = eqp->rq_depth;
    r->u.qp.cap = init.cap;
    return 0;
}

static int destroy_qp(struct emu_client *c, uint32_t h)
{
    struct emu_obj *o = obj_get(c, h, OBJ_QP);
    if (!o)
        return EINVAL;
    struct emu_qp *eqp = o->u.qp;
    int rc = ibv_destroy_qp(eqp->qp);
    if (rc)
        return rc;
    eqp->send_cq->refs--;
    eqp->recv_cq->refs--;
    munmap(eqp->shm, eqp->shm_bytes);
    free(eqp);
    o->kind = OBJ_FREE;
    return 0;
}

static int do_modify_qp(struct emu_client *c, const struct emu_req *q)
{
    struct emu_obj *o = obj_get(c, q->handle, OBJ_QP);
    if (!o)
        return EINVAL;
    struct emu_qp *eqp = o->u.qp;
    struct ibv_qp_attr attr = q->u.modify_qp.attr;
    int rc = ibv_modify_qp(eqp->qp, &attr, q->u.modify_qp.mask);
    if (rc == 0 && eqp->nqp->state == IBV_QPS_RESET) {
        /* the NIC's queues start again at 0; so do the rings (the client
         * resets its side when the call returns) */
        eqp->sq_taken = eqp->rq_taken = 0;
        atomic_store(&eqp->shm->sq_tail, 0);
        atomic_store(&eqp->shm->rq_tail, 0);
    }
    return rc;
}

static int do_create_srq(struct emu_client *c, const struct emu_req *q, struct emu_rep *r, int *fd)
{
    struct emu_obj *po = obj_get(c, q->handle, OBJ_PD);
    if (!po)
        return EINVAL;
    struct ibv_srq_init_attr init = {.attr = q->u.srq.attr};
    struct ibv_srq *srq = ibv_create_srq(po->u.pd, &init);
    if (!srq)
        return errno ? errno : ENOMEM;
    struct emu_srq *es = xcalloc_or_die(1, sizeof(*es));
    es->srq = srq;
    es->depth = shim_srq(srq)->max_wr;
    es->max_sge = shim_srq(srq)->max_sge;
    es->cookie = q->u.srq.cookie;
    es->shm_bytes = emu_srq_shm_bytes(es->depth);
    es->shm = shm_create("rnicsim-srq", es->shm_bytes, fd);
    if (!es->shm) {
        int e = errno;
        ibv_destroy_srq(srq);
        free(es);
        return e ? e : ENOMEM;
    }
    es->shm->depth = es->depth;
    r->handle = obj_add(c, OBJ_SRQ, es);
    r->u.srq_created.srqn = srq->handle;
    r->u.srq_created.depth = es->depth;
    r->u.srq_created.max_sge = es->max_sge;
    return 0;
}

static int destroy_srq(struct emu_client *c, uint32_t h)
{
    struct emu_obj *o = obj_get(c, h, OBJ_SRQ);
    if (!o)
        return EINVAL;
    struct emu_srq *es = o->u.srq;
    int rc = ibv_destroy_srq(es->srq);
    if (rc)
        return rc;
    munmap(es->shm, es->shm_bytes);
    free(es);
    o->kind = OBJ_FREE;
    return 0;
}

static int destroy_cq(struct emu_client *c, uint32_t h)
{
    struct emu_obj *o = obj_get(c, h, OBJ_CQ);
    if (!o)
        return EINVAL;
    if (o->u.cq->refs)
        return EBUSY;
    int rc = ibv_destroy_cq(o->u.cq->cq);
    if (rc)
        return rc;
    cq_free(o->u.cq);
    o->kind = OBJ_FREE;
    return 0;
}

static int destroy_channel(struct emu_client *c, uint32_t h)
{
    struct emu_obj *o = obj_get(c, h, OBJ_CHANNEL);
    if (!o)
        return EINVAL;
    if (o->u.channel->refs)
        return EBUSY;
    close(o->u.channel->wr_fd);
    free(o->u.channel);
    o->kind = OBJ_FREE;
    return 0;
}

static int destroy_simple(struct emu_client *c, uint32_t h, enum emu_obj_kind kind)
{
    struct emu_obj *o = obj_get(c, h, kind);
    if (!o)
        return EINVAL;
    int rc = kind == OBJ_PD   ? ibv_dealloc_pd(o->u.pd)
             : kind == OBJ_MR ? ibv_dereg_mr(o->u.mr)
                              : ibv_destroy_ah(o->u.ah);
    if (rc == 0)
        o->kind = OBJ_FREE;
    return rc;
}

static int do_create_channel(struct emu_client *c, struct emu_rep *r, int *fd)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return errno;
    /* the daemon never blocks on a client that does not read its events */
    fcntl(p[1], F_SETFL, O_NONBLOCK);
    struct emu_channel *ch = xcalloc_or_die(1, sizeof(*ch));
    ch->wr_fd = p[1];
    *fd = p[0];
    r->handle = obj_add(c, OBJ_CHANNEL, ch);
    return 0;
}

/* One control call; returns the errno for the reply and sets up to one fd
 * to pass (closed after sending). */
static int handle_req(struct emu_client *c, const struct emu_req *q, struct emu_rep *r, int *fd)
{
    struct emu_obj *o;
    switch ((enum emu_op)q->op) {
    case EMU_OP_QUERY_DEVICE: {
        /* the extended op with the caller's struct size (the client
         * copies what fits); size 0 = ibv_query_device */
        memset(&r->u.device, 0, sizeof(r->u.device));
        int rc;
        if (q->u.query.index == 0) {
            rc = ibv_query_device(c->ctx, &r->u.device.orig_attr);
        } else {
            size_t size =
                q->u.query.index < sizeof(r->u.device) ? q->u.query.index : sizeof(r->u.device);
            rc = shim_query_device_ex(c->ctx, NULL, &r->u.device, size);
        }
        /* No product identity (the profile's nic.vendor_id/part_id): a
         * program that recognises a ConnectX picks the ibv_wr_* API
         * (perftest), which the drop-in library does not provide. */
        r->u.device.orig_attr.vendor_id = 0;
        r->u.device.orig_attr.vendor_part_id = 0;
        return rc;
    }
    case EMU_OP_QUERY_PORT:
        return ibv_query_port(c->ctx, (uint8_t)q->u.query.index, &r->u.port);
    case EMU_OP_QUERY_GID: {
        struct ibv_gid_entry ent;
        int rc = _ibv_query_gid_ex(c->ctx, q->handle, q->u.query.index, &ent, q->u.query.flags,
                                   sizeof(ent));
        if (rc)
            return rc;
        r->u.gid.gid = ent.gid;
        r->u.gid.type = ent.gid_type == IBV_GID_TYPE_ROCE_V2 ? EMU_GID_TYPE_SYSFS_ROCE_V2
                                                             : EMU_GID_TYPE_SYSFS_IB_ROCE_V1;
        return 0;
    }
    case EMU_OP_QUERY_PKEY:
        if (ibv_query_pkey(c->ctx, (uint8_t)q->handle, (int)q->u.query.index, &r->u.pkey))
            return errno ? errno : EINVAL;
        return 0;
    case EMU_OP_ALLOC_PD: {
        struct ibv_pd *pd = ibv_alloc_pd(c->ctx);
        if (!pd)
            return errno ? errno : ENOMEM;
        r->handle = obj_add(c, OBJ_PD, pd);
        return 0;
    }
    case EMU_OP_DEALLOC_PD:
        return destroy_simple(c, q->handle, OBJ_PD);
    case EMU_OP_REG_MR:
        return do_reg_mr(c, q, r);
    case EMU_OP_DEREG_MR:
        return destroy_simple(c, q->handle, OBJ_MR);
    case EMU_OP_CREATE_CHANNEL:
        return do_create_channel(c, r, fd);
    case EMU_OP_DESTROY_CHANNEL:
        return destroy_channel(c, q->handle);
    case EMU_OP_CREATE_CQ:
        return do_create_cq(c, q, r, fd);
    case EMU_OP_DESTROY_CQ:
        return destroy_cq(c, q->handle);
    case EMU_OP_CREATE_QP:
        return do_create_qp(c, q, r, fd);
    case EMU_OP_MODIFY_QP:
        return do_modify_qp(c, q);
    case EMU_OP_QUERY_QP:
        if (!(o = obj_get(c, q->handle, OBJ_QP)))
            return EINVAL;
        return ibv_query_qp(o->u.qp->qp, &r->u.query_qp.attr, q->u.modify_qp.mask,
                            &r->u.query_qp.init);
    case EMU_OP_DESTROY_QP:
        return destroy_qp(c, q->handle);
    case EMU_OP_CREATE_SRQ:
        return do_create_srq(c, q, r, fd);
    case EMU_OP_MODIFY_SRQ: {
        if (!(o = obj_get(c, q->handle, OBJ_SRQ)))
            return EINVAL;
        struct ibv_srq_attr a = q->u.srq.attr;
        return ibv_modify_srq(o->u.srq->srq, &a, q->u.srq.mask);
    }
    case EMU_OP_QUERY_SRQ:
        if (!(o = obj_get(c, q->handle, OBJ_SRQ)))
            return EINVAL;
        return ibv_query_srq(o->u.srq->srq, &r->u.srq);
    case EMU_OP_DESTROY_SRQ:
        return destroy_srq(c, q->handle);
    case EMU_OP_CREATE_AH: {
        if (!(o = obj_get(c, q->handle, OBJ_PD)))
            return EINVAL;
        struct ibv_ah_attr a = q->u.ah;
        struct ibv_ah *ah = ibv_create_ah(o->u.pd, &a);
        if (!ah)
            return errno ? errno : ENOMEM;
        r->handle = obj_add(c, OBJ_AH, ah);
        r->u.ah.node = shim_ah(ah)->node;
        return 0;
    }
    case EMU_OP_DESTROY_AH:
        return destroy_simple(c, q->handle, OBJ_AH);
    case EMU_OP_INIT_AH_FROM_WC: {
        struct ibv_wc wc = q->u.ah_from_wc.wc;
        struct ibv_grh grh;
        memcpy(&grh, q->u.ah_from_wc.grh, sizeof(grh));
        if (ibv_init_ah_from_wc(c->ctx, q->u.ah_from_wc.port, &wc, &grh, &r->u.ah_attr))
            return errno ? errno : EINVAL;
        return 0;
    }
    case EMU_OP_WR_REFUSED:
        nic_note_wr_refused(shim_ctx(c->ctx)->nic);
        return 0;
    case EMU_OP_HELLO:
    case EMU_OP_COUNT:
        break;
    }
    return EINVAL;
}

/* ---------------------------------------------------------------- the doorbell */

static void doorbell_rung(struct sim *sim, void *a, void *b)
{
    (void)sim;
    (void)b;
    struct emu_client *c = a;
    c->inflight--;
    if (c->closing || !c->ctx)
        return;
    emu_rings_arm(c);
    if (!emu_rings_drain(c))
        return;
}

/* The client wrote WQEs or armed a CQ and rang: the NIC sees it now. */
static void doorbell_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)loop;
    (void)revents;
    struct emu_client *c = w->data;
    uint64_t v;
    if (read(c->db_fd, &v, sizeof(v)) != (ssize_t)sizeof(v))
        return;
    c->emu->last_activity_ns = emu_mono_ns();
    c->inflight++;
    emu_inject(c->emu, doorbell_rung, c, NULL);
}

void emu_client_watch_doorbell(struct emu_client *c)
{
    ev_io_init(&c->db_w, doorbell_cb, c->db_fd, EV_READ);
    c->db_w.data = c;
    ev_io_start(c->emu->loop, &c->db_w);
}

/* ---------------------------------------------------------------- the agent */

static void open_context(struct emu_client *c, struct emu_rep *r, int fds[2], int *nfds)
{
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (!list || n < 1) {
        r->rc = ENODEV;
        ibv_free_device_list(list);
        return;
    }
    c->ctx = ibv_open_device(list[0]);
    ibv_free_device_list(list);
    if (!c->ctx) {
        r->rc = errno ? errno : ENODEV;
        return;
    }
    struct emu *e = c->emu;
    struct nic *nic = e->w->nics[c->host];
    r->u.hello.version = EMU_PROTO_VERSION;
    r->u.hello.node_id = nic_node_id(nic);
    r->u.hello.n_nodes = (uint32_t)e->w->nhosts;
    r->u.hello.node_guid = shim_node_guid(nic);
    r->u.hello.params = *nic_get_params(nic);
    ibv_query_port(c->ctx, 1, &r->u.hello.port);
    int p[2];
    c->db_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (c->db_fd < 0 || pipe2(p, O_CLOEXEC) != 0) {
        r->rc = errno;
        return;
    }
    fcntl(p[1], F_SETFL, O_NONBLOCK);
    c->async_wr = p[1];
    fds[0] = c->db_fd;
    fds[1] = p[0];
    *nfds = 2;
    emu_client_watch_doorbell(c);
}

/* Tear down everything the client left, in dependency order. */
static void teardown(struct emu_client *c)
{
    static const enum emu_obj_kind order[] = {OBJ_QP, OBJ_SRQ,     OBJ_AH, OBJ_MR,
                                              OBJ_CQ, OBJ_CHANNEL, OBJ_PD};
    uint32_t qps = 0;
    for (uint32_t i = 0; i < c->nobjs; i++)
        if (c->objs[i].kind == OBJ_QP) {
            struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
            ibv_modify_qp(c->objs[i].u.qp->qp, &a, IBV_QP_STATE); /* flush */
            qps++;
        }
    if (qps)
        fprintf(stderr, "rnicsimd: %s went away with %u QP(s) open: flushed and destroyed\n",
                c->name, qps);
    if (qps)
        c->crashed = true;
    for (size_t k = 0; k < sizeof(order) / sizeof(order[0]); k++)
        for (uint32_t i = 0; i < c->nobjs; i++) {
            if (c->objs[i].kind != order[k])
                continue;
            int rc = 0;
            switch (order[k]) {
            case OBJ_QP:
                rc = destroy_qp(c, i + 1);
                break;
            case OBJ_SRQ:
                rc = destroy_srq(c, i + 1);
                break;
            case OBJ_CQ:
                rc = destroy_cq(c, i + 1);
                break;
            case OBJ_CHANNEL:
                rc = destroy_channel(c, i + 1);
                break;
            default:
                rc = destroy_simple(c, i + 1, order[k]);
                break;
            }
            if (rc)
                fprintf(stderr, "rnicsimd: %s: cleanup of object %u failed: %s\n", c->name, i + 1,
                        strerror(rc));
        }
    if (c->ctx)
        ibv_close_device(c->ctx);
    c->ctx = NULL;
}

static void agent_main(void *arg)
{
    struct emu_client *c = arg;
    struct emu_rep r;
    for (;;) {
        while (!c->have_req && !c->closing)
            sim_waitq_wait(&c->agent_wq, "rnicsimd agent: waiting for a call");
        if (c->closing)
            break;
        memset(&r, 0, sizeof(r));
        int fds[2] = {-1, -1}, nfds = 0;
        if (c->req.op == EMU_OP_HELLO) {
            open_context(c, &r, fds, &nfds);
        } else {
            /* posts made before this call reach the NIC first */
            if (!emu_rings_drain(c))
                break;
            r.rc = handle_req(c, &c->req, &r, &fds[0]);
            nfds = fds[0] >= 0 ? 1 : 0;
            emu_rings_publish(c);
        }
        c->have_req = false;
        if (c->req.op != EMU_OP_WR_REFUSED && send_reply(c, &r, fds, r.rc ? 0 : nfds) != 0)
            c->closing = true;
        if (c->req.op != EMU_OP_HELLO)
            for (int i = 0; i < nfds; i++)
                close(fds[i]); /* the client has its copy */
        else if (r.rc)
            c->closing = true;
    }
    teardown(c);
    c->agent_done = true;
}

static void agent_wake(struct sim *sim, void *a, void *b)
{
    (void)b;
    struct emu_client *c = a;
    c->inflight--;
    sim_waitq_wake_one(sim, &c->agent_wq);
}

/* ---------------------------------------------------------------- connections */

static void client_stop_io(struct emu_client *c)
{
    if (c->io_stopped)
        return;
    c->io_stopped = true;
    ev_io_stop(c->emu->loop, &c->io_w);
    if (c->db_fd >= 0)
        ev_io_stop(c->emu->loop, &c->db_w);
}

void emu_client_fail(struct emu_client *c, const char *why)
{
    if (c->closing)
        return;
    if (why) {
        fprintf(stderr, "rnicsimd: %s: %s: disconnected\n", c->name, why);
        c->emu->protocol_errors++;
    }
    c->closing = true;
    client_stop_io(c);
    /* What the kernel does at once when a process dies: its QPs stop
     * (ERR, outstanding WRs flushed), so peers no longer get answers and
     * their WRs fail when the retries run out; the agent destroys the rest
     * in its turn (which may be late when the model lags the clock). */
    for (uint32_t i = 0; i < c->nobjs; i++)
        if (c->objs[i].kind == OBJ_QP)
            nic_qp_to_error(c->objs[i].u.qp->nqp);
    if (c->agent) {
        c->inflight++;
        emu_inject(c->emu, agent_wake, c, NULL);
    } else
        c->agent_done = true;
}

static void client_free(struct emu_client *c)
{
    client_stop_io(c);
    emu_remote_free(c);
    if (c->fd >= 0)
        close(c->fd);
    if (c->db_fd >= 0)
        close(c->db_fd);
    if (c->async_wr >= 0)
        close(c->async_wr);
    free(c->objs);
    free(c);
}

static void agent_start(struct sim *sim, void *a, void *b)
{
    (void)sim;
    (void)b;
    struct emu_client *c = a;
    struct emu *e = c->emu;
    c->inflight--;
    if (c->closing) {
        c->agent_done = true;
        return;
    }
    char pname[80];
    snprintf(pname, sizeof(pname), "%s/rnicsimd-agent", c->name);
    c->agent = host_spawn(&e->w->hosts[c->host], pname, agent_main, c, NULL, 0);
    if (!c->agent) {
        struct emu_rep r;
        memset(&r, 0, sizeof(r));
        r.rc = ENOMEM;
        send_reply(c, &r, NULL, 0);
        emu_client_fail(c, "cannot start its agent");
        c->agent_done = true;
        return;
    }
    sim_proc_set_daemon(c->agent, true);
    e->clients_served++;
    if (e->verbose)
        fprintf(stderr, "rnicsimd: %s attached\n", c->name);
}

static void hello(struct emu_client *c, const struct emu_req *q)
{
    struct emu *e = c->emu;
    struct emu_rep r;
    memset(&r, 0, sizeof(r));
    char host[sizeof(q->u.hello.host) + 1];
    memcpy(host, q->u.hello.host, sizeof(q->u.hello.host));
    host[sizeof(q->u.hello.host)] = '\0';
    long idx = -1;
    if (host[0] == 'h' && host[1]) {
        char *end;
        idx = strtol(host + 1, &end, 10);
        if (*end || idx < 0 || (size_t)idx >= e->w->nhosts)
            idx = -1;
    }
    if (q->u.hello.version != EMU_PROTO_VERSION) {
        r.rc = EPROTO;
    } else if (idx < 0) {
        r.rc = ENODEV; /* no such host: the client prints what there is */
        r.u.hello.n_nodes = (uint32_t)e->w->nhosts;
    }
    if (r.rc || !q->u.hello.open) {
        if (!r.rc) {
            struct nic *nic = e->w->nics[idx];
            r.u.hello.version = EMU_PROTO_VERSION;
            r.u.hello.node_id = nic_node_id(nic);
            r.u.hello.n_nodes = (uint32_t)e->w->nhosts;
            r.u.hello.node_guid = shim_node_guid(nic);
            r.u.hello.params = *nic_get_params(nic);
        }
        send_reply(c, &r, NULL, 0);
        emu_client_fail(c, NULL);
        return;
    }
    c->host = (uint32_t)idx;
    c->attached = true;
    snprintf(c->name, sizeof(c->name), "h%u/pid %d", c->host, (int)c->pid);
    sim_waitq_init(&c->agent_wq, "rnicsimd agent");
    c->req = *q;
    c->have_req = true; /* the agent starts with the hello */
    c->inflight++;
    emu_inject(e, agent_start, c, NULL); /* at the wall-clock time of the hello */
}

static void client_io_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)loop;
    (void)revents;
    struct emu_client *c = w->data;
    struct emu_req q;
    ssize_t n = recv(c->fd, &q, sizeof(q), MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) { /* closed: ibv_close_device, exit or crash */
        emu_client_fail(c, NULL);
        return;
    }
    c->emu->last_activity_ns = emu_mono_ns();
    if (n != (ssize_t)sizeof(q) || q.op == 0 || q.op >= EMU_OP_COUNT) {
        emu_client_fail(c, "malformed request");
        return;
    }
    if (!c->attached) {
        if (q.op != EMU_OP_HELLO) {
            emu_client_fail(c, "first request is not a hello");
            return;
        }
        hello(c, &q);
        return;
    }
    if (c->have_req) {
        emu_client_fail(c, "a second request before the reply to the first");
        return;
    }
    c->req = q;
    c->have_req = true;
    c->inflight++;
    emu_inject(c->emu, agent_wake, c, NULL);
}

static void accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)revents;
    struct emu *e = w->data;
    int fd = accept4(e->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0)
        return;
    struct ucred cred;
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.uid != geteuid()) {
        /* the directory is 0700, so this is a root process of another
         * user: still not ours to serve */
        close(fd);
        return;
    }
    struct emu_client *c = xcalloc_or_die(1, sizeof(*c));
    c->emu = e;
    c->fd = fd;
    c->db_fd = -1;
    c->async_wr = -1;
    c->pid = cred.pid;
    snprintf(c->name, sizeof(c->name), "pid %d", (int)c->pid);
    ev_io_init(&c->io_w, client_io_cb, fd, EV_READ);
    c->io_w.data = c;
    ev_io_start(loop, &c->io_w);
    c->next = e->clients;
    e->clients = c;
}

void emu_clients_close_all(struct emu *e)
{
    for (struct emu_client *c = e->clients; c; c = c->next)
        emu_client_fail(c, NULL);
}

void emu_clients_drain(struct emu *e)
{
    for (struct emu_client *c = e->clients; c; c = c->next)
        if (c->ctx && !c->closing)
            emu_rings_drain(c);
}

void emu_after_batch(struct emu *e)
{
    emu_remote_flush_all(e); /* the bytes of the step before its CQEs */
    struct emu_client **pp = &e->clients;
    while (*pp) {
        struct emu_client *c = *pp;
        if (c->agent_done && c->inflight == 0) {
            if (c->crashed)
                e->clients_crashed++;
            *pp = c->next;
            client_free(c);
            continue;
        }
        if (c->ctx && !c->closing) {
            emu_rings_arm(c);
            emu_rings_publish(c);
        }
        pp = &c->next;
    }
}

void emu_clients_free_all(struct emu *e)
{
    if (!e->clients)
        return;
    emu_clients_close_all(e);
    /* the agents run their teardown in simulated time (control verbs cost
     * what the host profile says): a few simulated milliseconds at most */
    for (int i = 0; i < 1000; i++) {
        bool busy = false;
        for (struct emu_client *c = e->clients; c; c = c->next)
            busy = busy || !c->agent_done || c->inflight;
        if (!busy)
            break;
        sim_run(e->sim, sim_now(e->sim) + SIM_MS);
    }
    emu_after_batch(e);
    while (e->clients) { /* an agent that could not finish */
        struct emu_client *c = e->clients;
        e->clients = c->next;
        client_free(c);
    }
}
