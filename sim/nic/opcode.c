/* The IBA opcode table (see opcode.h).  Opcode numbers: IBA 9.2 Table 38;
 * headers per opcode: IBA 9.3 ("the following headers are present");
 * header sizes: IBA Annex 17 / CALIBRATION.md "Transports" (RoCEv2). */
#include "opcode.h"

#include <rnicsim/rima.h>

_Static_assert((unsigned)NIC_OPF_RETH == (unsigned)PKT_EXT_RETH &&
                   (unsigned)NIC_OPF_AETH == (unsigned)PKT_EXT_AETH &&
                   (unsigned)NIC_OPF_ATMETH == (unsigned)PKT_EXT_ATMETH &&
                   (unsigned)NIC_OPF_ATMACK == (unsigned)PKT_EXT_ATMACK &&
                   (unsigned)NIC_OPF_IMMDT == (unsigned)PKT_EXT_IMMDT &&
                   (unsigned)NIC_OPF_DETH == (unsigned)PKT_EXT_DETH &&
                   (unsigned)NIC_OPF_XRCETH == (unsigned)PKT_EXT_XRCETH &&
                   ((unsigned)NIC_OPF_EXT_HDRS & (unsigned)NIC_OPF_XRCETH) != 0,
               "extension-header bits must match sim/pkt.h");

#define HDR(m)                                                                                     \
    (PKT_BTH_BYTES + (((m)&NIC_OPF_XRCETH) ? PKT_XRCETH_BYTES : 0) +                               \
     (((m)&NIC_OPF_DETH) ? PKT_DETH_BYTES : 0) + (((m)&NIC_OPF_RETH) ? PKT_RETH_BYTES : 0) +       \
     (((m)&NIC_OPF_AETH) ? PKT_AETH_BYTES : 0) +                                                   \
     (((m)&NIC_OPF_ATMETH) ? PKT_ATOMICETH_BYTES : 0) +                                            \
     (((m)&NIC_OPF_ATMACK) ? PKT_ATOMICACKETH_BYTES : 0) +                                         \
     (((m)&NIC_OPF_IMMDT) ? PKT_IMMDT_BYTES : 0))

#define OP(n, m)                                                                                   \
    {                                                                                              \
        .name = (n), .mask = (m), .hdr_bytes = HDR(m)                                              \
    }

/* An XRC opcode: its RC twin's flags, plus the XRCETH on requests. */
#define XOP(n, m) OP(n, (m) | (((m)&NIC_OPF_REQ) ? NIC_OPF_XRCETH : 0))

#define RQ NIC_OPF_REQ
#define RS NIC_OPF_RESP
#define PL NIC_OPF_PAYLOAD

const struct nic_opcode_info nic_opcodes[256] = {
    [IB_OPCODE_RC_SEND_FIRST] =
        OP("RC_SEND_FIRST", RQ | NIC_OPF_SEND | NIC_OPF_FIRST | PL | NIC_OPF_RWR),
    [IB_OPCODE_RC_SEND_MIDDLE] =
        OP("RC_SEND_MIDDLE", RQ | NIC_OPF_SEND | NIC_OPF_MIDDLE | PL | NIC_OPF_RWR),
    [IB_OPCODE_RC_SEND_LAST] =
        OP("RC_SEND_LAST", RQ | NIC_OPF_SEND | NIC_OPF_LAST | PL | NIC_OPF_RWR),
    [IB_OPCODE_RC_SEND_LAST_WITH_IMMEDIATE] =
        OP("RC_SEND_LAST_WITH_IMMEDIATE",
           RQ | NIC_OPF_SEND | NIC_OPF_LAST | PL | NIC_OPF_RWR | NIC_OPF_IMMDT),
    [IB_OPCODE_RC_SEND_ONLY] =
        OP("RC_SEND_ONLY", RQ | NIC_OPF_SEND | NIC_OPF_ONLY | PL | NIC_OPF_RWR),
    [IB_OPCODE_RC_SEND_ONLY_WITH_IMMEDIATE] =
        OP("RC_SEND_ONLY_WITH_IMMEDIATE",
           RQ | NIC_OPF_SEND | NIC_OPF_ONLY | PL | NIC_OPF_RWR | NIC_OPF_IMMDT),
    [IB_OPCODE_RC_RDMA_WRITE_FIRST] =
        OP("RC_RDMA_WRITE_FIRST", RQ | NIC_OPF_WRITE | NIC_OPF_FIRST | PL | NIC_OPF_RETH),
    [IB_OPCODE_RC_RDMA_WRITE_MIDDLE] =
        OP("RC_RDMA_WRITE_MIDDLE", RQ | NIC_OPF_WRITE | NIC_OPF_MIDDLE | PL),
    [IB_OPCODE_RC_RDMA_WRITE_LAST] =
        OP("RC_RDMA_WRITE_LAST", RQ | NIC_OPF_WRITE | NIC_OPF_LAST | PL),
    [IB_OPCODE_RC_RDMA_WRITE_LAST_WITH_IMMEDIATE] =
        OP("RC_RDMA_WRITE_LAST_WITH_IMMEDIATE",
           RQ | NIC_OPF_WRITE | NIC_OPF_LAST | PL | NIC_OPF_IMMDT | NIC_OPF_RWR),
    [IB_OPCODE_RC_RDMA_WRITE_ONLY] =
        OP("RC_RDMA_WRITE_ONLY", RQ | NIC_OPF_WRITE | NIC_OPF_ONLY | PL | NIC_OPF_RETH),
    [IB_OPCODE_RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE] =
        OP("RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE",
           RQ | NIC_OPF_WRITE | NIC_OPF_ONLY | PL | NIC_OPF_RETH | NIC_OPF_IMMDT | NIC_OPF_RWR),
    [IB_OPCODE_RC_RDMA_READ_REQUEST] =
        OP("RC_RDMA_READ_REQUEST", RQ | NIC_OPF_READ | NIC_OPF_ONLY | NIC_OPF_RETH),
    [IB_OPCODE_RC_RDMA_READ_RESPONSE_FIRST] =
        OP("RC_RDMA_READ_RESPONSE_FIRST", RS | NIC_OPF_READ | NIC_OPF_FIRST | PL | NIC_OPF_AETH),
    [IB_OPCODE_RC_RDMA_READ_RESPONSE_MIDDLE] =
        OP("RC_RDMA_READ_RESPONSE_MIDDLE", RS | NIC_OPF_READ | NIC_OPF_MIDDLE | PL),
    [IB_OPCODE_RC_RDMA_READ_RESPONSE_LAST] =
        OP("RC_RDMA_READ_RESPONSE_LAST", RS | NIC_OPF_READ | NIC_OPF_LAST | PL | NIC_OPF_AETH),
    [IB_OPCODE_RC_RDMA_READ_RESPONSE_ONLY] =
        OP("RC_RDMA_READ_RESPONSE_ONLY", RS | NIC_OPF_READ | NIC_OPF_ONLY | PL | NIC_OPF_AETH),
    [IB_OPCODE_RC_ACKNOWLEDGE] =
        OP("RC_ACKNOWLEDGE", RS | NIC_OPF_ACK | NIC_OPF_ONLY | NIC_OPF_AETH),
    [IB_OPCODE_RC_ATOMIC_ACKNOWLEDGE] =
        OP("RC_ATOMIC_ACKNOWLEDGE",
           RS | NIC_OPF_ATOMIC_ACK | NIC_OPF_ONLY | NIC_OPF_AETH | NIC_OPF_ATMACK),
    [IB_OPCODE_RC_COMPARE_SWAP] =
        OP("RC_COMPARE_SWAP", RQ | NIC_OPF_ATOMIC | NIC_OPF_ONLY | NIC_OPF_ATMETH),
    [IB_OPCODE_RC_FETCH_ADD] =
        OP("RC_FETCH_ADD", RQ | NIC_OPF_ATOMIC | NIC_OPF_ONLY | NIC_OPF_ATMETH),

    /* UC (IBA 9.2 Table 38, 001xxxxx): SEND and RDMA WRITE, same headers */
    [IB_OPCODE_UC_SEND_FIRST] =
        OP("UC_SEND_FIRST", RQ | NIC_OPF_SEND | NIC_OPF_FIRST | PL | NIC_OPF_RWR),
    [IB_OPCODE_UC_SEND_MIDDLE] =
        OP("UC_SEND_MIDDLE", RQ | NIC_OPF_SEND | NIC_OPF_MIDDLE | PL | NIC_OPF_RWR),
    [IB_OPCODE_UC_SEND_LAST] =
        OP("UC_SEND_LAST", RQ | NIC_OPF_SEND | NIC_OPF_LAST | PL | NIC_OPF_RWR),
    [IB_OPCODE_UC_SEND_LAST_WITH_IMMEDIATE] =
        OP("UC_SEND_LAST_WITH_IMMEDIATE",
           RQ | NIC_OPF_SEND | NIC_OPF_LAST | PL | NIC_OPF_RWR | NIC_OPF_IMMDT),
    [IB_OPCODE_UC_SEND_ONLY] =
        OP("UC_SEND_ONLY", RQ | NIC_OPF_SEND | NIC_OPF_ONLY | PL | NIC_OPF_RWR),
    [IB_OPCODE_UC_SEND_ONLY_WITH_IMMEDIATE] =
        OP("UC_SEND_ONLY_WITH_IMMEDIATE",
           RQ | NIC_OPF_SEND | NIC_OPF_ONLY | PL | NIC_OPF_RWR | NIC_OPF_IMMDT),
    [IB_OPCODE_UC_RDMA_WRITE_FIRST] =
        OP("UC_RDMA_WRITE_FIRST", RQ | NIC_OPF_WRITE | NIC_OPF_FIRST | PL | NIC_OPF_RETH),
    [IB_OPCODE_UC_RDMA_WRITE_MIDDLE] =
        OP("UC_RDMA_WRITE_MIDDLE", RQ | NIC_OPF_WRITE | NIC_OPF_MIDDLE | PL),
    [IB_OPCODE_UC_RDMA_WRITE_LAST] =
        OP("UC_RDMA_WRITE_LAST", RQ | NIC_OPF_WRITE | NIC_OPF_LAST | PL),
    [IB_OPCODE_UC_RDMA_WRITE_LAST_WITH_IMMEDIATE] =
        OP("UC_RDMA_WRITE_LAST_WITH_IMMEDIATE",
           RQ | NIC_OPF_WRITE | NIC_OPF_LAST | PL | NIC_OPF_IMMDT | NIC_OPF_RWR),
    [IB_OPCODE_UC_RDMA_WRITE_ONLY] =
        OP("UC_RDMA_WRITE_ONLY", RQ | NIC_OPF_WRITE | NIC_OPF_ONLY | PL | NIC_OPF_RETH),
    [IB_OPCODE_UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE] =
        OP("UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE",
           RQ | NIC_OPF_WRITE | NIC_OPF_ONLY | PL | NIC_OPF_RETH | NIC_OPF_IMMDT | NIC_OPF_RWR),

    /* XRC (101xxxxx, IBA Annex A14): RC's operations; every request
     * carries the XRCETH (XOP adds it to requests), responses do not */
    [IB_OPCODE_XRC_SEND_FIRST] =
        XOP("XRC_SEND_FIRST", RQ | NIC_OPF_SEND | NIC_OPF_FIRST | PL | NIC_OPF_RWR),
    [IB_OPCODE_XRC_SEND_MIDDLE] =
        XOP("XRC_SEND_MIDDLE", RQ | NIC_OPF_SEND | NIC_OPF_MIDDLE | PL | NIC_OPF_RWR),
    [IB_OPCODE_XRC_SEND_LAST] =
        XOP("XRC_SEND_LAST", RQ | NIC_OPF_SEND | NIC_OPF_LAST | PL | NIC_OPF_RWR),
    [IB_OPCODE_XRC_SEND_LAST_WITH_IMMEDIATE] =
        XOP("XRC_SEND_LAST_WITH_IMMEDIATE",
            RQ | NIC_OPF_SEND | NIC_OPF_LAST | PL | NIC_OPF_RWR | NIC_OPF_IMMDT),
    [IB_OPCODE_XRC_SEND_ONLY] =
        XOP("XRC_SEND_ONLY", RQ | NIC_OPF_SEND | NIC_OPF_ONLY | PL | NIC_OPF_RWR),
    [IB_OPCODE_XRC_SEND_ONLY_WITH_IMMEDIATE] =
        XOP("XRC_SEND_ONLY_WITH_IMMEDIATE",
            RQ | NIC_OPF_SEND | NIC_OPF_ONLY | PL | NIC_OPF_RWR | NIC_OPF_IMMDT),
    [IB_OPCODE_XRC_RDMA_WRITE_FIRST] =
        XOP("XRC_RDMA_WRITE_FIRST", RQ | NIC_OPF_WRITE | NIC_OPF_FIRST | PL | NIC_OPF_RETH),
    [IB_OPCODE_XRC_RDMA_WRITE_MIDDLE] =
        XOP("XRC_RDMA_WRITE_MIDDLE", RQ | NIC_OPF_WRITE | NIC_OPF_MIDDLE | PL),
    [IB_OPCODE_XRC_RDMA_WRITE_LAST] =
        XOP("XRC_RDMA_WRITE_LAST", RQ | NIC_OPF_WRITE | NIC_OPF_LAST | PL),
    [IB_OPCODE_XRC_RDMA_WRITE_LAST_WITH_IMMEDIATE] =
        XOP("XRC_RDMA_WRITE_LAST_WITH_IMMEDIATE",
            RQ | NIC_OPF_WRITE | NIC_OPF_LAST | PL | NIC_OPF_IMMDT | NIC_OPF_RWR),
    [IB_OPCODE_XRC_RDMA_WRITE_ONLY] =
        XOP("XRC_RDMA_WRITE_ONLY", RQ | NIC_OPF_WRITE | NIC_OPF_ONLY | PL | NIC_OPF_RETH),
    [IB_OPCODE_XRC_RDMA_WRITE_ONLY_WITH_IMMEDIATE] =
        XOP("XRC_RDMA_WRITE_ONLY_WITH_IMMEDIATE",
            RQ | NIC_OPF_WRITE | NIC_OPF_ONLY | PL | NIC_OPF_RETH | NIC_OPF_IMMDT | NIC_OPF_RWR),
    [IB_OPCODE_XRC_RDMA_READ_REQUEST] =
        XOP("XRC_RDMA_READ_REQUEST", RQ | NIC_OPF_READ | NIC_OPF_ONLY | NIC_OPF_RETH),
    [IB_OPCODE_XRC_RDMA_READ_RESPONSE_FIRST] =
        XOP("XRC_RDMA_READ_RESPONSE_FIRST", RS | NIC_OPF_READ | NIC_OPF_FIRST | PL | NIC_OPF_AETH),
    [IB_OPCODE_XRC_RDMA_READ_RESPONSE_MIDDLE] =
        XOP("XRC_RDMA_READ_RESPONSE_MIDDLE", RS | NIC_OPF_READ | NIC_OPF_MIDDLE | PL),
    [IB_OPCODE_XRC_RDMA_READ_RESPONSE_LAST] =
        XOP("XRC_RDMA_READ_RESPONSE_LAST", RS | NIC_OPF_READ | NIC_OPF_LAST | PL | NIC_OPF_AETH),
    [IB_OPCODE_XRC_RDMA_READ_RESPONSE_ONLY] =
        XOP("XRC_RDMA_READ_RESPONSE_ONLY", RS | NIC_OPF_READ | NIC_OPF_ONLY | PL | NIC_OPF_AETH),
    [IB_OPCODE_XRC_ACKNOWLEDGE] =
        XOP("XRC_ACKNOWLEDGE", RS | NIC_OPF_ACK | NIC_OPF_ONLY | NIC_OPF_AETH),
    [IB_OPCODE_XRC_ATOMIC_ACKNOWLEDGE] =
        XOP("XRC_ATOMIC_ACKNOWLEDGE",
            RS | NIC_OPF_ATOMIC_ACK | NIC_OPF_ONLY | NIC_OPF_AETH | NIC_OPF_ATMACK),
    [IB_OPCODE_XRC_COMPARE_SWAP] =
        XOP("XRC_COMPARE_SWAP", RQ | NIC_OPF_ATOMIC | NIC_OPF_ONLY | NIC_OPF_ATMETH),
    [IB_OPCODE_XRC_FETCH_ADD] =
        XOP("XRC_FETCH_ADD", RQ | NIC_OPF_ATOMIC | NIC_OPF_ONLY | NIC_OPF_ATMETH),

    /* UD (011xxxxx): SEND ONLY with a DETH (Q_Key, source QP) */
    [IB_OPCODE_UD_SEND_ONLY] =
        OP("UD_SEND_ONLY", RQ | NIC_OPF_SEND | NIC_OPF_ONLY | PL | NIC_OPF_RWR | NIC_OPF_DETH),
    [IB_OPCODE_UD_SEND_ONLY_WITH_IMMEDIATE] =
        OP("UD_SEND_ONLY_WITH_IMMEDIATE",
           RQ | NIC_OPF_SEND | NIC_OPF_ONLY | PL | NIC_OPF_RWR | NIC_OPF_DETH | NIC_OPF_IMMDT),

    /* Personalities (opcode.h; docs/nic.md "Transport personalities"):
     * single-packet messages only.  RQ = handled by the target of the
     * operation, RS = by its initiator. */
    /* AWS EFA SRD: SEND and READ (Taranov et al. Table 1), per-packet ACKs */
    [NIC_OPCODE_SRD_SEND_ONLY] =
        OP("SRD_SEND_ONLY", RQ | NIC_OPF_SEND | NIC_OPF_ONLY | PL | NIC_OPF_RWR),
    [NIC_OPCODE_SRD_SEND_ONLY_WITH_IMMEDIATE] =
        OP("SRD_SEND_ONLY_WITH_IMMEDIATE",
           RQ | NIC_OPF_SEND | NIC_OPF_ONLY | PL | NIC_OPF_RWR | NIC_OPF_IMMDT),
    [NIC_OPCODE_SRD_READ_REQUEST] =
        OP("SRD_READ_REQUEST", RQ | NIC_OPF_READ | NIC_OPF_ONLY | NIC_OPF_RETH),
    [NIC_OPCODE_SRD_READ_RESPONSE] =
        OP("SRD_READ_RESPONSE", RS | NIC_OPF_READ | NIC_OPF_ONLY | PL | NIC_OPF_AETH),
    [NIC_OPCODE_SRD_ACKNOWLEDGE] =
        OP("SRD_ACKNOWLEDGE", RS | NIC_OPF_ACK | NIC_OPF_ONLY | NIC_OPF_AETH),
    /* Google 1RMA: READ; WRITE as a request to read (two round trips) */
    [NIC_OPCODE_ONERMA_READ_REQUEST] =
        OP("1RMA_READ_REQUEST", RQ | NIC_OPF_READ | NIC_OPF_ONLY | NIC_OPF_RETH),
    [NIC_OPCODE_ONERMA_READ_RESPONSE] =
        OP("1RMA_READ_RESPONSE", RS | NIC_OPF_READ | NIC_OPF_ONLY | PL | NIC_OPF_AETH),
    [NIC_OPCODE_ONERMA_WRITE_REQUEST] =
        OP("1RMA_WRITE_REQUEST", RQ | NIC_OPF_WRITE | NIC_OPF_ONLY | NIC_OPF_RETH),
    [NIC_OPCODE_ONERMA_FETCH_REQUEST] = OP("1RMA_FETCH_REQUEST", RS | NIC_OPF_READ | NIC_OPF_ONLY),
    [NIC_OPCODE_ONERMA_FETCH_RESPONSE] =
        OP("1RMA_FETCH_RESPONSE", RQ | NIC_OPF_WRITE | NIC_OPF_ONLY | PL | NIC_OPF_RETH),
    [NIC_OPCODE_ONERMA_WRITE_ACKNOWLEDGE] =
        OP("1RMA_WRITE_ACKNOWLEDGE", RS | NIC_OPF_ACK | NIC_OPF_ONLY | NIC_OPF_AETH),

    /* RIMA append (docs/rima.md): segmented like SEND; the first packet
     * names the AQ and the message length in a RETH-format header (Xue et
     * al. 3.2: "messages arrive with message size and queue-id in the
     * packet header"); no receive WQE is consumed */
    [NIC_OPCODE_RIMA_APPEND_FIRST] =
        OP("RIMA_APPEND_FIRST", RQ | NIC_OPF_APPEND | NIC_OPF_FIRST | PL | NIC_OPF_RETH),
    [NIC_OPCODE_RIMA_APPEND_MIDDLE] =
        OP("RIMA_APPEND_MIDDLE", RQ | NIC_OPF_APPEND | NIC_OPF_MIDDLE | PL),
    [NIC_OPCODE_RIMA_APPEND_LAST] = OP("RIMA_APPEND_LAST", RQ | NIC_OPF_APPEND | NIC_OPF_LAST | PL),
    [NIC_OPCODE_RIMA_APPEND_ONLY] =
        OP("RIMA_APPEND_ONLY", RQ | NIC_OPF_APPEND | NIC_OPF_ONLY | PL | NIC_OPF_RETH),
};

uint32_t nic_ext_hdr_bytes(uint32_t mask)
{
    return HDR(mask) - PKT_BTH_BYTES;
}

uint32_t nic_frame_bytes(enum pkt_framing f, uint8_t opcode, uint32_t payload_len)
{
    uint32_t pad = (4u - (payload_len & 3u)) & 3u;
    return pkt_framed_bytes(f, nic_opcodes[opcode].hdr_bytes + payload_len + pad + PKT_ICRC_BYTES);
}

/* Requester opcodes by verb and position; -1 = none.  Index 0..3 =
 * FIRST, MIDDLE, LAST, ONLY. */
enum { POS_FIRST, POS_MIDDLE, POS_LAST, POS_ONLY, POS_N };

static const int16_t req_opcodes[][POS_N] = {
    [IBV_WR_SEND] = {IB_OPCODE_RC_SEND_FIRST, IB_OPCODE_RC_SEND_MIDDLE, IB_OPCODE_RC_SEND_LAST,
                     IB_OPCODE_RC_SEND_ONLY},
    [IBV_WR_SEND_WITH_IMM] = {IB_OPCODE_RC_SEND_FIRST, IB_OPCODE_RC_SEND_MIDDLE,
                              IB_OPCODE_RC_SEND_LAST_WITH_IMMEDIATE,
                              IB_OPCODE_RC_SEND_ONLY_WITH_IMMEDIATE},
    [IBV_WR_RDMA_WRITE] = {IB_OPCODE_RC_RDMA_WRITE_FIRST, IB_OPCODE_RC_RDMA_WRITE_MIDDLE,
                           IB_OPCODE_RC_RDMA_WRITE_LAST, IB_OPCODE_RC_RDMA_WRITE_ONLY},
    [IBV_WR_RDMA_WRITE_WITH_IMM] = {IB_OPCODE_RC_RDMA_WRITE_FIRST, IB_OPCODE_RC_RDMA_WRITE_MIDDLE,
                                    IB_OPCODE_RC_RDMA_WRITE_LAST_WITH_IMMEDIATE,
                                    IB_OPCODE_RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE},
    [IBV_WR_RDMA_READ] = {-1, -1, -1, IB_OPCODE_RC_RDMA_READ_REQUEST},
    [IBV_WR_ATOMIC_CMP_AND_SWP] = {-1, -1, -1, IB_OPCODE_RC_COMPARE_SWAP},
    [IBV_WR_ATOMIC_FETCH_AND_ADD] = {-1, -1, -1, IB_OPCODE_RC_FETCH_ADD},
};

static int pos_index(uint32_t pos)
{
    switch (pos & NIC_OPF_ONLY) {
    case NIC_OPF_ONLY:
        return (pos & NIC_OPF_MIDDLE) ? -1 : POS_ONLY;
    case NIC_OPF_FIRST:
        return POS_FIRST;
    case NIC_OPF_LAST:
        return POS_LAST;
    default:
        return (pos & NIC_OPF_MIDDLE) ? POS_MIDDLE : -1;
    }
}

/* RIMA append (IBV_WR_APPEND = 0x40 is outside the table's verb range). */
static const int16_t append_opcodes[POS_N] = {
    NIC_OPCODE_RIMA_APPEND_FIRST, NIC_OPCODE_RIMA_APPEND_MIDDLE, NIC_OPCODE_RIMA_APPEND_LAST,
    NIC_OPCODE_RIMA_APPEND_ONLY};

int nic_req_opcode(enum ibv_wr_opcode wr, uint32_t pos)
{
    int i = pos_index(pos);
    if ((unsigned)wr == (unsigned)IBV_WR_APPEND)
        return i < 0 ? -1 : append_opcodes[i];
    if (i < 0 || (unsigned)wr >= sizeof(req_opcodes) / sizeof(req_opcodes[0]))
        return -1;
    int op = req_opcodes[wr][i];
    /* entries of verbs absent from the table are zero-filled rows: only
     * SEND/SEND_IMM legitimately map to opcode 0 (SEND_FIRST) */
    if (op == 0 && wr != IBV_WR_SEND && wr != IBV_WR_SEND_WITH_IMM)
        return -1;
    return op;
}

int nic_req_opcode_qpt(enum ibv_qp_type qpt, enum ibv_wr_opcode wr, uint32_t pos)
{
    int op = nic_req_opcode(wr, pos);
    if (op < 0 || qpt == IBV_QPT_RC)
        return qpt == IBV_QPT_RC ? op : -1;
    if (nic_opcode_rima((uint8_t)op))
        return -1; /* appends are RC only */
    unsigned prefix;
    switch (qpt) {
    case IBV_QPT_UC:
        prefix = IB_OPCODE_UC;
        break;
    case IBV_QPT_UD:
        prefix = IB_OPCODE_UD;
        break;
    default:
        return -1;
    }
    uint8_t t = (uint8_t)((unsigned)op | prefix);
    return nic_opcode_valid(t) ? t : -1;
}

uint8_t nic_read_resp_opcode(uint32_t pos)
{
    static const uint8_t ops[POS_N] = {
        [POS_FIRST] = IB_OPCODE_RC_RDMA_READ_RESPONSE_FIRST,
        [POS_MIDDLE] = IB_OPCODE_RC_RDMA_READ_RESPONSE_MIDDLE,
        [POS_LAST] = IB_OPCODE_RC_RDMA_READ_RESPONSE_LAST,
        [POS_ONLY] = IB_OPCODE_RC_RDMA_READ_RESPONSE_ONLY,
    };
    int i = pos_index(pos);
    return ops[i < 0 ? POS_ONLY : i];
}

/* IBA 9.7.5.2.8 Table 45, in units of 10 ns (0.01 ms = 1000). */
static const uint32_t rnr_timer_10ns[32] = {
    65536000, 1000,    2000,    3000,     4000,     6000,     8000,     12000,
    16000,    24000,   32000,   48000,    64000,    96000,    128000,   192000,
    256000,   384000,  512000,  768000,   1024000,  1536000,  2048000,  3072000,
    4096000,  6144000, 8192000, 12288000, 16384000, 24576000, 32768000, 49152000,
};

uint64_t nic_rnr_timer_ps(uint8_t code)
{
    return (uint64_t)rnr_timer_10ns[code & 31] * 10000u;
}
