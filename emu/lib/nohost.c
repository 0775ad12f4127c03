/* The verbs shim's post.c, built into this library, charges CPU time and
 * writes trace records through sim/host.h and sim/trace.h when it runs
 * inside a simulated process.  A program that loads the drop-in library is
 * a real process on a real CPU: there is no simulated host, nothing to
 * charge (its CPU time is its own) and no trace, which is what these
 * answer. */
#include "sim/host.h"
#include "sim/trace.h"

struct host *host_of_current(void)
{
    return NULL;
}

struct host_thread *host_thread_current(void)
{
    return NULL;
}

/* Referenced by post.c's trace code, which runs only with a simulated host. */
sim_time_t sim_now(const struct sim *sim)
{
    (void)sim;
    return 0;
}

void host_note_call(void) {}

void host_charge(sim_time_t ps)
{
    (void)ps;
}

/* The doorbell occupancy of a simulated thread (host.cpu.doorbell_gap): a
 * real process's stores take what they take. */
void host_doorbell(void) {}
void host_doorbell_uc(void) {}
void host_doorbell_locked(sim_time_t *lock_free_ps, uint32_t *last_core)
{
    (void)lock_free_ps, (void)last_core;
}

void sim_trace_post(struct sim *sim, uint32_t node, uint32_t qpn, uint8_t opcode, uint32_t len,
                    uint64_t wqe_idx)
{
    (void)sim;
    (void)node;
    (void)qpn;
    (void)opcode;
    (void)len;
    (void)wqe_idx;
}

void host_trace_call(struct host_thread *t, sim_time_t t0_ps, sim_time_t t1_ps, const char *call,
                     struct trace_rec *r)
{
    (void)t;
    (void)t0_ps;
    (void)t1_ps;
    (void)call;
    (void)r;
}
