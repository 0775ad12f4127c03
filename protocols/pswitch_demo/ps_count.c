/* ps_count: the smallest useful switch program -- an in-network traffic
 * counter (docs/pswitch.md walks through it).
 *
 * Data plane (ingress only):
 *   stage 0  table `pairs`: (source node, destination node) -> counter index;
 *            a miss forwards the packet uncounted
 *   stage 1  register `pkts`:  pkts[i] += 1       (one read-modify-write)
 *   stage 2  register `bytes`: bytes[i] += frame  (one read-modify-write)
 *   then forward to the destination, unchanged.
 * Control plane (this program's main, on the switch CPU, host sw0): declare
 * the table and the arrays, load the data plane, add one entry per ordered
 * pair of the first --hosts hosts, sleep --for, read the counters back and
 * report them as table `ps_count` (src, dst, pkts, bytes).
 *
 * Register actions are plain C functions on one cell (what a stateful ALU
 * does); the switch enforces the P4 rules (each array once per pass, stages
 * in increasing order) and fails the run with a message if a program breaks
 * one. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "protocols/common/rc_conn.h"
#include "protocols/pswitch_demo/ps_count.h"
#include "rnicsim/host.h"
#include "sim/pswitch/pswitch.h"

#define PROG "ps_count"
#define MAX_HOSTS 64u

struct pc_prog {
    struct ps_table *pairs;
    struct ps_reg *pkts, *bytes;
};

static uint64_t act_add(uint64_t *cell, const void *arg)
{
    *cell += *(const uint64_t *)arg;
    return *cell;
}

static void pc_ingress(struct ps_pass *x, struct pkt *p, void *prog)
{
    struct pc_prog *pc = prog;
    if (ps_pass_meta(x)->ingress_port >= PS_PORT_RECIRC) { /* nothing of ours */
        ps_drop(x);
        return;
    }
    const uint32_t *i = ps_table_apply(x, pc->pairs, (uint64_t)p->src_node << 32 | p->dst_node);
    if (i) {
        uint64_t one = 1, frame = p->frame_bytes;
        ps_reg_exec(x, pc->pkts, *i, act_add, &one);
        ps_reg_exec(x, pc->bytes, *i, act_add, &frame);
    }
    ps_fwd(x, p->dst_node);
}

static const struct ps_dataplane pc_dataplane = {"ps_count", pc_ingress, NULL};

int ps_count_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"hosts", required_argument, 0, 'n'},
        {"for", required_argument, 0, 'f'},
        {0, 0, 0, 0},
    };
    uint64_t hosts = 2, for_ns = 1000000;
    int o;
    optind = 1;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (o == 'n' && rc_conn_parse_uint(optarg, 2, MAX_HOSTS, &hosts))
            continue;
        if (o == 'f' && rc_conn_parse_time(optarg, &for_ns))
            continue;
        fprintf(stderr, "usage: " PROG " [--hosts=N] [--for=TIME]\n");
        return 2;
    }
    struct pswitch *ps = ps_current();
    if (!ps) {
        fprintf(stderr, PROG ": must run on the programmable switch's CPU (host sw0)\n");
        return 1;
    }
    uint32_t n = (uint32_t)hosts, pairs = n * n;
    struct pc_prog pc = {
        .pairs = ps_table_declare(ps, "pairs", PS_INGRESS, 0, pairs, sizeof(uint32_t)),
        .pkts = ps_reg_declare(ps, "pkts", PS_INGRESS, 1, pairs, 64),
        .bytes = ps_reg_declare(ps, "bytes", PS_INGRESS, 2, pairs, 64),
    };
    if (!pc.pairs || !pc.pkts || !pc.bytes || ps_load(ps, &pc_dataplane, &pc)) {
        fprintf(stderr, PROG ": %s\n", ps_last_error(ps));
        return 1;
    }
    for (uint32_t s = 0; s < n; s++)
        for (uint32_t d = 0; d < n; d++) {
            uint32_t i = s * n + d;
            if (s != d && ps_table_add(pc.pairs, (uint64_t)s << 32 | d, &i)) {
                fprintf(stderr, PROG ": table full\n");
                return 1;
            }
        }
    /* the control plane sleeps while the data plane counts */
    uint64_t until = host_now_ns() + for_ns;
    while (host_now_ns() < until)
        host_compute(until - host_now_ns());
    for (uint32_t s = 0; s < n; s++)
        for (uint32_t d = 0; d < n; d++) {
            uint64_t k = ps_reg_get(pc.pkts, s * n + d);
            if (!k)
                continue;
            struct host_kv kv[] = {{"src", s},
                                   {"dst", d},
                                   {"pkts", (double)k},
                                   {"bytes", (double)ps_reg_get(pc.bytes, s * n + d)}};
            host_report("ps_count", kv, 4);
        }
    return 0;
}
