/* The zero-sided switch program's data plane, between its files: what one
 * step's file calls in another's.  zs_dataplane.c dispatches each pass (the
 * ingress and egress entry points, the declarations); the steps are
 *
 *   zs_token.c     step 1 for pairs / shuffle / load balancing: the token
 *                  pass picks a source and a batch and issues the READ
 *   zs_scan.c      step 1 for replication: the minimum-space scan over the
 *                  group's consumers, one per pass, then the READ
 *   zs_rewrite.c   step 2: each READ RESPONSE rewritten into a WRITE to the
 *                  consumer (or multicast to the group), uplink and stream
 *                  slots given back after the last one
 *   zs_acks.c      steps 3-5: the switch as RC requester on its data QPs --
 *                  ACKs / NAKs of the consumers and producers, the pointer
 *                  WRITEs, lanes' in-order commits
 *   zs_cnp.c       congestion: ECN marks from the switch's own queue depth
 *                  (egress), consumers' CNPs relayed to the producer
 *   zs_mirrors.c   polls and doorbells that update the pointer mirrors
 *   zs_recovery.c  timer passes and the re-issue of a thread's operation
 *   zs_emit.c      the packets the pipeline builds (READ, pointer WRITE,
 *                  multicast head WRITE, recirculation, digests)
 *   zs_phase.c     thread phases (t_phase) and the measurement-only counters
 *                  kept beside them
 *
 * zs_regs.h holds the register cells and actions every step uses. */
#ifndef RNICSIM_ZS_DP_INT_H
#define RNICSIM_ZS_DP_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "protocols/zerosided/zs_dp.h"
#include "protocols/zerosided/zs_regs.h"
#include "sim/nic/opcode.h"

/* Producers are locked to one thread at a time: load balancing, and a
 * shuffle whose consumers have several lanes (threads) each. */
static inline bool zs_locks(const struct zs_dp *dp)
{
    return dp->mode == ZS_LB || dp->lanes > 1;
}

static inline uint32_t zs_npkts(const struct zs_dp *dp, uint64_t bytes)
{
    return bytes ? (uint32_t)((bytes + dp->mtu_bytes - 1) / dp->mtu_bytes) : 1;
}

/* zs_emit.c */
void zs_recirc_as(struct ps_pass *x, struct pkt *p, const struct zs_br *b);
void zs_clear_bth_flags(struct pkt *p);
void zs_emit_read(struct zs_dp *dp, struct ps_pass *x, struct pkt *p, const struct zs_ep_ent *ep,
                  bool ctl, uint32_t psn, uint64_t va, uint32_t len);
void zs_build_ptr_write(struct zs_dp *dp, struct pkt *p, const struct zs_ep_ent *ep, uint32_t psn,
                        uint32_t off, uint32_t value);
void zs_emit_ptr_write(struct zs_dp *dp, struct ps_pass *x, struct pkt *p,
                       const struct zs_ep_ent *ep, uint32_t psn, uint32_t off, uint32_t value);
void zs_ptr_group(struct ps_pass *x, const struct zs_thr_ent *th, uint32_t t, uint32_t j,
                  const struct zs_br *b);
void zs_emit_mcast_head_write(struct zs_dp *dp, struct ps_pass *x, struct pkt *p, uint32_t t,
                              const struct zs_thr_ent *th, uint32_t psn, uint32_t value);
void zs_report(struct zs_dp *dp, struct ps_pass *x, uint32_t what, uint32_t t, uint32_t a);

/* zs_phase.c */
void zs_set_phase(struct zs_dp *dp, struct ps_pass *x, uint32_t t, uint32_t phase);
void zs_c_reads_add(struct zs_dp *dp, const struct ps_pass *x, uint32_t c, int d);
void zs_n_reads_add(struct zs_dp *dp, uint32_t k, int d);

/* zs_token.c */
void zs_issue_final(struct zs_dp *dp, struct ps_pass *x, struct pkt *p, uint32_t t,
                    const struct zs_thr_ent *th, uint32_t chead);
void zs_token_pass(struct zs_dp *dp, struct ps_pass *x, struct pkt *p, struct zs_br b,
                   const struct zs_thr_ent *th);

/* zs_scan.c */
void zs_scan_pass(struct zs_dp *dp, struct ps_pass *x, struct pkt *p, struct zs_br b,
                  const struct zs_thr_ent *th);

/* zs_rewrite.c */
uint32_t zs_owner_of(struct zs_dp *dp, struct ps_pass *x, const struct zs_conn_ent *ce);
void zs_data_resp(struct zs_dp *dp, struct ps_pass *x, struct pkt *p, const struct zs_conn_ent *ce);
void zs_slotrel_pass(struct zs_dp *dp, struct ps_pass *x, struct zs_br b,
                     const struct zs_thr_ent *th);

/* zs_acks.c */
void zs_commit_pass(struct zs_dp *dp, struct ps_pass *x, struct pkt *p, struct zs_br b,
                    const struct zs_thr_ent *th);
void zs_fin_pass(struct zs_dp *dp, struct ps_pass *x, struct pkt *p, struct zs_br b,
                 const struct zs_thr_ent *th);
void zs_cons_ack(struct zs_dp *dp, struct ps_pass *x, struct pkt *p, const struct zs_conn_ent *ce);
void zs_prod_ack(struct zs_dp *dp, struct ps_pass *x, struct pkt *p, const struct zs_conn_ent *ce);

/* zs_cnp.c */
void zs_ecn_mark(struct zs_dp *dp, struct ps_pass *x, struct pkt *p);
void zs_cnp_relay(struct zs_dp *dp, struct ps_pass *x, struct pkt *p, const struct zs_conn_ent *ce);

/* zs_mirrors.c */
void zs_ctl_rx(struct zs_dp *dp, struct ps_pass *x, struct pkt *p, const struct zs_conn_ent *ce);
void zs_poll_gen(struct zs_dp *dp, struct ps_pass *x, struct pkt *p, uint32_t e);

/* zs_recovery.c */
void zs_tick(struct zs_dp *dp, struct ps_pass *x, struct pkt *p, uint32_t i);
void zs_reissue(struct zs_dp *dp, struct ps_pass *x, struct pkt *p, struct zs_br b,
                const struct zs_thr_ent *th);

#endif /* RNICSIM_ZS_DP_INT_H */
