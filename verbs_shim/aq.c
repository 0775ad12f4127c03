/* RIMA append queues (include/rnicsim/rima.h, docs/rima.md "API"):
 * ibv_create_aq, ibv_destroy_aq, ibv_query_aq, ibv_modify_aq.  The NIC
 * side (tail pointer table, placement, reserve pool) is sim/nic/aq.c;
 * appends are posted with ibv_post_send (post.c: IBV_WR_APPEND, RC only).
 *
 * The region is reserved with mmap(MAP_PRIVATE | MAP_ANONYMOUS |
 * MAP_NORESERVE): virtual address space only, as the paper assumes ("such
 * virtual address reservations have little cost", 3.2); what counts as
 * committed memory is the NIC model's chunk accounting.  It is registered
 * internally (an MR of the AQ's PD, LOCAL_WRITE; no key is exposed).
 *
 * Defaults (an attribute given as 0 at create):
 *   region_bytes     64 MiB: five times the reserve pool of a 100 Gb/s
 *                    port (line rate x 1 ms = 12.5 MB, Table 4) so that
 *                    an active buffer of the paper's size (4 MB average,
 *                    5.1.1) and a stalled consumer fit; a reservation is
 *                    free, so it errs on the large side.
 *   chunk_bytes      16 MiB (or the region, if smaller): the allocation
 *                    size the paper measured (5.2.1, "sweet spot 16 MB").
 *   watermark_bytes  port rate x rima.alloc_latency, rounded up to 4 KiB
 *                    (12.5 MB on 100 Gb/s x 1 ms; 3.2.1 "a reserve pool
 *                    larger than linerate x L"), at most the region.
 *   initial_chunks   1.
 *
 * Errors (errno / return value):
 *   create   EINVAL: NULL pd, init_attr or cq; a cq of another context;
 *            region, chunk or watermark not a multiple of 4 KiB; chunk >
 *            region or region not a multiple of chunk; more than 2^32
 *            chunks; watermark > region; initial_chunks > region / chunk;
 *            unknown flags.  ENOMEM: the TPT is full (rima.tpt_entries
 *            AQs exist) or the region cannot be reserved.  EOPNOTSUPP:
 *            the device has no RIMA (rima.tpt_entries = 0).
 *   modify   EINVAL: NULL arguments, mask bits other than IBV_AQ_HEAD |
 *            IBV_AQ_WATERMARK | IBV_AQ_FLAGS, unknown flags, a watermark
 *            not a multiple of 4 KiB or > region, a head outside the used
 *            part [head, tail] (the ring is never completely full, so
 *            head == tail is the empty queue: a head equal to the tail
 *            consumes everything, one equal to the current head moves
 *            nothing; a head of region_bytes is offset 0).  Nothing is
 *            changed on error.
 *   query    EINVAL: NULL arguments.
 *   destroy  EINVAL: NULL.  Always succeeds otherwise, even with senders
 *            connected: the TPT entry and the registration go at once,
 *            appends still in flight for it are answered with a remote
 *            access NAK (the sender's WR completes IBV_WC_REM_ACCESS_ERR),
 *            placements already issued are dropped (never written into the
 *            unmapped region), CQEs already issued still reach the CQ.
 *
 * Cost: create / destroy / query / modify of the watermark or flags are
 * control verbs (host.cpu.control_verb); a head-only modify is the data
 * path: host.cpu.post_send (a barrier and one MMIO store) and an 8-byte
 * MMIO write that reaches the NIC over PCIe, which applies it on arrival
 * (the head a query reports until then is the old one).  The write is
 * tagged with the queue's reset epoch: if the queue was reset to offset 0
 * (IBV_AQ_F_RESET_ON_EMPTY, or an empty queue restarting at 0) after the
 * head was checked here and before the write arrives, it is ignored. */
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>

#include <rnicsim/rima.h>

#include "shim.h"

enum { AQ_PAGE_BYTES = 4096 };
#define AQ_DEFAULT_REGION_BYTES (64ull << 20)
#define AQ_DEFAULT_CHUNK_BYTES (16ull << 20)

struct shim_aq {
    struct ibv_aq aq;
    struct shim_context *ctx;
    struct shim_pd *pd;
    struct shim_cq *cq;
    struct nic_aq *naq;
};

static struct shim_aq *shim_aq(struct ibv_aq *a)
{
    return shim_container_of(a, struct shim_aq, aq);
}

static bool page_multiple(uint64_t v)
{
    return v % AQ_PAGE_BYTES == 0;
}

/* Line rate x allocation latency, rounded up to 4 KiB (Table 4 reserve pool). */
static uint64_t default_watermark(const struct nic_params *p)
{
    long double b = (long double)p->port_rate_bps / 8.0L * (long double)p->rima_alloc_ps / 1e12L;
    uint64_t w = (uint64_t)b;
    if ((long double)w < b)
        w++;
    return (w + AQ_PAGE_BYTES - 1) / AQ_PAGE_BYTES * AQ_PAGE_BYTES;
}

struct ibv_aq *ibv_create_aq(struct ibv_pd *pd, struct ibv_aq_init_attr *init)
{
    shim_charge_control();
    if (!pd || !init || !init->cq || init->cq->context != pd->context) {
        errno = EINVAL;
        return NULL;
    }
    struct shim_pd *spd = shim_pd(pd);
    const struct nic_params *np = nic_get_params(spd->ctx->nic);
    if (!np->rima_tpt_entries) {
        errno = EOPNOTSUPP;
        return NULL;
    }
    const struct ibv_aq_attr *a = &init->attr;
    uint64_t region = a->region_bytes ? a->region_bytes : AQ_DEFAULT_REGION_BYTES;
    uint64_t chunk = a->chunk_bytes                    ? a->chunk_bytes
                     : region < AQ_DEFAULT_CHUNK_BYTES ? region
                                                       : AQ_DEFAULT_CHUNK_BYTES;
    uint64_t wm = a->watermark_bytes;
    if (!wm) {
        wm = default_watermark(np);
        if (wm > region)
            wm = region;
    }
    uint32_t initial = a->initial_chunks ? a->initial_chunks : 1;
    if (!page_multiple(region) || !page_multiple(chunk) || !page_multiple(wm) || chunk > region ||
        region % chunk || region / chunk > UINT32_MAX || wm > region || initial > region / chunk ||
        (a->flags & ~(uint32_t)IBV_AQ_F_RESET_ON_EMPTY)) {
        errno = EINVAL;
        return NULL;
    }
    struct shim_aq *saq = calloc(1, sizeof(*saq));
    if (!saq) {
        errno = ENOMEM;
        return NULL;
    }
    void *buf = mmap(NULL, region, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (buf == MAP_FAILED) {
        free(saq);
        errno = ENOMEM;
        return NULL;
    }
    struct nic_aq_cfg cfg = {
        .buf = buf,
        .region_bytes = region,
        .chunk_bytes = chunk,
        .watermark_bytes = wm,
        .initial_chunks = initial,
        .flags = a->flags,
    };
    struct shim_cq *scq = shim_cq(init->cq);
    saq->naq = nic_aq_create(spd->npd, scq->ncq, &cfg);
    if (!saq->naq) {
        int e = errno ? errno : ENOMEM;
        munmap(buf, region);
        free(saq);
        errno = e;
        return NULL;
    }
    saq->ctx = spd->ctx;
    saq->pd = spd;
    saq->cq = scq;
    scq->n_qps++; /* the CQ is in use (ibv_destroy_cq -> EBUSY) */
    struct ibv_aq *aq = &saq->aq;
    aq->context = pd->context;
    aq->aq_context = init->aq_context;
    aq->pd = pd;
    aq->cq = init->cq;
    aq->aq_num = saq->naq->aqn;
    aq->handle = saq->naq->slot;
    aq->buf = buf;
    aq->region_bytes = region;
    return aq;
}

int ibv_destroy_aq(struct ibv_aq *aq)
{
    shim_charge_control();
    if (!aq)
        return EINVAL;
    struct shim_aq *saq = shim_aq(aq);
    int rc = nic_aq_destroy(saq->naq);
    if (rc)
        return rc;
    munmap(aq->buf, aq->region_bytes);
    saq->cq->n_qps--;
    free(saq);
    return 0;
}

int ibv_query_aq(struct ibv_aq *aq, struct ibv_aq_attr *attr)
{
    shim_charge_control();
    if (!aq || !attr)
        return EINVAL;
    const struct nic_aq *n = shim_aq(aq)->naq;
    *attr = (struct ibv_aq_attr){
        .region_bytes = n->region_bytes,
        .chunk_bytes = n->chunk_bytes,
        .watermark_bytes = n->watermark_bytes,
        .initial_chunks = 0,
        .flags = n->flags,
        .head = n->head,
        .tail = n->tail,
        .used_bytes = n->used_bytes,
        .committed_bytes = (uint64_t)n->n_committed * n->chunk_bytes,
        .peak_used_bytes = n->peak_used_bytes,
        .peak_committed_bytes = n->peak_committed_bytes,
        .messages = n->messages,
        .bytes = n->bytes,
        .watermark_irqs = n->watermark_irqs,
        .chunks_allocated = n->chunks_allocated,
        .chunks_freed = n->chunks_freed,
        .rnr_naks = n->rnr_naks,
    };
    attr->initial_chunks =
        (uint32_t)(n->n_committed + n->chunks_freed - n->chunks_allocated); /* as created */
    return 0;
}

int ibv_modify_aq(struct ibv_aq *aq, struct ibv_aq_attr *attr, int mask)
{
    host_note_call();
    struct host *h = host_of_current();
    if (h)
        host_charge(mask == IBV_AQ_HEAD ? h->cpu.post_send_ps : h->cpu.control_verb_ps);
    if (!aq || !attr)
        return EINVAL;
    struct nic_aq *n = shim_aq(aq)->naq;
    if (mask & ~(IBV_AQ_HEAD | IBV_AQ_WATERMARK | IBV_AQ_FLAGS))
        return EINVAL;
    if ((mask & IBV_AQ_FLAGS) && (attr->flags & ~(uint32_t)IBV_AQ_F_RESET_ON_EMPTY))
        return EINVAL;
    if ((mask & IBV_AQ_WATERMARK) &&
        (!page_multiple(attr->watermark_bytes) || attr->watermark_bytes > n->region_bytes))
        return EINVAL;
    if ((mask & IBV_AQ_HEAD) && nic_aq_head_advance(n, attr->head) < 0)
        return EINVAL;
    if (mask & IBV_AQ_FLAGS)
        nic_aq_set_flags(n, attr->flags);
    if (mask & IBV_AQ_WATERMARK)
        nic_aq_set_watermark(n, attr->watermark_bytes);
    if (mask & IBV_AQ_HEAD)
        nic_aq_write_head(n, attr->head);
    return 0;
}
