/* A program's life in simulated mode: its main, exit() and atexit(), its
 * own stdout and stderr, the per-process state swapped at every context
 * switch, simulated signals (alarm, setitimer, raise), its identity
 * (getpid, gethostname, uname) and the calls that are refused because
 * they would leave simulated time (fork, exec, system, popen, ...).
 *
 * State swapped at each switch (sim_proc_set_switch_hook): errno (one per
 * simulated thread), and per program stdout, stderr and getopt's optind,
 * opterr, optopt, optarg.  libc's own `stdout` / `stderr` variables are
 * what printf, puts and perror use, so while a program runs they point at
 * its streams; the simulator's are restored when it gives the CPU back.
 *
 * Output: each stream keeps what the program wrote (up to 1 MiB) and echoes
 * every complete line to the simulator's real stdout / stderr as
 * "[label] line" at the simulated instant it was written; a partial line
 * is echoed when the program ends or crashes.
 *
 * Simulated signals: handlers installed with signal()/sigaction() are
 * recorded, never given to the kernel (the simulator owns the process's
 * real signal handling).  alarm()/setitimer(ITIMER_REAL) schedule the
 * signal in simulated time; a pending signal is delivered when the thread
 * next enters the simulator (any redirected call or verbs call, or after a
 * park) and interrupts sleep(), poll() and the like (EINTR).  SIGALRM,
 * SIGINT, SIGTERM, SIGUSR1/2, SIGHUP, SIGPIPE without a handler end the
 * program as the default action would (status 128 + signal). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "posix/posix_priv.h"

#define POSIX_KEEP_MAX ((size_t)1 << 20)
#define POSIX_REFUSALS_SHOWN 5

struct posix_thread *posix_self(void)
{
    struct host_thread *ht = host_thread_current();
    return ht ? ht->os : NULL;
}

struct posix_thread *posix_enter(void)
{
    return posix_self();
}

void posix_refuse(struct posix_thread *t, int err, const char *fmt, ...)
{
    struct posix_prog *p = t->prog;
    if (p->refusals++ < POSIX_REFUSALS_SHOWN) {
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        fflush(p->w->real_out);
        fprintf(p->w->real_err, "rnicsim: %s: %s\n", p->label, msg);
        if (p->refusals == POSIX_REFUSALS_SHOWN)
            fprintf(p->w->real_err, "rnicsim: %s: (further refused calls are not shown)\n",
                    p->label);
        fflush(p->w->real_err);
    }
    errno = err;
}

/* ---------------------------------------------------------------- output streams */

static void grow(char **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return;
    size_t c = *cap ? *cap : 256;
    while (c < need)
        c *= 2;
    char *n = realloc(*buf, c);
    if (!n)
        abort(); /* out of memory while keeping program output */
    *buf = n;
    *cap = c;
}

static void echo_line(struct pout *o, const char *line, size_t len)
{
    struct posix_world *w = o->prog->w;
    FILE *real = o->fd == 1 ? w->real_out : w->real_err;
    if (o->fd == 2)
        fflush(w->real_out); /* keep stdout lines before a later stderr line */
    fprintf(real, "[%s] %.*s\n", o->prog->label, (int)len, line);
    if (o->fd == 2)
        fflush(real);
}

static void pout_append(struct pout *o, const char *buf, size_t len)
{
    if (!o->kept_truncated) {
        size_t room = POSIX_KEEP_MAX - o->kept_len;
        size_t n = len < room ? len : room;
        grow(&o->kept, &o->kept_cap, o->kept_len + n + 1);
        memcpy(o->kept + o->kept_len, buf, n);
        o->kept_len += n;
        o->kept[o->kept_len] = '\0';
        o->kept_truncated = n < len;
    }
    for (size_t i = 0; i < len; i++) {
        if (buf[i] == '\n') {
            echo_line(o, o->line, o->line_len);
            o->line_len = 0;
            continue;
        }
        grow(&o->line, &o->line_cap, o->line_len + 1);
        o->line[o->line_len++] = buf[i];
    }
}

static void pout_flush_partial(struct pout *o)
{
    if (o->line_len) {
        echo_line(o, o->line, o->line_len);
        o->line_len = 0;
    }
}

static ssize_t cookie_write(void *cookie, const char *buf, size_t len)
{
    pout_append(cookie, buf, len);
    return (ssize_t)len;
}

void posix_out_write(struct posix_prog *prog, int fd, const char *buf, size_t len)
{
    FILE *f = fd == 1 ? prog->out : prog->err;
    fflush(f); /* what printf buffered comes first */
    pout_append(&prog->outs[fd == 1 ? 0 : 1], buf, len);
}

void posix_prog_flush(struct posix_prog *prog)
{
    fflush(prog->out);
    fflush(prog->err);
    pout_flush_partial(&prog->outs[0]);
    pout_flush_partial(&prog->outs[1]);
    fflush(prog->w->real_out);
    fflush(prog->w->real_err);
}

const char *posix_prog_output(const struct posix_prog *prog, int fd, size_t *len)
{
    const struct pout *o = &prog->outs[fd == 2 ? 1 : 0];
    *len = o->kept_len;
    return o->kept ? o->kept : "";
}

const char *posix_prog_label(const struct posix_prog *prog)
{
    return prog->label;
}

/* ---------------------------------------------------------------- the switch hook */

static void swap_hook(void *arg, bool in)
{
    struct posix_thread *t = arg;
    struct posix_prog *p = t->prog;
    struct posix_world *w = p->w;
    if (in) {
        w->out_errno = errno;
        errno = t->saved_errno;
        w->out_stdout = stdout;
        w->out_stderr = stderr;
        stdout = p->out;
        stderr = p->err;
        w->out_optind = optind;
        w->out_opterr = opterr;
        w->out_optopt = optopt;
        w->out_optarg = optarg;
        optind = p->optind;
        opterr = p->opterr;
        optopt = p->optopt;
        optarg = p->optarg;
        /* what assert(), err(), error() print as the program's name */
        w->out_invocation = program_invocation_name;
        w->out_invocation_short = program_invocation_short_name;
        if (p->argv0) {
            program_invocation_name = p->argv0;
            program_invocation_short_name = p->argv0_short;
        }
        __atomic_store_n(&w->running, t, __ATOMIC_RELAXED);
    } else {
        t->saved_errno = errno;
        errno = w->out_errno;
        stdout = w->out_stdout;
        stderr = w->out_stderr;
        p->optind = optind;
        p->opterr = opterr;
        p->optopt = optopt;
        p->optarg = optarg;
        optind = w->out_optind;
        opterr = w->out_opterr;
        optopt = w->out_optopt;
        optarg = w->out_optarg;
        program_invocation_name = w->out_invocation;
        program_invocation_short_name = w->out_invocation_short;
        __atomic_store_n(&w->running, NULL, __ATOMIC_RELAXED);
    }
    __atomic_store_n(&w->heartbeat, w->heartbeat + 1, __ATOMIC_RELAXED);
}

static void on_enter(struct host_thread *ht)
{
    struct posix_thread *t = ht->os;
    if (t && t->prog->pending && !t->prog->in_handler)
        posix_deliver_signals(t);
}

static void thread_init(struct posix_prog *prog, struct posix_thread *t, struct sim_proc *p,
                        bool link)
{
    t->prog = prog;
    t->proc = p;
    t->ht = sim_proc_user(p);
    t->ht->os = t;
    t->ht->on_enter = on_enter;
    sim_waitq_init(&t->sleep_wq, "sleep");
    if (link) {
        t->next = prog->threads;
        prog->threads = t;
    }
    sim_proc_set_switch_hook(p, swap_hook, t);
}

struct posix_thread *posix_thread_attach(struct posix_prog *prog, struct posix_thread *t)
{
    thread_init(prog, t, sim_proc_current(), false); /* listed by pthread_create */
    swap_hook(t, true); /* already running: switch the program's view in now */
    return t;
}

/* ---------------------------------------------------------------- program creation */

static void alarm_fire(struct sim *sim, struct sim_event *ev);

struct posix_prog *posix_prog_create(struct posix_world *w, struct host *host, const char *label,
                                     const char *so_path, uintptr_t base, size_t size,
                                     const struct posix_prog_hooks *hooks)
{
    struct posix_prog *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->w = w;
    p->host = host;
    p->label = strdup(label);
    p->so_path = strdup(so_path ? so_path : "");
    p->base = base;
    p->size = size;
    if (hooks)
        p->hooks = *hooks;
    size_t n = 0;
    for (struct posix_prog *q = w->progs; q; q = q->next)
        n++;
    /* deterministic process ids, distinct per program of the run */
    p->pid = (pid_t)(1000 + n);
    p->optind = 1;
    p->opterr = 1;
    p->optopt = '?';
    for (int i = 0; i < 2; i++) {
        p->outs[i].prog = p;
        p->outs[i].fd = i + 1;
    }
    cookie_io_functions_t io = {.write = cookie_write};
    p->out = fopencookie(&p->outs[0], "w", io);
    p->err = fopencookie(&p->outs[1], "w", io);
    if (!p->label || !p->so_path || !p->out || !p->err) {
        if (p->out)
            fclose(p->out);
        if (p->err)
            fclose(p->err);
        free(p->label);
        free(p->so_path);
        free(p);
        return NULL;
    }
    setvbuf(p->out, NULL, _IOLBF, BUFSIZ);
    setvbuf(p->err, NULL, _IOLBF, BUFSIZ);
    for (int s = 0; s < POSIX_NSIG; s++)
        p->sig[s].sa_handler = SIG_DFL;
    sim_event_init(&p->alarm_ev, alarm_fire, p, "alarm");
    p->next = w->progs;
    w->progs = p;
    return p;
}

void posix_prog_attach_main(struct posix_prog *prog, struct sim_proc *p)
{
    struct posix_thread *t = calloc(1, sizeof(*t));
    if (!t)
        abort();
    t->handle = -1;
    thread_init(prog, t, p, true);
    prog->main = t;
}

/* Free a program (posix_world_free). */
void posix_prog_free(struct posix_prog *p);
void posix_prog_free(struct posix_prog *p)
{
    sim_cancel(p->w->sim, &p->alarm_ev);
    fclose(p->out);
    fclose(p->err);
    for (int i = 0; i < 2; i++) {
        free(p->outs[i].kept);
        free(p->outs[i].line);
    }
    while (p->threads) {
        struct posix_thread *t = p->threads;
        p->threads = t->next;
        if (t->ht && t->ht->os == t) {
            t->ht->os = NULL;
            t->ht->on_enter = NULL;
        }
        free(t);
    }
    free(p->label);
    free(p->so_path);
    free(p);
}

/* ---------------------------------------------------------------- main, exit, atexit */

/* End every other thread of the program (they are not running: one OS
 * thread runs one process at a time). */
static void end_other_threads(struct posix_thread *self)
{
    struct posix_prog *p = self->prog;
    for (struct posix_thread *u = p->threads; u; u = u->next) {
        /* a pthread that has not run yet ends by itself when it starts */
        if (u == self || u->finished || !u->proc)
            continue;
        u->finished = true;
        sim_proc_kill(u->proc);
        if (u == p->main) {
            if (p->hooks.main_ended)
                p->hooks.main_ended(p->hooks.arg, p->exit_status);
        } else if (p->hooks.thread_ended) {
            p->hooks.thread_ended(p->hooks.arg);
        }
    }
}

static void prog_finish(struct posix_thread *t, bool run_atexit)
{
    struct posix_prog *p = t->prog;
    if (run_atexit) {
        /* handlers may call exit() again: each runs once */
        while (p->n_atexit > 0) {
            void (*fn)(void) = p->atexit_fns[--p->n_atexit];
            fn();
        }
    }
    sim_cancel(p->w->sim, &p->alarm_ev);
    posix_prog_flush(p);
    end_other_threads(t);
    p->ended = true;
}

_Noreturn void posix_prog_exit(struct posix_thread *t, int status, bool run_atexit)
{
    struct posix_prog *p = t->prog;
    if (!p->exiting) {
        p->exiting = true;
        p->exit_status = status & 0xff;
        prog_finish(t, run_atexit);
    }
    longjmp(t->base, 1);
}

int posix_prog_run_main(struct posix_prog *prog, int (*main_fn)(int, char **), int argc,
                        char **argv)
{
    struct posix_thread *t = prog->main;
    prog->start_ps = posix_now_ps();
    if (argc > 0 && argv[0]) {
        prog->argv0 = argv[0];
        char *slash = strrchr(argv[0], '/');
        prog->argv0_short = slash ? slash + 1 : argv[0];
        program_invocation_name = prog->argv0;
        program_invocation_short_name = prog->argv0_short;
    }
    if (setjmp(t->base) == 0) {
        int rc = main_fn(argc, argv);
        /* returning from main is exit(rc) */
        if (!prog->exiting) {
            prog->exiting = true;
            prog->exit_status = rc & 0xff;
            prog_finish(t, true);
        }
    }
    t->finished = true;
    return prog->exit_status;
}

void __wrap_exit(int status);
void __wrap_exit(int status)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        exit(status);
    posix_prog_exit(t, status, true);
}

void __wrap__exit(int status);
void __wrap__exit(int status)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        _exit(status);
    posix_prog_exit(t, status, false);
}

void __wrap__Exit(int status);
void __wrap__Exit(int status)
{
    __wrap__exit(status);
}

int __wrap_atexit(void (*fn)(void));
int __wrap_atexit(void (*fn)(void))
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return atexit(fn);
    struct posix_prog *p = t->prog;
    if (!fn || p->n_atexit == POSIX_MAX_ATEXIT)
        return -1;
    p->atexit_fns[p->n_atexit++] = fn;
    return 0;
}

/* ---------------------------------------------------------------- identity */

pid_t __wrap_getpid(void);
pid_t __wrap_getpid(void)
{
    struct posix_thread *t = posix_enter();
    return t ? t->prog->pid : getpid();
}

pid_t __wrap_getppid(void);
pid_t __wrap_getppid(void)
{
    struct posix_thread *t = posix_enter();
    return t ? 1 : getppid();
}

int __wrap_gethostname(char *name, size_t len);
int __wrap_gethostname(char *name, size_t len)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return gethostname(name, len);
    size_t n = strlen(t->prog->host->name);
    if (n + 1 > len) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(name, t->prog->host->name, n + 1);
    return 0;
}

int __wrap_uname(struct utsname *u);
int __wrap_uname(struct utsname *u)
{
    struct posix_thread *t = posix_enter();
    int rc = uname(u);
    if (t && rc == 0)
        snprintf(u->nodename, sizeof(u->nodename), "%s", t->prog->host->name);
    return rc;
}

/* ---------------------------------------------------------------- simulated signals */

static bool sig_default_terminates(int sig)
{
    switch (sig) {
    case SIGALRM:
    case SIGINT:
    case SIGTERM:
    case SIGHUP:
    case SIGUSR1:
    case SIGUSR2:
    case SIGPIPE:
    case SIGVTALRM:
    case SIGPROF:
        return true;
    default:
        return false;
    }
}

/* Signals the simulation delivers itself; the others (SIGSEGV, SIGABRT,
 * ...) are real and reported as crashes (guard.c). */
static bool sig_simulated(int sig)
{
    return sig_default_terminates(sig) || sig == SIGCHLD || sig == SIGWINCH || sig == SIGURG ||
           sig == SIGCONT;
}

static void raise_pending(struct posix_prog *p, int sig)
{
    p->pending |= 1ull << sig;
    /* interrupt a thread blocked in a sleep, poll or read */
    for (struct posix_thread *u = p->threads; u; u = u->next)
        if (!u->finished && u->proc != sim_proc_current())
            sim_proc_interrupt(u->proc);
}

void posix_deliver_signals(struct posix_thread *t)
{
    struct posix_prog *p = t->prog;
    while (p->pending && !p->in_handler) {
        int sig = __builtin_ctzll(p->pending);
        p->pending &= ~(1ull << sig);
        struct sigaction *sa = &p->sig[sig];
        if (sa->sa_handler == SIG_IGN)
            continue;
        if (sa->sa_handler == SIG_DFL) {
            if (!sig_default_terminates(sig))
                continue;
            posix_prog_flush(p);
            fprintf(p->w->real_err, "rnicsim: %s: killed by simulated signal %s (%s)\n", p->label,
                    sigabbrev_np(sig), strsignal(sig));
            posix_prog_exit(t, 128 + sig, false);
        }
        void (*handler)(int) = sa->sa_handler;
        void (*action)(int, siginfo_t *, void *) = sa->sa_sigaction;
        bool info = sa->sa_flags & SA_SIGINFO;
        if (sa->sa_flags & SA_RESETHAND)
            sa->sa_handler = SIG_DFL;
        p->in_handler = true;
        if (info) {
            siginfo_t si;
            memset(&si, 0, sizeof(si));
            si.si_signo = sig;
            si.si_code = SI_KERNEL;
            action(sig, &si, NULL);
        } else {
            handler(sig);
        }
        p->in_handler = false;
    }
}

static void alarm_fire(struct sim *sim, struct sim_event *ev)
{
    struct posix_prog *p = ev->ctx;
    if (p->ended)
        return;
    if (p->alarm_interval_ps)
        sim_schedule_at(sim, &p->alarm_ev, sim_now(sim) + p->alarm_interval_ps);
    raise_pending(p, SIGALRM);
}

static int sig_install(struct posix_thread *t, int sig, const struct sigaction *act,
                       struct sigaction *old)
{
    if (sig < 1 || sig >= POSIX_NSIG || sig == SIGKILL || sig == SIGSTOP) {
        errno = EINVAL;
        return -1;
    }
    struct posix_prog *p = t->prog;
    if (old)
        *old = p->sig[sig];
    if (act) {
        if (!sig_simulated(sig) && act->sa_handler != SIG_DFL) {
            /* the simulator keeps SIGSEGV & co.: a crash is reported */
            posix_refuse(t, 0,
                         "handler for %s not installed: in simulated mode a crash is "
                         "reported by rnicsim (accepted, never called)",
                         sigabbrev_np(sig));
            errno = 0;
        }
        p->sig[sig] = *act;
    }
    return 0;
}

int __wrap_sigaction(int sig, const struct sigaction *act, struct sigaction *old);
int __wrap_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return sigaction(sig, act, old);
    return sig_install(t, sig, act, old);
}

sighandler_t __wrap_signal(int sig, sighandler_t handler);
sighandler_t __wrap_signal(int sig, sighandler_t handler)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return signal(sig, handler);
    struct sigaction sa, old;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = handler;
    sa.sa_flags = SA_RESTART; /* glibc's signal() has BSD semantics */
    if (sig_install(t, sig, &sa, &old))
        return SIG_ERR;
    return old.sa_handler;
}

/* Remaining time of the program's alarm, and re-arm it (0: cancel). */
static sim_time_t alarm_set(struct posix_prog *p, sim_time_t delay_ps, sim_time_t interval_ps)
{
    sim_time_t now = sim_now(p->w->sim);
    sim_time_t left = sim_event_pending(&p->alarm_ev) ? p->alarm_ev.time - now : 0;
    sim_cancel(p->w->sim, &p->alarm_ev);
    p->alarm_interval_ps = interval_ps;
    if (delay_ps)
        sim_schedule_at(p->w->sim, &p->alarm_ev, now + delay_ps);
    return left;
}

unsigned __wrap_alarm(unsigned seconds);
unsigned __wrap_alarm(unsigned seconds)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return alarm(seconds);
    host_note_call();
    sim_time_t left = alarm_set(t->prog, (sim_time_t)seconds * SIM_S, 0);
    /* like the kernel: round a remainder up to a whole second */
    return (unsigned)((left + SIM_S - 1) / SIM_S);
}

useconds_t __wrap_ualarm(useconds_t usecs, useconds_t interval);
useconds_t __wrap_ualarm(useconds_t usecs, useconds_t interval)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return ualarm(usecs, interval);
    host_note_call();
    sim_time_t left = alarm_set(t->prog, (sim_time_t)usecs * SIM_US, (sim_time_t)interval * SIM_US);
    return (useconds_t)(left / SIM_US);
}

static sim_time_t tv_ps(const struct timeval *tv)
{
    return (sim_time_t)tv->tv_sec * SIM_S + (sim_time_t)tv->tv_usec * SIM_US;
}

int __wrap_setitimer(int which, const struct itimerval *nv, struct itimerval *old);
int __wrap_setitimer(int which, const struct itimerval *nv, struct itimerval *old)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return setitimer(which, nv, old);
    if (which != ITIMER_REAL) {
        posix_refuse(t, EINVAL, "setitimer(%s): only ITIMER_REAL is simulated",
                     which == ITIMER_VIRTUAL ? "ITIMER_VIRTUAL" : "ITIMER_PROF");
        return -1;
    }
    if (nv && (nv->it_value.tv_usec < 0 || nv->it_value.tv_usec >= 1000000 ||
               nv->it_interval.tv_usec < 0 || nv->it_interval.tv_usec >= 1000000)) {
        errno = EINVAL;
        return -1;
    }
    host_note_call();
    struct posix_prog *p = t->prog;
    sim_time_t old_interval = p->alarm_interval_ps;
    sim_time_t left =
        nv ? alarm_set(p, tv_ps(&nv->it_value), tv_ps(&nv->it_interval))
           : (sim_event_pending(&p->alarm_ev) ? p->alarm_ev.time - sim_now(p->w->sim) : 0);
    if (old) {
        old->it_value.tv_sec = (time_t)(left / SIM_S);
        old->it_value.tv_usec = (suseconds_t)(left % SIM_S / SIM_US);
        old->it_interval.tv_sec = (time_t)(old_interval / SIM_S);
        old->it_interval.tv_usec = (suseconds_t)(old_interval % SIM_S / SIM_US);
    }
    return 0;
}

int __wrap_getitimer(int which, struct itimerval *cur);
int __wrap_getitimer(int which, struct itimerval *cur)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return getitimer(which, cur);
    return __wrap_setitimer(which, NULL, cur);
}

int __wrap_raise(int sig);
int __wrap_raise(int sig)
{
    struct posix_thread *t = posix_enter();
    if (!t || !sig_simulated(sig))
        return raise(sig); /* SIGABRT, SIGSEGV, ...: a real crash, reported */
    t->prog->pending |= 1ull << sig;
    posix_deliver_signals(t);
    return 0;
}

int __wrap_kill(pid_t pid, int sig);
int __wrap_kill(pid_t pid, int sig)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return kill(pid, sig);
    for (struct posix_prog *p = t->prog->w->progs; p; p = p->next) {
        if (p->pid != pid && !(pid == 0 && p == t->prog))
            continue;
        if (sig == 0)
            return 0;
        if (p == t->prog)
            return __wrap_raise(sig);
        if (!sig_simulated(sig) || p->ended) {
            errno = p->ended ? ESRCH : EINVAL;
            return -1;
        }
        raise_pending(p, sig);
        return 0;
    }
    posix_refuse(t, EPERM, "kill(%d, %d): not a process of this simulation", (int)pid, sig);
    return -1;
}

int __wrap_pause(void);
int __wrap_pause(void)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return pause();
    host_note_call();
    while (posix_wait(t, &t->sleep_wq, SIM_TIME_NEVER, "pause()") != EINTR) {
    }
    posix_deliver_signals(t);
    errno = EINTR;
    return -1;
}

int posix_wait(struct posix_thread *t, struct sim_waitq *wq, sim_time_t deadline, const char *why)
{
    struct posix_prog *p = t->prog;
    if (p->pending && !p->in_handler)
        return EINTR;
    /* asleep in the kernel: its hardware thread is free for the others
     * (sim/host/cpu.c), and it waits for it again when it wakes */
    host_block_begin();
    bool woken;
    if (deadline == SIM_TIME_NEVER) {
        sim_waitq_wait(wq, why);
        woken = true;
    } else {
        woken = sim_waitq_wait_until(wq, deadline, why);
    }
    host_block_end();
    /* an interrupt resumes the wait too */
    if (p->pending && !p->in_handler)
        return EINTR;
    return woken ? 0 : ETIMEDOUT;
}

/* ---------------------------------------------------------------- refused calls */

#define REFUSE_PROCESS(what)                                                                       \
    posix_refuse(t, ENOSYS,                                                                        \
                 "%s refused: a simulated program cannot start real processes (they would run "    \
                 "outside simulated time)",                                                        \
                 what)

pid_t __wrap_fork(void);
pid_t __wrap_fork(void)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return fork();
    REFUSE_PROCESS("fork()");
    return -1;
}

pid_t __wrap_vfork(void);
pid_t __wrap_vfork(void)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return fork();
    REFUSE_PROCESS("vfork()");
    return -1;
}

int __wrap_system(const char *cmd);
int __wrap_system(const char *cmd)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return system(cmd);
    char what[160];
    snprintf(what, sizeof(what), "system(\"%.100s\")", cmd ? cmd : "");
    REFUSE_PROCESS(what);
    return -1;
}

FILE *__wrap_popen(const char *cmd, const char *mode);
FILE *__wrap_popen(const char *cmd, const char *mode)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return popen(cmd, mode);
    char what[160];
    snprintf(what, sizeof(what), "popen(\"%.100s\")", cmd ? cmd : "");
    REFUSE_PROCESS(what);
    return NULL;
}

static int refuse_exec(const char *fn, const char *path)
{
    struct posix_thread *t = posix_enter();
    char what[160];
    snprintf(what, sizeof(what), "%s(\"%.100s\")", fn, path ? path : "");
    if (t)
        REFUSE_PROCESS(what);
    else
        errno = ENOSYS;
    return -1;
}

int __wrap_execve(const char *path, char *const argv[], char *const envp[]);
int __wrap_execve(const char *path, char *const argv[], char *const envp[])
{
    (void)argv;
    (void)envp;
    return refuse_exec("execve", path);
}
int __wrap_execv(const char *path, char *const argv[]);
int __wrap_execv(const char *path, char *const argv[])
{
    (void)argv;
    return refuse_exec("execv", path);
}
int __wrap_execvp(const char *file, char *const argv[]);
int __wrap_execvp(const char *file, char *const argv[])
{
    (void)argv;
    return refuse_exec("execvp", file);
}
int __wrap_execvpe(const char *file, char *const argv[], char *const envp[]);
int __wrap_execvpe(const char *file, char *const argv[], char *const envp[])
{
    (void)argv;
    (void)envp;
    return refuse_exec("execvpe", file);
}
int __wrap_execl(const char *path, const char *arg, ...);
int __wrap_execl(const char *path, const char *arg, ...)
{
    (void)arg;
    return refuse_exec("execl", path);
}
int __wrap_execlp(const char *file, const char *arg, ...);
int __wrap_execlp(const char *file, const char *arg, ...)
{
    (void)arg;
    return refuse_exec("execlp", file);
}
int __wrap_execle(const char *path, const char *arg, ...);
int __wrap_execle(const char *path, const char *arg, ...)
{
    (void)arg;
    return refuse_exec("execle", path);
}

int __wrap_posix_spawn(pid_t *pid, const char *path, const void *fa, const void *attr,
                       char *const argv[], char *const envp[]);
int __wrap_posix_spawn(pid_t *pid, const char *path, const void *fa, const void *attr,
                       char *const argv[], char *const envp[])
{
    (void)pid;
    (void)fa;
    (void)attr;
    (void)argv;
    (void)envp;
    refuse_exec("posix_spawn", path);
    return ENOSYS;
}
int __wrap_posix_spawnp(pid_t *pid, const char *file, const void *fa, const void *attr,
                        char *const argv[], char *const envp[]);
int __wrap_posix_spawnp(pid_t *pid, const char *file, const void *fa, const void *attr,
                        char *const argv[], char *const envp[])
{
    (void)pid;
    (void)fa;
    (void)attr;
    (void)argv;
    (void)envp;
    refuse_exec("posix_spawnp", file);
    return ENOSYS;
}

int __wrap_daemon(int nochdir, int noclose);
int __wrap_daemon(int nochdir, int noclose)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return daemon(nochdir, noclose);
    REFUSE_PROCESS("daemon()");
    return -1;
}
