/* Asynchronous events of a context (ibv_get_async_event /
 * ibv_ack_async_event).  ctx->async_fd is a real eventfd in semaphore
 * mode holding one count per queued event, so programs can poll(2) it,
 * and set O_NONBLOCK on it: ibv_get_async_event then answers EAGAIN when
 * nothing is queued, as libibverbs' read(2) of the fd does.  The model
 * raises IBV_EVENT_SRQ_LIMIT_REACHED (srq.c), IBV_EVENT_CQ_ERR when a CQ
 * overruns and IBV_EVENT_QP_FATAL for each QP that goes to error with it
 * (cq.c, qp.c); last WQE reached and port changes are later work;
 * shim_async_event_post is the entry point for them. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "shim.h"

struct shim_async_event_node {
    struct shim_async_event_node *next;
    struct ibv_async_event ev;
};

int shim_async_event_post(struct shim_context *sctx, const struct ibv_async_event *ev)
{
    struct shim_async_event_node *n = malloc(sizeof(*n));
    if (!n)
        return ENOMEM;
    n->next = NULL;
    n->ev = *ev;
    if (sctx->async_tail)
        sctx->async_tail->next = n;
    else
        sctx->async_head = n;
    sctx->async_tail = n;
    uint64_t one = 1;
    ssize_t rc = write(sctx->vctx.context.async_fd, &one, sizeof(one));
    (void)rc; /* eventfd: cannot fail short of 2^64-2 pending events */
    if (!sim_waitq_empty(&sctx->async_wq))
        sim_waitq_wake_all(sctx->host->sim, &sctx->async_wq);
    host_fd_activity(sctx->host); /* a poll(2) on async_fd */
    return 0;
}

/* The object an event is about (the union member its type uses). */
static const void *event_element(const struct ibv_async_event *ev)
{
    switch (ev->event_type) {
    case IBV_EVENT_CQ_ERR:
        return ev->element.cq;
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_SRQ_LIMIT_REACHED:
        return ev->element.srq;
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_COMM_EST:
    case IBV_EVENT_SQ_DRAINED:
    case IBV_EVENT_PATH_MIG:
    case IBV_EVENT_PATH_MIG_ERR:
    case IBV_EVENT_QP_LAST_WQE_REACHED:
        return ev->element.qp;
    default:
        return NULL; /* port and device events */
    }
}

void shim_async_drop(struct shim_context *sctx, const void *obj)
{
    struct shim_async_event_node **pp = &sctx->async_head, *last = NULL;
    while (*pp) {
        struct shim_async_event_node *n = *pp;
        if (obj && event_element(&n->ev) == obj) {
            *pp = n->next;
            free(n);
            uint64_t v;
            ssize_t rc = read(sctx->vctx.context.async_fd, &v, sizeof(v)); /* one count */
            (void)rc;
            continue;
        }
        last = n;
        pp = &n->next;
    }
    sctx->async_tail = last;
}

void shim_async_teardown(struct shim_context *sctx)
{
    while (sctx->async_head) {
        struct shim_async_event_node *n = sctx->async_head;
        sctx->async_head = n->next;
        free(n);
    }
    sctx->async_tail = NULL;
    close(sctx->vctx.context.async_fd);
}

/* Returns 0 with the next event, or -1 with errno: EINVAL for NULL
 * arguments, EAGAIN with nothing queued when the fd is O_NONBLOCK or the
 * caller is not a simulated process.  A simulated process otherwise blocks
 * until an event is queued. */
int ibv_get_async_event(struct ibv_context *context, struct ibv_async_event *event)
{
    host_note_call();
    if (!context || !event) {
        errno = EINVAL;
        return -1;
    }
    struct shim_context *sctx = shim_ctx(context);
    while (!sctx->async_head) {
        /* a non-blocking fd (fcntl O_NONBLOCK), or no simulated process
         * to block: nothing to read now */
        int fl = fcntl(context->async_fd, F_GETFL);
        if (!sim_proc_current() || (fl >= 0 && (fl & O_NONBLOCK))) {
            errno = EAGAIN;
            return -1;
        }
        host_block_begin();
        sim_waitq_wait(&sctx->async_wq, "ibv_get_async_event: waiting for an async event");
        host_block_end();
    }
    struct shim_async_event_node *n = sctx->async_head;
    sctx->async_head = n->next;
    if (!sctx->async_head)
        sctx->async_tail = NULL;
    *event = n->ev;
    free(n);
    uint64_t v;
    ssize_t rc = read(context->async_fd, &v, sizeof(v)); /* takes one count */
    (void)rc;
    return 0;
}

/* Acknowledgement is bookkeeping only: it counts SRQ events in
 * srq->events_completed (as libibverbs does), but no object waits for
 * async acks in the model (destroy does not block on them). */
void ibv_ack_async_event(struct ibv_async_event *event)
{
    host_note_call();
    if (!event || !event_element(event))
        return;
    /* the counters libibverbs keeps per object */
    if (event->event_type == IBV_EVENT_CQ_ERR)
        event->element.cq->async_events_completed++;
    else if (event->event_type == IBV_EVENT_SRQ_ERR ||
             event->event_type == IBV_EVENT_SRQ_LIMIT_REACHED)
        event->element.srq->events_completed++;
    else
        event->element.qp->events_completed++;
}
