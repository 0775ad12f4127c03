/* The programmable switch: pipelines, traffic manager, recirculation port,
 * packet generator, CPU port (pswitch.h describes the model).
 *
 * A packet inside the switch is a `struct ps_pkt` (the fabric packet plus
 * its intrinsic metadata and bridged header).  It moves through four timed
 * FIFOs, each with one intrusive event, since times in each are increasing:
 *
 *   ing_wait  waiting to enter the ingress pipeline (only when packets
 *             arrive closer than pkt_interval_ps); the program runs on entry
 *   ing       in the ingress pass, leaves ingress_ps after entry -> TM
 *   eg_wait / eg   the same for egress (one entry per replica)
 *   recirc    being serialised on the recirculation port, then ing_wait
 *
 * The register / table rules are checked per pass (struct ps_pass): an
 * array or table touched twice, a stage lower than one already touched, or
 * the other pipeline's resource is a program error: it is printed once,
 * the simulation stops and the run fails (ps_error). */
#include "pswitch.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "../trace.h"
#include "ps_internal.h"

/* Defaults (docs/pswitch.md lists them with their sources):
 *  - 12 MAU stages per pipeline, 4 stateful ALUs per stage: Intel Tofino
 *    (first generation) as described by the P4_16 Tofino Native
 *    Architecture application note (public version, 2021) and the RMT
 *    paper it descends from (Bosshart et al., SIGCOMM 2013: a pipeline of
 *    match-action stages, each with its own SRAM, TCAM and ALUs).
 *  - 16 tables per stage: the logical tables one Tofino stage can hold.
 *  - 1.25 MiB of SRAM per stage: 80 blocks of 1K x 128 bit (an estimate of
 *    Tofino-1's per-stage SRAM; what matters is the order: a few MiB of
 *    state per pipeline, which is what lets Jasny et al. fit > 1500 flows
 *    of ~50 B registers + ~700 B table entries).
 *  - pass latencies 250 + 250 ns: Jasny et al.'s build spec gives 400-600 ns
 *    for a full traversal of a Tofino-class pipeline; Franco et al.
 *    ("A comprehensive latency profiling study of the Tofino P4
 *    programmable ASIC-based hardware", Computer Communications 2024)
 *    measure port-to-port latencies of that order at 100 Gb/s.
 *  - one packet per ns per pipeline: ~1 GHz pipeline clock, one packet
 *    per clock (RMT: "a new packet every cycle").
 *  - recirculation and packet generator ports: 100 Gb/s each (Tofino-1 has
 *    a 100 Gb/s recirculation port and a 100 Gb/s generator port per pipe).
 *  - 64 B generated packets: the Ethernet minimum.
 *  - 10 us per control-plane operation: an estimate for a table entry or
 *    register write through the switch driver over PCIe (BfRt / P4Runtime
 *    program 10^4..10^5 entries per second). */
void ps_params_default(struct ps_params *p)
{
    memset(p, 0, sizeof(*p));
    p->stages = 12;
    p->salus_per_stage = 4;
    p->tables_per_stage = 16;
    p->stage_sram_bytes = 80 * 16 * 1024;
    p->ingress_ps = 250 * SIM_NS;
    p->egress_ps = 250 * SIM_NS;
    p->pkt_interval_ps = 1 * SIM_NS;
    p->recirc_rate_bps = 100000000000ull;
    p->recirc_buffer_bytes = 256 * 1024;
    p->pktgen_rate_bps = 100000000000ull;
    p->pktgen_pkt_bytes = 64;
    p->cp_op_ps = 10 * SIM_US;
}

/* ---------------------------------------------------------------- helpers */

static void *ps_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) {
        fprintf(stderr, "rnicsim: pswitch: out of memory\n");
        abort();
    }
    return p;
}

static void *ps_xrealloc(void *p, size_t bytes)
{
    void *np = realloc(p, bytes ? bytes : 1);
    if (!np) {
        fprintf(stderr, "rnicsim: pswitch: out of memory\n");
        abort();
    }
    return np;
}

void ps_fail(struct pswitch *ps, const char *fmt, ...)
{
    if (ps->error[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ps->error, sizeof(ps->error), fmt, ap);
    va_end(ap);
    fprintf(stderr, "rnicsim: %s: switch program '%s': %s\n", ps->name,
            ps->dp.name ? ps->dp.name : "?", ps->error);
    sim_stop(ps->sim);
}

const char *ps_error(const struct pswitch *ps)
{
    return ps->error[0] ? ps->error : NULL;
}

const char *ps_last_error(const struct pswitch *ps)
{
    return ps->last_error;
}

/* ---------------------------------------------------------------- packets */

static struct ps_pkt *pp_alloc(struct pswitch *ps, struct pkt *p)
{
    struct ps_pkt *pp = ps->pp_free;
    if (pp)
        ps->pp_free = pp->next;
    else
        pp = ps_xcalloc(1, sizeof(*pp));
    memset(pp, 0, sizeof(*pp));
    pp->pkt = p;
    return pp;
}

static void pp_free(struct pswitch *ps, struct ps_pkt *pp, bool with_pkt)
{
    if (with_pkt && pp->pkt)
        switch_drop(ps->sw, pp->pkt); /* PFC: its ingress port lets its bytes go */
    pp->pkt = NULL;
    pp->next = ps->pp_free;
    ps->pp_free = pp;
}

/* An internal packet (generator, CPU port): no RoCE headers. */
static struct pkt *internal_pkt(struct pswitch *ps)
{
    struct pkt *p = pkt_alloc(ps->pool);
    p->src_node = p->dst_node = ps->node;
    p->opcode = PS_OPCODE_INTERNAL;
    p->frame_bytes = ps->p.pktgen_pkt_bytes;
    return p;
}

/* ---------------------------------------------------------------- timed FIFOs */

static void fifo_push(struct pswitch *ps, struct ps_fifo *f, struct ps_pkt *pp, sim_time_t at)
{
    pp->at_ps = at;
    pp->next = NULL;
    if (f->tail)
        f->tail->next = pp;
    else
        f->head = pp;
    f->tail = pp;
    if (!sim_event_pending(&f->ev))
        sim_schedule_at(ps->sim, &f->ev, f->head->at_ps);
}

static struct ps_pkt *fifo_pop(struct pswitch *ps, struct ps_fifo *f)
{
    struct ps_pkt *pp = f->head;
    f->head = pp->next;
    if (!f->head)
        f->tail = NULL;
    pp->next = NULL;
    if (f->head)
        sim_schedule_at(ps->sim, &f->ev, f->head->at_ps);
    return pp;
}

static void fifo_free_all(struct pswitch *ps, struct ps_fifo *f)
{
    sim_cancel(ps->sim, &f->ev);
    while (f->head) {
        struct ps_pkt *pp = f->head;
        f->head = pp->next;
        if (pp->pkt)
            pkt_free(ps->pool, pp->pkt);
        free(pp);
    }
    f->tail = NULL;
}

/* ---------------------------------------------------------------- pipelines */

static void ingress_enter(struct pswitch *ps, struct ps_pkt *pp);
static void egress_enter(struct pswitch *ps, struct ps_pkt *pp);

/* A packet wants into a pipeline now: it enters at once if the pipeline
 * took its last packet at least pkt_interval ago and nobody waits, else it
 * queues. */
static void pipe_arrive(struct pswitch *ps, enum ps_gress g, struct ps_pkt *pp)
{
    struct ps_fifo *wait = g == PS_INGRESS ? &ps->ing_wait : &ps->eg_wait;
    sim_time_t *next_free = g == PS_INGRESS ? &ps->ing_next_free : &ps->eg_next_free;
    sim_time_t now = sim_now(ps->sim);
    sim_time_t at = *next_free > now ? *next_free : now;
    *next_free = at + ps->p.pkt_interval_ps;
    if (at == now && !wait->head) {
        if (g == PS_INGRESS)
            ingress_enter(ps, pp);
        else
            egress_enter(ps, pp);
        return;
    }
    fifo_push(ps, wait, pp, at);
}

static void ing_wait_ev(struct sim *sim, struct sim_event *ev)
{
    (void)sim;
    struct pswitch *ps = ev->ctx;
    ingress_enter(ps, fifo_pop(ps, &ps->ing_wait));
}

static void eg_wait_ev(struct sim *sim, struct sim_event *ev)
{
    (void)sim;
    struct pswitch *ps = ev->ctx;
    egress_enter(ps, fifo_pop(ps, &ps->eg_wait));
}

static void pass_init(struct pswitch *ps, struct ps_pass *x, struct ps_pkt *pp, enum ps_gress g)
{
    memset(x, 0, sizeof(*x));
    x->ps = ps;
    x->pp = pp;
    x->gress = g;
    x->id = ++ps->pass_seq;
}

/* Run the ingress program on a packet entering the pipeline now. */
static void ingress_enter(struct pswitch *ps, struct ps_pkt *pp)
{
    struct pkt *p = pp->pkt;
    ps->c.ingress_passes++;
    pp->meta.ingress_ps = sim_now(ps->sim);
    pp->meta.rid = 0;
    pp->action = PS_ACT_DEFAULT;
    if (ps->dp.ingress && !ps->error[0]) {
        struct ps_pass x;
        pass_init(ps, &x, pp, PS_INGRESS);
        ps->dp.ingress(&x, p, ps->prog);
    }
    if (pp->action == PS_ACT_DEFAULT) {
        if (p->dst_node == ps->node || p->opcode == PS_OPCODE_INTERNAL) {
            ps->c.unhandled++;
            pp->action = PS_ACT_DROP;
        } else {
            pp->action = PS_ACT_FWD;
            pp->out_node = p->dst_node;
        }
    }
    if (pp->action == PS_ACT_DROP) {
        if (sim_trace_enabled(ps->sim))
            sim_trace(ps->sim, &(struct trace_rec){.kind = TRACE_PKT_DROP,
                                                   .opcode = p->opcode,
                                                   .node = p->dst_node,
                                                   .qpn = p->dest_qpn,
                                                   .psn = p->psn,
                                                   .len = p->payload_len,
                                                   .where = "pswitch: program drop"});
        pp_free(ps, pp, true);
        return;
    }
    fifo_push(ps, &ps->ing, pp, sim_now(ps->sim) + ps->p.ingress_ps);
}

/* Traffic manager: the packet left ingress. */
static void ing_ev(struct sim *sim, struct sim_event *ev)
{
    (void)sim;
    struct pswitch *ps = ev->ctx;
    struct ps_pkt *pp = fifo_pop(ps, &ps->ing);
    if (pp->action != PS_ACT_MCAST) {
        if (pp->action == PS_ACT_FWD)
            pp->pkt->dst_node = pp->out_node;
        pipe_arrive(ps, PS_EGRESS, pp);
        return;
    }
    const struct ps_group *g = ps_group_find(ps, pp->group);
    if (!g || g->n == 0) {
        ps->c.program_drops++;
        pp_free(ps, pp, true);
        return;
    }
    for (uint32_t i = 0; i < g->n; i++) {
        struct ps_pkt *r = pp;
        if (i + 1 < g->n) { /* the original goes to the last member */
            r = pp_alloc(ps, pkt_clone(ps->pool, pp->pkt));
            r->meta = pp->meta;
            r->action = PS_ACT_FWD;
        }
        ps->c.replicas++;
        r->meta.rid = g->m[i].rid;
        if (g->m[i].node == PS_PORT_RECIRC) { /* the recirculation port is a port too */
            r->action = PS_ACT_RECIRC;
            pipe_arrive(ps, PS_EGRESS, r);
            continue;
        }
        r->action = PS_ACT_FWD;
        r->out_node = g->m[i].node;
        r->pkt->dst_node = g->m[i].node;
        pipe_arrive(ps, PS_EGRESS, r);
    }
}

/* Bytes queued on the port a packet for `node` leaves by (its route has
 * one port towards a host; towards another switch the route may have
 * several, and the port is picked when the packet leaves egress: the
 * deepest of them).  A read of the queues, nothing else. */
static uint64_t port_qdepth(const struct pswitch *ps, uint32_t node)
{
    const uint32_t *ports = NULL;
    unsigned n = switch_route_ports(ps->sw, node, &ports);
    uint64_t d = 0;
    for (unsigned i = 0; i < n; i++) {
        const struct link *l = switch_port(ps->sw, ports[i]);
        uint64_t q = l ? link_queued_bytes(l) : 0;
        if (q > d)
            d = q;
    }
    return d;
}

static void egress_enter(struct pswitch *ps, struct ps_pkt *pp)
{
    struct pkt *p = pp->pkt;
    ps->c.egress_passes++;
    pp->meta.enq_qdepth_bytes =
        pp->action == PS_ACT_RECIRC ? ps->recirc_queued : port_qdepth(ps, p->dst_node);
    bool dropped = false;
    if (ps->dp.egress && !ps->error[0]) {
        struct ps_pass x;
        pass_init(ps, &x, pp, PS_EGRESS);
        uint32_t node = p->dst_node;
        int act = pp->action;
        pp->egress_drop = false;
        ps->dp.egress(&x, p, ps->prog);
        dropped = pp->egress_drop;
        pp->action = act;
        if (!dropped && pp->action != PS_ACT_RECIRC && p->dst_node != node)
            ps_fail(ps,
                    "egress changed the destination of a packet (node %u -> %u): the "
                    "egress port is chosen in ingress (ps_fwd / ps_mcast)",
                    node, p->dst_node);
    }
    if (dropped || ps->error[0]) {
        ps->c.program_drops += dropped;
        pp_free(ps, pp, true);
        return;
    }
    fifo_push(ps, &ps->eg, pp, sim_now(ps->sim) + ps->p.egress_ps);
}

static void recirc_send(struct pswitch *ps, struct ps_pkt *pp)
{
    uint64_t bytes = (uint64_t)pkt_wire_bytes(pp->pkt) + pp->meta.bridge_bytes;
    if (ps->recirc_queued + bytes > ps->p.recirc_buffer_bytes) {
        ps->c.recirc_drops++;
        pp_free(ps, pp, true);
        return;
    }
    sim_time_t now = sim_now(ps->sim);
    sim_time_t start = ps->recirc_free > now ? ps->recirc_free : now;
    ps->recirc_free = start + sim_bytes_to_ps(bytes, ps->p.recirc_rate_bps);
    ps->recirc_queued += bytes;
    if (ps->recirc_queued > ps->c.recirc_max_queue_bytes)
        ps->c.recirc_max_queue_bytes = ps->recirc_queued;
    pp->wire_bytes = (uint32_t)bytes;
    ps->c.recirculations++;
    ps->c.recirc_bytes += bytes;
    fifo_push(ps, &ps->recirc, pp, ps->recirc_free);
}

static void recirc_ev(struct sim *sim, struct sim_event *ev)
{
    (void)sim;
    struct pswitch *ps = ev->ctx;
    struct ps_pkt *pp = fifo_pop(ps, &ps->recirc);
    ps->recirc_queued -= pp->wire_bytes;
    pp->meta.ingress_port = PS_PORT_RECIRC;
    pp->meta.recirculated++;
    pipe_arrive(ps, PS_INGRESS, pp);
}

/* The packet left egress: to its port, or around again. */
static void eg_ev(struct sim *sim, struct sim_event *ev)
{
    struct pswitch *ps = ev->ctx;
    struct ps_pkt *pp = fifo_pop(ps, &ps->eg);
    if (pp->action == PS_ACT_RECIRC) {
        recirc_send(ps, pp);
        return;
    }
    struct pkt *p = pp->pkt;
    if (p->src_node == ps->node)
        p->t_sent_ps = sim_now(sim); /* a packet the switch originates */
    pp_free(ps, pp, false);
    switch_forward(ps->sw, p);
}

/* A frame arrived on a front port (the fabric switch's ingress hook). */
static void ps_rx(struct sim *sim, void *ctx, struct pkt *p)
{
    (void)sim;
    struct pswitch *ps = ctx;
    struct ps_pkt *pp = pp_alloc(ps, p);
    pp->meta.ingress_port = p->src_node;
    pipe_arrive(ps, PS_INGRESS, pp);
}

/* ---------------------------------------------------------------- packet generator */

static void pktgen_ev(struct sim *sim, struct sim_event *ev)
{
    struct ps_pktgen *g = ev->ctx;
    struct pswitch *ps = g->ps;
    struct ps_pkt *pp = pp_alloc(ps, internal_pkt(ps));
    pp->meta.ingress_port = PS_PORT_PKTGEN;
    pp->meta.pktgen_app = g->app;
    pp->meta.pktgen_batch = g->batch;
    pp->meta.pktgen_pkt = g->next_pkt;
    ps->c.pktgen_pkts++;
    sim_time_t gap = sim_bytes_to_ps((uint64_t)ps->p.pktgen_pkt_bytes + PKT_ETH_PREAMBLE_IFG_BYTES,
                                     ps->p.pktgen_rate_bps);
    if (++g->next_pkt < g->n) {
        sim_schedule_in(sim, &g->ev, gap);
    } else if (g->once) {
        g->next_pkt = 0;
    } else {
        g->next_pkt = 0;
        g->batch++;
        g->batch_start += g->period_ps;
        sim_time_t at = g->batch_start > sim_now(sim) ? g->batch_start : sim_now(sim) + gap;
        sim_schedule_at(sim, &g->ev, at);
    }
    pipe_arrive(ps, PS_INGRESS, pp);
}

static struct ps_pktgen *pktgen_get(struct pswitch *ps, uint32_t app)
{
    for (uint32_t i = 0; i < ps->n_pktgen; i++)
        if (ps->pktgen[i]->app == app)
            return ps->pktgen[i];
    ps->pktgen = ps_xrealloc(ps->pktgen, (ps->n_pktgen + 1) * sizeof(*ps->pktgen));
    struct ps_pktgen *g = ps_xcalloc(1, sizeof(*g));
    g->ps = ps;
    g->app = app;
    sim_event_init(&g->ev, pktgen_ev, g, "pswitch.pktgen");
    ps->pktgen[ps->n_pktgen++] = g;
    return g;
}

/* ---------------------------------------------------------------- device */

struct pswitch *ps_create(struct sim *sim, struct fswitch *sw, uint32_t node_id,
                          const struct ps_params *p, const struct host_cpu_params *cpu,
                          struct pkt_pool *pool)
{
    if (!sim || !sw || !p || !cpu || !pool || p->stages == 0 || p->stages > PS_MAX_STAGES ||
        p->recirc_rate_bps == 0 || p->pktgen_rate_bps == 0) {
        errno = EINVAL;
        return NULL;
    }
    struct pswitch *ps = ps_xcalloc(1, sizeof(*ps));
    ps->sim = sim;
    ps->sw = sw;
    ps->node = node_id;
    ps->p = *p;
    ps->pool = pool;
    snprintf(ps->name, sizeof(ps->name), "%s", switch_name(sw));
    host_init(&ps->cpu, sim, node_id, ps->name, cpu);
    ps->cpu.device = ps;
    sim_event_init(&ps->ing_wait.ev, ing_wait_ev, ps, "pswitch.ingress_wait");
    sim_event_init(&ps->ing.ev, ing_ev, ps, "pswitch.ingress");
    sim_event_init(&ps->eg_wait.ev, eg_wait_ev, ps, "pswitch.egress_wait");
    sim_event_init(&ps->eg.ev, eg_ev, ps, "pswitch.egress");
    sim_event_init(&ps->recirc.ev, recirc_ev, ps, "pswitch.recirc");
    sim_waitq_init(&ps->digest_wq, "ps_digest_recv");
    char stream[64];
    snprintf(stream, sizeof(stream), "pswitch.random.%s", ps->name);
    sim_rng_stream(sim, &ps->rng, stream);
    switch_set_ingress_hook(sw, (struct fabric_sink){.rx = ps_rx, .ctx = ps});
    return ps;
}

void ps_destroy(struct pswitch *ps)
{
    if (!ps)
        return;
    switch_set_ingress_hook(ps->sw, (struct fabric_sink){0});
    fifo_free_all(ps, &ps->ing_wait);
    fifo_free_all(ps, &ps->ing);
    fifo_free_all(ps, &ps->eg_wait);
    fifo_free_all(ps, &ps->eg);
    fifo_free_all(ps, &ps->recirc);
    while (ps->pp_free) {
        struct ps_pkt *pp = ps->pp_free;
        ps->pp_free = pp->next;
        free(pp);
    }
    for (uint32_t i = 0; i < ps->n_pktgen; i++) {
        sim_cancel(ps->sim, &ps->pktgen[i]->ev);
        free(ps->pktgen[i]);
    }
    free(ps->pktgen);
    ps_resources_free(ps);
    for (uint32_t i = 0; i < ps->n_groups; i++)
        free(ps->groups[i].m);
    free(ps->groups);
    free(ps->digests);
    host_fini(&ps->cpu); /* its CPUs (sim/host/cpu.c) and placed memory */
    free(ps);
}

const struct ps_params *ps_get_params(const struct pswitch *ps)
{
    return &ps->p;
}
uint32_t ps_node_id(const struct pswitch *ps)
{
    return ps->node;
}
const char *ps_name(const struct pswitch *ps)
{
    return ps->name;
}
struct host *ps_cpu(struct pswitch *ps)
{
    return &ps->cpu;
}
const struct ps_counters *ps_get_counters(const struct pswitch *ps)
{
    return &ps->c;
}

struct pswitch *ps_current(void)
{
    struct host *h = host_of_current();
    if (!h || !h->device)
        return NULL;
    struct pswitch *ps = h->device;
    return &ps->cpu == h ? ps : NULL;
}

int ps_load(struct pswitch *ps, const struct ps_dataplane *dp, void *prog)
{
    if (!dp || !dp->ingress) {
        ps_set_last_error(ps, EINVAL, "a data plane needs an ingress function");
        return -1;
    }
    if (ps->dp.ingress || ps->unloaded) {
        ps_set_last_error(ps, EBUSY, "a data plane ('%s') was loaded already (one per run)",
                          ps->dp.name ? ps->dp.name : "?");
        return -1;
    }
    ps_cp_charge(ps);
    ps->dp = *dp;
    ps->prog = prog;
    ps->loader = sim_proc_current();
    return 0;
}

void ps_unload(struct pswitch *ps)
{
    if (!ps->dp.ingress)
        return;
    for (uint32_t i = 0; i < ps->n_pktgen; i++)
        sim_cancel(ps->sim, &ps->pktgen[i]->ev);
    memset(&ps->dp, 0, sizeof(ps->dp));
    ps->prog = NULL;
    ps->loader = NULL;
    ps->unloaded = true;
}

void ps_proc_exit(struct pswitch *ps, const struct sim_proc *proc)
{
    if (ps && ps->dp.ingress && ps->loader == proc)
        ps_unload(ps);
}

/* A control-plane operation: the calling process spends cp_op_ps. */
void ps_cp_charge(struct pswitch *ps)
{
    ps->c.cp_ops++;
    if (!sim_proc_current() || !ps->p.cp_op_ps)
        return;
    if (host_of_current())
        host_charge(ps->p.cp_op_ps);
    else
        sim_proc_sleep(ps->p.cp_op_ps);
}

/* ---------------------------------------------------------------- decisions */

static bool ingress_only(struct ps_pass *x, const char *what)
{
    if (x->gress == PS_INGRESS)
        return true;
    ps_fail(x->ps, "%s in egress: the traffic manager has already placed the packet", what);
    return false;
}

void ps_fwd(struct ps_pass *x, uint32_t node)
{
    if (!ingress_only(x, "ps_fwd"))
        return;
    x->pp->action = PS_ACT_FWD;
    x->pp->out_node = node;
    x->pp->pkt->dst_node = node;
}

void ps_mcast(struct ps_pass *x, uint32_t group)
{
    if (!ingress_only(x, "ps_mcast"))
        return;
    x->pp->action = PS_ACT_MCAST;
    x->pp->group = group;
}

void ps_recirc(struct ps_pass *x)
{
    if (!ingress_only(x, "ps_recirc"))
        return;
    x->pp->action = PS_ACT_RECIRC;
}

void ps_drop(struct ps_pass *x)
{
    if (x->gress == PS_EGRESS) {
        x->pp->egress_drop = true;
        return;
    }
    x->pp->action = PS_ACT_DROP;
    x->ps->c.program_drops++;
}

uint64_t ps_random(struct ps_pass *x)
{
    return sim_rng_u64(&x->ps->rng);
}

struct ps_meta *ps_pass_meta(struct ps_pass *x)
{
    return &x->pp->meta;
}
enum ps_gress ps_pass_gress(const struct ps_pass *x)
{
    return x->gress;
}
sim_time_t ps_pass_now(const struct ps_pass *x)
{
    return sim_now(x->ps->sim);
}
struct pswitch *ps_pass_switch(const struct ps_pass *x)
{
    return x->ps;
}

/* ---------------------------------------------------------------- digests and CPU port */

void ps_digest(struct ps_pass *x, const void *data, size_t len)
{
    struct pswitch *ps = x->ps;
    if (len > PS_DIGEST_MAX_BYTES) {
        ps_fail(ps, "a digest of %zu bytes (at most %d)", len, PS_DIGEST_MAX_BYTES);
        return;
    }
    if (!ps->digests)
        ps->digests = ps_xcalloc(PS_DIGEST_SLOTS, sizeof(*ps->digests));
    if (ps->digest_n == PS_DIGEST_SLOTS) {
        ps->c.digest_drops++;
        return;
    }
    struct ps_digest_slot *d = &ps->digests[(ps->digest_head + ps->digest_n) % PS_DIGEST_SLOTS];
    d->len = (uint32_t)len;
    memcpy(d->data, data, len);
    ps->digest_n++;
    ps->c.digests++;
    if (!sim_waitq_empty(&ps->digest_wq))
        sim_waitq_wake_all(ps->sim, &ps->digest_wq);
}

size_t ps_digest_recv(struct pswitch *ps, void *buf, size_t cap, sim_time_t deadline_ps)
{
    while (ps->digest_n == 0) {
        if (!sim_proc_current() || sim_now(ps->sim) >= deadline_ps)
            return 0;
        sim_waitq_wait_until(&ps->digest_wq, deadline_ps, "ps_digest_recv");
    }
    struct ps_digest_slot *d = &ps->digests[ps->digest_head];
    ps->digest_head = (ps->digest_head + 1) % PS_DIGEST_SLOTS;
    ps->digest_n--;
    memcpy(buf, d->data, d->len < cap ? d->len : cap);
    return d->len;
}

int ps_inject(struct pswitch *ps, const void *bridge, uint32_t len)
{
    if (len > PS_BRIDGE_MAX_BYTES || (len && !bridge)) {
        errno = EINVAL;
        return -1;
    }
    ps_cp_charge(ps);
    struct ps_pkt *pp = pp_alloc(ps, internal_pkt(ps));
    pp->meta.ingress_port = PS_PORT_CPU;
    pp->meta.bridge_bytes = len;
    if (len)
        memcpy(pp->meta.bridge, bridge, len);
    ps->c.cpu_pkts++;
    pipe_arrive(ps, PS_INGRESS, pp);
    return 0;
}

int ps_pktgen_enable(struct pswitch *ps, uint32_t app, sim_time_t period_ps, uint32_t n)
{
    if (period_ps == 0 || n == 0) {
        errno = EINVAL;
        return -1;
    }
    ps_cp_charge(ps);
    struct ps_pktgen *g = pktgen_get(ps, app);
    g->period_ps = period_ps;
    g->once = false;
    g->n = n;
    g->next_pkt = 0;
    g->batch = 0;
    g->batch_start = sim_now(ps->sim) + period_ps;
    sim_schedule_at(ps->sim, &g->ev, g->batch_start);
    return 0;
}

int ps_pktgen_once(struct pswitch *ps, uint32_t app, uint32_t n)
{
    if (n == 0) {
        errno = EINVAL;
        return -1;
    }
    ps_cp_charge(ps);
    struct ps_pktgen *g = pktgen_get(ps, app);
    g->once = true;
    g->n = n;
    g->next_pkt = 0;
    g->batch = 0;
    sim_schedule_at(ps->sim, &g->ev, sim_now(ps->sim));
    return 0;
}

int ps_pktgen_disable(struct pswitch *ps, uint32_t app)
{
    for (uint32_t i = 0; i < ps->n_pktgen; i++)
        if (ps->pktgen[i]->app == app) {
            ps_cp_charge(ps);
            sim_cancel(ps->sim, &ps->pktgen[i]->ev);
            return 0;
        }
    errno = ENOENT;
    return -1;
}

/* ---------------------------------------------------------------- multicast groups */

const struct ps_group *ps_group_find(const struct pswitch *ps, uint32_t group)
{
    for (uint32_t i = 0; i < ps->n_groups; i++)
        if (ps->groups[i].id == group)
            return &ps->groups[i];
    return NULL;
}

int ps_mcast_set(struct pswitch *ps, uint32_t group, const struct ps_mcast_member *m, uint32_t n)
{
    if (n && !m) {
        errno = EINVAL;
        return -1;
    }
    ps_cp_charge(ps);
    struct ps_group *g = NULL;
    for (uint32_t i = 0; i < ps->n_groups && !g; i++)
        if (ps->groups[i].id == group)
            g = &ps->groups[i];
    if (!g) {
        ps->groups = ps_xrealloc(ps->groups, (ps->n_groups + 1) * sizeof(*ps->groups));
        g = &ps->groups[ps->n_groups++];
        memset(g, 0, sizeof(*g));
        g->id = group;
    }
    free(g->m);
    g->m = ps_xcalloc(n, sizeof(*g->m));
    if (n)
        memcpy(g->m, m, n * sizeof(*m));
    g->n = n;
    return 0;
}

void ps_set_last_error(struct pswitch *ps, int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ps->last_error, sizeof(ps->last_error), fmt, ap);
    va_end(ap);
    errno = err;
}
