/* The simulated POSIX a program loaded from a shared object sees
 * (docs/user-programs.md "Simulated mode").
 *
 * A program compiled with `rnicsim-cc` has its calls to the C library's
 * clocks, sleeps, sockets, threads, getopt, exit and signals redirected at
 * link time (`-Wl,--wrap=SYMBOL`) to the `__wrap_SYMBOL` functions of this
 * folder, which the rnicsim executable exports.  They act on the simulated
 * host the calling process runs on, in simulated time:
 *
 *   clock.c    clocks, sleeping, the x86 TSC (rdtsc trapped: guard.c)
 *   fd.c       the descriptor table, read/write/close, poll/select/epoll
 *   tcp.c      TCP sockets over the modelled management network, getaddrinfo
 *   thread.c   pthreads as simulated threads, mutexes, condition variables
 *   getopt.c   getopt / getopt_long with per-program state
 *   prog.c     program life: main, exit/atexit, per-program stdout/stderr,
 *              the state swapped at every context switch, simulated
 *              signals (alarm), refused calls (fork, exec, ...)
 *   guard.c    crash reports (SIGSEGV/SIGBUS/SIGABRT/...), the rdtsc trap,
 *              the wall-clock spin watchdog
 *   rdmacm.c   librdmacm entry points, answered ENOSYS
 *
 * The simulator's own calls are not redirected (only the plug-in's object
 * files are linked with --wrap), so nothing here can recurse into itself
 * through libc.
 *
 * This header is what the runner (tools/rnicsim/run.c) uses. */
#ifndef RNICSIM_POSIX_H
#define RNICSIM_POSIX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sim/host.h"
#include "sim/sim.h"

struct posix_world;
struct posix_prog;

/* One run's simulated OS: the hosts (addresses 10.0.0.<i+1>, names from
 * host->name), the descriptor table, the management network. */
struct posix_world *posix_world_create(struct sim *sim, struct host *hosts, size_t nhosts);
/* Prints nothing; closes descriptors and frees everything. */
void posix_world_free(struct posix_world *w);
/* The wall-clock spin watchdog (guard.c): a program that runs this long
 * without entering the simulator is reported and the run ends.  0 turns
 * it off.  Default 10 s, or $RNICSIM_WATCHDOG. */
void posix_world_set_watchdog(struct posix_world *w, double seconds);
/* Where the programs' labelled stdout lines go (default: stdout when the
 * world was created; rnicsim run's progress-clearing stream). */
void posix_world_set_stdout(struct posix_world *w, FILE *out);
/* Start / stop the guards of a run: crash handlers on an alternate
 * signal stack, the rdtsc trap, the watchdog thread.  Only one world at a
 * time may be guarded (they are process-wide). */
void posix_guard_start(struct posix_world *w);
void posix_guard_stop(struct posix_world *w);

/* The run stopped with every program blocked: wake the threads that the
 * spin preemption parked (guard.c) -- they may have been computing, not
 * waiting -- unless nothing changed on their host since a deadlock last
 * woke them.  Returns true if any was woken (run the simulation on). */
bool posix_wake_spinners(struct posix_world *w);
/* After a deadlock: one line per such thread, with the source line of the
 * loop when the object has debug information. */
void posix_report_spinners(struct posix_world *w, FILE *out);

/* What the runner does when the threads of an exiting program are ended
 * without returning (exit() in another thread): its bookkeeping. */
struct posix_prog_hooks {
    void *arg;
    void (*main_ended)(void *arg, int status); /* the main thread was ended */
    void (*thread_ended)(void *arg);           /* a pthread was ended */
};

/* A program instance: `label` names it in messages and output
 * ("h1/rc_pingpong#1"); `so_path` is the shared object as given (for
 * backtraces); `base` / `size` the address range it was loaded at (0/0:
 * unknown).  Its stdout and stderr are its own streams, echoed line by
 * line to the real ones with the label in front. */
struct posix_prog *posix_prog_create(struct posix_world *w, struct host *host, const char *label,
                                     const char *so_path, uintptr_t base, size_t size,
                                     const struct posix_prog_hooks *hooks);
/* Make `p` (a process of the program's host, not started yet) its main
 * thread: its switch hook swaps the program's view in and out. */
void posix_prog_attach_main(struct posix_prog *prog, struct sim_proc *p);
/* Run main in the calling process (the program's main thread): getopt
 * state reset, exit()/return handled, atexit handlers run, output
 * flushed, remaining threads ended.  Returns the exit status. */
int posix_prog_run_main(struct posix_prog *prog, int (*main_fn)(int, char **), int argc,
                        char **argv);
const char *posix_prog_label(const struct posix_prog *prog);
/* Flush its streams and echo a pending partial line. */
void posix_prog_flush(struct posix_prog *prog);
/* Everything the program wrote to stdout / stderr so far. */
const char *posix_prog_output(const struct posix_prog *prog, int fd, size_t *len);

#endif /* RNICSIM_POSIX_H */
