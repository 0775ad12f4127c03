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
 *     kind: star                star | back-to-back
 *     hosts: 2                  hosts h0..h(N-1)
 *     link: {rate: 100Gbps, delay: 10ns}
 *     switch: {latency: 300ns, buffer: 1MiB}   star only
 *   programs:                   required, at least one
 *     - {host: h1, program: perftest, args: [...], daemon: false, stack: 256KiB}
 *
 * Order: C defaults -> profile file -> `hardware:` -> --set (the --set
 * assignments are grafted into the document before it is read, so they
 * override the scenario's own values and are checked the same way). */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
#define MIN_STACK_BYTES ((uint64_t)64 * 1024)
#define MAX_STACK_BYTES ((uint64_t)1 << 30)

static const char *const topo_kinds[] = {"star", "back-to-back", NULL};

static int read_link(struct cfg_node *topo, struct link_params *lp, struct cfg_error *err)
{
    struct cfg_node *link;
    if (cfg_req_node(topo, "link", CFG_MAP, &link, err))
        return -1;
    struct cfg_node *rate;
    if (cfg_req_node(link, "rate", CFG_SCALAR, &rate, err) ||
        cfg_node_rate(rate, &lp->rate_bps, err) ||
        cfg_get_time(link, "delay", 0, &lp->delay_ps, err))
        return -1;
    if (lp->rate_bps == 0)
        return cfg_errorf(err, rate, "'topology.link.rate' must be greater than 0");
    lp->queue_bytes = 0; /* NIC egress: unbounded (the NIC paces itself) */
    return 0;
}

static int read_topology(struct scenario *s, struct cfg_node *root, struct cfg_error *err)
{
    struct cfg_node *topo, *hosts;
    int kind;
    uint64_t n;
    if (cfg_req_node(root, "topology", CFG_MAP, &topo, err))
        return -1;
    struct cfg_node *kind_node;
    if (cfg_req_node(topo, "kind", CFG_SCALAR, &kind_node, err) ||
        cfg_get_enum(topo, "kind", topo_kinds, 0, &kind, err))
        return -1;
    if (cfg_req_node(topo, "hosts", CFG_SCALAR, &hosts, err) || cfg_node_u64(hosts, &n, err))
        return -1;
    s->topo.kind = kind == 0 ? TOPO_STAR : TOPO_BACK_TO_BACK;
    if (s->topo.kind == TOPO_BACK_TO_BACK && n != 2)
        return cfg_errorf(err, hosts,
                          "'topology.hosts': a back-to-back topology has exactly 2 hosts, not %llu",
                          (unsigned long long)n);
    if (n < 1 || n > MAX_HOSTS)
        return cfg_errorf(err, hosts, "'topology.hosts': expected 1..%d hosts, got %llu", MAX_HOSTS,
                          (unsigned long long)n);
    s->topo.n_nodes = (unsigned)n;
    if (read_link(topo, &s->topo.link, err))
        return -1;
    struct cfg_node *sw = cfg_child(topo, "switch");
    if (sw && s->topo.kind != TOPO_STAR)
        return cfg_errorf(err, sw, "'topology.switch': only a star topology has a switch");
    s->topo.sw.latency_ps = DEFAULT_SWITCH_LATENCY_PS;
    s->topo.sw.port_buffer_bytes = DEFAULT_SWITCH_BUFFER_BYTES;
    if (sw) {
        if (sw->kind != CFG_MAP)
            return cfg_errorf(err, sw, "'topology.switch': expected a mapping, got %s",
                              cfg_kind_name(sw));
        if (cfg_get_time(sw, "latency", DEFAULT_SWITCH_LATENCY_PS, &s->topo.sw.latency_ps, err) ||
            cfg_get_size(sw, "buffer", DEFAULT_SWITCH_BUFFER_BYTES, &s->topo.sw.port_buffer_bytes,
                         err))
            return -1;
    }
    return 0;
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

static int read_program(struct scenario *s, struct cfg_node *item, size_t idx,
                        struct cfg_error *err)
{
    struct scn_program *p = &s->progs[idx];
    if (item->kind != CFG_MAP)
        return cfg_errorf(err, item, "'%s': expected a mapping (host, program, args), got %s",
                          item->path, cfg_kind_name(item));
    struct cfg_node *hn, *pn;
    const char *host, *prog;
    if (cfg_req_node(item, "host", CFG_SCALAR, &hn, err) || cfg_node_str(hn, &host, err))
        return -1;
    long hi = host_index(host, s->topo.n_nodes);
    if (hi < 0)
        return cfg_errorf(err, hn, "unknown host '%s' (the topology has hosts h0..h%u)", host,
                          s->topo.n_nodes - 1);
    p->host = xstrdup_or_die(host);
    p->host_index = (uint32_t)hi;

    if (cfg_req_node(item, "program", CFG_SCALAR, &pn, err) || cfg_node_str(pn, &prog, err))
        return -1;
    p->program = xstrdup_or_die(prog);
    void *handle = NULL;
    if (program_resolve(prog, s->file, pn, p, &handle, err))
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
        const char *a;
        if (cfg_node_str(args->items[i], &a, err))
            return -1;
        p->args[i] = xstrdup_or_die(a);
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
    return 0;
}

static int read_programs(struct scenario *s, struct cfg_node *root, struct cfg_error *err)
{
    struct cfg_node *progs;
    if (cfg_req_node(root, "programs", CFG_SEQ, &progs, err))
        return -1;
    if (progs->n == 0)
        return cfg_errorf(err, progs, "'programs': at least one program is needed");
    s->progs = xcalloc_or_die(progs->n, sizeof(*s->progs));
    s->nprogs = progs->n;
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
    if (params_apply_map(&s->hw, cfg_child(root, "hardware"), "hardware", err))
        return -1;

    if (read_topology(s, root, err) || read_programs(s, root, err))
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
    for (size_t i = 0; i < s->nprogs; i++) {
        struct scn_program *p = &s->progs[i];
        free(p->host);
        free(p->program);
        free(p->so_path);
        for (size_t k = 0; k < p->nargs; k++)
            free(p->args[k]);
        free(p->args);
    }
    free(s->progs);
    for (size_t i = 0; i < s->n_dl; i++)
        dlclose(s->dl_handles[i]);
    free(s->dl_handles);
    if (s->doc)
        cfg_free(s->doc);
    free(s->file);
    free(s->name);
    free(s->description);
    free(s->profile_name);
    free(s->profile_path);
    free(s);
}
