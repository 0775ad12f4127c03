/* A switch thread's phase (register t_phase: the phase and the time of
 * its last progress, which the timer passes of zs_recovery.c read), and
 * the counters kept beside it for measurement only (not switch state):
 * time per phase, READs on their way to a consumer and out of a producer
 * node. */

#include "protocols/zerosided/zs_dp_int.h"

void zs_set_phase(struct zs_dp *dp, struct ps_pass *x, uint32_t t, uint32_t phase)
{
    struct a_phase a = {.op = PH_SET, .phase = phase, .now = now_ns(x)};
    ps_reg_exec(x, dp->t_phase, t, zs_act_phase, &a);
    if (dp->ph_at_ns && t < dp->nt && dp->ph_cur[t] != phase) { /* measurement, not state */
        dp->st.phase_ns[dp->ph_cur[t]] += a.now - dp->ph_at_ns[t];
        dp->ph_at_ns[t] = a.now;
        dp->ph_cur[t] = (uint8_t)phase;
    }
}

/* Measurement only (not switch state): consumer c has one READ more (+1)
 * or less (-1) on its way: from the request to its last response. */
void zs_c_reads_add(struct zs_dp *dp, const struct ps_pass *x, uint32_t c, int d)
{
    if (!dp->c_reads || c >= dp->nc)
        return;
    uint64_t now = now_ns(x);
    if (dp->c_at_ns[c]) {
        if (dp->c_reads[c])
            dp->st.c_read_ns += now - dp->c_at_ns[c];
        else
            dp->st.c_noread_ns += now - dp->c_at_ns[c];
    }
    dp->c_at_ns[c] = now;
    if (d > 0) {
        if (++dp->c_reads[c] > dp->st.c_reads_max)
            dp->st.c_reads_max = dp->c_reads[c];
    } else if (dp->c_reads[c]) {
        dp->c_reads[c]--;
    }
}

/* Measurement only: producer node slot k has one READ more (+1) or less
 * (-1) on its way out (request to last response in order). */
void zs_n_reads_add(struct zs_dp *dp, uint32_t k, int d)
{
    if (!dp->n_reads)
        return;
    k %= ZS_SLOT_NODES;
    if (d > 0 && ++dp->n_reads[k] > dp->st.n_reads_max)
        dp->st.n_reads_max = dp->n_reads[k];
    else if (d < 0 && dp->n_reads[k])
        dp->n_reads[k]--;
}
