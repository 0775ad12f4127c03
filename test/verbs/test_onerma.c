/* The Google 1RMA personality (hardware.nic.transport = 1rma) at the verbs
 * level: an unmodified RC-API program on NICs whose transport is
 * NIC_TRANSPORT_ONERMA.
 *
 *  - post-time refusals: SEND, SEND_WITH_IMM, WRITE_WITH_IMM and both
 *    atomics are refused with EINVAL and one line on stderr naming the
 *    transport and the opcode; READ and WRITE of more than 4 KiB likewise;
 *  - 200 WRITEs and 200 READs of 1 B .. 4 KiB move the right bytes;
 *  - a WRITE takes two round trips: 4 packets on the wire (WRITE_REQUEST,
 *    FETCH_REQUEST, FETCH_RESPONSE, WRITE_ACKNOWLEDGE) against a READ's 2,
 *    and its latency exceeds a READ's of the same size by one network
 *    round trip; with 1RMA's idle RTT of ~5 us (long cables) a WRITE takes
 *    about twice as long as a READ;
 *  - out-of-order completion: a 4 KiB WRITE posted before a 64 B READ
 *    completes after it; READs of 4 KiB and 64 B in flight together on a
 *    leaf-spine fabric complete out of posting order;
 *  - connection-free: two initiators on two hosts use the same target QP,
 *    which is connected to neither of them;
 *  - fail-fast: with 100% loss a READ and a WRITE complete with
 *    IBV_WC_RESP_TIMEOUT_ERR 50 us after they were issued, without any
 *    retransmission; the QP stays in RTS and ops after the loss is removed
 *    work; a WRITE whose fetch requests are lost times out and leaves the
 *    target memory untouched. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"
#include "sim/nic/opcode.h"
#include "test.h"

enum {
    SLOT = 4096,
    N_OPS = 200,
    OFF_DST = 1 << 20, /* WRITE destination / READ source on the target */
    MAX_OP = 4096,
};

static uint8_t pat(uint32_t seq, uint32_t i)
{
    return (uint8_t)((seq * 29u + i * 13u + (i >> 8)) ^ 0xa5);
}

static uint32_t op_len(uint32_t seq)
{
    return 1 + (seq * 2654435761u >> 9) % MAX_OP;
}

static void fill(uint8_t *p, uint32_t seq, uint32_t len)
{
    for (uint32_t i = 0; i < len; i++)
        p[i] = pat(seq, i);
}

static bool same(const uint8_t *p, uint32_t seq, uint32_t len)
{
    for (uint32_t i = 0; i < len; i++)
        if (p[i] != pat(seq, i))
            return false;
    return true;
}

static struct fx_rc_opts rma_opts(void)
{
    struct fx_rc_opts o;
    fx_rc_default_opts(&o);
    o.max_send_wr = 512;
    o.max_recv_wr = 16;
    o.cq_depth = 1024;
    o.buf_bytes = 4 << 20;
    o.max_rd_atomic = 16;
    return o;
}

static struct fx *rma_fx(uint64_t seed, unsigned hosts)
{
    struct nic_params np;
    nic_params_default(&np);
    np.transport = NIC_TRANSPORT_ONERMA;
    return fx_create_n(seed, hosts, &np);
}

/* stderr into a temporary file while a post runs (the shim's message). */
static int post_captured(struct fx_rc *rc, enum ibv_wr_opcode op, uint32_t len, char *msg,
                         size_t msg_bytes)
{
    fflush(stderr);
    FILE *tmp = tmpfile();
    int saved = dup(2);
    dup2(fileno(tmp), 2);
    bool atomic = op == IBV_WR_ATOMIC_FETCH_AND_ADD || op == IBV_WR_ATOMIC_CMP_AND_SWP;
    int r = fx_post(rc, op, 99, 0, atomic ? 8 : len, 0, IBV_SEND_SIGNALED);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(tmp);
    size_t n = fread(msg, 1, msg_bytes - 1, tmp);
    msg[n] = 0;
    fclose(tmp);
    return r;
}

/* ---------------------------------------------------------------- refusals and data */

struct basic {
    struct fx *fx;
    struct fx_rc c, s;
    int rc_send, rc_send_imm, rc_write_imm, rc_faa, rc_cas, rc_big_write, rc_big_read, rc_4k;
    char m_send[200], m_big[200], m_big_read[200], m_cas[200], scratch[200];
    uint32_t qpn;
    unsigned w_ok, r_ok, r_bad, err;
};

static void basic_client(void *arg)
{
    struct basic *t = arg;
    struct fx_rc *rc = &t->c;
    struct fx_rc_opts o = rma_opts();
    CHECK(fx_rc_open(t->fx, rc, &o) == 0);
    CHECK(fx_rc_connect(rc, "b/c", "b/s") == 0);
    t->qpn = rc->qp->qp_num;
    fx_barrier(t->fx, "b/ready", "c", "s");
    t->rc_send = post_captured(rc, IBV_WR_SEND, 64, t->m_send, sizeof(t->m_send));
    t->rc_send_imm = post_captured(rc, IBV_WR_SEND_WITH_IMM, 64, t->scratch, sizeof(t->scratch));
    t->rc_write_imm =
        post_captured(rc, IBV_WR_RDMA_WRITE_WITH_IMM, 64, t->scratch, sizeof(t->scratch));
    t->rc_faa = post_captured(rc, IBV_WR_ATOMIC_FETCH_AND_ADD, 8, t->scratch, sizeof(t->scratch));
    t->rc_cas = post_captured(rc, IBV_WR_ATOMIC_CMP_AND_SWP, 8, t->m_cas, sizeof(t->m_cas));
    t->rc_big_write = post_captured(rc, IBV_WR_RDMA_WRITE, MAX_OP + 1, t->m_big, sizeof(t->m_big));
    t->rc_big_read =
        post_captured(rc, IBV_WR_RDMA_READ, MAX_OP + 1, t->m_big_read, sizeof(t->m_big_read));
    /* WRITEs: op i from slot i to the target's slot i */
    for (uint32_t i = 0; i < N_OPS; i++) {
        fill(rc->buf + (size_t)i * SLOT, i, op_len(i));
        CHECK(fx_post(rc, IBV_WR_RDMA_WRITE, i, (size_t)i * SLOT, op_len(i),
                      OFF_DST + (size_t)i * SLOT, IBV_SEND_SIGNALED) == 0);
    }
    for (uint32_t i = 0; i < N_OPS; i++) {
        struct ibv_wc wc;
        if (fx_poll_one(rc->scq, &wc) != 1)
            break;
        if (wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RDMA_WRITE)
            t->w_ok++;
        else
            t->err++;
    }
    fx_barrier(t->fx, "b/written", "c", "s");
    /* READs: the target's read slots (filled by the server) into slot i */
    for (uint32_t i = 0; i < N_OPS; i++)
        CHECK(fx_post(rc, IBV_WR_RDMA_READ, 1000 + i, (size_t)i * SLOT, op_len(1000 + i),
                      OFF_DST + (size_t)(N_OPS + i) * SLOT, IBV_SEND_SIGNALED) == 0);
    for (uint32_t i = 0; i < N_OPS; i++) {
        struct ibv_wc wc;
        if (fx_poll_one(rc->scq, &wc) != 1)
            break;
        if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RDMA_READ || wc.wr_id < 1000) {
            t->err++;
            continue;
        }
        uint32_t k = (uint32_t)wc.wr_id - 1000;
        if (same(rc->buf + (size_t)k * SLOT, 1000 + k, op_len(1000 + k)))
            t->r_ok++;
        else
            t->r_bad++;
    }
    t->rc_4k = fx_post(rc, IBV_WR_RDMA_READ, 7, 0, MAX_OP, OFF_DST, IBV_SEND_SIGNALED);
    struct ibv_wc wc;
    CHECK(fx_poll_one(rc->scq, &wc) == 1 && wc.status == IBV_WC_SUCCESS);
    fx_barrier(t->fx, "b/done", "c", "s");
}

static void basic_server(void *arg)
{
    struct basic *t = arg;
    struct fx_rc *rc = &t->s;
    struct fx_rc_opts o = rma_opts();
    CHECK(fx_rc_open(t->fx, rc, &o) == 0);
    CHECK(fx_rc_connect(rc, "b/s", "b/c") == 0);
    for (uint32_t i = 0; i < N_OPS; i++)
        fill(rc->buf + OFF_DST + (size_t)(N_OPS + i) * SLOT, 1000 + i, op_len(1000 + i));
    fx_barrier(t->fx, "b/ready", "s", "c");
    fx_barrier(t->fx, "b/written", "s", "c");
    unsigned ok = 0;
    for (uint32_t i = 0; i < N_OPS; i++)
        ok += same(rc->buf + OFF_DST + (size_t)i * SLOT, i, op_len(i));
    CHECK_EQ_U64(ok, N_OPS);
    fx_barrier(t->fx, "b/done", "s", "c");
}

static void test_basic(void)
{
    struct basic *t = calloc(1, sizeof(*t));
    t->fx = rma_fx(1, 2);
    CHECK(fx_run_pair(t->fx, "client", basic_client, "server", basic_server, t) == SIM_RUN_DONE);
    CHECK_EQ_U64(t->rc_send, EINVAL);
    CHECK_EQ_U64(t->rc_send_imm, EINVAL);
    CHECK_EQ_U64(t->rc_write_imm, EINVAL);
    CHECK_EQ_U64(t->rc_faa, EINVAL);
    CHECK_EQ_U64(t->rc_cas, EINVAL);
    CHECK_EQ_U64(t->rc_big_write, EINVAL);
    CHECK_EQ_U64(t->rc_big_read, EINVAL);
    CHECK_EQ_U64(t->rc_4k, 0);
    char want[160];
    snprintf(want, sizeof(want),
             "rnicsim: 1rma has no SEND (post_send on qp 0x%x refused, EINVAL)\n", t->qpn);
    CHECK(strcmp(t->m_send, want) == 0);
    CHECK_STR_CONTAINS(t->m_cas, "rnicsim: 1rma has no ATOMIC_CMP_AND_SWP");
    CHECK_STR_CONTAINS(t->m_big, "1rma ops are at most 4096 bytes: RDMA_WRITE of 4097 bytes");
    CHECK_STR_CONTAINS(t->m_big_read, "RDMA_READ of 4097 bytes > 4096");
    CHECK_EQ_U64(t->w_ok, N_OPS);
    CHECK_EQ_U64(t->r_ok, N_OPS);
    CHECK_EQ_U64(t->r_bad + t->err, 0);
    fx_destroy(t->fx);
    free(t);
}

/* ---------------------------------------------------------------- two round trips */

struct rtt {
    struct fx *fx;
    struct fx_rc c, s;
    uint32_t len;
    sim_time_t lat_write, lat_read;
    uint64_t pkts_write, pkts_read;
};

static uint64_t pkts_tx(struct fx *fx)
{
    return nic_get_counters(fx->nic[0])->pkts_tx + nic_get_counters(fx->nic[1])->pkts_tx;
}

/* One op alone, post to CQE; best of 5 (the first pays for cold paths). */
static sim_time_t one_op(struct rtt *t, enum ibv_wr_opcode op, uint64_t *pkts)
{
    struct fx_rc *rc = &t->c;
    sim_time_t best = SIM_TIME_NEVER;
    for (int k = 0; k < 5; k++) {
        uint64_t p0 = pkts_tx(t->fx);
        sim_time_t t0 = sim_now(t->fx->sim);
        CHECK(fx_post(rc, op, (uint64_t)k, 0, t->len, OFF_DST, IBV_SEND_SIGNALED) == 0);
        struct ibv_wc wc;
        CHECK(fx_poll_one(rc->scq, &wc) == 1 && wc.status == IBV_WC_SUCCESS);
        sim_time_t d = sim_now(t->fx->sim) - t0;
        if (d < best)
            best = d;
        *pkts = pkts_tx(t->fx) - p0;
        sim_proc_sleep(20 * SIM_US); /* let everything settle */
    }
    return best;
}

static void rtt_client(void *arg)
{
    struct rtt *t = arg;
    struct fx_rc_opts o = rma_opts();
    CHECK(fx_rc_open(t->fx, &t->c, &o) == 0);
    CHECK(fx_rc_connect(&t->c, "r/c", "r/s") == 0);
    fx_barrier(t->fx, "r/ready", "c", "s");
    t->lat_read = one_op(t, IBV_WR_RDMA_READ, &t->pkts_read);
    t->lat_write = one_op(t, IBV_WR_RDMA_WRITE, &t->pkts_write);
    fx_barrier(t->fx, "r/done", "c", "s");
}

static void rtt_server(void *arg)
{
    struct rtt *t = arg;
    struct fx_rc_opts o = rma_opts();
    CHECK(fx_rc_open(t->fx, &t->s, &o) == 0);
    CHECK(fx_rc_connect(&t->s, "r/s", "r/c") == 0);
    fx_barrier(t->fx, "r/ready", "s", "c");
    fx_barrier(t->fx, "r/done", "s", "c");
}

/* Idle round trip of small packets between the two hosts of the star:
 * per direction two cables and the switch; a 64 B frame (+20 B preamble
 * and gap) serialised on each cable. */
static sim_time_t star_rtt_ps(sim_time_t cable_ps)
{
    struct topo_params tp;
    fabric_defaults(&tp);
    sim_time_t ser = sim_bytes_to_ps(64 + PKT_ETH_PREAMBLE_IFG_BYTES, tp.link.rate_bps);
    return 2 * (2 * (cable_ps + ser) + tp.sw.latency_ps);
}

static void run_rtt(uint32_t len, sim_time_t cable_ps, double *ratio, double *diff_in_rtts)
{
    struct rtt *t = calloc(1, sizeof(*t));
    t->fx = rma_fx(5, 2);
    t->len = len;
    if (cable_ps) {
        for (unsigned i = 0; i < topo_n_links(t->fx->topo); i++) {
            struct link *l = topo_link(t->fx->topo, i);
            struct link_params lp = *link_get_params(l);
            lp.delay_ps = cable_ps;
            CHECK(link_set_params(l, &lp) == 0);
        }
    } else {
        struct topo_params tp;
        fabric_defaults(&tp);
        cable_ps = tp.link.delay_ps;
    }
    CHECK(fx_run_pair(t->fx, "client", rtt_client, "server", rtt_server, t) == SIM_RUN_DONE);
    CHECK_EQ_U64(t->pkts_read, 2);  /* request, response: one round trip */
    CHECK_EQ_U64(t->pkts_write, 4); /* request, fetch, data, ACK: two round trips */
    sim_time_t rtt = star_rtt_ps(cable_ps);
    *ratio = (double)t->lat_write / (double)t->lat_read;
    *diff_in_rtts = (double)(t->lat_write - t->lat_read) / (double)rtt;
    printf("1rma %u B, cable %.2f us: READ %.3f us, WRITE %.3f us (x%.2f), difference %.2f idle "
           "RTTs of %.3f us\n",
           len, sim_ps_to_us(cable_ps), sim_ps_to_us(t->lat_read), sim_ps_to_us(t->lat_write),
           *ratio, *diff_in_rtts, sim_ps_to_us(rtt));
    fx_destroy(t->fx);
    free(t);
}

static void test_two_round_trips(void)
{
    double ratio, diff;
    /* default star (5 ns cables): a WRITE costs one more network round
     * trip; at 4 KiB part of it overlaps the READ's 4 KiB PCIe write of
     * the data, which its CQE waits for (the WRITE's ACK leaves when the
     * target issues its placement) */
    run_rtt(64, 0, &ratio, &diff);
    CHECK(diff > 0.8 && diff < 1.3);
    run_rtt(4096, 0, &ratio, &diff);
    CHECK(diff > 0.4 && diff < 1.3);
    /* 1RMA's idle RTT of ~5 us (CALIBRATION.md, Transports): 1.05 us
     * cables -> 2 x (2 x 1.05 + 0.3) = 4.8 us; the network dominates and a
     * WRITE takes about two READs */
    run_rtt(64, 1050 * SIM_NS, &ratio, &diff);
    CHECK(diff > 0.9 && diff < 1.1);
    CHECK(ratio > 1.6 && ratio < 2.1);
    run_rtt(4096, 1050 * SIM_NS, &ratio, &diff);
    CHECK(diff > 0.9 && diff < 1.1);
    CHECK(ratio > 1.5 && ratio < 2.1);
}

/* ---------------------------------------------------------------- out-of-order completion */

struct ooo {
    struct fx *fx;
    struct fx_rc c, s;
    uint64_t first_two[2];
    uint64_t order[64];
    unsigned n, errs;
};

static void ooo_client(void *arg)
{
    struct ooo *t = arg;
    struct fx_rc *rc = &t->c;
    struct fx_rc_opts o = rma_opts();
    CHECK(fx_rc_open(t->fx, rc, &o) == 0);
    CHECK(fx_rc_connect(rc, "o/c", "o/s") == 0);
    fx_barrier(t->fx, "o/ready", "c", "s");
    /* a 4 KiB WRITE (two round trips), then a 64 B READ (one), in one list */
    struct ibv_sge sge[64];
    struct ibv_send_wr wr[64];
    memset(wr, 0, sizeof(wr));
    for (int k = 0; k < 2; k++) {
        sge[k] = (struct ibv_sge){(uintptr_t)(rc->buf + (size_t)k * SLOT), k ? 64u : 4096u,
                                  rc->mr->lkey};
        wr[k].wr_id = (uint64_t)k;
        wr[k].sg_list = &sge[k];
        wr[k].num_sge = 1;
        wr[k].opcode = k ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE;
        wr[k].send_flags = IBV_SEND_SIGNALED;
        wr[k].wr.rdma.remote_addr = rc->remote.addr + OFF_DST + (size_t)k * SLOT;
        wr[k].wr.rdma.rkey = rc->remote.rkey;
        wr[k].next = k ? NULL : &wr[1];
    }
    struct ibv_send_wr *bad = NULL;
    CHECK(ibv_post_send(rc->qp, wr, &bad) == 0);
    for (int k = 0; k < 2; k++) {
        struct ibv_wc wc;
        CHECK(fx_poll_one(rc->scq, &wc) == 1 && wc.status == IBV_WC_SUCCESS);
        t->first_two[k] = wc.wr_id;
    }
    /* 64 READs, 4 KiB and 64 B alternating, in one list */
    memset(wr, 0, sizeof(wr));
    for (int k = 0; k < 64; k++) {
        sge[k] = (struct ibv_sge){(uintptr_t)(rc->buf + (size_t)k * SLOT), k % 2 ? 64u : 4096u,
                                  rc->mr->lkey};
        wr[k].wr_id = (uint64_t)k;
        wr[k].sg_list = &sge[k];
        wr[k].num_sge = 1;
        wr[k].opcode = IBV_WR_RDMA_READ;
        wr[k].send_flags = IBV_SEND_SIGNALED;
        wr[k].wr.rdma.remote_addr = rc->remote.addr + OFF_DST + (size_t)k * SLOT;
        wr[k].wr.rdma.rkey = rc->remote.rkey;
        wr[k].next = k < 63 ? &wr[k + 1] : NULL;
    }
    CHECK(ibv_post_send(rc->qp, wr, &bad) == 0);
    for (int k = 0; k < 64; k++) {
        struct ibv_wc wc;
        CHECK(fx_poll_one(rc->scq, &wc) == 1);
        if (wc.status != IBV_WC_SUCCESS)
            t->errs++;
        t->order[t->n++] = wc.wr_id;
    }
    fx_barrier(t->fx, "o/done", "c", "s");
}

static void ooo_server(void *arg)
{
    struct ooo *t = arg;
    struct fx_rc_opts o = rma_opts();
    CHECK(fx_rc_open(t->fx, &t->s, &o) == 0);
    CHECK(fx_rc_connect(&t->s, "o/s", "o/c") == 0);
    fx_barrier(t->fx, "o/ready", "s", "c");
    fx_barrier(t->fx, "o/done", "s", "c");
}

static void test_out_of_order(void)
{
    struct ooo *t = calloc(1, sizeof(*t));
    t->fx = rma_fx(6, 2);
    struct topo_params tp;
    fabric_leaf_spine(&tp, 2, 4, 1);
    CHECK(fx_use_topology(t->fx, &tp) == 0);
    CHECK(fx_run_pair(t->fx, "client", ooo_client, "server", ooo_server, t) == SIM_RUN_DONE);
    /* the READ posted second completes first */
    CHECK_EQ_U64(t->first_two[0], 1);
    CHECK_EQ_U64(t->first_two[1], 0);
    CHECK_EQ_U64(t->n, 64);
    CHECK_EQ_U64(t->errs, 0);
    unsigned descents = 0, small_first = 0;
    uint64_t sum = 0;
    for (unsigned i = 0; i < t->n; i++) {
        sum += t->order[i];
        if (i && t->order[i] < t->order[i - 1]) {
            descents++;
            small_first += t->order[i] % 2 == 0 && t->order[i - 1] % 2 == 1;
        }
    }
    CHECK_EQ_U64(sum, 64 * 63 / 2);
    CHECK(descents > 0);
    CHECK(small_first > 0); /* a later 64 B READ overtakes an earlier 4 KiB one */
    printf("1rma: WRITE 4 KiB then READ 64 B complete as %" PRIu64 ", %" PRIu64
           "; 64 READs (4 KiB / 64 B) on leaf-spine: %u completions before an earlier op, "
           "%u of them a 64 B READ before a 4 KiB one\n",
           t->first_two[0], t->first_two[1], descents, small_first);
    fx_destroy(t->fx);
    free(t);
}

/* ---------------------------------------------------------------- connection-free */

struct cfree {
    struct fx *fx;
    struct fx_rc a, b, t;
    unsigned ok;
};

static void cf_initiator(struct cfree *c, struct fx_rc *rc, const char *me, uint32_t seq)
{
    struct fx_rc_opts o = rma_opts();
    CHECK(fx_rc_open(c->fx, rc, &o) == 0);
    CHECK(fx_rc_connect(rc, me, "cf/t") == 0);
    fx_barrier(c->fx, "cf/ready", me, "cf/t");
    fill(rc->buf, seq, 1000);
    CHECK(fx_post(rc, IBV_WR_RDMA_WRITE, 1, 0, 1000, OFF_DST + (size_t)seq * SLOT,
                  IBV_SEND_SIGNALED) == 0);
    struct ibv_wc wc;
    CHECK(fx_poll_one(rc->scq, &wc) == 1);
    c->ok += wc.status == IBV_WC_SUCCESS;
    CHECK(fx_post(rc, IBV_WR_RDMA_READ, 2, SLOT, 1000, OFF_DST + (size_t)seq * SLOT,
                  IBV_SEND_SIGNALED) == 0);
    CHECK(fx_poll_one(rc->scq, &wc) == 1);
    c->ok += wc.status == IBV_WC_SUCCESS && same(rc->buf + SLOT, seq, 1000);
    fx_barrier(c->fx, "cf/done", me, "cf/t");
}

static void cf_a(void *arg)
{
    cf_initiator(arg, &((struct cfree *)arg)->a, "cf/a", 1);
}

static void cf_b(void *arg)
{
    cf_initiator(arg, &((struct cfree *)arg)->b, "cf/b", 2);
}

static void cf_target(void *arg)
{
    struct cfree *c = arg;
    struct fx_rc_opts o = rma_opts();
    CHECK(fx_rc_open(c->fx, &c->t, &o) == 0);
    /* the target QP is "connected" to host a's QP only */
    CHECK(fx_rc_connect(&c->t, "cf/t", "cf/a") == 0);
    fx_barrier(c->fx, "cf/ready", "cf/t", "cf/a");
    fx_barrier(c->fx, "cf/ready", "cf/t", "cf/b");
    fx_barrier(c->fx, "cf/done", "cf/t", "cf/a");
    fx_barrier(c->fx, "cf/done", "cf/t", "cf/b");
    CHECK(same(c->t.buf + OFF_DST + SLOT, 1, 1000));
    CHECK(same(c->t.buf + OFF_DST + 2 * SLOT, 2, 1000));
}

static void test_connection_free(void)
{
    struct cfree *c = calloc(1, sizeof(*c));
    c->fx = rma_fx(7, 3);
    fx_spawn(c->fx, 0, "a", cf_a, c);
    fx_spawn(c->fx, 2, "b", cf_b, c);
    fx_spawn(c->fx, 1, "target", cf_target, c);
    CHECK(fx_run(c->fx) == SIM_RUN_DONE);
    CHECK_EQ_U64(c->ok, 4);
    fx_destroy(c->fx);
    free(c);
}

/* ---------------------------------------------------------------- fail-fast */

struct ff {
    struct fx *fx;
    struct fx_rc c, s;
    struct ibv_wc wc[4];
    sim_time_t t_fail[2];
    enum ibv_qp_state state;
    unsigned ok_after;
    struct ibv_wc wc_fetch;
    sim_time_t t_fetch;
};

static bool drop_fetch(struct fx *fx, unsigned node, const struct pkt *p, void *arg)
{
    (void)fx;
    (void)node;
    (void)arg;
    return p->opcode == NIC_OPCODE_ONERMA_FETCH_REQUEST;
}

static void ff_client(void *arg)
{
    struct ff *t = arg;
    struct fx_rc *rc = &t->c;
    struct fx_rc_opts o = rma_opts();
    CHECK(fx_rc_open(t->fx, rc, &o) == 0);
    CHECK(fx_rc_connect(rc, "f/c", "f/s") == 0);
    fx_barrier(t->fx, "f/ready", "c", "s");
    fx_set_loss_all(t->fx, 1.0);
    sim_time_t t0 = sim_now(t->fx->sim);
    CHECK(fx_post(rc, IBV_WR_RDMA_READ, 1, 0, 256, OFF_DST, IBV_SEND_SIGNALED) == 0);
    CHECK(fx_post(rc, IBV_WR_RDMA_WRITE, 2, 0, 256, OFF_DST, IBV_SEND_SIGNALED) == 0);
    for (int k = 0; k < 2; k++) {
        CHECK(fx_poll_one(rc->scq, &t->wc[k]) == 1);
        t->t_fail[k] = sim_now(t->fx->sim) - t0;
    }
    struct ibv_qp_attr a;
    struct ibv_qp_init_attr ia;
    CHECK(ibv_query_qp(rc->qp, &a, IBV_QP_STATE, &ia) == 0);
    t->state = a.qp_state;
    /* loss removed: the QP works */
    fx_set_loss_all(t->fx, 0.0);
    fill(rc->buf, 5, 256);
    CHECK(fx_post(rc, IBV_WR_RDMA_WRITE, 3, 0, 256, OFF_DST, IBV_SEND_SIGNALED) == 0);
    CHECK(fx_poll_one(rc->scq, &t->wc[2]) == 1);
    /* (posted together, the READ could overtake the WRITE: ops are independent) */
    CHECK(fx_post(rc, IBV_WR_RDMA_READ, 4, SLOT, 256, OFF_DST, IBV_SEND_SIGNALED) == 0);
    CHECK(fx_poll_one(rc->scq, &t->wc[3]) == 1);
    t->ok_after = (t->wc[2].status == IBV_WC_SUCCESS) + (t->wc[3].status == IBV_WC_SUCCESS) +
                  same(rc->buf + SLOT, 5, 256);
    /* fetch requests lost: the WRITE fails, nothing is written */
    fx_set_drop_fn(t->fx, drop_fetch, NULL);
    fill(rc->buf + 2 * SLOT, 6, 256);
    t0 = sim_now(t->fx->sim);
    CHECK(fx_post(rc, IBV_WR_RDMA_WRITE, 5, 2 * SLOT, 256, OFF_DST + SLOT, IBV_SEND_SIGNALED) == 0);
    CHECK(fx_poll_one(rc->scq, &t->wc_fetch) == 1);
    t->t_fetch = sim_now(t->fx->sim) - t0;
    fx_set_drop_fn(t->fx, NULL, NULL);
    fx_barrier(t->fx, "f/done", "c", "s");
}

static void ff_server(void *arg)
{
    struct ff *t = arg;
    struct fx_rc_opts o = rma_opts();
    CHECK(fx_rc_open(t->fx, &t->s, &o) == 0);
    CHECK(fx_rc_connect(&t->s, "f/s", "f/c") == 0);
    fx_barrier(t->fx, "f/ready", "s", "c");
    fx_barrier(t->fx, "f/done", "s", "c");
    /* the WRITE whose data were never fetched left its target alone */
    unsigned zero = 0;
    for (unsigned i = 0; i < 256; i++)
        zero += t->s.buf[OFF_DST + SLOT + i] == 0;
    CHECK_EQ_U64(zero, 256);
}

static void test_fail_fast(void)
{
    struct ff *t = calloc(1, sizeof(*t));
    t->fx = rma_fx(8, 2);
    CHECK(fx_run_pair(t->fx, "client", ff_client, "server", ff_server, t) == SIM_RUN_DONE);
    sim_time_t to = nic_get_params(t->fx->nic[0])->onerma_timeout_ps;
    for (int k = 0; k < 2; k++) {
        CHECK(t->wc[k].status == IBV_WC_RESP_TIMEOUT_ERR);
        CHECK(t->wc[k].wr_id == (uint64_t)k + 1);
        /* issued within ~1 us of the post, failed at issue + 50 us */
        CHECK(t->t_fail[k] >= to && t->t_fail[k] < to + 2 * SIM_US);
    }
    CHECK_EQ_U64(t->state, IBV_QPS_RTS);
    CHECK_EQ_U64(t->ok_after, 3);
    CHECK(t->wc_fetch.status == IBV_WC_RESP_TIMEOUT_ERR && t->wc_fetch.wr_id == 5);
    CHECK(t->t_fetch >= to && t->t_fetch < to + 2 * SIM_US);
    const struct nic_counters *cc = nic_get_counters(t->fx->nic[0]);
    CHECK_EQ_U64(cc->onerma_timeouts, 3);
    /* no retransmission: 2 lost requests; then WRITE (request + data) and
     * READ (request); then the WRITE whose fetch was lost (request) */
    CHECK_EQ_U64(cc->pkts_tx, 2 + 2 + 1 + 1);
    printf("1rma fail-fast: READ %s after %.2f us, WRITE after %.2f us, QP %s, later ops ok\n",
           ibv_wc_status_str(t->wc[0].status), sim_ps_to_us(t->t_fail[0]),
           sim_ps_to_us(t->t_fail[1]), t->state == IBV_QPS_RTS ? "RTS" : "not RTS");
    fx_destroy(t->fx);
    free(t);
}

int main(void)
{
    test_basic();
    test_two_round_trips();
    test_out_of_order();
    test_connection_free();
    test_fail_fast();
    return test_summary();
}
