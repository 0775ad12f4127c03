/* Family mechanics shared by the variant files of one channel family
 * (tar-write half: send/recv, write slot, ring, shared ring).  Each
 * ch_<family>_<variant>.c defines its chan_ops with these functions and
 * its variant; family_<family>.c holds the code.  Not part of the channel
 * API (channel.h). */
#ifndef RNICSIM_TARANOV_CH_INTERNAL_H
#define RNICSIM_TARANOV_CH_INTERNAL_H

#include "protocols/taranov/channel.h"

/* Blocking receive (Table 2 "Blocking Recv"): arm the CQ, poll one
 * completion into *wc; if there is none, sleep on the completion channel
 * and poll once more.  Returns the number polled (0 or 1) or -errno. */
int chan_cq_block(struct chan *c, struct ibv_comp_channel *ch, struct ibv_cq *cq,
                  struct ibv_wc *wc);

/* ---- Send/Recv family (Section 4.1): family_send.c */
enum sr_variant { SR_NORMAL, SR_SHARED, SR_BUFFERLESS };
int sr_open(struct chan *c, enum sr_variant v);
int sr_send(struct chan *c, const struct chan_region *r, uint64_t *handle);
int sr_test_send(struct chan *c, uint64_t handle);
int sr_recv(struct chan *c, struct chan_region *out);
int sr_free(struct chan *c, struct chan_region *r);
void sr_close(struct chan *c);

/* ---- Write slot family (Section 4.2): family_write_slot.c */
enum ws_variant { WS_DETACHED, WS_INLINED, WS_IMM, WS_RESERVE };
int ws_open(struct chan *c, enum ws_variant v);
int ws_send(struct chan *c, const struct chan_region *r, uint64_t *handle);
int ws_test_send(struct chan *c, uint64_t handle);
int ws_recv(struct chan *c, struct chan_region *out);
int ws_free(struct chan *c, struct chan_region *r);
void ws_close(struct chan *c);

/* ---- Ring buffer family (Sections 4.3, 4.4): family_ring.c.  The shared
 * rings are the ring mechanics with the head reserved by FETCH_AND_ADD. */
enum ring_variant {
    RING_DETACHED,
    RING_IMM,
    RING_INLINED_ZERO,
    RING_INLINED_NOZERO,
    RING_SHARED_IMM,
    RING_SHARED_INLINED,
};
int ring_open(struct chan *c, enum ring_variant v);
int ring_send(struct chan *c, const struct chan_region *r, uint64_t *handle);
int ring_test_send(struct chan *c, uint64_t handle);
int ring_recv(struct chan *c, struct chan_region *out);
int ring_free(struct chan *c, struct chan_region *r);
void ring_close(struct chan *c);

#endif
