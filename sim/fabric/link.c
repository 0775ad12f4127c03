/* One direction of a cable: a drop-tail queue that serialises frames at the
 * line rate, followed by a propagation pipe (htsim's Queue + Pipe).
 *
 *   link_send -> [queue: drop-tail by bytes] -> serialiser (tx_ev)
 *             -> [pipe: FIFO of (arrival time, pkt)] (pipe_ev) -> sink.rx
 *
 * Two intrusive events per link, whatever the load: `tx_ev` fires when the
 * frame being serialised has left, `pipe_ev` when the oldest frame in the
 * pipe reaches the far end.  Frames leave the serialiser in order and the
 * delay is constant, so pipe arrival times are increasing and a ring buffer
 * is enough.
 *
 * Queue accounting counts wire bytes (frame + preamble/SFD + IFG) and
 * includes the frame being serialised, so `queue_bytes` bounds the whole
 * egress buffer. */
#include <stdlib.h>
#include <string.h>

#include "fabric.h"

struct pipe_slot {
    sim_time_t arrive_ps;
    struct pkt *pkt;
};

struct link {
    struct sim *sim;
    char *name;
    struct link_params p;
    struct pkt_pool *pool;
    struct fabric_sink sink;

    /* queue (head = next to serialise); `tx` is the frame on the wire */
    struct pkt *q_head, *q_tail;
    struct pkt *tx;
    uint64_t queued_bytes; /* queue + tx, wire bytes */
    struct sim_event tx_ev;

    /* pipe: ring of frames in flight */
    struct pipe_slot *pipe;
    size_t pipe_cap, pipe_head, pipe_n;
    struct sim_event pipe_ev;

    sim_cb_fn idle_fn;
    void *idle_a, *idle_b;

    struct link_counters c;
};

static void tx_done(struct sim *sim, struct sim_event *ev);
static void pipe_arrive(struct sim *sim, struct sim_event *ev);

struct link *link_create(struct sim *sim, const char *name, const struct link_params *p,
                         struct pkt_pool *pool)
{
    if (!sim || !p || p->rate_bps == 0)
        return NULL;
    struct link *l = calloc(1, sizeof(*l));
    if (!l)
        return NULL;
    l->name = strdup(name ? name : "link");
    if (!l->name) {
        free(l);
        return NULL;
    }
    l->sim = sim;
    l->p = *p;
    l->pool = pool;
    sim_event_init(&l->tx_ev, tx_done, l, "link.tx");
    sim_event_init(&l->pipe_ev, pipe_arrive, l, "link.pipe");
    return l;
}

void link_destroy(struct link *l)
{
    if (!l)
        return;
    sim_cancel(l->sim, &l->tx_ev);
    sim_cancel(l->sim, &l->pipe_ev);
    for (struct pkt *p = l->q_head, *next; p; p = next) {
        next = p->next;
        pkt_free(l->pool, p);
    }
    if (l->tx)
        pkt_free(l->pool, l->tx);
    for (size_t i = 0; i < l->pipe_n; i++)
        pkt_free(l->pool, l->pipe[(l->pipe_head + i) % l->pipe_cap].pkt);
    free(l->pipe);
    free(l->name);
    free(l);
}

void link_connect(struct link *l, struct fabric_sink sink)
{
    l->sink = sink;
}

const struct link_counters *link_get_counters(const struct link *l)
{
    return &l->c;
}
const char *link_name(const struct link *l)
{
    return l->name;
}
bool link_idle(const struct link *l)
{
    return l->tx == NULL;
}
uint64_t link_queued_bytes(const struct link *l)
{
    return l->queued_bytes;
}

void link_set_idle_hook(struct link *l, sim_cb_fn fn, void *a, void *b)
{
    l->idle_fn = fn;
    l->idle_a = a;
    l->idle_b = b;
}

/* Take the head of the queue onto the wire. */
static void tx_start(struct link *l)
{
    struct pkt *p = l->q_head;
    l->q_head = p->next;
    if (!l->q_head)
        l->q_tail = NULL;
    p->next = NULL;
    l->tx = p;
    sim_time_t ser_ps = sim_bytes_to_ps(pkt_wire_bytes(p), l->p.rate_bps);
    l->c.busy_ps += ser_ps;
    sim_schedule_in(l->sim, &l->tx_ev, ser_ps);
}

bool link_send(struct link *l, struct pkt *p)
{
    uint64_t wire = pkt_wire_bytes(p);
    if (l->p.queue_bytes && l->queued_bytes + wire > l->p.queue_bytes) {
        l->c.pkts_dropped++;
        l->c.bytes_dropped += wire;
        pkt_free(l->pool, p);
        return false;
    }
    p->next = NULL;
    if (l->q_tail)
        l->q_tail->next = p;
    else
        l->q_head = p;
    l->q_tail = p;
    l->queued_bytes += wire;
    if (l->queued_bytes > l->c.max_queue_bytes)
        l->c.max_queue_bytes = l->queued_bytes;
    if (!l->tx)
        tx_start(l);
    return true;
}

static void pipe_push(struct link *l, sim_time_t arrive_ps, struct pkt *p)
{
    if (l->pipe_n == l->pipe_cap) {
        size_t cap = l->pipe_cap ? 2 * l->pipe_cap : 16;
        struct pipe_slot *np = malloc(cap * sizeof(*np));
        if (!np) {
            fprintf(stderr, "rnicsim: link %s: out of memory\n", l->name);
            abort();
        }
        for (size_t i = 0; i < l->pipe_n; i++)
            np[i] = l->pipe[(l->pipe_head + i) % l->pipe_cap];
        free(l->pipe);
        l->pipe = np;
        l->pipe_cap = cap;
        l->pipe_head = 0;
    }
    l->pipe[(l->pipe_head + l->pipe_n) % l->pipe_cap] = (struct pipe_slot){arrive_ps, p};
    l->pipe_n++;
    if (!sim_event_pending(&l->pipe_ev))
        sim_schedule_at(l->sim, &l->pipe_ev, arrive_ps);
}

/* The last bit of `tx` has left: into the pipe, then the next frame (or
 * tell the sender the link went idle). */
static void tx_done(struct sim *sim, struct sim_event *ev)
{
    struct link *l = ev->ctx;
    struct pkt *p = l->tx;
    uint64_t wire = pkt_wire_bytes(p);
    l->tx = NULL;
    l->queued_bytes -= wire;
    l->c.pkts_sent++;
    l->c.bytes_sent += wire;
    pipe_push(l, sim_now(sim) + l->p.delay_ps, p);
    if (l->q_head)
        tx_start(l);
    else if (l->idle_fn)
        l->idle_fn(sim, l->idle_a, l->idle_b);
}

/* The oldest frame in the pipe reaches the far end. */
static void pipe_arrive(struct sim *sim, struct sim_event *ev)
{
    struct link *l = ev->ctx;
    struct pkt *p = l->pipe[l->pipe_head].pkt;
    l->pipe_head = (l->pipe_head + 1) % l->pipe_cap;
    l->pipe_n--;
    if (l->pipe_n)
        sim_schedule_at(sim, &l->pipe_ev, l->pipe[l->pipe_head].arrive_ps);
    if (l->sink.rx)
        l->sink.rx(sim, l->sink.ctx, p);
    else { /* unconnected far end: the frame is lost, counted as a drop */
        l->c.pkts_dropped++;
        l->c.bytes_dropped += pkt_wire_bytes(p);
        pkt_free(l->pool, p);
    }
}
