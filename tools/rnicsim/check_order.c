/* `rnicsim check-order`: run an ordering workload many times and stop at
 * the first ordering violation (docs/ordering.md, docs/cli.md).
 *
 *   rnicsim check-order FILE.yaml [--runs N] [--seed S] [--set K=V]...
 *                       [--vary K=V1,V2,...]... [--profiles DIR]
 *                       [--trace-lines N] [--trace-capacity N] [-o FILE]
 *                       [--verbose]
 *
 * Run k of every configuration uses seed S + k (S = the scenario's seed by
 * default); the configurations are the cartesian product of the --vary
 * lists (each value applied as --set K=V), so ordering knobs a scenario or
 * a hardware profile exposes (transport, DMA ordering, routing) are tried
 * without any change here.  Seeds are the outer loop: every configuration
 * sees seed S before any sees S + 1.
 *
 * The contract with the programs (protocols/litmus does this):
 *   - a receiver that found an invalid message reports one row of the table
 *     "order_violation" (host_report; an optional key t_ns = the simulated
 *     time at which it found it) and returns non-zero, ideally after one
 *     stderr line containing "VIOLATION";
 *   - a receiver that checked everything reports a row of "order_check"
 *     with messages_checked.
 * A run is stopped as soon as a program returns non-zero, so the event
 * trace ends where the violation was found.
 *
 * Reorderings are counted from the event trace while the run goes (an
 * observer drains the trace ring every few events):
 *   - packets out of PSN order: a packet received (pkt-rx) on a QP, in one
 *     direction (requests vs responses: READ responses and ACKs), with a PSN
 *     older than one already received there and not received before;
 *   - DMA writes out of order: a dma-write record that carries the PSN of
 *     the packet it places, landing after a write of a later PSN of the same
 *     QP, or of the same PSN at a higher address (records with PSN 0 carry
 *     none and are not counted);
 *   - packets dropped (pkt-drop records), shown next to the others because a
 *     go-back-N retransmission that fills a hole also arrives after later
 *     PSNs.
 *
 * Exit status: 0 clean, 1 a violation was found, 2 bad input (command
 * line, scenario, or programs that report no order_check), 3 a run ended
 * without a verdict (deadlock, time limit, a program failed without
 * reporting a violation), 4 not runnable (the transport refused a work
 * request the protocol posts: an opcode or size it lacks), 5 internal
 * error. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim/config/json.h"
#include "sim/trace.h"
#include "tools/rnicsim/rnicsim.h"
#include "tools/rnicsim/timeline.h"

#define CO_EXIT_CLEAN 0
#define CO_EXIT_VIOLATION 1
#define CO_EXIT_USAGE 2
#define CO_EXIT_RUN_ERROR 3
#define CO_EXIT_NOT_RUNNABLE 4
#define CO_EXIT_INTERNAL 5

/* Defaults (estimates, not hardware facts): 10 runs cover several seeds in
 * well under a second for the litmus scenarios; 50 trace lines show the
 * last few messages of a litmus pair (about 6 records per message); 4096
 * records (~200 KiB) is the ring size issue 3 suggests. */
#define CO_DEFAULT_RUNS 10
#define CO_DEFAULT_TRACE_LINES 50
#define CO_DEFAULT_TRACE_CAPACITY 4096
/* The observer drains the ring every capacity / CO_OBSERVE_DIV events; one
 * event rarely appends more than a few records (a poll returning 16 CQEs
 * appends 16), so 64 keeps the ring from wrapping between two drains. */
#define CO_OBSERVE_DIV 64
#define CO_PSN_MASK 0xffffffu
#define CO_SEEN_BITS 1024u /* PSN window remembered per flow for duplicates */

/* ---------------------------------------------------------------- reorder counting */

/* Per (node, qpn, direction) state of the PSN order observed. */
struct co_flow {
    uint64_t key; /* 0 = empty slot */
    bool init;
    uint32_t max_psn;
    uint64_t seen[CO_SEEN_BITS / 64]; /* PSNs received, bit psn % CO_SEEN_BITS */
    uint64_t last_addr;               /* DMA flows: address of the last write of max_psn */
};

struct co_counts {
    uint64_t pkts_ooo, dma_ooo, drops, lost;
};

struct co_observer {
    struct sim *sim;
    uint64_t consumed; /* trace records looked at */
    struct co_counts c;
    struct co_flow *flows;
    size_t nflows, cap;
    uint64_t *node_base; /* lowest DMA address per node (UINT64_MAX: none) */
    size_t nnodes;
};

enum co_dir { CO_DIR_REQ, CO_DIR_RESP, CO_DIR_DMA };

static uint64_t co_hash(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return k;
}

static struct co_flow *co_flow_get(struct co_observer *o, uint32_t node, uint32_t qpn,
                                   enum co_dir dir)
{
    uint64_t key = (((uint64_t)node << 32 | qpn) << 2 | (uint64_t)dir) + 1;
    if (2 * (o->nflows + 1) > o->cap) { /* grow, keep load <= 1/2 */
        size_t ncap = o->cap ? 2 * o->cap : 64;
        struct co_flow *nf = xcalloc_or_die(ncap, sizeof(*nf));
        for (size_t i = 0; i < o->cap; i++) {
            if (!o->flows[i].key)
                continue;
            size_t j = co_hash(o->flows[i].key) & (ncap - 1);
            while (nf[j].key)
                j = (j + 1) & (ncap - 1);
            nf[j] = o->flows[i];
        }
        free(o->flows);
        o->flows = nf;
        o->cap = ncap;
    }
    size_t j = co_hash(key) & (o->cap - 1);
    while (o->flows[j].key && o->flows[j].key != key)
        j = (j + 1) & (o->cap - 1);
    if (!o->flows[j].key) {
        o->flows[j].key = key;
        o->nflows++;
    }
    return &o->flows[j];
}

static bool co_bit(const struct co_flow *f, uint32_t psn)
{
    uint32_t b = psn % CO_SEEN_BITS;
    return (f->seen[b / 64] >> (b % 64)) & 1u;
}

static void co_set_bit(struct co_flow *f, uint32_t psn, bool on)
{
    uint32_t b = psn % CO_SEEN_BITS;
    if (on)
        f->seen[b / 64] |= 1ull << (b % 64);
    else
        f->seen[b / 64] &= ~(1ull << (b % 64));
}

/* One packet with `psn` arrived on flow f: true if it arrived after a later
 * PSN had arrived and was not itself seen before (reordered). */
static bool co_flow_psn(struct co_flow *f, uint32_t psn)
{
    psn &= CO_PSN_MASK;
    if (!f->init) {
        f->init = true;
        f->max_psn = psn;
        co_set_bit(f, psn, true);
        return false;
    }
    uint32_t ahead = (psn - f->max_psn) & CO_PSN_MASK;
    if (ahead == 0)
        return false;
    if (ahead < (CO_PSN_MASK + 1) / 2) { /* newer: forget what the window drops */
        uint32_t n = ahead < CO_SEEN_BITS ? ahead : CO_SEEN_BITS;
        for (uint32_t k = 1; k <= n; k++)
            co_set_bit(f, f->max_psn + k, false);
        f->max_psn = psn;
        co_set_bit(f, psn, true);
        return false;
    }
    uint32_t behind = (f->max_psn - psn) & CO_PSN_MASK;
    if (behind >= CO_SEEN_BITS || co_bit(f, psn))
        return false; /* a duplicate (retransmission), or too old to tell */
    co_set_bit(f, psn, true);
    return true;
}

/* A DMA write placing (part of) packet `psn` at `addr` landed: true if a
 * write of a later PSN, or of the same PSN at a higher address, landed
 * before it.  Several writes per PSN are normal (one per segment/TLP). */
static bool co_dma_late(struct co_flow *f, uint32_t psn, uint64_t addr)
{
    psn &= CO_PSN_MASK;
    if (!f->init) {
        f->init = true;
        f->max_psn = psn;
        f->last_addr = addr;
        return false;
    }
    uint32_t ahead = (psn - f->max_psn) & CO_PSN_MASK;
    if (ahead == 0) {
        if (addr < f->last_addr)
            return true;
        f->last_addr = addr;
        return false;
    }
    if (ahead < (CO_PSN_MASK + 1) / 2) {
        f->max_psn = psn;
        f->last_addr = addr;
        return false;
    }
    return true; /* an older PSN placed after a newer one */
}

/* IBA opcodes: transport in the top 3 bits (RC 0, UC 1, RD 2, UD 3),
 * operation in the low 5; 0x0d..0x12 are READ responses, ACK and atomic
 * ACK, which travel in the response direction of the QP. */
static bool co_is_response(uint8_t opcode)
{
    uint8_t op = opcode & 0x1f;
    return opcode < 0x80 && op >= 0x0d && op <= 0x12;
}

static bool co_is_ud(uint8_t opcode)
{
    return (opcode >> 5) == 3;
}

static void co_feed(struct co_observer *o, const struct trace_rec *r)
{
    switch ((enum trace_kind)r->kind) {
    case TRACE_PKT_RX:
        if (co_is_ud(r->opcode)) /* one QP, many senders: no PSN order */
            break;
        if (co_flow_psn(co_flow_get(o, r->node, r->qpn,
                                    co_is_response(r->opcode) ? CO_DIR_RESP : CO_DIR_REQ),
                        r->psn))
            o->c.pkts_ooo++;
        break;
    case TRACE_PKT_DROP:
        o->c.drops++;
        break;
    case TRACE_DMA_WRITE:
    case TRACE_DMA_READ:
        if (r->node < o->nnodes && r->addr < o->node_base[r->node])
            o->node_base[r->node] = r->addr;
        if (r->kind == TRACE_DMA_WRITE && r->psn != 0 &&
            co_dma_late(co_flow_get(o, r->node, r->qpn, CO_DIR_DMA), r->psn, r->addr))
            o->c.dma_ooo++;
        break;
    case TRACE_PKT_TX:
    case TRACE_CQE:
    case TRACE_POLL:
    case TRACE_POST:
    case TRACE_NOTE:
    case TRACE_SPAN: /* sink-only kinds: never in the ring */
    case TRACE_INSTANT:
    case TRACE_COUNTER:
    case TRACE_KIND_COUNT:
        break;
    }
}

/* Look at every record appended since the last call (sim_progress_fn). */
static void co_observe(struct sim *sim, void *arg)
{
    struct co_observer *o = arg;
    uint64_t total = sim_trace_total(sim);
    size_t held = sim_trace_count(sim);
    uint64_t first = total - held;
    if (o->consumed < first) {
        o->c.lost += first - o->consumed;
        o->consumed = first;
    }
    for (; o->consumed < total; o->consumed++)
        co_feed(o, sim_trace_get(sim, (size_t)(o->consumed - first)));
}

static void co_observer_init(struct co_observer *o, size_t nnodes)
{
    memset(o, 0, sizeof(*o));
    o->nnodes = nnodes;
    o->node_base = xcalloc_or_die(nnodes ? nnodes : 1, sizeof(*o->node_base));
    for (size_t i = 0; i < nnodes; i++)
        o->node_base[i] = UINT64_MAX;
}

static void co_observer_free(struct co_observer *o)
{
    free(o->flows);
    free(o->node_base);
    memset(o, 0, sizeof(*o));
}

/* ---------------------------------------------------------------- options */

struct co_vary {
    const char *key;
    char **values;
    size_t n;
};

struct co_opts {
    const char *prog, *file, *out, *profiles;
    const char **sets;
    size_t nsets;
    struct co_vary *vary;
    size_t nvary;
    uint64_t runs;
    bool have_seed;
    uint64_t seed;
    uint64_t trace_lines, trace_capacity;
    bool trace_lines_set, trace_capacity_set;
    bool verbose;
    struct timeline_opts tl; /* --timeline: the deciding run again, as a timeline */
};

static void co_usage(FILE *out)
{
    fprintf(out,
            "usage: rnicsim check-order FILE.yaml [--runs N] [--seed S] [--set KEY=VALUE]...\n"
            "                           [--vary KEY=V1,V2,...]... [--profiles DIR]\n"
            "                           [--trace-lines N] [--trace-capacity N] [-o FILE.json]\n"
            "                           [--timeline FILE.json [--timeline-hosts ...]] [--verbose]\n"
            "Runs the scenario N times (default %d) per configuration with seeds S, S+1, ...\n"
            "(S = the scenario's seed), every --vary combination as a configuration, and\n"
            "stops at the first run whose programs report an ordering violation.\n"
            "exit status: 0 clean, 1 violation found, 2 bad input, 3 a run ended without\n"
            "a verdict (deadlock, time limit, program error), 4 not runnable (the\n"
            "transport refused a work request the protocol posts), 5 internal error.\n"
            "--timeline FILE writes the timeline of the run that decided the verdict (the\n"
            "violating run, or the first run when all are clean): docs/timeline.md.\n",
            CO_DEFAULT_RUNS);
}

/* "KEY=V1,V2": split the values at top-level commas (not inside [] {} or
 * quotes, so a value may be a flow sequence). */
static int co_parse_vary(const char *arg, struct co_vary *v)
{
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg || !eq[1])
        return -1;
    v->key = arg;
    v->n = 0;
    v->values = NULL;
    const char *p = eq + 1, *start = p;
    int depth = 0;
    char quote = 0;
    for (;; p++) {
        char ch = *p;
        if (quote) {
            if (ch == quote)
                quote = 0;
            else if (!ch)
                return -1;
            continue;
        }
        if (ch == '"' || ch == '\'')
            quote = ch;
        else if (ch == '[' || ch == '{')
            depth++;
        else if ((ch == ']' || ch == '}') && depth > 0)
            depth--;
        if ((ch == ',' && depth == 0) || !ch) {
            if (p == start)
                return -1;
            v->values = xrealloc_or_die(v->values, (v->n + 1) * sizeof(char *));
            v->values[v->n++] =
                xasprintf("%.*s=%.*s", (int)(eq - arg), arg, (int)(p - start), start);
            start = p + 1;
        }
        if (!ch)
            break;
    }
    return 0;
}

static int co_parse_u64(const char *opt, const char *v, uint64_t min, uint64_t *out)
{
    char why[160];
    if (cfg_parse_u64(v, out, why, sizeof(why)) || *out < min) {
        fprintf(stderr, "rnicsim check-order: bad %s '%s'%s%s\n", opt, v, *why ? ": " : "",
                *why ? why : "");
        return -1;
    }
    return 0;
}

static int co_parse_args(int argc, char **argv, struct co_opts *o)
{
    o->sets = xcalloc_or_die((size_t)argc + 1, sizeof(char *));
    o->vary = xcalloc_or_die((size_t)argc + 1, sizeof(*o->vary));
    o->runs = CO_DEFAULT_RUNS;
    o->trace_lines = CO_DEFAULT_TRACE_LINES;
    o->trace_capacity = CO_DEFAULT_TRACE_CAPACITY;
    for (int i = 0; i < argc; i++) {
        bool missing = false;
        const char *v;
        char twhy[256];
        int t = timeline_parse_opt(argc, argv, &i, &o->tl, twhy, sizeof(twhy));
        if (t < 0) {
            fprintf(stderr, "rnicsim check-order: %s\n", twhy);
            return -1;
        }
        if (t > 0)
            continue;
        if ((v = cli_opt_value(argc, argv, &i, "--set", &missing))) {
            o->sets[o->nsets++] = v;
        } else if ((v = cli_opt_value(argc, argv, &i, "--vary", &missing))) {
            if (co_parse_vary(v, &o->vary[o->nvary])) {
                fprintf(stderr, "rnicsim check-order: bad --vary '%s' (expected KEY=V1,V2,...)\n",
                        v);
                return -1;
            }
            o->nvary++;
            /* one list per key: a second one would silently replace the
             * first in every configuration (its values never run) */
            size_t klen = (size_t)(strchr(v, '=') - v);
            for (size_t k = 0; k + 1 < o->nvary; k++) {
                const char *other = o->vary[k].key;
                if (strncmp(other, v, klen) == 0 && other[klen] == '=') {
                    fprintf(stderr,
                            "rnicsim check-order: --vary %.*s given twice (put every value in "
                            "one list: --vary %.*s=V1,V2,...)\n",
                            (int)klen, v, (int)klen, v);
                    return -1;
                }
            }
        } else if ((v = cli_opt_value(argc, argv, &i, "-o", &missing)) ||
                   (v = cli_opt_value(argc, argv, &i, "--output", &missing))) {
            o->out = v;
        } else if ((v = cli_opt_value(argc, argv, &i, "--runs", &missing))) {
            if (co_parse_u64("--runs", v, 1, &o->runs))
                return -1;
        } else if ((v = cli_opt_value(argc, argv, &i, "--seed", &missing))) {
            if (co_parse_u64("--seed", v, 0, &o->seed))
                return -1;
            o->have_seed = true;
        } else if ((v = cli_opt_value(argc, argv, &i, "--trace-lines", &missing))) {
            if (co_parse_u64("--trace-lines", v, 0, &o->trace_lines))
                return -1;
            o->trace_lines_set = true;
        } else if ((v = cli_opt_value(argc, argv, &i, "--trace-capacity", &missing))) {
            if (co_parse_u64("--trace-capacity", v, 64, &o->trace_capacity))
                return -1;
            o->trace_capacity_set = true;
        } else if ((v = cli_opt_value(argc, argv, &i, "--profiles", &missing))) {
            o->profiles = v;
        } else if (missing) {
            fprintf(stderr, "rnicsim check-order: %s needs a value\n", argv[i]);
            return -1;
        } else if (!strcmp(argv[i], "--verbose") || !strcmp(argv[i], "-v")) {
            o->verbose = true;
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            co_usage(stdout);
            return 1;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "rnicsim check-order: unknown option '%s'\n", argv[i]);
            co_usage(stderr);
            return -1;
        } else if (!o->file) {
            o->file = argv[i];
        } else {
            fprintf(stderr, "rnicsim check-order: one scenario file at a time ('%s' and '%s')\n",
                    o->file, argv[i]);
            return -1;
        }
    }
    if (!o->file) {
        fprintf(stderr, "rnicsim check-order: missing scenario file\n");
        co_usage(stderr);
        return -1;
    }
    if (o->trace_lines > o->trace_capacity)
        o->trace_lines = o->trace_capacity;
    return 0;
}

static void co_opts_free(struct co_opts *o)
{
    for (size_t i = 0; i < o->nvary; i++) {
        for (size_t k = 0; k < o->vary[i].n; k++)
            free(o->vary[i].values[k]);
        free(o->vary[i].values);
    }
    free(o->vary);
    free(o->sets);
}

/* The --set list of configuration `c` (mixed radix over the --vary lists):
 * the command's own --set values, then one per --vary. */
static size_t co_config_sets(const struct co_opts *o, size_t c, const char **sets)
{
    size_t n = 0;
    for (size_t i = 0; i < o->nsets; i++)
        sets[n++] = o->sets[i];
    for (size_t i = 0; i < o->nvary; i++) {
        sets[n++] = o->vary[i].values[c % o->vary[i].n];
        c /= o->vary[i].n;
    }
    return n;
}

/* ---------------------------------------------------------------- output capture */

/* Program output (stdout and stderr) of one run goes to a temporary file
 * and is shown only for the run that matters. */
struct co_capture {
    FILE *tmp;
    int saved_out, saved_err;
};

static int co_capture_begin(struct co_capture *c)
{
    fflush(stdout);
    fflush(stderr);
    c->tmp = tmpfile();
    if (!c->tmp)
        return -1;
    c->saved_out = dup(STDOUT_FILENO);
    c->saved_err = dup(STDERR_FILENO);
    if (c->saved_out < 0 || c->saved_err < 0 || dup2(fileno(c->tmp), STDOUT_FILENO) < 0 ||
        dup2(fileno(c->tmp), STDERR_FILENO) < 0) {
        if (c->saved_out >= 0)
            close(c->saved_out);
        if (c->saved_err >= 0)
            close(c->saved_err);
        fclose(c->tmp);
        c->tmp = NULL;
        return -1;
    }
    return 0;
}

/* Restore stdout/stderr; returns the captured text (malloc'd). */
static char *co_capture_end(struct co_capture *c)
{
    if (!c->tmp)
        return xstrdup_or_die("");
    fflush(stdout);
    fflush(stderr);
    dup2(c->saved_out, STDOUT_FILENO);
    dup2(c->saved_err, STDERR_FILENO);
    close(c->saved_out);
    close(c->saved_err);
    long len = ftell(c->tmp);
    char *text = xcalloc_or_die(len > 0 ? (size_t)len + 1 : 1, 1);
    rewind(c->tmp);
    if (len > 0) {
        size_t got = fread(text, 1, (size_t)len, c->tmp);
        text[got] = '\0';
    }
    fclose(c->tmp);
    c->tmp = NULL;
    return text;
}

/* Print `text` with every line indented. */
static void co_print_indented(FILE *out, const char *text, const char *indent)
{
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        fprintf(out, "%s%.*s\n", indent, (int)n, p);
        p += n + (nl ? 1 : 0);
    }
}

/* The first line of `text` containing "VIOLATION" (malloc'd), or NULL. */
static char *co_violation_line(const char *text)
{
    const char *hit = strstr(text, "VIOLATION");
    if (!hit)
        return NULL;
    const char *b = hit;
    while (b > text && b[-1] != '\n')
        b--;
    const char *e = strchr(hit, '\n');
    size_t n = e ? (size_t)(e - b) : strlen(b);
    return xasprintf("%.*s", (int)n, b);
}

/* ---------------------------------------------------------------- the report */

/* A shell word: as is when it only has safe characters, else single-quoted. */
/* The command that reproduces run (seed, sets) alone. */
static char *co_reproduce(const struct co_opts *o, uint64_t seed, const char **sets, size_t nsets,
                          bool checker)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m)
        return xstrdup_or_die("");
    shell_word(m, o->prog);
    fprintf(m, checker ? " check-order " : " run ");
    shell_word(m, o->file);
    if (checker)
        fprintf(m, " --runs 1");
    fprintf(m, " --seed %" PRIu64, seed);
    if (o->profiles) {
        fprintf(m, " --profiles ");
        shell_word(m, o->profiles);
    }
    for (size_t i = 0; i < nsets; i++) {
        fprintf(m, " --set ");
        shell_word(m, sets[i]);
    }
    if (checker && o->trace_lines_set)
        fprintf(m, " --trace-lines %" PRIu64, o->trace_lines);
    if (checker && o->trace_capacity_set)
        fprintf(m, " --trace-capacity %" PRIu64, o->trace_capacity);
    fclose(m);
    return buf;
}

static bool co_row_get(const struct report_row *row, const char *key, double *v)
{
    for (size_t i = 0; i < row->n; i++) {
        if (strcmp(row->keys[i], key) == 0) {
            *v = row->values[i];
            return true;
        }
    }
    return false;
}

static const struct report_table *co_table(const struct run *r, const char *name)
{
    for (size_t i = 0; i < r->ntables; i++)
        if (strcmp(r->tables[i].name, name) == 0)
            return &r->tables[i];
    return NULL;
}

/* Trace records shown for a violation: the last `max` with t <= cut_ps. */
struct co_window {
    size_t from, to; /* indexes into the ring, [from, to) */
};

static struct co_window co_trace_window(struct sim *sim, sim_time_t cut_ps, uint64_t max)
{
    size_t n = sim_trace_count(sim), to = n;
    while (to > 0 && sim_trace_get(sim, to - 1)->t_ps > cut_ps)
        to--;
    size_t from = max && max < to ? to - (size_t)max : 0;
    if (!max)
        from = to;
    return (struct co_window){from, to};
}

static bool co_has_addr(const struct trace_rec *r)
{
    return r->kind == TRACE_DMA_WRITE || r->kind == TRACE_DMA_READ;
}

/* Address relative to the node's lowest DMA address in the run: stable from
 * one process to the next (buffers move, offsets inside them do not). */
static uint64_t co_addr_off(const struct co_observer *ob, const struct trace_rec *r)
{
    if (r->node < ob->nnodes && ob->node_base[r->node] != UINT64_MAX)
        return r->addr - ob->node_base[r->node];
    return r->addr;
}

static void co_print_trace_line(FILE *out, const struct co_observer *ob, const struct trace_rec *r)
{
    fprintf(out, "    %14.3f ns  %-9s node %u", sim_ps_to_ns(r->t_ps),
            sim_trace_kind_name((enum trace_kind)r->kind), r->node);
    switch ((enum trace_kind)r->kind) {
    case TRACE_PKT_TX:
    case TRACE_PKT_RX:
    case TRACE_PKT_DROP:
        fprintf(out, "  qpn %u psn %u opcode 0x%02x len %u", r->qpn, r->psn, r->opcode, r->len);
        break;
    case TRACE_DMA_WRITE:
    case TRACE_DMA_READ:
        fprintf(out, "  qpn %u addr +0x%" PRIx64 " len %u", r->qpn, co_addr_off(ob, r), r->len);
        break;
    case TRACE_CQE:
    case TRACE_POLL:
    case TRACE_POST:
        fprintf(out, "  qpn %u opcode %u status %u len %u", r->qpn, r->opcode, r->status, r->len);
        break;
    case TRACE_NOTE:
    case TRACE_SPAN: /* sink-only kinds: never in the ring */
    case TRACE_INSTANT:
    case TRACE_COUNTER:
    case TRACE_KIND_COUNT:
        break;
    }
    if (r->where)
        fprintf(out, "  (%s)", r->where);
    fputc('\n', out);
}

static void co_json_trace(struct json_writer *w, struct sim *sim, const struct co_observer *ob,
                          struct co_window win)
{
    json_kv_array_begin(w, "trace");
    for (size_t i = win.from; i < win.to; i++) {
        const struct trace_rec *r = sim_trace_get(sim, i);
        json_object_begin(w);
        json_kv_u64(w, "t_ps", r->t_ps);
        json_kv_str(w, "kind", sim_trace_kind_name((enum trace_kind)r->kind));
        json_kv_u64(w, "node", r->node);
        json_kv_u64(w, "qpn", r->qpn);
        json_kv_u64(w, "psn", r->psn);
        json_kv_u64(w, "opcode", r->opcode);
        json_kv_u64(w, "status", r->status);
        json_kv_u64(w, "len", r->len);
        if (co_has_addr(r))
            json_kv_u64(w, "addr_offset", co_addr_off(ob, r));
        json_kv_str(w, "where", r->where ? r->where : "");
        json_object_end(w);
    }
    json_array_end(w);
}

/* ---------------------------------------------------------------- the checker */

enum co_verdict { CO_CLEAN, CO_VIOLATION, CO_ERROR, CO_NOT_RUNNABLE };
static const char *const co_verdict_names[] = {[CO_CLEAN] = "clean",
                                               [CO_VIOLATION] = "violation",
                                               [CO_ERROR] = "error",
                                               [CO_NOT_RUNNABLE] = "not-runnable"};

/* WRs the hosts' transports refused at post time (nic_note_wr_refused). */
static uint64_t co_refused_wrs(const struct run *r)
{
    uint64_t n = 0;
    for (size_t i = 0; i < r->world->nhosts; i++)
        n += nic_get_counters(r->world->nics[i])->wr_refused;
    return n;
}

/* Totals of one configuration. */
struct co_config {
    uint64_t runs, messages;
    struct co_counts c;
};

struct co_state {
    struct co_opts *o;
    size_t nconfigs;
    struct co_config *configs;
    uint64_t runs_done, messages;
    struct co_counts c;
    uint64_t first_seed;
    char *scenario_name;
    enum co_verdict verdict;
    /* the run that decided a violation or an error (kept for the report) */
    struct run *bad;
    struct scenario *bad_scn;
    struct co_observer bad_ob;
    uint64_t bad_seed, bad_run;
    const char **bad_sets;
    size_t bad_nsets;
    char *bad_output, *bad_line;
    sim_time_t bad_cut_ps;
    const struct prog_inst *bad_prog;
};

static void co_counts_add(struct co_counts *a, const struct co_counts *b)
{
    a->pkts_ooo += b->pkts_ooo;
    a->dma_ooo += b->dma_ooo;
    a->drops += b->drops;
    a->lost += b->lost;
}

static const struct prog_inst *co_failed_prog(const struct run *r)
{
    for (size_t i = 0; i < r->ninsts; i++)
        if (r->insts[i].finished && r->insts[i].exit_code != 0)
            return &r->insts[i];
    return NULL;
}

static void co_print_sets(FILE *out, const char **sets, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        fputs(i ? " " : "", out);
        fprintf(out, "--set ");
        shell_word(out, sets[i]);
    }
}

static void co_print_violation(FILE *out, struct co_state *st)
{
    const struct run *r = st->bad;
    struct sim *sim = r->world->sim;
    char t[32];
    uint64_t total_runs = st->o->runs * st->nconfigs;
    fprintf(out, "check-order: VIOLATION in run %" PRIu64 " of %" PRIu64 " (seed %" PRIu64,
            st->bad_run + 1, total_runs, st->bad_seed);
    if (st->o->nvary) {
        fprintf(out, ", ");
        co_print_sets(out, st->bad_sets + st->o->nsets, st->o->nvary);
    }
    fprintf(out, ")\n");
    if (st->bad_prog) {
        format_time(r->sim_time_ps, t, sizeof(t));
        fprintf(out, "  %s (programs[%zu]) returned %d at %s\n", st->bad_prog->proc_name,
                (size_t)(st->bad_prog - r->insts), st->bad_prog->exit_code, t);
    }
    if (st->bad_line)
        fprintf(out, "  violation: %s\n", st->bad_line);
    const struct report_table *tb = co_table(r, "order_violation");
    if (tb && tb->nrows) {
        const struct report_row *row = &tb->rows[0];
        fprintf(out, "  reported:");
        for (size_t j = 0; j < row->n; j++) { /* shortest exact form, as in the JSON */
            char num[32];
            json_format_double(row->values[j], num, sizeof(num));
            fprintf(out, " %s=%s", row->keys[j], num);
        }
        fputc('\n', out);
    }
    char *rep = co_reproduce(st->o, st->bad_seed, st->bad_sets, st->bad_nsets, true);
    char *rep_run = co_reproduce(st->o, st->bad_seed, st->bad_sets, st->bad_nsets, false);
    fprintf(out, "  reproduce: %s\n", rep);
    fprintf(out, "  or run it: %s\n", rep_run);
    free(rep);
    free(rep_run);
    if (*st->bad_output) {
        fprintf(out, "  program output:\n");
        co_print_indented(out, st->bad_output, "    ");
    }
    struct co_window win = co_trace_window(sim, st->bad_cut_ps, st->o->trace_lines);
    format_time(st->bad_cut_ps, t, sizeof(t));
    fprintf(
        out,
        "  trace: the last %zu of %" PRIu64 " events up to the violation (t <= %s), oldest "
        "first;\n  DMA addresses are offsets from the lowest address each node's NIC touched:\n",
        win.to - win.from, sim_trace_total(sim), t);
    for (size_t i = win.from; i < win.to; i++)
        co_print_trace_line(out, &st->bad_ob, sim_trace_get(sim, i));
    if (win.to == win.from)
        fprintf(out, "    (no trace records: the models add them as they gain trace points)\n");
}

static void co_print_error(FILE *out, struct co_state *st)
{
    const struct run *r = st->bad;
    char t[32];
    format_time(r->sim_time_ps, t, sizeof(t));
    if (st->verdict == CO_NOT_RUNNABLE)
        fprintf(out,
                "check-order: NOT RUNNABLE: the transport refused %" PRIu64
                " work request(s) the protocol posts (an opcode or size it lacks; see the\n"
                "  'rnicsim: ... refused' line below); run %" PRIu64 " (seed %" PRIu64
                ") ended '%s' at %s\n",
                co_refused_wrs(r), st->bad_run + 1, st->bad_seed, run_result_name(r->result), t);
    else
        fprintf(out,
                "check-order: run %" PRIu64 " (seed %" PRIu64
                ") ended '%s' at %s without a verdict\n",
                st->bad_run + 1, st->bad_seed, run_result_name(r->result), t);
    for (size_t i = 0; i < r->ninsts; i++) {
        const struct prog_inst *pi = &r->insts[i];
        if (pi->finished && pi->exit_code != 0)
            fprintf(out, "  %s (programs[%zu]) returned %d without reporting an order_violation\n",
                    pi->proc_name, i, pi->exit_code);
    }
    if (r->sim_result == SIM_RUN_DEADLOCK || r->result == RUN_TIME_LIMIT) {
        fprintf(out, "  blocked programs:\n");
        fflush(out);
        sim_deadlock_report(r->world->sim, out);
    }
    char *rep = co_reproduce(st->o, st->bad_seed, st->bad_sets, st->bad_nsets, false);
    fprintf(out, "  reproduce: %s\n", rep);
    free(rep);
    if (*st->bad_output) {
        fprintf(out, "  program output:\n");
        co_print_indented(out, st->bad_output, "    ");
    }
}

static void co_print_clean(FILE *out, const struct co_state *st)
{
    const struct co_opts *o = st->o;
    fprintf(out,
            "check-order: clean: %" PRIu64 " runs (seeds %" PRIu64 "..%" PRIu64 "%s), %" PRIu64
            " messages checked, no violation\n",
            st->runs_done, st->first_seed, st->first_seed + o->runs - 1,
            st->nconfigs > 1 ? ", every configuration" : "", st->messages);
    fprintf(out,
            "  reorderings observed: %" PRIu64 " packets out of PSN order, %" PRIu64
            " DMA writes out of order (%" PRIu64 " packets dropped)\n",
            st->c.pkts_ooo, st->c.dma_ooo, st->c.drops);
    if (st->nconfigs > 1) {
        const char **sets = xcalloc_or_die(o->nsets + o->nvary + 1, sizeof(char *));
        for (size_t c = 0; c < st->nconfigs; c++) {
            co_config_sets(o, c, sets);
            fprintf(out, "  ");
            co_print_sets(out, sets + o->nsets, o->nvary);
            fprintf(out,
                    ": %" PRIu64 " runs, %" PRIu64 " messages, %" PRIu64 " + %" PRIu64
                    " reorderings, %" PRIu64 " drops\n",
                    st->configs[c].runs, st->configs[c].messages, st->configs[c].c.pkts_ooo,
                    st->configs[c].c.dma_ooo, st->configs[c].c.drops);
        }
        free(sets);
    }
    if (st->c.pkts_ooo + st->c.dma_ooo == 0)
        fprintf(out, "  nothing was reordered in these runs, so an ordering dependence could not "
                     "show: try a configuration that reorders (docs/ordering.md)\n");
    if (st->c.lost)
        fprintf(out,
                "  note: %" PRIu64 " trace records were overwritten before they were counted; "
                "the counts are lower bounds (raise --trace-capacity)\n",
                st->c.lost);
}

static void co_json_counts(struct json_writer *w, const struct co_counts *c)
{
    json_kv_u64(w, "pkts_out_of_order", c->pkts_ooo);
    json_kv_u64(w, "dma_out_of_order", c->dma_ooo);
    json_kv_u64(w, "pkts_dropped", c->drops);
    json_kv_u64(w, "trace_records_lost", c->lost);
}

static int co_write_json(const struct co_state *st, const char *path)
{
    const struct co_opts *o = st->o;
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "rnicsim check-order: cannot write '%s': %s\n", path, strerror(errno));
        return -1;
    }
    struct json_writer *w = json_new_file(f);
    json_object_begin(w);
    json_kv_str(w, "rnicsim", RNICSIM_VERSION);
    json_kv_str(w, "command", "check-order");
    json_kv_str(w, "scenario", st->scenario_name);
    json_kv_str(w, "file", o->file);
    json_kv_str(w, "verdict", co_verdict_names[st->verdict]);
    json_kv_u64(w, "first_seed", st->first_seed);
    json_kv_u64(w, "runs_per_configuration", o->runs);
    json_kv_u64(w, "runs", st->runs_done);
    json_kv_u64(w, "messages_checked", st->messages);
    json_kv_object_begin(w, "reorderings");
    co_json_counts(w, &st->c);
    json_object_end(w);
    const char **sets = xcalloc_or_die(o->nsets + o->nvary + 1, sizeof(char *));
    json_kv_array_begin(w, "configurations");
    for (size_t c = 0; c < st->nconfigs; c++) {
        size_t n = co_config_sets(o, c, sets);
        json_object_begin(w);
        json_kv_array_begin(w, "sets");
        for (size_t i = 0; i < n; i++)
            json_str(w, sets[i]);
        json_array_end(w);
        json_kv_u64(w, "runs", st->configs[c].runs);
        json_kv_u64(w, "messages_checked", st->configs[c].messages);
        co_json_counts(w, &st->configs[c].c);
        json_object_end(w);
    }
    json_array_end(w);
    free(sets);
    if (st->bad) {
        const struct run *r = st->bad;
        json_kv_object_begin(w, st->verdict == CO_VIOLATION ? "violation" : "error");
        json_kv_u64(w, "run", st->bad_run + 1);
        json_kv_u64(w, "seed", st->bad_seed);
        json_kv_array_begin(w, "sets");
        for (size_t i = 0; i < st->bad_nsets; i++)
            json_str(w, st->bad_sets[i]);
        json_array_end(w);
        json_kv_str(w, "result", run_result_name(r->result));
        json_kv_u64(w, "sim_time_ps", r->sim_time_ps);
        json_kv_str(w, "program", st->bad_prog ? st->bad_prog->proc_name : "");
        json_kv_str(w, "line", st->bad_line ? st->bad_line : "");
        const struct report_table *tb = co_table(r, "order_violation");
        json_kv_object_begin(w, "report");
        if (tb && tb->nrows)
            for (size_t j = 0; j < tb->rows[0].n; j++)
                json_kv_double(w, tb->rows[0].keys[j], tb->rows[0].values[j]);
        json_object_end(w);
        char *rep =
            co_reproduce(o, st->bad_seed, st->bad_sets, st->bad_nsets, st->verdict == CO_VIOLATION);
        json_kv_str(w, "reproduce", rep);
        free(rep);
        json_kv_str(w, "output", st->bad_output ? st->bad_output : "");
        if (st->verdict == CO_VIOLATION)
            co_json_trace(w, r->world->sim, &st->bad_ob,
                          co_trace_window(r->world->sim, st->bad_cut_ps, o->trace_lines));
        json_object_end(w);
    }
    json_object_end(w);
    int rc = json_finish(w);
    if (fclose(f) != 0 || rc) {
        fprintf(stderr, "rnicsim check-order: error writing '%s'\n", path);
        return -1;
    }
    return 0;
}

static struct scenario *co_load(const struct co_opts *o, const char **sets, size_t nsets,
                                bool have_seed, uint64_t seed)
{
    struct scenario_opts so = {.profiles_dir = o->profiles,
                               .sets = sets,
                               .nsets = nsets,
                               .have_seed = have_seed,
                               .seed = seed};
    struct cfg_error err = {{0}};
    struct scenario *s = scenario_load(o->file, NULL, &so, &err);
    if (!s)
        fprintf(stderr, "%s\n", err.msg);
    return s;
}

/* One run: 0 = clean (continue), else the command's exit status.  A run
 * that decides the verdict is kept in st->bad for the report. */
static int co_one_run(struct co_state *st, size_t config, uint64_t seed, uint64_t index,
                      const char **sets, size_t nsets)
{
    struct co_opts *o = st->o;
    struct scenario *s = co_load(o, sets, nsets, true, seed);
    if (!s)
        return CO_EXIT_USAGE;
    struct co_observer ob;
    co_observer_init(&ob, s->topo.n_nodes);
    struct run_opts ro = {.trace_capacity = (size_t)o->trace_capacity,
                          .stop_on_failure = true,
                          .observe = co_observe,
                          .observe_arg = &ob,
                          .observe_every = o->trace_capacity / CO_OBSERVE_DIV};
    struct co_capture cap = {0};
    bool captured = !o->verbose && co_capture_begin(&cap) == 0;
    char why[512];
    struct run *r = run_scenario_opts(s, &ro, why, sizeof(why));
    if (r)
        co_observe(r->world->sim, &ob); /* what the last events appended */
    char *output = captured ? co_capture_end(&cap) : xstrdup_or_die("");
    if (!r) {
        fputs(output, stderr);
        fprintf(stderr, "rnicsim check-order: %s\n", why);
        free(output);
        co_observer_free(&ob);
        scenario_free(s);
        return CO_EXIT_INTERNAL;
    }
    st->runs_done++;
    st->configs[config].runs++;
    co_counts_add(&st->c, &ob.c);
    co_counts_add(&st->configs[config].c, &ob.c);

    const struct report_table *viol = co_table(r, "order_violation");
    const struct report_table *chk = co_table(r, "order_check");
    uint64_t msgs = 0;
    for (size_t i = 0; chk && i < chk->nrows; i++) {
        double v;
        if (co_row_get(&chk->rows[i], "messages_checked", &v) && v > 0)
            msgs += (uint64_t)v;
    }
    st->messages += msgs;
    st->configs[config].messages += msgs;
    if (o->verbose)
        printf("check-order: run %" PRIu64 " seed %" PRIu64 ": %s, %" PRIu64
               " messages checked, %" PRIu64 " + %" PRIu64 " reorderings\n",
               index + 1, seed, run_result_name(r->result), msgs, ob.c.pkts_ooo, ob.c.dma_ooo);

    int rc = 0;
    if (viol && viol->nrows) {
        st->verdict = CO_VIOLATION;
        rc = CO_EXIT_VIOLATION;
        /* The trace is cut where the program found the violation (t_ns),
         * before what it did afterwards (stopping its peer). */
        double t_ns;
        st->bad_cut_ps = r->sim_time_ps;
        if (co_row_get(&viol->rows[0], "t_ns", &t_ns) && t_ns >= 0 &&
            t_ns < (double)(r->sim_time_ps / SIM_NS + 1))
            st->bad_cut_ps = ((sim_time_t)t_ns + 1) * SIM_NS - 1;
    } else if (co_refused_wrs(r) > 0) {
        st->verdict = CO_NOT_RUNNABLE;
        rc = CO_EXIT_NOT_RUNNABLE;
    } else if (r->result != RUN_DONE) {
        st->verdict = CO_ERROR;
        rc = CO_EXIT_RUN_ERROR;
    } else if (!chk || chk->nrows == 0) {
        fprintf(stderr,
                "rnicsim check-order: %s: no program reported an 'order_check' table, so nothing "
                "was checked (check-order needs programs that validate what they receive, e.g. "
                "litmus; docs/ordering.md)\n",
                o->file);
        rc = CO_EXIT_USAGE;
    }
    if (rc == CO_EXIT_VIOLATION || rc == CO_EXIT_RUN_ERROR || rc == CO_EXIT_NOT_RUNNABLE) {
        st->bad = r;
        st->bad_scn = s;
        st->bad_ob = ob;
        st->bad_seed = seed;
        st->bad_run = index;
        st->bad_sets = sets;
        st->bad_nsets = nsets;
        st->bad_output = output;
        st->bad_line = co_violation_line(output);
        st->bad_prog = co_failed_prog(r);
        return rc;
    }
    free(output);
    co_observer_free(&ob);
    run_free(r);
    scenario_free(s);
    return rc;
}

/* --timeline: the run that decided the verdict, again (the same seed and
 * settings give the same run) with the timeline on; its output is dropped. */
static int co_timeline_run(struct co_opts *o, uint64_t seed, const char **sets, size_t nsets)
{
    struct scenario *s = co_load(o, sets, nsets, true, seed);
    if (!s)
        return CO_EXIT_USAGE;
    struct run_opts ro = {
        .trace_capacity = (size_t)o->trace_capacity, .stop_on_failure = true, .timeline = &o->tl};
    struct co_capture cap = {0}; /* (--trace prints the run's events: not captured) */
    bool captured = !o->tl.text && co_capture_begin(&cap) == 0;
    char why[512];
    struct run *r = run_scenario_opts(s, &ro, why, sizeof(why));
    free(captured ? co_capture_end(&cap) : NULL);
    int rc = 0;
    if (!r) {
        fprintf(stderr, "rnicsim check-order: %s\n", why);
        rc = CO_EXIT_INTERNAL;
    } else if (r->timeline_rc) {
        rc = CO_EXIT_INTERNAL;
    } else {
        printf("timeline of the run with seed %" PRIu64 ": %s\n", seed, o->tl.json_path);
    }
    run_free(r);
    scenario_free(s);
    return rc;
}

int check_order_main(const char *prog, int argc, char **argv)
{
    struct co_opts o = {.prog = prog ? prog : "rnicsim"};
    int rc = co_parse_args(argc, argv, &o);
    if (rc) {
        co_opts_free(&o);
        return rc > 0 ? 0 : CO_EXIT_USAGE;
    }
    struct co_state st = {.o = &o, .nconfigs = 1};
    for (size_t i = 0; i < o.nvary; i++) {
        if (st.nconfigs > 100000 / o.vary[i].n) {
            fprintf(stderr, "rnicsim check-order: too many --vary combinations\n");
            co_opts_free(&o);
            return CO_EXIT_USAGE;
        }
        st.nconfigs *= o.vary[i].n;
    }
    /* Every configuration must load before anything runs (bad input = 2). */
    size_t max_sets = o.nsets + o.nvary;
    const char **all_sets = xcalloc_or_die(st.nconfigs * (max_sets + 1), sizeof(char *));
    for (size_t c = 0; c < st.nconfigs; c++) {
        const char **sets = all_sets + c * (max_sets + 1);
        size_t n = co_config_sets(&o, c, sets);
        struct scenario *s = co_load(&o, sets, n, o.have_seed, o.seed);
        if (!s) {
            free(all_sets);
            free(st.scenario_name);
            co_opts_free(&o);
            return CO_EXIT_USAGE;
        }
        if (c == 0) {
            st.first_seed = s->seed;
            st.scenario_name = xstrdup_or_die(s->name);
        }
        char twhy[256];
        if (timeline_check_opts(&o.tl, s->topo.n_nodes, twhy, sizeof(twhy))) {
            fprintf(stderr, "rnicsim check-order: %s\n", twhy);
            scenario_free(s);
            free(all_sets);
            free(st.scenario_name);
            co_opts_free(&o);
            return CO_EXIT_USAGE;
        }
        scenario_free(s);
    }
    st.configs = xcalloc_or_die(st.nconfigs, sizeof(*st.configs));

    rc = 0;
    uint64_t index = 0;
    for (uint64_t k = 0; rc == 0 && k < o.runs; k++)
        for (size_t c = 0; rc == 0 && c < st.nconfigs; c++, index++)
            rc = co_one_run(&st, c, st.first_seed + k, index, all_sets + c * (max_sets + 1),
                            max_sets);

    if (rc == CO_EXIT_VIOLATION)
        co_print_violation(stdout, &st);
    else if (rc == CO_EXIT_RUN_ERROR || rc == CO_EXIT_NOT_RUNNABLE)
        co_print_error(stdout, &st);
    else if (rc == 0)
        co_print_clean(stdout, &st);
    fflush(stdout);
    if ((rc == 0 || rc == CO_EXIT_VIOLATION || rc == CO_EXIT_RUN_ERROR ||
         rc == CO_EXIT_NOT_RUNNABLE) &&
        o.out && co_write_json(&st, o.out))
        rc = rc ? rc : CO_EXIT_INTERNAL;
    if ((rc == 0 || st.bad) && timeline_wanted(&o.tl)) {
        int trc = st.bad ? co_timeline_run(&o, st.bad_seed, st.bad_sets, st.bad_nsets)
                         : co_timeline_run(&o, st.first_seed, all_sets, max_sets);
        rc = rc ? rc : trc;
    }

    if (st.bad) {
        free(st.bad_output);
        free(st.bad_line);
        co_observer_free(&st.bad_ob);
        run_free(st.bad);
        scenario_free(st.bad_scn);
    }
    free(st.configs);
    free(st.scenario_name);
    free(all_sets);
    co_opts_free(&o);
    return rc;
}
