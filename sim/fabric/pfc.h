/* PFC ingress accounting of a switch port (pfc.c).  Internal to
 * sim/fabric/: switch.c owns one pfc_port per ingress port. */
#ifndef RNICSIM_FABRIC_PFC_H
#define RNICSIM_FABRIC_PFC_H

#include "fabric.h"

struct pfc_port;
/* `in` is the ingress link; pauses go out on link_peer(in). */
struct pfc_port *pfc_port_create(struct sim *sim, struct pkt_pool *pool, struct link *in,
                                 const struct pfc_params *pp, struct switch_counters *c);
void pfc_port_destroy(struct pfc_port *pt);
/* A frame arrived: false if it must be dropped (headroom exceeded). */
bool pfc_admit(struct pfc_port *pt, const struct pkt *p);
/* A frame admitted by this port left the switch (sent or dropped). */
void pfc_release(struct pfc_port *pt, const struct pkt *p);
uint64_t pfc_port_bytes(const struct pfc_port *pt, unsigned prio);
uint64_t pfc_port_headroom(const struct pfc_port *pt);
/* Priorities this port has paused its upstream for (XOFF sent, no XON). */
uint8_t pfc_port_paused(const struct pfc_port *pt);
/* Priorities whose releases the upstream waits for now (paused ones;
 * with credits, every lossless one): their frames' ends need their own
 * events (switch.c, lazy ends). */
uint8_t pfc_port_timed(const struct pfc_port *pt);
/* The headroom IEEE 802.1Qbb Annex N asks for on ingress link `in`. */
uint64_t pfc_default_headroom(const struct link *in);

#endif
