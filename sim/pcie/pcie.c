/* PCIe link, first-order TLP model (contract and vocabulary in pcie.h; the
 * model, its defaults and its gaps in docs/pcie.md).
 *
 * Each direction is a FIFO serialiser kept as a single "busy until" time:
 * an operation reserves the direction for all of its TLPs at once, so no
 * event is ever scheduled per TLP or per byte.  Every operation costs O(1)
 * events and O(1) arithmetic:
 *
 *   pcie_mmio_write   1 event  (done)
 *   pcie_dma_write    1 event  (done = visible in host memory)
 *   pcie_dma_read     2 events (first completion ready at the root complex,
 *                               where the down direction is reserved; done)
 *
 * A read reserves the down direction only when its first completion is
 * ready, not at issue time: otherwise a doorbell issued while a read is
 * outstanding would queue behind completions that do not exist yet.
 *
 * Ordering rules kept (PCIe base spec, "Transaction Ordering" table):
 *  - posted writes do not pass posted writes (up FIFO + constant latency,
 *    and `last_write_visible_ps` as a guard);
 *  - a read request does not pass a posted write: its completion data are
 *    not produced before every earlier DMA write is visible, so the bytes
 *    the caller copies at `done` include those writes;
 *  - MMIO writes (posted, down) complete in issue order. */
#include "pcie.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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
    /* CALIBRATION, PCIe "DMA read latency": 64 B read 546 ns median (pcie-bench,
     * Gen3 x8, Broadwell, host-warm).  On that x8 link (57.91 Gb/s) the MRd
     * (24 B) and the CplD (84 B) take 3.32 + 11.60 = 14.92 ns to serialise, so
     * the host part is 546 - 14.92 = 531 ns.  With the default x16 link a 64 B
     * read then takes 538.6 ns.  The 256 B / 1 KiB / 2 KiB points are compared
     * in docs/pcie.md (the model is 9-26 % fast there). */
    p->read_latency_ps = 531 * SIM_NS;
    /* Estimate: about half of the ~400 ns unloaded PCIe round trip quoted by
     * system papers (CALIBRATION, PCIe: 1RMA, SIGCOMM'20): the MWr crosses the
     * link and the root complex commits it to the LLC (DDIO); no read-back. */
    p->write_latency_ps = 200 * SIM_NS;
    /* Estimate: same one-way figure for a CPU store (uncached/write-combining)
     * travelling core -> root complex -> device BAR (CALIBRATION, PCIe). */
    p->mmio_latency_ps = 200 * SIM_NS;
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

/* A DMA read between its issue and the moment its first completion is ready
 * at the root complex (then its numbers are final and it is released). */
struct pcie_read_op {
    struct pcie_read_op *next; /* free list */
    sim_cb_fn done;
    void *a, *b;
    sim_time_t last_ready_ps; /* completion data of the last MRd ready */
    sim_time_t cpl_all_ps;    /* down-direction time of all completions */
    sim_time_t cpl_last_ps;   /* ... of the last MRd's completions */
};

#define PCIE_OPS_PER_CHUNK 64

struct pcie_op_chunk {
    struct pcie_op_chunk *next;
    struct pcie_read_op ops[PCIE_OPS_PER_CHUNK];
};

struct pcie_link {
    struct sim *sim;
    char name[48];
    struct pcie_params p;
    uint64_t rate_bps; /* effective: what TLP bytes serialise at */

    sim_time_t up_busy_until_ps;   /* device -> root complex */
    sim_time_t down_busy_until_ps; /* root complex -> device */
    sim_time_t last_write_visible_ps;

    /* TLP serialisation times of the sizes that recur, precomputed */
    sim_time_t mwr_full_ps; /* MWr with MPS payload */
    sim_time_t mrd_ps;      /* MRd (header only) */
    sim_time_t cpl_full_ps; /* CplD with MPS payload */

    struct pcie_read_op *free_ops;
    struct pcie_op_chunk *chunks;

    struct pcie_counters c;
};

struct pcie_link *pcie_link_create(struct sim *sim, const char *name, const struct pcie_params *p)
{
    uint64_t rate = pcie_effective_rate_bps(p);
    if (!sim || !p || rate == 0 || p->mps_bytes == 0 || p->mrrs_bytes == 0) {
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
    return l;
}

void pcie_link_destroy(struct pcie_link *l)
{
    if (!l)
        return;
    /* Pending read callbacks point into the chunks: destroy the link only
     * after the simulation stopped running (or with no read in flight). */
    for (struct pcie_op_chunk *ch = l->chunks, *next; ch; ch = next) {
        next = ch->next;
        free(ch);
    }
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

static struct pcie_read_op *op_get(struct pcie_link *l)
{
    if (!l->free_ops) {
        struct pcie_op_chunk *ch = malloc(sizeof(*ch));
        if (!ch) {
            fprintf(stderr, "rnicsim: pcie %s: out of memory\n", l->name);
            abort();
        }
        ch->next = l->chunks;
        l->chunks = ch;
        for (unsigned i = 0; i < PCIE_OPS_PER_CHUNK; i++) {
            ch->ops[i].next = l->free_ops;
            l->free_ops = &ch->ops[i];
        }
    }
    struct pcie_read_op *op = l->free_ops;
    l->free_ops = op->next;
    return op;
}

static void op_put(struct pcie_link *l, struct pcie_read_op *op)
{
    op->next = l->free_ops;
    l->free_ops = op;
}

static sim_time_t max_time(sim_time_t a, sim_time_t b)
{
    return a > b ? a : b;
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

/* First completion of a read is ready at the root complex: reserve the down
 * direction for all of its completions and schedule `done`.
 *
 * MRd j (0..n-1) reaches the root complex at A_j = A_0 + j*u (they leave back
 * to back), its data are ready at r_j = max(A_j + L, W) and its CplDs take
 * C_j on the down direction (C_j = C for j < n-1, C_last for the last).
 * The FIFO recursion D_j = max(r_j, D_{j-1}) + C_j has the max-plus closed
 * form  D_{n-1} = max(D_init + sum C, max_j (r_j + sum_{i>=j} C_i)).
 * r_j + suffix is a maximum of terms linear in j, so the inner maximum is
 * reached at j = 0 (<= D_init + sum C, as this runs at r_0) or j = n-1:
 *   end = max(max(now, busy) + sum C, r_{n-1} + C_last). */
static void read_first_ready(struct sim *sim, void *a, void *b)
{
    struct pcie_link *l = a;
    struct pcie_read_op *op = b;
    sim_time_t end = reserve(l, &l->down_busy_until_ps, op->cpl_all_ps);
    end = max_time(end, op->last_ready_ps + op->cpl_last_ps);
    l->down_busy_until_ps = end;
    sim_cb_fn done = op->done;
    void *da = op->a, *db = op->b;
    op_put(l, op);
    if (done)
        sim_call_in(sim, end - sim_now(sim), done, da, db);
}

void pcie_dma_read(struct pcie_link *l, uint64_t bytes, sim_cb_fn done, void *a, void *b)
{
    struct sim *sim = l->sim;
    sim_time_t now = sim_now(sim);
    struct tlp_split req = split(bytes, l->p.mrrs_bytes);

    /* MRd requests up, back to back. */
    sim_time_t up_start = max_time(now, l->up_busy_until_ps);
    l->up_busy_until_ps = up_start + req.n * l->mrd_ps;
    sim_time_t first_ready = up_start + l->mrd_ps + l->p.read_latency_ps;
    sim_time_t last_ready = up_start + req.n * l->mrd_ps + l->p.read_latency_ps;
    /* Reads do not pass posted writes. */
    first_ready = max_time(first_ready, l->last_write_visible_ps);
    last_ready = max_time(last_ready, l->last_write_visible_ps);

    /* CplDs down. */
    uint64_t n_cpl_full = 0, n_cpl_last;
    sim_time_t c_full = req.n > 1 ? cpl_ps(l, l->p.mrrs_bytes, &n_cpl_full) : 0;
    sim_time_t c_last = cpl_ps(l, req.last, &n_cpl_last);
    uint64_t n_cpl = (req.n - 1) * n_cpl_full + n_cpl_last;

    l->c.dma_reads++;
    l->c.tlp_up += req.n;
    l->c.bytes_up += req.n * l->p.mwr_hdr_bytes;
    l->c.tlp_down += n_cpl;
    l->c.bytes_down += bytes + n_cpl * l->p.cpld_hdr_bytes;
    l->c.payload_down += bytes;

    struct pcie_read_op *op = op_get(l);
    op->done = done;
    op->a = a;
    op->b = b;
    op->last_ready_ps = last_ready;
    op->cpl_all_ps = (req.n - 1) * c_full + c_last;
    op->cpl_last_ps = c_last;
    sim_call_in(sim, first_ready - now, read_first_ready, l, op);
}

void pcie_dma_write(struct pcie_link *l, uint64_t bytes, sim_cb_fn done, void *a, void *b)
{
    struct sim *sim = l->sim;
    struct tlp_split s = split(bytes, l->p.mps_bytes);
    sim_time_t end =
        reserve(l, &l->up_busy_until_ps, split_ps(l, s, l->p.mwr_hdr_bytes, l->mwr_full_ps));
    /* Posted writes complete in issue order (equal times keep FIFO order
     * through the event sequence numbers). */
    sim_time_t visible = max_time(end + l->p.write_latency_ps, l->last_write_visible_ps);
    l->last_write_visible_ps = visible;

    l->c.dma_writes++;
    l->c.tlp_up += s.n;
    l->c.bytes_up += bytes + s.n * l->p.mwr_hdr_bytes;
    l->c.payload_up += bytes;
    if (done)
        sim_call_in(sim, visible - sim_now(sim), done, a, b);
}

void pcie_mmio_write(struct pcie_link *l, uint64_t bytes, sim_cb_fn done, void *a, void *b)
{
    struct sim *sim = l->sim;
    struct tlp_split s = split(bytes, l->p.mps_bytes);
    sim_time_t end =
        reserve(l, &l->down_busy_until_ps, split_ps(l, s, l->p.mwr_hdr_bytes, l->mwr_full_ps));

    l->c.mmio_writes++;
    l->c.tlp_down += s.n;
    l->c.bytes_down += bytes + s.n * l->p.mwr_hdr_bytes;
    l->c.payload_down += bytes;
    if (done)
        sim_call_in(sim, end + l->p.mmio_latency_ps - sim_now(sim), done, a, b);
}
