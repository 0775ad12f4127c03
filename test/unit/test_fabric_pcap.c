/* Packet capture: the ICRC against a frame captured on a ConnectX-4 Lx
 * (a CNP, from scapy's test/contrib/roce.uts) and scapy's UC example; the
 * encoding of every header at its offset, checked byte by byte against
 * values written here (IPv4 checksum and ICRC recomputed independently:
 * a bitwise CRC-32 over a pseudo-header built here); padding to 4 bytes
 * and to the Ethernet minimum; the pcap file format; and link taps at the
 * sending and receiving ends (lost and corrupted frames). */
#include <stdlib.h>
#include <unistd.h>

#include "sim/fabric/fabric.h"
#include "sim/fabric/pcap.h"
#include "test.h"

static uint8_t hexval(char c)
{
    return (uint8_t)(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
}

static size_t from_hex(const char *s, uint8_t *out)
{
    size_t n = 0;
    while (*s) {
        if (*s == ' ') {
            s++;
            continue;
        }
        out[n++] = (uint8_t)(hexval(s[0]) << 4 | hexval(s[1]));
        s += 2;
    }
    return n;
}

static uint32_t rd_le32(const uint8_t *b)
{
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}
static uint32_t rd_be(const uint8_t *b, int n)
{
    uint32_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | b[i];
    return v;
}
static uint64_t rd_be64(const uint8_t *b)
{
    return (uint64_t)rd_be(b, 4) << 32 | rd_be(b + 4, 4);
}

/* Bitwise CRC-32 (no table), to check the table-driven one. */
static uint32_t crc_bits(uint32_t crc, const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        crc ^= b[i];
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1)));
    }
    return crc;
}

/* ICRC recomputed from the IBA Annex A17 recipe. */
static uint32_t icrc_ref(const uint8_t *fr, size_t icrc_off)
{
    uint8_t ps[8 + 40];
    memset(ps, 0xff, 8);
    memcpy(ps + 8, fr + 14, 40);
    ps[8 + 1] = 0xff;               /* TOS */
    ps[8 + 8] = 0xff;               /* TTL */
    ps[8 + 10] = ps[8 + 11] = 0xff; /* IP checksum */
    ps[8 + 26] = ps[8 + 27] = 0xff; /* UDP checksum */
    ps[8 + 32] = 0xff;              /* BTH FECN/BECN/resv6 */
    uint32_t crc = crc_bits(0xffffffffu, ps, sizeof(ps));
    crc = crc_bits(crc, fr + 54, icrc_off - 54);
    return ~crc;
}

static bool ip_sum_ok(const uint8_t *ip)
{
    uint32_t s = 0;
    for (int i = 0; i < 20; i += 2)
        s += (uint32_t)ip[i] << 8 | ip[i + 1];
    while (s >> 16)
        s = (s & 0xffff) + (s >> 16);
    return s == 0xffff;
}

static void test_vectors(void)
{
    uint8_t fr[128];
    /* RoCEv2 CNP captured on a ConnectX-4 Lx (scapy test/contrib/roce.uts):
     * ICRC 82 fd 00 2a */
    size_t n = from_hex("e41d2dab2bc2 7cfe90643b32 0800"
                        "45c2003c718c400040119161 0a001101 0a001201"
                        "000012b700280000"
                        "8100ffff40000118 00000000"
                        "00000000000000000000000000000000"
                        "82fd002a",
                        fr);
    CHECK_EQ_U64(n, 74);
    CHECK_EQ_U64(roce_icrc(fr, n - 4), rd_le32(fr + n - 4));
    CHECK_EQ_U64(icrc_ref(fr, n - 4), rd_le32(fr + n - 4));
    CHECK_EQ_U64(ipv4_checksum(fr + 14), 0); /* a valid header sums to 0 */
    /* scapy's UC SEND ONLY example (MigReq, PadCnt 2): ICRC 78 f3 53 f3 */
    n = from_hex("248a07a8fa22 248a07a8fa22 0800"
                 "45010040047840004011b4d5 c0a80007 c0a80007"
                 "c00012b7002caca2"
                 "2460ffff000000d300cf1710"
                 "4630818be28935d90e9a955054 01be885e500000"
                 "78f353f3",
                 fr);
    CHECK_EQ_U64(n, 78);
    CHECK_EQ_U64(roce_icrc(fr, n - 4), rd_le32(fr + n - 4));
    CHECK_EQ_U64(ipv4_checksum(fr + 14), 0);
    /* any bit flip is caught */
    fr[60] ^= 0x10;
    CHECK(roce_icrc(fr, n - 4) != rd_le32(fr + n - 4));
    /* and the masked fields are ignored: TTL, TOS, FECN/BECN change in flight */
    fr[60] ^= 0x10;
    fr[14 + 8] = 17;
    fr[14 + 1] = 0x03;
    fr[14 + 28 + 4] = 0x80;
    CHECK_EQ_U64(roce_icrc(fr, n - 4), rd_le32(fr + n - 4));

    CHECK_EQ_U64(roce_node_ipv4(0), 0x0a000001u);
    CHECK_EQ_U64(roce_node_ipv4(255), 0x0a000100u);
    uint8_t mac[6];
    roce_node_mac(4, mac);
    CHECK(mac[0] == 0x02 && mac[1] == 0 && mac[2] == 0 && mac[3] == 0 && mac[4] == 0 &&
          mac[5] == 5);
}

static struct pkt *mk(uint8_t opcode, uint32_t ext, uint32_t payload_len)
{
    static struct pkt p;
    static uint8_t bytes[PKT_MAX_PAYLOAD_BYTES];
    memset(&p, 0, sizeof(p));
    p.payload = bytes;
    p.opcode = opcode;
    p.ext_hdrs = ext;
    p.payload_len = payload_len;
    for (uint32_t i = 0; i < payload_len; i++)
        p.payload[i] = (uint8_t)(0xa0 + i);
    p.src_node = 0;
    p.dst_node = 1;
    p.dest_qpn = 0x123456;
    p.psn = 0xabcdef;
    p.udp_sport = 0xc123;
    return &p;
}

/* Checks shared by every encoded frame: Ethernet, IPv4, UDP, BTH fixed
 * parts, ICRC; returns the ICRC offset. */
static size_t check_common(const uint8_t *fr, size_t len, const struct pkt *p, size_t hdr_bytes)
{
    uint32_t pad = (4 - (p->payload_len & 3)) & 3;
    size_t icrc_off = 14 + 20 + 8 + 12 + hdr_bytes + p->payload_len + pad;
    size_t expect_len = icrc_off + 4 < 60 ? 60 : icrc_off + 4;
    CHECK_EQ_U64(len, expect_len);
    static const uint8_t dmac[6] = {2, 0, 0, 0, 0, 2}, smac[6] = {2, 0, 0, 0, 0, 1};
    CHECK(memcmp(fr, dmac, 6) == 0);
    CHECK(memcmp(fr + 6, smac, 6) == 0);
    CHECK_EQ_U64(rd_be(fr + 12, 2), 0x0800);
    const uint8_t *ip = fr + 14;
    CHECK_EQ_U64(ip[0], 0x45);
    CHECK_EQ_U64(rd_be(ip + 2, 2), icrc_off + 4 - 14); /* total length (no Ethernet padding) */
    CHECK_EQ_U64(rd_be(ip + 6, 2), 0x4000);            /* DF */
    CHECK_EQ_U64(ip[8], 64);
    CHECK_EQ_U64(ip[9], 17);
    CHECK(ip_sum_ok(ip));
    CHECK_EQ_U64(rd_be(ip + 12, 4), 0x0a000001);
    CHECK_EQ_U64(rd_be(ip + 16, 4), 0x0a000002);
    const uint8_t *udp = fr + 34;
    CHECK_EQ_U64(rd_be(udp, 2), 0xc123);
    CHECK_EQ_U64(rd_be(udp + 2, 2), 4791);
    CHECK_EQ_U64(rd_be(udp + 4, 2), icrc_off + 4 - 34);
    CHECK_EQ_U64(rd_be(udp + 6, 2), 0);
    const uint8_t *bth = fr + 42;
    CHECK_EQ_U64(bth[0], p->opcode);
    CHECK_EQ_U64((bth[1] >> 4) & 3, pad);
    CHECK_EQ_U64(bth[1] & 0x0f, 0); /* TVer */
    CHECK_EQ_U64(rd_be(bth + 2, 2), 0xffff);
    CHECK_EQ_U64(bth[4], 0);
    CHECK_EQ_U64(rd_be(bth + 5, 3), p->dest_qpn);
    CHECK_EQ_U64(bth[8] >> 7, p->ack_req);
    CHECK_EQ_U64(bth[8] & 0x7f, 0);
    CHECK_EQ_U64(rd_be(bth + 9, 3), p->psn);
    CHECK(memcmp(fr + icrc_off - pad - p->payload_len, p->payload, p->payload_len) == 0);
    for (uint32_t i = 0; i < pad; i++)
        CHECK_EQ_U64(fr[icrc_off - pad + i], 0);
    CHECK_EQ_U64(rd_le32(fr + icrc_off), icrc_ref(fr, icrc_off));
    for (size_t i = icrc_off + 4; i < len; i++)
        CHECK_EQ_U64(fr[i], 0); /* Ethernet padding */
    return icrc_off;
}

static void test_encode(void)
{
    static uint8_t fr[ROCE_MAX_FRAME_BYTES];
    /* RDMA WRITE ONLY: BTH + RETH + 13 B payload (PadCnt 3), SE, AckReq */
    struct pkt *p = mk(0x0a, PKT_EXT_RETH, 13);
    p->se = 1;
    p->ack_req = 1;
    p->reth_va = 0x1122334455667788ull;
    p->reth_rkey = 0xdeadbeef;
    p->reth_dma_len = 13;
    size_t len = roce_encode(p, fr, sizeof(fr), false);
    size_t icrc_off = check_common(fr, len, p, 16);
    CHECK_EQ_U64(icrc_off, 54 + 16 + 13 + 3);
    CHECK_EQ_U64(fr[43], 0x80 | 0x30);
    CHECK_EQ_U64(rd_be64(fr + 54), 0x1122334455667788ull);
    CHECK_EQ_U64(rd_be(fr + 62, 4), 0xdeadbeef);
    CHECK_EQ_U64(rd_be(fr + 66, 4), 13);
    CHECK_EQ_U64(fr[70], 0xa0);
    /* the same with a bad ICRC: exactly the ICRC differs (inverted) */
    static uint8_t bad[ROCE_MAX_FRAME_BYTES];
    CHECK_EQ_U64(roce_encode(p, bad, sizeof(bad), true), len);
    CHECK(memcmp(bad, fr, icrc_off) == 0);
    CHECK_EQ_U64(rd_le32(bad + icrc_off), ~rd_le32(fr + icrc_off));
    CHECK_EQ_U64(roce_encode(p, fr, 100, false), 0); /* buffer too small */

    /* CmpSwap: AtomicETH VA, R_Key, Swap, Compare */
    p = mk(0x13, PKT_EXT_ATMETH, 0);
    p->atomic_va = 0x0102030405060708ull;
    p->atomic_rkey = 0x0a0b0c0d;
    p->atomic_swap_add = 0x1111111122222222ull;
    p->atomic_compare = 0x3333333344444444ull;
    len = roce_encode(p, fr, sizeof(fr), false);
    check_common(fr, len, p, 28);
    CHECK_EQ_U64(rd_be64(fr + 54), 0x0102030405060708ull);
    CHECK_EQ_U64(rd_be(fr + 62, 4), 0x0a0b0c0d);
    CHECK_EQ_U64(rd_be64(fr + 66), 0x1111111122222222ull);
    CHECK_EQ_U64(rd_be64(fr + 74), 0x3333333344444444ull);

    /* Atomic ACK: AETH then AtomicAckETH */
    p = mk(0x12, PKT_EXT_AETH | PKT_EXT_ATMACK, 0);
    p->aeth_syndrome = 0x1f;
    p->aeth_msn = 0x00c0ffee & 0xffffff;
    p->atomic_orig = 0x8877665544332211ull;
    len = roce_encode(p, fr, sizeof(fr), false);
    check_common(fr, len, p, 12);
    CHECK_EQ_U64(fr[54], 0x1f);
    CHECK_EQ_U64(rd_be(fr + 55, 3), 0xc0ffee);
    CHECK_EQ_U64(rd_be64(fr + 58), 0x8877665544332211ull);

    /* RDMA WRITE ONLY with immediate: RETH then ImmDt (as given, network
     * order) then payload */
    p = mk(0x0b, PKT_EXT_RETH | PKT_EXT_IMMDT, 8);
    const uint8_t imm[4] = {0xca, 0xfe, 0xba, 0xbe};
    memcpy(&p->imm_data, imm, 4);
    len = roce_encode(p, fr, sizeof(fr), false);
    check_common(fr, len, p, 20);
    CHECK(memcmp(fr + 70, imm, 4) == 0);
    CHECK_EQ_U64(fr[74], 0xa0);

    /* UD SEND ONLY with immediate: DETH right after the BTH, then ImmDt */
    p = mk(0x65, PKT_EXT_DETH | PKT_EXT_IMMDT, 5);
    p->deth_qkey = 0x11111111;
    p->src_qpn = 0x00abcd;
    memcpy(&p->imm_data, imm, 4);
    len = roce_encode(p, fr, sizeof(fr), false);
    check_common(fr, len, p, 12);
    CHECK_EQ_U64(rd_be(fr + 54, 4), 0x11111111);
    CHECK_EQ_U64(fr[58], 0);
    CHECK_EQ_U64(rd_be(fr + 59, 3), 0x00abcd);
    CHECK(memcmp(fr + 62, imm, 4) == 0);

    /* ACK: AETH only; 62 B, above the minimum */
    p = mk(0x11, PKT_EXT_AETH, 0);
    p->aeth_syndrome = 0x00;
    p->aeth_msn = 42;
    len = roce_encode(p, fr, sizeof(fr), false);
    CHECK_EQ_U64(len, 62);
    check_common(fr, len, p, 4);
    CHECK_EQ_U64(rd_be(fr + 55, 3), 42);

    /* zero-byte SEND ONLY: 58 B padded to the 60 B Ethernet minimum; the
     * IPv4 length excludes the padding */
    p = mk(0x04, 0, 0);
    p->udp_sport = 0;
    len = roce_encode(p, fr, sizeof(fr), false);
    CHECK_EQ_U64(len, 60);
    CHECK_EQ_U64(rd_be(fr + 16, 2), 44);
    CHECK_EQ_U64(rd_be(fr + 34, 2), 0xc000); /* no source port given */
    CHECK_EQ_U64(rd_le32(fr + 54), icrc_ref(fr, 54));
    CHECK_EQ_U64(fr[58] | fr[59], 0);

    /* a full 4 KiB payload */
    p = mk(0x07, 0, 4096);
    len = roce_encode(p, fr, sizeof(fr), false);
    check_common(fr, len, p, 0);
    CHECK_EQ_U64(len, 54 + 4096 + 4);
}

static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    static uint8_t buf[1 << 16];
    *n = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    return buf;
}

/* VCRC the textbook way (IBA 7.8.2: x^16+x^12+x^3+x+1, 0x100B, seed all
 * ones, inverted): each byte bit-reversed through an MSB-first register,
 * the result bit-reversed -- the same CRC as the reflected form. */
static uint8_t rev8(uint8_t b)
{
    uint8_t r = 0;
    for (int i = 0; i < 8; i++)
        r = (uint8_t)(r << 1 | ((b >> i) & 1));
    return r;
}
static uint16_t vcrc_ref(const uint8_t *b, size_t n)
{
    uint16_t crc = 0xffff;
    for (size_t i = 0; i < n; i++) {
        crc ^= (uint16_t)(rev8(b[i]) << 8);
        for (int k = 0; k < 8; k++)
            crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x100b) : (uint16_t)(crc << 1);
    }
    uint16_t r = (uint16_t)(rev8((uint8_t)crc) << 8 | rev8((uint8_t)(crc >> 8)));
    return (uint16_t)~r;
}

/* InfiniBand encoding (LINKTYPE_ERF records): LRH fields at their bits,
 * GRH when the packet is global, the same transport bytes as RoCEv2, the
 * ICRC over the IBA-masked header (recomputed here bitwise), the VCRC over
 * LRH .. ICRC; the masked fields (VL; GRH TClass / FlowLabel / HopLmt)
 * leave the ICRC alone, the others do not. */
static void test_ib_encode(void)
{
    CHECK_EQ_U64(ib_vcrc((const uint8_t *)"123456789", 9),
                 vcrc_ref((const uint8_t *)"123456789", 9));
    uint8_t fr[PCAP_MAX_FRAME_BYTES], ro[ROCE_MAX_FRAME_BYTES];
    /* local: RDMA WRITE ONLY, 100 B payload (pad 0), SL 5 on VL 5, node 3 -> 6 */
    struct pkt *p = mk(0x0a, PKT_EXT_RETH, 100);
    p->framing = PKT_FRAMING_IB_LOCAL;
    p->src_node = 3;
    p->dst_node = 6;
    p->ib_sl = 5;
    p->prio = 5;
    p->dest_qpn = 0x123456;
    p->psn = 0xabcdef;
    p->reth_va = 0x1122334455667788ull;
    p->reth_rkey = 0x99;
    p->reth_dma_len = 100;
    size_t n = ib_encode(p, fr, sizeof(fr), false);
    CHECK_EQ_U64(n, 8 + 12 + 16 + 100 + 4 + 2);
    CHECK_EQ_U64(fr[0], 0x50);                   /* VL 5, LVer 0 */
    CHECK_EQ_U64(fr[1], 0x52);                   /* SL 5, LNH 2: BTH next */
    CHECK_EQ_U64(rd_be(fr + 2, 2), 7);           /* DLID = node + 1 */
    CHECK_EQ_U64(rd_be(fr + 4, 2), (n - 2) / 4); /* PktLen in words, LRH .. ICRC */
    CHECK_EQ_U64(rd_be(fr + 6, 2), 4);           /* SLID */
    size_t rn = roce_encode(p, ro, sizeof(ro), false);
    CHECK(memcmp(fr + 8, ro + 42, rn - 42 - 4) == 0); /* BTH .. pad: the RoCEv2 bytes */
    uint8_t ps[8 + 12];
    memcpy(ps, fr, 20);
    ps[0] |= 0xf0; /* VL */
    ps[8 + 4] = 0xff;
    uint32_t crc = crc_bits(0xffffffffu, ps, sizeof(ps));
    crc = ~crc_bits(crc, fr + 20, n - 6 - 20);
    CHECK_EQ_U64(rd_le32(fr + n - 6), crc);
    uint16_t vcrc = (uint16_t)(fr[n - 2] | fr[n - 1] << 8);
    CHECK_EQ_U64(vcrc, vcrc_ref(fr, n - 2));
    fr[0] = 0x70; /* another VL: the ICRC stands, the VCRC does not */
    CHECK_EQ_U64(ib_icrc(fr, n - 6), crc);
    CHECK(ib_vcrc(fr, n - 2) != vcrc);
    fr[1] = 0x32; /* another SL: the ICRC changes */
    CHECK(ib_icrc(fr, n - 6) != crc);
    uint8_t bad[PCAP_MAX_FRAME_BYTES];
    CHECK_EQ_U64(ib_encode(p, bad, sizeof(bad), true), n);
    CHECK(rd_le32(bad + n - 6) == ~crc);

    /* global: UD SEND ONLY with immediate to a multicast group, 7 B (pad 1) */
    p = mk(0x65, PKT_EXT_DETH | PKT_EXT_IMMDT, 7);
    p->framing = PKT_FRAMING_IB_GLOBAL;
    p->src_node = 0;
    p->dst_node = PKT_MCAST_NODE | 5;
    p->dest_qpn = 0xffffff;
    p->grh_tclass = 0x60;
    p->grh_flow_label = 0xabcde;
    p->grh_hop_limit = 1;
    n = ib_encode(p, fr, sizeof(fr), false);
    CHECK_EQ_U64(n, 8 + 40 + 12 + 8 + 4 + 8 + 4 + 2);
    CHECK_EQ_U64(fr[1] & 3, 3);                   /* LNH: GRH next */
    CHECK_EQ_U64(rd_be(fr + 2, 2), 0xc005);       /* multicast LID */
    CHECK_EQ_U64(rd_be(fr + 8, 4), 0x660abcdeu);  /* IPVer 6, TClass 0x60, FlowLabel */
    CHECK_EQ_U64(rd_be(fr + 12, 2), n - 2 - 48);  /* PayLen: BTH .. ICRC */
    CHECK_EQ_U64(fr[14], 0x1b);                   /* NxtHdr */
    CHECK_EQ_U64(fr[15], 1);                      /* HopLmt */
    CHECK_EQ_U64(rd_be(fr + 16 + 10, 2), 0xffff); /* SGID ::ffff:10.0.0.1 */
    CHECK_EQ_U64(rd_be(fr + 16 + 12, 4), 0x0a000001u);
    CHECK_EQ_U64(rd_be(fr + 32 + 12, 4), 0xe0000005u); /* DGID ::ffff:224.0.0.5 */
    CHECK_EQ_U64(fr[48], 0x65);                        /* BTH */
    CHECK_EQ_U64(fr[49] >> 4 & 3, 1);                  /* PadCnt */
    uint8_t g[8 + 40 + 12];
    memset(g, 0xff, 8);
    memcpy(g + 8, fr + 8, 52);
    g[8] |= 0x0f;
    g[9] = g[10] = g[11] = 0xff; /* TClass, FlowLabel */
    g[15] = 0xff;                /* HopLmt */
    g[48 + 4] = 0xff;
    crc = crc_bits(0xffffffffu, g, sizeof(g));
    crc = ~crc_bits(crc, fr + 60, n - 6 - 60);
    CHECK_EQ_U64(rd_le32(fr + n - 6), crc);
    CHECK_EQ_U64((uint32_t)fr[n - 2] | (uint32_t)fr[n - 1] << 8, vcrc_ref(fr, n - 2));
    fr[15] = 64; /* a router's hop limit, traffic class: the ICRC stands */
    fr[9] ^= 0x30;
    fr[0] = 0x30;
    fr[2] = 0x12; /* a router rewrote the LRH */
    CHECK_EQ_U64(ib_icrc(fr, n - 6), crc);
    fr[16 + 15] ^= 1; /* the SGID is covered */
    CHECK(ib_icrc(fr, n - 6) != crc);
    p->kind = PKT_PFC;
    CHECK_EQ_U64(ib_encode(p, fr, sizeof(fr), false), 0);
}

static void test_pcap_file(void)
{
    char path[] = "/tmp/rnicsim_pcap_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    char why[256];
    struct pcap_writer *w = pcap_open(path, why, sizeof(why));
    CHECK(w != NULL);
    struct pkt *p = mk(0x0a, PKT_EXT_RETH, 100);
    pcap_write_pkt(w, 1500, p, false);                        /* 1.5 ns -> 1 ns */
    pcap_write_pkt(w, 2 * SIM_S + 7 * SIM_NS + 999, p, true); /* 2 s 7 ns */
    p = mk(0x11, PKT_EXT_AETH, 0);
    pcap_write_pkt(w, 3 * SIM_US, p, false);
    CHECK_EQ_U64(pcap_frames(w), 3);
    CHECK_STR_CONTAINS(pcap_path(w), "rnicsim_pcap_");
    CHECK(pcap_close(w, why, sizeof(why)) == 0);

    size_t n = 0;
    const uint8_t *b = slurp(path, &n);
    CHECK(b != NULL);
    if (!b)
        return;
    uint8_t fr[ROCE_MAX_FRAME_BYTES];
    size_t l1 = roce_encode(mk(0x0a, PKT_EXT_RETH, 100), fr, sizeof(fr), false);
    size_t l3 = 62;
    CHECK_EQ_U64(n, 24 + 3 * 16 + 2 * l1 + l3);
    CHECK_EQ_U64(rd_le32(b), 0xa1b23c4du); /* nanosecond pcap */
    CHECK_EQ_U64(b[4] | b[5] << 8, 2);
    CHECK_EQ_U64(b[6] | b[7] << 8, 4);
    CHECK_EQ_U64(rd_le32(b + 16), 65535);
    CHECK_EQ_U64(rd_le32(b + 20), 1); /* LINKTYPE_ETHERNET */
    const uint8_t *r = b + 24;
    CHECK_EQ_U64(rd_le32(r), 0);
    CHECK_EQ_U64(rd_le32(r + 4), 1);
    CHECK_EQ_U64(rd_le32(r + 8), l1);
    CHECK_EQ_U64(rd_le32(r + 12), l1);
    CHECK(memcmp(r + 16, fr, l1) == 0);
    r += 16 + l1;
    CHECK_EQ_U64(rd_le32(r), 2);
    CHECK_EQ_U64(rd_le32(r + 4), 7);
    CHECK(memcmp(r + 16, fr, l1 - 4) == 0); /* bad ICRC: all but the ICRC */
    CHECK(memcmp(r + 16 + l1 - 4, fr + l1 - 4, 4) != 0);
    r += 16 + l1;
    CHECK_EQ_U64(rd_le32(r + 4), 3000);
    CHECK_EQ_U64(rd_le32(r + 8), 62);
    CHECK_EQ_U64(r[16 + 42], 0x11);
    unlink(path);

    CHECK(pcap_open("/nonexistent-dir/x.pcap", why, sizeof(why)) == NULL);
    CHECK_STR_CONTAINS(why, "/nonexistent-dir/x.pcap");
}

static void rx_free(struct sim *sim, void *ctx, struct pkt *p)
{
    (void)sim;
    (*(uint64_t *)ctx)++;
    (void)p; /* freed with the pool */
}

/* Taps on a link: TX at the end of serialisation (lost frames included),
 * RX at arrival (corrupted frames with a bad ICRC, lost ones absent). */
static void test_link_taps(void)
{
    char tx_path[] = "/tmp/rnicsim_tx_XXXXXX", rx_path[] = "/tmp/rnicsim_rx_XXXXXX";
    close(mkstemp(tx_path));
    close(mkstemp(rx_path));
    char why[256];
    struct sim *sim = sim_create(3);
    struct pkt_pool *pool = pkt_pool_create();
    struct pcap_writer *wtx = pcap_open(tx_path, why, sizeof(why)),
                       *wrx = pcap_open(rx_path, why, sizeof(why));
    struct link_params lp = {.rate_bps = 100000000000ull, .delay_ps = SIM_US, .corrupt_prob = 1.0};
    struct link *l = link_create(sim, "a->b", &lp, pool);
    uint64_t got = 0;
    link_connect(l, (struct fabric_sink){.rx = rx_free, .ctx = &got});
    CHECK(link_add_capture(l, wtx, LINK_TAP_TX) == 0);
    CHECK(link_add_capture(l, wrx, LINK_TAP_RX) == 0);
    CHECK(link_add_capture(l, NULL, LINK_TAP_RX) == -1);
    struct pkt *p = pkt_alloc(pool);
    *p = *mk(0x0a, PKT_EXT_RETH, 1000);
    p->frame_bytes = 14 + 20 + 8 + 12 + 16 + 1000 + 4 + 4; /* 1078 + 20 = 1098 B: 87.84 ns */
    link_send(l, p);
    sim_run(sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(got, 0);
    lp.corrupt_prob = 0.0;
    lp.loss_prob = 1.0;
    link_set_params(l, &lp);
    p = pkt_alloc(pool);
    *p = *mk(0x11, PKT_EXT_AETH, 0);
    p->frame_bytes = 66;
    link_send(l, p);
    sim_run(sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(pcap_frames(wtx), 2);
    CHECK_EQ_U64(pcap_frames(wrx), 1);
    CHECK(pcap_close(wtx, why, sizeof(why)) == 0);
    CHECK(pcap_close(wrx, why, sizeof(why)) == 0);
    size_t n;
    const uint8_t *b = slurp(tx_path, &n);
    CHECK(b && n == 24 + 16 + 1074 + 16 + 62);
    if (b) {
        CHECK_EQ_U64(rd_le32(b + 24 + 4), 87); /* 87.84 ns: end of serialisation */
        CHECK_EQ_U64(rd_le32(b + 40 + 1070), icrc_ref(b + 40, 1070)); /* good ICRC */
    }
    b = slurp(rx_path, &n);
    CHECK(b && n == 24 + 16 + 1074);
    if (b) {
        CHECK_EQ_U64(rd_le32(b + 24 + 4), 1087); /* + 1 us of cable: arrival */
        CHECK_EQ_U64(rd_le32(b + 40 + 1070), ~icrc_ref(b + 40, 1070)); /* corrupted */
    }
    link_destroy(l);
    pkt_pool_destroy(pool);
    sim_destroy(sim);
    unlink(tx_path);
    unlink(rx_path);
}

int main(void)
{
    test_vectors();
    test_encode();
    test_ib_encode();
    test_pcap_file();
    test_link_taps();
    return test_summary();
}
