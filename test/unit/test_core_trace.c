/* The event trace ring: off by default, keeps the newest records in order,
 * stamps them with simulated time, dumps readable lines. */
#include <stdlib.h>

#include "../../sim/trace.h"
#include "test.h"

static void at(struct sim *sim, void *a, void *b)
{
    (void)b;
    struct trace_rec r = {.kind = TRACE_PKT_TX,
                          .node = 1,
                          .qpn = 17,
                          .psn = (uint32_t)(uintptr_t)a,
                          .opcode = 0x0a,
                          .len = 64,
                          .where = "test"};
    sim_trace(sim, &r);
}

int main(void)
{
    struct sim *sim = sim_create(1);
    CHECK(!sim_trace_enabled(sim));
    sim_call_in(sim, 5, at, (void *)(uintptr_t)99, NULL);
    sim_run(sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(sim_trace_count(sim), 0); /* disabled: nothing kept */

    CHECK(sim_trace_enable(sim, 4) == 0);
    for (uintptr_t i = 0; i < 6; i++)
        sim_call_in(sim, (sim_time_t)(i + 1) * SIM_NS, at, (void *)i, NULL);
    sim_run(sim, SIM_TIME_NEVER);
    sim_trace_note(sim, 2, "the end");
    CHECK_EQ_U64(sim_trace_total(sim), 7);
    CHECK_EQ_U64(sim_trace_count(sim), 4);
    /* oldest kept is psn 3 (records 0..2 overwritten), stamped at 4 ns */
    CHECK_EQ_U64(sim_trace_get(sim, 0)->psn, 3);
    CHECK_EQ_U64(sim_trace_get(sim, 0)->t_ps, 5 + 4 * SIM_NS);
    CHECK_EQ_U64(sim_trace_get(sim, 2)->psn, 5);
    CHECK_EQ_U64(sim_trace_get(sim, 3)->kind, TRACE_NOTE);
    CHECK(sim_trace_get(sim, 4) == NULL);

    char buf[2048] = {0};
    FILE *f = fmemopen(buf, sizeof(buf) - 1, "w");
    sim_trace_dump(sim, f, 2);
    fclose(f);
    CHECK_STR_CONTAINS(buf, "pkt-tx    node 1  qpn 17 psn 5 opcode 0x0a len 64  (test)");
    CHECK_STR_CONTAINS(buf, "note      node 2  (the end)");
    CHECK(strstr(buf, "psn 4") == NULL); /* only the last 2 */
    sim_destroy(sim);
    return test_summary();
}
