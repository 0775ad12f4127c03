/* PCIe link, TLP-level model (contract and vocabulary in pcie.h; the model,
 * its defaults, its event cost and its gaps in docs/pcie.md).
 *
 * Each direction is a FIFO serialiser kept as a single "busy until" time.
 * Posted writes (MWr) reserve the up direction for all of their TLPs at
 * once; the flow-control credits of the root complex are a pool of known
 * release times (pcie_fc.c), so a write costs no event but `done`.
 *
 * Reads go through a per-link queue of read requests (MRd).  An MRd is sent
 * when a tag and a non-posted-header credit are free; the MRds of a read
 * that can all go together leave back to back as one *group*.  A group's
 * first completion being ready at the root complex is one event, where the
 * down direction is reserved for all of the group's completions (closed
 * form, comment above `group_ready`) and its tags' release times become
 * known.  An MRd that has to wait for a tag or a credit is sent by the
 * `pump` event at the release time, so:
 *
 *   pcie_mmio_write   1 event  (done)
 *   pcie_dma_write    1 event  (done = visible in host memory)
 *   pcie_dma_read     2 events when tags and credits are free (group
 *                     ready; done), plus about 2 per MRd that has to wait
 *                     (pump; its group ready)
 *
 * Ordering rules kept (PCIe base spec, "Transaction Ordering" table):
 *  - posted writes do not pass posted writes (up FIFO + constant latency,
 *    and `last_write_visible_ps` as a guard); a write with the relaxed
 *    ordering attribute is not held by the guard;
 *  - a read request does not pass a posted write: its completion data are
 *    not produced before every write sent before its MRds is visible, so
 *    the bytes the caller copies at `done` include those writes; unless
 *    the read has the relaxed ordering attribute;
 *  - posted writes pass read requests that wait for a tag or a credit (the
 *    waiting MRd is not on the link yet);
 *  - MMIO writes (posted, down) complete in issue order;
 *  - read requests go out in issue order, except the device's cache fills
 *    (pcie.meta_reads_first, enqueue_read): a non-posted request may pass
 *    another (base spec 3.0 Table 2-34). */
#include "pcie.h"

#include <errno.h>
#include "../trace.h"
#include <stdlib.h>
#include <string.h>

#include "../noise.h"
#include "pcie_fc.h"

const char *const pcie_kind_names[] = {
    [PCIE_K_PAYLOAD_RD] = "payload_rd", [PCIE_K_PAYLOAD_WR] = "payload_wr",
    [PCIE_K_WQE_FETCH] = "wqe_fetch",   [PCIE_K_CQE] = "cqe",
    [PCIE_K_CTX_MISS] = "ctx_miss",     [PCIE_K_XLATE_MISS] = "xlate_miss",
    [PCIE_K_ATOMIC] = "atomic",         [PCIE_K_DOORBELL] = "doorbell",
    [PCIE_K_OTHER] = "other",           [PCIE_K_COUNT] = NULL,
};

/* Flow-control data credits are counted in units of 16 B (4 DW), PCIe base
 * spec "Flow Control". */
#define PCIE_FC_DATA_UNIT_BYTES 16u

/* ---------------------------------------------------------------- generations */

/* Per-lane signalling rate and line encoding.  PCIe base spec: Gen1 2.5 GT/s
 * and Gen2 5 GT/s use 8b/10b; Gen3 8 GT/s, Gen4 16 GT/s and Gen5 32 GT/s use
 * 128b/130b. */
struct pcie_gen_info {
    uint64_t mtps;    /* mega-transfers per second per lane */
    uint32_t enc_num; /* payload bits per enc_den line bits */
    uint32_t enc_den;
};

static const struct pcie_gen_info pcie_gens[] = {
    [1] = {.mtps = 2500, .enc_num = 8, .enc_den = 10},
    [2] = {.mtps = 5000, .enc_num = 8, .enc_den = 10},
    [3] = {.mtps = 8000, .enc_num = 128, .enc_den = 130},
    [4] = {.mtps = 16000, .enc_num = 128, .enc_den = 130},
    [5] = {.mtps = 32000, .enc_num = 128, .enc_den = 130},
};

#define PCIE_MAX_GEN 5u
#define PCIE_MAX_LANES 32u /* x32 is in the spec, though rarely built */

void pcie_params_default(struct pcie_params *p)
{
    memset(p, 0, sizeof(*p));
    /* ConnectX-5 product brief: PCIe Gen3 x16 host interface (CALIBRATION, PCIe). */
    p->gen = 3;
    p->lanes = 16;
    /* MPS 256 / MRRS 512: the common server setting and the pcie-bench
     * configuration (CALIBRATION, PCIe: "effective x16, MPS 256, MRRS 512"). */
    p->mps_bytes = 256;
    p->mrrs_bytes = 512;
    /* CALIBRATION, PCIe "per-TLP bytes on the wire" (pcie-bench model): MWr/MRd
     * with a 64-bit address 24 B = Gen3 STP framing token incl. sequence
     * number 4 + 4DW header 16 + LCRC 4 (Gen1/2: STP 1 + sequence 2 + 16 +
     * LCRC 4 + END 1, also 24); CplD 20 B (3DW header 12); no ECRC. */
    p->mwr_hdr_bytes = 24;
    p->cpld_hdr_bytes = 20;
    /* CALIBRATION, PCIe: x16 raw 126.03 Gb/s -> 113.7 Gb/s after ACK/FC-update
     * DLLPs and SKP ordered sets (pcie-bench model, MPS 256): 1 - 113.7/126.03
     * = 9.8 %.  (The same model gives x8 57.9 Gb/s of 63.0 = 8.1 %: set 81
     * for x8 links.) */
    p->dllp_overhead_permil = 98;
    /* CALIBRATION, PCIe "DMA read latency" (pcie-bench, Gen3 x8, Broadwell,
     * host-warm, median): 64 B 546 ns, 256 B 626, 1 KiB 853, 2 KiB 1133.
     * The growth with size (0.3 ns/B) is twice the x8 link's: the host
     * returns one read's data at a limited rate, its MRRS requests one
     * after the other (docs/pcie.md "Read fetch rate").  Two parameters
     * fitted to the 64 B and 2 KiB points on an x8 link (MRd 3.3 ns, CplD
     * of 64 B 11.6 ns, the 2 KiB read's last request's CplDs 76.3 ns):
     *   64 B:  3.3 + L + 64 B / R + 11.6 = 546
     *   2 KiB: 3.3 + L + 2048 B / R + 76.3 = 1133
     * -> R = 30.4 Gb/s, L = 514 ns.  The model then gives 623 ns at 256 B
     * (-0.5 %) and 863 ns at 1 KiB (+1.2 %), the points not fitted
     * (test_pcie_model).  Reads of different DMA operations are fetched in
     * parallel, so many reads in flight still reach the link rate. */
    p->read_latency_ps = 514 * SIM_NS;
    p->read_fetch_bps = 30400000000ull;
    /* none: the calibrated profiles turn on "pcie-read" (sim/noise.c, from
     * the same pcie-bench data as read_latency) */
    p->read_noise = 0;
    /* Estimate: about half of the ~400 ns unloaded PCIe round trip quoted by
     * system papers (CALIBRATION, PCIe: 1RMA, SIGCOMM'20): the MWr crosses the
     * link and the root complex commits it to the LLC (DDIO); no read-back. */
    p->write_latency_ps = 200 * SIM_NS;
    /* Estimate: same one-way figure for a CPU store (uncached/write-combining)
     * travelling core -> root complex -> device BAR (CALIBRATION, PCIe). */
    p->mmio_latency_ps = 200 * SIM_NS;
    /* PCIe 3.0 base spec, Transaction Descriptor / Tag field: 5-bit tags (32
     * outstanding requests) unless the Extended Tag Field is enabled, then 8
     * bits (256).  Linux enables Extended Tags on every device that supports
     * them (drivers/pci/probe.c, pci_configure_extended_tags, since 4.11),
     * and ConnectX devices do; 10-bit tags (Gen4+) are not assumed. */
    p->tags = 256;
    /* The device issues its context / translation cache fills ahead of its
     * queued data reads (enqueue_read): a device that stalls on a miss
     * must not queue the fill behind the reads it stalls.  Not published
     * for any NIC; a design consequence (docs/pcie.md "Metadata reads"). */
    p->meta_reads_first = true;
    /* Intel Xeon C5500/C3500 datasheet vol. 1 (323103-001), Table 76 "PCI
     * Express Credit Mapping for Inbound Requests", x16 root port: posted
     * request headers 64, posted data 320 (x 16 B = 5 KiB), non-posted
     * request headers 72; completions infinite.  Estimate that later Xeon
     * root ports are no smaller: with the hold times of this model (posted:
     * until visible, ~220 ns; non-posted: until the data are ready, ~530
     * ns) they carry 5 KiB / 220 ns = 186 Gb/s of writes, 64 MWr per 206 ns
     * of 64 B writes and 72 x 512 B / 531 ns = 555 Gb/s of MRRS reads, so
     * they never limit one Gen3 x16 link (docs/pcie.md). */
    p->fc_ph_credits = 64;
    p->fc_pd_credits = 320;
    p->fc_nph_credits = 72;
}

uint64_t pcie_link_rate_bps(const struct pcie_params *p)
{
    if (p->gen < 1 || p->gen > PCIE_MAX_GEN || p->lanes < 1 || p->lanes > PCIE_MAX_LANES)
        return 0;
    const struct pcie_gen_info *g = &pcie_gens[p->gen];
    /* lanes * MT/s * 1e6 * enc: < 2^64 for every supported combination. */
    return (uint64_t)p->lanes * g->mtps * 1000000u * g->enc_num / g->enc_den;
}

uint64_t pcie_effective_rate_bps(const struct pcie_params *p)
{
    uint64_t raw = pcie_link_rate_bps(p);
    if (p->dllp_overhead_permil >= 1000)
        return 0;
    return raw / 1000u * (1000u - p->dllp_overhead_permil) +
           raw % 1000u * (1000u - p->dllp_overhead_permil) / 1000u;
}

/* ---------------------------------------------------------------- the link */

/* Why the next MRd of a read waits (for the stall counters). */
enum pcie_block { PCIE_BLOCK_NONE, PCIE_BLOCK_TAG, PCIE_BLOCK_CREDIT };

/* A DMA read from its issue until its last group's completions are placed
 * on the down direction. */
struct pcie_read_op {
    struct pcie_read_op *next; /* the wait queue */
    sim_cb_fn done;
    void *a, *b;
    uint64_t n_req, n_sent; /* MRds (all of MRRS bytes but the last); sent so far */
    uint64_t last_bytes;    /* payload asked for by the last MRd */
    sim_time_t fetch_free;  /* the host finished fetching this read's previous MRd */
    sim_time_t *chain;      /* stream this read continues (pcie_dma_read_chain_k), or NULL */
    unsigned flags;
    enum pcie_block blocked; /* the next MRd waited for this */
    uint8_t kind;            /* enum pcie_kind (traces) */
    uint32_t tr_qpn, tr_psn; /* what it is for (traces) */
};

/* MRds of one read that left back to back, until their first completion is
 * ready at the root complex. */
struct pcie_mrd_group {
    struct pcie_read_op *op;
    uint64_t k;        /* MRds */
    int has_last;      /* includes the read's last MRd */
    sim_time_t a0l;    /* first MRd's data ready at the root complex (read latency + fetch) */
    sim_time_t step;   /* ... and each next MRd's data that much later */
    sim_time_t r_last; /* the group's last MRd's data ready */
    sim_time_t a0_nf;  /* first MRd at the root complex + read latency (no fetch) */
    sim_time_t w;      /* posted writes visible by then (0: relaxed read) */
};

union pcie_slot {
    union pcie_slot *next_free;
    struct pcie_read_op op;
    struct pcie_mrd_group grp;
};

#define PCIE_SLOTS_PER_CHUNK 64

struct pcie_slot_chunk {
    struct pcie_slot_chunk *next;
    union pcie_slot s[PCIE_SLOTS_PER_CHUNK];
};

struct pcie_link {
    struct sim *sim;
    char name[48];
    struct pcie_params p;
    uint64_t rate_bps; /* effective: what TLP bytes serialise at */

    sim_time_t up_busy_until_ps;   /* device -> root complex */
    sim_time_t down_busy_until_ps; /* root complex -> device */
    sim_time_t last_write_visible_ps;
    /* The root complex's write path: it has taken in the TLPs written so far
     * by then (they stream in at the link's pace; a partial-line merge holds
     * it, pcie_dma_write_rmw_ct_k). */
    sim_time_t rc_free_ps;

    /* TLP serialisation times of the sizes that recur, precomputed */
    sim_time_t mwr_full_ps; /* MWr with MPS payload */
    sim_time_t mrd_ps;      /* MRd (header only) */
    sim_time_t cpl_full_ps; /* CplD with MPS payload */
    sim_time_t cpl_req_ps;  /* all CplDs of an MRRS-sized request */
    uint64_t n_cpl_req;     /* ... and their number */
    uint32_t pd_full;       /* data credits of an MPS MWr */

    struct fc_pool tags;   /* released when the MRd's last CplD arrived */
    uint64_t tags_unknown; /* tags of MRds whose group is not ready yet */
    struct fc_pool nph;    /* root complex non-posted header credits */
    struct fc_pool posted; /* root complex posted header / data credits */

    struct pcie_read_op *rq_head, *rq_tail; /* reads with MRds still to send */
    struct pcie_read_op *rq_meta_last;      /* the last metadata read queued (enqueue_read) */
    enum pcie_block cur_block;              /* why rq_head waits */
    struct sim_event pump_ev;

    union pcie_slot *free_slots;
    struct pcie_slot_chunk *chunks;

    struct noise rd_noise; /* variation of read_latency (p.read_noise) */

    struct pcie_counters c;
    uint32_t trace_id;       /* the host it belongs to (traces) */
    uint32_t tr_qpn, tr_psn; /* pcie_trace_ctx: the next operation's QP and PSN */
};

static void pump_event(struct sim *sim, struct sim_event *ev);
static sim_time_t cpl_ps(const struct pcie_link *l, uint64_t req_bytes, uint64_t *n_cpl);

struct pcie_link *pcie_link_create(struct sim *sim, const char *name, const struct pcie_params *p)
{
    uint64_t rate = p ? pcie_effective_rate_bps(p) : 0;
    if (!sim || !p || rate == 0 || p->mps_bytes == 0 || p->mrrs_bytes == 0 ||
        (p->fc_pd_credits && p->fc_pd_credits < (p->mps_bytes + PCIE_FC_DATA_UNIT_BYTES - 1) /
                                                    PCIE_FC_DATA_UNIT_BYTES)) {
        /* (posted data credits too few for one MPS-sized MWr: no write
         * could ever be sent) */
        errno = EINVAL;
        return NULL;
    }
    char why[8];
    if (pcie_params_check(p, why, sizeof(why))) {
        errno = EINVAL;
        return NULL;
    }
    struct pcie_link *l = calloc(1, sizeof(*l));
    if (!l)
        return NULL;
    l->sim = sim;
    snprintf(l->name, sizeof(l->name), "%s", name ? name : "pcie");
    l->p = *p;
    l->rate_bps = rate;
    l->mwr_full_ps = sim_bytes_to_ps((uint64_t)p->mps_bytes + p->mwr_hdr_bytes, rate);
    l->mrd_ps = sim_bytes_to_ps(p->mwr_hdr_bytes, rate);
    l->cpl_full_ps = sim_bytes_to_ps((uint64_t)p->mps_bytes + p->cpld_hdr_bytes, rate);
    l->cpl_req_ps = cpl_ps(l, p->mrrs_bytes, &l->n_cpl_req);
    l->pd_full = (p->mps_bytes + PCIE_FC_DATA_UNIT_BYTES - 1) / PCIE_FC_DATA_UNIT_BYTES;
    fc_pool_init(&l->tags, p->tags, 0);
    fc_pool_init(&l->nph, p->fc_nph_credits, 0);
    /* reads are fetched at their own pace: their tags and credits come
     * back out of issue order */
    fc_pool_set_unordered(&l->tags);
    fc_pool_set_unordered(&l->nph);
    fc_pool_init(&l->posted, p->fc_ph_credits, p->fc_pd_credits);
    sim_event_init(&l->pump_ev, pump_event, l, "pcie.pump");
    char stream[64];
    snprintf(stream, sizeof(stream), "noise/pcie/%s", l->name);
    noise_init_preset(&l->rd_noise, sim, p->read_noise, stream);
    return l;
}

int pcie_params_check(const struct pcie_params *p, char *why, size_t why_len)
{
    if (!noise_preset_is_delay(p->read_noise)) {
        snprintf(why, why_len,
                 "pcie.read_noise: '%s' is an interruption source, not a distribution of a "
                 "completion time",
                 noise_preset_name(p->read_noise));
        return -1;
    }
    return 0;
}

void pcie_link_destroy(struct pcie_link *l)
{
    if (!l)
        return;
    /* Pending callbacks point into the link and its chunks: destroy the
     * link only after the simulation stopped running (or with no read in
     * flight).  Its own event leaves the queue, which outlives it (a run
     * stopped mid-flight is torn down with events pending). */
    sim_cancel(l->sim, &l->pump_ev);
    for (struct pcie_slot_chunk *ch = l->chunks, *next; ch; ch = next) {
        next = ch->next;
        free(ch);
    }
    fc_pool_free(&l->tags);
    fc_pool_free(&l->nph);
    fc_pool_free(&l->posted);
    free(l);
}

const struct pcie_counters *pcie_link_counters(const struct pcie_link *l)
{
    return &l->c;
}

uint32_t pcie_link_mps_bytes(const struct pcie_link *l)
{
    return l->p.mps_bytes;
}

void pcie_set_trace_id(struct pcie_link *l, uint32_t id)
{
    l->trace_id = id;
}

void pcie_trace_ctx(struct pcie_link *l, uint32_t qpn, uint32_t psn)
{
    l->tr_qpn = qpn;
    l->tr_psn = psn;
}

/* Trace (TRACE_G_PCIE): TLPs of one operation on a direction, [t0, t1];
 * opcode = its kind, val = TLPs, len = payload bytes; `tlp` names them. */
static void tlp_trace(const struct pcie_link *l, enum trace_track trk, const char *tlp,
                      enum pcie_kind kind, uint32_t qpn, uint32_t psn, uint64_t n, uint64_t bytes,
                      unsigned flags, sim_time_t t0, sim_time_t t1)
{
    sim_trace(l->sim, &(struct trace_rec){.kind = TRACE_SPAN,
                                          .track = (uint8_t)trk,
                                          .node = l->trace_id,
                                          .t0_ps = t0,
                                          .dur_ps = t1 - t0,
                                          .opcode = (uint8_t)kind,
                                          .status = (uint16_t)flags,
                                          .qpn = qpn,
                                          .psn = psn,
                                          .val = n,
                                          .len = bytes > UINT32_MAX ? UINT32_MAX : (uint32_t)bytes,
                                          .where = tlp});
}

static void oom(const struct pcie_link *l)
{
    fprintf(stderr, "rnicsim: pcie %s: out of memory\n", l->name);
    abort();
}

static union pcie_slot *slot_get(struct pcie_link *l)
{
    if (!l->free_slots) {
        struct pcie_slot_chunk *ch = malloc(sizeof(*ch));
        if (!ch)
            oom(l);
        ch->next = l->chunks;
        l->chunks = ch;
        for (unsigned i = 0; i < PCIE_SLOTS_PER_CHUNK; i++) {
            ch->s[i].next_free = l->free_slots;
            l->free_slots = &ch->s[i];
        }
    }
    union pcie_slot *s = l->free_slots;
    l->free_slots = s->next_free;
    return s;
}

static void slot_put(struct pcie_link *l, void *p)
{
    union pcie_slot *s = p;
    s->next_free = l->free_slots;
    l->free_slots = s;
}

static void pool_push(struct pcie_link *l, struct fc_pool *pool, const struct fc_group *g)
{
    if (fc_pool_push(pool, g) != 0)
        oom(l);
}

static sim_time_t max_time(sim_time_t a, sim_time_t b)
{
    return a > b ? a : b;
}

static enum pcie_kind kind_ok(enum pcie_kind k)
{
    return (unsigned)k < PCIE_K_COUNT ? k : PCIE_K_OTHER;
}

/* `bytes` cut into TLPs of at most `max_payload` bytes: n - 1 full ones and
 * a last one of `last` bytes.  Zero bytes is one TLP without data (the
 * zero-length read/write the spec allows, e.g. a flush). */
struct tlp_split {
    uint64_t n;
    uint64_t last;
};

static struct tlp_split split(uint64_t bytes, uint64_t max_payload)
{
    struct tlp_split s;
    if (bytes == 0) {
        s.n = 1;
        s.last = 0;
    } else {
        s.n = (bytes + max_payload - 1) / max_payload;
        s.last = bytes - (s.n - 1) * max_payload;
    }
    return s;
}

/* Serialisation of a split, each TLP costing `hdr` bytes plus its payload;
 * `full_ps` is the time of a full TLP (max_payload + hdr). */
static sim_time_t split_ps(const struct pcie_link *l, struct tlp_split s, uint32_t hdr,
                           sim_time_t full_ps)
{
    return (s.n - 1) * full_ps + sim_bytes_to_ps(s.last + hdr, l->rate_bps);
}

/* Reserve `ps` of a direction from max(now, busy); returns the end time. */
static sim_time_t reserve(const struct pcie_link *l, sim_time_t *busy_until, sim_time_t ps)
{
    sim_time_t start = max_time(sim_now(l->sim), *busy_until);
    *busy_until = start + ps;
    return *busy_until;
}

/* Completions of one read request of `req_bytes`: MPS-sized CplDs. */
static sim_time_t cpl_ps(const struct pcie_link *l, uint64_t req_bytes, uint64_t *n_cpl)
{
    struct tlp_split s = split(req_bytes, l->p.mps_bytes);
    *n_cpl = s.n;
    return split_ps(l, s, l->p.cpld_hdr_bytes, l->cpl_full_ps);
}

/* Time the host takes to fetch `bytes` of one read for the device (the
 * read fetch rate; 0 = instantaneous). */
static sim_time_t fetch_ps(const struct pcie_link *l, uint64_t bytes)
{
    return l->p.read_fetch_bps ? sim_bytes_to_ps(bytes, l->p.read_fetch_bps) : 0;
}

static uint64_t data_credits(uint64_t payload)
{
    return (payload + PCIE_FC_DATA_UNIT_BYTES - 1) / PCIE_FC_DATA_UNIT_BYTES;
}

/* ---------------------------------------------------------------- reads */

/* The first completion of a group of MRds is ready at the root complex:
 * reserve the down direction for all of the group's completions, learn its
 * tags' release times, schedule the read's `done` if this is its last
 * group, and let waiting MRds go.
 *
 * MRd j (0..k-1) of the group reaches the root complex at A_j = A_0 + j*u
 * (they left back to back), its data are ready at r_j = max(A_j + L, W)
 * and its CplDs take C_j on the down direction (C for j < k-1, C_last for
 * the last).  The FIFO recursion D_j = max(r_j, D_{j-1}) + C_j has the
 * max-plus closed form  D_j = max(D_init + sum_{i<=j} C_i,
 * max_{i<=j} (r_i + sum_{i..j} C)).  r_i + suffix is a maximum of terms
 * linear in i, so the inner maximum is reached at i = 0 (<= D_init + sum
 * C, as this runs at r_0) or i = j:
 *   D_j = max(max(now, busy) + sum_{i<=j} C_i, r_j + C_j).
 * D_j is when MRd j's tag comes back (its last CplD arrived). */
static void group_ready(struct sim *sim, void *a, void *b)
{
    struct pcie_link *l = a;
    struct pcie_mrd_group *g = b;
    struct pcie_read_op *op = g->op;
    sim_time_t now = sim_now(sim);
    uint64_t n_dummy;
    sim_time_t c_full = l->cpl_req_ps;
    sim_time_t c_last = g->has_last ? cpl_ps(l, op->last_bytes, &n_dummy) : c_full;
    sim_time_t d_init = max_time(now, l->down_busy_until_ps);
    sim_time_t r_last = max_time(g->r_last, g->w);
    sim_time_t packed = d_init + (g->k - 1) * c_full + c_last;
    sim_time_t end = max_time(packed, r_last + c_last);
    /* The direction is busy for the completions themselves.  When the host
     * fetch spaces them out (r_j), the gaps between them stay usable by
     * other reads' completions: the direction is reserved as if they were
     * packed at its front (capacity is kept, FIFO order approximated),
     * while this read still finishes at `end`.  Without fetch gaps the
     * reservation is the whole span, as the closed form gives. */
    sim_time_t r_nf = max_time(g->a0_nf + (g->k - 1) * l->mrd_ps, g->w);
    l->down_busy_until_ps = max_time(packed, r_nf + c_last);
    if (sim_trace_on(sim, TRACE_G_PCIE)) { /* the group's completions, packed before `end` */
        uint64_t n_last = 0;
        if (g->has_last)
            (void)cpl_ps(l, op->last_bytes, &n_last);
        else
            n_last = l->n_cpl_req;
        uint64_t bytes =
            (g->k - 1) * l->p.mrrs_bytes + (g->has_last ? op->last_bytes : l->p.mrrs_bytes);
        tlp_trace(l, TRK_PCIE_DOWN, "CplD", (enum pcie_kind)op->kind, op->tr_qpn, op->tr_psn,
                  (g->k - 1) * l->n_cpl_req + n_last, bytes, op->flags,
                  end - (g->k - 1) * c_full - c_last, end);
    }

    if (l->tags.hdr_cap) {
        struct fc_group tg = {.n = (uint32_t)g->k,
                              .a = d_init + c_full,
                              .s = c_full,
                              .b = g->a0l + c_full,
                              .s2 = g->step,
                              .c = g->w + c_full,
                              .t_last = end};
        l->tags_unknown -= g->k;
        pool_push(l, &l->tags, &tg);
    }
    if (g->has_last) {
        if (op->done)
            sim_call_in(sim, end - now, op->done, op->a, op->b);
        slot_put(l, op);
    }
    slot_put(l, g);
    if (l->rq_head && l->tags.hdr_cap)
        pump_event(sim, &l->pump_ev);
}

/* Send the next k MRds of `op` back to back (a tag and a credit each are
 * free). */
static void send_group(struct pcie_link *l, struct pcie_read_op *op, uint64_t k)
{
    struct sim *sim = l->sim;
    sim_time_t now = sim_now(sim);
    sim_time_t start = max_time(now, l->up_busy_until_ps);
    l->up_busy_until_ps = start + k * l->mrd_ps;
    sim_time_t a0 = start + l->mrd_ps;
    if (sim_trace_on(sim, TRACE_G_PCIE))
        tlp_trace(l, TRK_PCIE_UP, "MRd", (enum pcie_kind)op->kind, op->tr_qpn, op->tr_psn, k, 0,
                  op->flags, start, start + k * l->mrd_ps);

    struct pcie_mrd_group *g = &slot_get(l)->grp;
    g->op = op;
    g->k = k;
    g->has_last = op->n_sent + k == op->n_req;
    /* The host serves one read's requests one after the other at the
     * read fetch rate (docs/pcie.md "Read fetch rate"): MRd j's data are
     * ready read_latency after it arrived and the fetch of MRd j-1. */
    sim_time_t full_fetch = fetch_ps(l, l->p.mrrs_bytes);
    uint64_t first_bytes = op->n_sent + k == op->n_req && k == 1 ? op->last_bytes : l->p.mrrs_bytes;
    sim_time_t prev = op->fetch_free;
    if (op->chain && *op->chain > prev)
        prev = *op->chain;
    /* the root complex's latency varies from read to read (p.read_noise);
     * the groups' completions then come back in the order they are ready */
    sim_time_t lat = noise_apply(&l->rd_noise, l->p.read_latency_ps);
    sim_time_t f0 = max_time(sim_time_add(a0, lat), prev) + fetch_ps(l, first_bytes);
    g->a0l = f0;
    g->a0_nf = sim_time_add(a0, lat);
    g->step = full_fetch > l->mrd_ps ? full_fetch : l->mrd_ps;
    g->r_last =
        k == 1 ? f0
               : f0 + (k - 2) * g->step +
                     (op->n_sent + k == op->n_req ? max_time(fetch_ps(l, op->last_bytes), l->mrd_ps)
                                                  : g->step);
    op->fetch_free = g->r_last;
    if (op->chain)
        *op->chain = g->r_last;
    /* Reads do not pass posted writes, unless relaxed. */
    g->w = (op->flags & PCIE_F_RELAXED) ? 0 : l->last_write_visible_ps;
    op->n_sent += k;

    if (l->nph.hdr_cap) {
        /* the root complex has processed an MRd when its data are read */
        struct fc_group ng = {.n = (uint32_t)k, .a = g->a0l, .s = g->step, .t_last = g->r_last};
        pool_push(l, &l->nph, &ng);
    }
    if (l->tags.hdr_cap)
        l->tags_unknown += k;
    if (op->blocked == PCIE_BLOCK_TAG)
        l->c.tag_stalls += k;
    else if (op->blocked == PCIE_BLOCK_CREDIT)
        l->c.credit_stalls += k;
    op->blocked = PCIE_BLOCK_NONE;
    sim_call_in(sim, max_time(g->a0l, g->w) - now, group_ready, l, g);
}

/* Send the MRds of the queued reads, in queue order (enqueue_read), while tags and non-posted
 * credits are free; otherwise come back when one is released (or, if every
 * tag belongs to a group not yet ready, when that group is ready). */
static void pump_event(struct sim *sim, struct sim_event *ev)
{
    struct pcie_link *l = ev->ctx;
    sim_time_t now = sim_now(sim);
    while (l->rq_head) {
        struct pcie_read_op *op = l->rq_head;
        uint64_t k = op->n_req - op->n_sent;
        /* Releases are lazy: a pool is brought up to date only when what it
         * counts as held would limit this op (the units held are bounded by
         * its capacity either way). */
        uint64_t free_tags = fc_pool_hdr_free(&l->tags, l->tags_unknown);
        if (free_tags < k) {
            fc_pool_release_until(&l->tags, now);
            free_tags = fc_pool_hdr_free(&l->tags, l->tags_unknown);
        }
        uint64_t free_nph = fc_pool_hdr_free(&l->nph, 0);
        if (free_nph < k) {
            fc_pool_release_until(&l->nph, now);
            free_nph = fc_pool_hdr_free(&l->nph, 0);
        }
        k = free_tags < k ? free_tags : k;
        k = free_nph < k ? free_nph : k;
        if (k == 0) {
            l->cur_block = free_tags == 0 ? PCIE_BLOCK_TAG : PCIE_BLOCK_CREDIT;
            if (op->blocked == PCIE_BLOCK_NONE)
                op->blocked = l->cur_block;
            sim_time_t t = now;
            if (free_tags == 0) {
                t = fc_pool_next_release(&l->tags);
                if (t == SIM_TIME_NEVER)
                    return; /* group_ready comes first and calls back */
            }
            if (free_nph == 0)
                t = max_time(t, fc_pool_next_release(&l->nph));
            sim_schedule_at(sim, &l->pump_ev, t);
            return;
        }
        send_group(l, op, k);
        if (op->n_sent == op->n_req) {
            l->rq_head = op->next;
            if (!l->rq_head)
                l->rq_tail = NULL;
            if (l->rq_meta_last == op)
                l->rq_meta_last = NULL;
        }
    }
    l->cur_block = PCIE_BLOCK_NONE;
}

/* Queue a read's MRds.  Reads go out in issue order, except, with
 * pcie.meta_reads_first, the device's metadata fetches (what its context
 * and translation caches miss on: PCIE_K_CTX_MISS, PCIE_K_XLATE_MISS),
 * which go ahead of every read not yet started, in their own issue order.
 * The engines wait for them (a translation miss holds the in-order
 * translation unit, sim/nic/xlate.c, and with it every DMA of the NIC):
 * queued behind the payload reads of the DMA engines, one miss stalled the
 * NIC for the whole queue (160 us behind 16 KiB READ responses, Huang
 * Fig. 13; docs/huang_mechanisms.md).  PCIe allows a read request to pass
 * another (PCIe base spec 3.0, 2.4.1, Table 2-34: a Non-Posted Request may
 * pass a Non-Posted Request). */
static void enqueue_read(struct pcie_link *l, struct pcie_read_op *op)
{
    bool meta =
        l->p.meta_reads_first && (op->kind == PCIE_K_XLATE_MISS || op->kind == PCIE_K_CTX_MISS);
    struct pcie_read_op *after = NULL; /* insert after this one; NULL: at the tail */
    if (meta && l->rq_head) {
        if (l->rq_meta_last)
            after = l->rq_meta_last;
        else if (l->rq_head->n_sent > 0)
            after = l->rq_head; /* it has MRds out already: the rest follow */
        else
            after = op; /* marker: at the head */
    }
    if (meta)
        l->rq_meta_last = op;
    if (!after) {
        if (l->rq_tail)
            l->rq_tail->next = op;
        else
            l->rq_head = op;
        l->rq_tail = op;
    } else if (after == op) {
        op->next = l->rq_head;
        l->rq_head = op;
    } else {
        op->next = after->next;
        after->next = op;
        if (l->rq_tail == after)
            l->rq_tail = op;
    }
}

void pcie_dma_read_k(struct pcie_link *l, enum pcie_kind kind, unsigned flags, uint64_t bytes,
                     sim_cb_fn done, void *a, void *b)
{
    pcie_dma_read_chain_k(l, kind, flags, bytes, NULL, done, a, b);
}

void pcie_dma_read_chain_k(struct pcie_link *l, enum pcie_kind kind, unsigned flags, uint64_t bytes,
                           sim_time_t *chain, sim_cb_fn done, void *a, void *b)
{
    kind = kind_ok(kind);
    struct tlp_split req = split(bytes, l->p.mrrs_bytes);
    uint64_t n_cpl_last;
    (void)cpl_ps(l, req.last, &n_cpl_last);
    uint64_t n_cpl = (req.n - 1) * l->n_cpl_req + n_cpl_last;

    l->c.dma_reads++;
    l->c.tlp_up += req.n;
    l->c.bytes_up += req.n * l->p.mwr_hdr_bytes;
    l->c.tlp_down += n_cpl;
    l->c.bytes_down += bytes + n_cpl * l->p.cpld_hdr_bytes;
    l->c.payload_down += bytes;
    l->c.kind_tlps[kind] += req.n + n_cpl;
    l->c.kind_bytes[kind] += req.n * l->p.mwr_hdr_bytes + bytes + n_cpl * l->p.cpld_hdr_bytes;

    struct pcie_read_op *op = &slot_get(l)->op;
    op->next = NULL;
    op->done = done;
    op->a = a;
    op->b = b;
    op->n_req = req.n;
    op->n_sent = 0;
    op->last_bytes = req.last;
    op->fetch_free = 0;
    op->chain = chain;
    op->flags = flags;
    op->kind = (uint8_t)kind;
    op->tr_qpn = l->tr_qpn;
    op->tr_psn = l->tr_psn;
    l->tr_qpn = l->tr_psn = 0;
    /* MRds are sent in queue order (enqueue_read): behind a waiting read,
     * this one waits for the same reason. */
    op->blocked = l->rq_head ? l->cur_block : PCIE_BLOCK_NONE;
    enqueue_read(l, op);
    if (l->rq_head == op)
        pump_event(l->sim, &l->pump_ev);
}

void pcie_dma_read(struct pcie_link *l, uint64_t bytes, sim_cb_fn done, void *a, void *b)
{
    pcie_dma_read_k(l, PCIE_K_OTHER, 0, bytes, done, a, b);
}

/* ---------------------------------------------------------------- writes */

/* A posted write whose data the device had from `head_ps` on (cut-through:
 * the TLPs may start then, the last leaves no earlier than now + its own
 * serialisation); head_ps = now is the ordinary write. */
static void dma_write(struct pcie_link *l, enum pcie_kind kind, unsigned flags, uint64_t bytes,
                      sim_time_t head_ps, sim_time_t rmw_ps, sim_cb_fn done, void *a, void *b)
{
    struct sim *sim = l->sim;
    kind = kind_ok(kind);
    struct tlp_split s = split(bytes, l->p.mps_bytes);
    sim_time_t now = sim_now(sim);
    sim_time_t start = max_time(head_ps, l->up_busy_until_ps);
    /* the last TLP cannot start before its data arrived (now) */
    sim_time_t last_ps = sim_bytes_to_ps(s.last + l->p.mwr_hdr_bytes, l->rate_bps);
    if (head_ps < now && start + split_ps(l, s, l->p.mwr_hdr_bytes, l->mwr_full_ps) < now + last_ps)
        start = now + last_ps - split_ps(l, s, l->p.mwr_hdr_bytes, l->mwr_full_ps);
    sim_time_t wl = l->p.write_latency_ps;
    /* Posted writes complete in issue order (equal times keep FIFO order
     * through the event sequence numbers); a relaxed one is not held. */
    sim_time_t guard = (flags & PCIE_F_RELAXED) ? 0 : l->last_write_visible_ps;
    uint64_t d_last = data_credits(s.last);
    int limited = l->posted.hdr_cap || l->posted.data_cap;
    sim_time_t end, visible;

    if (limited)
        fc_pool_release_until(&l->posted, start);
    if (!limited || fc_pool_fits(&l->posted, 0, s.n, (s.n - 1) * l->pd_full + d_last)) {
        /* the common case: credits for every TLP now, one closed form */
        sim_time_t ser = split_ps(l, s, l->p.mwr_hdr_bytes, l->mwr_full_ps);
        end = start + ser;
        /* the root complex takes the TLPs in as they arrive, after what it
         * still holds, and merges the partial lines: shifted by that */
        sim_time_t rc_end = max_time(end, max_time(start, l->rc_free_ps) + ser + rmw_ps);
        visible = max_time(sim_time_add(rc_end, wl), guard);
        if (limited) {
            struct fc_group g = {.n = (uint32_t)s.n,
                                 .a = start + (rc_end - end) + l->mwr_full_ps + wl,
                                 .s = l->mwr_full_ps,
                                 .c = guard,
                                 .t_last = visible,
                                 .data_each = l->pd_full,
                                 .data_last = (uint32_t)d_last};
            pool_push(l, &l->posted, &g);
        }
        l->rc_free_ps = rc_end;
    } else {
        /* TLP by TLP (no event): each waits until its credits are back;
         * the up direction is FIFO, so later TLPs wait behind it. */
        sim_time_t t = start;
        end = visible = start;
        for (uint64_t j = 0; j < s.n; j++) {
            int last = j + 1 == s.n;
            uint64_t d = last ? d_last : l->pd_full;
            sim_time_t t2 = fc_pool_wait(&l->posted, t, d);
            if (t2 > t)
                l->c.credit_stalls++;
            sim_time_t tlp =
                last ? sim_bytes_to_ps(s.last + l->p.mwr_hdr_bytes, l->rate_bps) : l->mwr_full_ps;
            end = t2 + tlp;
            /* the root complex as above; the merge holds the last TLP */
            sim_time_t rc_end =
                max_time(end, max_time(t2, l->rc_free_ps) + tlp + (last ? rmw_ps : 0));
            l->rc_free_ps = rc_end;
            visible = max_time(sim_time_add(rc_end, wl), guard);
            struct fc_group g = {.n = 1, .t_last = visible, .data_last = (uint32_t)d};
            pool_push(l, &l->posted, &g);
            t = end;
        }
    }
    if (sim_trace_on(sim, TRACE_G_PCIE)) {
        tlp_trace(l, TRK_PCIE_UP, "MWr", kind, l->tr_qpn, l->tr_psn, s.n, bytes, flags,
                  max_time(start, l->up_busy_until_ps), end);
        l->tr_qpn = l->tr_psn = 0;
    }
    l->up_busy_until_ps = end;
    l->last_write_visible_ps = max_time(l->last_write_visible_ps, visible);

    l->c.dma_writes++;
    if (rmw_ps) {
        l->c.rmw_writes++;
        l->c.rmw_ps += rmw_ps;
    }
    l->c.tlp_up += s.n;
    l->c.bytes_up += bytes + s.n * l->p.mwr_hdr_bytes;
    l->c.payload_up += bytes;
    l->c.kind_tlps[kind] += s.n;
    l->c.kind_bytes[kind] += bytes + s.n * l->p.mwr_hdr_bytes;
    if (done)
        sim_call_in(sim, visible - sim_now(sim), done, a, b);
}

void pcie_dma_write_k(struct pcie_link *l, enum pcie_kind kind, unsigned flags, uint64_t bytes,
                      sim_cb_fn done, void *a, void *b)
{
    dma_write(l, kind, flags, bytes, sim_now(l->sim), 0, done, a, b);
}

void pcie_dma_write_ct_k(struct pcie_link *l, enum pcie_kind kind, unsigned flags, uint64_t bytes,
                         sim_time_t head_ps, sim_cb_fn done, void *a, void *b)
{
    sim_time_t now = sim_now(l->sim);
    dma_write(l, kind, flags, bytes, head_ps && head_ps < now ? head_ps : now, 0, done, a, b);
}

void pcie_dma_write_rmw_ct_k(struct pcie_link *l, enum pcie_kind kind, unsigned flags,
                             uint64_t bytes, sim_time_t head_ps, sim_time_t rmw_ps, sim_cb_fn done,
                             void *a, void *b)
{
    sim_time_t now = sim_now(l->sim);
    dma_write(l, kind, flags, bytes, head_ps && head_ps < now ? head_ps : now, rmw_ps, done, a, b);
}

sim_time_t pcie_read_first_data_span_ps(const struct pcie_link *l, uint64_t bytes)
{
    struct tlp_split req = split(bytes, l->p.mrrs_bytes);
    uint64_t n;
    sim_time_t total = (req.n - 1) * l->cpl_req_ps + cpl_ps(l, req.last, &n);
    uint64_t first = bytes < l->p.mps_bytes ? bytes : l->p.mps_bytes;
    sim_time_t first_ps = sim_bytes_to_ps(first + l->p.cpld_hdr_bytes, l->rate_bps);
    return total > first_ps ? total - first_ps : 0;
}

void pcie_dma_write(struct pcie_link *l, uint64_t bytes, sim_cb_fn done, void *a, void *b)
{
    pcie_dma_write_k(l, PCIE_K_OTHER, 0, bytes, done, a, b);
}

/* ---------------------------------------------------------------- MMIO */

void pcie_mmio_write_k(struct pcie_link *l, enum pcie_kind kind, uint64_t bytes, sim_cb_fn done,
                       void *a, void *b)
{
    struct sim *sim = l->sim;
    kind = kind_ok(kind);
    struct tlp_split s = split(bytes, l->p.mps_bytes);
    sim_time_t ser = split_ps(l, s, l->p.mwr_hdr_bytes, l->mwr_full_ps);
    sim_time_t end = reserve(l, &l->down_busy_until_ps, ser);
    if (sim_trace_on(sim, TRACE_G_PCIE)) {
        tlp_trace(l, TRK_PCIE_DOWN, "MMIO MWr", kind, l->tr_qpn, l->tr_psn, s.n, bytes, 0,
                  end - ser, end);
        l->tr_qpn = l->tr_psn = 0;
    }

    l->c.mmio_writes++;
    l->c.tlp_down += s.n;
    l->c.bytes_down += bytes + s.n * l->p.mwr_hdr_bytes;
    l->c.payload_down += bytes;
    l->c.kind_tlps[kind] += s.n;
    l->c.kind_bytes[kind] += bytes + s.n * l->p.mwr_hdr_bytes;
    if (done)
        sim_call_in(sim, sim_time_add(end, l->p.mmio_latency_ps) - sim_now(sim), done, a, b);
}

void pcie_mmio_write(struct pcie_link *l, uint64_t bytes, sim_cb_fn done, void *a, void *b)
{
    pcie_mmio_write_k(l, PCIE_K_OTHER, bytes, done, a, b);
}
