/* Zero-sided RDMA (Jasny et al., SIGMOD 2024): what the processing units
 * (PUs), the switch program and the baselines share.
 *
 * The PU buffer (a ring in memory the PU's RNIC can reach):
 *
 *   offset 0   head  (u32, little-endian): items written by the producer
 *   offset 4   tail  (u32, little-endian): items taken by the consumer
 *   offset 64  capacity x item_bytes of items; item k lives at (k mod capacity)
 *
 * Pointers count items (31 bits); bit 31 of the head is the end-of-stream
 * flag (the producer sets it after its last item; the switch sets it in a
 * consumer's head when every producer of that consumer is done).  A
 * producer writes the item, then the head (a release store); a consumer
 * reads the head, then the items, then writes the tail.  The switch mirrors
 * the producer head and consumer tail (polling READs or doorbells) and
 * writes the consumer head and producer tail; the PUs post no verbs on the
 * data path.
 *
 * Every endpoint (one ring) has two RC QPs to the switch: the data QP
 * (READ of items, WRITE of items and of the pointer the switch owns) and
 * the control QP (polling READs of the pointer the PU owns, or the PU's
 * doorbell WRITEs).  Keeping polls off the data QP lets a poll never wait
 * behind, nor be reordered with, a transfer.
 *
 * Items carry a 24-byte header (producer, destination, sequence number,
 * check word) and a pattern derived from it, so a consumer checks every
 * item it takes (zs_item_check) and reports per producer what it saw. */
#ifndef RNICSIM_ZS_H
#define RNICSIM_ZS_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define ZS_HDR_BYTES 64u
#define ZS_HEAD_OFF 0u
#define ZS_TAIL_OFF 4u
#define ZS_DONE_BIT 0x80000000u
#define ZS_PTR_MASK 0x7fffffffu
#define ZS_ITEM_HDR_BYTES 24u
#define ZS_MAX_PRODUCERS 64 /* a thread's done mask is 64 bits */
#define ZS_MAX_CONSUMERS 32 /* a replication group's ACK mask is 32 bits */

/* Flow shapes (the switch program's --mode). */
enum zs_mode {
    ZS_PAIRS,     /* N independent 1:1 flows: producer i -> consumer i */
    ZS_SHUFFLE,   /* N:M key-based: producer i has one ring per consumer j */
    ZS_LB,        /* N:M load balancing: one ring per producer, consumers pull */
    ZS_REPLICATE, /* K producers -> every one of M consumers, one global order */
};
extern const char *const zs_mode_names[]; /* "pairs", "shuffle", "lb", "replicate", NULL */

/* Per-flow QoS (Fig. 11): the switch's control plane publishes a schedule
 * of per-flow rates (host_oob key zs/<flow>/qos) before the start; from the
 * start on, the coordinator side of each producer applies step k at at_ns[k]
 * to the producer's data QP with ibv_modify_qp_rate_limit: its NIC's per-QP
 * rate limiter then paces the READ responses that carry the flow's data.
 * The PU itself never learns of it. */
#define ZS_QOS_STEPS 8
#define ZS_QOS_FLOWS 8
struct zs_qos {
    uint32_t n_steps, n_flows;
    uint64_t at_ns[ZS_QOS_STEPS];                  /* from the start */
    uint64_t rate_bps[ZS_QOS_STEPS][ZS_QOS_FLOWS]; /* by producer index */
};

/* PU kinds (where the ring lives and what produces / consumes it). */
enum zs_pu_kind { ZS_PU_CPU, ZS_PU_GPU, ZS_PU_FPGA };
extern const char *const zs_pu_kind_names[]; /* "cpu", "gpu", "fpga", NULL */

/* One endpoint as the PU publishes it (host_oob key zs/<flow>/p<i>.<j> or
 * zs/<flow>/c<j>). */
struct zs_ep_desc {
    uint8_t gid[16];            /* the PU NIC's RoCEv2 GID */
    uint32_t data_qpn, ctl_qpn; /* the PU's QPs */
    uint32_t ctl_sq_psn;        /* first PSN of the PU's doorbell WRITEs */
    uint32_t rkey;
    uint64_t base; /* ring address (header) as the NIC sees it */
    uint32_t item_bytes, capacity;
    uint32_t kind; /* enum zs_pu_kind */
    uint32_t doorbell;
};

/* Lanes: a shuffle consumer's ring can have up to ZS_MAX_LANES data QPs
 * to the switch, one switch thread each, so that several transfers (from
 * different producers) land in it at once; the switch asks for them in
 * its answer and the PU opens and connects them (lane 0 is the data QP). */
#define ZS_MAX_LANES 4

/* The switch's answer (key zs/<flow>/<ep>/sw). */
struct zs_sw_desc {
    uint8_t gid[16];
    uint32_t data_qpn, ctl_qpn; /* the switch's QPs for this endpoint */
    uint32_t data_psn;          /* first PSN the switch sends on the data QP */
    uint32_t ctl_psn;           /* ... on the control QP */
    uint32_t lanes;             /* data QPs wanted (consumer rings; 0 / 1: only data_qpn) */
    uint32_t lane_qpn[ZS_MAX_LANES], lane_psn[ZS_MAX_LANES]; /* lanes 1..: the switch's side */
};

/* The PU's "connected" (key zs/<flow>/<ep>/ready): ok = 1, and its QPs of
 * lanes 1.. */
struct zs_ready {
    uint32_t ok;
    uint32_t lane_qpn[ZS_MAX_LANES];
};

static inline uint32_t zs_load_le32(const volatile uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline void zs_store_le32(volatile uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

/* ---------------------------------------------------------------- items */

/* splitmix64: the item pattern and the per-stream check sums. */
static inline uint64_t zs_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Key-based partitioning of producer `src`'s k-th item over n destinations,
 * for a uniform (non-skewed) key distribution: every block of n consecutive
 * items goes to each destination once, in a rotation drawn per block.  A
 * uniform hash of keys would give the same shares only in the limit: the
 * paper's runs move gigabytes (millions of items, shares equal to a
 * fraction of a percent), the scaled-down figures tens of items per
 * producer (512 KiB items, Fig. 8), where independent draws leave one
 * consumer node with 15 % more bytes than another, and the job then runs
 * at that node's pace.  Blocks keep the shares exact at any scale. */
static inline uint32_t zs_key_dest(uint32_t src, uint64_t k, uint32_t n)
{
    uint64_t block = k / n;
    return (uint32_t)((k % n + zs_mix((uint64_t)src << 40 ^ block)) % n);
}

static inline uint64_t zs_item_key(uint32_t producer, uint32_t dest, uint64_t seq)
{
    return zs_mix(((uint64_t)producer << 48) ^ ((uint64_t)dest << 32) ^ seq);
}

/* Smallest item: a 16-byte tuple (the join's). */
#define ZS_MIN_ITEM_BYTES 16u

/* Fill an item.  Items of 24 B and more: producer, destination, sequence
 * number, check word, then a pattern in the first and last 8 bytes past
 * the header (a full-item pattern would cost the simulator a pass over
 * every byte; the ends catch misplaced, stale and torn items).  16..23 B
 * items (tuples): tag = producer << 48 | sequence (48 bits), then the check
 * word, which also names the destination (the key of a key-based shuffle). */
static inline void zs_item_fill(uint8_t *item, uint32_t bytes, uint32_t producer, uint32_t dest,
                                uint64_t seq)
{
    uint64_t key = zs_item_key(producer, dest, seq);
    if (bytes < ZS_ITEM_HDR_BYTES) {
        uint64_t tag = (uint64_t)producer << 48 | (seq & 0xffffffffffffull);
        memcpy(item, &tag, 8);
        memcpy(item + 8, &key, 8);
        return;
    }
    memcpy(item, &producer, 4);
    memcpy(item + 4, &dest, 4);
    memcpy(item + 8, &seq, 8);
    memcpy(item + 16, &key, 8);
    if (bytes >= ZS_ITEM_HDR_BYTES + 16) {
        uint64_t a = ~key, b = key * 3;
        memcpy(item + ZS_ITEM_HDR_BYTES, &a, 8);
        memcpy(item + bytes - 8, &b, 8);
    }
}

/* Decode and check an item written for `dest`; false if no producer wrote
 * these bytes for that destination. */
static inline bool zs_item_check(const uint8_t *item, uint32_t bytes, uint32_t dest,
                                 uint32_t *producer, uint64_t *seq)
{
    uint64_t key;
    if (bytes < ZS_ITEM_HDR_BYTES) {
        uint64_t tag;
        memcpy(&tag, item, 8);
        memcpy(&key, item + 8, 8);
        *producer = (uint32_t)(tag >> 48);
        *seq = tag & 0xffffffffffffull;
        return key == zs_item_key(*producer, dest, *seq);
    }
    uint32_t pr, d;
    uint64_t s;
    memcpy(&pr, item, 4);
    memcpy(&d, item + 4, 4);
    memcpy(&s, item + 8, 8);
    memcpy(&key, item + 16, 8);
    *producer = pr;
    *seq = s;
    if (d != dest || key != zs_item_key(pr, d, s))
        return false;
    if (bytes >= ZS_ITEM_HDR_BYTES + 16) {
        uint64_t a, b;
        memcpy(&a, item + ZS_ITEM_HDR_BYTES, 8);
        memcpy(&b, item + bytes - 8, 8);
        if (a != ~key || b != key * 3)
            return false;
    }
    return true;
}

#endif /* RNICSIM_ZS_H */
