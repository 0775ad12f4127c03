/* Completion queues and completion channels.
 *
 * Polling model (sim/host.h): ibv_poll_cq takes the CQEs that are visible
 * now (nic_cq_poll) and charges host.cpu.poll_cq_ps plus poll_cqe_ps per
 * CQE returned.  An empty poll that directly follows an empty poll of the
 * same thread (no other verbs or host_* call in between) is a spin loop:
 * the thread parks (host_park) until something it could observe changes
 * on its host (a DMA write or a CQE lands, a sibling thread runs), then
 * polls once more and returns what is there, possibly 0.  A busy loop
 * therefore costs one simulator event per real change, not per iteration,
 * and a loop that can never succeed leaves the process blocked, which the
 * simulator reports as a deadlock naming "ibv_poll_cq".
 *
 * Completion channels: ibv_req_notify_cq arms the CQ on the NIC
 * (nic_cq_arm); the NIC calls cq_notify() once per arm, for the next CQE.
 * cq_notify queues the CQ on its channel, adds one to the channel's eventfd
 * (semaphore mode, so the fd is readable exactly while events are queued)
 * and wakes processes blocked in ibv_get_cq_event.  Exactly one event per
 * arm, never a spurious one. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "shim.h"
#include "sim/trace.h"

/* ---------------------------------------------------------------- channel event queue */

static int channel_push(struct shim_channel *ch, struct shim_cq *scq)
{
    if (ch->q_len == ch->q_cap) {
        size_t ncap = ch->q_cap ? ch->q_cap * 2 : 8;
        struct shim_cq **nq = malloc(ncap * sizeof(*nq));
        if (!nq)
            return ENOMEM;
        for (size_t i = 0; i < ch->q_len; i++)
            nq[i] = ch->q[(ch->q_head + i) % ch->q_cap];
        free(ch->q);
        ch->q = nq;
        ch->q_head = 0;
        ch->q_cap = ncap;
    }
    ch->q[(ch->q_head + ch->q_len) % ch->q_cap] = scq;
    ch->q_len++;
    return 0;
}

static struct shim_cq *channel_pop(struct shim_channel *ch)
{
    struct shim_cq *scq = ch->q[ch->q_head];
    ch->q_head = (ch->q_head + 1) % ch->q_cap;
    ch->q_len--;
    return scq;
}

static void channel_fd_add(struct shim_channel *ch)
{
    uint64_t one = 1;
    ssize_t rc = write(ch->ch.fd, &one, sizeof(one));
    (void)rc; /* an eventfd write of 1 cannot fail short of 2^64-2 events */
}

static void channel_fd_take(struct shim_channel *ch)
{
    uint64_t v;
    ssize_t rc = read(ch->ch.fd, &v, sizeof(v)); /* semaphore mode: takes 1 */
    (void)rc;                                    /* readable: one count per queued event */
}

/* Drop the queued events of a CQ being destroyed (the kernel removes them
 * from the event file too), keeping the order of the others. */
static void channel_remove_cq(struct shim_channel *ch, struct shim_cq *scq)
{
    size_t kept = 0, removed = 0;
    for (size_t i = 0; i < ch->q_len; i++) {
        struct shim_cq *e = ch->q[(ch->q_head + i) % ch->q_cap];
        if (e == scq) {
            removed++;
            continue;
        }
        ch->q[(ch->q_head + kept) % ch->q_cap] = e;
        kept++;
    }
    ch->q_len = kept;
    while (removed--)
        channel_fd_take(ch);
}

/* NIC callback: one call per arm, when the next CQE became visible. */
static void cq_notify(struct sim *sim, void *a, void *b)
{
    (void)b;
    struct shim_cq *scq = a;
    struct shim_channel *ch = scq->channel;
    if (!ch)
        return; /* armed without a channel: the event goes nowhere */
    if (channel_push(ch, scq) != 0)
        return; /* out of memory: the event is lost, as on an overflowing EQ */
    channel_fd_add(ch);
    if (!sim_waitq_empty(&ch->wq))
        sim_waitq_wake_all(sim, &ch->wq);
    host_fd_activity(scq->ctx->host); /* a poll(2) on channel->fd */
}

/* NIC callback: the CQ overran (sim/nic/cq.c): IBV_EVENT_CQ_ERR. */
static void cq_error(struct sim *sim, void *a, void *b)
{
    (void)sim;
    (void)b;
    struct shim_cq *scq = a;
    struct ibv_async_event ev = {.element.cq = &scq->cq, .event_type = IBV_EVENT_CQ_ERR};
    shim_async_event_post(scq->ctx, &ev);
}

/* ---------------------------------------------------------------- channels */

struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context)
{
    shim_charge_control();
    if (!context) {
        errno = EINVAL;
        return NULL;
    }
    struct shim_channel *ch = calloc(1, sizeof(*ch));
    if (!ch) {
        errno = ENOMEM;
        return NULL;
    }
    ch->ch.fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
    if (ch->ch.fd < 0) {
        int e = errno;
        free(ch);
        errno = e;
        return NULL;
    }
    ch->ch.context = context;
    ch->ch.refcnt = 0;
    ch->ctx = shim_ctx(context);
    sim_waitq_init(&ch->wq, "ibv_get_cq_event");
    ch->ctx->n_channels++;
    return &ch->ch;
}

/* Returns 0, EINVAL (NULL) or EBUSY (CQs still use it), as rdma-core. */
int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
    shim_charge_control();
    if (!channel)
        return EINVAL;
    if (channel->refcnt)
        return EBUSY;
    struct shim_channel *ch = shim_channel(channel);
    close(ch->ch.fd);
    free(ch->q);
    ch->ctx->n_channels--;
    free(ch);
    return 0;
}

/* Returns 0 with the CQ and its context, or -1 with errno (EINVAL: NULL
 * arguments; EAGAIN: called outside a simulated process with no event
 * queued, where blocking could never end).  Inside a simulated process it
 * blocks until an event is queued. */
int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq, void **cq_context)
{
    host_note_call();
    if (!channel || !cq || !cq_context) {
        errno = EINVAL;
        return -1;
    }
    struct shim_channel *ch = shim_channel(channel);
    while (ch->q_len == 0) {
        if (!sim_proc_current()) {
            errno = EAGAIN;
            return -1;
        }
        host_block_begin(); /* asleep in read(2): its CPU is free for others */
        sim_waitq_wait(&ch->wq, "ibv_get_cq_event: waiting for a completion event");
        host_block_end();
    }
    struct shim_cq *scq = channel_pop(ch);
    channel_fd_take(ch);
    scq->events_delivered++;
    *cq = &scq->cq;
    *cq_context = scq->cq.cq_context;
    /* The read(2) on the event file: costed like a control verb. */
    struct host *h = host_of_current();
    if (h)
        host_charge(h->cpu.control_verb_ps);
    return 0;
}

void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
    host_note_call();
    if (!cq)
        return;
    struct shim_cq *scq = shim_cq(cq);
    cq->comp_events_completed += nevents;
    if (!sim_waitq_empty(&scq->ack_wq))
        sim_waitq_wake_all(scq->ctx->host->sim, &scq->ack_wq);
}

/* ---------------------------------------------------------------- CQs */

/* Returns the CQ (cq->cqe = the granted size, exactly `cqe`), or NULL with
 * errno EINVAL (NULL context, cqe < 1 or > max_cqe, comp_vector out of
 * range, channel of another context) or the NIC's errno. */
struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe, void *cq_context,
                             struct ibv_comp_channel *channel, int comp_vector)
{
    shim_charge_control();
    if (!context) {
        errno = EINVAL;
        return NULL;
    }
    struct shim_context *sctx = shim_ctx(context);
    const struct nic_params *p = nic_get_params(sctx->nic);
    if (cqe < 1 || (uint32_t)cqe > p->max_cqe || comp_vector < 0 ||
        comp_vector >= context->num_comp_vectors || (channel && channel->context != context)) {
        errno = EINVAL;
        return NULL;
    }
    struct shim_cq *scq = calloc(1, sizeof(*scq));
    if (!scq) {
        errno = ENOMEM;
        return NULL;
    }
    scq->ncq = nic_cq_create(sctx->nic, (uint32_t)cqe);
    if (!scq->ncq) {
        int e = errno ? errno : ENOMEM;
        free(scq);
        errno = e;
        return NULL;
    }
    scq->ctx = sctx;
    scq->channel = channel ? shim_channel(channel) : NULL;
    sim_waitq_init(&scq->ack_wq, "ibv_destroy_cq");
    nic_cq_set_notify(scq->ncq, cq_notify, scq, NULL);
    nic_cq_set_error_notify(scq->ncq, cq_error, scq, NULL);
    scq->cq.context = context;
    scq->cq.channel = channel;
    scq->cq.cq_context = cq_context;
    scq->cq.handle = scq->ncq->id;
    scq->cq.cqe = cqe;
    pthread_mutex_init(&scq->cq.mutex, NULL);
    pthread_cond_init(&scq->cq.cond, NULL);
    if (channel)
        channel->refcnt++;
    sctx->n_cqs++;
    return &scq->cq;
}

/* Returns 0, EINVAL (NULL) or EBUSY (QPs still use it).  Like rdma-core it
 * then waits until every event delivered by ibv_get_cq_event has been
 * acknowledged (a simulated process blocks there; that never ends if the
 * program forgets to ack, as on real hardware). */
int ibv_destroy_cq(struct ibv_cq *cq)
{
    shim_charge_control();
    if (!cq)
        return EINVAL;
    struct shim_cq *scq = shim_cq(cq);
    if (scq->n_qps)
        return EBUSY;
    int rc = nic_cq_destroy(scq->ncq);
    if (rc)
        return rc;
    shim_async_drop(scq->ctx, cq);
    if (scq->channel) {
        channel_remove_cq(scq->channel, scq);
        scq->channel->ch.refcnt--;
    }
    while (sim_proc_current() && cq->comp_events_completed != scq->events_delivered) {
        host_block_begin();
        sim_waitq_wait(&scq->ack_wq, "ibv_destroy_cq: waiting for ibv_ack_cq_events");
        host_block_end();
    }
    pthread_cond_destroy(&cq->cond);
    pthread_mutex_destroy(&cq->mutex);
    scq->ctx->n_cqs--;
    free(scq);
    return 0;
}

/* ops.req_notify_cq: arm once for the next CQE (or the next solicited
 * one).  Costs a CQ doorbell-record write, charged like a poll. */
int shim_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
    host_note_call();
    struct shim_cq *scq = shim_cq(cq);
    nic_cq_arm(scq->ncq, solicited_only != 0);
    struct host *h = host_of_current();
    if (h)
        host_charge(h->cpu.poll_cq_ps);
    return 0;
}

/* ops.poll_cq: see the file comment for the cost and parking model.
 * Returns the number of CQEs written to wc (0..num_entries), or -1 for a
 * NULL wc array. */
/* One TRACE_POLL record per CQE a program takes (sim/trace.h); unit =
 * the CQ's number. */
static void trace_polled(struct host *h, const struct ibv_cq *cq, const struct ibv_wc *wc, int n)
{
    if (!n || !sim_trace_enabled(h->sim))
        return;
    for (int i = 0; i < n; i++) {
        struct trace_rec r = {.kind = TRACE_POLL,
                              .opcode = (uint8_t)wc[i].opcode,
                              .status = (uint16_t)wc[i].status,
                              .node = h->id,
                              .unit = cq->handle,
                              .qpn = wc[i].qp_num,
                              .addr = wc[i].wr_id,
                              .len = wc[i].byte_len,
                              .where = "ibv_poll_cq"};
        sim_trace(h->sim, &r);
    }
}

/* Take up to `num` CQEs of `scq` for the running thread (`ts`: their
 * visibility times, or NULL), with the spin-park rule of the file comment
 * and the CPU cost of one poll.  Outside a simulated process: a plain
 * poll. */
static int cq_poll_charged(struct shim_cq *scq, int num, struct ibv_wc *wc, sim_time_t *ts)
{
    int got = num > 0 ? nic_cq_poll_ts(scq->ncq, num, wc, ts) : 0;
    struct host_thread *ht = host_thread_current();
    if (!ht)
        return got;
    host_observed();
    /* Spin detection (sim/host.h): park only when this CQ was already
     * polled empty since the thread's last other call, i.e. a polling loop
     * came round again.  Two empty polls of different CQs are not a spin:
     * the program may post something next (a request whose answer is what
     * it waits for). */
    bool spun = false;
    if (got == 0) {
        if (ht->empty_poll_mark != ht->other_calls + 1) {
            ht->empty_poll_mark = ht->other_calls + 1;
            ht->n_empty_cqs = 0;
        }
        for (unsigned i = 0; i < ht->n_empty_cqs; i++)
            spun = spun || ht->empty_cqs[i] == (const void *)scq;
        if (!spun) {
            if (ht->n_empty_cqs < HOST_EMPTY_CQS_MAX)
                ht->empty_cqs[ht->n_empty_cqs++] = scq;
            else
                spun = true; /* more CQs than a loop plausibly has */
        }
    }
    if (spun) {
        char why[64];
        snprintf(why, sizeof(why), "ibv_poll_cq(cq %u): CQ empty", scq->cq.handle);
        host_park(why);
        got = num > 0 ? nic_cq_poll_ts(scq->ncq, num, wc, ts) : 0;
    }
    int n = got > 0 ? got : 0;
    /* a thread on another socket than the NIC reads each CQE across it; an
     * empty poll changes nothing a sibling could wait for */
    sim_time_t cost =
        sim_time_add(ht->host->cpu.poll_cq_ps,
                     sim_time_mul((uint64_t)n, sim_time_add(ht->host->cpu.poll_cqe_ps,
                                                            host_remote_line_extra())));
    if (sim_trace_on(ht->host->sim, TRACE_G_HOST)) { /* after a park: that was its own span */
        sim_time_t now = sim_now(ht->host->sim);
        host_trace_call(ht, now, sim_time_add(now, cost), "ibv_poll_cq",
                        &(struct trace_rec){.addr = scq->cq.handle,
                                            .qpn = n ? wc[0].qp_num : 0,
                                            .val = (uint64_t)n,
                                            .status = n ? (uint16_t)wc[0].status : 0});
    }
    trace_polled(ht->host, &scq->cq, wc, n);
    if (n)
        host_charge(cost);
    else
        host_charge_private(cost); /* n == 0: cost is poll_cq_ps */
    if (n) {
        ht->empty_poll_mark = 0;
        ht->n_empty_cqs = 0;
    }
    return got;
}

int shim_poll_cq(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc)
{
    if (num_entries > 0 && !wc)
        return -1;
    return cq_poll_charged(shim_cq(cq), num_entries, wc, NULL);
}

/* ---------------------------------------------------------------- ibv_resize_cq */

/* Returns 0 (cq->cqe = the new size, exactly `cqe`), or EINVAL: NULL,
 * cqe < 1 or above max_cqe, fewer than the CQEs waiting to be polled
 * (mlx5_ib_resize_cq); ENOMEM. */
int ibv_resize_cq(struct ibv_cq *cq, int cqe)
{
    shim_charge_control();
    if (!cq || cqe < 1)
        return EINVAL;
    struct shim_cq *scq = shim_cq(cq);
    int rc = nic_cq_resize(scq->ncq, (uint32_t)cqe);
    if (rc)
        return rc;
    cq->cqe = cqe;
    return 0;
}

/* ---------------------------------------------------------------- the extended CQ */

/* The model's HCA clock for completion timestamps: 1 GHz, so a timestamp
 * is the simulated time of the CQE in nanoseconds, counted from the
 * host's boot as the TSC of programs is (1000 s before the run). */
#define SHIM_HCA_CLOCK_KHZ 1000000ull
#define SHIM_HCA_CLOCK_BOOT_NS 1000000000000ull

static struct shim_cq *shim_cqx(struct ibv_cq_ex *cqx)
{
    return shim_container_of(cqx, struct shim_cq, cqx);
}

static int cqx_take(struct shim_cq *scq)
{
    struct ibv_wc wc;
    sim_time_t ts;
    if (cq_poll_charged(scq, 1, &wc, &ts) != 1)
        return ENOENT;
    scq->cur = wc;
    scq->cur_ps = ts;
    scq->cqx.wr_id = wc.wr_id;
    scq->cqx.status = wc.status;
    return 0;
}

static int cqx_start_poll(struct ibv_cq_ex *cqx, struct ibv_poll_cq_attr *attr)
{
    if (attr && attr->comp_mask)
        return EINVAL;
    return cqx_take(shim_cqx(cqx));
}

static int cqx_next_poll(struct ibv_cq_ex *cqx)
{
    return cqx_take(shim_cqx(cqx));
}

static void cqx_end_poll(struct ibv_cq_ex *cqx)
{
    (void)cqx;
}

static enum ibv_wc_opcode cqx_read_opcode(struct ibv_cq_ex *cqx)
{
    return shim_cqx(cqx)->cur.opcode;
}
static uint32_t cqx_read_vendor_err(struct ibv_cq_ex *cqx)
{
    return shim_cqx(cqx)->cur.vendor_err;
}
static uint32_t cqx_read_byte_len(struct ibv_cq_ex *cqx)
{
    return shim_cqx(cqx)->cur.byte_len;
}
static __be32 cqx_read_imm_data(struct ibv_cq_ex *cqx)
{
    return shim_cqx(cqx)->cur.imm_data;
}
static uint32_t cqx_read_qp_num(struct ibv_cq_ex *cqx)
{
    return shim_cqx(cqx)->cur.qp_num;
}
static uint32_t cqx_read_src_qp(struct ibv_cq_ex *cqx)
{
    return shim_cqx(cqx)->cur.src_qp;
}
static unsigned int cqx_read_wc_flags(struct ibv_cq_ex *cqx)
{
    return shim_cqx(cqx)->cur.wc_flags;
}
static uint32_t cqx_read_slid(struct ibv_cq_ex *cqx)
{
    return shim_cqx(cqx)->cur.slid;
}
static uint8_t cqx_read_sl(struct ibv_cq_ex *cqx)
{
    return shim_cqx(cqx)->cur.sl;
}
static uint8_t cqx_read_dlid_path_bits(struct ibv_cq_ex *cqx)
{
    return shim_cqx(cqx)->cur.dlid_path_bits;
}
static uint64_t cqx_read_completion_ts(struct ibv_cq_ex *cqx)
{
    return SHIM_HCA_CLOCK_BOOT_NS + shim_cqx(cqx)->cur_ps / SIM_NS;
}
static uint64_t cqx_read_completion_wallclock_ns(struct ibv_cq_ex *cqx)
{
    /* the simulated wall clock of programs: 2023-11-14 22:13:20 UTC + t */
    return 1700000000ull * 1000000000ull + shim_cqx(cqx)->cur_ps / SIM_NS;
}

enum {
    SHIM_CQ_EX_WC_FLAGS = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM |
                          IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL |
                          IBV_WC_EX_WITH_DLID_PATH_BITS | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
                          IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK,
};

/* verbs_context.create_cq_ex.  Returns the CQ, or NULL with errno:
 * EINVAL as ibv_create_cq, or for comp_mask bits / flags it does not
 * know; EOPNOTSUPP for wc_flags the model cannot fill (CVLAN, FLOW_TAG,
 * TM_INFO) and for parent domains. */
struct ibv_cq_ex *shim_create_cq_ex(struct ibv_context *context, struct ibv_cq_init_attr_ex *attr)
{
    if (!context || !attr) {
        errno = EINVAL;
        return NULL;
    }
    if (attr->comp_mask & ~(uint32_t)(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD)) {
        errno = EINVAL;
        return NULL;
    }
    if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) ||
        (attr->wc_flags & ~(uint64_t)SHIM_CQ_EX_WC_FLAGS)) {
        errno = EOPNOTSUPP;
        return NULL;
    }
    if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
        (attr->flags & ~(uint32_t)IBV_CREATE_CQ_ATTR_SINGLE_THREADED)) {
        errno = EOPNOTSUPP;
        return NULL;
    }
    struct ibv_cq *cq = ibv_create_cq(context, (int)attr->cqe, attr->cq_context, attr->channel,
                                      (int)attr->comp_vector);
    if (!cq)
        return NULL;
    struct shim_cq *scq = shim_cq(cq);
    scq->is_ex = true;
    scq->wc_flags = attr->wc_flags;
    struct ibv_cq_ex *x = &scq->cqx;
    x->comp_mask = 0;
    x->start_poll = cqx_start_poll;
    x->next_poll = cqx_next_poll;
    x->end_poll = cqx_end_poll;
    x->read_opcode = cqx_read_opcode;
    x->read_vendor_err = cqx_read_vendor_err;
    x->read_wc_flags = cqx_read_wc_flags;
    uint64_t f = attr->wc_flags;
    if (f & IBV_WC_EX_WITH_BYTE_LEN)
        x->read_byte_len = cqx_read_byte_len;
    if (f & IBV_WC_EX_WITH_IMM)
        x->read_imm_data = cqx_read_imm_data;
    if (f & IBV_WC_EX_WITH_QP_NUM)
        x->read_qp_num = cqx_read_qp_num;
    if (f & IBV_WC_EX_WITH_SRC_QP)
        x->read_src_qp = cqx_read_src_qp;
    if (f & IBV_WC_EX_WITH_SLID)
        x->read_slid = cqx_read_slid;
    if (f & IBV_WC_EX_WITH_SL)
        x->read_sl = cqx_read_sl;
    if (f & IBV_WC_EX_WITH_DLID_PATH_BITS)
        x->read_dlid_path_bits = cqx_read_dlid_path_bits;
    if (f & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP)
        x->read_completion_ts = cqx_read_completion_ts;
    if (f & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)
        x->read_completion_wallclock_ns = cqx_read_completion_wallclock_ns;
    return x;
}
