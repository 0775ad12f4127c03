/* Results of a run: the JSON document (deterministic: the same scenario
 * and seed give a byte-identical file; no wall-clock value in it) and the
 * readable summary printed after the run (where wall-clock time and
 * events/s do appear).
 *
 * JSON layout:
 *   {"rnicsim": "0.1", "scenario", "file", "seed", "profile", "result",
 *    "sim_time_ps", "events",
 *    "vars": {"qps": "64", ...}   (the scenario's vars: after --set, as strings)
 *    "params": {"nic.tx_pkt_proc": 5000, ...}   (base units: ps, bps, bytes)
 *    "topology": {...},
 *    "programs": [{"host", "program", "args", "daemon", "finished", "exit_code"}],
 *    "tables": {"write_lat": [{row}, ...], ...}  (host_report, report order)
 *    "counters": {"hosts": {"h0": {"host": {...}, "nic": {...}, "pcie": {...},
 *                                  "fabric": {"pkts_delivered", "pkts_reordered"}}},
 *                 "links": {"<name>": {...}}, "switches": {"<name>": {...}}}} */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/config/json.h"
#include "tools/rnicsim/rnicsim.h"

void format_time(sim_time_t ps, char *buf, size_t len)
{
    if (ps < SIM_US)
        snprintf(buf, len, "%.3f ns", (double)ps / 1e3);
    else if (ps < SIM_MS)
        snprintf(buf, len, "%.3f us", (double)ps / 1e6);
    else if (ps < SIM_S)
        snprintf(buf, len, "%.3f ms", (double)ps / 1e9);
    else
        snprintf(buf, len, "%.3f s", (double)ps / 1e12);
}

static void write_params(struct json_writer *w, const struct scenario *s)
{
    json_kv_object_begin(w, "params");
    for (size_t i = 0; i < hw_params_count; i++) {
        const struct param_def *d = &hw_params[i];
        if (d->kind == PARAM_BOOL)
            json_kv_bool(w, d->key, param_value(&s->hw, d) != 0);
        else if (d->kind == PARAM_ENUM)
            json_kv_str(w, d->key, d->names[param_value(&s->hw, d)]);
        else
            json_kv_u64(w, d->key, param_value(&s->hw, d));
    }
    json_object_end(w);
    const struct topo_params *tp = &s->topo;
    json_kv_object_begin(w, "topology");
    json_kv_str(w, "kind",
                tp->kind == TOPO_STAR         ? "star"
                : tp->kind == TOPO_LEAF_SPINE ? "leaf-spine"
                : tp->kind == TOPO_FAT_TREE   ? "fat-tree"
                : tp->kind == TOPO_RING       ? "ring"
                                              : "back-to-back");
    json_kv_u64(w, "hosts", tp->n_nodes);
    json_kv_u64(w, "link.rate", tp->link.rate_bps);
    json_kv_u64(w, "link.delay", tp->link.delay_ps);
    json_kv_double(w, "link.loss", tp->link.loss_prob);
    json_kv_double(w, "link.corrupt", tp->link.corrupt_prob);
    if (tp->kind == TOPO_LEAF_SPINE || tp->kind == TOPO_FAT_TREE) {
        const struct link_params *sl = tp->spine_link.rate_bps ? &tp->spine_link : &tp->link;
        if (tp->kind == TOPO_FAT_TREE) {
            json_kv_u64(w, "k", tp->fat_tree_k);
        } else {
            json_kv_u64(w, "leaves", tp->n_leaves);
            json_kv_u64(w, "spines", tp->n_spines);
            json_kv_u64(w, "hosts_per_leaf", tp->hosts_per_leaf);
        }
        json_kv_u64(w, "spine_link.rate", sl->rate_bps);
        json_kv_u64(w, "spine_link.delay", sl->delay_ps);
        json_kv_double(w, "spine_link.loss", sl->loss_prob);
        json_kv_double(w, "spine_link.corrupt", sl->corrupt_prob);
    }
    if (tp->kind != TOPO_BACK_TO_BACK) {
        json_kv_u64(w, "switch.latency", tp->sw.latency_ps);
        json_kv_u64(w, "switch.buffer", tp->sw.port_buffer_bytes);
        json_kv_str(w, "routing", route_mode_name(tp->sw.routing));
    }
    json_kv_u64(w, "reroute_delay", tp->reroute_delay_ps);
    json_kv_array_begin(w, "links");
    for (size_t i = 0; i < s->n_link_overrides; i++) {
        const struct scn_link_override *o = &s->link_overrides[i];
        json_object_begin(w);
        json_kv_str(w, "link", o->link);
        if (o->has_rate)
            json_kv_u64(w, "rate", o->rate_bps);
        if (o->has_delay)
            json_kv_u64(w, "delay", o->delay_ps);
        if (o->has_loss)
            json_kv_double(w, "loss", o->loss_prob);
        if (o->has_corrupt)
            json_kv_double(w, "corrupt", o->corrupt_prob);
        json_object_end(w);
    }
    json_array_end(w);
    json_kv_array_begin(w, "failures");
    for (size_t i = 0; i < s->nfailures; i++) {
        const struct scn_failure *f = &s->failures[i];
        json_object_begin(w);
        json_kv_str(w, "link", f->link);
        json_kv_u64(w, "at", f->at_ps);
        json_key(w, "recover_at");
        if (f->recover_at_ps == SIM_TIME_NEVER)
            json_null(w);
        else
            json_u64(w, f->recover_at_ps);
        json_object_end(w);
    }
    json_array_end(w);
    json_object_end(w);
}

static void write_programs(struct json_writer *w, const struct run *r)
{
    json_kv_array_begin(w, "programs");
    for (size_t i = 0; i < r->ninsts; i++) {
        const struct prog_inst *pi = &r->insts[i];
        json_object_begin(w);
        json_kv_str(w, "host", pi->def->host);
        json_kv_str(w, "program", pi->def->program);
        json_kv_array_begin(w, "args");
        for (size_t k = 0; k < pi->def->nargs; k++)
            json_str(w, pi->def->args[k]);
        json_array_end(w);
        json_kv_bool(w, "daemon", pi->def->daemon);
        json_kv_bool(w, "finished", pi->finished);
        json_key(w, "exit_code");
        if (pi->finished)
            json_i64(w, pi->exit_code);
        else
            json_null(w);
        json_object_end(w);
    }
    json_array_end(w);
}

static void write_tables(struct json_writer *w, const struct run *r)
{
    json_kv_object_begin(w, "tables");
    for (size_t i = 0; i < r->ntables; i++) {
        const struct report_table *tb = &r->tables[i];
        json_kv_array_begin(w, tb->name);
        for (size_t k = 0; k < tb->nrows; k++) {
            json_object_begin(w);
            for (size_t j = 0; j < tb->rows[k].n; j++)
                json_kv_double(w, tb->rows[k].keys[j], tb->rows[k].values[j]);
            json_object_end(w);
        }
        json_array_end(w);
    }
    json_object_end(w);
}

static void write_nic(struct json_writer *w, const struct nic_counters *c)
{
    json_kv_object_begin(w, "nic");
    json_kv_u64(w, "doorbells", c->doorbells);
    json_kv_u64(w, "wqes_fetched", c->wqes_fetched);
    json_kv_u64(w, "wqes_completed", c->wqes_completed);
    json_kv_u64(w, "pkts_tx", c->pkts_tx);
    json_kv_u64(w, "cnps_tx", c->cnps_tx);
    json_kv_u64(w, "cnps_rx", c->cnps_rx);
    json_kv_u64(w, "pkts_rx", c->pkts_rx);
    json_kv_u64(w, "bytes_tx", c->bytes_tx);
    json_kv_u64(w, "bytes_rx", c->bytes_rx);
    json_kv_u64(w, "acks_tx", c->acks_tx);
    json_kv_u64(w, "acks_rx", c->acks_rx);
    json_kv_u64(w, "naks_tx", c->naks_tx);
    json_kv_u64(w, "naks_rx", c->naks_rx);
    json_kv_u64(w, "cqes_written", c->cqes_written);
    json_kv_u64(w, "dma_reads", c->dma_reads);
    json_kv_u64(w, "dma_writes", c->dma_writes);
    json_kv_u64(w, "rx_drops", c->rx_drops);
    json_kv_u64(w, "resp_work_waits", c->resp_work_waits);
    /* caches and units inside the RNIC (docs/nic.md "Caches inside the RNIC") */
    json_kv_u64(w, "qpc_hits", c->qpc_hits);
    json_kv_u64(w, "qpc_misses", c->qpc_misses);
    json_kv_u64(w, "qpc_evictions", c->qpc_evictions);
    json_kv_u64(w, "rx_pu_stalls", c->rx_pu_stalls);
    if (c->rx_buf_max_bytes) /* only with a receive buffer (nic.rx_buffer) */
        json_kv_u64(w, "rx_buf_max_bytes", c->rx_buf_max_bytes);
    json_kv_u64(w, "acks_merged", c->acks_merged);
    json_kv_u64(w, "mpt_hits", c->mpt_hits);
    json_kv_u64(w, "mpt_misses", c->mpt_misses);
    json_kv_u64(w, "mtt_hits", c->mtt_hits);
    json_kv_u64(w, "mtt_misses", c->mtt_misses);
    json_kv_u64(w, "mtt_evictions", c->mtt_evictions);
    json_kv_u64(w, "xlate_waits", c->xlate_waits);
    json_kv_u64(w, "dm_accesses", c->dm_accesses);
    json_kv_u64(w, "atomic_waits", c->atomic_waits);
    json_kv_u64(w, "cqes_compressed", c->cqes_compressed);
    /* READ/atomic engines and registration (docs/nic.md) */
    json_kv_u64(w, "rd_ctx_hits", c->rd_ctx_hits);
    json_kv_u64(w, "rd_ctx_misses", c->rd_ctx_misses);
    json_kv_u64(w, "rd_qp_hits", c->rd_qp_hits);
    json_kv_u64(w, "rd_qp_misses", c->rd_qp_misses);
    json_kv_u64(w, "wqe_cache_hits", c->wqe_cache_hits);
    json_kv_u64(w, "wqe_cache_misses", c->wqe_cache_misses);
    json_kv_u64(w, "rwqe_hits", c->rwqe_hits);
    json_kv_u64(w, "rwqe_misses", c->rwqe_misses);
    json_kv_u64(w, "rd_engine_waits", c->rd_engine_waits);
    json_kv_u64(w, "nic_cmds", c->nic_cmds);
    json_kv_u64(w, "xlate_invalidated", c->xlate_invalidated);
    json_object_end(w);
}

static void write_pcie(struct json_writer *w, const struct pcie_counters *c)
{
    json_kv_object_begin(w, "pcie");
    json_kv_u64(w, "tlp_up", c->tlp_up);
    json_kv_u64(w, "tlp_down", c->tlp_down);
    json_kv_u64(w, "bytes_up", c->bytes_up);
    json_kv_u64(w, "bytes_down", c->bytes_down);
    json_kv_u64(w, "payload_up", c->payload_up);
    json_kv_u64(w, "payload_down", c->payload_down);
    json_kv_u64(w, "dma_reads", c->dma_reads);
    json_kv_u64(w, "dma_writes", c->dma_writes);
    json_kv_u64(w, "mmio_writes", c->mmio_writes);
    json_kv_u64(w, "tag_stalls", c->tag_stalls);
    json_kv_u64(w, "credit_stalls", c->credit_stalls);
    json_kv_u64(w, "rmw_writes", c->rmw_writes);
    json_kv_u64(w, "rmw_ps", c->rmw_ps);
    /* TLPs and wire bytes by what they were for (both directions) */
    for (unsigned k = 0; k < PCIE_K_COUNT; k++) {
        char key[48];
        snprintf(key, sizeof(key), "tlps_%s", pcie_kind_names[k]);
        json_kv_u64(w, key, c->kind_tlps[k]);
        snprintf(key, sizeof(key), "bytes_%s", pcie_kind_names[k]);
        json_kv_u64(w, key, c->kind_bytes[k]);
    }
    json_object_end(w);
}

/* The programmable switch: passes, recirculations, replication, and
 * every register array and table with its stage, size and accesses. */
static void write_pswitch(struct json_writer *w, const struct pswitch *ps)
{
    const struct ps_counters *c = ps_get_counters(ps);
    json_kv_object_begin(w, "pswitch");
    json_kv_str(w, "name", ps_name(ps));
    json_kv_u64(w, "node", ps_node_id(ps));
    json_kv_str(w, "error", ps_error(ps) ? ps_error(ps) : "");
    json_kv_u64(w, "ingress_passes", c->ingress_passes);
    json_kv_u64(w, "egress_passes", c->egress_passes);
    json_kv_u64(w, "recirculations", c->recirculations);
    json_kv_u64(w, "recirc_bytes", c->recirc_bytes);
    json_kv_u64(w, "recirc_drops", c->recirc_drops);
    json_kv_u64(w, "recirc_max_queue_bytes", c->recirc_max_queue_bytes);
    json_kv_u64(w, "pktgen_pkts", c->pktgen_pkts);
    json_kv_u64(w, "cpu_pkts", c->cpu_pkts);
    json_kv_u64(w, "replicas", c->replicas);
    json_kv_u64(w, "program_drops", c->program_drops);
    json_kv_u64(w, "unhandled", c->unhandled);
    json_kv_u64(w, "reg_accesses", c->reg_accesses);
    json_kv_u64(w, "table_lookups", c->table_lookups);
    json_kv_u64(w, "table_hits", c->table_hits);
    json_kv_u64(w, "digests", c->digests);
    json_kv_u64(w, "digest_drops", c->digest_drops);
    json_kv_u64(w, "cp_ops", c->cp_ops);
    json_kv_object_begin(w, "resources");
    for (uint32_t i = 0; i < ps_n_resources(ps); i++) {
        struct ps_resource res;
        ps_resource(ps, i, &res);
        json_kv_object_begin(w, res.name);
        json_kv_str(w, "kind", res.table ? "table" : "register");
        json_kv_str(w, "pipeline", res.gress == PS_INGRESS ? "ingress" : "egress");
        json_kv_u64(w, "stage", res.stage);
        json_kv_u64(w, "entries", res.entries);
        json_kv_u64(w, "width_bits", res.width_bits);
        json_kv_u64(w, "sram_bytes", res.sram_bytes);
        json_kv_u64(w, "used", res.used);
        json_kv_u64(w, "accesses", res.accesses);
        json_object_end(w);
    }
    json_object_end(w);
    json_object_end(w);
}

static void write_counters(struct json_writer *w, const struct run *r)
{
    const struct world *wd = r->world;
    json_kv_object_begin(w, "counters");
    json_kv_object_begin(w, "hosts");
    for (size_t i = 0; i < wd->nhosts; i++) {
        const struct host *h = &wd->hosts[i];
        json_kv_object_begin(w, h->name);
        json_kv_object_begin(w, "host");
        json_kv_u64(w, "dma_writes_landed", h->dma_writes_landed);
        json_kv_u64(w, "cqes_landed", h->cqes_landed);
        /* the host model (sim/host/, docs/host.md) */
        const struct host_counters *hc = &h->cnt;
        json_kv_u64(w, "ht_shared_ps", hc->ht_shared_ps);
        json_kv_u64(w, "slice_waits", hc->slice_waits);
        json_kv_u64(w, "slice_wait_ps", hc->slice_wait_ps);
        json_kv_u64(w, "ctx_switches", hc->ctx_switches);
        json_kv_u64(w, "os_stalls_ps", hc->os_stalls_ps);
        json_kv_u64(w, "lines_touched", hc->lines_touched);
        json_kv_u64(w, "lines_hit", hc->lines_hit);
        json_kv_u64(w, "lines_dma_miss", hc->lines_dma_miss);
        json_kv_u64(w, "lines_c2c", hc->lines_c2c);
        json_kv_u64(w, "lines_remote", hc->lines_remote);
        json_kv_u64(w, "tlb_l1_misses", hc->tlb_l1_misses);
        json_kv_u64(w, "tlb_walks", hc->tlb_walks);
        json_kv_u64(w, "dma_remote", hc->dma_remote);
        json_kv_u64(w, "dma_link_wait_ps", hc->dma_link_wait_ps);
        json_object_end(w);
        write_nic(w, nic_get_counters(wd->nics[i]));
        write_pcie(w, pcie_link_counters(wd->pcie[i]));
        const struct topo_node_counters *fc = topo_node_counters(wd->topo, (uint32_t)i);
        json_kv_object_begin(w, "fabric");
        json_kv_u64(w, "pkts_delivered", fc->pkts_delivered);
        json_kv_u64(w, "pkts_reordered", fc->pkts_reordered);
        json_object_end(w);
        json_object_end(w);
    }
    json_object_end(w);
    json_kv_object_begin(w, "links");
    for (unsigned i = 0; i < topo_n_links(wd->topo); i++) {
        const struct link *l = topo_link(wd->topo, i);
        const struct link_counters *c = link_get_counters(l);
        json_kv_object_begin(w, link_name(l));
        json_kv_u64(w, "pkts_sent", c->pkts_sent);
        json_kv_u64(w, "bytes_sent", c->bytes_sent);
        json_kv_u64(w, "pkts_dropped", c->pkts_dropped);
        json_kv_u64(w, "bytes_dropped", c->bytes_dropped);
        json_kv_u64(w, "pkts_dropped_overflow", c->pkts_dropped_overflow);
        json_kv_u64(w, "pkts_lost", c->pkts_lost);
        json_kv_u64(w, "pkts_corrupted", c->pkts_corrupted);
        json_kv_u64(w, "pkts_dropped_down", c->pkts_dropped_down);
        json_kv_u64(w, "max_queue_bytes", c->max_queue_bytes);
        json_kv_u64(w, "busy_ps", c->busy_ps);
        json_kv_u64(w, "ecn_marked", c->ecn_marked);
        json_kv_u64(w, "pfc_frames_sent", c->pfc_frames_sent);
        json_kv_u64(w, "pfc_xoff_rx", c->pfc_xoff_rx);
        json_kv_u64(w, "pfc_xon_rx", c->pfc_xon_rx);
        if (link_credit_limit_bytes(l)) { /* InfiniBand credits (nic.rx_buffer) */
            json_kv_u64(w, "credit_limit_bytes", link_credit_limit_bytes(l));
            json_kv_u64(w, "max_credit_used_bytes", c->max_credit_used_bytes);
            json_kv_u64(w, "credit_stalls", c->credit_stalls);
            json_kv_u64(w, "credit_wait_ps", link_credit_wait_ps(l)); /* open stall too */
        }
        json_object_end(w);
    }
    json_object_end(w);
    json_kv_object_begin(w, "switches");
    for (unsigned i = 0; i < topo_n_switches(wd->topo); i++) {
        const struct fswitch *sw = topo_switch(wd->topo, i);
        const struct switch_counters *c = switch_get_counters(sw);
        json_kv_object_begin(w, switch_name(sw));
        json_kv_u64(w, "pkts_forwarded", c->pkts_forwarded);
        json_kv_u64(w, "pkts_dropped_no_route", c->pkts_dropped_no_route);
        json_kv_u64(w, "pkts_dropped_down", c->pkts_dropped_down);
        json_kv_u64(w, "pfc_xoff_sent", c->pfc_xoff_sent);
        json_kv_u64(w, "pfc_xon_sent", c->pfc_xon_sent);
        json_kv_u64(w, "pfc_headroom_drops", c->pfc_headroom_drops);
        if (c->pkts_dropped_mcast_off_tree) /* only then: other runs' output is unchanged */
            json_kv_u64(w, "pkts_dropped_mcast_off_tree", c->pkts_dropped_mcast_off_tree);
        json_object_end(w);
    }
    json_object_end(w);
    const struct topo_deadlock *dl = topo_pfc_deadlock(wd->topo);
    if (dl) { /* only when one was found: other runs' output is unchanged */
        json_kv_object_begin(w, "pfc_deadlock");
        json_kv_u64(w, "at_ps", dl->at_ps);
        json_kv_u64(w, "prio", dl->prio);
        json_kv_array_begin(w, "links");
        for (unsigned i = 0; i < dl->n_links; i++)
            json_str(w, link_name(topo_link(wd->topo, dl->links[i])));
        json_array_end(w);
        json_object_end(w);
    }
    if (wd->pswitch)
        write_pswitch(w, wd->pswitch);
    json_object_end(w);
}

int results_write_json(const struct run *r, const char *path, char *why, size_t why_len)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(why, why_len, "cannot write '%s': %s", path, strerror(errno));
        return -1;
    }
    const struct scenario *s = r->scn;
    struct json_writer *w = json_new_file(f);
    json_object_begin(w);
    json_kv_str(w, "rnicsim", RNICSIM_VERSION);
    json_kv_str(w, "scenario", s->name);
    json_kv_str(w, "file", s->file);
    json_kv_u64(w, "seed", s->seed);
    json_kv_str(w, "profile", s->profile_name);
    json_kv_str(w, "result", run_result_name(r->result));
    json_kv_u64(w, "sim_time_ps", r->sim_time_ps);
    json_kv_u64(w, "events", r->events);
    json_kv_object_begin(w, "vars");
    for (size_t i = 0; i < s->nvars; i++)
        json_kv_str(w, s->var_names[i], s->var_values[i]);
    json_object_end(w);
    write_params(w, s);
    write_programs(w, r);
    write_tables(w, r);
    traffic_json(w, r);
    write_counters(w, r);
    json_object_end(w);
    int rc = json_finish(w);
    if (fclose(f) != 0)
        rc = -1;
    if (rc)
        snprintf(why, why_len, "error writing '%s'", path);
    return rc;
}

/* ---------------------------------------------------------------- summary */

/* Value of `key` in a row; false if absent. */
static bool row_get(const struct report_row *row, const char *key, double *v)
{
    for (size_t i = 0; i < row->n; i++) {
        if (strcmp(row->keys[i], key) == 0) {
            *v = row->values[i];
            return true;
        }
    }
    return false;
}

/* Columns for a table: the well-known perftest shapes, else every key of
 * the first row. */
struct column {
    const char *key, *title;
    int decimals;
};

static const struct column lat_cols[] = {
    {"size_bytes", "size", 0},
    {"t_avg_us", "avg[us]", 3},
    {"t_p50_us", "p50[us]", 3},
    {"t_p99_us", "p99[us]", 3},
};
static const struct column bw_cols[] = {
    {"size_bytes", "size", 0},
    {"bw_gbps", "Gb/s", 3},
    {"msg_rate_mpps", "Mpps", 4},
};

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static bool has_cols(const struct report_table *tb, const struct column *cols, size_t n)
{
    double v;
    for (size_t i = 0; i < n; i++)
        if (tb->nrows == 0 || !row_get(&tb->rows[0], cols[i].key, &v))
            return false;
    return true;
}

static void print_table(const struct report_table *tb, FILE *out)
{
    const struct column *cols = NULL;
    size_t ncols = 0;
    if (ends_with(tb->name, "_lat") && has_cols(tb, lat_cols, 4)) {
        cols = lat_cols;
        ncols = 4;
    } else if (ends_with(tb->name, "_bw") && has_cols(tb, bw_cols, 3)) {
        cols = bw_cols;
        ncols = 3;
    }
    fprintf(out, "\n%s\n", tb->name);
    if (cols) {
        for (size_t c = 0; c < ncols; c++)
            fprintf(out, " %10s", cols[c].title);
        fputc('\n', out);
        for (size_t k = 0; k < tb->nrows; k++) {
            for (size_t c = 0; c < ncols; c++) {
                double v = 0;
                row_get(&tb->rows[k], cols[c].key, &v);
                fprintf(out, " %10.*f", cols[c].decimals, v);
            }
            fputc('\n', out);
        }
        return;
    }
    /* Generic: each row as its own key=value list (rows may differ). */
    for (size_t k = 0; k < tb->nrows; k++) {
        const struct report_row *row = &tb->rows[k];
        for (size_t j = 0; j < row->n; j++)
            fprintf(out, "%s%s=%g", j ? "  " : " ", row->keys[j], row->values[j]);
        fputc('\n', out);
    }
}

/* One line of fabric impairments, when there were any (and one for a PFC
 * deadlock). */
static void print_fabric_summary(const struct run *r, FILE *out)
{
    const struct topology *t = r->world->topo;
    const struct topo_deadlock *dl = topo_pfc_deadlock(t);
    if (dl) {
        char at[32];
        format_time(dl->at_ps, at, sizeof(at));
        fprintf(out, "PFC deadlock at %s, priority %u, a cycle of %u paused links:", at, dl->prio,
                dl->n_links);
        for (unsigned i = 0; i < dl->n_links; i++)
            fprintf(out, " %s", link_name(topo_link(t, dl->links[i])));
        fputc('\n', out);
    }
    uint64_t lost = 0, corrupt = 0, down = 0, overflow = 0, reordered = 0;
    for (unsigned i = 0; i < topo_n_links(t); i++) {
        const struct link_counters *c = link_get_counters(topo_link(t, i));
        lost += c->pkts_lost;
        corrupt += c->pkts_corrupted;
        down += c->pkts_dropped_down;
        overflow += c->pkts_dropped_overflow;
    }
    for (unsigned i = 0; i < topo_n_switches(t); i++) {
        const struct switch_counters *c = switch_get_counters(topo_switch(t, i));
        down += c->pkts_dropped_down + c->pkts_dropped_no_route;
    }
    for (size_t i = 0; i < r->world->nhosts; i++)
        reordered += topo_node_counters(t, (uint32_t)i)->pkts_reordered;
    if (lost + corrupt + down + overflow + reordered == 0)
        return;
    fprintf(out,
            "fabric: %" PRIu64 " frames lost, %" PRIu64 " corrupted (ICRC), %" PRIu64
            " dropped at failed links / without a route, %" PRIu64
            " dropped by full queues, %" PRIu64 " delivered out of order\n",
            lost, corrupt, down, overflow, reordered);
}

void results_print_summary(const struct run *r, bool tables, const char *json_path, FILE *out)
{
    char t[32];
    format_time(r->sim_time_ps, t, sizeof(t));
    double evs = r->wall_s > 0 ? (double)r->events / r->wall_s : 0.0;
    fprintf(out, "\n== %s: %s\n", r->scn->name, run_result_name(r->result));
    fprintf(out, "simulated %s, %" PRIu64 " events; wall %.3f s, %.2f M events/s\n", t, r->events,
            r->wall_s, evs / 1e6);
    print_fabric_summary(r, out);
    traffic_print_summary(r, out);
    if (tables) {
        for (size_t i = 0; i < r->ntables; i++)
            print_table(&r->tables[i], out);
        return;
    }
    if (!r->ntables)
        return;
    fprintf(out, "results tables:");
    for (size_t i = 0; i < r->ntables; i++)
        fprintf(out, "%s %s (%zu row%s)", i ? "," : "", r->tables[i].name, r->tables[i].nrows,
                r->tables[i].nrows == 1 ? "" : "s");
    if (json_path)
        fprintf(out, "\n  in %s; --tables prints them here\n", json_path);
    else
        fprintf(out, "\n  -o FILE.json writes them, --tables prints them here\n");
}
