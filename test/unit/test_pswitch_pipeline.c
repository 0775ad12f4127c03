/* The programmable switch (sim/pswitch): exact pass timing without and
 * with a program, a register counter, the pass rules (twice, stage order,
 * wrong pipeline, egress changing the port), recirculation timing and its
 * buffer, multicast replicas rewritten per replica id, the packet
 * generator, tables (add / hit / miss / delete), digests, declaration
 * limits, RoCEv2 rewrites, and the queue depth egress sees. */
#include <errno.h>
#include <stdlib.h>

#include "sim/fabric/fabric.h"
#include "sim/nic/opcode.h"
#include "sim/pswitch/pswitch.h"
#include "test.h"

#define N_HOSTS 3
#define SW_NODE N_HOSTS

struct sink {
    uint32_t node;
    uint64_t n;
    sim_time_t last_t;
    uint32_t last_psn, last_opcode, last_len;
    uint64_t psn_sum;
    struct pkt_pool *pool;
};

static void sink_rx(struct sim *sim, void *ctx, struct pkt *p)
{
    struct sink *s = ctx;
    s->n++;
    s->last_t = sim_now(sim);
    s->last_psn = p->psn;
    s->last_opcode = p->opcode;
    s->last_len = p->payload_len;
    s->psn_sum += p->psn;
    pkt_free(s->pool, p);
}

struct rig {
    struct sim *sim;
    struct pkt_pool *pool;
    struct topology *topo;
    struct pswitch *ps;
    struct sink sinks[N_HOSTS];
};

static void rig_init(struct rig *r, const struct ps_params *pp)
{
    r->sim = sim_create(7);
    r->pool = pkt_pool_create();
    struct topo_params tp;
    fabric_defaults(&tp);
    tp.n_nodes = N_HOSTS;
    r->topo = topo_create(r->sim, &tp, r->pool);
    struct ps_params def;
    ps_params_default(&def);
    struct host_cpu_params cpu;
    host_cpu_params_default(&cpu);
    r->ps = ps_create(r->sim, topo_switch(r->topo, 0), SW_NODE, pp ? pp : &def, &cpu, r->pool);
    for (uint32_t i = 0; i < N_HOSTS; i++) {
        r->sinks[i] = (struct sink){.node = i, .pool = r->pool};
        topo_attach(r->topo, i, (struct fabric_sink){sink_rx, &r->sinks[i]});
    }
}

static void rig_free(struct rig *r)
{
    ps_destroy(r->ps);
    topo_destroy(r->topo);
    sim_destroy(r->sim);
    pkt_pool_destroy(r->pool);
}

static void send(struct rig *r, uint32_t src, uint32_t dst, uint32_t psn)
{
    struct pkt *p = pkt_alloc(r->pool);
    p->src_node = src;
    p->dst_node = dst;
    p->psn = psn;
    ps_roce_set_opcode(p, IB_OPCODE_RC_RDMA_WRITE_ONLY);
    ps_roce_set_inline(r->ps, p, "abcdefgh", 8);
    link_send(topo_uplink(r->topo, src), p);
}

/* 8 B WRITE ONLY: 14+20+8+12+16+8+4+4 = 86 B frame, 106 B on the wire:
 * 8480 ps at 100 Gb/s. */
#define SER_PS 8480

static void test_default_forwarding(void)
{
    struct rig r;
    rig_init(&r, NULL);
    CHECK_EQ_U64(nic_frame_bytes(PKT_FRAMING_ROCEV2, IB_OPCODE_RC_RDMA_WRITE_ONLY, 8), 86);
    send(&r, 0, 2, 5);
    sim_run(r.sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(r.sinks[2].n, 1);
    /* ser + cable + ingress + egress + ser + cable */
    CHECK_EQ_U64(r.sinks[2].last_t, 2 * SER_PS + 2 * 5 * SIM_NS + 500 * SIM_NS);
    const struct ps_counters *c = ps_get_counters(r.ps);
    CHECK_EQ_U64(c->ingress_passes, 1);
    CHECK_EQ_U64(c->egress_passes, 1);
    /* a packet for the switch itself, no program: dropped, counted */
    send(&r, 0, SW_NODE, 1);
    sim_run(r.sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(c->unhandled, 1);
    rig_free(&r);
}

/* ---------------------------------------------------------------- a counter program */

struct counter_prog {
    struct ps_reg *per_dst;  /* ingress stage 0: packets per destination */
    struct ps_reg *bytes;    /* ingress stage 1 */
    struct ps_reg *eg_count; /* egress stage 0 */
    int mode;                /* 0 ok, 1 twice, 2 stage order, 3 egress port change, 4 wrong gress */
};

static uint64_t add_one(uint64_t *cell, const void *arg)
{
    (void)arg;
    return ++*cell;
}

static uint64_t add_arg(uint64_t *cell, const void *arg)
{
    *cell += *(const uint32_t *)arg;
    return *cell;
}

static void counter_ingress(struct ps_pass *x, struct pkt *p, void *prog)
{
    struct counter_prog *c = prog;
    switch (c->mode) {
    case 1:
        ps_reg_exec(x, c->per_dst, p->dst_node, add_one, NULL);
        ps_reg_exec(x, c->per_dst, p->dst_node, add_one, NULL);
        break;
    case 2:
        ps_reg_exec(x, c->bytes, 0, add_arg, &p->frame_bytes);
        ps_reg_exec(x, c->per_dst, p->dst_node, add_one, NULL);
        break;
    case 4:
        ps_reg_read(x, c->eg_count, 0);
        break;
    default:
        ps_reg_exec(x, c->per_dst, p->dst_node, add_one, NULL);
        ps_reg_exec(x, c->bytes, 0, add_arg, &p->frame_bytes);
        break;
    }
    ps_fwd(x, p->dst_node);
}

static void counter_egress(struct ps_pass *x, struct pkt *p, void *prog)
{
    struct counter_prog *c = prog;
    ps_reg_exec(x, c->eg_count, 0, add_one, NULL);
    if (c->mode == 3)
        p->dst_node = 0;
}

static const struct ps_dataplane counter_dp = {"counter", counter_ingress, counter_egress};

static void counter_setup(struct rig *r, struct counter_prog *c, int mode)
{
    c->mode = mode;
    c->per_dst = ps_reg_declare(r->ps, "per_dst", PS_INGRESS, 0, 16, 32);
    c->bytes = ps_reg_declare(r->ps, "bytes", PS_INGRESS, 1, 1, 64);
    c->eg_count = ps_reg_declare(r->ps, "eg_count", PS_EGRESS, 0, 1, 32);
    CHECK(c->per_dst && c->bytes && c->eg_count);
    CHECK(ps_load(r->ps, &counter_dp, c) == 0);
}

static void test_counter(void)
{
    struct rig r;
    rig_init(&r, NULL);
    struct counter_prog c;
    counter_setup(&r, &c, 0);
    for (int i = 0; i < 10; i++)
        send(&r, 0, 1 + (i % 2), (uint32_t)i);
    sim_run(r.sim, SIM_TIME_NEVER);
    CHECK(ps_error(r.ps) == NULL);
    CHECK_EQ_U64(ps_reg_get(c.per_dst, 1), 5);
    CHECK_EQ_U64(ps_reg_get(c.per_dst, 2), 5);
    CHECK_EQ_U64(ps_reg_get(c.bytes, 0), 10 * 86);
    CHECK_EQ_U64(ps_reg_get(c.eg_count, 0), 10);
    CHECK_EQ_U64(r.sinks[1].n + r.sinks[2].n, 10);
    CHECK_EQ_U64(ps_get_counters(r.ps)->reg_accesses, 30);
    /* width: a 32-bit cell wraps */
    ps_reg_set(c.per_dst, 3, 0xffffffffull);
    send(&r, 0, 3 % N_HOSTS, 0); /* node 0: counts per_dst[0] */
    sim_run(r.sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(ps_reg_get(c.per_dst, 3), 0xffffffffull);
    struct ps_resource res;
    CHECK_EQ_U64(ps_n_resources(r.ps), 3);
    ps_resource(r.ps, 0, &res);
    CHECK_STR_CONTAINS(res.name, "per_dst");
    CHECK_EQ_U64(res.sram_bytes, 16 * 4);
    rig_free(&r);
}

static void test_rules(void)
{
    static const char *const want[] = {"", "used twice in one ingress pass", "used after stage 1",
                                       "egress changed the destination",
                                       "belongs to the egress pipeline"};
    for (int mode = 1; mode <= 4; mode++) {
        struct rig r;
        rig_init(&r, NULL);
        struct counter_prog c;
        counter_setup(&r, &c, mode);
        send(&r, 0, 1, 0);
        send(&r, 0, 1, 1);
        enum sim_run_result res = sim_run(r.sim, SIM_TIME_NEVER);
        CHECK(res == SIM_RUN_STOPPED);
        CHECK_STR_CONTAINS(ps_error(r.ps), want[mode]);
        CHECK_EQ_U64(r.sinks[1].n, 0); /* the failing packet never leaves */
        rig_free(&r);
    }
}

/* ---------------------------------------------------------------- recirculation */

struct loop_prog {
    uint32_t loops;
};

static void loop_ingress(struct ps_pass *x, struct pkt *p, void *prog)
{
    struct loop_prog *lp = prog;
    struct ps_meta *m = ps_pass_meta(x);
    m->bridge_bytes = 16;
    if (m->recirculated < lp->loops) {
        ps_recirc(x);
        return;
    }
    ps_fwd(x, p->dst_node);
}

static const struct ps_dataplane loop_dp = {"loop", loop_ingress, NULL};

static void test_recirculation(void)
{
    struct rig r;
    rig_init(&r, NULL);
    struct loop_prog lp = {.loops = 3};
    CHECK(ps_load(r.ps, &loop_dp, &lp) == 0);
    send(&r, 0, 1, 0);
    sim_run(r.sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(r.sinks[1].n, 1);
    /* each loop: ingress + egress + (86 + 16 + 20) B at 100 Gb/s = 9760 ps */
    sim_time_t base = 2 * SER_PS + 2 * 5 * SIM_NS + 500 * SIM_NS;
    CHECK_EQ_U64(r.sinks[1].last_t, base + 3 * (500 * SIM_NS + 9760));
    const struct ps_counters *c = ps_get_counters(r.ps);
    CHECK_EQ_U64(c->recirculations, 3);
    CHECK_EQ_U64(c->ingress_passes, 4);
    CHECK_EQ_U64(c->recirc_bytes, 3 * 122);
    rig_free(&r);

    /* a recirculation port with room for two frames drops the rest */
    struct ps_params pp;
    ps_params_default(&pp);
    pp.recirc_buffer_bytes = 2 * 122;
    pp.recirc_rate_bps = 1000000000ull; /* 1 Gb/s: frames pile up */
    rig_init(&r, &pp);
    lp.loops = 1;
    CHECK(ps_load(r.ps, &loop_dp, &lp) == 0);
    for (int i = 0; i < 5; i++)
        send(&r, 0, 1, (uint32_t)i);
    sim_run(r.sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(ps_get_counters(r.ps)->recirc_drops, 3);
    CHECK_EQ_U64(r.sinks[1].n, 2);
    rig_free(&r);
}

/* ---------------------------------------------------------------- multicast */

static void mc_ingress(struct ps_pass *x, struct pkt *p, void *prog)
{
    (void)p;
    (void)prog;
    ps_mcast(x, 7);
}

static void mc_egress(struct ps_pass *x, struct pkt *p, void *prog)
{
    (void)prog;
    struct ps_meta *m = ps_pass_meta(x);
    p->psn = 100 + m->rid; /* per-replica rewrite */
    uint32_t v = m->rid;
    ps_roce_set_inline(ps_pass_switch(x), p, &v, 4);
    if (m->rid == 9)
        ps_drop(x);
}

static const struct ps_dataplane mc_dp = {"mcast", mc_ingress, mc_egress};

static void test_multicast(void)
{
    struct rig r;
    rig_init(&r, NULL);
    struct ps_mcast_member m[] = {{0, 10}, {1, 11}, {2, 12}, {2, 9}};
    CHECK(ps_mcast_set(r.ps, 7, m, 4) == 0);
    CHECK(ps_load(r.ps, &mc_dp, NULL) == 0);
    send(&r, 0, SW_NODE, 0);
    sim_run(r.sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(r.sinks[0].n, 1);
    CHECK_EQ_U64(r.sinks[1].n, 1);
    CHECK_EQ_U64(r.sinks[2].n, 1); /* rid 9 was dropped in egress */
    CHECK_EQ_U64(r.sinks[0].last_psn, 110);
    CHECK_EQ_U64(r.sinks[1].last_psn, 111);
    CHECK_EQ_U64(r.sinks[2].last_psn, 112);
    CHECK_EQ_U64(r.sinks[1].last_len, 4);
    CHECK_EQ_U64(ps_get_counters(r.ps)->replicas, 4);
    CHECK_EQ_U64(ps_get_counters(r.ps)->program_drops, 1);
    /* replicas are serialised into egress one per pkt_interval (1 ns) */
    CHECK(r.sinks[1].last_t > r.sinks[0].last_t);
    rig_free(&r);
}

/* A member on the recirculation port: that copy takes its egress pass
 * (seeing its rid), then comes back into ingress, where it is forwarded;
 * the other copy goes out at once. */
static void mcr_ingress(struct ps_pass *x, struct pkt *p, void *prog)
{
    (void)prog;
    struct ps_meta *m = ps_pass_meta(x);
    if (m->ingress_port == PS_PORT_RECIRC) {
        p->psn = 300 + m->bridge[0];
        ps_fwd(x, 2);
        return;
    }
    m->bridge_bytes = 16;
    ps_mcast(x, 8);
}

static void mcr_egress(struct ps_pass *x, struct pkt *p, void *prog)
{
    (void)prog;
    struct ps_meta *m = ps_pass_meta(x);
    if (m->rid == 0) /* the recirculated copy's second, unicast pass */
        return;
    p->psn = 200 + m->rid;
    m->bridge[0] = (uint8_t)m->rid;
}

static const struct ps_dataplane mcr_dp = {"mcast-recirc", mcr_ingress, mcr_egress};

static void test_multicast_recirc(void)
{
    struct rig r;
    rig_init(&r, NULL);
    struct ps_mcast_member m[] = {{1, 5}, {PS_PORT_RECIRC, 6}};
    CHECK(ps_mcast_set(r.ps, 8, m, 2) == 0);
    CHECK(ps_load(r.ps, &mcr_dp, NULL) == 0);
    send(&r, 0, SW_NODE, 0);
    sim_run(r.sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(r.sinks[1].n, 1);
    CHECK_EQ_U64(r.sinks[1].last_psn, 205);
    CHECK_EQ_U64(r.sinks[2].n, 1); /* the recirculated copy, rid 6 seen in egress */
    CHECK_EQ_U64(r.sinks[2].last_psn, 306);
    const struct ps_counters *c = ps_get_counters(r.ps);
    CHECK_EQ_U64(c->replicas, 2);
    CHECK_EQ_U64(c->recirculations, 1);
    CHECK_EQ_U64(c->ingress_passes, 2);
    CHECK_EQ_U64(c->egress_passes, 3);
    CHECK(r.sinks[2].last_t > r.sinks[1].last_t + 500 * SIM_NS);
    rig_free(&r);
}

/* ---------------------------------------------------------------- generator, tables, digests */

struct gen_prog {
    struct ps_table *tbl;
    struct ps_reg *seen;
    uint64_t hits, misses;
};

struct tbl_data {
    uint32_t value;
};

static void gen_ingress(struct ps_pass *x, struct pkt *p, void *prog)
{
    (void)p;
    struct gen_prog *g = prog;
    struct ps_meta *m = ps_pass_meta(x);
    if (m->ingress_port != PS_PORT_PKTGEN && m->ingress_port != PS_PORT_CPU) {
        ps_fwd(x, p->dst_node);
        return;
    }
    const struct tbl_data *d = ps_table_apply(x, g->tbl, m->pktgen_pkt);
    if (d)
        g->hits += d->value;
    else
        g->misses++;
    ps_reg_exec(x, g->seen, 0, add_one, NULL);
    if (m->ingress_port == PS_PORT_CPU) {
        uint64_t msg = 0x1234;
        memcpy(&msg, m->bridge, 4);
        ps_digest(x, &msg, sizeof(msg));
    }
    ps_drop(x);
}

static const struct ps_dataplane gen_dp = {"gen", gen_ingress, NULL};

static void test_pktgen_tables_digest(void)
{
    struct rig r;
    rig_init(&r, NULL);
    struct gen_prog g = {0};
    g.tbl = ps_table_declare(r.ps, "tbl", PS_INGRESS, 0, 4, sizeof(struct tbl_data));
    g.seen = ps_reg_declare(r.ps, "seen", PS_INGRESS, 1, 1, 32);
    CHECK(g.tbl && g.seen);
    struct tbl_data d = {.value = 1000};
    CHECK(ps_table_add(g.tbl, 1, &d) == 0);
    d.value = 1;
    CHECK(ps_table_add(g.tbl, 2, &d) == 0);
    CHECK(ps_table_add(g.tbl, 3, &d) == 0);
    CHECK(ps_table_add(g.tbl, 4, &d) == 0);
    CHECK(ps_table_add(g.tbl, 5, &d) == -1 && errno == ENOSPC);
    CHECK(ps_table_del(g.tbl, 4) == 0);
    CHECK(ps_table_del(g.tbl, 4) == -1 && errno == ENOENT);
    CHECK(ps_table_add(g.tbl, 2, &d) == 0); /* modify in place */
    CHECK(ps_load(r.ps, &gen_dp, &g) == 0);
    CHECK(ps_reg_declare(r.ps, "late", PS_INGRESS, 2, 1, 8) == NULL && errno == EBUSY);
    /* packets 0..3 every 1 us: 0 misses, 1 -> 1000, 2 -> 1, 3 -> 1 */
    CHECK(ps_pktgen_enable(r.ps, 1, SIM_US, 4) == 0);
    sim_run(r.sim, 10 * SIM_US + 100 * SIM_NS);
    CHECK_EQ_U64(ps_get_counters(r.ps)->pktgen_pkts, 40);
    CHECK_EQ_U64(g.misses, 10);
    CHECK_EQ_U64(g.hits, 10 * 1002);
    CHECK(ps_pktgen_disable(r.ps, 1) == 0);
    uint32_t tag = 77;
    CHECK(ps_inject(r.ps, &tag, sizeof(tag)) == 0);
    sim_run(r.sim, 20 * SIM_US);
    CHECK_EQ_U64(ps_reg_get(g.seen, 0), 41);
    uint64_t msg = 0;
    CHECK_EQ_U64(ps_digest_recv(r.ps, &msg, sizeof(msg), 0), sizeof(msg));
    CHECK_EQ_U64(msg & 0xffffffffu, 77);
    CHECK_EQ_U64(ps_digest_recv(r.ps, &msg, sizeof(msg), 0), 0);
    /* the loading program returns: the data plane and its generator stop,
     * the switch forwards like a fixed one, and nothing loads again */
    uint64_t gen = ps_get_counters(r.ps)->pktgen_pkts;
    CHECK(ps_pktgen_enable(r.ps, 1, SIM_US, 4) == 0);
    ps_proc_exit(r.ps, (const struct sim_proc *)&g); /* not the loader: no effect */
    sim_run(r.sim, sim_now(r.sim) + 5 * SIM_US);
    CHECK(ps_get_counters(r.ps)->pktgen_pkts > gen);
    ps_proc_exit(r.ps, NULL); /* the loader (outside a process: NULL) */
    uint64_t hits = g.hits, misses = g.misses;
    gen = ps_get_counters(r.ps)->pktgen_pkts;
    sim_run(r.sim, sim_now(r.sim) + 20 * SIM_US);
    CHECK_EQ_U64(ps_get_counters(r.ps)->pktgen_pkts, gen);
    CHECK_EQ_U64(g.hits, hits);
    CHECK_EQ_U64(g.misses, misses);
    send(&r, 0, 1, 5);
    uint64_t got = r.sinks[1].n;
    sim_run(r.sim, sim_now(r.sim) + 10 * SIM_US);
    CHECK_EQ_U64(r.sinks[1].n, got + 1);
    CHECK(ps_load(r.ps, &gen_dp, &g) == -1 && errno == EBUSY);
    rig_free(&r);
}

static void test_declarations(void)
{
    struct rig r;
    rig_init(&r, NULL);
    CHECK(ps_reg_declare(r.ps, "x", PS_INGRESS, 12, 1, 32) == NULL && errno == EINVAL);
    CHECK_STR_CONTAINS(ps_last_error(r.ps), "stages 0..11");
    CHECK(ps_reg_declare(r.ps, "x", PS_INGRESS, 0, 1, 65) == NULL && errno == EINVAL);
    for (int i = 0; i < 4; i++) {
        char n[8];
        snprintf(n, sizeof(n), "r%d", i);
        CHECK(ps_reg_declare(r.ps, n, i % 2 ? PS_EGRESS : PS_INGRESS, 3, 8, 32) != NULL);
    }
    CHECK(ps_reg_declare(r.ps, "r4", PS_INGRESS, 3, 8, 32) == NULL && errno == ENOSPC);
    CHECK_STR_CONTAINS(ps_last_error(r.ps), "no stateful ALU left");
    CHECK(ps_reg_declare(r.ps, "r0", PS_INGRESS, 4, 8, 32) == NULL && errno == EEXIST);
    CHECK(ps_table_declare(r.ps, "big", PS_INGRESS, 5, 1u << 20, 64) == NULL && errno == ENOSPC);
    CHECK_STR_CONTAINS(ps_last_error(r.ps), "do not fit in stage 5");
    CHECK(ps_load(r.ps, &gen_dp, NULL) == 0);
    CHECK(ps_load(r.ps, &gen_dp, NULL) == -1 && errno == EBUSY);
    rig_free(&r);
}

static void test_roce_rewrite(void)
{
    struct rig r;
    rig_init(&r, NULL);
    struct pkt p;
    memset(&p, 0, sizeof(p));
    p.payload_len = 1024;
    ps_roce_set_opcode(&p, IB_OPCODE_RC_RDMA_READ_RESPONSE_FIRST);
    CHECK(p.ext_hdrs == PKT_EXT_AETH);
    CHECK_EQ_U64(p.frame_bytes, 14 + 20 + 8 + 12 + 4 + 1024 + 4 + 4);
    int w = ps_roce_resp_to_write(p.opcode);
    CHECK_EQ_U64(w, IB_OPCODE_RC_RDMA_WRITE_FIRST);
    ps_roce_set_opcode(&p, (uint8_t)w);
    CHECK(p.ext_hdrs == PKT_EXT_RETH); /* -4 B AETH, +16 B RETH */
    CHECK_EQ_U64(p.frame_bytes, 14 + 20 + 8 + 12 + 16 + 1024 + 4 + 4);
    CHECK_EQ_U64(ps_roce_resp_to_write(IB_OPCODE_RC_RDMA_READ_RESPONSE_MIDDLE),
                 IB_OPCODE_RC_RDMA_WRITE_MIDDLE);
    CHECK_EQ_U64(ps_roce_resp_to_write(IB_OPCODE_RC_RDMA_READ_RESPONSE_LAST),
                 IB_OPCODE_RC_RDMA_WRITE_LAST);
    CHECK_EQ_U64(ps_roce_resp_to_write(IB_OPCODE_RC_RDMA_READ_RESPONSE_ONLY),
                 IB_OPCODE_RC_RDMA_WRITE_ONLY);
    CHECK(ps_roce_resp_to_write(IB_OPCODE_RC_ACKNOWLEDGE) < 0);
    ps_roce_set_opcode(&p, IB_OPCODE_RC_RDMA_READ_RESPONSE_LAST);
    CHECK_EQ_U64(ps_roce_resp_to_write(p.opcode), IB_OPCODE_RC_RDMA_WRITE_LAST);
    ps_roce_set_opcode(&p, IB_OPCODE_RC_RDMA_WRITE_LAST); /* -4 B AETH */
    CHECK(p.ext_hdrs == 0);
    uint32_t v = 42;
    ps_roce_set_opcode(&p, IB_OPCODE_RC_RDMA_WRITE_ONLY);
    ps_roce_set_inline(r.ps, &p, &v, 4);
    CHECK_EQ_U64(p.payload_len, 4);
    CHECK_EQ_U64(p.frame_bytes, 14 + 20 + 8 + 12 + 16 + 4 + 4 + 4);
    CHECK(p.payload && memcmp(p.payload, &v, 4) == 0);
    rig_free(&r); /* the pool's slabs hold the buffer */
}

/* ---------------------------------------------------------------- queue depth in egress */

struct qd_prog {
    uint64_t depth[256];
    uint32_t n;
    uint64_t rnd[2];
};

static void qd_ingress(struct ps_pass *x, struct pkt *p, void *prog)
{
    (void)prog;
    ps_fwd(x, p->dst_node);
}

static void qd_egress(struct ps_pass *x, struct pkt *p, void *prog)
{
    (void)p;
    struct qd_prog *q = prog;
    if (q->n < 256)
        q->depth[q->n++] = ps_pass_meta(x)->enq_qdepth_bytes;
    q->rnd[0] = q->rnd[1];
    q->rnd[1] = ps_random(x);
}

static const struct ps_dataplane qd_dp = {"qdepth", qd_ingress, qd_egress};

/* Each egress pass sees the bytes queued on its output port: nothing
 * beyond the frame being sent while one sender streams to h2 at the port's
 * rate, a growing queue once two senders do (an incast).  The Random
 * extern gives different words, the same ones for the same seed. */
static void test_egress_qdepth(void)
{
    uint64_t first_rnd = 0;
    for (int run = 0; run < 2; run++) {
        struct rig r;
        rig_init(&r, NULL);
        struct qd_prog q = {.n = 0};
        CHECK(ps_load(r.ps, &qd_dp, &q) == 0);
        for (uint32_t k = 0; k < 100; k++)
            send(&r, 0, 2, k);
        sim_run(r.sim, SIM_TIME_NEVER);
        CHECK_EQ_U64(q.n, 100);
        uint64_t one = 0;
        for (uint32_t k = 0; k < q.n; k++)
            one = q.depth[k] > one ? q.depth[k] : one;
        CHECK(one > 0 && one <= 128); /* the frame on the wire (106 B) */
        q.n = 0;
        /* 100 frames each: a pass lasts 500 ns, 59 frame times, so the
         * first ones reach the port after later ones took their egress */
        for (uint32_t k = 0; k < 100; k++) {
            send(&r, 0, 2, k);
            send(&r, 1, 2, k);
        }
        sim_run(r.sim, SIM_TIME_NEVER);
        CHECK_EQ_U64(q.n, 200);
        CHECK(q.depth[q.n - 1] > 8 * one); /* two at line rate into one: it grows */
        CHECK(q.depth[q.n - 1] >= q.depth[q.n / 2]);
        const struct link *down = switch_port(topo_switch(r.topo, 0), 2);
        CHECK(q.depth[q.n - 1] <= link_get_counters(down)->max_queue_bytes);
        CHECK(q.rnd[0] != q.rnd[1]);
        if (run == 0)
            first_rnd = q.rnd[1];
        else
            CHECK_EQ_U64(q.rnd[1], first_rnd);
        ps_unload(r.ps);
        rig_free(&r);
    }
}

int main(void)
{
    test_default_forwarding();
    test_counter();
    test_rules();
    test_recirculation();
    test_multicast();
    test_multicast_recirc();
    test_pktgen_tables_digest();
    test_declarations();
    test_roce_rewrite();
    test_egress_qdepth();
    return test_summary();
}
