/* The scenario's `traffic:` section and `payload:` key, and what a run of
 * the built-in traffic generator (sim/traffic/) reports: the JSON object
 * "traffic" and the summary table of flow-completion times.
 *
 *   payload: none              sizes without bytes (default: carried)
 *   traffic:
 *     pattern: permutation     permutation | incast | all-to-all | poisson
 *     size: 1MiB               every flow (sizes: fixed)
 *     sizes: web-search        fixed | web-search | fb-hadoop | data-mining (poisson)
 *     qps_per_host: 1          a host's transfer split over N QPs
 *     senders: 16              incast fan-in
 *     receiver: h0             incast target
 *     load: 50%                poisson: offered load per host link
 *     flows: 10000             poisson: stop after this many flows
 *     duration: 10ms           poisson: arrivals during this long
 *     start: 0us
 *     message: 64KiB           WRITEs of at most this (default: the whole flow)
 *     depth: 1                 WRITEs of a flow outstanding at most
 *     mtu: 4096
 *     ack_timeout: 14          local ACK timeout exponent (4.096 us x 2^t)
 *     priority: 3              traffic class of the QPs' packets (PFC, ECN)
 *     verify: false            check every flow's bytes (needs payload)
 *     fairness: {from: 1ms, to: 2ms}   Jain's index over this window
 *     flows_file: out/flows.csv         one line per flow */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/config/json.h"
#include "tools/rnicsim/rnicsim.h"

static const char *const payload_modes[] = {"carried", "none", NULL};

int scn_read_payload(struct scenario *s, struct cfg_node *root, struct cfg_error *err)
{
    int mode;
    if (cfg_get_enum(root, "payload", payload_modes, 0, &mode, err))
        return -1;
    s->payload_none = mode == 1;
    return 0;
}

int scn_read_traffic(struct scenario *s, struct cfg_node *root, struct cfg_error *err)
{
    struct cfg_node *tn = cfg_child(root, "traffic");
    if (!tn)
        return 0;
    if (tn->kind != CFG_MAP)
        return cfg_errorf(err, tn, "'traffic': expected a mapping (pattern, size, ...), got %s",
                          cfg_kind_name(tn));
    struct traffic_params *p = &s->traffic;
    traffic_params_default(p);
    s->has_traffic = true;
    struct cfg_node *pn;
    int v;
    if (cfg_req_node(tn, "pattern", CFG_SCALAR, &pn, err) ||
        cfg_get_enum(tn, "pattern", traffic_pattern_names, 0, &v, err))
        return -1;
    p->pattern = (enum traffic_pattern)v;
    if (cfg_get_enum(tn, "sizes", flowsize_dist_names, FLOWSIZE_FIXED, &v, err))
        return -1;
    p->sizes = (enum flowsize_dist)v;
    struct cfg_node *sz = cfg_child(tn, "size");
    if (p->sizes == FLOWSIZE_FIXED && !sz)
        return cfg_errorf(err, tn,
                          "'traffic': give 'size' (every flow's size) or 'sizes' "
                          "(web-search, fb-hadoop, data-mining)");
    if (sz && p->sizes != FLOWSIZE_FIXED)
        return cfg_errorf(err, sz, "'traffic.size': the sizes come from '%s'; leave 'size' out",
                          flowsize_dist_names[p->sizes]);
    if (sz && cfg_node_size(sz, &p->size_bytes, err))
        return -1;
    if (sz && (p->size_bytes == 0 || p->size_bytes > ((uint64_t)1 << 40)))
        return cfg_errorf(err, sz, "'traffic.size': expected 1 B .. 1 TiB");
    uint64_t q, senders, flows, depth, mtu, tmo, prio;
    if (cfg_get_u64(tn, "qps_per_host", 1, &q, err) ||
        cfg_get_u64(tn, "senders", 16, &senders, err) || cfg_get_u64(tn, "flows", 0, &flows, err) ||
        cfg_get_u64(tn, "depth", 1, &depth, err) || cfg_get_size(tn, "mtu", 4096, &mtu, err) ||
        cfg_get_u64(tn, "ack_timeout", 14, &tmo, err) ||
        cfg_get_u64(tn, "priority", 3, &prio, err) ||
        cfg_get_time(tn, "duration", 0, &p->duration_ps, err) ||
        cfg_get_time(tn, "start", 0, &p->start_ps, err) ||
        cfg_get_size(tn, "message", 0, &p->message_bytes, err) ||
        cfg_get_bool(tn, "verify", false, &p->verify, err))
        return -1;
    /* instants of the run (docs/robustness.md "The limits") */
    const char *const instants[] = {"duration", "start"};
    for (int k = 0; k < 2; k++) {
        struct cfg_node *n = cfg_child(tn, instants[k]);
        if (n && cfg_check_range(n, n->path, CFG_Q_TIME, k ? p->start_ps : p->duration_ps, 0,
                                 SIM_TIME_LIMIT_PS, err))
            return -1;
    }
    if (q < 1 || q > 4096)
        return cfg_errorf(err, cfg_child(tn, "qps_per_host"),
                          "'traffic.qps_per_host': expected 1..4096");
    if (depth < 1 || depth > 1024)
        return cfg_errorf(err, cfg_child(tn, "depth"), "'traffic.depth': expected 1..1024");
    if (mtu != 256 && mtu != 512 && mtu != 1024 && mtu != 2048 && mtu != 4096)
        return cfg_errorf(err, cfg_child(tn, "mtu"),
                          "'traffic.mtu': expected 256, 512, 1024, 2048 or 4096");
    if (tmo > 31)
        return cfg_errorf(err, cfg_child(tn, "ack_timeout"),
                          "'traffic.ack_timeout': expected 0..31");
    if (prio > 7)
        return cfg_errorf(err, cfg_child(tn, "priority"), "'traffic.priority': expected 0..7");
    if (p->message_bytes > ((uint64_t)1 << 30))
        return cfg_errorf(err, cfg_child(tn, "message"),
                          "'traffic.message': at most 1GiB (the NIC's largest message)");
    p->qps_per_host = (uint32_t)q;
    p->depth = (uint32_t)depth;
    p->mtu_bytes = (uint32_t)mtu;
    p->ack_timeout = (uint8_t)tmo;
    p->traffic_class = (uint8_t)prio;
    p->max_flows = flows;
    uint32_t n = s->topo.n_nodes;
    if (n < 2)
        return cfg_errorf(err, tn, "'traffic': the topology needs at least 2 hosts");
    if (p->pattern == TRAFFIC_INCAST) {
        const char *rcv;
        if (cfg_get_str(tn, "receiver", "h0", &rcv, err))
            return -1;
        long hi = scn_host_index(rcv, n);
        if (hi < 0)
            return cfg_errorf(err, cfg_child(tn, "receiver"),
                              "unknown host '%s' (the topology has hosts h0..h%u)", rcv, n - 1);
        p->receiver = (uint32_t)hi;
        if (senders < 1 || senders > n - 1)
            return cfg_errorf(err, cfg_child(tn, "senders") ? cfg_child(tn, "senders") : tn,
                              "'traffic.senders': expected 1..%u (the other hosts)", n - 1);
        p->senders = (uint32_t)senders;
    } else {
        const char *const only_incast[] = {"receiver", "senders"};
        for (size_t k = 0; k < 2; k++)
            if (cfg_child(tn, only_incast[k]))
                return cfg_errorf(err, cfg_child(tn, only_incast[k]),
                                  "'traffic.%s': only the incast pattern has it", only_incast[k]);
    }
    struct cfg_node *ld = cfg_child(tn, "load");
    if (p->pattern == TRAFFIC_POISSON) {
        if (!ld)
            return cfg_errorf(err, tn, "'traffic': a poisson pattern needs 'load' (like 50%%)");
        if (scn_parse_prob(ld, &p->load, err))
            return -1;
        if (!(p->load > 0))
            return cfg_errorf(err, ld, "'traffic.load': must be more than 0");
        if (!flows && !p->duration_ps)
            return cfg_errorf(err, tn,
                              "'traffic': a poisson pattern needs 'flows' or 'duration' to end");
    } else {
        const char *const only_poisson[] = {"load", "flows", "duration"};
        for (size_t k = 0; k < 3; k++)
            if (cfg_child(tn, only_poisson[k]))
                return cfg_errorf(err, cfg_child(tn, only_poisson[k]),
                                  "'traffic.%s': only the poisson pattern has it", only_poisson[k]);
        if (p->sizes != FLOWSIZE_FIXED)
            return cfg_errorf(err, cfg_child(tn, "sizes"),
                              "'traffic.sizes': a distribution needs the poisson pattern");
    }
    if (p->verify && s->payload_none)
        return cfg_errorf(err, cfg_child(tn, "verify"),
                          "'traffic.verify': the data check needs the bytes, and this scenario "
                          "has 'payload: none' (sizes only); drop one of them");
    struct cfg_node *fw = cfg_child(tn, "fairness");
    if (fw) {
        struct cfg_node *from, *to;
        if (fw->kind != CFG_MAP)
            return cfg_errorf(err, fw, "'traffic.fairness': expected {from: TIME, to: TIME}");
        if (cfg_req_node(fw, "from", CFG_SCALAR, &from, err) ||
            cfg_node_time(from, &p->window_from_ps, err) ||
            cfg_req_node(fw, "to", CFG_SCALAR, &to, err) ||
            cfg_node_time(to, &p->window_to_ps, err) ||
            cfg_check_range(from, from->path, CFG_Q_TIME, p->window_from_ps, 0, SIM_TIME_LIMIT_PS,
                            err) ||
            cfg_check_range(to, to->path, CFG_Q_TIME, p->window_to_ps, 0, SIM_TIME_LIMIT_PS, err))
            return -1;
        if (p->window_to_ps <= p->window_from_ps)
            return cfg_errorf(err, to, "'traffic.fairness.to' must be later than 'from'");
    }
    const char *ff;
    if (cfg_get_str(tn, "flows_file", "", &ff, err))
        return -1;
    s->traffic_flows_file = ff[0] ? xstrdup_or_die(ff) : NULL;
    return 0;
}

/* ---------------------------------------------------------------- PFC and ECN */

/* Largest RoCEv2 frame of the 4 KiB MTU on the wire (payload + headers
 * incl. RETH, ICRC, FCS, preamble and IFG). */
#define MAX_FRAME_WIRE_BYTES (4096 + 98)

/*   topology.pfc: {priorities: [3], xoff: 61KiB, xon: 49KiB, headroom: 20KiB, quanta: 65535,
 *                  credits: false}   (credits: InfiniBand, the ingress buffer xoff is credit)
 *   topology.ecn: {kmin: 5KB, kmax: 200KB, pmax: 1%}
 * Defaults and their sources: docs/lossless.md. */
int scn_read_lossless(struct scenario *s, struct cfg_node *topo, struct cfg_error *err)
{
    struct switch_params *sw = &s->topo.sw;
    struct cfg_node *pn = cfg_child(topo, "pfc"), *en = cfg_child(topo, "ecn");
    if ((pn || en) && s->topo.kind == TOPO_BACK_TO_BACK)
        return cfg_errorf(err, pn ? pn : en, "'topology.%s': a back-to-back topology has no switch",
                          pn ? "pfc" : "ecn");
    if (pn) {
        if (pn->kind != CFG_MAP)
            return cfg_errorf(err, pn,
                              "'topology.pfc': expected a mapping {priorities, xoff, xon, "
                              "headroom, quanta}");
        struct pfc_params *p = &sw->pfc;
        uint64_t quanta;
        p->enabled = true;
        /* htsim_roce's PFC thresholds (-pfc_thresholds low 12 high 15
         * packets of the MTU), so the two simulators pause alike */
        if (cfg_get_size(pn, "xoff", 15 * MAX_FRAME_WIRE_BYTES, &p->xoff_bytes, err) ||
            cfg_get_size(pn, "xon", 12 * MAX_FRAME_WIRE_BYTES, &p->xon_bytes, err) ||
            cfg_get_size(pn, "headroom", 0, &p->headroom_bytes, err) ||
            cfg_get_u64(pn, "quanta", 65535, &quanta, err) ||
            cfg_get_bool(pn, "credits", false, &p->credits, err))
            return -1;
        if (quanta < 1 || quanta > 65535)
            return cfg_errorf(err, cfg_child(pn, "quanta"),
                              "'topology.pfc.quanta': expected 1..65535");
        p->quanta = (uint16_t)quanta;
        if (p->credits) {
            /* credits: xoff is the ingress buffer a sender may fill, xon
             * unused.  A buffer smaller than the largest frame (its 64-byte
             * blocks, IBA 7.9) would never admit one: the link would wait
             * for credit forever */
            uint64_t min = (MAX_FRAME_WIRE_BYTES + 63) / 64 * 64;
            if (p->xoff_bytes < min)
                return cfg_errorf(err, cfg_child(pn, "xoff") ? cfg_child(pn, "xoff") : pn,
                                  "'topology.pfc.xoff': with credits the ingress buffer must "
                                  "hold the largest frame (%llu B), got %llu B",
                                  (unsigned long long)min, (unsigned long long)p->xoff_bytes);
            /* a programmable switch rewrites frames between ingress and
             * egress (a READ response becomes a WRITE, payloads shrink):
             * a returned credit is counted from the frame as it leaves, so
             * it would not give back what the sender took */
            if (s->pswitch)
                return cfg_errorf(err, cfg_child(pn, "credits"),
                                  "'topology.pfc.credits': not with a programmable switch "
                                  "(it rewrites frames; use PFC)");
        } else if (p->xoff_bytes == 0 || p->xon_bytes >= p->xoff_bytes)
            return cfg_errorf(err, cfg_child(pn, "xon") ? cfg_child(pn, "xon") : pn,
                              "'topology.pfc': xon (%llu B) must be below xoff (%llu B)",
                              (unsigned long long)p->xon_bytes, (unsigned long long)p->xoff_bytes);
        struct cfg_node *pr = cfg_child(pn, "priorities");
        p->prio_mask = 1u << 3; /* RoCE on priority 3 (DSCP 26), the usual lossless class */
        if (pr) {
            if (pr->kind != CFG_SEQ || pr->n == 0)
                return cfg_errorf(err, pr, "'topology.pfc.priorities': expected a list like [3]");
            p->prio_mask = 0;
            for (size_t i = 0; i < pr->n; i++) {
                uint64_t v;
                if (cfg_node_u64(pr->items[i], &v, err))
                    return -1;
                if (v > 7)
                    return cfg_errorf(err, pr->items[i],
                                      "'topology.pfc.priorities': 0..7, got %llu",
                                      (unsigned long long)v);
                p->prio_mask |= (uint8_t)(1u << v);
            }
        }
    }
    if (en) {
        if (en->kind != CFG_MAP)
            return cfg_errorf(err, en, "'topology.ecn': expected a mapping {kmin, kmax, pmax}");
        sw->ecn = true;
        /* DCQCN (Zhu et al., SIGCOMM 2015), section 6 / Fig. 14 settings:
         * Kmin = 5 KB, Kmax = 200 KB, Pmax = 1 % */
        if (cfg_get_size(en, "kmin", 5000, &sw->ecn_red.kmin_bytes, err) ||
            cfg_get_size(en, "kmax", 200000, &sw->ecn_red.kmax_bytes, err))
            return -1;
        sw->ecn_red.pmax = 0.01;
        struct cfg_node *pm = cfg_child(en, "pmax");
        if (pm && scn_parse_prob(pm, &sw->ecn_red.pmax, err))
            return -1;
        if (sw->ecn_red.kmax_bytes <= sw->ecn_red.kmin_bytes)
            return cfg_errorf(err, cfg_child(en, "kmax") ? cfg_child(en, "kmax") : en,
                              "'topology.ecn': kmax must be above kmin");
    }
    return 0;
}

/* ---------------------------------------------------------------- results */

static const char *const bucket_names[TRAFFIC_BUCKETS + 1] = {"<=10KB",   "10KB-100KB", "100KB-1MB",
                                                              "1MB-10MB", ">10MB",      "all"};

void traffic_json(struct json_writer *w, const struct run *r)
{
    if (!r->traffic)
        return;
    struct traffic_stats st;
    traffic_stats(r->traffic, &st);
    const struct traffic_params *p = traffic_get_params(r->traffic);
    json_kv_object_begin(w, "traffic");
    json_kv_str(w, "pattern", traffic_pattern_names[p->pattern]);
    json_kv_str(w, "sizes", flowsize_dist_names[p->sizes]);
    json_kv_u64(w, "flows", st.flows);
    json_kv_u64(w, "unfinished", st.unfinished);
    json_kv_u64(w, "failed", st.failed);
    json_kv_u64(w, "qps", traffic_qps(r->traffic));
    json_kv_u64(w, "last_end_ps", st.last_end_ps);
    uint64_t checked, bad;
    traffic_verify_counts(r->traffic, &checked, &bad);
    json_kv_str(w, "data_check", p->verify ? "on" : "off");
    json_kv_u64(w, "flows_verified", checked);
    json_kv_u64(w, "flows_corrupt", bad);
    if (p->window_to_ps)
        json_kv_double(w, "jain_index", st.jain);
    json_kv_array_begin(w, "buckets");
    for (int b = 0; b <= TRAFFIC_BUCKETS; b++) {
        json_object_begin(w);
        json_kv_str(w, "sizes", bucket_names[b]);
        json_kv_u64(w, "flows", st.bucket[b].flows);
        json_kv_u64(w, "fct_p50_ps", st.bucket[b].fct_p50_ps);
        json_kv_u64(w, "fct_p95_ps", st.bucket[b].fct_p95_ps);
        json_kv_u64(w, "fct_p99_ps", st.bucket[b].fct_p99_ps);
        json_kv_u64(w, "fct_max_ps", st.bucket[b].fct_max_ps);
        json_kv_double(w, "slowdown_p50", st.bucket[b].slow_p50);
        json_kv_double(w, "slowdown_p95", st.bucket[b].slow_p95);
        json_kv_double(w, "slowdown_p99", st.bucket[b].slow_p99);
        json_kv_double(w, "slowdown_mean", st.bucket[b].slow_mean);
        json_object_end(w);
    }
    json_array_end(w);
    json_object_end(w);
}

void traffic_print_summary(const struct run *r, FILE *out)
{
    if (!r->traffic)
        return;
    struct traffic_stats st;
    traffic_stats(r->traffic, &st);
    const struct traffic_params *p = traffic_get_params(r->traffic);
    char last[32];
    format_time(st.last_end_ps, last, sizeof(last));
    fprintf(out,
            "traffic: %s, %" PRIu64 " flows (%" PRIu64 " unfinished, %" PRIu64
            " failed) over %" PRIu64 " QPs, last done at %s\n",
            traffic_pattern_names[p->pattern], st.flows, st.unfinished, st.failed,
            traffic_qps(r->traffic), last);
    uint64_t checked, bad;
    traffic_verify_counts(r->traffic, &checked, &bad);
    if (p->verify)
        fprintf(out, "data check: %" PRIu64 " flows verified, %" PRIu64 " with wrong bytes\n",
                checked, bad);
    else
        fprintf(out, "data check: off%s\n",
                r->scn->payload_none ? " (payload: none: no bytes are carried)" : "");
    fprintf(out, "%-11s %8s %11s %11s %11s %8s %8s %8s\n", "sizes", "flows", "FCT p50[us]",
            "p95[us]", "p99[us]", "slow p50", "p95", "p99");
    for (int b = 0; b <= TRAFFIC_BUCKETS; b++) {
        if (!st.bucket[b].flows)
            continue;
        fprintf(out, "%-11s %8" PRIu64 " %11.3f %11.3f %11.3f %8.2f %8.2f %8.2f\n", bucket_names[b],
                st.bucket[b].flows, (double)st.bucket[b].fct_p50_ps / 1e6,
                (double)st.bucket[b].fct_p95_ps / 1e6, (double)st.bucket[b].fct_p99_ps / 1e6,
                st.bucket[b].slow_p50, st.bucket[b].slow_p95, st.bucket[b].slow_p99);
    }
    if (p->window_to_ps)
        fprintf(out, "Jain's fairness index over the window: %.4f\n", st.jain);
}

int traffic_write_outputs(const struct run *r, char *why, size_t why_len)
{
    const char *path = r->scn->traffic_flows_file;
    if (!r->traffic || !path)
        return 0;
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(why, why_len, "cannot write '%s': %s", path, strerror(errno));
        return -1;
    }
    int rc = traffic_write_flows_csv(r->traffic, f);
    if (fclose(f) || rc) {
        snprintf(why, why_len, "error writing '%s'", path);
        return -1;
    }
    return 0;
}
