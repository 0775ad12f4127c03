/* The event trace: the ring and the streaming sink (sim/trace.h). */
#include "trace.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

static void update_groups(struct sim *sim)
{
    sim->head.trace_groups =
        (sim->trace ? TRACE_G_CORE : 0) | (sim->sink_fn ? sim->sink_groups : 0);
}

int sim_trace_enable(struct sim *sim, size_t capacity)
{
    free(sim->trace);
    sim->trace = NULL;
    sim->trace_cap = sim->trace_total = 0;
    if (capacity) {
        sim->trace = calloc(capacity, sizeof(*sim->trace));
        if (sim->trace)
            sim->trace_cap = capacity;
    }
    update_groups(sim);
    return capacity && !sim->trace ? -1 : 0;
}

void sim_trace_set_sink(struct sim *sim, uint32_t groups, trace_sink_fn fn, void *arg)
{
    sim->sink_fn = groups ? fn : NULL;
    sim->sink_arg = arg;
    sim->sink_groups = fn ? groups : 0;
    update_groups(sim);
}

uint32_t trace_rec_group(const struct trace_rec *r)
{
    if (r->kind < TRACE_SPAN)
        return TRACE_G_CORE;
    switch ((enum trace_track)r->track) {
    case TRK_THREAD:
        return TRACE_G_HOST;
    case TRK_CACHE:
        return TRACE_G_CACHE;
    case TRK_PCIE_UP:
    case TRK_PCIE_DOWN:
        return TRACE_G_PCIE;
    case TRK_LINK:
        return TRACE_G_FABRIC;
    default:
        return TRACE_G_NIC;
    }
}

void sim_trace(struct sim *sim, const struct trace_rec *r)
{
    uint32_t g = trace_rec_group(r);
    if (!(sim->head.trace_groups & g))
        return;
    if (sim->trace && g == TRACE_G_CORE) {
        struct trace_rec *slot = &sim->trace[sim->trace_total % sim->trace_cap];
        *slot = *r;
        slot->t_ps = sim->now;
        sim->trace_total++;
    }
    if (sim->sink_fn && (sim->sink_groups & g)) {
        struct trace_rec rec = *r;
        rec.t_ps = sim->now;
        sim->sink_fn(sim->sink_arg, &rec);
    }
}

void sim_trace_note(struct sim *sim, uint32_t node, const char *static_text)
{
    struct trace_rec r = {.kind = TRACE_NOTE, .node = node, .where = static_text};
    sim_trace(sim, &r);
}

void sim_trace_mark(struct sim *sim, uint32_t node, const char *static_text, uint64_t value)
{
    struct trace_rec r = {.kind = TRACE_NOTE, .node = node, .addr = value, .where = static_text};
    sim_trace(sim, &r);
}

void sim_trace_post(struct sim *sim, uint32_t node, uint32_t qpn, uint8_t opcode, uint32_t len,
                    uint64_t wqe_idx)
{
    struct trace_rec r = {.kind = TRACE_POST,
                          .opcode = opcode,
                          .node = node,
                          .qpn = qpn,
                          .len = len,
                          .val = wqe_idx,
                          .where = opcode == TRACE_POST_RECV       ? "ibv_post_recv"
                                   : opcode == TRACE_POST_SRQ_RECV ? "ibv_post_srq_recv"
                                                                   : "ibv_post_send"};
    sim_trace(sim, &r);
}

size_t sim_trace_count(const struct sim *sim)
{
    return sim->trace_total < sim->trace_cap ? (size_t)sim->trace_total : sim->trace_cap;
}

uint64_t sim_trace_total(const struct sim *sim)
{
    return sim->trace_total;
}

const struct trace_rec *sim_trace_get(const struct sim *sim, size_t i)
{
    size_t n = sim_trace_count(sim);
    if (i >= n)
        return NULL;
    uint64_t first = sim->trace_total - n;
    return &sim->trace[(first + i) % sim->trace_cap];
}

const char *sim_trace_kind_name(enum trace_kind k)
{
    static const char *const names[TRACE_KIND_COUNT] = {
        [TRACE_PKT_TX] = "pkt-tx",     [TRACE_PKT_RX] = "pkt-rx",
        [TRACE_PKT_DROP] = "pkt-drop", [TRACE_DMA_WRITE] = "dma-write",
        [TRACE_DMA_READ] = "dma-read", [TRACE_CQE] = "cqe",
        [TRACE_POLL] = "poll",         [TRACE_NOTE] = "note",
        [TRACE_POST] = "post",         [TRACE_SPAN] = "span",
        [TRACE_INSTANT] = "instant",   [TRACE_COUNTER] = "counter",
    };
    return (unsigned)k < TRACE_KIND_COUNT ? names[k] : "?";
}

const char *sim_trace_track_name(enum trace_track t)
{
    static const char *const names[TRK_COUNT] = {
        [TRK_THREAD] = "thread",    [TRK_DOORBELL] = "doorbell",   [TRK_WQE_FETCH] = "wqe fetch",
        [TRK_REQ] = "requester",    [TRK_TX] = "tx engine",        [TRK_RX] = "rx units",
        [TRK_RESP] = "responder",   [TRK_COMP] = "completer",      [TRK_DMA_RD] = "dma read",
        [TRK_DMA_WR] = "dma write", [TRK_CQE] = "cqe write",       [TRK_XLATE] = "translation",
        [TRK_ATOMIC] = "atomics",   [TRK_RDENG] = "read engine",   [TRK_CACHE] = "cache",
        [TRK_PCIE_UP] = "pcie up",  [TRK_PCIE_DOWN] = "pcie down", [TRK_LINK] = "link",
    };
    return (unsigned)t < TRK_COUNT ? names[t] : "?";
}

const char *sim_trace_cache_name(enum trace_cache c)
{
    static const char *const names[TRC_COUNT] = {
        [TRC_QPC] = "qp context",  [TRC_RDC] = "read context", [TRC_MPT] = "mpt",
        [TRC_MTT] = "mtt",         [TRC_RWQE] = "receive wqe", [TRC_WQE] = "wqe",
        [TRC_RDQ] = "read tracker"};
    return (unsigned)c < TRC_COUNT ? names[c] : "?";
}

/* snprintf into buf at *off, never past len. */
static void put(char *buf, size_t len, size_t *off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void put(char *buf, size_t len, size_t *off, const char *fmt, ...)
{
    if (*off >= len)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *off, len - *off, fmt, ap);
    va_end(ap);
    if (n > 0)
        *off += (size_t)n;
}

void sim_trace_format(const struct trace_rec *r, char *buf, size_t len)
{
    size_t o = 0;
    buf[0] = 0;
    put(buf, len, &o, "%14.3f ns  %-9s node %u", sim_ps_to_ns(r->t_ps),
        sim_trace_kind_name((enum trace_kind)r->kind), r->node);
    switch ((enum trace_kind)r->kind) {
    case TRACE_PKT_TX:
    case TRACE_PKT_RX:
    case TRACE_PKT_DROP:
        put(buf, len, &o, "  qpn %u psn %u opcode 0x%02x len %u", r->qpn, r->psn, r->opcode,
            r->len);
        break;
    case TRACE_DMA_WRITE:
    case TRACE_DMA_READ:
        put(buf, len, &o, "  addr 0x%llx len %u", (unsigned long long)r->addr, r->len);
        break;
    case TRACE_CQE:
    case TRACE_POLL:
        put(buf, len, &o, "  qpn %u opcode %u status %u len %u", r->qpn, r->opcode, r->status,
            r->len);
        break;
    case TRACE_POST:
        put(buf, len, &o, "  qpn %u opcode %u len %u", r->qpn, r->opcode, r->len);
        break;
    case TRACE_NOTE:
        if (r->addr)
            put(buf, len, &o, "  value %llu", (unsigned long long)r->addr);
        break;
    case TRACE_SPAN:
    case TRACE_INSTANT:
    case TRACE_COUNTER:
        put(buf, len, &o, "  %s", sim_trace_track_name((enum trace_track)r->track));
        if (r->track == TRK_THREAD || r->track == TRK_CACHE)
            put(buf, len, &o, " %u", r->unit);
        if (r->kind == TRACE_SPAN)
            put(buf, len, &o, "  %.3f..%.3f ns", sim_ps_to_ns(r->t0_ps),
                sim_ps_to_ns(r->t0_ps + r->dur_ps));
        else if (r->t0_ps != r->t_ps)
            put(buf, len, &o, "  at %.3f ns", sim_ps_to_ns(r->t0_ps));
        if (r->qpn)
            put(buf, len, &o, "  qpn %u", r->qpn);
        if (r->psn || r->opcode)
            put(buf, len, &o, "  psn %u opcode 0x%02x", r->psn, r->opcode);
        if (r->len)
            put(buf, len, &o, "  len %u", r->len);
        if (r->val)
            put(buf, len, &o, "  val %llu", (unsigned long long)r->val);
        if (r->status)
            put(buf, len, &o, "  status %u", r->status);
        if (r->flags & TRACE_F_MISS)
            put(buf, len, &o, "  miss");
        break;
    case TRACE_KIND_COUNT:
        break;
    }
    if (r->where)
        put(buf, len, &o, "  (%s)", r->where);
}

void sim_trace_dump(const struct sim *sim, FILE *out, size_t max)
{
    size_t n = sim_trace_count(sim);
    size_t from = max && max < n ? n - max : 0;
    char line[512];
    for (size_t i = from; i < n; i++) {
        sim_trace_format(sim_trace_get(sim, i), line, sizeof(line));
        fprintf(out, "%s\n", line);
    }
}
