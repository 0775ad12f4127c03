/* pthreads of a simulated program: simulated threads of its host.
 *
 * pthread_create starts a process on the program's host through
 * host_thread_start (the mechanism of <rnicsim/host.h>), so it shares the
 * host's CPU model and the program's address space; pthread_join waits
 * for it in simulated time.  A pthread_t is the address of the thread's
 * record.  Mutexes, condition variables, spin locks, read-write locks,
 * barriers and pthread_once are simulated objects found by the address of
 * the program's pthread_* object (a table per run): blocking on one parks
 * the simulated thread, never the real one, and waiters are served in the
 * order they came.  A lock costs host.cpu.lock of CPU time (so a loop that
 * spins on a lock lets time pass and the other threads run); timed waits
 * (pthread_cond_timedwait, pthread_mutex_timedlock) use the simulated
 * clocks.  CPU affinity calls succeed and change nothing (the scenario
 * places programs on hosts); pthread_cancel is refused. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "posix/posix_priv.h"
#include "rnicsim/host.h"

/* ---------------------------------------------------------------- the address table */

static size_t ptr_hash(const void *p, size_t cap)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t)x & (cap - 1);
}

static void *ptr_map_get(const struct ptr_map *m, const void *key)
{
    if (!m->cap)
        return NULL;
    for (size_t i = ptr_hash(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (m->keys[i] == key)
            return m->vals[i];
        if (!m->keys[i])
            return NULL;
    }
}

static int ptr_map_put(struct ptr_map *m, const void *key, void *val);

static int ptr_map_grow(struct ptr_map *m)
{
    struct ptr_map n = {.cap = m->cap ? 2 * m->cap : 64};
    n.keys = calloc(n.cap, sizeof(*n.keys));
    n.vals = calloc(n.cap, sizeof(*n.vals));
    if (!n.keys || !n.vals) {
        free(n.keys);
        free(n.vals);
        return ENOMEM;
    }
    for (size_t i = 0; i < m->cap; i++)
        if (m->keys[i] && m->keys[i] != (void *)m) /* skip tombstones */
            ptr_map_put(&n, m->keys[i], m->vals[i]);
    free(m->keys);
    free(m->vals);
    *m = n;
    return 0;
}

static int ptr_map_put(struct ptr_map *m, const void *key, void *val)
{
    if ((m->n + 1) * 4 > m->cap * 3 && ptr_map_grow(m))
        return ENOMEM;
    size_t i = ptr_hash(key, m->cap);
    while (m->keys[i] && m->keys[i] != key && m->keys[i] != (void *)m)
        i = (i + 1) & (m->cap - 1);
    if (m->keys[i] != key)
        m->n++;
    m->keys[i] = key;
    m->vals[i] = val;
    return 0;
}

/* Removal leaves a tombstone (the map's own address) so probes go on. */
static void *ptr_map_del(struct ptr_map *m, const void *key)
{
    if (!m->cap)
        return NULL;
    for (size_t i = ptr_hash(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (m->keys[i] == key) {
            void *v = m->vals[i];
            m->keys[i] = m;
            m->vals[i] = NULL;
            return v;
        }
        if (!m->keys[i])
            return NULL;
    }
}

void ptr_map_free(struct ptr_map *m)
{
    for (size_t i = 0; i < m->cap; i++)
        if (m->keys[i] && m->keys[i] != (void *)m)
            free(m->vals[i]);
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof(*m));
}

void posix_sync_free(struct posix_world *w)
{
    ptr_map_free(&w->mutexes);
    ptr_map_free(&w->conds);
}

/* ---------------------------------------------------------------- threads */

static void thread_main(void *arg)
{
    struct posix_thread *t = arg;
    if (t->prog->ended) { /* the program exited before this thread ran */
        t->finished = true;
        return;
    }
    posix_thread_attach(t->prog, t);
    if (setjmp(t->base) == 0)
        t->retval = t->start(t->arg);
    t->finished = true;
}

/* Plug-ins reach this through tools/rnicsim_plugin_glue.c (libgcc.a has a
 * __wrap_pthread_create of its own that the linker would pick). */
int rnicsim_pthread_create(pthread_t *id, const pthread_attr_t *attr, void *(*start)(void *),
                           void *arg);
int rnicsim_pthread_create(pthread_t *id, const pthread_attr_t *attr, void *(*start)(void *),
                           void *arg)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return pthread_create(id, attr, start, arg);
    host_note_call();
    host_charge(t->prog->host->cpu.syscall_ps);
    if (t->prog->exiting)
        return EAGAIN;
    struct posix_thread *n = calloc(1, sizeof(*n));
    if (!n)
        return EAGAIN;
    n->prog = t->prog;
    n->start = start;
    n->arg = arg;
    int detach = PTHREAD_CREATE_JOINABLE;
    if (attr)
        pthread_attr_getdetachstate(attr, &detach);
    n->detached = detach == PTHREAD_CREATE_DETACHED;
    n->handle = host_thread_start(thread_main, n);
    if (n->handle < 0) {
        free(n);
        return EAGAIN;
    }
    /* listed now (an exit() before it first runs must see it); its
     * process is attached when it starts (thread_main) */
    n->next = t->prog->threads;
    t->prog->threads = n;
    *id = (pthread_t)(uintptr_t)n;
    return 0;
}

/* Exported under the --wrap name too, so that rnicsim-cc's list of
 * redirected symbols (the __wrap_ exports) includes pthread_create. */
int __wrap_pthread_create(pthread_t *id, const pthread_attr_t *attr, void *(*start)(void *),
                          void *arg);
int __wrap_pthread_create(pthread_t *id, const pthread_attr_t *attr, void *(*start)(void *),
                          void *arg)
{
    return rnicsim_pthread_create(id, attr, start, arg);
}

int __wrap_pthread_join(pthread_t id, void **ret);
int __wrap_pthread_join(pthread_t id, void **ret)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return pthread_join(id, ret);
    host_note_call();
    struct posix_thread *u = (struct posix_thread *)(uintptr_t)id;
    if (!u || u->prog != t->prog || u->handle < 0)
        return u == t->prog->main ? EINVAL : ESRCH;
    if (u == t)
        return EDEADLK;
    if (u->detached || u->joined)
        return EINVAL;
    u->joined = true;
    host_thread_join(u->handle);
    if (ret)
        *ret = u->retval;
    return 0;
}

int __wrap_pthread_detach(pthread_t id);
int __wrap_pthread_detach(pthread_t id)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return pthread_detach(id);
    struct posix_thread *u = (struct posix_thread *)(uintptr_t)id;
    if (!u || u->prog != t->prog)
        return ESRCH;
    if (u->detached)
        return EINVAL;
    u->detached = true;
    return 0;
}

_Noreturn void __wrap_pthread_exit(void *ret);
_Noreturn void __wrap_pthread_exit(void *ret)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        pthread_exit(ret);
    if (t == t->prog->main) {
        /* the process lives on until its other threads end, then exits 0 */
        struct posix_prog *p = t->prog;
        for (struct posix_thread *u = p->threads; u; u = u->next)
            if (u != t && u->handle >= 0 && !u->finished)
                host_thread_join(u->handle);
        posix_prog_exit(t, 0, true);
    }
    t->retval = ret;
    longjmp(t->base, 1);
}

pthread_t __wrap_pthread_self(void);
pthread_t __wrap_pthread_self(void)
{
    struct posix_thread *t = posix_enter();
    return t ? (pthread_t)(uintptr_t)t : pthread_self();
}

int __wrap_pthread_cancel(pthread_t id);
int __wrap_pthread_cancel(pthread_t id)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return pthread_cancel(id);
    posix_refuse(t, ENOSYS, "pthread_cancel() refused: cancellation is not simulated");
    return ENOSYS;
}

int __wrap_pthread_setaffinity_np(pthread_t id, size_t size, const cpu_set_t *set);
int __wrap_pthread_setaffinity_np(pthread_t id, size_t size, const cpu_set_t *set)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return pthread_setaffinity_np(id, size, set);
    return 0;
}

int __wrap_sched_setaffinity(pid_t pid, size_t size, const cpu_set_t *set);
int __wrap_sched_setaffinity(pid_t pid, size_t size, const cpu_set_t *set)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return sched_setaffinity(pid, size, set);
    return 0;
}

int __wrap_pthread_setname_np(pthread_t id, const char *name);
int __wrap_pthread_setname_np(pthread_t id, const char *name)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return pthread_setname_np(id, name);
    return 0;
}

/* ---------------------------------------------------------------- mutexes */

struct smutex {
    struct posix_thread *owner;
    unsigned count;
    int type; /* PTHREAD_MUTEX_NORMAL / RECURSIVE / ERRORCHECK */
    struct sim_waitq wq;
};

/* The simulated mutex of `key` (a pthread_mutex_t, or a spin lock when
 * `m` is NULL). */
static struct smutex *lock_get(struct posix_thread *t, const void *key, pthread_mutex_t *m,
                               bool create)
{
    struct posix_world *w = t->prog->w;
    struct smutex *x = ptr_map_get(&w->mutexes, key);
    if (x || !create)
        return x;
    x = calloc(1, sizeof(*x));
    if (!x)
        return NULL;
    /* a statically initialised mutex carries its kind in __data.__kind */
    int kind = m ? m->__data.__kind & 3 : PTHREAD_MUTEX_NORMAL;
    x->type = kind == PTHREAD_MUTEX_RECURSIVE || kind == PTHREAD_MUTEX_ERRORCHECK
                  ? kind
                  : PTHREAD_MUTEX_NORMAL;
    sim_waitq_init(&x->wq, "pthread_mutex_lock");
    if (ptr_map_put(&w->mutexes, key, x)) {
        free(x);
        return NULL;
    }
    return x;
}

static struct smutex *mutex_get(struct posix_thread *t, pthread_mutex_t *m, bool create)
{
    return lock_get(t, m, m, create);
}

int __wrap_pthread_mutex_init(pthread_mutex_t *m, const pthread_mutexattr_t *attr);
int __wrap_pthread_mutex_init(pthread_mutex_t *m, const pthread_mutexattr_t *attr)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return pthread_mutex_init(m, attr);
    int type = PTHREAD_MUTEX_NORMAL;
    if (attr)
        pthread_mutexattr_gettype(attr, &type);
    pthread_mutex_init(m, attr); /* the program may look at it */
    free(ptr_map_del(&t->prog->w->mutexes, m));
    struct smutex *x = mutex_get(t, m, true);
    if (!x)
        return ENOMEM;
    x->type = type == PTHREAD_MUTEX_RECURSIVE || type == PTHREAD_MUTEX_ERRORCHECK
                  ? type
                  : PTHREAD_MUTEX_NORMAL;
    return 0;
}

int __wrap_pthread_mutex_destroy(pthread_mutex_t *m);
int __wrap_pthread_mutex_destroy(pthread_mutex_t *m)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return pthread_mutex_destroy(m);
    struct smutex *x = mutex_get(t, m, false);
    if (x && (x->owner || !sim_waitq_empty(&x->wq)))
        return EBUSY;
    free(ptr_map_del(&t->prog->w->mutexes, m));
    return 0;
}

/* Lock `m` for `t`, waiting until `deadline`: 0, EDEADLK, ETIMEDOUT,
 * ENOMEM. */
static int lock_take(struct posix_thread *t, struct smutex *x, sim_time_t deadline)
{
    if (!x)
        return ENOMEM;
    host_charge_soon(t->prog->host->cpu.lock_ps);
    if (x->owner == t) {
        if (x->type == PTHREAD_MUTEX_RECURSIVE) {
            x->count++;
            return 0;
        }
        if (x->type == PTHREAD_MUTEX_ERRORCHECK)
            return EDEADLK;
        /* a normal mutex locked twice by its owner waits forever: the run
         * ends as a deadlock naming it */
    }
    while (x->owner) {
        host_note_call();
        int rc = posix_wait(t, &x->wq, deadline, "pthread_mutex_lock()");
        if (rc == ETIMEDOUT)
            return ETIMEDOUT;
        if (rc == EINTR)
            posix_deliver_signals(t);
    }
    x->owner = t;
    x->count = 1;
    return 0;
}

static int mutex_lock(struct posix_thread *t, pthread_mutex_t *m, sim_time_t deadline)
{
    return lock_take(t, mutex_get(t, m, true), deadline);
}

int __wrap_pthread_mutex_lock(pthread_mutex_t *m);
int __wrap_pthread_mutex_lock(pthread_mutex_t *m)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return pthread_mutex_lock(m);
    return mutex_lock(t, m, SIM_TIME_NEVER);
}

int __wrap_pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *abs);
int __wrap_pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *abs)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return pthread_mutex_timedlock(m, abs);
    sim_time_t d;
    if (!abs || abs->tv_nsec < 0 || abs->tv_nsec >= 1000000000L ||
        posix_clock_deadline(CLOCK_REALTIME, abs, &d))
        return EINVAL;
    return mutex_lock(t, m, d);
}

int __wrap_pthread_mutex_trylock(pthread_mutex_t *m);
int __wrap_pthread_mutex_trylock(pthread_mutex_t *m)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return pthread_mutex_trylock(m);
    struct smutex *x = mutex_get(t, m, true);
    if (!x)
        return ENOMEM;
    host_charge_soon(t->prog->host->cpu.lock_ps);
    if (x->owner == t && x->type == PTHREAD_MUTEX_RECURSIVE) {
        x->count++;
        return 0;
    }
    if (x->owner)
        return EBUSY;
    x->owner = t;
    x->count = 1;
    return 0;
}

static int lock_give(struct posix_thread *t, struct smutex *x)
{
    if (!x)
        return ENOMEM;
    if (x->owner != t)
        return x->type == PTHREAD_MUTEX_NORMAL && !x->owner ? 0 : EPERM;
    if (--x->count)
        return 0;
    x->owner = NULL;
    if (!sim_waitq_empty(&x->wq))
        sim_waitq_wake_one(t->prog->w->sim, &x->wq);
    return 0;
}

static int mutex_unlock(struct posix_thread *t, pthread_mutex_t *m)
{
    return lock_give(t, mutex_get(t, m, true));
}

int __wrap_pthread_mutex_unlock(pthread_mutex_t *m);
int __wrap_pthread_mutex_unlock(pthread_mutex_t *m)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return pthread_mutex_unlock(m);
    return mutex_unlock(t, m);
}

/* ---------------------------------------------------------------- condition variables */

struct scond {
    clockid_t clock;
    struct sim_waitq wq;
};

static struct scond *cond_get(struct posix_thread *t, pthread_cond_t *c)
{
    struct posix_world *w = t->prog->w;
    struct scond *x = ptr_map_get(&w->conds, c);
    if (x)
        return x;
    x = calloc(1, sizeof(*x));
    if (!x)
        return NULL;
    x->clock = CLOCK_REALTIME;
    sim_waitq_init(&x->wq, "pthread_cond_wait");
    if (ptr_map_put(&w->conds, c, x)) {
        free(x);
        return NULL;
    }
    return x;
}

int __wrap_pthread_cond_init(pthread_cond_t *c, const pthread_condattr_t *attr);
int __wrap_pthread_cond_init(pthread_cond_t *c, const pthread_condattr_t *attr)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return pthread_cond_init(c, attr);
    pthread_cond_init(c, attr);
    free(ptr_map_del(&t->prog->w->conds, c));
    struct scond *x = cond_get(t, c);
    if (!x)
        return ENOMEM;
    if (attr)
        pthread_condattr_getclock(attr, &x->clock);
    return 0;
}

int __wrap_pthread_cond_destroy(pthread_cond_t *c);
int __wrap_pthread_cond_destroy(pthread_cond_t *c)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return pthread_cond_destroy(c);
    struct scond *x = ptr_map_get(&t->prog->w->conds, c);
    if (x && !sim_waitq_empty(&x->wq))
        return EBUSY;
    free(ptr_map_del(&t->prog->w->conds, c));
    return 0;
}

static int cond_wait(struct posix_thread *t, pthread_cond_t *c, pthread_mutex_t *m,
                     const struct timespec *abs)
{
    struct scond *x = cond_get(t, c);
    if (!x)
        return ENOMEM;
    sim_time_t deadline = SIM_TIME_NEVER;
    if (abs && (abs->tv_nsec < 0 || abs->tv_nsec >= 1000000000L ||
                posix_clock_deadline(x->clock, abs, &deadline)))
        return EINVAL;
    int rc = mutex_unlock(t, m);
    if (rc)
        return rc;
    host_note_call();
    rc = 0;
    /* a signal handler runs, then the wait goes on (as POSIX allows) */
    for (;;) {
        int w = posix_wait(t, &x->wq, deadline, "pthread_cond_wait()");
        if (w == EINTR) {
            posix_deliver_signals(t);
            continue;
        }
        rc = w == ETIMEDOUT ? ETIMEDOUT : 0;
        break;
    }
    int lr = mutex_lock(t, m, SIM_TIME_NEVER);
    return lr ? lr : rc;
}

int __wrap_pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m);
int __wrap_pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return pthread_cond_wait(c, m);
    return cond_wait(t, c, m, NULL);
}

int __wrap_pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m,
                                  const struct timespec *abs);
int __wrap_pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *abs)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return pthread_cond_timedwait(c, m, abs);
    if (!abs)
        return EINVAL;
    return cond_wait(t, c, m, abs);
}

int __wrap_pthread_cond_signal(pthread_cond_t *c);
int __wrap_pthread_cond_signal(pthread_cond_t *c)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return pthread_cond_signal(c);
    struct scond *x = cond_get(t, c);
    if (x && !sim_waitq_empty(&x->wq))
        sim_waitq_wake_one(t->prog->w->sim, &x->wq);
    return 0;
}

int __wrap_pthread_cond_broadcast(pthread_cond_t *c);
int __wrap_pthread_cond_broadcast(pthread_cond_t *c)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return pthread_cond_broadcast(c);
    struct scond *x = cond_get(t, c);
    if (x && !sim_waitq_empty(&x->wq))
        sim_waitq_wake_all(t->prog->w->sim, &x->wq);
    return 0;
}

/* ---------------------------------------------------------------- spin locks, once */

/* pthread_spinlock_t is a volatile int: its address is only a key here */
static const void *spin_key(pthread_spinlock_t *l)
{
    return (const void *)(uintptr_t)l;
}

/* A spin lock is a mutex that charges its spinning as CPU time: waiting
 * for it parks like any simulated wait. */
int __wrap_pthread_spin_init(pthread_spinlock_t *l, int pshared);
int __wrap_pthread_spin_init(pthread_spinlock_t *l, int pshared)
{
    (void)pshared;
    struct posix_thread *t = posix_enter();
    if (!t)
        return pthread_spin_init(l, pshared);
    *l = 0;
    return 0;
}

int __wrap_pthread_spin_destroy(pthread_spinlock_t *l);
int __wrap_pthread_spin_destroy(pthread_spinlock_t *l)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return pthread_spin_destroy(l);
    struct smutex *x = lock_get(t, spin_key(l), NULL, false);
    if (x && x->owner)
        return EBUSY;
    free(ptr_map_del(&t->prog->w->mutexes, spin_key(l)));
    return 0;
}

int __wrap_pthread_spin_lock(pthread_spinlock_t *l);
int __wrap_pthread_spin_lock(pthread_spinlock_t *l)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return pthread_spin_lock(l);
    return lock_take(t, lock_get(t, spin_key(l), NULL, true), SIM_TIME_NEVER);
}

int __wrap_pthread_spin_trylock(pthread_spinlock_t *l);
int __wrap_pthread_spin_trylock(pthread_spinlock_t *l)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return pthread_spin_trylock(l);
    struct smutex *x = lock_get(t, spin_key(l), NULL, true);
    if (!x)
        return ENOMEM;
    host_charge_soon(t->prog->host->cpu.lock_ps);
    if (x->owner)
        return EBUSY;
    x->owner = t;
    x->count = 1;
    return 0;
}

int __wrap_pthread_spin_unlock(pthread_spinlock_t *l);
int __wrap_pthread_spin_unlock(pthread_spinlock_t *l)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return pthread_spin_unlock(l);
    return lock_give(t, lock_get(t, spin_key(l), NULL, true));
}

/* pthread_once: 0 not run, 1 running (others wait), 2 done. */
int __wrap_pthread_once(pthread_once_t *once, void (*fn)(void));
int __wrap_pthread_once(pthread_once_t *once, void (*fn)(void))
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return pthread_once(once, fn);
    while (*once == 1) {
        host_note_call();
        host_charge(t->prog->host->cpu.syscall_ps); /* a futex wait, in effect */
    }
    if (*once == 0) {
        *once = 1;
        fn();
        *once = 2;
    }
    return 0;
}
