/* The timeline of a run (timeline.h, docs/timeline.md): a sink of the event
 * trace (sim/trace.h) that writes every record as Chrome trace-event JSON
 * (what Perfetto and chrome://tracing open) or as a line of text.
 *
 * Layout.  A "process" per host (pid = host index + 1) holds a "thread" per
 * program thread, per NIC engine, per NIC cache and per PCIe direction; a
 * "fabric" process holds a thread per link direction (its frames on the
 * wire, its queue as a counter, PFC pauses, drops).  Trace-event viewers
 * need the slices of one thread properly nested, but units such as the
 * NIC's processing units or a PCIe direction's completions overlap: every
 * track is therefore a set of lanes (threads "rx units", "rx units #2",
 * ...), and a span goes to the first lane whose last span ended before it
 * starts.  Times are written in microseconds with nanosecond digits
 * (integer arithmetic: the same records give the same bytes).
 *
 * Flows.  A send work request is followed from its ibv_post_send through
 * the doorbell, the WQE fetch, the send engine, the payload DMA read, the
 * TX engine, every link, the remote processing unit and placement write,
 * the ACK back (TX, links, RX), the CQE write, to the ibv_poll_cq that
 * returns the CQE: Perfetto flow arrows (flow events "s", "t", "f" of the
 * trace-event format, each at the middle of the slice it binds to).  A
 * multi-packet message is followed through its last packet (the one its
 * completion waits for; a READ through its request and its last response
 * packet).  The records carry QPNs and PSNs, not work requests: the sink
 * keeps, per requester QP, the work requests by send-queue index with the
 * PSNs the send engine gave them, and learns each QP's peer from the
 * packets it receives.  Completions are matched to polls per CQ in FIFO
 * order (a CQ returns CQEs in the order they became visible). */
#include "tools/rnicsim/timeline.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "sim/config/config.h"
#include "sim/host.h"
#include "sim/nic/nic.h"
#include "sim/nic/opcode.h"
#include "sim/pcie/pcie.h"
#include "sim/pkt.h"
#include "sim/trace.h"
#include "tools/rnicsim/rnicsim.h"

/* Tracks of the sink beyond enum trace_track. */
enum { TL_NOTES = TRK_COUNT, TL_DROPS, TL_SWITCH_DROPS, TL_NTRACKS };

enum { TL_WR_RING = 4096 };  /* work requests remembered per QP (by send-queue index) */
enum { TL_SCAN_MAX = 1024 }; /* work requests searched for a PSN */

/* A work request (send queue entry) being followed. */
struct tl_wr {
    uint64_t idx;
    uint64_t flow; /* 0: not followed (posted before the trace, or a receive) */
    uint32_t first_psn, last_psn;
    uint8_t opcode;   /* enum ibv_wr_opcode */
    uint8_t phase;    /* TL_PH_* */
    bool started;     /* PSNs known */
    uint64_t last_ns; /* time of its last flow event */
};
enum { TL_PH_POSTED, TL_PH_DATA, TL_PH_ACK, TL_PH_ACKED, TL_PH_CQE };

/* A QP of some host, as the sink knows it. */
struct tl_qp {
    uint64_t key; /* node << 32 | qpn */
    bool has_peer;
    uint32_t peer_node, peer_qpn;
    struct tl_wr *wr; /* ring by idx, [lo, hi) */
    uint64_t lo, hi, front;
};

/* A CQ's CQEs, visible and not yet polled: their flows, in order. */
struct tl_cq {
    uint64_t key; /* node << 32 | cq id */
    uint64_t *flow, *last_ns;
    uint32_t cap, head, n;
};

struct tl_track {
    uint32_t pid;
    uint32_t kind, unit;
    char name[72];
    uint32_t n_lanes;
    uint32_t tid[64];
    uint64_t end_ns[64];
};

/* Open addressing by 64-bit key -> index + 1. */
struct tl_map {
    uint64_t *key;
    uint32_t *val;
    uint32_t mask, n;
};

struct timeline {
    struct world *w;
    struct sim *sim;
    struct timeline_opts o;
    FILE *f;
    const char *path;
    uint64_t bytes, max_bytes, events;
    bool cut, write_err, first;
    sim_time_t cut_at_ps;
    uint32_t fabric_pid;
    /* filters */
    bool *host_in; /* NULL: every host */
    struct tl_qp_sel *qsel;
    size_t nqsel;
    sim_time_t from_ps, to_ps;
    /* tracks and processes */
    struct tl_track *tracks;
    uint32_t n_tracks, cap_tracks;
    struct tl_map track_map;
    uint32_t *next_tid; /* per pid */
    bool *pid_named;
    /* flows */
    struct tl_qp *qps;
    uint32_t n_qps, cap_qps;
    struct tl_map qp_map;
    struct tl_cq *cqs;
    uint32_t n_cqs, cap_cqs;
    struct tl_map cq_map;
    uint64_t next_flow;
    /* the last host call slice (a POST / POLL record follows its call) */
    bool call_valid;
    uint32_t call_pid, call_tid;
    uint64_t call_ns, call_dur_ns;
    char label[256]; /* scenario and seed (otherData) */
    char ev[1024];   /* the event being built */
};

/* ---------------------------------------------------------------- small helpers */

static void *tl_realloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) {
        fprintf(stderr, "rnicsim: timeline: out of memory\n");
        exit(5);
    }
    return q;
}

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

static uint32_t map_get(const struct tl_map *m, uint64_t key)
{
    if (!m->mask)
        return 0;
    for (uint32_t i = (uint32_t)mix64(key) & m->mask;; i = (i + 1) & m->mask) {
        if (!m->val[i])
            return 0;
        if (m->key[i] == key)
            return m->val[i];
    }
}

static void map_put(struct tl_map *m, uint64_t key, uint32_t val)
{
    if (2 * (m->n + 1) > m->mask + 1) {
        struct tl_map o = *m;
        uint32_t cap = o.mask ? 2 * (o.mask + 1) : 64;
        m->key = calloc(cap, sizeof(*m->key));
        m->val = calloc(cap, sizeof(*m->val));
        if (!m->key || !m->val) {
            fprintf(stderr, "rnicsim: timeline: out of memory\n");
            exit(5);
        }
        m->mask = cap - 1;
        m->n = 0;
        for (uint32_t i = 0; o.mask && i <= o.mask; i++)
            if (o.val[i])
                map_put(m, o.key[i], o.val[i]);
        free(o.key);
        free(o.val);
    }
    uint32_t i = (uint32_t)mix64(key) & m->mask;
    while (m->val[i] && m->key[i] != key)
        i = (i + 1) & m->mask;
    if (!m->val[i])
        m->n++;
    m->key[i] = key;
    m->val[i] = val;
}

static void map_free(struct tl_map *m)
{
    free(m->key);
    free(m->val);
}

/* ps as microseconds with nanosecond digits ("12.345"), floor. */
static const char *us(sim_time_t ps, char *buf)
{
    uint64_t ns = ps / 1000;
    snprintf(buf, 32, "%" PRIu64 ".%03" PRIu64, ns / 1000, ns % 1000);
    return buf;
}

/* Append to the event buffer. */
static void evf(struct timeline *tl, size_t *o, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void evf(struct timeline *tl, size_t *o, const char *fmt, ...)
{
    if (*o >= sizeof(tl->ev))
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tl->ev + *o, sizeof(tl->ev) - *o, fmt, ap);
    va_end(ap);
    if (n > 0)
        *o += (size_t)n;
}

/* A JSON string (names are ours or program names: escape quotes,
 * backslashes and control characters). */
static void evs(struct timeline *tl, size_t *o, const char *s)
{
    evf(tl, o, "\"");
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            evf(tl, o, "\\%c", c);
        else if (c < 0x20)
            evf(tl, o, "\\u%04x", c);
        else
            evf(tl, o, "%c", c);
    }
    evf(tl, o, "\"");
}

/* Write the event in tl->ev (len bytes) unless the size bound is reached. */
static void emit(struct timeline *tl, size_t len)
{
    if (tl->cut || !tl->f)
        return;
    if (len >= sizeof(tl->ev)) /* cannot happen: names are short */
        return;
    /* keep room for the closing part (below 512 bytes) */
    if (tl->max_bytes && tl->bytes + len + 2 + 512 > tl->max_bytes) {
        tl->cut = true;
        tl->cut_at_ps = sim_now(tl->sim);
        if (!tl->o.text) /* nothing else listens: the rest of the run costs nothing */
            sim_trace_set_sink(tl->sim, 0, NULL, NULL);
        return;
    }
    if (!tl->first) {
        fputs(",\n", tl->f);
        tl->bytes += 2;
    }
    tl->first = false;
    if (fwrite(tl->ev, 1, len, tl->f) != len)
        tl->write_err = true;
    tl->bytes += len;
    tl->events++;
}

/* ---------------------------------------------------------------- processes and tracks */

static const char *track_label(uint32_t kind)
{
    switch (kind) {
    case TL_NOTES:
        return "notes";
    case TL_DROPS:
        return "nic: drops";
    case TL_SWITCH_DROPS:
        return "switch drops";
    case TRK_PCIE_UP:
        return "pcie up (MWr, MRd)";
    case TRK_PCIE_DOWN:
        return "pcie down (CplD, MMIO)";
    default:
        return sim_trace_track_name((enum trace_track)kind);
    }
}

static void name_pid(struct timeline *tl, uint32_t pid)
{
    if (tl->pid_named[pid])
        return;
    tl->pid_named[pid] = true;
    const char *name = pid == tl->fabric_pid ? "fabric" : tl->w->hosts[pid - 1].name;
    size_t o = 0;
    evf(tl, &o,
        "{\"ph\":\"M\",\"pid\":%u,\"tid\":0,\"name\":\"process_name\",\"args\":{\"name\":", pid);
    evs(tl, &o, name);
    evf(tl, &o, "}}");
    emit(tl, o);
    o = 0;
    evf(tl, &o,
        "{\"ph\":\"M\",\"pid\":%u,\"tid\":0,\"name\":\"process_sort_index\",\"args\":{\"sort_"
        "index\":%u}}",
        pid, pid);
    emit(tl, o);
}

static struct tl_track *track_get(struct timeline *tl, uint32_t pid, uint32_t kind, uint32_t unit,
                                  const char *name)
{
    uint64_t key = (uint64_t)pid << 40 | (uint64_t)kind << 32 | unit;
    uint32_t i = map_get(&tl->track_map, key);
    if (i)
        return &tl->tracks[i - 1];
    if (tl->n_tracks == tl->cap_tracks) {
        tl->cap_tracks = tl->cap_tracks ? 2 * tl->cap_tracks : 64;
        tl->tracks = tl_realloc(tl->tracks, tl->cap_tracks * sizeof(*tl->tracks));
    }
    struct tl_track *t = &tl->tracks[tl->n_tracks++];
    memset(t, 0, sizeof(*t));
    t->pid = pid;
    t->kind = kind;
    t->unit = unit;
    if (name)
        snprintf(t->name, sizeof(t->name), "%s", name);
    else if (kind == TRK_THREAD)
        snprintf(t->name, sizeof(t->name), "thread %u", unit);
    else if (kind == TRK_CACHE)
        snprintf(t->name, sizeof(t->name), "nic cache: %s",
                 sim_trace_cache_name((enum trace_cache)unit));
    else if (kind == TRK_LINK)
        snprintf(t->name, sizeof(t->name), "link %u", unit);
    else if (kind < TRK_PCIE_UP && kind != TRK_THREAD)
        snprintf(t->name, sizeof(t->name), "nic: %s", track_label(kind));
    else
        snprintf(t->name, sizeof(t->name), "%s", track_label(kind));
    map_put(&tl->track_map, key, tl->n_tracks);
    return t;
}

/* The tid of lane `lane` of a track (its metadata written on first use). */
static uint32_t lane_tid(struct timeline *tl, struct tl_track *t, uint32_t lane)
{
    while (t->n_lanes <= lane) {
        uint32_t l = t->n_lanes++;
        t->tid[l] = ++tl->next_tid[t->pid];
        t->end_ns[l] = 0;
        name_pid(tl, t->pid);
        size_t o = 0;
        char name[96];
        if (l)
            snprintf(name, sizeof(name), "%s #%u", t->name, l + 1);
        else
            snprintf(name, sizeof(name), "%s", t->name);
        evf(tl, &o,
            "{\"ph\":\"M\",\"pid\":%u,\"tid\":%u,\"name\":\"thread_name\",\"args\":{\"name\":",
            t->pid, t->tid[l]);
        evs(tl, &o, name);
        evf(tl, &o, "}}");
        emit(tl, o);
        o = 0;
        uint32_t sort = t->kind * 100000u + (t->kind == TRK_LINK ? 0 : t->unit * 64u) + l;
        evf(tl, &o,
            "{\"ph\":\"M\",\"pid\":%u,\"tid\":%u,\"name\":\"thread_sort_index\",\"args\":{\"sort_"
            "index\":%u}}",
            t->pid, t->tid[l], sort);
        emit(tl, o);
    }
    return t->tid[lane];
}

/* A span as written: whole nanoseconds, at least one long (so that a flow
 * can bind to it). */
static void span_ns(sim_time_t t0, sim_time_t dur, uint64_t *ns0, uint64_t *dur_ns)
{
    *ns0 = t0 / 1000;
    uint64_t ns1 = (t0 + dur) / 1000;
    *dur_ns = ns1 > *ns0 ? ns1 - *ns0 : 1;
}

/* The lane a span goes to: the first whose spans all ended by its start. */
static uint32_t span_lane(struct timeline *tl, struct tl_track *t, uint64_t ns0, uint64_t dur_ns)
{
    uint32_t l = 0;
    while (l < t->n_lanes && t->end_ns[l] > ns0)
        l++;
    if (l == 64) /* more than 64 at once: the last lane takes it (viewers may nest it) */
        l = 63;
    lane_tid(tl, t, l);
    if (ns0 + dur_ns > t->end_ns[l])
        t->end_ns[l] = ns0 + dur_ns;
    return l;
}

/* ---------------------------------------------------------------- filters */

static bool host_ok(const struct timeline *tl, uint32_t node)
{
    return !tl->host_in || (node < tl->w->nhosts && tl->host_in[node]);
}

static bool qp_ok(const struct timeline *tl, uint32_t node, uint32_t qpn)
{
    for (size_t i = 0; i < tl->nqsel; i++)
        if (tl->qsel[i].qpn == qpn && (tl->qsel[i].host < 0 || (uint64_t)tl->qsel[i].host == node))
            return true;
    return false;
}

/* Does record r pass the filters?  A record happens on its host (node);
 * a frame on a link (or dropped by a switch) passes if either end does. */
static bool rec_ok(const struct timeline *tl, const struct trace_rec *r)
{
    if (r->kind == TRACE_INSTANT && r->track == TRK_THREAD) /* a thread's name: any window */
        return host_ok(tl, r->node);
    sim_time_t t0 = r->kind >= TRACE_SPAN ? r->t0_ps : r->t_ps;
    sim_time_t t1 = r->kind == TRACE_SPAN ? t0 + r->dur_ps : t0;
    if (t1 < tl->from_ps || t0 > tl->to_ps)
        return false;
    bool link = r->track == TRK_LINK;
    bool sw = r->kind == TRACE_PKT_DROP && r->track == TRK_COUNT;
    if (link || sw) { /* src = peer; dst = unit (link) or node (switch drop) */
        uint32_t dst = link ? r->unit : r->node;
        if (r->kind == TRACE_COUNTER || r->kind == TRACE_INSTANT) /* queue bytes, PFC */
            return !tl->nqsel;
        if (tl->host_in && !host_ok(tl, r->peer) && !host_ok(tl, dst))
            return false;
        return !tl->nqsel || qp_ok(tl, r->peer, r->peer_qpn) || qp_ok(tl, dst, r->qpn);
    }
    if (!host_ok(tl, r->node))
        return false;
    if (tl->nqsel)
        return r->qpn && qp_ok(tl, r->node, r->qpn);
    return true;
}

/* ---------------------------------------------------------------- flows */

static struct tl_qp *qp_get(struct timeline *tl, uint32_t node, uint32_t qpn, bool create)
{
    uint64_t key = (uint64_t)node << 32 | qpn;
    uint32_t i = map_get(&tl->qp_map, key);
    if (i)
        return &tl->qps[i - 1];
    if (!create)
        return NULL;
    if (tl->n_qps == tl->cap_qps) {
        tl->cap_qps = tl->cap_qps ? 2 * tl->cap_qps : 16;
        tl->qps = tl_realloc(tl->qps, tl->cap_qps * sizeof(*tl->qps));
    }
    struct tl_qp *q = &tl->qps[tl->n_qps++];
    memset(q, 0, sizeof(*q));
    q->key = key;
    map_put(&tl->qp_map, key, tl->n_qps);
    return q;
}

static struct tl_wr *wr_at(struct tl_qp *q, uint64_t idx)
{
    if (!q->wr || idx < q->lo || idx >= q->hi)
        return NULL;
    return &q->wr[idx % TL_WR_RING];
}

/* The entry for idx, created (unfollowed) if new. */
static struct tl_wr *wr_make(struct tl_qp *q, uint64_t idx)
{
    if (!q->wr) {
        q->wr = tl_realloc(NULL, TL_WR_RING * sizeof(*q->wr));
        q->lo = q->hi = q->front = idx;
    }
    if (idx < q->lo)
        return NULL; /* forgotten already */
    while (q->hi <= idx) {
        struct tl_wr *w = &q->wr[q->hi % TL_WR_RING];
        memset(w, 0, sizeof(*w));
        w->idx = q->hi++;
        if (q->hi - q->lo > TL_WR_RING)
            q->lo = q->hi - TL_WR_RING;
    }
    if (q->front < q->lo)
        q->front = q->lo;
    return &q->wr[idx % TL_WR_RING];
}

static bool is_rd_atomic(uint8_t wr_opcode)
{
    return wr_opcode == IBV_WR_RDMA_READ || wr_opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
           wr_opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

/* psn - base in 24-bit PSN space, signed. */
static int32_t psn_diff(uint32_t a, uint32_t b)
{
    return (int32_t)((a - b) << 8) >> 8;
}

/* The started work request of q holding psn. */
static struct tl_wr *wr_of_psn(struct tl_qp *q, uint32_t psn)
{
    if (!q || !q->wr)
        return NULL;
    uint64_t n = 0;
    for (uint64_t i = q->front; i < q->hi && n < TL_SCAN_MAX; i++, n++) {
        struct tl_wr *w = &q->wr[i % TL_WR_RING];
        if (!w->started)
            continue;
        if (psn_diff(psn, w->first_psn) >= 0 && psn_diff(psn, w->last_psn) <= 0)
            return w;
        if (psn_diff(psn, w->first_psn) < 0)
            break;
    }
    return NULL;
}

/* Move the front past work requests that completed. */
static void qp_advance(struct tl_qp *q)
{
    while (q->front < q->hi) {
        struct tl_wr *w = &q->wr[q->front % TL_WR_RING];
        if (w->phase < TL_PH_ACKED)
            break;
        q->front++;
    }
    if (q->hi - q->front > TL_SCAN_MAX)
        q->front = q->hi - TL_SCAN_MAX;
}

/* A flow event of `flow` bound to the slice of pid/tid that starts at ns0
 * and lasts dur_ns: inside it, after the flow's previous event (*last_ns)
 * when the slice allows, so that the steps of a flow are in time order. */
static void flow_event(struct timeline *tl, char ph, uint64_t flow, uint32_t pid, uint32_t tid,
                       uint64_t ns0, uint64_t dur_ns, uint64_t *last_ns)
{
    uint64_t ts = ns0;
    if (*last_ns + 1 > ts)
        ts = *last_ns + 1;
    if (ts > ns0 + dur_ns - 1)
        ts = ns0 + dur_ns - 1;
    *last_ns = ts;
    size_t o = 0;
    evf(tl, &o,
        "{\"ph\":\"%c\",\"cat\":\"wr\",\"name\":\"work request\",\"id\":%" PRIu64
        ",\"pid\":%u,\"tid\":%u,\"ts\":%" PRIu64 ".%03" PRIu64 "%s}",
        ph, flow, pid, tid, ts / 1000, ts % 1000, ph == 'f' ? ",\"bp\":\"e\"" : "");
    emit(tl, o);
}

/* The slice just written (for flow events). */
struct tl_slice {
    bool ok;
    uint32_t pid, tid;
    uint64_t ns0, dur_ns;
};

static void step(struct timeline *tl, struct tl_wr *w, const struct tl_slice *s, uint8_t phase)
{
    if (!w || !w->flow || !s->ok)
        return;
    if (phase > w->phase)
        w->phase = phase;
    flow_event(tl, 't', w->flow, s->pid, s->tid, s->ns0, s->dur_ns, &w->last_ns);
}

/* The requester QP of a packet record and whether the packet is a request:
 * src = the sending end, dst = the receiving end. */
static struct tl_qp *pkt_requester(struct timeline *tl, uint8_t opcode, uint32_t src_node,
                                   uint32_t src_qpn, uint32_t dst_node, uint32_t dst_qpn)
{
    const struct nic_opcode_info *info = nic_opcode(opcode);
    if (!info->name)
        return NULL;
    bool req = (info->mask & NIC_OPF_REQ) != 0;
    return req ? qp_get(tl, src_node, src_qpn, false) : qp_get(tl, dst_node, dst_qpn, false);
}

/* A packet record: step the work requests it carries forward (`home`:
 * the requester received it: an ACK's last step). */
static void flow_pkt(struct timeline *tl, uint8_t opcode, uint32_t psn, uint32_t syndrome,
                     struct tl_qp *q, const struct tl_slice *s, bool home)
{
    if (!q)
        return;
    const struct nic_opcode_info *info = nic_opcode(opcode);
    if (opcode == IB_OPCODE_RC_ACKNOWLEDGE) {
        /* an ACK covers every send / write up to psn; a NAK those before it */
        bool nak = (syndrome & NIC_AETH_TYPE_MASK) != 0;
        uint64_t n = 0;
        for (uint64_t i = q->front; i < q->hi && n < TL_SCAN_MAX; i++, n++) {
            struct tl_wr *w = &q->wr[i % TL_WR_RING];
            if (!w->started)
                continue;
            int32_t d = psn_diff(w->last_psn, psn);
            if (d > 0 || (nak && d == 0))
                break;
            if (!is_rd_atomic(w->opcode) && (w->phase == TL_PH_DATA || w->phase == TL_PH_ACK)) {
                step(tl, w, s, TL_PH_ACK);
                if (home)
                    w->phase = TL_PH_ACKED;
            }
        }
        qp_advance(q);
        return;
    }
    struct tl_wr *w = wr_of_psn(q, psn);
    if (!w || w->phase > TL_PH_DATA)
        return;
    bool req = (info->mask & NIC_OPF_REQ) != 0;
    /* a READ's request carries its first PSN; everything else is followed
     * through its last packet */
    uint32_t key = req && w->opcode == IBV_WR_RDMA_READ ? w->first_psn : w->last_psn;
    if (psn == key)
        step(tl, w, s, TL_PH_DATA);
}

static struct tl_cq *cq_get(struct timeline *tl, uint32_t node, uint32_t id)
{
    uint64_t key = (uint64_t)node << 32 | id;
    uint32_t i = map_get(&tl->cq_map, key);
    if (i)
        return &tl->cqs[i - 1];
    if (tl->n_cqs == tl->cap_cqs) {
        tl->cap_cqs = tl->cap_cqs ? 2 * tl->cap_cqs : 16;
        tl->cqs = tl_realloc(tl->cqs, tl->cap_cqs * sizeof(*tl->cqs));
    }
    struct tl_cq *c = &tl->cqs[tl->n_cqs++];
    memset(c, 0, sizeof(*c));
    c->key = key;
    map_put(&tl->cq_map, key, tl->n_cqs);
    return c;
}

static void cq_push(struct tl_cq *c, uint64_t flow, uint64_t last_ns)
{
    if (c->n == c->cap) {
        uint32_t cap = c->cap ? 2 * c->cap : 16;
        uint64_t *f = tl_realloc(NULL, cap * sizeof(*f));
        uint64_t *l = tl_realloc(NULL, cap * sizeof(*l));
        for (uint32_t i = 0; i < c->n; i++) {
            f[i] = c->flow[(c->head + i) % c->cap];
            l[i] = c->last_ns[(c->head + i) % c->cap];
        }
        free(c->flow);
        free(c->last_ns);
        c->flow = f;
        c->last_ns = l;
        c->cap = cap;
        c->head = 0;
    }
    c->flow[(c->head + c->n) % c->cap] = flow;
    c->last_ns[(c->head + c->n) % c->cap] = last_ns;
    c->n++;
}

/* ---------------------------------------------------------------- names */

static const char *wr_opcode_name(uint8_t op)
{
    const char *name = nic_wr_opcode_name(op);
    return name ? name : "WR";
}

static const char *wc_opcode_name(uint8_t op)
{
    switch (op) {
    case IBV_WC_SEND:
        return "SEND";
    case IBV_WC_RDMA_WRITE:
        return "RDMA_WRITE";
    case IBV_WC_RDMA_READ:
        return "RDMA_READ";
    case IBV_WC_COMP_SWAP:
        return "COMP_SWAP";
    case IBV_WC_FETCH_ADD:
        return "FETCH_ADD";
    case IBV_WC_RECV:
        return "RECV";
    case IBV_WC_RECV_RDMA_WITH_IMM:
        return "RECV_RDMA_WITH_IMM";
    default:
        return "CQE";
    }
}

static const char *opcode_name(uint8_t op)
{
    const char *n = nic_opcode(op)->name;
    if (!n)
        return op == 0x81 ? "CNP" : "?"; /* the RoCEv2 CNP (sim/nic/ratelimit.h) */
    return strncmp(n, "RC_", 3) == 0 || strncmp(n, "UC_", 3) == 0 || strncmp(n, "UD_", 3) == 0
               ? n + 3
               : n;
}

/* ---------------------------------------------------------------- records -> events */

/* Begin an X (dur_ns > 0) or i event on (pid, tid) at ns0 with the name;
 * the caller adds args. */
static size_t ev_begin(struct timeline *tl, uint32_t pid, uint32_t tid, uint64_t ns0,
                       uint64_t dur_ns, const char *name)
{
    size_t o = 0;
    evf(tl, &o, "{\"ph\":\"%c\",\"pid\":%u,\"tid\":%u,\"ts\":%" PRIu64 ".%03" PRIu64,
        dur_ns ? 'X' : 'i', pid, tid, ns0 / 1000, ns0 % 1000);
    if (dur_ns)
        evf(tl, &o, ",\"dur\":%" PRIu64 ".%03" PRIu64, dur_ns / 1000, dur_ns % 1000);
    else
        evf(tl, &o, ",\"s\":\"t\"");
    evf(tl, &o, ",\"name\":");
    evs(tl, &o, name);
    evf(tl, &o, ",\"args\":{");
    return o;
}

static void arg_sep(struct timeline *tl, size_t *o)
{
    if (tl->ev[*o - 1] != '{')
        evf(tl, o, ",");
}

static void arg_u(struct timeline *tl, size_t *o, const char *k, uint64_t v)
{
    arg_sep(tl, o);
    evf(tl, o, "\"%s\":%" PRIu64, k, v);
}

static void arg_hex(struct timeline *tl, size_t *o, const char *k, uint64_t v)
{
    arg_sep(tl, o);
    evf(tl, o, "\"%s\":\"0x%" PRIx64 "\"", k, v);
}

static void arg_s(struct timeline *tl, size_t *o, const char *k, const char *v)
{
    arg_sep(tl, o);
    evf(tl, o, "\"%s\":", k);
    evs(tl, o, v);
}

static void ev_end(struct timeline *tl, size_t o)
{
    evf(tl, &o, "}}");
    emit(tl, o);
}

/* Packet fields as args. */
static void args_pkt(struct timeline *tl, size_t *o, const struct trace_rec *r, bool tx)
{
    arg_s(tl, o, "opcode", opcode_name(r->opcode));
    arg_u(tl, o, "psn", r->psn);
    arg_hex(tl, o, "qp", r->qpn);
    arg_u(tl, o, tx ? "to host" : "from host", r->peer);
    arg_hex(tl, o, tx ? "to qp" : "from qp", r->peer_qpn);
    arg_u(tl, o, "payload bytes", r->len);
}

static void span_name(const struct trace_rec *r, char *buf, size_t len)
{
    switch ((enum trace_track)r->track) {
    case TRK_THREAD:
        if (strncmp(r->where, "shim_", 5) == 0)
            snprintf(buf, len, "ibv_%s", r->where + 5);
        else
            snprintf(buf, len, "%s", r->where);
        return;
    case TRK_REQ:
        snprintf(buf, len, "%s wqe %" PRIu64 "%s", wr_opcode_name(r->opcode), r->addr,
                 (r->flags & TRACE_F_RETRY) ? " (again)" : "");
        return;
    case TRK_TX:
    case TRK_RX:
        snprintf(buf, len, "%s %u", opcode_name(r->opcode), r->psn);
        return;
    case TRK_DMA_RD:
    case TRK_DMA_WR:
        snprintf(buf, len, "%s psn %u", r->where, r->psn);
        return;
    case TRK_CQE:
        snprintf(buf, len, "CQE %s%s", wc_opcode_name(r->opcode), r->status ? " (error)" : "");
        return;
    case TRK_PCIE_UP:
    case TRK_PCIE_DOWN:
        snprintf(buf, len, "%s %s", r->where,
                 r->opcode < PCIE_K_COUNT ? pcie_kind_names[r->opcode] : "other");
        return;
    case TRK_LINK:
        if (r->status == PKT_PFC)
            snprintf(buf, len, "PFC pause frame");
        else
            snprintf(buf, len, "%s %u", opcode_name(r->opcode), r->psn);
        return;
    case TRK_CACHE:
        snprintf(buf, len, "%s %s", sim_trace_cache_name((enum trace_cache)r->unit), r->where);
        return;
    default:
        snprintf(buf, len, "%s", r->where ? r->where : "?");
        return;
    }
}

/* A span record: the slice, its args, and its place in the flows. */
static void on_span(struct timeline *tl, const struct trace_rec *r, bool out)
{
    uint32_t pid, unit = 0, kind = r->track;
    const char *tname = NULL;
    if (r->track == TRK_LINK) {
        pid = tl->fabric_pid;
        unit = r->node;
        tname = r->where;
    } else {
        pid = r->node + 1;
        if (r->track == TRK_THREAD || r->track == TRK_CACHE)
            unit = r->unit;
    }
    struct tl_slice s = {0};
    uint64_t ns0, dur_ns;
    span_ns(r->t0_ps, r->dur_ps, &ns0, &dur_ns);
    if (out) {
        struct tl_track *t = track_get(tl, pid, kind, unit, tname);
        uint32_t lane = span_lane(tl, t, ns0, dur_ns);
        char name[96];
        span_name(r, name, sizeof(name));
        s = (struct tl_slice){true, pid, t->tid[lane], ns0, dur_ns};
        size_t o = ev_begin(tl, pid, t->tid[lane], ns0, dur_ns, name);
        switch ((enum trace_track)r->track) {
        case TRK_THREAD:
            if (r->qpn)
                arg_hex(tl, &o, "qp", r->qpn);
            if (!strcmp(r->where, "ibv_poll_cq")) {
                arg_u(tl, &o, "cq", r->addr);
                arg_u(tl, &o, "returned", r->val);
            } else if (!strncmp(r->where, "ibv_post", 8)) {
                if (!strcmp(r->where, "ibv_post_send"))
                    arg_s(tl, &o, "first wr", wr_opcode_name(r->opcode));
                arg_u(tl, &o, "bytes of the first wr", r->len);
                arg_u(tl, &o, "wrs posted", r->val);
                arg_u(tl, &o, "errno", r->status);
            }
            break;
        case TRK_DOORBELL:
        case TRK_WQE_FETCH:
            arg_hex(tl, &o, "qp", r->qpn);
            arg_u(tl, &o, "first wqe", r->addr);
            arg_u(tl, &o, "wqes", r->val - r->addr);
            if (r->len)
                arg_u(tl, &o, "bytes", r->len);
            break;
        case TRK_REQ:
            arg_hex(tl, &o, "qp", r->qpn);
            arg_u(tl, &o, "wqe", r->addr);
            arg_u(tl, &o, "first psn", r->psn);
            arg_u(tl, &o, "last psn", r->val);
            arg_u(tl, &o, "bytes", r->len);
            break;
        case TRK_TX:
        case TRK_DMA_RD:
            args_pkt(tl, &o, r, true);
            break;
        case TRK_RX:
            args_pkt(tl, &o, r, false);
            break;
        case TRK_DMA_WR:
            arg_hex(tl, &o, "qp", r->qpn);
            arg_u(tl, &o, "psn", r->psn);
            arg_u(tl, &o, "offset", r->addr);
            arg_u(tl, &o, "bytes", r->len);
            break;
        case TRK_CQE:
            arg_hex(tl, &o, "qp", r->qpn);
            arg_u(tl, &o, "cq", r->unit);
            arg_u(tl, &o, "wr_id", r->addr);
            arg_u(tl, &o, "status", r->status);
            arg_u(tl, &o, "byte_len", r->len);
            break;
        case TRK_PCIE_UP:
        case TRK_PCIE_DOWN:
            arg_u(tl, &o, "tlps", r->val);
            arg_u(tl, &o, "payload bytes", r->len);
            if (r->qpn)
                arg_hex(tl, &o, "qp", r->qpn);
            if (r->psn)
                arg_u(tl, &o, "psn", r->psn);
            if (r->status & PCIE_F_RELAXED)
                arg_u(tl, &o, "relaxed ordering", 1);
            break;
        case TRK_LINK:
            if (r->status != PKT_PFC) {
                arg_s(tl, &o, "opcode", opcode_name(r->opcode));
                arg_u(tl, &o, "psn", r->psn);
                arg_u(tl, &o, "from host", r->peer);
                arg_hex(tl, &o, "from qp", r->peer_qpn);
                arg_u(tl, &o, "to host", r->unit);
                arg_hex(tl, &o, "to qp", r->qpn);
                arg_u(tl, &o, "payload bytes", r->len);
                if (r->flags & 1)
                    arg_u(tl, &o, "ecn ce", 1);
            }
            arg_u(tl, &o, "wire bytes", r->val);
            break;
        default:
            if (r->qpn)
                arg_hex(tl, &o, "qp", r->qpn);
            if (r->psn)
                arg_u(tl, &o, "psn", r->psn);
            if (r->len)
                arg_u(tl, &o, "bytes", r->len);
            break;
        }
        ev_end(tl, o);
    }

    /* flows */
    switch ((enum trace_track)r->track) {
    case TRK_DOORBELL:
    case TRK_WQE_FETCH: {
        struct tl_qp *q = qp_get(tl, r->node, r->qpn, false);
        for (uint64_t i = r->addr; q && i < r->val; i++)
            step(tl, wr_at(q, i), &s, TL_PH_POSTED);
        break;
    }
    case TRK_REQ: {
        struct tl_qp *q = qp_get(tl, r->node, r->qpn, true);
        struct tl_wr *w = wr_make(q, r->addr);
        if (w) {
            w->started = true;
            w->first_psn = r->psn;
            w->last_psn = (uint32_t)r->val;
            w->opcode = r->opcode;
            step(tl, w, &s, TL_PH_DATA);
        }
        break;
    }
    case TRK_TX:
    case TRK_DMA_RD:
        flow_pkt(tl, r->opcode, r->psn, (uint32_t)r->addr,
                 pkt_requester(tl, r->opcode, r->node, r->qpn, r->peer, r->peer_qpn), &s, false);
        break;
    case TRK_RX: {
        /* learn the QP's peer (RC: one) */
        struct tl_qp *me = qp_get(tl, r->node, r->qpn, true);
        int qpt = nic_opcode(r->opcode)->name ? nic_opcode_qp_type(r->opcode) : -1;
        if (!me->has_peer && (qpt == IBV_QPT_RC || qpt == IBV_QPT_UC)) { /* not UD: many peers */
            me->has_peer = true;
            me->peer_node = r->peer;
            me->peer_qpn = r->peer_qpn;
        }
        flow_pkt(tl, r->opcode, r->psn, (uint32_t)r->addr,
                 pkt_requester(tl, r->opcode, r->peer, r->peer_qpn, r->node, r->qpn), &s,
                 !(nic_opcode(r->opcode)->mask & NIC_OPF_REQ));
        break;
    }
    case TRK_LINK:
        if (r->status != PKT_PFC)
            flow_pkt(tl, r->opcode, r->psn, (uint32_t)r->addr,
                     pkt_requester(tl, r->opcode, r->peer, r->peer_qpn, r->unit, r->qpn), &s,
                     false);
        break;
    case TRK_RDENG:
    case TRK_ATOMIC: {
        /* the responder's READ engine or atomic unit working on the request
         * (its PSN: a READ's first, an atomic's only one) of the peer's WR */
        struct tl_qp *me = qp_get(tl, r->node, r->qpn, false);
        struct tl_qp *q =
            me && me->has_peer ? qp_get(tl, me->peer_node, me->peer_qpn, false) : NULL;
        struct tl_wr *w = wr_of_psn(q, r->psn);
        if (w && is_rd_atomic(w->opcode) && r->psn == w->first_psn && w->phase == TL_PH_DATA)
            step(tl, w, &s, TL_PH_DATA);
        break;
    }
    case TRK_DMA_WR: {
        if (!r->where)
            break;
        struct tl_qp *q = qp_get(tl, r->node, r->qpn, false);
        if (strncmp(r->where, "comp:", 5) != 0) /* the responder placed it: its peer asked */
            q = q && q->has_peer ? qp_get(tl, q->peer_node, q->peer_qpn, false) : NULL;
        struct tl_wr *w = wr_of_psn(q, r->psn);
        /* the message's last bytes (a placement may be in several pieces) */
        if (w && r->psn == w->last_psn && r->addr + r->len >= r->val && w->phase <= TL_PH_DATA) {
            step(tl, w, &s, TL_PH_DATA);
            if (q == qp_get(tl, r->node, r->qpn, false)) /* a response placed: it is done */
                w->phase = TL_PH_ACKED;
        }
        break;
    }
    case TRK_CQE: {
        struct tl_qp *q = qp_get(tl, r->node, r->qpn, false);
        struct tl_wr *w = r->val && q ? wr_at(q, r->val - 1) : NULL;
        uint64_t flow = w && w->phase < TL_PH_CQE ? w->flow : 0;
        if (w && flow)
            step(tl, w, &s, TL_PH_CQE);
        else if (w)
            w->phase = TL_PH_CQE;
        if (q)
            qp_advance(q);
        cq_push(cq_get(tl, r->node, r->unit), s.ok ? flow : 0, w ? w->last_ns : 0);
        break;
    }
    default:
        break;
    }
    if (r->track == TRK_THREAD) { /* a POST / POLL record may follow */
        tl->call_valid = s.ok;
        tl->call_pid = s.pid;
        tl->call_tid = s.tid;
        tl->call_ns = ns0;
        tl->call_dur_ns = dur_ns;
    }
}

static void point_name(const struct trace_rec *r, char *name, size_t len)
{
    if (r->kind == TRACE_COUNTER)
        snprintf(name, len, "queue %" PRIu64 " bytes", r->val);
    else if (r->track == TRK_LINK) /* PFC at this link's transmitter */
        snprintf(name, len, "PFC %s prio %u", (r->flags & 1) ? "pause" : "resume", r->status);
    else if (r->track == TRK_CACHE)
        snprintf(name, len, "%s %s", sim_trace_cache_name((enum trace_cache)r->unit), r->where);
    else if (r->track == TRK_THREAD)
        snprintf(name, len, "thread %s starts", r->where);
    else
        snprintf(name, len, "%s", r->where ? r->where : "?");
}

/* One record as a line of text (--trace). */
static void text_line(struct timeline *tl, const struct trace_rec *r)
{
    char line[512];
    if (r->kind < TRACE_SPAN) {
        sim_trace_format(r, line, sizeof(line));
        fprintf(stdout, "[trace] %s\n", line);
        return;
    }
    char name[96], where[96];
    if (r->kind == TRACE_SPAN)
        span_name(r, name, sizeof(name));
    else
        point_name(r, name, sizeof(name));
    if (r->track == TRK_LINK)
        snprintf(where, sizeof(where), "link %s", r->where);
    else if (r->track == TRK_THREAD)
        snprintf(where, sizeof(where), "%s thread %u", tl->w->hosts[r->node].name, r->unit);
    else if (r->track == TRK_CACHE)
        snprintf(where, sizeof(where), "%s nic cache", tl->w->hosts[r->node].name);
    else
        snprintf(where, sizeof(where), "%s %s", tl->w->hosts[r->node].name, track_label(r->track));
    size_t o = 0;
    o += (size_t)snprintf(line + o, sizeof(line) - o, "%14.3f ns  %-24s %s", sim_ps_to_ns(r->t_ps),
                          where, name);
    if (r->kind == TRACE_SPAN && o < sizeof(line))
        o += (size_t)snprintf(line + o, sizeof(line) - o, "  [%.3f .. %.3f ns]",
                              sim_ps_to_ns(r->t0_ps), sim_ps_to_ns(r->t0_ps + r->dur_ps));
    if (r->qpn && o < sizeof(line))
        o += (size_t)snprintf(line + o, sizeof(line) - o, "  qp 0x%x", r->qpn);
    if (r->peer_qpn && o < sizeof(line))
        o += (size_t)snprintf(line + o, sizeof(line) - o, "  peer h%u qp 0x%x", r->peer,
                              r->peer_qpn);
    if (r->len && o < sizeof(line))
        snprintf(line + o, sizeof(line) - o, "  %u bytes", r->len);
    fprintf(stdout, "[trace] %s\n", line);
}

/* An instant or a counter. */
static void on_point(struct timeline *tl, const struct trace_rec *r)
{
    if (r->kind == TRACE_INSTANT && r->track == TRK_THREAD) { /* a thread started: its name */
        track_get(tl, r->node + 1, TRK_THREAD, r->unit, r->where);
        return;
    }
    char b[32], name[96];
    if (r->kind == TRACE_COUNTER) { /* a link's queue */
        struct tl_track *t = track_get(tl, tl->fabric_pid, TRK_LINK, r->node, r->where);
        uint32_t tid = lane_tid(tl, t, 0);
        size_t o = 0;
        evf(tl, &o, "{\"ph\":\"C\",\"pid\":%u,\"tid\":%u,\"ts\":%s,\"name\":", tl->fabric_pid, tid,
            us(r->t0_ps, b));
        snprintf(name, sizeof(name), "%s queue", t->name);
        evs(tl, &o, name);
        evf(tl, &o, ",\"args\":{\"bytes\":%" PRIu64 "}}", r->val);
        emit(tl, o);
        return;
    }
    uint32_t pid = r->track == TRK_LINK ? tl->fabric_pid : r->node + 1;
    uint32_t unit = r->track == TRK_LINK ? r->node : r->track == TRK_CACHE ? r->unit : 0;
    struct tl_track *t = track_get(tl, pid, r->track, unit, r->track == TRK_LINK ? r->where : NULL);
    uint32_t tid = lane_tid(tl, t, 0);
    point_name(r, name, sizeof(name));
    size_t o = ev_begin(tl, pid, tid, r->t0_ps / 1000, 0, name);
    if (r->qpn)
        arg_hex(tl, &o, "qp", r->qpn);
    if (r->track == TRK_CACHE)
        arg_hex(tl, &o, "key", r->addr);
    else if (r->track == TRK_LINK && (r->flags & 1))
        arg_s(tl, &o, "paused until (us)", us(r->val, b));
    else if (r->psn || r->track == TRK_COMP || r->track == TRK_RESP)
        arg_u(tl, &o, "psn", r->psn);
    ev_end(tl, o);
}

/* Core records: drops and notes are drawn; posts and polls start and end
 * flows; the rest (packets, DMA writes, CQEs) have spans of their own. */
static void on_core(struct timeline *tl, const struct trace_rec *r, bool out)
{
    char name[128];
    switch ((enum trace_kind)r->kind) {
    case TRACE_PKT_DROP: {
        if (!out)
            return;
        uint32_t pid = r->node + 1, kind = TL_DROPS, unit = 0;
        const char *tname = NULL;
        if (r->track == TRK_LINK) {
            pid = tl->fabric_pid;
            kind = TRK_LINK;
            unit = r->node;
        } else if (r->track == TRK_COUNT) {
            pid = tl->fabric_pid;
            kind = TL_SWITCH_DROPS;
        }
        struct tl_track *t = track_get(tl, pid, kind, unit, tname);
        snprintf(name, sizeof(name), "drop %s %u: %s", opcode_name(r->opcode), r->psn,
                 r->where ? r->where : "?");
        size_t o = ev_begin(tl, pid, lane_tid(tl, t, 0), r->t_ps / 1000, 0, name);
        arg_u(tl, &o, "psn", r->psn);
        arg_hex(tl, &o, "qp", r->qpn);
        ev_end(tl, o);
        return;
    }
    case TRACE_NOTE: {
        if (!out)
            return;
        struct tl_track *t = track_get(tl, r->node + 1, TL_NOTES, 0, NULL);
        size_t o = ev_begin(tl, r->node + 1, lane_tid(tl, t, 0), r->t_ps / 1000, 0,
                            r->where ? r->where : "note");
        if (r->addr)
            arg_u(tl, &o, "value", r->addr);
        ev_end(tl, o);
        return;
    }
    case TRACE_POST: {
        if (r->opcode >= TRACE_POST_SRQ_RECV)
            return;
        struct tl_qp *q = qp_get(tl, r->node, r->qpn, true);
        struct tl_wr *w = wr_make(q, r->val);
        if (!w)
            return;
        w->opcode = r->opcode;
        w->phase = TL_PH_POSTED;
        if (out && tl->call_valid && tl->f) {
            w->flow = ++tl->next_flow;
            w->last_ns = 0;
            flow_event(tl, 's', w->flow, tl->call_pid, tl->call_tid, tl->call_ns, tl->call_dur_ns,
                       &w->last_ns);
        }
        return;
    }
    case TRACE_POLL: {
        struct tl_cq *c = cq_get(tl, r->node, r->unit);
        if (!c->n)
            return;
        uint64_t flow = c->flow[c->head], last = c->last_ns[c->head];
        c->head = (c->head + 1) % c->cap;
        c->n--;
        if (flow && out && tl->call_valid)
            flow_event(tl, 'f', flow, tl->call_pid, tl->call_tid, tl->call_ns, tl->call_dur_ns,
                       &last);
        return;
    }
    default:
        return;
    }
}

static void sink(void *arg, const struct trace_rec *r)
{
    struct timeline *tl = arg;
    bool out = rec_ok(tl, r);
    if (out && tl->o.text)
        text_line(tl, r);
    if (!tl->f || tl->cut)
        return;
    switch ((enum trace_kind)r->kind) {
    case TRACE_SPAN:
        on_span(tl, r, out);
        break;
    case TRACE_INSTANT:
    case TRACE_COUNTER:
        if (out)
            on_point(tl, r);
        break;
    default:
        on_core(tl, r, out);
        break;
    }
}

/* ---------------------------------------------------------------- options */

static int parse_host(const char *s, size_t len, size_t nhosts, int64_t *out)
{
    if (len < 2 || s[0] != 'h')
        return -1;
    uint64_t v = 0;
    for (size_t i = 1; i < len; i++) {
        if (s[i] < '0' || s[i] > '9' || v > 100000000)
            return -1;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (v >= nhosts)
        return -1;
    *out = (int64_t)v;
    return 0;
}

/* Parse the filters into tl (or only check them when tl is NULL). */
static int parse_filters(struct timeline *tl, const struct timeline_opts *o, size_t nhosts,
                         char *why, size_t why_len)
{
    if (o->hosts) {
        if (tl)
            tl->host_in = tl_realloc(NULL, nhosts * sizeof(*tl->host_in)),
            memset(tl->host_in, 0, nhosts * sizeof(*tl->host_in));
        for (const char *p = o->hosts; *p;) {
            size_t n = strcspn(p, ",");
            int64_t h;
            if (parse_host(p, n, nhosts, &h)) {
                snprintf(why, why_len,
                         "--timeline-hosts: unknown host '%.*s' (the scenario has h0..h%zu)",
                         (int)n, p, nhosts ? nhosts - 1 : 0);
                return -1;
            }
            if (tl)
                tl->host_in[h] = true;
            p += n + (p[n] == ',');
        }
    }
    if (o->qps) {
        for (const char *p = o->qps; *p;) {
            size_t n = strcspn(p, ",");
            char item[64];
            snprintf(item, sizeof(item), "%.*s", (int)(n < 63 ? n : 63), p);
            struct tl_qp_sel sel = {.host = -1};
            char *num = item, *colon = strchr(item, ':');
            if (colon) {
                if (parse_host(item, (size_t)(colon - item), nhosts, &sel.host)) {
                    snprintf(why, why_len,
                             "--timeline-qps: '%s': unknown host (the scenario has h0..h%zu)", item,
                             nhosts ? nhosts - 1 : 0);
                    return -1;
                }
                num = colon + 1;
            }
            char *end = NULL;
            errno = 0;
            unsigned long long v = strtoull(num, &end, 0);
            if (!*num || *end || errno || v > 0xffffff) {
                snprintf(why, why_len,
                         "--timeline-qps: '%s' is not a QP number (like 0x100 or h1:0x101)", item);
                return -1;
            }
            sel.qpn = (uint32_t)v;
            if (tl) {
                tl->qsel = tl_realloc(tl->qsel, (tl->nqsel + 1) * sizeof(*tl->qsel));
                tl->qsel[tl->nqsel++] = sel;
            }
            p += n + (p[n] == ',');
        }
    }
    if (o->window) {
        const char *colon = strchr(o->window, ':');
        if (!colon) {
            snprintf(why, why_len, "--timeline-window: '%s' is not FROM:TO (like 10us:50us)",
                     o->window);
            return -1;
        }
        char a[64], b[64], e[128];
        snprintf(a, sizeof(a), "%.*s", (int)(colon - o->window), o->window);
        snprintf(b, sizeof(b), "%s", colon + 1);
        sim_time_t from = 0, to = SIM_TIME_NEVER;
        if ((a[0] && cfg_parse_time(a, &from, e, sizeof(e))) ||
            (b[0] && cfg_parse_time(b, &to, e, sizeof(e)))) {
            snprintf(why, why_len, "--timeline-window: %s", e);
            return -1;
        }
        if (to < from) {
            snprintf(why, why_len, "--timeline-window: '%s' ends before it starts", o->window);
            return -1;
        }
        if (tl) {
            tl->from_ps = from;
            tl->to_ps = to;
        }
    }
    return 0;
}

int timeline_check_opts(const struct timeline_opts *o, size_t nhosts, char *why, size_t why_len)
{
    if (!o)
        return 0;
    /* a file that cannot be written is bad input found before the run, as -o's */
    char pwhy[400];
    if (o->json_path && check_output_path(o->json_path, false, false, pwhy, sizeof(pwhy))) {
        snprintf(why, why_len, "--timeline: %s", pwhy);
        return -1;
    }
    return parse_filters(NULL, o, nhosts, why, why_len);
}

int timeline_parse_opt(int argc, char **argv, int *i, struct timeline_opts *o, char *why,
                       size_t why_len)
{
    bool missing = false;
    const char *v;
    if (!strcmp(argv[*i], "--trace")) {
        o->text = true;
        return 1;
    }
    if ((v = cli_opt_value(argc, argv, i, "--timeline-hosts", &missing)))
        o->hosts = v;
    else if (!missing && (v = cli_opt_value(argc, argv, i, "--timeline-qps", &missing)))
        o->qps = v;
    else if (!missing && (v = cli_opt_value(argc, argv, i, "--timeline-window", &missing)))
        o->window = v;
    else if (!missing && (v = cli_opt_value(argc, argv, i, "--timeline-max", &missing))) {
        char e[128];
        if (cfg_parse_size(v, &o->max_bytes, e, sizeof(e)) || o->max_bytes < 4096) {
            snprintf(why, why_len, "--timeline-max '%s': %s", v,
                     o->max_bytes < 4096 ? "at least 4KiB" : e);
            return -1;
        }
    } else if (!missing && (v = cli_opt_value(argc, argv, i, "--timeline", &missing)))
        o->json_path = v;
    if (missing) {
        snprintf(why, why_len, "%s needs a value", argv[*i]);
        return -1;
    }
    return v ? 1 : 0;
}

void timeline_opts_argv(const struct timeline_opts *o, const char **argv, size_t *n, char *max_buf,
                        size_t max_len)
{
    if (o->json_path) {
        argv[(*n)++] = "--timeline";
        argv[(*n)++] = o->json_path;
    }
    if (o->text)
        argv[(*n)++] = "--trace";
    if (o->hosts) {
        argv[(*n)++] = "--timeline-hosts";
        argv[(*n)++] = o->hosts;
    }
    if (o->qps) {
        argv[(*n)++] = "--timeline-qps";
        argv[(*n)++] = o->qps;
    }
    if (o->window) {
        argv[(*n)++] = "--timeline-window";
        argv[(*n)++] = o->window;
    }
    if (o->max_bytes) {
        snprintf(max_buf, max_len, "%" PRIu64 "B", o->max_bytes);
        argv[(*n)++] = "--timeline-max";
        argv[(*n)++] = max_buf;
    }
}

/* ---------------------------------------------------------------- start / finish */

struct timeline *timeline_start(struct world *w, const struct timeline_opts *o, const char *label,
                                char *why, size_t why_len)
{
    struct timeline *tl = tl_realloc(NULL, sizeof(*tl));
    memset(tl, 0, sizeof(*tl));
    tl->w = w;
    tl->sim = w->sim;
    tl->o = *o;
    tl->to_ps = SIM_TIME_NEVER;
    tl->first = true;
    tl->max_bytes = o->max_bytes ? o->max_bytes : TIMELINE_DEFAULT_MAX_BYTES;
    tl->fabric_pid = (uint32_t)w->nhosts + 1;
    tl->next_tid = tl_realloc(NULL, (w->nhosts + 2) * sizeof(*tl->next_tid));
    memset(tl->next_tid, 0, (w->nhosts + 2) * sizeof(*tl->next_tid));
    tl->pid_named = tl_realloc(NULL, (w->nhosts + 2) * sizeof(*tl->pid_named));
    memset(tl->pid_named, 0, (w->nhosts + 2) * sizeof(*tl->pid_named));
    if (parse_filters(tl, o, w->nhosts, why, why_len)) {
        tl->f = NULL;
        timeline_finish(tl);
        return NULL;
    }
    if (o->json_path) {
        tl->path = o->json_path;
        tl->f = fopen(o->json_path, "w");
        if (!tl->f) {
            snprintf(why, why_len, "cannot write the timeline %s: %s", o->json_path,
                     strerror(errno));
            timeline_finish(tl);
            return NULL;
        }
        static const char head[] = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
        fputs(head, tl->f);
        tl->bytes = sizeof(head) - 1;
        snprintf(tl->label, sizeof(tl->label), "%s", label ? label : "");
    }
    sim_trace_set_sink(w->sim, TRACE_G_ALL, sink, tl);
    return tl;
}

int timeline_finish(struct timeline *tl)
{
    if (!tl)
        return 0;
    int rc = 0;
    if (tl->sim && tl->w)
        sim_trace_set_sink(tl->sim, 0, NULL, NULL);
    if (tl->f) {
        char b[32];
        size_t n = 0;
        evs(tl, &n, tl->label);
        fprintf(tl->f,
                "\n],\"otherData\":{\"generator\":\"rnicsim\",\"run\":%s,\"events\":%" PRIu64
                ",\"truncated\":%s,\"truncated_at_us\":%s}}\n",
                tl->ev, tl->events, tl->cut ? "true" : "false",
                tl->cut ? us(tl->cut_at_ps, b) : "null");
        if (tl->cut) {
            char t[32], m[32];
            format_time(tl->cut_at_ps, t, sizeof(t));
            snprintf(m, sizeof(m), "%.0f MiB", (double)tl->max_bytes / 1048576.0);
            fprintf(stderr,
                    "rnicsim: timeline %s reached its size bound (%s, --timeline-max) at %s of "
                    "simulated time: the events after that are not in it.  Narrow it with "
                    "--timeline-hosts, --timeline-qps or --timeline-window, or raise "
                    "--timeline-max.\n",
                    tl->path, m, t);
        }
        if (fclose(tl->f) != 0 || tl->write_err) {
            fprintf(stderr, "rnicsim: cannot write the timeline %s: %s\n", tl->path,
                    strerror(errno ? errno : EIO));
            rc = -1;
        }
    }
    for (uint32_t i = 0; i < tl->n_qps; i++)
        free(tl->qps[i].wr);
    for (uint32_t i = 0; i < tl->n_cqs; i++) {
        free(tl->cqs[i].flow);
        free(tl->cqs[i].last_ns);
    }
    free(tl->qps);
    free(tl->cqs);
    free(tl->tracks);
    map_free(&tl->qp_map);
    map_free(&tl->cq_map);
    map_free(&tl->track_map);
    free(tl->next_tid);
    free(tl->pid_named);
    free(tl->host_in);
    free(tl->qsel);
    free(tl);
    return rc;
}
