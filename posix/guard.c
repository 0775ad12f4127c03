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
 * the faulting address and sends the program through a trampoline
 * (tramp_x86_64.S) that reads the simulated clock like clock_gettime
 * does, host.cpu.tsc_read of CPU time: the program gets (1000 s +
 * simulated time) x the "cpu MHz" of /proc/cpuinfo -- what perftest
 * divides cycles by.  The simulator's own clock reads (the vDSO uses
 * rdtscp) are served with the real counter.
 *
 * Spinning on memory.  A loop like perftest's
 *     while (*poll_buf != (char)rcnt);
 * waits for a DMA write, but in simulated time nothing happens until the
 * program calls into the simulator.  A timer signals the simulator's
 * thread every 50 us; when a program has run a whole tick without a
 * context switch and is executing its own code, it is preempted: the
 * trampoline makes it call what <rnicsim/host.h>'s host_relax() does --
 * park until a DMA write or CQE lands in its host's memory or a sibling
 * thread runs -- and resume where it was.  So such loops run unmodified,
 * at the simulated instant the awaited write lands.  A program computing
 * (not waiting) for that long in its own code is parked the same way; if
 * the run would then stop with every program blocked, it is woken again
 * (posix_wake_spinners), so computation is delayed, never lost -- it is
 * free in simulated time either way (declare it with host_compute()).
 *
 * The watchdog.  A thread watches the context switches of programs: if one
 * program has run for longer than the limit (10 s of real time,
 * `rnicsim run --watchdog SECONDS`, $RNICSIM_WATCHDOG) without giving the
 * CPU back -- stuck in a real blocking call, or spinning outside its own
 * code -- it interrupts it, prints where it is and what to do, and the run
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
/* The spin preemption's tick: a program that runs one whole tick in its
 * own code without a context switch is preempted at the next. */
#define PREEMPT_TICK_NS 50000

static const int crash_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT};
#define N_CRASH_SIGNALS (sizeof(crash_signals) / sizeof(crash_signals[0]))

struct posix_guard {
    struct posix_world *w;
    bool tramp;      /* XSAVE available: trampolines usable */
    timer_t preempt; /* the preemption tick (PREEMPT_TICK_NS) */
    bool preempt_on, preempt_always;
    /* spin detection: the running program's calls at the last tick, and
     * the single-stepped check of a candidate loop */
    struct posix_thread *tick_t;
    uint64_t tick_entries;
    bool stepping;
    unsigned steps, backoff, skip;
    struct posix_thread *step_t;
    uint64_t step_entries;
    greg_t step_regs[NGREG];
    unsigned char step_xmm[256];
    struct sigaction old_preempt;
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

static int preempt_signal(void)
{
    return SIGRTMIN + 3;
}

/* ---------------------------------------------------------------- trampolines */

/* Bytes of the XSAVE area (tramp_x86_64.S reads it). */
uint64_t rnicsim_xsave_bytes;

/* What tramp_x86_64.S saved, in push order reversed. */
struct tramp_regs {
    uint64_t r15, r14, r13, r12, r11, r10, r9, r8, rdi, rsi, rbp, rbx, rdx, rcx, rax, rflags;
    uint64_t kind, rip;
};
enum { TRAMP_PREEMPT, TRAMP_RDTSC, TRAMP_RDTSCP };

void rnicsim_tramp_preempt(void);
void rnicsim_tramp_rdtsc(void);
void rnicsim_tramp_rdtscp(void);
void rnicsim_tramp_c(struct tramp_regs *r);

#if defined(__x86_64__)
#include <cpuid.h>

/* XSAVE enabled by the OS, and its area size for the enabled features. */
static bool xsave_setup(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 26)) || !(c & (1u << 27)))
        return false;
    if (__get_cpuid_max(0, NULL) < 0xd)
        return false;
    __cpuid_count(0xd, 0, a, b, c, d);
    if (b < 576)
        return false;
    rnicsim_xsave_bytes = (uint64_t)b + 64; /* + room to align down to 64 */
    return true;
}

/* Make the interrupted program call `entry` (a trampoline) before it goes
 * on at its pc: push the pc below the red zone.  The slot may hold stale
 * AddressSanitizer poison from deeper calls: written unchecked. */
__attribute__((no_sanitize("address"))) static void tramp_inject(ucontext_t *uc,
                                                                 void (*entry)(void), int skip)
{
    greg_t *g = uc->uc_mcontext.gregs;
    uint64_t *slot = (uint64_t *)(uintptr_t)(g[REG_RSP] - 128 - 8);
    *slot = (uint64_t)g[REG_RIP] + (uint64_t)skip;
    g[REG_RSP] = (greg_t)(uintptr_t)slot;
    uintptr_t e;
    memcpy(&e, &entry, sizeof(e));
    g[REG_RIP] = (greg_t)e;
}
#endif

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
    /* only the program's own rdtsc reads simulated time; the vDSO's rdtscp
     * (clock_gettime of libc's or a sanitizer runtime's internals, even
     * when called on a program's behalf) gets the real counter */
    struct posix_thread *t = posix_self();
    uintptr_t pc = (uintptr_t)g[REG_RIP];
    const struct posix_prog *p = t ? t->prog : NULL;
    if (p && (!p->size || pc < p->base || pc >= p->base + p->size))
        t = NULL;
    if (t && guarded->guard->tramp) {
        /* read the simulated clock in the program's context, where it may
         * give the CPU to events that come first */
        tramp_inject(uc, len == 2 ? rnicsim_tramp_rdtsc : rnicsim_tramp_rdtscp, len);
        return true;
    }
    if (t) { /* no XSAVE: the cost is paid at the next call */
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
    uintptr_t offs[GUARD_MAX_FRAMES] = {0}; /* gcc -O2 -g cannot see nin bounds the reads */
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
    int j = 0, repeats = 0;
    for (int i = first; i < n; i++) {
        uintptr_t a = (uintptr_t)frames[i];
        Dl_info di;
        memset(&di, 0, sizeof(di));
        bool in_prog = j < nin && idx[j] == i;
        /* deep recursion: one line for a run of the same return address */
        bool same = i > first && frames[i] == frames[i - 1];
        if (same && i + 1 < n) {
            repeats++;
            if (in_prog) {
                char *nl = line ? strchr(line, '\n') : NULL;
                line = nl ? nl + 1 : NULL;
                j++;
            }
            continue;
        }
        if (repeats) {
            sayf("    ... the frame above %d more times\n", repeats);
            repeats = 0;
        }
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
                 (unsigned long)(a - (uintptr_t)di.dli_fbase), di.dli_sname ? di.dli_sname : "");
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

static _Noreturn void program_crashed(struct posix_thread *t, int sig, siginfo_t *si, uintptr_t pc,
                                      uintptr_t sp)
{
    struct posix_prog *p = t->prog;
    char when[48], detail[160];
    format_sim_time(sim_now(p->w->sim), when, sizeof(when));
    fflush(p->w->real_out);
    sayf("\nrnicsim: program %s (%s) on host %s crashed at simulated time %s: SIG%s, %s\n",
         p->label, p->so_path, p->host->name, when, sigabbrev_np(sig),
         signal_detail(sig, si, detail, sizeof(detail)));
    uintptr_t a = (uintptr_t)si->si_addr;
    if (sig == SIGSEGV && si->si_code == SEGV_ACCERR && (a < sp ? sp - a : a - sp) < 64 * 1024)
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

#if defined(__x86_64__)
static void step_trap(struct posix_guard *g, ucontext_t *uc);
#endif

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
    if (sig == SIGTRAP && w && w->guard && w->guard->stepping) {
        step_trap(w->guard, uc);
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
    say("rnicsim: internal error: SIG");
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

/* ---------------------------------------------------------------- preemption */

static void spin_park(struct posix_thread *t, uintptr_t pc)
{
    struct posix_prog *p = t->prog;
    t->spinning = true;
    t->spin_pc = pc;
    const char *name = strrchr(p->so_path, '/');
    snprintf(t->ht->why, sizeof(t->ht->why),
             "spinning at %s+0x%lx without calls into rnicsim (parked until memory of %s changes)",
             name ? name + 1 : p->so_path, (unsigned long)(pc - p->base), p->host->name);
    char why[sizeof(t->ht->why)];
    memcpy(why, t->ht->why, sizeof(why));
    host_note_call();
    host_park(why);
    t->spinning = false;
}

/* Called by the trampolines, on the program's stack, in its context. */
void rnicsim_tramp_c(struct tramp_regs *r)
{
    int saved = errno;
    struct posix_thread *t = posix_self();
    if (r->kind == TRAMP_PREEMPT) {
        if (t && guarded->guard->preempt_always) {
            host_note_call(); /* the trampoline test: give the CPU away, go on */
            host_charge(1);
        } else if (t) {
            spin_park(t, (uintptr_t)r->rip);
        }
    } else {
        uint64_t v;
        if (t) {
            host_charge_soon(t->prog->host->cpu.tsc_read_ps);
            v = posix_tsc_now(t->prog->w);
        } else {
            v = real_tsc(NULL);
        }
        r->rax = (uint32_t)v;
        r->rdx = v >> 32;
        if (r->kind == TRAMP_RDTSCP)
            r->rcx = 0; /* IA32_TSC_AUX: CPU 0 */
    }
    errno = saved;
}

/* The general registers a loop without progress leaves alone (not the
 * flags, nor the fault fields of the context), and the vector registers. */
static bool same_state(const struct posix_guard *g, const ucontext_t *uc)
{
#if defined(__x86_64__)
    static const int regs[] = {REG_R8,  REG_R9,  REG_R10, REG_R11, REG_R12, REG_R13,
                               REG_R14, REG_R15, REG_RDI, REG_RSI, REG_RBP, REG_RBX,
                               REG_RDX, REG_RAX, REG_RCX, REG_RSP, REG_RIP};
    for (size_t i = 0; i < sizeof(regs) / sizeof(regs[0]); i++)
        if (uc->uc_mcontext.gregs[regs[i]] != g->step_regs[regs[i]])
            return false;
    return !uc->uc_mcontext.fpregs ||
           memcmp(uc->uc_mcontext.fpregs->_xmm, g->step_xmm, sizeof(g->step_xmm)) == 0;
#else
    (void)g;
    (void)uc;
    return false;
#endif
}

#if defined(__x86_64__)
enum { EFLAGS_TF = 0x100, SPIN_MAX_STEPS = 256, SPIN_MAX_BACKOFF = 1024 };

static bool in_program(const struct posix_thread *t, uintptr_t pc)
{
    const struct posix_prog *p = t ? t->prog : NULL;
    return p && p->size && pc >= p->base && pc < p->base + p->size;
}

static void step_stop(struct posix_guard *g, ucontext_t *uc, bool spin)
{
    g->stepping = false;
    uc->uc_mcontext.gregs[REG_EFL] &= ~(greg_t)EFLAGS_TF;
    if (spin) {
        g->backoff = 0;
        tramp_inject(uc, rnicsim_tramp_preempt, 0);
    } else {
        /* a computing loop: look again only after a while */
        g->backoff = g->backoff ? 2 * g->backoff : 1;
        if (g->backoff > SPIN_MAX_BACKOFF)
            g->backoff = SPIN_MAX_BACKOFF;
        g->skip = g->backoff;
    }
}

/* SIGTRAP after one single-stepped instruction of a candidate loop: it is
 * a spin if it comes back to where it started with every register as it
 * was -- one whole iteration changed nothing, so it only re-reads memory
 * that nothing can change while it runs -- without calling anything. */
static void step_trap(struct posix_guard *g, ucontext_t *uc)
{
    struct posix_thread *t = posix_self();
    uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
    g->steps++;
    if (t != g->step_t || !in_program(t, pc) || t->ht->entries != g->step_entries ||
        g->steps > SPIN_MAX_STEPS) {
        step_stop(g, uc, false);
        return;
    }
    if (pc == (uintptr_t)g->step_regs[REG_RIP])
        step_stop(g, uc, same_state(g, uc));
}
#endif

/* The tick: a program that made no call into the simulator since the
 * previous tick and is in its own code is a candidate; it is then
 * single-stepped (the trap flag) through one iteration of its loop
 * (step_trap).  Spins are recognised by what the loop does, not by when
 * the tick came, so the simulated outcome does not depend on real time;
 * a computing loop is left alone (the watchdog reports it if it runs for
 * too long). */
static void preempt_handler(int sig, siginfo_t *si, void *ctx)
{
    (void)sig;
    (void)si;
    struct posix_world *w = guarded;
    if (!w || !w->guard)
        return;
    struct posix_guard *g = w->guard;
#if defined(__x86_64__)
    ucontext_t *uc = ctx;
    struct posix_thread *t = posix_self();
    uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
    if (g->stepping || !g->tramp)
        return;
    if (!t || !in_program(t, pc)) {
        g->tick_t = NULL;
        return;
    }
    uint64_t entries = t->ht->entries;
    bool candidate = g->tick_t == t && g->tick_entries == entries;
    g->tick_t = t;
    g->tick_entries = entries;
    if (g->preempt_always) {
        tramp_inject(uc, rnicsim_tramp_preempt, 0);
        return;
    }
    if (!candidate)
        return;
    if (g->skip) {
        g->skip--;
        return;
    }
    g->stepping = true;
    g->steps = 0;
    g->step_t = t;
    g->step_entries = entries;
    memcpy(g->step_regs, uc->uc_mcontext.gregs, sizeof(g->step_regs));
    if (uc->uc_mcontext.fpregs)
        memcpy(g->step_xmm, uc->uc_mcontext.fpregs->_xmm, sizeof(g->step_xmm));
    uc->uc_mcontext.gregs[REG_EFL] |= EFLAGS_TF;
#else
    (void)ctx;
#endif
}

void posix_report_spinners(struct posix_world *w, FILE *out)
{
    bool any = false;
    for (struct posix_prog *p = w->progs; p; p = p->next)
        for (struct posix_thread *t = p->threads; t; t = t->next) {
            if (!t->spinning || t->finished)
                continue;
            char where[512] = "";
            uintptr_t off = t->spin_pc - p->base;
            if (!addr2line(p->so_path, &off, 1, where, sizeof(where)))
                where[0] = '\0';
            char *nl = strchr(where, '\n');
            if (nl)
                *nl = '\0';
            fprintf(out,
                    "rnicsim: %s spins at %s+0x%lx%s%s, re-reading memory of %s that nothing "
                    "will write any more\n",
                    p->label, p->so_path, (unsigned long)off, *where ? ": " : "", where,
                    p->host->name);
            any = true;
        }
    if (any)
        fprintf(out, "rnicsim: (such a loop was parked when it made no progress; it waits for a "
                     "DMA write, a completion or another thread of its host that never comes)\n");
}

bool posix_wake_spinners(struct posix_world *w)
{
    bool woke = false;
    for (struct posix_prog *p = w->progs; p; p = p->next)
        for (struct posix_thread *t = p->threads; t; t = t->next) {
            if (!t->spinning || t->finished || !t->proc)
                continue;
            uint64_t gen = p->host->activity_gen;
            if (t->spin_woken && t->spin_woken_gen == gen)
                continue; /* it spun again with nothing changed: it waits forever */
            t->spin_woken = true;
            t->spin_woken_gen = gen;
            if (sim_proc_interrupt(t->proc))
                woke = true;
        }
    return woke;
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
    /* The handlers do not interrupt one another: a watchdog signal that
     * came while a single step (SIGTRAP) or an rdtsc (SIGSEGV) was being
     * handled is taken when the program is back in its own code, so its
     * report shows where the program is, never the handler. */
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, wd_signal());
    sigaddset(&sa.sa_mask, preempt_signal());
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
    g->tramp = xsave_setup();
    int mode = 0;
    if (prctl(PR_GET_TSC, &mode, 0, 0, 0) == 0 && prctl(PR_SET_TSC, PR_TSC_SIGSEGV, 0, 0, 0) == 0) {
        g->old_tsc_mode = mode;
        g->tsc_trap = true;
    }
    /* RNICSIM_PREEMPT=0 turns the spin preemption off, =always makes every
     * tick in a program's code preempt it (a test of the trampoline) */
    const char *pe = getenv("RNICSIM_PREEMPT");
    g->preempt_always = pe && !strcmp(pe, "always");
    if (g->tramp && !(pe && !strcmp(pe, "0"))) {
        sa.sa_sigaction = preempt_handler;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
        sigaction(preempt_signal(), &sa, &g->old_preempt);
        struct sigevent sev;
        memset(&sev, 0, sizeof(sev));
        sev.sigev_notify = SIGEV_THREAD_ID;
        sev.sigev_signo = preempt_signal();
        sev._sigev_un._tid = gettid();
        /* CLOCK_MONOTONIC, not the thread's CPU clock: CPU-time timers
         * only fire at scheduler ticks (1-4 ms) */
        if (timer_create(CLOCK_MONOTONIC, &sev, &g->preempt) == 0) {
            struct itimerspec its = {.it_value = {0, PREEMPT_TICK_NS},
                                     .it_interval = {0, PREEMPT_TICK_NS}};
            timer_settime(g->preempt, 0, &its, NULL);
            g->preempt_on = true;
        }
    }
#endif
}

void posix_guard_stop(struct posix_world *w)
{
    struct posix_guard *g = w->guard;
    if (!g)
        return;
    if (g->preempt_on) {
        timer_delete(g->preempt);
        sigaction(preempt_signal(), &g->old_preempt, NULL);
    }
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
