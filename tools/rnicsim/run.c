/* Running a scenario: build the world, start every program as a coroutine
 * on its host (argv[0] = the program name as written), run the event loop
 * until stop_time, and classify the outcome:
 *
 *   done            every non-daemon program (and thread) returned 0
 *   program-failed  some program returned non-zero (exit status 1)
 *   deadlock        the event queue ran dry with programs blocked (3)
 *   time-limit      stop_time reached with programs still running (4)
 *   wall-limit      the run took longer than --wall-limit seconds (4)
 *
 * With stop_on_failure (rnicsim run's default, check-order's always) the
 * run stops at the first program that returns non-zero: the others could
 * only poll until stop_time for an answer that will not come.
 * Daemon programs do not keep the run alive: when the last non-daemon
 * process finishes and daemons exist, the run stops at that instant. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "posix/posix.h"
#include "sim/trace.h"
#include "tools/rnicsim/rnicsim.h"
#include "tools/rnicsim/timeline.h"

double wall_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const char *const run_result_names[] = {
    [RUN_DONE] = "done",
    [RUN_DEADLOCK] = "deadlock",
    [RUN_PROGRAM_FAILED] = "program-failed",
    [RUN_TIME_LIMIT] = "time-limit",
    [RUN_WALL_LIMIT] = "wall-limit",
};

static const int run_exit_codes[] = {
    [RUN_DONE] = 0,       [RUN_DEADLOCK] = 3,   [RUN_PROGRAM_FAILED] = 1,
    [RUN_TIME_LIMIT] = 4, [RUN_WALL_LIMIT] = 4,
};

const char *run_result_name(enum run_result r)
{
    return run_result_names[r];
}
int run_exit_code(enum run_result r)
{
    return run_exit_codes[r];
}

static void program_ended(struct prog_inst *pi, int exit_code)
{
    pi->exit_code = exit_code;
    pi->finished = true;
    pi->finished_ps = sim_now(pi->run->world->sim);
    if (pi->exit_code != 0 && !pi->run->first_failed)
        pi->run->first_failed = pi;
    /* a switch program's data plane goes with the program's state */
    ps_proc_exit(pi->run->world->pswitch, sim_proc_current());
    if (pi->exit_code != 0 && pi->run->stop_on_failure)
        sim_stop(pi->run->world->sim);
    run_process_finished(pi);
}

/* Body of every program process. */
static void program_entry(void *arg)
{
    struct prog_inst *pi = arg;
    if (pi->os) {
        program_ended(pi, posix_prog_run_main(pi->os, pi->def->main, pi->argc, pi->argv));
        return;
    }
    optind = 0; /* a fresh getopt scan for programs that parse options */
    program_ended(pi, pi->def->main(pi->argc, pi->argv));
}

/* posix/ ended the threads of a program that exit()ed from another one. */
static void os_main_ended(void *arg, int status)
{
    program_ended(arg, status);
}

static void os_thread_ended(void *arg)
{
    run_process_finished(arg);
}

/* "h1/rc_pingpong#1": host, the object's name without directory and
 * ".so", instance number. */
static void program_label(const struct prog_inst *pi, size_t i, char *buf, size_t len)
{
    const char *name = pi->def->program;
    const char *slash = strrchr(name, '/');
    if (slash)
        name = slash + 1;
    size_t n = strlen(name);
    if (n > 3 && strcmp(name + n - 3, ".so") == 0)
        n -= 3;
    snprintf(buf, len, "%s/%.*s#%zu", pi->def->host, (int)n, name, i);
}

void run_process_finished(struct prog_inst *pi)
{
    struct run *r = pi->run;
    if (pi->def->daemon)
        return;
    if (r->live_nondaemon > 0)
        r->live_nondaemon--;
    if (r->live_nondaemon == 0 && r->has_daemons && (!r->traffic || r->traffic_done))
        sim_stop(r->world->sim);
}

/* Program output while the progress line is on the terminal: stdout is a
 * stream whose writes first clear that line (stderr and stdout are usually
 * the same terminal), so "[rnicsim] sim ..." never runs into a program's
 * line.  The next progress tick draws it again below. */
static ssize_t progress_stdout_write(void *arg, const char *buf, size_t n)
{
    struct run *r = arg;
    if (r->progress_shown) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
        r->progress_shown = false;
    }
    size_t done = 0;
    while (done < n) {
        ssize_t k = write(STDOUT_FILENO, buf + done, n - done);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return done ? (ssize_t)done : -1;
        done += (size_t)k;
    }
    return (ssize_t)n;
}

/* Every few thousand events (or every observe_every): the wall-clock
 * limit, the caller's observer, the progress line. */
static void run_tick(struct sim *sim, void *arg)
{
    struct run *r = arg;
    if (r->observe)
        r->observe(sim, r->observe_arg);
    if (!r->wall_limit_s && !r->progress)
        return;
    double now = wall_seconds();
    if (r->wall_limit_s && now - r->wall_t0 >= r->wall_limit_s) {
        r->wall_limit_hit = true;
        sim_stop(sim);
        return;
    }
    if (!r->progress)
        return;
    if (now - r->progress_last < 0.2)
        return;
    r->progress_last = now;
    double el = now - r->progress_t0;
    double evs = el > 0 ? (double)sim_events_executed(sim) / el : 0.0;
    char t[32];
    format_time(sim_now(sim), t, sizeof(t));
    fprintf(stderr, "\r[rnicsim] sim %s  %.1f M ev/s   ", t, evs / 1e6);
    fflush(stderr);
    r->progress_shown = true;
}

/* The traffic generator's last flow completed: like the last non-daemon
 * program returning, it ends a run that only daemons would keep going. */
static void traffic_finished(struct sim *sim, void *a, void *b)
{
    (void)b;
    struct run *r = a;
    r->traffic_done = true;
    if (r->live_nondaemon == 0 && r->has_daemons)
        sim_stop(sim);
}

static int start_programs(struct run *r, char *why, size_t why_len)
{
    const struct scenario *s = r->scn;
    r->insts = xcalloc_or_die(s->nprogs, sizeof(*r->insts));
    r->ninsts = s->nprogs;
    for (size_t i = 0; i < s->nprogs; i++) {
        const struct scn_program *def = &s->progs[i];
        struct prog_inst *pi = &r->insts[i];
        pi->run = r;
        pi->def = def;
        pi->host = def->host_index < r->world->nhosts ? &r->world->hosts[def->host_index]
                                                      : ps_cpu(r->world->pswitch);
        pi->argc = (int)def->nargs + 1;
        pi->argv = xcalloc_or_die(def->nargs + 2, sizeof(char *));
        pi->argv[0] = xstrdup_or_die(def->program);
        for (size_t k = 0; k < def->nargs; k++)
            pi->argv[k + 1] = xstrdup_or_die(def->args[k]);
        if (def->daemon)
            r->has_daemons = true;
        else
            r->live_nondaemon++;
    }
    for (size_t i = 0; i < s->nprogs; i++) {
        struct prog_inst *pi = &r->insts[i];
        if (pi->def->so_path)
            program_label(pi, i, pi->proc_name, sizeof(pi->proc_name));
        else
            snprintf(pi->proc_name, sizeof(pi->proc_name), "%s/%s#%zu", pi->def->host,
                     pi->def->program, i);
        const struct scn_program *d = pi->def;
        struct sim_proc *p = host_spawn_on(pi->host, pi->proc_name, program_entry, pi, pi,
                                           d->stack_bytes, d->ncpus ? d->cpus[0] : -1, d->socket);
        if (!p) {
            snprintf(why, why_len, "cannot start program %s on %s (stack of %zu bytes)",
                     pi->def->program, pi->def->host, pi->def->stack_bytes);
            return -1;
        }
        sim_proc_set_daemon(p, pi->def->daemon);
        if (pi->def->so_path) {
            if (!r->os)
                r->os = posix_world_create(r->world->sim, r->world->hosts, r->world->nhosts);
            struct posix_prog_hooks hooks = {
                .arg = pi, .main_ended = os_main_ended, .thread_ended = os_thread_ended};
            pi->os = r->os ? posix_prog_create(r->os, pi->host, pi->proc_name, pi->def->so_path,
                                               pi->def->so_base, pi->def->so_size, &hooks)
                           : NULL;
            if (!pi->os) {
                snprintf(why, why_len, "cannot set up program %s on %s (out of memory)",
                         pi->def->program, pi->def->host);
                return -1;
            }
            posix_prog_attach_main(pi->os, p);
        }
    }
    return 0;
}

#ifdef RNICSIM_SANITIZE
/* Programs that never finished (deadlock, time limit, daemon servers) still
 * own what they allocated, like a process killed mid-flight; their stacks
 * are unmapped, so LeakSanitizer would report that memory as leaked.  Leak
 * checking is turned off at exit for such runs only (LSan calls this weak
 * hook); runs whose programs all finished are checked in full. */
static bool abandoned_programs;
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void)
{
    return abandoned_programs;
}

/* What a program loaded from a shared object never freed (perftest keeps
 * its device list, its buffers) is its own leak, as at a process's exit;
 * such programs stay loaded in sanitizer builds (scenario_free) so that
 * their frames name them: by path (*.so) or, for a second instance's
 * private copy, /proc/self/fd/N.  Leaks of the simulator itself have no
 * such frame and are still reported. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:.so$\nleak:/proc/self/fd/\n";
}
#endif

struct run *run_scenario(const struct scenario *s, bool progress, char *why, size_t why_len)
{
    struct run_opts o = {.progress = progress};
    return run_scenario_opts(s, &o, why, why_len);
}

struct run *run_scenario_opts(const struct scenario *s, const struct run_opts *o, char *why,
                              size_t why_len)
{
    bool progress = o->progress && !o->observe;
    struct run *r = xcalloc_or_die(1, sizeof(*r));
    r->scn = s;
    r->world = world_build(s, why, why_len);
    if (!r->world) {
        free(r);
        return NULL;
    }
    struct timeline *tl = NULL; /* listens from before the first program starts */
    if (timeline_wanted(o->timeline)) {
        char label[256];
        snprintf(label, sizeof(label), "%s (%s), seed %llu", s->name ? s->name : "", s->file,
                 (unsigned long long)s->seed);
        tl = timeline_start(r->world, o->timeline, label, why, why_len);
        if (!tl) {
            run_free(r);
            return NULL;
        }
    }
    /* Lookahead between hosts (sim_horizon): what a process does reaches
     * another host no sooner than its management network's latency, or a
     * doorbell's MMIO plus the remote NIC's DMA write (an RDMA write), the
     * PCIe latencies being lower bounds of those transfers. */
    sim_time_t rdma_ps = s->hw.pcie.mmio_latency_ps + s->hw.pcie.write_latency_ps;
    sim_time_t la = s->hw.cpu.mgmt_latency_ps < rdma_ps ? s->hw.cpu.mgmt_latency_ps : rdma_ps;
    for (size_t i = 0; i < r->world->nhosts; i++)
        r->world->hosts[i].lookahead_ps = la;
    if (start_programs(r, why, why_len)) {
        timeline_finish(tl);
        run_free(r);
        return NULL;
    }
    struct sim *sim = r->world->sim;
    if (s->has_traffic) {
        r->traffic = traffic_create(sim, r->world->nics, (uint32_t)r->world->nhosts, r->world->topo,
                                    &s->traffic, why, why_len);
        if (!r->traffic) {
            timeline_finish(tl);
            run_free(r);
            return NULL;
        }
        traffic_start(r->traffic, traffic_finished, r, NULL);
    }
    if (o->trace_capacity && sim_trace_enable(sim, o->trace_capacity)) {
        snprintf(why, why_len, "cannot allocate an event trace of %zu records", o->trace_capacity);
        timeline_finish(tl);
        run_free(r);
        return NULL;
    }
    r->stop_on_failure = o->stop_on_failure;
    r->progress = progress;
    r->progress_t0 = r->progress_last = wall_seconds();
    r->wall_limit_s = o->wall_limit_s > 0 ? o->wall_limit_s : 0;
    r->wall_t0 = r->progress_t0;
    r->observe = o->observe;
    r->observe_arg = o->observe_arg;
    if (o->observe)
        sim_set_progress(sim, o->observe_every ? o->observe_every : 1, run_tick, r);
    else if (progress || r->wall_limit_s)
        sim_set_progress(sim, 1u << 14, run_tick, r);
    FILE *saved_stdout = NULL;
    if (progress) { /* program output clears the progress line first */
        fflush(stdout);
        FILE *f = fopencookie(r, "w", (cookie_io_functions_t){.write = progress_stdout_write});
        if (f) {
            setvbuf(f, NULL, _IOLBF, 0);
            saved_stdout = stdout;
            stdout = f;
            if (r->os) /* the labelled lines of rnicsim-cc programs too */
                posix_world_set_stdout(r->os, f);
        }
    }
    if (r->os) {
        if (o->watchdog_s != 0)
            posix_world_set_watchdog(r->os, o->watchdog_s > 0 ? o->watchdog_s : 0);
        posix_guard_start(r->os);
    }
    double t0 = wall_seconds();
    enum sim_run_result res = sim_run(sim, s->stop_time_ps);
    /* programs parked by the spin preemption may have been computing */
    while (res == SIM_RUN_DEADLOCK && r->os && posix_wake_spinners(r->os))
        res = sim_run(sim, s->stop_time_ps);
    r->wall_s = wall_seconds() - t0;
    if (r->os) {
        posix_guard_stop(r->os);
        for (size_t i = 0; i < r->ninsts; i++)
            if (r->insts[i].os)
                posix_prog_flush(r->insts[i].os);
    }
    if (saved_stdout) {
        if (r->os)
            posix_world_set_stdout(r->os, saved_stdout);
        fclose(stdout);
        stdout = saved_stdout;
    }
    r->timeline_rc = timeline_finish(tl);
    if (progress)
        fprintf(stderr, "\r%60s\r", "");
    r->sim_time_ps = sim_now(sim);
    r->events = sim_events_executed(sim);
    r->sim_result = res;

    bool failed = false, running = false;
    for (size_t i = 0; i < r->ninsts; i++) {
        if (r->insts[i].finished && r->insts[i].exit_code != 0)
            failed = true;
        if (!r->insts[i].finished && !r->insts[i].def->daemon)
            running = true;
#ifdef RNICSIM_SANITIZE
        if (!r->insts[i].finished)
            abandoned_programs = true;
#endif
    }
    if (r->world->pswitch && ps_error(r->world->pswitch))
        failed = true; /* the switch program broke a pipeline rule */
    bool flows_left = r->traffic && traffic_unfinished(r->traffic) > 0;
    if (failed)
        r->result = RUN_PROGRAM_FAILED;
    else if (r->wall_limit_hit && (running || flows_left || r->live_nondaemon > 0))
        r->result = RUN_WALL_LIMIT;
    else if (res == SIM_RUN_DEADLOCK || (res == SIM_RUN_DONE && flows_left))
        r->result = RUN_DEADLOCK; /* flows left and nothing pending: stuck (a PFC deadlock) */
    else if (flows_left && res == SIM_RUN_TIME_LIMIT)
        r->result = RUN_TIME_LIMIT;
    else if (running || r->live_nondaemon > 0)
        r->result = res == SIM_RUN_TIME_LIMIT ? RUN_TIME_LIMIT : RUN_DEADLOCK;
    else
        r->result = RUN_DONE;
    return r;
}

void run_free(struct run *r)
{
    if (!r)
        return;
    host_api_free_run(r);
    traffic_destroy(r->traffic);
    posix_world_free(r->os); /* its descriptors and programs, before the hosts */
    world_free(r->world);
    for (size_t i = 0; i < r->ninsts; i++) {
        for (int k = 0; k < r->insts[i].argc; k++)
            free(r->insts[i].argv[k]);
        free(r->insts[i].argv);
    }
    free(r->insts);
    free(r);
}
