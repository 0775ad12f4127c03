/* Asynchronous events of a context (ibv_get_async_event /
 * ibv_ack_async_event).  ctx->async_fd is a real eventfd in semaphore
 * mode holding one count per queued event, so programs can poll(2) it.
 * The model raises IBV_EVENT_SRQ_LIMIT_REACHED (srq.c); QP fatal, last
 * WQE reached and port changes are later work; shim_async_event_post is
 * the entry point for them. */
#include <errno.h>
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

void shim_async_drop_srq(struct shim_context *sctx, struct ibv_srq *srq)
{
    struct shim_async_event_node **pp = &sctx->async_head, *last = NULL;
    while (*pp) {
        struct shim_async_event_node *n = *pp;
        if (n->ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED && n->ev.element.srq == srq) {
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
 * arguments, EAGAIN outside a simulated process with nothing queued.  A
 * simulated process blocks until an event is queued. */
int ibv_get_async_event(struct ibv_context *context, struct ibv_async_event *event)
{
    host_note_call();
    if (!context || !event) {
        errno = EINVAL;
        return -1;
    }
    struct shim_context *sctx = shim_ctx(context);
    while (!sctx->async_head) {
        if (!sim_proc_current()) {
            errno = EAGAIN;
            return -1;
        }
        sim_waitq_wait(&sctx->async_wq, "ibv_get_async_event: waiting for an async event");
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
    if (event && event->event_type == IBV_EVENT_SRQ_LIMIT_REACHED && event->element.srq)
        event->element.srq->events_completed++;
}
