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
 * egress buffer.
 *
 * Impairments, decided when the last bit leaves the serialiser:
 *   - link down: the frame is dropped there (it was never really sent);
 *   - loss (loss_prob): the frame is counted as sent and vanishes;
 *   - corruption (corrupt_prob): the frame crosses the pipe marked corrupt
 *     and is dropped at the far end, where its ICRC check fails.
 * Each draw is one 64-bit number from the link's RNG stream (named after
 * the link) compared with p * 2^64, so runs repeat exactly per seed, and a
 * link with both probabilities 0 draws nothing.  A failure also loses what
 * is in the cable: pipe slots remember the failure epoch they were sent in. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fabric.h"
#include "pcap.h"
#include "../trace.h"

struct pipe_slot {
    sim_time_t arrive_ps;
    struct pkt *pkt;
    uint32_t epoch; /* l->fail_epoch when it entered the cable */
    bool corrupt;
};

struct link_tap_entry {
    struct pcap_writer *w;
    enum link_tap where;
};

/* A probability as an integer threshold: an event happens when a uniform
 * 64-bit draw is below `thr`, or always. */
struct prob {
    uint64_t thr;
    bool always;
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

    /* impairments and failures */
    struct prob loss, corrupt;
    struct sim_rng rng;
    bool up;
    uint32_t fail_epoch;
    uint32_t trace_id;

    struct link_tap_entry taps[LINK_MAX_TAPS];
    unsigned n_taps;

    struct link_counters c;
};

enum drop_reason { DROP_OVERFLOW, DROP_LOST, DROP_CORRUPT, DROP_DOWN, DROP_UNCONNECTED };

/* Static strings for trace records (trace_rec.where). */
static const char *const drop_where[] = {
    [DROP_OVERFLOW] = "link overflow (drop-tail)", [DROP_LOST] = "link loss",
    [DROP_CORRUPT] = "link corruption (ICRC)",     [DROP_DOWN] = "link down",
    [DROP_UNCONNECTED] = "link unconnected",
};

static bool prob_valid(double p)
{
    return p >= 0.0 && p <= 1.0; /* false for NaN */
}

static struct prob prob_from(double p)
{
    if (!(p > 0.0))
        return (struct prob){0, false};
    if (p >= 1.0)
        return (struct prob){0, true};
    /* exact: p < 1, so p * 2^64 < 2^64 and the conversion truncates */
    return (struct prob){(uint64_t)(p * 18446744073709551616.0), false};
}

static bool draw(struct link *l, const struct prob *pr)
{
    if (pr->always)
        return true;
    return pr->thr && sim_rng_u64(&l->rng) < pr->thr;
}

static void drop(struct link *l, struct pkt *p, enum drop_reason why)
{
    uint64_t wire = pkt_wire_bytes(p);
    l->c.pkts_dropped++;
    l->c.bytes_dropped += wire;
    switch (why) {
    case DROP_OVERFLOW:
        l->c.pkts_dropped_overflow++;
        break;
    case DROP_LOST:
        l->c.pkts_lost++;
        break;
    case DROP_CORRUPT:
        l->c.pkts_corrupted++;
        break;
    case DROP_DOWN:
        l->c.pkts_dropped_down++;
        break;
    case DROP_UNCONNECTED:
        break;
    }
    if (sim_trace_enabled(l->sim))
        sim_trace(l->sim, &(struct trace_rec){.kind = TRACE_PKT_DROP,
                                              .opcode = p->opcode,
                                              .node = l->trace_id,
                                              .qpn = p->dest_qpn,
                                              .psn = p->psn,
                                              .len = p->payload_len,
                                              .where = drop_where[why]});
    pkt_free(l->pool, p);
}

static void tap(struct link *l, enum link_tap where, const struct pkt *p, bool corrupt)
{
    for (unsigned i = 0; i < l->n_taps; i++)
        if (l->taps[i].where == where)
            pcap_write_pkt(l->taps[i].w, sim_now(l->sim), p, corrupt);
}

static void tx_done(struct sim *sim, struct sim_event *ev);
static void pipe_arrive(struct sim *sim, struct sim_event *ev);

static bool params_valid(const struct link_params *p)
{
    return p->rate_bps > 0 && prob_valid(p->loss_prob) && prob_valid(p->corrupt_prob);
}

struct link *link_create(struct sim *sim, const char *name, const struct link_params *p,
                         struct pkt_pool *pool)
{
    if (!sim || !p || !params_valid(p))
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
    l->loss = prob_from(p->loss_prob);
    l->corrupt = prob_from(p->corrupt_prob);
    sim_rng_stream(sim, &l->rng, l->name);
    l->up = true;
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
const struct link_params *link_get_params(const struct link *l)
{
    return &l->p;
}

int link_set_params(struct link *l, const struct link_params *p)
{
    if (!p || !params_valid(p)) {
        errno = EINVAL;
        return -1;
    }
    l->p = *p;
    l->loss = prob_from(p->loss_prob);
    l->corrupt = prob_from(p->corrupt_prob);
    return 0;
}

void link_set_trace_id(struct link *l, uint32_t id)
{
    l->trace_id = id;
}

int link_add_capture(struct link *l, struct pcap_writer *w, enum link_tap where)
{
    if (!w || l->n_taps == LINK_MAX_TAPS || (where != LINK_TAP_TX && where != LINK_TAP_RX)) {
        errno = w ? ENOSPC : EINVAL;
        return -1;
    }
    l->taps[l->n_taps++] = (struct link_tap_entry){w, where};
    return 0;
}

bool link_is_up(const struct link *l)
{
    return l->up;
}

void link_set_up(struct link *l, bool up)
{
    if (up == l->up)
        return;
    l->up = up;
    if (up)
        return;
    /* Down: the cable's contents are lost (slots of the old epoch are
     * dropped when they reach the end), the queue is flushed; the frame on
     * the wire finishes and is dropped in tx_done. */
    l->fail_epoch++;
    for (struct pkt *p = l->q_head, *next; p; p = next) {
        next = p->next;
        l->queued_bytes -= pkt_wire_bytes(p);
        drop(l, p, DROP_DOWN);
    }
    l->q_head = l->q_tail = NULL;
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
        drop(l, p, DROP_OVERFLOW);
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

static void pipe_push(struct link *l, sim_time_t arrive_ps, struct pkt *p, bool corrupt)
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
    l->pipe[(l->pipe_head + l->pipe_n) % l->pipe_cap] =
        (struct pipe_slot){arrive_ps, p, l->fail_epoch, corrupt};
    l->pipe_n++;
    if (!sim_event_pending(&l->pipe_ev))
        sim_schedule_at(l->sim, &l->pipe_ev, arrive_ps);
}

/* The last bit of `tx` has left: into the pipe (unless the link is down or
 * the frame is lost), then the next frame (or tell the sender the link
 * went idle). */
static void tx_done(struct sim *sim, struct sim_event *ev)
{
    struct link *l = ev->ctx;
    struct pkt *p = l->tx;
    uint64_t wire = pkt_wire_bytes(p);
    l->tx = NULL;
    l->queued_bytes -= wire;
    if (!l->up) {
        drop(l, p, DROP_DOWN);
    } else {
        l->c.pkts_sent++;
        l->c.bytes_sent += wire;
        tap(l, LINK_TAP_TX, p, false);
        if (draw(l, &l->loss))
            drop(l, p, DROP_LOST);
        else
            pipe_push(l, sim_time_add(sim_now(sim), l->p.delay_ps), p, draw(l, &l->corrupt));
    }
    if (l->q_head)
        tx_start(l);
    else if (l->idle_fn)
        l->idle_fn(sim, l->idle_a, l->idle_b);
}

/* The oldest frame in the pipe reaches the far end. */
static void pipe_arrive(struct sim *sim, struct sim_event *ev)
{
    struct link *l = ev->ctx;
    struct pipe_slot s = l->pipe[l->pipe_head];
    l->pipe_head = (l->pipe_head + 1) % l->pipe_cap;
    l->pipe_n--;
    if (l->pipe_n)
        sim_schedule_at(sim, &l->pipe_ev, l->pipe[l->pipe_head].arrive_ps);
    if (!l->up || s.epoch != l->fail_epoch) {
        drop(l, s.pkt, DROP_DOWN); /* in the cable when it failed */
        return;
    }
    tap(l, LINK_TAP_RX, s.pkt, s.corrupt);
    if (s.corrupt)
        drop(l, s.pkt, DROP_CORRUPT); /* the receiver's ICRC check fails */
    else if (l->sink.rx)
        l->sink.rx(sim, l->sink.ctx, s.pkt);
    else /* unconnected far end: the frame is lost, counted as a drop */
        drop(l, s.pkt, DROP_UNCONNECTED);
}
