/* The event trace ring (sim/trace.h). */
#include "trace.h"

#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

int sim_trace_enable(struct sim *sim, size_t capacity)
{
    free(sim->trace);
    sim->trace = NULL;
    sim->trace_cap = sim->trace_total = 0;
    if (capacity == 0)
        return 0;
    sim->trace = calloc(capacity, sizeof(*sim->trace));
    if (!sim->trace)
        return -1;
    sim->trace_cap = capacity;
    return 0;
}

bool sim_trace_enabled(const struct sim *sim)
{
    return sim->trace != NULL;
}

void sim_trace(struct sim *sim, const struct trace_rec *r)
{
    if (!sim->trace)
        return;
    struct trace_rec *slot = &sim->trace[sim->trace_total % sim->trace_cap];
    *slot = *r;
    slot->t_ps = sim->now;
    sim->trace_total++;
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

void sim_trace_post(struct sim *sim, uint32_t node, uint32_t qpn, uint8_t opcode, uint32_t len)
{
    struct trace_rec r = {.kind = TRACE_POST,
                          .opcode = opcode,
                          .node = node,
                          .qpn = qpn,
                          .len = len,
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
        [TRACE_POST] = "post",
    };
    return (unsigned)k < TRACE_KIND_COUNT ? names[k] : "?";
}

void sim_trace_dump(const struct sim *sim, FILE *out, size_t max)
{
    size_t n = sim_trace_count(sim);
    size_t from = max && max < n ? n - max : 0;
    for (size_t i = from; i < n; i++) {
        const struct trace_rec *r = sim_trace_get(sim, i);
        fprintf(out, "%14.3f ns  %-9s node %u", sim_ps_to_ns(r->t_ps),
                sim_trace_kind_name((enum trace_kind)r->kind), r->node);
        switch ((enum trace_kind)r->kind) {
        case TRACE_PKT_TX:
        case TRACE_PKT_RX:
        case TRACE_PKT_DROP:
            fprintf(out, "  qpn %u psn %u opcode 0x%02x len %u", r->qpn, r->psn, r->opcode, r->len);
            break;
        case TRACE_DMA_WRITE:
        case TRACE_DMA_READ:
            fprintf(out, "  addr 0x%llx len %u", (unsigned long long)r->addr, r->len);
            break;
        case TRACE_CQE:
        case TRACE_POLL:
            fprintf(out, "  qpn %u opcode %u status %u len %u", r->qpn, r->opcode, r->status,
                    r->len);
            break;
        case TRACE_POST:
            fprintf(out, "  qpn %u opcode %u len %u", r->qpn, r->opcode, r->len);
            break;
        case TRACE_NOTE:
            if (r->addr)
                fprintf(out, "  value %llu", (unsigned long long)r->addr);
            break;
        case TRACE_KIND_COUNT:
            break;
        }
        if (r->where)
            fprintf(out, "  (%s)", r->where);
        fputc('\n', out);
    }
}
