/* Processes: coroutine switching, sleep order, wait queues with and
 * without deadlines, join, daemons, deadlock detection and report, deep
 * stacks, and the guard page. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../sim/sim.h"
#include "test.h"

static char trace[256];
static size_t trace_n;
static void mark(char c)
{
    if (trace_n + 1 < sizeof(trace)) {
        trace[trace_n++] = c;
        trace[trace_n] = 0;
    }
}

static void sleeper(void *arg)
{
    const char *s = arg; /* "a3": mark 'a' after 3 ns, twice */
    sim_proc_sleep((sim_time_t)(s[1] - '0') * SIM_NS);
    mark(s[0]);
    sim_proc_sleep((sim_time_t)(s[1] - '0') * SIM_NS);
    mark(s[0]);
}

static char arg_a[] = "a3", arg_b[] = "b2", arg_c[] = "c3", arg_m[] = "m1";

static void test_sleep_order(void)
{
    struct sim *sim = sim_create(1);
    trace_n = 0;
    sim_proc_create(sim, "a", sleeper, arg_a, 0);
    sim_proc_create(sim, "b", sleeper, arg_b, 0);
    sim_proc_create(sim, "c", sleeper, arg_c, 0);
    CHECK(sim_run(sim, SIM_TIME_NEVER) == SIM_RUN_DONE);
    /* b@2 a@3 c@3 b@4 a@6 c@6 ; equal times in FIFO order */
    CHECK_STR_CONTAINS(trace, "bacbac");
    CHECK_EQ_U64(sim_now(sim), 6 * SIM_NS);
    sim_destroy(sim);
}

struct wq_test {
    struct sim_waitq wq;
    struct sim *sim;
    bool got[3];
    bool timeout_result;
};

static void waiter(void *arg)
{
    struct wq_test *t = arg;
    struct sim_proc *me = sim_proc_current();
    CHECK(me != NULL);
    CHECK(sim_proc_sim(me) == t->sim);
    sim_waitq_wait(&t->wq, "waiting for the test");
    mark(sim_proc_name(me)[0]);
}

static void timed_waiter(void *arg)
{
    struct wq_test *t = arg;
    t->timeout_result = sim_waitq_wait_until(&t->wq, 5 * SIM_NS, "timed");
    mark('T');
    CHECK_EQ_U64(sim_now(t->sim), 5 * SIM_NS);
}

static void waker(void *arg)
{
    struct wq_test *t = arg;
    sim_proc_sleep(10 * SIM_NS);
    mark('W');
    sim_waitq_wake_one(t->sim, &t->wq);
    sim_proc_sleep(SIM_NS);
    sim_waitq_wake_all(t->sim, &t->wq);
}

static void test_waitq(void)
{
    struct sim *sim = sim_create(1);
    struct wq_test t = {.sim = sim};
    sim_waitq_init(&t.wq, "test");
    trace_n = 0;
    sim_proc_create(sim, "x", waiter, &t, 0);
    sim_proc_create(sim, "T", timed_waiter, &t, 0);
    sim_proc_create(sim, "y", waiter, &t, 0);
    sim_proc_create(sim, "z", waiter, &t, 0);
    sim_proc_create(sim, "W", waker, &t, 0);
    CHECK(sim_run(sim, SIM_TIME_NEVER) == SIM_RUN_DONE);
    CHECK(!t.timeout_result);
    CHECK_STR_CONTAINS(trace, "TWxyz"); /* timeout at 5, then FIFO wakes */
    CHECK(sim_waitq_empty(&t.wq));
    sim_destroy(sim);
}

static void child(void *arg)
{
    (void)arg;
    sim_proc_sleep(7 * SIM_NS);
    mark('c');
}

static void parent(void *arg)
{
    struct sim *sim = arg;
    struct sim_proc *c = sim_proc_create(sim, "child", child, NULL, 0);
    sim_proc_join(c);
    mark('p');
    CHECK(sim_proc_finished(c));
    CHECK_EQ_U64(sim_now(sim), 7 * SIM_NS);
}

static void forever(void *arg)
{
    (void)arg;
    for (;;)
        sim_proc_sleep(SIM_US);
}

static void test_join_and_daemon(void)
{
    struct sim *sim = sim_create(1);
    trace_n = 0;
    sim_proc_create(sim, "parent", parent, sim, 0);
    CHECK(sim_run(sim, SIM_TIME_NEVER) == SIM_RUN_DONE);
    CHECK_STR_CONTAINS(trace, "cp");
    /* a daemon that never ends does not keep the run alive past the limit,
     * and the run ends with TIME_LIMIT because its events continue */
    struct sim_proc *d = sim_proc_create(sim, "daemon", forever, NULL, 0);
    sim_proc_set_daemon(d, true);
    CHECK(sim_run(sim, sim_now(sim) + 5 * SIM_US) == SIM_RUN_TIME_LIMIT);
    sim_destroy(sim); /* frees the blocked daemon's stack */
}

static struct sim_waitq never_a, never_b;

static void stuck(void *arg)
{
    sim_waitq_wait(arg, arg == &never_a ? "ibv_poll_cq(cq 1) waiting for a CQE" : "host_relax()");
}

static void test_deadlock(void)
{
    struct sim *sim = sim_create(1);
    sim_waitq_init(&never_a, "a");
    sim_waitq_init(&never_b, "b");
    sim_proc_create(sim, "h0/server", stuck, &never_a, 0);
    sim_proc_create(sim, "h1/client", stuck, &never_b, 0);
    struct sim_proc *d = sim_proc_create(sim, "h1/daemon", stuck, &never_b, 0);
    sim_proc_set_daemon(d, true);
    CHECK(sim_run(sim, SIM_TIME_NEVER) == SIM_RUN_DEADLOCK);
    char buf[1024] = {0};
    FILE *f = fmemopen(buf, sizeof(buf) - 1, "w");
    sim_deadlock_report(sim, f);
    fclose(f);
    CHECK_STR_CONTAINS(buf, "h0/server: ibv_poll_cq(cq 1) waiting for a CQE");
    CHECK_STR_CONTAINS(buf, "h1/client: host_relax()");
    CHECK(strstr(buf, "daemon") == NULL);
    sim_destroy(sim);
}

/* Real recursion at every optimisation level: the frame's array is used
 * after the recursive call, which goes through a volatile pointer, so the
 * compiler can neither turn it into a loop nor drop the array. */
static unsigned recurse(unsigned depth);
static unsigned (*volatile recurse_ptr)(unsigned) = recurse;

static unsigned recurse(unsigned depth)
{
    volatile char pad[512];
    pad[depth % sizeof(pad)] = 1;
    if (depth == 0)
        return 0;
    unsigned r = recurse_ptr(depth - 1) + 1;
    return r + (unsigned)pad[depth % sizeof(pad)] - 1;
}

static void deep(void *arg)
{
    unsigned *out = arg;
    *out = recurse(*out);
}

static void test_deep_stack_and_many(void)
{
    struct sim *sim = sim_create(1);
    unsigned depth = 300; /* ~170 KiB of frames in a 256 KiB stack */
    sim_proc_create(sim, "deep", deep, &depth, 0);
    for (int i = 0; i < 2000; i++)
        sim_proc_create(sim, "many", sleeper, arg_m, 16 * 1024);
    trace_n = 0;
    CHECK(sim_run(sim, SIM_TIME_NEVER) == SIM_RUN_DONE);
    CHECK_EQ_U64(depth, 300);
    sim_destroy(sim);
}

static void overflow(void *arg)
{
    unsigned *depth = arg;
    *depth = recurse(*depth);
}

/* Overflowing a process's stack must fault (guard page), not scribble. */
static void test_guard_page(void)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        struct sim *sim = sim_create(1);
        unsigned depth = 100000; /* 50 MiB of frames in a 64 KiB stack */
        sim_proc_create(sim, "overflow", overflow, &depth, 64 * 1024);
        sim_run(sim, SIM_TIME_NEVER);
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    /* plain build: SIGSEGV; under ASan its handler reports the overflow and
     * exits 1 or aborts (abort_on_error) */
    CHECK((WIFSIGNALED(st) && (WTERMSIG(st) == SIGSEGV || WTERMSIG(st) == SIGABRT)) ||
          (WIFEXITED(st) && WEXITSTATUS(st) != 0));
}

int main(void)
{
    test_sleep_order();
    test_waitq();
    test_join_and_daemon();
    test_deadlock();
    test_deep_stack_and_many();
    test_guard_page();
    return test_summary();
}
