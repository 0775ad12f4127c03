/* The CPU model of a host (sim/host/cpu.c, docs/host.md "CPUs"), on the C
 * default topology (2 sockets x 12 cores x 2 hyper-threads: CPU c and
 * c + 24 are one core), every figure computed by hand in the comments:
 *  - one thread alone: a charge takes exactly its time (nothing moves);
 *  - two busy hyper-threads of one core each run at 0.65; a sibling that
 *    starts or stops midway re-plans the other exactly; a spinning
 *    sibling counts as busy; two cores do not share;
 *  - two threads on one CPU take 12 ms turns (24 ms / 2) with a 2 us
 *    switch; a spinner burns its turns; a thread woken from a blocking
 *    wait preempts the running one;
 *  - placement: idle cores of the NIC's socket, then of the other socket,
 *    then hyper-threads; pinning moves a thread;
 *  - OS ticks stop charged work for their stall (by hand from the phase);
 *    the same seed gives the same run, another seed another phase. */
#include <errno.h>
#include <string.h>

#include "../../sim/host.h"
#include "../../sim/host/cpu.h"
#include "test.h"

static struct host_cpu_params params(void)
{
    struct host_cpu_params p;
    host_cpu_params_default(&p);
    p.wakeup_ps = 50 * SIM_NS;
    return p;
}

/* A thread that computes `work` after `delay`, then records when it ended. */
struct job {
    sim_time_t delay, work;
    sim_time_t end;
    volatile int *flag; /* spinner: waits for *flag; setter: sets it */
    bool spin, set, block;
    struct sim_waitq *wq; /* block: waits here (woken by a timer) */
};

static void job_fn(void *arg)
{
    struct job *j = arg;
    if (j->delay)
        sim_proc_sleep(j->delay);
    if (j->block) {
        host_block_begin();
        sim_waitq_wait(j->wq, "test: blocked");
        host_block_end();
    }
    if (j->spin)
        while (!*j->flag)
            host_park("test: spin");
    if (j->work)
        host_charge(j->work);
    if (j->set) {
        *j->flag = 1;
        host_charge(90 * SIM_NS); /* the store that others poll */
    }
    j->end = sim_now(host_of_current()->sim);
}

struct rig {
    struct sim *sim;
    struct host h;
};

static void rig_init(struct rig *r, uint64_t seed, const struct host_cpu_params *p)
{
    r->sim = sim_create(seed);
    host_init(&r->h, r->sim, 0, "h0", p);
}

/* Every thread finished: every CPU idle, no turn pending. */
static void rig_fini(struct rig *r)
{
    for (uint32_t i = 0; i < r->h.nvcpus; i++) {
        const struct host_vcpu *v = &r->h.vcpus[i];
        CHECK(!v->cur && !v->n_ready && !v->n_parked && !v->n_placed);
        CHECK(!sim_event_pending(&v->slice_ev));
    }
    sim_destroy(r->sim);
    host_fini(&r->h);
}

static void spawn(struct rig *r, struct job *j, int cpu)
{
    CHECK(host_spawn_on(&r->h, "t", job_fn, j, NULL, 0, cpu, -1) != NULL);
}

static void test_alone_and_ht(void)
{
    struct host_cpu_params p = params();
    struct rig r;
    /* alone: 1000 ns is 1000 ns */
    rig_init(&r, 1, &p);
    struct job a = {.work = 1000 * SIM_NS};
    spawn(&r, &a, 0);
    sim_run(r.sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(a.end, 1000 * SIM_NS);
    rig_fini(&r);

    /* siblings (CPU 0 and 24) both computing 1000 ns: each at 0.65 ->
     * ceil(1000000 * 1000 / 650) = 1538462 ps */
    rig_init(&r, 1, &p);
    struct job b = {.work = 1000 * SIM_NS}, c = {.work = 1000 * SIM_NS};
    spawn(&r, &b, 0);
    spawn(&r, &c, 24);
    sim_run(r.sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(b.end, 1538462);
    CHECK_EQ_U64(c.end, 1538462);
    CHECK(r.h.cnt.ht_shared_ps == 2 * 1000 * SIM_NS);
    rig_fini(&r);

    /* two cores: no sharing */
    rig_init(&r, 1, &p);
    struct job d = {.work = 1000 * SIM_NS}, e = {.work = 1000 * SIM_NS};
    spawn(&r, &d, 0);
    spawn(&r, &e, 1);
    sim_run(r.sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(d.end, 1000 * SIM_NS);
    CHECK_EQ_U64(e.end, 1000 * SIM_NS);
    rig_fini(&r);
}

/* g blocks until a timer at 400 ns, then computes 200 ns on the sibling. */
static void wake_wq(struct sim *sim, void *a, void *b)
{
    (void)b;
    sim_waitq_wake_all(sim, a);
}

static void test_ht_replan(void)
{
    struct host_cpu_params p = params();
    struct rig r;
    rig_init(&r, 1, &p);
    struct sim_waitq wq;
    sim_waitq_init(&wq, "test");
    struct job f = {.work = 1000 * SIM_NS};
    struct job g = {.work = 200 * SIM_NS, .block = true, .wq = &wq};
    spawn(&r, &f, 0);
    spawn(&r, &g, 24);
    sim_call_in(r.sim, 400 * SIM_NS, wake_wq, &wq, NULL);
    sim_run(r.sim, SIM_TIME_NEVER);
    /* g: 200 ns at 0.65 from 400 ns: ceil(200000 * 1000 / 650) = 307693
     * -> ends 707693.  f: 400 ns alone, then 307693 ps shared doing
     * floor(307693 * 0.65) = 200000 ps of work, the last 400 ns alone:
     * 707693 + 400000 = 1107693. */
    CHECK_EQ_U64(g.end, 707693);
    CHECK_EQ_U64(f.end, 1107693);
    rig_fini(&r);

    /* a spinning sibling is busy: h spins on a flag i sets after 1000 ns
     * of work (at 0.65: 1538462), and the store (90 ns, still shared:
     * ceil(90000 * 1000 / 650) = 138462) */
    rig_init(&r, 1, &p);
    volatile int flag = 0;
    struct job h = {.spin = true, .flag = &flag};
    struct job i = {.work = 1000 * SIM_NS, .set = true, .flag = &flag};
    spawn(&r, &h, 24);
    spawn(&r, &i, 0);
    sim_run(r.sim, SIM_TIME_NEVER);
    /* the store's charge wakes h at 1538462; h notices (50 ns of work) at
     * 0.65, since i still computes the store: ceil(50000 * 1000 / 650) =
     * 76924 -> 1615386, and exits; the store did floor(76924 * 0.65) =
     * 50000 of its 90000 ps by then, the rest alone: 1655386 */
    CHECK_EQ_U64(h.end, 1538462 + 76924);
    CHECK_EQ_U64(i.end, 1538462 + 76924 + 40000);
    rig_fini(&r);
}

static void test_time_slices(void)
{
    struct host_cpu_params p = params();
    struct rig r;
    /* two computing threads on CPU 0, 20 ms each; turns of 24 / 2 = 12 ms
     * counted from the start of the 2 us switch:  a [0, 12) | switch, b
     * [12.002, 24) does 11.998 | switch, a [24.002, 32.002) exits |
     * switch, b [32.004, 40.006) */
    rig_init(&r, 1, &p);
    struct job a = {.work = 20 * SIM_MS}, b = {.work = 20 * SIM_MS};
    spawn(&r, &a, 0);
    spawn(&r, &b, 0);
    sim_run(r.sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(a.end, 32002 * SIM_US);
    CHECK_EQ_U64(b.end, 40006 * SIM_US);
    CHECK(r.h.cnt.ctx_switches == 3);
    rig_fini(&r);

    /* a spinner burns its turns: s spins (first on CPU 0) until w, also on
     * CPU 0, has computed 20 ms and stored a flag (90 ns).
     *   s spins [0, 12) | w [12.002, 24) 11.998 done | s spins [24, 36) |
     *   w [36.002, 44.004) 8.002 ms, store 90 ns -> 44.00409 | w exits,
     *   s switches in (2 us) and notices (50 ns): 44.00614 ms */
    rig_init(&r, 1, &p);
    volatile int flag = 0;
    struct job s = {.spin = true, .flag = &flag};
    struct job w = {.work = 20 * SIM_MS, .set = true, .flag = &flag};
    spawn(&r, &s, 0);
    spawn(&r, &w, 0);
    sim_run(r.sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(w.end, 44004 * SIM_US + 90 * SIM_NS);
    CHECK_EQ_U64(s.end, 44004 * SIM_US + 90 * SIM_NS + 2 * SIM_US + 50 * SIM_NS);
    rig_fini(&r);

    /* the same pair on two cores: w ends at 20 ms + 90 ns; s, woken as the
     * store begins, notices at 20 ms + 50 ns */
    rig_init(&r, 1, &p);
    flag = 0;
    struct job s2 = {.spin = true, .flag = &flag};
    struct job w2 = {.work = 20 * SIM_MS, .set = true, .flag = &flag};
    spawn(&r, &s2, 0);
    spawn(&r, &w2, 1);
    sim_run(r.sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(w2.end, 20 * SIM_MS + 90 * SIM_NS);
    CHECK_EQ_U64(s2.end, 20 * SIM_MS + 50 * SIM_NS);
    rig_fini(&r);

    /* wakeup preemption: k blocks at once (CPU 0 passes to m after a 2 us
     * switch); m computes 10 ms from 2 us; at 1 ms k wakes, preempts m
     * (m did 0.998 ms), switches in (2 us) and computes 1 us: 1.003 ms;
     * k exits, m switches back (2 us) at 1.005 ms and does its last
     * 9.002 ms: 10.007 ms */
    rig_init(&r, 1, &p);
    struct sim_waitq wq;
    sim_waitq_init(&wq, "test");
    struct job k = {.work = 1 * SIM_US, .block = true, .wq = &wq};
    struct job m = {.work = 10 * SIM_MS};
    spawn(&r, &k, 0);
    spawn(&r, &m, 0);
    sim_call_in(r.sim, 1 * SIM_MS, wake_wq, &wq, NULL);
    sim_run(r.sim, SIM_TIME_NEVER);
    CHECK_EQ_U64(k.end, 1003 * SIM_US);
    CHECK_EQ_U64(m.end, 10007 * SIM_US);
    rig_fini(&r);
}

static void test_placement(void)
{
    struct host_cpu_params p = params();
    struct rig r;
    rig_init(&r, 1, &p);
    struct job j[30];
    memset(j, 0, sizeof(j));
    struct sim_proc *pr[30];
    for (int i = 0; i < 30; i++)
        pr[i] = host_spawn(&r.h, "t", job_fn, &j[i], NULL, 0);
    /* idle cores of socket 0 (CPUs 0-11), of socket 1 (12-23), then the
     * hyper-threads of socket 0 (24-29) */
    for (int i = 0; i < 30; i++) {
        struct host_thread *t = sim_proc_user(pr[i]);
        CHECK_EQ_U64(t->vcpu->id, (uint64_t)i);
    }
    CHECK_EQ_U64(r.h.vcpus[13].socket, 1);
    CHECK_EQ_U64(r.h.vcpus[30].core, 6);
    sim_run(r.sim, SIM_TIME_NEVER);
    rig_fini(&r);

    /* the NIC on socket 1: its cores first */
    p.topo.nic_socket = 1;
    rig_init(&r, 1, &p);
    struct job one = {0};
    struct sim_proc *q = host_spawn(&r.h, "t", job_fn, &one, NULL, 0);
    CHECK_EQ_U64(((struct host_thread *)sim_proc_user(q))->vcpu->id, 12);
    /* a socket binding; bad CPU or socket numbers */
    q = host_spawn_on(&r.h, "t", job_fn, &one, NULL, 0, -1, 0);
    CHECK_EQ_U64(((struct host_thread *)sim_proc_user(q))->vcpu->id, 0);
    CHECK(host_spawn_on(&r.h, "t", job_fn, &one, NULL, 0, 48, -1) == NULL);
    CHECK(host_spawn_on(&r.h, "t", job_fn, &one, NULL, 0, -1, 2) == NULL);
    sim_run(r.sim, SIM_TIME_NEVER);
    rig_fini(&r);
}

/* pin to CPU 24 (sibling of the computing thread on CPU 0), then compute */
static void pin_fn(void *arg)
{
    struct job *j = arg;
    struct host_thread *t = host_thread_current();
    CHECK(host_sched_pin(t, 48) == EINVAL);
    CHECK(host_sched_pin(t, 24) == 0);
    CHECK_EQ_U64(t->vcpu->id, 24);
    host_charge(j->work);
    j->end = sim_now(t->host->sim);
}

static void test_pin(void)
{
    struct host_cpu_params p = params();
    struct rig r;
    rig_init(&r, 1, &p);
    struct job a = {.work = 1000 * SIM_NS}, b = {.work = 1000 * SIM_NS};
    spawn(&r, &a, 0);
    CHECK(host_spawn(&r.h, "t", pin_fn, &b, NULL, 0) != NULL); /* placed on CPU 1 */
    sim_run(r.sim, SIM_TIME_NEVER);
    /* b moves to CPU 24 at 0 (a 2 us switch, busy all along): a shares
     * its core from 0 and ends at 1538462; b computes after its switch,
     * alone by then: 2 us + 1000 ns */
    CHECK_EQ_U64(a.end, 1538462);
    CHECK_EQ_U64(b.end, 2 * SIM_US + 1000 * SIM_NS);
    rig_fini(&r);
}

/* OS ticks: 10 ms of work on one CPU stops for every 5 us tick inside,
 * counted by hand from the CPU's phase; the same seed, the same end. */
static sim_time_t ticks_end(sim_time_t phase, sim_time_t work)
{
    sim_time_t t = 0, done = 0, next = phase;
    while (done < work) {
        sim_time_t run = next - t;
        if (done + run >= work)
            return t + (work - done);
        done += run;
        t = next + 5 * SIM_US;
        next += 4 * SIM_MS;
    }
    return t;
}

static void test_os_ticks(void)
{
    struct host_cpu_params p = params();
    for (unsigned i = 0; noise_preset_names[i]; i++)
        if (!strcmp(noise_preset_names[i], "os-tick-250hz"))
            p.topo.os_noise = i;
    sim_time_t ends[3];
    for (int seed = 0; seed < 3; seed++) {
        struct rig r;
        rig_init(&r, seed == 2 ? 99 : 5, &p);
        struct job a = {.work = 10 * SIM_MS};
        spawn(&r, &a, 0);
        sim_run(r.sim, SIM_TIME_NEVER);
        sim_time_t phase = r.h.vcpus[0].os_noise.phase_ps;
        CHECK_EQ_U64(a.end, ticks_end(phase, 10 * SIM_MS));
        CHECK(a.end >= 10 * SIM_MS + 10 * SIM_US && a.end <= 10 * SIM_MS + 15 * SIM_US);
        ends[seed] = phase;
        rig_fini(&r);
    }
    CHECK(ends[0] == ends[1]); /* same seed, same phase */
    CHECK(ends[0] != ends[2]);
}

int main(void)
{
    test_alone_and_ht();
    test_ht_replan();
    test_time_slices();
    test_placement();
    test_pin();
    test_os_ticks();
    return test_summary();
}
