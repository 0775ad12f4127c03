/* `rnicsim table2`: Table 2 of Taranov et al., "Efficient RDMA
 * Communication Protocols", measured in the simulator for every channel of
 * chan_registry[] (protocols/taranov), next to the paper's values
 * (docs/taranov-table2.md, docs/cli.md).
 *
 *   rnicsim table2 [--channels=a,b,...] [--quick] [--messages N] [--runs N]
 *                  [--markdown] [--json FILE] [--csv FILE] [--update FILE.md]
 *                  [--no-order] [--no-memory] [--verbose]
 *
 * Per channel:
 *   1. measure: two hosts (cx5-100g, star), the driver taranov_t2
 *      --mode=measure (protocols/taranov/table2_driver.c) sends M messages
 *      one at a time with trace marks; from the trace (table2_count.h):
 *      half round trips in [t2-send i, t2-recv i], the sender's posted WRs
 *      in [t2-send i, t2-end i], the receiver's in [t2-send i, t2-recv i]
 *      (delivery) and (t2-recv i, t2-done i] (freeing: acknowledgements,
 *      re-posted receives).  Messages cycle through sizes 64 B .. 16 KiB,
 *      and the driver reports how many arrived with exactly their length
 *      (the "variable size" check).
 *   1b. capacity: 64 messages of 64 B to a receiver set up for 64
 *      messages of 4 KiB (slots) or a ring of 8 x 4 KiB; the receiver
 *      holds them without freeing; variable size = its registered bytes per
 *      held message below half a 4 KiB message.
 *   2. memory: N = 1, 2, 4, 8 (--quick: 1, 4) peers, --mode=memory: the
 *      peak registered MR bytes (nic counters mr_bytes_peak) of the hub
 *      host, the receiver of N:1 and the sender of 1:N; O(N) if each
 *      further peer adds at least 4 KiB (a message buffer), else O(1).
 *   3. transport requirements: `rnicsim check-order` (run as a child
 *      process of this executable) on the driver's --mode=check, for IB
 *      RC, IB RC with relaxed DMA ordering, IB with adaptive routing, EFA
 *      SRD and 1RMA (the last two on a 2x4 leaf-spine, which reorders
 *      their messages; with messages of at most 2 KiB, as both carry
 *      single-packet operations only): pass, FAIL (seed), not runnable
 *      (the transport refused a work request: an opcode or size it lacks),
 *      or error (deadlock / time limit / program error).
 *
 * Exit status: 0 the table was produced; 2 bad command line; 5 a run
 * could not be set up or an output not written.  A channel whose
 * measurement fails is shown with the reason in its cells, not as an
 * exit status. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "protocols/taranov/channel.h"
#include "sim/config/json.h"
#include "sim/trace.h"
#include "tools/rnicsim/rnicsim.h"
#include "tools/rnicsim/table2_count.h"

#define T2_EXIT_USAGE 2
#define T2_EXIT_INTERNAL 5

/* Defaults (estimates chosen for a run of a few minutes at most): 8
 * measured messages cycle twice through the 4 sizes; 3 checker runs of 500
 * messages each per transport; --quick halves them. */
#define T2_MEASURE_MSGS 8
#define T2_CHECK_MSGS 500
#define T2_CHECK_RUNS 3
#define T2_MEMORY_MSGS 4
#define T2_TRACE_CAPACITY (1u << 20) /* records; ~56 MiB, a measure run uses < 100 k */
#define T2_MAX_PEERS_STEPS 4
#define T2_MEASURE_SIZES "64,1024,4096,16384"
#define T2_CHECK_SIZES "64,4096,16384"
#define T2_MEMORY_SIZES "64,4096"
#define T2_SMALL_SIZES "64,2048" /* EFA, 1RMA: single-packet operations only */

/* ---------------------------------------------------------------- the paper's Table 2 */

/* One row as printed in the paper ("a": depends on the second channel,
 * "b": requires appending data, "c": pulling a bell can take several
 * requests, "d": prefetching may copy). */
struct t2_paper {
    const char *name; /* chan_ops.name */
    const char *hrt, *req_send, *req_recv;
    const char *blocking, *zc_send, *zc_recv, *variable;
    const char *mem_1n, *mem_n1;
    const char *requests, *in_order;
};

static const struct t2_paper t2_paper_rows[] = {
    {"send-normal", "1", "1", "0", "yes", "yes", "no", "no", "O(1)", "O(N)", "Send", "No"},
    {"send-shared", "1", "1", "0", "yes", "yes", "no", "no", "O(1)", "O(1)", "Send", "No"},
    {"send-bufferless", "1", "1", "0", "yes", "N/A", "N/A", "N/A", "O(1)", "O(1)", "Send", "No"},
    {"write-slot-detached", "1", "2", "0", "yes/no^a", "yes", "yes", "no", "O(1)", "O(N)", "Write",
     "Messages"},
    {"write-slot-inlined", "1", "1", "0", "no", "yes^b", "yes^b", "no", "O(1)", "O(N)", "Write",
     "Bytes"},
    {"write-slot-imm", "1", "1", "0", "yes", "yes", "yes", "no", "O(1)", "O(N)", "Write", "No"},
    {"write-slot-reserve", "3", ">=2^a", "1", "yes/no^a", "yes", "yes", "no", "O(1)", "O(1)",
     "Write", "No/Yes^a"},
    {"ring-detached", "1", "2", "0", "no", "yes^b", "no", "yes", "O(1)", "O(N)", "Write",
     "Messages"},
    {"ring-imm", "1", "1", "0", "yes", "yes", "no", "yes", "O(1)", "O(N)", "Write", "No"},
    {"ring-inlined-zero", "1", "1", "0", "no", "yes^b", "no", "yes", "O(1)", "O(N)", "Write",
     "Bytes"},
    {"ring-inlined-nozero", "1", "1", "0", "no", "yes^b", "no", "yes", "O(1)", "O(N)", "Write",
     "Messages, Bytes"},
    {"shared-ring-imm", "3", ">=2", "0", "yes", "yes", "no", "yes", "O(1)", "O(1)", "Write, Atomic",
     "No"},
    {"shared-ring-inlined", "3", ">=2", "0", "no", "yes^b", "no", "yes", "O(1)", "O(1)",
     "Write, Atomic", "Bytes"},
    {"read-slot-detached", ">=4^c", "0", ">=2^c", "no", "yes", "yes", "yes", "O(1)", "O(1)", "Read",
     "No"},
    {"read-slot-inlined", ">=2^c", "0", ">=1^c", "no", "yes", "yes", "no", "O(1)", "O(1)", "Read",
     "No"},
    {"read-slot-notify", "3", "1", "1", "yes/no^a", "yes", "yes", "yes", "O(1)", "O(1)", "Read^a",
     "No"},
    {"read-slot-indirect", "2", "1^a", "1^a", "yes/no^a", "yes", "yes", "no", "O(1)", "O(1)",
     "Write^a", "No/Yes^a"},
    {"read-ring-detached", ">=4^c", "0", ">=2^c", "no", "no", "yes^d", "yes", "O(1)", "O(1)",
     "Read", "No"},
    {"read-ring-inlined", ">=4^c", "0", ">=2^c", "no", "no", "yes^d", "yes", "O(1)", "O(1)", "Read",
     "No"},
    {"read-ring-notify", "3", "1", "1", "yes/no^a", "no", "yes", "yes", "O(1)", "O(1)", "Read^a",
     "No"},
};

static const struct t2_paper *t2_paper_find(const char *name)
{
    for (size_t i = 0; i < sizeof(t2_paper_rows) / sizeof(t2_paper_rows[0]); i++)
        if (strcmp(t2_paper_rows[i].name, name) == 0)
            return &t2_paper_rows[i];
    return NULL;
}

/* ---------------------------------------------------------------- transports */

struct t2_transport {
    const char *key;   /* JSON / CSV name */
    const char *title; /* table header */
    const char *sets[6];
    bool small; /* single-packet operations only: T2_SMALL_SIZES */
};

/* The knobs of docs/ordering.md ("Verdicts per transport"). */
static const struct t2_transport t2_transports[] = {
    {"ib_rc", "IB RC", {NULL}, false},
    {"ib_relaxed", "IB relaxed DMA", {"hardware.nic.dma_ordering=relaxed", NULL}, false},
    {"ib_ar", "IB adaptive routing", {"hardware.nic.transport=ib-ar", NULL}, false},
    {"efa",
     "EFA SRD",
     {"hardware.nic.transport=efa-srd", "topology.kind=leaf-spine", "topology.leaves=2",
      "topology.spines=4", "topology.hosts_per_leaf=1", NULL},
     true},
    {"1rma",
     "1RMA",
     {"hardware.nic.transport=1rma", "topology.kind=leaf-spine", "topology.leaves=2",
      "topology.spines=4", "topology.hosts_per_leaf=1", NULL},
     true},
};
#define T2_NTRANSPORTS (sizeof(t2_transports) / sizeof(t2_transports[0]))

/* ---------------------------------------------------------------- results */

enum t2_verdict { T2_V_NONE, T2_V_PASS, T2_V_FAIL, T2_V_NOT_RUNNABLE, T2_V_ERROR };
static const char *const t2_verdict_keys[] = {"", "pass", "fail", "not-runnable", "error"};

struct t2_stat {
    uint32_t min, max;
    double sum;
    uint32_t n;
};

static void t2_stat_add(struct t2_stat *s, uint32_t v)
{
    if (!s->n || v < s->min)
        s->min = v;
    if (!s->n || v > s->max)
        s->max = v;
    s->sum += v;
    s->n++;
}

static double t2_stat_mean(const struct t2_stat *s)
{
    return s->n ? s->sum / s->n : 0;
}

struct t2_row {
    const struct chan_ops *ops;
    const struct t2_paper *paper;
    /* measure */
    bool measured;
    char why[160];
    struct t2_stat hrt, snd_net, snd_recv, rcv_net, rcv_ack, rcv_recv, free_net, free_recv;
    uint64_t checked, lengths_exact;
    /* variable size: capacity run */
    bool cap_ok;
    uint64_t cap_held, cap_bytes;
    /* memory */
    uint32_t peers[T2_MAX_PEERS_STEPS];
    size_t npeers;
    uint64_t mem_in[T2_MAX_PEERS_STEPS], mem_out[T2_MAX_PEERS_STEPS];
    bool mem_in_ok, mem_out_ok;
    char mem_why[160];
    /* ordering */
    enum t2_verdict order[T2_NTRANSPORTS];
    uint64_t order_seed[T2_NTRANSPORTS];
};

struct t2_opts {
    const char *channels;
    bool quick, markdown, no_order, no_memory, verbose;
    const char *json, *csv, *update;
    uint32_t messages, check_msgs, runs;
    const char *exe;
};

/* ---------------------------------------------------------------- scenarios */

/* A star of `hosts` hosts with the cx5-100g profile and the programs in
 * `progs` (YAML sequence items, each "  - host: ...\n ..."). */
static char *t2_scenario(const char *name, uint32_t hosts, const char *progs)
{
    return xasprintf("name: %s\n"
                     "description: \"rnicsim table2 (generated)\"\n"
                     "seed: 1\n"
                     "stop_time: 100ms\n"
                     "profile: cx5-100g\n"
                     "topology:\n"
                     "  kind: star\n"
                     "  hosts: %u\n"
                     "  link: {rate: 100Gbps, delay: 10ns}\n"
                     "  switch: {latency: 300ns, buffer: 1MiB}\n"
                     "programs:\n%s",
                     name, hosts, progs);
}

static char *t2_prog(char *acc, uint32_t host, const char *args)
{
    char *item = xasprintf("%s  - host: h%u\n    program: taranov_t2\n    args: [%s]\n",
                           acc ? acc : "", host, args);
    free(acc);
    return item;
}

/* Run `yaml` in this process with the trace on; NULL with `why`. */
static struct run *t2_run(const char *yaml, struct scenario **scn, size_t trace_cap, char *why,
                          size_t why_len)
{
    struct scenario_opts so = {0};
    struct cfg_error err = {{0}};
    *scn = scenario_load("<table2>", yaml, &so, &err);
    if (!*scn) {
        snprintf(why, why_len, "%.150s", err.msg);
        return NULL;
    }
    struct run_opts ro = {.trace_capacity = trace_cap, .stop_on_failure = true};
    struct run *r = run_scenario_opts(*scn, &ro, why, why_len);
    if (!r) {
        scenario_free(*scn);
        *scn = NULL;
    }
    return r;
}

static const struct report_table *t2_table(const struct run *r, const char *name)
{
    for (size_t i = 0; i < r->ntables; i++)
        if (strcmp(r->tables[i].name, name) == 0)
            return &r->tables[i];
    return NULL;
}

static double t2_row_value(const struct report_row *row, const char *key)
{
    for (size_t i = 0; i < row->n; i++)
        if (strcmp(row->keys[i], key) == 0)
            return row->values[i];
    return 0;
}

/* Why a run did not end well, into why. */
static bool t2_run_ok(const struct run *r, char *why, size_t why_len)
{
    if (r->result == RUN_DONE)
        return true;
    for (size_t i = 0; i < r->ninsts; i++)
        if (r->insts[i].finished && r->insts[i].exit_code != 0) {
            snprintf(why, why_len, "%s exited %d", r->insts[i].proc_name, r->insts[i].exit_code);
            return false;
        }
    snprintf(why, why_len, "run ended: %s", run_result_name(r->result));
    return false;
}

/* Message sizes for a channel: the bufferless channel sends one integer
 * (Table 2: variable size "N/A"), the others `dflt`. */
static const char *t2_sizes(const struct t2_row *row, const char *dflt)
{
    return row->paper && strcmp(row->paper->variable, "N/A") == 0 ? "4" : dflt;
}

/* ---------------------------------------------------------------- 1. measure */

static void t2_measure(const struct t2_opts *o, struct t2_row *row)
{
    const char *ch = row->ops->name;
    char *a_rx = xasprintf("--channel=%s, --role=receiver, --mode=measure, --messages=%u, "
                           "\"--sizes=%s\", --name=t2m",
                           ch, o->messages, t2_sizes(row, T2_MEASURE_SIZES));
    char *a_tx = xasprintf("--channel=%s, --role=sender, --mode=measure, --messages=%u, "
                           "\"--sizes=%s\", --name=t2m",
                           ch, o->messages, t2_sizes(row, T2_MEASURE_SIZES));
    char *progs = t2_prog(NULL, 1, a_rx);
    progs = t2_prog(progs, 0, a_tx);
    char *yaml = t2_scenario("table2-measure", 2, progs);
    free(a_rx);
    free(a_tx);
    free(progs);
    struct scenario *s = NULL;
    struct run *r = t2_run(yaml, &s, T2_TRACE_CAPACITY, row->why, sizeof(row->why));
    free(yaml);
    if (!r)
        return;
    struct sim *sim = r->world->sim;
    if (t2_run_ok(r, row->why, sizeof(row->why))) {
        size_t n = sim_trace_count(sim);
        if (sim_trace_total(sim) > n) {
            snprintf(row->why, sizeof(row->why), "trace overflow (%" PRIu64 " records)",
                     sim_trace_total(sim));
        } else {
            struct trace_rec *recs = xcalloc_or_die(n ? n : 1, sizeof(*recs));
            for (size_t i = 0; i < n; i++)
                recs[i] = *sim_trace_get(sim, i);
            row->measured = true;
            for (uint64_t i = 1; i <= o->messages; i++) {
                size_t is = t2_find_mark(recs, n, 0, "t2-send", i);
                size_t ie = t2_find_mark(recs, n, 0, "t2-end", i);
                size_t ir = t2_find_mark(recs, n, 1, "t2-recv", i);
                size_t id = t2_find_mark(recs, n, 1, "t2-done", i);
                if (is == SIZE_MAX || ie == SIZE_MAX || ir == SIZE_MAX || id == SIZE_MAX) {
                    snprintf(row->why, sizeof(row->why), "marks of message %" PRIu64 " missing", i);
                    row->measured = false;
                    break;
                }
                uint32_t hrt = t2_count_hrt(recs, n, 0, 1, 1, recs[is].t_ps, recs[ir].t_ps);
                t2_stat_add(&row->hrt, hrt);
                if (o->verbose) { /* the window's packets: what the HRT count saw */
                    fprintf(stderr, "table2: %s message %" PRIu64 ": %u HRT:", row->ops->name, i,
                            hrt);
                    for (size_t k = is; k <= ir; k++)
                        if (recs[k].kind == TRACE_PKT_TX && recs[k].node <= 1)
                            fprintf(stderr, " h%u:0x%02x/%u", recs[k].node, recs[k].opcode,
                                    recs[k].len);
                        else if (recs[k].kind == TRACE_POST)
                            fprintf(stderr, " h%u:post(%u)", recs[k].node, recs[k].opcode);
                    fputc('\n', stderr);
                }
                struct t2_posts ps = t2_count_posts(recs, n, 0, is, ie);
                struct t2_posts pr = t2_count_posts(recs, n, 1, is, ir);
                struct t2_posts pf = t2_count_posts(recs, n, 1, ir, id);
                t2_stat_add(&row->snd_net, ps.net);
                t2_stat_add(&row->snd_recv, ps.recv);
                /* the receiver's plain WRITEs are acknowledgements
                 * (table2_count.h), shown with those of freeing */
                t2_stat_add(&row->rcv_net, pr.net - pr.write);
                t2_stat_add(&row->rcv_ack, pr.write);
                t2_stat_add(&row->rcv_recv, pr.recv);
                t2_stat_add(&row->free_net, pf.net);
                t2_stat_add(&row->free_recv, pf.recv);
            }
            free(recs);
            const struct report_table *chk = t2_table(r, "order_check");
            if (chk && chk->nrows) {
                row->checked = (uint64_t)t2_row_value(&chk->rows[0], "messages_checked");
                row->lengths_exact = (uint64_t)t2_row_value(&chk->rows[0], "lengths_exact");
            }
        }
    }
    run_free(r);
    scenario_free(s);
}

/* ---------------------------------------------------------------- 1b. variable size */

/* The capacity run (taranov_t2 --mode=capacity): 64 messages of 64 B into
 * a receiver with 64 slots / receive buffers of 4 KiB, or a ring of 8 x 4
 * KiB; the receiver holds as many as arrive without freeing.  Receive
 * memory per held message = the receiver's peak registered bytes / held. */
#define T2_CAP_MSGS 64
#define T2_CAP_MAX_BYTES 4096
static void t2_capacity(struct t2_row *row)
{
    char *a_rx =
        xasprintf("--channel=%s, --role=receiver, --mode=capacity, --messages=%u, "
                  "\"--sizes=%s\", --max-msg=%u, --slots=%u, --ring-slots=8, --name=t2cap",
                  row->ops->name, T2_CAP_MSGS, t2_sizes(row, "64"), T2_CAP_MAX_BYTES, T2_CAP_MSGS);
    char *a_tx =
        xasprintf("--channel=%s, --role=sender, --mode=capacity, --messages=%u, "
                  "\"--sizes=%s\", --max-msg=%u, --slots=%u, --ring-slots=8, --name=t2cap",
                  row->ops->name, T2_CAP_MSGS, t2_sizes(row, "64"), T2_CAP_MAX_BYTES, T2_CAP_MSGS);
    char *progs = t2_prog(NULL, 1, a_rx);
    progs = t2_prog(progs, 0, a_tx);
    char *yaml = t2_scenario("table2-capacity", 2, progs);
    free(a_rx);
    free(a_tx);
    free(progs);
    struct scenario *s = NULL;
    char why[160];
    struct run *r = t2_run(yaml, &s, 0, why, sizeof(why));
    free(yaml);
    if (!r) {
        fprintf(stderr, "table2: %s: capacity: %s\n", row->ops->name, why);
        return;
    }
    const struct report_table *cap = t2_table(r, "capacity");
    if (t2_run_ok(r, why, sizeof(why)) && cap && cap->nrows) {
        row->cap_held = (uint64_t)t2_row_value(&cap->rows[0], "held");
        row->cap_bytes = nic_get_counters(r->world->nics[1])->mr_bytes_peak;
        row->cap_ok = row->cap_held > 0;
    } else {
        fprintf(stderr, "table2: %s: capacity run: %s\n", row->ops->name,
                cap ? why : "no capacity reported");
    }
    run_free(r);
    scenario_free(s);
}

/* Variable size, measured: a small message costs less than half a
 * maximal one of receive memory. */
static const char *t2_cap_class(const struct t2_row *r)
{
    if (!r->cap_ok)
        return "?";
    return r->cap_bytes / r->cap_held < T2_CAP_MAX_BYTES / 2 ? "yes" : "no";
}

/* ---------------------------------------------------------------- 2. memory */

/* Peak registered bytes of the hub (host 0) with `peers` peers. */
static int t2_memory_one(const struct t2_row *row, bool fan_out, uint32_t peers, uint64_t *bytes,
                         char *why, size_t why_len)
{
    const struct chan_ops *ops = row->ops;
    char *progs = NULL;
    for (uint32_t i = 0; i <= peers; i++) {
        bool hub = i == 0;
        bool sender = fan_out ? hub : !hub;
        char *args =
            xasprintf("--channel=%s, --role=%s, --mode=memory, --fanout=%s, "
                      "--peers=%u, --id=%u, --messages=%u, \"--sizes=%s\", "
                      "--name=t2mem",
                      ops->name, sender ? "sender" : "receiver", fan_out ? "out" : "in", peers,
                      hub ? 0 : i - 1, T2_MEMORY_MSGS, t2_sizes(row, T2_MEMORY_SIZES));
        progs = t2_prog(progs, i, args);
        free(args);
    }
    char *yaml = t2_scenario("table2-memory", peers + 1, progs);
    free(progs);
    struct scenario *s = NULL;
    struct run *r = t2_run(yaml, &s, 0, why, why_len);
    free(yaml);
    if (!r)
        return -1;
    int rc = 0;
    if (!t2_run_ok(r, why, why_len))
        rc = -1;
    else
        *bytes = nic_get_counters(r->world->nics[0])->mr_bytes_peak;
    run_free(r);
    scenario_free(s);
    return rc;
}

static void t2_memory(const struct t2_opts *o, struct t2_row *row)
{
    static const uint32_t full[] = {1, 2, 4, 8}, quick[] = {1, 4};
    const uint32_t *ns = o->quick ? quick : full;
    row->npeers = o->quick ? 2 : 4;
    memcpy(row->peers, ns, row->npeers * sizeof(uint32_t));
    row->mem_in_ok = row->mem_out_ok = true;
    for (size_t k = 0; k < row->npeers; k++) {
        char why[160];
        if (row->mem_in_ok && t2_memory_one(row, false, ns[k], &row->mem_in[k], why, sizeof(why))) {
            row->mem_in_ok = false;
            snprintf(row->mem_why, sizeof(row->mem_why), "N:1, N=%u: %.120s", ns[k], why);
        }
        if (row->mem_out_ok &&
            t2_memory_one(row, true, ns[k], &row->mem_out[k], why, sizeof(why))) {
            row->mem_out_ok = false;
            snprintf(row->mem_why, sizeof(row->mem_why), "1:N, N=%u: %.120s", ns[k], why);
        }
    }
}

/* O(N) if each further peer adds at least one message buffer's worth of
 * registered memory (the memory runs' largest message, 4 KiB), else O(1):
 * per-peer bookkeeping (acknowledgement words, a QP's small buffers) is
 * not what the paper's column is about. */
#define T2_MEM_MSG_BYTES 4096
static const char *t2_mem_class(const uint32_t *peers, const uint64_t *b, size_t n, bool ok)
{
    if (!ok || n < 2 || peers[n - 1] <= peers[0])
        return "?";
    double per_peer = ((double)b[n - 1] - (double)b[0]) / (double)(peers[n - 1] - peers[0]);
    return per_peer >= T2_MEM_MSG_BYTES ? "O(N)" : "O(1)";
}

/* ---------------------------------------------------------------- 3. ordering */

static char *t2_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n + 4096 > cap) {
            cap = cap ? 2 * cap : 65536;
            buf = xrealloc_or_die(buf, cap);
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0)
            break;
    }
    fclose(f);
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* `rnicsim check-order` as a child process; the verdict from its exit
 * status, the seed of a violation from its JSON. */
static void t2_order_one(const struct t2_opts *o, const char *dir, struct t2_row *row, size_t t)
{
    const struct t2_transport *tr = &t2_transports[t];
    const char *sizes = t2_sizes(row, tr->small ? T2_SMALL_SIZES : T2_CHECK_SIZES);
    char *a_rx = xasprintf("--channel=%s, --role=receiver, --mode=check, --messages=%u, "
                           "\"--sizes=%s\", --name=t2c",
                           row->ops->name, o->check_msgs, sizes);
    char *a_tx = xasprintf("--channel=%s, --role=sender, --mode=check, --messages=%u, "
                           "\"--sizes=%s\", --name=t2c",
                           row->ops->name, o->check_msgs, sizes);
    char *progs = t2_prog(NULL, 1, a_rx);
    progs = t2_prog(progs, 0, a_tx);
    char *yaml = t2_scenario("table2-check", 2, progs);
    free(a_rx);
    free(a_tx);
    free(progs);
    char *file = xasprintf("%s/%s-%s.yaml", dir, row->ops->name, tr->key);
    char *json = xasprintf("%s/%s-%s.json", dir, row->ops->name, tr->key);
    FILE *f = fopen(file, "w");
    row->order[t] = T2_V_ERROR;
    if (!f || fputs(yaml, f) < 0 || fclose(f) != 0) {
        free(yaml);
        free(file);
        free(json);
        return;
    }
    free(yaml);
    char runs[24];
    snprintf(runs, sizeof(runs), "%u", o->runs);
    const char *argv[32];
    size_t k = 0;
    argv[k++] = o->exe;
    argv[k++] = "check-order";
    argv[k++] = file;
    argv[k++] = "--runs";
    argv[k++] = runs;
    argv[k++] = "-o";
    argv[k++] = json;
    for (size_t i = 0; tr->sets[i]; i++) {
        argv[k++] = "--set";
        argv[k++] = tr->sets[i];
    }
    argv[k] = NULL;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        if (!o->verbose) {
            FILE *null = freopen("/dev/null", "w", stdout);
            (void)null;
            null = freopen("/dev/null", "w", stderr);
            (void)null;
        }
        char *cargv[32];
        for (size_t i = 0; i <= k; i++)
            cargv[i] = argv[i] ? xstrdup_or_die(argv[i]) : NULL;
        execv(o->exe, cargv);
        _exit(127);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) < 0 || !WIFEXITED(st)) {
        free(file);
        free(json);
        return;
    }
    switch (WEXITSTATUS(st)) {
    case 0:
        row->order[t] = T2_V_PASS;
        break;
    case 1: {
        row->order[t] = T2_V_FAIL;
        size_t len = 0;
        char *text = t2_read_file(json, &len);
        char why[160];
        struct jv *v = text ? jv_parse(text, len, why, sizeof(why)) : NULL;
        const struct jv *seed = jv_get(jv_get(v, "violation"), "seed");
        if (seed && seed->kind == JV_NUMBER)
            row->order_seed[t] = strtoull(seed->text, NULL, 10);
        jv_free(v);
        free(text);
        break;
    }
    case 4:
        row->order[t] = T2_V_NOT_RUNNABLE;
        break;
    default:
        row->order[t] = T2_V_ERROR;
        break;
    }
    free(file);
    free(json);
}

/* ---------------------------------------------------------------- output */

static const char *t2_yes(bool b)
{
    return b ? "yes" : "no";
}

static const char *t2_order_need(enum chan_order_need n)
{
    return n == CHAN_NEEDS_BYTES ? "Bytes" : n == CHAN_NEEDS_MESSAGES ? "Messages" : "No";
}

/* Opcode names of features.opcodes. */
static void t2_opcodes(uint32_t bits, char *buf, size_t len)
{
    static const char *const names[] = {"WRITE", "WRITE_IMM", "SEND", "SEND_IMM",
                                        "READ",  "CAS",       "FAA"};
    buf[0] = '\0';
    size_t at = 0;
    for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (bits & (1u << i))
            at += (size_t)snprintf(buf + at, at < len ? len - at : 0, "%s%s", at ? ", " : "",
                                   names[i]);
    if (!at)
        snprintf(buf, len, "-");
}

/* "1", "1-3 (mean 1.5)" */
static void t2_fmt_stat(const struct t2_stat *s, char *buf, size_t len)
{
    if (!s->n)
        snprintf(buf, len, "-");
    else if (s->min == s->max)
        snprintf(buf, len, "%u", s->min);
    else
        snprintf(buf, len, "%u-%u (mean %.2f)", s->min, s->max, t2_stat_mean(s));
}

static void t2_fmt_verdict(const struct t2_row *r, size_t t, char *buf, size_t len)
{
    switch (r->order[t]) {
    case T2_V_PASS:
        snprintf(buf, len, "pass");
        break;
    case T2_V_FAIL:
        snprintf(buf, len, "**FAIL** (seed %" PRIu64 ")", r->order_seed[t]);
        break;
    case T2_V_NOT_RUNNABLE:
        snprintf(buf, len, "not runnable");
        break;
    case T2_V_ERROR:
        snprintf(buf, len, "error");
        break;
    case T2_V_NONE:
        snprintf(buf, len, "-");
        break;
    }
}

static void t2_fmt_mem(const struct t2_row *r, bool in, char *buf, size_t len)
{
    const uint64_t *b = in ? r->mem_in : r->mem_out;
    bool ok = in ? r->mem_in_ok : r->mem_out_ok;
    if (!r->npeers) {
        snprintf(buf, len, "-");
        return;
    }
    if (!ok) {
        snprintf(buf, len, "error");
        return;
    }
    size_t at = (size_t)snprintf(buf, len, "%s (", t2_mem_class(r->peers, b, r->npeers, ok));
    for (size_t k = 0; k < r->npeers && at < len; k++)
        at += (size_t)snprintf(buf + at, len - at, "%s%.0f", k ? "/" : "", (double)b[k] / 1024.0);
    if (at < len)
        snprintf(buf + at, len - at, " KiB)");
}

static void t2_markdown(FILE *out, const struct t2_opts *o, const struct t2_row *rows, size_t n)
{
    fprintf(out,
            "Generated by `rnicsim table2%s` (%u measured messages per channel; checker: %u "
            "runs of %u messages per transport).  Cells: paper / measured.\n\n",
            o->quick ? " --quick" : "", o->messages, o->runs, o->check_msgs);
    fprintf(out, "| Channel | HRT | Req. Send | Req. Recv | Recv WRs (posted receives, "
                 "free-time requests) | Blocking recv | Zero-copy Send | Zero-copy Recv | "
                 "Variable size (paper / declared / measured: receive memory per small message) | "
                 "Memory 1:N (KiB at N=");
    const struct t2_row *any = n ? &rows[0] : NULL;
    for (size_t k = 0; any && k < any->npeers; k++)
        fprintf(out, "%s%u", k ? "/" : "", any->peers[k]);
    fprintf(out, ") | Memory N:1 | Requests (paper / posted) | In-order (paper / declared)");
    for (size_t t = 0; t < T2_NTRANSPORTS; t++)
        fprintf(out, " | %s", t2_transports[t].title);
    fprintf(out, " |\n|---|---|---|---|---|---|---|---|---|---|---|---|---");
    for (size_t t = 0; t < T2_NTRANSPORTS; t++)
        fprintf(out, "|---");
    fprintf(out, "|\n");
    for (size_t i = 0; i < n; i++) {
        const struct t2_row *r = &rows[i];
        const struct t2_paper *p = r->paper;
        const struct chan_features *f = &r->ops->features;
        char hrt[64], sn[64], rn[64], rr[64], fr[160], m1[96], m2[96], ops[96];
        if (r->measured) {
            t2_fmt_stat(&r->hrt, hrt, sizeof(hrt));
            t2_fmt_stat(&r->snd_net, sn, sizeof(sn));
            t2_fmt_stat(&r->rcv_net, rn, sizeof(rn));
            t2_fmt_stat(&r->rcv_recv, rr, sizeof(rr));
            char a[32], b[32], c[32];
            t2_fmt_stat(&r->free_recv, a, sizeof(a));
            t2_fmt_stat(&r->free_net, b, sizeof(b));
            t2_fmt_stat(&r->rcv_ack, c, sizeof(c));
            snprintf(fr, sizeof(fr), "%s recv + %s send; late acks %s", a, b, c);
        } else {
            snprintf(hrt, sizeof(hrt), "error: %.40s", r->why);
            snprintf(sn, sizeof(sn), "-");
            snprintf(rn, sizeof(rn), "-");
            snprintf(rr, sizeof(rr), "-");
            snprintf(fr, sizeof(fr), "-");
        }
        t2_fmt_mem(r, false, m1, sizeof(m1));
        t2_fmt_mem(r, true, m2, sizeof(m2));
        t2_opcodes(f->opcodes, ops, sizeof(ops));
        char var[96];
        if (r->cap_ok)
            snprintf(var, sizeof(var), "%s (%.1f KiB per 64 B message; lengths %s)",
                     t2_cap_class(r), (double)r->cap_bytes / (double)r->cap_held / 1024.0,
                     r->checked && r->lengths_exact == r->checked ? "kept" : "not kept");
        else if (r->measured && r->checked)
            snprintf(var, sizeof(var), "- (lengths %s)",
                     r->lengths_exact == r->checked ? "kept" : "not kept");
        else
            snprintf(var, sizeof(var), "-");
        fprintf(out,
                "| %s (%s) | %s / %s | %s / %s | %s / %s | %s; at free: %s | %s / %s | %s / %s "
                "| %s / %s | %s / %s / %s | %s / %s | %s / %s | %s / %s | %s / %s",
                r->ops->name, r->ops->paper_section, p ? p->hrt : "?", hrt, p ? p->req_send : "?",
                sn, p ? p->req_recv : "?", rn, rr, fr, p ? p->blocking : "?",
                t2_yes(f->blocking_recv), p ? p->zc_send : "?", t2_yes(f->zero_copy_send),
                p ? p->zc_recv : "?", t2_yes(f->zero_copy_recv), p ? p->variable : "?",
                t2_yes(f->variable_size), var, p ? p->mem_1n : "?", m1, p ? p->mem_n1 : "?", m2,
                p ? p->requests : "?", ops, p ? p->in_order : "?", t2_order_need(f->in_order));
        for (size_t t = 0; t < T2_NTRANSPORTS; t++) {
            char v[64];
            t2_fmt_verdict(r, t, v, sizeof(v));
            fprintf(out, " | %s", v);
        }
        fprintf(out, " |\n");
    }
}

static void t2_json_stat(struct json_writer *w, const char *key, const struct t2_stat *s)
{
    json_kv_object_begin(w, key);
    json_kv_u64(w, "min", s->min);
    json_kv_u64(w, "max", s->max);
    json_kv_double(w, "mean", t2_stat_mean(s));
    json_object_end(w);
}

static int t2_write_json(const char *path, const struct t2_opts *o, const struct t2_row *rows,
                         size_t n)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "rnicsim table2: cannot write '%s': %s\n", path, strerror(errno));
        return -1;
    }
    struct json_writer *w = json_new_file(f);
    json_object_begin(w);
    json_kv_str(w, "rnicsim", RNICSIM_VERSION);
    json_kv_str(w, "command", "table2");
    json_kv_bool(w, "quick", o->quick);
    json_kv_u64(w, "messages", o->messages);
    json_kv_u64(w, "check_runs", o->runs);
    json_kv_u64(w, "check_messages", o->check_msgs);
    json_kv_array_begin(w, "channels");
    for (size_t i = 0; i < n; i++) {
        const struct t2_row *r = &rows[i];
        const struct chan_features *ft = &r->ops->features;
        json_object_begin(w);
        json_kv_str(w, "name", r->ops->name);
        json_kv_str(w, "family", r->ops->family);
        json_kv_str(w, "paper_section", r->ops->paper_section);
        if (r->paper) {
            json_kv_object_begin(w, "paper");
            json_kv_str(w, "hrt", r->paper->hrt);
            json_kv_str(w, "requests_send", r->paper->req_send);
            json_kv_str(w, "requests_recv", r->paper->req_recv);
            json_kv_str(w, "blocking_recv", r->paper->blocking);
            json_kv_str(w, "zero_copy_send", r->paper->zc_send);
            json_kv_str(w, "zero_copy_recv", r->paper->zc_recv);
            json_kv_str(w, "variable_size", r->paper->variable);
            json_kv_str(w, "memory_1_to_n", r->paper->mem_1n);
            json_kv_str(w, "memory_n_to_1", r->paper->mem_n1);
            json_kv_str(w, "requests", r->paper->requests);
            json_kv_str(w, "in_order", r->paper->in_order);
            json_object_end(w);
        }
        json_kv_object_begin(w, "declared");
        json_kv_bool(w, "blocking_recv", ft->blocking_recv);
        json_kv_bool(w, "zero_copy_send", ft->zero_copy_send);
        json_kv_bool(w, "zero_copy_recv", ft->zero_copy_recv);
        json_kv_bool(w, "variable_size", ft->variable_size);
        json_kv_str(w, "in_order", t2_order_need(ft->in_order));
        json_kv_u64(w, "opcodes", ft->opcodes);
        json_object_end(w);
        json_kv_object_begin(w, "measured");
        json_kv_bool(w, "ok", r->measured);
        json_kv_str(w, "error", r->measured ? "" : r->why);
        t2_json_stat(w, "hrt", &r->hrt);
        t2_json_stat(w, "requests_send", &r->snd_net);
        t2_json_stat(w, "receives_posted_send", &r->snd_recv);
        t2_json_stat(w, "requests_recv", &r->rcv_net);
        t2_json_stat(w, "receives_posted_recv", &r->rcv_recv);
        t2_json_stat(w, "acks_recv_late", &r->rcv_ack);
        t2_json_stat(w, "requests_recv_free", &r->free_net);
        t2_json_stat(w, "receives_posted_recv_free", &r->free_recv);
        json_kv_u64(w, "messages_checked", r->checked);
        json_kv_u64(w, "lengths_exact", r->lengths_exact);
        json_kv_str(w, "variable_size", t2_cap_class(r));
        json_kv_u64(w, "capacity_held", r->cap_held);
        json_kv_u64(w, "capacity_receiver_bytes", r->cap_bytes);
        json_kv_array_begin(w, "peers");
        for (size_t k = 0; k < r->npeers; k++)
            json_u64(w, r->peers[k]);
        json_array_end(w);
        json_kv_array_begin(w, "memory_1_to_n_bytes");
        for (size_t k = 0; r->mem_out_ok && k < r->npeers; k++)
            json_u64(w, r->mem_out[k]);
        json_array_end(w);
        json_kv_array_begin(w, "memory_n_to_1_bytes");
        for (size_t k = 0; r->mem_in_ok && k < r->npeers; k++)
            json_u64(w, r->mem_in[k]);
        json_array_end(w);
        json_kv_str(w, "memory_1_to_n",
                    t2_mem_class(r->peers, r->mem_out, r->npeers, r->mem_out_ok));
        json_kv_str(w, "memory_n_to_1", t2_mem_class(r->peers, r->mem_in, r->npeers, r->mem_in_ok));
        json_kv_str(w, "memory_error", r->mem_why);
        json_object_end(w);
        json_kv_object_begin(w, "transports");
        for (size_t t = 0; t < T2_NTRANSPORTS; t++) {
            json_kv_object_begin(w, t2_transports[t].key);
            json_kv_str(w, "verdict", t2_verdict_keys[r->order[t]]);
            if (r->order[t] == T2_V_FAIL)
                json_kv_u64(w, "seed", r->order_seed[t]);
            json_object_end(w);
        }
        json_object_end(w);
        json_object_end(w);
    }
    json_array_end(w);
    json_object_end(w);
    int rc = json_finish(w);
    if (fclose(f) != 0 || rc) {
        fprintf(stderr, "rnicsim table2: error writing '%s'\n", path);
        return -1;
    }
    return 0;
}

static int t2_write_csv(const char *path, const struct t2_row *rows, size_t n)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "rnicsim table2: cannot write '%s': %s\n", path, strerror(errno));
        return -1;
    }
    fprintf(f, "channel,paper_hrt,hrt_min,hrt_mean,paper_req_send,req_send_min,req_send_mean,"
               "paper_req_recv,req_recv_min,req_recv_mean,recv_posted_mean,free_send_mean,"
               "free_recv_mean,lengths_exact,messages,variable_size,mem_1n,mem_n1");
    for (size_t t = 0; t < T2_NTRANSPORTS; t++)
        fprintf(f, ",%s", t2_transports[t].key);
    fprintf(f, "\n");
    for (size_t i = 0; i < n; i++) {
        const struct t2_row *r = &rows[i];
        fprintf(f,
                "%s,\"%s\",%u,%.3f,\"%s\",%u,%.3f,\"%s\",%u,%.3f,%.3f,%.3f,%.3f,%" PRIu64
                ",%" PRIu64 ",%s,%s,%s",
                r->ops->name, r->paper ? r->paper->hrt : "", r->hrt.min, t2_stat_mean(&r->hrt),
                r->paper ? r->paper->req_send : "", r->snd_net.min, t2_stat_mean(&r->snd_net),
                r->paper ? r->paper->req_recv : "", r->rcv_net.min, t2_stat_mean(&r->rcv_net),
                t2_stat_mean(&r->rcv_recv), t2_stat_mean(&r->free_net), t2_stat_mean(&r->free_recv),
                r->lengths_exact, r->checked, t2_cap_class(r),
                t2_mem_class(r->peers, r->mem_out, r->npeers, r->mem_out_ok),
                t2_mem_class(r->peers, r->mem_in, r->npeers, r->mem_in_ok));
        for (size_t t = 0; t < T2_NTRANSPORTS; t++) {
            if (r->order[t] == T2_V_FAIL)
                fprintf(f, ",fail:seed=%" PRIu64, r->order_seed[t]);
            else
                fprintf(f, ",%s", t2_verdict_keys[r->order[t]]);
        }
        fprintf(f, "\n");
    }
    if (fclose(f) != 0) {
        fprintf(stderr, "rnicsim table2: error writing '%s'\n", path);
        return -1;
    }
    return 0;
}

#define T2_BEGIN "<!-- table2:begin (generated by rnicsim table2 --update; do not edit) -->"
#define T2_END "<!-- table2:end -->"

/* Replace the text between the markers of `path` with the table. */
static int t2_update(const char *path, const struct t2_opts *o, const struct t2_row *rows, size_t n)
{
    size_t len = 0;
    char *text = t2_read_file(path, &len);
    if (!text) {
        fprintf(stderr, "rnicsim table2: cannot read '%s': %s\n", path, strerror(errno));
        return -1;
    }
    char *b = strstr(text, T2_BEGIN), *e = b ? strstr(b, T2_END) : NULL;
    if (!b || !e) {
        fprintf(stderr, "rnicsim table2: '%s' has no '%s' ... '%s' markers\n", path, T2_BEGIN,
                T2_END);
        free(text);
        return -1;
    }
    char *tmp = xasprintf("%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    int rc = -1;
    if (f) {
        fwrite(text, 1, (size_t)(b - text) + strlen(T2_BEGIN), f);
        fputs("\n", f);
        t2_markdown(f, o, rows, n);
        fputs(e, f);
        rc = fclose(f) == 0 ? rename(tmp, path) : -1;
    }
    if (rc)
        fprintf(stderr, "rnicsim table2: cannot write '%s': %s\n", path, strerror(errno));
    free(tmp);
    free(text);
    return rc;
}

/* ---------------------------------------------------------------- command */

static void t2_usage(FILE *out)
{
    fprintf(out,
            "usage: rnicsim table2 [--channels=a,b,...] [--quick] [--messages N] [--runs N]\n"
            "                      [--markdown] [--json FILE] [--csv FILE] [--update FILE.md]\n"
            "                      [--no-order] [--no-memory] [--verbose]\n"
            "Measures Taranov et al.'s Table 2 for every channel (docs/taranov-table2.md).\n");
}

static bool t2_parse_u32(const char *v, uint32_t min, uint32_t *out)
{
    char *end;
    errno = 0;
    unsigned long x = strtoul(v, &end, 10);
    if (errno || end == v || *end || x < min || x > 100000)
        return false;
    *out = (uint32_t)x;
    return true;
}

/* Is `name` in the comma list `list`? */
static bool t2_listed(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        const char *c = strchr(p, ',');
        size_t l = c ? (size_t)(c - p) : strlen(p);
        if (l == n && strncmp(p, name, n) == 0)
            return true;
        p = c ? c + 1 : NULL;
    }
    return false;
}

int table2_main(int argc, char **argv)
{
    struct t2_opts o = {.exe = "/proc/self/exe"};
    bool set_msgs = false, set_runs = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *v = NULL;
        /* options with a value: "--opt=V" or "--opt V" */
        static const char *const valued[] = {"--channels", "--json",     "--csv",
                                             "--update",   "--messages", "--runs"};
        const char *opt = NULL;
        for (size_t k = 0; k < sizeof(valued) / sizeof(valued[0]); k++) {
            size_t l = strlen(valued[k]);
            if (strncmp(a, valued[k], l) == 0 && (a[l] == '=' || a[l] == '\0')) {
                opt = valued[k];
                if (a[l] == '=') {
                    v = a + l + 1;
                } else if (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0) {
                    v = argv[++i];
                } else {
                    /* "--json --no-order" would write a file named --no-order */
                    fprintf(stderr, "rnicsim table2: %s needs a value\n", a);
                    return T2_EXIT_USAGE;
                }
                if (strncmp(v, "--", 2) == 0) {
                    fprintf(stderr, "rnicsim table2: %s needs a value, not the option '%s'\n", opt,
                            v);
                    return T2_EXIT_USAGE;
                }
            }
        }
        if (!opt && !strcmp(a, "--quick")) {
            o.quick = true;
        } else if (!opt && !strcmp(a, "--markdown")) {
            o.markdown = true;
        } else if (!opt && !strcmp(a, "--no-order")) {
            o.no_order = true;
        } else if (!opt && !strcmp(a, "--no-memory")) {
            o.no_memory = true;
        } else if (!opt && (!strcmp(a, "--verbose") || !strcmp(a, "-v"))) {
            o.verbose = true;
        } else if (!opt && (!strcmp(a, "--help") || !strcmp(a, "-h"))) {
            t2_usage(stdout);
            return 0;
        } else if (opt && !strcmp(opt, "--channels")) {
            if (v[strspn(v, ",")] == '\0') { /* "", ",", ...: no name at all */
                fprintf(stderr, "rnicsim table2: --channels needs at least one channel name\n");
                return T2_EXIT_USAGE;
            }
            o.channels = v;
        } else if (opt && !strcmp(opt, "--json")) {
            o.json = v;
        } else if (opt && !strcmp(opt, "--csv")) {
            o.csv = v;
        } else if (opt && !strcmp(opt, "--update")) {
            o.update = v;
        } else if (opt && !strcmp(opt, "--messages")) {
            if (!t2_parse_u32(v, 1, &o.messages)) {
                fprintf(stderr, "rnicsim table2: bad --messages '%s'\n", v);
                return T2_EXIT_USAGE;
            }
            set_msgs = true;
        } else if (opt && !strcmp(opt, "--runs")) {
            if (!t2_parse_u32(v, 1, &o.runs)) {
                fprintf(stderr, "rnicsim table2: bad --runs '%s'\n", v);
                return T2_EXIT_USAGE;
            }
            set_runs = true;
        } else {
            fprintf(stderr, "rnicsim table2: unknown option '%s'\n", a);
            t2_usage(stderr);
            return T2_EXIT_USAGE;
        }
    }
    if (!set_msgs)
        o.messages = o.quick ? T2_MEASURE_MSGS / 2 : T2_MEASURE_MSGS;
    if (!set_runs)
        o.runs = o.quick ? 2 : T2_CHECK_RUNS;
    o.check_msgs = o.quick ? T2_CHECK_MSGS / 2 : T2_CHECK_MSGS;
    if (!o.markdown && !o.json && !o.csv && !o.update)
        o.markdown = true;

    size_t nreg = 0;
    while (chan_registry[nreg])
        nreg++;
    if (o.channels) { /* every listed name must exist */
        char *dup = xstrdup_or_die(o.channels);
        for (char *save = NULL, *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save))
            if (!chan_find(t)) {
                fprintf(stderr,
                        "rnicsim table2: no channel '%s' (rnicsim table2 --help; names: ", t);
                for (size_t i = 0; i < nreg; i++)
                    fprintf(stderr, "%s%s", i ? ", " : "", chan_registry[i]->name);
                fprintf(stderr, ")\n");
                free(dup);
                return T2_EXIT_USAGE;
            }
        free(dup);
    }
    struct t2_row *rows = xcalloc_or_die(nreg ? nreg : 1, sizeof(*rows));
    size_t n = 0;
    char dir[] = "/tmp/rnicsim-table2-XXXXXX";
    if (!o.no_order && !mkdtemp(dir)) {
        fprintf(stderr, "rnicsim table2: cannot create a temporary directory: %s\n",
                strerror(errno));
        free(rows);
        return T2_EXIT_INTERNAL;
    }
    double t0 = wall_seconds();
    for (size_t i = 0; i < nreg; i++) {
        const struct chan_ops *ops = chan_registry[i];
        if (o.channels && !t2_listed(o.channels, ops->name))
            continue;
        struct t2_row *r = &rows[n++];
        r->ops = ops;
        r->paper = t2_paper_find(ops->name);
        if (o.verbose)
            fprintf(stderr, "table2: %s: measure\n", ops->name);
        t2_measure(&o, r);
        if (r->paper && strcmp(r->paper->variable, "N/A") != 0)
            t2_capacity(r);
        if (!o.no_memory) {
            if (o.verbose)
                fprintf(stderr, "table2: %s: memory\n", ops->name);
            t2_memory(&o, r);
        }
        for (size_t t = 0; !o.no_order && t < T2_NTRANSPORTS; t++) {
            if (o.verbose)
                fprintf(stderr, "table2: %s: check-order on %s\n", ops->name,
                        t2_transports[t].title);
            t2_order_one(&o, dir, r, t);
        }
    }
    if (!o.no_order) { /* the generated scenarios and results */
        char *cmd = xasprintf("rm -rf '%s'", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "rnicsim table2: could not remove %s\n", dir);
        free(cmd);
    }
    int rc = 0;
    if (o.markdown)
        t2_markdown(stdout, &o, rows, n);
    if (o.json && t2_write_json(o.json, &o, rows, n))
        rc = T2_EXIT_INTERNAL;
    if (o.csv && t2_write_csv(o.csv, rows, n))
        rc = T2_EXIT_INTERNAL;
    if (o.update && t2_update(o.update, &o, rows, n))
        rc = T2_EXIT_INTERNAL;
    fprintf(stderr, "table2: %zu channels in %.1f s\n", n, wall_seconds() - t0);
    free(rows);
    return rc;
}
