/* Building the simulated world of a scenario: one simulator, a packet pool,
 * the topology (links and switches, with the scenario's per-link overrides,
 * scheduled link failures and capture files), and for every host h<i>: the
 * host model, a PCIe link and an RNIC that is fabric node i.
 *
 *   host h<i> --PCIe "h<i>.pcie"-- NIC (node i) --topo_uplink(i)--> fabric
 *                                       ^---- topo_attach(i) <----'
 *
 * With topology.switch.programmable, sw0 is taken over by a programmable
 * switch (sim/pswitch) that is fabric node `hosts` and has its own CPU. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sim/fabric/pcap.h"
#include "tools/rnicsim/rnicsim.h"

/* "h<digits>" -> "node<digits>"; anything else is copied. */
static void endpoint_name(const char *s, size_t len, char *out, size_t cap)
{
    bool host = len >= 2 && s[0] == 'h';
    for (size_t i = 1; host && i < len; i++)
        host = s[i] >= '0' && s[i] <= '9';
    snprintf(out, cap, "%s%.*s", host ? "node" : "", (int)(host ? len - 1 : len), host ? s + 1 : s);
}

unsigned world_find_links(const struct topology *t, const char *name, struct link *out[2])
{
    const char *arrow = strstr(name, "<->");
    bool both = arrow != NULL;
    if (!arrow)
        arrow = strstr(name, "->");
    if (!arrow)
        return 0;
    char a[64], b[64], n1[140], n2[140];
    endpoint_name(name, (size_t)(arrow - name), a, sizeof(a));
    const char *rest = arrow + (both ? 3 : 2);
    endpoint_name(rest, strlen(rest), b, sizeof(b));
    snprintf(n1, sizeof(n1), "%s->%s", a, b);
    snprintf(n2, sizeof(n2), "%s->%s", b, a);
    out[0] = topo_find_link(t, n1);
    if (!out[0])
        return 0;
    if (!both)
        return 1;
    out[1] = topo_find_link(t, n2);
    return out[1] ? 2 : 0;
}

/* mkdir -p of `dir` (a writable copy is made). */
static int make_dirs(const char *dir)
{
    if (!dir[0]) {
        errno = ENOENT;
        return -1;
    }
    char *p = xstrdup_or_die(dir);
    int rc = 0;
    for (char *c = p + 1; *c && rc == 0; c++) {
        if (*c != '/')
            continue;
        *c = '\0';
        if (mkdir(p, 0777) != 0 && errno != EEXIST)
            rc = -1;
        *c = '/';
    }
    if (rc == 0 && p[0] && mkdir(p, 0777) != 0 && errno != EEXIST)
        rc = -1;
    free(p);
    return rc;
}

/* pcap_va_fn: a RETH / AtomicETH address as the wire shows it, from the
 * MR of its key at the destination (requests) or else at the source; 0
 * when no MR has the key any more (deterministic either way). */
static uint64_t capture_va(void *ctx, const struct pkt *p, uint32_t rkey, uint64_t va)
{
    struct world *w = ctx;
    uint64_t out;
    uint32_t nodes[2] = {p->dst_node, p->src_node};
    for (int i = 0; i < 2; i++)
        if (nodes[i] < w->nhosts && w->nics && w->nics[nodes[i]] &&
            nic_wire_va(w->nics[nodes[i]], rkey, va, &out))
            return out;
    return 0;
}

/* The writer of `path` (opened once, shared by every tap that names it). */
static struct pcap_writer *capture_file(struct world *w, const char *path, enum pcap_link link,
                                        char *why, size_t why_len)
{
    for (size_t i = 0; i < w->npcaps; i++)
        if (strcmp(pcap_path(w->pcaps[i]), path) == 0)
            return w->pcaps[i];
    const char *slash = strrchr(path, '/');
    if (slash && slash != path) {
        char *dir = xstrdup_or_die(path);
        dir[slash - path] = '\0';
        int rc = make_dirs(dir);
        if (rc)
            snprintf(why, why_len, "cannot create directory '%s': %s", dir, strerror(errno));
        free(dir);
        if (rc)
            return NULL;
    }
    struct pcap_writer *pw = pcap_open_link(path, link, why, why_len);
    if (!pw)
        return NULL;
    pcap_set_va_map(pw, capture_va, w);
    w->pcaps = xrealloc_or_die(w->pcaps, (w->npcaps + 1) * sizeof(*w->pcaps));
    w->pcaps[w->npcaps++] = pw;
    return pw;
}

static int tap_or_fail(struct link *l, struct pcap_writer *pw, enum link_tap where, char *why,
                       size_t why_len)
{
    if (link_add_capture(l, pw, where) == 0)
        return 0;
    snprintf(why, why_len, "link %s: more than %d captures", link_name(l), LINK_MAX_TAPS);
    return -1;
}

static int setup_captures(struct world *w, const struct scenario *s, char *why, size_t why_len)
{
    /* what the fabric's ports carry: one link layer for every host */
    enum pcap_link link =
        s->hw.nic.link_layer == NIC_LINK_IB ? PCAP_LINK_IB_ERF : PCAP_LINK_ETHERNET;
    for (size_t i = 0; i < s->ncaptures; i++) {
        const struct scn_capture *c = &s->captures[i];
        struct pcap_writer *pw;
        if (c->kind == CAPTURE_ALL) {
            if (make_dirs(c->path)) {
                snprintf(why, why_len, "cannot create directory '%s': %s", c->path,
                         strerror(errno));
                return -1;
            }
            for (unsigned k = 0; k < topo_n_links(w->topo); k++) {
                struct link *l = topo_link(w->topo, k);
                const char *name = link_name(l), *arrow = strstr(name, "->");
                char *file = arrow ? xasprintf("%s/%.*s-to-%s.pcap", c->path, (int)(arrow - name),
                                               name, arrow + 2)
                                   : xasprintf("%s/%s.pcap", c->path, name);
                pw = capture_file(w, file, link, why, why_len);
                free(file);
                if (!pw || tap_or_fail(l, pw, LINK_TAP_TX, why, why_len))
                    return -1;
            }
            continue;
        }
        if (!(pw = capture_file(w, c->path, link, why, why_len)))
            return -1;
        if (c->kind == CAPTURE_HOST) {
            /* what the NIC port sees: its transmissions, and arrivals */
            if (tap_or_fail(topo_uplink(w->topo, c->host), pw, LINK_TAP_TX, why, why_len) ||
                tap_or_fail(topo_downlink(w->topo, c->host), pw, LINK_TAP_RX, why, why_len))
                return -1;
            continue;
        }
        struct link *ls[2];
        unsigned n = world_find_links(w->topo, c->link, ls);
        if (n == 0) {
            snprintf(why, why_len, "capture: unknown link '%s'", c->link);
            return -1;
        }
        for (unsigned k = 0; k < n; k++)
            if (tap_or_fail(ls[k], pw, c->rx ? LINK_TAP_RX : LINK_TAP_TX, why, why_len))
                return -1;
    }
    return 0;
}

/* Per-link overrides and scheduled failures. */
static int setup_links(struct world *w, const struct scenario *s, char *why, size_t why_len)
{
    struct link *ls[2];
    for (size_t i = 0; i < s->n_link_overrides; i++) {
        const struct scn_link_override *o = &s->link_overrides[i];
        unsigned n = world_find_links(w->topo, o->link, ls);
        if (n == 0) {
            snprintf(why, why_len, "topology.links: unknown link '%s'", o->link);
            return -1;
        }
        for (unsigned k = 0; k < n; k++) {
            struct link_params lp = *link_get_params(ls[k]);
            if (o->has_rate)
                lp.rate_bps = o->rate_bps;
            if (o->has_delay)
                lp.delay_ps = o->delay_ps;
            if (o->has_loss)
                lp.loss_prob = o->loss_prob;
            if (o->has_corrupt)
                lp.corrupt_prob = o->corrupt_prob;
            if (link_set_params(ls[k], &lp)) {
                snprintf(why, why_len, "topology.links: bad parameters for '%s'", o->link);
                return -1;
            }
        }
    }
    for (size_t i = 0; i < s->nfailures; i++) {
        const struct scn_failure *f = &s->failures[i];
        unsigned n = world_find_links(w->topo, f->link, ls);
        if (n == 0) {
            snprintf(why, why_len, "topology.failures: unknown link '%s'", f->link);
            return -1;
        }
        for (unsigned k = 0; k < n; k++)
            if (topo_schedule_link_state(w->topo, ls[k], f->at_ps, false) ||
                (f->recover_at_ps != SIM_TIME_NEVER &&
                 topo_schedule_link_state(w->topo, ls[k], f->recover_at_ps, true))) {
                snprintf(why, why_len, "topology.failures: cannot schedule '%s'", f->link);
                return -1;
            }
    }
    return 0;
}

/* A NIC's first QP joined a multicast group, or its last left: the
 * fabric's trees follow (IGMP's job). */
static int mcast_notify(void *ctx, uint32_t node, uint32_t group, bool join)
{
    if (topo_mcast_join(ctx, group, node, join) == 0)
        return 0;
    int e = errno ? errno : ENOMEM;
    if (join)
        fprintf(stderr, "rnicsim: ibv_attach_mcast on node %u: %s\n", node, strerror(e));
    return e;
}

/* Every host's peer devices (hardware gpu.*, fpga.*): a PCIe link each,
 * on which the NIC's DMA to device memory is timed (sim/nic/peer.c). */
static int make_devices(struct world *w, const struct scenario *s, char *why, size_t why_len)
{
    w->dev_links = xcalloc_or_die(w->nhosts * HW_N_DEVICES, sizeof(*w->dev_links));
    w->dev_used = xcalloc_or_die(w->nhosts * HW_N_DEVICES, sizeof(*w->dev_used));
    for (size_t i = 0; i < w->nhosts; i++)
        for (size_t d = 0; d < HW_N_DEVICES; d++) {
            const struct pu_dev_params *dp = &s->hw.dev[d];
            if (!dp->mem_bytes)
                continue;
            struct pcie_params pp = s->hw.pcie;
            pp.gen = dp->gen;
            pp.lanes = dp->lanes;
            pp.read_latency_ps = dp->read_latency_ps;
            pp.write_latency_ps = dp->write_latency_ps;
            char name[48];
            snprintf(name, sizeof(name), "h%zu.%s", i, hw_device_names[d]);
            if (!(w->dev_links[i * HW_N_DEVICES + d] = pcie_link_create(w->sim, name, &pp))) {
                snprintf(why, why_len, "cannot create the PCIe link of %s", name);
                return -1;
            }
        }
    return 0;
}

struct world *world_build(const struct scenario *s, char *why, size_t why_len)
{
    struct world *w = xcalloc_or_die(1, sizeof(*w));
    w->sim = sim_create(s->seed);
    w->pool = !w->sim ? NULL : s->payload_none ? pkt_pool_create_headers_only() : pkt_pool_create();
    if (!w->sim || !w->pool) {
        snprintf(why, why_len, "cannot create the simulator");
        world_free(w);
        return NULL;
    }
    w->topo = topo_create(w->sim, &s->topo, w->pool);
    if (!w->topo) {
        snprintf(why, why_len, "cannot create the topology");
        world_free(w);
        return NULL;
    }
    if (s->pswitch &&
        !(w->pswitch = ps_create(w->sim, topo_switch(w->topo, s->topo.switch_node_at),
                                 s->topo.n_nodes, &s->hw.pswitch, &s->hw.cpu, w->pool))) {
        snprintf(why, why_len,
                 "cannot create the programmable switch (pswitch.stages 1..32, "
                 "rates above 0)");
        world_free(w);
        return NULL;
    }
    if (setup_links(w, s, why, why_len) || setup_captures(w, s, why, why_len)) {
        world_free(w);
        return NULL;
    }
    w->nhosts = s->topo.n_nodes;
    w->hosts = xcalloc_or_die(w->nhosts, sizeof(*w->hosts));
    w->pcie = xcalloc_or_die(w->nhosts, sizeof(*w->pcie));
    w->nics = xcalloc_or_die(w->nhosts, sizeof(*w->nics));
    for (size_t i = 0; i < w->nhosts; i++) {
        char name[32];
        snprintf(name, sizeof(name), "h%zu", i);
        host_init(&w->hosts[i], w->sim, (uint32_t)i, name, &s->hw.cpu);
        snprintf(name, sizeof(name), "h%zu.pcie", i);
        w->pcie[i] = pcie_link_create(w->sim, name, &s->hw.pcie);
        if (w->pcie[i])
            pcie_set_trace_id(w->pcie[i], (uint32_t)i); /* host i (traces) */
        if (!w->pcie[i]) {
            snprintf(why, why_len, "cannot create PCIe link %s", name);
            world_free(w);
            return NULL;
        }
        w->nics[i] = nic_create(w->sim, &w->hosts[i], (uint32_t)i, &s->hw.nic, w->pcie[i], w->pool);
        if (!w->nics[i]) {
            snprintf(why, why_len, "cannot create the NIC of h%zu", i);
            world_free(w);
            return NULL;
        }
        w->hosts[i].nic = w->nics[i];
        w->hosts[i].hugepages = s->hw.nic.hugepages; /* the CPU's pages too (sim/host/tlb.c) */
        nic_attach_uplink(w->nics[i], topo_uplink(w->topo, (uint32_t)i));
        nic_set_mcast_notify(w->nics[i], mcast_notify, w->topo);
        topo_attach(w->topo, (uint32_t)i, nic_sink(w->nics[i]));
    }
    if (make_devices(w, s, why, why_len)) {
        world_free(w);
        return NULL;
    }
    return w;
}

int world_close_captures(struct world *w)
{
    int rc = 0;
    for (size_t i = 0; i < w->npcaps; i++) {
        char why[600];
        if (pcap_close(w->pcaps[i], why, sizeof(why))) {
            fprintf(stderr, "rnicsim: capture: %s\n", why);
            rc = -1;
        }
    }
    w->npcaps = 0; /* closed (the links' taps are not used again) */
    return rc;
}

/* Teardown order: processes (with the simulator) last, since NIC and
 * topology destructors only free their own memory. */
void world_free(struct world *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->nhosts; i++) {
        if (w->nics && w->nics[i])
            nic_destroy(w->nics[i]);
        if (w->pcie && w->pcie[i])
            pcie_link_destroy(w->pcie[i]);
        if (w->hosts)
            host_fini(&w->hosts[i]);
    }
    for (size_t i = 0; w->dev_links && i < w->nhosts * HW_N_DEVICES; i++)
        pcie_link_destroy(w->dev_links[i]);
    for (size_t i = 0; i < w->n_dev_allocs; i++)
        free(w->dev_allocs[i].p);
    free(w->dev_allocs);
    free(w->dev_links);
    free(w->dev_used);
    ps_destroy(w->pswitch);
    if (w->topo)
        topo_destroy(w->topo);
    world_close_captures(w);
    free(w->pcaps);
    if (w->sim)
        sim_destroy(w->sim);
    if (w->pool)
        pkt_pool_destroy(w->pool);
    free(w->nics);
    free(w->pcie);
    free(w->hosts);
    free(w);
}

uint64_t world_pkts_tx(const struct world *w)
{
    uint64_t n = 0;
    for (size_t i = 0; i < w->nhosts; i++)
        n += nic_get_counters(w->nics[i])->pkts_tx;
    return n;
}
