/* Guards of a run with programs loaded from shared objects: crashes are
 * reported, rdtsc is emulated, spinning is found.
 *
 * Crashes.  SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS and SIGABRT
 * (abort(), a failed assert) are caught on an alternate signal stack (a
 * program's stack may be the thing that overflowed).  If a program was
 * running, rnicsim names it, its host, the simulated time, the signal and
 * where it happened (a backtrace; frames inside the program's shared
 * object are resolved to function and line with addr2line when the
 * object has debug information, as rnicsim-cc builds it), echoes what
 * every program printed and has not been shown yet, and exits with status
 * 1, "a program failed".  A signal outside any program is a bug of the
 * simulator: the previous handler (AddressSanitizer's, or the default)
 * gets it.
 *
 * rdtsc.  x86 programs read the time stamp counter with the rdtsc
 * instruction (perftest's get_cycles()); no library call to redirect.
 * prctl(PR_SET_TSC, PR_TSC_SIGSEGV) makes the instruction fault for the
 * simulator's thread; the SIGSEGV handler recognises rdtsc / rdtscp at
 * the faulting address and emulates it: the program gets (1000 s +
 * simulated time) x the "cpu MHz" of /proc/cpuinfo -- what perftest
 * divides cycles by -- and pays host.cpu.tsc_read of CPU time at its next
 * call into the simulator (a signal handler cannot switch processes).
 * The simulator's own clock reads (the vDSO uses rdtscp) are served with
 * the real counter.
 *
 * Spinning.  A watchdog thread watches the context switches of programs:
 * if one program has run for longer than the limit (10 s of real time,
 * `rnicsim run --watchdog SECONDS`, $RNICSIM_WATCHDOG) without giving the
 * CPU back to the simulator -- a loop reading memory that only the NIC or
 * another program could change, which in simulated time never changes --
 * it interrupts it, prints where it spins and what to do, and the run
 * ends with status 1.
 *
 * Signal handlers are process-wide, so one guarded world at a time is
 * kept in `guarded` (the one hidden global of the simulated POSIX). */
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "posix/posix_priv.h"

enum { GUARD_ALTSTACK_BYTES = 256 * 1024, GUARD_MAX_FRAMES = 48 };

static const int crash_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT};
#define N_CRASH_SIGNALS (sizeof(crash_signals) / sizeof(crash_signals[0]))

struct posix_guard {
    struct posix_world *w;
    void *altstack_mem;
    stack_t old_altstack;
    struct sigaction old_crash[N_CRASH_SIGNALS], old_wd;
    int old_tsc_mode;
    bool tsc_trap;
    /* the watchdog */
    pthread_t wd_thread, main_thread;
    bool wd_running, wd_stop;
    pthread_mutex_t wd_mu;
    pthread_cond_t wd_cv;
    double wd_spun_s;
};

static struct posix_world *guarded;

static int wd_signal(void)
{
    return SIGRTMIN + 2;
}

/* ---------------------------------------------------------------- the TSC */

static uint64_t real_tsc(unsigned *aux)
{
    uint32_t lo, hi, c = 0;
    prctl(PR_SET_TSC, PR_TSC_ENABLE, 0, 0, 0);
#if defined(__x86_64__)
    __asm__ volatile("rdtscp" : "=a"(lo), "=d"(hi), "=c"(c));
#else
    lo = hi = 0;
#endif
    prctl(PR_SET_TSC, PR_TSC_SIGSEGV, 0, 0, 0);
    if (aux)
        *aux = c;
    return ((uint64_t)hi << 32) | lo;
}

#if defined(__x86_64__)
/* rdtsc (0f 31) or rdtscp (0f 01 f9) at the faulting instruction:
 * emulate it and return true. */
static bool emulate_tsc(ucontext_t *uc)
{
    greg_t *g = uc->uc_mcontext.gregs;
    const uint8_t *ip = (const uint8_t *)g[REG_RIP];
    int len;
    if (ip[0] == 0x0f && ip[1] == 0x31)
        len = 2;
    else if (ip[0] == 0x0f && ip[1] == 0x01 && ip[2] == 0xf9)
        len = 3;
    else
        return false;
    uint64_t v;
    unsigned aux = 0;
    struct posix_thread *t = posix_self();
    if (t) {
        t->ht->owed_ps += t->prog->host->cpu.tsc_read_ps;
        v = posix_tsc_now(t->prog->w);
    } else {
        v = real_tsc(&aux);
    }
    g[REG_RAX] = (greg_t)(uint32_t)v;
    g[REG_RDX] = (greg_t)(v >> 32);
    if (len == 3)
        g[REG_RCX] = (greg_t)aux;
    g[REG_RIP] += len;
    return true;
}
#endif

/* ---------------------------------------------------------------- reports */

/* Write a string with write(2) (no stdio in a signal handler's report). */
static void say(const char *s)
{
    size_t n = strlen(s);
    while (n) {
        ssize_t k = write(STDERR_FILENO, s, n);
        if (k <= 0)
            return;
        s += k;
        n -= (size_t)k;
    }
}

static void sayf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sayf(const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    say(buf);
}

static void format_sim_time(sim_time_t ps, char *buf, size_t len)
{
    if (ps < SIM_US)
        snprintf(buf, len, "%.3f ns", (double)ps / (double)SIM_NS);
    else if (ps < SIM_MS)
        snprintf(buf, len, "%.3f us", (double)ps / (double)SIM_US);
    else if (ps < SIM_S)
        snprintf(buf, len, "%.3f ms", (double)ps / (double)SIM_MS);
    else
        snprintf(buf, len, "%.6f s", (double)ps / (double)SIM_S);
}

/* Resolve `n` offsets inside `obj` to "function at file:line" with
 * addr2line (binutils), one line per offset in `out`.  false if that is
 * not possible. */
static bool addr2line(const char *obj, const uintptr_t *offs, int n, char *out, size_t len)
{
    static char tool[] = "/usr/bin/addr2line", f[] = "-f", cpp[] = "-C", pretty[] = "-p",
                exe[] = "-e";
    char objbuf[4096];
    snprintf(objbuf, sizeof(objbuf), "%s", obj);
    if (access(tool, X_OK) != 0 || access(obj, R_OK) != 0 || n <= 0)
        return false;
    int p[2];
    if (pipe(p) != 0)
        return false;
    char args[GUARD_MAX_FRAMES][24];
    char *argv[GUARD_MAX_FRAMES + 8];
    int k = 0;
    argv[k++] = tool;
    argv[k++] = f;
    argv[k++] = cpp;
    argv[k++] = pretty;
    argv[k++] = exe;
    argv[k++] = objbuf;
    for (int i = 0; i < n && i < GUARD_MAX_FRAMES; i++) {
        snprintf(args[i], sizeof(args[i]), "0x%lx", (unsigned long)offs[i]);
        argv[k++] = args[i];
    }
    argv[k] = NULL;
    pid_t pid = fork();
    if (pid < 0) {
        close(p[0]);
        close(p[1]);
        return false;
    }
    if (pid == 0) {
        prctl(PR_SET_TSC, PR_TSC_ENABLE, 0, 0, 0);
        dup2(p[1], STDOUT_FILENO);
        int dn = open("/dev/null", O_WRONLY);
        if (dn >= 0)
            dup2(dn, STDERR_FILENO);
        close(p[0]);
        execv(tool, argv);
        _exit(127);
    }
    close(p[1]);
    size_t got = 0;
    for (;;) {
        ssize_t r = read(p[0], out + got, len - 1 - got);
        if (r <= 0)
            break;
        got += (size_t)r;
        if (got == len - 1)
            break;
    }
    out[got] = '\0';
    close(p[0]);
    int status;
    waitpid(pid, &status, 0);
    return got > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* The backtrace of the interrupted code, with the program's own frames
 * resolved to source lines.  `pc` is the faulting instruction. */
static void print_backtrace(struct posix_prog *p, uintptr_t pc)
{
    void *frames[GUARD_MAX_FRAMES];
    int n = backtrace(frames, GUARD_MAX_FRAMES);
    /* skip the frames of this handler: start at the one holding pc */
    int first = 0;
    for (int i = 0; i < n; i++)
        if ((uintptr_t)frames[i] == pc) {
            first = i;
            break;
        }
    uintptr_t offs[GUARD_MAX_FRAMES];
    int idx[GUARD_MAX_FRAMES], nin = 0;
    for (int i = first; i < n; i++) {
        uintptr_t a = (uintptr_t)frames[i];
        if (p && p->size && a >= p->base && a < p->base + p->size) {
            /* return addresses point after the call: look up the call */
            offs[nin] = a - p->base - (i == first ? 0 : 1);
            idx[nin++] = i;
        }
    }
    char resolved[8192];
    bool have = p && addr2line(p->so_path, offs, nin, resolved, sizeof(resolved));
    char *line = have ? resolved : NULL;
    int j = 0;
    for (int i = first; i < n; i++) {
        uintptr_t a = (uintptr_t)frames[i];
        Dl_info di;
        memset(&di, 0, sizeof(di));
        bool in_prog = j < nin && idx[j] == i;
        if (in_prog) {
            char *nl = line ? strchr(line, '\n') : NULL;
            if (nl)
                *nl = '\0';
            sayf("    #%-2d %s+0x%lx  %s\n", i - first, p->so_path, (unsigned long)offs[j],
                 line && *line ? line : "");
            line = nl ? nl + 1 : NULL;
            j++;
        } else if (dladdr((void *)a, &di) && di.dli_fname) {
            const char *base = strrchr(di.dli_fname, '/');
            sayf("    #%-2d %s+0x%lx  %s\n", i - first, base ? base + 1 : di.dli_fname,
                 (unsigned long)(a - (uintptr_t)di.dli_fbase),
                 di.dli_sname ? di.dli_sname : "");
        } else {
            sayf("    #%-2d 0x%lx\n", i - first, (unsigned long)a);
        }
    }
}

static void flush_all_programs(struct posix_world *w)
{
    /* the crashed program's stdio may be mid-update; its completed lines
     * were echoed already, so only pending partial lines matter */
    for (struct posix_prog *q = w->progs; q; q = q->next)
        posix_prog_flush(q);
    fflush(w->real_out);
}

static const char *signal_detail(int sig, const siginfo_t *si, char *buf, size_t len)
{
    switch (sig) {
    case SIGSEGV:
        snprintf(buf, len, "invalid memory access at address %p (%s)", si->si_addr,
                 si->si_code == SEGV_MAPERR   ? "address not mapped"
                 : si->si_code == SEGV_ACCERR ? "no permission for this access"
                                              : "general protection fault");
        return buf;
    case SIGBUS:
        snprintf(buf, len, "bus error at address %p", si->si_addr);
        return buf;
    case SIGFPE:
        return "arithmetic exception (division by zero?)";
    case SIGILL:
        return "illegal instruction";
    case SIGABRT:
        return "abort() was called (a failed assert prints its message above)";
    default:
        return "";
    }
}

static _Noreturn void program_crashed(struct posix_thread *t, int sig, siginfo_t *si,
                                      uintptr_t pc, uintptr_t sp)
{
    struct posix_prog *p = t->prog;
    char when[48], detail[160];
    format_sim_time(sim_now(p->w->sim), when, sizeof(when));
    fflush(p->w->real_out);
    sayf("\nrnicsim: program %s (%s) on host %s crashed at simulated time %s: %s, %s\n",
         p->label, p->so_path, p->host->name, when, sigabbrev_np(sig),
         signal_detail(sig, si, detail, sizeof(detail)));
    uintptr_t a = (uintptr_t)si->si_addr;
    if (sig == SIGSEGV && si->si_code == SEGV_ACCERR && a < sp && sp - a < 64 * 1024)
        say("rnicsim: this looks like a stack overflow: give the program a larger stack in the "
            "scenario (programs[].stack, e.g. stack: 4MiB)\n");
    say("rnicsim: where it happened:\n");
    print_backtrace(p, pc);
    say("rnicsim: output of the programs so far is above; the run is stopped (exit status 1: a "
        "program failed)\n");
    flush_all_programs(p->w);
    _exit(1);
}

/* ---------------------------------------------------------------- handlers */

static void crash_handler(int sig, siginfo_t *si, void *ctx)
{
    ucontext_t *uc = ctx;
    struct posix_world *w = guarded;
    int saved = errno;
#if defined(__x86_64__)
    if (sig == SIGSEGV && w && w->guard && w->guard->tsc_trap && si->si_code == SI_KERNEL &&
        emulate_tsc(uc)) {
        errno = saved;
        return;
    }
    uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
    uintptr_t sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
#else
    uintptr_t pc = 0, sp = 0;
#endif
    struct posix_thread *t = w ? posix_self() : NULL;
    if (t)
        program_crashed(t, sig, si, pc, sp);
    /* not a program: the simulator's own bug; hand it on */
    size_t k = 0;
    while (k < N_CRASH_SIGNALS && crash_signals[k] != sig)
        k++;
    struct sigaction *old = w && w->guard && k < N_CRASH_SIGNALS ? &w->guard->old_crash[k] : NULL;
    if (old && (old->sa_flags & SA_SIGINFO) && old->sa_sigaction) {
        old->sa_sigaction(sig, si, ctx);
        return;
    }
    if (old && old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN) {
        old->sa_handler(sig);
        return;
    }
    say("rnicsim: internal error: ");
    say(sigabbrev_np(sig));
    say(" in the simulator (no program was running)\n");
    print_backtrace(NULL, pc);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void watchdog_handler(int sig, siginfo_t *si, void *ctx)
{
    (void)sig;
    (void)si;
    struct posix_world *w = guarded;
    struct posix_thread *t = w ? posix_self() : NULL;
    if (!t)
        return; /* the program gave the CPU back meanwhile */
    ucontext_t *uc = ctx;
#if defined(__x86_64__)
    uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
#else
    (void)uc;
    uintptr_t pc = 0;
#endif
    struct posix_prog *p = t->prog;
    char when[48];
    format_sim_time(sim_now(w->sim), when, sizeof(when));
    fflush(w->real_out);
    sayf("\nrnicsim: program %s on host %s has run for %.0f s of real time without entering the "
         "simulator; simulated time stands still at %s.  It is spinning here:\n",
         p->label, p->host->name, w->guard->wd_spun_s, when);
    print_backtrace(p, pc);
    say("rnicsim: in simulated mode nothing happens while a program runs: the NIC, the network "
        "and the other programs only move when it calls into rnicsim.  A loop that waits for "
        "memory to change must call something that lets simulated time pass in its body: "
        "ibv_poll_cq(), host_relax() (<rnicsim/host.h>), sched_yield(), usleep(), poll().  If "
        "the program really computes for this long, raise the limit with "
        "`rnicsim run --watchdog SECONDS` (0 turns it off).\n");
    say("rnicsim: the run is stopped (exit status 1: a program failed)\n");
    flush_all_programs(w);
    _exit(1);
}

/* ---------------------------------------------------------------- the watchdog thread */

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *watchdog_main(void *arg)
{
    struct posix_guard *g = arg;
    struct posix_world *w = g->w;
    prctl(PR_SET_TSC, PR_TSC_ENABLE, 0, 0, 0); /* this thread reads real clocks */
    uint64_t last = __atomic_load_n(&w->heartbeat, __ATOMIC_RELAXED);
    double since = mono_s();
    pthread_mutex_lock(&g->wd_mu);
    while (!g->wd_stop) {
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_nsec += 100 * 1000 * 1000;
        if (dl.tv_nsec >= 1000000000L) {
            dl.tv_sec++;
            dl.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&g->wd_cv, &g->wd_mu, &dl);
        if (g->wd_stop)
            break;
        uint64_t hb = __atomic_load_n(&w->heartbeat, __ATOMIC_RELAXED);
        struct posix_thread *run = __atomic_load_n(&w->running, __ATOMIC_RELAXED);
        double now = mono_s();
        if (hb != last || !run) {
            last = hb;
            since = now;
            continue;
        }
        if (now - since >= w->watchdog_s) {
            g->wd_spun_s = now - since;
            pthread_kill(g->main_thread, wd_signal());
            since = now; /* if it slipped out meanwhile, watch again */
        }
    }
    pthread_mutex_unlock(&g->wd_mu);
    return NULL;
}

/* ---------------------------------------------------------------- start / stop */

void posix_guard_start(struct posix_world *w)
{
    if (guarded || w->guard)
        return;
    struct posix_guard *g = calloc(1, sizeof(*g));
    if (!g)
        return;
    g->w = w;
    w->guard = g;
    guarded = w;
    /* backtrace() loads libgcc_s on first use: not in a signal handler */
    void *dummy[2];
    backtrace(dummy, 2);

    g->altstack_mem = malloc(GUARD_ALTSTACK_BYTES);
    if (g->altstack_mem) {
        stack_t ss = {.ss_sp = g->altstack_mem, .ss_size = GUARD_ALTSTACK_BYTES};
        sigaltstack(&ss, &g->old_altstack);
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = crash_handler;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < N_CRASH_SIGNALS; i++)
        sigaction(crash_signals[i], &sa, &g->old_crash[i]);
    sa.sa_sigaction = watchdog_handler;
    sigaction(wd_signal(), &sa, &g->old_wd);

    g->main_thread = pthread_self();
    pthread_mutex_init(&g->wd_mu, NULL);
    pthread_cond_init(&g->wd_cv, NULL);
    if (w->watchdog_s > 0 && pthread_create(&g->wd_thread, NULL, watchdog_main, g) == 0)
        g->wd_running = true;

#if defined(__x86_64__)
    int mode = 0;
    if (prctl(PR_GET_TSC, &mode, 0, 0, 0) == 0 &&
        prctl(PR_SET_TSC, PR_TSC_SIGSEGV, 0, 0, 0) == 0) {
        g->old_tsc_mode = mode;
        g->tsc_trap = true;
    }
#endif
}

void posix_guard_stop(struct posix_world *w)
{
    struct posix_guard *g = w->guard;
    if (!g)
        return;
    if (g->tsc_trap)
        prctl(PR_SET_TSC, g->old_tsc_mode ? g->old_tsc_mode : PR_TSC_ENABLE, 0, 0, 0);
    if (g->wd_running) {
        pthread_mutex_lock(&g->wd_mu);
        g->wd_stop = true;
        pthread_cond_signal(&g->wd_cv);
        pthread_mutex_unlock(&g->wd_mu);
        pthread_join(g->wd_thread, NULL);
    }
    pthread_cond_destroy(&g->wd_cv);
    pthread_mutex_destroy(&g->wd_mu);
    for (size_t i = 0; i < N_CRASH_SIGNALS; i++)
        sigaction(crash_signals[i], &g->old_crash[i], NULL);
    sigaction(wd_signal(), &g->old_wd, NULL);
    if (g->altstack_mem) {
        if (g->old_altstack.ss_sp && !(g->old_altstack.ss_flags & SS_DISABLE))
            sigaltstack(&g->old_altstack, NULL);
        else {
            stack_t off = {.ss_flags = SS_DISABLE};
            sigaltstack(&off, NULL);
        }
        free(g->altstack_mem);
    }
    free(g);
    w->guard = NULL;
    guarded = NULL;
}

void posix_guard_free(struct posix_world *w)
{
    posix_guard_stop(w);
}
