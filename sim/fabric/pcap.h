/* Packet capture: fabric frames written to pcap files as the wire carries
 * them -- RoCEv2 on Ethernet ports, InfiniBand on InfiniBand ports -- so
 * that Wireshark and tshark dissect them.
 *
 * File: classic pcap with nanosecond timestamps (magic 0xa1b23c4d, version
 * 2.4), little-endian, one link type per file: LINKTYPE_ETHERNET (1), or
 * for an InfiniBand fabric LINKTYPE_ERF (197) with one ERF record of type
 * INFINIBAND (21) per packet (see "InfiniBand" below).  Timestamp =
 * simulated time of the capture point (link.h: LINK_TAP_TX / LINK_TAP_RX),
 * truncated to the nanosecond.
 *
 * RoCEv2 frame (what a port mirror shows; the Ethernet FCS is not written):
 *   Ethernet  dst 02:00:00:vv:vv:vv, src likewise, type 0x0800, where
 *             vvvvvv = node id + 1 (24 bits)
 *   IPv4      20 B, DSCP/ECN 0, id 0, DF, TTL 64, UDP, header checksum,
 *             src/dst 10.a.b.c with a.b.c = node id + 1 (10.0.0.1 = node 0)
 *   UDP       sport pkt.udp_sport (49152 if 0), dport 4791, checksum 0
 *   BTH       opcode, SE, M, PadCnt, TVer 0, P_Key 0xffff, dest QP, AckReq, PSN
 *   extension headers named by pkt.ext_hdrs, in IBA order:
 *             DETH, RETH, AtomicETH, AETH, AtomicAckETH, ImmDt
 *   payload   pkt.payload (payload_len bytes), then PadCnt zero bytes
 *   ICRC      CRC-32 over the masked pseudo-header (IBA Annex A17.3.3;
 *             as Linux rxe_icrc.c): 8 bytes of 0xff for the absent LRH,
 *             IPv4 with TOS, TTL and checksum set to all ones, UDP with
 *             checksum all ones, BTH with its FECN/BECN/Resv6a byte all
 *             ones, then the rest of the packet up to the ICRC; stored
 *             least significant byte first (like the Ethernet FCS)
 *   zero bytes up to the Ethernet minimum (60 B without FCS)
 *
 * InfiniBand packet (the whole packet, LRH to VCRC: p->frame_bytes):
 *   LRH       VL = the packet's priority (pkt.prio, from the SL), LVer 0,
 *             SL (pkt.ib_sl), LNH 2 (BTH next) or 3 (GRH next), DLID,
 *             PktLen (4-byte words, LRH .. ICRC), SLID; LID = node + 1
 *             (nic.h), a multicast group 0xC000 + group
 *   GRH       (framing ib-grh only) IPVer 6, TClass, FlowLabel, PayLen
 *             (BTH .. ICRC), NxtHdr 0x1B, HopLmt, SGID, DGID (the GIDs the
 *             verbs layer gives: ::ffff:10.a.b.c, ::ffff:224.x for a group)
 *   BTH ...   as above (the same bytes)
 *   ICRC      CRC-32 as above over: without a GRH the LRH with VL all ones,
 *             with a GRH 8 bytes of 0xff for the LRH and the GRH with
 *             TClass, FlowLabel and HopLmt all ones; BTH Resv8a all ones
 *   VCRC      CRC-16 (ib_vcrc) over LRH .. ICRC
 * Wireshark (up to at least 4.0) does not read LINKTYPE_INFINIBAND (247:
 * its wiretap maps no encapsulation to it), while its infiniband dissector
 * was written for Endace ERF records (packet-infiniband.c, "Infiniband/ERF
 * Dissection"): hence ERF.  PFC frames, which stand in for InfiniBand's
 * credit flow control on an IB fabric, are not written (pcap_skipped). */
#ifndef RNICSIM_FABRIC_PCAP_H
#define RNICSIM_FABRIC_PCAP_H

#include <stddef.h>
#include <stdint.h>

#include "../pkt.h"
#include "../sim.h"

enum {
    PCAP_LINKTYPE_ETHERNET = 1,
    PCAP_LINKTYPE_ERF = 197, /* Endace Extensible Record Format records */
    PCAP_ERF_HDR_BYTES = 16,
    PCAP_ERF_TYPE_INFINIBAND = 21,
    PCAP_ERF_FLAG_VLEN = 0x04,  /* varying record length */
    PCAP_ERF_FLAG_RXERR = 0x10, /* the frame failed its CRC at the receiver */
    PCAP_SNAPLEN = 65535,
    PCAP_FILE_HDR_BYTES = 24,
    PCAP_REC_HDR_BYTES = 16,
    ROCE_ETH_MIN_BYTES = 60, /* IEEE 802.3 64 B minimum frame minus the FCS */
    /* Largest encoded frame: Eth 14 + IPv4 20 + UDP 8 + BTH 12 + every
     * extension header (XRCETH 4, DETH 8, RETH 16, AtomicETH 28, AETH 4,
     * AtomicAckETH 8, ImmDt 4) + a 4 KiB payload + pad 3 + ICRC 4. */
    ROCE_MAX_FRAME_BYTES =
        14 + 20 + 8 + 12 + 4 + 8 + 16 + 28 + 4 + 8 + 4 + PKT_MAX_PAYLOAD_BYTES + 3 + 4,
    /* ... and of either framing: IB has LRH 8 + GRH 40 and the VCRC 2 where
     * RoCEv2 has 42 bytes of Ethernet/IPv4/UDP */
    PCAP_MAX_FRAME_BYTES = ROCE_MAX_FRAME_BYTES - 42 + 8 + 40 + 2,
};

/* What a capture file holds: Ethernet frames (RoCEv2, PFC), or InfiniBand
 * packets in ERF records.  One link type per pcap file: a scenario's
 * fabric is all one link layer (one hardware.nic for every host). */
enum pcap_link {
    PCAP_LINK_ETHERNET = 0,
    PCAP_LINK_IB_ERF,
};

/* Offsets in an encoded frame (IPv4, no VLAN). */
enum {
    ROCE_OFF_IP = PKT_ETH_HDR_BYTES,
    ROCE_OFF_UDP = ROCE_OFF_IP + PKT_IPV4_HDR_BYTES,
    ROCE_OFF_BTH = ROCE_OFF_UDP + PKT_UDP_HDR_BYTES,
    ROCE_OFF_EXT = ROCE_OFF_BTH + PKT_BTH_BYTES,
};

/* Encode `p` into buf (at least ROCE_MAX_FRAME_BYTES); returns the frame
 * length (no FCS).  With `bad_icrc` the ICRC is written inverted, as a
 * corrupted frame would fail it. */
size_t roce_encode(const struct pkt *p, uint8_t *buf, size_t cap, bool bad_icrc);
/* The ICRC of an encoded IPv4 RoCEv2 frame whose ICRC starts at `icrc_off`
 * (= 14 + IPv4 total length - 4).  The 4 bytes to store are the value's
 * little-endian bytes. */
uint32_t roce_icrc(const uint8_t *frame, size_t icrc_off);
/* Encode `p` as an InfiniBand packet (LRH [GRH] BTH ... ICRC VCRC, framing
 * from p->framing) into buf (at least PCAP_MAX_FRAME_BYTES); returns its
 * length, 0 for a PFC frame.  `bad_crc` inverts the ICRC and the VCRC. */
size_t ib_encode(const struct pkt *p, uint8_t *buf, size_t cap, bool bad_crc);
/* The ICRC of an encoded IB packet whose ICRC starts at `icrc_off` (stored
 * least significant byte first) and the VCRC of its first n bytes (LRH ..
 * ICRC; stored least significant byte first). */
uint32_t ib_icrc(const uint8_t *frame, size_t icrc_off);
uint16_t ib_vcrc(const uint8_t *b, size_t n);
/* The LID a node answers to (node + 1); 0xC000 + group for a multicast
 * destination (PKT_MCAST_NODE | group). */
uint16_t ib_node_lid(uint32_t node);
/* IPv4 header checksum (RFC 791 / RFC 1071) of `hdr` (20 bytes, with its
 * checksum field counted as is: 0 when computing, the stored value when
 * verifying -- a valid header then sums to 0). */
uint16_t ipv4_checksum(const uint8_t *hdr);
/* 10.a.b.c / 02:00:00:a:b:c of a node (node + 1 in the low 24 bits). */
uint32_t roce_node_ipv4(uint32_t node);
void roce_node_mac(uint32_t node, uint8_t mac[6]);

struct pcap_writer;

/* Create (truncate) `path` and write the file header.  NULL with a message
 * in `why` on error. */
struct pcap_writer *pcap_open(const char *path, char *why, size_t why_len);
/* The same for a file of link type `link` (pcap_open: Ethernet). */
struct pcap_writer *pcap_open_link(const char *path, enum pcap_link link, char *why,
                                   size_t why_len);
/* Append one frame stamped `t_ps`.  Write errors are remembered and
 * reported by pcap_close. */
void pcap_write_pkt(struct pcap_writer *w, sim_time_t t_ps, const struct pkt *p, bool bad_icrc);
/* The virtual address a RETH or AtomicETH of `p` shows in the file for
 * `va` (with key `rkey`): the simulator's buffers live at process
 * addresses that differ from run to run, so the world maps them to
 * deterministic ones (nic_wire_va); without a map they are written as is. */
typedef uint64_t (*pcap_va_fn)(void *ctx, const struct pkt *p, uint32_t rkey, uint64_t va);
void pcap_set_va_map(struct pcap_writer *w, pcap_va_fn fn, void *ctx);
uint64_t pcap_frames(const struct pcap_writer *w);
/* Frames not written because the file's link type has no form for them
 * (PFC frames in an InfiniBand capture). */
uint64_t pcap_skipped(const struct pcap_writer *w);
const char *pcap_path(const struct pcap_writer *w);
/* Flush and close; -1 with `why` filled if anything failed to be written. */
int pcap_close(struct pcap_writer *w, char *why, size_t why_len);

#endif /* RNICSIM_FABRIC_PCAP_H */
