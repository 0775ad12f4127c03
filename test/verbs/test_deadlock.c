/* Two programs that each post a receive and spin on ibv_poll_cq of their
 * receive CQ while nobody sends: the empty-poll heuristic parks both, the
 * event queue drains, and the run ends as a deadlock within a bounded
 * number of events, with a report naming both processes and ibv_poll_cq. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "test.h"

struct state {
    struct fx *fx;
    struct fx_rc rc[2];
    uint64_t polls[2];
};

struct arg {
    struct state *s;
    unsigned side;
};

static void program(void *p)
{
    struct arg *a = p;
    struct state *s = a->s;
    struct fx_rc *rc = &s->rc[a->side];
    CHECK(fx_rc_open(s->fx, rc, NULL) == 0);
    CHECK(fx_rc_connect(rc, a->side ? "dl/b" : "dl/a", a->side ? "dl/a" : "dl/b") == 0);
    CHECK(fx_post_recv(rc, 1, 0, 4096) == 0);
    struct ibv_wc wc;
    for (;;) {
        s->polls[a->side]++;
        if (ibv_poll_cq(rc->rcq, 1, &wc) != 0)
            break; /* never happens */
    }
    CHECK(false);
}

int main(void)
{
    struct state s;
    memset(&s, 0, sizeof(s));
    s.fx = fx_create(5, NULL);
    struct arg a0 = {&s, 0}, a1 = {&s, 1};
    fx_spawn(s.fx, 0, "spinner-a", program, &a0);
    fx_spawn(s.fx, 1, "spinner-b", program, &a1);
    /* A broken heuristic would spin until the limit (one event per poll),
     * so bound the run: connection setup needs about 50 us. */
    enum sim_run_result r = sim_run(s.fx->sim, 1 * SIM_MS);
    CHECK_EQ_U64(r, SIM_RUN_DEADLOCK);
    uint64_t events = sim_events_executed(s.fx->sim);
    printf("run ended after %" PRIu64 " events, %" PRIu64 " + %" PRIu64 " polls, t = %.3f us\n",
           events, s.polls[0], s.polls[1], sim_ps_to_us(sim_now(s.fx->sim)));
    CHECK(events < 5000);
    CHECK(s.polls[0] < 10 && s.polls[1] < 10);

    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    sim_deadlock_report(s.fx->sim, f);
    fclose(f);
    printf("%s", text ? text : "");
    CHECK_STR_CONTAINS(text, "spinner-a");
    CHECK_STR_CONTAINS(text, "spinner-b");
    CHECK_STR_CONTAINS(text, "ibv_poll_cq");
    free(text);
    fx_destroy(s.fx); /* closes the endpoints the blocked programs left */
    return test_summary();
}
