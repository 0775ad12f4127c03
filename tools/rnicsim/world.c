/* Building the simulated world of a scenario: one simulator, a packet pool,
 * the topology (links and, for a star, one switch), and for every host
 * h<i>: the host model, a PCIe link and an RNIC that is fabric node i.
 *
 *   host h<i> --PCIe "h<i>.pcie"-- NIC (node i) --topo_uplink(i)--> fabric
 *                                       ^---- topo_attach(i) <----'      */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/rnicsim/rnicsim.h"

struct world *world_build(const struct scenario *s, char *why, size_t why_len)
{
    struct world *w = xcalloc_or_die(1, sizeof(*w));
    w->sim = sim_create(s->seed);
    w->pool = w->sim ? pkt_pool_create() : NULL;
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
        nic_attach_uplink(w->nics[i], topo_uplink(w->topo, (uint32_t)i));
        topo_attach(w->topo, (uint32_t)i, nic_sink(w->nics[i]));
    }
    return w;
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
    }
    if (w->topo)
        topo_destroy(w->topo);
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
