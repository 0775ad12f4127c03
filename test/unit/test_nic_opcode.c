/* The IBA opcode table: opcode numbers, header bytes per opcode, frame
 * sizes, the requester opcode choice, AETH/RNR timer tables, PSN
 * arithmetic and the GID <-> node mapping.  Expected values are written out
 * from the spec (IBA 9.2 Table 38, Annex 17; CALIBRATION.md "Transports"),
 * not computed with the code under test. */
#include <stddef.h>
#include <string.h>

#include "sim/nic/nic.h"
#include "sim/nic/opcode.h"
#include "test.h"

enum { L2L3L4 = 14 + 20 + 8, TRAILER = 4 + 4 }; /* Eth+IPv4+UDP, ICRC+FCS */

static void test_numbers(void)
{
    /* IBA Table 38, RC group */
    CHECK_EQ_U64(IB_OPCODE_RC_SEND_FIRST, 0x00);
    CHECK_EQ_U64(IB_OPCODE_RC_SEND_ONLY_WITH_IMMEDIATE, 0x05);
    CHECK_EQ_U64(IB_OPCODE_RC_RDMA_WRITE_FIRST, 0x06);
    CHECK_EQ_U64(IB_OPCODE_RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE, 0x0b);
    CHECK_EQ_U64(IB_OPCODE_RC_RDMA_READ_REQUEST, 0x0c);
    CHECK_EQ_U64(IB_OPCODE_RC_RDMA_READ_RESPONSE_ONLY, 0x10);
    CHECK_EQ_U64(IB_OPCODE_RC_ACKNOWLEDGE, 0x11);
    CHECK_EQ_U64(IB_OPCODE_RC_ATOMIC_ACKNOWLEDGE, 0x12);
    CHECK_EQ_U64(IB_OPCODE_RC_COMPARE_SWAP, 0x13);
    CHECK_EQ_U64(IB_OPCODE_RC_FETCH_ADD, 0x14);
    /* UC group (001xxxxx) and UD group (011xxxxx) */
    CHECK_EQ_U64(IB_OPCODE_UC_SEND_FIRST, 0x20);
    CHECK_EQ_U64(IB_OPCODE_UC_SEND_ONLY_WITH_IMMEDIATE, 0x25);
    CHECK_EQ_U64(IB_OPCODE_UC_RDMA_WRITE_FIRST, 0x26);
    CHECK_EQ_U64(IB_OPCODE_UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE, 0x2b);
    CHECK_EQ_U64(IB_OPCODE_UD_SEND_ONLY, 0x64);
    CHECK_EQ_U64(IB_OPCODE_UD_SEND_ONLY_WITH_IMMEDIATE, 0x65);
    unsigned valid = 0;
    for (unsigned op = 0; op < 256; op++)
        valid += nic_opcode_valid((uint8_t)op);
    /* RC 0x00..0x14, UC 0x20..0x2b, UD 0x64..0x65, XRC 0xa0..0xb4;
     * personalities (manufacturer-specific range): EFA SRD 0xc0..0xc4, 1RMA
     * 0xe0..0xe5; RIMA append 0xd0..0xd3 (RC, not a personality) */
    CHECK_EQ_U64(valid, 21 + 12 + 2 + 21 + 5 + 6 + 4);
    /* XRC (IBA Annex A14): RC's operations | 0xa0, requests with the
     * 4-byte XRCETH, responses without */
    CHECK_EQ_U64(IB_OPCODE_XRC_SEND_ONLY, 0xa4);
    CHECK_EQ_U64(IB_OPCODE_XRC_ACKNOWLEDGE, 0xb1);
    for (unsigned op = 0; op <= IB_OPCODE_RC_FETCH_ADD; op++) {
        const struct nic_opcode_info *rc = nic_opcode((uint8_t)op);
        const struct nic_opcode_info *x = nic_opcode((uint8_t)(op | IB_OPCODE_XRC));
        bool req = (rc->mask & NIC_OPF_REQ) != 0;
        CHECK(x->name && (x->mask & ~NIC_OPF_XRCETH) == rc->mask);
        CHECK(((x->mask & NIC_OPF_XRCETH) != 0) == req);
        CHECK_EQ_U64(x->hdr_bytes, rc->hdr_bytes + (req ? PKT_XRCETH_BYTES : 0));
        CHECK(nic_opcode_xrc((uint8_t)(op | IB_OPCODE_XRC)) && !nic_opcode_xrc((uint8_t)op));
        CHECK_EQ_U64(nic_opcode_rc_op((uint8_t)(op | IB_OPCODE_XRC)), op);
        CHECK(nic_opcode_qp_type((uint8_t)(op | IB_OPCODE_XRC)) == IBV_QPT_RC);
    }
    CHECK_EQ_U64(nic_frame_bytes(PKT_FRAMING_ROCEV2, IB_OPCODE_XRC_SEND_ONLY, 1024),
                 nic_frame_bytes(PKT_FRAMING_ROCEV2, IB_OPCODE_RC_SEND_ONLY, 1024) + 4);
    CHECK(nic_opcode_qp_type(NIC_OPCODE_RIMA_APPEND_ONLY) == IBV_QPT_RC &&
          !nic_opcode_personality(NIC_OPCODE_RIMA_APPEND_FIRST));
    CHECK(nic_opcode_valid(NIC_OPCODE_SRD_ACKNOWLEDGE) && !nic_opcode_valid(0xc5));
    CHECK(nic_opcode_valid(NIC_OPCODE_ONERMA_WRITE_ACKNOWLEDGE) && !nic_opcode_valid(0xe6));
    CHECK(nic_opcode_personality(0xc0) && nic_opcode_personality(0xe5));
    CHECK(!nic_opcode_personality(IB_OPCODE_UD_SEND_ONLY_WITH_IMMEDIATE));
    CHECK(nic_opcode_qp_type(NIC_OPCODE_SRD_SEND_ONLY) < 0); /* no IB transport */
    /* BTH 12 + RETH 16; BTH + AETH; BTH + ImmDt */
    CHECK_EQ_U64(nic_opcode(NIC_OPCODE_SRD_READ_REQUEST)->hdr_bytes, 12 + 16);
    CHECK_EQ_U64(nic_opcode(NIC_OPCODE_SRD_ACKNOWLEDGE)->hdr_bytes, 12 + 4);
    CHECK_EQ_U64(nic_opcode(NIC_OPCODE_SRD_SEND_ONLY_WITH_IMMEDIATE)->hdr_bytes, 12 + 4);
    CHECK_EQ_U64(nic_opcode(NIC_OPCODE_ONERMA_FETCH_REQUEST)->hdr_bytes, 12);
    CHECK_EQ_U64(nic_opcode(NIC_OPCODE_ONERMA_FETCH_RESPONSE)->hdr_bytes, 12 + 16);
    CHECK(!nic_opcode_valid(0x15));
    CHECK(!nic_opcode_valid(0x2c)); /* UC has no READ */
    CHECK(!nic_opcode_valid(0x60)); /* UD SEND FIRST does not exist */
    CHECK(!nic_opcode_valid(0x66));
    /* the transport of each opcode */
    CHECK_EQ_U64(nic_opcode_qp_type(IB_OPCODE_RC_ACKNOWLEDGE), IBV_QPT_RC);
    CHECK_EQ_U64(nic_opcode_qp_type(IB_OPCODE_UC_RDMA_WRITE_MIDDLE), IBV_QPT_UC);
    CHECK_EQ_U64(nic_opcode_qp_type(IB_OPCODE_UD_SEND_ONLY), IBV_QPT_UD);
    CHECK(nic_opcode_qp_type(0x40) < 0); /* RD: not modelled */
}

static void test_headers(void)
{
    /* BTH 12 + extension headers */
    CHECK_EQ_U64(nic_opcode(IB_OPCODE_RC_SEND_MIDDLE)->hdr_bytes, 12);
    CHECK_EQ_U64(nic_opcode(IB_OPCODE_RC_SEND_LAST_WITH_IMMEDIATE)->hdr_bytes, 12 + 4);
    CHECK_EQ_U64(nic_opcode(IB_OPCODE_RC_RDMA_WRITE_FIRST)->hdr_bytes, 12 + 16);
    CHECK_EQ_U64(nic_opcode(IB_OPCODE_RC_RDMA_WRITE_MIDDLE)->hdr_bytes, 12);
    CHECK_EQ_U64(nic_opcode(IB_OPCODE_RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE)->hdr_bytes, 12 + 16 + 4);
    CHECK_EQ_U64(nic_opcode(IB_OPCODE_RC_RDMA_READ_REQUEST)->hdr_bytes, 12 + 16);
    CHECK_EQ_U64(nic_opcode(IB_OPCODE_RC_RDMA_READ_RESPONSE_FIRST)->hdr_bytes, 12 + 4);
    CHECK_EQ_U64(nic_opcode(IB_OPCODE_RC_RDMA_READ_RESPONSE_MIDDLE)->hdr_bytes, 12);
    CHECK_EQ_U64(nic_opcode(IB_OPCODE_RC_ACKNOWLEDGE)->hdr_bytes, 12 + 4);
    CHECK_EQ_U64(nic_opcode(IB_OPCODE_RC_ATOMIC_ACKNOWLEDGE)->hdr_bytes, 12 + 4 + 8);
    CHECK_EQ_U64(nic_opcode(IB_OPCODE_RC_COMPARE_SWAP)->hdr_bytes, 12 + 28);
    CHECK_EQ_U64(nic_ext_hdr_bytes(NIC_OPF_RETH | NIC_OPF_IMMDT), 20);
    /* UC: the RC headers; UD: BTH + DETH 8 (+ ImmDt 4) */
    CHECK_EQ_U64(nic_opcode(IB_OPCODE_UC_RDMA_WRITE_FIRST)->hdr_bytes, 12 + 16);
    CHECK_EQ_U64(nic_opcode(IB_OPCODE_UC_SEND_LAST_WITH_IMMEDIATE)->hdr_bytes, 12 + 4);
    CHECK_EQ_U64(nic_opcode(IB_OPCODE_UD_SEND_ONLY)->hdr_bytes, 12 + 8);
    CHECK_EQ_U64(nic_opcode(IB_OPCODE_UD_SEND_ONLY_WITH_IMMEDIATE)->hdr_bytes, 12 + 8 + 4);
    CHECK_EQ_U64(nic_frame_bytes(PKT_FRAMING_ROCEV2, IB_OPCODE_UD_SEND_ONLY, 1024),
                 L2L3L4 + 12 + 8 + 1024 + TRAILER);
    /* the extension-header mask a capture writer sees (enum pkt_ext_hdr) */
    CHECK_EQ_U64(nic_opcode(IB_OPCODE_UD_SEND_ONLY_WITH_IMMEDIATE)->mask & NIC_OPF_EXT_HDRS,
                 PKT_EXT_DETH | PKT_EXT_IMMDT);
    CHECK_EQ_U64(nic_opcode(IB_OPCODE_RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE)->mask & NIC_OPF_EXT_HDRS,
                 PKT_EXT_RETH | PKT_EXT_IMMDT);
    CHECK_EQ_U64(nic_opcode(IB_OPCODE_RC_ATOMIC_ACKNOWLEDGE)->mask & NIC_OPF_EXT_HDRS,
                 PKT_EXT_AETH | PKT_EXT_ATMACK);

    /* frames */
    CHECK_EQ_U64(nic_frame_bytes(PKT_FRAMING_ROCEV2, IB_OPCODE_RC_RDMA_WRITE_ONLY, 4096),
                 14 + 20 + 8 + 12 + 16 + 4096 + 4 + 4);
    CHECK_EQ_U64(nic_frame_bytes(PKT_FRAMING_ROCEV2, IB_OPCODE_RC_RDMA_WRITE_MIDDLE, 4096),
                 L2L3L4 + 12 + 4096 + TRAILER);
    CHECK_EQ_U64(nic_frame_bytes(PKT_FRAMING_ROCEV2, IB_OPCODE_RC_ACKNOWLEDGE, 0),
                 L2L3L4 + 12 + 4 + TRAILER); /* 66 */
    CHECK_EQ_U64(nic_frame_bytes(PKT_FRAMING_ROCEV2, IB_OPCODE_RC_FETCH_ADD, 0),
                 L2L3L4 + 12 + 28 + TRAILER);
    CHECK_EQ_U64(nic_frame_bytes(PKT_FRAMING_ROCEV2, IB_OPCODE_RC_ATOMIC_ACKNOWLEDGE, 0),
                 L2L3L4 + 12 + 4 + 8 + TRAILER);
    /* payload padded to 4 bytes (BTH PadCnt): 2 B -> 4 B */
    CHECK_EQ_U64(nic_frame_bytes(PKT_FRAMING_ROCEV2, IB_OPCODE_RC_RDMA_WRITE_ONLY, 2),
                 L2L3L4 + 12 + 16 + 4 + TRAILER);
    CHECK_EQ_U64(nic_frame_bytes(PKT_FRAMING_ROCEV2, IB_OPCODE_RC_RDMA_WRITE_ONLY, 64),
                 L2L3L4 + 12 + 16 + 64 + TRAILER);
    /* a 0-byte SEND_ONLY is 62 B: padded to the Ethernet minimum of 64 */
    CHECK_EQ_U64(nic_frame_bytes(PKT_FRAMING_ROCEV2, IB_OPCODE_RC_SEND_ONLY, 0), 64);
}

/* InfiniBand framing (docs/nic.md "Framing"): LRH 8 (+ GRH 40 when global)
 * + BTH + extension headers + payload + pad + ICRC 4 + VCRC 2, no minimum;
 * on the link 2 B of delimiters instead of Ethernet's 20 B of preamble and
 * gap. */
static void test_ib_framing(void)
{
    enum { LRH = 8, GRH = 40, ICRC_VCRC = 4 + 2 };
    const enum pkt_framing L = PKT_FRAMING_IB_LOCAL, G = PKT_FRAMING_IB_GLOBAL;
    /* a 256 B SEND MIDDLE: 8 + 12 + 256 + 6 = 282 (RoCEv2: 14+20+8+12+256+4+4 = 318) */
    CHECK_EQ_U64(nic_frame_bytes(L, IB_OPCODE_RC_SEND_MIDDLE, 256), LRH + 12 + 256 + ICRC_VCRC);
    CHECK_EQ_U64(nic_frame_bytes(PKT_FRAMING_ROCEV2, IB_OPCODE_RC_SEND_MIDDLE, 256), 318);
    CHECK_EQ_U64(nic_frame_bytes(G, IB_OPCODE_RC_SEND_MIDDLE, 256),
                 LRH + GRH + 12 + 256 + ICRC_VCRC);
    /* an ACK is 30 B: no Ethernet minimum */
    CHECK_EQ_U64(nic_frame_bytes(L, IB_OPCODE_RC_ACKNOWLEDGE, 0), LRH + 12 + 4 + ICRC_VCRC);
    CHECK_EQ_U64(nic_frame_bytes(L, IB_OPCODE_RC_SEND_ONLY, 0), 26);
    /* pad to 4 B and the extension headers as on RoCE */
    CHECK_EQ_U64(nic_frame_bytes(L, IB_OPCODE_RC_RDMA_WRITE_ONLY, 2),
                 LRH + 12 + 16 + 4 + ICRC_VCRC);
    CHECK_EQ_U64(nic_frame_bytes(L, IB_OPCODE_UD_SEND_ONLY, 1024) + GRH,
                 nic_frame_bytes(G, IB_OPCODE_UD_SEND_ONLY, 1024));
    /* link time per packet: Ethernet adds preamble + IFG, IB its delimiters */
    struct pkt p;
    memset(&p, 0, offsetof(struct pkt, payload));
    p.frame_bytes = 282;
    p.framing = PKT_FRAMING_IB_LOCAL;
    CHECK_EQ_U64(pkt_wire_bytes(&p), 284);
    p.framing = PKT_FRAMING_ROCEV2;
    CHECK_EQ_U64(pkt_wire_bytes(&p), 302);
    /* 128 x 256 B of a 32 KiB SEND at 100 Gb/s: 36,352 B (2.91 us) on IB
     * against 43,264 B (3.46 us) on RoCEv2 */
    CHECK_EQ_U64(128 * (nic_frame_bytes(L, IB_OPCODE_RC_SEND_MIDDLE, 256) + PKT_IB_DELIM_BYTES),
                 36352);
    CHECK_EQ_U64(128 * (nic_frame_bytes(PKT_FRAMING_ROCEV2, IB_OPCODE_RC_SEND_MIDDLE, 256) +
                        PKT_ETH_PREAMBLE_IFG_BYTES),
                 43264);
}

static void test_req_opcodes(void)
{
    CHECK_EQ_U64(nic_req_opcode(IBV_WR_SEND, NIC_OPF_ONLY), IB_OPCODE_RC_SEND_ONLY);
    CHECK_EQ_U64(nic_req_opcode(IBV_WR_SEND, NIC_OPF_FIRST), IB_OPCODE_RC_SEND_FIRST);
    CHECK_EQ_U64(nic_req_opcode(IBV_WR_SEND_WITH_IMM, NIC_OPF_MIDDLE), IB_OPCODE_RC_SEND_MIDDLE);
    CHECK_EQ_U64(nic_req_opcode(IBV_WR_SEND_WITH_IMM, NIC_OPF_LAST),
                 IB_OPCODE_RC_SEND_LAST_WITH_IMMEDIATE);
    CHECK_EQ_U64(nic_req_opcode(IBV_WR_RDMA_WRITE, NIC_OPF_FIRST), IB_OPCODE_RC_RDMA_WRITE_FIRST);
    CHECK_EQ_U64(nic_req_opcode(IBV_WR_RDMA_WRITE_WITH_IMM, NIC_OPF_ONLY),
                 IB_OPCODE_RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE);
    CHECK_EQ_U64(nic_req_opcode(IBV_WR_RDMA_READ, NIC_OPF_ONLY), IB_OPCODE_RC_RDMA_READ_REQUEST);
    CHECK_EQ_U64(nic_req_opcode(IBV_WR_ATOMIC_FETCH_AND_ADD, NIC_OPF_ONLY), IB_OPCODE_RC_FETCH_ADD);
    CHECK(nic_req_opcode(IBV_WR_RDMA_READ, NIC_OPF_FIRST) < 0);
    CHECK(nic_req_opcode(IBV_WR_SEND_WITH_INV, NIC_OPF_ONLY) < 0);
    /* per transport */
    CHECK_EQ_U64(nic_req_opcode_qpt(IBV_QPT_RC, IBV_WR_SEND, NIC_OPF_ONLY), IB_OPCODE_RC_SEND_ONLY);
    CHECK_EQ_U64(nic_req_opcode_qpt(IBV_QPT_UC, IBV_WR_SEND, NIC_OPF_FIRST),
                 IB_OPCODE_UC_SEND_FIRST);
    CHECK_EQ_U64(nic_req_opcode_qpt(IBV_QPT_UC, IBV_WR_RDMA_WRITE_WITH_IMM, NIC_OPF_LAST),
                 IB_OPCODE_UC_RDMA_WRITE_LAST_WITH_IMMEDIATE);
    CHECK_EQ_U64(nic_req_opcode_qpt(IBV_QPT_UD, IBV_WR_SEND_WITH_IMM, NIC_OPF_ONLY),
                 IB_OPCODE_UD_SEND_ONLY_WITH_IMMEDIATE);
    CHECK(nic_req_opcode_qpt(IBV_QPT_UC, IBV_WR_RDMA_READ, NIC_OPF_ONLY) < 0);
    CHECK(nic_req_opcode_qpt(IBV_QPT_UC, IBV_WR_ATOMIC_FETCH_AND_ADD, NIC_OPF_ONLY) < 0);
    CHECK(nic_req_opcode_qpt(IBV_QPT_UD, IBV_WR_SEND, NIC_OPF_FIRST) < 0);
    CHECK(nic_req_opcode_qpt(IBV_QPT_UD, IBV_WR_RDMA_WRITE, NIC_OPF_ONLY) < 0);
    CHECK(nic_req_opcode_qpt(IBV_QPT_RAW_PACKET, IBV_WR_SEND, NIC_OPF_ONLY) < 0);
    CHECK_EQ_U64(nic_read_resp_opcode(NIC_OPF_MIDDLE), IB_OPCODE_RC_RDMA_READ_RESPONSE_MIDDLE);
    CHECK_EQ_U64(nic_read_resp_opcode(NIC_OPF_ONLY), IB_OPCODE_RC_RDMA_READ_RESPONSE_ONLY);
    /* positions */
    CHECK_EQ_U64(nic_pkt_pos(0, 1), NIC_OPF_ONLY);
    CHECK_EQ_U64(nic_pkt_pos(0, 3), NIC_OPF_FIRST);
    CHECK_EQ_U64(nic_pkt_pos(1, 3), NIC_OPF_MIDDLE);
    CHECK_EQ_U64(nic_pkt_pos(2, 3), NIC_OPF_LAST);
    /* every opcode that consumes a receive is a SEND or a WRITE with immediate */
    for (unsigned op = 0; op < 256; op++) {
        const struct nic_opcode_info *i = nic_opcode((uint8_t)op);
        if (i->mask & NIC_OPF_RWR)
            CHECK((i->mask & NIC_OPF_SEND) || (i->mask & NIC_OPF_IMMDT));
    }
}

static void test_tables(void)
{
    /* IBA Table 45 */
    CHECK_EQ_U64(nic_rnr_timer_ps(0), 655360ull * SIM_US); /* 655.36 ms */
    CHECK_EQ_U64(nic_rnr_timer_ps(1), 10 * SIM_US);
    CHECK_EQ_U64(nic_rnr_timer_ps(12), 640 * SIM_US);
    CHECK_EQ_U64(nic_rnr_timer_ps(14), 1280 * SIM_US);
    CHECK_EQ_U64(nic_rnr_timer_ps(31), 491520 * SIM_US);
    /* 24-bit PSN arithmetic */
    CHECK_EQ_U64(nic_psn_add(0xffffff, 1), 0);
    CHECK(nic_psn_diff(0, 0xffffff) == 1);
    CHECK(nic_psn_diff(0xffffff, 0) == -1);
    CHECK(nic_psn_diff(5, 3) == 2);
    CHECK(nic_psn_diff(0x7fffff, 0) == 0x7fffff);
    /* path MTUs */
    CHECK_EQ_U64(nic_mtu_bytes(IBV_MTU_256), 256);
    CHECK_EQ_U64(nic_mtu_bytes(IBV_MTU_1024), 1024);
    CHECK_EQ_U64(nic_mtu_bytes(IBV_MTU_4096), 4096);
    /* GIDs: ::ffff:10.0.0.(n+1) */
    union ibv_gid g;
    nic_gid_of_node(0, &g);
    static const uint8_t want0[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1};
    CHECK(memcmp(g.raw, want0, 16) == 0);
    CHECK(nic_node_from_gid(&g) == 0);
    nic_gid_of_node(300, &g);
    CHECK_EQ_U64(g.raw[14], 1);
    CHECK_EQ_U64(g.raw[15], 45);
    CHECK(nic_node_from_gid(&g) == 300);
    g.raw[0] = 0xfe;
    CHECK(nic_node_from_gid(&g) == -1);
    CHECK(nic_node_from_gid(NULL) == -1);
}

static void test_defaults(void)
{
    struct nic_params p;
    nic_params_default(&p);
    CHECK_EQ_U64(p.port_rate_bps, 100000000000ull);
    CHECK_EQ_U64(p.max_mtu, IBV_MTU_4096);
    CHECK_EQ_U64(p.wqe_bytes, 64);
    CHECK_EQ_U64(p.cqe_bytes, 64);
    CHECK(p.max_sge <= NIC_MAX_SGE);
    CHECK(p.max_inline_bytes <= NIC_MAX_INLINE_BYTES);
    CHECK(p.max_qp_rd_atom >= 1);
    CHECK(p.ack_every_pkts >= 1);
}

int main(void)
{
    test_numbers();
    test_headers();
    test_ib_framing();
    test_req_opcodes();
    test_tables();
    test_defaults();
    return test_summary();
}
