/* RoCEv2 header rewriting for switch programs: what a deparser emits when
 * a program changes the BTH opcode (the extension headers it implies, the
 * frame length), inserts a small payload, or addresses a packet from the
 * switch.  The facts come from the NIC's IBA opcode table (sim/nic/opcode.h),
 * so a rewritten packet is exactly what a NIC would have built; its ICRC is
 * whatever the encoder computes over the new headers (sim/fabric/pcap.c),
 * i.e. the switch recomputes it. */
#include <string.h>

#include "../nic/nic.h"
#include "../nic/opcode.h"
#include "../nic/ratelimit.h"
#include "ps_internal.h"

_Static_assert(PS_ROCE_OPCODE_CNP == NIC_OPCODE_CNP, "the CNP opcode programs see is the NIC's");

void ps_roce_set_opcode(struct pkt *p, uint8_t opcode)
{
    p->opcode = opcode;
    p->ext_hdrs = nic_opcode(opcode)->mask & NIC_OPF_EXT_HDRS;
    p->frame_bytes = nic_frame_bytes(p->framing, opcode, p->payload_len);
}

void ps_roce_set_inline(struct pswitch *ps, struct pkt *p, const void *data, uint32_t len)
{
    if (len > PKT_MAX_PAYLOAD_BYTES)
        len = PKT_MAX_PAYLOAD_BYTES;
    if (len && !p->no_bytes) /* `payload: none`: the size alone */
        memcpy(pkt_payload_reserve(ps->pool, p, len), data, len);
    p->payload_len = len;
    p->frame_bytes = nic_frame_bytes(p->framing, p->opcode, len);
}

int ps_roce_resp_to_write(uint8_t opcode)
{
    switch (opcode) {
    case IB_OPCODE_RC_RDMA_READ_RESPONSE_FIRST:
        return IB_OPCODE_RC_RDMA_WRITE_FIRST;
    case IB_OPCODE_RC_RDMA_READ_RESPONSE_MIDDLE:
        return IB_OPCODE_RC_RDMA_WRITE_MIDDLE;
    case IB_OPCODE_RC_RDMA_READ_RESPONSE_LAST:
        return IB_OPCODE_RC_RDMA_WRITE_LAST;
    case IB_OPCODE_RC_RDMA_READ_RESPONSE_ONLY:
        return IB_OPCODE_RC_RDMA_WRITE_ONLY;
    default:
        return -1;
    }
}

void ps_roce_address(struct pswitch *ps, struct pkt *p, uint32_t dst_node, uint32_t dest_qpn,
                     uint32_t src_qpn, uint32_t psn)
{
    p->src_node = ps->node;
    p->dst_node = dst_node;
    p->dest_qpn = dest_qpn & NIC_PSN_MASK;
    p->src_qpn = src_qpn;
    p->psn = psn & NIC_PSN_MASK;
    p->udp_sport = nic_roce_udp_sport(src_qpn, dest_qpn);
}
