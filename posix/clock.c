/* Simulated clocks and sleeping.
 *
 *   CLOCK_REALTIME (and gettimeofday, time)   POSIX_EPOCH_S + simulated time
 *   CLOCK_MONOTONIC, _RAW, _COARSE, BOOTTIME   POSIX_BOOT_S + simulated time
 *   CLOCK_PROCESS/THREAD_CPUTIME_ID, clock()   simulated time since the
 *                                              program started
 *   the x86 TSC (rdtsc, trapped in guard.c)    (POSIX_BOOT_S + simulated
 *                                              time) x the "cpu MHz" of
 *                                              /proc/cpuinfo
 *
 * A clock read costs host.cpu.clock_read (an rdtsc host.cpu.tsc_read) of
 * the program's CPU time, accounted with host_charge_soon: a loop that
 * waits for the clock to pass a value advances simulated time without a
 * context switch per read, and still lets every event that falls inside
 * the loop happen in order.  Sleeps (sleep, usleep, nanosleep,
 * clock_nanosleep) park the thread until the simulated deadline; a
 * simulated signal interrupts them (EINTR and the time left, as the
 * kernel). */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "posix/posix_priv.h"

sim_time_t posix_now_ps(void)
{
    return host_now_ps();
}

uint64_t posix_read_tsc_khz(void)
{
    /* What perftest's get_cpu_mhz() reads: the first "cpu MHz" line. */
    FILE *f = fopen("/proc/cpuinfo", "re");
    uint64_t khz = 0;
    if (f) {
        char line[256];
        while (fgets(line, sizeof(line), f)) {
            double mhz;
            if (sscanf(line, "cpu MHz : %lf", &mhz) == 1 && mhz > 0) {
                khz = (uint64_t)(mhz * 1000.0 + 0.5);
                break;
            }
        }
        fclose(f);
    }
    return khz ? khz : 2000000; /* no "cpu MHz" line: 2 GHz */
}

uint64_t posix_tsc_now(struct posix_world *w)
{
    __extension__ typedef unsigned __int128 u128;
    sim_time_t t = (sim_time_t)POSIX_BOOT_S * SIM_S + posix_now_ps();
    return (uint64_t)((u128)t * w->tsc_khz / 1000000000u);
}

static void ps_to_ts(sim_time_t ps, struct timespec *ts)
{
    ts->tv_sec = (time_t)(ps / SIM_S);
    ts->tv_nsec = (long)(ps % SIM_S / SIM_NS);
}

/* The value of clock `clk` at simulated time `now`: 0, or EINVAL. */
static int clock_value(const struct posix_thread *t, clockid_t clk, sim_time_t now, sim_time_t *out)
{
    switch (clk) {
    case CLOCK_REALTIME:
    case CLOCK_REALTIME_COARSE:
    case CLOCK_TAI:
        *out = (sim_time_t)POSIX_EPOCH_S * SIM_S + now;
        return 0;
    case CLOCK_MONOTONIC:
    case CLOCK_MONOTONIC_RAW:
    case CLOCK_MONOTONIC_COARSE:
    case CLOCK_BOOTTIME:
        *out = (sim_time_t)POSIX_BOOT_S * SIM_S + now;
        return 0;
    case CLOCK_PROCESS_CPUTIME_ID:
    case CLOCK_THREAD_CPUTIME_ID:
        *out = now - (t ? t->prog->start_ps : 0);
        return 0;
    default:
        return EINVAL;
    }
}

int posix_clock_deadline(clockid_t clk, const struct timespec *ts, sim_time_t *out)
{
    sim_time_t zero;
    if (clock_value(posix_self(), clk, 0, &zero))
        return EINVAL;
    sim_time_t abs = (sim_time_t)ts->tv_sec * SIM_S + (sim_time_t)ts->tv_nsec * SIM_NS;
    *out = abs > zero ? abs - zero : 0;
    return 0;
}

static sim_time_t read_clock(struct posix_thread *t)
{
    host_charge_soon(t->prog->host->cpu.clock_read_ps);
    return posix_now_ps();
}

int __wrap_clock_gettime(clockid_t clk, struct timespec *ts);
int __wrap_clock_gettime(clockid_t clk, struct timespec *ts)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return clock_gettime(clk, ts);
    sim_time_t v;
    if (clock_value(t, clk, 0, &v)) {
        errno = EINVAL;
        return -1;
    }
    if (clock_value(t, clk, read_clock(t), &v) == 0)
        ps_to_ts(v, ts);
    return 0;
}

int __wrap_clock_getres(clockid_t clk, struct timespec *res);
int __wrap_clock_getres(clockid_t clk, struct timespec *res)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return clock_getres(clk, res);
    sim_time_t v;
    if (clock_value(t, clk, 0, &v)) {
        errno = EINVAL;
        return -1;
    }
    if (res) {
        res->tv_sec = 0;
        res->tv_nsec = 1;
    }
    return 0;
}

int __wrap_gettimeofday(struct timeval *tv, void *tz);
int __wrap_gettimeofday(struct timeval *tv, void *tz)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return gettimeofday(tv, tz);
    sim_time_t v = (sim_time_t)POSIX_EPOCH_S * SIM_S + read_clock(t);
    if (tv) {
        tv->tv_sec = (time_t)(v / SIM_S);
        tv->tv_usec = (suseconds_t)(v % SIM_S / SIM_US);
    }
    if (tz)
        memset(tz, 0, sizeof(struct timezone)); /* UTC */
    return 0;
}

time_t __wrap_time(time_t *out);
time_t __wrap_time(time_t *out)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return time(out);
    time_t v = (time_t)(POSIX_EPOCH_S + (long long)(read_clock(t) / SIM_S));
    if (out)
        *out = v;
    return v;
}

clock_t __wrap_clock(void);
clock_t __wrap_clock(void)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return clock();
    sim_time_t cpu = read_clock(t) - t->prog->start_ps;
    return (clock_t)(cpu / (SIM_S / CLOCKS_PER_SEC));
}

/* ---------------------------------------------------------------- sleeping */

/* Sleep until `deadline`: 0, or EINTR (a simulated signal) with the time
 * left in *left. */
static int sleep_until(struct posix_thread *t, sim_time_t deadline, sim_time_t *left,
                       const char *why)
{
    host_note_call();
    host_charge(t->prog->host->cpu.syscall_ps);
    int rc = 0;
    while (sim_now(t->prog->w->sim) < deadline) {
        rc = posix_wait(t, &t->sleep_wq, deadline, why);
        if (rc == EINTR)
            break;
        rc = 0;
    }
    sim_time_t now = sim_now(t->prog->w->sim);
    if (left)
        *left = rc == EINTR && deadline > now ? deadline - now : 0;
    if (rc == EINTR)
        posix_deliver_signals(t);
    return rc;
}

static bool ts_valid(const struct timespec *ts)
{
    return ts && ts->tv_nsec >= 0 && ts->tv_nsec < 1000000000L && ts->tv_sec >= 0;
}

static sim_time_t ts_ps(const struct timespec *ts)
{
    sim_time_t s = (sim_time_t)ts->tv_sec;
    if (s > SIM_TIME_NEVER / SIM_S / 2)
        return SIM_TIME_NEVER / 2; /* "forever" without overflowing */
    return s * SIM_S + (sim_time_t)ts->tv_nsec * SIM_NS;
}

int __wrap_nanosleep(const struct timespec *req, struct timespec *rem);
int __wrap_nanosleep(const struct timespec *req, struct timespec *rem)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return nanosleep(req, rem);
    if (!ts_valid(req)) {
        errno = EINVAL;
        return -1;
    }
    char why[64];
    snprintf(why, sizeof(why), "nanosleep(%lld.%09ld s)", (long long)req->tv_sec, req->tv_nsec);
    sim_time_t left;
    if (sleep_until(t, posix_now_ps() + ts_ps(req), &left, why) == EINTR) {
        if (rem)
            ps_to_ts(left, rem);
        errno = EINTR;
        return -1;
    }
    return 0;
}

int __wrap_clock_nanosleep(clockid_t clk, int flags, const struct timespec *req,
                           struct timespec *rem);
int __wrap_clock_nanosleep(clockid_t clk, int flags, const struct timespec *req,
                           struct timespec *rem)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return clock_nanosleep(clk, flags, req, rem);
    sim_time_t v;
    if (!ts_valid(req) || clock_value(t, clk, 0, &v) || clk == CLOCK_THREAD_CPUTIME_ID)
        return EINVAL;
    sim_time_t deadline;
    if (flags & TIMER_ABSTIME) {
        if (posix_clock_deadline(clk, req, &deadline))
            return EINVAL;
        if (clk == CLOCK_PROCESS_CPUTIME_ID)
            deadline += t->prog->start_ps;
    } else {
        deadline = posix_now_ps() + ts_ps(req);
    }
    sim_time_t left;
    if (sleep_until(t, deadline, &left, "clock_nanosleep()") == EINTR) {
        if (rem && !(flags & TIMER_ABSTIME))
            ps_to_ts(left, rem);
        return EINTR;
    }
    return 0;
}

unsigned __wrap_sleep(unsigned seconds);
unsigned __wrap_sleep(unsigned seconds)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return sleep(seconds);
    char why[48];
    snprintf(why, sizeof(why), "sleep(%u)", seconds);
    sim_time_t left;
    if (sleep_until(t, posix_now_ps() + (sim_time_t)seconds * SIM_S, &left, why) == EINTR)
        return (unsigned)((left + SIM_S - 1) / SIM_S);
    return 0;
}

int __wrap_usleep(useconds_t usec);
int __wrap_usleep(useconds_t usec)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return usleep(usec);
    char why[48];
    snprintf(why, sizeof(why), "usleep(%u)", (unsigned)usec);
    if (sleep_until(t, posix_now_ps() + (sim_time_t)usec * SIM_US, NULL, why) == EINTR) {
        errno = EINTR;
        return -1;
    }
    return 0;
}

/* sched_yield: a system call's worth of CPU time, which lets the other
 * processes of this instant run first. */
int __wrap_sched_yield(void);
int __wrap_sched_yield(void)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return sched_yield();
    host_note_call();
    host_charge(t->prog->host->cpu.syscall_ps);
    return 0;
}
