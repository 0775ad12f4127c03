/* RIMA append queues: the tail pointer table (TPT) in NIC SRAM and the
 * per-queue state the NIC keeps (Xue, Vijaykumar, Thottethodi, "Network
 * Interface Architecture for Remote Indirect Memory Access (RIMA) in
 * Datacenters", Sections 3.2 and 3.2.1; docs/rima.md "NIC model").
 *
 * TPT.  rima_tpt_entries slots (paper 3.2: "a small SRAM table (say 1K
 * entries)").  An append's first packet costs one lookup + add of
 * rima_tpt_ps (paper 3.2: "1-2 ns (as per CACTI 6.0)"); the table has one
 * read-add-write port, so lookups of different QPs are served one after
 * the other (nic_aq_tpt_done_ps).  The add is what orders messages: the
 * tail moves in the order the TPT serves first packets.
 *
 * Ring.  head/tail are offsets into the region; used_bytes counts from
 * head to tail.  A message of len bytes goes at the tail, or - if it does
 * not fit before the end of the region - at offset 0, and the bytes from
 * the tail to the end become padding, counted as used until the head
 * passes them; on an empty queue (used 0) head and tail first move to 0
 * instead (no padding: an empty queue takes any message up to region - 1).  It needs (room check,
 * nic_aq_reserve): used + padding + len <= region - 1   (never overtakes the head, and never fills
 * the ring completely: head == tail always means empty) every chunk overlapping [off, off + len) is
 * committed else the append is refused (the responder answers RNR NAK).
 *
 * Reserve pool (3.2.1).  Physical memory is committed per chunk (chunk
 * bytes), initially chunks 0 .. initial_chunks-1.  "Beyond the tail" =
 * committed bytes contiguous from the tail in ring order, at most the free
 * part.  When it is below the watermark the NIC interrupts the host
 * (watermark_irqs) - also when it is below what a refused message needs
 * from the tail (need_bytes, kept until an append succeeds, and kept by
 * the free pass too, so a message needing more than the watermark cannot
 * livelock) - which commits the next chunk after that run in the
 * background: it is usable rima_alloc_ps later (paper 5.2.1: kalloc+mlock
 * of 16 MB, median 0.97 ms, p90 1 ms); one allocation in flight at a time.
 * After every head move, a committed chunk that lies wholly in the free
 * part, past the reserve (the first chunk boundary at or after tail +
 * watermark + one chunk of hysteresis), is freed (chunks_freed).  Hence
 *   committed_bytes = (initial_chunks + chunks_allocated - chunks_freed)
 *                     * chunk_bytes.
 * Reset on empty (IBV_AQ_F_RESET_ON_EMPTY): a head move that empties the
 * queue sets head = tail = 0, done by the NIC when the head write arrives
 * (so no append can slip in between), provided the chunks at the top that
 * the reserve needs are committed (else the ring just goes on).  Every
 * reset or restart at 0 bumps the queue's epoch; a head MMIO carries the
 * epoch it was issued in and is ignored (head_updates_ignored) if one
 * happened meanwhile: its offset was checked against the old lap. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <rnicsim/rima.h>

#include "nic_priv.h"

enum { AQN_GEN_MASK = (1u << (32 - NIC_AQ_SLOT_BITS)) - 1 };

/* TPT slots in use: the profile's entries, at most what the number's slot
 * bits can name (the profile parser refuses more, tools/rnicsim/params.c) */
static uint32_t tpt_slots(const struct nic *nic)
{
    uint32_t n = nic->p.rima_tpt_entries;
    return n < NIC_AQ_MAX_TPT_ENTRIES ? n : NIC_AQ_MAX_TPT_ENTRIES;
}

/* ---------------------------------------------------------------- TPT */

struct nic_aq *nic_aq_lookup(struct nic *nic, uint32_t aqn)
{
    uint32_t slot = aqn & (NIC_AQ_MAX_TPT_ENTRIES - 1);
    if (!nic->tpt || slot >= tpt_slots(nic))
        return NULL;
    struct nic_aq *aq = nic->tpt[slot];
    return aq && aq->aqn == aqn ? aq : NULL;
}

sim_time_t nic_aq_tpt_done_ps(struct nic *nic)
{
    sim_time_t now = sim_now(nic->sim);
    sim_time_t start = nic->tpt_busy_until_ps > now ? nic->tpt_busy_until_ps : now;
    nic->tpt_busy_until_ps = sim_time_add(start, nic->p.rima_tpt_ps);
    return nic->tpt_busy_until_ps;
}

/* ---------------------------------------------------------------- footprint */

static void note_peaks(struct nic_aq *aq)
{
    uint64_t committed = (uint64_t)aq->n_committed * aq->chunk_bytes;
    if (aq->used_bytes > aq->peak_used_bytes)
        aq->peak_used_bytes = aq->used_bytes;
    if (committed > aq->peak_committed_bytes)
        aq->peak_committed_bytes = committed;
}

/* Committed bytes contiguous from the tail in ring order (not capped);
 * *next = the offset where that run ends. */
static uint64_t committed_run(const struct nic_aq *aq, uint64_t *next)
{
    uint64_t got = 0, pos = aq->tail;
    for (uint32_t i = 0; i <= aq->n_chunks && got < aq->region_bytes; i++) {
        uint32_t c = (uint32_t)(pos / aq->chunk_bytes);
        if (!aq->committed[c])
            break;
        uint64_t end = (uint64_t)(c + 1) * aq->chunk_bytes;
        got += end - pos;
        pos = end % aq->region_bytes;
    }
    *next = pos;
    return got;
}

/* The reserve pool: committed bytes beyond the tail, within the free part. */
static uint64_t reserve_bytes(const struct nic_aq *aq)
{
    uint64_t next, free_bytes = aq->region_bytes - aq->used_bytes;
    uint64_t run = committed_run(aq, &next);
    return run < free_bytes ? run : free_bytes;
}

/* Interrupt the host for the next chunk if the reserve is below the
 * watermark, or below `need` (a refused message needs that much from the
 * tail, padding included). */
static void watermark_check(struct nic_aq *aq, uint64_t need)
{
    if (aq->need_bytes > need)
        need = aq->need_bytes;
    uint64_t want = need > aq->watermark_bytes ? need : aq->watermark_bytes;
    if (aq->alloc_pending || reserve_bytes(aq) >= want)
        return;
    uint64_t next, free_bytes = aq->region_bytes - aq->used_bytes;
    uint64_t run = committed_run(aq, &next);
    /* the next chunk must lie wholly in the free part (region exhausted:
     * the allocation software has nothing to add, paper 3.2.1) */
    if (run >= free_bytes || next % aq->chunk_bytes ||
        (next + aq->region_bytes - aq->tail) % aq->region_bytes + aq->chunk_bytes > free_bytes)
        return;
    aq->alloc_pending = true;
    aq->alloc_chunk = (uint32_t)(next / aq->chunk_bytes);
    aq->watermark_irqs++;
    sim_schedule_at(aq->nic->sim, &aq->alloc_ev,
                    sim_time_add(sim_now(aq->nic->sim), aq->nic->p.rima_alloc_ps));
}

/* Free every committed chunk wholly in the free part past the reserve. */
static void free_pass(struct nic_aq *aq)
{
    uint64_t R = aq->region_bytes, C = aq->chunk_bytes;
    uint64_t free_bytes = R - aq->used_bytes;
    /* the reserve (watermark bytes from the tail, whole chunks) plus one
     * chunk of hysteresis: a tail moving on does not at once need again a
     * chunk just freed */
    uint64_t keep =
        (aq->need_bytes > aq->watermark_bytes ? aq->need_bytes : aq->watermark_bytes) + C;
    uint64_t resv_end = (aq->tail + keep + C - 1) / C * C - aq->tail; /* distance from the tail */
    for (uint32_t c = 0; c < aq->n_chunks; c++) {
        if (!aq->committed[c])
            continue;
        uint64_t ds = ((uint64_t)c * C + R - aq->tail) % R;
        if (ds >= resv_end && ds + C <= free_bytes) {
            aq->committed[c] = 0;
            aq->n_committed--;
            aq->chunks_freed++;
        }
    }
}

static void alloc_done(struct sim *sim, struct sim_event *ev)
{
    (void)sim;
    struct nic_aq *aq = ev->ctx;
    aq->alloc_pending = false;
    if (!aq->committed[aq->alloc_chunk]) {
        aq->committed[aq->alloc_chunk] = 1;
        aq->n_committed++;
        aq->chunks_allocated++;
        note_peaks(aq);
    }
    free_pass(aq);
    watermark_check(aq, 0);
}

/* ---------------------------------------------------------------- appends */

enum nic_aq_status nic_aq_reserve(struct nic *nic, uint32_t aqn, const struct nic_pd *pd,
                                  uint64_t len, uint64_t *off)
{
    struct nic_aq *aq = nic_aq_lookup(nic, aqn);
    if (!aq || aq->pd != pd)
        return NIC_AQ_NO_QUEUE;
    uint64_t R = aq->region_bytes, C = aq->chunk_bytes;
    if (len > R - 1) /* the ring is never completely full (below) */
        return NIC_AQ_TOO_BIG;
    uint64_t o = aq->tail, pad = 0;
    if (o + len > R) { /* does not fit before the end: go to the top */
        if (aq->used_bytes) {
            pad = R - o; /* the bytes to the end become padding */
        } else {
            /* empty: restart at the top with no padding (else a message
             * longer than region - tail would be refused forever); head
             * writes issued before are stale now (epoch) */
            aq->head = aq->tail = 0;
            aq->epoch++;
        }
        o = 0;
    }
    /* one byte always stays free: head == tail then means "empty" only, so
     * no head write can mistake a completely full ring for a consumed one */
    bool room = aq->used_bytes + pad + len <= R - 1;
    for (uint64_t c = o / C; room && len && c <= (o + len - 1) / C; c++)
        room = aq->committed[c] != 0;
    if (!room) {
        aq->rnr_naks++;
        nic->cnt.rima_rnr_naks++;
        /* the refused message's need stays in the reserve until an append
         * succeeds, so that chunks committed for it are not freed again
         * (free_pass) before it can use them */
        aq->need_bytes = pad + len;
        watermark_check(aq, pad + len);
        return NIC_AQ_NO_ROOM;
    }
    aq->need_bytes = 0;
    aq->tail = (o + len) % R;
    aq->used_bytes += pad + len;
    aq->messages++;
    aq->bytes += len;
    nic->cnt.rima_appends++;
    note_peaks(aq);
    watermark_check(aq, 0);
    *off = o;
    return NIC_AQ_OK;
}

/* ---------------------------------------------------------------- head */

int64_t nic_aq_head_advance(const struct nic_aq *aq, uint64_t head)
{
    uint64_t R = aq->region_bytes;
    if (head > R)
        return -1;
    head %= R;
    /* the ring is never full (nic_aq_reserve), so the used part [head, tail]
     * is unambiguous: head == tail is the empty queue (everything consumed),
     * a head equal to the current one moves nothing */
    uint64_t d = (head + R - aq->head) % R;
    return d <= aq->used_bytes ? (int64_t)d : -1;
}

/* The chunks the reserve needs at the top of the region are committed. */
static bool top_ready(const struct nic_aq *aq)
{
    uint64_t keep = aq->watermark_bytes ? aq->watermark_bytes : 1;
    uint64_t n = (keep + aq->chunk_bytes - 1) / aq->chunk_bytes;
    for (uint64_t c = 0; c < n && c < aq->n_chunks; c++)
        if (!aq->committed[c])
            return false;
    return true;
}

static void apply_head(struct nic_aq *aq, uint64_t head)
{
    int64_t d = nic_aq_head_advance(aq, head);
    if (d < 0) { /* an older write overtaken by a reset or a later one: ignore */
        aq->head_updates_ignored++;
        return;
    }
    aq->used_bytes -= (uint64_t)d;
    aq->head = (aq->head + (uint64_t)d) % aq->region_bytes;
    if (!aq->used_bytes && (aq->flags & IBV_AQ_F_RESET_ON_EMPTY) && aq->tail && top_ready(aq)) {
        aq->head = aq->tail = 0;
        aq->epoch++; /* head writes still in flight were meant for the old offsets */
    }
    free_pass(aq);
    watermark_check(aq, 0);
}

static void head_arrived(struct sim *sim, void *a, void *b)
{
    (void)sim;
    (void)b;
    struct nic_op *op = a;
    struct nic_aq *aq = nic_aq_lookup(op->nic, op->dma_qpn);
    /* the very queue it was written for, and no reset / restart since it
     * was issued (its offset would name bytes of the new lap) */
    if (aq && aq->serial == op->swap_add) {
        if (op->compare == aq->epoch)
            apply_head(aq, op->v);
        else
            aq->head_updates_ignored++;
    }
    nic_op_free(op);
}

void nic_aq_write_head(struct nic_aq *aq, uint64_t head)
{
    struct nic *nic = aq->nic;
    struct nic_op *op = nic_op_alloc(nic, NIC_OP_DOORBELL, NULL);
    op->v = head;
    op->dma_qpn = aq->aqn; /* the queue, looked up again on arrival */
    op->swap_add = aq->serial;
    op->compare = aq->epoch; /* the reset epoch it was issued in */
    if (nic->pcie)
        pcie_mmio_write_k(nic->pcie, PCIE_K_DOORBELL, 8, head_arrived, op, NULL);
    else
        head_arrived(nic->sim, op, NULL);
}

void nic_aq_set_watermark(struct nic_aq *aq, uint64_t watermark_bytes)
{
    aq->watermark_bytes = watermark_bytes;
    watermark_check(aq, 0);
}

void nic_aq_set_flags(struct nic_aq *aq, uint32_t flags)
{
    aq->flags = flags;
}

/* ---------------------------------------------------------------- life cycle */

struct nic_aq *nic_aq_create(struct nic_pd *pd, struct nic_cq *cq, const struct nic_aq_cfg *cfg)
{
    struct nic *nic = pd->nic;
    uint32_t entries = tpt_slots(nic);
    if (!entries) {
        errno = EOPNOTSUPP;
        return NULL;
    }
    if (!nic->tpt) {
        nic->tpt = calloc(entries, sizeof(*nic->tpt));
        nic->tpt_gen = calloc(entries, sizeof(*nic->tpt_gen));
        if (!nic->tpt || !nic->tpt_gen) {
            free(nic->tpt);
            free(nic->tpt_gen);
            nic->tpt = NULL;
            nic->tpt_gen = NULL;
            errno = ENOMEM;
            return NULL;
        }
    }
    if (nic->n_aqs >= entries) {
        errno = ENOMEM; /* the TPT is full */
        return NULL;
    }
    uint32_t slot = 0;
    while (nic->tpt[slot])
        slot++;
    struct nic_aq *aq = calloc(1, sizeof(*aq));
    uint32_t n_chunks = (uint32_t)(cfg->region_bytes / cfg->chunk_bytes);
    uint8_t *committed = calloc(n_chunks, 1);
    if (!aq || !committed) {
        free(aq);
        free(committed);
        errno = ENOMEM;
        return NULL;
    }
    aq->mr = nic_mr_reg(pd, cfg->buf, cfg->region_bytes, (uint64_t)(uintptr_t)cfg->buf,
                        IBV_ACCESS_LOCAL_WRITE);
    if (!aq->mr) {
        int e = errno ? errno : ENOMEM;
        free(aq);
        free(committed);
        errno = e;
        return NULL;
    }
    uint32_t gen = (nic->tpt_gen[slot] + 1) & AQN_GEN_MASK;
    if (!gen)
        gen = 1;
    nic->tpt_gen[slot] = gen;
    aq->nic = nic;
    aq->pd = pd;
    aq->cq = cq;
    aq->slot = slot;
    aq->aqn = gen << NIC_AQ_SLOT_BITS | slot;
    aq->serial = ++nic->aq_serial;
    aq->buf = cfg->buf;
    aq->region_bytes = cfg->region_bytes;
    aq->chunk_bytes = cfg->chunk_bytes;
    aq->watermark_bytes = cfg->watermark_bytes;
    aq->flags = cfg->flags;
    aq->n_chunks = n_chunks;
    aq->committed = committed;
    for (uint32_t c = 0; c < cfg->initial_chunks && c < n_chunks; c++)
        committed[c] = 1;
    aq->n_committed = cfg->initial_chunks < n_chunks ? cfg->initial_chunks : n_chunks;
    sim_event_init(&aq->alloc_ev, alloc_done, aq, "nic.aq_alloc");
    cq->n_qps++;
    nic->tpt[slot] = aq;
    nic->n_aqs++;
    note_peaks(aq);
    watermark_check(aq, 0);
    return aq;
}

static void aq_free(struct nic_aq *aq, bool dereg)
{
    struct nic *nic = aq->nic;
    sim_cancel(nic->sim, &aq->alloc_ev);
    if (dereg)
        nic_mr_dereg(aq->mr); /* placements still in flight are skipped (dma.c) */
    aq->cq->n_qps--;
    nic->tpt[aq->slot] = NULL;
    nic->n_aqs--;
    free(aq->committed);
    free(aq);
}

int nic_aq_destroy(struct nic_aq *aq)
{
    if (!aq)
        return EINVAL;
    aq_free(aq, true);
    return 0;
}

void nic_aq_teardown(struct nic *nic)
{
    for (uint32_t i = 0; nic->tpt && i < tpt_slots(nic); i++)
        if (nic->tpt[i])
            aq_free(nic->tpt[i], true);
    free(nic->tpt);
    free(nic->tpt_gen);
    nic->tpt = NULL;
    nic->tpt_gen = NULL;
}
