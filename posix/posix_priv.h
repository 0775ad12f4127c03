/* Internal header of the simulated POSIX layer (posix/posix.h says what
 * each file does).  Everything runs on the simulator's one OS thread; the
 * only other thread is the watchdog (guard.c), which reads `heartbeat` and
 * `running` with relaxed atomics and nothing else. */
#ifndef RNICSIM_POSIX_PRIV_H
#define RNICSIM_POSIX_PRIV_H

#include <getopt.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "posix/posix.h"

/* glibc's _NSIG: signals 1..64 */
enum { POSIX_NSIG = 65, POSIX_MAX_ATEXIT = 32 };

/* ---------------------------------------------------------------- descriptors (fd.c) */

enum pfile_kind { PFILE_TCP, PFILE_EPOLL };

/* A descriptor the simulation implements.  Its number is a real
 * descriptor (an eventfd kept open as a placeholder), so it never collides
 * with the files the program opens for real. */
struct pfile {
    enum pfile_kind kind;
    int fd;
    int status_flags; /* O_NONBLOCK */
    struct posix_prog *owner;
    void *obj; /* struct tcp_sock * or struct pepoll * */
};

/* ---------------------------------------------------------------- getopt (getopt.c) */

struct getopt_state {
    bool initialized;
    int optopt; /* the last error's option (glibc copies it out at every call) */
    char *nextchar;
    int ordering; /* enum in getopt.c */
    int first_nonopt, last_nonopt;
};

/* ---------------------------------------------------------------- threads and programs */

/* A simulated thread of a program: the user pointer (host_thread.os) of
 * its process. */
struct posix_thread {
    struct posix_prog *prog;
    struct sim_proc *proc;
    struct host_thread *ht;
    int saved_errno;
    jmp_buf base; /* exit() / pthread_exit() unwind to here */
    void *(*start)(void *);
    void *arg, *retval;
    int handle; /* host_thread_start handle; -1 for the main thread */
    bool finished, detached, joined;
    struct sim_waitq sleep_wq; /* sleeps and waits a simulated signal interrupts */
    /* parked by the spin preemption (guard.c): where, and the host's
     * activity when a deadlock last woke it */
    bool spinning;
    uintptr_t spin_pc;
    uint64_t spin_woken_gen;
    bool spin_woken;
    struct posix_thread *next; /* prog->threads */
};

/* Output kept per stream: everything written (up to a cap) and the line
 * being assembled for the labelled echo. */
struct pout {
    struct posix_prog *prog;
    int fd; /* 1 or 2 */
    char *kept;
    size_t kept_len, kept_cap;
    bool kept_truncated;
    char *line;
    size_t line_len, line_cap;
};

struct posix_prog {
    struct posix_world *w;
    struct host *host;
    char *label, *so_path;
    char *argv0, *argv0_short; /* program_invocation_name while it runs */
    uintptr_t base;
    size_t size;
    struct posix_prog_hooks hooks;
    pid_t pid;
    sim_time_t start_ps;
    FILE *out, *err; /* the program's stdout / stderr (fopencookie) */
    struct pout outs[2];
    /* getopt's public variables while the program is switched out */
    int optind, opterr, optopt;
    char *optarg;
    struct getopt_state gs;
    struct posix_thread *threads, *main;
    int exit_status;
    bool exiting, ended;
    void (*atexit_fns[POSIX_MAX_ATEXIT])(void);
    int n_atexit;
    /* simulated signals (prog.c) */
    struct sigaction sig[POSIX_NSIG];
    uint64_t pending; /* bit per signal */
    bool in_handler;
    struct sim_event alarm_ev;
    sim_time_t alarm_interval_ps;
    unsigned refusals; /* messages printed by posix_refuse */
    struct posix_prog *next;
};

/* mutex / condition variable state, found by the object's address */
struct ptr_map {
    const void **keys;
    void **vals;
    size_t cap, n;
};

struct tcp_sock;

struct posix_world {
    struct sim *sim;
    struct host *hosts;
    size_t nhosts;
    /* descriptors by number */
    struct pfile **files;
    size_t files_cap;
    /* TCP */
    struct tcp_sock *socks, *listeners;
    uint16_t *next_port;      /* per host: next ephemeral port */
    sim_time_t *mgmt_free_ps; /* per host: when its management port is idle */
    /* the simulator's own view, saved while a program runs */
    FILE *real_out, *real_err;
    int out_errno, out_optind, out_opterr, out_optopt;
    char *out_optarg, *out_invocation, *out_invocation_short;
    FILE *out_stdout, *out_stderr;
    struct posix_prog *progs;
    struct posix_thread *running; /* atomic: read by the watchdog */
    uint64_t heartbeat;           /* atomic: bumped at every switch of a program */
    struct ptr_map mutexes, conds;
    uint64_t tsc_khz;
    double watchdog_s;
    struct posix_guard *guard; /* guard.c */
};

/* ---------------------------------------------------------------- prog.c */

/* The calling process's thread (NULL outside a program's process: the
 * simulator itself, a built-in program, a plug-in's constructor). */
struct posix_thread *posix_self(void);
/* posix_self(): the first line of every __wrap_ function (NULL: call the
 * real function). */
struct posix_thread *posix_enter(void);
/* Print "rnicsim: <label>: <what>" on the real stderr (the first few per
 * program; later ones are counted) and set errno to `err`. */
void posix_refuse(struct posix_thread *t, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A new thread record for the running process of `prog` (pthreads): hook
 * installed and the program's view switched in now. */
struct posix_thread *posix_thread_attach(struct posix_prog *prog, struct posix_thread *t);
/* Deliver pending simulated signals (the on_enter hook does it too). */
void posix_deliver_signals(struct posix_thread *t);
/* End the program with `status` from thread `t` (exit(), a fatal default
 * signal action, main returning): atexit handlers, flush, other threads
 * ended; then unwinds `t` to its base.  Does not return. */
_Noreturn void posix_prog_exit(struct posix_thread *t, int status, bool run_atexit);
/* Append bytes to a program's stream (write(1, ...)). */
void posix_out_write(struct posix_prog *prog, int fd, const char *buf, size_t len);
/* Block the calling thread until woken, `deadline` (SIM_TIME_NEVER: none)
 * or a simulated signal.  Returns 0 if woken by `wq`, ETIMEDOUT, or EINTR
 * when a signal with a handler is pending. */
int posix_wait(struct posix_thread *t, struct sim_waitq *wq, sim_time_t deadline, const char *why);

/* ---------------------------------------------------------------- clock.c */

/* Simulated clocks: REALTIME = POSIX_EPOCH_S + sim time, MONOTONIC (and
 * the TSC) = POSIX_BOOT_S + sim time. */
#define POSIX_EPOCH_S 1700000000LL /* 2023-11-14 22:13:20 UTC */
#define POSIX_BOOT_S 1000LL
/* The running thread's view of now (sim time + owed CPU time). */
sim_time_t posix_now_ps(void);
/* The TSC value at the thread's now (guard.c's rdtsc trap). */
uint64_t posix_tsc_now(struct posix_world *w);
/* Absolute simulated time of `ts` read on clock `clk` (0: not a clock we
 * have; EINVAL). */
int posix_clock_deadline(clockid_t clk, const struct timespec *ts, sim_time_t *out);
uint64_t posix_read_tsc_khz(void);

/* ---------------------------------------------------------------- fd.c */

struct pfile *posix_file(struct posix_world *w, int fd);
/* A new simulated descriptor (NULL with errno set). */
struct pfile *posix_file_new(struct posix_world *w, struct posix_prog *owner, enum pfile_kind kind,
                             void *obj);
void posix_file_free(struct posix_world *w, struct pfile *f);
/* poll(2) over simulated and real descriptors; `deadline` absolute. */
int posix_poll(struct posix_thread *t, struct pollfd *fds, nfds_t n, sim_time_t deadline,
               const char *why);
void posix_files_free(struct posix_world *w);

/* ---------------------------------------------------------------- tcp.c */

short tcp_poll_events(struct tcp_sock *s, short events);
ssize_t tcp_read(struct posix_thread *t, struct pfile *f, void *buf, size_t len, int flags);
ssize_t tcp_write(struct posix_thread *t, struct pfile *f, const void *buf, size_t len, int flags);
int tcp_close(struct posix_world *w, struct tcp_sock *s);
int tcp_fionread(struct tcp_sock *s);
void tcp_world_free(struct posix_world *w);
/* Host index of an IPv4 address in network order (-1: none). */
int tcp_host_of_addr(const struct posix_world *w, uint32_t addr_be, const struct host *self);
uint32_t tcp_addr_of_host(size_t index); /* network order */

/* ---------------------------------------------------------------- thread.c */

void ptr_map_free(struct ptr_map *m);
void posix_sync_free(struct posix_world *w);

/* ---------------------------------------------------------------- getopt.c */

int posix_getopt(int argc, char **argv, const char *optstring, const struct option *longopts,
                 int *longind, bool long_only, bool posixly_correct, struct getopt_state *st);

/* ---------------------------------------------------------------- guard.c */

void posix_guard_free(struct posix_world *w);

#endif /* RNICSIM_POSIX_PRIV_H */
