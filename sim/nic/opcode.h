/* IBA transport opcodes as the NIC sees them: the real opcode numbers
 * (IBA 9.2, Table 38 "OpCode field"; rxe's ib_opcode), which extension
 * headers each one carries, and what it means to the engines.  Protocol
 * facts live in the table (opcode.c), not in branches.
 *
 * Opcode bits 7..5 name the transport (IBA 9.2.1): RC 000, UC 001, UD 011;
 * bits 4..0 the operation, numbered alike in every transport (a UC SEND
 * ONLY is the RC SEND ONLY | 0x20).  UC has SEND and RDMA WRITE only, UD
 * SEND ONLY (with and without immediate) only, both without responses.
 * XRC (101, IBA Annex A14 "Extended Reliable Connected transport") has
 * RC's operations under RC's numbers | 0xa0; its requests carry an XRCETH
 * (the target's XRC SRQ number) right after the BTH, its responses
 * (ACK, READ response, atomic ACK) do not. */
#ifndef RNICSIM_NIC_OPCODE_H
#define RNICSIM_NIC_OPCODE_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>

#include "../pkt.h"

enum ib_opcode {
    IB_OPCODE_RC_SEND_FIRST = 0x00,
    IB_OPCODE_RC_SEND_MIDDLE = 0x01,
    IB_OPCODE_RC_SEND_LAST = 0x02,
    IB_OPCODE_RC_SEND_LAST_WITH_IMMEDIATE = 0x03,
    IB_OPCODE_RC_SEND_ONLY = 0x04,
    IB_OPCODE_RC_SEND_ONLY_WITH_IMMEDIATE = 0x05,
    IB_OPCODE_RC_RDMA_WRITE_FIRST = 0x06,
    IB_OPCODE_RC_RDMA_WRITE_MIDDLE = 0x07,
    IB_OPCODE_RC_RDMA_WRITE_LAST = 0x08,
    IB_OPCODE_RC_RDMA_WRITE_LAST_WITH_IMMEDIATE = 0x09,
    IB_OPCODE_RC_RDMA_WRITE_ONLY = 0x0a,
    IB_OPCODE_RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE = 0x0b,
    IB_OPCODE_RC_RDMA_READ_REQUEST = 0x0c,
    IB_OPCODE_RC_RDMA_READ_RESPONSE_FIRST = 0x0d,
    IB_OPCODE_RC_RDMA_READ_RESPONSE_MIDDLE = 0x0e,
    IB_OPCODE_RC_RDMA_READ_RESPONSE_LAST = 0x0f,
    IB_OPCODE_RC_RDMA_READ_RESPONSE_ONLY = 0x10,
    IB_OPCODE_RC_ACKNOWLEDGE = 0x11,
    IB_OPCODE_RC_ATOMIC_ACKNOWLEDGE = 0x12,
    IB_OPCODE_RC_COMPARE_SWAP = 0x13,
    IB_OPCODE_RC_FETCH_ADD = 0x14,

    IB_OPCODE_UC_SEND_FIRST = 0x20,
    IB_OPCODE_UC_SEND_MIDDLE = 0x21,
    IB_OPCODE_UC_SEND_LAST = 0x22,
    IB_OPCODE_UC_SEND_LAST_WITH_IMMEDIATE = 0x23,
    IB_OPCODE_UC_SEND_ONLY = 0x24,
    IB_OPCODE_UC_SEND_ONLY_WITH_IMMEDIATE = 0x25,
    IB_OPCODE_UC_RDMA_WRITE_FIRST = 0x26,
    IB_OPCODE_UC_RDMA_WRITE_MIDDLE = 0x27,
    IB_OPCODE_UC_RDMA_WRITE_LAST = 0x28,
    IB_OPCODE_UC_RDMA_WRITE_LAST_WITH_IMMEDIATE = 0x29,
    IB_OPCODE_UC_RDMA_WRITE_ONLY = 0x2a,
    IB_OPCODE_UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE = 0x2b,

    IB_OPCODE_XRC_SEND_FIRST = 0xa0,
    IB_OPCODE_XRC_SEND_MIDDLE = 0xa1,
    IB_OPCODE_XRC_SEND_LAST = 0xa2,
    IB_OPCODE_XRC_SEND_LAST_WITH_IMMEDIATE = 0xa3,
    IB_OPCODE_XRC_SEND_ONLY = 0xa4,
    IB_OPCODE_XRC_SEND_ONLY_WITH_IMMEDIATE = 0xa5,
    IB_OPCODE_XRC_RDMA_WRITE_FIRST = 0xa6,
    IB_OPCODE_XRC_RDMA_WRITE_MIDDLE = 0xa7,
    IB_OPCODE_XRC_RDMA_WRITE_LAST = 0xa8,
    IB_OPCODE_XRC_RDMA_WRITE_LAST_WITH_IMMEDIATE = 0xa9,
    IB_OPCODE_XRC_RDMA_WRITE_ONLY = 0xaa,
    IB_OPCODE_XRC_RDMA_WRITE_ONLY_WITH_IMMEDIATE = 0xab,
    IB_OPCODE_XRC_RDMA_READ_REQUEST = 0xac,
    IB_OPCODE_XRC_RDMA_READ_RESPONSE_FIRST = 0xad,
    IB_OPCODE_XRC_RDMA_READ_RESPONSE_MIDDLE = 0xae,
    IB_OPCODE_XRC_RDMA_READ_RESPONSE_LAST = 0xaf,
    IB_OPCODE_XRC_RDMA_READ_RESPONSE_ONLY = 0xb0,
    IB_OPCODE_XRC_ACKNOWLEDGE = 0xb1,
    IB_OPCODE_XRC_ATOMIC_ACKNOWLEDGE = 0xb2,
    IB_OPCODE_XRC_COMPARE_SWAP = 0xb3,
    IB_OPCODE_XRC_FETCH_ADD = 0xb4,

    IB_OPCODE_UD_SEND_ONLY = 0x64,
    IB_OPCODE_UD_SEND_ONLY_WITH_IMMEDIATE = 0x65,

    /* Transport personalities (srd.c, onerma.c), in the IBA's
     * manufacturer-specific range (Table 38: 110xxxxx and 111xxxxx).  The
     * BTH PSN carries the SRD sequence number / the 1RMA op tag; the
     * extension headers are the IBA ones named in the table (opcode.c);
     * docs/nic.md "Transport personalities" describes the encoding. */
    NIC_OPCODE_SRD_SEND_ONLY = 0xc0,
    NIC_OPCODE_SRD_SEND_ONLY_WITH_IMMEDIATE = 0xc1,
    NIC_OPCODE_SRD_READ_REQUEST = 0xc2,
    NIC_OPCODE_SRD_READ_RESPONSE = 0xc3,
    NIC_OPCODE_SRD_ACKNOWLEDGE = 0xc4,
    NIC_OPCODE_ONERMA_READ_REQUEST = 0xe0,
    NIC_OPCODE_ONERMA_READ_RESPONSE = 0xe1,
    NIC_OPCODE_ONERMA_WRITE_REQUEST = 0xe2,  /* request to read: RETH names the target */
    NIC_OPCODE_ONERMA_FETCH_REQUEST = 0xe3,  /* target -> initiator: send the op's data */
    NIC_OPCODE_ONERMA_FETCH_RESPONSE = 0xe4, /* initiator -> target: the data + RETH */
    NIC_OPCODE_ONERMA_WRITE_ACKNOWLEDGE = 0xe5,
    /* RIMA append (aq.c, docs/rima.md): an RC operation in the
     * manufacturer-specific range, carried by RC QPs whatever the NIC's
     * transport personality.  The first (or only) packet carries a
     * RETH-format header: R_Key = the AQ number, DMA Length = the
     * message's total length, VA = 0 (reserved). */
    NIC_OPCODE_RIMA_APPEND_FIRST = 0xd0,
    NIC_OPCODE_RIMA_APPEND_MIDDLE = 0xd1,
    NIC_OPCODE_RIMA_APPEND_LAST = 0xd2,
    NIC_OPCODE_RIMA_APPEND_ONLY = 0xd3,
};

/* Transport prefixes (opcode bits 7..5, IBA Table 38). */
enum ib_opcode_transport {
    IB_OPCODE_RC = 0x00,
    IB_OPCODE_UC = 0x20,
    IB_OPCODE_UD = 0x60,
    IB_OPCODE_XRC = 0xa0,
    IB_OPCODE_TRANSPORT_MASK = 0xe0,
};

/* Per-opcode mask bits (rxe's RXE_*_MASK, same idea). */
enum nic_opf {
    /* extension headers after the BTH (IBA 9.3) */
    NIC_OPF_RETH = 1u << 0,   /* RDMA extended transport header, 16 B */
    NIC_OPF_AETH = 1u << 1,   /* ACK extended transport header, 4 B */
    NIC_OPF_ATMETH = 1u << 2, /* AtomicETH, 28 B */
    NIC_OPF_ATMACK = 1u << 3, /* AtomicAckETH, 8 B */
    NIC_OPF_IMMDT = 1u << 4,  /* immediate data, 4 B */
    NIC_OPF_DETH = 1u << 5,   /* datagram extended transport header (UD), 8 B */
    /* the extension-header bits equal enum pkt_ext_hdr (sim/pkt.h) */
    NIC_OPF_EXT_HDRS = NIC_OPF_RETH | NIC_OPF_AETH | NIC_OPF_ATMETH | NIC_OPF_ATMACK |
                       NIC_OPF_IMMDT | NIC_OPF_DETH | (1u << 20) /* NIC_OPF_XRCETH */,
    NIC_OPF_PAYLOAD = 1u << 6, /* may carry payload */
    /* direction */
    NIC_OPF_REQ = 1u << 7,  /* requester -> responder */
    NIC_OPF_RESP = 1u << 8, /* responder -> requester (ACK, read response, atomic ACK) */
    /* operation */
    NIC_OPF_SEND = 1u << 9,
    NIC_OPF_WRITE = 1u << 10,
    NIC_OPF_READ = 1u << 11,   /* read request or read response */
    NIC_OPF_ATOMIC = 1u << 12, /* CmpSwap / FetchAdd request */
    NIC_OPF_ACK = 1u << 13,    /* ACKNOWLEDGE */
    NIC_OPF_ATOMIC_ACK = 1u << 14,
    /* position of the packet in its message */
    NIC_OPF_FIRST = 1u << 15,
    NIC_OPF_MIDDLE = 1u << 16,
    NIC_OPF_LAST = 1u << 17,
    NIC_OPF_ONLY = NIC_OPF_FIRST | NIC_OPF_LAST,
    /* responder semantics */
    NIC_OPF_RWR = 1u << 18,    /* consumes a receive WQE (SEND*, WRITE with immediate) */
    NIC_OPF_APPEND = 1u << 19, /* RIMA append: placed at the AQ's tail (aq.c) */
    NIC_OPF_XRCETH = 1u << 20, /* XRC extended transport header, 4 B (= PKT_EXT_XRCETH) */
};

struct nic_opcode_info {
    const char *name;   /* NULL: not a valid opcode */
    uint32_t mask;      /* enum nic_opf */
    uint16_t hdr_bytes; /* BTH + extension headers (no Eth/IP/UDP, no ICRC) */
};

extern const struct nic_opcode_info nic_opcodes[256];

static inline const struct nic_opcode_info *nic_opcode(uint8_t op)
{
    return &nic_opcodes[op];
}
static inline bool nic_opcode_valid(uint8_t op)
{
    return nic_opcodes[op].name != NULL;
}

/* A RIMA append opcode (0xd0..0xd3): RC, not a personality's. */
static inline bool nic_opcode_rima(uint8_t op)
{
    return op >= NIC_OPCODE_RIMA_APPEND_FIRST && op <= NIC_OPCODE_RIMA_APPEND_ONLY;
}

/* An opcode of the XRC transport (0xa0..0xb4). */
static inline bool nic_opcode_xrc(uint8_t op)
{
    return (op & IB_OPCODE_TRANSPORT_MASK) == IB_OPCODE_XRC;
}

/* The RC operation an RC or XRC opcode stands for (XRC = RC | 0xa0). */
static inline uint8_t nic_opcode_rc_op(uint8_t op)
{
    return nic_opcode_xrc(op) ? (uint8_t)(op & ~IB_OPCODE_TRANSPORT_MASK) : op;
}

/* The QP type whose packets carry opcode `op` (RC, UC or UD; -1: none).
 * XRC opcodes answer RC: the NIC runs XRC initiator and target QPs on its
 * RC engines (nic_qp.xrc says which side), rx checks the transport bits. */
static inline int nic_opcode_qp_type(uint8_t op)
{
    if (nic_opcode_rima(op))
        return IBV_QPT_RC;
    switch (op & IB_OPCODE_TRANSPORT_MASK) {
    case IB_OPCODE_RC:
    case IB_OPCODE_XRC:
        return IBV_QPT_RC;
    case IB_OPCODE_UC:
        return IBV_QPT_UC;
    case IB_OPCODE_UD:
        return IBV_QPT_UD;
    default:
        return -1;
    }
}

/* A manufacturer-specific opcode (IBA Table 38, 0xc0..0xff) of the EFA
 * SRD and 1RMA personalities (the RIMA appends are RC's). */
static inline bool nic_opcode_personality(uint8_t op)
{
    return op >= NIC_OPCODE_SRD_SEND_ONLY && !nic_opcode_rima(op);
}

/* Bytes of the extension headers named by `mask`. */
uint32_t nic_ext_hdr_bytes(uint32_t mask);

/* Bytes of a packet framed as `f` (sim/pkt.h): the framing's headers (RoCEv2:
 * Eth 14 + IPv4 20 + UDP 8; IB: LRH 8, + GRH 40 if global) + BTH 12 +
 * extension headers + payload + pad to 4 B (BTH PadCnt, IBA 9.2.2.3) +
 * ICRC 4 + the framing's trailer (RoCEv2: FCS 4; IB: VCRC 2), at least the
 * framing's minimum (Ethernet 64 B). */
uint32_t nic_frame_bytes(enum pkt_framing f, uint8_t opcode, uint32_t payload_len);

/* Requester opcode of packet `pos` of a message of verb `wr` on an RC QP:
 * pos is NIC_OPF_FIRST, NIC_OPF_MIDDLE, NIC_OPF_LAST or NIC_OPF_ONLY.
 * Returns -1 for a verb/position pair that has no RC opcode. */
int nic_req_opcode(enum ibv_wr_opcode wr, uint32_t pos);
/* The same for a QP of type `qpt` (RC, UC, UD): the RC operation in the
 * transport's group, if the table has that opcode; else -1 (a UC READ, a
 * multi-packet UD SEND, ...). */
int nic_req_opcode_qpt(enum ibv_qp_type qpt, enum ibv_wr_opcode wr, uint32_t pos);

/* Read-response opcode of packet `pos` (FIRST, MIDDLE, LAST, ONLY). */
uint8_t nic_read_resp_opcode(uint32_t pos);

/* Position bits (FIRST/MIDDLE/LAST/ONLY) of packet k of n. */
static inline uint32_t nic_pkt_pos(uint32_t k, uint32_t n)
{
    if (n <= 1)
        return NIC_OPF_ONLY;
    if (k == 0)
        return NIC_OPF_FIRST;
    return k + 1 == n ? NIC_OPF_LAST : NIC_OPF_MIDDLE;
}

/* AETH syndromes (IBA 9.7.5.2.1, Table 43): bits 6..5 say ACK / RNR NAK /
 * NAK; the low five bits carry the credit count, the RNR timer code or the
 * NAK code. */
enum nic_aeth {
    NIC_AETH_ACK = 0x1f,         /* ACK, end-to-end credits invalid (no credit flow) */
    NIC_AETH_RNR_NAK = 0x20,     /* | RNR timer code (5 bits) */
    NIC_AETH_NAK_PSN_SEQ = 0x60, /* PSN sequence error */
    NIC_AETH_NAK_INV_REQ = 0x61, /* invalid request */
    NIC_AETH_NAK_REM_ACC = 0x62, /* remote access error */
    NIC_AETH_NAK_REM_OP = 0x63,  /* remote operational error */
    NIC_AETH_NAK_INV_RD = 0x64,  /* invalid RD request */
    NIC_AETH_TYPE_MASK = 0x60,
};

/* RNR timer code (5 bits) -> time, IBA 9.7.5.2.8 Table 45. */
uint64_t nic_rnr_timer_ps(uint8_t code);

/* PSNs are 24-bit serial numbers. */
#define NIC_PSN_MASK 0xffffffu
static inline uint32_t nic_psn_add(uint32_t psn, uint32_t n)
{
    return (psn + n) & NIC_PSN_MASK;
}
/* a - b as a signed 24-bit distance */
static inline int32_t nic_psn_diff(uint32_t a, uint32_t b)
{
    int32_t d = (int32_t)((a - b) & NIC_PSN_MASK);
    return (d & 0x800000) ? d - 0x1000000 : d;
}

/* The name of a work request opcode (IBV_WR_RDMA_WRITE -> "RDMA_WRITE"),
 * NULL for a value verbs.h does not define.  Inline: the emulation
 * library's post path uses it without the NIC model. */
static inline const char *nic_wr_opcode_name(unsigned op)
{
    static const char *const n[] = {
        [IBV_WR_RDMA_WRITE] = "RDMA_WRITE",
        [IBV_WR_RDMA_WRITE_WITH_IMM] = "RDMA_WRITE_WITH_IMM",
        [IBV_WR_SEND] = "SEND",
        [IBV_WR_SEND_WITH_IMM] = "SEND_WITH_IMM",
        [IBV_WR_RDMA_READ] = "RDMA_READ",
        [IBV_WR_ATOMIC_CMP_AND_SWP] = "ATOMIC_CMP_AND_SWP",
        [IBV_WR_ATOMIC_FETCH_AND_ADD] = "ATOMIC_FETCH_AND_ADD",
        [IBV_WR_LOCAL_INV] = "LOCAL_INV",
        [IBV_WR_BIND_MW] = "BIND_MW",
        [IBV_WR_SEND_WITH_INV] = "SEND_WITH_INV",
        [IBV_WR_TSO] = "TSO",
        [IBV_WR_DRIVER1] = "DRIVER1",
    };
    return op < sizeof(n) / sizeof(n[0]) ? n[op] : NULL;
}

/* Path MTU enum -> bytes (IBV_MTU_256 .. IBV_MTU_4096; anything else 256). */
static inline uint32_t nic_mtu_bytes(enum ibv_mtu mtu)
{
    return mtu >= IBV_MTU_256 && mtu <= IBV_MTU_4096 ? 128u << mtu : 256u;
}

#endif /* RNICSIM_NIC_OPCODE_H */
