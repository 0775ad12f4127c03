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

void host_note_call(void) {}

void host_charge(sim_time_t ps)
{
    (void)ps;
}

/* The doorbell occupancy of a simulated thread (host.cpu.doorbell_gap): a
 * real process's stores take what they take. */
void host_doorbell(void) {}

bool sim_trace_enabled(const struct sim *sim)
{
    (void)sim;
    return false;
}

void sim_trace_post(struct sim *sim, uint32_t node, uint32_t qpn, uint8_t opcode, uint32_t len)
{
    (void)sim;
    (void)node;
    (void)qpn;
    (void)opcode;
    (void)len;
}
