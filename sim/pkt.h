/* A packet on the fabric: an IBA transport packet (BTH and extension
 * headers) described by fields, with its payload bytes carried along so that
 * DMA placement at the receiver writes exactly what the sender read.  Its
 * link-layer framing (enum pkt_framing) says what surrounds the transport
 * headers on the wire: RoCEv2 or native InfiniBand.
 *
 * Transport header sizes (IBA 9.2-9.3; Linux include/rdma/ib_pack.h):
 * BTH 12 (+DETH 8, RETH 16, AETH 4, AtomicETH 28, AtomicAckETH 8, ImmDt 4),
 * payload padded to 4 bytes, ICRC 4.  The framings (pkt_framings[] in
 * pkt.c, sources there):
 *   RoCEv2     Eth 14 + IPv4 20 + UDP 8 ... ICRC 4 + FCS 4, at least 64 B;
 *              on the wire also preamble+SFD 8 and inter-frame gap 12
 *   IB local   LRH 8 ... ICRC 4 + VCRC 2; on the wire also the start and
 *              end delimiters, 2
 *   IB global  LRH 8 + GRH 40 ... ICRC 4 + VCRC 2; delimiters 2 */
#ifndef RNICSIM_PKT_H
#define RNICSIM_PKT_H

#include <stdint.h>

#include "sim.h"

enum {
    PKT_ETH_HDR_BYTES = 14,
    PKT_IPV4_HDR_BYTES = 20,
    PKT_UDP_HDR_BYTES = 8,
    PKT_BTH_BYTES = 12,
    PKT_RETH_BYTES = 16,
    PKT_AETH_BYTES = 4,
    PKT_ATOMICETH_BYTES = 28,
    PKT_ATOMICACKETH_BYTES = 8,
    PKT_IMMDT_BYTES = 4,
    PKT_DETH_BYTES = 8,   /* UD: Q_Key 4 + reserved 1 + source QP 3 */
    PKT_XRCETH_BYTES = 4, /* XRC: reserved 1 + XRC SRQ number 3 (IBA Annex A14) */
    PKT_ICRC_BYTES = 4,
    PKT_ETH_FCS_BYTES = 4,
    PKT_ETH_PREAMBLE_IFG_BYTES = 20, /* 8 preamble+SFD, 12 inter-frame gap */
    PKT_IB_LRH_BYTES = 8,            /* IBA 7.7: Local Route Header */
    PKT_IB_GRH_BYTES = 40,           /* IBA 8.3: Global Route Header */
    PKT_IB_VCRC_BYTES = 2,           /* IBA 7.8.2: Variant CRC */
    PKT_IB_DELIM_BYTES = 2,          /* start + end of packet delimiters */
    PKT_ROCEV2_UDP_PORT = 4791,
    PKT_MAX_PAYLOAD_BYTES = 4096, /* largest IB path MTU */
};

/* Link-layer framing of a packet: what comes before the BTH and after the
 * ICRC, and what the link spends between packets (docs/nic.md "Framing").
 * The NIC picks it from its port's link layer (nic.link_layer) and, on
 * InfiniBand, whether the packet's address vector is global (a GRH). */
enum pkt_framing {
    PKT_FRAMING_ROCEV2 = 0, /* Ethernet + IPv4 + UDP (also PFC frames: Ethernet) */
    PKT_FRAMING_IB_LOCAL,   /* InfiniBand inside a subnet: LRH */
    PKT_FRAMING_IB_GLOBAL,  /* InfiniBand with a GRH (is_global address vector) */
    PKT_FRAMINGS
};
struct pkt_framing_facts {
    const char *name;
    uint16_t hdr_bytes;     /* before the BTH */
    uint16_t trailer_bytes; /* after the ICRC */
    uint16_t min_bytes;     /* smallest frame (0: none) */
    uint16_t gap_bytes;     /* link time per packet outside the frame */
};
extern const struct pkt_framing_facts pkt_framings[PKT_FRAMINGS];

/* Bytes of a packet whose transport part (BTH + extension headers +
 * payload + pad + ICRC) is `transport_bytes`, framed as `f`. */
static inline uint32_t pkt_framed_bytes(enum pkt_framing f, uint32_t transport_bytes)
{
    uint32_t b = pkt_framings[f].hdr_bytes + transport_bytes + pkt_framings[f].trailer_bytes;
    return b < pkt_framings[f].min_bytes ? pkt_framings[f].min_bytes : b;
}

enum pkt_kind {
    PKT_ROCE = 0, /* a RoCEv2 packet (the fields below) */
    PKT_PFC,      /* a PFC pause frame: MAC control, 64 B, never forwarded */
};
enum {
    PKT_PRIOS = 8,            /* 802.1p priorities */
    PKT_PFC_FRAME_BYTES = 64, /* MAC control frame incl. FCS (IEEE 802.3 Annex 31D) */
    PKT_ECN_ECT0 = 2,         /* RFC 3168 */
    PKT_ECN_CE = 3,
};

/* Extension headers after the BTH that a packet carries (IBA 9.3), as set
 * by the NIC from its opcode table; a capture writer encodes exactly these,
 * in this order. */
enum pkt_ext_hdr {
    PKT_EXT_RETH = 1u << 0,   /* 16 B */
    PKT_EXT_AETH = 1u << 1,   /* 4 B */
    PKT_EXT_ATMETH = 1u << 2, /* AtomicETH, 28 B */
    PKT_EXT_ATMACK = 1u << 3, /* AtomicAckETH, 8 B */
    PKT_EXT_IMMDT = 1u << 4,  /* 4 B */
    PKT_EXT_DETH = 1u << 5,   /* 8 B (UD), comes right after the BTH */
    /* 4 B (XRC requests), right after the BTH; bit 20, past the NIC's
     * opcode-table flags that follow the extension-header bits */
    PKT_EXT_XRCETH = 1u << 20,
};

/* A multicast destination (IB UD multicast, ibv_attach_mcast): dst_node is
 * PKT_MCAST_NODE | group; switches copy the frame to every member node. */
#define PKT_MCAST_NODE 0x80000000u
static inline bool pkt_node_is_mcast(uint32_t node)
{
    return (node & PKT_MCAST_NODE) != 0;
}

/* Field order: what the fabric reads at every hop (addressing, size,
 * class of service, the cut-through head, the send stamp) comes first and
 * fills the first 64-byte cache line; the transport's extension headers
 * follow.  Packets are cache-line aligned (pkt.c), so a hop touches one
 * line of the packet: at 1024 hosts the in-flight packets no longer fit
 * the per-core cache, and a second line per hop was a second miss
 * (docs/performance.md). */
struct pkt {
    struct pkt *next; /* queue link, owned by whoever holds the packet */

    /* fabric addressing */
    uint32_t src_node, dst_node; /* NIC node ids (index into the topology) */
    uint32_t frame_bytes;        /* the framed packet: Ethernet frame incl. FCS, or IB LRH..VCRC
                                    (no preamble/IFG, no delimiters) */
    uint16_t udp_sport;          /* RoCEv2 UDP source port: the flow's ECMP entropy */

    /* BTH */
    uint8_t opcode; /* IBA opcode (ib_opcode table in sim/nic/opcode.h) */
    uint8_t se : 1, ack_req : 1, migreq : 1;
    uint8_t framing : 2;  /* enum pkt_framing (0: RoCEv2) */
    uint8_t ar_ctx : 1;   /* ib-ar placement context present (ar_msg_psn, RETH fields) */
    uint8_t no_bytes : 1; /* from a pool without payloads: p->payload must not be touched */
    /* Ethernet/IP class of service: the priority (802.1p / DSCP class
     * selector, what PFC pauses and ECN queues are per) and the IP ECN
     * field (0 not ECN-capable, 2 ECT(0), 3 CE: congestion experienced) */
    uint8_t prio : 3, ecn : 2;
    uint8_t kind;           /* enum pkt_kind: a RoCEv2 packet, or a PFC pause frame */
    uint16_t in_port;       /* the switch ingress port it came in on (PFC accounting) */
    uint32_t dest_qpn, psn; /* 24-bit values */
    uint32_t src_qpn;       /* not on the wire for RC; kept for traces/UD */

    sim_time_t t_sent_ps; /* when the NIC handed it to the wire */
    /* Cut-through (docs/fabric.md "Cut-through"): when the frame's first
     * bit was (or could have been) available at the stage that holds it
     * now.  A stage receives the frame when its LAST bit is there (the
     * event), but the next stage may have started on the head earlier: a
     * link that is idle starts serialising at head_ps instead of now, and
     * never finishes before now.  0 = no earlier head: the frame is
     * handled store-and-forward. */
    sim_time_t head_ps;
    uint32_t ext_hdrs;    /* enum pkt_ext_hdr: extension headers present */
    uint32_t payload_len; /* bytes of payload (the frame carries them) */

    uint64_t id; /* unique per simulation, for traces */
    /* PFC pause frame (kind PKT_PFC, IEEE 802.1Qbb): the priorities it names
     * (class-enable vector) and each one's pause time in quanta of 512 bit
     * times (0 = resume) */
    uint8_t pfc_enable;
    uint16_t pfc_quanta[8];
    /* The address vector's routing fields (ibv_ah_attr), for the headers a
     * capture writes (pcap.c) and the GRH a UD receive gets: the GRH hop
     * limit, traffic class and flow label (IB GRH; RoCEv2 has its own IPv4
     * TTL / DSCP), and the InfiniBand service level (LRH SL).  In the
     * padding before the RETH: the packet does not grow. */
    uint8_t grh_hop_limit;
    uint32_t grh_flow_label : 20, grh_tclass : 8, ib_sl : 4;

    /* RETH */
    uint64_t reth_va;
    uint32_t reth_rkey, reth_dma_len;
    /* AETH */
    uint8_t aeth_syndrome;
    uint32_t aeth_msn;
    /* AtomicETH */
    uint64_t atomic_va;
    uint32_t atomic_rkey;
    uint64_t atomic_swap_add, atomic_compare;
    /* AtomicAckETH */
    uint64_t atomic_orig;
    /* DETH (UD): Q_Key; the source QP is src_qpn above */
    uint32_t deth_qkey;
    /* XRCETH (XRC requests): the XRC SRQ at the target that receives the
     * message, 24 bits */
    uint32_t xrc_srqn;
    /* ImmDt (network byte order, as in ibv_send_wr.imm_data) */
    uint32_t imm_data;
    /* IB adaptive routing (nic.transport ib-ar): the PSN of the first
     * packet of this request's message, which with the RETH fields (filled
     * on every ib-ar WRITE packet) lets a responder place a packet that
     * arrives before earlier ones (docs/nic.md "IB adaptive routing").
     * Modelled as carried free: not counted in frame_bytes. */
    uint32_t ar_msg_psn;

    /* The bytes: a buffer of the pool's size class for the payload
     * (pkt_payload_reserve; nic_pkt_address reserves what it addresses),
     * or NULL while the packet carries none, and always NULL in a pool
     * without payloads (scenario `payload: none`: sizes are modelled,
     * contents are not).  Both fields come after the header: code that
     * copies or clears offsetof(struct pkt, payload) bytes copies the
     * headers and leaves each packet its own buffer. */
    uint8_t *payload;
    uint8_t payload_class; /* the buffer's size class + 1 (0: no buffer) */
};

/* Bytes the packet occupies on its link: the frame plus the framing's
 * per-packet gap (Ethernet preamble and IFG, IB delimiters). */
static inline uint32_t pkt_wire_bytes(const struct pkt *p)
{
    return p->frame_bytes + pkt_framings[p->framing].gap_bytes;
}

/* Packet pool (free lists per simulation): packet headers of one size,
 * and payload buffers in size classes (pkt.c), so a packet costs its
 * header plus the smallest class that holds its payload, not the largest
 * MTU (docs/performance.md "What a packet costs"). */
struct pkt_pool;
struct pkt_pool *pkt_pool_create(void);
/* A pool of packets without payload bytes (`payload: none`): packets get
 * no buffer (pkt_payload_reserve returns NULL), and nothing may read or
 * write p->payload. */
struct pkt_pool *pkt_pool_create_headers_only(void);
bool pkt_pool_carries_payload(const struct pkt_pool *pool);
/* Bytes one packet header of the pool occupies (for the memory figures). */
size_t pkt_pool_pkt_bytes(const struct pkt_pool *pool);
/* Packets allocated from the system so far (in use + free). */
uint64_t pkt_pool_allocated(const struct pkt_pool *pool);
/* Bytes of payload buffers allocated from the system so far (in use + free). */
uint64_t pkt_pool_payload_bytes(const struct pkt_pool *pool);
/* Payload bytes a buffer of the class that holds `len` bytes has room
 * for (0 for len 0). */
uint32_t pkt_payload_class_bytes(uint32_t len);
void pkt_pool_destroy(struct pkt_pool *pool);
struct pkt *pkt_alloc(struct pkt_pool *pool); /* zeroed header, payload_len 0, no buffer */
/* Give p room for `len` payload bytes (len <= PKT_MAX_PAYLOAD_BYTES) and
 * return p->payload.  A buffer that already has the room is kept, bytes
 * and all; a smaller one is replaced by one of the right class, keeping
 * its first p->payload_len bytes.  NULL in a pool without payloads, or
 * for len 0 on a packet that has no buffer. */
uint8_t *pkt_payload_reserve(struct pkt_pool *pool, struct pkt *p, uint32_t len);
void pkt_free(struct pkt_pool *pool, struct pkt *p); /* and its buffer */
/* A copy of p (headers, and the payload unless the pool holds none) with
 * its own id; it belongs to no queue and no switch ingress port (in_port 0:
 * the original carries that port's PFC accounting). */
struct pkt *pkt_clone(struct pkt_pool *pool, const struct pkt *p);

#endif /* RNICSIM_PKT_H */
