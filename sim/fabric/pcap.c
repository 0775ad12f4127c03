/* Packet capture in RoCEv2 encoding (layout in pcap.h).
 *
 * The encoder writes every field big-endian by hand (no struct overlays),
 * so the bytes do not depend on the host's byte order or padding rules.
 * The ICRC follows IBA Annex A17.3.3 as Linux rxe computes it
 * (drivers/infiniband/sw/rxe/rxe_icrc.c): standard CRC-32 (reflected,
 * polynomial 0xedb88320, initial value and final XOR all ones) over
 * 8 x 0xff + masked IPv4/UDP/BTH + the rest of the packet. */
#include "pcap.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- CRC-32 */

/* CRC-32 (reflected, polynomial 0xedb88320) byte table. */
static const uint32_t crc_table[256] = {
    0x00000000u, 0x77073096u, 0xee0e612cu, 0x990951bau, 0x076dc419u, 0x706af48fu, 0xe963a535u,
    0x9e6495a3u, 0x0edb8832u, 0x79dcb8a4u, 0xe0d5e91eu, 0x97d2d988u, 0x09b64c2bu, 0x7eb17cbdu,
    0xe7b82d07u, 0x90bf1d91u, 0x1db71064u, 0x6ab020f2u, 0xf3b97148u, 0x84be41deu, 0x1adad47du,
    0x6ddde4ebu, 0xf4d4b551u, 0x83d385c7u, 0x136c9856u, 0x646ba8c0u, 0xfd62f97au, 0x8a65c9ecu,
    0x14015c4fu, 0x63066cd9u, 0xfa0f3d63u, 0x8d080df5u, 0x3b6e20c8u, 0x4c69105eu, 0xd56041e4u,
    0xa2677172u, 0x3c03e4d1u, 0x4b04d447u, 0xd20d85fdu, 0xa50ab56bu, 0x35b5a8fau, 0x42b2986cu,
    0xdbbbc9d6u, 0xacbcf940u, 0x32d86ce3u, 0x45df5c75u, 0xdcd60dcfu, 0xabd13d59u, 0x26d930acu,
    0x51de003au, 0xc8d75180u, 0xbfd06116u, 0x21b4f4b5u, 0x56b3c423u, 0xcfba9599u, 0xb8bda50fu,
    0x2802b89eu, 0x5f058808u, 0xc60cd9b2u, 0xb10be924u, 0x2f6f7c87u, 0x58684c11u, 0xc1611dabu,
    0xb6662d3du, 0x76dc4190u, 0x01db7106u, 0x98d220bcu, 0xefd5102au, 0x71b18589u, 0x06b6b51fu,
    0x9fbfe4a5u, 0xe8b8d433u, 0x7807c9a2u, 0x0f00f934u, 0x9609a88eu, 0xe10e9818u, 0x7f6a0dbbu,
    0x086d3d2du, 0x91646c97u, 0xe6635c01u, 0x6b6b51f4u, 0x1c6c6162u, 0x856530d8u, 0xf262004eu,
    0x6c0695edu, 0x1b01a57bu, 0x8208f4c1u, 0xf50fc457u, 0x65b0d9c6u, 0x12b7e950u, 0x8bbeb8eau,
    0xfcb9887cu, 0x62dd1ddfu, 0x15da2d49u, 0x8cd37cf3u, 0xfbd44c65u, 0x4db26158u, 0x3ab551ceu,
    0xa3bc0074u, 0xd4bb30e2u, 0x4adfa541u, 0x3dd895d7u, 0xa4d1c46du, 0xd3d6f4fbu, 0x4369e96au,
    0x346ed9fcu, 0xad678846u, 0xda60b8d0u, 0x44042d73u, 0x33031de5u, 0xaa0a4c5fu, 0xdd0d7cc9u,
    0x5005713cu, 0x270241aau, 0xbe0b1010u, 0xc90c2086u, 0x5768b525u, 0x206f85b3u, 0xb966d409u,
    0xce61e49fu, 0x5edef90eu, 0x29d9c998u, 0xb0d09822u, 0xc7d7a8b4u, 0x59b33d17u, 0x2eb40d81u,
    0xb7bd5c3bu, 0xc0ba6cadu, 0xedb88320u, 0x9abfb3b6u, 0x03b6e20cu, 0x74b1d29au, 0xead54739u,
    0x9dd277afu, 0x04db2615u, 0x73dc1683u, 0xe3630b12u, 0x94643b84u, 0x0d6d6a3eu, 0x7a6a5aa8u,
    0xe40ecf0bu, 0x9309ff9du, 0x0a00ae27u, 0x7d079eb1u, 0xf00f9344u, 0x8708a3d2u, 0x1e01f268u,
    0x6906c2feu, 0xf762575du, 0x806567cbu, 0x196c3671u, 0x6e6b06e7u, 0xfed41b76u, 0x89d32be0u,
    0x10da7a5au, 0x67dd4accu, 0xf9b9df6fu, 0x8ebeeff9u, 0x17b7be43u, 0x60b08ed5u, 0xd6d6a3e8u,
    0xa1d1937eu, 0x38d8c2c4u, 0x4fdff252u, 0xd1bb67f1u, 0xa6bc5767u, 0x3fb506ddu, 0x48b2364bu,
    0xd80d2bdau, 0xaf0a1b4cu, 0x36034af6u, 0x41047a60u, 0xdf60efc3u, 0xa867df55u, 0x316e8eefu,
    0x4669be79u, 0xcb61b38cu, 0xbc66831au, 0x256fd2a0u, 0x5268e236u, 0xcc0c7795u, 0xbb0b4703u,
    0x220216b9u, 0x5505262fu, 0xc5ba3bbeu, 0xb2bd0b28u, 0x2bb45a92u, 0x5cb36a04u, 0xc2d7ffa7u,
    0xb5d0cf31u, 0x2cd99e8bu, 0x5bdeae1du, 0x9b64c2b0u, 0xec63f226u, 0x756aa39cu, 0x026d930au,
    0x9c0906a9u, 0xeb0e363fu, 0x72076785u, 0x05005713u, 0x95bf4a82u, 0xe2b87a14u, 0x7bb12baeu,
    0x0cb61b38u, 0x92d28e9bu, 0xe5d5be0du, 0x7cdcefb7u, 0x0bdbdf21u, 0x86d3d2d4u, 0xf1d4e242u,
    0x68ddb3f8u, 0x1fda836eu, 0x81be16cdu, 0xf6b9265bu, 0x6fb077e1u, 0x18b74777u, 0x88085ae6u,
    0xff0f6a70u, 0x66063bcau, 0x11010b5cu, 0x8f659effu, 0xf862ae69u, 0x616bffd3u, 0x166ccf45u,
    0xa00ae278u, 0xd70dd2eeu, 0x4e048354u, 0x3903b3c2u, 0xa7672661u, 0xd06016f7u, 0x4969474du,
    0x3e6e77dbu, 0xaed16a4au, 0xd9d65adcu, 0x40df0b66u, 0x37d83bf0u, 0xa9bcae53u, 0xdebb9ec5u,
    0x47b2cf7fu, 0x30b5ffe9u, 0xbdbdf21cu, 0xcabac28au, 0x53b39330u, 0x24b4a3a6u, 0xbad03605u,
    0xcdd70693u, 0x54de5729u, 0x23d967bfu, 0xb3667a2eu, 0xc4614ab8u, 0x5d681b02u, 0x2a6f2b94u,
    0xb40bbe37u, 0xc30c8ea1u, 0x5a05df1bu, 0x2d02ef8du,
};

/* Running CRC without the final inversion. */
static uint32_t crc_update(uint32_t crc, const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        crc = crc_table[(crc ^ b[i]) & 0xff] ^ (crc >> 8);
    return crc;
}

uint32_t roce_icrc(const uint8_t *frame, size_t icrc_off)
{
    static const uint8_t masked_lrh[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    uint8_t ps[PKT_IPV4_HDR_BYTES + PKT_UDP_HDR_BYTES + PKT_BTH_BYTES];
    memcpy(ps, frame + ROCE_OFF_IP, sizeof(ps));
    ps[1] = 0xff;                   /* IPv4 TOS (DSCP + ECN) */
    ps[8] = 0xff;                   /* TTL */
    ps[10] = ps[11] = 0xff;         /* header checksum */
    ps[20 + 6] = ps[20 + 7] = 0xff; /* UDP checksum */
    ps[28 + 4] = 0xff;              /* BTH: FECN, BECN, Resv6a */
    uint32_t crc = crc_update(0xffffffffu, masked_lrh, sizeof(masked_lrh));
    crc = crc_update(crc, ps, sizeof(ps));
    crc = crc_update(crc, frame + ROCE_OFF_EXT, icrc_off - ROCE_OFF_EXT);
    return ~crc;
}

uint16_t ipv4_checksum(const uint8_t *hdr)
{
    uint32_t sum = 0;
    for (int i = 0; i < PKT_IPV4_HDR_BYTES; i += 2)
        sum += (uint32_t)hdr[i] << 8 | hdr[i + 1];
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return (uint16_t)~sum;
}

/* ---------------------------------------------------------------- encoder */

static uint8_t *put8(uint8_t *b, uint8_t v)
{
    *b = v;
    return b + 1;
}
static uint8_t *put16(uint8_t *b, uint16_t v)
{
    b[0] = (uint8_t)(v >> 8);
    b[1] = (uint8_t)v;
    return b + 2;
}
static uint8_t *put24(uint8_t *b, uint32_t v)
{
    b[0] = (uint8_t)(v >> 16);
    b[1] = (uint8_t)(v >> 8);
    b[2] = (uint8_t)v;
    return b + 3;
}
static uint8_t *put32(uint8_t *b, uint32_t v)
{
    return put16(put16(b, (uint16_t)(v >> 16)), (uint16_t)v);
}
static uint8_t *put64(uint8_t *b, uint64_t v)
{
    return put32(put32(b, (uint32_t)(v >> 32)), (uint32_t)v);
}

uint32_t roce_node_ipv4(uint32_t node)
{
    return (10u << 24) | ((node + 1) & 0xffffffu);
}

void roce_node_mac(uint32_t node, uint8_t mac[6])
{
    uint32_t v = (node + 1) & 0xffffffu;
    /* 02: locally administered, unicast (IEEE 802 U/L bit) */
    mac[0] = 0x02;
    mac[1] = 0x00;
    mac[2] = 0x00;
    mac[3] = (uint8_t)(v >> 16);
    mac[4] = (uint8_t)(v >> 8);
    mac[5] = (uint8_t)v;
}

enum {
    ROCE_P_KEY_DEFAULT = 0xffff, /* IBA 10.9.1.1: default partition, full member */
    ROCE_IPV4_TTL = 64,          /* Linux net.ipv4.ip_default_ttl */
    ROCE_UDP_SPORT_MIN = 0xc000, /* rdma_get_udp_sport() range 49152..65535 */
    IP_PROTO_UDP = 17,
    ETHERTYPE_IPV4 = 0x0800,
};

/* A PFC pause frame (IEEE 802.1Qbb, MAC control, IEEE 802.3 Annex 31D):
 * destination 01:80:C2:00:00:01, source the sender's MAC, EtherType
 * 0x8808, opcode 0x0101, class-enable vector, eight 16-bit pause times,
 * zero padding to 60 bytes (64 with the FCS, which is not written). */
static size_t pfc_encode(const struct pkt *p, uint8_t *buf)
{
    static const uint8_t dst[6] = {0x01, 0x80, 0xc2, 0x00, 0x00, 0x01};
    memset(buf, 0, ROCE_ETH_MIN_BYTES);
    memcpy(buf, dst, 6);
    roce_node_mac(p->src_node, buf + 6);
    uint8_t *b = put16(buf + 12, 0x8808);
    b = put16(b, 0x0101);
    b = put16(b, p->pfc_enable);
    for (unsigned c = 0; c < PKT_PRIOS; c++)
        b = put16(b, p->pfc_quanta[c]);
    return ROCE_ETH_MIN_BYTES;
}

static size_t encode(const struct pkt *p, uint64_t reth_va, uint64_t atomic_va, uint8_t *buf,
                     size_t cap, bool bad_icrc);

size_t roce_encode(const struct pkt *p, uint8_t *buf, size_t cap, bool bad_icrc)
{
    return encode(p, p->reth_va, p->atomic_va, buf, cap, bad_icrc);
}

/* The transport part of `p` at `b`: BTH, extension headers, payload and
 * pad, the same bytes in either framing.  Returns the end (where the ICRC
 * goes). */
static uint8_t *put_transport(const struct pkt *p, uint64_t reth_va, uint64_t atomic_va, uint8_t *b)
{
    uint32_t len = p->payload_len <= PKT_MAX_PAYLOAD_BYTES ? p->payload_len : PKT_MAX_PAYLOAD_BYTES;
    uint32_t pad = (4u - (len & 3u)) & 3u;
    b = put8(b, p->opcode);
    b = put8(b, (uint8_t)((p->se ? 0x80 : 0) | (p->migreq ? 0x40 : 0) | (pad << 4) | 0 /* TVer */));
    b = put16(b, ROCE_P_KEY_DEFAULT);
    b = put8(b, 0); /* FECN, BECN, Resv6a */
    b = put24(b, p->dest_qpn & 0xffffffu);
    b = put8(b, p->ack_req ? 0x80 : 0);
    b = put24(b, p->psn & 0xffffffu);
    uint32_t x = p->ext_hdrs;
    if (x & PKT_EXT_XRCETH) { /* XRCETH (IBA Annex A14): Resv8, XRC SRQ number */
        b = put8(b, 0);
        b = put24(b, p->xrc_srqn & 0xffffffu);
    }
    if (x & PKT_EXT_DETH) { /* IBA 9.3.3: Q_Key, Resv8, SrcQP */
        b = put32(b, p->deth_qkey);
        b = put8(b, 0);
        b = put24(b, p->src_qpn & 0xffffffu);
    }
    if (x & PKT_EXT_RETH) { /* IBA 9.3.2: VA, R_Key, DMA Length */
        b = put64(b, reth_va);
        b = put32(b, p->reth_rkey);
        b = put32(b, p->reth_dma_len);
    }
    if (x & PKT_EXT_ATMETH) { /* IBA 9.3.4: VA, R_Key, Swap (Add) Data, Compare Data */
        b = put64(b, atomic_va);
        b = put32(b, p->atomic_rkey);
        b = put64(b, p->atomic_swap_add);
        b = put64(b, p->atomic_compare);
    }
    if (x & PKT_EXT_AETH) { /* IBA 9.3.5: Syndrome, MSN */
        b = put8(b, p->aeth_syndrome);
        b = put24(b, p->aeth_msn & 0xffffffu);
    }
    if (x & PKT_EXT_ATMACK) /* IBA 9.3.6: original remote data */
        b = put64(b, p->atomic_orig);
    if (x & PKT_EXT_IMMDT) { /* IBA 9.3.7: already in network byte order */
        memcpy(b, &p->imm_data, 4);
        b += 4;
    }
    if (p->no_bytes) /* `payload: none`: the frame has the right size, zeros */
        memset(b, 0, len);
    else if (len) /* a packet without payload has no buffer (pkt.h) */
        memcpy(b, p->payload, len);
    b += len;
    memset(b, 0, pad);
    return b + pad;
}

/* roce_encode with the RETH / AtomicETH virtual addresses given. */
static size_t encode(const struct pkt *p, uint64_t reth_va, uint64_t atomic_va, uint8_t *buf,
                     size_t cap, bool bad_icrc)
{
    if (p->kind == PKT_PFC)
        return cap >= ROCE_ETH_MIN_BYTES ? pfc_encode(p, buf) : 0;
    if (cap < ROCE_MAX_FRAME_BYTES)
        return 0;
    /* transport part first (BTH .. payload, pad), then the lengths are known */
    uint8_t *b = put_transport(p, reth_va, atomic_va, buf + ROCE_OFF_BTH);
    size_t icrc_off = (size_t)(b - buf);
    size_t ip_len = icrc_off + PKT_ICRC_BYTES - ROCE_OFF_IP;

    /* Ethernet */
    uint8_t *e = buf;
    roce_node_mac(p->dst_node, e);
    roce_node_mac(p->src_node, e + 6);
    put16(e + 12, ETHERTYPE_IPV4);
    /* IPv4 */
    uint8_t *ip = buf + ROCE_OFF_IP;
    ip[0] = 0x45;                               /* version 4, IHL 5 words */
    ip[1] = (uint8_t)((p->prio << 5) | p->ecn); /* DSCP = class selector of the priority; ECN */
    put16(ip + 2, (uint16_t)ip_len);
    put16(ip + 4, 0);      /* identification (atomic datagram, RFC 6864) */
    put16(ip + 6, 0x4000); /* DF, offset 0 */
    ip[8] = ROCE_IPV4_TTL;
    ip[9] = IP_PROTO_UDP;
    put16(ip + 10, 0);
    put32(ip + 12, roce_node_ipv4(p->src_node));
    put32(ip + 16, roce_node_ipv4(p->dst_node));
    put16(ip + 10, ipv4_checksum(ip));
    /* UDP */
    uint8_t *u = buf + ROCE_OFF_UDP;
    put16(u, p->udp_sport ? p->udp_sport : ROCE_UDP_SPORT_MIN);
    put16(u + 2, PKT_ROCEV2_UDP_PORT);
    put16(u + 4, (uint16_t)(ip_len - PKT_IPV4_HDR_BYTES));
    put16(u + 6, 0); /* no checksum (RoCEv2 Annex A17.3.1 allows 0) */

    uint32_t icrc = roce_icrc(buf, icrc_off);
    if (bad_icrc)
        icrc = ~icrc;
    for (int i = 0; i < 4; i++)
        buf[icrc_off + (size_t)i] = (uint8_t)(icrc >> (8 * i));
    size_t n = icrc_off + PKT_ICRC_BYTES;
    if (n < ROCE_ETH_MIN_BYTES) {
        memset(buf + n, 0, ROCE_ETH_MIN_BYTES - n);
        n = ROCE_ETH_MIN_BYTES;
    }
    return n;
}

/* ---------------------------------------------------------------- InfiniBand */

enum {
    IB_LNH_LOCAL = 0x2,     /* IBA 7.7.7 LNH: BTH follows the LRH ("IBA local") */
    IB_LNH_GLOBAL = 0x3,    /* a GRH follows ("IBA global") */
    IB_GRH_NXTHDR = 0x1b,   /* IBA 8.3: NxtHdr of an IBA transport packet */
    IB_MCAST_LID = 0xc000,  /* IBA 4.1.1: multicast LIDs 0xC000..0xFFFE */
    IB_VL_PRIOS = PKT_PRIOS /* data VLs the model uses: one per fabric priority */
};

/* VCRC (IBA 7.8.2): CRC-16, polynomial x^16+x^12+x^3+x+1 (0x100B),
 * reflected (0xD008), initial value and final XOR 0xFFFF -- as Endace's DAG
 * software computes it (dagcrc_infiniband_vcrc16_r). */
uint16_t ib_vcrc(const uint8_t *b, size_t n)
{
    uint16_t crc = 0xffffu;
    for (size_t i = 0; i < n; i++) {
        crc ^= b[i];
        for (int k = 0; k < 8; k++)
            crc = (crc & 1u) ? (uint16_t)((crc >> 1) ^ 0xd008u) : (uint16_t)(crc >> 1);
    }
    return (uint16_t)~crc;
}

uint32_t ib_icrc(const uint8_t *frame, size_t icrc_off)
{
    static const uint8_t ones[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    bool global = (frame[1] & 0x3u) == IB_LNH_GLOBAL;
    size_t bth = PKT_IB_LRH_BYTES + (global ? PKT_IB_GRH_BYTES : 0u);
    uint8_t hdr[PKT_IB_LRH_BYTES + PKT_IB_GRH_BYTES + PKT_BTH_BYTES];
    memcpy(hdr, frame, bth + PKT_BTH_BYTES);
    uint32_t crc = 0xffffffffu;
    if (global) {
        /* the whole LRH (a router rewrites it), GRH TClass, FlowLabel and
         * HopLmt */
        crc = crc_update(crc, ones, sizeof(ones));
        hdr[8] |= 0x0f;
        hdr[9] = hdr[10] = hdr[11] = 0xff;
        hdr[8 + 7] = 0xff;
        crc = crc_update(crc, hdr + PKT_IB_LRH_BYTES, PKT_IB_GRH_BYTES);
    } else {
        hdr[0] |= 0xf0; /* LRH VL (a switch may change it) */
        crc = crc_update(crc, hdr, PKT_IB_LRH_BYTES);
    }
    hdr[bth + 4] = 0xff; /* BTH FECN, BECN, Resv6a */
    crc = crc_update(crc, hdr + bth, PKT_BTH_BYTES);
    crc = crc_update(crc, frame + bth + PKT_BTH_BYTES, icrc_off - bth - PKT_BTH_BYTES);
    return ~crc;
}

uint16_t ib_node_lid(uint32_t node)
{
    if (pkt_node_is_mcast(node))
        return (uint16_t)(IB_MCAST_LID + (node & ~PKT_MCAST_NODE) % (0xffffu - IB_MCAST_LID));
    return (uint16_t)(node + 1);
}

/* The GID of a node as the verbs layer gives it (nic_gid_of_node): the
 * IPv4-mapped ::ffff:10.a.b.c of its RoCEv2 address; a multicast group's
 * ::ffff:224.0.0.0 + group (nic_mcast_group_of_gid). */
static uint8_t *put_gid(uint8_t *b, uint32_t node)
{
    memset(b, 0, 10);
    b[10] = b[11] = 0xff;
    uint32_t v4 =
        pkt_node_is_mcast(node) ? 0xe0000000u | (node & 0x0fffffffu) : roce_node_ipv4(node);
    return put32(b + 12, v4);
}

static size_t encode_ib(const struct pkt *p, uint64_t reth_va, uint64_t atomic_va, uint8_t *buf,
                        size_t cap, bool bad_crc)
{
    if (p->kind == PKT_PFC || cap < PCAP_MAX_FRAME_BYTES)
        return 0;
    bool global = p->framing == PKT_FRAMING_IB_GLOBAL;
    size_t bth = PKT_IB_LRH_BYTES + (global ? PKT_IB_GRH_BYTES : 0u);
    uint8_t *b = put_transport(p, reth_va, atomic_va, buf + bth);
    size_t icrc_off = (size_t)(b - buf);
    size_t n = icrc_off + PKT_ICRC_BYTES + PKT_IB_VCRC_BYTES;

    /* LRH (IBA 7.7): VL | LVer 0, SL | LNH, DLID, PktLen (4-byte words from
     * the LRH to the ICRC), SLID */
    uint8_t *l = buf;
    l[0] = (uint8_t)((p->prio % IB_VL_PRIOS) << 4);
    l[1] = (uint8_t)((p->ib_sl << 4) | (global ? IB_LNH_GLOBAL : IB_LNH_LOCAL));
    put16(l + 2, ib_node_lid(p->dst_node));
    put16(l + 4, (uint16_t)(((icrc_off + PKT_ICRC_BYTES) / 4) & 0x7ffu));
    put16(l + 6, ib_node_lid(p->src_node));
    if (global) { /* GRH (IBA 8.3) */
        uint8_t *g = buf + PKT_IB_LRH_BYTES;
        put32(g, (6u << 28) | ((uint32_t)p->grh_tclass << 20) | p->grh_flow_label);
        put16(g + 4, (uint16_t)(icrc_off + PKT_ICRC_BYTES - bth)); /* PayLen: BTH .. ICRC */
        g[6] = IB_GRH_NXTHDR;
        g[7] = p->grh_hop_limit;
        put_gid(g + 8, p->src_node);
        put_gid(g + 24, p->dst_node);
    }
    uint32_t icrc = ib_icrc(buf, icrc_off);
    if (bad_crc)
        icrc = ~icrc;
    for (int i = 0; i < 4; i++) /* least significant byte first, as RoCEv2's */
        buf[icrc_off + (size_t)i] = (uint8_t)(icrc >> (8 * i));
    uint16_t vcrc = ib_vcrc(buf, icrc_off + PKT_ICRC_BYTES);
    if (bad_crc)
        vcrc = (uint16_t)~vcrc;
    buf[n - 2] = (uint8_t)vcrc;
    buf[n - 1] = (uint8_t)(vcrc >> 8);
    return n;
}

size_t ib_encode(const struct pkt *p, uint8_t *buf, size_t cap, bool bad_crc)
{
    return encode_ib(p, p->reth_va, p->atomic_va, buf, cap, bad_crc);
}

/* ---------------------------------------------------------------- writer */

struct pcap_writer {
    FILE *f;
    char *path;
    enum pcap_link link;
    uint64_t frames, skipped;
    int err;          /* first errno seen, 0 if none */
    pcap_va_fn va_fn; /* the wire's view of RETH / AtomicETH addresses */
    void *va_ctx;
    uint8_t buf[PCAP_REC_HDR_BYTES + PCAP_ERF_HDR_BYTES + PCAP_MAX_FRAME_BYTES];
};

static void le32(uint8_t *b, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        b[i] = (uint8_t)(v >> (8 * i));
}
static void le16(uint8_t *b, uint16_t v)
{
    b[0] = (uint8_t)v;
    b[1] = (uint8_t)(v >> 8);
}

struct pcap_writer *pcap_open(const char *path, char *why, size_t why_len)
{
    return pcap_open_link(path, PCAP_LINK_ETHERNET, why, why_len);
}

struct pcap_writer *pcap_open_link(const char *path, enum pcap_link link, char *why, size_t why_len)
{
    struct pcap_writer *w = calloc(1, sizeof(*w));
    if (!w || !(w->path = strdup(path))) {
        free(w);
        snprintf(why, why_len, "out of memory");
        return NULL;
    }
    w->f = fopen(path, "wb");
    if (!w->f) {
        snprintf(why, why_len, "cannot create '%s': %s", path, strerror(errno));
        free(w->path);
        free(w);
        return NULL;
    }
    w->link = link;
    uint8_t h[PCAP_FILE_HDR_BYTES];
    le32(h, 0xa1b23c4du); /* pcap, nanosecond timestamps */
    le16(h + 4, 2);       /* version 2.4 */
    le16(h + 6, 4);
    le32(h + 8, 0);  /* thiszone */
    le32(h + 12, 0); /* sigfigs */
    le32(h + 16, PCAP_SNAPLEN);
    le32(h + 20, link == PCAP_LINK_IB_ERF ? PCAP_LINKTYPE_ERF : PCAP_LINKTYPE_ETHERNET);
    if (fwrite(h, sizeof(h), 1, w->f) != 1)
        w->err = errno ? errno : EIO;
    return w;
}

void pcap_write_pkt(struct pcap_writer *w, sim_time_t t_ps, const struct pkt *p, bool bad_icrc)
{
    if (!w || w->err)
        return;
    uint64_t reth_va = p->reth_va, atomic_va = p->atomic_va;
    if (w->va_fn && (p->ext_hdrs & PKT_EXT_RETH))
        reth_va = w->va_fn(w->va_ctx, p, p->reth_rkey, p->reth_va);
    if (w->va_fn && (p->ext_hdrs & PKT_EXT_ATMETH))
        atomic_va = w->va_fn(w->va_ctx, p, p->atomic_rkey, p->atomic_va);
    uint64_t ns = t_ps / SIM_NS;
    size_t n;
    if (w->link == PCAP_LINK_IB_ERF) {
        /* an InfiniBand port carries no PFC frames (they stand in for its
         * credit flow control, which has no frame here): not written */
        uint8_t *erf = w->buf + PCAP_REC_HDR_BYTES;
        n = encode_ib(p, reth_va, atomic_va, erf + PCAP_ERF_HDR_BYTES, PCAP_MAX_FRAME_BYTES,
                      bad_icrc);
        if (n == 0) {
            w->skipped++;
            return;
        }
        /* ERF record header (Endace ERF, type 21 INFINIBAND): timestamp as
         * seconds . 2^-32 fractions, little-endian; type; flags (varying
         * record length; RX error for a frame that fails its CRCs); record
         * length, loss counter, wire length, big-endian */
        uint64_t frac = ((ns % 1000000000u) << 32) / 1000000000u;
        le32(erf, (uint32_t)frac);
        le32(erf + 4, (uint32_t)(ns / 1000000000u));
        erf[8] = PCAP_ERF_TYPE_INFINIBAND;
        erf[9] = (uint8_t)(PCAP_ERF_FLAG_VLEN | (bad_icrc ? PCAP_ERF_FLAG_RXERR : 0));
        put16(erf + 10, (uint16_t)(PCAP_ERF_HDR_BYTES + n));
        put16(erf + 12, 0);
        put16(erf + 14, (uint16_t)n);
        n += PCAP_ERF_HDR_BYTES;
    } else {
        n = encode(p, reth_va, atomic_va, w->buf + PCAP_REC_HDR_BYTES, ROCE_MAX_FRAME_BYTES,
                   bad_icrc);
    }
    le32(w->buf, (uint32_t)(ns / 1000000000u));
    le32(w->buf + 4, (uint32_t)(ns % 1000000000u));
    le32(w->buf + 8, (uint32_t)n);
    le32(w->buf + 12, (uint32_t)n);
    if (fwrite(w->buf, PCAP_REC_HDR_BYTES + n, 1, w->f) != 1)
        w->err = errno ? errno : EIO;
    else
        w->frames++;
}

void pcap_set_va_map(struct pcap_writer *w, pcap_va_fn fn, void *ctx)
{
    w->va_fn = fn;
    w->va_ctx = ctx;
}

uint64_t pcap_frames(const struct pcap_writer *w)
{
    return w->frames;
}

uint64_t pcap_skipped(const struct pcap_writer *w)
{
    return w->skipped;
}

const char *pcap_path(const struct pcap_writer *w)
{
    return w->path;
}

int pcap_close(struct pcap_writer *w, char *why, size_t why_len)
{
    if (!w)
        return 0;
    int err = w->err;
    if (fclose(w->f) != 0 && !err)
        err = errno ? errno : EIO;
    if (err)
        snprintf(why, why_len, "error writing '%s': %s", w->path, strerror(err));
    free(w->path);
    free(w);
    return err ? -1 : 0;
}
