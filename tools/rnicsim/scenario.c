/* The scenario schema: reads a YAML scenario (sim/config) into struct
 * scenario, strictly.  Every key is documented in docs/scenarios.md.
 *
 *   name: quickstart            required string
 *   description: "..."          optional string
 *   seed: 1                     optional integer (default 1; --seed overrides)
 *   stop_time: 10s              optional time (default 60s)
 *   profile: cx5-100g           optional hardware profile (default: the C defaults)
 *   hardware: {nic: {...}}      optional parameter overrides (params.c)
 *   topology:                   required
 *     kind: star                star | back-to-back | leaf-spine | fat-tree | ring
 *     hosts: 2                  hosts h0..h(N-1) (leaf-spine: optional, = leaves x hosts_per_leaf;
 *                               fat-tree: optional, = k^3 / 4)
 *     leaves: 2, spines: 2, hosts_per_leaf: 4      leaf-spine only
 *     k: 4                      fat-tree only: even, 2..24
 *     link: {rate: 100Gbps, delay: 10ns, loss: 1%, corrupt: 0.1%}
 *     spine_link: {rate: 400Gbps, ...}              switch-to-switch cables, leaf-spine and
 *                                                   fat-tree (default: link)
 *     switch: {latency: 300ns, buffer: 1MiB}        star, leaf-spine
 *     routing: ecmp             ecmp | static | spray | spray-rr
 *     reroute_delay: 0          routing convergence after a link changes state
 *     links: [{link: "leaf0->spine1", rate, delay, loss, corrupt}]   per-link overrides
 *     failures: [{link: "leaf0->spine1", at: 50us, recover_at: 80us}]
 *   capture:                    optional pcap files (RoCEv2 encoding)
 *     - {link: "h0->sw0", file: out/h0.pcap, at: tx}   one link (tx | rx side)
 *     - {host: h1, file: out/h1.pcap}                  both directions at h1's port
 *     - {all: out/pcap}                                every link, <dir>/<from>-to-<to>.pcap
 *   vars: {qps: 4, size: 4096}  optional variables: ${qps} in a program's host,
 *                               program and args ($$ is a literal $)
 *   programs:                   required, at least one (absent in emulation mode)
 *     - {host: h1, program: perftest, args: [...], daemon: false, stack: 256KiB,
 *        cpus: [0, 1], socket: 0}   optional: pin the threads / keep them on a socket
 *
 * Order: C defaults -> profile file -> `hardware:` -> --set (the --set
 * assignments are grafted into the document before it is read, so they
 * override the scenario's own values and are checked the same way).
 * A --set of vars.NAME must name a variable the file defines. */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim/host/cpu.h"
#include "tools/rnicsim/rnicsim.h"

/* Defaults of the optional keys. */
#define DEFAULT_SEED 1
#define DEFAULT_STOP_TIME_PS (60 * SIM_S)
/* Star switch, when `switch:` leaves them out.  Latency: Mellanox
 * Spectrum-class switches quote ~300 ns port-to-port (SN2000 series
 * product brief).  Buffer: estimate: Spectrum's 16 MB shared buffer over
 * 32 ports is ~0.5 MB per port; a congested port can borrow about twice
 * its share, so 1 MiB per output queue. */
#define DEFAULT_SWITCH_LATENCY_PS (300 * SIM_NS)
#define DEFAULT_SWITCH_BUFFER_BYTES ((uint64_t)1 << 20)
#define MAX_HOSTS 4096
#define MAX_SPINES 1024
/* Cables between leaves and spines: route set-up is linear in hosts and
 * cables (docs/fabric.md), so what bounds a fabric is memory, ~1.3 KB per
 * link direction: 262144 cables (e.g. 512 x 512) are ~0.7 GB of links. */
#define MAX_LEAF_SPINE_CABLES 262144
/* k^3 / 4 <= MAX_HOSTS */
#define MAX_FAT_TREE_K 24
/* Ranges of the scenario's own numbers (docs/robustness.md): cables from
 * 1 Mb/s (slower is no datacenter fabric, and a frame would take hours)
 * to 100 Tb/s; a delay or latency is a duration (at most an hour, like
 * every hardware time); an instant (stop_time, a failure) is at most
 * SIM_TIME_LIMIT_PS; a switch buffer at most 1 TiB. */
#define MIN_LINK_RATE_BPS 1000000ull
#define MAX_LINK_RATE_BPS 100000000000000ull
#define MAX_SWITCH_BUFFER_BYTES ((uint64_t)1 << 40)
#define MIN_STACK_BYTES ((uint64_t)64 * 1024)
#define MAX_STACK_BYTES ((uint64_t)1 << 30)

static const char *const topo_kinds[] = {"star",     "back-to-back", "leaf-spine",
                                         "fat-tree", "ring",         NULL};
static const enum topo_kind topo_kind_values[] = {TOPO_STAR, TOPO_BACK_TO_BACK, TOPO_LEAF_SPINE,
                                                  TOPO_FAT_TREE, TOPO_RING};
/* Index = enum route_mode. */
static const char *const route_modes[] = {"ecmp", "static", "spray", "spray-rr", NULL};
static const char *const capture_taps[] = {"tx", "rx", NULL};

static long host_index(const char *name, unsigned hosts);

/* A probability: a decimal number 0..1 ("0.01", "1e-6") or a percentage
 * ("1%", "0.1%"). */
int scn_parse_prob(struct cfg_node *n, double *out, struct cfg_error *err)
{
    if (n->kind != CFG_SCALAR || !n->scalar || !n->scalar[0])
        return cfg_errorf(err, n, "'%s': expected a probability like 0.01 or 1%%, got %s", n->path,
                          cfg_kind_name(n));
    const char *t = n->scalar;
    char *end = NULL;
    errno = 0;
    double v = (t[0] >= '0' && t[0] <= '9') || t[0] == '.' ? strtod(t, &end) : -1.0;
    bool pct = end && *end == '%';
    if (!end || end == t || strpbrk(t, "xXnN") || errno || (pct ? end[1] != '\0' : *end != '\0'))
        return cfg_errorf(err, n, "bad probability '%s': expected a number like 0.01 or 1%%", t);
    if (pct)
        v /= 100.0;
    if (v > 1.0)
        return cfg_errorf(err, n, "bad probability '%s': more than 1 (100%%)", t);
    *out = v;
    return 0;
}

static int get_prob(struct cfg_node *map, const char *key, double def, double *out,
                    struct cfg_error *err)
{
    struct cfg_node *n = cfg_child(map, key);
    *out = def;
    return n ? scn_parse_prob(n, out, err) : 0;
}

/* A duration read from `n` (NULL: a default, not checked): 0..1 hour. */
static int check_duration(struct cfg_node *n, sim_time_t v, struct cfg_error *err)
{
    return n ? cfg_check_range(n, n->path, CFG_Q_TIME, v, 0, SIM_DURATION_MAX_PS, err) : 0;
}

/* An instant read from `n`: 0..SIM_TIME_LIMIT_PS. */
static int check_instant(struct cfg_node *n, sim_time_t v, struct cfg_error *err)
{
    return n ? cfg_check_range(n, n->path, CFG_Q_TIME, v, 0, SIM_TIME_LIMIT_PS, err) : 0;
}

/* A cable description {rate, delay, loss, corrupt}; absent keys take the
 * values of `def` (a rate of 0 in `def` makes `rate` required). */
static int read_link_map(struct cfg_node *link, const struct link_params *def,
                         struct link_params *lp, struct cfg_error *err)
{
    *lp = *def;
    struct cfg_node *rate = cfg_child(link, "rate");
    if (!rate && def->rate_bps == 0 && cfg_req_node(link, "rate", CFG_SCALAR, &rate, err))
        return -1;
    if (rate && (cfg_node_rate(rate, &lp->rate_bps, err) ||
                 cfg_check_range(rate, rate->path, CFG_Q_RATE, lp->rate_bps, MIN_LINK_RATE_BPS,
                                 MAX_LINK_RATE_BPS, err)))
        return -1;
    if (cfg_get_time(link, "delay", def->delay_ps, &lp->delay_ps, err) ||
        check_duration(cfg_child(link, "delay"), lp->delay_ps, err) ||
        get_prob(link, "loss", def->loss_prob, &lp->loss_prob, err) ||
        get_prob(link, "corrupt", def->corrupt_prob, &lp->corrupt_prob, err))
        return -1;
    lp->queue_bytes = 0; /* NIC egress: unbounded (the NIC paces itself) */
    return 0;
}

/* A throwaway topology of the scenario's shape, to check link names. */
struct name_check {
    struct sim *sim;
    struct pkt_pool *pool;
    struct topology *t;
};

static void name_check_free(struct name_check *nc)
{
    topo_destroy(nc->t);
    pkt_pool_destroy(nc->pool);
    sim_destroy(nc->sim);
    memset(nc, 0, sizeof(*nc));
}

/* "node3->leaf1" -> "h3->leaf1" (malloc'd). */
static char *host_spelling(const char *link)
{
    char *out = xcalloc_or_die(strlen(link) + 1, 1), *o = out;
    for (const char *c = link; *c;) {
        bool at_start = c == link || (c[-1] == '>' && c[-2] == '-');
        if (at_start && strncmp(c, "node", 4) == 0 && c[4] >= '0' && c[4] <= '9') {
            *o++ = 'h';
            c += 4;
        } else {
            *o++ = *c++;
        }
    }
    return out;
}

static int check_link_name(struct name_check *nc, const struct topo_params *tp, struct cfg_node *n,
                           const char **out, struct cfg_error *err)
{
    const char *name;
    if (cfg_node_str(n, &name, err))
        return -1;
    if (!nc->t) {
        nc->sim = sim_create(0);
        nc->pool = nc->sim ? pkt_pool_create() : NULL;
        nc->t = nc->pool ? topo_create(nc->sim, tp, nc->pool) : NULL;
        if (!nc->t)
            return cfg_errorf(err, n, "cannot build the topology to check link '%s'", name);
    }
    struct link *ls[2];
    *out = name;
    if (world_find_links(nc->t, name, ls))
        return 0;
    /* suggest in the scenario's own spelling: h<i> for node<i> */
    unsigned nl = topo_n_links(nc->t);
    char **cands = xcalloc_or_die(nl, sizeof(*cands));
    for (unsigned i = 0; i < nl; i++)
        cands[i] = host_spelling(link_name(topo_link(nc->t, i)));
    const char *best = suggest_word(name, (const char *const *)cands, nl);
    char hint[160] = "";
    if (best)
        snprintf(hint, sizeof(hint), " (did you mean '%s'?)", best);
    int rc = cfg_errorf(err, n,
                        "unknown link '%s'%s: links are named 'from->to' like '%s' ('h<i>' and "
                        "'node<i>' are the same; 'a<->b' names both directions)",
                        name, hint, cands[nl - 1]);
    for (unsigned i = 0; i < nl; i++)
        free(cands[i]);
    free(cands);
    return rc;
}

/* topology.links: [{link, rate, delay, loss, corrupt}] */
static int read_link_overrides(struct scenario *s, struct cfg_node *seq, struct name_check *nc,
                               struct cfg_error *err)
{
    if (seq->kind != CFG_SEQ)
        return cfg_errorf(err, seq,
                          "'%s': expected a sequence of {link, rate, delay, loss, "
                          "corrupt}, got %s",
                          seq->path, cfg_kind_name(seq));
    s->link_overrides = xcalloc_or_die(seq->n ? seq->n : 1, sizeof(*s->link_overrides));
    for (size_t i = 0; i < seq->n; i++) {
        struct cfg_node *it = seq->items[i], *ln;
        struct scn_link_override *o = &s->link_overrides[i];
        const char *name;
        if (it->kind != CFG_MAP)
            return cfg_errorf(err, it, "'%s': expected a mapping {link, rate, ...}, got %s",
                              it->path, cfg_kind_name(it));
        if (cfg_req_node(it, "link", CFG_SCALAR, &ln, err) ||
            check_link_name(nc, &s->topo, ln, &name, err))
            return -1;
        o->link = xstrdup_or_die(name);
        s->n_link_overrides++;
        struct cfg_node *v;
        if ((v = cfg_child(it, "rate"))) {
            if (cfg_node_rate(v, &o->rate_bps, err) ||
                cfg_check_range(v, v->path, CFG_Q_RATE, o->rate_bps, MIN_LINK_RATE_BPS,
                                MAX_LINK_RATE_BPS, err))
                return -1;
            o->has_rate = true;
        }
        if ((v = cfg_child(it, "delay"))) {
            if (cfg_node_time(v, &o->delay_ps, err) || check_duration(v, o->delay_ps, err))
                return -1;
            o->has_delay = true;
        }
        if ((v = cfg_child(it, "loss"))) {
            if (scn_parse_prob(v, &o->loss_prob, err))
                return -1;
            o->has_loss = true;
        }
        if ((v = cfg_child(it, "corrupt"))) {
            if (scn_parse_prob(v, &o->corrupt_prob, err))
                return -1;
            o->has_corrupt = true;
        }
    }
    return 0;
}

/* topology.failures: [{link, at, recover_at}] */
static int read_failures(struct scenario *s, struct cfg_node *seq, struct name_check *nc,
                         struct cfg_error *err)
{
    if (seq->kind != CFG_SEQ)
        return cfg_errorf(err, seq, "'%s': expected a sequence of {link, at, recover_at}, got %s",
                          seq->path, cfg_kind_name(seq));
    s->failures = xcalloc_or_die(seq->n ? seq->n : 1, sizeof(*s->failures));
    for (size_t i = 0; i < seq->n; i++) {
        struct cfg_node *it = seq->items[i], *ln, *at;
        struct scn_failure *f = &s->failures[i];
        const char *name;
        if (it->kind != CFG_MAP)
            return cfg_errorf(err, it, "'%s': expected a mapping {link, at, recover_at}, got %s",
                              it->path, cfg_kind_name(it));
        if (cfg_req_node(it, "link", CFG_SCALAR, &ln, err) ||
            check_link_name(nc, &s->topo, ln, &name, err))
            return -1;
        f->link = xstrdup_or_die(name);
        s->nfailures++;
        if (cfg_req_node(it, "at", CFG_SCALAR, &at, err) || cfg_node_time(at, &f->at_ps, err) ||
            check_instant(at, f->at_ps, err) ||
            cfg_get_time(it, "recover_at", SIM_TIME_NEVER, &f->recover_at_ps, err) ||
            check_instant(cfg_child(it, "recover_at"), f->recover_at_ps, err))
            return -1;
        if (f->recover_at_ps != SIM_TIME_NEVER && f->recover_at_ps <= f->at_ps)
            return cfg_errorf(err, cfg_child(it, "recover_at"),
                              "'%s.recover_at' must be later than 'at'", it->path);
    }
    return 0;
}

/* topology.switch.programmable: true (the first switch: the star's sw0,
 * leaf0, edge0, ring0), false, or the name of the switch to make
 * programmable (leaf1, spine0, core2, ...). */
static int read_programmable(struct scenario *s, struct cfg_node *sw, struct cfg_error *err)
{
    struct cfg_node *pn = cfg_child(sw, "programmable");
    s->pswitch = false;
    if (!pn)
        return 0;
    int at = pn->kind == CFG_SCALAR ? topo_switch_index(&s->topo, pn->scalar) : -1;
    if (at < 0) {
        static const char *const words[] = {"true", "false", "yes", "no", "on", "off"};
        bool word = false;
        for (size_t i = 0; pn->kind == CFG_SCALAR && i < sizeof(words) / sizeof(words[0]); i++)
            word = word || strcasecmp(pn->scalar, words[i]) == 0;
        if (!word) {
            const struct topo_params *tp = &s->topo;
            unsigned h = tp->fat_tree_k / 2, ne = tp->fat_tree_k * h;
            char names[160];
            if (tp->kind == TOPO_LEAF_SPINE)
                snprintf(names, sizeof(names), "leaf0..leaf%u or spine0..spine%u", tp->n_leaves - 1,
                         tp->n_spines - 1);
            else if (tp->kind == TOPO_FAT_TREE)
                snprintf(names, sizeof(names), "edge0..edge%u, agg0..agg%u or core0..core%u",
                         ne - 1, ne - 1, h * h - 1);
            else if (tp->kind == TOPO_RING)
                snprintf(names, sizeof(names), "ring0..ring%u", tp->n_nodes - 1);
            else
                snprintf(names, sizeof(names), "sw0");
            return cfg_errorf(err, pn,
                              "'topology.switch.programmable': expected true, false or the name "
                              "of a switch of this topology (%s), got '%s'",
                              names, pn->kind == CFG_SCALAR ? pn->scalar : cfg_kind_name(pn));
        }
        if (cfg_get_bool(sw, "programmable", false, &s->pswitch, err))
            return -1;
        at = 0;
    } else {
        s->pswitch = true;
    }
    s->topo.switch_node = s->pswitch;
    s->topo.switch_node_at = (unsigned)at;
    return 0;
}

static int read_topology(struct scenario *s, struct cfg_node *root, struct name_check *nc,
                         struct cfg_error *err)
{
    struct cfg_node *topo, *hosts;
    int kind;
    uint64_t n = 0;
    fabric_defaults(&s->topo);
    if (cfg_req_node(root, "topology", CFG_MAP, &topo, err))
        return -1;
    struct cfg_node *kind_node;
    if (cfg_req_node(topo, "kind", CFG_SCALAR, &kind_node, err) ||
        cfg_get_enum(topo, "kind", topo_kinds, 0, &kind, err))
        return -1;
    s->topo.kind = topo_kind_values[kind];
    hosts = cfg_child(topo, "hosts");
    if (s->topo.kind == TOPO_LEAF_SPINE) {
        uint64_t l, sp, h;
        struct cfg_node *ln, *sn, *hn;
        if (cfg_req_node(topo, "leaves", CFG_SCALAR, &ln, err) || cfg_node_u64(ln, &l, err) ||
            cfg_req_node(topo, "spines", CFG_SCALAR, &sn, err) || cfg_node_u64(sn, &sp, err) ||
            cfg_req_node(topo, "hosts_per_leaf", CFG_SCALAR, &hn, err) || cfg_node_u64(hn, &h, err))
            return -1;
        if (l < 1 || l > MAX_HOSTS)
            return cfg_errorf(err, ln, "'topology.leaves': expected 1..%d, got %llu", MAX_HOSTS,
                              (unsigned long long)l);
        if (sp < 1 || sp > MAX_SPINES)
            return cfg_errorf(err, sn, "'topology.spines': expected 1..%d, got %llu", MAX_SPINES,
                              (unsigned long long)sp);
        if (h < 1 || l * h > MAX_HOSTS)
            return cfg_errorf(err, hn,
                              "'topology.hosts_per_leaf': expected 1..%llu (at most %d hosts), "
                              "got %llu",
                              (unsigned long long)(MAX_HOSTS / l), MAX_HOSTS,
                              (unsigned long long)h);
        if (l * sp > MAX_LEAF_SPINE_CABLES)
            return cfg_errorf(err, sn,
                              "'topology.spines': leaves x spines = %llu cables, more than the "
                              "%d this model holds (~1.3 KB of memory per link direction)",
                              (unsigned long long)(l * sp), MAX_LEAF_SPINE_CABLES);
        if (hosts && cfg_node_u64(hosts, &n, err))
            return -1;
        if (hosts && n != l * h)
            return cfg_errorf(err, hosts,
                              "'topology.hosts': leaves x hosts_per_leaf = %llu, not %llu",
                              (unsigned long long)(l * h), (unsigned long long)n);
        s->topo.n_leaves = (unsigned)l;
        s->topo.n_spines = (unsigned)sp;
        s->topo.hosts_per_leaf = (unsigned)h;
        n = l * h;
    } else if (s->topo.kind == TOPO_FAT_TREE) {
        uint64_t k;
        struct cfg_node *kn;
        if (cfg_req_node(topo, "k", CFG_SCALAR, &kn, err) || cfg_node_u64(kn, &k, err))
            return -1;
        if (k < 2 || k > MAX_FAT_TREE_K || k % 2)
            return cfg_errorf(err, kn,
                              "'topology.k': expected an even number 2..%d (k^3 / 4 hosts, at "
                              "most %d), got %llu",
                              MAX_FAT_TREE_K, MAX_HOSTS, (unsigned long long)k);
        if (hosts && cfg_node_u64(hosts, &n, err))
            return -1;
        if (hosts && n != k * k * k / 4)
            return cfg_errorf(
                err, hosts, "'topology.hosts': a fat tree of k = %llu has %llu, not %llu",
                (unsigned long long)k, (unsigned long long)(k * k * k / 4), (unsigned long long)n);
        s->topo.fat_tree_k = (unsigned)k;
        n = k * k * k / 4;
    } else {
        if (cfg_req_node(topo, "hosts", CFG_SCALAR, &hosts, err) || cfg_node_u64(hosts, &n, err))
            return -1;
        if (s->topo.kind == TOPO_BACK_TO_BACK && n != 2)
            return cfg_errorf(
                err, hosts,
                "'topology.hosts': a back-to-back topology has exactly 2 hosts, not %llu",
                (unsigned long long)n);
        if (s->topo.kind == TOPO_RING && (n < 3 || n > MAX_HOSTS))
            return cfg_errorf(err, hosts,
                              "'topology.hosts': a ring has 3..%d switches (one host each), "
                              "got %llu",
                              MAX_HOSTS, (unsigned long long)n);
        if (n < 1 || n > MAX_HOSTS)
            return cfg_errorf(err, hosts, "'topology.hosts': expected 1..%d hosts, got %llu",
                              MAX_HOSTS, (unsigned long long)n);
    }
    s->topo.n_nodes = (unsigned)n;

    struct cfg_node *link;
    struct link_params none = {0};
    if (cfg_req_node(topo, "link", CFG_MAP, &link, err) ||
        read_link_map(link, &none, &s->topo.link, err))
        return -1;
    struct cfg_node *spl = cfg_child(topo, "spine_link");
    if (spl && s->topo.kind != TOPO_LEAF_SPINE && s->topo.kind != TOPO_FAT_TREE)
        return cfg_errorf(err, spl,
                          "'topology.spine_link': only leaf-spine and fat-tree topologies have "
                          "cables between switches");
    if (spl) {
        if (spl->kind != CFG_MAP)
            return cfg_errorf(err, spl, "'topology.spine_link': expected a mapping, got %s",
                              cfg_kind_name(spl));
        if (read_link_map(spl, &s->topo.link, &s->topo.spine_link, err))
            return -1;
    }

    struct cfg_node *sw = cfg_child(topo, "switch");
    if (sw && s->topo.kind == TOPO_BACK_TO_BACK)
        return cfg_errorf(err, sw,
                          "'topology.switch': back-to-back has no switch (star, leaf-spine, "
                          "fat-tree and ring topologies have)");
    s->topo.sw.latency_ps = DEFAULT_SWITCH_LATENCY_PS;
    s->topo.sw.port_buffer_bytes = DEFAULT_SWITCH_BUFFER_BYTES;
    if (sw) {
        if (sw->kind != CFG_MAP)
            return cfg_errorf(err, sw, "'topology.switch': expected a mapping, got %s",
                              cfg_kind_name(sw));
        struct cfg_node *bn;
        /* cut-through (first bit in -> first bit out) or store-and-forward */
        static const char *const fwd_modes[] = {"cut-through", "store-and-forward", NULL};
        int fwd;
        if (cfg_get_time(sw, "latency", DEFAULT_SWITCH_LATENCY_PS, &s->topo.sw.latency_ps, err) ||
            check_duration(cfg_child(sw, "latency"), s->topo.sw.latency_ps, err) ||
            cfg_get_size(sw, "buffer", DEFAULT_SWITCH_BUFFER_BYTES, &s->topo.sw.port_buffer_bytes,
                         err) ||
            ((bn = cfg_child(sw, "buffer")) &&
             cfg_check_range(bn, bn->path, CFG_Q_SIZE, s->topo.sw.port_buffer_bytes, 0,
                             MAX_SWITCH_BUFFER_BYTES, err)) ||
            cfg_get_enum(sw, "forwarding", fwd_modes, 0, &fwd, err) ||
            read_programmable(s, sw, err))
            return -1;
        s->topo.sw.store_and_forward = fwd == 1;
    }
    struct cfg_node *rt = cfg_child(topo, "routing");
    if (rt && s->topo.kind == TOPO_BACK_TO_BACK)
        return cfg_errorf(err, rt,
                          "'topology.routing': a back-to-back topology has no switch to route");
    int mode;
    if (cfg_get_enum(topo, "routing", route_modes, ROUTE_ECMP, &mode, err) ||
        cfg_get_time(topo, "reroute_delay", 0, &s->topo.reroute_delay_ps, err) ||
        check_duration(cfg_child(topo, "reroute_delay"), s->topo.reroute_delay_ps, err))
        return -1;
    s->topo.sw.routing = (enum route_mode)mode;

    if (scn_read_lossless(s, topo, err))
        return -1;
    struct cfg_node *seq;
    if ((seq = cfg_child(topo, "links")) && read_link_overrides(s, seq, nc, err))
        return -1;
    if ((seq = cfg_child(topo, "failures")) && read_failures(s, seq, nc, err))
        return -1;
    return 0;
}

/* An output path of the scenario (`dir`: a directory to create or fill,
 * else a file to create), checked before anything runs: not empty, not a
 * directory where a file is wanted (nor a file where a directory is), and
 * creatable: every existing component a directory, the deepest existing
 * one writable (`make_parents`: missing directories will be created; else
 * the parent must exist).  Nothing is created here (loading has no side
 * effects). */
static int path_fail(char *why, size_t why_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int path_fail(char *why, size_t why_len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, why_len, fmt, ap);
    va_end(ap);
    return -1;
}

int check_output_path(const char *path, bool dir, bool make_parents, char *why, size_t why_len)
{
    struct stat st;
    size_t len = strlen(path);
    if (!len)
        return path_fail(why, why_len, "empty path");
    if (len >= 4096)
        return path_fail(why, why_len, "path longer than 4095 bytes");
    if (!dir && path[len - 1] == '/')
        return path_fail(why, why_len, "'%s' names a directory, not a file", path);
    if (stat(path, &st) == 0) {
        if (dir && !S_ISDIR(st.st_mode))
            return path_fail(why, why_len, "'%s' exists and is not a directory", path);
        if (!dir && S_ISDIR(st.st_mode))
            return path_fail(why, why_len, "'%s' is a directory, not a file", path);
        if (access(path, dir ? W_OK | X_OK : W_OK) != 0)
            return path_fail(why, why_len, "'%s' is not writable: %s", path, strerror(errno));
        return 0;
    }
    if (errno != ENOENT)
        return path_fail(why, why_len, "'%s': %s", path, strerror(errno));
    /* the deepest existing ancestor must be a writable directory */
    char *p = xstrdup_or_die(path);
    int rc = 0;
    for (;;) {
        char *slash = strrchr(p, '/');
        while (slash && slash > p && slash[-1] == '/')
            slash--; /* "a//b" */
        const char *parent = ".";
        if (slash == p) {
            parent = "/";
        } else if (slash) {
            *slash = '\0';
            parent = p;
        }
        if (stat(parent, &st) == 0) {
            if (!S_ISDIR(st.st_mode))
                rc = path_fail(why, why_len, "cannot create '%s': '%s' is not a directory", path,
                               parent);
            else if (access(parent, W_OK | X_OK) != 0)
                rc = path_fail(why, why_len, "cannot create '%s': directory '%s' is not writable",
                               path, parent);
            break;
        }
        if (errno != ENOENT) {
            rc = path_fail(why, why_len, "cannot create '%s': '%s': %s", path, parent,
                           strerror(errno));
            break;
        }
        if (!make_parents) {
            rc = path_fail(why, why_len, "cannot create '%s': directory '%s' does not exist", path,
                           parent);
            break;
        }
        if (!slash || slash == p)
            break;
    }
    free(p);
    return rc;
}

static int capture_path(struct cfg_node *n, const char *path, bool dir, struct cfg_error *err)
{
    char why[400];
    if (check_output_path(path, dir, true, why, sizeof(why)))
        return cfg_errorf(err, n, "'%s': %s", n->path, why);
    return 0;
}

/* capture: [{link, file, at}, {host, file}, {all: DIR}] */
static int read_captures(struct scenario *s, struct cfg_node *root, struct name_check *nc,
                         struct cfg_error *err)
{
    struct cfg_node *seq = cfg_child(root, "capture");
    if (!seq)
        return 0;
    if (seq->kind != CFG_SEQ)
        return cfg_errorf(err, seq,
                          "'capture': expected a sequence of {link, file}, {host, file} or "
                          "{all: DIR}, got %s",
                          cfg_kind_name(seq));
    s->captures = xcalloc_or_die(seq->n ? seq->n : 1, sizeof(*s->captures));
    for (size_t i = 0; i < seq->n; i++) {
        struct cfg_node *it = seq->items[i], *v;
        struct scn_capture *c = &s->captures[i];
        const char *str;
        if (it->kind != CFG_MAP)
            return cfg_errorf(err, it,
                              "'%s': expected a mapping {link, file}, {host, file} or {all: DIR}, "
                              "got %s",
                              it->path, cfg_kind_name(it));
        struct cfg_node *ln = cfg_child(it, "link"), *hn = cfg_child(it, "host"),
                        *an = cfg_child(it, "all");
        if ((ln != NULL) + (hn != NULL) + (an != NULL) != 1)
            return cfg_errorf(err, it, "'%s': give exactly one of 'link', 'host' or 'all'",
                              it->path);
        s->ncaptures++;
        if (an) {
            if (cfg_node_str(an, &str, err) || capture_path(an, str, true, err))
                return -1;
            c->kind = CAPTURE_ALL;
            c->path = xstrdup_or_die(str);
            continue;
        }
        if (ln) {
            if (check_link_name(nc, &s->topo, ln, &str, err))
                return -1;
            c->kind = CAPTURE_LINK;
            c->link = xstrdup_or_die(str);
            int tap;
            if (cfg_get_enum(it, "at", capture_taps, 0, &tap, err))
                return -1;
            c->rx = tap == 1;
        } else {
            if (cfg_node_str(hn, &str, err))
                return -1;
            long hi = host_index(str, s->topo.n_nodes);
            if (hi < 0)
                return cfg_errorf(err, hn, "unknown host '%s' (the topology has hosts h0..h%u)",
                                  str, s->topo.n_nodes - 1);
            c->kind = CAPTURE_HOST;
            c->host = (uint32_t)hi;
        }
        if (cfg_req_node(it, "file", CFG_SCALAR, &v, err) || cfg_node_str(v, &str, err) ||
            capture_path(v, str, false, err))
            return -1;
        c->path = xstrdup_or_die(str);
    }
    return 0;
}

long scn_host_index(const char *name, unsigned hosts)
{
    return host_index(name, hosts);
}

/* "h<i>" with i < hosts; -1 otherwise. */
static long host_index(const char *name, unsigned hosts)
{
    if (name[0] != 'h' || name[1] < '0' || name[1] > '9' || (name[1] == '0' && name[2]))
        return -1;
    long v = 0;
    for (const char *p = name + 1; *p; p++) {
        if (*p < '0' || *p > '9' || v > MAX_HOSTS)
            return -1;
        v = v * 10 + (*p - '0');
    }
    return v < (long)hosts ? v : -1;
}

/* ---------------------------------------------------------------- vars */

#define MAX_VAR_NAME 64

static bool var_name_ok(const char *n)
{
    size_t len = strlen(n);
    if (len == 0 || len > MAX_VAR_NAME || (n[0] >= '0' && n[0] <= '9'))
        return false;
    for (const char *c = n; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '_'))
            return false;
    return true;
}

/* vars: {name: scalar, ...}.  Keys grafted by --set (their key_file is
 * "--set") are errors: a --set may only override a variable of the file. */
static int read_vars(struct scenario *s, struct cfg_node *root, struct cfg_error *err)
{
    struct cfg_node *vars = cfg_child(root, "vars");
    if (!vars)
        return 0;
    if (vars->kind != CFG_MAP)
        return cfg_errorf(err, vars, "'vars': expected a mapping of name: value, got %s",
                          cfg_kind_name(vars));
    s->var_names = xcalloc_or_die(vars->n, sizeof(char *));
    s->var_values = xcalloc_or_die(vars->n, sizeof(char *));
    size_t nfile = 0;
    for (size_t i = 0; i < vars->n; i++)
        if (strcmp(vars->key_file[i], "--set") != 0)
            nfile++;
    const char **known = xcalloc_or_die(nfile + 1, sizeof(char *));
    for (size_t i = 0, k = 0; i < vars->n; i++)
        if (strcmp(vars->key_file[i], "--set") != 0)
            known[k++] = vars->keys[i];
    int rc = 0;
    for (size_t i = 0; i < vars->n && !rc; i++) {
        const char *key = vars->keys[i], *val;
        const char *kf = vars->key_file[i];
        if (strcmp(kf, "--set") == 0) {
            const char *best = suggest_word(key, known, nfile);
            char hint[160] = "";
            if (best)
                snprintf(hint, sizeof(hint), " (did you mean '%s'?)", best);
            snprintf(err->msg, sizeof(err->msg),
                     "%s:%u:%u: unknown variable 'vars.%s'%s: a --set can only override a "
                     "variable the scenario's 'vars:' defines",
                     kf, vars->key_line[i], vars->key_col[i], key, hint);
            rc = -1;
            break;
        }
        if (!var_name_ok(key)) {
            snprintf(err->msg, sizeof(err->msg),
                     "%s:%u:%u: bad variable name '%s': expected letters, digits and '_' (not "
                     "starting with a digit), at most %d characters",
                     kf, vars->key_line[i], vars->key_col[i], key, MAX_VAR_NAME);
            rc = -1;
            break;
        }
        struct cfg_node *v = cfg_child(vars, key);
        if (v->kind != CFG_SCALAR) {
            rc = cfg_errorf(err, v, "'vars.%s': expected a scalar value, got %s", key,
                            cfg_kind_name(v));
            break;
        }
        val = v->scalar ? v->scalar : "";
        s->var_names[s->nvars] = xstrdup_or_die(key);
        s->var_values[s->nvars] = xstrdup_or_die(val);
        s->nvars++;
    }
    free(known);
    return rc;
}

/* `in` (the text of node `at`) with ${name} replaced by the variable's
 * value and $$ by $; any other '$' stays as it is.  A malloc'd string in
 * *out, or -1 with an error at `at`. */
static int expand_vars(const struct scenario *s, struct cfg_node *at, const char *in, char **out,
                       struct cfg_error *err)
{
    size_t cap = strlen(in) + 1, len = 0;
    char *o = xcalloc_or_die(cap, 1);
    for (const char *c = in; *c;) {
        const char *piece = c;
        size_t plen = 1;
        if (c[0] == '$' && c[1] == '$') {
            c += 2;
        } else if (c[0] == '$' && c[1] == '{') {
            const char *end = strchr(c + 2, '}');
            if (!end) {
                free(o);
                return cfg_errorf(err, at, "'%s': unterminated '${' in '%s' (write $$ for a $)",
                                  at->path, in);
            }
            size_t nlen = (size_t)(end - (c + 2));
            size_t k = 0;
            while (k < s->nvars &&
                   (strlen(s->var_names[k]) != nlen || strncmp(s->var_names[k], c + 2, nlen)))
                k++;
            if (k == s->nvars) {
                char name[MAX_VAR_NAME + 8];
                snprintf(name, sizeof(name), "%.*s",
                         (int)(nlen < MAX_VAR_NAME + 1 ? nlen : MAX_VAR_NAME + 1), c + 2);
                const char *best = suggest_word(name, (const char *const *)s->var_names, s->nvars);
                char hint[160] = "";
                if (best)
                    snprintf(hint, sizeof(hint), " (did you mean '%s'?)", best);
                free(o);
                return cfg_errorf(err, at, "'%s': undefined variable '${%s}'%s%s", at->path, name,
                                  hint, s->nvars ? "" : "; define it under 'vars:'");
            }
            piece = s->var_values[k];
            plen = strlen(piece);
            c = end + 1;
        } else {
            c++;
        }
        if (len + plen + 1 > cap) {
            cap = (len + plen + 1) * 2;
            o = xrealloc_or_die(o, cap);
        }
        memcpy(o + len, piece, plen);
        len += plen;
        o[len] = '\0';
    }
    *out = o;
    return 0;
}

/* A string field of a program, with variables expanded (malloc'd). */
static int program_str(const struct scenario *s, struct cfg_node *n, char **out,
                       struct cfg_error *err)
{
    const char *raw;
    *out = NULL;
    if (cfg_node_str(n, &raw, err))
        return -1;
    return expand_vars(s, n, raw, out, err);
}

/* cpus: N or [N, ...] and socket: N of a program, checked against the
 * host's topology (hardware: host.sockets, ...; docs/host.md). */
static int read_program_cpus(struct scenario *s, struct cfg_node *item, struct scn_program *p,
                             struct cfg_error *err)
{
    const struct host_topo_params *tp = &s->hw.cpu.topo;
    uint32_t ncpus = tp->sockets * tp->cores_per_socket * tp->threads_per_core;
    p->socket = -1;
    struct cfg_node *cn = cfg_child(item, "cpus"), *sn = cfg_child(item, "socket");
    if (sn) {
        uint64_t v;
        if (cfg_node_u64(sn, &v, err))
            return -1;
        if (v >= tp->sockets)
            return cfg_errorf(err, sn, "'%s.socket': %llu, but the host has sockets 0..%u",
                              item->path, (unsigned long long)v, tp->sockets - 1);
        p->socket = (int)v;
    }
    if (!cn)
        return 0;
    size_t n = cn->kind == CFG_SEQ ? cn->n : 1;
    if (cn->kind != CFG_SEQ && cn->kind != CFG_SCALAR)
        return cfg_errorf(err, cn, "'%s.cpus': expected a CPU number or a list of them, got %s",
                          item->path, cfg_kind_name(cn));
    if (n == 0)
        return cfg_errorf(err, cn, "'%s.cpus': the list is empty", item->path);
    p->cpus = xcalloc_or_die(n, sizeof(*p->cpus));
    for (size_t i = 0; i < n; i++) {
        struct cfg_node *e = cn->kind == CFG_SEQ ? cn->items[i] : cn;
        uint64_t v;
        if (cfg_node_u64(e, &v, err))
            return -1;
        if (v >= ncpus)
            return cfg_errorf(err, e, "'%s.cpus': CPU %llu, but the host has CPUs 0..%u",
                              item->path, (unsigned long long)v, ncpus - 1);
        if (p->socket >= 0 && host_topo_cpu_socket(tp, (uint32_t)v) != (uint32_t)p->socket)
            return cfg_errorf(err, e, "'%s.cpus': CPU %llu is on socket %u, not on socket %d",
                              item->path, (unsigned long long)v,
                              host_topo_cpu_socket(tp, (uint32_t)v), p->socket);
        p->cpus[i] = (int)v;
        p->ncpus++;
    }
    return 0;
}

static int read_program(struct scenario *s, struct cfg_node *item, size_t idx,
                        struct cfg_error *err)
{
    struct scn_program *p = &s->progs[idx];
    p->so_fd = -1;
    if (item->kind != CFG_MAP)
        return cfg_errorf(err, item, "'%s': expected a mapping (host, program, args), got %s",
                          item->path, cfg_kind_name(item));
    struct cfg_node *hn, *pn;
    if (cfg_req_node(item, "host", CFG_SCALAR, &hn, err) || program_str(s, hn, &p->host, err))
        return -1;
    long hi = host_index(p->host, s->topo.n_nodes);
    if (hi < 0 && s->pswitch && strcmp(p->host, "sw0") == 0)
        hi = s->topo.n_nodes; /* the programmable switch's CPU */
    if (hi < 0)
        return cfg_errorf(err, hn, "unknown host '%s' (the topology has hosts h0..h%u%s)", p->host,
                          s->topo.n_nodes - 1,
                          s->pswitch ? " and the programmable switch's CPU sw0" : "");
    p->host_index = (uint32_t)hi;

    if (cfg_req_node(item, "program", CFG_SCALAR, &pn, err) || program_str(s, pn, &p->program, err))
        return -1;
    void *handle = NULL;
    if (program_resolve(p->program, s->file, pn, p, &handle, err))
        return -1;
    if (handle) {
        s->dl_handles = xrealloc_or_die(s->dl_handles, (s->n_dl + 1) * sizeof(void *));
        s->dl_handles[s->n_dl++] = handle;
    }

    struct cfg_node *args = cfg_child(item, "args");
    size_t nargs = 0;
    if (args) {
        if (args->kind != CFG_SEQ)
            return cfg_errorf(err, args, "'%s': expected a sequence of strings, got %s", args->path,
                              cfg_kind_name(args));
        nargs = args->n;
    }
    p->args = xcalloc_or_die(nargs + 1, sizeof(char *));
    for (size_t i = 0; i < nargs; i++) {
        if (program_str(s, args->items[i], &p->args[i], err))
            return -1;
        p->nargs++;
    }
    uint64_t stack;
    if (cfg_get_bool(item, "daemon", false, &p->daemon, err) ||
        cfg_get_size(item, "stack", SIM_PROC_DEFAULT_STACK_BYTES, &stack, err))
        return -1;
    if (stack < MIN_STACK_BYTES || stack > MAX_STACK_BYTES)
        return cfg_errorf(err, cfg_child(item, "stack"),
                          "'%s.stack': expected 64KiB..1GiB, got %llu bytes", item->path,
                          (unsigned long long)stack);
    p->stack_bytes = (size_t)stack;
    return read_program_cpus(s, item, p, err);
}

static int read_programs(struct scenario *s, struct cfg_node *root, const struct scenario_opts *o,
                         struct cfg_error *err)
{
    struct cfg_node *progs = cfg_child(root, "programs");
    if (o && o->emulate) {
        /* emulation mode (emu/): the programs are real processes */
        if (progs)
            return cfg_errorf(err, progs,
                              "'programs': emulation mode runs no simulated programs; attach real "
                              "ones with RNICSIM_HOST=<host> (docs/emulation.md), or use 'rnicsim "
                              "run' for this file");
        return 0;
    }
    if (s->has_traffic && !progs)
        return 0; /* the traffic generator alone */
    if (s->payload_none && progs)
        return cfg_errorf(err, progs,
                          "'programs': with 'payload: none' no byte that RDMA moves reaches "
                          "memory, so programs (which poll and check what RDMA writes) cannot "
                          "run: their data checks would read nothing; use the built-in "
                          "generator ('traffic:') or drop 'payload: none'");
    if (cfg_req_node(root, "programs", CFG_SEQ, &progs, err))
        return -1;
    if (progs->n == 0)
        return cfg_errorf(err, progs, "'programs': at least one program is needed");
    s->progs = xcalloc_or_die(progs->n, sizeof(*s->progs));
    s->nprogs = progs->n;
    for (size_t i = 0; i < progs->n; i++)
        s->progs[i].so_fd = -1;
    for (size_t i = 0; i < progs->n; i++)
        if (read_program(s, progs->items[i], i, err))
            return -1;
    return 0;
}

static int read_scenario(struct scenario *s, const struct scenario_opts *o, struct cfg_error *err)
{
    struct cfg_node *root = s->doc->root, *nn;
    const char *name, *desc, *profile;
    if (cfg_req_node(root, "name", CFG_SCALAR, &nn, err) || cfg_node_str(nn, &name, err))
        return -1;
    s->name = xstrdup_or_die(name);
    if (cfg_get_str(root, "description", "", &desc, err))
        return -1;
    s->description = xstrdup_or_die(desc);
    if (cfg_get_u64(root, "seed", DEFAULT_SEED, &s->seed, err) ||
        cfg_get_time(root, "stop_time", DEFAULT_STOP_TIME_PS, &s->stop_time_ps, err))
        return -1;
    if (o && o->have_seed)
        s->seed = o->seed;
    if (s->stop_time_ps == 0)
        return cfg_errorf(err, cfg_child(root, "stop_time"), "'stop_time' must be greater than 0");
    if (check_instant(cfg_child(root, "stop_time"), s->stop_time_ps, err))
        return -1;

    /* Hardware: C defaults -> profile -> hardware: (with --set grafted). */
    hw_profile_default(&s->hw);
    struct cfg_node *pn = cfg_child(root, "profile");
    if (pn) {
        if (cfg_node_str(pn, &profile, err))
            return -1;
        struct profile_search ps = {.cli_dir = o ? o->profiles_dir : NULL,
                                    .scenario_file = s->file};
        s->profile_name = xstrdup_or_die(profile);
        if (profile_load(profile, &ps, pn, &s->hw, &s->profile_path, err))
            return -1;
    } else {
        s->profile_name = xstrdup_or_die("");
    }
    if (params_apply_map(&s->hw, cfg_child(root, "hardware"), "hardware", err) ||
        params_check(&s->hw, cfg_child(root, "hardware"), pn ? pn : root, err))
        return -1;
    char why[256];
    if (host_params_check(&s->hw.cpu, why, sizeof(why)) ||
        pcie_params_check(&s->hw.pcie, why, sizeof(why))) {
        struct cfg_node *at = cfg_child(root, "hardware");
        return cfg_errorf(err, at ? at : pn ? pn : root, "%s%s", at || pn ? "" : "hardware: ", why);
    }

    if (read_vars(s, root, err))
        return -1;
    struct name_check nc = {0};
    int rc = read_topology(s, root, &nc, err) || read_captures(s, root, &nc, err);
    name_check_free(&nc);
    if (rc || scn_read_payload(s, root, err) || scn_read_traffic(s, root, err) ||
        read_programs(s, root, o, err))
        return -1;
    return cfg_check_unused(root, "", err);
}

struct scenario *scenario_load(const char *file, const char *text, const struct scenario_opts *o,
                               struct cfg_error *err)
{
    struct scenario *s = xcalloc_or_die(1, sizeof(*s));
    s->file = xstrdup_or_die(file);
    s->doc = text ? cfg_load_string(file, text, err) : cfg_load_file(file, err);
    if (!s->doc)
        goto fail;
    for (size_t i = 0; o && i < o->nsets; i++)
        if (cfg_set(s->doc, o->sets[i], err))
            goto fail;
    if (read_scenario(s, o, err))
        goto fail;
    return s;
fail:
    scenario_free(s);
    return NULL;
}

void scenario_free(struct scenario *s)
{
    if (!s)
        return;
#ifndef RNICSIM_SANITIZE /* kept for LeakSanitizer's frames: run.c */
    for (size_t i = 0; i < s->n_dl; i++)
        dlclose(s->dl_handles[i]);
#endif
    free(s->dl_handles);
    for (size_t i = 0; i < s->nprogs; i++) {
        struct scn_program *p = &s->progs[i];
        if (p->so_fd >= 0) /* a private copy, unloaded just above */
            close(p->so_fd);
        free(p->host);
        free(p->program);
        free(p->so_path);
        for (size_t k = 0; k < p->nargs; k++)
            free(p->args[k]);
        free(p->args);
        free(p->cpus);
    }
    free(s->progs);
    free(s->traffic_flows_file);
    for (size_t i = 0; i < s->nvars; i++) {
        free(s->var_names[i]);
        free(s->var_values[i]);
    }
    free(s->var_names);
    free(s->var_values);
    for (size_t i = 0; i < s->n_link_overrides; i++)
        free(s->link_overrides[i].link);
    free(s->link_overrides);
    for (size_t i = 0; i < s->nfailures; i++)
        free(s->failures[i].link);
    free(s->failures);
    for (size_t i = 0; i < s->ncaptures; i++) {
        free(s->captures[i].link);
        free(s->captures[i].path);
    }
    free(s->captures);

    if (s->doc)
        cfg_free(s->doc);
    free(s->file);
    free(s->name);
    free(s->description);
    free(s->profile_name);
    free(s->profile_path);
    free(s);
}
